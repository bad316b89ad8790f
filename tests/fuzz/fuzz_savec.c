/* libFuzzer entry point for the decoder of a secure sum (sfl/crypto/savec.h:
 * sfl_sa_dequantize, sfl_sa_metrics_decode), what the coordinator reads
 * back from the unmasked sum of its members' inputs before folding it
 * (issue 23: the sum is checked against what clipped inputs of the public
 * weights can reach).
 *
 * Input: byte 0 picks count (1..8), byte 1 k (0..31), byte 2 the clip,
 * bytes 3..3+count the members' public weights (some above w_max, so
 * capped), byte 3+count whether the canary is forced right; the rest are
 * the sum's k + 1 + SFL_SA_METRIC_WORDS words, little-endian (0 past the
 * end).
 *
 * Beyond "no crash": a sum that decodes has its divisor equal to the sum
 * of the public rho, never anything the words hold, and every coordinate of
 * the mean within clip (plus count rounding steps); a refused one says why
 * (canary, or out of bounds); decoded metrics are finite and >= 0. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/error.h"
#include "sfl/crypto/savec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KMAX 31
#define NMAX 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const double clips[4] = {1.0, 0.5, 100.0, 3e-4};
    uint32_t sum[KMAX + 1 + SFL_SA_METRIC_WORDS] = {0};
    double w[NMAX], mean[KMAX], m[SFL_SA_METRICS], wsum = -1, rsum = 0;
    sfl_sa_quant_t q;
    size_t at;

    if (size < 4)
        return 0;
    uint32_t count = 1 + data[0] % NMAX, k = data[1] % (KMAX + 1);
    double clip = clips[data[2] % 4];
    if (size < 4 + (size_t)count)
        return 0;
    if (sfl_sa_quant_init(&q, clip, 10.0, NMAX) != 0)
        abort();
    for (uint32_t u = 0; u < count; u++) {
        w[u] = 0.5 + data[3 + u] % 24; /* 0.5 .. 23.5 of w_max 10 */
        rsum += sfl_sa_rho(&q, w[u]);
    }
    int canary_ok = data[3 + count] & 1;
    at = 4 + count;
    for (uint32_t i = 0; i < k + 1 + SFL_SA_METRIC_WORDS && at < size; i++)
        for (int b = 0; b < 4 && at < size; b++)
            sum[i] |= (uint32_t)data[at++] << (8 * b);
    if (canary_ok)
        sum[k] = count;

    int rc = sfl_sa_dequantize(&q, sum, k, count, w, mean, &wsum);
    if (rc == 0) {
        double lim = clip + count * ldexp(1.0, -q.frac) / rsum;

        if (sum[k] != count || wsum != rsum)
            abort();
        for (uint32_t i = 0; i < k; i++)
            if (!(fabs(mean[i]) <= lim * (1 + 1e-12))) {
                fprintf(stderr, "fuzz_savec: slot %u: %g beyond %g\n", i, mean[i], lim);
                abort();
            }
    } else if (!(rc == SFL_EBADSIG && sum[k] != count) &&
               !(rc == SFL_ERANGE && strstr(sfl_last_error(), "out of bounds") != NULL)) {
        fprintf(stderr, "fuzz_savec: %d %s\n", rc, sfl_last_error());
        abort();
    }
    rc = sfl_sa_metrics_decode(&q, sum + k + 1, count, m);
    if (rc == 0) {
        for (int j = 0; j < SFL_SA_METRICS; j++)
            if (!(isfinite(m[j]) && m[j] >= 0))
                abort();
    } else if (rc != SFL_ERANGE) {
        abort();
    }
    return 0;
}

/* Hard thresholding cost against one read pass and a full sort.
 *
 *   bench_topk [--quick]
 *
 * H_tau on d = 1e6 Gaussian doubles (seeded), tau = 1e4 (--quick: d = 1e5,
 * tau = 1e3). Each figure is the median of 11 runs. Prints one line:
 *   bench_topk d=... tau=... read_ms=... topk_ms=... sort_ms=...
 *              topk_over_read=... topk_over_sort=... */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/core/rng.h"
#include "sfl/core/topk.h"

#define RUNS 11

/* Written after every read pass so the compiler must compute the sum. */
static volatile double sink;
static const double *sort_x;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return t[n / 2];
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return (a > b) - (a < b);
}

/* Same total order as sfl_topk: larger |x| first, then smaller index. */
static int cmp_rank(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    double ma = fabs(sort_x[a]), mb = fabs(sort_x[b]);

    if (ma != mb)
        return ma > mb ? -1 : 1;
    return (a > b) - (a < b);
}

/* sum |x_i| with four accumulators so the loop runs at memory speed rather
 * than at the latency of one floating-point add chain: an honest floor. */
static double read_pass(const double *x, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        s0 += fabs(x[i]);
        s1 += fabs(x[i + 1]);
        s2 += fabs(x[i + 2]);
        s3 += fabs(x[i + 3]);
    }
    for (; i < n; i++)
        s0 += fabs(x[i]);
    return (s0 + s1) + (s2 + s3);
}

int main(int argc, char **argv)
{
    size_t d = 1000000, tau = 10000;
    double t_read[RUNS], t_topk[RUNS], t_sort[RUNS];
    double *x = NULL;
    uint32_t *out = NULL, *perm = NULL, *ref = NULL;
    sfl_topk_ws_t ws;
    sfl_rng_t rng;
    int rc = 1;

    sfl_topk_ws_init(&ws);
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) {
            d = 100000;
            tau = 1000;
        } else {
            fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }
    x = malloc(d * sizeof(*x));
    out = malloc(tau * sizeof(*out));
    ref = malloc(tau * sizeof(*ref));
    perm = malloc(d * sizeof(*perm));
    if (x == NULL || out == NULL || ref == NULL || perm == NULL ||
        sfl_topk_ws_reserve(&ws, d) != 0) {
        fprintf(stderr, "bench_topk: out of memory\n");
        goto out;
    }
    sfl_rng_seed(&rng, 42, 0, 0, SFL_STREAM_DATA);
    for (size_t i = 0; i < d; i++)
        x[i] = sfl_rng_gauss(&rng, 0.0, 1.0);

    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ms();

        sink = read_pass(x, d);
        double t1 = now_ms();

        if (sfl_topk_select(x, d, tau, out, &ws) != 0) {
            fprintf(stderr, "bench_topk: sfl_topk_select failed\n");
            goto out;
        }
        double t2 = now_ms();

        for (size_t i = 0; i < d; i++)
            perm[i] = (uint32_t)i;
        sort_x = x;
        qsort(perm, d, sizeof(*perm), cmp_rank);
        double t3 = now_ms();

        t_read[r] = t1 - t0;
        t_topk[r] = t2 - t1;
        t_sort[r] = t3 - t2;
    }
    /* The sort doubles as a check: same set as the selection. */
    memcpy(ref, perm, tau * sizeof(*ref));
    qsort(ref, tau, sizeof(*ref), cmp_u32);
    if (memcmp(ref, out, tau * sizeof(*ref)) != 0) {
        fprintf(stderr, "bench_topk: selection differs from the sort\n");
        goto out;
    }
    double read_ms = median(t_read, RUNS), topk_ms = median(t_topk, RUNS);
    double sort_ms = median(t_sort, RUNS);

    printf("bench_topk d=%zu tau=%zu read_ms=%.3f topk_ms=%.3f sort_ms=%.3f "
           "topk_over_read=%.2f topk_over_sort=%.4f\n",
           d, tau, read_ms, topk_ms, sort_ms, topk_ms / read_ms, topk_ms / sort_ms);
    rc = 0;
out:
    sfl_topk_ws_close(&ws);
    free(perm);
    free(ref);
    free(out);
    free(x);
    return rc;
}

/* Sparse vector codec: bytes against the information limit, and encode /
 * decode speed against the varint layout, over a density sweep.
 *
 *   bench_codec [--quick]
 *
 * d = 1e6 and 1e5, k/d = 0.1, 1, 10, 50, 90, 100 %, supports uniform
 * k-subsets, values N(0, 1) (seeded), each encoding f64, f32, q8. Per row:
 *   bench_codec d=... k=... enc=... layout=... bytes=... limit_bytes=...
 *               over_limit=... varint_bytes=... enc_mbs=... enc_varint_mbs=...
 *               dec_mbs=... dec_varint_mbs=... dec_over_varint=...
 * limit_bytes = (log2 C(d,k) + k * value bits) / 8, value bits 64 (f64),
 * 32 (f32), 8 (q8) plus q8's range, two f64 (16 bytes), counted on the
 * limit's side: it is part of what the receiver must learn. The header
 * (dim, nnz, encoding byte) is counted on the codec's side. layout is what
 * the encoder chose (varint, dense, bitmap, rice/b, crice/b: complement).
 * varint_bytes is the same vector in layout 0 (the only layout before);
 * written here by a plain loop (varint gaps, then the values) and decoded by
 * the same sfl_spcodec_decode_into, so dec_over_varint compares the two
 * decoders on one vector in one run. MB/s count the decoded vector's bytes
 * (12 per entry: a uint32 index and a double), medians of RUNS (--quick: 3)
 * repetitions; on a shared machine read the ratios. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/core/rng.h"
#include "sfl/core/vec.h"
#include "sfl/wire/spcodec.h"

static int runs = 9;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;

    return (a > b) - (a < b);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_d);
    return t[n / 2];
}

static double log2_binom(double d, double k)
{
    return (lgamma(d + 1) - lgamma(k + 1) - lgamma(d - k + 1)) / log(2.0);
}

static size_t put_varint(uint8_t *p, uint32_t v)
{
    size_t n = 0;

    for (; v >= 0x80; v >>= 7)
        p[n++] = (uint8_t)(v | 0x80);
    p[n++] = (uint8_t)v;
    return n;
}

/* Layout 0 (varint gaps) for f64 / f32; q8 is left out of the baseline. */
static size_t put_varint_layout(const sfl_spvec_t *v, sfl_enc_t enc, uint8_t *p)
{
    size_t o = put_varint(p, v->dim);
    uint32_t next = 0;

    o += put_varint(p + o, v->nnz);
    p[o++] = (uint8_t)enc;
    for (uint32_t j = 0; j < v->nnz; j++) {
        o += put_varint(p + o, v->idx[j] - next);
        next = v->idx[j] + 1;
    }
    for (uint32_t j = 0; j < v->nnz; j++) {
        if (enc == SFL_ENC_F64) {
            memcpy(p + o, &v->val[j], 8); /* little-endian hosts only: a bench */
            o += 8;
        } else {
            float f = (float)v->val[j];

            memcpy(p + o, &f, 4);
            o += 4;
        }
    }
    return o;
}

static const char *layout_name(uint8_t byte, char *buf, size_t n)
{
    unsigned code = byte >> 2;

    if (code == 0)
        return "varint";
    if (code == 1)
        return "dense";
    if (code == 2)
        return "bitmap";
    snprintf(buf, n, "%s/%u", code < 33 ? "rice" : "crice", code < 33 ? code - 3 : code - 33);
    return buf;
}

static size_t header_len(const uint8_t *p)
{
    size_t o = 0;

    for (int f = 0; f < 2; f++)
        while (p[o++] & 0x80)
            ;
    return o;
}

static int row(sfl_rng_t *rng, uint32_t d, uint32_t k, sfl_spvec_t *into)
{
    static const char *const names[] = {"f64", "f32", "q8"};
    static const double bits[] = {64, 32, 8};
    size_t cap = (size_t)d * 14 + 64, len = 0, vlen = 0;
    uint8_t *buf = malloc(cap), *old = malloc(cap);
    uint32_t *idx = malloc((size_t)k * sizeof(*idx) + 1);
    double *t = malloc(4 * (size_t)runs * sizeof(*t));
    sfl_spvec_t *v = NULL;
    int rc = -1;

    if (buf == NULL || old == NULL || idx == NULL || t == NULL ||
        sfl_rng_sample(rng, d, k, idx) != 0 || sfl_spvec_new(d, k, &v) != 0)
        goto out;
    memcpy(v->idx, idx, (size_t)k * sizeof(*idx));
    for (uint32_t j = 0; j < k; j++)
        v->val[j] = sfl_rng_gauss(rng, 0.0, 1.0);
    v->nnz = k;
    for (int e = 0; e < 3; e++) {
        sfl_enc_t enc = (sfl_enc_t)e;
        double *te = t, *tev = t + runs, *td = t + 2 * runs, *tdv = t + 3 * runs;
        char lname[16];

        for (int r = 0; r < runs; r++) {
            double t0 = now_ms();

            if (sfl_spcodec_encode(v, enc, buf, cap, &len) != 0)
                goto out;
            te[r] = now_ms() - t0;
            t0 = now_ms();
            if (sfl_spcodec_decode_into(buf, len, d, d, into) != 0)
                goto out;
            td[r] = now_ms() - t0;
            if (enc != SFL_ENC_Q8) {
                t0 = now_ms();
                vlen = put_varint_layout(v, enc, old);
                tev[r] = now_ms() - t0;
                t0 = now_ms();
                if (sfl_spcodec_decode_into(old, vlen, d, d, into) != 0)
                    goto out;
                tdv[r] = now_ms() - t0;
            }
        }
        double limit = (log2_binom(d, k) + bits[e] * k) / 8 + (enc == SFL_ENC_Q8 ? 16 : 0);
        double mb = 12.0 * k / 1e6; /* decoded vector, MB */
        double me = median(te, runs), md = median(td, runs);

        printf("bench_codec d=%u k=%u enc=%s layout=%s bytes=%zu limit_bytes=%.0f "
               "over_limit=%.4f",
               d, k, names[e], layout_name(buf[header_len(buf)], lname, sizeof(lname)), len,
               limit, (double)len / limit);
        if (enc != SFL_ENC_Q8) {
            double mev = median(tev, runs), mdv = median(tdv, runs);

            printf(" varint_bytes=%zu enc_mbs=%.0f enc_varint_mbs=%.0f dec_mbs=%.0f "
                   "dec_varint_mbs=%.0f dec_over_varint=%.2f\n",
                   vlen, mb / (me / 1e3), mb / (mev / 1e3), mb / (md / 1e3), mb / (mdv / 1e3),
                   mdv / md);
        } else {
            printf(" enc_mbs=%.0f dec_mbs=%.0f\n", mb / (me / 1e3), mb / (md / 1e3));
        }
        fflush(stdout);
    }
    rc = 0;
out:
    sfl_spvec_free(v);
    free(t);
    free(idx);
    free(old);
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    static const double dens[] = {0.001, 0.01, 0.1, 0.5, 0.9, 1.0};
    static const uint32_t dims[] = {1000000, 100000};
    sfl_spvec_t *into = NULL;
    sfl_rng_t rng;

    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        runs = 3;
    sfl_rng_seed(&rng, 27, 0, 0, SFL_STREAM_DATA);
    if (sfl_spvec_new(0, 0, &into) != 0)
        return 1;
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 6; j++)
            if (row(&rng, dims[i], (uint32_t)(dens[j] * dims[i] + 0.5), into) != 0) {
                fprintf(stderr, "bench_codec: d=%u density %g failed\n", dims[i], dens[j]);
                sfl_spvec_free(into);
                return 1;
            }
    sfl_spvec_free(into);
    return 0;
}

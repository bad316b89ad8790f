#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "sfl/wire/spcodec.h"

/* dim 300, entries (3, 1.0), (130, -2.5), (299, 0.5), written out by hand
 * in the varint layout (0) that encoders before the layouts wrote and
 * stored checkpoints hold; decoded still, no longer encoded (Rice is smaller):
 *   AC 02        dim 300 = 0b10_0101100 -> 0x2C|0x80, 0x02
 *   03           nnz 3
 *   00/01/02     encoding, layout 0
 *   03 7E A8 01  gaps 3, 130-3-1 = 126, 299-130-1 = 168 = 0x28|0x80, 0x01
 * then the values. */
static const uint8_t golden_f64[] = {
    0xAC, 0x02, 0x03, 0x00, 0x03, 0x7E, 0xA8, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F, /*  1.0 = 0x3FF0000000000000 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xC0, /* -2.5 = 0xC004000000000000 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xE0, 0x3F, /*  0.5 = 0x3FE0000000000000 */
};
static const uint8_t golden_f32[] = {
    0xAC, 0x02, 0x03, 0x01, 0x03, 0x7E, 0xA8, 0x01,
    0x00, 0x00, 0x80, 0x3F, /*  1.0f = 0x3F800000 */
    0x00, 0x00, 0x20, 0xC0, /* -2.5f = 0xC0200000 */
    0x00, 0x00, 0x00, 0x3F, /*  0.5f = 0x3F000000 */
};
static const uint8_t golden_q8[] = {
    0xAC, 0x02, 0x03, 0x02, 0x03, 0x7E, 0xA8, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xC0, /* lo = -2.5 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F, /* hi =  1.0 */
    0xFF, /* (1 + 2.5) / 3.5 * 255 = 255 */
    0x00, /* lo */
    0xDB, /* (0.5 + 2.5) / 3.5 * 255 = 218.57 -> 219 */
};

static const struct {
    sfl_enc_t enc;
    const uint8_t *bytes;
    size_t len;
    const char *file;
} goldens[] = {
    {SFL_ENC_F64, golden_f64, sizeof(golden_f64), "tests/vectors/spcodec_f64.bin"},
    {SFL_ENC_F32, golden_f32, sizeof(golden_f32), "tests/vectors/spcodec_f32.bin"},
    {SFL_ENC_Q8, golden_q8, sizeof(golden_q8), "tests/vectors/spcodec_q8.bin"},
};

/* The same vector as the encoder writes it now: Rice b = 6 (layout 3 + 6 =
 * 9; sizes 3 (1 + b) + sum(g >> b) bits: b 5: 26, b 6: 24, b 7: 25), the
 * encoding byte enc | 9 << 2 = 0x24 + enc, then the codes LSB first:
 *   gap 3:   1 (q 0), 000011 (r 3)       bits 0..6
 *   gap 126: 01 (q 1), 011111 (r 62)     bits 7..14
 *   gap 168: 001 (q 2), 000101 (r 40)    bits 15..23
 *   -> 07 7D A2 (24 bits, no padding) */
static const uint8_t rice_f64[] = {
    0xAC, 0x02, 0x03, 0x24, 0x07, 0x7D, 0xA2,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x04, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xE0, 0x3F,
};
static const uint8_t rice_f32[] = {
    0xAC, 0x02, 0x03, 0x25, 0x07, 0x7D, 0xA2,
    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x20, 0xC0, 0x00, 0x00, 0x00, 0x3F,
};
static const uint8_t rice_q8[] = {
    0xAC, 0x02, 0x03, 0x26, 0x07, 0x7D, 0xA2,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xC0, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0xF0, 0x3F, 0xFF, 0x00, 0xDB,
};
/* dense: dim 2 = nnz, f32 1.0, -2.5; layout 1: 0x01 | 1 << 2 = 0x05 */
static const uint8_t dense_f32[] = {0x02, 0x02, 0x05, 0x00, 0x00, 0x80,
                                    0x3F, 0x00, 0x00, 0x20, 0xC0};
/* bitmap: dim 16, the 8 even positions, f32 0.5 each; bitmap 2 bytes ties
 * Rice b 0 (8 + 7 bits) and wins by the order; 0x01 | 2 << 2 = 0x09 */
static const uint8_t bitmap_f32[] = {
    0x10, 0x08, 0x09, 0x55, 0x55, 0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x3F,
    0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x3F, 0x00,
    0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x3F,
};
/* complement: dim 10, every position but 4, f32 1.0; one zero gap, 4, in
 * Rice b 0 (b 0, 1, 2 take 1 byte each, b 0 is first; layout 33:
 * 0x01 | 33 << 2 = 0x85): 0000 1 -> 0x10 */
static const uint8_t crice_f32[] = {
    0x0A, 0x09, 0x85, 0x10, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x80, 0x3F,
    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x80, 0x3F, 0x00,
    0x00, 0x80, 0x3F, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00,
    0x80, 0x3F,
};

static const struct {
    const uint8_t *bytes;
    size_t len;
    uint32_t dim, nnz;
    const char *file;
} layouts[] = {
    {rice_f64, sizeof(rice_f64), 300, 3, "tests/fuzz/corpus/fuzz_spcodec/rice-f64"},
    {rice_f32, sizeof(rice_f32), 300, 3, "tests/fuzz/corpus/fuzz_spcodec/rice-f32"},
    {rice_q8, sizeof(rice_q8), 300, 3, "tests/fuzz/corpus/fuzz_spcodec/rice-q8"},
    {dense_f32, sizeof(dense_f32), 2, 2, "tests/fuzz/corpus/fuzz_spcodec/dense-f32"},
    {bitmap_f32, sizeof(bitmap_f32), 16, 8, "tests/fuzz/corpus/fuzz_spcodec/bitmap-f32"},
    {crice_f32, sizeof(crice_f32), 10, 9, "tests/fuzz/corpus/fuzz_spcodec/complement-f32"},
};

/* The vector each layouts[] golden holds (f32 values exact). */
static sfl_spvec_t *layout_vec(size_t g)
{
    sfl_spvec_t *v = NULL;
    uint32_t n = 0;

    assert_int_equal(sfl_spvec_new(layouts[g].dim, layouts[g].nnz, &v), 0);
    for (uint32_t i = 0; i < layouts[g].dim; i++) {
        double x = 0.0;

        if (g < 3)
            x = i == 3 ? 1.0 : i == 130 ? -2.5 : i == 299 ? 0.5 : 0.0;
        else if (g == 3)
            x = i == 0 ? 1.0 : -2.5;
        else if (g == 4)
            x = i % 2 == 0 ? 0.5 : 0.0;
        else
            x = i == 4 ? 0.0 : 1.0;
        if (x != 0.0) {
            v->idx[n] = i;
            v->val[n++] = x;
        }
    }
    v->nnz = n;
    assert_int_equal(n, layouts[g].nnz);
    return v;
}

static sfl_spvec_t *small_vec(void)
{
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_new(300, 3, &v), 0);
    v->idx[0] = 3;
    v->idx[1] = 130;
    v->idx[2] = 299;
    v->val[0] = 1.0;
    v->val[1] = -2.5;
    v->val[2] = 0.5;
    v->nnz = 3;
    return v;
}

/* A file kept beside a golden (when run from the source root) holds its
 * bytes. */
static void same_file(const char *path, const uint8_t *bytes, size_t len)
{
    FILE *f = fopen(path, "rb");

    if (f != NULL) {
        uint8_t fb[64];
        size_t n = fread(fb, 1, sizeof(fb), f);

        fclose(f);
        assert_int_equal(n, len);
        assert_memory_equal(fb, bytes, n);
    }
}

static void test_spcodec_golden(void **state)
{
    (void)state;
    sfl_spvec_t *v = small_vec(), *d = NULL;
    uint8_t buf[64];
    size_t len;

    /* The legacy varint layout still decodes (stored checkpoints, older
     * agents); the encoder now writes Rice for this vector. */
    for (size_t g = 0; g < 3; g++) {
        assert_int_equal(sfl_spcodec_decode(goldens[g].bytes, goldens[g].len, 300, 3, &d), 0);
        assert_int_equal(d->dim, 300);
        assert_int_equal(d->nnz, 3);
        assert_int_equal(d->idx[0], 3);
        assert_int_equal(d->idx[1], 130);
        assert_int_equal(d->idx[2], 299);
        /* all three values are exact in every encoding, q8 included */
        assert_true(d->val[0] == 1.0 && d->val[1] == -2.5);
        if (goldens[g].enc == SFL_ENC_Q8)
            assert_true(fabs(d->val[2] - 0.5) <= 3.5 / 510);
        else
            assert_true(d->val[2] == 0.5);
        sfl_spvec_free(d);

        /* The same bytes are kept in tests/vectors/ (fuzz seeds, interop);
         * run from the source root they must agree. */
        same_file(goldens[g].file, goldens[g].bytes, goldens[g].len);
    }
    sfl_spvec_free(v);

    /* Each layout from hand-built bytes: the encoder writes exactly them and
     * the decoder reads them back. */
    for (size_t g = 0; g < sizeof(layouts) / sizeof(layouts[0]); g++) {
        sfl_enc_t enc = (sfl_enc_t)(layouts[g].bytes[g < 3 ? 3 : 2] & 3);

        v = layout_vec(g);
        assert_int_equal(sfl_spcodec_size(v, enc), layouts[g].len);
        assert_int_equal(sfl_spcodec_encode(v, enc, buf, sizeof(buf), &len), 0);
        assert_int_equal(len, layouts[g].len);
        assert_memory_equal(buf, layouts[g].bytes, len);
        assert_int_equal(sfl_spcodec_decode(layouts[g].bytes, layouts[g].len, layouts[g].dim,
                                            layouts[g].nnz, &d),
                         0);
        assert_int_equal(d->dim, v->dim);
        assert_int_equal(d->nnz, v->nnz);
        assert_memory_equal(d->idx, v->idx, v->nnz * sizeof(uint32_t));
        for (uint32_t j = 0; j < v->nnz; j++)
            if (enc == SFL_ENC_Q8)
                assert_true(fabs(d->val[j] - v->val[j]) <= 3.5 / 510);
            else
                assert_true(d->val[j] == v->val[j]);
        sfl_spvec_free(d);
        sfl_spvec_free(v);

        /* the fuzzer's seeds hold the same bytes */
        same_file(layouts[g].file, layouts[g].bytes, layouts[g].len);
    }
}

static void test_spcodec_edges(void **state)
{
    (void)state;
    sfl_spvec_t *v = NULL, *d = NULL;
    uint8_t buf[64];
    size_t len;

    /* Largest dimension and index: five-byte varints. */
    assert_int_equal(sfl_spvec_new(UINT32_MAX, 1, &v), 0);
    v->idx[0] = UINT32_MAX - 1;
    v->val[0] = -0.0;
    v->nnz = 1;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F64, buf, sizeof(buf), &len), 0);
    static const uint8_t want[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01, 0x00, 0xFE, 0xFF,
                                   0xFF, 0xFF, 0x0F, 0, 0, 0, 0, 0, 0, 0, 0x80};
    assert_int_equal(len, sizeof(want));
    assert_memory_equal(buf, want, len);
    assert_int_equal(sfl_spcodec_decode(buf, len, UINT32_MAX, 1, &d), 0);
    assert_int_equal(d->idx[0], UINT32_MAX - 1);
    assert_true(signbit(d->val[0]));
    sfl_spvec_free(d);
    sfl_spvec_free(v);

    /* Empty vectors, every encoding; q8 still carries lo = hi = 0. */
    assert_int_equal(sfl_spvec_new(0, 0, &v), 0);
    for (int e = 0; e < 3; e++) {
        assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)e, buf, sizeof(buf), &len), 0);
        assert_int_equal(len, sfl_spcodec_size(v, (sfl_enc_t)e));
        assert_int_equal(len, e == SFL_ENC_Q8 ? 19 : 3);
        assert_int_equal(sfl_spcodec_decode(buf, len, 0, 0, &d), 0);
        assert_int_equal(d->nnz, 0);
        sfl_spvec_free(d);
    }
    sfl_spvec_free(v);

    /* q8 with hi == lo: every q is 0 and decodes to lo exactly. */
    assert_int_equal(sfl_spvec_new(10, 3, &v), 0);
    for (uint32_t j = 0; j < 3; j++) {
        v->idx[j] = 2 * j;
        v->val[j] = -7.25;
    }
    v->nnz = 3;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_Q8, buf, sizeof(buf), &len), 0);
    assert_int_equal(buf[len - 1] | buf[len - 2] | buf[len - 3], 0);
    assert_int_equal(sfl_spcodec_decode(buf, len, 10, 10, &d), 0);
    for (uint32_t j = 0; j < 3; j++)
        assert_true(d->val[j] == -7.25);
    sfl_spvec_free(d);
    sfl_spvec_free(v);
}

static size_t vlen(uint64_t x)
{
    size_t n = 1;

    for (; x >= 0x80; x >>= 7)
        n++;
    return n;
}

/* The smallest layout's size, computed apart from the codec: positions
 * walked one by one, each layout costed on its own, the least taken. */
static size_t ref_size(const sfl_spvec_t *v, sfl_enc_t enc)
{
    uint8_t *in = calloc(v->dim + 1, 1);
    uint64_t varint = 0, best;


    assert_non_null(in);
    for (uint32_t j = 0; j < v->nnz; j++)
        in[v->idx[j]] = 1;
    for (uint32_t j = 0; j < v->nnz; j++)
        varint += vlen(j == 0 ? v->idx[0] : v->idx[j] - v->idx[j - 1] - 1);
    best = varint;
    if (v->nnz == v->dim && v->dim > 0)
        best = 0;
    if ((v->dim + 7ull) / 8 < best)
        best = (v->dim + 7ull) / 8;
    for (int want = 1; want >= 0; want--) { /* support, then zeros */
        for (unsigned b = 0; b <= 29; b++) {
            uint64_t bits = 0;
            uint32_t next = 0;


            for (uint32_t i = 0; i < v->dim; i++) {
                if (in[i] != want)
                    continue;
                bits += 1 + b + ((uint64_t)(i - next) >> b);
                next = i + 1;

            }
            if ((bits + 7) / 8 < best)
                best = (bits + 7) / 8;
        }
    }

    free(in);
    return vlen(v->dim) + vlen(v->nnz) + 1 + best +
           (enc == SFL_ENC_F64 ? 8 * v->nnz : enc == SFL_ENC_F32 ? 4 * v->nnz : 16 + v->nnz);
}

static void test_spcodec_roundtrip(void **state)
{
    (void)state;
    enum { D = 5000 };
    uint8_t *buf = malloc(D * 14 + 64), *again = malloc(D * 14 + 64);
    uint32_t *idx = malloc(D * sizeof(*idx));
    sfl_spvec_t *v = NULL, *d = NULL;
    sfl_rng_t r;

    /* every density, 0 to 100 %, uniform and clustered supports */
    static const double density[] = {0.0, 0.001, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0};
    sfl_spvec_t *into = NULL;

    assert_true(buf && again && idx);
    assert_int_equal(sfl_spvec_new(0, 0, &into), 0);
    sfl_rng_seed(&r, 12, 0, 0, SFL_STREAM_DATA);
    for (int trial = 0; trial < 120; trial++) {
        uint32_t dim = (uint32_t)sfl_rng_below(&r, D) + 1;
        uint32_t k = (uint32_t)sfl_rng_below(&r, dim + 1);
        double scale = pow(10.0, (double)sfl_rng_below(&r, 61) - 30.0);

        if (trial % 2 == 0)
            k = (uint32_t)(density[(trial / 2) % 10] * dim);
        assert_int_equal(sfl_rng_sample(&r, dim, k, idx), 0);
        if (trial % 6 == 1) /* clustered: one run of k positions */
            for (uint32_t j = 0; j < k; j++)
                idx[j] = (dim - k) / 2 + j;
        assert_int_equal(sfl_spvec_new(dim, k, &v), 0);
        for (uint32_t j = 0; j < k; j++) {
            v->idx[j] = idx[j];
            v->val[j] = sfl_rng_gauss(&r, 0.0, scale);
            if (j % 7 == 3) /* explicit zeros stay in the support, sign kept */
                v->val[j] = j % 2 ? -0.0 : 0.0;
        }
        v->nnz = k;
        for (int e = 0; e < 3; e++) {
            size_t len, len2;

            assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)e, buf, D * 14 + 64, &len), 0);
            assert_int_equal(len, sfl_spcodec_size(v, (sfl_enc_t)e));
            assert_int_equal(len, ref_size(v, (sfl_enc_t)e));
            assert_int_equal(sfl_spcodec_decode_into(buf, len, dim, k, into), 0);
            assert_int_equal(into->nnz, k);
            assert_memory_equal(into->idx, v->idx, k * sizeof(uint32_t));
            assert_int_equal(sfl_spcodec_decode(buf, len, dim, k, &d), 0);
            assert_int_equal(d->dim, dim);
            assert_int_equal(d->nnz, k);
            assert_memory_equal(d->idx, v->idx, k * sizeof(uint32_t));
            assert_int_equal(sfl_spvec_validate(d), 0);
            double lo = 0, hi = 0;
            for (uint32_t j = 0; j < k; j++) {
                lo = j == 0 || v->val[j] < lo ? v->val[j] : lo;
                hi = j == 0 || v->val[j] > hi ? v->val[j] : hi;
            }
            for (uint32_t j = 0; j < k; j++) {
                double a = v->val[j], b = d->val[j];

                switch (e) {
                case SFL_ENC_F64:
                    assert_memory_equal(&a, &b, sizeof(a));
                    break;
                case SFL_ENC_F32: /* float rounding, subnormal floats included */
                    assert_true(fabs(a - b) <= fabs(a) * 0x1p-24 + 0x1p-150);
                    break;
                case SFL_ENC_Q8:
                    assert_true(fabs(a - b) <= (hi - lo) / 510 * (1 + 1e-9));
                    break;
                }
            }
            /* Lossless encodings re-encode to the same bytes (minimal
             * varints: one encoding per vector). */
            if (e != SFL_ENC_Q8) {
                assert_int_equal(sfl_spcodec_encode(d, (sfl_enc_t)e, again, D * 14 + 64, &len2), 0);
                assert_int_equal(len2, len);
                assert_memory_equal(again, buf, len);
            }
            sfl_spvec_free(d);
        }
        sfl_spvec_free(v);
    }
    sfl_spvec_free(into);
    free(idx);
    free(again);
    free(buf);
}

static void test_spcodec_info_limit(void **state)
{
    (void)state;
    /* d = 1000, k = 200 uniform support, f64: bytes on the wire against the
     * information limit (log2 C(d,k) + 64 k) / 8 (within 1 %, header included). */
    enum { Dm = 1000, K = 200 };
    uint32_t idx[K];
    uint8_t buf[Dm * 10];
    sfl_spvec_t *v = NULL;
    sfl_rng_t r;
    size_t len;

    sfl_rng_seed(&r, 13, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_rng_sample(&r, Dm, K, idx), 0);
    assert_int_equal(sfl_spvec_new(Dm, K, &v), 0);
    for (uint32_t j = 0; j < K; j++) {
        v->idx[j] = idx[j];
        v->val[j] = sfl_rng_gauss(&r, 0.0, 1.0);
    }
    v->nnz = K;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F64, buf, sizeof(buf), &len), 0);
    double support_bits = (lgamma(Dm + 1.0) - lgamma(K + 1.0) - lgamma(Dm - K + 1.0)) / log(2.0);
    double limit = (support_bits + 64.0 * K) / 8.0;
    size_t index_bytes = len - 2 - 2 - 1 - 8 * K;
    print_message("spcodec d=%d k=%d f64: %zu bytes, limit %.1f bytes, ratio %.3f "
                  "(support: %zu bytes vs %.1f)\n",
                  Dm, K, len, limit, (double)len / limit, index_bytes, support_bits / 8.0);
    assert_true((double)len <= 1.01 * limit);
    sfl_spvec_free(v);
}

/* decode must fail with `want`, leave *out NULL and mention `detail`. */
static void bad(const uint8_t *b, size_t len, uint32_t max_dim, uint32_t max_nnz, int want,
                const char *detail)
{
    sfl_spvec_t *d = (sfl_spvec_t *)(uintptr_t)1;
    int rc = sfl_spcodec_decode(b, len, max_dim, max_nnz, &d);

    if (rc != want)
        fail_msg("decode returned %d (%s), want %d", rc, sfl_last_error(), want);
    assert_null(d);
    if (detail != NULL && strstr(sfl_last_error(), detail) == NULL)
        fail_msg("detail \"%s\" lacks \"%s\"", sfl_last_error(), detail);
}

static void test_spcodec_truncated(void **state)
{
    (void)state;
    for (size_t g = 0; g < 3; g++)
        for (size_t n = 0; n < goldens[g].len; n++)
            bad(goldens[g].bytes, n, 300, 300, SFL_ETRUNC, NULL);
    bad(NULL, 0, 10, 10, SFL_ETRUNC, "byte 0");
    /* The detail names the field and offset. */
    bad(golden_f64, 1, 300, 300, SFL_ETRUNC, "dim: truncated varint at byte 0");
    bad(golden_f64, 3, 300, 300, SFL_ETRUNC, "encoding byte at byte 3");
    bad(golden_f64, 20, 300, 300, SFL_ETRUNC, "after byte 4");
}

static void test_spcodec_malformed(void **state)
{
    (void)state;
    uint8_t b[64];

    /* varints: six bytes, over 32 bits, non-minimal (in each field) */
    const uint8_t long6[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x00};
    bad(long6, sizeof(long6), UINT32_MAX, 10, SFL_EPARSE, "longer than 5 bytes at byte 0");
    const uint8_t big5[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x1F, 0x00, 0x00};
    bad(big5, sizeof(big5), UINT32_MAX, 10, SFL_ERANGE, "exceeds 32 bits at byte 0");
    const uint8_t nonmin[] = {0x85, 0x00, 0x00, 0x00};
    bad(nonmin, sizeof(nonmin), 100, 10, SFL_EPARSE, "non-minimal varint at byte 0");
    const uint8_t nonmin_nnz[] = {0x05, 0x81, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0};
    bad(nonmin_nnz, sizeof(nonmin_nnz), 100, 10, SFL_EPARSE, "nnz: non-minimal varint at byte 1");
    {
        /* the last gap, 168 = A8 01, padded to three bytes: A8 81 00 */
        uint8_t p[sizeof(golden_f64) + 1];

        memcpy(p, golden_f64, 7);
        p[7] = 0x81;
        p[8] = 0x00;
        memcpy(p + 9, golden_f64 + 8, sizeof(golden_f64) - 8);
        bad(p, sizeof(p), 300, 300, SFL_EPARSE, "index gap: non-minimal varint at byte 6");
    }

    /* limits and consistency, checked before any allocation */
    bad(golden_f64, sizeof(golden_f64), 299, 300, SFL_ELIMIT, "dim 300 exceeds limit 299");
    bad(golden_f64, sizeof(golden_f64), 300, 2, SFL_ELIMIT, "nnz 3 exceeds limit 2 at byte 2");
    {
        const uint8_t p[] = {0x02, 0x03, 0x00, 0x00, 0x00, 0x00};
        bad(p, sizeof(p), 100, 100, SFL_EPARSE, "nnz 3 exceeds dim 2 at byte 1");
    }

    /* encoding byte */
    memcpy(b, golden_f64, sizeof(golden_f64));
    b[3] = 3;
    bad(b, sizeof(golden_f64), 300, 300, SFL_EUNSUP, "unknown encoding 3 at byte 3");
    b[3] = 0xFF;
    bad(b, sizeof(golden_f64), 300, 300, SFL_EUNSUP, "at byte 3");

    /* indices: first index == dim, last index == dim, a gap that would wrap
     * a uint32 back below the previous index (unsorted if unchecked) */
    memcpy(b, golden_f64, sizeof(golden_f64));
    b[4] = 0xAC; /* first index 300 takes two bytes: AC 02, drop 7E */
    b[5] = 0x02;
    bad(b, sizeof(golden_f64), 300, 300, SFL_ERANGE, "index 300 of entry 0 >= dim 300 at byte 4");
    memcpy(b, golden_f64, sizeof(golden_f64));
    b[6] = 0xA9; /* last gap 169: index 300 */
    bad(b, sizeof(golden_f64), 300, 300, SFL_ERANGE, "index 300 of entry 2 >= dim 300 at byte 6");
    {
        /* dim 2^32-1, idx0 = 10, gap 2^32-6: 10 + 1 + gap wraps to 5 */
        const uint8_t p[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x02, 0x00, 0x0A, 0xFA, 0xFF,
                             0xFF, 0xFF, 0x0F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        bad(p, sizeof(p), UINT32_MAX, 2, SFL_ERANGE, "index 4294967301 of entry 1");
    }

    /* values: NaN and infinities in each encoding; q8 range */
    const uint8_t nan64[] = {0x7F, 0xF8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}; /* big-endian */
    for (int which = 0; which < 3; which++) {
        memcpy(b, golden_f64, sizeof(golden_f64));
        for (int i = 0; i < 8; i++)
            b[8 + 8 * which + i] = nan64[7 - i];
        char want[64];

        snprintf(want, sizeof(want), "value %d not finite at byte %d", which, 8 + 8 * which);
        bad(b, sizeof(golden_f64), 300, 300, SFL_ENUMERIC, want);
    }
    memcpy(b, golden_f64, sizeof(golden_f64));
    b[22] = 0xF0;
    b[23] = 0xFF; /* -inf */
    bad(b, sizeof(golden_f64), 300, 300, SFL_ENUMERIC, "value 1 not finite at byte 16");
    memcpy(b, golden_f32, sizeof(golden_f32));
    b[14] = 0x80;
    b[15] = 0x7F; /* +inf as float */
    bad(b, sizeof(golden_f32), 300, 300, SFL_ENUMERIC, "value 1 not finite at byte 12");
    b[14] = 0xC0; /* NaN as float */
    bad(b, sizeof(golden_f32), 300, 300, SFL_ENUMERIC, "value 1 not finite at byte 12");
    memcpy(b, golden_q8, sizeof(golden_q8));
    b[15] = 0x7F;
    b[14] = 0xF8; /* lo = NaN */
    bad(b, sizeof(golden_q8), 300, 300, SFL_ENUMERIC, "q8 range not finite at byte 8");
    memcpy(b, golden_q8, sizeof(golden_q8));
    b[23] = 0xC0;
    b[22] = 0x10; /* hi = -4.0 < lo = -2.5 */
    bad(b, sizeof(golden_q8), 300, 300, SFL_EPARSE, "q8 lo -2.5 > hi -4 at byte 8");
    memcpy(b, golden_q8, sizeof(golden_q8));
    b[15] = 0xFF;
    b[14] = 0xEF; /* lo = -DBL_MAX (FFEF FFFF FFFF FFFF) */
    memset(b + 8, 0xFF, 6);
    memset(b + 16, 0xFF, 6);
    b[22] = 0xEF;
    b[23] = 0x7F; /* hi = DBL_MAX */
    bad(b, sizeof(golden_q8), 300, 300, SFL_ERANGE, "too wide");

    /* trailing bytes */
    memcpy(b, golden_f64, sizeof(golden_f64));
    b[sizeof(golden_f64)] = 0;
    bad(b, sizeof(golden_f64) + 1, 300, 300, SFL_EPARSE, "1 trailing bytes at byte 32");
}

/* The layouts' own faults, each with its code and offset. */
static void test_spcodec_layouts_malformed(void **state)
{
    (void)state;
    uint8_t b[64];

    /* every truncation of every layout golden */
    for (size_t g = 0; g < sizeof(layouts) / sizeof(layouts[0]); g++)
        for (size_t n = 0; n < layouts[g].len; n++)
            bad(layouts[g].bytes, n, 300, 300, SFL_ETRUNC, NULL);
    /* a byte too many: after the values, so in the Rice section / bitmap */
    for (size_t g = 0; g < sizeof(layouts) / sizeof(layouts[0]); g++) {
        memcpy(b, layouts[g].bytes, layouts[g].len);
        b[layouts[g].len] = 0;
        bad(b, layouts[g].len + 1, 300, 300, SFL_EPARSE, g == 3 ? "1 trailing bytes" : "1 bytes after the");
    }

    /* layout 63 does not exist; encoding 3 with any layout neither */
    memcpy(b, rice_f64, sizeof(rice_f64));
    b[3] = 0xFC;
    bad(b, sizeof(rice_f64), 300, 300, SFL_EUNSUP, "unknown layout 63 at byte 3");
    b[3] = 0x27;
    bad(b, sizeof(rice_f64), 300, 300, SFL_EUNSUP, "unknown encoding 39 at byte 3");
    /* nnz == dim in varint still decodes (stored full models), dense needs
     * nnz == dim and dim > 0 */
    {
        const uint8_t p[] = {0x02, 0x02, 0x01, 0x00, 0x00, 0, 0, 0x80, 0x3F, 0, 0, 0x20, 0xC0};
        sfl_spvec_t *d = NULL;

        assert_int_equal(sfl_spcodec_decode(p, sizeof(p), 10, 10, &d), 0);
        assert_int_equal(d->idx[1], 1);
        assert_true(d->val[1] == -2.5);
        sfl_spvec_free(d);
        const uint8_t q[] = {0x03, 0x02, 0x05, 0, 0, 0x80, 0x3F, 0, 0, 0x20, 0xC0};
        bad(q, sizeof(q), 10, 10, SFL_EPARSE, "layout 1 with nnz 2 of dim 3 at byte 2");
        const uint8_t e[] = {0x00, 0x00, 0x05};
        bad(e, sizeof(e), 10, 10, SFL_EPARSE, "layout 1 with nnz 0 of dim 0 at byte 2");
    }
    /* dense values: NaN at entry 1 */
    memcpy(b, dense_f32, sizeof(dense_f32));
    b[9] = 0xC0;
    b[10] = 0x7F;
    bad(b, sizeof(dense_f32), 10, 10, SFL_ENUMERIC, "value 1 not finite at byte 7");

    /* Rice: nonzero padding; a code beyond dim; an endless quotient */
    {
        /* dim 10, nnz 1, f64, b 0 (layout 3: 0x0C): gap 2 = 001, pad 0 */
        uint8_t p[] = {0x0A, 0x01, 0x0C, 0x04, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F};
        sfl_spvec_t *d = NULL;

        assert_int_equal(sfl_spcodec_decode(p, sizeof(p), 10, 10, &d), 0);
        assert_int_equal(d->idx[0], 2);
        sfl_spvec_free(d);
        p[3] = 0x0C; /* a pad bit set */
        bad(p, sizeof(p), 10, 10, SFL_EPARSE, "nonzero padding bits at byte 3");
        p[3] = 0x80; /* gap 7 fits (index 7), gap 10 would not */
        assert_int_equal(sfl_spcodec_decode(p, sizeof(p), 10, 10, &d), 0);
        assert_int_equal(d->idx[0], 7);
        sfl_spvec_free(d);
        p[3] = 0x00; /* eight zero bits: quotient 8, then nothing */
        bad(p, sizeof(p), 10, 10, SFL_ETRUNC, "truncated Rice code at byte 4");
        /* the index section longer by one zero byte: quotient 10 > 9 */
        uint8_t q[] = {0x0A, 0x01, 0x0C, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F};
        bad(q, sizeof(q), 10, 10, SFL_ERANGE, "Rice quotient 10 beyond 9 at byte 4");
        /* b 29 (layout 32: 0x80), dim 2^32-1: q 7 (bits 0..7), r 2^29-1
         * (bits 8..36): 2^32-1 beyond the first index's bound 2^32-3 */
        uint8_t r[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x02, 0x80, 0x80, 0xFF, 0xFF, 0xFF,
                       0x1F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        bad(r, sizeof(r), UINT32_MAX, 2, SFL_ERANGE,
            "Rice code 4294967295 beyond 4294967293 at byte 11");
        /* a long run of zero bytes stops at the quotient's bound */
        uint8_t l[40] = {0x0A, 0x01, 0x0C};
        bad(l, sizeof(l), 10, 10, SFL_ERANGE, "Rice quotient");
    }
    /* Rice with a second code that would pass dim: dim 4, nnz 2, gaps 2, 1 */
    {
        const uint8_t p[] = {0x04, 0x02, 0x0C, 0x14, 0, 0, 0, 0, 0, 0, 0, 0,
                             0, 0, 0, 0, 0, 0, 0, 0};
        bad(p, sizeof(p), 10, 10, SFL_ERANGE, "Rice quotient 1 beyond 0 at byte 3");
    }

    /* bitmap: a bit beyond dim, one bit too many, one too few */
    memcpy(b, bitmap_f32, sizeof(bitmap_f32));
    b[0] = 0x0F; /* dim 15: bit 14 set is fine, the bitmap is still 2 bytes */
    {
        sfl_spvec_t *d = NULL;

        assert_int_equal(sfl_spcodec_decode(b, sizeof(bitmap_f32), 300, 300, &d), 0);
        assert_int_equal(d->idx[7], 14);
        sfl_spvec_free(d);
    }
    memcpy(b, bitmap_f32, sizeof(bitmap_f32));
    b[0] = 0x0E; /* dim 14: bit 14 is beyond it */
    bad(b, sizeof(bitmap_f32), 300, 300, SFL_ERANGE, "bitmap bit beyond dim 14 at byte 4");
    memcpy(b, bitmap_f32, sizeof(bitmap_f32));
    b[3] = 0x57;
    bad(b, sizeof(bitmap_f32), 300, 300, SFL_EPARSE, "more than nnz 8 bits set at byte 3");
    b[3] = 0x54;
    bad(b, sizeof(bitmap_f32), 300, 300, SFL_EPARSE, "bitmap has 7 bits set, nnz 8 at byte 3");

    /* complement (b 0): a zero past dim, another gap, a pad bit */
    memcpy(b, crice_f32, sizeof(crice_f32));
    b[3] = 0x00; /* quotient >= 8, then no more bits */
    bad(b, sizeof(crice_f32), 300, 300, SFL_ETRUNC, "truncated Rice code at byte 4");
    b[3] = 0x20; /* 00000 1: gap 5, zero at 5: fine */
    {
        sfl_spvec_t *d = NULL;

        assert_int_equal(sfl_spcodec_decode(b, sizeof(crice_f32), 300, 300, &d), 0);
        assert_int_equal(d->idx[4], 4);
        assert_int_equal(d->idx[5], 6);
        sfl_spvec_free(d);
    }
    b[3] = 0x30; /* gap 4, then a pad bit */
    bad(b, sizeof(crice_f32), 300, 300, SFL_EPARSE, "nonzero padding bits at byte 3");
}

static void test_spcodec_hostile_sizes(void **state)
{
    (void)state;
    /* A few bytes claiming 2^32-2 entries must be refused without
     * allocating anything (and without reading past the buffer). */
    const uint8_t p[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F, 0x00,
                         0x00, 0x00, 0x00};
    sfl_spvec_t *d = NULL;

    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_spcodec_decode(p, sizeof(p), UINT32_MAX, UINT32_MAX, &d), SFL_ETRUNC);
    assert_non_null(strstr(sfl_last_error(), "4294967294 entries need at least"));
    assert_int_equal(failalloc_count(), 0);
    /* nnz within limits and present-looking: q8 needs 16 + nnz bytes */
    const uint8_t q[] = {0x0A, 0x02, 0x02, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(sfl_spcodec_decode(q, sizeof(q), 10, 10, &d), SFL_ETRUNC);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
}

static void test_spcodec_encode_errors(void **state)
{
    (void)state;
    sfl_spvec_t *v = small_vec();
    uint8_t buf[64];
    size_t len = 99;

    /* cap too small by one byte, and zero */
    for (int e = 0; e < 3; e++) {
        size_t need = sfl_spcodec_size(v, (sfl_enc_t)e);

        assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)e, buf, need - 1, &len), SFL_ELIMIT);
        assert_int_equal(len, 0);
        assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)e, NULL, 0, &len), SFL_ELIMIT);
        assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)e, buf, need, &len), 0);
        assert_int_equal(len, need);
    }
    assert_int_equal(sfl_spcodec_encode(v, (sfl_enc_t)3, buf, sizeof(buf), &len), SFL_EINVAL);

    /* invalid vectors are refused, not encoded */
    v->idx[2] = 130;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F64, buf, sizeof(buf), &len), SFL_EPARSE);
    v->idx[2] = 300;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F64, buf, sizeof(buf), &len), SFL_ERANGE);
    v->idx[2] = 299;
    v->val[1] = NAN;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_Q8, buf, sizeof(buf), &len), SFL_ENUMERIC);

    /* f32 out of float range; the largest float itself is fine */
    v->val[1] = 1e39;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F32, buf, sizeof(buf), &len), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "index 130"));
    v->val[1] = -1e300;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F32, buf, sizeof(buf), &len), SFL_ERANGE);
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F64, buf, sizeof(buf), &len), 0);
    v->val[1] = -FLT_MAX;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_F32, buf, sizeof(buf), &len), 0);

    /* q8 range too wide for a finite hi - lo */
    v->val[0] = DBL_MAX;
    v->val[1] = -DBL_MAX;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_Q8, buf, sizeof(buf), &len), SFL_ERANGE);
    v->val[1] = 0.0;
    assert_int_equal(sfl_spcodec_encode(v, SFL_ENC_Q8, buf, sizeof(buf), &len), 0);
    sfl_spvec_t *d = NULL;
    assert_int_equal(sfl_spcodec_decode(buf, len, 300, 3, &d), 0);
    assert_true(d->val[0] == DBL_MAX && d->val[1] == 0.0);
    sfl_spvec_free(d);
    sfl_spvec_free(v);
}

/* decode_into: the caller's storage is reused (no allocation once it is
 * large enough), grown when too small, and a failure leaves nnz 0 with the
 * same code as decode. */
static void test_spcodec_decode_into(void **state)
{
    (void)state;
    sfl_spvec_t *dst = NULL;

    assert_int_equal(sfl_spvec_new(0, 1, &dst), 0);
    /* too small: grows to the three entries */
    assert_int_equal(sfl_spcodec_decode_into(golden_f64, sizeof(golden_f64), 300, 300, dst), 0);
    assert_true(dst->cap >= 3);
    assert_int_equal(dst->dim, 300);
    assert_int_equal(dst->nnz, 3);
    assert_int_equal(dst->idx[2], 299);
    assert_true(dst->val[1] == -2.5);

    /* warm: every golden decodes with no allocation at all */
    failalloc_install();
    failalloc_arm(-1);
    for (size_t g = 0; g < 3; g++) {
        uint32_t *idx = dst->idx;

        assert_int_equal(
            sfl_spcodec_decode_into(goldens[g].bytes, goldens[g].len, 300, 3, dst), 0);
        assert_ptr_equal(dst->idx, idx);
        assert_int_equal(dst->nnz, 3);
        assert_int_equal(dst->idx[1], 130);
    }
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();

    /* failures: same code as decode, nnz 0, dim and capacity unchanged */
    uint32_t cap = dst->cap;
    for (size_t g = 0; g < 3; g++) {
        for (size_t n = 0; n < goldens[g].len; n++) {
            sfl_spvec_t *d = NULL;
            int want = sfl_spcodec_decode(goldens[g].bytes, n, 300, 300, &d);

            assert_int_equal(want, SFL_ETRUNC);
            dst->nnz = 2;
            assert_int_equal(sfl_spcodec_decode_into(goldens[g].bytes, n, 300, 300, dst), want);
            assert_int_equal(dst->nnz, 0);
            assert_int_equal(dst->dim, 300);
            assert_int_equal(dst->cap, cap);
        }
    }
    assert_int_equal(sfl_spcodec_decode_into(golden_f64, sizeof(golden_f64), 300, 2, dst),
                     SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "nnz 3 exceeds limit 2 at byte 2"));
    assert_int_equal(dst->nnz, 0);

    /* a hostile count is refused before dst grows */
    const uint8_t p[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0xFE, 0xFF, 0xFF, 0xFF, 0x0F, 0x00,
                         0x00, 0x00, 0x00};
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_spcodec_decode_into(p, sizeof(p), UINT32_MAX, UINT32_MAX, dst),
                     SFL_ETRUNC);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    assert_int_equal(dst->cap, cap);
    sfl_spvec_free(dst);
}

static sfl_spvec_t *fa_out;

static void test_spcodec_failalloc(void **state)
{
    (void)state;
    FAILALLOC_EACH(sfl_spcodec_decode(golden_f32, sizeof(golden_f32), 300, 300, &fa_out), {
        if (fa_rc_ == 0) {
            assert_int_equal(fa_out->nnz, 3);
            assert_int_equal(fa_out->idx[2], 299);
        } else {
            assert_null(fa_out);
        }
        sfl_spvec_free(fa_out);
        fa_out = NULL;
    });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spcodec_golden),
        cmocka_unit_test(test_spcodec_edges),
        cmocka_unit_test(test_spcodec_roundtrip),
        cmocka_unit_test(test_spcodec_info_limit),
        cmocka_unit_test(test_spcodec_truncated),
        cmocka_unit_test(test_spcodec_malformed),
        cmocka_unit_test(test_spcodec_layouts_malformed),
        cmocka_unit_test(test_spcodec_hostile_sizes),
        cmocka_unit_test(test_spcodec_encode_errors),
        cmocka_unit_test(test_spcodec_decode_into),
        cmocka_unit_test(test_spcodec_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/savec.h"
#include "testutil.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- masks: known answers ------------------------------------------------ */

/* RFC 8439 Appendix A.1, the ChaCha20 block function's test vectors #1-#4
 * (all with the zero nonce; #5 has another nonce, so it is not a mask). The
 * bytes were checked against OpenSSL's ChaCha20 through python3-cryptography. */
static const struct {
    uint8_t key[32];
    uint32_t counter;
    uint8_t stream[64];
} rfc_a1[] = {
    {{0},
     0,
     {0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90, 0x40, 0x5d, 0x6a, 0xe5, 0x53,
      0x86, 0xbd, 0x28, 0xbd, 0xd2, 0x19, 0xb8, 0xa0, 0x8d, 0xed, 0x1a, 0xa8, 0x36,
      0xef, 0xcc, 0x8b, 0x77, 0x0d, 0xc7, 0xda, 0x41, 0x59, 0x7c, 0x51, 0x57, 0x48,
      0x8d, 0x77, 0x24, 0xe0, 0x3f, 0xb8, 0xd8, 0x4a, 0x37, 0x6a, 0x43, 0xb8, 0xf4,
      0x15, 0x18, 0xa1, 0x1c, 0xc3, 0x87, 0xb6, 0x69, 0xb2, 0xee, 0x65, 0x86}},
    {{0},
     1,
     {0x9f, 0x07, 0xe7, 0xbe, 0x55, 0x51, 0x38, 0x7a, 0x98, 0xba, 0x97, 0x7c, 0x73,
      0x2d, 0x08, 0x0d, 0xcb, 0x0f, 0x29, 0xa0, 0x48, 0xe3, 0x65, 0x69, 0x12, 0xc6,
      0x53, 0x3e, 0x32, 0xee, 0x7a, 0xed, 0x29, 0xb7, 0x21, 0x76, 0x9c, 0xe6, 0x4e,
      0x43, 0xd5, 0x71, 0x33, 0xb0, 0x74, 0xd8, 0x39, 0xd5, 0x31, 0xed, 0x1f, 0x28,
      0x51, 0x0a, 0xfb, 0x45, 0xac, 0xe1, 0x0a, 0x1f, 0x4b, 0x79, 0x4d, 0x6f}},
    {{[31] = 0x01},
     1,
     {0x3a, 0xeb, 0x52, 0x24, 0xec, 0xf8, 0x49, 0x92, 0x9b, 0x9d, 0x82, 0x8d, 0xb1,
      0xce, 0xd4, 0xdd, 0x83, 0x20, 0x25, 0xe8, 0x01, 0x8b, 0x81, 0x60, 0xb8, 0x22,
      0x84, 0xf3, 0xc9, 0x49, 0xaa, 0x5a, 0x8e, 0xca, 0x00, 0xbb, 0xb4, 0xa7, 0x3b,
      0xda, 0xd1, 0x92, 0xb5, 0xc4, 0x2f, 0x73, 0xf2, 0xfd, 0x4e, 0x27, 0x36, 0x44,
      0xc8, 0xb3, 0x61, 0x25, 0xa6, 0x4a, 0xdd, 0xeb, 0x00, 0x6c, 0x13, 0xa0}},
    {{[1] = 0xff},
     2,
     {0x72, 0xd5, 0x4d, 0xfb, 0xf1, 0x2e, 0xc4, 0x4b, 0x36, 0x26, 0x92, 0xdf, 0x94,
      0x13, 0x7f, 0x32, 0x8f, 0xea, 0x8d, 0xa7, 0x39, 0x90, 0x26, 0x5e, 0xc1, 0xbb,
      0xbe, 0xa1, 0xae, 0x9a, 0xf0, 0xca, 0x13, 0xb2, 0x5a, 0xa2, 0x6c, 0xb4, 0xa6,
      0x48, 0xcb, 0x9b, 0x9d, 0x1b, 0xe6, 0x5b, 0x2c, 0x09, 0x24, 0xa6, 0x6c, 0x54,
      0xd5, 0x45, 0xec, 0x1b, 0x73, 0x74, 0xf4, 0x87, 0x2e, 0x99, 0xf0, 0x96}},
};

static void test_savec_mask_rfc8439(void **state)
{
    (void)state;
    uint32_t w[16];

    for (size_t t = 0; t < sizeof rfc_a1 / sizeof rfc_a1[0]; t++) {
        /* block counter c holds words [16 c, 16 c + 16) */
        sfl_sa_mask_words(rfc_a1[t].key, 16 * (uint64_t)rfc_a1[t].counter, w, 16);
        for (int j = 0; j < 16; j++)
            assert_int_equal(w[j], le32(rfc_a1[t].stream + 4 * j));
    }
    /* the first words of TV #1 through the streaming adder */
    uint32_t v[4] = {0};
    sfl_sa_mask_add(rfc_a1[0].key, 1, v, 4);
    assert_int_equal(v[0], 0xade0b876u);
    assert_int_equal(v[3], 0x28bd8653u);
}

/* An independent one-shot call of libsodium over more than one chunk. */
static void test_savec_mask_matches_libsodium(void **state)
{
    (void)state;
    enum { N = 3000 };
    static const uint8_t zero_nonce[12];
    uint8_t key[32], *bytes = malloc(4 * N);
    uint32_t *w = malloc(4 * N);

    assert_non_null(bytes);
    assert_non_null(w);
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(0xa0 + i);
    assert_int_equal(crypto_stream_chacha20_ietf(bytes, 4 * N, zero_nonce, key), 0);
    sfl_sa_mask_words(key, 0, w, N);
    for (int j = 0; j < N; j++)
        assert_int_equal(w[j], le32(bytes + 4 * j));
    free(bytes);
    free(w);
}

static void test_savec_mask_random_access(void **state)
{
    (void)state;
    enum { N = 2100 };
    uint8_t key[32];
    uint32_t all[N], part[N], one;

    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(7 * i + 1);
    sfl_sa_mask_words(key, 0, all, N);

    memset(part, 0, sizeof part);
    sfl_sa_mask_words(key, 0, part, 7);
    sfl_sa_mask_words(key, 7, part + 7, 293);
    sfl_sa_mask_words(key, 300, part + 300, 700);
    sfl_sa_mask_words(key, 1000, part + 1000, N - 1000);
    assert_memory_equal(part, all, sizeof all);

    /* block edges (16 words) and the 64-block chunk edge (1024 words) */
    static const uint64_t at[] = {0, 1, 15, 16, 17, 31, 32, 1023, 1024, 1025, 2047, 2048, 2099};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        sfl_sa_mask_words(key, at[i], &one, 1);
        assert_int_equal(one, all[at[i]]);
    }
    sfl_rng_t r;
    sfl_rng_seed(&r, 11, 0, 0, SFL_STREAM_DATA);
    for (int t = 0; t < 200; t++) {
        uint64_t a = sfl_rng_below(&r, N), len = sfl_rng_below(&r, N - a + 1);
        sfl_sa_mask_words(key, a, part, len);
        assert_memory_equal(part, all + a, 4 * len);
    }
    sfl_sa_mask_words(key, 5, part, 0); /* n = 0 writes nothing */

    /* far into the stream: word 2^36 - 1 is the last of block 2^32 - 1 */
    uint32_t tail[3];
    static const uint8_t zero_nonce[12];
    uint8_t blk[64] = {0};
    sfl_sa_mask_words(key, ((uint64_t)1 << 36) - 3, tail, 3);
    crypto_stream_chacha20_ietf_xor_ic(blk, blk, 64, zero_nonce, UINT32_MAX, key);
    for (int j = 0; j < 3; j++)
        assert_int_equal(tail[j], le32(blk + 4 * (13 + j)));
}

static void test_savec_mask_add_cancel(void **state)
{
    (void)state;
    enum { N = 5000, P = 3 };
    uint8_t key[P][P][32];
    uint32_t *q[P], *y[P], *orig = malloc(4 * N), *w = malloc(4 * N);
    sfl_rng_t r;

    assert_non_null(orig);
    assert_non_null(w);
    sfl_rng_seed(&r, 12, 0, 0, SFL_STREAM_DATA);
    for (int j = 0; j < N; j++)
        orig[j] = (uint32_t)sfl_rng_u64(&r);

    /* +mask then -mask restores; the mask did change the vector */
    memcpy(w, orig, 4 * N);
    uint8_t k0[32] = {1, 2, 3};
    sfl_sa_mask_add(k0, 1, w, N);
    int same = 0;
    for (int j = 0; j < N; j++)
        same += w[j] == orig[j];
    assert_true(same < 5);
    sfl_sa_mask_add(k0, -1, w, N);
    assert_memory_equal(w, orig, 4 * N);

    /* adding to zeros gives the words, subtracting their negation */
    uint32_t z[40] = {0}, m[40];
    sfl_sa_mask_words(k0, 0, m, 40);
    sfl_sa_mask_add(k0, 1, z, 40);
    assert_memory_equal(z, m, sizeof m);
    memset(z, 0, sizeof z);
    sfl_sa_mask_add(k0, -1, z, 40);
    for (int j = 0; j < 40; j++)
        assert_int_equal(z[j], 0u - m[j]);

    /* three parties, pairwise keys K_uv = K_vu: u < v adds, v > u subtracts;
     * the masked inputs sum (mod 2^32) to the plain sum */
    for (int u = 0; u < P; u++)
        for (int v = u + 1; v < P; v++)
            for (int i = 0; i < 32; i++)
                key[u][v][i] = key[v][u][i] = (uint8_t)(sfl_rng_u64(&r));
    for (int u = 0; u < P; u++) {
        q[u] = malloc(4 * N);
        y[u] = malloc(4 * N);
        assert_non_null(q[u]);
        assert_non_null(y[u]);
        for (int j = 0; j < N; j++)
            q[u][j] = (uint32_t)sfl_rng_u64(&r);
        memcpy(y[u], q[u], 4 * N);
        for (int v = 0; v < P; v++)
            if (v != u)
                sfl_sa_mask_add(key[u][v], u < v ? 1 : -1, y[u], N);
        assert_memory_not_equal(y[u], q[u], 4 * N);
    }
    for (int j = 0; j < N; j++) {
        uint32_t plain = 0, masked = 0;
        for (int u = 0; u < P; u++) {
            plain += q[u][j];
            masked += y[u][j];
        }
        assert_int_equal(masked, plain);
    }
    for (int u = 0; u < P; u++) {
        free(q[u]);
        free(y[u]);
    }
    free(orig);
    free(w);
}

/* ---- support ------------------------------------------------------------- */

/* The rank rule of savec.h written out again, independently of savec.c. */
/* The rank by its definition in sfl/crypto/savec.h, through libsodium's own
 * ChaCha20 (not the library's mask words). */
static uint64_t rank_of(const uint8_t nonce[32], uint32_t i)
{
    uint8_t in[46], key[32], ks[8];
    uint64_t r = 0;

    memcpy(in, "sfl-sa-explore", 14);
    memcpy(in + 14, nonce, 32);
    crypto_generichash(key, 32, in, 46, NULL, 0);
    {
        static const uint8_t zero_nonce[12];
        uint8_t block[64], zero[64] = {0};

        /* the block holding bytes 8 i .. 8 i + 7 */
        crypto_stream_chacha20_ietf_xor_ic(block, zero, 64, zero_nonce, (8 * i) / 64, key);
        memcpy(ks, block + (8 * i) % 64, 8);
    }
    for (int b = 7; b >= 0; b--)
        r = r << 8 | ks[b];
    return r;
}

static int rank_less(const uint8_t nonce[32], uint32_t a, uint32_t b)
{
    uint64_t ra = rank_of(nonce, a), rb = rank_of(nonce, b);
    return ra < rb || (ra == rb && a < b);
}

static int contains(const uint32_t *s, uint32_t n, uint32_t i)
{
    for (uint32_t j = 0; j < n; j++)
        if (s[j] == i)
            return 1;
    return 0;
}

/* Golden output from Python's hashlib.blake2b (digest_size=32) following the
 * rule in savec.h: nonce 00 01 .. 1f, d = 40. */
static void test_savec_support_golden(void **state)
{
    (void)state;
    uint8_t nonce[32];
    double g[40] = {0};
    uint32_t out[40], n;

    for (int i = 0; i < 32; i++)
        nonce[i] = (uint8_t)i;
    /* rank(0), and the two sets below, from python3's cryptography and
     * hashlib:
     *   key = blake2b(b"sfl-sa-explore" + nonce, digest_size=32).digest()
     *   ks = Cipher(ChaCha20(key, bytes(16)), None).encryptor().update(bytes(320))
     *   rank = lambda i: struct.unpack("<Q", ks[8 * i:8 * i + 8])[0] */
    assert_true(rank_of(nonce, 0) == UINT64_C(0xb306565c2093d0e3));

    g[3] = 1.0, g[17] = -2.0, g[29] = 0.5;
    static const uint32_t want1[10] = {3, 5, 7, 13, 15, 17, 20, 29, 32, 38};
    assert_int_equal(sfl_sa_support(g, 40, 10, nonce, out, &n), 0);
    assert_int_equal(n, 10);
    assert_memory_equal(out, want1, sizeof want1);

    /* the model's support (the even indices) exceeds size */
    for (int i = 0; i < 40; i++)
        g[i] = i % 2 == 0 ? 1.0 : 0.0;
    static const uint32_t want2[6] = {20, 22, 30, 32, 36, 38};
    assert_int_equal(sfl_sa_support(g, 40, 6, nonce, out, &n), 0);
    assert_int_equal(n, 6);
    assert_memory_equal(out, want2, sizeof want2);
}

static void test_savec_support_props(void **state)
{
    (void)state;
    enum { D = 2000, NS = 50, SIZE = 300 };
    static double g[D];
    static uint32_t s1[SIZE], s2[SIZE], s3[SIZE];
    uint8_t nonce[32], nonce2[32];
    uint32_t n1, n2, n3;
    sfl_rng_t r;

    sfl_rng_seed(&r, 13, 0, 0, SFL_STREAM_DATA);
    for (int i = 0; i < 32; i++)
        nonce[i] = nonce2[i] = (uint8_t)(0x40 + i);
    nonce2[31] ^= 1;
    uint32_t sup[NS];
    assert_int_equal(sfl_rng_sample(&r, D, NS, sup), 0);
    for (int j = 0; j < NS; j++)
        g[sup[j]] = sfl_rng_gauss(&r, 0, 1) + 3.0;

    assert_int_equal(sfl_sa_support(g, D, SIZE, nonce, s1, &n1), 0);
    assert_int_equal(sfl_sa_support(g, D, SIZE, nonce, s2, &n2), 0);
    assert_int_equal(n1, SIZE);
    assert_int_equal(n2, SIZE);
    assert_memory_equal(s1, s2, sizeof s1); /* deterministic */
    for (uint32_t j = 1; j < n1; j++)
        assert_true(s1[j - 1] < s1[j]); /* ascending, so distinct */
    assert_true(s1[n1 - 1] < D);
    for (int j = 0; j < NS; j++)
        assert_true(contains(s1, n1, sup[j]));

    /* the exploration set is exactly the SIZE - NS best ranked others */
    uint64_t worst_in = 0;
    uint32_t worst_i = 0;
    for (uint32_t j = 0; j < n1; j++)
        if (g[s1[j]] == 0.0 && (worst_in == 0 || rank_less(nonce, worst_i, s1[j])))
            worst_in = 1, worst_i = s1[j];
    for (uint32_t i = 0; i < D; i++)
        if (g[i] == 0.0 && !contains(s1, n1, i))
            assert_true(rank_less(nonce, worst_i, i));

    /* another nonce, another exploration set */
    assert_int_equal(sfl_sa_support(g, D, SIZE, nonce2, s3, &n3), 0);
    assert_int_equal(n3, SIZE);
    uint32_t common = 0;
    for (uint32_t j = 0; j < n3; j++)
        common += contains(s1, n1, s3[j]);
    /* 50 shared for sure; 250 of 1950 drawn twice share ~32 more */
    assert_true(common < NS + 100);
    for (int j = 0; j < NS; j++)
        assert_true(contains(s3, n3, sup[j]));
}

static void test_savec_support_large_model(void **state)
{
    (void)state;
    enum { D = 1000, SIZE = 100 };
    static double g[D];
    static uint32_t s[SIZE];
    uint8_t nonce[32] = {9};
    uint32_t n;

    for (int i = 0; i < D; i++)
        g[i] = i % 3 == 0 ? 0.0 : 1.0; /* 666 nonzero */
    assert_int_equal(sfl_sa_support(g, D, SIZE, nonce, s, &n), 0);
    assert_int_equal(n, SIZE);
    uint32_t worst = s[0];
    for (uint32_t j = 0; j < n; j++) {
        assert_true(g[s[j]] != 0.0);
        assert_true(j == 0 || s[j - 1] < s[j]);
        if (rank_less(nonce, worst, s[j]))
            worst = s[j];
    }
    for (uint32_t i = 0; i < D; i++)
        if (g[i] != 0.0 && !contains(s, n, i))
            assert_true(rank_less(nonce, worst, i));
}

static void test_savec_support_edges(void **state)
{
    (void)state;
    double g[30] = {0};
    uint32_t s[30], n = 77;
    uint8_t nonce[32] = {0};

    /* size >= d: every index */
    g[4] = 1.0;
    assert_int_equal(sfl_sa_support(g, 30, 1000, nonce, s, &n), 0);
    assert_int_equal(n, 30);
    for (uint32_t j = 0; j < 30; j++)
        assert_int_equal(s[j], j);
    /* the support fills size exactly: nothing explored */
    g[9] = -1.0, g[21] = NAN; /* NaN != 0: in the support */
    assert_int_equal(sfl_sa_support(g, 30, 3, nonce, s, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(s[0], 4);
    assert_int_equal(s[1], 9);
    assert_int_equal(s[2], 21);
    /* an all-zero model: only exploration */
    double z[30] = {0};
    assert_int_equal(sfl_sa_support(z, 30, 5, nonce, s, &n), 0);
    assert_int_equal(n, 5);
    /* d = 1 */
    assert_int_equal(sfl_sa_support(z, 1, 5, nonce, s, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(s[0], 0);

    assert_int_equal(sfl_sa_support(g, 0, 5, nonce, s, &n), SFL_EINVAL);
    assert_int_equal(n, 0);
    assert_int_equal(sfl_sa_support(g, 30, 0, nonce, s, &n), SFL_EINVAL);
    assert_int_equal(n, 0);
}

static void test_savec_support_failalloc(void **state)
{
    (void)state;
    double g[64] = {0};
    uint32_t s[16], n, want[16];
    uint8_t nonce[32] = {5};

    g[1] = g[50] = 1.0;
    assert_int_equal(sfl_sa_support(g, 64, 16, nonce, want, &n), 0);
    FAILALLOC_EACH(sfl_sa_support(g, 64, 16, nonce, s, &n), (void)0);
    assert_int_equal(n, 16);
    assert_memory_equal(s, want, sizeof want);
}

/* ---- quantization -------------------------------------------------------- */

static void test_savec_quant_init(void **state)
{
    (void)state;
    sfl_sa_quant_t q;
    /* B = 30 - floor(log2 n_max): n_max 2^B <= 2^31 - 2^B */
    static const struct {
        uint32_t n_max, bits;
    } b[] = {{1, 30}, {2, 29}, {3, 29}, {4, 28}, {5, 28}, {100, 24}, {128, 23},
             {1u << 30, 0}, {(1u << 30) - 1, 1}};

    for (size_t t = 0; t < sizeof b / sizeof b[0]; t++) {
        assert_int_equal(sfl_sa_quant_init(&q, 1.0, 1.0, b[t].n_max), 0);
        assert_int_equal(q.bits, b[t].bits);
        assert_int_equal(q.frac, (int32_t)b[t].bits); /* clip 1: 2^f = 2^B */
        assert_true((uint64_t)b[t].n_max << q.bits < (UINT64_C(1) << 31));
    }
    /* f = the largest integer with clip 2^f <= 2^B */
    static const struct {
        double clip;
        int32_t frac;
    } f[] = {{0.75, 24}, {0.5, 25}, {0.3, 25}, {0.25, 26}, {1e-3, 33},
             {3.0, 22}, {16.0, 20}, {1e9, -6}, {0x1p24, 0}, {0x1.8p24, -1}};
    for (size_t t = 0; t < sizeof f / sizeof f[0]; t++) {
        assert_int_equal(sfl_sa_quant_init(&q, f[t].clip, 2.0, 100), 0);
        assert_int_equal(q.bits, 24);
        assert_int_equal(q.frac, f[t].frac);
        assert_true(ldexp(f[t].clip, q.frac) <= 0x1p24);
        assert_true(ldexp(f[t].clip, q.frac + 1) > 0x1p24);
    }
    assert_int_equal(q.n_max, 100);
    assert_true(q.w_max == 2.0);

    assert_int_equal(sfl_sa_quant_init(&q, 0.0, 1.0, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, -1.0, 1.0, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, NAN, 1.0, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, INFINITY, 1.0, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 0.0, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, INFINITY, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, NAN, 4), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 1.0, 0), SFL_EINVAL);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 1.0, (1u << 30) + 1), SFL_EINVAL);
}

/* Sum of count quantized vectors of k + 1 words, mod 2^32. */
static void add_into(uint32_t *acc, const uint32_t *x, uint32_t k)
{
    for (uint32_t j = 0; j < k + 1; j++)
        acc[j] += x[j];
}

static void test_savec_quant_roundtrip(void **state)
{
    (void)state;
    sfl_sa_quant_t q;
    sfl_rng_t r;
    enum { K = 6 };
    /* clip 0.5 with B = 28 gives f = 29: every value here is exact */
    const double v[K] = {0.5, -0.5, 0.0, 0x1p-29, -0x1p-29, 0.25};
    uint32_t out[K + 1], keep[K + 1];
    double mean[K], wsum, w10 = 10.0, w25 = 2.5;

    sfl_rng_seed(&r, 14, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_sa_quant_init(&q, 0.5, 10.0, 4), 0);
    assert_int_equal(q.frac, 29);
    assert_int_equal(sfl_sa_quantize(&q, v, K, 10.0, &r, out), 0);
    assert_int_equal(out[0], 1u << 28);
    assert_int_equal(out[1], 0u - (1u << 28));
    assert_int_equal(out[2], 0);
    assert_int_equal(out[3], 1);
    assert_int_equal(out[4], 0xffffffffu);
    assert_int_equal(out[K], 1); /* the canary; no weight word */
    assert_int_equal(sfl_sa_dequantize(&q, out, K, 1, &w10, mean, &wsum), 0);
    for (int j = 0; j < K; j++)
        assert_true(mean[j] == v[j]);
    assert_true(wsum == 1.0);

    /* clipping, and a value far below one step rounds to 0 or 1 step */
    const double big[K] = {7.0, -1e300, 1e-300, -1e-300, 0.5000001, -0.75};
    assert_int_equal(sfl_sa_quantize(&q, big, K, 10.0, &r, out), 0);
    assert_int_equal(sfl_sa_dequantize(&q, out, K, 1, &w10, mean, &wsum), 0);
    assert_true(mean[0] == 0.5);
    assert_true(mean[1] == -0.5);
    assert_true(fabs(mean[2]) <= 0x1p-29);
    assert_true(fabs(mean[3]) <= 0x1p-29);
    assert_true(mean[4] == 0.5);
    assert_true(mean[5] == -0.5);

    /* weight capping: rho = min(weight, w_max) / w_max */
    assert_int_equal(sfl_sa_quantize(&q, v, K, 25.0, &r, out), 0);
    assert_int_equal(out[0], 1u << 28);
    assert_true(sfl_sa_rho(&q, 25.0) == 1.0 && sfl_sa_rho(&q, 2.5) == 0.25);
    assert_true(sfl_sa_rho(&q, 0.0) == 0.0 && sfl_sa_rho(&q, NAN) == 0.0 &&
                sfl_sa_rho(&q, -1.0) == 0.0 && sfl_sa_rho(&q, INFINITY) == 0.0);
    assert_int_equal(sfl_sa_quantize(&q, v, K, 2.5, &r, out), 0);
    assert_int_equal(out[0], 1u << 26); /* rho = 1/4 */
    assert_int_equal(sfl_sa_dequantize(&q, out, K, 1, &w25, mean, &wsum), 0);
    assert_true(wsum == 0.25);
    assert_true(mean[0] == 0.5); /* a lone input's mean is its value */

    /* refusals leave out and the rng untouched */
    sfl_rng_t before = r;
    memcpy(keep, out, sizeof out);
    double bad[K] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
    bad[K - 1] = NAN;
    assert_int_equal(sfl_sa_quantize(&q, bad, K, 1.0, &r, out), SFL_ENUMERIC);
    bad[K - 1] = INFINITY;
    assert_int_equal(sfl_sa_quantize(&q, bad, K, 1.0, &r, out), SFL_ENUMERIC);
    bad[K - 1] = -INFINITY;
    assert_int_equal(sfl_sa_quantize(&q, bad, K, 1.0, &r, out), SFL_ENUMERIC);
    assert_int_equal(sfl_sa_quantize(&q, v, K, 0.0, &r, out), SFL_EINVAL);
    assert_int_equal(sfl_sa_quantize(&q, v, K, -1.0, &r, out), SFL_EINVAL);
    assert_int_equal(sfl_sa_quantize(&q, v, K, NAN, &r, out), SFL_EINVAL);
    assert_int_equal(sfl_sa_quantize(&q, v, K, INFINITY, &r, out), SFL_EINVAL);
    assert_memory_equal(out, keep, sizeof out);
    assert_memory_equal(r.s, before.s, sizeof r.s);
    sfl_sa_quant_t zero = {0};
    assert_int_equal(sfl_sa_quantize(&zero, v, K, 1.0, &r, out), SFL_EINVAL);

    /* k = 0: the canary only */
    assert_int_equal(sfl_sa_quantize(&q, NULL, 0, 5.0, &r, out), 0);
    assert_int_equal(out[0], 1);
}

/* n_max inputs, all at +clip or all at -clip with the full weight: the
 * largest sums there can be, which must not wrap when read as int32. */
static void test_savec_quant_no_wrap(void **state)
{
    (void)state;
    static const uint32_t nmax[] = {1, 2, 3, 4, 64, 100, 1000};
    static const double clips[] = {1.0, 0.75, 3e-4};
    sfl_rng_t r;

    sfl_rng_seed(&r, 15, 0, 0, SFL_STREAM_DATA);
    for (size_t a = 0; a < sizeof nmax / sizeof nmax[0]; a++)
        for (size_t c = 0; c < sizeof clips / sizeof clips[0]; c++)
            for (int sign = -1; sign <= 1; sign += 2) {
                sfl_sa_quant_t q;
                double v[2] = {sign * clips[c], sign * 10 * clips[c]}, mean[2], wsum;
                double *w = malloc(nmax[a] * sizeof(double));
                uint32_t out[3], acc[3] = {0};

                assert_int_equal(sfl_sa_quant_init(&q, clips[c], 1.0, nmax[a]), 0);
                assert_non_null(w);
                for (uint32_t u = 0; u < nmax[a]; u++) {
                    w[u] = 3.0;
                    assert_int_equal(sfl_sa_quantize(&q, v, 2, 3.0, &r, out), 0);
                    add_into(acc, out, 2);
                }
                /* at the bound, and within it */
                assert_int_equal(sfl_sa_dequantize(&q, acc, 2, nmax[a], w, mean, &wsum), 0);
                free(w);
                assert_close(wsum, (double)nmax[a], 0, 0);
                for (int j = 0; j < 2; j++)
                    assert_close(mean[j], sign * clips[c], 0, ldexp(1.0, -q.frac));
            }
}

/* Five clients with different weights, masked as in the protocol: the
 * decoded mean is the weighted mean of the clipped values within
 * n 2^-f / wsum: each stochastic rounding errs by less than one step
 * (2^-f), n of them per slot; the divisor is the public weights' exact
 * sum. */
static void test_savec_quant_weighted_mean(void **state)
{
    (void)state;
    enum { P = 5, K = 200 };
    static const double weight[P] = {1.0, 3.0, 40.0, 7.5, 0.2}; /* w_max 10 */
    double v[P][K], want[K], mean[K], wsum, rho_sum = 0;
    uint32_t out[K + 1], acc[K + 1] = {0};
    sfl_sa_quant_t q;
    sfl_rng_t r;
    uint8_t self[P][32], pair[P][32]; /* pair[u]: the pair (u, u + 1 mod P) */

    sfl_rng_seed(&r, 16, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_sa_quant_init(&q, 0.2, 10.0, 8), 0);
    for (int u = 0; u < P; u++)
        for (int i = 0; i < 32; i++) {
            self[u][i] = (uint8_t)sfl_rng_u64(&r);
            pair[u][i] = (uint8_t)sfl_rng_u64(&r);
        }
    memset(want, 0, sizeof want);
    for (int u = 0; u < P; u++) {
        double rho = fmin(weight[u], 10.0) / 10.0;
        rho_sum += rho;
        for (int j = 0; j < K; j++) {
            v[u][j] = sfl_rng_gauss(&r, 0, 0.2); /* about a third clipped */
            want[j] += rho * fmax(-0.2, fmin(0.2, v[u][j]));
        }
        assert_int_equal(sfl_sa_quantize(&q, v[u], K, weight[u], &r, out), 0);
        /* a self mask and a ring of pairwise masks: u adds its pair with
         * u + 1, subtracts the one with u - 1 */
        sfl_sa_mask_add(self[u], 1, out, K + 1);
        sfl_sa_mask_add(pair[u], 1, out, K + 1);
        sfl_sa_mask_add(pair[(u + P - 1) % P], -1, out, K + 1);
        add_into(acc, out, K);
    }
    for (int u = 0; u < P; u++) /* the server removes the self masks */
        sfl_sa_mask_add(self[u], -1, acc, K + 1);

    assert_int_equal(sfl_sa_dequantize(&q, acc, K, P, weight, mean, &wsum), 0);
    assert_close(wsum, rho_sum, 1e-15, 0);
    double tol = P * ldexp(1.0, -q.frac) / wsum;
    for (int j = 0; j < K; j++)
        assert_close(mean[j], want[j] / rho_sum, 0, tol);
}

static void test_savec_quant_canary(void **state)
{
    (void)state;
    sfl_sa_quant_t q;
    sfl_rng_t r;
    const double v[3] = {0.1, -0.2, 0.3};
    uint32_t out[4], acc[4] = {0};
    double mean[3], wsum, w[11];

    for (int u = 0; u < 11; u++)
        w[u] = 1.0;
    sfl_rng_seed(&r, 17, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 1.0, 10), 0);
    for (int u = 0; u < 3; u++) {
        assert_int_equal(sfl_sa_quantize(&q, v, 3, 1.0, &r, out), 0);
        add_into(acc, out, 3);
    }
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 3, w, mean, &wsum), 0);
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 2, w, mean, &wsum), SFL_EBADSIG);
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 4, w, mean, &wsum), SFL_EBADSIG);
    acc[3] += 0x10000; /* a client masked with the wrong vector */
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 3, w, mean, &wsum), SFL_EBADSIG);
    acc[3] -= 0x10000;
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 0, w, mean, &wsum), SFL_EINVAL);
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 11, w, mean, &wsum), SFL_EINVAL);
    /* the public weights must be weights */
    w[1] = 0;
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 3, w, mean, &wsum), SFL_EINVAL);
    w[1] = NAN;
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 3, w, mean, &wsum), SFL_EINVAL);
    w[1] = 1.0;
    assert_int_equal(sfl_sa_dequantize(&q, acc, 3, 3, w, mean, &wsum), 0);
}

/* z = +-0.3 steps rounds to 1 (resp. -1) step with probability 0.3: the
 * mean of N roundings has standard deviation sqrt(0.21 / N) ~ 0.0015, the
 * tolerance is 7 of them; the seeded rng makes the outcome fixed anyway. */
static void test_savec_quant_unbiased(void **state)
{
    (void)state;
    enum { N = 100000 };
    double *v = malloc(N * sizeof *v);
    uint32_t *out = malloc((N + 1) * sizeof *out), *again = malloc((N + 1) * sizeof *again);
    sfl_sa_quant_t q;
    sfl_rng_t r, r2;

    assert_non_null(v);
    assert_non_null(out);
    assert_non_null(again);
    assert_int_equal(sfl_sa_quant_init(&q, 0.3, 1.0, 16), 0);
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int j = 0; j < N; j++)
            v[j] = sign * ldexp(0.3, -q.frac);
        sfl_rng_seed(&r, 18, 0, 0, SFL_STREAM_DATA);
        assert_int_equal(sfl_sa_quantize(&q, v, N, 1.0, &r, out), 0);
        long ups = 0;
        for (int j = 0; j < N; j++) {
            uint32_t lo = sign > 0 ? 0u : 0xffffffffu, hi = sign > 0 ? 1u : 0u;
            assert_true(out[j] == lo || out[j] == hi);
            ups += out[j] == hi;
        }
        double p_up = (double)ups / N, want = sign > 0 ? 0.3 : 0.7;
        assert_close(p_up, want, 0, 0.0105);
        /* replayable: the same seed gives the same rounding */
        sfl_rng_seed(&r2, 18, 0, 0, SFL_STREAM_DATA);
        assert_int_equal(sfl_sa_quantize(&q, v, N, 1.0, &r2, again), 0);
        assert_memory_equal(out, again, (N + 1) * sizeof *out);
    }
    free(v);
    free(out);
    free(again);
}

/* ---- a client's input with error feedback, the server's mean ------------- */

/* z = delta + e, by the same additions the library makes. */
static void z_of(const double *delta, const double *resid, uint32_t d, double *z)
{
    for (uint32_t j = 0; j < d; j++)
        z[j] = delta[j] + resid[j];
}

static void test_savec_client_topk(void **state)
{
    (void)state;
    enum { D = 20, K = 8 };
    static const uint32_t S[K] = {1, 3, 4, 7, 10, 12, 15, 19};
    /* inside S_t, by |z|: 19 (-0.9), then 4 and 12 tie at 0.5 (with the
     * residual), then 10 (0.45); off S_t, 0 and 2 are larger than all */
    double delta[D] = {[0] = 5.0, [2] = -4.0, [1] = 0.1, [3] = -0.2, [4] = 0.25, [7] = 0.3,
                       [10] = 0.45, [12] = -0.5, [15] = 0.05, [19] = -0.9, [5] = 1e-3};
    double resid[D] = {[4] = 0.25, [5] = 2.0, [15] = -0.3, [17] = 1.5};
    double z[D], vals[K], e[D];
    uint32_t out[K + 1];
    sfl_sa_quant_t q;
    sfl_topk_ws_t ws;
    sfl_rng_t r;

    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, K), 0);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 10.0, 4), 0);
    sfl_rng_seed(&r, 21, 1, 0, SFL_STREAM_SECAGG);

    for (uint32_t topk = 0; topk <= K + 2; topk++) {
        memcpy(e, resid, sizeof e);
        z_of(delta, e, D, z);
        assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, topk, 10.0, &r, &ws, vals,
                                              out),
                         0);
        /* the kept slots: the topk largest |z| of S_t, ties to the smaller
         * index (4 before 12) */
        static const uint32_t order[K] = {7, 2, 5, 4, 3, 6, 1, 0}; /* slots by rank */
        uint32_t kept = 0;
        for (uint32_t s = 0; s < K; s++) {
            int want = 0;
            for (uint32_t i = 0; i < topk && i < K; i++)
                want |= order[i] == s;
            if (want) {
                assert_true(vals[s] == z[S[s]]);
                kept++;
            } else {
                assert_true(vals[s] == 0.0);
            }
        }
        assert_int_equal(kept, topk < K ? topk : K);
        /* conservation, bit for bit: v + e_new == z everywhere, and the
         * residual of a kept slot is exactly 0 */
        uint32_t s = 0;
        for (uint32_t j = 0; j < D; j++) {
            double v = s < K && S[s] == j ? vals[s++] : 0.0;
            assert_true(v + e[j] == z[j]);
            if (v != 0.0)
                assert_true(e[j] == 0.0);
        }
        /* the canary */
        assert_int_equal(out[K], 1);
    }

    /* A second round carries the residual: what was dropped comes back. */
    double zero[D] = {0};
    memcpy(e, resid, sizeof e);
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 1, 10.0, &r, &ws, vals, out), 0);
    assert_true(vals[7] == -0.9);
    assert_int_equal(sfl_sa_client_vector(&q, zero, e, D, S, K, 1, 10.0, &r, &ws, vals, out), 0);
    assert_true(vals[2] == 0.5); /* slot of index 4: 0.25 + 0.25, kept over 12's -0.5 */
    assert_true(e[4] == 0.0 && e[12] == -0.5 && e[0] == 5.0 && e[17] == 1.5);
    sfl_topk_ws_close(&ws);
}

/* rho = min(weight, w_max) / w_max scales the values; no weight slot. */
static void test_savec_client_weights(void **state)
{
    (void)state;
    enum { D = 6, K = 4 };
    static const uint32_t S[K] = {0, 2, 3, 5};
    static const double weights[] = {1.0, 4.0, 16.0, 40.0};
    double delta[D] = {0.3, 9.0, -0.7, 0.01, 9.0, 2.5}, e[D], vals[K];
    uint32_t out[K + 1];
    sfl_sa_quant_t q;
    sfl_topk_ws_t ws;
    sfl_rng_t r;

    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, K), 0);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 16.0, 10), 0);
    sfl_rng_seed(&r, 22, 1, 0, SFL_STREAM_SECAGG);
    for (size_t w = 0; w < sizeof weights / sizeof weights[0]; w++) {
        double rho = fmin(weights[w], 16.0) / 16.0;

        memset(e, 0, sizeof e);
        assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, K, weights[w], &r, &ws,
                                              vals, out),
                         0);
        assert_int_equal(out[K], 1);
        for (uint32_t s = 0; s < K; s++) {
            /* clipped to [-1, 1] (2.5 at index 5), then rounded to a step */
            double want = ldexp(rho * fmax(-1.0, fmin(1.0, delta[S[s]])), q.frac);
            int32_t got = (int32_t)out[s];
            assert_true(fabs((double)got - want) < 1.0);
        }
        /* clipping is not fed back: the residual holds only what was not
         * selected (nothing, inside S_t) */
        assert_true(e[5] == 0.0 && e[1] == 9.0 && e[4] == 9.0);
    }
    sfl_topk_ws_close(&ws);
}

static void test_savec_client_refusals(void **state)
{
    (void)state;
    enum { D = 5, K = 3 };
    uint32_t S[K] = {0, 2, 4};
    double delta[D] = {0.1, 0.2, 0.3, 0.4, 0.5}, e[D] = {0.5, 0, 0, 0, 0}, keep[D], vals[K];
    uint32_t out[K + 1];
    sfl_sa_quant_t q;
    sfl_topk_ws_t ws;
    sfl_rng_t r, before;

    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, K), 0);
    assert_int_equal(sfl_sa_quant_init(&q, 1.0, 1.0, 2), 0);
    sfl_rng_seed(&r, 23, 1, 0, SFL_STREAM_SECAGG);
    before = r;
    memcpy(keep, e, sizeof e);
    /* a non-finite change off S_t, where nothing else would notice it */
    delta[1] = NAN;
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out),
                     SFL_ENUMERIC);
    delta[1] = 0.2;
    e[3] = INFINITY;
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out),
                     SFL_ENUMERIC);
    e[3] = 0;
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 0.0, &r, &ws, vals, out),
                     SFL_EINVAL);
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, NAN, &r, &ws, vals, out),
                     SFL_EINVAL);
    S[1] = 0; /* not ascending */
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out),
                     SFL_EINVAL);
    S[1] = 2;
    S[2] = D; /* out of range */
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out),
                     SFL_EINVAL);
    S[2] = 4;
    sfl_sa_quant_t zero = {0};
    assert_int_equal(sfl_sa_client_vector(&zero, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out),
                     SFL_EINVAL);
    assert_memory_equal(e, keep, sizeof e);
    assert_memory_equal(r.s, before.s, sizeof r.s);
    /* and a good call still works after them */
    assert_int_equal(sfl_sa_client_vector(&q, delta, e, D, S, K, 2, 1.0, &r, &ws, vals, out), 0);
    assert_true(vals[0] == 0.6 && vals[1] == 0.0 && vals[2] == 0.5);
    sfl_topk_ws_close(&ws);
}

/* Clients' inputs summed mod 2^32: the server's mean is the exact weighted
 * mean of the v_i on S_t within n 2^-f (each input is off by less than one
 * step), and 0 off S_t. */
static void test_savec_server_roundtrip(void **state)
{
    (void)state;
    enum { N = 7, D = 300, SIZE = 60, TOPK = 25 };
    double *delta = calloc(D, sizeof(double)), *e = calloc((size_t)N * D, sizeof(double));
    double *mean = calloc(D, sizeof(double)), *global = calloc(D, sizeof(double));
    double vals[SIZE], want[SIZE] = {0}, wsum, rho_sum = 0, ws_[N];
    uint32_t S[SIZE], k, out[SIZE + 1], acc[SIZE + 1];
    uint8_t nonce[SFL_SA_NONCE_BYTES];
    sfl_sa_quant_t q;
    sfl_topk_ws_t ws;
    sfl_rng_t r, data;

    assert_non_null(delta);
    assert_non_null(e);
    assert_non_null(mean);
    assert_non_null(global);
    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, SIZE), 0);
    sfl_rng_seed(&data, 24, 0, 0, SFL_STREAM_DATA);
    for (uint32_t j = 0; j < D; j += 11)
        global[j] = 1.0; /* a model support of 28 entries */
    memset(nonce, 0x5a, sizeof nonce);
    assert_int_equal(sfl_sa_support(global, D, SIZE, nonce, S, &k), 0);
    assert_int_equal(k, SIZE);
    /* weights 1..16 of w_max 16: every rho exact */
    assert_int_equal(sfl_sa_quant_init(&q, 4.0, 16.0, N), 0);
    for (int round = 0; round < 3; round++) {
        memset(acc, 0, sizeof acc);
        memset(want, 0, sizeof want);
        rho_sum = 0;
        for (uint32_t i = 0; i < N; i++) {
            double w = (double)(1 + (i * 5) % 16), rho = w / 16.0;

            for (uint32_t j = 0; j < D; j++)
                delta[j] = sfl_rng_gauss(&data, 0, 1.0);
            sfl_rng_seed(&r, 24, (uint64_t)round, i, SFL_STREAM_SECAGG);
            assert_int_equal(sfl_sa_client_vector(&q, delta, e + (size_t)i * D, D, S, k, TOPK, w,
                                                  &r, &ws, vals, out),
                             0);
            for (uint32_t s = 0; s < k; s++)
                want[s] += rho * fmax(-4.0, fmin(4.0, vals[s]));
            rho_sum += rho;
            ws_[i] = w;
            add_into(acc, out, k);
        }
        assert_int_equal(sfl_sa_server_mean(&q, acc, S, k, N, ws_, D, mean, &wsum), 0);
        assert_true(wsum == rho_sum);
        assert_true(wsum >= 1.0);
        uint32_t s = 0;
        for (uint32_t j = 0; j < D; j++) {
            if (s < k && S[s] == j)
                assert_close(mean[j], want[s++] / rho_sum, 0, N * ldexp(1.0, -q.frac) / wsum);
            else
                assert_true(mean[j] == 0.0);
        }
    }

    /* the canary counts the inputs; a bad support is refused */
    assert_int_equal(sfl_sa_server_mean(&q, acc, S, k, N - 1, ws_, D, mean, &wsum), SFL_EBADSIG);
    assert_int_equal(sfl_sa_server_mean(&q, acc, S, k, N, ws_, SIZE - 1, mean, &wsum),
                     SFL_EINVAL);
    uint32_t t = S[3];
    S[3] = S[2];
    assert_int_equal(sfl_sa_server_mean(&q, acc, S, k, N, ws_, D, mean, &wsum), SFL_EINVAL);
    S[3] = t;
    /* S_t = all of [0, d): the spread is the identity */
    uint32_t all[SIZE];
    for (uint32_t j = 0; j < SIZE; j++)
        all[j] = j;
    assert_int_equal(sfl_sa_server_mean(&q, acc, all, SIZE, N, ws_, SIZE, mean, &wsum), 0);
    sfl_topk_ws_close(&ws);
    free(delta);
    free(e);
    free(mean);
    free(global);
}

/* The metric words: sums of n_max clients' figures come back within one
 * step 2^-F each, counts exactly; every word stays below 2^B; beyond the
 * range a figure is clamped, a NaN or a negative one is 0. */
static void test_savec_metrics(void **state)
{
    (void)state;
    static const uint32_t ns[] = {17, 1000};

    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
        sfl_sa_quant_t q;
        uint32_t sum[SFL_SA_METRIC_WORDS] = {0}, w[SFL_SA_METRIC_WORDS];
        double want[SFL_SA_METRICS] = {0}, got[SFL_SA_METRICS];
        double step;

        assert_int_equal(sfl_sa_quant_init(&q, 100, 1000, ns[a]), 0);
        step = ldexp(1.0, -(2 * (int)q.bits - 32));
        for (uint32_t u = 0; u < ns[a]; u++) {
            double samples = 1000 + u, loss = 0.003 + 1e-5 * u, acc = (u % 7) / 7.0;
            double m[SFL_SA_METRICS] = {samples, samples * loss, 50, 50 * acc, 50 * loss};

            sfl_sa_metrics_encode(&q, m, w);
            for (int j = 0; j < SFL_SA_METRIC_WORDS; j++) {
                assert_true(w[j] < (UINT32_C(1) << q.bits));
                sum[j] += w[j];
            }
            for (int j = 0; j < SFL_SA_METRICS; j++)
                want[j] += m[j];
        }
        assert_int_equal(sfl_sa_metrics_decode(&q, sum, ns[a], got), 0);
        assert_true(got[0] == want[0] && got[2] == want[2]);
        for (int j = 1; j < SFL_SA_METRICS; j += j == 1 ? 2 : 1)
            assert_true(fabs(got[j] - want[j]) <= ns[a] * step / 2 + 1e-9 * want[j]);

        /* clamped, and 0 for NaN and negatives */
        double big[SFL_SA_METRICS] = {1e30, NAN, -5, INFINITY, 2};
        sfl_sa_metrics_encode(&q, big, w);
        assert_int_equal(sfl_sa_metrics_decode(&q, w, 1, got), 0);
        assert_true(got[0] == ldexp(1.0, 2 * (int)q.bits) - 1);
        assert_true(got[1] == 0 && got[2] == 0);
        assert_true(got[3] == (ldexp(1.0, 2 * (int)q.bits) - 1) * step);
        assert_true(got[4] == 2);
    }
}

/* Finding 2 of issue 23: the old input carried a weight word, summed under
 * the masks, and the mean was divided by it; one member setting it to
 * -2^30 made the weight sum 0 (the round failed), or set it so the sum was
 * about 1 (the model's largest value went 0.76 -> 128.6). Now the divisor
 * is the public weights' sum and the word after the values is the canary:
 * whatever one member puts in its input, the sum is refused (canary, or
 * out of bounds: named as not attributable) or every decoded value is
 * within what clipped inputs give, |mean_j| <= clip (+ rounding). */
static void test_savec_hostile_input(void **state)
{
    (void)state;
    enum { P = 5, K = 40 };
    static const double weight[P] = {10, 10, 4, 10, 7}; /* w_max 10 */
    const double clip = 0.5;
    double v[K], mean[K], wsum, honest[K], rsum = 0;
    uint32_t out[K + 1], acc[K + 1], base[K + 1] = {0};
    sfl_sa_quant_t q;
    sfl_rng_t r;
    int refused = 0, accepted = 0;

    sfl_rng_seed(&r, 31, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_sa_quant_init(&q, clip, 10.0, P), 0);
    /* four honest members (0..3), member 4 hostile */
    for (int u = 0; u < P - 1; u++) {
        for (int j = 0; j < K; j++)
            v[j] = sfl_rng_gauss(&r, 0, 0.3);
        assert_int_equal(sfl_sa_quantize(&q, v, K, weight[u], &r, out), 0);
        add_into(base, out, K);
    }
    for (int u = 0; u < P; u++)
        rsum += sfl_sa_rho(&q, weight[u]);

    /* the old attack: -2^30 in the word after the values (the weight word
     * then, the canary now) */
    for (int j = 0; j < K; j++)
        v[j] = 0.1;
    assert_int_equal(sfl_sa_quantize(&q, v, K, weight[4], &r, out), 0);
    memcpy(acc, base, sizeof acc);
    add_into(acc, out, K);
    assert_int_equal(sfl_sa_dequantize(&q, acc, K, P, weight, honest, &wsum), 0);
    assert_true(wsum == rsum); /* the public weights' sum, nothing else */
    out[K] = 0u - (1u << 30);
    memcpy(acc, base, sizeof acc);
    add_into(acc, out, K);
    assert_int_equal(sfl_sa_dequantize(&q, acc, K, P, weight, mean, &wsum), SFL_EBADSIG);
    /* ... or the canary kept and the words made so the old divisor would
     * be ~1: the values are what they are, the divisor does not move */
    out[K] = 1;
    memcpy(acc, base, sizeof acc);
    add_into(acc, out, K);
    assert_int_equal(sfl_sa_dequantize(&q, acc, K, P, weight, mean, &wsum), 0);
    assert_true(wsum == rsum);
    for (int j = 0; j < K; j++)
        assert_true(mean[j] == honest[j]);

    /* values far beyond a clipped input: out of bounds, refused, named as
     * not attributable */
    for (int j = 0; j < K; j++)
        out[j] = 1u << 30;
    memcpy(acc, base, sizeof acc);
    add_into(acc, out, K);
    assert_int_equal(sfl_sa_dequantize(&q, acc, K, P, weight, mean, &wsum), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "secure sum out of bounds"));
    assert_non_null(strstr(sfl_last_error(), "not attributable"));

    /* any words at all (canary kept): refused, or inside the bounds of
     * clipped inputs */
    double lim = clip + P * ldexp(1.0, -q.frac) / rsum;
    for (int trial = 0; trial < 2000; trial++) {
        /* words uniform in [-2^e, 2^e] for e = 0..30, or any 32 bits */
        int e = (int)(sfl_rng_u64(&r) % 32);
        int64_t span = (int64_t)1 << (e < 31 ? e : 30);
        for (int j = 0; j < K; j++) {
            uint64_t x = sfl_rng_u64(&r);
            out[j] = e == 31 ? (uint32_t)x
                             : (uint32_t)((int64_t)(x % (uint64_t)(2 * span + 1)) - span);
        }
        out[K] = 1;
        memcpy(acc, base, sizeof acc);
        add_into(acc, out, K);
        int rc = sfl_sa_dequantize(&q, acc, K, P, weight, mean, &wsum);
        if (rc == SFL_ERANGE) {
            refused++;
            continue;
        }
        assert_int_equal(rc, 0);
        accepted++;
        for (int j = 0; j < K; j++)
            assert_true(fabs(mean[j]) <= lim);
    }
    assert_true(refused > 0 && accepted > 0);
}

/* The metric words of a sum: above count (2^B - 1) no count of honest
 * inputs reaches: refused as out of bounds. */
static void test_savec_metrics_bounds(void **state)
{
    (void)state;
    sfl_sa_quant_t q;
    uint32_t sum[SFL_SA_METRIC_WORDS] = {0};
    double got[SFL_SA_METRICS];

    assert_int_equal(sfl_sa_quant_init(&q, 1, 10, 8), 0);
    for (int j = 0; j < SFL_SA_METRIC_WORDS; j++)
        sum[j] = 3 * ((UINT32_C(1) << q.bits) - 1);
    assert_int_equal(sfl_sa_metrics_decode(&q, sum, 3, got), 0);
    assert_int_equal(sfl_sa_metrics_decode(&q, sum, 2, got), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "secure sum out of bounds"));
    sum[SFL_SA_METRIC_WORDS - 1]++;
    assert_int_equal(sfl_sa_metrics_decode(&q, sum, 3, got), SFL_ERANGE);
    sum[SFL_SA_METRIC_WORDS - 1]--;
    assert_int_equal(sfl_sa_metrics_decode(&q, sum, 0, got), SFL_ERANGE);
    assert_int_equal(sfl_sa_metrics_decode(&q, sum, 9, got), SFL_ERANGE);
}

/* A statistics round's moments through mode 2 (savec.h): encoded with each
 * member's public weight, quantized at clip B^2, summed, dequantized with
 * the public weights and decoded, they are the plain sum of the members'
 * moments within sfl_sa_moments_error, the count exactly. */
static void test_savec_moments_roundtrip(void **state)
{
    (void)state;
    enum { P = 4, D = 3, L = 1 + 2 * D };
    static const uint32_t rows[P] = {37, 1, 250, 90};
    static const double weight[P] = {40, 1, 250, 120}; /* declared >= trained */
    const double B = 10.0;
    double m[P][L], want[L] = {0}, v[L], mean[L], got[L], wsum, wpub = 0, wmax = 0;
    uint32_t out[L + 1], acc[L + 1] = {0};
    sfl_sa_quant_t q;
    sfl_rng_t r;

    sfl_rng_seed(&r, 25, 0, 0, SFL_STREAM_DATA);
    for (int u = 0; u < P; u++)
        wmax = fmax(wmax, weight[u]);
    assert_int_equal(sfl_sa_quant_init(&q, B * B, wmax, P), 0);
    for (int u = 0; u < P; u++) {
        memset(m[u], 0, sizeof(m[u]));
        m[u][0] = rows[u];
        for (uint32_t i = 0; i < rows[u]; i++)
            for (int j = 0; j < D; j++) {
                /* feature 2 sits at the bound: its squares fill [0, c] */
                double x = j == 2 ? (i % 2 ? B : -B) : sfl_rng_gauss(&r, j, 1 + j);
                x = fmax(-B, fmin(B, x));
                m[u][1 + j] += x;
                m[u][1 + D + j] += x * x;
            }
        for (int i = 0; i < L; i++)
            want[i] += m[u][i];
        wpub += weight[u];
        assert_int_equal(sfl_sa_moments_encode(m[u], D, weight[u], B, v), 0);
        for (int i = 0; i < L; i++)
            assert_true(fabs(v[i]) <= B * B * (1 + 1e-9));
        assert_int_equal(sfl_sa_quantize(&q, v, L, weight[u], &r, out), 0);
        add_into(acc, out, L);
    }
    assert_int_equal(sfl_sa_dequantize(&q, acc, L, P, weight, mean, &wsum), 0);
    assert_int_equal(sfl_sa_moments_decode(mean, D, wpub, B, got), 0);
    assert_true(got[0] == want[0]); /* the count: whole, exact */
    for (int i = 1; i < L; i++) {
        double tol = sfl_sa_moments_error(&q, P, B, i <= D ? 1 : 2) * (1 + 1e-9);
        assert_close(got[i], want[i], 0, tol);
    }
    /* the bound itself: count w_max 2^-f / s, 2^-f <= 2 c / 2^bits */
    assert_true(sfl_sa_moments_error(&q, P, B, 2) <= P * wmax * 2 * B * B / ldexp(1.0, (int)q.bits));
    assert_true(sfl_sa_moments_error(&q, P, B, 0) < 0.5);
}

/* The encoder's refusals: values beyond the bound, a count above the
 * public weight or below 1, a value not finite, a bad weight or bound. */
static void test_savec_moments_refusals(void **state)
{
    (void)state;
    double m[5] = {4, 8, -2, 16, 2}, v[5], mean[5] = {0}, got[5];

    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 2, v), 0); /* |x| <= 2 fits */
    assert_true(v[0] == 4 && v[1] == 4 && v[2] == -1 && v[3] == 4 && v[4] == 0.5);
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 1.5, v), SFL_ERANGE); /* Q 16 > 4 x 2.25 */
    assert_non_null(strstr(sfl_last_error(), "standardize_bound"));
    m[3] = 4;
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 1.9, v), SFL_ERANGE); /* S 8 > 4 x 1.9 */
    assert_int_equal(sfl_sa_moments_encode(m, 2, 3.5, 2, v), SFL_ERANGE); /* rows > weight */
    assert_non_null(strstr(sfl_last_error(), "public weight"));
    m[0] = 0;
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 2, v), SFL_ERANGE);
    m[0] = 4;
    m[4] = -1e-3;
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 2, v), SFL_ERANGE); /* negative Q */
    m[4] = NAN;
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 2, v), SFL_ENUMERIC);
    m[4] = 2;
    assert_int_equal(sfl_sa_moments_encode(m, 2, 0, 2, v), SFL_EINVAL);
    assert_int_equal(sfl_sa_moments_encode(m, 2, NAN, 2, v), SFL_EINVAL);
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 0, v), SFL_EINVAL);
    assert_int_equal(sfl_sa_moments_encode(m, 2, 4, 1e300, v), SFL_EINVAL); /* B^2 overflows */
    /* decode: a pooled count below 1, a bad weight sum */
    assert_int_equal(sfl_sa_moments_decode(mean, 2, 10, 2, got), SFL_ERANGE);
    mean[0] = 4;
    assert_int_equal(sfl_sa_moments_decode(mean, 2, 0, 2, got), SFL_EINVAL);
    assert_int_equal(sfl_sa_moments_decode(mean, 2, INFINITY, 2, got), SFL_EINVAL);
    assert_int_equal(sfl_sa_moments_decode(mean, 2, 3, 2, got), 0);
    assert_true(got[0] == 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_savec_mask_rfc8439),
        cmocka_unit_test(test_savec_mask_matches_libsodium),
        cmocka_unit_test(test_savec_mask_random_access),
        cmocka_unit_test(test_savec_mask_add_cancel),
        cmocka_unit_test(test_savec_support_golden),
        cmocka_unit_test(test_savec_support_props),
        cmocka_unit_test(test_savec_metrics),
        cmocka_unit_test(test_savec_support_large_model),
        cmocka_unit_test(test_savec_support_edges),
        cmocka_unit_test(test_savec_support_failalloc),
        cmocka_unit_test(test_savec_quant_init),
        cmocka_unit_test(test_savec_quant_roundtrip),
        cmocka_unit_test(test_savec_quant_no_wrap),
        cmocka_unit_test(test_savec_quant_weighted_mean),
        cmocka_unit_test(test_savec_quant_canary),
        cmocka_unit_test(test_savec_quant_unbiased),
        cmocka_unit_test(test_savec_client_topk),
        cmocka_unit_test(test_savec_client_weights),
        cmocka_unit_test(test_savec_client_refusals),
        cmocka_unit_test(test_savec_server_roundtrip),
        cmocka_unit_test(test_savec_hostile_input),
        cmocka_unit_test(test_savec_metrics_bounds),
        cmocka_unit_test(test_savec_moments_roundtrip),
        cmocka_unit_test(test_savec_moments_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

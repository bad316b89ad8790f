#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <sodium.h>

#include "sfl/core/error.h"
#include "sfl/crypto/shamir.h"
#include "testutil.h"

/* L = 2^252 + 27742317777372353535851937790883648493, little-endian, written
 * out here rather than taken from the module so the tests check it. */
static const uint8_t L_BYTES[32] = {
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
};

/* The largest n the exhaustive and the large tests use. */
#define MAX_N 100

/* v as a scalar. */
static void small(uint8_t s[32], uint32_t v)
{
    memset(s, 0, 32);
    s[0] = (uint8_t)v;
    s[1] = (uint8_t)(v >> 8);
    s[2] = (uint8_t)(v >> 16);
    s[3] = (uint8_t)(v >> 24);
}

/* L - v for v <= 0xed (L's low byte), by hand: no libsodium arithmetic. */
static void l_minus(uint8_t s[32], unsigned v)
{
    assert_true(v <= L_BYTES[0]);
    memcpy(s, L_BYTES, 32);
    s[0] = (uint8_t)(s[0] - v);
}

/* The secret of shares[idx[0..k)]. */
static int combine_subset(const sfl_share_t *shares, const uint32_t *idx, uint32_t k,
                          uint8_t out[32])
{
    sfl_share_t sub[MAX_N];

    assert_true(k <= MAX_N);
    for (uint32_t i = 0; i < k; i++)
        sub[i] = shares[idx[i]];
    return sfl_shamir_combine(sub, k, out);
}

/* The next t-subset of 0..n-1 after idx in lexicographic order; 0 after the
 * last one. */
static int next_subset(uint32_t *idx, uint32_t t, uint32_t n)
{
    uint32_t i = t;

    while (i > 0 && idx[i - 1] == n - t + i - 1)
        i--;
    if (i == 0)
        return 0;
    idx[i - 1]++;
    for (uint32_t j = i; j < t; j++)
        idx[j] = idx[j - 1] + 1;
    return 1;
}

static uint64_t binomial(uint32_t n, uint32_t k)
{
    uint64_t c = 1;

    for (uint32_t i = 1; i <= k; i++)
        c = c * (n - k + i) / i;
    return c;
}

/* ---- canonical scalars ---------------------------------------------------- */

/* The reference: s is canonical iff reducing it (zero-extended to 64 bytes)
 * leaves it unchanged. */
static int canonical_by_reduce(const uint8_t s[32])
{
    uint8_t wide[64] = {0}, r[32];

    memcpy(wide, s, 32);
    crypto_core_ed25519_scalar_reduce(r, wide);
    return sodium_memcmp(r, s, 32) == 0;
}

static void test_shamir_canonical(void **state)
{
    uint8_t s[32];

    (void)state;
    small(s, 0);
    assert_int_equal(sfl_shamir_canonical(s), 1);
    small(s, 1);
    assert_int_equal(sfl_shamir_canonical(s), 1);
    l_minus(s, 1);
    assert_int_equal(sfl_shamir_canonical(s), 1);
    l_minus(s, 0);
    assert_int_equal(sfl_shamir_canonical(s), 0);
    memcpy(s, L_BYTES, 32); /* L + 1 */
    s[0]++;
    assert_int_equal(sfl_shamir_canonical(s), 0);
    memset(s, 0xff, 32); /* 2^256 - 1 */
    assert_int_equal(sfl_shamir_canonical(s), 0);
    memset(s, 0xff, 32); /* 2^252 - 1 */
    s[31] = 0x0f;
    assert_int_equal(sfl_shamir_canonical(s), 1);
    small(s, 0); /* 2^252 < L */
    s[31] = 0x10;
    assert_int_equal(sfl_shamir_canonical(s), 1);
    memcpy(s, L_BYTES, 32); /* L + 2^128: equal low half, bigger in the middle */
    s[16] = 1;
    assert_int_equal(sfl_shamir_canonical(s), 0);
    memcpy(s, L_BYTES, 32); /* L - 2^120: smaller in the middle */
    s[15] = 0x13;
    assert_int_equal(sfl_shamir_canonical(s), 1);

    /* Random values straddling L (top byte 0x0f, 0x10 or 0x11) against the
     * reference; about half are canonical. */
    for (int i = 0; i < 3000; i++) {
        randombytes_buf(s, 32);
        s[31] = (uint8_t)(0x0f + i % 3);
        if (i % 7 == 0) /* often equal to L in the upper half too */
            memcpy(s + 16, L_BYTES + 16, 16);
        assert_int_equal(sfl_shamir_canonical(s), canonical_by_reduce(s));
    }
}

static void test_shamir_random(void **state)
{
    uint8_t a[32], b[32], zero[32] = {0};

    (void)state;
    for (int i = 0; i < 200; i++) {
        sfl_shamir_random(a);
        sfl_shamir_random(b);
        assert_int_equal(sfl_shamir_canonical(a), 1);
        assert_true(canonical_by_reduce(a));
        assert_memory_not_equal(a, zero, 32);
        assert_memory_not_equal(a, b, 32);
    }
}

/* ---- split and combine ---------------------------------------------------- */

static void test_shamir_roundtrip(void **state)
{
    static const uint32_t tn[][2] = {{1, 1}, {1, 5}, {3, 5}, {5, 5}, {7, 10}};
    sfl_share_t shares[MAX_N];
    uint32_t idx[MAX_N];
    uint8_t secret[32], got[32];

    (void)state;
    for (size_t c = 0; c < sizeof(tn) / sizeof(tn[0]); c++) {
        uint32_t t = tn[c][0], n = tn[c][1];
        uint64_t subsets = 0;

        sfl_shamir_random(secret);
        assert_int_equal(sfl_shamir_split(secret, t, n, shares), 0);
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(shares[i].x, i + 1);
            assert_int_equal(sfl_shamir_canonical(shares[i].y), 1);
        }

        /* Every t-subset. */
        for (uint32_t i = 0; i < t; i++)
            idx[i] = i;
        do {
            assert_int_equal(combine_subset(shares, idx, t, got), 0);
            assert_memory_equal(got, secret, 32);
            subsets++;
        } while (next_subset(idx, t, n));
        assert_int_equal(subsets, binomial(n, t));

        /* More than t: all n, and the last t + 1. */
        assert_int_equal(sfl_shamir_combine(shares, n, got), 0);
        assert_memory_equal(got, secret, 32);
        if (t < n) {
            assert_int_equal(sfl_shamir_combine(shares + n - t - 1, t + 1, got), 0);
            assert_memory_equal(got, secret, 32);
        }
        assert_int_equal(sfl_shamir_check(shares, n, t), 0);

        /* Fewer than t: every (t-1)-subset misses (probability 1/L each). */
        if (t >= 2) {
            for (uint32_t i = 0; i < t - 1; i++)
                idx[i] = i;
            do {
                assert_int_equal(combine_subset(shares, idx, t - 1, got), 0);
                assert_memory_not_equal(got, secret, 32);
            } while (next_subset(idx, t - 1, n));
        }
    }
}

static void test_shamir_fresh_coefficients(void **state)
{
    sfl_share_t a[5], b[5];
    uint8_t secret[32];

    (void)state;
    sfl_shamir_random(secret);
    /* t = 1: f is the constant secret. */
    assert_int_equal(sfl_shamir_split(secret, 1, 5, a), 0);
    for (int i = 0; i < 5; i++)
        assert_memory_equal(a[i].y, secret, 32);
    /* t >= 2: two splits of one secret share nothing but x. */
    assert_int_equal(sfl_shamir_split(secret, 3, 5, a), 0);
    assert_int_equal(sfl_shamir_split(secret, 3, 5, b), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(a[i].x, b[i].x);
        assert_memory_not_equal(a[i].y, b[i].y, 32);
        assert_memory_not_equal(a[i].y, secret, 32);
    }
}

/* t - 1 shares reveal nothing, for t = 2: a share (1, y1) of secret s is
 * equally consistent with any other secret s', because the line through
 * (0, s') and (1, y1) is a degree-1 polynomial and a random a_1 picks each
 * line with the same probability 1/L. The information-theoretic argument
 * itself is not testable; this checks its computational side, that combine
 * interpolates correctly: that line's value at x = 2, g(2) = 2 y1 - s',
 * combined with (1, y1) gives s' back, for s' = s and for other secrets. */
static void test_shamir_reveals_nothing(void **state)
{
    sfl_share_t shares[3], pair[2];
    uint8_t secret[32], others[4][32], d[32], got[32];

    (void)state;
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, 2, 3, shares), 0);
    memcpy(others[0], secret, 32);
    sfl_shamir_random(others[1]);
    small(others[2], 0);
    l_minus(others[3], 1);
    for (int o = 0; o < 4; o++) {
        pair[0] = shares[0];
        pair[1].x = 2;
        crypto_core_ed25519_scalar_sub(d, shares[0].y, others[o]); /* a_1 = y1 - s' */
        crypto_core_ed25519_scalar_add(pair[1].y, shares[0].y, d);
        assert_int_equal(sfl_shamir_combine(pair, 2, got), 0);
        assert_memory_equal(got, others[o], 32);
        if (o == 0)
            assert_memory_equal(pair[1].y, shares[1].y, 32); /* the split's own line */
        else
            assert_memory_not_equal(got, secret, 32);
    }
}

/* Hand-built shares of f(x) = s + a_1 x with known values; every pair and
 * the triple give s, in any order. */
static void known_answer(const uint8_t y[3][32], const uint8_t want[32])
{
    static const uint32_t pairs[][2] = {{0, 1}, {0, 2}, {1, 2}, {1, 0}, {2, 0}, {2, 1}};
    sfl_share_t shares[3], pair[2];
    uint8_t got[32];

    for (int i = 0; i < 3; i++) {
        shares[i].x = (uint16_t)(i + 1);
        memcpy(shares[i].y, y[i], 32);
    }
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        pair[0] = shares[pairs[p][0]];
        pair[1] = shares[pairs[p][1]];
        assert_int_equal(sfl_shamir_combine(pair, 2, got), 0);
        assert_memory_equal(got, want, 32);
    }
    assert_int_equal(sfl_shamir_combine(shares, 3, got), 0);
    assert_memory_equal(got, want, 32);
    assert_int_equal(sfl_shamir_check(shares, 3, 2), 0);
    /* One of them alone is just its own y. */
    assert_int_equal(sfl_shamir_combine(shares + 1, 1, got), 0);
    assert_memory_equal(got, y[1], 32);
}

static void test_shamir_known_answer(void **state)
{
    uint8_t y[3][32], want[32];

    (void)state;
    /* s = 5, a_1 = 7: y = 12, 19, 26. */
    small(want, 5);
    small(y[0], 12);
    small(y[1], 19);
    small(y[2], 26);
    known_answer((const uint8_t(*)[32])y, want);

    /* s = L - 1, a_1 = L - 1: y = (L - 1)(1 + x) = -(1 + x) = L - 1 - x. */
    l_minus(want, 1);
    l_minus(y[0], 2);
    l_minus(y[1], 3);
    l_minus(y[2], 4);
    known_answer((const uint8_t(*)[32])y, want);

    /* s = 0, a_1 = 1 at x = 2 and 65535: y = x. */
    {
        sfl_share_t s2[2] = {{.x = 2}, {.x = 65535}};
        uint8_t got[32];

        small(s2[0].y, 2);
        small(s2[1].y, 65535);
        small(want, 0);
        assert_int_equal(sfl_shamir_combine(s2, 2, got), 0);
        assert_memory_equal(got, want, 32);
    }
}

/* ---- refusals ------------------------------------------------------------- */

static void test_shamir_split_refuses(void **state)
{
    sfl_share_t out[4];
    uint8_t secret[32];

    (void)state;
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, 0, 3, out), SFL_EINVAL);
    assert_detail("shamir split: need 1 <= t <= n");
    assert_int_equal(sfl_shamir_split(secret, 4, 3, out), SFL_EINVAL);
    assert_detail("shamir split: need 1 <= t <= n");
    assert_int_equal(sfl_shamir_split(secret, 0, 0, out), SFL_EINVAL);
    /* n is refused before out (one element here) is written. */
    assert_int_equal(sfl_shamir_split(secret, 1, SFL_SHAMIR_MAX + 1, out), SFL_EINVAL);
    assert_detail("shamir split: need 1 <= t <= n");
    l_minus(secret, 0);
    assert_int_equal(sfl_shamir_split(secret, 2, 3, out), SFL_EINVAL);
    assert_detail("shamir split: the secret is not a canonical scalar");
    memset(secret, 0xff, 32);
    assert_int_equal(sfl_shamir_split(secret, 2, 3, out), SFL_EINVAL);
    /* The limits themselves are fine. */
    l_minus(secret, 1);
    assert_int_equal(sfl_shamir_split(secret, 4, 4, out), 0);
}

static void test_shamir_combine_refuses(void **state)
{
    sfl_share_t shares[4], bad[4];
    uint8_t secret[32], got[32], before[32];

    (void)state;
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, 3, 4, shares), 0);
    memset(got, 0xa5, 32);
    memcpy(before, got, 32);

    assert_int_equal(sfl_shamir_combine(shares, 0, got), SFL_EINVAL);
    assert_detail("shamir combine: need 1 to 65535 shares");
    assert_int_equal(sfl_shamir_combine(shares, SFL_SHAMIR_MAX + 1, got), SFL_EINVAL);
    assert_detail("shamir combine: need 1 to 65535 shares");

    memcpy(bad, shares, sizeof(bad));
    bad[2].x = 0;
    assert_int_equal(sfl_shamir_combine(bad, 4, got), SFL_EINVAL);
    assert_detail("shamir combine: share 2: x = 0");

    memcpy(bad, shares, sizeof(bad));
    bad[3].x = 2; /* the same as bad[1] */
    assert_int_equal(sfl_shamir_combine(bad, 4, got), SFL_EINVAL);
    assert_detail("shamir combine: share 3: x = 2 repeats");
    memcpy(bad, shares, sizeof(bad));
    bad[1] = bad[0]; /* a share given twice */
    assert_int_equal(sfl_shamir_combine(bad, 4, got), SFL_EINVAL);
    assert_detail("shamir combine: share 1: x = 1 repeats");

    memcpy(bad, shares, sizeof(bad));
    l_minus(bad[1].y, 0);
    assert_int_equal(sfl_shamir_combine(bad, 4, got), SFL_EINVAL);
    assert_detail("shamir combine: share 1: y is not a canonical scalar");
    memset(bad[1].y, 0xff, 32);
    assert_int_equal(sfl_shamir_combine(bad, 4, got), SFL_EINVAL);
    assert_detail("shamir combine: share 1: y is not a canonical scalar");

    assert_memory_equal(got, before, 32); /* nothing written on failure */
    assert_int_equal(sfl_shamir_combine(shares, 4, got), 0);
    assert_memory_equal(got, secret, 32);
}

static void test_shamir_check(void **state)
{
    static const uint8_t one[32] = {1};
    sfl_share_t shares[6], bad[6], other[6];
    uint8_t secret[32];

    (void)state;
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, 3, 6, shares), 0);
    assert_int_equal(sfl_shamir_check(shares, 6, 3), 0);
    assert_int_equal(sfl_shamir_check(shares, 3, 3), 0);
    assert_int_equal(sfl_shamir_check(shares + 2, 4, 3), 0);
    /* Any 3 lie on some quadratic, not 4 on a line. */
    assert_int_equal(sfl_shamir_check(shares, 3, 2), SFL_EBADSIG);
    assert_int_equal(sfl_shamir_check(shares, 6, 2), SFL_EBADSIG);

    /* y + 1 (mod L, so still canonical) anywhere: among the first t, the
     * t-th (the one that gets replaced), or a later one. */
    for (int i = 0; i < 6; i++) {
        memcpy(bad, shares, sizeof(bad));
        crypto_core_ed25519_scalar_add(bad[i].y, shares[i].y, one);
        assert_int_equal(sfl_shamir_check(bad, 6, 3), SFL_EBADSIG);
        assert_detail("shamir check: share ");
    }
    /* A share of another split of the same secret. */
    assert_int_equal(sfl_shamir_split(secret, 3, 6, other), 0);
    memcpy(bad, shares, sizeof(bad));
    bad[4] = other[4];
    assert_int_equal(sfl_shamir_check(bad, 6, 3), SFL_EBADSIG);

    assert_int_equal(sfl_shamir_check(shares, 2, 3), SFL_EINVAL);
    assert_detail("shamir check: need 1 <= t <= k");
    assert_int_equal(sfl_shamir_check(shares, 6, 0), SFL_EINVAL);
    assert_int_equal(sfl_shamir_check(shares, 0, 0), SFL_EINVAL);
    memcpy(bad, shares, sizeof(bad));
    bad[5] = bad[4]; /* a duplicate agrees with f but is still refused */
    assert_int_equal(sfl_shamir_check(bad, 6, 3), SFL_EINVAL);
    assert_detail("shamir check: share 5: x = 5 repeats");
    memcpy(bad, shares, sizeof(bad));
    bad[0].x = 0;
    assert_int_equal(sfl_shamir_check(bad, 6, 3), SFL_EINVAL);
    memcpy(bad, shares, sizeof(bad));
    l_minus(bad[5].y, 0);
    assert_int_equal(sfl_shamir_check(bad, 6, 3), SFL_EINVAL);
    assert_detail("shamir check: share 5: y is not a canonical scalar");
}

/* ---- the design's size ---------------------------------------------------- */

/* n = 100, t = floor(2n/3) + 1 = 67 (SECURE_AGGREGATION.md section 2).
 * Nothing is timed (bench/ is the place for that). */
/* Coefficients made once: many secrets shared at the same x's combine with
 * them to what combine gives; refusals as combine's. */
static void test_shamir_lagrange(void **state)
{
    uint8_t secret[4][SFL_SHAMIR_BYTES], got[SFL_SHAMIR_BYTES], lam[5][SFL_SHAMIR_BYTES];
    sfl_share_t sh[4][7], pick[4][5];
    const uint32_t idx[5] = {6, 1, 3, 4, 0};

    (void)state;
    for (int s = 0; s < 4; s++) {
        sfl_shamir_random(secret[s]);
        assert_int_equal(sfl_shamir_split(secret[s], 5, 7, sh[s]), 0);
        for (int i = 0; i < 5; i++)
            pick[s][i] = sh[s][idx[i]];
    }
    assert_int_equal(sfl_shamir_lagrange(pick[0], 5, lam), 0);
    for (int s = 0; s < 4; s++) {
        assert_int_equal(sfl_shamir_apply((const uint8_t (*)[SFL_SHAMIR_BYTES])lam, pick[s], 5,
                                          got),
                         0);
        assert_memory_equal(got, secret[s], SFL_SHAMIR_BYTES);
    }
    /* shares at other x's with these coefficients: not the secret */
    for (int i = 0; i < 5; i++)
        pick[1][i] = sh[1][i];
    assert_int_equal(sfl_shamir_apply((const uint8_t (*)[SFL_SHAMIR_BYTES])lam, pick[1], 5, got),
                     0);
    assert_memory_not_equal(got, secret[1], SFL_SHAMIR_BYTES);
    pick[0][2].x = pick[0][1].x;
    assert_int_equal(sfl_shamir_lagrange(pick[0], 5, lam), SFL_EINVAL);
    assert_int_equal(sfl_shamir_lagrange(pick[0], 0, lam), SFL_EINVAL);
}

static void test_shamir_large(void **state)
{
    static const uint8_t one[32] = {1};
    enum { N = 100, T = 2 * N / 3 + 1 };
    sfl_share_t shares[N];
    uint32_t perm[N];
    uint8_t secret[32], got[32];

    (void)state;
    assert_int_equal(T, 67);
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, T, N, shares), 0);
    for (uint32_t i = 0; i < N; i++)
        perm[i] = i;
    for (uint32_t i = N - 1; i > 0; i--) { /* Fisher-Yates */
        uint32_t j = randombytes_uniform(i + 1), tmp = perm[i];

        perm[i] = perm[j];
        perm[j] = tmp;
    }
    assert_int_equal(combine_subset(shares, perm, T, got), 0);
    assert_memory_equal(got, secret, 32);
    assert_int_equal(combine_subset(shares, perm + 1, T - 1, got), 0);
    assert_memory_not_equal(got, secret, 32);
    assert_int_equal(sfl_shamir_combine(shares, N, got), 0);
    assert_memory_equal(got, secret, 32);
    assert_int_equal(sfl_shamir_check(shares, N, T), 0);
    crypto_core_ed25519_scalar_add(shares[N - 1].y, shares[N - 1].y, one);
    assert_int_equal(sfl_shamir_check(shares, N, T), SFL_EBADSIG);
}

/* Feldman commitments: every share of a committed split verifies, the
 * secret matches commit[0]; a share off the polynomial (any one of 20, or
 * several) is found by the halving and only it; a commitment that is not a
 * point of the prime-order group, a zero secret and a wrong secret are
 * refused. */
static void test_shamir_commitments(void **state)
{
    enum { K = 20, T = 7 };
    uint8_t secret[SFL_SHAMIR_BYTES], other[SFL_SHAMIR_BYTES];
    uint8_t commit[T][SFL_SHAMIR_POINT], work[T][SFL_SHAMIR_BYTES], ok[K];
    sfl_share_t sh[K];

    (void)state;
    sfl_shamir_random(secret);
    for (uint32_t i = 0; i < K; i++)
        sh[i].x = (uint16_t)(3 * i + 2);
    assert_int_equal(sfl_shamir_split_commit(secret, T, sh, K, commit), 0);
    assert_int_equal(sfl_shamir_commit_check(secret, commit[0]), 0);
    memset(ok, 7, sizeof(ok));
    assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok), 0);
    for (uint32_t i = 0; i < K; i++)
        assert_int_equal(ok[i], 1);
    /* one bad share at each place, then three */
    for (uint32_t bad = 0; bad < K; bad++) {
        sh[bad].y[0] ^= 1;
        assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok),
                         SFL_EBADSIG);
        for (uint32_t i = 0; i < K; i++)
            assert_int_equal(ok[i], i != bad);
        sh[bad].y[0] ^= 1;
    }
    sh[0].y[1] ^= 4;
    sh[9].y[2] ^= 4;
    sh[19].y[3] ^= 4;
    assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok),
                     SFL_EBADSIG);
    for (uint32_t i = 0; i < K; i++)
        assert_int_equal(ok[i], i != 0 && i != 9 && i != 19);
    sh[0].y[1] ^= 4;
    sh[9].y[2] ^= 4;
    sh[19].y[3] ^= 4;
    /* the secret is what the combine gives, and another is not */
    assert_int_equal(sfl_shamir_combine(sh + 5, T, other), 0);
    assert_memory_equal(other, secret, sizeof(secret));
    other[0] ^= 1;
    assert_int_equal(sfl_shamir_commit_check(other, commit[0]), SFL_EBADSIG);
    memset(other, 0, sizeof(other));
    assert_int_equal(sfl_shamir_commit_check(other, commit[0]), SFL_EBADSIG);
    assert_int_equal(sfl_shamir_split_commit(other, T, sh, K, commit), SFL_EINVAL);
    /* a commitment of small order (the identity) or off the curve */
    memset(commit[3], 0, SFL_SHAMIR_POINT);
    commit[3][0] = 1;
    assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok),
                     SFL_EINVAL);
    memset(commit[3], 0xff, SFL_SHAMIR_POINT);
    assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok),
                     SFL_EINVAL);
    /* a share set with a repeated x */
    sh[1].x = sh[0].x;
    assert_int_equal(sfl_shamir_verify(sh, K, (const uint8_t (*)[32])commit, T, work, ok),
                     SFL_EINVAL);
}

/* The parity check agrees with sfl_shamir_check: shares of one polynomial
 * (k > t, k = t) agree; one altered share anywhere, or a share of another
 * polynomial, does not; bad points are refused as combine refuses them. */
static void test_shamir_agree(void **state)
{
    enum { K = 30, T = 11 };
    uint8_t secret[SFL_SHAMIR_BYTES], work[2 * K][SFL_SHAMIR_BYTES];
    sfl_share_t sh[K], other[K];

    (void)state;
    sfl_shamir_random(secret);
    assert_int_equal(sfl_shamir_split(secret, T, K, sh), 0);
    assert_int_equal(sfl_shamir_split(secret, T, K, other), 0); /* same secret, other f */
    assert_int_equal(sfl_shamir_agree(sh, K, T, work), 0);
    assert_int_equal(sfl_shamir_agree(sh + 3, T, T, work), 0);
    assert_int_equal(sfl_shamir_agree(sh, K, K, work), 0);
    for (uint32_t bad = 0; bad < K; bad += 7) {
        sh[bad].y[0] ^= 1;
        assert_int_equal(sfl_shamir_agree(sh, K, T, work), SFL_EBADSIG);
        assert_int_equal(sfl_shamir_check(sh, K, T), SFL_EBADSIG);
        sh[bad].y[0] ^= 1;
    }
    sh[K - 1] = other[K - 1];
    assert_int_equal(sfl_shamir_agree(sh, K, T, work), SFL_EBADSIG);
    /* one more degree of freedom than shares: every set of T + 1 from two
     * polynomials of degree < T + 1 agrees at t = T + 1 */
    assert_int_equal(sfl_shamir_agree(sh + K - T - 1, T + 1, T + 1, work), 0);
    sh[1].x = sh[0].x;
    assert_int_equal(sfl_shamir_agree(sh, K, T, work), SFL_EINVAL);
    assert_int_equal(sfl_shamir_agree(sh + 2, 3, 4, work), SFL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shamir_canonical),
        cmocka_unit_test(test_shamir_random),
        cmocka_unit_test(test_shamir_roundtrip),
        cmocka_unit_test(test_shamir_fresh_coefficients),
        cmocka_unit_test(test_shamir_reveals_nothing),
        cmocka_unit_test(test_shamir_known_answer),
        cmocka_unit_test(test_shamir_split_refuses),
        cmocka_unit_test(test_shamir_combine_refuses),
        cmocka_unit_test(test_shamir_check),
        cmocka_unit_test(test_shamir_lagrange),
        cmocka_unit_test(test_shamir_large),
        cmocka_unit_test(test_shamir_commitments),
        cmocka_unit_test(test_shamir_agree),
    };

    if (sodium_init() < 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}

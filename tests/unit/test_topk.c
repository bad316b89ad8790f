#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "sfl/core/topk.h"

/* The module itself, so the introselect fallback (heap_select), which no
 * public input reaches on purpose, can be tested directly. This copy
 * replaces the library's topk.o in this binary; the source is the same. */
#include "core/topk.c"

/* Reference: full sort of the indices by the documented order (larger |x|
 * first, then smaller index), first k, re-sorted by index. */
static const double *ref_x;

static int cmp_rank(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    double ma = fabs(ref_x[a]), mb = fabs(ref_x[b]);

    if (ma != mb)
        return ma > mb ? -1 : 1;
    return (a > b) - (a < b);
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return (a > b) - (a < b);
}

/* p[0..n) = all indices in rank order (the expensive part, done once). */
static uint32_t *rank_all(const double *x, size_t n)
{
    uint32_t *p = malloc((n ? n : 1) * sizeof(*p));

    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    ref_x = x;
    qsort(p, n, sizeof(*p), cmp_rank);
    return p;
}

/* out = the first k of rank, sorted by index. */
static void first_k(const uint32_t *rank, size_t k, uint32_t *out)
{
    memcpy(out, rank, k * sizeof(*out));
    qsort(out, k, sizeof(*out), cmp_u32);
}

static void naive_topk(const double *x, size_t n, size_t k, uint32_t *out)
{
    uint32_t *p = rank_all(x, n);

    first_k(p, k, out);
    free(p);
}

/* sfl_topk_select, sfl_ht_dense and sfl_ht_to_spvec against the reference
 * for each k in ks[0..nk). */
static void check_ks(const double *x, size_t n, const size_t *ks, size_t nk, sfl_topk_ws_t *ws)
{
    uint32_t *rank = rank_all(x, n);
    uint32_t *got = malloc((n ? n : 1) * sizeof(*got));
    uint32_t *want = malloc((n ? n : 1) * sizeof(*want));
    double *y = malloc((n ? n : 1) * sizeof(*y));

    assert_true(got && want && y);
    assert_int_equal(sfl_topk_ws_reserve(ws, n), 0);
    for (size_t a = 0; a < nk; a++) {
        size_t k = ks[a];
        sfl_spvec_t *sp = NULL;

        first_k(rank, k, want);
        assert_int_equal(sfl_topk_select(x, n, k, got, ws), 0);
        for (size_t j = 0; j < k; j++) {
            if (got[j] != want[j])
                fail_msg("n=%zu k=%zu: position %zu got %u want %u", n, k, j, got[j], want[j]);
        }

        memcpy(y, x, n * sizeof(*y));
        assert_int_equal(sfl_ht_dense(y, n, k, ws), 0);
        for (size_t i = 0, j = 0; i < n; i++) {
            if (j < k && want[j] == i) {
                assert_memory_equal(&y[i], &x[i], sizeof(double)); /* kept bit for bit */
                j++;
            } else if (y[i] != 0.0) {
                fail_msg("n=%zu k=%zu: ht_dense kept entry %zu", n, k, i);
            }
        }

        assert_int_equal(sfl_spvec_new((uint32_t)n, 0, &sp), 0);
        int has_inf = 0;
        for (size_t j = 0; j < k; j++)
            has_inf |= isinf(x[want[j]]) != 0;
        if (has_inf) {
            /* a sparse vector cannot hold an infinite value */
            assert_int_equal(sfl_ht_to_spvec(x, n, k, sp, ws), SFL_ENUMERIC);
            assert_int_equal(sp->nnz, 0);
            sfl_spvec_free(sp);
            continue;
        }
        assert_int_equal(sfl_ht_to_spvec(x, n, k, sp, ws), 0);
        assert_int_equal(sfl_spvec_validate(sp), 0);
        uint32_t o = 0;
        for (size_t j = 0; j < k; j++) {
            if (x[want[j]] == 0.0)
                continue; /* zeros of H_tau(x) are not stored */
            assert_true(o < sp->nnz);
            assert_int_equal(sp->idx[o], want[j]);
            assert_memory_equal(&sp->val[o], &x[want[j]], sizeof(double));
            o++;
        }
        assert_int_equal(o, sp->nnz);
        sfl_spvec_free(sp);
    }
    free(y);
    free(want);
    free(got);
    free(rank);
}

static void check_all(const double *x, size_t n, size_t k, sfl_topk_ws_t *ws)
{
    check_ks(x, n, &k, 1, ws);
}

enum { DIST_GAUSS, DIST_TIES, DIST_SPARSE, DIST_INF, DIST_SIGNED_ZERO, DIST_COUNT };

static void fill(double *x, size_t n, int dist, sfl_rng_t *r)
{
    for (size_t i = 0; i < n; i++) {
        switch (dist) {
        case DIST_GAUSS:
            x[i] = sfl_rng_gauss(r, 0.0, 1.0);
            break;
        case DIST_TIES: /* five magnitudes, both signs */
            x[i] = (double)sfl_rng_below(r, 5) - 2.0;
            break;
        case DIST_SPARSE: /* ~5% nonzero: k often exceeds the nonzeros */
            x[i] = sfl_rng_below(r, 20) == 0 ? sfl_rng_gauss(r, 0.0, 1.0) : 0.0;
            break;
        case DIST_INF:
            x[i] = sfl_rng_below(r, 50) == 0 ? (sfl_rng_below(r, 2) ? INFINITY : -INFINITY)
                                             : sfl_rng_gauss(r, 0.0, 1e300);
            break;
        case DIST_SIGNED_ZERO: /* -0.0 and 0.0 tie; subnormals are tiny, not zero */
            x[i] = sfl_rng_below(r, 3) == 0 ? -0.0 : sfl_rng_below(r, 2) ? 0.0 : 4.9e-324;
            break;
        }
    }
}

static void test_topk_random_small(void **state)
{
    (void)state;
    sfl_topk_ws_t ws;
    sfl_rng_t r;
    double x[300];

    sfl_topk_ws_init(&ws);
    sfl_rng_seed(&r, 7, 0, 0, SFL_STREAM_DATA);
    for (int trial = 0; trial < 400; trial++) {
        size_t n = (size_t)sfl_rng_below(&r, 300) + 1;
        size_t k = (size_t)sfl_rng_below(&r, n + 1);

        fill(x, n, trial % DIST_COUNT, &r);
        check_all(x, n, k, &ws);
    }
    /* every k for a few lengths around the insertion-sort cutoff */
    for (size_t n = 1; n <= 40; n += 13) {
        for (int dist = 0; dist < DIST_COUNT; dist++) {
            size_t ks[41];

            fill(x, n, dist, &r);
            for (size_t k = 0; k <= n; k++)
                ks[k] = k;
            check_ks(x, n, ks, n + 1, &ws);
        }
    }
    sfl_topk_ws_close(&ws);
    sfl_topk_ws_close(&ws); /* closed twice is harmless */
}

static void test_topk_random_large(void **state)
{
    (void)state;
    /* Large enough for the sampled threshold (n >= 65536, k <= n/8) and
     * lengths that are not multiples of the 8-entry screening block or the
     * chunk of 2048. */
    static const size_t ns[] = {65536, 65537, 70001, 131071, 200003};
    sfl_topk_ws_t ws;
    sfl_rng_t r;

    sfl_topk_ws_init(&ws);
    sfl_rng_seed(&r, 8, 0, 0, SFL_STREAM_DATA);
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
        size_t n = ns[a];
        double *x = malloc(n * sizeof(*x));

        assert_non_null(x);
        for (int dist = 0; dist < DIST_COUNT; dist++) {
            const size_t ks[] = {1, 7, n / 100, n / 8, n / 8 + 1, n / 2, n - 1};

            fill(x, n, dist, &r);
            check_ks(x, n, ks, sizeof(ks) / sizeof(ks[0]), &ws);
        }
        free(x);
    }
    sfl_topk_ws_close(&ws);
}

static void test_topk_all_equal(void **state)
{
    (void)state;
    /* All magnitudes equal: the k smallest indices, and fast (this would be
     * quadratic with a naive two-way partition on equal keys). */
    enum { N = 300000 };
    double *x = malloc(N * sizeof(*x));
    uint32_t *out = malloc(N * sizeof(*out));
    sfl_topk_ws_t ws;

    assert_true(x && out);
    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, N), 0);
    for (size_t i = 0; i < N; i++)
        x[i] = (i % 2) ? -1.5 : 1.5;
    const size_t ks[] = {1, 1000, N / 8, N / 2, N - 1};
    for (size_t b = 0; b < sizeof(ks) / sizeof(ks[0]); b++) {
        assert_int_equal(sfl_topk_select(x, N, ks[b], out, &ws), 0);
        for (size_t j = 0; j < ks[b]; j++)
            assert_int_equal(out[j], j);
    }
    for (size_t i = 0; i < N; i++)
        x[i] = 0.0;
    assert_int_equal(sfl_topk_select(x, N, 5000, out, &ws), 0);
    assert_int_equal(out[4999], 4999);
    free(out);
    free(x);
    sfl_topk_ws_close(&ws);
}

/* Musser's median-of-3 killer for a pivot taken at lo, mid, hi. */
static void mo3_killer(double *x, size_t n)
{
    size_t half = n / 2;

    for (size_t i = 0; i < half; i++) {
        if (i % 2 == 0) {
            x[i] = (double)(i + 1);
            x[i + 1] = (double)(half + i + 1);
        }
        x[half + i] = (double)(2 * (i + 1));
    }
    if (n % 2)
        x[n - 1] = (double)n;
}

static void test_topk_adversarial(void **state)
{
    (void)state;
    enum { N = 100003 };
    double *x = malloc(N * sizeof(*x));
    sfl_topk_ws_t ws;

    assert_non_null(x);
    sfl_topk_ws_init(&ws);
    for (int pat = 0; pat < 6; pat++) {
        for (size_t i = 0; i < N; i++) {
            switch (pat) {
            case 0: /* ascending */
                x[i] = (double)i;
                break;
            case 1: /* descending */
                x[i] = -(double)(N - i);
                break;
            case 2: /* organ pipe */
                x[i] = (double)(i < N / 2 ? i : N - i);
                break;
            case 3: /* sawtooth with period 8 (the screening block) */
                x[i] = (double)(i % 8);
                break;
            case 4: /* two values, large ones at the end */
                x[i] = i < N - 5000 ? 1.0 : 2.0;
                break;
            case 5:
                break;
            }
        }
        if (pat == 5)
            mo3_killer(x, N);
        const size_t ks[] = {1, 100, 5000, N / 3, N / 2, N - 2};
        check_ks(x, N, ks, sizeof(ks) / sizeof(ks[0]), &ws);
    }
    free(x);
    sfl_topk_ws_close(&ws);
}

static void test_topk_sample_miss(void **state)
{
    (void)state;
    /* White box: rebuild the threshold sample that topk.c draws (one
     * position per stratum, SAMPLE_SEED, SFL_STREAM_PIVOT) and put large
     * values exactly at the sampled positions, so the sample believes large
     * values are common and the first candidate pass finds fewer than k.
     * The result must still be exact. */
    enum { N = SAMPLE_MIN_N, S = N / SAMPLE_DIV, K = 2000 };
    double *x = malloc(N * sizeof(*x));
    sfl_topk_ws_t ws;
    sfl_rng_t r;

    assert_true(S <= SAMPLE_MAX);
    assert_non_null(x);
    sfl_topk_ws_init(&ws);
    for (size_t i = 0; i < N; i++)
        x[i] = 1.0 + (double)(i % 977) * 1e-3;
    sfl_rng_seed(&r, SAMPLE_SEED, N, K, SFL_STREAM_PIVOT);
    size_t first = 0;
    for (size_t j = 0; j < S; j++) {
        size_t i = j * (N / S) + sfl_rng_below(&r, N / S);

        x[i] = 100.0 + (double)j;
        first = j == 0 ? i : first;
    }
    check_all(x, N, K, &ws);
    /* a NaN the sample itself draws */
    uint32_t *out = malloc(K * sizeof(*out));
    assert_non_null(out);
    x[first] = NAN;
    assert_int_equal(sfl_topk_select(x, N, K, out, &ws), SFL_ENUMERIC);
    free(out);
    free(x);
    sfl_topk_ws_close(&ws);
}

static void test_topk_block(void **state)
{
    (void)state;
    enum { B = 7, L = 1000 };
    double *x = malloc(B * L * sizeof(*x)), *y = malloc(B * L * sizeof(*y));
    uint32_t want[L];
    sfl_topk_ws_t ws;
    sfl_rng_t r;

    assert_true(x && y);
    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, L), 0);
    sfl_rng_seed(&r, 9, 0, 0, SFL_STREAM_DATA);
    for (int dist = 0; dist < DIST_COUNT; dist++) {
        for (size_t tau = 0; tau <= L; tau += (tau < 5 ? 1 : 331)) {
            fill(x, B * L, dist, &r);
            memcpy(y, x, B * L * sizeof(*y));
            assert_int_equal(sfl_ht_block(y, B, L, tau, &ws), 0);
            for (size_t b = 0; b < B; b++) {
                const double *xb = x + b * L, *yb = y + b * L;

                naive_topk(xb, L, tau, want);
                for (size_t i = 0, j = 0; i < L; i++) {
                    if (j < tau && want[j] == i) {
                        assert_memory_equal(&yb[i], &xb[i], sizeof(double));
                        j++;
                    } else {
                        assert_true(yb[i] == 0.0);
                    }
                }
            }
        }
    }
    /* tau > blocklen, workspace too small, NaN in the last block (nothing
     * changed anywhere), zero blocks. */
    fill(x, B * L, DIST_GAUSS, &r);
    memcpy(y, x, B * L * sizeof(*y));
    assert_int_equal(sfl_ht_block(y, B, L, L + 1, &ws), SFL_EINVAL);
    y[B * L - 1] = NAN;
    assert_int_equal(sfl_ht_block(y, B, L, 10, &ws), SFL_ENUMERIC);
    assert_memory_equal(y, x, (B * L - 1) * sizeof(*y));
    assert_int_equal(sfl_ht_block(y, 0, L, 10, &ws), 0);
    assert_int_equal(sfl_ht_block(y, SIZE_MAX / 2, 3, 1, &ws), SFL_EINVAL);
    sfl_topk_ws_close(NULL);
    sfl_topk_ws_t small;
    sfl_topk_ws_init(&small);
    assert_int_equal(sfl_topk_ws_reserve(&small, L - 1), 0);
    assert_int_equal(sfl_ht_block(x, B, L, 10, &small), SFL_EINVAL);
    sfl_topk_ws_close(&small);
    free(x);
    free(y);
    sfl_topk_ws_close(&ws);
}

static void test_topk_errors(void **state)
{
    (void)state;
    double x[100];
    uint32_t out[101];
    sfl_topk_ws_t ws;
    sfl_spvec_t *sp = NULL;

    sfl_topk_ws_init(&ws);
    for (size_t i = 0; i < 100; i++)
        x[i] = (double)i;
    /* workspace not reserved */
    assert_int_equal(sfl_topk_select(x, 100, 3, out, &ws), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "workspace"));
    assert_int_equal(sfl_topk_ws_reserve(&ws, 100), 0);
    assert_int_equal(sfl_topk_select(x, 100, 101, out, &ws), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "101"));
    assert_int_equal(sfl_ht_dense(x, 100, 101, &ws), SFL_EINVAL);
    /* n = 0 */
    assert_int_equal(sfl_topk_select(NULL, 0, 0, out, &ws), 0);
    assert_int_equal(sfl_topk_select(x, 0, 1, out, &ws), SFL_EINVAL);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(sfl_topk_ws_reserve(&ws, (size_t)UINT32_MAX + 1), SFL_EINVAL);
#endif

    /* NaN anywhere, for every k, in every entry point; x is left alone. */
    const size_t pos[] = {0, 5, 50, 99};
    for (size_t a = 0; a < 4; a++) {
        double y[100];

        memcpy(y, x, sizeof(y));
        y[pos[a]] = NAN;
        for (size_t k = 0; k <= 100; k += (k < 3 ? 1 : 49)) {
            double z[100];

            assert_int_equal(sfl_topk_select(y, 100, k, out, &ws), SFL_ENUMERIC);
            memcpy(z, y, sizeof(z));
            assert_int_equal(sfl_ht_dense(z, 100, k, &ws), SFL_ENUMERIC);
            assert_memory_equal(z, y, sizeof(z));
        }
    }
    /* NaN in a large vector: on the sampling path too */
    enum { N = 70000 };
    double *big = malloc(N * sizeof(*big));
    sfl_rng_t r;
    assert_non_null(big);
    assert_int_equal(sfl_topk_ws_reserve(&ws, N), 0);
    sfl_rng_seed(&r, 10, 0, 0, SFL_STREAM_DATA);
    fill(big, N, DIST_GAUSS, &r);
    uint32_t *bo = malloc(N * sizeof(*bo));
    assert_non_null(bo);
    const size_t bpos[] = {0, 12345, N - 3, N - 1};
    for (size_t a = 0; a < 4; a++) {
        double keep = big[bpos[a]];

        big[bpos[a]] = -NAN;
        assert_int_equal(sfl_topk_select(big, N, 100, bo, &ws), SFL_ENUMERIC);
        assert_int_equal(sfl_topk_select(big, N, N / 2, bo, &ws), SFL_ENUMERIC);
        big[bpos[a]] = keep;
    }
    free(bo);
    free(big);

    /* ht_to_spvec: dimension mismatch, NaN; out keeps its contents */
    assert_int_equal(sfl_spvec_new(99, 0, &sp), 0);
    assert_int_equal(sfl_ht_to_spvec(x, 100, 5, sp, &ws), SFL_EDIM);
    sfl_spvec_free(sp);
    assert_int_equal(sfl_spvec_new(100, 0, &sp), 0);
    assert_int_equal(sfl_ht_to_spvec(x, 100, 5, sp, &ws), 0);
    assert_int_equal(sp->nnz, 5);
    assert_int_equal(sp->idx[0], 95);
    x[3] = NAN;
    assert_int_equal(sfl_ht_to_spvec(x, 100, 5, sp, &ws), SFL_ENUMERIC);
    assert_int_equal(sp->nnz, 5);
    assert_int_equal(sfl_ht_to_spvec(x, 100, 101, sp, &ws), SFL_EINVAL);
    sfl_spvec_free(sp);
    sfl_topk_ws_close(&ws);
}

static void test_topk_heap_select(void **state)
{
    (void)state;
    /* The worst-case fallback and the quickselect it backs up, against the
     * full sort, for every rank of short arrays and some ranks of longer
     * ones, with and without ties. */
    static const size_t ms[] = {1, 2, 3, 5, 8, 17, 33, 100, 1000};
    double x[1000];
    uint32_t a[1000], b[1000];
    sfl_rng_t r;

    sfl_rng_seed(&r, 11, 0, 0, SFL_STREAM_DATA);
    for (size_t c = 0; c < sizeof(ms) / sizeof(ms[0]); c++) {
        size_t m = ms[c];

        for (int dist = 0; dist < DIST_COUNT; dist++) {
            fill(x, m, dist, &r);
            uint32_t *rank = rank_all(x, m);

            for (size_t q = 0; q < m; q += (m > 40 ? m / 7 + 1 : 1)) {
                for (size_t i = 0; i < m; i++)
                    a[i] = b[i] = (uint32_t)(m - 1 - i); /* any order works */
                assert_int_equal(heap_select(x, a, m, q), rank[q]);
                assert_int_equal(select_rank(x, b, m, q), rank[q]);
            }
            free(rank);
        }
    }
}

static sfl_topk_ws_t fa_ws;
static sfl_spvec_t *fa_sp;

static int fa_run(void)
{
    static const double x[10] = {5, -1, 0, 3, 9, -9, 2, 0, 1, 4};
    int rc = sfl_topk_ws_reserve(&fa_ws, 10);

    if (rc < 0)
        return rc;
    rc = sfl_spvec_new(10, 0, &fa_sp);
    if (rc < 0)
        return rc;
    return sfl_ht_to_spvec(x, 10, 3, fa_sp, &fa_ws);
}

static void test_topk_failalloc(void **state)
{
    (void)state;
    sfl_topk_ws_init(&fa_ws);
    FAILALLOC_EACH(fa_run(), {
        if (fa_rc_ == 0) {
            assert_int_equal(fa_sp->nnz, 3);
            assert_int_equal(fa_sp->idx[0], 0);
            assert_int_equal(fa_sp->idx[1], 4);
            assert_int_equal(fa_sp->idx[2], 5);
        } else if (fa_sp != NULL) {
            assert_int_equal(fa_sp->nnz, 0);
        }
        sfl_spvec_free(fa_sp);
        fa_sp = NULL;
        sfl_topk_ws_close(&fa_ws);
    });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_random_small),
        cmocka_unit_test(test_topk_random_large),
        cmocka_unit_test(test_topk_all_equal),
        cmocka_unit_test(test_topk_adversarial),
        cmocka_unit_test(test_topk_sample_miss),
        cmocka_unit_test(test_topk_heap_select),
        cmocka_unit_test(test_topk_block),
        cmocka_unit_test(test_topk_errors),
        cmocka_unit_test(test_topk_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "testutil.h"

/* n x 2 dataset: row i is [i+1, 0] except odd rows [0, -(i+1)], target t[i]. */
static sfl_dataset_t *make(uint32_t n, const double *t)
{
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;
    double *y;

    assert_int_equal(sfl_csr_new(n, 2, n, &X), 0);
    y = sfl__mallocarray(n, sizeof(double));
    assert_non_null(y);
    for (uint32_t i = 0; i < n; i++) {
        X->colind[i] = i % 2;
        X->val[i] = i % 2 ? -(double)(i + 1) : (double)(i + 1);
        X->rowptr[i + 1] = i + 1;
        y[i] = t ? t[i] : (double)i;
    }
    assert_int_equal(sfl_dataset_new(X, y, &ds), 0);
    return ds;
}

/* Row i of ds is row `orig` of make(): checks features and target. */
static void check_row(const sfl_dataset_t *ds, uint32_t i, uint32_t orig, double target)
{
    size_t k = ds->X->rowptr[i];
    assert_int_equal(ds->X->rowptr[i + 1] - k, 1);
    assert_int_equal(ds->X->colind[k], orig % 2);
    assert_true(ds->X->val[k] == (orig % 2 ? -(double)(orig + 1) : (double)(orig + 1)));
    assert_true(ds->y[i] == target);
}

static void test_dataset_limits_default(void **state)
{
    (void)state;
    sfl_read_limits_t lim;
    sfl_read_limits_default(&lim);
    assert_int_equal(lim.max_rows, 10000000);
    assert_int_equal(lim.max_cols, 1u << 26);
    assert_int_equal(lim.max_nnz, (size_t)1 << 31);
    assert_int_equal(lim.max_line, (size_t)64 << 20);
}

static void test_dataset_new(void **state)
{
    (void)state;
    sfl_dataset_t *ds = make(4, NULL);
    assert_int_equal(ds->X->nrows, 4);
    assert_int_equal(ds->nclasses, 0);
    assert_null(ds->labels);
    sfl_dataset_free(ds);
    sfl_dataset_free(NULL);

    /* Non-finite target: refused, and X and y are taken anyway (ASan's leak
     * checker would flag them otherwise). */
    sfl_csr_t *X = NULL;
    assert_int_equal(sfl_csr_new(2, 1, 0, &X), 0);
    double *y = sfl__calloc(2, sizeof(double));
    y[1] = NAN;
    ds = NULL;
    assert_int_equal(sfl_dataset_new(X, y, &ds), SFL_ENUMERIC);
    assert_null(ds);
    assert_detail("dataset_new: target of row 1 is not finite");

    /* Invalid matrix. */
    assert_int_equal(sfl_csr_new(1, 1, 1, &X), 0);
    X->rowptr[1] = 1;
    X->colind[0] = 1;
    X->val[0] = 1;
    y = sfl__calloc(1, sizeof(double));
    assert_int_equal(sfl_dataset_new(X, y, &ds), SFL_EINVAL);
    assert_detail("csr: row 0 entry 0: column 1 >= ncols 1");

    assert_int_equal(sfl_dataset_new(NULL, NULL, &ds), SFL_EINVAL);
}

static void test_dataset_encode_binary(void **state)
{
    (void)state;
    const double t[5] = { 1, -1, -1, 1, -1 };
    sfl_dataset_t *ds = make(5, t);

    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    assert_int_equal(ds->nclasses, 2);
    assert_true(ds->labels[0] == -1.0 && ds->labels[1] == 1.0);
    const double want[5] = { 1, 0, 0, 1, 0 };
    assert_memory_equal(ds->y, want, sizeof(want));
    /* A second call keeps the coding. */
    assert_int_equal(sfl_dataset_encode_labels(ds, 10), 0);
    assert_memory_equal(ds->y, want, sizeof(want));
    assert_true(ds->labels[0] == -1.0 && ds->labels[1] == 1.0);
    assert_int_equal(sfl_dataset_encode_labels(ds, 1), SFL_ELIMIT);
    sfl_dataset_free(ds);
}

static void test_dataset_encode_multiclass(void **state)
{
    (void)state;
    const double t[6] = { 2.5, -3, 7, 2.5, 7, 0 };
    sfl_dataset_t *ds = make(6, t);

    assert_int_equal(sfl_dataset_encode_labels(ds, 4), 0);
    assert_int_equal(ds->nclasses, 4);
    const double lab[4] = { -3, 0, 2.5, 7 };
    const double want[6] = { 2, 0, 3, 2, 3, 1 };
    assert_memory_equal(ds->labels, lab, sizeof(lab));
    assert_memory_equal(ds->y, want, sizeof(want));
    sfl_dataset_free(ds);
}

static void test_dataset_encode_bad(void **state)
{
    (void)state;
    sfl_dataset_t *ds = make(5, NULL); /* targets 0..4: five classes */

    assert_int_equal(sfl_dataset_encode_labels(ds, 4), SFL_ELIMIT);
    assert_detail("encode_labels: 5 distinct labels, more than max_classes=4");
    assert_int_equal(ds->nclasses, 0);
    assert_true(ds->y[4] == 4.0); /* untouched on failure */
    ds->y[3] = NAN;
    assert_int_equal(sfl_dataset_encode_labels(ds, 10), SFL_ENUMERIC);
    assert_detail("encode_labels: label of row 3 is NaN");
    assert_int_equal(ds->nclasses, 0);
    assert_int_equal(sfl_dataset_encode_labels(NULL, 2), SFL_EINVAL);
    sfl_dataset_free(ds);
}

static void test_dataset_concat(void **state)
{
    (void)state;
    sfl_dataset_t *a = make(5, NULL), *parts[2], *all = NULL, *odd;
    const uint32_t first[] = {0, 1}, rest[] = {2, 3, 4};

    /* Splitting then concatenating gives the original rows back. */
    assert_int_equal(sfl_dataset_subset(a, first, 2, &parts[0]), 0);
    assert_int_equal(sfl_dataset_subset(a, rest, 3, &parts[1]), 0);
    assert_int_equal(sfl_dataset_concat(parts, 2, &all), 0);
    assert_int_equal(all->X->nrows, 5);
    assert_int_equal(sfl_csr_validate(all->X), 0);
    for (uint32_t i = 0; i < 5; i++)
        check_row(all, i, i, (double)i);
    sfl_dataset_free(all);
    all = NULL;
    FAILALLOC_EACH(sfl_dataset_concat(parts, 2, &all), (sfl_dataset_free(all), all = NULL));

    /* Mismatched parts are refused. */
    assert_int_equal(sfl_dataset_concat(parts, 0, &all), SFL_EINVAL);
    odd = make(2, NULL);
    assert_int_equal(sfl_dataset_set_ncols(odd, 3), 0);
    sfl_dataset_free(parts[1]);
    parts[1] = odd;
    assert_int_equal(sfl_dataset_concat(parts, 2, &all), SFL_EDIM);
    assert_null(all);
    sfl_dataset_free(odd);
    sfl_dataset_free(parts[0]);
    assert_int_equal(sfl_dataset_subset(a, rest, 3, &parts[1]), 0);
    sfl_dataset_free(parts[1]);
    sfl_dataset_free(a);
}

static void test_dataset_subset(void **state)
{
    (void)state;
    const double t[5] = { 1, -1, -1, 1, 3 };
    sfl_dataset_t *ds = make(5, t), *sub = NULL;
    const uint32_t rows[] = { 4, 1, 1, 0 };

    assert_int_equal(sfl_dataset_encode_labels(ds, 3), 0);
    assert_int_equal(sfl_dataset_subset(ds, rows, 4, &sub), 0);
    assert_int_equal(sub->X->nrows, 4);
    assert_int_equal(sub->X->ncols, 2);
    assert_int_equal(sub->nclasses, 3);
    assert_ptr_not_equal(sub->labels, ds->labels);
    assert_memory_equal(sub->labels, ds->labels, 3 * sizeof(double));
    check_row(sub, 0, 4, 2);
    check_row(sub, 1, 1, 0);
    check_row(sub, 2, 1, 0);
    check_row(sub, 3, 0, 1);
    sfl_dataset_free(sub);

    const uint32_t bad[] = { 5 };
    sub = NULL;
    assert_int_equal(sfl_dataset_subset(ds, bad, 1, &sub), SFL_EINVAL);
    assert_null(sub);
    assert_detail("csr_select_rows: row 5 out of range");
    sfl_dataset_free(ds);
}

static void check_split(const sfl_dataset_t *ds, const sfl_dataset_t *tr,
                        const sfl_dataset_t *te, uint32_t ntest)
{
    uint32_t n = ds->X->nrows, seen[64] = { 0 };
    assert_int_equal(te->X->nrows, ntest);
    assert_int_equal(tr->X->nrows, n - ntest);
    /* Targets are the original row numbers: each part ascending, together
     * every row exactly once, features following their row. */
    for (uint32_t i = 0; i < tr->X->nrows; i++) {
        uint32_t r = (uint32_t)tr->y[i];
        check_row(tr, i, r, r);
        if (i > 0)
            assert_true(tr->y[i] > tr->y[i - 1]);
        seen[r]++;
    }
    for (uint32_t i = 0; i < te->X->nrows; i++) {
        uint32_t r = (uint32_t)te->y[i];
        check_row(te, i, r, r);
        if (i > 0)
            assert_true(te->y[i] > te->y[i - 1]);
        seen[r]++;
    }
    for (uint32_t r = 0; r < n; r++)
        assert_int_equal(seen[r], 1);
}

static void test_dataset_split(void **state)
{
    (void)state;
    sfl_dataset_t *ds = make(50, NULL), *tr = NULL, *te = NULL, *tr2 = NULL, *te2 = NULL;
    sfl_rng_t r1, r2, r3;

    sfl_rng_seed(&r1, 42, 0, 0, SFL_STREAM_PARTITION);
    r2 = r1;
    sfl_rng_seed(&r3, 43, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_dataset_split(ds, 0.25, &r1, &tr, &te), 0);
    check_split(ds, tr, te, 12); /* floor(12.5) */
    /* Same rng state, same split. */
    assert_int_equal(sfl_dataset_split(ds, 0.25, &r2, &tr2, &te2), 0);
    assert_int_equal(te2->X->nrows, 12);
    assert_memory_equal(te->y, te2->y, 12 * sizeof(double));
    sfl_dataset_free(tr2);
    sfl_dataset_free(te2);
    /* Another seed, (almost surely) another split. */
    assert_int_equal(sfl_dataset_split(ds, 0.25, &r3, &tr2, &te2), 0);
    check_split(ds, tr2, te2, 12);
    assert_true(memcmp(te->y, te2->y, 12 * sizeof(double)) != 0);
    sfl_dataset_free(tr2);
    sfl_dataset_free(te2);
    sfl_dataset_free(tr);
    sfl_dataset_free(te);

    /* test_frac == 0: everything in train, test NULL, rng not needed. */
    assert_int_equal(sfl_dataset_split(ds, 0.0, NULL, &tr, &te), 0);
    assert_null(te);
    assert_int_equal(tr->X->nrows, 50);
    for (uint32_t i = 0; i < 50; i++)
        check_row(tr, i, i, i);
    sfl_dataset_free(tr);

    /* At least one training row stays. */
    sfl_dataset_free(ds);
    ds = make(3, NULL);
    assert_int_equal(sfl_dataset_split(ds, 0.99, &r1, &tr, &te), 0);
    check_split(ds, tr, te, 2);
    sfl_dataset_free(tr);
    sfl_dataset_free(te);
    /* Small fraction of a small set: an empty (not NULL) test part. */
    assert_int_equal(sfl_dataset_split(ds, 0.1, &r1, &tr, &te), 0);
    check_split(ds, tr, te, 0);
    sfl_dataset_free(tr);
    sfl_dataset_free(te);

    assert_int_equal(sfl_dataset_split(ds, 1.0, &r1, &tr, &te), SFL_EINVAL);
    assert_detail("dataset_split: test_frac 1 not in [0, 1)");
    assert_int_equal(sfl_dataset_split(ds, -0.1, &r1, &tr, &te), SFL_EINVAL);
    assert_int_equal(sfl_dataset_split(ds, NAN, &r1, &tr, &te), SFL_EINVAL);
    assert_int_equal(sfl_dataset_split(ds, 0.5, NULL, &tr, &te), SFL_EINVAL);
    assert_null(tr);
    assert_null(te);
    sfl_dataset_free(ds);
}

static void test_dataset_set_ncols(void **state)
{
    (void)state;
    sfl_dataset_t *ds = make(3, NULL);
    assert_int_equal(sfl_dataset_set_ncols(ds, 10), 0);
    assert_int_equal(ds->X->ncols, 10);
    assert_int_equal(sfl_dataset_set_ncols(ds, 10), 0);
    assert_int_equal(sfl_dataset_set_ncols(ds, 9), SFL_EINVAL);
    assert_detail("dataset_set_ncols: 9 columns would narrow 10");
    assert_int_equal(ds->X->ncols, 10);
    assert_int_equal(sfl_csr_validate(ds->X), 0);
    sfl_dataset_free(ds);
}

/* A vertical client's block: columns [col0, col0 + len), renumbered from
 * 0, every row, targets and label coding kept. */
static void test_dataset_columns(void **state)
{
    (void)state;
    const double t[4] = {1, 2, 1, 2};
    sfl_dataset_t *ds = make(4, t), *c = NULL;

    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    /* column 1 alone: rows 1 and 3 hold -2 and -4 there */
    assert_int_equal(sfl_dataset_columns(ds, 1, 1, &c), 0);
    assert_int_equal(c->X->nrows, 4);
    assert_int_equal(c->X->ncols, 1);
    assert_int_equal(c->X->nnz, 2);
    assert_int_equal(c->X->rowptr[1], 0);
    assert_int_equal(c->X->rowptr[2], 1);
    assert_int_equal(c->X->colind[0], 0);
    assert_true(c->X->val[0] == -2 && c->X->val[1] == -4);
    assert_memory_equal(c->y, ds->y, 4 * sizeof(double));
    assert_int_equal(c->nclasses, 2);
    assert_true(c->labels[0] == 1 && c->labels[1] == 2);
    sfl_dataset_free(c);
    /* all columns: the same matrix; none: an empty block of every row */
    assert_int_equal(sfl_dataset_columns(ds, 0, 2, &c), 0);
    assert_int_equal(c->X->nnz, 4);
    sfl_dataset_free(c);
    assert_int_equal(sfl_dataset_columns(ds, 2, 0, &c), 0);
    assert_true(c->X->nrows == 4 && c->X->ncols == 0 && c->X->nnz == 0);
    sfl_dataset_free(c);
    c = (sfl_dataset_t *)ds;
    assert_int_equal(sfl_dataset_columns(ds, 1, 2, &c), SFL_EINVAL);
    assert_null(c);
    assert_int_equal(sfl_dataset_columns(ds, 3, 0, &c), SFL_EINVAL);
    FAILALLOC_EACH(sfl_dataset_columns(ds, 0, 1, &c), (sfl_dataset_free(c), c = NULL));
    sfl_dataset_free(ds);
}

/* Moments add over parts; the standardizer is numpy's mean and std (ddof 0);
 * standardised columns have mean 0 and std sigma / (sigma + eps). */
static void test_dataset_standardize(void **state)
{
    sfl_dataset_t *ds = make(4, NULL), *a = NULL, *b = NULL;
    const uint32_t lo[] = {0, 1}, hi[] = {2, 3};
    double m[SFL_MOMENTS_LEN(2)] = {0}, mp[SFL_MOMENTS_LEN(2)] = {0}, mu[2], sc[2];
    double bad[SFL_MOMENTS_LEN(2)];

    (void)state;
    /* Rows [1,0] [0,-2] [3,0] [0,-4]. */
    assert_int_equal(sfl_dataset_moments(ds, 2, m), 0);
    assert_int_equal(sfl_dataset_subset(ds, lo, 2, &a), 0);
    assert_int_equal(sfl_dataset_subset(ds, hi, 2, &b), 0);
    assert_int_equal(sfl_dataset_moments(a, 2, mp), 0);
    assert_int_equal(sfl_dataset_moments(b, 2, mp), 0);
    assert_memory_equal(m, mp, sizeof(m));
    assert_true(m[0] == 4 && m[1] == 4 && m[2] == -6 && m[3] == 10 && m[4] == 20);
    assert_int_equal(sfl_moments_standardizer(m, 2, SFL_STANDARDIZE_EPS, mu, sc), 0);
    assert_true(mu[0] == 1 && mu[1] == -1.5);
    assert_true(fabs(sc[0] - 1 / (sqrt(1.5) + 0.001)) < 1e-15);
    assert_true(fabs(sc[1] - 1 / (sqrt(2.75) + 0.001)) < 1e-15);
    /* Only the first column counted. */
    memset(mp, 0, sizeof(mp));
    assert_int_equal(sfl_dataset_moments(ds, 1, mp), 0);
    assert_true(mp[0] == 4 && mp[1] == 4 && mp[2] == 10);

    assert_int_equal(sfl_dataset_standardize(ds, 2, mu, sc), 0);
    assert_int_equal(sfl_csr_validate(ds->X), 0);
    assert_int_equal(ds->X->nnz, 7); /* dense but for row 0's x = mu */
    memset(mp, 0, sizeof(mp));
    assert_int_equal(sfl_dataset_moments(ds, 2, mp), 0);
    for (int j = 0; j < 2; j++) {
        double sd = sqrt(j ? 2.75 : 1.5);

        assert_true(fabs(mp[1 + j]) < 1e-12);
        assert_true(fabs(sqrt(mp[3 + j] / 4) - sd / (sd + 0.001)) < 1e-12);
    }
    /* A zero mean keeps implicit zeros implicit. */
    mu[0] = 0;
    mu[1] = 0;
    sc[0] = sc[1] = 2;
    assert_int_equal(sfl_dataset_standardize(a, 2, mu, sc), 0);
    assert_int_equal(a->X->nnz, 2);
    assert_true(a->X->val[0] == 2 && a->X->val[1] == -4);

    /* Bad statistics. */
    assert_int_equal(sfl_dataset_standardize(b, 3, mu, sc), SFL_EDIM);
    mu[0] = NAN;
    assert_int_equal(sfl_dataset_standardize(b, 2, mu, sc), SFL_ENUMERIC);
    memcpy(bad, m, sizeof(bad));
    bad[0] = 0;
    assert_int_equal(sfl_moments_standardizer(bad, 2, 0.001, mu, sc), SFL_EINVAL);
    bad[0] = 4;
    bad[3] = -1;
    assert_int_equal(sfl_moments_standardizer(bad, 2, 0.001, mu, sc), SFL_EINVAL);
    bad[3] = INFINITY;
    assert_int_equal(sfl_moments_standardizer(bad, 2, 0.001, mu, sc), SFL_EINVAL);
    assert_int_equal(sfl_moments_standardizer(m, 2, 0, mu, sc), SFL_EINVAL);
    sfl_dataset_free(a);
    sfl_dataset_free(b);
    sfl_dataset_free(ds);
}

static void test_dataset_failalloc(void **state)
{
    (void)state;
    const double t[6] = { 1, 2, 1, 3, 2, 1 };
    sfl_dataset_t *ds = make(6, t), *a = NULL, *b = NULL;
    const uint32_t rows[] = { 5, 0, 3 };
    sfl_rng_t r;

    assert_int_equal(sfl_dataset_encode_labels(ds, 3), 0);
    FAILALLOC_EACH(sfl_dataset_subset(ds, rows, 3, &a), (sfl_dataset_free(a), a = NULL));
    FAILALLOC_EACH((sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION),
                    sfl_dataset_split(ds, 0.5, &r, &a, &b)),
                   (sfl_dataset_free(a), sfl_dataset_free(b), a = b = NULL));
    sfl_dataset_free(ds);

    ds = make(6, t);
    /* On failure the dataset must be left as it was so a retry works. */
    FAILALLOC_EACH(sfl_dataset_encode_labels(ds, 3), (void)0);
    assert_int_equal(ds->nclasses, 3);
    const double want[6] = { 0, 1, 0, 2, 1, 0 };
    assert_memory_equal(ds->y, want, sizeof(want));
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dataset_limits_default),
        cmocka_unit_test(test_dataset_new),
        cmocka_unit_test(test_dataset_encode_binary),
        cmocka_unit_test(test_dataset_encode_multiclass),
        cmocka_unit_test(test_dataset_encode_bad),
        cmocka_unit_test(test_dataset_subset),
        cmocka_unit_test(test_dataset_concat),
        cmocka_unit_test(test_dataset_split),
        cmocka_unit_test(test_dataset_set_ncols),
        cmocka_unit_test(test_dataset_columns),
        cmocka_unit_test(test_dataset_standardize),
        cmocka_unit_test(test_dataset_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

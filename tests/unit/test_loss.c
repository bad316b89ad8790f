#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"
#include "sfl/core/rng.h"
#include "testutil.h"

/* Dataset from a dense row-major matrix (zeros dropped) and targets; for
 * nclasses > 0 the targets are class ids and labels are 0..nclasses-1. */
static sfl_dataset_t *make_ds(const double *a, uint32_t n, uint32_t d, const double *y,
                              uint32_t nclasses)
{
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;
    double *yy = sfl__mallocarray(n, sizeof(double));

    assert_non_null(yy);
    if (n > 0)
        memcpy(yy, y, n * sizeof(double));
    assert_int_equal(sfl_csr_from_dense(a, n, d, &X), 0);
    assert_int_equal(sfl_dataset_new(X, yy, &ds), 0);
    if (nclasses > 0) {
        ds->labels = sfl__mallocarray(nclasses, sizeof(double));
        assert_non_null(ds->labels);
        for (uint32_t c = 0; c < nclasses; c++)
            ds->labels[c] = c;
        ds->nclasses = nclasses;
    }
    return ds;
}

/* A random n x d problem with about a third of the entries zero. */
static sfl_dataset_t *random_ds(uint64_t seed, uint32_t n, uint32_t d, uint32_t nclasses)
{
    sfl_rng_t r;
    double a[128 * 16], y[128];

    assert_true(n <= 128 && d <= 16);
    sfl_rng_seed(&r, seed, 0, 0, 99);
    for (uint32_t i = 0; i < n * d; i++)
        a[i] = sfl_rng_below(&r, 3) == 0 ? 0.0 : sfl_rng_gauss(&r, 0.0, 1.0);
    for (uint32_t i = 0; i < n; i++)
        y[i] = nclasses ? (double)sfl_rng_below(&r, nclasses) : sfl_rng_gauss(&r, 0.5, 2.0);
    return make_ds(a, n, d, y, nclasses);
}

static void test_loss_find(void **state)
{
    (void)state;
    assert_ptr_equal(sfl_loss_find("lsq"), &sfl_loss_lsq);
    assert_ptr_equal(sfl_loss_find("logistic"), &sfl_loss_logistic);
    assert_ptr_equal(sfl_loss_find("softmax"), &sfl_loss_softmax);
    assert_ptr_equal(sfl_loss_find("sqhinge"), &sfl_loss_sqhinge);
    assert_true(sfl_loss_sqhinge.classification);
    assert_null(sfl_loss_find("hinge"));
    assert_null(sfl_loss_find(""));
    assert_null(sfl_loss_find(NULL));
    assert_false(sfl_loss_lsq.classification);
    assert_true(sfl_loss_logistic.classification);
    assert_true(sfl_loss_softmax.classification);
}

static void test_loss_dim(void **state)
{
    (void)state;
    assert_int_equal(sfl_loss_dim(&sfl_loss_lsq, 100, 0), 100);
    assert_int_equal(sfl_loss_dim(&sfl_loss_logistic, 100, 2), 100);
    assert_int_equal(sfl_loss_dim(&sfl_loss_softmax, 100, 10), 1000);
    assert_int_equal(sfl_loss_dim(&sfl_loss_softmax, 100, 1), 0);
    assert_int_equal(sfl_loss_dim(&sfl_loss_softmax, 100, SFL_LOSS_MAX_CLASSES + 1), 0);
}

/* Gradient against central differences, f with and without grad equal. */
static void check_grad(const sfl_loss_t *L, const sfl_dataset_t *ds, const uint32_t *rows,
                       uint32_t nrows, double lambda, uint64_t seed)
{
    size_t d = sfl_loss_dim(L, ds->X->ncols, ds->nclasses);
    double x[64], g[64], xp[64];
    sfl_rng_t r;

    assert_true(d > 0 && d <= 64);
    sfl_rng_seed(&r, seed, 0, 0, 98);
    for (size_t j = 0; j < d; j++)
        x[j] = sfl_rng_gauss(&r, 0.0, 0.7);
    double f = sfl_loss_eval(L, ds, rows, nrows, x, lambda, g);
    double f2 = sfl_loss_eval(L, ds, rows, nrows, x, lambda, NULL);

    assert_true(isfinite(f));
    assert_true(f == f2);
    for (size_t j = 0; j < d; j++) {
        const double h = 1e-5;

        memcpy(xp, x, d * sizeof(double));
        xp[j] = x[j] + h;
        double fp = sfl_loss_eval(L, ds, rows, nrows, xp, lambda, NULL);
        xp[j] = x[j] - h;
        double fm = sfl_loss_eval(L, ds, rows, nrows, xp, lambda, NULL);
        double fd = (fp - fm) / (2 * h);
        double tol = 1e-7 * (1.0 + fabs(g[j]));

        if (fabs(fd - g[j]) > tol)
            fail_msg("%s lambda=%g coord %zu: grad %.12g fd %.12g", L->name, lambda, j, g[j],
                     fd);
    }
}

static void test_loss_grad_matches_finite_differences(void **state)
{
    (void)state;
    const uint32_t rows[] = {5, 0, 3, 3, 8};
    struct {
        const sfl_loss_t *L;
        uint32_t nclasses;
    } cases[] = {{&sfl_loss_lsq, 0}, {&sfl_loss_logistic, 2}, {&sfl_loss_softmax, 3},
                 {&sfl_loss_softmax, 2}, {&sfl_loss_sqhinge, 2}};

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (uint64_t seed = 1; seed <= 3; seed++) {
            sfl_dataset_t *ds = random_ds(seed + 10 * c, 9, 6, cases[c].nclasses);

            check_grad(cases[c].L, ds, NULL, 0, 0.0, seed);
            check_grad(cases[c].L, ds, NULL, 0, 0.3, seed);
            check_grad(cases[c].L, ds, rows, 5, 0.0, seed);
            check_grad(cases[c].L, ds, rows, 5, 0.3, seed);
            sfl_dataset_free(ds);
        }
    }
}

/* Straightforward per-row reference (margins through sfl_csr_row_dot). */
static double reference(const sfl_loss_t *L, const sfl_dataset_t *ds, const uint32_t *rows,
                        uint32_t n, const double *x, double lambda, double *g)
{
    const sfl_csr_t *X = ds->X;
    uint32_t c = ds->nclasses, d = X->ncols;
    size_t dim = sfl_loss_dim(L, d, c);
    double f = 0;

    memset(g, 0, dim * sizeof(double));
    for (uint32_t t = 0; t < n; t++) {
        uint32_t i = rows ? rows[t] : t;
        double yi = ds->y[i];

        if (L == &sfl_loss_lsq) {
            double e = sfl_csr_row_dot(X, i, x) - yi;
            f += e * e;
            sfl_csr_row_axpy(X, i, 2 * e / n, g);
        } else if (L == &sfl_loss_logistic) {
            double m = sfl_csr_row_dot(X, i, x);
            f += log(1 + exp(m)) - yi * m;
            sfl_csr_row_axpy(X, i, (1 / (1 + exp(-m)) - yi) / n, g);
        } else if (L == &sfl_loss_sqhinge) {
            double sg = yi == 1 ? 1 : -1, h = fmax(0, 1 - sg * sfl_csr_row_dot(X, i, x));
            f += h * h;
            sfl_csr_row_axpy(X, i, -2 * sg * h / n, g);
        } else {
            double s[8] = {0}, z = 0;
            for (uint32_t r = 0; r < c; r++)
                z += exp(s[r] = sfl_csr_row_dot(X, i, x + (size_t)r * d));
            f += log(z) - s[(uint32_t)yi];
            for (uint32_t r = 0; r < c; r++)
                sfl_csr_row_axpy(X, i, (exp(s[r]) / z - (r == yi)) / n, g + (size_t)r * d);
        }
    }
    double sq = 0;
    for (size_t j = 0; j < dim; j++) {
        sq += x[j] * x[j];
        g[j] += lambda * x[j];
    }
    return (n ? f / n : 0) + lambda / 2 * sq;
}

/* Batches spanning several of eval's internal row blocks, ending in a
 * partial one, agree with the reference. */
static void test_loss_many_rows_match_reference(void **state)
{
    (void)state;
    const sfl_loss_t *all[] = {&sfl_loss_lsq, &sfl_loss_logistic, &sfl_loss_softmax,
                               &sfl_loss_sqhinge};
    const uint32_t ncl[] = {0, 2, 4, 2};
    uint32_t rows[100];
    double x[64], g[64], gr[64];
    sfl_rng_t r;

    sfl_rng_seed(&r, 7, 0, 0, 97);
    for (uint32_t t = 0; t < 100; t++)
        rows[t] = (uint32_t)sfl_rng_below(&r, 70);
    for (size_t k = 0; k < 4; k++) {
        sfl_dataset_t *ds = random_ds(100 + k, 70, 5, ncl[k]);
        size_t dim = sfl_loss_dim(all[k], 5, ncl[k]);

        for (size_t j = 0; j < dim; j++)
            x[j] = sfl_rng_gauss(&r, 0.0, 0.5);
        for (int sub = 0; sub < 2; sub++) {
            const uint32_t *rs = sub ? rows : NULL;
            uint32_t n = sub ? 100 : 70;
            double f = sfl_loss_eval(all[k], ds, rs, n, x, 0.1, g);
            double fr = reference(all[k], ds, rs, n, x, 0.1, gr);

            assert_close(f, fr, 1e-12, 0);
            for (size_t j = 0; j < dim; j++)
                assert_close(g[j], gr[j], 1e-12, 1e-12);
        }
        sfl_dataset_free(ds);
    }
}

/* grad's output against eval's gradient for one batch: the same bytes.
 * Both buffers start as different garbage, so a coordinate either path
 * forgot to write shows up too. */
static void check_grad_is_eval_grad(const sfl_loss_t *L, const sfl_dataset_t *ds,
                                    const uint32_t *rows, uint32_t n, const double *x,
                                    double lambda)
{
    size_t dim = sfl_loss_dim(L, ds->X->ncols, ds->nclasses);
    double ge[64], gg[64];

    assert_true(dim > 0 && dim <= 64);
    memset(ge, 0xa5, sizeof(ge));
    memset(gg, 0x5a, sizeof(gg));
    (void)sfl_loss_eval(L, ds, rows, n, x, lambda, ge);
    sfl_loss_grad(L, ds, rows, n, x, lambda, gg);
    for (size_t j = 0; j < dim; j++)
        assert_true(isfinite(gg[j]));
    assert_memory_equal(gg, ge, dim * sizeof(double));
}

/* loss->grad is eval's gradient bit for bit: whole dataset, batches with
 * repeated rows that end on, just past and inside an internal row block,
 * one row, an empty batch; with and without ridge; with moderate margins
 * and with margins large enough to saturate sigmoid and softmax. */
static void test_loss_grad_is_eval_grad(void **state)
{
    (void)state;
    const sfl_loss_t *all[] = {&sfl_loss_lsq, &sfl_loss_logistic, &sfl_loss_softmax,
                               &sfl_loss_softmax, &sfl_loss_sqhinge};
    const uint32_t ncl[] = {0, 2, 4, 2, 2};
    const uint32_t sizes[] = {1, 31, 32, 33, 100};
    const double lambdas[] = {0.0, 0.25};
    const double scales[] = {0.5, 200.0};
    uint32_t rows[100], dummy = 0;
    double x[64];
    sfl_rng_t r;

    sfl_rng_seed(&r, 11, 0, 0, 96);
    for (uint32_t t = 0; t < 100; t++)
        rows[t] = (uint32_t)sfl_rng_below(&r, 70);
    for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
        sfl_dataset_t *ds = random_ds(200 + k, 70, 5, ncl[k]);
        size_t dim = sfl_loss_dim(all[k], 5, ncl[k]);

        for (size_t s = 0; s < 2; s++) {
            for (size_t j = 0; j < dim; j++)
                x[j] = sfl_rng_gauss(&r, 0.0, scales[s]);
            for (size_t l = 0; l < 2; l++) {
                check_grad_is_eval_grad(all[k], ds, NULL, 0, x, lambdas[l]);
                check_grad_is_eval_grad(all[k], ds, &dummy, 0, x, lambdas[l]);
                for (size_t b = 0; b < sizeof(sizes) / sizeof(sizes[0]); b++)
                    check_grad_is_eval_grad(all[k], ds, rows, sizes[b], x, lambdas[l]);
            }
        }
        sfl_dataset_free(ds);
    }
}

/* grad alone, against known values: logistic at x = 0 is (1/2 - y) z / n
 * plus lambda x; an empty batch gives exactly lambda x. */
static void test_loss_grad_known_values(void **state)
{
    (void)state;
    const double a[] = {1, 2, 0, 0, 0, 3};
    const double yb[] = {1, 0};
    double x[6] = {0}, g[6];
    uint32_t dummy = 0;
    sfl_dataset_t *ds = make_ds(a, 2, 3, yb, 2);

    memset(g, 0xff, sizeof(g));
    sfl_loss_grad(&sfl_loss_logistic, ds, NULL, 0, x, 0.0, g);
    assert_close(g[0], -0.25, 0, 1e-15);
    assert_close(g[1], -0.5, 0, 1e-15);
    assert_close(g[2], 0.75, 0, 1e-15);
    x[0] = 2.0;
    x[2] = -1.0;
    memset(g, 0xff, sizeof(g));
    sfl_loss_grad(&sfl_loss_logistic, ds, &dummy, 0, x, 0.5, g);
    assert_close(g[0], 1.0, 0, 0);
    assert_close(g[1], 0.0, 0, 0);
    assert_close(g[2], -0.5, 0, 0);
    memset(g, 0xff, sizeof(g));
    sfl_loss_grad(&sfl_loss_softmax, ds, &dummy, 0, x, 0.5, g);
    for (size_t j = 0; j < 6; j++)
        assert_close(g[j], 0.5 * x[j], 0, 0);
    sfl_dataset_free(ds);
}

static void test_loss_known_values(void **state)
{
    (void)state;
    const double a[] = {1, 2, 0, 0, 0, 3};
    const double yb[] = {1, 0}, yr[] = {2, -1};
    double x[6] = {0}, g[6];

    /* logistic at x = 0: log 2 for every row, gradient mean of (1/2 - y) z. */
    sfl_dataset_t *ds = make_ds(a, 2, 3, yb, 2);
    assert_close(sfl_loss_eval(&sfl_loss_logistic, ds, NULL, 0, x, 0.0, g), log(2.0), 0, 1e-15);
    assert_close(g[0], -0.25, 0, 1e-15);
    assert_close(g[1], -0.5, 0, 1e-15);
    assert_close(g[2], 0.75, 0, 1e-15);
    /* softmax with 2 classes at x = 0: log 2 too. */
    assert_close(sfl_loss_eval(&sfl_loss_softmax, ds, NULL, 0, x, 0.0, g), log(2.0), 0, 1e-15);
    assert_close(sfl_loss_predict(&sfl_loss_softmax, ds, 0, x), 0.0, 0, 0); /* tie -> class 0 */
    sfl_dataset_free(ds);

    /* lsq: mean (z'x - y)^2 without 1/2, gradient 2/n sum (z'x - y) z, and
     * the ridge term lambda/2 ||x||^2. */
    ds = make_ds(a, 2, 3, yr, 0);
    x[0] = 1.0;
    x[2] = 1.0;
    /* residuals: 1 - 2 = -1, 3 + 1 = 4 -> (1 + 16) / 2 */
    assert_close(sfl_loss_eval(&sfl_loss_lsq, ds, NULL, 0, x, 0.0, g), 8.5, 0, 1e-15);
    assert_close(g[0], -1.0, 0, 1e-15);
    assert_close(g[1], -2.0, 0, 1e-15);
    assert_close(g[2], 12.0, 0, 1e-15);
    assert_close(sfl_loss_eval(&sfl_loss_lsq, ds, NULL, 0, x, 2.0, g), 8.5 + 2.0, 0, 1e-15);
    assert_close(g[0], 1.0, 0, 1e-15);
    assert_close(g[2], 14.0, 0, 1e-15);
    assert_close(sfl_loss_predict(&sfl_loss_lsq, ds, 1, x), 3.0, 0, 0);
    sfl_dataset_free(ds);
}

static void test_loss_extreme_margins_stay_finite(void **state)
{
    (void)state;
    const double a[] = {1, 1};
    const double y[] = {0, 1};
    double g[4];
    sfl_dataset_t *ds = make_ds(a, 2, 1, y, 2);

    for (int s = -1; s <= 1; s += 2) {
        double x[1] = {s * 1e4};
        /* Both rows have margin +-1e4, one with y = 0, one with y = 1: the
         * loss is the wrong row's 1e4 over 2; gradient (sigma - y) z / n. */
        double f = sfl_loss_eval(&sfl_loss_logistic, ds, NULL, 0, x, 0.0, g);

        assert_close(f, 5e3, 0, 1e-9);
        assert_close(g[0], s * 0.5, 0, 1e-15);
        uint32_t one = s > 0 ? 0 : 1; /* the wrong row */
        f = sfl_loss_eval(&sfl_loss_logistic, ds, &one, 1, x, 0.0, g);
        assert_close(f, 1e4, 0, 1e-9);
        assert_close(g[0], s > 0 ? 1.0 : -1.0, 0, 1e-15);
        uint32_t right = 1 - one;
        f = sfl_loss_eval(&sfl_loss_logistic, ds, &right, 1, x, 0.0, g);
        assert_true(f >= 0.0 && f < 1e-300);
        assert_close(g[0], 0.0, 0, 1e-300);

        double xs[2] = {s * 1e4, -s * 1e4};
        f = sfl_loss_eval(&sfl_loss_softmax, ds, NULL, 0, xs, 0.0, g);
        assert_close(f, 1e4, 0, 1e-9); /* margin 2e4 wrong on one row */
        for (int j = 0; j < 2; j++)
            assert_true(isfinite(g[j]));
        assert_close(g[0], s > 0 ? 0.5 : -0.5, 0, 1e-15);
        assert_close(g[1], s > 0 ? -0.5 : 0.5, 0, 1e-15);
    }
    sfl_dataset_free(ds);
}

static void test_loss_accuracy_separable(void **state)
{
    (void)state;
    /* Class = which of the two features is larger. */
    const double a[] = {2, 1, 1, 3, 5, 0, 0, 1, 4, 4.5};
    const double yb[] = {1, 0, 1, 0, 0};
    const double y3[] = {0, 1, 0, 1, 1};
    double xl[2] = {1, -1}, xs[4] = {1, 0, 0, 1}, bad[2] = {-1, 1};

    sfl_dataset_t *ds = make_ds(a, 5, 2, yb, 2);
    assert_close(sfl_loss_accuracy(&sfl_loss_logistic, ds, xl), 1.0, 0, 0);
    assert_close(sfl_loss_accuracy(&sfl_loss_logistic, ds, bad), 0.0, 0, 0);
    assert_true(isnan(sfl_loss_accuracy(&sfl_loss_lsq, ds, xl)));
    sfl_dataset_free(ds);

    ds = make_ds(a, 5, 2, y3, 2);
    assert_close(sfl_loss_accuracy(&sfl_loss_softmax, ds, xs), 1.0, 0, 0);
    /* Class 0 scores 0 now: row 0 turns wrong, row 2 (5, 0) ties at 0 and
     * the tie goes to class 0, still right. */
    xs[0] = 0;
    assert_close(sfl_loss_accuracy(&sfl_loss_softmax, ds, xs), 0.8, 0, 1e-15);
    sfl_dataset_free(ds);
}

static void test_loss_empty_batch(void **state)
{
    (void)state;
    const double a[] = {1, 2, 3, 4};
    const double y[] = {1, 0};
    double x[4] = {1, -2, 3, 0.5}, g[4];
    const sfl_loss_t *all[] = {&sfl_loss_lsq, &sfl_loss_logistic, &sfl_loss_softmax};
    sfl_dataset_t *ds = make_ds(a, 2, 2, y, 2);
    uint32_t dummy = 0;

    for (size_t k = 0; k < 3; k++) {
        size_t d = sfl_loss_dim(all[k], 2, 2);

        memset(g, 0xff, sizeof(g));
        double f = sfl_loss_eval(all[k], ds, &dummy, 0, x, 0.0, g);
        assert_close(f, 0.0, 0, 0);
        for (size_t j = 0; j < d; j++)
            assert_close(g[j], 0.0, 0, 0);
        f = sfl_loss_eval(all[k], ds, &dummy, 0, x, 0.5, g);
        double sq = 0;
        for (size_t j = 0; j < d; j++) {
            sq += x[j] * x[j];
            assert_close(g[j], 0.5 * x[j], 0, 0);
        }
        assert_close(f, 0.25 * sq, 0, 1e-15);
    }
    sfl_dataset_free(ds);

    /* A dataset with no rows, rows == NULL. */
    ds = make_ds(a, 0, 2, y, 2);
    assert_close(sfl_loss_eval(&sfl_loss_logistic, ds, NULL, 0, x, 0.0, g), 0.0, 0, 0);
    assert_close(g[0], 0.0, 0, 0);
    assert_true(isnan(sfl_loss_accuracy(&sfl_loss_logistic, ds, x)));
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_find),
        cmocka_unit_test(test_loss_dim),
        cmocka_unit_test(test_loss_grad_matches_finite_differences),
        cmocka_unit_test(test_loss_many_rows_match_reference),
        cmocka_unit_test(test_loss_grad_is_eval_grad),
        cmocka_unit_test(test_loss_grad_known_values),
        cmocka_unit_test(test_loss_known_values),
        cmocka_unit_test(test_loss_extreme_margins_stay_finite),
        cmocka_unit_test(test_loss_accuracy_separable),
        cmocka_unit_test(test_loss_empty_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

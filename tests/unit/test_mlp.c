/* The MLP loss "mlp:H" (libsfl/src/model/mlp.c): the registry, the
 * parameter layout, gradients against finite differences with and without a
 * hidden layer, grad = eval's gradient bit for bit, prediction = the
 * largest score, the starting model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"
#include "sfl/core/rng.h"
#include "testutil.h"

/* A random n x d classification problem with about half the entries zero. */
static sfl_dataset_t *random_ds(uint64_t seed, uint32_t n, uint32_t d, uint32_t nclasses)
{
    sfl_rng_t r;
    double *a = calloc((size_t)n * d, sizeof(double));
    double *y = sfl__mallocarray(n, sizeof(double));
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;

    assert_non_null(a);
    assert_non_null(y);
    sfl_rng_seed(&r, seed, 0, 0, 99);
    for (size_t i = 0; i < (size_t)n * d; i++)
        a[i] = sfl_rng_below(&r, 2) == 0 ? 0.0 : sfl_rng_gauss(&r, 0.0, 1.0);
    for (uint32_t i = 0; i < n; i++)
        y[i] = (double)sfl_rng_below(&r, nclasses);
    assert_int_equal(sfl_csr_from_dense(a, n, d, &X), 0);
    assert_int_equal(sfl_dataset_new(X, y, &ds), 0);
    ds->labels = sfl__mallocarray(nclasses, sizeof(double));
    assert_non_null(ds->labels);
    for (uint32_t c = 0; c < nclasses; c++)
        ds->labels[c] = c;
    ds->nclasses = nclasses;
    free(a);
    return ds;
}

static void test_mlp_find(void **state)
{
    (void)state;
    const sfl_loss_t *a = sfl_loss_find("mlp:100"), *b = sfl_loss_find("mlp:100");

    assert_non_null(a);
    assert_ptr_equal(a, b); /* one loss per hidden size */
    assert_string_equal(a->name, "mlp:100");
    assert_int_equal(a->hidden, 100);
    assert_true(a->classification);
    assert_non_null(sfl_loss_find("mlp:0"));
    assert_int_equal(sfl_loss_find("mlp:0")->hidden, 0);
    assert_non_null(sfl_loss_find("mlp:1024"));
    const char *bad[] = {"mlp", "mlp:", "mlp:1025", "mlp:01", "mlp:-1", "mlp:+5",
                         "mlp:5x", "mlp: 5", "mlp:99999999999999999999", "MLP:5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (sfl_loss_find(bad[i]) != NULL)
            fail_msg("'%s' was taken as a loss", bad[i]);
}

static void test_mlp_dim_and_problem(void **state)
{
    (void)state;
    const sfl_loss_t *l = sfl_loss_find("mlp:100"), *l0 = sfl_loss_find("mlp:0");
    sfl_problem_t prob;

    /* MNIST: 784 -> 100 -> 10 is 79,510 parameters (pFedMe's DNN). */
    assert_int_equal(sfl_loss_dim(l, 784, 10), 100 * 785 + 10 * 101);
    assert_int_equal(sfl_loss_dim(l, 784, 10), 79510);
    assert_int_equal(sfl_loss_dim(l0, 784, 10), 10 * 785);
    assert_int_equal(sfl_loss_dim(l, 784, 1), 0);
    assert_int_equal(sfl_loss_dim(l, 784, SFL_LOSS_MAX_CLASSES + 1), 0);
    assert_int_equal(sfl_problem_init(&prob, l, 60, 10), 0);
    assert_int_equal(prob.dim, 100 * 61 + 10 * 101);
    assert_int_equal(prob.nblocks, 1); /* sparsity over the whole vector */
    assert_int_equal(sfl_problem_init(&prob, l, 60, 1), SFL_EINVAL);
    assert_detail("mlp:100 needs at least 2 classes");
    /* 1024 x (2^32 - 1 + 1) entries do not fit the wire's uint32 dimension */
    assert_int_equal(sfl_problem_init(&prob, sfl_loss_find("mlp:1024"), UINT32_MAX, 10),
                     SFL_ELIMIT);
}

/* Gradient against central differences over every coordinate. */
static void check_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                       uint32_t nrows, double lambda, uint64_t seed)
{
    size_t d = sfl_loss_dim(l, ds->X->ncols, ds->nclasses);
    double *x = calloc(d, sizeof(double)), *g = calloc(d, sizeof(double));
    double *g2 = calloc(d, sizeof(double));
    sfl_rng_t r;

    assert_true(x && g && g2);
    sfl_rng_seed(&r, seed, 0, 0, 98);
    for (size_t j = 0; j < d; j++)
        x[j] = sfl_rng_gauss(&r, 0.0, 0.7);
    double f = sfl_loss_eval(l, ds, rows, nrows, x, lambda, g);

    assert_true(isfinite(f));
    assert_true(f == sfl_loss_eval(l, ds, rows, nrows, x, lambda, NULL));
    sfl_loss_grad(l, ds, rows, nrows, x, lambda, g2);
    assert_memory_equal(g, g2, d * sizeof(double)); /* the training path: same bits */
    for (size_t j = 0; j < d; j++) {
        const double h = 1e-6;
        double keep = x[j];

        x[j] = keep + h;
        double fp = sfl_loss_eval(l, ds, rows, nrows, x, lambda, NULL);
        x[j] = keep - h;
        double fm = sfl_loss_eval(l, ds, rows, nrows, x, lambda, NULL);
        x[j] = keep;
        double fd = (fp - fm) / (2 * h);

        if (fabs(fd - g[j]) > 1e-6 * (1.0 + fabs(g[j])))
            fail_msg("%s lambda=%g coord %zu of %zu: grad %.12g fd %.12g", l->name, lambda, j,
                     d, g[j], fd);
    }
    free(x);
    free(g);
    free(g2);
}

static void test_mlp_grad_matches_finite_differences(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_ds(1, 12, 6, 3);
    const uint32_t rows[] = {4, 0, 7, 7, 11};

    /* A ReLU kink inside [x - h, x + h] would spoil one coordinate; with
     * Gaussian weights and these seeds none is that close. */
    check_grad(sfl_loss_find("mlp:5"), ds, NULL, 0, 0.0, 2);
    check_grad(sfl_loss_find("mlp:5"), ds, rows, 5, 0.3, 3);
    check_grad(sfl_loss_find("mlp:1"), ds, NULL, 0, 0.0, 4);
    check_grad(sfl_loss_find("mlp:0"), ds, NULL, 0, 0.0, 5);
    check_grad(sfl_loss_find("mlp:0"), ds, rows, 5, 0.1, 6);
    sfl_dataset_free(ds);
}

/* H = 0 is multinomial logistic regression: with zero intercepts it
 * equals the softmax loss on the same weights (softmax's class-major
 * layout transposed). */
static void test_mlp_zero_hidden_is_softmax(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_ds(7, 20, 5, 4);
    const sfl_loss_t *l0 = sfl_loss_find("mlp:0");
    double x[4 * 6] = {0}, xs[4 * 5], g[4 * 6], gs[4 * 5];
    sfl_rng_t r;

    sfl_rng_seed(&r, 8, 0, 0, 1);
    for (uint32_t j = 0; j < 5; j++)
        for (uint32_t c = 0; c < 4; c++)
            xs[c * 5 + j] = x[j * 4 + c] = sfl_rng_gauss(&r, 0, 1);
    double f0 = sfl_loss_eval(l0, ds, NULL, 0, x, 0.0, g);
    double fs = sfl_loss_eval(&sfl_loss_softmax, ds, NULL, 0, xs, 0.0, gs);

    assert_close(f0, fs, 1e-13, 0);
    for (uint32_t j = 0; j < 5; j++)
        for (uint32_t c = 0; c < 4; c++)
            assert_close(g[j * 4 + c], gs[c * 5 + j], 1e-12, 1e-15);
    for (uint32_t i = 0; i < 20; i++)
        assert_true(sfl_loss_predict(l0, ds, i, x) == sfl_loss_predict(&sfl_loss_softmax, ds, i,
                                                                        xs));
    sfl_dataset_free(ds);
}

/* A hand-computed net: 2 features, 2 hidden units, 2 classes. */
static void test_mlp_known_values(void **state)
{
    (void)state;
    const sfl_loss_t *l = sfl_loss_find("mlp:2");
    const double a[] = {1.0, 2.0};
    double *y = sfl__mallocarray(1, sizeof(double));
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;

    y[0] = 1;
    assert_int_equal(sfl_csr_from_dense(a, 1, 2, &X), 0);
    assert_int_equal(sfl_dataset_new(X, y, &ds), 0);
    ds->labels = sfl__mallocarray(2, sizeof(double));
    ds->labels[0] = 0;
    ds->labels[1] = 1;
    ds->nclasses = 2;
    /* W1 (input-major): unit 0 = 1 z0 + 0 z1 + b 0.5 = 1.5; unit 1 =
     * -1 z0 - 1 z1 + 0 = -3 -> ReLU 0. W2: score 0 = 2 a0 = 3, score 1 =
     * -1 a0 + 1 = -0.5. */
    const double x[] = {1, -1, 0, -1, /* W1 */ 0.5, 0, /* b1 */
                        2, 0, -1, 0, /* W2 */ 0, 1 /* b2 */};
    assert_int_equal(sfl_loss_dim(l, 2, 2), 12);
    double f = sfl_loss_eval(l, ds, NULL, 0, x, 0.0, NULL);
    assert_close(f, log(exp(3.0) + exp(-0.5)) + 0.5, 1e-14, 0);
    assert_true(sfl_loss_predict(l, ds, 0, x) == 0.0);
    assert_close(sfl_loss_accuracy(l, ds, x), 0.0, 0, 0);
    sfl_dataset_free(ds);
}

static void test_mlp_init(void **state)
{
    (void)state;
    const sfl_loss_t *l = sfl_loss_find("mlp:8");
    size_t d = sfl_loss_dim(l, 100, 10), first = 8 * 101;
    double *x = calloc(d, sizeof(double)), *x2 = calloc(d, sizeof(double));
    double lo1 = 0, hi1 = 0, lo2 = 0, hi2 = 0;

    assert_true(x && x2);
    sfl_loss_init_model(l, 100, 10, 42, x);
    sfl_loss_init_model(l, 100, 10, 42, x2);
    assert_memory_equal(x, x2, d * sizeof(double)); /* coordinator = sfl-sim */
    for (size_t j = 0; j < d; j++) {
        if (j < first) {
            lo1 = fmin(lo1, x[j]);
            hi1 = fmax(hi1, x[j]);
        } else {
            lo2 = fmin(lo2, x[j]);
            hi2 = fmax(hi2, x[j]);
        }
    }
    /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): fan-in 100, then 8 */
    assert_true(lo1 >= -0.1 && hi1 <= 0.1 && lo1 < -0.09 && hi1 > 0.09);
    assert_true(lo2 >= -1 / sqrt(8.0) && hi2 <= 1 / sqrt(8.0) && hi2 - lo2 > 0.5);
    sfl_loss_init_model(l, 100, 10, 43, x2);
    assert_memory_not_equal(x, x2, d * sizeof(double));
    /* a linear loss starts at zero */
    memset(x, 0xff, 100 * sizeof(double));
    sfl_loss_init_model(&sfl_loss_logistic, 100, 2, 42, x);
    for (size_t j = 0; j < 100; j++)
        assert_true(x[j] == 0.0);
    free(x);
    free(x2);
}

/* Gradient descent on a separable toy problem learns it: the pieces fit. */
static void test_mlp_learns(void **state)
{
    (void)state;
    const sfl_loss_t *l = sfl_loss_find("mlp:16");
    uint32_t n = 200, dcols = 4;
    double *a = calloc((size_t)n * dcols, sizeof(double));
    double *y = sfl__mallocarray(n, sizeof(double));
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;
    sfl_rng_t r;

    sfl_rng_seed(&r, 3, 0, 0, 1);
    /* XOR of the signs of two features: no linear model gets it. */
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < dcols; j++)
            a[i * dcols + j] = sfl_rng_uniform(&r) * 2 - 1;
        y[i] = (a[i * dcols] > 0) != (a[i * dcols + 1] > 0);
    }
    assert_int_equal(sfl_csr_from_dense(a, n, dcols, &X), 0);
    assert_int_equal(sfl_dataset_new(X, y, &ds), 0);
    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    size_t d = sfl_loss_dim(l, dcols, 2);
    double *x = calloc(d, sizeof(double)), *g = calloc(d, sizeof(double));
    sfl_loss_init_model(l, dcols, 2, 1, x);
    for (int it = 0; it < 3000; it++) {
        sfl_loss_grad(l, ds, NULL, 0, x, 0.0, g);
        sfl_dvec_axpy(-0.5, g, x, d);
    }
    assert_true(sfl_loss_accuracy(l, ds, x) > 0.9);
    sfl_dataset_free(ds);
    free(a);
    free(x);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_find),
        cmocka_unit_test(test_mlp_dim_and_problem),
        cmocka_unit_test(test_mlp_grad_matches_finite_differences),
        cmocka_unit_test(test_mlp_zero_hidden_is_softmax),
        cmocka_unit_test(test_mlp_known_values),
        cmocka_unit_test(test_mlp_init),
        cmocka_unit_test(test_mlp_learns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* DP-BCFW's calibration (sfl/dp/dp.h, libsfl/src/dp/calib.c): the paper's
 * noise scales against values computed by hand, the leading singular value
 * against matrices whose singular values are known and against LAPACK, and
 * the gradient sensitivity bounds against their formulas and brute force. */
#include "testutil.h"

#include <lapacke.h>

#include "sfl/dp/dp.h"

/* epsilon 1, delta 1e-5, T 100, K 4, n 1000, eta 2, G 0.5. */
static const sfl_dp_bcfw_t run = {
    .epsilon = 1.0, .delta = 1e-5, .T = 100, .K = 4, .n = 1000, .eta = 2.0, .G = 0.5,
};

static void test_calib_index_scale(void **state)
{
    (void)state;
    double sens, b;

    /* sens = 2 G eta / (K n) = 2 * 0.5 * 2 / 4000 = 5e-4;
     * b = sens sqrt(2 T ln(2/delta)) / (eps/(4K))
     *   = 5e-4 * sqrt(200 * ln(2e5)) / (1/16)
     *   = 5e-4 * sqrt(200 * 12.206072645530174) * 16
     *   = 5e-4 * 49.408648...  * 16 = 0.39526918658401... */
    assert_int_equal(sfl_dp_bcfw_index_sens(&run, &sens), 0);
    assert_close(sens, 5e-4, 1e-15, 0);
    assert_int_equal(sfl_dp_bcfw_index_scale(&run, &b), 0);
    assert_close(b, 0.39526918658401167, 1e-13, 0);
}

static void test_calib_jl_sigma(void **state)
{
    (void)state;
    double sens, pi;

    /* sigma(J) = 1.5: pi = 1.5 sqrt(400) sqrt(2 (ln(1e5) + 0.5)) / (1000 * 0.5)
     *   = 1.5 * 20 * sqrt(24.025850929940457) / 500
     *   = 30 * 4.9016171...  / 500 = 0.294097030498075; sens = 1.5 / 1000. */
    assert_int_equal(sfl_dp_bcfw_jl_sens(&run, 1.5, &sens), 0);
    assert_close(sens, 1.5e-3, 1e-15, 0);
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&run, 1.5, &pi), 0);
    assert_close(pi, 0.294097030498075, 1e-13, 0);
}

static void test_calib_invalid(void **state)
{
    (void)state;
    sfl_dp_bcfw_t p;
    double out = 42;

    p = run, p.epsilon = 0;
    assert_int_equal(sfl_dp_bcfw_index_scale(&p, &out), SFL_EINVAL);
    p = run, p.delta = 1;
    assert_int_equal(sfl_dp_bcfw_index_scale(&p, &out), SFL_EINVAL);
    p = run, p.K = 0;
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&p, 1.0, &out), SFL_EINVAL);
    p = run, p.G = NAN;
    assert_int_equal(sfl_dp_bcfw_index_sens(&p, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&run, 0.0, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&run, INFINITY, &out), SFL_EINVAL);
    p = run, p.epsilon = 1e-310; /* b overflows */
    assert_int_equal(sfl_dp_bcfw_index_scale(&p, &out), SFL_ERANGE);
    assert_true(out == 42);
}

/* a[m x n] = Q1 diag(s) Q2^T, Q1 and Q2 Householder reflections
 * I - 2 u u^T / u^T u: singular values exactly s (up to rounding). */
static void make_known(double *a, size_t m, size_t n, const double *s)
{
    double u1[8], u2[8], n1 = 0, n2 = 0;

    for (size_t i = 0; i < m; i++) {
        u1[i] = 1.0 + 0.3 * (double)i;
        n1 += u1[i] * u1[i];
    }
    for (size_t j = 0; j < n; j++) {
        u2[j] = 2.0 - 0.7 * (double)j;
        n2 += u2[j] * u2[j];
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double v = 0;

            for (size_t k = 0; k < m && k < n; k++) {
                double q1 = (i == k) - 2 * u1[i] * u1[k] / n1;
                double q2 = (j == k) - 2 * u2[j] * u2[k] / n2;

                v += q1 * s[k] * q2;
            }
            a[i * n + j] = v;
        }
}

static void test_calib_sigma_max_known(void **state)
{
    (void)state;
    const double s1[3] = {5.0, 4.0, 1.0}, s2[3] = {5.0, 4.99, 1.0}, s3[3] = {2.0, 2.0, 0.5};
    const double *ss[] = {s1, s2, s3};
    double a[3 * 5], work[2 * 3 + 5], out;

    for (int k = 0; k < 3; k++) {
        make_known(a, 3, 5, ss[k]);
        assert_int_equal(sfl_dp_sigma_max(a, 3, 5, work, &out), 0);
        assert_close(out, ss[k][0], 1e-9, 0);
        /* The transpose has the same singular values. */
        double t[5 * 3], work2[2 * 5 + 3];

        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++)
                t[j * 3 + i] = a[i * 5 + j];
        assert_int_equal(sfl_dp_sigma_max(t, 5, 3, work2, &out), 0);
        assert_close(out, ss[k][0], 1e-9, 0);
    }
    /* Scaled far from 1: the iteration rescales by a power of two. */
    for (int i = 0; i < 15; i++)
        a[i] *= 1e200;
    assert_int_equal(sfl_dp_sigma_max(a, 3, 5, work, &out), 0);
    assert_close(out, 2e200, 1e-9, 0);
}

static void test_calib_sigma_max_vs_lapack(void **state)
{
    (void)state;
    enum { M = 30, NC = 400 };
    double *j = malloc(M * NC * sizeof(double)), *c = malloc(M * NC * sizeof(double));
    double work[2 * M + NC], s[M], sup[M], out, again;
    sfl_rng_t g;

    assert_non_null(j);
    assert_non_null(c);
    /* A Gaussian sketch, entries N(0, 1/m). */
    sfl_rng_seed(&g, 3, 0, 0, SFL_STREAM_DATA);
    for (int i = 0; i < M * NC; i++)
        c[i] = j[i] = sfl_rng_gauss(&g, 0.0, 1.0 / sqrt((double)M));
    assert_int_equal(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', M, NC, c, NC, s, NULL, 1,
                                    NULL, 1, sup),
                     0);
    assert_int_equal(sfl_dp_sigma_max(j, M, NC, work, &out), 0);
    assert_close(out, s[0], 1e-9, 0);
    assert_true(out >= s[0] * (1 - 1e-12)); /* from above, to rounding */
    /* Deterministic: the same bits again. */
    assert_int_equal(sfl_dp_sigma_max(j, M, NC, work, &again), 0);
    assert_memory_equal(&out, &again, sizeof(out));
    free(j);
    free(c);
}

static void test_calib_sigma_max_errors(void **state)
{
    (void)state;
    double a[6] = {0}, work[2 * 2 + 3], out = 42;

    assert_int_equal(sfl_dp_sigma_max(a, 0, 3, work, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_sigma_max(a, 2, 0, work, &out), SFL_EINVAL);
    assert_true(out == 42);
    assert_int_equal(sfl_dp_sigma_max(a, 2, 3, work, &out), 0);
    assert_true(out == 0);
    a[4] = NAN;
    assert_int_equal(sfl_dp_sigma_max(a, 2, 3, work, &out), SFL_ENUMERIC);
    a[4] = INFINITY;
    assert_int_equal(sfl_dp_sigma_max(a, 2, 3, work, &out), SFL_ENUMERIC);
}

static void test_calib_grad_sens_values(void **state)
{
    (void)state;
    sfl_dp_bounds_t b = {.n = 100, .eta = 2.0, .a_max = 1.0, .y_max = 3.0};
    double sens, G;

    /* lsq: L = 2 (a_max eta + y_max) = 10, sens = 2 a_max L / n = 0.2. */
    assert_int_equal(sfl_dp_grad_sens("lsq", &b, &sens), 0);
    assert_close(sens, 0.2, 1e-15, 0);
    assert_int_equal(sfl_dp_grad_bound("lsq", &b, &G), 0);
    assert_close(G, 10.0, 1e-15, 0);
    /* logistic: L = 1: 0.02, G = 1. */
    assert_int_equal(sfl_dp_grad_sens("logistic", &b, &sens), 0);
    assert_close(sens, 0.02, 1e-15, 0);
    assert_int_equal(sfl_dp_grad_bound("logistic", &b, &G), 0);
    assert_close(G, 1.0, 1e-15, 0);
    /* sqhinge: L = 2 (1 + a_max eta) = 6: 0.12, G = 6. */
    assert_int_equal(sfl_dp_grad_sens("sqhinge", &b, &sens), 0);
    assert_close(sens, 0.12, 1e-15, 0);
    /* a_max 0.5: lsq L = 2 (1 + 3) = 8, sens = 2 * 0.5 * 8 / 100 = 0.08, G = 4. */
    b.a_max = 0.5;
    assert_int_equal(sfl_dp_grad_sens("lsq", &b, &sens), 0);
    assert_close(sens, 0.08, 1e-15, 0);
    assert_int_equal(sfl_dp_grad_bound("lsq", &b, &G), 0);
    assert_close(G, 4.0, 1e-15, 0);
    assert_int_equal(sfl_dp_grad_sens("softmax", &b, &sens), SFL_ENOTFOUND);
    assert_int_equal(sfl_dp_grad_sens(NULL, &b, &sens), SFL_ENOTFOUND);
    b.a_max = 0;
    assert_int_equal(sfl_dp_grad_sens("lsq", &b, &sens), SFL_EINVAL);
    b.a_max = 1, b.n = 0;
    assert_int_equal(sfl_dp_grad_bound("logistic", &b, &G), SFL_EINVAL);
}

/* l'(m, y) of sfl/model/loss.h's linear losses. */
static double lprime(int loss, double m, double y)
{
    switch (loss) {
    case 0:
        return 2 * (m - y);
    case 1:
        return 1 / (1 + exp(-m)) - y;
    default: {
        double s = 2 * y - 1, h = 1 - s * m;

        return h > 0 ? -2 * s * h : 0;
    }
    }
}

/* Gradient coordinate i of (1/n) sum_j l(a_j . x, y_j). */
static double gcoord(int loss, const double *a, const double *y, const double *x, int n, int d,
                     int i)
{
    double g = 0;

    for (int j = 0; j < n; j++) {
        double m = 0;

        for (int k = 0; k < d; k++)
            m += a[j * d + k] * x[k];
        g += a[j * d + i] * lprime(loss, m, y[j]);
    }
    return g / n;
}

/* Replace one sample of random data by an extreme one (entries +-a_max,
 * target +-y_max or the other class): no coordinate moves by more than the
 * bound, and none exceeds G. */
static void test_calib_grad_sens_brute(void **state)
{
    (void)state;
    const char *names[] = {"lsq", "logistic", "sqhinge"};
    enum { n = 6, d = 4 };
    sfl_dp_bounds_t b = {.n = n, .eta = 1.5, .a_max = 0.8, .y_max = 2.0};
    double a[n * d], a2[n * d], y[n], y2[n], x[d];
    sfl_rng_t g;

    sfl_rng_seed(&g, 5, 0, 0, SFL_STREAM_DATA);
    for (int loss = 0; loss < 3; loss++) {
        double sens, G, worst = 0;

        assert_int_equal(sfl_dp_grad_sens(names[loss], &b, &sens), 0);
        assert_int_equal(sfl_dp_grad_bound(names[loss], &b, &G), 0);
        for (int trial = 0; trial < 2000; trial++) {
            double l1 = 0;

            for (int k = 0; k < d; k++)
                l1 += fabs(x[k] = sfl_rng_uniform(&g) - 0.5);
            for (int k = 0; k < d; k++)
                x[k] *= b.eta / l1; /* on the sphere of the ball */
            for (int j = 0; j < n * d; j++)
                a2[j] = a[j] = b.a_max * (2 * sfl_rng_uniform(&g) - 1);
            for (int j = 0; j < n; j++) {
                if (loss)
                    y[j] = (double)(sfl_rng_u64(&g) & 1);
                else
                    y[j] = b.y_max * (2 * sfl_rng_uniform(&g) - 1);
                y2[j] = y[j];
            }
            for (int k = 0; k < d; k++) /* sample 0 at a corner, aligned with x */
                a2[k] = (x[k] >= 0 ? 1 : -1) * b.a_max * (trial & 1 ? 1 : -1);
            y2[0] = loss ? 1 - y[0] : (trial & 2 ? b.y_max : -b.y_max);
            for (int i = 0; i < d; i++) {
                double g1 = gcoord(loss, a, y, x, n, d, i), g2 = gcoord(loss, a2, y2, x, n, d, i);

                assert_true(fabs(g1) <= G && fabs(g2) <= G);
                worst = fmax(worst, fabs(g1 - g2));
            }
        }
        assert_true(worst <= sens * (1 + 1e-12));
        assert_true(worst >= 0.3 * sens); /* the bound is not vacuous */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calib_index_scale),
        cmocka_unit_test(test_calib_jl_sigma),
        cmocka_unit_test(test_calib_invalid),
        cmocka_unit_test(test_calib_sigma_max_known),
        cmocka_unit_test(test_calib_sigma_max_vs_lapack),
        cmocka_unit_test(test_calib_sigma_max_errors),
        cmocka_unit_test(test_calib_grad_sens_values),
        cmocka_unit_test(test_calib_grad_sens_brute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

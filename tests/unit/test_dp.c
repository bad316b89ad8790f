/* Noise of sfl/dp/dp.h: sources, the exact samplers (Canonne, Kamath, Steinke
 * 2020) and the real-valued Laplace and Gaussian on their grids.
 *
 * Distribution tests draw N = 20,000 values from a seeded stream and
 * compare the empirical CDF with the exact CDF of the discrete
 * distribution, and of the continuous one for the real-valued draws: the
 * Kolmogorov-Smirnov statistic must stay below 1.95 / sqrt(N) = 0.0138, the
 * 0.001 critical value (for a discrete distribution the test is only more
 * conservative). Against the continuous CDF a grid draw g Z differs from
 * the continuous law by at most about g times the density, below 2^-20:
 * the tolerance adds 1e-5 for it. Seeds are fixed, so no test can flake. */
#include "testutil.h"

#include "sfl/dp/dp.h"

#define N 20000
#define KS_CRIT (1.95 / sqrt((double)N))

/* The sample variance of x[0..n) is var within 5 standard errors, the
 * standard error of the variance being sqrt((kurt - 1) / n) var (kurtosis
 * 3 for a Gaussian, 6 for a Laplace): a check of the scale with more power
 * than the KS test. */
static void check_variance(const double *x, size_t n, double var, double kurt)
{
    double m = 0, v = 0;

    for (size_t i = 0; i < n; i++)
        m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        v += (x[i] - m) * (x[i] - m);
    v /= (double)(n - 1);
    if (fabs(v - var) > 5 * sqrt((kurt - 1) / (double)n) * var)
        fail_msg("variance %g, want %g", v, var);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

typedef double (*cdf_fn)(int64_t z, const void *ctx);

/* sup |F_n - F| over the integers for integer samples: at each distinct
 * value v, the empirical CDF just below v against F(v - 1), and at v
 * against F(v); in between both are flat or F only grows. */
static double ks_discrete(int64_t *z, size_t n, cdf_fn F, const void *ctx)
{
    double d = 0;

    qsort(z, n, sizeof(*z), cmp_i64);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && z[j] == z[i]; j++)
            ;
        d = fmax(d, fabs((double)i / (double)n - F(z[i] - 1, ctx)));
        d = fmax(d, fabs((double)j / (double)n - F(z[i], ctx)));
    }
    return d;
}

static double ks_continuous(double *x, size_t n, double (*F)(double x, double scale), double s)
{
    double d = 0;

    qsort(x, n, sizeof(*x), cmp_dbl);
    for (size_t i = 0; i < n; i++) {
        double f = F(x[i], s);

        d = fmax(d, fmax((double)(i + 1) / (double)n - f, f - (double)i / (double)n));
    }
    return d;
}

/* Discrete Laplace of scale tau: P[z] = (1-q)/(1+q) q^|z|, q = exp(-1/tau). */
static double dlap_cdf(int64_t z, const void *ctx)
{
    double tau = *(const double *)ctx, q = exp(-1.0 / tau);

    if (z >= 0)
        return 1.0 - exp(-(double)(z + 1) / tau) / (1.0 + q);
    return exp((double)z / tau) / (1.0 + q);
}

/* Discrete Gaussian: its CDF tabulated over [-R, R], R = 40 sigma + 5. */
typedef struct {
    int64_t R;
    double *F; /* F[z + R] = P[Z <= z] */
} dg_table_t;

static void dg_table(dg_table_t *t, double sigma2)
{
    double sum = 0;

    t->R = (int64_t)(40 * sqrt(sigma2)) + 5;
    t->F = malloc((size_t)(2 * t->R + 1) * sizeof(double));
    assert_non_null(t->F);
    for (int64_t z = -t->R; z <= t->R; z++) {
        sum += exp(-(double)z * (double)z / (2 * sigma2));
        t->F[z + t->R] = sum;
    }
    for (int64_t i = 0; i <= 2 * t->R; i++)
        t->F[i] /= sum;
}

static double dg_cdf(int64_t z, const void *ctx)
{
    const dg_table_t *t = ctx;

    if (z < -t->R)
        return 0;
    return z >= t->R ? 1.0 : t->F[z + t->R];
}

static double lap_cdf(double x, double b)
{
    return x < 0 ? 0.5 * exp(x / b) : 1.0 - 0.5 * exp(-x / b);
}

static double gauss_cdf(double x, double sigma)
{
    return 0.5 * erfc(-x / (sigma * sqrt(2.0)));
}

static void test_dp_seeded_reproducible(void **state)
{
    (void)state;
    sfl_dp_rng_t a, b, c;
    int64_t za, zb;

    sfl_dp_rng_seeded(&a, 42, 3, 7);
    sfl_dp_rng_seeded(&b, 42, 3, 7);
    for (int i = 0; i < 500; i++) {
        double la = sfl_dp_laplace(&a, 1.3), lb = sfl_dp_laplace(&b, 1.3);
        double ga = sfl_dp_gaussian(&a, 0.7), gb = sfl_dp_gaussian(&b, 0.7);

        assert_memory_equal(&la, &lb, sizeof(la));
        assert_memory_equal(&ga, &gb, sizeof(ga));
        assert_int_equal(sfl_dp_dgauss(&a, 5, &za), 0);
        assert_int_equal(sfl_dp_dgauss(&b, 5, &zb), 0);
        assert_true(za == zb);
        assert_true(sfl_dp_rng_u64(&a) == sfl_dp_rng_u64(&b));
    }
    /* The stream is (seed, round, client, SFL_STREAM_DP): another client
     * draws otherwise, and so does the plain generator of that tuple's
     * other streams. */
    sfl_dp_rng_seeded(&a, 42, 3, 7);
    sfl_dp_rng_seeded(&c, 42, 3, 8);
    assert_true(sfl_dp_rng_u64(&a) != sfl_dp_rng_u64(&c));
    sfl_rng_t plain;
    sfl_rng_seed(&plain, 42, 3, 7, SFL_STREAM_DP);
    sfl_dp_rng_seeded(&a, 42, 3, 7);
    assert_true(sfl_dp_rng_u64(&a) == sfl_rng_u64(&plain));
}

static void test_dp_secure_differs(void **state)
{
    (void)state;
    sfl_dp_rng_t r;
    double l[8], g[8];
    int lsame = 1, gsame = 1;

    assert_int_equal(sfl_dp_rng_secure(&r), 0);
    assert_int_equal(r.source, SFL_DP_SECURE);
    assert_true(sfl_dp_rng_u64(&r) != sfl_dp_rng_u64(&r));
    for (int i = 0; i < 8; i++) {
        l[i] = sfl_dp_laplace(&r, 2.0);
        g[i] = sfl_dp_gaussian(&r, 2.0);
        assert_false(isnan(l[i]) || isnan(g[i]));
        lsame &= l[i] == l[0];
        gsame &= g[i] == g[0];
    }
    /* Eight equal draws of a scale-2^20 integer: probability below 2^-100. */
    assert_false(lsame);
    assert_false(gsame);
    /* The batch: a fresh source fills it at its first word, hands the
     * words out once each (wiped as taken) and refills when empty. */
    assert_int_equal(sfl_dp_rng_secure(&r), 0);
    assert_int_equal(r.left, 0);
    {
        uint64_t w[SFL_DP_RNG_BATCH + 1];

        for (int i = 0; i <= SFL_DP_RNG_BATCH; i++) {
            w[i] = sfl_dp_rng_u64(&r);
            assert_int_equal(r.left, (SFL_DP_RNG_BATCH - 1 - i + SFL_DP_RNG_BATCH) %
                                         SFL_DP_RNG_BATCH);
            assert_true(r.batch[r.left] == 0);
        }
        for (int i = 1; i <= SFL_DP_RNG_BATCH; i++)
            assert_true(w[i] != w[i - 1]);
    }
}

static void test_dp_invalid_is_nan(void **state)
{
    (void)state;
    sfl_dp_rng_t r;
    const double bad[] = {0.0, -1.0, NAN, INFINITY, -INFINITY, 1e-300, 1e300};

    sfl_dp_rng_seeded(&r, 1, 0, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_true(isnan(sfl_dp_laplace(&r, bad[i])));
        assert_true(isnan(sfl_dp_gaussian(&r, bad[i])));
        assert_true(isnan(sfl_dp_grid(bad[i])));
    }
    assert_detail("scale");
}

static void test_dp_grid(void **state)
{
    (void)state;
    sfl_dp_rng_t r;

    assert_true(sfl_dp_grid(1.0) == 0x1p-20);
    assert_true(sfl_dp_grid(1.999) == 0x1p-20);
    assert_true(sfl_dp_grid(0.75) == 0x1p-21);
    assert_true(sfl_dp_grid(0x1p20) == 1.0);
    assert_true(sfl_dp_grid(SFL_DP_SCALE_MIN) == 0x1p-920);
    /* Every draw is grid * integer. */
    sfl_dp_rng_seeded(&r, 9, 0, 0);
    for (int i = 0; i < 1000; i++) {
        double s = 0.01 + i * 0.37, g = sfl_dp_grid(s);
        double x = sfl_dp_laplace(&r, s), y = sfl_dp_gaussian(&r, s);

        assert_true(x / g == nearbyint(x / g));
        assert_true(y / g == nearbyint(y / g));
    }
}

/* x + noise as released depends on x only through round(x / grid): the
 * low bits of x never show (Mironov 2012's leak), and the noise is the
 * same draw as the plain sampler's. */
static void test_dp_release(void **state)
{
    (void)state;
    sfl_dp_rng_t a, b;
    const double s = 0.8, g = sfl_dp_grid(s); /* g = 2^-21 */

    for (int i = 0; i < 200; i++) {
        double x = 0.1 * i - 7.3, on = nearbyint(x / g) * g, off = on + 0.3 * g;

        for (int gauss = 0; gauss < 2; gauss++) {
            double r1, r2, n;

            sfl_dp_rng_seeded(&a, 11, 1, (uint64_t)i);
            sfl_dp_rng_seeded(&b, 11, 1, (uint64_t)i);
            r1 = gauss ? sfl_dp_release_gaussian(&a, off, s)
                       : sfl_dp_release_laplace(&a, off, s);
            r2 = gauss ? sfl_dp_release_gaussian(&b, on, s)
                       : sfl_dp_release_laplace(&b, on, s);
            assert_memory_equal(&r1, &r2, sizeof(r1));
            sfl_dp_rng_seeded(&b, 11, 1, (uint64_t)i);
            n = gauss ? sfl_dp_gaussian(&b, s) : sfl_dp_laplace(&b, s);
            assert_true(r1 == on + n);
            assert_true(r1 / g == nearbyint(r1 / g));
        }
    }
    /* Far from the noise's scale: the sum rounded once. */
    sfl_dp_rng_seeded(&a, 11, 2, 0);
    assert_true(fabs(sfl_dp_release_laplace(&a, 1e30, 1e-3) - 1e30) <= 1e15);
    double y = sfl_dp_release_gaussian(&a, 1e-300, 1e3) / sfl_dp_grid(1e3);

    assert_true(y == nearbyint(y));
    assert_true(isnan(sfl_dp_release_laplace(&a, NAN, 1.0)));
    assert_true(isnan(sfl_dp_release_gaussian(&a, INFINITY, 1.0)));
    assert_true(isnan(sfl_dp_release_gaussian(&a, 1.0, 0.0)));
}

static void test_dp_exact_param_errors(void **state)
{
    (void)state;
    sfl_dp_rng_t r;
    int b = 7;
    int64_t z = 7;

    sfl_dp_rng_seeded(&r, 1, 0, 0);
    assert_int_equal(sfl_dp_bernoulli_exp(&r, 1, 0, &b), SFL_EINVAL);
    assert_int_equal(sfl_dp_bernoulli_exp(&r, 1, SFL_DP_EXACT_MAX + 1, &b), SFL_ERANGE);
    assert_int_equal(b, 7);
    assert_int_equal(sfl_dp_dlaplace(&r, 0, 1, &z), SFL_EINVAL);
    assert_int_equal(sfl_dp_dlaplace(&r, 1, 0, &z), SFL_EINVAL);
    assert_int_equal(sfl_dp_dlaplace(&r, 1, SFL_DP_EXACT_MAX + 1, &z), SFL_ERANGE);
    assert_int_equal(sfl_dp_dlaplace(&r, 1, SFL_DP_DLAPLACE_MAX_SCALE, &z), SFL_ERANGE);
    assert_int_equal(sfl_dp_dgauss(&r, 0, &z), SFL_EINVAL);
    assert_int_equal(sfl_dp_dgauss(&r, SFL_DP_EXACT_MAX, &z), SFL_ERANGE);
    assert_int_equal(z, 7);
    /* The largest parameters work and stay in range. */
    assert_int_equal(sfl_dp_dgauss(&r, SFL_DP_EXACT_MAX - 1, &z), 0);
    assert_true(llabs(z) < (INT64_C(1) << 40));
    assert_int_equal(sfl_dp_dlaplace(&r, 1, SFL_DP_DLAPLACE_MAX_SCALE - 1, &z), 0);
    assert_int_equal(sfl_dp_dlaplace(&r, SFL_DP_EXACT_MAX, SFL_DP_EXACT_MAX, &z), 0);
}

static void test_dp_bernoulli_exp(void **state)
{
    (void)state;
    sfl_dp_rng_t r;
    const uint64_t g[][2] = {{0, 1}, {1, 2}, {1, 1}, {5, 2}, {7, 3}, {3, 1000000007}};
    int b;

    sfl_dp_rng_seeded(&r, 2020, 1, 0);
    for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
        double p = exp(-(double)g[k][0] / (double)g[k][1]), ones = 0;

        for (int i = 0; i < N; i++) {
            assert_int_equal(sfl_dp_bernoulli_exp(&r, g[k][0], g[k][1], &b), 0);
            assert_true(b == 0 || b == 1);
            ones += b;
        }
        /* Within 5 binomial standard deviations (exact for p = 1). */
        assert_true(fabs(ones - N * p) <= 5 * sqrt(N * p * (1 - p)));
    }
    /* A huge exponent: 0, after a handful of draws. */
    for (int i = 0; i < 100; i++) {
        assert_int_equal(sfl_dp_bernoulli_exp(&r, UINT64_MAX, 1, &b), 0);
        assert_int_equal(b, 0);
    }
}

static void test_dp_dlaplace_ks(void **state)
{
    (void)state;
    /* (s, t): scale t/s, from a third of a step to 10 steps. */
    const uint64_t p[][2] = {{1, 1}, {2, 3}, {1, 10}, {3, 1}, {7, 100}};
    int64_t *z = malloc(N * sizeof(*z));
    sfl_dp_rng_t r;

    assert_non_null(z);
    for (size_t k = 0; k < sizeof(p) / sizeof(p[0]); k++) {
        double tau = (double)p[k][1] / (double)p[k][0];

        sfl_dp_rng_seeded(&r, 2020, 2, k);
        for (int i = 0; i < N; i++)
            assert_int_equal(sfl_dp_dlaplace(&r, p[k][0], p[k][1], &z[i]), 0);
        double d = ks_discrete(z, N, dlap_cdf, &tau);

        if (d >= KS_CRIT)
            fail_msg("dlaplace(%g): KS %g >= %g", tau, d, KS_CRIT);
    }
    free(z);
}

static void test_dp_dgauss_ks(void **state)
{
    (void)state;
    const uint64_t s2[] = {1, 2, 7, 1000, 123457};
    int64_t *z = malloc(N * sizeof(*z));
    sfl_dp_rng_t r;

    assert_non_null(z);
    for (size_t k = 0; k < sizeof(s2) / sizeof(s2[0]); k++) {
        dg_table_t t;

        dg_table(&t, (double)s2[k]);
        sfl_dp_rng_seeded(&r, 2020, 3, k);
        for (int i = 0; i < N; i++)
            assert_int_equal(sfl_dp_dgauss(&r, s2[k], &z[i]), 0);
        double d = ks_discrete(z, N, dg_cdf, &t);

        free(t.F);
        if (d >= KS_CRIT)
            fail_msg("dgauss(%llu): KS %g >= %g", (unsigned long long)s2[k], d, KS_CRIT);
    }
    free(z);
}

/* The real-valued Laplace: x / grid is an exact discrete Laplace of scale
 * b / grid, and x follows Laplace(b) up to the grid. */
static void test_dp_laplace_ks(void **state)
{
    (void)state;
    const double b[] = {1.0, 3.7, 1e-3, 12345.678};
    double *x = malloc(N * sizeof(*x));
    int64_t *z = malloc(N * sizeof(*z));
    sfl_dp_rng_t r;

    assert_non_null(x);
    assert_non_null(z);
    for (size_t k = 0; k < sizeof(b) / sizeof(b[0]); k++) {
        double g = sfl_dp_grid(b[k]), tau = b[k] / g;

        sfl_dp_rng_seeded(&r, 2020, 4, k);
        for (int i = 0; i < N; i++) {
            x[i] = sfl_dp_laplace(&r, b[k]);
            z[i] = (int64_t)(x[i] / g);
        }
        check_variance(x, N, 2 * b[k] * b[k], 6);
        double dd = ks_discrete(z, N, dlap_cdf, &tau);
        double dc = ks_continuous(x, N, lap_cdf, b[k]);

        if (dd >= KS_CRIT || dc >= KS_CRIT + 1e-5)
            fail_msg("laplace(%g): KS %g (grid), %g (continuous)", b[k], dd, dc);
    }
    free(x);
    free(z);
}

static void test_dp_gaussian_ks(void **state)
{
    (void)state;
    const double s[] = {1.0, 0.37, 250.0, 3e-7};
    double *x = malloc(N * sizeof(*x));
    sfl_dp_rng_t r;

    assert_non_null(x);
    for (size_t k = 0; k < sizeof(s) / sizeof(s[0]); k++) {
        sfl_dp_rng_seeded(&r, 2020, 5, k);
        for (int i = 0; i < N; i++)
            x[i] = sfl_dp_gaussian(&r, s[k]);
        check_variance(x, N, s[k] * s[k], 3);
        double d = ks_continuous(x, N, gauss_cdf, s[k]);

        if (d >= KS_CRIT + 1e-5)
            fail_msg("gaussian(%g): KS %g >= %g", s[k], d, KS_CRIT + 1e-5);
    }
    free(x);
}

/* The exponential mechanism: 40,000 seeded draws over 5 candidates
 * against exp(u_i / beta) / Z, Pearson's chi-square below 18.47 (4 degrees
 * of freedom, p = 0.001); the same draws fail the test against the
 * Laplace-free uniform and against exp(u_i / (2 beta)). Candidates far
 * below the best are (almost) never drawn, and bad input is refused. */
static void test_dp_select_exp_chisq(void **state)
{
    (void)state;
    const double u[5] = {0.0, 0.5, 1.0, 2.0, -1.0}, beta = 0.8;
    const size_t ndraw = 40000;
    size_t count[5] = {0}, out = 99;
    double chi[3] = {0}, z[3] = {0};
    sfl_dp_rng_t r;

    sfl_dp_rng_seeded(&r, 11, 0, 0);
    for (size_t t = 0; t < ndraw; t++) {
        assert_int_equal(sfl_dp_select_exp(&r, u, 5, beta, &out), 0);
        assert_true(out < 5);
        count[out]++;
    }
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < 5; i++)
            z[h] += h == 0 ? exp(u[i] / beta) : h == 1 ? 1.0 : exp(u[i] / (2 * beta));
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < 5; i++) {
            double w = h == 0 ? exp(u[i] / beta) : h == 1 ? 1.0 : exp(u[i] / (2 * beta));
            double e = ndraw * w / z[h];

            chi[h] += (count[i] - e) * (count[i] - e) / e;
        }
    assert_true(chi[0] < 18.47);
    assert_true(chi[1] > 18.47 && chi[2] > 18.47);
    /* one candidate far ahead: always drawn */
    {
        const double v[3] = {0.0, 100.0, -3.0};

        for (int t = 0; t < 100; t++) {
            assert_int_equal(sfl_dp_select_exp(&r, v, 3, 1.0, &out), 0);
            assert_int_equal(out, 1);
        }
    }
    out = 7;
    assert_int_equal(sfl_dp_select_exp(&r, u, 0, beta, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_select_exp(&r, u, 5, 0.0, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_select_exp(&r, u, 5, NAN, &out), SFL_EINVAL);
    assert_int_equal(sfl_dp_select_exp(&r, u, 5, 1e-9, &out), SFL_ERANGE);
    {
        const double bad[2] = {0.0, NAN};

        assert_int_equal(sfl_dp_select_exp(&r, bad, 2, 1.0, &out), SFL_ERANGE);
    }
    assert_int_equal(out, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dp_seeded_reproducible),
        cmocka_unit_test(test_dp_secure_differs),
        cmocka_unit_test(test_dp_invalid_is_nan),
        cmocka_unit_test(test_dp_grid),
        cmocka_unit_test(test_dp_release),
        cmocka_unit_test(test_dp_exact_param_errors),
        cmocka_unit_test(test_dp_bernoulli_exp),
        cmocka_unit_test(test_dp_dlaplace_ks),
        cmocka_unit_test(test_dp_dgauss_ks),
        cmocka_unit_test(test_dp_laplace_ks),
        cmocka_unit_test(test_dp_gaussian_ks),
        cmocka_unit_test(test_dp_select_exp_chisq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "sfl/algo/algo.h"
#include "sfl/model/dict.h"
#include "sfl/data/synth.h"
#include "testfed.h"

/* ---- helpers -------------------------------------------------------- */

/* Solves the k x k system M z = r in place by Gaussian elimination with
 * partial pivoting (row-major M): the test's independent reference. */
static void gauss_solve(double *M, double *r, uint32_t k)
{
    for (uint32_t c = 0; c < k; c++) {
        uint32_t piv = c;

        for (uint32_t i = c + 1; i < k; i++)
            if (fabs(M[i * k + c]) > fabs(M[piv * k + c]))
                piv = i;
        assert_true(fabs(M[piv * k + c]) > 1e-300);
        if (piv != c) {
            for (uint32_t j = 0; j < k; j++) {
                double t = M[c * k + j];
                M[c * k + j] = M[piv * k + j];
                M[piv * k + j] = t;
            }
            double t = r[c];
            r[c] = r[piv];
            r[piv] = t;
        }
        for (uint32_t i = c + 1; i < k; i++) {
            double f = M[i * k + c] / M[c * k + c];

            for (uint32_t j = c; j < k; j++)
                M[i * k + j] -= f * M[c * k + j];
            r[i] -= f * r[c];
        }
    }
    for (uint32_t c = k; c-- > 0;) {
        double s = r[c];

        for (uint32_t j = c + 1; j < k; j++)
            s -= M[c * k + j] * r[j];
        r[c] = s / M[c * k + c];
    }
}

static double max_abs_diff(const double *a, const double *b, size_t n)
{
    double m = 0;

    for (size_t i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > m)
            m = fabs(a[i] - b[i]);
    return m;
}

static sfl_synth_t *gradmp_synth_alpha(uint32_t nclients, uint32_t n, uint32_t dim, uint32_t s,
                                       double noise, double alpha, uint64_t seed)
{
    sfl_synth_params_t sp;
    sfl_synth_t *syn;

    sfl_synth_params_default(&sp, SFL_SYNTH_GRADMP);
    sp.nclients = nclients;
    sp.n_per_client = n;
    sp.dim = dim;
    sp.s = s;
    sp.noise = noise;
    sp.alpha = alpha;
    sp.seed = seed;
    assert_int_equal(sfl_synth_generate(&sp, &syn), 0);
    return syn;
}

static sfl_synth_t *gradmp_synth(uint32_t nclients, uint32_t n, uint32_t dim, uint32_t s,
                                 double noise, uint64_t seed)
{
    return gradmp_synth_alpha(nclients, n, dim, s, noise, 1.0, seed);
}

/* ---- tests ---------------------------------------------------------- */

static void test_fedgradmp_registry(void **state)
{
    (void)state;
    const sfl_algo_t *a = sfl_algo_find("fedgradmp"), *b = sfl_algo_find("fedgradmp-inexact");

    assert_ptr_equal(a, &sfl_algo_fedgradmp);
    assert_ptr_equal(b, &sfl_algo_fedgradmp_inexact);
    assert_true(a->sparse && b->sparse);
    assert_non_null(a->model_of);
    assert_non_null(b->model_of);
}

/* approx_2tau is the exact top 2tau of |r| (ties to the lower index), per
 * block, merged with Lambda without duplicates. */
static void test_fedgradmp_support(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_topk_ws_t ws;
    uint32_t gam[16], ghat[32], ng = 99;
    const double r[10] = {0.1, -5, 3, 0, 2, -2, 0.5, 7, -0.2, 1};
    const uint32_t lam[3] = {0, 2, 9};

    sfl_topk_ws_init(&ws);
    assert_int_equal(sfl_topk_ws_reserve(&ws, 32), 0);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    /* tau 2: Gamma = top 4 = {1, 2, 4, 7} (|2| at 4 beats |-2| at 5). */
    assert_int_equal(sfl_algo_gradmp_support(&prob, 2, r, lam, 3, gam, ghat, &ng, &ws), 0);
    const uint32_t want[6] = {0, 1, 2, 4, 7, 9};
    assert_int_equal(ng, 6);
    assert_memory_equal(ghat, want, sizeof(want));
    /* Empty Lambda (round 1). */
    assert_int_equal(sfl_algo_gradmp_support(&prob, 2, r, NULL, 0, gam, ghat, &ng, &ws), 0);
    const uint32_t want2[4] = {1, 2, 4, 7};
    assert_int_equal(ng, 4);
    assert_memory_equal(ghat, want2, sizeof(want2));
    /* 2tau capped at the block: tau 6 selects all 10. */
    assert_int_equal(sfl_algo_gradmp_support(&prob, 6, r, lam, 3, gam, ghat, &ng, &ws), 0);
    assert_int_equal(ng, 10);
    for (uint32_t i = 0; i < 10; i++)
        assert_int_equal(ghat[i], i);

    /* Softmax: two blocks of 5, tau 1 -> top 2 per block. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 5, 2), 0);
    const uint32_t lam2[2] = {3, 8};
    assert_int_equal(sfl_algo_gradmp_support(&prob, 1, r, lam2, 2, gam, ghat, &ng, &ws), 0);
    /* block 0 (entries 0..4): top 2 = {1, 2}; block 1 (5..9): {5, 7}. */
    const uint32_t want4[6] = {1, 2, 3, 5, 7, 8};
    assert_int_equal(ng, 6);
    assert_memory_equal(ghat, want4, sizeof(want4));

    /* Bad input. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    const uint32_t unsorted[2] = {4, 1}, out_of_range[1] = {10};
    assert_int_equal(sfl_algo_gradmp_support(&prob, 2, r, unsorted, 2, gam, ghat, &ng, &ws),
                     SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_support(&prob, 2, r, out_of_range, 1, gam, ghat, &ng, &ws),
                     SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_support(&prob, 0, r, NULL, 0, gam, ghat, &ng, &ws),
                     SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_support(&prob, 11, r, NULL, 0, gam, ghat, &ng, &ws),
                     SFL_EINVAL);
    double bad[10];
    memcpy(bad, r, sizeof(bad));
    bad[3] = NAN;
    assert_int_equal(sfl_algo_gradmp_support(&prob, 2, bad, NULL, 0, gam, ghat, &ng, &ws),
                     SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "non-finite"));
    sfl_topk_ws_close(&ws);
}

/* Reference: solve (Z_G'Z_G + n lambda/2 A_G'A_G) b = Z_G'y by elimination,
 * with Z_G = Z A_G (A = I when dict is NULL). */
static void reference_solve(const double *Z, const double *y, uint32_t n, uint32_t d,
                            const sfl_dict_t *A, const uint32_t *G, uint32_t g, double lambda,
                            double *b)
{
    double *ZG = calloc((size_t)n * g, sizeof(double)), *M = calloc((size_t)g * g, sizeof(double));

    for (uint32_t i = 0; i < n; i++)
        for (uint32_t q = 0; q < g; q++) {
            if (A == NULL) {
                ZG[i * g + q] = Z[(size_t)i * d + G[q]];
                continue;
            }
            double s = 0;
            for (uint32_t j = 0; j < d; j++)
                s += Z[(size_t)i * d + j] * A->a[(size_t)G[q] * A->n + j];
            ZG[i * g + q] = s;
        }
    for (uint32_t a = 0; a < g; a++) {
        double s = 0;
        for (uint32_t i = 0; i < n; i++)
            s += ZG[i * g + a] * y[i];
        b[a] = s;
        for (uint32_t c = 0; c < g; c++) {
            double t = 0;
            for (uint32_t i = 0; i < n; i++)
                t += ZG[i * g + a] * ZG[i * g + c];
            if (lambda > 0) {
                double aa = a == c;
                if (A) {
                    aa = 0;
                    for (uint32_t j = 0; j < d; j++)
                        aa += A->a[(size_t)G[a] * A->n + j] * A->a[(size_t)G[c] * A->n + j];
                }
                t += 0.5 * lambda * n * aa;
            }
            M[a * g + c] = t;
        }
    }
    gauss_solve(M, b, g);
    free(M);
    free(ZG);
}

static void test_fedgradmp_solve_matches_dense(void **state)
{
    (void)state;
    enum { N = 14, D = 9 };
    double Z[N * D], y[N], b[D], ref[D];
    sfl_rng_t r;
    sfl_dict_t *A;
    int mn = -1;

    sfl_rng_seed(&r, 11, 0, 0, SFL_STREAM_DATA);
    for (uint32_t i = 0; i < N * D; i++)
        Z[i] = sfl_rng_gauss(&r, 0.3, 1.0);
    /* Some sparse rows (2 nonzeros), so both row-restriction paths run. */
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t j = 0; j < D; j++)
            if (j != i && j != i + 5)
                Z[i * D + j] = 0;
    for (uint32_t i = 0; i < N; i++)
        y[i] = sfl_rng_gauss(&r, 0, 1);
    sfl_dataset_t *ds = testfed_dense_data(Z, y, N, D);
    const uint32_t G[5] = {0, 2, 3, 5, 8};

    for (int withl = 0; withl < 2; withl++) {
        double lambda = withl ? 0.3 : 0.0;

        assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G, 5, lambda, b, &mn), 0);
        assert_int_equal(mn, 0);
        reference_solve(Z, y, N, D, NULL, G, 5, lambda, ref);
        assert_true(max_abs_diff(b, ref, 5) < 1e-12);
        /* The restricted gradient of the lsq loss vanishes at b. */
        double x[D] = {0}, grad[D];
        for (uint32_t q = 0; q < 5; q++)
            x[G[q]] = b[q];
        sfl_loss_grad(&sfl_loss_lsq, ds, NULL, 0, x, lambda, grad);
        for (uint32_t q = 0; q < 5; q++)
            assert_true(fabs(grad[G[q]]) < 1e-12);
    }
    /* One column, and all columns. */
    const uint32_t one = 7, all[D] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, &one, 1, 0, b, &mn), 0);
    reference_solve(Z, y, N, D, NULL, &one, 1, 0, ref);
    assert_true(fabs(b[0] - ref[0]) < 1e-13);
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, all, D, 0, b, &mn), 0);
    reference_solve(Z, y, N, D, NULL, all, D, 0, ref);
    assert_true(max_abs_diff(b, ref, D) < 1e-11);
    /* g == 0 is a no-op. */
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, NULL, 0, 0, NULL, &mn), 0);

    /* Dictionary: columns Z A_G, ridge A_G'A_G. */
    sfl_rng_seed(&r, 12, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(D, 12, &r, &A), 0);
    const uint32_t GA[4] = {1, 4, 10, 11};
    for (int withl = 0; withl < 2; withl++) {
        double lambda = withl ? 0.5 : 0.0;

        assert_int_equal(sfl_algo_gradmp_solve(ds, A, GA, 4, lambda, b, &mn), 0);
        assert_int_equal(mn, 0);
        reference_solve(Z, y, N, D, A, GA, 4, lambda, ref);
        assert_true(max_abs_diff(b, ref, 4) < 1e-11);
    }

    /* Bad input. */
    const uint32_t unsorted[2] = {3, 1}, oor[1] = {D};
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, unsorted, 2, 0, b, &mn), SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, oor, 1, 0, b, &mn), SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G, 5, -1, b, &mn), SFL_EINVAL);
    assert_int_equal(sfl_algo_gradmp_solve(ds, A, (const uint32_t[]){12}, 1, 0, b, &mn),
                     SFL_EINVAL);
    sfl_dict_t *wrong;
    assert_int_equal(sfl_dict_new(D + 1, 3, &wrong), 0);
    assert_int_equal(sfl_algo_gradmp_solve(ds, wrong, G, 1, 0, b, &mn), SFL_EDIM);
    sfl_dict_free(wrong);
    sfl_dict_free(A);
    sfl_dataset_free(ds);
}

/* Singular restricted Gram: the minimum-norm least-squares solution. */
static void test_fedgradmp_solve_singular(void **state)
{
    (void)state;
    /* More columns than rows: b = Z_G' (Z_G Z_G')^-1 y interpolates. */
    enum { N = 3, D = 6 };
    const double Z[N * D] = {1, 2, 0, 1, -1, 3, 0, 1, 1, 2, 0.5, -1, 2, 0, 1, 1, 1, 1};
    const double y[N] = {1, -2, 0.5};
    sfl_dataset_t *ds = testfed_dense_data(Z, y, N, D);
    const uint32_t G[5] = {0, 1, 2, 3, 5};
    double b[5], K[N * N], w[N];
    int mn = 0;

    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G, 5, 0, b, &mn), 0);
    assert_int_equal(mn, 1);
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t k = 0; k < N; k++) {
            double s = 0;
            for (uint32_t q = 0; q < 5; q++)
                s += Z[i * D + G[q]] * Z[k * D + G[q]];
            K[i * N + k] = s;
        }
        w[i] = y[i];
    }
    gauss_solve(K, w, N);
    for (uint32_t q = 0; q < 5; q++) {
        double ref = 0;
        for (uint32_t i = 0; i < N; i++)
            ref += Z[i * D + G[q]] * w[i];
        assert_true(fabs(b[q] - ref) < 1e-10);
    }
    sfl_dataset_free(ds);

    /* Duplicate column with g <= n: y = 3 * col; min norm splits 1.5/1.5. */
    const double Z2[4 * 3] = {1, 5, 1, 2, -1, 2, -1, 0, -1, 0.5, 3, 0.5};
    const double y2[4] = {3, 6, -3, 1.5};
    const uint32_t G2[2] = {0, 2};
    ds = testfed_dense_data(Z2, y2, 4, 3);
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G2, 2, 0, b, &mn), 0);
    assert_int_equal(mn, 1);
    assert_true(fabs(b[0] - 1.5) < 1e-10 && fabs(b[1] - 1.5) < 1e-10);
    /* An all-zero column: its coefficient is 0, the rest is exact. */
    const uint32_t G3[2] = {0, 1};
    const double Z3[3 * 2] = {1, 0, 2, 0, -1, 0};
    const double y3[3] = {2, 4, -2};
    sfl_dataset_free(ds);
    ds = testfed_dense_data(Z3, y3, 3, 2);
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G3, 2, 0, b, &mn), 0);
    assert_int_equal(mn, 1);
    assert_true(fabs(b[0] - 2.0) < 1e-12 && b[1] == 0.0);
    /* With a ridge the system is definite: Cholesky, no fallback. */
    assert_int_equal(sfl_algo_gradmp_solve(ds, NULL, G3, 2, 0.1, b, &mn), 0);
    assert_int_equal(mn, 0);
    sfl_dataset_free(ds);
}

/* Identity design, full batch: r = -2y/n at 0, Gamma = top 2tau |y|, the
 * exact solve gives y there, Lambda keeps the top tau: x = H_tau(y). */
static void test_fedgradmp_exact_identity(void **state)
{
    (void)state;
    const double y[6] = {0.5, -3, 0.1, 2, 0, -0.2};
    double x0[6] = {0};
    testfed_client_t c;
    sfl_spvec_t *u;

    testfed_client_init(&c, y, 6, 6);
    u = c.u;
    testfed_set(&c.p, "tau", 2);
    testfed_set(&c.p, "local_steps", 1);
    testfed_set(&c.p, "batch", 6);
    assert_int_equal(testfed_update(&sfl_algo_fedgradmp, &c, x0, c.ds), 0);
    assert_int_equal(u->nnz, 2);
    assert_int_equal(u->idx[0], 1);
    assert_int_equal(u->idx[1], 3);
    assert_true(fabs(u->val[0] + 3.0) < 1e-15 && fabs(u->val[1] - 2.0) < 1e-15);
    /* More steps and minibatches: the exact solve uses all rows, so the
     * answer stays H_tau(y) (a fixed point). */
    testfed_set(&c.p, "local_steps", 4);
    testfed_set(&c.p, "batch", 2);
    assert_int_equal(testfed_update(&sfl_algo_fedgradmp, &c, x0, c.ds), 0);
    assert_int_equal(u->nnz, 2);
    assert_true(fabs(u->val[0] + 3.0) < 1e-15 && fabs(u->val[1] - 2.0) < 1e-15);
    /* Inexact: f = (1/6)||x - y||^2, one GD step of 3 lands on y exactly. */
    testfed_set(&c.p, "local_steps", 1);
    testfed_set(&c.p, "batch", 6);
    testfed_set(&c.p, "inexact_steps", 1);
    testfed_set(&c.p, "lr", 3.0);
    assert_int_equal(testfed_update(&sfl_algo_fedgradmp_inexact, &c, x0, c.ds), 0);
    assert_int_equal(u->nnz, 2);
    assert_true(u->idx[0] == 1 && u->idx[1] == 3);
    assert_true(u->val[0] == -3.0 && u->val[1] == 2.0);
    /* Lambda starts as supp(x_t): with x_t = 4 e_0 = y_0 e_0 the gradient
     * at 0 vanishes, so Gamma (top 2) = {1, 3}; only the seeded Lambda
     * keeps 0 a candidate, and b_0 = 4 then wins the top-1. */
    const double y2[6] = {4, -3, 0.1, 2, 0, -0.2};
    double xs[6] = {4, 0, 0, 0, 0, 0};
    sfl_dataset_t *ds2 = testfed_identity_data(y2, 6);
    testfed_set(&c.p, "tau", 1);
    assert_int_equal(testfed_update(&sfl_algo_fedgradmp, &c, xs, ds2), 0);
    assert_int_equal(u->nnz, 1);
    assert_true(u->idx[0] == 0 && u->val[0] == 4.0);
    /* (Without the seed, Ghat = {1, 3} and the answer would be -3 at 1.) */
    sfl_dataset_free(ds2);
    testfed_client_close(&c);
}

/* Inexact with logistic and softmax losses: with tau = the block length
 * every coordinate is a candidate, so many GD steps reach the ridge-
 * regularised minimiser, where the full gradient vanishes. */
static void test_fedgradmp_inexact_classification(void **state)
{
    (void)state;
    enum { N = 12, D = 3 };
    double Z[N * D], yb[N], ym[N];
    sfl_rng_t r;

    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_DATA);
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t j = 0; j < D; j++)
            Z[i * D + j] = sfl_rng_gauss(&r, 0, 1);
        yb[i] = (double)(i % 2);
        ym[i] = (double)(i % 3);
    }
    for (int soft = 0; soft < 2; soft++) {
        sfl_dataset_t *ds = testfed_dense_data(Z, soft ? ym : yb, N, D);
        sfl_problem_t prob;
        sfl_algo_params_t p;
        sfl_algo_ws_t ws;
        sfl_spvec_t *u;
        double x0[9] = {0}, x[9] = {0}, g[9];

        ds->nclasses = soft ? 3 : 2;
        assert_int_equal(sfl_problem_init(&prob, soft ? &sfl_loss_softmax : &sfl_loss_logistic,
                                          D, soft ? 3 : 2), 0);
        testfed_params_default(&p);
        testfed_set(&p, "tau", D);
        testfed_set(&p, "local_steps", 2);
        testfed_set(&p, "batch", 4);
        testfed_set(&p, "lambda", 0.5);
        testfed_set(&p, "lr", 0.5);
        testfed_set(&p, "inexact_steps", 400);
        sfl_algo_ws_init(&ws);
        assert_int_equal(sfl_spvec_new((uint32_t)prob.dim, 0, &u), 0);
        sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
        /* The exact variant refuses, pointing to the inexact one. */
        assert_int_equal(sfl_algo_fedgradmp.client_update(testfed_as(&sfl_algo_fedgradmp, &p), &prob, x0, ds, NULL, &r, &ws, u),
                         SFL_EUNSUP);
        assert_non_null(strstr(sfl_last_error(), "fedgradmp-inexact"));
        assert_int_equal(sfl_algo_fedgradmp_inexact.client_update(testfed_as(&sfl_algo_fedgradmp_inexact, &p), &prob, x0, ds, NULL, &r,
                                                                  &ws, u), 0);
        sfl_spvec_scatter(u, x);
        sfl_loss_grad(prob.loss, ds, NULL, 0, x, sfl_algo_param_or(&p, "lambda", 0), g);
        assert_true(sfl_dvec_nrm2(g, prob.dim) < 1e-10);
        /* Per-class sparsity: tau 1 keeps one weight per block. */
        testfed_set(&p, "tau", 1);
        assert_int_equal(sfl_algo_fedgradmp_inexact.client_update(testfed_as(&sfl_algo_fedgradmp_inexact, &p), &prob, x0, ds, NULL, &r,
                                                                  &ws, u), 0);
        assert_true(u->nnz >= 1 && u->nnz <= prob.nblocks);
        for (uint32_t i = 1; i < u->nnz; i++)
            assert_true(u->idx[i] / D != u->idx[i - 1] / D);
        /* With a 3 x 2 dictionary: the state is 2 coefficients per block,
         * and at the coefficient-space minimiser A^T grad vanishes. */
        sfl_dict_t *A;
        sfl_spvec_t *uc;
        double xc[6] = {0}, model[9], ac[3];
        sfl_rng_seed(&r, 6, 0, 0, SFL_STREAM_DATA);
        assert_int_equal(sfl_dict_gaussian(D, 2, &r, &A), 0);
        assert_int_equal(sfl_dict_attach(&prob, A), 0);
        assert_int_equal(prob.dim, 2 * prob.nblocks);
        assert_int_equal(sfl_spvec_new((uint32_t)prob.dim, 0, &uc), 0);
        testfed_set(&p, "tau", 2);
        testfed_set(&p, "inexact_steps", 8000); /* c-space is worse conditioned: more steps */
        assert_int_equal(sfl_algo_fedgradmp_inexact.client_update(testfed_as(&sfl_algo_fedgradmp_inexact, &p), &prob, xc, ds, NULL, &r,
                                                                  &ws, uc), 0);
        sfl_spvec_scatter(uc, xc);
        assert_int_equal(sfl_algo_fedgradmp_inexact.model_of(testfed_as(&sfl_algo_fedgradmp_inexact, &p), &prob, xc, model, NULL), 0);
        sfl_loss_grad(prob.loss, ds, NULL, 0, model, sfl_algo_param_or(&p, "lambda", 0), g);
        for (uint32_t blk = 0; blk < prob.nblocks; blk++) {
            sfl_dict_apply_t(A, g + blk * D, ac);
            assert_true(fabs(ac[0]) < 1e-10 && fabs(ac[1]) < 1e-10);
        }
        sfl_spvec_free(uc);
        sfl_dict_free(A);
        sfl_spvec_free(u);
        sfl_algo_ws_close(&ws);
        sfl_dataset_free(ds);
    }
}

static void test_fedgradmp_bad_params(void **state)
{
    (void)state;
    const double y[3] = {1, 2, 3};
    double x0[4] = {0};
    testfed_client_t c;
    sfl_spvec_t *u4;
    const sfl_algo_t *algos[2] = {&sfl_algo_fedgradmp, &sfl_algo_fedgradmp_inexact};

    testfed_client_init(&c, y, 3, 3);
    assert_int_equal(sfl_spvec_new(4, 0, &u4), 0);
    for (int v = 0; v < 2; v++) {
        const sfl_algo_t *a = algos[v];

        assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
        testfed_params_default(&c.p);
        assert_int_equal(testfed_try(a, "tau", 0), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "tau"));
        testfed_set(&c.p, "tau", 4);
        assert_int_equal(testfed_update(a, &c, x0, c.ds), SFL_EINVAL);
        assert_int_equal(sfl_algo_check(a, testfed_as(a, &c.p), &c.prob), SFL_EINVAL);
        testfed_set(&c.p, "tau", 1);
        assert_int_equal(testfed_try(a, "l2_ball", -1), SFL_EINVAL);
        assert_int_equal(testfed_try(a, "local_steps", 0), SFL_EINVAL);
        testfed_set(&c.p, "local_steps", 2);
        /* Empty client. */
        assert_int_equal(testfed_update(a, &c, x0, c.empty), SFL_EEMPTY);
        assert_non_null(strstr(sfl_last_error(), "no samples"));
        /* Update of the wrong dimension; data of the wrong width. */
        assert_int_equal(a->client_update(testfed_as(a, &c.p), &c.prob, x0, c.ds, NULL, &c.r, &c.ws, u4),
                         SFL_EDIM);
        assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 4, 0), 0);
        assert_int_equal(a->client_update(testfed_as(a, &c.p), &c.prob, x0, c.ds, NULL, &c.r, &c.ws, u4),
                         SFL_EDIM);
        /* A state that does not match the problem (dim tampered). */
        assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
        c.prob.dim = 4;
        assert_int_equal(a->client_update(testfed_as(a, &c.p), &c.prob, x0, c.ds, NULL, &c.r, &c.ws, u4),
                         SFL_EDIM);
        /* NaN in the broadcast model. */
        assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
        double xn[3] = {0, NAN, 0};
        assert_int_equal(testfed_update(a, &c, xn, c.ds), SFL_ENUMERIC);
    }
    /* Inexact divergence is reported. */
    testfed_set(&c.p, "lr", 1e200);
    testfed_set(&c.p, "inexact_steps", 20);
    assert_int_equal(testfed_update(&sfl_algo_fedgradmp_inexact, &c, x0, c.ds), SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "diverged"));
    sfl_spvec_free(u4);
    testfed_client_close(&c);
}

/* Seed 004 Sec. V-C: 30 clients x 100 rows, dim 1000, 10-sparse truth on
 * the sphere, alpha 1.0, noiseless; batch 40, K = 3. FedGradMP reaches
 * machine precision in a handful of rounds (paper: four). */
static void test_fedgradmp_secvc_converges(void **state)
{
    (void)state;
    /* Full size, also under ASan (about 0.5 s there). */
    const uint32_t dim = 1000, nclients = 30;
    sfl_synth_t *syn = gradmp_synth(nclients, 100, dim, 10, 0.0, 2024);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    double errs[6];
    uint32_t hit = 0;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, dim, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 10);
    testfed_set(&p, "batch", 40);
    testfed_set(&p, "local_steps", 3);
    testfed_run(&(testfed_t){.algo = &sfl_algo_fedgradmp, .p = &p, .prob = &prob,
                             .clients = syn->clients, .nclients = syn->nclients, .rounds = 6,
                             .check = TESTFED_SPARSE, .truth = syn->truth, .errs = errs});
    for (uint32_t t = 0; t < 6; t++) {
        print_message("  round %u: relative error %.3e\n", t + 1, errs[t]);
        if (!hit && errs[t] < 1e-10)
            hit = t + 1;
    }
    assert_true(hit > 0 && hit <= 6);
    assert_true(errs[5] < 1e-10);
    sfl_synth_free(syn);
}

/* Partial participation (Alg. 2): a third of the clients each round. */
static void test_fedgradmp_partial_participation(void **state)
{
    (void)state;
    sfl_synth_t *syn = gradmp_synth(12, 60, 200, 5, 0.0, 9);
    sfl_synth_t *mild = gradmp_synth_alpha(12, 60, 200, 5, 0.0, 0.0, 9);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    double errs[10];

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 200, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 5);
    testfed_set(&p, "batch", 20);
    testfed_set(&p, "local_steps", 3);
    testfed_run(&(testfed_t){.algo = &sfl_algo_fedgradmp, .p = &p, .prob = &prob,
                             .clients = syn->clients, .nclients = syn->nclients, .rounds = 10,
                             .stride = 3, .check = TESTFED_SPARSE, .truth = syn->truth,
                             .errs = errs});
    assert_true(errs[9] < 1e-10);
    /* Inexact on the same problem: gradient steps of a safe size converge
     * too, if more slowly. */
    testfed_set(&p, "lr", 0.1);
    testfed_set(&p, "inexact_steps", 30);
    testfed_run(&(testfed_t){.algo = &sfl_algo_fedgradmp_inexact, .p = &p, .prob = &prob,
                             .clients = mild->clients, .nclients = mild->nclients, .rounds = 10,
                             .stride = 3, .check = TESTFED_SPARSE, .truth = mild->truth,
                             .errs = errs});
    print_message("  inexact, alpha 0, 10 rounds: relative error %.3e\n", errs[9]);
    assert_true(errs[9] < 1e-3);
    sfl_synth_free(mild);
    sfl_synth_free(syn);
}

static void test_fedgradmp_deterministic(void **state)
{
    (void)state;
    sfl_synth_t *syn = gradmp_synth(4, 40, 60, 3, 0.01, 3);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    double a[60], b[60];

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 60, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 4);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "local_steps", 2);
    testfed_t f = {.algo = &sfl_algo_fedgradmp, .p = &p, .prob = &prob, .clients = syn->clients,
                   .nclients = syn->nclients, .rounds = 3, .check = TESTFED_SPARSE,
                   .out_state = a};
    testfed_run(&f);
    f.out_state = b;
    testfed_run(&f);
    assert_memory_equal(a, b, sizeof(a));
    sfl_synth_free(syn);
}

/* Pi_R on local iterates and on the global model. */
static void test_fedgradmp_l2_ball(void **state)
{
    (void)state;
    sfl_synth_t *syn = gradmp_synth(4, 50, 80, 4, 0.0, 4);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
    sfl_rng_t r;
    double x[80] = {0}, errs[6];

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 80, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 4);
    testfed_set(&p, "batch", 50);
    testfed_set(&p, "local_steps", 2);
    testfed_set(&p, "l2_ball", 0.5); /* the truth has norm 1 */
    testfed_set(&p, "lr", 0.01);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new(80, 0, &u), 0);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    for (int v = 0; v < 2; v++) {
        const sfl_algo_t *a = v ? &sfl_algo_fedgradmp_inexact : &sfl_algo_fedgradmp;

        assert_int_equal(a->client_update(testfed_as(a, &p), &prob, x, syn->clients[0], NULL, &r, &ws, u), 0);
        double nrm = 0;
        for (uint32_t i = 0; i < u->nnz; i++)
            nrm += u->val[i] * u->val[i];
        /* The exact local fit is near the truth (norm 1): projected. */
        if (v == 0)
            assert_true(fabs(sqrt(nrm) - 0.5) < 1e-12);
        else
            assert_true(sqrt(nrm) <= 0.5 * (1 + 1e-12));
    }
    testfed_t f = {.algo = &sfl_algo_fedgradmp, .p = &p, .prob = &prob, .clients = syn->clients,
                   .nclients = syn->nclients, .rounds = 4, .check = TESTFED_SPARSE,
                   .truth = syn->truth, .errs = errs, .out_state = x};
    testfed_run(&f);
    assert_true(sfl_dvec_nrm2(x, 80) <= 0.5 * (1 + 1e-12));
    /* A radius the truth fits in changes nothing at the solution. */
    testfed_set(&p, "l2_ball", 2.0);
    f.rounds = 6;
    f.out_state = NULL;
    testfed_run(&f);
    assert_true(errs[3] < 1e-10);
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    sfl_synth_free(syn);
}

/* Dictionaries: the identity reproduces the standard basis bit for bit; a
 * Gaussian dictionary recovers a model sparse in its atoms. */
static void test_fedgradmp_dictionary(void **state)
{
    (void)state;
    sfl_synth_t *syn = gradmp_synth(4, 60, 40, 3, 0.0, 6);
    sfl_problem_t prob, pid;
    sfl_algo_params_t p;
    sfl_dict_t *I, *A;
    sfl_rng_t r;
    double a[40], b[40], errs[8];

    testfed_params_default(&p);
    testfed_set(&p, "tau", 3);
    testfed_set(&p, "batch", 20);
    testfed_set(&p, "local_steps", 2);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 40, 0), 0);
    assert_int_equal(sfl_problem_init(&pid, &sfl_loss_lsq, 40, 0), 0);
    assert_int_equal(sfl_dict_identity(40, &I), 0);
    assert_int_equal(sfl_dict_attach(&pid, I), 0);
    for (int v = 0; v < 2; v++) {
        const sfl_algo_t *al = v ? &sfl_algo_fedgradmp_inexact : &sfl_algo_fedgradmp;

        testfed_set(&p, "lr", 0.1);
        testfed_set(&p, "inexact_steps", 5);
        testfed_t f = {.algo = al, .p = &p, .prob = &prob, .clients = syn->clients,
                       .nclients = syn->nclients, .rounds = 3, .check = TESTFED_SPARSE,
                       .out_state = a};

        testfed_run(&f);
        f.prob = &pid;
        f.out_state = b;
        testfed_run(&f);
        assert_memory_equal(a, b, sizeof(a));
    }

    /* Overcomplete Gaussian dictionary, 40 x 70; truth = A c#, c# 3-sparse. */
    enum { M = 70 };
    double c[M] = {0}, xt[40], Z[60 * 40], y[60], state_[M], model[40];
    sfl_dataset_t *cl[4];
    sfl_rng_seed(&r, 8, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(40, M, &r, &A), 0);
    c[5] = 1.0;
    c[33] = -0.7;
    c[61] = 0.4;
    sfl_dict_apply(A, c, xt);
    for (uint32_t k = 0; k < 4; k++) {
        for (uint32_t i = 0; i < 60; i++) {
            double s = 0;
            for (uint32_t j = 0; j < 40; j++) {
                Z[i * 40 + j] = sfl_rng_gauss(&r, 0, 1);
                s += Z[i * 40 + j] * xt[j];
            }
            y[i] = s;
        }
        cl[k] = testfed_dense_data(Z, y, 60, 40);
    }
    assert_int_equal(sfl_dict_attach(&prob, A), 0);
    assert_int_equal(prob.dim, M);
    testfed_set(&p, "tau", 3);
    testfed_t f = {.algo = &sfl_algo_fedgradmp, .p = &p, .prob = &prob, .clients = cl,
                   .nclients = 4, .rounds = 8, .check = TESTFED_SPARSE, .truth = xt,
                   .errs = errs, .out_state = state_};
    testfed_run(&f);
    print_message("  gaussian dictionary: relative error %.3e after 8 rounds\n", errs[7]);
    assert_true(errs[7] < 1e-10);
    /* The state is the coefficient vector: c# itself. */
    assert_true(max_abs_diff(state_, c, M) < 1e-9);
    assert_int_equal(sfl_algo_fedgradmp.model_of(testfed_as(&sfl_algo_fedgradmp, &p), &prob, state_, model, NULL), 0);
    assert_true(max_abs_diff(model, xt, 40) < 1e-9);
    /* l2 ball in model space with a dictionary: ||A c|| <= R. */
    testfed_set(&p, "l2_ball", 0.3);
    f.rounds = 2;
    testfed_run(&f);
    assert_int_equal(sfl_algo_fedgradmp.model_of(testfed_as(&sfl_algo_fedgradmp, &p), &prob, state_, model, NULL), 0);
    assert_true(sfl_dvec_nrm2(model, 40) <= 0.3 * (1 + 1e-12));
    testfed_set(&p, "l2_ball", 0);
    /* Inexact with a dictionary also converges (slower). */
    testfed_set(&p, "lr", 0.05);
    testfed_set(&p, "inexact_steps", 20);
    f.algo = &sfl_algo_fedgradmp_inexact;
    f.rounds = 8;
    f.out_state = NULL;
    testfed_run(&f);
    print_message("  gaussian dictionary, inexact: relative error %.3e\n", errs[7]);
    assert_true(errs[7] < 1e-2);

    for (uint32_t k = 0; k < 4; k++)
        sfl_dataset_free(cl[k]);
    sfl_dict_free(A);
    sfl_dict_free(I);
    sfl_synth_free(syn);
}

static void test_fedgradmp_failalloc(void **state)
{
    (void)state;
    sfl_synth_t *syn = gradmp_synth(1, 12, 30, 2, 0.0, 1);
    const sfl_dataset_t *ds = syn->clients[0];
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_dict_t *A;
    sfl_rng_t r;
    double x[30] = {0}, b[8];
    const uint32_t G[8] = {0, 3, 4, 9, 12, 20, 21, 29};

    testfed_params_default(&p);
    testfed_set(&p, "tau", 3);
    testfed_set(&p, "batch", 4);
    testfed_set(&p, "local_steps", 2);
    testfed_set(&p, "l2_ball", 10);
    testfed_set(&p, "lr", 0.001);
    sfl_rng_seed(&r, 2, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(30, 30, &r, &A), 0);
    for (int v = 0; v < 4; v++) {
        const sfl_algo_t *a = v % 2 ? &sfl_algo_fedgradmp_inexact : &sfl_algo_fedgradmp;

        assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 30, 0), 0);
        if (v >= 2)
            assert_int_equal(sfl_dict_attach(&prob, A), 0);
        FAILALLOC_EACH(testfed_client_once(a, &p, &prob, x, ds), (void)0);
    }
    /* The solver: g > rows takes the fallback path too. */
    FAILALLOC_EACH(sfl_algo_gradmp_solve(ds, NULL, G, 8, 0, b, NULL), (void)0);
    const uint32_t Gbig[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    double bb[20];
    FAILALLOC_EACH(sfl_algo_gradmp_solve(ds, A, Gbig, 20, 0, bb, NULL), (void)0);
    sfl_dict_free(A);
    sfl_synth_free(syn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fedgradmp_registry),
        cmocka_unit_test(test_fedgradmp_support),
        cmocka_unit_test(test_fedgradmp_solve_matches_dense),
        cmocka_unit_test(test_fedgradmp_solve_singular),
        cmocka_unit_test(test_fedgradmp_exact_identity),
        cmocka_unit_test(test_fedgradmp_inexact_classification),
        cmocka_unit_test(test_fedgradmp_bad_params),
        cmocka_unit_test(test_fedgradmp_secvc_converges),
        cmocka_unit_test(test_fedgradmp_partial_participation),
        cmocka_unit_test(test_fedgradmp_deterministic),
        cmocka_unit_test(test_fedgradmp_l2_ball),
        cmocka_unit_test(test_fedgradmp_dictionary),
        cmocka_unit_test(test_fedgradmp_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

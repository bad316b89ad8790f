/* pFedMe (libsfl/src/algo/pfedme.c): rounds by hand (full batch, and
 * minibatches replayed from the client's rng), the smoothed l1 of modified
 * pFedMe, one client converging to its fixed point, the server's beta
 * mixing, the client state (theta kept, never sent, saved and loaded), and
 * refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "sfl/algo/algo.h"
#include "sfl/algo/client.h"
#include "testfed.h"
#include "testutil.h"

/* The gradient of the identity design's loss over rows (NULL: all n), b of
 * them: (2/b)(x_j - y_j) on the rows, 0 elsewhere. */
static void identity_grad(const double *x, const double *y, uint32_t n, const uint32_t *rows,
                          uint32_t b, double *g)
{
    memset(g, 0, n * sizeof(double));
    for (uint32_t i = 0; i < b; i++) {
        uint32_t j = rows ? rows[i] : i;

        g[j] = 2.0 / b * (x[j] - y[j]);
    }
}

/* pFedMe's client round written out: R minibatches from an rng seeded as
 * sfl_algo_client_round seeds it (7, round, client 0), K steps on theta
 * each, then w's step. */
static void me_by_hand(const double *y, uint32_t n, uint32_t b, const double *w0, uint32_t R,
                       uint32_t K, double eta, double eta_p, double mu, double gamma, double rho,
                       uint64_t round, double *w, double *theta)
{
    sfl_algo_ws_t ws;
    sfl_rng_t rng;
    double g[16];

    assert_true(n <= 16);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_algo_ws_reserve(&ws, n, b), 0);
    sfl_rng_seed(&rng, 7, round, 0, SFL_STREAM_TRAIN);
    memcpy(w, w0, n * sizeof(double));
    memcpy(theta, w0, n * sizeof(double));
    for (uint32_t r = 0; r < R; r++) {
        const uint32_t *rows;

        assert_int_equal(sfl_algo_sample_batch(&rng, n, b, &ws, &rows), 0);
        for (uint32_t k = 0; k < K; k++) {
            identity_grad(theta, y, n, rows, rows ? b : n, g);
            for (uint32_t j = 0; j < n; j++)
                theta[j] -= eta_p * (g[j] + gamma * tanh(theta[j] / rho) + mu * (theta[j] - w[j]));
        }
        for (uint32_t j = 0; j < n; j++)
            w[j] -= eta * mu * (w[j] - theta[j]);
    }
    sfl_algo_ws_close(&ws);
}

/* Full batch, R = 2, K = 3: theta carries over from one local round to the
 * next; w is sent, theta kept and reported as the personal model. */
static void test_pfedme_one_round_by_hand(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0}, w0[] = {0.2, 0.1, -0.3, 0.0};
    const double eta = 0.4, eta_p = 0.3, mu = 0.7;
    double w[4], theta[4], got[4] = {0}, pm[4];
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_pfedme, y, 4);
    testfed_personal_set(&c, "local_steps", 2);
    testfed_personal_set(&c, "inner_steps", 3);
    testfed_personal_set(&c, "eta", eta);
    testfed_personal_set(&c, "eta_p", eta_p);
    testfed_personal_set(&c, "lambda", mu);
    /* theta restarts from w^t: whatever the state held before is ignored */
    for (int j = 0; j < 4; j++)
        ((double *)c.st.mem)[j] = 100.0 + j;
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    me_by_hand(y, 4, 4, w0, 2, 3, eta, eta_p, mu, 0, 1, 1, w, theta);
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 4; j++) {
        assert_close(got[j], w[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    assert_int_equal(sfl_algo_pfedme.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    assert_memory_equal(pm, c.st.mem, sizeof(pm));
    assert_memory_not_equal(pm, got, sizeof(pm));
    testfed_personal_close(&c);
}

/* Minibatches (|D| = 2 of 6 rows): one draw per local round, all from the
 * client's rng through sfl_algo_sample_batch, so the round replays. */
static void test_pfedme_minibatches_by_hand(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0, -1.0, 2.5};
    const double w0[] = {0.2, 0.1, -0.3, 0.0, 0.4, -0.6};
    double w[6], theta[6], got[6] = {0};
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_pfedme, y, 6);
    testfed_personal_set(&c, "batch", 2);
    testfed_personal_set(&c, "local_steps", 4);
    testfed_personal_set(&c, "inner_steps", 2);
    testfed_personal_set(&c, "eta", 0.1);
    testfed_personal_set(&c, "eta_p", 0.2);
    testfed_personal_set(&c, "lambda", 1.5);
    assert_int_equal(testfed_personal_round(&c, w0, 3), 0);
    me_by_hand(y, 6, 2, w0, 4, 2, 0.1, 0.2, 1.5, 0, 1, 3, w, theta);
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 6; j++) {
        assert_close(got[j], w[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    testfed_personal_close(&c);
}

/* Modified pFedMe: gamma tanh(theta/rho) joins theta's gradient (the
 * gradient of gamma phi_rho, sfl_phi_rho); w's step is unchanged. */
static void test_pfedme_smoothed_l1(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.01}, w0[] = {0.2, -0.1, 0.0};
    const double eta = 0.5, eta_p = 0.3, mu = 2.0, gamma = 0.2, rho = 0.05;
    double w[3], theta[3], got[3] = {0}, tg[3];
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_pfedme, y, 3);
    testfed_personal_set(&c, "local_steps", 1);
    testfed_personal_set(&c, "inner_steps", 1);
    testfed_personal_set(&c, "eta", eta);
    testfed_personal_set(&c, "eta_p", eta_p);
    testfed_personal_set(&c, "lambda", mu);
    testfed_personal_set(&c, "gamma", gamma);
    testfed_personal_set(&c, "rho", rho);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    sfl_phi_rho(w0, 3, rho, tg);
    for (int j = 0; j < 3; j++) {
        /* theta = w = w0 before the step, so theta - w = 0 */
        theta[j] = w0[j] - eta_p * (2.0 / 3 * (w0[j] - y[j]) + gamma * tg[j]);
        w[j] = w0[j] - eta * mu * (w0[j] - theta[j]);
    }
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 3; j++) {
        assert_close(got[j], w[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    /* gamma = 0 is plain pFedMe: the l1 term is gone, rho does not matter */
    testfed_personal_set(&c, "gamma", 0);
    testfed_personal_set(&c, "rho", 1e-9);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    me_by_hand(y, 3, 3, w0, 1, 1, eta, eta_p, mu, 0, 1, 1, w, theta);
    memset(got, 0, sizeof(got));
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 3; j++)
        assert_close(got[j], w[j], 1e-15, 1e-15);
    testfed_personal_close(&c);
}

/* One client, many rounds, beta = 1: pFedMe's fixed point has theta = w
 * (w's step) and grad f(theta) = 0 (theta's step), so w = theta = argmin f
 * = y on the identity design. */
static void test_pfedme_one_client_solves_its_problem(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0};
    double global[4] = {0}, pm[4];
    sfl_fold_t fold;
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_pfedme, y, 4);
    testfed_personal_set(&c, "local_steps", 5);
    testfed_personal_set(&c, "inner_steps", 5);
    testfed_personal_set(&c, "eta", 0.5);
    testfed_personal_set(&c, "eta_p", 0.5);
    testfed_personal_set(&c, "lambda", 1.0);
    assert_int_equal(sfl_fold_init(&fold, &sfl_algo_pfedme, &c.p, &c.prob, NULL), 0);
    for (uint64_t t = 1; t <= 200; t++) {
        sfl_fold_begin(&fold);
        assert_int_equal(testfed_personal_round(&c, global, t), 0);
        assert_int_equal(sfl_fold_add(&fold, c.u, 4), 0);
        assert_int_equal(sfl_fold_finish(&fold, global), 0);
    }
    assert_int_equal(sfl_algo_pfedme.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    for (int j = 0; j < 4; j++) {
        assert_close(global[j], y[j], 1e-12, 1e-12);
        assert_close(pm[j], y[j], 1e-12, 1e-12);
    }
    sfl_fold_close(&fold);
    testfed_personal_close(&c);
}

static void test_pfedme_refusals(void **state)
{
    (void)state;
    const double y[] = {1.0, 2.0}, w0[] = {0.0, 0.0};
    uint32_t none = 0;
    sfl_dataset_t *empty = NULL;
    testfed_personal_t c;
    sfl_rng_t r;

    testfed_personal_init(&c, &sfl_algo_pfedme, y, 2);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    /* no client state */
    assert_int_equal(sfl_algo_pfedme.client_update(&c.p, &c.prob, w0, c.ds, NULL, &r, &c.ws,
                                                   c.u),
                     SFL_EINVAL);
    assert_detail("pfedme needs its client state");
    /* no rows */
    assert_int_equal(sfl_dataset_subset(c.ds, &none, 0, &empty), 0);
    assert_int_equal(sfl_algo_pfedme.client_update(&c.p, &c.prob, w0, empty, c.st.mem, &r,
                                                   &c.ws, c.u),
                     SFL_EEMPTY);
    sfl_dataset_free(empty);
    /* a step size that diverges */
    testfed_personal_set(&c, "eta_p", 1e200);
    testfed_personal_set(&c, "local_steps", 50);
    assert_int_equal(testfed_personal_round(&c, w0, 1), SFL_ENUMERIC);
    assert_detail("pfedme diverged");
    /* parameters out of range */
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", -1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "lambda", -0.1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "beta", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "gamma", -0.1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "rho", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "batch", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "inner_steps", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", NAN), SFL_EINVAL);
    /* pFedMe's lambda is not the loss's l2 weight */
    assert_null(sfl_algo_ridge_def(&sfl_algo_pfedme));
    assert_true(sfl_algo_params_ridge(&c.p) == 0);
    testfed_personal_close(&c);
}

/* The defaults are FedMac's Table 2 for pFedMe, with pFedMe's own K. */
static void test_pfedme_defaults(void **state)
{
    (void)state;
    sfl_algo_params_t p;

    sfl_algo_params_default(&sfl_algo_pfedme, &p);
    assert_ptr_equal(sfl_algo_find("pfedme"), &sfl_algo_pfedme);
    assert_int_equal(sfl_algo_pfedme.shape, SFL_SHAPE_PERSONALIZED);
    assert_true(sfl_algo_param_or(&p, "eta", 0) == 0.02);
    assert_true(sfl_algo_param_or(&p, "eta_p", 0) == 0.05);
    assert_true(sfl_algo_param_or(&p, "lambda", 0) == 15);
    assert_true(sfl_algo_param_or(&p, "beta", 0) == 1);
    assert_true(sfl_algo_param_or(&p, "gamma", -1) == 0);
    assert_true(sfl_algo_param_or(&p, "local_steps", 0) == 20);
    assert_true(sfl_algo_param_or(&p, "batch", 0) == 20);
    assert_true(sfl_algo_param_or(&p, "inner_steps", 0) == 5);
    assert_string_equal(sfl_algo_param_find(&sfl_algo_pfedme, "lambda")->symbol, "lambda");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pfedme_one_round_by_hand),
        cmocka_unit_test(test_pfedme_minibatches_by_hand),
        cmocka_unit_test(test_pfedme_smoothed_l1),
        cmocka_unit_test(test_pfedme_one_client_solves_its_problem),
        cmocka_unit_test(test_pfedme_refusals),
        cmocka_unit_test(test_pfedme_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

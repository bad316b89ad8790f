/* FedMac (libsfl/src/algo/fedmac.c): the smoothed l1 phi_rho, one round by
 * hand, the server's beta mixing, one client converging to its local
 * problem, the client state (theta kept, never sent, saved and loaded),
 * and refusals. */
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

static void test_phi_rho(void **state)
{
    (void)state;
    double x[] = {-3.0, -0.02, 0.0, 0.005, 1.0, 1e6}, g[6];
    const double rho = 0.05;
    double f = sfl_phi_rho(x, 6, rho, g);

    assert_true(f == sfl_phi_rho(x, 6, rho, NULL));
    /* phi_rho is a sum over coordinates: differences one coordinate at a
     * time, so the 1e6 entry's value does not swamp the others' */
    for (size_t j = 0; j < 6; j++) {
        const double h = 1e-7;
        double a = x[j] + h, b = x[j] - h;
        double fd = (sfl_phi_rho(&a, 1, rho, NULL) - sfl_phi_rho(&b, 1, rho, NULL)) / (2 * h);

        assert_close(g[j], fd, 0, j == 5 ? 1e-3 : 1e-6);
        assert_close(g[j], tanh(x[j] / rho), 0, 0);
    }
    /* no overflow at x/rho = 2e7, and phi_rho -> ||x||_1 as rho -> 0 */
    assert_true(isfinite(f));
    double l1 = 3.0 + 0.02 + 0.005 + 1.0 + 1e6;
    assert_close(sfl_phi_rho(x, 6, 1e-9, NULL), l1, 1e-12, 0);
    /* phi_rho(0) = 0; a single coordinate: rho log cosh(x/rho) */
    assert_close(sfl_phi_rho(x + 2, 1, rho, NULL), 0.0, 0, 0);
    assert_close(sfl_phi_rho(x + 4, 1, 0.5, NULL), 0.5 * log(cosh(2.0)), 1e-14, 0);
}

/* R = 1, full batch: theta = w - eta_p (grad f(w) - lambda w), then
 * w' = w - eta lambda (w - theta); w' is sent, theta kept. */
static void test_fedmac_one_round_by_hand(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0}, w0[] = {0.2, 0.1, -0.3, 0.0};
    const double eta = 2.0, eta_p = 0.3, lambda = 0.25;
    double theta[4], want[4], got[4];
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_fedmac, y, 4);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 1), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", eta), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", eta_p), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "lambda", lambda), 0);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    for (int j = 0; j < 4; j++) {
        double g = 2.0 / 4 * (w0[j] - y[j]);

        theta[j] = w0[j] - eta_p * (g - lambda * w0[j]);
        want[j] = w0[j] - eta * (lambda * (w0[j] - theta[j]));
    }
    memset(got, 0, sizeof(got));
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 4; j++) {
        assert_close(got[j], want[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    /* the personalized model is theta, and it is not what was sent */
    double pm[4];
    assert_int_equal(sfl_algo_fedmac.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    assert_memory_equal(pm, c.st.mem, sizeof(pm));
    assert_memory_not_equal(pm, got, sizeof(pm));
    testfed_personal_close(&c);
}

/* The smoothed l1 terms enter as gamma tanh(theta/rho) and
 * gamma_w tanh(w/rho). */
static void test_fedmac_sparsity_terms(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0}, w0[] = {0.2, -0.1};
    const double eta = 1.5, eta_p = 0.3, lambda = 0.5, gamma = 0.2, gamma_w = 0.1, rho = 0.05;
    double theta[2], want[2], got[2] = {0};
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_fedmac, y, 2);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 1), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", eta), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", eta_p), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "lambda", lambda), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "gamma", gamma), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "gamma_w", gamma_w), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "rho", rho), 0);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    for (int j = 0; j < 2; j++) {
        double g = 2.0 / 2 * (w0[j] - y[j]) + gamma * tanh(w0[j] / rho);

        theta[j] = w0[j] - eta_p * (g - lambda * w0[j]);
        want[j] = w0[j] - eta * (lambda * (w0[j] - theta[j]) + gamma_w * tanh(w0[j] / rho));
    }
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 2; j++) {
        assert_close(got[j], want[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    testfed_personal_close(&c);
}

/* One client, many rounds, beta = 1: FedMac's fixed point has w = theta and
 * grad f(theta) = lambda theta; on the identity design (2/n)(theta - y) =
 * lambda theta, so theta = y / (1 - n lambda / 2). */
static void test_fedmac_one_client_solves_its_problem(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0};
    const double lambda = 0.1; /* theta* = y / 0.8 */
    double global[4] = {0}, pm[4];
    sfl_fold_t fold;
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_fedmac, y, 4);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 5), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", 2.0), 0); /* eta lambda = 0.2 */
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", 0.5), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "lambda", lambda), 0);
    assert_int_equal(sfl_fold_init(&fold, &sfl_algo_fedmac, &c.p, &c.prob, NULL), 0);
    for (uint64_t t = 1; t <= 300; t++) {
        sfl_fold_begin(&fold);
        assert_int_equal(testfed_personal_round(&c, global, t), 0);
        assert_int_equal(sfl_fold_add(&fold, c.u, 4), 0);
        assert_int_equal(sfl_fold_finish(&fold, global), 0);
    }
    assert_int_equal(sfl_algo_fedmac.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    for (int j = 0; j < 4; j++) {
        assert_close(global[j], y[j] / 0.8, 1e-9, 1e-12);
        assert_close(pm[j], y[j] / 0.8, 1e-9, 1e-12);
    }
    sfl_fold_close(&fold);
    testfed_personal_close(&c);
}

/* The personalized algorithms' shared state (sfl_algo_model_state_*):
 * theta survives a save and load bit for bit, and is what personal_model
 * returns; a state saved for another dimension or algorithm is refused. */
static void test_personal_state_save_load(void **state)
{
    (void)state;
    const sfl_algo_t *algos[] = {&sfl_algo_fedmac, &sfl_algo_pfedme, &sfl_algo_perfedavg};
    const double y[] = {1.0, -2.0, 0.5}, w0[] = {0.1, 0.2, 0.3};

    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        sfl_client_state_t back = {0};
        sfl_problem_t other;
        sfl_algo_params_t q;
        uint8_t *buf = NULL;
        size_t len = 0;
        double pm[3];
        testfed_personal_t c;

        testfed_personal_init(&c, algos[a], y, 3);
        assert_int_equal(c.st.size, 3 * sizeof(double));
        assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
        assert_int_equal(algos[a]->personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
        assert_memory_equal(pm, c.st.mem, sizeof(pm));
        assert_int_equal(sfl_client_state_save(&c.st, &buf, &len), 0);
        assert_int_equal(len, SFL_CLIENT_STATE_OVERHEAD + 3 * sizeof(double));
        assert_int_equal(sfl_client_state_load(algos[a], &c.p, &c.prob, buf, len, &back), 0);
        assert_memory_equal(back.mem, c.st.mem, c.st.size);
        sfl_client_state_free(&back);
        assert_int_equal(sfl_problem_init(&other, &sfl_loss_lsq, 4, 0), 0);
        assert_int_equal(sfl_client_state_load(algos[a], &c.p, &other, buf, len, &back),
                         SFL_EPARSE);
        sfl_algo_params_default(algos[(a + 1) % 3], &q);
        assert_int_not_equal(sfl_client_state_load(algos[(a + 1) % 3], &q, &c.prob, buf, len,
                                                   &back), 0);
        sfl_client_state_bytes_free(buf, len);
        testfed_personal_close(&c);
    }
}

/* Pruning: below eps to 0, unless fewer than ceil(min_density d) would be
 * left; then exactly that many, the largest. */
static void test_prune(void **state)
{
    (void)state;
    sfl_topk_ws_t ws;
    double x[] = {0.5, -0.001, 0.02, -0.3, 0.0005, 0.0};
    double y[6];

    sfl_topk_ws_init(&ws);
    memcpy(y, x, sizeof(x));
    assert_int_equal(sfl_algo_prune(y, 6, 0.0, 0.5, &ws), 0); /* eps 0: nothing */
    assert_memory_equal(x, y, sizeof(x));
    assert_int_equal(sfl_algo_prune(y, 6, 0.01, 0.0, &ws), 0);
    const double want1[] = {0.5, 0, 0.02, -0.3, 0, 0};
    assert_memory_equal(y, want1, sizeof(y));
    /* eps 0.1 would leave 2 of 6; min_density 0.5 keeps the 3 largest */
    memcpy(y, x, sizeof(x));
    assert_int_equal(sfl_algo_prune(y, 6, 0.1, 0.5, &ws), 0);
    assert_memory_equal(y, want1, sizeof(y));
    /* min_density 1: everything stays */
    memcpy(y, x, sizeof(x));
    assert_int_equal(sfl_algo_prune(y, 6, 0.1, 1.0, &ws), 0);
    assert_memory_equal(x, y, sizeof(x));
    sfl_topk_ws_close(&ws);
}

/* FedMac's prune makes the sent w sparse and leaves theta whole. */
static void test_fedmac_prune(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0}, w0[] = {0.2, 1e-4, -0.3, -2e-4};
    double got[4] = {0};
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_fedmac, y, 4);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 1), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", 1e-3), 0);   /* w barely moves */
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", 1e-3), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "prune", 0.01), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "min_density", 0.25), 0);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    assert_int_equal(c.u->nnz, 2);
    sfl_spvec_scatter(c.u, got);
    assert_true(got[1] == 0 && got[3] == 0 && got[0] != 0 && got[2] != 0);
    for (int j = 0; j < 4; j++)
        assert_true(((const double *)c.st.mem)[j] != 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "min_density", 1.5), SFL_EINVAL);
    testfed_personal_close(&c);
}

static void test_fedmac_refusals(void **state)
{
    (void)state;
    const double y[] = {1.0, 2.0}, w0[] = {0.0, 0.0};
    testfed_personal_t c;
    sfl_rng_t r;

    testfed_personal_init(&c, &sfl_algo_fedmac, y, 2);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    /* no client state */
    assert_int_equal(sfl_algo_fedmac.client_update(&c.p, &c.prob, w0, c.ds, NULL, &r, &c.ws,
                                                   c.u),
                     SFL_EINVAL);
    /* a step size that diverges */
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", 1e200), 0);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 50), 0);
    assert_int_equal(testfed_personal_round(&c, y, 1), SFL_ENUMERIC);
    assert_detail("fedmac diverged");
    /* parameters out of range */
    assert_int_equal(sfl_algo_param_set(&c.p, "beta", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "rho", -1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "gamma", -0.1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "theta_steps", 0), SFL_EINVAL);
    /* FedMac's lambda weighs the correlation, not the loss's l2: reported
     * objectives add no ridge for it, while FedAvg's lambda is one */
    assert_null(sfl_algo_ridge_def(&sfl_algo_fedmac));
    assert_true(sfl_algo_params_ridge(&c.p) == 0);
    assert_string_equal(sfl_algo_ridge_def(&sfl_algo_fedavg)->name, "lambda");
    sfl_algo_params_t q;
    sfl_algo_params_default(&sfl_algo_fedavg, &q);
    assert_int_equal(sfl_algo_param_set(&q, "lambda", 0.25), 0);
    assert_true(sfl_algo_params_ridge(&q) == 0.25);
    testfed_personal_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phi_rho),
        cmocka_unit_test(test_fedmac_one_round_by_hand),
        cmocka_unit_test(test_fedmac_sparsity_terms),
        cmocka_unit_test(test_fedmac_one_client_solves_its_problem),
        cmocka_unit_test(test_personal_state_save_load),
        cmocka_unit_test(test_prune),
        cmocka_unit_test(test_fedmac_prune),
        cmocka_unit_test(test_fedmac_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

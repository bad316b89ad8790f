/* Per-FedAvg, first-order (libsfl/src/algo/perfedavg.c): rounds by hand
 * (full batch, and minibatches replayed from the client's rng: D1 and D2 per
 * local step, then the adaptation batch), one client converging to its
 * fixed point, the server's beta mixing, the client state (the adapted
 * model, kept, saved and loaded), and refusals. */
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

/* Per-FedAvg FO's client round written out, minibatches drawn from an rng
 * seeded as sfl_algo_client_round seeds it (7, round, client 0). */
static void pa_by_hand(const double *y, uint32_t n, uint32_t b, const double *w0, uint32_t R,
                       double eta, double eta_p, uint64_t round, double *w, double *theta)
{
    sfl_algo_ws_t ws;
    sfl_rng_t rng;
    const uint32_t *rows;
    double g[16], temp[16];
    uint32_t nb = b < n ? b : n;

    assert_true(n <= 16);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_algo_ws_reserve(&ws, n, b), 0);
    sfl_rng_seed(&rng, 7, round, 0, SFL_STREAM_TRAIN);
    memcpy(w, w0, n * sizeof(double));
    for (uint32_t r = 0; r < R; r++) {
        assert_int_equal(sfl_algo_sample_batch(&rng, n, b, &ws, &rows), 0); /* D1 */
        identity_grad(w, y, n, rows, nb, g);
        for (uint32_t j = 0; j < n; j++)
            temp[j] = w[j] - eta_p * g[j];
        assert_int_equal(sfl_algo_sample_batch(&rng, n, b, &ws, &rows), 0); /* D2 */
        identity_grad(temp, y, n, rows, nb, g);
        for (uint32_t j = 0; j < n; j++)
            w[j] -= eta * g[j];
    }
    assert_int_equal(sfl_algo_sample_batch(&rng, n, b, &ws, &rows), 0); /* adaptation */
    identity_grad(w, y, n, rows, nb, g);
    for (uint32_t j = 0; j < n; j++)
        theta[j] = w[j] - eta_p * g[j];
    sfl_algo_ws_close(&ws);
}

/* Full batch, R = 1, in closed form: with c = 2/n,
 *   temp = w0 - eta_p c (w0 - y), w = w0 - eta c (temp - y),
 *   theta = w - eta_p c (w - y);
 * then R = 3 against the loop. */
static void test_perfedavg_one_round_by_hand(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0}, w0[] = {0.2, 0.1, -0.3, 0.0};
    const double eta = 0.4, eta_p = 0.3, c2 = 2.0 / 4;
    double w[4], theta[4], got[4] = {0}, pm[4];
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_perfedavg, y, 4);
    testfed_personal_set(&c, "local_steps", 1);
    testfed_personal_set(&c, "eta", eta);
    testfed_personal_set(&c, "eta_p", eta_p);
    assert_int_equal(testfed_personal_round(&c, w0, 1), 0);
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 4; j++) {
        double temp = w0[j] - eta_p * (c2 * (w0[j] - y[j]));
        double wj = w0[j] - eta * (c2 * (temp - y[j]));
        double th = wj - eta_p * (c2 * (wj - y[j]));

        assert_close(got[j], wj, 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], th, 1e-15, 1e-15);
    }
    /* the personal model is the adapted theta, not what was sent */
    assert_int_equal(sfl_algo_perfedavg.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    assert_memory_equal(pm, c.st.mem, sizeof(pm));
    assert_memory_not_equal(pm, got, sizeof(pm));

    testfed_personal_set(&c, "local_steps", 3);
    assert_int_equal(testfed_personal_round(&c, w0, 2), 0);
    pa_by_hand(y, 4, 4, w0, 3, eta, eta_p, 2, w, theta);
    memset(got, 0, sizeof(got));
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 4; j++) {
        assert_close(got[j], w[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    testfed_personal_close(&c);
}

/* Minibatches (|D| = 2 of 6 rows): D1, D2 per local step, then the
 * adaptation batch, all from the client's rng through
 * sfl_algo_sample_batch, so the round replays. */
static void test_perfedavg_minibatches_by_hand(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0, -1.0, 2.5};
    const double w0[] = {0.2, 0.1, -0.3, 0.0, 0.4, -0.6};
    double w[6], theta[6], got[6] = {0};
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_perfedavg, y, 6);
    testfed_personal_set(&c, "batch", 2);
    testfed_personal_set(&c, "local_steps", 5);
    testfed_personal_set(&c, "eta", 0.3);
    testfed_personal_set(&c, "eta_p", 0.2);
    assert_int_equal(testfed_personal_round(&c, w0, 4), 0);
    pa_by_hand(y, 6, 2, w0, 5, 0.3, 0.2, 4, w, theta);
    sfl_spvec_scatter(c.u, got);
    for (int j = 0; j < 6; j++) {
        assert_close(got[j], w[j], 1e-15, 1e-15);
        assert_close(((const double *)c.st.mem)[j], theta[j], 1e-15, 1e-15);
    }
    testfed_personal_close(&c);
}

/* One client, many rounds, beta = 1: Per-FedAvg FO stops where
 * grad f(w - eta_p grad f(w)) = 0; on the identity design that is
 * c (1 - eta_p c)(w - y) = 0, so w = y (eta_p c != 1) and the adapted
 * model theta = y too. */
static void test_perfedavg_one_client_solves_its_problem(void **state)
{
    (void)state;
    const double y[] = {1.0, -2.0, 0.5, 3.0};
    double global[4] = {0}, pm[4];
    sfl_fold_t fold;
    testfed_personal_t c;

    testfed_personal_init(&c, &sfl_algo_perfedavg, y, 4);
    testfed_personal_set(&c, "local_steps", 5);
    testfed_personal_set(&c, "eta", 1.0);
    testfed_personal_set(&c, "eta_p", 0.5);
    assert_int_equal(sfl_fold_init(&fold, &sfl_algo_perfedavg, &c.p, &c.prob, NULL), 0);
    for (uint64_t t = 1; t <= 100; t++) {
        sfl_fold_begin(&fold);
        assert_int_equal(testfed_personal_round(&c, global, t), 0);
        assert_int_equal(sfl_fold_add(&fold, c.u, 4), 0);
        assert_int_equal(sfl_fold_finish(&fold, global), 0);
    }
    assert_int_equal(sfl_algo_perfedavg.personal_model(&c.p, &c.prob, c.st.mem, pm), 0);
    for (int j = 0; j < 4; j++) {
        assert_close(global[j], y[j], 1e-12, 1e-12);
        assert_close(pm[j], y[j], 1e-12, 1e-12);
    }
    sfl_fold_close(&fold);
    testfed_personal_close(&c);
}

static void test_perfedavg_refusals(void **state)
{
    (void)state;
    const double y[] = {1.0, 2.0}, w0[] = {0.0, 0.0};
    uint32_t none = 0;
    sfl_dataset_t *empty = NULL;
    testfed_personal_t c;
    sfl_rng_t r;

    testfed_personal_init(&c, &sfl_algo_perfedavg, y, 2);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    /* no client state */
    assert_int_equal(sfl_algo_perfedavg.client_update(&c.p, &c.prob, w0, c.ds, NULL, &r, &c.ws,
                                                      c.u),
                     SFL_EINVAL);
    assert_detail("perfedavg needs its client state");
    /* no rows */
    assert_int_equal(sfl_dataset_subset(c.ds, &none, 0, &empty), 0);
    assert_int_equal(sfl_algo_perfedavg.client_update(&c.p, &c.prob, w0, empty, c.st.mem, &r,
                                                      &c.ws, c.u),
                     SFL_EEMPTY);
    sfl_dataset_free(empty);
    /* step sizes that diverge */
    testfed_personal_set(&c, "eta", 1e200);
    testfed_personal_set(&c, "eta_p", 1e200);
    testfed_personal_set(&c, "local_steps", 50);
    assert_int_equal(testfed_personal_round(&c, w0, 1), SFL_ENUMERIC);
    assert_detail("perfedavg diverged");
    /* parameters out of range */
    assert_int_equal(sfl_algo_param_set(&c.p, "eta", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", -1), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "beta", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "local_steps", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "batch", 0), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "eta_p", INFINITY), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&c.p, "inner_steps", 3), SFL_EINVAL); /* pFedMe's */
    testfed_personal_close(&c);
}

/* The defaults are FedMac's Table 2 for Per-FedAvg. */
static void test_perfedavg_defaults(void **state)
{
    (void)state;
    sfl_algo_params_t p;

    sfl_algo_params_default(&sfl_algo_perfedavg, &p);
    assert_ptr_equal(sfl_algo_find("perfedavg"), &sfl_algo_perfedavg);
    assert_int_equal(sfl_algo_perfedavg.shape, SFL_SHAPE_PERSONALIZED);
    assert_true(sfl_algo_param_or(&p, "eta", 0) == 0.02);
    assert_true(sfl_algo_param_or(&p, "eta_p", 0) == 0.05);
    assert_true(sfl_algo_param_or(&p, "beta", 0) == 1);
    assert_true(sfl_algo_param_or(&p, "local_steps", 0) == 20);
    assert_true(sfl_algo_param_or(&p, "batch", 0) == 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_perfedavg_one_round_by_hand),
        cmocka_unit_test(test_perfedavg_minibatches_by_hand),
        cmocka_unit_test(test_perfedavg_one_client_solves_its_problem),
        cmocka_unit_test(test_perfedavg_refusals),
        cmocka_unit_test(test_perfedavg_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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
#include "sfl/data/synth.h"
#include "testfed.h"
#include "testutil.h"

static void test_feddualavg_registry(void **state)
{
    (void)state;
    assert_ptr_equal(sfl_algo_find("feddualavg"), &sfl_algo_feddualavg);
    assert_string_equal(sfl_algo_feddualavg.name, "feddualavg");
    assert_true(sfl_algo_feddualavg.sparse);
    assert_non_null(sfl_algo_feddualavg.model_of);
}

/* Two rounds on the identity design, by hand. The primal point is H_2 of the
 * dual; the dual keeps, and grows, the mass H_2 discards. */
static void test_feddualavg_exact_rounds(void **state)
{
    (void)state;
    const double y[4] = {0.5, -3, 0.25, 2};
    double z[4] = {0}, x[4];
    testfed_client_t c;
    sfl_spvec_t *u;
    sfl_topk_ws_t tk;
    sfl_fold_t agg;

    testfed_client_init(&c, y, 4, 4);
    u = c.u;
    testfed_set(&c.p, "tau", 2);
    testfed_set(&c.p, "local_steps", 1);
    testfed_set(&c.p, "batch", 4);
    testfed_set(&c.p, "lr", 2.0); /* n / 2 */
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_feddualavg, testfed_as(&sfl_algo_feddualavg, &c.p), &c.prob, NULL), 0);

    /* Round 1 from z = 0: x = H_2(0) = 0, Delta = -lr grad f(0) = y, dense. */
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, z, c.ds), 0);
    assert_int_equal(u->nnz, 4);
    for (uint32_t j = 0; j < 4; j++) {
        assert_int_equal(u->idx[j], j);
        assert_close(u->val[j], y[j], 0, 1e-15);
    }
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 3.0), 0);
    assert_int_equal(sfl_fold_finish(&agg, z), 0);
    for (uint32_t j = 0; j < 4; j++)
        assert_close(z[j], y[j], 0, 1e-15); /* the dual is not thresholded */
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &c.p), &c.prob, z, x, &tk), 0);
    assert_true(x[0] == 0 && x[1] == z[1] && x[2] == 0 && x[3] == z[3]);

    /* Round 2, K = 2, from z = y. Each step: x = H_2(z) = (0, -3, 0, 2),
     * grad = (x - y) / 2 = (-0.25, 0, -0.125, 0), Delta += (0.5, 0, 0.25, 0);
     * the second step's z = (1, -3, 0.5, 2) keeps the same support.
     * Delta = (1, 0, 0.5, 0): exact zeros where every gradient vanished. */
    testfed_set(&c.p, "local_steps", 2);
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, z, c.ds), 0);
    assert_int_equal(u->nnz, 2);
    assert_int_equal(u->idx[0], 0);
    assert_int_equal(u->idx[1], 2);
    assert_close(u->val[0], 1.0, 0, 1e-15);
    assert_close(u->val[1], 0.5, 0, 1e-15);
    /* Server step eta_g = 1/2: z = y + Delta / 2 = (1, -3, 0.5, 2). */
    testfed_set(&c.p, "server_lr", 0.5);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 1.0), 0);
    assert_int_equal(sfl_fold_finish(&agg, z), 0);
    assert_close(z[0], 1.0, 0, 1e-15);
    assert_close(z[1], -3.0, 0, 1e-15);
    assert_close(z[2], 0.5, 0, 1e-15);
    assert_close(z[3], 2.0, 0, 1e-15);
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &c.p), &c.prob, z, x, &tk), 0);
    assert_true(x[0] == 0 && x[1] == z[1] && x[2] == 0 && x[3] == z[3]);

    sfl_fold_close(&agg);
    sfl_topk_ws_close(&tk);
    testfed_client_close(&c);
}

/* z_{t+1} = z_t + eta_g sum_i p_i Delta_i, weighted. */
static void test_feddualavg_server_step(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t agg;
    sfl_spvec_t *a, *b, *c;
    double z[4] = {1, 1, 1, 1};
    const double da[4] = {1, 0, 4, 0}, db[4] = {0, 2, 0, 8};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 2);
    testfed_set(&p, "server_lr", 2.0);
    assert_int_equal(sfl_spvec_new(4, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(4, 0, &b), 0);
    assert_int_equal(sfl_spvec_new(5, 0, &c), 0);
    assert_int_equal(sfl_spvec_from_dense(a, da), 0);
    assert_int_equal(sfl_spvec_from_dense(b, db), 0);
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_feddualavg, testfed_as(&sfl_algo_feddualavg, &p), &prob, NULL), 0);
    sfl_fold_begin(&agg);
    /* Nothing to aggregate: an error, and the state is left alone. */
    assert_int_equal(sfl_fold_finish(&agg, z), SFL_EEMPTY);
    assert_true(z[0] == 1 && z[1] == 1 && z[2] == 1 && z[3] == 1);
    assert_int_equal(sfl_fold_add(&agg, c, 1.0), SFL_EDIM);
    assert_int_equal(sfl_fold_add(&agg, a, 0.0), SFL_EINVAL);
    assert_int_equal(sfl_fold_add(&agg, a, -1.0), SFL_EINVAL);
    assert_int_equal(sfl_fold_add(&agg, a, INFINITY), SFL_EINVAL);
    /* Streaming: adds allocate nothing. */
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_fold_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_fold_add(&agg, b, 3.0), 0);
    assert_int_equal(sfl_fold_finish(&agg, z), 0);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    /* average (0.25, 1.5, 1, 6), times 2, plus 1 */
    assert_true(z[0] == 1.5 && z[1] == 4.0 && z[2] == 3.0 && z[3] == 13.0);
    sfl_fold_close(&agg);
    sfl_spvec_free(a);
    sfl_spvec_free(b);
    sfl_spvec_free(c);
}

/* model_of is H_tau of the state, per block for softmax, state untouched. */
static void test_feddualavg_model_of(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_topk_ws_t tk, ref;
    double st[15], keep[15], m[15], want[15];
    sfl_rng_t r;

    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_TRAIN);
    for (int j = 0; j < 15; j++)
        st[j] = sfl_rng_gauss(&r, 0.0, 1.0);
    memcpy(keep, st, sizeof(st));
    sfl_topk_ws_init(&tk);
    sfl_topk_ws_init(&ref);
    assert_int_equal(sfl_topk_ws_reserve(&ref, 15), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 2);

    /* One block of 15. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 15, 0), 0);
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &p), &prob, st, m, &tk), 0);
    memcpy(want, st, sizeof(st));
    assert_int_equal(sfl_ht_dense(want, 15, 2, &ref), 0);
    assert_memory_equal(m, want, sizeof(m));
    assert_memory_equal(st, keep, sizeof(st));
    assert_int_equal(sfl_dvec_nnz(m, 15), 2);

    /* Softmax, 5 features x 3 classes: tau per class block. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 5, 3), 0);
    assert_int_equal(prob.dim, 15);
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &p), &prob, st, m, &tk), 0);
    memcpy(want, st, sizeof(st));
    assert_int_equal(sfl_ht_block(want, 3, 5, 2, &ref), 0);
    assert_memory_equal(m, want, sizeof(m));
    for (int c = 0; c < 3; c++)
        assert_int_equal(sfl_dvec_nnz(m + 5 * c, 5), 2);

    /* A NaN in the state is an error, not a model. */
    st[7] = NAN;
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &p), &prob, st, m, &tk), SFL_ENUMERIC);
    sfl_topk_ws_close(&tk);
    sfl_topk_ws_close(&ref);
}

static void test_feddualavg_recovers_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;
    double *x = calloc(s->dim, sizeof(double)), *z = calloc(s->dim, sizeof(double));

    testfed_params_default(&p);
    testfed_set(&p, "batch", 60);
    testfed_set(&p, "local_steps", 3);
    /* tau = s: once the support is found, gradient descent on it. */
    testfed_set(&p, "tau", 4);
    testfed_set(&p, "lr", 0.1);
    assert_true(testfed_run_synth(&sfl_algo_feddualavg, s, &p, 150, TESTFED_ANY, NULL, NULL)
                < 1e-6);
    /* tau = 2 s: slower, since the slack slots keep cycling through
     * coordinates whose dual mass only drains while they are selected. */
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "lr", 0.3);
    assert_true(testfed_run_synth(&sfl_algo_feddualavg, s, &p, 300, TESTFED_ANY, x, z) < 1e-4);
    assert_true(sfl_dvec_nnz(x, s->dim) <= 8);
    /* The state is a dual vector, not the model: it is dense. */
    assert_true(sfl_dvec_nnz(z, s->dim) > 8);
    free(x);
    free(z);
    sfl_synth_free(s);
}

/* tau = dim makes H_tau the identity: FedDualAvg is then FedAvg, up to the
 * rounding of z_t + Delta against a direct local iterate. */
static void test_feddualavg_dense_is_fedavg(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    testfed_params_default(&p);
    testfed_set(&p, "tau", s->dim);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    testfed_set(&p, "mu", 0);
    testfed_run_synth(&sfl_algo_fedavg, s, &p, 10, TESTFED_ANY, m1, NULL);
    testfed_run_synth(&sfl_algo_feddualavg, s, &p, 10, TESTFED_ANY, m2, NULL);
    for (size_t j = 0; j < s->dim; j++)
        assert_close(m2[j], m1[j], 1e-10, 1e-12);
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_feddualavg_deterministic_and_server_lr(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    testfed_run_synth(&sfl_algo_feddualavg, s, &p, 10, TESTFED_ANY, NULL, m1);
    testfed_run_synth(&sfl_algo_feddualavg, s, &p, 10, TESTFED_ANY, NULL, m2);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    testfed_set(&p, "server_lr", 0.5);
    testfed_run_synth(&sfl_algo_feddualavg, s, &p, 10, TESTFED_ANY, NULL, m2);
    assert_memory_not_equal(m1, m2, s->dim * sizeof(double));
    /* And a damped step is still a descent method. */
    double e1 = testfed_run_synth(&sfl_algo_feddualavg, s, &p, 20, TESTFED_ANY, NULL, NULL);
    double e2 = testfed_run_synth(&sfl_algo_feddualavg, s, &p, 200, TESTFED_ANY, NULL, NULL);
    assert_true(e2 < 0.5 * e1);
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_feddualavg_bad_params(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    const double bad[] = {0.0, -0.5, NAN, INFINITY};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 10);
    assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, testfed_as(&sfl_algo_feddualavg, &p), &prob), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(testfed_try(&sfl_algo_feddualavg, "server_lr", bad[i]), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "server_lr"));
    }
    assert_int_equal(testfed_try(&sfl_algo_feddualavg, "tau", 0), SFL_EINVAL);
    testfed_set(&p, "tau", 11);
    assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, testfed_as(&sfl_algo_feddualavg, &p), &prob), SFL_EINVAL);
    /* Unchecked tau reaching model_of is refused, not a crash. */
    sfl_topk_ws_t tk;
    double st[10] = {0}, m[10];
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &p), &prob, st, m, &tk), SFL_EINVAL);
    sfl_topk_ws_close(&tk);
}

static void test_feddualavg_bad_client(void **state)
{
    (void)state;
    const double y[3] = {1, 2, 3};
    double x0[4] = {0};
    testfed_client_t c;

    /* Model of 4 features, data of 3. */
    testfed_client_init(&c, y, 3, 4);
    testfed_set(&c.p, "tau", 1);
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, x0, c.ds), SFL_EDIM);
    /* Message of the wrong dimension. */
    assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, x0, c.ds), SFL_EDIM);
    sfl_spvec_free(c.u);
    assert_int_equal(sfl_spvec_new(3, 0, &c.u), 0);
    /* No samples. */
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, x0, c.empty), SFL_EEMPTY);
    /* Divergence is reported, and the message is left empty rather than
     * half-written. */
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, x0, c.ds), 0);
    assert_int_equal(c.u->nnz, 3);
    testfed_set(&c.p, "lr", 1e200);
    testfed_set(&c.p, "local_steps", 10);
    assert_int_equal(testfed_update(&sfl_algo_feddualavg, &c, x0, c.ds), SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "diverged"));
    assert_int_equal(c.u->nnz, 0);
    assert_int_equal(sfl_spvec_validate(c.u), 0);
    testfed_client_close(&c);
}

static void test_feddualavg_alloc_failures(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t agg;
    sfl_topk_ws_t tk;
    double *z = calloc(s->dim, sizeof(double)), *m = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 5);
    testfed_set(&p, "batch", 10);
    FAILALLOC_EACH(sfl_fold_init(&agg, &sfl_algo_feddualavg, testfed_as(&sfl_algo_feddualavg, &p), &prob, NULL), sfl_fold_close(&agg));
    FAILALLOC_EACH(testfed_client_once(&sfl_algo_feddualavg, &p, &prob, z, s->clients[0]), (void)0);
    sfl_topk_ws_init(&tk);
    FAILALLOC_EACH(sfl_algo_feddualavg.model_of(testfed_as(&sfl_algo_feddualavg, &p), &prob, z, m, &tk),
                   (sfl_topk_ws_close(&tk), sfl_topk_ws_init(&tk)));
    sfl_topk_ws_close(&tk);
    free(z);
    free(m);
    sfl_synth_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_feddualavg_registry),
        cmocka_unit_test(test_feddualavg_exact_rounds),
        cmocka_unit_test(test_feddualavg_server_step),
        cmocka_unit_test(test_feddualavg_model_of),
        cmocka_unit_test(test_feddualavg_recovers_sparse_truth),
        cmocka_unit_test(test_feddualavg_dense_is_fedavg),
        cmocka_unit_test(test_feddualavg_deterministic_and_server_lr),
        cmocka_unit_test(test_feddualavg_bad_params),
        cmocka_unit_test(test_feddualavg_bad_client),
        cmocka_unit_test(test_feddualavg_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

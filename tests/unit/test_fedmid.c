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

static void test_fedmid_registry(void **state)
{
    (void)state;
    assert_ptr_equal(sfl_algo_find("fedmid"), &sfl_algo_fedmid);
    assert_string_equal(sfl_algo_fedmid.name, "fedmid");
    assert_true(sfl_algo_fedmid.sparse);
    /* The broadcast state is the model. */
    assert_null(sfl_algo_fedmid.model_of);
}

/* One round on the identity design, by hand: the client lands on y and
 * projects, the server steps eta_g towards the average and projects. */
static void test_fedmid_exact_round(void **state)
{
    (void)state;
    const double y[4] = {0.5, -3, 0.25, 2};
    const double xt[4] = {1, 0, 0, 0};
    double g[4];
    testfed_client_t c;
    sfl_spvec_t *u;
    sfl_fold_t agg;

    testfed_client_init(&c, y, 4, 4);
    u = c.u;
    testfed_set(&c.p, "tau", 2);
    testfed_set(&c.p, "local_steps", 1);
    testfed_set(&c.p, "batch", 4);
    testfed_set(&c.p, "lr", 2.0); /* n / 2 */
    assert_int_equal(testfed_update(&sfl_algo_fedmid, &c, xt, c.ds), 0);
    /* H_2(y): the upload is the sparse model, not the change from x_t. */
    assert_int_equal(u->nnz, 2);
    assert_int_equal(u->idx[0], 1);
    assert_int_equal(u->idx[1], 3);
    assert_close(u->val[0], -3.0, 0, 1e-15);
    assert_close(u->val[1], 2.0, 0, 1e-15);

    /* eta_g = 1/2: H_2(x_t + (H_2(y) - x_t) / 2) = H_2(0.5, -1.5, 0, 1). */
    testfed_set(&c.p, "server_lr", 0.5);
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &c.p), &c.prob, NULL), 0);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 5.0), 0);
    memcpy(g, xt, sizeof(g));
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_close(g[0], 0.0, 0, 0);
    assert_close(g[1], -1.5, 0, 1e-15);
    assert_close(g[2], 0.0, 0, 0);
    assert_close(g[3], 1.0, 0, 1e-15);

    /* eta_g = 3/2 overshoots: H_2(-0.5, -4.5, 0, 3). */
    testfed_set(&c.p, "server_lr", 1.5);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 1.0), 0);
    memcpy(g, xt, sizeof(g));
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_close(g[0], 0.0, 0, 0);
    assert_close(g[1], -4.5, 0, 1e-15);
    assert_close(g[2], 0.0, 0, 0);
    assert_close(g[3], 3.0, 0, 1e-15);

    /* eta_g = 1: the average, projected; x_t plays no part. */
    testfed_set(&c.p, "server_lr", 1.0);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 1.0), 0);
    memcpy(g, xt, sizeof(g));
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_true(g[0] == 0 && g[1] == u->val[0] && g[2] == 0 && g[3] == u->val[1]);
    /* ... exactly: x_t + (avg - x_t) would round 0.7 + (0.1 - 0.7) and
     * 3 + (1e-17 - 3) away from 0.1 and 1e-17. */
    const double v[4] = {0.1, 1e-17, 0, 0}, x3[4] = {0.7, 3.0, 0, 0};
    assert_int_equal(sfl_spvec_from_dense(u, v), 0);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, u, 1.0), 0);
    memcpy(g, x3, sizeof(g));
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_memory_equal(g, v, sizeof(g));

    sfl_fold_close(&agg);
    testfed_client_close(&c);
}

/* With eta_g = 1 FedMid is FedIter-HT, and the code keeps that bit for bit;
 * any other server step changes the run. Every run here checks that the
 * uploads (the local models) and the global model stay tau-sparse. */
static void test_fedmid_equals_fediterht(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    double e1 = testfed_run_synth(&sfl_algo_fediterht, s, &p, 20, TESTFED_SPARSE, m1, NULL);
    double e2 = testfed_run_synth(&sfl_algo_fedmid, s, &p, 20, TESTFED_SPARSE, m2, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    assert_true(e1 == e2);
    /* Full batch, more local steps. */
    testfed_set(&p, "batch", 60);
    testfed_set(&p, "lr", 0.1);
    testfed_set(&p, "local_steps", 3);
    testfed_run_synth(&sfl_algo_fediterht, s, &p, 10, TESTFED_SPARSE, m1, NULL);
    testfed_run_synth(&sfl_algo_fedmid, s, &p, 10, TESTFED_SPARSE, m2, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    /* eta_g != 1 is a different algorithm. */
    testfed_set(&p, "server_lr", 0.5);
    testfed_run_synth(&sfl_algo_fedmid, s, &p, 10, TESTFED_SPARSE, m2, NULL);
    assert_memory_not_equal(m1, m2, s->dim * sizeof(double));
    /* Same seed, same bits, also off the FedIter-HT path. */
    testfed_run_synth(&sfl_algo_fedmid, s, &p, 10, TESTFED_SPARSE, m1, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_fedmid_recovers_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 60);
    testfed_set(&p, "lr", 0.1);
    testfed_set(&p, "local_steps", 3);
    assert_true(testfed_run_synth(&sfl_algo_fedmid, s, &p, 100, TESTFED_SPARSE, NULL, NULL) < 1e-8);
    /* A damped and an extrapolating server step both still converge. */
    testfed_set(&p, "server_lr", 0.5);
    assert_true(testfed_run_synth(&sfl_algo_fedmid, s, &p, 150, TESTFED_SPARSE, NULL, NULL) < 1e-8);
    testfed_set(&p, "server_lr", 1.5);
    assert_true(testfed_run_synth(&sfl_algo_fedmid, s, &p, 75, TESTFED_SPARSE, NULL, NULL) < 1e-8);
    /* Minibatches (noiseless, so SGD interpolates). */
    testfed_set(&p, "server_lr", 1.0);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    assert_true(testfed_run_synth(&sfl_algo_fedmid, s, &p, 300, TESTFED_SPARSE, NULL, NULL) < 1e-8);
    sfl_synth_free(s);
}

static void test_fedmid_bad_params(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    const double bad[] = {0.0, -1.0, NAN, INFINITY, -INFINITY};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 3);
    assert_int_equal(sfl_algo_check(&sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &p), &prob), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(testfed_try(&sfl_algo_fedmid, "server_lr", bad[i]), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "server_lr"));
    }
    testfed_set(&p, "server_lr", 1e-3);
    assert_int_equal(sfl_algo_check(&sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &p), &prob), 0);
    /* tau is required and bounded by the dimension. */
    assert_int_equal(testfed_try(&sfl_algo_fedmid, "tau", 0), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tau"));
    testfed_set(&p, "tau", 11);
    assert_int_equal(sfl_algo_check(&sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &p), &prob), SFL_EINVAL);
}

static void test_fedmid_bad_input(void **state)
{
    (void)state;
    const double y[3] = {1, 2, 3};
    double x0[4] = {0};
    testfed_client_t c;
    sfl_fold_t agg;
    sfl_spvec_t *wrong;

    /* Model of 4 features, data of 3. */
    testfed_client_init(&c, y, 3, 4);
    testfed_set(&c.p, "tau", 1);
    testfed_set(&c.p, "server_lr", 0.5);
    assert_int_equal(testfed_update(&sfl_algo_fedmid, &c, x0, c.ds), SFL_EDIM);
    /* No samples. */
    assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
    sfl_spvec_free(c.u);
    assert_int_equal(sfl_spvec_new(3, 0, &c.u), 0);
    assert_int_equal(testfed_update(&sfl_algo_fedmid, &c, x0, c.empty), SFL_EEMPTY);
    /* Divergence is an error, not a model of infinities. */
    testfed_set(&c.p, "lr", 1e200);
    testfed_set(&c.p, "local_steps", 10);
    assert_int_equal(testfed_update(&sfl_algo_fedmid, &c, x0, c.ds), SFL_ENUMERIC);

    /* Aggregation: nothing to aggregate, wrong dimension, bad weight, on
     * both server paths; the model is left alone. */
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &c.p), &c.prob, NULL), 0);
    assert_int_equal(sfl_spvec_new(5, 0, &wrong), 0);
    for (int pass = 0; pass < 2; pass++) {
        double g[3] = {7, 8, 9};

        testfed_set(&c.p, "server_lr", pass ? 1.0 : 0.5);
        sfl_fold_begin(&agg);
        assert_int_equal(sfl_fold_finish(&agg, g), SFL_EEMPTY);
        assert_true(g[0] == 7 && g[1] == 8 && g[2] == 9);
        assert_int_equal(sfl_fold_add(&agg, wrong, 1.0), SFL_EDIM);
        assert_int_equal(sfl_spvec_from_dense(c.u, y), 0);
        assert_int_equal(sfl_fold_add(&agg, c.u, 0.0), SFL_EINVAL);
        assert_int_equal(sfl_fold_add(&agg, c.u, NAN), SFL_EINVAL);
        assert_int_equal(sfl_fold_finish(&agg, g), SFL_EEMPTY);
    }
    sfl_spvec_free(wrong);
    sfl_fold_close(&agg);
    testfed_client_close(&c);
}

static void test_fedmid_alloc_failures(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t agg;
    sfl_spvec_t *u;
    double *x = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 5);
    testfed_set(&p, "server_lr", 0.5);
    FAILALLOC_EACH(sfl_fold_init(&agg, &sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &p), &prob, NULL), sfl_fold_close(&agg));
    FAILALLOC_EACH(testfed_client_once(&sfl_algo_fedmid, &p, &prob, x, s->clients[0]), (void)0);

    /* A round of aggregation allocates nothing, on either server path. */
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_fedmid, testfed_as(&sfl_algo_fedmid, &p), &prob, NULL), 0);
    assert_int_equal(sfl_spvec_new(s->dim, 0, &u), 0);
    x[3] = 1.0;
    assert_int_equal(sfl_spvec_from_dense(u, x), 0);
    failalloc_install();
    for (int pass = 0; pass < 2; pass++) {
        testfed_set(&p, "server_lr", pass ? 1.0 : 0.5);
        failalloc_arm(-1);
        sfl_fold_begin(&agg);
        assert_int_equal(sfl_fold_add(&agg, u, 2.0), 0);
        assert_int_equal(sfl_fold_finish(&agg, x), 0);
        assert_int_equal(failalloc_count(), 0);
    }
    failalloc_uninstall();
    sfl_spvec_free(u);
    sfl_fold_close(&agg);
    free(x);
    sfl_synth_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fedmid_registry),
        cmocka_unit_test(test_fedmid_exact_round),
        cmocka_unit_test(test_fedmid_equals_fediterht),
        cmocka_unit_test(test_fedmid_recovers_sparse_truth),
        cmocka_unit_test(test_fedmid_bad_params),
        cmocka_unit_test(test_fedmid_bad_input),
        cmocka_unit_test(test_fedmid_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

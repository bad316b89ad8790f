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

static void test_algo_registry(void **state)
{
    (void)state;
    const char *names[] = {"fedht", "fediterht", "diht", "fedavg", "fedprox"};
    size_t nnames = sizeof(names) / sizeof(names[0]);

    for (size_t i = 0; i < nnames; i++) {
        const sfl_algo_t *a = sfl_algo_find(names[i]);

        assert_non_null(a);
        assert_string_equal(a->name, names[i]);
        assert_non_null(a->client_update);
    }
    assert_null(sfl_algo_find("fedsgd"));
    /* Every listed algorithm is found by its own name; the list holds at
     * least the ones checked here (it grows as algorithms are added). */
    size_t n = 0;
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        assert_ptr_equal(sfl_algo_find((*a)->name), *a);
        n++;
    }
    assert_true(n >= nnames);
}

static void test_algo_bad_params(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 10, 1), SFL_EINVAL);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_logistic, 10, 3), SFL_EINVAL);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 2), SFL_EINVAL);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 0, 0), SFL_EINVAL);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 10, 3), 0);
    assert_int_equal(prob.dim, 30);
    /* Sizes that would wrap (a 32-bit size_t, the wire's uint32) are refused. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, (1u << 24) + 1, 256), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "a softmax model of 16777217 features and 256 classes is too large"));
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, UINT32_MAX, 2), SFL_ELIMIT);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 10, 3), 0);
    assert_int_equal(prob.nblocks, 3);

    /* Values are checked when set, against the algorithm's table... */
    assert_int_equal(testfed_try(&sfl_algo_fediterht, "tau", 0), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tau"));
    assert_int_equal(testfed_try(&sfl_algo_fedht, "lr", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_fedht, "lr", NAN), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_fedht, "local_steps", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_fedht, "local_steps", 1.5), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "whole number"));
    assert_int_equal(testfed_try(&sfl_algo_fedht, "batch", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_fedprox, "mu", -1), SFL_EINVAL);
    /* ...names too: dense baselines have no tau. */
    assert_int_equal(testfed_try(&sfl_algo_fedavg, "tau", 5), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "fedavg has no parameter 'tau'"));
    /* ...and tau against the problem's block length by sfl_algo_check. */
    testfed_params_default(&p);
    testfed_set(&p, "tau", 11); /* per block of 10 */
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, testfed_as(&sfl_algo_fediterht, &p), &prob),
                     SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tau"));
    testfed_set(&p, "tau", 10);
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, testfed_as(&sfl_algo_fediterht, &p), &prob),
                     0);
    assert_int_equal(sfl_algo_check(&sfl_algo_fedavg, testfed_as(&sfl_algo_fedavg, &p), &prob), 0);
    /* Parameters filled for another algorithm are refused. */
    assert_int_equal(sfl_algo_check(&sfl_algo_fedht, testfed_as(&sfl_algo_fediterht, &p), &prob),
                     SFL_EINVAL);

    /* Only the matching-pursuit family knows dictionaries. */
    sfl_dict_t *dict;
    sfl_rng_t r;
    sfl_rng_seed(&r, 1, 0, 0, 0);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    assert_int_equal(sfl_dict_gaussian(10, 12, &r, &dict), 0);
    assert_int_equal(sfl_dict_attach(&prob, dict), 0);
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, testfed_as(&sfl_algo_fediterht, &p), &prob), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "dictionary"));
    assert_int_equal(sfl_algo_check(&sfl_algo_fedgradmp, testfed_as(&sfl_algo_fedgradmp, &p), &prob), 0);
    sfl_dict_free(dict);
}

/* One FedIter-HT step on the identity design lands on H_tau(y). */
static void test_algo_fediterht_exact_step(void **state)
{
    (void)state;
    const double y[6] = {0.5, -3, 0.1, 2, 0, -0.2};
    double x0[6] = {0};
    testfed_client_t c;

    testfed_client_init(&c, y, 6, 6);
    testfed_set(&c.p, "tau", 2);
    testfed_set(&c.p, "local_steps", 1);
    testfed_set(&c.p, "batch", 6); /* full batch */
    testfed_set(&c.p, "lr", 3.0);  /* n / 2 */
    assert_int_equal(testfed_update(&sfl_algo_fediterht, &c, x0, c.ds), 0);
    assert_int_equal(c.u->nnz, 2);
    assert_int_equal(c.u->idx[0], 1);
    assert_int_equal(c.u->idx[1], 3);
    assert_true(c.u->val[0] == -3.0);
    assert_true(c.u->val[1] == 2.0);

    /* Fed-HT sends the dense local model (all nonzeros of y). */
    assert_int_equal(testfed_update(&sfl_algo_fedht, &c, x0, c.ds), 0);
    assert_int_equal(c.u->nnz, 5);
    testfed_client_close(&c);
}

static void test_algo_aggregate_weighted(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t agg;
    sfl_spvec_t *a, *b;
    double g[4] = {9, 9, 9, 9};
    const double da[4] = {1, 0, 4, 0}, db[4] = {0, 2, 0, 8};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 2);
    assert_int_equal(sfl_spvec_new(4, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(4, 0, &b), 0);
    assert_int_equal(sfl_spvec_from_dense(a, da), 0);
    assert_int_equal(sfl_spvec_from_dense(b, db), 0);

    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_fedavg, testfed_as(&sfl_algo_fedavg, &p), &prob, NULL), 0);
    assert_int_equal(sfl_fold_finish(&agg, g), SFL_EEMPTY);
    sfl_fold_begin(&agg);
    /* The streaming add allocates nothing: O(d) memory whatever N. */
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_fold_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_fold_add(&agg, b, 3.0), 0);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    assert_int_equal(sfl_fold_add(&agg, b, 0.0), SFL_EINVAL);
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_true(g[0] == 0.25 && g[1] == 1.5 && g[2] == 1.0 && g[3] == 6.0);
    sfl_fold_close(&agg);

    /* Same with the thresholding end: keeps the two largest. */
    assert_int_equal(sfl_fold_init(&agg, &sfl_algo_fedht, testfed_as(&sfl_algo_fedht, &p), &prob, NULL), 0);
    sfl_fold_begin(&agg);
    assert_int_equal(sfl_fold_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_fold_add(&agg, b, 3.0), 0);
    assert_int_equal(sfl_fold_finish(&agg, g), 0);
    assert_true(g[0] == 0 && g[1] == 1.5 && g[2] == 0 && g[3] == 6.0);
    /* A wrong-dimension update is refused. */
    sfl_spvec_t *c;
    assert_int_equal(sfl_spvec_new(5, 0, &c), 0);
    assert_int_equal(sfl_fold_add(&agg, c, 1.0), SFL_EDIM);
    sfl_spvec_free(c);
    sfl_fold_close(&agg);
    sfl_spvec_free(a);
    sfl_spvec_free(b);
}

/* A whole federation on the noiseless sparse problem: every sparse
 * algorithm recovers the truth. */
static void test_algo_recovers_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 60);
    testfed_set(&p, "lr", 0.1);
    testfed_set(&p, "local_steps", 3);
    assert_true(testfed_run_synth(&sfl_algo_fediterht, s, &p, 150, TESTFED_ANY, NULL, NULL) < 1e-6);
    assert_true(testfed_run_synth(&sfl_algo_fedht, s, &p, 150, TESTFED_ANY, NULL, NULL) < 1e-6);
    assert_true(testfed_run_synth(&sfl_algo_diht, s, &p, 400, TESTFED_ANY, NULL, NULL) < 1e-6);
    /* Minibatches: still converges in the noiseless case (interpolation). */
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    assert_true(testfed_run_synth(&sfl_algo_fediterht, s, &p, 300, TESTFED_ANY, NULL, NULL) < 1e-4);
    sfl_synth_free(s);
}

static void test_algo_deterministic_and_variants(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    /* Same seed, same bits. */
    testfed_run_synth(&sfl_algo_fediterht, s, &p, 5, TESTFED_ANY, m1, NULL);
    testfed_run_synth(&sfl_algo_fediterht, s, &p, 5, TESTFED_ANY, m2, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    /* FedProx with mu = 0 is FedAvg, bit for bit; mu > 0 differs. */
    testfed_set(&p, "mu", 0);
    testfed_run_synth(&sfl_algo_fedavg, s, &p, 3, TESTFED_ANY, m1, NULL);
    testfed_run_synth(&sfl_algo_fedprox, s, &p, 3, TESTFED_ANY, m2, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    testfed_set(&p, "mu", 5);
    testfed_run_synth(&sfl_algo_fedprox, s, &p, 3, TESTFED_ANY, m2, NULL);
    assert_memory_not_equal(m1, m2, s->dim * sizeof(double));
    /* Distributed-IHT takes one step whatever K. */
    testfed_set(&p, "local_steps", 1);
    testfed_run_synth(&sfl_algo_diht, s, &p, 3, TESTFED_ANY, m1, NULL);
    testfed_set(&p, "local_steps", 7);
    testfed_run_synth(&sfl_algo_diht, s, &p, 3, TESTFED_ANY, m2, NULL);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_algo_bad_client(void **state)
{
    (void)state;
    const double y[3] = {1, 2, 3};
    double x0[4] = {0};
    testfed_client_t c;

    /* Model of 4 features, data of 3. */
    testfed_client_init(&c, y, 3, 4);
    testfed_set(&c.p, "tau", 1);
    assert_int_equal(testfed_update(&sfl_algo_fedht, &c, x0, c.ds), SFL_EDIM);
    /* No samples. */
    assert_int_equal(sfl_problem_init(&c.prob, &sfl_loss_lsq, 3, 0), 0);
    assert_int_equal(testfed_update(&sfl_algo_fedht, &c, x0, c.empty), SFL_EEMPTY);
    /* Divergence is reported, not returned as a model of infinities. */
    testfed_set(&c.p, "lr", 1e200);
    testfed_set(&c.p, "local_steps", 10);
    assert_int_equal(testfed_update(&sfl_algo_fedavg, &c, x0, c.ds), SFL_ENUMERIC);
    testfed_client_close(&c);
}

static void test_algo_alloc_failures(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t agg;
    sfl_algo_ws_t ws;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 50, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 5);
    FAILALLOC_EACH(sfl_fold_init(&agg, &sfl_algo_fedht, testfed_as(&sfl_algo_fedht, &p), &prob, NULL), sfl_fold_close(&agg));
    sfl_algo_ws_init(&ws);
    FAILALLOC_EACH(sfl_algo_ws_reserve(&ws, 50, 10), (sfl_algo_ws_close(&ws), sfl_algo_ws_init(&ws)));
    sfl_algo_ws_close(&ws);
}

/* The drivers' entry point seeds (seed, round, client, TRAIN) and nothing else. */
static void test_algo_client_round_seeding(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_spvec_t *a, *b;
    sfl_rng_t r;
    double *x = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "lr", 0.02);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new(s->dim, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(s->dim, 0, &b), 0);
    assert_int_equal(sfl_algo_client_round(&sfl_algo_fediterht, testfed_as(&sfl_algo_fediterht, &p), &prob, x, s->clients[2], NULL,
                                           9, 4, 2, &ws, a), 0);
    sfl_rng_seed(&r, 9, 4, 2, SFL_STREAM_TRAIN);
    assert_int_equal(sfl_algo_fediterht.client_update(testfed_as(&sfl_algo_fediterht, &p), &prob, x, s->clients[2], NULL, &r, &ws, b),
                     0);
    assert_int_equal(a->nnz, b->nnz);
    assert_memory_equal(a->idx, b->idx, a->nnz * sizeof(uint32_t));
    assert_memory_equal(a->val, b->val, a->nnz * sizeof(double));
    /* Another round draws other minibatches. */
    assert_int_equal(sfl_algo_client_round(&sfl_algo_fediterht, testfed_as(&sfl_algo_fediterht, &p), &prob, x, s->clients[2], NULL,
                                           9, 5, 2, &ws, b), 0);
    assert_true(a->nnz != b->nnz || memcmp(a->val, b->val, a->nnz * sizeof(double)) != 0);
    sfl_spvec_free(a);
    sfl_spvec_free(b);
    sfl_algo_ws_close(&ws);
    free(x);
    sfl_synth_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_registry),
        cmocka_unit_test(test_algo_client_round_seeding),
        cmocka_unit_test(test_algo_bad_params),
        cmocka_unit_test(test_algo_fediterht_exact_step),
        cmocka_unit_test(test_algo_aggregate_weighted),
        cmocka_unit_test(test_algo_recovers_sparse_truth),
        cmocka_unit_test(test_algo_deterministic_and_variants),
        cmocka_unit_test(test_algo_bad_client),
        cmocka_unit_test(test_algo_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

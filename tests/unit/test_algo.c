#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "sfl/algo.h"
#include "sfl/alloc.h"
#include "sfl/dict.h"
#include "sfl/eval.h"
#include "sfl/synth.h"

/* Identity design: rows e_j with target y_j, so f(x) = (1/n) ||x - y||^2 and
 * one gradient step of size n/2 lands exactly on y. */
static sfl_dataset_t *identity_data(const double *y, uint32_t n)
{
    double *a = calloc((size_t)n * n, sizeof(double));
    sfl_csr_t *X;
    sfl_dataset_t *ds;
    double *yy = sfl__mallocarray(n, sizeof(double));

    for (uint32_t i = 0; i < n; i++)
        a[(size_t)i * n + i] = 1.0;
    assert_int_equal(sfl_csr_from_dense(a, n, n, &X), 0);
    memcpy(yy, y, n * sizeof(double));
    assert_int_equal(sfl_dataset_new(X, yy, &ds), 0);
    free(a);
    return ds;
}

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
    assert_int_equal(prob.nblocks, 3);

    sfl_algo_params_default(&p);
    p.tau = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, &p, &prob), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tau"));
    p.tau = 11; /* per block of 10 */
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, &p, &prob), SFL_EINVAL);
    p.tau = 10;
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, &p, &prob), 0);
    /* dense baselines ignore tau */
    p.tau = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedavg, &p, &prob), 0);
    p.tau = 5;
    p.lr = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedht, &p, &prob), SFL_EINVAL);
    p.lr = NAN;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedht, &p, &prob), SFL_EINVAL);
    p.lr = 0.1;
    p.local_steps = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedht, &p, &prob), SFL_EINVAL);
    p.local_steps = 1;
    p.batch = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedht, &p, &prob), SFL_EINVAL);
    p.batch = 1;
    p.mu = -1;
    assert_int_equal(sfl_algo_check(&sfl_algo_fedprox, &p, &prob), SFL_EINVAL);

    /* Only the matching-pursuit family knows dictionaries. */
    sfl_dict_t *dict;
    sfl_rng_t r;
    sfl_rng_seed(&r, 1, 0, 0, 0);
    p.mu = 0;
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 10, 0), 0);
    assert_int_equal(sfl_dict_gaussian(10, 12, &r, &dict), 0);
    assert_int_equal(sfl_dict_attach(&prob, dict), 0);
    assert_int_equal(sfl_algo_check(&sfl_algo_fediterht, &p, &prob), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "dictionary"));
    assert_int_equal(sfl_algo_check(&sfl_algo_fedgradmp, &p, &prob), 0);
    sfl_dict_free(dict);
}

/* One FedIter-HT step on the identity design lands on H_tau(y). */
static void test_algo_fediterht_exact_step(void **state)
{
    (void)state;
    const double y[6] = {0.5, -3, 0.1, 2, 0, -0.2};
    sfl_dataset_t *ds = identity_data(y, 6);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
    sfl_rng_t r;
    double x0[6] = {0};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 6, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 2;
    p.local_steps = 1;
    p.batch = 6; /* full batch */
    p.lr = 3.0;  /* n / 2 */
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new(6, 0, &u), 0);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    assert_int_equal(sfl_algo_fediterht.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u), 0);
    assert_int_equal(u->nnz, 2);
    assert_int_equal(u->idx[0], 1);
    assert_int_equal(u->idx[1], 3);
    assert_true(u->val[0] == -3.0);
    assert_true(u->val[1] == 2.0);

    /* Fed-HT sends the dense local model (all nonzeros of y). */
    assert_int_equal(sfl_algo_fedht.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u), 0);
    assert_int_equal(u->nnz, 5);
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(ds);
}

static void test_algo_aggregate_weighted(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_agg_t agg;
    sfl_spvec_t *a, *b;
    double g[4] = {9, 9, 9, 9};
    const double da[4] = {1, 0, 4, 0}, db[4] = {0, 2, 0, 8};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 2;
    assert_int_equal(sfl_spvec_new(4, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(4, 0, &b), 0);
    assert_int_equal(sfl_spvec_from_dense(a, da), 0);
    assert_int_equal(sfl_spvec_from_dense(b, db), 0);

    assert_int_equal(sfl_agg_init(&agg, &sfl_algo_fedavg, &p, &prob), 0);
    assert_int_equal(sfl_algo_fedavg.aggregate_end(&agg, g), SFL_EEMPTY);
    assert_int_equal(sfl_algo_fedavg.aggregate_begin(&agg), 0);
    /* The streaming add allocates nothing: O(d) memory whatever N. */
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_algo_fedavg.aggregate_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_algo_fedavg.aggregate_add(&agg, b, 3.0), 0);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    assert_int_equal(sfl_algo_fedavg.aggregate_add(&agg, b, 0.0), SFL_EINVAL);
    assert_int_equal(sfl_algo_fedavg.aggregate_end(&agg, g), 0);
    assert_true(g[0] == 0.25 && g[1] == 1.5 && g[2] == 1.0 && g[3] == 6.0);
    sfl_agg_close(&agg);

    /* Same with the thresholding end: keeps the two largest. */
    assert_int_equal(sfl_agg_init(&agg, &sfl_algo_fedht, &p, &prob), 0);
    assert_int_equal(sfl_algo_fedht.aggregate_begin(&agg), 0);
    assert_int_equal(sfl_algo_fedht.aggregate_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_algo_fedht.aggregate_add(&agg, b, 3.0), 0);
    assert_int_equal(sfl_algo_fedht.aggregate_end(&agg, g), 0);
    assert_true(g[0] == 0 && g[1] == 1.5 && g[2] == 0 && g[3] == 6.0);
    /* A wrong-dimension update is refused. */
    sfl_spvec_t *c;
    assert_int_equal(sfl_spvec_new(5, 0, &c), 0);
    assert_int_equal(sfl_algo_fedht.aggregate_add(&agg, c, 1.0), SFL_EDIM);
    sfl_spvec_free(c);
    sfl_agg_close(&agg);
    sfl_spvec_free(a);
    sfl_spvec_free(b);
}

/* A whole federation on the noiseless sparse problem: every sparse
 * algorithm recovers the truth. */
static double run_fed(const sfl_algo_t *algo, const sfl_synth_t *s, const sfl_algo_params_t *p,
                      uint32_t rounds, double *out_model)
{
    sfl_problem_t prob;
    sfl_agg_t agg;
    sfl_algo_ws_t ws;
    double *x = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    assert_int_equal(sfl_algo_check(algo, p, &prob), 0);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_agg_init(&agg, algo, p, &prob), 0);
    for (uint32_t t = 1; t <= rounds; t++) {
        assert_int_equal(algo->aggregate_begin(&agg), 0);
        for (uint32_t c = 0; c < s->nclients; c++) {
            sfl_spvec_t *u;
            sfl_rng_t r;

            sfl_rng_seed(&r, 7, t, c, SFL_STREAM_TRAIN);
            assert_int_equal(sfl_spvec_new(s->dim, 0, &u), 0);
            assert_int_equal(algo->client_update(p, &prob, x, s->clients[c], NULL, &r, &ws, u), 0);
            assert_int_equal(algo->aggregate_add(&agg, u, s->clients[c]->X->nrows), 0);
            sfl_spvec_free(u);
        }
        assert_int_equal(algo->aggregate_end(&agg, x), 0);
    }
    double err = sfl_eval_rel_error(x, s->truth, s->dim);
    if (out_model)
        memcpy(out_model, x, s->dim * sizeof(double));
    sfl_agg_close(&agg);
    sfl_algo_ws_close(&ws);
    free(x);
    return err;
}

static sfl_synth_t *small_sparse(void)
{
    sfl_synth_params_t sp;
    sfl_synth_t *s;

    sfl_synth_params_default(&sp, SFL_SYNTH_SPARSE);
    sp.nclients = 4;
    sp.n_per_client = 60;
    sp.dim = 80;
    sp.s = 4;
    sp.seed = 3;
    assert_int_equal(sfl_synth_generate(&sp, &s), 0);
    return s;
}

static void test_algo_recovers_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_t *s = small_sparse();
    sfl_algo_params_t p;

    sfl_algo_params_default(&p);
    p.tau = 8;
    p.batch = 60;
    p.lr = 0.1;
    p.local_steps = 3;
    assert_true(run_fed(&sfl_algo_fediterht, s, &p, 150, NULL) < 1e-6);
    assert_true(run_fed(&sfl_algo_fedht, s, &p, 150, NULL) < 1e-6);
    assert_true(run_fed(&sfl_algo_diht, s, &p, 400, NULL) < 1e-6);
    /* Minibatches: still converges in the noiseless case (interpolation). */
    p.batch = 10;
    p.lr = 0.02;
    assert_true(run_fed(&sfl_algo_fediterht, s, &p, 300, NULL) < 1e-4);
    sfl_synth_free(s);
}

static void test_algo_deterministic_and_variants(void **state)
{
    (void)state;
    sfl_synth_t *s = small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    sfl_algo_params_default(&p);
    p.tau = 8;
    p.batch = 10;
    p.lr = 0.02;
    /* Same seed, same bits. */
    run_fed(&sfl_algo_fediterht, s, &p, 5, m1);
    run_fed(&sfl_algo_fediterht, s, &p, 5, m2);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    /* FedProx with mu = 0 is FedAvg, bit for bit; mu > 0 differs. */
    p.mu = 0;
    run_fed(&sfl_algo_fedavg, s, &p, 3, m1);
    run_fed(&sfl_algo_fedprox, s, &p, 3, m2);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    p.mu = 5;
    run_fed(&sfl_algo_fedprox, s, &p, 3, m2);
    assert_memory_not_equal(m1, m2, s->dim * sizeof(double));
    /* Distributed-IHT takes one step whatever K. */
    p.local_steps = 1;
    run_fed(&sfl_algo_diht, s, &p, 3, m1);
    p.local_steps = 7;
    run_fed(&sfl_algo_diht, s, &p, 3, m2);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_algo_bad_client(void **state)
{
    (void)state;
    const double y[3] = {1, 2, 3};
    sfl_dataset_t *ds = identity_data(y, 3), *empty;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
    sfl_rng_t r;
    double x0[4] = {0};
    uint32_t none = 0;

    sfl_algo_params_default(&p);
    p.tau = 1;
    sfl_algo_ws_init(&ws);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    /* Model of 4 features, data of 3. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    assert_int_equal(sfl_spvec_new(4, 0, &u), 0);
    assert_int_equal(sfl_algo_fedht.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u), SFL_EDIM);
    /* No samples. */
    assert_int_equal(sfl_dataset_subset(ds, &none, 0, &empty), 0);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 3, 0), 0);
    assert_int_equal(sfl_algo_fedht.client_update(&p, &prob, x0, empty, NULL, &r, &ws, u),
                     SFL_EEMPTY);
    /* Divergence is reported, not returned as a model of infinities. */
    p.lr = 1e200;
    p.local_steps = 10;
    assert_int_equal(sfl_algo_fedavg.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u),
                     SFL_ENUMERIC);
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(empty);
    sfl_dataset_free(ds);
}

static void test_algo_alloc_failures(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_agg_t agg;
    sfl_algo_ws_t ws;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 50, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 5;
    FAILALLOC_EACH(sfl_agg_init(&agg, &sfl_algo_fedht, &p, &prob), sfl_agg_close(&agg));
    sfl_algo_ws_init(&ws);
    FAILALLOC_EACH(sfl_algo_ws_reserve(&ws, 50, 10), (sfl_algo_ws_close(&ws), sfl_algo_ws_init(&ws)));
    sfl_algo_ws_close(&ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_registry),
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

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
#include "sfl/eval.h"
#include "sfl/synth.h"
#include "testutil.h"

/* Identity design: rows e_j with target y_j, so f(x) = (1/n) ||x - y||^2 and
 * grad f(x) = (2/n)(x - y): a step of size n/2 moves by exactly y - x. */
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

/* T rounds of full participation from state 0; returns the relative error of
 * the model (model_of the state, if the algorithm has one) and copies the
 * model to out_model and the final state to out_state if given. */
static double run_fed(const sfl_algo_t *algo, const sfl_synth_t *s, const sfl_algo_params_t *p,
                      uint32_t rounds, double *out_model, double *out_state)
{
    sfl_problem_t prob;
    sfl_agg_t agg;
    sfl_algo_ws_t ws;
    sfl_topk_ws_t tk;
    double *z = calloc(s->dim, sizeof(double)), *x = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    assert_int_equal(sfl_algo_check(algo, p, &prob), 0);
    sfl_algo_ws_init(&ws);
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_agg_init(&agg, algo, p, &prob), 0);
    for (uint32_t t = 1; t <= rounds; t++) {
        assert_int_equal(algo->aggregate_begin(&agg), 0);
        for (uint32_t c = 0; c < s->nclients; c++) {
            sfl_spvec_t *u;
            sfl_rng_t r;

            sfl_rng_seed(&r, 7, t, c, SFL_STREAM_TRAIN);
            assert_int_equal(sfl_spvec_new(s->dim, 0, &u), 0);
            assert_int_equal(algo->client_update(p, &prob, z, s->clients[c], NULL, &r, &ws, u), 0);
            assert_int_equal(sfl_spvec_validate(u), 0);
            assert_int_equal(algo->aggregate_add(&agg, u, s->clients[c]->X->nrows), 0);
            sfl_spvec_free(u);
        }
        assert_int_equal(algo->aggregate_end(&agg, z), 0);
    }
    if (algo->model_of)
        assert_int_equal(algo->model_of(p, &prob, z, x, &tk), 0);
    else
        memcpy(x, z, s->dim * sizeof(double));
    double err = sfl_eval_rel_error(x, s->truth, s->dim);
    if (out_model)
        memcpy(out_model, x, s->dim * sizeof(double));
    if (out_state)
        memcpy(out_state, z, s->dim * sizeof(double));
    sfl_agg_close(&agg);
    sfl_topk_ws_close(&tk);
    sfl_algo_ws_close(&ws);
    free(x);
    free(z);
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
    sfl_dataset_t *ds = identity_data(y, 4);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_topk_ws_t tk;
    sfl_agg_t agg;
    sfl_spvec_t *u;
    sfl_rng_t r;
    double z[4] = {0}, x[4];

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 2;
    p.local_steps = 1;
    p.batch = 4;
    p.lr = 2.0; /* n / 2 */
    sfl_algo_ws_init(&ws);
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_spvec_new(4, 0, &u), 0);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    assert_int_equal(sfl_agg_init(&agg, &sfl_algo_feddualavg, &p, &prob), 0);

    /* Round 1 from z = 0: x = H_2(0) = 0, Delta = -lr grad f(0) = y, dense. */
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, z, ds, NULL, &r, &ws, u), 0);
    assert_int_equal(u->nnz, 4);
    for (uint32_t j = 0; j < 4; j++) {
        assert_int_equal(u->idx[j], j);
        assert_close(u->val[j], y[j], 0, 1e-15);
    }
    assert_int_equal(sfl_algo_feddualavg.aggregate_begin(&agg), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, u, 3.0), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_end(&agg, z), 0);
    for (uint32_t j = 0; j < 4; j++)
        assert_close(z[j], y[j], 0, 1e-15); /* the dual is not thresholded */
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, z, x, &tk), 0);
    assert_true(x[0] == 0 && x[1] == z[1] && x[2] == 0 && x[3] == z[3]);

    /* Round 2, K = 2, from z = y. Each step: x = H_2(z) = (0, -3, 0, 2),
     * grad = (x - y) / 2 = (-0.25, 0, -0.125, 0), Delta += (0.5, 0, 0.25, 0);
     * the second step's z = (1, -3, 0.5, 2) keeps the same support.
     * Delta = (1, 0, 0.5, 0): exact zeros where every gradient vanished. */
    p.local_steps = 2;
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, z, ds, NULL, &r, &ws, u), 0);
    assert_int_equal(u->nnz, 2);
    assert_int_equal(u->idx[0], 0);
    assert_int_equal(u->idx[1], 2);
    assert_close(u->val[0], 1.0, 0, 1e-15);
    assert_close(u->val[1], 0.5, 0, 1e-15);
    /* Server step eta_g = 1/2: z = y + Delta / 2 = (1, -3, 0.5, 2). */
    p.server_lr = 0.5;
    assert_int_equal(sfl_algo_feddualavg.aggregate_begin(&agg), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, u, 1.0), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_end(&agg, z), 0);
    assert_close(z[0], 1.0, 0, 1e-15);
    assert_close(z[1], -3.0, 0, 1e-15);
    assert_close(z[2], 0.5, 0, 1e-15);
    assert_close(z[3], 2.0, 0, 1e-15);
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, z, x, &tk), 0);
    assert_true(x[0] == 0 && x[1] == z[1] && x[2] == 0 && x[3] == z[3]);

    sfl_agg_close(&agg);
    sfl_spvec_free(u);
    sfl_topk_ws_close(&tk);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(ds);
}

/* z_{t+1} = z_t + eta_g sum_i p_i Delta_i, weighted. */
static void test_feddualavg_server_step(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_agg_t agg;
    sfl_spvec_t *a, *b, *c;
    double z[4] = {1, 1, 1, 1};
    const double da[4] = {1, 0, 4, 0}, db[4] = {0, 2, 0, 8};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 2;
    p.server_lr = 2.0;
    assert_int_equal(sfl_spvec_new(4, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(4, 0, &b), 0);
    assert_int_equal(sfl_spvec_new(5, 0, &c), 0);
    assert_int_equal(sfl_spvec_from_dense(a, da), 0);
    assert_int_equal(sfl_spvec_from_dense(b, db), 0);
    assert_int_equal(sfl_agg_init(&agg, &sfl_algo_feddualavg, &p, &prob), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_begin(&agg), 0);
    /* Nothing to aggregate: an error, and the state is left alone. */
    assert_int_equal(sfl_algo_feddualavg.aggregate_end(&agg, z), SFL_EEMPTY);
    assert_true(z[0] == 1 && z[1] == 1 && z[2] == 1 && z[3] == 1);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, c, 1.0), SFL_EDIM);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, a, 0.0), SFL_EINVAL);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, a, -1.0), SFL_EINVAL);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, a, INFINITY), SFL_EINVAL);
    /* Streaming: adds allocate nothing. */
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, a, 1.0), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_add(&agg, b, 3.0), 0);
    assert_int_equal(sfl_algo_feddualavg.aggregate_end(&agg, z), 0);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    /* average (0.25, 1.5, 1, 6), times 2, plus 1 */
    assert_true(z[0] == 1.5 && z[1] == 4.0 && z[2] == 3.0 && z[3] == 13.0);
    sfl_agg_close(&agg);
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
    sfl_algo_params_default(&p);
    p.tau = 2;

    /* One block of 15. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 15, 0), 0);
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, st, m, &tk), 0);
    memcpy(want, st, sizeof(st));
    assert_int_equal(sfl_ht_dense(want, 15, 2, &ref), 0);
    assert_memory_equal(m, want, sizeof(m));
    assert_memory_equal(st, keep, sizeof(st));
    assert_int_equal(sfl_dvec_nnz(m, 15), 2);

    /* Softmax, 5 features x 3 classes: tau per class block. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 5, 3), 0);
    assert_int_equal(prob.dim, 15);
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, st, m, &tk), 0);
    memcpy(want, st, sizeof(st));
    assert_int_equal(sfl_ht_block(want, 3, 5, 2, &ref), 0);
    assert_memory_equal(m, want, sizeof(m));
    for (int c = 0; c < 3; c++)
        assert_int_equal(sfl_dvec_nnz(m + 5 * c, 5), 2);

    /* A NaN in the state is an error, not a model. */
    st[7] = NAN;
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, st, m, &tk), SFL_ENUMERIC);
    sfl_topk_ws_close(&tk);
    sfl_topk_ws_close(&ref);
}

static void test_feddualavg_recovers_sparse_truth(void **state)
{
    (void)state;
    sfl_synth_t *s = small_sparse();
    sfl_algo_params_t p;
    double *x = calloc(s->dim, sizeof(double)), *z = calloc(s->dim, sizeof(double));

    sfl_algo_params_default(&p);
    p.batch = 60;
    p.local_steps = 3;
    /* tau = s: once the support is found, gradient descent on it. */
    p.tau = 4;
    p.lr = 0.1;
    assert_true(run_fed(&sfl_algo_feddualavg, s, &p, 150, NULL, NULL) < 1e-6);
    /* tau = 2 s: slower, since the slack slots keep cycling through
     * coordinates whose dual mass only drains while they are selected. */
    p.tau = 8;
    p.lr = 0.3;
    assert_true(run_fed(&sfl_algo_feddualavg, s, &p, 300, x, z) < 1e-4);
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
    sfl_synth_t *s = small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    sfl_algo_params_default(&p);
    p.tau = s->dim;
    p.batch = 10;
    p.lr = 0.02;
    p.mu = 0;
    run_fed(&sfl_algo_fedavg, s, &p, 10, m1, NULL);
    run_fed(&sfl_algo_feddualavg, s, &p, 10, m2, NULL);
    for (size_t j = 0; j < s->dim; j++)
        assert_close(m2[j], m1[j], 1e-10, 1e-12);
    free(m1);
    free(m2);
    sfl_synth_free(s);
}

static void test_feddualavg_deterministic_and_server_lr(void **state)
{
    (void)state;
    sfl_synth_t *s = small_sparse();
    sfl_algo_params_t p;
    double *m1 = calloc(s->dim, sizeof(double)), *m2 = calloc(s->dim, sizeof(double));

    sfl_algo_params_default(&p);
    p.tau = 8;
    p.batch = 10;
    p.lr = 0.02;
    run_fed(&sfl_algo_feddualavg, s, &p, 10, NULL, m1);
    run_fed(&sfl_algo_feddualavg, s, &p, 10, NULL, m2);
    assert_memory_equal(m1, m2, s->dim * sizeof(double));
    p.server_lr = 0.5;
    run_fed(&sfl_algo_feddualavg, s, &p, 10, NULL, m2);
    assert_memory_not_equal(m1, m2, s->dim * sizeof(double));
    /* And a damped step is still a descent method. */
    double e1 = run_fed(&sfl_algo_feddualavg, s, &p, 20, NULL, NULL);
    double e2 = run_fed(&sfl_algo_feddualavg, s, &p, 200, NULL, NULL);
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
    sfl_algo_params_default(&p);
    p.tau = 10;
    assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, &p, &prob), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p.server_lr = bad[i];
        assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, &p, &prob), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "server learning rate"));
    }
    p.server_lr = 1.0;
    p.tau = 0;
    assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, &p, &prob), SFL_EINVAL);
    p.tau = 11;
    assert_int_equal(sfl_algo_check(&sfl_algo_feddualavg, &p, &prob), SFL_EINVAL);
    /* Unchecked tau reaching model_of is refused, not a crash. */
    sfl_topk_ws_t tk;
    double st[10] = {0}, m[10];
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_algo_feddualavg.model_of(&p, &prob, st, m, &tk), SFL_EINVAL);
    sfl_topk_ws_close(&tk);
}

static void test_feddualavg_bad_client(void **state)
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
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u),
                     SFL_EDIM);
    /* Message of the wrong dimension. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 3, 0), 0);
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u),
                     SFL_EDIM);
    sfl_spvec_free(u);
    assert_int_equal(sfl_spvec_new(3, 0, &u), 0);
    /* No samples. */
    assert_int_equal(sfl_dataset_subset(ds, &none, 0, &empty), 0);
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, x0, empty, NULL, &r, &ws, u),
                     SFL_EEMPTY);
    /* Divergence is reported, and the message is left empty rather than
     * half-written. */
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u), 0);
    assert_int_equal(u->nnz, 3);
    p.lr = 1e200;
    p.local_steps = 10;
    assert_int_equal(sfl_algo_feddualavg.client_update(&p, &prob, x0, ds, NULL, &r, &ws, u),
                     SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "diverged"));
    assert_int_equal(u->nnz, 0);
    assert_int_equal(sfl_spvec_validate(u), 0);
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(empty);
    sfl_dataset_free(ds);
}

/* A client update with a fresh workspace and message, so every allocation it
 * makes can fail. */
static int client_once(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                       const double *z, const sfl_dataset_t *ds)
{
    sfl_algo_ws_t ws;
    sfl_spvec_t *u = NULL;
    sfl_rng_t r;
    int rc;

    sfl_algo_ws_init(&ws);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    rc = sfl_spvec_new(prob->dim, 0, &u);
    if (rc < 0)
        goto out;
    rc = sfl_algo_feddualavg.client_update(p, prob, z, ds, NULL, &r, &ws, u);
out:
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    return rc;
}

static void test_feddualavg_alloc_failures(void **state)
{
    (void)state;
    sfl_synth_t *s = small_sparse();
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_agg_t agg;
    sfl_topk_ws_t tk;
    double *z = calloc(s->dim, sizeof(double)), *m = calloc(s->dim, sizeof(double));

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    sfl_algo_params_default(&p);
    p.tau = 5;
    p.batch = 10;
    FAILALLOC_EACH(sfl_agg_init(&agg, &sfl_algo_feddualavg, &p, &prob), sfl_agg_close(&agg));
    FAILALLOC_EACH(client_once(&p, &prob, z, s->clients[0]), (void)0);
    sfl_topk_ws_init(&tk);
    FAILALLOC_EACH(sfl_algo_feddualavg.model_of(&p, &prob, z, m, &tk),
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

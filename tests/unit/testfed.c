#include "testfed.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/algo/client.h"
#include "sfl/model/eval.h"

sfl_dataset_t *testfed_dense_data(const double *a, const double *y, uint32_t n, uint32_t d)
{
    sfl_csr_t *X;
    sfl_dataset_t *ds;
    /* Through the sfl allocator: the dataset takes the targets and frees
     * them with sfl__free. */
    double *yy = sfl__mallocarray(n ? n : 1, sizeof(double));

    assert_non_null(yy);
    assert_int_equal(sfl_csr_from_dense(a, n, d, &X), 0);
    if (n)
        memcpy(yy, y, n * sizeof(double));
    assert_int_equal(sfl_dataset_new(X, yy, &ds), 0);
    return ds;
}

sfl_dataset_t *testfed_identity_data(const double *y, uint32_t n)
{
    double *a = calloc((size_t)n * n, sizeof(double));
    sfl_dataset_t *ds;

    assert_non_null(a);
    for (uint32_t i = 0; i < n; i++)
        a[(size_t)i * n + i] = 1.0;
    ds = testfed_dense_data(a, y, n, n);
    free(a);
    return ds;
}

sfl_synth_t *testfed_small_sparse(void)
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

typedef struct universal {
    sfl_sgd_params_t sgd;
    double mu, server_lr, l2_ball;
    uint32_t inexact_steps;
} universal_t;

#define U(n, t, f, def, lo)                                                               \
    {n, n, SFL_PARAM_##t, offsetof(universal_t, f), def, lo,                              \
     SFL_PARAM_##t == SFL_PARAM_COUNT ? UINT32_MAX : HUGE_VAL, 0, "test"}
static const sfl_param_def_t universal_defs[] = {
    U("lr", REAL, sgd.lr, 0.01, -HUGE_VAL),
    U("lambda", REAL, sgd.lambda, 0, -HUGE_VAL),
    U("tau", COUNT, sgd.tau, 10, 0),
    U("local_steps", COUNT, sgd.local_steps, 5, 0),
    U("batch", COUNT, sgd.batch, 10, 0),
    U("mu", REAL, mu, 0.01, -HUGE_VAL),
    U("server_lr", REAL, server_lr, 1, -HUGE_VAL),
    U("l2_ball", REAL, l2_ball, 0, -HUGE_VAL),
    U("inexact_steps", COUNT, inexact_steps, 10, 0),
    {0},
};
#undef U

static const sfl_algo_t universal = {
    .name = "testfed-universal",
    .params = universal_defs,
    .params_size = sizeof(universal_t),
};

void testfed_params_default(sfl_algo_params_t *p)
{
    sfl_algo_params_default(&universal, p);
}

/* One slot per (p, algo), so an aggregator that keeps the pointer sees the
 * values testfed_set gives p later. */
static struct {
    const sfl_algo_params_t *from;
    sfl_algo_params_t to;
} slot[64];
static unsigned next_slot;

void testfed_set(sfl_algo_params_t *p, const char *name, double v);

static void convert(const sfl_algo_params_t *p, sfl_algo_params_t *q)
{
    const sfl_algo_t *algo = q->algo;

    sfl_algo_params_default(algo, q);
    for (const sfl_param_def_t *d = algo->params; d && d->name; d++)
        testfed_set(q, d->name, sfl_algo_param_or(p, d->name, d->def));
}

const sfl_algo_params_t *testfed_as(const sfl_algo_t *algo, const sfl_algo_params_t *p)
{
    sfl_algo_params_t *q = NULL;

    if (p->algo == algo)
        return p;
    assert_ptr_equal(p->algo, &universal);
    for (unsigned i = 0; i < 64 && q == NULL; i++)
        if (slot[i].from == p && slot[i].to.algo == algo)
            q = &slot[i].to;
    if (q == NULL) {
        slot[next_slot % 64].from = p;
        q = &slot[next_slot++ % 64].to;
        q->algo = algo;
    }
    convert(p, q);
    return q;
}

int testfed_try(const sfl_algo_t *algo, const char *name, double v)
{
    sfl_algo_params_t p;

    sfl_algo_params_default(algo, &p);
    return sfl_algo_param_set(&p, name, v);
}

void testfed_set(sfl_algo_params_t *p, const char *name, double v)
{
    int rc = sfl_algo_param_set(p, name, v);

    if (rc != 0)
        print_error("testfed_set %s = %g: %s\n", name, v, sfl_last_error());
    assert_int_equal(rc, 0);
    if (p->algo == &universal)
        for (unsigned i = 0; i < 64; i++)
            if (slot[i].from == p)
                convert(p, &slot[i].to);
}

double testfed_run(const testfed_t *f)
{
    const sfl_algo_t *algo = f->algo;
    const sfl_algo_params_t *p = testfed_as(algo, f->p);
    const sfl_problem_t *prob = f->prob;
    uint32_t stride = f->stride ? f->stride : 1;
    size_t d = prob->dim, md = sfl_loss_dim(prob->loss, prob->ncols, prob->nclasses);
    size_t maxnnz = (size_t)sfl_algo_params_tau(p) * prob->nblocks;
    sfl_fold_t agg;
    sfl_algo_ws_t ws;
    sfl_topk_ws_t tk;
    double *x = calloc(d, sizeof(double)), *model = calloc(md, sizeof(double));
    /* every client's own state (for the algorithms that keep one) */
    sfl_client_state_t *cs = calloc(f->nclients, sizeof(*cs));
    double err = 0;

    assert_true(x && model && cs);
    for (uint32_t c = 0; c < f->nclients; c++)
        assert_int_equal(sfl_client_state_new(algo, p, prob, &cs[c]), 0);
    assert_true(f->errs == NULL || f->truth != NULL);
    assert_int_equal(sfl_algo_check(algo, p, prob), 0);
    sfl_algo_ws_init(&ws);
    sfl_topk_ws_init(&tk);
    assert_int_equal(sfl_fold_init(&agg, algo, p, prob, NULL), 0);
    for (uint32_t t = 1; t <= f->rounds; t++) {
        sfl_fold_begin(&agg);
        for (uint32_t c = 0; c < f->nclients; c++) {
            sfl_spvec_t *u;
            sfl_rng_t r;

            if (c % stride != t % stride)
                continue;
            sfl_rng_seed(&r, 7, t, c, SFL_STREAM_TRAIN);
            assert_int_equal(sfl_spvec_new((uint32_t)d, 0, &u), 0);
            int rc = algo->client_update(p, prob, x, f->clients[c], cs[c].mem, &r, &ws, u);
            if (rc != 0)
                print_error("client_update: %s: %s\n", sfl_strerror(rc), sfl_last_error());
            assert_int_equal(rc, 0);
            assert_int_equal(sfl_spvec_validate(u), 0);
            if (f->check == TESTFED_SPARSE)
                assert_true(u->nnz <= maxnnz);
            assert_int_equal(sfl_fold_add(&agg, u, f->clients[c]->X->nrows), 0);
            sfl_spvec_free(u);
        }
        assert_int_equal(sfl_fold_finish(&agg, x), 0);
        if (f->check == TESTFED_SPARSE)
            assert_true(sfl_dvec_nnz(x, d) <= maxnnz);
        if (f->errs || (t == f->rounds && (f->truth || f->out_model))) {
            if (algo->model_of)
                assert_int_equal(algo->model_of(p, prob, x, model, &tk), 0);
            else
                memcpy(model, x, d * sizeof(double));
            if (f->truth)
                err = sfl_eval_rel_error(model, f->truth, md);
            if (f->errs)
                f->errs[t - 1] = err;
        }
    }
    if (f->out_model)
        memcpy(f->out_model, model, md * sizeof(double));
    if (f->out_state)
        memcpy(f->out_state, x, d * sizeof(double));
    sfl_fold_close(&agg);
    sfl_topk_ws_close(&tk);
    sfl_algo_ws_close(&ws);
    for (uint32_t c = 0; c < f->nclients; c++)
        sfl_client_state_free(&cs[c]);
    free(cs);
    free(model);
    free(x);
    return err;
}

double testfed_run_synth(const sfl_algo_t *algo, const sfl_synth_t *s,
                         const sfl_algo_params_t *p, uint32_t rounds, int check,
                         double *out_model, double *out_state)
{
    sfl_problem_t prob;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, s->dim, 0), 0);
    return testfed_run(&(testfed_t){
        .algo = algo,
        .p = p,
        .prob = &prob,
        .clients = s->clients,
        .nclients = s->nclients,
        .rounds = rounds,
        .check = check,
        .truth = s->truth,
        .out_model = out_model,
        .out_state = out_state,
    });
}

void testfed_client_init(testfed_client_t *c, const double *y, uint32_t n, uint32_t dim)
{
    uint32_t none = 0;

    c->ds = testfed_identity_data(y, n);
    assert_int_equal(sfl_dataset_subset(c->ds, &none, 0, &c->empty), 0);
    assert_int_equal(sfl_problem_init(&c->prob, &sfl_loss_lsq, dim, 0), 0);
    testfed_params_default(&c->p);
    sfl_algo_ws_init(&c->ws);
    assert_int_equal(sfl_spvec_new(dim, 0, &c->u), 0);
    sfl_rng_seed(&c->r, 1, 1, 0, SFL_STREAM_TRAIN);
}

void testfed_client_close(testfed_client_t *c)
{
    sfl_spvec_free(c->u);
    sfl_algo_ws_close(&c->ws);
    sfl_dataset_free(c->empty);
    sfl_dataset_free(c->ds);
}

int testfed_update(const sfl_algo_t *algo, testfed_client_t *c, const double *x,
                   const sfl_dataset_t *data)
{
    return algo->client_update(testfed_as(algo, &c->p), &c->prob, x, data, NULL, &c->r, &c->ws,
                              c->u);
}

int testfed_client_once(const sfl_algo_t *algo, const sfl_algo_params_t *p,
                        const sfl_problem_t *prob, const double *x, const sfl_dataset_t *ds)
{
    sfl_algo_ws_t ws;
    sfl_spvec_t *u = NULL;
    sfl_rng_t r;
    int rc;

    sfl_algo_ws_init(&ws);
    sfl_rng_seed(&r, 1, 1, 0, SFL_STREAM_TRAIN);
    rc = sfl_spvec_new((uint32_t)prob->dim, 0, &u);
    if (rc < 0)
        goto out;
    rc = algo->client_update(testfed_as(algo, p), prob, x, ds, NULL, &r, &ws, u);
out:
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    return rc;
}

void testfed_personal_init(testfed_personal_t *c, const sfl_algo_t *algo, const double *y,
                           uint32_t n)
{
    c->algo = algo;
    c->ds = testfed_identity_data(y, n);
    assert_int_equal(sfl_problem_init(&c->prob, &sfl_loss_lsq, n, 0), 0);
    sfl_algo_params_default(algo, &c->p);
    assert_int_equal(sfl_algo_param_set(&c->p, "batch", n), 0); /* full batch */
    assert_int_equal(sfl_client_state_new(algo, &c->p, &c->prob, &c->st), 0);
    sfl_algo_ws_init(&c->ws);
    assert_int_equal(sfl_spvec_new(n, 0, &c->u), 0);
}

void testfed_personal_close(testfed_personal_t *c)
{
    sfl_spvec_free(c->u);
    sfl_algo_ws_close(&c->ws);
    sfl_client_state_free(&c->st);
    sfl_dataset_free(c->ds);
}

void testfed_personal_set(testfed_personal_t *c, const char *name, double v)
{
    assert_int_equal(sfl_algo_param_set(&c->p, name, v), 0);
}

int testfed_personal_round(testfed_personal_t *c, const double *global, uint64_t round)
{
    return sfl_algo_client_round(c->algo, &c->p, &c->prob, global, c->ds, c->st.mem, 7, round,
                                 0, &c->ws, c->u);
}

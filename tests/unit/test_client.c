/* One client's round (sfl_client_round) and the client state's lifecycle:
 * new, versioned bytes, load with every check, wipe on free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/algo/client.h"
#include "sfl/core/error.h"
#include "sfl/data/libsvm.h"
#include "testfed.h"

/* A stateful toy: the state counts the rounds a client trained and keeps
 * the last update's first value; the update is FedAvg's. */
typedef struct counter_state {
    uint64_t rounds;
    double last;
    double seeded; /* state_init's mark */
} counter_state_t;

static size_t counter_size(const sfl_algo_params_t *p, const sfl_problem_t *prob)
{
    (void)p;
    (void)prob;
    return sizeof(counter_state_t);
}

static int counter_init(const sfl_algo_params_t *p, const sfl_problem_t *prob, void *state)
{
    counter_state_t *s = state;

    (void)p;
    s->seeded = (double)prob->dim;
    return 0;
}

static int counter_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                          const double *global, const sfl_dataset_t *local, void *client_state,
                          sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    counter_state_t *s = client_state;
    int rc = sfl_algo_sgd_update(SFL_ALGO_PARAMS(p, sfl_sgd_params_t), prob, global, local, rng,
                                 ws, 0, 0, 0, update);

    if (rc < 0)
        return rc;
    assert_non_null(s);
    s->rounds++;
    s->last = update->nnz ? update->val[0] : 0;
    return 0;
}

static const sfl_param_def_t counter_params[] = {
    SFL_PARAM_DEF_LR(sfl_sgd_params_t, lr),
    SFL_PARAM_DEF_K(sfl_sgd_params_t, local_steps),
    SFL_PARAM_DEF_BATCH(sfl_sgd_params_t, batch),
    SFL_PARAM_DEF_LAMBDA(sfl_sgd_params_t, lambda),
    {0},
};

static const sfl_algo_t counter = {
    .name = "counter",
    .summary = "test: FedAvg with a per-client round counter",
    .params = counter_params,
    .params_size = sizeof(sfl_sgd_params_t),
    .client_update = counter_update,
    .state_size = counter_size,
    .state_init = counter_init,
    .state_version = 3,
    .finish = sfl_fold_mean,
};

static void test_client_state_lifecycle(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_client_state_t st, back;
    uint8_t *b = NULL;
    size_t n = 0;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 5, 0), 0);
    sfl_algo_params_default(&counter, &p);
    assert_int_equal(sfl_client_state_new(&counter, &p, &prob, &st), 0);
    assert_int_equal(st.size, sizeof(counter_state_t));
    assert_true(((counter_state_t *)st.mem)->seeded == 5);
    ((counter_state_t *)st.mem)->rounds = 41;
    assert_int_equal(sfl_client_state_save(&st, &b, &n), 0);
    assert_int_equal(n, SFL_CLIENT_STATE_OVERHEAD + sizeof(counter_state_t));
    assert_memory_equal(b, "SFLS", 4);
    assert_int_equal(sfl_client_state_load(&counter, &p, &prob, b, n, &back), 0);
    assert_memory_equal(back.mem, st.mem, st.size);
    sfl_client_state_free(&back);
    sfl_client_state_free(&st);
    assert_null(st.mem);

    /* Every byte matters: a flip anywhere is refused (header fields by
     * name, the rest by the checksum), never loaded. */
    for (size_t i = 0; i < n; i++) {
        b[i] ^= 0x40;
        assert_int_not_equal(sfl_client_state_load(&counter, &p, &prob, b, n, &back), 0);
        assert_null(back.mem);
        b[i] ^= 0x40;
    }
    /* Truncated at every length, and one byte too many. */
    for (size_t k = 0; k < n; k++)
        assert_int_not_equal(sfl_client_state_load(&counter, &p, &prob, b, k, &back), 0);
    uint8_t *longer = malloc(n + 1);
    assert_non_null(longer);
    memcpy(longer, b, n);
    longer[n] = 0;
    assert_int_equal(sfl_client_state_load(&counter, &p, &prob, longer, n + 1, &back),
                     SFL_EPARSE);
    free(longer);
    /* The messages a user sees. */
    assert_int_equal(sfl_client_state_load(&counter, &p, &prob, b, 10, &back), SFL_ETRUNC);
    sfl_problem_t other;
    assert_int_equal(sfl_problem_init(&other, &sfl_loss_lsq, 6, 0), 0);
    assert_int_equal(sfl_client_state_load(&counter, &p, &other, b, n, &back), SFL_EPARSE);
    assert_string_equal(sfl_last_error(), "client state: for dimension 5, the job has 6");
    sfl_algo_t v4 = counter;
    v4.state_version = 4;
    assert_int_equal(sfl_client_state_load(&v4, &p, &prob, b, n, &back), SFL_EPARSE);
    assert_string_equal(sfl_last_error(), "client state: counter state version 3, this build has 4");
    sfl_algo_t renamed = counter;
    renamed.name = "other";
    assert_int_equal(sfl_client_state_load(&renamed, &p, &prob, b, n, &back), SFL_EPARSE);
    assert_string_equal(sfl_last_error(), "client state: saved by algorithm 'counter', not other");
    b[n - 1] ^= 1;
    assert_int_equal(sfl_client_state_load(&counter, &p, &prob, b, n, &back), SFL_EPARSE);
    assert_string_equal(sfl_last_error(), "client state: checksum mismatch (damaged file)");
    sfl_client_state_bytes_free(b, n);

    /* An algorithm without state: empty, saves nothing. */
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_client_state_new(&sfl_algo_fedavg, &p, &prob, &st), 0);
    assert_null(st.mem);
    assert_int_equal(sfl_client_state_save(&st, &b, &n), 0);
    assert_null(b);
    assert_int_equal(n, 0);
    sfl_client_state_free(&st);
}

static void test_client_state_alloc(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_client_state_t st;
    uint8_t *b = NULL;
    size_t n = 0;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 5, 0), 0);
    sfl_algo_params_default(&counter, &p);
    FAILALLOC_EACH(sfl_client_state_new(&counter, &p, &prob, &st), sfl_client_state_free(&st));
    assert_int_equal(sfl_client_state_new(&counter, &p, &prob, &st), 0);
    /* (FAILALLOC_EACH runs the cleanup after the last, successful call too.) */
    FAILALLOC_EACH(sfl_client_state_save(&st, &b, &n), sfl_client_state_bytes_free(b, n));
    assert_int_equal(sfl_client_state_save(&st, &b, &n), 0);
    sfl_client_state_t back;
    FAILALLOC_EACH(sfl_client_state_load(&counter, &p, &prob, b, n, &back),
                   sfl_client_state_free(&back));
    sfl_client_state_free(&back);
    sfl_client_state_bytes_free(b, n);
    sfl_client_state_free(&st);
}

/* The round: the state reaches client_update and changes; the update is
 * the table's; labels coded by the job's list; a narrower local data set is
 * widened; the report is the objective at the round's model. */
static void test_client_round(void **state)
{
    (void)state;
    char path[] = "/tmp/test_client.XXXXXX"; /* not under the build dir: any BUILD works */
    int fd = mkstemp(path);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    sfl_dataset_t *ds;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_client_state_t st;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u, *ref;
    sfl_client_report_t rep;
    sfl_rng_t r;
    const double labels[2] = {-1, 1};
    double global[6] = {0.1, 0, 0, 0, 0, 0};

    assert_non_null(f);
    fprintf(f, "1 1:1 2:0.5\n-1 1:-1 3:2\n1 2:1\n-1 3:-0.5 1:0.25\n");
    fclose(f);
    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0);
    assert_int_equal(ds->X->ncols, 3);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_logistic, 6, 2), 0);
    sfl_algo_params_default(&counter, &p);
    assert_int_equal(sfl_algo_param_set(&p, "lambda", 0.01), 0);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new(6, 0, &u), 0);
    assert_int_equal(sfl_client_state_new(&counter, &p, &prob, &st), 0);
    sfl_client_task_t t = {.algo = &counter, .params = &p, .prob = &prob, .labels = labels,
                           .global = global, .seed = 9, .round = 2, .client = 4};

    assert_int_equal(sfl_client_round(&t, ds, NULL, &st, &ws, u, &rep), 0);
    assert_int_equal(((counter_state_t *)st.mem)->rounds, 1);
    assert_int_equal(sfl_client_round(&t, ds, NULL, &st, &ws, u, &rep), 0);
    assert_int_equal(((counter_state_t *)st.mem)->rounds, 2);
    assert_true(isfinite(rep.train_loss) && rep.train_loss > 0);
    assert_int_equal(rep.eval_samples, 0);
    /* The same as the table called by hand on coded targets. */
    sfl_dataset_t coded = *ds;
    double y[4];
    sfl_csr_t xv = *ds->X;
    for (int i = 0; i < 4; i++)
        y[i] = ds->y[i] > 0 ? 1 : 0;
    xv.ncols = 6;
    coded.X = &xv;
    coded.y = y;
    coded.nclasses = 2;
    coded.labels = (double *)labels;
    assert_int_equal(sfl_spvec_new(6, 0, &ref), 0);
    sfl_rng_seed(&r, 9, 2, 4, SFL_STREAM_TRAIN);
    counter_state_t scratch = {0};
    assert_int_equal(counter.client_update(&p, &prob, global, &coded, &scratch, &r, &ws, ref), 0);
    assert_int_equal(ref->nnz, u->nnz);
    assert_memory_equal(ref->val, u->val, u->nnz * sizeof(double));
    double want = sfl_loss_eval(&sfl_loss_logistic, &coded, NULL, 0, global, 0.01, NULL);
    assert_true(rep.train_loss == want);
    /* Held-out rows: accuracy of the round's model. */
    assert_int_equal(sfl_client_round(&t, ds, ds, &st, &ws, u, &rep), 0);
    assert_int_equal(rep.eval_samples, 4);
    assert_true(rep.eval_accuracy >= 0 && rep.eval_accuracy <= 1);
    /* A local label the job does not list. */
    const double other[2] = {0, 1};
    t.labels = other;
    assert_int_equal(sfl_client_round(&t, ds, NULL, &st, &ws, u, &rep), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "task: local label -1 (row 2) is not among the job's "
                                          "2 labels");
    t.labels = labels;
    /* max_update_nnz */
    t.max_update_nnz = 1;
    assert_int_equal(sfl_client_round(&t, ds, NULL, &st, &ws, u, NULL), SFL_ELIMIT);
    t.max_update_nnz = 0;
    /* Data wider than the job. */
    sfl_problem_t narrow;
    assert_int_equal(sfl_problem_init(&narrow, &sfl_loss_logistic, 2, 2), 0);
    t.prob = &narrow;
    assert_int_equal(sfl_client_check(&t, ds, NULL), SFL_EDIM);
    assert_string_equal(sfl_last_error(), "task: dimension 2, but the local data has 3 features");
    t.prob = &prob;
    /* A state made for another algorithm. */
    sfl_client_state_t wrong = st;
    wrong.algo = &sfl_algo_fedavg;
    assert_int_equal(sfl_client_round(&t, ds, NULL, &wrong, &ws, u, NULL), SFL_EINVAL);

    sfl_client_state_free(&st);
    sfl_spvec_free(u);
    sfl_spvec_free(ref);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(ds);
    remove(path);
}

/* A personalized algorithm (FedMac) reports, beside the round's model on
 * the held-out rows, its own model after the round's training on the same
 * rows, coded by the job's labels; other algorithms, lsq and a client
 * without held-out rows report none. */
static void test_client_personal(void **state)
{
    (void)state;
    /* 3 classes (job labels 2, 5, 7), each marked by one of the first three
     * features; the fourth is noise. */
    static const double tx[9 * 4] = {
        1, 0, 0, 0.1, 0.9, 0.1, 0, 0, 1, 0, 0.2, 0,
        0, 1, 0, 0.1, 0.1, 1, 0, 0, 0, 0.8, 0, 0.3,
        0, 0, 1, 0, 0, 0.2, 1, 0, 0.1, 0, 0.9, 0.2,
    };
    static const double ty[9] = {2, 2, 2, 5, 5, 5, 7, 7, 7};
    static const double ex[6 * 4] = {
        0.8, 0, 0, 0, 0, 0.9, 0, 0, 0, 0, 0.7, 0,
        1, 0.2, 0, 0, 0, 1, 0.1, 0, 0.2, 0, 1, 0,
    };
    static const double ey[6] = {2, 5, 7, 2, 5, 5}; /* the last one wrong on purpose */
    const double labels[3] = {2, 5, 7};
    sfl_dataset_t *tr = testfed_dense_data(tx, ty, 9, 4), *ev = testfed_dense_data(ex, ey, 6, 4);
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_client_state_t st;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
    sfl_client_report_t rep;
    double *global;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 4, 3), 0);
    global = calloc(prob.dim, sizeof(double));
    assert_non_null(global);
    sfl_algo_params_default(&sfl_algo_fedmac, &p);
    assert_int_equal(sfl_algo_param_set(&p, "batch", 9), 0);
    assert_int_equal(sfl_algo_param_set(&p, "eta_p", 1), 0);
    assert_int_equal(sfl_client_state_new(&sfl_algo_fedmac, &p, &prob, &st), 0);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new((uint32_t)prob.dim, 0, &u), 0);
    sfl_client_task_t t = {.algo = &sfl_algo_fedmac, .params = &p, .prob = &prob,
                           .labels = labels, .global = global, .seed = 5, .round = 1};

    assert_int_equal(sfl_client_round(&t, tr, ev, &st, &ws, u, &rep), 0);
    assert_int_equal(rep.eval_samples, 6);
    assert_int_equal(rep.has_personal, 1);
    /* The held-out targets coded as the job numbers its classes. */
    sfl_dataset_t coded = *ev;
    sfl_csr_t xv = *ev->X;
    double y[6];
    for (int i = 0; i < 6; i++)
        y[i] = ey[i] == 2 ? 0 : ey[i] == 5 ? 1 : 2;
    coded.X = &xv;
    coded.y = y;
    coded.nclasses = 3;
    coded.labels = (double *)labels;
    /* theta after this round's training is the state (FedMac's
     * personal_model copies it). */
    double want = sfl_loss_accuracy(&sfl_loss_softmax, &coded, st.mem);
    assert_true(rep.personal_accuracy == want);
    assert_true(rep.eval_accuracy == sfl_loss_accuracy(&sfl_loss_softmax, &coded, global));
    /* The trained personal model beats the zero global one here. */
    assert_true(rep.personal_accuracy > rep.eval_accuracy);
    assert_true(rep.personal_accuracy < 1); /* the row labelled wrong */
    /* The next round: from the state as this round left it. */
    assert_int_equal(sfl_client_round(&t, tr, ev, &st, &ws, u, &rep), 0);
    assert_true(rep.personal_accuracy == sfl_loss_accuracy(&sfl_loss_softmax, &coded, st.mem));
    /* No held-out rows: nothing personal either. */
    assert_int_equal(sfl_client_round(&t, tr, NULL, &st, &ws, u, &rep), 0);
    assert_int_equal(rep.has_personal, 0);
    assert_true(rep.personal_accuracy == 0);
    /* Each allocation failing in turn, the personal model's included. */
    FAILALLOC_EACH(sfl_client_round(&t, tr, ev, &st, &ws, u, &rep),
                   (sfl_algo_ws_close(&ws), sfl_algo_ws_init(&ws)));
    assert_int_equal(rep.has_personal, 1);
    sfl_client_state_free(&st);

    /* FedAvg (horizontal): the global metric only. */
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    t.algo = &sfl_algo_fedavg;
    assert_int_equal(sfl_client_state_new(&sfl_algo_fedavg, &p, &prob, &st), 0);
    assert_int_equal(sfl_client_round(&t, tr, ev, &st, &ws, u, &rep), 0);
    assert_int_equal(rep.eval_samples, 6);
    assert_int_equal(rep.has_personal, 0);
    assert_true(rep.personal_accuracy == 0);
    sfl_client_state_free(&st);

    /* FedMac on least squares: no accuracy to report. */
    sfl_problem_t lsq;
    assert_int_equal(sfl_problem_init(&lsq, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedmac, &p);
    assert_int_equal(sfl_client_state_new(&sfl_algo_fedmac, &p, &lsq, &st), 0);
    t.algo = &sfl_algo_fedmac;
    t.prob = &lsq;
    t.labels = NULL;
    assert_int_equal(sfl_client_round(&t, tr, ev, &st, &ws, u, &rep), 0);
    assert_int_equal(rep.eval_samples, 6);
    assert_int_equal(rep.has_personal, 0);
    assert_true(rep.personal_accuracy == 0);
    sfl_client_state_free(&st);

    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    free(global);
    sfl_dataset_free(ev);
    sfl_dataset_free(tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_state_lifecycle),
        cmocka_unit_test(test_client_state_alloc),
        cmocka_unit_test(test_client_round),
        cmocka_unit_test(test_client_personal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

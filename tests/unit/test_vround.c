/* server/round/vround.c: vertical rounds (bcfw, dpbcfw) on the in-process
 * coordinator (coordfx.h), answered by the agent's own vertical side
 * (client-agent/vblock.c) and checked against the algorithm's server step
 * run here on the same answers. */
#include "coordfx.h"

#include <math.h>
#include <sys/stat.h>

#include "vblock.h"
#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/algo/vertical.h"
#include "testfed.h"

#define VN 8  /* rows */
#define VD 6  /* columns: two blocks of 3 */
#define VK 2  /* block holders */
#define VS 3  /* iterations per round */
#define VR 2  /* rounds */
#define VMAX 16

/* The test's side of a job: the data, the agents' contexts and the model
 * and broadcast the algorithm's server step gives on the answers sent. */
typedef struct {
    char dir[64], agdir[VK][80];
    sfl_dataset_t *all, *blk[VK];
    agent_vert_t *ctx[VK];
    sfl_algo_params_t p;
    sfl_problem_t prob;
    sfl_vjob_t vj;
    size_t nb, nm;
    double x[VD], b[VMAX];
} vx_t;

static vx_t V;
static const uint8_t ids_a[SFL_MSG_HASH_BYTES] = {0x5a, 1, 2, 3};
static const uint8_t ids_b[SFL_MSG_HASH_BYTES] = {0xa5, 1, 2, 3};

static int vsetup(void **state)
{
    double a[VN * VD], y[VN];

    memset(&V, 0, sizeof(V));
    snprintf(V.dir, sizeof(V.dir), "/tmp/test_vround.XXXXXX");
    if (mkdtemp(V.dir) == NULL)
        return -1;
    for (uint32_t k = 0; k < VK; k++) {
        snprintf(V.agdir[k], sizeof(V.agdir[k]), "%s/a%u", V.dir, k);
        if (mkdir(V.agdir[k], 0700) != 0)
            return -1;
    }
    for (uint32_t i = 0; i < VN * VD; i++)
        a[i] = ((i * 31u) % 11) / 11.0 - 0.3;
    for (uint32_t i = 0; i < VN; i++)
        y[i] = (double)(i % 3) - 1.0;
    V.all = testfed_dense_data(a, y, VN, VD);
    for (uint32_t k = 0; k < VK; k++)
        if (V.all == NULL || sfl_dataset_columns(V.all, 3 * k, 3, &V.blk[k]) < 0)
            return -1;
    return fx_setup(state);
}

static int vteardown(void **state)
{
    int rc = fx_teardown(state);

    for (uint32_t k = 0; k < VK; k++) {
        agent_vert_free(V.ctx[k]);
        sfl_dataset_free(V.blk[k]);
    }
    sfl_dataset_free(V.all);
    if (strncmp(V.dir, "/tmp/test_vround.", 17) == 0)
        test_sh("rm -rf '%s'", V.dir);
    return rc;
}

/* A vertical spec over the test's data; the reference job of the same. */
static void vspec(sfl_job_spec_t *s, const char *algo, uint32_t deadline_ms,
                  uint32_t max_attempts)
{
    const sfl_algo_t *al = sfl_algo_find(algo);

    fx_job_spec(s, deadline_ms, max_attempts);
    snprintf(s->algorithm, sizeof(s->algorithm), "%s", algo);
    memset(&s->params, 0, sizeof(s->params));
    s->dimension = VD;
    s->rows = VN;
    s->cohort_size = s->min_quorum = VK;
    s->over_selection = 0;
    s->rounds = VR;
    s->iterations_per_round = VS;
    assert_non_null(al);
    assert_int_equal(sfl_problem_init(&V.prob, &sfl_loss_lsq, VD, 0), 0);
}

/* After the spec's parameters are final. */
static void vref(const sfl_job_spec_t *s)
{
    const sfl_algo_t *al = sfl_algo_find(s->algorithm);

    assert_int_equal(sfl_algo_params_from_list(al, &s->params, &V.p), 0);
    V.vj = (sfl_vjob_t){.algo = al, .p = &V.p, .prob = &V.prob, .nrows = VN, .nclients = VK,
                        .iters = (uint64_t)VR * VS, .seed = s->seed};
    V.nb = al->vertical->bcast_len(&V.vj);
    V.nm = al->vertical->msg_len(&V.vj);
    assert_true(V.nb <= VMAX && V.nm <= VMAX + 1);
    memset(V.x, 0, sizeof(V.x));
    memset(V.b, 0, sizeof(V.b));
}

static uint64_t create(const sfl_job_spec_t *s)
{
    sfl_job_status_t js;
    int status;

    js = fx_create_job(&F.admin, s, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    return js.job_id;
}

static sfl_job_status_t job_status(uint64_t id)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    sfl_job_status_t js = *fx_find_job(st, id);

    sfl_msg_status_free(st);
    return js;
}

/* Polls Status until job id is in state (0: any) with at least committed
 * rounds. */
static sfl_job_status_t wait_job(uint64_t id, sfl_job_state_t state, uint64_t committed)
{
    for (;;) {
        sfl_job_status_t js = job_status(id);

        if ((state == 0 || js.state == state) && js.committed_round >= committed)
            return js;
        if (F.timed_out)
            fail_msg("watchdog: job %llu state %d committed %llu", (unsigned long long)id,
                     js.state, (unsigned long long)js.committed_round);
        fx_run_for(20);
    }
}

static void join_block(tagent_t *t, const char *who, uint32_t first, const uint8_t *ids)
{
    sfl_dataset_summary_t ds;

    fx_block_summary(&ds, VN, first, 3, ids);
    fx_agent_join_ds(t, who, &ds);
}

static void assert_near(const double *got, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-12 * (1.0 + fabs(want[i])))
            fail_msg("entry %zu: %.17g, want %.17g", i, got[i], want[i]);
}

static int nonzero(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] != 0.0)
            return 1;
    return 0;
}

/* The next stream message of t is the task of (job, round, attempt), a
 * vertical one of the test's job whose broadcast is V.b. Returns owned. */
static sfl_task_t *expect_task(tagent_t *t, uint64_t job, uint64_t round, uint32_t attempt,
                               uint64_t first)
{
    sfl_task_t *task = NULL;
    sfl_wait_t w;
    sfl_vstep_t s = {0};
    double b[VMAX];
    int kind = fx_next_sub(t, &task, &w, &s);

    if (kind == 's') {
        uint64_t it = s.iteration;

        sfl_msg_vstep_clear(&s);
        fail_msg("a step (iteration %llu) instead of the task of round %llu attempt %u",
                 (unsigned long long)it, (unsigned long long)round, attempt);
    }
    if (kind == 'w')
        fail_msg("a Wait (%s) instead of the task of round %llu", w.reason,
                 (unsigned long long)round);
    assert_int_equal(task->job_id, job);
    assert_int_equal(task->round, round);
    assert_int_equal(task->attempt, attempt);
    assert_string_equal(task->algorithm, V.vj.algo->name);
    assert_int_equal(task->dimension, VD);
    assert_int_equal(task->rows, VN);
    assert_int_equal(task->clients, VK);
    assert_int_equal(task->iterations, (uint64_t)VR * VS);
    assert_int_equal(task->first_iteration, first);
    assert_int_equal(task->round_iterations, VS);
    assert_non_null(task->model);
    assert_int_equal(task->model->dim, V.nb);
    memset(b, 0, sizeof(b));
    sfl_spvec_scatter(task->model, b);
    assert_near(b, V.b, V.nb);
    return task;
}

/* The next stream message of t is the step of iteration it, broadcast V.b. */
static void expect_step(tagent_t *t, uint64_t job, uint64_t round, uint32_t attempt,
                        uint64_t it)
{
    sfl_task_t *task = NULL;
    sfl_wait_t w;
    sfl_vstep_t s = {0};
    int kind = fx_next_sub(t, &task, &w, &s);

    if (kind == 't') {
        uint64_t r = task->round;

        sfl_msg_task_free(task);
        fail_msg("a task (round %llu) instead of the step of iteration %llu",
                 (unsigned long long)r, (unsigned long long)it);
    }
    if (kind == 'w')
        fail_msg("a Wait (%s) instead of the step of iteration %llu", w.reason,
                 (unsigned long long)it);
    assert_int_equal(s.job_id, job);
    assert_int_equal(s.round, round);
    assert_int_equal(s.attempt, attempt);
    assert_int_equal(s.iteration, it);
    assert_int_equal(s.nbcast, V.nb);
    assert_near(s.bcast, V.b, V.nb);
    sfl_msg_vstep_clear(&s);
}

/* Block k's agent takes the task's round. */
static void begin(uint32_t k, const sfl_task_t *t)
{
    agent_vert_cfg_t cfg = {.data = V.blk[k], .first_column = 1 + 3 * k,
                            .state_dir = V.agdir[k], .test_noise = 1};

    if (agent_vert_begin(&V.ctx[k], t, &cfg) < 0)
        fail_msg("agent_vert_begin: %s", sfl_last_error());
}

/* Block k's answer to iteration it of broadcast V.b: the wire bytes
 * (owned, sfl__free) and, into vals, the values they carry. */
static uint8_t *answer(uint32_t k, uint64_t it, size_t *len, double *vals)
{
    uint8_t *msg = NULL;

    if (agent_vert_step(V.ctx[k], it, V.b, V.nb, &msg, len) < 0)
        fail_msg("agent_vert_step: %s", sfl_last_error());
    assert_int_equal(sfl_msg_values_decode(msg, *len, V.nm, V.vj.algo->vertical->msg_ints, vals),
                     0);
    return msg;
}

/* SubmitStep on t's connection for agent_id: the ack (fails on a gRPC
 * error). */
static sfl_ack_t submit_obj(tagent_t *t, uint64_t agent_id, uint64_t job, uint64_t round,
                            uint32_t attempt, uint64_t it, const uint8_t *msg, size_t len,
                            double objective, uint64_t rows)
{
    sfl_step_answer_t m = {.job_id = job, .round = round, .attempt = attempt,
                           .agent_id = agent_id, .iteration = it, .msg = (uint8_t *)msg,
                           .msg_len = len, .objective = objective, .objective_rows = rows};
    sfl_ack_t ack;
    char why[256];
    int status = fx_submit_step(t, &m, &ack, why, sizeof(why));

    if (status != 0)
        fail_msg("SubmitStep: gRPC %d %s", status, why);
    return ack;
}

static sfl_ack_t submit(tagent_t *t, uint64_t agent_id, uint64_t job, uint64_t round,
                        uint32_t attempt, uint64_t it, const uint8_t *msg, size_t len)
{
    return submit_obj(t, agent_id, job, round, attempt, it, msg, len, 0, 0);
}

/* Iteration it from both blocks, accepted, each with what the agent puts
 * beside its message (the objective, at a round's first iteration); the
 * reference server step on their answers moves V.x and V.b. */
static void iterate(uint64_t job, uint64_t round, uint32_t attempt, uint64_t it)
{
    double vals[VK][VMAX + 1];
    const double *rows[VK];

    for (uint32_t k = 0; k < VK; k++) {
        size_t len;
        uint8_t *msg = answer(k, it, &len, vals[k]);
        double obj;
        uint64_t orows;
        sfl_ack_t ack;

        agent_vert_objective(V.ctx[k], it, &obj, &orows);
        ack = submit_obj(&F.ag[k], F.ag[k].agent_id, job, round, attempt, it, msg, len, obj,
                         orows);
        sfl__free(msg);
        if (ack.status != SFL_ACK_ACCEPTED)
            fail_msg("iteration %llu block %u: ack %d %s", (unsigned long long)it, k,
                     ack.status, ack.reason);
        rows[k] = vals[k];
    }
    assert_int_equal(V.vj.algo->vertical->server_step(&V.vj, it, rows, V.x, V.b), 0);
}

/* Joins a1 and a2 with the job's two blocks, subscribes them and takes
 * round 1's task at both; each agent begins it. */
static void open_round_one(uint64_t job)
{
    sfl_task_t *t[VK];

    join_block(&F.ag[0], "agent/a1", 1, ids_a);
    join_block(&F.ag[1], "agent/a2", 4, ids_a);
    fx_agent_subscribe(&F.ag[0]);
    fx_agent_subscribe(&F.ag[1]);
    for (uint32_t k = 0; k < VK; k++)
        t[k] = expect_task(&F.ag[k], job, 1, 0, 0);
    /* one signed task for the attempt */
    assert_int_equal(t[0]->signed_len, t[1]->signed_len);
    assert_memory_equal(t[0]->signed_bytes, t[1]->signed_bytes, t[0]->signed_len);
    for (uint32_t k = 0; k < VK; k++) {
        begin(k, t[k]);
        sfl_msg_task_free(t[k]);
    }
}

/* A bcfw job on the fixture, round 1 open at both blocks. */
static uint64_t start_bcfw(sfl_job_spec_t *spec, uint32_t deadline_ms, uint32_t attempts)
{
    uint64_t job;

    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    vspec(spec, "bcfw", deadline_ms, attempts);
    vref(spec);
    job = create(spec);
    open_round_one(job);
    return job;
}

/* The next stream message of t is the task of round 1, attempt 0 again (a
 * reconnect), broadcast the round's start (zeros). */
static void expect_task_again(tagent_t *t, uint64_t job)
{
    sfl_task_t *task = NULL;
    sfl_wait_t w;
    sfl_vstep_t st = {0};

    assert_int_equal(fx_next_sub(t, &task, &w, &st), 't');
    assert_true(task->job_id == job && task->round == 1 && task->attempt == 0);
    assert_int_equal(task->first_iteration, 0);
    assert_int_equal(task->model->nnz, 0);
    sfl_msg_task_free(task);
}

/* A block holder that subscribes again mid-round gets the round's task and
 * then the step it has not answered; one that answered it gets the task
 * alone, and the next step once the others are in. */
static void test_vround_reconnect(void **state)
{
    sfl_job_spec_t spec;
    double vals[VMAX + 1];
    uint8_t *msg;
    size_t len;
    uint64_t job;
    sfl_ack_t ack;

    (void)state;
    job = start_bcfw(&spec, 60000, 3);
    iterate(job, 1, 0, 0);
    for (uint32_t k = 0; k < VK; k++)
        expect_step(&F.ag[k], job, 1, 0, 1);
    /* a1 answers iteration 1, a2 not yet */
    msg = answer(0, 1, &len, vals);
    ack = submit(&F.ag[0], F.ag[0].agent_id, job, 1, 0, 1, msg, len);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    /* both subscribe again */
    fx_agent_subscribe(&F.ag[1]);
    expect_task_again(&F.ag[1], job);
    expect_step(&F.ag[1], job, 1, 0, 1);
    fx_agent_subscribe(&F.ag[0]);
    expect_task_again(&F.ag[0], job);
    /* a1's answer again: the same bytes, a duplicate */
    ack = submit(&F.ag[0], F.ag[0].agent_id, job, 1, 0, 1, msg, len);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);
    {
        double v2[VK][VMAX + 1];
        const double *rows[VK] = {v2[0], v2[1]};
        uint8_t *m2 = answer(1, 1, &len, v2[1]);

        memcpy(v2[0], vals, sizeof(vals));
        ack = submit(&F.ag[1], F.ag[1].agent_id, job, 1, 0, 1, m2, len);
        assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
        sfl__free(m2);
        assert_int_equal(V.vj.algo->vertical->server_step(&V.vj, 1, rows, V.x, V.b), 0);
    }
    sfl__free(msg);
    for (uint32_t k = 0; k < VK; k++)
        expect_step(&F.ag[k], job, 1, 0, 2);
}

/* Two blocks through two rounds of three iterations: tasks, steps with the
 * server step's broadcast, commits, the next round from where the last one
 * ended, the model x exported. */
/* The objective at the model whose margins are b (exact for bcfw: b = A x),
 * on the pooled data: mean_j l(b_j, y_j). */
static double objective_at(const double *b)
{
    double s = 0.0, dl;

    for (uint32_t j = 0; j < VN; j++)
        s += V.prob.loss->margin_loss(b[j], V.all->y[j], &dl);
    return s / VN;
}

static uint32_t nnz_of(const double *x, size_t n)
{
    uint32_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += x[i] != 0;
    return k;
}

static void test_vround_two_rounds(void **state)
{
    double x1[VD], got[VD], f[VR];
    uint64_t bytes_up = 0;
    char want[96];
    const char *m;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_job_history_t *h;
    sfl_export_t *e;
    sfl_task_t *t;
    uint64_t job;
    int status;

    (void)state;
    job = start_bcfw(&spec, 60000, 3); /* the deadline is never reached */
    assert_int_equal(V.nb, VN);        /* bcfw: the feature itself, n values */

    f[0] = objective_at(V.b); /* round 1 starts at x = 0, b = 0 */
    iterate(job, 1, 0, 0);
    assert_true(nonzero(V.b, V.nb)); /* the steps below carry something */
    for (uint32_t k = 0; k < VK; k++)
        expect_step(&F.ag[k], job, 1, 0, 1);
    js = job_status(job);
    assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
    assert_int_equal(js.iteration, 1);
    assert_int_equal(js.committed_round, 0);
    assert_int_equal(js.privacy_iterations, 0); /* bcfw releases nothing private */
    iterate(job, 1, 0, 1);
    for (uint32_t k = 0; k < VK; k++)
        expect_step(&F.ag[k], job, 1, 0, 2);
    iterate(job, 1, 0, 2);
    memcpy(x1, V.x, sizeof(x1));
    assert_true(nonzero(x1, VD));
    f[1] = objective_at(V.b); /* where round 2 starts */
    assert_true(f[1] < f[0]);

    /* the round's last iteration commits it; round 2 starts at iteration 3
     * from the broadcast it left */
    for (uint32_t k = 0; k < VK; k++) {
        t = expect_task(&F.ag[k], job, 2, 0, VS);
        begin(k, t);
        sfl_msg_task_free(t);
    }
    js = wait_job(job, SFL_JOB_RUNNING, 1);
    assert_int_equal(js.committed_round, 1);
    assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
    assert_int_equal(js.iteration, VS);
    for (uint64_t it = VS; it < 2 * VS; it++) {
        iterate(job, 2, 0, it);
        if (it + 1 < 2 * VS)
            for (uint32_t k = 0; k < VK; k++)
                expect_step(&F.ag[k], job, 2, 0, it + 1);
    }
    js = wait_job(job, SFL_JOB_FINISHED, VR);
    assert_int_equal(js.committed_round, VR);

    /* the model is x alone, as the server step made it */
    e = fx_export_model(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(e->round, VR);
    assert_int_equal(e->dimension, VD);
    assert_int_equal(e->model->dim, VD);
    memset(got, 0, sizeof(got));
    sfl_spvec_scatter(e->model, got);
    assert_near(got, V.x, VD);
    sfl_msg_export_free(e);
    e = fx_export_model(&F.admin, job, 1, &status);
    assert_int_equal(status, 0);
    assert_int_equal(e->model->dim, VD);
    memset(got, 0, sizeof(got));
    sfl_spvec_scatter(e->model, got);
    assert_near(got, x1, VD);
    sfl_msg_export_free(e);

    h = fx_job_history(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(h->n, VR);
    for (uint32_t i = 0; i < VR; i++) {
        assert_int_equal(h->rounds[i].round, i + 1);
        assert_int_equal(h->rounds[i].selected, VK);
        /* every block holder answered every iteration of the round */
        assert_int_equal(h->rounds[i].accepted, VK);
        assert_true(h->rounds[i].bytes_up > 0);
        assert_int_equal(h->rounds[i].m.privacy_iterations, 0);
        assert_true(h->rounds[i].m.bytes_down > 0);
        bytes_up += h->rounds[i].bytes_up;
        /* bcfw's broadcast is the margins A x: the block holders report the
         * objective at the round's starting model, over the job's rows */
        assert_int_equal(h->rounds[i].m.samples, VN);
        assert_true(fabs(h->rounds[i].m.train_loss - f[i]) <= 1e-12 * (1 + fabs(f[i])));
        assert_int_equal(h->rounds[i].m.eval_samples, 0);
    }
    /* the model's nonzeros, as the server step left x (item 7 of issue 24) */
    assert_int_equal(h->rounds[VR - 1].m.model_nnz, nnz_of(V.x, VD));
    assert_int_equal(h->rounds[0].m.model_nnz, nnz_of(x1, VD));
    sfl_msg_history_free(h);
    /* /metrics agrees with the history: one accepted update a block holder
     * a round, not one an iteration, and their bytes */
    m = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    snprintf(want, sizeof(want), "\nsfl_updates_total{verdict=\"accepted\"} %u\n", VK * VR);
    assert_non_null(strstr(m, want));
    snprintf(want, sizeof(want), "\nsfl_update_bytes_total %llu\n", (unsigned long long)bytes_up);
    assert_non_null(strstr(m, want));
    snprintf(want, sizeof(want), "\nsfl_stage_answers_total{verdict=\"accepted\"} %u\n",
             VK * VR * VS);
    assert_non_null(strstr(m, want));
}

/* SubmitStep's verdicts; none of the refused answers reaches the step. */
static void test_vround_verdicts(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1], *a3 = &F.ag[2];
    double vals[VK][VMAX + 1];
    const double *rows[VK] = {vals[0], vals[1]};
    sfl_job_spec_t spec, hspec;
    sfl_step_answer_t m;
    sfl_ack_t ack;
    uint8_t *msg1, *msg2, bad[8 * (VMAX + 1)];
    size_t len1, len2;
    uint64_t job, hjob;
    char why[256];
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    vspec(&spec, "bcfw", 60000, 3); /* never reached */
    vref(&spec);
    job = create(&spec);
    fx_job_spec(&hspec, 60000, 3);
    hjob = create(&hspec); /* horizontal: waits (the agents hold blocks) */
    open_round_one(job);
    msg1 = answer(0, 0, &len1, vals[0]);
    msg2 = answer(1, 0, &len2, vals[1]);

    /* another iteration, another round, a horizontal job, no job */
    ack = submit(a1, a1->agent_id, job, 1, 0, 1, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_WRONG_ROUND);
    assert_non_null(strstr(ack.reason, "iteration 1 is not the one open (0)"));
    ack = submit(a1, a1->agent_id, job, 2, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_WRONG_ROUND);
    ack = submit(a1, a1->agent_id, hjob, 1, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_WRONG_ROUND);
    assert_non_null(strstr(ack.reason, "no vertical job"));
    ack = submit(a1, a1->agent_id, 999, 1, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_WRONG_ROUND);

    /* accepted once, then a duplicate (even with other bytes) */
    ack = submit(a1, a1->agent_id, job, 1, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    assert_int_equal(ack.job_id, job);
    assert_int_equal(ack.round, 1);
    ack = submit(a1, a1->agent_id, job, 1, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);
    ack = submit(a1, a1->agent_id, job, 1, 0, 0, msg2, len2);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);

    /* the wrong length, a value that is not finite */
    ack = submit(a2, a2->agent_id, job, 1, 0, 0, msg2, len2 - 8);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "bytes"));
    memcpy(bad, msg2, len2);
    {
        double nan_ = NAN;

        memcpy(bad + len2 - 8, &nan_, 8); /* the last float64 */
    }
    ack = submit(a2, a2->agent_id, job, 1, 0, 0, bad, len2);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "not finite"));

    /* an agent with a block of the job that was not selected: a3 joins
     * after the round opened */
    join_block(a3, "agent/a3", 1, ids_a);
    ack = submit(a3, a3->agent_id, job, 1, 0, 0, msg1, len1);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "holds no block of this attempt"));

    /* a1 answering as a2: refused at the binding, not a verdict */
    m = (sfl_step_answer_t){.job_id = job, .round = 1, .attempt = 0, .agent_id = a2->agent_id,
                            .iteration = 0, .msg = msg2, .msg_len = len2};
    status = fx_submit_step(a1, &m, &ack, why, sizeof(why));
    assert_int_equal(status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* a2's own answer completes the iteration: the step is the server's on
     * a1's first answer and a2's */
    ack = submit(a2, a2->agent_id, job, 1, 0, 0, msg2, len2);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    assert_int_equal(V.vj.algo->vertical->server_step(&V.vj, 0, rows, V.x, V.b), 0);
    for (uint32_t k = 0; k < VK; k++)
        expect_step(&F.ag[k], job, 1, 0, 1);
    /* iteration 0 is done */
    ack = submit(a2, a2->agent_id, job, 1, 0, 0, msg2, len2);
    assert_int_equal(ack.status, SFL_ACK_WRONG_ROUND);
    sfl__free(msg1);
    sfl__free(msg2);
}

/* Only agents with one of the job's blocks and the sample ids most blocks
 * share are selected; the job says why it waits. */
static void test_vround_selection(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1], *a3 = &F.ag[2];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_task_t *t;
    sfl_wait_t w;
    sfl_vstep_t s;
    uint64_t job;
    char want[128];

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    vspec(&spec, "bcfw", 60000, 3); /* never reached */
    vref(&spec);
    job = create(&spec);
    join_block(a1, "agent/a1", 1, ids_a);
    join_block(a2, "agent/a2", 2, ids_a); /* columns [2, 4]: no block of the job */
    join_block(a3, "agent/a3", 4, ids_b); /* the second block, other samples */
    for (int i = 0; i < 3; i++) {
        fx_agent_subscribe(&F.ag[i]);
        fx_idle_heartbeat(&F.ag[i]);
    }
    snprintf(want, sizeof(want), "1 agent (e.g. %llu) holds other sample ids",
             (unsigned long long)a3->agent_id);
    for (;;) {
        js = job_status(job);
        if (strstr(js.waiting, want) != NULL)
            break;
        if (F.timed_out)
            fail_msg("watchdog: job %llu waits with '%s'", (unsigned long long)job, js.waiting);
        fx_run_for(20);
    }
    assert_non_null(strstr(js.waiting, "selecting 1/2"));
    assert_non_null(strstr(js.waiting, "block [2, 4] is not one of the job's 2 blocks"));
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);
    /* well past select_wait_ms: still nobody has a task */
    fx_run_for(500);
    js = job_status(job);
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);
    for (int i = 0; i < 3; i++)
        while (F.ag[i].seen < F.ag[i].sub.n) {
            memset(&s, 0, sizeof(s));
            if (fx_next_sub(&F.ag[i], &t, &w, &s) != 'w')
                fail_msg("agent a%d got a task or step while the job waits", i + 1);
        }

    /* a2 comes back with the second block and a1's ids: a1 and a2 are the
     * cohort, a3 is left out */
    join_block(a2, "agent/a2", 4, ids_a);
    for (uint32_t k = 0; k < VK; k++) {
        t = expect_task(&F.ag[k], job, 1, 0, 0);
        sfl_msg_task_free(t);
    }
    js = job_status(job);
    assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
    assert_int_equal(js.selected, VK);
    assert_string_equal(js.waiting, "");
    fx_idle_heartbeat(a3);
    fx_run_for(200);
    while (a3->seen < a3->sub.n) {
        memset(&s, 0, sizeof(s));
        if (fx_next_sub(a3, &t, &w, &s) != 'w')
            fail_msg("a3 (other sample ids) got a task or step");
    }
}

/* A private job's ledger: every opened attempt's iterations, in JobStatus
 * at once and in the committed rounds' summaries. */
static void test_vround_privacy_ledger(void **state)
{
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_job_history_t *h;
    sfl_task_t *t;
    uint64_t job;
    double eps = 2.0, spent1;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    vspec(&spec, "dpbcfw", 60000, 3); /* never reached */
    assert_int_equal(sfl_param_list_set(&spec.params, "epsilon", eps), 0);
    assert_int_equal(sfl_param_list_set(&spec.params, "m", 4), 0);
    assert_int_equal(sfl_param_list_set(&spec.params, "dp_noise", 1), 0);
    vref(&spec);
    assert_int_equal(V.nb, 4); /* the sketch: m values */
    job = create(&spec);
    open_round_one(job);

    js = job_status(job);
    assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
    assert_true(js.privacy_epsilon == eps);
    assert_true(fabs(js.privacy_delta - 1.0 / VN) < 1e-15);
    assert_int_equal(js.privacy_iterations, VS);
    assert_true(js.privacy_spent > 0 && js.privacy_spent <= eps);
    spent1 = js.privacy_spent;

    for (uint64_t it = 0; it < VS; it++) {
        iterate(job, 1, 0, it);
        if (it + 1 < VS)
            for (uint32_t k = 0; k < VK; k++)
                expect_step(&F.ag[k], job, 1, 0, it + 1);
    }
    for (uint32_t k = 0; k < VK; k++) {
        t = expect_task(&F.ag[k], job, 2, 0, VS);
        begin(k, t);
        sfl_msg_task_free(t);
    }
    js = wait_job(job, SFL_JOB_RUNNING, 1);
    /* round 2 is open: all T iterations released, the whole budget */
    assert_int_equal(js.privacy_iterations, 2 * VS);
    assert_true(fabs(js.privacy_spent - eps) < 1e-9 * eps);
    assert_true(js.privacy_spent > spent1);
    h = fx_job_history(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(h->n, 1);
    assert_int_equal(h->rounds[0].m.privacy_iterations, VS);
    assert_true(fabs(h->rounds[0].m.privacy_spent - spent1) < 1e-12);
    /* a sketched, noisy broadcast gives no objective: none reported */
    assert_int_equal(h->rounds[0].m.samples, 0);
    assert_true(h->rounds[0].m.privacy_spent_rdp > 0);
    sfl_msg_history_free(h);

    for (uint64_t it = VS; it < 2 * VS; it++) {
        iterate(job, 2, 0, it);
        if (it + 1 < 2 * VS)
            for (uint32_t k = 0; k < VK; k++)
                expect_step(&F.ag[k], job, 2, 0, it + 1);
    }
    js = wait_job(job, SFL_JOB_FINISHED, VR);
    assert_int_equal(js.privacy_iterations, 2 * VS);
    h = fx_job_history(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(h->n, VR);
    assert_int_equal(h->rounds[1].m.privacy_iterations, 2 * VS);
    assert_true(fabs(h->rounds[1].m.privacy_spent - eps) < 1e-9 * eps);
    sfl_msg_history_free(h);
}

/* A message the wire takes but the algorithm refuses (an index outside the
 * sender's block): the iteration never completes, the attempt fails at its
 * deadline, the retry starts from the round's state; nothing commits. */
static void test_vround_hostile_index(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    double vals[VMAX + 1];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_export_t *e;
    sfl_task_t *t;
    sfl_wait_t w;
    sfl_vstep_t s;
    sfl_ack_t ack;
    uint8_t *msg, hostile[8 * (VMAX + 1)];
    size_t len, hlen;
    uint64_t job;
    int status;
    /* a2 holds columns 4..6: column 1 is a1's, 7 is none */
    const double idx[2] = {1, -7};

    (void)state;
    job = start_bcfw(&spec, 1500, 2);
    hlen = sfl_msg_values_bytes(V.nm, 1);
    for (uint32_t attempt = 0; attempt < 2; attempt++) {
        msg = answer(0, 0, &len, vals);
        ack = submit(a1, a1->agent_id, job, 1, attempt, 0, msg, len);
        assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
        sfl__free(msg);
        vals[0] = idx[attempt];
        for (size_t i = 1; i < V.nm; i++)
            vals[i] = 0.25;
        assert_int_equal(sfl_msg_values_encode(vals, V.nm, 1, hostile), 0);
        ack = submit(a2, a2->agent_id, job, 1, attempt, 0, hostile, hlen);
        assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
        js = job_status(job);
        assert_int_equal(js.iteration, 0);
        if (attempt == 1)
            break;
        /* no step: the next message is the retry's task, with the round's
         * broadcast at its start (zeros) */
        for (uint32_t k = 0; k < VK; k++) {
            t = expect_task(&F.ag[k], job, 1, 1, 0);
            begin(k, t);
            sfl_msg_task_free(t);
        }
        js = job_status(job);
        assert_int_equal(js.state, SFL_JOB_RUNNING);
        assert_int_equal(js.committed_round, 0);
        assert_int_equal(js.attempt, 1);
        /* the failed attempt's answer, resent */
        ack = submit(a2, a2->agent_id, job, 1, 0, 0, hostile, hlen);
        assert_int_equal(ack.status, SFL_ACK_LATE);
    }
    /* out of attempts: paused, nothing committed, no step ever sent */
    js = wait_job(job, SFL_JOB_PAUSED, 0);
    assert_int_equal(js.committed_round, 0);
    assert_true(js.error[0] != '\0');
    for (uint32_t k = 0; k < VK; k++)
        while (F.ag[k].seen < F.ag[k].sub.n) {
            memset(&s, 0, sizeof(s));
            if (fx_next_sub(&F.ag[k], &t, &w, &s) == 's')
                fail_msg("a step after a refused iteration");
            sfl_msg_task_free(t);
        }
    e = fx_export_model(&F.admin, job, 0, &status);
    assert_null(e);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vround_two_rounds, vsetup, vteardown),
        cmocka_unit_test_setup_teardown(test_vround_verdicts, vsetup, vteardown),
        cmocka_unit_test_setup_teardown(test_vround_reconnect, vsetup, vteardown),
        cmocka_unit_test_setup_teardown(test_vround_selection, vsetup, vteardown),
        cmocka_unit_test_setup_teardown(test_vround_privacy_ledger, vsetup, vteardown),
        cmocka_unit_test_setup_teardown(test_vround_hostile_index, vsetup, vteardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

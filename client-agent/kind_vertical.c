/* The vertical round kind (docs/protocol.md, "Vertical jobs"): a task
 * opens the round over this agent's column block (vblock.h: its checks, the
 * privacy ledger, the block's messages) and answers its first iteration;
 * every VerticalStep of the round in hand is answered with SubmitStep.
 * Its state: the round, the answer in flight and the last answer's bytes. */
#include "agent_int.h"

#include <errno.h>
#include <inttypes.h>

#include "vblock.h"
#include "sfl/core/alloc.h"

#define PATH_STEP "/sfl.v1.Coordinator/SubmitStep"

typedef struct vert_state {
    agent_vert_t *vert;         /* the round in hand, or NULL */
    sfl_grpc_call_t *step_call; /* the last answer in flight */
    uint8_t *vlast;             /* the last answer's bytes, sent again (never
                                   recomputed) if its iteration is asked again */
    size_t vlast_len;
    uint64_t vlast_it;
} vert_state_t;

static void on_step(sfl_grpc_call_t *call, int status, const char *message,
                    const uint8_t *resp, size_t len, void *ud)
{
    agent_ctx_t *a = ud;
    vert_state_t *v = agent__kind_state(a, &agent_shape_vertical);
    sfl_ack_t ack;
    char q[300], sq[80];

    if (call == v->step_call)
        v->step_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        agent__say(a, SFL_LOG_WARN, "step_failed", "status=%s message=%s",
            agent__status_name(sq, sizeof(sq), status), agent__quote(q, sizeof(q), message));
        return;
    }
    if (sfl_msg_ack_unpack(resp, len, NULL, &ack) < 0) {
        agent__say(a, SFL_LOG_WARN, "step_failed", "error=%s",
            agent__quote(q, sizeof(q), sfl_last_error()));
        return;
    }
    agent__count_ack(a, &ack);
    if (ack.status != SFL_ACK_ACCEPTED)
        agent__say(a, SFL_LOG_WARN, "step_ack",
            "job=%" PRIu64 " round=%" PRIu64 " status=%s reason=%s",
            ack.job_id, ack.round, sfl_msg_ack_name(ack.status),
            agent__quote(q, sizeof(q), ack.reason));
}

/* Sends the answer to iteration it: the bytes of the last answer when it
 * is that one's (a reconnect), else a fresh one (never twice). */
static void vert_answer(agent_ctx_t *a, vert_state_t *v, uint64_t it, const double *b, size_t nb)
{
    sfl_step_answer_t m = {0};
    uint8_t *msg = NULL, *buf = NULL;
    size_t len = 0, blen = 0;
    uint64_t first;
    char q[300];
    int rc;

    if (a->link == NULL)
        return;
    agent_vert_round(v->vert, &m.job_id, &m.round, &m.attempt, &first);
    if (v->vlast != NULL && v->vlast_it == it) {
        msg = v->vlast;
        len = v->vlast_len;
    } else if ((rc = agent_vert_step(v->vert, it, b, nb, &msg, &len)) < 0) {
        agent__say(a, SFL_LOG_WARN, "step_refused",
            "job=%" PRIu64 " round=%" PRIu64 " iteration=%" PRIu64
            " error=%s", m.job_id, m.round, it, agent__quote(q, sizeof(q), sfl_last_error()));
        return;
    } else {
        sfl__free(v->vlast);
        v->vlast = msg;
        v->vlast_len = len;
        v->vlast_it = it;
    }
    m.agent_id = a->agent_id;
    m.iteration = it;
    m.msg = msg;
    m.msg_len = len;
    agent_vert_objective(v->vert, it, &m.objective, &m.objective_rows);
    if ((rc = sfl_msg_step_answer_pack(&m, &buf, &blen)) < 0 ||
        (rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_STEP, buf, blen,
                                  (uint32_t)a->cfg.connect_timeout_ms, on_step, a,
                                  &v->step_call)) < 0) {
        v->step_call = NULL;
        agent__say(a, SFL_LOG_WARN, "step_failed", "job=%" PRIu64 " iteration=%" PRIu64 " error=%s",
            m.job_id, it, agent__quote(q, sizeof(q), sfl_last_error()));
    }
    sfl_msg_buf_free(buf);
    a->stats.steps++;
}

static agent_state_t vert_task(agent_ctx_t *a, void *st, sfl_task_t *t, agent_state_t from)
{
    vert_state_t *v = st;
    agent_vert_cfg_t vc = {a->data, a->cfg.block_first, a->cfg.state_dir, a->cfg.max_epsilon,
                           (int)a->cfg.dp_test_noise};
    double *b = NULL;
    int rc;

    if (a->cfg.block_first == 0) {
        agent__refuse(a, t,
            "a vertical task, but this agent holds whole rows (no block configured)");
        return from;
    }
    rc = agent_vert_begin(&v->vert, t, &vc);
    if (rc == -EEXIST) {
        agent__say(a, SFL_LOG_DEBUG, "vertical_round_known", "job=%" PRIu64 " round=%" PRIu64
            " attempt=%u", t->job_id, t->round, t->attempt);
        sfl_msg_task_free(t);
        return from;
    }
    if (rc < 0) {
        agent__refuse(a, t, sfl_last_error());
        return from;
    }
    sfl__free(v->vlast);
    v->vlast = NULL;
    agent__say(a, SFL_LOG_DEBUG, "vertical_round", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u "
        "iterations=%" PRIu64 "+%u of %" PRIu64 " clients=%u", t->job_id, t->round, t->attempt,
        t->first_iteration, t->round_iterations, t->iterations, t->clients);
    if ((b = sfl__calloc(t->model->dim, sizeof(double))) != NULL) {
        sfl_spvec_scatter(t->model, b);
        vert_answer(a, v, t->first_iteration, b, t->model->dim);
    }
    sfl__free(b);
    sfl_msg_task_free(t);
    return from;
}

static void vert_stage(agent_ctx_t *a, void *st, const agent_stage_t *m)
{
    vert_state_t *v = st;
    const sfl_vstep_t *s = m->vstep;
    uint64_t job = 0, round = 0, first;
    uint32_t attempt = 0;

    if (v->vert != NULL)
        agent_vert_round(v->vert, &job, &round, &attempt, &first);
    if (v->vert == NULL || s->job_id != job || s->round != round || s->attempt != attempt) {
        agent__say(a, SFL_LOG_WARN, "step_ignored", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u "
            "iteration=%" PRIu64 " reason=\"not the vertical round in hand\"", s->job_id,
            s->round, s->attempt, s->iteration);
        return;
    }
    vert_answer(a, v, s->iteration, s->bcast, s->nbcast);
}


/* A column block (block_first set): its width is the configuration's (a
 * LibSVM file need not use the last column), its rows aligned by sample
 * id; Join says so. */
static int vert_setup(agent_ctx_t *a, void *st)
{
    int rc;

    (void)st;
    if (a->cfg.block_first == 0)
        return 0;
    if (a->data->X->ncols > a->cfg.block_cols)
        return sfl__fail(SFL_EDIM, "data has %u columns, block says %u", a->data->X->ncols,
                         a->cfg.block_cols);
    if ((rc = sfl_dataset_set_ncols(a->data, a->cfg.block_cols)) < 0 ||
        (rc = agent_vert_ids_hash(a->cfg.ids_file, a->data->X->nrows, a->summary.ids_hash)) < 0)
        return rc;
    a->summary.dimension = a->cfg.block_cols;
    a->summary.first_column = a->cfg.block_first;
    a->summary.has_ids = 1;
    return 0;
}

static void vert_started(agent_ctx_t *a, void *st)
{
    (void)st;
    if (a->cfg.dp_test_noise)
        agent__say(a, SFL_LOG_WARN, "dp_test_noise", "%s", "reason=\"privacy noise from the "
                   "job's seed, as sfl-sim draws it: nothing this agent sends in a private job "
                   "is private; tests only\"");
    if (a->cfg.block_first != 0)
        agent__say(a, SFL_LOG_INFO, "block", "first_column=%u columns=%u ids_file=%s",
                   a->cfg.block_first, a->cfg.block_cols, a->cfg.ids_file);
}

/* a task with rows: a vertical job's */
static int vert_claims(const sfl_task_t *t)
{
    return t->rows > 0;
}

/* alive while it waits for the other blocks */
static int vert_in_round(const void *st, sfl_heartbeat_req_t *r)
{
    const vert_state_t *v = st;
    uint64_t first;

    if (v->vert == NULL)
        return 0;
    agent_vert_round(v->vert, &r->job_id, &r->round, &r->attempt, &first);
    r->phase = SFL_PHASE_TRAINING;
    return 1;
}

static void vert_unlink(void *st, int cancel)
{
    vert_state_t *v = st;

    if (cancel && v->step_call != NULL)
        sfl_grpc_cancel(v->step_call);
    v->step_call = NULL;
}

static void vert_close(void *st)
{
    vert_state_t *v = st;

    agent_vert_free(v->vert);
    sfl__free(v->vlast);
}

const agent_shape_t agent_shape_vertical = {
    .name = "vertical",
    .job_kind = "vertical",
    .state_size = sizeof(vert_state_t),
    .setup = vert_setup,
    .started = vert_started,
    .claims = vert_claims,
    .task = vert_task,
    .stage_kind = 's',
    .stage = vert_stage,
    .in_round = vert_in_round,
    .unlink = vert_unlink,
    .close = vert_close,
};

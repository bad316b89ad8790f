/* The secure aggregation round kind (update mode 2; docs/security.md,
 * docs/protocol.md "Update mode 2"): a task sends the round's keys at once
 * (sagent.h's client), its work trains (or, in a statistics round, takes
 * the moments: kind_stats.c) on the thread pool, and the round's five
 * stages are answered with SubmitSecAgg as they come. Its state: the
 * round's client, the answer in flight and the job's state (the last round
 * taken, the error-feedback residual), on disk too. */
#include "agent_int.h"

#include <inttypes.h>
#include <signal.h>
#include <unistd.h>

#include "sagent.h"

#define PATH_SECAGG "/sfl.v1.Coordinator/SubmitSecAgg"

typedef struct sa_state {
    agent_sa_t *sa;           /* the round in hand, or NULL */
    sfl_grpc_call_t *sa_call; /* the last answer in flight */
    agent_sa_state_t sa_st;   /* the job's, as on disk */
} sa_state_t;

static void on_sa(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                  size_t len, void *ud)
{
    agent_ctx_t *a = ud;
    sa_state_t *s = agent__kind_state(a, &agent_shape_secagg);
    sfl_ack_t ack;
    char q[300], sq[80];

    if (call == s->sa_call)
        s->sa_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        agent__say(a, SFL_LOG_WARN, "secagg_failed", "status=%s message=%s",
            agent__status_name(sq, sizeof(sq), status), agent__quote(q, sizeof(q), message));
        return;
    }
    if (sfl_msg_ack_unpack(resp, len, NULL, &ack) < 0)
        return;
    agent__count_ack(a, &ack);
    if (ack.status != SFL_ACK_ACCEPTED)
        agent__say(a, SFL_LOG_WARN, "secagg_ack",
            "job=%" PRIu64 " round=%" PRIu64 " status=%s reason=%s",
            ack.job_id, ack.round, sfl_msg_ack_name(ack.status),
            agent__quote(q, sizeof(q), ack.reason));
}

/* The round's answer to `stage` buf (taken), or its failure: the client
 * aborted. */
static void sa_send(agent_ctx_t *a, sa_state_t *s, int rc, uint8_t *buf, size_t len, uint32_t stage,
                    const char *what)
{
    char q[300];

    if (rc == 0 && buf != NULL && a->cfg.secagg_test_stop && stage >= a->cfg.secagg_test_stop) {
        /* a client that drops out: gone, at once */
        agent__say(a, SFL_LOG_INFO, "secagg_test_stop", "stage=%u", stage);
        fflush(a->log);
        (void)kill(getpid(), SIGKILL);
    }
    if (rc < 0) {
        agent__say(a, SFL_LOG_WARN, "secagg_abort", "during=%s error=%s", what,
            agent__quote(q, sizeof(q), sfl_last_error()));
        agent_sa_free(s->sa);
        s->sa = NULL;
    } else if (buf != NULL && a->link != NULL &&
               sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_SECAGG, buf, len,
                                   (uint32_t)a->cfg.connect_timeout_ms, on_sa, a,
                                   &s->sa_call) < 0) {
        s->sa_call = NULL;
        agent__say(a, SFL_LOG_WARN, "secagg_failed", "during=%s error=%s", what,
            agent__quote(q, sizeof(q), sfl_last_error()));
    }
    sfl_msg_buf_free(buf);
}

/* A mode-2 task: its keys at once, then the training. */
static agent_state_t sa_task(agent_ctx_t *a, void *st, sfl_task_t *t, agent_state_t from)
{
    sa_state_t *s = st;
    sfl_sa_policy_t pol;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if ((rc = agent_task_check(t, a->data)) < 0) {
        agent__refuse(a, t, sfl_last_error());
        return from;
    }
    if (s->sa != NULL) {
        uint64_t job, round;
        uint32_t attempt;

        agent_sa_round(s->sa, &job, &round, &attempt);
        if (job == t->job_id && round == t->round && attempt == t->attempt) {
            /* the task again after a reconnect: the round is in hand (a
             * stage missed meanwhile makes it drop out, never start over
             * with new keys) */
            sfl_msg_task_free(t);
            return from;
        }
    }
    if (from != AGENT_SUBSCRIBED) {
        agent__refuse(a, t, "busy: a secure aggregation round needs the agent from its start");
        return from;
    }
    if (t->model == NULL) {
        agent__refuse(a, t, "secure aggregation: the task has no model");
        return from;
    }
    if ((s->sa_st.job != t->job_id || s->sa_st.d != t->model->dim) &&
        agent_sa_state_load(a->cfg.state_dir, t->job_id, t->model->dim, &s->sa_st) < 0) {
        agent__refuse(a, t, sfl_last_error());
        return from;
    }
    /* none taken yet: any round goes, round 0 attempt 0 (a statistics
     * round's first) too; after one, only a later (round, attempt) */
    if (s->sa_st.taken && (t->round < s->sa_st.round ||
                           (t->round == s->sa_st.round && t->attempt <= s->sa_st.attempt))) {
        agent__refuse(a, t, "a secure aggregation round not after the last one taken (a replay)");
        return from;
    }
    agent_sa_free(s->sa);
    s->sa = NULL;
    pol = (sfl_sa_policy_t){.min_n = (uint32_t)a->cfg.secagg_min_cohort,
                            .min_t = (uint32_t)a->cfg.secagg_min_threshold,
                            .min_degree = (uint32_t)a->cfg.secagg_min_degree,
                            .max_colluders =
                                a->cfg.secagg_max_colluders == AGENT_COLLUDERS_THIRD
                                    ? SFL_SA_COLLUDERS_THIRD
                                    : (uint32_t)a->cfg.secagg_max_colluders};
    rc = agent_sa_begin(t, a->agent_id, a->id, &pol, &s->sa, &buf, &len);
    if (rc < 0) {
        agent__refuse(a, t, sfl_last_error());
        return from;
    }
    /* on disk before the keys go out: after a restart the round is still
     * taken */
    s->sa_st.round = t->round;
    s->sa_st.attempt = t->attempt;
    if (agent_sa_state_save(a->cfg.state_dir, &s->sa_st) < 0) {
        agent__refuse(a, t, sfl_last_error());
        sfl_msg_buf_free(buf);
        agent_sa_free(s->sa);
        s->sa = NULL;
        return from;
    }
    if (a->cfg.secagg_test_weight) {
        agent_sa_test_weight(s->sa, (double)a->cfg.secagg_test_weight);
        agent__say(a, SFL_LOG_WARN, "secagg_test_weight", "weight=%" PRIu64,
            a->cfg.secagg_test_weight);
    }
    sa_send(a, s, 0, buf, len, 1, "keys");
    agent__say(a, SFL_LOG_DEBUG, "secagg_round",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u members=%u "
        "threshold=%u degree=%u", t->job_id, t->round, t->attempt, t->secagg->nmembers,
        t->secagg->threshold, t->secagg->degree);
    return agent__work_start(a, &agent_shape_secagg, t) == 0 ? AGENT_TRAINING : from;
}

static void sa_stage(agent_ctx_t *a, void *state, const agent_stage_t *m)
{
    sa_state_t *s = state;
    const sfl_msg_sa_stage_t *st = m->sa;
    uint64_t job = 0, round = 0;
    uint32_t attempt = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (s->sa != NULL)
        agent_sa_round(s->sa, &job, &round, &attempt);
    if (s->sa == NULL || st->job_id != job || st->round != round || st->attempt != attempt) {
        agent__say(a, SFL_LOG_WARN, "secagg_ignored", "job=%" PRIu64 " round=%" PRIu64 " stage=%u "
            "reason=\"not the round in hand\"", st->job_id, st->round, st->stage);
        return;
    }
    rc = agent_sa_stage(s->sa, st, &buf, &len);
    sa_send(a, s, rc, buf, len, st->stage, "a stage");
    if (rc == 0 && st->stage == 5) {
        agent_sa_free(s->sa); /* released: the round is over for it */
        s->sa = NULL;
    }
}

/* The training of a mode-2 round ended: its input, to the client. */
static void sa_done(agent_ctx_t *a, sa_state_t *s, agent_work_t *w)
{
    uint64_t job = 0, round = 0;
    uint32_t attempt = 0, d;
    uint8_t *buf = NULL;
    size_t len = 0;
    char q[300];
    int rc;

    if (s->sa != NULL)
        agent_sa_round(s->sa, &job, &round, &attempt);
    if (w->rc < 0 || w->aborted || s->sa == NULL || job != w->task->job_id ||
        round != w->task->round || attempt != w->task->attempt) {
        agent__say(a, w->rc < 0 ? SFL_LOG_ERROR : SFL_LOG_INFO, "training_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " error=%s", w->task->job_id, w->task->round,
            agent__quote(q, sizeof(q), w->rc < 0 ? w->err : "the secure aggregation round ended"));
        agent__work_free(w);
        return;
    }
    d = agent_sa_dim(s->sa);
    a->stats.trained++;
    /* a statistics round has no residual (sagent.h): the job's stays */
    if (s->sa_st.job != job || (!agent_sa_stats(s->sa) && s->sa_st.d != d))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: the job's state is not loaded");
    else if (w->update == NULL)
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: the work made no update");
    else
        rc = agent_sa_update(s->sa, w->update, w->samples, &w->rep, s->sa_st.resid, &buf,
                             &len);
    /* the residual on disk before the input goes out */
    if (rc == 0 && (rc = agent_sa_state_save(a->cfg.state_dir, &s->sa_st)) < 0) {
        sfl_msg_buf_free(buf);
        buf = NULL;
    }
    agent__say(a, SFL_LOG_DEBUG, "trained",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u ms=%" PRIu64
        " mode=secagg", w->task->job_id, w->task->round, w->task->attempt,
        uv_now(a->loop) - w->started_ms);
    sa_send(a, s, rc, buf, len, 3, "the input");
    agent__work_free(w);
}


static int sa_claims(const sfl_task_t *t)
{
    return t->update_mode == SFL_UPDATE_MODE_SECURE_AGG;
}

/* a statistics round trains nothing: the client state stays as it is */
static int sa_trains(const sfl_task_t *t)
{
    return !t->statistics;
}

/* The update for the secure sum: the raw moments (a statistics round;
 * sa_done encodes them), else the client round on the job's rows. */
static void sa_work(agent_ctx_t *a, agent_work_t *w)
{
    const sfl_dataset_t *data, *eval;

    if (w->task->statistics) {
        w->rc = agent_stats_moments(w->task, a->data, &w->update);
        w->samples = a->data->X->nrows;
        return;
    }
    if ((w->rc = agent__std_data(a, w->task, &data, &eval)) < 0)
        return;
    w->rc = agent__train_update(w->task, data, eval, w->agent_id, &a->ws, &w->cs, &w->update,
                                &w->rep);
    w->samples = data->X->nrows;
}

static agent_state_t sa_trained(agent_ctx_t *a, void *st, agent_work_t *w, agent_state_t from)
{
    sa_done(a, st, w);
    return from == AGENT_TRAINING ? agent__settle(a) : from;
}

/* alive between its stages */
static int sa_in_round(const void *st, sfl_heartbeat_req_t *r)
{
    const sa_state_t *s = st;

    if (s->sa == NULL)
        return 0;
    agent_sa_round(s->sa, &r->job_id, &r->round, &r->attempt);
    r->phase = SFL_PHASE_UPLOADING;
    return 1;
}

static void sa_unlink(void *st, int cancel)
{
    sa_state_t *s = st;

    if (cancel && s->sa_call != NULL)
        sfl_grpc_cancel(s->sa_call);
    s->sa_call = NULL;
}

static void sa_close(void *st)
{
    sa_state_t *s = st;

    agent_sa_free(s->sa);
    agent_sa_state_clear(&s->sa_st);
}

const agent_shape_t agent_shape_secagg = {
    .name = "secagg",
    .job_kind = "secure_aggregation",
    .state_size = sizeof(sa_state_t),
    .claims = sa_claims,
    .task = sa_task,
    .prepare = agent__std_for,
    .trains = sa_trains,
    .work = sa_work,
    .trained = sa_trained,
    .stage_kind = 'a',
    .stage = sa_stage,
    .in_round = sa_in_round,
    .unlink = sa_unlink,
    .close = sa_close,
};

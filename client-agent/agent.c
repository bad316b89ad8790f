/* The agent: one connection at a time to the coordinator, driven by step(),
 * the only place the state changes (STYLE rule 10). Transport, gRPC
 * session and thread-pool callbacks only translate what happened into an
 * event for step().
 *
 * A connection is a gRPC channel (sfl/net/grpcconn.h: the TLS connection and
 * the client session over it, driven there). The agent drops a link by
 * cancelling its calls, detaching it (a->link = NULL) and closing it; the
 * channel frees itself and its session later, from the loop, never inside
 * the session's own callbacks (STYLE rule 6). Call callbacks check that the
 * call is still the one the agent holds, so whatever a session reports
 * while it is torn down is ignored. */
#include "agent.h"
#include "sagent.h"
#include "vblock.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <signal.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/algo/client.h"
#include "sfl/core/file.h"
#include "sfl/data/csv.h"
#include "sfl/model/eval.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/data/libsvm.h"
#include "sfl/core/log.h"
#include "sfl/model/loss.h"
#include "sfl/core/rng.h"
#include "sfl/net/transport.h"

#define PATH_JOIN "/sfl.v1.Coordinator/Join"
#define PATH_SUBSCRIBE "/sfl.v1.Coordinator/Subscribe"
#define PATH_SUBMIT "/sfl.v1.Coordinator/SubmitUpdate"
#define PATH_HEARTBEAT "/sfl.v1.Coordinator/Heartbeat"
#define PATH_STEP "/sfl.v1.Coordinator/SubmitStep"
#define PATH_SECAGG "/sfl.v1.Coordinator/SubmitSecAgg"

/* Longest SubmitUpdate deadline: a slow uplink gets until the task's
 * deadline plus the connect timeout, but never more than this. */
#define SUBMIT_TIMEOUT_MAX_MS 600000u
typedef struct train {
    agent_t *a;
    uv_work_t req;
    sfl_task_t *task;    /* owned */
    uint64_t agent_id;   /* the id the update is sealed for */
    uint64_t started_ms; /* loop time */
    int rc;              /* agent_train_task's result */
    char err[256];       /* its detail (sfl_last_error is per thread) */
    int aborted;         /* HeartbeatReply.abort or stop: drop the result */
    uint8_t *msg;        /* the packed Update */
    size_t len;
    uint32_t tries;      /* submissions started */
    agent_cstate_io_t cs; /* the job's client state in (borrowed) and out */
    /* update mode 2: the update itself, for the round's secure
     * aggregation (sagent.h), instead of a sealed message */
    int mode2;
    sfl_spvec_t *update;
    uint64_t samples;
    sfl_client_report_t rep;
} train_t;

struct agent {
    uv_loop_t *loop;
    agent_config_t cfg;
    FILE *log;
    agent_state_cb observer;
    void *observer_ud;
    agent_state_t state;
    agent_stats_t stats;

    /* Loaded once by agent_new. */
    sfl_dataset_t *data; /* targets as read (original label values) */
    sfl_dataset_t *eval; /* held-out rows (eval_fraction, eval_file) or NULL */
    sfl_dataset_summary_t summary;
    sfl_identity_t *id;
    int id_created;
    uint8_t coord_pk[SFL_SEAL_PK_BYTES]; /* pinned: tasks verify against it */
    sfl_tags_t conditions;
    /* The job of the last verified task, for job_start / job_end lines. */
    struct {
        uint64_t id; /* 0: none */
        uint64_t tasks, last_round;
    } job;
    sfl_tls_t *tls;
    char fpr_hex[65]; /* SHA-256 of our certificate, as sfl-pki fingerprint prints it */
    char host[256], port[16];

    /* The client state of the job trained last (sfl/algo/client.h): the state
     * of the rounds known committed (state_dir/client-state-<job>.bin) and
     * the one a trained round left, pending until a task says whether that
     * round committed (client-state-<job>.pending, its round inside);
     * bytes NULL: none. */
    struct {
        uint64_t job;
        uint8_t *bytes, *pbytes;
        size_t len, plen;
        uint64_t pround;
    } cstate;

    /* Handles, from agent_start to the stopped callback. */
    int started, stopping, closing_handles, handles;
    agent_stopped_cb stopped_cb;
    void *stopped_ud;
    agent_stopped_cb fatal_cb; /* agent_set_fatal */
    void *fatal_ud;
    int failed;                /* the error that stopped the agent by itself */
    uv_timer_t timer;      /* BACKOFF and WAITING delays */
    uv_timer_t hb_timer;   /* heartbeats while joined */
    uv_getaddrinfo_t gai;
    int resolving;

    /* The connection. */
    sfl_grpcconn_t *link;
    int link_opened; /* the current link has opened */
    int nlinks;      /* links not yet closed, detached ones included */
    sfl_grpc_call_t *join_call, *sub_call, *hb_call, *submit_call;
    uint64_t agent_id;
    uint32_t hb_ms;
    uint32_t attempt;          /* reconnects since the last Join */
    uint64_t hb_job, hb_round; /* what the outstanding heartbeat reported */
    uint32_t hb_attempt;

    /* How the Subscribe stream ended, acted on once no task is in hand. */
    int saw_wait;
    uint64_t resub_at; /* loop time of the next Subscribe; 0 = at once */
    int resub_reset;   /* the stream failed: reconnect and rejoin */

    /* Work. */
    train_t *work;     /* on the thread pool */
    train_t *outbox;   /* sealed, being submitted or waiting to be */
    sfl_task_t *next;  /* a verified task that arrived while busy */
    sfl_algo_ws_t ws;  /* touched only by the work in flight */

    /* A vertical round (vblock.h), its answers on the loop. */
    agent_vert_t *vert;
    sfl_grpc_call_t *step_call; /* the last answer in flight */
    uint8_t *vlast;             /* the last answer's bytes, sent again (never
                                   recomputed) if its iteration is asked again */
    size_t vlast_len;
    uint64_t vlast_it;

    /* Update mode 2 (sagent.h): the round's client, and the job's state
     * (the last round taken, the error-feedback residual), on disk too. */
    agent_sa_t *sa;
    sfl_grpc_call_t *sa_call;
    agent_sa_state_t sa_st;

    /* A standardize job's statistics (docs/protocol.md "Statistics
     * round"): the pooled moments of job std.job, as its tasks'
     * moments_hash names them, and the training and held-out rows
     * standardised with them (built by the first work that needs them,
     * on the thread pool; the loop replaces them only with no work in
     * flight). Kept for the session: a new Join brings them again. */
    struct {
        uint64_t job; /* 0: none */
        uint8_t hash[SFL_MSG_HASH_BYTES];
        double *moments;
        double eps;
        sfl_dataset_t *train, *eval;
    } std;
};

typedef enum {
    EV_START,
    EV_STOP,
    EV_TIMER,
    EV_RESOLVED,
    EV_CONNECTED,
    EV_CLOSED,
    EV_JOINED,
    EV_JOIN_FAILED,
    EV_TASK,
    EV_WAIT,
    EV_STREAM_END,
    EV_TRAINED,
    EV_ACK,
    EV_SUBMIT_FAILED,
    EV_STEP,
    EV_SA
} ev_type_t;

typedef struct ev {
    ev_type_t type;
    int status;          /* gRPC status (>= 0) or an sfl / -errno code */
    const char *message; /* detail for status */
    const struct addrinfo *addr;   /* EV_RESOLVED */
    const sfl_join_reply_t *join;  /* EV_JOINED */
    sfl_task_t *task;              /* EV_TASK: step() owns it */
    const sfl_wait_t *wait;        /* EV_WAIT */
    train_t *train;                /* EV_TRAINED: step() owns it */
    const sfl_ack_t *ack;          /* EV_ACK */
    const sfl_vstep_t *vstep;      /* EV_STEP */
    const sfl_msg_sa_stage_t *sa;  /* EV_SA */
} ev_t;

static void step(agent_t *a, const ev_t *e);
static void on_hb_timer(uv_timer_t *t);
static void maybe_finish_stop(agent_t *a);

/* ---- logging ------------------------------------------------------------ */

static void say(const agent_t *a, sfl_log_level_t level, const char *event, const char *fmt,
                ...) SFL_PRINTF(4, 5);
static void say(const agent_t *a, sfl_log_level_t level, const char *event, const char *fmt, ...)
{
    va_list ap;

    if (a->log == NULL || level < a->cfg.log_level)
        return;
    va_start(ap, fmt);
    sfl_log_vwrite(a->log, level, event, fmt, ap);
    va_end(ap);
}

/* s as a log value (sfl_log_quote): peer text may hold anything. */
static const char *quote(char *out, size_t cap, const char *s)
{
    return sfl_log_quote(s, out, cap);
}

/* A gRPC status by name, or an sfl / -errno code's text, quoted. */
static const char *status_name(char *out, size_t cap, int status)
{
    return status < 0 ? quote(out, cap, sfl_strerror(status)) : sfl_grpc_status_name(status);
}

const char *agent_state_name(agent_state_t s)
{
    static const char *const names[] = {"disconnected", "connecting", "joining", "waiting",
                                        "subscribed",   "training",   "submitting", "backoff"};

    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

static uint64_t unix_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- pure pieces ---------------------------------------------------------- */

uint64_t agent_backoff_delay(uint64_t min_ms, uint64_t max_ms, uint32_t n, uint32_t r)
{
    uint64_t hi = min_ms, lo;

    for (uint32_t i = 0; i <= n && hi < max_ms; i++)
        hi = hi > max_ms / 2 ? max_ms : hi * 2;
    if (hi > max_ms)
        hi = max_ms;
    lo = hi / 2 > min_ms ? hi / 2 : min_ms;
    /* r / 2^32 is in [0, 1), so the draw never passes hi. */
    return lo + (uint64_t)((double)(hi - lo + 1) * ((double)r / 4294967296.0));
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

int agent_summarize(const sfl_dataset_t *data, sfl_dataset_summary_t *sum)
{
    uint32_t n = data->X->nrows, k = 0;
    double *v;
    int integral = 1;

    memset(sum, 0, sizeof(*sum));
    sum->samples = n;
    sum->dimension = data->X->ncols;
    if (n == 0)
        return 0;
    v = sfl__mallocarray(n, sizeof(double));
    if (v == NULL)
        return SFL_ENOMEM;
    memcpy(v, data->y, (size_t)n * sizeof(double));
    qsort(v, n, sizeof(double), cmp_double);
    for (uint32_t i = 0; i < n && k <= SFL_MSG_MAX_LABELS; i++) {
        if (k > 0 && v[i] == v[k - 1])
            continue;
        integral &= v[i] == floor(v[i]);
        v[k++] = v[i];
    }
    /* The data says nothing about the task; few integer values are what
     * class labels look like, anything else is reported as regression. */
    if (integral && k <= SFL_MSG_MAX_LABELS) {
        sum->nlabels = k;
        memcpy(sum->labels, v, (size_t)k * sizeof(double));
    }
    sfl__free(v);
    return 0;
}

/* The task as libsfl's client round takes it: algorithm, loss, problem and
 * parameters resolved and checked against what this agent supports. */
typedef struct task_view {
    const sfl_algo_t *algo;
    sfl_algo_params_t params;
    sfl_problem_t prob;
} task_view_t;

static int task_view(const sfl_task_t *t, const sfl_dataset_t *data, task_view_t *v)
{
    const sfl_loss_t *loss = sfl_loss_find(t->loss);
    int rc;

    v->algo = sfl_algo_find(t->algorithm);
    if (v->algo == NULL)
        return sfl__fail(SFL_EUNSUP, "task: unknown algorithm '%s'", t->algorithm);
    if (loss == NULL)
        return sfl__fail(SFL_EUNSUP, "task: unknown loss '%s'", t->loss);
    if (t->update_mode != SFL_UPDATE_MODE_SEALED &&
        !(t->update_mode == SFL_UPDATE_MODE_SECURE_AGG && t->secagg != NULL))
        return sfl__fail(SFL_EUNSUP, "task: update mode %d is not supported by this agent",
                         (int)t->update_mode);
    if (t->dictionary[0] != '\0')
        return sfl__fail(SFL_EUNSUP, "task: dictionary '%s' is not supported by this agent",
                         t->dictionary);
    if (data->X->ncols > t->dimension)
        return sfl__fail(SFL_EDIM, "task: dimension %u, but the local data has %u features",
                         t->dimension, data->X->ncols);
    if (loss->classification && t->nlabels == 0)
        return sfl__fail(SFL_EINVAL, "task: loss %s needs the job's labels", loss->name);
    if ((rc = sfl_problem_init(&v->prob, loss, t->dimension,
                               loss->classification ? t->nlabels : 0)) < 0)
        return rc;
    if (t->model == NULL || t->model->dim != v->prob.dim)
        return sfl__fail(SFL_EDIM, "task: model has dimension %u, the problem %zu",
                         t->model ? t->model->dim : 0, v->prob.dim);
    if ((rc = sfl_algo_params_from_list(v->algo, &t->params, &v->params)) < 0)
        return sfl__wrap(rc, "task");
    return 0;
}

static sfl_client_task_t client_task(const sfl_task_t *t, const task_view_t *v,
                                     const double *global, uint64_t agent_id)
{
    return (sfl_client_task_t){.algo = v->algo,
                               .params = &v->params,
                               .prob = &v->prob,
                               .labels = t->labels,
                               .global = global,
                               .seed = t->seed,
                               .round = t->round,
                               .client = agent_id,
                               .max_update_nnz = t->max_update_nnz};
}

int agent_task_check(const sfl_task_t *t, const sfl_dataset_t *data)
{
    task_view_t v;
    sfl_client_task_t ct;
    int rc;

    if ((rc = task_view(t, data, &v)) < 0)
        return rc;
    ct = client_task(t, &v, NULL, 0);
    return sfl_client_check(&ct, data, NULL);
}

/* The client state this task trains with: loaded from cs->in (the bytes
 * the agent kept for the job), or fresh when there are none or they do not
 * load (cs->note says why, for the log). */
static int state_for(const task_view_t *v, agent_cstate_io_t *cs, sfl_client_state_t *st)
{
    if (cs != NULL && cs->in != NULL) {
        if (sfl_client_state_load(v->algo, &v->params, &v->prob, cs->in, cs->in_len, st) == 0)
            return 0;
        snprintf(cs->note, sizeof(cs->note), "%s; starting from a fresh state",
                 sfl_last_error());
    }
    return sfl_client_state_new(v->algo, &v->params, &v->prob, st);
}

/* The plaintext update is private to this agent: wiped, then freed. */
static void wipe_update(sfl_spvec_t *upd)
{
    if (upd != NULL && upd->cap > 0) {
        sodium_memzero(upd->val, upd->cap * sizeof(double));
        sodium_memzero(upd->idx, upd->cap * sizeof(uint32_t));
    }
    sfl_spvec_free(upd);
}

/* The task's client round: the update (owned; wipe before freeing) and its
 * report; the state the round left into cs->out. */
static int train_update(const sfl_task_t *t, const sfl_dataset_t *data,
                        const sfl_dataset_t *eval, uint64_t agent_id, sfl_algo_ws_t *ws,
                        agent_cstate_io_t *cs, sfl_spvec_t **out, sfl_client_report_t *rep)
{
    task_view_t v;
    sfl_client_task_t ct;
    sfl_client_state_t st = {0};
    double *global = NULL;
    sfl_spvec_t *upd = NULL;
    int rc;

    *out = NULL;
    if ((rc = task_view(t, data, &v)) < 0)
        return rc;
    global = sfl__calloc(v.prob.dim, sizeof(double));
    if (global == NULL)
        return SFL_ENOMEM;
    sfl_spvec_scatter(t->model, global);
    ct = client_task(t, &v, global, agent_id);
    if ((rc = sfl_spvec_new((uint32_t)v.prob.dim, 0, &upd)) < 0 ||
        (rc = state_for(&v, cs, &st)) < 0 ||
        (rc = sfl_client_round(&ct, data, eval, &st, ws, upd, rep)) < 0)
        goto out;
    /* The state this round left, for the agent to keep once the update is
     * made (never on a failure: a failed round leaves the old state). */
    if (cs != NULL && (rc = sfl_client_state_save(&st, &cs->out, &cs->out_len)) < 0)
        goto out;
    *out = upd;
    upd = NULL;
out:
    sfl_client_state_free(&st);
    wipe_update(upd);
    sfl__free(global);
    return rc;
}

int agent_train_task(const sfl_task_t *t, const sfl_dataset_t *data, const sfl_dataset_t *eval,
                     const sfl_identity_t *id, uint64_t agent_id, sfl_algo_ws_t *ws,
                     agent_cstate_io_t *cs, uint8_t **msg, size_t *len)
{
    sfl_client_report_t rep;
    sfl_spvec_t *upd = NULL;
    sfl_payload_t pl;
    int rc;

    *msg = NULL;
    *len = 0;
    if ((rc = train_update(t, data, eval, agent_id, ws, cs, &upd, &rep)) < 0)
        return rc;
    memset(&pl, 0, sizeof(pl));
    pl.update = upd;
    pl.encoding = t->value_encoding;
    pl.samples = data->X->nrows;
    pl.train_loss = rep.train_loss;
    pl.eval_accuracy = rep.eval_accuracy;
    pl.eval_mse = rep.eval_mse;
    pl.personal_accuracy = rep.personal_accuracy;
    pl.eval_samples = rep.eval_samples;
    rc = agent_seal_payload(t, &pl, id, agent_id, msg, len);
    if (rc < 0 && cs != NULL) {
        sfl_client_state_bytes_free(cs->out, cs->out_len);
        cs->out = NULL;
        cs->out_len = 0;
    }
    wipe_update(upd);
    return rc;
}

int agent_stats_moments(const sfl_task_t *t, const sfl_dataset_t *data, sfl_spvec_t **out)
{
    size_t n = SFL_MOMENTS_LEN(t->dimension);
    double *m = NULL;
    sfl_spvec_t *v = NULL;
    int rc;

    *out = NULL;
    if (!t->statistics || t->secagg == NULL)
        return sfl__fail(SFL_EINVAL, "not a secure aggregation statistics task");
    if (n > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "statistics of %u features", t->dimension);
    /* every value within the job's bound, or the moments would not fit */
    if ((rc = agent_sa_stats_check(data, t->secagg->clip)) < 0)
        return rc;
    if ((m = sfl__calloc(n, sizeof(double))) == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_dataset_moments(data, t->dimension, m)) < 0 ||
        (rc = sfl_spvec_new((uint32_t)n, 0, &v)) < 0 || (rc = sfl_spvec_from_dense(v, m)) < 0)
        goto out;
    *out = v;
    v = NULL;
out:
    sodium_memzero(m, n * sizeof(double));
    sfl__free(m);
    wipe_update(v);
    return rc;
}

int agent_stats_task(const sfl_task_t *t, const sfl_dataset_t *data, const sfl_identity_t *id,
                     uint64_t agent_id, uint8_t **msg, size_t *len)
{
    size_t n = SFL_MOMENTS_LEN(t->dimension);
    double *m = NULL;
    sfl_spvec_t *v = NULL;
    sfl_payload_t pl;
    int rc;

    *msg = NULL;
    *len = 0;
    if (!t->statistics)
        return sfl__fail(SFL_EINVAL, "not a statistics task");
    if (n > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "statistics of %u features", t->dimension);
    if ((m = sfl__calloc(n, sizeof(double))) == NULL)
        return SFL_ENOMEM;
    /* the per-agent vector from zeros, as sfl-sim makes each client's */
    if ((rc = sfl_dataset_moments(data, t->dimension, m)) < 0 ||
        (rc = sfl_spvec_new((uint32_t)n, 0, &v)) < 0 || (rc = sfl_spvec_from_dense(v, m)) < 0)
        goto out;
    memset(&pl, 0, sizeof(pl));
    pl.update = v;
    pl.encoding = SFL_ENC_F64;
    pl.samples = data->X->nrows;
    rc = agent_seal_payload(t, &pl, id, agent_id, msg, len);
out:
    /* the moments summarise private rows: wiped like an update */
    sodium_memzero(m, n * sizeof(double));
    sfl__free(m);
    wipe_update(v);
    return rc;
}

int agent_standardize(const double *moments, uint32_t d, double eps, const sfl_dataset_t *data,
                      const sfl_dataset_t *eval, sfl_dataset_t **sdata, sfl_dataset_t **seval)
{
    sfl_dataset_t *parts[1], *sd = NULL, *se = NULL;
    double *mu = NULL;
    int rc;

    *sdata = *seval = NULL;
    if ((mu = sfl__mallocarray(2 * (size_t)d, sizeof(double))) == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_moments_standardizer(moments, d, eps, mu, mu + d)) < 0) {
        rc = sfl__wrap(rc, "the job's statistics");
        goto out;
    }
    parts[0] = (sfl_dataset_t *)data;
    if ((rc = sfl_dataset_concat(parts, 1, &sd)) < 0 || (rc = sfl_dataset_set_ncols(sd, d)) < 0 ||
        (rc = sfl_dataset_standardize(sd, d, mu, mu + d)) < 0)
        goto out;
    if (eval != NULL) {
        parts[0] = (sfl_dataset_t *)eval;
        if ((rc = sfl_dataset_concat(parts, 1, &se)) < 0 ||
            (rc = sfl_dataset_set_ncols(se, d)) < 0 ||
            (rc = sfl_dataset_standardize(se, d, mu, mu + d)) < 0)
            goto out;
    }
    *sdata = sd;
    *seval = se;
    sd = se = NULL;
out:
    sfl_dataset_free(sd);
    sfl_dataset_free(se);
    sfl__free(mu);
    return rc;
}

int agent_seal_payload(const sfl_task_t *t, const sfl_payload_t *pl, const sfl_identity_t *id,
                       uint64_t agent_id, uint8_t **msg, size_t *len)
{
    uint8_t *payload = NULL, *sealed = NULL;
    size_t plen = 0, cap, slen = 0;
    int rc;

    *msg = NULL;
    *len = 0;
    if ((rc = sfl_msg_payload_pack(pl, &payload, &plen)) < 0)
        goto out;
    cap = sfl_seal_sealed_size(plen);
    if (cap == 0) {
        rc = sfl__fail(SFL_ELIMIT, "payload of %zu bytes is too large to seal", plen);
        goto out;
    }
    sealed = sfl__malloc(cap);
    if (sealed == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    {
        sfl_upd_ctx_t ctx;

        memcpy(ctx.round_pk, t->round_key, sizeof(ctx.round_pk));
        ctx.job = t->job_id;
        ctx.round = t->round;
        memcpy(ctx.nonce, t->round_nonce, sizeof(ctx.nonce));
        ctx.agent_id = agent_id;
        memcpy(ctx.model_hash, t->model_hash, sizeof(ctx.model_hash));
        if ((rc = sfl_seal_update(id, &ctx, payload, plen, sealed, cap, &slen)) < 0)
            goto out;
    }
    {
        sfl_update_t m = {t->job_id, t->round, t->attempt, agent_id, SFL_UPDATE_MODE_SEALED,
                          sealed, slen};

        rc = sfl_msg_update_pack(&m, msg, len);
    }
out:
    /* The plaintext update is private to this agent until sealed. */
    if (payload != NULL)
        sodium_memzero(payload, plen);
    sfl_msg_buf_free(payload);
    sfl__free(sealed);
    return rc;
}

/* ---- construction ----------------------------------------------------------- */

static int read_data(const char *spec, sfl_dataset_t **out)
{
    int rc;

    if ((rc = sfl_dataset_read(spec, 0, NULL, out)) < 0)
        return rc;
    if ((*out)->X->nrows == 0)
        return sfl__fail(SFL_EEMPTY, "%s: no samples", spec);
    return 0;
}

/* Reads data (and eval_file) and fills the Join summary. The summary's
 * labels are those of all local rows, held-out ones included, so the agent
 * is only selected for jobs that can code every row; split_eval later sets
 * its samples to the training rows, the update's weight. */
static int load_data(agent_t *a)
{
    sfl_dataset_summary_t ev;
    uint32_t ncols;
    int rc;

    if ((rc = read_data(a->cfg.data, &a->data)) < 0 ||
        (rc = agent_summarize(a->data, &a->summary)) < 0)
        return rc;
    if (a->cfg.block_first != 0) {
        /* a column block: its width is the configuration's (a LibSVM file
         * need not use the last column), its rows aligned by sample id */
        if (a->data->X->ncols > a->cfg.block_cols)
            return sfl__fail(SFL_EDIM, "data has %u columns, block says %u", a->data->X->ncols,
                             a->cfg.block_cols);
        if ((rc = sfl_dataset_set_ncols(a->data, a->cfg.block_cols)) < 0 ||
            (rc = agent_vert_ids_hash(a->cfg.ids_file, a->data->X->nrows,
                                      a->summary.ids_hash)) < 0)
            return rc;
        a->summary.dimension = a->cfg.block_cols;
        a->summary.first_column = a->cfg.block_first;
        a->summary.has_ids = 1;
    }
    if (a->cfg.eval_file[0] == '\0')
        return 0;
    if ((rc = read_data(a->cfg.eval_file, &a->eval)) < 0 ||
        (rc = agent_summarize(a->eval, &ev)) < 0)
        return rc;
    /* Regression data (no labels) takes any targets; class labels must be
     * data's, or no job could code the held-out rows. */
    if (a->summary.nlabels > 0 && ev.nlabels == 0)
        return sfl__fail(SFL_EINVAL, "eval_file: targets are not class labels, data's are");
    for (uint32_t i = 0; a->summary.nlabels > 0 && i < ev.nlabels; i++)
        if (bsearch(&ev.labels[i], a->summary.labels, a->summary.nlabels, sizeof(double),
                    cmp_double) == NULL)
            return sfl__fail(SFL_EINVAL, "eval_file: label %.17g is not among the labels of "
                             "data", ev.labels[i]);
    /* One feature space: the wider of the two. */
    ncols = a->eval->X->ncols > a->data->X->ncols ? a->eval->X->ncols : a->data->X->ncols;
    if ((rc = sfl_dataset_set_ncols(a->data, ncols)) < 0 ||
        (rc = sfl_dataset_set_ncols(a->eval, ncols)) < 0)
        return rc;
    a->summary.dimension = ncols;
    return 0;
}

/* eval_fraction: holds out rows of data, drawn from the identity key. */
static int split_eval(agent_t *a)
{
    sfl_dataset_t *train = NULL, *eval = NULL;
    sfl_rng_t r;
    int rc;

    if (a->cfg.eval_fraction > 0) {
        agent_eval_rng(a->id->pk, &r);
        if ((rc = sfl_dataset_split(a->data, a->cfg.eval_fraction, &r, &train, &eval)) < 0)
            return rc;
        sfl_dataset_free(a->data);
        a->data = train;
        if (eval != NULL && eval->X->nrows == 0) {
            sfl_dataset_free(eval);
            eval = NULL;
        }
        a->eval = eval;
    }
    a->summary.samples = a->data->X->nrows;
    if (agent_sa_test_hooks != NULL && agent_sa_test_hooks->join_samples != 0)
        a->summary.samples = agent_sa_test_hooks->join_samples; /* a hostile test double */
    return 0;
}

void agent_eval_rng(const uint8_t pk[SFL_SEAL_PK_BYTES], sfl_rng_t *r)
{
    uint64_t seed = 0;

    for (int i = 0; i < 8; i++)
        seed |= (uint64_t)pk[i] << (8 * i);
    sfl_rng_seed(r, seed, 0, 0, SFL_STREAM_PARTITION);
}

/* The identity key lives in state_dir; the first start makes it. */
static int load_identity(agent_t *a)
{
    char path[AGENT_PATH_MAX + sizeof(AGENT_IDENTITY_FILE) + 1];
    int rc;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", a->cfg.state_dir, AGENT_IDENTITY_FILE) >=
        sizeof(path))
        return sfl__fail(SFL_EINVAL, "state_dir is too long");
    if (mkdir(a->cfg.state_dir, 0700) < 0 && errno != EEXIST)
        return sfl__fail(-errno, "state_dir %s: cannot create: %s", a->cfg.state_dir,
                         strerror(errno));
    rc = sfl_identity_load(path, &a->id);
    if (rc != -ENOENT)
        return rc;
    if ((rc = sfl_identity_generate(&a->id)) < 0)
        return rc;
    if ((rc = sfl_identity_save(a->id, path)) < 0)
        return rc;
    a->id_created = 1;
    return 0;
}

int agent_new(uv_loop_t *loop, const agent_config_t *cfg, agent_t **out)
{
    agent_t *a;
    int rc;

    *out = NULL;
    if ((rc = agent_config_check(cfg)) < 0)
        return rc;
    a = sfl__calloc(1, sizeof(*a));
    if (a == NULL)
        return SFL_ENOMEM;
    a->loop = loop;
    a->cfg = *cfg;
    a->log = stderr;
    sfl_algo_ws_init(&a->ws);
    rc = sfl_grpcconn_split_hostport(cfg->coordinator, a->host, sizeof(a->host), a->port,
                                     sizeof(a->port));
    if (rc < 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        rc = sfl__fail(rc, "coordinator: %s", detail);
        goto out;
    }
    for (uint32_t i = 0; i < cfg->nconditions; i++) {
        if ((rc = sfl_msg_tags_add(&a->conditions, cfg->conditions[i])) < 0) {
            rc = sfl__fail(rc, "conditions: '%s' is not a tag (1-31 of [a-z0-9_.:-])",
                           cfg->conditions[i]);
            goto out;
        }
    }
    if ((rc = sfl_seal_pk_from_hex(cfg->coordinator_pk, a->coord_pk)) < 0 ||
        (rc = sfl_identity_pk_check(a->coord_pk)) < 0) {
        rc = sfl__fail(SFL_EINVAL, "coordinator_pk is not a usable Ed25519 public key; "
                                   AGENT_PK_HINT);
        goto out;
    }
    /* The identity seeds the held-out split. */
    if ((rc = load_data(a)) < 0 || (rc = load_identity(a)) < 0 || (rc = split_eval(a)) < 0)
        goto out;
    {
        sfl_tls_config_t t = {
            .cert_file = cfg->cert,
            .key_file = cfg->key,
            .ca_file = cfg->ca,
            .verify_host = cfg->server_name[0] ? cfg->server_name : a->host,
            .alpn = "h2",
            .alpn_required = 1,
        };

        if ((rc = sfl_tls_new(&t, 0, &a->tls)) < 0)
            goto out;
    }
    {
        uint8_t fpr[32];

        /* for the line that says this certificate was revoked */
        if (sfl_tls_cert_sha256(a->tls, fpr) == 0)
            sodium_bin2hex(a->fpr_hex, sizeof(a->fpr_hex), fpr, sizeof(fpr));
        else
            snprintf(a->fpr_hex, sizeof(a->fpr_hex), "?");
    }
    *out = a;
    return 0;
out:
    agent_free(a);
    return rc;
}

static void load_client_state(agent_t *a, uint64_t job, uint64_t round);

static void train_free(train_t *w)
{
    if (w == NULL)
        return;
    sfl_msg_task_free(w->task);
    sfl_msg_buf_free(w->msg);
    sfl_client_state_bytes_free(w->cs.out, w->cs.out_len);
    wipe_update(w->update);
    sfl__free(w);
}

void agent_free(agent_t *a)
{
    if (a == NULL)
        return;
    /* Only before agent_start or after the stopped callback. */
    assert(a->handles == 0 && a->work == NULL && a->nlinks == 0);
    train_free(a->outbox);
    sfl_msg_task_free(a->next);
    sfl_file_free(a->cstate.bytes, a->cstate.len);
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    sfl_algo_ws_close(&a->ws);
    sfl_tls_free(a->tls);
    sfl_identity_free(a->id);
    sfl_dataset_free(a->data);
    sfl_dataset_free(a->eval);
    agent_vert_free(a->vert);
    sfl__free(a->vlast);
    agent_sa_free(a->sa);
    agent_sa_state_clear(&a->sa_st);
    sfl__free(a->std.moments);
    sfl_dataset_free(a->std.train);
    sfl_dataset_free(a->std.eval);
    sfl__free(a);
}

void agent_set_log(agent_t *a, FILE *f)
{
    a->log = f;
}

void agent_set_observer(agent_t *a, agent_state_cb cb, void *ud)
{
    a->observer = cb;
    a->observer_ud = ud;
}

agent_state_t agent_state(const agent_t *a)
{
    return a->state;
}

const agent_stats_t *agent_stats(const agent_t *a)
{
    return &a->stats;
}

uint64_t agent_joined_id(const agent_t *a)
{
    return a->agent_id;
}

const uint8_t *agent_identity_pk(const agent_t *a)
{
    return a->id->pk;
}

const sfl_dataset_summary_t *agent_summary(const agent_t *a)
{
    return &a->summary;
}

uint32_t agent_eval_rows(const agent_t *a)
{
    return a->eval ? a->eval->X->nrows : 0;
}

/* ---- the connection ------------------------------------------------------------ */

static void forget_calls(agent_t *a)
{
    a->join_call = a->sub_call = a->hb_call = a->submit_call = a->step_call = a->sa_call = NULL;
}

/* Cancels the link's calls, detaches and closes it; it frees itself. */
static void drop_link(agent_t *a)
{
    sfl_grpcconn_t *l = a->link;
    sfl_grpc_call_t *calls[] = {a->join_call, a->sub_call, a->hb_call, a->submit_call,
                                a->step_call, a->sa_call};

    if (l == NULL)
        return;
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        if (calls[i] != NULL)
            sfl_grpc_cancel(calls[i]);
    forget_calls(a);
    a->link = NULL;
    sfl_grpcconn_close(l);
}

static void on_open(sfl_grpcconn_t *g, void *ud)
{
    agent_t *a = ud;
    sfl_peer_t peer;

    /* A detached link is closing and never opens. */
    assert(g == a->link);
    a->link_opened = 1;
    a->stats.connects++;
    if (sfl_conn_peer(sfl_grpcconn_conn(g), &peer) == 0) {
        say(a, SFL_LOG_INFO, "connected", "coordinator=%s peer_cn=%s peer_role=%s",
            a->cfg.coordinator, peer.cn, sfl_role_name(peer.role));
        /* Another role's certificate (an agent's, an admin's) from the same
         * CA and with the right name is still not the coordinator. */
        if (peer.role != SFL_ROLE_COORDINATOR) {
            step(a, &(ev_t){.type = EV_CONNECTED, .status = SFL_ECERT,
                            .message = "the server's certificate is not a coordinator's (OU)"});
            return;
        }
    }
    step(a, &(ev_t){.type = EV_CONNECTED});
}

static void on_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    agent_t *a = ud;
    int current = g == a->link;

    if (current) {
        a->link = NULL;
        forget_calls(a); /* what the session reports while freed is ignored */
    }
    a->nlinks--;
    if (current) {
        if (!a->link_opened)
            a->stats.connect_fails++;
        step(a, &(ev_t){.type = EV_CLOSED, .status = status, .message = detail});
    }
    maybe_finish_stop(a);
}

static const sfl_grpcconn_cbs_t conn_cbs = {on_open, on_close};

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    agent_t *a = req->data;

    a->resolving = 0;
    if (!a->stopping)
        step(a, &(ev_t){.type = EV_RESOLVED, .status = status,
                        .message = status < 0 ? uv_strerror(status) : NULL, .addr = res});
    uv_freeaddrinfo(res);
    maybe_finish_stop(a);
}

/* ---- calls -------------------------------------------------------------------- */

static void on_join(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                    size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_join_reply_t r;
    int rc;

    if (call != a->join_call)
        return;
    a->join_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        step(a, &(ev_t){.type = EV_JOIN_FAILED, .status = status, .message = message});
        return;
    }
    if ((rc = sfl_msg_join_reply_unpack(resp, len, NULL, &r)) < 0) {
        step(a, &(ev_t){.type = EV_JOIN_FAILED, .status = rc, .message = sfl_last_error()});
        return;
    }
    step(a, &(ev_t){.type = EV_JOINED, .join = &r});
}

static void on_sub_msg(sfl_grpc_call_t *call, const uint8_t *msg, size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_msg_limits_t lim;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    sfl_vstep_t vs;
    sfl_msg_sa_stage_t sa;
    char q[300];
    int rc, kind;

    if (call != a->sub_call)
        return;
    sfl_msg_limits_default(&lim);
    lim.max_message = AGENT_MAX_MESSAGE;
    if ((rc = sfl_msg_sub_unpack(msg, len, &lim, &t, &w, &vs, &sa, &kind)) < 0) {
        a->stats.tasks_refused++;
        say(a, SFL_LOG_WARN, "task_refused", "reason=malformed error=%s",
            quote(q, sizeof(q), sfl_last_error()));
        return;
    }
    if (kind == 't')
        step(a, &(ev_t){.type = EV_TASK, .task = t});
    else if (kind == 'w')
        step(a, &(ev_t){.type = EV_WAIT, .wait = &w});
    else if (kind == 'a') {
        step(a, &(ev_t){.type = EV_SA, .sa = &sa});
        sfl_msg_sa_stage_clear(&sa);
    } else {
        step(a, &(ev_t){.type = EV_STEP, .vstep = &vs});
        sfl_msg_vstep_clear(&vs);
    }
}

static void on_sub_done(sfl_grpc_call_t *call, int status, const char *message, void *ud)
{
    agent_t *a = ud;

    if (call != a->sub_call)
        return;
    a->sub_call = NULL;
    step(a, &(ev_t){.type = EV_STREAM_END, .status = status, .message = message});
}

static void on_submit(sfl_grpc_call_t *call, int status, const char *message,
                      const uint8_t *resp, size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_ack_t ack;
    int rc;

    if (call != a->submit_call)
        return;
    a->submit_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        step(a, &(ev_t){.type = EV_SUBMIT_FAILED, .status = status, .message = message});
        return;
    }
    if ((rc = sfl_msg_ack_unpack(resp, len, NULL, &ack)) < 0) {
        step(a, &(ev_t){.type = EV_SUBMIT_FAILED, .status = rc, .message = sfl_last_error()});
        return;
    }
    step(a, &(ev_t){.type = EV_ACK, .ack = &ack});
}

static int joined_state(agent_state_t s)
{
    return s == AGENT_WAITING || s == AGENT_SUBSCRIBED || s == AGENT_TRAINING ||
           s == AGENT_SUBMITTING;
}

/* Heartbeats change no state: they report the phase, and their replies
 * only tune the interval, move a deadline or mark the work aborted. */
static void on_heartbeat(sfl_grpc_call_t *call, int status, const char *message,
                         const uint8_t *resp, size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_heartbeat_reply_t r;
    train_t *w;
    char q[300], sq[80];

    if (call != a->hb_call)
        return;
    a->hb_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        say(a, SFL_LOG_WARN, "heartbeat_failed", "status=%s message=%s",
            status_name(sq, sizeof(sq), status), quote(q, sizeof(q), message));
        return;
    }
    if (sfl_msg_heartbeat_reply_unpack(resp, len, NULL, &r) < 0) {
        say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s", quote(q, sizeof(q), sfl_last_error()));
        return;
    }
    a->stats.heartbeats++;
    {
        uint64_t ms = r.interval_ms < a->cfg.heartbeat_ms ? r.interval_ms : a->cfg.heartbeat_ms;

        if (ms != a->hb_ms) {
            a->hb_ms = (uint32_t)ms;
            uv_timer_start(&a->hb_timer, on_hb_timer, ms, ms);
        }
    }
    w = a->work != NULL ? a->work : a->outbox;
    if (w == NULL || w->task->job_id != a->hb_job || w->task->round != a->hb_round ||
        w->task->attempt != a->hb_attempt)
        return;
    if (r.deadline_ms > w->task->deadline_ms)
        w->task->deadline_ms = r.deadline_ms;
    if (r.abort && w == a->work && !w->aborted) {
        w->aborted = 1;
        say(a, SFL_LOG_WARN, "task_aborted", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u",
            w->task->job_id, w->task->round, w->task->attempt);
    }
}

static void on_hb_timer(uv_timer_t *t)
{
    agent_t *a = t->data;
    sfl_heartbeat_req_t r;
    const train_t *w = NULL;
    uint8_t *buf;
    size_t len;
    int rc;

    if (a->link == NULL || a->hb_call != NULL || !joined_state(a->state))
        return;
    memset(&r, 0, sizeof(r));
    r.agent_id = a->agent_id;
    r.phase = SFL_PHASE_IDLE;
    if (a->state == AGENT_TRAINING && a->work != NULL) {
        w = a->work;
        r.phase = SFL_PHASE_TRAINING;
        r.progress_permille = 0; /* the algorithm table reports no progress */
    } else if (a->state == AGENT_SUBMITTING && a->outbox != NULL) {
        w = a->outbox;
        r.phase = SFL_PHASE_UPLOADING;
        r.progress_permille = 1000;
    }
    if (w != NULL) {
        r.job_id = w->task->job_id;
        r.round = w->task->round;
        r.attempt = w->task->attempt;
    } else if (a->vert != NULL) {
        /* a vertical round: alive while it waits for the other blocks */
        uint64_t first;

        agent_vert_round(a->vert, &r.job_id, &r.round, &r.attempt, &first);
        r.phase = SFL_PHASE_TRAINING;
    } else if (a->sa != NULL) {
        /* a secure aggregation round: alive between its stages */
        agent_sa_round(a->sa, &r.job_id, &r.round, &r.attempt);
        r.phase = SFL_PHASE_UPLOADING;
    }
    r.conditions = a->conditions;
    if ((rc = sfl_msg_heartbeat_req_pack(&r, &buf, &len)) < 0) {
        say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s", sfl_strerror(rc));
        return;
    }
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_HEARTBEAT, buf, len, a->hb_ms,
                             on_heartbeat, a, &a->hb_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->hb_call = NULL;
        say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s", sfl_strerror(rc));
        return;
    }
    a->hb_job = r.job_id;
    a->hb_round = r.round;
    a->hb_attempt = r.attempt;
}

/* ---- actions (they return the next state; only step() sets it) ------------------- */

/* Loop time of a resubscription after retry_ms: up to 10% of our own jitter
 * on top, never less (docs/protocol.md). */
static uint64_t resub_time(agent_t *a, uint32_t retry_ms)
{
    a->stats.last_resub_ms = retry_ms + randombytes_uniform(retry_ms / 10 + 1);
    return uv_now(a->loop) + a->stats.last_resub_ms;
}

static void on_timer(uv_timer_t *t)
{
    step(t->data, &(ev_t){.type = EV_TIMER});
}

static agent_state_t stop_all(agent_t *a);

agent_err_t agent_error_class(const char *what, int status, const char *message,
                              const char **fix)
{
    const char *m = message ? message : "";
    int join = strcmp(what, "join") == 0;
    int denied = status == SFL_GRPC_STATUS_PERMISSION_DENIED ||
                 status == SFL_GRPC_STATUS_UNAUTHENTICATED;

    *fix = NULL;
    /* Any call: the coordinator answers every call of a revoked
     * certificate so, over the TLS connection we verified. */
    if (denied && strncmp(m, SFL_MSG_REVOKED, strlen(SFL_MSG_REVOKED)) == 0) {
        *fix = "the coordinator revoked this agent's certificate: ask the operator for a new "
               "one";
        return AGENT_ERR_REVOKED;
    }
    /* The coordinator's alert: it found our certificate outside its
     * validity dates (OpenSSL sends this one alert for both). Permanent or
     * not depends on our own clock (see backoff). */
    if (status == -EPROTO && strstr(m, "alert certificate expired")) {
        *fix = "this agent's certificate is outside its validity dates by the coordinator's "
               "clock: ask the operator for a new one, or set the clocks right";
        return AGENT_ERR_EXPIRED;
    }
    if (status == SFL_ECERT) {
        if (strstr(m, "hostname mismatch") || strstr(m, "IP address mismatch"))
            *fix = "server_name (default: the host of coordinator) must be a name or address "
                   "in the coordinator's certificate";
        else if (strstr(m, "certificate verify failed"))
            *fix = "the coordinator's certificate does not chain to ca: use the federation's "
                   "CA certificate";
        else if (strstr(m, "alert unknown ca"))
            *fix = "the coordinator refused this agent's certificate: it does not know the CA "
                   "that issued it; cert and key must be an agent certificate of the "
                   "federation's CA (sfl-pki agent)";
        else
            *fix = "the coordinator refused this agent's certificate: cert and key must be an "
                   "agent certificate of the federation's CA (sfl-pki agent)";
        return AGENT_ERR_PERMANENT;
    }
    if (join && status == SFL_GRPC_STATUS_PERMISSION_DENIED &&
        strstr(m, "bound to the certificate"))
        *fix = "this agent's name is bound to another certificate (the one it first joined "
               "with): the operator revokes that one (sflctl agent revoke) to accept this one";
    else if (join && status == SFL_GRPC_STATUS_PERMISSION_DENIED &&
             strstr(m, "another identity key"))
        *fix = "this agent's name is bound to another identity key: state_dir must hold the "
               "identity.key it first joined with (docs/security.md, \"Binding and "
               "revocation\")";
    else if (join && status == SFL_GRPC_STATUS_PERMISSION_DENIED && strstr(m, "join_proof"))
        *fix = "the coordinator did not accept this agent's proof that it holds its identity "
               "key (join_proof): agent and coordinator must run the same protocol version";
    else if (join && denied)
        *fix = "the coordinator refused this certificate's role: cert and key must be an agent "
               "certificate (sfl-pki agent)";
    return *fix != NULL ? AGENT_ERR_PERMANENT : AGENT_ERR_RETRY;
}

/* Gives up: one error line, then the agent stops as agent_stop would and
 * the agent_set_fatal callback runs once it has. */
static agent_state_t fatal(agent_t *a, const char *what, int status, const char *message,
                           const char *fix)
{
    char q[300], f[300], sq[80];

    /* Logged first: message may be borrowed from a call of this link. */
    say(a, SFL_LOG_ERROR, "fatal", "during=%s status=%s error=%s fix=%s exit_status=%d", what,
        status_name(sq, sizeof(sq), status), quote(q, sizeof(q), message),
        quote(f, sizeof(f), fix), AGENT_EXIT_FATAL);
    a->failed = status < 0 ? status : SFL_ECERT;
    a->stopping = 1;
    a->stopped_cb = a->fatal_cb;
    a->stopped_ud = a->fatal_ud;
    return stop_all(a);
}

/* The coordinator found our certificate expired or not yet valid: final
 * if this device's clock finds it so too (a new certificate is needed),
 * else the clocks disagree and a retry may succeed once they are set. */
static int own_cert_outside_dates(const agent_t *a)
{
    int rc = sfl_tls_check_identity(a->cfg.cert, a->cfg.key, a->cfg.ca, SFL_ROLE_AGENT);

    return rc == SFL_ECERT && (strstr(sfl_last_error(), "expired") != NULL ||
                               strstr(sfl_last_error(), "not yet valid") != NULL);
}

static agent_state_t backoff(agent_t *a, const char *what, int status, const char *message)
{
    const char *fix;
    agent_err_t kind = agent_error_class(what, status, message, &fix);
    char hint[200] = "";

    if (kind == AGENT_ERR_REVOKED) {
        char f[300];

        snprintf(f, sizeof(f), "the coordinator revoked this agent's certificate "
                 "(fingerprint %s): ask the operator for a new one; exiting", a->fpr_hex);
        return fatal(a, what, status, message, f);
    }
    if (kind == AGENT_ERR_PERMANENT)
        return fatal(a, what, status, message, fix);
    if (kind == AGENT_ERR_EXPIRED && own_cert_outside_dates(a))
        return fatal(a, what, status, message,
                     "this agent's certificate is outside its validity dates by the "
                     "coordinator's clock and by this device's: ask the operator for a new one "
                     "(sfl-pki agent)");
    if (kind == AGENT_ERR_EXPIRED)
        snprintf(hint, sizeof(hint), " hint=\"the coordinator finds this agent's certificate "
                 "expired or not yet valid, this device's clock does not: check both clocks\"");

    uint64_t delay = agent_backoff_delay(a->cfg.backoff_min_ms, a->cfg.backoff_max_ms,
                                         a->attempt, randombytes_random());
    char q[300], sq[80];

    /* Logged first: message may be borrowed from a call of this link. */
    say(a, SFL_LOG_WARN, "disconnected", "during=%s status=%s error=%s retry_in_ms=%" PRIu64 "%s",
        what, status_name(sq, sizeof(sq), status), quote(q, sizeof(q), message), delay, hint);
    drop_link(a);
    uv_timer_stop(&a->hb_timer);
    uv_timer_stop(&a->timer);
    /* A task that waited for its turn belonged to the stream just lost. */
    sfl_msg_task_free(a->next);
    a->next = NULL;
    a->saw_wait = a->resub_reset = 0;
    a->resub_at = 0;
    if (a->attempt < UINT32_MAX)
        a->attempt++;
    a->stats.backoffs++;
    a->stats.last_backoff_ms = delay;
    uv_timer_start(&a->timer, on_timer, delay, 0);
    return AGENT_BACKOFF;
}

static agent_state_t connect_begin(agent_t *a)
{
    struct addrinfo hints;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    a->gai.data = a;
    rc = uv_getaddrinfo(a->loop, &a->gai, on_resolved, a->host, a->port, &hints);
    if (rc < 0) {
        a->stats.connect_fails++;
        return backoff(a, "resolve", rc, uv_strerror(rc));
    }
    a->resolving = 1;
    say(a, SFL_LOG_INFO, "connecting", "coordinator=%s", a->cfg.coordinator);
    return AGENT_CONNECTING;
}

static agent_state_t connect_addr(agent_t *a, const ev_t *e)
{
    uint64_t idle = 3 * a->cfg.heartbeat_ms;
    sfl_conn_opts_t o = {
        .tls = a->tls,
        .connect_timeout_ms = a->cfg.connect_timeout_ms,
        .idle_timeout_ms = idle > 120000 ? idle : 120000,
    };
    /* Liveness is the heartbeat's and the transport's business: the
     * session itself never closes an agent's connection for idling. */
    sfl_grpc_config_t g = {.max_message = AGENT_MAX_MESSAGE, .idle_timeout_ms = UINT32_MAX};
    int rc;

    if (e->status < 0 || e->addr == NULL) {
        a->stats.connect_fails++;
        return backoff(a, "resolve", e->status, e->message);
    }
    rc = sfl_grpcconn_connect(a->loop, e->addr->ai_addr, &o, &g, a->cfg.coordinator, &conn_cbs,
                              a, &a->link);
    if (rc < 0) {
        a->stats.connect_fails++;
        return backoff(a, "connect", rc, sfl_last_error());
    }
    a->link_opened = 0;
    a->nlinks++;
    return AGENT_CONNECTING;
}

static agent_state_t join(agent_t *a)
{
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    sfl_join_req_t r;
    uint8_t *buf;
    size_t len;
    int rc;

    memset(&r, 0, sizeof(r));
    memcpy(r.identity_key, a->id->pk, sizeof(r.identity_key));
    r.conditions = a->conditions;
    r.dataset = a->summary;
    r.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    snprintf(r.agent_version, sizeof(r.agent_version), "%s", AGENT_VERSION);
    /* Proof that this agent holds its identity key, bound to this
     * connection (docs/security.md, "Binding and revocation"). */
    if ((rc = sfl_conn_export_keying_material(sfl_grpcconn_conn(a->link), SFL_SEAL_JOIN_LABEL,
                                              binding, sizeof(binding))) < 0 ||
        (rc = sfl_seal_sign_join(a->id, binding, r.proof)) < 0)
        return backoff(a, "join", rc, sfl_last_error());
    r.has_proof = 1;
    if ((rc = sfl_msg_join_req_pack(&r, &buf, &len)) < 0)
        return backoff(a, "join", rc, sfl_last_error());
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_JOIN, buf, len,
                             (uint32_t)a->cfg.connect_timeout_ms, on_join, a, &a->join_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->join_call = NULL;
        return backoff(a, "join", rc, sfl_last_error());
    }
    return AGENT_JOINING;
}

static agent_state_t subscribe(agent_t *a)
{
    sfl_subscribe_req_t r;
    uint8_t *buf;
    size_t len;
    int rc;

    a->saw_wait = a->resub_reset = 0;
    a->resub_at = 0;
    memset(&r, 0, sizeof(r));
    r.agent_id = a->agent_id;
    r.conditions = a->conditions;
    if ((rc = sfl_msg_subscribe_req_pack(&r, &buf, &len)) < 0)
        return backoff(a, "subscribe", rc, sfl_last_error());
    /* No grpc-timeout: the stream lives as long as the connection. */
    rc = sfl_grpc_call_stream(sfl_grpcconn_session(a->link), PATH_SUBSCRIBE, buf, len, 0,
                              on_sub_msg, on_sub_done, a, &a->sub_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->sub_call = NULL;
        return backoff(a, "subscribe", rc, sfl_last_error());
    }
    a->stats.subscribes++;
    return AGENT_SUBSCRIBED;
}

static void refuse(agent_t *a, sfl_task_t *t, const char *why)
{
    char q[300];

    a->stats.tasks_refused++;
    say(a, SFL_LOG_WARN, "task_refused", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u reason=%s",
        t->job_id, t->round, t->attempt, quote(q, sizeof(q), why));
    sfl_msg_task_free(t);
}

static void work_cb(uv_work_t *req)
{
    train_t *w = req->data;
    agent_t *a = w->a;

    /* The loop touches neither the data, the identity nor ws while this
     * runs; the task is the work's own. */
    if (w->task->statistics && w->mode2) {
        /* the raw moments; sa_trained encodes them for the secure sum */
        w->rc = agent_stats_moments(w->task, a->data, &w->update);
        w->samples = a->data->X->nrows;
        goto out;
    }
    if (w->task->statistics) {
        w->rc = agent_stats_task(w->task, a->data, a->id, w->agent_id, &w->msg, &w->len);
        goto out;
    }
    if (w->task->has_moments && a->std.train == NULL &&
        (w->rc = agent_standardize(a->std.moments, w->task->dimension, a->std.eps, a->data,
                                   a->eval, &a->std.train, &a->std.eval)) < 0)
        goto out;
    if (w->task->has_moments && w->mode2) {
        /* mode 2 on the standardised rows: the update for the secure sum */
        w->rc = train_update(w->task, a->std.train, a->std.eval, w->agent_id, &a->ws, &w->cs,
                             &w->update, &w->rep);
        w->samples = a->std.train->X->nrows;
        goto out;
    }
    if (w->task->has_moments) {
        w->rc = agent_train_task(w->task, a->std.train, a->std.eval, a->id, w->agent_id, &a->ws,
                                 &w->cs, &w->msg, &w->len);
        goto out;
    }
    if (w->mode2) {
        w->rc = train_update(w->task, a->data, a->eval, w->agent_id, &a->ws, &w->cs,
                             &w->update, &w->rep);
        w->samples = a->data->X->nrows;
    } else
        w->rc = agent_train_task(w->task, a->data, a->eval, a->id, w->agent_id, &a->ws,
                                 &w->cs, &w->msg, &w->len);
out:
    if (w->rc < 0)
        snprintf(w->err, sizeof(w->err), "%s", sfl_last_error());
}

/* The statistics task t names are the ones kept. */
static int std_held(const agent_t *a, const sfl_task_t *t)
{
    return a->std.job == t->job_id && a->std.moments != NULL &&
           sodium_memcmp(a->std.hash, t->moments_hash, sizeof(a->std.hash)) == 0;
}

/* A standardize job's statistics for task t, before its work is queued (no
 * work in flight): moments that came with it are checked and kept, else
 * the ones kept must be the ones it names. 0, or < 0 with why set. */
static int std_for(agent_t *a, sfl_task_t *t, char *why, size_t cap)
{
    double *mu = NULL;
    int rc;

    if (!t->has_moments)
        return 0;
    if (a->work != NULL) {
        snprintf(why, cap, "statistics arrived while training");
        return SFL_EINVAL;
    }
    if (t->moments != NULL) {
        /* the same check the work's standardizer makes, before anything
         * kept is replaced: a summary of no rows, or a negative variance,
         * is refused here (their length and hash unpack checked) */
        if ((mu = sfl__mallocarray(2 * (size_t)t->dimension, sizeof(double))) == NULL) {
            snprintf(why, cap, "out of memory");
            return SFL_ENOMEM;
        }
        rc = sfl_moments_standardizer(t->moments, t->dimension, t->standardize_eps, mu,
                                      mu + t->dimension);
        sfl__free(mu);
        if (rc < 0) {
            snprintf(why, cap, "the job's statistics are not usable: %s", sfl_last_error());
            return rc;
        }
        sfl__free(a->std.moments);
        sfl_dataset_free(a->std.train);
        sfl_dataset_free(a->std.eval);
        a->std.train = a->std.eval = NULL;
        a->std.moments = t->moments;
        t->moments = NULL;
        a->std.job = t->job_id;
        memcpy(a->std.hash, t->moments_hash, sizeof(a->std.hash));
        a->std.eps = t->standardize_eps;
        say(a, SFL_LOG_INFO, "statistics", "job=%" PRIu64 " rows=%.17g features=%u eps=%g",
            t->job_id, a->std.moments[0], t->dimension, t->standardize_eps);
        return 0;
    }
    if (!std_held(a, t)) {
        snprintf(why, cap, "the task names statistics this agent does not hold");
        return SFL_ENOTFOUND;
    }
    if (a->std.eps != t->standardize_eps) {
        sfl_dataset_free(a->std.train);
        sfl_dataset_free(a->std.eval);
        a->std.train = a->std.eval = NULL;
        a->std.eps = t->standardize_eps;
    }
    return 0;
}

static void after_work_cb(uv_work_t *req, int status)
{
    train_t *w = req->data;
    agent_t *a = w->a;

    a->work = NULL;
    if (status < 0) {
        w->rc = status;
        snprintf(w->err, sizeof(w->err), "%s", uv_strerror(status));
    }
    step(a, &(ev_t){.type = EV_TRAINED, .train = w});
    maybe_finish_stop(a);
}

/* Queues t (taken) on the thread pool; on failure t is refused and freed. */
static int train_start(agent_t *a, sfl_task_t *t)
{
    train_t *w = sfl__calloc(1, sizeof(*w));
    int rc;

    if (w == NULL) {
        refuse(a, t, "out of memory");
        return SFL_ENOMEM;
    }
    {
        char why[300];

        if (std_for(a, t, why, sizeof(why)) < 0) {
            sfl__free(w);
            refuse(a, t, why);
            return SFL_EINVAL;
        }
    }
    w->a = a;
    w->task = t;
    w->agent_id = a->agent_id;
    w->mode2 = t->update_mode == SFL_UPDATE_MODE_SECURE_AGG;
    /* a statistics round trains nothing: the client state stays as it is */
    if (!t->statistics) {
        load_client_state(a, t->job_id, t->round);
        w->cs.in = a->cstate.bytes;
        w->cs.in_len = a->cstate.len;
    }
    w->req.data = w;
    w->started_ms = uv_now(a->loop);
    rc = uv_queue_work(a->loop, &w->req, work_cb, after_work_cb);
    if (rc < 0) {
        w->task = NULL;
        train_free(w);
        refuse(a, t, uv_strerror(rc));
        return rc;
    }
    a->work = w;
    say(a, SFL_LOG_DEBUG, "training", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u algorithm=%s "
        "samples=%u", t->job_id, t->round, t->attempt, t->algorithm, a->data->X->nrows);
    return 0;
}

/* state_dir/client-state-<job>.bin, or .pending */
static int cstate_path(const agent_t *a, uint64_t job, int pending, char *path, size_t cap)
{
    if ((size_t)snprintf(path, cap, "%s/client-state-%" PRIu64 ".%s", a->cfg.state_dir, job,
                         pending ? "pending" : "bin") >= cap)
        return sfl__fail(SFL_EINVAL, "state_dir is too long");
    return 0;
}

static void cstate_clear(agent_t *a)
{
    sfl_file_free(a->cstate.bytes, a->cstate.len);
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    memset(&a->cstate, 0, sizeof(a->cstate));
}

/* Reads one of the job's files into *b (none: NULL); errors are logged and
 * read as none (the job's state starts fresh, said so). */
static void cstate_read(agent_t *a, uint64_t job, int pending, uint8_t **b, size_t *n)
{
    char path[AGENT_PATH_MAX + 64], q[300];
    int rc;

    *b = NULL;
    *n = 0;
    if (cstate_path(a, job, pending, path, sizeof(path)) < 0)
        return;
    rc = sfl_file_read(path, AGENT_CSTATE_MAX + 8, b, n);
    if (rc == -ENOENT)
        return;
    if (rc == 0 && pending && *n < 8)
        rc = sfl__fail(SFL_ETRUNC, "%s: %zu bytes, no round", path, *n);
    if (rc < 0) {
        say(a, SFL_LOG_ERROR, "client_state",
            "job=%" PRIu64 " error=%s; starting from a fresh state",
            job, quote(q, sizeof(q), sfl_last_error()));
        sfl_file_free(*b, *n);
        *b = NULL;
        *n = 0;
    }
}

/* Before training round `round` of job (loop thread): a->cstate is the
 * job's state, from memory or state_dir. A pending state (the one a round
 * left) is settled now: a task for a later round means its round
 * committed, so it becomes the job's state (rename over the .bin); a task
 * for the same round or an earlier one (a retry, the same attempt again
 * after a restart) means it did not, and it is dropped. So a client's
 * state advances with the committed rounds only, whatever crashed when:
 * exactly as in sfl-sim. */
static void load_client_state(agent_t *a, uint64_t job, uint64_t round)
{
    char from[AGENT_PATH_MAX + 64], to[AGENT_PATH_MAX + 64], q[300];

    if (a->cstate.job != job) {
        uint8_t *pb;
        size_t pn;

        cstate_clear(a);
        a->cstate.job = job;
        cstate_read(a, job, 0, &a->cstate.bytes, &a->cstate.len);
        cstate_read(a, job, 1, &pb, &pn);
        if (pb != NULL) {
            for (int i = 0; i < 8; i++)
                a->cstate.pround |= (uint64_t)pb[i] << (8 * i);
            a->cstate.pbytes = pb;
            a->cstate.plen = pn;
        }
    }
    if (a->cstate.pbytes == NULL)
        return;
    if (cstate_path(a, job, 1, from, sizeof(from)) < 0 ||
        cstate_path(a, job, 0, to, sizeof(to)) < 0)
        return;
    if (round > a->cstate.pround) {
        /* The pending file is the round, then the state: the state goes to
         * the .bin atomically (write, then drop the pending). */
        if (sfl_file_write_atomic(to, a->cstate.pbytes + 8, a->cstate.plen - 8) < 0) {
            say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=%s", job,
                quote(q, sizeof(q), sfl_last_error()));
            return;
        }
        sfl_file_free(a->cstate.bytes, a->cstate.len);
        a->cstate.bytes = sfl__malloc(a->cstate.plen - 8 ? a->cstate.plen - 8 : 1);
        if (a->cstate.bytes != NULL) {
            memcpy(a->cstate.bytes, a->cstate.pbytes + 8, a->cstate.plen - 8);
            a->cstate.len = a->cstate.plen - 8;
        } else {
            a->cstate.len = 0;
        }
    }
    (void)unlink(from);
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    a->cstate.pbytes = NULL;
    a->cstate.plen = 0;
    a->cstate.pround = 0;
}

/* After a round trained (loop thread): the state it left is kept pending,
 * on disk first — atomically, 0600 (sfl_file_write_atomic), the round in
 * its first 8 bytes — until a task says whether the round committed
 * (load_client_state). A failed write is logged; the round's update still
 * goes out, and the next round trains from the last committed state. */
static void save_client_state(agent_t *a, train_t *w)
{
    uint64_t job = w->task->job_id, round = w->task->round;
    char path[AGENT_PATH_MAX + 64], q[300];
    uint8_t *b;
    size_t n;

    w->cs.in = NULL;
    if (w->cs.out == NULL)
        return;
    n = w->cs.out_len + 8;
    b = sfl__malloc(n);
    if (b == NULL) {
        say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=out of memory", job);
        return;
    }
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(round >> (8 * i));
    memcpy(b + 8, w->cs.out, w->cs.out_len);
    if (cstate_path(a, job, 1, path, sizeof(path)) < 0 || sfl_file_write_atomic(path, b, n) < 0) {
        say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=%s", job,
            quote(q, sizeof(q), sfl_last_error()));
        sfl_file_free(b, n);
        return;
    }
    if (a->cstate.job != job) {
        cstate_clear(a);
        a->cstate.job = job;
        cstate_read(a, job, 0, &a->cstate.bytes, &a->cstate.len);
    }
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    a->cstate.pbytes = b;
    a->cstate.plen = n;
    a->cstate.pround = round;
}

static agent_state_t submit(agent_t *a);

/* Connected and joined, nothing in hand: train what waited, or keep the
 * stream, or act on how it ended. */
static agent_state_t settle(agent_t *a)
{
    uint64_t now = uv_now(a->loop);

    while (a->next != NULL) {
        sfl_task_t *t = a->next;

        a->next = NULL;
        if (train_start(a, t) == 0)
            return AGENT_TRAINING;
    }
    if (a->sub_call != NULL)
        return AGENT_SUBSCRIBED;
    if (a->resub_reset)
        return backoff(a, "subscribe", SFL_GRPC_STATUS_UNAVAILABLE, "stream failed");
    if (a->resub_at > now) {
        uv_timer_start(&a->timer, on_timer, a->resub_at - now, 0);
        return AGENT_WAITING;
    }
    return subscribe(a);
}

/* The update in the outbox is done with (answered or given up). */
static agent_state_t drop_outbox(agent_t *a)
{
    train_free(a->outbox);
    a->outbox = NULL;
    return settle(a);
}

static agent_state_t joined(agent_t *a, const sfl_join_reply_t *r)
{
    uint64_t hb;
    char hex[2 * SFL_SEAL_PK_BYTES + 1];

    /* Tasks are verified against the pinned key whatever Join says; a
     * coordinator presenting another key is not ours. */
    if (sodium_memcmp(r->coordinator_key, a->coord_pk, SFL_SEAL_PK_BYTES) != 0) {
        say(a, SFL_LOG_ERROR, "coordinator_key_mismatch", "got=%s",
            sfl_seal_pk_to_hex(r->coordinator_key, hex));
        return fatal(a, "join", SFL_EBADSIG, "coordinator key differs from coordinator_pk",
                     "pin the coordinator's key: " AGENT_PK_HINT);
    }
    a->agent_id = r->agent_id;
    a->attempt = 0;
    a->stats.joins++;
    hb = r->heartbeat_interval_ms < a->cfg.heartbeat_ms ? r->heartbeat_interval_ms
                                                        : a->cfg.heartbeat_ms;
    a->hb_ms = (uint32_t)hb;
    uv_timer_start(&a->hb_timer, on_hb_timer, hb, hb);
    say(a, SFL_LOG_INFO, "joined", "agent_id=%" PRIu64 " heartbeat_ms=%" PRIu64
        " retry_after_ms=%u", a->agent_id, hb, r->retry_after_ms);
    a->resub_at = r->retry_after_ms ? resub_time(a, r->retry_after_ms) : 0;
    a->saw_wait = a->resub_reset = 0;
    if (a->outbox != NULL)
        return submit(a);
    if (a->work != NULL)
        return AGENT_TRAINING;
    return settle(a);
}

/* ---- vertical rounds (vblock.h) ---------------------------------------------- */

static void on_step(sfl_grpc_call_t *call, int status, const char *message,
                    const uint8_t *resp, size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_ack_t ack;
    char q[300], sq[80];

    if (call == a->step_call)
        a->step_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        say(a, SFL_LOG_WARN, "step_failed", "status=%s message=%s",
            status_name(sq, sizeof(sq), status), quote(q, sizeof(q), message));
        return;
    }
    if (sfl_msg_ack_unpack(resp, len, NULL, &ack) < 0) {
        say(a, SFL_LOG_WARN, "step_failed", "error=%s", quote(q, sizeof(q), sfl_last_error()));
        return;
    }
    if ((unsigned)ack.status < sizeof(a->stats.acks) / sizeof(a->stats.acks[0]))
        a->stats.acks[ack.status]++;
    if (ack.status != SFL_ACK_ACCEPTED)
        say(a, SFL_LOG_WARN, "step_ack", "job=%" PRIu64 " round=%" PRIu64 " status=%s reason=%s",
            ack.job_id, ack.round, sfl_msg_ack_name(ack.status), quote(q, sizeof(q), ack.reason));
}

/* Sends the answer to iteration it: the bytes of the last answer when it
 * is that one's (a reconnect), else a fresh one (never twice). */
static void vert_answer(agent_t *a, uint64_t it, const double *b, size_t nb)
{
    sfl_step_answer_t m = {0};
    uint8_t *msg = NULL, *buf = NULL;
    size_t len = 0, blen = 0;
    uint64_t first;
    char q[300];
    int rc;

    if (a->link == NULL)
        return;
    agent_vert_round(a->vert, &m.job_id, &m.round, &m.attempt, &first);
    if (a->vlast != NULL && a->vlast_it == it) {
        msg = a->vlast;
        len = a->vlast_len;
    } else if ((rc = agent_vert_step(a->vert, it, b, nb, &msg, &len)) < 0) {
        say(a, SFL_LOG_WARN, "step_refused", "job=%" PRIu64 " round=%" PRIu64 " iteration=%" PRIu64
            " error=%s", m.job_id, m.round, it, quote(q, sizeof(q), sfl_last_error()));
        return;
    } else {
        sfl__free(a->vlast);
        a->vlast = msg;
        a->vlast_len = len;
        a->vlast_it = it;
    }
    m.agent_id = a->agent_id;
    m.iteration = it;
    m.msg = msg;
    m.msg_len = len;
    agent_vert_objective(a->vert, it, &m.objective, &m.objective_rows);
    if ((rc = sfl_msg_step_answer_pack(&m, &buf, &blen)) < 0 ||
        (rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_STEP, buf, blen,
                                  (uint32_t)a->cfg.connect_timeout_ms, on_step, a,
                                  &a->step_call)) < 0) {
        a->step_call = NULL;
        say(a, SFL_LOG_WARN, "step_failed", "job=%" PRIu64 " iteration=%" PRIu64 " error=%s",
            m.job_id, it, quote(q, sizeof(q), sfl_last_error()));
    }
    sfl_msg_buf_free(buf);
    a->stats.steps++;
}

static void vert_task(agent_t *a, sfl_task_t *t)
{
    agent_vert_cfg_t vc = {a->data, a->cfg.block_first, a->cfg.state_dir, a->cfg.max_epsilon,
                           (int)a->cfg.dp_test_noise};
    double *b = NULL;
    int rc;

    if (a->cfg.block_first == 0) {
        refuse(a, t, "a vertical task, but this agent holds whole rows (no block configured)");
        return;
    }
    rc = agent_vert_begin(&a->vert, t, &vc);
    if (rc == -EEXIST) {
        say(a, SFL_LOG_DEBUG, "vertical_round_known", "job=%" PRIu64 " round=%" PRIu64
            " attempt=%u", t->job_id, t->round, t->attempt);
        sfl_msg_task_free(t);
        return;
    }
    if (rc < 0) {
        refuse(a, t, sfl_last_error());
        return;
    }
    sfl__free(a->vlast);
    a->vlast = NULL;
    say(a, SFL_LOG_DEBUG, "vertical_round", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u "
        "iterations=%" PRIu64 "+%u of %" PRIu64 " clients=%u", t->job_id, t->round, t->attempt,
        t->first_iteration, t->round_iterations, t->iterations, t->clients);
    if ((b = sfl__calloc(t->model->dim, sizeof(double))) != NULL) {
        sfl_spvec_scatter(t->model, b);
        vert_answer(a, t->first_iteration, b, t->model->dim);
    }
    sfl__free(b);
    sfl_msg_task_free(t);
}

static void vert_step_in(agent_t *a, const sfl_vstep_t *s)
{
    uint64_t job = 0, round = 0, first;
    uint32_t attempt = 0;

    if (a->vert != NULL)
        agent_vert_round(a->vert, &job, &round, &attempt, &first);
    if (a->vert == NULL || s->job_id != job || s->round != round || s->attempt != attempt) {
        say(a, SFL_LOG_WARN, "step_ignored", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u "
            "iteration=%" PRIu64 " reason=\"not the vertical round in hand\"", s->job_id,
            s->round, s->attempt, s->iteration);
        return;
    }
    vert_answer(a, s->iteration, s->bcast, s->nbcast);
}

/* ---- update mode 2 (sagent.h) ------------------------------------------------- */

static void on_sa(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                  size_t len, void *ud)
{
    agent_t *a = ud;
    sfl_ack_t ack;
    char q[300], sq[80];

    if (call == a->sa_call)
        a->sa_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        say(a, SFL_LOG_WARN, "secagg_failed", "status=%s message=%s",
            status_name(sq, sizeof(sq), status), quote(q, sizeof(q), message));
        return;
    }
    if (sfl_msg_ack_unpack(resp, len, NULL, &ack) < 0)
        return;
    if ((unsigned)ack.status < sizeof(a->stats.acks) / sizeof(a->stats.acks[0]))
        a->stats.acks[ack.status]++;
    if (ack.status != SFL_ACK_ACCEPTED)
        say(a, SFL_LOG_WARN, "secagg_ack", "job=%" PRIu64 " round=%" PRIu64 " status=%s reason=%s",
            ack.job_id, ack.round, sfl_msg_ack_name(ack.status), quote(q, sizeof(q), ack.reason));
}

/* The round's answer to `stage` buf (taken), or its failure: the client
 * aborted. */
static void sa_send(agent_t *a, int rc, uint8_t *buf, size_t len, uint32_t stage,
                    const char *what)
{
    char q[300];

    if (rc == 0 && buf != NULL && a->cfg.secagg_test_stop && stage >= a->cfg.secagg_test_stop) {
        /* a client that drops out: gone, at once */
        say(a, SFL_LOG_INFO, "secagg_test_stop", "stage=%u", stage);
        fflush(a->log);
        (void)kill(getpid(), SIGKILL);
    }
    if (rc < 0) {
        say(a, SFL_LOG_WARN, "secagg_abort", "during=%s error=%s", what,
            quote(q, sizeof(q), sfl_last_error()));
        agent_sa_free(a->sa);
        a->sa = NULL;
    } else if (buf != NULL && a->link != NULL &&
               sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_SECAGG, buf, len,
                                   (uint32_t)a->cfg.connect_timeout_ms, on_sa, a,
                                   &a->sa_call) < 0) {
        a->sa_call = NULL;
        say(a, SFL_LOG_WARN, "secagg_failed", "during=%s error=%s", what,
            quote(q, sizeof(q), sfl_last_error()));
    }
    sfl_msg_buf_free(buf);
}

/* A mode-2 task: its keys at once, then the training. */
static agent_state_t sa_task(agent_t *a, sfl_task_t *t, agent_state_t from)
{
    sfl_sa_policy_t pol;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (a->sa != NULL) {
        uint64_t job, round;
        uint32_t attempt;

        agent_sa_round(a->sa, &job, &round, &attempt);
        if (job == t->job_id && round == t->round && attempt == t->attempt) {
            /* the task again after a reconnect: the round is in hand (a
             * stage missed meanwhile makes it drop out, never start over
             * with new keys) */
            sfl_msg_task_free(t);
            return from;
        }
    }
    if (from != AGENT_SUBSCRIBED) {
        refuse(a, t, "busy: a secure aggregation round needs the agent from its start");
        return from;
    }
    if (t->model == NULL) {
        refuse(a, t, "secure aggregation: the task has no model");
        return from;
    }
    if ((a->sa_st.job != t->job_id || a->sa_st.d != t->model->dim) &&
        agent_sa_state_load(a->cfg.state_dir, t->job_id, t->model->dim, &a->sa_st) < 0) {
        refuse(a, t, sfl_last_error());
        return from;
    }
    /* none taken yet: any round goes, round 0 attempt 0 (a statistics
     * round's first) too; after one, only a later (round, attempt) */
    if (a->sa_st.taken && (t->round < a->sa_st.round ||
                           (t->round == a->sa_st.round && t->attempt <= a->sa_st.attempt))) {
        refuse(a, t, "a secure aggregation round not after the last one taken (a replay)");
        return from;
    }
    agent_sa_free(a->sa);
    a->sa = NULL;
    pol = (sfl_sa_policy_t){.min_n = (uint32_t)a->cfg.secagg_min_cohort,
                            .min_t = (uint32_t)a->cfg.secagg_min_threshold,
                            .min_degree = (uint32_t)a->cfg.secagg_min_degree,
                            .max_colluders =
                                a->cfg.secagg_max_colluders == AGENT_COLLUDERS_THIRD
                                    ? SFL_SA_COLLUDERS_THIRD
                                    : (uint32_t)a->cfg.secagg_max_colluders};
    rc = agent_sa_begin(t, a->agent_id, a->id, &pol, &a->sa, &buf, &len);
    if (rc < 0) {
        refuse(a, t, sfl_last_error());
        return from;
    }
    /* on disk before the keys go out: after a restart the round is still
     * taken */
    a->sa_st.round = t->round;
    a->sa_st.attempt = t->attempt;
    if (agent_sa_state_save(a->cfg.state_dir, &a->sa_st) < 0) {
        refuse(a, t, sfl_last_error());
        sfl_msg_buf_free(buf);
        agent_sa_free(a->sa);
        a->sa = NULL;
        return from;
    }
    if (a->cfg.secagg_test_weight) {
        agent_sa_test_weight(a->sa, (double)a->cfg.secagg_test_weight);
        say(a, SFL_LOG_WARN, "secagg_test_weight", "weight=%" PRIu64, a->cfg.secagg_test_weight);
    }
    sa_send(a, 0, buf, len, 1, "keys");
    say(a, SFL_LOG_DEBUG, "secagg_round", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u members=%u "
        "threshold=%u degree=%u", t->job_id, t->round, t->attempt, t->secagg->nmembers,
        t->secagg->threshold, t->secagg->degree);
    return train_start(a, t) == 0 ? AGENT_TRAINING : from;
}

static void sa_stage_in(agent_t *a, const sfl_msg_sa_stage_t *st)
{
    uint64_t job = 0, round = 0;
    uint32_t attempt = 0;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (a->sa != NULL)
        agent_sa_round(a->sa, &job, &round, &attempt);
    if (a->sa == NULL || st->job_id != job || st->round != round || st->attempt != attempt) {
        say(a, SFL_LOG_WARN, "secagg_ignored", "job=%" PRIu64 " round=%" PRIu64 " stage=%u "
            "reason=\"not the round in hand\"", st->job_id, st->round, st->stage);
        return;
    }
    rc = agent_sa_stage(a->sa, st, &buf, &len);
    sa_send(a, rc, buf, len, st->stage, "a stage");
    if (rc == 0 && st->stage == 5) {
        agent_sa_free(a->sa); /* released: the round is over for it */
        a->sa = NULL;
    }
}

/* The training of a mode-2 round ended: its input, to the client. */
static void sa_trained(agent_t *a, train_t *w)
{
    uint64_t job = 0, round = 0;
    uint32_t attempt = 0, d;
    uint8_t *buf = NULL;
    size_t len = 0;
    char q[300];
    int rc;

    if (a->sa != NULL)
        agent_sa_round(a->sa, &job, &round, &attempt);
    if (w->rc < 0 || w->aborted || a->sa == NULL || job != w->task->job_id ||
        round != w->task->round || attempt != w->task->attempt) {
        say(a, w->rc < 0 ? SFL_LOG_ERROR : SFL_LOG_INFO, "training_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " error=%s", w->task->job_id, w->task->round,
            quote(q, sizeof(q), w->rc < 0 ? w->err : "the secure aggregation round ended"));
        train_free(w);
        return;
    }
    d = agent_sa_dim(a->sa);
    a->stats.trained++;
    /* a statistics round has no residual (sagent.h): the job's stays */
    if (a->sa_st.job != job || (!agent_sa_stats(a->sa) && a->sa_st.d != d))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: the job's state is not loaded");
    else if (w->update == NULL)
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: the work made no update");
    else
        rc = agent_sa_update(a->sa, w->update, w->samples, &w->rep, a->sa_st.resid, &buf,
                             &len);
    /* the residual on disk before the input goes out */
    if (rc == 0 && (rc = agent_sa_state_save(a->cfg.state_dir, &a->sa_st)) < 0) {
        sfl_msg_buf_free(buf);
        buf = NULL;
    }
    say(a, SFL_LOG_DEBUG, "trained", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u ms=%" PRIu64
        " mode=secagg", w->task->job_id, w->task->round, w->task->attempt,
        uv_now(a->loop) - w->started_ms);
    sa_send(a, rc, buf, len, 3, "the input");
    train_free(w);
}

/* The job this agent works for ends (info; per-round lines are debug):
 * at a task of another job, or when the coordinator has no running job
 * for it. Nothing when there is none. */
static void job_over(agent_t *a, const char *why)
{
    char q[300];

    if (a->job.id == 0)
        return;
    say(a, SFL_LOG_INFO, "job_end", "job=%" PRIu64 " tasks=%" PRIu64 " last_round=%" PRIu64
        " reason=%s", a->job.id, a->job.tasks, a->job.last_round, quote(q, sizeof(q), why));
    a->job.id = 0;
}

/* A verified task: its job starts for this agent at its first one. */
static void job_seen(agent_t *a, const sfl_task_t *t)
{
    char q[2 * SFL_MSG_NAME_LEN];

    if (a->job.id != t->job_id) {
        job_over(a, "a task of another job");
        a->job.id = t->job_id;
        a->job.tasks = 0;
        say(a, SFL_LOG_INFO, "job_start", "job=%" PRIu64 " round=%" PRIu64 " algorithm=%s "
            "kind=%s", t->job_id, t->round, quote(q, sizeof(q), t->algorithm),
            t->rows > 0 ? "vertical"
            : t->update_mode == SFL_UPDATE_MODE_SECURE_AGG ? "secure_aggregation"
                                                            : "horizontal");
    }
    a->job.tasks++;
    a->job.last_round = t->round;
}

static agent_state_t task_in(agent_t *a, sfl_task_t *t, agent_state_t from)
{
    int rc;

    a->stats.tasks++;
    rc = sfl_seal_verify_detached(a->coord_pk, SFL_MSG_TASK_CONTEXT, t->signed_bytes,
                                  t->signed_len, t->signature);
    if (rc < 0) {
        refuse(a, t, "signature does not verify with coordinator_pk");
        return from;
    }
    /* Verified; the model hash was checked against the model by
     * sfl_msg_task_or_wait_unpack. The signed copy is no longer needed. */
    sfl__free(t->signed_bytes);
    t->signed_bytes = NULL;
    t->signed_len = 0;
    job_seen(a, t);
    if (t->rows > 0) {
        vert_task(a, t);
        return from;
    }
    if ((rc = agent_task_check(t, a->data)) < 0) {
        refuse(a, t, sfl_last_error());
        return from;
    }
    if (t->update_mode == SFL_UPDATE_MODE_SECURE_AGG)
        return sa_task(a, t, from);
    if (t->has_moments && t->moments == NULL && !std_held(a, t)) {
        /* The coordinator sends a job's statistics with the first task of a
         * session; this one names statistics that never arrived here (or
         * were refused). A new Join starts a session that brings them. */
        refuse(a, t, "the task names statistics this agent does not hold (sent once a "
               "session): rejoining");
        if (from == AGENT_SUBSCRIBED)
            return backoff(a, "task", SFL_GRPC_STATUS_UNAVAILABLE,
                           "the job's statistics are missing: rejoining");
        return from;
    }
    if (from == AGENT_SUBSCRIBED)
        return train_start(a, t) == 0 ? AGENT_TRAINING : from;
    /* Busy: one task waits, the newest. */
    if (a->next != NULL) {
        say(a, SFL_LOG_WARN, "task_dropped", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u "
            "reason=\"superseded while busy\"", a->next->job_id, a->next->round,
            a->next->attempt);
        sfl_msg_task_free(a->next);
    }
    a->next = t;
    return from;
}

static void note_wait(agent_t *a, const sfl_wait_t *w)
{
    char q[300];

    a->stats.waits++;
    a->saw_wait = 1;
    a->resub_at = resub_time(a, w->retry_after_ms);
    say(a, SFL_LOG_DEBUG, "wait", "retry_after_ms=%u reason=%s", w->retry_after_ms,
        quote(q, sizeof(q), w->reason));
    if (strcmp(w->reason, SFL_MSG_WAIT_NO_JOB) == 0)
        job_over(a, w->reason);
}

static void note_stream_end(agent_t *a, const ev_t *e)
{
    char q[300], sq[80];

    if (e->status == SFL_GRPC_STATUS_OK) {
        if (!a->saw_wait)
            a->resub_at = uv_now(a->loop) + a->cfg.backoff_min_ms;
        return;
    }
    a->resub_reset = 1;
    say(a, SFL_LOG_WARN, "stream_ended", "status=%s message=%s",
        status_name(sq, sizeof(sq), e->status), quote(q, sizeof(q), e->message));
}

static agent_state_t submit(agent_t *a)
{
    train_t *w = a->outbox;
    int64_t left = w->task->deadline_ms - (int64_t)unix_ms();
    uint64_t timeout = a->cfg.connect_timeout_ms + (left > 0 ? (uint64_t)left : 0);
    int rc;

    if (w->tries >= AGENT_SUBMIT_TRIES) {
        say(a, SFL_LOG_WARN, "update_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " attempt=%u tries=%u",
            w->task->job_id, w->task->round, w->task->attempt, w->tries);
        return drop_outbox(a);
    }
    if (timeout > SUBMIT_TIMEOUT_MAX_MS)
        timeout = SUBMIT_TIMEOUT_MAX_MS;
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_SUBMIT, w->msg, w->len,
                             (uint32_t)timeout, on_submit, a, &a->submit_call);
    if (rc == SFL_ELIMIT) {
        say(a, SFL_LOG_ERROR, "update_dropped", "job=%" PRIu64 " round=%" PRIu64 " bytes=%zu "
            "reason=\"larger than the message limit\"", w->task->job_id, w->task->round, w->len);
        return drop_outbox(a);
    }
    if (rc < 0) {
        a->submit_call = NULL;
        return backoff(a, "submit", rc, sfl_last_error());
    }
    w->tries++;
    a->stats.submits++;
    say(a, SFL_LOG_DEBUG, "submitting",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u bytes=%zu try=%u",
        w->task->job_id, w->task->round, w->task->attempt, w->len, w->tries);
    return AGENT_SUBMITTING;
}

/* A result, kept for after the rejoin or dropped. */
static void keep_result(agent_t *a, train_t *w)
{
    char q[300];

    if (w->rc < 0 || w->aborted || a->stopping) {
        say(a, w->rc < 0 ? SFL_LOG_ERROR : SFL_LOG_INFO, "training_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " error=%s", w->task->job_id, w->task->round,
            quote(q, sizeof(q), w->rc < 0 ? w->err : w->aborted ? "aborted" : "stopping"));
        train_free(w);
        return;
    }
    a->stats.trained++;
    if (w->cs.note[0] != '\0')
        say(a, SFL_LOG_WARN, "client_state", "job=%" PRIu64 " error=%s", w->task->job_id,
            quote(q, sizeof(q), w->cs.note));
    save_client_state(a, w);
    train_free(a->outbox);
    a->outbox = w;
    say(a, SFL_LOG_DEBUG, "trained", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u ms=%" PRIu64
        " bytes=%zu", w->task->job_id, w->task->round, w->task->attempt,
        uv_now(a->loop) - w->started_ms, w->len);
}

static agent_state_t trained(agent_t *a, train_t *w, agent_state_t from)
{
    if (w->mode2) {
        sa_trained(a, w);
        return from == AGENT_TRAINING ? settle(a) : from;
    }
    if (from == AGENT_SUBMITTING) {
        /* Cannot happen (one task at a time); never displace the update
         * being submitted. */
        w->aborted = 1;
        keep_result(a, w);
        return from;
    }
    keep_result(a, w);
    if (a->outbox != NULL)
        return submit(a);
    return from == AGENT_TRAINING ? settle(a) : from;
}

static agent_state_t acked(agent_t *a, const sfl_ack_t *ack)
{
    /* Late is what over-selection does to the slowest members every round:
     * debug, as accepted; the verdicts that mean something is wrong warn. */
    int good = ack->status == SFL_ACK_ACCEPTED || ack->status == SFL_ACK_DUPLICATE ||
               ack->status == SFL_ACK_LATE;
    char q[300];

    if ((unsigned)ack->status < sizeof(a->stats.acks) / sizeof(a->stats.acks[0]))
        a->stats.acks[ack->status]++;
    say(a, good ? SFL_LOG_DEBUG : SFL_LOG_WARN, "ack", "job=%" PRIu64 " round=%" PRIu64
        " attempt=%u status=%s reason=%s", ack->job_id, ack->round, ack->attempt,
        sfl_msg_ack_name(ack->status), quote(q, sizeof(q), ack->reason));
    /* Every verdict is final for these bytes (docs/protocol.md). */
    return drop_outbox(a);
}

static agent_state_t submit_failed(agent_t *a, const ev_t *e)
{
    int s = e->status;
    char q[300], sq[80];

    /* Transport trouble: reconnect and send the same bytes again (a retry
     * whose first ack was lost gets DUPLICATE). A refusal of the request
     * itself would only repeat. */
    if (s == SFL_GRPC_STATUS_UNAVAILABLE || s == SFL_GRPC_STATUS_DEADLINE_EXCEEDED ||
        s == SFL_GRPC_STATUS_CANCELLED || s == SFL_GRPC_STATUS_UNKNOWN ||
        s == SFL_GRPC_STATUS_INTERNAL)
        return backoff(a, "submit", s, e->message);
    say(a, SFL_LOG_ERROR, "update_dropped",
        "job=%" PRIu64 " round=%" PRIu64 " status=%s message=%s",
        a->outbox->task->job_id, a->outbox->task->round, status_name(sq, sizeof(sq), s),
        quote(q, sizeof(q), e->message));
    return drop_outbox(a);
}

static agent_state_t stop_all(agent_t *a)
{
    drop_link(a);
    uv_timer_stop(&a->timer);
    uv_timer_stop(&a->hb_timer);
    if (a->resolving)
        (void)uv_cancel((uv_req_t *)&a->gai);
    /* A running work cannot be interrupted; its result is dropped. */
    if (a->work != NULL)
        a->work->aborted = 1;
    sfl_msg_task_free(a->next);
    a->next = NULL;
    train_free(a->outbox);
    a->outbox = NULL;
    say(a, SFL_LOG_INFO, "stopping", "%s", "");
    return AGENT_DISCONNECTED;
}

/* ---- the state machine ---------------------------------------------------------- */

static void step(agent_t *a, const ev_t *e)
{
    agent_state_t from = a->state, to = from;

    if (e->type == EV_STOP) {
        to = stop_all(a);
        goto out;
    }
    switch (from) {
    case AGENT_DISCONNECTED:
        if (e->type == EV_START)
            to = connect_begin(a);
        else if (e->type == EV_TRAINED)
            keep_result(a, e->train); /* stopping: dropped */
        else if (e->type == EV_TASK)
            sfl_msg_task_free(e->task);
        break;
    case AGENT_BACKOFF:
    case AGENT_CONNECTING:
    case AGENT_JOINING:
        switch (e->type) {
        case EV_TIMER:
            if (from == AGENT_BACKOFF)
                to = connect_begin(a);
            break;
        case EV_RESOLVED:
            if (from == AGENT_CONNECTING)
                to = connect_addr(a, e);
            break;
        case EV_CONNECTED:
            if (from == AGENT_CONNECTING && e->status < 0)
                to = fatal(a, "connect", e->status, e->message,
                           "coordinator and server_name must name the coordinator, whose "
                           "certificate has the coordinator role (sfl-pki coordinator)");
            else if (from == AGENT_CONNECTING)
                to = join(a);
            break;
        case EV_JOINED:
            if (from == AGENT_JOINING)
                to = joined(a, e->join);
            break;
        case EV_JOIN_FAILED:
            if (from == AGENT_JOINING)
                to = backoff(a, "join", e->status, e->message);
            break;
        case EV_CLOSED:
            to = backoff(a, from == AGENT_JOINING ? "join" : "connect", e->status, e->message);
            break;
        case EV_TRAINED:
            keep_result(a, e->train); /* submitted after the rejoin */
            break;
        case EV_TASK:
            sfl_msg_task_free(e->task);
            break;
        default:
            break;
        }
        break;
    case AGENT_WAITING:
    case AGENT_SUBSCRIBED:
    case AGENT_TRAINING:
    case AGENT_SUBMITTING:
        switch (e->type) {
        case EV_TIMER:
            if (from == AGENT_WAITING)
                to = settle(a);
            break;
        case EV_TASK:
            to = task_in(a, e->task, from);
            break;
        case EV_STEP:
            vert_step_in(a, e->vstep);
            break;
        case EV_SA:
            sa_stage_in(a, e->sa);
            break;
        case EV_WAIT:
            note_wait(a, e->wait);
            break;
        case EV_STREAM_END:
            note_stream_end(a, e);
            if (from == AGENT_SUBSCRIBED)
                to = settle(a);
            break;
        case EV_TRAINED:
            to = trained(a, e->train, from);
            break;
        case EV_ACK:
            if (from == AGENT_SUBMITTING)
                to = acked(a, e->ack);
            break;
        case EV_SUBMIT_FAILED:
            if (from == AGENT_SUBMITTING)
                to = submit_failed(a, e);
            break;
        case EV_CLOSED:
            to = backoff(a, agent_state_name(from), e->status, e->message);
            break;
        default:
            break;
        }
        break;
    }
out:
    a->state = to;
    if (to != from && a->observer != NULL)
        a->observer(a, from, to, a->observer_ud);
    /* fatal() stopped the agent from inside the machine */
    if (a->failed)
        maybe_finish_stop(a);
}

/* ---- start and stop --------------------------------------------------------------- */

int agent_start(agent_t *a)
{
    char hex[2 * SFL_SEAL_PK_BYTES + 1];
    int rc;

    if (a->started || a->stopping)
        return -EALREADY;
    if ((rc = uv_timer_init(a->loop, &a->timer)) < 0)
        return rc;
    uv_timer_init(a->loop, &a->hb_timer);
    a->timer.data = a->hb_timer.data = a;
    a->handles = 2;
    a->started = 1;
    say(a, SFL_LOG_INFO, "starting", "version=\"%s\" identity=%s identity_created=%d samples=%u "
        "eval_samples=%u features=%u labels=%u coordinator=%s", AGENT_VERSION,
        sfl_seal_pk_to_hex(a->id->pk, hex), a->id_created, a->data->X->nrows,
        a->eval ? a->eval->X->nrows : 0, a->data->X->ncols, a->summary.nlabels,
        a->cfg.coordinator);
    if (a->cfg.dp_test_noise)
        say(a, SFL_LOG_WARN, "dp_test_noise", "%s", "reason=\"privacy noise from the job's seed, "
            "as sfl-sim draws it: nothing this agent sends in a private job is private; tests "
            "only\"");
    if (a->cfg.block_first != 0)
        say(a, SFL_LOG_INFO, "block", "first_column=%u columns=%u ids_file=%s", a->cfg.block_first,
            a->cfg.block_cols, a->cfg.ids_file);
    step(a, &(ev_t){.type = EV_START});
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    agent_t *a = h->data;

    if (--a->handles > 0)
        return;
    a->started = 0;
    say(a, SFL_LOG_INFO, "stopped", "%s", "");
    if (a->stopped_cb != NULL)
        a->stopped_cb(a, a->stopped_ud); /* may free a */
}

/* The handles close once nothing can use them any more: no connection,
 * no name lookup and no work in flight. */
static void maybe_finish_stop(agent_t *a)
{
    if (!a->stopping || a->closing_handles || a->nlinks > 0 || a->resolving || a->work != NULL)
        return;
    a->closing_handles = 1;
    uv_close((uv_handle_t *)&a->timer, on_handle_closed);
    uv_close((uv_handle_t *)&a->hb_timer, on_handle_closed);
}

void agent_set_fatal(agent_t *a, agent_stopped_cb cb, void *ud)
{
    a->fatal_cb = cb;
    a->fatal_ud = ud;
}

int agent_failed(const agent_t *a)
{
    return a->failed;
}

void agent_stop(agent_t *a, agent_stopped_cb cb, void *ud)
{
    if (!a->started || a->stopping)
        return;
    a->stopping = 1;
    a->stopped_cb = cb;
    a->stopped_ud = ud;
    step(a, &(ev_t){.type = EV_STOP});
    maybe_finish_stop(a);
}

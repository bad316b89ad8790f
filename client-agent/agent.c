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
#include "agent_int.h"

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
#define PATH_HEARTBEAT "/sfl.v1.Coordinator/Heartbeat"

/* Longest SubmitUpdate deadline: a slow uplink gets until the task's
 * deadline plus the connect timeout, but never more than this. */
#define SUBMIT_TIMEOUT_MAX_MS 600000u
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
    EV_STAGE
} ev_type_t;

typedef struct ev {
    ev_type_t type;
    int status;          /* gRPC status (>= 0) or an sfl / -errno code */
    const char *message; /* detail for status */
    const struct addrinfo *addr;   /* EV_RESOLVED */
    const sfl_join_reply_t *join;  /* EV_JOINED */
    sfl_task_t *task;              /* EV_TASK: step() owns it */
    const sfl_wait_t *wait;        /* EV_WAIT */
    agent_work_t *train;           /* EV_TRAINED: step() owns it */
    const sfl_ack_t *ack;          /* EV_ACK */
    const agent_stage_t *stage;    /* EV_STAGE */
} ev_t;

static void step(agent_ctx_t *a, const ev_t *e);
static void on_hb_timer(uv_timer_t *t);
static void maybe_finish_stop(agent_ctx_t *a);

/* ---- logging ------------------------------------------------------------ */

void agent__say(const agent_ctx_t *a, sfl_log_level_t level, const char *event, const char *fmt,
                ...)
{
    va_list ap;

    if (a->log == NULL || level < a->cfg.log_level)
        return;
    va_start(ap, fmt);
    sfl_log_vwrite(a->log, level, event, fmt, ap);
    va_end(ap);
}

const char *agent__quote(char *out, size_t cap, const char *s)
{
    return sfl_log_quote(s, out, cap);
}

const char *agent__status_name(char *out, size_t cap, int status)
{
    return status < 0 ? agent__quote(out, cap, sfl_strerror(status)) : sfl_grpc_status_name(status);
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

/* coordinator = HOST:PORT[,HOST:PORT...] into a->addr: 1 to
 * AGENT_MAX_COORDINATORS addresses, each host:port ([v6]:port). */
static int split_addresses(agent_ctx_t *a, const char *list)
{
    const char *p = list;
    int rc;

    a->naddr = 0;
    for (;;) {
        size_t n = strcspn(p, ",");
        char one[sizeof(a->addr[0].text)];

        if (a->naddr == AGENT_MAX_COORDINATORS)
            return sfl__fail(SFL_EINVAL, "coordinator: at most %d addresses",
                             AGENT_MAX_COORDINATORS);
        if (n == 0 || n >= sizeof(one))
            return sfl__fail(SFL_EINVAL, "coordinator: '%s' is not a list of host:port",
                             list);
        memcpy(one, p, n);
        one[n] = '\0';
        rc = sfl_grpcconn_split_hostport(one, a->addr[a->naddr].host,
                                         sizeof(a->addr[0].host), a->addr[a->naddr].port,
                                         sizeof(a->addr[0].port));
        if (rc < 0) {
            char detail[256];

            snprintf(detail, sizeof(detail), "%s", sfl_last_error());
            return sfl__fail(rc, "coordinator: %s", detail);
        }
        memcpy(a->addr[a->naddr].text, one, n + 1);
        a->naddr++;
        if (p[n] == '\0')
            return 0;
        p += n + 1;
    }
}

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

/* ---- construction ----------------------------------------------------------- */

int agent_new(uv_loop_t *loop, const agent_config_t *cfg, agent_ctx_t **out)
{
    agent_ctx_t *a;
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
    if ((a->kind = sfl__calloc(agent_nshapes, sizeof(*a->kind))) == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < agent_nshapes; i++)
        if (agent_shapes[i]->state_size > 0 &&
            (a->kind[i] = sfl__calloc(1, agent_shapes[i]->state_size)) == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
    if ((rc = split_addresses(a, cfg->coordinator)) < 0)
        goto out;
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
    if ((rc = agent__local_load(a)) < 0)
        goto out;
    for (uint32_t i = 0; i < a->naddr; i++) {
        const char *vh = cfg->server_name[0] ? cfg->server_name : a->addr[i].host;
        sfl_tls_config_t t = {
            .cert_file = cfg->cert,
            .key_file = cfg->key,
            .ca_file = cfg->ca,
            .verify_host = vh,
            .alpn = "h2",
            .alpn_required = 1,
        };

        for (uint32_t j = 0; j < i && a->addr[i].tls == NULL; j++)
            if (strcmp(vh, cfg->server_name[0] ? cfg->server_name : a->addr[j].host) == 0)
                a->addr[i].tls = a->addr[j].tls;
        if (a->addr[i].tls != NULL)
            continue;
        if ((rc = sfl_tls_new(&t, 0, &a->addr[i].tls)) < 0)
            goto out;
        a->addr[i].tls_owned = 1;
    }
    {
        uint8_t fpr[32];

        /* for the line that says this certificate was revoked */
        if (sfl_tls_cert_sha256(a->addr[0].tls, fpr) == 0)
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

void agent__work_free(agent_work_t *w)
{
    if (w == NULL)
        return;
    sfl_msg_task_free(w->task);
    sfl_msg_buf_free(w->msg);
    sfl_client_state_bytes_free(w->cs.out, w->cs.out_len);
    agent__wipe_update(w->update);
    sfl__free(w);
}

void agent_free(agent_ctx_t *a)
{
    if (a == NULL)
        return;
    /* Only before agent_start or after the stopped callback. */
    assert(a->handles == 0 && a->work == NULL && a->nlinks == 0);
    agent__work_free(a->outbox);
    sfl_msg_task_free(a->next);
    agent__cstate_clear(a);
    sfl_algo_ws_close(&a->ws);
    for (uint32_t i = 0; i < a->naddr; i++)
        if (a->addr[i].tls_owned)
            sfl_tls_free(a->addr[i].tls);
    sfl_identity_free(a->id);
    sfl_dataset_free(a->data);
    sfl_dataset_free(a->eval);
    for (size_t i = 0; a->kind != NULL && i < agent_nshapes; i++) {
        if (a->kind[i] != NULL && agent_shapes[i]->close != NULL)
            agent_shapes[i]->close(a->kind[i]);
        sfl__free(a->kind[i]);
    }
    sfl__free(a->kind);
    sfl__free(a);
}

void agent_set_log(agent_ctx_t *a, FILE *f)
{
    a->log = f;
}

void agent_set_observer(agent_ctx_t *a, agent_state_cb cb, void *ud)
{
    a->observer = cb;
    a->observer_ud = ud;
}

agent_state_t agent_state(const agent_ctx_t *a)
{
    return a->state;
}

const agent_stats_t *agent_stats(const agent_ctx_t *a)
{
    return &a->stats;
}

uint64_t agent_joined_id(const agent_ctx_t *a)
{
    return a->agent_id;
}

const uint8_t *agent_identity_pk(const agent_ctx_t *a)
{
    return a->id->pk;
}

const sfl_dataset_summary_t *agent_summary(const agent_ctx_t *a)
{
    return &a->summary;
}

uint32_t agent_eval_rows(const agent_ctx_t *a)
{
    return a->eval ? a->eval->X->nrows : 0;
}

/* ---- the connection ------------------------------------------------------------ */

/* The link's calls, and every kind's, are gone (cancelled first if
 * cancel). */
static void forget_calls(agent_ctx_t *a, int cancel)
{
    sfl_grpc_call_t *calls[] = {a->join_call, a->sub_call, a->hb_call, a->submit_call};

    for (size_t i = 0; cancel && i < sizeof(calls) / sizeof(calls[0]); i++)
        if (calls[i] != NULL)
            sfl_grpc_cancel(calls[i]);
    a->join_call = a->sub_call = a->hb_call = a->submit_call = NULL;
    for (size_t i = 0; i < agent_nshapes; i++)
        if (agent_shapes[i]->unlink != NULL)
            agent_shapes[i]->unlink(a->kind[i], cancel);
}

/* Cancels the link's calls, detaches and closes it; it frees itself. */
static void drop_link(agent_ctx_t *a)
{
    sfl_grpcconn_t *l = a->link;

    if (l == NULL)
        return;
    forget_calls(a, 1);
    a->link = NULL;
    sfl_grpcconn_close(l);
}

static void on_open(sfl_grpcconn_t *g, void *ud)
{
    agent_ctx_t *a = ud;
    sfl_peer_t peer;

    /* A detached link is closing and never opens. */
    assert(g == a->link);
    a->link_opened = 1;
    a->stats.connects++;
    if (sfl_conn_peer(sfl_grpcconn_conn(g), &peer) == 0) {
        agent__say(a, SFL_LOG_INFO, "connected", "coordinator=%s peer_cn=%s peer_role=%s",
            a->addr[a->cur].text, peer.cn, sfl_role_name(peer.role));
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
    agent_ctx_t *a = ud;
    int current = g == a->link;

    if (current) {
        a->link = NULL;
        forget_calls(a, 0); /* what the session reports while freed is ignored */
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
    agent_ctx_t *a = req->data;

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
    agent_ctx_t *a = ud;
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
    agent_ctx_t *a = ud;
    sfl_msg_limits_t lim;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    sfl_vstep_t vs = {0};
    sfl_msg_sa_stage_t sa = {0};
    char q[300];
    int rc, kind;

    if (call != a->sub_call)
        return;
    sfl_msg_limits_default(&lim);
    lim.max_message = AGENT_MAX_MESSAGE;
    if ((rc = sfl_msg_sub_unpack(msg, len, &lim, &t, &w, &vs, &sa, &kind)) < 0) {
        a->stats.tasks_refused++;
        agent__say(a, SFL_LOG_WARN, "task_refused", "reason=malformed error=%s",
            agent__quote(q, sizeof(q), sfl_last_error()));
        return;
    }
    if (kind == 't')
        step(a, &(ev_t){.type = EV_TASK, .task = t});
    else if (kind == 'w')
        step(a, &(ev_t){.type = EV_WAIT, .wait = &w});
    else {
        /* a stage of a round in hand: its kind's (kind.h) */
        agent_stage_t m = {.kind = kind, .vstep = &vs, .sa = &sa};

        step(a, &(ev_t){.type = EV_STAGE, .stage = &m});
        sfl_msg_vstep_clear(&vs);
        sfl_msg_sa_stage_clear(&sa);
    }
}

static void on_sub_done(sfl_grpc_call_t *call, int status, const char *message, void *ud)
{
    agent_ctx_t *a = ud;

    if (call != a->sub_call)
        return;
    a->sub_call = NULL;
    step(a, &(ev_t){.type = EV_STREAM_END, .status = status, .message = message});
}

static void on_submit(sfl_grpc_call_t *call, int status, const char *message,
                      const uint8_t *resp, size_t len, void *ud)
{
    agent_ctx_t *a = ud;
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

/* Heartbeats in a row without an answer after which the coordinator is
 * taken for gone (on_heartbeat). */
#define AGENT_HB_MISSES 3

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
    agent_ctx_t *a = ud;
    sfl_heartbeat_reply_t r;
    agent_work_t *w;
    char q[300], sq[80];

    if (call != a->hb_call)
        return;
    a->hb_call = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        agent__say(a, SFL_LOG_WARN, "heartbeat_failed", "status=%s message=%s",
            agent__status_name(sq, sizeof(sq), status), agent__quote(q, sizeof(q), message));
        if (status == SFL_GRPC_STATUS_DEADLINE_EXCEEDED)
            a->hb_misses++; /* on_hb_timer acts on it, outside this link's callbacks */
        return;
    }
    a->hb_misses = 0;
    if (sfl_msg_heartbeat_reply_unpack(resp, len, NULL, &r) < 0) {
        agent__say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s",
            agent__quote(q, sizeof(q), sfl_last_error()));
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
        agent__say(a, SFL_LOG_WARN, "task_aborted", "job=%" PRIu64 " round=%" PRIu64 " attempt=%u",
            w->task->job_id, w->task->round, w->task->attempt);
    }
}

static void on_hb_timer(uv_timer_t *t)
{
    agent_ctx_t *a = t->data;
    sfl_heartbeat_req_t r;
    const agent_work_t *w = NULL;
    uint8_t *buf;
    size_t len;
    int rc;

    if (a->link == NULL || a->hb_call != NULL || !joined_state(a->state))
        return;
    if (a->hb_misses >= AGENT_HB_MISSES && sfl_grpcconn_conn(a->link) != NULL) {
        /* A coordinator that answered no heartbeat for AGENT_HB_MISSES
         * periods while the connection stays open (frozen, partitioned, a
         * round master that lost the lead) is gone all the same: the link
         * is aborted, the agent backs off and tries the next address. */
        a->hb_misses = 0;
        agent__say(a, SFL_LOG_WARN, "coordinator_silent", "coordinator=%s heartbeats=%d",
            a->addr[a->cur].text, AGENT_HB_MISSES);
        sfl_conn_abort(sfl_grpcconn_conn(a->link));
        return;
    }
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
    } else {
        /* a round in hand between its messages (the first kind holding one) */
        for (size_t i = 0; i < agent_nshapes; i++)
            if (agent_shapes[i]->in_round != NULL && agent_shapes[i]->in_round(a->kind[i], &r))
                break;
    }
    r.conditions = a->conditions;
    if ((rc = sfl_msg_heartbeat_req_pack(&r, &buf, &len)) < 0) {
        agent__say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s", sfl_strerror(rc));
        return;
    }
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_HEARTBEAT, buf, len, a->hb_ms,
                             on_heartbeat, a, &a->hb_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->hb_call = NULL;
        agent__say(a, SFL_LOG_WARN, "heartbeat_failed", "error=%s", sfl_strerror(rc));
        return;
    }
    a->hb_job = r.job_id;
    a->hb_round = r.round;
    a->hb_attempt = r.attempt;
}

/* ---- actions (they return the next state; only step() sets it) ------------------- */

/* Loop time of a resubscription after retry_ms: up to 10% of our own jitter
 * on top, never less (docs/protocol.md). */
static uint64_t resub_time(agent_ctx_t *a, uint32_t retry_ms)
{
    a->stats.last_resub_ms = retry_ms + randombytes_uniform(retry_ms / 10 + 1);
    return uv_now(a->loop) + a->stats.last_resub_ms;
}

static void on_timer(uv_timer_t *t)
{
    step(t->data, &(ev_t){.type = EV_TIMER});
}

static agent_state_t stop_all(agent_ctx_t *a);

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
static agent_state_t fatal(agent_ctx_t *a, const char *what, int status, const char *message,
                           const char *fix)
{
    char q[300], f[300], sq[80];

    /* Logged first: message may be borrowed from a call of this link. */
    agent__say(a, SFL_LOG_ERROR, "fatal", "during=%s status=%s error=%s fix=%s exit_status=%d",
        what, agent__status_name(sq, sizeof(sq), status), agent__quote(q, sizeof(q), message),
        agent__quote(f, sizeof(f), fix), AGENT_EXIT_FATAL);
    a->failed = status < 0 ? status : SFL_ECERT;
    a->stopping = 1;
    a->stopped_cb = a->fatal_cb;
    a->stopped_ud = a->fatal_ud;
    return stop_all(a);
}

/* The coordinator found our certificate expired or not yet valid: final
 * if this device's clock finds it so too (a new certificate is needed),
 * else the clocks disagree and a retry may succeed once they are set. */
static int own_cert_outside_dates(const agent_ctx_t *a)
{
    int rc = sfl_tls_check_identity(a->cfg.cert, a->cfg.key, a->cfg.ca, SFL_ROLE_AGENT);

    return rc == SFL_ECERT && (strstr(sfl_last_error(), "expired") != NULL ||
                               strstr(sfl_last_error(), "not yet valid") != NULL);
}

agent_state_t agent__backoff(agent_ctx_t *a, const char *what, int status, const char *message)
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
    /* With a list, one address's refusal (a front-end with the wrong
     * certificate) is final only once every address refused in a row. */
    if (kind == AGENT_ERR_PERMANENT && a->naddr > 1 && ++a->refusals < a->naddr) {
        char q[300];

        agent__say(a, SFL_LOG_WARN, "address_refused", "coordinator=%s during=%s error=%s "
            "fix=\"%s\"", a->addr[a->cur].text, what, agent__quote(q, sizeof(q), message), fix);
    } else if (kind == AGENT_ERR_PERMANENT) {
        return fatal(a, what, status, message, fix);
    }
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
    agent__say(a, SFL_LOG_WARN, "disconnected",
        "during=%s status=%s error=%s retry_in_ms=%" PRIu64 "%s",
        what, agent__status_name(sq, sizeof(sq), status), agent__quote(q, sizeof(q), message),
        delay, hint);
    drop_link(a);
    /* The next address of the list (a fleet's other master or front-end;
     * a standby master does not listen): the one that failed is tried
     * again after the others. */
    a->cur = (a->cur + 1) % a->naddr;
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

static agent_state_t connect_begin(agent_ctx_t *a)
{
    struct addrinfo hints;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    a->gai.data = a;
    rc = uv_getaddrinfo(a->loop, &a->gai, on_resolved, a->addr[a->cur].host,
                        a->addr[a->cur].port, &hints);
    if (rc < 0) {
        a->stats.connect_fails++;
        return agent__backoff(a, "resolve", rc, uv_strerror(rc));
    }
    a->resolving = 1;
    agent__say(a, SFL_LOG_INFO, "connecting", "coordinator=%s", a->addr[a->cur].text);
    return AGENT_CONNECTING;
}

static agent_state_t connect_addr(agent_ctx_t *a, const ev_t *e)
{
    uint64_t idle = 3 * a->cfg.heartbeat_ms;
    sfl_conn_opts_t o = {
        .tls = a->addr[a->cur].tls,
        .connect_timeout_ms = a->cfg.connect_timeout_ms,
        .idle_timeout_ms = idle > 120000 ? idle : 120000,
    };
    /* Liveness is the heartbeat's and the transport's business: the
     * session itself never closes an agent's connection for idling. */
    sfl_grpc_config_t g = {.max_message = AGENT_MAX_MESSAGE, .idle_timeout_ms = UINT32_MAX};
    int rc;

    if (e->status < 0 || e->addr == NULL) {
        a->stats.connect_fails++;
        return agent__backoff(a, "resolve", e->status, e->message);
    }
    rc = sfl_grpcconn_connect(a->loop, e->addr->ai_addr, &o, &g, a->addr[a->cur].text, &conn_cbs,
                              a, &a->link);
    if (rc < 0) {
        a->stats.connect_fails++;
        return agent__backoff(a, "connect", rc, sfl_last_error());
    }
    a->link_opened = 0;
    a->nlinks++;
    return AGENT_CONNECTING;
}

static agent_state_t join(agent_ctx_t *a)
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
        return agent__backoff(a, "join", rc, sfl_last_error());
    r.has_proof = 1;
    /* ... and that the holder of our certificate chose that key: what a
     * front-end relays it with, and cannot make for a certificate it has
     * only seen (docs/security.md, "Front-ends"). */
    if ((rc = sfl_tls_cert_binding_sign(a->addr[a->cur].tls, r.identity_key, r.cert_proof,
                                        &r.cert_proof_len)) < 0)
        return agent__backoff(a, "join", rc, sfl_last_error());
    if ((rc = sfl_msg_join_req_pack(&r, &buf, &len)) < 0)
        return agent__backoff(a, "join", rc, sfl_last_error());
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), PATH_JOIN, buf, len,
                             (uint32_t)a->cfg.connect_timeout_ms, on_join, a, &a->join_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->join_call = NULL;
        return agent__backoff(a, "join", rc, sfl_last_error());
    }
    return AGENT_JOINING;
}

static agent_state_t subscribe(agent_ctx_t *a)
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
        return agent__backoff(a, "subscribe", rc, sfl_last_error());
    /* No grpc-timeout: the stream lives as long as the connection. */
    rc = sfl_grpc_call_stream(sfl_grpcconn_session(a->link), PATH_SUBSCRIBE, buf, len, 0,
                              on_sub_msg, on_sub_done, a, &a->sub_call);
    sfl_msg_buf_free(buf);
    if (rc < 0) {
        a->sub_call = NULL;
        return agent__backoff(a, "subscribe", rc, sfl_last_error());
    }
    a->stats.subscribes++;
    return AGENT_SUBSCRIBED;
}

void agent__count_ack(agent_ctx_t *a, const sfl_ack_t *ack)
{
    if ((unsigned)ack->status < sizeof(a->stats.acks) / sizeof(a->stats.acks[0]))
        a->stats.acks[ack->status]++;
}

void *agent__kind_state(const agent_ctx_t *a, const agent_shape_t *s)
{
    size_t i = agent_shape_index(s);

    return i < agent_nshapes ? a->kind[i] : NULL;
}

void agent__refuse(agent_ctx_t *a, sfl_task_t *t, const char *why)
{
    char q[300];

    a->stats.tasks_refused++;
    agent__say(a, SFL_LOG_WARN, "task_refused",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u reason=%s",
        t->job_id, t->round, t->attempt, agent__quote(q, sizeof(q), why));
    sfl_msg_task_free(t);
}

/* The work of the task's kind; the loop touches neither the data, the
 * identity nor ws while it runs, the task is the work's own. */
static void work_cb(uv_work_t *req)
{
    agent_work_t *w = req->data;

    w->shape->work(w->a, w);
    if (w->rc < 0)
        snprintf(w->err, sizeof(w->err), "%s", sfl_last_error());
}

static void after_work_cb(uv_work_t *req, int status)
{
    agent_work_t *w = req->data;
    agent_ctx_t *a = w->a;

    a->work = NULL;
    if (status < 0) {
        w->rc = status;
        snprintf(w->err, sizeof(w->err), "%s", uv_strerror(status));
    }
    step(a, &(ev_t){.type = EV_TRAINED, .train = w});
    maybe_finish_stop(a);
}

int agent__work_start(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t)
{
    agent_work_t *w = sfl__calloc(1, sizeof(*w));
    int rc;

    if (w == NULL) {
        agent__refuse(a, t, "out of memory");
        return SFL_ENOMEM;
    }
    {
        char why[300];

        if (s->prepare != NULL && s->prepare(a, t, why, sizeof(why)) < 0) {
            sfl__free(w);
            agent__refuse(a, t, why);
            return SFL_EINVAL;
        }
    }
    w->a = a;
    w->shape = s;
    w->task = t;
    w->agent_id = a->agent_id;
    if (s->trains(t)) {
        agent__cstate_load(a, t->job_id, t->round);
        w->cs.in = a->cstate.bytes;
        w->cs.in_len = a->cstate.len;
    }
    w->req.data = w;
    w->started_ms = uv_now(a->loop);
    rc = uv_queue_work(a->loop, &w->req, work_cb, after_work_cb);
    if (rc < 0) {
        w->task = NULL;
        agent__work_free(w);
        agent__refuse(a, t, uv_strerror(rc));
        return rc;
    }
    a->work = w;
    agent__say(a, SFL_LOG_DEBUG, "training",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u algorithm=%s "
        "samples=%u", t->job_id, t->round, t->attempt, t->algorithm, a->data->X->nrows);
    return 0;
}

void agent__work_next(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t)
{
    if (a->next != NULL) {
        agent__say(a, SFL_LOG_WARN, "task_dropped", "job=%" PRIu64 " round=%" PRIu64
                   " attempt=%u reason=\"superseded while busy\"", a->next->job_id,
                   a->next->round, a->next->attempt);
        sfl_msg_task_free(a->next);
    }
    a->next = t;
    a->next_shape = s;
}

static agent_state_t submit(agent_ctx_t *a);

/* Connected and joined, nothing in hand: train what waited, or keep the
 * stream, or act on how it ended. */
agent_state_t agent__settle(agent_ctx_t *a)
{
    uint64_t now = uv_now(a->loop);

    while (a->next != NULL) {
        sfl_task_t *t = a->next;

        a->next = NULL;
        if (agent__work_start(a, a->next_shape, t) == 0)
            return AGENT_TRAINING;
    }
    if (a->sub_call != NULL)
        return AGENT_SUBSCRIBED;
    if (a->resub_reset)
        return agent__backoff(a, "subscribe", SFL_GRPC_STATUS_UNAVAILABLE, "stream failed");
    if (a->resub_at > now) {
        uv_timer_start(&a->timer, on_timer, a->resub_at - now, 0);
        return AGENT_WAITING;
    }
    return subscribe(a);
}

/* The update in the outbox is done with (answered or given up). */
static agent_state_t drop_outbox(agent_ctx_t *a)
{
    agent__work_free(a->outbox);
    a->outbox = NULL;
    return agent__settle(a);
}

static agent_state_t joined(agent_ctx_t *a, const sfl_join_reply_t *r)
{
    uint64_t hb;
    char hex[2 * SFL_SEAL_PK_BYTES + 1];

    /* Tasks are verified against the pinned key whatever Join says; a
     * coordinator presenting another key is not ours. */
    if (sodium_memcmp(r->coordinator_key, a->coord_pk, SFL_SEAL_PK_BYTES) != 0) {
        agent__say(a, SFL_LOG_ERROR, "coordinator_key_mismatch", "got=%s",
            sfl_seal_pk_to_hex(r->coordinator_key, hex));
        return fatal(a, "join", SFL_EBADSIG, "coordinator key differs from coordinator_pk",
                     "pin the coordinator's key: " AGENT_PK_HINT);
    }
    a->agent_id = r->agent_id;
    a->attempt = 0;
    a->refusals = 0;
    a->stats.joins++;
    hb = r->heartbeat_interval_ms < a->cfg.heartbeat_ms ? r->heartbeat_interval_ms
                                                        : a->cfg.heartbeat_ms;
    a->hb_ms = (uint32_t)hb;
    a->hb_misses = 0;
    uv_timer_start(&a->hb_timer, on_hb_timer, hb, hb);
    /* resumed=1: this connection resumed the TLS session of an earlier one
     * (docs/security.md, "Session resumption"). */
    agent__say(a, SFL_LOG_INFO, "joined", "agent_id=%" PRIu64 " heartbeat_ms=%" PRIu64
        " retry_after_ms=%u resumed=%d", a->agent_id, hb, r->retry_after_ms,
        sfl_conn_resumed(sfl_grpcconn_conn(a->link)));
    a->resub_at = r->retry_after_ms ? resub_time(a, r->retry_after_ms) : 0;
    a->saw_wait = a->resub_reset = 0;
    if (a->outbox != NULL)
        return submit(a);
    if (a->work != NULL)
        return AGENT_TRAINING;
    return agent__settle(a);
}

/* The job this agent works for ends (info; per-round lines are debug):
 * at a task of another job, or when the coordinator has no running job
 * for it. Nothing when there is none. */
static void job_over(agent_ctx_t *a, const char *why)
{
    char q[300];

    if (a->job.id == 0)
        return;
    agent__say(a, SFL_LOG_INFO, "job_end", "job=%" PRIu64 " tasks=%" PRIu64 " last_round=%" PRIu64
        " reason=%s", a->job.id, a->job.tasks, a->job.last_round, agent__quote(q, sizeof(q), why));
    a->job.id = 0;
}

/* A verified task: its job starts for this agent at its first one. */
static void job_seen(agent_ctx_t *a, const sfl_task_t *t, const agent_shape_t *s)
{
    char q[2 * SFL_MSG_NAME_LEN];

    if (a->job.id != t->job_id) {
        job_over(a, "a task of another job");
        a->job.id = t->job_id;
        a->job.tasks = 0;
        agent__say(a, SFL_LOG_INFO, "job_start", "job=%" PRIu64 " round=%" PRIu64 " algorithm=%s "
            "kind=%s", t->job_id, t->round, agent__quote(q, sizeof(q), t->algorithm),
            s->job_kind);
    }
    a->job.tasks++;
    a->job.last_round = t->round;
}

static agent_state_t task_in(agent_ctx_t *a, sfl_task_t *t, agent_state_t from)
{
    const agent_shape_t *s;
    int rc;

    a->stats.tasks++;
    rc = sfl_seal_verify_detached(a->coord_pk, SFL_MSG_TASK_CONTEXT, t->signed_bytes,
                                  t->signed_len, t->signature);
    if (rc < 0) {
        agent__refuse(a, t, "signature does not verify with coordinator_pk");
        return from;
    }
    /* Verified; the model hash was checked against the model by
     * sfl_msg_task_or_wait_unpack. The signed copy is no longer needed. */
    sfl__free(t->signed_bytes);
    t->signed_bytes = NULL;
    t->signed_len = 0;
    s = agent_shape_for(t); /* the round kind: the one lookup */
    job_seen(a, t, s);
    return s->task(a, agent__kind_state(a, s), t, from);
}

static void note_wait(agent_ctx_t *a, const sfl_wait_t *w)
{
    char q[300];

    a->stats.waits++;
    a->saw_wait = 1;
    a->resub_at = resub_time(a, w->retry_after_ms);
    agent__say(a, SFL_LOG_DEBUG, "wait", "retry_after_ms=%u reason=%s", w->retry_after_ms,
        agent__quote(q, sizeof(q), w->reason));
    if (strcmp(w->reason, SFL_MSG_WAIT_NO_JOB) == 0)
        job_over(a, w->reason);
}

static void note_stream_end(agent_ctx_t *a, const ev_t *e)
{
    char q[300], sq[80];

    if (e->status == SFL_GRPC_STATUS_OK) {
        if (!a->saw_wait)
            a->resub_at = uv_now(a->loop) + a->cfg.backoff_min_ms;
        return;
    }
    a->resub_reset = 1;
    agent__say(a, SFL_LOG_WARN, "stream_ended", "status=%s message=%s",
        agent__status_name(sq, sizeof(sq), e->status), agent__quote(q, sizeof(q), e->message));
}

static agent_state_t submit(agent_ctx_t *a)
{
    agent_work_t *w = a->outbox;
    int64_t left = w->task->deadline_ms - (int64_t)unix_ms();
    uint64_t timeout = a->cfg.connect_timeout_ms + (left > 0 ? (uint64_t)left : 0);
    int rc;

    if (w->tries >= AGENT_SUBMIT_TRIES) {
        agent__say(a, SFL_LOG_WARN, "update_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " attempt=%u tries=%u",
            w->task->job_id, w->task->round, w->task->attempt, w->tries);
        return drop_outbox(a);
    }
    if (timeout > SUBMIT_TIMEOUT_MAX_MS)
        timeout = SUBMIT_TIMEOUT_MAX_MS;
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(a->link), AGENT_PATH_SUBMIT, w->msg, w->len,
                             (uint32_t)timeout, on_submit, a, &a->submit_call);
    if (rc == SFL_ELIMIT) {
        agent__say(a, SFL_LOG_ERROR, "update_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " bytes=%zu "
            "reason=\"larger than the message limit\"", w->task->job_id, w->task->round, w->len);
        return drop_outbox(a);
    }
    if (rc < 0) {
        a->submit_call = NULL;
        return agent__backoff(a, "submit", rc, sfl_last_error());
    }
    w->tries++;
    a->stats.submits++;
    agent__say(a, SFL_LOG_DEBUG, "submitting",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u bytes=%zu try=%u",
        w->task->job_id, w->task->round, w->task->attempt, w->len, w->tries);
    return AGENT_SUBMITTING;
}

/* A result, kept for after the rejoin or dropped. */
static void keep_result(agent_ctx_t *a, agent_work_t *w)
{
    char q[300];

    if (w->rc < 0 || w->aborted || a->stopping) {
        agent__say(a, w->rc < 0 ? SFL_LOG_ERROR : SFL_LOG_INFO, "training_dropped",
            "job=%" PRIu64 " round=%" PRIu64 " error=%s", w->task->job_id, w->task->round,
            agent__quote(q, sizeof(q), w->rc < 0 ? w->err : w->aborted ? "aborted" : "stopping"));
        agent__work_free(w);
        return;
    }
    a->stats.trained++;
    if (w->cs.note[0] != '\0')
        agent__say(a, SFL_LOG_WARN, "client_state", "job=%" PRIu64 " error=%s", w->task->job_id,
            agent__quote(q, sizeof(q), w->cs.note));
    agent__cstate_save(a, w);
    agent__work_free(a->outbox);
    a->outbox = w;
    agent__say(a, SFL_LOG_DEBUG, "trained",
        "job=%" PRIu64 " round=%" PRIu64 " attempt=%u ms=%" PRIu64
        " bytes=%zu", w->task->job_id, w->task->round, w->task->attempt,
        uv_now(a->loop) - w->started_ms, w->len);
}

agent_state_t agent__sealed_trained(agent_ctx_t *a, void *st, agent_work_t *w,
                                    agent_state_t from)
{
    (void)st;
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
    return from == AGENT_TRAINING ? agent__settle(a) : from;
}

static agent_state_t acked(agent_ctx_t *a, const sfl_ack_t *ack)
{
    /* Late is what over-selection does to the slowest members every round:
     * debug, as accepted; the verdicts that mean something is wrong warn. */
    int good = ack->status == SFL_ACK_ACCEPTED || ack->status == SFL_ACK_DUPLICATE ||
               ack->status == SFL_ACK_LATE;
    char q[300];

    agent__count_ack(a, ack);
    agent__say(a, good ? SFL_LOG_DEBUG : SFL_LOG_WARN, "ack", "job=%" PRIu64 " round=%" PRIu64
        " attempt=%u status=%s reason=%s", ack->job_id, ack->round, ack->attempt,
        sfl_msg_ack_name(ack->status), agent__quote(q, sizeof(q), ack->reason));
    /* Every verdict is final for these bytes (docs/protocol.md). */
    return drop_outbox(a);
}

static agent_state_t submit_failed(agent_ctx_t *a, const ev_t *e)
{
    int s = e->status;
    char q[300], sq[80];

    /* Transport trouble: reconnect and send the same bytes again (a retry
     * whose first ack was lost gets DUPLICATE). A refusal of the request
     * itself would only repeat. */
    if (s == SFL_GRPC_STATUS_UNAVAILABLE || s == SFL_GRPC_STATUS_DEADLINE_EXCEEDED ||
        s == SFL_GRPC_STATUS_CANCELLED || s == SFL_GRPC_STATUS_UNKNOWN ||
        s == SFL_GRPC_STATUS_INTERNAL)
        return agent__backoff(a, "submit", s, e->message);
    agent__say(a, SFL_LOG_ERROR, "update_dropped",
        "job=%" PRIu64 " round=%" PRIu64 " status=%s message=%s",
        a->outbox->task->job_id, a->outbox->task->round, agent__status_name(sq, sizeof(sq), s),
        agent__quote(q, sizeof(q), e->message));
    return drop_outbox(a);
}

static agent_state_t stop_all(agent_ctx_t *a)
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
    agent__work_free(a->outbox);
    a->outbox = NULL;
    agent__say(a, SFL_LOG_INFO, "stopping", "%s", "");
    return AGENT_DISCONNECTED;
}

/* ---- the state machine ---------------------------------------------------------- */

static void step(agent_ctx_t *a, const ev_t *e)
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
                to = agent__backoff(a, "join", e->status, e->message);
            break;
        case EV_CLOSED:
            to = agent__backoff(a, from == AGENT_JOINING ? "join" : "connect", e->status,
                e->message);
            break;
        case EV_TRAINED:
            /* an update is submitted after the rejoin; a secure
             * aggregation input belonged to the lost link's round */
            if (!e->train->shape->outbox)
                e->train->aborted = 1;
            keep_result(a, e->train);
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
                to = agent__settle(a);
            break;
        case EV_TASK:
            to = task_in(a, e->task, from);
            break;
        case EV_STAGE: {
            const agent_shape_t *s = agent_shape_staged(e->stage->kind);

            if (s != NULL)
                s->stage(a, agent__kind_state(a, s), e->stage);
            break;
        }
        case EV_WAIT:
            note_wait(a, e->wait);
            break;
        case EV_STREAM_END:
            note_stream_end(a, e);
            if (from == AGENT_SUBSCRIBED)
                to = agent__settle(a);
            break;
        case EV_TRAINED:
            to = e->train->shape->trained(a, agent__kind_state(a, e->train->shape), e->train,
                                          from);
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
            to = agent__backoff(a, agent_state_name(from), e->status, e->message);
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

int agent_start(agent_ctx_t *a)
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
    agent__say(a, SFL_LOG_INFO, "starting",
        "version=\"%s\" identity=%s identity_created=%d samples=%u "
        "eval_samples=%u features=%u labels=%u coordinator=%s", AGENT_VERSION,
        sfl_seal_pk_to_hex(a->id->pk, hex), a->id_created, a->data->X->nrows,
        a->eval ? a->eval->X->nrows : 0, a->data->X->ncols, a->summary.nlabels,
        a->cfg.coordinator);
    for (size_t i = 0; i < agent_nshapes; i++)
        if (agent_shapes[i]->started != NULL)
            agent_shapes[i]->started(a, a->kind[i]);
    step(a, &(ev_t){.type = EV_START});
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    agent_ctx_t *a = h->data;

    if (--a->handles > 0)
        return;
    a->started = 0;
    agent__say(a, SFL_LOG_INFO, "stopped", "%s", "");
    if (a->stopped_cb != NULL)
        a->stopped_cb(a, a->stopped_ud); /* may free a */
}

/* The handles close once nothing can use them any more: no connection,
 * no name lookup and no work in flight. */
static void maybe_finish_stop(agent_ctx_t *a)
{
    if (!a->stopping || a->closing_handles || a->nlinks > 0 || a->resolving || a->work != NULL)
        return;
    a->closing_handles = 1;
    uv_close((uv_handle_t *)&a->timer, on_handle_closed);
    uv_close((uv_handle_t *)&a->hb_timer, on_handle_closed);
}

void agent_set_fatal(agent_ctx_t *a, agent_stopped_cb cb, void *ud)
{
    a->fatal_cb = cb;
    a->fatal_ud = ud;
}

int agent_failed(const agent_ctx_t *a)
{
    return a->failed;
}

void agent_stop(agent_ctx_t *a, agent_stopped_cb cb, void *ud)
{
    if (!a->started || a->stopping)
        return;
    a->stopping = 1;
    a->stopped_cb = cb;
    a->stopped_ud = ud;
    step(a, &(ev_t){.type = EV_STOP});
    maybe_finish_stop(a);
}

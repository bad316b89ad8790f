/* The front-end role (frontend.h; docs/operations.md "Front-ends",
 * docs/protocol.md "Front-ends"): agents' Coordinator calls relayed to the
 * round master in "forward" mode.
 *
 * Each agent TLS connection gets a number (conn_id, never reused by this
 * process) and a gRPC server session serving the Coordinator service.
 * Every call becomes a relay: the same method on the master's Fleet
 * service, its request wrapped in a FleetCall with the agent certificate's
 * CN and SHA-256 and the conn_id; the master's answer (or stream of
 * answers) goes back to the agent byte for byte, status and message too.
 * Join is the one call checked here: its join_proof signs this front-end's
 * TLS connection with the agent, which the master cannot see. When the
 * agent's connection closes its relayed calls are cancelled and the master
 * is told (Fleet/Gone). When the master's connection closes every relayed
 * call ends UNAVAILABLE (the agents retry, as after any coordinator
 * restart) and the front-end connects again, to the next master address.
 *
 * The relay never parses what the master sends: it goes to agents that
 * verify the master's signature over every task themselves. Its size is
 * bounded by max_message and the agent connection's queue.
 *
 * Fold mode ("fold mode" below): for a frontend_fold job's plain training
 * rounds, SubmitUpdate is verified here, claimed from the master and
 * folded into a partial sum per attempt instead of being relayed. */
#include "fleet/frontend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/algo/fold.h"
#include "sfl/core/alloc.h"
#include "sfl/core/log.h"
#include "sfl/crypto/seal.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/net/transport.h"
#include "sfl/wire/msg.h"

#define FE_MAX_MASTERS 8
#define FE_RETRY_MS 500   /* between attempts to reach a master */
/* what a FleetCall adds to a request, at most: the agent's certificate and
 * the rest */
#define FE_ENVELOPE (1024 + SFL_MSG_CERT_DER_MAX)
#define FE_SMALL_REQUEST (64u << 10)

typedef struct fe_agent fe_agent_t;
typedef struct fe_relay fe_relay_t;

struct fe_agent {
    fe_t *fe;
    sfl_conn_t *c;             /* NULL once closed */
    sfl_grpcconn_t *g;
    sfl_peer_t peer;
    uint64_t id;               /* conn_id */
    char addr[64];
    fe_relay_t *relays;        /* its calls in flight to the master */
    fe_agent_t *prev, *next;
    /* Fold mode: the identity the master accepted at the agent's Join on
     * this connection (its JoinReply's agent_id, the Join's identity_key);
     * without one its updates are forwarded. */
    uint64_t agent_id;
    uint8_t agent_pk[SFL_SEAL_PK_BYTES];
    uint8_t join_pk[SFL_SEAL_PK_BYTES]; /* of the Join in flight */
    int has_key;
    /* the attempt of the last task relayed to it, and of its last answer
     * (fold mode counts each agent once per attempt) */
    uint64_t t_job, t_round, a_job, a_round;
    uint32_t t_attempt, a_attempt;
    /* the master connection (fe->master_epoch) on which a relayed call of
     * this agent connection was answered: the master holds its conn_id
     * there, so a claim need not carry the certificate again */
    uint64_t master_seen;
    /* The last idle heartbeat the master answered on master connection
     * hb_epoch (0: none): its request's hash, the interval answered
     * (h_heartbeat answers the same request itself). */
    uint8_t hb_hash[16];
    uint32_t hb_interval;
    uint64_t hb_epoch;
};

/* A stream message held back until its task's model is here. */
typedef struct fe_held {
    uint8_t *buf;
    size_t len;
    struct fe_held *next;
} fe_held_t;

typedef struct fe_model fe_model_t;

struct fe_relay {
    fe_agent_t *ag;
    sfl_grpc_call_t *sc;       /* the agent's call; NULL once answered */
    sfl_grpc_call_t *cc;       /* ours to the master; NULL before / after */
    fe_relay_t *prev, *next;
    /* Subscribe: messages held, in order, behind a task whose model is
     * being fetched (wait: that model's slot) */
    fe_held_t *held, **held_tail;
    fe_model_t *wait;
    fe_relay_t *wnext;
    /* the master's stream ended while messages were held: how, for when
     * they are out */
    int ended, end_status;
    char end_msg[256];
    int join;                  /* a Join: its reply names the agent (fold mode) */
    int hb;                    /* an idle heartbeat (hb_hash: its hash) */
    uint8_t hb_hash[16];
};

/* Models of the tasks the master sends without them (fleet.proto,
 * Fleet.Subscribe): a few slots, the least recently used given up first,
 * never one being fetched or waited for. */
#define FE_MODELS 8
struct fe_model {
    uint8_t hash[SFL_MSG_HASH_BYTES];
    uint64_t job;
    uint8_t *model;            /* the packed SparseVector; NULL: empty or fetching */
    size_t len;
    int fetching;
    fe_relay_t *waiting;
    uint64_t used;
    fe_t *fe;                  /* set by model_fetch */
};

struct fe {
    uv_loop_t *loop;
    fe_config_t cfg;
    char master_list[1024];
    char hosts[FE_MAX_MASTERS][256], ports[FE_MAX_MASTERS][8];
    size_t nmasters, next_master;
    sfl_tls_t *srv_tls;
    sfl_tls_t *cli_tls[FE_MAX_MASTERS]; /* one per master: verify_host differs */
    sfl_grpc_budget_t *budget;
    sfl_listener_t *listener;
    fe_agent_t *agents;
    uint64_t nagents, next_id;
    /* the master channel: NULL while resolving or waiting to retry */
    sfl_grpcconn_t *master;
    int master_open;
    size_t master_at;          /* index of the address in use */
    uv_getaddrinfo_t gai;
    int resolving;
    /* the master timer: the next attempt while no master connection is
     * open, the keepalive ping while one is (keepalive_fired) */
    uv_timer_t mtimer;
    int handles;               /* master timer, resolving, listener-less agents... */
    int stopping;
    void (*done)(void *ud);
    void *done_ud;
    uint64_t relayed, refused_joins;
    fe_model_t models[FE_MODELS];
    uint64_t tick, fetched;    /* LRU clock; models fetched */
    uint64_t fails;            /* attempts to reach a master since the last open */
    /* fold mode: the attempts seen (fe_fold_t), updates folded, partials sent */
    struct fe_fold *folds;
    uint64_t folded, partials;
    uint64_t master_epoch;     /* master connections opened */
    uint64_t hb_answered;      /* heartbeats answered here (h_heartbeat) */
    /* loop time of the first unary call relayed since the master last
     * answered anything (0: none waits); master_silent() */
    uint64_t tx_since;
    /* loop time of the keepalive ping not answered yet (0: none), and the
     * master session's PING ACKs when it went out */
    uint64_t ping_at, ping_pongs;
    uint64_t silent;           /* master connections dropped by master_silent() */
    uint64_t model_mismatches; /* models the master answered that were not the ones asked */
    uint64_t relayed_by[FE_METHODS]; /* relayed calls by method (fe_method_names) */
    uint64_t relay_failures;   /* calls that could not be relayed (no master, no memory) */
    uint64_t model_bytes;      /* bytes of the models fetched */
};

const char *const fe_method_names[FE_METHODS] = {"Join", "Subscribe", "SubmitUpdate",
                                                 "Heartbeat", "SubmitStep", "SubmitSecAgg"};

static void master_connect(fe_t *fe);
static void check_stopped(fe_t *fe);

int fe_master_list_check(const char *list, size_t *n)
{
    char buf[1024], host[256], port[8];
    char *save = NULL, *tok;
    int rc;

    *n = 0;
    if (list == NULL || list[0] == '\0')
        return sfl__fail(SFL_EINVAL, "master: empty; want HOST:PORT[,HOST:PORT...]");
    if (strlen(list) >= sizeof(buf))
        return sfl__fail(SFL_EINVAL, "master: longer than %zu characters", sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", list);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == FE_MAX_MASTERS)
            return sfl__fail(SFL_EINVAL, "master: more than %d addresses", FE_MAX_MASTERS);
        if ((rc = sfl_grpcconn_split_hostport(tok, host, sizeof(host), port, sizeof(port))) < 0)
            return sfl__fail(rc, "master: '%s' is not HOST:PORT", tok);
        (*n)++;
    }
    if (*n == 0)
        return sfl__fail(SFL_EINVAL, "master: want HOST:PORT[,HOST:PORT...]");
    return 0;
}

/* ---- relays --------------------------------------------------------------------- */

static void held_free(fe_relay_t *r)
{
    while (r->held != NULL) {
        fe_held_t *h = r->held;

        r->held = h->next;
        sfl__free(h->buf);
        sfl__free(h);
    }
    r->held_tail = &r->held;
}

static void unwait(fe_relay_t *r)
{
    fe_relay_t **pp;

    if (r->wait == NULL)
        return;
    for (pp = &r->wait->waiting; *pp != NULL; pp = &(*pp)->wnext)
        if (*pp == r) {
            *pp = r->wnext;
            break;
        }
    r->wait = NULL;
    r->wnext = NULL;
}

static void relay_free(fe_relay_t *r)
{
    fe_agent_t *ag = r->ag;

    unwait(r);
    held_free(r);

    if (r->prev)
        r->prev->next = r->next;
    else
        ag->relays = r->next;
    if (r->next)
        r->next->prev = r->prev;
    sfl__free(r);
}

/* The agent reset its call or its connection went. */
static void relay_cancelled(sfl_grpc_call_t *call, void *ud)
{
    fe_relay_t *r = ud;

    if (r->cc != NULL)
        sfl_grpc_cancel(r->cc);
    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
    relay_free(r);
}

static void relay_unary_done(sfl_grpc_call_t *call, int status, const char *message,
                             const uint8_t *resp, size_t len, void *ud)
{
    fe_relay_t *r = ud;

    (void)call;
    r->cc = NULL;
    r->ag->fe->tx_since = 0; /* the master answers */
    if (status == SFL_GRPC_STATUS_OK)
        r->ag->master_seen = r->ag->fe->master_epoch;
    if (r->join && status == SFL_GRPC_STATUS_OK) {
        /* fold mode: whom the master took this connection's agent for */
        sfl_join_reply_t jr;
        sfl_msg_limits_t lim;

        sfl_msg_limits_default(&lim);
        if (sfl_msg_join_reply_unpack(resp, len, &lim, &jr) == 0 && jr.agent_id > 0) {
            r->ag->agent_id = jr.agent_id;
            memcpy(r->ag->agent_pk, r->ag->join_pk, sizeof(r->ag->agent_pk));
            r->ag->has_key = 1;
        }
    }
    if (status != SFL_GRPC_STATUS_OK)
        r->ag->hb_epoch = 0; /* the master refused something: ask it again */
    if (r->hb && status == SFL_GRPC_STATUS_OK) {
        sfl_heartbeat_reply_t hr;

        if (sfl_msg_heartbeat_reply_unpack(resp, len, NULL, &hr) == 0 && !hr.abort &&
            hr.deadline_ms == 0) {
            memcpy(r->ag->hb_hash, r->hb_hash, sizeof(r->ag->hb_hash));
            r->ag->hb_interval = hr.interval_ms;
            r->ag->hb_epoch = r->ag->fe->master_epoch;
        }
    }
    if (status == SFL_GRPC_STATUS_OK)
        (void)sfl_grpc_reply(r->sc, resp, len);
    else
        (void)sfl_grpc_finish(r->sc, status, message);
    relay_free(r);
}

/* Ends a relayed stream early: the agent is told status, ours to the
 * master is cancelled (unless its connection is going, when its own end
 * frees r: keep it until then). */
static void relay_abort(fe_relay_t *r, int status, const char *why)
{
    fe_t *fe = r->ag->fe;

    if (r->sc != NULL)
        (void)sfl_grpc_finish(r->sc, status, why);
    r->sc = NULL;
    unwait(r);
    held_free(r);
    if (r->cc != NULL && fe->master == NULL)
        return; /* relay_stream_done follows */
    if (r->cc != NULL)
        sfl_grpc_cancel(r->cc);
    r->cc = NULL;
    relay_free(r);
}

/* Sends one message to the agent; < 0: r is gone. */
static int relay_send(fe_relay_t *r, const uint8_t *msg, size_t len)
{
    int rc = sfl_grpc_send(r->sc, msg, len);

    if (rc < 0) {
        /* The agent does not read (its queue is full) or went: the
         * master's stream ends here, as the master would end it. */
        relay_abort(r, rc == -ECANCELED ? SFL_GRPC_STATUS_CANCELLED
                                        : SFL_GRPC_STATUS_RESOURCE_EXHAUSTED,
                    "the front-end cannot queue more for this agent");
        return -1;
    }
    return 0;
}

static void model_fetch(fe_t *fe, fe_model_t *m);

/* The slot of the model hash (of job), made if missing; NULL when every
 * slot is busy. */
static fe_model_t *model_slot(fe_t *fe, uint64_t job, const uint8_t hash[SFL_MSG_HASH_BYTES])
{
    fe_model_t *free_slot = NULL;

    for (size_t i = 0; i < FE_MODELS; i++) {
        fe_model_t *m = &fe->models[i];

        if ((m->model != NULL || m->fetching) && m->job == job &&
            sodium_memcmp(m->hash, hash, SFL_MSG_HASH_BYTES) == 0) {
            m->used = ++fe->tick;
            return m;
        }
        if (!m->fetching && m->waiting == NULL &&
            (free_slot == NULL || m->model == NULL ||
             (free_slot->model != NULL && m->used < free_slot->used)))
            free_slot = m;
    }
    if (free_slot == NULL)
        return NULL;
    sfl__free(free_slot->model);
    memset(free_slot, 0, sizeof(*free_slot));
    free_slot->job = job;
    memcpy(free_slot->hash, hash, SFL_MSG_HASH_BYTES);
    free_slot->used = ++fe->tick;
    return free_slot;
}

/* Sends r's held messages in order, each task with its model put back;
 * stops at one whose model is not here yet (r then waits for it). */
static void relay_flush(fe_relay_t *r)
{
    fe_t *fe = r->ag->fe;

    while (r->held != NULL && r->sc != NULL) {
        fe_held_t *h = r->held;
        uint8_t hash[SFL_MSG_HASH_BYTES], *full = NULL;
        uint64_t job;
        size_t flen = 0;
        int rc = sfl_msg_task_needs_model(h->buf, h->len, &job, hash);

        if (rc == 1) {
            fe_model_t *m = model_slot(fe, job, hash);

            if (m == NULL) {
                relay_abort(r, SFL_GRPC_STATUS_UNAVAILABLE,
                            "the front-end is fetching too many models; retry");
                return;
            }
            if (m->model == NULL) {
                unwait(r);
                r->wait = m;
                r->wnext = m->waiting;
                m->waiting = r;
                if (!m->fetching)
                    model_fetch(fe, m);
                return;
            }
            if (sfl_msg_task_put_model(h->buf, h->len, m->model, m->len, &full, &flen) < 0) {
                relay_abort(r, SFL_GRPC_STATUS_INTERNAL, "cannot assemble the task");
                return;
            }
        }
        r->held = h->next;
        if (r->held == NULL)
            r->held_tail = &r->held;
        rc = relay_send(r, full != NULL ? full : h->buf, full != NULL ? flen : h->len);
        sfl__free(full);
        sfl__free(h->buf);
        sfl__free(h);
        if (rc < 0)
            return;
    }
    if (r->held == NULL && r->ended && r->sc != NULL) {
        (void)sfl_grpc_finish(r->sc, r->end_status, r->end_msg[0] ? r->end_msg : NULL);
        r->sc = NULL;
        relay_free(r);
    }
}

/* The model the master answered is the one the task names (what every
 * agent would check: a master that answers other bytes, by fault or
 * malice, costs one fetch, not each agent's round); 0 or SFL_EINVAL,
 * logged and counted. */
static int model_check(fe_t *fe, fe_model_t *m)
{
    uint8_t got[SFL_MSG_HASH_BYTES];
    char want_hex[17], got_hex[17], q[300];
    int rc = sfl_msg_fleet_model_hash(m->model, m->len, got);

    if (rc == 0 && sodium_memcmp(got, m->hash, SFL_MSG_HASH_BYTES) == 0)
        return 0;
    if (rc == 0) {
        sodium_bin2hex(want_hex, sizeof(want_hex), m->hash, 8);
        sodium_bin2hex(got_hex, sizeof(got_hex), got, 8);
        rc = sfl__fail(SFL_EINVAL, "the master's model hashes to %s..., the task names %s...",
                       got_hex, want_hex);
    }
    sfl_log(SFL_LOG_WARN, "model_mismatch", "job=%llu bytes=%zu detail=%s",
            (unsigned long long)m->job, m->len, sfl_log_quote(sfl_last_error(), q, sizeof(q)));
    if (fe != NULL)
        fe->model_mismatches++;
    return SFL_EINVAL;
}

static void model_done(sfl_grpc_call_t *call, int status, const char *message,
                       const uint8_t *resp, size_t len, void *ud)
{
    fe_model_t *m = ud;
    fe_t *fe = m->fe;
    sfl_msg_limits_t lim;
    fe_relay_t *w;
    int rc = -1;

    (void)call;
    m->fetching = 0;
    sfl_msg_limits_default(&lim);
    if (status == SFL_GRPC_STATUS_OK) {
        if (fe != NULL)
            lim.max_message = fe->cfg.max_message;
        rc = sfl_msg_fleet_model_reply_unpack(resp, len, &lim, &m->model, &m->len);
        if (rc == 0)
            rc = model_check(fe, m); /* a mismatch: as unavailable */
    }
    if (rc < 0) {
        char q[300];

        sfl_log(SFL_LOG_WARN, "model_unavailable", "job=%llu status=%s detail=%s",
                (unsigned long long)m->job, sfl_grpc_status_name(status),
                sfl_log_quote(status == SFL_GRPC_STATUS_OK ? sfl_last_error() : message, q,
                              sizeof(q)));
        /* Its waiters subscribe again (the master sends a task pending
         * for them again, or the next attempt's). */
        while ((w = m->waiting) != NULL)
            relay_abort(w, SFL_GRPC_STATUS_UNAVAILABLE,
                        "the front-end could not get the task's model; subscribe again");
        sfl__free(m->model);
        memset(m, 0, sizeof(*m));
        return;
    }
    if (fe != NULL) {
        fe->fetched++;
        fe->model_bytes += m->len;
    }
    sfl_log(SFL_LOG_DEBUG, "model_fetched", "job=%llu bytes=%zu", (unsigned long long)m->job,
            m->len);
    while ((w = m->waiting) != NULL) {
        unwait(w);
        relay_flush(w);
    }
}

static void model_fetch(fe_t *fe, fe_model_t *m)
{
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    if (fe->master == NULL || sfl_msg_fleet_model_req_pack(m->job, m->hash, &buf, &blen) < 0) {
        rc = -1;
    } else {
        rc = sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), "/sfl.v1.Fleet/Model", buf,
                                 blen, 60000, model_done, m, NULL);
        sfl_msg_buf_free(buf);
    }
    if (rc < 0) {
        fe_relay_t *w;

        while ((w = m->waiting) != NULL)
            relay_abort(w, SFL_GRPC_STATUS_UNAVAILABLE,
                        "the front-end cannot reach the round master now; retry");
        memset(m, 0, sizeof(*m));
        return;
    }
    m->fetching = 1;
    m->fe = fe;
}

static void fold_tasked(fe_agent_t *ag, const uint8_t *msg, size_t len);

static void relay_message(sfl_grpc_call_t *call, const uint8_t *msg, size_t len, void *ud)
{
    fe_relay_t *r = ud;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    uint64_t job;
    fe_held_t *h;

    (void)call;
    r->ag->fe->tx_since = 0;
    if (r->sc == NULL)
        return; /* answered, waiting for its end */
    r->ag->master_seen = r->ag->fe->master_epoch;
    fold_tasked(r->ag, msg, len);
    if (r->held == NULL && sfl_msg_task_needs_model(msg, len, &job, hash) != 1) {
        (void)relay_send(r, msg, len);
        return;
    }
    /* held in order behind what waits, or the task that now needs its model */
    if ((h = sfl__calloc(1, sizeof(*h))) == NULL || (h->buf = sfl__malloc(len ? len : 1)) == NULL) {
        sfl__free(h);
        relay_abort(r, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    memcpy(h->buf, msg, len);
    h->len = len;
    *r->held_tail = h;
    r->held_tail = &h->next;
    if (r->wait == NULL)
        relay_flush(r);
}

static void relay_stream_done(sfl_grpc_call_t *call, int status, const char *message, void *ud)
{
    fe_relay_t *r = ud;

    (void)call;
    r->cc = NULL;
    if (status != SFL_GRPC_STATUS_OK)
        r->ag->hb_epoch = 0;
    if (r->sc != NULL && r->held != NULL) {
        /* messages wait for a model: the end follows them (relay_flush) */
        r->ended = 1;
        r->end_status = status;
        snprintf(r->end_msg, sizeof(r->end_msg), "%s", message ? message : "");
        return;
    }
    if (r->sc != NULL)
        (void)sfl_grpc_finish(r->sc, status, message);
    r->sc = NULL;
    relay_free(r);
}

/* A master that answered nothing for master_silent_ms while a unary call
 * relayed to it waited, or that left the front-end's keepalive ping
 * unanswered that long (frozen, or cut off with its TCP connection still
 * open), is taken for gone: its connection is dropped - every relayed call
 * ends UNAVAILABLE, the agents subscribe again - and the next address of
 * `master` is tried (the standby that took over). Held streams (Subscribe)
 * are not counted: the master answers them when it has a task. The ping
 * is what notices a master while the agents are idle: their heartbeats
 * are answered here then, and nothing else is relayed. Checked on every
 * keepalive tick and whenever a call would be relayed or an idle heartbeat
 * answered here. 1: the master is gone. */
static uint64_t silent_limit(const fe_t *fe)
{
    return fe->cfg.master_silent_ms ? fe->cfg.master_silent_ms : 30000;
}

static int master_silent(fe_t *fe)
{
    uint64_t limit = silent_limit(fe);
    uint64_t now = uv_now(fe->loop), since = fe->tx_since;

    if (fe->master == NULL || !fe->master_open)
        return 0;
    if (fe->ping_at != 0) {
        if (sfl_grpc_session_pongs(sfl_grpcconn_session(fe->master)) != fe->ping_pongs)
            fe->ping_at = 0; /* answered */
        else if (since == 0 || fe->ping_at < since)
            since = fe->ping_at;
    }
    if (since == 0 || now - since < limit)
        return 0;
    sfl_log(SFL_LOG_WARN, "master_silent", "master=%s:%s silent_ms=%llu",
            fe->hosts[fe->master_at], fe->ports[fe->master_at],
            (unsigned long long)(now - since));
    fe->tx_since = fe->ping_at = 0;
    fe->silent++;
    sfl_conn_abort(sfl_grpcconn_conn(fe->master));
    return 1;
}

/* The master timer while a master connection is open (every quarter of
 * master_silent_ms): a ping when none is unanswered, master_silent() when
 * one is. */
static void keepalive_fired(uv_timer_t *t)
{
    fe_t *fe = t->data;
    sfl_grpc_session_t *s;

    if (fe->master == NULL || !fe->master_open || master_silent(fe) || fe->ping_at != 0)
        return;
    s = sfl_grpcconn_session(fe->master);
    if (sfl_grpc_session_ping(s) == 0) {
        fe->ping_at = uv_now(fe->loop) ? uv_now(fe->loop) : 1;
        fe->ping_pongs = sfl_grpc_session_pongs(s);
    }
}

/* Starts path on the master with req wrapped for ag; answers call itself
 * when that cannot be done. */
static fe_relay_t *relay(sfl_grpc_call_t *call, fe_agent_t *ag, const char *path, int stream,
                         const uint8_t *req, size_t len)
{
    fe_t *fe = ag->fe;
    sfl_fleet_call_t m;
    fe_relay_t *r;
    uint8_t der[SFL_MSG_CERT_DER_MAX];
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    if (fe->master == NULL || fe->stopping || master_silent(fe)) {
        fe->relay_failures++;
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE,
                              fe->stopping ? "front-end shutting down"
                                           : "the front-end has no round master now; retry");
        return NULL;
    }
    memset(&m, 0, sizeof(m));
    snprintf(m.agent_cn, sizeof(m.agent_cn), "%s", ag->peer.cn);
    memcpy(m.cert_sha256, ag->peer.sha256, 32);
    m.request = (uint8_t *)(uintptr_t)req;
    m.request_len = len;
    m.conn_id = ag->id;
    /* The certificate itself, on every call: the master verifies it on the
     * first call of this conn_id on its connection (whichever that is after
     * a reconnect), so it never has to ask for it. */
    if (ag->c == NULL ||
        sfl_conn_peer_der(ag->c, der, sizeof(der), &m.agent_cert_len) < 0) {
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE,
                              "the front-end cannot read your certificate");
        return NULL;
    }
    m.agent_cert = der;
    if ((r = sfl__calloc(1, sizeof(*r))) == NULL ||
        (rc = sfl_msg_fleet_call_pack(&m, &buf, &blen)) < 0) {
        sfl__free(r);
        fe->relay_failures++;
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    r->ag = ag;
    r->sc = call;
    r->held_tail = &r->held;
    rc = stream ? sfl_grpc_call_stream(sfl_grpcconn_session(fe->master), path, buf, blen, 0,
                                       relay_message, relay_stream_done, r, &r->cc)
                : sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), path, buf, blen, 0,
                                      relay_unary_done, r, &r->cc);
    sfl__free(buf);
    if (rc < 0) {
        sfl__free(r);
        fe->relay_failures++;
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE,
                              "the front-end cannot reach the round master now; retry");
        return NULL;
    }
    r->next = ag->relays;
    if (ag->relays)
        ag->relays->prev = r;
    ag->relays = r;
    fe->relayed++;
    if (!stream && fe->tx_since == 0)
        fe->tx_since = uv_now(fe->loop) ? uv_now(fe->loop) : 1;
    for (size_t i = 0; i < FE_METHODS; i++)
        if (strcmp(path + sizeof("/sfl.v1.Fleet/") - 1, fe_method_names[i]) == 0)
            fe->relayed_by[i]++;
    sfl_grpc_call_on_cancel(call, relay_cancelled, r);
    return r;
}

/* ---- fold mode ------------------------------------------------------------------ */
/* For a frontend_fold job's plain training rounds (the master says which:
 * Fleet.FoldSpec, asked once per attempt), an agent's SubmitUpdate is not
 * forwarded: it is verified here as the master would (the signature over
 * the attempt's context, the payload's decoding and encoding, the fold's
 * bounds: submit.c's checks, on the thread pool), claimed from the master
 * (Fleet.Claim: the master judges it once, from the signature over the
 * payload's digest and the samples) and, when the master accepts the
 * claim, folded into the attempt's partial sum; the agent gets the
 * master's verdict. The partial goes to the master (Fleet.Partial)
 * fold_flush_ms after the first update folded into it. An update that
 * fails here is forwarded instead, so its refusal is the master's own. */

#define FE_FOLDS 8
#define FE_FOLD_SPEC_TIMEOUT_MS 10000

enum { FS_FREE, FS_ASKING, FS_FOLD, FS_FORWARD };

typedef struct fe_sub fe_sub_t;

typedef struct fe_fold {
    fe_t *fe;
    int state;
    uint64_t job, round;
    uint32_t attempt;
    uint64_t gen;              /* bumped whenever the slot is given up */
    uint64_t used;
    sfl_fleet_fold_spec_t spec;
    fe_sub_t *waiting;         /* updates waiting for the spec */
    /* the partial being gathered */
    double *sum;               /* spec.dimension entries, made on the first fold */
    double weight_sum;
    sfl_round_metrics_t msums;
    uint64_t *members;
    uint32_t nmembers, capmembers;
    uint64_t bytes;
    uint32_t busy;             /* updates being verified or claimed against it */
    /* agents given this attempt's task here, and of them those whose
     * update was answered here: all answered, the partial goes at once */
    uint32_t tasked, answered;
    uv_timer_t timer;
    int armed;
} fe_fold_t;

struct fe_sub {
    uv_work_t work;
    fe_t *fe;
    fe_agent_t *ag;            /* valid while sc is set */
    sfl_grpc_call_t *sc;       /* the agent's call; NULL once answered or cancelled */
    fe_fold_t *slot;
    uint64_t gen;
    uint8_t *req;              /* the request as the agent sent it (to forward) */
    size_t req_len;
    sfl_update_t *u;
    uint8_t agent_pk[SFL_SEAL_PK_BYTES];
    uint64_t agent_id;
    size_t max_message;
    /* the worker's result */
    sfl_payload_t *p;
    int ok;
    char reason[256];
    uint8_t payload_hash[SFL_MSG_HASH_BYTES];
    uint8_t sig[SFL_MSG_SIG_BYTES];
    fe_sub_t *next;
};

static void sub_free(fe_sub_t *s)
{
    sfl_msg_payload_free(s->p);
    sfl_msg_update_free(s->u);
    sfl__free(s->req);
    sfl__free(s);
}

static void sub_cancelled(sfl_grpc_call_t *call, void *ud)
{
    fe_sub_t *s = ud;

    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
    s->sc = NULL;
    s->ag = NULL;
}

static void fold_answered(fe_sub_t *s);
static void fold_maybe_flush(fe_fold_t *f);

/* The update goes to the master as it came (forward mode), when the agent
 * still waits; s is freed. */
static void sub_forward(fe_sub_t *s)
{
    fe_fold_t *f = s->slot;

    if (s->sc != NULL) {
        fold_answered(s);
        (void)relay(s->sc, s->ag, "/sfl.v1.Fleet/SubmitUpdate", 0, s->req, s->req_len);
    }
    sub_free(s);
    if (f != NULL)
        fold_maybe_flush(f);
}

/* The partial's state back to empty (kept: the slot, its spec). */
static void fold_reset_sum(fe_fold_t *f)
{
    if (f->sum != NULL)
        memset(f->sum, 0, f->spec.dimension * sizeof(*f->sum));
    f->weight_sum = 0;
    memset(&f->msums, 0, sizeof(f->msums));
    f->nmembers = 0;
    f->bytes = 0;
    if (f->armed)
        uv_timer_stop(&f->timer);
    f->armed = 0;
}

/* Gives the slot up (what it gathered is lost: the master's connection
 * went, or the slot is taken for another attempt). */
static void fold_clear(fe_fold_t *f)
{
    fold_reset_sum(f);
    sfl__free(f->sum);
    f->sum = NULL;
    sfl__free(f->members);
    f->members = NULL;
    f->capmembers = 0;
    f->state = FS_FREE;
    f->job = f->round = 0;
    f->attempt = 0;
    f->tasked = f->answered = 0;
    f->gen++;
}

typedef struct {
    uint64_t job, round;
    uint32_t attempt, n;
} partial_ctx_t;

static void partial_done(sfl_grpc_call_t *call, int status, const char *message,
                         const uint8_t *resp, size_t len, void *ud)
{
    partial_ctx_t *c = ud;
    char q[400];

    (void)call;
    (void)resp;
    (void)len;
    if (status != SFL_GRPC_STATUS_OK)
        sfl_log(SFL_LOG_WARN, "partial_refused",
                "job=%llu round=%llu attempt=%u members=%u status=%s detail=%s",
                (unsigned long long)c->job, (unsigned long long)c->round, c->attempt, c->n,
                sfl_grpc_status_name(status), sfl_log_quote(message, q, sizeof(q)));
    sfl__free(c);
}

/* Sends what f gathered as one Fleet.Partial and empties it. */
static void fold_flush(fe_fold_t *f)
{
    fe_t *fe = f->fe;
    sfl_fleet_partial_t p;
    partial_ctx_t *c = NULL;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = SFL_ENOMEM;

    if (f->nmembers == 0)
        return;
    memset(&p, 0, sizeof(p));
    p.job_id = f->job;
    p.round = f->round;
    p.attempt = f->attempt;
    p.members = f->members;
    p.nmembers = f->nmembers;
    p.weight_sum = f->weight_sum;
    p.update_bytes = f->bytes;
    for (int id = 0; id < SFL_METRIC_COUNT; id++)
        p.metric_sums[id] = sfl_metrics[id].fold == SFL_METRIC_WEIGHT
                                ? (double)sfl_metric_get_u64(id, &f->msums)
                            : sfl_metrics[id].fold == SFL_METRIC_MEAN ? sfl_metric_get(id, &f->msums)
                                                                      : 0;
    if (fe->master != NULL && (c = sfl__calloc(1, sizeof(*c))) != NULL &&
        (rc = sfl_spvec_new(f->spec.dimension, f->spec.dimension, &p.sum)) == 0 &&
        (rc = sfl_spvec_from_dense(p.sum, f->sum)) == 0 &&
        (rc = sfl_msg_fleet_partial_pack(&p, &buf, &blen)) == 0) {
        c->job = f->job;
        c->round = f->round;
        c->attempt = f->attempt;
        c->n = f->nmembers;
        rc = sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), "/sfl.v1.Fleet/Partial", buf,
                                 blen, 60000, partial_done, c, NULL);
        if (rc == 0) {
            c = NULL;
            fe->partials++;
            sfl_log(SFL_LOG_DEBUG, "partial", "job=%llu round=%llu attempt=%u members=%u bytes=%zu",
                    (unsigned long long)f->job, (unsigned long long)f->round, f->attempt,
                    f->nmembers, blen);
        }
        sfl_grpcconn_pump(fe->master);
    }
    if (rc != 0) {
        char q[300];

        sfl_log(SFL_LOG_WARN, "partial_lost", "job=%llu round=%llu attempt=%u members=%u error=%s",
                (unsigned long long)f->job, (unsigned long long)f->round, f->attempt,
                f->nmembers, sfl_log_quote(fe->master == NULL ? "no master" : sfl_last_error(),
                                           q, sizeof(q)));
    }
    sfl__free(c);
    sfl_msg_buf_free(buf);
    sfl_spvec_free(p.sum);
    fold_reset_sum(f);
}

static void fold_timer(uv_timer_t *t)
{
    fe_fold_t *f = t->data;

    f->armed = 0;
    fold_flush(f);
}

/* The slot of (job, round, attempt), taken when missing: a free one, else
 * the least recently used that holds nothing; NULL when every slot is busy
 * (the update is then forwarded). */
static fe_fold_t *fold_slot(fe_t *fe, uint64_t job, uint64_t round, uint32_t attempt)
{
    fe_fold_t *best = NULL;

    for (size_t i = 0; i < FE_FOLDS; i++) {
        fe_fold_t *f = &fe->folds[i];

        if (f->job != 0 && f->job == job && f->round == round && f->attempt == attempt) {
            f->used = ++fe->tick;
            return f;
        }
        if (f->state == FS_ASKING || f->busy > 0 || f->nmembers > 0)
            continue;
        if (best == NULL || f->state == FS_FREE || (best->state != FS_FREE && f->used < best->used))
            best = f;
    }
    if (best == NULL)
        return NULL;
    fold_clear(best);
    best->job = job;
    best->round = round;
    best->attempt = attempt;
    best->used = ++fe->tick;
    return best;
}

/* Every agent given the attempt's task here has been answered, and no
 * update of it is in flight: the partial goes now, not at fold_flush_ms -
 * from the loop (its timer at 0), since this may run inside a callback of
 * the master's session, which must not be pumped from there. */
static void fold_maybe_flush(fe_fold_t *f)
{
    if (f->state == FS_FOLD && f->busy == 0 && f->nmembers > 0 && f->tasked > 0 &&
        f->answered >= f->tasked && !f->fe->stopping) {
        uv_timer_start(&f->timer, fold_timer, 0, 0);
        f->armed = 1;
    }
}

/* s's agent was answered for s's attempt (the master's verdict on its
 * claim, or its update forwarded): counted once per agent. */
static void fold_answered(fe_sub_t *s)
{
    fe_agent_t *ag = s->ag;
    fe_fold_t *f = s->slot;

    if (ag == NULL || s->u == NULL || s->gen != f->gen)
        return;
    if (ag->a_job == s->u->job_id && ag->a_round == s->u->round &&
        ag->a_attempt == s->u->attempt)
        return;
    ag->a_job = s->u->job_id;
    ag->a_round = s->u->round;
    ag->a_attempt = s->u->attempt;
    f->answered++;
}

static void claim_done(sfl_grpc_call_t *call, int status, const char *message,
                       const uint8_t *resp, size_t len, void *ud)
{
    fe_sub_t *s = ud;
    fe_fold_t *f = s->slot;
    sfl_msg_limits_t lim;
    sfl_ack_t ack;

    (void)call;
    f->busy--;
    if (status != SFL_GRPC_STATUS_OK && s->ag != NULL)
        s->ag->master_seen = 0; /* the next claim carries the certificate */
    sfl_msg_limits_default(&lim);
    if (status == SFL_GRPC_STATUS_OK && sfl_msg_ack_unpack(resp, len, &lim, &ack) == 0 &&
        ack.status == SFL_ACK_ACCEPTED && s->gen == f->gen && f->state == FS_FOLD) {
        /* counted by the master when our partial arrives */
        if (f->sum == NULL)
            f->sum = sfl__calloc(f->spec.dimension, sizeof(*f->sum));
        if (f->nmembers == f->capmembers) {
            uint32_t cap = f->capmembers ? 2 * f->capmembers : 64;
            uint64_t *m = sfl__reallocarray(f->members, cap, sizeof(*m));

            if (m != NULL) {
                f->members = m;
                f->capmembers = cap;
            }
        }
        if (f->sum != NULL && f->nmembers < f->capmembers &&
            f->nmembers < SFL_MSG_PARTIAL_MAX) {
            sfl_spvec_axpy((double)s->p->samples, s->p->update, f->sum);
            f->weight_sum += (double)s->p->samples;
            sfl_metrics_fold(&f->msums, s->p);
            f->members[f->nmembers++] = s->agent_id;
            f->bytes += s->u->sealed_len;
            s->fe->folded++;
            if (!f->armed && !s->fe->stopping) {
                uv_timer_start(&f->timer, fold_timer,
                               s->fe->cfg.fold_flush_ms ? s->fe->cfg.fold_flush_ms : 200, 0);
                f->armed = 1;
            }
            if (f->nmembers == SFL_MSG_PARTIAL_MAX && !s->fe->stopping) {
                /* full: at once, from the loop (fold_maybe_flush) */
                uv_timer_start(&f->timer, fold_timer, 0, 0);
                f->armed = 1;
            }
        } else {
            sfl_log(SFL_LOG_WARN, "fold_lost", "job=%llu agent=%llu error=\"out of memory\"",
                    (unsigned long long)f->job, (unsigned long long)s->agent_id);
        }
    }
    fold_answered(s);
    fold_maybe_flush(f);
    /* the agent gets the master's answer, whatever it is */
    if (s->sc != NULL) {
        if (status == SFL_GRPC_STATUS_OK)
            (void)sfl_grpc_reply(s->sc, resp, len);
        else
            (void)sfl_grpc_finish(s->sc, status, message);
        s->sc = NULL;
    }
    sub_free(s);
}

/* Loop: a verified update is claimed from the master. */
static void sub_claim(fe_sub_t *s)
{
    fe_t *fe = s->fe;
    fe_fold_t *f = s->slot;
    sfl_fleet_claim_t c;
    sfl_fleet_call_t m;
    uint8_t der[SFL_MSG_CERT_DER_MAX];
    uint8_t *inner = NULL, *buf = NULL;
    size_t ilen = 0, blen = 0;
    int rc = -1;

    if (s->sc == NULL || s->ag == NULL || s->ag->c == NULL) {
        /* the agent went before its update was claimed: nothing to count,
         * it sends it again wherever it connects */
        sub_free(s);
        return;
    }
    if (fe->master == NULL || s->gen != f->gen || f->state != FS_FOLD) {
        sub_forward(s);
        return;
    }
    memset(&c, 0, sizeof(c));
    c.job_id = s->u->job_id;
    c.round = s->u->round;
    c.attempt = s->u->attempt;
    c.agent_id = s->agent_id;
    c.samples = s->p->samples;
    memcpy(c.payload_hash, s->payload_hash, sizeof(c.payload_hash));
    memcpy(c.signature, s->sig, sizeof(c.signature));
    c.update_bytes = s->u->sealed_len;
    memset(&m, 0, sizeof(m));
    snprintf(m.agent_cn, sizeof(m.agent_cn), "%s", s->ag->peer.cn);
    memcpy(m.cert_sha256, s->ag->peer.sha256, 32);
    m.conn_id = s->ag->id;
    /* The certificate only when this master connection may not have the
     * conn_id yet (fleet.proto: later calls may leave it out); a claim is
     * a few hundred bytes, the certificate as much again. */
    if (s->ag->master_seen == fe->master_epoch)
        m.agent_cert_len = 0;
    else if (sfl_conn_peer_der(s->ag->c, der, sizeof(der), &m.agent_cert_len) < 0)
        m.agent_cert_len = SIZE_MAX;
    if (m.agent_cert_len != SIZE_MAX && sfl_msg_fleet_claim_pack(&c, &inner, &ilen) == 0) {
        m.agent_cert = m.agent_cert_len > 0 ? der : NULL;
        m.request = inner;
        m.request_len = ilen;
        if (sfl_msg_fleet_call_pack(&m, &buf, &blen) == 0)
            rc = sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), "/sfl.v1.Fleet/Claim",
                                     buf, blen, 60000, claim_done, s, NULL);
    }
    sfl_msg_buf_free(inner);
    sfl__free(buf);
    if (rc < 0) {
        sub_forward(s);
        return;
    }
    f->busy++;
    sfl_grpcconn_pump(fe->master);
}

/* Thread pool: what the master's verify_work checks (submit.c), against
 * the spec the master gave for this attempt. Touches only s (and the
 * spec, which does not change while s->slot->busy counts s). */
static void sub_verify(uv_work_t *w)
{
    fe_sub_t *s = w->data;
    const sfl_fleet_fold_spec_t *sp = &s->slot->spec;
    sfl_upd_ctx_t ctx;
    sfl_msg_limits_t lim;
    sfl_fold_limits_t fl = {sp->max_update_norm, sp->max_samples};
    size_t plen = 0;
    int rc;

    memcpy(ctx.round_pk, sp->round_pk, sizeof(ctx.round_pk));
    ctx.job = s->u->job_id;
    ctx.round = s->u->round;
    memcpy(ctx.nonce, sp->nonce, sizeof(ctx.nonce));
    ctx.agent_id = s->agent_id;
    memcpy(ctx.model_hash, sp->model_hash, sizeof(ctx.model_hash));
    rc = sfl_seal_check_update(s->agent_pk, &ctx, s->u->sealed, s->u->sealed_len, s->max_message,
                               NULL, &plen);
    if (rc < 0) {
        snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
        return;
    }
    sfl_msg_limits_default(&lim);
    lim.max_message = s->max_message;
    lim.max_dim = sp->dimension;
    lim.max_nnz = sp->dimension;
    if ((rc = sfl_msg_payload_unpack(s->u->sealed, plen, &lim, sp->dimension, &s->p)) < 0) {
        snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
        return;
    }
    if (s->p->encoding != sp->encoding) {
        snprintf(s->reason, sizeof(s->reason), "update values are encoded as %d, the task asks "
                 "for %d", (int)s->p->encoding, (int)sp->encoding);
        return;
    }
    if ((rc = sfl_fold_check_limits(&fl, sp->dimension, s->p->update,
                                    (double)s->p->samples)) < 0) {
        snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
        return;
    }
    sfl_seal_hash(s->u->sealed, plen, s->payload_hash);
    memcpy(s->sig, s->u->sealed + plen, sizeof(s->sig));
    s->ok = 1;
}

static void sub_verified(uv_work_t *w, int status)
{
    fe_sub_t *s = w->data;

    (void)status;
    s->slot->busy--;
    if (!s->ok) {
        char q[300];

        /* the master says why, in its own words and audit record */
        sfl_log(SFL_LOG_DEBUG, "fold_forward", "job=%llu agent=%llu reason=%s",
                (unsigned long long)s->u->job_id, (unsigned long long)s->agent_id,
                sfl_log_quote(s->reason, q, sizeof(q)));
        sub_forward(s);
        return;
    }
    sub_claim(s);
}

/* s's slot folds: verify it off the loop. */
static void sub_start(fe_sub_t *s)
{
    s->gen = s->slot->gen;
    s->work.data = s;
    if (uv_queue_work(s->fe->loop, &s->work, sub_verify, sub_verified) != 0) {
        sub_forward(s);
        return;
    }
    s->slot->busy++;
}

static void spec_done(sfl_grpc_call_t *call, int status, const char *message,
                      const uint8_t *resp, size_t len, void *ud)
{
    fe_fold_t *f = ud;
    sfl_msg_limits_t lim;
    fe_sub_t *s, *next;
    int rc = -1;

    (void)call;
    sfl_msg_limits_default(&lim);
    lim.max_dim = UINT32_MAX;
    f->busy--;
    if (status == SFL_GRPC_STATUS_OK)
        rc = sfl_msg_fleet_fold_spec_unpack(resp, len, &lim, &f->spec);
    if (rc < 0) {
        char q[300];

        sfl_log(SFL_LOG_WARN, "fold_spec_unavailable", "job=%llu status=%s detail=%s",
                (unsigned long long)f->job, sfl_grpc_status_name(status),
                sfl_log_quote(status == SFL_GRPC_STATUS_OK ? sfl_last_error() : message, q,
                              sizeof(q)));
        memset(&f->spec, 0, sizeof(f->spec));
    }
    s = f->waiting;
    f->waiting = NULL;
    /* no answer: forward now, ask again for the next update */
    f->state = rc < 0 ? FS_FREE : f->spec.fold ? FS_FOLD : FS_FORWARD;
    if (rc < 0)
        f->gen++;
    sfl_log(SFL_LOG_DEBUG, "fold_spec", "job=%llu round=%llu attempt=%u fold=%d",
            (unsigned long long)f->job, (unsigned long long)f->round, f->attempt,
            f->state == FS_FOLD);
    for (; s != NULL; s = next) {
        next = s->next;
        if (f->state == FS_FOLD)
            sub_start(s);
        else
            sub_forward(s);
    }
}

/* SubmitUpdate in fold mode: 0 when it took the call (it answers it), 1
 * when the update is to be forwarded as it is. */
static int fold_submit(sfl_grpc_call_t *call, fe_agent_t *ag, const uint8_t *req, size_t len)
{
    fe_t *fe = ag->fe;
    sfl_msg_limits_t lim;
    sfl_update_t *u = NULL;
    fe_fold_t *f;
    fe_sub_t *s;

    if (!ag->has_key || fe->master == NULL || fe->stopping || fe->folds == NULL)
        return 1;
    sfl_msg_limits_default(&lim);
    lim.max_message = fe->cfg.max_message;
    if (sfl_msg_update_unpack(req, len, &lim, &u) < 0)
        return 1;
    /* (a slot whose spec workers may still read is never asked again) */
    if (u->mode != SFL_UPDATE_MODE_SIGNED || u->agent_id != ag->agent_id ||
        (f = fold_slot(fe, u->job_id, u->round, u->attempt)) == NULL || f->state == FS_FORWARD ||
        (f->state == FS_FREE && f->busy > 0)) {
        sfl_msg_update_free(u);
        return 1;
    }
    if ((s = sfl__calloc(1, sizeof(*s))) == NULL || (s->req = sfl__malloc(len ? len : 1)) == NULL) {
        sfl__free(s);
        sfl_msg_update_free(u);
        return 1;
    }
    memcpy(s->req, req, len);
    s->req_len = len;
    s->fe = fe;
    s->ag = ag;
    s->sc = call;
    s->u = u;
    s->slot = f;
    s->gen = f->gen;
    s->agent_id = ag->agent_id;
    memcpy(s->agent_pk, ag->agent_pk, sizeof(s->agent_pk));
    s->max_message = fe->cfg.max_message;
    sfl_grpc_call_on_cancel(call, sub_cancelled, s);
    if (f->state == FS_FOLD) {
        sub_start(s);
        return 0;
    }
    s->next = f->waiting;
    f->waiting = s;
    if (f->state == FS_FREE) {
        uint8_t *buf = NULL;
        size_t blen = 0;
        int rc = sfl_msg_fleet_fold_spec_req_pack(u->job_id, u->round, u->attempt, &buf, &blen);

        if (rc == 0)
            rc = sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), "/sfl.v1.Fleet/FoldSpec",
                                     buf, blen, FE_FOLD_SPEC_TIMEOUT_MS, spec_done, f, NULL);
        sfl_msg_buf_free(buf);
        if (rc < 0) {
            f->waiting = NULL;
            sub_forward(s);
            return 0;
        }
        f->state = FS_ASKING;
        f->busy++;
        sfl_grpcconn_pump(fe->master);
    }
    return 0;
}

/* A task of (job, round, attempt) relayed to ag: counted once per agent
 * and attempt in the attempt's slot (fold_maybe_flush). */
static void fold_tasked(fe_agent_t *ag, const uint8_t *msg, size_t len)
{
    fe_t *fe = ag->fe;
    uint64_t job, round;
    uint32_t attempt;
    fe_fold_t *f;

    if (fe->folds == NULL || sfl_msg_task_ids(msg, len, &job, &round, &attempt) != 1 ||
        job == 0 || (ag->t_job == job && ag->t_round == round && ag->t_attempt == attempt))
        return;
    ag->t_job = job;
    ag->t_round = round;
    ag->t_attempt = attempt;
    if ((f = fold_slot(fe, job, round, attempt)) != NULL)
        f->tasked++;
}

/* The master's connection went: every claim made on it is void there, so
 * what was gathered is dropped (those members are lost for the attempt). */
static void fold_master_gone(fe_t *fe)
{
    if (fe->folds == NULL)
        return;
    for (size_t i = 0; i < FE_FOLDS; i++) {
        fe_fold_t *f = &fe->folds[i];

        if (f->nmembers > 0)
            sfl_log(SFL_LOG_WARN, "partial_lost",
                    "job=%llu round=%llu attempt=%u members=%u error=\"the master's connection "
                    "closed\"", (unsigned long long)f->job, (unsigned long long)f->round,
                    f->attempt, f->nmembers);
        if (f->state != FS_ASKING)
            fold_clear(f);
    }
}

static void fold_timer_closed(uv_handle_t *h)
{
    fe_fold_t *f = h->data;

    f->fe->handles--;
    check_stopped(f->fe);
}

/* ---- the Coordinator service, relayed ---------------------------------------------- */

/* Join: the proof of possession is over this connection's keying material
 * (docs/security.md "Identity"), so it is checked here; the master applies
 * every other rule. */
static void h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    fe_agent_t *ag = ud;
    fe_t *fe = ag->fe;
    sfl_msg_limits_t lim;
    sfl_join_req_t m;
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    int rc;

    sfl_msg_limits_default(&lim);
    if ((rc = sfl_msg_join_req_unpack(req, len, &lim, &m)) < 0) {
        (void)sfl_grpc_finish(call, rc == SFL_ELIMIT ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                                     : SFL_GRPC_STATUS_INVALID_ARGUMENT,
                              sfl_last_error());
        return;
    }
    if (!m.has_proof) {
        fe->refused_joins++;
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                              "Join carries no join_proof: an agent must prove it holds "
                              "identity_key by signing this connection's keying material "
                              "(docs/protocol.md, Join); upgrade the agent");
        return;
    }
    if (ag->c == NULL ||
        sfl_conn_export_keying_material(ag->c, SFL_SEAL_JOIN_LABEL, binding, sizeof(binding)) < 0) {
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE, "the connection is closing");
        return;
    }
    rc = sfl_seal_verify_join(m.identity_key, binding, m.proof);
    sodium_memzero(binding, sizeof(binding));
    if (rc < 0) {
        char q[200];

        fe->refused_joins++;
        sfl_log(SFL_LOG_WARN, "join_refused", "name=%s addr=%s error=bad_join_proof",
                sfl_log_quote(ag->peer.cn, q, sizeof(q)), ag->addr);
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                              "join_proof does not verify: it was not made with the secret half "
                              "of identity_key over this connection");
        return;
    }
    memcpy(ag->join_pk, m.identity_key, sizeof(ag->join_pk));
    {
        fe_relay_t *r = relay(call, ag, "/sfl.v1.Fleet/Join", 0, req, len);

        if (r != NULL)
            r->join = 1;
    }
}

static void h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, ud, "/sfl.v1.Fleet/Subscribe", 1, req, len);
}

static void h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    if (fold_submit(call, ud, req, len) == 0)
        return; /* fold mode took it */
    (void)relay(call, ud, "/sfl.v1.Fleet/SubmitUpdate", 0, req, len);
}

/* A heartbeat that repeats, byte for byte, the last idle one (no job,
 * phase idle) the current master answered for this agent connection is
 * answered here with that answer: the master would learn nothing from it
 * and answer the same (an idle agent's liveness is its connection, which
 * the front-end reports when it goes: Fleet.Gone). A round member's
 * heartbeat (a job or a phase: the master moves its deadline or aborts
 * it), one that changed (its conditions, or idle again after a round) and
 * the first on each master connection go to the master. Most of a
 * population is idle at any time: their heartbeats stay here. */
static void h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    fe_agent_t *ag = ud;
    fe_t *fe = ag->fe;
    sfl_msg_limits_t lim;
    sfl_heartbeat_req_t m;
    uint8_t h[16];
    fe_relay_t *r;

    crypto_generichash(h, sizeof(h), req, len, NULL, 0);
    if (fe->master_open && !master_silent(fe) && ag->hb_epoch == fe->master_epoch &&
        sodium_memcmp(h, ag->hb_hash, sizeof(h)) == 0) {
        sfl_heartbeat_reply_t hr = {.interval_ms = ag->hb_interval};
        uint8_t *buf = NULL;
        size_t blen = 0;

        if (sfl_msg_heartbeat_reply_pack(&hr, &buf, &blen) == 0) {
            fe->hb_answered++;
            (void)sfl_grpc_reply(call, buf, blen);
            sfl_msg_buf_free(buf);
            return;
        }
    }
    sfl_msg_limits_default(&lim);
    r = relay(call, ag, "/sfl.v1.Fleet/Heartbeat", 0, req, len);
    if (r != NULL && sfl_msg_heartbeat_req_unpack(req, len, &lim, &m) == 0 &&
        m.phase == SFL_PHASE_IDLE && m.job_id == 0) {
        r->hb = 1;
        memcpy(r->hb_hash, h, sizeof(h));
    } else {
        ag->hb_epoch = 0; /* in a round: its next idle heartbeat tells the master */
    }
}

static void h_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, ud, "/sfl.v1.Fleet/SubmitStep", 0, req, len);
}

static void h_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, ud, "/sfl.v1.Fleet/SubmitSecAgg", 0, req, len);
}

#define R_AGENT (1u << SFL_ROLE_AGENT), "agent"
static const sfl_grpc_method_t methods[] = {
    {"/sfl.v1.Coordinator/Join", SFL_GRPC_KIND_UNARY, h_join, R_AGENT, FE_SMALL_REQUEST},
    {"/sfl.v1.Coordinator/Subscribe", SFL_GRPC_KIND_SERVER_STREAM, h_subscribe, R_AGENT,
     FE_SMALL_REQUEST},
    {"/sfl.v1.Coordinator/SubmitUpdate", SFL_GRPC_KIND_UNARY, h_submit, R_AGENT, 0},
    {"/sfl.v1.Coordinator/Heartbeat", SFL_GRPC_KIND_UNARY, h_heartbeat, R_AGENT,
     FE_SMALL_REQUEST},
    {"/sfl.v1.Coordinator/SubmitStep", SFL_GRPC_KIND_UNARY, h_step, R_AGENT, 0},
    {"/sfl.v1.Coordinator/SubmitSecAgg", SFL_GRPC_KIND_UNARY, h_secagg, R_AGENT, 0},
};
#undef R_AGENT
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

/* ---- agent connections ------------------------------------------------------------ */

static void gone_done(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                      size_t len, void *ud)
{
    (void)call;
    (void)status;
    (void)message;
    (void)resp;
    (void)len;
    (void)ud;
}

/* Tells the master the agent's connection here closed (best effort: if the
 * master's connection is gone too, the master dropped all of ours). */
static void tell_gone(fe_agent_t *ag)
{
    fe_t *fe = ag->fe;
    sfl_fleet_call_t m;
    uint8_t *buf = NULL;
    size_t blen = 0;

    if (fe->master == NULL || ag->peer.cn[0] == '\0')
        return;
    memset(&m, 0, sizeof(m));
    snprintf(m.agent_cn, sizeof(m.agent_cn), "%s", ag->peer.cn);
    memcpy(m.cert_sha256, ag->peer.sha256, 32);
    m.conn_id = ag->id;
    if (sfl_msg_fleet_call_pack(&m, &buf, &blen) < 0)
        return;
    if (sfl_grpc_call_unary(sfl_grpcconn_session(fe->master), "/sfl.v1.Fleet/Gone", buf, blen,
                            10000, gone_done, NULL, NULL) < 0)
        sfl_log(SFL_LOG_DEBUG, "gone_lost", "conn=%llu", (unsigned long long)ag->id);
    sfl__free(buf);
    sfl_grpcconn_pump(fe->master);
}

static void agent_freed(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    fe_agent_t *ag = ud;
    fe_t *fe = ag->fe;

    (void)g;
    (void)status;
    (void)detail;
    sfl__free(ag);
    fe->handles--;
    check_stopped(fe);
}

static void agent_open(sfl_conn_t *c, int status)
{
    fe_t *fe = sfl_conn_data(c);
    static const sfl_grpcconn_cbs_t cbs = {NULL, agent_freed};
    sfl_grpc_config_t gc;
    fe_agent_t *ag;
    char q[200];

    if (status != 0)
        return;
    if ((ag = sfl__calloc(1, sizeof(*ag))) == NULL) {
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    ag->fe = fe;
    ag->c = c;
    ag->id = ++fe->next_id;
    if (sfl_conn_peer(c, &ag->peer) < 0)
        memset(&ag->peer, 0, sizeof(ag->peer));
    if (sfl_conn_peer_name(c, ag->addr, sizeof(ag->addr)) < 0)
        snprintf(ag->addr, sizeof(ag->addr), "?");
    memset(&gc, 0, sizeof(gc));
    gc.max_message = (uint32_t)(fe->cfg.max_message - FE_ENVELOPE);
    gc.max_streams = (uint32_t)fe->cfg.max_streams;
    /* liveness is the transport's (idle_timeout_ms) and the heartbeat's */
    gc.idle_timeout_ms = (uint32_t)fe->cfg.idle_timeout_ms;
    gc.peer_roles = 1u << ag->peer.role;
    gc.peer_role_name = sfl_role_name(ag->peer.role);
    gc.max_buffered = (uint32_t)fe->cfg.max_buffered;
    gc.body_timeout_ms = (uint32_t)fe->cfg.body_timeout_ms;
    gc.budget = fe->budget;
    if (sfl_grpcconn_accept(fe->loop, c, &gc, methods, N_METHODS, ag, &cbs, ag, &ag->g) < 0) {
        sfl__free(ag);
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    fe->handles++;
    ag->next = fe->agents;
    if (fe->agents)
        fe->agents->prev = ag;
    fe->agents = ag;
    fe->nagents++;
    sfl_conn_set_data(c, ag);
    sfl_log(SFL_LOG_DEBUG, "agent_open", "conn=%llu addr=%s cn=%s role=%s",
            (unsigned long long)ag->id, ag->addr, sfl_log_quote(ag->peer.cn, q, sizeof(q)),
            sfl_role_name(ag->peer.role));
    if (fe->stopping)
        sfl_grpcconn_close(ag->g);
    sfl_grpcconn_pump(ag->g);
}

static void agent_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    fe_agent_t *ag = sfl_conn_data(c);

    if (ag != NULL && ag->c != NULL)
        (void)sfl_grpcconn_feed(ag->g, buf, len);
}

static void agent_drain(sfl_conn_t *c)
{
    fe_agent_t *ag = sfl_conn_data(c);

    if (ag != NULL)
        sfl_grpcconn_pump(ag->g);
}

static void agent_close(sfl_conn_t *c, int status)
{
    fe_agent_t *ag = sfl_conn_data(c);
    fe_t *fe;

    if (ag == NULL)
        return;
    fe = ag->fe;
    ag->c = NULL;
    sfl_log(SFL_LOG_DEBUG, "agent_close", "conn=%llu addr=%s status=%d",
            (unsigned long long)ag->id, ag->addr, status);
    /* cancels the calls still held: relay_cancelled for each */
    sfl_grpcconn_closed(ag->g, status);
    tell_gone(ag);
    if (ag->prev)
        ag->prev->next = ag->next;
    else
        fe->agents = ag->next;
    if (ag->next)
        ag->next->prev = ag->prev;
    fe->nagents--;
}

static const sfl_conn_cbs_t agent_cbs = {agent_open, agent_data, agent_drain, agent_close};

/* ---- the master ------------------------------------------------------------------- */

static void retry_fired(uv_timer_t *t)
{
    fe_t *fe = t->data;

    if (!fe->stopping)
        master_connect(fe);
}

static void master_retry(fe_t *fe)
{
    if (!fe->stopping)
        uv_timer_start(&fe->mtimer, retry_fired, FE_RETRY_MS, 0);
}

static void master_opened(sfl_grpcconn_t *g, void *ud)
{
    fe_t *fe = ud;
    uint64_t every = silent_limit(fe) / 4;

    (void)g;
    fe->master_open = 1;
    fe->master_epoch++;
    fe->fails = 0;
    fe->ping_at = 0;
    uv_timer_start(&fe->mtimer, keepalive_fired, every, every);
    sfl_log(SFL_LOG_INFO, "master_open", "master=%s:%s agents=%llu", fe->hosts[fe->master_at],
            fe->ports[fe->master_at], (unsigned long long)fe->nagents);
}

static void master_closed(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    fe_t *fe = ud;
    char q[300];

    (void)g;
    /* every failure after an open connection; of the attempts that never
     * open (a master down, a standby), the first and then one in 20 */
    if (fe->master_open || fe->fails++ % 20 == 0)
        sfl_log(fe->master_open ? SFL_LOG_WARN : SFL_LOG_INFO, "master_closed",
                "master=%s:%s status=%d detail=%s failed_attempts=%llu", fe->hosts[fe->master_at],
                fe->ports[fe->master_at], status, sfl_log_quote(detail, q, sizeof(q)),
                (unsigned long long)fe->fails);
    fe->master = NULL;
    fe->master_open = 0;
    fe->tx_since = fe->ping_at = 0;
    uv_timer_stop(&fe->mtimer);
    fe->handles--;
    fold_master_gone(fe);
    /* a standby does not listen: the next address */
    fe->next_master = (fe->master_at + 1) % fe->nmasters;
    if (fe->stopping)
        check_stopped(fe);
    else
        master_retry(fe);
}

static void master_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    fe_t *fe = req->data;
    static const sfl_grpcconn_cbs_t cbs = {master_opened, master_closed};
    char authority[300];
    sfl_conn_opts_t o;
    sfl_grpc_config_t gc;
    int rc;

    fe->resolving = 0;
    fe->handles--;
    if (fe->stopping) {
        uv_freeaddrinfo(res);
        check_stopped(fe);
        return;
    }
    if (status < 0 || res == NULL) {
        sfl_log(SFL_LOG_WARN, "master_unreachable", "master=%s:%s error=\"resolve: %s\"",
                fe->hosts[fe->master_at], fe->ports[fe->master_at], uv_strerror(status));
        uv_freeaddrinfo(res);
        fe->next_master = (fe->master_at + 1) % fe->nmasters;
        master_retry(fe);
        return;
    }
    memset(&o, 0, sizeof(o));
    o.tls = fe->cli_tls[fe->master_at];
    o.connect_timeout_ms = 5000;
    o.idle_timeout_ms = fe->cfg.idle_timeout_ms;
    memset(&gc, 0, sizeof(gc));
    gc.max_message = (uint32_t)fe->cfg.max_message;
    gc.idle_timeout_ms = UINT32_MAX;
    snprintf(authority, sizeof(authority), "%s:%s", fe->hosts[fe->master_at],
             fe->ports[fe->master_at]);
    rc = sfl_grpcconn_connect(fe->loop, res->ai_addr, &o, &gc, authority, &cbs, fe, &fe->master);
    uv_freeaddrinfo(res);
    if (rc < 0) {
        char q[300];

        sfl_log(SFL_LOG_WARN, "master_unreachable", "master=%s error=%s", authority,
                sfl_log_quote(sfl_last_error(), q, sizeof(q)));
        fe->master = NULL;
        fe->next_master = (fe->master_at + 1) % fe->nmasters;
        master_retry(fe);
        return;
    }
    fe->handles++;
}

static void master_connect(fe_t *fe)
{
    struct addrinfo hints;
    int rc;

    if (fe->master != NULL || fe->resolving || fe->stopping)
        return;
    fe->master_at = fe->next_master;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    fe->gai.data = fe;
    rc = uv_getaddrinfo(fe->loop, &fe->gai, master_resolved, fe->hosts[fe->master_at],
                        fe->ports[fe->master_at], &hints);
    if (rc < 0) {
        fe->next_master = (fe->master_at + 1) % fe->nmasters;
        master_retry(fe);
        return;
    }
    fe->resolving = 1;
    fe->handles++;
}

/* ---- lifecycle -------------------------------------------------------------------- */

static void on_reject(sfl_listener_t *l, int status, const char *detail)
{
    char q[300];

    (void)l;
    sfl_log(SFL_LOG_DEBUG, "conn_refused", "status=%d detail=%s", status,
            sfl_log_quote(detail, q, sizeof(q)));
}

int fe_new(uv_loop_t *loop, const fe_config_t *cfg, fe_t **out)
{
    sfl_tls_config_t tc;
    sfl_conn_opts_t o;
    fe_t *fe;
    char buf[1024], *save = NULL, *tok;
    size_t n;
    int rc;

    *out = NULL;
    if ((rc = fe_master_list_check(cfg->master, &n)) < 0)
        return rc;
    if (cfg->max_message <= 2 * FE_ENVELOPE)
        return sfl__fail(SFL_EINVAL, "max_message is too small for a front-end");
    if ((rc = sfl_seal_init()) < 0)
        return rc;
    if ((fe = sfl__calloc(1, sizeof(*fe))) == NULL)
        return SFL_ENOMEM;
    fe->loop = loop;
    fe->cfg = *cfg;
    if ((fe->folds = sfl__calloc(FE_FOLDS, sizeof(*fe->folds))) == NULL) {
        rc = SFL_ENOMEM;
        goto fail;
    }
    fe->cfg.listen = NULL;
    snprintf(fe->master_list, sizeof(fe->master_list), "%s", cfg->master);
    fe->cfg.master = fe->master_list;
    fe->cfg.cert = fe->cfg.key = fe->cfg.ca = NULL; /* read below, not kept */
    snprintf(buf, sizeof(buf), "%s", cfg->master);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if ((rc = sfl_grpcconn_split_hostport(tok, fe->hosts[fe->nmasters], sizeof(fe->hosts[0]),
                                              fe->ports[fe->nmasters], sizeof(fe->ports[0]))) < 0)
            goto fail;
        memset(&tc, 0, sizeof(tc));
        tc.cert_file = cfg->cert;
        tc.key_file = cfg->key;
        tc.ca_file = cfg->ca;
        tc.verify_host = fe->hosts[fe->nmasters];
        tc.alpn = "h2";
        tc.alpn_required = 1;
        if ((rc = sfl_tls_new(&tc, 0, &fe->cli_tls[fe->nmasters])) < 0)
            goto fail;
        fe->nmasters++;
    }
    memset(&tc, 0, sizeof(tc));
    tc.cert_file = cfg->cert;
    tc.key_file = cfg->key;
    tc.ca_file = cfg->ca;
    tc.require_client_cert = 1;
    tc.alpn = "h2";
    tc.alpn_required = 1;
    if ((rc = sfl_tls_new(&tc, 1, &fe->srv_tls)) < 0)
        goto fail;
    if ((rc = sfl_grpc_budget_new(cfg->max_buffered_total, &fe->budget)) < 0)
        goto fail;
    memset(&o, 0, sizeof(o));
    o.tls = fe->srv_tls;
    o.handshake_timeout_ms = cfg->handshake_timeout_ms;
    o.idle_timeout_ms = cfg->idle_timeout_ms;
    o.max_conns = cfg->max_conns;
    o.max_handshakes = cfg->max_handshakes;
    o.max_handshakes_per_ip = cfg->max_handshakes_per_ip;
    if ((rc = sfl_listener_new(loop, cfg->listen, &o, &agent_cbs, on_reject, fe,
                               &fe->listener)) < 0) {
        char detail[512];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        rc = sfl__fail(rc, "listen: %s", detail);
        goto fail;
    }
    uv_timer_init(loop, &fe->mtimer);
    fe->mtimer.data = fe;
    fe->handles++;
    for (size_t i = 0; i < FE_FOLDS; i++) {
        fe->folds[i].fe = fe;
        uv_timer_init(loop, &fe->folds[i].timer);
        fe->folds[i].timer.data = &fe->folds[i];
        fe->handles++;
    }
    master_connect(fe);
    sfl_log(SFL_LOG_INFO, "started", "role=frontend port=%d masters=%s", fe_port(fe),
            fe->master_list);
    *out = fe;
    return 0;
fail:
    sfl_listener_close(fe->listener);
    fe->listener = NULL;
    fe_free(fe);
    return rc;
}

int fe_port(const fe_t *fe)
{
    return fe->listener ? sfl_listener_port(fe->listener) : SFL_ENOTFOUND;
}

int fe_master_open(const fe_t *fe)
{
    return fe->master != NULL && fe->master_open;
}

void fe_stats(const fe_t *fe, fe_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    out->agents = fe->nagents;
    out->master_connected = fe_master_open(fe);
    memcpy(out->relayed, fe->relayed_by, sizeof(out->relayed));
    out->heartbeats_answered = fe->hb_answered;
    out->master_silent = fe->silent;
    out->relay_failures = fe->relay_failures;
    out->models_fetched = fe->fetched;
    out->model_bytes = fe->model_bytes;
    out->model_mismatches = fe->model_mismatches;
    out->join_refused = fe->refused_joins;
}

static void mtimer_closed(uv_handle_t *h)
{
    fe_t *fe = h->data;

    fe->handles--;
    check_stopped(fe);
}

static void check_stopped(fe_t *fe)
{
    if (!fe->stopping || fe->handles > 0 || fe->done == NULL)
        return;
    {
        void (*done)(void *ud) = fe->done;

        fe->done = NULL;
        done(fe->done_ud);
    }
}

void fe_shutdown(fe_t *fe, void (*done)(void *ud), void *ud)
{
    if (fe->stopping)
        return;
    fe->stopping = 1;
    fe->done = done;
    fe->done_ud = ud;
    sfl_log(SFL_LOG_INFO, "stopping", "role=frontend agents=%llu relayed=%llu folded=%llu "
            "partials=%llu heartbeats_answered=%llu", (unsigned long long)fe->nagents,
            (unsigned long long)fe->relayed, (unsigned long long)fe->folded,
            (unsigned long long)fe->partials, (unsigned long long)fe->hb_answered);
    sfl_listener_close(fe->listener);
    fe->listener = NULL;
    for (fe_agent_t *ag = fe->agents; ag != NULL; ag = ag->next)
        if (ag->c != NULL)
            sfl_conn_abort(ag->c);
    /* what was folded and not sent yet goes before the master's connection
     * closes (best effort: its members are lost otherwise) */
    for (size_t i = 0; fe->folds != NULL && i < FE_FOLDS; i++)
        fold_flush(&fe->folds[i]);
    if (fe->master != NULL)
        sfl_grpcconn_close(fe->master);
    if (fe->resolving)
        uv_cancel((uv_req_t *)&fe->gai);
    uv_timer_stop(&fe->mtimer);
    uv_close((uv_handle_t *)&fe->mtimer, mtimer_closed);
    for (size_t i = 0; fe->folds != NULL && i < FE_FOLDS; i++) {
        uv_timer_stop(&fe->folds[i].timer);
        uv_close((uv_handle_t *)&fe->folds[i].timer, fold_timer_closed);
    }
}

void fe_free(fe_t *fe)
{
    if (fe == NULL)
        return;
    for (size_t i = 0; i < FE_MAX_MASTERS; i++)
        sfl_tls_free(fe->cli_tls[i]);
    sfl_tls_free(fe->srv_tls);
    sfl_grpc_budget_free(fe->budget);
    for (size_t i = 0; i < FE_MODELS; i++)
        sfl__free(fe->models[i].model);
    for (size_t i = 0; fe->folds != NULL && i < FE_FOLDS; i++) {
        sfl__free(fe->folds[i].sum);
        sfl__free(fe->folds[i].members);
    }
    sfl__free(fe->folds);
    sfl__free(fe);
}

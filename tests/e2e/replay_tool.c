/* sfl-replay: replayed, re-targeted, tampered and misattributed updates
 * against a real sfl-coordinator over mutual TLS (tests/e2e/replay.sh).
 *
 *   sfl-replay --coordinator IP:PORT --server-name NAME --pki DIR
 *              --coordinator-pk HEX --agent CN --other CN --stranger CN
 *              --data FILE.svm --data2 FILE.svm [--timeout-ms N]
 *
 * Three certificates from DIR (sfl-pki layout: DIR/ca.crt,
 * DIR/agent/CN.{crt,key}): "agent" (A) and "other" (B) act as real agents
 * through the library (each its own connection, a fresh Ed25519 identity,
 * Join, Subscribe, tasks verified against the pinned coordinator key,
 * agent_train_task on a local LibSVM shard); "stranger" (C) only connects.
 * The coordinator's job must select exactly A and B for two consecutive
 * rounds r and r + 1 (cohort 2, no other agent subscribed). Because each
 * round stays open until both have answered, every verdict below is taken
 * while the round it aims at is open, so it tests what it claims:
 *
 *   round r, both pending:
 *     A  its fresh update with one payload byte flipped  -> REJECTED (signature)
 *     A  its fresh update                                -> ACCEPTED
 *     A  the same bytes again                            -> DUPLICATE
 *     C  A's bytes, over a certificate that never joined -> gRPC FAILED_PRECONDITION
 *     B  A's bytes, agent_id A, over B's certificate     -> gRPC PERMISSION_DENIED
 *     B  A's sealed update relabelled agent_id B         -> REJECTED (signature)
 *     B  its fresh update                                -> ACCEPTED (round r closes)
 *   round r + 1, both pending (their Subscribes cancelled first so that
 *   round r + 2 waits for other agents):
 *     A  round r's bytes unchanged                       -> LATE
 *     A  round r's update, envelope moved to r + 1       -> REJECTED (signature)
 *     A  round r's content re-signed for r + 1's round
 *        key, envelope r + 1                             -> REJECTED (signature)
 *     A  round r's update, envelope moved to r + 2       -> WRONG_ROUND
 *     A, B  their fresh updates                          -> ACCEPTED
 *
 * One line per check: "STEP: expected X, got Y". Exit 0 when every check
 * held, 1 when one did not, 2 for a usage or setup error (no connection,
 * no task in time). Every wait is bounded by --timeout-ms (default 30000)
 * and each call by its own deadline.
 *
 * This is a test driver, not event-loop code: it runs the uv loop from
 * straight-line code (pump() until a reply arrives), and trains on the
 * loop's thread because the shards are tiny. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <uv.h>

#include "agent.h"
#include "sfl/core/alloc.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/data/libsvm.h"
#include "sfl/net/transport.h"

#define PATH_JOIN "/sfl.v1.Coordinator/Join"
#define PATH_SUBSCRIBE "/sfl.v1.Coordinator/Subscribe"
#define PATH_SUBMIT "/sfl.v1.Coordinator/SubmitUpdate"
#define TOOL_VERSION "sfl-replay 0.1.0"
/* Deadline of each unary call (sent as grpc-timeout, enforced locally). */
#define CALL_TIMEOUT_MS 5000u
/* Keeps uv_run(UV_RUN_ONCE) returning so the waits can check the clock. */
#define TICK_MS 20u
/* Longest pause before subscribing again after a Wait or a closed stream. */
#define RESUB_MAX_MS 500u

typedef struct opts {
    const char *coordinator, *server_name, *pki, *coordinator_pk;
    const char *agent, *other, *stranger, *data, *data2;
    uint64_t timeout_ms;
    int hostile; /* --hostile: the hostile-update scenario instead */
    const char *impostor; /* --impostor HEX: the Join impostor scenario instead */
} opts_t;

/* One certificate's connection and, for A and B, its agent state. */
typedef struct peer {
    const char *label;   /* "A", "B", "C" */
    const char *cn;
    sfl_tls_t *tls;
    sfl_grpcconn_t *g;   /* NULL once closed */
    int opened, closed;
    int close_status;
    char close_detail[256];
    sfl_identity_t *id;  /* fresh; NULL for the stranger */
    sfl_dataset_t *data; /* NULL for the stranger */
    uint64_t agent_id;   /* from Join */
    sfl_grpc_call_t *sub;
    uint64_t resub_at;   /* loop time of the next Subscribe */
    sfl_task_t *task;    /* the newest verified task, owned */
    uint32_t waits, refused;
} peer_t;

/* The outcome of one unary call. */
typedef struct reply {
    int done;
    int status;          /* gRPC status; negative: the call did not start */
    char message[512];
    uint8_t *resp;       /* owned (sfl__free) */
    size_t len;
} reply_t;

static uv_loop_t loop;
static uv_timer_t tick;
static opts_t o = {.timeout_ms = 30000};
static uint64_t deadline;
static uint8_t coord_pk[SFL_SEAL_PK_BYTES];
static unsigned checks, failures;

static void say(const char *fmt, ...) SFL_PRINTF(1, 2);
static void say(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static int expired(void)
{
    uv_update_time(&loop);
    return uv_now(&loop) >= deadline;
}

static void pump(void)
{
    uv_run(&loop, UV_RUN_ONCE);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* ---- connections ----------------------------------------------------------- */

static void on_open(sfl_grpcconn_t *g, void *ud)
{
    peer_t *p = ud;

    (void)g;
    p->opened = 1;
}

static void on_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    peer_t *p = ud;

    (void)g;
    p->g = NULL;
    p->sub = NULL; /* its done callback runs after this and is ignored */
    p->closed = 1;
    p->close_status = status;
    snprintf(p->close_detail, sizeof(p->close_detail), "%s", detail ? detail : "");
}

static const sfl_grpcconn_cbs_t conn_cbs = {on_open, on_close};

static int make_tls(peer_t *p)
{
    char cert[1024], key[1024], ca[1024];
    sfl_tls_config_t c = {0};

    snprintf(cert, sizeof(cert), "%s/agent/%s.crt", o.pki, p->cn);
    snprintf(key, sizeof(key), "%s/agent/%s.key", o.pki, p->cn);
    snprintf(ca, sizeof(ca), "%s/ca.crt", o.pki);
    c.cert_file = cert;
    c.key_file = key;
    c.ca_file = ca;
    c.verify_host = o.server_name;
    c.alpn = "h2";
    c.alpn_required = 1;
    return sfl_tls_new(&c, 0, &p->tls);
}

static int open_peer(peer_t *p, const struct sockaddr *addr)
{
    sfl_conn_opts_t co = {.tls = p->tls, .connect_timeout_ms = CALL_TIMEOUT_MS};
    /* The tool's own pace decides when calls happen; never idle out. */
    sfl_grpc_config_t gc = {.max_message = AGENT_MAX_MESSAGE, .idle_timeout_ms = UINT32_MAX};
    int rc;

    rc = sfl_grpcconn_connect(&loop, addr, &co, &gc, o.coordinator, &conn_cbs, p, &p->g);
    if (rc < 0)
        return rc;
    while (!p->opened && !p->closed && !expired())
        pump();
    if (!p->opened) {
        say("setup: %s (%s) did not connect: %s", p->label, p->cn,
            p->closed ? p->close_detail : "timed out");
        return -ETIMEDOUT;
    }
    return 0;
}

/* ---- unary calls ------------------------------------------------------------- */

static void on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                     size_t len, void *ud)
{
    reply_t *r = ud;

    (void)call;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message ? message : "");
    if (status == SFL_GRPC_STATUS_OK && len > 0) {
        r->resp = sfl__malloc(len);
        if (r->resp == NULL) {
            r->status = SFL_ENOMEM;
            snprintf(r->message, sizeof(r->message), "out of memory for the reply");
        } else {
            memcpy(r->resp, resp, len);
            r->len = len;
        }
    }
    r->done = 1;
}

/* Calls path with req on p and waits for the answer (the call's own
 * deadline, or the tool's, whichever comes first). */
static void call(peer_t *p, const char *path, const uint8_t *req, size_t len, reply_t *r)
{
    sfl_grpc_call_t *c = NULL;
    int rc;

    memset(r, 0, sizeof(*r));
    if (p->g == NULL) {
        r->status = SFL_GRPC_STATUS_UNAVAILABLE;
        snprintf(r->message, sizeof(r->message), "not connected: %s", p->close_detail);
        return;
    }
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(p->g), path, req, len, CALL_TIMEOUT_MS,
                             on_unary, r, &c);
    if (rc < 0) {
        r->status = rc;
        snprintf(r->message, sizeof(r->message), "cannot start the call: %s", sfl_last_error());
        return;
    }
    while (!r->done && !expired())
        pump();
    if (!r->done) {
        sfl_grpc_cancel(c); /* no callback after this: r may go */
        r->status = SFL_GRPC_STATUS_DEADLINE_EXCEEDED;
        snprintf(r->message, sizeof(r->message), "no answer before the tool's deadline");
    }
}

static void reply_free(reply_t *r)
{
    sfl__free(r->resp);
    r->resp = NULL;
}

/* ---- Join and Subscribe -------------------------------------------------------- */

static int join(peer_t *p)
{
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    sfl_join_req_t m;
    sfl_join_reply_t jr;
    uint8_t *buf = NULL;
    size_t len = 0;
    reply_t r;
    int rc;

    memset(&m, 0, sizeof(m));
    memcpy(m.identity_key, p->id->pk, sizeof(m.identity_key));
    if ((rc = agent_summarize(p->data, &m.dataset)) < 0)
        return rc;
    /* --hostile: A lies about its data at Join, so that its inflated
     * update weight passes the Join check and meets the job's cap. */
    if (o.hostile && strcmp(p->label, "A") == 0)
        m.dataset.samples = 1000000000000ull;
    m.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    snprintf(m.agent_version, sizeof(m.agent_version), "%s", TOOL_VERSION);
    /* As the real agent: the proof of possession over this connection. */
    if (p->g == NULL)
        return -ENOTCONN;
    if ((rc = sfl_conn_export_keying_material(sfl_grpcconn_conn(p->g), SFL_SEAL_JOIN_LABEL,
                                              binding, sizeof(binding))) < 0 ||
        (rc = sfl_seal_sign_join(p->id, binding, m.proof)) < 0)
        return rc;
    m.has_proof = 1;
    /* ... and the certificate key's cert_proof, as sfl-agent sends it */
    if ((rc = sfl_tls_cert_binding_sign(p->tls, m.identity_key, m.cert_proof,
                                        &m.cert_proof_len)) < 0)
        return rc;
    if ((rc = sfl_msg_join_req_pack(&m, &buf, &len)) < 0)
        return rc;
    call(p, PATH_JOIN, buf, len, &r);
    sfl_msg_buf_free(buf);
    if (r.status != SFL_GRPC_STATUS_OK) {
        say("setup: %s Join failed: %s \"%s\"", p->label, sfl_grpc_status_name(r.status),
            r.message);
        rc = SFL_EIO;
        goto out;
    }
    if ((rc = sfl_msg_join_reply_unpack(r.resp, r.len, NULL, &jr)) < 0) {
        say("setup: %s Join reply: %s", p->label, sfl_last_error());
        goto out;
    }
    /* As the real agent: a coordinator with another key is not ours. */
    if (sodium_memcmp(jr.coordinator_key, coord_pk, SFL_SEAL_PK_BYTES) != 0) {
        say("setup: %s Join reply carries another coordinator key", p->label);
        rc = SFL_EBADSIG;
        goto out;
    }
    p->agent_id = jr.agent_id;
    say("joined: %s cn=%s agent_id=%" PRIu64, p->label, p->cn, p->agent_id);
out:
    reply_free(&r);
    return rc;
}

static void take_task(peer_t *p, sfl_task_t *t)
{
    /* Only the newest attempt matters; an older one still held is stale. */
    if (p->task != NULL && (t->round < p->task->round ||
                            (t->round == p->task->round && t->attempt < p->task->attempt))) {
        sfl_msg_task_free(t);
        return;
    }
    sfl_msg_task_free(p->task);
    p->task = t;
}

static void on_sub_msg(sfl_grpc_call_t *c, const uint8_t *msg, size_t len, void *ud)
{
    peer_t *p = ud;
    sfl_msg_limits_t lim;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    int rc;

    if (c != p->sub)
        return;
    sfl_msg_limits_default(&lim);
    lim.max_message = AGENT_MAX_MESSAGE;
    if ((rc = sfl_msg_task_or_wait_unpack(msg, len, &lim, &t, &w)) < 0) {
        p->refused++;
        say("note: %s got a malformed stream message: %s", p->label, sfl_last_error());
        return;
    }
    if (t == NULL) {
        uint32_t ms = w.retry_after_ms < RESUB_MAX_MS ? w.retry_after_ms : RESUB_MAX_MS;

        p->waits++;
        p->resub_at = uv_now(&loop) + ms;
        say("note: %s got Wait retry_after_ms=%u reason=\"%s\"", p->label, w.retry_after_ms,
            w.reason);
        return;
    }
    rc = sfl_seal_verify_detached(coord_pk, SFL_MSG_TASK_CONTEXT, t->signed_bytes, t->signed_len,
                                  t->signature);
    if (rc < 0) {
        p->refused++;
        say("note: %s refused a task for round %" PRIu64 ": the signature does not verify "
            "with the pinned key", p->label, t->round);
        sfl_msg_task_free(t);
        return;
    }
    take_task(p, t);
}

static void on_sub_done(sfl_grpc_call_t *c, int status, const char *message, void *ud)
{
    peer_t *p = ud;

    if (c != p->sub)
        return;
    p->sub = NULL;
    if (status != SFL_GRPC_STATUS_OK) {
        say("note: %s Subscribe ended: %s \"%s\"", p->label, sfl_grpc_status_name(status),
            message ? message : "");
        p->resub_at = uv_now(&loop) + RESUB_MAX_MS;
    }
}

static int subscribe(peer_t *p)
{
    sfl_subscribe_req_t m;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    memset(&m, 0, sizeof(m));
    m.agent_id = p->agent_id;
    if ((rc = sfl_msg_subscribe_req_pack(&m, &buf, &len)) < 0)
        return rc;
    /* No grpc-timeout: the stream lives as long as the connection. */
    rc = sfl_grpc_call_stream(sfl_grpcconn_session(p->g), PATH_SUBSCRIBE, buf, len, 0, on_sub_msg,
                              on_sub_done, p, &p->sub);
    sfl_msg_buf_free(buf);
    if (rc < 0)
        p->sub = NULL;
    return rc;
}

static int same_attempt(const sfl_task_t *x, const sfl_task_t *y)
{
    return x->job_id == y->job_id && x->round == y->round && x->attempt == y->attempt;
}

/* Until A and B both hold a verified task for the same attempt of a round
 * >= min_round; subscribes again (soon) whenever a stream ended. The tasks
 * are handed over to the caller. */
static int wait_tasks(peer_t *a, peer_t *b, uint64_t min_round, sfl_task_t **ta, sfl_task_t **tb)
{
    peer_t *ps[2] = {a, b};

    *ta = *tb = NULL;
    while (!expired()) {
        for (int i = 0; i < 2; i++) {
            peer_t *p = ps[i];

            if (p->closed) {
                say("setup: %s lost its connection: %s", p->label, p->close_detail);
                return SFL_EIO;
            }
            if (p->task != NULL && p->task->round < min_round) {
                sfl_msg_task_free(p->task);
                p->task = NULL;
            }
            if (p->sub == NULL && uv_now(&loop) >= p->resub_at && subscribe(p) < 0) {
                say("setup: %s cannot subscribe: %s", p->label, sfl_last_error());
                return SFL_EIO;
            }
        }
        if (a->task && b->task && same_attempt(a->task, b->task)) {
            *ta = a->task;
            *tb = b->task;
            a->task = b->task = NULL;
            return 0;
        }
        pump();
    }
    say("setup: no task for A and B for the same attempt of round >= %" PRIu64
        " in time (A holds round %" PRIu64 ", B round %" PRIu64 "; waits %u/%u)",
        min_round, a->task ? a->task->round : 0, b->task ? b->task->round : 0, a->waits,
        b->waits);
    return -ETIMEDOUT;
}

static void unsubscribe(peer_t *p)
{
    if (p->sub != NULL)
        sfl_grpc_cancel(p->sub);
    p->sub = NULL;
    p->resub_at = UINT64_MAX;
}

/* ---- updates ----------------------------------------------------------------------- */

typedef struct bytes {
    uint8_t *p; /* owned (sfl_msg_buf_free) */
    size_t n;
} bytes_t;

static int train(peer_t *p, const sfl_task_t *t, bytes_t *out)
{
    sfl_algo_ws_t ws;
    int rc;

    sfl_algo_ws_init(&ws);
    rc = agent_train_task(t, p->data, NULL, p->id, p->agent_id, &ws, NULL, &out->p, &out->n);
    sfl_algo_ws_close(&ws);
    if (rc < 0)
        say("setup: %s cannot train round %" PRIu64 ": %s", p->label, t->round, sfl_last_error());
    return rc;
}

/* How to change a copy of an Update. */
typedef enum { EDIT_FLIP_SEALED, EDIT_ENVELOPE } edit_t;

/* out = in with its signed payload's middle byte flipped (EDIT_FLIP_SEALED)
 * or with round, attempt and agent_id replaced (EDIT_ENVELOPE), repacked. */
static int edit(const bytes_t *in, edit_t how, uint64_t round, uint32_t attempt,
                uint64_t agent_id, bytes_t *out)
{
    sfl_update_t *u = NULL;
    int rc;

    if ((rc = sfl_msg_update_unpack(in->p, in->n, NULL, &u)) < 0)
        return rc;
    if (how == EDIT_FLIP_SEALED) {
        u->sealed[u->sealed_len / 2] ^= 0x01;
    } else {
        u->round = round;
        u->attempt = attempt;
        u->agent_id = agent_id;
    }
    rc = sfl_msg_update_pack(u, &out->p, &out->n);
    sfl_msg_update_free(u);
    return rc;
}

/* ---- checks ------------------------------------------------------------------------ */

typedef struct outcome {
    int status;         /* gRPC status, negative when no call was made */
    sfl_ack_t ack;      /* when status is OK */
    char message[512];  /* gRPC message */
} outcome_t;

static const char *ack_upper(sfl_ack_status_t s)
{
    switch (s) {
    case SFL_ACK_ACCEPTED: return "ACCEPTED";
    case SFL_ACK_LATE: return "LATE";
    case SFL_ACK_DUPLICATE: return "DUPLICATE";
    case SFL_ACK_WRONG_ROUND: return "WRONG_ROUND";
    case SFL_ACK_REJECTED: return "REJECTED";
    }
    return "?";
}

static void submit(peer_t *p, const bytes_t *b, outcome_t *oc)
{
    reply_t r;
    int rc;

    memset(oc, 0, sizeof(*oc));
    call(p, PATH_SUBMIT, b->p, b->n, &r);
    oc->status = r.status;
    snprintf(oc->message, sizeof(oc->message), "%s", r.message);
    if (r.status == SFL_GRPC_STATUS_OK &&
        (rc = sfl_msg_ack_unpack(r.resp, r.len, NULL, &oc->ack)) < 0) {
        oc->status = rc;
        snprintf(oc->message, sizeof(oc->message), "bad ack: %s", sfl_last_error());
    }
    reply_free(&r);
}

static void describe(const outcome_t *oc, char *out, size_t cap)
{
    if (oc->status == SFL_GRPC_STATUS_OK)
        snprintf(out, cap, "%s%s%s%s", ack_upper(oc->ack.status), oc->ack.reason[0] ? " (" : "",
                 oc->ack.reason, oc->ack.reason[0] ? ")" : "");
    else if (oc->status >= 0)
        snprintf(out, cap, "gRPC %s (%s)", sfl_grpc_status_name(oc->status), oc->message);
    else
        snprintf(out, cap, "no answer: %s (%s)", sfl_strerror(oc->status), oc->message);
}

static void verdict(const char *step, const char *want, int ok, const outcome_t *oc,
                    const char *why)
{
    char got[900];

    describe(oc, got, sizeof(got));
    checks++;
    if (!ok)
        failures++;
    say("%s: expected %s, got %s%s%s", step, want, got, ok ? "" : " -- FAILED",
        !ok && why ? why : "");
}

/* p submits b; the Ack must be want and its reason contain `mention`
 * (NULL: anything). */
static void expect_ack(const char *step, peer_t *p, const bytes_t *b, sfl_ack_status_t want,
                       const char *mention)
{
    char w[128];
    outcome_t oc;
    int ok, said;

    submit(p, b, &oc);
    ok = oc.status == SFL_GRPC_STATUS_OK && oc.ack.status == want;
    said = ok && (mention == NULL || strstr(oc.ack.reason, mention) != NULL);
    snprintf(w, sizeof(w), "%s%s%s%s", ack_upper(want), mention ? " mentioning '" : "",
             mention ? mention : "", mention ? "'" : "");
    verdict(step, w, ok && said, &oc, ok && !said ? ": the reason does not say why" : NULL);
}

/* p submits b; the call must fail with gRPC status s1 or s2. */
static void expect_status(const char *step, peer_t *p, const bytes_t *b, int s1, int s2)
{
    char w[128];
    outcome_t oc;

    submit(p, b, &oc);
    snprintf(w, sizeof(w), "gRPC %s or %s", sfl_grpc_status_name(s1), sfl_grpc_status_name(s2));
    verdict(step, w, oc.status == s1 || oc.status == s2, &oc, NULL);
}

/* ---- the scenario ---------------------------------------------------------------- */

static int scenario(peer_t *A, peer_t *B, peer_t *C)
{
    sfl_task_t *ta = NULL, *tb = NULL, *ta1 = NULL, *tb1 = NULL, stale;
    bytes_t a_r = {0}, b_r = {0}, bad = {0}, a_r1 = {0}, b_r1 = {0};
    char step[160];
    uint64_t r;
    int rc;

    /* ---- round r --------------------------------------------------------------- */
    if ((rc = wait_tasks(A, B, 1, &ta, &tb)) < 0)
        goto out;
    r = ta->round;
    say("round: r=%" PRIu64 " job=%" PRIu64 " attempt=%u (tasks verified with the pinned key)",
        r, ta->job_id, ta->attempt);
    if ((rc = train(A, ta, &a_r)) < 0 || (rc = train(B, tb, &b_r)) < 0)
        goto out;

    if ((rc = edit(&a_r, EDIT_FLIP_SEALED, 0, 0, 0, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A tampered copy (one payload byte flipped)", r);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "signature");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    snprintf(step, sizeof(step), "r%" PRIu64 " A fresh update", r);
    expect_ack(step, A, &a_r, SFL_ACK_ACCEPTED, NULL);
    snprintf(step, sizeof(step), "r%" PRIu64 " A same bytes again (round still open)", r);
    expect_ack(step, A, &a_r, SFL_ACK_DUPLICATE, "already accepted");

    snprintf(step, sizeof(step), "r%" PRIu64 " C submits A's bytes (certificate never joined)", r);
    expect_status(step, C, &a_r, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                  SFL_GRPC_STATUS_PERMISSION_DENIED);
    snprintf(step, sizeof(step), "r%" PRIu64 " B submits A's bytes (agent_id of A)", r);
    expect_status(step, B, &a_r, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  SFL_GRPC_STATUS_FAILED_PRECONDITION);

    if ((rc = edit(&a_r, EDIT_ENVELOPE, ta->round, ta->attempt, B->agent_id, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " B submits A's sealed update as its own", r);
    expect_ack(step, B, &bad, SFL_ACK_REJECTED, "signature");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    snprintf(step, sizeof(step), "r%" PRIu64 " B fresh update (closes the round)", r);
    expect_ack(step, B, &b_r, SFL_ACK_ACCEPTED, NULL);

    /* ---- round r + 1 ----------------------------------------------------------- */
    if ((rc = wait_tasks(A, B, r + 1, &ta1, &tb1)) < 0)
        goto out;
    say("round: r+1=%" PRIu64 " attempt=%u", ta1->round, ta1->attempt);
    if (ta1->round != r + 1) {
        say("setup: expected round %" PRIu64 " next, the coordinator opened %" PRIu64, r + 1,
            ta1->round);
        rc = SFL_EINVAL;
        goto out;
    }
    /* Out of the next cohort: round r + 2 is for the real agents. */
    unsubscribe(A);
    unsubscribe(B);

    snprintf(step, sizeof(step), "r%" PRIu64 " A resubmits round %" PRIu64 "'s bytes", r + 1, r);
    expect_ack(step, A, &a_r, SFL_ACK_LATE, "not open");

    if ((rc = edit(&a_r, EDIT_ENVELOPE, ta1->round, ta1->attempt, A->agent_id, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A round %" PRIu64 "'s update re-targeted to %" PRIu64,
             r + 1, r, r + 1);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "signature");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    /* The agent itself signs round r's content for round r + 1's key: only
     * the signature (round, nonce, model hash) can tell. */
    stale = *ta;
    memcpy(stale.round_key, ta1->round_key, sizeof(stale.round_key));
    if ((rc = train(A, &stale, &a_r1)) < 0 ||
        (rc = edit(&a_r1, EDIT_ENVELOPE, ta1->round, ta1->attempt, A->agent_id, &bad)) < 0)
        goto out;
    sfl_msg_buf_free(a_r1.p);
    a_r1.p = NULL;
    snprintf(step, sizeof(step), "r%" PRIu64 " A round %" PRIu64 "'s content re-signed for round %"
             PRIu64 "'s key", r + 1, r, r + 1);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "signature");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    if ((rc = edit(&a_r, EDIT_ENVELOPE, ta1->round + 1, ta1->attempt, A->agent_id, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A round %" PRIu64 "'s update sent to round %" PRIu64,
             r + 1, r, r + 2);
    expect_ack(step, A, &bad, SFL_ACK_WRONG_ROUND, "not open");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    if ((rc = train(A, ta1, &a_r1)) < 0 || (rc = train(B, tb1, &b_r1)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A fresh update", r + 1);
    expect_ack(step, A, &a_r1, SFL_ACK_ACCEPTED, NULL);
    snprintf(step, sizeof(step), "r%" PRIu64 " B fresh update (closes the round)", r + 1);
    expect_ack(step, B, &b_r1, SFL_ACK_ACCEPTED, NULL);
    rc = 0;
out:
    if (rc < 0)
        say("setup: stopped: %s", sfl_strerror(rc));
    sfl_msg_buf_free(bad.p);
    sfl_msg_buf_free(a_r.p);
    sfl_msg_buf_free(b_r.p);
    sfl_msg_buf_free(a_r1.p);
    sfl_msg_buf_free(b_r1.p);
    sfl_msg_task_free(ta);
    sfl_msg_task_free(tb);
    sfl_msg_task_free(ta1);
    sfl_msg_task_free(tb1);
    return rc;
}

/* ---- the hostile scenario (--hostile) ------------------------------------------ */

/* A's update for t as a hostile agent makes it: every entry of the first
 * four = value, declaring `samples`; with nan, that value's bytes in the
 * packed payload become a NaN before sealing (the codec never writes one).
 * Sealed and signed properly: only the content is hostile. */
static int seal_hostile(peer_t *p, const sfl_task_t *t, const sfl_payload_t *pl, double value,
                        int nan, bytes_t *out);

static int hostile_bytes(peer_t *p, const sfl_task_t *t, double value, double samples,
                         int nan, bytes_t *out)
{
    uint32_t dim = t->model->dim, k = dim < 4 ? dim : 4;
    sfl_spvec_t *v = NULL;
    sfl_payload_t pl = {0};
    int rc;

    if ((rc = sfl_spvec_new(dim, k, &v)) < 0)
        return rc;
    for (uint32_t i = 0; i < k; i++) {
        v->idx[i] = i;
        v->val[i] = value;
    }
    v->nnz = k;
    pl.update = v;
    pl.encoding = SFL_ENC_F64;
    pl.samples = (uint64_t)samples;
    pl.train_loss = 1.0;
    rc = seal_hostile(p, t, &pl, value, nan, out);
    sfl_spvec_free(v);
    return rc;
}

/* pl signed properly for t (as agents send it); with nan, value's bytes in
 * the packed payload become a NaN first (the codec never writes one) and
 * the update is sealed, as an older agent sends it (accepted for one
 * release: the seal opens and the payload check refuses the NaN). */
static int seal_hostile(peer_t *p, const sfl_task_t *t, const sfl_payload_t *pl, double value,
                        int nan, bytes_t *out)
{
    uint8_t *payload = NULL, *sealed = NULL;
    size_t plen = 0, cap, slen = 0;
    int rc;

    if (!nan) {
        rc = agent_seal_payload(t, pl, p->id, p->agent_id, &out->p, &out->n);
        goto out;
    }
    if ((rc = sfl_msg_payload_pack(pl, &payload, &plen)) < 0)
        goto out;
    {
        const double qnan = NAN;
        int patched = 0;

        for (size_t i = 0; i + sizeof(double) <= plen; i++)
            if (memcmp(payload + i, &value, sizeof(double)) == 0) {
                memcpy(payload + i, &qnan, sizeof(double));
                patched++;
            }
        if (patched == 0) {
            rc = sfl__fail(SFL_EINVAL, "value %g not found in the payload", value);
            goto out;
        }
    }
    cap = sfl_seal_sealed_size(plen);
    sealed = malloc(cap);
    if (sealed == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    {
        sfl_upd_ctx_t ctx;
        sfl_update_t m = {t->job_id, t->round, t->attempt, p->agent_id, SFL_UPDATE_MODE_SEALED,
                          NULL, 0};

        memcpy(ctx.round_pk, t->round_key, sizeof(ctx.round_pk));
        ctx.job = t->job_id;
        ctx.round = t->round;
        memcpy(ctx.nonce, t->round_nonce, sizeof(ctx.nonce));
        ctx.agent_id = p->agent_id;
        memcpy(ctx.model_hash, t->model_hash, sizeof(ctx.model_hash));
        if ((rc = sfl_seal_update(p->id, &ctx, payload, plen, sealed, cap, &slen)) < 0)
            goto out;
        m.sealed = sealed;
        m.sealed_len = slen;
        rc = sfl_msg_update_pack(&m, &out->p, &out->n);
    }
out:
    sfl_msg_buf_free(payload);
    free(sealed);
    if (rc < 0)
        say("setup: hostile update: %s", sfl_last_error());
    return rc;
}

/* A's answer to a statistics task (a standardize job's round 0) as a
 * hostile agent makes it from its true moments: d entries (not 1 + 2 d),
 * the first feature's sum of squares negative, a count that is not the
 * rows it declares, or a NaN in place of its first sum. */
typedef enum { BADM_LENGTH, BADM_NEGATIVE, BADM_COUNT, BADM_NAN } badm_t;

static int hostile_moments(peer_t *p, const sfl_task_t *t, badm_t how, bytes_t *out)
{
    uint32_t d = t->dimension, n = 1 + 2 * d, len = how == BADM_LENGTH ? d : n;
    double *m = calloc(n, sizeof(double));
    const double mark = 4242.25;
    sfl_spvec_t *v = NULL;
    sfl_payload_t pl = {0};
    int rc;

    if (m == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_dataset_moments(p->data, d, m)) < 0 || (rc = sfl_spvec_new(len, 0, &v)) < 0)
        goto out;
    if (how == BADM_NEGATIVE)
        m[1 + d] = -1;
    if (how == BADM_COUNT)
        m[0] += 1;
    if (how == BADM_NAN)
        m[1] = mark;
    if ((rc = sfl_spvec_from_dense(v, m)) < 0)
        goto out;
    pl.update = v;
    pl.encoding = SFL_ENC_F64;
    pl.samples = p->data->X->nrows;
    rc = seal_hostile(p, t, &pl, mark, how == BADM_NAN, out);
out:
    sfl_spvec_free(v);
    free(m);
    return rc;
}

/* A standardize job's statistics round: A's bad moments are refused for it
 * alone, each with its reason; B's honest ones (the agent's own
 * agent_stats_task) are accepted. */
static void scenario_statistics(peer_t *A, peer_t *B, const sfl_task_t *ta,
                                const sfl_task_t *tb)
{
    static const struct {
        badm_t how;
        const char *what, *why;
    } bad[] = {{BADM_LENGTH, "of the model's length", "update.dim is"},
               {BADM_NEGATIVE, "with a negative sum of squares", "negative"},
               {BADM_COUNT, "counting a row more than it declares", "declares"},
               {BADM_NAN, "with a NaN sum", "not finite"}};
    bytes_t b = {0};
    char step[160];

    say("statistics: job=%" PRIu64 " attempt=%u", ta->job_id, ta->attempt);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (hostile_moments(A, ta, bad[i].how, &b) < 0)
            return;
        snprintf(step, sizeof(step), "r0 A moments %s", bad[i].what);
        expect_ack(step, A, &b, SFL_ACK_REJECTED, bad[i].why);
        sfl_msg_buf_free(b.p);
        b.p = NULL;
    }
    if (agent_stats_task(tb, B->data, B->id, B->agent_id, &b.p, &b.n) < 0) {
        say("setup: B cannot answer the statistics task: %s", sfl_last_error());
        return;
    }
    expect_ack("r0 B honest moments", B, &b, SFL_ACK_ACCEPTED, NULL);
    sfl_msg_buf_free(b.p);
}

/* The job (cohort 2, min_quorum 1, max_update_norm 1e6, max_samples 1000)
 * selects A and B. A joined claiming 1e12 samples (a lie no check at Join
 * can see). In round r A sends three hostile updates, each refused for it
 * alone by the coordinator's checks, and never a valid one; B's honest
 * update is accepted. That the round then commits with B's update alone, at
 * its deadline, is for the caller to see in the coordinator's log. */
static int scenario_hostile(peer_t *A, peer_t *B)
{
    sfl_task_t *ta = NULL, *tb = NULL;
    bytes_t bad = {0}, good = {0};
    char step[160];
    uint64_t r;
    int rc;

    if ((rc = wait_tasks(A, B, 0, &ta, &tb)) < 0)
        goto out;
    if (ta->statistics) {
        /* a standardize job: its statistics round first */
        scenario_statistics(A, B, ta, tb);
        sfl_msg_task_free(ta);
        sfl_msg_task_free(tb);
        ta = tb = NULL;
        if ((rc = wait_tasks(A, B, 1, &ta, &tb)) < 0)
            goto out;
    }
    r = ta->round;
    say("round: r=%" PRIu64 " job=%" PRIu64 " attempt=%u", r, ta->job_id, ta->attempt);

    if ((rc = hostile_bytes(A, ta, 1e300, (double)A->data->X->nrows, 0, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A update of finite values, norm above 1e300", r);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "max_update_norm");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;
    if ((rc = hostile_bytes(A, ta, 0.5, 1e12, 0, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A update declaring 1e12 samples", r);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "max_samples");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;
    if ((rc = hostile_bytes(A, ta, 12345.5, (double)A->data->X->nrows, 1, &bad)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " A update with NaN values", r);
    expect_ack(step, A, &bad, SFL_ACK_REJECTED, "not finite");
    sfl_msg_buf_free(bad.p);
    bad.p = NULL;

    if ((rc = train(B, tb, &good)) < 0)
        goto out;
    snprintf(step, sizeof(step), "r%" PRIu64 " B honest update", r);
    expect_ack(step, B, &good, SFL_ACK_ACCEPTED, NULL);

    rc = 0;
out:
    sfl_msg_buf_free(bad.p);
    sfl_msg_buf_free(good.p);
    sfl_msg_task_free(ta);
    sfl_msg_task_free(tb);
    return rc;
}

/* ---- --impostor: a name taken with a public key alone ------------------------------ */

/* One Join presenting pk with proof sig (NULL: none); the answer must be
 * PERMISSION_DENIED with want in its message. */
static void impostor_join(peer_t *p, const char *step, const uint8_t pk[SFL_SEAL_PK_BYTES],
                          const uint8_t *sig, const char *want)
{
    sfl_join_req_t m;
    uint8_t *buf = NULL;
    size_t len = 0;
    reply_t r;
    int ok;

    memset(&m, 0, sizeof(m));
    memcpy(m.identity_key, pk, sizeof(m.identity_key));
    m.dataset.samples = 10;
    m.dataset.dimension = 5;
    m.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    snprintf(m.agent_version, sizeof(m.agent_version), "%s", TOOL_VERSION);
    if (sig != NULL) {
        memcpy(m.proof, sig, sizeof(m.proof));
        m.has_proof = 1;
    }
    checks++;
    if (sfl_msg_join_req_pack(&m, &buf, &len) < 0) {
        failures++;
        say("%s: cannot pack the Join: %s", step, sfl_last_error());
        return;
    }
    call(p, PATH_JOIN, buf, len, &r);
    sfl_msg_buf_free(buf);
    ok = r.status == SFL_GRPC_STATUS_PERMISSION_DENIED && strstr(r.message, want) != NULL;
    failures += !ok;
    say("%s: expected PERMISSION_DENIED \"...%s...\", got %s \"%s\"%s", step, want,
        r.status >= 0 ? sfl_grpc_status_name(r.status) : "no call", r.message,
        ok ? "" : "  <-- FAILED");
    reply_free(&r);
}

/* The review's attack (issue 23, finding 6): certificate --agent, of the
 * federation's CA and with the CN of a real agent, presents that agent's
 * public key (--impostor HEX: anyone may read it) at Join. It cannot sign
 * with it: no proof, a proof by its own key, and a valid proof of its own
 * from an earlier connection replayed on a new one are all refused. */
static int scenario_impostor(peer_t *p, const struct sockaddr *addr)
{
    uint8_t victim[SFL_SEAL_PK_BYTES], binding[SFL_SEAL_BINDING_BYTES];
    uint8_t sig[SFL_SEAL_SIG_BYTES];
    int rc;

    if (sfl_seal_pk_from_hex(o.impostor, victim) < 0 || sfl_identity_pk_check(victim) < 0) {
        say("setup: --impostor is not a usable Ed25519 public key");
        return SFL_EINVAL;
    }
    impostor_join(p, "the victim's key, no proof", victim, NULL, "no join_proof");
    if (p->g == NULL) {
        say("setup: the connection closed: %s", p->close_detail);
        return -ENOTCONN;
    }
    if ((rc = sfl_conn_export_keying_material(sfl_grpcconn_conn(p->g), SFL_SEAL_JOIN_LABEL,
                                              binding, sizeof(binding))) < 0 ||
        (rc = sfl_seal_sign_join(p->id, binding, sig)) < 0) {
        say("setup: proof: %s", sfl_last_error());
        return rc;
    }
    impostor_join(p, "the victim's key, a proof by the impostor's key", victim, sig,
                  "join_proof does not verify");
    /* sig is a valid proof of p->id's key, but for this connection only */
    sfl_grpcconn_close(p->g);
    while (p->g != NULL && !expired())
        pump();
    p->opened = p->closed = 0;
    if ((rc = open_peer(p, addr)) < 0)
        return rc;
    impostor_join(p, "a proof replayed from another connection", p->id->pk, sig,
                  "join_proof does not verify");
    return 0;
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: sfl-replay --coordinator IP:PORT --server-name NAME --pki DIR\n"
            "                  --coordinator-pk HEX --agent CN --other CN --stranger CN\n"
            "                  --data FILE.svm --data2 FILE.svm [--timeout-ms N] [--hostile]\n"
            "       sfl-replay --coordinator IP:PORT --server-name NAME --pki DIR\n"
            "                  --coordinator-pk HEX --agent CN --impostor HEX [--timeout-ms N]\n"
            "Replays, re-targets, tampers with and misattributes signed updates against a\n"
            "running coordinator whose job selects exactly --agent and --other (cohort 2)\n"
            "for two rounds. Certificates: DIR/ca.crt, DIR/agent/CN.{crt,key}.\n"
            "--hostile: instead, A sends updates the job's bounds refuse (a huge norm,\n"
            "1e12 samples, NaN values) and B an honest one; the round must commit without A\n"
            "(job: cohort 2, min_quorum 1, max_update_norm 1e6, max_samples 1000).\n"
            "--impostor HEX: instead, only --agent connects and presents the public key HEX\n"
            "(another agent's) at Join: without a proof, with a proof by its own key, and\n"
            "with a proof replayed from an earlier connection; each must be PERMISSION_DENIED\n"
            "(--other, --stranger, --data and --data2 are not needed).\n"
            "Exit 0: every check held; 1: a check failed; 2: usage or setup error.\n");
}

static int parse(int argc, char **argv)
{
    static const struct {
        const char *flag;
        const char **dst;
    } flags[] = {
        {"--coordinator", &o.coordinator}, {"--server-name", &o.server_name},
        {"--pki", &o.pki},                 {"--coordinator-pk", &o.coordinator_pk},
        {"--agent", &o.agent},             {"--other", &o.other},
        {"--stranger", &o.stranger},       {"--data", &o.data},
        {"--data2", &o.data2},             {"--impostor", &o.impostor},
    };

    for (int i = 1; i < argc; i++) {
        size_t k;

        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--hostile") == 0) {
            o.hostile = 1;
            continue;
        }
        if (i + 1 >= argc)
            return -1;
        if (strcmp(argv[i], "--timeout-ms") == 0) {
            char *end;

            o.timeout_ms = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || o.timeout_ms == 0)
                return -1;
            continue;
        }
        for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
            if (strcmp(argv[i], flags[k].flag) == 0)
                break;
        if (k == sizeof(flags) / sizeof(flags[0]))
            return -1;
        *flags[k].dst = argv[++i];
    }
    /* --impostor needs the first five; the replay scenarios all but it */
    for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
        if (*flags[k].dst == NULL && flags[k].dst != &o.impostor &&
            (o.impostor == NULL || k < 5))
            return -1;
    if (o.impostor != NULL && o.hostile)
        return -1;
    return 0;
}

static int resolve(struct sockaddr_storage *ss)
{
    char host[256], port[16];
    int rc;

    if ((rc = sfl_grpcconn_split_hostport(o.coordinator, host, sizeof(host), port,
                                          sizeof(port))) < 0)
        return rc;
    /* Numeric only: the test runs on loopback. */
    if (uv_ip4_addr(host, atoi(port), (struct sockaddr_in *)ss) == 0 ||
        uv_ip6_addr(host, atoi(port), (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return sfl__fail(SFL_EINVAL, "--coordinator %s: not a numeric address", o.coordinator);
}

static int setup_agent(peer_t *p, const char *data)
{
    int rc;

    if ((rc = sfl_libsvm_read(data, 0, NULL, &p->data)) < 0) {
        say("setup: %s: %s", data, sfl_last_error());
        return rc;
    }
    if (p->data->X->nrows == 0) {
        say("setup: %s: no samples", data);
        return SFL_EEMPTY;
    }
    if ((rc = sfl_identity_generate(&p->id)) < 0)
        say("setup: identity: %s", sfl_last_error());
    return rc;
}

int main(int argc, char **argv)
{
    peer_t A = {.label = "A"}, B = {.label = "B"}, C = {.label = "C"};
    peer_t *all[3] = {&A, &B, &C};
    struct sockaddr_storage ss;
    int rc, code = 2;

    if (parse(argc, argv) < 0) {
        usage(stderr);
        return 2;
    }
    A.cn = o.agent;
    B.cn = o.other;
    C.cn = o.stranger;
    signal(SIGPIPE, SIG_IGN); /* writes to a vanished peer (transport.h) */
    if (uv_loop_init(&loop) < 0)
        return 2;
    uv_timer_init(&loop, &tick);
    uv_timer_start(&tick, on_tick, TICK_MS, TICK_MS);
    uv_update_time(&loop);
    deadline = uv_now(&loop) + o.timeout_ms;

    if (sfl_seal_pk_from_hex(o.coordinator_pk, coord_pk) < 0 ||
        sfl_identity_pk_check(coord_pk) < 0) {
        say("setup: --coordinator-pk is not a usable Ed25519 public key");
        goto out;
    }
    if ((rc = resolve(&ss)) < 0) {
        say("setup: %s", sfl_last_error());
        goto out;
    }
    if (o.impostor != NULL) {
        if ((rc = sfl_identity_generate(&A.id)) < 0 || (rc = make_tls(&A)) < 0) {
            say("setup: %s", sfl_last_error());
            goto out;
        }
        if ((rc = open_peer(&A, (const struct sockaddr *)&ss)) < 0)
            goto out;
        rc = scenario_impostor(&A, (const struct sockaddr *)&ss);
        if (rc == 0)
            code = failures ? 1 : 0;
        say("sfl-replay: %u checks, %u failed%s", checks, failures,
            rc < 0 ? " (scenario incomplete)" : "");
        goto out;
    }
    if (setup_agent(&A, o.data) < 0 || setup_agent(&B, o.data2) < 0)
        goto out;
    for (int i = 0; i < 3; i++) {
        if ((rc = make_tls(all[i])) < 0) {
            say("setup: %s TLS: %s", all[i]->label, sfl_last_error());
            goto out;
        }
        if ((rc = open_peer(all[i], (const struct sockaddr *)&ss)) < 0)
            goto out;
    }
    if (join(&A) < 0 || join(&B) < 0)
        goto out;
    /* Both subscribe in the same loop turn (wait_tasks), so the round starts
     * with both once the coordinator sees them. */
    rc = o.hostile ? scenario_hostile(&A, &B) : scenario(&A, &B, &C);
    if (rc == 0)
        code = failures ? 1 : 0;
    say("sfl-replay: %u checks, %u failed%s", checks, failures,
        rc < 0 ? " (scenario incomplete)" : "");
out:
    for (int i = 0; i < 3; i++) {
        unsubscribe(all[i]);
        if (all[i]->g != NULL)
            sfl_grpcconn_close(all[i]->g);
    }
    /* Bounded even when the tool's deadline has passed. */
    deadline = uv_now(&loop) + 3000;
    while ((A.g || B.g || C.g) && !expired())
        pump();
    for (int i = 0; i < 3; i++) {
        sfl_msg_task_free(all[i]->task);
        sfl_tls_free(all[i]->tls);
        sfl_identity_free(all[i]->id);
        sfl_dataset_free(all[i]->data);
    }
    uv_close((uv_handle_t *)&tick, NULL);
    /* Once every connection has closed only their reapers are left, which
     * finish at once; otherwise leave the rest to the exit. */
    if (A.g == NULL && B.g == NULL && C.g == NULL) {
        uv_run(&loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&loop) != 0)
            say("note: loop handles still open at exit");
    }
    return code;
}

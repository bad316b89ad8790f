/* The coordinator's lifecycle (state directory, lock, identity, the store
 * and its writer, listeners, shutdown), its connections (a gRPC server
 * channel over each TLS connection, grpcconn.h) and the gRPC glue the
 * services share (replies, refusals, the agent a connection joined as).
 * The rest is in the modules coord_int.h lists. */
#include "coord.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/core/ini.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/seal.h"
#include "sfl/net/tlsticket.h"
#include "sfl/net/transport.h"

#include "coord_int.h"
#include "service/coordmetrics.h"
#include "service/coordstatus.h"
#include "round/jobs.h"
#include "round/driver.h"
#include "round/quarantine.h"
#include "service/admin.h"
#include "service/fleetinfo.h"
#include "service/agentsvc.h"
#include "service/fleetsvc.h"
#include "service/foldsvc.h"
#include "round/registry.h"
#include "service/submit.h"
#include "round/subs.h"
#include "round/coordwrite.h"
#include "leader.h"


/* Peer-supplied or library text into a wire text field: printable ASCII
 * only (the field's rule), truncated to fit. */
void coord_text_copy(char *dst, size_t cap, const char *src)
{
    size_t i = 0;

    for (; src[i] && i + 1 < cap; i++)
        dst[i] = src[i] >= 0x20 && src[i] <= 0x7e ? src[i] : '?';
    dst[i] = '\0';
}

/* ---- gRPC helpers ----------------------------------------------------------------- */

void coord_reply_packed(sfl_grpc_call_t *call, int rc, uint8_t *buf, size_t len)
{
    if (rc < 0) {
        char msg[300];

        snprintf(msg, sizeof(msg), "cannot encode the reply: %s", sfl_last_error());
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_INTERNAL, msg);
    } else {
        (void)sfl_grpc_reply(call, buf, len);
    }
    sfl_msg_buf_free(buf);
}

/* One log line per refused request, so an operator sees why a peer's call
 * failed; capped per connection so a peer cannot flood the log, and over
 * the whole process (a Join storm from many connections) at
 * REFUSALS_PER_SECOND lines a second: the lines not written are counted
 * and the next line written says how many (dropped=N). */
#define REFUSALS_LOGGED 8
/* Refused calls after which a connection is closed. */
#define REFUSALS_CLOSE 1000u
#define REFUSALS_PER_SECOND 20

/* 1 if a refusal line may be written now; *dropped = lines not written
 * since the last one that was. */
int coord_refusal_log_ok(coord_t *co, uint32_t *dropped)
{
    uint64_t sec = coord_now_ms(co) / 1000;

    if (sec != co->refusal_second) {
        co->refusal_second = sec;
        co->refusal_lines = 0;
    }
    if (co->refusal_lines >= REFUSALS_PER_SECOND) {
        co->refusal_dropped++;
        return 0;
    }
    co->refusal_lines++;
    *dropped = co->refusal_dropped;
    co->refusal_dropped = 0;
    return 1;
}

static void log_refused(coord_conn_t *k, const char *path, int status, const char *msg)
{
    char q[600], p[120];
    uint32_t dropped;

    if (k == NULL)
        return;
    /* A front-end's refusals are its agents' (each refused on its own):
     * counted for the log cap, never a reason to drop all its agents. */
    if (++k->refused == REFUSALS_CLOSE && !(k->has_peer && k->peer.role == SFL_ROLE_COORDINATOR)) {
        /* A peer that only sends what is refused (a Join storm, junk
         * streams) gets no more of the loop: closed once out of feed. */
        k->doomed = 1;
        coord_log(COORD_LOG_WARN, "conn_closed", "addr=%s reason=\"%u calls refused\"", k->addr,
                  REFUSALS_CLOSE);
    }
    if (k->refused > REFUSALS_LOGGED + 1 || !coord_refusal_log_ok(k->co, &dropped))
        return;
    if (k->refused > REFUSALS_LOGGED) {
        coord_log(COORD_LOG_WARN, "call_refused", "addr=%s further refusals on this connection "
                  "are not logged dropped=%u", k->addr, dropped);
        return;
    }
    coord_log(COORD_LOG_WARN, "call_refused",
              "addr=%s peer=%s path=%s status=%s message=%s dropped=%u", k->addr,
              k->has_peer ? coord_log_quote(k->peer.cn, p, sizeof(p)) : "-",
              path[0] ? path : "-", sfl_grpc_status_name(status),
              coord_log_quote(msg, q, sizeof(q)), dropped);
}

static void on_refused(const char *path, int status, const char *message, void *ud)
{
    log_refused(ud, path, status, message);
}

/* A revoked certificate's connection lives this long without a call. */
#define REVOKED_IDLE_MS 10000u

/* A revoked certificate's call was answered (conn_open): the connection
 * closes once the answer is written. Logged once, at conn_open. */
static void revoked_refused(const char *path, int status, const char *message, void *ud)
{
    coord_conn_t *k = ud;
    char q[200];

    (void)status;
    (void)message;
    coord_log(COORD_LOG_DEBUG, "revoked_answered", "addr=%s path=%s", k->addr,
              coord_log_quote(path[0] ? path : "-", q, sizeof(q)));
    if (k->g != NULL)
        sfl_grpcconn_close(k->g);
}

void coord_fail_call(sfl_grpc_call_t *call, int status, const char *fmt, ...) SFL_PRINTF(3, 4);
void coord_fail_call(sfl_grpc_call_t *call, int status, const char *fmt, ...)
{
    sfl_grpc_session_t *s = sfl_grpc_call_session(call);
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_refused(s ? sfl_grpc_session_user(s) : NULL, sfl_grpc_call_path(call), status, msg);
    (void)sfl_grpc_finish(call, status, msg);
}

void coord_fail_unpack(sfl_grpc_call_t *call, int rc)
{
    coord_fail_call(call, rc == SFL_ELIMIT ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                     : SFL_GRPC_STATUS_INVALID_ARGUMENT,
              "%s", sfl_last_error());
}

/* 0 if the coordinator takes calls, or the call is finished. Who may call
 * what was checked when the call's HEADERS arrived (methods[]). */
int coord_serving(sfl_grpc_call_t *call, const coord_conn_t *k)
{
    if (k->co->stopping) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down");
        return -1;
    }
    return 0;
}

void coord_bind_agent(coord_conn_t *k, coord_agent_t *a)
{
    if (a->conn == k)
        return;
    if (a->conn) {
        /* The same certificate connected again: the newer connection wins. */
        a->conn->agent = NULL;
        coord_end_sub(a, SFL_GRPC_STATUS_FAILED_PRECONDITION, "the agent connected again");
    }
    if (k->agent && k->agent != a)
        k->agent->conn = NULL;
    a->conn = k;
    k->agent = a;
}

/* The agent bound to this connection, which must be agent_id; else the
 * call is finished and NULL returned. An agent that joined earlier in this
 * process with the same certificate is bound again without a Join. */
coord_agent_t *coord_bound_agent(sfl_grpc_call_t *call, coord_conn_t *k, uint64_t agent_id)
{
    coord_agent_t *a = k->agent;

    if (a == NULL) {
        a = coord_agent_by_name(k->co, k->peer.cn);
        if (a == NULL || !a->joined || sodium_memcmp(a->fpr, k->peer.sha256, 32) != 0) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "join first");
            return NULL;
        }
        coord_bind_agent(k, a);
    }
    if (a->id != agent_id) {
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "agent_id %llu is not bound to this certificate",
                  (unsigned long long)agent_id);
        return NULL;
    }
    a->last_seen_ms = coord_wall_ms();
    return a;
}

/* Who may call what, and how big a request may be: checked when a call's
 * HEADERS arrive, before any of its body is kept (sfl/net/grpc.h). Only an
 * update carries a vector; every other request is a few fields. */
#define R_AGENT (1u << SFL_ROLE_AGENT), "agent"
#define R_ADMIN (1u << SFL_ROLE_ADMIN), "admin"
#define R_COORD (1u << SFL_ROLE_COORDINATOR), "coordinator (front-end)"
#define SMALL_REQUEST (64u << 10)
#define FLEET_ENVELOPE (256u + SFL_MSG_CERT_DER_MAX)
static const sfl_grpc_method_t methods[] = {
    {"/sfl.v1.Coordinator/Join", SFL_GRPC_KIND_UNARY, coord_h_join, R_AGENT, SMALL_REQUEST},
    {"/sfl.v1.Coordinator/Subscribe", SFL_GRPC_KIND_SERVER_STREAM, coord_h_subscribe, R_AGENT,
     SMALL_REQUEST},
    {"/sfl.v1.Coordinator/SubmitUpdate", SFL_GRPC_KIND_UNARY, coord_h_submit, R_AGENT, 0},
    {"/sfl.v1.Coordinator/Heartbeat", SFL_GRPC_KIND_UNARY, coord_h_heartbeat, R_AGENT,
     SMALL_REQUEST},
    {"/sfl.v1.Coordinator/SubmitStep", SFL_GRPC_KIND_UNARY, coord_h_step, R_AGENT, 0},
    {"/sfl.v1.Coordinator/SubmitSecAgg", SFL_GRPC_KIND_UNARY, coord_h_secagg, R_AGENT, 0},
    {"/sfl.v1.Admin/Status", SFL_GRPC_KIND_UNARY, coord_h_status, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ListAgents", SFL_GRPC_KIND_UNARY, coord_h_list_agents, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ListJobs", SFL_GRPC_KIND_UNARY, coord_h_list_jobs, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/CreateJob", SFL_GRPC_KIND_UNARY, coord_h_create_job, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/PauseJob", SFL_GRPC_KIND_UNARY, coord_h_pause, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ResumeJob", SFL_GRPC_KIND_UNARY, coord_h_resume, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/CancelJob", SFL_GRPC_KIND_UNARY, coord_h_cancel, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ExportModel", SFL_GRPC_KIND_UNARY, coord_h_export, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/JobHistory", SFL_GRPC_KIND_UNARY, coord_h_history, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/RevokeCertificate", SFL_GRPC_KIND_UNARY, coord_h_revoke, R_ADMIN,
     SMALL_REQUEST},
    {"/sfl.v1.Admin/ReleaseAgent", SFL_GRPC_KIND_UNARY, coord_h_release, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/Fleet", SFL_GRPC_KIND_UNARY, coord_h_fleet, R_ADMIN, SMALL_REQUEST},
    /* Front-ends (service/fleetsvc.c): certificates of the coordinator
     * role only, which may call nothing else here. A FleetCall is the
     * agent's request, 100-odd bytes more and the agent's certificate
     * (at most SFL_MSG_CERT_DER_MAX bytes). */
    {"/sfl.v1.Fleet/Join", SFL_GRPC_KIND_UNARY, coord_h_fleet_join, R_COORD,
     SMALL_REQUEST + FLEET_ENVELOPE},
    {"/sfl.v1.Fleet/Subscribe", SFL_GRPC_KIND_SERVER_STREAM, coord_h_fleet_subscribe, R_COORD,
     SMALL_REQUEST + FLEET_ENVELOPE},
    {"/sfl.v1.Fleet/SubmitUpdate", SFL_GRPC_KIND_UNARY, coord_h_fleet_submit, R_COORD, 0},
    {"/sfl.v1.Fleet/Heartbeat", SFL_GRPC_KIND_UNARY, coord_h_fleet_heartbeat, R_COORD,
     SMALL_REQUEST + FLEET_ENVELOPE},
    {"/sfl.v1.Fleet/SubmitStep", SFL_GRPC_KIND_UNARY, coord_h_fleet_step, R_COORD, 0},
    {"/sfl.v1.Fleet/SubmitSecAgg", SFL_GRPC_KIND_UNARY, coord_h_fleet_secagg, R_COORD, 0},
    {"/sfl.v1.Fleet/Model", SFL_GRPC_KIND_UNARY, coord_h_fleet_model, R_COORD, 1024},
    {"/sfl.v1.Fleet/Gone", SFL_GRPC_KIND_UNARY, coord_h_fleet_gone, R_COORD, 1024},
    /* fold mode (service/foldsvc.c): a Partial carries a sum of the
     * model's dimension, as large as an update */
    {"/sfl.v1.Fleet/FoldSpec", SFL_GRPC_KIND_UNARY, coord_h_fleet_fold_spec, R_COORD, 1024},
    {"/sfl.v1.Fleet/Claim", SFL_GRPC_KIND_UNARY, coord_h_fleet_claim, R_COORD,
     SMALL_REQUEST + FLEET_ENVELOPE},
    {"/sfl.v1.Fleet/Partial", SFL_GRPC_KIND_UNARY, coord_h_fleet_partial, R_COORD, 0},
};
#undef R_AGENT
#undef R_ADMIN
#undef R_COORD
/* The agents' listener serves every method (admin calls there share the
 * agents' handshake slots); admin_listen's serves only those of the admin
 * role, picked from the one table above. */
#define N_METHODS (sizeof(methods) / sizeof(methods[0]))
static sfl_grpc_method_t admin_methods[N_METHODS];
static size_t n_admin_methods;

static void admin_methods_init(void)
{
    n_admin_methods = 0;
    for (size_t i = 0; i < N_METHODS; i++)
        if (methods[i].roles == (1u << SFL_ROLE_ADMIN))
            admin_methods[n_admin_methods++] = methods[i];
}

/* ---- connections: a gRPC server channel over a TLS connection (grpcconn.h) ----------- */

static void handle_gone(coord_t *co);

/* The channel is gone (after conn_on_close): so is the connection. */
static void conn_freed(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;

    (void)g;
    (void)status;
    (void)detail;
    sfl_idmap_free(&k->kid_map);
    sfl__free(k);
    handle_gone(co);
}

/* A connection opened on the agents' listener (admin = 0) or on
 * admin_listen's (admin = 1), where only admin certificates are kept. */
static void conn_open(sfl_conn_t *c, int admin)
{
    coord_t *co = sfl_conn_data(c);
    sfl_grpc_config_t gc;
    coord_conn_t *k;
    char q[200], why[128];
    int revoked = 0;

    k = sfl__calloc(1, sizeof(*k));
    if (k == NULL) {
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    k->co = co;
    k->c = c;
    k->has_peer = sfl_conn_peer(c, &k->peer) == 0;
    if (sfl_conn_peer_name(c, k->addr, sizeof(k->addr)) < 0)
        snprintf(k->addr, sizeof(k->addr), "?");
    if (k->has_peer && coord_cert_revoked(co, k->peer.sha256)) {
        uint32_t dropped;

        co->tls_refused++;
        revoked = 1;
        if (coord_refusal_log_ok(co, &dropped))
            coord_log(COORD_LOG_WARN, "conn_refused",
                      "addr=%s cn=%s fingerprint=%s error=revoked answer=%s dropped=%u "
                      "resumed=%d",
                      k->addr, coord_log_quote(k->peer.cn, q, sizeof(q)), k->peer.fingerprint,
                      sfl_grpc_status_name(SFL_GRPC_STATUS_PERMISSION_DENIED), dropped,
                      sfl_conn_resumed(c));
    }
    if (!revoked && admin && (!k->has_peer || k->peer.role != SFL_ROLE_ADMIN)) {
        uint32_t dropped;

        co->tls_refused++;
        if (coord_refusal_log_ok(co, &dropped))
            coord_log(COORD_LOG_WARN, "conn_refused",
                      "addr=%s cn=%s error=\"admin_listen takes admin certificates only, not %s\" "
                      "dropped=%u",
                      k->addr, coord_log_quote(k->has_peer ? k->peer.cn : "", q, sizeof(q)),
                      sfl_role_name(k->has_peer ? k->peer.role : SFL_ROLE_NONE), dropped);
        sfl__free(k);
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    memset(&gc, 0, sizeof(gc));
    gc.max_message = (uint32_t)co->cfg.max_message;
    gc.max_streams = (uint32_t)co->cfg.max_streams;
    /* A front-end holds a Subscribe for each of its agents, and now and
     * then a Heartbeat or an update: up to max_conns agents (fleetsvc.c). */
    if (k->has_peer && k->peer.role == SFL_ROLE_COORDINATOR && !admin) {
        gc.max_streams = (uint32_t)(2 * co->cfg.max_conns + co->cfg.max_streams);
        /* ... and resets them as its agents leave: nghttp2's default bucket
         * (1,000, then 33 a second) ended a front-end's link with GOAWAY
         * INTERNAL_ERROR when a few thousand of its agents left at once
         * (results/fleet.md, the 100,000-agent run). As many resets as the
         * calls it may hold, and that many again every 10 s. */
        gc.reset_burst = gc.max_streams;
        gc.reset_rate = gc.max_streams / 10 > 33 ? gc.max_streams / 10 : 33;
    }
    gc.idle_timeout_ms = (uint32_t)co->cfg.idle_timeout_ms;
    gc.on_refused = on_refused;
    gc.peer_roles = k->has_peer ? 1u << k->peer.role : 0;
    gc.peer_role_name = sfl_role_name(k->has_peer ? k->peer.role : SFL_ROLE_NONE);
    gc.max_buffered = (uint32_t)co->cfg.max_buffered;
    gc.body_timeout_ms = (uint32_t)co->cfg.body_timeout_ms;
    gc.budget = co->budget;
    if (revoked) {
        /* A revoked certificate is told so, in a gRPC status on this TLS
         * connection (the agent has verified our certificate: an on-path
         * attacker can neither forge nor suppress it unnoticed), instead of
         * an unauthenticated alert or a bare close that it would retry for
         * ever (docs/security.md, "Binding and revocation"). It gets nothing
         * else: every call is answered at its HEADERS, before any DATA is
         * kept, and what it may cost is one stream, no request bytes and at
         * most REVOKED_IDLE_MS; the first answer closes the connection. */
        snprintf(why, sizeof(why), SFL_MSG_REVOKED " (fingerprint %s)", k->peer.fingerprint);
        gc.refuse_status = SFL_GRPC_STATUS_PERMISSION_DENIED;
        gc.refuse_message = why;
        gc.on_refused = revoked_refused;
        gc.max_streams = 1;
        if (gc.idle_timeout_ms > REVOKED_IDLE_MS)
            gc.idle_timeout_ms = REVOKED_IDLE_MS;
    }
    {
        static const sfl_grpcconn_cbs_t cbs = {NULL, conn_freed};

        if (sfl_grpcconn_accept(co->loop, c, &gc, admin ? admin_methods : methods,
                                admin ? n_admin_methods : N_METHODS, k, &cbs, k, &k->g) < 0) {
            sfl__free(k);
            sfl_conn_set_data(c, NULL);
            sfl_conn_abort(c);
            return;
        }
    }
    sfl_grpcconn_count_sent(k->g, &co->bytes_out);
    co->handles++;
    k->next = co->conns;
    if (co->conns)
        co->conns->prev = k;
    co->conns = k;
    co->nconns++;
    sfl_conn_set_data(c, k);
    coord_log(COORD_LOG_DEBUG, "conn_open", "addr=%s cn=%s role=%s resumed=%d", k->addr,
              coord_log_quote(k->has_peer ? k->peer.cn : "", q, sizeof(q)),
              sfl_role_name(k->has_peer ? k->peer.role : SFL_ROLE_NONE), sfl_conn_resumed(c));
    if (co->stopping)
        sfl_grpcconn_close(k->g);
    sfl_grpcconn_pump(k->g);
}

static void conn_on_connect(sfl_conn_t *c, int status)
{
    if (status == 0)
        conn_open(c, 0);
}

static void admin_on_connect(sfl_conn_t *c, int status)
{
    if (status == 0)
        conn_open(c, 1);
}

static void conn_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    coord_conn_t *k = sfl_conn_data(c);
    int rc;

    if (k == NULL || k->c == NULL)
        return;
    k->co->bytes_in += len;
    rc = sfl_grpcconn_feed(k->g, buf, len);
    if (rc < 0) {
        char q[300];

        coord_log(COORD_LOG_WARN, "protocol_error", "addr=%s error=%s", k->addr,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
    }
    if (k->doomed && k->c != NULL)
        sfl_conn_abort(k->c);
}

static void conn_on_drain(sfl_conn_t *c)
{
    coord_conn_t *k = sfl_conn_data(c);

    if (k)
        sfl_grpcconn_pump(k->g);
}

static void conn_on_close(sfl_conn_t *c, int status)
{
    coord_conn_t *k = sfl_conn_data(c);
    coord_t *co;

    if (k == NULL)
        return;
    co = k->co;
    k->c = NULL;
    coord_log(COORD_LOG_DEBUG, "conn_close", "addr=%s status=%d", k->addr, status);
    if (k->agent) {
        k->agent->conn = NULL;
        k->agent->last_seen_ms = coord_wall_ms();
        k->agent = NULL;
    }
    coord_fleet_closed(k); /* a front-end: the agents it held */
    /* Cancels the calls still held (a Subscribe): coord_sub_cancelled; k itself
     * goes in conn_freed. */
    sfl_grpcconn_closed(k->g, status);
    if (k->prev)
        k->prev->next = k->next;
    else
        co->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    co->nconns--;
    co->conns_closed++;
    if (co->stopping)
        coord_check_stopped(co);
    else
        coord_schedule_soon(co); /* an agent left: eligibility changed */
}

static void on_reject(sfl_listener_t *l, int status, const char *detail)
{
    coord_t *co = sfl_listener_data(l);
    uint32_t dropped;
    char q[400];

    co->tls_refused++;
    /* A flood is refused at line rate: its lines are rate-limited too. */
    if (coord_refusal_log_ok(co, &dropped))
        coord_log(COORD_LOG_WARN, "conn_refused", "status=%d error=%s dropped=%u", status,
                  coord_log_quote(detail ? detail : "", q, sizeof(q)), dropped);
}

static const sfl_conn_cbs_t conn_cbs = {conn_on_connect, conn_on_data, conn_on_drain,
                                        conn_on_close};
static const sfl_conn_cbs_t admin_cbs = {admin_on_connect, conn_on_data, conn_on_drain,
                                         conn_on_close};

/* A port another process holds: the setting that moves ours (key, as in
 * coordinator.ini and as a flag). */
static int addr_in_use(int rc, const char *key, const char *addr)
{
    return sfl__fail(rc, "%s %s: %s: another coordinator? change `%s` in coordinator.ini "
                     "or --%s", key, addr, uv_strerror(rc), key, key);
}

/* admin_listen: its own socket, backlog and handshake slots, so a flood of
 * the agents' listener cannot delay sflctl. Small fixed limits: its
 * clients are a few operators (and it is on loopback by default). */
#define ADMIN_MAX_CONNS 64
#define ADMIN_MAX_HANDSHAKES 16

/* ---- lifecycle ------------------------------------------------------------------------- */

static int state_dir_make(const char *dir)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return sfl__fail(-errno, "state_dir %s: %s", dir, strerror(errno));
    return 0;
}

/* Takes state_dir/coordinator.lock (flock, exclusive, held until the fd
 * closes, also when the process dies) and writes our pid into it: a second
 * coordinator on the same state refuses to start instead of writing into
 * the live database. SFL_EBUSY names the holder's pid. */
static int state_lock(const char *dir, int *out)
{
    char path[COORD_PATH_MAX + 32], buf[32];
    ssize_t n;
    int fd, e;

    *out = -1;
    snprintf(path, sizeof(path), "%s/coordinator.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sfl__fail(-errno, "%s: cannot open: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        e = errno;
        n = e == EWOULDBLOCK ? pread(fd, buf, sizeof(buf) - 1, 0) : 0;
        close(fd);
        if (e != EWOULDBLOCK)
            return sfl__fail(-e, "%s: cannot lock: %s", path, strerror(e));
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return sfl__fail(SFL_EBUSY,
                         "state directory %s is in use by another sfl-coordinator (pid %s)", dir,
                         buf[0] && strspn(buf, "0123456789") == strlen(buf) ? buf : "unknown");
    }
    n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        e = errno;
        close(fd);
        return sfl__fail(-e, "%s: cannot write: %s", path, strerror(e));
    }
    *out = fd;
    return 0;
}

/* Loads state_dir/coordinator.key, or makes it at the first start. */
static int identity_open(const char *dir, sfl_identity_t **out)
{
    char path[COORD_PATH_MAX + 32], hex[65];
    int rc;

    *out = NULL;
    if ((rc = state_dir_make(dir)) < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/coordinator.key", dir);
    rc = sfl_identity_load(path, out);
    if (rc != -ENOENT)
        return rc;
    if ((rc = sfl_identity_generate(out)) < 0)
        return rc;
    if ((rc = sfl_identity_save(*out, path)) < 0) {
        sfl_identity_free(*out);
        *out = NULL;
        return rc;
    }
    coord_log(COORD_LOG_INFO, "identity_created", "path=%s public_key=%s", path,
              sfl_seal_pk_to_hex((*out)->pk, hex));
    return 0;
}

/* state_dir/tls-ticket.keys: loaded (made at the first start), rotated
 * when due, saved before the listener's context uses the new key, so a
 * restarted coordinator opens the tickets its predecessor issued. A key
 * file that cannot be read (bad mode, corrupt) stops the start, like the
 * identity; one that cannot be written at a later rotation keeps the keys
 * in use (warned, tried again at the next check). */
static int tickets_refresh(coord_t *co, int starting)
{
    char path[COORD_PATH_MAX + 32];
    sfl_ticket_keys_t next;
    int rc, changed;

    if (co->tickets == NULL)
        return 0;
    snprintf(path, sizeof(path), "%s/tls-ticket.keys", co->cfg.state_dir);
    next = *co->tickets;
    if (starting && (rc = sfl_ticket_keys_load(path, &next)) < 0 && rc != -ENOENT)
        goto out;
    if ((rc = changed = sfl_ticket_keys_rotate(&next, (uint64_t)time(NULL),
                                                co->cfg.tls_ticket_rotate,
                                                co->cfg.tls_ticket_lifetime)) < 0)
        goto out;
    if (changed && (rc = sfl_ticket_keys_save(&next, path)) < 0)
        goto out;
    if (changed || starting) {
        if ((rc = sfl_tls_set_ticket_keys(co->tls, &next, (uint32_t)co->cfg.tls_ticket_lifetime)) <
            0)
            goto out;
        *co->tickets = next;
        coord_log(COORD_LOG_INFO, "tls_ticket_keys", "path=%s keys=%zu rotated=%d", path, next.n,
                  changed);
    }
    rc = 0;
out:
    sfl_ticket_keys_wipe(&next);
    if (rc < 0 && !starting)
        coord_log(COORD_LOG_WARN, "tls_ticket_keys_failed", "path=%s error=\"%s\"", path,
                  sfl_last_error());
    return rc;
}

static void on_ticket_timer(uv_timer_t *t)
{
    (void)tickets_refresh(t->data, 0);
}

int coord_identity_public(const char *state_dir, uint8_t pk[32])
{
    sfl_identity_t *id = NULL;
    int rc = identity_open(state_dir, &id);

    if (rc == 0)
        memcpy(pk, id->pk, 32);
    sfl_identity_free(id);
    return rc;
}

static void write_observed(void *ud, double seconds)
{
    coord_t *co = ud;

    coord_hist_observe(&co->write_hist, seconds);
}

static void writes_drained(void *ud)
{
    coord_check_stopped(ud);
}

/* Two connections to the store: the writer's (its thread owns it; the
 * leadership and recovery run on it first, leader.c) and the loop's,
 * read-only. */
static int store_open(coord_t *co)
{
    static const coord_writer_cbs_t wcbs = {write_observed, writes_drained, NULL};
    coord_writer_cbs_t cbs = wcbs;
    char path[sizeof(co->cfg.store) + COORD_PATH_MAX + 32];
    coord_store_opts_t so = {0};
    coord_store_t *wdb = NULL;
    int rc;

    if ((rc = coord_store_spec(&co->cfg, path, sizeof(path))) < 0)
        return rc;
    so.keep_checkpoints = (unsigned)co->cfg.keep_checkpoints;
    so.relaxed_sync = (int)co->cfg.relaxed_sync;
    if ((rc = coord_store_open(path, &so, &wdb)) < 0)
        return rc;
    cbs.ud = co;
    if ((rc = coord_writer_new(co->loop, wdb, &cbs, &co->writer)) < 0) {
        coord_store_close(wdb);
        return rc;
    }
    if ((rc = coord_store_open(path, &so, &co->store)) < 0 ||
        (rc = coord_store_read_only(co->store)) < 0)
        return rc;
    return 0;
}

/* The agents, jobs, revocations and quarantines, once recovery ran. */
static int load_state(coord_t *co)
{
    char path[sizeof(co->cfg.store) + COORD_PATH_MAX + 32], shown[sizeof(path)];
    coord_agent_row_t *rows = NULL;
    coord_job_row_t *jobs = NULL;
    size_t n = 0, nj = 0;
    int rc;

    if ((rc = coord_store_spec(&co->cfg, path, sizeof(path))) < 0)
        return rc;
    coord_store_spec_mask(path, shown, sizeof(shown)); /* never a password in the log */
    if ((rc = coord_store_agent_list(co->store, &rows, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        coord_agent_t *a = sfl__calloc(1, sizeof(*a));

        if (a != NULL) {
            a->id = (uint64_t)rows[i].id;
            snprintf(a->name, sizeof(a->name), "%s", rows[i].name);
        }
        if (a == NULL || (rc = coord_agent_insert(co, a)) < 0) {
            sfl__free(a);
            rc = SFL_ENOMEM;
            goto out;
        }
        memcpy(a->fpr, rows[i].cert_fingerprint, sizeof(a->fpr));
        memcpy(a->pk, rows[i].identity_pk, sizeof(a->pk));
        coord_tags_parse(rows[i].capabilities, &a->caps);
        a->ds.samples = (uint64_t)rows[i].samples;
        a->ds.dimension = rows[i].dimension > UINT32_MAX ? UINT32_MAX : (uint32_t)rows[i].dimension;
        a->last_seen_ms = rows[i].last_seen_ms;
    }
    if ((rc = coord_store_revoked_list(co->store, &co->revoked, &co->nrevoked)) < 0 ||
        (rc = coord_store_job_list(co->store, SPEC_MAX, &jobs, &nj)) < 0)
        goto out;
    for (size_t i = 0; i < nj; i++)
        if ((rc = coord_job_load(co, &jobs[i])) < 0)
            goto out;
    if ((rc = coord_quarantine_load(co)) < 0)
        goto out;
    coord_log(COORD_LOG_INFO, "state_loaded",
              "backend=%s db=%s agents=%zu jobs=%zu rounds_abandoned=%zu",
              coord_store_backend(co->store), shown, n, nj, co->abandoned);
out:
    coord_store_free(rows);
    coord_job_rows_free(jobs, nj);
    return rc;
}

/* The metrics listener's pages (plain HTTP, loopback by default:
 * docs/security.md). The status page forbids everything but its own inline
 * style, so a string that escaping missed still could not run or load. */
#define STATUS_HEADERS                                                                     \
    "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "             \
    "frame-ancestors 'none'\r\nX-Content-Type-Options: nosniff\r\n"                        \
    "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n"
static const coord_http_page_t http_pages[] = {
    {"/metrics", "text/plain; version=0.0.4; charset=utf-8", NULL, coord_render_metrics},
    {"/", "text/html; charset=utf-8", STATUS_HEADERS, coord_render_status},
    {"/status", "text/html; charset=utf-8", STATUS_HEADERS, coord_render_status},
};

/* The metrics listener (and status page): from coord_new, before the
 * leadership is settled, so a standby answers it too (sfl_leader 0). */
static int metrics_start(coord_t *co)
{
    const coord_config_t *cfg = &co->cfg;
    struct sockaddr_storage ss;
    int rc;

    if (cfg->metrics_listen[0] && strcmp(cfg->metrics_listen, "off") != 0) {
        if ((rc = coord_addr_parse(cfg->metrics_listen, &ss)) < 0 ||
            (rc = coord_metrics_srv_new(co->loop, (struct sockaddr *)&ss, NULL, http_pages,
                                        sizeof(http_pages) / sizeof(http_pages[0]), co,
                                        &co->metrics)) < 0) {
            char detail[512];

            snprintf(detail, sizeof(detail), "%s", sfl_last_error());
            rc = rc == UV_EADDRINUSE
                     ? addr_in_use(rc, "metrics_listen", cfg->metrics_listen)
                     : sfl__fail(rc, "metrics_listen %s: %s", cfg->metrics_listen, detail);
            return rc;
        }
        co->metrics_open = 1;
    }
    return 0;
}

static void start_timers(coord_t *co)
{
    uv_timer_start(&co->tick, coord_on_tick, co->cfg.tick_ms, co->cfg.tick_ms);
    if (co->tickets != NULL) {
        /* a rotation is due at most this late: a minute, or the period */
        uint64_t every = co->cfg.tls_ticket_rotate < 60 ? co->cfg.tls_ticket_rotate : 60;

        uv_timer_start(&co->ticket_timer, on_ticket_timer, every * 1000, every * 1000);
    }
}

int coord_new(uv_loop_t *loop, const coord_config_t *cfg, coord_t **out)
{
    static const double agg_le[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60};
    static const double round_le[] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
    static const double lag_le[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
    coord_log_level_t lvl = COORD_LOG_INFO;
    coord_t *co;
    int rc;

    *out = NULL;
    if ((rc = coord_config_check(cfg)) < 0)
        return rc;
    if ((rc = sfl_seal_init()) < 0)
        return rc;
    co = sfl__calloc(1, sizeof(*co));
    if (co == NULL)
        return SFL_ENOMEM;
    co->state_fd = -1;
    co->loop = loop;
    co->cfg = *cfg;
    co->started_ms = coord_wall_ms();
    if (coord_log_level_parse(cfg->log_level, &lvl) == 0)
        coord_log_set_level(lvl);
    sfl_msg_limits_default(&co->lim);
    co->lim.max_message = cfg->max_message;
    if ((rc = sfl_grpc_budget_new(cfg->max_buffered_total, &co->budget)) < 0) {
        sfl__free(co);
        return rc;
    }
    coord_hist_init(&co->agg_hist, agg_le, sizeof(agg_le) / sizeof(agg_le[0]));
    coord_hist_init(&co->round_hist, round_le, sizeof(round_le) / sizeof(round_le[0]));
    coord_hist_init(&co->lag_hist, lag_le, sizeof(lag_le) / sizeof(lag_le[0]));
    coord_hist_init(&co->write_hist, agg_le, sizeof(agg_le) / sizeof(agg_le[0]));
    if ((rc = state_dir_make(cfg->state_dir)) < 0 ||
        (rc = state_lock(cfg->state_dir, &co->state_fd)) < 0 ||
        (rc = identity_open(cfg->state_dir, &co->id)) < 0 || (rc = store_open(co)) < 0 ||
        (rc = metrics_start(co)) < 0 || (rc = coord_leader_start(co)) < 0)
        goto fail;
    /* 0: a standby master, which serves once it leads (leader.c). */
    if (rc == 1 && (rc = coord__serve(co)) < 0)
        goto fail;
    /* Nothing fails from here: the timers live in co. */
    uv_timer_init(loop, &co->tick);
    uv_timer_init(loop, &co->stop_timer);
    uv_timer_init(loop, &co->ticket_timer);
    uv_timer_init(loop, &co->leader_timer);
    uv_check_init(loop, &co->sched_check);
    co->tick.data = co->stop_timer.data = co->ticket_timer.data = co->leader_timer.data = co;
    co->sched_check.data = co;
    co->handles += 5;
    co->timers = 1;
    if (co->serving)
        start_timers(co);
    coord_leader_arm(co);
    *out = co;
    return 0;
fail:
    /* Handles made so far free themselves on the loop's next turns. */
    sfl_listener_close(co->listener);
    co->listener = NULL;
    sfl_listener_close(co->admin);
    co->admin = NULL;
    coord_metrics_srv_close(co->metrics, NULL, NULL);
    co->metrics = NULL;
    coord_free(co);
    return rc;
}

int coord__serve(coord_t *co)
{
    const coord_config_t *cfg = &co->cfg;
    uv_loop_t *loop = co->loop;
    struct sockaddr_storage ss;
    sfl_tls_config_t tc;
    sfl_conn_opts_t co_opts;
    int rc;

    if ((rc = load_state(co)) < 0)
        return rc;
    memset(&tc, 0, sizeof(tc));
    tc.cert_file = cfg->cert;
    tc.key_file = cfg->key;
    tc.ca_file = cfg->ca;
    tc.require_client_cert = 1;
    tc.alpn = "h2";
    tc.alpn_required = 1;
    if ((rc = sfl_tls_new(&tc, 1, &co->tls)) < 0)
        return rc;
    if (cfg->tls_ticket_lifetime > 0) {
        if ((co->tickets = sfl__calloc(1, sizeof(*co->tickets))) == NULL) {
            rc = SFL_ENOMEM;
            return rc;
        }
        if ((rc = tickets_refresh(co, 1)) < 0)
            return rc;
    }
    memset(&co_opts, 0, sizeof(co_opts));
    co_opts.tls = co->tls;
    co_opts.handshake_timeout_ms = cfg->handshake_timeout_ms;
    co_opts.idle_timeout_ms = cfg->idle_timeout_ms;
    co_opts.max_conns = cfg->max_conns;
    co_opts.max_handshakes = cfg->max_handshakes;
    co_opts.max_handshakes_per_ip = cfg->max_handshakes_per_ip;
    /* The listeners' details already say "listen ADDR: why". */
    if ((rc = coord_addr_parse(cfg->listen, &ss)) < 0 ||
        (rc = sfl_listener_new(loop, (struct sockaddr *)&ss, &co_opts, &conn_cbs, on_reject, co,
                               &co->listener)) < 0) {
        char detail[512];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        if (rc == UV_EADDRINUSE)
            rc = addr_in_use(rc, "listen", cfg->listen);
        else
            rc = sfl__fail(rc, "listen%s%s", strncmp(detail, "listen ", 7) == 0 ? "" : ": ",
                           strncmp(detail, "listen ", 7) == 0 ? detail + 6 : detail);
        return rc;
    }
    if (cfg->admin_listen[0] && strcmp(cfg->admin_listen, "off") != 0) {
        admin_methods_init();
        co_opts.max_conns = ADMIN_MAX_CONNS;
        co_opts.max_handshakes = co_opts.max_handshakes_per_ip = ADMIN_MAX_HANDSHAKES;
        if ((rc = coord_addr_parse(cfg->admin_listen, &ss)) < 0 ||
            (rc = sfl_listener_new(loop, (struct sockaddr *)&ss, &co_opts, &admin_cbs, on_reject,
                                   co, &co->admin)) < 0) {
            char detail[512];

            snprintf(detail, sizeof(detail), "%s", sfl_last_error());
            rc = rc == UV_EADDRINUSE
                     ? addr_in_use(rc, "admin_listen", cfg->admin_listen)
                     : sfl__fail(rc, "admin_listen %s: %s", cfg->admin_listen, detail);
            return rc;
        }
    }
    co->serving = 1;
    if (co->timers) /* a standby taking over; coord_new starts them itself */
        start_timers(co);
    {
        char hex[65];

        coord_log(COORD_LOG_INFO, "started",
                  "version=%s role=%s epoch=%lld listen=%s port=%d admin=%s admin_port=%d "
                  "metrics=%s public_key=%s",
                  COORD_VERSION, cfg->role, (long long)co->epoch, cfg->listen, coord_port(co),
                  co->admin ? cfg->admin_listen : "off", co->admin ? coord_admin_port(co) : 0,
                  co->metrics ? cfg->metrics_listen : "off",
                  sfl_seal_pk_to_hex(co->id->pk, hex));
    }
    return 0;
}

int coord_serving_now(const coord_t *c)
{
    return c->serving;
}

int64_t coord_leader_epoch(const coord_t *c)
{
    return c->serving ? c->epoch : 0;
}

void coord_set_leader_cbs(coord_t *c, const coord_leader_cbs_t *cbs)
{
    c->lcbs = *cbs;
}

int coord_port(const coord_t *c)
{
    return c->listener ? sfl_listener_port(c->listener) : SFL_ENOTFOUND;
}

int coord_admin_port(const coord_t *c)
{
    return c->admin ? sfl_listener_port(c->admin) : SFL_ENOTFOUND;
}

int coord_metrics_port(const coord_t *c)
{
    return c->metrics ? coord_metrics_srv_port(c->metrics) : SFL_ENOTFOUND;
}

const uint8_t *coord_public_key(const coord_t *c)
{
    return c->id->pk;
}

/* done runs once shutdown has finished and the last of our handles closed. */
static void handle_gone(coord_t *co)
{
    if (--co->handles == 0 && co->finished && co->done)
        co->done(co, co->done_ud);
}

static void timer_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

static void metrics_closed(void *ud)
{
    coord_t *co = ud;

    co->metrics_open = 0;
    coord_check_stopped(co);
}

void coord_check_stopped(coord_t *co)
{
    if (!co->stopping || co->finished || co->nconns > 0 || co->metrics_open || co->verifying)
        return;
    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->busy)
            return;
    /* Everything recorded before "stopped": the last records, then the
     * writer's queue (writes_drained calls back). */
    coord_part_flush(co);
    if (coord_writer_pending(co->writer) > 0)
        return;
    co->finished = 1;
    coord_log(COORD_LOG_INFO, "stopped", "rounds_committed=%llu",
              (unsigned long long)co->rounds_committed);
    uv_close((uv_handle_t *)&co->tick, timer_closed);
    uv_close((uv_handle_t *)&co->stop_timer, timer_closed);
    uv_close((uv_handle_t *)&co->ticket_timer, timer_closed);
    uv_close((uv_handle_t *)&co->leader_timer, timer_closed);
    uv_close((uv_handle_t *)&co->sched_check, timer_closed);
}

static void on_stop_timeout(uv_timer_t *t)
{
    coord_t *co = t->data;

    coord_log(COORD_LOG_WARN, "shutdown_timeout", "connections=%zu", co->nconns);
    for (coord_conn_t *k = co->conns; k != NULL; k = k->next)
        if (k->c)
            sfl_conn_abort(k->c);
    coord_check_stopped(co);
}

void coord_shutdown(coord_t *co, uint64_t timeout_ms, void (*done)(coord_t *c, void *ud),
                    void *ud)
{
    if (co->stopping)
        return;
    co->done = done;
    co->done_ud = ud;
    coord_log(COORD_LOG_INFO, "shutdown", "connections=%zu", co->nconns);
    sfl_listener_close(co->listener);
    co->listener = NULL;
    sfl_listener_close(co->admin);
    co->admin = NULL;
    if (co->metrics) {
        coord_metrics_srv_close(co->metrics, metrics_closed, co);
        co->metrics = NULL;
    }
    coord_drive_wind_down(co);
    co->stopping = 1;
    for (size_t i = 0; i < co->nagents; i++)
        coord_end_sub(co->agents[i], SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down");
    for (coord_conn_t *k = co->conns; k != NULL; k = k->next)
        if (k->c) {
            sfl_grpcconn_close(k->g);
        }
    uv_timer_stop(&co->tick);
    uv_timer_stop(&co->ticket_timer);
    coord_leader_stop(co);
    uv_timer_start(&co->stop_timer, on_stop_timeout,
                   timeout_ms ? timeout_ms : co->cfg.shutdown_timeout_ms, 0);
    coord_check_stopped(co);
}

void coord_free(coord_t *co)
{
    if (co == NULL)
        return;
    if (co->writer != NULL)
        coord_part_flush(co);
    /* Lets the writer finish its queue (completions are only released). */
    coord_writer_free(co->writer);
    co->writer = NULL;
    sfl__free(co->partq);
    for (size_t i = 0; i < co->njobs; i++)
        coord_job_free(co->jobs[i]);
    sfl__free(co->jobs);
    for (size_t i = 0; i < co->nagents; i++)
        coord_agent_free(co->agents[i]);
    sfl__free(co->agents);
    sfl__free(co->by_name);
    coord_status_free(co->status);
    coord_store_close(co->store);
    sfl_identity_free(co->id);
    sfl_tls_free(co->tls);
    if (co->tickets != NULL) {
        sfl_ticket_keys_wipe(co->tickets);
        sfl__free(co->tickets);
    }
    sfl_grpc_budget_free(co->budget);
    coord_store_free(co->revoked);
    /* After the store: the next coordinator may open it once this is gone. */
    if (co->state_fd >= 0)
        close(co->state_fd);
    sfl__free(co);
}

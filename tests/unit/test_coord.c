/* The coordinator in-process: coord.c on a uv loop with real TLS over
 * loopback (certificates by deploy/pki/sfl-pki in a temporary directory, as
 * in test_tls.c) and minimal gRPC clients (sfl/grpcconn.h channels).
 * In-test agents join, subscribe, verify the signed task and send fixed
 * sealed updates. Every run is bounded by a watchdog; the store is checked
 * directly after the coordinator stopped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord.h"
#include "failalloc.h"
#include "testutil.h"
#include "sfl/alloc.h"
#include "sfl/error.h"
#include "sfl/grpc.h"
#include "sfl/grpcconn.h"
#include "sfl/msg.h"
#include "sfl/seal.h"
#include "sfl/spcodec.h"
#include "sfl/transport.h"
#include "store.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */
#define PKI "deploy/pki/sfl-pki"
#define DIM 20

static char dir[64]; /* temporary PKI root */

/* ---- a gRPC client over TLS ------------------------------------------------- */

typedef struct cli {
    sfl_grpcconn_t *c;      /* NULL once closed */
    sfl_grpc_session_t *s;  /* its session, NULL once closed */
    int opened, closed, connect_status;
} cli_t;

typedef struct {
    int done, status;
    char msg[512];
    uint8_t *resp;
    size_t len;
} res_t;

#define MAX_MSGS 16

typedef struct {
    int done, status, n;
    char msg[256];
    uint8_t *m[MAX_MSGS];
    size_t len[MAX_MSGS];
    sfl_grpc_call_t *call; /* for sfl_grpc_cancel while !done */
} stream_t;

typedef struct {
    cli_t cli;
    sfl_identity_t *id;
    uint64_t agent_id;
    uint8_t coord_pk[32];
    stream_t sub;
    int seen; /* stream messages consumed */
} tagent_t;

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int timed_out;
    char state[64];
    coord_config_t cfg;
    coord_t *co;
    int port, mport, stopped;
    cli_t admin;
    tagent_t ag[3];
} fx_t;

static fx_t F;

static void run_until(const int *flag)
{
    while (!*flag) {
        if (F.timed_out)
            fail_msg("watchdog: condition not reached within %d ms", WATCHDOG_MS);
        if (!uv_loop_alive(&F.loop))
            fail_msg("loop ran out of work before the condition");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
}

static void cli_on_open(sfl_grpcconn_t *g, void *ud)
{
    cli_t *k = ud;

    (void)g;
    k->opened = 1;
}

static void cli_on_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    cli_t *k = ud;

    (void)g;
    /* The coordinator spoke valid HTTP/2 and every write was queued: the
     * channel itself never failed. */
    assert_true(strncmp(detail, "protocol error: ", 16) != 0);
    assert_true(strncmp(detail, "http2: ", 7) != 0);
    assert_true(strncmp(detail, "write: ", 7) != 0);
    if (!k->opened)
        k->connect_status = status;
    k->c = NULL;
    k->closed = 1;
    k->s = NULL; /* unfinished calls end with UNAVAILABLE */
}

static const sfl_grpcconn_cbs_t cli_cbs = {cli_on_open, cli_on_close};

/* Connects with certificate who ("agent/a1", "admin/alice") and waits until
 * the TLS connection is open. */
static void cli_connect(cli_t *k, const char *who)
{
    char cert[128], key[128], ca[128], auth[64];
    sfl_tls_config_t tc = {0};
    sfl_conn_opts_t o = {0};
    struct sockaddr_in a;

    snprintf(cert, sizeof(cert), "%s/ca/%s.crt", dir, who);
    snprintf(key, sizeof(key), "%s/ca/%s.key", dir, who);
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", dir);
    tc.cert_file = cert;
    tc.key_file = key;
    tc.ca_file = ca;
    tc.verify_host = "localhost";
    tc.alpn = "h2";
    tc.alpn_required = 1;
    k->opened = k->closed = 0;
    assert_int_equal(sfl_tls_new(&tc, 0, &o.tls), 0);
    snprintf(auth, sizeof(auth), "localhost:%d", F.port);
    assert_int_equal(uv_ip4_addr("127.0.0.1", F.port, &a), 0);
    assert_int_equal(
        sfl_grpcconn_connect(&F.loop, (struct sockaddr *)&a, &o, NULL, auth, &cli_cbs, k, &k->c),
        0);
    k->s = sfl_grpcconn_session(k->c);
    sfl_tls_free(o.tls);
    while (!k->opened && !k->closed) {
        if (F.timed_out)
            fail_msg("watchdog while connecting");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_true(k->opened);
}

static void cli_close(cli_t *k)
{
    if (k->c)
        sfl_grpcconn_close(k->c);
    while (k->c && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
}

static void on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                     size_t len, void *ud)
{
    res_t *r = ud;

    (void)call;
    r->done = 1;
    r->status = status;
    snprintf(r->msg, sizeof(r->msg), "%s", message);
    if (len) {
        r->resp = malloc(len);
        assert_non_null(r->resp);
        memcpy(r->resp, resp, len);
    }
    r->len = len;
}

/* A unary call; frees req (an sfl_msg buffer). */
static void call(cli_t *k, const char *path, uint8_t *req, size_t len, res_t *r)
{
    free(r->resp);
    memset(r, 0, sizeof(*r));
    assert_non_null(k->s);
    assert_int_equal(sfl_grpc_call_unary(k->s, path, req, len, 5000, on_unary, r, NULL), 0);
    sfl_msg_buf_free(req);
    run_until(&r->done);
}

static void on_msg(sfl_grpc_call_t *c, const uint8_t *msg, size_t len, void *ud)
{
    stream_t *s = ud;

    (void)c;
    assert_true(s->n < MAX_MSGS);
    s->m[s->n] = malloc(len ? len : 1);
    assert_non_null(s->m[s->n]);
    memcpy(s->m[s->n], msg, len);
    s->len[s->n++] = len;
}

static void on_done(sfl_grpc_call_t *c, int status, const char *message, void *ud)
{
    stream_t *s = ud;

    (void)c;
    s->done = 1;
    s->status = status;
    snprintf(s->msg, sizeof(s->msg), "%s", message);
}

static void stream_clear(stream_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->m[i]);
    memset(s, 0, sizeof(*s));
}

/* ---- agents ------------------------------------------------------------------------ */

static uint8_t *join_req(const sfl_identity_t *id, uint32_t version, size_t *len)
{
    sfl_join_req_t j;
    uint8_t *buf = NULL;

    memset(&j, 0, sizeof(j));
    memcpy(j.identity_key, id->pk, 32);
    j.dataset.samples = 100;
    j.dataset.dimension = DIM;
    j.protocol_version = version;
    snprintf(j.agent_version, sizeof(j.agent_version), "test-agent");
    assert_int_equal(sfl_msg_join_req_pack(&j, &buf, len), 0);
    return buf;
}

static void agent_join(tagent_t *t, const char *who)
{
    sfl_join_reply_t r;
    res_t res = {0};
    uint8_t *req;
    size_t len;

    if (t->id == NULL)
        assert_int_equal(sfl_identity_generate(&t->id), 0);
    if (t->cli.c == NULL)
        cli_connect(&t->cli, who);
    req = join_req(t->id, SFL_MSG_PROTOCOL_VERSION, &len);
    call(&t->cli, "/sfl.v1.Coordinator/Join", req, len, &res);
    if (res.status != 0)
        fail_msg("join %s: %d %s", who, res.status, res.msg);
    assert_int_equal(sfl_msg_join_reply_unpack(res.resp, res.len, NULL, &r), 0);
    assert_true(r.agent_id > 0);
    assert_int_equal(r.protocol_version, SFL_MSG_PROTOCOL_VERSION);
    assert_true(r.heartbeat_interval_ms > 0);
    t->agent_id = r.agent_id;
    memcpy(t->coord_pk, r.coordinator_key, 32);
    free(res.resp);
}

static void agent_subscribe(tagent_t *t)
{
    sfl_subscribe_req_t s;
    uint8_t *buf = NULL;
    size_t len;

    stream_clear(&t->sub);
    t->seen = 0;
    memset(&s, 0, sizeof(s));
    s.agent_id = t->agent_id;
    assert_int_equal(sfl_msg_subscribe_req_pack(&s, &buf, &len), 0);
    assert_int_equal(sfl_grpc_call_stream(t->cli.s, "/sfl.v1.Coordinator/Subscribe", buf, len, 0,
                                          on_msg, on_done, &t->sub, &t->sub.call),
                     0);
    sfl_msg_buf_free(buf);
}

/* The next stream message: a task (returned, signature verified against the
 * key from JoinReply) or a Wait (*w filled, NULL returned). */
static sfl_task_t *next_message(tagent_t *t, sfl_wait_t *w)
{
    sfl_task_t *task = NULL;

    while (t->sub.n <= t->seen) {
        if (t->sub.done)
            fail_msg("stream ended (%d %s) without a message", t->sub.status, t->sub.msg);
        if (F.timed_out)
            fail_msg("watchdog waiting for a stream message");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_int_equal(sfl_msg_task_or_wait_unpack(t->sub.m[t->seen], t->sub.len[t->seen], NULL,
                                                 &task, w),
                     0);
    t->seen++;
    if (task)
        assert_int_equal(sfl_seal_verify_detached(t->coord_pk, SFL_MSG_TASK_CONTEXT,
                                                  task->signed_bytes, task->signed_len,
                                                  task->signature),
                         0);
    return task;
}

static sfl_task_t *next_task(tagent_t *t)
{
    sfl_wait_t w;
    sfl_task_t *task = next_message(t, &w);

    if (task == NULL)
        fail_msg("got a Wait (%u ms: %s) instead of a task", w.retry_after_ms, w.reason);
    return task;
}

static const uint32_t upd_idx[3] = {1, 5, 9};

/* A packed Update for task, with values vals at upd_idx, sealed to
 * seal_pk (NULL: the task's round key) and signed by signer. */
static uint8_t *make_update(const sfl_task_t *t, const sfl_identity_t *signer,
                            const uint8_t *seal_pk, uint64_t agent_id, const double vals[3],
                            uint64_t samples, size_t *len)
{
    sfl_spvec_t *v = NULL;
    sfl_payload_t p;
    sfl_upd_ctx_t ctx;
    sfl_update_t u;
    uint8_t *pl = NULL, *sealed, *out = NULL;
    size_t pllen = 0, slen = 0;

    assert_int_equal(sfl_spvec_new(t->model->dim, 3, &v), 0);
    for (int i = 0; i < 3; i++) {
        v->idx[i] = upd_idx[i];
        v->val[i] = vals[i];
    }
    v->nnz = 3;
    memset(&p, 0, sizeof(p));
    p.update = v;
    p.encoding = t->value_encoding;
    p.samples = samples;
    /* Progress figures derived from samples, exact in binary, so the
     * coordinator's weighted means can be checked exactly. */
    p.train_loss = (double)samples / 8;
    p.eval_samples = samples / 2;
    p.eval_mse = (double)samples / 16;
    assert_int_equal(sfl_msg_payload_pack(&p, &pl, &pllen), 0);
    memset(&ctx, 0, sizeof(ctx));
    memcpy(ctx.round_pk, seal_pk ? seal_pk : t->round_key, 32);
    ctx.job = t->job_id;
    ctx.round = t->round;
    memcpy(ctx.nonce, t->round_nonce, 32);
    ctx.agent_id = agent_id;
    memcpy(ctx.model_hash, t->model_hash, 32);
    sealed = malloc(sfl_seal_sealed_size(pllen));
    assert_non_null(sealed);
    assert_int_equal(sfl_seal_update(signer, &ctx, pl, pllen, sealed, sfl_seal_sealed_size(pllen),
                                     &slen),
                     0);
    memset(&u, 0, sizeof(u));
    u.job_id = t->job_id;
    u.round = t->round;
    u.attempt = t->attempt;
    u.agent_id = agent_id;
    u.mode = SFL_UPDATE_MODE_SEALED;
    u.sealed = sealed;
    u.sealed_len = slen;
    assert_int_equal(sfl_msg_update_pack(&u, &out, len), 0);
    free(sealed);
    sfl_msg_buf_free(pl);
    sfl_spvec_free(v);
    return out;
}

/* Submits update bytes (copied; the caller keeps upd) and returns the ack. */
static sfl_ack_t submit(tagent_t *t, const uint8_t *upd, size_t len)
{
    res_t res = {0};
    sfl_ack_t ack;
    uint8_t *copy = malloc(len);

    assert_non_null(copy);
    memcpy(copy, upd, len);
    assert_non_null(t->cli.s);
    assert_int_equal(sfl_grpc_call_unary(t->cli.s, "/sfl.v1.Coordinator/SubmitUpdate", copy, len,
                                         5000, on_unary, &res, NULL),
                     0);
    free(copy);
    run_until(&res.done);
    if (res.status != 0)
        fail_msg("SubmitUpdate: %d %s", res.status, res.msg);
    assert_int_equal(sfl_msg_ack_unpack(res.resp, res.len, NULL, &ack), 0);
    free(res.resp);
    return ack;
}

static sfl_heartbeat_reply_t heartbeat(tagent_t *t, uint64_t job, uint64_t round,
                                       uint32_t attempt)
{
    sfl_heartbeat_req_t h;
    sfl_heartbeat_reply_t r;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&h, 0, sizeof(h));
    h.agent_id = t->agent_id;
    h.phase = SFL_PHASE_TRAINING;
    h.job_id = job;
    h.round = round;
    h.attempt = attempt;
    h.progress_permille = 500;
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, &len), 0);
    call(&t->cli, "/sfl.v1.Coordinator/Heartbeat", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_heartbeat_reply_unpack(res.resp, res.len, NULL, &r), 0);
    free(res.resp);
    return r;
}

/* An idle heartbeat: answered after every request sent before it on the
 * same connection was handled (frames are processed in order). */
static void idle_heartbeat(tagent_t *t)
{
    sfl_heartbeat_req_t h;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&h, 0, sizeof(h));
    h.agent_id = t->agent_id;
    h.phase = SFL_PHASE_IDLE;
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, &len), 0);
    call(&t->cli, "/sfl.v1.Coordinator/Heartbeat", buf, len, &res);
    assert_int_equal(res.status, 0);
    free(res.resp);
}

/* ---- admin ------------------------------------------------------------------------------ */

static sfl_status_t *admin_status(cli_t *k)
{
    sfl_status_t *st = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    call(k, "/sfl.v1.Admin/Status", buf, len, &res);
    if (res.status != 0)
        fail_msg("Status: %d %s", res.status, res.msg);
    assert_int_equal(sfl_msg_status_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

static void job_spec(sfl_job_spec_t *s, uint32_t deadline_ms, uint32_t max_attempts)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "unit");
    snprintf(s->algorithm, sizeof(s->algorithm), "fediterht");
    snprintf(s->loss, sizeof(s->loss), "lsq");
    memset(&s->params, 0, sizeof(s->params));
    assert_int_equal(sfl_param_list_set(&s->params, "tau", 3), 0);
    assert_int_equal(sfl_param_list_set(&s->params, "lr", 0.01), 0);
    s->dimension = DIM;
    s->rounds = 5;
    s->cohort_size = 2;
    s->over_selection = 0;
    s->min_quorum = 2;
    s->round_deadline_ms = deadline_ms;
    s->value_encoding = SFL_ENC_F64;
    s->seed = 7;
    s->max_attempts = max_attempts;
    s->heartbeat_timeout_ms = 5000;
}

static sfl_job_status_t create_job(cli_t *k, const sfl_job_spec_t *s, int *status)
{
    sfl_job_status_t st;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&st, 0, sizeof(st));
    assert_int_equal(sfl_msg_create_job_pack(s, &buf, &len), 0);
    call(k, "/sfl.v1.Admin/CreateJob", buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_job_reply_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

static sfl_export_t *export_model(cli_t *k, uint64_t job, uint64_t round, int *status)
{
    sfl_export_t *e = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_export_req_pack(job, round, &buf, &len), 0);
    call(k, "/sfl.v1.Admin/ExportModel", buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_export_unpack(res.resp, res.len, NULL, &e), 0);
    free(res.resp);
    return e;
}

static sfl_job_history_t *job_history(cli_t *k, uint64_t job, uint64_t after, int *status)
{
    sfl_job_history_t *h = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_history_req_pack(job, after, &buf, &len), 0);
    call(k, "/sfl.v1.Admin/JobHistory", buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_history_unpack(res.resp, res.len, NULL, &h), 0);
    free(res.resp);
    return h;
}

/* ---- metrics over plain HTTP -------------------------------------------------------- */

typedef struct {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    char *req;
    size_t reqlen;
    char resp[65536];
    size_t len;
    int done;
} http_t;

static void http_closed(uv_handle_t *h)
{
    ((http_t *)h->data)->done = 1;
}

static void http_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    http_t *x = h->data;

    (void)s;
    *b = uv_buf_init(x->resp + x->len, (unsigned)(sizeof(x->resp) - 1 - x->len));
}

static void http_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    http_t *x = st->data;

    (void)b;
    if (n < 0) {
        x->resp[x->len] = '\0';
        uv_close((uv_handle_t *)&x->tcp, http_closed);
        return;
    }
    x->len += (size_t)n;
}

static void http_written(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void http_connected(uv_connect_t *c, int status)
{
    http_t *x = c->data;
    uv_buf_t b = uv_buf_init(x->req, (unsigned)x->reqlen);

    assert_int_equal(status, 0);
    assert_int_equal(uv_write(&x->wreq, (uv_stream_t *)&x->tcp, &b, 1, http_written), 0);
    assert_int_equal(uv_read_start((uv_stream_t *)&x->tcp, http_alloc, http_read), 0);
}

/* Sends req raw to /metrics' port, returns the whole response (static). */
static const char *http(const char *req, size_t len)
{
    static http_t x;
    struct sockaddr_in a;

    memset(&x, 0, sizeof(x));
    x.req = (char *)req;
    x.reqlen = len;
    x.tcp.data = x.creq.data = &x;
    assert_int_equal(uv_tcp_init(&F.loop, &x.tcp), 0);
    assert_int_equal(uv_ip4_addr("127.0.0.1", F.mport, &a), 0);
    assert_int_equal(uv_tcp_connect(&x.creq, &x.tcp, (struct sockaddr *)&a, http_connected), 0);
    run_until(&x.done);
    return x.resp;
}

/* ---- fixture ------------------------------------------------------------------------------ */

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = 1;
    uv_stop(&F.loop);
}

static int group_setup(void **state)
{
    (void)state;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_coord: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    snprintf(dir, sizeof(dir), "/tmp/sfl-coord-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    test_sh("sh %s init %s/ca >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/ca coord >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca a1 >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca a2 >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca a3 >/dev/null", PKI, dir);
    test_sh("sh %s admin %s/ca alice >/dev/null", PKI, dir);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (dir[0] && strncmp(dir, "/tmp/sfl-coord-", 15) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

static void config(coord_config_t *c)
{
    coord_config_default(c);
    assert_int_equal(coord_config_set(c, "listen", "127.0.0.1:0"), 0);
    snprintf(c->cert, sizeof(c->cert), "%s/ca/coordinator/coord.crt", dir);
    snprintf(c->key, sizeof(c->key), "%s/ca/coordinator/coord.key", dir);
    snprintf(c->ca, sizeof(c->ca), "%s/ca/ca.crt", dir);
    snprintf(c->state_dir, sizeof(c->state_dir), "%s", F.state);
    snprintf(c->metrics_listen, sizeof(c->metrics_listen), "127.0.0.1:0");
    snprintf(c->log_level, sizeof(c->log_level), "%s",
             getenv("SFL_TEST_LOG") ? getenv("SFL_TEST_LOG") : "error");
    c->tick_ms = 20;
    c->select_wait_ms = 100;
    c->pace_min_ms = 50;
    c->idle_retry_ms = 1000;
    c->heartbeat_interval_ms = 1000;
    c->shutdown_timeout_ms = 2000;
}

static void start(void)
{
    assert_int_equal(coord_new(&F.loop, &F.cfg, &F.co), 0);
    F.port = coord_port(F.co);
    F.mport = coord_metrics_port(F.co);
    assert_true(F.port > 0);
    assert_true(F.mport > 0);
    F.stopped = 0;
}

static void on_stopped(coord_t *c, void *ud)
{
    (void)c;
    (void)ud;
    F.stopped = 1;
}

static void stop(void)
{
    if (F.co == NULL)
        return;
    F.stopped = 0;
    coord_shutdown(F.co, 0, on_stopped, NULL);
    run_until(&F.stopped);
    coord_free(F.co);
    F.co = NULL;
}

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&F.watchdog);
    snprintf(F.state, sizeof(F.state), "/tmp/sfl-coord-state-XXXXXX");
    assert_non_null(mkdtemp(F.state));
    config(&F.cfg);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cli_close(&F.admin);
    for (int i = 0; i < 3; i++) {
        cli_close(&F.ag[i].cli);
        stream_clear(&F.ag[i].sub);
        sfl_identity_free(F.ag[i].id);
    }
    stop();
    while (uv_loop_alive(&F.loop) && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    if (strncmp(F.state, "/tmp/sfl-coord-state-", 21) == 0)
        test_sh("rm -rf '%s'", F.state);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

/* Join binds the certificate; roles gate the services. */
static void test_coord_join_and_roles(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_identity_t *other = NULL;
    sfl_status_t *st;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    (void)state;
    F.cfg.subscribe_hold_ms = 200;
    start();
    agent_join(a1, "agent/a1");
    assert_memory_equal(a1->coord_pk, coord_public_key(F.co), 32);

    /* an agent certificate may not call Admin */
    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    call(&a1->cli, "/sfl.v1.Admin/Status", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* an admin certificate may not Join */
    cli_connect(&F.admin, "admin/alice");
    buf = join_req(a1->id, SFL_MSG_PROTOCOL_VERSION, &len);
    call(&F.admin, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* the admin sees the agent */
    st = admin_status(&F.admin);
    assert_int_equal(st->known_agents, 1);
    assert_int_equal(st->connected_agents, 1);
    assert_int_equal(st->njobs, 0);
    assert_non_null(strstr(st->version, "sfl-coordinator"));
    sfl_msg_status_free(st);

    /* the same certificate with another identity key */
    assert_int_equal(sfl_identity_generate(&other), 0);
    buf = join_req(other, SFL_MSG_PROTOCOL_VERSION, &len);
    call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "another identity key"));

    /* A storm of such Joins is refused every time, and logged at most 20
     * lines in each second of the coordinator's clock (a count of what was
     * left out rides on the next line). */
    {
        char tmpl[] = "/tmp/sfl-test-coord-log-XXXXXX", line[4096];
        int fd = mkstemp(tmpl), saved = dup(2), lines = 0;
        uint64_t sec0, sec1;
        FILE *f;

        assert_true(fd >= 0 && saved >= 0);
        coord_log_set_level(COORD_LOG_WARN); /* the tests log errors only */
        fflush(stderr);
        assert_int_equal(dup2(fd, 2), 2);
        uv_update_time(&F.loop);
        sec0 = uv_now(&F.loop) / 1000;
        for (int i = 0; i < 300; i++) {
            buf = join_req(other, SFL_MSG_PROTOCOL_VERSION, &len);
            call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
            assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        }
        uv_update_time(&F.loop);
        sec1 = uv_now(&F.loop) / 1000;
        fflush(stderr);
        assert_int_equal(dup2(saved, 2), 2);
        close(saved);
        coord_log_set_level(COORD_LOG_ERROR);
        f = fdopen(fd, "r");
        assert_non_null(f);
        rewind(f);
        while (fgets(line, sizeof(line), f))
            lines += strstr(line, "event=join_refused") != NULL ||
                     strstr(line, "event=call_refused") != NULL;
        fclose(f);
        unlink(tmpl);
        /* 300 refusals (and as many call_refused) would be 600 lines */
        assert_true(lines >= 1);
        assert_true((uint64_t)lines <= 20 * (sec1 - sec0 + 1));
    }

    /* a protocol version the coordinator does not speak: the last one
     * (parameters as fields) and a future one */
    buf = join_req(a1->id, SFL_MSG_PROTOCOL_VERSION - 1, &len);
    call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(res.msg, "protocol_version 1 is not supported"));
    buf = join_req(a1->id, SFL_MSG_PROTOCOL_VERSION + 1, &len);
    call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);

    /* garbage */
    buf = malloc(4);
    assert_non_null(buf);
    memcpy(buf, "\xff\xff\xff\xff", 4);
    assert_int_equal(sfl_grpc_call_unary(a1->cli.s, "/sfl.v1.Coordinator/Join", buf, 4, 5000,
                                         on_unary, &res, NULL),
                     0);
    free(buf);
    memset(&res, 0, sizeof(res));
    run_until(&res.done);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);

    /* Subscribe before Join on another certificate */
    assert_int_equal(sfl_identity_generate(&a2->id), 0);
    cli_connect(&a2->cli, "agent/a2");
    a2->agent_id = 99;
    agent_subscribe(a2);
    run_until(&a2->sub.done);
    assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);

    /* and with the wrong agent id after Join */
    agent_join(a2, "agent/a2");
    a2->agent_id = a1->agent_id;
    agent_subscribe(a2);
    run_until(&a2->sub.done);
    assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* with no job, a subscriber is held for subscribe_hold_ms (set short
     * above), then paced away with idle_retry_ms */
    agent_join(a2, "agent/a2");
    agent_subscribe(a2);
    {
        sfl_wait_t w;

        assert_null(next_message(a2, &w));
        assert_int_equal(w.retry_after_ms, F.cfg.idle_retry_ms);
        assert_string_equal(w.reason, "no running job for this agent");
        run_until(&a2->sub.done);
        assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_OK);
    }
    free(res.resp);
    sfl_identity_free(other);
}

static sfl_job_status_t *find_job(sfl_status_t *st, uint64_t id)
{
    for (uint32_t i = 0; i < st->njobs; i++)
        if (st->jobs[i].job_id == id)
            return &st->jobs[i];
    fail_msg("job %llu not in status", (unsigned long long)id);
    return NULL;
}

/* Two agents through one committed round; bad updates are refused with a
 * reason; a restart from the same state resumes at the committed round. */
static void test_coord_round_commit_and_restart(void **state)
{
    static const double v1[3] = {1.0, -2.0, 0.5}, v2[3] = {3.0, 2.0, 0.5};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1], *a3 = &F.ag[2];
    sfl_task_t *t1, *t2, *t1b;
    sfl_identity_t *rogue = NULL;
    sfl_roundkey_t *wrong = NULL;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_status_t *st;
    sfl_export_t *e;
    sfl_ack_t ack;
    sfl_heartbeat_reply_t hb;
    uint8_t *good1, *upd, pk1[32], hash1[32];
    size_t len1, len;
    uint64_t job;
    int status;
    const char *m;

    (void)state;
    start();
    memcpy(pk1, coord_public_key(F.co), 32);
    cli_connect(&F.admin, "admin/alice");
    job_spec(&spec, 60000, 3); /* never reached: 10x what a loaded machine needs */
    js = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    job = js.job_id;

    /* a bad spec is refused with the field */
    assert_int_equal(sfl_param_list_set(&spec.params, "tau", 0), 0);
    (void)create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(sfl_param_list_set(&spec.params, "tau", 3), 0);
    /* a model that would wrap a 32-bit size, or exceed max_dim, is refused */
    spec.dimension = (1u << 24) + 1;
    snprintf(spec.loss, sizeof(spec.loss), "softmax");
    spec.nlabels = 256;
    for (uint32_t i = 0; i < 256; i++)
        spec.labels[i] = i;
    (void)create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    spec.nlabels = 2;
    spec.dimension = (1u << 26) + 1; /* max_dim's default is 2^26 */
    (void)create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    snprintf(spec.loss, sizeof(spec.loss), "lsq");
    spec.nlabels = 0;
    spec.dimension = DIM;

    agent_join(a1, "agent/a1");
    agent_join(a2, "agent/a2");
    agent_subscribe(a1);
    agent_subscribe(a2);
    t1 = next_task(a1);
    t2 = next_task(a2);
    assert_int_equal(t1->job_id, job);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t1->attempt, 0);
    assert_int_equal(t1->dimension, DIM);
    assert_int_equal(t1->model->nnz, 0);
    /* one task per attempt: the same signed bytes for every member */
    assert_int_equal(t1->signed_len, t2->signed_len);
    assert_memory_equal(t1->signed_bytes, t2->signed_bytes, t1->signed_len);

    /* a third agent arriving during training is not paced away: its stream
     * is held, so the next round can take it at once */
    agent_join(a3, "agent/a3");
    agent_subscribe(a3);
    idle_heartbeat(a3);
    assert_int_equal(a3->sub.n, 0);
    assert_false(a3->sub.done);
    /* it leaves (the rounds below are a1's and a2's); the heartbeat behind
     * the reset on the same connection makes sure the coordinator saw it */
    sfl_grpc_cancel(a3->sub.call);
    idle_heartbeat(a3);

    /* signed by an identity that is not a1's */
    assert_int_equal(sfl_identity_generate(&rogue), 0);
    upd = make_update(t1, rogue, NULL, a1->agent_id, v1, 10, &len);
    ack = submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "signature"));

    /* sealed to a key that is not the round's */
    assert_int_equal(sfl_roundkey_new(&wrong), 0);
    upd = make_update(t1, a1->id, wrong->pk, a1->agent_id, v1, 10, &len);
    ack = submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_true(ack.reason[0] != '\0');

    /* an agent that was not selected */
    upd = make_update(t1, a3->id, NULL, a3->agent_id, v1, 10, &len);
    ack = submit(a3, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "not selected"));

    /* more samples (the aggregation weight) than a1 joined with (100) */
    upd = make_update(t1, a1->id, NULL, a1->agent_id, v1, 1000, &len);
    ack = submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "samples"));

    /* a heartbeat keeps the member alive and tells it the deadline */
    hb = heartbeat(a1, job, 1, 0);
    assert_int_equal(hb.abort, 0);
    assert_true(hb.deadline_ms > 0);

    /* the good one, then the same bytes again */
    good1 = make_update(t1, a1->id, NULL, a1->agent_id, v1, 10, &len1);
    ack = submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    assert_int_equal(ack.job_id, job);
    assert_int_equal(ack.round, 1);
    ack = submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);

    st = admin_status(&F.admin);
    assert_int_equal(find_job(st, job)->round_state, SFL_ROUND_TRAINING);
    assert_int_equal(find_job(st, job)->accepted, 1);
    assert_int_equal(find_job(st, job)->selected, 2);
    sfl_msg_status_free(st);

    /* the second member closes the round; the next round's task follows */
    upd = make_update(t2, a2->id, NULL, a2->agent_id, v2, 30, &len);
    ack = submit(a2, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    t1b = next_task(a1);
    assert_int_equal(t1b->round, 2);
    assert_int_equal(t1b->model->nnz, 3);
    /* weighted by samples (10, 30), then H_3: exact in binary */
    assert_true(t1b->model->val[0] == 2.5 && t1b->model->val[1] == 1.0 &&
                t1b->model->val[2] == 0.5);

    /* replaying the round-1 update now: its round has closed */
    ack = submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_LATE);
    hb = heartbeat(a1, job, 1, 0);
    assert_int_equal(hb.abort, 1);

    /* the committed model, as the admin exports it */
    e = export_model(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(e->round, 1);
    assert_int_equal(e->model->nnz, 3);
    assert_true(e->model->idx[0] == 1 && e->model->idx[1] == 5 && e->model->idx[2] == 9);
    assert_true(e->model->val[0] == 2.5 && e->model->val[1] == 1.0 && e->model->val[2] == 0.5);
    memcpy(hash1, e->model_hash, 32);
    sfl_msg_export_free(e);
    e = export_model(&F.admin, job, 7, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);
    assert_null(e);

    /* training progress: sample-weighted means of what the two accepted
     * updates reported (samples 10 and 30; 5 and 15 held-out rows) */
    st = admin_status(&F.admin);
    assert_true(find_job(st, job)->last_train_loss == (10 * 1.25 + 30 * 3.75) / 40);
    assert_int_equal(find_job(st, job)->last_samples, 40);
    assert_int_equal(find_job(st, job)->last_eval_samples, 20);
    assert_true(find_job(st, job)->last_eval_mse == (5 * 0.625 + 15 * 1.875) / 20);
    assert_true(find_job(st, job)->last_eval_accuracy == 0);
    sfl_msg_status_free(st);
    {
        sfl_job_history_t *h = job_history(&F.admin, job, 0, &status);

        assert_int_equal(status, 0);
        assert_string_equal(h->loss, "lsq");
        assert_int_equal(h->n, 1);
        assert_int_equal(h->more, 0);
        assert_int_equal(h->rounds[0].round, 1);
        assert_int_equal(h->rounds[0].attempt, 0);
        assert_int_equal(h->rounds[0].selected, 2);
        assert_int_equal(h->rounds[0].accepted, 2);
        assert_int_equal(h->rounds[0].samples, 40);
        assert_true(h->rounds[0].train_loss == 3.125);
        assert_int_equal(h->rounds[0].eval_samples, 20);
        assert_true(h->rounds[0].eval_mse == 1.5625);
        assert_int_equal(h->rounds[0].model_nnz, 3);
        assert_true(h->rounds[0].bytes_up > 0 && h->rounds[0].bytes_down > 0);
        assert_true(h->rounds[0].committed_ms >= h->rounds[0].opened_ms);
        sfl_msg_history_free(h);
        h = job_history(&F.admin, job, 1, &status);
        assert_int_equal(status, 0);
        assert_int_equal(h->n, 0);
        sfl_msg_history_free(h);
        assert_null(job_history(&F.admin, job + 100, 0, &status));
        assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);
    }

    /* the metrics say so too */
    m = http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    assert_non_null(strstr(m, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(m, "\nsfl_rounds_committed_total 1\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"accepted\"} 2\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"duplicate\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"late\"} 1\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"bad_signature\"} 1\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"decrypt\"} 1\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"not_selected\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_agents_connected 3\n"));
    assert_non_null(strstr(m, "sfl_aggregation_seconds_count 1\n"));
    assert_non_null(strstr(m, "\nsfl_job_committed_round{job=\"1\",name=\"unit\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_job_train_loss{job=\"1\",name=\"unit\"} 3.125\n"));
    assert_non_null(strstr(m, "\nsfl_job_eval_mse{job=\"1\",name=\"unit\"} 1.5625\n"));
    assert_null(strstr(m, "\nsfl_job_eval_accuracy{")); /* an lsq job */

    /* graceful stop while round 2 trains (no quorum): it is abandoned */
    stop();
    run_until(&a1->sub.done);
    assert_int_equal(a1->sub.status, SFL_GRPC_STATUS_UNAVAILABLE);
    for (int i = 0; i < 3; i++)
        while (F.ag[i].cli.c && !F.timed_out)
            uv_run(&F.loop, UV_RUN_ONCE);
    while (F.admin.c && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);

    /* restart from the same state directory */
    start();
    assert_memory_equal(coord_public_key(F.co), pk1, 32);
    cli_connect(&F.admin, "admin/alice");
    st = admin_status(&F.admin);
    assert_int_equal(st->njobs, 1);
    assert_int_equal(st->known_agents, 3);
    assert_int_equal(st->jobs[0].committed_round, 1);
    assert_int_equal(st->jobs[0].state, SFL_JOB_RUNNING);
    assert_int_equal(st->jobs[0].round_state, SFL_ROUND_SELECTING);
    assert_int_equal(st->jobs[0].attempt, 1); /* round 2's attempt 0 died with the process */
    assert_true(st->jobs[0].last_train_loss == 3.125); /* read back from the store */
    assert_int_equal(st->jobs[0].last_eval_samples, 20);
    sfl_msg_status_free(st);
    e = export_model(&F.admin, job, 1, &status);
    assert_int_equal(status, 0);
    assert_memory_equal(e->model_hash, hash1, 32);
    sfl_msg_export_free(e);

    /* the agents come back and round 2 runs as attempt 1 */
    agent_join(a1, "agent/a1");
    agent_join(a2, "agent/a2");
    agent_subscribe(a1);
    agent_subscribe(a2);
    sfl_msg_task_free(t1b);
    t1b = next_task(a1);
    assert_int_equal(t1b->round, 2);
    assert_int_equal(t1b->attempt, 1);
    assert_int_equal(t1b->model->nnz, 3);

    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(t1b);
    sfl_msg_buf_free(good1);
    sfl_identity_free(rogue);
    sfl_roundkey_free(wrong);

    /* the store itself, after a clean stop */
    stop();
    {
        char path[128];
        coord_store_t *s = NULL;
        coord_srow_round_t *rounds = NULL;
        uint8_t *model = NULL, hash[32];
        size_t n = 0, mlen = 0;
        int64_t round = 0;

        snprintf(path, sizeof(path), "%s/coordinator.db", F.state);
        assert_int_equal(coord_store_open(path, NULL, &s), 0);
        assert_int_equal(coord_store_integrity_check(s), 0);
        assert_int_equal(coord_store_checkpoint_latest(s, (int64_t)job, 1 << 20, &round, &model,
                                                       &mlen, hash),
                         0);
        assert_int_equal(round, 1);
        assert_memory_equal(hash, hash1, 32);
        coord_store_free(model);
        assert_int_equal(coord_store_round_list(s, (int64_t)job, 100, &rounds, &n), 0);
        assert_int_equal(n, 3); /* r1 a1 committed, r2 a1 and a2 failed */
        assert_int_equal(rounds[0].state, COORD_SROW_COMMITTED);
        assert_int_equal(rounds[0].cohort_len, 2);
        assert_int_equal(rounds[1].state, COORD_SROW_FAILED);
        assert_int_equal(rounds[2].state, COORD_SROW_FAILED);
        assert_non_null(strstr(rounds[2].reason, "shutting down"));
        coord_round_list_free(rounds, n);
        coord_store_close(s);
    }
}

/* A quorum missed at the deadline: retry with a fresh nonce and key, then
 * the job pauses with the reason after max_attempts. */
static void test_coord_quorum_missed_retries_then_pauses(void **state)
{
    static const double v1[3] = {1.0, 1.0, 1.0};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t0, *t1;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_status_t *st;
    sfl_ack_t ack;
    uint8_t *upd;
    size_t len;
    int status;

    (void)state;
    start();
    cli_connect(&F.admin, "admin/alice");
    job_spec(&spec, 1000, 2); /* reached twice: a1 submits well within it */
    js = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    agent_join(a1, "agent/a1");
    agent_join(a2, "agent/a2");
    agent_subscribe(a1);
    agent_subscribe(a2);
    t0 = next_task(a1);
    assert_int_equal(t0->attempt, 0);
    upd = make_update(t0, a1->id, NULL, a1->agent_id, v1, 5, &len);
    ack = submit(a1, upd, len);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    /* a2 stays silent: the deadline fails attempt 0, attempt 1 follows */
    t1 = next_task(a1);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t1->attempt, 1);
    assert_memory_not_equal(t1->round_nonce, t0->round_nonce, 32);
    assert_memory_not_equal(t1->round_key, t0->round_key, 32);
    /* the attempt-0 update now: its attempt closed, its key is gone */
    ack = submit(a1, upd, len);
    assert_int_equal(ack.status, SFL_ACK_LATE);
    sfl_msg_buf_free(upd);
    /* and the same payload sealed for attempt 0 but claimed for attempt 1 */
    {
        sfl_task_t fake = *t1;

        fake.attempt = 1;
        memcpy(fake.round_key, t0->round_key, 32);
        upd = make_update(&fake, a1->id, NULL, a1->agent_id, v1, 5, &len);
        ack = submit(a1, upd, len);
        sfl_msg_buf_free(upd);
        assert_int_equal(ack.status, SFL_ACK_REJECTED);
    }
    /* attempt 1 misses its quorum too: the job pauses, the reason kept */
    for (;;) {
        st = admin_status(&F.admin);
        if (st->jobs[0].state != SFL_JOB_RUNNING)
            break;
        sfl_msg_status_free(st);
        if (F.timed_out)
            fail_msg("watchdog waiting for the job to pause");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_int_equal(st->jobs[0].job_id, js.job_id);
    assert_int_equal(st->jobs[0].state, SFL_JOB_PAUSED);
    assert_int_equal(st->jobs[0].committed_round, 0);
    assert_true(st->jobs[0].error[0] != '\0');
    sfl_msg_status_free(st);
    sfl_msg_task_free(t0);
    sfl_msg_task_free(t1);
}

static sfl_job_status_t job_call(cli_t *k, const char *path, uint64_t id, int *status)
{
    sfl_job_status_t st;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&st, 0, sizeof(st));
    assert_int_equal(sfl_msg_job_req_pack(id, &buf, &len), 0);
    call(k, path, buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_job_reply_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

/* Admin job operations and their preconditions; lists. */
static void test_coord_admin_job_ops(void **state)
{
    tagent_t *a1 = &F.ag[0];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_job_list_t *jl = NULL;
    sfl_agent_list_t *al = NULL;
    sfl_export_t *e;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    uint64_t id;
    int status;

    (void)state;
    /* Room for the model state of one job, not two. */
    F.cfg.max_job_memory = DIM * 3 * sizeof(double) * 3 / 2;
    start();
    cli_connect(&F.admin, "admin/alice");
    agent_join(a1, "agent/a1");
    job_spec(&spec, 60000, 3); /* never reached: 10x what a loaded machine needs */
    spec.paused = 1;
    /* agents may not create jobs */
    assert_int_equal(sfl_msg_create_job_pack(&spec, &buf, &len), 0);
    call(&a1->cli, "/sfl.v1.Admin/CreateJob", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    js = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PENDING);
    id = js.job_id;
    e = export_model(&F.admin, id, 0, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_null(e);
    /* A job holds no model state until a round opens (before: allocated and
     * zeroed at CreateJob, ~1 GiB for a paused job of 2^26 features). */
    assert_non_null(strstr(http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34),
                           "\nsfl_job_model_bytes 0\n"));
    js = job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);
    assert_non_null(strstr(http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34),
                           "\nsfl_job_model_bytes 0\n"));
    js = job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", id, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    js = job_call(&F.admin, "/sfl.v1.Admin/PauseJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PAUSED);
    /* A paused job reserves its model state: a second one exceeds the budget. */
    (void)create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    js = job_call(&F.admin, "/sfl.v1.Admin/CancelJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_CANCELLED);
    /* Cancelling freed it: now the second one fits. */
    js = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PENDING);
    js = job_call(&F.admin, "/sfl.v1.Admin/CancelJob", id, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    js = job_call(&F.admin, "/sfl.v1.Admin/PauseJob", 42, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);

    assert_int_equal(sfl_msg_list_jobs_req_pack(&buf, &len), 0);
    call(&F.admin, "/sfl.v1.Admin/ListJobs", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_job_list_unpack(res.resp, res.len, NULL, &jl), 0);
    assert_int_equal(jl->n, 2);
    assert_int_equal(jl->jobs[0].state, SFL_JOB_CANCELLED);
    sfl_msg_job_list_free(jl);

    assert_int_equal(sfl_msg_list_agents_req_pack(1, &buf, &len), 0);
    call(&F.admin, "/sfl.v1.Admin/ListAgents", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_agent_list_unpack(res.resp, res.len, NULL, &al), 0);
    assert_int_equal(al->n, 1);
    assert_int_equal(al->agents[0].agent_id, a1->agent_id);
    assert_string_equal(al->agents[0].subject, "a1");
    assert_int_equal(al->agents[0].connected, 1);
    assert_int_equal(al->agents[0].dataset.dimension, DIM);
    sfl_msg_agent_list_free(al);
    free(res.resp);
}

/* Idle agents keep their Subscribe open, so a job created or resumed while
 * they wait reaches them at once on that stream, without a Wait and a
 * resubscription (the hold, set here to outlast the watchdog). */
static void test_coord_job_wakes_idle_subscribers(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t1, *t2, *t1b, *t2b;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    int status;

    (void)state;
    F.cfg.subscribe_hold_ms = 2 * WATCHDOG_MS;
    start();
    cli_connect(&F.admin, "admin/alice");
    agent_join(a1, "agent/a1");
    agent_join(a2, "agent/a2");
    agent_subscribe(a1);
    agent_subscribe(a2);
    idle_heartbeat(a1);
    idle_heartbeat(a2);
    /* the coordinator has both Subscribes and no job: nothing sent yet */
    assert_int_equal(a1->sub.n, 0);
    assert_int_equal(a2->sub.n, 0);
    assert_false(a1->sub.done);
    assert_false(a2->sub.done);

    job_spec(&spec, 60000, 3); /* never reached */
    js = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    t1 = next_task(a1);
    t2 = next_task(a2);
    assert_int_equal(t1->job_id, js.job_id);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t2->job_id, js.job_id);

    /* paused, the job releases them (their streams stay open); resumed, it
     * reaches them again on the same streams with a new attempt */
    js = job_call(&F.admin, "/sfl.v1.Admin/PauseJob", js.job_id, &status);
    assert_int_equal(status, 0);
    idle_heartbeat(a1);
    idle_heartbeat(a2);
    assert_int_equal(a1->sub.n, 1);
    assert_false(a1->sub.done);
    js = job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", js.job_id, &status);
    assert_int_equal(status, 0);
    t1b = next_task(a1);
    t2b = next_task(a2);
    assert_int_equal(t1b->round, 1);
    assert_true(t1b->attempt > t1->attempt);
    assert_int_equal(t2b->attempt, t1b->attempt);
    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(t1b);
    sfl_msg_task_free(t2b);
}

/* The job status of job id once its waiting reason is not empty (the
 * coordinator computes it at its next selection tick). */
static sfl_job_status_t wait_for_reason(uint64_t id)
{
    sfl_job_status_t js;

    for (;;) {
        sfl_status_t *st = admin_status(&F.admin);

        js = *find_job(st, id);
        sfl_msg_status_free(st);
        if (js.waiting[0])
            return js;
        if (F.timed_out)
            fail_msg("watchdog waiting for job %llu's waiting reason", (unsigned long long)id);
        uv_run(&F.loop, UV_RUN_ONCE);
    }
}

/* A job that cannot start its round says why, with counts and the most
 * common reason agents are not eligible; the reason goes once the round
 * can start. */
static void test_coord_waiting_says_why(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_job_spec_t spec;
    sfl_job_status_t js, narrow, wide;
    sfl_task_t *t1, *t2;
    char want[256];
    int status;

    (void)state;
    start();
    cli_connect(&F.admin, "admin/alice");
    job_spec(&spec, 60000, 3); /* never reached */
    wide = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    js = wait_for_reason(wide.job_id);
    assert_string_equal(js.waiting, "selecting 0/2: waiting for 2 more agents (none connected)");
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);

    /* agents' data has DIM features: a job with fewer cannot use them */
    spec.dimension = DIM - 5;
    narrow = create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    agent_join(a1, "agent/a1");
    agent_subscribe(a1);
    idle_heartbeat(a1);
    js = wait_for_reason(narrow.job_id);
    snprintf(want, sizeof(want),
             "selecting 0/2: waiting for 2 more agents (1 connected, 0 eligible; 1 not "
             "eligible, e.g. agent %llu: data has %d features, the job %d)",
             (unsigned long long)a1->agent_id, DIM, DIM - 5);
    assert_string_equal(js.waiting, want);
    for (;;) {
        sfl_status_t *st = admin_status(&F.admin);

        js = *find_job(st, wide.job_id);
        sfl_msg_status_free(st);
        if (strcmp(js.waiting, "selecting 1/2: waiting for 1 more agent (1 connected, "
                               "1 eligible)") == 0)
            break;
        if (F.timed_out)
            fail_msg("watchdog: job %llu says '%s'", (unsigned long long)wide.job_id, js.waiting);
        uv_run(&F.loop, UV_RUN_ONCE);
    }

    /* the second agent completes the wide job's cohort: it starts, and its
     * reason is gone */
    agent_join(a2, "agent/a2");
    agent_subscribe(a2);
    t1 = next_task(a1);
    t2 = next_task(a2);
    assert_int_equal(t1->job_id, wide.job_id);
    {
        sfl_status_t *st = admin_status(&F.admin);

        js = *find_job(st, wide.job_id);
        assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
        assert_string_equal(js.waiting, "");
        js = *find_job(st, narrow.job_id);
        assert_true(strstr(js.waiting, "2 connected, 0 eligible; 2 not eligible") != NULL);
        sfl_msg_status_free(st);
    }
    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
}

/* /metrics answers only GET /metrics, within its limits. */
static void test_coord_metrics_http(void **state)
{
    static char big[10000];
    const char *r;

    (void)state;
    start();
    r = http("GET /nope HTTP/1.1\r\n\r\n", 22);
    assert_non_null(strstr(r, "HTTP/1.1 404"));
    r = http("POST /metrics HTTP/1.1\r\n\r\n", 26);
    assert_non_null(strstr(r, "HTTP/1.1 405"));
    r = http("hello\r\n\r\n", 9);
    assert_non_null(strstr(r, "HTTP/1.1 400"));
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    r = http(big, sizeof(big));
    assert_non_null(strstr(r, "HTTP/1.1 431"));
    r = http("HEAD /metrics HTTP/1.0\r\n\r\n", 26);
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_null(strstr(r, "sfl_agents_known"));
    r = http("GET /metrics HTTP/1.0\r\n\r\n", 25);
    assert_non_null(strstr(r, "# TYPE sfl_agents_known gauge\nsfl_agents_known 0\n"));
}

/* A [job] definition added to a running coordinator, once (the keys
 * themselves: test_jobdef.c; the configuration: test_coordcfg.c). */
static void test_coord_config_and_jobdefs(void **state)
{
    coord_jobdef_t *d = NULL;
    uint64_t id1 = 0, id2 = 0;
    int created = 0;

    (void)state;
    assert_int_equal(coord_jobdef_new("cls", &d), 0);
    assert_int_equal(coord_jobdef_set(d, "features", "10"), 0);
    assert_int_equal(coord_jobdef_set(d, "loss", "logistic"), 0);
    assert_int_equal(coord_jobdef_set(d, "classes", "2"), 0);
    assert_int_equal(coord_jobdef_check(d), SFL_EINVAL); /* labels missing */
    assert_int_equal(coord_jobdef_set(d, "labels", "1,-1"), SFL_EINVAL); /* not ascending */
    assert_int_equal(coord_jobdef_set(d, "labels", "-1,1"), 0);
    assert_int_equal(coord_jobdef_set(d, "paused", "2"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_set(d, "paused", "1"), 0);
    assert_int_equal(coord_jobdef_set(d, "bogus", "1"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_check(d), 0);

    start();
    assert_int_equal(coord_add_jobdef(F.co, d, &id1, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(coord_add_jobdef(F.co, d, &id2, &created), 0);
    assert_int_equal(created, 0);
    assert_int_equal(id1, id2);
    cli_connect(&F.admin, "admin/alice");
    {
        sfl_status_t *st = admin_status(&F.admin);

        assert_int_equal(st->njobs, 1);
        assert_int_equal(st->jobs[0].state, SFL_JOB_PENDING);
        assert_string_equal(st->jobs[0].name, "cls");
        sfl_msg_status_free(st);
    }
    coord_jobdef_free(d);
}

/* The state directory is locked while a coordinator runs: a second one
 * on the same state refuses to start (flock works per open file, so a
 * second coord_new in this process meets the first one's lock), and the
 * directory is free again once the first has gone. */
static void test_coord_state_dir_locked(void **state)
{
    coord_t *second = NULL;
    char want[1200];

    (void)state;
    start();
    assert_int_equal(coord_new(&F.loop, &F.cfg, &second), SFL_EBUSY);
    assert_null(second);
    snprintf(want, sizeof(want),
             "state directory %s is in use by another sfl-coordinator (pid %ld)", F.state,
             (long)getpid());
    assert_string_equal(sfl_last_error(), want);
    assert_string_equal(sfl_error_message(SFL_EBUSY), want);
    stop();
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    start();
}

/* Each allocation of a start on existing state fails in turn. */
static int start_quiet(void)
{
    return coord_new(&F.loop, &F.cfg, &F.co);
}

static void settle(void)
{
    if (F.co)
        stop();
    /* handles a failed start left to close */
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
}

static void test_coord_failalloc(void **state)
{
    coord_jobdef_t *d = NULL;

    (void)state;
    start();
    assert_int_equal(coord_jobdef_new("j", &d), 0);
    assert_int_equal(coord_jobdef_set(d, "features", "8"), 0);
    assert_int_equal(coord_jobdef_set(d, "tau", "2"), 0);
    assert_int_equal(coord_add_jobdef(F.co, d, NULL, NULL), 0);
    coord_jobdef_free(d);
    stop();
    FAILALLOC_EACH(start_quiet(), settle());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_config_and_jobdefs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_join_and_roles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_round_commit_and_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_quorum_missed_retries_then_pauses, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coord_admin_job_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_job_wakes_idle_subscribers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_waiting_says_why, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_metrics_http, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_failalloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coord_state_dir_locked, setup, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/* The in-process coordinator fixture (coordfx.h). */
#include "coordfx.h"

static char dir[64]; /* temporary PKI root */

/* ---- a gRPC client over TLS ------------------------------------------------- */







fx_t F;

void fx_run_until(const int *flag)
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
void fx_cli_connect(cli_t *k, const char *who)
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
    snprintf(k->who, sizeof(k->who), "%s", who);
    assert_int_equal(sfl_tls_new(&tc, 0, &o.tls), 0);
    assert_int_equal(sfl_tls_cert_sha256(o.tls, k->cert_sha256), 0);
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

void fx_cli_close(cli_t *k)
{
    if (k->c)
        sfl_grpcconn_close(k->c);
    while (k->c && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
}

void fx_on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
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
void fx_call(cli_t *k, const char *path, uint8_t *req, size_t len, res_t *r)
{
    free(r->resp);
    memset(r, 0, sizeof(*r));
    assert_non_null(k->s);
    assert_int_equal(sfl_grpc_call_unary(k->s, path, req, len, 5000, fx_on_unary, r, NULL), 0);
    sfl_msg_buf_free(req);
    fx_run_until(&r->done);
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

void fx_stream_clear(stream_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->m[i]);
    memset(s, 0, sizeof(*s));
}

/* ---- agents ------------------------------------------------------------------------ */

void fx_join_binding(cli_t *k, uint8_t binding[SFL_SEAL_BINDING_BYTES])
{
    assert_non_null(k->c);
    assert_int_equal(sfl_conn_export_keying_material(sfl_grpcconn_conn(k->c), SFL_SEAL_JOIN_LABEL,
                                                     binding, SFL_SEAL_BINDING_BYTES),
                     0);
}

uint8_t *fx_join_req_as(cli_t *k, const sfl_identity_t *id, const sfl_identity_t *signer,
                        uint32_t version, size_t *len)
{
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    sfl_join_req_t j;
    uint8_t *buf = NULL;

    memset(&j, 0, sizeof(j));
    memcpy(j.identity_key, id->pk, 32);
    if (signer != NULL) {
        fx_join_binding(k, binding);
        assert_int_equal(sfl_seal_sign_join(signer, binding, j.proof), 0);
        j.has_proof = 1;
    }
    j.dataset.samples = 100;
    j.dataset.dimension = DIM;
    j.protocol_version = version;
    snprintf(j.agent_version, sizeof(j.agent_version), "test-agent");
    /* an agent's certificate key says the identity key is its choice
     * (JoinRequest.cert_proof), as sfl-agent does: what a front-end's
     * master requires */
    if (signer != NULL && strncmp(k->who, "agent/", 6) == 0) {
        char cert[256], key[256], ca[256];
        sfl_tls_config_t tc = {.cert_file = cert, .key_file = key, .ca_file = ca,
                               .verify_host = "localhost"};
        sfl_tls_t *t = NULL;

        snprintf(cert, sizeof(cert), "%s/ca/%s.crt", dir, k->who);
        snprintf(key, sizeof(key), "%s/ca/%s.key", dir, k->who);
        snprintf(ca, sizeof(ca), "%s/ca/ca.crt", dir);
        assert_int_equal(sfl_tls_new(&tc, 0, &t), 0);
        assert_int_equal(sfl_tls_cert_binding_sign(t, signer->pk, j.cert_proof,
                                                   &j.cert_proof_len),
                         0);
        sfl_tls_free(t);
    }
    assert_int_equal(sfl_msg_join_req_pack(&j, &buf, len), 0);
    return buf;
}

uint8_t *fx_join_req(cli_t *k, const sfl_identity_t *id, uint32_t version, size_t *len)
{
    return fx_join_req_as(k, id, id, version, len);
}

void fx_agent_join(tagent_t *t, const char *who)
{
    sfl_join_reply_t r;
    res_t res = {0};
    uint8_t *req;
    size_t len;

    if (t->id == NULL)
        assert_int_equal(sfl_identity_generate(&t->id), 0);
    if (t->cli.c == NULL)
        fx_cli_connect(&t->cli, who);
    req = fx_join_req(&t->cli, t->id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&t->cli, "/sfl.v1.Coordinator/Join", req, len, &res);
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

void fx_agent_subscribe_into(tagent_t *t, stream_t *into)
{
    sfl_subscribe_req_t s;
    uint8_t *buf = NULL;
    size_t len;

    fx_stream_clear(into);
    memset(&s, 0, sizeof(s));
    s.agent_id = t->agent_id;
    assert_int_equal(sfl_msg_subscribe_req_pack(&s, &buf, &len), 0);
    assert_int_equal(sfl_grpc_call_stream(t->cli.s, "/sfl.v1.Coordinator/Subscribe", buf, len, 0,
                                          on_msg, on_done, into, &into->call),
                     0);
    sfl_msg_buf_free(buf);
}

void fx_agent_subscribe(tagent_t *t)
{
    t->seen = 0;
    fx_agent_subscribe_into(t, &t->sub);
}

/* The next stream message: a task (returned, signature verified against the
 * key from JoinReply) or a Wait (*w filled, NULL returned). */
sfl_task_t *fx_next_message(tagent_t *t, sfl_wait_t *w)
{
    sfl_task_t *task = NULL;
    sfl_vstep_t st = {0};

    if (fx_next_sub(t, &task, w, &st) == 's') {
        sfl_msg_vstep_clear(&st);
        fail_msg("a vertical step instead of a task or a Wait");
    }
    return task;
}

sfl_task_t *fx_next_task(tagent_t *t)
{
    sfl_wait_t w;
    sfl_task_t *task = fx_next_message(t, &w);

    if (task == NULL)
        fail_msg("got a Wait (%u ms: %s) instead of a task", w.retry_after_ms, w.reason);
    return task;
}

static const uint32_t upd_idx[3] = {1, 5, 9};

/* A packed Update for task, with values vals at upd_idx, signed by signer:
 * mode SIGNED (payload | sigma, as agents send it) when seal_pk is NULL,
 * else mode SEALED to seal_pk (as older agents send it). */
uint8_t *fx_make_update(const sfl_task_t *t, const sfl_identity_t *signer,
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
    /* The coordinator folds it whatever the job's algorithm (in [0, 1] for
     * the suites' samples, at most 1000). */
    p.personal_accuracy = p.eval_samples ? (double)samples / 1024 : 0;
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
    if (seal_pk != NULL)
        assert_int_equal(sfl_seal_update(signer, &ctx, pl, pllen, sealed,
                                         sfl_seal_sealed_size(pllen), &slen),
                         0);
    else
        assert_int_equal(sfl_seal_sign_into(signer, &ctx, pl, pllen, sealed,
                                            sfl_seal_sealed_size(pllen), &slen),
                         0);
    memset(&u, 0, sizeof(u));
    u.job_id = t->job_id;
    u.round = t->round;
    u.attempt = t->attempt;
    u.agent_id = agent_id;
    u.mode = seal_pk != NULL ? SFL_UPDATE_MODE_SEALED : SFL_UPDATE_MODE_SIGNED;
    u.sealed = sealed;
    u.sealed_len = slen;
    assert_int_equal(sfl_msg_update_pack(&u, &out, len), 0);
    free(sealed);
    sfl_msg_buf_free(pl);
    sfl_spvec_free(v);
    return out;
}

/* Submits update bytes (copied; the caller keeps upd) and returns the ack. */
sfl_ack_t fx_submit(tagent_t *t, const uint8_t *upd, size_t len)
{
    res_t res = {0};
    sfl_ack_t ack;
    uint8_t *copy = malloc(len);

    assert_non_null(copy);
    memcpy(copy, upd, len);
    assert_non_null(t->cli.s);
    assert_int_equal(sfl_grpc_call_unary(t->cli.s, "/sfl.v1.Coordinator/SubmitUpdate", copy, len,
                                         5000, fx_on_unary, &res, NULL),
                     0);
    free(copy);
    fx_run_until(&res.done);
    if (res.status != 0)
        fail_msg("SubmitUpdate: %d %s", res.status, res.msg);
    assert_int_equal(sfl_msg_ack_unpack(res.resp, res.len, NULL, &ack), 0);
    free(res.resp);
    return ack;
}

sfl_heartbeat_reply_t fx_heartbeat(tagent_t *t, uint64_t job, uint64_t round,
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
    fx_call(&t->cli, "/sfl.v1.Coordinator/Heartbeat", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_heartbeat_reply_unpack(res.resp, res.len, NULL, &r), 0);
    free(res.resp);
    return r;
}

/* An idle heartbeat: answered after every request sent before it on the
 * same connection was handled (frames are processed in order). */
void fx_idle_heartbeat(tagent_t *t)
{
    sfl_heartbeat_req_t h;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&h, 0, sizeof(h));
    h.agent_id = t->agent_id;
    h.phase = SFL_PHASE_IDLE;
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, &len), 0);
    fx_call(&t->cli, "/sfl.v1.Coordinator/Heartbeat", buf, len, &res);
    assert_int_equal(res.status, 0);
    free(res.resp);
}

/* ---- admin ------------------------------------------------------------------------------ */

sfl_status_t *fx_admin_status(cli_t *k)
{
    sfl_status_t *st = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    fx_call(k, "/sfl.v1.Admin/Status", buf, len, &res);
    if (res.status != 0)
        fail_msg("Status: %d %s", res.status, res.msg);
    assert_int_equal(sfl_msg_status_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

void fx_job_spec(sfl_job_spec_t *s, uint32_t deadline_ms, uint32_t max_attempts)
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

sfl_job_status_t fx_create_job(cli_t *k, const sfl_job_spec_t *s, int *status)
{
    sfl_job_status_t st;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&st, 0, sizeof(st));
    assert_int_equal(sfl_msg_create_job_pack(s, &buf, &len), 0);
    fx_call(k, "/sfl.v1.Admin/CreateJob", buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_job_reply_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

sfl_export_t *fx_export_model(cli_t *k, uint64_t job, uint64_t round, int *status)
{
    sfl_export_t *e = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_export_req_pack(job, round, &buf, &len), 0);
    fx_call(k, "/sfl.v1.Admin/ExportModel", buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_export_unpack(res.resp, res.len, NULL, &e), 0);
    free(res.resp);
    return e;
}

sfl_job_history_t *fx_job_history(cli_t *k, uint64_t job, uint64_t after, int *status)
{
    sfl_job_history_t *h = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_history_req_pack(job, after, &buf, &len), 0);
    fx_call(k, "/sfl.v1.Admin/JobHistory", buf, len, &res);
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
const char *fx_http(const char *req, size_t len)
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
    fx_run_until(&x.done);
    return x.resp;
}

/* ---- fixture ------------------------------------------------------------------------------ */

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = 1;
    uv_stop(&F.loop);
}

int fx_group_setup(void **state)
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

const char *fx_pki_dir(void)
{
    return dir;
}

int fx_group_teardown(void **state)
{
    (void)state;
    if (dir[0] && strncmp(dir, "/tmp/sfl-coord-", 15) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

void fx_config(coord_config_t *c)
{
    coord_config_default(c);
    assert_int_equal(coord_config_set(c, "listen", "127.0.0.1:0"), 0);
    assert_int_equal(coord_config_set(c, "admin_listen", "127.0.0.1:0"), 0);
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

void fx_start(void)
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

void fx_stop(void)
{
    if (F.co == NULL)
        return;
    F.stopped = 0;
    coord_shutdown(F.co, 0, on_stopped, NULL);
    fx_run_until(&F.stopped);
    coord_free(F.co);
    F.co = NULL;
}

int fx_setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&F.watchdog);
    snprintf(F.state, sizeof(F.state), "/tmp/sfl-coord-state-XXXXXX");
    assert_non_null(mkdtemp(F.state));
    fx_config(&F.cfg);
    return 0;
}

#define TEARDOWN_MS 5000

static void close_left(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

int fx_teardown(void **state)
{
    (void)state;
    fx_cli_close(&F.admin);
    for (int i = 0; i < 3; i++) {
        fx_cli_close(&F.ag[i].cli);
        fx_stream_clear(&F.ag[i].sub);
        sfl_identity_free(F.ag[i].id);
    }
    fx_stop();
    /* What is left is the test's own: a passing test closed it, a test that
     * failed midway may have left handles open (a front-end's timers, a
     * client's socket). Given a few seconds to close, then closed here, or
     * the last run would wait on them for ever. */
    uv_timer_start(&F.watchdog, watchdog_cb, TEARDOWN_MS, 0);
    while (uv_loop_alive(&F.loop) && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    if (F.timed_out)
        uv_walk(&F.loop, close_left, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    if (strncmp(F.state, "/tmp/sfl-coord-state-", 21) == 0)
        test_sh("rm -rf '%s'", F.state);
    return 0;
}

sfl_job_status_t *fx_find_job(sfl_status_t *st, uint64_t id)
{
    for (uint32_t i = 0; i < st->njobs; i++)
        if (st->jobs[i].job_id == id)
            return &st->jobs[i];
    fail_msg("job %llu not in status", (unsigned long long)id);
    return NULL;
}

sfl_job_status_t fx_job_call(cli_t *k, const char *path, uint64_t id, int *status)
{
    sfl_job_status_t st;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    memset(&st, 0, sizeof(st));
    assert_int_equal(sfl_msg_job_req_pack(id, &buf, &len), 0);
    fx_call(k, path, buf, len, &res);
    *status = res.status;
    if (res.status == 0)
        assert_int_equal(sfl_msg_job_reply_unpack(res.resp, res.len, NULL, &st), 0);
    free(res.resp);
    return st;
}

/* ---- vertical jobs ------------------------------------------------------------------ */

void fx_block_summary(sfl_dataset_summary_t *ds, uint64_t samples, uint32_t first_column,
                      uint32_t width, const uint8_t ids_hash[SFL_MSG_HASH_BYTES])
{
    memset(ds, 0, sizeof(*ds));
    ds->samples = samples;
    ds->dimension = width;
    ds->first_column = first_column;
    ds->has_ids = 1;
    memcpy(ds->ids_hash, ids_hash, SFL_MSG_HASH_BYTES);
}

void fx_agent_join_ds(tagent_t *t, const char *who, const sfl_dataset_summary_t *ds)
{
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    sfl_join_req_t j;
    sfl_join_reply_t r;
    res_t res = {0};
    uint8_t *req = NULL;
    size_t len;

    if (t->id == NULL)
        assert_int_equal(sfl_identity_generate(&t->id), 0);
    if (t->cli.c == NULL)
        fx_cli_connect(&t->cli, who);
    memset(&j, 0, sizeof(j));
    memcpy(j.identity_key, t->id->pk, 32);
    j.dataset = *ds;
    j.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    snprintf(j.agent_version, sizeof(j.agent_version), "test-agent");
    fx_join_binding(&t->cli, binding);
    assert_int_equal(sfl_seal_sign_join(t->id, binding, j.proof), 0);
    j.has_proof = 1;
    assert_int_equal(sfl_msg_join_req_pack(&j, &req, &len), 0);
    fx_call(&t->cli, "/sfl.v1.Coordinator/Join", req, len, &res);
    if (res.status != 0)
        fail_msg("join %s: %d %s", who, res.status, res.msg);
    assert_int_equal(sfl_msg_join_reply_unpack(res.resp, res.len, NULL, &r), 0);
    assert_true(r.agent_id > 0);
    t->agent_id = r.agent_id;
    memcpy(t->coord_pk, r.coordinator_key, 32);
    free(res.resp);
}

int fx_next_sub(tagent_t *t, sfl_task_t **task, sfl_wait_t *w, sfl_vstep_t *step)
{
    int kind = 0;

    *task = NULL;
    while (t->sub.n <= t->seen) {
        if (t->sub.done)
            fail_msg("stream ended (%d %s) without a message", t->sub.status, t->sub.msg);
        if (F.timed_out)
            fail_msg("watchdog waiting for a stream message");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_int_equal(sfl_msg_sub_unpack(t->sub.m[t->seen], t->sub.len[t->seen], NULL, task, w,
                                        step, NULL, &kind),
                     0);
    t->seen++;
    if (kind == 't')
        assert_int_equal(sfl_seal_verify_detached(t->coord_pk, SFL_MSG_TASK_CONTEXT,
                                                  (*task)->signed_bytes, (*task)->signed_len,
                                                  (*task)->signature),
                         0);
    return kind;
}

int fx_submit_step(tagent_t *t, const sfl_step_answer_t *m, sfl_ack_t *ack, char *msg,
                   size_t cap)
{
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    int status;

    assert_int_equal(sfl_msg_step_answer_pack(m, &buf, &len), 0);
    fx_call(&t->cli, "/sfl.v1.Coordinator/SubmitStep", buf, len, &res);
    status = res.status;
    if (msg != NULL)
        snprintf(msg, cap, "%s", res.msg);
    if (status == 0)
        assert_int_equal(sfl_msg_ack_unpack(res.resp, res.len, NULL, ack), 0);
    free(res.resp);
    return status;
}

static void run_for_cb(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

static void run_for_closed(uv_handle_t *h)
{
    *(int *)h->data = 1;
}

/* Static, like fx_http's state: a failed assertion leaves the loop with it. */
void fx_run_for(uint64_t ms)
{
    static uv_timer_t tm;
    static int fired, closed;

    fired = closed = 0;
    tm.data = &fired;
    assert_int_equal(uv_timer_init(&F.loop, &tm), 0);
    assert_int_equal(uv_timer_start(&tm, run_for_cb, ms, 0), 0);
    fx_run_until(&fired);
    tm.data = &closed;
    uv_close((uv_handle_t *)&tm, run_for_closed);
    fx_run_until(&closed);
}

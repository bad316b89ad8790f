/* server/service/fleetsvc.c: the Fleet service on the master, on the
 * in-process coordinator (coordfx.h) with a front-end's certificate
 * (sfl-pki frontend): who may call it, relayed Joins and calls, agents
 * moving between front-end connections, Gone, revocation, the front-end's
 * connection closing, and what a hostile front-end sends. */
#include "coordfx.h"

static const uint8_t sha_a[32] = {0xa1, 1, 2, 3};
static const uint8_t sha_b[32] = {0xb2, 1, 2, 3};

/* Packs a FleetCall around req (freed), or an empty request. */
static uint8_t *wrap(const char *cn, const uint8_t sha[32], uint8_t *req, size_t rlen,
                     uint64_t conn, size_t *len)
{
    sfl_fleet_call_t m;
    uint8_t *buf = NULL;

    memset(&m, 0, sizeof(m));
    snprintf(m.agent_cn, sizeof(m.agent_cn), "%s", cn);
    memcpy(m.cert_sha256, sha, 32);
    m.request = req;
    m.request_len = rlen;
    m.conn_id = conn;
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, len), 0);
    sfl_msg_buf_free(req);
    return buf;
}

static uint8_t *heartbeat(uint64_t agent, size_t *len)
{
    sfl_heartbeat_req_t h;
    uint8_t *buf = NULL;

    memset(&h, 0, sizeof(h));
    h.agent_id = agent;
    h.phase = SFL_PHASE_IDLE;
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, len), 0);
    return buf;
}

/* Fleet/Heartbeat for agent on conn: the status, the message in res. */
static int fleet_hb(cli_t *fe, const char *cn, const uint8_t sha[32], uint64_t agent,
                    uint64_t conn, res_t *res)
{
    size_t rl, len;
    uint8_t *req = heartbeat(agent, &rl);
    uint8_t *buf = wrap(cn, sha, req, rl, conn, &len);

    fx_call(fe, "/sfl.v1.Fleet/Heartbeat", buf, len, res);
    return res->status;
}

static uint64_t fleet_join(cli_t *fe, const char *cn, const uint8_t sha[32], uint64_t conn,
                           sfl_identity_t *id)
{
    sfl_join_reply_t r;
    res_t res = {0};
    size_t rl, len;
    uint8_t *req = fx_join_req(fe, id, SFL_MSG_PROTOCOL_VERSION, &rl);
    uint8_t *buf = wrap(cn, sha, req, rl, conn, &len);

    fx_call(fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    if (res.status != 0)
        fail_msg("Fleet/Join %s: %d %s", cn, res.status, res.msg);
    assert_int_equal(sfl_msg_join_reply_unpack(res.resp, res.len, NULL, &r), 0);
    assert_memory_equal(r.coordinator_key, coord_public_key(F.co), 32);
    free(res.resp);
    return r.agent_id;
}

static uint32_t connected(void)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    uint32_t n = st->connected_agents;

    sfl_msg_status_free(st);
    return n;
}

static int fe_setup(void **state)
{
    int rc = fx_group_setup(state);

    if (rc == 0)
        test_sh("sh %s frontend %s/ca fe1 >/dev/null", PKI, fx_pki_dir());
    return rc;
}

/* Front-end certificates call Fleet only; nobody else calls Fleet. */
static void test_fleet_roles(void **state)
{
    cli_t fe = {0};
    res_t res = {0};
    uint8_t *buf;
    size_t len;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    fx_cli_connect(&F.ag[0].cli, "agent/a1");
    assert_int_equal(sfl_identity_generate(&F.ag[0].id), 0);
    buf = fx_join_req(&fe, F.ag[0].id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&fe, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    fx_call(&fe, "/sfl.v1.Admin/Status", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    /* an agent or an admin on Fleet */
    assert_int_equal(fleet_hb(&F.ag[0].cli, "a1", sha_a, 1, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(fleet_hb(&F.admin, "a1", sha_a, 1, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    free(res.resp);
    fx_cli_close(&fe);
}

/* Relayed Join and calls; the agent's connection moves; Gone. */
static void test_fleet_relay(void **state)
{
    cli_t fe = {0}, fe2 = {0};
    sfl_identity_t *id = NULL, *id2 = NULL;
    res_t res = {0};
    uint64_t agent, agent2;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_identity_generate(&id2), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    assert_true(agent > 0);
    assert_int_equal(connected(), 1);
    assert_int_equal(fleet_hb(&fe, "a1", sha_a, agent, 1, &res), 0);
    /* the same agent again (a reconnect): the same id */
    assert_int_equal(fleet_join(&fe, "a1", sha_a, 5, id), agent);
    /* the name is bound to its certificate and key */
    {
        size_t rl, len;
        uint8_t *req = fx_join_req(&fe, id2, SFL_MSG_PROTOCOL_VERSION, &rl);
        uint8_t *buf = wrap("a1", sha_a, req, rl, 6, &len);

        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        req = fx_join_req(&fe, id, SFL_MSG_PROTOCOL_VERSION, &rl);
        buf = wrap("a1", sha_b, req, rl, 7, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    }
    /* conn 1 is a1's: another certificate cannot use it */
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 1, &res),
                     SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "another agent certificate"));
    /* an agent that never joined; another agent's id */
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 2, &res),
                     SFL_GRPC_STATUS_FAILED_PRECONDITION);
    agent2 = fleet_join(&fe, "a2", sha_b, 3, id2);
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 3, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(connected(), 2);
    /* a1 moves to another front-end connection without a new Join; the
     * old front-end's Gone for its old connection does not take it off */
    fx_cli_connect(&fe2, "frontend/fe1");
    assert_int_equal(fleet_hb(&fe2, "a1", sha_a, agent, 1, &res), 0);
    {
        size_t len;
        uint8_t *buf = wrap("a1", sha_a, NULL, 0, 5, &len);

        fx_call(&fe, "/sfl.v1.Fleet/Gone", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 2);
    /* the first front-end goes: a2 with it, a1 stays on the second */
    fx_cli_close(&fe);
    for (int i = 0; i < 1000 && connected() != 1; i++) /* the master sees the close */
        fx_run_for(5);
    assert_int_equal(connected(), 1);
    {
        size_t len;
        uint8_t *buf = wrap("a1", sha_a, NULL, 0, 1, &len);

        fx_call(&fe2, "/sfl.v1.Fleet/Gone", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 0);
    (void)agent2;
    free(res.resp);
    fx_cli_close(&fe2);
    sfl_identity_free(id);
    sfl_identity_free(id2);
}

/* What a hostile front-end sends: malformed, oversized, revoked. */
static void test_fleet_hostile(void **state)
{
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    res_t res = {0};
    uint64_t agent;
    uint8_t *buf;
    size_t len;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    /* not a FleetCall */
    buf = malloc(8);
    memset(buf, 0xff, 8);
    fx_call(&fe, "/sfl.v1.Fleet/Heartbeat", buf, 8, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    /* a FleetCall around junk */
    buf = malloc(8);
    memset(buf, 0xff, 8);
    buf = wrap("a1", sha_a, buf, 8, 1, &len);
    fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    /* larger than a Join may be */
    buf = calloc(1, 70000);
    buf = wrap("a1", sha_a, buf, 70000, 1, &len);
    fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    /* revoked: refused, and the agent goes offline */
    assert_int_equal(sfl_identity_generate(&id), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    assert_int_equal(connected(), 1);
    {
        sfl_revoke_t m;

        memset(&m, 0, sizeof(m));
        memcpy(m.fingerprint, sha_a, 32);
        m.has_fingerprint = 1;
        assert_int_equal(sfl_msg_revoke_req_pack(&m, &buf, &len), 0);
        fx_call(&F.admin, "/sfl.v1.Admin/RevokeCertificate", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 0);
    assert_int_equal(fleet_hb(&fe, "a1", sha_a, agent, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, SFL_MSG_REVOKED));
    /* the front-end's connection survives all of it */
    assert_non_null(fe.c);
    free(res.resp);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

static void st_msg(sfl_grpc_call_t *c, const uint8_t *msg, size_t len, void *ud)
{
    stream_t *s = ud;

    (void)c;
    assert_true(s->n < MAX_MSGS);
    s->m[s->n] = malloc(len ? len : 1);
    assert_non_null(s->m[s->n]);
    memcpy(s->m[s->n], msg, len);
    s->len[s->n++] = len;
}

static void st_done(sfl_grpc_call_t *c, int status, const char *message, void *ud)
{
    stream_t *s = ud;

    (void)c;
    s->done = 1;
    s->status = status;
    snprintf(s->msg, sizeof(s->msg), "%s", message);
}

/* Fleet.Model for (job, hash): the status, the model in *model. */
static int fleet_model(cli_t *fe, uint64_t job, const uint8_t hash[32], uint8_t **model,
                       size_t *mlen)
{
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    int status;

    assert_int_equal(sfl_msg_fleet_model_req_pack(job, hash, &buf, &len), 0);
    fx_call(fe, "/sfl.v1.Fleet/Model", buf, len, &res);
    status = res.status;
    if (status == 0)
        assert_int_equal(sfl_msg_fleet_model_reply_unpack(res.resp, res.len, NULL, model, mlen),
                         0);
    free(res.resp);
    return status;
}

/* A front-end's agent gets its task without the model; Fleet.Model gives
 * the model, which put back makes the task an agent unpacks and checks. */
static void test_fleet_model_once(void **state)
{
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    sfl_job_spec_t spec;
    stream_t st = {0};
    sfl_subscribe_req_t sr;
    uint8_t *buf = NULL, *model = NULL, *full = NULL, hash[32], bad[32];
    size_t len, rl, mlen, flen;
    uint64_t agent, job;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_identity_generate(&id), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    fx_job_spec(&spec, 30000, 3);
    spec.cohort_size = 1;
    spec.min_quorum = 1;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    memset(&sr, 0, sizeof(sr));
    sr.agent_id = agent;
    assert_int_equal(sfl_msg_subscribe_req_pack(&sr, &buf, &rl), 0);
    buf = wrap("a1", sha_a, buf, rl, 1, &len);
    assert_int_equal(sfl_grpc_call_stream(fe.s, "/sfl.v1.Fleet/Subscribe", buf, len, 0, st_msg,
                                          st_done, &st, &st.call),
                     0);
    sfl_msg_buf_free(buf);
    for (int i = 0; i < 2000 && st.n == 0 && !st.done; i++)
        fx_run_for(5);
    assert_true(st.n >= 1);
    assert_int_equal(sfl_msg_task_needs_model(st.m[0], st.len[0], &job, hash), 1);
    assert_true(job == 1);
    /* what an agent would make of it without the model: refused */
    assert_int_equal(sfl_msg_task_or_wait_unpack(st.m[0], st.len[0], NULL, &t, &w), SFL_EPARSE);
    assert_null(t);
    assert_int_equal(fleet_model(&fe, job, hash, &model, &mlen), 0);
    assert_int_equal(sfl_msg_task_put_model(st.m[0], st.len[0], model, mlen, &full, &flen), 0);
    assert_int_equal(sfl_msg_task_or_wait_unpack(full, flen, NULL, &t, &w), 0);
    assert_non_null(t);
    assert_memory_equal(t->model_hash, hash, 32);
    assert_int_equal(t->model->dim, DIM);
    sfl_msg_task_free(t);
    /* another model, another job: NOT_FOUND */
    memcpy(bad, hash, 32);
    bad[0] ^= 1;
    assert_int_equal(fleet_model(&fe, job, bad, &model, &mlen), SFL_GRPC_STATUS_NOT_FOUND);
    assert_int_equal(fleet_model(&fe, 99, hash, &model, &mlen), SFL_GRPC_STATUS_NOT_FOUND);
    /* an agent or admin may not ask */
    assert_int_equal(fleet_model(&F.admin, job, hash, &model, &mlen),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    sfl_msg_buf_free(model);
    sfl_msg_buf_free(full);
    if (!st.done)
        sfl_grpc_cancel(st.call);
    fx_stream_clear(&st);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fleet_roles, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_relay, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_hostile, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_model_once, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fe_setup, fx_group_teardown);
}

/* server/service/agentsvc.c: Join, Subscribe and the roles that gate the services, on
 * the in-process coordinator (coordfx.h). */
#include <sodium.h>

#include "coordfx.h"

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
    fx_start();
    fx_agent_join(a1, "agent/a1");
    assert_memory_equal(a1->coord_pk, coord_public_key(F.co), 32);

    /* an agent certificate may not call Admin */
    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    fx_call(&a1->cli, "/sfl.v1.Admin/Status", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* an admin certificate may not Join */
    fx_cli_connect(&F.admin, "admin/alice");
    buf = fx_join_req(&F.admin, a1->id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&F.admin, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* the admin sees the agent */
    st = fx_admin_status(&F.admin);
    assert_int_equal(st->known_agents, 1);
    assert_int_equal(st->connected_agents, 1);
    assert_int_equal(st->njobs, 0);
    assert_non_null(strstr(st->version, "sfl-coordinator"));
    sfl_msg_status_free(st);

    /* the same certificate with another identity key */
    assert_int_equal(sfl_identity_generate(&other), 0);
    buf = fx_join_req(&a1->cli, other, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
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
            buf = fx_join_req(&a1->cli, other, SFL_MSG_PROTOCOL_VERSION, &len);
            fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
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
    buf = fx_join_req(&a1->cli, a1->id, SFL_MSG_PROTOCOL_VERSION - 1, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(res.msg, "protocol_version 1 is not supported"));
    buf = fx_join_req(&a1->cli, a1->id, SFL_MSG_PROTOCOL_VERSION + 1, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);

    /* garbage */
    buf = malloc(4);
    assert_non_null(buf);
    memcpy(buf, "\xff\xff\xff\xff", 4);
    assert_int_equal(sfl_grpc_call_unary(a1->cli.s, "/sfl.v1.Coordinator/Join", buf, 4, 5000,
                                         fx_on_unary, &res, NULL),
                     0);
    free(buf);
    memset(&res, 0, sizeof(res));
    fx_run_until(&res.done);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);

    /* Subscribe before Join on another certificate */
    assert_int_equal(sfl_identity_generate(&a2->id), 0);
    fx_cli_connect(&a2->cli, "agent/a2");
    a2->agent_id = 99;
    fx_agent_subscribe(a2);
    fx_run_until(&a2->sub.done);
    assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);

    /* and with the wrong agent id after Join */
    fx_agent_join(a2, "agent/a2");
    a2->agent_id = a1->agent_id;
    fx_agent_subscribe(a2);
    fx_run_until(&a2->sub.done);
    assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    /* with no job, a subscriber is held for subscribe_hold_ms (set short
     * above), then paced away with idle_retry_ms */
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a2);
    {
        sfl_wait_t w;

        assert_null(fx_next_message(a2, &w));
        assert_int_equal(w.retry_after_ms, F.cfg.idle_retry_ms);
        assert_string_equal(w.reason, "no running job for this agent");
        fx_run_until(&a2->sub.done);
        assert_int_equal(a2->sub.status, SFL_GRPC_STATUS_OK);
    }
    free(res.resp);
    sfl_identity_free(other);
}

static void join_expect(cli_t *k, const sfl_identity_t *id, const sfl_identity_t *signer,
                        const uint8_t *proof, int status, const char *msg)
{
    res_t res = {0};
    uint8_t *buf;
    size_t len;

    if (proof != NULL) {
        sfl_join_req_t j;

        /* the honest request, its proof replaced */
        buf = fx_join_req(k, id, SFL_MSG_PROTOCOL_VERSION, &len);
        assert_int_equal(sfl_msg_join_req_unpack(buf, len, NULL, &j), 0);
        sfl_msg_buf_free(buf);
        memcpy(j.proof, proof, 64);
        assert_int_equal(sfl_msg_join_req_pack(&j, &buf, &len), 0);
    } else {
        buf = fx_join_req_as(k, id, signer, SFL_MSG_PROTOCOL_VERSION, &len);
    }
    fx_call(k, "/sfl.v1.Coordinator/Join", buf, len, &res);
    if (res.status != status || (msg && strstr(res.msg, msg) == NULL))
        fail_msg("Join: want %d \"%s\", got %d \"%s\"", status, msg ? msg : "", res.status,
                 res.msg);
    free(res.resp);
}

static void revoke(const char *agent, const uint8_t *fpr, int status, const char *msg)
{
    sfl_revoke_t m;
    res_t res = {0};
    uint8_t *buf;
    size_t len;

    memset(&m, 0, sizeof(m));
    if (agent)
        snprintf(m.agent, sizeof(m.agent), "%s", agent);
    if (fpr) {
        memcpy(m.fingerprint, fpr, 32);
        m.has_fingerprint = 1;
    }
    assert_int_equal(sfl_msg_revoke_req_pack(&m, &buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/RevokeCertificate", buf, len, &res);
    if (res.status != status || (msg && strstr(res.msg, msg) == NULL))
        fail_msg("Revoke: want %d \"%s\", got %d \"%s\"", status, msg ? msg : "", res.status,
                 res.msg);
    free(res.resp);
}

/* Proof of possession at Join (issue 23, finding 6): a Join without a
 * proof, with a proof by another key, or with a proof from another
 * connection is refused; a certificate of the same CA and CN that presents
 * an agent's public key cannot take its name, before or after the agent's
 * certificate is revoked; the agent itself re-binds under the new
 * certificate with its own key and keeps its id. */
static void test_coord_join_proof(void **state)
{
    tagent_t *a1 = &F.ag[0], *twin = &F.ag[1];
    sfl_identity_t *other = NULL;
    uint8_t binding[SFL_SEAL_BINDING_BYTES], old_proof[64];
    uint64_t id1;

    (void)state;
    fx_start();
    fx_agent_join(a1, "agent/a1");
    id1 = a1->agent_id;
    assert_int_equal(sfl_identity_generate(&other), 0);

    join_expect(&a1->cli, a1->id, NULL, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "Join carries no join_proof");
    join_expect(&a1->cli, a1->id, other, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "join_proof does not verify");
    /* a valid proof from this connection, replayed on the next one */
    fx_join_binding(&a1->cli, binding);
    assert_int_equal(sfl_seal_sign_join(a1->id, binding, old_proof), 0);
    fx_cli_close(&a1->cli);
    fx_cli_connect(&a1->cli, "agent/a1");
    join_expect(&a1->cli, a1->id, NULL, old_proof, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "join_proof does not verify");
    fx_agent_join(a1, "agent/a1"); /* its own proof over this connection */
    assert_int_equal(a1->agent_id, id1);

    /* a second certificate of the CA with CN=a1 */
    test_sh("cd %s/ca/agent && mv a1.crt a1.crt.keep && mv a1.key a1.key.keep && "
            "sh %s/%s agent %s/ca a1 >/dev/null && mv a1.crt twin.crt && mv a1.key twin.key && "
            "mv a1.crt.keep a1.crt && mv a1.key.keep a1.key",
            fx_pki_dir(), getenv("PWD"), PKI, fx_pki_dir());
    fx_cli_connect(&twin->cli, "agent/twin");
    /* a1's public key without its secret: refused before the revocation ... */
    join_expect(&twin->cli, a1->id, NULL, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "no join_proof");
    join_expect(&twin->cli, a1->id, other, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "does not verify");
    /* ... and after it, when the name is released */
    fx_cli_connect(&F.admin, "admin/alice");
    revoke("a1", NULL, SFL_GRPC_STATUS_OK, NULL);
    join_expect(&twin->cli, a1->id, NULL, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "no join_proof");
    join_expect(&twin->cli, a1->id, other, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "does not verify");
    /* its own key, proved: the name keeps a1's key */
    join_expect(&twin->cli, other, other, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED,
                "another identity key");
    /* the real a1 under the new certificate, with its own key: same id */
    twin->id = a1->id;
    a1->id = NULL;
    fx_agent_join(twin, "agent/twin");
    assert_int_equal(twin->agent_id, id1);
    /* the revoked certificate connects again: its call is answered with
     * the revocation and its fingerprint (issue 24, item 4), then the
     * connection closes; it never joins */
    {
        char want[128], hex[65];

        fx_cli_close(&a1->cli);
        fx_cli_connect(&a1->cli, "agent/a1");
        sodium_bin2hex(hex, sizeof(hex), a1->cli.cert_sha256, 32);
        snprintf(want, sizeof(want), SFL_MSG_REVOKED " (fingerprint %s)", hex);
        join_expect(&a1->cli, twin->id, NULL, NULL, SFL_GRPC_STATUS_PERMISSION_DENIED, want);
        fx_run_until(&a1->cli.closed);
        assert_int_equal(twin->agent_id, id1);
    }
    sfl_identity_free(other);
}

/* Self-protection (issue 23, finding 9): neither the coordinator's own
 * certificate nor the admin certificate the call comes with can be
 * revoked; another admin's can. */
static void test_coord_revoke_self_refused(void **state)
{
    sfl_peer_t coord;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_conn_peer(sfl_grpcconn_conn(F.admin.c), &coord), 0);
    assert_int_equal(coord.role, SFL_ROLE_COORDINATOR);
    revoke(NULL, coord.sha256, SFL_GRPC_STATUS_FAILED_PRECONDITION,
           "is the coordinator's own certificate");
    revoke(NULL, F.admin.cert_sha256, SFL_GRPC_STATUS_FAILED_PRECONDITION,
           "is this call's own certificate (admin alice)");
    /* still an admin */
    sfl_msg_status_free(fx_admin_status(&F.admin));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_join_and_roles, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_join_proof, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_revoke_self_refused, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

/* server/agentsvc.c: Join, Subscribe and the roles that gate the services, on
 * the in-process coordinator (coordfx.h). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_join_and_roles, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

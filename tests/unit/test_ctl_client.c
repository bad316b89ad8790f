/* sflctl's client (ctl/client.c) against an in-process coordinator on the
 * same loop (OK, PERMISSION_DENIED for an agent certificate, UNAVAILABLE
 * for a closed port). */
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
#include "ctl.h"
#include "sfl/net/grpc.h"
#include "sfl/wire/msg.h"
#include "testutil.h"

#define PKI "deploy/pki/sfl-pki"
#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */

static char dir[64]; /* PKI, the job file */

#define TEXT(name, s) test_write_file(dir, name, s, sizeof(s) - 1)

static struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    coord_t *co;
    ctl_client_t *cli;
    int stopped;
    char state[128];
} L;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    if (L.cli)
        ctl_client_interrupt(L.cli); /* the waiting call fails the test */
}

static void on_stopped(coord_t *c, void *ud)
{
    (void)c;
    (void)ud;
    L.stopped = 1;
}

static void ctl_cfg(ctl_config_t *c, const char *who, int port)
{
    ctl_config_default(c);
    snprintf(c->coordinator, sizeof(c->coordinator), "127.0.0.1:%d", port);
    snprintf(c->server_name, sizeof(c->server_name), "localhost");
    snprintf(c->ca, sizeof(c->ca), "%s/pki/ca.crt", dir);
    snprintf(c->cert, sizeof(c->cert), "%s/pki/%s.crt", dir, who);
    snprintf(c->key, sizeof(c->key), "%s/pki/%s.key", dir, who);
    c->timeout_ms = 60000; /* a failure detector, never reached when the test passes */
}

static void call_ok(const char *method, uint8_t *req, size_t len, ctl_result_t *r)
{
    char path[64];

    snprintf(path, sizeof(path), "/sfl.v1.Admin/%s", method);
    assert_int_equal(ctl_client_call(L.cli, path, req, len, r), 0);
    sfl_msg_buf_free(req);
    if (r->status != SFL_GRPC_STATUS_OK)
        fail_msg("%s: %s %s", method, sfl_grpc_status_name(r->status), r->message);
}

static void test_ctl_client(void **state)
{
    coord_config_t cc;
    ctl_config_t c;
    ctl_result_t r = {0};
    sfl_status_t *st = NULL;
    sfl_job_status_t js;
    sfl_job_spec_t spec;
    uint8_t *req = NULL;
    size_t len;
    int port, admin_port;

    (void)state;
    memset(&L, 0, sizeof(L));
    assert_int_equal(uv_loop_init(&L.loop), 0);
    uv_timer_init(&L.loop, &L.watchdog);
    uv_timer_start(&L.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&L.watchdog);
    snprintf(L.state, sizeof(L.state), "%s/state", dir);
    coord_config_default(&cc);
    assert_int_equal(coord_config_set(&cc, "listen", "127.0.0.1:0"), 0);
    assert_int_equal(coord_config_set(&cc, "admin_listen", "127.0.0.1:0"), 0);
    snprintf(cc.cert, sizeof(cc.cert), "%s/pki/coordinator/coord.crt", dir);
    snprintf(cc.key, sizeof(cc.key), "%s/pki/coordinator/coord.key", dir);
    snprintf(cc.ca, sizeof(cc.ca), "%s/pki/ca.crt", dir);
    snprintf(cc.state_dir, sizeof(cc.state_dir), "%s", L.state);
    snprintf(cc.metrics_listen, sizeof(cc.metrics_listen), "off");
    snprintf(cc.log_level, sizeof(cc.log_level), "error");
    assert_int_equal(coord_new(&L.loop, &cc, &L.co), 0);
    port = coord_port(L.co);
    admin_port = coord_admin_port(L.co);
    assert_true(admin_port > 0 && admin_port != port);

    /* an admin on admin_listen: Status, CreateJob from a job file, PauseJob,
     * ExportModel */
    ctl_cfg(&c, "admin/ops", admin_port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    call_ok("Status", req, len, &r);
    assert_int_equal(sfl_msg_status_unpack(r.resp, r.len, NULL, &st), 0);
    assert_int_equal(st->njobs, 0);
    assert_int_equal(st->connected_agents, 0);
    sfl_msg_status_free(st);

    assert_int_equal(ctl_job_load(TEXT("job.ini", "[job tiny]\nfeatures = 20\ntau = 3\n"
                                                  "rounds = 2\ncohort = 1\nmin_quorum = 1\n"),
                                  &spec),
                     0);
    assert_int_equal(sfl_msg_create_job_pack(&spec, &req, &len), 0);
    call_ok("CreateJob", req, len, &r);
    assert_int_equal(sfl_msg_job_reply_unpack(r.resp, r.len, NULL, &js), 0);
    assert_int_equal(js.job_id, 1);
    assert_string_equal(js.name, "tiny");
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    assert_int_equal(sfl_msg_job_req_pack(1, &req, &len), 0);
    call_ok("PauseJob", req, len, &r);
    assert_int_equal(sfl_msg_job_reply_unpack(r.resp, r.len, NULL, &js), 0);
    assert_int_equal(js.state, SFL_JOB_PAUSED);

    assert_int_equal(sfl_msg_export_req_pack(1, 0, &req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/ExportModel", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_null(r.resp);
    /* admin_listen serves the Admin service only */
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Coordinator/Heartbeat", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNIMPLEMENTED);
    assert_int_equal(ctl_client_sleep(L.cli, 20), 0);
    ctl_client_free(L.cli);
    L.cli = NULL;
    /* ... and the agents' listener still answers an admin (queued with them) */
    ctl_cfg(&c, "admin/ops", port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    call_ok("Status", req, len, &r);
    ctl_result_clear(&r);
    ctl_client_free(L.cli);
    L.cli = NULL;
    /* an agent certificate is dropped by admin_listen once its handshake ends */
    ctl_cfg(&c, "agent/a1", admin_port);
    if (ctl_client_open(&L.loop, &c, &L.cli, &r) == 0 && L.cli != NULL) {
        assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
        assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/Status", req, len, &r), 0);
        sfl_msg_buf_free(req);
        ctl_client_free(L.cli);
        L.cli = NULL;
    }
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNAVAILABLE);

    /* an agent certificate may not call Admin */
    ctl_cfg(&c, "agent/a1", port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/Status", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(r.message, "admin"));
    /* an interrupted client calls nothing more */
    ctl_client_interrupt(L.cli);
    assert_int_equal(ctl_client_sleep(L.cli, 10), -ECANCELED);
    ctl_client_free(L.cli);
    L.cli = NULL;

    L.stopped = 0;
    coord_shutdown(L.co, 0, on_stopped, NULL);
    while (!L.stopped)
        uv_run(&L.loop, UV_RUN_ONCE);
    coord_free(L.co);

    /* nobody listens any more: UNAVAILABLE, no client */
    ctl_cfg(&c, "admin/ops", admin_port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_null(L.cli);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNAVAILABLE);
    assert_non_null(strstr(r.message, "refused"));
    /* unreadable TLS files are a local failure */
    snprintf(c.ca, sizeof(c.ca), "%s/none.crt", dir);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), SFL_EIO);
    snprintf(c.coordinator, sizeof(c.coordinator), "nohostport");
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), SFL_EINVAL);

    uv_close((uv_handle_t *)&L.watchdog, NULL);
    uv_run(&L.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&L.loop), 0);
}

static int group_setup(void **state)
{
    (void)state;
    if (test_tmpdir(dir, sizeof(dir), "sfl-ctl-") < 0)
        return -1;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_ctl_client: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    test_sh("sh %s init %s/pki >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/pki coord >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/pki a1 >/dev/null", PKI, dir);
    test_sh("sh %s admin %s/pki ops >/dev/null", PKI, dir);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    test_rmtree(dir, "sfl-ctl-");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_client),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

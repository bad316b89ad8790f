/* The gRPC channels: a client sfl_grpcconn over TLS 1.3 (certificates by
 * deploy/pki/sfl-pki in a temporary directory, as in test_tls.c) against a
 * server channel (sfl_grpcconn_accept) on an in-test listener on the same
 * loop; every run is bounded by a watchdog and callbacks are counted. */
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

#include "failalloc.h"
#include "testutil.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/net/transport.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */
#define PKI "deploy/pki/sfl-pki"

static char dir[64]; /* temporary PKI root */

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int timed_out;
    /* server */
    sfl_tls_t *stls;
    sfl_listener_t *l;
    int port;
    sfl_conn_t *sc;
    sfl_grpcconn_t *sg;    /* the server channel over sc */
    uint64_t srv_sent;     /* bytes it wrote */
    int srv_freed;         /* its on_close ran */
    sfl_grpc_call_t *held; /* a /t.T/Hang call, never answered */
    int srv_close, cancels;
    /* client */
    sfl_tls_t *ctls;
    sfl_grpcconn_t *g;
    int opens, closes, close_status, closed_before_done;
    char detail[256];
    sfl_peer_t peer;
    int done, status;
    char resp[64];
} fx_t;

static fx_t F;

static int group_setup(void **state)
{
    (void)state;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_grpcconn: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    snprintf(dir, sizeof(dir), "/tmp/sfl-grpcconn-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    test_sh("sh %s init %s/ca >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/ca coord >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca a1 >/dev/null", PKI, dir);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (dir[0] && strncmp(dir, "/tmp/sfl-grpcconn-", 18) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = 1;
    uv_stop(&F.loop);
}

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

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&F.watchdog);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (F.sc != NULL)
        sfl_conn_close(F.sc);
    sfl_listener_close(F.l);
    sfl_tls_free(F.stls);
    sfl_tls_free(F.ctls);
    while (uv_loop_alive(&F.loop) && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    return 0;
}

/* ---- the server: one session, written out after every feed -------------- */

static void srv_cancel(sfl_grpc_call_t *call, void *ud)
{
    (void)ud;
    F.cancels++;
    F.held = NULL;
    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
}

/* Answers "echo:" + the request. */
static void h_echo(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    uint8_t out[64];

    (void)ud;
    assert_true(len + 5 <= sizeof(out));
    memcpy(out, "echo:", 5);
    memcpy(out + 5, req, len);
    assert_int_equal(sfl_grpc_reply(call, out, len + 5), 0);
}

static void h_hang(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    (void)ud;
    F.held = call;
    sfl_grpc_call_on_cancel(call, srv_cancel, NULL);
}

static const sfl_grpc_method_t methods[] = {
    {"/t.T/Echo", SFL_GRPC_KIND_UNARY, h_echo, 0, NULL, 0},
    {"/t.T/Hang", SFL_GRPC_KIND_UNARY, h_hang, 0, NULL, 0},
};

static void srv_freed(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    (void)g;
    (void)status;
    (void)detail;
    (void)ud;
    F.srv_freed++;
}

static void srv_on_connect(sfl_conn_t *c, int status)
{
    static const sfl_grpcconn_cbs_t cbs = {NULL, srv_freed};

    assert_int_equal(status, 0);
    assert_null(F.sc);
    F.sc = c;
    assert_int_equal(sfl_grpcconn_accept(&F.loop, c, NULL, methods, 2, NULL, &cbs, NULL, &F.sg),
                     0);
    sfl_grpcconn_count_sent(F.sg, &F.srv_sent);
    sfl_grpcconn_pump(F.sg);
}

static void srv_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    (void)c;
    assert_int_equal(sfl_grpcconn_feed(F.sg, buf, len), 0);
}

static void srv_on_drain(sfl_conn_t *c)
{
    (void)c;
    sfl_grpcconn_pump(F.sg);
}

static void srv_on_close(sfl_conn_t *c, int status)
{
    (void)c;
    F.sc = NULL;
    F.srv_close++;
    sfl_grpcconn_closed(F.sg, status); /* cancels a held call */
    F.sg = NULL;
}

static const sfl_conn_cbs_t srv_cbs = {srv_on_connect, srv_on_data, srv_on_drain,
                                       srv_on_close};

static void listen_tls(void)
{
    char cert[128], key[128], ca[128];
    sfl_tls_config_t cfg = {
        .cert_file = cert,
        .key_file = key,
        .ca_file = ca,
        .require_client_cert = 1,
        .alpn = "h2",
        .alpn_required = 1,
    };
    sfl_conn_opts_t o = {0};
    struct sockaddr_in a;

    snprintf(cert, sizeof(cert), "%s/ca/coordinator/coord.crt", dir);
    snprintf(key, sizeof(key), "%s/ca/coordinator/coord.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", dir);
    assert_int_equal(sfl_tls_new(&cfg, 1, &F.stls), 0);
    o.tls = F.stls;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &a), 0);
    assert_int_equal(
        sfl_listener_new(&F.loop, (struct sockaddr *)&a, &o, &srv_cbs, NULL, NULL, &F.l), 0);
    F.port = sfl_listener_port(F.l);
    assert_true(F.port > 0);
}

/* ---- the client ------------------------------------------------------------ */

static void cli_open(sfl_grpcconn_t *g, void *ud)
{
    assert_ptr_equal(ud, &F);
    assert_ptr_equal(g, F.g);
    F.opens++;
    assert_non_null(sfl_grpcconn_conn(g));
    assert_int_equal(sfl_conn_peer(sfl_grpcconn_conn(g), &F.peer), 0);
}

static void cli_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    assert_ptr_equal(ud, &F);
    assert_ptr_equal(g, F.g);
    assert_null(sfl_grpcconn_conn(g));
    assert_non_null(sfl_grpcconn_session(g));
    F.closes++;
    F.close_status = status;
    F.closed_before_done = !F.done;
    snprintf(F.detail, sizeof(F.detail), "%s", detail);
    F.g = NULL;
}

static const sfl_grpcconn_cbs_t cli_cbs = {cli_open, cli_close};

static void on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                     size_t len, void *ud)
{
    (void)call;
    (void)message;
    assert_ptr_equal(ud, &F);
    F.done = 1;
    F.status = status;
    assert_true(len < sizeof(F.resp));
    memcpy(F.resp, resp, len);
    F.resp[len] = '\0';
}

/* A channel to port with the agent certificate (its TLS context made once). */
static int connect_to(int port)
{
    char cert[128], key[128], ca[128], auth[64];
    sfl_tls_config_t tc = {
        .cert_file = cert,
        .key_file = key,
        .ca_file = ca,
        .verify_host = "localhost",
        .alpn = "h2",
        .alpn_required = 1,
    };
    sfl_conn_opts_t o = {0};
    struct sockaddr_in a;

    if (F.ctls == NULL) {
        snprintf(cert, sizeof(cert), "%s/ca/agent/a1.crt", dir);
        snprintf(key, sizeof(key), "%s/ca/agent/a1.key", dir);
        snprintf(ca, sizeof(ca), "%s/ca/ca.crt", dir);
        assert_int_equal(sfl_tls_new(&tc, 0, &F.ctls), 0);
    }
    o.tls = F.ctls;
    snprintf(auth, sizeof(auth), "localhost:%d", port);
    assert_int_equal(uv_ip4_addr("127.0.0.1", port, &a), 0);
    return sfl_grpcconn_connect(&F.loop, (struct sockaddr *)&a, &o, NULL, auth, &cli_cbs, &F,
                                &F.g);
}

/* A port nobody listens on. */
static int dead_port(void)
{
    sfl_listener_t *l;
    struct sockaddr_in a;
    int port;

    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &a), 0);
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, NULL, &srv_cbs, NULL, NULL,
                                      &l),
                     0);
    port = sfl_listener_port(l);
    sfl_listener_close(l);
    return port;
}

/* ---- tests -------------------------------------------------------------------- */

/* A call started before the connection opened goes out once it does. */
static void test_grpcconn_unary(void **state)
{
    (void)state;
    listen_tls();
    assert_int_equal(connect_to(F.port), 0);
    assert_int_equal(F.opens, 0); /* no callback inside connect */
    assert_int_equal(sfl_grpc_call_unary(sfl_grpcconn_session(F.g), "/t.T/Echo",
                                         (const uint8_t *)"hi", 2, 2000, on_unary, &F, NULL),
                     0);
    run_until(&F.done);
    assert_int_equal(F.status, SFL_GRPC_STATUS_OK);
    assert_string_equal(F.resp, "echo:hi");
    assert_int_equal(F.opens, 1);
    assert_string_equal(F.peer.cn, "coord");
    assert_int_equal(F.peer.role, SFL_ROLE_COORDINATOR);
    /* a second call on the same channel */
    F.done = 0;
    assert_int_equal(sfl_grpc_call_unary(sfl_grpcconn_session(F.g), "/t.T/Echo",
                                         (const uint8_t *)"again", 5, 2000, on_unary, &F, NULL),
                     0);
    run_until(&F.done);
    assert_string_equal(F.resp, "echo:again");

    sfl_grpcconn_close(F.g);
    sfl_grpcconn_close(F.g); /* idempotent */
    run_until(&F.closes);
    assert_int_equal(F.closes, 1);
    assert_int_equal(F.close_status, 0);
    assert_string_equal(F.detail, "closed");
    run_until(&F.srv_close);
}

/* Closing with a call open: GOAWAY, the connection closes, the call ends
 * with UNAVAILABLE after on_close; the server saw the connection go. */
static void test_grpcconn_close_with_open_call(void **state)
{
    (void)state;
    listen_tls();
    assert_int_equal(connect_to(F.port), 0);
    assert_int_equal(sfl_grpc_call_unary(sfl_grpcconn_session(F.g), "/t.T/Hang",
                                         (const uint8_t *)"x", 1, 0, on_unary, &F, NULL),
                     0);
    while (F.held == NULL) {
        if (F.timed_out)
            fail_msg("watchdog: the call never reached the server");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    sfl_grpcconn_close(F.g);
    run_until(&F.done);
    assert_int_equal(F.closes, 1);
    assert_true(F.closed_before_done);
    assert_int_equal(F.status, SFL_GRPC_STATUS_UNAVAILABLE);
    run_until(&F.srv_close);
    assert_int_equal(F.cancels, 1);
}

/* The server goes away: on_close carries the transport's verdict. */
static void test_grpcconn_peer_closes(void **state)
{
    (void)state;
    listen_tls();
    assert_int_equal(connect_to(F.port), 0);
    while (F.sc == NULL || F.opens == 0) {
        if (F.timed_out)
            fail_msg("watchdog while connecting");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    sfl_grpcconn_close(F.sg); /* GOAWAY: the client's session is done */
    run_until(&F.closes);
    assert_int_equal(F.opens, 1);
    assert_null(F.g);
    run_until(&F.srv_freed);
}

/* A server channel's close is graceful: GOAWAY, no new calls, the held one
 * runs to its end (answered after the close), then the connection closes. */
static void test_grpcconn_server_close_graceful(void **state)
{
    (void)state;
    listen_tls();
    assert_int_equal(connect_to(F.port), 0);
    assert_int_equal(sfl_grpc_call_unary(sfl_grpcconn_session(F.g), "/t.T/Hang",
                                         (const uint8_t *)"x", 1, 0, on_unary, &F, NULL),
                     0);
    while (F.held == NULL) {
        if (F.timed_out)
            fail_msg("watchdog: the call never reached the server");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    sfl_grpcconn_close(F.sg);
    for (int i = 0; i < 20; i++) /* the GOAWAY goes out; the call stays */
        uv_run(&F.loop, UV_RUN_NOWAIT);
    assert_int_equal(F.done, 0);
    assert_int_equal(F.srv_close, 0);
    assert_int_equal(sfl_grpc_reply(F.held, (const uint8_t *)"late", 4), 0);
    F.held = NULL;
    sfl_grpcconn_pump(F.sg);
    run_until(&F.done);
    assert_int_equal(F.status, SFL_GRPC_STATUS_OK);
    assert_string_equal(F.resp, "late");
    run_until(&F.srv_freed);
    assert_int_equal(F.srv_close, 1);
    assert_int_equal(F.cancels, 0);
    assert_true(F.srv_sent > 0);
}

static void test_grpcconn_connect_refused(void **state)
{
    (void)state;
    assert_int_equal(connect_to(dead_port()), 0);
    assert_int_equal(sfl_grpc_call_unary(sfl_grpcconn_session(F.g), "/t.T/Echo",
                                         (const uint8_t *)"x", 1, 0, on_unary, &F, NULL),
                     0);
    run_until(&F.done);
    assert_int_equal(F.opens, 0);
    assert_int_equal(F.closes, 1);
    assert_int_equal(F.close_status, -ECONNREFUSED);
    assert_true(F.detail[0] != '\0');
    assert_true(F.closed_before_done);
    assert_int_equal(F.status, SFL_GRPC_STATUS_UNAVAILABLE);
}

/* Closing before the connection opened: no on_open, one on_close. */
static void test_grpcconn_close_while_connecting(void **state)
{
    (void)state;
    listen_tls();
    assert_int_equal(connect_to(F.port), 0);
    sfl_grpcconn_close(F.g);
    run_until(&F.closes);
    assert_int_equal(F.opens, 0);
    assert_int_equal(F.closes, 1);
}

static void test_grpcconn_bad_options(void **state)
{
    sfl_grpc_config_t bad = {.max_frame = 1}; /* below 16384 */
    struct sockaddr_in a;

    (void)state;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 1, &a), 0);
    assert_int_equal(sfl_grpcconn_connect(&F.loop, (struct sockaddr *)&a, NULL, &bad, "h:1",
                                          &cli_cbs, &F, &F.g),
                     SFL_EINVAL);
    assert_null(F.g);
    assert_int_equal(F.closes, 0);
}

static void test_grpcconn_failalloc(void **state)
{
    int port;

    (void)state;
    port = dead_port();
    assert_int_equal(connect_to(port), 0); /* makes the TLS context */
    run_until(&F.closes);
    F.closes = 0;
    FAILALLOC_EACH(connect_to(port), {
        if (F.g != NULL)
            run_until(&F.closes);
        assert_null(F.g);
        F.closes = 0;
    });
}

static void test_grpcconn_split_hostport(void **state)
{
    static const struct {
        const char *in, *host, *port; /* host NULL: SFL_EINVAL */
    } cases[] = {
        {"localhost:7443", "localhost", "7443"},
        {"10.0.0.1:1", "10.0.0.1", "1"},
        {"[::1]:443", "::1", "443"},
        {"[fe80::1%eth0]:80", "fe80::1%eth0", "80"},
        {"a:b:80", "a:b", "80"}, /* the last colon splits */
        {"host", NULL, NULL},
        {"host:", NULL, NULL},
        {":80", NULL, NULL},
        {"host:8x", NULL, NULL},
        {"host:-1", NULL, NULL},
        {"host: 80", NULL, NULL},
        {"[::1]", NULL, NULL},
        {"[::1:80", NULL, NULL},
        {"[::1]80", NULL, NULL},
        {"[]:80", NULL, NULL},
        {"[::1]:", NULL, NULL},
        {"", NULL, NULL},
        {"h:123456", NULL, NULL}, /* port longer than its buffer */
        {"hostname-too-long:1", NULL, NULL},
    };
    char host[16], port[6];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = sfl_grpcconn_split_hostport(cases[i].in, host, sizeof(host), port,
                                             sizeof(port));

        if (cases[i].host == NULL) {
            if (rc != SFL_EINVAL)
                fail_msg("'%s': rc %d, want SFL_EINVAL", cases[i].in, rc);
            assert_non_null(strstr(sfl_last_error(), cases[i].in));
            continue;
        }
        if (rc != 0)
            fail_msg("'%s': rc %d (%s)", cases[i].in, rc, sfl_last_error());
        assert_string_equal(host, cases[i].host);
        assert_string_equal(port, cases[i].port);
    }
    /* exactly fitting: 15 + NUL, 5 + NUL */
    assert_int_equal(sfl_grpcconn_split_hostport("fifteen-chars-x:65535", host, sizeof(host), port,
                                                 sizeof(port)),
                     0);
    assert_string_equal(host, "fifteen-chars-x");
    assert_string_equal(port, "65535");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_grpcconn_unary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_close_with_open_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_peer_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_server_close_graceful, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_connect_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_close_while_connecting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpcconn_failalloc, setup, teardown),
        cmocka_unit_test(test_grpcconn_split_hostport),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

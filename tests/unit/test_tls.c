/* TLS 1.3 transport: certificates are made at start by deploy/pki/sfl-pki
 * (tests run from the repository root) into a temporary directory; server
 * and clients share one uv loop on 127.0.0.1, every run is bounded by a
 * watchdog, callbacks are counted. */
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

#include <netinet/in.h>
#include <sys/socket.h>

#include "failalloc.h"
#include "testutil.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "net/transport_int.h"
#include "sfl/net/tlsticket.h"
#include "sfl/net/transport.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */
#define PKI "deploy/pki/sfl-pki"

static char dir[64];           /* temporary PKI root */
static char agent_fp[65];      /* fingerprint of ca/agent/agent-7.crt per sfl-pki */

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int timed_out;
    sfl_tls_t *stls;
    sfl_listener_t *l;
    int port;
    sfl_conn_opts_t sopts;
    /* server side */
    sfl_conn_t *srv;
    int srv_connect, srv_data, srv_close, srv_close_status, rejects, reject_status;
    char reject_detail[256];
    sfl_peer_t srv_peer;
    size_t srv_bytes;
    int close_in_data;
    int cli_abort; /* the client aborts (no close_notify) once echoed */
    /* keying material each end exported in on_connect (rc, bytes) */
    int srv_exp_rc, cli_exp_rc, srv_resumed, cli_resumed;
    uint8_t srv_exp[32], cli_exp[32];
    /* the client's certificate as the server end gives it (sfl_conn_peer_der) */
    int srv_der_rc;
    uint8_t srv_der[SFL_TLS_CERT_DER_MAX];
    size_t srv_der_len;
    /* client side */
    sfl_conn_t *cli;
    int cli_connect, cli_connect_status, cli_close, cli_close_status;
    char cli_detail[256];
    sfl_peer_t cli_peer;
    size_t cli_bytes;
    uint8_t *expect;
    size_t expect_len, send_len;
    int done;
} fx_t;

static fx_t F;

static const char *path(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", dir, rel);
    return buf;
}

/* One CA with a coordinator, an agent and an admin, and another CA with an
 * agent of the same name. */
static int group_setup(void **state)
{
    FILE *p;
    char cmd[256];

    (void)state;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_tls: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    snprintf(dir, sizeof(dir), "/tmp/sfl-tls-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    test_sh("sh %s init %s/ca >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/ca coord >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/ca coord2 >/dev/null", PKI, dir);
    test_sh("sh %s --key-type ed25519 coordinator %s/ca coord-ed >/dev/null", PKI, dir);
    test_sh("sh %s --key-type ed25519 agent %s/ca agent-ed >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca agent-7 >/dev/null", PKI, dir);
    test_sh("sh %s admin %s/ca alice >/dev/null", PKI, dir);
    test_sh("sh %s init %s/other >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/other agent-7 >/dev/null", PKI, dir);
    /* A certificate of the federation CA without extendedKeyUsage (not made
     * by sfl-pki, which always writes clientAuth). */
    test_sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "
            "%s/ca/agent/noeku.key 2>/dev/null && openssl req -new -key %s/ca/agent/noeku.key "
            "-subj /O=sfl/OU=agent/CN=noeku -out %s/noeku.csr 2>/dev/null && openssl x509 -req "
            "-in %s/noeku.csr -CA %s/ca/ca.crt -CAkey %s/ca/ca.key -CAcreateserial -days 5 "
            "-out %s/ca/agent/noeku.crt 2>/dev/null", dir, dir, dir, dir, dir, dir, dir);
    snprintf(cmd, sizeof(cmd), "sh %s fingerprint %s/ca/agent/agent-7.crt", PKI, dir);
    p = popen(cmd, "r");
    if (!p || !fgets(agent_fp, sizeof(agent_fp), p)) {
        if (p)
            pclose(p);
        return -1;
    }
    return pclose(p) == 0 && strlen(agent_fp) == 64 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (dir[0] && strncmp(dir, "/tmp/sfl-tls-", 13) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = 1;
    uv_stop(&F.loop);
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

static int teardown(void **state)
{
    (void)state;
    sfl_listener_close(F.l);
    sfl_tls_free(F.stls);
    while (uv_loop_alive(&F.loop) && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    free(F.expect);
    return 0;
}

/* ---- callbacks -------------------------------------------------------- */

static void srv_on_connect(sfl_conn_t *c, int status)
{
    assert_int_equal(status, 0);
    F.srv = c;
    F.srv_connect++;
    assert_int_equal(sfl_conn_peer(c, &F.srv_peer), 0);
    F.srv_exp_rc = sfl_conn_export_keying_material(c, "EXPORTER-sfl-test", F.srv_exp, 32);
    F.srv_resumed = sfl_conn_resumed(c);
    F.srv_der_rc = sfl_conn_peer_der(c, F.srv_der, sizeof(F.srv_der), &F.srv_der_len);
}

static void srv_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    F.srv_data++;
    F.srv_bytes += len;
    assert_int_equal(sfl_conn_write(c, buf, len), 0); /* echo */
    if (F.close_in_data) {
        sfl_conn_close(c);
        assert_int_equal(sfl_conn_write(c, buf, len), SFL_EINVAL);
        assert_int_equal(F.srv_close, 0);
    }
}

static void srv_on_close(sfl_conn_t *c, int status)
{
    assert_ptr_equal(c, F.srv);
    F.srv_close++;
    F.srv_close_status = status;
    F.srv = NULL;
}

static void on_reject(sfl_listener_t *l, int status, const char *detail)
{
    (void)l;
    F.rejects++;
    F.reject_status = status;
    snprintf(F.reject_detail, sizeof(F.reject_detail), "%s", detail);
}

static const sfl_conn_cbs_t srv_cbs = {srv_on_connect, srv_on_data, NULL, srv_on_close};

static void cli_on_connect(sfl_conn_t *c, int status)
{
    F.cli_connect++;
    F.cli_connect_status = status;
    if (status) {
        snprintf(F.cli_detail, sizeof(F.cli_detail), "%s", sfl_last_error());
        return;
    }
    (void)sfl_conn_peer(c, &F.cli_peer); /* ENOTFOUND for the plain clients */
    F.cli_exp_rc = sfl_conn_export_keying_material(c, "EXPORTER-sfl-test", F.cli_exp, 32);
    F.cli_resumed = sfl_conn_resumed(c);
    if (F.send_len)
        assert_int_equal(sfl_conn_write(c, F.expect, F.send_len), 0);
}

static void cli_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    if (F.expect) {
        assert_true(F.cli_bytes + len <= F.expect_len);
        assert_memory_equal(buf, F.expect + F.cli_bytes, len);
    }
    F.cli_bytes += len;
    if (F.cli_bytes == F.expect_len && F.cli_abort)
        sfl_conn_abort(c);
    else if (F.cli_bytes == F.expect_len)
        sfl_conn_close(c);
}

static void cli_on_close(sfl_conn_t *c, int status)
{
    assert_ptr_equal(c, F.cli);
    F.cli_close++;
    F.cli_close_status = status;
    if (status && !F.cli_detail[0])
        snprintf(F.cli_detail, sizeof(F.cli_detail), "%s", sfl_last_error());
    F.cli = NULL;
    F.done = 1;
}

static const sfl_conn_cbs_t cli_cbs = {cli_on_connect, cli_on_data, NULL, cli_on_close};

/* ---- helpers ------------------------------------------------------------ */

static void loopback(struct sockaddr_in *a, int port)
{
    assert_int_equal(uv_ip4_addr("127.0.0.1", port, a), 0);
}

/* The coordinator `who` (its certificate ca/coordinator/WHO.crt): mutual
 * TLS, client certificate and ALPN h2 required. */
static void listen_as(const char *who)
{
    char cert[128], key[128], ca[128], rel[64];
    sfl_tls_config_t cfg = {
        .cert_file = (snprintf(rel, sizeof(rel), "ca/coordinator/%s.crt", who),
                      path(cert, sizeof(cert), rel)),
        .key_file = (snprintf(rel, sizeof(rel), "ca/coordinator/%s.key", who),
                     path(key, sizeof(key), rel)),
        .ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
        .require_client_cert = 1,
        .alpn = "h2",
        .alpn_required = 1,
    };
    struct sockaddr_in a;

    assert_int_equal(sfl_tls_new(&cfg, 1, &F.stls), 0);
    F.sopts.tls = F.stls;
    loopback(&a, 0);
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, &F.sopts, &srv_cbs,
                                      on_reject, &F, &F.l),
                     0);
    F.port = sfl_listener_port(F.l);
}

static void listen_tls(void)
{
    listen_as("coord");
}

/* A client with certificate `who` ("ca/agent/agent-7" or NULL for none)
 * expecting server name `host`, offering `alpn`. The context is released at
 * once: the connection holds its own reference. */
static void connect_tls(const char *who, const char *host, const char *alpn)
{
    char cert[128], key[128], ca[128], rel[64];
    sfl_tls_config_t cfg = {
        .ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
        .verify_host = host,
        .alpn = alpn,
        .alpn_required = alpn != NULL,
    };
    sfl_conn_opts_t o = {0};
    struct sockaddr_in a;

    if (who) {
        snprintf(rel, sizeof(rel), "%s.crt", who);
        cfg.cert_file = path(cert, sizeof(cert), rel);
        snprintf(rel, sizeof(rel), "%s.key", who);
        cfg.key_file = path(key, sizeof(key), rel);
    }
    assert_int_equal(sfl_tls_new(&cfg, 0, &o.tls), 0);
    loopback(&a, F.port);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &cli_cbs, &F, &F.cli),
                     0);
    sfl_tls_free(o.tls);
}

/* A client of context ctls (kept by the caller: it holds the session). */
static void connect_ctx(sfl_tls_t *ctls)
{
    sfl_conn_opts_t o = {.tls = ctls};
    struct sockaddr_in a;

    loopback(&a, F.port);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &cli_cbs, &F, &F.cli),
                     0);
}

static sfl_tls_t *agent_ctx_as(const char *who)
{
    char cert[128], key[128], ca[128], rel[64];
    sfl_tls_config_t cfg = {
        .cert_file = (snprintf(rel, sizeof(rel), "ca/agent/%s.crt", who),
                      path(cert, sizeof(cert), rel)),
        .key_file = (snprintf(rel, sizeof(rel), "ca/agent/%s.key", who),
                     path(key, sizeof(key), rel)),
        .ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
        .verify_host = "localhost",
        .alpn = "h2",
        .alpn_required = 1,
    };
    sfl_tls_t *t = NULL;

    assert_int_equal(sfl_tls_new(&cfg, 0, &t), 0);
    return t;
}

static sfl_tls_t *agent_ctx(void)
{
    return agent_ctx_as("agent-7");
}

static void connect_plain(void)
{
    struct sockaddr_in a;

    loopback(&a, F.port);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, NULL, &cli_cbs, &F, &F.cli),
                     0);
}

static void expect_echo(size_t n)
{
    free(F.expect);
    F.expect = malloc(n);
    assert_non_null(F.expect);
    for (size_t i = 0; i < n; i++)
        F.expect[i] = (uint8_t)(i * 131 + (i >> 9));
    F.expect_len = F.send_len = n;
}

static void reset_client(void)
{
    F.cli = NULL;
    F.done = 0;
    F.cli_connect = F.cli_close = 0;
    F.cli_connect_status = F.cli_close_status = 0;
    F.cli_bytes = 0;
    F.cli_detail[0] = '\0';
}

/* A good agent after a refused one: the server is still serving. */
static void good_agent_echoes(void)
{
    int served = F.srv_close + 1;

    reset_client();
    expect_echo(5000);
    connect_tls("ca/agent/agent-7", "localhost", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_close_status, 0);
    assert_int_equal(F.cli_bytes, 5000);
    while (F.srv_close < served && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    assert_int_equal(F.srv_close_status, 0);
}

/* One echo over a connection of ctls; the server has closed too on
 * return. The echo makes the client read the server's ticket. */
static void echo_with(sfl_tls_t *ctls)
{
    int served = F.srv_close + 1;

    reset_client();
    F.srv_resumed = F.cli_resumed = -1;
    expect_echo(100);
    connect_ctx(ctls);
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_close_status, 0);
    assert_int_equal(F.cli_bytes, 100);
    while (F.srv_close < served && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    assert_int_equal(F.srv_close_status, 0);
    assert_int_equal(F.srv_resumed, F.cli_resumed);
}

/* A coordinator `who` with ticket keys; the previous one (if any) is gone,
 * as after a restart. */
static void restart_as(const char *who, const sfl_ticket_keys_t *keys)
{
    if (F.l != NULL) {
        sfl_listener_close(F.l);
        sfl_tls_free(F.stls);
        F.l = NULL;
        F.stls = NULL;
        F.sopts.tls = NULL;
    }
    listen_as(who);
    if (keys != NULL)
        assert_int_equal(sfl_tls_set_ticket_keys(F.stls, keys, 3600), 0);
}

static void fresh_keys(sfl_ticket_keys_t *k)
{
    memset(k, 0, sizeof(*k));
    assert_int_equal(sfl_ticket_keys_rotate(k, 1000, 3600, 3600), 1);
}

/* ---- tests ---------------------------------------------------------------- */

/* Resumption: the first connection is a full handshake and brings a
 * ticket; the next ones resume (both ends say so), show the same peer
 * (what revocation and binding look up), and still export different keying
 * material per connection (Join's proof stays bound to one connection). A
 * restarted server with the same keys resumes too; one with other keys, or
 * none, does a full handshake. */
static void test_tls_resumption(void **state)
{
    sfl_ticket_keys_t keys, other;
    sfl_tls_t *ctls = agent_ctx();
    uint8_t prev[32];

    (void)state;
    fresh_keys(&keys);
    fresh_keys(&other);
    restart_as("coord", &keys);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0);
    memcpy(prev, F.srv_exp, 32);
    for (int i = 0; i < 2; i++) {
        echo_with(ctls);
        assert_int_equal(F.srv_resumed, 1);
        assert_int_equal(F.srv_exp_rc, 0);
        assert_int_equal(F.cli_exp_rc, 0);
        assert_memory_equal(F.cli_exp, F.srv_exp, 32);
        assert_memory_not_equal(prev, F.srv_exp, 32);
        memcpy(prev, F.srv_exp, 32);
        assert_string_equal(F.srv_peer.fingerprint, agent_fp);
        assert_string_equal(F.srv_peer.cn, "agent-7");
        assert_int_equal(F.srv_peer.role, SFL_ROLE_AGENT);
        assert_string_equal(F.cli_peer.cn, "coord");
    }
    /* a connection that ended abruptly (no close_notify, as when the
     * coordinator is killed) leaves the session resumable */
    reset_client();
    F.cli_abort = 1;
    expect_echo(100);
    connect_ctx(ctls);
    run_until(&F.done);
    assert_int_equal(F.cli_bytes, 100);
    while (F.srv != NULL && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    F.cli_abort = 0;
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    /* restart with the same keys: resumed */
    restart_as("coord", &keys);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    assert_string_equal(F.srv_peer.fingerprint, agent_fp);
    /* other keys: a full handshake, then resumption under them */
    restart_as("coord", &other);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    /* a rotated set still opens tickets of its older key */
    assert_int_equal(sfl_ticket_keys_rotate(&other, 1000 + 3600, 3600, 3600), 1);
    assert_int_equal(other.n, 2);
    restart_as("coord", &other);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    /* no keys: no tickets, no resumption */
    restart_as("coord", NULL);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0);
    sfl_tls_free(ctls);
    sfl_ticket_keys_wipe(&keys);
    sfl_ticket_keys_wipe(&other);
}

/* Never across identities: another coordinator certificate of the same CA
 * with the same ticket keys does a full handshake. */
static void test_tls_resume_other_identity(void **state)
{
    sfl_ticket_keys_t keys;
    sfl_tls_t *ctls = agent_ctx();

    (void)state;
    fresh_keys(&keys);
    restart_as("coord", &keys);
    echo_with(ctls);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    restart_as("coord2", &keys);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0);
    assert_string_equal(F.cli_peer.cn, "coord2");
    sfl_tls_free(ctls);
    sfl_ticket_keys_wipe(&keys);
}

/* Ed25519 certificates (sfl-pki --key-type ed25519) under the P-256 CA,
 * both ways: an Ed25519 agent with the P-256 coordinator, then with an
 * Ed25519 coordinator; full handshake and resumption. */
static void test_tls_ed25519_both_ways(void **state)
{
    sfl_ticket_keys_t keys;
    sfl_tls_t *ctls = agent_ctx_as("agent-ed");

    (void)state;
    fresh_keys(&keys);
    restart_as("coord", &keys);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0);
    assert_string_equal(F.srv_peer.cn, "agent-ed");
    assert_int_equal(F.srv_peer.role, SFL_ROLE_AGENT);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    restart_as("coord-ed", &keys);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 0); /* another identity */
    assert_string_equal(F.cli_peer.cn, "coord-ed");
    assert_int_equal(F.cli_peer.role, SFL_ROLE_COORDINATOR);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    sfl_tls_free(ctls);
    /* a P-256 agent with the Ed25519 coordinator */
    ctls = agent_ctx();
    echo_with(ctls);
    assert_string_equal(F.srv_peer.fingerprint, agent_fp);
    sfl_tls_free(ctls);
    sfl_ticket_keys_wipe(&keys);
}

/* A certificate that expired after its ticket was issued is not resumed:
 * the full handshake that follows refuses it. */
static void test_tls_resume_expired_refused(void **state)
{
    sfl_ticket_keys_t keys;
    sfl_tls_t *ctls = agent_ctx();

    (void)state;
    fresh_keys(&keys);
    restart_as("coord", &keys);
    echo_with(ctls);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    /* the server's clock past the agent certificate (825 days), not the CA */
    sfl__tls_set_check_time(F.stls, time(NULL) + 900 * 86400L);
    reset_client();
    F.srv_resumed = -1;
    expect_echo(100);
    connect_ctx(ctls);
    run_until(&F.done);
    assert_int_not_equal(F.cli_close_status, 0);
    assert_int_equal(F.srv_resumed, -1); /* the server never opened it */
    while (F.rejects == 0 && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    assert_non_null(strstr(F.reject_detail, "expired"));
    /* the clock back: a full handshake, then resumption again */
    sfl__tls_set_check_time(F.stls, 0);
    echo_with(ctls);
    echo_with(ctls);
    assert_int_equal(F.srv_resumed, 1);
    sfl_tls_free(ctls);
    sfl_ticket_keys_wipe(&keys);
}


/* Mutual TLS 1.3 with ALPN h2: both sides see the other's identity, 200 KB
 * echo through a server that yields every 16 KB, clean close both ways. */
static void test_tls_handshake_echo(void **state)
{
    (void)state;
    F.sopts.read_budget = 16 * 1024;
    listen_tls();
    expect_echo(200000);
    connect_tls("ca/agent/agent-7", "localhost", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect, 1);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_bytes, 200000);
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.cli_close_status, 0);
    run_until(&F.srv_close);
    assert_int_equal(F.srv_connect, 1);
    assert_int_equal(F.srv_bytes, 200000);
    assert_true(F.srv_data >= 200000 / 16384);
    assert_int_equal(F.srv_close_status, 0);
    assert_int_equal(F.rejects, 0);
    /* What each side learnt about the other. */
    assert_string_equal(F.srv_peer.cn, "agent-7");
    assert_int_equal(F.srv_peer.role, SFL_ROLE_AGENT);
    assert_string_equal(F.srv_peer.fingerprint, agent_fp);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        assert_int_equal(sscanf(agent_fp + 2 * i, "%2x", &v), 1);
        assert_int_equal(F.srv_peer.sha256[i], v);
    }
    assert_string_equal(F.cli_peer.cn, "coord");
    assert_int_equal(F.cli_peer.role, SFL_ROLE_COORDINATOR);
    assert_string_equal(sfl_role_name(F.cli_peer.role), "coordinator");
}

/* The keying-material exporter (Join's proof of possession binds to it):
 * both ends of one connection agree, another connection gets other bytes,
 * another label other bytes; a connection not open or not TLS has none. The
 * server's own certificate hash is what the client sees. */
static void test_tls_exporter_per_session(void **state)
{
    uint8_t first[32], other[32], own[32];
    int before;

    (void)state;
    listen_tls();
    for (int i = 0; i < 2; i++) {
        reset_client();
        F.srv_exp_rc = F.cli_exp_rc = 1;
        expect_echo(100);
        connect_tls("ca/agent/agent-7", "localhost", "h2");
        /* connecting: no secret yet */
        assert_int_equal(sfl_conn_export_keying_material(F.cli, "EXPORTER-sfl-test", other, 32),
                         SFL_EINVAL);
        before = F.srv_connect;
        while ((F.srv_connect == before || !F.cli_connect) && !F.timed_out)
            uv_run(&F.loop, UV_RUN_ONCE);
        assert_int_equal(F.cli_connect_status, 0);
        assert_int_equal(F.cli_exp_rc, 0);
        assert_int_equal(F.srv_exp_rc, 0);
        assert_memory_equal(F.cli_exp, F.srv_exp, 32);
        if (i == 0) {
            memcpy(first, F.cli_exp, 32);
            /* another label, other bytes; lengths are bounded */
            assert_int_equal(sfl_conn_export_keying_material(F.cli, "EXPORTER-sfl-other", other,
                                                             32),
                             0);
            assert_memory_not_equal(other, F.cli_exp, 32);
            assert_int_equal(sfl_conn_export_keying_material(F.cli, "EXPORTER-sfl-test", other,
                                                             65),
                             SFL_EINVAL);
            assert_int_equal(sfl_conn_export_keying_material(F.cli, "EXPORTER-sfl-test", other, 0),
                             SFL_EINVAL);
        } else {
            assert_memory_not_equal(first, F.cli_exp, 32);
        }
        run_until(&F.done);
        assert_int_equal(F.cli_close_status, 0);
    }
    assert_int_equal(sfl_tls_cert_sha256(F.stls, own), 0);
    assert_memory_equal(own, F.cli_peer.sha256, 32);
    /* plain TCP has no exporter */
    reset_client();
    F.cli_exp_rc = 1;
    connect_plain();
    run_until(&F.cli_connect);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_exp_rc, SFL_EINVAL);
    sfl_conn_abort(F.cli);
    run_until(&F.done);
}

/* DIR/REL (PEM) as DER, through openssl(1): into buf, its length. */
static size_t der_of(const char *rel, uint8_t *buf, size_t cap)
{
    char out[128], in[128];
    FILE *f;
    size_t n;

    test_sh("openssl x509 -in %s -outform DER -out %s", path(in, sizeof(in), rel),
            path(out, sizeof(out), "tmp.der"));
    f = fopen(out, "rb");
    assert_non_null(f);
    n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    return n;
}

/* A certificate that reached us without a handshake (what a front-end
 * relays) is verified as the handshake verifies a client's: our CA, the
 * validity dates, clientAuth; out is what sfl_conn_peer would show. The
 * server end of a connection gives its peer's certificate as DER. */
static void test_tls_verify_der(void **state)
{
    static uint8_t der[SFL_TLS_CERT_DER_MAX + 2], big[SFL_TLS_CERT_DER_MAX + 1];
    sfl_tls_t *ctls = NULL;
    sfl_peer_t p;
    size_t n;

    (void)state;
    listen_tls();
    /* the server end of a connection: the agent's certificate, as DER */
    expect_echo(100);
    F.srv_der_rc = 1;
    connect_tls("ca/agent/agent-7", "localhost", "h2");
    run_until(&F.done);
    n = der_of("ca/agent/agent-7.crt", der, sizeof(der));
    assert_int_equal(F.srv_der_rc, 0);
    assert_int_equal(F.srv_der_len, n);
    assert_memory_equal(F.srv_der, der, n);
    assert_int_equal(sfl_conn_peer_der(F.srv, F.srv_der, n - 1, &F.srv_der_len) != 0, 1);
    /* genuine */
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n, &p), 0);
    assert_string_equal(p.cn, "agent-7");
    assert_int_equal(p.role, SFL_ROLE_AGENT);
    assert_string_equal(p.fingerprint, agent_fp);
    /* an admin's verifies too (the role is the caller's to check) */
    {
        uint8_t a[SFL_TLS_CERT_DER_MAX];
        size_t an = der_of("ca/admin/alice.crt", a, sizeof(a));

        assert_int_equal(sfl_tls_verify_der(F.stls, a, an, &p), 0);
        assert_int_equal(p.role, SFL_ROLE_ADMIN);
    }
    /* expired, and not yet valid, by the context's clock */
    sfl__tls_set_check_time(F.stls, time(NULL) + 900 * 86400L);
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n, &p), SFL_ECERT);
    assert_non_null(strstr(sfl_last_error(), "certificate has expired (valid until"));
    assert_string_equal(p.cn, "");
    sfl__tls_set_check_time(F.stls, time(NULL) - 86400L);
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n, &p), SFL_ECERT);
    assert_non_null(strstr(sfl_last_error(), "not yet valid"));
    sfl__tls_set_check_time(F.stls, 0);
    /* a bytes after it, cut short, a flipped bit, garbage, oversized */
    der[n] = 0;
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n + 1, &p), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "bytes after"));
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n - 1, &p), SFL_EPARSE);
    der[n / 2] ^= 0x01;
    assert_true(sfl_tls_verify_der(F.stls, der, n, &p) < 0);
    der[n / 2] ^= 0x01;
    memset(big, 0x30, sizeof(big));
    assert_int_equal(sfl_tls_verify_der(F.stls, big, 100, &p), SFL_EPARSE);
    assert_int_equal(sfl_tls_verify_der(F.stls, big, sizeof(big), &p), SFL_ELIMIT);
    /* another CA's agent of the same name; the CA's, without clientAuth */
    {
        uint8_t o[SFL_TLS_CERT_DER_MAX];
        size_t on = der_of("other/agent/agent-7.crt", o, sizeof(o));

        assert_int_equal(sfl_tls_verify_der(F.stls, o, on, &p), SFL_ECERT);
        assert_non_null(strstr(sfl_last_error(), "unable to get local issuer certificate"));
        on = der_of("ca/agent/noeku.crt", o, sizeof(o));
        assert_int_equal(sfl_tls_verify_der(F.stls, o, on, &p), SFL_ECERT);
        assert_non_null(strstr(sfl_last_error(), "unsuitable certificate purpose"));
    }
    /* a client context verifies no client; NULL arguments */
    {
        char ca[128];
        sfl_tls_config_t cfg = {.ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
                                .verify_host = "localhost"};

        assert_int_equal(sfl_tls_new(&cfg, 0, &ctls), 0);
        assert_int_equal(sfl_tls_verify_der(ctls, der, n, &p), SFL_EINVAL);
        sfl_tls_free(ctls);
    }
    assert_int_equal(sfl_tls_verify_der(F.stls, NULL, n, &p), SFL_EINVAL);
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n, NULL), SFL_EINVAL);
    /* still the genuine one */
    assert_int_equal(sfl_tls_verify_der(F.stls, der, n, &p), 0);
}

/* A client context with certificate `who` ("ca/agent/agent-7"), for its key. */
static sfl_tls_t *client_ctx(const char *who)
{
    char cert[128], key[128], ca[128], rel[64];
    sfl_tls_config_t cfg = {
        .cert_file = (snprintf(rel, sizeof(rel), "%s.crt", who), path(cert, sizeof(cert), rel)),
        .key_file = (snprintf(rel, sizeof(rel), "%s.key", who), path(key, sizeof(key), rel)),
        .ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
        .verify_host = "localhost",
    };
    sfl_tls_t *t = NULL;

    assert_int_equal(sfl_tls_new(&cfg, 0, &t), 0);
    return t;
}

/* JoinRequest.cert_proof: the certificate's key (P-256 and Ed25519) signs
 * an identity key; only that certificate, that key verify it. */
static void test_tls_cert_binding(void **state)
{
    static const char *const who[] = {"ca/agent/agent-7", "ca/agent/agent-ed"};
    uint8_t pk[32], pk2[32], sig[SFL_TLS_SIG_MAX], der[SFL_TLS_CERT_DER_MAX],
        der2[SFL_TLS_CERT_DER_MAX];
    size_t slen, n, n2;
    char rel[64];

    (void)state;
    memset(pk, 7, sizeof(pk));
    memset(pk2, 8, sizeof(pk2));
    for (int i = 0; i < 2; i++) {
        sfl_tls_t *t = client_ctx(who[i]);

        snprintf(rel, sizeof(rel), "%s.crt", who[i]);
        n = der_of(rel, der, sizeof(der));
        snprintf(rel, sizeof(rel), "%s.crt", who[1 - i]);
        n2 = der_of(rel, der2, sizeof(der2));
        assert_int_equal(sfl_tls_cert_binding_sign(t, pk, sig, &slen), 0);
        assert_true(slen > 0 && slen <= SFL_TLS_SIG_MAX);
        assert_int_equal(sfl_tls_cert_binding_verify(der, n, pk, sig, slen), 0);
        /* another identity key, another certificate, a flipped bit */
        assert_int_equal(sfl_tls_cert_binding_verify(der, n, pk2, sig, slen), SFL_EBADSIG);
        assert_int_equal(sfl_tls_cert_binding_verify(der2, n2, pk, sig, slen), SFL_EBADSIG);
        sig[slen / 2] ^= 0x10;
        assert_int_equal(sfl_tls_cert_binding_verify(der, n, pk, sig, slen), SFL_EBADSIG);
        /* not a certificate; bad arguments */
        assert_int_equal(sfl_tls_cert_binding_verify(der, n - 1, pk, sig, slen), SFL_EPARSE);
        assert_int_equal(sfl_tls_cert_binding_verify(der, n, pk, sig, 0), SFL_EINVAL);
        assert_int_equal(sfl_tls_cert_binding_verify(der, n, pk, sig, SFL_TLS_SIG_MAX + 1),
                         SFL_EINVAL);
        sfl_tls_free(t);
    }
    /* a context without a key of its own signs nothing */
    {
        char ca[128];
        sfl_tls_config_t cfg = {.ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
                                .verify_host = "localhost"};
        sfl_tls_t *t = NULL;

        assert_int_equal(sfl_tls_new(&cfg, 0, &t), 0);
        assert_int_equal(sfl_tls_cert_binding_sign(t, pk, sig, &slen), SFL_EINVAL);
        sfl_tls_free(t);
    }
}

/* An admin certificate carries the admin role; the server is checked by its
 * IP subjectAltName. The server closing from on_data still flushes. */
static void test_tls_admin_role_and_server_close(void **state)
{
    (void)state;
    F.close_in_data = 1;
    listen_tls();
    expect_echo(1000);
    connect_tls("ca/admin/alice", "127.0.0.1", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_bytes, 1000);
    assert_int_equal(F.cli_close_status, 0);
    run_until(&F.srv_close);
    assert_int_equal(F.srv_close_status, 0);
    assert_string_equal(F.srv_peer.cn, "alice");
    assert_int_equal(F.srv_peer.role, SFL_ROLE_ADMIN);
    assert_string_not_equal(F.srv_peer.fingerprint, agent_fp);
}

/* A certificate from another CA (same CN) is refused by the server, with
 * OpenSSL's reason; the client hears the alert; the next agent is served.
 * Both sides say SFL_ECERT: retrying with that certificate cannot work. */
static void test_tls_other_ca_refused(void **state)
{
    (void)state;
    listen_tls();
    expect_echo(100);
    connect_tls("other/agent/agent-7", "localhost", "h2");
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, SFL_ECERT);
    assert_non_null(strstr(F.reject_detail, "certificate verify failed"));
    assert_non_null(strstr(F.reject_detail, "unable to get local issuer certificate"));
    run_until(&F.done);
    /* TLS 1.3: the client may have counted itself connected. */
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.cli_close_status, SFL_ECERT);
    assert_non_null(strstr(F.cli_detail, "unknown ca"));
    assert_int_equal(F.srv_connect, 0);
    assert_int_equal(F.cli_bytes, 0);
    good_agent_echoes();
    assert_int_equal(F.rejects, 1);
}

/* No client certificate: refused. */
/* A certificate of the CA that does not say clientAuth (no
 * extendedKeyUsage at all) is refused: docs/pki.md requires it. */
static void test_tls_client_cert_without_eku_refused(void **state)
{
    (void)state;
    listen_tls();
    expect_echo(100);
    connect_tls("ca/agent/noeku", "localhost", "h2");
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, SFL_ECERT);
    assert_non_null(strstr(F.reject_detail, "unsuitable certificate purpose"));
    run_until(&F.done);
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.srv_connect, 0);
    good_agent_echoes();
    assert_int_equal(F.rejects, 1);
}

static void test_tls_no_client_cert_refused(void **state)
{
    (void)state;
    listen_tls();
    connect_tls(NULL, "localhost", "h2");
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, SFL_ECERT);
    assert_non_null(strstr(F.reject_detail, "peer did not return a certificate"));
    run_until(&F.done);
    assert_int_equal(F.cli_close_status, SFL_ECERT);
    assert_non_null(strstr(F.cli_detail, "certificate required"));
    assert_int_equal(F.srv_connect, 0);
    good_agent_echoes();
}

/* The client refuses a server whose certificate does not name the host. */
static void test_tls_server_name_mismatch(void **state)
{
    (void)state;
    listen_tls();
    connect_tls("ca/agent/agent-7", "coordinator.example.org", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect, 1);
    assert_int_equal(F.cli_connect_status, SFL_ECERT);
    assert_non_null(strstr(F.cli_detail, "certificate verify failed"));
    assert_non_null(strstr(F.cli_detail, "hostname mismatch"));
    assert_int_equal(F.cli_close, 1);
    run_until(&F.rejects);
    assert_int_equal(F.srv_connect, 0);
    /* The coordinator's certificate does not carry 10.0.0.1 either. */
    reset_client();
    connect_tls("ca/agent/agent-7", "10.0.0.1", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, SFL_ECERT);
    assert_non_null(strstr(F.cli_detail, "IP address mismatch"));
}

/* ALPN h2 is required: a client offering none, or only http/1.1, is
 * refused with the no_application_protocol alert. */
static void test_tls_alpn_required(void **state)
{
    (void)state;
    listen_tls();
    connect_tls("ca/agent/agent-7", "localhost", NULL);
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, -EPROTO);
    assert_non_null(strstr(F.cli_detail, "no application protocol"));
    run_until(&F.rejects);
    assert_non_null(strstr(F.reject_detail, "client offered no ALPN"));
    reset_client();
    connect_tls("ca/agent/agent-7", "localhost", "http/1.1");
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, -EPROTO);
    F.rejects = 0;
    run_until(&F.rejects);
    assert_non_null(strstr(F.reject_detail, "no protocol we speak"));
    assert_int_equal(F.srv_connect, 0);
}

/* Bytes that are not TLS: the server drops the connection, does not
 * crash, and serves the next agent. */
static void test_tls_garbage_refused(void **state)
{
    static const char http[] = "GET / HTTP/1.1\r\nHost: coord\r\n\r\n";

    (void)state;
    listen_tls();
    connect_plain();
    run_until(&F.cli_connect);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(sfl_conn_write(F.cli, (const uint8_t *)http, sizeof(http) - 1), 0);
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, -EPROTO);
    assert_non_null(strstr(F.reject_detail, "tls handshake 127.0.0.1:"));
    run_until(&F.done);
    assert_true(F.cli_close_status == 0 || F.cli_close_status == -ECONNRESET);
    /* Random binary after a TLS record header, too. */
    reset_client();
    F.rejects = 0;
    connect_plain();
    run_until(&F.cli_connect);
    {
        uint8_t junk[4096];
        junk[0] = 0x16;
        junk[1] = 0x03;
        junk[2] = 0x01;
        junk[3] = 0x0f;
        junk[4] = 0xfb;
        for (size_t i = 5; i < sizeof(junk); i++)
            junk[i] = (uint8_t)(i * 2654435761u >> 13);
        assert_int_equal(sfl_conn_write(F.cli, junk, sizeof(junk)), 0);
    }
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, -EPROTO);
    run_until(&F.done);
    good_agent_echoes();
    assert_int_equal(F.srv_connect, 1);
}

/* Half a ClientHello and then silence: the handshake timeout closes it. */
static void test_tls_truncated_handshake_times_out(void **state)
{
    /* A record header announcing 512 bytes, and the first few of them. */
    static const uint8_t partial[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03,
                                      0x03};
    uint64_t t0;

    (void)state;
    F.sopts.handshake_timeout_ms = 150;
    listen_tls();
    connect_plain();
    run_until(&F.cli_connect);
    uv_update_time(&F.loop);
    t0 = uv_now(&F.loop);
    assert_int_equal(sfl_conn_write(F.cli, partial, sizeof(partial)), 0);
    run_until(&F.rejects);
    uv_update_time(&F.loop);
    assert_true(uv_now(&F.loop) - t0 >= 140);
    assert_int_equal(F.reject_status, -ETIMEDOUT);
    assert_non_null(strstr(F.reject_detail, "handshake not done within 150 ms"));
    run_until(&F.done);
    assert_int_equal(F.cli_close_status, 0);
    assert_int_equal(F.srv_connect, 0);
}

static void run_until_n(const int *v, int n)
{
    while (*v < n) {
        if (F.timed_out)
            fail_msg("watchdog: condition not reached within %d ms", WATCHDOG_MS);
        uv_run(&F.loop, UV_RUN_ONCE);
    }
}

/* A TCP connection from src (any 127.x.y.z: Linux routes all of 127/8 to
 * lo) that never sends a byte: it holds a handshake slot once accepted. */
static int silent_from(const char *src)
{
    struct sockaddr_in a, b;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(uv_ip4_addr(src, 0, &b), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
    loopback(&a, F.port);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* Issue 23, finding 7: every handshake slot held by silent connections
 * from two addresses, and more of theirs arriving. Before, those waited in
 * the listen backlog and the agent behind them waited until the handshake
 * timeout (here 60 s: longer than the watchdog) freed a slot. Now a source
 * past max_handshakes_per_ip is refused at once, and a new source evicts
 * the oldest handshake of the source holding the most slots: the agent is
 * served while the flood holds. */
static void test_tls_handshake_slots_shared_by_source(void **state)
{
    int fd[6];

    (void)state;
    F.sopts.max_handshakes = 4;
    F.sopts.max_handshakes_per_ip = 2;
    F.sopts.handshake_timeout_ms = 600000;
    listen_tls();
    /* 127.0.0.2: two held, the third refused (which also shows the first
     * two were taken: the listener accepts in order). */
    for (int i = 0; i < 3; i++)
        fd[i] = silent_from("127.0.0.2");
    run_until_n(&F.rejects, 1);
    assert_int_equal(F.reject_status, SFL_ELIMIT);
    assert_non_null(strstr(F.reject_detail, "2 handshakes in progress from its address"));
    for (int i = 3; i < 6; i++)
        fd[i] = silent_from("127.0.0.3");
    run_until_n(&F.rejects, 2);
    assert_non_null(strstr(F.reject_detail, "2 handshakes in progress from its address"));
    /* All four slots held; an agent from 127.0.0.1 evicts one and is served. */
    expect_echo(5000);
    connect_tls("ca/agent/agent-7", "localhost", "h2");
    run_until(&F.done);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(F.cli_close_status, 0);
    assert_int_equal(F.cli_bytes, 5000);
    assert_int_equal(F.rejects, 3);
    assert_int_equal(F.reject_status, -ECONNABORTED);
    assert_non_null(strstr(F.reject_detail, "evicted: its source holds 2 of the 4 handshake slots"));
    /* The agent's slot is free again: a third source takes it; a fourth
     * finds every slot taken and evicts from the source still holding 2; a
     * fifth finds four sources of 1 each (no one holds more than it would)
     * and is refused. */
    fd[2] = silent_from("127.0.0.4");
    fd[5] = silent_from("127.0.0.5");
    {
        int last = silent_from("127.0.0.6");

        run_until_n(&F.rejects, 5);
        close(last);
    }
    assert_int_equal(F.reject_status, SFL_ELIMIT);
    assert_non_null(strstr(F.reject_detail, "4 handshakes in progress, the maximum"));
    for (int i = 0; i < 6; i++)
        close(fd[i]);
}

/* A slow loris: a ClientHello trickled one byte at a time keeps the
 * connection busy but not its slot; the handshake deadline runs from
 * accept, whatever arrives. */
static int trickle_sent;

static void trickle_cb(uv_timer_t *t)
{
    static const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03};

    (void)t;
    if (F.cli == NULL || F.cli_close)
        return;
    if (sfl_conn_write(F.cli, hello + trickle_sent % sizeof(hello), 1) == 0)
        trickle_sent++;
}

static void test_tls_slow_handshake_deadline(void **state)
{
    static uv_timer_t drip; /* closed by the teardown's loop turns */

    (void)state;
    F.sopts.handshake_timeout_ms = 300;
    listen_tls();
    connect_plain();
    run_until(&F.cli_connect);
    trickle_sent = 0;
    uv_timer_init(&F.loop, &drip);
    uv_timer_start(&drip, trickle_cb, 10, 10);
    run_until(&F.rejects);
    uv_timer_stop(&drip);
    uv_close((uv_handle_t *)&drip, NULL);
    assert_int_equal(F.reject_status, -ETIMEDOUT);
    assert_non_null(strstr(F.reject_detail, "handshake not done within 300 ms"));
    assert_true(trickle_sent > 1); /* it kept sending, and was cut anyway */
    run_until(&F.done);
    assert_int_equal(F.srv_connect, 0);
}

/* Configuration errors say which file and why. */
static void test_tls_config_errors(void **state)
{
    char cert[128], key[128], ca[128], junk[128], other[128];
    sfl_tls_config_t cfg = {0};
    sfl_tls_t *t = (sfl_tls_t *)&cfg;
    sfl_conn_opts_t o = {0};
    struct sockaddr_in a;
    sfl_conn_t *c;
    FILE *f;

    (void)state;
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EINVAL);
    assert_null(t);
    assert_non_null(strstr(sfl_last_error(), "ca_file"));
    cfg.ca_file = path(ca, sizeof(ca), "ca/ca.crt");
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EINVAL); /* server without cert */
    assert_int_equal(sfl_tls_new(&cfg, 0, &t), SFL_EINVAL); /* client without host */
    assert_non_null(strstr(sfl_last_error(), "verify_host"));
    cfg.cert_file = path(cert, sizeof(cert), "ca/coordinator/coord.crt");
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EINVAL); /* cert without key */
    cfg.key_file = path(key, sizeof(key), "ca/agent/agent-7.key");
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EIO);
    if (!strstr(sfl_last_error(), "mismatch"))
        fail_msg("detail: %s", sfl_last_error());
    cfg.key_file = path(key, sizeof(key), "ca/nonexistent.key");
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EIO);
    assert_non_null(strstr(sfl_last_error(), "nonexistent.key"));
    cfg.key_file = path(key, sizeof(key), "ca/coordinator/coord.key");
    path(junk, sizeof(junk), "junk.pem");
    f = fopen(junk, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
    fclose(f);
    cfg.ca_file = junk;
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EIO);
    assert_non_null(strstr(sfl_last_error(), "tls: CA file"));
    cfg.ca_file = ca;
    cfg.alpn_required = 1;
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EINVAL); /* required without alpn */
    cfg.alpn = "";
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), SFL_EINVAL);
    cfg.alpn = "h2";
    assert_int_equal(sfl_tls_new(&cfg, 1, &t), 0);
    /* A server context cannot connect; a client one cannot listen. */
    o.tls = t;
    loopback(&a, 9);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &cli_cbs, &F, &c),
                     SFL_EINVAL);
    sfl_tls_free(t);
    cfg.verify_host = "localhost";
    cfg.cert_file = path(other, sizeof(other), "ca/agent/agent-7.crt");
    cfg.key_file = path(key, sizeof(key), "ca/agent/agent-7.key");
    assert_int_equal(sfl_tls_new(&cfg, 0, &t), 0);
    o.tls = t;
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, &o, &srv_cbs, NULL, NULL,
                                      &F.l),
                     SFL_EINVAL);
    assert_null(F.l);
    sfl_tls_free(t);
    assert_int_equal(F.cli_connect, 0);
}

static int fa_closed;

static void fa_on_connect(sfl_conn_t *c, int status)
{
    (void)c;
    (void)status;
}

static void fa_on_close(sfl_conn_t *c, int status)
{
    (void)c;
    (void)status;
    fa_closed = 1;
}

/* Each allocation of a TLS context and of a TLS connection fails in turn:
 * SFL_ENOMEM, no callback, no leak. */
static void test_tls_alloc_failure(void **state)
{
    static const sfl_conn_cbs_t fa_cbs = {fa_on_connect, NULL, NULL, fa_on_close};
    char cert[128], key[128], ca[128];
    sfl_tls_config_t cfg = {
        .cert_file = path(cert, sizeof(cert), "ca/agent/agent-7.crt"),
        .key_file = path(key, sizeof(key), "ca/agent/agent-7.key"),
        .ca_file = path(ca, sizeof(ca), "ca/ca.crt"),
        .verify_host = "localhost",
        .alpn = "h2",
    };
    sfl_conn_opts_t o = {0};
    sfl_tls_t *t = NULL;
    sfl_conn_t *c = NULL;
    struct sockaddr_in a;

    (void)state;
    FAILALLOC_EACH(sfl_tls_new(&cfg, 0, &t), (sfl_tls_free(t), t = NULL));
    listen_tls();
    assert_int_equal(sfl_tls_new(&cfg, 0, &o.tls), 0);
    loopback(&a, F.port);
    FAILALLOC_EACH(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &fa_cbs, NULL, &c),
                   (c ? (sfl_conn_abort(c), c = NULL, run_until(&fa_closed), fa_closed = 0)
                      : (uv_run(&F.loop, UV_RUN_NOWAIT), 0)));
    sfl_tls_free(o.tls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tls_handshake_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_exporter_per_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_verify_der, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_cert_binding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_resumption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_resume_other_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_resume_expired_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_ed25519_both_ways, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_admin_role_and_server_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_other_ca_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_no_client_cert_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_client_cert_without_eku_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_server_name_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_alpn_required, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_garbage_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_truncated_handshake_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_handshake_slots_shared_by_source, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tls_slow_handshake_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_alloc_failure, setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

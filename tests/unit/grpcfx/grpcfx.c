/* The gRPC session pair of test_grpc and test_grpcadmit (grpcfx.h). */
#include "grpcfx.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t fake_now;

uint64_t fake_clock(void *ud)
{
    (void)ud;
    return fake_now;
}

/* ---- server side: handlers recording into one context -------------------- */

srv_ctx_t sctx;
/* Set by the allocation-failure test: handlers then tolerate ENOMEM. */
bool lenient;

static void check(int rc)
{
    if (!lenient)
        assert_int_equal(rc, 0);
}

static void on_cancel(sfl_grpc_call_t *call, void *ud)
{
    srv_ctx_t *x = ud;

    assert_ptr_equal(x, &sctx);
    assert_null(sfl_grpc_call_session(call));
    x->cancelled++;
}

void h_echo(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    srv_ctx_t *x = ud;

    x->handled++;
    x->deadline = sfl_grpc_call_deadline(call);
    assert_string_equal(sfl_grpc_call_path(call), "/t.Svc/Echo");
    check(sfl_grpc_reply(call, req, len));
}

static void h_hold(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    srv_ctx_t *x = ud;

    (void)req;
    (void)len;
    x->handled++;
    x->deadline = sfl_grpc_call_deadline(call);
    assert_true(x->n_held < MAX_HELD);
    x->held[x->n_held++] = call;
    sfl_grpc_call_on_cancel(call, on_cancel, x);
}

static void h_fail(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    srv_ctx_t *x = ud;

    (void)req;
    (void)len;
    x->handled++;
    assert_int_equal(sfl_grpc_finish(call, SFL_GRPC_STATUS_INVALID_ARGUMENT, FAIL_MSG), 0);
}

/* Request "N": sends N messages "m<i>" (m0 is empty), then OK. */
static void h_stream(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    srv_ctx_t *x = ud;
    char buf[32];
    int n;

    x->handled++;
    assert_true(len < sizeof(buf));
    memcpy(buf, req, len);
    buf[len] = '\0';
    n = atoi(buf);
    for (int i = 0; i < n; i++) {
        int k = i == 0 ? 0 : snprintf(buf, sizeof(buf), "m%d", i);
        int rc = sfl_grpc_send(call, (const uint8_t *)buf, (size_t)k);

        check(rc);
        if (rc != 0) {
            (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_INTERNAL, "send failed");
            return;
        }
    }
    check(sfl_grpc_finish(call, SFL_GRPC_STATUS_OK, NULL));
}

/* Sends a response bigger than the test client accepts. */
static void h_big(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    static uint8_t big[4096];
    srv_ctx_t *x = ud;

    (void)req;
    (void)len;
    x->handled++;
    assert_int_equal(sfl_grpc_reply(call, big, sizeof(big)), 0);
}

/* Answers OK with nothing, whatever the request. */
static void h_sink(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    srv_ctx_t *x = ud;

    (void)req;
    (void)len;
    x->handled++;
    check(sfl_grpc_reply(call, NULL, 0));
}

const sfl_grpc_method_t methods[] = {
    {"/t.Svc/Echo", SFL_GRPC_KIND_UNARY, h_echo, 0, NULL, 0},
    {"/t.Svc/Hold", SFL_GRPC_KIND_UNARY, h_hold, 0, NULL, 0},
    {"/t.Svc/Fail", SFL_GRPC_KIND_UNARY, h_fail, 0, NULL, 0},
    {"/t.Svc/Stream", SFL_GRPC_KIND_SERVER_STREAM, h_stream, 0, NULL, 0},
    {"/t.Svc/Watch", SFL_GRPC_KIND_SERVER_STREAM, h_hold, 0, NULL, 0},
    {"/t.Svc/Big", SFL_GRPC_KIND_UNARY, h_big, 0, NULL, 0},
    /* only for peers with role bit 2, and requests up to 1000 bytes */
    {"/t.Svc/Admin", SFL_GRPC_KIND_UNARY, h_hold, 1u << 2, "admin", 0},
    {"/t.Svc/Small", SFL_GRPC_KIND_UNARY, h_hold, 0, NULL, 1000},
    {"/t.Svc/Sink", SFL_GRPC_KIND_UNARY, h_sink, 0, NULL, 0},
};
const size_t n_methods = sizeof(methods) / sizeof(methods[0]);

/* ---- client side: results ------------------------------------------------ */

void c_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
             size_t len, void *ud)
{
    result_t *r = ud;

    (void)call;
    r->done++;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    assert_true(len <= sizeof(r->resp));
    if (len > 0)
        memcpy(r->resp, resp, len);
    r->len = len;
}

void c_msg(sfl_grpc_call_t *call, const uint8_t *msg, size_t len, void *ud)
{
    result_t *r = ud;
    char want[32];
    int k = r->n_msgs == 0 ? 0 : snprintf(want, sizeof(want), "m%d", r->n_msgs);

    assert_int_equal(len, (size_t)k);
    if (k > 0)
        assert_memory_equal(msg, want, len);
    r->n_msgs++;
    if (r->cancel_on_first)
        sfl_grpc_cancel(call);
}

void c_done(sfl_grpc_call_t *call, int status, const char *message, void *ud)
{
    result_t *r = ud;

    (void)call;
    r->done++;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
}

/* ---- the pair ------------------------------------------------------------ */

/* Allocation tracking for "rejected before allocation" checks. */
static bool tracking;
size_t biggest;

void *track_malloc(size_t n)
{
    if (tracking && n > biggest)
        biggest = n;
    return malloc(n);
}

void *track_realloc(void *p, size_t n)
{
    if (tracking && n > biggest)
        biggest = n;
    return realloc(p, n);
}

static void count_wake(sfl_grpc_session_t *s, void *ud)
{
    (void)s;
    ((srv_ctx_t *)ud)->wakes++;
}

void pair_open(pair_t *p, const sfl_grpc_config_t *scfg, const sfl_grpc_config_t *ccfg)
{
    sfl_grpc_config_t dflt = {.now_ms = fake_clock};

    memset(&sctx, 0, sizeof(sctx));
    fake_now = 1000;
    assert_int_equal(sfl_grpc_server_new(scfg ? scfg : &dflt, methods, N_METHODS, &sctx, &p->srv),
                     0);
    assert_int_equal(sfl_grpc_client_new(ccfg ? ccfg : &dflt, "http", "test:1", &p->cli), 0);
    sfl_grpc_session_set_wake(p->srv, count_wake, &sctx);
    assert_ptr_equal(sfl_grpc_session_user(p->srv), &sctx);
}

void pair_close(pair_t *p)
{
    sfl_grpc_session_free(p->cli);
    sfl_grpc_session_free(p->srv);
    p->cli = p->srv = NULL;
}

/* Moves one batch from -> to; returns feed's result. */
int move(sfl_grpc_session_t *from, sfl_grpc_session_t *to, size_t *moved)
{
    const uint8_t *buf;
    size_t n;
    int rc;

    assert_int_equal(sfl_grpc_session_pending(from, &buf, &n), 0);
    if (n == 0)
        return 0;
    tracking = true;
    rc = sfl_grpc_session_feed(to, buf, n);
    tracking = false;
    sfl_grpc_session_consumed(from, n);
    *moved += n;
    return rc;
}

/* Pumps until quiet; the first feed error is returned (and pumping goes on
 * so the GOAWAY gets through). */
int pump_rc(pair_t *p)
{
    int first = 0;

    for (int i = 0; i < 100000; i++) {
        size_t moved = 0;
        int rc = move(p->cli, p->srv, &moved);

        if (rc != 0 && first == 0)
            first = rc;
        rc = move(p->srv, p->cli, &moved);
        if (rc != 0 && first == 0)
            first = rc;
        if (moved == 0)
            return first;
    }
    fail_msg("pump did not settle");
    return -1;
}

void pump(pair_t *p)
{
    assert_int_equal(pump_rc(p), 0);
}

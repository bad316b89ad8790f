/* sfl/net/grpc.h: gRPC over nghttp2 in memory, on the session pair of
 * grpcfx.h; hand-made HTTP/2 requests ours never sends; interop with a stock
 * gRPC client and server (python3-grpcio); allocation failures. Admission
 * control (request budgets) has its own suite, test_grpcadmit. */
#define _DEFAULT_SOURCE /* mincore */
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
#include <sys/mman.h>

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include "failalloc.h"
#include "grpcfx.h"
#include "net/grpc_int.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/net/grpc.h"

/* ---- tests --------------------------------------------------------------- */

static void test_grpc_unary_ok(void **state)
{
    static result_t r, big;
    static uint8_t req[250000];
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    memset(&big, 0, sizeof(big));
    for (size_t i = 0; i < sizeof(req); i++)
        req[i] = (uint8_t)(i * 7 + 1);
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"ping", 4, 0,
                                         c_unary, &r, NULL),
                     0);
    /* Larger than every window and frame: many DATA frames, window updates. */
    assert_int_equal(
        sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", req, sizeof(req), 0, c_unary, &big, NULL), 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 2);
    pump(&p);
    assert_int_equal(sctx.handled, 2);
    assert_int_equal(sctx.deadline, UINT64_MAX);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
    assert_string_equal(r.message, "");
    assert_int_equal(r.len, 4);
    assert_memory_equal(r.resp, "ping", 4);
    assert_int_equal(big.done, 1);
    assert_int_equal(big.status, SFL_GRPC_STATUS_OK);
    assert_int_equal(big.len, sizeof(req));
    assert_memory_equal(big.resp, req, sizeof(req));
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    assert_false(sfl_grpc_session_done(p.cli));
    assert_false(sfl_grpc_session_done(p.srv));
    assert_int_equal(sctx.wakes, 0); /* replies came from inside feed */
    pair_close(&p);
}

/* Pages of s's paged blocks (nghttp2's frame buffer) in memory. */
static size_t resident_pages(const sfl_grpc_session_t *s, size_t *blocks)
{
    unsigned char vec[64];
    size_t n = 0;

    *blocks = 0;
    for (int i = 0; i < H2_PAGED_SLOTS; i++) {
        size_t pages = s->paged_len[i] / 4096;

        if (s->paged[i] == NULL)
            continue;
        ++*blocks;
        assert_true(pages <= sizeof(vec));
        assert_int_equal(mincore(s->paged[i], s->paged_len[i], vec), 0);
        for (size_t k = 0; k < pages; k++)
            n += vec[k] & 1;
    }
    return n;
}

/* An idle session holds none of nghttp2's frame buffer in memory: its
 * pages go back once everything is sent, and the next call writes on
 * fresh zero pages and still works. */
static void test_grpc_idle_releases_pages(void **state)
{
    static result_t r;
    const uint8_t *out;
    size_t blocks, len;
    pair_t p;

    (void)state;
    for (int round = 0; round < 2; round++) {
        memset(&r, 0, sizeof(r));
        if (round == 0)
            pair_open(&p, NULL, NULL);
        assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"ping", 4,
                                             0, c_unary, &r, NULL),
                         0);
        /* frames written into the buffer, not yet consumed: in memory */
        assert_int_equal(sfl_grpc_session_pending(p.cli, &out, &len), 0);
        assert_true(len > 0);
        assert_true(resident_pages(p.cli, &blocks) > 0);
        assert_int_equal(blocks, 1);
        pump(&p);
        assert_int_equal(r.done, 1);
        assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
        assert_memory_equal(r.resp, "ping", 4);
        assert_int_equal(resident_pages(p.cli, &blocks), 0);
        assert_int_equal(blocks, 1);
        assert_int_equal(resident_pages(p.srv, &blocks), 0);
        assert_int_equal(blocks, 1);
    }
    pair_close(&p);
}

static void test_grpc_unary_async_reply(void **state)
{
    static result_t r;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Hold", (const uint8_t *)"x", 1, 0,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(sctx.n_held, 1);
    assert_int_equal(r.done, 0);
    /* Later, outside any callback: the transport is woken. */
    assert_int_equal(sfl_grpc_reply(sctx.held[0], (const uint8_t *)"later", 5), 0);
    assert_int_equal(sctx.wakes, 1);
    assert_true(sfl_grpc_session_want_write(p.srv));
    pump(&p);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
    assert_memory_equal(r.resp, "later", 5);
    assert_int_equal(sctx.cancelled, 0);
    pair_close(&p);
}

static struct {
    int n, status;
    char path[96], message[256];
    void *ud;
} refused;

static void on_refused(const char *path, int status, const char *message, void *ud)
{
    refused.n++;
    refused.status = status;
    refused.ud = ud;
    snprintf(refused.path, sizeof(refused.path), "%s", path);
    snprintf(refused.message, sizeof(refused.message), "%s", message);
}

/* Refused before any handler: the client gets UNIMPLEMENTED and the server
 * application is told (path, status, message) through on_refused. */
static void test_grpc_unknown_method(void **state)
{
    static result_t r;
    sfl_grpc_config_t scfg = {.now_ms = fake_clock, .on_refused = on_refused};
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    memset(&refused, 0, sizeof(refused));
    pair_open(&p, &scfg, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Nope", (const uint8_t *)"x", 1, 0,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(sctx.handled, 0);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNIMPLEMENTED);
    assert_non_null(strstr(r.message, "/t.Svc/Nope"));
    assert_int_equal(r.len, 0);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    assert_int_equal(refused.n, 1);
    assert_int_equal(refused.status, SFL_GRPC_STATUS_UNIMPLEMENTED);
    assert_string_equal(refused.path, "/t.Svc/Nope");
    assert_string_equal(refused.message, r.message);
    assert_ptr_equal(refused.ud, &sctx);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "no-slash", NULL, 0, 0, c_unary, &r, NULL),
                     SFL_EINVAL);
    pair_close(&p);
}

static void test_grpc_error_status_percent_encoded(void **state)
{
    static result_t r;
    char enc[64];
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Fail", (const uint8_t *)"x", 1, 0,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(r.message, FAIL_MSG);
    pair_close(&p);

    /* The wire form, and the decoder's tolerance. */
    assert_int_equal(sfl_grpc_message_encode("a%b\n\xc3\xa9~", 7, enc, sizeof(enc)), 15);
    assert_string_equal(enc, "a%25b%0A%C3%A9~");
    assert_int_equal(sfl_grpc_message_encode("a%b", 3, enc, 4), 5);
    assert_string_equal(enc, "a"); /* no half escape */
    char dec[] = "x%41%zz%4%";
    assert_int_equal(sfl_grpc_message_decode(dec, strlen(dec)), 8);
    assert_string_equal(dec, "xA%zz%4%");
    assert_string_equal(sfl_grpc_status_name(12), "UNIMPLEMENTED");
    assert_string_equal(sfl_grpc_status_name(17), "?");
}

static void test_grpc_server_stream(void **state)
{
    static result_t r;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Stream", (const uint8_t *)"300", 3, 0,
                                          c_msg, c_done, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(r.n_msgs, 300);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
    /* Zero messages is a valid stream too (trailers-only). */
    memset(&r, 0, sizeof(r));
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Stream", (const uint8_t *)"0", 1, 0,
                                          c_msg, c_done, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(r.n_msgs, 0);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
    /* Cancel from inside the message callback: no more callbacks. */
    memset(&r, 0, sizeof(r));
    r.cancel_on_first = true;
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Stream", (const uint8_t *)"50", 2, 0,
                                          c_msg, c_done, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(r.n_msgs, 1);
    assert_int_equal(r.done, 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    pair_close(&p);
}

static void test_grpc_client_cancel_seen_by_server(void **state)
{
    static result_t r;
    sfl_grpc_call_t *call = NULL;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Watch", (const uint8_t *)"", 0, 0,
                                          c_msg, c_done, &r, &call),
                     0);
    assert_non_null(call);
    pump(&p);
    assert_int_equal(sctx.n_held, 1);
    /* The server streams one message, then the client hangs up. */
    assert_int_equal(sfl_grpc_send(sctx.held[0], NULL, 0), 0);
    pump(&p);
    assert_int_equal(r.n_msgs, 1);
    sfl_grpc_cancel(call);
    pump(&p);
    assert_int_equal(sctx.cancelled, 1);
    assert_int_equal(r.done, 0);
    assert_null(sfl_grpc_call_session(sctx.held[0]));
    assert_int_equal(sfl_grpc_send(sctx.held[0], (const uint8_t *)"x", 1), -ECANCELED);
    assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);

    /* Cancelled before its HEADERS were even written. */
    memset(&r, 0, sizeof(r));
    sctx.n_held = 0;
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Watch", (const uint8_t *)"", 0, 0,
                                          c_msg, c_done, &r, &call),
                     0);
    sfl_grpc_cancel(call);
    pump(&p);
    assert_int_equal(r.done, 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    if (sctx.n_held == 1) /* the server may have dispatched before the RST */
        assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
    pair_close(&p);
}

static void test_grpc_oversized_message(void **state)
{
    static result_t r;
    static uint8_t req[100000];
    sfl_grpc_config_t small = {.now_ms = fake_clock, .max_message = 1024};
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_int_equal(sfl_replace_allocator(track_malloc, track_realloc, free), 0);
    pair_open(&p, &small, NULL);
    pump(&p); /* handshake, so only the request is measured */
    biggest = 0;
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", req, sizeof(req), 0, c_unary, &r,
                                         NULL),
                     0);
    pump(&p);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(r.message, "100000"));
    assert_int_equal(sctx.handled, 0);
    /* Nothing near the size of the message was allocated while reading it
     * (the largest allocation is the session's output buffer). */
    assert_true(biggest < sizeof(req) / 4);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);
    pair_close(&p);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);

    /* A response over the client's limit, and a request over its own. */
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, &small);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Big", (const uint8_t *)"x", 1, 0,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", req, sizeof(req), 0, c_unary, &r,
                                         NULL),
                     SFL_ELIMIT);
    assert_int_equal(sfl_grpc_session_calls(p.srv), 0);
    assert_int_equal(sfl_grpc_session_calls(p.cli), 0);
    pair_close(&p);
}

/* The caller's role and the method's request size are judged when the
 * HEADERS end: a refused request's body is never kept. */
static void test_grpc_roles_and_sizes_before_body(void **state)
{
    static result_t r[3];
    static uint8_t req[200000];
    sfl_grpc_config_t agent = {.now_ms = fake_clock, .peer_roles = 1u << 1,
                               .peer_role_name = "agent"};
    pair_t p;

    (void)state;
    memset(r, 0, sizeof(r));
    assert_int_equal(sfl_replace_allocator(track_malloc, track_realloc, free), 0);
    pair_open(&p, &agent, NULL);
    pump(&p);
    biggest = 0;
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Admin", req, sizeof(req), 0, c_unary,
                                         &r[0], NULL),
                     0);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Small", req, 5000, 0, c_unary, &r[1],
                                         NULL),
                     0);
    pump(&p);
    assert_int_equal(r[0].status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_string_equal(r[0].message,
                        "/t.Svc/Admin needs a certificate with role admin, not agent");
    assert_int_equal(r[1].status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(r[1].message, "exceeds the limit of 1000"));
    assert_int_equal(sctx.handled, 0);
    assert_true(biggest < sizeof(req) / 4);
    assert_int_equal(sfl_grpc_session_buffered(p.srv), 0);
    /* within the limits: handled */
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Small", req, 1000, 0, c_unary, &r[2],
                                         NULL),
                     0);
    pump(&p);
    assert_int_equal(sctx.handled, 1);
    assert_int_equal(sfl_grpc_session_buffered(p.srv), 0);
    assert_int_equal(sfl_grpc_reply(sctx.held[0], NULL, 0), 0);
    pump(&p);
    assert_int_equal(r[2].status, SFL_GRPC_STATUS_OK);
    pair_close(&p);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);
}

/* A peer that may call nothing (refuse_status: a revoked certificate) gets
 * the status and message on every path, known or not, when the HEADERS
 * end: no handler runs and its body is never kept. */
static void test_grpc_refuse_every_call(void **state)
{
    static result_t r[3];
    static uint8_t req[200000];
    sfl_grpc_config_t revoked = {.now_ms = fake_clock, .peer_roles = 1u << 2,
                                 .peer_role_name = "admin",
                                 .refuse_status = SFL_GRPC_STATUS_PERMISSION_DENIED,
                                 .refuse_message = "certificate revoked (fingerprint ab12)"};
    sfl_grpc_config_t bad = {.refuse_status = 17};
    const char *paths[] = {"/t.Svc/Echo", "/t.Svc/Admin", "/t.Svc/Nope"};
    sfl_grpc_session_t *s = NULL;
    pair_t p;

    (void)state;
    memset(r, 0, sizeof(r));
    assert_int_equal(sfl_grpc_server_new(&bad, methods, N_METHODS, &sctx, &s), SFL_EINVAL);
    assert_null(s);
    assert_int_equal(sfl_replace_allocator(track_malloc, track_realloc, free), 0);
    pair_open(&p, &revoked, NULL);
    pump(&p);
    biggest = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(sfl_grpc_call_unary(p.cli, paths[i], req, sizeof(req), 0, c_unary,
                                             &r[i], NULL),
                         0);
    pump(&p);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].done, 1);
        assert_int_equal(r[i].status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        assert_string_equal(r[i].message, "certificate revoked (fingerprint ab12)");
    }
    assert_int_equal(sctx.handled, 0);
    assert_true(biggest < sizeof(req) / 4);
    assert_int_equal(sfl_grpc_session_buffered(p.srv), 0);
    pair_close(&p);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);
}

/* A peer's stream resets are rate-limited by nghttp2 (its "rapid reset"
 * defence: 1,000 at once, then 33 a second): past that the server ends the
 * connection with GOAWAY INTERNAL_ERROR. reset_burst raises the bucket (the
 * master does for a front-end's link, whose agents' cancellations it
 * carries: server/coord.c). 1,200 calls opened and cancelled at one
 * instant: the default session fails, the raised one serves on. */
static int cancel_many(const sfl_grpc_config_t *cfg)
{
    static result_t r;
    sfl_grpc_call_t *call = NULL;
    pair_t p;
    int failed = 0, rc;

    memset(&r, 0, sizeof(r));
    pair_open(&p, cfg, NULL);
    for (int i = 0; i < 1200 && !failed; i++) {
        if (sfl_grpc_call_stream(p.cli, "/t.Svc/Watch", (const uint8_t *)"", 0, 0, c_msg, c_done,
                                 &r, &call) < 0) {
            failed = 1;
            break;
        }
        rc = pump_rc(&p);
        if (rc == 0 && sctx.n_held == 1) {
            sfl_grpc_cancel(call);
            rc = pump_rc(&p);
            assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL),
                             -ECANCELED);
            sctx.n_held = 0;
        }
        failed = rc != 0 || r.done != 0;
    }
    if (!failed) {
        /* still serving */
        memset(&r, 0, sizeof(r));
        assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"hi", 2, 0,
                                             c_unary, &r, NULL),
                         0);
        pump(&p);
        assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
        assert_int_equal(sctx.cancelled, 1200);
    }
    pair_close(&p);
    return failed;
}

static void test_grpc_reset_rate_limit(void **state)
{
    sfl_grpc_config_t raised = {.now_ms = fake_clock, .reset_burst = 5000, .reset_rate = 500};

    (void)state;
    assert_int_equal(cancel_many(NULL), 1);
    assert_int_equal(cancel_many(&raised), 0);
}

static void test_grpc_too_many_streams(void **state)
{
    static result_t r[3];
    sfl_grpc_config_t two = {.now_ms = fake_clock, .max_streams = 2};
    pair_t p;

    (void)state;
    memset(r, 0, sizeof(r));
    pair_open(&p, &two, NULL);
    /* Submitted before the server's SETTINGS arrive, so the client does not
     * hold the third back: the server must refuse it. */
    for (int i = 0; i < 3; i++)
        assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Hold", (const uint8_t *)"x", 1, 0,
                                             c_unary, &r[i], NULL),
                         0);
    pump(&p);
    assert_int_equal(sctx.n_held, 2);
    assert_int_equal(r[0].done + r[1].done, 0);
    assert_int_equal(r[2].done, 1);
    assert_int_equal(r[2].status, SFL_GRPC_STATUS_UNAVAILABLE);
    assert_non_null(strstr(r[2].message, "REFUSED"));
    for (int i = 0; i < 2; i++)
        assert_int_equal(sfl_grpc_reply(sctx.held[i], (const uint8_t *)"ok", 2), 0);
    pump(&p);
    assert_int_equal(r[0].status, SFL_GRPC_STATUS_OK);
    assert_int_equal(r[1].status, SFL_GRPC_STATUS_OK);
    assert_int_equal(r[0].done + r[1].done, 2);
    pair_close(&p);
}

static void test_grpc_garbage_closes_session(void **state)
{
    static const char http1[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    /* A DATA frame on stream 0: a connection error. */
    static const uint8_t bad_frame[] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff};
    sfl_grpc_session_t *srv;
    const uint8_t *buf;
    size_t n;
    pair_t p;

    (void)state;
    /* Not HTTP/2 at all. */
    memset(&sctx, 0, sizeof(sctx));
    assert_int_equal(sfl_grpc_server_new(NULL, methods, N_METHODS, &sctx, &srv), 0);
    assert_int_equal(sfl_grpc_session_feed(srv, (const uint8_t *)http1, sizeof(http1) - 1),
                     SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "http2"));
    for (int i = 0; i < 10 && sfl_grpc_session_want_write(srv); i++) {
        assert_int_equal(sfl_grpc_session_pending(srv, &buf, &n), 0);
        sfl_grpc_session_consumed(srv, n);
    }
    assert_true(sfl_grpc_session_done(srv));
    /* Ignored, but the failure is repeated. */
    assert_int_equal(sfl_grpc_session_feed(srv, (const uint8_t *)"x", 1), SFL_EPARSE);
    sfl_grpc_session_free(srv);

    /* A valid connection, then a frame that breaks the protocol. */
    pair_open(&p, NULL, NULL);
    pump(&p);
    assert_int_equal(sfl_grpc_session_feed(p.srv, bad_frame, sizeof(bad_frame)), SFL_EPARSE);
    pump_rc(&p);
    assert_true(sfl_grpc_session_done(p.srv));
    assert_true(sfl_grpc_session_done(p.cli)); /* the client saw GOAWAY */
    pair_close(&p);

    /* Random bytes after the handshake, many seeds: never a crash. */
    for (uint32_t seed = 1; seed <= 200; seed++) {
        uint8_t junk[512];
        uint32_t x = seed * 2654435761u;
        int rc;

        pair_open(&p, NULL, NULL);
        pump(&p);
        for (size_t i = 0; i < sizeof(junk); i++) {
            x = x * 1103515245u + 12345u;
            junk[i] = (uint8_t)(x >> 16);
        }
        if (seed % 2 == 0)
            junk[3] = 0; /* a DATA frame header, smaller lengths */
        rc = sfl_grpc_session_feed(p.srv, junk, sizeof(junk));
        assert_true(rc == 0 || rc == SFL_EPARSE);
        (void)pump_rc(&p);
        pair_close(&p);
    }
}

static void test_grpc_timeout_parse(void **state)
{
    static const struct {
        const char *v;
        uint64_t ms;
    } good[] = {{"1H", 3600000},     {"2M", 120000},   {"3S", 3000},
                {"1500m", 1500},     {"1u", 1},        {"1000u", 1},
                {"1001u", 2},        {"1n", 1},        {"0n", 0},
                {"99999999H", 99999999ull * 3600000}, {"00000010S", 10000}};
    static const char *const bad[] = {"", "1", "m", "123456789m", "1x", "-1m", " 1m",
                                      "1.5S", "1mm", "S1", "+1S", "1 S"};
    char out[16];
    uint64_t ms;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(sfl_grpc_timeout_parse(good[i].v, strlen(good[i].v), &ms), 0);
        assert_int_equal(ms, good[i].ms);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(sfl_grpc_timeout_parse(bad[i], strlen(bad[i]), &ms), SFL_EPARSE);
    sfl_grpc_timeout_format(1500, out);
    assert_string_equal(out, "1500m");
    sfl_grpc_timeout_format(99999999, out);
    assert_string_equal(out, "99999999m");
    sfl_grpc_timeout_format(100000001, out);
    assert_string_equal(out, "100001S"); /* rounded up */
    sfl_grpc_timeout_format(UINT64_MAX, out);
    assert_string_equal(out, "99999999H");
    assert_int_equal(sfl_grpc_timeout_parse(out, strlen(out), &ms), 0);
}

static void test_grpc_deadline_client_side(void **state)
{
    static result_t r;
    uint64_t next;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Hold", (const uint8_t *)"x", 1, 1500,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(sctx.n_held, 1);
    assert_int_equal(sctx.deadline, 2500); /* 1000 + "1500m" on the same clock */
    fake_now = 2000;
    assert_int_equal(sfl_grpc_session_tick(p.cli, &next), 0);
    assert_int_equal(next, 500);
    assert_int_equal(sfl_grpc_session_tick(p.srv, &next), 0);
    assert_int_equal(next, 500);
    fake_now = 2500;
    assert_int_equal(sfl_grpc_session_tick(p.cli, &next), 0);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_DEADLINE_EXCEEDED);
    pump(&p); /* the RST_STREAM reaches the server */
    assert_int_equal(sctx.cancelled, 1);
    assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
    assert_int_equal(r.done, 1);
    pair_close(&p);
}

static void test_grpc_deadline_server_side(void **state)
{
    static result_t r;
    uint64_t next;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Watch", (const uint8_t *)"", 0, 200,
                                          c_msg, c_done, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(sfl_grpc_send(sctx.held[0], NULL, 0), 0);
    fake_now = 1200;
    /* Only the server notices: it ends the call with DEADLINE_EXCEEDED. */
    assert_int_equal(sfl_grpc_session_tick(p.srv, &next), 0);
    assert_int_equal(sctx.cancelled, 1);
    assert_int_equal(sfl_grpc_send(sctx.held[0], (const uint8_t *)"x", 1), -ECANCELED);
    pump(&p);
    assert_int_equal(r.n_msgs, 1);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_DEADLINE_EXCEEDED);
    assert_string_equal(r.message, "deadline exceeded");
    assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
    assert_int_equal(sctx.cancelled, 1);
    pair_close(&p);
}

static void test_grpc_idle_timeout(void **state)
{
    sfl_grpc_config_t idle = {.now_ms = fake_clock, .idle_timeout_ms = 1000};
    uint64_t next;
    pair_t p;

    (void)state;
    pair_open(&p, &idle, NULL);
    pump(&p);
    fake_now = 1500;
    assert_int_equal(sfl_grpc_session_tick(p.srv, &next), 0);
    assert_int_equal(next, 500);
    fake_now = 2000;
    assert_int_equal(sfl_grpc_session_tick(p.srv, &next), 0);
    pump(&p);
    assert_true(sfl_grpc_session_done(p.srv));
    assert_true(sfl_grpc_session_done(p.cli));
    assert_int_equal(sfl_grpc_session_feed(p.srv, (const uint8_t *)"x", 1), 0); /* clean */
    pair_close(&p);
}

/* A PING is answered by the peer's HTTP/2 stack, with no handler: pongs
 * counts the ACKs, none before the peer has read it; a closing session
 * sends none. */
static void test_grpc_ping(void **state)
{
    pair_t p;

    (void)state;
    pair_open(&p, NULL, NULL);
    pump(&p);
    assert_int_equal(sfl_grpc_session_pongs(p.cli), 0);
    assert_int_equal(sfl_grpc_session_ping(p.cli), 0);
    assert_true(sfl_grpc_session_want_write(p.cli));
    assert_int_equal(sfl_grpc_session_pongs(p.cli), 0);
    pump(&p);
    assert_int_equal(sfl_grpc_session_pongs(p.cli), 1);
    assert_int_equal(sctx.handled, 0);
    assert_int_equal(sfl_grpc_session_ping(p.cli), 0);
    assert_int_equal(sfl_grpc_session_ping(p.srv), 0);
    pump(&p);
    assert_int_equal(sfl_grpc_session_pongs(p.cli), 2);
    assert_int_equal(sfl_grpc_session_pongs(p.srv), 1);
    sfl_grpc_session_shutdown(p.cli);
    assert_int_equal(sfl_grpc_session_ping(p.cli), SFL_EINVAL);
    pair_close(&p);
}

/* A hostile peer's PINGs to a client session (as a master could send a
 * front-end): unsolicited ACKs are only counted (a master that answers
 * pings but not calls is still found silent by its calls: frontend.c),
 * and PINGs sent faster than the session's output is read end it with an
 * error (nghttp2's flood limit), never unbounded memory. */
static void test_grpc_ping_hostile(void **state)
{
    static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    static const uint8_t ack[17] = {0, 0, 8, 6, 1, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    static const uint8_t ping[17] = {0, 0, 8, 6, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    sfl_grpc_config_t cfg = {.now_ms = fake_clock};
    sfl_grpc_session_t *cli;
    int rc = 0, i;

    (void)state;
    assert_int_equal(sfl_grpc_client_new(&cfg, "http", "localhost", &cli), 0);
    assert_int_equal(sfl_grpc_session_feed(cli, settings, sizeof(settings)), 0);
    for (i = 0; i < 3; i++)
        assert_int_equal(sfl_grpc_session_feed(cli, ack, sizeof(ack)), 0);
    assert_int_equal(sfl_grpc_session_pongs(cli), 3);
    for (i = 0; i < 100000 && rc == 0; i++)
        rc = sfl_grpc_session_feed(cli, ping, sizeof(ping));
    assert_int_equal(rc, SFL_EPARSE);
    assert_true(i < 100000);
    assert_int_equal(sfl_grpc_session_ping(cli), SFL_EINVAL);
    sfl_grpc_session_free(cli);
}

static void test_grpc_graceful_shutdown(void **state)
{
    static result_t r, late;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    memset(&late, 0, sizeof(late));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Hold", (const uint8_t *)"x", 1, 0,
                                         c_unary, &r, NULL),
                     0);
    pump(&p);
    sfl_grpc_session_shutdown(p.srv);
    pump(&p);
    assert_false(sfl_grpc_session_done(p.srv)); /* a call is still open */
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"x", 1, 0,
                                         c_unary, &late, NULL),
                     -ENOTCONN);
    assert_int_equal(sfl_grpc_reply(sctx.held[0], (const uint8_t *)"bye", 3), 0);
    pump(&p);
    assert_int_equal(r.status, SFL_GRPC_STATUS_OK);
    assert_true(sfl_grpc_session_done(p.srv));
    assert_true(sfl_grpc_session_done(p.cli));
    assert_int_equal(late.done, 0);
    pair_close(&p);
}

static void test_grpc_free_cancels_calls(void **state)
{
    static result_t r, s2;
    pair_t p;

    (void)state;
    memset(&r, 0, sizeof(r));
    memset(&s2, 0, sizeof(s2));
    pair_open(&p, NULL, NULL);
    assert_int_equal(sfl_grpc_call_stream(p.cli, "/t.Svc/Watch", (const uint8_t *)"", 0, 0,
                                          c_msg, c_done, &r, NULL),
                     0);
    pump(&p);
    assert_int_equal(sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"x", 1, 0,
                                         c_unary, &s2, NULL),
                     0); /* never sent */
    sfl_grpc_session_free(p.srv);
    assert_int_equal(sctx.cancelled, 1);
    assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
    sfl_grpc_session_free(p.cli);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNAVAILABLE);
    assert_int_equal(s2.done, 1);
    assert_int_equal(s2.status, SFL_GRPC_STATUS_UNAVAILABLE);
    sfl_grpc_session_free(NULL);
}

static void test_grpc_config_checked(void **state)
{
    sfl_grpc_config_t c = {.max_frame = 1000};
    sfl_grpc_method_t bad = {"nope", SFL_GRPC_KIND_UNARY, h_echo, 0, NULL, 0};
    sfl_grpc_session_t *s = (sfl_grpc_session_t *)&c;

    (void)state;
    assert_int_equal(sfl_grpc_server_new(&c, methods, N_METHODS, NULL, &s), SFL_EINVAL);
    assert_null(s);
    c = (sfl_grpc_config_t){.max_header_list = 100};
    assert_int_equal(sfl_grpc_server_new(&c, methods, N_METHODS, NULL, &s), SFL_EINVAL);
    c = (sfl_grpc_config_t){.max_message = 1000, .max_queued = 100};
    assert_int_equal(sfl_grpc_client_new(&c, "http", "a", &s), SFL_EINVAL);
    assert_int_equal(sfl_grpc_server_new(NULL, &bad, 1, NULL, &s), SFL_EINVAL);
    assert_int_equal(sfl_grpc_client_new(NULL, "ftp", "a", &s), SFL_EINVAL);
    assert_int_equal(sfl_grpc_client_new(NULL, "https", "", &s), SFL_EINVAL);
}

/* ---- a hand-driven nghttp2 client for requests ours never sends ---------- */

typedef struct {
    int http;
    int grpc;
    char msg[256];
    bool closed;
    uint32_t rst;
    const uint8_t *body;
    size_t body_len;
    /* send the headers only, then let the body timeout pass */
    bool stall;
} raw_t;

static int raw_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
                      size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    raw_t *r = ud;
    char v[256];

    (void)h2;
    (void)f;
    (void)flags;
    snprintf(v, sizeof(v), "%.*s", (int)vlen, (const char *)value);
    if (nlen == 7 && memcmp(name, ":status", 7) == 0)
        r->http = atoi(v);
    else if (nlen == 11 && memcmp(name, "grpc-status", 11) == 0)
        r->grpc = atoi(v);
    else if (nlen == 12 && memcmp(name, "grpc-message", 12) == 0)
        snprintf(r->msg, sizeof(r->msg), "%s", v);
    return 0;
}

static int raw_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
    raw_t *r = ud;

    (void)h2;
    (void)id;
    r->closed = true;
    r->rst = code;
    return 0;
}

static ssize_t raw_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t len,
                        uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    raw_t *r = ud;
    size_t n = r->body_len < len ? r->body_len : len;

    (void)h2;
    (void)id;
    (void)src;
    if (r->stall)
        return NGHTTP2_ERR_DEFERRED;
    memcpy(buf, r->body, n);
    r->body += n;
    r->body_len -= n;
    if (r->body_len == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v)                                                                               \
    {                                                                                          \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE      \
    }

/* Sends one request with headers nv[0..n) and body, pumps, fills r. */
static void raw_pump(nghttp2_session *h2, sfl_grpc_session_t *srv)
{
    for (int i = 0; i < 1000; i++) {
        const uint8_t *p;
        size_t moved = 0, k;
        ssize_t m;

        while ((m = nghttp2_session_mem_send(h2, &p)) > 0) {
            assert_int_equal(sfl_grpc_session_feed(srv, p, (size_t)m), 0);
            moved += (size_t)m;
        }
        assert_int_equal(sfl_grpc_session_pending(srv, &p, &k), 0);
        if (k > 0) {
            assert_int_equal(nghttp2_session_mem_recv(h2, p, k), (ssize_t)k);
            sfl_grpc_session_consumed(srv, k);
            moved += k;
        }
        if (moved == 0)
            break;
    }
}

static void raw_request(const nghttp2_nv *nv, size_t n, const uint8_t *body, size_t blen,
                        raw_t *r)
{
    nghttp2_session_callbacks *cb;
    nghttp2_session *h2;
    nghttp2_data_provider prd = {{0}, raw_read};
    sfl_grpc_session_t *srv;
    sfl_grpc_config_t cfg = {.now_ms = fake_clock};

    bool stall = r->stall;

    memset(r, 0, sizeof(*r));
    memset(&sctx, 0, sizeof(sctx));
    r->stall = stall;
    r->grpc = -1;
    r->body = body;
    r->body_len = blen;
    assert_int_equal(sfl_grpc_server_new(&cfg, methods, N_METHODS, &sctx, &srv), 0);
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, raw_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, raw_close);
    assert_int_equal(nghttp2_session_client_new(&h2, cb, r), 0);
    nghttp2_session_callbacks_del(cb);
    assert_int_equal(nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    assert_true(nghttp2_submit_request(h2, NULL, nv, n, body != NULL ? &prd : NULL, NULL) > 0);
    raw_pump(h2, srv);
    if (r->stall) {
        uint64_t next;

        assert_int_equal(r->grpc, -1); /* waiting for the body */
        assert_int_equal(sfl_grpc_session_calls(srv), 1);
        fake_now += 60000; /* the default body timeout */
        assert_int_equal(sfl_grpc_session_tick(srv, &next), 0);
        raw_pump(h2, srv);
    }
    assert_int_equal(sfl_grpc_session_calls(srv), 0);
    nghttp2_session_del(h2);
    sfl_grpc_session_free(srv);
}

/* Idle connections by the hundred thousand: neither side keeps an HPACK
 * dynamic table. The server advertises SETTINGS_HEADER_TABLE_SIZE = 0, so a
 * stock nghttp2 client (table 4096 by default) shrinks its encoder's table
 * to nothing, and the server's own encoder indexes nothing, so the client's
 * decoder holds nothing either; two calls with the same headers still
 * decode and succeed. */
static void test_grpc_no_hpack_table(void **state)
{
    static const uint8_t one[] = {0, 0, 0, 0, 1, 'x'};
    nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                       NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                       NV("content-type", "application/grpc+proto"), NV("te", "trailers"),
                       NV("x-long-custom-header", "a value worth indexing, were there a table")};
    nghttp2_session_callbacks *cb;
    nghttp2_session *h2;
    nghttp2_data_provider prd = {{0}, raw_read};
    sfl_grpc_session_t *srv;
    sfl_grpc_config_t cfg = {.now_ms = fake_clock};
    raw_t r;

    (void)state;
    memset(&r, 0, sizeof(r));
    memset(&sctx, 0, sizeof(sctx));
    assert_int_equal(sfl_grpc_server_new(&cfg, methods, N_METHODS, &sctx, &srv), 0);
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, raw_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, raw_close);
    assert_int_equal(nghttp2_session_client_new(&h2, cb, &r), 0);
    nghttp2_session_callbacks_del(cb);
    assert_int_equal(nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    for (int i = 0; i < 2; i++) {
        r.grpc = -1;
        r.http = 0;
        r.body = one;
        r.body_len = sizeof(one);
        assert_true(nghttp2_submit_request(h2, NULL, nv, sizeof(nv) / sizeof(nv[0]), &prd,
                                           NULL) > 0);
        raw_pump(h2, srv);
        assert_int_equal(r.http, 200);
        assert_int_equal(r.grpc, 0);
    }
    assert_int_equal(sctx.handled, 2);
    assert_int_equal(nghttp2_session_get_remote_settings(h2, NGHTTP2_SETTINGS_HEADER_TABLE_SIZE),
                     0);
    assert_int_equal(nghttp2_session_get_hd_deflate_dynamic_table_size(h2), 0);
    assert_int_equal(nghttp2_session_get_hd_inflate_dynamic_table_size(h2), 0);
    nghttp2_session_del(h2);
    sfl_grpc_session_free(srv);
}

static void test_grpc_bad_requests(void **state)
{
    static const uint8_t one[] = {0, 0, 0, 0, 1, 'x'};
    static const uint8_t two[] = {0, 0, 0, 0, 1, 'x', 0, 0, 0, 0, 1, 'y'};
    static const uint8_t trunc[] = {0, 0, 0, 0, 9, 'x'};
    static const uint8_t comp[] = {1, 0, 0, 0, 1, 'x'};
    static char bigval[20000];
    raw_t r = {0};

    (void)state;
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc+proto"), NV("te", "trailers")};
        raw_request(nv, 6, one, sizeof(one), &r); /* well-formed control */
        assert_int_equal(r.http, 200);
        assert_int_equal(r.grpc, 0);
        assert_int_equal(sctx.handled, 1);
        raw_request(nv, 6, two, sizeof(two), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        assert_non_null(strstr(r.msg, "more than one"));
        raw_request(nv, 6, trunc, sizeof(trunc), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        assert_non_null(strstr(r.msg, "ended"));
        raw_request(nv, 6, comp, sizeof(comp), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        raw_request(nv, 6, NULL, 0, &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        assert_non_null(strstr(r.msg, "missing request"));
        assert_int_equal(sctx.handled, 0);
    }
    {
        nghttp2_nv nv[] = {NV(":method", "GET"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers")};
        raw_request(nv, 6, NULL, 0, &r);
        assert_int_equal(r.http, 405);
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "text/plain"), NV("te", "trailers")};
        raw_request(nv, 6, one, sizeof(one), &r);
        assert_int_equal(r.http, 415);
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc+json"), NV("te", "trailers")};
        raw_request(nv, 6, one, sizeof(one), &r);
        assert_int_equal(r.http, 200);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_UNIMPLEMENTED);
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc")};
        raw_request(nv, 5, one, sizeof(one), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        assert_non_null(strstr(r.msg, "te"));
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers"),
                           NV("grpc-encoding", "gzip")};
        raw_request(nv, 7, one, sizeof(one), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_UNIMPLEMENTED);
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers"),
                           NV("grpc-timeout", "10x")};
        raw_request(nv, 7, one, sizeof(one), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_INTERNAL);
        assert_non_null(strstr(r.msg, "grpc-timeout"));
    }
    {
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers"),
                           NV("x-big", "")};
        memset(bigval, 'v', sizeof(bigval) - 1);
        nv[6].value = (uint8_t *)bigval;
        nv[6].valuelen = sizeof(bigval) - 1;
        raw_request(nv, 7, one, sizeof(one), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(r.msg, "headers"));
    }
    {
        /* A declared length over the method's limit is refused at HEADERS. */
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Small"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers"),
                           NV("content-length", "5000")};
        static uint8_t body[5000];
        raw_request(nv, 7, body, sizeof(body), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(r.msg, "exceeds 1005"));
        assert_int_equal(sctx.handled, 0);
    }
    {
        /* Headers and then nothing: the body timeout ends it. */
        nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"),
                           NV(":path", "/t.Svc/Echo"), NV(":authority", "a"),
                           NV("content-type", "application/grpc"), NV("te", "trailers")};
        memset(&r, 0, sizeof(r));
        r.stall = true;
        raw_request(nv, 6, one, sizeof(one), &r);
        assert_int_equal(r.grpc, SFL_GRPC_STATUS_DEADLINE_EXCEEDED);
        assert_non_null(strstr(r.msg, "not complete 60000 ms after its headers"));
        assert_int_equal(sctx.handled, 0);
    }
}

/* ---- interop: a stock gRPC client (python3-grpcio) over plain h2c ---------
 *
 * A small libuv TCP server pumps bytes between sockets and server sessions,
 * the way the real transport will, and python's grpc calls it. Skipped when
 * python3-grpcio is not installed. */

static const char interop_py[] =
    "import sys, grpc\n"
    "ch = grpc.insecure_channel('127.0.0.1:' + sys.argv[1])\n"
    "def expect(code, fn):\n"
    "    try:\n"
    "        fn()\n"
    "    except grpc.RpcError as e:\n"
    "        if e.code() != code:\n"
    "            raise SystemExit('want %s got %s: %s' % (code, e.code(), e.details()))\n"
    "        return e.details()\n"
    "    raise SystemExit('want %s, the call succeeded' % code)\n"
    "echo = ch.unary_unary('/t.Svc/Echo')\n"
    "assert echo(b'hello', timeout=5) == b'hello'\n"
    "big = bytes(range(256)) * 200\n"
    "assert echo(big, timeout=5) == big\n"
    "got = list(ch.unary_stream('/t.Svc/Stream')(b'5', timeout=5))\n"
    "assert got == [b''] + [b'm%d' % i for i in range(1, 5)], got\n"
    "d = expect(grpc.StatusCode.INVALID_ARGUMENT,\n"
    "           lambda: ch.unary_unary('/t.Svc/Fail')(b'x', timeout=5))\n"
    "assert d == 'bad input: 100% sure\\n\\u00e9t\\u00e9 \\x01', repr(d)\n"
    "expect(grpc.StatusCode.UNIMPLEMENTED, lambda: ch.unary_unary('/t.Svc/Nope')(b'x'))\n"
    "expect(grpc.StatusCode.DEADLINE_EXCEEDED,\n"
    "       lambda: ch.unary_unary('/t.Svc/Hold')(b'x', timeout=0.3))\n"
    "expect(grpc.StatusCode.RESOURCE_EXHAUSTED, lambda: echo(b'z' * 100000, timeout=5))\n"
    "assert echo(b'still fine', timeout=5) == b'still fine'\n"
    "print('interop ok', flush=True)\n";

#define MAX_CONNS 8

typedef struct {
    uv_tcp_t tcp;
    sfl_grpc_session_t *s;
    bool used;
    bool closing;
} conn_t;

static struct {
    uv_loop_t loop;
    uv_tcp_t server;
    bool listening;
    uv_timer_t timer;
    uv_process_t proc;
    /* client test: the child's stdin (closed to stop it) and stdout */
    uv_pipe_t in, out;
    bool pipes;
    bool ci_started;
    uv_connect_t creq;
    char line[32];
    size_t line_len;
    int calls_left;
    conn_t conns[MAX_CONNS];
    int64_t exit_status;
    int term_signal;
    bool exited;
    int feed_errors;
    int accepted;
    long ticks;
} io;

typedef struct {
    uv_write_t req;
    uint8_t data[];
} wreq_t;

static void ci_maybe_finish(void);

static void on_written(uv_write_t *req, int status)
{
    (void)status;
    free(req); /* the wreq_t starts with req */
}

static void conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;

    /* Outside every session callback: the reaper's place. */
    sfl_grpc_session_free(c->s);
    c->s = NULL;
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void conn_flush(conn_t *c)
{
    const uint8_t *p;
    size_t n;

    if (c->closing)
        return;
    for (;;) {
        assert_int_equal(sfl_grpc_session_pending(c->s, &p, &n), 0);
        if (n == 0)
            break;
        wreq_t *w = malloc(sizeof(*w) + n);
        assert_non_null(w);
        memcpy(w->data, p, n);
        uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)n);
        if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
            free(w);
            conn_close(c);
            return;
        }
        sfl_grpc_session_consumed(c->s, n);
    }
    if (sfl_grpc_session_done(c->s))
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char rbuf[65536];

    (void)h;
    (void)suggested;
    *b = uv_buf_init(rbuf, sizeof(rbuf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    conn_t *c = st->data;

    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n > 0 && sfl_grpc_session_feed(c->s, (const uint8_t *)b->base, (size_t)n) != 0) {
        fprintf(stderr, "feed: %s\n", sfl_last_error());
        io.feed_errors++;
    }
    conn_flush(c);
    ci_maybe_finish();
}

static void on_conn(uv_stream_t *srv, int status)
{
    sfl_grpc_config_t cfg = {.max_message = 65536};
    conn_t *c = NULL;

    assert_int_equal(status, 0);
    for (int i = 0; i < MAX_CONNS && c == NULL; i++)
        if (!io.conns[i].used)
            c = &io.conns[i];
    assert_non_null(c);
    memset(c, 0, sizeof(*c));
    c->used = true;
    io.accepted++;
    assert_int_equal(uv_tcp_init(&io.loop, &c->tcp), 0);
    c->tcp.data = c;
    assert_int_equal(uv_accept(srv, (uv_stream_t *)&c->tcp), 0);
    assert_int_equal(sfl_grpc_server_new(&cfg, methods, N_METHODS, &sctx, &c->s), 0);
    assert_int_equal(uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read), 0);
    conn_flush(c); /* our SETTINGS */
}

static void on_timer(uv_timer_t *t)
{
    uint64_t next;

    (void)t;
    for (int i = 0; i < MAX_CONNS; i++) {
        conn_t *c = &io.conns[i];
        if (!c->used || c->closing || c->s == NULL) /* NULL: still connecting */
            continue;
        assert_int_equal(sfl_grpc_session_tick(c->s, &next), 0);
        conn_flush(c);
    }
    ci_maybe_finish();
    if (++io.ticks == 1500) /* 30 s: the client hangs, stop it */
        uv_process_kill(&io.proc, SIGKILL);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    io.exit_status = status;
    io.term_signal = sig;
    io.exited = true;
    uv_close((uv_handle_t *)p, NULL);
    if (io.listening)
        uv_close((uv_handle_t *)&io.server, NULL);
    if (io.pipes) {
        if (!uv_is_closing((uv_handle_t *)&io.in))
            uv_close((uv_handle_t *)&io.in, NULL);
        uv_close((uv_handle_t *)&io.out, NULL);
    }
    uv_close((uv_handle_t *)&io.timer, NULL);
    for (int i = 0; i < MAX_CONNS; i++)
        if (io.conns[i].used)
            conn_close(&io.conns[i]);
}

static void test_grpc_python_interop(void **state)
{
    struct sockaddr_in addr;
    struct sockaddr_storage name;
    int namelen = sizeof(name);
    char port[16];
    char *args[] = {"/usr/bin/python3", "-c", (char *)interop_py, port, NULL};
    uv_stdio_container_t stdio[3];
    uv_process_options_t opt;

    (void)state;
    if (system("/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1") != 0)
        skip();
    memset(&io, 0, sizeof(io));
    memset(&sctx, 0, sizeof(sctx));
    assert_int_equal(uv_loop_init(&io.loop), 0);
    assert_int_equal(uv_tcp_init(&io.loop, &io.server), 0);
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    assert_int_equal(uv_tcp_bind(&io.server, (const struct sockaddr *)&addr, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&io.server, 8, on_conn), 0);
    io.listening = true;
    assert_int_equal(uv_tcp_getsockname(&io.server, (struct sockaddr *)&name, &namelen), 0);
    snprintf(port, sizeof(port), "%d", ntohs(((struct sockaddr_in *)&name)->sin_port));
    assert_int_equal(uv_timer_init(&io.loop, &io.timer), 0);
    assert_int_equal(uv_timer_start(&io.timer, on_timer, 20, 20), 0);
    memset(&opt, 0, sizeof(opt));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    opt.file = args[0];
    opt.args = args;
    opt.exit_cb = on_exit_cb;
    opt.stdio = stdio;
    opt.stdio_count = 3;
    assert_int_equal(uv_spawn(&io.loop, &io.proc, &opt), 0);
    uv_run(&io.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&io.loop), 0);
    assert_true(io.exited);
    assert_int_equal(io.term_signal, 0);
    assert_int_equal(io.exit_status, 0);
    assert_true(io.accepted >= 1);
    assert_int_equal(io.feed_errors, 0);
    assert_int_equal(sctx.n_held, 1); /* the Hold call, cancelled by its deadline */
    assert_int_equal(sctx.cancelled, 1);
    assert_int_equal(sfl_grpc_finish(sctx.held[0], SFL_GRPC_STATUS_OK, NULL), -ECANCELED);
}

/* The other direction: our client against python's grpc server. */
static const char server_py[] =
    "import sys, time, grpc\n"
    "from concurrent import futures\n"
    "def stream(req, ctx):\n"
    "    for i in range(int(req)):\n"
    "        yield b'm%d' % i if i else b''\n"
    "def fail(req, ctx):\n"
    "    ctx.abort(grpc.StatusCode.INVALID_ARGUMENT,\n"
    "              'bad input: 100% sure\\n\\u00e9t\\u00e9 \\x01')\n"
    "def slow(req, ctx):\n"
    "    while ctx.is_active():\n"
    "        time.sleep(0.01)\n"
    "    return req\n"
    "h = grpc.method_handlers_generic_handler('t.Svc', {\n"
    "    'Echo': grpc.unary_unary_rpc_method_handler(lambda req, ctx: req),\n"
    "    'Stream': grpc.unary_stream_rpc_method_handler(stream),\n"
    "    'Fail': grpc.unary_unary_rpc_method_handler(fail),\n"
    "    'Slow': grpc.unary_unary_rpc_method_handler(slow),\n"
    "    'Big': grpc.unary_unary_rpc_method_handler(lambda req, ctx: b'x' * 100000)})\n"
    "srv = grpc.server(futures.ThreadPoolExecutor(4), handlers=[h])\n"
    "port = srv.add_insecure_port('127.0.0.1:0')\n"
    "srv.start()\n"
    "print(port, flush=True)\n"
    "sys.stdin.read()\n"
    "srv.stop(0)\n";

enum { CI_ECHO, CI_BIGREQ, CI_STREAM, CI_FAIL, CI_NOPE, CI_SLOW, CI_BIGRESP, CI_N };
static result_t ci_res[CI_N];
static uint8_t ci_big[60000];

/* Runs inside the session's callbacks: only note it, act after. */
static void ci_one_done(void)
{
    io.calls_left--;
}

/* After feed / tick returned: all answered? Hang up, then let python go. */
static void ci_maybe_finish(void)
{
    if (!io.ci_started || io.calls_left != 0 || io.conns[0].closing)
        return;
    sfl_grpc_session_shutdown(io.conns[0].s);
    conn_flush(&io.conns[0]);
    conn_close(&io.conns[0]);
    uv_close((uv_handle_t *)&io.in, NULL);
}

static void ci_unary(sfl_grpc_call_t *call, int status, const char *message,
                     const uint8_t *resp, size_t len, void *ud)
{
    c_unary(call, status, message, resp, len, ud);
    ci_one_done();
}

static void ci_done(sfl_grpc_call_t *call, int status, const char *message, void *ud)
{
    c_done(call, status, message, ud);
    ci_one_done();
}

static void ci_connected(uv_connect_t *req, int status)
{
    sfl_grpc_config_t cfg = {.max_message = 65536};
    conn_t *c = &io.conns[0];
    static const struct {
        const char *path;
        const char *req;
        uint32_t timeout;
    } unary[] = {{"/t.Svc/Echo", "hello", 5000}, {"/t.Svc/Fail", "x", 5000},
                 {"/t.Svc/Nope", "x", 0},        {"/t.Svc/Slow", "x", 200},
                 {"/t.Svc/Big", "x", 5000}};
    static const int idx[] = {CI_ECHO, CI_FAIL, CI_NOPE, CI_SLOW, CI_BIGRESP};

    (void)req;
    assert_int_equal(status, 0);
    assert_int_equal(sfl_grpc_client_new(&cfg, "http", "127.0.0.1", &c->s), 0);
    for (size_t i = 0; i < sizeof(ci_big); i++)
        ci_big[i] = (uint8_t)(i * 13);
    for (size_t i = 0; i < sizeof(unary) / sizeof(unary[0]); i++)
        assert_int_equal(sfl_grpc_call_unary(c->s, unary[i].path, (const uint8_t *)unary[i].req,
                                             strlen(unary[i].req), unary[i].timeout, ci_unary,
                                             &ci_res[idx[i]], NULL),
                         0);
    assert_int_equal(sfl_grpc_call_unary(c->s, "/t.Svc/Echo", ci_big, sizeof(ci_big), 5000,
                                         ci_unary, &ci_res[CI_BIGREQ], NULL),
                     0);
    assert_int_equal(sfl_grpc_call_stream(c->s, "/t.Svc/Stream", (const uint8_t *)"5", 1, 5000,
                                          c_msg, ci_done, &ci_res[CI_STREAM], NULL),
                     0);
    io.calls_left = CI_N;
    io.ci_started = true; /* ci_maybe_finish may act from now on */
    assert_int_equal(uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read), 0);
    conn_flush(c);
}

/* The child prints its port on the first line. */
static void ci_read_port(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct sockaddr_in addr;
    conn_t *c = &io.conns[0];

    if (n <= 0)
        return;
    for (ssize_t i = 0; i < n && io.line_len < sizeof(io.line) - 1; i++) {
        if (b->base[i] != '\n') {
            io.line[io.line_len++] = b->base[i];
            continue;
        }
        io.line[io.line_len] = '\0';
        uv_read_stop(st);
        assert_int_equal(uv_ip4_addr("127.0.0.1", atoi(io.line), &addr), 0);
        memset(c, 0, sizeof(*c));
        c->used = true;
        assert_int_equal(uv_tcp_init(&io.loop, &c->tcp), 0);
        c->tcp.data = c;
        assert_int_equal(
            uv_tcp_connect(&io.creq, &c->tcp, (const struct sockaddr *)&addr, ci_connected), 0);
        return;
    }
}

static void test_grpc_python_server_interop(void **state)
{
    char *args[] = {"/usr/bin/python3", "-c", (char *)server_py, NULL};
    uv_stdio_container_t stdio[3];
    uv_process_options_t opt;

    (void)state;
    if (system("/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1") != 0)
        skip();
    memset(&io, 0, sizeof(io));
    memset(ci_res, 0, sizeof(ci_res));
    assert_int_equal(uv_loop_init(&io.loop), 0);
    assert_int_equal(uv_pipe_init(&io.loop, &io.in, 0), 0);
    assert_int_equal(uv_pipe_init(&io.loop, &io.out, 0), 0);
    io.pipes = true;
    assert_int_equal(uv_timer_init(&io.loop, &io.timer), 0);
    assert_int_equal(uv_timer_start(&io.timer, on_timer, 20, 20), 0);
    memset(&opt, 0, sizeof(opt));
    stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    stdio[0].data.stream = (uv_stream_t *)&io.in;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&io.out;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    opt.file = args[0];
    opt.args = args;
    opt.exit_cb = on_exit_cb;
    opt.stdio = stdio;
    opt.stdio_count = 3;
    assert_int_equal(uv_spawn(&io.loop, &io.proc, &opt), 0);
    assert_int_equal(uv_read_start((uv_stream_t *)&io.out, on_alloc, ci_read_port), 0);
    uv_run(&io.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&io.loop), 0);
    assert_true(io.exited);
    assert_int_equal(io.term_signal, 0);
    assert_int_equal(io.exit_status, 0);
    assert_int_equal(io.feed_errors, 0);
    assert_int_equal(io.calls_left, 0);
    for (int i = 0; i < CI_N; i++)
        assert_int_equal(ci_res[i].done, 1);
    assert_int_equal(ci_res[CI_ECHO].status, SFL_GRPC_STATUS_OK);
    assert_int_equal(ci_res[CI_ECHO].len, 5);
    assert_memory_equal(ci_res[CI_ECHO].resp, "hello", 5);
    assert_int_equal(ci_res[CI_BIGREQ].status, SFL_GRPC_STATUS_OK);
    assert_int_equal(ci_res[CI_BIGREQ].len, sizeof(ci_big));
    assert_memory_equal(ci_res[CI_BIGREQ].resp, ci_big, sizeof(ci_big));
    assert_int_equal(ci_res[CI_STREAM].status, SFL_GRPC_STATUS_OK);
    assert_int_equal(ci_res[CI_STREAM].n_msgs, 5);
    assert_int_equal(ci_res[CI_FAIL].status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(ci_res[CI_FAIL].message, FAIL_MSG);
    assert_int_equal(ci_res[CI_NOPE].status, SFL_GRPC_STATUS_UNIMPLEMENTED);
    assert_int_equal(ci_res[CI_SLOW].status, SFL_GRPC_STATUS_DEADLINE_EXCEEDED);
    assert_int_equal(ci_res[CI_BIGRESP].status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
}

/* ---- allocation failures ------------------------------------------------- */

static int new_server(void)
{
    sfl_grpc_session_t *s = NULL;
    int rc = sfl_grpc_server_new(NULL, methods, N_METHODS, &sctx, &s);

    sfl_grpc_session_free(s);
    return rc;
}

static int new_client(void)
{
    sfl_grpc_session_t *s = NULL;
    int rc = sfl_grpc_client_new(NULL, "https", "host:443", &s);

    sfl_grpc_session_free(s);
    return rc;
}

/* A whole exchange with every allocation failing in turn (sessions made
 * before arming): each run must end cleanly — a status, an error, or OK —
 * never a crash or a leak (ASan checks the latter). */
static void test_grpc_failalloc(void **state)
{
    static result_t r, rs;
    long made = 0;

    (void)state;
    FAILALLOC_EACH(new_server(), (void)0);
    FAILALLOC_EACH(new_client(), (void)0);
    lenient = true;
    failalloc_install();
    for (long i = 0;; i++) {
        pair_t p;
        const uint8_t *buf;
        size_t n;
        int rc;

        memset(&r, 0, sizeof(r));
        memset(&rs, 0, sizeof(rs));
        failalloc_arm(-1);
        pair_open(&p, NULL, NULL);
        failalloc_arm(i);
        rc = sfl_grpc_call_unary(p.cli, "/t.Svc/Echo", (const uint8_t *)"abc", 3, 0, c_unary, &r,
                                 NULL);
        assert_true(rc == 0 || rc == SFL_ENOMEM);
        int rc2 = sfl_grpc_call_stream(p.cli, "/t.Svc/Stream", (const uint8_t *)"5", 1, 0, c_msg,
                                       c_done, &rs, NULL);
        assert_true(rc2 == 0 || rc2 == SFL_ENOMEM);
        for (int k = 0; k < 200; k++) {
            size_t moved = 0;
            int e;

            e = sfl_grpc_session_pending(p.cli, &buf, &n);
            assert_true(e == 0 || e == SFL_ENOMEM);
            if (n > 0) {
                e = sfl_grpc_session_feed(p.srv, buf, n);
                assert_true(e == 0 || e == SFL_ENOMEM || e == SFL_EPARSE);
                sfl_grpc_session_consumed(p.cli, n);
                moved += n;
            }
            e = sfl_grpc_session_pending(p.srv, &buf, &n);
            assert_true(e == 0 || e == SFL_ENOMEM);
            if (n > 0) {
                e = sfl_grpc_session_feed(p.cli, buf, n);
                assert_true(e == 0 || e == SFL_ENOMEM || e == SFL_EPARSE);
                sfl_grpc_session_consumed(p.srv, n);
                moved += n;
            }
            if (moved == 0)
                break;
        }
        made = failalloc_count();
        failalloc_arm(-1);
        pair_close(&p);
        if (rc == 0)
            assert_int_equal(r.done, 1); /* free reports what was left open */
        if (rc2 == 0)
            assert_int_equal(rs.done, 1);
        if (i >= made) /* the armed failure was never reached: all done */
            break;
        assert_true(i < 100000);
    }
    failalloc_uninstall();
    lenient = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grpc_unary_ok),
        cmocka_unit_test(test_grpc_no_hpack_table),
        cmocka_unit_test(test_grpc_idle_releases_pages),
        cmocka_unit_test(test_grpc_unary_async_reply),
        cmocka_unit_test(test_grpc_unknown_method),
        cmocka_unit_test(test_grpc_error_status_percent_encoded),
        cmocka_unit_test(test_grpc_server_stream),
        cmocka_unit_test(test_grpc_client_cancel_seen_by_server),
        cmocka_unit_test(test_grpc_oversized_message),
        cmocka_unit_test(test_grpc_roles_and_sizes_before_body),
        cmocka_unit_test(test_grpc_refuse_every_call),
        cmocka_unit_test(test_grpc_too_many_streams),
        cmocka_unit_test(test_grpc_reset_rate_limit),
        cmocka_unit_test(test_grpc_garbage_closes_session),
        cmocka_unit_test(test_grpc_timeout_parse),
        cmocka_unit_test(test_grpc_deadline_client_side),
        cmocka_unit_test(test_grpc_deadline_server_side),
        cmocka_unit_test(test_grpc_idle_timeout),
        cmocka_unit_test(test_grpc_ping),
        cmocka_unit_test(test_grpc_ping_hostile),
        cmocka_unit_test(test_grpc_graceful_shutdown),
        cmocka_unit_test(test_grpc_free_cancels_calls),
        cmocka_unit_test(test_grpc_config_checked),
        cmocka_unit_test(test_grpc_bad_requests),
        cmocka_unit_test(test_grpc_python_interop),
        cmocka_unit_test(test_grpc_python_server_interop),
        cmocka_unit_test(test_grpc_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* gRPC over HTTP/2 (nghttp2) over any byte transport.
 *
 * A session is one HTTP/2 connection, server or client side. It never touches
 * a socket: its owner feeds it the bytes read from the peer and writes out the
 * bytes it produces, so the same code runs over TLS, plain TCP or an in-memory
 * pair in tests. It never blocks, starts no thread, and reads time only
 * through the configured clock.
 *
 * Driving a session (what a transport does):
 *   bytes read       -> sfl_grpc_session_feed(s, buf, n)
 *   then, and after every other call below or on wake:
 *                       sfl_grpc_session_pending(s, &p, &n) until n == 0,
 *                       writing p[0..n) and sfl_grpc_session_consumed(s, w)
 *   a timer          -> sfl_grpc_session_tick(s, &next_ms); re-arm in next_ms
 *   sfl_grpc_session_done(s) -> close the transport, then sfl_grpc_session_free
 *                       from outside the session's callbacks (a reaper).
 * The application's own calls (reply, send, finish, cancel, call_unary,
 * call_stream) queue output outside feed; they call the wake callback so the
 * transport knows to write. tests/unit/test_grpc.c has such a transport over
 * libuv TCP (h2c), used for interop tests with python3-grpcio both ways.
 *
 * Callbacks into the application (handlers, cancel, message, done) run only
 * from inside feed, pending, tick and free, never from inside the function
 * the application called. From a callback the application may use every
 * function here except feed, pending, consumed, tick and free on that
 * session; sessions are never freed inside their own callback chain.
 *
 * Limits, all checked before anything is allocated for the peer's data:
 * message size (both directions), concurrent streams
 * (SETTINGS_MAX_CONCURRENT_STREAMS, excess streams refused with
 * REFUSED_STREAM), header list size (SETTINGS_MAX_HEADER_LIST_SIZE, counted as
 * in RFC 9113: name + value + 32 per field), frame size
 * (SETTINGS_MAX_FRAME_SIZE), bytes queued per call, idle time (no open call
 * for idle_timeout_ms: GOAWAY, then done). A server checks the caller's role
 * and the method's request size when the HEADERS end, before any DATA is
 * kept, and grants flow-control window by hand: a request may send 16 KiB
 * until its message prefix says its size and that size fits the
 * connection's max_buffered and the shared budget (it is then admitted:
 * reserved, and given a 256 KiB window, or none more when its whole body
 * fits the 16 KiB: a small request goes in one flight and draws no
 * WINDOW_UPDATE); waiting requests are admitted oldest first as bytes are
 * released. The request memory a peer can make a server hold is thus at
 * most max_buffered plus 16 KiB per stream (plus, once, the first flight
 * before the peer has our SETTINGS: 256 KiB), and a process holds at most
 * the budget plus 16 KiB per open stream.
 *
 * Statuses follow the gRPC spec: the server answers with :status 200,
 * content-type application/grpc, DATA, then trailers grpc-status and
 * grpc-message (percent-encoded); an error before any message goes out as a
 * single "trailers-only" HEADERS frame. Requests must be POST with
 * content-type application/grpc or application/grpc+proto (else HTTP 405 or
 * 415), te: trailers (else INTERNAL), a known :path (else UNIMPLEMENTED), no
 * grpc-encoding other than identity (else UNIMPLEMENTED), a well-formed
 * grpc-timeout (else INTERNAL), and exactly one request message (else
 * INTERNAL). Stream resets map to statuses as gRPC clients do:
 * REFUSED_STREAM -> UNAVAILABLE, CANCEL -> CANCELLED, ENHANCE_YOUR_CALM ->
 * RESOURCE_EXHAUSTED, others -> INTERNAL. */
#ifndef SFL_GRPC_H
#define SFL_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_grpc_session sfl_grpc_session_t;
typedef struct sfl_grpc_call sfl_grpc_call_t;
typedef struct sfl_grpc_budget sfl_grpc_budget_t;

/* gRPC status codes (the canonical numbering). */
typedef enum {
    SFL_GRPC_STATUS_OK = 0,
    SFL_GRPC_STATUS_CANCELLED = 1,
    SFL_GRPC_STATUS_UNKNOWN = 2,
    SFL_GRPC_STATUS_INVALID_ARGUMENT = 3,
    SFL_GRPC_STATUS_DEADLINE_EXCEEDED = 4,
    SFL_GRPC_STATUS_NOT_FOUND = 5,
    SFL_GRPC_STATUS_ALREADY_EXISTS = 6,
    SFL_GRPC_STATUS_PERMISSION_DENIED = 7,
    SFL_GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
    SFL_GRPC_STATUS_FAILED_PRECONDITION = 9,
    SFL_GRPC_STATUS_ABORTED = 10,
    SFL_GRPC_STATUS_OUT_OF_RANGE = 11,
    SFL_GRPC_STATUS_UNIMPLEMENTED = 12,
    SFL_GRPC_STATUS_INTERNAL = 13,
    SFL_GRPC_STATUS_UNAVAILABLE = 14,
    SFL_GRPC_STATUS_DATA_LOSS = 15,
    SFL_GRPC_STATUS_UNAUTHENTICATED = 16
} sfl_grpc_status_t;

/* "OK", "UNIMPLEMENTED", ...; "?" for a value outside 0..16. */
const char *sfl_grpc_status_name(int status);

typedef enum {
    SFL_GRPC_KIND_UNARY,
    SFL_GRPC_KIND_SERVER_STREAM
} sfl_grpc_kind_t;

/* Per-connection configuration. Zero fields take the default in brackets. */
typedef struct {
    /* largest gRPC message either way, bytes [4 MiB] */
    uint32_t max_message;
    /* SETTINGS_MAX_CONCURRENT_STREAMS the server accepts [100] */
    uint32_t max_streams;
    /* SETTINGS_MAX_HEADER_LIST_SIZE accepted from the peer, bytes [16 KiB] */
    uint32_t max_header_list;
    /* SETTINGS_MAX_FRAME_SIZE accepted from the peer, 16384..16777215 [16384] */
    uint32_t max_frame;
    /* bytes of outgoing messages a call may have queued [2 * max_message] */
    uint32_t max_queued;
    /* close after this long without an open call, ms; UINT32_MAX = never [300000] */
    uint32_t idle_timeout_ms;
    /* monotonic clock in ms; NULL = CLOCK_MONOTONIC. Tests pass a fake. */
    uint64_t (*now_ms)(void *ud);
    void *clock_ud;
    /* server: called when the session refuses a request before a handler
     * sees it (unknown method, bad headers, oversized or malformed message),
     * with the request's path (possibly ""), the status sent and its message
     * (both borrowed); ud is the session's. NULL = not told. */
    void (*on_refused)(const char *path, int status, const char *message, void *ud);
    /* server: the roles of the connection's peer, as a bit mask checked
     * against each method's `roles` when the request's HEADERS end [0: none],
     * and its name for refusal messages ("agent") [""] */
    uint32_t peer_roles;
    const char *peer_role_name;
    /* server: request bytes this connection may hold before the handlers
     * run; past it the session stops granting flow-control window, so the
     * peer can send at most one window more [max_message]. Counted in
     * message bytes (a message's 5-byte gRPC prefix is not held), so a
     * message of exactly max_message fits; a request larger than this, or
     * than the budget's limit, is answered RESOURCE_EXHAUSTED as soon as its
     * prefix arrives, never left waiting */
    uint32_t max_buffered;
    /* server: a request's body must be complete this long after its
     * HEADERS, ms; UINT32_MAX = no bound [60000] */
    uint32_t body_timeout_ms;
    /* server: budget shared with other sessions (the process-wide bound on
     * buffered request bytes); NULL = none */
    sfl_grpc_budget_t *budget;
    /* server: a peer that may call nothing (a revoked certificate). When
     * non-zero, every well-formed request, whatever its path, is answered
     * with this status and refuse_message (copied, cut to 255 bytes) as soon
     * as its HEADERS end: no handler runs and none of its DATA is kept. The
     * refusal goes through on_refused like any other [0: serve normally] */
    int refuse_status;
    const char *refuse_message;
    /* server: the token bucket of the peer's stream resets (RST_STREAM
     * CANCEL): reset_burst resets at once, reset_rate more a second; past
     * it the connection ends with GOAWAY INTERNAL_ERROR (nghttp2's defence
     * against "rapid reset", CVE-2023-44487) [0: nghttp2's 1000 and 33].
     * An agent's connection keeps the default; a front-end's carries its
     * agents' cancellations (an agent that leaves resets its Subscribe and
     * whatever call it had in flight), so the master raises both to the
     * calls the connection may hold (server/coord.c) */
    uint32_t reset_burst, reset_rate;
} sfl_grpc_config_t;

/* Server side. The handler owns `call` from the moment it is invoked until it
 * calls sfl_grpc_reply or sfl_grpc_finish, which it must do exactly once,
 * now or later, even after a cancel. req borrows the request message until
 * the handler returns. ud is the session's user data. */
typedef void (*sfl_grpc_handler_cb)(sfl_grpc_call_t *call, const uint8_t *req, size_t len,
                                    void *ud);
/* The peer reset the stream, the deadline passed or the connection is going
 * away: stop sending, then finish the call (sfl_grpc_finish releases it). */
typedef void (*sfl_grpc_cancel_cb)(sfl_grpc_call_t *call, void *ud);

typedef struct {
    /* "/package.Service/Method" */
    const char *path;
    sfl_grpc_kind_t kind;
    sfl_grpc_handler_cb handler;
    /* peers allowed: a bit mask of roles, one of which the session's
     * peer_roles must carry (PERMISSION_DENIED before any DATA is read,
     * naming roles_name); 0 = any peer */
    uint32_t roles;
    const char *roles_name;
    /* largest request message, bytes; 0 = the session's max_message. Checked
     * against content-length at HEADERS and the message prefix on arrival. */
    uint32_t max_request;
} sfl_grpc_method_t;

/* Client side. `message` is the decoded grpc-message ("" when none) and,
 * like resp / msg, is borrowed for the duration of the callback. The call
 * handle is valid until done / unary returns. */
typedef void (*sfl_grpc_unary_cb)(sfl_grpc_call_t *call, int status, const char *message,
                                  const uint8_t *resp, size_t len, void *ud);
typedef void (*sfl_grpc_message_cb)(sfl_grpc_call_t *call, const uint8_t *msg, size_t len,
                                    void *ud);
typedef void (*sfl_grpc_done_cb)(sfl_grpc_call_t *call, int status, const char *message,
                                 void *ud);

/* Called when the application queued output outside feed / pending / tick,
 * so the transport should write. */
typedef void (*sfl_grpc_wake_cb)(sfl_grpc_session_t *s, void *ud);

/* ---- budgets ---------------------------------------------------------- */

/* Request bytes that server sessions hold before their handlers run, summed
 * over every session given the budget. Past `limit` the sessions stop
 * granting flow-control window until bytes are released (a handler ran, a
 * stream ended), then resume by themselves. A budget and its sessions are
 * driven from one thread; free it after them. Returns owned. */
int sfl_grpc_budget_new(uint64_t limit, sfl_grpc_budget_t **out) SFL_MUST_CHECK;
void sfl_grpc_budget_free(sfl_grpc_budget_t *b);
/* Bytes held now by all its sessions. */
uint64_t sfl_grpc_budget_used(const sfl_grpc_budget_t *b);

/* ---- sessions --------------------------------------------------------- */

/* Server session for one accepted connection. Borrows methods[0..n) (must
 * outlive the session; paths unique) and cfg only during the call; ud is
 * passed to every handler. Returns owned (sfl_grpc_session_free).
 * SFL_EINVAL for a config value out of range. */
int sfl_grpc_server_new(const sfl_grpc_config_t *cfg, const sfl_grpc_method_t *methods,
                        size_t n, void *ud, sfl_grpc_session_t **out) SFL_MUST_CHECK;
/* Client session; scheme is "http" or "https", authority the server's
 * host[:port] (both copied). Returns owned (sfl_grpc_session_free). */
int sfl_grpc_client_new(const sfl_grpc_config_t *cfg, const char *scheme,
                        const char *authority, sfl_grpc_session_t **out) SFL_MUST_CHECK;

/* Tears the connection down at once: every open server call the application
 * still holds gets its cancel callback, every unfinished client call its done
 * callback with UNAVAILABLE, then the session is freed. Held server calls
 * stay valid until the application finishes them. Never call it from inside
 * one of the session's callbacks. NULL does nothing. */
void sfl_grpc_session_free(sfl_grpc_session_t *s);

/* Processes bytes from the peer (borrowed). A connection-level protocol
 * violation (not HTTP/2, bad frame, flood) queues a GOAWAY, makes the
 * session done once that is written and returns SFL_EPARSE
 * (sfl_last_error() has nghttp2's reason); SFL_ENOMEM likewise. Stream-level
 * errors only reset that stream. Bytes fed after the session stopped reading
 * are ignored: 0 after a clean close, the error again after a failure. May
 * already prepare output (pending returns it). */
int sfl_grpc_session_feed(sfl_grpc_session_t *s, const uint8_t *buf, size_t len) SFL_MUST_CHECK;

/* True when there may be bytes to write (for scheduling a write); it can
 * be true while pending yields nothing (flow control), so write until
 * pending gives 0 bytes rather than while this is true. */
bool sfl_grpc_session_want_write(sfl_grpc_session_t *s);
/* Borrows the next bytes to write (*len 0 when none). The bytes stay valid
 * and unchanged, whatever else is called, until sfl_grpc_session_consumed
 * covers them or the session is freed. SFL_ENOMEM or SFL_EIO (nghttp2 failed)
 * leave the session done. */
int sfl_grpc_session_pending(sfl_grpc_session_t *s, const uint8_t **buf,
                             size_t *len) SFL_MUST_CHECK;
/* n of the bytes last returned by pending were written. */
void sfl_grpc_session_consumed(sfl_grpc_session_t *s, size_t n);

/* Runs what is due at the clock's now: calls past their deadline end with
 * DEADLINE_EXCEEDED (client: done callback and RST_STREAM; server: trailers
 * and the cancel callback), an idle session sends GOAWAY. *next_ms = ms until
 * something is due next, UINT64_MAX if nothing is. Returns 0. */
int sfl_grpc_session_tick(sfl_grpc_session_t *s, uint64_t *next_ms);

/* Graceful close: GOAWAY, no new calls, open calls run to their end, then
 * the session is done. */
void sfl_grpc_session_shutdown(sfl_grpc_session_t *s);

/* Sends an HTTP/2 PING. The peer's HTTP/2 stack answers it (an ACK), not
 * its application: a peer whose calls are slow still answers within a
 * round trip, one frozen or cut off does not (a keepalive). SFL_EINVAL once
 * the session closes; SFL_ENOMEM, SFL_EIO. */
int sfl_grpc_session_ping(sfl_grpc_session_t *s) SFL_MUST_CHECK;
/* PING ACKs received so far: unchanged since a ping, no answer yet. */
uint64_t sfl_grpc_session_pongs(const sfl_grpc_session_t *s);

/* True once nothing is left to read or write: close the transport. */
bool sfl_grpc_session_done(sfl_grpc_session_t *s);

/* Open calls (streams not yet closed). */
size_t sfl_grpc_session_calls(const sfl_grpc_session_t *s);
/* Server: request bytes held now (received, handler not yet run). */
size_t sfl_grpc_session_buffered(const sfl_grpc_session_t *s);

void sfl_grpc_session_set_wake(sfl_grpc_session_t *s, sfl_grpc_wake_cb cb, void *ud);
/* The ud given to sfl_grpc_server_new (NULL for clients). */
void *sfl_grpc_session_user(const sfl_grpc_session_t *s);

/* ---- server calls ------------------------------------------------------ */

/* Queues one response message (copied). Response headers go out with the
 * first message. SFL_ELIMIT: len > max_message or the call's queue would
 * exceed max_queued (a peer that does not read); SFL_EINVAL: a second
 * message on a unary call or after finish; -ECANCELED: the call was
 * cancelled (nothing queued; still finish it); SFL_ENOMEM. */
int sfl_grpc_send(sfl_grpc_call_t *call, const uint8_t *msg, size_t len) SFL_MUST_CHECK;
/* Ends the call with status and message (NUL-terminated, may be NULL;
 * percent-encoded on the wire, truncated to 1024 bytes): after the queued
 * messages, or as trailers-only if none was sent. Always releases the call:
 * the handle is invalid afterwards, whatever the return value. -ECANCELED:
 * it had been cancelled, nothing sent; SFL_EINVAL: bad status, or OK on a
 * unary call that sent no message (sent as INTERNAL instead). */
int sfl_grpc_finish(sfl_grpc_call_t *call, int status, const char *message);
/* sfl_grpc_send then sfl_grpc_finish(OK); always releases the call. If the
 * message cannot be sent the call ends with RESOURCE_EXHAUSTED (too large) or
 * INTERNAL and the send error is returned. */
int sfl_grpc_reply(sfl_grpc_call_t *call, const uint8_t *msg, size_t len);
/* Registers the cancel callback (replaces any previous one). */
void sfl_grpc_call_on_cancel(sfl_grpc_call_t *call, sfl_grpc_cancel_cb cb, void *ud);
/* Absolute deadline on the session clock (ms) from grpc-timeout, UINT64_MAX
 * when the client set none. */
uint64_t sfl_grpc_call_deadline(const sfl_grpc_call_t *call);
/* The method's path. */
const char *sfl_grpc_call_path(const sfl_grpc_call_t *call);
/* The session, or NULL once the call was cancelled by a reset or the
 * connection was freed. */
sfl_grpc_session_t *sfl_grpc_call_session(const sfl_grpc_call_t *call);
/* Bytes queued and not yet handed to HTTP/2. */
size_t sfl_grpc_call_queued(const sfl_grpc_call_t *call);

/* ---- client calls ------------------------------------------------------ */

/* Starts a unary call to path with request req[0..len) (copied); timeout_ms
 * 0 = no deadline, else sent as grpc-timeout and enforced locally. cb runs
 * exactly once (from feed, pending, tick or free) with the status and, on
 * OK, the response. *call (may be NULL) receives a handle for
 * sfl_grpc_cancel. -ENOTCONN: the session is closing; SFL_ELIMIT: len >
 * max_message or no stream id left; SFL_ENOMEM. On error cb never runs. */
int sfl_grpc_call_unary(sfl_grpc_session_t *s, const char *path, const uint8_t *req,
                        size_t len, uint32_t timeout_ms, sfl_grpc_unary_cb cb, void *ud,
                        sfl_grpc_call_t **call) SFL_MUST_CHECK;
/* Starts a server-streaming call: on_message for each response message,
 * then on_done exactly once. Errors as sfl_grpc_call_unary. */
int sfl_grpc_call_stream(sfl_grpc_session_t *s, const char *path, const uint8_t *req,
                         size_t len, uint32_t timeout_ms, sfl_grpc_message_cb on_message,
                         sfl_grpc_done_cb on_done, void *ud,
                         sfl_grpc_call_t **call) SFL_MUST_CHECK;
/* Cancels a client call (RST_STREAM CANCEL). No callback runs for it after
 * this, and the handle is invalid. Allowed from the call's own callbacks. */
void sfl_grpc_cancel(sfl_grpc_call_t *call);

/* ---- helpers (exposed for tests and logs) -------------------------------- */

/* Parses a grpc-timeout value: 1 to 8 ASCII digits and a unit H M S m u n;
 * *ms rounds up (1n -> 1 ms, 0n -> 0). SFL_EPARSE otherwise. */
int sfl_grpc_timeout_parse(const char *v, size_t len, uint64_t *ms) SFL_MUST_CHECK;
/* Formats ms as a grpc-timeout value ("1500m", "100000S", ...), rounding up
 * when it must change unit; NUL-terminated, at most 10 bytes. */
void sfl_grpc_timeout_format(uint64_t ms, char out[16]);
/* Percent-encodes msg[0..len) as grpc-message does (bytes outside 0x20..0x7e
 * and '%' become %XX). Writes at most cap bytes including the NUL; returns
 * the length the full encoding needs (excluding the NUL), like snprintf. */
size_t sfl_grpc_message_encode(const char *msg, size_t len, char *out, size_t cap);
/* Decodes s[0..len) in place (s has room for len + 1 bytes); malformed
 * escapes are kept literally. NUL-terminates and returns the new length. */
size_t sfl_grpc_message_decode(char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif

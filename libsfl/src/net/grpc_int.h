/* Library-internal: the gRPC session's and call's structures, shared by
 * grpc.c (HTTP/2 and the gRPC protocol) and grpcadmit.c (admission
 * control: a server request's bytes are held back until its size is known
 * and fits its connection's max_buffered and the process budget). */
#ifndef SFL_NET_GRPC_INT_H
#define SFL_NET_GRPC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "sfl/core/idmap.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcframe.h"

/* What a server grants instead. A stream starts with PENDING_WINDOW, all a
 * request may send before it is admitted (its size known and within the
 * budgets; see admit); an admitted stream gets SERVER_WINDOW, unless its
 * whole body fits PENDING_WINDOW (then no WINDOW_UPDATE is sent for it at
 * all). PENDING_WINDOW is one default HTTP/2 frame, so that every small
 * request (heartbeats, Join, a small model's update) goes in one flight
 * without waiting a round trip for a WINDOW_UPDATE (results/wire.md); a
 * connection holds at most max_streams of them unbudgeted. The
 * connection's window bounds only the first flight, sent before the peer
 * has our SETTINGS. Requests are updates and commands, not models. */
#define PENDING_WINDOW 16384
#define SERVER_WINDOW (256 << 10)

typedef enum {
    /* normal operation */
    SESSION_OPEN,
    /* GOAWAY sent or received: no new calls, open calls run to their end */
    SESSION_DRAINING,
    /* fatal error or idle: GOAWAY queued, only writing remains */
    SESSION_CLOSING,
    /* nothing left to read or write */
    SESSION_DONE
} session_state_t;

typedef enum {
    CALL_RECV_HEADERS, /* server: request headers arriving */
    CALL_RECV_BODY,    /* server: headers accepted, request message arriving */
    CALL_ACTIVE,       /* server: handler owns it; client: waiting for the result */
    CALL_FINISHING,    /* server: end of response queued (or rejected) */
    CALL_CLOSED,       /* server: stream gone, application still holds it */
    CALL_DONE          /* client: final callback delivered or cancelled */
} call_state_t;

struct sfl_grpc_call {
    /* owning session; NULL once detached (stream closed, session freed) */
    sfl_grpc_session_t *s;
    sfl_grpc_call_t *prev, *next;
    int32_t stream_id;
    call_state_t state;
    bool server;
    /* server: the application has not finished the call yet */
    bool app_holds;
    /* server: the cancel callback was (or is being) delivered */
    bool cancelled;
    /* the peer's END_STREAM arrived */
    bool remote_closed;
    /* server: response HEADERS submitted; client: request HEADERS written */
    bool headers_sent;
    /* client: cancelled before its HEADERS were written; reset on write */
    bool rst_on_open;
    /* server: trailers handed to nghttp2 */
    bool trailers_sent;
    sfl_grpc_kind_t kind;
    uint64_t deadline;
    /* header accounting and flags for the current header block */
    uint32_t hdr_bytes;
    unsigned hdr;
    uint64_t content_length;
    sfl_grpcframe_t rx;
    /* server: bytes of the request reserved in the budgets once its size is
     * known and fits (admitted); before that its DATA waits in pend,
     * unacknowledged, so flow control bounds it */
    size_t reserved;
    bool admitted;
    /* server: the whole body fits PENDING_WINDOW: its stream's window is
     * never grown nor replenished (no WINDOW_UPDATE for it) */
    bool one_flight;
    uint8_t *pend;
    size_t pend_len;
    /* server: in the budget's queue of calls waiting for admission */
    sfl_grpc_call_t *qprev, *qnext;
    bool queued_b;
    /* server: in its session's list of calls whose DATA waits in pend */
    sfl_grpc_call_t *wprev, *wnext;
    bool waiting;
    /* server: the caller's deadline while deadline bounds the body */
    uint64_t req_deadline;
    /* server: request */
    const sfl_grpc_method_t *method;
    uint8_t *req;
    size_t req_len;
    int n_req;
    /* outgoing messages (server responses, client request) */
    struct outmsg *q_head, *q_tail;
    size_t queued;
    int n_sent;
    /* server: status for deferred trailers */
    int status;
    char *trailer_msg;
    sfl_grpc_cancel_cb on_cancel;
    void *cancel_ud;
    /* client: callbacks and the response being received */
    sfl_grpc_unary_cb unary_cb;
    sfl_grpc_message_cb msg_cb;
    sfl_grpc_done_cb done_cb;
    void *ud;
    int http_status;
    int grpc_status; /* -1 until received */
    char *grpc_message;
    uint8_t *resp;
    size_t resp_len;
    int n_resp;
    /* server: start of an unknown :path, for the error message;
     * client: the path called */
    char path[96];
};

/* nghttp2 blocks of 16 KiB and more per session on pages of their own
 * (grpc.c's allocator); beyond that many, they come from the heap. */
#define H2_PAGED_SLOTS 4

struct sfl_grpc_session {
    nghttp2_session *h2;
    session_state_t state;
    bool server;
    bool goaway_recv;
    uint32_t max_message;
    uint32_t max_streams;
    uint32_t max_header_list;
    uint32_t max_frame;
    uint32_t max_queued;
    uint32_t idle_ms;
    uint64_t (*now_ms)(void *ud);
    void *clock_ud;
    void (*on_refused)(const char *path, int status, const char *message, void *ud);
    /* server */
    uint32_t peer_roles;
    const char *peer_role_name;
    uint32_t max_buffered;
    uint32_t body_ms;
    sfl_grpc_budget_t *budget;
    /* every request answered with this status and message (config) */
    int refuse_status;
    char refuse_msg[256];
    /* the peer's stream resets nghttp2 allows (config; 0: its default) */
    uint32_t reset_burst, reset_rate;
    /* request bytes reserved by admitted calls, and waiting in pend */
    size_t reserved, pending;
    const sfl_grpc_method_t *methods;
    size_t n_methods;
    void *ud;
    /* client */
    char *scheme;
    char *authority;
    /* open calls, most recent first; and by stream id (every frame
     * callback finds its call: a front-end's link to its master carries a
     * stream per agent, thousands) */
    sfl_grpc_call_t *calls;
    size_t n_calls;
    sfl_idmap_t by_id;
    /* no call's deadline is earlier than this (a bound, not exact: the
     * tick walks the calls only once it passes) */
    uint64_t next_deadline;
    /* server: calls whose DATA waits for admission, in the order their
     * first byte came (grpcadmit.c walks these, not every call) */
    sfl_grpc_call_t *whead, *wtail;
    uint64_t idle_since;
    /* bytes produced by nghttp2 and not yet consumed by the transport */
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    sfl_grpc_wake_cb wake;
    void *wake_ud;
    /* > 0 while inside feed / pending / tick / free */
    int depth;
    /* nghttp2 sent GOAWAY with an error on its own */
    bool peer_broke;
    /* the error that ended the session (0: none, or a clean close) */
    int fatal;
    /* nghttp2's last error message, for sfl_last_error() */
    char reason[160];
    /* nghttp2's blocks on pages of their own (its 16 KiB frame buffer),
     * given back to the kernel while the session has nothing to send */
    void *paged[H2_PAGED_SLOTS];
    size_t paged_len[H2_PAGED_SLOTS];
    /* paged[i] is the frame buffer (allocated by nghttp2's session setup,
     * new_h2 set): only its pages are released; others (a large header
     * value nghttp2 keeps) hold live bytes */
    bool paged_framebuf[H2_PAGED_SLOTS];
    bool new_h2;
    /* nghttp2_session_mem_send's last answer was "nothing": its frame
     * buffer holds no byte still to be sent */
    bool h2_drained;
    /* PING ACKs received (sfl_grpc_session_pongs) */
    uint64_t pongs;
};

/* One framed message waiting to be handed to nghttp2 (grpc.c). */
struct outmsg;

/* ---- grpc.c, for admission ---------------------------------------------- */

/* c leaves its session's list of calls waiting for admission (if in it). */
void sfl__grpc_wait_del(sfl_grpc_session_t *s, sfl_grpc_call_t *c);

/* Asks the application to drive s (its wake callback), unless s is inside
 * one of its own entry points. */
void sfl__grpc_wake(sfl_grpc_session_t *s);
/* Refuses a request before the handler saw it. */
void sfl__grpc_reject(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int http, int status,
                      const char *msg);
/* An admitted request's bytes, into its decoder. */
void sfl__grpc_server_data(sfl_grpc_session_t *s, sfl_grpc_call_t *c, const uint8_t *data,
                           size_t len);
/* The whole request is decoded: check it and run the handler. */
void sfl__grpc_server_request_done(sfl_grpc_session_t *s, sfl_grpc_call_t *c);

/* ---- grpcadmit.c ------------------------------------------------------- */

/* Admits c if its request's size is known and fits the budgets (grpcadmit.c
 * says how); a request that can never fit is refused. */
void sfl__grpc_admit(sfl_grpc_session_t *s, sfl_grpc_call_t *c);
/* Admits this session's waiting calls that now fit, oldest first. */
void sfl__grpc_admit_waiting(sfl_grpc_session_t *s);
/* len bytes of DATA arrived on stream id (c its call, or NULL). */
void sfl__grpc_server_chunk(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int32_t id,
                            const uint8_t *data, size_t len);
/* c holds no request bytes any more: handler ran, refused, stream gone. */
void sfl__grpc_unhold(sfl_grpc_session_t *s, sfl_grpc_call_t *c);
/* c leaves the budget's queue of waiting calls (if it is in it). */
void sfl__grpc_budget_dequeue(sfl_grpc_budget_t *b, sfl_grpc_call_t *c);
/* The budget's oldest waiting call may fit now: its session is woken
 * (unless it is self, which admits its own). */
void sfl__grpc_budget_kick(sfl_grpc_budget_t *b, const sfl_grpc_session_t *self);
/* The session is going: what it reserved goes back to the process budget. */
void sfl__grpc_admit_drop(sfl_grpc_session_t *s);

#endif

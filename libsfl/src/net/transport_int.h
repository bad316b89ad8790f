/* Library-internal: the connection structure and the transport vtable shared
 * by transport.c (the core and plain TCP) and tls.c. */
#ifndef SFL_NET_TRANSPORT_INT_H
#define SFL_NET_TRANSPORT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "net/srcmap.h"
#include "sfl/net/transport.h"

/* Connection states; only conn_step() in transport.c changes them. */
typedef enum {
    SFL_CONN_CONNECTING, /* client: TCP connect in progress */
    SFL_CONN_HANDSHAKE,  /* TCP up, transport handshake running */
    SFL_CONN_OPEN,       /* application data flows */
    SFL_CONN_SHUTDOWN,   /* flushing output, FIN, waiting for the peer's */
    SFL_CONN_CLOSING,    /* uv_close issued, waiting for the close callbacks */
    SFL_CONN_CLOSED      /* callbacks done, memory about to go */
} sfl_conn_state_t;

/* One transport (STYLE rule 9). The core owns the socket, timers and
 * queue; a transport turns socket bytes into application bytes and back. */
typedef struct {
    const char *name;
    /* Per-connection setup after the handles exist; 0 or an error. */
    int (*init)(sfl_conn_t *c);
    /* TCP is up: start the handshake, or call sfl__conn_ready at once. */
    void (*start)(sfl_conn_t *c);
    /* Bytes from the socket (borrowed), in HANDSHAKE or OPEN state. */
    void (*feed)(sfl_conn_t *c, const uint8_t *buf, size_t len);
    /* Deliver what is buffered after a read-budget pause (OPEN state). */
    void (*resume)(sfl_conn_t *c);
    /* Application bytes to send (OPEN state; the queue cap is checked). */
    int (*write)(sfl_conn_t *c, const uint8_t *buf, size_t len);
    /* Graceful close begins: queue the transport's goodbye (close_notify). */
    void (*shutdown)(sfl_conn_t *c);
    int (*peer)(const sfl_conn_t *c, sfl_peer_t *out);
    /* Release the transport state; NULL-safe on c->xport. */
    void (*destroy)(sfl_conn_t *c);
} sfl__xport_t;

struct sfl_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;   /* connect / handshake / idle / close deadline */
    uv_idle_t defer;    /* deferred close work and read-budget resume */
    uv_connect_t connect_req;
    uv_shutdown_t shutdown_req;
    uv_loop_t *loop;
    const sfl__xport_t *type;
    void *xport;        /* transport state, owned by type */
    sfl_tls_t *tls;     /* referenced TLS context or NULL */
    sfl_conn_state_t state;
    sfl_conn_cbs_t cbs;
    void *data;
    sfl_listener_t *listener; /* accepting listener, NULL once detached */
    sfl_conn_t *prev, *next;  /* listener's list of live connections */
    uint64_t connect_ms, handshake_ms, idle_ms, close_ms, unacked_ms;
    size_t read_budget, high_water, write_max;
    size_t queued;       /* bytes in uv_write requests not yet completed */
    size_t budget_used;  /* bytes delivered since the last yield */
    uint64_t deadline;   /* uv_now() time the current non-idle wait ends */
    uint64_t last_active;
    int status;          /* first error, reported by on_close */
    int handles;         /* handles initialised and not yet closed */
    /* accepted: src is the peer's address (an IPv6 one cut to its /64), the
     * key of the listener's per-source handshake count; counted: this
     * connection holds one of its listener's handshake slots */
    uint8_t src[SFL_SRC_KEY];
    unsigned accepted : 1, opened : 1, silent : 1, reading : 1, paused : 1,
        congested : 1, eof : 1, fin_sent : 1, shutdown_pending : 1, peeked : 1, counted : 1;
    char name[64];       /* "ip:port" of the peer, for messages */
    char detail[256];    /* what went wrong, for sfl_last_error() */
};

/* A write request with its bytes in the same allocation. */
typedef struct {
    uv_write_t req;
    sfl_conn_t *conn;
    size_t len;
    uint8_t data[];
} sfl__wreq_t;

/* Returns owned (sfl__free) or NULL. */
sfl__wreq_t *sfl__wreq_new(size_t len);
/* Send w->data[0..w->len) on c's socket; takes w, also on failure. On failure
 * the connection aborts (a hole in a TLS stream cannot be repaired). */
int sfl__conn_send(sfl_conn_t *c, sfl__wreq_t *w);
/* The transport handshake is done: the connection opens. */
void sfl__conn_ready(sfl_conn_t *c);
/* Application bytes for on_data; counts against the read budget. */
void sfl__conn_deliver(sfl_conn_t *c, const uint8_t *buf, size_t len);
/* 1 while on_data may be called and the read budget is not spent. */
int sfl__conn_can_deliver(const sfl_conn_t *c);
/* The transport saw the peer's orderly end (TLS close_notify). */
void sfl__conn_eof(sfl_conn_t *c);
/* The transport failed with status; graceful = flush what is queued (a TLS
 * alert) before closing. The detail is recorded for the callbacks. */
void sfl__conn_fail(sfl_conn_t *c, int status, int graceful, const char *fmt, ...)
    SFL_PRINTF(4, 5);

/* tls.c: transport table, and references on contexts. */
extern const sfl__xport_t sfl__xport_tls;
void sfl__tls_ref(sfl_tls_t *tls);
int sfl__tls_is_server(const sfl_tls_t *tls);
/* Tests: check certificate dates (verification and resumption) against
 * now instead of the clock; 0 = the clock again. */
void sfl__tls_set_check_time(sfl_tls_t *tls, time_t now);

#endif

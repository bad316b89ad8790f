/* A gRPC client channel: one connection (transport.h, TLS or plain TCP)
 * carrying one gRPC client session (grpc.h), driven as grpc.h describes:
 * bytes read are fed to the session; its output is written while the
 * connection is not congested, and again on drain, on a wake and at the
 * session's next deadline (checked at least every second); the connection
 * is closed once the session is done. The application only starts and
 * cancels calls on sfl_grpcconn_session().
 *
 * Lifecycle, like sfl_conn's: the library allocates the channel
 * (sfl_grpcconn_connect) and frees it. The application sees it in on_open
 * once the connection is open (TLS: server verified), and last in on_close:
 *   - on_close(g, status, detail) runs exactly once, also when the connection
 *     never opened. status is 0 after a clean close, else the first error:
 *     the session's (SFL_EPARSE: the peer broke HTTP/2; SFL_ENOMEM, SFL_EIO)
 *     or a write's (SFL_ELIMIT, ...) when the channel failed, otherwise the
 *     transport's (-ECONNREFUSED, -ETIMEDOUT, -EPROTO, ...). detail
 *     (borrowed for the call) says why in words: "closed" after a clean
 *     close, "protocol error: ...", "http2: ..." or "write: ..." when the
 *     channel's own feed, output or write failed, else the transport's.
 *   - When on_close returns, the session is freed: calls still open end
 *     with UNAVAILABLE, their callbacks running after on_close, and then g
 *     is invalid.
 * Nothing is freed inside a callback chain the application is in: the
 * channel and its session go from a loop callback of their own (STYLE
 * rule 6), and no callback runs inside a call the application made into
 * this API. Everything runs on the loop's thread. */
#ifndef SFL_GRPCCONN_H
#define SFL_GRPCCONN_H

#include <stddef.h>

#include <uv.h>

#include "sfl/core/error.h"
#include "sfl/net/grpc.h"
#include "sfl/net/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_grpcconn sfl_grpcconn_t;

typedef void (*sfl_grpcconn_open_cb)(sfl_grpcconn_t *g, void *ud);
typedef void (*sfl_grpcconn_close_cb)(sfl_grpcconn_t *g, int status, const char *detail,
                                      void *ud);

typedef struct {
    sfl_grpcconn_open_cb on_open; /* optional */
    sfl_grpcconn_close_cb on_close;
} sfl_grpcconn_cbs_t;

/* Connects to addr with opts (scheme "https" when opts->tls is set, else
 * "http") and creates the client session with cfg (may be NULL) for
 * authority (host[:port], copied). opts, cfg and cbs are copied; ud is
 * passed to the callbacks. Calls may be started on the session at once:
 * they go out when the connection opens. On 0 *out is the channel and
 * on_close will run; on failure no callback runs and *out is NULL:
 * sfl_grpc_client_new's or sfl_conn_connect's error. */
int sfl_grpcconn_connect(uv_loop_t *loop, const struct sockaddr *addr,
                         const sfl_conn_opts_t *opts, const sfl_grpc_config_t *cfg,
                         const char *authority, const sfl_grpcconn_cbs_t *cbs, void *ud,
                         sfl_grpcconn_t **out) SFL_MUST_CHECK;

/* The session, from connect until on_close returns (borrowed). Use it for
 * calls only; the channel drives it. */
sfl_grpc_session_t *sfl_grpcconn_session(const sfl_grpcconn_t *g);
/* The connection (borrowed), for sfl_conn_peer and sfl_conn_peer_name;
 * NULL once it has closed. Never close it or change its data directly. */
sfl_conn_t *sfl_grpcconn_conn(const sfl_grpcconn_t *g);

/* Close: the session sends GOAWAY, its queued output (GOAWAY, resets of
 * cancelled calls) is written, then the connection is closed and on_close
 * follows; calls still open end with UNAVAILABLE after it. Allowed from any callback, including the
 * session's; idempotent; does nothing once the connection has closed. */
void sfl_grpcconn_close(sfl_grpcconn_t *g);

/* ---- server side ------------------------------------------------------
 *
 * The same channel over a connection the application accepted (its
 * listener's on_connect with status 0). The application keeps its
 * listener's sfl_conn callbacks and hands each event on: on_data to
 * sfl_grpcconn_feed, on_drain to sfl_grpcconn_pump, on_close to
 * sfl_grpcconn_closed; the channel ticks the session, writes its output
 * (now, on drain, on a wake, at the next deadline) and closes the
 * connection once the session is done or sfl_grpcconn_close was called.
 * sud is the session's user data (given to the handlers); cbs->on_close runs
 * once from the loop after sfl_grpcconn_closed, when the channel is about
 * to be freed (on_open is not used). */
int sfl_grpcconn_accept(uv_loop_t *loop, sfl_conn_t *c, const sfl_grpc_config_t *cfg,
                        const sfl_grpc_method_t *methods, size_t n, void *sud,
                        const sfl_grpcconn_cbs_t *cbs, void *ud,
                        sfl_grpcconn_t **out) SFL_MUST_CHECK;
/* Feeds bytes read; returns the session's feed result (SFL_EPARSE: the peer
 * broke HTTP/2, the GOAWAY is on its way and the connection closes after
 * it; sfl_last_error() says why). */
int sfl_grpcconn_feed(sfl_grpcconn_t *g, const uint8_t *buf, size_t len);
/* Ticks the session and writes what it has (the connection drained, or
 * the application queued output from outside the session's callbacks). */
void sfl_grpcconn_pump(sfl_grpcconn_t *g);
/* The connection closed (status as sfl_conn's on_close): frees the session
 * at once, so the calls the application still holds get their cancel
 * callbacks now; the channel itself follows from the loop (cbs->on_close). */
void sfl_grpcconn_closed(sfl_grpcconn_t *g, int status);
/* On a server channel sfl_grpcconn_close is graceful: GOAWAY, no new calls,
 * the open ones run to their end, then the connection closes. */
/* Adds every byte written to *counter from now on (NULL: stop). */
void sfl_grpcconn_count_sent(sfl_grpcconn_t *g, uint64_t *counter);

/* Splits "host:port" or "[v6]:port" into host[0..hcap) (brackets removed)
 * and port[0..pcap): host non-empty, port 1 or more decimal digits, both
 * fitting with their NUL. SFL_EINVAL otherwise, with a detail naming s. */
int sfl_grpcconn_split_hostport(const char *s, char *host, size_t hcap, char *port,
                                size_t pcap) SFL_MUST_CHECK;

/* The coordinator's default addresses, declared here once for the
 * coordinator (its listen and admin_listen defaults) and its clients
 * (sflctl's coordinator default is the Admin listener). */
#define SFL_LISTEN_DEFAULT "0.0.0.0:7443"
#define SFL_ADMIN_LISTEN_DEFAULT "127.0.0.1:7444"

#ifdef __cplusplus
}
#endif

#endif

/* Byte transport over libuv TCP: plain TCP or TLS 1.3 behind one small
 * vtable, so the HTTP/2 layer above sees the same sfl_conn_t either way.
 *
 * Lifecycle. Connections are allocated by the library (sfl_conn_connect, or a
 * listener accepting) and freed by it. The application sees a connection
 * first in on_connect and last in on_close:
 *   - on_connect(c, 0) when the connection is open (client: TCP connected
 *     and, for TLS, handshake done and server verified; server: accepted and,
 *     for TLS, client verified). A client whose connection fails gets
 *     on_connect(c, status < 0) and then on_close.
 *   - on_data(c, buf, len) for each chunk received while open; buf is
 *     borrowed for the duration of the callback only.
 *   - on_drain(c) (optional) when the output queue, after passing the
 *     high-water mark, has fallen back to half of it.
 *   - on_close(c, status) exactly once, always the last callback; c is freed
 *     when it returns. status is 0 after a clean close (ours or the peer's),
 *     else the first error: -ETIMEDOUT (idle, connect or handshake timeout),
 *     -ECONNREFUSED, -ECONNRESET, -EPROTO (TLS failure), SFL_ECERT (TLS
 *     failed on a certificate that retrying cannot make acceptable: unknown
 *     CA, bad signature, host name or IP mismatch, revoked, or the peer's
 *     alert refusing ours; not validity dates, which a clock not yet set
 *     can explain: those stay -EPROTO), ... ; during
 *     on_connect/on_close failures sfl_last_error() names the cause, with
 *     OpenSSL's reason string for TLS failures.
 * TLS 1.3 detail: a client finishes its handshake before the server has
 * checked the client's certificate, so a client the server refuses sees
 * on_connect(c, 0) and then on_close(c, SFL_ECERT) with the server's alert
 * ("tlsv1 alert unknown ca", "... certificate required") as detail.
 * No callback ever runs inside a call the application made into this API:
 * closing only marks the connection and the work happens later in the loop
 * (STYLE rule 6), so calling sfl_conn_close or sfl_conn_write from inside
 * on_data is safe.
 *
 * Limits: the output queue has a hard cap (write_max), each connection
 * yields the loop after read_budget bytes, every wait has a timeout.
 * Everything runs on the loop's thread. Writing to a peer that has gone away
 * raises SIGPIPE on some systems: programs must ignore it. */
#ifndef SFL_TRANSPORT_H
#define SFL_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sfl/core/error.h"
#include "sfl/net/tlsticket.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_conn sfl_conn_t;
typedef struct sfl_listener sfl_listener_t;
typedef struct sfl_tls sfl_tls_t;

typedef void (*sfl_conn_connect_cb)(sfl_conn_t *c, int status);
typedef void (*sfl_conn_data_cb)(sfl_conn_t *c, const uint8_t *buf, size_t len);
typedef void (*sfl_conn_drain_cb)(sfl_conn_t *c);
typedef void (*sfl_conn_close_cb)(sfl_conn_t *c, int status);
/* A connection accepted by l failed before it opened (handshake refused,
 * handshake timeout, too many connections or handshakes from its source,
 * evicted, ...); the application never saw it. detail is borrowed for the
 * call. */
typedef void (*sfl_listener_reject_cb)(sfl_listener_t *l, int status, const char *detail);

typedef struct {
    sfl_conn_connect_cb on_connect;
    sfl_conn_data_cb on_data;
    sfl_conn_drain_cb on_drain; /* optional */
    sfl_conn_close_cb on_close;
} sfl_conn_cbs_t;

/* Options; a zero field takes its default. Copied by the call. */
typedef struct {
    /* TLS context (sfl_tls_new); NULL = plain TCP. The connection keeps a
     * reference, so the caller may sfl_tls_free it at any time. */
    sfl_tls_t *tls;
    /* Client: connect plus handshake must finish within this (10 s). */
    uint64_t connect_timeout_ms;
    /* Server: the TLS handshake must finish within this after accept (10 s). */
    uint64_t handshake_timeout_ms;
    /* An open connection with no bytes received and no write completed for
     * this long is closed with -ETIMEDOUT (120 s). */
    uint64_t idle_timeout_ms;
    /* Linux: bytes sent and not acknowledged for this long (a cut link, a
     * peer that vanished) make the kernel abort the connection
     * (TCP_USER_TIMEOUT), which then closes with an error; TCP keepalive
     * probes every 10 s of silence make this hold for a quiet connection
     * too. Without it a cut link is noticed only when the idle timeout
     * passes, and never while we keep writing into the send buffer (30 s). */
    uint64_t unacked_timeout_ms;
    /* A closing connection waits this long for its output to drain and the
     * peer to close before the socket is dropped (2 s). */
    uint64_t close_timeout_ms;
    /* Bytes delivered to on_data before the connection yields one loop
     * iteration to the others (256 KiB). */
    size_t read_budget;
    /* sfl_conn_congested() is true at or above this many queued output
     * bytes (1 MiB). */
    size_t write_high_water;
    /* Hard cap on queued output; a write that would pass it fails with
     * SFL_ELIMIT and queues nothing (16 MiB; at most INT_MAX / 2). */
    size_t write_max;
    /* Listener: connections alive at once; more are refused (4096). */
    size_t max_conns;
    /* Listener: connections still in their handshake at once (512). A
     * pending TLS handshake costs ~50 KB (OpenSSL's state and buffers), so
     * this bounds what half-open connections can hold. Every connection is
     * taken from the listen backlog at once (none waits there behind
     * others); one that finds every slot taken evicts the oldest handshake
     * of the source holding the most slots, if that source holds more than
     * the newcomer's would after it, and is refused otherwise (a storm of
     * clients backs off and retries). A handshake's deadline
     * (handshake_timeout_ms) runs from accept whatever the peer sends. */
    size_t max_handshakes;
    /* Listener: handshakes in progress from one source address (an IPv6
     * address counts by its /64); more are refused at accept (64; at most
     * max_handshakes). With it a flood needs max_handshakes /
     * max_handshakes_per_ip addresses to take every slot, and a source
     * holding fewer cannot be evicted by it. */
    size_t max_handshakes_per_ip;
} sfl_conn_opts_t;

/* Connect to addr (IPv4 or IPv6; resolving names is the caller's job).
 * cbs is copied, data is the initial user data. On 0, *out is the connection
 * and on_connect will be called; on failure no callback runs and *out is
 * NULL: SFL_EINVAL (bad options: sfl_tls_t made for a server, ...),
 * SFL_ENOMEM, or a -errno from the socket layer. */
int sfl_conn_connect(uv_loop_t *loop, const struct sockaddr *addr, const sfl_conn_opts_t *opts,
                     const sfl_conn_cbs_t *cbs, void *data, sfl_conn_t **out);

/* Queue len bytes (copied; buf stays the caller's) for sending. Returns 0,
 * or, queueing nothing: SFL_EINVAL if the connection is not open (handshake
 * pending, closing), SFL_ELIMIT if the queue would pass write_max, SFL_ENOMEM;
 * or -EPROTO (TLS failed) or -errno (socket failed), after which the
 * connection closes. A write that succeeds may leave the queue congested:
 * stop producing until on_drain. */
int sfl_conn_write(sfl_conn_t *c, const uint8_t *buf, size_t len);
/* Output bytes queued and not yet handed to the kernel. */
size_t sfl_conn_queued(const sfl_conn_t *c);
/* 1 while the queue is at or above the high-water mark (until on_drain). */
int sfl_conn_congested(const sfl_conn_t *c);

/* Graceful close: no more on_data; queued output is flushed, then TLS
 * close_notify and TCP FIN are sent and the peer is given close_timeout_ms
 * to close its side. Idempotent; on_close follows later. */
void sfl_conn_close(sfl_conn_t *c);
/* Immediate close: queued output is dropped. Idempotent; on_close follows. */
void sfl_conn_abort(sfl_conn_t *c);

void *sfl_conn_data(const sfl_conn_t *c);
void sfl_conn_set_data(sfl_conn_t *c, void *data);
/* "ip:port" of the peer into buf[0..cap); SFL_ELIMIT if it does not fit,
 * -errno if the socket has none. */
int sfl_conn_peer_name(const sfl_conn_t *c, char *buf, size_t cap);

/* Roles carried by federation certificates as the subject's OU (made by
 * deploy/pki/sfl-pki, see docs/pki.md). A certificate with no OU, an
 * unknown one or several different ones has no role. */
typedef enum {
    SFL_ROLE_NONE = 0,
    SFL_ROLE_AGENT = 1,
    SFL_ROLE_ADMIN = 2,
    SFL_ROLE_COORDINATOR = 3
} sfl_role_t;

/* "agent", "admin", "coordinator" or "none". */
const char *sfl_role_name(sfl_role_t role);

#define SFL_PEER_CN_MAX 64 /* RFC 5280 ub-common-name */

/* Identity of a verified TLS peer. */
typedef struct {
    /* subject CN as UTF-8; "" if absent, repeated, longer than
     * SFL_PEER_CN_MAX bytes or containing a NUL or control character */
    char cn[SFL_PEER_CN_MAX + 1];
    /* from the subject OU */
    sfl_role_t role;
    /* SHA-256 of the DER certificate: binds an identity to this certificate */
    uint8_t sha256[32];
    /* the same as 64 lowercase hex digits ("sfl-pki fingerprint" prints it) */
    char fingerprint[65];
} sfl_peer_t;

/* Identity of the verified peer of an open TLS connection. SFL_ENOTFOUND
 * for plain TCP, a connection not yet open, or a peer without certificate
 * (possible only when client certificates are not required). */
int sfl_conn_peer(const sfl_conn_t *c, sfl_peer_t *out);

/* Listen on addr and accept connections with opts, cbs and data (the
 * initial user data of every connection, also sfl_listener_data). Accepted
 * connections are announced by cbs.on_connect(c, 0) once open; those that
 * fail earlier go to on_reject (optional, may be NULL). Returns owned
 * (sfl_listener_close), or SFL_EINVAL (sfl_tls_t made for a client), SFL_ENOMEM,
 * or -errno from bind/listen (-EADDRINUSE ...). */
int sfl_listener_new(uv_loop_t *loop, const struct sockaddr *addr, const sfl_conn_opts_t *opts,
                     const sfl_conn_cbs_t *cbs, sfl_listener_reject_cb on_reject, void *data,
                     sfl_listener_t **out);
/* Bound port (useful after binding port 0), or -errno. */
int sfl_listener_port(const sfl_listener_t *l);
void *sfl_listener_data(const sfl_listener_t *l);
/* Stop accepting and free the listener once its handle has closed (it is
 * invalid on return). Connections still in their handshake are aborted
 * silently; open ones live on. NULL is a no-op. */
void sfl_listener_close(sfl_listener_t *l);

/* TLS 1.3 only, mutual authentication against one federation CA. */
typedef struct {
    /* PEM certificate (chain, leaf first) and its private key. Required for
     * a server; a client without them connects anonymously (a server that
     * requires client certificates refuses it). */
    const char *cert_file;
    const char *key_file;
    /* PEM CA certificate(s) peers must chain to. Required. The system trust
     * store is never used. */
    const char *ca_file;
    /* Client: the name the server certificate must carry in its
     * subjectAltName (DNS name or IP literal); also sent as SNI when it is a
     * DNS name. Required for a client. */
    const char *verify_host;
    /* Server: refuse clients without a valid certificate. */
    int require_client_cert;
    /* ALPN protocol offered (client) or selected (server), e.g. "h2"; NULL
     * for none. */
    const char *alpn;
    /* Refuse a peer that does not negotiate alpn: a server sends the
     * no_application_protocol alert, a client fails after the handshake. */
    int alpn_required;
} sfl_tls_config_t;

/* Build a TLS context for servers (server = 1) or clients from cfg (copied;
 * files are read now). Returns owned (sfl_tls_free): SFL_EINVAL for a
 * missing required field, SFL_EIO when a file cannot be loaded or the key
 * does not match the certificate (detail: file and OpenSSL's reason),
 * SFL_ENOMEM. */
int sfl_tls_new(const sfl_tls_config_t *cfg, int server, sfl_tls_t **out);
/* Drop the caller's reference; connections and listeners keep theirs.
 * NULL is a no-op. */
void sfl_tls_free(sfl_tls_t *tls);

/* Keying material exported from an open TLS connection (RFC 8446 section
 * 7.5, no context value): len bytes (1..64) under label into out. Both ends
 * of one connection get the same bytes and any other connection different
 * ones, so a signature over them is bound to this connection (Join's proof
 * of possession, docs/security.md). SFL_EINVAL for plain TCP, a connection
 * not open (handshake pending, closing) or bad arguments. */
int sfl_conn_export_keying_material(const sfl_conn_t *c, const char *label, uint8_t *out,
                                    size_t len) SFL_MUST_CHECK;
/* Server: enable TLS 1.3 session resumption with stateless tickets sealed
 * by keys (copied; keys->k[0] seals, every key opens; the caller rotates
 * and calls again, see sfl/net/tlsticket.h), each ticket valid lifetime_s.
 * Before the first call a server issues no tickets. A resumed connection
 * skips the certificate exchange; the peer is the one of the handshake that
 * made the ticket (sfl_conn_peer shows it, same fingerprint), resumed only
 * while that certificate is within its validity dates, and only by a server
 * with the same CA file and the same certificate. A client context keeps
 * the newest session its server sent (in memory) and offers it on its next
 * connection; a failed handshake forgets it. SFL_EINVAL (client context, no
 * key, lifetime 0), SFL_ENOMEM. */
int sfl_tls_set_ticket_keys(sfl_tls_t *tls, const sfl_ticket_keys_t *keys,
                            uint32_t lifetime_s) SFL_MUST_CHECK;
/* 1 if the open TLS connection c was resumed from a ticket, else 0. */
int sfl_conn_resumed(const sfl_conn_t *c);

/* SHA-256 of the context's own certificate (the leaf of cert_file), as
 * sfl_peer_t.sha256 shows it to the other end. SFL_ENOTFOUND for a client
 * context without a certificate. */
int sfl_tls_cert_sha256(const sfl_tls_t *tls, uint8_t out[32]) SFL_MUST_CHECK;

/* At most this many bytes of DER in one certificate a relay passes on
 * (sfl_tls_verify_der, sfl_conn_peer_der); federation certificates are
 * well under 2 KiB. */
#define SFL_TLS_CERT_DER_MAX 8192

/* DER of the verified peer certificate of an open TLS connection into
 * buf[0..cap), its size in *len: what a front-end relays so that the
 * master can verify it (sfl_tls_verify_der). SFL_ENOTFOUND (plain TCP, no
 * peer certificate, not open), SFL_ELIMIT (larger than cap), SFL_ENOMEM. */
int sfl_conn_peer_der(const sfl_conn_t *c, uint8_t *buf, size_t cap, size_t *len) SFL_MUST_CHECK;

/* Verifies a client certificate that reached us without a handshake (DER,
 * one certificate, as a front-end relays its agent's) exactly as this
 * server context verifies a client certificate in its handshake: it chains
 * to the context's CA file within the same depth, is within its validity
 * dates now, and its extendedKeyUsage names clientAuth. out gets its
 * identity as sfl_conn_peer shows a connection's (CN, role, SHA-256).
 * Revocation, the role wanted and name binding are the caller's, as for a
 * connection. 0, or SFL_EINVAL (NULL argument, client context), SFL_ELIMIT
 * (more than SFL_TLS_CERT_DER_MAX bytes), SFL_EPARSE (not one DER
 * certificate, or bytes after it), SFL_ECERT (does not verify: the detail
 * says why, with the validity date for an expired one), SFL_ENOMEM. */
int sfl_tls_verify_der(const sfl_tls_t *tls, const uint8_t *der, size_t len,
                       sfl_peer_t *out) SFL_MUST_CHECK;

/* The identity-key binding (JoinRequest.cert_proof): a signature with the
 * private key of this context's own certificate (its key_file) over
 *   u8 16 | "sfl-join-cert-v1" | identity_pk (32 bytes)
 * - the certificate's holder says "my agent identity key is identity_pk".
 * A front-end relays the Join with the certificate; the master checks the
 * signature against it (sfl_tls_cert_binding_verify), so a front-end that
 * has seen a certificate cannot bind its name to a key of its own. No TLS
 * signature can pass for it (TLS 1.3 signs 64 spaces first). Ed25519
 * keys sign the bytes, others their SHA-256. sig gets at most
 * SFL_TLS_SIG_MAX bytes, *siglen how many. SFL_EINVAL (NULL argument, a
 * context without a certificate), SFL_EIO (the key cannot sign). */
#define SFL_TLS_SIG_MAX 512
int sfl_tls_cert_binding_sign(const sfl_tls_t *tls, const uint8_t identity_pk[32],
                              uint8_t sig[SFL_TLS_SIG_MAX], size_t *siglen) SFL_MUST_CHECK;
/* 0 if sig is that signature by the key of the certificate der (parsed
 * here, not verified: sfl_tls_verify_der does that); SFL_EBADSIG if not,
 * SFL_EPARSE for a der that is no certificate, SFL_EINVAL for NULL
 * arguments or a signature over SFL_TLS_SIG_MAX bytes. */
int sfl_tls_cert_binding_verify(const uint8_t *der, size_t len, const uint8_t identity_pk[32],
                                const uint8_t *sig, size_t siglen) SFL_MUST_CHECK;

/* Checks an identity before it is used (sfl-coordinator --check): each file
 * can be read, cert_file is a PEM certificate (more certificates after it
 * are taken as its chain), key_file a PEM private key that matches it, and
 * the certificate verifies against ca_file now (chains to it, not expired,
 * not yet valid) and carries role as its subject OU. 0, or an error whose
 * detail names the file: -errno (cannot open), SFL_EIO (not PEM of the
 * right kind), SFL_ECERT (key does not match, does not verify, wrong role).
 * Reads only; no network. */
int sfl_tls_check_identity(const char *cert_file, const char *key_file, const char *ca_file,
                           sfl_role_t role) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

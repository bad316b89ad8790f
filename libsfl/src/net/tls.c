#include "net/transport_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/net/tlsticket.h"

/* TLS 1.3 over the connection core with OpenSSL memory BIOs: bytes libuv
 * reads go into net_in, whatever OpenSSL writes to net_out is drained into
 * uv_write right after each OpenSSL call. OpenSSL never touches the socket,
 * so the loop never blocks in it, and the state machine is one switch in
 * tls_advance() (Redis's tls.c). With memory BIOs "want write" cannot
 * happen (net_out always takes bytes) and "want read" just means "wait for
 * the next read callback"; the flags are kept for what they say about a
 * stalled handshake. */

#if OPENSSL_VERSION_NUMBER >= 0x30000000L
#define PEER_CERT SSL_get1_peer_certificate
#else
#define PEER_CERT SSL_get_peer_certificate
#endif

/* TLS 1.3 adds 5 (header) + 1 (content type) + 16 (AEAD tag) bytes per
 * record of at most 16 KiB; the margin covers that with room to spare. */
#define RECORD_MAX 16384
#define RECORD_OVERHEAD 256

struct sfl_tls {
    SSL_CTX *ctx;
    int server;
    int refs;
    int alpn_required;
    unsigned char alpn[256]; /* wire form: length byte, protocol */
    unsigned alpn_len;
    char *verify_host;
    int host_is_ip;
    /* Server: session-ticket keys (NULL: no tickets, every join is a full
     * handshake); check_time: a fixed "now" for tests (0: the clock). */
    sfl_ticket_keys_t *keys;
    time_t check_time;
    /* Client: the last session the server gave us, offered on the next
     * connection (in memory only). */
    SSL_SESSION *session;
};

typedef enum {
    TLS_HANDSHAKE,
    TLS_OPEN,
    TLS_SHUTDOWN, /* our close_notify is out */
    TLS_CLOSED    /* failed or done: OpenSSL is not called again */
} tls_state_t;

typedef struct {
    SSL *ssl;      /* owns both BIOs */
    BIO *net_in;   /* socket -> OpenSSL */
    BIO *net_out;  /* OpenSSL -> socket */
    tls_state_t state;
    unsigned want_read : 1, want_write : 1, has_peer : 1, resumed : 1;
    const char *why; /* set by OpenSSL callbacks that refuse the peer */
    sfl_peer_t peer;
} tls_conn_t;

/* Plaintext out of SSL_read; on_data borrows it (see read_buf in
 * transport.c for why one per thread is enough). */
static _Thread_local uint8_t plain_buf[RECORD_MAX];

/* OpenSSL's reason for the oldest queued error (the root cause), then an
 * empty queue: the queue is per thread and shared by every connection. */
static void ossl_reason(char *buf, size_t cap)
{
    unsigned long e = ERR_get_error();

    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "no OpenSSL error queued");
    ERR_clear_error();
}

/* ---- context ------------------------------------------------------- */

void sfl__tls_ref(sfl_tls_t *tls)
{
    tls->refs++;
}

int sfl__tls_is_server(const sfl_tls_t *tls)
{
    return tls->server;
}

void sfl_tls_free(sfl_tls_t *tls)
{
    if (!tls || --tls->refs > 0)
        return;
    SSL_CTX_free(tls->ctx);
    SSL_SESSION_free(tls->session);
    if (tls->keys != NULL) {
        sfl_ticket_keys_wipe(tls->keys);
        sfl__free(tls->keys);
    }
    sfl__free(tls->verify_host);
    sfl__free(tls);
}

/* ---- session tickets -------------------------------------------------- */

/* Server: OpenSSL asks for a key to seal a new ticket (enc = 1: the newest
 * key, a fresh IV) or to open one (enc = 0: the key its name says). 1 =
 * use, 2 = use and issue a new ticket under the current key, 0 = unknown
 * key (a full handshake follows), -1 = error. */
static int ticket_key_cb(SSL *ssl, unsigned char name[16], unsigned char iv[16],
                         EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
    const sfl_tls_t *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const sfl_ticket_key_t *k = NULL;
    size_t i = 0;
    OSSL_PARAM params[3];

    if (t == NULL || t->keys == NULL || t->keys->n == 0)
        return enc ? -1 : 0;
    if (enc) {
        k = &t->keys->k[0];
        if (RAND_bytes(iv, 16) != 1)
            return -1;
        memcpy(name, k->name, 16);
    } else {
        for (i = 0; i < t->keys->n && k == NULL; i++)
            if (CRYPTO_memcmp(name, t->keys->k[i].name, 16) == 0)
                k = &t->keys->k[i];
        if (k == NULL)
            return 0;
    }
    params[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac,
                                                  sizeof(k->hmac));
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0);
    params[2] = OSSL_PARAM_construct_end();
    if (EVP_MAC_CTX_set_params(hctx, params) != 1)
        return -1;
    if (enc)
        return EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) == 1 ? 1 : -1;
    if (EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1)
        return -1;
    return k == &t->keys->k[0] ? 1 : 2;
}

/* The time certificates are checked against: the clock, or the test's. */
static time_t tls_now(const sfl_tls_t *t)
{
    return t->check_time ? t->check_time : time(NULL);
}

/* Server: a ticket opened. Resumption skips certificate verification, so
 * what may have changed since the ticket was issued is checked here: the
 * certificate's validity dates. A session that fails, or carries no
 * certificate, is not resumed: the client falls back to a full handshake,
 * which verifies (and refuses) the certificate as at a first join.
 * Revocation and name binding are checked on every connection, resumed or
 * not, by the certificate's fingerprint (sfl_conn_peer), the same for a
 * resumed connection as for the handshake that made the ticket. */
static SSL_TICKET_RETURN ticket_decrypted(SSL *ssl, SSL_SESSION *ss, const unsigned char *keyname,
                                          size_t keyname_len, SSL_TICKET_STATUS status,
                                          void *arg)
{
    const sfl_tls_t *t = arg;
    X509 *peer;
    time_t now;

    (void)ssl;
    (void)keyname;
    (void)keyname_len;
    if (status != SSL_TICKET_SUCCESS && status != SSL_TICKET_SUCCESS_RENEW)
        return status == SSL_TICKET_EMPTY || status == SSL_TICKET_NO_DECRYPT
                   ? SSL_TICKET_RETURN_IGNORE_RENEW
                   : SSL_TICKET_RETURN_IGNORE;
    peer = SSL_SESSION_get0_peer(ss);
    now = tls_now(t);
    if (peer == NULL || X509_cmp_time(X509_get0_notAfter(peer), &now) <= 0 ||
        X509_cmp_time(X509_get0_notBefore(peer), &now) >= 0)
        return SSL_TICKET_RETURN_IGNORE_RENEW;
    /* Always a new ticket: a client offers each one once (RFC 8446 C.4). */
    return SSL_TICKET_RETURN_USE_RENEW;
}

/* Client: the server's NewSessionTicket; the newest replaces the last. */
static int session_new(SSL *ssl, SSL_SESSION *ss)
{
    sfl_conn_t *c = SSL_get_app_data(ssl);

    if (c == NULL || c->tls == NULL || !SSL_SESSION_is_resumable(ss))
        return 0;
    SSL_SESSION_free(c->tls->session);
    c->tls->session = ss;
    return 1; /* we keep the reference */
}

/* Server: the session id context binds tickets to this CA and this
 * identity: a ticket made under another CA file or another coordinator
 * certificate (same ticket keys or not) is never resumed, only answered
 * with a full handshake. SHA-256 over the digests of the CA certificates
 * and of our own certificate. */
static int bind_sessions(sfl_tls_t *t)
{
    STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(SSL_CTX_get_cert_store(t->ctx));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char d[EVP_MAX_MD_SIZE], sid[32];
    unsigned int n = 0;
    X509 *own = SSL_CTX_get0_certificate(t->ctx);
    int ok = md != NULL && own != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1;

    for (int i = 0; ok && i < sk_X509_OBJECT_num(objs); i++) {
        X509 *ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, i));

        if (ca != NULL)
            ok = X509_digest(ca, EVP_sha256(), d, &n) == 1 && EVP_DigestUpdate(md, d, n) == 1;
    }
    ok = ok && X509_digest(own, EVP_sha256(), d, &n) == 1 && EVP_DigestUpdate(md, d, n) == 1 &&
         EVP_DigestFinal_ex(md, sid, &n) == 1 && n == sizeof(sid) &&
         SSL_CTX_set_session_id_context(t->ctx, sid, sizeof(sid)) == 1;
    EVP_MD_CTX_free(md);
    return ok ? 0 : -1;
}

int sfl_tls_set_ticket_keys(sfl_tls_t *tls, const sfl_ticket_keys_t *keys, uint32_t lifetime_s)
{
    if (tls == NULL || !tls->server)
        return sfl__fail(SFL_EINVAL, "tls: ticket keys need a server context");
    if (keys == NULL || keys->n == 0 || keys->n > SFL_TICKET_KEYS_MAX || lifetime_s == 0)
        return sfl__fail(SFL_EINVAL, "tls: no ticket key or no ticket lifetime");
    if (tls->keys == NULL && (tls->keys = sfl__calloc(1, sizeof(*tls->keys))) == NULL)
        return sfl__fail(SFL_ENOMEM, "tls: no memory for ticket keys");
    *tls->keys = *keys;
    /* One ticket per connection: an agent keeps only the newest. */
    if (SSL_CTX_set_num_tickets(tls->ctx, 1) != 1)
        return sfl__fail(SFL_ENOMEM, "tls: cannot enable tickets");
    SSL_CTX_set_timeout(tls->ctx, (long)lifetime_s);
    return 0;
}

void sfl__tls_set_check_time(sfl_tls_t *tls, time_t now)
{
    X509_VERIFY_PARAM *p = SSL_CTX_get0_param(tls->ctx);

    tls->check_time = now;
    if (now)
        X509_VERIFY_PARAM_set_time(p, now);
    else
        X509_VERIFY_PARAM_clear_flags(p, X509_V_FLAG_USE_CHECK_TIME);
}

int sfl_conn_resumed(const sfl_conn_t *c)
{
    const tls_conn_t *x;

    if (c == NULL || c->type != &sfl__xport_tls || (x = c->xport) == NULL)
        return 0;
    return x->resumed;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    sfl_tls_t *t = arg;
    sfl_conn_t *c = SSL_get_app_data(ssl);
    tls_conn_t *x = c->xport;
    unsigned char *sel = NULL;

    if (SSL_select_next_proto(&sel, outlen, t->alpn, t->alpn_len, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    if (!t->alpn_required)
        return SSL_TLSEXT_ERR_NOACK;
    x->why = "client offered no protocol we speak (ALPN)";
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* alpn_select only runs when the client sends ALPN at all; a client that
 * sends none is refused here, with the proper alert. */
static int client_hello(SSL *ssl, int *al, void *arg)
{
    sfl_conn_t *c = SSL_get_app_data(ssl);
    tls_conn_t *x = c->xport;
    const unsigned char *ext;
    size_t len;

    (void)arg;
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext,
                                  &len))
        return SSL_CLIENT_HELLO_SUCCESS;
    x->why = "client offered no ALPN";
    *al = SSL_AD_NO_APPLICATION_PROTOCOL;
    return SSL_CLIENT_HELLO_ERROR;
}

static int cfg_check(const sfl_tls_config_t *cfg, int server)
{
    if (!cfg->ca_file || !cfg->ca_file[0])
        return sfl__fail(SFL_EINVAL, "tls: ca_file is required");
    if (!cfg->cert_file != !cfg->key_file)
        return sfl__fail(SFL_EINVAL, "tls: cert_file and key_file go together");
    if (server && !cfg->cert_file)
        return sfl__fail(SFL_EINVAL, "tls: a server needs cert_file and key_file");
    if (!server && (!cfg->verify_host || !cfg->verify_host[0]))
        return sfl__fail(SFL_EINVAL, "tls: a client needs verify_host");
    if (cfg->alpn && (strlen(cfg->alpn) == 0 || strlen(cfg->alpn) > 255))
        return sfl__fail(SFL_EINVAL, "tls: ALPN protocol must be 1..255 bytes");
    if (cfg->alpn_required && !cfg->alpn)
        return sfl__fail(SFL_EINVAL, "tls: alpn_required without alpn");
    return 0;
}

/* A client certificate must say it is one: extendedKeyUsage present and
 * naming clientAuth (docs/pki.md). OpenSSL's own purpose check lets a
 * certificate without the extension through (no EKU = any use), so the
 * leaf is checked here, after the chain verified. */
static int verify_client_eku(int ok, X509_STORE_CTX *store)
{
    X509 *cert = X509_STORE_CTX_get_current_cert(store);

    if (!ok || X509_STORE_CTX_get_error_depth(store) != 0 || cert == NULL)
        return ok;
    if (!(X509_get_extension_flags(cert) & EXFLAG_XKUSAGE) ||
        !(X509_get_extended_key_usage(cert) & XKU_SSL_CLIENT)) {
        X509_STORE_CTX_set_error(store, X509_V_ERR_INVALID_PURPOSE);
        return 0;
    }
    return 1;
}

static int ctx_setup(sfl_tls_t *t, const sfl_tls_config_t *cfg)
{
    char why[256];
    SSL_CTX *ctx = t->ctx;
    STACK_OF(X509_NAME) *names;

    if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1)
        goto ossl;
    /* Idle connections give their buffers back: thousands of agents. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* Resumption by stateless tickets only: a server issues none until it
     * has keys (sfl_tls_set_ticket_keys) and caches no session; a client
     * keeps the newest session it got in the context (session_new). */
    SSL_CTX_set_app_data(ctx, t);
    if (t->server) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
        if (SSL_CTX_set_num_tickets(ctx, 0) != 1 ||
            SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_cb) != 1 ||
            SSL_CTX_set_session_ticket_cb(ctx, NULL, ticket_decrypted, t) != 1)
            goto ossl;
    } else {
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, session_new);
    }
    /* A federation chain is CA -> leaf; refuse long hostile chains early. */
    SSL_CTX_set_verify_depth(ctx, 4);
    if (SSL_CTX_load_verify_locations(ctx, cfg->ca_file, NULL) != 1) {
        ossl_reason(why, sizeof(why));
        return sfl__fail(SFL_EIO, "tls: CA file %s: %s", cfg->ca_file, why);
    }
    if (cfg->cert_file) {
        if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1) {
            ossl_reason(why, sizeof(why));
            return sfl__fail(SFL_EIO, "tls: certificate %s: %s", cfg->cert_file, why);
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
            ossl_reason(why, sizeof(why));
            return sfl__fail(SFL_EIO, "tls: key %s: %s", cfg->key_file, why);
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ossl_reason(why, sizeof(why));
            return sfl__fail(SFL_EIO, "tls: key %s does not match %s: %s", cfg->key_file,
                             cfg->cert_file, why);
        }
    }
    if (t->server) {
        SSL_CTX_set_verify(ctx,
                           SSL_VERIFY_PEER |
                               (cfg->require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           verify_client_eku);
        /* Tell clients which CA we accept so they pick the right cert. */
        names = SSL_load_client_CA_file(cfg->ca_file);
        if (!names)
            goto ossl;
        SSL_CTX_set_client_CA_list(ctx, names);
        if (t->alpn_len)
            SSL_CTX_set_alpn_select_cb(ctx, alpn_select, t);
        if (t->alpn_required)
            SSL_CTX_set_client_hello_cb(ctx, client_hello, t);
        if (bind_sessions(t) != 0)
            goto ossl;
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        /* Returns 0 on success, unlike the rest of OpenSSL. */
        if (t->alpn_len && SSL_CTX_set_alpn_protos(ctx, t->alpn, t->alpn_len) != 0)
            goto ossl;
    }
    return 0;
ossl:
    ossl_reason(why, sizeof(why));
    return sfl__fail(SFL_ENOMEM, "tls: context setup: %s", why);
}

int sfl_tls_new(const sfl_tls_config_t *cfg, int server, sfl_tls_t **out)
{
    unsigned char ip[16];
    sfl_tls_t *t = NULL;
    char why[256];
    size_t n;
    int rc;

    if (!out)
        return sfl__fail(SFL_EINVAL, "tls: out is NULL");
    *out = NULL;
    if (!cfg)
        return sfl__fail(SFL_EINVAL, "tls: config is NULL");
    rc = cfg_check(cfg, server);
    if (rc)
        return rc;
    t = sfl__calloc(1, sizeof(*t));
    if (!t)
        return sfl__fail(SFL_ENOMEM, "tls: no memory for a context");
    t->refs = 1;
    t->server = !!server;
    t->alpn_required = !!cfg->alpn_required;
    if (cfg->alpn) {
        n = strlen(cfg->alpn);
        t->alpn[0] = (unsigned char)n;
        memcpy(t->alpn + 1, cfg->alpn, n);
        t->alpn_len = (unsigned)n + 1;
    }
    if (!server) {
        n = strlen(cfg->verify_host);
        t->verify_host = sfl__malloc(n + 1);
        if (!t->verify_host) {
            rc = sfl__fail(SFL_ENOMEM, "tls: no memory for the host name");
            goto out;
        }
        memcpy(t->verify_host, cfg->verify_host, n + 1);
        t->host_is_ip = inet_pton(AF_INET, t->verify_host, ip) == 1 ||
                        inet_pton(AF_INET6, t->verify_host, ip) == 1;
    }
    ERR_clear_error();
    t->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!t->ctx) {
        ossl_reason(why, sizeof(why));
        rc = sfl__fail(SFL_ENOMEM, "tls: SSL_CTX_new: %s", why);
        goto out;
    }
    rc = ctx_setup(t, cfg);
out:
    if (rc) {
        sfl_tls_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* ---- connection ------------------------------------------------------- */

/* Hand what OpenSSL wrote to the socket. Nonzero if the connection broke
 * (it is then aborting). */
static int flush_out(sfl_conn_t *c)
{
    tls_conn_t *x = c->xport;
    size_t n = BIO_ctrl_pending(x->net_out);
    sfl__wreq_t *w;

    if (n == 0)
        return 0;
    w = sfl__wreq_new(n);
    if (!w) {
        x->state = TLS_CLOSED;
        sfl__conn_fail(c, SFL_ENOMEM, 0, "tls: no memory for %zu bytes of output", n);
        return SFL_ENOMEM;
    }
    if (BIO_read(x->net_out, w->data, (int)n) != (int)n) {
        sfl__free(w);
        x->state = TLS_CLOSED;
        sfl__conn_fail(c, -EPROTO, 0, "tls: memory BIO short read");
        return -EPROTO;
    }
    return sfl__conn_send(c, w);
}

/* SFL_ECERT when a certificate was not accepted for what it is (unknown
 * CA, bad signature, wrong host name or IP, revoked, refused by the peer's
 * alert): retrying with the same files cannot succeed. Validity dates are
 * not among them: a device without a real-time clock may not have set its
 * clock yet, so an expired or not yet valid certificate stays -EPROTO,
 * worth retrying. ossl is the first queued OpenSSL error (0: none). */
static int cert_failure(long verify, unsigned long ossl)
{
    if (verify != X509_V_OK)
        return verify == X509_V_ERR_CERT_NOT_YET_VALID || verify == X509_V_ERR_CERT_HAS_EXPIRED
                   ? -EPROTO
                   : SFL_ECERT;
    if (ERR_GET_LIB(ossl) != ERR_LIB_SSL)
        return -EPROTO;
    switch (ERR_GET_REASON(ossl)) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return SFL_ECERT;
    default:
        return -EPROTO;
    }
}

/* Record the failure with OpenSSL's reason, send the alert OpenSSL queued,
 * and close gracefully so the alert gets out before the FIN. */
static void tls_fail(sfl_conn_t *c, const char *what, int err)
{
    tls_conn_t *x = c->xport;
    char reason[256], verify[160] = "";
    long v = SSL_get_verify_result(x->ssl);
    int code = cert_failure(v, err == SSL_ERROR_SSL ? ERR_peek_error() : 0);

    if (err == SSL_ERROR_SSL)
        ossl_reason(reason, sizeof(reason));
    else {
        snprintf(reason, sizeof(reason), "SSL error %d", err);
        ERR_clear_error();
    }
    if (v != X509_V_OK)
        snprintf(verify, sizeof(verify), " (%s)", X509_verify_cert_error_string(v));
    else if (x->why)
        snprintf(verify, sizeof(verify), " (%s)", x->why);
    x->state = TLS_CLOSED;
    if (flush_out(c) == 0)
        sfl__conn_fail(c, code, 1, "tls %s %s: %s%s", what, c->name, reason, verify);
}

/* Nonzero if the SSL call only needs more input (or, never with memory
 * BIOs, more output room). */
static int tls_want(tls_conn_t *x, int err)
{
    x->want_read = err == SSL_ERROR_WANT_READ;
    x->want_write = err == SSL_ERROR_WANT_WRITE;
    return x->want_read || x->want_write;
}

/* One UTF-8 field of the subject; "" when absent, repeated, too long or
 * not a plain printable string (a CN is an identity: no NULs, no control
 * characters that could forge log lines). */
static void name_field(X509_NAME *name, int nid, char *out, size_t cap)
{
    int i = X509_NAME_get_index_by_NID(name, nid, -1);
    unsigned char *utf8 = NULL;
    int n, k;

    out[0] = '\0';
    if (i < 0 || X509_NAME_get_index_by_NID(name, nid, i) >= 0)
        return;
    n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
    if (n > 0 && (size_t)n < cap) {
        for (k = 0; k < n; k++)
            if (utf8[k] < 0x20 || utf8[k] == 0x7f)
                break;
        if (k == n) {
            memcpy(out, utf8, (size_t)n);
            out[n] = '\0';
        }
    }
    OPENSSL_free(utf8);
}

static sfl_role_t role_of(X509_NAME *name)
{
    static const char *const roles[] = {"agent", "admin", "coordinator"};
    static const sfl_role_t ids[] = {SFL_ROLE_AGENT, SFL_ROLE_ADMIN, SFL_ROLE_COORDINATOR};
    char ou[32];

    /* Exactly one OU naming a known role: anything else is no role, so an
     * odd certificate gets less privilege, never more. */
    name_field(name, NID_organizationalUnitName, ou, sizeof(ou));
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
        if (strcmp(ou, roles[i]) == 0)
            return ids[i];
    return SFL_ROLE_NONE;
}

static int peer_fill(X509 *cert, sfl_peer_t *p)
{
    X509_NAME *name = X509_get_subject_name(cert);
    unsigned int n = 0;

    memset(p, 0, sizeof(*p));
    if (name) {
        name_field(name, NID_commonName, p->cn, sizeof(p->cn));
        p->role = role_of(name);
    }
    if (X509_digest(cert, EVP_sha256(), p->sha256, &n) != 1 || n != sizeof(p->sha256))
        return -1;
    sodium_bin2hex(p->fingerprint, sizeof(p->fingerprint), p->sha256, n);
    return 0;
}

/* The handshake finished: check what OpenSSL cannot (ALPN on the client
 * side, the peer's identity) before the application sees the connection. */
static int handshake_done(sfl_conn_t *c)
{
    tls_conn_t *x = c->xport;
    const sfl_tls_t *t = c->tls;
    const unsigned char *proto = NULL;
    unsigned int plen = 0;
    X509 *cert;
    int rc = 0;

    x->resumed = SSL_session_reused(x->ssl) == 1;
    if (t->alpn_required) {
        SSL_get0_alpn_selected(x->ssl, &proto, &plen);
        if (plen != t->alpn_len - 1u || memcmp(proto, t->alpn + 1, plen) != 0) {
            x->state = TLS_CLOSED;
            sfl__conn_fail(c, -EPROTO, 1, "tls handshake %s: peer did not negotiate ALPN '%.*s'",
                           c->name, (int)t->alpn_len - 1, (const char *)t->alpn + 1);
            return -1;
        }
    }
    cert = PEER_CERT(x->ssl);
    if (cert) {
        rc = peer_fill(cert, &x->peer);
        X509_free(cert);
        x->has_peer = rc == 0;
    }
    if (rc || (!cert && !t->server)) {
        x->state = TLS_CLOSED;
        sfl__conn_fail(c, -EPROTO, 1, "tls handshake %s: cannot read the peer certificate",
                       c->name);
        return -1;
    }
    return 0;
}

/* A memory BIO keeps the largest buffer it ever held: a 64 KiB read, the
 * handshake's flight, a task of a few MiB. Once drained, one that grew past
 * this is swapped for an empty one, so an idle connection holds no
 * buffers (thousands of agents; no state that scales with the model). */
#define BIO_KEEP 512

static BIO *fresh_bio(void)
{
    BIO *b = BIO_new(BIO_s_mem());

    /* An empty BIO means "no bytes yet", not end of stream. */
    if (b != NULL)
        BIO_set_mem_eof_return(b, -1);
    return b;
}

static int bio_oversized(BIO *b)
{
    BUF_MEM *bm = NULL;

    return BIO_ctrl_pending(b) == 0 && BIO_get_mem_ptr(b, &bm) == 1 && bm != NULL &&
           bm->max > BIO_KEEP;
}

/* Without memory for a new BIO the old one simply stays. */
static void release_drained(tls_conn_t *x)
{
    BIO *b;

    if (x->state != TLS_HANDSHAKE && x->state != TLS_OPEN)
        return;
    if (bio_oversized(x->net_in) && (b = fresh_bio()) != NULL) {
        SSL_set0_rbio(x->ssl, b); /* frees the old one */
        x->net_in = b;
    }
    if (bio_oversized(x->net_out) && (b = fresh_bio()) != NULL) {
        SSL_set0_wbio(x->ssl, b);
        x->net_out = b;
    }
}

/* The TLS state machine: run OpenSSL as far as the input allows. */
static void tls_advance(sfl_conn_t *c)
{
    tls_conn_t *x = c->xport;
    int rc, err;

    for (;;) {
        switch (x->state) {
        case TLS_HANDSHAKE:
            ERR_clear_error();
            rc = SSL_do_handshake(x->ssl);
            err = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(x->ssl, rc);
            if (err != SSL_ERROR_SSL && flush_out(c) != 0)
                return;
            if (rc == 1) {
                if (handshake_done(c) != 0)
                    return;
                x->state = TLS_OPEN;
                sfl__conn_ready(c);
                /* Application data may have come with the Finished. */
                continue;
            }
            if (!tls_want(x, err)) {
                /* Whatever failed, the next attempt starts afresh. */
                if (!c->tls->server && c->tls->session != NULL) {
                    SSL_SESSION_free(c->tls->session);
                    c->tls->session = NULL;
                }
                tls_fail(c, "handshake", err);
            }
            return;
        case TLS_OPEN:
            while (sfl__conn_can_deliver(c)) {
                ERR_clear_error();
                rc = SSL_read(x->ssl, plain_buf, (int)sizeof(plain_buf));
                if (rc > 0) {
                    sfl__conn_deliver(c, plain_buf, (size_t)rc);
                    continue;
                }
                err = SSL_get_error(x->ssl, rc);
                if (err == SSL_ERROR_ZERO_RETURN) {
                    /* The peer's close_notify: an orderly end. */
                    if (flush_out(c) == 0)
                        sfl__conn_eof(c);
                    return;
                }
                if (!tls_want(x, err)) {
                    tls_fail(c, "read", err);
                    return;
                }
                break;
            }
            /* Post-handshake messages (KeyUpdate) may want a reply. */
            if (c->state == SFL_CONN_OPEN)
                flush_out(c);
            return;
        case TLS_SHUTDOWN:
        case TLS_CLOSED:
            return;
        }
    }
}

static int tls_init(sfl_conn_t *c)
{
    const sfl_tls_t *t = c->tls;
    tls_conn_t *x;
    char why[256];

    x = sfl__calloc(1, sizeof(*x));
    if (!x)
        return sfl__fail(SFL_ENOMEM, "tls: no memory for a connection");
    c->xport = x;
    x->state = TLS_HANDSHAKE;
    ERR_clear_error();
    x->ssl = SSL_new(t->ctx);
    x->net_in = fresh_bio();
    x->net_out = fresh_bio();
    if (!x->ssl || !x->net_in || !x->net_out) {
        BIO_free(x->net_in);
        BIO_free(x->net_out);
        x->net_in = x->net_out = NULL;
        goto ossl;
    }
    SSL_set_bio(x->ssl, x->net_in, x->net_out);
    SSL_set_app_data(x->ssl, c);
    if (t->server) {
        SSL_set_accept_state(x->ssl);
        return 0;
    }
    SSL_set_connect_state(x->ssl);
    /* Offer the last session; the server resumes it or does a full
     * handshake, and either way sends the next one. */
    if (t->session != NULL && SSL_set_session(x->ssl, t->session) != 1)
        goto ossl;
    /* The name must be in subjectAltName; the CN is never consulted. */
    SSL_set_hostflags(x->ssl,
                      X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    if (t->host_is_ip) {
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(x->ssl), t->verify_host) != 1)
            goto ossl;
    } else if (SSL_set1_host(x->ssl, t->verify_host) != 1 ||
               SSL_set_tlsext_host_name(x->ssl, t->verify_host) != 1) {
        goto ossl;
    }
    return 0;
ossl:
    ossl_reason(why, sizeof(why));
    return sfl__fail(SFL_ENOMEM, "tls: connection setup: %s", why);
}

static void tls_start(sfl_conn_t *c)
{
    tls_advance(c);
}

static void tls_feed(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    tls_conn_t *x = c->xport;

    if (x->state != TLS_HANDSHAKE && x->state != TLS_OPEN)
        return;
    /* len <= one read (64 KiB); a memory BIO only fails without memory. */
    if (BIO_write(x->net_in, buf, (int)len) != (int)len) {
        ERR_clear_error();
        x->state = TLS_CLOSED;
        sfl__conn_fail(c, SFL_ENOMEM, 0, "tls: no memory for %zu bytes of input", len);
        return;
    }
    tls_advance(c);
    if (c->xport != NULL)
        release_drained(x);
}

static void tls_resume(sfl_conn_t *c)
{
    tls_advance(c);
}

static int tls_write(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    tls_conn_t *x = c->xport;
    size_t pending = BIO_ctrl_pending(x->net_out);
    size_t cap = pending + len + (len / RECORD_MAX + 1) * RECORD_OVERHEAD;
    sfl__wreq_t *w;
    int rc;

    if (x->state != TLS_OPEN)
        return sfl__fail(SFL_EINVAL, "tls: write after the TLS session ended");
    /* Allocate before encrypting, so running out of memory leaves the
     * session untouched and the write can simply fail. */
    w = sfl__wreq_new(cap);
    if (!w)
        return sfl__fail(SFL_ENOMEM, "tls: no memory to queue %zu bytes", len);
    ERR_clear_error();
    rc = SSL_write(x->ssl, buf, (int)len);
    if (rc <= 0) {
        sfl__free(w);
        tls_fail(c, "write", SSL_get_error(x->ssl, rc));
        return sfl__fail(c->status ? c->status : -EPROTO, "%s", c->detail);
    }
    pending = BIO_ctrl_pending(x->net_out);
    if (pending > cap) {
        /* Cannot happen with TLS 1.3 records; stay correct if it does. */
        sfl__free(w);
        return flush_out(c);
    }
    if (BIO_read(x->net_out, w->data, (int)pending) != (int)pending) {
        sfl__free(w);
        x->state = TLS_CLOSED;
        sfl__conn_fail(c, -EPROTO, 0, "tls: memory BIO short read");
        return sfl__fail(-EPROTO, "tls: memory BIO short read");
    }
    w->len = pending;
    release_drained(x);
    return sfl__conn_send(c, w);
}

static void tls_shutdown(sfl_conn_t *c)
{
    tls_conn_t *x = c->xport;

    switch (x->state) {
    case TLS_OPEN:
        ERR_clear_error();
        SSL_shutdown(x->ssl);
        ERR_clear_error();
        x->state = TLS_SHUTDOWN;
        flush_out(c);
        return;
    case TLS_HANDSHAKE:
        x->state = TLS_CLOSED;
        return;
    case TLS_SHUTDOWN:
    case TLS_CLOSED:
        return;
    }
}

static int tls_peer(const sfl_conn_t *c, sfl_peer_t *out)
{
    const tls_conn_t *x = c->xport;

    if (!x || !x->has_peer)
        return sfl__fail(SFL_ENOTFOUND, "tls: the peer sent no certificate");
    *out = x->peer;
    return 0;
}

static void tls_destroy(sfl_conn_t *c)
{
    tls_conn_t *x = c->xport;

    if (!x)
        return;
    /* OpenSSL marks the session of a connection freed without a
     * close_notify as not resumable. A connection that opened keeps its
     * session however it ended: after a coordinator killed -9 its agents
     * resume with the next one (a TLS 1.3 ticket is not weakened by a
     * broken connection). */
    if (x->ssl != NULL && SSL_is_init_finished(x->ssl))
        SSL_set_shutdown(x->ssl, SSL_get_shutdown(x->ssl) | SSL_SENT_SHUTDOWN);
    SSL_free(x->ssl);
    sfl__free(x);
    c->xport = NULL;
}

const sfl__xport_t sfl__xport_tls = {
    .name = "tls",
    .init = tls_init,
    .start = tls_start,
    .feed = tls_feed,
    .resume = tls_resume,
    .write = tls_write,
    .shutdown = tls_shutdown,
    .peer = tls_peer,
    .destroy = tls_destroy,
};

/* The exporter (RFC 8446 section 7.5) is derived from the exporter master
 * secret, fixed once the server's Finished is sent: both ends compute the
 * same bytes, and no other connection (a fresh ECDHE share each time) does.
 * The connection must be TLS and open: before the handshake ends there is
 * no secret, and after TLS_CLOSED OpenSSL is not called again. */
int sfl_conn_export_keying_material(const sfl_conn_t *c, const char *label, uint8_t *out,
                                    size_t len)
{
    const tls_conn_t *x;
    size_t n;

    if (c == NULL || label == NULL || out == NULL || len == 0 || len > 64)
        return sfl__fail(SFL_EINVAL, "tls exporter: bad arguments");
    if (c->type != &sfl__xport_tls)
        return sfl__fail(SFL_EINVAL, "tls exporter: %s is not a TLS connection", c->name);
    x = c->xport;
    if (x == NULL || c->state != SFL_CONN_OPEN || x->state != TLS_OPEN)
        return sfl__fail(SFL_EINVAL, "tls exporter: %s is not open", c->name);
    n = strlen(label);
    if (SSL_export_keying_material(x->ssl, out, len, label, n, NULL, 0, 0) != 1) {
        char why[160];

        ossl_reason(why, sizeof(why));
        return sfl__fail(SFL_EINVAL, "tls exporter %s: %s", c->name, why);
    }
    return 0;
}

int sfl_tls_cert_sha256(const sfl_tls_t *tls, uint8_t out[32])
{
    X509 *cert;
    unsigned int n = 0;

    if (tls == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "tls: NULL argument");
    if ((cert = SSL_CTX_get0_certificate(tls->ctx)) == NULL)
        return sfl__fail(SFL_ENOTFOUND, "tls: this context has no certificate");
    if (X509_digest(cert, EVP_sha256(), out, &n) != 1 || n != 32) {
        char why[160];

        ossl_reason(why, sizeof(why));
        return sfl__fail(SFL_EIO, "tls: cannot hash the certificate: %s", why);
    }
    return 0;
}

/* ---- a relayed certificate --------------------------------------------- */

int sfl_conn_peer_der(const sfl_conn_t *c, uint8_t *buf, size_t cap, size_t *len)
{
    const tls_conn_t *x;
    X509 *cert;
    unsigned char *p = buf;
    int n;

    if (len != NULL)
        *len = 0;
    if (c == NULL || buf == NULL || len == NULL)
        return sfl__fail(SFL_EINVAL, "tls: NULL argument");
    x = c->xport;
    if (c->type != &sfl__xport_tls || x == NULL || x->state != TLS_OPEN || !x->has_peer)
        return sfl__fail(SFL_ENOTFOUND, "tls: %s has no verified peer certificate", c->name);
    if ((cert = PEER_CERT(x->ssl)) == NULL)
        return sfl__fail(SFL_ENOTFOUND, "tls: %s has no peer certificate", c->name);
    n = i2d_X509(cert, NULL);
    if (n <= 0 || (size_t)n > cap) {
        X509_free(cert);
        ERR_clear_error();
        return n <= 0 ? sfl__fail(SFL_ENOMEM, "tls: cannot encode the peer certificate of %s",
                                  c->name)
                      : sfl__fail(SFL_ELIMIT, "tls: the peer certificate of %s is %d bytes, "
                                              "more than %zu", c->name, n, cap);
    }
    n = i2d_X509(cert, &p);
    X509_free(cert);
    if (n <= 0) {
        ERR_clear_error();
        return sfl__fail(SFL_ENOMEM, "tls: cannot encode the peer certificate of %s", c->name);
    }
    *len = (size_t)n;
    return 0;
}

static void cert_time(const ASN1_TIME *t, char *out, size_t cap);

int sfl_tls_verify_der(const sfl_tls_t *tls, const uint8_t *der, size_t len, sfl_peer_t *out)
{
    const unsigned char *p = der;
    X509 *cert = NULL;
    X509_STORE_CTX *ctx = NULL;
    char when[64];
    int rc, v;

    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (tls == NULL || der == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "tls: NULL argument");
    if (!tls->server)
        return sfl__fail(SFL_EINVAL, "tls: a client context verifies no client certificate");
    if (len > SFL_TLS_CERT_DER_MAX)
        return sfl__fail(SFL_ELIMIT, "certificate of %zu bytes, more than %d", len,
                         SFL_TLS_CERT_DER_MAX);
    ERR_clear_error();
    cert = d2i_X509(NULL, &p, (long)len);
    if (cert == NULL || p != der + len) {
        ERR_clear_error();
        rc = sfl__fail(SFL_EPARSE, cert == NULL ? "not a DER certificate (%zu bytes)"
                                                : "bytes after the DER certificate (%zu in all)",
                       len);
        goto out;
    }
    if ((ctx = X509_STORE_CTX_new()) == NULL ||
        X509_STORE_CTX_init(ctx, SSL_CTX_get_cert_store(tls->ctx), cert, NULL) != 1) {
        ERR_clear_error();
        rc = sfl__fail(SFL_ENOMEM, "tls: cannot set up a certificate check");
        goto out;
    }
    /* What the handshake applies (ctx_setup): the purpose a server checks a
     * client certificate for, the depth, the clientAuth EKU, and the same
     * clock (tls_now). */
    if (X509_STORE_CTX_set_default(ctx, "ssl_client") != 1) {
        ERR_clear_error();
        rc = sfl__fail(SFL_ENOMEM, "tls: cannot set up a certificate check");
        goto out;
    }
    X509_STORE_CTX_set_depth(ctx, SSL_CTX_get_verify_depth(tls->ctx));
    X509_STORE_CTX_set_verify_cb(ctx, verify_client_eku);
    X509_STORE_CTX_set_time(ctx, 0, tls_now(tls));
    if (X509_verify_cert(ctx) != 1) {
        v = X509_STORE_CTX_get_error(ctx);
        ERR_clear_error();
        if (v == X509_V_ERR_CERT_HAS_EXPIRED || v == X509_V_ERR_CERT_NOT_YET_VALID) {
            cert_time(v == X509_V_ERR_CERT_HAS_EXPIRED ? X509_get0_notAfter(cert)
                                                      : X509_get0_notBefore(cert),
                      when, sizeof(when));
            rc = sfl__fail(SFL_ECERT, "certificate %s (%s %s)", X509_verify_cert_error_string(v),
                           v == X509_V_ERR_CERT_HAS_EXPIRED ? "valid until" : "valid from",
                           when);
        } else {
            rc = sfl__fail(SFL_ECERT, "certificate does not verify against the CA: %s",
                           X509_verify_cert_error_string(v));
        }
        goto out;
    }
    if (peer_fill(cert, out) != 0) {
        ERR_clear_error();
        memset(out, 0, sizeof(*out));
        rc = sfl__fail(SFL_ENOMEM, "tls: cannot hash the certificate");
        goto out;
    }
    rc = 0;
out:
    X509_STORE_CTX_free(ctx);
    X509_free(cert);
    return rc;
}

#define BINDING_CTX "sfl-join-cert-v1"

static void binding_msg(const uint8_t identity_pk[32], uint8_t msg[1 + 16 + 32])
{
    msg[0] = (uint8_t)(sizeof(BINDING_CTX) - 1);
    memcpy(msg + 1, BINDING_CTX, sizeof(BINDING_CTX) - 1);
    memcpy(msg + sizeof(BINDING_CTX), identity_pk, 32);
}

/* Ed25519 and Ed448 sign the message itself; the others a SHA-256 digest. */
static const EVP_MD *binding_md(const EVP_PKEY *k)
{
    int id = EVP_PKEY_get_base_id(k);

    return id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 ? NULL : EVP_sha256();
}

int sfl_tls_cert_binding_sign(const sfl_tls_t *tls, const uint8_t identity_pk[32],
                              uint8_t sig[SFL_TLS_SIG_MAX], size_t *siglen)
{
    uint8_t msg[1 + 16 + 32];
    EVP_MD_CTX *md = NULL;
    EVP_PKEY *k;
    char why[160];
    size_t n = SFL_TLS_SIG_MAX;
    int rc = 0;

    if (siglen != NULL)
        *siglen = 0;
    if (tls == NULL || identity_pk == NULL || sig == NULL || siglen == NULL)
        return sfl__fail(SFL_EINVAL, "tls: NULL argument");
    if ((k = SSL_CTX_get0_privatekey(tls->ctx)) == NULL)
        return sfl__fail(SFL_EINVAL, "tls: this context has no certificate key");
    binding_msg(identity_pk, msg);
    ERR_clear_error();
    if ((md = EVP_MD_CTX_new()) == NULL ||
        EVP_DigestSignInit(md, NULL, binding_md(k), NULL, k) != 1 ||
        EVP_DigestSign(md, NULL, &n, msg, sizeof(msg)) != 1 || n > SFL_TLS_SIG_MAX ||
        (n = SFL_TLS_SIG_MAX, EVP_DigestSign(md, sig, &n, msg, sizeof(msg)) != 1)) {
        ossl_reason(why, sizeof(why));
        rc = sfl__fail(SFL_EIO, "tls: cannot sign with the certificate key: %s", why);
    } else {
        *siglen = n;
    }
    EVP_MD_CTX_free(md);
    return rc;
}

int sfl_tls_cert_binding_verify(const uint8_t *der, size_t len, const uint8_t identity_pk[32],
                                const uint8_t *sig, size_t siglen)
{
    const unsigned char *p = der;
    uint8_t msg[1 + 16 + 32];
    EVP_MD_CTX *md = NULL;
    EVP_PKEY *k;
    X509 *cert;
    int rc;

    if (der == NULL || identity_pk == NULL || sig == NULL || siglen == 0 ||
        siglen > SFL_TLS_SIG_MAX || len > SFL_TLS_CERT_DER_MAX)
        return sfl__fail(SFL_EINVAL, "tls: bad arguments to check a certificate binding");
    ERR_clear_error();
    if ((cert = d2i_X509(NULL, &p, (long)len)) == NULL || p != der + len ||
        (k = X509_get0_pubkey(cert)) == NULL) {
        ERR_clear_error();
        X509_free(cert);
        return sfl__fail(SFL_EPARSE, "not a DER certificate with a public key");
    }
    binding_msg(identity_pk, msg);
    if ((md = EVP_MD_CTX_new()) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "tls: no memory to check a signature");
    } else if (EVP_DigestVerifyInit(md, NULL, binding_md(k), NULL, k) != 1 ||
               EVP_DigestVerify(md, sig, siglen, msg, sizeof(msg)) != 1) {
        rc = sfl__fail(SFL_EBADSIG, "the signature is not by the certificate's key over "
                                    "this identity key");
    } else {
        rc = 0;
    }
    ERR_clear_error();
    EVP_MD_CTX_free(md);
    X509_free(cert);
    return rc;
}

/* ---- checking an identity ------------------------------------------------ */

static FILE *open_read(const char *path, int *rc)
{
    FILE *f = fopen(path, "r");

    *rc = f ? 0 : sfl__fail(-errno, "%s: cannot open: %s", path, strerror(errno));
    return f;
}

/* The certificate's notBefore or notAfter as text ("Jan  1 00:00:00 2027 GMT"). */
static void cert_time(const ASN1_TIME *t, char *out, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    int n = 0;

    out[0] = '\0';
    if (b != NULL && ASN1_TIME_print(b, t) == 1)
        n = BIO_read(b, out, (int)cap - 1);
    out[n > 0 ? n : 0] = '\0';
    BIO_free(b);
}

int sfl_tls_check_identity(const char *cert_file, const char *key_file, const char *ca_file,
                           sfl_role_t role)
{
    X509 *cert = NULL, *extra;
    EVP_PKEY *pkey = NULL;
    X509_STORE *store = NULL;
    X509_STORE_CTX *ctx = NULL;
    STACK_OF(X509) *chain = NULL;
    sfl_role_t has;
    char why[256], when[64];
    FILE *f;
    int rc, v;

    ERR_clear_error();
    if ((f = open_read(cert_file, &rc)) == NULL)
        return rc;
    cert = PEM_read_X509(f, NULL, NULL, NULL);
    chain = sk_X509_new_null();
    while (cert != NULL && chain != NULL && (extra = PEM_read_X509(f, NULL, NULL, NULL)) != NULL)
        if (!sk_X509_push(chain, extra))
            X509_free(extra);
    fclose(f);
    ERR_clear_error(); /* the end of the file after the last certificate */
    if (cert == NULL || chain == NULL) {
        rc = sfl__fail(SFL_EIO, "%s: not a PEM certificate", cert_file);
        goto out;
    }
    if ((f = open_read(key_file, &rc)) == NULL)
        goto out;
    pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (pkey == NULL) {
        ossl_reason(why, sizeof(why));
        rc = sfl__fail(SFL_EIO, "%s: not a PEM private key (%s)", key_file, why);
        goto out;
    }
    if (X509_check_private_key(cert, pkey) != 1) {
        ERR_clear_error();
        rc = sfl__fail(SFL_ECERT, "%s: not the private key of the certificate %s", key_file,
                       cert_file);
        goto out;
    }
    if ((f = open_read(ca_file, &rc)) == NULL)
        goto out;
    fclose(f);
    store = X509_STORE_new();
    ctx = X509_STORE_CTX_new();
    if (store == NULL || ctx == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "tls: no memory to check %s", cert_file);
        goto out;
    }
    if (X509_STORE_load_file(store, ca_file) != 1) {
        ossl_reason(why, sizeof(why));
        rc = sfl__fail(SFL_EIO, "%s: no PEM CA certificate (%s)", ca_file, why);
        goto out;
    }
    if (X509_STORE_CTX_init(ctx, store, cert, chain) != 1) {
        ossl_reason(why, sizeof(why));
        rc = sfl__fail(SFL_ENOMEM, "tls: cannot check %s: %s", cert_file, why);
        goto out;
    }
    if (X509_verify_cert(ctx) != 1) {
        v = X509_STORE_CTX_get_error(ctx);
        ERR_clear_error();
        if (v == X509_V_ERR_CERT_HAS_EXPIRED || v == X509_V_ERR_CERT_NOT_YET_VALID) {
            const X509 *bad = X509_STORE_CTX_get_current_cert(ctx);

            cert_time(v == X509_V_ERR_CERT_HAS_EXPIRED ? X509_get0_notAfter(bad ? bad : cert)
                                                      : X509_get0_notBefore(bad ? bad : cert),
                      when, sizeof(when));
            rc = sfl__fail(SFL_ECERT, "%s: %s (%s %s)", bad == cert || bad == NULL ? cert_file
                                                                                      : ca_file,
                           X509_verify_cert_error_string(v),
                           v == X509_V_ERR_CERT_HAS_EXPIRED ? "valid until" : "valid from",
                           when);
        } else {
            rc = sfl__fail(SFL_ECERT, "%s: does not verify against the CA %s: %s", cert_file,
                           ca_file, X509_verify_cert_error_string(v));
        }
        goto out;
    }
    if ((has = role_of(X509_get_subject_name(cert))) != role) {
        rc = sfl__fail(SFL_ECERT, "%s: the certificate's role (subject OU) is %s, not %s",
                       cert_file, sfl_role_name(has), sfl_role_name(role));
        goto out;
    }
    rc = 0;
out:
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    EVP_PKEY_free(pkey);
    sk_X509_pop_free(chain, X509_free);
    X509_free(cert);
    return rc;
}

/* TLS 1.3 handshake cost on the coordinator's side (issue 27, goal 5): a
 * client and a server in one process joined by an in-memory BIO pair, as
 * libsfl configures them (TLS 1.3 only, client certificate required and
 * verified against the CA), so only OpenSSL's work is measured. For each
 * certificate set, N full handshakes (the client offers no session) and N
 * resumed ones (the client offers the ticket of its previous connection,
 * the server opens it and issues the next), the server's and the client's
 * thread CPU per handshake (CLOCK_THREAD_CPUTIME_ID around their own
 * calls). Ratios are taken inside the run: resumed / full and each set /
 * the first (P-256).
 *
 *   bench_tls DIR [N]
 * DIR holds the certificates bench/run.sh makes with sfl-pki:
 *   p256/     ca.crt, coordinator/coord.{crt,key}, agent/a.{crt,key}     (all P-256)
 *   p256/     agent/ed.{crt,key}                (an Ed25519 agent, P-256 CA)
 *   ed25519/  ca.crt, coordinator/coord.{crt,key}, agent/a.{crt,key}  (all Ed25519)
 * Output lines:
 *   bench_tls set=S full_server_us=.. full_client_us=.. resumed_server_us=..
 *             resumed_client_us=.. resumed_over_full=.. server_full_over_p256=..
 *             joins_per_core_s_full=.. joins_per_core_s_resumed=..
 * (joins per second of one core's server CPU: TLS only, no Join call.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static double cpu_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_tls: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static SSL_CTX *make_ctx(int server, const char *dir, const char *ca, const char *cert,
                         const char *key)
{
    char p[1024];
    SSL_CTX *c = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

    if (c == NULL || SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) != 1)
        die("context");
    snprintf(p, sizeof(p), "%s/%s", dir, ca);
    if (SSL_CTX_load_verify_locations(c, p, NULL) != 1)
        die(p);
    snprintf(p, sizeof(p), "%s/%s", dir, cert);
    if (SSL_CTX_use_certificate_chain_file(c, p) != 1)
        die(p);
    snprintf(p, sizeof(p), "%s/%s", dir, key);
    if (SSL_CTX_use_PrivateKey_file(c, p, SSL_FILETYPE_PEM) != 1)
        die(p);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | (server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), NULL);
    if (server) {
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
        SSL_CTX_set_num_tickets(c, 1);
        SSL_CTX_set_session_id_context(c, (const unsigned char *)"bench", 5);
    } else {
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    }
    return c;
}

/* One connection; *sess in: the session to offer (or NULL), out: the
 * client's next one. Adds each side's CPU. */
static void one(SSL_CTX *sc, SSL_CTX *cc, SSL_SESSION **sess, double *s_us, double *c_us,
                int *resumed)
{
    SSL *s = SSL_new(sc), *c = SSL_new(cc);
    BIO *sb = NULL, *cb = NULL;
    int sdone = 0, cdone = 0, rounds = 0;
    unsigned char buf[64];
    double t;

    if (s == NULL || c == NULL || BIO_new_bio_pair(&sb, 0, &cb, 0) != 1)
        die("ssl");
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(c, cb, cb);
    SSL_set_accept_state(s);
    SSL_set_connect_state(c);
    if (SSL_set_tlsext_host_name(c, "localhost") != 1)
        die("sni");
    if (*sess != NULL && SSL_set_session(c, *sess) != 1)
        die("set_session");
    while (!(sdone && cdone)) {
        if (++rounds > 20)
            die("handshake does not finish");
        if (!cdone) {
            t = cpu_us();
            int r = SSL_do_handshake(c);
            *c_us += cpu_us() - t;
            if (r == 1)
                cdone = 1;
            else if (SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
                die("client handshake");
        }
        if (!sdone) {
            t = cpu_us();
            int r = SSL_do_handshake(s);
            *s_us += cpu_us() - t;
            if (r == 1)
                sdone = 1;
            else if (SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
                die("server handshake");
        }
    }
    /* the server's first read sends its ticket (as in libsfl, whose
     * server reads right after the handshake); the client reads it */
    t = cpu_us();
    if (SSL_read(s, buf, sizeof(buf)) > 0)
        die("unexpected data");
    *s_us += cpu_us() - t;
    t = cpu_us();
    if (SSL_read(c, buf, sizeof(buf)) > 0)
        die("unexpected data");
    *c_us += cpu_us() - t;
    ERR_clear_error();
    *resumed = SSL_session_reused(s);
    SSL_SESSION_free(*sess);
    *sess = SSL_get1_session(c);
    /* an orderly end, or OpenSSL marks the session not resumable */
    SSL_shutdown(c);
    SSL_free(s);
    SSL_free(c);
}

typedef struct {
    const char *name, *dir, *agent;
} set_t;

int main(int argc, char **argv)
{
    char sub[1024], crt[64], key[64];
    int n = argc > 2 ? atoi(argv[2]) : 300;
    const set_t sets[] = {
        {"p256", "p256", "a"},
        {"ed25519_agent_p256_ca", "p256", "ed"},
        {"ed25519", "ed25519", "a"},
    };
    double p256_full = 0;

    if (argc < 2 || n < 10) {
        fprintf(stderr, "usage: bench_tls DIR [N >= 10]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        double fs = 0, fc = 0, rs = 0, rc = 0;
        SSL_SESSION *sess = NULL;
        SSL_CTX *sc, *cc;
        int resumed = 0, nres = 0;

        snprintf(sub, sizeof(sub), "%s/%s", argv[1], sets[i].dir);
        snprintf(crt, sizeof(crt), "agent/%s.crt", sets[i].agent);
        snprintf(key, sizeof(key), "agent/%s.key", sets[i].agent);
        sc = make_ctx(1, sub, "ca.crt", "coordinator/coord.crt", "coordinator/coord.key");
        cc = make_ctx(0, sub, "ca.crt", crt, key);
        /* warm up, then alternate: full (no session), resumed (the last) */
        one(sc, cc, &sess, &fs, &fc, &resumed);
        fs = fc = 0;
        for (int k = 0; k < n; k++) {
            SSL_SESSION *none = NULL;

            one(sc, cc, &none, &fs, &fc, &resumed);
            if (resumed)
                die("a full handshake resumed");
            SSL_SESSION_free(sess);
            sess = none;
            one(sc, cc, &sess, &rs, &rc, &resumed);
            nres += resumed;
        }
        if (nres != n) {
            fprintf(stderr, "resumed %d of %d\n", nres, n);
            die("a resumption was refused");
        }
        fs /= n, fc /= n, rs /= n, rc /= n;
        if (i == 0)
            p256_full = fs;
        printf("bench_tls set=%s full_server_us=%.0f full_client_us=%.0f resumed_server_us=%.0f "
               "resumed_client_us=%.0f resumed_over_full=%.3f server_full_over_p256=%.3f "
               "joins_per_core_s_full=%.0f joins_per_core_s_resumed=%.0f\n",
               sets[i].name, fs, fc, rs, rc, rs / fs, fs / p256_full, 1e6 / fs, 1e6 / rs);
        SSL_SESSION_free(sess);
        SSL_CTX_free(sc);
        SSL_CTX_free(cc);
    }
    return 0;
}

/* server/service/fleetsvc.c: the Fleet service on the master, on the
 * in-process coordinator (coordfx.h) with a front-end's certificate
 * (sfl-pki frontend): who may call it, relayed Joins and calls, agents
 * moving between front-end connections, Gone, revocation, the front-end's
 * connection closing, and what a hostile front-end sends. */
#include "coordfx.h"

#include <math.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "coord_int.h"
#include "fleet/frontend.h"
#include "round/registry.h"
#include "net/transport_int.h"

/* A certificate as DER, with its SHA-256 (what sfl_peer_t shows). */
typedef struct {
    uint8_t der[4096];
    size_t len;
    uint8_t sha[32];
    sfl_tls_t *tls; /* a client context with its key (cert_key), or NULL */
} cert_t;

/* the agents a1 and a2 of the fixture's CA; their fingerprints */
static cert_t cert_a, cert_b;
/* fold mode's hostile test: a1..a7 (cert_f[0], [1] unused: cert_a, cert_b) */
#define NFOLD 7
static cert_t cert_f[NFOLD];
static uint8_t sha_a[32], sha_b[32];

/* PKI_DIR/ca/FILE (PEM) as DER. */
static void cert_load(cert_t *c, const char *file)
{
    char path[600];
    unsigned char *p = c->der;
    unsigned int n = 0;
    X509 *x;
    FILE *f;
    int len;

    snprintf(path, sizeof(path), "%s/%s", fx_pki_dir(), file);
    f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: cannot open", path);
    x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    len = i2d_X509(x, NULL);
    assert_true(len > 0 && (size_t)len <= sizeof(c->der));
    assert_int_equal(i2d_X509(x, &p), len);
    c->len = (size_t)len;
    assert_int_equal(X509_digest(x, EVP_sha256(), c->sha, &n), 1);
    X509_free(x);
}

/* c's key, for the Joins' cert_proof (a client context, as the agent's). */
static void cert_key(cert_t *c, const char *base)
{
    char crt[600], key[600], ca[600];
    sfl_tls_config_t cfg = {.verify_host = "localhost"};

    snprintf(crt, sizeof(crt), "%s/%s.crt", fx_pki_dir(), base);
    snprintf(key, sizeof(key), "%s/%s.key", fx_pki_dir(), base);
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", fx_pki_dir());
    cfg.cert_file = crt;
    cfg.key_file = key;
    cfg.ca_file = ca;
    assert_int_equal(sfl_tls_new(&cfg, 0, &c->tls), 0);
}

/* The Join request req (freed) with a cert_proof by c's key over the
 * identity key pk (NULL: the request's own), as the agent signs it. */
static uint8_t *proved(uint8_t *req, size_t *rl, const cert_t *c, const uint8_t *pk)
{
    sfl_join_req_t j;
    uint8_t *buf = NULL;

    assert_int_equal(sfl_msg_join_req_unpack(req, *rl, NULL, &j), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(sfl_tls_cert_binding_sign(c->tls, pk != NULL ? pk : j.identity_key,
                                               j.cert_proof, &j.cert_proof_len),
                     0);
    assert_int_equal(sfl_msg_join_req_pack(&j, &buf, rl), 0);
    return buf;
}

/* Packs a FleetCall around req (freed), or an empty request, with der
 * (NULL: none). */
static uint8_t *wrap_cert(const char *cn, const uint8_t sha[32], const uint8_t *der,
                          size_t dlen, uint8_t *req, size_t rlen, uint64_t conn, size_t *len)
{
    sfl_fleet_call_t m;
    uint8_t *buf = NULL;

    memset(&m, 0, sizeof(m));
    snprintf(m.agent_cn, sizeof(m.agent_cn), "%s", cn);
    memcpy(m.cert_sha256, sha, 32);
    m.request = req;
    m.request_len = rlen;
    m.conn_id = conn;
    m.agent_cert = (uint8_t *)(uintptr_t)der;
    m.agent_cert_len = der != NULL ? dlen : 0;
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, len), 0);
    sfl_msg_buf_free(req);
    return buf;
}

/* The same with the certificate sha names (a1's or a2's; none for others),
 * as a front-end sends it. */
static uint8_t *wrap(const char *cn, const uint8_t sha[32], uint8_t *req, size_t rlen,
                     uint64_t conn, size_t *len)
{
    const cert_t *c = memcmp(sha, sha_a, 32) == 0 ? &cert_a
                      : memcmp(sha, sha_b, 32) == 0 ? &cert_b
                                                    : NULL;

    return wrap_cert(cn, sha, c != NULL ? c->der : NULL, c != NULL ? c->len : 0, req, rlen,
                     conn, len);
}

static uint8_t *heartbeat(uint64_t agent, size_t *len)
{
    sfl_heartbeat_req_t h;
    uint8_t *buf = NULL;

    memset(&h, 0, sizeof(h));
    h.agent_id = agent;
    h.phase = SFL_PHASE_IDLE;
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, len), 0);
    return buf;
}

/* Fleet/Heartbeat for agent on conn: the status, the message in res. */
static int fleet_hb(cli_t *fe, const char *cn, const uint8_t sha[32], uint64_t agent,
                    uint64_t conn, res_t *res)
{
    size_t rl, len;
    uint8_t *req = heartbeat(agent, &rl);
    uint8_t *buf = wrap(cn, sha, req, rl, conn, &len);

    fx_call(fe, "/sfl.v1.Fleet/Heartbeat", buf, len, res);
    return res->status;
}

static uint64_t fleet_join(cli_t *fe, const char *cn, const uint8_t sha[32], uint64_t conn,
                           sfl_identity_t *id)
{
    sfl_join_reply_t r;
    res_t res = {0};
    size_t rl, len;
    uint8_t *req = fx_join_req(fe, id, SFL_MSG_PROTOCOL_VERSION, &rl);
    uint8_t *buf;

    req = proved(req, &rl, memcmp(sha, sha_a, 32) == 0 ? &cert_a : &cert_b, NULL);
    buf = wrap(cn, sha, req, rl, conn, &len);
    fx_call(fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    if (res.status != 0)
        fail_msg("Fleet/Join %s: %d %s", cn, res.status, res.msg);
    assert_int_equal(sfl_msg_join_reply_unpack(res.resp, res.len, NULL, &r), 0);
    assert_memory_equal(r.coordinator_key, coord_public_key(F.co), 32);
    free(res.resp);
    return r.agent_id;
}

static uint32_t connected(void)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    uint32_t n = st->connected_agents;

    sfl_msg_status_free(st);
    return n;
}

static int fe_setup(void **state)
{
    int rc = fx_group_setup(state);

    if (rc == 0) {
        test_sh("sh %s frontend %s/ca fe1 >/dev/null", PKI, fx_pki_dir());
        /* another federation's CA, with an agent of the same name */
        test_sh("sh %s init %s/ca2 >/dev/null", PKI, fx_pki_dir());
        test_sh("sh %s agent %s/ca2 a1 >/dev/null", PKI, fx_pki_dir());
        cert_load(&cert_a, "ca/agent/a1.crt");
        cert_load(&cert_b, "ca/agent/a2.crt");
        cert_key(&cert_a, "ca/agent/a1");
        cert_key(&cert_b, "ca/agent/a2");
        memcpy(sha_a, cert_a.sha, 32);
        memcpy(sha_b, cert_b.sha, 32);
        /* fold mode's cohort: a3..a7 too */
        for (int i = 2; i < NFOLD; i++) {
            char f[64];

            if (i >= 3) /* the fixture made a1..a3 */
                test_sh("sh %s agent %s/ca a%d >/dev/null", PKI, fx_pki_dir(), i + 1);
            snprintf(f, sizeof(f), "ca/agent/a%d.crt", i + 1);
            cert_load(&cert_f[i], f);
            snprintf(f, sizeof(f), "ca/agent/a%d", i + 1);
            cert_key(&cert_f[i], f);
        }
    }
    return rc;
}

static int fe_teardown(void **state)
{
    for (int i = 2; i < NFOLD; i++) {
        sfl_tls_free(cert_f[i].tls);
        cert_f[i].tls = NULL;
    }
    sfl_tls_free(cert_a.tls);
    sfl_tls_free(cert_b.tls);
    cert_a.tls = cert_b.tls = NULL;
    return fx_group_teardown(state);
}

/* Front-end certificates call Fleet only; nobody else calls Fleet. */
static void test_fleet_roles(void **state)
{
    cli_t fe = {0};
    res_t res = {0};
    uint8_t *buf;
    size_t len;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    fx_cli_connect(&F.ag[0].cli, "agent/a1");
    assert_int_equal(sfl_identity_generate(&F.ag[0].id), 0);
    buf = fx_join_req(&fe, F.ag[0].id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&fe, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(sfl_msg_status_req_pack(&buf, &len), 0);
    fx_call(&fe, "/sfl.v1.Admin/Status", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    /* an agent or an admin on Fleet */
    assert_int_equal(fleet_hb(&F.ag[0].cli, "a1", sha_a, 1, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(fleet_hb(&F.admin, "a1", sha_a, 1, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    free(res.resp);
    fx_cli_close(&fe);
}

/* Relayed Join and calls; the agent's connection moves; Gone. */
static void test_fleet_relay(void **state)
{
    cli_t fe = {0}, fe2 = {0};
    sfl_identity_t *id = NULL, *id2 = NULL;
    res_t res = {0};
    uint64_t agent, agent2;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_identity_generate(&id2), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    assert_true(agent > 0);
    assert_int_equal(connected(), 1);
    {
        static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        const char *r = fx_http(get, sizeof(get) - 1);

        assert_non_null(strstr(r, "\nsfl_frontends_connected 1\n"));
        assert_non_null(strstr(r, "\nsfl_frontend_agents 1\n"));
    }
    assert_int_equal(fleet_hb(&fe, "a1", sha_a, agent, 1, &res), 0);
    /* the same agent again (a reconnect): the same id */
    assert_int_equal(fleet_join(&fe, "a1", sha_a, 5, id), agent);
    /* the name is bound to its certificate and key */
    {
        size_t rl, len;
        uint8_t *req = fx_join_req(&fe, id2, SFL_MSG_PROTOCOL_VERSION, &rl);
        uint8_t *buf;

        /* (a1's certificate key signs: the store's binding refuses) */
        req = proved(req, &rl, &cert_a, NULL);
        buf = wrap("a1", sha_a, req, rl, 6, &len);

        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        req = fx_join_req(&fe, id, SFL_MSG_PROTOCOL_VERSION, &rl);
        req = proved(req, &rl, &cert_b, NULL);
        buf = wrap("a1", sha_b, req, rl, 7, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    }
    /* conn 1 is a1's: another certificate cannot use it */
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 1, &res),
                     SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "another agent certificate"));
    /* an agent that never joined; another agent's id */
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 2, &res),
                     SFL_GRPC_STATUS_FAILED_PRECONDITION);
    agent2 = fleet_join(&fe, "a2", sha_b, 3, id2);
    assert_int_equal(fleet_hb(&fe, "a2", sha_b, agent, 3, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(connected(), 2);
    /* a1 moves to another front-end connection without a new Join; the
     * old front-end's Gone for its old connection does not take it off */
    fx_cli_connect(&fe2, "frontend/fe1");
    assert_int_equal(fleet_hb(&fe2, "a1", sha_a, agent, 1, &res), 0);
    {
        size_t len;
        uint8_t *buf = wrap("a1", sha_a, NULL, 0, 5, &len);

        fx_call(&fe, "/sfl.v1.Fleet/Gone", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 2);
    /* the first front-end goes: a2 with it, a1 stays on the second */
    fx_cli_close(&fe);
    for (int i = 0; i < 1000 && connected() != 1; i++) /* the master sees the close */
        fx_run_for(5);
    assert_int_equal(connected(), 1);
    {
        size_t len;
        uint8_t *buf = wrap("a1", sha_a, NULL, 0, 1, &len);

        fx_call(&fe2, "/sfl.v1.Fleet/Gone", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 0);
    (void)agent2;
    free(res.resp);
    fx_cli_close(&fe2);
    sfl_identity_free(id);
    sfl_identity_free(id2);
}

/* What a hostile front-end sends: malformed, oversized, revoked. */
static void test_fleet_hostile(void **state)
{
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    res_t res = {0};
    uint64_t agent;
    uint8_t *buf;
    size_t len;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    /* not a FleetCall */
    buf = malloc(8);
    memset(buf, 0xff, 8);
    fx_call(&fe, "/sfl.v1.Fleet/Heartbeat", buf, 8, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    /* a FleetCall around junk */
    buf = malloc(8);
    memset(buf, 0xff, 8);
    buf = wrap("a1", sha_a, buf, 8, 1, &len);
    fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    /* larger than a Join may be */
    buf = calloc(1, 70000);
    buf = wrap("a1", sha_a, buf, 70000, 1, &len);
    fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    /* revoked: refused, and the agent goes offline */
    assert_int_equal(sfl_identity_generate(&id), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    assert_int_equal(connected(), 1);
    {
        sfl_revoke_t m;

        memset(&m, 0, sizeof(m));
        memcpy(m.fingerprint, sha_a, 32);
        m.has_fingerprint = 1;
        assert_int_equal(sfl_msg_revoke_req_pack(&m, &buf, &len), 0);
        fx_call(&F.admin, "/sfl.v1.Admin/RevokeCertificate", buf, len, &res);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(connected(), 0);
    assert_int_equal(fleet_hb(&fe, "a1", sha_a, agent, 1, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, SFL_MSG_REVOKED));
    /* the front-end's connection survives all of it */
    assert_non_null(fe.c);
    free(res.resp);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

static uint64_t certs_refused(void)
{
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char name[] = "\nsfl_frontend_certs_refused_total ";
    const char *r = strstr(fx_http(get, sizeof(get) - 1), name);

    assert_non_null(r);
    return strtoull(r + sizeof(name) - 1, NULL, 10);
}

static uint32_t known(void)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    uint32_t n = st->known_agents;

    sfl_msg_status_free(st);
    return n;
}

/* Fleet/Join on conn for cn, sha with the certificate der: the status,
 * the message in res. */
static int join_cert(cli_t *fe, const char *cn, const uint8_t sha[32], const uint8_t *der,
                     size_t dlen, uint64_t conn, sfl_identity_t *id, res_t *res)
{
    size_t rl, len;
    uint8_t *req = fx_join_req(fe, id, SFL_MSG_PROTOCOL_VERSION, &rl);
    uint8_t *buf = wrap_cert(cn, sha, der, dlen, req, rl, conn, &len);

    fx_call(fe, "/sfl.v1.Fleet/Join", buf, len, res);
    return res->status;
}

/* A hostile front-end names agent certificates it does not hold: each
 * relayed certificate is verified as the listener verifies an agent's, and
 * a refusal writes nothing (no agent known, none connected), is counted and
 * says why. */
static void test_fleet_certs(void **state)
{
    static uint8_t big[SFL_MSG_CERT_DER_MAX + 1];
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    cert_t other, admin, coord, fecert;
    res_t res = {0};
    uint64_t refused0, agent;
    uint8_t junk[200];
    uint8_t *buf;
    size_t len;

    (void)state;
    cert_load(&other, "ca2/agent/a1.crt");
    cert_load(&admin, "ca/admin/alice.crt");
    cert_load(&coord, "ca/coordinator/coord.crt");
    cert_load(&fecert, "ca/frontend/fe1.crt");
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_identity_generate(&id), 0);
    refused0 = certs_refused();
    /* no certificate on the call that opens a conn_id */
    assert_int_equal(join_cert(&fe, "a1", sha_a, NULL, 0, 1, id, &res),
                     SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "agent_cert missing"));
    /* a1's certificate, another name: the sybil */
    assert_int_equal(join_cert(&fe, "sybil-1", sha_a, cert_a.der, cert_a.len, 2, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "CN is a1, not agent_cn sybil-1"));
    /* a1's certificate, a2's fingerprint */
    assert_int_equal(join_cert(&fe, "a1", sha_b, cert_a.der, cert_a.len, 3, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "SHA-256"));
    /* a certificate of another CA (its own name and fingerprint) */
    assert_int_equal(join_cert(&fe, "a1", other.sha, other.der, other.len, 4, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "does not verify against the CA"));
    /* our CA's admin, coordinator and front-end certificates */
    assert_int_equal(join_cert(&fe, "alice", admin.sha, admin.der, admin.len, 5, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "of the admin role, not agent"));
    assert_int_equal(join_cert(&fe, "coord", coord.sha, coord.der, coord.len, 6, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "agent_cert"));
    assert_int_equal(join_cert(&fe, "fe1", fecert.sha, fecert.der, fecert.len, 7, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "of the coordinator role, not agent"));
    /* garbage, a certificate with a byte after it, one byte short, oversized */
    memset(junk, 0xa5, sizeof(junk));
    assert_int_equal(join_cert(&fe, "a1", sha_a, junk, sizeof(junk), 8, id, &res),
                     SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "not a DER certificate"));
    {
        cert_t t = cert_a;

        t.der[t.len] = 0;
        assert_int_equal(join_cert(&fe, "a1", sha_a, t.der, t.len + 1, 9, id, &res),
                         SFL_GRPC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(res.msg, "bytes after the DER certificate"));
        assert_int_equal(join_cert(&fe, "a1", sha_a, t.der, t.len - 1, 10, id, &res),
                         SFL_GRPC_STATUS_INVALID_ARGUMENT);
        /* one bit of the signed part flipped: the signature fails */
        t.der[t.len / 2] ^= 1;
        assert_int_equal(join_cert(&fe, "a1", sha_a, t.der, t.len, 11, id, &res) != 0, 1);
    }
    /* oversized: what pack refuses to make, field 5 appended by hand */
    memcpy(big, cert_a.der, cert_a.len);
    {
        size_t rl, n;
        uint8_t *req = fx_join_req(&fe, id, SFL_MSG_PROTOCOL_VERSION, &rl), *b;

        buf = wrap_cert("a1", sha_a, NULL, 0, req, rl, 12, &len);
        b = malloc(len + 3 + sizeof(big));
        assert_non_null(b);
        memcpy(b, buf, len);
        sfl_msg_buf_free(buf);
        n = len;
        b[n++] = 5 << 3 | 2;
        b[n++] = (uint8_t)(sizeof(big) | 0x80); /* 8193 as a varint */
        b[n++] = (uint8_t)(sizeof(big) >> 7);
        memcpy(b + n, big, sizeof(big));
        fx_call(&fe, "/sfl.v1.Fleet/Join", b, n + sizeof(big), &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(res.msg, "agent_cert"));
    }
    /* expired (the master's clock past the agent's 825 days, not the CA's),
     * and not yet valid */
    sfl__tls_set_check_time(F.co->tls, time(NULL) + 900 * 86400L);
    assert_int_equal(join_cert(&fe, "a1", sha_a, cert_a.der, cert_a.len, 13, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "expired"));
    sfl__tls_set_check_time(F.co->tls, time(NULL) - 2 * 86400L);
    assert_int_equal(join_cert(&fe, "a1", sha_a, cert_a.der, cert_a.len, 14, id, &res),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "not yet valid"));
    sfl__tls_set_check_time(F.co->tls, 0);
    /* not on Join alone: any call that opens a conn_id */
    {
        size_t rl;
        uint8_t *req = heartbeat(1, &rl);

        buf = wrap_cert("sybil-2", sha_a, cert_a.der, cert_a.len, req, rl, 15, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Heartbeat", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    }
    /* nothing written, every one counted (the unpacker refused the
     * oversized one before the check) */
    assert_int_equal(known(), 0);
    assert_int_equal(connected(), 0);
    assert_int_equal(certs_refused() - refused0, 14);
    /* the genuine one; later calls on its conn_id may leave it out, but
     * not send another */
    agent = fleet_join(&fe, "a1", sha_a, 20, id);
    assert_int_equal(known(), 1);
    assert_int_equal(connected(), 1);
    {
        size_t rl;
        uint8_t *req = heartbeat(agent, &rl);

        buf = wrap_cert("a1", sha_a, NULL, 0, req, rl, 20, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Heartbeat", buf, len, &res);
        assert_int_equal(res.status, 0);
        req = heartbeat(agent, &rl);
        buf = wrap_cert("a1", sha_a, cert_b.der, cert_b.len, req, rl, 20, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Heartbeat", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(res.msg, "not the certificate of conn_id 20"));
    }
    /* A certificate the front-end has seen (a2's), a key of its own: the
     * Join needs cert_proof, by a2's certificate key, over that key */
    {
        sfl_identity_t *mine = NULL;
        size_t rl;
        uint8_t *req;

        assert_int_equal(sfl_identity_generate(&mine), 0);
        refused0 = certs_refused();
        req = fx_join_req(&fe, mine, SFL_MSG_PROTOCOL_VERSION, &rl);
        buf = wrap("a2", sha_b, req, rl, 30, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        assert_non_null(strstr(res.msg, "cert_proof missing"));
        /* signed by another certificate's key (a1's) */
        req = proved(fx_join_req(&fe, mine, SFL_MSG_PROTOCOL_VERSION, &rl), &rl, &cert_a, NULL);
        buf = wrap("a2", sha_b, req, rl, 30, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        assert_non_null(strstr(res.msg, "cert_proof does not verify"));
        /* a2's genuine proof, for a2's own key, replayed with another key */
        req = proved(fx_join_req(&fe, mine, SFL_MSG_PROTOCOL_VERSION, &rl), &rl, &cert_b,
                     id->pk);
        buf = wrap("a2", sha_b, req, rl, 30, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
        assert_non_null(strstr(res.msg, "cert_proof does not verify"));
        /* a Join on an open conn_id still carries the certificate */
        req = proved(fx_join_req(&fe, mine, SFL_MSG_PROTOCOL_VERSION, &rl), &rl, &cert_b, NULL);
        buf = wrap_cert("a2", sha_b, NULL, 0, req, rl, 30, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(res.msg, "agent_cert missing"));
        assert_int_equal(certs_refused() - refused0, 4);
        assert_int_equal(known(), 1);
        assert_int_equal(connected(), 1);
        /* the agent's own Join, signed by its certificate's key: bound */
        assert_true(fleet_join(&fe, "a2", sha_b, 30, mine) > 0);
        assert_int_equal(known(), 2);
        sfl_identity_free(mine);
    }
    assert_non_null(fe.c);
    free(res.resp);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

static void st_msg(sfl_grpc_call_t *c, const uint8_t *msg, size_t len, void *ud)
{
    stream_t *s = ud;

    (void)c;
    assert_true(s->n < MAX_MSGS);
    s->m[s->n] = malloc(len ? len : 1);
    assert_non_null(s->m[s->n]);
    memcpy(s->m[s->n], msg, len);
    s->len[s->n++] = len;
}

static void st_done(sfl_grpc_call_t *c, int status, const char *message, void *ud)
{
    stream_t *s = ud;

    (void)c;
    s->done = 1;
    s->status = status;
    snprintf(s->msg, sizeof(s->msg), "%s", message);
}

/* Fleet.Model for (job, hash): the status, the model in *model. */
static int fleet_model(cli_t *fe, uint64_t job, const uint8_t hash[32], uint8_t **model,
                       size_t *mlen)
{
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    int status;

    assert_int_equal(sfl_msg_fleet_model_req_pack(job, hash, &buf, &len), 0);
    fx_call(fe, "/sfl.v1.Fleet/Model", buf, len, &res);
    status = res.status;
    if (status == 0)
        assert_int_equal(sfl_msg_fleet_model_reply_unpack(res.resp, res.len, NULL, model, mlen),
                         0);
    free(res.resp);
    return status;
}

/* A front-end's agent gets its task without the model; Fleet.Model gives
 * the model, which put back makes the task an agent unpacks and checks. */
static void test_fleet_model_once(void **state)
{
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    sfl_job_spec_t spec;
    stream_t st = {0};
    sfl_subscribe_req_t sr;
    uint8_t *buf = NULL, *model = NULL, *full = NULL, hash[32], bad[32];
    size_t len, rl, mlen, flen;
    uint64_t agent, job;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    assert_int_equal(sfl_identity_generate(&id), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    fx_job_spec(&spec, 30000, 3);
    spec.cohort_size = 1;
    spec.min_quorum = 1;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    memset(&sr, 0, sizeof(sr));
    sr.agent_id = agent;
    assert_int_equal(sfl_msg_subscribe_req_pack(&sr, &buf, &rl), 0);
    buf = wrap("a1", sha_a, buf, rl, 1, &len);
    assert_int_equal(sfl_grpc_call_stream(fe.s, "/sfl.v1.Fleet/Subscribe", buf, len, 0, st_msg,
                                          st_done, &st, &st.call),
                     0);
    sfl_msg_buf_free(buf);
    for (int i = 0; i < 2000 && st.n == 0 && !st.done; i++)
        fx_run_for(5);
    assert_true(st.n >= 1);
    assert_int_equal(sfl_msg_task_needs_model(st.m[0], st.len[0], &job, hash), 1);
    assert_true(job == 1);
    /* what an agent would make of it without the model: refused */
    assert_int_equal(sfl_msg_task_or_wait_unpack(st.m[0], st.len[0], NULL, &t, &w), SFL_EPARSE);
    assert_null(t);
    assert_int_equal(fleet_model(&fe, job, hash, &model, &mlen), 0);
    assert_int_equal(sfl_msg_task_put_model(st.m[0], st.len[0], model, mlen, &full, &flen), 0);
    assert_int_equal(sfl_msg_task_or_wait_unpack(full, flen, NULL, &t, &w), 0);
    assert_non_null(t);
    assert_memory_equal(t->model_hash, hash, 32);
    assert_int_equal(t->model->dim, DIM);
    sfl_msg_task_free(t);
    /* another model, another job: NOT_FOUND */
    memcpy(bad, hash, 32);
    bad[0] ^= 1;
    assert_int_equal(fleet_model(&fe, job, bad, &model, &mlen), SFL_GRPC_STATUS_NOT_FOUND);
    assert_int_equal(fleet_model(&fe, 99, hash, &model, &mlen), SFL_GRPC_STATUS_NOT_FOUND);
    /* an agent or admin may not ask */
    assert_int_equal(fleet_model(&F.admin, job, hash, &model, &mlen),
                     SFL_GRPC_STATUS_PERMISSION_DENIED);
    sfl_msg_buf_free(model);
    sfl_msg_buf_free(full);
    if (!st.done)
        sfl_grpc_cancel(st.call);
    fx_stream_clear(&st);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

/* A front-end's link carries its agents' cancellations: each agent that
 * leaves resets its relayed Subscribe. nghttp2's default bucket of stream
 * resets (1,000 at once, 33 a second) ended the link with GOAWAY
 * INTERNAL_ERROR when a few thousand agents left (results/fleet.md); the
 * master raises it for a front-end (server/coord.c). 1,200 Subscribes
 * opened and reset on one link: the link still serves. */
static void test_fleet_many_resets(void **state)
{
    cli_t fe = {0};
    sfl_identity_t *id = NULL;
    sfl_subscribe_req_t sr;
    sfl_job_spec_t spec;
    uint8_t *req, *buf, *model = NULL, hash[32] = {0};
    size_t len, rl;
    uint64_t agent;
    int status;
    size_t mlen;

    (void)state;
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    assert_int_equal(sfl_identity_generate(&id), 0);
    agent = fleet_join(&fe, "a1", sha_a, 1, id);
    /* a job that selects a1: each new Subscribe is sent its task at once */
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 30000, 3);
    spec.cohort_size = 1;
    spec.min_quorum = 1;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    memset(&sr, 0, sizeof(sr));
    sr.agent_id = agent;
    for (int i = 0; i < 1200; i++) {
        stream_t st = {0};

        assert_int_equal(sfl_msg_subscribe_req_pack(&sr, &req, &rl), 0);
        buf = wrap("a1", sha_a, req, rl, 1, &len); /* frees req */
        assert_int_equal(sfl_grpc_call_stream(fe.s, "/sfl.v1.Fleet/Subscribe", buf, len, 0,
                                              st_msg, st_done, &st, &st.call),
                         0);
        sfl_msg_buf_free(buf);
        for (int k = 0; k < 2000 && st.n == 0 && !st.done; k++)
            fx_run_for(1);
        assert_true(st.n >= 1); /* the link holds: the task came */
        sfl_grpc_cancel(st.call);
        fx_stream_clear(&st);
    }
    fx_run_for(20);
    /* still the same link, still served: a model nobody has is NOT_FOUND */
    status = fleet_model(&fe, 1, hash, &model, &mlen);
    assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);
    fx_cli_close(&fe);
    sfl_identity_free(id);
}

/* ---- a front-end (fleet/frontend.c) in-process, before the master ---- */

static int fe_done;

static void fe_stopped(void *ud)
{
    (void)ud;
    fe_done = 1;
}

static fe_t *fe_start(void)
{
    char master[64], cert[256], key[256], ca[256];
    struct sockaddr_in a;
    fe_config_t c;
    fe_t *fe = NULL;

    snprintf(master, sizeof(master), "127.0.0.1:%d", F.port);
    snprintf(cert, sizeof(cert), "%s/ca/frontend/fe1.crt", fx_pki_dir());
    snprintf(key, sizeof(key), "%s/ca/frontend/fe1.key", fx_pki_dir());
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", fx_pki_dir());
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &a), 0);
    memset(&c, 0, sizeof(c));
    c.listen = (const struct sockaddr *)&a;
    c.cert = cert;
    c.key = key;
    c.ca = ca;
    c.master = master;
    c.max_conns = 64;
    c.max_handshakes = c.max_handshakes_per_ip = 16;
    c.max_message = F.cfg.max_message;
    c.max_streams = 32;
    c.max_buffered = F.cfg.max_buffered;
    c.max_buffered_total = F.cfg.max_buffered_total;
    c.handshake_timeout_ms = 10000;
    c.idle_timeout_ms = 120000;
    c.body_timeout_ms = 60000;
    assert_int_equal(fe_new(&F.loop, &c, &fe), 0);
    assert_true(fe_port(fe) > 0);
    for (int i = 0; i < 2000 && !fe_master_open(fe); i++)
        fx_run_for(5);
    assert_true(fe_master_open(fe));
    return fe;
}

/* Connects k (certificate who) to the front-end instead of the master. */
static void fe_connect(fe_t *fe, cli_t *k, const char *who)
{
    int port = F.port;

    F.port = fe_port(fe);
    fx_cli_connect(k, who);
    F.port = port;
}

static void fe_stop(fe_t *fe)
{
    fe_done = 0;
    fe_shutdown(fe, fe_stopped, NULL);
    fx_run_until(&fe_done);
    fe_free(fe);
}

/* An unmodified agent's calls through the front-end: Join (its proof
 * checked by the front-end), Subscribe (the task's model put back, the
 * signature the master's), SubmitUpdate, and the master seeing it leave. */
static void test_frontend_relay(void **state)
{
    tagent_t *a1 = &F.ag[0];
    cli_t other = {0};
    sfl_identity_t *id2 = NULL;
    sfl_job_spec_t spec;
    sfl_task_t *task;
    sfl_ack_t ack;
    res_t res = {0};
    uint8_t *buf;
    size_t len;
    int status;
    fe_t *fe;
    static const double vals[3] = {0.5, -1, 2};

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fe = fe_start();
    fe_connect(fe, &a1->cli, "agent/a1");
    assert_int_equal(sfl_identity_generate(&a1->id), 0);
    assert_int_equal(sfl_identity_generate(&id2), 0);
    /* no proof, a proof by another key, a proof over another connection:
     * refused by the front-end */
    buf = fx_join_req_as(&a1->cli, a1->id, NULL, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "no join_proof"));
    buf = fx_join_req_as(&a1->cli, a1->id, id2, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(res.msg, "does not verify"));
    fe_connect(fe, &other, "agent/a1");
    buf = fx_join_req(&other, a1->id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&a1->cli, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    fx_cli_close(&other);
    /* an admin certificate on the front-end's agent service */
    fe_connect(fe, &other, "admin/alice");
    buf = fx_join_req(&other, a1->id, SFL_MSG_PROTOCOL_VERSION, &len);
    fx_call(&other, "/sfl.v1.Coordinator/Join", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    fx_cli_close(&other);
    assert_int_equal(connected(), 0);
    /* the real thing */
    fx_agent_join(a1, "agent/a1");
    assert_memory_equal(a1->coord_pk, coord_public_key(F.co), 32);
    assert_int_equal(connected(), 1);
    fx_job_spec(&spec, 30000, 3);
    spec.cohort_size = 1;
    spec.min_quorum = 1;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_subscribe(a1);
    task = fx_next_task(a1); /* signature and model hash checked */
    assert_int_equal(task->model->dim, DIM);
    buf = fx_make_update(task, a1->id, NULL, a1->agent_id, vals, 100, &len);
    ack = fx_submit(a1, buf, len);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    sfl_msg_buf_free(buf);
    sfl_msg_task_free(task);
    /* the agent leaves the front-end: the master sees it go (Gone) */
    fx_cli_close(&a1->cli);
    for (int i = 0; i < 2000 && connected() != 0; i++)
        fx_run_for(5);
    assert_int_equal(connected(), 0);
    free(res.resp);
    sfl_identity_free(id2);
    fe_stop(fe);
}

/* An agent's heartbeat through the front-end: the status; the reply. */
static int fe_hb(tagent_t *t, sfl_agent_phase_t phase, uint64_t job, const char *cond,
                 sfl_heartbeat_reply_t *rep)
{
    sfl_heartbeat_req_t h;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    int status;

    memset(&h, 0, sizeof(h));
    h.agent_id = t->agent_id;
    h.phase = phase;
    h.job_id = job;
    h.round = job ? 1 : 0;
    if (cond != NULL)
        assert_int_equal(sfl_msg_tags_add(&h.conditions, cond), 0);
    assert_int_equal(sfl_msg_heartbeat_req_pack(&h, &buf, &len), 0);
    fx_call(&t->cli, "/sfl.v1.Coordinator/Heartbeat", buf, len, &res);
    memset(rep, 0, sizeof(*rep));
    if ((status = res.status) == 0)
        assert_int_equal(sfl_msg_heartbeat_reply_unpack(res.resp, res.len, NULL, rep), 0);
    free(res.resp);
    return status;
}

/* Heartbeats relayed to the master and answered by the front-end. */
static void fe_hb_counts(const fe_t *fe, uint64_t *relayed, uint64_t *answered)
{
    fe_stats_t st;

    fe_stats(fe, &st);
    *relayed = *answered = 0;
    for (size_t i = 0; i < FE_METHODS; i++)
        if (strcmp(fe_method_names[i], "Heartbeat") == 0)
            *relayed = st.relayed[i];
    *answered = st.heartbeats_answered;
}

/* An idle agent's repeated heartbeat is answered by the front-end with the
 * master's answer; the first, a changed one (conditions), a round
 * member's and the idle one after it reach the master, which sees each. */
static void test_frontend_heartbeat(void **state)
{
    tagent_t *a1 = &F.ag[0];
    sfl_heartbeat_reply_t rep;
    uint64_t relayed, answered;
    coord_agent_t *a;
    fe_t *fe;

    (void)state;
    fx_start();
    fe = fe_start();
    fe_connect(fe, &a1->cli, "agent/a1");
    fx_agent_join(a1, "agent/a1");
    assert_non_null(a = coord_agent_by_name(F.co, "a1"));
    /* the first reaches the master; its repeats do not */
    assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, NULL, &rep), 0);
    assert_int_equal(rep.interval_ms, F.co->cfg.heartbeat_interval_ms);
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(relayed, 1);
    assert_int_equal(answered, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, NULL, &rep), 0);
        assert_int_equal(rep.interval_ms, F.co->cfg.heartbeat_interval_ms);
        assert_int_equal(rep.abort, 0);
        assert_int_equal(rep.deadline_ms, 0);
    }
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(relayed, 1);
    assert_int_equal(answered, 3);
    /* new conditions reach the master, once */
    assert_false(sfl_msg_tags_has(&a->conds, "charging"));
    assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, "charging", &rep), 0);
    assert_true(sfl_msg_tags_has(&a->conds, "charging"));
    assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, "charging", &rep), 0);
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(relayed, 2);
    assert_int_equal(answered, 4);
    /* a round member's heartbeat is the master's to answer (here: abort,
     * there is no such job), and so is the idle one after it */
    assert_int_equal(fe_hb(a1, SFL_PHASE_TRAINING, 7, "charging", &rep), 0);
    assert_int_equal(rep.abort, 1);
    assert_int_equal(a->phase, SFL_PHASE_TRAINING);
    assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, "charging", &rep), 0);
    assert_int_equal(a->phase, SFL_PHASE_IDLE);
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(relayed, 4);
    assert_int_equal(answered, 4);
    /* the master revokes the agent: the stream it holds ends with that,
     * and its heartbeats are the master's to refuse again, not answered
     * from the front-end's memory */
    assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, "charging", &rep), 0);
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(answered, 5);
    fx_agent_subscribe(a1);
    fx_run_for(50);
    {
        sfl_revoke_t m;
        res_t res = {0};
        uint8_t *buf = NULL;
        size_t len;

        fx_cli_connect(&F.admin, "admin/alice");
        memset(&m, 0, sizeof(m));
        memcpy(m.fingerprint, a->fpr, 32);
        m.has_fingerprint = 1;
        assert_int_equal(sfl_msg_revoke_req_pack(&m, &buf, &len), 0);
        fx_call(&F.admin, "/sfl.v1.Admin/RevokeCertificate", buf, len, &res);
        assert_int_equal(res.status, 0);
        free(res.resp);
    }
    fx_run_until(&a1->sub.done);
    assert_int_not_equal(a1->sub.status, SFL_GRPC_STATUS_OK);
    assert_non_null(strstr(a1->sub.msg, SFL_MSG_REVOKED));
    for (int i = 0; i < 2; i++)
        assert_int_equal(fe_hb(a1, SFL_PHASE_IDLE, 0, "charging", &rep),
                         SFL_GRPC_STATUS_PERMISSION_DENIED);
    fe_hb_counts(fe, &relayed, &answered);
    assert_int_equal(answered, 5);
    fx_cli_close(&a1->cli);
    fe_stop(fe);
}

/* ---- fold mode (service/foldsvc.c): claims and partials of a hostile front-end ---- */

static const cert_t *fold_cert(int i)
{
    return i == 0 ? &cert_a : i == 1 ? &cert_b : &cert_f[i];
}

/* Fleet/Claim of agent i (conn i + 1 on fe) for c: the status; the ack. */
static int fold_claim(cli_t *fe, int i, const sfl_fleet_claim_t *c, sfl_ack_t *ack, res_t *res)
{
    const cert_t *ct = fold_cert(i);
    char cn[16];
    uint8_t *req = NULL, *buf;
    size_t rl, len;

    snprintf(cn, sizeof(cn), "a%d", i + 1);
    assert_int_equal(sfl_msg_fleet_claim_pack(c, &req, &rl), 0);
    buf = wrap_cert(cn, ct->sha, ct->der, ct->len, req, rl, (uint64_t)i + 1, &len);
    fx_call(fe, "/sfl.v1.Fleet/Claim", buf, len, res);
    memset(ack, 0, sizeof(*ack));
    if (res->status == 0)
        assert_int_equal(sfl_msg_ack_unpack(res->resp, res->len, NULL, ack), 0);
    return res->status;
}

/* Fleet/Partial p on fe: the status, the message in res. */
static int fold_partial(cli_t *fe, const sfl_fleet_partial_t *p, res_t *res)
{
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_fleet_partial_pack(p, &buf, &len), 0);
    fx_call(fe, "/sfl.v1.Fleet/Partial", buf, len, res);
    return res->status;
}

static uint32_t fold_accepted(uint64_t job)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    uint32_t n = fx_find_job(st, job)->accepted;

    sfl_msg_status_free(st);
    return n;
}

/* A frontend_fold job of 6 (a1..a6; a7 joined, not subscribed): what the
 * master refuses of a front-end's claims (an unselected agent, a bad
 * signature, more samples than joined, twice, directly after a claim) and
 * partials (another front-end's member, a member twice, weight_sum, the
 * dimension, a value not finite, the norm bound, a closed attempt): each
 * with its reason, nothing counted; then honest partials are counted. */
static void test_fleet_fold_hostile(void **state)
{
    cli_t fe = {0}, fe2 = {0};
    sfl_identity_t *id[NFOLD] = {0};
    uint64_t agent[NFOLD], job;
    stream_t st[6];
    sfl_job_spec_t spec;
    sfl_fleet_fold_spec_t fs;
    sfl_fleet_claim_t c;
    sfl_fleet_partial_t p;
    sfl_upd_ctx_t ctx;
    sfl_task_t *t = NULL;
    sfl_wait_t w;
    sfl_ack_t ack;
    res_t res = {0};
    uint8_t *buf = NULL, *model = NULL, *full = NULL, hash[32];
    size_t len, rl, mlen, flen;
    double dense[DIM] = {0};
    uint64_t mem[2];
    int status;

    (void)state;
    memset(st, 0, sizeof(st));
    fx_start();
    fx_cli_connect(&fe, "frontend/fe1");
    fx_cli_connect(&fe2, "frontend/fe1");
    fx_cli_connect(&F.admin, "admin/alice");
    for (int i = 0; i < NFOLD; i++) {
        sfl_join_reply_t r;
        char cn[16];
        uint8_t *req;

        assert_int_equal(sfl_identity_generate(&id[i]), 0);
        req = fx_join_req(&fe, id[i], SFL_MSG_PROTOCOL_VERSION, &rl);
        req = proved(req, &rl, fold_cert(i), NULL);
        snprintf(cn, sizeof(cn), "a%d", i + 1);
        buf = wrap_cert(cn, fold_cert(i)->sha, fold_cert(i)->der, fold_cert(i)->len, req, rl,
                        (uint64_t)i + 1, &len);
        fx_call(&fe, "/sfl.v1.Fleet/Join", buf, len, &res);
        assert_int_equal(res.status, 0);
        assert_int_equal(sfl_msg_join_reply_unpack(res.resp, res.len, NULL, &r), 0);
        agent[i] = r.agent_id;
    }
    fx_job_spec(&spec, 60000, 3);
    spec.cohort_size = 6;
    spec.min_quorum = 6;
    spec.max_update_norm = 10;
    spec.frontend_fold = 1;
    job = fx_create_job(&F.admin, &spec, &status).job_id;
    assert_int_equal(status, 0);
    for (int i = 0; i < 6; i++) {
        sfl_subscribe_req_t sr;
        char cn[16];

        memset(&sr, 0, sizeof(sr));
        sr.agent_id = agent[i];
        snprintf(cn, sizeof(cn), "a%d", i + 1);
        assert_int_equal(sfl_msg_subscribe_req_pack(&sr, &buf, &rl), 0);
        buf = wrap_cert(cn, fold_cert(i)->sha, fold_cert(i)->der, fold_cert(i)->len, buf, rl,
                        (uint64_t)i + 1, &len);
        assert_int_equal(sfl_grpc_call_stream(fe.s, "/sfl.v1.Fleet/Subscribe", buf, len, 0,
                                              st_msg, st_done, &st[i], &st[i].call),
                         0);
        sfl_msg_buf_free(buf);
    }
    for (int i = 0; i < 4000 && st[0].n == 0 && !st[0].done; i++)
        fx_run_for(5);
    assert_true(st[0].n >= 1);
    assert_int_equal(sfl_msg_task_needs_model(st[0].m[0], st[0].len[0], &job, hash), 1);
    assert_int_equal(fleet_model(&fe, job, hash, &model, &mlen), 0);
    assert_int_equal(sfl_msg_task_put_model(st[0].m[0], st[0].len[0], model, mlen, &full, &flen), 0);
    assert_int_equal(sfl_msg_task_or_wait_unpack(full, flen, NULL, &t, &w), 0);
    assert_non_null(t);

    /* FoldSpec: this attempt folds, with what an update is signed over */
    assert_int_equal(sfl_msg_fleet_fold_spec_req_pack(job, t->round, t->attempt, &buf, &len), 0);
    fx_call(&fe, "/sfl.v1.Fleet/FoldSpec", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_fleet_fold_spec_unpack(res.resp, res.len, NULL, &fs), 0);
    assert_int_equal(fs.fold, 1);
    assert_int_equal(fs.dimension, DIM);
    assert_true(fs.max_update_norm == 10);
    assert_memory_equal(fs.round_pk, t->round_key, 32);
    assert_memory_equal(fs.nonce, t->round_nonce, 32);
    assert_memory_equal(fs.model_hash, t->model_hash, 32);
    /* another attempt: forward */
    assert_int_equal(sfl_msg_fleet_fold_spec_req_pack(job, t->round, t->attempt + 1, &buf, &len),
                     0);
    fx_call(&fe, "/sfl.v1.Fleet/FoldSpec", buf, len, &res);
    assert_int_equal(sfl_msg_fleet_fold_spec_unpack(res.resp, res.len, NULL, &fs), 0);
    assert_int_equal(fs.fold, 0);

    /* claims: signed by agent i over (this attempt, a payload hash) */
    memset(&ctx, 0, sizeof(ctx));
    memcpy(ctx.round_pk, t->round_key, 32);
    ctx.job = job;
    ctx.round = t->round;
    memcpy(ctx.nonce, t->round_nonce, 32);
    memcpy(ctx.model_hash, t->model_hash, 32);
#define CLAIM(i, signer)                                                                      \
    do {                                                                                      \
        memset(&c, 0, sizeof(c));                                                             \
        c.job_id = job;                                                                       \
        c.round = t->round;                                                                   \
        c.attempt = t->attempt;                                                               \
        c.agent_id = agent[i];                                                                \
        c.samples = 40;                                                                       \
        memset(c.payload_hash, 0x5a, 32);                                                     \
        ctx.agent_id = agent[i];                                                              \
        assert_int_equal(sfl_seal_sign_update_digest(id[signer], &ctx, c.payload_hash,       \
                                                     c.signature), 0);                        \
    } while (0)
    /* an agent that was not selected (a7) */
    CLAIM(6, 6);
    assert_int_equal(fold_claim(&fe, 6, &c, &ack, &res), 0);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "was not selected"));
    /* a signature by another key; a changed hash after signing */
    CLAIM(0, 1);
    assert_int_equal(fold_claim(&fe, 0, &c, &ack, &res), 0);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "signature does not verify"));
    CLAIM(0, 0);
    c.payload_hash[0] ^= 1;
    assert_int_equal(fold_claim(&fe, 0, &c, &ack, &res), 0);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    /* more samples than it joined with (100) */
    CLAIM(0, 0);
    c.samples = 101;
    assert_int_equal(fold_claim(&fe, 0, &c, &ack, &res), 0);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "claims 101 samples, the agent joined with 100"));
    assert_int_equal(fold_accepted(job), 0);
    /* a1, a3..a6 claimed by fe, a2 by fe2; a1 twice */
    for (int i = 0; i < 6; i++) {
        CLAIM(i, i);
        assert_int_equal(fold_claim(i == 1 ? &fe2 : &fe, i, &c, &ack, &res), 0);
        assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    }
    CLAIM(0, 0);
    assert_int_equal(fold_claim(&fe2, 0, &c, &ack, &res), 0);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);
    assert_non_null(strstr(ack.reason, "already claimed"));
    /* claimed, so a direct update is a duplicate too */
    {
        const double v[3] = {1, 2, 3};
        uint8_t *u = fx_make_update(t, id[0], NULL, agent[0], v, 40, &rl);
        sfl_ack_t a2;

        buf = wrap_cert("a1", cert_a.sha, cert_a.der, cert_a.len, u, rl, 1, &len);
        fx_call(&fe, "/sfl.v1.Fleet/SubmitUpdate", buf, len, &res);
        assert_int_equal(res.status, 0);
        assert_int_equal(sfl_msg_ack_unpack(res.resp, res.len, NULL, &a2), 0);
        assert_int_equal(a2.status, SFL_ACK_DUPLICATE);
    }
    assert_int_equal(fold_accepted(job), 0);

    /* partials: each refused whole, nothing counted */
    memset(&p, 0, sizeof(p));
    p.job_id = job;
    p.round = t->round;
    p.attempt = t->attempt;
    p.members = mem;
    dense[2] = 3;
    assert_int_equal(sfl_spvec_new(DIM, DIM, &p.sum), 0);
    assert_int_equal(sfl_spvec_from_dense(p.sum, dense), 0);
    /* another front-end's member */
    mem[0] = agent[1];
    p.nmembers = 1;
    p.weight_sum = 40;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "was not claimed by this front-end"));
    /* an unselected agent */
    mem[0] = agent[6];
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "was not selected"));
    /* a member twice (a1: lost for the attempt) */
    mem[0] = mem[1] = agent[0];
    p.nmembers = 2;
    p.weight_sum = 80;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "already counted"));
    p.nmembers = 1;
    p.weight_sum = 40;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "lost for this attempt"));
    /* weight_sum other than the claimed samples (a3) */
    mem[0] = agent[2];
    p.weight_sum = 41;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "is not the members' claimed samples 40"));
    /* another dimension (a4) */
    mem[0] = agent[3];
    p.weight_sum = 40;
    p.sum->dim = DIM + 1;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "sum has dimension 21, the model 20"));
    p.sum->dim = DIM;
    /* the norm above max_update_norm x weight: 401 > 10 x 40 (a5) */
    mem[0] = agent[4];
    p.sum->val[0] = 401;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "above the job's max_update_norm 10 x its weight 40"));
    /* a value not finite: the decoder's refusal (built by hand: pack refuses it) */
    {
        uint8_t *b = NULL;
        size_t bl;
        size_t at;

        mem[0] = agent[5];
        p.sum->val[0] = 1234.5;
        assert_int_equal(sfl_msg_fleet_partial_pack(&p, &b, &bl), 0);
        for (at = 0; at + 8 <= bl; at++) {
            double d;

            memcpy(&d, b + at, 8);
            if (d == 1234.5)
                break;
        }
        assert_true(at + 8 <= bl);
        {
            double inf = INFINITY;

            memcpy(b + at, &inf, 8);
        }
        fx_call(&fe, "/sfl.v1.Fleet/Partial", b, bl, &res);
        assert_int_equal(res.status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(res.msg, "not finite"));
    }
    /* another attempt */
    p.sum->val[0] = 3;
    p.attempt = t->attempt + 1;
    assert_int_equal(fold_partial(&fe, &p, &res), SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(res.msg, "is not open"));
    p.attempt = t->attempt;
    assert_int_equal(fold_accepted(job), 0);

    /* honest partials count: a6 from fe, a2 from fe2 */
    mem[0] = agent[5];
    assert_int_equal(fold_partial(&fe, &p, &res), 0);
    assert_int_equal(fold_accepted(job), 1);
    mem[0] = agent[1];
    assert_int_equal(fold_partial(&fe2, &p, &res), 0);
    assert_int_equal(fold_accepted(job), 2);
    /* and never twice */
    assert_int_equal(fold_partial(&fe2, &p, &res), SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(res.msg, "already counted"));
    assert_int_equal(fold_accepted(job), 2);
#undef CLAIM
    sfl_spvec_free(p.sum);
    sfl_msg_task_free(t);
    sfl_msg_buf_free(model);
    sfl_msg_buf_free(full);
    free(res.resp);
    for (int i = 0; i < 6; i++) {
        if (!st[i].done)
            sfl_grpc_cancel(st[i].call);
        fx_stream_clear(&st[i]);
    }
    fx_cli_close(&fe);
    fx_cli_close(&fe2);
    for (int i = 0; i < NFOLD; i++)
        sfl_identity_free(id[i]);
}

/* A hostile (or broken) master answers Fleet.Model with other bytes than
 * the task names: the front-end checks the model's hash before keeping it
 * (model_mismatch), its waiting agent is told to subscribe again, as for a
 * model it could not get; once the master answers the right bytes the next
 * fetch gives the task, signature and model hash checked. The front-end's
 * counters (its /metrics) follow. */
static void test_frontend_model_mismatch(void **state)
{
    tagent_t *a1 = &F.ag[0];
    sfl_job_spec_t spec;
    sfl_task_t *task;
    coord_job_t *j = NULL;
    fe_stats_t st;
    uint8_t *byte;
    int status;
    fe_t *fe;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fe = fe_start();
    /* a1 gets the round's task straight from the master first ... */
    fx_agent_join(a1, "agent/a1");
    fx_job_spec(&spec, 30000, 3);
    spec.cohort_size = 1;
    spec.min_quorum = 1;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_subscribe(a1);
    task = fx_next_task(a1);
    sfl_msg_task_free(task);
    j = F.co->jobs[0];
    assert_non_null(j->task_lite);
    assert_true(j->model_len > 0);
    /* ... then moves to the front-end, which fetches the model */
    fx_cli_close(&a1->cli);
    fe_connect(fe, &a1->cli, "agent/a1");
    fx_agent_join(a1, "agent/a1");
    /* the master's copy of the model, the last value byte changed: what
     * Fleet.Model answers now (the task without its model is unchanged) */
    byte = j->task + j->model_off + j->model_len - 1;
    *byte ^= 0x40;
    fx_agent_subscribe(a1);
    for (int i = 0; i < 2000 && !a1->sub.done; i++)
        fx_run_for(5);
    assert_true(a1->sub.done);
    assert_int_equal(a1->sub.n, 0);
    assert_int_equal(a1->sub.status, SFL_GRPC_STATUS_UNAVAILABLE);
    assert_non_null(strstr(a1->sub.msg, "could not get the task's model"));
    fe_stats(fe, &st);
    assert_int_equal(st.model_mismatches, 1);
    assert_int_equal(st.models_fetched, 0);
    /* the right bytes again: fetched anew (the wrong ones were not kept) */
    *byte ^= 0x40;
    fx_agent_subscribe(a1);
    task = fx_next_task(a1); /* signature and model hash checked */
    assert_int_equal(task->model->dim, DIM);
    sfl_msg_task_free(task);
    /* what its /metrics shows: one agent, the master connected, one Join
     * and two Subscribes relayed, one model fetched (its bytes), one
     * mismatch, nothing refused */
    fe_stats(fe, &st);
    assert_int_equal(st.agents, 1);
    assert_int_equal(st.master_connected, 1);
    assert_string_equal(fe_method_names[0], "Join");
    assert_int_equal(st.relayed[0], 1);
    assert_string_equal(fe_method_names[1], "Subscribe");
    assert_int_equal(st.relayed[1], 2);
    assert_int_equal(st.relayed[2], 0);
    assert_int_equal(st.relay_failures, 0);
    assert_int_equal(st.models_fetched, 1);
    assert_int_equal(st.model_bytes, j->model_len);
    assert_int_equal(st.model_mismatches, 1);
    assert_int_equal(st.join_refused, 0);
    fx_cli_close(&a1->cli);
    fe_stop(fe);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fleet_roles, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_relay, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_hostile, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_certs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_model_once, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_many_resets, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_frontend_relay, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_frontend_heartbeat, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fleet_fold_hostile, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_frontend_model_mismatch, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fe_setup, fe_teardown);
}

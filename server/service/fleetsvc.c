/* The Fleet service on the master (proto/sfl/v1/fleet.proto, docs/protocol.md
 * "Front-ends"): a front-end relays its agents' Coordinator calls, each in a
 * FleetCall naming the agent's certificate and the front-end's number for
 * the agent's connection. Each such connection becomes a coord_conn_t
 * without a transport (a "kid" of the front-end's connection), and the call
 * goes to the Coordinator handler with it: binding, selection, verification
 * and folding are exactly a directly connected agent's ("forward" mode).
 *
 * What a front-end certificate holder can do here: relay calls for agent
 * certificates it shows. The first call on each conn_id carries the agent's
 * certificate (DER), verified here as the listener verifies an agent's
 * (sfl_tls_verify_der: our CA, validity, clientAuth; then the agent role,
 * revocation, and the CN and SHA-256 the call names), and the conn_id stays
 * with that certificate: so it can only speak for certificates it has seen,
 * never mint agent names of its own. A relayed Join must also carry
 * cert_proof, the certificate key's signature over the identity key, so a
 * seen certificate's name cannot be bound to the front-end's own key. It cannot sign updates or Joins'
 * identity keys of agents it does not hold (the master verifies each update
 * with the key bound at the agent's first Join), nor take a name bound to
 * another certificate or key (the store's binding rules), nor reach a
 * revoked certificate's agent (checked on every call). Its requests are
 * bounded like an agent's (the method's size, the connection's streams) and
 * it may hold at most max_conns agent connections. What it is trusted with
 * is the Join proof, which only it can check (docs/security.md
 * "Front-ends"). */
#include "coord_int.h"
#include "round/driver.h"
#include "round/registry.h"
#include "round/saround.h"
#include "round/subs.h"
#include "round/vround.h"
#include "service/agentsvc.h"
#include "service/fleetsvc.h"
#include "service/foldsvc.h"
#include "service/submit.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

int coord_conn_live(const coord_conn_t *k)
{
    return k->fe != NULL ? k->fe->c != NULL : k->c != NULL;
}

coord_conn_t *coord_fleet_kid(coord_conn_t *fe, uint64_t fe_id)
{
    return sfl_idmap_get(&fe->kid_map, fe_id);
}

/* The agent goes offline as when its own connection closes; the kid is
 * freed. Its relayed Subscribe, if still open, ends. */
static void kid_drop(coord_conn_t *k, const char *why)
{
    coord_conn_t *fe = k->fe;

    if (k->agent) {
        coord_agent_t *a = k->agent;

        coord_end_sub(a, SFL_GRPC_STATUS_UNAVAILABLE, why);
        a->conn = NULL;
        a->last_seen_ms = coord_wall_ms();
        k->agent = NULL;
    }
    (void)sfl_idmap_del(&fe->kid_map, k->fe_id);
    if (k->kid_prev)
        k->kid_prev->kid_next = k->kid_next;
    else
        fe->kids = k->kid_next;
    if (k->kid_next)
        k->kid_next->kid_prev = k->kid_prev;
    fe->nkids--;
    sfl__free(k);
}

void coord_fleet_closed(coord_conn_t *fe)
{
    while (fe->kids != NULL)
        kid_drop(fe->kids, "the agent's front-end went away");
    sfl_idmap_free(&fe->kid_map);
}

uint32_t coord_fleet_revoke(coord_t *co, const uint8_t fpr[32])
{
    uint32_t n = 0;

    for (coord_conn_t *fe = co->conns; fe != NULL; fe = fe->next) {
        coord_conn_t *k = fe->kids, *next;

        for (; k != NULL; k = next) {
            next = k->kid_next;
            if (sodium_memcmp(k->peer.sha256, fpr, 32) == 0) {
                kid_drop(k, SFL_MSG_REVOKED);
                n++;
            }
        }
    }
    return n;
}

/* Fails call with status and why: counted (sfl_frontend_certs_refused_total)
 * and logged at a bounded rate. Returns -1. */
static int cert_refused(sfl_grpc_call_t *call, coord_conn_t *fe, const sfl_fleet_call_t *m,
                        int status, const char *why)
{
    coord_t *co = fe->co;
    char q[200], q2[200], q3[600];
    uint32_t dropped;

    co->fleet_certs_refused++;
    if (coord_refusal_log_ok(co, &dropped))
        coord_log(COORD_LOG_WARN, "fleet_cert_refused",
                  "frontend=%s addr=%s conn=%llu cn=%s answer=%s error=%s dropped=%u",
                  coord_log_quote(fe->peer.cn, q, sizeof(q)), fe->addr,
                  (unsigned long long)m->conn_id, coord_log_quote(m->agent_cn, q2, sizeof(q2)),
                  sfl_grpc_status_name(status), coord_log_quote(why, q3, sizeof(q3)), dropped);
    coord_fail_call(call, status, "%s", why);
    return -1;
}

/* The agent certificate a FleetCall opening a conn_id carries, verified as
 * the listener verifies a directly connected agent's: 0, or -1 with the
 * call failed (cert_refused). */
static int cert_check(sfl_grpc_call_t *call, coord_conn_t *fe, const sfl_fleet_call_t *m)
{
    coord_t *co = fe->co;
    int status = SFL_GRPC_STATUS_PERMISSION_DENIED, rc;
    char why[400], hex[65], q[200], q2[200];
    sfl_peer_t p;

    if (m->agent_cert_len == 0) {
        status = SFL_GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(why, sizeof(why),
                 "agent_cert missing: the first call on a conn_id carries the agent's "
                 "certificate");
    } else if ((rc = sfl_tls_verify_der(co->tls, m->agent_cert, m->agent_cert_len, &p)) < 0) {
        status = rc == SFL_ENOMEM ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                 : rc == SFL_ECERT ? SFL_GRPC_STATUS_PERMISSION_DENIED
                                   : SFL_GRPC_STATUS_INVALID_ARGUMENT;
        snprintf(why, sizeof(why), "agent_cert not accepted: %s", sfl_last_error());
    } else if (p.role != SFL_ROLE_AGENT) {
        snprintf(why, sizeof(why), "agent_cert is a certificate of the %s role, not agent",
                 sfl_role_name(p.role));
    } else if (p.cn[0] == '\0' || strcmp(p.cn, m->agent_cn) != 0) {
        snprintf(why, sizeof(why), "agent_cert's CN is %s, not agent_cn %s",
                 coord_log_quote(p.cn, q, sizeof(q)), coord_log_quote(m->agent_cn, q2, sizeof(q2)));
    } else if (sodium_memcmp(p.sha256, m->cert_sha256, 32) != 0) {
        sodium_bin2hex(hex, sizeof(hex), m->cert_sha256, 32);
        snprintf(why, sizeof(why), "agent_cert's SHA-256 is %s, not cert_sha256 %s",
                 p.fingerprint, hex);
    } else {
        return 0;
    }
    return cert_refused(call, fe, m, status, why);
}

/* A relayed Join: the certificate's key must have chosen the identity key
 * (JoinRequest.cert_proof over it, checked against the relayed
 * certificate), so a front-end cannot bind the name of a certificate it has
 * only seen to a key of its own. A Join that does not unpack is left to
 * coord_h_join, which says why. 0, or -1 with the call failed. */
static int join_check(sfl_grpc_call_t *call, coord_conn_t *fe, const sfl_fleet_call_t *m)
{
    sfl_join_req_t j;

    if (m->agent_cert_len == 0)
        return cert_refused(call, fe, m, SFL_GRPC_STATUS_INVALID_ARGUMENT,
                            "agent_cert missing: a relayed Join carries the agent's certificate");
    if (sfl_msg_join_req_unpack(m->request, m->request_len, &fe->co->lim, &j) < 0)
        return 0;
    if (j.cert_proof_len == 0)
        return cert_refused(call, fe, m, SFL_GRPC_STATUS_PERMISSION_DENIED,
                            "cert_proof missing: a Join through a front-end must be signed by "
                            "the agent certificate's key (an agent of this version sends it)");
    if (sfl_tls_cert_binding_verify(m->agent_cert, m->agent_cert_len, j.identity_key,
                                    j.cert_proof, j.cert_proof_len) < 0)
        return cert_refused(call, fe, m, SFL_GRPC_STATUS_PERMISSION_DENIED,
                            "cert_proof does not verify: the agent certificate's key did not "
                            "sign this identity key");
    return 0;
}

/* The kid for m (made when missing and make is set, once m's agent_cert
 * verified), or NULL with the call finished. */
static coord_conn_t *kid_get(sfl_grpc_call_t *call, coord_conn_t *fe, const sfl_fleet_call_t *m,
                             int make)
{
    coord_t *co = fe->co;
    coord_conn_t *k = coord_fleet_kid(fe, m->conn_id);

    if (k != NULL) {
        if (strcmp(k->peer.cn, m->agent_cn) != 0 ||
            sodium_memcmp(k->peer.sha256, m->cert_sha256, 32) != 0) {
            coord_fail_call(call, SFL_GRPC_STATUS_INVALID_ARGUMENT,
                            "conn_id %llu belongs to another agent certificate",
                            (unsigned long long)m->conn_id);
            return NULL;
        }
        /* the conn_id's certificate verified when it opened; one sent
         * again must be that one */
        if (m->agent_cert_len > 0) {
            uint8_t h[32];

            crypto_hash_sha256(h, m->agent_cert, m->agent_cert_len);
            if (sodium_memcmp(h, k->peer.sha256, 32) != 0) {
                coord_fail_call(call, SFL_GRPC_STATUS_INVALID_ARGUMENT,
                                "agent_cert is not the certificate of conn_id %llu",
                                (unsigned long long)m->conn_id);
                return NULL;
            }
        }
        return k;
    }
    if (!make) {
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "join first");
        return NULL;
    }
    if (fe->nkids >= co->cfg.max_conns) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "this front-end holds %zu agent connections, the limit (max_conns)",
                        fe->nkids);
        return NULL;
    }
    if (cert_check(call, fe, m) < 0)
        return NULL;
    if ((k = sfl__calloc(1, sizeof(*k))) == NULL ||
        sfl_idmap_put(&fe->kid_map, m->conn_id, k) < 0) {
        sfl__free(k);
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    k->co = co;
    k->fe = fe;
    k->fe_id = m->conn_id;
    k->has_peer = 1;
    snprintf(k->peer.cn, sizeof(k->peer.cn), "%s", m->agent_cn);
    k->peer.role = SFL_ROLE_AGENT;
    memcpy(k->peer.sha256, m->cert_sha256, 32);
    sodium_bin2hex(k->peer.fingerprint, sizeof(k->peer.fingerprint), m->cert_sha256, 32);
    snprintf(k->addr, sizeof(k->addr), "%.40s/%llu", fe->addr, (unsigned long long)m->conn_id);
    k->kid_next = fe->kids;
    if (fe->kids)
        fe->kids->kid_prev = k;
    fe->kids = k;
    fe->nkids++;
    return k;
}

/* Unpacks the FleetCall, refuses a revoked certificate, finds the agent's
 * connection and hands the inner request to the Coordinator handler. */
static void relay(sfl_grpc_call_t *call, const uint8_t *req, size_t len, coord_conn_t *fe,
                  sfl_grpc_handler_cb h, int make)
{
    coord_t *co = fe->co;
    sfl_fleet_call_t *m = NULL;
    coord_conn_t *k;
    int rc;

    if (coord_serving(call, fe) < 0)
        return;
    fe->fe_last_ms = coord_wall_ms();
    if ((rc = sfl_msg_fleet_call_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if (coord_cert_revoked(co, m->cert_sha256)) {
        char hex[65];

        sodium_bin2hex(hex, sizeof(hex), m->cert_sha256, 32);
        if ((k = coord_fleet_kid(fe, m->conn_id)) != NULL &&
            sodium_memcmp(k->peer.sha256, m->cert_sha256, 32) == 0)
            kid_drop(k, SFL_MSG_REVOKED);
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED, SFL_MSG_REVOKED " (fingerprint %s)",
                        hex);
        goto out;
    }
    if ((k = kid_get(call, fe, m, make)) == NULL)
        goto out;
    if (h == coord_h_join && join_check(call, fe, m) < 0)
        goto out;
    h(call, m->request, m->request_len, k);
out:
    sfl_msg_fleet_call_free(m);
}

void coord_h_fleet_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_join, 1);
}

/* The others bind an agent that joined through this front-end connection,
 * or (coord_bound_agent) one that joined earlier in this process with the
 * same certificate: a front-end that reconnected to the master, or an agent
 * that moved to this front-end, goes on without a new Join. */
void coord_h_fleet_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_subscribe, 1);
}

void coord_h_fleet_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_submit, 1);
}

void coord_h_fleet_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_heartbeat, 1);
}

void coord_h_fleet_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_step, 1);
}

void coord_h_fleet_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_secagg, 1);
}

void coord_h_fleet_gone(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *fe = ud;
    coord_t *co = fe->co;
    sfl_fleet_call_t *m = NULL;
    coord_conn_t *k;
    int rc;

    fe->fe_last_ms = coord_wall_ms();
    if ((rc = sfl_msg_fleet_call_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((k = coord_fleet_kid(fe, m->conn_id)) != NULL &&
        sodium_memcmp(k->peer.sha256, m->cert_sha256, 32) == 0) {
        kid_drop(k, "the agent left its front-end");
        coord_schedule_soon(co); /* an agent left: eligibility changed */
    }
    sfl_msg_fleet_call_free(m);
    /* GoneReply is empty: zero bytes */
    (void)sfl_grpc_reply(call, (const uint8_t *)"", 0);
}

/* Fleet.Model: the model of the open attempt's task, for a front-end that
 * got the task without it. Counted in the round's bytes_down, as the tasks
 * are: what the master sent. */
void coord_h_fleet_model(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *fe = ud;
    coord_t *co = fe->co;
    uint8_t hash[SFL_MSG_HASH_BYTES], *buf = NULL;
    uint64_t id;
    size_t blen = 0;
    coord_job_t *j;
    int rc;

    if (coord_serving(call, fe) < 0)
        return;
    if ((rc = sfl_msg_fleet_model_req_unpack(req, len, &co->lim, &id, hash)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    j = coord_job_find(co, id);
    if (j == NULL || j->task == NULL || j->opening || j->model_len == 0 ||
        sodium_memcmp(j->model_hash, hash, sizeof(hash)) != 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND,
                        "job %llu has no open attempt with that model", (unsigned long long)id);
        return;
    }
    rc = sfl_msg_fleet_model_reply_pack(j->task + j->model_off, j->model_len, &buf, &blen);
    if (rc == 0)
        j->fold.bytes_down += blen;
    coord_reply_packed(call, rc, buf, blen);
}

int coord_fleet_frontends(coord_t *co, sfl_fleet_frontend_t **out, uint32_t *n)
{
    int64_t now = coord_wall_ms();
    uint32_t m = 0;

    *out = NULL;
    *n = 0;
    for (const coord_conn_t *k = co->conns; k != NULL; k = k->next)
        m += k->has_peer && k->peer.role == SFL_ROLE_COORDINATOR;
    if (m > SFL_MSG_FLEET_MAX_FRONTENDS)
        m = SFL_MSG_FLEET_MAX_FRONTENDS;
    if (m == 0)
        return 0;
    if ((*out = sfl__calloc(m, sizeof(**out))) == NULL)
        return sfl__fail(SFL_ENOMEM, "front-end list");
    for (const coord_conn_t *k = co->conns; k != NULL && *n < m; k = k->next) {
        sfl_fleet_frontend_t *f = &(*out)[*n];

        if (!k->has_peer || k->peer.role != SFL_ROLE_COORDINATOR)
            continue;
        coord_text_copy(f->name, sizeof(f->name), k->peer.cn);
        coord_text_copy(f->address, sizeof(f->address), k->addr);
        for (const coord_conn_t *kid = k->kids; kid != NULL; kid = kid->kid_next)
            f->agents += kid->agent != NULL;
        f->lag_ms = k->fe_last_ms > 0 && now > k->fe_last_ms ? (uint64_t)(now - k->fe_last_ms) : 0;
        (*n)++;
    }
    return 0;
}

/* ---- fold mode ------------------------------------------------------------------ */

/* Fleet.Claim: the FleetClaim inside is judged for the agent the call
 * names, as its SubmitUpdate would be (foldsvc.c). */
void coord_h_fleet_claim(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    relay(call, req, len, ud, coord_h_claim, 1);
}

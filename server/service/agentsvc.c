/* The Coordinator service's Join and Subscribe (docs/protocol.md): an agent
 * registers (bound to its certificate and identity key) and holds a stream
 * on which its tasks and waits arrive. SubmitUpdate and Heartbeat are in
 * submit.c. */
#include "coord_int.h"
#include "round/driver.h"
#include "service/agentsvc.h"
#include "service/fleetsvc.h"
#include "round/registry.h"
#include "round/subs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/seal.h"

/* Joins waiting for the writer, process-wide: past this a Join is told to
 * come back (a storm queues no more than ~4 KiB x this). */
#define JOINS_PENDING_MAX 1024

/* ---- Coordinator service ------------------------------------------------------- */

/* Join: the agent's row (bound to its certificate) is recorded by the
 * writer, then the agent is registered here and answered. */
typedef struct {
    coord_write_op_t op;
    coord_t *co;
    sfl_grpc_call_t *call;
    sfl_join_req_t m;
    coord_agent_row_t row;
    int64_t id;
    char addr[64];
    char fingerprint[65];
    uint64_t fe_id;           /* relayed by a front-end: its number for the agent's connection */
} join_op_t;

static int join_run(coord_store_t *s, coord_write_op_t *op)
{
    join_op_t *o = (join_op_t *)op;

    return coord_store_agent_upsert(s, &o->row, &o->id);
}

static void join_refused(join_op_t *o, const char *error)
{
    uint32_t dropped;
    char q[300];

    if (coord_refusal_log_ok(o->co, &dropped))
        coord_log(COORD_LOG_WARN, "join_refused",
                  "name=%s addr=%s fingerprint=%s error=%s dropped=%u",
                  coord_log_quote(o->row.name, q, sizeof(q)), o->addr, o->fingerprint, error,
                  dropped);
}

static void join_done(coord_write_op_t *op)
{
    join_op_t *o = (join_op_t *)op;
    coord_t *co = o->co;
    sfl_grpc_call_t *call = o->call;
    sfl_grpc_session_t *sess = sfl_grpc_call_session(call);
    coord_conn_t *k = sess ? sfl_grpc_session_user(sess) : NULL;
    sfl_join_reply_t r;
    coord_agent_t *a;
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[300];
    int rc = op->rc;

    co->joins_pending--;
    if (op->abandoned) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down");
        goto out;
    }
    if (rc == -EACCES) {
        join_refused(o, "certificate_not_bound");
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "%s is bound to the certificate it first joined with, not this one; a new "
                  "certificate needs the old one revoked (sflctl agent revoke %s)",
                  o->row.name, o->row.name);
        goto out;
    }
    if (rc == -EEXIST) {
        join_refused(o, "identity_key_conflict");
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "certificate %s is bound to another identity key (or the key to another "
                  "agent); re-keying is an operator action",
                  o->row.name);
        goto out;
    }
    if (rc < 0) {
        coord_log(COORD_LOG_ERROR, "store_error", "op=join error=%s",
                  coord_log_quote(op->error, q, sizeof(q)));
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot record the agent; retry later");
        goto out;
    }
    /* Recorded; the connection may have gone (or been revoked) meanwhile:
     * the agent joins on its next connection. */
    /* Relayed by a front-end: the agent's connection there, if it is
     * still open (service/fleetsvc.c). */
    if (k != NULL && o->fe_id != 0)
        k = coord_fleet_kid(k, o->fe_id);
    if (k == NULL || !coord_conn_live(k) || coord_cert_revoked(co, o->row.cert_fingerprint)) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "the connection is closing");
        goto out;
    }
    if ((a = coord_agent_find(co, (uint64_t)o->id)) == NULL) {
        a = sfl__calloc(1, sizeof(*a));
        if (a != NULL) {
            a->id = (uint64_t)o->id;
            snprintf(a->name, sizeof(a->name), "%s", o->row.name);
        }
        if (a == NULL || coord_agent_insert(co, a) < 0) {
            sfl__free(a);
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
    }
    /* (an agent found by id has this name: the store binds the two) */
    memcpy(a->fpr, o->row.cert_fingerprint, sizeof(a->fpr));
    memcpy(a->pk, o->m.identity_key, sizeof(a->pk));
    a->caps = o->m.capabilities;
    a->conds = o->m.conditions;
    if (coord_agent_set_ds(a, &o->m.dataset) < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    snprintf(a->version, sizeof(a->version), "%s", o->m.agent_version);
    a->joined = 1;
    a->moments_job = 0; /* a new session: the moments go out again */
    a->phase = SFL_PHASE_IDLE;
    a->last_seen_ms = coord_wall_ms();
    coord_bind_agent(k, a);
    memset(&r, 0, sizeof(r));
    r.agent_id = a->id;
    memcpy(r.coordinator_key, co->id->pk, sizeof(r.coordinator_key));
    r.retry_after_ms = (uint32_t)co->cfg.join_retry_ms;
    r.heartbeat_interval_ms = (uint32_t)co->cfg.heartbeat_interval_ms;
    r.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    coord_log(COORD_LOG_INFO, "join",
              "agent=%llu name=%s addr=%s samples=%llu dimension=%u labels=%u version=%s",
              (unsigned long long)a->id, coord_log_quote(a->name, q, sizeof(q)), o->addr,
              (unsigned long long)a->ds.samples, a->ds.dimension, a->ds.nlabels,
              a->version[0] ? a->version : "-");
    rc = sfl_msg_join_reply_pack(&r, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
out:
    sfl__free(o);
}

/* Proof of possession (docs/security.md, "Identity"): the caller signed,
 * with the identity key it presents, the keying material this very
 * connection exports. A public key copied from elsewhere, or a proof lifted
 * from another connection, does not verify: without this a second
 * certificate with the same CN could present an agent's public key and take
 * its name once the first certificate was revoked. Answers the call and
 * returns < 0 on refusal.
 *
 * On the loop, not in a worker (STYLE rule 11 sends crypto there): it is
 * one Ed25519 verification, ~0.1 ms, beside the ~0.9 ms of TLS handshake the
 * same connection already cost the loop, and a worker round trip would
 * cost about as much as it saves. */
static int join_proof_check(join_op_t *o, coord_conn_t *k, sfl_grpc_call_t *call)
{
    uint8_t binding[SFL_SEAL_BINDING_BYTES];
    int rc;

    if (!o->m.has_proof) {
        join_refused(o, "no_join_proof");
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                        "Join carries no join_proof: an agent must prove it holds identity_key "
                        "by signing this connection's keying material (docs/protocol.md, Join); "
                        "upgrade the agent");
        return -1;
    }
    if (k->c == NULL ||
        sfl_conn_export_keying_material(k->c, SFL_SEAL_JOIN_LABEL, binding, sizeof(binding)) < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "the connection is closing");
        return -1;
    }
    rc = sfl_seal_verify_join(o->m.identity_key, binding, o->m.proof);
    sodium_memzero(binding, sizeof(binding));
    if (rc < 0) {
        join_refused(o, "bad_join_proof");
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                        "join_proof does not verify: it was not made with the secret half of "
                        "identity_key over this connection");
        return -1;
    }
    return 0;
}

void coord_h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    join_op_t *o;
    coord_agent_row_t *row;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if (co->joins_pending >= JOINS_PENDING_MAX) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE,
                        "%u Joins are being recorded; retry later", JOINS_PENDING_MAX);
        return;
    }
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if ((rc = sfl_msg_join_req_unpack(req, len, &co->lim, &o->m)) < 0) {
        sfl__free(o);
        coord_fail_unpack(call, rc);
        return;
    }
    if (o->m.protocol_version != SFL_MSG_PROTOCOL_VERSION) {
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                  "protocol_version %u is not supported; this coordinator speaks %d",
                  o->m.protocol_version, SFL_MSG_PROTOCOL_VERSION);
        sfl__free(o);
        return;
    }
    if (sfl_identity_pk_check(o->m.identity_key) < 0) {
        sfl__free(o);
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "identity_key is not a usable Ed25519 key");
        return;
    }
    if (k->peer.cn[0] == '\0') {
        sfl__free(o);
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                        "the certificate has no usable CN");
        return;
    }
    o->co = co;
    snprintf(o->row.name, sizeof(o->row.name), "%s", k->peer.cn);
    snprintf(o->addr, sizeof(o->addr), "%s", k->addr);
    snprintf(o->fingerprint, sizeof(o->fingerprint), "%s", k->peer.fingerprint);
    /* A front-end's agent proved it to the front-end, over the TLS
     * connection only the front-end holds (docs/security.md "Front-ends"). */
    o->fe_id = k->fe != NULL ? k->fe_id : 0;
    if (k->fe == NULL && join_proof_check(o, k, call) < 0) {
        sfl__free(o);
        return;
    }
    if (coord_agent_by_name(co, k->peer.cn) == NULL && co->nagents >= co->cfg.max_agents) {
        sfl__free(o);
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "agent limit (%llu) reached",
                  (unsigned long long)co->cfg.max_agents);
        return;
    }
    row = &o->row;
    memcpy(row->cert_fingerprint, k->peer.sha256, sizeof(row->cert_fingerprint));
    memcpy(row->identity_pk, o->m.identity_key, sizeof(row->identity_pk));
    coord_tags_text(&o->m.capabilities, row->capabilities, sizeof(row->capabilities));
    row->samples = o->m.dataset.samples > INT64_MAX ? INT64_MAX : (int64_t)o->m.dataset.samples;
    row->dimension = o->m.dataset.dimension;
    for (uint32_t i = 0, off = 0; i < o->m.dataset.nlabels; i++) {
        int n = snprintf(row->labels + off, sizeof(row->labels) - off, "%s%.17g", i ? "," : "",
                         o->m.dataset.labels[i]);

        if (n < 0 || (size_t)n >= sizeof(row->labels) - off) {
            row->labels[off] = '\0';
            break;
        }
        off += (uint32_t)n;
    }
    o->op.run = join_run;
    o->op.done = join_done;
    o->op.batchable = 1; /* a Join storm: one commit for many rows */
    o->call = call;
    co->joins_pending++;
    coord_writer_post(co->writer, &o->op);
}

void coord_h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_subscribe_req_t m;
    coord_agent_t *a;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_subscribe_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, k, m.agent_id)) == NULL)
        return;
    a->conds = m.conditions;
    coord_end_sub(a, SFL_GRPC_STATUS_FAILED_PRECONDITION, "replaced by a newer Subscribe");
    a->sub = call;
    a->sub_idle_since = coord_now_ms(co);
    sfl_grpc_call_on_cancel(call, coord_sub_cancelled, a);
    coord_log(COORD_LOG_DEBUG, "subscribe", "agent=%llu", (unsigned long long)a->id);
    /* Selected for an open attempt and not answered yet (a reconnect):
     * the task again, the same signed bytes. */
    for (size_t i = 0; i < co->njobs && a->sub; i++) {
        coord_job_t *j = co->jobs[i];
        const coord_member_t *mb;

        if (!coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING || j->task == NULL)
            continue;
        mb = coord_round_member(&j->rnd, a->id);
        if (mb && mb->state == COORD_MEMBER_PENDING) {
            coord_send_task(co, j, a);
            if (!j->opening)
                j->shape->resend(j, a);
        }
    }
    coord_schedule_soon(co);
}

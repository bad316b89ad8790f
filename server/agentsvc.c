/* The Coordinator service's Join and Subscribe (docs/protocol.md): an agent
 * registers (bound to its certificate and identity key) and holds a stream
 * on which its tasks and waits arrive. SubmitUpdate and Heartbeat are in
 * submit.c. */
#include "coord_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sfl/alloc.h"

/* ---- Coordinator service ------------------------------------------------------- */

void coord_h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_join_req_t m;
    sfl_join_reply_t r;
    coord_agent_t row;
    agent_t *a;
    int64_t id = 0;
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[300];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_join_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if (m.protocol_version != SFL_MSG_PROTOCOL_VERSION) {
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                  "protocol_version %u is not supported; this coordinator speaks %d",
                  m.protocol_version, SFL_MSG_PROTOCOL_VERSION);
        return;
    }
    if (sfl_identity_pk_check(m.identity_key) < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "identity_key is not a usable Ed25519 key");
        return;
    }
    if (k->peer.cn[0] == '\0') {
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                        "the certificate has no usable CN");
        return;
    }
    a = coord_agent_by_name(co, k->peer.cn);
    if (a == NULL && co->nagents >= co->cfg.max_agents) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "agent limit (%llu) reached",
                  (unsigned long long)co->cfg.max_agents);
        return;
    }
    memset(&row, 0, sizeof(row));
    snprintf(row.name, sizeof(row.name), "%s", k->peer.cn);
    memcpy(row.cert_fingerprint, k->peer.sha256, sizeof(row.cert_fingerprint));
    memcpy(row.identity_pk, m.identity_key, sizeof(row.identity_pk));
    coord_tags_text(&m.capabilities, row.capabilities, sizeof(row.capabilities));
    row.samples = m.dataset.samples > INT64_MAX ? INT64_MAX : (int64_t)m.dataset.samples;
    row.dimension = m.dataset.dimension;
    for (uint32_t i = 0, o = 0; i < m.dataset.nlabels; i++) {
        int n = snprintf(row.labels + o, sizeof(row.labels) - o, "%s%.17g", i ? "," : "",
                         m.dataset.labels[i]);

        if (n < 0 || (size_t)n >= sizeof(row.labels) - o) {
            row.labels[o] = '\0';
            break;
        }
        o += (uint32_t)n;
    }
    rc = coord_store_agent_upsert(co->store, &row, &id);
    if (rc == -EACCES) {
        uint32_t dropped;

        if (coord_refusal_log_ok(co, &dropped))
            coord_log(COORD_LOG_WARN, "join_refused",
                      "name=%s addr=%s fingerprint=%s error=%s dropped=%u",
                      coord_log_quote(k->peer.cn, q, sizeof(q)), k->addr, k->peer.fingerprint,
                      "certificate_not_bound", dropped);
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "%s is bound to the certificate it first joined with, not this one; a new "
                  "certificate needs the old one revoked (sflctl agent revoke %s)",
                  k->peer.cn, k->peer.cn);
        return;
    }
    if (rc == -EEXIST) {
        uint32_t dropped;

        if (coord_refusal_log_ok(co, &dropped))
            coord_log(COORD_LOG_WARN, "join_refused", "name=%s addr=%s error=%s dropped=%u",
                      coord_log_quote(k->peer.cn, q, sizeof(q)), k->addr,
                      "identity_key_conflict", dropped);
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "certificate %s is bound to another identity key (or the key to another "
                  "agent); re-keying is an operator action",
                  k->peer.cn);
        return;
    }
    if (rc < 0) {
        coord_log(COORD_LOG_ERROR, "store_error", "error=%s",
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot record the agent; retry later");
        return;
    }
    if (a == NULL || a->id != (uint64_t)id) {
        a = sfl__calloc(1, sizeof(*a));
        if (a != NULL)
            a->id = (uint64_t)id;
        if (a == NULL || coord_agent_insert(co, a) < 0) {
            sfl__free(a);
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
    }
    snprintf(a->name, sizeof(a->name), "%s", k->peer.cn);
    memcpy(a->fpr, k->peer.sha256, sizeof(a->fpr));
    memcpy(a->pk, m.identity_key, sizeof(a->pk));
    a->caps = m.capabilities;
    a->conds = m.conditions;
    a->ds = m.dataset;
    snprintf(a->version, sizeof(a->version), "%s", m.agent_version);
    a->joined = 1;
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
              (unsigned long long)a->id, coord_log_quote(a->name, q, sizeof(q)), k->addr,
              (unsigned long long)a->ds.samples, a->ds.dimension, a->ds.nlabels,
              a->version[0] ? a->version : "-");
    rc = sfl_msg_join_reply_pack(&r, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_subscribe_req_t m;
    agent_t *a;
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
        job_t *j = co->jobs[i];
        const coord_member_t *mb;

        if (!coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING || j->task == NULL)
            continue;
        mb = coord_round_member(&j->rnd, a->id);
        if (mb && mb->state == COORD_MEMBER_PENDING)
            coord_send_task(co, j, a);
    }
    coord_schedule(co);
}

void coord_count_verdict(coord_t *co, coord_upd_verdict_t v, int rj)
{
    if ((unsigned)v < 5)
        co->verdicts[v]++;
    if (v == COORD_UPD_REJECTED)
        co->rejects[rj >= 0 && rj < RJ_COUNT ? rj : RJ_OTHER]++;
}

int coord_seal_reason(int rc)
{
    switch (rc) {
    case SFL_ETRUNC: return RJ_TRUNCATED;
    case SFL_ELIMIT: return RJ_TOO_LARGE;
    case SFL_EDECRYPT: return RJ_DECRYPT;
    case SFL_EBADSIG: return RJ_SIGNATURE;
    default: return RJ_OTHER;
    }
}

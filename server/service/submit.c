/* SubmitUpdate (docs/protocol.md): an update is judged against its
 * attempt on the loop, verified on the thread pool (Ed25519 signature,
 * payload decode; an older agent's sealed update is opened first), then
 * folded on the loop, or
 * held for an ordered fold. */
#include "coord_int.h"
#include "round/driver.h"
#include "round/registry.h"
#include "service/foldsvc.h"
#include "service/submit.h"
#include "round/subs.h"
#include "round/coordwrite.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

/* ---- SubmitUpdate -----------------------------------------------------------------
 * An update is judged in three steps. On the loop, the checks that need
 * only ids (job, open attempt, cohort membership, duplicates, deadline);
 * then on the thread pool the expensive part: verifying the agent's
 * signature (after opening the seal of an older agent's SEALED update) and
 * decoding the payload (~0.4 ms for k = 1e4);
 * back on the loop, the attempt is checked again (it may have closed in
 * between) and the update goes to the aggregator. */

typedef struct verify {
    uv_work_t work;
    coord_t *co;
    sfl_grpc_call_t *call;
    sfl_update_t *u;          /* owned */
    uint64_t agent;
    coord_attempt_key_t *key;       /* held: the attempt it was judged against */
    sfl_upd_ctx_t ctx;
    uint8_t agent_pk[SFL_SEAL_PK_BYTES];
    sfl_msg_limits_t lim;     /* max_dim: the job's dimension */
    sfl_enc_t encoding;
    uint64_t max_samples;
    const coord_shape_t *shape; /* the job's round kind: its check */
    uint32_t features;
    size_t max_message;
    /* the worker's result */
    sfl_payload_t *p;
    int rj;
    char reason[SFL_MSG_TEXT_LEN];
} verify_t;

coord_upd_verdict_t coord_submit_prejudge(coord_t *co, coord_agent_t *a, const sfl_update_t *u,
                                          coord_job_t **jp, char *reason, size_t cap, int *rj)
{
    coord_job_t *j = coord_job_find(co, u->job_id);
    uint64_t now = coord_now_ms(co);
    const coord_member_t *m;
    coord_round_t *r;
    coord_upd_verdict_t v;

    *rj = RJ_OTHER;
    *jp = j;
    if (j == NULL) {
        snprintf(reason, cap, "no job %llu", (unsigned long long)u->job_id);
        return COORD_UPD_WRONG_ROUND;
    }
    if (!j->ready || coord_job_final(j)) {
        snprintf(reason, cap, "job %llu is %s", (unsigned long long)j->id,
                 sfl_msg_job_state_name(j->state));
        return COORD_UPD_LATE;
    }
    r = &j->rnd;
    if (u->round != r->round || u->attempt != j->wire_attempt) {
        /* Not the open attempt: coord_round_submit rules on ids alone
         * (earlier round: late; another job or a future one: wrong round)
         * and changes nothing. The attempt is mapped onto the machine's own
         * count, which restarts at 0 after a restart or a pause. */
        if (u->round == r->round && u->attempt < j->wire_attempt)
            v = COORD_UPD_LATE;
        else
            v = coord_round_submit(r, a->id, u->job_id, u->round,
                                   u->round == r->round ? r->attempt + 1 : r->attempt, now);
        snprintf(reason, cap, "round %llu attempt %u is not open (open: round %llu attempt %u)",
                 (unsigned long long)u->round, u->attempt, (unsigned long long)r->round,
                 j->wire_attempt);
        return v;
    }
    m = coord_round_member(r, a->id);
    if (m == NULL) {
        snprintf(reason, cap, "agent %llu was not selected for this attempt",
                 (unsigned long long)a->id);
        *rj = RJ_NOT_SELECTED;
        return COORD_UPD_REJECTED;
    }
    if (m->state == COORD_MEMBER_ACCEPTED) {
        snprintf(reason, cap, "an update of this agent was already accepted for this attempt");
        return COORD_UPD_DUPLICATE;
    }
    if (coord_fold_claimed(j, (uint32_t)(m - r->members))) {
        /* fold mode: a front-end holds its update (or lost it) */
        snprintf(reason, cap, "an update of this agent was already claimed for this attempt");
        return COORD_UPD_DUPLICATE;
    }
    if (a->verifying) {
        snprintf(reason, cap, "an update of this agent is being verified");
        return COORD_UPD_DUPLICATE;
    }
    if (r->state != COORD_ROUND_TRAINING || j->key == NULL || now >= r->deadline_at_ms) {
        snprintf(reason, cap, "the attempt closed");
        return COORD_UPD_LATE;
    }
    return COORD_SUBMIT_OPEN;
}

/* Thread pool: verify (open first if sealed), decode and check the payload.
 * Touches only v. */
static void verify_work(uv_work_t *w)
{
    verify_t *v = w->data;
    uint8_t *plain = NULL;
    const uint8_t *payload;
    size_t plen = 0;
    int rc;

    if (v->u->mode == SFL_UPDATE_MODE_SEALED) {
        /* Older agents (one release, docs/security.md "The seal"). */
        rc = sfl_seal_open_update(v->key->rk, v->agent_pk, &v->ctx, v->u->sealed,
                                  v->u->sealed_len, v->max_message, &plain, &plen, NULL);
        payload = plain;
    } else {
        /* SIGNED: the payload is read where the request put it, no copy. */
        rc = sfl_seal_check_update(v->agent_pk, &v->ctx, v->u->sealed, v->u->sealed_len,
                                   v->max_message, NULL, &plen);
        payload = v->u->sealed;
    }
    if (rc < 0) {
        snprintf(v->reason, sizeof(v->reason), "%s", sfl_last_error());
        v->rj = coord_seal_reason(rc);
        return;
    }
    rc = sfl_msg_payload_unpack(payload, plen, &v->lim, v->lim.max_dim, &v->p);
    if (plain != NULL) {
        sodium_memzero(plain, plen);
        sfl__free(plain);
    }
    v->rj = RJ_PAYLOAD;
    if (rc < 0)
        /* msg.c's details start with the message's name already. */
        snprintf(v->reason, sizeof(v->reason), "%s", sfl_last_error());
    else if (v->p->encoding != v->encoding) {
        v->rj = RJ_ENCODING;
        snprintf(v->reason, sizeof(v->reason),
                 "update values are encoded as %d, the task asks for %d", (int)v->p->encoding,
                 (int)v->encoding);
    } else if (v->p->samples > v->max_samples) {
        /* The weight is the sample count: an agent may not claim more
         * data than it joined with. */
        snprintf(v->reason, sizeof(v->reason),
                 "update claims %llu samples, the agent joined with %llu",
                 (unsigned long long)v->p->samples, (unsigned long long)v->max_samples);
    } else if (v->shape->check(v->p, v->features, v->max_samples) < 0) {
        /* what the round's kind checks (a statistics round's moments):
         * refused like an update out of bounds, for this agent alone */
        v->rj = RJ_BOUNDS;
        snprintf(v->reason, sizeof(v->reason), "%s refused: %s", v->shape->name,
                 sfl_last_error());
    } else {
        v->rj = -1; /* good */
        return;
    }
    sfl_msg_payload_free(v->p);
    v->p = NULL;
}

static const coord_part_status_t part_of[5] = {COORD_PART_ACCEPTED, COORD_PART_LATE,
                                               COORD_PART_DUPLICATE, COORD_PART_REJECTED,
                                               COORD_PART_REJECTED};

/* Answers the call with verdict vd: metrics, the audit record, the log line,
 * the Ack; on acceptance the job moves on. */
static void submit_done(coord_t *co, sfl_grpc_call_t *call, coord_agent_t *a, coord_job_t *j,
                        const sfl_update_t *u, coord_upd_verdict_t vd, const char *reason, int rj)
{
    sfl_ack_t ack;
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[400];
    int rc;

    memset(&ack, 0, sizeof(ack));
    coord_text_copy(ack.reason, sizeof(ack.reason), vd == COORD_UPD_ACCEPTED ? "" : reason);
    ack.status = coord_ack_of(vd);
    ack.job_id = u->job_id;
    ack.round = u->round;
    ack.attempt = u->attempt;
    coord_count_verdict(co, vd, rj);
    /* The audit record, for the open attempt only. A selected agent's row
     * gets only its acceptance (first outcome wins in the store, and a
     * rejected try must not block a valid one). */
    if (j && j->opened && u->round == j->rnd.round && u->attempt == j->wire_attempt &&
        (vd == COORD_UPD_ACCEPTED || !coord_round_member(&j->rnd, a->id)))
        coord_part_queue(co, &(coord_part_row_t){(int64_t)j->id, (int64_t)u->round,
                                                 (int64_t)u->attempt + 1, (int64_t)a->id,
                                                 part_of[vd],
                                                 vd == COORD_UPD_ACCEPTED ? NULL : ack.reason,
                                                 (int64_t)u->sealed_len, coord_wall_ms()});
    coord_log(vd == COORD_UPD_ACCEPTED ? COORD_LOG_INFO : COORD_LOG_WARN, "update",
              "agent=%llu job=%llu round=%llu attempt=%u verdict=%s bytes=%zu%s%s",
              (unsigned long long)a->id, (unsigned long long)u->job_id,
              (unsigned long long)u->round, u->attempt, coord_upd_verdict_name(vd),
              u->sealed_len, vd == COORD_UPD_ACCEPTED ? "" : " reason=",
              vd == COORD_UPD_ACCEPTED ? "" : coord_log_quote(ack.reason, q, sizeof(q)));
    rc = sfl_msg_ack_pack(&ack, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
    if (j && vd == COORD_UPD_ACCEPTED) {
        coord_job_drive(j);
        coord_dismiss_idle(co);
    }
}

/* Loop: the worker's result meets the attempt as it is now. */
static void verify_after(uv_work_t *w, int status)
{
    verify_t *v = w->data;
    coord_t *co = v->co;
    coord_agent_t *a = coord_agent_find(co, v->agent);
    coord_job_t *j = coord_job_find(co, v->u->job_id);
    coord_upd_verdict_t vd = COORD_UPD_REJECTED;
    const coord_member_t *m;
    int rc;

    (void)status; /* work items are never cancelled */
    co->verifying--;
    a->verifying = 0;
    if (v->rj >= 0)
        goto answer;
    if (j == NULL || j->key != v->key || j->busy || j->rnd.state != COORD_ROUND_TRAINING ||
        (m = coord_round_member(&j->rnd, a->id)) == NULL || m->state == COORD_MEMBER_ACCEPTED) {
        snprintf(v->reason, sizeof(v->reason), "the attempt closed while the update was verified");
        vd = COORD_UPD_LATE;
        goto answer;
    }
    rc = j->shape->add(j, (uint32_t)(m - j->rnd.members), v->p);
    if (rc < 0) {
        /* Refused for this agent alone: the fold is as it was. */
        snprintf(v->reason, sizeof(v->reason), "update refused by the job's bounds: %s",
                 sfl_last_error());
        v->rj = rc == SFL_ELIMIT || rc == SFL_ENUMERIC || rc == SFL_EINVAL ? RJ_BOUNDS : RJ_OTHER;
        goto answer;
    }
    vd = coord_round_submit(&j->rnd, a->id, v->u->job_id, v->u->round, j->rnd.attempt,
                            coord_now_ms(co));
    /* Every condition it checks was checked above, on this thread. */
    assert(vd == COORD_UPD_ACCEPTED);
    a->accepted++;
    sfl_metrics_fold(&j->fold, v->p);
answer:
    submit_done(co, v->call, a, j, v->u, vd, v->reason, v->rj);
    sfl_msg_payload_free(v->p);
    sfl_msg_update_free(v->u);
    coord_key_drop(v->key);
    sfl__free(v);
    if (co->stopping)
        coord_check_stopped(co);
}

void coord_h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_update_t *u = NULL;
    verify_t *v = NULL;
    coord_agent_t *a;
    coord_job_t *j;
    coord_upd_verdict_t vd;
    char reason[SFL_MSG_TEXT_LEN];
    int rc, rj;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_update_unpack(req, len, &co->lim, &u)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, k, u->agent_id)) == NULL)
        goto out;
    if (u->mode == SFL_UPDATE_MODE_SECURE_AGG) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNIMPLEMENTED,
                  "update mode 2 (secure aggregation) is not implemented");
        goto out;
    }
    vd = coord_submit_prejudge(co, a, u, &j, reason, sizeof(reason), &rj);
    if (vd != COORD_SUBMIT_OPEN) {
        submit_done(co, call, a, j, u, vd, reason, rj);
        goto out;
    }
    v = sfl__calloc(1, sizeof(*v));
    if (v == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    /* Everything the update is bound to comes from our own state. */
    v->co = co;
    v->call = call;
    v->u = u;
    v->agent = a->id;
    v->key = coord_key_hold(j->key);
    memcpy(v->ctx.round_pk, j->key->rk->pk, sizeof(v->ctx.round_pk));
    v->ctx.job = j->id;
    v->ctx.round = j->rnd.round;
    memcpy(v->ctx.nonce, j->rnd.nonce, sizeof(v->ctx.nonce));
    v->ctx.agent_id = a->id;
    memcpy(v->ctx.model_hash, j->model_hash, sizeof(v->ctx.model_hash));
    memcpy(v->agent_pk, a->pk, sizeof(v->agent_pk));
    v->lim = co->lim;
    v->lim.max_dim = (uint32_t)j->model.prob.dim;
    v->lim.max_nnz = (uint32_t)j->model.prob.dim;
    v->encoding = j->spec.value_encoding;
    v->shape = j->shape;
    v->features = j->spec.dimension;
    j->shape->limits(j, &v->lim, &v->encoding);
    v->max_samples = a->ds.samples;
    v->max_message = co->cfg.max_message;
    v->work.data = v;
    if (uv_queue_work(co->loop, &v->work, verify_work, verify_after) != 0) {
        coord_key_drop(v->key);
        sfl__free(v);
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot queue the update; retry");
        goto out;
    }
    a->verifying = 1;
    co->verifying++;
    return; /* verify_after answers and frees u */
out:
    sfl_msg_update_free(u);
}

void coord_h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_heartbeat_req_t m;
    sfl_heartbeat_reply_t r;
    uint8_t *buf = NULL;
    size_t blen = 0;
    coord_agent_t *a;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_heartbeat_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, k, m.agent_id)) == NULL)
        return;
    a->phase = m.phase;
    a->hb_job = m.job_id;
    a->hb_round = m.round;
    a->progress = m.progress_permille;
    a->conds = m.conditions;
    memset(&r, 0, sizeof(r));
    r.interval_ms = (uint32_t)co->cfg.heartbeat_interval_ms;
    if (m.phase != SFL_PHASE_IDLE && m.job_id != 0) {
        coord_job_t *j = coord_job_find(co, m.job_id);
        const coord_member_t *mb = NULL;
        int ok = 0;

        if (j && coord_running(j) && m.round == j->rnd.round && m.attempt == j->wire_attempt) {
            mb = coord_round_member(&j->rnd, a->id);
            ok = mb && (j->rnd.state == COORD_ROUND_TRAINING ||
                        mb->state == COORD_MEMBER_ACCEPTED);
        }
        if (ok && j->rnd.state == COORD_ROUND_TRAINING &&
            coord_round_heartbeat(&j->rnd, a->id, coord_now_ms(co)) == 0)
            r.deadline_ms = j->deadline_wall;
        /* The attempt closed without this agent (or never had it). */
        r.abort = !ok;
    }
    rc = sfl_msg_heartbeat_reply_pack(&r, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

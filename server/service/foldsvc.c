/* Fold mode on the master (foldsvc.h; proto/sfl/v1/fleet.proto FoldSpec,
 * Claim, Partial; docs/operations.md and docs/security.md "Front-ends").
 *
 * Exactly once: a member's update is judged here once, by its Claim (the
 * prejudge a SubmitUpdate gets, then the agent's signature over the
 * payload's digest and the weight against what the agent joined with and
 * the job's bound). An accepted claim marks the member's slot claimed by
 * the front-end connection (its fe_serial): no other front-end, no direct
 * SubmitUpdate, no second claim can count it again. The member is counted
 * (ACCEPTED in the round machine, a participation row) only when that
 * connection's Partial naming it is added; a refused partial loses its
 * members for the attempt (claimed, never counted), as does a front-end
 * that dies before it sends one.
 *
 * What a hostile front-end can do (docs/security.md): skew the sum of its
 * own members' updates within the triangle bound (||S|| <= max_update_norm
 * x the claimed weights), report their metrics wrongly, drop its members.
 * It cannot count an agent that did not sign an update for this attempt
 * (the claim's signature is verified here with the key bound at the
 * agent's Join), nor count one twice, nor another front-end's member. */
#include "coord_int.h"
#include "round/driver.h"
#include "round/registry.h"
#include "round/shape.h"
#include "round/subs.h"
#include "round/coordwrite.h"
#include "service/foldsvc.h"
#include "service/submit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

int coord_fold_job(const coord_job_t *j)
{
    return j->spec.frontend_fold && !j->spec.ordered_aggregation && !j->spec.secagg &&
           j->shape == &coord_shape_plain;
}

/* The claims of j's open attempt: made (all NONE) when missing or of an
 * older attempt; NULL without memory. */
static coord_claim_t *claims_of(coord_job_t *j)
{
    if (j->claims != NULL && j->claims_round == j->rnd.round &&
        j->claims_attempt == j->wire_attempt && j->nclaims == j->rnd.nmembers)
        return j->claims;
    sfl__free(j->claims);
    j->claims = sfl__calloc(j->rnd.nmembers ? j->rnd.nmembers : 1, sizeof(*j->claims));
    j->nclaims = j->claims != NULL ? j->rnd.nmembers : 0;
    j->claims_round = j->rnd.round;
    j->claims_attempt = j->wire_attempt;
    return j->claims;
}

int coord_fold_claimed(const coord_job_t *j, uint32_t slot)
{
    return j->claims != NULL && j->claims_round == j->rnd.round &&
           j->claims_attempt == j->wire_attempt && slot < j->nclaims &&
           j->claims[slot].state != COORD_CLAIM_NONE;
}

/* The attempt is open for updates now. */
static int attempt_open(coord_t *co, const coord_job_t *j, uint64_t round, uint32_t attempt)
{
    return j->ready && coord_running(j) && !j->busy && !j->opening && j->key != NULL &&
           j->rnd.state == COORD_ROUND_TRAINING && round == j->rnd.round &&
           attempt == j->wire_attempt && coord_now_ms(co) < j->rnd.deadline_at_ms;
}

/* ---- FoldSpec ------------------------------------------------------------------- */

void coord_h_fleet_fold_spec(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *fe = ud;
    coord_t *co = fe->co;
    sfl_fleet_fold_spec_t s;
    uint64_t id, round;
    uint32_t attempt;
    uint8_t *buf = NULL;
    size_t blen = 0;
    coord_job_t *j;
    int rc;

    if (coord_serving(call, fe) < 0)
        return;
    fe->fe_last_ms = coord_wall_ms();
    if ((rc = sfl_msg_fleet_fold_spec_req_unpack(req, len, &co->lim, &id, &round, &attempt)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    memset(&s, 0, sizeof(s));
    j = coord_job_find(co, id);
    if (j != NULL && attempt_open(co, j, round, attempt) && coord_fold_job(j)) {
        sfl_msg_limits_t lim = co->lim;

        s.fold = 1;
        s.dimension = (uint32_t)j->model.prob.dim;
        s.encoding = j->spec.value_encoding;
        j->shape->limits(j, &lim, &s.encoding);
        s.max_update_norm = j->spec.max_update_norm;
        s.max_samples = j->spec.max_samples;
        memcpy(s.round_pk, j->key->rk->pk, sizeof(s.round_pk));
        memcpy(s.nonce, j->rnd.nonce, sizeof(s.nonce));
        memcpy(s.model_hash, j->model_hash, sizeof(s.model_hash));
    }
    rc = sfl_msg_fleet_fold_spec_pack(&s, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

/* ---- Claim ---------------------------------------------------------------------- */

/* Answers a claim with verdict vd (and reason): the agent's answer,
 * relayed by the front-end. Refusals get the audit record a SubmitUpdate's
 * would (an unselected agent's row); an accepted claim's row is written
 * when its partial is added. */
static void claim_answer(coord_t *co, sfl_grpc_call_t *call, coord_conn_t *k, coord_agent_t *a,
                         coord_job_t *j, const sfl_fleet_claim_t *c, coord_upd_verdict_t vd,
                         const char *reason, int rj)
{
    sfl_ack_t ack;
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[400], q2[200];
    int rc;

    memset(&ack, 0, sizeof(ack));
    coord_text_copy(ack.reason, sizeof(ack.reason), vd == COORD_UPD_ACCEPTED ? "" : reason);
    ack.status = coord_ack_of(vd);
    ack.job_id = c->job_id;
    ack.round = c->round;
    ack.attempt = c->attempt;
    if (vd != COORD_UPD_ACCEPTED) {
        coord_count_verdict(co, vd, rj);
        if (j && j->opened && c->round == j->rnd.round && c->attempt == j->wire_attempt &&
            !coord_round_member(&j->rnd, a->id))
            coord_part_queue(co, &(coord_part_row_t){(int64_t)j->id, (int64_t)c->round,
                                                     (int64_t)c->attempt + 1, (int64_t)a->id,
                                                     COORD_PART_REJECTED, ack.reason,
                                                     (int64_t)c->update_bytes, coord_wall_ms()});
    }
    coord_log(vd == COORD_UPD_ACCEPTED ? COORD_LOG_DEBUG : COORD_LOG_WARN, "claim",
              "frontend=%s agent=%llu job=%llu round=%llu attempt=%u verdict=%s%s%s",
              coord_log_quote(k->fe->peer.cn, q2, sizeof(q2)), (unsigned long long)a->id,
              (unsigned long long)c->job_id, (unsigned long long)c->round, c->attempt,
              coord_upd_verdict_name(vd), vd == COORD_UPD_ACCEPTED ? "" : " reason=",
              vd == COORD_UPD_ACCEPTED ? "" : coord_log_quote(ack.reason, q, sizeof(q)));
    rc = sfl_msg_ack_pack(&ack, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_claim(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_fleet_claim_t c;
    sfl_update_t u;
    sfl_upd_ctx_t ctx;
    coord_agent_t *a;
    coord_job_t *j;
    coord_claim_t *cl;
    const coord_member_t *m;
    coord_upd_verdict_t vd;
    char reason[SFL_MSG_TEXT_LEN];
    double max_w;
    int rc, rj;

    if (coord_serving(call, k) < 0)
        return;
    if (k->fe == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED, "claims come from front-ends");
        return;
    }
    if ((rc = sfl_msg_fleet_claim_unpack(req, len, &co->lim, &c)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, k, c.agent_id)) == NULL)
        return;
    memset(&u, 0, sizeof(u));
    u.job_id = c.job_id;
    u.round = c.round;
    u.attempt = c.attempt;
    u.agent_id = c.agent_id;
    vd = coord_submit_prejudge(co, a, &u, &j, reason, sizeof(reason), &rj);
    if (vd != COORD_SUBMIT_OPEN) {
        claim_answer(co, call, k, a, j, &c, vd, reason, rj);
        return;
    }
    vd = COORD_UPD_REJECTED;
    rj = RJ_OTHER;
    m = coord_round_member(&j->rnd, a->id);
    max_w = j->spec.max_samples > 0 ? j->spec.max_samples : SFL_FOLD_MAX_WEIGHT;
    if (!coord_fold_job(j)) {
        snprintf(reason, sizeof(reason), "job %llu does not fold at front-ends this round; "
                 "send the update", (unsigned long long)j->id);
    } else if (c.samples > a->ds.samples) {
        snprintf(reason, sizeof(reason), "update claims %llu samples, the agent joined with %llu",
                 (unsigned long long)c.samples, (unsigned long long)a->ds.samples);
    } else if ((double)c.samples > max_w) {
        rj = RJ_BOUNDS;
        snprintf(reason, sizeof(reason), "update refused by the job's bounds: declared samples "
                 "%llu are above the job's max_samples %.17g", (unsigned long long)c.samples,
                 max_w);
    } else {
        /* What the agent signed is bound to our own state, as in submit.c. */
        memcpy(ctx.round_pk, j->key->rk->pk, sizeof(ctx.round_pk));
        ctx.job = j->id;
        ctx.round = j->rnd.round;
        memcpy(ctx.nonce, j->rnd.nonce, sizeof(ctx.nonce));
        ctx.agent_id = a->id;
        memcpy(ctx.model_hash, j->model_hash, sizeof(ctx.model_hash));
        if ((rc = sfl_seal_verify_update_digest(a->pk, &ctx, c.payload_hash, c.signature)) < 0) {
            rj = coord_seal_reason(rc);
            snprintf(reason, sizeof(reason), "the update's signature does not verify for agent "
                     "%llu and this attempt", (unsigned long long)a->id);
        } else if ((cl = claims_of(j)) == NULL) {
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            return;
        } else {
            uint32_t slot = (uint32_t)(m - j->rnd.members);

            if (k->fe->fe_serial == 0)
                k->fe->fe_serial = ++co->fe_serials;
            cl[slot].fe = k->fe->fe_serial;
            cl[slot].weight = (double)c.samples;
            cl[slot].state = COORD_CLAIM_CLAIMED;
            /* a claim is a sign of life: not dead before its partial */
            (void)coord_round_heartbeat(&j->rnd, a->id, coord_now_ms(co));
            vd = COORD_UPD_ACCEPTED;
        }
    }
    claim_answer(co, call, k, a, j, &c, vd, reason, rj);
}

/* ---- Partial -------------------------------------------------------------------- */

/* The metric sums a partial reports: counts whole, >= 0, <= 2^53 (the
 * means' sums are finite: the decoder's check). SFL_EINVAL with why. */
static int metrics_check(const double *ms, char *why, size_t cap)
{
    for (int id = 0; id < SFL_METRIC_COUNT; id++)
        if (sfl_metrics[id].fold == SFL_METRIC_WEIGHT &&
            (!(ms[id] >= 0) || ms[id] > 9007199254740992.0 || ms[id] != floor(ms[id]))) {
            snprintf(why, cap, "metric_sums[%d] (%s) is not a whole count: %g", id,
                     sfl_metrics[id].sql, ms[id]);
            return SFL_EINVAL;
        }
    return 0;
}

/* ... into j's sums, as sfl_metrics_fold adds one update's. */
static void metrics_add(coord_job_t *j, const double *ms)
{
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].fold == SFL_METRIC_WEIGHT)
            sfl_metric_set_u64(id, &j->fold, sfl_metric_get_u64(id, &j->fold) + (uint64_t)ms[id]);
        else if (sfl_metrics[id].fold == SFL_METRIC_MEAN)
            sfl_metric_set(id, &j->fold, sfl_metric_get(id, &j->fold) + ms[id]);
    }
}

/* Refuses the partial p of front-end connection fe: its members this
 * connection claimed are lost for the attempt. */
static void partial_refused(sfl_grpc_call_t *call, coord_conn_t *fe, coord_job_t *j,
                            const sfl_fleet_partial_t *p, int status, const char *why)
{
    char q[200], q2[400];
    uint32_t lost = 0;

    if (j != NULL && fe->fe_serial != 0 && j->claims != NULL && p->round == j->claims_round &&
        p->attempt == j->claims_attempt)
        for (uint32_t i = 0; i < p->nmembers; i++) {
            const coord_member_t *m = coord_round_member(&j->rnd, p->members[i]);
            coord_claim_t *cl;

            if (m == NULL || (uint32_t)(m - j->rnd.members) >= j->nclaims)
                continue;
            cl = &j->claims[m - j->rnd.members];
            if (cl->state == COORD_CLAIM_CLAIMED && cl->fe == fe->fe_serial) {
                cl->state = COORD_CLAIM_LOST;
                lost++;
            }
        }
    coord_log(COORD_LOG_WARN, "partial_refused",
              "frontend=%s job=%llu round=%llu attempt=%u members=%u lost=%u reason=%s",
              coord_log_quote(fe->peer.cn, q, sizeof(q)), (unsigned long long)p->job_id,
              (unsigned long long)p->round, p->attempt, p->nmembers, lost,
              coord_log_quote(why, q2, sizeof(q2)));
    coord_fail_call(call, status, "partial refused: %s", why);
}

void coord_h_fleet_partial(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *fe = ud;
    coord_t *co = fe->co;
    sfl_fleet_partial_t *p = NULL;
    sfl_msg_limits_t lim;
    coord_job_t *j;
    coord_claim_t *cl;
    double *dense = NULL, w = 0;
    uint32_t *slots = NULL;
    char why[SFL_MSG_TEXT_LEN], q[200];
    uint8_t *buf = NULL;
    size_t blen = 0;
    uint64_t now;
    int rc, status = SFL_GRPC_STATUS_INVALID_ARGUMENT;

    if (coord_serving(call, fe) < 0)
        return;
    fe->fe_last_ms = coord_wall_ms();
    lim = co->lim;
    if ((rc = sfl_msg_fleet_partial_unpack(req, len, &lim, &p)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    j = coord_job_find(co, p->job_id);
    if (j == NULL) {
        snprintf(why, sizeof(why), "no job %llu", (unsigned long long)p->job_id);
        status = SFL_GRPC_STATUS_NOT_FOUND;
        goto refuse;
    }
    if (!attempt_open(co, j, p->round, p->attempt) || !j->model.aggregating) {
        snprintf(why, sizeof(why), "round %llu attempt %u of job %llu is not open",
                 (unsigned long long)p->round, p->attempt, (unsigned long long)j->id);
        status = SFL_GRPC_STATUS_FAILED_PRECONDITION;
        goto refuse;
    }
    if (!coord_fold_job(j) || fe->fe_serial == 0 || j->claims == NULL ||
        j->claims_round != p->round || j->claims_attempt != p->attempt) {
        snprintf(why, sizeof(why), "this front-end claimed no member of the attempt");
        status = SFL_GRPC_STATUS_FAILED_PRECONDITION;
        goto refuse;
    }
    if ((slots = sfl__malloc(p->nmembers * sizeof(*slots))) == NULL) {
        snprintf(why, sizeof(why), "out of memory");
        status = SFL_GRPC_STATUS_RESOURCE_EXHAUSTED;
        goto refuse;
    }
    /* Every member claimed by this connection, not folded, named once: a
     * member named twice finds its slot marked FOLDED by its first naming
     * (undone below when anything is refused). */
    cl = j->claims;
    for (uint32_t i = 0; i < p->nmembers; i++) {
        const coord_member_t *m = coord_round_member(&j->rnd, p->members[i]);
        uint32_t s;

        if (m == NULL) {
            snprintf(why, sizeof(why), "member %llu was not selected for this attempt",
                     (unsigned long long)p->members[i]);
        } else if (cl[s = (uint32_t)(m - j->rnd.members)].fe != fe->fe_serial ||
                   cl[s].state == COORD_CLAIM_NONE) {
            snprintf(why, sizeof(why), "member %llu was not claimed by this front-end",
                     (unsigned long long)p->members[i]);
        } else if (cl[s].state != COORD_CLAIM_CLAIMED) {
            snprintf(why, sizeof(why), "member %llu is %s", (unsigned long long)p->members[i],
                     cl[s].state == COORD_CLAIM_LOST ? "lost for this attempt (an earlier "
                                                       "partial was refused)"
                                                     : "already counted (named twice?)");
        } else {
            slots[i] = s;
            cl[s].state = COORD_CLAIM_FOLDED;
            w += cl[s].weight;
            continue;
        }
        for (uint32_t k = 0; k < i; k++)
            cl[slots[k]].state = COORD_CLAIM_CLAIMED;
        goto refuse;
    }
    /* from here a refusal must undo the marks */
    if (w != p->weight_sum) {
        snprintf(why, sizeof(why), "weight_sum %.17g is not the members' claimed samples %.17g",
                 p->weight_sum, w);
    } else if (p->sum->dim != j->model.prob.dim) {
        snprintf(why, sizeof(why), "sum has dimension %u, the model %zu", p->sum->dim,
                 j->model.prob.dim);
    } else if (metrics_check(p->metric_sums, why, sizeof(why)) < 0) {
        /* why set */
    } else if ((dense = sfl__calloc(j->model.prob.dim, sizeof(*dense))) == NULL) {
        snprintf(why, sizeof(why), "out of memory");
        status = SFL_GRPC_STATUS_RESOURCE_EXHAUSTED;
    } else {
        for (uint32_t i = 0; i < p->sum->nnz; i++)
            dense[p->sum->idx[i]] = p->sum->val[i];
        if (sfl_fold_add_partial(&j->model.agg, dense, p->weight_sum, p->nmembers) < 0)
            snprintf(why, sizeof(why), "%s", sfl_last_error());
        else {
            metrics_add(j, p->metric_sums);
            goto add;
        }
    }
    for (uint32_t k = 0; k < p->nmembers; k++)
        cl[slots[k]].state = COORD_CLAIM_CLAIMED;
    goto refuse;

add:
    now = coord_now_ms(co);
    /* all of them count (the sum holds them all), even past the round's
     * target: the phase closes once they are in */
    coord_round_hold(&j->rnd, 1, now);
    for (uint32_t i = 0; i < p->nmembers; i++) {
        coord_agent_t *a = coord_agent_find(co, p->members[i]);
        coord_upd_verdict_t vd = coord_round_submit(&j->rnd, p->members[i], j->id, p->round,
                                                    j->rnd.attempt, now);

        if (vd != COORD_UPD_ACCEPTED)
            continue; /* cannot happen: checked above, on this thread */
        if (a != NULL)
            a->accepted++;
        coord_count_verdict(co, vd, -1);
        coord_part_queue(co, &(coord_part_row_t){(int64_t)j->id, (int64_t)p->round,
                                                 (int64_t)p->attempt + 1,
                                                 (int64_t)p->members[i], COORD_PART_ACCEPTED,
                                                 NULL, (int64_t)(len / p->nmembers),
                                                 coord_wall_ms()});
    }
    coord_round_hold(&j->rnd, 0, now);
    coord_log(COORD_LOG_INFO, "partial",
              "frontend=%s job=%llu round=%llu attempt=%u members=%u weight=%.17g bytes=%zu",
              coord_log_quote(fe->peer.cn, q, sizeof(q)), (unsigned long long)j->id,
              (unsigned long long)p->round, p->attempt, p->nmembers, p->weight_sum, len);
    rc = sfl_msg_fleet_partial_reply_pack(p->nmembers, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
    sfl__free(dense);
    sfl__free(slots);
    sfl_msg_fleet_partial_free(p);
    coord_job_drive(j);
    coord_dismiss_idle(co);
    return;

refuse:
    partial_refused(call, fe, j, p, status, why);
    sfl__free(dense);
    sfl__free(slots);
    sfl_msg_fleet_partial_free(p);
}

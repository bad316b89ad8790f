/* Update mode 2 (secure aggregation; docs/security.md, docs/protocol.md
 * "Update mode 2"): a round of five declared phases, one per stage of
 * sfl/secagg.h's protocol (advertise keys, share keys, masked input,
 * consistency, unmask). Members answer each stage with SubmitSecAgg; when
 * the round machine moves to the next phase the server's stage ends and
 * the next stage goes out on the members' held Subscribe streams. The
 * aggregation unmasks the sum of the inputs, reads it back as the weighted
 * mean of the members' changes on the round's support S_t, and folds
 * global + that mean as the round's one update. */
#include "coord_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/alloc.h"
#include "sfl/savec.h"
#include "sfl/secagg.h"

/* The server's culprits found since the last call, each quarantined for
 * the job: a member that provably broke the protocol is never selected
 * again, so a retry goes on without it. */
static void sa_report(job_t *j)
{
    const sfl_sa_culprit_t *cul;
    uint32_t n;

    if (j->sa == NULL || sfl_sa_server_culprits(j->sa, &cul, &n) < 0)
        return;
    for (; j->sa_blamed < n; j->sa_blamed++) {
        coord_log(COORD_LOG_WARN, "secagg_culprit", "job=%llu round=%llu agent=%llu reason=%s",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                  (unsigned long long)cul[j->sa_blamed].id,
                  sfl_sa_blame_name(cul[j->sa_blamed].why));
        coord_quarantine(j, cul[j->sa_blamed].id, sfl_sa_blame_name(cul[j->sa_blamed].why));
    }
}

void coord_saround_close(job_t *j)
{
    sa_report(j);
    sfl_sa_server_free(j->sa);
    j->sa_blamed = 0;
    j->sa = NULL;
    sfl__free(j->sa_members);
    j->sa_members = NULL;
    sfl__free(j->sa_support);
    j->sa_support = NULL;
    j->sa_sent = 0;
}

/* The mask graph's degree when the job leaves it to us: complete up to 200
 * selected; above, the smallest even k >= 64 and >= 8 log2 n (80 at 1,000,
 * 108 at 10,000): a seed's k + 1 holders then lose more than the cohort's
 * share n - t of them only at a rare dropout rate (docs/security.md). */
static uint32_t auto_degree(uint32_t n)
{
    uint32_t k = (uint32_t)ceil(8 * log2((double)n));

    if (n <= 200)
        return 0;
    k = k < 64 ? 64 : k;
    return k + (k & 1);
}

int coord_saround_prepare(job_t *j)
{
    const sfl_job_spec_t *s = &j->model.spec;
    coord_round_t *r = &j->rnd;
    uint32_t n = r->nmembers, d = (uint32_t)j->model.prob.dim, topk, size;
    double tau = sfl_algo_param_or(&j->model.params, "tau", 0);
    int rc;

    coord_saround_close(j);
    j->sa_t = s->sa_threshold ? s->sa_threshold : 2 * n / 3 + 1;
    if (j->sa_t > n || 2 * (uint64_t)j->sa_t <= n)
        return sfl__fail(SFL_EINVAL, "secure aggregation: threshold %u of %u selected agents "
                         "(need n / 2 < t <= n)", j->sa_t, n);
    for (uint32_t p = 0; p < 5; p++)
        r->cfg.phases[p].quorum = j->sa_t;
    topk = s->sa_topk ? s->sa_topk : tau >= 1 && tau < d ? (uint32_t)tau : d;
    size = s->sa_support ? s->sa_support : (topk > d / 2 ? d : 2 * topk);
    if ((j->sa_members = sfl__calloc(n, sizeof(*j->sa_members))) == NULL ||
        (j->sa_support = sfl__calloc(size < d ? size : d, sizeof(uint32_t))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the secure aggregation round");
    j->sa_wmax = s->sa_max_weight;
    for (uint32_t i = 0; i < n; i++) {
        const agent_t *a = coord_agent_find(j->co, r->members[i].agent);

        if (a == NULL)
            return sfl__fail(SFL_EINVAL, "agent %llu of the cohort is unknown",
                             (unsigned long long)r->members[i].agent);
        j->sa_members[i].agent_id = a->id;
        memcpy(j->sa_members[i].pk, a->pk, SFL_MSG_KEY_BYTES);
        if (s->sa_max_weight == 0 && (double)a->ds.samples > j->sa_wmax)
            j->sa_wmax = (double)a->ds.samples;
    }
    if (!(j->sa_wmax > 0))
        j->sa_wmax = 1;
    if ((rc = sfl_sa_support(j->model.global, d, size, r->nonce, j->sa_support, &j->sa_k)) < 0)
        return rc;
    j->sa_topk = topk;
    j->sa_clip = s->sa_clip > 0 ? s->sa_clip : 100.0; /* sfl-sim's default */
    j->sa_degree = s->sa_degree ? s->sa_degree : auto_degree(n);
    return 0;
}

/* The task's SecAggRound (borrowed by the task while it is built). */
void coord_saround_task(const job_t *j, sfl_msg_sa_round_t *out)
{
    *out = (sfl_msg_sa_round_t){.threshold = j->sa_t, .nmembers = j->rnd.nmembers,
                                .members = j->sa_members, .support_size = j->sa_k,
                                .top_k = j->sa_topk, .clip = j->sa_clip,
                                .max_weight = j->sa_wmax, .degree = j->sa_degree};
}

int coord_saround_start(job_t *j)
{
    sfl_sa_member_t *m = sfl__calloc(j->rnd.nmembers, sizeof(*m));
    sfl_sa_round_t r;
    int rc;

    if (m == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the cohort");
    for (uint32_t i = 0; i < j->rnd.nmembers; i++) {
        m[i].id = j->sa_members[i].agent_id;
        memcpy(m[i].pk, j->sa_members[i].pk, SFL_SEAL_PK_BYTES);
    }
    r = (sfl_sa_round_t){.job = j->id, .round = j->rnd.round, .attempt = j->wire_attempt,
                         .len = j->sa_k + 2 + SFL_SA_METRIC_WORDS, .t = j->sa_t,
                         .n = j->rnd.nmembers,
                         .degree = j->sa_degree, .members = m};
    memcpy(r.nonce, j->rnd.nonce, sizeof(r.nonce));
    memcpy(r.model_hash, j->model_hash, sizeof(r.model_hash));
    sfl_sa_support_hash(j->sa_support, j->sa_k, r.support_hash);
    rc = sfl_sa_server_new(&r, &j->sa);
    sfl__free(m);
    j->sa_sent = 0;
    return rc;
}

static void send_stage(job_t *j, agent_t *a, const sfl_msg_sa_stage_t *st)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char q[300];

    if (a == NULL || a->sub == NULL)
        return;
    if (sfl_msg_sa_stage_pack(st, &buf, &len) < 0) {
        coord_log(COORD_LOG_ERROR, "secagg_stage_failed", "job=%llu stage=%u error=%s",
                  (unsigned long long)j->id, st->stage,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        return;
    }
    if (sfl_grpc_send(a->sub, buf, len) < 0)
        coord_end_sub(a, SFL_GRPC_STATUS_INTERNAL, "cannot send the secagg stage");
    else {
        a->sub_idle_since = coord_now_ms(j->co);
        j->fold.bytes_down += len;
    }
    sfl_msg_buf_free(buf);
}

/* Ends the server's stage before phase p (1..4) and sends stage p + 1 to
 * the members still in. */
static int next_stage(job_t *j, uint32_t p)
{
    sfl_msg_sa_stage_t st = {.job_id = j->id, .round = j->rnd.round,
                             .attempt = j->wire_attempt, .stage = p + 1};
    const sfl_sa_adv_t *u1;
    const uint64_t *ids;
    const sfl_sa_consist_t *sigs;
    uint32_t n;
    int rc = 0;

    switch (p) {
    case 1:
        if ((rc = sfl_sa_server_end_adv(j->sa, &u1, &n)) < 0)
            return rc;
        if ((st.keys = sfl__calloc(n, sizeof(*st.keys))) == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
            st.keys[i].agent_id = u1[i].id;
            memcpy(st.keys[i].c_pk, u1[i].c_pk, 32);
            memcpy(st.keys[i].s_pk, u1[i].s_pk, 32);
            memcpy(st.keys[i].sig, u1[i].sig, SFL_MSG_SIG_BYTES);
        }
        st.nkeys = n;
        break;
    case 2:
        rc = sfl_sa_server_end_shares(j->sa, &ids, &n);
        st.clients = (uint64_t *)(uintptr_t)ids;
        st.nclients = n;
        break;
    case 3:
        rc = sfl_sa_server_end_inputs(j->sa, &ids, &n);
        st.clients = (uint64_t *)(uintptr_t)ids;
        st.nclients = n;
        break;
    case 4:
        if ((rc = sfl_sa_server_end_consist(j->sa, &sigs, &n)) < 0)
            return rc;
        if ((st.sigs = sfl__calloc(n, sizeof(*st.sigs))) == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
            st.sigs[i].agent_id = sigs[i].id;
            memcpy(st.sigs[i].sig, sigs[i].sig, SFL_MSG_SIG_BYTES);
        }
        st.nsigs = n;
        break;
    }
    for (uint32_t i = 0; rc == 0 && i < j->rnd.nmembers; i++) {
        const coord_member_t *mb = &j->rnd.members[i];
        sfl_sa_box_t *boxes = NULL;
        uint32_t nb = 0;

        if (mb->state != COORD_MEMBER_PENDING)
            continue;
        if (p == 2) {
            if ((rc = sfl_sa_server_inbox(j->sa, mb->agent, &boxes, &nb)) < 0)
                break;
            if ((st.boxes = sfl__calloc(nb ? nb : 1, sizeof(*st.boxes))) == NULL) {
                sfl__free(boxes);
                rc = SFL_ENOMEM;
                break;
            }
            for (uint32_t k = 0; k < nb; k++) {
                st.boxes[k].from = boxes[k].from;
                st.boxes[k].to = boxes[k].to;
                memcpy(st.boxes[k].nonce, boxes[k].nonce, SFL_MSG_SA_NONCE);
                memcpy(st.boxes[k].ct, boxes[k].ct, SFL_MSG_SA_CT);
            }
            st.nboxes = nb;
            sfl__free(boxes);
        }
        send_stage(j, coord_agent_find(j->co, mb->agent), &st);
        if (p == 2) {
            sfl__free(st.boxes);
            st.boxes = NULL;
            st.nboxes = 0;
        }
    }
    if (p == 1)
        sfl__free(st.keys);
    if (p == 4)
        sfl__free(st.sigs);
    return rc;
}

void coord_saround_sync(job_t *j)
{
    char q[300];

    while (j->sa != NULL && j->rnd.state == COORD_ROUND_TRAINING && j->sa_sent < j->rnd.phase) {
        int rc = next_stage(j, j->sa_sent + 1);

        j->sa_sent++;
        if (rc < 0) {
            /* the server's own count is below t, or no memory: the phase
             * cannot complete and fails at its deadline */
            coord_log(COORD_LOG_WARN, "secagg_stage", "job=%llu round=%llu stage=%u error=%s",
                      (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                      j->sa_sent + 1, coord_log_quote(sfl_last_error(), q, sizeof(q)));
            break;
        }
    }
}

/* A secagg answer into the server's struct for its stage; the verdict. */
static int server_take(job_t *j, const sfl_msg_sa_answer_t *m)
{
    switch (m->stage) {
    case 1: {
        sfl_sa_adv_t adv = {.id = m->agent_id};

        memcpy(adv.c_pk, m->keys.c_pk, 32);
        memcpy(adv.s_pk, m->keys.s_pk, 32);
        memcpy(adv.sig, m->keys.sig, SFL_MSG_SIG_BYTES);
        return sfl_sa_server_adv(j->sa, &adv);
    }
    case 2: {
        sfl_sa_shares_t sh = {.id = m->agent_id, .nboxes = m->nboxes, .ncommit = m->ncommits};
        int rc;

        _Static_assert(SFL_MSG_SA_POINT == SFL_SA_POINT, "a commitment's size");
        memcpy(sh.sig, m->sig, SFL_MSG_SIG_BYTES);
        if ((m->nboxes > 0 && (sh.boxes = sfl__calloc(m->nboxes, sizeof(*sh.boxes))) == NULL) ||
            (m->ncommits > 0 &&
             (sh.commit = sfl__calloc(m->ncommits, sizeof(*sh.commit))) == NULL)) {
            sfl_sa_shares_clear(&sh);
            return SFL_ENOMEM;
        }
        if (m->ncommits > 0)
            memcpy(sh.commit, m->commits, (size_t)m->ncommits * SFL_SA_POINT);
        for (uint32_t i = 0; i < m->nboxes; i++) {
            sh.boxes[i].from = m->boxes[i].from;
            sh.boxes[i].to = m->boxes[i].to;
            memcpy(sh.boxes[i].nonce, m->boxes[i].nonce, SFL_SA_BOX_NONCE);
            memcpy(sh.boxes[i].ct, m->boxes[i].ct, SFL_SA_BOX_BYTES);
        }
        rc = sfl_sa_server_shares(j->sa, &sh);
        sfl_sa_shares_clear(&sh);
        return rc;
    }
    case 3: {
        sfl_sa_input_t in = {.id = m->agent_id, .len = m->nmasked};
        int rc;

        if ((in.y = sfl__calloc(m->nmasked, sizeof(uint32_t))) == NULL)
            return SFL_ENOMEM;
        memcpy(in.y, m->masked, m->nmasked * sizeof(uint32_t));
        memcpy(in.sig, m->sig, SFL_MSG_SIG_BYTES);
        rc = sfl_sa_server_input(j->sa, &in);
        sfl_sa_input_clear(&in);
        return rc;
    }
    case 4: {
        sfl_sa_consist_t cs = {.id = m->agent_id};

        memcpy(cs.sig, m->sig, SFL_MSG_SIG_BYTES);
        return sfl_sa_server_consist(j->sa, &cs);
    }
    default: {
        sfl_sa_reveal_t *rv = sfl__calloc(m->nreveals ? m->nreveals : 1, sizeof(*rv));
        int rc;

        if (rv == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < m->nreveals; i++) {
            rv[i].of = m->reveals[i].of;
            rv[i].type = m->reveals[i].self_mask ? 'b' : 's';
            rv[i].share.x = m->reveals[i].x;
            memcpy(rv[i].share.y, m->reveals[i].y, 32);
            memcpy(rv[i].sig, m->reveals[i].sig, SFL_MSG_SIG_BYTES);
        }
        rc = sfl_sa_server_unmask(j->sa, m->agent_id, rv, m->nreveals);
        sodium_memzero(rv, m->nreveals * sizeof(*rv));
        sfl__free(rv);
        return rc;
    }
    }
}

void coord_h_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *c = ud;
    coord_t *co = c->co;
    sfl_msg_sa_answer_t *m = NULL;
    coord_upd_verdict_t vd = COORD_UPD_REJECTED;
    agent_t *a;
    job_t *j;
    char why[SFL_MSG_TEXT_LEN], q[400];
    int rc;

    if (coord_serving(call, c) < 0)
        return;
    if ((rc = sfl_msg_sa_answer_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, c, m->agent_id)) == NULL)
        goto out;
    why[0] = '\0';
    j = coord_job_find(co, m->job_id);
    if (j == NULL || !j->ready || !j->model.spec.secagg) {
        snprintf(why, sizeof(why), "no secure aggregation job %llu",
                 (unsigned long long)m->job_id);
        vd = COORD_UPD_WRONG_ROUND;
    } else if (!coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING || j->opening ||
               j->sa == NULL || m->round != j->rnd.round || m->attempt != j->wire_attempt ||
               m->stage != j->rnd.phase + 1) {
        snprintf(why, sizeof(why), "round %llu attempt %u stage %u is not open",
                 (unsigned long long)m->round, m->attempt, m->stage);
        vd = m->round < j->rnd.round ||
                     (m->round == j->rnd.round &&
                      (m->attempt < j->wire_attempt ||
                       (m->attempt == j->wire_attempt && m->stage <= j->rnd.phase)))
                 ? COORD_UPD_LATE
                 : COORD_UPD_WRONG_ROUND;
    } else if ((rc = server_take(j, m)) < 0) {
        coord_text_copy(why, sizeof(why), sfl_last_error());
        vd = COORD_UPD_REJECTED;
        sa_report(j); /* a refusal the member provably caused */
    } else {
        (void)coord_round_heartbeat(&j->rnd, a->id, coord_now_ms(co));
        vd = coord_round_answer(&j->rnd, a->id, j->id, j->rnd.round, j->rnd.attempt,
                                j->rnd.phase, coord_now_ms(co));
    }
    coord_count_verdict(co, vd, RJ_OTHER);
    coord_log(vd == COORD_UPD_ACCEPTED ? COORD_LOG_DEBUG : COORD_LOG_WARN, "secagg",
              "agent=%llu job=%llu round=%llu stage=%u verdict=%s reason=%s",
              (unsigned long long)a->id, (unsigned long long)m->job_id,
              (unsigned long long)m->round, m->stage, coord_upd_verdict_name(vd),
              coord_log_quote(why, q, sizeof(q)));
    coord_reply_ack(call, vd, why, m->job_id, m->round, m->attempt);
    if (vd == COORD_UPD_ACCEPTED) {
        coord_saround_sync(j);
        coord_job_drive(j);
    }
out:
    sfl_msg_sa_answer_free(m);
}

_Static_assert(SFL_MSG_SA_EXTRA == 2 + SFL_SA_METRIC_WORDS, "the wire's masked input limit");

/* The round's figures from the cohort's summed metrics (sfl/savec.h), as
 * mode 1's fold_metrics makes them from its sums (driver.c). */
static void sa_metrics(coord_round_metrics_t *o, const double *m)
{
    if (m[0] >= 1 && isfinite(m[1])) {
        o->samples = (uint64_t)m[0];
        o->train_loss = m[1] / m[0];
    }
    if (m[2] >= 1 && isfinite(m[3]) && isfinite(m[4])) {
        o->eval_samples = (uint64_t)m[2];
        o->eval_accuracy = m[3] / m[2];
        o->eval_mse = m[4] / m[2];
    }
}

/* Thread pool (agg_work): the unmasked sum as the mean change on S_t,
 * global + it folded as the round's one update. */
int coord_saround_fold(job_t *j)
{
    coord_job_t *mj = &j->model;
    uint32_t len = j->sa_k + 2 + SFL_SA_METRIC_WORDS, count = 0;
    uint32_t *sum = sfl__calloc(len, sizeof(uint32_t));
    double *mean = NULL, wsum, m[SFL_SA_METRICS];
    sfl_spvec_t *upd = NULL;
    sfl_sa_quant_t qz;
    int rc;

    if (sum == NULL || (mean = sfl__calloc(mj->prob.dim, sizeof(double))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the secure sum");
        goto out;
    }
    if ((rc = sfl_sa_server_finish(j->sa, sum, &count)) < 0 ||
        (rc = sfl_sa_quant_init(&qz, j->sa_clip, j->sa_wmax, j->rnd.nmembers)) < 0 ||
        (rc = sfl_sa_server_mean(&qz, sum, j->sa_support, j->sa_k, count,
                                 (uint32_t)mj->prob.dim, mean, &wsum)) < 0)
        goto out;
    sfl_sa_metrics_decode(&qz, sum + j->sa_k + 2, m);
    sa_metrics(&j->work_metrics, m);
    for (size_t i = 0; i < mj->prob.dim; i++)
        mean[i] += mj->global[i];
    if ((rc = sfl_spvec_new((uint32_t)mj->prob.dim, 0, &upd)) < 0 ||
        (rc = sfl_spvec_from_dense(upd, mean)) < 0 ||
        (rc = coord_job_add(mj, 0, &upd, 1.0)) < 0)
        goto out;
    rc = coord_job_end(mj);
out:
    sfl_spvec_free(upd);
    sfl__free(mean);
    sfl__free(sum);
    return rc;
}

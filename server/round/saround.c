/* Update mode 2 (secure aggregation; docs/security.md, docs/protocol.md
 * "Update mode 2"): a round of five declared phases, one per stage of
 * sfl/crypto/secagg.h's protocol (advertise keys, share keys, masked input,
 * consistency, unmask). Members answer each stage with SubmitSecAgg; when
 * the round machine moves to the next phase the server's stage ends and
 * the next stage goes out on the members' held Subscribe streams. The
 * aggregation unmasks the sum of the inputs, reads it back as the weighted
 * mean of the members' changes on the round's support S_t, and folds
 * global + that mean as the round's one update. */
#include "coord_int.h"
#include "round/quarantine.h"
#include "round/suspect.h"
#include "round/registry.h"
#include "round/verdict.h"
#include "round/subs.h"
#include "round/coordwrite.h"
#include "round/driver.h"
#include "round/saround.h"
#include "round/shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/secagg.h"

static void sa_culprit_drop(coord_job_t *j, coord_sa_t *s);

/* The server's culprits found since the last call, each quarantined for
 * the job: a member that provably broke the protocol is never selected
 * again, so a retry goes on without it. */
static void sa_report(coord_job_t *j, coord_sa_t *s)
{
    const sfl_sa_culprit_t *cul;
    uint32_t n;

    if (s->srv == NULL || sfl_sa_server_culprits(s->srv, &cul, &n) < 0)
        return;
    for (; s->blamed < n; s->blamed++) {
        char why[96];

        coord_log(COORD_LOG_WARN, "secagg_culprit", "job=%llu round=%llu agent=%llu reason=%s",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                  (unsigned long long)cul[s->blamed].id,
                  sfl_sa_blame_name(cul[s->blamed].why));
        snprintf(why, sizeof(why), "round %llu attempt %u: secure aggregation %s",
                 (unsigned long long)j->rnd.round, j->wire_attempt,
                 sfl_sa_blame_name(cul[s->blamed].why));
        coord_quarantine(j, cul[s->blamed].id, why);
    }
}

void coord_saround_close(coord_job_t *j, coord_sa_t *s)
{
    sa_report(j, s);
    coord_saround_free(s);
}

void coord_saround_free(coord_sa_t *s)
{
    sfl_sa_server_free(s->srv);
    sfl__free(s->members);
    sfl__free(s->support);
    sfl__free(s->w3);
    sfl__free(s->u3);
    sfl__free(s->bytes);
    memset(s, 0, sizeof(*s));
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

int coord_saround_prepare(coord_job_t *j, coord_sa_t *s, int stats)
{
    coord_round_t *r = &j->rnd;
    uint64_t *ids = sfl__mallocarray(r->nmembers ? r->nmembers : 1, sizeof(*ids));
    int rc;

    if (ids == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the cohort");
    for (uint32_t i = 0; i < r->nmembers; i++)
        ids[i] = r->members[i].agent;
    rc = coord_saround_prepare_ids(j, s, stats, ids, r->nmembers);
    sfl__free(ids);
    if (rc == 0)
        for (uint32_t p = 0; p < 5; p++)
            r->cfg.phases[p].quorum = s->t;
    return rc;
}

int coord_saround_prepare_ids(coord_job_t *j, coord_sa_t *s, int stats, const uint64_t *ids,
                              uint32_t n)
{
    const sfl_job_spec_t *sp = &j->model.spec;
    coord_round_t *r = &j->rnd;
    uint32_t d = (uint32_t)j->model.prob.dim, topk, size;
    double tau = sfl_algo_param_or(&j->model.params, "tau", 0), *zeros = NULL;
    int rc;

    coord_saround_close(j, s);
    s->stats = stats;
    s->t = sp->sa_threshold ? sp->sa_threshold : 2 * n / 3 + 1;
    if (s->t > n || 2 * (uint64_t)s->t <= n)
        return sfl__fail(SFL_EINVAL, "secure aggregation: threshold %u of %u selected agents "
                         "(need n / 2 < t <= n)", s->t, n);
    s->n = n;
    topk = sp->sa_topk ? sp->sa_topk : tau >= 1 && tau < d ? (uint32_t)tau : d;
    size = sp->sa_support ? sp->sa_support : (topk > d / 2 ? d : 2 * topk);
    if (s->stats) {
        /* the statistics round: the 1 + 2 d moments, every slot sent and
         * kept (a dense vector; the support is all of it) */
        d = topk = size = (uint32_t)SFL_MOMENTS_LEN(j->spec.dimension);
    }
    /* bytes: parallel to the whole cohort (r->members), this session's
     * members' only */
    if ((s->members = sfl__calloc(n ? n : 1, sizeof(*s->members))) == NULL ||
        (s->bytes = sfl__calloc(r->nmembers ? r->nmembers : 1, sizeof(*s->bytes))) == NULL ||
        (s->support = sfl__calloc(size < d ? size : d, sizeof(uint32_t))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the secure aggregation round");
    /* The operator's cap, never what the agents declare: one agent declaring
     * 1e9 samples would otherwise quantize every honest weight to ~0. */
    s->wmax = sp->sa_max_weight > 0 ? sp->sa_max_weight : COORD_SA_MAX_WEIGHT;
    if (s->stats)
        s->wmax = 1; /* raised to the cohort's largest weight below */
    for (uint32_t i = 0; i < n; i++) {
        const coord_agent_t *a = coord_agent_find(j->co, ids[i]);
        double w;

        if (a == NULL)
            return sfl__fail(SFL_EINVAL, "agent %llu of the cohort is unknown",
                             (unsigned long long)ids[i]);
        s->members[i].agent_id = a->id;
        memcpy(s->members[i].pk, a->pk, sizeof(s->members[i].pk));
        /* public, signed into the task: the declared samples, capped */
        w = a->ds.samples > 1 ? (double)a->ds.samples : 1.0;
        if (s->stats) {
            /* the statistics round: the declared rows uncapped, so the
             * weighted mean mode 2 returns is the row-weighted one; w_max
             * the cohort's largest (sfl/crypto/savec.h) */
            s->members[i].weight = w;
            s->wmax = w > s->wmax ? w : s->wmax;
        } else
            s->members[i].weight = w < s->wmax ? w : s->wmax;
    }
    if (s->stats && (zeros = sfl__calloc(d, sizeof(double))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the statistics round's support");
    rc = sfl_sa_support(s->stats ? zeros : j->model.global, d, size, r->nonce, s->support,
                        &s->k);
    sfl__free(zeros);
    if (rc < 0)
        return rc;
    s->topk = topk;
    /* a statistics round's clip is the job's bound B (the quantizer's is
     * B^2, on both sides: sfl/crypto/savec.h) */
    s->clip = s->stats ? coord_job_std_bound(sp)
                          : sp->sa_clip > 0 ? sp->sa_clip : 100.0; /* sfl-sim's default */
    s->degree = sp->sa_degree ? sp->sa_degree : auto_degree(n);
    return 0;
}

/* The task's SecAggRound (borrowed by the task while it is built). */
void coord_saround_task(const coord_job_t *j, const coord_sa_t *s, sfl_msg_sa_round_t *out)
{
    (void)j;
    *out = (sfl_msg_sa_round_t){.threshold = s->t, .nmembers = s->n,
                                .members = s->members, .support_size = s->k,
                                .top_k = s->topk, .clip = s->clip,
                                .max_weight = s->wmax, .degree = s->degree};
}

int coord_saround_start(coord_job_t *j, coord_sa_t *s)
{
    sfl_sa_member_t *m = sfl__calloc(s->n ? s->n : 1, sizeof(*m));
    sfl_sa_round_t r;
    int rc;

    if (m == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the cohort");
    for (uint32_t i = 0; i < s->n; i++) {
        m[i].id = s->members[i].agent_id;
        memcpy(m[i].pk, s->members[i].pk, SFL_SEAL_PK_BYTES);
    }
    r = (sfl_sa_round_t){.job = j->id, .round = j->rnd.round, .attempt = j->wire_attempt,
                         .len = s->k + SFL_SA_EXTRA_WORDS, .t = s->t,
                         .n = s->n,
                         .degree = s->degree, .members = m};
    memcpy(r.nonce, j->rnd.nonce, sizeof(r.nonce));
    memcpy(r.model_hash, j->model_hash, sizeof(r.model_hash));
    sfl_sa_support_hash(s->support, s->k, r.support_hash);
    rc = sfl_sa_server_new(&r, &s->srv);
    sfl__free(m);
    s->sent = 0;
    return rc;
}

static void send_stage(coord_job_t *j, coord_agent_t *a, const sfl_msg_sa_stage_t *st)
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

int coord_saround_inbox(const struct sfl_sa_server *sa, uint64_t v, sfl_msg_sa_box_t **out,
                        uint32_t *n)
{
    sfl_sa_box_t *boxes = NULL;
    uint32_t nb = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = sfl_sa_server_inbox(sa, v, &boxes, &nb)) < 0)
        return rc;
    if ((*out = sfl__calloc(nb ? nb : 1, sizeof(**out))) == NULL) {
        sfl__free(boxes);
        return sfl__fail(SFL_ENOMEM, "no memory for %u boxes", nb);
    }
    /* exactly the box: the two structs' fields have one size (sfl/wire/msg.h) */
    for (uint32_t k = 0; k < nb; k++) {
        (*out)[k].from = boxes[k].from;
        (*out)[k].to = boxes[k].to;
        memcpy((*out)[k].nonce, boxes[k].nonce, sizeof((*out)[k].nonce));
        memcpy((*out)[k].ct, boxes[k].ct, sizeof((*out)[k].ct));
    }
    *n = nb;
    sfl__free(boxes);
    return 0;
}

/* U3's public weights (the sum's divisor and bound), from the cohort's:
 * both lists ascending; and its ids (whom an unattributable failure of the
 * sum blames, whom a commit clears: suspect.c). */
static int u3_weights(coord_sa_t *s, const uint64_t *u3, uint32_t n3)
{
    uint32_t m = 0;

    sfl__free(s->w3);
    sfl__free(s->u3);
    s->u3 = NULL;
    s->n3 = 0;
    if ((s->w3 = sfl__calloc(n3 ? n3 : 1, sizeof(double))) == NULL ||
        (s->u3 = sfl__calloc(n3 ? n3 : 1, sizeof(uint64_t))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for U3's weights");
    memcpy(s->u3, u3, n3 * sizeof(uint64_t));
    for (uint32_t i = 0; i < n3; i++) {
        while (m < s->n && s->members[m].agent_id < u3[i])
            m++;
        if (m == s->n || s->members[m].agent_id != u3[i])
            return sfl__fail(SFL_EINVAL, "secure aggregation: input of %llu, not a member",
                             (unsigned long long)u3[i]);
        s->w3[i] = s->members[m].weight;
    }
    s->n3 = n3;
    return 0;
}

/* Ends the server's stage before phase p (1..4) and sends stage p + 1 to
 * the members still in. */
static int next_stage(coord_job_t *j, coord_sa_t *s, uint32_t p)
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
        if ((rc = sfl_sa_server_end_adv(s->srv, &u1, &n)) < 0)
            return rc;
        if ((st.keys = sfl__calloc(n, sizeof(*st.keys))) == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
            st.keys[i].agent_id = u1[i].id;
            memcpy(st.keys[i].c_pk, u1[i].c_pk, sizeof(st.keys[i].c_pk));
            memcpy(st.keys[i].s_pk, u1[i].s_pk, sizeof(st.keys[i].s_pk));
            memcpy(st.keys[i].sig, u1[i].sig, sizeof(st.keys[i].sig));
        }
        st.nkeys = n;
        break;
    case 2:
        rc = sfl_sa_server_end_shares(s->srv, &ids, &n);
        st.clients = (uint64_t *)(uintptr_t)ids;
        st.nclients = n;
        break;
    case 3:
        if ((rc = sfl_sa_server_end_inputs(s->srv, &ids, &n)) < 0 ||
            (rc = u3_weights(s, ids, n)) < 0)
            return rc;
        st.clients = (uint64_t *)(uintptr_t)ids;
        st.nclients = n;
        break;
    case 4:
        if ((rc = sfl_sa_server_end_consist(s->srv, &sigs, &n)) < 0)
            return rc;
        if ((st.sigs = sfl__calloc(n, sizeof(*st.sigs))) == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
            st.sigs[i].agent_id = sigs[i].id;
            memcpy(st.sigs[i].sig, sigs[i].sig, sizeof(st.sigs[i].sig));
        }
        st.nsigs = n;
        break;
    }
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        const coord_member_t *mb = coord_round_member(&j->rnd, s->members[i].agent_id);

        if (mb == NULL || mb->state != COORD_MEMBER_PENDING)
            continue;
        if (p == 2 && (rc = coord_saround_inbox(s->srv, mb->agent, &st.boxes, &st.nboxes)) < 0)
            break;
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

int coord_saround_sync(coord_job_t *j, coord_sa_t *s)
{
    char q[300];

    while (s->srv != NULL && j->rnd.state == COORD_ROUND_TRAINING && s->sent < j->rnd.phase) {
        int rc = next_stage(j, s, s->sent + 1);

        s->sent++;
        if (rc < 0) {
            /* the server's own count is below t, or no memory: the phase
             * cannot complete and fails at its deadline (a group: it is
             * dropped, coord_shape_secagg's sync) */
            coord_log(COORD_LOG_WARN, "secagg_stage", "job=%llu round=%llu stage=%u error=%s",
                      (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                      s->sent + 1, coord_log_quote(sfl_last_error(), q, sizeof(q)));
            return rc;
        }
    }
    return 0;
}

int coord_saround_take(struct sfl_sa_server *sa, const sfl_msg_sa_answer_t *m)
{
    switch (m->stage) {
    case 1: {
        sfl_sa_adv_t adv = {.id = m->agent_id};

        memcpy(adv.c_pk, m->keys.c_pk, sizeof(adv.c_pk));
        memcpy(adv.s_pk, m->keys.s_pk, sizeof(adv.s_pk));
        memcpy(adv.sig, m->keys.sig, sizeof(adv.sig));
        return sfl_sa_server_adv(sa, &adv);
    }
    case 2: {
        sfl_sa_shares_t sh = {.id = m->agent_id, .nboxes = m->nboxes, .ncommit = m->ncommits};
        int rc;

        _Static_assert(SFL_MSG_SA_POINT == SFL_SA_POINT, "a commitment's size");
        memcpy(sh.sig, m->sig, sizeof(sh.sig));
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
            memcpy(sh.boxes[i].nonce, m->boxes[i].nonce, sizeof(sh.boxes[i].nonce));
            memcpy(sh.boxes[i].ct, m->boxes[i].ct, sizeof(sh.boxes[i].ct));
        }
        rc = sfl_sa_server_shares(sa, &sh);
        sfl_sa_shares_clear(&sh);
        return rc;
    }
    case 3: {
        sfl_sa_input_t in = {.id = m->agent_id, .len = m->nmasked};
        int rc;

        if ((in.y = sfl__calloc(m->nmasked, sizeof(uint32_t))) == NULL)
            return SFL_ENOMEM;
        memcpy(in.y, m->masked, m->nmasked * sizeof(uint32_t));
        memcpy(in.sig, m->sig, sizeof(in.sig));
        rc = sfl_sa_server_input(sa, &in);
        sfl_sa_input_clear(&in);
        return rc;
    }
    case 4: {
        sfl_sa_consist_t cs = {.id = m->agent_id};

        memcpy(cs.sig, m->sig, sizeof(cs.sig));
        return sfl_sa_server_consist(sa, &cs);
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
            memcpy(rv[i].share.y, m->reveals[i].y, sizeof(rv[i].share.y));
            memcpy(rv[i].sig, m->reveals[i].sig, sizeof(rv[i].sig));
        }
        rc = sfl_sa_server_unmask(sa, m->agent_id, rv, m->nreveals);
        sodium_memzero(rv, m->nreveals * sizeof(*rv));
        sfl__free(rv);
        return rc;
    }
    }
}

/* The bytes of member id's accepted answers in the open attempt. */
static void add_bytes(coord_job_t *j, coord_sa_t *s, uint64_t id, size_t len)
{
    uint32_t lo = 0, hi = j->rnd.nmembers;

    if (s->bytes == NULL)
        return;
    while (lo < hi) { /* members ascend by agent id */
        uint32_t mid = lo + (hi - lo) / 2;

        if (j->rnd.members[mid].agent < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < j->rnd.nmembers && j->rnd.members[lo].agent == id)
        s->bytes[lo] += len;
}

uint32_t coord_saround_part_rows(const coord_member_t *members, const uint64_t *bytes, uint32_t n,
                                 const uint64_t *u3, uint32_t n3, int64_t job, int64_t round,
                                 int64_t attempt, int64_t at_ms, coord_part_row_t *out)
{
    uint32_t m = 0, k = 0;

    for (uint32_t i = 0; i < n3; i++) {
        while (m < n && members[m].agent < u3[i])
            m++;
        if (m == n || members[m].agent != u3[i])
            continue;
        out[k++] = (coord_part_row_t){job, round, attempt, (int64_t)u3[i], COORD_PART_ACCEPTED,
                                      NULL,
                                      bytes[m] > INT64_MAX ? INT64_MAX : (int64_t)bytes[m],
                                      at_ms};
    }
    return k;
}

void coord_saround_record(coord_job_t *j, coord_sa_t *s)
{
    coord_t *co = j->co;
    coord_part_row_t *rows;
    uint32_t n;

    if (s->u3 == NULL || s->bytes == NULL || s->n3 == 0)
        return;
    if ((rows = sfl__calloc(s->n3, sizeof(*rows))) == NULL) {
        coord_log(COORD_LOG_ERROR, "store_error",
                  "error=\"no memory for the participation records\" job=%llu round=%llu",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round);
        return;
    }
    n = coord_saround_part_rows(j->rnd.members, s->bytes, j->rnd.nmembers, s->u3,
                                s->n3, (int64_t)j->id, (int64_t)j->rnd.round,
                                (int64_t)j->wire_attempt + 1, coord_wall_ms(), rows);
    for (uint32_t i = 0; i < n; i++) {
        coord_part_queue(co, &rows[i]);
        co->verdicts[COORD_UPD_ACCEPTED]++;
    }
    sfl__free(rows);
}

void coord_h_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *c = ud;
    coord_t *co = c->co;
    sfl_msg_sa_answer_t *m = NULL;
    coord_upd_verdict_t vd = COORD_UPD_REJECTED;
    coord_agent_t *a;
    coord_job_t *j;
    coord_sa_t *s = NULL;
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
    if (j == NULL || !j->ready || (s = coord_sa_of(j, a->id)) == NULL) {
        snprintf(why, sizeof(why), "no secure aggregation job %llu",
                 (unsigned long long)m->job_id);
        vd = COORD_UPD_WRONG_ROUND;
    } else if (!coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING || j->opening ||
               s->srv == NULL || m->round != j->rnd.round || m->attempt != j->wire_attempt ||
               m->stage != j->rnd.phase + 1) {
        snprintf(why, sizeof(why), "round %llu attempt %u stage %u is not open",
                 (unsigned long long)m->round, m->attempt, m->stage);
        vd = m->round < j->rnd.round ||
                     (m->round == j->rnd.round &&
                      (m->attempt < j->wire_attempt ||
                       (m->attempt == j->wire_attempt && m->stage <= j->rnd.phase)))
                 ? COORD_UPD_LATE
                 : COORD_UPD_WRONG_ROUND;
    } else if ((rc = coord_saround_take(s->srv, m)) < 0) {
        coord_text_copy(why, sizeof(why), sfl_last_error());
        vd = COORD_UPD_REJECTED;
        sa_report(j, s); /* a refusal the member provably caused */
        sa_culprit_drop(j, s);
    } else {
        (void)coord_round_heartbeat(&j->rnd, a->id, coord_now_ms(co));
        vd = coord_round_answer(&j->rnd, a->id, j->id, j->rnd.round, j->rnd.attempt,
                                j->rnd.phase, coord_now_ms(co));
        if (vd == COORD_UPD_ACCEPTED)
            add_bytes(j, s, a->id, len);
    }
    /* a stage answer is not an update: the members of U3 count as
     * accepted updates when their sum is folded (coord_saround_record) */
    coord_count_stage(co, vd);
    coord_log(vd == COORD_UPD_ACCEPTED ? COORD_LOG_DEBUG : COORD_LOG_WARN, "secagg",
              "agent=%llu job=%llu round=%llu stage=%u verdict=%s reason=%s",
              (unsigned long long)a->id, (unsigned long long)m->job_id,
              (unsigned long long)m->round, m->stage, coord_upd_verdict_name(vd),
              coord_log_quote(why, q, sizeof(q)));
    coord_reply_ack(call, vd, why, m->job_id, m->round, m->attempt);
    if (vd == COORD_UPD_ACCEPTED || (s != NULL && s->dropped)) {
        j->shape->sync(j);
        coord_job_drive(j);
    }
out:
    sfl_msg_sa_answer_free(m);
}


/* The round's figures from the cohort's summed metrics (sfl/crypto/savec.h), as
 * mode 1 from its sums (sfl_metrics_means). */
static void sa_metrics(sfl_round_metrics_t *o, const double *m)
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

/* Thread pool: session s's unmasked sum as the weighted mean of its U3's
 * changes on S_t into mean[0..dim) (0 off S_t), *wsum the sum of their
 * public weights rho_u, m[0..SFL_SA_METRICS) their summed metrics. */
static int sa_sum(coord_job_t *j, coord_sa_t *s, double *mean, double *wsum, double *m)
{
    uint32_t len = s->k + SFL_SA_EXTRA_WORDS, count = 0;
    uint32_t *sum = sfl__calloc(len, sizeof(uint32_t));
    sfl_sa_quant_t qz;
    int rc;

    s->unattributable = 0;
    if (sum == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the secure sum");
    if ((rc = sfl_sa_server_finish(s->srv, sum, &count)) < 0 ||
        (rc = sfl_sa_quant_init(&qz, s->clip, s->wmax, s->n)) < 0)
        goto out;
    if (s->w3 == NULL || count != s->n3) {
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: a sum of %u inputs, U3 has %u", count,
                       s->n3);
        goto out;
    }
    /* the divisor and the bounds from U3's public weights; out of bounds:
     * the attempt fails and nothing is folded. A sum out of bounds
     * (SFL_ERANGE) or with a broken canary (SFL_EBADSIG) is some member's
     * input, whose the masks hide: the driver blames all of U3 a little
     * (suspect.c). */
    if ((rc = sfl_sa_server_mean(&qz, sum, s->support, s->k, count, s->w3,
                                 (uint32_t)j->model.prob.dim, mean, wsum)) < 0 ||
        (rc = sfl_sa_metrics_decode(&qz, sum + s->k + 1, count, m)) < 0)
        s->unattributable = rc == SFL_ERANGE || rc == SFL_EBADSIG;
out:
    sfl__free(sum);
    return rc;
}

/* Thread pool (agg_work): the unmasked sums as the mean change on S_t,
 * global + it folded as the round's one update. One session: its mean;
 * front-end groups: the groups that completed, their means weighted by
 * their weight totals (sum_g wsum_g mean_g / sum_g wsum_g), which is the
 * weighted mean over all of their U3; a group whose sum fails is dropped
 * (s->why, logged by sa_settle) and the attempt needs min_quorum inputs in
 * the groups that remain. */
static int sa_fold(coord_job_t *j, coord_sagrp_t *sg)
{
    coord_model_t *mj = &j->model;
    size_t dim = mj->prob.dim;
    double *mean = sfl__calloc(dim, sizeof(double)), *acc = NULL, wsum, m[SFL_SA_METRICS];
    double wall = 0, mall[SFL_SA_METRICS] = {0};
    uint32_t inputs = 0, done = 0;
    sfl_spvec_t *upd = NULL;
    int rc = 0, one = sg->ng == 1 && !sg->g[0].dropped && !sg->g[0].why[0];

    if (mean == NULL || (!one && (acc = sfl__calloc(dim, sizeof(double))) == NULL)) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the secure sum");
        goto out;
    }
    if (one) { /* one session: its mean as it is */
        if ((rc = sa_sum(j, &sg->g[0], mean, &wsum, m)) < 0)
            goto out;
        memcpy(mall, m, sizeof(mall));
    } else {
        for (uint32_t g = 0; g < sg->ng; g++) {
            coord_sa_t *s = &sg->g[g];

            if (s->dropped || s->why[0])
                continue;
            const sfl_sa_culprit_t *cul;
            uint32_t nc = 0;

            memset(mean, 0, dim * sizeof(double));
            if (sa_sum(j, s, mean, &wsum, m) < 0) {
                snprintf(s->why, sizeof(s->why), "unmasking: %s", sfl_last_error());
                continue;
            }
            if (sfl_sa_server_culprits(s->srv, &cul, &nc) == 0 && nc > 0) {
                snprintf(s->why, sizeof(s->why), "its server named a culprit (agent %llu: %s)",
                         (unsigned long long)cul[0].id, sfl_sa_blame_name(cul[0].why));
                continue;
            }
            for (size_t i = 0; i < dim; i++)
                acc[i] += mean[i] * wsum;
            for (uint32_t k = 0; k < SFL_SA_METRICS; k++)
                mall[k] += m[k];
            wall += wsum;
            inputs += s->n3;
            done++;
        }
        if (done == 0 || inputs < j->rnd.cfg.min_quorum || !(wall > 0)) {
            rc = sfl__fail(SFL_EEMPTY, "secure aggregation: %u of %u groups completed with %u "
                           "inputs (min_quorum %u)", done, sg->ng, inputs,
                           j->rnd.cfg.min_quorum);
            goto out;
        }
        for (size_t i = 0; i < dim; i++)
            mean[i] = acc[i] / wall;
    }
    sa_metrics(&j->work_metrics, mall);
    for (size_t i = 0; i < dim; i++)
        mean[i] += mj->global[i];
    if ((rc = sfl_spvec_new((uint32_t)dim, 0, &upd)) < 0 ||
        (rc = sfl_spvec_from_dense(upd, mean)) < 0 ||
        (rc = coord_model_add(mj, 0, &upd, 1.0)) < 0)
        goto out;
    rc = coord_model_end(mj);
out:
    sfl_spvec_free(upd);
    sfl__free(acc);
    sfl__free(mean);
    return rc;
}

int coord_saround_stats(coord_job_t *j, coord_sa_t *s, double *m, uint32_t *agents)
{
    uint32_t d = j->spec.dimension, len = (uint32_t)SFL_MOMENTS_LEN(d), count = 0;
    uint32_t *sum = sfl__calloc((size_t)len + SFL_SA_EXTRA_WORDS, sizeof(uint32_t));
    double *mean = sfl__calloc(len, sizeof(double)), wsum, wpub = 0;
    double b = s->clip;
    sfl_sa_quant_t qz;
    int rc;

    *agents = 0;
    s->unattributable = 0;
    if (sum == NULL || mean == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the secure sum");
        goto out;
    }
    if (s->k != len) {
        rc = sfl__fail(SFL_EINVAL, "statistics: a support of %u slots, the moments have %u",
                       s->k, len);
        goto out;
    }
    if ((rc = sfl_sa_server_finish(s->srv, sum, &count)) < 0 ||
        (rc = sfl_sa_quant_init(&qz, b * b, s->wmax, s->n)) < 0)
        goto out;
    if (s->w3 == NULL || count != s->n3) {
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: a sum of %u inputs, U3 has %u", count,
                       s->n3);
        goto out;
    }
    /* out of bounds or a broken canary: some member's input, hidden by the
     * masks, as for a training round */
    if ((rc = sfl_sa_server_mean(&qz, sum, s->support, s->k, count, s->w3, len, mean,
                                 &wsum)) < 0) {
        s->unattributable = rc == SFL_ERANGE || rc == SFL_EBADSIG;
        goto out;
    }
    /* the plain sum from the weighted mean: times the sum of U3's public
     * weights (their declared rows, uncapped: coord_saround_prepare) */
    for (uint32_t i = 0; i < count; i++)
        wpub += s->w3[i];
    if ((rc = sfl_sa_moments_decode(mean, d, wpub, b, m)) < 0)
        goto out;
    /* a feature's sum of squares the rounding took below 0 (a feature
     * that is 0 everywhere, within sfl_sa_moments_error of it) is 0 */
    for (uint32_t i = 0; i < d; i++)
        if (m[1 + (size_t)d + i] < 0)
            m[1 + (size_t)d + i] = 0;
    *agents = count;
out:
    sfl__free(mean);
    sfl__free(sum);
    return rc;
}

coord_sa_t *coord_sa_of(coord_job_t *j, uint64_t agent)
{
    if (j->shape == &coord_shape_secagg) {
        const coord_sagrp_t *sg = &j->kst.sg;
        const coord_member_t *mb = coord_round_member(&j->rnd, agent);

        if (sg->ng == 0)
            return (coord_sa_t *)&sg->idle; /* no attempt open: nothing is */
        if (mb == NULL || sg->gof == NULL)
            return &sg->g[0]; /* not selected: its server refuses it */
        return &sg->g[sg->gof[mb - j->rnd.members]];
    }
    if (j->shape == &coord_shape_statistics && j->model.spec.secagg)
        return &j->kst.stats.sa;
    return NULL;
}

int coord_saround_settle(coord_job_t *j, coord_sa_t *s, char *sus, size_t cap, uint32_t *n3)
{
    *n3 = s->n3; /* for the log after the server closes */
    if (s->u3 == NULL)
        return 0;
    if (j->work_rc == 0) {
        coord_suspect_clear(j, s->u3, s->n3);
        return 0;
    }
    if (!s->unattributable)
        return 0;
    if (coord_suspect_blame(j, s->u3, s->n3) < 0)
        coord_log(COORD_LOG_ERROR, "suspects_failed", "job=%llu error=\"no memory\"",
                  (unsigned long long)j->id);
    coord_suspect_text(j, s->u3, s->n3, sus, cap);
    return 1;
}

/* ---- the secure aggregation round kind (shape.h) ---- */

static void sa_free(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;

    for (uint32_t g = 0; g < sg->ng; g++)
        coord_saround_free(&sg->g[g]);
    sfl__free(sg->g);
    sfl__free(sg->gof);
    memset(sg, 0, sizeof(*sg));
}

static void sa_close(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;

    for (uint32_t g = 0; g < sg->ng; g++)
        sa_report(j, &sg->g[g]);
    sa_free(j);
}

/* Group g of the open attempt is out of it at stage (1..5; a stage below
 * its threshold, a culprit named): its members leave the round machine's phases, its
 * culprits are quarantined, its server freed. Its members' inputs are not
 * counted. */
static void sg_drop(coord_job_t *j, uint32_t g, uint32_t stage, const char *why)
{
    coord_sa_t *s = &j->kst.sg.g[g];
    char q[300];

    if (s->dropped)
        return;
    coord_log(COORD_LOG_WARN, "secagg_group_dropped",
              "job=%llu round=%llu attempt=%u group=%u members=%u stage=%u reason=%s",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt, g,
              s->n, stage, coord_log_quote(why, q, sizeof(q)));
    for (uint32_t i = 0; i < s->n; i++)
        coord_round_drop(&j->rnd, s->members[i].agent_id);
    coord_saround_close(j, s);
    s->dropped = 1;
    coord_round_recheck(&j->rnd, coord_now_ms(j->co));
}

/* A grouped session whose server named a culprit is dropped. */
static void sa_culprit_drop(coord_job_t *j, coord_sa_t *s)
{
    coord_sagrp_t *sg = &j->kst.sg;

    if (j->shape != &coord_shape_secagg || !sg->grouped || s < sg->g || s >= sg->g + sg->ng ||
        s->blamed == 0)
        return;
    sg_drop(j, (uint32_t)(s - sg->g), j->rnd.phase + 1, "its server named a culprit");
}

int coord_sa_group(const uint64_t *keys, uint32_t n, uint32_t min, uint32_t *gof, uint32_t *ng)
{
    uint32_t *size = NULL, *to = NULL, *num = NULL, k = 0, small = 0, merged = UINT32_MAX;
    uint32_t big = UINT32_MAX;
    int rc = 0;

    *ng = 0;
    if (n == 0)
        return 0;
    if ((size = sfl__calloc(n, sizeof(*size))) == NULL ||
        (to = sfl__calloc(n, sizeof(*to))) == NULL ||
        (num = sfl__calloc(n, sizeof(*num))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the groups");
        goto out;
    }
    /* the connections' groups, numbered by their first (smallest) member:
     * gof[i] the first member of i's group */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t f = i;

        for (uint32_t p = 0; p < i; p++)
            if (keys[p] == keys[i]) {
                f = gof[p];
                break;
            }
        gof[i] = f;
        size[f]++;
    }
    /* to[f]: the group f ends in (by its first member) */
    for (uint32_t f = 0; f < n; f++) {
        to[f] = f;
        if (size[f] == 0)
            continue;
        if (n < min || size[f] < min) {
            small += size[f];
            merged = merged == UINT32_MAX ? f : merged; /* the small ones' first */
        } else if (big == UINT32_MAX || size[f] < size[big])
            big = f; /* the smallest of at least min; ties: the first */
    }
    if (merged != UINT32_MAX) {
        /* every small group into one; still small (and a big one exists):
         * into the smallest big one */
        uint32_t into = small < min && big != UINT32_MAX ? big : merged;

        for (uint32_t f = 0; f < n; f++)
            if (size[f] > 0 && (n < min || size[f] < min))
                to[f] = into;
    }
    /* numbered in the order of their smallest members */
    for (uint32_t f = 0; f < n; f++)
        num[f] = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t r = to[gof[i]];

        if (num[r] == UINT32_MAX)
            num[r] = k++;
        gof[i] = num[r];
    }
    *ng = k;
out:
    sfl__free(num);
    sfl__free(to);
    sfl__free(size);
    return rc;
}

/* The smallest cohort a mode-2 attempt of j can run with: the job's quorum,
 * and at least its fixed threshold (the default threshold 2n/3 + 1 follows
 * n and satisfies the agents' floor t > (n + n/3) / 2 at every n). */
static uint32_t sa_min_cohort(const coord_job_t *j)
{
    uint32_t m = j->model.rcfg.min_quorum;

    return j->model.spec.sa_threshold > m ? j->model.spec.sa_threshold : m;
}

/* A mode-2 job that suspects some of the n candidates ids (ascending): the
 * attempt draws from the least suspect only (coord_suspect_keep,
 * coord_suspect_pick), *n shrinks to them; logged with whom it left out.
 * 0 or SFL_ENOMEM. */
int coord_saround_draw(coord_job_t *j, uint64_t *ids, uint32_t *n)
{
    uint32_t *counts = NULL, keep, out = 0;
    uint64_t *kept = NULL, *left = NULL;
    char text[SFL_MSG_TEXT_LEN];
    int rc = 0;

    if (j->nsus == 0 || *n == 0)
        return 0;
    if ((counts = sfl__mallocarray(*n, sizeof(*counts))) == NULL ||
        (kept = sfl__mallocarray(*n, sizeof(*kept))) == NULL ||
        (left = sfl__mallocarray(*n, sizeof(*left))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the selection");
        goto out;
    }
    for (uint32_t i = 0; i < *n; i++)
        counts[i] = coord_suspicion(j, ids[i]);
    keep = coord_suspect_keep(counts, *n, sa_min_cohort(j));
    if (keep == *n)
        goto out;
    if ((rc = coord_suspect_pick(j->spec.seed, j->rnd.round, j->rnd.attempt, ids, counts, *n,
                                 keep, kept)) < 0)
        goto out;
    for (uint32_t i = 0, k = 0; i < *n; i++) {
        if (k < keep && kept[k] == ids[i])
            k++;
        else
            left[out++] = ids[i];
    }
    coord_suspect_text(j, left, out, text, sizeof(text));
    coord_log(COORD_LOG_INFO, "suspects_left_out",
              "job=%llu round=%llu attempt=%u candidates=%u drawn_from=%u left_out=\"%s\"",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->rnd.attempt,
              *n, keep, text);
    memcpy(ids, kept, keep * sizeof(*ids));
    *n = keep;
out:
    sfl__free(left);
    sfl__free(kept);
    sfl__free(counts);
    return rc;
}

/* The members' inputs are masked: the sum's one update folds into an
 * aggregator of one slot. The sessions: one for the cohort, or one per
 * front-end group (coord_sa_group on the connections the members came
 * through; a relayed agent's is its front-end's), each with its own
 * threshold and graph; the machine's phases then need the smallest
 * group's threshold, each group its own (sa_sync drops a group below it). */
static int sa_open(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;
    coord_round_t *r = &j->rnd;
    uint32_t n = r->nmembers, tmin = UINT32_MAX;
    uint64_t *keys = NULL, *ids = NULL;
    char sizes[SFL_MSG_TEXT_LEN];
    size_t o = 0;
    int rc = 0;

    sa_close(j);
    sg->grouped = coord_job_sa_grouped(&j->model.spec);
    if ((sg->gof = sfl__calloc(n ? n : 1, sizeof(*sg->gof))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the groups");
    if (!sg->grouped) {
        if ((sg->g = sfl__calloc(1, sizeof(*sg->g))) == NULL)
            return sfl__fail(SFL_ENOMEM, "no memory for the session");
        sg->ng = 1;
        rc = coord_saround_prepare(j, &sg->g[0], 0);
        return rc < 0 ? rc : coord_model_begin(&j->model, 1);
    }
    if ((keys = sfl__calloc(n ? n : 1, sizeof(*keys))) == NULL ||
        (ids = sfl__calloc(n ? n : 1, sizeof(*ids))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the groups");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        const coord_agent_t *a = coord_agent_find(j->co, r->members[i].agent);

        keys[i] = a != NULL && a->conn != NULL && a->conn->fe != NULL
                      ? (uint64_t)(uintptr_t)a->conn->fe
                      : 0;
    }
    if ((rc = coord_sa_group(keys, n, coord_job_sa_min_group(&j->model.spec), sg->gof,
                             &sg->ng)) < 0)
        goto out;
    if ((sg->g = sfl__calloc(sg->ng ? sg->ng : 1, sizeof(*sg->g))) == NULL) {
        sg->ng = 0;
        rc = sfl__fail(SFL_ENOMEM, "no memory for the sessions");
        goto out;
    }
    sizes[0] = '\0';
    for (uint32_t g = 0; g < sg->ng; g++) {
        uint32_t m = 0;
        int w;

        for (uint32_t i = 0; i < n; i++)
            if (sg->gof[i] == g)
                ids[m++] = r->members[i].agent;
        if ((rc = coord_saround_prepare_ids(j, &sg->g[g], 0, ids, m)) < 0)
            goto out;
        tmin = sg->g[g].t < tmin ? sg->g[g].t : tmin;
        w = snprintf(sizes + o, sizeof(sizes) - o, "%s%u", g ? "," : "", m);
        if (w > 0 && o + (size_t)w < sizeof(sizes))
            o += (size_t)w;
    }
    for (uint32_t p = 0; p < 5; p++)
        r->cfg.phases[p].quorum = tmin == UINT32_MAX ? 1 : tmin;
    coord_log(COORD_LOG_INFO, "secagg_groups",
              "job=%llu round=%llu attempt=%u groups=%u sizes=%s min_group=%u",
              (unsigned long long)j->id, (unsigned long long)r->round, j->wire_attempt,
              sg->ng, sizes, coord_job_sa_min_group(&j->model.spec));
    rc = coord_model_begin(&j->model, 1);
out:
    sfl__free(ids);
    sfl__free(keys);
    return rc;
}

static uint32_t sa_ntasks(const coord_job_t *j)
{
    return j->kst.sg.ng ? j->kst.sg.ng : 1;
}

static uint32_t sa_task_of(const coord_job_t *j, uint64_t agent)
{
    const coord_member_t *mb = coord_round_member(&j->rnd, agent);

    return mb != NULL && j->kst.sg.gof != NULL ? j->kst.sg.gof[mb - j->rnd.members] : 0;
}

/* Task g carries group g's SecAggRound (its members only: signed, so the
 * agents' secagg_min_cohort holds for the group). */
static int sa_task(const coord_job_t *j, sfl_task_t *t, sfl_msg_sa_round_t *sa, uint32_t g)
{
    coord_saround_task(j, &j->kst.sg.g[g], sa);
    t->update_mode = SFL_UPDATE_MODE_SECURE_AGG;
    t->secagg = sa;
    return coord_shape_task_global(j, t);
}

static int sa_start(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;
    int rc = 0;

    for (uint32_t g = 0; rc == 0 && g < sg->ng; g++)
        rc = coord_saround_start(j, &sg->g[g]);
    return rc;
}

/* Every session's next stage; a group whose server cannot end a stage (its
 * count below its threshold) is dropped, which may end the phase: then
 * the groups go on to the next one. */
static void sa_sync(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;
    uint32_t phase;

    do {
        phase = j->rnd.phase;
        for (uint32_t g = 0; g < sg->ng; g++) {
            coord_sa_t *s = &sg->g[g];

            if (s->dropped || s->srv == NULL)
                continue;
            if (coord_saround_sync(j, s) < 0 && sg->grouped) {
                char why[SFL_MSG_TEXT_LEN];

                snprintf(why, sizeof(why), "below its threshold %u: %s", s->t,
                         sfl_last_error());
                sg_drop(j, g, s->sent, why); /* the stage that could not end */
            } else if (sg->grouped) {
                sa_report(j, s); /* culprits the stage's end found */
                sa_culprit_drop(j, s);
            }
        }
    } while (sg->grouped && j->rnd.state == COORD_ROUND_TRAINING && j->rnd.phase != phase);
}

/* One session: U3's rows, before the commit's. Groups: one with fewer
 * unmasking answers than its threshold cannot be unmasked and is out; the
 * rows of the groups the fold adds wait for it (sa_commit). */
static void sa_record(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;

    for (uint32_t g = 0; g < sg->ng; g++) {
        coord_sa_t *s = &sg->g[g];
        uint32_t answered = 0;

        if (s->dropped)
            continue;
        if (!sg->grouped) {
            coord_saround_record(j, s);
            continue;
        }
        for (uint32_t i = 0; i < s->n; i++) {
            const coord_member_t *mb = coord_round_member(&j->rnd, s->members[i].agent_id);

            answered += mb != NULL && mb->state == COORD_MEMBER_ACCEPTED;
        }
        if (answered < s->t)
            snprintf(s->why, sizeof(s->why), "unmasking: %u answers, threshold %u", answered,
                     s->t);
    }
}

/* Groups: the rows of the U3 of each group the fold added, then the
 * commit (its records flushed before it). */
static int sa_commit(coord_job_t *j)
{
    coord_sagrp_t *sg = &j->kst.sg;

    for (uint32_t g = 0; sg->grouped && g < sg->ng; g++) {
        coord_sa_t *s = &sg->g[g];

        if (s->dropped)
            continue;
        if (!s->why[0]) {
            coord_saround_record(j, s);
            continue;
        }
        /* left out at the aggregation: its last answers are not the
         * round's (round_committed's accepted=, JobStatus) */
        for (uint32_t i = 0; i < s->n; i++) {
            const coord_member_t *mb = coord_round_member(&j->rnd, s->members[i].agent_id);

            if (mb != NULL && mb->state == COORD_MEMBER_ACCEPTED && j->rnd.accepted > 0)
                j->rnd.accepted--;
        }
    }
    return coord_shape_commit_model(j);
}

static int sa_end(coord_job_t *j)
{
    return sa_fold(j, &j->kst.sg);
}

static int sa_fold_round(coord_job_t *j)
{
    return coord_shape_fold_model(j, sa_end);
}

/* One session: coord_saround_settle's. Groups: those the aggregation left
 * out are logged (one whose sum failed with nobody to name makes its U3
 * more suspect), the others settled as one session each. */
static int sa_settle(coord_job_t *j, char *sus, size_t cap, uint32_t *n3)
{
    coord_sagrp_t *sg = &j->kst.sg;
    uint32_t k;
    int un = 0;

    *n3 = 0;
    if (!sg->grouped)
        return sg->ng ? coord_saround_settle(j, &sg->g[0], sus, cap, n3) : 0;
    for (uint32_t g = 0; g < sg->ng; g++) {
        coord_sa_t *s = &sg->g[g];
        char q[300];

        if (s->dropped)
            continue;
        if (s->why[0] == '\0') {
            un |= coord_saround_settle(j, s, sus, cap, &k);
            *n3 += k;
            continue;
        }
        coord_log(COORD_LOG_WARN, "secagg_group_dropped",
                  "job=%llu round=%llu attempt=%u group=%u members=%u stage=aggregation "
                  "reason=%s",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
                  g, s->n, coord_log_quote(s->why, q, sizeof(q)));
        if (s->unattributable && s->u3 != NULL) {
            if (coord_suspect_blame(j, s->u3, s->n3) < 0)
                coord_log(COORD_LOG_ERROR, "suspects_failed", "job=%llu error=\"no memory\"",
                          (unsigned long long)j->id);
            if (j->work_rc != 0) {
                coord_suspect_text(j, s->u3, s->n3, sus, cap);
                un = 1;
            }
        }
    }
    return un;
}

/* A sum that failed with nobody to name: the attempt is excused only while
 * the retry can leave out a different subset of the candidates, and at
 * most as many times a round as there are candidates (docs/security.md). */
static void sa_failed(coord_job_t *j, int unattributable, const char *sus, uint32_t n3)
{
    uint32_t nc;
    int excused;

    coord_shape_failed_model(j, unattributable, sus, n3);
    if (!unattributable)
        return;
    nc = coord_candidates(j, NULL, 0);
    excused = coord_round_excuse_unattributed(&j->rnd, nc > sa_min_cohort(j) ? nc : 0);
    coord_log(COORD_LOG_WARN, "round_unattributable",
              "job=%llu round=%llu attempt=%u u3=%u candidates=%u excused=%s "
              "unattributed=%u suspects=\"%s\"",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt, n3,
              nc, excused ? "yes" : "no", j->rnd.unattributed, sus);
}

const coord_shape_t coord_shape_secagg = {
    .name = "secagg",
    .free = sa_free,
    .plan = coord_shape_plan_train,
    .load = coord_shape_nop_load,
    .model = coord_shape_nop_model,
    .ineligible = coord_shape_rows,
    .cohort = coord_shape_nop_cohort,
    .admit = coord_shape_nop_admit,
    .draw = coord_saround_draw,
    .open = sa_open,
    .ntasks = sa_ntasks,
    .task_of = sa_task_of,
    .task = sa_task,
    .start = sa_start,
    .sync = sa_sync,
    .resend = coord_shape_nop_resend,
    .limits = coord_shape_limits_model,
    .check = coord_shape_check_model,
    .add = coord_shape_add_model,
    .record = sa_record,
    .fold = sa_fold_round,
    .commit = sa_commit,
    .settle = sa_settle,
    .close = sa_close,
    .committed = coord_shape_committed_model,
    .failed = sa_failed,
    .status = coord_shape_nop_status,
};

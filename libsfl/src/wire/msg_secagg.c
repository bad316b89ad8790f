/* Secure aggregation's messages (update mode 2): the round a task carries,
 * the stages and the answers.
 * (msg_int.h: the steps they go through.) */
#include "msg_int.h"

#include <math.h>
#include <string.h>

/* ---- secure aggregation (update mode 2) ----------------------------------------- */

/* Entries a repeated field may hold: the cohort's bound on pack, the
 * receiver's max_items on unpack. */
static size_t sa_cap(const chk_t *c)
{
    return c->lim != NULL ? c->lim->max_items : 65535;
}

static int check_sa_ids(const chk_t *c, uint64_t job, uint64_t round)
{
    /* round 0: a standardize job's statistics round (docs/protocol.md) */
    (void)round;
    return sfl__msg_check_id(c, "job_id", job);
}

static int check_sa_count(const chk_t *c, const char *what, size_t n, const void *a)
{
    if (n > sa_cap(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%zu %s exceed the limit of %zu", n, what, sa_cap(c));
    if (n > 0 && a == NULL)
        return sfl__msg_fail(c, SFL_EINVAL, "%zu %s but no array", n, what);
    return 0;
}

int sfl__msg_check_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r)
{
    int rc;

    if ((rc = check_sa_count(c, "secagg.members", r->nmembers, r->members)) < 0)
        return rc;
    if (r->nmembers == 0 || r->threshold > r->nmembers || 2 * (uint64_t)r->threshold <= r->nmembers)
        return sfl__msg_fail(c, c->bad, "secagg: threshold %u of %u members (need members / 2 < "
                             "threshold <= members)", r->threshold, r->nmembers);
    for (uint32_t i = 0; i < r->nmembers; i++)
        if (r->members[i].agent_id == 0 ||
            (i > 0 && r->members[i].agent_id <= r->members[i - 1].agent_id))
            return sfl__msg_fail(c, c->bad, "secagg.members: ids not strictly ascending and > 0 "
                                 "(entry %u)", i);
    if (r->support_size == 0 || r->top_k == 0)
        return sfl__msg_fail(c, c->bad, "secagg: support_size and top_k must be >= 1");
    if ((rc = sfl__msg_check_finite(c, "secagg.clip", r->clip)) < 0 ||
        (rc = sfl__msg_check_finite(c, "secagg.max_weight", r->max_weight)) < 0)
        return rc;
    if (!(r->clip > 0) || !(r->max_weight > 0))
        return sfl__msg_fail(c, c->bad, "secagg: clip and max_weight must be > 0");
    if (r->degree % 2 != 0)
        return sfl__msg_fail(c, c->bad, "secagg: degree %u (need 0 or even)", r->degree);
    for (uint32_t i = 0; i < r->nmembers; i++)
        if (!(isfinite(r->members[i].weight) && r->members[i].weight > 0 &&
              r->members[i].weight <= r->max_weight))
            return sfl__msg_fail(c, c->bad, "secagg.members: entry %u's weight %g not in (0, "
                                 "max_weight %g]", i, r->members[i].weight, r->max_weight);
    return 0;
}

/* Protobuf list entries and pointers to them, owned by w (freed by
 * sfl__msg_pack_msg): slot picks w->more[slot], w->more[slot + 1]. */
static void *sa_list(const chk_t *c, wire_t *w, int slot, size_t n, size_t size, void ***ptrs)
{
    char *blk;

    *ptrs = NULL;
    if (n == 0)
        return NULL;
    blk = sfl__mallocarray(n, size);
    *ptrs = sfl__mallocarray(n, sizeof(void *));
    w->more[slot] = blk;
    w->more[slot + 1] = *ptrs;
    if (blk == NULL || *ptrs == NULL) {
        (void)sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu entries", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        (*ptrs)[i] = blk + i * size;
    return blk;
}

static void put_sa_keys(const sfl_msg_sa_keys_t *k, Sfl__V1__SecAggKeys *o)
{
    sfl__v1__sec_agg_keys__init(o);
    o->agent_id = k->agent_id;
    o->c_pk = bin(k->c_pk, SFL_MSG_KEY_BYTES);
    o->s_pk = bin(k->s_pk, SFL_MSG_KEY_BYTES);
    o->signature = bin(k->sig, SFL_MSG_SIG_BYTES);
}

static int get_sa_keys(const chk_t *c, const Sfl__V1__SecAggKeys *p, sfl_msg_sa_keys_t *k)
{
    int rc;

    if (p == NULL)
        return sfl__msg_fail(c, c->bad, "secagg keys missing");
    k->agent_id = p->agent_id;
    if ((rc = sfl__msg_get_fixed(c, "keys.c_pk", &p->c_pk, k->c_pk, SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "keys.s_pk", &p->s_pk, k->s_pk, SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "keys.signature", &p->signature, k->sig, SFL_MSG_SIG_BYTES)) <
            0)
        return rc;
    return sfl__msg_check_id(c, "keys.agent_id", k->agent_id);
}

static int put_sa_boxes(const chk_t *c, wire_t *w, int slot, const sfl_msg_sa_box_t *b,
                        uint32_t n, size_t *count, Sfl__V1__SecAggBox ***field)
{
    void **ptrs;
    Sfl__V1__SecAggBox *e = sa_list(c, w, slot, n, sizeof(*e), &ptrs);

    if (n > 0 && e == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        sfl__v1__sec_agg_box__init(&e[i]);
        e[i].from = b[i].from;
        e[i].to = b[i].to;
        e[i].nonce = bin(b[i].nonce, SFL_MSG_SA_NONCE);
        e[i].ciphertext = bin(b[i].ct, SFL_MSG_SA_CT);
    }
    *count = n;
    *field = (Sfl__V1__SecAggBox **)ptrs;
    return 0;
}

static int check_sa_boxes(const chk_t *c, const sfl_msg_sa_box_t *b, uint32_t n)
{
    int rc = check_sa_count(c, "boxes", n, b);

    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (b[i].from == 0 || b[i].to == 0 || b[i].from == b[i].to)
            rc = sfl__msg_fail(c, c->bad, "box %u: from %llu to %llu", i,
                               (unsigned long long)b[i].from, (unsigned long long)b[i].to);
    return rc;
}

static sfl_msg_sa_box_t *get_sa_boxes(const chk_t *c, Sfl__V1__SecAggBox **p, size_t n,
                                      int *rc)
{
    sfl_msg_sa_box_t *b;

    *rc = 0;
    if (n == 0)
        return NULL;
    if (n > sa_cap(c)) {
        *rc = sfl__msg_fail(c, SFL_ELIMIT, "%zu boxes exceed the limit of %zu", n, sa_cap(c));
        return NULL;
    }
    if ((b = sfl__calloc(n, sizeof(*b))) == NULL) {
        *rc = sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu boxes", n);
        return NULL;
    }
    for (size_t i = 0; i < n && *rc == 0; i++) {
        b[i].from = p[i]->from;
        b[i].to = p[i]->to;
        if ((*rc = sfl__msg_get_fixed(c, "box.nonce", &p[i]->nonce, b[i].nonce,
                                      SFL_MSG_SA_NONCE)) == 0)
            *rc =
                sfl__msg_get_fixed(c, "box.ciphertext", &p[i]->ciphertext, b[i].ct, SFL_MSG_SA_CT);
    }
    if (*rc < 0) {
        sfl__free(b);
        return NULL;
    }
    return b;
}

/* Task.secagg into w->sa_round (lists in w->more[8], [9]). */
int sfl__msg_put_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r, wire_t *w)
{
    Sfl__V1__SecAggRound *o = &w->sa_round;
    void **ptrs;
    Sfl__V1__SecAggMember *e = sa_list(c, w, 8, r->nmembers, sizeof(*e), &ptrs);

    if (r->nmembers > 0 && e == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < r->nmembers; i++) {
        sfl__v1__sec_agg_member__init(&e[i]);
        e[i].agent_id = r->members[i].agent_id;
        e[i].identity_key = bin(r->members[i].pk, SFL_MSG_KEY_BYTES);
        e[i].weight = r->members[i].weight;
    }
    o->threshold = r->threshold;
    o->n_members = r->nmembers;
    o->members = (Sfl__V1__SecAggMember **)ptrs;
    o->support_size = r->support_size;
    o->top_k = r->top_k;
    o->clip = r->clip;
    o->max_weight = r->max_weight;
    o->degree = r->degree;
    return 0;
}

void sfl__msg_sa_round_free(sfl_msg_sa_round_t *r)
{
    if (r == NULL)
        return;
    sfl__free(r->members);
    sfl__free(r);
}

int sfl__msg_get_sa_round(const chk_t *c, const Sfl__V1__SecAggRound *p, sfl_msg_sa_round_t **out)
{
    sfl_msg_sa_round_t *r;
    int rc = 0;

    *out = NULL;
    if (p->n_members > sa_cap(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%zu secagg members exceed the limit of %zu",
                             p->n_members, sa_cap(c));
    if ((r = sfl__calloc(1, sizeof(*r))) == NULL ||
        (p->n_members > 0 &&
         (r->members = sfl__calloc(p->n_members, sizeof(*r->members))) == NULL)) {
        sfl__msg_sa_round_free(r);
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the secagg round");
    }
    r->threshold = p->threshold;
    r->nmembers = (uint32_t)p->n_members;
    r->support_size = p->support_size;
    r->top_k = p->top_k;
    r->clip = p->clip;
    r->max_weight = p->max_weight;
    r->degree = p->degree;
    for (size_t i = 0; i < p->n_members && rc == 0; i++) {
        r->members[i].agent_id = p->members[i]->agent_id;
        r->members[i].weight = p->members[i]->weight;
        rc = sfl__msg_get_fixed(c, "secagg.members.identity_key", &p->members[i]->identity_key,
                                r->members[i].pk, SFL_MSG_KEY_BYTES);
    }
    if (rc == 0)
        rc = sfl__msg_check_sa_round(c, r);
    if (rc < 0) {
        sfl__msg_sa_round_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* TaskOrWait.secagg */
static int check_sa_stage(const chk_t *c, const void *p)
{
    const sfl_msg_sa_stage_t *m = p;
    uint32_t want[4] = {0}; /* keys, clients, boxes allowed, sigs */
    int rc;

    if ((rc = check_sa_ids(c, m->job_id, m->round)) < 0 ||
        (rc = check_sa_count(c, "keys", m->nkeys, m->keys)) < 0 ||
        (rc = check_sa_count(c, "clients", m->nclients, m->clients)) < 0 ||
        (rc = check_sa_boxes(c, m->boxes, m->nboxes)) < 0 ||
        (rc = check_sa_count(c, "signatures", m->nsigs, m->sigs)) < 0)
        return rc;
    switch (m->stage) {
    case 2: want[0] = 1; break;
    case 3: want[1] = want[2] = 1; break;
    case 4: want[1] = 1; break;
    case 5: want[3] = 1; break;
    default:
        return sfl__msg_fail(c, c->bad, "secagg stage %u (2 to 5)", m->stage);
    }
    if ((m->nkeys > 0) != want[0] || (m->nclients > 0) != want[1] ||
        (m->nboxes > 0 && !want[2]) || (m->nsigs > 0) != want[3])
        return sfl__msg_fail(c, c->bad, "secagg stage %u with the fields of another stage",
                             m->stage);
    for (uint32_t i = 0; i < m->nkeys; i++)
        if ((rc = sfl__msg_check_id(c, "keys.agent_id", m->keys[i].agent_id)) < 0)
            return rc;
    for (uint32_t i = 0; i < m->nclients; i++)
        if (m->clients[i] == 0 || (i > 0 && m->clients[i] <= m->clients[i - 1]))
            return sfl__msg_fail(c, c->bad,
                                 "secagg clients not strictly ascending and > 0 (entry %u)", i);
    for (uint32_t i = 0; i < m->nsigs; i++)
        if ((rc = sfl__msg_check_id(c, "signatures.agent_id", m->sigs[i].agent_id)) < 0)
            return rc;
    return 0;
}

static int put_sa_stage(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_msg_sa_stage_t *m = p;
    Sfl__V1__SecAggStage *o = &w->sa_stage;
    void **kp, **sp;
    Sfl__V1__SecAggKeys *ke = sa_list(c, w, 0, m->nkeys, sizeof(*ke), &kp);
    Sfl__V1__SecAggSignature *se = sa_list(c, w, 4, m->nsigs, sizeof(*se), &sp);
    int rc;

    if ((m->nkeys > 0 && ke == NULL) || (m->nsigs > 0 && se == NULL))
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < m->nkeys; i++)
        put_sa_keys(&m->keys[i], &ke[i]);
    for (uint32_t i = 0; i < m->nsigs; i++) {
        sfl__v1__sec_agg_signature__init(&se[i]);
        se[i].agent_id = m->sigs[i].agent_id;
        se[i].signature = bin(m->sigs[i].sig, SFL_MSG_SIG_BYTES);
    }
    if ((rc = put_sa_boxes(c, w, 2, m->boxes, m->nboxes, &o->n_boxes, &o->boxes)) < 0)
        return rc;
    o->job_id = m->job_id;
    o->round = m->round;
    o->attempt = m->attempt;
    o->stage = m->stage;
    o->n_keys = m->nkeys;
    o->keys = (Sfl__V1__SecAggKeys **)kp;
    o->n_clients = m->nclients;
    o->clients = (uint64_t *)(uintptr_t)m->clients;
    o->n_signatures = m->nsigs;
    o->signatures = (Sfl__V1__SecAggSignature **)sp;
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_SECAGG;
    w->pb.task_or_wait.secagg = o;
    return 0;
}

static const msg_type_t sa_stage_type = {"secagg stage", &sfl__v1__task_or_wait__descriptor,
    check_sa_stage, put_sa_stage, NULL, 0, NULL, 0, NULL};

int sfl_msg_sa_stage_pack(const sfl_msg_sa_stage_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&sa_stage_type, m, NULL, out, len);
}

void sfl_msg_sa_stage_clear(sfl_msg_sa_stage_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->keys);
    sfl__free(m->clients);
    sfl__free(m->boxes);
    sfl__free(m->sigs);
    memset(m, 0, sizeof(*m));
}

int sfl__msg_get_sa_stage(const chk_t *c, const Sfl__V1__SecAggStage *p, sfl_msg_sa_stage_t *m)
{
    int rc = 0;

    memset(m, 0, sizeof(*m));
    m->job_id = p->job_id;
    m->round = p->round;
    m->attempt = p->attempt;
    m->stage = p->stage;
    if (p->n_keys > sa_cap(c) || p->n_clients > sa_cap(c) || p->n_signatures > sa_cap(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "a secagg list exceeds the limit of %zu", sa_cap(c));
    if ((p->n_keys > 0 && (m->keys = sfl__calloc(p->n_keys, sizeof(*m->keys))) == NULL) ||
        (p->n_clients > 0 &&
         (m->clients = sfl__calloc(p->n_clients, sizeof(*m->clients))) == NULL) ||
        (p->n_signatures > 0 &&
         (m->sigs = sfl__calloc(p->n_signatures, sizeof(*m->sigs))) == NULL))
        rc = sfl__msg_fail(c, SFL_ENOMEM, "no memory for the secagg stage");
    for (size_t i = 0; rc == 0 && i < p->n_keys; i++)
        rc = get_sa_keys(c, p->keys[i], &m->keys[i]);
    m->nkeys = (uint32_t)p->n_keys;
    if (rc == 0 && p->n_clients > 0)
        memcpy(m->clients, p->clients, p->n_clients * sizeof(*m->clients));
    m->nclients = (uint32_t)p->n_clients;
    for (size_t i = 0; rc == 0 && i < p->n_signatures; i++) {
        m->sigs[i].agent_id = p->signatures[i]->agent_id;
        rc = sfl__msg_get_fixed(c, "signatures.signature", &p->signatures[i]->signature,
                                m->sigs[i].sig, SFL_MSG_SIG_BYTES);
    }
    m->nsigs = (uint32_t)p->n_signatures;
    if (rc == 0) {
        m->boxes = get_sa_boxes(c, p->boxes, p->n_boxes, &rc);
        m->nboxes = rc == 0 ? (uint32_t)p->n_boxes : 0;
    }
    if (rc == 0)
        rc = check_sa_stage(c, m);
    if (rc < 0)
        sfl_msg_sa_stage_clear(m);
    return rc;
}

/* SubmitSecAgg's request */
static int check_sa_answer(const chk_t *c, const void *p)
{
    const sfl_msg_sa_answer_t *m = p;
    int rc;

    if ((rc = check_sa_ids(c, m->job_id, m->round)) < 0 ||
        (rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = check_sa_boxes(c, m->boxes, m->nboxes)) < 0 ||
        (rc = check_sa_count(c, "reveals", m->nreveals, m->reveals)) < 0)
        return rc;
    if (m->stage < 1 || m->stage > 5)
        return sfl__msg_fail(c, c->bad, "secagg stage %u (1 to 5)", m->stage);
    if ((m->nboxes > 0 && m->stage != 2) || ((m->nmasked > 0) != (m->stage == 3)) ||
        ((m->nreveals > 0) != (m->stage == 5)))
        return sfl__msg_fail(
            c, c->bad, "secagg answer to stage %u with the fields of another stage", m->stage);
    if (m->stage == 1 && m->keys.agent_id != m->agent_id)
        return sfl__msg_fail(c, c->bad, "secagg keys of %llu sent by %llu",
                             (unsigned long long)m->keys.agent_id, (unsigned long long)m->agent_id);
    if (m->stage == 3 && (m->masked == NULL || m->nmasked < 2))
        return sfl__msg_fail(c, c->bad, "secagg masked input of %u words", m->nmasked);
    if ((m->ncommits > 0) != (m->stage == 2) || m->ncommits % 2 != 0 ||
        (m->ncommits > 0 && m->commits == NULL))
        return sfl__msg_fail(c, c->bad,
                             "secagg answer to stage %u with %u commitments (stage 2: an "
                             "even number, at least 2)",
                             m->stage, m->ncommits);
    if (m->ncommits > 2 * sa_cap(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%u commitments exceed the limit of %zu", m->ncommits,
                             2 * sa_cap(c));
    for (uint32_t i = 0; i < m->nreveals; i++)
        if (m->reveals[i].of == 0 || m->reveals[i].x == 0 || (m->reveals[i].self_mask & ~1))
            return sfl__msg_fail(c, c->bad, "secagg reveal %u: of %llu, x %u", i,
                                 (unsigned long long)m->reveals[i].of, m->reveals[i].x);
    return 0;
}

static int put_sa_answer(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_msg_sa_answer_t *m = p;
    Sfl__V1__SecAggAnswer *o = &w->pb.sa_answer;
    void **rp;
    Sfl__V1__SecAggReveal *re = sa_list(c, w, 4, m->nreveals, sizeof(*re), &rp);
    int rc;

    if (m->nreveals > 0 && re == NULL)
        return SFL_ENOMEM;
    o->job_id = m->job_id;
    o->round = m->round;
    o->attempt = m->attempt;
    o->agent_id = m->agent_id;
    o->stage = m->stage;
    if (m->stage == 1) {
        put_sa_keys(&m->keys, &w->sa_keys);
        o->keys = &w->sa_keys;
    }
    if (m->stage == 2)
        o->commitments = bin((const uint8_t *)m->commits, (size_t)m->ncommits * SFL_MSG_SA_POINT);
    if (m->stage >= 2 && m->stage <= 4)
        o->signature = bin(m->sig, SFL_MSG_SIG_BYTES);
    if ((rc = put_sa_boxes(c, w, 0, m->boxes, m->nboxes, &o->n_boxes, &o->boxes)) < 0)
        return rc;
    if (m->nmasked > 0) {
        if ((w->data = sfl__mallocarray(m->nmasked, 4)) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the masked input");
        for (uint32_t i = 0; i < m->nmasked; i++)
            for (int b = 0; b < 4; b++)
                w->data[4 * (size_t)i + b] = (uint8_t)(m->masked[i] >> (8 * b));
        o->masked = bin(w->data, 4 * (size_t)m->nmasked);
    }
    for (uint32_t i = 0; i < m->nreveals; i++) {
        sfl__v1__sec_agg_reveal__init(&re[i]);
        re[i].of = m->reveals[i].of;
        re[i].self_mask = m->reveals[i].self_mask;
        re[i].x = m->reveals[i].x;
        re[i].y = bin(m->reveals[i].y, SFL_MSG_SA_SHARE);
        re[i].dealer_signature = bin(m->reveals[i].sig, SFL_MSG_SIG_BYTES);
    }
    o->n_reveals = m->nreveals;
    o->reveals = (Sfl__V1__SecAggReveal **)rp;
    return 0;
}

void sfl_msg_sa_answer_free(sfl_msg_sa_answer_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->boxes);
    sfl__free(m->commits);
    sfl__free(m->masked);
    sfl__free(m->reveals);
    sfl__free(m);
}

static void free_sa_answer(void *m)
{
    sfl_msg_sa_answer_free(m);
}

/* A field of the answer that this stage has or must not have. */
static int get_sa_bytes(const chk_t *c, const char *field, const ProtobufCBinaryData *b,
                        int want, uint8_t *dst, size_t n)
{
    if (!want) {
        if (b->len != 0)
            return sfl__msg_fail(c, c->bad, "%s is not part of this stage", field);
        return 0;
    }
    return sfl__msg_get_fixed(c, field, b, dst, n);
}

static int get_sa_answer(const chk_t *c, void *pv, void *out)
{
    const Sfl__V1__SecAggAnswer *p = pv;
    sfl_msg_sa_answer_t *m = out;
    uint32_t st = p->stage;
    int rc;

    m->job_id = p->job_id;
    m->round = p->round;
    m->attempt = p->attempt;
    m->agent_id = p->agent_id;
    m->stage = st;
    if ((st == 1) != (p->keys != NULL))
        return sfl__msg_fail(c, c->bad, "secagg keys %s stage %u", st == 1 ? "missing at" : "at",
                             st);
    if (st == 1 && (rc = get_sa_keys(c, p->keys, &m->keys)) < 0)
        return rc;
    if ((rc = get_sa_bytes(c, "signature", &p->signature, st >= 2 && st <= 4, m->sig,
                           SFL_MSG_SIG_BYTES)) < 0)
        return rc;
    if (p->commitments.len > 0) {
        size_t n = p->commitments.len / SFL_MSG_SA_POINT;

        /* sized before anything is allocated: whole points, within the cap */
        if (p->commitments.len % SFL_MSG_SA_POINT != 0 || n > 2 * sa_cap(c))
            return sfl__msg_fail(c, p->commitments.len % SFL_MSG_SA_POINT ? c->bad : SFL_ELIMIT,
                                 "commitments of %zu bytes (whole %d-byte points, at most %zu)",
                                 p->commitments.len, SFL_MSG_SA_POINT, 2 * sa_cap(c));
        if ((m->commits = sfl__calloc(n, SFL_MSG_SA_POINT)) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the commitments");
        memcpy(m->commits, p->commitments.data, p->commitments.len);
        m->ncommits = (uint32_t)n;
    }
    m->boxes = get_sa_boxes(c, p->boxes, p->n_boxes, &rc);
    if (rc < 0)
        return rc;
    m->nboxes = (uint32_t)p->n_boxes;
    if (p->masked.len > 0) {
        size_t n = p->masked.len / 4;

        if (p->masked.len % 4 != 0 || n > (size_t)c->lim->max_dim + SFL_MSG_SA_EXTRA)
            return sfl__msg_fail(c, p->masked.len % 4 ? c->bad : SFL_ELIMIT,
                                 "masked input of %zu bytes (whole uint32 words, at most %u + %d)",
                                 p->masked.len, c->lim->max_dim, SFL_MSG_SA_EXTRA);
        if ((m->masked = sfl__mallocarray(n, sizeof(uint32_t))) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the masked input");
        for (size_t i = 0; i < n; i++)
            m->masked[i] = (uint32_t)p->masked.data[4 * i] |
                           (uint32_t)p->masked.data[4 * i + 1] << 8 |
                           (uint32_t)p->masked.data[4 * i + 2] << 16 |
                           (uint32_t)p->masked.data[4 * i + 3] << 24;
        m->nmasked = (uint32_t)n;
    }
    if (p->n_reveals > sa_cap(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%zu reveals exceed the limit of %zu", p->n_reveals,
                             sa_cap(c));
    if (p->n_reveals > 0 &&
        (m->reveals = sfl__calloc(p->n_reveals, sizeof(*m->reveals))) == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the reveals");
    for (size_t i = 0; i < p->n_reveals; i++) {
        const Sfl__V1__SecAggReveal *r = p->reveals[i];

        if (r->x > UINT16_MAX)
            return sfl__msg_fail(c, c->bad, "reveal %zu: x %u above 65535", i, r->x);
        m->reveals[i].of = r->of;
        m->reveals[i].self_mask = r->self_mask ? 1 : 0;
        m->reveals[i].x = (uint16_t)r->x;
        if ((rc = sfl__msg_get_fixed(c, "reveal.y", &r->y, m->reveals[i].y, SFL_MSG_SA_SHARE)) <
                0 ||
            (rc = sfl__msg_get_fixed(c, "reveal.dealer_signature", &r->dealer_signature,
                                     m->reveals[i].sig, SFL_MSG_SIG_BYTES)) < 0)
            return rc;
    }
    m->nreveals = (uint32_t)p->n_reveals;
    return check_sa_answer(c, m);
}

static const msg_type_t sa_answer_type = {"secagg answer", &sfl__v1__sec_agg_answer__descriptor,
    check_sa_answer, put_sa_answer, get_sa_answer, sizeof(sfl_msg_sa_answer_t),
    free_sa_answer, 0, NULL};

int sfl_msg_sa_answer_pack(const sfl_msg_sa_answer_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&sa_answer_type, m, NULL, out, len);
}

int sfl_msg_sa_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_msg_sa_answer_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&sa_answer_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

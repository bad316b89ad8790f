/* Secure aggregation's server (sfl/crypto/secagg.h): the coordinator's side
 * of a round, collecting each stage, blaming who broke it, and unmasking
 * the sum from the survivors' shares. */
#include "sfl/crypto/secagg.h"
#include "crypto/secagg_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/savec.h"

static int shares_verify(const uint8_t sid[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                         const sfl_sa_shares_t *m)
{
    uint8_t *msg;
    size_t len;
    int rc;

    if ((rc = sfl__sa_shares_msg(sid, m->id, (const uint8_t (*)[SFL_SA_POINT])m->commit,
                                 m->ncommit, &msg, &len)) < 0)
        return rc;
    rc = sfl_seal_verify_detached(pk, SFL__SA_CTX_SHARES, msg, len, m->sig);
    sfl__free(msg);
    return rc;
}

/* What the server keeps of member i. */
typedef struct sa_slot {
    int adv, shared, input, consist, unmasked;
    sfl_sa_adv_t a;
    uint8_t (*commit)[SFL_SA_POINT]; /* 2 tau: r_b's polynomial, then r_s's */
    sfl_sa_box_t *boxes;
    uint32_t nboxes;
    uint8_t sig4[SFL_SEAL_SIG_BYTES];
    sfl_sa_reveal_t *rev;  /* shares it released, of U2's members */
    uint32_t nrev;
} sa_slot_t;

struct sfl_sa_server {
    sfl_sa_round_t r;
    sfl_sa_member_t *members;
    sa_slot_t *slot;
    int stage;
    uint8_t rh[SFL_SA_HASH], sid[SFL_SA_HASH], u3h[SFL_SA_HASH];
    sfl_sa_adv_t *u1;
    uint32_t n1, n2, n3, n4;
    sfl__sa_graph_t g;
    uint32_t tau;             /* holders that rebuild a seed */
    uint64_t *u2, *u3;
    sfl_sa_consist_t *u4;
    uint32_t *sum;
    sfl_sa_culprit_t *culprit; /* n slots, nculprit used */
    uint32_t nculprit;
};

static const char *const blame_names[] = {
#define SFL_SA_BLAME_NAME(n, str) [SFL_SA_BLAME_##n] = str,
    SFL_SA_BLAME_MAP(SFL_SA_BLAME_NAME)
#undef SFL_SA_BLAME_NAME
};

const char *sfl_sa_blame_name(sfl_sa_blame_t why)
{
    if ((size_t)why >= sizeof(blame_names) / sizeof(blame_names[0]) || blame_names[why] == NULL)
        return "unknown";
    return blame_names[why];
}

/* Names member id (once, its first fault kept) and returns rc. */
static int blame(sfl_sa_server_t *s, uint64_t id, sfl_sa_blame_t why, int rc)
{
    for (uint32_t i = 0; i < s->nculprit; i++)
        if (s->culprit[i].id == id)
            return rc;
    if (sfl__sa_rank_of(s->members, s->r.n, id) >= 0 && s->nculprit < s->r.n)
        s->culprit[s->nculprit++] = (sfl_sa_culprit_t){.id = id, .why = why};
    return rc;
}

int sfl_sa_server_culprits(const sfl_sa_server_t *s, const sfl_sa_culprit_t **out, uint32_t *n)
{
    *out = s->culprit;
    *n = s->nculprit;
    return 0;
}

int sfl_sa_server_new(const sfl_sa_round_t *r, sfl_sa_server_t **out)
{
    sfl_sa_server_t *s;
    int rc;

    *out = NULL;
    if ((rc = sfl__sa_check_round(r)) < 0)
        return rc;
    if (sodium_init() < 0)
        return sfl__fail(SFL_EIO, "libsodium cannot be initialised");
    if ((s = sfl__calloc(1, sizeof(*s))) == NULL ||
        (s->members = sfl__calloc(r->n, sizeof(*s->members))) == NULL ||
        (s->slot = sfl__calloc(r->n, sizeof(*s->slot))) == NULL ||
        (s->u1 = sfl__calloc(r->n, sizeof(*s->u1))) == NULL ||
        (s->u2 = sfl__calloc(r->n, sizeof(*s->u2))) == NULL ||
        (s->u3 = sfl__calloc(r->n, sizeof(*s->u3))) == NULL ||
        (s->u4 = sfl__calloc(r->n, sizeof(*s->u4))) == NULL ||
        (s->sum = sfl__calloc(r->len, sizeof(uint32_t))) == NULL ||
        (s->culprit = sfl__calloc(r->n, sizeof(*s->culprit))) == NULL) {
        sfl_sa_server_free(s);
        return sfl__fail(SFL_ENOMEM, "no memory for a secure aggregation round");
    }
    s->r = *r;
    memcpy(s->members, r->members, r->n * sizeof(*s->members));
    s->r.members = s->members;
    sfl__sa_round_hash(r, s->members, s->rh);
    s->stage = SFL__SA_ST_ADV;
    *out = s;
    return 0;
}

static sa_slot_t *slot_of(sfl_sa_server_t *s, uint64_t id, const char *what, int *rc)
{
    int rk = sfl__sa_rank_of(s->members, s->r.n, id);

    if (rk < 0) {
        *rc = sfl__fail(SFL_EINVAL, "secure aggregation: %s from %llu, not in the cohort", what,
                        (unsigned long long)id);
        return NULL;
    }
    *rc = 0;
    return &s->slot[rk];
}

static int server_stage(const sfl_sa_server_t *s, int stage, const char *what)
{
    if (s->stage != stage)
        return sfl__fail(SFL_EINVAL, "secure aggregation: %s at stage %d, not %d", what,
                         s->stage, stage);
    return 0;
}

int sfl_sa_server_adv(sfl_sa_server_t *s, const sfl_sa_adv_t *adv)
{
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, SFL__SA_ST_ADV, "keys")) < 0 ||
        (sl = slot_of(s, adv->id, "keys", &rc)) == NULL)
        return rc;
    if (sfl__sa_adv_verify(s->rh, s->members[sl - s->slot].pk, adv) < 0)
        return blame(s, adv->id, SFL_SA_BLAME_BADSIG,
                     sfl__fail(SFL_EBADSIG, "secure aggregation: the keys of %llu are not "
                               "signed by it", (unsigned long long)adv->id));
    /* a repeat of the same keys may be a retry; other keys, signed, are
     * two faces of one member */
    if (sl->adv)
        return sodium_memcmp(&sl->a, adv, sizeof(*adv)) == 0
                   ? sfl__fail(SFL_EINVAL, "secure aggregation: keys of %llu twice",
                               (unsigned long long)adv->id)
                   : blame(s, adv->id, SFL_SA_BLAME_EQUIVOCATE,
                           sfl__fail(SFL_EINVAL, "secure aggregation: two sets of keys of %llu",
                                     (unsigned long long)adv->id));
    if (sfl__sa_x25519_ok(adv->c_pk) < 0 || sfl__sa_x25519_ok(adv->s_pk) < 0 ||
        sodium_memcmp(adv->c_pk, adv->s_pk, 32) == 0)
        return blame(s, adv->id, SFL_SA_BLAME_BADKEYS,
                     sfl__fail(SFL_EINVAL, "secure aggregation: a key of %llu is of small order "
                               "or its two keys are one", (unsigned long long)adv->id));
    for (uint32_t i = 0; i < s->r.n; i++)
        if (s->slot[i].adv &&
            (sodium_memcmp(s->slot[i].a.c_pk, adv->c_pk, 32) == 0 ||
             sodium_memcmp(s->slot[i].a.s_pk, adv->s_pk, 32) == 0 ||
             sodium_memcmp(s->slot[i].a.c_pk, adv->s_pk, 32) == 0 ||
             sodium_memcmp(s->slot[i].a.s_pk, adv->c_pk, 32) == 0))
            return blame(s, adv->id, SFL_SA_BLAME_BADKEYS,
                         sfl__fail(SFL_EINVAL, "secure aggregation: %llu repeats the keys of "
                                   "%llu", (unsigned long long)adv->id,
                                   (unsigned long long)s->members[i].id));
    sl->a = *adv;
    sl->adv = 1;
    return 0;
}

/* Ends stage `stage`: the members whose flag (the int of sa_slot_t at off)
 * is set, ascending, into ids; fewer than t end the round. */
static int end_stage(sfl_sa_server_t *s, int stage, size_t off, uint64_t *ids, uint32_t *n,
                     const char *what)
{
    int rc;

    if ((rc = server_stage(s, stage, what)) < 0)
        return rc;
    *n = 0;
    for (uint32_t i = 0; i < s->r.n; i++)
        if (*(const int *)((const char *)&s->slot[i] + off))
            ids[(*n)++] = s->members[i].id;
    if (*n < s->r.t) {
        s->stage = SFL__SA_ST_DONE;
        return sfl__fail(SFL_EEMPTY, "secure aggregation: %u %s, fewer than the threshold %u",
                         *n, what, s->r.t);
    }
    return 0;
}

int sfl_sa_server_end_adv(sfl_sa_server_t *s, const sfl_sa_adv_t **advs, uint32_t *n)
{
    int rc;

    /* u2 is free until the shares end */
    if ((rc = end_stage(s, SFL__SA_ST_ADV, offsetof(sa_slot_t, adv), s->u2, &s->n1,
                        "clients advertised keys")) < 0)
        return rc;
    for (uint32_t i = 0; i < s->n1; i++)
        s->u1[i] = s->slot[sfl__sa_rank_of(s->members, s->r.n, s->u2[i])].a;
    sfl_sa_session_id(&s->r, s->u1, s->n1, s->sid);
    if ((rc = sfl__sa_graph_init(&s->g, &s->r, s->sid, s->u1, s->n1)) < 0)
        return rc;
    s->tau = sfl_sa_holders(&s->r, s->n1);
    s->stage = SFL__SA_ST_SHARE;
    *advs = s->u1;
    *n = s->n1;
    return 0;
}

int sfl_sa_server_shares(sfl_sa_server_t *s, sfl_sa_shares_t *m)
{
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, SFL__SA_ST_SHARE, "shares")) < 0 ||
        (sl = slot_of(s, m->id, "shares", &rc)) == NULL)
        return rc;
    if (!sl->adv || sl->shared)
        return sfl__fail(SFL_EINVAL, "secure aggregation: shares of %llu %s",
                         (unsigned long long)m->id, sl->shared ? "twice" : "without keys");
    if ((m->ncommit > 0 && m->commit == NULL) || m->ncommit > 2 * (uint32_t)SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "secure aggregation: %u commitments of %llu, not held",
                         m->ncommit, (unsigned long long)m->id);
    if ((rc = shares_verify(s->sid, s->members[sl - s->slot].pk, m)) < 0)
        return rc == SFL_ENOMEM ? rc
                                : blame(s, m->id, SFL_SA_BLAME_BADSIG,
                                        sfl__fail(SFL_EBADSIG, "secure aggregation: the shares "
                                                  "of %llu are not signed by it",
                                                  (unsigned long long)m->id));
    /* signed, so provably its own: the commitments' shape. Whether each is
     * a point of the prime-order group is left to the end, where it is
     * needed only when a seed misses its commitment: checking all 2 tau n
     * here cost the coordinator's loop 0.9 s at n = 100 (a subgroup check
     * is a full scalar multiplication). */
    if (m->ncommit != 2 * s->tau)
        return blame(s, m->id, SFL_SA_BLAME_BADCOMMIT,
                     sfl__fail(SFL_EINVAL, "secure aggregation: %llu committed %u points, not "
                               "2 x %u", (unsigned long long)m->id, m->ncommit, s->tau));
    if (m->nboxes != s->g.k)
        return blame(s, m->id, SFL_SA_BLAME_MALFORMED,
                     sfl__fail(SFL_EINVAL, "secure aggregation: %llu sent %u boxes for %u "
                               "neighbours", (unsigned long long)m->id, m->nboxes, s->g.k));
    for (uint32_t i = 0; i < m->nboxes; i++) {
        const sfl_sa_box_t *b = &m->boxes[i];

        if (b->from != m->id || !sfl__sa_adjacent(&s->g, m->id, b->to))
            return blame(s, m->id, SFL_SA_BLAME_MALFORMED,
                         sfl__fail(SFL_EINVAL, "secure aggregation: a box from %llu to %llu",
                                   (unsigned long long)b->from, (unsigned long long)b->to));
        for (uint32_t k = 0; k < i; k++)
            if (m->boxes[k].to == b->to)
                return blame(s, m->id, SFL_SA_BLAME_MALFORMED,
                             sfl__fail(SFL_EINVAL, "secure aggregation: two boxes from %llu to "
                                       "%llu", (unsigned long long)b->from,
                                       (unsigned long long)b->to));
    }
    sl->commit = m->commit;
    m->commit = NULL;
    m->ncommit = 0;
    sl->boxes = m->boxes;
    sl->nboxes = m->nboxes;
    m->boxes = NULL;
    m->nboxes = 0;
    sl->shared = 1;
    return 0;
}

int sfl_sa_server_end_shares(sfl_sa_server_t *s, const uint64_t **u2, uint32_t *n)
{
    int rc;

    if ((rc = end_stage(s, SFL__SA_ST_SHARE, offsetof(sa_slot_t, shared), s->u2, &s->n2,
                        "clients shared their keys")) < 0)
        return rc;
    s->stage = SFL__SA_ST_INPUT;
    *u2 = s->u2;
    *n = s->n2;
    return 0;
}

int sfl_sa_server_inbox(const sfl_sa_server_t *s, uint64_t v, sfl_sa_box_t **boxes, uint32_t *n)
{
    sfl_sa_box_t *out;

    *boxes = NULL;
    *n = 0;
    if (s->stage < SFL__SA_ST_INPUT)
        return sfl__fail(SFL_EINVAL, "secure aggregation: no inbox before the shares end");
    if ((out = sfl__calloc(s->n2, sizeof(*out))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for an inbox");
    for (uint32_t i = 0; i < s->r.n; i++) {
        const sa_slot_t *sl = &s->slot[i];

        if (!sl->shared || s->members[i].id == v)
            continue;
        for (uint32_t k = 0; k < sl->nboxes; k++)
            if (sl->boxes[k].to == v)
                out[(*n)++] = sl->boxes[k];
    }
    *boxes = out;
    return 0;
}

int sfl_sa_server_input(sfl_sa_server_t *s, sfl_sa_input_t *in)
{
    uint8_t msg[SFL_SA_HASH + 8 + SFL_SA_HASH];
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, SFL__SA_ST_INPUT, "an input")) < 0 ||
        (sl = slot_of(s, in->id, "an input", &rc)) == NULL)
        return rc;
    if (!sl->shared || sl->input)
        return sfl__fail(SFL_EINVAL, "secure aggregation: an input of %llu %s",
                         (unsigned long long)in->id, sl->input ? "twice" : "not in U2");
    if (in->len != s->r.len || in->y == NULL)
        return blame(s, in->id, SFL_SA_BLAME_MALFORMED,
                     sfl__fail(SFL_EINVAL, "secure aggregation: an input of %u words, the "
                               "round's %u", in->len, s->r.len));
    sfl__sa_input_msg(s->sid, in->id, in->y, in->len, msg);
    if (sfl_seal_verify_detached(s->members[sl - s->slot].pk, SFL__SA_CTX_INPUT, msg, sizeof(msg),
                                 in->sig) < 0)
        return blame(s, in->id, SFL_SA_BLAME_BADSIG,
                     sfl__fail(SFL_EBADSIG, "secure aggregation: the input of %llu is not "
                               "signed by it", (unsigned long long)in->id));
    for (uint32_t i = 0; i < s->r.len; i++)
        s->sum[i] += in->y[i];
    sl->input = 1;
    sfl_sa_input_clear(in);
    return 0;
}

int sfl_sa_server_end_inputs(sfl_sa_server_t *s, const uint64_t **u3, uint32_t *n)
{
    int rc;

    if ((rc = end_stage(s, SFL__SA_ST_INPUT, offsetof(sa_slot_t, input), s->u3, &s->n3,
                        "inputs")) < 0)
        return rc;
    sfl__sa_u3_msg(s->sid, s->u3, s->n3, s->u3h);
    s->stage = SFL__SA_ST_CONSIST;
    *u3 = s->u3;
    *n = s->n3;
    return 0;
}

int sfl_sa_server_consist(sfl_sa_server_t *s, const sfl_sa_consist_t *m)
{
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, SFL__SA_ST_CONSIST, "a consistency signature")) < 0 ||
        (sl = slot_of(s, m->id, "a consistency signature", &rc)) == NULL)
        return rc;
    if (!sl->input || sl->consist)
        return sfl__fail(SFL_EINVAL, "secure aggregation: a consistency signature of %llu %s",
                         (unsigned long long)m->id, sl->consist ? "twice" : "not in U3");
    if (sfl_seal_verify_detached(s->members[sl - s->slot].pk, SFL__SA_CTX_U3, s->u3h,
                                 sizeof(s->u3h), m->sig) < 0)
        return blame(s, m->id, SFL_SA_BLAME_BADSIG,
                     sfl__fail(SFL_EBADSIG, "secure aggregation: %llu signed another U3",
                               (unsigned long long)m->id));
    memcpy(sl->sig4, m->sig, sizeof(sl->sig4));
    sl->consist = 1;
    return 0;
}

int sfl_sa_server_end_consist(sfl_sa_server_t *s, const sfl_sa_consist_t **sigs, uint32_t *n)
{
    uint64_t *ids = sfl__calloc(s->r.n, sizeof(*ids));
    int rc;

    if (ids == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for U4");
    rc = end_stage(s, SFL__SA_ST_CONSIST, offsetof(sa_slot_t, consist), ids, &s->n4,
                   "consistency signatures");
    for (uint32_t i = 0; rc == 0 && i < s->n4; i++) {
        s->u4[i].id = ids[i];
        memcpy(s->u4[i].sig, s->slot[sfl__sa_rank_of(s->members, s->r.n, ids[i])].sig4,
               SFL_SEAL_SIG_BYTES);
    }
    sfl__free(ids);
    if (rc < 0)
        return rc;
    s->stage = SFL__SA_ST_UNMASK;
    *sigs = s->u4;
    *n = s->n4;
    return 0;
}

int sfl_sa_server_unmask(sfl_sa_server_t *s, uint64_t from, const sfl_sa_reveal_t *shares,
                         uint32_t n)
{
    sa_slot_t *sl;
    uint32_t want = 0;
    int rc;

    if ((rc = server_stage(s, SFL__SA_ST_UNMASK, "shares to unmask")) < 0 ||
        (sl = slot_of(s, from, "shares to unmask", &rc)) == NULL)
        return rc;
    if (!sl->consist || sl->unmasked)
        return sfl__fail(SFL_EINVAL, "secure aggregation: shares to unmask from %llu %s",
                         (unsigned long long)from, sl->unmasked ? "twice" : "not in U4");
    for (uint32_t i = 0; i < s->n2; i++)
        want += (uint32_t)sfl__sa_holds(&s->g, s->u2[i], from);
    /* fewer when a box gave it no share */
    if (n > want)
        return blame(s, from, SFL_SA_BLAME_BADRELEASE,
                     sfl__fail(SFL_EINVAL, "secure aggregation: %llu released %u shares for the "
                               "%u clients of U2 it holds shares of", (unsigned long long)from,
                               n, want));
    for (uint32_t i = 0; i < n; i++) {
        const sfl_sa_reveal_t *v = &shares[i];
        int in3 = sfl__sa_in_list(s->u3, s->n3, v->of);

        if (!sfl__sa_in_list(s->u2, s->n2, v->of) || !sfl__sa_holds(&s->g, v->of, from) ||
            v->type != (in3 ? 'b' : 's') ||
            v->share.x != (uint16_t)(sl - s->slot + 1) || !sfl_shamir_canonical(v->share.y))
            return blame(s, from, SFL_SA_BLAME_BADRELEASE,
                         sfl__fail(SFL_EINVAL, "secure aggregation: share %u from %llu (of "
                                   "%llu, type %c, x %u) is not the one asked", i,
                                   (unsigned long long)from, (unsigned long long)v->of,
                                   v->type, v->share.x));
        for (uint32_t k = 0; k < i; k++)
            if (shares[k].of == v->of)
                return blame(s, from, SFL_SA_BLAME_BADRELEASE,
                             sfl__fail(SFL_EINVAL, "secure aggregation: two shares of %llu "
                                       "from %llu", (unsigned long long)v->of,
                                       (unsigned long long)from));
    }
    if ((sl->rev = sfl__calloc(n ? n : 1, sizeof(*sl->rev))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the shares");
    if (n > 0)
        memcpy(sl->rev, shares, n * sizeof(*shares));
    sl->nrev = n;
    sl->unmasked = 1;
    return 0;
}

/* Lagrange coefficients kept across the seeds: on the complete graph every
 * holder releases a share of every seed, so the x's repeat and one set
 * serves them all (on a Harary graph they change with the seed's holders).
 * The rest is scratch for one seed's shares, sized for the cohort. */
typedef struct lagrange {
    uint32_t k;
    uint16_t *x;                   /* the tau x's the coefficients are for */
    uint8_t (*lam)[SFL_SHAMIR_BYTES];
    sfl_share_t *sh;               /* n: a seed's released shares */
    const sfl_sa_reveal_t **rv;    /* n: where each came from */
    uint64_t *holder;              /* n: who released it */
    uint8_t *ok;                   /* n: on the committed polynomial */
    uint8_t (*work)[SFL_SHAMIR_BYTES]; /* tau */
    uint8_t (*agree)[SFL_SHAMIR_BYTES]; /* 2 n */
} lagrange_t;

/* The secret of the first tau of sh[0..k) into secret, with coefficients
 * from lg when their x's are lg's. */
static int combine_first(lagrange_t *lg, const sfl_share_t *sh, uint32_t tau,
                         uint8_t secret[32])
{
    int rc, same = lg->k == tau;

    for (uint32_t i = 0; same && i < tau; i++)
        same = lg->x[i] == sh[i].x;
    if (!same) {
        if ((rc = sfl_shamir_lagrange(sh, tau, lg->lam)) < 0)
            return rc;
        for (uint32_t i = 0; i < tau; i++)
            lg->x[i] = sh[i].x;
        lg->k = tau;
    }
    return sfl_shamir_apply((const uint8_t (*)[SFL_SHAMIR_BYTES])lg->lam, sh, tau, secret);
}

/* Keeps the shares sh[i] of lg with keep[i] set, in order; their count. */
static uint32_t keep_only(lagrange_t *lg, uint32_t k, const uint8_t *keep)
{
    uint32_t m = 0;

    for (uint32_t i = 0; i < k; i++)
        if (keep[i]) {
            lg->sh[m] = lg->sh[i];
            lg->rv[m] = lg->rv[i];
            lg->holder[m] = lg->holder[i];
            m++;
        }
    return m;
}

/* The secret of client `of` of type `type` ('b': r_b, 's': r_s) from the
 * shares released of it. The cheap path: the first tau of them, checked
 * against the dealer's commitment to the secret (one base-point
 * multiplication). On a mismatch every share is checked against the
 * commitments: a bad one whose dealer signature verifies convicts the
 * dealer (it signed a share off its committed polynomial), one whose
 * signature fails convicts its holder (it altered what it was dealt);
 * either is dropped, and the secret comes from tau good ones. When fewer
 * than tau are good, the dealer's commitments may be the lie and its
 * shares sound: more than tau shares it signed that lie on one polynomial
 * give the secret it dealt. Anything less fails the seed. */
static int rebuild(sfl_sa_server_t *s, lagrange_t *lg, uint64_t of, char type, uint8_t secret[32])
{
    int dr = sfl__sa_rank_of(s->members, s->r.n, of);
    const uint8_t (*commit)[SFL_SA_POINT] =
        (const uint8_t (*)[SFL_SA_POINT])s->slot[dr].commit + (type == 's' ? s->tau : 0);
    const uint8_t *dpk = s->members[dr].pk;
    uint32_t k = 0, good;
    int rc;

    for (uint32_t i = 0; i < s->r.n; i++)
        for (uint32_t j = 0; s->slot[i].unmasked && j < s->slot[i].nrev; j++)
            if (s->slot[i].rev[j].of == of && s->slot[i].rev[j].type == type) {
                lg->rv[k] = &s->slot[i].rev[j];
                lg->holder[k] = s->members[i].id;
                lg->sh[k++] = s->slot[i].rev[j].share;
            }
    if (k < s->tau) {
        /* Its holders that released shares (so they are alive and past the
         * consistency check) but none of this seed had no share of it: a
         * box that did not open or whose dealer signatures failed. One
         * such holder may be lying; two or more cannot all be, unless two
         * members collude against an honest dealer: the dealer is named. */
        uint32_t withheld = 0;

        for (uint32_t i = 0; i < s->r.n; i++)
            withheld += s->slot[i].unmasked && sfl__sa_holds(&s->g, of, s->members[i].id);
        withheld -= k;
        if (withheld >= 2)
            blame(s, of, SFL_SA_BLAME_UNREADABLE, 0);
        rc = sfl__fail(SFL_EEMPTY, "secure aggregation: %u shares of %llu, fewer than the "
                       "threshold %u (%u holders that answered had none)", k,
                       (unsigned long long)of, s->tau, withheld);
        goto out;
    }
    if ((rc = combine_first(lg, lg->sh, s->tau, secret)) < 0)
        goto out;
    if (sfl_shamir_commit_check(secret, commit[0]) == 0)
        goto out;
    /* someone lied: find the bad shares and whose they are. Shares that
     * all agree on one polynomial while its secret misses C_0 are all off
     * the committed one (an honest dealer's tau honest holders would pin
     * it): the commitment is the lie, and halving down to every single
     * share (2 k checks of tau + 1 multiplications: 2 s at n = 100) is
     * skipped for one parity check (6 ms). */
    rc = 0;
    for (uint32_t j = 0; j < s->tau; j++)
        if (!crypto_core_ed25519_is_valid_point(commit[j]))
            rc = SFL_EINVAL;
    if (rc == 0 && k > s->tau && sfl_shamir_agree(lg->sh, k, s->tau, lg->agree) == 0) {
        memset(lg->ok, 0, k);
        rc = SFL_EBADSIG;
    } else if (rc == 0)
        rc = sfl_shamir_verify(lg->sh, k, commit, s->tau, lg->work, lg->ok);
    if (rc == SFL_EINVAL) {
        /* the x's and y's were checked at release (so verify's EINVAL too
         * is this): a commitment is not a point of the group, and the
         * dealer signed it. No share can be
         * checked against it: only the last resort is left. */
        blame(s, of, SFL_SA_BLAME_BADCOMMIT, 0);
        for (uint32_t i = 0; i < k; i++)
            lg->ok[i] = sfl__sa_share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i],
                                             lg->rv[i]->sig) == 0
                            ? 2
                            : (blame(s, lg->holder[i], SFL_SA_BLAME_ALTERED, 0), 0);
    } else if (rc < 0 && rc != SFL_EBADSIG)
        goto out;
    for (uint32_t i = 0; rc != SFL_EINVAL && i < k; i++) {
        if (lg->ok[i])
            continue;
        if (sfl__sa_share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i],
                                 lg->rv[i]->sig) == 0) {
            blame(s, of, SFL_SA_BLAME_BADDEAL, 0);
            lg->ok[i] = 2; /* the dealer's, signed: kept for the last resort */
        } else
            blame(s, lg->holder[i], SFL_SA_BLAME_ALTERED, 0);
    }
    good = 0;
    for (uint32_t i = 0; i < k; i++)
        good += lg->ok[i] == 1;
    if (good >= s->tau) {
        for (uint32_t i = 0; i < k; i++)
            lg->ok[i] = lg->ok[i] == 1;
        k = keep_only(lg, k, lg->ok);
        if ((rc = sfl_shamir_combine(lg->sh, s->tau, secret)) == 0 &&
            (rc = sfl_shamir_commit_check(secret, commit[0])) < 0)
            rc = sfl__fail(rc, "secure aggregation: the good shares of %llu miss its "
                           "commitment", (unsigned long long)of); /* cannot happen */
        goto out;
    }
    /* the last resort: the shares the dealer signed (a good share may carry
     * a holder's bad signature: checked now) */
    for (uint32_t i = 0; i < k; i++)
        if (lg->ok[i] == 1)
            lg->ok[i] = sfl__sa_share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i],
                                             lg->rv[i]->sig) == 0;
        else
            lg->ok[i] = lg->ok[i] == 2;
    k = keep_only(lg, k, lg->ok);
    if (k > s->tau && sfl_shamir_agree(lg->sh, k, s->tau, lg->agree) == 0) {
        rc = sfl_shamir_combine(lg->sh, s->tau, secret);
        goto out;
    }
    rc = sfl__fail(SFL_EBADSIG, "secure aggregation: %u good shares of the %s of %llu, fewer "
                   "than the %u that rebuild it", good, type == 'b' ? "self-mask seed" :
                   "mask key", (unsigned long long)of, s->tau);
out:
    sodium_memzero(lg->sh, (size_t)s->r.n * sizeof(*lg->sh));
    return rc;
}

int sfl_sa_server_finish(sfl_sa_server_t *s, uint32_t *sum, uint32_t *count)
{
    uint8_t r[32], k[32], pk[32];
    lagrange_t lg = {0};
    int rc = 0, first = 0;

    if ((rc = server_stage(s, SFL__SA_ST_UNMASK, "the end")) < 0)
        return rc;
    lg.x = sfl__calloc(s->tau, sizeof(*lg.x));
    lg.lam = sfl__calloc(s->tau, sizeof(*lg.lam));
    lg.work = sfl__calloc(s->tau, sizeof(*lg.work));
    lg.sh = sfl__calloc(s->r.n, sizeof(*lg.sh));
    lg.rv = sfl__calloc(s->r.n, sizeof(*lg.rv));
    lg.holder = sfl__calloc(s->r.n, sizeof(*lg.holder));
    lg.ok = sfl__calloc(s->r.n, sizeof(*lg.ok));
    lg.agree = sfl__calloc(2 * (size_t)s->r.n, sizeof(*lg.agree));
    if (lg.x == NULL || lg.lam == NULL || lg.work == NULL || lg.sh == NULL || lg.rv == NULL ||
        lg.holder == NULL || lg.ok == NULL || lg.agree == NULL)
        rc = sfl__fail(SFL_ENOMEM, "no memory for the coefficients");
    /* every seed is rebuilt even after one fails, so that every culprit is
     * named; the first failure is the round's */
    for (uint32_t i = 0; rc != SFL_ENOMEM && i < s->n2; i++) {
        uint64_t v = s->u2[i];
        const sa_slot_t *sv = &s->slot[sfl__sa_rank_of(s->members, s->r.n, v)];

        if (sfl__sa_in_list(s->u3, s->n3, v)) {
            /* its self-mask */
            if ((rc = rebuild(s, &lg, v, 'b', r)) < 0) {
                first = first ? first : rc;
                continue;
            }
            sfl__sa_derive("sfl-sa-b", r, k);
            sfl_sa_mask_add(k, -1, s->sum, s->r.len);
            continue;
        }
        /* dropped after sharing: its masks with every input taken */
        if ((rc = rebuild(s, &lg, v, 's', r)) < 0) {
            first = first ? first : rc;
            continue;
        }
        sfl__sa_derive("sfl-sa-s", r, k);
        crypto_scalarmult_base(pk, k);
        if (sodium_memcmp(pk, sv->a.s_pk, 32) != 0) {
            /* it signed s_pk (stage 1) and the polynomial its shares are on
             * (stage 2): the two disagree */
            rc = blame(s, v, SFL_SA_BLAME_BADSKEY,
                       sfl__fail(SFL_EBADSIG, "secure aggregation: the rebuilt mask key of "
                                 "%llu is not the one it advertised", (unsigned long long)v));
            first = first ? first : rc;
            continue;
        }
        for (uint32_t j = 0; rc == 0 && j < s->n3; j++) {
            uint64_t w = s->u3[j];
            const sa_slot_t *sw = &s->slot[sfl__sa_rank_of(s->members, s->r.n, w)];
            uint8_t key[32];
            int wlow = w < v;

            if (!sfl__sa_adjacent(&s->g, v, w))
                continue;
            rc = sfl_sa_pair_key(k, sw->a.s_pk, wlow ? sw->a.s_pk : sv->a.s_pk,
                                 wlow ? sv->a.s_pk : sw->a.s_pk, s->sid, key);
            if (rc == 0)
                sfl_sa_mask_add(key, wlow ? -1 : 1, s->sum, s->r.len);
            sodium_memzero(key, sizeof(key));
        }
        if (rc < 0)
            first = first ? first : rc;
    }
    if (rc == SFL_ENOMEM)
        first = rc;
    sodium_memzero(r, sizeof(r));
    sodium_memzero(k, sizeof(k));
    sfl__free(lg.x);
    sfl__free(lg.lam);
    sfl__free(lg.work);
    sfl__free(lg.sh);
    sfl__free(lg.rv);
    sfl__free(lg.holder);
    sfl__free(lg.ok);
    if (lg.agree != NULL)
        sodium_memzero(lg.agree, 2 * (size_t)s->r.n * sizeof(*lg.agree));
    sfl__free(lg.agree);
    s->stage = SFL__SA_ST_DONE;
    if (first < 0)
        return first;
    memcpy(sum, s->sum, s->r.len * sizeof(uint32_t));
    *count = s->n3;
    return 0;
}

void sfl_sa_server_free(sfl_sa_server_t *s)
{
    if (s == NULL)
        return;
    for (uint32_t i = 0; s->slot != NULL && i < s->r.n; i++) {
        sfl__free(s->slot[i].boxes);
        sfl__free(s->slot[i].commit);
        if (s->slot[i].rev != NULL)
            sodium_memzero(s->slot[i].rev, s->slot[i].nrev * sizeof(*s->slot[i].rev));
        sfl__free(s->slot[i].rev);
    }
    sfl__free(s->slot);
    sfl__free(s->members);
    sfl__free(s->u1);
    sfl__free(s->g.pos);
    sfl__free(s->u2);
    sfl__free(s->u3);
    sfl__free(s->u4);
    sfl__free(s->sum);
    sfl__free(s->culprit);
    sfl__free(s);
}

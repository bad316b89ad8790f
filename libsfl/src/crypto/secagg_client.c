/* Secure aggregation's client (sfl/crypto/secagg.h): one per round and
 * agent, stage by stage. Secrets live in the client struct and are wiped
 * (sodium_memzero) on abort, after release and when it is freed. */
#include "sfl/crypto/secagg.h"
#include "crypto/secagg_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/savec.h"

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A list of ids: strictly ascending, every one of them in `within`
 * (ascending, nw) and at least t of them. */
static int check_subset(const char *what, const uint64_t *ids, uint32_t n, const uint64_t *within,
                        uint32_t nw, uint32_t t)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0 && ids[i] <= ids[i - 1])
            return sfl__fail(SFL_EINVAL, "%s: ids not strictly ascending (%llu after %llu)",
                             what, (unsigned long long)ids[i], (unsigned long long)ids[i - 1]);
        if (!sfl__sa_in_list(within, nw, ids[i]))
            return sfl__fail(SFL_EINVAL, "%s: client %llu was not in the stage before", what,
                             (unsigned long long)ids[i]);
    }
    if (n < t)
        return sfl__fail(SFL_EEMPTY, "%s: %u clients, fewer than the threshold %u", what, n, t);
    return 0;
}

static int box_key(const uint8_t c_sk[32], const uint8_t other_pk[32],
                   const uint8_t sid[SFL_SA_HASH], uint8_t key[32])
{
    crypto_generichash_state st;
    uint8_t dh[32];

    if (crypto_scalarmult(dh, c_sk, other_pk) != 0)
        return sfl__fail(SFL_EINVAL, "a share key of small order");
    crypto_generichash_init(&st, NULL, 0, 32);
    sfl__sa_hash_str(&st, "sfl-sa-box");
    crypto_generichash_update(&st, dh, 32);
    crypto_generichash_update(&st, sid, SFL_SA_HASH);
    crypto_generichash_final(&st, key, 32);
    sodium_memzero(dh, sizeof(dh));
    return 0;
}

static void box_ad(const uint8_t sid[SFL_SA_HASH], uint64_t u, uint64_t v,
                   uint8_t ad[SFL_SA_HASH + 16])
{
    memcpy(ad, sid, SFL_SA_HASH);
    sfl__sa_put64(ad + SFL_SA_HASH, u);
    sfl__sa_put64(ad + SFL_SA_HASH + 8, v);
}

struct sfl_sa_client {
    sfl_sa_round_t r;
    sfl_sa_member_t *members;
    uint64_t id;
    uint32_t rank;
    const sfl_identity_t *ident;
    int stage, aborted;
    uint8_t rh[SFL_SA_HASH], sid[SFL_SA_HASH];
    /* secrets */
    uint8_t c_sk[32], s_sk[32], r_b[32], r_s[32];
    uint8_t c_pk[32], s_pk[32];
    sfl_sa_adv_t *u1;     /* n1, ascending */
    uint32_t n1;
    sfl__sa_graph_t g;
    uint64_t *u2, *u3;
    uint32_t n2, n3;
    /* shares this client holds, by the owner's rank: its own too */
    uint8_t (*yb)[32], (*ys)[32];
    uint8_t (*sigb)[SFL_SEAL_SIG_BYTES], (*sigs)[SFL_SEAL_SIG_BYTES]; /* their dealers' */
    uint8_t *have;
    uint8_t u3h[SFL_SA_HASH];
};

static void client_wipe(sfl_sa_client_t *c)
{
    sodium_memzero(c->c_sk, sizeof(c->c_sk));
    sodium_memzero(c->s_sk, sizeof(c->s_sk));
    sodium_memzero(c->r_b, sizeof(c->r_b));
    sodium_memzero(c->r_s, sizeof(c->r_s));
    if (c->yb != NULL)
        sodium_memzero(c->yb, (size_t)c->r.n * 32);
    if (c->ys != NULL)
        sodium_memzero(c->ys, (size_t)c->r.n * 32);
}

/* Aborts with the error rc (already set in sfl_last_error). */
static int client_abort(sfl_sa_client_t *c, int rc)
{
    c->aborted = 1;
    client_wipe(c);
    return rc;
}

static int client_stage(sfl_sa_client_t *c, int stage)
{
    if (c->aborted)
        return sfl__fail(SFL_EINVAL, "secure aggregation: the client aborted");
    if (c->stage != stage)
        return client_abort(c, sfl__fail(SFL_EINVAL, "secure aggregation: stage %d asked at "
                                         "stage %d", stage, c->stage));
    return 0;
}

int sfl_sa_client_new(const sfl_sa_round_t *r, const sfl_sa_policy_t *policy, uint64_t id,
                      const sfl_identity_t *ident, sfl_sa_client_t **out, sfl_sa_adv_t *adv)
{
    sfl_sa_client_t *c;
    uint8_t msg[SFL_SA_HASH + 8 + 64];
    int rk, rc;

    *out = NULL;
    if ((rc = sfl__sa_check_round(r)) < 0)
        return rc;
    if (r->n < policy->min_n || r->t < policy->min_t)
        return sfl__fail(SFL_EINVAL, "secure aggregation: cohort %u, threshold %u below this "
                         "client's floor (%u, %u)", r->n, r->t, policy->min_n, policy->min_t);
    if (sfl_sa_degree(r, r->n) < policy->min_degree && sfl_sa_degree(r, r->n) + 1 < r->n)
        return sfl__fail(SFL_EINVAL, "secure aggregation: graph degree %u below this client's "
                         "floor %u", r->degree, policy->min_degree);
    /* t > (n + c) / 2 against c colluders (sfl_sa_policy_t) */
    {
        uint64_t cc = policy->max_colluders == SFL_SA_COLLUDERS_THIRD ? r->n / 3
                                                                      : policy->max_colluders;
        uint32_t k = sfl_sa_degree(r, r->n);

        if (2 * (uint64_t)r->t <= r->n + cc)
            return sfl__fail(SFL_EINVAL, "secure aggregation: threshold %u of %u below this "
                             "client's floor against %llu colluders (need t > (n + c) / 2: "
                             "t >= %llu)", r->t, r->n, (unsigned long long)cc,
                             (unsigned long long)((r->n + cc) / 2 + 1));
        if (k + 1 < r->n) {
            uint64_t ck = cc * (k + 1) / r->n, tau = sfl_sa_holders(r, r->n);

            if (2 * tau <= k + 1 + ck)
                return sfl__fail(SFL_EINVAL, "secure aggregation: %llu of a seed's %u holders "
                                 "below this client's floor against %llu colluders among "
                                 "them (need tau > (k + 1 + c_k) / 2)",
                                 (unsigned long long)tau, k + 1, (unsigned long long)ck);
        }
    }
    if ((rk = sfl__sa_rank_of(r->members, r->n, id)) < 0)
        return sfl__fail(SFL_EINVAL, "secure aggregation: client %llu is not in the cohort",
                         (unsigned long long)id);
    if (sodium_init() < 0)
        return sfl__fail(SFL_EIO, "libsodium cannot be initialised");
    if ((c = sfl__calloc(1, sizeof(*c))) == NULL ||
        (c->members = sfl__calloc(r->n, sizeof(*c->members))) == NULL ||
        (c->yb = sfl__calloc(r->n, 32)) == NULL || (c->ys = sfl__calloc(r->n, 32)) == NULL ||
        (c->sigb = sfl__calloc(r->n, SFL_SEAL_SIG_BYTES)) == NULL ||
        (c->sigs = sfl__calloc(r->n, SFL_SEAL_SIG_BYTES)) == NULL ||
        (c->have = sfl__calloc(r->n, 1)) == NULL) {
        sfl_sa_client_free(c);
        return sfl__fail(SFL_ENOMEM, "no memory for a secure aggregation client");
    }
    c->r = *r;
    memcpy(c->members, r->members, r->n * sizeof(*c->members));
    c->r.members = c->members;
    c->id = id;
    c->rank = (uint32_t)rk;
    c->ident = ident;
    sfl__sa_round_hash(r, c->members, c->rh);
    randombytes_buf(c->c_sk, 32);
    crypto_scalarmult_base(c->c_pk, c->c_sk);
    sfl_shamir_random(c->r_b);
    sfl_shamir_random(c->r_s);
    sfl__sa_derive("sfl-sa-s", c->r_s, c->s_sk);
    crypto_scalarmult_base(c->s_pk, c->s_sk);
    memset(adv, 0, sizeof(*adv));
    adv->id = id;
    memcpy(adv->c_pk, c->c_pk, 32);
    memcpy(adv->s_pk, c->s_pk, 32);
    memcpy(msg, c->rh, SFL_SA_HASH);
    sfl__sa_put64(msg + SFL_SA_HASH, id);
    memcpy(msg + SFL_SA_HASH + 8, c->c_pk, 32);
    memcpy(msg + SFL_SA_HASH + 40, c->s_pk, 32);
    if ((rc = sfl_seal_sign_detached(ident, SFL__SA_CTX_ADV, msg, sizeof(msg), adv->sig)) < 0) {
        sfl_sa_client_free(c);
        return rc;
    }
    c->stage = SFL__SA_ST_SHARE;
    *out = c;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    return memcmp(*(const uint8_t *const *)a, *(const uint8_t *const *)b, 32);
}

/* No key of U1's 2 n (public) appears twice: sorted, in O(n log n). */
static int distinct_keys(const sfl_sa_adv_t *advs, uint32_t n)
{
    const uint8_t **k = sfl__calloc(2 * (size_t)n, sizeof(*k));
    int rc = 0;

    if (k == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for U1's keys");
    for (uint32_t i = 0; i < n; i++) {
        k[2 * i] = advs[i].c_pk;
        k[2 * i + 1] = advs[i].s_pk;
    }
    qsort(k, 2 * (size_t)n, sizeof(*k), cmp_key);
    for (size_t i = 1; rc == 0 && i < 2 * (size_t)n; i++)
        if (memcmp(k[i - 1], k[i], 32) == 0)
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: two advertisements (or one's two "
                           "keys) carry the same key");
    sfl__free(k);
    return rc;
}

/* U1 as a client takes it: the checks of stage 2 (the small-order check of
 * the keys it uses comes with the graph). */
static int check_u1(sfl_sa_client_t *c, const sfl_sa_adv_t *advs, uint32_t n)
{
    int self = 0, rc;

    if (n < c->r.t)
        return sfl__fail(SFL_EEMPTY, "secure aggregation: %u advertised keys, fewer than the "
                         "threshold %u", n, c->r.t);
    for (uint32_t i = 0; i < n; i++) {
        const sfl_sa_adv_t *a = &advs[i];
        int rk = sfl__sa_rank_of(c->members, c->r.n, a->id);

        if (rk < 0)
            return sfl__fail(SFL_EINVAL, "secure aggregation: keys of %llu, not in the cohort",
                             (unsigned long long)a->id);
        if (i > 0 && a->id <= advs[i - 1].id)
            return sfl__fail(SFL_EINVAL, "secure aggregation: repeated or unordered client %llu",
                             (unsigned long long)a->id);
        if ((rc = sfl__sa_adv_verify(c->rh, c->members[rk].pk, a)) < 0)
            return sfl__fail(SFL_EBADSIG, "secure aggregation: the keys of %llu are not signed "
                             "by it", (unsigned long long)a->id);
        if (a->id == c->id) {
            if (sodium_memcmp(a->c_pk, c->c_pk, 32) != 0 ||
                sodium_memcmp(a->s_pk, c->s_pk, 32) != 0)
                return sfl__fail(SFL_EBADSIG, "secure aggregation: this client's own keys "
                                 "were altered");
            self = 1;
            continue;
        }
    }
    if (!self)
        return sfl__fail(SFL_EINVAL, "secure aggregation: this client's keys are missing");
    return distinct_keys(advs, n);
}

/* The advertisement of id in U1 (once stage 2 set the graph), or NULL. */
static const sfl_sa_adv_t *adv_of(const sfl_sa_client_t *c, uint64_t id)
{
    int i = sfl__sa_u1_index(&c->g, id);

    return i < 0 ? NULL : &c->u1[i];
}

int sfl_sa_client_share(sfl_sa_client_t *c, const sfl_sa_adv_t *advs, uint32_t n,
                        sfl_sa_shares_t *out)
{
    sfl_share_t *sb = NULL, *ss = NULL;
    uint8_t plain[SFL_SA_BOX_PLAIN], key[32], ad[SFL_SA_HASH + 16], smsg[SFL_SA_SHARE_MSG];
    uint8_t *msg = NULL;
    size_t mlen;
    uint32_t m = 0, tau;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = client_stage(c, SFL__SA_ST_SHARE)) < 0)
        return rc;
    if ((rc = check_u1(c, advs, n)) < 0)
        return client_abort(c, rc);
    if ((c->u1 = sfl__calloc(n, sizeof(*c->u1))) == NULL ||
        (sb = sfl__calloc(n, sizeof(*sb))) == NULL ||
        (ss = sfl__calloc(n, sizeof(*ss))) == NULL ||
        (out->boxes = sfl__calloc(n, sizeof(*out->boxes))) == NULL ||
        (out->commit = sfl__calloc(2 * (size_t)sfl_sa_holders(&c->r, n),
                                   sizeof(*out->commit))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the shares");
        goto fail;
    }
    tau = sfl_sa_holders(&c->r, n);
    memcpy(c->u1, advs, n * sizeof(*advs));
    c->n1 = n;
    sfl_sa_session_id(&c->r, c->u1, n, c->sid);
    if ((rc = sfl__sa_graph_init(&c->g, &c->r, c->sid, c->u1, n)) < 0)
        goto fail;
    /* the neighbours' mask keys (their share keys fail box_key if bad) */
    for (uint32_t i = 0; i < n; i++)
        if (sfl__sa_adjacent(&c->g, c->id, advs[i].id) && sfl__sa_x25519_ok(advs[i].s_pk) < 0) {
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: a key of %llu is of small order",
                           (unsigned long long)advs[i].id);
            goto fail;
        }
    /* a share for itself and each neighbour, at x = 1 + cohort rank */
    for (uint32_t i = 0; i < n; i++)
        if (sfl__sa_holds(&c->g, c->id, advs[i].id))
            sb[m++].x = (uint16_t)(sfl__sa_rank_of(c->members, c->r.n, advs[i].id) + 1);
    for (uint32_t i = 0; i < m; i++)
        ss[i].x = sb[i].x;
    if ((rc = sfl_shamir_split_commit(c->r_b, tau, sb, m, out->commit)) < 0 ||
        (rc = sfl_shamir_split_commit(c->r_s, tau, ss, m, out->commit + tau)) < 0)
        goto fail;
    out->ncommit = 2 * tau;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t rk = sb[i].x - 1u;
        const sfl_sa_adv_t *a = adv_of(c, c->members[rk].id);
        sfl_sa_box_t *b = &out->boxes[out->nboxes];
        unsigned long long clen;

        /* each share signed on its own: a holder proves one without
         * showing the other */
        sfl__sa_share_msg(c->sid, c->id, a->id, sb[i].x, sb[i].y, smsg);
        if ((rc = sfl_seal_sign_detached(c->ident, SFL__SA_CTX_SHARE_B, smsg, sizeof(smsg),
                                         plain + 82)) < 0)
            goto fail;
        sfl__sa_share_msg(c->sid, c->id, a->id, ss[i].x, ss[i].y, smsg);
        if ((rc = sfl_seal_sign_detached(c->ident, SFL__SA_CTX_SHARE_S, smsg, sizeof(smsg),
                                         plain + 82 + SFL_SEAL_SIG_BYTES)) < 0)
            goto fail;
        if (a->id == c->id) {
            /* its own shares it keeps, as every holder does */
            memcpy(c->yb[rk], sb[i].y, 32);
            memcpy(c->ys[rk], ss[i].y, 32);
            memcpy(c->sigb[rk], plain + 82, SFL_SEAL_SIG_BYTES);
            memcpy(c->sigs[rk], plain + 82 + SFL_SEAL_SIG_BYTES, SFL_SEAL_SIG_BYTES);
            c->have[rk] = 1;
            continue;
        }
        sfl__sa_put64(plain, c->id);
        sfl__sa_put64(plain + 8, a->id);
        plain[16] = (uint8_t)sb[i].x;
        plain[17] = (uint8_t)(sb[i].x >> 8);
        memcpy(plain + 18, sb[i].y, 32);
        memcpy(plain + 50, ss[i].y, 32);
        if ((rc = box_key(c->c_sk, a->c_pk, c->sid, key)) < 0)
            goto fail;
        box_ad(c->sid, c->id, a->id, ad);
        b->from = c->id;
        b->to = a->id;
        randombytes_buf(b->nonce, sizeof(b->nonce));
        crypto_aead_xchacha20poly1305_ietf_encrypt(b->ct, &clen, plain, sizeof(plain), ad,
                                                   sizeof(ad), NULL, b->nonce, key);
        out->nboxes++;
    }
    out->id = c->id;
    if ((rc = sfl__sa_shares_msg(c->sid, c->id, (const uint8_t (*)[SFL_SA_POINT])out->commit,
                                 out->ncommit, &msg, &mlen)) < 0 ||
        (rc = sfl_seal_sign_detached(c->ident, SFL__SA_CTX_SHARES, msg, mlen, out->sig)) < 0)
        goto fail;
    c->stage = SFL__SA_ST_INPUT;
    rc = 0;
    goto out;
fail:
    sfl_sa_shares_clear(out);
    rc = client_abort(c, rc);
out:
    sodium_memzero(plain, sizeof(plain));
    sodium_memzero(smsg, sizeof(smsg));
    sodium_memzero(key, sizeof(key));
    sfl__free(msg);
    if (sb != NULL)
        sodium_memzero(sb, (size_t)n * sizeof(*sb));
    if (ss != NULL)
        sodium_memzero(ss, (size_t)n * sizeof(*ss));
    sfl__free(sb);
    sfl__free(ss);
    return rc;
}

/* Opens box b (to this client) and keeps its shares: 0, or 1 when the box
 * gives no share (it does not open, is not this client's, or a dealer
 * signature fails: the dealer's fault or the server's, which this client
 * cannot prove, so it holds no share of b->from and goes on), or an error
 * for a box the server should never have routed here. */
static int take_box(sfl_sa_client_t *c, const sfl_sa_box_t *b)
{
    const sfl_sa_adv_t *a = adv_of(c, b->from);
    uint8_t plain[SFL_SA_BOX_PLAIN], key[32], ad[SFL_SA_HASH + 16];
    unsigned long long plen;
    int rk = sfl__sa_rank_of(c->members, c->r.n, b->from), rc;
    uint16_t x;

    if (a == NULL || rk < 0 || b->to != c->id || b->from == c->id)
        return sfl__fail(SFL_EINVAL, "secure aggregation: a box from %llu to %llu",
                         (unsigned long long)b->from, (unsigned long long)b->to);
    if (c->have[rk])
        return sfl__fail(SFL_EINVAL, "secure aggregation: two boxes from %llu",
                         (unsigned long long)b->from);
    if ((rc = box_key(c->c_sk, a->c_pk, c->sid, key)) < 0)
        return rc;
    box_ad(c->sid, b->from, c->id, ad);
    rc = crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, b->ct, sizeof(b->ct), ad,
                                                    sizeof(ad), b->nonce, key);
    sodium_memzero(key, sizeof(key));
    if (rc != 0 || plen != SFL_SA_BOX_PLAIN) {
        sodium_memzero(plain, sizeof(plain));
        return 1;
    }
    x = (uint16_t)(plain[16] | plain[17] << 8);
    rc = get64(plain) != b->from || get64(plain + 8) != c->id || x != c->rank + 1 ||
         !sfl_shamir_canonical(plain + 18) || !sfl_shamir_canonical(plain + 50);
    if (rc == 0) {
        sfl_share_t sb = {.x = x}, ss = {.x = x};

        memcpy(sb.y, plain + 18, 32);
        memcpy(ss.y, plain + 50, 32);
        rc = sfl__sa_share_verify(c->sid, c->members[rk].pk, 'b', b->from, c->id, &sb,
                                  plain + 82) < 0 ||
             sfl__sa_share_verify(c->sid, c->members[rk].pk, 's', b->from, c->id, &ss,
                                  plain + 82 + SFL_SEAL_SIG_BYTES) < 0;
        sodium_memzero(&sb, sizeof(sb));
        sodium_memzero(&ss, sizeof(ss));
    }
    if (rc == 0) {
        memcpy(c->yb[rk], plain + 18, 32);
        memcpy(c->ys[rk], plain + 50, 32);
        memcpy(c->sigb[rk], plain + 82, SFL_SEAL_SIG_BYTES);
        memcpy(c->sigs[rk], plain + 82 + SFL_SEAL_SIG_BYTES, SFL_SEAL_SIG_BYTES);
        c->have[rk] = 1;
    }
    sodium_memzero(plain, sizeof(plain));
    return rc != 0;
}

int sfl_sa_client_input(sfl_sa_client_t *c, const uint64_t *u2, uint32_t n2,
                        const sfl_sa_box_t *boxes, uint32_t nb, const uint32_t *q,
                        sfl_sa_input_t *out)
{
    uint8_t b[32], key[32], msg[SFL_SA_HASH + 8 + SFL_SA_HASH];
    uint64_t *ids = NULL;
    uint32_t want = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = client_stage(c, SFL__SA_ST_INPUT)) < 0)
        return rc;
    if ((ids = sfl__calloc(c->n1, sizeof(*ids))) == NULL ||
        (c->u2 = sfl__calloc(n2 ? n2 : 1, sizeof(*c->u2))) == NULL ||
        (out->y = sfl__calloc(c->r.len, sizeof(uint32_t))) == NULL) {
        sfl__free(ids);
        return client_abort(c, sfl__fail(SFL_ENOMEM, "no memory for the masked input"));
    }
    for (uint32_t i = 0; i < c->n1; i++)
        ids[i] = c->u1[i].id;
    rc = check_subset("U2", u2, n2, ids, c->n1, c->r.t);
    sfl__free(ids);
    if (rc == 0 && !sfl__sa_in_list(u2, n2, c->id))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: this client is listed as dropped");
    for (uint32_t i = 0; rc == 0 && i < n2; i++)
        want += (uint32_t)sfl__sa_adjacent(&c->g, c->id, u2[i]);
    if (rc == 0 && nb != want)
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: %u boxes for %u neighbours in U2", nb,
                       want);
    for (uint32_t i = 0; rc == 0 && i < nb; i++) {
        if (!sfl__sa_in_list(u2, n2, boxes[i].from) ||
            !sfl__sa_adjacent(&c->g, c->id, boxes[i].from))
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: a box from %llu, not a neighbour "
                           "in U2", (unsigned long long)boxes[i].from);
        else if ((rc = take_box(c, &boxes[i])) > 0)
            rc = 0; /* no share of boxes[i].from: released as missing */
    }
    if (rc < 0) {
        sfl_sa_input_clear(out);
        return client_abort(c, rc);
    }
    memcpy(c->u2, u2, n2 * sizeof(*u2));
    c->n2 = n2;
    /* y = q + mask(b) + sum of the pairwise masks */
    memcpy(out->y, q, c->r.len * sizeof(uint32_t));
    sfl__sa_derive("sfl-sa-b", c->r_b, b);
    sfl_sa_mask_add(b, 1, out->y, c->r.len);
    sodium_memzero(b, sizeof(b));
    for (uint32_t i = 0; i < n2; i++) {
        const sfl_sa_adv_t *a = adv_of(c, u2[i]);
        int lower = c->id < u2[i];

        if (!sfl__sa_adjacent(&c->g, c->id, u2[i]))
            continue;
        if ((rc = sfl_sa_pair_key(c->s_sk, a->s_pk, lower ? c->s_pk : a->s_pk,
                                  lower ? a->s_pk : c->s_pk, c->sid, key)) < 0) {
            sfl_sa_input_clear(out);
            return client_abort(c, rc);
        }
        sfl_sa_mask_add(key, lower ? 1 : -1, out->y, c->r.len);
    }
    sodium_memzero(key, sizeof(key));
    out->id = c->id;
    out->len = c->r.len;
    sfl__sa_input_msg(c->sid, c->id, out->y, c->r.len, msg);
    if ((rc = sfl_seal_sign_detached(c->ident, SFL__SA_CTX_INPUT, msg, sizeof(msg),
                                     out->sig)) < 0) {
        sfl_sa_input_clear(out);
        return client_abort(c, rc);
    }
    c->stage = SFL__SA_ST_CONSIST;
    return 0;
}

int sfl_sa_client_consist(sfl_sa_client_t *c, const uint64_t *u3, uint32_t n3,
                          sfl_sa_consist_t *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = client_stage(c, SFL__SA_ST_CONSIST)) < 0)
        return rc;
    rc = check_subset("U3", u3, n3, c->u2, c->n2, c->r.t);
    if (rc == 0 && !sfl__sa_in_list(u3, n3, c->id))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: this client's input is listed missing");
    if (rc == 0 && (c->u3 = sfl__calloc(n3, sizeof(*c->u3))) == NULL)
        rc = sfl__fail(SFL_ENOMEM, "no memory for U3");
    if (rc < 0)
        return client_abort(c, rc);
    memcpy(c->u3, u3, n3 * sizeof(*u3));
    c->n3 = n3;
    sfl__sa_u3_msg(c->sid, u3, n3, c->u3h);
    out->id = c->id;
    if ((rc = sfl_seal_sign_detached(c->ident, SFL__SA_CTX_U3, c->u3h, sizeof(c->u3h),
                                     out->sig)) < 0)
        return client_abort(c, rc);
    c->stage = SFL__SA_ST_UNMASK;
    return 0;
}

int sfl_sa_client_unmask(sfl_sa_client_t *c, const sfl_sa_consist_t *sigs, uint32_t ns,
                         sfl_sa_reveal_t *out, uint32_t *nout)
{
    uint32_t good = 0;
    uint64_t last = 0;
    int rc;

    *nout = 0;
    if ((rc = client_stage(c, SFL__SA_ST_UNMASK)) < 0)
        return rc; /* a second request aborts here: the stage is past */
    for (uint32_t i = 0; i < ns; i++) {
        int rk = sfl__sa_rank_of(c->members, c->r.n, sigs[i].id);

        if (rk < 0 || !sfl__sa_in_list(c->u3, c->n3, sigs[i].id) || (i > 0 && sigs[i].id <= last))
            return client_abort(c, sfl__fail(SFL_EINVAL, "secure aggregation: a consistency "
                                             "signature of %llu, not one of U3 in order",
                                             (unsigned long long)sigs[i].id));
        last = sigs[i].id;
        if (sfl_seal_verify_detached(c->members[rk].pk, SFL__SA_CTX_U3, c->u3h, sizeof(c->u3h),
                                     sigs[i].sig) < 0)
            return client_abort(c, sfl__fail(SFL_EBADSIG, "secure aggregation: %llu signed "
                                             "another U3", (unsigned long long)sigs[i].id));
        good++;
    }
    if (good < c->r.t)
        return client_abort(c, sfl__fail(SFL_EEMPTY, "secure aggregation: %u consistency "
                                         "signatures, fewer than the threshold %u", good,
                                         c->r.t));
    /* for itself and each neighbour in U2: r_b's share if it sent its
     * input, r_s's if not; never both */
    for (uint32_t i = 0; i < c->n2; i++) {
        int rk = sfl__sa_rank_of(c->members, c->r.n, c->u2[i]);
        int in3 = sfl__sa_in_list(c->u3, c->n3, c->u2[i]);

        /* a box that gave no share: nothing to release of that client */
        if (!sfl__sa_holds(&c->g, c->u2[i], c->id) || !c->have[rk])
            continue;
        out[*nout].of = c->u2[i];
        out[*nout].type = in3 ? 'b' : 's';
        out[*nout].share.x = (uint16_t)(c->rank + 1);
        memcpy(out[*nout].share.y, in3 ? c->yb[rk] : c->ys[rk], 32);
        memcpy(out[*nout].sig, in3 ? c->sigb[rk] : c->sigs[rk], SFL_SEAL_SIG_BYTES);
        (*nout)++;
    }
    c->stage = SFL__SA_ST_DONE;
    client_wipe(c);
    return 0;
}

int sfl_sa_client_aborted(const sfl_sa_client_t *c)
{
    return c->aborted;
}

void sfl_sa_client_free(sfl_sa_client_t *c)
{
    if (c == NULL)
        return;
    client_wipe(c);
    sfl__free(c->members);
    sfl__free(c->yb);
    sfl__free(c->ys);
    sfl__free(c->sigb);
    sfl__free(c->sigs);
    sfl__free(c->have);
    sfl__free(c->u1);
    sfl__free(c->g.pos);
    sfl__free(c->u2);
    sfl__free(c->u3);
    sfl__free(c);
}

void sfl_sa_shares_clear(sfl_sa_shares_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->boxes);
    sfl__free(m->commit);
    memset(m, 0, sizeof(*m));
}

void sfl_sa_input_clear(sfl_sa_input_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->y);
    memset(m, 0, sizeof(*m));
}

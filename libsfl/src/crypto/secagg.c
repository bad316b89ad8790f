/* Secure aggregation's protocol: sfl/crypto/secagg.h. Secrets live in the client
 * struct and are wiped (sodium_memzero) on abort, after release and when it
 * is freed. */
#include "sfl/crypto/secagg.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/savec.h"

#define CTX_ADV "sfl-sa-adv-v1"
#define CTX_SHARES "sfl-sa-shares-v2"
#define CTX_SHARE_B "sfl-sa-share-b-v1"
#define CTX_SHARE_S "sfl-sa-share-s-v1"
#define CTX_INPUT "sfl-sa-input-v1"
#define CTX_U3 "sfl-sa-u3-v1"

enum { ST_ADV = 1, ST_SHARE, ST_INPUT, ST_CONSIST, ST_UNMASK, ST_DONE };

/* ---- shared pieces ----------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static void hash_u64(crypto_generichash_state *st, uint64_t v)
{
    uint8_t b[8];

    put64(b, v);
    crypto_generichash_update(st, b, 8);
}

static void hash_str(crypto_generichash_state *st, const char *s)
{
    crypto_generichash_update(st, (const uint8_t *)s, strlen(s));
}

void sfl_sa_policy_default(sfl_sa_policy_t *p)
{
    p->min_n = 3;
    p->min_t = 2;
    p->min_degree = 16;
    p->max_colluders = SFL_SA_COLLUDERS_THIRD;
}

uint32_t sfl_sa_degree(const sfl_sa_round_t *r, uint32_t n1)
{
    return r->degree == 0 || r->degree + 1 >= n1 ? (n1 > 0 ? n1 - 1 : 0) : r->degree;
}

uint32_t sfl_sa_holders(const sfl_sa_round_t *r, uint32_t n1)
{
    uint32_t k = sfl_sa_degree(r, n1);
    uint64_t ratio, major;

    if (k + 1 >= n1)
        return r->t;
    ratio = ((uint64_t)r->t * (k + 1) + r->n - 1) / r->n;
    major = (k + 1) / 2 + 1;
    return (uint32_t)(ratio > major ? ratio : major);
}

void sfl_sa_ring(const uint8_t sid[SFL_SA_HASH], uint32_t n1, uint32_t *ring)
{
    crypto_generichash_state st;
    uint8_t key[32];
    uint32_t w[16];
    uint64_t next = 0;
    unsigned have = 0;

    crypto_generichash_init(&st, NULL, 0, sizeof(key));
    hash_str(&st, "sfl-sa-graph");
    crypto_generichash_update(&st, sid, SFL_SA_HASH);
    crypto_generichash_final(&st, key, sizeof(key));
    for (uint32_t i = 0; i < n1; i++)
        ring[i] = i;
    for (uint32_t p = n1 > 0 ? n1 - 1 : 0; p >= 1; p--) {
        uint64_t m = (uint64_t)p + 1, lim = (1ull << 32) - (1ull << 32) % m;
        uint32_t j, tmp;

        do {
            if (have == 0) {
                sfl_sa_mask_words(key, next, w, 16);
                next += 16;
                have = 16;
            }
            j = w[16 - have--];
        } while (j >= lim);
        j = (uint32_t)(j % m);
        tmp = ring[p];
        ring[p] = ring[j];
        ring[j] = tmp;
    }
}

void sfl_sa_support_hash(const uint32_t *support, uint32_t n, uint8_t out[SFL_SA_HASH])
{
    crypto_generichash_state st;
    uint8_t b[4];

    crypto_generichash_init(&st, NULL, 0, SFL_SA_HASH);
    hash_str(&st, "sfl-sa-support");
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 4; k++)
            b[k] = (uint8_t)(support[i] >> (8 * k));
        crypto_generichash_update(&st, b, 4);
    }
    crypto_generichash_final(&st, out, SFL_SA_HASH);
}

/* The round's fields both hashes below start with, after their label. */
static void hash_round(crypto_generichash_state *st, const char *label, const sfl_sa_round_t *r)
{
    crypto_generichash_init(st, NULL, 0, SFL_SA_HASH);
    hash_str(st, label);
    hash_u64(st, r->job);
    hash_u64(st, r->round);
    hash_u64(st, r->attempt);
    crypto_generichash_update(st, r->nonce, sizeof(r->nonce));
    crypto_generichash_update(st, r->model_hash, SFL_SA_HASH);
    crypto_generichash_update(st, r->support_hash, SFL_SA_HASH);
    hash_u64(st, r->len);
    hash_u64(st, r->t);
    hash_u64(st, r->n);
    hash_u64(st, r->degree);
}

/* The round's header hash: what an advertisement signs. */
static void round_hash(const sfl_sa_round_t *r, const sfl_sa_member_t *members,
                       uint8_t out[SFL_SA_HASH])
{
    crypto_generichash_state st;

    hash_round(&st, "sfl-sa-round-v1", r);
    for (uint32_t i = 0; i < r->n; i++) {
        hash_u64(&st, members[i].id);
        crypto_generichash_update(&st, members[i].pk, SFL_SEAL_PK_BYTES);
    }
    crypto_generichash_final(&st, out, SFL_SA_HASH);
}

void sfl_sa_session_id(const sfl_sa_round_t *r, const sfl_sa_adv_t *u1, uint32_t n1,
                       uint8_t sid[SFL_SA_HASH])
{
    crypto_generichash_state st;

    hash_round(&st, "sfl-sa-v1", r);
    for (uint32_t i = 0; i < n1; i++) {
        hash_u64(&st, u1[i].id);
        crypto_generichash_update(&st, u1[i].c_pk, 32);
        crypto_generichash_update(&st, u1[i].s_pk, 32);
    }
    crypto_generichash_final(&st, sid, SFL_SA_HASH);
}

/* The rank of id among members (ascending), or -1. */
static int rank_of(const sfl_sa_member_t *m, uint32_t n, uint64_t id)
{
    uint32_t lo = 0, hi = n;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (m[mid].id == id)
            return (int)mid;
        if (m[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int in_list(const uint64_t *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
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
        if (!in_list(within, nw, ids[i]))
            return sfl__fail(SFL_EINVAL, "%s: client %llu was not in the stage before", what,
                             (unsigned long long)ids[i]);
    }
    if (n < t)
        return sfl__fail(SFL_EEMPTY, "%s: %u clients, fewer than the threshold %u", what, n, t);
    return 0;
}

/* 0 if pk is a usable X25519 key: a scalar multiplication by a random
 * scalar does not give the all-zero point (libsodium refuses small order). */
static int x25519_ok(const uint8_t pk[32])
{
    uint8_t k[32], q[32];
    int rc;

    randombytes_buf(k, sizeof(k));
    rc = crypto_scalarmult(q, k, pk);
    sodium_memzero(k, sizeof(k));
    sodium_memzero(q, sizeof(q));
    return rc == 0 ? 0 : SFL_EINVAL;
}

static int adv_verify(const uint8_t rh[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                      const sfl_sa_adv_t *a)
{
    uint8_t msg[SFL_SA_HASH + 8 + 64];

    memcpy(msg, rh, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, a->id);
    memcpy(msg + SFL_SA_HASH + 8, a->c_pk, 32);
    memcpy(msg + SFL_SA_HASH + 40, a->s_pk, 32);
    return sfl_seal_verify_detached(pk, CTX_ADV, msg, sizeof(msg), a->sig);
}

/* What a stage-2 signature covers: sid | u64 id | u64 ncommit | the
 * commitments (sfl_seal hashes it). */
static int shares_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id,
                      const uint8_t (*commit)[SFL_SA_POINT], uint32_t ncommit, uint8_t **out,
                      size_t *len)
{
    uint8_t *msg;

    *len = SFL_SA_HASH + 16 + (size_t)ncommit * SFL_SA_POINT;
    if ((*out = msg = sfl__calloc(1, *len)) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the commitments");
    memcpy(msg, sid, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, id);
    put64(msg + SFL_SA_HASH + 8, ncommit);
    if (ncommit > 0)
        memcpy(msg + SFL_SA_HASH + 16, commit, (size_t)ncommit * SFL_SA_POINT);
    return 0;
}

static int shares_verify(const uint8_t sid[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                         const sfl_sa_shares_t *m)
{
    uint8_t *msg;
    size_t len;
    int rc;

    if ((rc = shares_msg(sid, m->id, (const uint8_t (*)[SFL_SA_POINT])m->commit, m->ncommit,
                         &msg, &len)) < 0)
        return rc;
    rc = sfl_seal_verify_detached(pk, CTX_SHARES, msg, len, m->sig);
    sfl__free(msg);
    return rc;
}

/* What a dealer's signature of one share covers: sid | u64 dealer |
 * u64 holder | u16 x | y, under CTX_SHARE_B or CTX_SHARE_S (so a share of
 * r_s never passes for one of r_b). */
static void share_msg(const uint8_t sid[SFL_SA_HASH], uint64_t u, uint64_t v, uint16_t x,
                      const uint8_t y[32], uint8_t msg[SFL_SA_SHARE_MSG])
{
    memcpy(msg, sid, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, u);
    put64(msg + SFL_SA_HASH + 8, v);
    msg[SFL_SA_HASH + 16] = (uint8_t)x;
    msg[SFL_SA_HASH + 17] = (uint8_t)(x >> 8);
    memcpy(msg + SFL_SA_HASH + 18, y, 32);
}

static int share_verify(const uint8_t sid[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                        char type, uint64_t u, uint64_t v, const sfl_share_t *sh,
                        const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t msg[SFL_SA_SHARE_MSG];
    int rc;

    share_msg(sid, u, v, sh->x, sh->y, msg);
    rc = sfl_seal_verify_detached(pk, type == 'b' ? CTX_SHARE_B : CTX_SHARE_S, msg, sizeof(msg),
                                  sig);
    sodium_memzero(msg, sizeof(msg));
    return rc;
}

static void input_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id, const uint32_t *y,
                      uint32_t len, uint8_t msg[SFL_SA_HASH + 8 + SFL_SA_HASH])
{
    uint8_t w[4 * 256];
    crypto_generichash_state st;

    memcpy(msg, sid, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, id);
    crypto_generichash_init(&st, NULL, 0, SFL_SA_HASH);
    /* the words little-endian, hashed 256 at a time */
    for (uint32_t i = 0; i < len; i += 256) {
        uint32_t n = len - i < 256 ? len - i : 256;

        for (uint32_t j = 0; j < n; j++)
            for (int k = 0; k < 4; k++)
                w[4 * j + (uint32_t)k] = (uint8_t)(y[i + j] >> (8 * k));
        crypto_generichash_update(&st, w, 4 * (size_t)n);
    }
    crypto_generichash_final(&st, msg + SFL_SA_HASH + 8, SFL_SA_HASH);
}

/* What a stage-4 signature covers: sid | |U3| | U3. */
static void u3_msg(const uint8_t sid[SFL_SA_HASH], const uint64_t *u3, uint32_t n,
                   uint8_t out[SFL_SA_HASH])
{
    crypto_generichash_state st;

    crypto_generichash_init(&st, NULL, 0, SFL_SA_HASH);
    crypto_generichash_update(&st, sid, SFL_SA_HASH);
    hash_u64(&st, n);
    for (uint32_t i = 0; i < n; i++)
        hash_u64(&st, u3[i]);
    crypto_generichash_final(&st, out, SFL_SA_HASH);
}

/* b = BLAKE2b-256("sfl-sa-b" | r_b); s_sk = BLAKE2b-256("sfl-sa-s" | r_s). */
static void derive(const char *label, const uint8_t r[32], uint8_t out[32])
{
    crypto_generichash_state st;

    crypto_generichash_init(&st, NULL, 0, 32);
    hash_str(&st, label);
    crypto_generichash_update(&st, r, 32);
    crypto_generichash_final(&st, out, 32);
}

int sfl_sa_pair_key(const uint8_t s_sk[32], const uint8_t other_pk[32], const uint8_t lo_pk[32],
                    const uint8_t hi_pk[32], const uint8_t sid[SFL_SA_HASH], uint8_t key[32])
{
    crypto_generichash_state st;
    uint8_t dh[32];

    if (crypto_scalarmult(dh, s_sk, other_pk) != 0)
        return sfl__fail(SFL_EINVAL, "a mask key of small order");
    crypto_generichash_init(&st, NULL, 0, 32);
    hash_str(&st, "sfl-sa-mask");
    crypto_generichash_update(&st, dh, 32);
    crypto_generichash_update(&st, lo_pk, 32);
    crypto_generichash_update(&st, hi_pk, 32);
    crypto_generichash_update(&st, sid, SFL_SA_HASH);
    crypto_generichash_final(&st, key, 32);
    sodium_memzero(dh, sizeof(dh));
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
    hash_str(&st, "sfl-sa-box");
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
    put64(ad + SFL_SA_HASH, u);
    put64(ad + SFL_SA_HASH + 8, v);
}

static int check_round(const sfl_sa_round_t *r)
{
    if (r->n == 0 || r->members == NULL || r->n > SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "secure aggregation: a cohort of %u", r->n);
    if (r->t == 0 || r->t > r->n || 2 * (uint64_t)r->t <= r->n)
        return sfl__fail(SFL_EINVAL, "secure aggregation: threshold %u of %u (need n / 2 < t "
                         "<= n)", r->t, r->n);
    if (r->len < 2)
        return sfl__fail(SFL_EINVAL, "secure aggregation: vector of %u words", r->len);
    if (r->degree % 2 != 0)
        return sfl__fail(SFL_EINVAL, "secure aggregation: graph degree %u (need 0 or even)",
                         r->degree);
    for (uint32_t i = 0; i < r->n; i++)
        if (r->members[i].id == 0 || (i > 0 && r->members[i].id <= r->members[i - 1].id))
            return sfl__fail(SFL_EINVAL, "secure aggregation: cohort ids not strictly "
                             "ascending and > 0 (entry %u)", i);
    return 0;
}

/* The round's graph over U1 (ascending ids): pos[i] is the ring place of
 * U1's i-th member; the complete graph has none. */
typedef struct sa_graph {
    uint32_t n1, k;
    uint32_t *pos;
    const sfl_sa_adv_t *u1;
} sa_graph_t;

static int u1_index(const sa_graph_t *g, uint64_t id)
{
    uint32_t lo = 0, hi = g->n1;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (g->u1[mid].id == id)
            return (int)mid;
        if (g->u1[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int graph_init(sa_graph_t *g, const sfl_sa_round_t *r, const uint8_t sid[SFL_SA_HASH],
                      const sfl_sa_adv_t *u1, uint32_t n1)
{
    uint32_t *ring;

    *g = (sa_graph_t){.n1 = n1, .k = sfl_sa_degree(r, n1), .u1 = u1};
    if (g->k + 1 >= n1)
        return 0;
    if ((ring = sfl__calloc(n1, sizeof(*ring))) == NULL ||
        (g->pos = sfl__calloc(n1, sizeof(*g->pos))) == NULL) {
        sfl__free(ring);
        return sfl__fail(SFL_ENOMEM, "no memory for the mask graph");
    }
    sfl_sa_ring(sid, n1, ring);
    for (uint32_t p = 0; p < n1; p++)
        g->pos[ring[p]] = p;
    sfl__free(ring);
    return 0;
}

/* 1 if u and v are distinct members of U1 and neighbours. */
static int adjacent(const sa_graph_t *g, uint64_t u, uint64_t v)
{
    int a = u1_index(g, u), b = u1_index(g, v);
    uint32_t d;

    if (a < 0 || b < 0 || a == b)
        return 0;
    if (g->pos == NULL)
        return 1;
    d = g->pos[a] > g->pos[b] ? g->pos[a] - g->pos[b] : g->pos[b] - g->pos[a];
    if (d > g->n1 - d)
        d = g->n1 - d;
    return d <= g->k / 2;
}

/* 1 if v holds shares of u's seeds: u itself or a neighbour. */
static int holds(const sa_graph_t *g, uint64_t u, uint64_t v)
{
    return u == v ? u1_index(g, u) >= 0 : adjacent(g, u, v);
}

/* ---- client ------------------------------------------------------------ */

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
    sa_graph_t g;
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
    if ((rc = check_round(r)) < 0)
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
    if ((rk = rank_of(r->members, r->n, id)) < 0)
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
    round_hash(r, c->members, c->rh);
    randombytes_buf(c->c_sk, 32);
    crypto_scalarmult_base(c->c_pk, c->c_sk);
    sfl_shamir_random(c->r_b);
    sfl_shamir_random(c->r_s);
    derive("sfl-sa-s", c->r_s, c->s_sk);
    crypto_scalarmult_base(c->s_pk, c->s_sk);
    memset(adv, 0, sizeof(*adv));
    adv->id = id;
    memcpy(adv->c_pk, c->c_pk, 32);
    memcpy(adv->s_pk, c->s_pk, 32);
    memcpy(msg, c->rh, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, id);
    memcpy(msg + SFL_SA_HASH + 8, c->c_pk, 32);
    memcpy(msg + SFL_SA_HASH + 40, c->s_pk, 32);
    if ((rc = sfl_seal_sign_detached(ident, CTX_ADV, msg, sizeof(msg), adv->sig)) < 0) {
        sfl_sa_client_free(c);
        return rc;
    }
    c->stage = ST_SHARE;
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
        int rk = rank_of(c->members, c->r.n, a->id);

        if (rk < 0)
            return sfl__fail(SFL_EINVAL, "secure aggregation: keys of %llu, not in the cohort",
                             (unsigned long long)a->id);
        if (i > 0 && a->id <= advs[i - 1].id)
            return sfl__fail(SFL_EINVAL, "secure aggregation: repeated or unordered client %llu",
                             (unsigned long long)a->id);
        if ((rc = adv_verify(c->rh, c->members[rk].pk, a)) < 0)
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
    int i = u1_index(&c->g, id);

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
    if ((rc = client_stage(c, ST_SHARE)) < 0)
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
    if ((rc = graph_init(&c->g, &c->r, c->sid, c->u1, n)) < 0)
        goto fail;
    /* the neighbours' mask keys (their share keys fail box_key if bad) */
    for (uint32_t i = 0; i < n; i++)
        if (adjacent(&c->g, c->id, advs[i].id) && x25519_ok(advs[i].s_pk) < 0) {
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: a key of %llu is of small order",
                           (unsigned long long)advs[i].id);
            goto fail;
        }
    /* a share for itself and each neighbour, at x = 1 + cohort rank */
    for (uint32_t i = 0; i < n; i++)
        if (holds(&c->g, c->id, advs[i].id))
            sb[m++].x = (uint16_t)(rank_of(c->members, c->r.n, advs[i].id) + 1);
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
        share_msg(c->sid, c->id, a->id, sb[i].x, sb[i].y, smsg);
        if ((rc = sfl_seal_sign_detached(c->ident, CTX_SHARE_B, smsg, sizeof(smsg),
                                         plain + 82)) < 0)
            goto fail;
        share_msg(c->sid, c->id, a->id, ss[i].x, ss[i].y, smsg);
        if ((rc = sfl_seal_sign_detached(c->ident, CTX_SHARE_S, smsg, sizeof(smsg),
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
        put64(plain, c->id);
        put64(plain + 8, a->id);
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
    if ((rc = shares_msg(c->sid, c->id, (const uint8_t (*)[SFL_SA_POINT])out->commit,
                         out->ncommit, &msg, &mlen)) < 0 ||
        (rc = sfl_seal_sign_detached(c->ident, CTX_SHARES, msg, mlen, out->sig)) < 0)
        goto fail;
    c->stage = ST_INPUT;
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
    int rk = rank_of(c->members, c->r.n, b->from), rc;
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
        rc = share_verify(c->sid, c->members[rk].pk, 'b', b->from, c->id, &sb, plain + 82) < 0 ||
             share_verify(c->sid, c->members[rk].pk, 's', b->from, c->id, &ss,
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
    if ((rc = client_stage(c, ST_INPUT)) < 0)
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
    if (rc == 0 && !in_list(u2, n2, c->id))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: this client is listed as dropped");
    for (uint32_t i = 0; rc == 0 && i < n2; i++)
        want += (uint32_t)adjacent(&c->g, c->id, u2[i]);
    if (rc == 0 && nb != want)
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: %u boxes for %u neighbours in U2", nb,
                       want);
    for (uint32_t i = 0; rc == 0 && i < nb; i++) {
        if (!in_list(u2, n2, boxes[i].from) || !adjacent(&c->g, c->id, boxes[i].from))
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
    derive("sfl-sa-b", c->r_b, b);
    sfl_sa_mask_add(b, 1, out->y, c->r.len);
    sodium_memzero(b, sizeof(b));
    for (uint32_t i = 0; i < n2; i++) {
        const sfl_sa_adv_t *a = adv_of(c, u2[i]);
        int lower = c->id < u2[i];

        if (!adjacent(&c->g, c->id, u2[i]))
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
    input_msg(c->sid, c->id, out->y, c->r.len, msg);
    if ((rc = sfl_seal_sign_detached(c->ident, CTX_INPUT, msg, sizeof(msg), out->sig)) < 0) {
        sfl_sa_input_clear(out);
        return client_abort(c, rc);
    }
    c->stage = ST_CONSIST;
    return 0;
}

int sfl_sa_client_consist(sfl_sa_client_t *c, const uint64_t *u3, uint32_t n3,
                          sfl_sa_consist_t *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = client_stage(c, ST_CONSIST)) < 0)
        return rc;
    rc = check_subset("U3", u3, n3, c->u2, c->n2, c->r.t);
    if (rc == 0 && !in_list(u3, n3, c->id))
        rc = sfl__fail(SFL_EINVAL, "secure aggregation: this client's input is listed missing");
    if (rc == 0 && (c->u3 = sfl__calloc(n3, sizeof(*c->u3))) == NULL)
        rc = sfl__fail(SFL_ENOMEM, "no memory for U3");
    if (rc < 0)
        return client_abort(c, rc);
    memcpy(c->u3, u3, n3 * sizeof(*u3));
    c->n3 = n3;
    u3_msg(c->sid, u3, n3, c->u3h);
    out->id = c->id;
    if ((rc = sfl_seal_sign_detached(c->ident, CTX_U3, c->u3h, sizeof(c->u3h), out->sig)) < 0)
        return client_abort(c, rc);
    c->stage = ST_UNMASK;
    return 0;
}

int sfl_sa_client_unmask(sfl_sa_client_t *c, const sfl_sa_consist_t *sigs, uint32_t ns,
                         sfl_sa_reveal_t *out, uint32_t *nout)
{
    uint32_t good = 0;
    uint64_t last = 0;
    int rc;

    *nout = 0;
    if ((rc = client_stage(c, ST_UNMASK)) < 0)
        return rc; /* a second request aborts here: the stage is past */
    for (uint32_t i = 0; i < ns; i++) {
        int rk = rank_of(c->members, c->r.n, sigs[i].id);

        if (rk < 0 || !in_list(c->u3, c->n3, sigs[i].id) || (i > 0 && sigs[i].id <= last))
            return client_abort(c, sfl__fail(SFL_EINVAL, "secure aggregation: a consistency "
                                             "signature of %llu, not one of U3 in order",
                                             (unsigned long long)sigs[i].id));
        last = sigs[i].id;
        if (sfl_seal_verify_detached(c->members[rk].pk, CTX_U3, c->u3h, sizeof(c->u3h),
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
        int rk = rank_of(c->members, c->r.n, c->u2[i]);
        int in3 = in_list(c->u3, c->n3, c->u2[i]);

        /* a box that gave no share: nothing to release of that client */
        if (!holds(&c->g, c->u2[i], c->id) || !c->have[rk])
            continue;
        out[*nout].of = c->u2[i];
        out[*nout].type = in3 ? 'b' : 's';
        out[*nout].share.x = (uint16_t)(c->rank + 1);
        memcpy(out[*nout].share.y, in3 ? c->yb[rk] : c->ys[rk], 32);
        memcpy(out[*nout].sig, in3 ? c->sigb[rk] : c->sigs[rk], SFL_SEAL_SIG_BYTES);
        (*nout)++;
    }
    c->stage = ST_DONE;
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

/* ---- server ------------------------------------------------------------ */

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
    sa_graph_t g;
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
    if (rank_of(s->members, s->r.n, id) >= 0 && s->nculprit < s->r.n)
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
    if ((rc = check_round(r)) < 0)
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
    round_hash(r, s->members, s->rh);
    s->stage = ST_ADV;
    *out = s;
    return 0;
}

static sa_slot_t *slot_of(sfl_sa_server_t *s, uint64_t id, const char *what, int *rc)
{
    int rk = rank_of(s->members, s->r.n, id);

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

    if ((rc = server_stage(s, ST_ADV, "keys")) < 0 ||
        (sl = slot_of(s, adv->id, "keys", &rc)) == NULL)
        return rc;
    if (adv_verify(s->rh, s->members[sl - s->slot].pk, adv) < 0)
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
    if (x25519_ok(adv->c_pk) < 0 || x25519_ok(adv->s_pk) < 0 ||
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
        s->stage = ST_DONE;
        return sfl__fail(SFL_EEMPTY, "secure aggregation: %u %s, fewer than the threshold %u",
                         *n, what, s->r.t);
    }
    return 0;
}

int sfl_sa_server_end_adv(sfl_sa_server_t *s, const sfl_sa_adv_t **advs, uint32_t *n)
{
    int rc;

    /* u2 is free until the shares end */
    if ((rc = end_stage(s, ST_ADV, offsetof(sa_slot_t, adv), s->u2, &s->n1,
                        "clients advertised keys")) < 0)
        return rc;
    for (uint32_t i = 0; i < s->n1; i++)
        s->u1[i] = s->slot[rank_of(s->members, s->r.n, s->u2[i])].a;
    sfl_sa_session_id(&s->r, s->u1, s->n1, s->sid);
    if ((rc = graph_init(&s->g, &s->r, s->sid, s->u1, s->n1)) < 0)
        return rc;
    s->tau = sfl_sa_holders(&s->r, s->n1);
    s->stage = ST_SHARE;
    *advs = s->u1;
    *n = s->n1;
    return 0;
}

int sfl_sa_server_shares(sfl_sa_server_t *s, sfl_sa_shares_t *m)
{
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, ST_SHARE, "shares")) < 0 ||
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

        if (b->from != m->id || !adjacent(&s->g, m->id, b->to))
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

    if ((rc = end_stage(s, ST_SHARE, offsetof(sa_slot_t, shared), s->u2, &s->n2,
                        "clients shared their keys")) < 0)
        return rc;
    s->stage = ST_INPUT;
    *u2 = s->u2;
    *n = s->n2;
    return 0;
}

int sfl_sa_server_inbox(const sfl_sa_server_t *s, uint64_t v, sfl_sa_box_t **boxes, uint32_t *n)
{
    sfl_sa_box_t *out;

    *boxes = NULL;
    *n = 0;
    if (s->stage < ST_INPUT)
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

    if ((rc = server_stage(s, ST_INPUT, "an input")) < 0 ||
        (sl = slot_of(s, in->id, "an input", &rc)) == NULL)
        return rc;
    if (!sl->shared || sl->input)
        return sfl__fail(SFL_EINVAL, "secure aggregation: an input of %llu %s",
                         (unsigned long long)in->id, sl->input ? "twice" : "not in U2");
    if (in->len != s->r.len || in->y == NULL)
        return blame(s, in->id, SFL_SA_BLAME_MALFORMED,
                     sfl__fail(SFL_EINVAL, "secure aggregation: an input of %u words, the "
                               "round's %u", in->len, s->r.len));
    input_msg(s->sid, in->id, in->y, in->len, msg);
    if (sfl_seal_verify_detached(s->members[sl - s->slot].pk, CTX_INPUT, msg, sizeof(msg),
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

    if ((rc = end_stage(s, ST_INPUT, offsetof(sa_slot_t, input), s->u3, &s->n3, "inputs")) < 0)
        return rc;
    u3_msg(s->sid, s->u3, s->n3, s->u3h);
    s->stage = ST_CONSIST;
    *u3 = s->u3;
    *n = s->n3;
    return 0;
}

int sfl_sa_server_consist(sfl_sa_server_t *s, const sfl_sa_consist_t *m)
{
    sa_slot_t *sl;
    int rc;

    if ((rc = server_stage(s, ST_CONSIST, "a consistency signature")) < 0 ||
        (sl = slot_of(s, m->id, "a consistency signature", &rc)) == NULL)
        return rc;
    if (!sl->input || sl->consist)
        return sfl__fail(SFL_EINVAL, "secure aggregation: a consistency signature of %llu %s",
                         (unsigned long long)m->id, sl->consist ? "twice" : "not in U3");
    if (sfl_seal_verify_detached(s->members[sl - s->slot].pk, CTX_U3, s->u3h, sizeof(s->u3h),
                                 m->sig) < 0)
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
    rc = end_stage(s, ST_CONSIST, offsetof(sa_slot_t, consist), ids, &s->n4,
                   "consistency signatures");
    for (uint32_t i = 0; rc == 0 && i < s->n4; i++) {
        s->u4[i].id = ids[i];
        memcpy(s->u4[i].sig, s->slot[rank_of(s->members, s->r.n, ids[i])].sig4,
               SFL_SEAL_SIG_BYTES);
    }
    sfl__free(ids);
    if (rc < 0)
        return rc;
    s->stage = ST_UNMASK;
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

    if ((rc = server_stage(s, ST_UNMASK, "shares to unmask")) < 0 ||
        (sl = slot_of(s, from, "shares to unmask", &rc)) == NULL)
        return rc;
    if (!sl->consist || sl->unmasked)
        return sfl__fail(SFL_EINVAL, "secure aggregation: shares to unmask from %llu %s",
                         (unsigned long long)from, sl->unmasked ? "twice" : "not in U4");
    for (uint32_t i = 0; i < s->n2; i++)
        want += (uint32_t)holds(&s->g, s->u2[i], from);
    /* fewer when a box gave it no share */
    if (n > want)
        return blame(s, from, SFL_SA_BLAME_BADRELEASE,
                     sfl__fail(SFL_EINVAL, "secure aggregation: %llu released %u shares for the "
                               "%u clients of U2 it holds shares of", (unsigned long long)from,
                               n, want));
    for (uint32_t i = 0; i < n; i++) {
        const sfl_sa_reveal_t *v = &shares[i];
        int in3 = in_list(s->u3, s->n3, v->of);

        if (!in_list(s->u2, s->n2, v->of) || !holds(&s->g, v->of, from) ||
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
    int dr = rank_of(s->members, s->r.n, of);
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
            withheld += s->slot[i].unmasked && holds(&s->g, of, s->members[i].id);
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
            lg->ok[i] = share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i],
                                     lg->rv[i]->sig) == 0
                            ? 2
                            : (blame(s, lg->holder[i], SFL_SA_BLAME_ALTERED, 0), 0);
    } else if (rc < 0 && rc != SFL_EBADSIG)
        goto out;
    for (uint32_t i = 0; rc != SFL_EINVAL && i < k; i++) {
        if (lg->ok[i])
            continue;
        if (share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i], lg->rv[i]->sig) == 0) {
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
            lg->ok[i] = share_verify(s->sid, dpk, type, of, lg->holder[i], &lg->sh[i],
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

    if ((rc = server_stage(s, ST_UNMASK, "the end")) < 0)
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
        const sa_slot_t *sv = &s->slot[rank_of(s->members, s->r.n, v)];

        if (in_list(s->u3, s->n3, v)) {
            /* its self-mask */
            if ((rc = rebuild(s, &lg, v, 'b', r)) < 0) {
                first = first ? first : rc;
                continue;
            }
            derive("sfl-sa-b", r, k);
            sfl_sa_mask_add(k, -1, s->sum, s->r.len);
            continue;
        }
        /* dropped after sharing: its masks with every input taken */
        if ((rc = rebuild(s, &lg, v, 's', r)) < 0) {
            first = first ? first : rc;
            continue;
        }
        derive("sfl-sa-s", r, k);
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
            const sa_slot_t *sw = &s->slot[rank_of(s->members, s->r.n, w)];
            uint8_t key[32];
            int wlow = w < v;

            if (!adjacent(&s->g, v, w))
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
    s->stage = ST_DONE;
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

/* Secure aggregation's protocol (sfl/crypto/secagg.h): what its client
 * (secagg_client.c) and server (secagg_server.c) share, the round's
 * parameters, hashes, signed messages and mask graph (crypto/secagg_int.h),
 * and the public pieces both sides and the coordinator use. */
#include "sfl/crypto/secagg.h"
#include "crypto/secagg_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/savec.h"

void sfl__sa_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void hash_u64(crypto_generichash_state *st, uint64_t v)
{
    uint8_t b[8];

    sfl__sa_put64(b, v);
    crypto_generichash_update(st, b, 8);
}

void sfl__sa_hash_str(crypto_generichash_state *st, const char *s)
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
    sfl__sa_hash_str(&st, "sfl-sa-graph");
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
    sfl__sa_hash_str(&st, "sfl-sa-support");
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
    sfl__sa_hash_str(st, label);
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
void sfl__sa_round_hash(const sfl_sa_round_t *r, const sfl_sa_member_t *members,
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
int sfl__sa_rank_of(const sfl_sa_member_t *m, uint32_t n, uint64_t id)
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

int sfl__sa_in_list(const uint64_t *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* 0 if pk is a usable X25519 key: a scalar multiplication by a random
 * scalar does not give the all-zero point (libsodium refuses small order). */
int sfl__sa_x25519_ok(const uint8_t pk[32])
{
    uint8_t k[32], q[32];
    int rc;

    randombytes_buf(k, sizeof(k));
    rc = crypto_scalarmult(q, k, pk);
    sodium_memzero(k, sizeof(k));
    sodium_memzero(q, sizeof(q));
    return rc == 0 ? 0 : SFL_EINVAL;
}

int sfl__sa_adv_verify(const uint8_t rh[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                       const sfl_sa_adv_t *a)
{
    uint8_t msg[SFL_SA_HASH + 8 + 64];

    memcpy(msg, rh, SFL_SA_HASH);
    sfl__sa_put64(msg + SFL_SA_HASH, a->id);
    memcpy(msg + SFL_SA_HASH + 8, a->c_pk, 32);
    memcpy(msg + SFL_SA_HASH + 40, a->s_pk, 32);
    return sfl_seal_verify_detached(pk, SFL__SA_CTX_ADV, msg, sizeof(msg), a->sig);
}

/* What a stage-2 signature covers: sid | u64 id | u64 ncommit | the
 * commitments (sfl_seal hashes it). */
int sfl__sa_shares_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id,
                       const uint8_t (*commit)[SFL_SA_POINT], uint32_t ncommit, uint8_t **out,
                       size_t *len)
{
    uint8_t *msg;

    *len = SFL_SA_HASH + 16 + (size_t)ncommit * SFL_SA_POINT;
    if ((*out = msg = sfl__calloc(1, *len)) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the commitments");
    memcpy(msg, sid, SFL_SA_HASH);
    sfl__sa_put64(msg + SFL_SA_HASH, id);
    sfl__sa_put64(msg + SFL_SA_HASH + 8, ncommit);
    if (ncommit > 0)
        memcpy(msg + SFL_SA_HASH + 16, commit, (size_t)ncommit * SFL_SA_POINT);
    return 0;
}

/* What a dealer's signature of one share covers: sid | u64 dealer |
 * u64 holder | u16 x | y, under SFL__SA_CTX_SHARE_B or SFL__SA_CTX_SHARE_S (so a share of
 * r_s never passes for one of r_b). */
void sfl__sa_share_msg(const uint8_t sid[SFL_SA_HASH], uint64_t u, uint64_t v, uint16_t x,
                       const uint8_t y[32], uint8_t msg[SFL_SA_SHARE_MSG])
{
    memcpy(msg, sid, SFL_SA_HASH);
    sfl__sa_put64(msg + SFL_SA_HASH, u);
    sfl__sa_put64(msg + SFL_SA_HASH + 8, v);
    msg[SFL_SA_HASH + 16] = (uint8_t)x;
    msg[SFL_SA_HASH + 17] = (uint8_t)(x >> 8);
    memcpy(msg + SFL_SA_HASH + 18, y, 32);
}

int sfl__sa_share_verify(const uint8_t sid[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                         char type, uint64_t u, uint64_t v, const sfl_share_t *sh,
                         const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t msg[SFL_SA_SHARE_MSG];
    int rc;

    sfl__sa_share_msg(sid, u, v, sh->x, sh->y, msg);
    rc = sfl_seal_verify_detached(pk, type == 'b' ? SFL__SA_CTX_SHARE_B : SFL__SA_CTX_SHARE_S,
                                  msg, sizeof(msg), sig);
    sodium_memzero(msg, sizeof(msg));
    return rc;
}

void sfl__sa_input_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id, const uint32_t *y,
                       uint32_t len, uint8_t msg[SFL_SA_HASH + 8 + SFL_SA_HASH])
{
    uint8_t w[4 * 256];
    crypto_generichash_state st;

    memcpy(msg, sid, SFL_SA_HASH);
    sfl__sa_put64(msg + SFL_SA_HASH, id);
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
void sfl__sa_u3_msg(const uint8_t sid[SFL_SA_HASH], const uint64_t *u3, uint32_t n,
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
void sfl__sa_derive(const char *label, const uint8_t r[32], uint8_t out[32])
{
    crypto_generichash_state st;

    crypto_generichash_init(&st, NULL, 0, 32);
    sfl__sa_hash_str(&st, label);
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
    sfl__sa_hash_str(&st, "sfl-sa-mask");
    crypto_generichash_update(&st, dh, 32);
    crypto_generichash_update(&st, lo_pk, 32);
    crypto_generichash_update(&st, hi_pk, 32);
    crypto_generichash_update(&st, sid, SFL_SA_HASH);
    crypto_generichash_final(&st, key, 32);
    sodium_memzero(dh, sizeof(dh));
    return 0;
}

int sfl__sa_check_round(const sfl_sa_round_t *r)
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

int sfl__sa_u1_index(const sfl__sa_graph_t *g, uint64_t id)
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

int sfl__sa_graph_init(sfl__sa_graph_t *g, const sfl_sa_round_t *r, const uint8_t sid[SFL_SA_HASH],
                       const sfl_sa_adv_t *u1, uint32_t n1)
{
    uint32_t *ring;

    *g = (sfl__sa_graph_t){.n1 = n1, .k = sfl_sa_degree(r, n1), .u1 = u1};
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
int sfl__sa_adjacent(const sfl__sa_graph_t *g, uint64_t u, uint64_t v)
{
    int a = sfl__sa_u1_index(g, u), b = sfl__sa_u1_index(g, v);
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
int sfl__sa_holds(const sfl__sa_graph_t *g, uint64_t u, uint64_t v)
{
    return u == v ? sfl__sa_u1_index(g, u) >= 0 : sfl__sa_adjacent(g, u, v);
}

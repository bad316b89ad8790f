/* Library-internal: what the client (secagg_client.c) and the server
 * (secagg_server.c) of secure aggregation share, defined in secagg.c: the
 * signature contexts and stages, the round checks, the messages both sides
 * sign or verify, and the round's mask graph (sfl/crypto/secagg.h has the
 * protocol). */
#ifndef SFL_CRYPTO_SECAGG_INT_H
#define SFL_CRYPTO_SECAGG_INT_H

#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#include "sfl/crypto/secagg.h"

/* Signature contexts (sfl_seal), one per signed message. */
#define SFL__SA_CTX_ADV "sfl-sa-adv-v1"
#define SFL__SA_CTX_SHARES "sfl-sa-shares-v2"
#define SFL__SA_CTX_SHARE_B "sfl-sa-share-b-v1"
#define SFL__SA_CTX_SHARE_S "sfl-sa-share-s-v1"
#define SFL__SA_CTX_INPUT "sfl-sa-input-v1"
#define SFL__SA_CTX_U3 "sfl-sa-u3-v1"

/* The stages a client and the server go through, in order. */
enum {
    SFL__SA_ST_ADV = 1,
    SFL__SA_ST_SHARE,
    SFL__SA_ST_INPUT,
    SFL__SA_ST_CONSIST,
    SFL__SA_ST_UNMASK,
    SFL__SA_ST_DONE
};

/* v as 8 bytes little-endian at p. */
void sfl__sa_put64(uint8_t *p, uint64_t v);
/* Hashes the bytes of s (no terminator). */
void sfl__sa_hash_str(crypto_generichash_state *st, const char *s);
/* The round's header hash: what an advertisement signs. */
void sfl__sa_round_hash(const sfl_sa_round_t *r, const sfl_sa_member_t *members,
                        uint8_t out[SFL_SA_HASH]);
/* The rank of id among members (ascending), or -1. */
int sfl__sa_rank_of(const sfl_sa_member_t *m, uint32_t n, uint64_t id);
/* 1 if id is among ids[0..n), else 0. */
int sfl__sa_in_list(const uint64_t *ids, uint32_t n, uint64_t id);
/* 0 if pk is a usable X25519 key, else SFL_EINVAL. */
int sfl__sa_x25519_ok(const uint8_t pk[32]);
/* Verifies an advertisement's signature over the round hash rh. */
int sfl__sa_adv_verify(const uint8_t rh[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                       const sfl_sa_adv_t *a) SFL_MUST_CHECK;
/* What a stage-2 signature covers. Returns owned (sfl__free). */
int sfl__sa_shares_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id,
                       const uint8_t (*commit)[SFL_SA_POINT], uint32_t ncommit, uint8_t **out,
                       size_t *len) SFL_MUST_CHECK;
/* What a dealer's signature of one share covers. */
void sfl__sa_share_msg(const uint8_t sid[SFL_SA_HASH], uint64_t u, uint64_t v, uint16_t x,
                       const uint8_t y[32], uint8_t msg[SFL_SA_SHARE_MSG]);
/* Verifies dealer u's signature of its share sh for holder v (type 'b' or
 * 's'). */
int sfl__sa_share_verify(const uint8_t sid[SFL_SA_HASH], const uint8_t pk[SFL_SEAL_PK_BYTES],
                         char type, uint64_t u, uint64_t v, const sfl_share_t *sh,
                         const uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;
/* What a stage-3 signature covers: sid | u64 id | the input's hash. */
void sfl__sa_input_msg(const uint8_t sid[SFL_SA_HASH], uint64_t id, const uint32_t *y,
                       uint32_t len, uint8_t msg[SFL_SA_HASH + 8 + SFL_SA_HASH]);
/* What a stage-4 signature covers: sid | |U3| | U3. */
void sfl__sa_u3_msg(const uint8_t sid[SFL_SA_HASH], const uint64_t *u3, uint32_t n,
                    uint8_t out[SFL_SA_HASH]);
/* out = BLAKE2b-256(label | r). */
void sfl__sa_derive(const char *label, const uint8_t r[32], uint8_t out[32]);
/* The round's own checks (cohort, threshold, length, degree, ids). */
int sfl__sa_check_round(const sfl_sa_round_t *r) SFL_MUST_CHECK;

/* The round's graph over U1 (ascending ids): pos[i] is the ring place of
 * U1's i-th member; the complete graph has none. */
typedef struct sfl__sa_graph {
    uint32_t n1, k;
    uint32_t *pos;
    const sfl_sa_adv_t *u1;
} sfl__sa_graph_t;

/* id's index in U1, or -1. */
int sfl__sa_u1_index(const sfl__sa_graph_t *g, uint64_t id);
/* The graph of the round with session id sid over U1 = u1[0..n1). Free
 * g->pos with sfl__free. */
int sfl__sa_graph_init(sfl__sa_graph_t *g, const sfl_sa_round_t *r,
                       const uint8_t sid[SFL_SA_HASH], const sfl_sa_adv_t *u1,
                       uint32_t n1) SFL_MUST_CHECK;
/* 1 if u and v are distinct members of U1 and neighbours. */
int sfl__sa_adjacent(const sfl__sa_graph_t *g, uint64_t u, uint64_t v);
/* 1 if v holds shares of u's seeds: u itself or a neighbour. */
int sfl__sa_holds(const sfl__sa_graph_t *g, uint64_t u, uint64_t v);

#endif

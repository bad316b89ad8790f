/* Secure aggregation (update mode 2): the coordinator learns only the sum of
 * the surviving clients' quantized vectors over the round's common support,
 * even when clients drop out (../shared/SECURE_AGGREGATION.md section 2,
 * docs/security.md). Pairwise masks and Shamir shares of each client's seeds
 * (sfl/crypto/shamir.h) over a graph on the clients (SecAgg+, Bell et al. 2020):
 * the complete graph, or for large cohorts a Harary graph (below); the
 * vectors of sfl/crypto/savec.h. Pure state machines over
 * structs, no I/O: the agent drives a client, the coordinator a server, and a
 * test or sfl-sim both in one process.
 *
 * Stages and what each side checks (a client that finds anything wrong
 * aborts: it wipes its secrets and answers nothing more):
 *   0 open: both sides start from the same sfl_sa_round_t (the coordinator
 *     signs it into the task): the cohort (ids ascending, identity keys),
 *     threshold t, graph degree, vector length, nonce, model and support
 *     hashes. A client refuses n, t or the degree below its policy,
 *     t <= n / 2, a repeated id, itself absent.
 *   1 advertise: each client makes fresh X25519 pairs c (encrypts shares
 *     only) and s (masks only, from the scalar r_s), and a scalar r_b (its
 *     self-mask seed); it signs (round, id, c_pk, s_pk).
 *   2 share keys, given the advertisements the server collected (U1): every
 *     signature verifies, ids are members and distinct, its own is intact,
 *     keys are distinct and not of small order, |U1| >= t. The session id
 *       sid = BLAKE2b-256("sfl-sa-v1" | job | round | attempt | nonce |
 *             model_hash | support_hash | len | t | n | for each of U1
 *             ascending: id | c_pk | s_pk)          (integers u64/u32 LE)
 *     binds everything after, the graph too: its neighbours N(u) are the
 *     other members of U1 when the degree k = sfl_sa_degree is |U1| - 1,
 *     else those within k / 2 places of u on a ring of U1 in the order
 *     sfl_sa_ring draws from sid (the Harary graph H(k, |U1|)). The client
 *     splits r_b and r_s into shares with threshold tau = sfl_sa_holders
 *     (t on the complete graph; x = 1 + rank in the cohort), one for itself
 *     and one for each neighbour, with Feldman commitments to both
 *     polynomials (C_j = a_j B over Ed25519, j < tau; C_0 = r_b B, and
 *     r_s B for r_s's), signs each share on its own (SFL_SA_SHARE_MSG
 *     below, contexts "sfl-sa-share-b-v1" / "-s-v1": a holder proves one share
 *     without showing the other), and sends each v of N(u) an
 *     XChaCha20-Poly1305 box, key BLAKE2b-256("sfl-sa-box" | X25519(c_u, c_v)
 *     | sid), associated data sid | u | v, of (u, v, x_v, y_b, y_s, sig_b,
 *     sig_s); it signs sid | u | 2 tau | the commitments ("sfl-sa-shares-v2").
 *   3 masked input, given U2 (who shared) and the boxes addressed to it:
 *     U2 within U1 with itself, |U2| >= t, one box from each neighbour in
 *     U2. A box that does not open, is not from its sender to it at its x,
 *     or whose dealer signatures fail gives it no share of that sender (it
 *     cannot prove whose fault that is, so it goes on). y = q + mask(b) +
 *     sum over v in U2 and N(u) of
 *     (u < v ? + : -) mask(K_uv) mod 2^32, b = BLAKE2b-256("sfl-sa-b" |
 *     r_b), K_uv = BLAKE2b-256("sfl-sa-mask" | X25519(s_u, s_v) | the two
 *     s_pk in id order | sid); signed sid | u | BLAKE2b-256(y).
 *   4 consistency, given U3 (whose inputs the server took): U3 within U2
 *     with itself, |U3| >= t; it signs sid | U3.
 *   5 unmask, given the signatures the server collected (U4): at least t of
 *     them from distinct members of U3, all over the U3 it signed. It
 *     releases, for itself and each neighbour v in U2 it holds a share of,
 *     its share of r_b if v is in U3, of r_s if not, with v's signature of
 *     it; never both for one v, and once only (a second request is an
 *     abort).
 * The server checks every signature, sums the inputs of U3 mod 2^32, and
 * from tau holders' shares rebuilds r_b of each of U3 (checked against C_0)
 * and r_s of each of U2 \ U3 (checked against its C_0, then its s_pk),
 * removes those masks and returns the sum of U3's q. A seed that misses
 * its commitment has its shares checked one by one (sfl_sa_server_finish):
 * the bad ones are dropped and their dealer or holder named
 * (sfl_sa_server_culprits). Fewer than t at any stage, or fewer than tau
 * good shares of a seed: the round fails and nothing more is revealed.
 * On a Harary graph a seed has k + 1 holders, so a server that
 * leaves out of U3 all but tau - 1 of a client's neighbours cannot rebuild
 * its self-mask: it learns sums over at least tau clients only. */
#ifndef SFL_SECAGG_H
#define SFL_SECAGG_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/crypto/seal.h"
#include "sfl/crypto/shamir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_SA_HASH 32
#define SFL_SA_BOX_NONCE 24
#define SFL_SA_POINT SFL_SHAMIR_POINT
/* u64 u | u64 v | u16 x | y_b | y_s | sig_b | sig_s (the dealer's
 * signatures of each share, SFL_SA_SHARE_MSG), and the AEAD tag */
#define SFL_SA_BOX_PLAIN (8 + 8 + 2 + 2 * SFL_SHAMIR_BYTES + 2 * SFL_SEAL_SIG_BYTES)
#define SFL_SA_BOX_BYTES (SFL_SA_BOX_PLAIN + 16)
/* What a dealer's signature of one share covers: sid | u64 dealer |
 * u64 holder | u16 x | y (little-endian), under the context
 * "sfl-sa-share-b-v1" for a share of r_b, "sfl-sa-share-s-v1" of r_s. */
#define SFL_SA_SHARE_MSG (SFL_SA_HASH + 8 + 8 + 2 + SFL_SHAMIR_BYTES)

typedef struct sfl_sa_member {
    uint64_t id;                         /* > 0 */
    uint8_t pk[SFL_SEAL_PK_BYTES];       /* its Ed25519 identity key */
} sfl_sa_member_t;

/* Stage 0: what every party of the round agrees on (the coordinator signs
 * it into the round's task). */
typedef struct sfl_sa_round {
    uint64_t job, round;
    uint32_t attempt;
    uint8_t nonce[32];
    uint8_t model_hash[SFL_SA_HASH];
    uint8_t support_hash[SFL_SA_HASH]; /* sfl_sa_support_hash of S_t */
    uint32_t len;                      /* vector words: |S_t| + 2 + metric words */
    uint32_t t;                        /* threshold */
    uint32_t n;                        /* cohort size */
    uint32_t degree;                   /* 0 (complete) or even >= 2; see sfl_sa_degree */
    const sfl_sa_member_t *members;    /* n, ids strictly ascending (borrowed) */
} sfl_sa_round_t;

/* A client's floor on what it takes part in. Against a server colluding
 * with up to c clients it needs t > (n + c) / 2: two sets of t signers of
 * different U3 overlap in at least 2t - n > c clients, so an honest one
 * would have signed both, which it never does (docs/security.md). On a
 * Harary graph of degree k the seed's k + 1 holders are held to the same
 * rule with their share of the colluders, c_k = floor(c (k + 1) / n):
 * tau > (k + 1 + c_k) / 2 (sfl_sa_holders). */
#define SFL_SA_COLLUDERS_THIRD UINT32_MAX /* max_colluders: floor(n / 3) */
typedef struct sfl_sa_policy {
    uint32_t min_n;  /* cohort at least this (default 3) */
    uint32_t min_t;  /* threshold at least this (default 2); t > n / 2 always */
    uint32_t min_degree; /* a Harary graph's degree at least this (default 16) */
    uint32_t max_colluders; /* c (default SFL_SA_COLLUDERS_THIRD: floor(n / 3), so
                               t >= floor(2n / 3) + 1) */
} sfl_sa_policy_t;

typedef struct sfl_sa_adv {
    uint64_t id;
    uint8_t c_pk[32], s_pk[32];
    uint8_t sig[SFL_SEAL_SIG_BYTES];
} sfl_sa_adv_t;

/* One box of stage 2, from u to v. */
typedef struct sfl_sa_box {
    uint64_t from, to;
    uint8_t nonce[SFL_SA_BOX_NONCE];
    uint8_t ct[SFL_SA_BOX_BYTES];
} sfl_sa_box_t;

/* A client's stage-2 message: its commitments and its boxes. */
typedef struct sfl_sa_shares {
    uint64_t id;
    /* 2 tau Feldman commitments (sfl_shamir_split_commit): r_b's polynomial
     * then r_s's, commit[0] = r_b B and commit[tau] = r_s B; owned
     * (sfl_sa_shares_clear) */
    uint32_t ncommit;
    uint8_t (*commit)[SFL_SA_POINT];
    uint8_t sig[SFL_SEAL_SIG_BYTES]; /* over sid | id | the commitments */
    uint32_t nboxes;
    sfl_sa_box_t *boxes;          /* owned (sfl_sa_shares_clear) */
} sfl_sa_shares_t;

typedef struct sfl_sa_input {
    uint64_t id;
    uint32_t len;
    uint32_t *y;                  /* owned (sfl_sa_input_clear) */
    uint8_t sig[SFL_SEAL_SIG_BYTES];
} sfl_sa_input_t;

/* Stage 4: a client's signature over U3. */
typedef struct sfl_sa_consist {
    uint64_t id;
    uint8_t sig[SFL_SEAL_SIG_BYTES];
} sfl_sa_consist_t;

/* Stage 5: one released share, of r_b (type 'b') or r_s ('s') of client of,
 * with the signature its dealer (of) made of it. */
typedef struct sfl_sa_reveal {
    uint64_t of;
    char type;
    sfl_share_t share;
    uint8_t sig[SFL_SEAL_SIG_BYTES];
} sfl_sa_reveal_t;

/* Why the server names a member (sfl_sa_server_culprits): each a fault it
 * can prove from what the member signed or sent over its own
 * authenticated connection. X(NAME, name) */
#define SFL_SA_BLAME_MAP(X)                                                        \
    X(BADSIG, "bad_signature")      /* a stage message whose signature fails */    \
    X(EQUIVOCATE, "equivocation")   /* two different messages for one stage */     \
    X(BADKEYS, "bad_keys")          /* small-order keys, or another's keys */       \
    X(MALFORMED, "malformed")       /* boxes or an input not the round's shape */  \
    X(BADCOMMIT, "bad_commitment")  /* not 2 tau points of the prime-order group */ \
    X(BADDEAL, "bad_share_dealt")   /* signed a share off its committed polynomial */ \
    X(BADSKEY, "bad_mask_key")      /* its committed r_s is not behind its s_pk */  \
    X(ALTERED, "altered_share")     /* released a share its dealer did not sign */  \
    X(BADRELEASE, "wrong_release")  /* released a share not asked (both of one client...) */ \
    X(UNREADABLE, "unreadable_shares") /* two or more holders alive had no share of it */

typedef enum sfl_sa_blame {
#define SFL_SA_BLAME_ENUM(n, s) SFL_SA_BLAME_##n,
    SFL_SA_BLAME_NONE = 0,
    SFL_SA_BLAME_MAP(SFL_SA_BLAME_ENUM)
#undef SFL_SA_BLAME_ENUM
} sfl_sa_blame_t;

typedef struct sfl_sa_culprit {
    uint64_t id;          /* a member of the cohort */
    sfl_sa_blame_t why;   /* the first fault found */
} sfl_sa_culprit_t;

/* The short name of a reason ("bad_share_dealt"), "unknown" if none. */
const char *sfl_sa_blame_name(sfl_sa_blame_t why);

typedef struct sfl_sa_client sfl_sa_client_t;
typedef struct sfl_sa_server sfl_sa_server_t;

void sfl_sa_policy_default(sfl_sa_policy_t *p);
/* The degree a round's graph has over n1 members of U1: r->degree, or
 * n1 - 1 (complete) when r->degree is 0 or not below n1 - 1. */
uint32_t sfl_sa_degree(const sfl_sa_round_t *r, uint32_t n1);
/* How many holders rebuild a seed (the shares' threshold tau): t on the
 * complete graph, else the larger of ceil(t (k + 1) / n) and
 * floor((k + 1) / 2) + 1, k = sfl_sa_degree: a seed's k + 1 holders keep the
 * cohort's ratio t / n and a majority. */
uint32_t sfl_sa_holders(const sfl_sa_round_t *r, uint32_t n1);
/* The Harary graph's ring over U1's n1 members (ascending ids): ring[p] is
 * the index in U1 of the member at place p, a permutation of 0..n1) drawn
 * by Fisher-Yates (ring = identity, then for p = n1 - 1 down to 1 swap
 * places p and j, j uniform in 0..p) from the words of sfl_sa_mask_words
 * (from word 0) keyed BLAKE2b-256("sfl-sa-graph" | sid): j is the first
 * unused word w below 2^32 - 2^32 mod (p + 1), taken mod (p + 1). */
void sfl_sa_ring(const uint8_t sid[SFL_SA_HASH], uint32_t n1, uint32_t *ring);
/* BLAKE2b-256 of S_t as u32 little-endian indices. */
void sfl_sa_support_hash(const uint32_t *support, uint32_t n, uint8_t out[SFL_SA_HASH]);

/* The session id of stage 2, over the round r and U1 = u1[0..n1) (ids
 * ascending, as the server collected them): BLAKE2b-256, unkeyed, of
 *   "sfl-sa-v1" (9 bytes, no terminator) | u64 job | u64 round |
 *   u64 attempt | nonce (32) | model_hash (32) | support_hash (32) |
 *   u64 len | u64 t | u64 n | u64 degree | for each i < n1: u64 u1[i].id |
 *   u1[i].c_pk (32) | u1[i].s_pk (32)
 * every u64 little-endian (the u32 fields widened). The advertisements'
 * signatures and r->members are not hashed. */
void sfl_sa_session_id(const sfl_sa_round_t *r, const sfl_sa_adv_t *u1, uint32_t n1,
                       uint8_t sid[SFL_SA_HASH]);
/* The pairwise mask key K_uv, from one side's s secret and the other side's
 * s_pk: BLAKE2b-256, unkeyed, of
 *   "sfl-sa-mask" (11 bytes, no terminator) | X25519(s_sk, other_pk) (32) |
 *   lo_pk (32) | hi_pk (32) | sid (32)
 * where lo_pk/hi_pk are the two s_pk, of the lower and the higher id, so
 * both sides get the same key. SFL_EINVAL if other_pk is of small order
 * (the shared point is all zero); key is then unwritten. */
int sfl_sa_pair_key(const uint8_t s_sk[32], const uint8_t other_pk[32], const uint8_t lo_pk[32],
                    const uint8_t hi_pk[32], const uint8_t sid[SFL_SA_HASH],
                    uint8_t key[32]) SFL_MUST_CHECK;

/* ---- client ---- */

/* Stage 0 and 1: checks r against policy and id (its own), makes the
 * round's keys and its advertisement. id is borrowed for the client's life
 * (it signs every stage). Owned (sfl_sa_client_free). */
int sfl_sa_client_new(const sfl_sa_round_t *r, const sfl_sa_policy_t *policy, uint64_t id,
                      const sfl_identity_t *ident, sfl_sa_client_t **out,
                      sfl_sa_adv_t *adv) SFL_MUST_CHECK;
/* Stage 2: advs[0..n) are U1. out owned (sfl_sa_shares_clear). */
int sfl_sa_client_share(sfl_sa_client_t *c, const sfl_sa_adv_t *advs, uint32_t n,
                        sfl_sa_shares_t *out) SFL_MUST_CHECK;
/* Stage 3: u2[0..n2) ascending; boxes[0..nb) addressed to this client (one
 * from each other member of U2); q[0..len) its quantized vector. out owned
 * (sfl_sa_input_clear). */
int sfl_sa_client_input(sfl_sa_client_t *c, const uint64_t *u2, uint32_t n2,
                        const sfl_sa_box_t *boxes, uint32_t nb, const uint32_t *q,
                        sfl_sa_input_t *out) SFL_MUST_CHECK;
/* Stage 4: u3[0..n3) ascending. */
int sfl_sa_client_consist(sfl_sa_client_t *c, const uint64_t *u3, uint32_t n3,
                          sfl_sa_consist_t *out) SFL_MUST_CHECK;
/* Stage 5: sigs[0..ns) (ascending ids) from the server; out (capacity
 * |U2| entries) gets the shares released, one for each member of U2 (its
 * own included: r_b's, as it is in U3), *nout how many. The secrets are
 * wiped after. */
int sfl_sa_client_unmask(sfl_sa_client_t *c, const sfl_sa_consist_t *sigs, uint32_t ns,
                         sfl_sa_reveal_t *out, uint32_t *nout) SFL_MUST_CHECK;
/* 1 once the client aborted (its secrets are wiped; every call fails). */
int sfl_sa_client_aborted(const sfl_sa_client_t *c);
void sfl_sa_client_free(sfl_sa_client_t *c);

/* ---- server ---- */

/* r is copied (members too). Owned (sfl_sa_server_free). */
int sfl_sa_server_new(const sfl_sa_round_t *r, sfl_sa_server_t **out) SFL_MUST_CHECK;
/* Stage 1: an advertisement: SFL_EBADSIG, SFL_EINVAL (not a member, a
 * repeat, a small-order key) leave the server as it was. */
int sfl_sa_server_adv(sfl_sa_server_t *s, const sfl_sa_adv_t *adv) SFL_MUST_CHECK;
/* Ends stage 1: U1 into *advs (borrowed until the server is freed), its size
 * in *n; SFL_EEMPTY (the round fails) below t. */
int sfl_sa_server_end_adv(sfl_sa_server_t *s, const sfl_sa_adv_t **advs,
                          uint32_t *n) SFL_MUST_CHECK;
/* Stage 2: a client's shares (taken over: m->boxes and m->commit become
 * the server's). Its signature, 2 tau commitments and one box to each
 * neighbour, else refused and the client named; whether the commitments
 * are points of the group is checked only if a seed misses one. */
int sfl_sa_server_shares(sfl_sa_server_t *s, sfl_sa_shares_t *m) SFL_MUST_CHECK;
/* Ends stage 2: U2 (ascending, borrowed), SFL_EEMPTY below t. */
int sfl_sa_server_end_shares(sfl_sa_server_t *s, const uint64_t **u2,
                             uint32_t *n) SFL_MUST_CHECK;
/* The boxes for v from U2's other members: *boxes an owned array
 * (sfl__free) of *n. */
int sfl_sa_server_inbox(const sfl_sa_server_t *s, uint64_t v, sfl_sa_box_t **boxes,
                        uint32_t *n) SFL_MUST_CHECK;
/* Stage 3: an input, added to the sum (taken over). */
int sfl_sa_server_input(sfl_sa_server_t *s, sfl_sa_input_t *in) SFL_MUST_CHECK;
int sfl_sa_server_end_inputs(sfl_sa_server_t *s, const uint64_t **u3,
                             uint32_t *n) SFL_MUST_CHECK;
/* Stage 4. */
int sfl_sa_server_consist(sfl_sa_server_t *s, const sfl_sa_consist_t *m) SFL_MUST_CHECK;
int sfl_sa_server_end_consist(sfl_sa_server_t *s, const sfl_sa_consist_t **sigs,
                              uint32_t *n) SFL_MUST_CHECK;
/* Stage 5: client from's released shares: one for each member of U2 it
 * holds a share of, or fewer (a box that did not open or whose signature
 * failed gave it none of that member's). */
int sfl_sa_server_unmask(sfl_sa_server_t *s, uint64_t from, const sfl_sa_reveal_t *shares,
                         uint32_t n) SFL_MUST_CHECK;
/* The end: the sum of U3's q into sum[0..len), *count = |U3|. Each seed
 * is rebuilt from tau released shares and checked against its dealer's
 * commitment; on a mismatch every share of it is checked (sfl_shamir_verify)
 * and the bad ones dropped, their dealer named when it signed them, their
 * holder when it did not; the seed is rebuilt from the good ones. SFL_EEMPTY
 * if some seed has fewer than tau shares released, SFL_EBADSIG if fewer than
 * tau of them are good (or a rebuilt r_s is not behind s_pk): the round
 * fails, and sfl_sa_server_culprits names who caused it. */
int sfl_sa_server_finish(sfl_sa_server_t *s, uint32_t *sum, uint32_t *count) SFL_MUST_CHECK;
/* The members the server has proof against so far, at any stage: *out
 * (borrowed until the server is freed, grows in place: read *n again after
 * each call) of *n, each member once, in the order found. The caller vouches
 * that every message it hands the server under a member's id came over that
 * member's authenticated connection (saround.c: coord_bound_agent). */
int sfl_sa_server_culprits(const sfl_sa_server_t *s, const sfl_sa_culprit_t **out,
                           uint32_t *n);
void sfl_sa_server_free(sfl_sa_server_t *s);

void sfl_sa_shares_clear(sfl_sa_shares_t *m);
void sfl_sa_input_clear(sfl_sa_input_t *m);

#ifdef __cplusplus
}
#endif

#endif

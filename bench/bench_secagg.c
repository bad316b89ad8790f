/* Secure aggregation (update mode 2, sfl/crypto/secagg.h) against mode 1 and a
 * dense SecAgg+: bytes per agent per round, and the CPU one real round of
 * the library costs an agent and the coordinator.
 *
 *   bench_secagg [-g K] [n [k ...]]   (defaults: n = 100, k = 1000 10000)
 *
 * t = floor(2 n / 3) + 1, |S_t| = 2 k, vector length len = |S_t| + 12. The
 * mask graph is complete, or with -g a Harary graph of even degree K < n - 1
 * (each agent's K neighbours take the place of the n - 1 others below:
 * boxes, masks, released shares K + 1).
 *
 * Bytes. Mode 2 has no wire encoding yet, so a message is counted as the sum
 * of its fields at their fixed sizes (sfl/crypto/secagg.h's structs: ids 8, keys
 * and hashes 32, signatures 64, a box 8 + 8 + 24 + SFL_SA_BOX_BYTES, a
 * commitment 32, a released share 8 + 1 + 2 + 32 + 64 (its dealer's
 * signature), a masked word 4), with no framing: no
 * tags, lengths or counts (an encoding adds a few bytes per message), and
 * every party present (|U1| = ... = |U4| = n). Uplink: the advertisement,
 * the stage-2 message (id, 2 tau commitments, signature, n - 1 boxes), the masked
 * input (id, len words, signature), the consistency signature (id, sig),
 * the unmask answer (n shares). Downlink: the cohort in the round's task
 * (n x (id, identity key); the rest of the task is what mode 1 carries too),
 * U1 (n advertisements), the inbox (n - 1 boxes), U2 and U3 (n ids each),
 * U4 (n x (id, sig)). The model goes down in both modes and is left out.
 * Mode 1: a random k-sparse vector of dimension d (uniform support, values
 * in (-1, 1)) through sfl_spcodec_encode, f64 and f32, plus
 * SFL_SEAL_OVERHEAD (the payload message around it, about 20 bytes, is left
 * out; bench_agg counts it). Dense SecAgg+: the same messages with a masked
 * input of d words.
 *
 * CPU. One round with every client and the server in this process (as
 * tests/unit/test_secagg.c's run_round), each call timed on the thread's
 * CPU clock (a shared machine's descheduled time does not count): per
 * agent the means of sfl_sa_client_new, _share, _input, _consist, _unmask;
 * the server's per stage. Then the same round with D = min(10, n - t)
 * clients dropped after sharing (before their masked input): the server's
 * finish rebuilds their r_s and the masks they share with each of the
 * n - D inputs instead of D self-masks, so
 *   ms_per_dropped = (finish with drops - finish without) / D.
 * Then the same round with one holder releasing an altered share of one
 * seed: the finish that finds (sfl_shamir_verify) and names it; and with
 * one client whose signed commitment is not of its r_b (its agreeing
 * signed shares rebuild the seed, sfl_shamir_agree).
 * The sum is checked (every client sends the same random q, so it must be
 * count x q mod 2^32). The primitives alone, for context: X25519
 * (crypto_scalarmult), an Ed25519 verify (sfl_seal_verify_detached),
 * len mask words (sfl_sa_mask_add), sfl_shamir_split (n, t) and
 * sfl_shamir_combine (t); and the agent's round predicted from them:
 * 4 K + 2 X25519 (2 keys; per neighbour (K = n - 1 on the complete graph)
 * a share key at stage 2 and again at 3, a mask key and a small-order check
 * of its mask key, a full scalar multiplication), 2 n verifies (U1, U4), 2
 * splits at K + 1 points (the measured split of n, scaled) and K masks of
 * len words; hashing, the AEAD and the bookkeeping are the rest.
 * Prints:
 *   bench_secagg_msgs n= t= k= st= up_adv= up_shares= up_input= up_consist=
 *                     up_unmask= up= down_task= down_u1= down_inbox= down_u2=
 *                     down_u3= down_u4= down=
 *   bench_secagg_bytes n= d= k= st= mode1_f64= mode1_f32= mode2_up= mode2_down=
 *                      dense_up= dense_down= mode2_over_f64= mode2_over_f32=
 *                      dense_over_mode2=           (ratios of uplinks)
 *   bench_secagg_prim x25519_us= ed25519_verify_us= shamir_split_ms=
 *                     shamir_combine_ms= n= t=
 *   bench_secagg_support d= model_nnz= size= ms=   (sfl_sa_support, CPU)
 *   bench_secagg_mask len= mask_ms= mb_per_s=
 *   bench_secagg_culprit n= k= altered= named= finish_ms= finish_honest_ms=
 *   bench_secagg_culprit n= k= commitment_lie= named= finish_ms= finish_honest_ms=
 *   bench_secagg_agent n= t= k= len= drops= new_ms= share_ms= input_ms=
 *                      consist_ms= unmask_ms= total_ms= predicted_ms=
 *                      total_over_predicted=
 *   bench_secagg_server n= t= k= len= drops= adv_ms= shares_ms= input_ms=
 *                       consist_ms= unmask_ms= finish_ms= total_ms=
 *   bench_secagg_drop n= k= dropped= finish_ms= finish_nodrop_ms=
 *                     ms_per_dropped= predicted_ms= (n - D) x (X25519 + mask)
 * Times are machine-dependent; compare the ratios. For arm64 under qemu-user:
 *   make CROSS=aarch64-linux-gnu- build/aarch64-linux-gnu/bench/bench_secagg
 *   qemu-aarch64-static -L / build/aarch64-linux-gnu/bench/bench_secagg
 * (emulated time on the host, not a Pi's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/seal.h"
#include "sfl/crypto/secagg.h"
#include "sfl/crypto/shamir.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/vec.h"

#define KMAX 8
#define DROPS 10
#define PRIM_REPS 200   /* X25519, verify */
#define SHAMIR_REPS 20
#define MASK_REPS 50

/* message sizes, bytes (the counting rule above) */
#define B_ID 8
#define B_SIG SFL_SEAL_SIG_BYTES
#define B_ADV (B_ID + 32 + 32 + B_SIG)
#define B_BOX (B_ID + B_ID + SFL_SA_BOX_NONCE + SFL_SA_BOX_BYTES)
#define B_REVEAL (B_ID + 1 + 2 + SFL_SHAMIR_BYTES + B_SIG)
#define B_MEMBER (B_ID + SFL_SEAL_PK_BYTES)

enum { C_NEW, C_SHARE, C_INPUT, C_CONSIST, C_UNMASK, NC };
enum { S_ADV, S_SHARES, S_INPUT, S_CONSIST, S_UNMASK, S_FINISH, NS };

typedef struct {
    uint32_t n, t;
    sfl_sa_member_t *m;   /* n, ids ascending */
    sfl_identity_t **id;  /* n */
} cohort_t;

typedef struct {
    double c[NC];     /* clients' CPU ms, summed */
    uint32_t cn[NC];  /* calls */
    double s[NS];     /* server's CPU ms */
} cost_t;

typedef struct {
    double x25519_ms, verify_ms, split_ms, combine_ms;
} prim_t;

static volatile uint32_t sink;
static uint32_t g_degree; /* -g; 0 the complete graph */
/* run_round: holders 1..g_alter alter the share of client 0's r_b they
 * release (the server finds and names them); g_named gets the culprits */
static uint32_t g_alter, g_named;
/* run_round: client 0 signs a commitment to r_b that is not of its r_b
 * (the review's attack: its shares then rebuild the seed it dealt) */
static int g_lie;

/* Client i's stage-2 message with C_0 replaced and signed again, as
 * sfl/crypto/secagg.h defines the signature (sid | id | ncommit | commitments). */
static int lie(const cohort_t *co, uint32_t i, const uint8_t sid[SFL_SA_HASH],
               sfl_sa_shares_t *sh)
{
    size_t len = SFL_SA_HASH + 16 + (size_t)sh->ncommit * SFL_SA_POINT;
    uint8_t *msg = calloc(1, len), r[32];
    int rc;

    if (msg == NULL)
        return SFL_ENOMEM;
    sfl_shamir_random(r);
    if (crypto_scalarmult_ed25519_base_noclamp(sh->commit[0], r) != 0) {
        free(msg);
        return SFL_EINVAL;
    }
    memcpy(msg, sid, SFL_SA_HASH);
    for (int b = 0; b < 8; b++) {
        msg[SFL_SA_HASH + b] = (uint8_t)(sh->id >> (8 * b));
        msg[SFL_SA_HASH + 8 + b] = (uint8_t)((uint64_t)sh->ncommit >> (8 * b));
    }
    memcpy(msg + SFL_SA_HASH + 16, sh->commit, (size_t)sh->ncommit * SFL_SA_POINT);
    rc = sfl_seal_sign_detached(co->id[i], "sfl-sa-shares-v2", msg, len, sh->sig);
    free(msg);
    return rc;
}

/* Each agent's neighbours. */
static uint32_t degree_of(uint32_t n)
{
    return g_degree != 0 && g_degree + 1 < n ? g_degree : n - 1;
}

/* This thread's CPU time: a round is one thread, and on a shared machine
 * the time it spends descheduled is not its cost. */
static double cpu_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return (a > b) - (a < b);
}

/* Bytes of mode 1's sealed update: the encoded vector + SFL_SEAL_OVERHEAD. */
static int mode1_bytes(const sfl_spvec_t *v, sfl_enc_t enc, size_t *out)
{
    size_t cap = sfl_spcodec_size(v, enc), len = 0;
    uint8_t *buf = malloc(cap);
    int rc;

    if (buf == NULL)
        return SFL_ENOMEM;
    rc = sfl_spcodec_encode(v, enc, buf, cap, &len);
    free(buf);
    if (rc == 0 && len != cap)
        rc = SFL_EPARSE;
    *out = len + SFL_SEAL_OVERHEAD;
    return rc;
}

/* tau, the holders that rebuild a seed (sfl_sa_holders). */
static uint32_t tau_of(uint32_t n, uint32_t t)
{
    sfl_sa_round_t r = {.n = n, .t = t, .degree = g_degree};

    return sfl_sa_holders(&r, n);
}

/* Uplink and downlink of one agent for vectors of len words. */
static size_t up_bytes(uint32_t n, uint32_t t, uint64_t len, size_t part[5])
{
    part[0] = B_ADV;
    /* id, 2 tau commitments, signature, the boxes */
    part[1] = B_ID + 2 * (size_t)tau_of(n, t) * SFL_SA_POINT + B_SIG +
              (size_t)degree_of(n) * B_BOX;
    part[2] = B_ID + 4 * len + B_SIG;
    part[3] = B_ID + B_SIG;
    part[4] = (size_t)(degree_of(n) + 1) * B_REVEAL;
    return part[0] + part[1] + part[2] + part[3] + part[4];
}

static size_t down_bytes(uint32_t n, size_t part[6])
{
    part[0] = (size_t)n * B_MEMBER;
    part[1] = (size_t)n * B_ADV;
    part[2] = (size_t)degree_of(n) * B_BOX;
    part[3] = (size_t)n * B_ID;
    part[4] = (size_t)n * B_ID;
    part[5] = (size_t)n * (B_ID + B_SIG);
    return part[0] + part[1] + part[2] + part[3] + part[4] + part[5];
}

static int bytes_table(uint32_t n, uint32_t t, const uint32_t *ks, int nk)
{
    static const uint32_t ds[] = {100000, 1000000};
    sfl_rng_t rng;
    int rc = 0;

    sfl_rng_seed(&rng, 42, 0, 0, SFL_STREAM_DATA);
    for (int a = 0; a < nk; a++) {
        size_t up[5], dn[6];
        size_t upt = up_bytes(n, t, 2 * (uint64_t)ks[a] + SFL_SA_EXTRA_WORDS, up);
        size_t dnt = down_bytes(n, dn);

        printf("bench_secagg_msgs n=%u t=%u k=%u st=%u up_adv=%zu up_shares=%zu up_input=%zu "
               "up_consist=%zu up_unmask=%zu up=%zu down_task=%zu down_u1=%zu down_inbox=%zu "
               "down_u2=%zu down_u3=%zu down_u4=%zu down=%zu\n",
               n, t, ks[a], 2 * ks[a], up[0], up[1], up[2], up[3], up[4], upt, dn[0], dn[1],
               dn[2], dn[3], dn[4], dn[5], dnt);
    }
    for (size_t di = 0; di < sizeof(ds) / sizeof(ds[0]); di++) {
        for (int a = 0; a < nk; a++) {
            uint32_t d = ds[di], k = ks[a];
            size_t up[5], dn[6], f64 = 0, f32 = 0;
            sfl_spvec_t *v = NULL;

            if (2 * (uint64_t)k > d)
                continue;
            if ((rc = sfl_spvec_new(d, k, &v)) < 0)
                break;
            /* a uniform k-subset of [0, d), sorted: the codec's input */
            if ((rc = sfl_rng_sample(&rng, d, k, v->idx)) < 0) {
                sfl_spvec_free(v);
                break;
            }
            qsort(v->idx, k, sizeof(*v->idx), cmp_u32);
            for (uint32_t j = 0; j < k; j++)
                v->val[j] = 2 * sfl_rng_uniform(&rng) - 1;
            v->nnz = k;
            rc = mode1_bytes(v, SFL_ENC_F64, &f64);
            if (rc == 0)
                rc = mode1_bytes(v, SFL_ENC_F32, &f32);
            sfl_spvec_free(v);
            if (rc < 0)
                break;
            size_t m2 = up_bytes(n, t, 2 * (uint64_t)k + SFL_SA_EXTRA_WORDS, up);
            size_t m2d = down_bytes(n, dn);
            size_t dense = up_bytes(n, t, d, up);

            printf("bench_secagg_bytes n=%u d=%u k=%u st=%u mode1_f64=%zu mode1_f32=%zu "
                   "mode2_up=%zu mode2_down=%zu dense_up=%zu dense_down=%zu "
                   "mode2_over_f64=%.2f mode2_over_f32=%.2f dense_over_mode2=%.1f\n",
                   n, d, k, 2 * k, f64, f32, m2, m2d, dense, m2d, (double)m2 / (double)f64,
                   (double)m2 / (double)f32, (double)dense / (double)m2);
        }
    }
    return rc;
}

static int cohort_new(cohort_t *co, uint32_t n)
{
    co->n = n;
    co->t = 2 * n / 3 + 1;
    co->m = calloc(n, sizeof(*co->m));
    co->id = calloc(n, sizeof(*co->id));
    if (co->m == NULL || co->id == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        int rc = sfl_identity_generate(&co->id[i]);

        if (rc < 0)
            return rc;
        co->m[i].id = 10 + 3 * (uint64_t)i;
        memcpy(co->m[i].pk, co->id[i]->pk, SFL_SEAL_PK_BYTES);
    }
    return 0;
}

static void cohort_free(cohort_t *co)
{
    for (uint32_t i = 0; co->id != NULL && i < co->n; i++)
        sfl_identity_free(co->id[i]);
    free(co->id);
    free(co->m);
}

#define TIMED(acc, call)                                                                   \
    do {                                                                                   \
        double t0_ = cpu_ms();                                                             \
        rc = (call);                                                                       \
        (acc) += cpu_ms() - t0_;                                                           \
    } while (0)

/* One round; drop[i] set: client i goes silent after sharing. Every client
 * inputs q[0..len). */
static int run_round(const cohort_t *co, uint32_t len, const uint32_t *q, const uint8_t *drop,
                     cost_t *c)
{
    uint32_t n = co->n, n1, n2, n3, n4, count = 0, ndrop = 0;
    sfl_sa_client_t **cl = calloc(n, sizeof(*cl));
    sfl_sa_reveal_t *rev = calloc(n, sizeof(*rev));
    uint32_t *sum = calloc(len, sizeof(*sum));
    sfl_sa_server_t *s = NULL;
    const sfl_sa_adv_t *u1;
    const uint64_t *u2, *u3;
    const sfl_sa_consist_t *u4;
    sfl_sa_policy_t pol;
    sfl_sa_round_t r;
    int rc = SFL_ENOMEM;

    memset(c, 0, sizeof(*c));
    if (cl == NULL || rev == NULL || sum == NULL)
        goto out;
    memset(&r, 0, sizeof(r));
    r.job = 1;
    r.round = 7;
    memset(r.nonce, 0x33, sizeof(r.nonce));
    memset(r.model_hash, 0x44, sizeof(r.model_hash));
    memset(r.support_hash, 0x55, sizeof(r.support_hash));
    r.len = len;
    r.t = co->t;
    r.n = n;
    r.degree = g_degree;
    r.members = co->m;
    sfl_sa_policy_default(&pol);

    TIMED(c->s[S_ADV], sfl_sa_server_new(&r, &s));
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        sfl_sa_adv_t adv;

        TIMED(c->c[C_NEW], sfl_sa_client_new(&r, &pol, co->m[i].id, co->id[i], &cl[i], &adv));
        c->cn[C_NEW]++;
        if (rc < 0)
            goto out;
        TIMED(c->s[S_ADV], sfl_sa_server_adv(s, &adv));
        if (rc < 0)
            goto out;
    }
    TIMED(c->s[S_ADV], sfl_sa_server_end_adv(s, &u1, &n1));
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        sfl_sa_shares_t sh;

        TIMED(c->c[C_SHARE], sfl_sa_client_share(cl[i], u1, n1, &sh));
        c->cn[C_SHARE]++;
        if (rc < 0)
            goto out;
        if (g_lie && i == 0) {
            uint8_t sid[SFL_SA_HASH];

            sfl_sa_session_id(&r, u1, n1, sid);
            if ((rc = lie(co, i, sid, &sh)) < 0) {
                sfl_sa_shares_clear(&sh);
                goto out;
            }
        }
        TIMED(c->s[S_SHARES], sfl_sa_server_shares(s, &sh));
        sfl_sa_shares_clear(&sh);
        if (rc < 0)
            goto out;
    }
    TIMED(c->s[S_SHARES], sfl_sa_server_end_shares(s, &u2, &n2));
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        sfl_sa_box_t *boxes = NULL;
        sfl_sa_input_t in;
        uint32_t nb = 0;

        if (drop[i]) {
            ndrop++;
            continue;
        }
        TIMED(c->s[S_INPUT], sfl_sa_server_inbox(s, co->m[i].id, &boxes, &nb));
        if (rc < 0)
            goto out;
        TIMED(c->c[C_INPUT], sfl_sa_client_input(cl[i], u2, n2, boxes, nb, q, &in));
        c->cn[C_INPUT]++;
        sfl__free(boxes);
        if (rc < 0)
            goto out;
        TIMED(c->s[S_INPUT], sfl_sa_server_input(s, &in));
        sfl_sa_input_clear(&in);
        if (rc < 0)
            goto out;
    }
    TIMED(c->s[S_INPUT], sfl_sa_server_end_inputs(s, &u3, &n3));
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        sfl_sa_consist_t cs;

        if (drop[i])
            continue;
        TIMED(c->c[C_CONSIST], sfl_sa_client_consist(cl[i], u3, n3, &cs));
        c->cn[C_CONSIST]++;
        if (rc < 0)
            goto out;
        TIMED(c->s[S_CONSIST], sfl_sa_server_consist(s, &cs));
        if (rc < 0)
            goto out;
    }
    TIMED(c->s[S_CONSIST], sfl_sa_server_end_consist(s, &u4, &n4));
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nr = 0;

        if (drop[i])
            continue;
        TIMED(c->c[C_UNMASK], sfl_sa_client_unmask(cl[i], u4, n4, rev, &nr));
        c->cn[C_UNMASK]++;
        if (rc < 0)
            goto out;
        for (uint32_t k = 0; i >= 1 && i <= g_alter && k < nr; k++)
            if (rev[k].of == co->m[0].id)
                rev[k].share.y[0] ^= 1;
        TIMED(c->s[S_UNMASK], sfl_sa_server_unmask(s, co->m[i].id, rev, nr));
        if (rc < 0)
            goto out;
    }
    TIMED(c->s[S_FINISH], sfl_sa_server_finish(s, sum, &count));
    if (rc < 0)
        goto out;
    /* every input was q: the sum is count q */
    if (count != n - ndrop) {
        fprintf(stderr, "bench_secagg: the sum holds %u inputs, not %u\n", count, n - ndrop);
        rc = SFL_EINVAL;
        goto out;
    }
    for (uint32_t j = 0; j < len; j++)
        if (sum[j] != count * q[j]) {
            fprintf(stderr, "bench_secagg: word %u of the sum is wrong\n", j);
            rc = SFL_EINVAL;
            goto out;
        }
    rc = 0;
out:
    if (s != NULL) {
        const sfl_sa_culprit_t *cul;

        if (sfl_sa_server_culprits(s, &cul, &g_named) < 0)
            g_named = 0;
    }
    sfl_sa_server_free(s);
    for (uint32_t i = 0; cl != NULL && i < n; i++)
        sfl_sa_client_free(cl[i]);
    free(sum);
    free(rev);
    free(cl);
    return rc;
}

static double total(const double *a, int n)
{
    double s = 0;

    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

static int primitives(const cohort_t *co, prim_t *p)
{
    uint8_t sk[32], pk[32], out[32], sig[SFL_SEAL_SIG_BYTES], secret[SFL_SHAMIR_BYTES];
    sfl_share_t *sh = calloc(co->n, sizeof(*sh));
    double t0;
    int rc = 0;

    if (sh == NULL)
        return SFL_ENOMEM;
    randombytes_buf(sk, sizeof(sk));
    crypto_scalarmult_base(pk, sk);
    t0 = cpu_ms();
    for (int r = 0; r < PRIM_REPS; r++) {
        if (crypto_scalarmult(out, sk, pk) != 0)
            rc = SFL_EINVAL;
        sk[0] ^= out[0]; /* a chain: no call can be skipped */
    }
    p->x25519_ms = (cpu_ms() - t0) / PRIM_REPS;
    if (rc == 0)
        rc = sfl_seal_sign_detached(co->id[0], "sfl-bench", pk, sizeof(pk), sig);
    t0 = cpu_ms();
    for (int r = 0; rc == 0 && r < PRIM_REPS; r++)
        rc = sfl_seal_verify_detached(co->m[0].pk, "sfl-bench", pk, sizeof(pk), sig);
    p->verify_ms = (cpu_ms() - t0) / PRIM_REPS;
    sfl_shamir_random(secret);
    t0 = cpu_ms();
    for (int r = 0; rc == 0 && r < SHAMIR_REPS; r++)
        rc = sfl_shamir_split(secret, co->t, co->n, sh);
    p->split_ms = (cpu_ms() - t0) / SHAMIR_REPS;
    t0 = cpu_ms();
    for (int r = 0; rc == 0 && r < SHAMIR_REPS; r++)
        rc = sfl_shamir_combine(sh, co->t, out);
    p->combine_ms = (cpu_ms() - t0) / SHAMIR_REPS;
    if (rc == 0 && memcmp(out, secret, sizeof(out)) != 0) {
        fprintf(stderr, "bench_secagg: shamir: the combined secret differs\n");
        rc = SFL_EINVAL;
    }
    sodium_memzero(sk, sizeof(sk));
    free(sh);
    return rc;
}

static double mask_ms(uint32_t len)
{
    uint32_t *v = calloc(len, sizeof(*v));
    uint8_t key[SFL_SA_KEY_BYTES];
    double t0;

    if (v == NULL)
        return -1;
    randombytes_buf(key, sizeof(key));
    t0 = cpu_ms();
    for (int r = 0; r < MASK_REPS; r++)
        sfl_sa_mask_add(key, 1, v, len);
    t0 = (cpu_ms() - t0) / MASK_REPS;
    sink = v[len - 1];
    free(v);
    return t0;
}

static void print_agent(const cohort_t *co, uint32_t k, uint32_t len, uint32_t drops,
                        const cost_t *c, double predicted)
{
    double m[NC], tot;

    for (int i = 0; i < NC; i++)
        m[i] = c->cn[i] ? c->c[i] / c->cn[i] : 0;
    tot = total(m, NC);
    printf("bench_secagg_agent n=%u t=%u k=%u len=%u drops=%u new_ms=%.3f share_ms=%.3f "
           "input_ms=%.3f consist_ms=%.3f unmask_ms=%.3f total_ms=%.3f",
           co->n, co->t, k, len, drops, m[C_NEW], m[C_SHARE], m[C_INPUT], m[C_CONSIST],
           m[C_UNMASK], tot);
    if (predicted > 0)
        printf(" predicted_ms=%.3f total_over_predicted=%.2f", predicted, tot / predicted);
    printf("\n");
    printf("bench_secagg_server n=%u t=%u k=%u len=%u drops=%u adv_ms=%.2f shares_ms=%.2f "
           "input_ms=%.2f consist_ms=%.2f unmask_ms=%.2f finish_ms=%.2f total_ms=%.2f\n",
           co->n, co->t, k, len, drops, c->s[S_ADV], c->s[S_SHARES], c->s[S_INPUT],
           c->s[S_CONSIST], c->s[S_UNMASK], c->s[S_FINISH], total(c->s, NS));
}

static int cpu_rounds(const cohort_t *co, const prim_t *p, uint32_t k)
{
    uint32_t len = 2 * k + SFL_SA_EXTRA_WORDS, n = co->n;
    uint32_t drops = n - co->t < DROPS ? n - co->t : DROPS;
    uint32_t *q = calloc(len, sizeof(*q));
    uint8_t *drop = calloc(n, 1);
    cost_t c0, c1;
    sfl_rng_t rng;
    int rc = SFL_ENOMEM;

    if (q == NULL || drop == NULL)
        goto out;
    sfl_rng_seed(&rng, 42, k, 0, SFL_STREAM_DATA);
    for (uint32_t j = 0; j < len; j++)
        q[j] = (uint32_t)sfl_rng_u64(&rng);
    double mask = mask_ms(len);

    printf("bench_secagg_mask len=%u mask_ms=%.4f mb_per_s=%.0f\n", len, mask,
           4.0 * len / 1e6 / (mask / 1e3));
    if ((rc = run_round(co, len, q, drop, &c0)) < 0)
        goto out;
    double pred = (4.0 * degree_of(n) + 2) * p->x25519_ms + 2.0 * n * p->verify_ms +
                  2 * p->split_ms * (degree_of(n) + 1) / n + degree_of(n) * mask;

    print_agent(co, k, len, 0, &c0, pred);
    /* one holder releases an altered share: the cheap check fails for one
     * seed, its shares are checked against the commitments (halving), the
     * holder is named and the round completes */
    g_alter = 1;
    rc = run_round(co, len, q, drop, &c1);
    g_alter = 0;
    if (rc < 0)
        goto out;
    printf("bench_secagg_culprit n=%u k=%u altered=1 named=%u finish_ms=%.2f "
           "finish_honest_ms=%.2f\n", n, k, g_named, c1.s[S_FINISH], c0.s[S_FINISH]);
    /* a dealer's commitment that is not of its r_b */
    g_lie = 1;
    rc = run_round(co, len, q, drop, &c1);
    g_lie = 0;
    if (rc < 0)
        goto out;
    printf("bench_secagg_culprit n=%u k=%u commitment_lie=1 named=%u finish_ms=%.2f "
           "finish_honest_ms=%.2f\n", n, k, g_named, c1.s[S_FINISH], c0.s[S_FINISH]);
    if (drops == 0)
        goto out;
    /* spread over the cohort, none at the ends */
    for (uint32_t j = 0; j < drops; j++)
        drop[(j * n) / drops + (n / drops) / 2] = 1;
    if ((rc = run_round(co, len, q, drop, &c1)) < 0)
        goto out;
    print_agent(co, k, len, drops, &c1, 0);
    printf("bench_secagg_drop n=%u k=%u dropped=%u finish_ms=%.2f finish_nodrop_ms=%.2f "
           "ms_per_dropped=%.3f predicted_ms=%.3f\n",
           n, k, drops, c1.s[S_FINISH], c0.s[S_FINISH],
           (c1.s[S_FINISH] - c0.s[S_FINISH]) / drops, (n - drops) * (p->x25519_ms + mask));
out:
    free(drop);
    free(q);
    return rc;
}

/* S_t's cost on every agent and on the coordinator's loop: d = 1e6, a model
 * of 1e4 nonzeros, |S_t| = 2e4. */
static int support_cost(void)
{
    enum { D = 1000000, NNZ = 10000, SIZE = 20000 };
    double *g = calloc(D, sizeof(*g)), t0;
    uint32_t *out = calloc(SIZE, sizeof(*out)), n = 0;
    uint8_t nonce[32];
    int rc = SFL_ENOMEM;

    if (g != NULL && out != NULL) {
        for (uint32_t i = 0; i < NNZ; i++)
            g[(uint64_t)i * (D / NNZ)] = 1.0;
        memset(nonce, 0x5a, sizeof(nonce));
        t0 = cpu_ms();
        rc = sfl_sa_support(g, D, SIZE, nonce, out, &n);
        if (rc == 0)
            printf("bench_secagg_support d=%u model_nnz=%u size=%u ms=%.1f\n", D, NNZ, n,
                   cpu_ms() - t0);
    }
    free(g);
    free(out);
    return rc;
}

int main(int argc, char **argv)
{
    uint32_t n = 100, ks[KMAX] = {1000, 10000};
    int nk = 2, rc = 1;
    cohort_t co = {0};
    prim_t p;

    if (argc > 2 && strcmp(argv[1], "-g") == 0) {
        char *end;
        unsigned long v = strtoul(argv[2], &end, 10);

        if (*end != '\0' || v < 2 || v % 2 != 0 || v > 65534) {
            fprintf(stderr, "usage: %s [-g K (even, >= 2)] [n [k ...]]\n", argv[0]);
            return 2;
        }
        g_degree = (uint32_t)v;
        argv += 2;
        argc -= 2;
    }
    if (argc > 1) {
        char *end;
        unsigned long v = strtoul(argv[1], &end, 10);

        if (*end != '\0' || v < 3 || v > 1000) {
            fprintf(stderr, "usage: %s [n (3..1000) [k ...]]\n", argv[0]);
            return 2;
        }
        n = (uint32_t)v;
    }
    if (argc > 2) {
        nk = 0;
        for (int a = 2; a < argc; a++) {
            char *end;
            unsigned long v = strtoul(argv[a], &end, 10);

            if (*end != '\0' || v < 1 || v > 500000 || nk == KMAX) {
                fprintf(stderr, "usage: %s [n [k (1..500000) ...]] (at most %d k)\n",
                        argv[0], KMAX);
                return 2;
            }
            ks[nk++] = (uint32_t)v;
        }
    }
    if (sfl_seal_init() < 0 || cohort_new(&co, n) < 0)
        goto fail;
    if (bytes_table(co.n, co.t, ks, nk) < 0 || primitives(&co, &p) < 0)
        goto fail;
    printf("bench_secagg_prim x25519_us=%.1f ed25519_verify_us=%.1f shamir_split_ms=%.3f "
           "shamir_combine_ms=%.3f n=%u t=%u\n",
           p.x25519_ms * 1e3, p.verify_ms * 1e3, p.split_ms, p.combine_ms, co.n, co.t);
    if (support_cost() < 0)
        goto fail;
    for (int a = 0; a < nk; a++)
        if (cpu_rounds(&co, &p, ks[a]) < 0)
            goto fail;
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "bench_secagg: %s\n", sfl_last_error());
out:
    cohort_free(&co);
    return rc;
}

/* libsfl/src/crypto/secagg*.c: secure aggregation's protocol, every party in
 * one process, so the client (secagg_client.c), the server (secagg_server.c)
 * and what they share (secagg.c) are tested together: the unmasked sum
 * equals the plain sum bit for bit with dropouts at every stage, at t and
 * below it, and every attack aborts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/secagg.h"

#define NMAX 100
#define LEN 37

enum { KEEP = 0, DROP_ADV = 1, DROP_SHARE, DROP_INPUT, DROP_CONSIST, DROP_UNMASK };

/* run_round: the first client's first released share of this type ('b'
 * or 's') is altered; 0 none */
static char g_tamper;
/* run_round with a hostile member (g_evil, the index of a member, or -1):
 *   EVIL_COMMIT   its r_b commitment is replaced by another point and the
 *                 stage-2 message signed again (the review's attack)
 *   EVIL_DEAL     it dealt g_nvictim holders (indices 1..g_nvictim) a share
 *                 of r_b off its polynomial, signed: they release it
 *   EVIL_BOX      its box to client 1 (to clients 1..g_nvictim when set)
 *                 does not open (they hold no share of it and release one
 *                 fewer)
 *   EVIL_ALTER    as a holder, it releases an altered share of client 0's
 *                 r_b without its dealer's signature (g_evil -2: the first
 *                 two holders other than client 0 do; g_altered counts)
 * The server's culprits after the round are copied into g_cul / g_ncul. */
enum { EVIL_NONE = 0, EVIL_COMMIT, EVIL_DEAL, EVIL_ALTER, EVIL_BOX };
static int g_evil_mode, g_evil = -1;
static uint32_t g_nvictim, g_altered, g_released;
static int g_badpoint; /* EVIL_COMMIT: commit[0] is the identity */
static sfl_sa_culprit_t g_cul[NMAX];
static uint32_t g_ncul;

/* run_round on a Harary graph: when > 0, all but g_keep - 1 of client 0's
 * neighbours drop before their input (client 0 and g_keep - 1 neighbours
 * hold its seeds) */
static uint32_t g_keep;

typedef struct {
    uint32_t n, t;
    sfl_sa_member_t m[NMAX];
    sfl_identity_t *id[NMAX];
    sfl_sa_round_t r;
    sfl_sa_client_t *c[NMAX];
    uint32_t q[NMAX][LEN];
} party_t;

static void party_init(party_t *p, uint32_t n, uint32_t t)
{
    sfl_rng_t rng;

    memset(p, 0, sizeof(*p));
    p->n = n;
    p->t = t;
    sfl_rng_seed(&rng, 42, n, t, 0);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(sfl_identity_generate(&p->id[i]), 0);
        p->m[i].id = 10 + 3 * i;
        memcpy(p->m[i].pk, p->id[i]->pk, 32);
        for (uint32_t k = 0; k < LEN; k++)
            p->q[i][k] = (uint32_t)sfl_rng_u64(&rng);
    }
    p->r.job = 1;
    p->r.round = 7;
    p->r.attempt = 0;
    memset(p->r.nonce, 0x33, sizeof(p->r.nonce));
    memset(p->r.model_hash, 0x44, sizeof(p->r.model_hash));
    memset(p->r.support_hash, 0x55, sizeof(p->r.support_hash));
    p->r.len = LEN;
    p->r.t = t;
    p->r.n = n;
    p->r.members = p->m;
}

static void party_free(party_t *p)
{
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_client_free(p->c[i]);
        sfl_identity_free(p->id[i]);
    }
}

/* The stage-2 signature as the protocol defines it (sfl/crypto/secagg.h): over
 * sid | u64 id | u64 ncommit | the commitments, context "sfl-sa-shares-v2". */
static void resign_shares(const party_t *p, uint32_t i, const uint8_t sid[SFL_SA_HASH],
                          sfl_sa_shares_t *sh)
{
    size_t len = SFL_SA_HASH + 16 + (size_t)sh->ncommit * SFL_SA_POINT;
    uint8_t *msg = calloc(1, len);

    memcpy(msg, sid, SFL_SA_HASH);
    for (int b = 0; b < 8; b++) {
        msg[SFL_SA_HASH + b] = (uint8_t)(sh->id >> (8 * b));
        msg[SFL_SA_HASH + 8 + b] = (uint8_t)((uint64_t)sh->ncommit >> (8 * b));
    }
    memcpy(msg + SFL_SA_HASH + 16, sh->commit, (size_t)sh->ncommit * SFL_SA_POINT);
    assert_int_equal(sfl_seal_sign_detached(p->id[i], "sfl-sa-shares-v2", msg, len, sh->sig), 0);
    free(msg);
}

/* A dealer's signature of one share: sid | u64 dealer | u64 holder | u16 x
 * | y under "sfl-sa-share-b-v1" or "-s-v1". */
static void sign_share(const party_t *p, uint32_t dealer, uint64_t holder,
                       const uint8_t sid[SFL_SA_HASH], sfl_sa_reveal_t *rv)
{
    uint8_t msg[SFL_SA_SHARE_MSG];

    memcpy(msg, sid, SFL_SA_HASH);
    for (int b = 0; b < 8; b++) {
        msg[SFL_SA_HASH + b] = (uint8_t)(p->m[dealer].id >> (8 * b));
        msg[SFL_SA_HASH + 8 + b] = (uint8_t)(holder >> (8 * b));
    }
    msg[SFL_SA_HASH + 16] = (uint8_t)rv->share.x;
    msg[SFL_SA_HASH + 17] = (uint8_t)(rv->share.x >> 8);
    memcpy(msg + SFL_SA_HASH + 18, rv->share.y, 32);
    assert_int_equal(sfl_seal_sign_detached(p->id[dealer], rv->type == 'b' ? "sfl-sa-share-b-v1"
                                                                            : "sfl-sa-share-s-v1",
                                            msg, sizeof(msg), rv->sig),
                     0);
}

/* The hostile member's release or stage-2 message, as g_evil_mode says. */
static void evil_shares(const party_t *p, uint32_t i, const uint8_t sid[SFL_SA_HASH],
                        sfl_sa_shares_t *sh)
{
    uint8_t r[32];

    if (g_evil_mode != EVIL_COMMIT || (int)i != g_evil)
        return;
    sfl_shamir_random(r);
    assert_int_equal(crypto_scalarmult_ed25519_base_noclamp(sh->commit[0], r), 0);
    if (g_badpoint) {
        /* the identity, of small order: not a point of the group */
        memset(sh->commit[0], 0, SFL_SA_POINT);
        sh->commit[0][0] = 1;
    }
    resign_shares(p, i, sid, sh);
}

static void evil_release(const party_t *p, uint32_t i, const uint8_t sid[SFL_SA_HASH],
                         sfl_sa_reveal_t *rev, uint32_t nr)
{
    for (uint32_t k = 0; k < nr; k++) {
        if (g_evil_mode == EVIL_DEAL && i >= 1 && i <= g_nvictim &&
            rev[k].of == p->m[g_evil].id && rev[k].type == 'b') {
            rev[k].share.y[0] ^= 1; /* still canonical: y < L stays below */
            sign_share(p, (uint32_t)g_evil, p->m[i].id, sid, &rev[k]);
        }
        if (g_evil_mode == EVIL_ALTER && rev[k].of == p->m[0].id && rev[k].type == 'b' &&
            ((int)i == g_evil || (g_evil == -2 && i != 0 && g_altered < 2))) {
            rev[k].share.y[0] ^= 1;
            g_altered++;
        }
    }
}

/* A whole round; drop[i] is the stage before which client i goes silent.
 * Returns the server's result (0 with the sum, or its error) and fills
 * want with the plain sum of the inputs the server took. */
static void isolate_first(const party_t *p, const sfl_sa_adv_t *u1, uint32_t n1, int *drop);
static void harary_party(party_t *p, uint32_t n, uint32_t degree);
/* The Harary tests' cohort: 60 members at degree 16 keep tau = 12 of a
 * seed's 17 holders, as 100 would (t = 41: ceil(41 x 17 / 60) = 12), at a
 * third of the work (each member checks every advertisement of U1). */
#define HN 60

static int run_round(party_t *p, int *drop, uint32_t *sum, uint32_t *count, uint32_t *want)
{
    sfl_sa_policy_t pol;
    sfl_sa_server_t *s = NULL;
    sfl_sa_adv_t adv;
    const sfl_sa_adv_t *u1;
    const uint64_t *u2, *u3;
    const sfl_sa_consist_t *u4;
    uint32_t n1, n2, n3, n4;
    uint8_t sid[SFL_SA_HASH];
    int rc;

    sfl_sa_policy_default(&pol);
    /* the protocol's mechanics at any t > n / 2; the floor against
     * colluders has its own tests (test_secagg_collusion_floor) */
    pol.max_colluders = 0;
    memset(want, 0, LEN * sizeof(uint32_t));
    assert_int_equal(sfl_sa_server_new(&p->r, &s), 0);
    for (uint32_t i = 0; i < p->n; i++) {
        assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[i].id, p->id[i], &p->c[i], &adv), 0);
        if (drop[i] != DROP_ADV)
            assert_int_equal(sfl_sa_server_adv(s, &adv), 0);
    }
    if ((rc = sfl_sa_server_end_adv(s, &u1, &n1)) < 0)
        goto out;
    sfl_sa_session_id(&p->r, u1, n1, sid);
    if (g_keep > 0)
        isolate_first(p, u1, n1, drop);
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_shares_t sh;

        if (drop[i] == DROP_ADV || drop[i] == DROP_SHARE)
            continue;
        assert_int_equal(sfl_sa_client_share(p->c[i], u1, n1, &sh), 0);
        assert_int_equal(sh.nboxes, sfl_sa_degree(&p->r, n1));
        evil_shares(p, i, sid, &sh);
        assert_int_equal(sfl_sa_server_shares(s, &sh), 0);
        sfl_sa_shares_clear(&sh);
    }
    if ((rc = sfl_sa_server_end_shares(s, &u2, &n2)) < 0)
        goto out;
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_input_t in;
        sfl_sa_box_t *boxes;
        uint32_t nb;

        if (drop[i] != KEEP && drop[i] <= DROP_INPUT)
            continue;
        assert_int_equal(sfl_sa_server_inbox(s, p->m[i].id, &boxes, &nb), 0);
        for (uint32_t k = 0;
             g_evil_mode == EVIL_BOX && i >= 1 && i <= (g_nvictim ? g_nvictim : 1) && k < nb; k++)
            if (boxes[k].from == p->m[g_evil].id)
                boxes[k].ct[3] ^= 1;
        assert_int_equal(sfl_sa_client_input(p->c[i], u2, n2, boxes, nb, p->q[i], &in), 0);
        sfl__free(boxes);
        assert_int_equal(sfl_sa_server_input(s, &in), 0);
        for (uint32_t k = 0; k < LEN; k++)
            want[k] += p->q[i][k];
    }
    if ((rc = sfl_sa_server_end_inputs(s, &u3, &n3)) < 0)
        goto out;
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_consist_t cs;

        if (drop[i] != KEEP && drop[i] <= DROP_CONSIST)
            continue;
        assert_int_equal(sfl_sa_client_consist(p->c[i], u3, n3, &cs), 0);
        assert_int_equal(sfl_sa_server_consist(s, &cs), 0);
    }
    if ((rc = sfl_sa_server_end_consist(s, &u4, &n4)) < 0)
        goto out;
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_reveal_t rev[NMAX];
        uint32_t nr;

        if (drop[i] != KEEP)
            continue;
        assert_int_equal(sfl_sa_client_unmask(p->c[i], u4, n4, rev, &nr), 0);
        if (g_evil_mode == EVIL_BOX && i == 1)
            g_released = nr;
        for (uint32_t k = 0; g_tamper && i == 0 && k < nr; k++)
            if (rev[k].type == g_tamper) {
                rev[k].share.y[0] ^= 1; /* still canonical: y < L stays below */
                break;
            }
        evil_release(p, i, sid, rev, nr);
        assert_int_equal(sfl_sa_server_unmask(s, p->m[i].id, rev, nr), 0);
    }
    rc = sfl_sa_server_finish(s, sum, count);
out:
    {
        const sfl_sa_culprit_t *cul;

        assert_int_equal(sfl_sa_server_culprits(s, &cul, &g_ncul), 0);
        memcpy(g_cul, cul, g_ncul * sizeof(*cul));
    }
    sfl_sa_server_free(s);
    return rc;
}

static void no_drops(uint32_t n)
{
    party_t *p = calloc(1, sizeof(*p));
    int drop[NMAX] = {0};
    uint32_t sum[LEN], want[LEN], count = 0;

    party_init(p, n, n * 2 / 3 + 1);
    assert_int_equal(run_round(p, drop, sum, &count, want), 0);
    assert_int_equal(count, n);
    assert_memory_equal(sum, want, sizeof(sum));
    party_free(p);
    free(p);
}

static void test_secagg_exact_5(void **state)
{
    (void)state;
    no_drops(5);
}

/* A holder releasing a wrong share (client 0 alters its first share of
 * r_b, its own, or of r_s, of client 2 which dropped): the rebuilt seed
 * misses the dealer's commitment, the share is checked, its dealer
 * signature fails, so the holder is named and the share dropped. With 6
 * holders and tau = 4 enough remain: the round gives the exact sum; on
 * 639d1d6 it failed (SFL_EBADSIG). With 5 and one dropped (4 holders of
 * r_s, tau 4) the seed cannot be rebuilt: the round fails, named. */
static void test_secagg_bad_share(void **state)
{
    (void)state;
    for (int dropped = 0; dropped <= 2; dropped++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        party_init(p, dropped == 2 ? 5 : 6, 4);
        if (dropped)
            drop[2] = DROP_INPUT; /* its r_s is rebuilt */
        g_tamper = dropped ? 's' : 'b';
        rc = run_round(p, drop, sum, &count, want);
        g_tamper = 0;
        if (dropped == 2) {
            assert_int_equal(rc, SFL_EBADSIG);
        } else {
            if (rc != 0)
                fail_msg("dropped %d: %s", dropped, sfl_last_error());
            assert_memory_equal(sum, want, sizeof(sum));
        }
        assert_int_equal(g_ncul, 1);
        assert_int_equal(g_cul[0].id, p->m[0].id);
        assert_int_equal(g_cul[0].why, SFL_SA_BLAME_ALTERED);
        assert_string_equal(sfl_sa_blame_name(g_cul[0].why), "altered_share");
        party_free(p);
        free(p);
    }
}

/* The review's attack: a member signs a commitment that is not of its r_b.
 * Its shares all miss the commitment and carry its signature: it is named
 * (bad_share_dealt). They agree among themselves (more than tau of them,
 * signed), so they rebuild the seed it dealt and the round gives the exact
 * sum; on 639d1d6 the round failed and the job paused. */
static void test_secagg_culprit_commitment(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    int drop[NMAX] = {0};
    uint32_t sum[LEN], want[LEN], count = 0;
    int rc;

    (void)state;
    party_init(p, 6, 5);
    g_evil_mode = EVIL_COMMIT;
    g_evil = 3;
    rc = run_round(p, drop, sum, &count, want);
    if (rc != 0)
        fail_msg("%s", sfl_last_error());
    assert_int_equal(count, 6);
    assert_memory_equal(sum, want, sizeof(sum));
    assert_int_equal(g_ncul, 1);
    assert_int_equal(g_cul[0].id, p->m[3].id);
    assert_int_equal(g_cul[0].why, SFL_SA_BLAME_BADDEAL);
    party_free(p);
    free(p);
    /* a commitment that is not a point of the group (signed): named
     * bad_commitment, its signed shares rebuild the seed */
    p = calloc(1, sizeof(*p));
    party_init(p, 6, 5);
    g_badpoint = 1;
    rc = run_round(p, drop, sum, &count, want);
    g_badpoint = 0;
    if (rc != 0)
        fail_msg("%s", sfl_last_error());
    assert_memory_equal(sum, want, sizeof(sum));
    assert_int_equal(g_ncul, 1);
    assert_int_equal(g_cul[0].id, p->m[3].id);
    assert_int_equal(g_cul[0].why, SFL_SA_BLAME_BADCOMMIT);
    party_free(p);
    free(p);
    /* with exactly tau holders nothing shows which of its shares to trust:
     * the round fails, and it is named */
    p = calloc(1, sizeof(*p));
    party_init(p, 5, 5);
    rc = run_round(p, drop, sum, &count, want);
    assert_int_equal(rc, SFL_EBADSIG);
    assert_int_equal(g_ncul, 1);
    assert_int_equal(g_cul[0].id, p->m[3].id);
    assert_int_equal(g_cul[0].why, SFL_SA_BLAME_BADDEAL);
    g_evil_mode = EVIL_NONE;
    g_evil = -1;
    party_free(p);
    free(p);
}

/* A dealer that deals holders shares off its committed polynomial, signed:
 * one bad share of 7 (tau 5): the dealer is named, the share dropped, the
 * round exact; three bad of 7 leave 4 good and a signed set that does not
 * agree: the round fails, the dealer named. */
static void test_secagg_culprit_dealer(void **state)
{
    for (uint32_t nbad = 1; nbad <= 3; nbad += 2) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        (void)state;
        party_init(p, 7, 5);
        g_evil_mode = EVIL_DEAL;
        g_evil = 4;
        g_nvictim = nbad;
        rc = run_round(p, drop, sum, &count, want);
        g_evil_mode = EVIL_NONE;
        g_evil = -1;
        if (nbad == 1) {
            if (rc != 0)
                fail_msg("%s", sfl_last_error());
            assert_memory_equal(sum, want, sizeof(sum));
        } else {
            assert_int_equal(rc, SFL_EBADSIG);
        }
        assert_int_equal(g_ncul, 1);
        assert_int_equal(g_cul[0].id, p->m[4].id);
        assert_int_equal(g_cul[0].why, SFL_SA_BLAME_BADDEAL);
        party_free(p);
        free(p);
    }
}

/* A box that does not open: its holder releases every share but that one,
 * no one is named (nothing is provable), and tau of the rest rebuild. */
static void test_secagg_box_unopened(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    int drop[NMAX] = {0};
    uint32_t sum[LEN], want[LEN], count = 0;

    (void)state;
    party_init(p, 6, 4);
    g_evil_mode = EVIL_BOX;
    g_evil = 3;
    assert_int_equal(run_round(p, drop, sum, &count, want), 0);
    g_evil_mode = EVIL_NONE;
    g_evil = -1;
    assert_memory_equal(sum, want, sizeof(sum));
    assert_int_equal(g_released, 5);
    assert_int_equal(g_ncul, 0);
    party_free(p);
    free(p);
}

/* A dealer whose boxes do not open for so many holders that its seed
 * cannot be rebuilt (7 members, tau 5, three unreadable boxes: four
 * shares): the round fails, and the dealer is named (unreadable_shares:
 * three holders that answered had none of it, which one lying holder
 * alone cannot make); with two unreadable boxes five shares remain and the
 * round is exact. */
static void test_secagg_culprit_unreadable(void **state)
{
    for (uint32_t victims = 2; victims <= 3; victims++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        (void)state;
        party_init(p, 7, 5);
        g_evil_mode = EVIL_BOX;
        g_evil = 6;
        g_nvictim = victims;
        rc = run_round(p, drop, sum, &count, want);
        g_evil_mode = EVIL_NONE;
        g_evil = -1;
        g_nvictim = 0;
        if (victims == 2) {
            assert_int_equal(rc, 0);
            assert_memory_equal(sum, want, sizeof(sum));
            assert_int_equal(g_ncul, 0);
        } else {
            assert_true(rc < 0);
            assert_non_null(strstr(sfl_last_error(), "3 holders that answered had none"));
            assert_int_equal(g_ncul, 1);
            assert_true(g_cul[0].id == p->m[6].id);
            assert_int_equal(g_cul[0].why, SFL_SA_BLAME_UNREADABLE);
        }
        party_free(p);
        free(p);
    }
}

/* A holder that releases an altered share of another's r_b: named
 * (altered_share), not the dealer; the round exact. On a Harary graph too
 * (60 members, degree 16: the cheap check fails, the bad share is found
 * among 17 by halving). */
static void test_secagg_culprit_holder(void **state)
{
    for (int harary = 0; harary <= 1; harary++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        (void)state;
        if (harary)
            harary_party(p, HN, 16);
        else
            party_init(p, 7, 5);
        g_evil_mode = EVIL_ALTER;
        g_evil = harary ? -2 : 2;
        g_altered = 0;
        rc = run_round(p, drop, sum, &count, want);
        g_evil_mode = EVIL_NONE;
        if (rc != 0)
            fail_msg("%s", sfl_last_error());
        assert_memory_equal(sum, want, sizeof(sum));
        if (!harary) {
            assert_int_equal(g_ncul, 1);
            assert_int_equal(g_cul[0].id, p->m[2].id);
            assert_int_equal(g_cul[0].why, SFL_SA_BLAME_ALTERED);
        } else {
            /* two of client 0's 16 neighbours altered theirs: both named */
            assert_int_equal(g_altered, 2);
            assert_int_equal(g_ncul, 2);
            for (uint32_t i = 0; i < g_ncul; i++) {
                assert_int_not_equal(g_cul[i].id, p->m[0].id);
                assert_int_equal(g_cul[i].why, SFL_SA_BLAME_ALTERED);
            }
        }
        g_evil = -1;
        party_free(p);
        free(p);
    }
}

static void test_secagg_exact_100(void **state)
{
    (void)state;
    no_drops(100);
}

/* The ring of a Harary graph: client 0's neighbours are those within k / 2
 * places of it; all but g_keep - 1 of them drop before their input. */
static void isolate_first(const party_t *p, const sfl_sa_adv_t *u1, uint32_t n1, int *drop)
{
    uint32_t ring[NMAX], pos0 = 0, k = sfl_sa_degree(&p->r, n1), kept = 0;
    uint8_t sid[SFL_SA_HASH];

    assert_int_equal(n1, p->n);
    assert_true(k + 1 < n1);
    sfl_sa_session_id(&p->r, u1, n1, sid);
    sfl_sa_ring(sid, n1, ring);
    while (ring[pos0] != 0)
        pos0++;
    for (uint32_t d = 1; d <= k / 2; d++)
        for (int side = -1; side <= 1; side += 2) {
            uint32_t at = (uint32_t)((pos0 + n1 + (uint32_t)side * d) % n1);

            if (kept + 1 < g_keep)
                kept++;
            else
                drop[ring[at]] = DROP_INPUT;
        }
}

static void harary_party(party_t *p, uint32_t n, uint32_t degree)
{
    party_init(p, n, n * 2 / 3 + 1);
    p->r.degree = degree;
}

/* The ring is a permutation, the same for the same sid and another for
 * another; the degree and the holders' threshold follow their rules. */
static void test_secagg_harary_ring(void **state)
{
    uint32_t ring[NMAX], again[NMAX], seen[NMAX];
    uint8_t sid[SFL_SA_HASH];
    sfl_sa_round_t r = {.t = 67, .n = 100, .degree = 16};
    int differ = 0;

    (void)state;
    memset(sid, 0x5a, sizeof(sid));
    sfl_sa_ring(sid, NMAX, ring);
    sfl_sa_ring(sid, NMAX, again);
    assert_memory_equal(ring, again, sizeof(ring));
    memset(seen, 0, sizeof(seen));
    for (uint32_t i = 0; i < NMAX; i++) {
        assert_true(ring[i] < NMAX);
        assert_int_equal(seen[ring[i]]++, 0);
        differ += ring[i] != i;
    }
    assert_true(differ > NMAX / 2);
    sid[31] ^= 1;
    sfl_sa_ring(sid, NMAX, again);
    assert_memory_not_equal(ring, again, sizeof(ring));

    assert_int_equal(sfl_sa_degree(&r, 100), 16);
    assert_int_equal(sfl_sa_degree(&r, 17), 16);  /* k + 1 = n1: complete */
    assert_int_equal(sfl_sa_degree(&r, 10), 9);
    r.degree = 0;
    assert_int_equal(sfl_sa_degree(&r, 100), 99);
    assert_int_equal(sfl_sa_holders(&r, 90), 67); /* complete: t */
    r.degree = 16;
    assert_int_equal(sfl_sa_holders(&r, 100), 12); /* ceil(67 * 17 / 100) */
    r.t = 51;
    assert_int_equal(sfl_sa_holders(&r, 100), 9);  /* floor(17 / 2) + 1 */
}

/* On a Harary graph of degree 16 over HN = 60 clients (tau = 12 of a seed's
 * 17 holders): the exact sum, each client sending 16 boxes, with no
 * dropouts and with 5 at each stage. */
static void test_secagg_harary_sum(void **state)
{
    (void)state;
    for (int stage = KEEP; stage <= DROP_UNMASK; stage++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        harary_party(p, HN, 16);
        /* 5 = k + 1 - tau: no neighbourhood can lose more, whatever the
         * ring (it is drawn from the round's fresh keys) */
        for (uint32_t i = 0; stage != KEEP && i < 5; i++)
            drop[(7 * i + 3) % HN] = stage;
        rc = run_round(p, drop, sum, &count, want);
        if (rc != 0)
            fail_msg("stage %d: %s", stage, sfl_last_error());
        assert_int_equal(count, stage == KEEP || stage >= DROP_CONSIST ? HN : HN - 5);
        assert_memory_equal(sum, want, sizeof(sum));
        party_free(p);
        free(p);
    }
}

/* On a Harary graph a client's seeds are rebuilt only from tau holders in
 * U3: with tau (itself and tau - 1 neighbours) the round gives the sum,
 * with tau - 1 it fails, so a server that leaves a client's neighbours out
 * of U3 cannot peel its value off. */
static void test_secagg_harary_isolation(void **state)
{
    (void)state;
    for (int fewer = 0; fewer <= 1; fewer++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;
        int rc;

        harary_party(p, HN, 16);
        assert_int_equal(sfl_sa_holders(&p->r, HN), 12);
        g_keep = sfl_sa_holders(&p->r, HN) - (uint32_t)fewer;
        rc = run_round(p, drop, sum, &count, want);
        g_keep = 0;
        if (!fewer) {
            if (rc != 0)
                fail_msg("tau holders: %s", sfl_last_error());
            assert_memory_equal(sum, want, sizeof(sum));
        } else {
            assert_int_equal(rc, SFL_EEMPTY);
        }
        party_free(p);
        free(p);
    }
}

/* A client refuses an odd degree and one below its floor. */
static void test_secagg_harary_floor(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    sfl_sa_policy_t pol;
    sfl_sa_client_t *c = NULL;
    sfl_sa_adv_t adv;

    (void)state;
    sfl_sa_policy_default(&pol);
    harary_party(p, 100, 8);
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), SFL_EINVAL);
    p->r.degree = 17;
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), SFL_EINVAL);
    pol.min_degree = 8;
    p->r.degree = 8;
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), 0);
    sfl_sa_client_free(c);
    party_free(p);
    free(p);
}

/* Zero inputs: the masks cancel to an all-zero sum. */
static void test_secagg_zero_inputs(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    int drop[NMAX] = {0};
    uint32_t sum[LEN], want[LEN], count = 0, zero[LEN] = {0};

    (void)state;
    party_init(p, 5, 4);
    memset(p->q, 0, sizeof(p->q));
    assert_int_equal(run_round(p, drop, sum, &count, want), 0);
    assert_memory_equal(sum, zero, sizeof(sum));
    party_free(p);
    free(p);
}

/* Every stage, dropouts leaving exactly t (the sum of the survivors) and
 * t - 1 (the round fails, nothing revealed). */
static void test_secagg_dropouts(void **state)
{
    (void)state;
    for (int stage = DROP_ADV; stage <= DROP_UNMASK; stage++) {
        for (int below = 0; below <= 1; below++) {
            party_t *p = calloc(1, sizeof(*p));
            int drop[NMAX] = {0};
            uint32_t n = 10, t = 7, sum[LEN], want[LEN], count = 0;
            int rc;

            party_init(p, n, t);
            /* n - t clients drop (t stay), one more when below */
            for (uint32_t i = 0; i < n - t + (uint32_t)below; i++)
                drop[(3 * i + 1) % n] = stage;
            rc = run_round(p, drop, sum, &count, want);
            if (!below) {
                if (rc != 0)
                    fail_msg("stage %d: %s", stage, sfl_last_error());
                /* inputs of those that drop at consistency or unmask count */
                assert_int_equal(count, stage >= DROP_CONSIST ? n : t);
                assert_memory_equal(sum, want, sizeof(sum));
            } else {
                if (rc != SFL_EEMPTY)
                    fail_msg("stage %d, t - 1 left: rc %d (%s)", stage, rc, sfl_last_error());
            }
            party_free(p);
            free(p);
        }
    }
}

/* A round where client 0's view is tampered with at one stage: it aborts,
 * wipes its secrets and answers nothing after. */
typedef struct {
    party_t p;
    sfl_sa_server_t *s;
    sfl_sa_adv_t adv[NMAX];
    const sfl_sa_adv_t *u1;
    uint32_t n1;
} att_t;

static att_t *attack_setup(void)
{
    att_t *a = calloc(1, sizeof(*a));
    sfl_sa_policy_t pol;

    sfl_sa_policy_default(&pol);
    party_init(&a->p, 5, 4);
    assert_int_equal(sfl_sa_server_new(&a->p.r, &a->s), 0);
    for (uint32_t i = 0; i < a->p.n; i++) {
        assert_int_equal(sfl_sa_client_new(&a->p.r, &pol, a->p.m[i].id, a->p.id[i], &a->p.c[i],
                                           &a->adv[i]),
                         0);
        assert_int_equal(sfl_sa_server_adv(a->s, &a->adv[i]), 0);
    }
    assert_int_equal(sfl_sa_server_end_adv(a->s, &a->u1, &a->n1), 0);
    return a;
}

static void attack_free(att_t *a)
{
    sfl_sa_server_free(a->s);
    party_free(&a->p);
    free(a);
}

static void expect_abort(att_t *a, int rc)
{
    sfl_sa_shares_t sh;

    assert_true(rc < 0);
    assert_true(sfl_sa_client_aborted(a->p.c[0]));
    /* nothing more from it */
    assert_true(sfl_sa_client_share(a->p.c[0], a->u1, a->n1, &sh) < 0);
}

/* Commitments tampered with after they were signed are refused and their
 * sender named (its own connection carried them); signed ones that are not
 * 2 tau points are refused and named too. (One that is not a point of the
 * group is found at the end: test_secagg_culprit_commitment.) */
static void test_secagg_culprit_commit_shape(void **state)
{
    uint8_t sid[SFL_SA_HASH];
    const sfl_sa_culprit_t *cul;
    uint32_t ncul;

    (void)state;
    for (int how = 0; how < 3; how += 2) {
        att_t *a = attack_setup();
        sfl_sa_shares_t sh;

        sfl_sa_session_id(&a->p.r, a->u1, a->n1, sid);
        assert_int_equal(sfl_sa_client_share(a->p.c[1], a->u1, a->n1, &sh), 0);
        if (how == 0) {
            sh.commit[1][0] ^= 1; /* in transit: the signature fails */
        } else {
            sh.ncommit--; /* one short, signed */
            resign_shares(&a->p, 1, sid, &sh);
        }
        assert_int_equal(sfl_sa_server_shares(a->s, &sh), how == 0 ? SFL_EBADSIG : SFL_EINVAL);
        assert_int_equal(sfl_sa_server_culprits(a->s, &cul, &ncul), 0);
        assert_int_equal(ncul, 1);
        assert_int_equal(cul[0].id, a->p.m[1].id);
        assert_int_equal(cul[0].why, how == 0 ? SFL_SA_BLAME_BADSIG : SFL_SA_BLAME_BADCOMMIT);
        sfl_sa_shares_clear(&sh);
        attack_free(a);
    }
}

static void test_secagg_attacks_keys(void **state)
{
    sfl_sa_adv_t bad[NMAX];
    sfl_sa_shares_t sh;
    att_t *a;

    (void)state;
    /* a key substituted: the signature fails */
    a = attack_setup();
    memcpy(bad, a->u1, a->n1 * sizeof(*bad));
    bad[2].c_pk[0] ^= 1;
    expect_abort(a, sfl_sa_client_share(a->p.c[0], bad, a->n1, &sh));
    attack_free(a);
    /* its own key altered (re-signed cannot happen without its identity) */
    a = attack_setup();
    memcpy(bad, a->u1, a->n1 * sizeof(*bad));
    bad[0].s_pk[5] ^= 1;
    expect_abort(a, sfl_sa_client_share(a->p.c[0], bad, a->n1, &sh));
    attack_free(a);
    /* a repeated id */
    a = attack_setup();
    memcpy(bad, a->u1, a->n1 * sizeof(*bad));
    bad[2] = bad[1];
    expect_abort(a, sfl_sa_client_share(a->p.c[0], bad, a->n1, &sh));
    attack_free(a);
    /* fewer than t */
    a = attack_setup();
    expect_abort(a, sfl_sa_client_share(a->p.c[0], a->u1, a->p.t - 1, &sh));
    attack_free(a);
    /* itself missing */
    a = attack_setup();
    expect_abort(a, sfl_sa_client_share(a->p.c[0], a->u1 + 1, a->n1 - 1, &sh));
    attack_free(a);
    /* the server refuses a small-order key and a forged signature */
    {
        party_t *p = calloc(1, sizeof(*p));
        sfl_sa_server_t *s;
        sfl_sa_adv_t adv;
        sfl_sa_client_t *c;
        sfl_sa_policy_t pol;

        sfl_sa_policy_default(&pol);
        party_init(p, 5, 4);
        assert_int_equal(sfl_sa_server_new(&p->r, &s), 0);
        assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), 0);
        adv.id = p->m[1].id; /* signed by 0, claimed by 1 (over 1's connection) */
        assert_int_equal(sfl_sa_server_adv(s, &adv), SFL_EBADSIG);
        adv.id = p->m[0].id;
        assert_int_equal(sfl_sa_server_adv(s, &adv), 0);
        assert_int_equal(sfl_sa_server_adv(s, &adv), SFL_EINVAL); /* twice: a retry */
        {
            const sfl_sa_culprit_t *cul;
            uint32_t ncul;
            sfl_sa_client_t *c2;
            sfl_sa_adv_t adv2;

            assert_int_equal(sfl_sa_server_culprits(s, &cul, &ncul), 0);
            assert_int_equal(ncul, 1);
            assert_int_equal(cul[0].id, p->m[1].id);
            assert_int_equal(cul[0].why, SFL_SA_BLAME_BADSIG);
            /* other keys, signed by 0: two faces */
            assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c2, &adv2),
                             0);
            assert_int_equal(sfl_sa_server_adv(s, &adv2), SFL_EINVAL);
            assert_int_equal(sfl_sa_server_culprits(s, &cul, &ncul), 0);
            assert_int_equal(ncul, 2);
            assert_int_equal(cul[1].id, p->m[0].id);
            assert_int_equal(cul[1].why, SFL_SA_BLAME_EQUIVOCATE);
            sfl_sa_client_free(c2);
        }
        sfl_sa_client_free(c);
        sfl_sa_server_free(s);
        party_free(p);
        free(p);
    }
}

/* Shares, inputs and unmasking, each with client 0 shown a bad view. */
static void test_secagg_attacks_later(void **state)
{
    sfl_sa_shares_t sh[NMAX];
    const uint64_t *u2, *u3;
    uint32_t n2, n3;
    uint64_t fake[NMAX];
    sfl_sa_box_t *boxes;
    uint32_t nb;
    sfl_sa_input_t in;
    sfl_sa_consist_t cs;
    att_t *a = attack_setup();

    (void)state;
    for (uint32_t i = 0; i < a->p.n; i++) {
        assert_int_equal(sfl_sa_client_share(a->p.c[i], a->u1, a->n1, &sh[i]), 0);
        assert_int_equal(sfl_sa_server_shares(a->s, &sh[i]), 0);
    }
    assert_int_equal(sfl_sa_server_end_shares(a->s, &u2, &n2), 0);
    assert_int_equal(sfl_sa_server_inbox(a->s, a->p.m[0].id, &boxes, &nb), 0);
    /* a box tampered with does not open: client 0 holds no share of its
     * dealer and goes on (it cannot prove whose fault it is) */
    boxes[1].ct[3] ^= 1;
    assert_int_equal(sfl_sa_client_input(a->p.c[0], u2, n2, boxes, nb, a->p.q[0], &in), 0);
    assert_false(sfl_sa_client_aborted(a->p.c[0]));
    sfl_sa_input_clear(&in);
    boxes[1].ct[3] ^= 1;
    /* client 1: a box for someone else */
    {
        sfl_sa_box_t *b1;
        uint32_t n1b;

        assert_int_equal(sfl_sa_server_inbox(a->s, a->p.m[1].id, &b1, &n1b), 0);
        assert_true(sfl_sa_client_input(a->p.c[1], u2, n2, boxes, nb, a->p.q[1], &in) < 0);
        assert_true(sfl_sa_client_aborted(a->p.c[1]));
        sfl__free(b1);
    }
    /* client 2: itself listed dropped */
    {
        uint32_t k = 0;

        for (uint32_t i = 0; i < n2; i++)
            if (u2[i] != a->p.m[2].id)
                fake[k++] = u2[i];
        sfl__free(boxes);
        assert_int_equal(sfl_sa_server_inbox(a->s, a->p.m[2].id, &boxes, &nb), 0);
        assert_true(sfl_sa_client_input(a->p.c[2], fake, k, boxes, nb, a->p.q[2], &in) < 0);
        assert_true(sfl_sa_client_aborted(a->p.c[2]));
    }
    sfl__free(boxes);
    /* clients 3 and 4 go on, then 3 is shown a U3 with an id not in U2 */
    for (uint32_t i = 3; i < 5; i++) {
        assert_int_equal(sfl_sa_server_inbox(a->s, a->p.m[i].id, &boxes, &nb), 0);
        assert_int_equal(sfl_sa_client_input(a->p.c[i], u2, n2, boxes, nb, a->p.q[i], &in), 0);
        sfl__free(boxes);
        sfl_sa_input_clear(&in);
    }
    fake[0] = a->p.m[3].id;
    fake[1] = a->p.m[4].id;
    fake[2] = 999999;
    assert_true(sfl_sa_client_consist(a->p.c[3], fake, 3, &cs) < 0);
    assert_true(sfl_sa_client_aborted(a->p.c[3]));
    /* 4 signs a U3 of 4 (fewer than... t is 4: ok), then is asked to unmask
     * with signatures over another U3, then twice */
    fake[0] = a->p.m[0].id;
    fake[1] = a->p.m[1].id;
    fake[2] = a->p.m[3].id;
    fake[3] = a->p.m[4].id;
    assert_int_equal(sfl_sa_client_consist(a->p.c[4], fake, 4, &cs), 0);
    {
        sfl_sa_consist_t sigs[4];
        sfl_sa_reveal_t rev[NMAX];
        uint32_t nr;

        /* only its own signature: fewer than t */
        sigs[0] = cs;
        assert_true(sfl_sa_client_unmask(a->p.c[4], sigs, 1, rev, &nr) < 0);
        assert_true(sfl_sa_client_aborted(a->p.c[4]));
        assert_int_equal(nr, 0);
    }
    for (uint32_t i = 0; i < a->p.n; i++)
        sfl_sa_shares_clear(&sh[i]);
    (void)u3;
    (void)n3;
    attack_free(a);
}

/* Out of order, at both ends, and a hostile agent's answers at the server:
 * a client asked for its input before its shares aborts; the server
 * refuses an input of the wrong length, one after the inputs ended, and a
 * release that holds both shares of a client, a share at another x, a
 * share of a client it holds none of, or the same client twice. */
static void test_secagg_attacks_order(void **state)
{
    sfl_sa_shares_t sh[NMAX];
    sfl_sa_input_t in[NMAX];
    sfl_sa_consist_t cs;
    const uint64_t *u2, *u3;
    const sfl_sa_consist_t *u4;
    uint32_t n2, n3, n4, nb, nr;
    sfl_sa_box_t *boxes;
    sfl_sa_reveal_t rev[NMAX], bad[NMAX];
    att_t *a = attack_setup();

    (void)state;
    /* client 0: its input asked first */
    assert_true(sfl_sa_client_input(a->p.c[0], NULL, 0, NULL, 0, a->p.q[0], &in[0]) < 0);
    assert_true(sfl_sa_client_aborted(a->p.c[0]));
    /* an input before the shares ended */
    for (uint32_t i = 1; i < a->p.n; i++) {
        assert_int_equal(sfl_sa_client_share(a->p.c[i], a->u1, a->n1, &sh[i]), 0);
        assert_int_equal(sfl_sa_server_shares(a->s, &sh[i]), 0);
        sfl_sa_shares_clear(&sh[i]);
    }
    {
        sfl_sa_input_t early = {.id = a->p.m[1].id, .len = LEN, .y = a->p.q[1]};

        assert_int_equal(sfl_sa_server_input(a->s, &early), SFL_EINVAL);
    }
    assert_int_equal(sfl_sa_server_end_shares(a->s, &u2, &n2), 0);
    assert_int_equal(n2, 4);
    for (uint32_t i = 1; i < a->p.n; i++) {
        assert_int_equal(sfl_sa_server_inbox(a->s, a->p.m[i].id, &boxes, &nb), 0);
        assert_int_equal(sfl_sa_client_input(a->p.c[i], u2, n2, boxes, nb, a->p.q[i], &in[i]),
                         0);
        sfl__free(boxes);
    }
    /* a word short: refused, and the input still counts when whole */
    in[1].len--;
    assert_int_equal(sfl_sa_server_input(a->s, &in[1]), SFL_EINVAL);
    in[1].len++;
    for (uint32_t i = 1; i < a->p.n; i++)
        assert_int_equal(sfl_sa_server_input(a->s, &in[i]), 0);
    assert_int_equal(sfl_sa_server_end_inputs(a->s, &u3, &n3), 0);
    {
        sfl_sa_input_t late = {.id = a->p.m[2].id, .len = LEN, .y = a->p.q[2]};

        assert_int_equal(sfl_sa_server_input(a->s, &late), SFL_EINVAL);
    }
    for (uint32_t i = 1; i < a->p.n; i++) {
        assert_int_equal(sfl_sa_client_consist(a->p.c[i], u3, n3, &cs), 0);
        assert_int_equal(sfl_sa_server_consist(a->s, &cs), 0);
    }
    assert_int_equal(sfl_sa_server_end_consist(a->s, &u4, &n4), 0);
    assert_int_equal(sfl_sa_client_unmask(a->p.c[1], u4, n4, rev, &nr), 0);
    assert_int_equal(nr, 4);
    /* client 1 turned hostile: r_s's share of a client in U3 (both shares
     * of it then), another x, a client outside U2, one client twice */
    memcpy(bad, rev, nr * sizeof(*bad));
    bad[2].type = 's';
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, bad, nr), SFL_EINVAL);
    memcpy(bad, rev, nr * sizeof(*bad));
    bad[0].share.x++;
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, bad, nr), SFL_EINVAL);
    memcpy(bad, rev, nr * sizeof(*bad));
    bad[3].of = a->p.m[0].id; /* 0 never shared */
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, bad, nr), SFL_EINVAL);
    memcpy(bad, rev, nr * sizeof(*bad));
    bad[3] = bad[2];
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, bad, nr), SFL_EINVAL);
    /* each of those is provable: client 1 is named, once, for its first
     * fault (the short input above) */
    {
        const sfl_sa_culprit_t *cul;
        uint32_t ncul;

        assert_int_equal(sfl_sa_server_culprits(a->s, &cul, &ncul), 0);
        assert_int_equal(ncul, 1);
        assert_int_equal(cul[0].id, a->p.m[1].id);
        assert_int_equal(cul[0].why, SFL_SA_BLAME_MALFORMED);
        assert_string_equal(sfl_sa_blame_name(cul[0].why), "malformed");
    }
    /* another client's bad release names it for that */
    {
        const sfl_sa_culprit_t *cul;
        uint32_t ncul;

        assert_int_equal(sfl_sa_client_unmask(a->p.c[2], u4, n4, bad, &nr), 0);
        bad[0].type = bad[0].type == 'b' ? 's' : 'b';
        assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[2].id, bad, nr), SFL_EINVAL);
        assert_int_equal(sfl_sa_server_culprits(a->s, &cul, &ncul), 0);
        assert_int_equal(ncul, 2);
        assert_int_equal(cul[1].id, a->p.m[2].id);
        assert_int_equal(cul[1].why, SFL_SA_BLAME_BADRELEASE);
    }
    /* the honest release still goes in, once */
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, rev, nr), 0);
    assert_int_equal(sfl_sa_server_unmask(a->s, a->p.m[1].id, rev, nr), SFL_EINVAL);
    for (uint32_t i = 1; i < a->p.n; i++)
        sfl_sa_input_clear(&in[i]);
    attack_free(a);
}

/* A coordinator that gives clients different models (or supports), and
 * one that replays an advertisement of another round: every client's keys
 * are signed over the round it was given, so a client shown another
 * round's keys aborts, and the server refuses a replayed one. */
static void test_secagg_split_view_and_replay(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    sfl_sa_policy_t pol;
    sfl_sa_round_t other;
    sfl_sa_adv_t adv[5], odd;
    sfl_sa_client_t *c0, *codd;
    sfl_sa_server_t *s;
    sfl_sa_shares_t sh;

    (void)state;
    sfl_sa_policy_default(&pol);
    party_init(p, 5, 4);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[i].id, p->id[i], &p->c[i], &adv[i]),
                         0);
    /* client 1 was shown another model: its keys are signed over it */
    other = p->r;
    other.model_hash[0] ^= 1;
    assert_int_equal(sfl_sa_client_new(&other, &pol, p->m[1].id, p->id[1], &codd, &odd), 0);
    adv[1] = odd;
    c0 = p->c[0];
    assert_true(sfl_sa_client_share(c0, adv, 5, &sh) < 0);
    assert_true(sfl_sa_client_aborted(c0));
    /* the server of the honest round refuses it too */
    assert_int_equal(sfl_sa_server_new(&p->r, &s), 0);
    assert_int_equal(sfl_sa_server_adv(s, &odd), SFL_EBADSIG);
    sfl_sa_server_free(s);
    /* a replay in the next round (another nonce) */
    other = p->r;
    other.round++;
    other.nonce[3] ^= 7;
    assert_int_equal(sfl_sa_server_new(&other, &s), 0);
    assert_int_equal(sfl_sa_server_adv(s, &adv[2]), SFL_EBADSIG);
    sfl_sa_server_free(s);
    sfl_sa_client_free(codd);
    party_free(p);
    free(p);
}

/* Both shares of one client cannot be had: a server that shows two
 * clients different U3 views cannot gather t signatures over either when
 * t > n / 2; a client asked twice aborts the second time. */
static void test_secagg_one_release(void **state)
{
    party_t *p = calloc(1, sizeof(*p));
    int drop[NMAX] = {0};
    sfl_sa_policy_t pol;
    sfl_sa_adv_t adv;
    sfl_sa_client_t *c;
    sfl_sa_round_t r;

    (void)state;
    sfl_sa_policy_default(&pol);
    party_init(p, 5, 3);
    /* t must exceed n / 2 */
    r = p->r;
    r.t = 2;
    assert_int_equal(sfl_sa_client_new(&r, &pol, p->m[0].id, p->id[0], &c, &adv), SFL_EINVAL);
    /* below the client's floor */
    pol.min_n = 6;
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), SFL_EINVAL);
    sfl_sa_policy_default(&pol);
    /* t = 3 of 5 is n / 2 + 1, below the default floor against floor(5 / 3)
     * = 1 colluder (t > (n + c) / 2 = 3); with c = 0 it is taken */
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "colluders"));
    pol.max_colluders = 0;
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[0].id, p->id[0], &c, &adv), 0);
    sfl_sa_client_free(c);
    /* not a member */
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, 12345, p->id[0], &c, &adv), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "not in the cohort"));
    (void)drop;
    party_free(p);
    free(p);
}


/* Issue 23 finding 5: the floor against c colluders, t > (n + c) / 2,
 * and its neighbourhood form on a Harary graph. The default c = floor(n /
 * 3) takes exactly t >= floor(2n / 3) + 1 (the coordinator's default) and
 * refuses n / 2 + 1; an explicit c moves the floor; and whenever t passes,
 * the holders' threshold tau (sfl_sa_holders) exceeds (k + 1 + c_k) / 2
 * for the holders' share c_k = floor(c (k + 1) / n): two disjoint sets of
 * honest holders cannot each complete tau with the colluders. */
static void test_secagg_collusion_floor(void **state)
{
    sfl_sa_policy_t pol;

    (void)state;
    for (uint32_t n = 3; n <= 400; n++) {
        for (uint32_t c = 0; c < n; c += c < 5 ? 1 : n / 7 + 1) {
            for (uint32_t t = n / 2 + 1; t <= n; t++) {
                sfl_sa_round_t r = {.t = t, .n = n};
                int ok = 2 * (uint64_t)t > n + c;

                for (uint32_t k = 2; ok && k + 1 < n && k <= 128; k += 2 + k / 8) {
                    uint64_t ck = (uint64_t)c * (k + 1) / n;

                    r.degree = k;
                    assert_true(2 * (uint64_t)sfl_sa_holders(&r, n) > k + 1 + ck);
                }
            }
        }
        /* the default's floor is the coordinator's default threshold */
        uint32_t floor_t = n / 2 + 1;
        while (2 * (uint64_t)floor_t <= n + n / 3)
            floor_t++;
        assert_int_equal(floor_t, 2 * n / 3 + 1);
    }

    /* through sfl_sa_client_new: 7 members, default c = 2: t = 4 (n / 2 + 1)
     * refused, 5 = floor(14 / 3) + 1 taken; c = 0 takes 4, c = 4 needs 6 */
    party_t *p = calloc(1, sizeof(*p));
    sfl_sa_client_t *cl = NULL;
    sfl_sa_adv_t adv;
    static const struct { uint32_t c, t; int rc; } cases[] = {
        {SFL_SA_COLLUDERS_THIRD, 4, SFL_EINVAL}, {SFL_SA_COLLUDERS_THIRD, 5, 0},
        {0, 4, 0}, {4, 5, SFL_EINVAL}, {4, 6, 0}};

    assert_non_null(p);
    party_init(p, 7, 4);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sfl_sa_policy_default(&pol);
        pol.max_colluders = cases[i].c;
        p->r.t = cases[i].t;
        int rc = sfl_sa_client_new(&p->r, &pol, p->m[2].id, p->id[2], &cl, &adv);

        if (rc != cases[i].rc)
            fail_msg("case %zu: %d (%s)", i, rc, sfl_last_error());
        if (cases[i].rc != 0)
            assert_non_null(strstr(sfl_last_error(), "colluders"));
        sfl_sa_client_free(cl);
        cl = NULL;
    }
    party_free(p);
    free(p);
}

/* ---- known answers ------------------------------------------------------
 * Every vector below was typed from its RFC and recomputed with python3's
 * cryptography (X25519, Ed25519) and hashlib (BLAKE2b) before going in. */

static void unhex(const char *h, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(h), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;

        assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void assert_hex(const uint8_t *got, const char *want, size_t n)
{
    uint8_t w[128];

    assert_true(n <= sizeof(w));
    unhex(want, w, n);
    assert_memory_equal(got, w, n);
}

/* RFC 7748 section 5.2 (first vector) and section 6.1. */
static void test_secagg_kat_x25519(void **state)
{
    uint8_t sk[32], u[32], out[32], a[32], b[32], apk[32], bpk[32], ka[32], kb[32];

    (void)state;
    assert_true(sodium_init() >= 0);
    unhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4", sk, 32);
    unhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c", u, 32);
    assert_int_equal(crypto_scalarmult(out, sk, u), 0);
    assert_hex(out, "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552", 32);

    unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", a, 32);
    unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", b, 32);
    assert_int_equal(crypto_scalarmult_base(apk, a), 0);
    assert_int_equal(crypto_scalarmult_base(bpk, b), 0);
    assert_hex(apk, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", 32);
    assert_hex(bpk, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", 32);
    assert_int_equal(crypto_scalarmult(ka, a, bpk), 0);
    assert_int_equal(crypto_scalarmult(kb, b, apk), 0);
    assert_hex(ka, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742", 32);
    assert_memory_equal(ka, kb, 32);
}

/* RFC 8032 section 7.1, TEST 1 (empty message). */
static void test_secagg_kat_ed25519(void **state)
{
    uint8_t seed[32], pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    uint8_t sig[crypto_sign_BYTES];
    unsigned long long siglen = 0;

    (void)state;
    assert_true(sodium_init() >= 0);
    unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", seed, 32);
    assert_int_equal(crypto_sign_seed_keypair(pk, sk, seed), 0);
    assert_hex(pk, "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", 32);
    assert_int_equal(crypto_sign_detached(sig, &siglen, (const uint8_t *)"", 0, sk), 0);
    assert_int_equal(siglen, crypto_sign_BYTES);
    assert_hex(sig, "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
                    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b", 64);
    assert_int_equal(crypto_sign_verify_detached(sig, (const uint8_t *)"", 0, pk), 0);
    sig[0] ^= 1;
    assert_int_not_equal(crypto_sign_verify_detached(sig, (const uint8_t *)"", 0, pk), 0);
    sodium_memzero(sk, sizeof(sk));
}

/* RFC 7693 appendix A: BLAKE2b-512("abc"). */
static void test_secagg_kat_blake2b(void **state)
{
    uint8_t out[64];

    (void)state;
    assert_true(sodium_init() >= 0);
    assert_int_equal(crypto_generichash(out, sizeof(out), (const uint8_t *)"abc", 3, NULL, 0), 0);
    assert_hex(out, "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                    "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923", 64);
}

/* The fixed round and U1 of the golden sid: ids 10 + 3i, identity key i
 * repeated, c_pk 0x10 + i repeated, s_pk 0x20 + i. */
static void golden_round(sfl_sa_round_t *r, sfl_sa_member_t m[5], sfl_sa_adv_t u1[5])
{
    memset(r, 0, sizeof(*r));
    memset(m, 0, 5 * sizeof(*m));
    memset(u1, 0, 5 * sizeof(*u1));
    r->job = 1;
    r->round = 7;
    r->attempt = 0;
    memset(r->nonce, 0x33, sizeof(r->nonce));
    memset(r->model_hash, 0x44, sizeof(r->model_hash));
    memset(r->support_hash, 0x55, sizeof(r->support_hash));
    r->len = 37;
    r->t = 4;
    r->n = 5;
    r->members = m;
    for (int i = 0; i < 5; i++) {
        m[i].id = 10 + 3 * (uint64_t)i;
        memset(m[i].pk, i, sizeof(m[i].pk));
        u1[i].id = m[i].id;
        memset(u1[i].c_pk, 0x10 + i, 32);
        memset(u1[i].s_pk, 0x20 + i, 32);
        memset(u1[i].sig, 0xee, sizeof(u1[i].sig));
    }
}

/* The session id against its layout in sfl/crypto/secagg.h, computed with
 *   import hashlib, struct
 *   q = lambda v: struct.pack("<Q", v)
 *   h = hashlib.blake2b(digest_size=32)
 *   h.update(b"sfl-sa-v1" + q(1) + q(7) + q(0) + b"\x33" * 32 + b"\x44" * 32 +
 *            b"\x55" * 32 + q(37) + q(4) + q(5) + q(0))
 *   for i, uid in enumerate([10, 13, 16, 19, 22]):
 *       h.update(q(uid) + bytes([0x10 + i]) * 32 + bytes([0x20 + i]) * 32)
 *   print(h.hexdigest())
 * and every input it binds changes it. */
static void test_secagg_sid_golden(void **state)
{
    static const char want[] =
        "65e4903e5ebb507a7185098bca76abb269bb93c1ea3f3de98c9f2fb98c78766a";
    sfl_sa_round_t r;
    sfl_sa_member_t m[5];
    sfl_sa_adv_t u1[5];
    uint8_t sid[SFL_SA_HASH], other[SFL_SA_HASH];

    (void)state;
    assert_true(sodium_init() >= 0);
    golden_round(&r, m, u1);
    sfl_sa_session_id(&r, u1, 5, sid);
    assert_hex(sid, want, SFL_SA_HASH);

    /* not hashed: the signatures and the members' identity keys */
    memset(u1[2].sig, 0, sizeof(u1[2].sig));
    m[3].pk[0] ^= 1;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    r.nonce[17] ^= 1;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    u1[3].s_pk[31] ^= 0x80;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    u1[0].c_pk[0] ^= 1;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    u1[4].id = 23;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    r.attempt = 1;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    r.degree = 2;
    sfl_sa_session_id(&r, u1, 5, other);
    assert_memory_not_equal(other, sid, SFL_SA_HASH);

    golden_round(&r, m, u1);
    sfl_sa_session_id(&r, u1, 4, other);  /* the last one dropped from U1 */
    assert_memory_not_equal(other, sid, SFL_SA_HASH);
}

/* K_uv is the same from both sides, matches an independent computation
 *   (python3: X25519 of 0x61 * 32 and 0x62 * 32, then
 *   hashlib.blake2b(b"sfl-sa-mask" + dh + pk_u + pk_v + sid, digest_size=32),
 *   sid the golden one above),
 * depends on the sid and the order of lo/hi, and a small-order key is
 * refused. */
static void test_secagg_pair_key(void **state)
{
    uint8_t su[32], sv[32], pu[32], pv[32], sid[SFL_SA_HASH], sid2[SFL_SA_HASH];
    uint8_t ku[32], kv[32], k[32], zero[32] = {0}, one[32] = {1};
    sfl_sa_round_t r;
    sfl_sa_member_t m[5];
    sfl_sa_adv_t u1[5];

    (void)state;
    assert_true(sodium_init() >= 0);
    golden_round(&r, m, u1);
    sfl_sa_session_id(&r, u1, 5, sid);
    memset(su, 0x61, 32);
    memset(sv, 0x62, 32);
    assert_int_equal(crypto_scalarmult_base(pu, su), 0);
    assert_int_equal(crypto_scalarmult_base(pv, sv), 0);
    assert_hex(pu, "4049502db92ca2342c3f92dac5d6de7c85db5df5407a5b4996ce39f2efb7e827", 32);
    assert_hex(pv, "4a4f8ccde198d66e99b4c014418a3223ce256c98900ae4a6811fd10f7eb84c2c", 32);

    /* u has the lower id */
    assert_int_equal(sfl_sa_pair_key(su, pv, pu, pv, sid, ku), 0);
    assert_int_equal(sfl_sa_pair_key(sv, pu, pu, pv, sid, kv), 0);
    assert_memory_equal(ku, kv, 32);
    assert_hex(ku, "a703393418feecb3d84f2a048cc40991aed4f1ad36edc6b0cece25bb1e252e7d", 32);

    memcpy(sid2, sid, sizeof(sid2));
    sid2[0] ^= 1;
    assert_int_equal(sfl_sa_pair_key(su, pv, pu, pv, sid2, k), 0);
    assert_memory_not_equal(k, ku, 32);
    assert_int_equal(sfl_sa_pair_key(su, pv, pv, pu, sid, k), 0);
    assert_memory_not_equal(k, ku, 32);

    /* u = 0 and u = 1 are of small order: X25519 gives all zero */
    memset(k, 0xa5, sizeof(k));
    assert_int_equal(sfl_sa_pair_key(su, zero, pu, zero, sid, k), SFL_EINVAL);
    assert_int_equal(sfl_sa_pair_key(su, one, pu, one, sid, k), SFL_EINVAL);
    for (size_t i = 0; i < sizeof(k); i++)
        assert_int_equal(k[i], 0xa5);
    sodium_memzero(su, sizeof(su));
    sodium_memzero(sv, sizeof(sv));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secagg_exact_5),
        cmocka_unit_test(test_secagg_exact_100),
        cmocka_unit_test(test_secagg_bad_share),
        cmocka_unit_test(test_secagg_culprit_commitment),
        cmocka_unit_test(test_secagg_culprit_dealer),
        cmocka_unit_test(test_secagg_culprit_holder),
        cmocka_unit_test(test_secagg_box_unopened),
        cmocka_unit_test(test_secagg_culprit_unreadable),
        cmocka_unit_test(test_secagg_culprit_commit_shape),
        cmocka_unit_test(test_secagg_zero_inputs),
        cmocka_unit_test(test_secagg_dropouts),
        cmocka_unit_test(test_secagg_harary_ring),
        cmocka_unit_test(test_secagg_harary_sum),
        cmocka_unit_test(test_secagg_harary_isolation),
        cmocka_unit_test(test_secagg_harary_floor),
        cmocka_unit_test(test_secagg_attacks_keys),
        cmocka_unit_test(test_secagg_attacks_later),
        cmocka_unit_test(test_secagg_attacks_order),
        cmocka_unit_test(test_secagg_one_release),
        cmocka_unit_test(test_secagg_collusion_floor),
        cmocka_unit_test(test_secagg_split_view_and_replay),
        cmocka_unit_test(test_secagg_kat_x25519),
        cmocka_unit_test(test_secagg_kat_ed25519),
        cmocka_unit_test(test_secagg_kat_blake2b),
        cmocka_unit_test(test_secagg_sid_golden),
        cmocka_unit_test(test_secagg_pair_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

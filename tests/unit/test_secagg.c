/* libsfl/src/crypto/secagg.c: secure aggregation's protocol, every party in
 * one process: the unmasked sum equals the plain sum bit for bit with
 * dropouts at every stage, at t and below it, and every attack aborts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/alloc.h"
#include "sfl/rng.h"
#include "sfl/secagg.h"

#define NMAX 100
#define LEN 37

enum { KEEP = 0, DROP_ADV = 1, DROP_SHARE, DROP_INPUT, DROP_CONSIST, DROP_UNMASK };

/* run_round: the first client's first released share of this type ('b'
 * or 's') is altered; 0 none */
static char g_tamper;

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

/* A whole round; drop[i] is the stage before which client i goes silent.
 * Returns the server's result (0 with the sum, or its error) and fills
 * want with the plain sum of the inputs the server took. */
static int run_round(party_t *p, const int *drop, uint32_t *sum, uint32_t *count, uint32_t *want)
{
    sfl_sa_policy_t pol;
    sfl_sa_server_t *s = NULL;
    sfl_sa_adv_t adv;
    const sfl_sa_adv_t *u1;
    const uint64_t *u2, *u3;
    const sfl_sa_consist_t *u4;
    uint32_t n1, n2, n3, n4;
    int rc;

    sfl_sa_policy_default(&pol);
    memset(want, 0, LEN * sizeof(uint32_t));
    assert_int_equal(sfl_sa_server_new(&p->r, &s), 0);
    for (uint32_t i = 0; i < p->n; i++) {
        assert_int_equal(sfl_sa_client_new(&p->r, &pol, p->m[i].id, p->id[i], &p->c[i], &adv), 0);
        if (drop[i] != DROP_ADV)
            assert_int_equal(sfl_sa_server_adv(s, &adv), 0);
    }
    if ((rc = sfl_sa_server_end_adv(s, &u1, &n1)) < 0)
        goto out;
    for (uint32_t i = 0; i < p->n; i++) {
        sfl_sa_shares_t sh;

        if (drop[i] == DROP_ADV || drop[i] == DROP_SHARE)
            continue;
        assert_int_equal(sfl_sa_client_share(p->c[i], u1, n1, &sh), 0);
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
        for (uint32_t k = 0; g_tamper && i == 0 && k < nr; k++)
            if (rev[k].type == g_tamper) {
                rev[k].share.y[0] ^= 1; /* still canonical: y < L stays below */
                break;
            }
        assert_int_equal(sfl_sa_server_unmask(s, p->m[i].id, rev, nr), 0);
    }
    rc = sfl_sa_server_finish(s, sum, count);
out:
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

/* A client releasing a wrong share: the rebuilt seed fails the commitment
 * (an input's self-mask) or the advertised key (a dropped client's), and
 * the round fails instead of returning a wrong sum. */
static void test_secagg_bad_share(void **state)
{
    (void)state;
    for (int dropped = 0; dropped <= 1; dropped++) {
        party_t *p = calloc(1, sizeof(*p));
        int drop[NMAX] = {0};
        uint32_t sum[LEN], want[LEN], count = 0;

        /* t = 5 of 5 would leave no room to drop: 4 of 5 (t = 4, 5 - 1 in U3) */
        party_init(p, 5, 4);
        if (dropped)
            drop[2] = DROP_INPUT; /* its r_s is rebuilt */
        g_tamper = dropped ? 's' : 'b';
        assert_int_equal(run_round(p, drop, sum, &count, want), SFL_EBADSIG);
        g_tamper = 0;
        party_free(p);
        free(p);
    }
}

static void test_secagg_exact_100(void **state)
{
    (void)state;
    no_drops(100);
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
        adv.id = p->m[1].id; /* signed by 0, claimed by 1 */
        assert_int_equal(sfl_sa_server_adv(s, &adv), SFL_EBADSIG);
        adv.id = p->m[0].id;
        assert_int_equal(sfl_sa_server_adv(s, &adv), 0);
        assert_int_equal(sfl_sa_server_adv(s, &adv), SFL_EINVAL); /* twice */
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
    /* a box tampered with does not open */
    boxes[1].ct[3] ^= 1;
    assert_true(sfl_sa_client_input(a->p.c[0], u2, n2, boxes, nb, a->p.q[0], &in) < 0);
    assert_true(sfl_sa_client_aborted(a->p.c[0]));
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
    /* not a member */
    assert_int_equal(sfl_sa_client_new(&p->r, &pol, 12345, p->id[0], &c, &adv), SFL_EINVAL);
    (void)drop;
    party_free(p);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secagg_exact_5),
        cmocka_unit_test(test_secagg_exact_100),
        cmocka_unit_test(test_secagg_bad_share),
        cmocka_unit_test(test_secagg_zero_inputs),
        cmocka_unit_test(test_secagg_dropouts),
        cmocka_unit_test(test_secagg_attacks_keys),
        cmocka_unit_test(test_secagg_attacks_later),
        cmocka_unit_test(test_secagg_one_release),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

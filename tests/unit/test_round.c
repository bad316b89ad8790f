#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "job/round.h"

static const coord_round_cfg_t base = {
    .cohort = 4, .overselect = 0.5, .min_quorum = 3, .deadline_ms = 1000,
    .heartbeat_ms = 300, .max_attempts = 3,
};

static uint64_t agents[10] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29};

static void started(coord_round_t *r, const coord_round_cfg_t *cfg)
{
    coord_round_init(r, cfg, 1, 5);
    assert_int_equal(r->state, COORD_ROUND_SELECTING);
    assert_int_equal(coord_round_step(r, COORD_EV_START, 1000, 42, agents, 10), 0);
    assert_int_equal(r->state, COORD_ROUND_TRAINING);
}

static void test_round_cfg_check(void **state)
{
    (void)state;
    coord_round_cfg_t c = base;

    assert_int_equal(coord_round_cfg_check(&c), 0);
    c.cohort = 0;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c = base;
    c.min_quorum = 5;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c = base;
    c.deadline_ms = 0;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c = base;
    c.overselect = -0.1;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c = base;
    c.max_attempts = 0;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
}

/* Over-selection, determinism, fresh cohorts per attempt, sorted output. */
static void test_round_cohort_sampling(void **state)
{
    (void)state;
    uint64_t a[10], b[10], c[10];
    uint32_t na, nb, nc;

    assert_int_equal(coord_cohort_sample(42, 5, 0, &base, agents, 10, a, &na), 0);
    assert_int_equal(na, 6); /* ceil(4 * 1.5) */
    assert_int_equal(coord_cohort_sample(42, 5, 0, &base, agents, 10, b, &nb), 0);
    assert_memory_equal(a, b, na * sizeof(uint64_t));
    for (uint32_t i = 1; i < na; i++)
        assert_true(a[i] > a[i - 1]);
    /* Another attempt or round draws another cohort (for this seed). */
    assert_int_equal(coord_cohort_sample(42, 5, 1, &base, agents, 10, c, &nc), 0);
    assert_memory_not_equal(a, c, na * sizeof(uint64_t));
    /* Fewer agents than wanted: all of them. */
    assert_int_equal(coord_cohort_sample(42, 5, 0, &base, agents, 3, c, &nc), 0);
    assert_int_equal(nc, 3);
    /* Unsorted input is a caller error. */
    uint64_t bad[3] = {5, 3, 9};
    assert_int_equal(coord_cohort_sample(1, 1, 0, &base, bad, 3, c, &nc), SFL_EINVAL);
    /* Uniform over agents in the long run. */
    int count[10] = {0};
    for (uint64_t round = 0; round < 3000; round++) {
        assert_int_equal(coord_cohort_sample(7, round, 0, &base, agents, 10, c, &nc), 0);
        for (uint32_t i = 0; i < nc; i++)
            for (int j = 0; j < 10; j++)
                count[j] += c[i] == agents[j];
    }
    for (int j = 0; j < 10; j++)
        assert_true(count[j] > 1650 && count[j] < 1950); /* 1800 expected */
}

static void test_round_closes_on_target(void **state)
{
    (void)state;
    coord_round_t r;

    started(&r, &base);
    assert_int_equal(r.nmembers, 6);
    uint64_t outsider = 0;
    for (int j = 0; j < 10 && outsider == 0; j++)
        if (!coord_round_is_member(&r, agents[j]))
            outsider = agents[j];
    assert_int_equal(coord_round_submit(&r, outsider, 1, 5, 0, 1100), COORD_UPD_REJECTED);
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 4, 0, 1100), COORD_UPD_LATE);
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 2, 5, 0, 1100),
                     COORD_UPD_WRONG_ROUND);
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 6, 0, 1100),
                     COORD_UPD_WRONG_ROUND);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1100 + i),
                         COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_submit(&r, r.members[1].agent, 1, 5, 0, 1200),
                     COORD_UPD_DUPLICATE);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    /* The fourth accepted update meets the target: over-selected stragglers
     * are late. */
    assert_int_equal(coord_round_submit(&r, r.members[3].agent, 1, 5, 0, 1300),
                     COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    assert_int_equal(coord_round_submit(&r, r.members[4].agent, 1, 5, 0, 1301), COORD_UPD_LATE);
    /* Events the state does not take are refused and change nothing. */
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 1400, 42, agents, 10), SFL_EINVAL);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    assert_int_equal(coord_round_step(&r, COORD_EV_AGGREGATED, 1500, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_COMMITTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, 1500, 0, NULL, 0), SFL_EINVAL);
    coord_round_close(&r);
}

/* coord_round_hold (a fold-mode partial): every member of the batch is
 * accepted, past the target too, and the phase closes once released. */
static void test_round_hold_batch(void **state)
{
    (void)state;
    coord_round_t r;

    started(&r, &base);
    assert_int_equal(r.nmembers, 6);
    for (uint32_t i = 0; i < 2; i++)
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1100),
                         COORD_UPD_ACCEPTED);
    coord_round_hold(&r, 1, 1200);
    for (uint32_t i = 2; i < 5; i++) /* the 4th meets the target, the 5th is past it */
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1200),
                         COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_int_equal(r.accepted, 5);
    coord_round_hold(&r, 0, 1200);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    assert_int_equal(coord_round_submit(&r, r.members[5].agent, 1, 5, 0, 1201), COORD_UPD_LATE);
    /* released without reaching anything: stays open */
    coord_round_close(&r);
    started(&r, &base);
    coord_round_hold(&r, 1, 1100);
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 5, 0, 1100),
                     COORD_UPD_ACCEPTED);
    coord_round_hold(&r, 0, 1100);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    coord_round_close(&r);
}

static void test_round_deadline_quorum_and_retry(void **state)
{
    (void)state;
    coord_round_t r;
    uint64_t first[6];

    /* Quorum met at the deadline: aggregate what arrived (heartbeats far
     * apart so nobody is declared dead first). */
    coord_round_cfg_t patient = base;
    patient.heartbeat_ms = 10000;
    started(&r, &patient);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(coord_round_heartbeat(&r, r.members[i].agent, 1200), 0);
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1250),
                         COORD_UPD_ACCEPTED);
    }
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1999, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 2000, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    coord_round_close(&r);

    /* Quorum missed: FAILED, then a retry draws a fresh cohort. */
    started(&r, &base);
    for (uint32_t i = 0; i < 6; i++)
        first[i] = r.members[i].agent;
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 5, 0, 1100),
                     COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 2000, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_FAILED);
    assert_non_null(strstr(r.reason, "quorum"));
    assert_int_equal(coord_round_submit(&r, r.members[1].agent, 1, 5, 0, 2001), COORD_UPD_LATE);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, 2001, 0, NULL, 0), 0);
    assert_int_equal(r.attempt, 1);
    assert_int_equal(r.state, COORD_ROUND_SELECTING);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 2002, 42, agents, 10), 0);
    int differs = 0;
    for (uint32_t i = 0; i < 6; i++)
        differs |= r.members[i].agent != first[i];
    assert_true(differs);
    /* An update for attempt 0 is now late, not accepted into attempt 1. */
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 5, 0, 2100), COORD_UPD_LATE);
    /* Attempts are bounded. */
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 5000, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, 5000, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 5001, 42, agents, 10), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 9000, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, 9000, 0, NULL, 0), SFL_ELIMIT);
    coord_round_close(&r);
}

/* An attempt failed by a culprit now excluded does not count toward
 * max_attempts: three failures in a row, two of them excused, leave the
 * round a retry; the excuse applies to one attempt only. */
static void test_round_excused_attempts(void **state)
{
    (void)state;
    coord_round_t r;
    uint64_t now = 2000;

    coord_round_init(&r, &base, 1, 5);
    coord_round_excuse(&r); /* nothing open: no effect */
    assert_int_equal(r.excuse, 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 1000, 42, agents, 10), 0);
    for (uint32_t a = 0; a < 5; a++) {
        if (a != 1)
            coord_round_excuse(&r); /* attempt 1 is an ordinary failure */
        assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
        assert_int_equal(r.state, COORD_ROUND_FAILED);
        if (a == 1)
            coord_round_excuse(&r); /* ... but excused once it failed, as saround does */
        assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0), 0);
        assert_int_equal(r.attempt, a + 1);
        assert_int_equal(r.excused, a + 1);
        assert_int_equal(coord_round_step(&r, COORD_EV_START, now + 1, 42, agents, 10), 0);
        now += 2000;
    }
    /* Now two plain failures: the first leaves a retry, the second is the
     * third counted and the machine says so. */
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, now + 1, 42, agents, 10), 0);
    now += 2000;
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, now + 1, 42, agents, 10), 0);
    now += 2000;
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0), SFL_ELIMIT);
    assert_int_equal(r.excused, 5);
    coord_round_close(&r);
}

/* A secure sum that failed with no one to name is excused at most bound
 * times a round (the candidates while the retry can leave out another
 * subset), only once failed, and never when bound is 0: past the bound the
 * attempts count and the machine stops the round. */
static void test_round_unattributed_bound(void **state)
{
    (void)state;
    coord_round_t r;
    uint64_t now = 2000;

    coord_round_init(&r, &base, 1, 5);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 1000, 42, agents, 10), 0);
    assert_int_equal(coord_round_excuse_unattributed(&r, 4), 0); /* still open */
    assert_int_equal(r.unattributed, 0);
    for (uint32_t a = 0; a < 4; a++) {
        assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
        assert_int_equal(r.state, COORD_ROUND_FAILED);
        assert_int_equal(coord_round_excuse_unattributed(&r, 4), 1);
        assert_int_equal(coord_round_excuse_unattributed(&r, 4), 1); /* the same attempt */
        assert_int_equal(r.unattributed, a + 1);
        assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0), 0);
        assert_int_equal(coord_round_step(&r, COORD_EV_START, now + 1, 42, agents, 10), 0);
        now += 2000;
    }
    assert_int_equal(r.excused, 4);
    /* past the bound: counted, max_attempts (3) of them end the round */
    for (uint32_t a = 0; a < 3; a++) {
        assert_int_equal(coord_round_step(&r, COORD_EV_TICK, now, 0, NULL, 0), 0);
        assert_int_equal(coord_round_excuse_unattributed(&r, 4), 0);
        assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, now, 0, NULL, 0),
                         a < 2 ? 0 : SFL_ELIMIT);
        if (a < 2)
            assert_int_equal(coord_round_step(&r, COORD_EV_START, now + 1, 42, agents, 10), 0);
        now += 2000;
    }
    assert_int_equal(r.unattributed, 4);
    coord_round_close(&r);

    /* no other subset to leave out (bound 0): the first failure counts */
    coord_round_init(&r, &base, 1, 6);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 1000, 42, agents, 10), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 2000, 0, NULL, 0), 0);
    assert_int_equal(coord_round_excuse_unattributed(&r, 0), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_RETRY, 2000, 0, NULL, 0), 0);
    assert_int_equal(r.excused, 0);
    coord_round_close(&r);
}

/* A slow agent that keeps sending progress is not declared dead; a silent
 * one is, and once every member answered or died the round closes early. */
static void test_round_heartbeats(void **state)
{
    (void)state;
    coord_round_t r;

    started(&r, &base);
    for (uint64_t t = 1100; t <= 1300; t += 100)
        assert_int_equal(coord_round_heartbeat(&r, r.members[0].agent, t), 0);
    for (uint32_t i = 1; i < 4; i++)
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1200),
                         COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1350, 0, NULL, 0), 0);
    /* members 4 and 5 silent since 1000 > 300 ms: dead; member 0 alive. */
    assert_int_equal(r.dead, 2);
    assert_int_equal(r.members[0].state, COORD_MEMBER_PENDING);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_int_equal(coord_round_heartbeat(&r, 999, 1400), SFL_ENOTFOUND);
    assert_null(coord_round_member(&r, 999));
    assert_ptr_equal(coord_round_member(&r, r.members[2].agent), &r.members[2]);
    for (uint64_t t = 1400; t <= 1900; t += 100) {
        assert_int_equal(coord_round_heartbeat(&r, r.members[0].agent, t), 0);
        assert_int_equal(coord_round_step(&r, COORD_EV_TICK, t + 50, 0, NULL, 0), 0);
    }
    assert_int_equal(r.members[0].state, COORD_MEMBER_PENDING);
    /* The slow one delivers: target reached. */
    assert_int_equal(coord_round_submit(&r, r.members[0].agent, 1, 5, 0, 1900),
                     COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    coord_round_close(&r);

    /* Everyone answered or died before the deadline, quorum met: close early. */
    coord_round_cfg_t c = base;
    c.cohort = 6;
    c.overselect = 0;
    started(&r, &c);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(coord_round_submit(&r, r.members[i].agent, 1, 5, 0, 1100),
                         COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1400, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    coord_round_close(&r);
}

static void test_round_not_enough_agents(void **state)
{
    (void)state;
    coord_round_t r;

    coord_round_init(&r, &base, 1, 1);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 0, 1, agents, 2), SFL_EEMPTY);
    assert_int_equal(r.state, COORD_ROUND_FAILED);
    assert_non_null(strstr(r.reason, "eligible"));
    coord_round_close(&r);
    /* Allocation failures leave a clean state. */
    coord_round_init(&r, &base, 1, 1);
    FAILALLOC_EACH(coord_round_step(&r, COORD_EV_START, 0, 1, agents, 10),
                   (coord_round_close(&r), coord_round_init(&r, &base, 1, 1)));
    coord_round_close(&r);
}

/* Declared phases: a three-phase attempt (keys, shares, masked input, as
 * secure aggregation will declare) of 6 members. Members that miss a phase
 * drop out of the later ones; the last phase's end starts the aggregation;
 * answers to a phase not begun, over, or twice get their verdicts. */
/* A secure aggregation group dropped mid-phase: its members leave the
 * attempt (their answers no longer count), and the phase ends once the
 * others answered. */
static void test_round_drop_members(void **state)
{
    coord_round_cfg_t c = base;
    coord_round_t r;
    uint64_t ids[6];

    (void)state;
    c.nphases = 2;
    c.phases[0] = (coord_phase_t){"advertise_keys", 500, 0, 2};
    c.phases[1] = (coord_phase_t){"share_keys", 500, 0, 2};
    started(&r, &c);
    for (uint32_t i = 0; i < 6; i++)
        ids[i] = r.members[i].agent;
    /* members 0-2 answer; 3 answered too, then its group (3, 4, 5) goes */
    for (int i = 0; i < 4; i++)
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 0, 1100), COORD_UPD_ACCEPTED);
    assert_int_equal(r.accepted, 4);
    for (int i = 3; i < 6; i++)
        coord_round_drop(&r, ids[i]);
    coord_round_drop(&r, ids[4]); /* twice: nothing more */
    assert_int_equal(r.accepted, 3);
    assert_int_equal(r.dead, 3);
    assert_int_equal(r.phase, 0);
    coord_round_recheck(&r, 1150); /* nobody else can answer: the phase ends */
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_int_equal(r.phase, 1);
    for (int i = 3; i < 6; i++) {
        assert_int_equal(coord_round_member(&r, ids[i])->state, COORD_MEMBER_DROPPED);
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 1, 1200), COORD_UPD_REJECTED);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 1, 1200), COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    coord_round_drop(&r, ids[0]); /* not TRAINING: a no-op */
    assert_int_equal(coord_round_member(&r, ids[0])->state, COORD_MEMBER_ACCEPTED);
    coord_round_close(&r);
}

static void test_round_phases(void **state)
{
    coord_round_cfg_t c = base;
    coord_round_t r;
    const coord_member_t *m;
    uint64_t ids[6];

    (void)state;
    c.nphases = 3;
    c.phases[0] = (coord_phase_t){"advertise_keys", 500, 0, 4};
    c.phases[1] = (coord_phase_t){"share_keys", 500, 0, 4};
    c.phases[2] = (coord_phase_t){"masked_input", 500, 0, 3};
    assert_int_equal(coord_round_cfg_check(&c), 0);
    started(&r, &c);
    assert_int_equal(r.nmembers, 6);
    assert_string_equal(coord_round_phase(&r)->name, "advertise_keys");
    for (uint32_t i = 0; i < 6; i++)
        ids[i] = r.members[i].agent;
    /* phase 0: five of six answer, then its deadline */
    assert_int_equal(coord_round_answer(&r, ids[0], 1, 5, 0, 1, 1010), COORD_UPD_WRONG_ROUND);
    for (int i = 0; i < 5; i++)
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 0, 1100), COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_answer(&r, ids[0], 1, 5, 0, 0, 1100), COORD_UPD_DUPLICATE);
    assert_int_equal(r.phase, 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1200, 0, NULL, 0), 0);
    assert_int_equal(r.phase, 0);
    assert_int_equal(coord_round_answer(&r, ids[1], 1, 5, 0, 1, 1250), COORD_UPD_WRONG_ROUND);
    for (int i = 0; i < 5; i++) /* keep them alive past the heartbeat timeout */
        assert_int_equal(coord_round_heartbeat(&r, ids[i], 1450), 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1500, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_string_equal(coord_round_phase(&r)->name, "share_keys");
    assert_int_equal(r.deadline_at_ms, 2000);
    m = coord_round_member(&r, ids[5]);
    assert_int_equal(m->state, COORD_MEMBER_DROPPED);
    assert_int_equal(coord_round_answer(&r, ids[5], 1, 5, 0, 1, 1600), COORD_UPD_REJECTED);
    assert_int_equal(coord_round_answer(&r, ids[0], 1, 5, 0, 0, 1600), COORD_UPD_LATE);
    /* phase 1: all five still in answer: it ends at once */
    for (int i = 0; i < 5; i++)
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 1, 1700), COORD_UPD_ACCEPTED);
    assert_string_equal(coord_round_phase(&r)->name, "masked_input");
    assert_int_equal(r.deadline_at_ms, 2200);
    /* phase 2: three answer (its quorum), two die silently */
    for (int i = 0; i < 3; i++)
        assert_int_equal(coord_round_submit(&r, ids[i], 1, 5, 0, 1800), COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_TRAINING);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 2200, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    assert_null(coord_round_phase(&r));
    assert_int_equal(coord_round_submit(&r, ids[0], 1, 5, 0, 2300), COORD_UPD_DUPLICATE);
    assert_int_equal(coord_round_submit(&r, ids[4], 1, 5, 0, 2300), COORD_UPD_LATE);
    coord_round_close(&r);

    /* A phase below its quorum at its deadline fails the attempt, naming it. */
    started(&r, &c);
    for (uint32_t i = 0; i < 4; i++)
        ids[i] = r.members[i].agent;
    for (int i = 0; i < 4; i++)
        assert_int_equal(coord_round_answer(&r, ids[i], 1, 5, 0, 0, 1100), COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 1500, 0, NULL, 0), 0);
    assert_int_equal(coord_round_answer(&r, ids[0], 1, 5, 0, 1, 1600), COORD_UPD_ACCEPTED);
    assert_int_equal(coord_round_step(&r, COORD_EV_TICK, 2000, 0, NULL, 0), 0);
    assert_int_equal(r.state, COORD_ROUND_FAILED);
    assert_string_equal(r.reason, "phase share_keys: deadline with 1 of 4 answers (quorum 4)");
    coord_round_close(&r);

    /* Declarations are checked. */
    c.phases[1].quorum = 0;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c.phases[1].quorum = 4;
    c.phases[1].name[0] = '\0';
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c.phases[1] = (coord_phase_t){"share_keys", 500, 2, 4}; /* target below quorum */
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
    c.nphases = COORD_MAX_PHASES + 1;
    assert_int_equal(coord_round_cfg_check(&c), SFL_EINVAL);
}

static void test_round_pace_steering(void **state)
{
    (void)state;
    coord_round_t r;

    started(&r, &base);
    uint64_t a = coord_round_retry_after(&r, 100, 1500, 50);
    uint64_t b = coord_round_retry_after(&r, 101, 1500, 50);
    assert_true(a >= 500 && a < 750 && b >= 500 && b < 750);
    assert_true(a != b);
    assert_int_equal(coord_round_retry_after(&r, 100, 1500, 100000), 100000);
    coord_round_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_cfg_check),
        cmocka_unit_test(test_round_cohort_sampling),
        cmocka_unit_test(test_round_closes_on_target),
        cmocka_unit_test(test_round_hold_batch),
        cmocka_unit_test(test_round_deadline_quorum_and_retry),
        cmocka_unit_test(test_round_heartbeats),
        cmocka_unit_test(test_round_not_enough_agents),
        cmocka_unit_test(test_round_phases),
        cmocka_unit_test(test_round_drop_members),
        cmocka_unit_test(test_round_excused_attempts),
        cmocka_unit_test(test_round_unattributed_bound),
        cmocka_unit_test(test_round_pace_steering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/round/suspect.c: suspicion for secure sums that fail with no one to
 * name. The table (blame a failed U3, clear a committed one), how many
 * candidates an attempt keeps, which ones (the least suspect, ties drawn at
 * random and replayable), and the whole loop against one member that
 * garbles every input it is in: cornered within as many failed attempts as
 * there are candidates, then left out of the later rounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "coord_int.h"
#include "round/suspect.h"

static coord_job_t *job_new(void)
{
    coord_job_t *j = calloc(1, sizeof(*j));

    assert_non_null(j);
    return j;
}

static void job_free(coord_job_t *j)
{
    coord_suspect_free(j);
    free(j);
}

static int has(const uint64_t *v, uint32_t n, uint64_t x)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* +1 for a failed U3, back to 0 for a committed one, in any order. */
static void test_suspect_blame_clear(void **state)
{
    static const uint64_t u3a[] = {3, 5, 9}, u3b[] = {9, 11}, done[] = {1, 5, 11};
    coord_job_t *j = job_new();
    char text[SFL_MSG_TEXT_LEN];

    (void)state;
    assert_int_equal(coord_suspects(j), 0);
    assert_int_equal(coord_suspect_blame(j, u3a, 3), 0);
    assert_int_equal(coord_suspect_blame(j, u3b, 2), 0);
    assert_int_equal(coord_suspects(j), 4);
    assert_int_equal(coord_suspicion(j, 9), 2);
    assert_int_equal(coord_suspicion(j, 3), 1);
    assert_int_equal(coord_suspicion(j, 4), 0);
    coord_suspect_text(j, NULL, 0, text, sizeof(text));
    assert_string_equal(text, "agent 3 (1), agent 5 (1), agent 9 (2), agent 11 (1)");
    coord_suspect_text(j, u3b, 2, text, sizeof(text));
    assert_string_equal(text, "agent 9 (2), agent 11 (1)");
    coord_suspect_clear(j, done, 3); /* 1 was never suspect */
    assert_int_equal(coord_suspects(j), 2);
    assert_int_equal(coord_suspicion(j, 5), 0);
    assert_int_equal(coord_suspicion(j, 11), 0);
    assert_int_equal(coord_suspicion(j, 9), 2);
    coord_suspect_text(j, NULL, 0, text, sizeof(text));
    assert_string_equal(text, "agent 3 (1), agent 9 (2)");
    job_free(j);
}

/* All but half (rounded up) of the most suspect, never below the smallest
 * cohort; everyone when nobody is suspect or there is nobody to spare. */
static void test_suspect_keep(void **state)
{
    static const uint32_t none[6] = {0}, one[6] = {0, 0, 3, 0, 1, 0}, all[6] = {1, 1, 1, 1, 1, 1},
                          two[6] = {2, 0, 2, 0, 0, 0};

    (void)state;
    assert_int_equal(coord_suspect_keep(none, 6, 3), 6);
    assert_int_equal(coord_suspect_keep(one, 6, 3), 5);  /* the 1 is drawn */
    assert_int_equal(coord_suspect_keep(one, 6, 6), 6);  /* nobody to spare */
    assert_int_equal(coord_suspect_keep(all, 6, 4), 4);  /* all tied: the smallest cohort */
    assert_int_equal(coord_suspect_keep(all, 6, 2), 3);  /* ... or half of them */
    assert_int_equal(coord_suspect_keep(two, 6, 3), 5);  /* one of the two tied */
    assert_int_equal(coord_suspect_keep(two, 6, 5), 5);
    assert_int_equal(coord_suspect_keep(two, 3, 5), 3);
}

/* The least suspect are kept, output ascending; ties at the boundary are a
 * draw that replays for one (seed, round, attempt) and differs between
 * attempts, so every tied candidate is left out by some attempt. */
static void test_suspect_pick(void **state)
{
    static const uint64_t ids[8] = {2, 4, 6, 8, 10, 12, 14, 16};
    static const uint32_t counts[8] = {1, 0, 2, 1, 0, 1, 3, 1};
    uint64_t out[8], again[8];
    uint32_t left_out[8] = {0};

    (void)state;
    /* keep 5: 4 and 10 (0), then 3 of the four at 1; never 6 (2) or 14 (3) */
    for (uint32_t a = 0; a < 64; a++) {
        assert_int_equal(coord_suspect_pick(7, 3, a, ids, counts, 8, 5, out), 0);
        assert_int_equal(coord_suspect_pick(7, 3, a, ids, counts, 8, 5, again), 0);
        assert_memory_equal(out, again, sizeof(out[0]) * 5);
        for (uint32_t i = 1; i < 5; i++)
            assert_true(out[i] > out[i - 1]);
        assert_true(has(out, 5, 4) && has(out, 5, 10));
        assert_false(has(out, 5, 6) || has(out, 5, 14));
        for (uint32_t i = 0; i < 8; i++)
            left_out[i] += !has(out, 5, ids[i]);
    }
    assert_int_equal(left_out[2], 64);
    assert_int_equal(left_out[6], 64);
    assert_int_equal(left_out[1] + left_out[4], 0);
    assert_true(left_out[0] > 0 && left_out[3] > 0 && left_out[5] > 0 && left_out[7] > 0);
    /* keep 7: everyone below 3; keep 8: all; keep 9: refused */
    assert_int_equal(coord_suspect_pick(7, 3, 0, ids, counts, 8, 7, out), 0);
    assert_false(has(out, 7, 14));
    assert_int_equal(coord_suspect_pick(7, 3, 0, ids, counts, 8, 8, out), 0);
    assert_memory_equal(out, ids, sizeof(ids));
    assert_int_equal(coord_suspect_pick(7, 3, 0, ids, counts, 8, 9, out), SFL_EINVAL);
}

/* The driver's loop (coord_suspect_keep, coord_suspect_pick, blame on an
 * unattributable failure, clear on a commit) against one member that
 * garbles every sum it is in, for 9 candidates and a smallest cohort of 6
 * (tests/e2e/sa_hostile.sh's job), 4 and 3 (secagg_hostile.sh's) and 5 and
 * 3, over 200 seeds of 12 rounds: no round fails more often than there are
 * candidates (the excuse bound, driver.c), nor the whole job (each attempt
 * shrinks the group tied at the top with the member), the member is in no
 * committed round, and by the last round it alone is left out. */
static void run_corner(uint32_t n, uint32_t min, uint64_t hostile)
{
    uint64_t ids[16], cohort[16];
    uint32_t counts[16];

    for (uint32_t i = 0; i < n; i++)
        ids[i] = 100 + i;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        coord_job_t *j = job_new();
        uint32_t failed = 0, keep = 0;

        for (uint64_t round = 1; round <= 12; round++) {
            uint32_t in_round = 0;

            for (uint32_t attempt = 0;; attempt++) {
                for (uint32_t i = 0; i < n; i++)
                    counts[i] = coord_suspicion(j, ids[i]);
                keep = coord_suspect_keep(counts, n, min);
                assert_int_equal(coord_suspect_pick(seed, round, attempt, ids, counts, n, keep,
                                                    cohort),
                                 0);
                if (!has(cohort, keep, hostile)) {
                    coord_suspect_clear(j, cohort, keep);
                    break;
                }
                assert_int_equal(coord_suspect_blame(j, cohort, keep), 0);
                failed++;
                in_round++;
                assert_true(in_round <= n);
            }
            assert_true(coord_suspicion(j, hostile) > 0);
        }
        assert_true(failed <= n);
        assert_int_equal(keep, n - 1); /* the last round: all but the member */
        assert_int_equal(coord_suspects(j), 1);
        job_free(j);
    }
}

static void test_suspect_corners_one_member(void **state)
{
    (void)state;
    run_corner(9, 6, 104);
    run_corner(4, 3, 100);
    run_corner(5, 3, 103);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suspect_blame_clear),
        cmocka_unit_test(test_suspect_keep),
        cmocka_unit_test(test_suspect_pick),
        cmocka_unit_test(test_suspect_corners_one_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

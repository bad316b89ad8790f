/* The vertical privacy ledger (server/job/ledger.h): every attempt
 * counts its round's iterations in full, a restart takes the last commit's
 * figures only while no attempt came after it, and a round that would pass
 * the job's T iterations is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "job/ledger.h"

/* T = 3 rounds x S = 10 iterations. */
static sfl_job_spec_t spec(void)
{
    sfl_job_spec_t s;

    memset(&s, 0, sizeof(s));
    s.rounds = 3;
    s.iterations_per_round = 10;
    return s;
}

static void test_ledger_counts_every_attempt_in_full(void **state)
{
    sfl_job_spec_t s = spec();
    coord_round_row_t rows[3];
    coord_ledger_t l = {0};

    (void)state;
    memset(rows, 0, sizeof(rows));
    rows[0].round = 1; /* committed */
    rows[1].round = 2; /* failed: its iterations count all the same */
    rows[2].round = 2; /* its retry */
    coord_ledger_count(&l, &s, rows, 3);
    assert_int_equal(l.released, 30);
    coord_ledger_release(&l, 10);
    assert_int_equal(l.released, 40);
    coord_ledger_count(&l, &s, rows, 0);
    assert_int_equal(l.released, 0);
}

static void test_ledger_restores_the_last_commit_only_if_current(void **state)
{
    coord_ledger_t l = {.released = 20};
    sfl_round_metrics_t last;

    (void)state;
    memset(&last, 0, sizeof(last));
    last.privacy_iterations = 10; /* an attempt came after the commit */
    last.privacy_spent = 0.5;
    coord_ledger_restore(&l, &last);
    assert_int_equal(l.priv, 0);
    last.privacy_iterations = 20;
    last.privacy_spent_rdp = 0.25;
    coord_ledger_restore(&l, &last);
    assert_int_equal(l.priv, 1);
    assert_true(l.spent.eps_paper == 0.5);
    assert_true(l.spent.eps_rdp_tight == 0.25);
}

static void test_ledger_budget_refuses_past_t(void **state)
{
    sfl_job_spec_t s = spec();
    sfl_algo_params_t p;
    coord_vjob_t v;
    coord_ledger_t l = {.released = 20, .priv = 1, .spent = {.eps_paper = 0.75}};
    sfl_round_metrics_t m;
    char why[400] = "";

    (void)state;
    memset(&p, 0, sizeof(p));
    memset(&v, 0, sizeof(v));
    v.vj.p = &p;
    v.vj.iters = 30;
    assert_int_equal(coord_ledger_budget(&l, &v, &s, 1.0, 3, why, sizeof(why)), 0);
    l.released = 21;
    assert_int_equal(coord_ledger_budget(&l, &v, &s, 1.0, 3, why, sizeof(why)), SFL_ELIMIT);
    assert_non_null(strstr(why, "21 of its 30 iterations released"));
    assert_non_null(strstr(why, "round 3 needs 10 more"));
    memset(&m, 0, sizeof(m));
    coord_ledger_metrics(&l, &v, &m);
    assert_int_equal(m.privacy_iterations, 21);
    assert_true(m.privacy_spent == 0.75);
    /* a job without noise releases nothing private: no budget, no figures */
    l.priv = 0;
    assert_int_equal(coord_ledger_budget(&l, &v, &s, 1.0, 3, why, sizeof(why)), 0);
    memset(&m, 0, sizeof(m));
    coord_ledger_metrics(&l, &v, &m);
    assert_int_equal(m.privacy_iterations, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ledger_counts_every_attempt_in_full),
        cmocka_unit_test(test_ledger_restores_the_last_commit_only_if_current),
        cmocka_unit_test(test_ledger_budget_refuses_past_t),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* server/round/driver.c: the round driver: retries, pauses, waiting reasons, on the
 * in-process coordinator (coordfx.h). */
#include "coordfx.h"
#include "coord_int.h"

/* A quorum missed at the deadline: retry with a fresh nonce and key, then
 * the job pauses with the reason after max_attempts. */
static void test_coord_quorum_missed_retries_then_pauses(void **state)
{
    static const double v1[3] = {1.0, 1.0, 1.0};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t0, *t1;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_status_t *st;
    sfl_ack_t ack;
    uint8_t *upd;
    size_t len;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 1000, 2); /* reached twice: a1 submits well within it */
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    t0 = fx_next_task(a1);
    assert_int_equal(t0->attempt, 0);
    upd = fx_make_update(t0, a1->id, NULL, a1->agent_id, v1, 5, &len);
    ack = fx_submit(a1, upd, len);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    /* a2 stays silent: the deadline fails attempt 0, attempt 1 follows */
    t1 = fx_next_task(a1);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t1->attempt, 1);
    assert_memory_not_equal(t1->round_nonce, t0->round_nonce, 32);
    assert_memory_not_equal(t1->round_key, t0->round_key, 32);
    /* the attempt-0 update now: its attempt closed, its key is gone */
    ack = fx_submit(a1, upd, len);
    assert_int_equal(ack.status, SFL_ACK_LATE);
    sfl_msg_buf_free(upd);
    /* and the same payload sealed for attempt 0 but claimed for attempt 1 */
    {
        sfl_task_t fake = *t1;

        fake.attempt = 1;
        memcpy(fake.round_key, t0->round_key, 32);
        upd = fx_make_update(&fake, a1->id, NULL, a1->agent_id, v1, 5, &len);
        ack = fx_submit(a1, upd, len);
        sfl_msg_buf_free(upd);
        assert_int_equal(ack.status, SFL_ACK_REJECTED);
    }
    /* attempt 1 misses its quorum too: the job pauses, the reason kept */
    for (;;) {
        st = fx_admin_status(&F.admin);
        if (st->jobs[0].state != SFL_JOB_RUNNING)
            break;
        sfl_msg_status_free(st);
        if (F.timed_out)
            fail_msg("watchdog waiting for the job to pause");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_int_equal(st->jobs[0].job_id, js.job_id);
    assert_int_equal(st->jobs[0].state, SFL_JOB_PAUSED);
    assert_int_equal(st->jobs[0].committed_round, 0);
    assert_true(st->jobs[0].error[0] != '\0');
    sfl_msg_status_free(st);
    sfl_msg_task_free(t0);
    sfl_msg_task_free(t1);
}

/* The job status of job id once its waiting reason is not empty (the
 * coordinator computes it at its next selection tick). */
static sfl_job_status_t wait_for_reason(uint64_t id)
{
    sfl_job_status_t js;

    for (;;) {
        sfl_status_t *st = fx_admin_status(&F.admin);

        js = *fx_find_job(st, id);
        sfl_msg_status_free(st);
        if (js.waiting[0])
            return js;
        if (F.timed_out)
            fail_msg("watchdog waiting for job %llu's waiting reason", (unsigned long long)id);
        uv_run(&F.loop, UV_RUN_ONCE);
    }
}

/* A job that cannot start its round says why, with counts and the most
 * common reason agents are not eligible; the reason goes once the round
 * can start. */
static void test_coord_waiting_says_why(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_job_spec_t spec;
    sfl_job_status_t js, narrow, wide;
    sfl_task_t *t1, *t2;
    char want[256];
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3); /* never reached */
    wide = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    js = wait_for_reason(wide.job_id);
    assert_string_equal(js.waiting, "selecting 0/2: waiting for 2 more agents (none connected)");
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);

    /* agents' data has DIM features: a job with fewer cannot use them */
    spec.dimension = DIM - 5;
    narrow = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_join(a1, "agent/a1");
    fx_agent_subscribe(a1);
    fx_idle_heartbeat(a1);
    js = wait_for_reason(narrow.job_id);
    snprintf(want, sizeof(want),
             "selecting 0/2: waiting for 2 more agents (1 connected, 0 eligible; 1 not "
             "eligible, e.g. agent %llu: data has %d features, the job %d)",
             (unsigned long long)a1->agent_id, DIM, DIM - 5);
    assert_string_equal(js.waiting, want);
    for (;;) {
        sfl_status_t *st = fx_admin_status(&F.admin);

        js = *fx_find_job(st, wide.job_id);
        sfl_msg_status_free(st);
        if (strcmp(js.waiting, "selecting 1/2: waiting for 1 more agent (1 connected, "
                               "1 eligible)") == 0)
            break;
        if (F.timed_out)
            fail_msg("watchdog: job %llu says '%s'", (unsigned long long)wide.job_id, js.waiting);
        uv_run(&F.loop, UV_RUN_ONCE);
    }

    /* the second agent completes the wide job's cohort: it starts, and its
     * reason is gone */
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a2);
    t1 = fx_next_task(a1);
    t2 = fx_next_task(a2);
    assert_int_equal(t1->job_id, wide.job_id);
    {
        sfl_status_t *st = fx_admin_status(&F.admin);

        js = *fx_find_job(st, wide.job_id);
        assert_int_equal(js.round_state, SFL_ROUND_TRAINING);
        assert_string_equal(js.waiting, "");
        js = *fx_find_job(st, narrow.job_id);
        assert_true(strstr(js.waiting, "2 connected, 0 eligible; 2 not eligible") != NULL);
        sfl_msg_status_free(st);
    }
    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
}

/* Issue 23 finding 3: a mode-2 round's max_weight is the operator's (10,000
 * by default), never the largest sample count a selected agent declared,
 * and each member's public weight in the signed task is its declared count
 * capped at it: an agent declaring 1e9 samples no longer quantizes the
 * honest weights to ~0. */
static void test_coord_secagg_weights_public(void **state)
{
    static const uint64_t samples[3] = {1000000000, 500, 20000};
    static const double want[3] = {10000, 500, 10000};
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 2);
    spec.secagg = 1;
    spec.cohort_size = 3;
    spec.min_quorum = 3;
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    for (int i = 0; i < 3; i++) {
        sfl_dataset_summary_t ds = {.samples = samples[i], .dimension = DIM};
        char who[32];

        snprintf(who, sizeof(who), "agent/a%d", i + 1);
        fx_agent_join_ds(&F.ag[i], who, &ds);
        fx_agent_subscribe(&F.ag[i]);
    }
    for (int i = 0; i < 3; i++) {
        sfl_task_t *t = fx_next_task(&F.ag[i]);

        assert_int_equal(t->job_id, js.job_id);
        assert_int_equal(t->update_mode, SFL_UPDATE_MODE_SECURE_AGG);
        assert_non_null(t->secagg);
        assert_true(t->secagg->max_weight == 10000);
        assert_int_equal(t->secagg->nmembers, 3);
        for (uint32_t m = 0; m < 3; m++)
            for (int a = 0; a < 3; a++)
                if (t->secagg->members[m].agent_id == F.ag[a].agent_id)
                    assert_true(t->secagg->members[m].weight == want[a]);
        sfl_msg_task_free(t);
    }
    fx_stop();
}

/* Issue 24 item 7: a mode-2 round's history rows. The members of U3 (whose
 * masked inputs are in the sum) are its accepted updates, each with the
 * bytes of the stage answers it sent; a member that dropped out before
 * stage 3 is not one, and an id of U3 that is no member is left out. */
static void test_coord_secagg_part_rows(void **state)
{
    static const coord_member_t members[4] = {{3, 0, 0}, {5, 0, 0}, {8, 0, 0}, {13, 0, 0}};
    static const uint64_t bytes[4] = {1000, 200, 3000, 4000};
    static const uint64_t u3[4] = {3, 8, 9, 13};
    coord_part_row_t rows[4];
    uint32_t n;

    (void)state;
    memset(rows, 0, sizeof(rows));
    n = coord_saround_part_rows(members, bytes, 4, u3, 4, 7, 2, 1, 1234, rows);
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].agent, 3);
    assert_int_equal(rows[0].bytes, 1000);
    assert_int_equal(rows[1].agent, 8);
    assert_int_equal(rows[1].bytes, 3000);
    assert_int_equal(rows[2].agent, 13);
    assert_int_equal(rows[2].bytes, 4000);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(rows[i].status, COORD_PART_ACCEPTED);
        assert_int_equal(rows[i].job, 7);
        assert_int_equal(rows[i].round, 2);
        assert_int_equal(rows[i].attempt, 1);
        assert_int_equal(rows[i].at_ms, 1234);
        assert_null(rows[i].reason);
    }
    assert_int_equal(coord_saround_part_rows(members, bytes, 4, u3, 0, 7, 2, 1, 0, rows), 0);
}

/* Secure aggregation per front-end group: the cohort's members (ascending
 * ids) by the connection they came through (0: directly), groups below
 * min merged, numbered by their smallest member. */
static void group_case(const uint64_t *keys, uint32_t n, uint32_t min, const uint32_t *want,
                       uint32_t want_ng)
{
    uint32_t gof[16], ng = 99;

    assert_true(n <= 16);
    assert_int_equal(coord_sa_group(keys, n, min, gof, &ng), 0);
    assert_int_equal(ng, want_ng);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(gof[i], want[i]);
}

static void test_coord_secagg_groups(void **state)
{
    (void)state;
    /* three connections of 4, 3 and 3 (interleaved ids), min 3: three
     * groups numbered by their smallest member */
    {
        static const uint64_t k[10] = {7, 9, 7, 0, 9, 7, 0, 7, 9, 0};
        static const uint32_t w[10] = {0, 1, 0, 2, 1, 0, 2, 0, 1, 2};
        group_case(k, 10, 3, w, 3);
    }
    /* the same cohort with the keys renamed: the same groups (determinism
     * does not hang on the connections' identities) */
    {
        static const uint64_t k[10] = {1, 5, 1, 3, 5, 1, 3, 1, 5, 3};
        static const uint32_t w[10] = {0, 1, 0, 2, 1, 0, 2, 0, 1, 2};
        group_case(k, 10, 3, w, 3);
    }
    /* min 4: groups of 3 (keys 9 and 0) merged into one of 6, which stands */
    {
        static const uint64_t k[10] = {7, 9, 7, 0, 9, 7, 0, 7, 9, 0};
        static const uint32_t w[10] = {0, 1, 0, 1, 1, 0, 1, 0, 1, 1};
        group_case(k, 10, 4, w, 2);
    }
    /* one small group (2 < 4) alone still small: into the smallest group of
     * at least min (5 of key 8, not 6 of key 7) */
    {
        static const uint64_t k[13] = {7, 7, 8, 7, 8, 7, 8, 7, 8, 7, 8, 0, 0};
        static const uint32_t w[13] = {0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1};
        group_case(k, 13, 4, w, 2);
    }
    /* every group small, together at least min: one group */
    {
        static const uint64_t k[6] = {1, 2, 3, 1, 2, 3};
        static const uint32_t w[6] = {0, 0, 0, 0, 0, 0};
        group_case(k, 6, 3, w, 1);
    }
    /* a cohort smaller than min: one group, whatever its connections */
    {
        static const uint64_t k[4] = {1, 1, 2, 2};
        static const uint32_t w[4] = {0, 0, 0, 0};
        group_case(k, 4, 10, w, 1);
    }
    /* ties between the smallest big groups: the one with the smaller
     * member takes the small ones */
    {
        static const uint64_t k[9] = {5, 6, 5, 6, 5, 6, 5, 6, 9};
        static const uint32_t w[9] = {0, 1, 0, 1, 0, 1, 0, 1, 0};
        group_case(k, 9, 4, w, 2);
    }
    /* every member its own group is fine at min 3 only when merged */
    {
        static const uint64_t k[3] = {1, 2, 3};
        static const uint32_t w[3] = {0, 0, 0};
        group_case(k, 3, 3, w, 1);
    }
    {
        uint32_t ng = 7;

        assert_int_equal(coord_sa_group(NULL, 0, 3, NULL, &ng), 0);
        assert_int_equal(ng, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coord_secagg_part_rows),
        cmocka_unit_test(test_coord_secagg_groups),
        cmocka_unit_test_setup_teardown(test_coord_quorum_missed_retries_then_pauses, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_waiting_says_why, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_secagg_weights_public, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

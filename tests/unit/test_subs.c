/* server/round/subs.c: Subscribe streams: idle agents woken by a new or resumed
 * job, on the in-process coordinator (coordfx.h). */
#include "coordfx.h"

/* Idle agents keep their Subscribe open, so a job created or resumed while
 * they wait reaches them at once on that stream, without a Wait and a
 * resubscription (the hold, set here to outlast the watchdog). */
static void test_coord_job_wakes_idle_subscribers(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t1, *t2, *t1b, *t2b;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    int status;

    (void)state;
    F.cfg.subscribe_hold_ms = 2 * WATCHDOG_MS;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    fx_idle_heartbeat(a1);
    fx_idle_heartbeat(a2);
    /* the coordinator has both Subscribes and no job: nothing sent yet */
    assert_int_equal(a1->sub.n, 0);
    assert_int_equal(a2->sub.n, 0);
    assert_false(a1->sub.done);
    assert_false(a2->sub.done);

    fx_job_spec(&spec, 60000, 3); /* never reached */
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    t1 = fx_next_task(a1);
    t2 = fx_next_task(a2);
    assert_int_equal(t1->job_id, js.job_id);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t2->job_id, js.job_id);

    /* paused, the job releases them (their streams stay open); resumed, it
     * reaches them again on the same streams with a new attempt */
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/PauseJob", js.job_id, &status);
    assert_int_equal(status, 0);
    fx_idle_heartbeat(a1);
    fx_idle_heartbeat(a2);
    assert_int_equal(a1->sub.n, 1);
    assert_false(a1->sub.done);
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", js.job_id, &status);
    assert_int_equal(status, 0);
    t1b = fx_next_task(a1);
    t2b = fx_next_task(a2);
    assert_int_equal(t1b->round, 1);
    assert_true(t1b->attempt > t1->attempt);
    assert_int_equal(t2b->attempt, t1b->attempt);
    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(t1b);
    sfl_msg_task_free(t2b);
}

/* A job gathering its cohort (SELECTING, fewer subscribers than the full
 * cohort, its select wait running) keeps the streams of agents it could
 * draw past the hold time: ended with a Wait, an agent would be away when
 * the select wait ends and miss the round. The hold is a tenth of the
 * select wait, so without the rule the first message would be a Wait. */
static void test_coord_selecting_keeps_streams(void **state)
{
    tagent_t *a1 = &F.ag[0];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_task_t *t;
    sfl_wait_t w;
    int status;

    (void)state;
    F.cfg.subscribe_hold_ms = 100;
    F.cfg.select_wait_ms = 1000;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3);
    spec.cohort_size = 3; /* never full: the round starts at the select wait's end */
    spec.min_quorum = 1;
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_join(a1, "agent/a1");
    fx_agent_subscribe(a1);
    fx_idle_heartbeat(a1);
    memset(&w, 0, sizeof(w));
    t = fx_next_message(a1, &w);
    if (t == NULL)
        fail_msg("a Wait (%s) instead of the task", w.reason);
    assert_int_equal(t->job_id, js.job_id);
    assert_int_equal(t->round, 1);
    assert_false(a1->sub.done);
    sfl_msg_task_free(t);
}

/* A hostile agent that subscribes again and again while a job selects holds
 * one stream, however long the job keeps it: each Subscribe ends the one
 * before (FAILED_PRECONDITION), and the task goes to the last. */
static void test_coord_selecting_resubscribe_storm(void **state)
{
    enum { STORM = 20 };
    tagent_t *a1 = &F.ag[0];
    stream_t old[STORM];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_task_t *t;
    int status;

    (void)state;
    memset(old, 0, sizeof(old));
    F.cfg.subscribe_hold_ms = 100;
    F.cfg.select_wait_ms = 1000;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3);
    spec.cohort_size = 3;
    spec.min_quorum = 1;
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_join(a1, "agent/a1");
    for (int i = 0; i < STORM; i++)
        fx_agent_subscribe_into(a1, &old[i]);
    fx_agent_subscribe(a1);
    fx_idle_heartbeat(a1);
    for (int i = 0; i < STORM; i++) {
        fx_run_until(&old[i].done);
        assert_int_equal(old[i].status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
        assert_int_equal(old[i].n, 0);
        fx_stream_clear(&old[i]);
    }
    t = fx_next_task(a1);
    assert_int_equal(t->job_id, js.job_id);
    assert_int_equal(t->round, 1);
    assert_false(a1->sub.done);
    sfl_msg_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_job_wakes_idle_subscribers, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_selecting_keeps_streams, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_selecting_resubscribe_storm, fx_setup,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

/* server/round/quarantine.c: members a job's rounds named as culprits, on the
 * in-process coordinator (coordfx.h): never selected again, shown in
 * ListJobs, ListAgents and /metrics, kept across a restart, released only
 * by ReleaseAgent; the attempt a culprit failed does not pause the job. */
#include "coordfx.h"

#include "coord_int.h"
#include "round/quarantine.h"
#include "round/suspect.h"
#include "round/registry.h"

static sfl_job_status_t job_of(uint64_t id)
{
    sfl_status_t *st = fx_admin_status(&F.admin);
    sfl_job_status_t js = *fx_find_job(st, id);

    sfl_msg_status_free(st);
    return js;
}

static int release(uint64_t job, uint64_t agent, sfl_release_t *r, char *msg, size_t cap)
{
    sfl_release_t m = {.job_id = job, .agent_id = agent};
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_release_req_pack(&m, &buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/ReleaseAgent", buf, len, &res);
    if (msg != NULL)
        snprintf(msg, cap, "%s", res.msg);
    if (res.status == 0)
        assert_int_equal(sfl_msg_release_reply_unpack(res.resp, res.len, NULL, r), 0);
    free(res.resp);
    return res.status;
}

static sfl_agent_info_t agent_of(uint64_t id)
{
    sfl_agent_list_t *al = NULL;
    sfl_agent_info_t out = {0};
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_list_agents_req_pack(0, &buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/ListAgents", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_agent_list_unpack(res.resp, res.len, NULL, &al), 0);
    free(res.resp);
    for (uint32_t i = 0; i < al->n; i++)
        if (al->agents[i].agent_id == id) {
            out = al->agents[i];
            sfl_msg_agent_list_free(al);
            return out;
        }
    fail_msg("agent %llu not listed", (unsigned long long)id);
    return out;
}

/* Quarantine, its views, idempotence, release and its refusals, and a
 * restart in between. */
static void test_quarantine_views_release_restart(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_agent_info_t ai;
    sfl_release_t r;
    coord_job_t *j;
    char why[SFL_MSG_TEXT_LEN], want[128], msg[512];
    const char *page;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_job_spec(&spec, 60000, 3);
    spec.paused = 1;
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    j = coord_job_find(F.co, js.job_id);
    assert_non_null(j);
    assert_int_equal(coord_ineligible(j, coord_agent_find(F.co, a1->agent_id), NULL, 0),
                     COORD_INELIG_NONE);

    coord_quarantine(j, a1->agent_id, "round 1 attempt 0: the rebuilt seed of 1 fails\x01 it");
    coord_quarantine(j, a1->agent_id, "a second reason is not kept");
    assert_int_equal(coord_ineligible(j, coord_agent_find(F.co, a1->agent_id), why,
                                      sizeof(why)),
                     COORD_INELIG_QUARANTINED);
    assert_non_null(strstr(why, "quarantined: round 1 attempt 0: the rebuilt seed"));
    assert_int_equal(coord_ineligible(j, coord_agent_find(F.co, a2->agent_id), NULL, 0),
                     COORD_INELIG_NONE);

    js = job_of(js.job_id);
    assert_int_equal(js.quarantined, 1);
    snprintf(want, sizeof(want), "agent %llu: round 1 attempt 0:",
             (unsigned long long)a1->agent_id);
    assert_non_null(strstr(js.quarantine, want));
    assert_null(strstr(js.quarantine, "second"));
    ai = agent_of(a1->agent_id);
    snprintf(want, sizeof(want), "quarantined in job %llu: round 1",
             (unsigned long long)js.job_id);
    assert_non_null(strstr(ai.quarantine, want));
    assert_string_equal(agent_of(a2->agent_id).quarantine, "");
    page = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    snprintf(want, sizeof(want), "\nsfl_job_quarantined{job=\"%llu\",name=\"unit\"} 1\n",
             (unsigned long long)js.job_id);
    assert_non_null(strstr(page, want));
    assert_non_null(strstr(page, "\nsfl_quarantines_total 1\n"));

    /* Refusals: an agent not quarantined, a job that does not exist (ids of 0
     * are refused by the message's own checks, test_msg). */
    assert_int_equal(release(js.job_id, a2->agent_id, &r, msg, sizeof(msg)),
                     SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_non_null(strstr(msg, "is not quarantined in job"));
    assert_int_equal(release(js.job_id + 40, a1->agent_id, &r, NULL, 0),
                     SFL_GRPC_STATUS_NOT_FOUND);

    /* Kept across a restart (the ReleaseAgent refusal above came after the
     * quarantine's write in the writer's order, but only a recorded answer
     * proves it: a2's quarantine and release below are). */
    fx_cli_close(&F.admin);
    fx_cli_close(&a1->cli);
    fx_cli_close(&a2->cli);
    fx_stop();
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    j = coord_job_find(F.co, js.job_id);
    assert_non_null(j);
    assert_non_null(coord_quarantined(j, a1->agent_id));
    assert_non_null(strstr(coord_quarantined(j, a1->agent_id)->reason, "round 1 attempt 0"));
    assert_null(strchr(coord_quarantined(j, a1->agent_id)->reason, '\x01'));
    assert_int_equal(job_of(js.job_id).quarantined, 1);

    assert_int_equal(release(js.job_id, a1->agent_id, &r, NULL, 0), 0);
    assert_int_equal(r.job_id, js.job_id);
    assert_int_equal(r.agent_id, a1->agent_id);
    assert_non_null(strstr(r.reason, "round 1 attempt 0"));
    assert_null(coord_quarantined(j, a1->agent_id));
    assert_int_equal(job_of(js.job_id).quarantined, 0);
    assert_string_equal(job_of(js.job_id).quarantine, "");
    assert_int_equal(release(js.job_id, a1->agent_id, &r, NULL, 0),
                     SFL_GRPC_STATUS_FAILED_PRECONDITION);

    /* Released for good: a restart does not bring it back. */
    fx_cli_close(&F.admin);
    fx_stop();
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    j = coord_job_find(F.co, js.job_id);
    assert_null(coord_quarantined(j, a1->agent_id));
    page = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    assert_non_null(strstr(page, "\nsfl_quarantines_total 0\n"));
}

/* A member quarantined during an attempt excuses it: with max_attempts 1
 * the failed attempt (the culprit silent) does not pause the job; the
 * retry leaves the culprit out, and the job says why it waits. */
static void test_quarantine_attempt_not_counted(void **state)
{
    static const double v1[3] = {1.0, 1.0, 1.0};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_task_t *t;
    sfl_ack_t ack;
    uint8_t *upd;
    size_t len;
    coord_job_t *j;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 1000, 1); /* reached: a1 never answers */
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    t = fx_next_task(a2);
    assert_int_equal(t->attempt, 0);
    j = coord_job_find(F.co, js.job_id);
    assert_true(coord_round_is_member(&j->rnd, a1->agent_id));
    coord_quarantine(j, a1->agent_id, "round 1 attempt 0: named by the test");
    upd = fx_make_update(t, a2->id, NULL, a2->agent_id, v1, 5, &len);
    sfl_msg_task_free(t);
    ack = fx_submit(a2, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    /* the deadline fails attempt 0; the retry cannot start without a1 */
    for (;;) {
        js = job_of(js.job_id);
        assert_int_equal(js.state, SFL_JOB_RUNNING);
        if (js.attempt == 1 && js.waiting[0] != '\0')
            break;
        fx_run_for(50);
    }
    assert_int_equal(js.committed_round, 0);
    assert_non_null(strstr(js.waiting, "quarantined: round 1 attempt 0"));
    assert_int_equal(j->rnd.excused, 1);
}

/* Suspects of unattributable secure sums (suspect.c) where an operator
 * looks: JobStatus.waiting after the reason the round waits, and
 * sfl_job_suspects on /metrics; a commit's clear takes them off both. */
static void test_quarantine_suspects_shown(void **state)
{
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    uint64_t ids[2];
    const char *page;
    char want[160];
    coord_job_t *j;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_job_spec(&spec, 60000, 3);
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    j = coord_job_find(F.co, js.job_id);
    assert_non_null(j);
    for (;;) { /* nobody subscribed: the round waits and says why */
        js = job_of(js.job_id);
        if (js.waiting[0] != '\0')
            break;
        fx_run_for(50);
    }
    assert_null(strstr(js.waiting, "suspects"));
    ids[0] = a1->agent_id < a2->agent_id ? a1->agent_id : a2->agent_id;
    ids[1] = a1->agent_id < a2->agent_id ? a2->agent_id : a1->agent_id;
    assert_int_equal(coord_suspect_blame(j, ids, 2), 0);
    assert_int_equal(coord_suspect_blame(j, ids + 1, 1), 0);
    js = job_of(js.job_id);
    assert_non_null(strstr(js.waiting, "selecting 0/"));
    snprintf(want, sizeof(want),
             "; suspects of unattributable secure sums, drawn last: agent %llu (1), agent %llu (2)",
             (unsigned long long)ids[0], (unsigned long long)ids[1]);
    assert_non_null(strstr(js.waiting, want));
    page = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    snprintf(want, sizeof(want), "\nsfl_job_suspects{job=\"%llu\",name=\"unit\"} 2\n",
             (unsigned long long)js.job_id);
    assert_non_null(strstr(page, want));
    coord_suspect_clear(j, ids, 2);
    js = job_of(js.job_id);
    assert_null(strstr(js.waiting, "suspects"));
    page = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    snprintf(want, sizeof(want), "\nsfl_job_suspects{job=\"%llu\",name=\"unit\"} 0\n",
             (unsigned long long)js.job_id);
    assert_non_null(strstr(page, want));
}

/* The culprit today's secagg names in its error text, and nothing else. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_quarantine_views_release_restart, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_attempt_not_counted, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_suspects_shown, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

/* server/service/admin.c: the Admin service: job operations, lists, on the in-process
 * coordinator (coordfx.h). */
#include "coordfx.h"

/* Admin job operations and their preconditions; lists. */
static void test_coord_admin_job_ops(void **state)
{
    tagent_t *a1 = &F.ag[0];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_job_list_t *jl = NULL;
    sfl_agent_list_t *al = NULL;
    sfl_export_t *e;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    uint64_t id;
    int status;

    (void)state;
    /* Room for the model state of one job, not two. */
    F.cfg.max_job_memory = DIM * 3 * sizeof(double) * 3 / 2;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_agent_join(a1, "agent/a1");
    fx_job_spec(&spec, 60000, 3); /* never reached: 10x what a loaded machine needs */
    spec.paused = 1;
    snprintf(spec.description, sizeof(spec.description), "the operator's note");
    /* agents may not create jobs */
    assert_int_equal(sfl_msg_create_job_pack(&spec, &buf, &len), 0);
    fx_call(&a1->cli, "/sfl.v1.Admin/CreateJob", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);

    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PENDING);
    assert_string_equal(js.description, "the operator's note");
    id = js.job_id;
    e = fx_export_model(&F.admin, id, 0, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_null(e);
    /* A job holds no model state until a round opens (before: allocated and
     * zeroed at CreateJob, ~1 GiB for a paused job of 2^26 features). */
    assert_non_null(strstr(fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34),
                           "\nsfl_job_model_bytes 0\n"));
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    assert_int_equal(js.round_state, SFL_ROUND_SELECTING);
    assert_non_null(strstr(fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34),
                           "\nsfl_job_model_bytes 0\n"));
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/ResumeJob", id, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/PauseJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PAUSED);
    /* A paused job reserves its model state: a second one exceeds the budget. */
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/CancelJob", id, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_CANCELLED);
    /* Cancelling freed it: now the second one fits. */
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_PENDING);
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/CancelJob", id, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    js = fx_job_call(&F.admin, "/sfl.v1.Admin/PauseJob", 42, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);

    assert_int_equal(sfl_msg_list_jobs_req_pack(&buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/ListJobs", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_job_list_unpack(res.resp, res.len, NULL, &jl), 0);
    assert_int_equal(jl->n, 2);
    assert_int_equal(jl->jobs[0].state, SFL_JOB_CANCELLED);
    sfl_msg_job_list_free(jl);

    assert_int_equal(sfl_msg_list_agents_req_pack(1, &buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/ListAgents", buf, len, &res);
    assert_int_equal(res.status, 0);
    assert_int_equal(sfl_msg_agent_list_unpack(res.resp, res.len, NULL, &al), 0);
    assert_int_equal(al->n, 1);
    assert_int_equal(al->agents[0].agent_id, a1->agent_id);
    assert_string_equal(al->agents[0].subject, "a1");
    assert_int_equal(al->agents[0].connected, 1);
    assert_int_equal(al->agents[0].dataset.dimension, DIM);
    sfl_msg_agent_list_free(al);
    free(res.resp);
}

/* max_live_jobs: CreateJob past it is RESOURCE_EXHAUSTED with the reason
 * (before: 300 running jobs were accepted); an ended job frees its place. */
static void test_coord_admin_live_jobs_cap(void **state)
{
    sfl_job_spec_t spec;
    sfl_job_status_t js[3];
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;
    int status;

    (void)state;
    F.cfg.max_live_jobs = 2;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3);
    js[0] = fx_create_job(&F.admin, &spec, &status); /* running */
    assert_int_equal(status, 0);
    spec.paused = 1;
    js[1] = fx_create_job(&F.admin, &spec, &status); /* pending */
    assert_int_equal(status, 0);
    assert_int_equal(sfl_msg_create_job_pack(&spec, &buf, &len), 0);
    fx_call(&F.admin, "/sfl.v1.Admin/CreateJob", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(res.msg, "2 jobs are live (pending, running or paused), "
                                    "max_live_jobs is 2"));
    free(res.resp);
    /* paused still counts; cancelled does not */
    (void)fx_job_call(&F.admin, "/sfl.v1.Admin/PauseJob", js[0].job_id, &status);
    assert_int_equal(status, 0);
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED);
    (void)fx_job_call(&F.admin, "/sfl.v1.Admin/CancelJob", js[1].job_id, &status);
    assert_int_equal(status, 0);
    js[2] = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js[2].state, SFL_JOB_PENDING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_admin_job_ops, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_admin_live_jobs_cap, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

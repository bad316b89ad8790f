/* server/service/submit.c: SubmitUpdate through a committed round and a restart, on
 * the in-process coordinator (coordfx.h). */
#include "coordfx.h"

/* Two agents through one committed round; bad updates are refused with a
 * reason; a restart from the same state resumes at the committed round. */
static void test_coord_round_commit_and_restart(void **state)
{
    static const double v1[3] = {1.0, -2.0, 0.5}, v2[3] = {3.0, 2.0, 0.5};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1], *a3 = &F.ag[2];
    sfl_task_t *t1, *t2, *t1b;
    sfl_identity_t *rogue = NULL;
    sfl_roundkey_t *wrong = NULL;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_status_t *st;
    sfl_export_t *e;
    sfl_ack_t ack;
    sfl_heartbeat_reply_t hb;
    uint8_t *good1, *upd, pk1[32], hash1[32];
    size_t len1, len;
    uint64_t job;
    int status;
    const char *m;

    (void)state;
    fx_start();
    memcpy(pk1, coord_public_key(F.co), 32);
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3); /* never reached: 10x what a loaded machine needs */
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    job = js.job_id;

    /* a bad spec is refused with the field */
    assert_int_equal(sfl_param_list_set(&spec.params, "tau", 0), 0);
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(sfl_param_list_set(&spec.params, "tau", 3), 0);
    /* a model that would wrap a 32-bit size, or exceed max_dim, is refused */
    spec.dimension = (1u << 24) + 1;
    snprintf(spec.loss, sizeof(spec.loss), "softmax");
    spec.nlabels = 256;
    for (uint32_t i = 0; i < 256; i++)
        spec.labels[i] = i;
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    spec.nlabels = 2;
    spec.dimension = (1u << 26) + 1; /* max_dim's default is 2^26 */
    (void)fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_INVALID_ARGUMENT);
    snprintf(spec.loss, sizeof(spec.loss), "lsq");
    spec.nlabels = 0;
    spec.dimension = DIM;

    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    t1 = fx_next_task(a1);
    t2 = fx_next_task(a2);
    assert_int_equal(t1->job_id, job);
    assert_int_equal(t1->round, 1);
    assert_int_equal(t1->attempt, 0);
    assert_int_equal(t1->dimension, DIM);
    assert_int_equal(t1->model->nnz, 0);
    /* one task per attempt: the same signed bytes for every member */
    assert_int_equal(t1->signed_len, t2->signed_len);
    assert_memory_equal(t1->signed_bytes, t2->signed_bytes, t1->signed_len);

    /* a third agent arriving during training is not paced away: its stream
     * is held, so the next round can take it at once */
    fx_agent_join(a3, "agent/a3");
    fx_agent_subscribe(a3);
    fx_idle_heartbeat(a3);
    assert_int_equal(a3->sub.n, 0);
    assert_false(a3->sub.done);
    /* it leaves (the rounds below are a1's and a2's); the heartbeat behind
     * the reset on the same connection makes sure the coordinator saw it */
    sfl_grpc_cancel(a3->sub.call);
    fx_idle_heartbeat(a3);

    /* signed by an identity that is not a1's */
    assert_int_equal(sfl_identity_generate(&rogue), 0);
    upd = fx_make_update(t1, rogue, NULL, a1->agent_id, v1, 10, &len);
    ack = fx_submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "signature"));

    /* sealed to a key that is not the round's */
    assert_int_equal(sfl_roundkey_new(&wrong), 0);
    upd = fx_make_update(t1, a1->id, wrong->pk, a1->agent_id, v1, 10, &len);
    ack = fx_submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_true(ack.reason[0] != '\0');

    /* an agent that was not selected */
    upd = fx_make_update(t1, a3->id, NULL, a3->agent_id, v1, 10, &len);
    ack = fx_submit(a3, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "not selected"));

    /* more samples (the aggregation weight) than a1 joined with (100) */
    upd = fx_make_update(t1, a1->id, NULL, a1->agent_id, v1, 1000, &len);
    ack = fx_submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "samples"));

    /* a heartbeat keeps the member alive and tells it the deadline */
    hb = fx_heartbeat(a1, job, 1, 0);
    assert_int_equal(hb.abort, 0);
    assert_true(hb.deadline_ms > 0);

    /* the good one with one byte of its payload altered (the signed bytes
     * end the message: payload, then the 64-byte signature) */
    good1 = fx_make_update(t1, a1->id, NULL, a1->agent_id, v1, 10, &len1);
    good1[len1 - 65] ^= 0x01;
    ack = fx_submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_REJECTED);
    assert_non_null(strstr(ack.reason, "signature"));
    good1[len1 - 65] ^= 0x01;

    /* the good one, then the same bytes again */
    ack = fx_submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    assert_int_equal(ack.job_id, job);
    assert_int_equal(ack.round, 1);
    ack = fx_submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_DUPLICATE);

    st = fx_admin_status(&F.admin);
    assert_int_equal(fx_find_job(st, job)->round_state, SFL_ROUND_TRAINING);
    assert_int_equal(fx_find_job(st, job)->accepted, 1);
    assert_int_equal(fx_find_job(st, job)->selected, 2);
    sfl_msg_status_free(st);

    /* the second member closes the round; the next round's task follows.
     * It is an older agent: its update is sealed (accepted for one release,
     * docs/security.md "The seal") and folds the same. */
    upd = fx_make_update(t2, a2->id, t2->round_key, a2->agent_id, v2, 30, &len);
    ack = fx_submit(a2, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    t1b = fx_next_task(a1);
    assert_int_equal(t1b->round, 2);
    assert_int_equal(t1b->model->nnz, 3);
    /* weighted by samples (10, 30), then H_3: exact in binary */
    assert_true(t1b->model->val[0] == 2.5 && t1b->model->val[1] == 1.0 &&
                t1b->model->val[2] == 0.5);

    /* replaying the round-1 update now: its round has closed */
    ack = fx_submit(a1, good1, len1);
    assert_int_equal(ack.status, SFL_ACK_LATE);
    hb = fx_heartbeat(a1, job, 1, 0);
    assert_int_equal(hb.abort, 1);

    /* the committed model, as the admin exports it */
    e = fx_export_model(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_int_equal(e->round, 1);
    assert_int_equal(e->model->nnz, 3);
    assert_true(e->model->idx[0] == 1 && e->model->idx[1] == 5 && e->model->idx[2] == 9);
    assert_true(e->model->val[0] == 2.5 && e->model->val[1] == 1.0 && e->model->val[2] == 0.5);
    memcpy(hash1, e->model_hash, 32);
    sfl_msg_export_free(e);
    e = fx_export_model(&F.admin, job, 7, &status);
    assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);
    assert_null(e);

    /* training progress: sample-weighted means of what the two accepted
     * updates reported (samples 10 and 30; 5 and 15 held-out rows) */
    st = fx_admin_status(&F.admin);
    assert_true(fx_find_job(st, job)->last.train_loss == (10 * 1.25 + 30 * 3.75) / 40);
    assert_int_equal(fx_find_job(st, job)->last.support_churn, 3); /* JobStatus field 68 */
    assert_int_equal(fx_find_job(st, job)->last.samples, 40);
    assert_int_equal(fx_find_job(st, job)->last.eval_samples, 20);
    assert_true(fx_find_job(st, job)->last.eval_mse == (5 * 0.625 + 15 * 1.875) / 20);
    assert_true(fx_find_job(st, job)->last.eval_accuracy == 0);
    /* eval_samples-weighted like eval_accuracy: (5 * 10 + 15 * 30) / 1024 / 20 */
    assert_true(fx_find_job(st, job)->last.personal_accuracy == 25.0 / 1024);
    sfl_msg_status_free(st);
    {
        sfl_job_history_t *h = fx_job_history(&F.admin, job, 0, &status);

        assert_int_equal(status, 0);
        assert_string_equal(h->loss, "lsq");
        assert_string_equal(h->algorithm, "fediterht");
        assert_int_equal(h->n, 1);
        assert_int_equal(h->more, 0);
        assert_int_equal(h->rounds[0].round, 1);
        assert_int_equal(h->rounds[0].attempt, 0);
        assert_int_equal(h->rounds[0].selected, 2);
        assert_int_equal(h->rounds[0].accepted, 2);
        assert_int_equal(h->rounds[0].m.samples, 40);
        assert_true(h->rounds[0].m.train_loss == 3.125);
        assert_int_equal(h->rounds[0].m.eval_samples, 20);
        assert_true(h->rounds[0].m.eval_mse == 1.5625);
        assert_true(h->rounds[0].m.personal_accuracy == 25.0 / 1024);
        assert_int_equal(h->rounds[0].m.model_nnz, 3);
        assert_int_equal(h->rounds[0].m.support_churn, 3); /* from the zero model */
        assert_true(h->rounds[0].bytes_up > 0 && h->rounds[0].m.bytes_down > 0);
        assert_true(h->rounds[0].committed_ms >= h->rounds[0].opened_ms);
        sfl_msg_history_free(h);
        h = fx_job_history(&F.admin, job, 1, &status);
        assert_int_equal(status, 0);
        assert_int_equal(h->n, 0);
        sfl_msg_history_free(h);
        assert_null(fx_job_history(&F.admin, job + 100, 0, &status));
        assert_int_equal(status, SFL_GRPC_STATUS_NOT_FOUND);
    }

    /* the metrics say so too */
    m = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    assert_non_null(strstr(m, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(m, "\nsfl_rounds_committed_total 1\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"accepted\"} 2\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"duplicate\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_updates_total{verdict=\"late\"} 1\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"bad_signature\"} 2\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"decrypt\"} 1\n"));
    assert_non_null(strstr(m, "sfl_updates_rejected_total{reason=\"not_selected\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_agents_connected 3\n"));
    assert_non_null(strstr(m, "sfl_aggregation_seconds_count 1\n"));
    assert_non_null(strstr(m, "\nsfl_job_committed_round{job=\"1\",name=\"unit\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_job_running{job=\"1\",name=\"unit\"} 1\n"));
    assert_non_null(strstr(m, "\nsfl_job_train_loss{job=\"1\",name=\"unit\"} 3.125\n"));
    assert_non_null(strstr(m, "\nsfl_job_eval_mse{job=\"1\",name=\"unit\"} 1.5625\n"));
    assert_non_null(strstr(m, "\nsfl_job_support_churn{job=\"1\",name=\"unit\"} 3\n"));
    assert_null(strstr(m, "\nsfl_job_eval_accuracy{")); /* an lsq job */
    assert_null(strstr(m, "\nsfl_job_personal_accuracy{")); /* not personalized */

    /* graceful stop while round 2 trains (no quorum): it is abandoned */
    fx_stop();
    fx_run_until(&a1->sub.done);
    assert_int_equal(a1->sub.status, SFL_GRPC_STATUS_UNAVAILABLE);
    for (int i = 0; i < 3; i++)
        while (F.ag[i].cli.c && !F.timed_out)
            uv_run(&F.loop, UV_RUN_ONCE);
    while (F.admin.c && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);

    /* restart from the same state directory */
    fx_start();
    assert_memory_equal(coord_public_key(F.co), pk1, 32);
    fx_cli_connect(&F.admin, "admin/alice");
    st = fx_admin_status(&F.admin);
    assert_int_equal(st->njobs, 1);
    assert_int_equal(st->known_agents, 3);
    assert_int_equal(st->jobs[0].committed_round, 1);
    assert_int_equal(st->jobs[0].state, SFL_JOB_RUNNING);
    assert_int_equal(st->jobs[0].round_state, SFL_ROUND_SELECTING);
    assert_int_equal(st->jobs[0].attempt, 1); /* round 2's attempt 0 died with the process */
    assert_true(st->jobs[0].last.train_loss == 3.125); /* read back from the store */
    assert_int_equal(st->jobs[0].last.eval_samples, 20);
    assert_true(st->jobs[0].last.personal_accuracy == 25.0 / 1024);
    sfl_msg_status_free(st);
    e = fx_export_model(&F.admin, job, 1, &status);
    assert_int_equal(status, 0);
    assert_memory_equal(e->model_hash, hash1, 32);
    sfl_msg_export_free(e);

    /* the agents come back and round 2 runs as attempt 1 */
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    sfl_msg_task_free(t1b);
    t1b = fx_next_task(a1);
    assert_int_equal(t1b->round, 2);
    assert_int_equal(t1b->attempt, 1);
    assert_int_equal(t1b->model->nnz, 3);

    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(t1b);
    sfl_msg_buf_free(good1);
    sfl_identity_free(rogue);
    sfl_roundkey_free(wrong);

    /* the store itself, after a clean stop */
    fx_stop();
    {
        char path[128];
        coord_store_t *s = NULL;
        coord_round_row_t *rounds = NULL;
        uint8_t *model = NULL, hash[32];
        size_t n = 0, mlen = 0;
        int64_t round = 0;

        snprintf(path, sizeof(path), "%s/coordinator.db", F.state);
        assert_int_equal(coord_store_open(path, NULL, &s), 0);
        assert_int_equal(coord_store_integrity_check(s), 0);
        assert_int_equal(coord_store_checkpoint_latest(s, (int64_t)job, 1 << 20, &round, &model,
                                                       &mlen, hash),
                         0);
        assert_int_equal(round, 1);
        assert_memory_equal(hash, hash1, 32);
        coord_store_free(model);
        assert_int_equal(coord_store_round_list(s, (int64_t)job, 100, &rounds, &n), 0);
        assert_int_equal(n, 3); /* r1 a1 committed, r2 a1 and a2 failed */
        assert_int_equal(rounds[0].state, COORD_SROW_COMMITTED);
        assert_int_equal(rounds[0].cohort_len, 2);
        assert_int_equal(rounds[1].state, COORD_SROW_FAILED);
        assert_int_equal(rounds[2].state, COORD_SROW_FAILED);
        assert_non_null(strstr(rounds[2].reason, "shutting down"));
        coord_round_list_free(rounds, n);
        coord_store_close(s);
    }
}

/* A personalized algorithm's job (FedMac, logistic): the agents' own
 * models' accuracy is folded like eval_accuracy and shown by the status,
 * the history and the progress gauge. */
static void test_coord_personal_progress(void **state)
{
    static const double v1[3] = {1.0, -2.0, 0.5}, v2[3] = {3.0, 2.0, 0.5};
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t1, *t2, *next;
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    sfl_status_t *st;
    sfl_job_history_t *h;
    sfl_ack_t ack;
    uint8_t *upd;
    size_t len;
    uint64_t job;
    int status;
    const char *m;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    fx_job_spec(&spec, 60000, 3);
    snprintf(spec.algorithm, sizeof(spec.algorithm), "fedmac");
    memset(&spec.params, 0, sizeof(spec.params)); /* FedMac's defaults */
    snprintf(spec.loss, sizeof(spec.loss), "logistic");
    spec.nlabels = 2;
    spec.labels[0] = -1;
    spec.labels[1] = 1;
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    job = js.job_id;

    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    t1 = fx_next_task(a1);
    t2 = fx_next_task(a2);
    upd = fx_make_update(t1, a1->id, NULL, a1->agent_id, v1, 10, &len);
    ack = fx_submit(a1, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    upd = fx_make_update(t2, a2->id, NULL, a2->agent_id, v2, 30, &len);
    ack = fx_submit(a2, upd, len);
    sfl_msg_buf_free(upd);
    assert_int_equal(ack.status, SFL_ACK_ACCEPTED);
    next = fx_next_task(a1); /* round 1 committed */
    assert_int_equal(next->round, 2);

    /* 5 and 15 held-out rows at 10 / 1024 and 30 / 1024 */
    st = fx_admin_status(&F.admin);
    assert_int_equal(fx_find_job(st, job)->last.eval_samples, 20);
    assert_true(fx_find_job(st, job)->last.personal_accuracy == 25.0 / 1024);
    sfl_msg_status_free(st);
    h = fx_job_history(&F.admin, job, 0, &status);
    assert_int_equal(status, 0);
    assert_string_equal(h->algorithm, "fedmac");
    assert_string_equal(h->loss, "logistic");
    assert_int_equal(h->n, 1);
    assert_true(h->rounds[0].m.personal_accuracy == 25.0 / 1024);
    sfl_msg_history_free(h);
    m = fx_http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 34);
    assert_non_null(strstr(m, "\nsfl_job_eval_accuracy{job=\"1\",name=\"unit\"} 0\n"));
    assert_non_null(
        strstr(m, "\nsfl_job_personal_accuracy{job=\"1\",name=\"unit\"} 0.0244140625\n"));

    sfl_msg_task_free(t1);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(next);
    fx_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_round_commit_and_restart, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_personal_progress, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

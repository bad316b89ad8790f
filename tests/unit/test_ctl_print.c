/* The text sflctl prints (ctl/print.c): jobs, status, agents, progress,
 * history and watch lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "testutil.h"

static sfl_job_status_t job(uint64_t id, const char *name, sfl_job_state_t st)
{
    sfl_job_status_t j;

    memset(&j, 0, sizeof(j));
    j.job_id = id;
    snprintf(j.name, sizeof(j.name), "%s", name);
    snprintf(j.algorithm, sizeof(j.algorithm), "fediterht");
    j.state = st;
    j.rounds = 60;
    j.cohort_size = 4;
    j.min_quorum = 3;
    return j;
}

/* Runs the printer into a string (owned by the caller: free). */
#define CAPTURE(out, call)                                                     \
    do {                                                                       \
        size_t cap_n_;                                                         \
        FILE *f = open_memstream(&(out), &cap_n_);                             \
        assert_non_null(f);                                                    \
        call;                                                                  \
        fclose(f);                                                             \
    } while (0)

/* A running job whose round cannot start says why, in jobs and watch. */
static void test_ctl_print_waiting(void **state)
{
    sfl_job_status_t j = job(3, "walk", SFL_JOB_RUNNING);
    char line[512], *out = NULL;

    (void)state;
    j.round_state = SFL_ROUND_SELECTING;
    snprintf(j.waiting, sizeof(j.waiting),
             "selecting 0/2: waiting for 2 more agents (2 connected, 0 eligible; 2 not "
             "eligible, e.g. agent 1: data has 500 features, the job 123)");
    CAPTURE(out, ctl_print_jobs(f, &j, 1));
    assert_non_null(strstr(out, "\n     selecting 0/2: waiting for 2 more agents (2 connected, "
                                "0 eligible; 2 not eligible, e.g. agent 1: data has 500 "
                                "features, the job 123)\n"));
    free(out);
    assert_string_equal(ctl_watch_line(&j, line, sizeof(line)),
                        "job 3 walk: round 1/60 selecting 0/2: waiting for 2 more agents (2 "
                        "connected, 0 eligible; 2 not eligible, e.g. agent 1: data has 500 "
                        "features, the job 123)");
    /* only while running */
    j.state = SFL_JOB_PAUSED;
    assert_null(strstr(ctl_watch_line(&j, line, sizeof(line)), "waiting"));
}

/* A standardize job: its statistics round in watch and jobs, then what
 * the stored statistics pool. */
static void test_ctl_print_statistics(void **state)
{
    sfl_job_status_t j = job(4, "std", SFL_JOB_RUNNING);
    char line[512], *out = NULL;

    (void)state;
    j.statistics = 1;
    j.round_state = SFL_ROUND_TRAINING;
    j.attempt = 1;
    j.selected = 5;
    j.accepted = 3;
    assert_string_equal(ctl_watch_line(&j, line, sizeof(line)),
                        "job 4 std: statistics round attempt 1 training, 3/5 answered");
    CAPTURE(out, ctl_print_jobs(f, &j, 1));
    assert_non_null(strstr(out, "\n     statistics round (round 0): the agents' moments, "
                                "before round 1\n"));
    free(out);
    snprintf(j.waiting, sizeof(j.waiting), "selecting 1/2: waiting for 1 more agent");
    assert_string_equal(ctl_watch_line(&j, line, sizeof(line)),
                        "job 4 std: statistics round selecting 1/2: waiting for 1 more agent");
    j.waiting[0] = '\0';
    j.statistics = 2;
    j.statistics_rows = 240;
    j.statistics_agents = 4;
    strcpy(j.description, "weekly, owner: ops");
    CAPTURE(out, ctl_print_jobs(f, &j, 1));
    assert_non_null(strstr(out, "\n     standardized: statistics of 240 rows from 4 agents\n"));
    assert_non_null(strstr(out, "\n     weekly, owner: ops\n"));
    assert_null(strstr(out, "statistics round"));
    free(out);
    assert_non_null(strstr(ctl_watch_line(&j, line, sizeof(line)), "job 4 std: round 1/60"));
}

static void test_ctl_print(void **state)
{
    sfl_job_status_t jobs[2];
    sfl_status_t st;
    sfl_agent_info_t ag;
    sfl_agent_list_t al = {1, &ag};
    char line[256], *out = NULL;

    (void)state;
    jobs[0] = job(1, "lsq", SFL_JOB_FINISHED);
    jobs[0].committed_round = 60;
    jobs[0].model_nnz = 5;
    jobs[1] = job(12, "second-job", SFL_JOB_RUNNING);
    jobs[1].committed_round = 2;
    jobs[1].round_state = SFL_ROUND_TRAINING;
    jobs[1].attempt = 1;
    jobs[1].selected = 5;
    jobs[1].accepted = 3;
    CAPTURE(out, ctl_print_jobs(f, jobs, 2));
    assert_string_equal(out,
                        "ID   NAME       ALGORITHM STATE     ROUNDS      ROUND       ATTEMPT "
                        "ACCEPTED NNZ     LAST ROUND\n"
                        "1    lsq        fediterht finished  60/60       -           -       "
                        "-        5       -\n"
                        "12   second-job fediterht running   2/60        training    1       "
                        "3/4      0       -\n");
    free(out);
    /* the last committed round's progress, with the metric of the loss */
    jobs[0].last.samples = 400;
    jobs[0].last.train_loss = 0.123456;
    snprintf(jobs[0].loss, sizeof(jobs[0].loss), "lsq");
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)), "loss 0.1235");
    jobs[0].last.eval_samples = 80;
    jobs[0].last.eval_mse = 2.5;
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)),
                        "loss 0.1235, mse 2.5 (80 held out)");
    jobs[1].last.samples = 10;
    jobs[1].last.train_loss = 0.69;
    jobs[1].last.eval_samples = 20;
    jobs[1].last.eval_accuracy = 0.95;
    snprintf(jobs[1].loss, sizeof(jobs[1].loss), "logistic");
    CAPTURE(out, ctl_print_jobs(f, jobs, 2));
    assert_string_equal(out,
                        "ID   NAME       ALGORITHM STATE     ROUNDS      ROUND       ATTEMPT "
                        "ACCEPTED NNZ     LAST ROUND\n"
                        "1    lsq        fediterht finished  60/60       -           -       "
                        "-        5       loss 0.1235, mse 2.5 (80 held out)\n"
                        "12   second-job fediterht running   2/60        training    1       "
                        "3/4      0       loss 0.69, accuracy 0.95 (20 held out)\n");
    assert_string_equal(ctl_watch_line(&jobs[1], line, sizeof(line)),
                        "job 12 second-job: round 3/60 attempt 1 training, 3/4 accepted "
                        "(5 selected, quorum 3); last round loss 0.69, accuracy 0.95 "
                        "(20 held out)");
    /* A personalized algorithm: the agents' own models' accuracy after the
     * global one, shown even when it is 0; none for its lsq jobs. */
    snprintf(jobs[1].algorithm, sizeof(jobs[1].algorithm), "fedmac");
    jobs[1].last.personal_accuracy = 0.975;
    assert_string_equal(ctl_progress(&jobs[1], line, sizeof(line)),
                        "loss 0.69, accuracy 0.95, pacc 0.975 (20 held out)");
    assert_string_equal(ctl_watch_line(&jobs[1], line, sizeof(line)),
                        "job 12 second-job: round 3/60 attempt 1 training, 3/4 accepted "
                        "(5 selected, quorum 3); last round loss 0.69, accuracy 0.95, "
                        "pacc 0.975 (20 held out)");
    jobs[1].last.personal_accuracy = 0;
    assert_string_equal(ctl_progress(&jobs[1], line, sizeof(line)),
                        "loss 0.69, accuracy 0.95, pacc 0 (20 held out)");
    snprintf(jobs[0].algorithm, sizeof(jobs[0].algorithm), "fedmac");
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)),
                        "loss 0.1235, mse 2.5 (80 held out)");
    /* a vertical job: its iteration; a private one its ledger */
    jobs[0].iteration = 250;
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)), "iteration 250");
    jobs[0].privacy_epsilon = 1;
    jobs[0].privacy_spent = 0.5;
    jobs[0].privacy_spent_rdp = 0.3125;
    jobs[0].privacy_iterations = 300;
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)),
                        "iteration 250, epsilon 0.5 of 1 spent (rdp 0.3125, 300 iterations)");
    jobs[0].iteration = 0;
    jobs[0].privacy_epsilon = 0;
    snprintf(jobs[0].algorithm, sizeof(jobs[0].algorithm), "fediterht");
    snprintf(jobs[1].algorithm, sizeof(jobs[1].algorithm), "fediterht");
    jobs[0].last.samples = jobs[1].last.samples = 0;
    free(out);
    CAPTURE(out, ctl_print_jobs(f, jobs, 0));
    assert_string_equal(out, "no jobs\n");
    free(out);

    assert_string_equal(ctl_watch_line(&jobs[1], line, sizeof(line)),
                        "job 12 second-job: round 3/60 attempt 1 training, 3/4 accepted "
                        "(5 selected, quorum 3)");
    jobs[1].state = SFL_JOB_PAUSED;
    snprintf(jobs[1].error, sizeof(jobs[1].error), "round 3 missed its quorum 3 times");
    assert_string_equal(ctl_watch_line(&jobs[1], line, sizeof(line)),
                        "job 12 second-job: paused, 2/60 rounds committed; error: round 3 "
                        "missed its quorum 3 times");
    /* truncation is snprintf's */
    assert_string_equal(ctl_watch_line(&jobs[1], line, 10), "job 12 se");
    CAPTURE(out, ctl_print_job(f, &jobs[0]));
    assert_string_equal(out, "job 1 lsq: finished, 60/60 rounds committed\n");
    free(out);

    memset(&st, 0, sizeof(st));
    snprintf(st.version, sizeof(st.version), "sfl-coordinator 0.1.0");
    st.started_ms = 1000;
    st.connected_agents = 4;
    st.known_agents = 5;
    st.updates_accepted = 240;
    st.updates_rejected = 2;
    st.bytes_in = 100;
    st.bytes_out = 200;
    st.njobs = 1;
    st.jobs = jobs;
    CAPTURE(out, ctl_print_status(f, &st, 1000 + 3723000));
    assert_string_equal(out, "coordinator  sfl-coordinator 0.1.0, up 1h02m\n"
                             "agents       4 connected, 5 known\n"
                             "updates      240 accepted, 2 rejected\n"
                             "bytes        100 in, 200 out\n"
                             "jobs         1\n"
                             "\n"
                             "ID   NAME ALGORITHM STATE     ROUNDS      ROUND       ATTEMPT "
                             "ACCEPTED NNZ     LAST ROUND\n"
                             "1    lsq  fediterht finished  60/60       -           -       "
                             "-        5       -\n");
    free(out);

    memset(&ag, 0, sizeof(ag));
    ag.agent_id = 3;
    snprintf(ag.subject, sizeof(ag.subject), "agent-0");
    ag.connected = 1;
    ag.phase = SFL_PHASE_TRAINING;
    ag.job_id = 1;
    ag.round = 7;
    ag.progress_permille = 455;
    ag.updates_accepted = 6;
    ag.dataset.samples = 60;
    ag.dataset.dimension = 200;
    ag.last_seen_ms = 5000;
    snprintf(ag.agent_version, sizeof(ag.agent_version), "sfl-agent 0.1.0");
    CAPTURE(out, ctl_print_agents(f, &al, 5000 + 90000));
    assert_string_equal(out, "ID   SUBJECT CONNECTED PHASE     JOB  ROUND  PROGRESS ACCEPTED "
                             "SAMPLES  DIM     LAST SEEN VERSION\n"
                             "3    agent-0 yes       training  1    7      45.5%    6        "
                             "60       200     1m30s ago sfl-agent 0.1.0\n");
    free(out);
    al.n = 0;
    CAPTURE(out, ctl_print_agents(f, &al, 0));
    assert_string_equal(out, "no agents\n");
    free(out);

    {
        const uint8_t b[3] = {0x00, 0xab, 0x7f};
        char hex[7];

        ctl_hex(b, 3, hex);
        assert_string_equal(hex, "00ab7f");
    }
}

/* The history CSV: the metric that fits the loss, empty cells for what a
 * round has no value for, wall time from the first round's opening; the
 * personal accuracy for a personalized algorithm's classification job. */
static void test_ctl_history(void **state)
{
    sfl_round_summary_t r[3];
    sfl_job_history_t h = {4, "logistic", 3, r, 0, "fediterht"};
    char *out = NULL;

    (void)state;
    memset(r, 0, sizeof(r));
    r[0].round = 1; /* committed before metrics were kept */
    r[0].opened_ms = 1000;
    r[0].committed_ms = 1500;
    r[0].selected = 4;
    r[0].accepted = 3;
    r[0].bytes_up = 300;
    r[1].round = 2;
    r[1].attempt = 1;
    r[1].opened_ms = 1600;
    r[1].committed_ms = 2600;
    r[1].selected = 4;
    r[1].accepted = 4;
    r[1].m.samples = 400;
    r[1].m.train_loss = 0.6931471805599453;
    r[1].m.model_nnz = 10;
    r[1].bytes_up = 480;
    r[1].m.bytes_down = 1200;
    r[1].m.support_churn = 6;
    r[2] = r[1];
    r[2].round = 3;
    r[2].attempt = 0;
    r[2].opened_ms = 2700;
    r[2].committed_ms = 2900;
    r[2].m.eval_samples = 100;
    r[2].m.eval_accuracy = 0.875;
    r[2].m.eval_mse = 0;
    CAPTURE(out, ctl_print_history(f, &h, 1, 1000));
    assert_string_equal(out,
                        "round,objective,test_accuracy,test_mse,eval_samples,nnz,bytes_up,"
                        "bytes_down,accepted,selected,samples,attempt,round_ms,wall_ms,"
                        "personal_accuracy,privacy_iterations,privacy_spent,privacy_spent_rdp,"
                        "support_churn\n"
                        "1,,,n/a,,,300,,3,4,,0,500,500,n/a,,,,\n"
                        "2,0.6931471806,,n/a,0,10,480,1200,4,4,400,1,1000,1600,n/a,n/a,n/a,"
                        "n/a,6\n"
                        "3,0.6931471806,0.875000,n/a,100,10,480,1200,4,4,400,0,200,1900,n/a,n/a,"
                        "n/a,n/a,6\n");
    free(out);
    /* FedMac: the agents' own models, where the round has held-out rows. */
    snprintf(h.algorithm, sizeof(h.algorithm), "fedmac");
    r[2].m.personal_accuracy = 0.9375;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "1,,,n/a,,,300,,3,4,,0,500,500,,,,,\n"
                        "2,0.6931471806,,n/a,0,10,480,1200,4,4,400,1,1000,1600,,n/a,n/a,n/a,6\n"
                        "3,0.6931471806,0.875000,n/a,100,10,480,1200,4,4,400,0,200,1900,0.937500,"
                        "n/a,n/a,n/a,6\n");
    free(out);
    snprintf(h.loss, sizeof(h.loss), "lsq");
    r[2].m.eval_mse = 0.25;
    r[2].m.personal_accuracy = 0;
    h.rounds = r + 2;
    h.n = 1;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "3,0.6931471806,n/a,0.25,100,10,480,1200,4,4,400,0,200,1900,n/a,n/a,n/a,"
                        "n/a,6\n");
    free(out);
    /* a private vertical job: its ledger at each commit */
    r[2].m.privacy_iterations = 300;
    r[2].m.privacy_spent = 0.5;
    r[2].m.privacy_spent_rdp = 0.25;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "3,0.6931471806,n/a,0.25,100,10,480,1200,4,4,400,0,200,1900,n/a,300,0.5,"
                        "0.25,6\n");
    free(out);
    /* Issue 24 item 7: a vertical round reports no loss and no rows (n/a),
     * but its model's nnz and the bytes both ways are kept and shown */
    snprintf(h.algorithm, sizeof(h.algorithm), "dpbcfw");
    memset(&r[2], 0, sizeof(r[2]));
    r[2].round = 3;
    r[2].opened_ms = 2700;
    r[2].committed_ms = 2900;
    r[2].selected = r[2].accepted = 4;
    r[2].m.model_nnz = 7;
    r[2].bytes_up = 480;
    r[2].m.bytes_down = 900;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,n/a,n/a,n/a,n/a,7,480,900,4,4,n/a,0,200,1900,n/a,n/a,n/a,n/a,n/a\n");
    free(out);
    r[2].m.privacy_iterations = 300;
    r[2].m.privacy_spent = 0.5;
    r[2].m.privacy_spent_rdp = 0.25;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,n/a,n/a,n/a,n/a,7,480,900,4,4,n/a,0,200,1900,n/a,300,0.5,0.25,n/a\n");
    free(out);
    /* bcfw: the block holders' objective over the job's rows, where its
     * broadcast is the margins A x */
    snprintf(h.algorithm, sizeof(h.algorithm), "bcfw");
    r[2].m.privacy_iterations = 0;
    r[2].m.samples = 200;
    r[2].m.train_loss = 0.125;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,0.125,n/a,n/a,n/a,7,480,900,4,4,200,0,200,1900,n/a,n/a,n/a,n/a,n/a\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_print),
        cmocka_unit_test(test_ctl_history),
        cmocka_unit_test(test_ctl_print_waiting),
        cmocka_unit_test(test_ctl_print_statistics),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

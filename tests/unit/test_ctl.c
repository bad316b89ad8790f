/* sflctl's pieces (ctl/ctl.h): configuration, job ids and job files
 * (good and hostile), the text it prints, the model export bytes and their
 * atomic write, and the client against an in-process coordinator on the
 * same loop (OK, PERMISSION_DENIED for an agent certificate, UNAVAILABLE
 * for a closed port). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coord.h"
#include "ctl.h"
#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/net/grpc.h"
#include "sfl/wire/msg.h"
#include "testutil.h"

#define PKI "deploy/pki/sfl-pki"
#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */

static char dir[64]; /* temporary files and PKI */

/* Writes text to dir/name and returns the path (static buffer). */
static const char *file(const char *name, const char *text, size_t len)
{
    static char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

#define TEXT(name, s) file(name, s, sizeof(s) - 1)

/* ---- configuration, ids --------------------------------------------------------- */

static void test_ctl_config(void **state)
{
    ctl_config_t c;

    (void)state;
    ctl_config_default(&c);
    assert_int_equal(c.timeout_ms, 10000);
    assert_string_equal(c.coordinator, "127.0.0.1:7444"); /* admin_listen's default */
    assert_int_equal(ctl_config_check(&c), SFL_EINVAL);
    assert_detail("missing required setting 'ca'");
    assert_int_equal(ctl_config_set(&c, "coordinator", ""), 0);
    assert_int_equal(ctl_config_check(&c), SFL_EINVAL);
    assert_detail("missing required setting 'coordinator'");
    assert_int_equal(ctl_config_load(&c, TEXT("a.ini", "[sflctl]\n"
                                                        "coordinator = h:1\n"
                                                        "server_name = coord\n"
                                                        "ca = /ca\ncert = /c\nkey = /k\n"
                                                        "timeout_ms = 250\n")),
                     0);
    assert_string_equal(c.coordinator, "h:1");
    assert_string_equal(c.server_name, "coord");
    assert_string_equal(c.key, "/k");
    assert_int_equal(c.timeout_ms, 250);
    assert_int_equal(ctl_config_check(&c), 0);

    assert_int_equal(ctl_config_set(&c, "colour", "red"), SFL_EINVAL);
    assert_detail("unknown key 'colour'");
    assert_int_equal(ctl_config_set(&c, "timeout_ms", "0"), SFL_EINVAL);
    assert_int_equal(ctl_config_set(&c, "timeout_ms", "-5"), SFL_EINVAL);
    assert_int_equal(ctl_config_set(&c, "timeout_ms", "10s"), SFL_EINVAL);
    assert_int_equal(ctl_config_set(&c, "timeout_ms", "99999999999"), SFL_EINVAL);
    assert_int_equal(c.timeout_ms, 250);
    {
        char big[300];

        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(ctl_config_set(&c, "coordinator", big), SFL_EINVAL);
        assert_string_equal(c.coordinator, "h:1");
    }
    assert_int_equal(ctl_config_load(&c, TEXT("b.ini", "[sflctl]\nca = x\n[agent]\nca = y\n")),
                     SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "b.ini:4: unknown section [agent]"));
    assert_int_equal(ctl_config_load(&c, TEXT("c.ini", "[sflctl]\nno equals sign\n")),
                     SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "c.ini:2: malformed line"));
    assert_int_equal(ctl_config_load(&c, "/nonexistent/sflctl.ini"), -ENOENT);
}

/* sflctl's command line: options anywhere, the command and its operands,
 * and each usage error with its message. */
static void test_ctl_args(void **state)
{
    static const struct {
        const char *argv[8];
        const char *detail;
    } bad[] = {
        {{"--bogus", "status"}, "unknown option '--bogus'"},
        {{"status", "--bogus=1"}, "unknown option '--bogus'"},
        {{"--", "status"}, "unknown option '--'"},
        {{"-x", "status"}, "unknown option '-x'"},
        {{"status", "--ca"}, "option '--ca' needs a value"},
        {{"frob"}, "unknown command 'frob'"},
        {{"job", "frob", "1"}, "unknown command 'job frob'"},
        /* the nearest, and the valid ones (issue 24 item 8) */
        {{"job", "histry", "1"},
         "unknown command 'job histry'; did you mean 'job history'? (valid: status, agents, "},
        {{"jbs", "1"}, "unknown command 'jbs 1'; did you mean 'jobs'?"},
        {{"--timout-ms", "5", "jobs"},
         "unknown option '--timout-ms'; did you mean '--timeout_ms'? (valid: --coordinator, "},
        {{"jobs", "--round", "3"}, "--round applies only to model export"},
        {{"model", "export", "1", "f", "--round", "0"}, "--round: want a round number >= 1"},
        {{NULL}, "no command"},
        {{"job", "pause"}, "wrong number of operands for 'job pause'"},
        {{"job", "pause", "x"}, "'x' is not a job id"},
        {{"job", "release", "1"}, "wrong number of operands for 'job release'"},
        {{"job", "release", "x", "2"}, "'x' is not a job id"},
        {{"job", "release", "1", "agent-0"}, "'agent-0' is not an agent id"},
        {{"job", "release", "1", "0"}, "'0' is not an agent id"},
        {{"model", "export", "1", "f", "g"}, "wrong number of operands for 'model export'"},
        {{"status", "a", "b", "c", "d", "e"}, "wrong number of operands for 'status'"},
        {{"status", "a", "b", "c", "d", "e", "f"}, "too many operands"},
    };
    char *argv[10];
    ctl_args_t a;
    ctl_config_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int n = 1;

        argv[0] = "sflctl";
        while (n <= 8 && bad[i].argv[n - 1] != NULL) {
            argv[n] = (char *)bad[i].argv[n - 1];
            n++;
        }
        if (ctl_args_parse(n, argv, &a) != SFL_EINVAL ||
            strncmp(sfl_last_error(), bad[i].detail, strlen(bad[i].detail)) != 0)
            fail_msg("case %zu: '%s', want '%s'", i, sfl_last_error(), bad[i].detail);
    }
    {
        char *ok[] = {"sflctl", "--timeout-ms", "250", "model", "--config=c.ini", "export",
                      "7", "--server_name", "coord", "out.bin"};

        assert_int_equal(ctl_args_parse(10, ok, &a), 0);
        assert_int_equal(a.cmd, CTL_CMD_MODEL_EXPORT);
        assert_int_equal(a.id, 7);
        assert_int_equal(a.noperands, 2);
        assert_string_equal(a.operands[1], "out.bin");
        assert_string_equal(a.config, "c.ini");
        ctl_config_default(&c);
        assert_int_equal(ctl_args_apply(&a, &c), 0);
        assert_int_equal(c.timeout_ms, 250);
        assert_string_equal(c.server_name, "coord");
        assert_int_equal(a.round, 0); /* the last committed */
    }
    {
        char *old[] = {"sflctl", "model", "export", "7", "--round", "4", "out.bin"};

        assert_int_equal(ctl_args_parse(7, old, &a), 0);
        assert_int_equal(a.cmd, CTL_CMD_MODEL_EXPORT);
        assert_int_equal(a.round, 4);
    }
    {
        char *rel[] = {"sflctl", "job", "release", "3", "19"};

        assert_int_equal(ctl_args_parse(5, rel, &a), 0);
        assert_int_equal(a.cmd, CTL_CMD_JOB_RELEASE);
        assert_int_equal(a.id, 3);
        assert_int_equal(a.agent, 19);
    }
    {
        char *help[] = {"sflctl", "--bogus", "-h"};

        /* the first bad option wins; --help alone is fine */
        assert_int_equal(ctl_args_parse(3, help, &a), SFL_EINVAL);
        assert_int_equal(ctl_args_parse(2, (char *[]){"sflctl", "--help"}, &a), 0);
        assert_true(a.help);
    }
}

static void test_ctl_parse_id(void **state)
{
    static const char *const bad[] = {"", "0", "-1", "+1", " 1", "1x", "abc", "0x10",
                                      "18446744073709551616"};
    uint64_t id = 7;

    (void)state;
    assert_int_equal(ctl_parse_id("42", &id), 0);
    assert_int_equal(id, 42);
    assert_int_equal(ctl_parse_id("18446744073709551615", &id), 0);
    assert_true(id == UINT64_MAX);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        id = 7;
        assert_int_equal(ctl_parse_id(bad[i], &id), SFL_EINVAL);
        assert_int_equal(id, 7);
    }
}

/* ---- job files -------------------------------------------------------------------- */

static void test_ctl_job_file(void **state)
{
    sfl_job_spec_t w;

    (void)state;
    assert_int_equal(ctl_job_load(TEXT("j.ini", "; a comment\n"
                                                "[job small]\n"
                                                "algo = fediterht\n"
                                                "loss = logistic\n"
                                                "features = 200\n"
                                                "labels = -1,1\n"
                                                "tau = 5\n"
                                                "rounds = 3\n"
                                                "cohort = 2\n"
                                                "min_quorum = 1\n"
                                                "conditions = mains_power,wifi\n"
                                                "encoding = q8\n"
                                                "seed = 99\n"
                                                "paused = 1\n"
                                                "aggregation = ordered\n"),
                                  &w),
                     0);
    assert_string_equal(w.name, "small");
    assert_string_equal(w.algorithm, "fediterht");
    assert_string_equal(w.loss, "logistic");
    assert_int_equal(w.dimension, 200);
    assert_int_equal(w.nlabels, 2);
    assert_true(w.labels[0] == -1.0 && w.labels[1] == 1.0);
    assert_non_null(sfl_param_list_find(&w.params, "tau"));
    assert_true(sfl_param_list_find(&w.params, "tau")->value == 5);
    assert_int_equal(w.rounds, 3);
    assert_int_equal(w.cohort_size, 2);
    assert_int_equal(w.min_quorum, 1);
    assert_int_equal(w.required_conditions.n, 2);
    assert_string_equal(w.required_conditions.tag[1], "wifi");
    assert_int_equal(w.value_encoding, SFL_ENC_Q8);
    assert_true(w.seed == 99);
    assert_int_equal(w.paused, 1);
    assert_int_equal(w.ordered_aggregation, 1);
    /* the coordinator's defaults for what the file leaves out */
    assert_int_equal(w.round_deadline_ms, 60000);
    assert_int_equal(w.heartbeat_timeout_ms, 30000);
    assert_int_equal(w.max_attempts, 3);
    assert_close(w.over_selection, 0.25, 0, 0);
    /* ...and the algorithm's defaults, every parameter spelled out */
    assert_int_equal(w.params.n, 5);
    assert_true(sfl_param_list_find(&w.params, "local_steps")->value == 5);
    assert_true(sfl_param_list_find(&w.params, "lr")->value == 0.01);
}

static void test_ctl_job_file_bad(void **state)
{
    static const struct {
        const char *text, *detail;
        int rc;
    } cases[] = {
        {"", "no [job NAME] section", SFL_EINVAL},
        {"[job a]\nfeatures = 10\n[job b]\nfeatures = 10\n",
         ":4: [job b]: a job file holds one", SFL_EINVAL},
        {"[coordinator]\nlisten = :1\n", ":2: unknown section [coordinator]", SFL_EINVAL},
        {"[job a]\nfeatures = 10\ncolour = red\n", ":3: unknown key 'colour'", SFL_EINVAL},
        {"[job a]\nfeatures = ten\n", ":2: features: invalid value 'ten'", SFL_EINVAL},
        {"[job a]\nfeatures = 10\nlabels = 1,0\n", ":3: labels: want", SFL_EINVAL},
        {"[job a]\nfeatures = 10\nlabels = 0,nan\n", ":3: labels: want", SFL_EINVAL},
        {"[job a]\nfeatures = 10\npaused = yes\n", ":3: paused: want 0 or 1", SFL_EINVAL},
        {"[job a]\nname = b\n", ":2: name: the job's name is the section's", SFL_EINVAL},
        {"[job a]\nalgo = nope\n", ":2: algo: unknown algorithm 'nope' (valid: fedht, ", SFL_EINVAL},
        {"[job a]\nalgo = fedavgg\n",
         ":2: algo: unknown algorithm 'fedavgg'; did you mean 'fedavg'? (valid: fedht, ", SFL_EINVAL},
        {"[job a]\nfeatures = 10\ntau = twenty\n", "bad.ini:3: tau: invalid value 'twenty'",
         SFL_EINVAL},
        {"[job a]\nfeatures = 10\nfeatures = 11\n",
         "bad.ini:3: duplicate key 'features' (first set on line 2)", SFL_EINVAL},
        {"[job a]\nfeatures = 10\nclasses = 2\n", "[job a]: classes = 2 needs labels",
         SFL_EINVAL},
        {"[job a]\nloss = softmax\nfeatures = 10\nclasses = 3\nlabels = 0,1\n",
         "[job a]: classes = 3 but 2 labels", SFL_EINVAL},
        {"[job a]\nfeatures = 10\ntau = 50\n", "[job a]: fediterht: tau", SFL_EINVAL},
        {"[job a]\nfeatures = 10\ndeadline_ms = 9999999999\n",
         ":3: deadline_ms: invalid value '9999999999' (an integer, 0 to 2^32-1)", SFL_EINVAL},
        {"[job a]\nfeatures = 10\nconditions = Mains Power\n",
         ":3: conditions: 'Mains Power' is not a tag", SFL_EINVAL},
        {"[job a]\nrounds = 3\n", "[job a]:", SFL_EINVAL}, /* features missing */
        {"garbage \x01\x02\xff\n", ":1: malformed line", SFL_EPARSE},
        {"[job a]\nfeatures\n", ":2: malformed line", SFL_EPARSE},
    };
    char long_name[200];
    sfl_job_spec_t w;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = file("bad.ini", cases[i].text, strlen(cases[i].text));
        int rc = ctl_job_load(p, &w);

        if (rc != cases[i].rc || strstr(sfl_last_error(), cases[i].detail) == NULL)
            fail_msg("case %zu: rc %d detail '%s', want %d '%s'", i, rc, sfl_last_error(),
                     cases[i].rc, cases[i].detail);
        assert_non_null(strstr(sfl_last_error(), "bad.ini"));
    }
    /* a name longer than an INI section name may be (libinih would cut it) */
    snprintf(long_name, sizeof(long_name), "[job %0100d]\nfeatures = 10\n", 0);
    assert_int_equal(ctl_job_load(file("long.ini", long_name, strlen(long_name)), &w),
                     SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "long.ini:2: section name [job 000"));
    assert_non_null(strstr(sfl_last_error(), "longer than 48 characters"));
    snprintf(long_name, sizeof(long_name), "[job %044d]\nfeatures = 10\n", 7);
    assert_int_equal(ctl_job_load(file("long.ini", long_name, strlen(long_name)), &w), 0);
    assert_int_equal(strlen(w.name), 44);
    assert_int_equal(w.name[43], '7');
    assert_int_equal(ctl_job_load("/nonexistent/job.ini", &w), -ENOENT);
}

/* ---- output ------------------------------------------------------------------------ */

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
    jobs[0].last_samples = 400;
    jobs[0].last_train_loss = 0.123456;
    snprintf(jobs[0].loss, sizeof(jobs[0].loss), "lsq");
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)), "loss 0.1235");
    jobs[0].last_eval_samples = 80;
    jobs[0].last_eval_mse = 2.5;
    assert_string_equal(ctl_progress(&jobs[0], line, sizeof(line)),
                        "loss 0.1235, mse 2.5 (80 held out)");
    jobs[1].last_samples = 10;
    jobs[1].last_train_loss = 0.69;
    jobs[1].last_eval_samples = 20;
    jobs[1].last_eval_accuracy = 0.95;
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
    jobs[1].last_personal_accuracy = 0.975;
    assert_string_equal(ctl_progress(&jobs[1], line, sizeof(line)),
                        "loss 0.69, accuracy 0.95, pacc 0.975 (20 held out)");
    assert_string_equal(ctl_watch_line(&jobs[1], line, sizeof(line)),
                        "job 12 second-job: round 3/60 attempt 1 training, 3/4 accepted "
                        "(5 selected, quorum 3); last round loss 0.69, accuracy 0.95, "
                        "pacc 0.975 (20 held out)");
    jobs[1].last_personal_accuracy = 0;
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
    jobs[0].last_samples = jobs[1].last_samples = 0;
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
    r[1].samples = 400;
    r[1].train_loss = 0.6931471805599453;
    r[1].model_nnz = 10;
    r[1].bytes_up = 480;
    r[1].bytes_down = 1200;
    r[2] = r[1];
    r[2].round = 3;
    r[2].attempt = 0;
    r[2].opened_ms = 2700;
    r[2].committed_ms = 2900;
    r[2].eval_samples = 100;
    r[2].eval_accuracy = 0.875;
    r[2].eval_mse = 0;
    CAPTURE(out, ctl_print_history(f, &h, 1, 1000));
    assert_string_equal(out,
                        "round,objective,test_accuracy,test_mse,eval_samples,nnz,bytes_up,"
                        "bytes_down,accepted,selected,samples,attempt,round_ms,wall_ms,"
                        "personal_accuracy,privacy_iterations,privacy_spent,privacy_spent_rdp\n"
                        "1,,,n/a,,,300,,3,4,,0,500,500,n/a,,,\n"
                        "2,0.6931471806,,n/a,0,10,480,1200,4,4,400,1,1000,1600,n/a,n/a,n/a,"
                        "n/a\n"
                        "3,0.6931471806,0.875000,n/a,100,10,480,1200,4,4,400,0,200,1900,n/a,n/a,"
                        "n/a,n/a\n");
    free(out);
    /* FedMac: the agents' own models, where the round has held-out rows. */
    snprintf(h.algorithm, sizeof(h.algorithm), "fedmac");
    r[2].personal_accuracy = 0.9375;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "1,,,n/a,,,300,,3,4,,0,500,500,,,,\n"
                        "2,0.6931471806,,n/a,0,10,480,1200,4,4,400,1,1000,1600,,n/a,n/a,n/a\n"
                        "3,0.6931471806,0.875000,n/a,100,10,480,1200,4,4,400,0,200,1900,0.937500,"
                        "n/a,n/a,n/a\n");
    free(out);
    snprintf(h.loss, sizeof(h.loss), "lsq");
    r[2].eval_mse = 0.25;
    r[2].personal_accuracy = 0;
    h.rounds = r + 2;
    h.n = 1;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "3,0.6931471806,n/a,0.25,100,10,480,1200,4,4,400,0,200,1900,n/a,n/a,n/a,"
                        "n/a\n");
    free(out);
    /* a private vertical job: its ledger at each commit */
    r[2].privacy_iterations = 300;
    r[2].privacy_spent = 0.5;
    r[2].privacy_spent_rdp = 0.25;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out,
                        "3,0.6931471806,n/a,0.25,100,10,480,1200,4,4,400,0,200,1900,n/a,300,0.5,"
                        "0.25\n");
    free(out);
    /* Issue 24 item 7: a vertical round reports no loss and no rows (n/a),
     * but its model's nnz and the bytes both ways are kept and shown */
    snprintf(h.algorithm, sizeof(h.algorithm), "dpbcfw");
    memset(&r[2], 0, sizeof(r[2]));
    r[2].round = 3;
    r[2].opened_ms = 2700;
    r[2].committed_ms = 2900;
    r[2].selected = r[2].accepted = 4;
    r[2].model_nnz = 7;
    r[2].bytes_up = 480;
    r[2].bytes_down = 900;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,n/a,n/a,n/a,n/a,7,480,900,4,4,n/a,0,200,1900,n/a,n/a,n/a,n/a\n");
    free(out);
    r[2].privacy_iterations = 300;
    r[2].privacy_spent = 0.5;
    r[2].privacy_spent_rdp = 0.25;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,n/a,n/a,n/a,n/a,7,480,900,4,4,n/a,0,200,1900,n/a,300,0.5,0.25\n");
    free(out);
    /* bcfw: the block holders' objective over the job's rows, where its
     * broadcast is the margins A x */
    snprintf(h.algorithm, sizeof(h.algorithm), "bcfw");
    r[2].privacy_iterations = 0;
    r[2].samples = 200;
    r[2].train_loss = 0.125;
    CAPTURE(out, ctl_print_history(f, &h, 0, 1000));
    assert_string_equal(out, "3,0.125,n/a,n/a,n/a,7,480,900,4,4,200,0,200,1900,n/a,n/a,n/a,n/a\n");
    free(out);
}

/* ---- export bytes, atomic write ------------------------------------------------------ */

static sfl_export_t *export_roundtrip(void)
{
    sfl_spvec_t *v = NULL;
    sfl_export_t e, *got = NULL;
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_spvec_new(1000, 3, &v), 0);
    v->nnz = 3;
    v->idx[0] = 4, v->idx[1] = 70, v->idx[2] = 999;
    v->val[0] = 0.5, v->val[1] = -2.25, v->val[2] = 1e-300;
    memset(&e, 0, sizeof(e));
    e.job_id = 2;
    e.round = 9;
    snprintf(e.algorithm, sizeof(e.algorithm), "fediterht");
    snprintf(e.loss, sizeof(e.loss), "lsq");
    e.dimension = 1000;
    e.model = v;
    assert_int_equal(sfl_msg_export_pack(&e, &buf, &len), 0);
    assert_int_equal(sfl_msg_export_unpack(buf, len, NULL, &got), 0);
    sfl_msg_buf_free(buf);
    sfl_spvec_free(v);
    return got;
}

static void test_ctl_export_bytes(void **state)
{
    sfl_export_t *e = export_roundtrip();
    sfl_spvec_t *back = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(ctl_export_bytes(e, &buf, &len), 0);
    assert_int_equal(len, sfl_spcodec_size(e->model, SFL_ENC_F64));
    assert_int_equal(sfl_spcodec_decode(buf, len, 1000, 1000, &back), 0);
    assert_int_equal(back->nnz, 3);
    assert_int_equal(back->idx[2], 999);
    assert_true(back->val[1] == -2.25);
    sfl_spvec_free(back);
    sfl__free(buf);

    FAILALLOC_EACH(ctl_export_bytes(e, &buf, &len), (sfl__free(buf), buf = NULL));

    /* bytes that are not what the hash says */
    e->model_hash[0] ^= 1;
    assert_int_equal(ctl_export_bytes(e, &buf, &len), SFL_EPARSE);
    assert_detail("export: model bytes do not match model_hash");
    assert_null(buf);
    assert_int_equal(len, 0);
    sfl_msg_export_free(e);
}

/* Every --format writer, on the same checked model (dim 1000, 3 nonzeros). */
static void test_ctl_model_formats(void **state)
{
    sfl_export_t *e = export_roundtrip();
    ctl_format_t fmt;
    uint8_t *buf = NULL, *codec = NULL;
    size_t len = 0, clen = 0;

    (void)state;
    assert_int_equal(ctl_format_parse("npy", &fmt), 0);
    assert_int_equal(fmt, CTL_FORMAT_NPY);
    assert_int_equal(ctl_format_parse("csv", &fmt), SFL_EINVAL);
    assert_detail("unknown --format 'csv' (text, libsvm, npy or spcodec)");

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_TEXT, &buf, &len), 0);
    {
        const char want[] = "# sfl model: job 2, round 9, algorithm fediterht, loss lsq\n"
                            "# dimension 1000, nnz 3; lines: index (1-based, as sfl-sim "
                            "--model-out) value\n"
                            "5 0.5\n71 -2.25\n1000 1e-300\n";

        assert_int_equal(len, sizeof(want) - 1);
        assert_memory_equal(buf, want, len);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_LIBSVM, &buf, &len), 0);
    {
        const char want[] = "0 5:0.5 71:-2.25 1000:1e-300\n";

        assert_int_equal(len, sizeof(want) - 1);
        assert_memory_equal(buf, want, len);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_NPY, &buf, &len), 0);
    {
        const char hdr[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }";
        size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        double x;

        assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
        assert_int_equal((10 + hlen) % 64, 0);
        assert_int_equal(len, 10 + hlen + 1000 * 8);
        assert_memory_equal(buf + 10, hdr, sizeof(hdr) - 1);
        assert_int_equal(buf[10 + hlen - 1], '\n');
        assert_int_equal(buf[10 + sizeof(hdr) - 1], ' ');
        /* little-endian float64 at index * 8 (the host here is little-endian) */
        memcpy(&x, buf + 10 + hlen + 70 * 8, 8);
        assert_true(x == -2.25);
        memcpy(&x, buf + 10 + hlen + 999 * 8, 8);
        assert_true(x == 1e-300);
        memcpy(&x, buf + 10 + hlen + 5 * 8, 8);
        assert_true(x == 0);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_SPCODEC, &buf, &len), 0);
    assert_int_equal(ctl_export_bytes(e, &codec, &clen), 0);
    assert_int_equal(len, clen);
    assert_memory_equal(buf, codec, len);
    sfl__free(buf);
    sfl__free(codec);

    for (int k = 0; k < 4; k++)
        FAILALLOC_EACH(ctl_model_render(e, (ctl_format_t)k, &buf, &len),
                       (sfl__free(buf), buf = NULL));
    /* every format refuses a model that does not match its hash */
    e->model_hash[0] ^= 1;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ctl_model_render(e, (ctl_format_t)k, &buf, &len), SFL_EPARSE);
        assert_null(buf);
    }
    sfl_msg_export_free(e);
}

static void test_ctl_write_atomic(void **state)
{
    char path[128], tmp[140], got[16] = {0};
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"first", 5), 0);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"second", 6), 0);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, sizeof(got) - 1, f), 6);
    fclose(f);
    assert_string_equal(got, "second");
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"", 0), 0);

    /* no directory: nothing written, nothing left over */
    snprintf(path, sizeof(path), "%s/no/such/model.bin", dir);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"x", 1), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "cannot create"));
    /* the target is a directory: rename fails, the temporary file goes */
    snprintf(path, sizeof(path), "%s/adir", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_true(ctl_write_atomic(path, (const uint8_t *)"x", 1) < 0);
    assert_int_equal(access(tmp, F_OK), -1);
    {
        char huge[CTL_PATH_MAX + 16];

        memset(huge, 'a', sizeof(huge) - 1);
        huge[sizeof(huge) - 1] = '\0';
        assert_int_equal(ctl_write_atomic(huge, (const uint8_t *)"x", 1), SFL_EINVAL);
    }
}

/* ---- the client against a coordinator on the same loop --------------------------------- */

static struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    coord_t *co;
    ctl_client_t *cli;
    int stopped;
    char state[128];
} L;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    if (L.cli)
        ctl_client_interrupt(L.cli); /* the waiting call fails the test */
}

static void on_stopped(coord_t *c, void *ud)
{
    (void)c;
    (void)ud;
    L.stopped = 1;
}

static void ctl_cfg(ctl_config_t *c, const char *who, int port)
{
    ctl_config_default(c);
    snprintf(c->coordinator, sizeof(c->coordinator), "127.0.0.1:%d", port);
    snprintf(c->server_name, sizeof(c->server_name), "localhost");
    snprintf(c->ca, sizeof(c->ca), "%s/pki/ca.crt", dir);
    snprintf(c->cert, sizeof(c->cert), "%s/pki/%s.crt", dir, who);
    snprintf(c->key, sizeof(c->key), "%s/pki/%s.key", dir, who);
    c->timeout_ms = 60000; /* a failure detector, never reached when the test passes */
}

static void call_ok(const char *method, uint8_t *req, size_t len, ctl_result_t *r)
{
    char path[64];

    snprintf(path, sizeof(path), "/sfl.v1.Admin/%s", method);
    assert_int_equal(ctl_client_call(L.cli, path, req, len, r), 0);
    sfl_msg_buf_free(req);
    if (r->status != SFL_GRPC_STATUS_OK)
        fail_msg("%s: %s %s", method, sfl_grpc_status_name(r->status), r->message);
}

static void test_ctl_client(void **state)
{
    coord_config_t cc;
    ctl_config_t c;
    ctl_result_t r = {0};
    sfl_status_t *st = NULL;
    sfl_job_status_t js;
    sfl_job_spec_t spec;
    uint8_t *req = NULL;
    size_t len;
    int port, admin_port;

    (void)state;
    memset(&L, 0, sizeof(L));
    assert_int_equal(uv_loop_init(&L.loop), 0);
    uv_timer_init(&L.loop, &L.watchdog);
    uv_timer_start(&L.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    uv_unref((uv_handle_t *)&L.watchdog);
    snprintf(L.state, sizeof(L.state), "%s/state", dir);
    coord_config_default(&cc);
    assert_int_equal(coord_config_set(&cc, "listen", "127.0.0.1:0"), 0);
    assert_int_equal(coord_config_set(&cc, "admin_listen", "127.0.0.1:0"), 0);
    snprintf(cc.cert, sizeof(cc.cert), "%s/pki/coordinator/coord.crt", dir);
    snprintf(cc.key, sizeof(cc.key), "%s/pki/coordinator/coord.key", dir);
    snprintf(cc.ca, sizeof(cc.ca), "%s/pki/ca.crt", dir);
    snprintf(cc.state_dir, sizeof(cc.state_dir), "%s", L.state);
    snprintf(cc.metrics_listen, sizeof(cc.metrics_listen), "off");
    snprintf(cc.log_level, sizeof(cc.log_level), "error");
    assert_int_equal(coord_new(&L.loop, &cc, &L.co), 0);
    port = coord_port(L.co);
    admin_port = coord_admin_port(L.co);
    assert_true(admin_port > 0 && admin_port != port);

    /* an admin on admin_listen: Status, CreateJob from a job file, PauseJob,
     * ExportModel */
    ctl_cfg(&c, "admin/ops", admin_port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    call_ok("Status", req, len, &r);
    assert_int_equal(sfl_msg_status_unpack(r.resp, r.len, NULL, &st), 0);
    assert_int_equal(st->njobs, 0);
    assert_int_equal(st->connected_agents, 0);
    sfl_msg_status_free(st);

    assert_int_equal(ctl_job_load(TEXT("job.ini", "[job tiny]\nfeatures = 20\ntau = 3\n"
                                                  "rounds = 2\ncohort = 1\nmin_quorum = 1\n"),
                                  &spec),
                     0);
    assert_int_equal(sfl_msg_create_job_pack(&spec, &req, &len), 0);
    call_ok("CreateJob", req, len, &r);
    assert_int_equal(sfl_msg_job_reply_unpack(r.resp, r.len, NULL, &js), 0);
    assert_int_equal(js.job_id, 1);
    assert_string_equal(js.name, "tiny");
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    assert_int_equal(sfl_msg_job_req_pack(1, &req, &len), 0);
    call_ok("PauseJob", req, len, &r);
    assert_int_equal(sfl_msg_job_reply_unpack(r.resp, r.len, NULL, &js), 0);
    assert_int_equal(js.state, SFL_JOB_PAUSED);

    assert_int_equal(sfl_msg_export_req_pack(1, 0, &req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/ExportModel", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_FAILED_PRECONDITION);
    assert_null(r.resp);
    /* admin_listen serves the Admin service only */
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Coordinator/Heartbeat", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNIMPLEMENTED);
    assert_int_equal(ctl_client_sleep(L.cli, 20), 0);
    ctl_client_free(L.cli);
    L.cli = NULL;
    /* ... and the agents' listener still answers an admin (queued with them) */
    ctl_cfg(&c, "admin/ops", port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    call_ok("Status", req, len, &r);
    ctl_result_clear(&r);
    ctl_client_free(L.cli);
    L.cli = NULL;
    /* an agent certificate is dropped by admin_listen once its handshake ends */
    ctl_cfg(&c, "agent/a1", admin_port);
    if (ctl_client_open(&L.loop, &c, &L.cli, &r) == 0 && L.cli != NULL) {
        assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
        assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/Status", req, len, &r), 0);
        sfl_msg_buf_free(req);
        ctl_client_free(L.cli);
        L.cli = NULL;
    }
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNAVAILABLE);

    /* an agent certificate may not call Admin */
    ctl_cfg(&c, "agent/a1", port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_non_null(L.cli);
    assert_int_equal(sfl_msg_status_req_pack(&req, &len), 0);
    assert_int_equal(ctl_client_call(L.cli, "/sfl.v1.Admin/Status", req, len, &r), 0);
    sfl_msg_buf_free(req);
    assert_int_equal(r.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    assert_non_null(strstr(r.message, "admin"));
    /* an interrupted client calls nothing more */
    ctl_client_interrupt(L.cli);
    assert_int_equal(ctl_client_sleep(L.cli, 10), -ECANCELED);
    ctl_client_free(L.cli);
    L.cli = NULL;

    L.stopped = 0;
    coord_shutdown(L.co, 0, on_stopped, NULL);
    while (!L.stopped)
        uv_run(&L.loop, UV_RUN_ONCE);
    coord_free(L.co);

    /* nobody listens any more: UNAVAILABLE, no client */
    ctl_cfg(&c, "admin/ops", admin_port);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), 0);
    assert_null(L.cli);
    assert_int_equal(r.status, SFL_GRPC_STATUS_UNAVAILABLE);
    assert_non_null(strstr(r.message, "refused"));
    /* unreadable TLS files are a local failure */
    snprintf(c.ca, sizeof(c.ca), "%s/none.crt", dir);
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), SFL_EIO);
    snprintf(c.coordinator, sizeof(c.coordinator), "nohostport");
    assert_int_equal(ctl_client_open(&L.loop, &c, &L.cli, &r), SFL_EINVAL);

    uv_close((uv_handle_t *)&L.watchdog, NULL);
    uv_run(&L.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&L.loop), 0);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sfl-ctl-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_ctl: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    test_sh("sh %s init %s/pki >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/pki coord >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/pki a1 >/dev/null", PKI, dir);
    test_sh("sh %s admin %s/pki ops >/dev/null", PKI, dir);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (strncmp(dir, "/tmp/sfl-ctl-", 13) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_config),
        cmocka_unit_test(test_ctl_args),
        cmocka_unit_test(test_ctl_parse_id),
        cmocka_unit_test(test_ctl_job_file),
        cmocka_unit_test(test_ctl_job_file_bad),
        cmocka_unit_test(test_ctl_print),
        cmocka_unit_test(test_ctl_history),
        cmocka_unit_test(test_ctl_print_waiting),
        cmocka_unit_test(test_ctl_print_statistics),
        cmocka_unit_test(test_ctl_export_bytes),
        cmocka_unit_test(test_ctl_model_formats),
        cmocka_unit_test(test_ctl_write_atomic),
        cmocka_unit_test(test_ctl_client),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

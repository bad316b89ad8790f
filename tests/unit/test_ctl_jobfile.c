/* sflctl's job files (ctl/jobfile.c), good and hostile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "testutil.h"

static char dir[64]; /* temporary files */

#define TEXT(name, s) test_write_file(dir, name, s, sizeof(s) - 1)

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
        const char *p = test_write_file(dir, "bad.ini", cases[i].text, strlen(cases[i].text));
        int rc = ctl_job_load(p, &w);

        if (rc != cases[i].rc || strstr(sfl_last_error(), cases[i].detail) == NULL)
            fail_msg("case %zu: rc %d detail '%s', want %d '%s'", i, rc, sfl_last_error(),
                     cases[i].rc, cases[i].detail);
        assert_non_null(strstr(sfl_last_error(), "bad.ini"));
    }
    /* a name longer than an INI section name may be (libinih would cut it) */
    snprintf(long_name, sizeof(long_name), "[job %0100d]\nfeatures = 10\n", 0);
    assert_int_equal(ctl_job_load(test_write_file(dir, "long.ini", long_name, strlen(long_name)), &w),
                     SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "long.ini:2: section name [job 000"));
    assert_non_null(strstr(sfl_last_error(), "longer than 48 characters"));
    snprintf(long_name, sizeof(long_name), "[job %044d]\nfeatures = 10\n", 7);
    assert_int_equal(ctl_job_load(test_write_file(dir, "long.ini", long_name, strlen(long_name)), &w), 0);
    assert_int_equal(strlen(w.name), 44);
    assert_int_equal(w.name[43], '7');
    assert_int_equal(ctl_job_load("/nonexistent/job.ini", &w), -ENOENT);
}

static int group_setup(void **state)
{
    (void)state;
    return test_tmpdir(dir, sizeof(dir), "sfl-ctljob-");
}

static int group_teardown(void **state)
{
    (void)state;
    test_rmtree(dir, "sfl-ctljob-");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_job_file),
        cmocka_unit_test(test_ctl_job_file_bad),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

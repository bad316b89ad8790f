/* server/job/spec.c: a job's spec from [job] keys, its defaults, checks
 * and --help, all from sfl/wire/jobspec.def. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job/model.h"
#include "job/spec.h"
#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"

static void test_spec_keys(void **state)
{
    (void)state;
    sfl_job_spec_t s;

    coord_job_spec_default(&s);
    assert_int_equal(coord_job_spec_set(&s, "algo", "fedgradmp"), 0);
    assert_string_equal(s.algorithm, "fedgradmp");
    assert_int_equal(coord_job_spec_set(&s, "tau", "12"), 0);
    assert_true(sfl_param_list_find(&s.params, "tau")->value == 12);
    assert_int_equal(coord_job_spec_set(&s, "lr", "0.25"), 0);
    assert_true(sfl_param_list_find(&s.params, "lr")->value == 0.25);
    /* a parameter's value is checked as a number here, by its algorithm later */
    assert_int_equal(coord_job_spec_set(&s, "tau", "twenty"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "tau: invalid value 'twenty'");
    assert_int_equal(coord_job_spec_set(&s, "listn", "1"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "unknown key 'listn'");
    assert_int_equal(coord_job_spec_set(&s, "deadline_ms", "1500"), 0);
    assert_int_equal(s.round_deadline_ms, 1500);
    assert_int_equal(coord_job_spec_set(&s, "encoding", "q8"), 0);
    assert_int_equal(s.value_encoding, SFL_ENC_Q8);
    assert_int_equal(coord_job_spec_set(&s, "conditions", "mains_power,unmetered"), 0);
    assert_int_equal(s.required_conditions.n, 2);
    assert_string_equal(s.required_conditions.tag[1], "unmetered");
    /* Bad input names the key. */
    assert_int_equal(coord_job_spec_set(&s, "lr", "nan"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "lr: invalid value 'nan'");
    assert_int_equal(coord_job_spec_set(&s, "cohort", "99999999999"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "algo", "nope"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "encoding", "f16"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "aggregation", "ordered"), 0);
    assert_int_equal(s.ordered_aggregation, 1);
    assert_int_equal(coord_job_spec_set(&s, "aggregation", "streaming"), 0);
    assert_int_equal(s.ordered_aggregation, 0);
    assert_int_equal(coord_job_spec_set(&s, "aggregation", "sorted"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "conditions", "a,,b"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "bogus", "1"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "bogus"));
    /* update mode 2's keys */
    assert_int_equal(coord_job_spec_set(&s, "secure_aggregation", "1"), 0);
    assert_int_equal(s.secagg, 1);
    assert_int_equal(coord_job_spec_set(&s, "secagg_threshold", "7"), 0);
    assert_int_equal(s.sa_threshold, 7);
    assert_int_equal(coord_job_spec_set(&s, "secagg_clip", "0.5"), 0);
    assert_true(s.sa_clip == 0.5);
    assert_int_equal(coord_job_spec_set(&s, "secagg_degree", "24"), 0);
    assert_int_equal(s.sa_degree, 24);
    assert_int_equal(coord_job_spec_set(&s, "secure_aggregation", "2"), SFL_EINVAL);
    char longname[100];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(coord_job_spec_set(&s, "name", longname), SFL_EINVAL);
}

static void test_spec_check(void **state)
{
    (void)state;
    sfl_job_spec_t s;

    coord_job_spec_default(&s);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL); /* features unset */
    s.dimension = 20;
    assert_int_equal(coord_job_spec_check(&s), 0);
    /* fold mode: a streaming job only */
    assert_int_equal(coord_job_spec_set(&s, "frontend_fold", "1"), 0);
    assert_int_equal(s.frontend_fold, 1);
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_int_equal(coord_job_spec_set(&s, "aggregation", "ordered"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "frontend_fold: not with aggregation = ordered"));
    assert_int_equal(coord_job_spec_set(&s, "aggregation", "streaming"), 0);
    assert_int_equal(coord_job_spec_set(&s, "frontend_fold", "0"), 0);
    assert_int_equal(coord_job_spec_set(&s, "tau", "21"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "tau", "2.5"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "tau: must be a whole number, got 2.5");
    assert_int_equal(coord_job_spec_set(&s, "tau", "-1"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "tau: must be >= 1, got -1");
    assert_int_equal(coord_job_spec_set(&s, "tau", "5"), 0);
    assert_int_equal(coord_job_spec_set(&s, "mu", "0.1"), 0); /* fediterht has none */
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "fediterht has no parameter 'mu'"));
    memset(&s.params, 0, sizeof(s.params));
    assert_int_equal(coord_job_spec_set(&s, "tau", "5"), 0);
    s.min_quorum = 9;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    s.min_quorum = 2;
    assert_int_equal(coord_job_spec_set(&s, "loss", "softmax"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL); /* no classes */
    assert_int_equal(coord_job_spec_set(&s, "labels", "0,1,2"), 0);
    assert_int_equal(s.nlabels, 3);
    assert_int_equal(coord_job_spec_check(&s), 0);
    /* secure aggregation: an odd graph degree */
    s.min_quorum = 3;
    assert_int_equal(coord_job_spec_set(&s, "secure_aggregation", "1"), 0);
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_int_equal(coord_job_spec_set(&s, "secagg_degree", "17"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "secagg_degree: 17 is odd"));
    s.sa_degree = 0;
    /* secure aggregation per front-end group: the keys, defaults, refusals */
    assert_string_equal(s.sa_groups, "none");
    assert_int_equal(coord_job_sa_grouped(&s), 0);
    assert_int_equal(coord_job_sa_min_group(&s), COORD_SA_MIN_GROUP);
    assert_int_equal(coord_job_spec_set(&s, "secagg_groups", "frontends"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "secagg_groups: unknown 'frontends'"));
    assert_int_equal(coord_job_spec_set(&s, "secagg_groups", "frontend"), 0);
    assert_int_equal(coord_job_sa_grouped(&s), 1);
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_int_equal(coord_job_spec_set(&s, "secagg_min_group", "2"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "secagg_min_group: 2 is below 3"));
    assert_int_equal(coord_job_spec_set(&s, "secagg_min_group", "3"), 0);
    assert_int_equal(coord_job_sa_min_group(&s), 3);
    assert_int_equal(coord_job_spec_check(&s), 0);
    snprintf(s.sa_groups, sizeof(s.sa_groups), "region"); /* as from the wire */
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "secagg_groups: unknown 'region'"));
    snprintf(s.sa_groups, sizeof(s.sa_groups), "frontend");
    s.secagg = 0;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "needs secure_aggregation"));
    snprintf(s.sa_groups, sizeof(s.sa_groups), "%s", ""); /* an older job's: none */
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_int_equal(coord_job_sa_grouped(&s), 0);
}

/* standardize and standardize_eps: the keys (sfl-sim's names), eps's
 * default and range, and the jobs that refuse it: vertical (a block holder
 * sees only its columns) and, for now, secure aggregation. */
static void test_spec_standardize(void **state)
{
    (void)state;
    sfl_job_spec_t s;

    coord_job_spec_default(&s);
    s.dimension = 20;
    assert_int_equal(s.standardize, 0);
    assert_true(s.standardize_eps == SFL_STANDARDIZE_EPS);
    assert_int_equal(coord_job_spec_set(&s, "standardize", "1"), 0);
    assert_int_equal(s.standardize, 1);
    assert_int_equal(coord_job_spec_set(&s, "standardize", "yes"), SFL_EINVAL);
    assert_int_equal(coord_job_spec_set(&s, "standardize_eps", "0.5"), 0);
    assert_true(s.standardize_eps == 0.5 && coord_job_std_eps(&s) == 0.5);
    assert_int_equal(coord_job_spec_check(&s), 0);
    s.standardize_eps = 0; /* the wire's unset: the default */
    assert_true(coord_job_std_eps(&s) == SFL_STANDARDIZE_EPS);
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_int_equal(coord_job_spec_set(&s, "standardize_eps", "-1"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "standardize_eps"));
    assert_int_equal(coord_job_spec_set(&s, "standardize_eps", "inf"), SFL_EINVAL);
    s.standardize_eps = 0.001;
    s.min_quorum = 3;
    /* with secure aggregation: the bound B on every value (0: 100) */
    assert_int_equal(coord_job_spec_set(&s, "secure_aggregation", "1"), 0);
    assert_int_equal(coord_job_spec_check(&s), 0);
    assert_true(s.standardize_bound == COORD_STANDARDIZE_BOUND &&
                coord_job_std_bound(&s) == 100.0);
    assert_int_equal(coord_job_spec_set(&s, "standardize_bound", "4.5"), 0);
    assert_true(coord_job_std_bound(&s) == 4.5);
    assert_int_equal(coord_job_spec_check(&s), 0);
    s.standardize_bound = 0; /* the wire's unset: the default */
    assert_true(coord_job_std_bound(&s) == COORD_STANDARDIZE_BOUND);
    assert_int_equal(coord_job_spec_set(&s, "standardize_bound", "-2"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "standardize_bound: -2"));
    assert_int_equal(coord_job_spec_set(&s, "standardize_bound", "1e200"), 0);
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL); /* B^2 is not finite */
    assert_int_equal(coord_job_spec_set(&s, "standardize_bound", "nan"), SFL_EINVAL);
    s.standardize_bound = 0;
    s.secagg = 0;
    assert_int_equal(coord_job_spec_set(&s, "algo", "bcfw"), 0);
    s.rows = 10;
    s.cohort_size = s.min_quorum = 2;
    s.over_selection = 0;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "standardize: not supported for vertical jobs"));
    s.standardize = 0;
    assert_int_equal(coord_job_spec_check(&s), 0);
}

/* Every scalar key set by name reaches its field and crosses the wire
 * unchanged: a field the table lists is read, packed and unpacked by the
 * same row. */
static void test_spec_keys_cross_the_wire(void **state)
{
    static const struct {
        const char *key, *value;
    } set[] = {
        {"features", "31"}, {"rounds", "4"}, {"cohort", "9"}, {"overselect", "0.5"},
        {"min_quorum", "7"}, {"deadline_ms", "1234"}, {"seed", "18446744073709551615"},
        {"max_attempts", "5"}, {"paused", "1"}, {"heartbeat_timeout_ms", "4321"},
        {"max_update_norm", "2.5"}, {"max_samples", "77"}, {"rows", "12"},
        {"iterations_per_round", "13"}, {"secure_aggregation", "1"},
        {"secagg_threshold", "6"}, {"secagg_support", "40"}, {"secagg_topk", "20"},
        {"secagg_clip", "3.5"}, {"secagg_max_weight", "80"}, {"secagg_degree", "4"},
        {"standardize", "1"}, {"standardize_eps", "0.25"}, {"standardize_bound", "9"},
        {"aggregation", "ordered"}, {"encoding", "f32"}, {"labels", "-1,1"},
        {"conditions", "mains_power"}, {"loss", "logistic"}, {"algo", "fedavg"},
        {"name", "spec-test"}, {"description", "nightly retrain, owner ops"},
        {"secagg_groups", "frontend"}, {"secagg_min_group", "4"},
    };
    sfl_job_spec_t s, u;
    uint8_t *a = NULL, *b = NULL;
    size_t alen, blen;

    (void)state;
    coord_job_spec_default(&s);
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++)
        assert_int_equal(coord_job_spec_set(&s, set[i].key, set[i].value), 0);
    assert_int_equal(s.dimension, 31);
    assert_int_equal(s.heartbeat_timeout_ms, 4321);
    assert_true(s.seed == UINT64_MAX && s.sa_max_weight == 80 && s.standardize_bound == 9);
    assert_int_equal(s.ordered_aggregation, 1);
    assert_int_equal(s.value_encoding, SFL_ENC_F32);
    assert_string_equal(s.description, "nightly retrain, owner ops");
    assert_int_equal(sfl_msg_create_job_pack(&s, &a, &alen), 0);
    assert_int_equal(sfl_msg_create_job_unpack(a, alen, NULL, &u), 0);
    assert_int_equal(sfl_msg_create_job_pack(&u, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    assert_int_equal(u.rows, 12);
    assert_int_equal(u.sa_degree, 4);
    assert_true(u.over_selection == 0.5 && u.standardize_eps == 0.25);
    assert_string_equal(u.description, s.description);
    assert_string_equal(u.sa_groups, "frontend");
    assert_int_equal(u.sa_min_group, 4);
    sfl_msg_buf_free(a);
    sfl_msg_buf_free(b);
}

/* The field's older name still reads (users' files keep working); the
 * defaults are the table's; --help prints each key with its default. */
static void test_spec_alias_defaults_help(void **state)
{
    sfl_job_spec_t s;
    char *text = NULL;
    size_t n = 0;
    FILE *f;

    (void)state;
    coord_job_spec_default(&s);
    assert_string_equal(s.name, "job");
    assert_string_equal(s.algorithm, "fediterht");
    assert_int_equal(s.rounds, 10);
    assert_int_equal(s.heartbeat_timeout_ms, 30000);
    assert_true(s.standardize_eps == SFL_STANDARDIZE_EPS);
    assert_string_equal(s.description, "");
    assert_int_equal(coord_job_spec_set(&s, "heartbeat_ms", "2500"), 0);
    assert_int_equal(s.heartbeat_timeout_ms, 2500);
    assert_int_equal(coord_job_spec_set(&s, "heartbeat_ms", "x"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "heartbeat_timeout_ms: invalid value 'x'"));
    /* not a [job] key: the wire's dictionary */
    assert_int_equal(coord_job_spec_set(&s, "dictionary", "gaussian:4"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "unknown key 'dictionary'");
    f = open_memstream(&text, &n);
    assert_non_null(f);
    coord_job_spec_help(f);
    fclose(f);
    assert_non_null(strstr(text, "\n  rounds                10 "));
    assert_non_null(strstr(text, "\n  standardize_eps       0.001 "));
    assert_non_null(strstr(text, "\n  aggregation           streaming "));
    assert_non_null(strstr(text, "\n  heartbeat_ms                      older name of "
                                 "heartbeat_timeout_ms\n"));
    assert_null(strstr(text, "dictionary"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_keys),
        cmocka_unit_test(test_spec_check),
        cmocka_unit_test(test_spec_standardize),
        cmocka_unit_test(test_spec_keys_cross_the_wire),
        cmocka_unit_test(test_spec_alias_defaults_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

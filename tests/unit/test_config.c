#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static const char *pk = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static char *write_tmp(const char *text)
{
    static char path[64];
    int fd;

    snprintf(path, sizeof(path), "/tmp/sfl-agent-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_config_load_and_check(void **state)
{
    (void)state;
    agent_config_t c;
    char text[1024];

    snprintf(text, sizeof(text),
             "; an agent\n[agent]\ncoordinator = 10.0.0.1:7443\nca = ca.pem\ncert = a.pem\n"
             "key = a.key\ncoordinator_pk = %s\ndata = libsvm:/data/shard.svm\n"
             "conditions = mains_power,unmetered\nbackoff_max_ms = 30000\n"
             "log_level = warn\n", pk);
    char *path = write_tmp(text);
    agent_config_default(&c);
    assert_int_equal(agent_config_load(&c, path), 0);
    unlink(path);
    assert_string_equal(c.coordinator, "10.0.0.1:7443");
    assert_int_equal(c.nconditions, 2);
    assert_string_equal(c.conditions[0], "mains_power");
    assert_int_equal(c.backoff_max_ms, 30000);
    assert_int_equal(c.log_level, SFL_LOG_WARN);
    assert_int_equal(agent_config_check(&c), 0);
    /* Flags set keys the same way and override the file. */
    assert_int_equal(agent_config_set(&c, "coordinator", "localhost:1"), 0);
    assert_string_equal(c.coordinator, "localhost:1");
    /* log_level: the coordinator's four names, info by default */
    agent_config_default(&c);
    assert_int_equal(c.log_level, SFL_LOG_INFO);
    assert_int_equal(agent_config_known("log_level"), 1);
    assert_int_equal(agent_config_set(&c, "log_level", "debug"), 0);
    assert_int_equal(c.log_level, SFL_LOG_DEBUG);
    assert_int_equal(agent_config_set(&c, "log_level", "verbose"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "is not debug, info, warn or error"));
    assert_int_equal(c.log_level, SFL_LOG_DEBUG);
}

static void test_config_errors(void **state)
{
    (void)state;
    agent_config_t c;

    agent_config_default(&c);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "coordinator"));
    assert_int_equal(agent_config_set(&c, "bogus", "1"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "bogus"));
    assert_int_equal(agent_config_set(&c, "heartbeat_ms", "-5"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "heartbeat_ms", "5x"), SFL_EINVAL);
    /* the table's defaults, and the two set by hand */
    agent_config_default(&c);
    assert_string_equal(c.state_dir, "/var/lib/sfl-agent");
    assert_true(c.backoff_min_ms == 500 && c.backoff_max_ms == 60000 && c.heartbeat_ms == 10000 &&
                c.secagg_min_degree == 16 && c.secagg_max_colluders == AGENT_COLLUDERS_THIRD);
    /* heartbeat_ms is the older name of heartbeat_interval_ms: the same field */
    assert_int_equal(agent_config_set(&c, "heartbeat_ms", "250"), 0);
    assert_int_equal(c.heartbeat_ms, 250);
    assert_int_equal(agent_config_set(&c, "heartbeat_interval_ms", "300"), 0);
    assert_int_equal(c.heartbeat_ms, 300);
    assert_int_equal(agent_config_set(&c, "conditions", "a,,b"), SFL_EINVAL);
    char big[2000];
    memset(big, 'p', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(agent_config_set(&c, "ca", big), SFL_EINVAL);

    assert_int_equal(agent_config_set(&c, "coordinator", "nohost"), 0);
    assert_int_equal(agent_config_set(&c, "ca", "x"), 0);
    assert_int_equal(agent_config_set(&c, "cert", "x"), 0);
    assert_int_equal(agent_config_set(&c, "key", "x"), 0);
    assert_int_equal(agent_config_set(&c, "coordinator_pk", "abc"), 0);
    assert_int_equal(agent_config_set(&c, "data", "libsvm:x"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL); /* host:port */
    assert_int_equal(agent_config_set(&c, "coordinator", "h:1"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL); /* pk */
    assert_string_equal(sfl_last_error(), "coordinator_pk must be 64 hex digits; on the "
                                          "coordinator, 'sfl-coordinator --config FILE "
                                          "--public-key' prints the key to pin");
    assert_int_equal(agent_config_set(&c, "coordinator_pk", pk), 0);
    assert_int_equal(agent_config_check(&c), 0);
    /* The held-out split: a fraction in [0, 1) or a file, not both. */
    assert_int_equal(agent_config_set(&c, "eval_fraction", "1"), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "eval_fraction: '1' is not a number in [0, 1)"));
    assert_int_equal(agent_config_set(&c, "eval_fraction", "0.2x"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "eval_fraction", "nan"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "eval_fraction", "0.25"), 0);
    assert_true(c.eval_fraction == 0.25);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "eval_file", "libsvm:held.svm"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "exclude each other"));
    assert_int_equal(agent_config_set(&c, "eval_fraction", "0"), 0);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "eval_file", "held.svm"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "eval_file must be libsvm:FILE, csv:FILE or idx:IMAGES,LABELS"));
    assert_int_equal(agent_config_set(&c, "eval_file", ""), 0);

    /* vertical data, privacy budget, secure aggregation's floor */
    assert_int_equal(agent_config_set(&c, "block", "11:5"), 0);
    assert_true(c.block_first == 11 && c.block_cols == 5);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "block and ids_file go together"));
    assert_int_equal(agent_config_set(&c, "ids_file", "ids.txt"), 0);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "block", "0:5"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "block", "3"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "max_epsilon", "-1"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "max_epsilon", "2.5"), 0);
    assert_true(c.max_epsilon == 2.5);
    assert_int_equal(c.secagg_min_cohort, 3);
    assert_int_equal(c.secagg_min_threshold, 2);
    assert_int_equal(c.secagg_min_degree, 16);
    /* secagg_max_colluders: n/3 by default, a count, and nothing else */
    assert_true(c.secagg_max_colluders == AGENT_COLLUDERS_THIRD);
    assert_int_equal(agent_config_set(&c, "secagg_max_colluders", "4"), 0);
    assert_true(c.secagg_max_colluders == 4);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "secagg_max_colluders", "70000"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "secagg_max_colluders"));
    assert_int_equal(agent_config_set(&c, "secagg_max_colluders", "-1"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "secagg_max_colluders", "n/4"), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "secagg_max_colluders", "n/3"), 0);
    assert_true(c.secagg_max_colluders == AGENT_COLLUDERS_THIRD);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "secagg_min_degree", "1"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "secagg_min_degree", "32"), 0);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "secagg_min_cohort", "2"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "reveals too much"));
    assert_int_equal(agent_config_set(&c, "secagg_min_cohort", "10"), 0);
    assert_int_equal(agent_config_check(&c), 0);
    assert_int_equal(agent_config_set(&c, "secagg_test_stop", "6"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);
    assert_int_equal(agent_config_set(&c, "secagg_test_stop", "0"), 0);
    assert_int_equal(agent_config_set(&c, "data", "parquet:x"), 0);
    assert_int_equal(agent_config_check(&c), SFL_EINVAL);

    /* Files: missing, wrong section, bad value, malformed line — each names
     * the file and line. */
    assert_int_equal(agent_config_load(&c, "/nonexistent/agent.ini"), -ENOENT);
    char *p = write_tmp("[coordinator]\nx = 1\n");
    assert_int_equal(agent_config_load(&c, p), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), ":2: unknown section"));
    unlink(p);
    p = write_tmp("[agent]\n\nheartbeat_ms = soon\n");
    assert_int_equal(agent_config_load(&c, p), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), ":3: heartbeat_ms"));
    unlink(p);
    p = write_tmp("[agent]\nthis is not a key value line\n");
    assert_int_equal(agent_config_load(&c, p), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), ":2: malformed"));
    unlink(p);
}

/* Every key agent_config_set takes is a known flag, and nothing else is:
 * the flag check and the setter cannot drift apart. */
static void test_config_known_matches_set(void **state)
{
    static const char *const keys[] = {
        "coordinator", "server_name", "ca", "cert", "key", "state_dir", "coordinator_pk",
        "data", "eval_file", "eval_fraction", "conditions", "backoff_min_ms",
        "backoff_max_ms", "connect_timeout_ms", "heartbeat_interval_ms", "heartbeat_ms", "ids_file", "dp_test_noise",
        "secagg_test_stop", "secagg_min_cohort", "secagg_min_threshold", "secagg_min_degree",
        "secagg_max_colluders", "secagg_test_weight", "max_epsilon"};
    agent_config_t c;

    (void)state;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        agent_config_default(&c);
        assert_true(agent_config_known(keys[i]));
        assert_int_equal(agent_config_set(&c, keys[i], "0"), 0);
    }
    assert_false(agent_config_known("listn"));
    assert_int_equal(agent_config_set(&c, "listn", "0"), SFL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_load_and_check),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_known_matches_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* sflctl's configuration (ctl/config.c): sflctl.ini, its command line and
 * job ids. */
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
        char big[1100];

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

static int group_setup(void **state)
{
    (void)state;
    return test_tmpdir(dir, sizeof(dir), "sfl-ctlcfg-");
}

static int group_teardown(void **state)
{
    (void)state;
    test_rmtree(dir, "sfl-ctlcfg-");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_config),
        cmocka_unit_test(test_ctl_args),
        cmocka_unit_test(test_ctl_parse_id),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/* sfl/core/log.h: the one line format of the coordinator and the agent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/core/log.h"

static void write_line(FILE *f, sfl_log_level_t level, const char *event, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sfl_log_vwrite(f, level, event, fmt, ap);
    va_end(ap);
}

/* ts=YYYY-MM-DDTHH:MM:SS.mmmZ level=L event=E k=v, one line, cut at 2 KiB. */
static void test_log_line_format(void **state)
{
    FILE *f = tmpfile();
    char line[4096], big[3000];

    (void)state;
    assert_non_null(f);
    write_line(f, SFL_LOG_WARN, "disconnected", "during=%s retry_in_ms=%d", "join", 500);
    write_line(f, SFL_LOG_INFO, "stopped", NULL);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    write_line(f, SFL_LOG_DEBUG, "long", "v=%s", big);
    write_line(NULL, SFL_LOG_ERROR, "nowhere", "x=1"); /* NULL: silenced */
    rewind(f);
    assert_non_null(fgets(line, sizeof(line), f));
    assert_int_equal(strncmp(line, "ts=20", 5), 0);
    assert_int_equal(line[13], 'T');
    assert_int_equal(line[22], '.');
    assert_string_equal(line + 26, "Z level=warn event=disconnected during=join retry_in_ms=500\n");
    assert_non_null(fgets(line, sizeof(line), f));
    assert_string_equal(line + 26, "Z level=info event=stopped\n");
    assert_non_null(fgets(line, sizeof(line), f));
    assert_int_equal(strlen(line), 2048); /* 2047 bytes and the newline */
    assert_null(fgets(line, sizeof(line), f));
    fclose(f);
}

static void test_log_levels(void **state)
{
    sfl_log_level_t l = SFL_LOG_ERROR;
    static const char *const names[] = {"debug", "info", "warn", "error"};

    (void)state;
    assert_int_equal(sfl_log_get_level(), SFL_LOG_INFO); /* the default */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sfl_log_level_parse(names[i], &l), 0);
        assert_int_equal(l, (sfl_log_level_t)i);
        assert_string_equal(sfl_log_level_name(l), names[i]);
    }
    assert_int_equal(sfl_log_level_parse("INFO", &l), SFL_EINVAL);
    assert_int_equal(sfl_log_level_parse("", &l), SFL_EINVAL);
    assert_int_equal(sfl_log_level_parse(NULL, &l), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "is not debug, info, warn or error"));
    assert_int_equal(l, SFL_LOG_ERROR);
    assert_string_equal(sfl_log_level_name((sfl_log_level_t)7), "?");
    sfl_log_set_level(SFL_LOG_WARN);
    assert_int_equal(sfl_log_get_level(), SFL_LOG_WARN);
    sfl_log_set_level(SFL_LOG_INFO);
}

static void test_log_quote(void **state)
{
    char q[64];

    (void)state;
    assert_string_equal(sfl_log_quote("plain", q, sizeof(q)), "plain");
    assert_string_equal(sfl_log_quote("a \"b\"\n", q, sizeof(q)), "\"a \\\"b\\\"\\x0a\"");
    assert_string_equal(sfl_log_quote("", q, sizeof(q)), "\"\"");
    assert_string_equal(sfl_log_quote(NULL, q, sizeof(q)), "\"\"");
    assert_string_equal(sfl_log_quote("a=b", q, sizeof(q)), "\"a=b\"");
    assert_string_equal(sfl_log_quote("\xc3\xa9", q, sizeof(q)), "\"\\xc3\\xa9\"");
    assert_string_equal(sfl_log_quote("\x1b[2J", q, 7), "\"\\x1b\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_line_format),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_log_quote),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

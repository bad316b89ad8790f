#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sfl/core/ini.h"

/* What the callback saw, "section/key=value;" per pair, and a key that
 * it refuses. */
typedef struct seen {
    char log[4096];
    size_t n;
    int calls;
} seen_t;

static int record(void *ud, const char *section, const char *key, const char *value)
{
    seen_t *s = ud;

    s->calls++;
    if (strcmp(key, "tau") == 0 && strcmp(value, "twenty") == 0)
        return sfl__fail(SFL_EINVAL, "tau: invalid value '%s'", value);
    if (strcmp(section, "coordinator") != 0 && strcmp(section, "s") != 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s]", section);
    if (strcmp(key, "listn") == 0)
        return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
    if (s->n < sizeof(s->log) / 2)
        s->n += (size_t)snprintf(s->log + s->n, sizeof(s->log) - s->n, "%s/%s=%s;", section,
                                 key, value);
    return 0;
}

static int parse(const char *text, seen_t *s)
{
    memset(s, 0, sizeof(*s));
    return sfl_ini_parse_buffer("c.ini", text, strlen(text), record, s);
}

static void assert_error(const char *want)
{
    if (strcmp(sfl_last_error(), want) != 0)
        fail_msg("detail '%s', want '%s'", sfl_last_error(), want);
}

static void test_ini_pairs_in_order(void **state)
{
    seen_t s;

    (void)state;
    assert_int_equal(parse("; comment\n# another\n[s]\na = 1\nb: two words ; inline\n"
                           "  c = indented\n\n[coordinator]\r\nlisten = :7443\r\nempty =\n",
                           &s),
                     0);
    assert_string_equal(s.log, "s/a=1;s/b=two words;s/c=indented;coordinator/listen=:7443;"
                               "coordinator/empty=;");
    /* no newline at the end, and an empty input */
    assert_int_equal(parse("[s]\nk = v", &s), 0);
    assert_string_equal(s.log, "s/k=v;");
    assert_int_equal(parse("", &s), 0);
    assert_int_equal(s.calls, 0);
}

/* The callback's detail is prefixed with file and line; parsing stops. */
static void test_ini_callback_error_names_line(void **state)
{
    seen_t s;

    (void)state;
    assert_int_equal(parse("[coordinator]\nlisten = :1\n\n\n\n\n\n\nlistn = :2\nlisten = :3\n", &s),
                     SFL_EINVAL);
    assert_error("c.ini:9: unknown key 'listn'");
    assert_int_equal(s.calls, 2);
    assert_int_equal(parse("[s]\ntau = twenty\n", &s), SFL_EINVAL);
    assert_error("c.ini:2: tau: invalid value 'twenty'");
}

static void test_ini_unknown_section(void **state)
{
    seen_t s;

    (void)state;
    assert_int_equal(parse("[s]\na = 1\n[coordnator]\nlisten = :1\n", &s), SFL_EINVAL);
    assert_error("c.ini:4: unknown section [coordnator]");
    /* keys before any section are in section "" */
    assert_int_equal(parse("a = 1\n", &s), SFL_EINVAL);
    assert_error("c.ini:1: unknown section []");
}

static void test_ini_duplicate_key(void **state)
{
    seen_t s;

    (void)state;
    assert_int_equal(parse("[s]\na = 1\nb = 2\n[coordinator]\na = 3\n[s]\nA = 4\na = 5\n", &s),
                     SFL_EINVAL);
    assert_error("c.ini:8: duplicate key 'a' (first set on line 2)");
    /* many keys: the set grows */
    {
        char text[40000];
        size_t n = (size_t)snprintf(text, sizeof(text), "[s]\n");

        for (int i = 0; i < 2000; i++)
            n += (size_t)snprintf(text + n, sizeof(text) - n, "k%d = %d\n", i, i);
        assert_int_equal(parse(text, &s), 0);
        assert_int_equal(s.calls, 2000);
        snprintf(text + n, sizeof(text) - n, "k1234 = again\n");
        assert_int_equal(parse(text, &s), SFL_EINVAL);
        assert_error("c.ini:2002: duplicate key 'k1234' (first set on line 1236)");
    }
}

static void test_ini_malformed(void **state)
{
    static const struct {
        const char *text, *detail;
    } cases[] = {
        {"[s]\nno equals sign\n", "c.ini:2: malformed line"},
        {"[s]\n = 1\n", "c.ini:2: no key before '='"},
        {"[s\na = 1\n", "c.ini:1: malformed line"},
        {"[s]\na = 1\ngarbage \x01\x02\xff\n", "c.ini:3: malformed line"},
        /* the syntax error comes first, the callback's error after it */
        {"[s]\nbad line\nlistn = 1\n", "c.ini:2: malformed line"},
        /* a truncated file: the last line is cut in its header */
        {"[s]\na = 1\n[coordi", "c.ini:3: malformed line"},
    };
    seen_t s;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse(cases[i].text, &s);

        if (rc != SFL_EPARSE || strncmp(sfl_last_error(), cases[i].detail,
                                        strlen(cases[i].detail)) != 0)
            fail_msg("case %zu: rc %d '%s', want '%s'", i, rc, sfl_last_error(), cases[i].detail);
    }
    /* a NUL byte is refused, never a silent end of the line */
    assert_int_equal(sfl_ini_parse_buffer("c.ini", "[s]\na = 1\0x\nb = 2\n", 16, record, &s),
                     SFL_EPARSE);
    assert_error("c.ini:2: NUL byte in the line");
}

/* Lines libinih would cut, section names it would cut, and files over
 * the limit are errors. */
static void test_ini_oversized(void **state)
{
    char text[1024];
    seen_t s;
    char *big;

    (void)state;
    snprintf(text, sizeof(text), "[s]\npath = /%0197d\n", 0);
    assert_int_equal(parse(text, &s), SFL_ELIMIT);
    assert_error("c.ini:2: line longer than 198 characters");
    /* 198 characters fit */
    snprintf(text, sizeof(text), "[s]\npath = /%0190d\n", 0);
    assert_int_equal(strlen(text), 4 + 198 + 1);
    assert_int_equal(parse(text, &s), 0);
    /* leading blanks do not count */
    snprintf(text, sizeof(text), "[s]\n%20spath = /%0190d\n", "", 0);
    assert_int_equal(parse(text, &s), 0);
    snprintf(text, sizeof(text), "[s%048d]\na = 1\n", 0);
    assert_int_equal(parse(text, &s), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "c.ini:2: section name [s000"));
    big = malloc(SFL_INI_MAX_BYTES + 10);
    assert_non_null(big);
    memset(big, ';', SFL_INI_MAX_BYTES + 10);
    for (size_t i = 100; i < SFL_INI_MAX_BYTES + 10; i += 100)
        big[i] = '\n';
    assert_int_equal(sfl_ini_parse_buffer("big.ini", big, SFL_INI_MAX_BYTES + 10, record, &s),
                     SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "file larger than 1048576 bytes"));
    free(big);
}

static void test_ini_file(void **state)
{
    char path[] = "/tmp/sfl-ini-XXXXXX";
    const char *text = "[s]\na = 1\nb = 2\nb = 3\n";
    char want[64];
    seen_t s;
    int fd;

    (void)state;
    memset(&s, 0, sizeof(s));
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(sfl_ini_parse_file(path, record, &s), SFL_EINVAL);
    snprintf(want, sizeof(want), "%s:4: duplicate key 'b' (first set on line 3)", path);
    assert_error(want);
    unlink(path);
    assert_int_equal(sfl_ini_parse_file(path, record, &s), -ENOENT);
    snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
    assert_error(want);
    /* said once, whatever prints it */
    assert_string_equal(sfl_error_message(-ENOENT), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ini_pairs_in_order),
        cmocka_unit_test(test_ini_callback_error_names_line),
        cmocka_unit_test(test_ini_unknown_section),
        cmocka_unit_test(test_ini_duplicate_key),
        cmocka_unit_test(test_ini_malformed),
        cmocka_unit_test(test_ini_oversized),
        cmocka_unit_test(test_ini_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

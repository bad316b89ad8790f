/* The text readers' shared helpers (libsfl/src/data/readfile.h). The
 * readers themselves are tested through their public API in test_libsvm.c
 * and test_csv.c; this covers the helpers' own edge cases. */
#define _GNU_SOURCE /* F_SETPIPE_SZ */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/readfile.h"
#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "testutil.h"

/* sfl__parse_number on s[0..n) from an exact-size heap copy with no
 * terminator, so ASan catches a read past the token. */
static int parse_n(const char *s, size_t n, double *v)
{
    char *copy = exact_copy(s, n);
    int r = sfl__parse_number(copy, n, v);
    free(copy);
    return r;
}

static int parse(const char *s, double *v)
{
    return parse_n(s, strlen(s), v);
}

static void expect_number(const char *s, double want)
{
    double v = -12345.0;
    int r = parse(s, &v);

    if (r != SFL__NUM_OK)
        fail_msg("'%s': result %d, want OK", s, r);
    if (memcmp(&v, &want, sizeof(v)) != 0) /* also tells -0 from 0 */
        fail_msg("'%s': %.17g, want %.17g", s, v, want);
}

static void expect_refused(const char *s, int want)
{
    double v;
    int r = parse(s, &v);

    if (r != want)
        fail_msg("'%s': result %d, want %d", s, r, want);
}

static void test_readfile_parse_number_accepts(void **state)
{
    (void)state;
    expect_number("0", 0.0);
    expect_number("-0", -0.0);
    expect_number("-1.5", -1.5);
    expect_number("+2", 2.0);
    expect_number(".5", 0.5);
    expect_number("5.", 5.0);
    expect_number("1e-3", 1e-3);
    expect_number("1E+3", 1000.0);
    expect_number("00012", 12.0);
    /* C99 hex floats are accepted (strtod syntax, like LibSVM's own
     * reader): exact binary values, finite. */
    expect_number("0x1p3", 8.0);
    expect_number("-0X1.8P-1", -0.75);
    expect_number("0x10", 16.0);
    /* Underflow is not an error: the nearest double (subnormal or 0). */
    expect_number("4.9406564584124654e-324", 4.9406564584124654e-324);
    expect_number("1e-400", 0.0);
    expect_number("1.7976931348623157e308", 1.7976931348623157e308);

    /* Only s[0..n) is read: the rest of a line is not part of the token. */
    double v = 0;
    assert_int_equal(parse_n("12345", 2, &v), SFL__NUM_OK);
    assert_close(v, 12.0, 0, 0);
    assert_int_equal(parse_n("1.5 2:3", 3, &v), SFL__NUM_OK);
    assert_close(v, 1.5, 0, 0);

    /* The longest accepted token: SFL__NUM_MAX bytes. */
    char big[SFL__NUM_MAX + 2];
    memset(big, '0', sizeof(big));
    big[0] = '1';
    big[1] = '.';
    assert_int_equal(parse_n(big, SFL__NUM_MAX, &v), SFL__NUM_OK);
    assert_close(v, 1.0, 0, 0);
}

static void test_readfile_parse_number_refuses(void **state)
{
    (void)state;
    /* Not numbers at all, or not all of the token. */
    expect_refused("", SFL__NUM_BAD);
    expect_refused(" 1", SFL__NUM_BAD);
    expect_refused("\t1", SFL__NUM_BAD);
    expect_refused("1 ", SFL__NUM_BAD);
    expect_refused("1x", SFL__NUM_BAD);
    expect_refused("x1", SFL__NUM_BAD);
    expect_refused("--1", SFL__NUM_BAD);
    expect_refused("1e", SFL__NUM_BAD);
    expect_refused("e5", SFL__NUM_BAD);
    expect_refused("1,5", SFL__NUM_BAD);
    expect_refused("1.2.3", SFL__NUM_BAD);
    expect_refused("0x", SFL__NUM_BAD);
    expect_refused("0xg", SFL__NUM_BAD);
    expect_refused("+", SFL__NUM_BAD);
    expect_refused(".", SFL__NUM_BAD);
    /* A NUL inside the token must not end it early. */
    double v;
    assert_int_equal(parse_n("1\0", 2, &v), SFL__NUM_BAD);
    assert_int_equal(parse_n("\0" "1", 2, &v), SFL__NUM_BAD);

    /* Numbers, but not finite ones. */
    expect_refused("nan", SFL__NUM_NONFINITE);
    expect_refused("NaN", SFL__NUM_NONFINITE);
    expect_refused("-nan", SFL__NUM_NONFINITE);
    expect_refused("nan(123)", SFL__NUM_NONFINITE);
    expect_refused("inf", SFL__NUM_NONFINITE);
    expect_refused("-Infinity", SFL__NUM_NONFINITE);
    expect_refused("1e999", SFL__NUM_NONFINITE);
    expect_refused("-1e309", SFL__NUM_NONFINITE);
    expect_refused("1.8e308", SFL__NUM_NONFINITE);
    expect_refused("0x1p99999", SFL__NUM_NONFINITE);

    /* Too long, whatever it holds: refused before strtod sees it. */
    char big[300];
    memset(big, '1', sizeof(big));
    assert_int_equal(parse_n(big, SFL__NUM_MAX + 1, &v), SFL__NUM_LONG);
    assert_int_equal(parse_n(big, sizeof(big), &v), SFL__NUM_LONG);
    memset(big, ' ', sizeof(big));
    assert_int_equal(parse_n(big, SFL__NUM_MAX + 1, &v), SFL__NUM_LONG);
}

static void test_readfile_excerpt(void **state)
{
    (void)state;
    char out[SFL__EXCERPT_BUF];
    char s[SFL__EXCERPT_MAX + 10];

    assert_string_equal(sfl__excerpt(out, "", 0), "");
    assert_string_equal(sfl__excerpt(out, "2:abc", 5), "2:abc");
    assert_string_equal(sfl__excerpt(out, "a\rb\033c\0d\x80", 8), "a?b?c?d?");
    /* Exactly SFL__EXCERPT_MAX bytes fit; one more is cut with "...". */
    memset(s, 'x', sizeof(s));
    assert_int_equal(strlen(sfl__excerpt(out, s, SFL__EXCERPT_MAX)), SFL__EXCERPT_MAX);
    sfl__excerpt(out, s, SFL__EXCERPT_MAX + 1);
    assert_int_equal(strlen(out), SFL__EXCERPT_MAX + 3);
    assert_string_equal(out + SFL__EXCERPT_MAX, "...");
    sfl__excerpt(out, s, sizeof(s));
    assert_int_equal(strlen(out), SFL__EXCERPT_BUF - 1);
}

static void test_readfile_line_bounds(void **state)
{
    (void)state;
    /* Lines: "a" (CRLF), "" , "\r" alone -> "", "bc" without newline. */
    const char buf[] = "a\r\n\n\r\nbc";
    size_t len = sizeof(buf) - 1, end, content;
    const size_t want_end[] = {2, 3, 5, 8}, want_content[] = {1, 3, 4, 8};
    size_t pos = 0, k = 0;

    while (pos < len) {
        assert_true(k < 4);
        sfl__line_bounds(buf, len, pos, &end, &content);
        assert_int_equal(end, want_end[k]);
        assert_int_equal(content, want_content[k]);
        pos = end + 1;
        k++;
    }
    assert_int_equal(k, 4);
    /* A lone '\r' at the end of the buffer is still stripped. */
    sfl__line_bounds("x\r", 2, 0, &end, &content);
    assert_int_equal(end, 2);
    assert_int_equal(content, 1);
}

static void test_readfile_check_line(void **state)
{
    (void)state;
    assert_int_equal(sfl__check_line("f", 1, "12345", 5, 5), 0);
    assert_int_equal(sfl__check_line("f", 1, "", 0, 0), 0);
    assert_int_equal(sfl__check_line("f", 3, "123456", 6, 5), SFL_ELIMIT);
    assert_detail("f:3:6: line longer than 5 bytes");
    assert_int_equal(sfl__check_line("f", 2, "1 2\0", 4, 5), SFL_EPARSE);
    assert_detail("f:2:4: NUL byte in text");
    /* Length is checked first, so a long line with a NUL is ELIMIT. */
    assert_int_equal(sfl__check_line("f", 1, "\0" "23456", 6, 5), SFL_ELIMIT);
}

static void test_readfile_read_bound(void **state)
{
    (void)state;
    sfl_read_limits_t lim;

    sfl_read_limits_default(&lim);
    assert_int_equal(sfl__read_bound(NULL, 0), sfl__read_bound(&lim, 0));
    lim.max_rows = 3;
    lim.max_line = 9;
    assert_int_equal(sfl__read_bound(&lim, 0), 30);
    assert_int_equal(sfl__read_bound(&lim, 1), 40);
    lim.max_line = 0;
    assert_int_equal(sfl__read_bound(&lim, 0), 3);
    /* Saturates instead of wrapping. */
    lim.max_line = SIZE_MAX;
    assert_int_equal(sfl__read_bound(&lim, 0), SIZE_MAX - 1);
    lim.max_line = SIZE_MAX / 2;
    assert_int_equal(sfl__read_bound(&lim, 1), SIZE_MAX - 1);
    lim.max_rows = UINT32_MAX;
    lim.max_line = 1;
    /* 2^33 - 2 lines of 2 bytes: fits a 64-bit size_t, not a 32-bit one. */
    assert_int_equal(sfl__read_bound(&lim, UINT32_MAX),
                     SIZE_MAX > UINT32_MAX ? (size_t)UINT32_MAX * 4 : SIZE_MAX - 1);
}

/* A private directory for the file tests (removed by the caller). */
static char tmpdir[64];

static const char *make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/sfl_test_readfile_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return tmpdir;
}

static void write_file(const char *path, const char *s, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, n), (ssize_t)n);
    close(fd);
}

static void test_readfile_read_regular(void **state)
{
    (void)state;
    const char *dir = make_tmpdir();
    char path[128], want[256];
    char *buf = NULL;
    size_t len = 99;
    /* NUL bytes and no final newline: read_file does not interpret text. */
    const char text[] = "1 1:2\n\0x\r\n-1";
    size_t n = sizeof(text) - 1;

    snprintf(path, sizeof(path), "%s/data", dir);
    write_file(path, text, n);
    assert_int_equal(sfl__read_file(path, SIZE_MAX, &buf, &len), 0);
    assert_int_equal(len, n);
    assert_memory_equal(buf, text, n);
    sfl__free(buf);
    buf = NULL;

    /* Exactly max bytes is fine, one more is refused before reading. */
    assert_int_equal(sfl__read_file(path, n, &buf, &len), 0);
    assert_int_equal(len, n);
    sfl__free(buf);
    buf = NULL;
    assert_int_equal(sfl__read_file(path, n - 1, &buf, &len), SFL_ELIMIT);
    snprintf(want, sizeof(want), "%s: %zu bytes is more than the read limits allow (%zu)", path,
             n, n - 1);
    assert_detail(want);
    assert_null(buf);

    FAILALLOC_EACH(sfl__read_file(path, 1000, &buf, &len), (sfl__free(buf), buf = NULL));

    /* An empty file gives an empty, freeable buffer. */
    write_file(path, "", 0);
    assert_int_equal(sfl__read_file(path, 0, &buf, &len), 0);
    assert_int_equal(len, 0);
    assert_non_null(buf);
    sfl__free(buf);
    buf = NULL;

    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_readfile_read_errors(void **state)
{
    (void)state;
    const char *dir = make_tmpdir();
    char path[128];
    char *buf = NULL;
    size_t len = 0;

    snprintf(path, sizeof(path), "%s/missing", dir);
    assert_int_equal(sfl__read_file(path, 1000, &buf, &len), -ENOENT);
    assert_detail(path);
    assert_int_equal(sfl__read_file(dir, 1000, &buf, &len), -EISDIR);
    assert_detail(dir);
    snprintf(path, sizeof(path), "%s/missing/x", dir);
    assert_int_equal(sfl__read_file(path, 1000, &buf, &len), -ENOENT);
    assert_int_equal(sfl__read_file("", 1000, &buf, &len), -ENOENT);
    assert_null(buf);
    assert_int_equal(rmdir(dir), 0);
}

/* Reads n bytes of data through a pipe, the path that grows its buffer
 * because the size is not known in advance. */
static int read_pipe(const char *data, size_t n, size_t max, char **buf, size_t *len)
{
    int fds[2];
    char path[64];

    assert_int_equal(pipe(fds), 0);
    /* The whole payload must fit in the pipe: nobody reads while we write. */
    if (n > 65536 && fcntl(fds[1], F_SETPIPE_SZ, (int)n) < (int)n)
        skip();
    assert_int_equal(write(fds[1], data, n), (ssize_t)n);
    close(fds[1]);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
    int rc = sfl__read_file(path, max, buf, len);
    close(fds[0]);
    return rc;
}

static void test_readfile_read_stream(void **state)
{
    (void)state;
    size_t n = 200000, len = 0;
    char *data = malloc(n), *buf = NULL;

    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 26);

    assert_int_equal(read_pipe(data, 1000, 1000, &buf, &len), 0);
    assert_int_equal(len, 1000);
    assert_memory_equal(buf, data, 1000);
    sfl__free(buf);
    buf = NULL;
    assert_int_equal(read_pipe(data, 1000, 999, &buf, &len), SFL_ELIMIT);
    assert_detail("/proc/self/fd/");
    assert_null(buf);

    /* More than the first 64 KiB chunk: the buffer grows, twice. */
    assert_int_equal(read_pipe(data, n, n, &buf, &len), 0);
    assert_int_equal(len, n);
    assert_memory_equal(buf, data, n);
    sfl__free(buf);
    buf = NULL;
    FAILALLOC_EACH(read_pipe(data, n, n, &buf, &len), (sfl__free(buf), buf = NULL));

    /* An endless device stops at the bound instead of eating memory. */
    assert_int_equal(sfl__read_file("/dev/zero", 100000, &buf, &len), SFL_ELIMIT);
    assert_int_equal(sfl__read_file("/dev/zero", 10, &buf, &len), SFL_ELIMIT);
    assert_null(buf);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readfile_parse_number_accepts),
        cmocka_unit_test(test_readfile_parse_number_refuses),
        cmocka_unit_test(test_readfile_excerpt),
        cmocka_unit_test(test_readfile_line_bounds),
        cmocka_unit_test(test_readfile_check_line),
        cmocka_unit_test(test_readfile_read_bound),
        cmocka_unit_test(test_readfile_read_regular),
        cmocka_unit_test(test_readfile_read_errors),
        cmocka_unit_test(test_readfile_read_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

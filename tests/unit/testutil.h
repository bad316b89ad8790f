/* Test helpers shared by the unit suites (header only). */
#ifndef SFL_TEST_TESTUTIL_H
#define SFL_TEST_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/error.h"

/* Fails unless |a - b| <= atol + rtol |b| (b is the expected value). Equal
 * values pass, so do equal infinities; a NaN never does. cmocka has no
 * floating-point assertion; a macro keeps the caller's file and line. */
#define assert_close(a, b, rtol, atol)                                         \
    do {                                                                       \
        double ac_a_ = (a), ac_b_ = (b);                                       \
        double ac_tol_ = (double)(atol) + (double)(rtol) * fabs(ac_b_);        \
        if (!(ac_a_ == ac_b_ || fabs(ac_a_ - ac_b_) <= ac_tol_))               \
            fail_msg("%s = %.17g, expected %.17g (rtol %g, atol %g)", #a,      \
                     ac_a_, ac_b_, (double)(rtol), (double)(atol));            \
    } while (0)

/* Fails unless the detail of the last error, sfl_last_error(), starts with
 * prefix. A macro for the same reason as assert_close. */
#define assert_detail(prefix)                                                  \
    do {                                                                       \
        const char *ad_p_ = (prefix), *ad_d_ = sfl_last_error();               \
        if (strncmp(ad_d_, ad_p_, strlen(ad_p_)) != 0)                         \
            fail_msg("detail '%s' does not start with '%s'", ad_d_, ad_p_);    \
    } while (0)

/* Fails unless a reader given s[0..n) returned code, left its output NULL
 * and explained itself with a detail starting with detail. */
static inline void check_read_failed(const char *s, size_t n, int rc, const void *out, int code,
                                     const char *detail)
{
    if (rc != code)
        fail_msg("input '%.*s': rc %d (%s), want %d; detail '%s'", (int)n, s, rc,
                 sfl_strerror(rc), code, sfl_last_error());
    assert_null(out);
    assert_detail(detail);
}

/* An exact-size heap copy of s[0..n) with no terminator, so ASan catches a
 * parser reading past the end. Free with free(). */
static inline char *exact_copy(const char *s, size_t n)
{
    char *copy = malloc(n ? n : 1);

    assert_non_null(copy);
    memcpy(copy, s, n);
    return copy;
}

/* Runs a shell command built like printf; the test fails if it does not
 * exit 0 (certificates from deploy/pki/sfl-pki, for example). */
static inline void test_sh(const char *fmt, ...) SFL_PRINTF(1, 2);
static inline void test_sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* A fresh directory /tmp/PREFIXXXXXXX into dir[0..cap); -1 if it cannot be
 * made (for a group setup). */
static inline int test_tmpdir(char *dir, size_t cap, const char *prefix)
{
    snprintf(dir, cap, "/tmp/%sXXXXXX", prefix);
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes a directory test_tmpdir made with the same prefix (and nothing
 * else: an unset dir is left alone). */
static inline void test_rmtree(const char *dir, const char *prefix)
{
    size_t n = strlen(prefix);

    if (strncmp(dir, "/tmp/", 5) == 0 && strncmp(dir + 5, prefix, n) == 0)
        test_sh("rm -rf '%s'", dir);
}

/* Writes text[0..len) to dir/name and returns the path (a static buffer,
 * valid until the next call). */
static inline const char *test_write_file(const char *dir, const char *name, const char *text,
                                          size_t len)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    return path;
}

#endif

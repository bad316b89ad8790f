#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/core/error.h"

static void test_error_strerror_codes(void **state)
{
    (void)state;
    assert_string_equal(sfl_strerror(0), "success");
    assert_string_equal(sfl_strerror(SFL_EPARSE), "malformed input");
    assert_string_equal(sfl_strerror(SFL_ENOMEM), "out of memory");
    /* -errno passes through to the system's text. */
    assert_string_equal(sfl_strerror(-ENOENT), strerror(ENOENT));
    assert_string_equal(sfl_strerror(-99999), "unknown error");
    assert_string_equal(sfl_strerror(5), "unknown error");
}

static void test_error_detail(void **state)
{
    (void)state;
    sfl__clear_error();
    assert_string_equal(sfl_last_error(), "");
    assert_int_equal(sfl__fail(SFL_EINVAL, "tau %d > d %d", 5, 3), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "tau 5 > d 3");
    /* Over-long details are truncated, never overflow. */
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    (void)sfl__fail(SFL_EINVAL, "%s", big);
    assert_true(strlen(sfl_last_error()) < 600);
}

/* The system's reason is said once: appended to a detail that lacks it,
 * not to one that has it; sfl codes show the detail alone. */
static void test_error_message_says_reason_once(void **state)
{
    char want[256];

    (void)state;
    (void)sfl__fail(-ENOENT, "/x/data.svm: %s", strerror(ENOENT));
    snprintf(want, sizeof(want), "/x/data.svm: %s", strerror(ENOENT));
    assert_string_equal(sfl_error_message(-ENOENT), want);
    (void)sfl__fail(-EACCES, "state_dir /x: cannot create");
    snprintf(want, sizeof(want), "state_dir /x: cannot create: %s", strerror(EACCES));
    assert_string_equal(sfl_error_message(-EACCES), want);
    /* libuv's wording of the same reason, in lower case */
    (void)sfl__fail(-EADDRINUSE, "listen 127.0.0.1:7443: address already in use");
    assert_string_equal(sfl_error_message(-EADDRINUSE),
                        "listen 127.0.0.1:7443: address already in use");
    (void)sfl__fail(SFL_EINVAL, "c.ini:9: unknown key 'listn'");
    assert_string_equal(sfl_error_message(SFL_EINVAL), "c.ini:9: unknown key 'listn'");
    sfl__clear_error();
    assert_string_equal(sfl_error_message(SFL_ENOMEM), "out of memory");
}

/* sfl__fail takes its code before formatting (errno survives), formats
 * through a copy (sfl_last_error() may be an argument), and sfl__wrap puts
 * context before the callee's detail. */
static void test_error_fail_and_wrap(void **state)
{
    (void)state;

    errno = ENOENT;
    assert_int_equal(sfl__fail(-errno, "x: %s", strerror(errno)), -ENOENT);
    assert_string_equal(sfl_last_error(), "x: No such file or directory");
    (void)sfl__fail(SFL_EPARSE, "data.svm:3:1: bad");
    assert_int_equal(sfl__fail(SFL_EPARSE, "reading %s", sfl_last_error()), SFL_EPARSE);
    assert_string_equal(sfl_last_error(), "reading data.svm:3:1: bad");
    assert_int_equal(sfl__wrap(SFL_EINVAL, "task %d", 7), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "task 7: reading data.svm:3:1: bad");
    sfl__clear_error();
    assert_int_equal(sfl__wrap(SFL_EIO, "alone"), SFL_EIO);
    assert_string_equal(sfl_last_error(), "alone");
    /* A long context keeps a terminated detail. */
    char big[600];
    memset(big, 'c', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    (void)sfl__fail(SFL_EIO, "inner");
    (void)sfl__wrap(SFL_EIO, "%s", big);
    assert_true(strlen(sfl_last_error()) < 512);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_fail_and_wrap),
        cmocka_unit_test(test_error_strerror_codes),
        cmocka_unit_test(test_error_detail),
        cmocka_unit_test(test_error_message_says_reason_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

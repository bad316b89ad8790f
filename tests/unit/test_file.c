/* Whole files: atomic replace and bounded read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfl/core/error.h"
#include "sfl/core/file.h"

static char dir[] = "/tmp/sfl-test-file-XXXXXX";

static int entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_file_atomic_and_read(void **state)
{
    (void)state;
    char path[128];
    uint8_t *b;
    size_t n;
    struct stat st;
    mode_t old = umask(0);

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/state.bin", dir);
    assert_int_equal(sfl_file_read(path, 100, &b, &n), -ENOENT);
    assert_null(b);
    assert_int_equal(sfl_file_write_atomic(path, "first", 5), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* whatever the umask */
    assert_int_equal(sfl_file_write_atomic(path, "second!", 7), 0);
    assert_int_equal(entries(), 1); /* no temporary left behind */
    assert_int_equal(sfl_file_read(path, 100, &b, &n), 0);
    assert_int_equal(n, 7);
    assert_memory_equal(b, "second!", 8); /* NUL after the last byte */
    sfl_file_free(b, n);
    /* Over the bound: refused before reading. */
    assert_int_equal(sfl_file_read(path, 6, &b, &n), SFL_ELIMIT);
    assert_null(b);
    /* Empty contents are a file too. */
    assert_int_equal(sfl_file_write_atomic(path, "", 0), 0);
    assert_int_equal(sfl_file_read(path, 6, &b, &n), 0);
    assert_int_equal(n, 0);
    sfl_file_free(b, n);
    /* A directory is not a file; a missing directory fails cleanly. */
    assert_int_equal(sfl_file_read(dir, 100, &b, &n), SFL_EINVAL);
    snprintf(path, sizeof(path), "%s/missing/state.bin", dir);
    assert_true(sfl_file_write_atomic(path, "x", 1) < 0);
    assert_non_null(strstr(sfl_last_error(), "cannot create temporary file"));
    assert_int_equal(sfl_file_write_atomic("", "x", 1), SFL_EINVAL);
    assert_int_equal(entries(), 1);
    snprintf(path, sizeof(path), "%s/state.bin", dir);
    unlink(path);
    rmdir(dir);
    umask(old);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_atomic_and_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

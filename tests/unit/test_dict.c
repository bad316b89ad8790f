#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "failalloc.h"
#include "sfl/algo/algo.h"
#include "sfl/model/dict.h"

static int parse(const char *text, size_t max, sfl_dict_t **out)
{
    return sfl_dict_parse(text, strlen(text), "d.txt", max, out);
}

static void test_dict_constructors(void **state)
{
    (void)state;
    sfl_dict_t *d = (sfl_dict_t *)&d;
    sfl_rng_t r, r2;

    assert_int_equal(sfl_dict_identity(4, &d), 0);
    assert_int_equal(d->n, 4);
    assert_int_equal(d->m, 4);
    for (uint32_t j = 0; j < 4; j++)
        for (uint32_t i = 0; i < 4; i++)
            assert_true(d->a[j * 4 + i] == (i == j ? 1.0 : 0.0));
    sfl_dict_free(d);
    sfl_dict_free(NULL);

    /* N(0, 1/n): mean ~0, variance ~1/n, atoms of norm ~1. */
    sfl_rng_seed(&r, 3, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(400, 50, &r, &d), 0);
    double s = 0, ss = 0;
    size_t len = 400 * 50;
    for (size_t k = 0; k < len; k++) {
        s += d->a[k];
        ss += d->a[k] * d->a[k];
    }
    assert_true(fabs(s / len) < 0.005); /* sd of the mean: 3.5e-4 */
    assert_true(fabs(ss / len * 400 - 1.0) < 0.05);
    /* Same rng seed, same dictionary. */
    sfl_dict_t *e;
    sfl_rng_seed(&r2, 3, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(400, 50, &r2, &e), 0);
    assert_memory_equal(d->a, e->a, len * sizeof(double));
    sfl_dict_free(e);
    sfl_dict_free(d);

    d = (sfl_dict_t *)&d;
    assert_int_equal(sfl_dict_new(0, 3, &d), SFL_EINVAL);
    assert_null(d);
    assert_int_equal(sfl_dict_new(3, 0, &d), SFL_EINVAL);
    assert_int_equal(sfl_dict_gaussian(3, 3, NULL, &d), SFL_EINVAL);
    assert_int_equal(sfl_dict_new(3, 3, NULL), SFL_EINVAL);
}

static void test_dict_parse_valid(void **state)
{
    (void)state;
    sfl_dict_t *d;

    /* Row-major text, column-major storage. */
    assert_int_equal(parse("2 3\n1 2 3\n4 5 6\n", 0, &d), 0);
    assert_int_equal(d->n, 2);
    assert_int_equal(d->m, 3);
    const double want[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(d->a, want, sizeof(want));
    sfl_dict_free(d);
    /* Comments, blank lines, tabs, CRLF, no final newline, exponents. */
    assert_int_equal(parse("# a dictionary\n\n 2\t2 \r\n1e0 -2.5\r\n\n# row 2\n0x1p-1 0", 0, &d),
                     0);
    const double want2[4] = {1, 0.5, -2.5, 0};
    assert_memory_equal(d->a, want2, sizeof(want2));
    sfl_dict_free(d);
    /* Exactly at the entry limit. */
    assert_int_equal(parse("1 2\n1 2\n", 2, &d), 0);
    sfl_dict_free(d);
}

static void expect_error(const char *text, size_t max, int err, const char *where)
{
    sfl_dict_t *d = (sfl_dict_t *)&d;

    sfl__clear_error();
    assert_int_equal(parse(text, max, &d), err);
    assert_null(d);
    if (strstr(sfl_last_error(), where) == NULL)
        print_error("'%s': detail '%s' lacks '%s'\n", text, sfl_last_error(), where);
    assert_non_null(strstr(sfl_last_error(), where));
}

static void test_dict_parse_errors(void **state)
{
    (void)state;
    expect_error("", 0, SFL_EEMPTY, "empty");
    expect_error("# only a comment\n\n", 0, SFL_EEMPTY, "empty");
    expect_error("2\n1\n2\n", 0, SFL_EPARSE, "d.txt:1:1: header");
    expect_error("2 3 4\n", 0, SFL_EPARSE, "d.txt:1:1: header");
    expect_error("0 3\n", 0, SFL_EPARSE, "d.txt:1:1: '0'");
    expect_error("2 -3\n", 0, SFL_EPARSE, "d.txt:1:3: '-3'");
    expect_error("2 x\n", 0, SFL_EPARSE, "d.txt:1:3");
    expect_error("4294967296 1\n", 0, SFL_EPARSE, "d.txt:1:1");
    expect_error("99999999999999999999 1\n", 0, SFL_EPARSE, "d.txt:1:1");
    /* Sizes are checked against the limit before anything is allocated. */
    expect_error("100000 100000\n", 0, SFL_ELIMIT, "exceeds the limit");
    expect_error("2 2\n1 2\n3 4\n", 3, SFL_ELIMIT, "d.txt:1:1");
    expect_error("2 3\n1 2\n4 5 6\n", 0, SFL_EPARSE, "d.txt:2:4: row 1 has 2 values");
    expect_error("2 3\n1 2 3 4\n4 5 6\n", 0, SFL_EPARSE, "d.txt:2:7: more than 3");
    expect_error("2 2\n1 zz\n3 4\n", 0, SFL_EPARSE, "d.txt:2:3: 'zz' is not a number");
    expect_error("2 2\n1 2\n3 nan\n", 0, SFL_EPARSE, "d.txt:3:3: 'nan' is not finite");
    expect_error("2 2\n1 1e999\n3 4\n", 0, SFL_EPARSE, "not finite");
    expect_error("3 2\n1 2\n3 4\n", 0, SFL_ETRUNC, "truncated: 2 of 3 rows");
    expect_error("1 2\n1 2\n3 4\n", 0, SFL_EPARSE, "d.txt:3:1: more than the 1 rows");
    /* A NUL byte inside the text. */
    sfl_dict_t *d = NULL;
    const char nul[] = "1 2\n1 \0 2\n";
    assert_int_equal(sfl_dict_parse(nul, sizeof(nul) - 1, "d.txt", 0, &d), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "d.txt:2:3: NUL"));
    assert_null(d);
    /* Limit check allocates nothing. */
    failalloc_install();
    failalloc_arm(-1);
    assert_int_equal(parse("65536 65536\n", 0, &d), SFL_ELIMIT);
    assert_int_equal(failalloc_count(), 0);
    failalloc_uninstall();
    assert_int_equal(sfl_dict_parse(NULL, 0, "x", 0, &d), SFL_EEMPTY);
    assert_int_equal(sfl_dict_parse(NULL, 3, "x", 0, &d), SFL_EINVAL);
}

static void test_dict_read_file(void **state)
{
    (void)state;
    char path[] = "/tmp/sfl_dict_XXXXXX";
    int fd = mkstemp(path);
    sfl_dict_t *d = NULL;
    const char text[] = "3 1\n0.5\n-1\n2\n";

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, sizeof(text) - 1), (int)sizeof(text) - 1);
    close(fd);
    assert_int_equal(sfl_dict_read(path, 0, &d), 0);
    assert_int_equal(d->n, 3);
    assert_true(d->a[0] == 0.5 && d->a[1] == -1 && d->a[2] == 2);
    sfl_dict_free(d);
    unlink(path);
    /* A file larger than max_entries allows (1 entry: 128 bytes + 1 MiB of
     * slack) is refused before it is read. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("1 1\n", f);
    for (int i = 0; i < (1 << 20) / 8 + 16; i++)
        fputs("#comment", f);
    fputs("\n1\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(sfl_dict_read(path, 1, &d), SFL_ELIMIT);
    assert_null(d);
    assert_int_equal(sfl_dict_read(path, 0, &d), 0);
    assert_true(d->a[0] == 1.0);
    sfl_dict_free(d);
    unlink(path);
    assert_int_equal(sfl_dict_read(path, 0, &d), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), path));
    assert_int_equal(sfl_dict_read("/", 0, &d), -EISDIR);
    assert_int_equal(sfl_dict_read(NULL, 0, &d), SFL_EINVAL);
}

static void test_dict_kernels(void **state)
{
    (void)state;
    sfl_dict_t *d;
    /* A = [1 2 0; 0 1 -1] (2 x 3). */
    assert_int_equal(parse("2 3\n1 2 0\n0 1 -1\n", 0, &d), 0);
    const double c[3] = {1, 0.5, 2};
    double x[2], ct[3];

    sfl_dict_apply(d, c, x);
    assert_true(x[0] == 2.0 && x[1] == -1.5);
    const uint32_t idx[2] = {1, 2};
    const double val[2] = {0.5, 2};
    sfl_dict_apply_sparse(d, idx, val, 2, x);
    assert_true(x[0] == 1.0 && x[1] == -1.5);
    assert_true(fabs(sfl_dict_nrm2_sparse(d, idx, val, 2) - sqrt(1 + 2.25)) < 1e-15);
    assert_true(sfl_dict_nrm2_sparse(d, idx, val, 0) == 0.0);
    const double r[2] = {3, -1};
    sfl_dict_apply_t(d, r, ct);
    assert_true(ct[0] == 3 && ct[1] == 5 && ct[2] == 1);
    sfl_dict_free(d);
}

static void test_dict_attach(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_dict_t *d;
    sfl_rng_t r;

    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_dict_gaussian(6, 10, &r, &d), 0);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 6, 0), 0);
    assert_int_equal(sfl_dict_attach(&prob, d), 0);
    assert_ptr_equal(prob.dict, d);
    assert_int_equal(prob.dim, 10);
    assert_int_equal(sfl_dict_attach(&prob, NULL), 0);
    assert_null(prob.dict);
    assert_int_equal(prob.dim, 6);
    /* Softmax: one block of coefficients per class. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_softmax, 6, 3), 0);
    assert_int_equal(sfl_dict_attach(&prob, d), 0);
    assert_int_equal(prob.dim, 30);
    assert_int_equal(prob.nblocks, 3);
    /* Atoms must have one entry per feature. */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 7, 0), 0);
    assert_int_equal(sfl_dict_attach(&prob, d), SFL_EDIM);
    assert_null(prob.dict);
    assert_int_equal(prob.dim, 7);
    sfl_dict_free(d);
}

static void test_dict_failalloc(void **state)
{
    (void)state;
    sfl_dict_t *d = NULL;
    sfl_rng_t r;

    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_DATA);
    FAILALLOC_EACH(sfl_dict_gaussian(5, 4, &r, &d), {
        sfl_dict_free(d);
        d = NULL;
    });
    FAILALLOC_EACH(sfl_dict_identity(5, &d), {
        sfl_dict_free(d);
        d = NULL;
    });
    FAILALLOC_EACH(parse("2 2\n1 2\n3 4\n", 0, &d), {
        sfl_dict_free(d);
        d = NULL;
    });
    char path[] = "/tmp/sfl_dict_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "1 1\n7\n", 6), 6);
    close(fd);
    FAILALLOC_EACH(sfl_dict_read(path, 0, &d), {
        sfl_dict_free(d);
        d = NULL;
    });
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dict_constructors),
        cmocka_unit_test(test_dict_parse_valid),
        cmocka_unit_test(test_dict_parse_errors),
        cmocka_unit_test(test_dict_read_file),
        cmocka_unit_test(test_dict_kernels),
        cmocka_unit_test(test_dict_attach),
        cmocka_unit_test(test_dict_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failalloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/csv.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "testutil.h"

/* Parses s[0..n) from an exact-size heap copy with no terminator, so ASan
 * catches any read past the end. */
static int parse_n(const char *s, size_t n, const sfl_csv_opts_t *o, const sfl_read_limits_t *lim,
                   sfl_dataset_t **out)
{
    char *copy = exact_copy(s, n);
    int rc = sfl_csv_parse(copy, n, "t", o, lim, out);
    free(copy);
    return rc;
}

static int parse(const char *s, const sfl_csv_opts_t *o, sfl_dataset_t **out)
{
    return parse_n(s, strlen(s), o, NULL, out);
}

static void expect_fail_n(const char *s, size_t n, const sfl_csv_opts_t *o,
                          const sfl_read_limits_t *lim, int code, const char *detail)
{
    sfl_dataset_t *ds = (sfl_dataset_t *)&ds; /* must be reset to NULL */
    int rc = parse_n(s, n, o, lim, &ds);

    check_read_failed(s, n, rc, ds, code, detail);
}

static void expect_fail(const char *s, const sfl_csv_opts_t *o, const sfl_read_limits_t *lim,
                        int code, const char *detail)
{
    expect_fail_n(s, strlen(s), o, lim, code, detail);
}

/* Checks ds against the dense nrows x ncols matrix d and targets y. */
static void check_dense(const sfl_dataset_t *ds, const double *d, const double *y,
                        uint32_t nrows, uint32_t ncols)
{
    assert_int_equal(ds->X->nrows, nrows);
    assert_int_equal(ds->X->ncols, ncols);
    assert_int_equal(sfl_csr_validate(ds->X), 0);
    size_t nz = 0;
    for (uint32_t i = 0; i < nrows; i++) {
        assert_true(ds->y[i] == y[i]);
        size_t k = ds->X->rowptr[i];
        for (uint32_t j = 0; j < ncols; j++) {
            double want = d[(size_t)i * ncols + j];
            if (want == 0.0)
                continue;
            assert_true(k < ds->X->rowptr[i + 1]);
            assert_int_equal(ds->X->colind[k], j);
            assert_true(ds->X->val[k] == want);
            k++;
            nz++;
        }
        assert_int_equal(k, ds->X->rowptr[i + 1]); /* zeros not stored */
    }
    assert_int_equal(ds->X->nnz, nz);
}

static void test_csv_parse_default(void **state)
{
    (void)state;
    /* Detected header, label first, CRLF, blank lines, spaces around
     * fields, no final newline. */
    const char *in = "y,a,b,c\r\n"
                     "1,0.5,0,-2\r\n"
                     "\r\n"
                     "0, 0 ,0, 3e1\n"
                     "  \n"
                     "-1,1,2,3";
    const double d[] = { 0.5, 0, -2, 0, 0, 30, 1, 2, 3 };
    const double y[] = { 1, 0, -1 };
    sfl_dataset_t *ds = NULL;

    assert_int_equal(parse(in, NULL, &ds), 0);
    check_dense(ds, d, y, 3, 3);
    assert_int_equal(ds->X->nnz, 6);
    sfl_dataset_free(ds);

    /* Numeric first line: no header detected. */
    assert_int_equal(parse("1,2\n3,4\n", NULL, &ds), 0);
    const double d2[] = { 2, 4 }, y2[] = { 1, 3 };
    check_dense(ds, d2, y2, 2, 1);
    sfl_dataset_free(ds);

    /* Empty header names do not make a header, a name does. */
    assert_int_equal(parse(",x\n3,4\n", NULL, &ds), 0);
    const double d3[] = { 4 }, y3[] = { 3 };
    check_dense(ds, d3, y3, 1, 1);
    sfl_dataset_free(ds);
}

static void test_csv_parse_options(void **state)
{
    (void)state;
    sfl_csv_opts_t o;
    sfl_dataset_t *ds = NULL;

    sfl_csv_opts_default(&o);
    assert_int_equal(o.label_col, 0);
    assert_int_equal(o.header, -1);
    assert_int_equal(o.delim, ',');

    /* Label last, semicolons. */
    o.label_col = -1;
    o.delim = ';';
    assert_int_equal(parse("1;2;7\n0;4;8\n", &o, &ds), 0);
    const double d1[] = { 1, 2, 0, 4 }, y1[] = { 7, 8 };
    check_dense(ds, d1, y1, 2, 2);
    sfl_dataset_free(ds);

    /* Label in the middle, tabs, forced header even though numeric. */
    o.label_col = 1;
    o.delim = '\t';
    o.header = 1;
    assert_int_equal(parse("1\t2\t3\n5\t6\t0\n", &o, &ds), 0);
    const double d2[] = { 5, 0 }, y2[] = { 6 };
    check_dense(ds, d2, y2, 1, 2);
    sfl_dataset_free(ds);

    /* header = 0: a non-numeric first line is an error, not a header. */
    o.header = 0;
    o.delim = ',';
    o.label_col = 0;
    expect_fail("y,a\n1,2\n", &o, NULL, SFL_EPARSE, "t:1:1: field 'y' is not a number");

    /* Space: runs of blanks separate, as in whitespace-separated files. */
    o.header = -1;
    o.delim = ' ';
    assert_int_equal(parse("  -1.0   2 \t 0\n1.0 0 5  \n", &o, &ds), 0);
    const double d3[] = { 2, 0, 0, 5 }, y3[] = { -1, 1 };
    check_dense(ds, d3, y3, 2, 2);
    sfl_dataset_free(ds);

    /* A single column: targets only. */
    o.delim = ',';
    assert_int_equal(parse("4\n5\n", &o, &ds), 0);
    assert_int_equal(ds->X->ncols, 0);
    assert_int_equal(ds->X->nrows, 2);
    sfl_dataset_free(ds);

    /* Quotes in a header are skipped with it. */
    assert_int_equal(parse("\"y\",\"x\"\n1,2\n", &o, &ds), 0);
    assert_int_equal(ds->X->nrows, 1);
    sfl_dataset_free(ds);

    o.label_col = 2;
    expect_fail("1,2\n", &o, NULL, SFL_EINVAL, "t: label column 2 out of range for 2 fields");
    o.label_col = -3;
    expect_fail("1,2\n", &o, NULL, SFL_EINVAL, "t: label column -3 out of range for 2 fields");
    o.label_col = 0;
    o.delim = '|';
    expect_fail("1|2\n", &o, NULL, SFL_EINVAL, "t: delimiter must be");
    o.delim = ',';
    o.header = 2;
    expect_fail("1,2\n", &o, NULL, SFL_EINVAL, "t: header option 2");
}

static void test_csv_parse_bad(void **state)
{
    (void)state;
    sfl_read_limits_t lim;

    expect_fail("1,2,3\n4,5,6\n7,8,9,10\n", NULL, NULL, SFL_EPARSE,
                "t:3:7: expected 3 fields (as line 1), found 4");
    expect_fail("a,b,c\n\n4,5\n", NULL, NULL, SFL_EPARSE,
                "t:3:4: expected 3 fields (as line 1), found 2");
    expect_fail("1,2\n3,x\n", NULL, NULL, SFL_EPARSE, "t:2:3: field 'x' is not a number");
    expect_fail("1,2\n3,4x\n", NULL, NULL, SFL_EPARSE, "t:2:3: field '4x' is not a number");
    expect_fail("1,2\n3,\n", NULL, NULL, SFL_EPARSE, "t:2:3: empty field 2");
    expect_fail("1,2\n,3\n", NULL, NULL, SFL_EPARSE, "t:2:1: empty field 1");
    expect_fail("1,2\n3, \n", NULL, NULL, SFL_EPARSE, "t:2:3: empty field 2");
    expect_fail("1,2\n3,nan\n", NULL, NULL, SFL_EPARSE, "t:2:3: field 'nan' is not finite");
    expect_fail("1,2\n3,inf\n", NULL, NULL, SFL_EPARSE, "t:2:3: field 'inf' is not finite");
    expect_fail("1,2\n3,1e400\n", NULL, NULL, SFL_EPARSE, "t:2:3: field '1e400' is not finite");
    expect_fail("1,2\n3,\"4\"\n", NULL, NULL, SFL_EUNSUP,
                "t:2:3: quoted fields are not supported");
    expect_fail("1,2\n\"3,5\",4\n", NULL, NULL, SFL_EUNSUP,
                "t:2:1: quoted fields are not supported");
    expect_fail_n("1,2\n3,4\0\n", 9, NULL, NULL, SFL_EPARSE, "t:2:4: NUL byte in text");
    expect_fail("", NULL, NULL, SFL_EEMPTY, "t: no data rows");
    expect_fail("a,b\n\n", NULL, NULL, SFL_EEMPTY, "t: no data rows");

    char big[300];
    memset(big, '1', sizeof(big));
    memcpy(big, "1,2\n1,", 6);
    big[200] = '\n';
    expect_fail_n(big, 201, NULL, NULL, SFL_EPARSE, "t:2:3: field longer than 127 bytes");

    sfl_read_limits_default(&lim);
    lim.max_rows = 2;
    expect_fail("h,h\n1,2\n\n3,4\n5,6\n", NULL, &lim, SFL_ELIMIT, "t:5:1: more than 2 rows");
    sfl_read_limits_default(&lim);
    lim.max_line = 5;
    expect_fail("1,2\n1,2,33\n", NULL, &lim, SFL_ELIMIT, "t:2:6: line longer than 5 bytes");
    sfl_read_limits_default(&lim);
    lim.max_cols = 2;
    expect_fail("1,2,3,4\n", NULL, &lim, SFL_ELIMIT, "t: 3 feature columns, more than max_cols 2");
    sfl_read_limits_default(&lim);
    lim.max_nnz = 3;
    expect_fail("1,2,3\n1,0,0\n1,4,5\n", NULL, &lim, SFL_ELIMIT, "t:3:5: more than 3 nonzeros");
    /* At the limits exactly. */
    sfl_read_limits_default(&lim);
    lim.max_rows = 2;
    lim.max_cols = 2;
    lim.max_nnz = 4;
    lim.max_line = 5;
    sfl_dataset_t *ds = NULL;
    assert_int_equal(parse_n("1,2,3\n4,5,6\n", 12, NULL, &lim, &ds), 0);
    assert_int_equal(ds->X->nnz, 4);
    sfl_dataset_free(ds);

    assert_int_equal(sfl_csv_parse(NULL, 1, "t", NULL, NULL, &ds), SFL_EINVAL);
    assert_int_equal(sfl_csv_parse("1", 1, "t", NULL, NULL, NULL), SFL_EINVAL);
}

static void test_csv_read(void **state)
{
    (void)state;
    char path[64] = "/tmp/sfl_test_csv_XXXXXX", want[128];
    const char *text = "y,x1,x2\n1,0,2\n0,3,0\n";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);

    sfl_dataset_t *ds = NULL;
    assert_int_equal(sfl_csv_read(path, NULL, NULL, &ds), 0);
    const double d[] = { 0, 2, 3, 0 }, y[] = { 1, 0 };
    check_dense(ds, d, y, 2, 2);
    sfl_dataset_free(ds);

    sfl_read_limits_t lim;
    sfl_read_limits_default(&lim);
    lim.max_line = 5;
    assert_int_equal(sfl_csv_read(path, NULL, &lim, &ds), SFL_ELIMIT);
    snprintf(want, sizeof(want), "%s:1:6: line longer than 5 bytes", path);
    assert_detail(want);

    FAILALLOC_EACH(sfl_csv_read(path, NULL, NULL, &ds), (sfl_dataset_free(ds), ds = NULL));
    unlink(path);
    assert_int_equal(sfl_csv_read("/nonexistent/x.csv", NULL, NULL, &ds), -ENOENT);
    assert_detail("/nonexistent/x.csv: ");
    assert_null(ds);
}

static void test_csv_failalloc(void **state)
{
    (void)state;
    sfl_dataset_t *ds = NULL;
    FAILALLOC_EACH(parse("a,b,c\n1,0,2\n3,4,0\n", NULL, &ds), (sfl_dataset_free(ds), ds = NULL));
}

/* colon-cancer.txt is whitespace-separated dense text, label first. */
static void test_csv_colon_cancer(void **state)
{
    (void)state;
    const char *dir = getenv("SFL_TEST_DATA");
    char path[512];
    snprintf(path, sizeof(path), "%s/colon-cancer.txt", dir ? dir : "../shared/data");
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "skipped: %s not found\n", path);
        skip();
    }
    sfl_csv_opts_t o;
    sfl_csv_opts_default(&o);
    o.delim = ' ';
    sfl_dataset_t *ds = NULL;
    assert_int_equal(sfl_csv_read(path, &o, NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 62);
    assert_int_equal(ds->X->ncols, 2000);
    assert_int_equal(ds->X->nnz, 124000);
    assert_true(ds->X->val[0] == 2.08075 && ds->X->val[4] == -0.130763);
    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    int count[2] = { 0, 0 };
    for (uint32_t i = 0; i < 62; i++)
        count[(int)ds->y[i]]++;
    assert_int_equal(count[0], 40);
    assert_int_equal(count[1], 22);
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_parse_default),
        cmocka_unit_test(test_csv_parse_options),
        cmocka_unit_test(test_csv_parse_bad),
        cmocka_unit_test(test_csv_read),
        cmocka_unit_test(test_csv_failalloc),
        cmocka_unit_test(test_csv_colon_cancer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

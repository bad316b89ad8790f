#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "failalloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/data/libsvm.h"
#include "testutil.h"

/* Parses s[0..n) from an exact-size heap copy with no terminator, so ASan
 * catches any read past the end of the buffer. */
static int parse_n(const char *s, size_t n, uint32_t min_cols, const sfl_read_limits_t *lim,
                   sfl_dataset_t **out)
{
    char *copy = exact_copy(s, n);
    int rc = sfl_libsvm_parse(copy, n, "t", min_cols, lim, out);
    free(copy);
    return rc;
}

static int parse(const char *s, const sfl_read_limits_t *lim, sfl_dataset_t **out)
{
    return parse_n(s, strlen(s), 0, lim, out);
}

static void expect_fail_n(const char *s, size_t n, const sfl_read_limits_t *lim, int code,
                          const char *detail)
{
    sfl_dataset_t *ds = (sfl_dataset_t *)&ds; /* must be reset to NULL */
    int rc = parse_n(s, n, 0, lim, &ds);

    check_read_failed(s, n, rc, ds, code, detail);
}

static void expect_fail(const char *s, const sfl_read_limits_t *lim, int code, const char *detail)
{
    expect_fail_n(s, strlen(s), lim, code, detail);
}

static void test_libsvm_parse_good(void **state)
{
    (void)state;
    /* Comments, blank lines, CRLF, tabs, unsorted indices, qid, explicit
     * zero, several label spellings, last line without newline. */
    const char *in = "# header comment\n"
                     "+1 3:0.5 1:2 # trailing comment\n"
                     "\n"
                     "-1\tqid:7 2:-1.5e2\t4:0 5:1\r\n"
                     "   \t \r\n"
                     "1.0\r\n"
                     "3 10:3 2:1 7:0.25";
    sfl_dataset_t *ds = NULL;

    assert_int_equal(parse(in, NULL, &ds), 0);
    const sfl_csr_t *X = ds->X;
    assert_int_equal(X->nrows, 4);
    assert_int_equal(X->ncols, 10);
    assert_int_equal(X->nnz, 7);
    const size_t rp[] = { 0, 2, 4, 4, 7 };
    const uint32_t ci[] = { 0, 2, 1, 4, 1, 6, 9 };
    const double v[] = { 2, 0.5, -150, 1, 1, 0.25, 3 };
    const double y[] = { 1, -1, 1, 3 };
    assert_memory_equal(X->rowptr, rp, sizeof(rp));
    assert_memory_equal(X->colind, ci, sizeof(ci));
    assert_memory_equal(X->val, v, sizeof(v));
    assert_memory_equal(ds->y, y, sizeof(y));
    assert_int_equal(ds->nclasses, 0);
    sfl_dataset_free(ds);

    /* min_cols widens; a smaller min_cols does not narrow. */
    assert_int_equal(parse_n("1 2:1\n", 6, 100, NULL, &ds), 0);
    assert_int_equal(ds->X->ncols, 100);
    sfl_dataset_free(ds);
    assert_int_equal(parse_n("1 2:1\n", 6, 1, NULL, &ds), 0);
    assert_int_equal(ds->X->ncols, 2);
    sfl_dataset_free(ds);

    /* A row with only a label, a label with a trailing space. */
    assert_int_equal(parse("-2 \n", NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 1);
    assert_int_equal(ds->X->ncols, 0);
    assert_true(ds->y[0] == -2.0);
    sfl_dataset_free(ds);

    /* Limits exactly met are fine. */
    sfl_read_limits_t lim;
    sfl_read_limits_default(&lim);
    lim.max_rows = 2;
    lim.max_cols = 3;
    lim.max_nnz = 3;
    lim.max_line = 9;
    assert_int_equal(parse("1 1:1 3:1\n2 2:2\n", &lim, &ds), 0);
    assert_int_equal(ds->X->nnz, 3);
    sfl_dataset_free(ds);
}

static void test_libsvm_parse_sorts_long_row(void **state)
{
    (void)state;
    /* 2000 entries in descending order: sorted on load. */
    char *buf = malloc(2000 * 16 + 8);
    size_t n = (size_t)sprintf(buf, "1");
    for (int j = 2000; j >= 1; j--)
        n += (size_t)sprintf(buf + n, " %d:%d", j, j);
    n += (size_t)sprintf(buf + n, "\n");
    sfl_dataset_t *ds = NULL;
    assert_int_equal(parse_n(buf, n, 0, NULL, &ds), 0);
    assert_int_equal(ds->X->nnz, 2000);
    for (uint32_t k = 0; k < 2000; k++) {
        assert_int_equal(ds->X->colind[k], k);
        assert_true(ds->X->val[k] == (double)(k + 1));
    }
    sfl_dataset_free(ds);

    /* The same with a duplicate far from its twin: named with its column. */
    n = (size_t)sprintf(buf, "1 9:1 3:1 5:1 3:2 4:1\n");
    expect_fail_n(buf, n, NULL, SFL_EPARSE, "t:1:15: duplicate feature index 3");
    free(buf);
}

static void test_libsvm_parse_bad(void **state)
{
    (void)state;
    sfl_read_limits_t lim;

    expect_fail("1 3 4:1\n", NULL, SFL_EPARSE, "t:1:3: expected ':' after feature index");
    expect_fail("1 2:1 3;4\n", NULL, SFL_EPARSE, "t:1:7: expected ':' after feature index");
    expect_fail("1 :5\n", NULL, SFL_EPARSE, "t:1:3: empty feature index");
    expect_fail("1 0:1\n", NULL, SFL_EPARSE, "t:1:3: feature index 0 (indices are 1-based)");
    expect_fail("1 -2:1\n", NULL, SFL_EPARSE, "t:1:3: negative feature index '-2:1'");
    expect_fail("1 +2:1\n", NULL, SFL_EPARSE, "t:1:3: expected feature index, got '+2:1'");
    expect_fail("1 x:1\n", NULL, SFL_EPARSE, "t:1:3: expected feature index, got 'x:1'");
    expect_fail("1 2:abc\n", NULL, SFL_EPARSE, "t:1:3: value in '2:abc' is not a number");
    expect_fail("1 2:3x\n", NULL, SFL_EPARSE, "t:1:3: value in '2:3x' is not a number");
    expect_fail("1 2:1:1\n", NULL, SFL_EPARSE, "t:1:3: value in '2:1:1' is not a number");
    expect_fail("1 2:\n", NULL, SFL_EPARSE, "t:1:3: missing value after '2:'");
    expect_fail("1 2: 3\n", NULL, SFL_EPARSE, "t:1:3: missing value after '2:'");
    expect_fail("1 2:nan\n", NULL, SFL_EPARSE, "t:1:3: value in '2:nan' is not finite");
    expect_fail("1 2:-inf\n", NULL, SFL_EPARSE, "t:1:3: value in '2:-inf' is not finite");
    expect_fail("1 2:1e999\n", NULL, SFL_EPARSE, "t:1:3: value in '2:1e999' is not finite");
    expect_fail("1 2:1 2:3\n", NULL, SFL_EPARSE, "t:1:7: duplicate feature index 2");
    expect_fail("1 5:1 2:1 5:2\n", NULL, SFL_EPARSE, "t:1:11: duplicate feature index 5");
    expect_fail("1 2:0 2:0\n", NULL, SFL_EPARSE, "t:1:7: duplicate feature index 2");
    expect_fail("1:1 2:2\n", NULL, SFL_EPARSE, "t:1:1: label missing");
    expect_fail("  3:1\n", NULL, SFL_EPARSE, "t:1:3: label missing");
    expect_fail("abc 1:1\n", NULL, SFL_EPARSE, "t:1:1: label 'abc' is not a finite number");
    expect_fail("nan 1:1\n", NULL, SFL_EPARSE, "t:1:1: label 'nan' is not a finite number");
    expect_fail("1 1:1\r2 2:1\n", NULL, SFL_EPARSE, "t:1:3: value in '1:1?2' is not a number");
    /* Line numbers count blank and comment lines. */
    expect_fail("\n# c\n1 1:1\r\n\r\n1 x\n", NULL, SFL_EPARSE,
                "t:5:3: expected feature index, got 'x'");
    /* A NUL byte in the middle of the text. */
    expect_fail_n("1 1:1\n1 2\0:1\n", 13, NULL, SFL_EPARSE, "t:2:4: NUL byte in text");
    /* Very long numeric tokens. */
    char big[300];
    memset(big, '1', sizeof(big));
    memcpy(big, "1 2:", 4);
    big[200] = '\n';
    expect_fail_n(big, 201, NULL, SFL_EPARSE, "t:1:3: value token longer than 127 bytes");
    expect_fail_n(big + 4, 197, NULL, SFL_EPARSE, "t:1:1: label token longer than 127 bytes");
    /* A 127-byte value is still fine. */
    memcpy(big, "1 2:0.", 6);
    sfl_dataset_t *ds = NULL;
    assert_int_equal(parse_n(big, 131, 0, NULL, &ds), 0);
    sfl_dataset_free(ds);
    /* Index beyond any uint32 and beyond the default limit. */
    expect_fail("1 99999999999999999999:1\n", NULL, SFL_ELIMIT,
                "t:1:3: feature index '99999999999999999999:1' above max_cols 67108864");

    /* No rows at all. */
    expect_fail("", NULL, SFL_EEMPTY, "t: no data rows");
    expect_fail("# nothing\n\n  \r\n", NULL, SFL_EEMPTY, "t: no data rows");

    sfl_read_limits_default(&lim);
    lim.max_cols = 10;
    expect_fail("1 10:1\n1 11:1\n", &lim, SFL_ELIMIT, "t:2:3: feature index '11:1' above max_cols 10");
    sfl_read_limits_default(&lim);
    lim.max_rows = 2;
    expect_fail("1 1:1\n# c\n1 1:1\n\n1 1:1\n", &lim, SFL_ELIMIT, "t:5:1: more than 2 rows");
    sfl_read_limits_default(&lim);
    lim.max_line = 10;
    expect_fail("1 1:1\n1 1:1 2:1 3:1\n", &lim, SFL_ELIMIT, "t:2:11: line longer than 10 bytes");
    sfl_read_limits_default(&lim);
    lim.max_nnz = 3;
    expect_fail("1 1:1 2:1\n1 1:1 2:1\n", &lim, SFL_ELIMIT, "t:2:7: more than 3 nonzeros");
}

static void test_libsvm_parse_args(void **state)
{
    (void)state;
    sfl_dataset_t *ds = NULL;
    assert_int_equal(sfl_libsvm_parse(NULL, 1, "t", 0, NULL, &ds), SFL_EINVAL);
    assert_int_equal(sfl_libsvm_parse("1 1:1", 5, "t", 0, NULL, NULL), SFL_EINVAL);
    /* NULL name: still a usable message. */
    assert_int_equal(sfl_libsvm_parse("x", 1, NULL, 0, NULL, &ds), SFL_EPARSE);
    assert_detail("<memory>:1:1: label 'x'");
}

/* Writes s to a fresh temp file; returns its path (static buffer). */
static const char *temp_file(const char *s, size_t n)
{
    static char path[64];
    strcpy(path, "/tmp/sfl_test_libsvm_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_libsvm_read(void **state)
{
    (void)state;
    const char *text = "1 1:1 3:2\n-1 2:4\n";
    const char *path = temp_file(text, strlen(text));
    sfl_dataset_t *ds = NULL;
    char want[128];

    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 2);
    assert_int_equal(ds->X->ncols, 3);
    assert_int_equal(ds->X->nnz, 3);
    sfl_dataset_free(ds);

    /* The detail names the path. */
    sfl_read_limits_t lim;
    sfl_read_limits_default(&lim);
    lim.max_cols = 2;
    assert_int_equal(sfl_libsvm_read(path, 0, &lim, &ds), SFL_ELIMIT);
    snprintf(want, sizeof(want), "%s:1:7: feature index", path);
    assert_detail(want);

    /* Bigger than the limits can describe: refused before reading. */
    sfl_read_limits_default(&lim);
    lim.max_rows = 1;
    lim.max_line = 8;
    assert_int_equal(sfl_libsvm_read(path, 0, &lim, &ds), SFL_ELIMIT);
    snprintf(want, sizeof(want), "%s: 17 bytes is more than the read limits allow (9)", path);
    assert_detail(want);

    FAILALLOC_EACH(sfl_libsvm_read(path, 0, NULL, &ds), (sfl_dataset_free(ds), ds = NULL));
    unlink(path);

    assert_int_equal(sfl_libsvm_read("/nonexistent/x.svm", 0, NULL, &ds), -ENOENT);
    assert_detail("/nonexistent/x.svm: ");
    assert_int_equal(sfl_libsvm_read("/tmp", 0, NULL, &ds), -EISDIR);
    assert_detail("/tmp: ");
    assert_null(ds);
}

static void test_libsvm_failalloc(void **state)
{
    (void)state;
    const char *in = "1 3:1 1:2\n-1 2:1 # c\n\n2\n";
    sfl_dataset_t *ds = NULL;
    FAILALLOC_EACH(parse(in, NULL, &ds), (sfl_dataset_free(ds), ds = NULL));
}

/* Real files from ../shared/data, when present. */
static int data_path(char *buf, size_t n, const char *rel)
{
    const char *dir = getenv("SFL_TEST_DATA");
    if (dir == NULL)
        dir = "../shared/data";
    snprintf(buf, n, "%s/%s", dir, rel);
    return access(buf, R_OK) == 0;
}

static void test_libsvm_colon_cancer(void **state)
{
    (void)state;
    char path[512];
    sfl_dataset_t *ds = NULL;

    if (!data_path(path, sizeof(path), "derived/colon-cancer.libsvm")) {
        fprintf(stderr, "skipped: %s not found\n", path);
        skip();
    }
    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 62);
    assert_int_equal(ds->X->ncols, 2000);
    assert_int_equal(ds->X->nnz, 124000);
    assert_true(ds->X->val[0] == 2.08075 && ds->X->val[4] == -0.130763);
    assert_true(ds->y[0] == -1.0);
    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    assert_int_equal(ds->nclasses, 2);
    assert_true(ds->labels[0] == -1.0 && ds->labels[1] == 1.0);
    int count[2] = { 0, 0 };
    for (uint32_t i = 0; i < 62; i++)
        count[(int)ds->y[i]]++;
    assert_int_equal(count[0], 40);
    assert_int_equal(count[1], 22);
    sfl_dataset_free(ds);
}

static void test_libsvm_dna(void **state)
{
    (void)state;
    char path[512];
    sfl_dataset_t *ds = NULL;

    if (!data_path(path, sizeof(path), "dna.scale")) {
        fprintf(stderr, "skipped: %s not found\n", path);
        skip();
    }
    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0); /* CRLF lines */
    assert_int_equal(ds->X->nrows, 2000);
    assert_int_equal(ds->X->ncols, 180);
    assert_int_equal(ds->X->nnz, 91233);
    assert_int_equal(sfl_dataset_encode_labels(ds, 3), 0);
    assert_int_equal(ds->nclasses, 3);
    assert_true(ds->labels[0] == 1.0 && ds->labels[1] == 2.0 && ds->labels[2] == 3.0);
    int count[3] = { 0, 0, 0 };
    for (uint32_t i = 0; i < 2000; i++)
        count[(int)ds->y[i]]++;
    assert_int_equal(count[0], 464);
    assert_int_equal(count[1], 485);
    assert_int_equal(count[2], 1051);
    sfl_dataset_free(ds);
}

static void test_libsvm_a9a(void **state)
{
    (void)state;
    char path[512];
    sfl_dataset_t *ds = NULL;
    struct timespec t0, t1;

    if (!data_path(path, sizeof(path), "a9a")) {
        fprintf(stderr, "skipped: %s not found\n", path);
        skip();
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    fprintf(stderr, "a9a: %u x %u, %zu nonzeros read in %.3f s (informational; timing is bench/'s)\n", ds->X->nrows, ds->X->ncols,
            ds->X->nnz, secs);
    assert_int_equal(ds->X->nrows, 32561);
    assert_int_equal(ds->X->ncols, 123);
    assert_int_equal(ds->X->nnz, 451592);
    assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    assert_int_equal(ds->nclasses, 2);
    sfl_dataset_free(ds);
}

/* Written text reads back to the same bits, labels included. */
static void test_libsvm_write_round_trip(void **state)
{
    (void)state;
    const char text[] = "-1 1:0.1 3:-2.5e-300\n+1 2:3.141592653589793\n-1\n";
    sfl_dataset_t *a = NULL, *b = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    assert_int_equal(sfl_libsvm_parse(text, sizeof(text) - 1, "t", 0, NULL, &a), 0);
    assert_int_equal(sfl_dataset_encode_labels(a, 2), 0);
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(sfl_libsvm_write(f, a), 0);
    fclose(f);
    assert_int_equal(sfl_libsvm_parse(buf, len, "w", 0, NULL, &b), 0);
    assert_int_equal(b->X->nrows, 3);
    assert_int_equal(b->X->nnz, a->X->nnz);
    assert_memory_equal(b->X->val, a->X->val, a->X->nnz * sizeof(double));
    assert_memory_equal(b->X->colind, a->X->colind, a->X->nnz * sizeof(uint32_t));
    assert_true(b->y[0] == -1 && b->y[1] == 1 && b->y[2] == -1);
    assert_int_equal(sfl_libsvm_write(NULL, a), SFL_EINVAL);
    free(buf);
    sfl_dataset_free(a);
    sfl_dataset_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libsvm_parse_good),
        cmocka_unit_test(test_libsvm_write_round_trip),
        cmocka_unit_test(test_libsvm_parse_sorts_long_row),
        cmocka_unit_test(test_libsvm_parse_bad),
        cmocka_unit_test(test_libsvm_parse_args),
        cmocka_unit_test(test_libsvm_read),
        cmocka_unit_test(test_libsvm_failalloc),
        cmocka_unit_test(test_libsvm_colon_cancer),
        cmocka_unit_test(test_libsvm_dna),
        cmocka_unit_test(test_libsvm_a9a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

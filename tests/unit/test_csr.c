#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/data/csr.h"
#include "sfl/core/error.h"
#include "testutil.h"

/* 3 x 4:
 *   [1 0 2 0]
 *   [0 0 0 0]
 *   [0 3 0 4] */
static const double dense[12] = { 1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4 };

static sfl_csr_t *make(void)
{
    sfl_csr_t *a = NULL;
    assert_int_equal(sfl_csr_from_dense(dense, 3, 4, &a), 0);
    return a;
}

static void test_csr_new(void **state)
{
    (void)state;
    sfl_csr_t *a = NULL;
    assert_int_equal(sfl_csr_new(5, 7, 11, &a), 0);
    assert_int_equal(a->nrows, 5);
    assert_int_equal(a->ncols, 7);
    assert_int_equal(a->nnz, 11);
    for (int i = 0; i <= 5; i++)
        assert_int_equal(a->rowptr[i], 0);
    a->colind[10] = 6; /* storage really is there (ASan checks) */
    a->val[10] = 1.0;
    sfl_csr_free(a);

    assert_int_equal(sfl_csr_new(0, 0, 0, &a), 0);
    assert_int_equal(a->rowptr[0], 0);
    sfl_csr_free(a);
    sfl_csr_free(NULL);

    assert_int_equal(sfl_csr_new(1, 1, SIZE_MAX / 4, &a), SFL_ELIMIT);
    assert_null(a);
    assert_detail("csr_new:");
    assert_int_equal(sfl_csr_new(1, 1, 1, NULL), SFL_EINVAL);
}

static void test_csr_from_dense(void **state)
{
    (void)state;
    sfl_csr_t *a = make();
    const size_t rp[] = { 0, 2, 2, 4 };
    const uint32_t ci[] = { 0, 2, 1, 3 };
    const double v[] = { 1, 2, 3, 4 };

    assert_int_equal(a->nrows, 3);
    assert_int_equal(a->ncols, 4);
    assert_int_equal(a->nnz, 4);
    assert_memory_equal(a->rowptr, rp, sizeof(rp));
    assert_memory_equal(a->colind, ci, sizeof(ci));
    assert_memory_equal(a->val, v, sizeof(v));
    assert_int_equal(sfl_csr_validate(a), 0);
    sfl_csr_free(a);

    double bad[4] = { 1, 2, NAN, 4 };
    a = NULL;
    assert_int_equal(sfl_csr_from_dense(bad, 2, 2, &a), SFL_ENUMERIC);
    assert_null(a);
    assert_detail("csr_from_dense: non-finite value at (1, 0)");
    bad[2] = INFINITY;
    assert_int_equal(sfl_csr_from_dense(bad, 2, 2, &a), SFL_ENUMERIC);

    assert_int_equal(sfl_csr_from_dense(NULL, 0, 5, &a), 0);
    assert_int_equal(a->nrows, 0);
    assert_int_equal(a->ncols, 5);
    assert_int_equal(a->nnz, 0);
    sfl_csr_free(a);
    assert_int_equal(sfl_csr_from_dense(NULL, 2, 2, &a), SFL_EINVAL);
}

static void test_csr_select_rows(void **state)
{
    (void)state;
    sfl_csr_t *a = make(), *b = NULL;
    const uint32_t rows[] = { 2, 0, 2, 1 };
    const size_t rp[] = { 0, 2, 4, 6, 6 };
    const uint32_t ci[] = { 1, 3, 0, 2, 1, 3 };
    const double v[] = { 3, 4, 1, 2, 3, 4 };

    assert_int_equal(sfl_csr_select_rows(a, rows, 4, &b), 0);
    assert_int_equal(b->nrows, 4);
    assert_int_equal(b->ncols, 4);
    assert_int_equal(b->nnz, 6);
    assert_memory_equal(b->rowptr, rp, sizeof(rp));
    assert_memory_equal(b->colind, ci, sizeof(ci));
    assert_memory_equal(b->val, v, sizeof(v));
    assert_int_equal(sfl_csr_validate(b), 0);
    sfl_csr_free(b);

    assert_int_equal(sfl_csr_select_rows(a, NULL, 0, &b), 0);
    assert_int_equal(b->nrows, 0);
    assert_int_equal(b->nnz, 0);
    sfl_csr_free(b);

    const uint32_t bad[] = { 0, 3 };
    b = NULL;
    assert_int_equal(sfl_csr_select_rows(a, bad, 2, &b), SFL_EINVAL);
    assert_null(b);
    assert_detail("csr_select_rows: row 3 out of range (3 rows)");
    sfl_csr_free(a);
}

static void test_csr_kernels(void **state)
{
    (void)state;
    sfl_csr_t *a = make();
    const double x[4] = { 1, 10, 100, 1000 };
    double y[4] = { 1, 1, 1, 1 }, z[3] = { -1, -1, -1 };

    assert_true(sfl_csr_row_dot(a, 0, x) == 201.0);
    assert_true(sfl_csr_row_dot(a, 1, x) == 0.0);
    assert_true(sfl_csr_row_dot(a, 2, x) == 4030.0);

    sfl_csr_row_axpy(a, 2, 0.5, y);
    assert_true(y[0] == 1.0 && y[1] == 2.5 && y[2] == 1.0 && y[3] == 3.0);
    sfl_csr_row_axpy(a, 1, 7.0, y); /* empty row: no change */
    assert_true(y[0] == 1.0 && y[1] == 2.5 && y[2] == 1.0 && y[3] == 3.0);

    sfl_csr_gemv(a, x, z);
    assert_true(z[0] == 201.0 && z[1] == 0.0 && z[2] == 4030.0);
    sfl_csr_free(a);
}

static void test_csr_validate_bad(void **state)
{
    (void)state;
    sfl_csr_t *a = make();

    assert_int_equal(sfl_csr_validate(a), 0);

    a->colind[3] = 4; /* row 2, entry 3: column out of range */
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: row 2 entry 3: column 4 >= ncols 4");
    a->colind[3] = 1; /* equal to the previous column */
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: row 2 entry 3: column 1 not after column 1");
    a->colind[3] = 0; /* decreasing */
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: row 2 entry 3: column 0 not after column 1");
    a->colind[3] = 3;

    a->val[1] = NAN;
    assert_int_equal(sfl_csr_validate(a), SFL_ENUMERIC);
    assert_detail("csr: row 0 entry 1: non-finite value");
    a->val[1] = 2;

    a->rowptr[1] = 3;
    a->rowptr[2] = 2; /* not monotone */
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: row 1:");
    a->rowptr[1] = 2;

    a->rowptr[3] = 5; /* nnz mismatch */
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: rowptr[3] is 5 but nnz is 4");
    a->rowptr[3] = 4;

    a->rowptr[0] = 1;
    assert_int_equal(sfl_csr_validate(a), SFL_EINVAL);
    assert_detail("csr: rowptr[0] is 1");
    a->rowptr[0] = 0;

    assert_int_equal(sfl_csr_validate(a), 0);
    assert_int_equal(sfl_csr_validate(NULL), SFL_EINVAL);
    sfl_csr_free(a);
}

static void test_csr_failalloc(void **state)
{
    (void)state;
    sfl_csr_t *a = make(), *b = NULL;
    const uint32_t rows[] = { 2, 0, 1 };

    FAILALLOC_EACH(sfl_csr_select_rows(a, rows, 3, &b), (sfl_csr_free(b), b = NULL));
    FAILALLOC_EACH(sfl_csr_from_dense(dense, 3, 4, &b), (sfl_csr_free(b), b = NULL));
    FAILALLOC_EACH(sfl_csr_new(10, 10, 20, &b), (sfl_csr_free(b), b = NULL));
    sfl_csr_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csr_new),
        cmocka_unit_test(test_csr_from_dense),
        cmocka_unit_test(test_csr_select_rows),
        cmocka_unit_test(test_csr_kernels),
        cmocka_unit_test(test_csr_validate_bad),
        cmocka_unit_test(test_csr_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "job/fstat.h"
#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"

#define D 3

/* A moments vector of D features as an agent sends it (zeros left out). */
static sfl_spvec_t *vec(const double m[SFL_MOMENTS_LEN(D)])
{
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_new(SFL_MOMENTS_LEN(D), 0, &v), 0);
    assert_int_equal(sfl_spvec_from_dense(v, m), 0);
    return v;
}

static int check(const double m[SFL_MOMENTS_LEN(D)], uint64_t rows, uint64_t bound)
{
    sfl_spvec_t *v = vec(m);
    int rc = coord_fstat_check(v, D, rows, bound);

    sfl_spvec_free(v);
    return rc;
}

/* What a hostile or broken agent can send is refused, with the reason:
 * another length, a value that is not finite, a count that is not a whole
 * number >= 1, or not the rows it declares, or more than it joined with, a
 * negative sum of squares, a sum its sum of squares cannot hold. */
static void test_fstat_check_refuses_bad_moments(void **state)
{
    (void)state;
    /* rows 1, 2, 3 of feature 0; feature 1 constant 0.1; feature 2 zero */
    const double ok[SFL_MOMENTS_LEN(D)] = {3, 6, 0.30000000000000004, 0, 14,
                                           0.030000000000000006, 0};
    double m[SFL_MOMENTS_LEN(D)];
    sfl_spvec_t *v = NULL;

    assert_int_equal(check(ok, 3, 10), 0);
    assert_int_equal(check(ok, 3, 3), 0);
    assert_int_equal(check(ok, 3, 2), SFL_EINVAL); /* more rows than it joined with */
    assert_non_null(strstr(sfl_last_error(), "joined with 2"));
    assert_int_equal(check(ok, 4, 10), SFL_EINVAL); /* not the rows it declares */
    memcpy(m, ok, sizeof(m));
    m[0] = 2.5;
    assert_int_equal(check(m, 2, 10), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "whole number"));
    m[0] = 0;
    assert_int_equal(check(m, 0, 10), SFL_EINVAL);
    m[0] = -3;
    assert_int_equal(check(m, 3, 10), SFL_EINVAL);
    memcpy(m, ok, sizeof(m));
    m[4] = -1;
    assert_int_equal(check(m, 3, 10), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "negative"));
    memcpy(m, ok, sizeof(m));
    m[4] = 11; /* sum 6 over 3 rows needs a sum of squares >= 12 */
    assert_int_equal(check(m, 3, 10), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "negative variance"));
    /* not finite: as decoded from the wire, past what from_dense allows */
    v = vec(ok);
    v->val[2] = NAN;
    assert_int_equal(coord_fstat_check(v, D, 3, 10), SFL_ENUMERIC);
    v->val[2] = INFINITY;
    assert_int_equal(coord_fstat_check(v, D, 3, 10), SFL_ENUMERIC);
    sfl_spvec_free(v);
    /* another length */
    assert_int_equal(sfl_spvec_new(SFL_MOMENTS_LEN(D) + 2, 0, &v), 0);
    assert_int_equal(coord_fstat_check(v, D, 3, 10), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "want 7"));
    sfl_spvec_free(v);
    assert_int_equal(coord_fstat_check(NULL, D, 3, 10), SFL_EINVAL);
}

/* The sum is folded in slot order from zeros, whatever order the vectors
 * arrive in, so it is a function of the cohort alone: bit for bit the sum
 * sfl-sim makes over its clients 0..N-1. A slot is held once. */
static void test_fstat_sum_in_slot_order(void **state)
{
    (void)state;
    const double a[SFL_MOMENTS_LEN(D)] = {1, 0.1, 1e16, 0, 0.01, 1e32, 0};
    const double b[SFL_MOMENTS_LEN(D)] = {2, 0.2, 1, 0, 0.02, 1, 0};
    const double c[SFL_MOMENTS_LEN(D)] = {4, 0.3, -1e16, 0, 0.03, 1e32, 0};
    const double *in[3] = {a, b, c};
    coord_fstat_t f = {0};
    double m[SFL_MOMENTS_LEN(D)], want[SFL_MOMENTS_LEN(D)] = {0};
    uint32_t agents = 0;
    sfl_spvec_t *v[3];

    for (int i = 0; i < 3; i++) {
        v[i] = vec(in[i]);
        for (size_t k = 0; k < SFL_MOMENTS_LEN(D); k++)
            want[k] += in[i][k];
    }
    /* 4 slots, one never answers; they arrive 2, 0, 3 */
    assert_int_equal(coord_fstat_begin(&f, D, 4), 0);
    assert_int_equal(coord_fstat_end(&f, m, &agents), SFL_EEMPTY);
    assert_int_equal(coord_fstat_add(&f, 3, v[2]), 0);
    assert_int_equal(coord_fstat_add(&f, 0, v[0]), 0);
    assert_int_equal(coord_fstat_add(&f, 0, v[1]), SFL_EINVAL); /* held already */
    assert_int_equal(coord_fstat_add(&f, 4, v[1]), SFL_EINVAL); /* out of range */
    assert_int_equal(coord_fstat_add(&f, 2, v[1]), 0);
    assert_int_equal(coord_fstat_end(&f, m, &agents), 0);
    assert_int_equal(agents, 3);
    assert_memory_equal(m, want, sizeof(m));
    /* (1e16 + 1) - 1e16 is 0 in float64, 1e16 + (1 - 1e16) is not: the
     * order is part of the result */
    assert_true(m[2] == 0);
    /* begin again: nothing held */
    assert_int_equal(coord_fstat_begin(&f, D, 2), 0);
    assert_int_equal(coord_fstat_end(&f, m, &agents), SFL_EEMPTY);
    FAILALLOC_EACH(coord_fstat_add(&f, 1, v[1]), (void)0);
    assert_int_equal(coord_fstat_end(&f, m, &agents), 0);
    assert_memory_equal(m, b, sizeof(m));
    coord_fstat_close(&f);
    FAILALLOC_EACH(coord_fstat_begin(&f, D, 3), (void)0);
    coord_fstat_close(&f);
    coord_fstat_close(&f); /* twice: nothing */
    for (int i = 0; i < 3; i++)
        sfl_spvec_free(v[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fstat_check_refuses_bad_moments),
        cmocka_unit_test(test_fstat_sum_in_slot_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

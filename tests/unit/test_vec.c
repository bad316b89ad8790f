#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "sfl/core/vec.h"

static void test_vec_dense_kernels(void **state)
{
    (void)state;
    const double x[5] = {1.0, -2.0, 0.0, 3.5, 0.25};
    double y[5] = {2.0, 1.0, 7.0, -1.0, 4.0};

    assert_true(sfl_dvec_dot(x, y, 5) == 2.0 - 2.0 + 0.0 - 3.5 + 1.0);
    assert_true(sfl_dvec_dot(x, y, 0) == 0.0);
    sfl_dvec_axpy(2.0, x, y, 5);
    const double want[5] = {4.0, -3.0, 7.0, 6.0, 4.5};
    for (int i = 0; i < 5; i++)
        assert_true(y[i] == want[i]);
    sfl_dvec_scale(-0.5, y, 5);
    assert_true(y[0] == -2.0 && y[1] == 1.5 && y[3] == -3.0);
    assert_int_equal(sfl_dvec_nnz(x, 5), 4);
    assert_int_equal(sfl_dvec_nnz(x, 0), 0);
    const double z[3] = {0.0, -0.0, 0.0};
    assert_int_equal(sfl_dvec_nnz(z, 3), 0);
}

/* Entries entering plus entries leaving the support, never a change of value
 * on it. */
static void test_vec_support_diff(void **state)
{
    (void)state;
    const double a[6] = {1.0, 0.0, -2.0, 0.0, 5.0, 0.0};
    const double b[6] = {3.0, 4.0, 0.0, 0.0, -0.0, NAN}; /* in: 1, 5; out: 2, 4 */
    const double z[3] = {0.0, -0.0, 0.0};

    assert_int_equal(sfl_dvec_support_diff(a, b, 6), 4);
    assert_int_equal(sfl_dvec_support_diff(b, a, 6), 4);
    assert_int_equal(sfl_dvec_support_diff(a, a, 6), 0);
    assert_int_equal(sfl_dvec_support_diff(a, b, 2), 1);  /* entry 1 enters */
    assert_int_equal(sfl_dvec_support_diff(z, a, 3), 2);  /* from nothing: nnz */
    /* the same from x's support kept as bits, across a byte's end */
    {
        double x[11] = {0}, y[11] = {0};
        uint8_t bits[2];

        x[0] = 1, x[8] = -0.0, x[9] = 2, x[10] = NAN;
        y[0] = 3, y[3] = 1, y[8] = 5, y[10] = 0;
        sfl_dvec_support_bits(x, 11, bits);
        assert_int_equal(bits[0], 0x01);
        assert_int_equal(bits[1], 0x06);
        assert_int_equal(sfl_dvec_support_bits_diff(bits, y, 11), sfl_dvec_support_diff(x, y, 11));
        assert_int_equal(sfl_dvec_support_bits_diff(bits, y, 11), 4); /* in: 3, 8; out: 9, 10 */
        sfl_dvec_support_bits(a, 6, bits);
        assert_int_equal(sfl_dvec_support_bits_diff(bits, b, 6), 4);
    }
    assert_int_equal(sfl_dvec_support_diff(a, z, 3), sfl_dvec_nnz(a, 3));
    assert_int_equal(sfl_dvec_support_diff(a, b, 0), 0);
}

static void test_vec_dot_sequential_order(void **state)
{
    (void)state;
    /* 1e16 + 1 - 1e16 in left-to-right order loses the 1; a reordered or
     * pairwise sum would keep it. The contract is the sequential order. */
    const double x[3] = {1e16, 1.0, -1e16};
    const double ones[3] = {1.0, 1.0, 1.0};

    assert_true(sfl_dvec_dot(x, ones, 3) == 0.0);
}

static void test_vec_nrm2(void **state)
{
    (void)state;
    const double a[2] = {3.0, -4.0};
    assert_true(sfl_dvec_nrm2(a, 2) == 5.0);
    assert_true(sfl_dvec_nrm2(a, 0) == 0.0);
    const double zero[3] = {0.0, -0.0, 0.0};
    assert_true(sfl_dvec_nrm2(zero, 3) == 0.0);
    /* Would overflow (1e400) or underflow (1e-400) if squared naively. */
    const double big[2] = {3e200, 4e200};
    assert_true(fabs(sfl_dvec_nrm2(big, 2) - 5e200) <= 5e200 * 4 * DBL_EPSILON);
    const double tiny[2] = {3e-200, -4e-200};
    assert_true(fabs(sfl_dvec_nrm2(tiny, 2) - 5e-200) <= 5e-200 * 4 * DBL_EPSILON);
    const double sub[1] = {1e-310};
    assert_true(sfl_dvec_nrm2(sub, 1) == 1e-310);
    const double inf[2] = {1.0, -INFINITY};
    assert_true(isinf(sfl_dvec_nrm2(inf, 2)));
    const double nan[2] = {NAN, 1e300};
    assert_true(isnan(sfl_dvec_nrm2(nan, 2)));
}

static void test_vec_new_free(void **state)
{
    (void)state;
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_new(100, 0, &v), 0);
    assert_non_null(v);
    assert_int_equal(v->dim, 100);
    assert_int_equal(v->nnz, 0);
    assert_int_equal(v->cap, 0);
    assert_int_equal(sfl_spvec_validate(v), 0);
    assert_int_equal(sfl_spvec_reserve(v, 10), 0);
    assert_true(v->cap >= 10);
    v->idx[0] = 5;
    v->val[0] = 1.5;
    v->nnz = 1;
    assert_int_equal(sfl_spvec_reserve(v, 3), 0); /* never shrinks */
    assert_int_equal(sfl_spvec_reserve(v, 1000), 0);
    assert_int_equal(v->idx[0], 5);
    assert_true(v->val[0] == 1.5);
    sfl_spvec_free(v);
    sfl_spvec_free(NULL);
}

static void test_vec_from_dense(void **state)
{
    (void)state;
    const double x[8] = {0.0, 1.0, 0.0, -0.0, -2.5, 0.0, 0.0, 1e-300};
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_new(8, 0, &v), 0);
    assert_int_equal(sfl_spvec_from_dense(v, x), 0);
    assert_int_equal(v->nnz, 3);
    assert_int_equal(v->idx[0], 1);
    assert_int_equal(v->idx[1], 4);
    assert_int_equal(v->idx[2], 7);
    assert_true(v->val[0] == 1.0 && v->val[1] == -2.5 && v->val[2] == 1e-300);
    assert_int_equal(sfl_spvec_validate(v), 0);

    double y[8];
    for (int i = 0; i < 8; i++)
        y[i] = 9.0;
    sfl_spvec_scatter(v, y);
    assert_true(y[0] == 9.0 && y[1] == 1.0 && y[4] == -2.5 && y[7] == 1e-300);

    /* Non-finite input is refused and v is left as it was. */
    const double bad[8] = {0.0, 1.0, INFINITY, 0.0, 0.0, 0.0, 0.0, 0.0};
    assert_int_equal(sfl_spvec_from_dense(v, bad), SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "2"));
    assert_int_equal(v->nnz, 3);
    const double nan[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, NAN};
    assert_int_equal(sfl_spvec_from_dense(v, nan), SFL_ENUMERIC);
    assert_int_equal(v->idx[2], 7);

    const double zeros[8] = {0};
    assert_int_equal(sfl_spvec_from_dense(v, zeros), 0);
    assert_int_equal(v->nnz, 0);
    sfl_spvec_free(v);
}

static void test_vec_gather(void **state)
{
    (void)state;
    const double x[6] = {1.0, 2.0, 0.0, 4.0, 5.0, 6.0};
    const uint32_t idx[3] = {0, 2, 5};
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_new(6, 1, &v), 0);
    assert_int_equal(sfl_spvec_gather(v, x, idx, 3), 0);
    assert_int_equal(v->nnz, 3);
    assert_int_equal(v->idx[1], 2);
    assert_true(v->val[0] == 1.0 && v->val[1] == 0.0 && v->val[2] == 6.0); /* zero kept */
    assert_int_equal(sfl_spvec_gather(v, x, idx, 0), 0);
    assert_int_equal(v->nnz, 0);

    const uint32_t unsorted[2] = {3, 1};
    assert_int_equal(sfl_spvec_gather(v, x, unsorted, 2), SFL_EINVAL);
    const uint32_t dup[2] = {3, 3};
    assert_int_equal(sfl_spvec_gather(v, x, dup, 2), SFL_EINVAL);
    const uint32_t out_of_range[2] = {3, 6};
    assert_int_equal(sfl_spvec_gather(v, x, out_of_range, 2), SFL_ERANGE);
    const uint32_t seven[7] = {0, 1, 2, 3, 4, 5, 6};
    assert_int_equal(sfl_spvec_gather(v, x, seven, 7), SFL_EINVAL);
    const double xn[6] = {1.0, NAN, 0.0, 4.0, 5.0, 6.0};
    const uint32_t one[1] = {1};
    assert_int_equal(sfl_spvec_gather(v, xn, one, 1), SFL_ENUMERIC);
    assert_int_equal(v->nnz, 0);
    sfl_spvec_free(v);
}

static void test_vec_sparse_ops(void **state)
{
    (void)state;
    sfl_spvec_t *u = NULL, *v = NULL;
    const double xu[10] = {1, 0, 2, 0, 0, 3, 0, 0, 0, 4};
    const double xv[10] = {0, 5, 6, 0, 0, -1, 0, 0, 7, 0.5};

    assert_int_equal(sfl_spvec_new(10, 0, &u), 0);
    assert_int_equal(sfl_spvec_new(10, 0, &v), 0);
    assert_int_equal(sfl_spvec_from_dense(u, xu), 0);
    assert_int_equal(sfl_spvec_from_dense(v, xv), 0);
    /* common indices 2, 5, 9: 12 - 3 + 2 */
    assert_true(sfl_spvec_dot(u, v) == 11.0);
    assert_true(sfl_spvec_dot(v, u) == 11.0);
    assert_true(sfl_spvec_dot_dense(u, xv) == 11.0);

    double y[10];
    memcpy(y, xv, sizeof(y));
    sfl_spvec_axpy(-2.0, u, y);
    const double want[10] = {-2, 5, 2, 0, 0, -7, 0, 0, 7, -7.5};
    for (int i = 0; i < 10; i++)
        assert_true(y[i] == want[i]);

    sfl_spvec_t *e = NULL;
    assert_int_equal(sfl_spvec_new(10, 0, &e), 0);
    assert_true(sfl_spvec_dot(u, e) == 0.0);
    assert_true(sfl_spvec_dot_dense(e, y) == 0.0);
    sfl_spvec_free(e);
    sfl_spvec_free(u);
    sfl_spvec_free(v);
}

static void test_vec_sparse_random(void **state)
{
    (void)state;
    /* Sparse dot and axpy against the dense kernels on random supports. */
    enum { D = 500 };
    double a[D], b[D], y1[D], y2[D];
    sfl_spvec_t *u = NULL, *v = NULL;
    sfl_rng_t rng;

    sfl_rng_seed(&rng, 1, 0, 0, SFL_STREAM_DATA);
    assert_int_equal(sfl_spvec_new(D, 0, &u), 0);
    assert_int_equal(sfl_spvec_new(D, 0, &v), 0);
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < D; i++) {
            /* integers keep every sum exact, so any order gives one answer */
            a[i] = sfl_rng_below(&rng, 4) == 0 ? (double)sfl_rng_below(&rng, 21) - 10.0 : 0.0;
            b[i] = sfl_rng_below(&rng, 3) == 0 ? (double)sfl_rng_below(&rng, 21) - 10.0 : 0.0;
            y1[i] = y2[i] = (double)i;
        }
        assert_int_equal(sfl_spvec_from_dense(u, a), 0);
        assert_int_equal(sfl_spvec_from_dense(v, b), 0);
        assert_int_equal(u->nnz, sfl_dvec_nnz(a, D));
        assert_true(sfl_spvec_dot(u, v) == sfl_dvec_dot(a, b, D));
        assert_true(sfl_spvec_dot_dense(u, b) == sfl_dvec_dot(a, b, D));
        sfl_spvec_axpy(3.0, u, y1);
        sfl_dvec_axpy(3.0, a, y2, D);
        assert_memory_equal(y1, y2, sizeof(y1));
    }
    sfl_spvec_free(u);
    sfl_spvec_free(v);
}

static void test_vec_validate(void **state)
{
    (void)state;
    sfl_spvec_t *v = NULL;

    assert_int_equal(sfl_spvec_validate(NULL), SFL_EINVAL);
    assert_int_equal(sfl_spvec_new(10, 4, &v), 0);
    v->nnz = 3;
    v->idx[0] = 1;
    v->idx[1] = 4;
    v->idx[2] = 9;
    v->val[0] = v->val[1] = v->val[2] = 1.0;
    assert_int_equal(sfl_spvec_validate(v), 0);

    v->idx[2] = 10;
    assert_int_equal(sfl_spvec_validate(v), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "entry 2"));
    v->idx[2] = 4;
    assert_int_equal(sfl_spvec_validate(v), SFL_EPARSE); /* duplicate */
    assert_non_null(strstr(sfl_last_error(), "entry 2"));
    v->idx[2] = 3;
    assert_int_equal(sfl_spvec_validate(v), SFL_EPARSE); /* decreasing */
    v->idx[2] = 9;
    v->val[1] = INFINITY;
    assert_int_equal(sfl_spvec_validate(v), SFL_ENUMERIC);
    assert_non_null(strstr(sfl_last_error(), "entry 1"));
    v->val[1] = NAN;
    assert_int_equal(sfl_spvec_validate(v), SFL_ENUMERIC);
    v->val[1] = 2.0;
    v->nnz = 5;
    assert_int_equal(sfl_spvec_validate(v), SFL_EPARSE); /* nnz > cap */
    v->nnz = 3;
    v->dim = 2;
    assert_int_equal(sfl_spvec_validate(v), SFL_EPARSE); /* nnz > dim */
    v->dim = 10;
    assert_int_equal(sfl_spvec_validate(v), 0);
    sfl_spvec_free(v);
}

static sfl_spvec_t *fa_vec;

static int fa_new_fill(void)
{
    const double x[6] = {0, 1, 0, 2, 3, 0};
    int rc = sfl_spvec_new(6, 1, &fa_vec);

    if (rc < 0)
        return rc;
    return sfl_spvec_from_dense(fa_vec, x);
}

static void test_vec_failalloc(void **state)
{
    (void)state;
    /* Every allocation in new + reserve fails in turn; each must give
     * SFL_ENOMEM and leave something sfl_spvec_free can release. */
    FAILALLOC_EACH(fa_new_fill(), {
        if (fa_rc_ == 0) {
            assert_int_equal(fa_vec->nnz, 3);
            assert_int_equal(sfl_spvec_validate(fa_vec), 0);
        } else if (fa_vec != NULL) {
            assert_int_equal(fa_vec->nnz, 0);
            assert_int_equal(sfl_spvec_validate(fa_vec), 0);
        }
        sfl_spvec_free(fa_vec);
        fa_vec = NULL;
    });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_dense_kernels),
        cmocka_unit_test(test_vec_support_diff),
        cmocka_unit_test(test_vec_dot_sequential_order),
        cmocka_unit_test(test_vec_nrm2),
        cmocka_unit_test(test_vec_new_free),
        cmocka_unit_test(test_vec_from_dense),
        cmocka_unit_test(test_vec_gather),
        cmocka_unit_test(test_vec_sparse_ops),
        cmocka_unit_test(test_vec_sparse_random),
        cmocka_unit_test(test_vec_validate),
        cmocka_unit_test(test_vec_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

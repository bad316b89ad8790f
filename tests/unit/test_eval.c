#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/core/alloc.h"
#include "sfl/model/eval.h"

static void test_eval_support(void **state)
{
    (void)state;
    const double x[6] = {0, 1, 0, -2, 3, 0};
    const uint32_t s[3] = {1, 2, 3};
    double pr, rec;

    sfl_eval_support(x, 6, s, 3, &pr, &rec);
    assert_true(fabs(pr - 2.0 / 3) < 1e-15);
    assert_true(fabs(rec - 2.0 / 3) < 1e-15);
    const double z[6] = {0};
    sfl_eval_support(z, 6, s, 3, &pr, &rec);
    assert_true(pr == 1.0 && rec == 0.0);
    sfl_eval_support(x, 6, NULL, 0, &pr, &rec);
    assert_true(pr == 0.0 && rec == 1.0);
}

static void test_eval_rel_error(void **state)
{
    (void)state;
    const double t[3] = {3, 0, 4}, x[3] = {3, 0, 4}, y[3] = {0, 0, 0};

    assert_true(sfl_eval_rel_error(x, t, 3) == 0.0);
    assert_true(sfl_eval_rel_error(y, t, 3) == 1.0);
    assert_true(isnan(sfl_eval_rel_error(x, y, 3)));
}

static sfl_dataset_t *one_col(const double *z, const double *y, uint32_t n)
{
    sfl_csr_t *X;
    sfl_dataset_t *ds;
    double *yy = sfl__mallocarray(n, sizeof(double));

    assert_int_equal(sfl_csr_from_dense(z, n, 1, &X), 0);
    memcpy(yy, y, n * sizeof(double));
    assert_int_equal(sfl_dataset_new(X, yy, &ds), 0);
    return ds;
}

static void test_eval_objective_weights(void **state)
{
    (void)state;
    /* f_1(x) = (x - 1)^2, f_2(x) = (x - 3)^2 at x = 0: 1 and 9. */
    const double z[1] = {1}, y1[1] = {1}, y2[1] = {3};
    sfl_dataset_t *c[2] = {one_col(z, y1, 1), one_col(z, y2, 1)};
    double w[2] = {3, 1}, x[1] = {0};

    assert_true(fabs(sfl_eval_objective(&sfl_loss_lsq, c, 2, w, x, 0) - 3.0) < 1e-15);
    w[0] = 0;
    assert_true(fabs(sfl_eval_objective(&sfl_loss_lsq, c, 2, w, x, 0) - 9.0) < 1e-15);
    w[1] = 0;
    assert_true(isnan(sfl_eval_objective(&sfl_loss_lsq, c, 2, w, x, 0)));
    sfl_dataset_free(c[0]);
    sfl_dataset_free(c[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eval_support),
        cmocka_unit_test(test_eval_rel_error),
        cmocka_unit_test(test_eval_objective_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

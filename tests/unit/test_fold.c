/* The framework's fold: weighted sum, the algorithms' finish hooks, and the
 * checks every update passes before it touches the sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "failalloc.h"
#include "testutil.h"
#include "sfl/algo/algo.h"
#include "sfl/core/error.h"
#include "sfl/algo/fold.h"
#include "testfed.h"

static sfl_spvec_t *vec(const double *d, uint32_t n)
{
    sfl_spvec_t *v;

    assert_int_equal(sfl_spvec_new(n, 0, &v), 0);
    assert_int_equal(sfl_spvec_from_dense(v, d), 0);
    return v;
}

/* A refused update leaves sum, weight_sum and count as they were, and the
 * round still finishes with the honest updates. */
static void test_fold_hostile_updates(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t f;
    sfl_fold_limits_t lim = {.max_norm = 100, .max_weight = 1000};
    const double honest[4] = {1, 2, 0, 4}, huge[4] = {0, 1e300, 1e300, 0},
                 big[4] = {0, 0, 101, 0}, edge[4] = {0, 0, 100, 0};
    double g[4] = {0}, before[4];
    sfl_spvec_t *h = vec(honest, 4), *x = vec(huge, 4), *b = vec(big, 4), *e = vec(edge, 4);

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, &lim), 0);
    sfl_fold_begin(&f);
    assert_int_equal(sfl_fold_add(&f, h, 10), 0);
    memcpy(before, f.sum, sizeof(before));

    /* Non-finite values (a decoder should never let them through; the
     * fold does not rely on it). */
    x->val[0] = NAN;
    assert_int_equal(sfl_fold_add(&f, x, 1), SFL_ENUMERIC);
    assert_string_equal(sfl_last_error(), "update value at index 1 is not finite");
    x->val[0] = INFINITY;
    assert_int_equal(sfl_fold_add(&f, x, 1), SFL_ENUMERIC);
    /* Finite values whose weighted sum would overflow: the norm is
     * inf in double, above every bound. */
    x->val[0] = 1e300;
    assert_int_equal(sfl_fold_add(&f, x, 1), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "above the job's max_update_norm 100"));
    /* Norm just above and at the bound. */
    assert_int_equal(sfl_fold_add(&f, b, 1), SFL_ELIMIT);
    assert_string_equal(sfl_last_error(), "update norm 101 is above the job's max_update_norm 100");
    /* Declared samples above the cap, zero, negative, NaN. */
    assert_int_equal(sfl_fold_add(&f, h, 1000.5), SFL_ELIMIT);
    assert_string_equal(sfl_last_error(),
                        "declared samples 1000.5 are above the job's max_samples 1000");
    assert_int_equal(sfl_fold_add(&f, h, 0), SFL_EINVAL);
    assert_int_equal(sfl_fold_add(&f, h, -3), SFL_EINVAL);
    assert_int_equal(sfl_fold_add(&f, h, NAN), SFL_EINVAL);
    assert_int_equal(sfl_fold_add(&f, h, INFINITY), SFL_EINVAL);
    /* Nothing refused reached the sum. */
    assert_memory_equal(f.sum, before, sizeof(before));
    assert_true(f.weight_sum == 10);
    assert_int_equal(f.count, 1);
    /* The edges are accepted: norm == bound, weight == cap. */
    assert_int_equal(sfl_fold_check(&f, e, 1000), 0);
    assert_int_equal(sfl_fold_add(&f, h, 30), 0);
    assert_int_equal(sfl_fold_finish(&f, g), 0);
    assert_memory_equal(g, honest, sizeof(g)); /* the honest mean */
    for (int i = 0; i < 4; i++)
        assert_true(isfinite(g[i]));
    sfl_fold_close(&f);
    sfl_spvec_free(h);
    sfl_spvec_free(x);
    sfl_spvec_free(b);
    sfl_spvec_free(e);
}

/* Defaults when a job sets no bound; bad bounds refused. */
static void test_fold_limits(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t f;
    sfl_fold_limits_t bad = {.max_norm = -1};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 3, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, NULL), 0);
    assert_true(f.limits.max_norm == SFL_FOLD_MAX_NORM);
    assert_true(f.limits.max_weight == SFL_FOLD_MAX_WEIGHT);
    sfl_fold_close(&f);
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, &bad), SFL_EINVAL);
    sfl_fold_close(&f);
    bad = (sfl_fold_limits_t){.max_weight = NAN};
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, &bad), SFL_EINVAL);
    sfl_fold_close(&f);
    /* The defaults keep the worst admissible round finite: 1e4 updates at
     * the bounds sum to 1e21 per entry. */
    assert_true(1e4 * SFL_FOLD_MAX_NORM * SFL_FOLD_MAX_WEIGHT < DBL_MAX / 1e100);
}

/* Every algorithm's finish runs through the fold and gives the same bits
 * as the plain weighted mean (before its own step) would. */
static void test_fold_every_algorithm(void **state)
{
    (void)state;
    sfl_synth_t *s = testfed_small_sparse();
    sfl_algo_params_t p;

    testfed_params_default(&p);
    testfed_set(&p, "tau", 8);
    testfed_set(&p, "batch", 10);
    testfed_set(&p, "lr", 0.02);
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        if ((*a)->shape == SFL_SHAPE_VERTICAL)
            continue; /* no fold: test_bcfw runs them */
        double e1 = testfed_run_synth(*a, s, &p, 3, TESTFED_ANY, NULL, NULL);

        assert_true(isfinite(e1));
    }
    sfl_synth_free(s);
}

/* sfl_fold_mix, the personalized algorithms' server step:
 * w <- (1 - beta) w + beta sum_i p_i w_i, p_i by weight; beta = 1 (the
 * default) is the weighted mean. */
static void test_fold_mix(void **state)
{
    (void)state;
    const sfl_algo_t *algos[] = {&sfl_algo_fedmac, &sfl_algo_pfedme, &sfl_algo_perfedavg};
    const double va[] = {1.0, 0.0, 4.0}, vb[] = {3.0, 2.0, 0.0};
    const double mean[] = {2.5, 1.5, 1.0}; /* (1 va + 3 vb) / 4 */
    sfl_problem_t prob;
    sfl_spvec_t *a = NULL, *b = NULL;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 3, 0), 0);
    assert_int_equal(sfl_spvec_new(3, 0, &a), 0);
    assert_int_equal(sfl_spvec_new(3, 0, &b), 0);
    assert_int_equal(sfl_spvec_from_dense(a, va), 0);
    assert_int_equal(sfl_spvec_from_dense(b, vb), 0);
    for (size_t k = 0; k < 3; k++) {
        for (int mixed = 0; mixed < 2; mixed++) {
            double beta = mixed ? 0.25 : 1.0, global[] = {10.0, -10.0, 1.0};
            sfl_algo_params_t p;
            sfl_fold_t fold;

            assert_true(algos[k]->finish == sfl_fold_mix);
            sfl_algo_params_default(algos[k], &p);
            if (mixed)
                assert_int_equal(sfl_algo_param_set(&p, "beta", beta), 0);
            assert_int_equal(sfl_fold_init(&fold, algos[k], &p, &prob, NULL), 0);
            sfl_fold_begin(&fold);
            assert_int_equal(sfl_fold_add(&fold, a, 1), 0);
            assert_int_equal(sfl_fold_add(&fold, b, 3), 0);
            assert_int_equal(sfl_fold_finish(&fold, global), 0);
            sfl_fold_close(&fold);
            assert_close(global[0], (1 - beta) * 10 + beta * mean[0], 1e-15, 0);
            assert_close(global[1], (1 - beta) * -10 + beta * mean[1], 1e-15, 0);
            assert_close(global[2], (1 - beta) * 1 + beta * mean[2], 1e-15, 0);
        }
    }
    sfl_spvec_free(a);
    sfl_spvec_free(b);
}

static void test_fold_alloc(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t f;

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 50, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedht, &p);
    FAILALLOC_EACH(sfl_fold_init(&f, &sfl_algo_fedht, &p, &prob, NULL), sfl_fold_close(&f));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_hostile_updates),
        cmocka_unit_test(test_fold_limits),
        cmocka_unit_test(test_fold_every_algorithm),
        cmocka_unit_test(test_fold_mix),
        cmocka_unit_test(test_fold_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

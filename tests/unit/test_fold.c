/* The framework's fold: weighted sum, the algorithms' finish hooks, and the
 * checks every update passes before it touches the sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
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

/* d entries above SFL_FOLD_TILED_DIM (the tiled sweep), n sparse updates
 * with seeded supports and values; the last update is dense. */
#define MANY_D (SFL_FOLD_TILED_DIM + 3 * SFL_FOLD_TILE + 5)

static sfl_spvec_t *many_update(uint32_t seed, uint32_t nnz)
{
    sfl_spvec_t *v;
    uint32_t x = seed * 2654435761u + 1, m = 0;

    assert_int_equal(sfl_spvec_new(MANY_D, nnz, &v), 0);
    /* nnz increasing indices: a random gap, ending before MANY_D */
    for (uint32_t i = 0; m < nnz && i < MANY_D; i++) {
        x = x * 1664525u + 1013904223u;
        if (nnz == MANY_D || (x >> 8) % (MANY_D / nnz) == 0) {
            v->idx[m] = i;
            v->val[m] = ((double)(x >> 11) / (double)(1u << 21)) - 1.0 / 3;
            m++;
        }
    }
    v->nnz = m;
    assert_int_equal(sfl_spvec_validate(v), 0);
    return v;
}

/* add_many gives the bits of sfl_fold_add in item order, round after
 * round (begin resets what the last round touched, the cursors grow and
 * are reused), skipping NULL slots; a round of none adds nothing. */
static void test_fold_add_many(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t a, b;
    sfl_fold_item_t it[7];
    const double w[7] = {60, 0.1, 3, 1e5, 7, 0.3, 11};
    const uint32_t sizes[3] = {3, 7, 2};

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, MANY_D, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_fold_init(&a, &sfl_algo_fedavg, &p, &prob, NULL), 0);
    assert_int_equal(sfl_fold_init(&b, &sfl_algo_fedavg, &p, &prob, NULL), 0);
    for (uint32_t i = 0; i < 7; i++)
        it[i] = (sfl_fold_item_t){many_update(i + 1, i == 6 ? MANY_D : 2000 + 500 * i), w[i]};
    for (int r = 0; r < 3; r++) {
        uint32_t n = sizes[r];
        sfl_spvec_t *hole = it[1].update;

        if (r == 1)
            it[1].update = NULL; /* an empty cohort slot */
        sfl_fold_begin(&a);
        sfl_fold_begin(&b);
        for (uint32_t i = 0; i < n; i++)
            if (it[i].update != NULL)
                assert_int_equal(sfl_fold_add(&a, it[i].update, it[i].weight), 0);
        assert_int_equal(sfl_fold_add_many(&b, it, n), 0);
        assert_true(b.ncursor >= n);
        assert_int_equal(b.count, a.count);
        assert_true(b.weight_sum == a.weight_sum);
        assert_memory_equal(b.sum, a.sum, MANY_D * sizeof(double));
        it[1].update = hole;
    }
    assert_int_equal(b.ncursor, 7);
    /* None: nothing added, the sum stays as begin left it. */
    sfl_fold_begin(&b);
    assert_int_equal(sfl_fold_add_many(&b, it, 0), 0);
    assert_int_equal(b.count, 0);
    assert_true(b.weight_sum == 0);
    for (uint32_t j = 0; j < MANY_D; j++)
        assert_true(b.sum[j] == 0);
    double g[1] = {0};
    assert_int_equal(sfl_fold_finish(&b, g), SFL_EEMPTY);
    for (uint32_t i = 0; i < 7; i++)
        sfl_spvec_free(it[i].update);
    sfl_fold_close(&a);
    sfl_fold_close(&b);
}

/* One refused item (a NaN, a weight of 0, a wrong dimension) and nothing
 * changes, whatever its place; growing the cursors may fail (ENOMEM),
 * also without a change. */
static void test_fold_add_many_refused(void **state)
{
    (void)state;
    sfl_problem_t prob, small;
    sfl_algo_params_t p;
    sfl_fold_t f;
    sfl_fold_item_t it[3];
    sfl_spvec_t *other;
    double *before = malloc(MANY_D * sizeof(double));

    assert_non_null(before);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, MANY_D, 0), 0);
    assert_int_equal(sfl_problem_init(&small, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, NULL), 0);
    for (uint32_t i = 0; i < 3; i++)
        it[i] = (sfl_fold_item_t){many_update(i + 9, 1000), 2};
    assert_int_equal(sfl_spvec_new(4, 0, &other), 0);
    sfl_fold_begin(&f);
    assert_int_equal(sfl_fold_add(&f, it[0].update, 5), 0);
    memcpy(before, f.sum, MANY_D * sizeof(double));

    it[2].update->val[7] = NAN;
    assert_int_equal(sfl_fold_add_many(&f, it, 3), SFL_ENUMERIC);
    it[2].update->val[7] = 1;
    it[1].weight = 0;
    assert_int_equal(sfl_fold_add_many(&f, it, 3), SFL_EINVAL);
    it[1].weight = 2;
    sfl_spvec_t *keep = it[0].update;
    it[0].update = other;
    assert_int_equal(sfl_fold_add_many(&f, it, 3), SFL_EDIM);
    it[0].update = keep;
    assert_int_equal(f.count, 1);
    assert_true(f.weight_sum == 5);
    assert_memory_equal(f.sum, before, MANY_D * sizeof(double));

    FAILALLOC_EACH(sfl_fold_add_many(&f, it, 3),
                   if (fa_rc_ < 0) {
                       assert_int_equal(f.count, 1);
                       assert_memory_equal(f.sum, before, MANY_D * sizeof(double));
                   });
    assert_int_equal(f.count, 4);
    assert_int_equal(f.ncursor, 3);
    sfl_spvec_free(other);
    for (uint32_t i = 0; i < 3; i++)
        sfl_spvec_free(it[i].update);
    sfl_fold_close(&f);
    free(before);
}

/* A front-end's partial sum (fold mode): added as the sum of its updates
 * would have been, refused whole (nothing changed) when empty, weighted
 * above n x max_weight, not finite, or above the triangle bound. */
static void test_fold_add_partial(void **state)
{
    (void)state;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_fold_t f, g;
    sfl_fold_limits_t lim = {.max_norm = 10, .max_weight = 100};
    const double a[4] = {1, 2, 0, 4}, b[4] = {0, 3, 1, 0};
    double ps[4], before[4];
    sfl_spvec_t *va = vec(a, 4), *vb = vec(b, 4);

    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    sfl_algo_params_default(&sfl_algo_fedavg, &p);
    assert_int_equal(sfl_fold_init(&f, &sfl_algo_fedavg, &p, &prob, &lim), 0);
    assert_int_equal(sfl_fold_init(&g, &sfl_algo_fedavg, &p, &prob, &lim), 0);
    sfl_fold_begin(&f);
    sfl_fold_begin(&g);
    /* g: the updates one by one; f: one of them, then the other as a partial */
    assert_int_equal(sfl_fold_add(&g, va, 3), 0);
    assert_int_equal(sfl_fold_add(&g, vb, 5), 0);
    assert_int_equal(sfl_fold_add(&f, va, 3), 0);
    for (int i = 0; i < 4; i++)
        ps[i] = 5 * b[i];
    assert_int_equal(sfl_fold_add_partial(&f, ps, 5, 1), 0);
    assert_memory_equal(f.sum, g.sum, sizeof(ps));
    assert_true(f.weight_sum == g.weight_sum);
    assert_int_equal(f.count, 2);
    memcpy(before, f.sum, sizeof(before));
    /* refused, nothing changed */
    assert_int_equal(sfl_fold_add_partial(&f, ps, 5, 0), SFL_EINVAL);
    assert_int_equal(sfl_fold_add_partial(&f, ps, 0, 1), SFL_EINVAL);
    assert_int_equal(sfl_fold_add_partial(&f, ps, NAN, 1), SFL_EINVAL);
    assert_int_equal(sfl_fold_add_partial(&f, ps, 200.5, 2), SFL_ELIMIT);
    assert_string_equal(sfl_last_error(),
                        "partial weight 200.5 is above 2 x the job's max_samples 100");
    ps[2] = INFINITY;
    assert_int_equal(sfl_fold_add_partial(&f, ps, 5, 1), SFL_ENUMERIC);
    assert_string_equal(sfl_last_error(), "partial sum value at index 2 is not finite");
    /* norm 50.01 against 10 x 5 */
    ps[0] = 50.01;
    ps[1] = ps[2] = ps[3] = 0;
    assert_int_equal(sfl_fold_add_partial(&f, ps, 5, 1), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "above the job's max_update_norm 10 x its weight 5"));
    assert_memory_equal(f.sum, before, sizeof(before));
    assert_true(f.weight_sum == 8);
    assert_int_equal(f.count, 2);
    /* at the bound: accepted */
    ps[0] = 50;
    assert_int_equal(sfl_fold_add_partial(&f, ps, 5, 1), 0);
    assert_int_equal(f.count, 3);
    /* sfl_fold_check_limits: the fold's checks without a fold */
    assert_int_equal(sfl_fold_check_limits(&lim, 4, va, 3), 0);
    assert_int_equal(sfl_fold_check_limits(&lim, 5, va, 3), SFL_EDIM);
    assert_int_equal(sfl_fold_check_limits(&lim, 4, va, 101), SFL_ELIMIT);
    lim.max_norm = 1;
    assert_int_equal(sfl_fold_check_limits(&lim, 4, va, 3), SFL_ELIMIT);
    sfl_spvec_free(va);
    sfl_spvec_free(vb);
    sfl_fold_close(&f);
    sfl_fold_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_hostile_updates),
        cmocka_unit_test(test_fold_limits),
        cmocka_unit_test(test_fold_every_algorithm),
        cmocka_unit_test(test_fold_mix),
        cmocka_unit_test(test_fold_alloc),
        cmocka_unit_test(test_fold_add_many),
        cmocka_unit_test(test_fold_add_many_refused),
        cmocka_unit_test(test_fold_add_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sfl/algo/algo.h"
#include "sfl/algo/vertical.h"
#include "sfl/core/error.h"
#include "sfl/core/param.h"

static void test_param_names(void **state)
{
    (void)state;
    char longest[SFL_PARAM_NAME_LEN];

    assert_true(sfl_param_name_ok("lr"));
    assert_true(sfl_param_name_ok("local_steps"));
    assert_true(sfl_param_name_ok("eta2"));
    assert_false(sfl_param_name_ok(""));
    assert_false(sfl_param_name_ok("2eta"));
    assert_false(sfl_param_name_ok("_lr"));
    assert_false(sfl_param_name_ok("Lr"));
    assert_false(sfl_param_name_ok("local-steps"));
    assert_false(sfl_param_name_ok("l r"));
    assert_false(sfl_param_name_ok("lr\n"));
    memset(longest, 'a', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    assert_true(sfl_param_name_ok(longest));
    char toolong[SFL_PARAM_NAME_LEN + 1];
    memset(toolong, 'a', sizeof(toolong) - 1);
    toolong[sizeof(toolong) - 1] = '\0';
    assert_false(sfl_param_name_ok(toolong));
}

static void test_param_list(void **state)
{
    (void)state;
    sfl_param_list_t l;
    char name[16];

    memset(&l, 0, sizeof(l));
    assert_null(sfl_param_list_find(&l, "lr"));
    assert_int_equal(sfl_param_list_set(&l, "lr", 0.5), 0);
    assert_int_equal(sfl_param_list_set(&l, "tau", 3), 0);
    assert_int_equal(sfl_param_list_set(&l, "lr", 0.25), 0); /* replaces */
    assert_int_equal(l.n, 2);
    assert_true(sfl_param_list_find(&l, "lr")->value == 0.25);
    assert_true(sfl_param_list_find(&l, "tau")->value == 3);
    assert_int_equal(sfl_param_list_set(&l, "Bad name", 1), SFL_EINVAL);
    assert_int_equal(l.n, 2);
    for (int i = 2; i < SFL_PARAMS_MAX; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        assert_int_equal(sfl_param_list_set(&l, name, i), 0);
    }
    assert_int_equal(sfl_param_list_set(&l, "one_more", 1), SFL_ELIMIT);
    assert_int_equal(sfl_param_list_set(&l, "p7", 70), 0); /* a full list still updates */
    assert_true(sfl_param_list_find(&l, "p7")->value == 70);
    assert_int_equal(l.n, SFL_PARAMS_MAX);
}

/* Every algorithm's table: names valid and distinct, defaults within their
 * own ranges, fields inside the struct, the struct inside the holder. */
static void test_param_tables(void **state)
{
    (void)state;

    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        const sfl_algo_t *al = *a;
        sfl_algo_params_t p;
        sfl_param_list_t l, back;
        int sparsity = 0;

        assert_true(al->params_size <= SFL_ALGO_PARAMS_BYTES);
        for (const sfl_param_def_t *d = al->params; d && d->name; d++) {
            size_t w = d->type == SFL_PARAM_COUNT ? sizeof(uint32_t) : sizeof(double);

            assert_true(sfl_param_name_ok(d->name));
            assert_non_null(d->symbol);
            assert_non_null(d->doc);
            assert_true(d->offset + w <= al->params_size);
            assert_true(sfl_algo_param_find(al, d->name) == d); /* distinct */
            assert_true(sfl_algo_param_known(d->name));
            sparsity += (d->flags & SFL_PARAM_SPARSITY) != 0;
        }
        assert_int_equal(sparsity, al->sparse ? 1 : 0);
        /* The hooks a table's shape and state promise: a vertical table
         * runs through its own (sfl/algo/vertical.h), the others fold. */
        if (al->shape == SFL_SHAPE_VERTICAL) {
            assert_non_null(al->vertical->client_step);
            assert_non_null(al->vertical->server_step);
            assert_true(al->client_update == NULL && al->finish == NULL);
        } else {
            assert_non_null(al->client_update);
            assert_non_null(al->finish);
        }
        assert_true((al->state_size == NULL) == (al->state_init == NULL));
        if (al->shape == SFL_SHAPE_PERSONALIZED)
            assert_true(al->personal_model != NULL && al->state_size != NULL);
        assert_true((al->shape == SFL_SHAPE_VERTICAL) == (al->vertical != NULL));
        /* defaults round-trip through a list */
        sfl_algo_params_default(al, &p);
        sfl_algo_params_to_list(&p, &l);
        for (uint32_t i = 0; i < l.n; i++)
            assert_int_equal(sfl_algo_param_set(&p, l.v[i].name, l.v[i].value), 0);
        assert_int_equal(sfl_algo_params_from_list(al, &l, &p), 0);
        sfl_algo_params_to_list(&p, &back);
        assert_memory_equal(&l, &back, sizeof(l));
    }
    assert_false(sfl_algo_param_known("beta_nope"));
}

static void test_param_set_parse(void **state)
{
    (void)state;
    sfl_algo_params_t p;
    sfl_param_list_t l;

    sfl_algo_params_default(&sfl_algo_fedprox, &p);
    assert_true(sfl_algo_param_or(&p, "mu", -1) == 0.01);
    assert_true(sfl_algo_param_or(&p, "tau", -1) == -1); /* fedprox has none */
    assert_int_equal(sfl_algo_params_tau(&p), 0);
    assert_int_equal(sfl_algo_param_parse(&p, "mu", "0.5"), 0);
    assert_true(sfl_algo_param_or(&p, "mu", -1) == 0.5);
    assert_int_equal(sfl_algo_param_parse(&p, "mu", "half"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "mu: invalid value 'half' (a finite number)");
    assert_int_equal(sfl_algo_param_parse(&p, "mu", "inf"), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_parse(&p, "local_steps", "-3"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "local_steps: invalid value '-3' (a whole number)");
    assert_int_equal(sfl_algo_param_parse(&p, "local_steps", "99999999999"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "local_steps: must be at most 4.29497e+09, got 99999999999");
    assert_int_equal(sfl_algo_param_parse(&p, "local_steps", "7"), 0);
    assert_true(sfl_algo_param_or(&p, "local_steps", 0) == 7);
    assert_int_equal(sfl_algo_param_set(&p, "lr", 0), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "lr: must be > 0, got 0");
    assert_int_equal(sfl_algo_param_set(&p, "tau", 3), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "fedprox has no parameter 'tau' (its parameters: lr, "
                                          "local_steps, batch, lambda, mu)");
    /* a list: unknown names and names twice are refused */
    memset(&l, 0, sizeof(l));
    assert_int_equal(sfl_param_list_set(&l, "mu", 2), 0);
    assert_int_equal(sfl_algo_params_from_list(&sfl_algo_fedprox, &l, &p), 0);
    assert_true(sfl_algo_param_or(&p, "mu", -1) == 2);
    assert_true(sfl_algo_param_or(&p, "lr", -1) == 0.01); /* default */
    l.v[1] = l.v[0];
    l.n = 2;
    assert_int_equal(sfl_algo_params_from_list(&sfl_algo_fedprox, &l, &p), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "parameter 'mu' given twice");
    l.n = SFL_PARAMS_MAX + 1;
    assert_int_equal(sfl_algo_params_from_list(&sfl_algo_fedprox, &l, &p), SFL_ELIMIT);
}

/* The drivers of this release refuse a vertical algorithm clearly. */
static void test_param_vertical_refused(void **state)
{
    (void)state;
    static const sfl_vertical_ops_t ops = {0};
    sfl_algo_t v = sfl_algo_fedavg;
    sfl_algo_params_t p;
    sfl_problem_t prob;

    v.name = "vertical-toy";
    v.shape = SFL_SHAPE_VERTICAL;
    v.vertical = &ops;
    sfl_algo_params_default(&v, &p);
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, 4, 0), 0);
    assert_int_equal(sfl_algo_check(&v, &p, &prob), SFL_EUNSUP);
    assert_non_null(strstr(sfl_last_error(), "vertical-toy is a vertical algorithm"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_names),
        cmocka_unit_test(test_param_list),
        cmocka_unit_test(test_param_tables),
        cmocka_unit_test(test_param_set_parse),
        cmocka_unit_test(test_param_vertical_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "sfl/wire/msg.h"
#include "sfl/wire/roundmetrics.h"

/* The round-metric table (sfl/wire/roundmetrics.def) and the code it
 * drives everywhere: the fold, the means, a value's state, the progress. */

static const sfl_metric_job_t cls = {1, 0, 0}, pers = {1, 1, 0}, lsq = {0, 0, 0},
                              vert = {1, 0, 1};

static int find(const char *name)
{
    for (int id = 0; id < SFL_METRIC_COUNT; id++)
        if (strcmp(sfl_metrics[id].name, name) == 0)
            return id;
    return -1;
}

/* Every entry names a field of its type, a distinct SQL and CSV column, a
 * MEAN a WEIGHT to divide by; /metrics names are sfl_job_ with a help; what
 * the progress text shows is in JobStatus. */
static void test_roundmetrics_table(void **state)
{
    (void)state;
    assert_int_equal(find("train_loss"), SFL_METRIC_ID(train_loss));
    assert_int_equal(sfl_metrics[SFL_METRIC_ID(samples)].offset,
                     offsetof(sfl_round_metrics_t, samples));
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        const sfl_metric_t *d = &sfl_metrics[id];

        assert_true(d->sql[0] && d->csv[0]);
        assert_int_equal(d->type == SFL_METRIC_F64, d->fmt[0] != '\0');
        assert_int_equal(d->fold == SFL_METRIC_MEAN, d->weight >= 0);
        if (d->weight >= 0)
            assert_int_equal(sfl_metrics[d->weight].fold, SFL_METRIC_WEIGHT);
        if (d->prom[0]) {
            assert_memory_equal(d->prom, "sfl_job_", 8);
            assert_true(d->help[0]);
        }
        assert_int_equal(d->show != SFL_METRIC_SHOW_NONE, d->label[0] != '\0');
        /* sflctl's progress reads JobStatus: what it shows travels there,
         * with the weights its state depends on */
        if (d->show != SFL_METRIC_SHOW_NONE)
            assert_true(d->status && sfl_metrics[SFL_METRIC_ID(samples)].status);
        if (d->weight >= 0 && d->status)
            assert_true(sfl_metrics[d->weight].status);
        for (int o = 0; o < id; o++) {
            assert_string_not_equal(sfl_metrics[o].sql, d->sql);
            assert_string_not_equal(sfl_metrics[o].csv, d->csv);
        }
    }
}

/* Updates add up weighted; the means divide by the summed weights, exactly
 * as sums / weights in the updates' order; TOTALs pass, SETs are 0. */
static void test_roundmetrics_fold_means(void **state)
{
    sfl_payload_t a = {0}, b = {0};
    sfl_round_metrics_t sums = {0}, m;

    (void)state;
    a.samples = 30, a.train_loss = 0.5, a.eval_samples = 10, a.eval_accuracy = 0.9;
    a.personal_accuracy = 0.7;
    b.samples = 10, b.train_loss = 0.25, b.eval_samples = 30, b.eval_accuracy = 0.5;
    b.eval_mse = 2, b.personal_accuracy = 0.3;
    sfl_metrics_fold(&sums, &a);
    sfl_metrics_fold(&sums, &b);
    sums.bytes_down = 1234;
    sums.model_nnz = 9; /* SET: the round's own, not the fold's */
    sfl_metrics_means(&sums, &m);
    assert_int_equal(m.samples, 40);
    assert_int_equal(m.eval_samples, 40);
    assert_true(m.train_loss == (30 * 0.5 + 10 * 0.25) / 40.0);
    assert_true(m.eval_accuracy == (10 * 0.9 + 30 * 0.5) / 40.0);
    assert_true(m.eval_mse == (30 * 2.0) / 40.0);
    assert_true(m.personal_accuracy == (10 * 0.7 + 30 * 0.3) / 40.0);
    assert_int_equal(m.bytes_down, 1234);
    assert_int_equal(m.model_nnz, 0);
}

/* Saturating counts; a weight past INT64_MAX or a mean not finite drops
 * the weight and its means, not the others; a TOTAL saturates. */
static void test_roundmetrics_means_dropped(void **state)
{
    sfl_payload_t a = {0};
    sfl_round_metrics_t sums = {0}, m;

    (void)state;
    a.samples = UINT64_MAX - 1, a.train_loss = 1, a.eval_samples = 5, a.eval_accuracy = 1;
    sfl_metrics_fold(&sums, &a);
    sfl_metrics_fold(&sums, &a);
    assert_true(sums.samples == UINT64_MAX);
    sums.bytes_down = UINT64_MAX;
    sfl_metrics_means(&sums, &m);
    assert_int_equal(m.samples, 0);
    assert_true(m.train_loss == 0);
    assert_int_equal(m.eval_samples, 10);
    assert_true(m.eval_accuracy == 1);
    assert_true(m.bytes_down == INT64_MAX);

    memset(&sums, 0, sizeof(sums));
    a.samples = 4, a.eval_mse = INFINITY;
    sfl_metrics_fold(&sums, &a);
    sfl_metrics_means(&sums, &m);
    assert_int_equal(m.samples, 4);
    assert_int_equal(m.eval_samples, 0);
    assert_true(m.eval_accuracy == 0 && m.eval_mse == 0);
}

/* n/a where a job cannot have the metric, empty where the round has none. */
static void test_roundmetrics_state(void **state)
{
    sfl_round_metrics_t none = {0}, old = {0}, rep = {0}, priv = {0};

    (void)state;
    old.bytes_down = 100;
    rep = old, rep.samples = 8, rep.eval_samples = 2;
    priv = old, priv.privacy_iterations = 3;
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(train_loss), &rep, &cls), SFL_METRIC_VALUE);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(train_loss), &old, &cls), SFL_METRIC_EMPTY);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(train_loss), &old, &vert), SFL_METRIC_NA);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(eval_accuracy), &rep, &lsq), SFL_METRIC_NA);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(eval_mse), &rep, &lsq), SFL_METRIC_VALUE);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(personal_accuracy), &rep, &cls),
                     SFL_METRIC_NA);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(personal_accuracy), &rep, &pers),
                     SFL_METRIC_VALUE);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(model_nnz), &none, &cls), SFL_METRIC_EMPTY);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(model_nnz), &old, &vert), SFL_METRIC_VALUE);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(privacy_spent), &priv, &vert),
                     SFL_METRIC_VALUE);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(privacy_spent), &old, &vert), SFL_METRIC_NA);
    assert_int_equal(sfl_metric_state(SFL_METRIC_ID(privacy_spent), &none, &vert),
                     SFL_METRIC_EMPTY);
}

/* The columns a job's rounds can have (the status page's table). */
static void test_roundmetrics_applies(void **state)
{
    (void)state;
    assert_true(sfl_metric_applies(SFL_METRIC_ID(eval_accuracy), &cls));
    assert_false(sfl_metric_applies(SFL_METRIC_ID(eval_mse), &cls));
    assert_true(sfl_metric_applies(SFL_METRIC_ID(eval_mse), &lsq));
    assert_false(sfl_metric_applies(SFL_METRIC_ID(personal_accuracy), &cls));
    assert_true(sfl_metric_applies(SFL_METRIC_ID(personal_accuracy), &pers));
    assert_false(sfl_metric_applies(SFL_METRIC_ID(privacy_spent), &cls));
    assert_true(sfl_metric_applies(SFL_METRIC_ID(privacy_spent), &vert));
    assert_true(sfl_metric_applies(SFL_METRIC_ID(train_loss), &vert));
    assert_false(sfl_metric_applies(SFL_METRIC_ID(eval_samples), &vert));
    assert_true(sfl_metric_applies(SFL_METRIC_ID(support_churn), &cls));
    assert_false(sfl_metric_applies(SFL_METRIC_ID(support_churn), &vert));
}

/* The text sflctl jobs, watch and the status page show. */
static void test_roundmetrics_progress(void **state)
{
    sfl_round_metrics_t m = {0};
    char out[96];

    (void)state;
    assert_string_equal(sfl_metrics_progress(&m, &cls, out, sizeof(out)), "");
    m.samples = 4, m.train_loss = 0.123456;
    assert_string_equal(sfl_metrics_progress(&m, &cls, out, sizeof(out)), "loss 0.1235");
    m.eval_samples = 20, m.eval_accuracy = 0.95, m.eval_mse = 2.5, m.personal_accuracy = 0.975;
    assert_string_equal(sfl_metrics_progress(&m, &pers, out, sizeof(out)),
                        "loss 0.1235, accuracy 0.95, pacc 0.975 (20 held out)");
    assert_string_equal(sfl_metrics_progress(&m, &lsq, out, sizeof(out)),
                        "loss 0.1235, mse 2.5 (20 held out)");
    assert_string_equal(sfl_metrics_progress(&m, &lsq, out, 8), "loss 0.");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundmetrics_table),
        cmocka_unit_test(test_roundmetrics_fold_means),
        cmocka_unit_test(test_roundmetrics_means_dropped),
        cmocka_unit_test(test_roundmetrics_state),
        cmocka_unit_test(test_roundmetrics_applies),
        cmocka_unit_test(test_roundmetrics_progress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* client-agent/local.c: what the agent holds locally (the Join summary of
 * its rows; agent_new's loading is test_agent's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"

static sfl_dataset_t *dataset_from_targets(const double *y, uint32_t n)
{
    sfl_csr_t *X;
    double *yy = sfl__mallocarray(n, sizeof(double));
    sfl_dataset_t *ds;

    assert_non_null(yy);
    memcpy(yy, y, n * sizeof(double));
    assert_int_equal(sfl_csr_new(n, 3, 0, &X), 0);
    assert_int_equal(sfl_dataset_new(X, yy, &ds), 0);
    return ds;
}

static void test_local_summarize(void **state)
{
    static const double reg[] = {0.5, 1, 2, 2};
    static const double cls[] = {1, -1, 1, 1, -1};
    double many[300];
    sfl_dataset_summary_t s;
    sfl_dataset_t *ds;

    (void)state;
    ds = dataset_from_targets(reg, 4);
    assert_int_equal(agent_summarize(ds, &s), 0);
    assert_int_equal(s.samples, 4);
    assert_int_equal(s.dimension, 3);
    assert_int_equal(s.nlabels, 0); /* 0.5 is no class label */
    sfl_dataset_free(ds);

    ds = dataset_from_targets(cls, 5);
    assert_int_equal(agent_summarize(ds, &s), 0);
    assert_int_equal(s.nlabels, 2);
    assert_true(s.labels[0] == -1 && s.labels[1] == 1);
    sfl_dataset_free(ds);

    for (int i = 0; i < 300; i++)
        many[i] = i % 257; /* 257 distinct integers: too many classes */
    ds = dataset_from_targets(many, 300);
    assert_int_equal(agent_summarize(ds, &s), 0);
    assert_int_equal(s.nlabels, 0);
    sfl_dataset_free(ds);
    for (int i = 0; i < 300; i++)
        many[i] = 255 - i % 256; /* exactly 256 */
    ds = dataset_from_targets(many, 300);
    assert_int_equal(agent_summarize(ds, &s), 0);
    assert_int_equal(s.nlabels, 256);
    assert_true(s.labels[0] == 0 && s.labels[255] == 255);
    FAILALLOC_EACH(agent_summarize(ds, &s), (void)0);
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_summarize),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

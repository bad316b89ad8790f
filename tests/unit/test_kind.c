/* client-agent/kind.c: the agent's table of round kinds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kind.h"

/* A vertical task is the vertical kind whatever its update mode; mode 2
 * is secure aggregation, a statistics round's too; a sealed statistics
 * round is the statistics kind; anything else the plain update. */
static void test_shape_lookup(void **state)
{
    sfl_task_t t;

    (void)state;
    memset(&t, 0, sizeof(t));
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_update);
    t.statistics = 1;
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_stats);
    t.update_mode = SFL_UPDATE_MODE_SECURE_AGG;
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_secagg);
    t.statistics = 0;
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_secagg);
    t.rows = 8;
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_vertical);
    t.update_mode = SFL_UPDATE_MODE_SEALED;
    assert_ptr_equal(agent_shape_for(&t), &agent_shape_vertical);
    /* what the kinds' trains say: a statistics round keeps the client state */
    t.rows = 0;
    t.statistics = 1;
    assert_int_equal(agent_shape_stats.trains(&t), 0);
    assert_int_equal(agent_shape_secagg.trains(&t), 0);
    t.statistics = 0;
    assert_int_equal(agent_shape_update.trains(&t), 1);
    assert_int_equal(agent_shape_secagg.trains(&t), 1);
    /* a sealed result outlives a lost link (the outbox); a secure
     * aggregation input belongs to its link's round and is dropped */
    assert_int_equal(agent_shape_update.outbox, 1);
    assert_int_equal(agent_shape_stats.outbox, 1);
    assert_int_equal(agent_shape_secagg.outbox, 0);
    assert_int_equal(agent_shape_vertical.outbox, 0);
}

/* Stage messages go to the kind that names their letter: 's' vertical
 * steps, 'a' secure aggregation stages; a task or a wait is no stage. */
static void test_shape_staged(void **state)
{
    (void)state;
    assert_ptr_equal(agent_shape_staged('s'), &agent_shape_vertical);
    assert_ptr_equal(agent_shape_staged('a'), &agent_shape_secagg);
    assert_null(agent_shape_staged('t'));
    assert_null(agent_shape_staged('w'));
    assert_null(agent_shape_staged(0));
}

/* Every entry is whole: a task operation; work comes with trains and
 * trained; a stage letter with its handler, each letter once; the last
 * entry claims every task; indices round-trip. */
static void test_shape_table(void **state)
{
    sfl_task_t t;

    (void)state;
    memset(&t, 0, sizeof(t));
    assert_true(agent_nshapes >= 4);
    for (size_t i = 0; i < agent_nshapes; i++) {
        const agent_shape_t *s = agent_shapes[i];

        assert_non_null(s->name);
        assert_non_null(s->job_kind);
        assert_non_null(s->claims);
        assert_non_null(s->task);
        assert_int_equal(s->work != NULL, s->trained != NULL);
        assert_int_equal(s->work != NULL, s->trains != NULL);
        assert_int_equal(s->stage_kind != 0, s->stage != NULL);
        assert_int_equal(agent_shape_index(s), i);
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(agent_shapes[j]->name, s->name);
            assert_true(s->stage_kind == 0 || agent_shapes[j]->stage_kind != s->stage_kind);
        }
    }
    assert_true(agent_shapes[agent_nshapes - 1]->claims(&t));
    assert_int_equal(agent_shape_index(NULL), agent_nshapes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_lookup),
        cmocka_unit_test(test_shape_staged),
        cmocka_unit_test(test_shape_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

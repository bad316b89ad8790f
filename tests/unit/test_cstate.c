/* client-agent/cstate.c: the job's client state across rounds, kept
 * pending until a later task says its round committed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_int.h"
#include "sfl/core/file.h"

typedef struct fx {
    char dir[64];
    agent_ctx_t a;
    sfl_task_t task;
    agent_work_t w;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_cstate.XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->a.cfg.state_dir, sizeof(f->a.cfg.state_dir), "%s", f->dir);
    f->a.log = NULL; /* silent */
    f->w.task = &f->task;
    *state = f;
    return 0;
}

static void rm(const fx_t *f, const char *name)
{
    char p[128];

    snprintf(p, sizeof(p), "%s/%s", f->dir, name);
    (void)unlink(p);
}

static int teardown(void **state)
{
    fx_t *f = *state;

    agent__cstate_clear(&f->a);
    rm(f, "client-state-5.bin");
    rm(f, "client-state-5.pending");
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The round `round` of job 5 trained and left bytes s. */
static void trained(fx_t *f, uint64_t round, const char *s)
{
    f->task.job_id = 5;
    f->task.round = round;
    f->w.cs.out = (uint8_t *)s;
    f->w.cs.out_len = strlen(s);
    agent__cstate_save(&f->a, &f->w);
}

static int exists(const fx_t *f, const char *name)
{
    char p[128];

    snprintf(p, sizeof(p), "%s/%s", f->dir, name);
    return access(p, F_OK) == 0;
}

static void expect_state(const fx_t *f, const char *s)
{
    if (s == NULL) {
        assert_null(f->a.cstate.bytes);
        return;
    }
    assert_non_null(f->a.cstate.bytes);
    assert_int_equal(f->a.cstate.len, strlen(s));
    assert_memory_equal(f->a.cstate.bytes, s, strlen(s));
}

/* A round's state is pending until a task for a later round comes: a retry
 * of the same round drops it, a later round makes it the job's state. */
static void test_cstate_commits_with_a_later_round(void **state)
{
    fx_t *f = *state;

    agent__cstate_load(&f->a, 5, 1);
    expect_state(f, NULL);
    trained(f, 1, "one");
    assert_true(exists(f, "client-state-5.pending"));
    assert_false(exists(f, "client-state-5.bin"));
    agent__cstate_load(&f->a, 5, 1); /* round 1 again: it did not commit */
    expect_state(f, NULL);
    assert_false(exists(f, "client-state-5.pending"));
    trained(f, 1, "one'");
    agent__cstate_load(&f->a, 5, 2); /* round 2: round 1 committed */
    expect_state(f, "one'");
    assert_true(exists(f, "client-state-5.bin"));
    assert_false(exists(f, "client-state-5.pending"));
}

/* After a restart the files say the same: the committed state, and a
 * pending one settled by the first task's round. */
static void test_cstate_survives_a_restart(void **state)
{
    fx_t *f = *state;

    agent__cstate_load(&f->a, 5, 1);
    trained(f, 1, "one");
    agent__cstate_load(&f->a, 5, 2);
    trained(f, 2, "two");
    agent__cstate_clear(&f->a); /* the process ends */
    agent__cstate_load(&f->a, 5, 2); /* round 2 again: "two" never committed */
    expect_state(f, "one");
    trained(f, 2, "two'");
    agent__cstate_clear(&f->a);
    agent__cstate_load(&f->a, 5, 3);
    expect_state(f, "two'");
    /* another job's rounds start from nothing */
    agent__cstate_load(&f->a, 6, 1);
    expect_state(f, NULL);
}

/* A pending file too short to hold its round is read as none. */
static void test_cstate_short_pending_is_none(void **state)
{
    fx_t *f = *state;
    char p[128];

    snprintf(p, sizeof(p), "%s/client-state-5.pending", f->dir);
    assert_int_equal(sfl_file_write_atomic(p, (const uint8_t *)"abc", 3), 0);
    agent__cstate_load(&f->a, 5, 9);
    expect_state(f, NULL);
    assert_null(f->a.cstate.pbytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cstate_commits_with_a_later_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cstate_survives_a_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cstate_short_pending_is_none, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

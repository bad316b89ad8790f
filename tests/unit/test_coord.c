/* server/coord.c: the lifecycle: jobs from the configuration, the state lock,
 * allocation failures at start, on the in-process coordinator (coordfx.h). */
#include "coordfx.h"

#include <sys/stat.h>

#include "sfl/net/tlsticket.h"

/* A [job] definition added to a running coordinator, once (the keys
 * themselves: test_jobdef.c; the configuration: test_coordcfg.c). */
static void test_coord_config_and_jobdefs(void **state)
{
    coord_jobdef_t *d = NULL;
    uint64_t id1 = 0, id2 = 0;
    int created = 0;

    (void)state;
    assert_int_equal(coord_jobdef_new("cls", &d), 0);
    assert_int_equal(coord_jobdef_set(d, "features", "10"), 0);
    assert_int_equal(coord_jobdef_set(d, "loss", "logistic"), 0);
    assert_int_equal(coord_jobdef_set(d, "classes", "2"), 0);
    assert_int_equal(coord_jobdef_check(d), SFL_EINVAL); /* labels missing */
    assert_int_equal(coord_jobdef_set(d, "labels", "1,-1"), SFL_EINVAL); /* not ascending */
    assert_int_equal(coord_jobdef_set(d, "labels", "-1,1"), 0);
    assert_int_equal(coord_jobdef_set(d, "paused", "2"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_set(d, "paused", "1"), 0);
    assert_int_equal(coord_jobdef_set(d, "bogus", "1"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_check(d), 0);

    fx_start();
    assert_int_equal(coord_add_jobdef(F.co, d, &id1, &created), 0);
    assert_int_equal(created, 1);
    assert_int_equal(coord_add_jobdef(F.co, d, &id2, &created), 0);
    assert_int_equal(created, 0);
    assert_int_equal(id1, id2);
    fx_cli_connect(&F.admin, "admin/alice");
    {
        sfl_status_t *st = fx_admin_status(&F.admin);

        assert_int_equal(st->njobs, 1);
        assert_int_equal(st->jobs[0].state, SFL_JOB_PENDING);
        assert_string_equal(st->jobs[0].name, "cls");
        sfl_msg_status_free(st);
    }
    coord_jobdef_free(d);
}

/* The state directory is locked while a coordinator runs: a second one
 * on the same state refuses to start (flock works per open file, so a
 * second coord_new in this process meets the first one's lock), and the
 * directory is free again once the first has gone. */
static void test_coord_state_dir_locked(void **state)
{
    coord_t *second = NULL;
    char want[1200];

    (void)state;
    fx_start();
    assert_int_equal(coord_new(&F.loop, &F.cfg, &second), SFL_EBUSY);
    assert_null(second);
    snprintf(want, sizeof(want),
             "state directory %s is in use by another sfl-coordinator (pid %ld)", F.state,
             (long)getpid());
    assert_string_equal(sfl_last_error(), want);
    assert_string_equal(sfl_error_message(SFL_EBUSY), want);
    fx_stop();
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    fx_start();
}

/* The ticket keys live in state_dir (0600) and survive a restart, so a
 * restarted coordinator resumes its predecessor's sessions; a key file
 * others may read stops the start, as the identity file does. */
static void read_keys(char *buf, size_t cap)
{
    char p[1100];
    FILE *f;
    size_t n;
    struct stat st;

    snprintf(p, sizeof(p), "%s/tls-ticket.keys", F.state);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    f = fopen(p, "r");
    assert_non_null(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void test_coord_ticket_keys(void **state)
{
    char first[SFL_TICKET_FILE_MAX + 1], again[SFL_TICKET_FILE_MAX + 1], p[1100];
    coord_t *co = NULL;

    (void)state;
    fx_start();
    read_keys(first, sizeof(first));
    assert_non_null(strstr(first, "sfl-ticket-keys-v1\n"));
    fx_stop();
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    fx_start();
    read_keys(again, sizeof(again));
    assert_string_equal(first, again);
    fx_stop();
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    snprintf(p, sizeof(p), "%s/tls-ticket.keys", F.state);
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(coord_new(&F.loop, &F.cfg, &co), SFL_EINSECURE);
    assert_null(co);
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
    assert_int_equal(chmod(p, 0600), 0);
    fx_start();
}

/* Each allocation of a start on existing state fails in turn. */
static int start_quiet(void)
{
    return coord_new(&F.loop, &F.cfg, &F.co);
}

static void settle(void)
{
    if (F.co)
        fx_stop();
    /* handles a failed start left to close */
    for (int i = 0; i < 4; i++)
        uv_run(&F.loop, UV_RUN_NOWAIT);
}

static void test_coord_failalloc(void **state)
{
    coord_jobdef_t *d = NULL;

    (void)state;
    fx_start();
    assert_int_equal(coord_jobdef_new("j", &d), 0);
    assert_int_equal(coord_jobdef_set(d, "features", "8"), 0);
    assert_int_equal(coord_jobdef_set(d, "tau", "2"), 0);
    assert_int_equal(coord_add_jobdef(F.co, d, NULL, NULL), 0);
    coord_jobdef_free(d);
    fx_stop();
    FAILALLOC_EACH(start_quiet(), settle());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_config_and_jobdefs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_state_dir_locked, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_ticket_keys, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_failalloc, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

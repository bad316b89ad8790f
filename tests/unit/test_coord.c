/* server/coord.c: the lifecycle: jobs from the configuration, the state lock,
 * allocation failures at start, on the in-process coordinator (coordfx.h). */
#include "coordfx.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

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

static sfl_fleet_t *admin_fleet(cli_t *k)
{
    sfl_fleet_t *f = NULL;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_msg_fleet_req_pack(&buf, &len), 0);
    fx_call(k, "/sfl.v1.Admin/Fleet", buf, len, &res);
    if (res.status != 0)
        fail_msg("Fleet: %d %s", res.status, res.msg);
    assert_int_equal(sfl_msg_fleet_unpack(res.resp, res.len, NULL, &f), 0);
    free(res.resp);
    return f;
}

/* Admin.Fleet of a single coordinator on SQLite: role single, no leader,
 * no front-ends, itself the one master row; an agent's certificate may not
 * call it. */
static void test_coord_fleet_single(void **state)
{
    sfl_fleet_t *f;
    res_t res = {0};
    uint8_t *buf = NULL;
    size_t len;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    f = admin_fleet(&F.admin);
    assert_string_equal(f->role, "single");
    assert_int_equal(f->has_leader, 0);
    assert_int_equal(f->own_epoch, 0);
    assert_int_equal(f->n, 0);
    /* its own row of the masters table, written at the start: fresh (it
     * answers) though it writes no heartbeat */
    assert_int_equal(f->nmasters, 1);
    assert_string_equal(f->masters[0].role, "single");
    assert_int_equal(f->masters[0].epoch, 0);
    assert_int_equal(f->masters[0].pid, (uint64_t)getpid());
    assert_int_equal(f->masters[0].seen_ago_ms, 0);
    assert_int_equal(f->masters[0].stale, 0);
    assert_non_null(strstr(f->masters[0].holder, " pid "));
    sfl_msg_fleet_free(f);
    fx_cli_connect(&F.ag[0].cli, "agent/a1");
    assert_int_equal(sfl_msg_fleet_req_pack(&buf, &len), 0);
    fx_call(&F.ag[0].cli, "/sfl.v1.Admin/Fleet", buf, len, &res);
    assert_int_equal(res.status, SFL_GRPC_STATUS_PERMISSION_DENIED);
    free(res.resp);
}

/* role = master (server/leader.c) on SFL_TEST_PG's cluster, in a schema of
 * its own: the first master leads (epoch 1) and serves; a second one on the
 * same store is the standby (no listener); when the first stops, its
 * session and lock go and the standby takes over (epoch 2) and serves; once
 * another epoch is in the leader row the leader finds it within a check and
 * stops serving (the program's lost callback: exit 3). */
static void pg_sql(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    PGresult *r;

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("%s", PQerrorMessage(c));
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

static int led, lost_rc;

static void on_leading(coord_t *c, void *ud)
{
    (void)c;
    (void)ud;
    led = 1;
}

static void on_lost(coord_t *c, int rc, void *ud)
{
    (void)c;
    (void)ud;
    lost_rc = rc;
}

static void on_second_stopped(coord_t *c, void *ud)
{
    (void)c;
    *(int *)ud = 1;
}

static void test_coord_master_standby(void **state)
{
    static const coord_leader_cbs_t cbs = {on_leading, on_lost, NULL};
    const char *pg = getenv("SFL_TEST_PG");
    char schema[64], sql[256], dir2[64];
    coord_config_t c2;
    coord_t *second = NULL;
    int stopped = 0;

    (void)state;
    if (pg == NULL || *pg == '\0') {
        print_message("skipped: SFL_TEST_PG is unset (the conninfo of a running cluster; "
                      "tests/run.sh starts one with tests/pgcluster.sh)\n");
        skip();
    }
    snprintf(schema, sizeof(schema), "sfl_coord_%ld", (long)getpid());
    snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", schema,
             schema);
    pg_sql(pg, sql);
    snprintf(F.cfg.store, sizeof(F.cfg.store), "postgresql:%s options='-csearch_path=%s'", pg,
             schema);
    assert_int_equal(coord_config_set(&F.cfg, "role", "master"), 0);
    assert_int_equal(coord_config_set(&F.cfg, "leader_retry_ms", "20"), 0);
    fx_start();
    assert_int_equal(coord_serving_now(F.co), 1);
    assert_int_equal(coord_leader_epoch(F.co), 1);

    c2 = F.cfg;
    snprintf(dir2, sizeof(dir2), "/tmp/sfl-coord-standby-XXXXXX");
    assert_non_null(mkdtemp(dir2));
    snprintf(c2.state_dir, sizeof(c2.state_dir), "%s", dir2);
    assert_int_equal(coord_new(&F.loop, &c2, &second), 0);
    coord_set_leader_cbs(second, &cbs);
    assert_int_equal(coord_serving_now(second), 0);
    assert_int_equal(coord_leader_epoch(second), 0);
    assert_true(coord_port(second) < 0); /* a standby does not listen */
    assert_true(coord_admin_port(second) < 0);
    assert_true(coord_metrics_port(second) > 0); /* but says so: sfl_leader 0 */

    led = 0;
    fx_stop(); /* its session ends: the lock frees */
    fx_run_until(&led);
    assert_int_equal(coord_serving_now(second), 1);
    assert_int_equal(coord_leader_epoch(second), 2);
    assert_true(coord_port(second) > 0);

    /* A newer master's epoch in the row: the leader's next check sees it. */
    lost_rc = 0;
    snprintf(sql, sizeof(sql), "UPDATE %s.leader SET epoch = epoch + 1", schema);
    pg_sql(pg, sql);
    while (lost_rc == 0) {
        assert_false(F.timed_out);
        uv_run(&F.loop, UV_RUN_ONCE);
    }
    assert_int_equal(lost_rc, SFL_EFENCED);
    assert_int_equal(coord_serving_now(second), 0);
    assert_true(coord_port(second) < 0);

    coord_shutdown(second, 0, on_second_stopped, &stopped);
    fx_run_until(&stopped);
    coord_free(second);
    snprintf(sql, sizeof(sql), "DROP SCHEMA %s CASCADE", schema);
    pg_sql(pg, sql);
    snprintf(sql, sizeof(sql), "rm -rf %s", dir2);
    assert_int_equal(system(sql), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_config_and_jobdefs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_state_dir_locked, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_ticket_keys, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_failalloc, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_fleet_single, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_master_standby, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

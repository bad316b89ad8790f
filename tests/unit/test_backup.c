/* The store's online backup (server/store/backup.c): copies of a store
 * that are stores of their own, taken while another process commits
 * rounds, and every refusal leaving the destination untouched. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "failalloc.h"
#include "store/store.h"
#include "storefx.h"

static int exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* No temporary or sidecar file of a backup to dest is left behind. */
static void assert_backup_clean(const char *dest)
{
    static const char *const side[] = {"-wal", "-shm", "-journal"};
    char p[sizeof(pathbuf) + 16];
    const char *base = strrchr(dest, '/') + 1;
    DIR *d = opendir(tmpdir);
    struct dirent *e;

    for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", dest, side[i]);
        if (exists(p))
            fail_msg("%s left behind", p);
    }
    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, base, strlen(base)) == 0 && strstr(e->d_name, ".tmp-"))
            fail_msg("temporary %s left behind", e->d_name);
    closedir(d);
}

/* The copy is a store of its own: one file in rollback mode, 0600, whose
 * job has committed exactly 1..L with the last min(keep, L) checkpoints,
 * each with the model bytes round r had. Returns L. */
static int64_t check_copy(const char *dest, int64_t job, unsigned keep, uint64_t bytes)
{
    coord_store_t *c;
    coord_job_row_t j;
    coord_round_row_t *rounds = NULL;
    int64_t *ck = NULL, round = 0, committed = 0;
    uint8_t *model = NULL, *want = NULL, *hdr = NULL;
    size_t n = 0, len = 0, hn = 0;
    struct stat st;

    assert_int_equal(stat(dest, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_true(bytes > 0);
    assert_int_equal((uint64_t)st.st_size, bytes);
    /* header bytes 18-19: 1 = rollback journal, 2 = WAL */
    file_bytes(dest, &hdr, &hn);
    assert_true(hn >= 100);
    assert_int_equal(hdr[18], 1);
    assert_int_equal(hdr[19], 1);
    free(hdr);
    assert_backup_clean(dest);

    c = open_ok(dest, keep);
    assert_int_equal(coord_store_integrity_check(c), 0);
    assert_int_equal(coord_store_job_get(c, job, 1024, &j), 0);
    int64_t last = j.last_committed_round;
    coord_job_row_clear(&j);
    assert_int_equal(coord_store_round_list(c, job, 64, &rounds, &n), 0);
    for (size_t i = 0; i < n; i++)
        if (rounds[i].state == COORD_SROW_COMMITTED) {
            committed++;
            assert_int_equal(rounds[i].round, committed);
        }
    coord_round_list_free(rounds, n);
    assert_int_equal(committed, last);
    if (last > 0) {
        assert_int_equal(coord_store_checkpoint_rounds(c, job, &ck, &n), 0);
        assert_int_equal(n, (size_t)(last < (int64_t)keep ? last : (int64_t)keep));
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ck[i], last - (int64_t)n + 1 + (int64_t)i);
        coord_store_free(ck);
        assert_int_equal(coord_store_checkpoint_latest(c, job, 1 << 20, &round, &model, &len,
                                                       NULL),
                         0);
        assert_int_equal(round, last);
        assert_int_equal(len, model_len(last));
        want = malloc(len);
        assert_non_null(want);
        make_model(last, want, len);
        assert_memory_equal(model, want, len);
        free(want);
        coord_store_free(model);
    }
    coord_store_close(c);
    return last;
}

static void test_backup_copy(void **state)
{
    (void)state;
    char src[sizeof(pathbuf)], dest[sizeof(pathbuf)], dest2[sizeof(pathbuf)];
    uint8_t nonce[COORD_NONCE_BYTES] = {7}, *buf;
    coord_store_t *s, *c;
    coord_agent_row_t *agents = NULL;
    int64_t job = 0, cohort[3];
    uint64_t bytes = 0;
    size_t n = 0;

    snprintf(src, sizeof(src), "%s", dbpath("bk.db"));
    snprintf(dest, sizeof(dest), "%s", dbpath("bk-copy.db"));
    snprintf(dest2, sizeof(dest2), "%s", dbpath("bk-copy2.db"));
    s = open_ok(src, 3);
    cohort[0] = add_agent(s, "bk-a", 1);
    cohort[1] = add_agent(s, "bk-b", 2);
    cohort[2] = add_agent(s, "bk-c", 3);
    assert_int_equal(coord_store_job_create(s, "bk", (const uint8_t *)"spec", 4, 9, &job), 0);
    buf = malloc(model_len(1) + 40000);
    assert_non_null(buf);
    for (int64_t r = 1; r <= 5; r++) {
        make_model(r, buf, model_len(r));
        commit_round(s, job, r, cohort, 3, buf, model_len(r));
    }
    /* Round 6 is in flight: the copy has it live, as a crash would. */
    assert_int_equal(coord_store_round_open(s, job, 6, 1, nonce, cohort, 3), 0);

    /* From a second connection while the store is open (the commits are
     * still in its WAL, not yet in the main file). */
    assert_int_equal(coord_store_backup_path(src, dest, &bytes), 0);
    assert_int_equal(check_copy(dest, job, 3, bytes), 5);
    c = open_ok(dest, 3);
    assert_int_equal(coord_store_agent_list(c, &agents, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(agents[2].name, "bk-c");
    assert_int_equal(agents[2].id, cohort[2]);
    coord_store_free(agents);
    size_t live = 0;
    assert_int_equal(coord_store_recover(c, "restored", &live), 0);
    assert_int_equal(live, 1);
    coord_store_close(c);

    /* Through the store's own connection; an existing file is replaced. */
    write_file(dest2, (const uint8_t *)"old contents", 12);
    assert_int_equal(coord_store_backup(s, dest2, &bytes), 0);
    assert_int_equal(check_copy(dest2, job, 3, bytes), 5);

    /* The source is untouched and still in use. */
    make_model(6, buf, model_len(6));
    assert_int_equal(coord_store_round_set_state(s, job, 6, 1, COORD_SROW_TRAINING, NULL), 0);
    assert_int_equal(coord_store_round_set_state(s, job, 6, 1, COORD_SROW_AGGREGATING, NULL), 0);
    assert_int_equal(coord_store_round_commit(s, job, 6, 1, buf, model_len(6), NULL, NULL), 0);
    assert_int_equal(coord_store_integrity_check(s), 0);

    /* Nothing goes through the sfl allocator: no allocation can fail. */
    FAILALLOC_EACH(coord_store_backup_path(src, dest, &bytes), (void)0);
    assert_int_equal(check_copy(dest, job, 3, bytes), 6);
    free(buf);
    coord_store_close(s);
}

/* A writer in another process commits rounds (with its own connection,
 * synchronous=FULL) while backups are taken: every copy is one consistent
 * snapshot, and the writer keeps committing during the copies. */
static int child_commit(coord_store_t *s, int64_t job, int64_t r, const int64_t *cohort,
                        uint8_t *buf)
{
    uint8_t nonce[COORD_NONCE_BYTES];
    int64_t attempt = 0;

    make_model(r, buf, model_len(r));
    nonce_for(r, 1, nonce);
    if (coord_store_round_next_attempt(s, job, r, &attempt) != 0 ||
        coord_store_round_open(s, job, r, attempt, nonce, cohort, 3) != 0 ||
        coord_store_round_set_state(s, job, r, attempt, COORD_SROW_TRAINING, NULL) != 0 ||
        coord_store_round_set_state(s, job, r, attempt, COORD_SROW_AGGREGATING, NULL) != 0 ||
        coord_store_round_commit(s, job, r, attempt, buf, model_len(r), NULL, NULL) != 0)
        return -1;
    return 0;
}

static void test_backup_concurrent(void **state)
{
    (void)state;
    char src[sizeof(pathbuf)], dest[sizeof(pathbuf)];
    int go[2], ready[2], status = 0;
    int64_t job = 0, cohort[3], first = -1, last = -1;
    uint64_t bytes = 0;
    coord_store_t *s;
    char byte;
    pid_t pid;
    int copies = 0;

    snprintf(src, sizeof(src), "%s", dbpath("bkc.db"));
    snprintf(dest, sizeof(dest), "%s", dbpath("bkc-copy.db"));
    s = open_ok(src, 3);
    cohort[0] = add_agent(s, "bkc-a", 1);
    cohort[1] = add_agent(s, "bkc-b", 2);
    cohort[2] = add_agent(s, "bkc-c", 3);
    assert_int_equal(coord_store_job_create(s, "bkc", NULL, 0, 1, &job), 0);
    /* 2 MiB of another job's spec: a copy takes many steps, so the writer
     * commits between steps of one copy, not only between copies. */
    uint8_t *filler = calloc(1, 2 << 20);
    int64_t other = 0;
    assert_non_null(filler);
    assert_int_equal(coord_store_job_create(s, "filler", filler, 2 << 20, 1, &other), 0);
    free(filler);
    coord_store_close(s);
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* The writer: commits until the parent closes its end of go. */
        coord_store_opts_t o = {.keep_checkpoints = 3};
        uint8_t *buf = malloc(60000);
        int code = 0;

        close(go[1]);
        close(ready[0]);
        fcntl(go[0], F_SETFL, O_NONBLOCK);
        if (buf == NULL || coord_store_open(src, &o, &s) != 0)
            _exit(3);
        for (int64_t r = 1; r < 1000000; r++) {
            if (child_commit(s, job, r, cohort, buf) != 0) {
                code = 1;
                break;
            }
            if (r == 3 && write(ready[1], "x", 1) != 1) {
                code = 4;
                break;
            }
            if (read(go[0], &byte, 1) == 0)
                break;
        }
        coord_store_close(s);
        _exit(code);
    }
    close(go[0]);
    close(ready[1]);
    assert_int_equal(read(ready[0], &byte, 1), 1);
    /* Until the writer has moved on between two copies: an observed event,
     * bounded at a minute (it takes milliseconds). */
    for (double t0 = now_s(); (copies < 3 || last <= first) && now_s() - t0 < 60;) {
        assert_int_equal(coord_store_backup_path(src, dest, &bytes), 0);
        last = check_copy(dest, job, 3, bytes);
        assert_true(last >= 3);
        if (first < 0)
            first = last;
        copies++;
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
    close(go[1]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(ready[0]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(last > first);
    s = open_ok(src, 3);
    coord_job_row_t j;
    assert_int_equal(coord_store_job_get(s, job, 1024, &j), 0);
    assert_true(j.last_committed_round >= last);
    coord_job_row_clear(&j);
    coord_store_close(s);
}

static void test_backup_errors(void **state)
{
    (void)state;
    char src[sizeof(pathbuf)], dest[sizeof(pathbuf)], other[sizeof(pathbuf)];
    char missing[sizeof(pathbuf)], longp[5000];
    uint8_t *b = NULL;
    size_t bn = 0;
    uint64_t bytes = 7;
    int64_t job = 0;
    coord_store_t *s;

    snprintf(src, sizeof(src), "%s", dbpath("bke.db"));
    snprintf(dest, sizeof(dest), "%s", dbpath("bke-copy.db"));
    snprintf(other, sizeof(other), "%s", dbpath("bke-other.db"));
    snprintf(missing, sizeof(missing), "%s", dbpath("no-such-dir/copy.db"));
    s = open_ok(src, 3);
    add_agent(s, "bke", 1);
    assert_int_equal(coord_store_job_create(s, "bke", NULL, 0, 1, &job), 0);

    /* Destination in a directory that does not exist. */
    assert_int_equal(coord_store_backup_path(src, missing, &bytes), -ENOENT);
    assert_int_equal(bytes, 0);
    assert_detail("backup: cannot create ");
    assert_non_null(strstr(sfl_last_error(), "no-such-dir/copy.db.tmp-"));
    assert_non_null(strstr(sfl_last_error(), "No such file or directory"));
    assert_int_equal(coord_store_backup(s, missing, NULL), -ENOENT);

    /* A missing source is not created. */
    assert_int_equal(coord_store_backup_path(dbpath("bke-none.db"), dest, NULL), -ENOENT);
    assert_detail("backup: ");
    assert_false(exists(dbpath("bke-none.db")));
    assert_false(exists(dest));

    /* Not an sfl store: another application's database, a text file. A
     * failed backup leaves an existing destination as it was. */
    write_file(dest, (const uint8_t *)"keep me", 7);
    raw_sql(other, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    assert_int_equal(coord_store_backup_path(other, dest, NULL), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "not an sfl coordinator store"));
    write_file(other, (const uint8_t *)"this is not a database, just text\n", 34);
    assert_int_equal(coord_store_backup_path(other, dest, NULL), SFL_EPARSE);
    assert_detail("backup: ");
    file_bytes(dest, &b, &bn);
    assert_int_equal(bn, 7);
    assert_memory_equal(b, "keep me", 7);
    free(b);
    assert_backup_clean(dest);

    /* The database itself, a directory, nothing, too long. */
    assert_int_equal(coord_store_backup_path(src, src, NULL), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "is the database itself"));
    assert_int_equal(coord_store_backup(s, src, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_backup_path(src, tmpdir, NULL), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "is a directory"));
    assert_int_equal(coord_store_backup_path(src, "", NULL), SFL_EINVAL);
    assert_int_equal(coord_store_backup_path(src, NULL, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_backup_path(NULL, dest, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_backup_path("", dest, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_backup(NULL, dest, NULL), SFL_EINVAL);
    memset(longp, 'x', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(coord_store_backup_path(src, longp, NULL), SFL_ELIMIT);

    /* The store is unharmed and the next backup works. */
    assert_int_equal(coord_store_integrity_check(s), 0);
    assert_int_equal(coord_store_backup(s, dest, &bytes), 0);
    assert_int_equal(check_copy(dest, job, 3, bytes), 0);
    coord_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backup_copy),
        cmocka_unit_test(test_backup_concurrent),
        cmocka_unit_test(test_backup_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

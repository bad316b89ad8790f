#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "failalloc.h"
#include "store/store.h"
#include "storefx.h"

/* ---- round trips ----------------------------------------------------- */

/* A batch (group commit): a call refused inside it undoes only its own
 * changes; the others are durable after batch_commit; nesting and a commit
 * without a batch are refused. */
static void test_store_batch(void **state)
{
    (void)state;
    coord_store_t *s = open_ok(dbpath("batch.db"), 3);
    coord_agent_row_t a, *list = NULL;
    int64_t id = 0;
    size_t n = 0;

    assert_int_equal(coord_store_batch_begin(s), 0);
    assert_int_equal(coord_store_batch_begin(s), SFL_EINVAL);
    make_agent(&a, "b-1", 1);
    assert_int_equal(coord_store_agent_upsert(s, &a, &id), 0);
    make_agent(&a, "b-2", 1); /* b-1's key: refused after its own reads */
    assert_int_equal(coord_store_agent_upsert(s, &a, &id), -EEXIST);
    make_agent(&a, "b-3", 3);
    assert_int_equal(coord_store_agent_upsert(s, &a, &id), 0);
    assert_int_equal(coord_store_batch_commit(s), 0);
    assert_int_equal(coord_store_batch_commit(s), SFL_EINVAL);
    assert_int_equal(coord_store_agent_list(s, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].name, "b-1");
    assert_string_equal(list[1].name, "b-3");
    coord_store_free(list);
    /* Outside a batch the calls commit on their own again. */
    make_agent(&a, "b-4", 4);
    assert_int_equal(coord_store_agent_upsert(s, &a, &id), 0);
    coord_store_close(s);
}

static void test_store_agents(void **state)
{
    (void)state;
    coord_store_t *s = open_ok(dbpath("agents.db"), 3);
    coord_agent_row_t a, b, *list = NULL;
    int64_t id1 = 0, id2 = 0, again = 0;
    size_t n = 0;

    make_agent(&a, "pi-1", 1);
    assert_int_equal(coord_store_agent_upsert(s, &a, &id1), 0);
    id2 = add_agent(s, "pi-2", 2);
    assert_true(id2 > id1);

    assert_int_equal(coord_store_agent_get(s, id1, &b), 0);
    assert_int_equal(b.id, id1);
    assert_string_equal(b.name, "pi-1");
    assert_memory_equal(b.identity_pk, a.identity_pk, COORD_KEY_BYTES);
    assert_memory_equal(b.cert_fingerprint, a.cert_fingerprint, COORD_FPR_BYTES);
    assert_string_equal(b.capabilities, "mains,unmetered");
    assert_string_equal(b.labels, "-1,1");
    assert_int_equal(b.samples, 101);
    assert_int_equal(b.dimension, 1000);
    assert_true(b.joined_ms > 1600000000000LL);
    assert_int_equal(b.joined_ms, b.last_seen_ms);
    int64_t joined = b.joined_ms;

    /* Re-join with the same key: same id, new summary, joined_ms kept. */
    snprintf(a.capabilities, sizeof(a.capabilities), "battery");
    a.samples = 7;
    /* A second certificate with the same name (and even the same key) is
     * refused while the first is not revoked; after that it takes its place
     * (a renewed certificate), and the revoked one cannot come back. */
    uint8_t first[COORD_FPR_BYTES], (*revoked)[COORD_FPR_BYTES] = NULL;
    memcpy(first, a.cert_fingerprint, sizeof(first));
    memset(a.cert_fingerprint, 0x11, sizeof(a.cert_fingerprint));
    assert_int_equal(coord_store_agent_upsert(s, &a, &again), -EACCES);
    assert_detail("store: agent 'pi-1' (id 1) is bound to another certificate");
    assert_int_equal(coord_store_cert_revoke(s, first, "pi-1", 5), 0);
    assert_int_equal(coord_store_cert_revoke(s, first, "pi-1", 6), 0); /* twice: fine */
    assert_int_equal(coord_store_revoked_list(s, &revoked, &n), 0);
    assert_int_equal(n, 1);
    assert_memory_equal(revoked[0], first, sizeof(first));
    coord_store_free(revoked);
    assert_int_equal(coord_store_agent_upsert(s, &a, &again), 0);
    assert_int_equal(again, id1);
    assert_int_equal(coord_store_agent_get_by_name(s, "pi-1", &b), 0);
    assert_int_equal(b.id, id1);
    assert_string_equal(b.capabilities, "battery");
    assert_int_equal(b.samples, 7);
    assert_int_equal(b.cert_fingerprint[0], 0x11);
    assert_int_equal(b.joined_ms, joined);
    memcpy(b.cert_fingerprint, first, sizeof(first));
    assert_int_equal(coord_store_agent_upsert(s, &b, NULL), -EACCES);
    assert_true(b.last_seen_ms >= joined);
    assert_int_equal(coord_store_agent_touch(s, id2), 0);

    assert_int_equal(coord_store_agent_list(s, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(list[0].id, id1);
    assert_string_equal(list[1].name, "pi-2");
    coord_store_free(list);

    /* Constraint errors. */
    memset(a.identity_pk, 0x77, sizeof(a.identity_pk));
    assert_int_equal(coord_store_agent_upsert(s, &a, NULL), -EEXIST);
    assert_detail("store: agent 'pi-1' (id 1) is registered with a different identity key");
    make_agent(&b, "pi-3", 2); /* pi-2's key */
    assert_int_equal(coord_store_agent_upsert(s, &b, NULL), -EEXIST);
    assert_detail("store: agent 'pi-3': identity key already registered to agent 'pi-2'");
    assert_int_equal(coord_store_agent_get_by_name(s, "pi-3", &b), SFL_ENOTFOUND);
    assert_detail("store: no agent named 'pi-3'");
    assert_int_equal(coord_store_agent_get(s, 99, &b), SFL_ENOTFOUND);
    assert_detail("store: no agent 99");
    assert_int_equal(coord_store_agent_touch(s, 99), SFL_ENOTFOUND);

    /* Operator rekey, then the re-join with the new key works. */
    assert_int_equal(coord_store_agent_rekey(s, id1, a.identity_pk), 0);
    assert_int_equal(coord_store_agent_upsert(s, &a, &again), 0);
    assert_int_equal(again, id1);
    memset(b.identity_pk, 2, sizeof(b.identity_pk));
    assert_int_equal(coord_store_agent_rekey(s, id1, b.identity_pk), -EEXIST);
    assert_int_equal(coord_store_agent_rekey(s, 99, b.identity_pk), SFL_ENOTFOUND);

    /* Bad input. */
    make_agent(&b, "", 9);
    assert_int_equal(coord_store_agent_upsert(s, &b, NULL), SFL_EINVAL);
    assert_detail("store: agent name is empty");
    make_agent(&b, "x", 9);
    memset(b.name, 'n', sizeof(b.name)); /* not terminated */
    assert_int_equal(coord_store_agent_upsert(s, &b, NULL), SFL_ELIMIT);
    make_agent(&b, "x", 9);
    b.samples = -1;
    assert_int_equal(coord_store_agent_upsert(s, &b, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_agent_list(s, &list, &n), 0);
    assert_int_equal(n, 2); /* nothing half-written */
    coord_store_free(list);
    coord_store_close(s);
}

static void test_store_jobs(void **state)
{
    (void)state;
    const char *p = dbpath("jobs.db");
    coord_store_t *s = open_ok(p, 3);
    const uint8_t spec[] = {1, 2, 3, 0, 5};
    coord_job_row_t j, *jobs = NULL;
    int64_t id = 0, id2 = 0;
    size_t n = 0;

    assert_int_equal(coord_store_job_create(s, "fediterht", spec, sizeof(spec), UINT64_MAX, &id),
                     0);
    assert_int_equal(coord_store_job_create(s, "empty-spec", NULL, 0, 42, &id2), 0);
    assert_int_equal(coord_store_job_get(s, id, 1024, &j), 0);
    assert_int_equal(j.id, id);
    assert_string_equal(j.name, "fediterht");
    assert_int_equal(j.state, COORD_JOB_ACTIVE);
    assert_true(j.seed == UINT64_MAX);
    assert_int_equal(j.last_committed_round, 0);
    assert_int_equal(j.spec_len, sizeof(spec));
    assert_memory_equal(j.spec, spec, sizeof(spec));
    assert_true(j.created_ms > 1600000000000LL);
    coord_job_row_clear(&j);
    assert_null(j.spec);
    coord_job_row_clear(NULL);

    assert_int_equal(coord_store_job_get(s, id2, 0, &j), 0);
    assert_int_equal(j.spec_len, 0);
    assert_true(j.seed == 42);
    coord_job_row_clear(&j);

    /* The spec is size-checked against the caller's limit. */
    assert_int_equal(coord_store_job_get(s, id, 4, &j), SFL_ELIMIT);
    assert_detail("store: jobs.spec is 5 bytes, limit 4");
    assert_null(j.spec);
    assert_int_equal(coord_store_job_get(s, 77, 1024, &j), SFL_ENOTFOUND);
    assert_detail("store: no job 77");
    assert_int_equal(coord_store_job_list(s, 4, &jobs, &n), SFL_ELIMIT);
    assert_null(jobs);

    assert_int_equal(coord_store_job_list(s, 1024, &jobs, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(jobs[1].id, id2);
    assert_string_equal(jobs[1].name, "empty-spec");
    coord_job_rows_free(jobs, n);

    /* State machine. */
    assert_int_equal(coord_store_job_set_state(s, id, COORD_JOB_PAUSED), 0);
    assert_int_equal(coord_store_job_set_state(s, id, COORD_JOB_PAUSED), 0);
    assert_int_equal(coord_store_job_set_state(s, id, COORD_JOB_ACTIVE), 0);
    assert_int_equal(coord_store_job_set_state(s, id, COORD_JOB_CANCELLED), 0);
    assert_int_equal(coord_store_job_set_state(s, id, COORD_JOB_ACTIVE), SFL_EINVAL);
    assert_detail("store: job 1 is cancelled and cannot become active");
    assert_int_equal(coord_store_job_set_state(s, 77, COORD_JOB_DONE), SFL_ENOTFOUND);
    assert_int_equal(coord_store_job_set_state(s, id2, (coord_job_state_t)9), SFL_EINVAL);
    assert_int_equal(coord_store_job_get(s, id, 1024, &j), 0);
    assert_int_equal(j.state, COORD_JOB_CANCELLED);
    coord_job_row_clear(&j);

    /* A failure is for good, and survives a reopen (before schema 3 a
     * failed job was paused in the store and ran again after a restart). */
    assert_int_equal(coord_store_job_set_state(s, id2, COORD_JOB_FAILED), SFL_EINVAL);
    assert_int_equal(coord_store_job_fail(s, id, "late", 5), SFL_EINVAL); /* cancelled */
    assert_int_equal(coord_store_job_fail(s, id2, "cannot reload the last checkpoint: x", 5), 0);
    assert_int_equal(coord_store_job_fail(s, id2, "again", 6), SFL_EINVAL);
    assert_int_equal(coord_store_job_set_state(s, id2, COORD_JOB_ACTIVE), SFL_EINVAL);
    assert_detail("store: job 2 is failed and cannot become active");
    coord_store_close(s);
    s = open_ok(p, 3);
    assert_int_equal(coord_store_job_get(s, id2, 1024, &j), 0);
    assert_int_equal(j.state, COORD_JOB_FAILED);
    assert_string_equal(j.error, "cannot reload the last checkpoint: x");
    coord_job_row_clear(&j);
    assert_int_equal(coord_store_job_list(s, 1024, &jobs, &n), 0);
    assert_int_equal(jobs[0].state, COORD_JOB_CANCELLED);
    assert_string_equal(jobs[0].error, "");
    assert_int_equal(jobs[1].state, COORD_JOB_FAILED);
    coord_job_rows_free(jobs, n);

    /* Bad input. */
    assert_int_equal(coord_store_job_create(s, "", spec, 1, 0, NULL), SFL_EINVAL);
    assert_int_equal(coord_store_job_create(s, "x", NULL, 3, 0, NULL), SFL_EINVAL);
    char longname[COORD_JOB_NAME_MAX + 2];
    memset(longname, 'j', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(coord_store_job_create(s, longname, spec, 1, 0, NULL), SFL_ELIMIT);
    coord_store_close(s);
}

static void test_store_rounds(void **state)
{
    (void)state;
    coord_store_t *s = open_ok(dbpath("rounds.db"), 3);
    uint8_t nonce[COORD_NONCE_BYTES], model[100];
    int64_t job = 0, other = 0, a1, a2, a3, a4, attempt = 0;
    coord_round_row_t r, *rounds = NULL;
    coord_participation_t *parts = NULL;
    size_t n = 0;

    a1 = add_agent(s, "a1", 1);
    a2 = add_agent(s, "a2", 2);
    a3 = add_agent(s, "a3", 3);
    a4 = add_agent(s, "a4", 4);
    assert_int_equal(coord_store_job_create(s, "job", NULL, 0, 7, &job), 0);
    assert_int_equal(coord_store_job_create(s, "other", NULL, 0, 7, &other), 0);
    const int64_t cohort[] = {a1, a2, a3};
    nonce_for(1, 1, nonce);
    memset(model, 0xab, sizeof(model));

    /* Refusals before anything is written. */
    assert_int_equal(coord_store_round_open(s, 99, 1, 1, nonce, cohort, 3), SFL_ENOTFOUND);
    assert_detail("store: no job 99");
    assert_int_equal(coord_store_round_open(s, job, 2, 1, nonce, cohort, 3), SFL_EINVAL);
    assert_detail("store: job 1: round 2 is not the next round (last committed 0)");
    assert_int_equal(coord_store_round_open(s, job, 1, 2, nonce, cohort, 3), SFL_EINVAL);
    assert_detail("store: job 1 round 1: attempt 2, expected 1");
    assert_int_equal(coord_store_round_open(s, job, 0, 1, nonce, cohort, 3), SFL_EINVAL);
    const int64_t unsorted[] = {a2, a1};
    assert_int_equal(coord_store_round_open(s, job, 1, 1, nonce, unsorted, 2), SFL_EINVAL);
    assert_detail("store: cohort entry 1");
    const int64_t ghost[] = {a1, 500};
    assert_int_equal(coord_store_round_open(s, job, 1, 1, nonce, ghost, 2), SFL_ENOTFOUND);
    assert_detail("store: cohort agent 500 is not a registered agent");
    assert_int_equal(coord_store_round_next_attempt(s, job, 1, &attempt), 0);
    assert_int_equal(attempt, 1); /* the refused opens left nothing behind */

    /* Attempt 1 opens, fails for lack of quorum; attempt 2 commits. */
    assert_int_equal(coord_store_round_open(s, job, 1, 1, nonce, cohort, 3), 0);
    assert_int_equal(coord_store_round_open(s, job, 1, 2, nonce, cohort, 3), SFL_EINVAL);
    assert_detail("store: job 1 round 1 attempt 1 is still selecting");
    assert_int_equal(coord_store_round_get(s, job, 1, 1, 16, &r), 0);
    assert_int_equal(r.state, COORD_SROW_SELECTING);
    assert_int_equal(r.cohort_len, 3);
    assert_int_equal(r.cohort[0], a1);
    assert_int_equal(r.cohort[2], a3);
    assert_memory_equal(r.nonce, nonce, COORD_NONCE_BYTES);
    assert_int_equal(r.closed_ms, 0);
    assert_true(r.opened_ms > 0);
    coord_round_clear(&r);
    assert_int_equal(coord_store_round_get(s, job, 1, 1, 2, &r), SFL_ELIMIT);
    assert_detail("store: cohort of job 1 round 1 has 3 agents, limit 2");
    assert_null(r.cohort);

    assert_int_equal(coord_store_round_set_state(s, job, 1, 1, COORD_SROW_AGGREGATING, NULL),
                     SFL_EINVAL);
    assert_detail("store: job 1 round 1 attempt 1 is selecting and cannot become aggregating");
    assert_int_equal(coord_store_round_set_state(s, job, 1, 1, COORD_SROW_COMMITTED, NULL),
                     SFL_EINVAL);
    assert_int_equal(coord_store_round_set_state(s, job, 1, 1, COORD_SROW_TRAINING, NULL), 0);
    assert_int_equal(coord_store_round_commit(s, job, 1, 1, model, sizeof(model), NULL, NULL),
                     SFL_EINVAL);
    assert_detail("store: job 1 round 1 attempt 1 is training, not aggregating; cannot commit");
    assert_int_equal(coord_store_participation_record(s, job, 1, 1, a1, COORD_PART_ACCEPTED,
                                                      NULL, 1234),
                     0);
    assert_int_equal(coord_store_round_set_state(s, job, 1, 1, COORD_SROW_FAILED,
                                                 "quorum 1 of 2"),
                     0);
    assert_int_equal(coord_store_round_set_state(s, job, 1, 1, COORD_SROW_TRAINING, NULL),
                     SFL_EINVAL);
    assert_int_equal(coord_store_round_set_state(s, job, 1, 9, COORD_SROW_TRAINING, NULL),
                     SFL_ENOTFOUND);
    assert_detail("store: no job 1 round 1 attempt 9");

    assert_int_equal(coord_store_round_next_attempt(s, job, 1, &attempt), 0);
    assert_int_equal(attempt, 2);
    assert_int_equal(coord_store_round_open(s, job, 1, 1, nonce, cohort, 3), -EEXIST);
    const int64_t cohort2[] = {a2, a4};
    nonce_for(1, 2, nonce);
    assert_int_equal(coord_store_round_open(s, job, 1, 2, nonce, cohort2, 2), 0);
    assert_int_equal(coord_store_round_set_state(s, job, 1, 2, COORD_SROW_TRAINING, NULL), 0);

    /* Outcomes: written once, unsolicited agents get a row, unknown ones an error. */
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, a2, COORD_PART_ACCEPTED,
                                                      NULL, 800),
                     0);
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, a2, COORD_PART_DUPLICATE,
                                                      "second upload", 800),
                     -EEXIST);
    assert_detail("store: agent 2 in job 1 round 1 attempt 2 is already recorded as accepted");
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, a1, COORD_PART_REJECTED,
                                                      "not selected", 10),
                     0);
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, 99, COORD_PART_REJECTED,
                                                      NULL, 0),
                     SFL_ENOTFOUND);
    assert_detail("store: no agent 99");
    assert_int_equal(coord_store_participation_record(s, job, 3, 1, a1, COORD_PART_LATE, NULL, 0),
                     SFL_ENOTFOUND);
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, a4, COORD_PART_SELECTED,
                                                      NULL, 0),
                     SFL_EINVAL);
    assert_int_equal(coord_store_participation_record(s, job, 1, 2, a4, COORD_PART_LATE, NULL, -1),
                     SFL_EINVAL);

    /* The same as a batch in one transaction: each row's own refusal is
     * skipped and counted, the others are written. */
    {
        const coord_part_row_t rows[] = {
            {job, 1, 2, a2, COORD_PART_DUPLICATE, "again", 800, 5}, /* already accepted */
            {job, 1, 2, 99, COORD_PART_REJECTED, NULL, 0, 5},        /* no such agent */
            {job, 3, 1, a1, COORD_PART_LATE, NULL, 0, 5},             /* no such round */
            {job, 1, 2, a4, COORD_PART_SELECTED, NULL, 0, 5},         /* not an outcome */
        };
        size_t skipped = 0;

        assert_int_equal(coord_store_participation_batch(s, rows, 4, &skipped), 0);
        assert_int_equal(skipped, 4);
        assert_int_equal(coord_store_participation_batch(s, NULL, 0, &skipped), 0);
        assert_int_equal(coord_store_participation_batch(s, NULL, 1, &skipped), SFL_EINVAL);
    }

    assert_int_equal(coord_store_round_set_state(s, job, 1, 2, COORD_SROW_AGGREGATING, NULL), 0);
    uint8_t hash[COORD_HASH_BYTES], want[COORD_HASH_BYTES];
    assert_int_equal(coord_store_round_commit(s, job, 1, 2, model, sizeof(model), NULL, hash), 0);
    crypto_generichash(want, sizeof(want), model, sizeof(model), NULL, 0);
    assert_memory_equal(hash, want, sizeof(want));
    /* A late update after the commit is still recorded (here in a batch). */
    {
        const coord_part_row_t late = {job, 1, 2, a4, COORD_PART_LATE, "deadline", 900, 0};
        size_t skipped = 9;

        assert_int_equal(coord_store_participation_batch(s, &late, 1, &skipped), 0);
        assert_int_equal(skipped, 0);
    }
    assert_int_equal(coord_store_round_commit(s, job, 1, 2, model, sizeof(model), NULL, NULL),
                     SFL_EINVAL);

    assert_int_equal(coord_store_participation_list(s, job, 1, 2, &parts, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(parts[0].agent_id, a1);
    assert_int_equal(parts[0].status, COORD_PART_REJECTED);
    assert_string_equal(parts[0].reason, "not selected");
    assert_int_equal(parts[1].agent_id, a2);
    assert_int_equal(parts[1].status, COORD_PART_ACCEPTED);
    assert_int_equal(parts[1].bytes, 800);
    assert_int_equal(parts[2].agent_id, a4);
    assert_int_equal(parts[2].status, COORD_PART_LATE);
    assert_string_equal(parts[2].reason, "deadline");
    coord_store_free(parts);
    assert_int_equal(coord_store_participation_list(s, job, 1, 1, &parts, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(parts[0].status, COORD_PART_ACCEPTED);
    assert_int_equal(parts[1].status, COORD_PART_SELECTED);
    coord_store_free(parts);

    /* Round 2 with an empty cohort; the other job is independent. */
    nonce_for(2, 1, nonce);
    assert_int_equal(coord_store_round_open(s, job, 2, 1, nonce, NULL, 0), 0);
    assert_int_equal(coord_store_round_open(s, other, 1, 1, nonce, cohort, 3), 0);

    /* The replay log. */
    assert_int_equal(coord_store_round_list(s, job, 16, &rounds, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(rounds[0].round, 1);
    assert_int_equal(rounds[0].attempt, 1);
    assert_int_equal(rounds[0].state, COORD_SROW_FAILED);
    assert_string_equal(rounds[0].reason, "quorum 1 of 2");
    assert_true(rounds[0].closed_ms >= rounds[0].opened_ms);
    assert_int_equal(rounds[1].attempt, 2);
    assert_int_equal(rounds[1].state, COORD_SROW_COMMITTED);
    assert_int_equal(rounds[1].cohort_len, 2);
    assert_int_equal(rounds[1].cohort[1], a4);
    nonce_for(1, 2, nonce);
    assert_memory_equal(rounds[1].nonce, nonce, COORD_NONCE_BYTES);
    assert_int_equal(rounds[2].round, 2);
    assert_int_equal(rounds[2].cohort_len, 0);
    coord_round_list_free(rounds, n);

    /* A cancelled job takes no new round and no commit. */
    assert_int_equal(coord_store_round_set_state(s, job, 2, 1, COORD_SROW_TRAINING, NULL), 0);
    assert_int_equal(coord_store_round_set_state(s, job, 2, 1, COORD_SROW_AGGREGATING, NULL), 0);
    assert_int_equal(coord_store_job_set_state(s, job, COORD_JOB_CANCELLED), 0);
    assert_int_equal(coord_store_round_commit(s, job, 2, 1, model, 1, NULL, NULL), SFL_EINVAL);
    assert_detail("store: job 1 is cancelled");
    assert_int_equal(coord_store_integrity_check(s), 0);
    coord_store_close(s);
}

static void test_store_checkpoints(void **state)
{
    (void)state;
    coord_store_t *s = open_ok(dbpath("ckpt.db"), 3);
    uint8_t *m = NULL, buf[4096], hash[COORD_HASH_BYTES], want[COORD_HASH_BYTES];
    int64_t job = 0, r = 0, *rounds = NULL;
    size_t n = 0, len = 0;

    assert_int_equal(coord_store_job_create(s, "j", NULL, 0, 1, &job), 0);
    int64_t a = add_agent(s, "a", 1);
    assert_int_equal(coord_store_checkpoint_latest(s, job, 1 << 20, &r, &m, &len, hash),
                     SFL_ENOTFOUND);
    assert_detail("store: job 1 has no committed round");
    assert_int_equal(coord_store_checkpoint_latest(s, 42, 1 << 20, &r, &m, &len, hash),
                     SFL_ENOTFOUND);
    assert_detail("store: no job 42");

    for (int64_t k = 1; k <= 7; k++) {
        make_model(k, buf, sizeof(buf));
        commit_round(s, job, k, &a, 1, buf, (size_t)(1000 * k) % sizeof(buf));
        assert_int_equal(coord_store_checkpoint_rounds(s, job, &rounds, &n), 0);
        assert_int_equal(n, k < 3 ? k : 3); /* exactly the last N */
        assert_int_equal(rounds[n - 1], k);
        assert_int_equal(rounds[0], k < 3 ? 1 : k - 2);
        coord_store_free(rounds);
    }
    assert_int_equal(coord_store_checkpoint_latest(s, job, 1 << 20, &r, &m, &len, hash), 0);
    assert_int_equal(r, 7);
    assert_int_equal(len, 7000 % sizeof(buf));
    make_model(7, buf, sizeof(buf));
    assert_memory_equal(m, buf, len);
    crypto_generichash(want, sizeof(want), buf, len, NULL, 0);
    assert_memory_equal(hash, want, sizeof(want));
    coord_store_free(m);

    assert_int_equal(coord_store_checkpoint_get(s, job, 5, 1 << 20, &m, &len, NULL), 0);
    make_model(5, buf, sizeof(buf));
    assert_int_equal(len, 5000 % sizeof(buf));
    assert_memory_equal(m, buf, len);
    coord_store_free(m);
    assert_int_equal(coord_store_checkpoint_get(s, job, 4, 1 << 20, &m, &len, NULL),
                     SFL_ENOTFOUND);
    assert_detail("store: job 1 has no checkpoint of round 4");
    assert_int_equal(coord_store_checkpoint_get(s, job, 0, 1 << 20, &m, &len, NULL), SFL_EINVAL);

    /* Size-checked before copying. */
    assert_int_equal(coord_store_checkpoint_latest(s, job, 10, &r, &m, &len, hash), SFL_ELIMIT);
    assert_detail("store: checkpoints.model is 2904 bytes, limit 10");
    assert_null(m);
    assert_int_equal(len, 0);

    /* An empty model is a model too. */
    commit_round(s, job, 8, &a, 1, NULL, 0);
    assert_int_equal(coord_store_checkpoint_latest(s, job, 0, &r, &m, &len, hash), 0);
    assert_int_equal(r, 8);
    assert_int_equal(len, 0);
    coord_store_free(m);

    coord_job_row_t j;
    assert_int_equal(coord_store_job_get(s, job, 0, &j), 0);
    assert_int_equal(j.last_committed_round, 8);
    coord_job_row_clear(&j);
    coord_store_close(s);

    /* keep = 1 */
    s = open_ok(dbpath("ckpt.db"), 1);
    commit_round(s, job, 9, &a, 1, buf, 10);
    assert_int_equal(coord_store_checkpoint_rounds(s, job, &rounds, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rounds[0], 9);
    coord_store_free(rounds);
    coord_store_close(s);

    /* keep = 0: every round's checkpoint from now on, each one readable
     * (sflctl model export --round N, issue 24 item 8) */
    s = open_ok(dbpath("ckpt.db"), 0);
    for (int64_t k = 10; k <= 14; k++) {
        make_model(k, buf, sizeof(buf));
        commit_round(s, job, k, &a, 1, buf, (size_t)(100 * k));
    }
    assert_int_equal(coord_store_checkpoint_rounds(s, job, &rounds, &n), 0);
    assert_int_equal(n, 6); /* 9, kept by keep = 1, and 10..14 */
    for (size_t i = 0; i < n; i++)
        assert_int_equal(rounds[i], 9 + (int64_t)i);
    coord_store_free(rounds);
    for (int64_t k = 10; k <= 14; k++) {
        assert_int_equal(coord_store_checkpoint_get(s, job, k, 1 << 20, &m, &len, NULL), 0);
        make_model(k, buf, sizeof(buf));
        assert_int_equal(len, (size_t)(100 * k));
        assert_memory_equal(m, buf, len);
        coord_store_free(m);
    }
    coord_store_close(s);
}

/* ---- reopen, versions, damage ---------------------------------------- */

static void test_store_reopen(void **state)
{
    (void)state;
    const char *p = dbpath("reopen.db");
    coord_store_t *s = open_ok(p, 2);
    uint8_t model[300], *m = NULL;
    int64_t job = 0, a, r = 0;
    size_t len = 0;
    coord_agent_row_t ag;
    coord_job_row_t j;

    a = add_agent(s, "survivor", 5);
    assert_int_equal(coord_store_job_create(s, "j", (const uint8_t *)"spec", 4, 99, &job), 0);
    make_model(3, model, sizeof(model));
    commit_round(s, job, 1, &a, 1, model, sizeof(model));
    coord_store_close(s);
    coord_store_close(NULL);

    s = open_ok(p, 2);
    assert_int_equal(coord_store_agent_get_by_name(s, "survivor", &ag), 0);
    assert_int_equal(ag.id, a);
    assert_int_equal(coord_store_job_get(s, job, 16, &j), 0);
    assert_int_equal(j.last_committed_round, 1);
    assert_memory_equal(j.spec, "spec", 4);
    assert_true(j.seed == 99);
    coord_job_row_clear(&j);
    assert_int_equal(coord_store_checkpoint_latest(s, job, sizeof(model), &r, &m, &len, NULL), 0);
    assert_int_equal(r, 1);
    assert_memory_equal(m, model, sizeof(model));
    coord_store_free(m);
    /* Ids are never reused, even for a new agent after reopen. */
    assert_true(add_agent(s, "newcomer", 6) > a);
    coord_store_close(s);
}

/* Round metrics go in with the commit; the history joins them with the
 * round and its participation, page by page. A store of schema 1 (no
 * round_metrics) is migrated at open and its rounds keep their history,
 * without metrics; one of schema 3 (round_metrics without
 * personal_accuracy) gets the column, its rounds read 0 there. */
static void test_store_history(void **state)
{
    (void)state;
    const char *p = dbpath("history.db");
    coord_store_t *s = open_ok(p, 2);
    uint8_t model[40];
    int64_t job = 0, a1, a2;
    coord_history_row_t *h = NULL;
    sfl_round_metrics_t m = {0};
    size_t n = 0;

    a1 = add_agent(s, "h1", 1);
    a2 = add_agent(s, "h2", 2);
    const int64_t cohort[] = {a1, a2};
    memset(model, 7, sizeof(model));
    assert_int_equal(coord_store_job_create(s, "job", NULL, 0, 1, &job), 0);
    assert_int_equal(coord_store_history(s, job, 0, 10, &h, &n), 0);
    assert_int_equal(n, 0);
    coord_store_free(h);

    /* Round 1 without metrics (as a schema-1 coordinator committed it). */
    commit_round(s, job, 1, cohort, 2, model, sizeof(model));
    for (int64_t r = 2; r <= 4; r++) {
        uint8_t nonce[COORD_NONCE_BYTES];
        int64_t attempt = 0;

        assert_int_equal(coord_store_round_next_attempt(s, job, r, &attempt), 0);
        nonce_for(r, attempt, nonce);
        assert_int_equal(coord_store_round_open(s, job, r, attempt, nonce, cohort, 2), 0);
        assert_int_equal(
            coord_store_round_set_state(s, job, r, attempt, COORD_SROW_TRAINING, NULL), 0);
        assert_int_equal(coord_store_participation_record(s, job, r, attempt, a1,
                                                          COORD_PART_ACCEPTED, NULL, 100 * r),
                         0);
        assert_int_equal(coord_store_participation_record(s, job, r, attempt, a2,
                                                          COORD_PART_LATE, "late", 5),
                         0);
        assert_int_equal(
            coord_store_round_set_state(s, job, r, attempt, COORD_SROW_AGGREGATING, NULL), 0);
        m.samples = 10 * (uint64_t)r;
        m.train_loss = 1.0 / (double)r;
        m.eval_samples = r == 3 ? 0 : 4;
        m.eval_accuracy = r == 3 ? 0 : 0.25 * (double)r - 0.25;
        m.eval_mse = 0;
        m.personal_accuracy = r == 3 ? 0 : 0.125 * (double)r;
        m.model_nnz = (uint32_t)r;
        m.bytes_down = 1000 * (uint64_t)r;
        m.privacy_iterations = 10 * (uint64_t)r;
        m.privacy_spent = 0.0625 * (double)r;
        m.support_churn = 3 * (uint64_t)r;
        m.privacy_spent_rdp = 0.03125 * (double)r;
        assert_int_equal(
            coord_store_round_commit(s, job, r, attempt, model, sizeof(model), &m, NULL), 0);
    }
    assert_int_equal(coord_store_history(s, job, 0, 10, &h, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(h[0].round, 1);
    assert_int_equal(h[0].m.samples, 0); /* no metrics kept */
    assert_int_equal(h[0].selected, 2);
    assert_int_equal(h[0].accepted, 0);
    for (size_t i = 1; i < 4; i++) {
        int64_t r = (int64_t)i + 1;

        assert_int_equal(h[i].round, r);
        assert_int_equal(h[i].attempt, 1);
        assert_int_equal(h[i].selected, 2);
        assert_int_equal(h[i].accepted, 1); /* the late one does not count */
        assert_int_equal(h[i].bytes_up, 100 * r);
        assert_int_equal(h[i].m.samples, 10 * r);
        assert_true(h[i].m.train_loss == 1.0 / (double)r);
        assert_int_equal(h[i].m.model_nnz, r);
        assert_int_equal(h[i].m.bytes_down, 1000 * r);
        assert_true(h[i].opened_ms > 0 && h[i].committed_ms >= h[i].opened_ms);
    }
    assert_int_equal(h[2].m.eval_samples, 0);
    assert_true(h[3].m.eval_accuracy == 0.75);
    assert_true(h[0].m.personal_accuracy == 0);
    assert_true(h[1].m.personal_accuracy == 0.25);
    assert_true(h[2].m.personal_accuracy == 0);
    assert_true(h[3].m.personal_accuracy == 0.5);
    assert_true(h[0].m.privacy_iterations == 0 && h[0].m.privacy_spent == 0);
    assert_int_equal(h[3].m.support_churn, 12);
    assert_true(h[3].m.privacy_iterations == 40 && h[3].m.privacy_spent == 0.25 &&
                h[3].m.privacy_spent_rdp == 0.125);
    coord_store_free(h);
    /* Pages: after round 2, at most 1. */
    assert_int_equal(coord_store_history(s, job, 2, 1, &h, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(h[0].round, 3);
    coord_store_free(h);
    assert_int_equal(coord_store_history(s, job, 0, 0, &h, &n), SFL_EINVAL);
    coord_store_close(s);

    /* Back to schema 3 (round_metrics as it was created, without
     * personal_accuracy and the privacy ledger), then reopen: the columns
     * are added, the metrics stay, the old rounds read 0 and new commits
     * keep the values. */
    raw_sql(p, "ALTER TABLE round_metrics DROP COLUMN personal_accuracy; "
               "ALTER TABLE round_metrics DROP COLUMN privacy_iterations; "
               "ALTER TABLE round_metrics DROP COLUMN privacy_spent; "
               "ALTER TABLE round_metrics DROP COLUMN privacy_spent_rdp; "
               "ALTER TABLE round_metrics DROP COLUMN support_churn; "
               "DROP TABLE quarantine; DROP TABLE job_statistics; DROP TABLE leader; DROP TABLE masters; "
               "DELETE FROM schema_version WHERE version >= 4");
    s = open_ok(p, 2);
    assert_int_equal(coord_store_history(s, job, 0, 10, &h, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(h[3].m.samples, 40);
    assert_true(h[3].m.eval_accuracy == 0.75);
    assert_true(h[3].m.personal_accuracy == 0);
    assert_true(h[3].m.privacy_iterations == 0 && h[3].m.privacy_spent_rdp == 0);
    assert_int_equal(h[3].m.support_churn, 0);
    coord_store_free(h);
    {
        uint8_t nonce[COORD_NONCE_BYTES];
        int64_t attempt = 0;

        assert_int_equal(coord_store_round_next_attempt(s, job, 5, &attempt), 0);
        nonce_for(5, attempt, nonce);
        assert_int_equal(coord_store_round_open(s, job, 5, attempt, nonce, cohort, 2), 0);
        assert_int_equal(
            coord_store_round_set_state(s, job, 5, attempt, COORD_SROW_TRAINING, NULL), 0);
        assert_int_equal(
            coord_store_round_set_state(s, job, 5, attempt, COORD_SROW_AGGREGATING, NULL), 0);
        m.samples = 50;
        m.eval_samples = 4;
        m.personal_accuracy = 0.875;
        assert_int_equal(
            coord_store_round_commit(s, job, 5, attempt, model, sizeof(model), &m, NULL), 0);
    }
    assert_int_equal(coord_store_history(s, job, 4, 10, &h, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(h[0].round, 5);
    assert_true(h[0].m.personal_accuracy == 0.875);
    assert_true(h[0].m.privacy_iterations == 40 && h[0].m.privacy_spent == 0.25);
    assert_int_equal(h[0].m.support_churn, 12);
    coord_store_free(h);
    coord_store_close(s);

    /* Back to schema 1, then reopen: the migration runs, the rounds stay. */
    raw_sql(p, "DROP TABLE round_metrics; DROP TABLE job_failures; "
               "DROP TABLE revoked_certs; DROP TABLE quarantine; DROP TABLE job_statistics; DROP TABLE leader; DROP TABLE masters; "
               "DELETE FROM schema_version WHERE version >= 2");
    s = open_ok(p, 2);
    assert_int_equal(coord_store_history(s, job, 0, 10, &h, &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(h[3].m.samples, 0);
    assert_int_equal(h[3].accepted, 1);
    assert_true(h[4].m.personal_accuracy == 0);
    coord_store_free(h);
    commit_round(s, job, 6, cohort, 2, model, sizeof(model));
    coord_store_close(s);
}

/* Quarantine: idempotent (the first reason stays), per job, survives a
 * reopen (kill -9 and restart), and release refuses an agent that is not
 * quarantined. */
static void test_store_quarantine(void **state)
{
    (void)state;
    const char *p = dbpath("quarantine.db");
    coord_store_t *s = open_ok(p, 2);
    coord_quar_row_t *q = NULL;
    char longr[COORD_REASON_MAX + 2];
    int64_t j1 = 0, j2 = 0;
    size_t n = 0;

    assert_int_equal(coord_store_job_create(s, "a", NULL, 0, 1, &j1), 0);
    assert_int_equal(coord_store_job_create(s, "b", NULL, 0, 1, &j2), 0);
    assert_int_equal(coord_store_quarantine_list(s, &q, &n), 0);
    assert_int_equal(n, 0);
    assert_null(q);
    assert_int_equal(coord_store_quarantine_add(s, j1, 7, "bad commitment", 100), 0);
    assert_int_equal(coord_store_quarantine_add(s, j1, 7, "something else", 200), 0);
    assert_int_equal(coord_store_quarantine_add(s, j2, 7, "weight word", 300), 0);
    assert_int_equal(coord_store_quarantine_add(s, j1, 3, "share box", 400), 0);
    assert_int_equal(coord_store_quarantine_add(s, j1, 4, "", 400), SFL_EINVAL);
    memset(longr, 'x', sizeof(longr) - 1);
    longr[sizeof(longr) - 1] = '\0';
    assert_int_equal(coord_store_quarantine_add(s, j1, 4, longr, 400), SFL_ELIMIT);
    coord_store_close(s);

    s = open_ok(p, 2);
    assert_int_equal(coord_store_quarantine_list(s, &q, &n), 0);
    assert_int_equal(n, 3);
    assert_true(q[0].job == j1 && q[0].agent == 3 && q[0].at_ms == 400);
    assert_string_equal(q[0].reason, "share box");
    assert_true(q[1].job == j1 && q[1].agent == 7 && q[1].at_ms == 100);
    assert_string_equal(q[1].reason, "bad commitment");
    assert_true(q[2].job == j2 && q[2].agent == 7);
    coord_store_free(q);

    assert_int_equal(coord_store_quarantine_release(s, j1, 7), 0);
    assert_int_equal(coord_store_quarantine_release(s, j1, 7), SFL_ENOTFOUND);
    assert_non_null(strstr(sfl_last_error(), "not quarantined"));
    assert_int_equal(coord_store_quarantine_release(s, j1, 99), SFL_ENOTFOUND);
    assert_int_equal(coord_store_quarantine_list(s, &q, &n), 0);
    assert_int_equal(n, 2);
    assert_true(q[0].agent == 3 && q[1].job == j2);
    coord_store_free(q);
    coord_store_close(s);
}

/* A standardize job's statistics round: attempts counted as they open
 * (never back), the moments stored once, read back after a reopen, and
 * no attempt counted after the commit. */
static void test_store_statistics(void **state)
{
    (void)state;
    const char *p = dbpath("statistics.db");
    coord_store_t *s = open_ok(p, 2);
    coord_stats_row_t r;
    uint8_t m[24] = {1, 2, 3}, h[COORD_HASH_BYTES] = {9};
    int64_t job = 0;

    assert_int_equal(coord_store_job_create(s, "std", NULL, 0, 1, &job), 0);
    assert_int_equal(coord_store_stats_get(s, job, 1024, &r), SFL_ENOTFOUND);
    assert_int_equal(coord_store_stats_commit(s, job, m, sizeof(m), h, 10, 2), SFL_EINVAL);
    assert_int_equal(coord_store_stats_open(s, job, 1), 0);
    assert_int_equal(coord_store_stats_open(s, job, 3), 0);
    assert_int_equal(coord_store_stats_open(s, job, 2), 0); /* never back */
    assert_int_equal(coord_store_stats_get(s, job, 1024, &r), 0);
    assert_int_equal(r.attempts, 3);
    assert_null(r.moments);
    coord_store_close(s);

    s = open_ok(p, 2);
    assert_int_equal(coord_store_stats_commit(s, job, m, 7, h, 10, 2), SFL_EINVAL); /* % 8 */
    assert_int_equal(coord_store_stats_commit(s, job, m, sizeof(m), h, 10, 2), 0);
    assert_int_equal(coord_store_stats_commit(s, job, m, sizeof(m), h, 10, 2), SFL_EINVAL);
    assert_int_equal(coord_store_stats_open(s, job, 4), 0); /* a no-op once stored */
    assert_int_equal(coord_store_stats_get(s, job, 8, &r), SFL_ELIMIT);
    coord_store_free(r.moments);
    assert_int_equal(coord_store_stats_get(s, job, 1024, &r), 0);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.rows, 10);
    assert_int_equal(r.agents, 2);
    assert_int_equal(r.len, sizeof(m));
    assert_memory_equal(r.moments, m, sizeof(m));
    assert_memory_equal(r.hash, h, sizeof(h));
    coord_store_free(r.moments);
    coord_store_close(s);
}

static void test_store_schema_version(void **state)
{
    (void)state;
    const char *p = dbpath("future.db");
    coord_store_t *s = open_ok(p, 2), *s2 = NULL;
    int64_t job = 0;

    assert_int_equal(coord_store_job_create(s, "keep-me", NULL, 0, 1, &job), 0);
    coord_store_close(s);
    char sql[100], want[100];

    snprintf(sql, sizeof(sql), "INSERT INTO schema_version(version, applied_ms) VALUES(%d, 0)",
             COORD_STORE_SCHEMA_VERSION + 1);
    raw_sql(p, sql);
    assert_int_equal(coord_store_open(p, NULL, &s2), SFL_EUNSUP);
    assert_null(s2);
    const char *d = sfl_last_error();
    snprintf(want, sizeof(want), "schema version %d is newer than this coordinator supports (%d)",
             COORD_STORE_SCHEMA_VERSION + 1, COORD_STORE_SCHEMA_VERSION);
    assert_non_null(strstr(d, want));
    /* Refused, not altered: the row and the data are still there. */
    snprintf(sql, sizeof(sql), "DELETE FROM schema_version WHERE version = %d",
             COORD_STORE_SCHEMA_VERSION + 1);
    raw_sql(p, sql);
    s = open_ok(p, 2);
    coord_job_row_t j;
    assert_int_equal(coord_store_job_get(s, job, 0, &j), 0);
    assert_string_equal(j.name, "keep-me");
    coord_job_row_clear(&j);
    coord_store_close(s);

    if (store_pg) {
        /* Another application's schema is not taken over; a server that
         * does not answer is a clear error. */
        const char *q = dbpath("foreign.db");

        raw_sql(q, "CREATE TABLE t(x int); INSERT INTO t VALUES(1)");
        assert_int_equal(coord_store_open(q, NULL, &s2), SFL_EPARSE);
        assert_non_null(strstr(sfl_last_error(), "not an sfl coordinator store"));
        assert_null(s2);
        raw_sql(q, "DO $$BEGIN IF to_regclass('schema_version') IS NOT NULL OR "
                   "(SELECT count(*) FROM t) <> 1 THEN RAISE 'foreign schema altered'; "
                   "END IF; END$$");
        assert_int_equal(coord_store_open("postgresql:host=127.0.0.1 port=1 connect_timeout=5 "
                                          "password=hunter2",
                                          NULL, &s2),
                         -ECONNREFUSED);
        assert_non_null(strstr(sfl_last_error(), "connect to PostgreSQL"));
        assert_null(strstr(sfl_last_error(), "hunter2")); /* masked */
        assert_int_equal(coord_store_open("postgresql:", NULL, &s2), SFL_EINVAL);
        return;
    }
    /* Another application's SQLite database is not taken over. */
    const char *q = dbpath("foreign.db");
    uint8_t *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    raw_sql(q, "CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    file_bytes(q, &before, &nb);
    assert_int_equal(coord_store_open(q, NULL, &s2), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "not an sfl coordinator store"));
    assert_null(s2);
    file_bytes(q, &after, &na); /* still a rollback-journal database */
    assert_int_equal(na, nb);
    assert_memory_equal(after, before, nb);
    free(before);
    free(after);

    /* Bad paths. */
    assert_int_equal(coord_store_open("", NULL, &s2), SFL_EINVAL);
    assert_int_equal(coord_store_open(dbpath("no/such/dir.db"), NULL, &s2), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "SQLITE_CANTOPEN"));
}

static void test_store_garbage(void **state)
{
    (void)state;
    const char *p = dbpath("garbage.db");
    uint8_t junk[8192], *after = NULL;
    coord_store_t *s = NULL;
    size_t n = 0;

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 131 + 7);
    write_file(p, junk, sizeof(junk));
    assert_int_equal(coord_store_open(p, NULL, &s), SFL_EPARSE);
    assert_null(s);
    assert_non_null(strstr(sfl_last_error(), "file is not a database (SQLITE_NOTADB)"));
    file_bytes(p, &after, &n);
    assert_int_equal(n, sizeof(junk)); /* untouched */
    assert_memory_equal(after, junk, n);
    free(after);

    /* Short garbage (less than a header) and a text file. */
    write_file(p, (const uint8_t *)"SQLite format 3", 15);
    assert_int_equal(coord_store_open(p, NULL, &s), SFL_EPARSE);
    write_file(p, (const uint8_t *)"agents,jobs\n1,2\n", 16);
    assert_int_equal(coord_store_open(p, NULL, &s), SFL_EPARSE);
    assert_null(s);
}

/* Builds a store with three checkpoints of distinct bytes; returns the path. */
static const char *damaged_base(const char *name, uint8_t *model, size_t len)
{
    const char *p = dbpath(name);
    coord_store_t *s = open_ok(p, 3);
    int64_t job = 0, a;

    assert_int_equal(coord_store_job_create(s, "j", NULL, 0, 1, &job), 0);
    a = add_agent(s, "a", 1);
    for (int64_t k = 1; k <= 3; k++) {
        make_model(k, model, len);
        commit_round(s, job, k, &a, 1, model, len);
    }
    coord_store_close(s); /* checkpoints the WAL into the main file */
    return p;
}

static void test_store_damage(void **state)
{
    (void)state;
    uint8_t model[20000], *bytes = NULL, *m = NULL;
    coord_store_t *s = NULL;
    size_t n = 0, len = 0;
    int64_t r = 0;

    /* A flipped byte inside the last model: pages are fine, the hash is not. */
    const char *p = damaged_base("flip.db", model, sizeof(model));
    file_bytes(p, &bytes, &n);
    uint8_t *hit = find_bytes(bytes, n, model + 5000, 64);
    assert_non_null(hit);
    hit[10] ^= 0x01;
    write_file(p, bytes, n);
    s = open_ok(p, 3);
    assert_int_equal(coord_store_checkpoint_latest(s, 1, sizeof(model), &r, &m, &len, NULL),
                     SFL_EIO);
    assert_detail("store: job 1 round 3: checkpoint does not match its hash");
    assert_null(m);
    coord_store_close(s);
    free(bytes);

    /* Everything after the first page overwritten: refused at open. */
    p = damaged_base("pages.db", model, sizeof(model));
    file_bytes(p, &bytes, &n);
    assert_true(n > 3 * 4096);
    for (size_t i = 4096; i < n; i++)
        bytes[i] = (uint8_t)(i * 2654435761u >> 13);
    write_file(p, bytes, n);
    assert_int_equal(coord_store_open(p, NULL, &s), SFL_EPARSE);
    assert_null(s);
    assert_non_null(strstr(sfl_last_error(), p));
    free(bytes);

    /* Truncated to half: refused at open. */
    p = damaged_base("trunc.db", model, sizeof(model));
    file_bytes(p, &bytes, &n);
    write_file(p, bytes, n / 2);
    assert_int_equal(coord_store_open(p, NULL, &s), SFL_EPARSE);
    assert_null(s);
    free(bytes);

    /* Rows edited behind the store's back: a cohort of 12 bytes, an unknown
     * state, a short nonce. Each read fails clearly. */
    p = damaged_base("rows.db", model, 100);
    raw_sql(p, "UPDATE rounds SET cohort = zeroblob(16) WHERE round = 1;"
               "UPDATE rounds SET cohort = x'05000000000000000300000000000000'"
               " WHERE round = 2;"
               "UPDATE jobs SET spec = 'text, not a blob'");
    s = open_ok(p, 3);
    coord_round_row_t rd;
    assert_int_equal(coord_store_round_get(s, 1, 1, 1, 16, &rd), SFL_EPARSE);
    assert_detail("store: cohort of job 1 round 1: entry 0 is not an ascending agent id");
    assert_int_equal(coord_store_round_get(s, 1, 2, 1, 16, &rd), SFL_EPARSE);
    assert_detail("store: cohort of job 1 round 2: entry 1 is not an ascending agent id");
    coord_job_row_t j;
    assert_int_equal(coord_store_job_get(s, 1, 100, &j), SFL_EPARSE);
    assert_detail("store: jobs.spec is not a blob");
    coord_store_close(s);
}

static void test_store_recover(void **state)
{
    (void)state;
    coord_store_t *s = open_ok(dbpath("recover.db"), 3);
    uint8_t nonce[COORD_NONCE_BYTES] = {0};
    int64_t j1 = 0, j2 = 0, a;
    coord_round_row_t r;
    size_t n = 9;

    a = add_agent(s, "a", 1);
    assert_int_equal(coord_store_job_create(s, "j1", NULL, 0, 1, &j1), 0);
    assert_int_equal(coord_store_job_create(s, "j2", NULL, 0, 1, &j2), 0);
    commit_round(s, j1, 1, &a, 1, nonce, 8);
    assert_int_equal(coord_store_round_open(s, j1, 2, 1, nonce, &a, 1), 0);
    assert_int_equal(coord_store_round_open(s, j2, 1, 1, nonce, &a, 1), 0);
    assert_int_equal(coord_store_round_set_state(s, j2, 1, 1, COORD_SROW_TRAINING, NULL), 0);
    assert_int_equal(coord_store_recover(s, "coordinator restarted", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(coord_store_round_get(s, j1, 2, 1, 4, &r), 0);
    assert_int_equal(r.state, COORD_SROW_FAILED);
    assert_string_equal(r.reason, "coordinator restarted");
    coord_round_clear(&r);
    assert_int_equal(coord_store_round_get(s, j1, 1, 1, 4, &r), 0);
    assert_int_equal(r.state, COORD_SROW_COMMITTED); /* untouched */
    coord_round_clear(&r);
    assert_int_equal(coord_store_recover(s, NULL, &n), 0);
    assert_int_equal(n, 0);
    /* The retry is attempt 2 of the same round. */
    int64_t at = 0;
    assert_int_equal(coord_store_round_next_attempt(s, j1, 2, &at), 0);
    assert_int_equal(at, 2);
    assert_int_equal(coord_store_round_open(s, j1, 2, at, nonce, &a, 1), 0);
    coord_store_close(s);
}

/* ---- crash tests ----------------------------------------------------- */

#define CRASH_KEEP 3
#define CRASH_KILLS 20
#define CRASH_MAX_MODEL 60000

/* The child: what a coordinator does, round after round, reporting each
 * round to the parent only after its commit returned. Never returns; any
 * store error exits with a code the parent reports. */
static void crash_child(const char *path, int64_t job, int fd)
{
    static uint8_t model[CRASH_MAX_MODEL];
    coord_store_opts_t o = {.keep_checkpoints = CRASH_KEEP};
    uint8_t nonce[COORD_NONCE_BYTES];
    coord_store_t *s = NULL;
    coord_job_row_t j;
    const int64_t cohort[] = {1, 2, 3};

    if (coord_store_open(path, &o, &s) != 0)
        _exit(10);
    if (coord_store_recover(s, "restart", NULL) != 0)
        _exit(11);
    if (coord_store_job_get(s, job, 0, &j) != 0)
        _exit(12);
    for (int64_t r = j.last_committed_round + 1;; r++) {
        int64_t at = 0;
        size_t len = model_len(r);

        if (coord_store_round_next_attempt(s, job, r, &at) != 0)
            _exit(13);
        nonce_for(r, at, nonce);
        if (coord_store_round_open(s, job, r, at, nonce, cohort, 3) != 0 ||
            coord_store_round_set_state(s, job, r, at, COORD_SROW_TRAINING, NULL) != 0 ||
            coord_store_participation_record(s, job, r, at, 2, COORD_PART_ACCEPTED, NULL,
                                             (int64_t)len) != 0 ||
            coord_store_round_set_state(s, job, r, at, COORD_SROW_AGGREGATING, NULL) != 0)
            _exit(14);
        make_model(r, model, len);
        if (coord_store_round_commit(s, job, r, at, model, len, NULL, NULL) != 0)
            _exit(15);
        if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
            _exit(16);
        if (r > 100000)
            _exit(17);
    }
}

/* The invariants after any crash; *reported is raised to what is durable. */
static void check_after_crash(const char *path, int64_t job, int64_t *reported)
{
    static uint8_t want[CRASH_MAX_MODEL];
    uint8_t hash[COORD_HASH_BYTES], h[COORD_HASH_BYTES], *m = NULL;
    coord_store_t *s = open_ok(path, CRASH_KEEP);
    coord_round_row_t *rounds = NULL;
    int64_t *ck = NULL, r = 0;
    size_t n = 0, len = 0;
    coord_job_row_t j;

    assert_int_equal(coord_store_integrity_check(s), 0);
    assert_int_equal(coord_store_job_get(s, job, 0, &j), 0);
    int64_t last = j.last_committed_round;
    coord_job_row_clear(&j);
    /* Nothing reported is lost; at most one commit was not yet reported. */
    if (last < *reported || last > *reported + 1)
        fail_msg("last committed %lld, child reported %lld", (long long)last,
                 (long long)*reported);
    *reported = last;

    if (last > 0) {
        assert_int_equal(coord_store_checkpoint_latest(s, job, CRASH_MAX_MODEL, &r, &m, &len,
                                                       hash),
                         0);
        assert_int_equal(r, last);
        assert_int_equal(len, model_len(last));
        make_model(last, want, len);
        assert_memory_equal(m, want, len);
        crypto_generichash(h, sizeof(h), m, len, NULL, 0);
        assert_memory_equal(h, hash, sizeof(h));
        coord_store_free(m);
    }
    /* Checkpoints: exactly the last min(N, last) rounds, each intact. */
    assert_int_equal(coord_store_checkpoint_rounds(s, job, &ck, &n), 0);
    assert_int_equal(n, last < CRASH_KEEP ? last : CRASH_KEEP);
    for (size_t i = 0; i < n; i++) {
        int64_t k = last - (int64_t)n + 1 + (int64_t)i;
        assert_int_equal(ck[i], k);
        assert_int_equal(coord_store_checkpoint_get(s, job, k, CRASH_MAX_MODEL, &m, &len, NULL),
                         0);
        make_model(k, want, model_len(k));
        assert_int_equal(len, model_len(k));
        assert_memory_equal(m, want, len);
        coord_store_free(m);
    }
    coord_store_free(ck);

    /* Rounds: committed exactly 1..last, consecutive, once each; anything
     * else is failed, or live only at last + 1 (the round in flight). */
    int64_t expect = 1;
    assert_int_equal(coord_store_round_list(s, job, 16, &rounds, &n), 0);
    for (size_t i = 0; i < n; i++) {
        const coord_round_row_t *rd = &rounds[i];

        assert_true(rd->round >= 1 && rd->round <= last + 1);
        if (rd->state == COORD_SROW_COMMITTED) {
            assert_int_equal(rd->round, expect);
            expect++;
            assert_int_equal(rd->cohort_len, 3);
            assert_true(rd->closed_ms >= rd->opened_ms);
        } else if (rd->state != COORD_SROW_FAILED) {
            assert_int_equal(rd->round, last + 1);
            assert_int_equal(i, n - 1);
        }
    }
    assert_int_equal(expect, last + 1);
    coord_round_list_free(rounds, n);
    coord_store_close(s);
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static unsigned lcg(unsigned *x)
{
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

/* Reads the child's next report into *r: 1 on a report, 0 at EOF (the child
 * died). A child that neither reports nor dies within a minute (a commit
 * takes milliseconds, even under ASan on a loaded machine) fails the test. */
static int next_report(int fd, int64_t *r)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;

    do
        n = poll(&p, 1, 60000);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        fail_msg("crash child: no report and no exit within 60 s");
    assert_true(n == 1);
    ssize_t got = read(fd, r, sizeof(*r));
    assert_true(got == 0 || got == (ssize_t)sizeof(*r));
    return got != 0;
}

/* Starts a child that commits round after round, waits for two of its
 * reports (observed progress, whatever the machine's speed), then kills it
 * at a random point within two measured commit intervals, so kills land at
 * every phase of a commit. *frac in [0, 2) picks the point; *reported is
 * raised by every round the child reported. */
static void run_and_kill(const char *path, int64_t job, double frac, int64_t *reported)
{
    int fds[2], status = 0;
    int64_t r;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(path, job, fds[1]);
        _exit(1);
    }
    close(fds[1]);
    double t[2];
    for (int i = 0; i < 2; i++) {
        if (!next_report(fds[0], &r)) {
            assert_int_equal(waitpid(pid, &status, 0), pid);
            fail_msg("crash child ended before its report %d (status %d)", i + 1, status);
        }
        assert_int_equal(r, *reported + 1);
        *reported += 1;
        t[i] = now_s();
    }
    sleep_us((unsigned)(frac * (t[1] - t[0]) * 1e6));
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        fail_msg("child exited with %d before the kill", WEXITSTATUS(status));
    /* The pipe holds every report written before death; read to EOF. */
    while (next_report(fds[0], &r)) {
        assert_int_equal(r, *reported + 1);
        *reported += 1;
    }
    close(fds[0]);
}

static void test_store_crash(void **state)
{
    (void)state;
    const char *p = dbpath("crash.db");
    char path[sizeof(pathbuf)];
    coord_store_t *s;
    int64_t job = 0, reported = 0, durable_unreported = 0;
    unsigned seed = 20240601u;
    double t0 = now_s();

    snprintf(path, sizeof(path), "%s", p);
    s = open_ok(path, CRASH_KEEP);
    for (int i = 1; i <= 3; i++) {
        char name[32];
        snprintf(name, sizeof(name), "agent-%d", i);
        add_agent(s, name, (uint8_t)i);
    }
    assert_int_equal(coord_store_job_create(s, "crash", NULL, 0, 5, &job), 0);
    coord_store_close(s); /* no connection may cross the fork */

    for (int k = 0; k < CRASH_KILLS; k++) {
        double frac = (double)(lcg(&seed) % 20001u) / 10000.0; /* [0, 2] intervals */

        run_and_kill(path, job, frac, &reported);
        int64_t before = reported;
        check_after_crash(path, job, &reported);
        /* A commit that was durable when the kill came, its report lost. */
        durable_unreported += reported - before;
    }
    /* Informational only: no assertion on time (STYLE rule 22). */
    print_message("crash: %d kills, %lld rounds committed, %lld durable but unreported, "
                  "%.2f s\n",
                  CRASH_KILLS, (long long)reported, (long long)durable_unreported,
                  now_s() - t0);
    assert_true(reported >= 2 * CRASH_KILLS);
}

/* Kills during the very first open (schema creation) must leave a file that
 * opens as a complete store. */
static void test_store_crash_open(void **state)
{
    (void)state;
    unsigned seed = 77u;

    for (int k = 0; k < 10; k++) {
        char name[32], path[sizeof(pathbuf)];
        int status = 0;
        pid_t pid;

        snprintf(name, sizeof(name), "open-%d.db", k);
        snprintf(path, sizeof(path), "%s", dbpath(name));
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            coord_store_t *s = NULL;
            coord_agent_row_t a;

            if (coord_store_open(path, NULL, &s) != 0)
                _exit(10);
            for (uint8_t i = 1;; i++) {
                char an[32];
                snprintf(an, sizeof(an), "a%u", (unsigned)i);
                make_agent(&a, an, i);
                if (i == 255 || coord_store_agent_upsert(s, &a, NULL) != 0)
                    _exit(11);
            }
        }
        sleep_us(lcg(&seed) % 3001u);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        coord_store_t *s = open_ok(path, 2);
        int64_t job = 0;
        assert_int_equal(coord_store_integrity_check(s), 0);
        assert_int_equal(coord_store_job_create(s, "after", NULL, 0, 1, &job), 0);
        assert_true(job >= 1);
        coord_store_close(s);
    }
}

/* ---- allocation failures --------------------------------------------- */

static void test_store_failalloc(void **state)
{
    (void)state;
    const char *p = dbpath("fa.db");
    char path[sizeof(pathbuf)];
    coord_store_t *s = NULL, *t = NULL;
    uint8_t model[64] = {1, 2, 3}, nonce[COORD_NONCE_BYTES] = {0}, *m = NULL;
    int64_t job = 0, r = 0, *ck = NULL;
    coord_agent_row_t *agents = NULL;
    coord_job_row_t *jobs = NULL, j;
    coord_round_row_t *rounds = NULL, rd;
    coord_participation_t *parts = NULL;
    size_t n = 0, len = 0;
    int64_t cohort[20];

    snprintf(path, sizeof(path), "%s", p);
    FAILALLOC_EACH(coord_store_open(path, NULL, &t), (coord_store_close(t), t = NULL));
    s = open_ok(path, 3);
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fa-%d", i);
        cohort[i] = add_agent(s, name, (uint8_t)(i + 1));
    }
    for (int i = 0; i < 20; i++)
        assert_int_equal(coord_store_job_create(s, "j", model, sizeof(model), 1, &job), 0);
    FAILALLOC_EACH(coord_store_round_open(s, job, 1, 1, nonce, cohort, 20), (void)0);
    for (int64_t k = 2; k <= 20; k++) {
        assert_int_equal(coord_store_round_set_state(s, job, k - 1, 1, COORD_SROW_TRAINING,
                                                     NULL),
                         0);
        assert_int_equal(coord_store_round_set_state(s, job, k - 1, 1, COORD_SROW_AGGREGATING,
                                                     NULL),
                         0);
        assert_int_equal(
            coord_store_round_commit(s, job, k - 1, 1, model, sizeof(model), NULL, NULL), 0);
        assert_int_equal(coord_store_round_open(s, job, k, 1, nonce, cohort, 20), 0);
    }
    FAILALLOC_EACH(coord_store_agent_list(s, &agents, &n),
                   (coord_store_free(agents), agents = NULL));
    FAILALLOC_EACH(coord_store_job_list(s, 1024, &jobs, &n),
                   (coord_job_rows_free(jobs, n), jobs = NULL, n = 0));
    FAILALLOC_EACH(coord_store_job_get(s, job, 1024, &j), coord_job_row_clear(&j));
    FAILALLOC_EACH(coord_store_round_list(s, job, 64, &rounds, &n),
                   (coord_round_list_free(rounds, n), rounds = NULL, n = 0));
    FAILALLOC_EACH(coord_store_round_get(s, job, 3, 1, 64, &rd), coord_round_clear(&rd));
    FAILALLOC_EACH(coord_store_participation_list(s, job, 3, 1, &parts, &n),
                   (coord_store_free(parts), parts = NULL));
    FAILALLOC_EACH(coord_store_checkpoint_rounds(s, job, &ck, &n),
                   (coord_store_free(ck), ck = NULL));
    FAILALLOC_EACH(coord_store_checkpoint_latest(s, job, 1024, &r, &m, &len, NULL),
                   (coord_store_free(m), m = NULL));
    assert_int_equal(coord_store_integrity_check(s), 0);
    coord_store_close(s);
}

/* Leadership (both backends): the epoch counts from 1 at each leader_try;
 * a store fenced with an old epoch writes nothing of the fenced tables
 * (SFL_EFENCED) while agents stay writable. */
static void test_store_leader(void **state)
{
    (void)state;
    const char *p = dbpath("leader.db");
    coord_store_t *s = open_ok(p, 2);
    int64_t e1 = 0, e2 = 0, since = 0, job = 0, job2 = 0;
    char holder[128];
    coord_job_row_t *jobs = NULL;
    size_t n = 0;

    assert_int_equal(coord_store_leader_get(s, &e1, holder, &since), SFL_ENOTFOUND);
    assert_int_equal(coord_store_leader_held(s), 0);
    assert_int_equal(coord_store_leader_try(s, "", &e1), SFL_EINVAL);
    assert_int_equal(coord_store_leader_try(s, "master-a", &e1), 1);
    assert_int_equal(e1, 1);
    assert_int_equal(coord_store_leader_held(s), 1);
    coord_store_fence(s, e1);
    assert_int_equal(coord_store_job_create(s, "fenced-ok", NULL, 0, 1, &job), 0);
    assert_int_equal(coord_store_leader_try(s, "master-b", &e2), 1);
    assert_int_equal(e2, 2);
    assert_int_equal(coord_store_leader_get(s, &e2, holder, &since), 0);
    assert_int_equal(e2, 2);
    assert_string_equal(holder, "master-b");
    assert_true(since > 0);
    /* still fenced with epoch 1: superseded */
    assert_int_equal(coord_store_job_create(s, "late", NULL, 0, 1, &job2), SFL_EFENCED);
    assert_non_null(strstr(sfl_last_error(), "superseded"));
    assert_int_equal(coord_store_job_set_state(s, job, COORD_JOB_PAUSED), SFL_EFENCED);
    assert_int_equal(coord_store_quarantine_add(s, job, 1, "x", 1), SFL_EFENCED);
    assert_int_equal(coord_store_stats_open(s, job, 1), SFL_EFENCED);
    assert_int_equal(coord_store_recover(s, "restart", NULL), SFL_EFENCED);
    add_agent(s, "unfenced", 7); /* agents are not fenced */
    coord_store_fence(s, e2);
    assert_int_equal(coord_store_job_list(s, 0, &jobs, &n), 0);
    assert_int_equal(n, 1); /* nothing of the refused calls */
    coord_job_rows_free(jobs, n);
    assert_int_equal(coord_store_job_create(s, "now-ok", NULL, 0, 1, &job2), 0);
    coord_store_fence(s, 0);
    coord_store_close(s);
}

/* The masters (both backends): one row per holder, the freshest first; a
 * row not written for more than 3 x leader_retry_ms is stale; a heartbeat
 * forgets the rows of processes long gone (never its own); a clean
 * shutdown deletes its row; bad rows are refused both ways. */
static void test_store_masters(void **state)
{
    (void)state;
    const char *p = dbpath("masters.db");
    coord_store_t *s = open_ok(p, 2);
    coord_master_row_t a = {.holder = "m1 pid 10 listen 0.0.0.0:7443",
                            .role = COORD_MASTER_LEADER, .epoch = 3, .pid = 10, .host = "m1",
                            .started_ms = 1000, .seen_ms = 5000};
    coord_master_row_t b = {.holder = "m2 pid 20 listen 0.0.0.0:7443",
                            .role = COORD_MASTER_STANDBY, .epoch = 3, .pid = 20, .host = "m2",
                            .started_ms = 2000, .seen_ms = 4000};
    coord_master_row_t bad, *l = NULL;
    size_t n = 9;

    assert_int_equal(coord_store_master_list(s, &l, &n), 0);
    assert_int_equal(n, 0);
    assert_null(l);
    assert_int_equal(coord_store_master_seen(s, &a, 0), 0);
    assert_int_equal(coord_store_master_seen(s, &b, 0), 0);
    a.seen_ms = 5500; /* a heartbeat: the same row */
    assert_int_equal(coord_store_master_seen(s, &a, 0), 0);
    assert_int_equal(coord_store_master_list(s, &l, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(l[0].holder, a.holder);
    assert_int_equal(l[0].role, COORD_MASTER_LEADER);
    assert_int_equal(l[0].epoch, 3);
    assert_int_equal(l[0].pid, 10);
    assert_string_equal(l[0].host, "m1");
    assert_int_equal(l[0].started_ms, 1000);
    assert_int_equal(l[0].seen_ms, 5500);
    assert_string_equal(l[1].holder, b.holder);
    assert_int_equal(l[1].role, COORD_MASTER_STANDBY);
    assert_string_equal(coord_master_role_name(l[1].role), "standby");
    /* stale: b missed three heartbeats of 500 ms at 5501, not at 5500 */
    assert_false(coord_master_stale(&l[1], 5500, 500));
    assert_true(coord_master_stale(&l[1], 5501, 500));
    assert_false(coord_master_stale(&l[0], 5501, 500));
    coord_store_free(l);
    /* b takes over; its heartbeat forgets rows last seen before 5600 (a's),
     * never its own (seen at 4000 before this one) */
    b.role = COORD_MASTER_LEADER;
    b.epoch = 4;
    b.seen_ms = 5590;
    assert_int_equal(coord_store_master_seen(s, &b, 5600), 0);
    assert_int_equal(coord_store_master_list(s, &l, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(l[0].holder, b.holder);
    assert_int_equal(l[0].role, COORD_MASTER_LEADER);
    assert_int_equal(l[0].epoch, 4);
    coord_store_free(l);
    /* a clean shutdown */
    assert_int_equal(coord_store_master_gone(s, b.holder), 0);
    assert_int_equal(coord_store_master_gone(s, b.holder), 0);
    assert_int_equal(coord_store_master_list(s, &l, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(coord_store_master_gone(s, ""), SFL_EINVAL);
    /* refused on the way in */
    bad = a;
    bad.holder[0] = '\0';
    assert_int_equal(coord_store_master_seen(s, &bad, 0), SFL_EINVAL);
    bad = a;
    bad.role = (coord_master_role_t)7;
    assert_int_equal(coord_store_master_seen(s, &bad, 0), SFL_EINVAL);
    bad = a;
    bad.epoch = -1;
    assert_int_equal(coord_store_master_seen(s, &bad, 0), SFL_EINVAL);
    bad = a;
    memset(bad.host, 'h', sizeof(bad.host)); /* unterminated */
    assert_int_equal(coord_store_master_seen(s, &bad, 0), SFL_ELIMIT);
    coord_store_close(s);
    /* ... and on the way out: a holder past 127 bytes that someone wrote */
    raw_sql(p, "INSERT INTO masters VALUES('"
               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
               "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', 'leader', 1, 1, 'h', 1, 1)");
    s = open_ok(p, 2);
    l = NULL;
    assert_int_equal(coord_store_master_list(s, &l, &n), SFL_ELIMIT);
    assert_null(l);
    coord_store_close(s);
}

/* Store specs: the backend from the prefix, a bare path is SQLite, and the
 * masked form never shows a password. */
static void test_store_spec(void **state)
{
    (void)state;
    coord_store_backend_t b;
    const char *loc;
    char m[256];

    assert_int_equal(coord_store_spec_parse("sqlite:/a/b.db", &b, &loc), 0);
    assert_int_equal(b, COORD_STORE_SQLITE);
    assert_string_equal(loc, "/a/b.db");
    assert_int_equal(coord_store_spec_parse("/var/lib/sfl/coordinator.db", &b, &loc), 0);
    assert_int_equal(b, COORD_STORE_SQLITE);
    assert_string_equal(loc, "/var/lib/sfl/coordinator.db");
    assert_int_equal(coord_store_spec_parse("postgresql:host=db dbname=sfl", &b, &loc), 0);
    assert_int_equal(b, COORD_STORE_POSTGRESQL);
    assert_string_equal(loc, "host=db dbname=sfl");
    assert_int_equal(coord_store_spec_parse("postgresql://sfl@db/sfl", &b, &loc), 0);
    assert_int_equal(b, COORD_STORE_POSTGRESQL);
    assert_string_equal(loc, "postgresql://sfl@db/sfl");
    assert_int_equal(coord_store_spec_parse("postgres://db", &b, &loc), 0);
    assert_string_equal(loc, "postgres://db");
    assert_int_equal(coord_store_spec_parse("postgresql:postgresql://db", &b, &loc), 0);
    assert_string_equal(loc, "postgresql://db");
    assert_int_equal(coord_store_spec_parse("postgresql:", &b, &loc), SFL_EINVAL);
    assert_int_equal(coord_store_spec_parse("sqlite:", &b, &loc), SFL_EINVAL);
    assert_int_equal(coord_store_spec_parse("", &b, &loc), SFL_EINVAL);
    coord_store_spec_mask("postgresql:host=db password=s3cret user=u", m, sizeof(m));
    assert_string_equal(m, "postgresql:host=db password=*** user=u");
    coord_store_spec_mask("postgresql:password = 'a b\\'c' host=db", m, sizeof(m));
    assert_string_equal(m, "postgresql:password=*** host=db");
    coord_store_spec_mask("postgresql://u:s3cret@db:5432/sfl?password=x&a=1", m, sizeof(m));
    assert_string_equal(m, "postgresql://u:***@db:5432/sfl?password=***&a=1");
    coord_store_spec_mask("sqlite:/a/password=b", m, sizeof(m));
    assert_string_equal(m, "sqlite:/a/password=b");
    coord_store_spec_mask("postgresql:password=s3cret", m, 12);
    assert_null(strstr(m, "s3c"));
}

/* The rest need PostgreSQL: sessions of several processes. */

/* Two connections race the leader lock: one wins, the other waits its
 * turn (0, nothing changed) and wins once the first session ends; the
 * old leader's fenced connection is refused from then on. */
static void test_store_pg_leader_race(void **state)
{
    (void)state;
    const char *p = dbpath("race.db");
    coord_store_t *a = open_ok(p, 2), *aw = open_ok(p, 2), *b = open_ok(p, 2);
    int64_t ea = 0, eb = 0, job = 0, agent;
    const int64_t cohort[1] = {0};
    char holder[128];
    uint8_t nonce[COORD_NONCE_BYTES] = {1};
    coord_part_row_t row = {0};
    size_t skipped = 9;
    coord_round_row_t *rounds = NULL;
    size_t n = 0;

    (void)cohort;
    assert_int_equal(coord_store_leader_try(a, "a", &ea), 1);
    assert_int_equal(coord_store_leader_try(b, "b", &eb), 0);
    assert_int_equal(coord_store_leader_held(b), 0);
    assert_int_equal(coord_store_leader_get(b, &eb, holder, NULL), 0);
    assert_int_equal(eb, ea);
    assert_string_equal(holder, "a");
    coord_store_fence(aw, ea); /* a's writer connection */
    agent = add_agent(aw, "m", 3);
    assert_int_equal(coord_store_job_create(aw, "j", NULL, 0, 1, &job), 0);
    assert_int_equal(coord_store_round_open(aw, job, 1, 1, nonce, &agent, 1), 0);
    coord_store_close(a); /* the leader's session ends: its lock goes once the
                             server has seen it (bounded wait for that state) */
    int won = 0;
    for (double t0 = now_s(); won == 0 && now_s() - t0 < 30;) {
        won = coord_store_leader_try(b, "b", &eb);
        if (won == 0)
            poll(NULL, 0, 10);
    }
    assert_int_equal(won, 1);
    assert_int_equal(eb, ea + 1);
    assert_int_equal(coord_store_leader_held(b), 1);
    /* a's writer, still connected, is fenced off: nothing written */
    assert_int_equal(coord_store_round_set_state(aw, job, 1, 1, COORD_SROW_TRAINING, NULL),
                     SFL_EFENCED);
    row = (coord_part_row_t){job, 1, 1, agent, COORD_PART_ACCEPTED, NULL, 10, 0};
    assert_int_equal(coord_store_participation_batch(aw, &row, 1, &skipped), SFL_EFENCED);
    assert_int_equal(coord_store_batch_begin(aw), 0);
    assert_int_equal(coord_store_job_fail(aw, job, "x", 1), SFL_EFENCED);
    assert_int_equal(coord_store_batch_commit(aw), 0);
    assert_int_equal(coord_store_round_list(b, job, 8, &rounds, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(rounds[0].state, COORD_SROW_SELECTING);
    coord_round_list_free(rounds, n);
    coord_store_close(aw);
    coord_store_close(b);
}

/* Processes opening a fresh schema at once: one migrates, the others wait
 * on the advisory lock and find it done. */
static void test_store_pg_migrate_race(void **state)
{
    (void)state;
    char p[sizeof(pathbuf)];
    pid_t kids[4];

    snprintf(p, sizeof(p), "%s", dbpath("migrace.db"));
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            coord_store_t *s = NULL;
            int rc = coord_store_open(p, NULL, &s);

            if (rc == 0)
                coord_store_close(s);
            else
                fprintf(stderr, "child %d: %s\n", i, sfl_last_error());
            _exit(rc == 0 ? 0 : 1);
        }
    }
    for (int i = 0; i < 4; i++) {
        int st = 0;

        assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    char sql[256];
    snprintf(sql, sizeof(sql),
             "DO $$BEGIN IF (SELECT count(*) FROM schema_version) <> %d THEN "
             "RAISE 'migrated more than once'; END IF; END$$",
             COORD_STORE_SCHEMA_VERSION);
    raw_sql(p, sql);
    coord_store_t *s = open_ok(p, 2);
    assert_int_equal(coord_store_integrity_check(s), 0);
    coord_store_close(s);
}

/* Processes (front-ends) joining the same new agent at once: every upsert
 * succeeds, with the one id (a lost insert race runs the upsert again). */
static void test_store_pg_upsert_race(void **state)
{
    (void)state;
    char p[sizeof(pathbuf)];
    pid_t kids[4];

    snprintf(p, sizeof(p), "%s", dbpath("upsrace.db"));
    coord_store_close(open_ok(p, 2)); /* migrated once, before the race */
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            coord_store_t *s = NULL;
            coord_agent_row_t a;
            int64_t id = 0;
            int rc = coord_store_open(p, NULL, &s);

            make_agent(&a, "racer", 5);
            if (rc == 0)
                rc = coord_store_agent_upsert(s, &a, &id);
            if (rc != 0)
                fprintf(stderr, "child %d: %s\n", i, sfl_last_error());
            coord_store_close(s);
            _exit(rc == 0 && id > 0 && id < 100 ? (int)id : 255);
        }
    }
    int first = -1;
    for (int i = 0; i < 4; i++) {
        int st = 0;

        assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 255);
        if (first < 0)
            first = WEXITSTATUS(st);
        assert_int_equal(WEXITSTATUS(st), first);
    }
}

/* What a PostgreSQL store refuses or checks: backups (pg_dump's job), a
 * constraint left unvalidated, a schema version not this coordinator's. */
static void test_store_pg_checks(void **state)
{
    (void)state;
    const char *p = dbpath("checks.db");
    char spec[sizeof(pathbuf)];
    coord_store_t *s = open_ok(p, 2);
    uint64_t bytes = 7;

    snprintf(spec, sizeof(spec), "%s", p);
    assert_string_equal(coord_store_backend(s), "postgresql");
    assert_int_equal(coord_store_backup(s, dbpath("copy.db"), &bytes), SFL_EUNSUP);
    assert_non_null(strstr(sfl_last_error(), "pg_dump"));
    assert_int_equal(bytes, 0);
    assert_int_equal(coord_store_backup_path(spec, "/tmp/x.db", NULL), SFL_EUNSUP);
    assert_int_equal(coord_store_integrity_check(s), 0);
    raw_sql(spec, "ALTER TABLE agents ADD CONSTRAINT odd CHECK (samples < 0) NOT VALID");
    assert_int_equal(coord_store_integrity_check(s), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "odd"));
    raw_sql(spec, "ALTER TABLE agents DROP CONSTRAINT odd; DELETE FROM schema_version "
                  "WHERE version = (SELECT MAX(version) FROM schema_version)");
    assert_int_equal(coord_store_integrity_check(s), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "schema version"));
    coord_store_close(s);
}

/* The server restarts under a leading store: the call in flight fails
 * clearly (-ECONNRESET, libpq's message), the next one reconnects, and the
 * reconnected session no longer holds the leader lock. The cluster is this
 * test's own (tests/pgcluster.sh in SFL_TEST_PG_DIR/restart, which
 * tests/run.sh sets when not under qemu-user): the shared one serves the
 * suites that run beside this one. */
static void test_store_pg_restart(void **state)
{
    (void)state;
    const char *dir = getenv("SFL_TEST_PG_DIR");
    char cmd[1200], conninfo[512], spec[600];
    int64_t e = 0, job = 0;
    FILE *f;

    if (dir == NULL || *dir == '\0' || access("tests/pgcluster.sh", R_OK) != 0) {
        print_message("skipped: SFL_TEST_PG_DIR is unset (a directory for a cluster of this "
                      "test's own, restarted with tests/pgcluster.sh; tests/run.sh sets it)\n");
        skip();
    }
    snprintf(cmd, sizeof(cmd), "sh tests/pgcluster.sh start '%s/restart'", dir);
    assert_non_null(f = popen(cmd, "r"));
    assert_non_null(fgets(conninfo, sizeof(conninfo), f));
    assert_int_equal(pclose(f), 0);
    conninfo[strcspn(conninfo, "\n")] = '\0';
    snprintf(spec, sizeof(spec), "postgresql:%s", conninfo);
    coord_store_t *s = open_ok(spec, 2);

    assert_int_equal(coord_store_leader_try(s, "a", &e), 1);
    coord_store_fence(s, e);
    snprintf(cmd, sizeof(cmd), "sh tests/pgcluster.sh stop '%s/restart' >/dev/null", dir);
    assert_int_equal(system(cmd), 0);
    int rc = coord_store_job_create(s, "j", NULL, 0, 1, &job);
    assert_int_equal(rc, -ECONNRESET);
    assert_non_null(strstr(sfl_last_error(), "PostgreSQL"));
    assert_int_equal(coord_store_leader_held(s), 0);
    snprintf(cmd, sizeof(cmd), "sh tests/pgcluster.sh start '%s/restart' >/dev/null", dir);
    assert_int_equal(system(cmd), 0);
    /* reconnected: leadership is gone, the store works (the fence still
     * matches: nobody took over) */
    assert_int_equal(coord_store_job_create(s, "j", NULL, 0, 1, &job), 0);
    assert_int_equal(coord_store_leader_held(s), 0);
    assert_int_equal(coord_store_leader_try(s, "a", &e), 1);
    assert_int_equal(e, 2);
    coord_store_fence(s, e);
    assert_int_equal(coord_store_job_set_state(s, job, COORD_JOB_PAUSED), 0);
    coord_store_close(s);
    snprintf(cmd, sizeof(cmd), "sh tests/pgcluster.sh destroy '%s/restart' >/dev/null", dir);
    assert_int_equal(system(cmd), 0);
}

/* The PostgreSQL group: the same tests against SFL_TEST_PG's cluster, each
 * in a fresh schema, SKIPped with the reason when it is unset. */
#define PG_TEST(name)                                                                         \
    static void pg_##name(void **state)                                                       \
    {                                                                                         \
        if (!pg_available()) {                                                                \
            print_message("skipped: SFL_TEST_PG is unset (the conninfo of a running cluster; "   \
                          "tests/run.sh starts one with tests/pgcluster.sh)\n");              \
            skip();                                                                           \
        }                                                                                     \
        pg_mode(1);                                                                           \
        name(state);                                                                          \
        pg_mode(0);                                                                           \
    }
PG_TEST(test_store_agents)
PG_TEST(test_store_batch)
PG_TEST(test_store_jobs)
PG_TEST(test_store_rounds)
PG_TEST(test_store_checkpoints)
PG_TEST(test_store_reopen)
PG_TEST(test_store_history)
PG_TEST(test_store_schema_version)
PG_TEST(test_store_statistics)
PG_TEST(test_store_recover)
PG_TEST(test_store_failalloc)
PG_TEST(test_store_quarantine)
PG_TEST(test_store_leader)
PG_TEST(test_store_masters)
PG_TEST(test_store_pg_leader_race)
PG_TEST(test_store_pg_migrate_race)
PG_TEST(test_store_pg_restart)
PG_TEST(test_store_pg_upsert_race)
PG_TEST(test_store_pg_checks)
PG_TEST(test_store_crash)

static int pg_test_teardown(void **state)
{
    (void)state;
    pg_mode(0);
    return 0;
}
#define PG_UNIT(name) cmocka_unit_test_teardown(pg_##name, pg_test_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_agents),
        cmocka_unit_test(test_store_batch),
        cmocka_unit_test(test_store_jobs),
        cmocka_unit_test(test_store_rounds),
        cmocka_unit_test(test_store_checkpoints),
        cmocka_unit_test(test_store_reopen),
        cmocka_unit_test(test_store_history),
        cmocka_unit_test(test_store_schema_version),
        cmocka_unit_test(test_store_statistics),
        cmocka_unit_test(test_store_garbage),
        cmocka_unit_test(test_store_damage),
        cmocka_unit_test(test_store_recover),
        cmocka_unit_test(test_store_crash),
        cmocka_unit_test(test_store_crash_open),
        cmocka_unit_test(test_store_failalloc),
        cmocka_unit_test(test_store_quarantine),
        cmocka_unit_test(test_store_leader),
        cmocka_unit_test(test_store_masters),
        cmocka_unit_test(test_store_spec),
    };
    const struct CMUnitTest pg_tests[] = {
        PG_UNIT(test_store_agents),
        PG_UNIT(test_store_batch),
        PG_UNIT(test_store_jobs),
        PG_UNIT(test_store_rounds),
        PG_UNIT(test_store_checkpoints),
        PG_UNIT(test_store_reopen),
        PG_UNIT(test_store_history),
        PG_UNIT(test_store_schema_version),
        PG_UNIT(test_store_statistics),
        PG_UNIT(test_store_recover),
        PG_UNIT(test_store_failalloc),
        PG_UNIT(test_store_quarantine),
        PG_UNIT(test_store_leader),
        PG_UNIT(test_store_masters),
        PG_UNIT(test_store_pg_leader_race),
        PG_UNIT(test_store_pg_migrate_race),
        PG_UNIT(test_store_pg_upsert_race),
        PG_UNIT(test_store_pg_checks),
        PG_UNIT(test_store_crash),
        PG_UNIT(test_store_pg_restart),
    };
    int rc = cmocka_run_group_tests_name("sqlite", tests, group_setup, group_teardown);

    return rc + cmocka_run_group_tests_name("postgresql", pg_tests, group_setup,
                                            pg_group_teardown);
}

/* The store's logic, once for both databases (store.h's contract): the
 * checks, transactions, error paths and invariants of every coord_store_*
 * call, written against the driver interface of db.h. The drivers:
 * db_sqlite.c (sqlite3; the durability model is described there) and
 * db_pg.c (libpq: concurrency, fencing and reconnection there).
 *
 * Transactions: begin() opens one (SQLite: BEGIN IMMEDIATE, the write lock
 * up front; PostgreSQL: BEGIN, READ COMMITTED, writes that read first
 * serialised by the leader row's lock when fenced and by the unique and
 * foreign keys otherwise), or a savepoint inside a batch; end() commits or
 * rolls back. Once fenced (coord_store_fence), every transaction that
 * writes jobs, rounds, participation, checkpoints, statistics or
 * quarantine first checks the leader row's epoch (begin_fenced). */
#include "store/store.h"
#include "store/store_int.h"
#include "store/db.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

#define DEFAULT_KEEP 3
#define LIVE_STATES "('selecting','training','aggregating')"

#define AGENT_COLS                                                             \
    "id, name, cert_fingerprint, identity_pk, capabilities, samples, "        \
    "dimension, labels, joined_ms, last_seen_ms"
/* A failed job keeps its jobs.state and gets a job_failures row: its state
 * reads as "failed" and nothing changes it any more (schema 3). */
#define JOB_COLS                                                                              \
    "id, name, state, seed, created_ms, last_committed_round, spec, "                         \
    "(SELECT error FROM job_failures WHERE job_id = jobs.id)"
#define ROUND_COLS                                                             \
    "job_id, round, attempt, state, nonce, opened_ms, closed_ms, reason, cohort"

const char *const coord__db_sql[ST_COUNT] = {
    /* a statistics attempt is counted once opened; a stored sum is final */
    [ST_STATS_OPEN] = "INSERT INTO job_statistics(job_id, attempts) VALUES(?1, ?2) "
                      "ON CONFLICT(job_id) DO UPDATE SET attempts = max(attempts, ?2) "
                      "WHERE moments IS NULL",
    [ST_STATS_COMMIT] = "UPDATE job_statistics SET rows = ?2, agents = ?3, committed_ms = ?4, "
                        "moments_hash = ?5, moments = ?6 "
                        "WHERE job_id = ?1 AND moments IS NULL",
    [ST_STATS_GET] = "SELECT attempts, rows, agents, committed_ms, moments_hash, moments "
                     "FROM job_statistics WHERE job_id = ?1",
    /* the leader row (schema 9): one row, epoch counted from 1 */
    [ST_FENCE] = "UPDATE leader SET epoch = epoch WHERE epoch = ?1",
    [ST_LEADER_BUMP] = DB_SQL_LEADER_BUMP("epoch"),
    [ST_LEADER_GET] = "SELECT epoch, holder, since_ms FROM leader WHERE one = 1",
    /* the masters (schema 10): never fenced, a standby writes its row too */
    [ST_MASTER_SEEN] = "INSERT INTO masters(holder, role, epoch, pid, host, started_ms, seen_ms) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(holder) DO UPDATE SET "
                       "role = excluded.role, epoch = excluded.epoch, pid = excluded.pid, "
                       "host = excluded.host, started_ms = excluded.started_ms, "
                       "seen_ms = excluded.seen_ms",
    [ST_MASTER_FORGET] = "DELETE FROM masters WHERE seen_ms < ?1 AND holder <> ?2",
    [ST_MASTER_GONE] = "DELETE FROM masters WHERE holder = ?1",
    [ST_MASTER_LIST] = "SELECT holder, role, epoch, pid, host, started_ms, seen_ms FROM masters "
                       "ORDER BY seen_ms DESC, holder LIMIT ?1",
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT call",
    [ST_RELEASE] = "RELEASE call",
    [ST_ROLLBACK_TO] = "ROLLBACK TO call",
    [ST_AGENT_BY_NAME] = "SELECT id, identity_pk, cert_fingerprint, "
                         "EXISTS(SELECT 1 FROM revoked_certs WHERE fingerprint = "
                         "agents.cert_fingerprint) FROM agents WHERE name = ?1",
    [ST_REVOKE] = "INSERT OR IGNORE INTO revoked_certs(fingerprint, name, revoked_ms) "
                  "VALUES(?1, ?2, ?3)",
    [ST_REVOKED_LIST] = "SELECT fingerprint FROM revoked_certs ORDER BY fingerprint",
    /* the first reason stays: quarantining twice changes nothing */
    [ST_QUAR_ADD] = "INSERT OR IGNORE INTO quarantine(job_id, agent_id, reason, at_ms) "
                    "VALUES(?1, ?2, ?3, ?4)",
    [ST_QUAR_DEL] = "DELETE FROM quarantine WHERE job_id = ?1 AND agent_id = ?2",
    [ST_QUAR_LIST] = "SELECT job_id, agent_id, at_ms, reason FROM quarantine "
                     "ORDER BY job_id, agent_id",
    [ST_AGENT_BY_KEY] = "SELECT name FROM agents WHERE identity_pk = ?1",
    [ST_AGENT_INSERT] = DB_SQL_AGENT_INSERT(""),
    /* Parameters as in ST_AGENT_INSERT (bind_agent); the key is not changed. */
    [ST_AGENT_UPDATE] = "UPDATE agents SET cert_fingerprint = ?2, capabilities = ?4, "
                        "samples = ?5, dimension = ?6, labels = ?7, last_seen_ms = ?8 "
                        "WHERE name = ?1 AND identity_pk = ?3",
    [ST_AGENT_REKEY] = "UPDATE agents SET identity_pk = ?2 WHERE id = ?1",
    [ST_AGENT_TOUCH] = "UPDATE agents SET last_seen_ms = ?2 WHERE id = ?1",
    [ST_AGENT_GET] = "SELECT " AGENT_COLS " FROM agents WHERE id = ?1",
    [ST_AGENT_GET_NAME] = "SELECT " AGENT_COLS " FROM agents WHERE name = ?1",
    [ST_AGENT_LIST] = "SELECT " AGENT_COLS " FROM agents ORDER BY id",
    [ST_JOB_INSERT] = "INSERT INTO jobs(name, state, seed, created_ms, "
                      "last_committed_round, spec) VALUES(?1, 'active', ?2, ?3, 0, ?4)",
    [ST_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
    [ST_JOB_LIST] = "SELECT " JOB_COLS " FROM jobs ORDER BY id",
    [ST_JOB_STATE] = "SELECT state, last_committed_round, "
                     "EXISTS(SELECT 1 FROM job_failures WHERE job_id = jobs.id) FROM jobs "
                     "WHERE id = ?1",
    [ST_JOB_FAIL] = "INSERT INTO job_failures(job_id, error, failed_ms) VALUES(?1, ?2, ?3)",
    [ST_JOB_SET_STATE] = "UPDATE jobs SET state = ?2 WHERE id = ?1",
    [ST_JOB_SET_COMMITTED] = "UPDATE jobs SET last_committed_round = ?2 WHERE id = ?1",
    [ST_ROUND_INSERT] = "INSERT INTO rounds(job_id, round, attempt, state, nonce, "
                        "opened_ms, closed_ms, reason, cohort) "
                        "VALUES(?1, ?2, ?3, 'selecting', ?4, ?5, NULL, NULL, ?6)",
    [ST_ROUND_LIVE] = "SELECT attempt, state FROM rounds WHERE job_id = ?1 AND round = ?2 "
                      "AND state IN " LIVE_STATES " LIMIT 1",
    [ST_ROUND_MAX_ATTEMPT] = "SELECT COALESCE(MAX(attempt), 0) FROM rounds "
                             "WHERE job_id = ?1 AND round = ?2",
    [ST_ROUND_STATE] = "SELECT state FROM rounds WHERE job_id = ?1 AND round = ?2 "
                       "AND attempt = ?3",
    [ST_ROUND_SET_STATE] = "UPDATE rounds SET state = ?4, closed_ms = ?5, "
                           "reason = COALESCE(?6, reason) "
                           "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3",
    [ST_ROUND_GET] = "SELECT " ROUND_COLS " FROM rounds WHERE job_id = ?1 AND round = ?2 "
                     "AND attempt = ?3",
    [ST_ROUND_LIST] = "SELECT " ROUND_COLS " FROM rounds WHERE job_id = ?1 "
                      "ORDER BY round, attempt",
    [ST_ROUND_RECOVER] = "UPDATE rounds SET state = 'failed', closed_ms = ?1, reason = ?2 "
                         "WHERE state IN " LIVE_STATES,
    [ST_PART_RECORD] = DB_SQL_PART_RECORD("VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "),
    [ST_PART_STATUS] = "SELECT status FROM participation WHERE job_id = ?1 AND round = ?2 "
                       "AND attempt = ?3 AND agent_id = ?4",
    [ST_PART_LIST] = "SELECT agent_id, status, reason, bytes, at_ms FROM participation "
                     "WHERE job_id = ?1 AND round = ?2 AND attempt = ?3 ORDER BY agent_id",
    [ST_CKPT_INSERT] = "INSERT INTO checkpoints(job_id, round, model_hash, created_ms, model) "
                       "VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_CKPT_PRUNE] = "DELETE FROM checkpoints WHERE job_id = ?1 AND round <= ?2",
    [ST_CKPT_LATEST] = "SELECT j.last_committed_round, c.round, c.model_hash, c.model "
                       "FROM jobs j LEFT JOIN checkpoints c "
                       "ON c.job_id = j.id AND c.round = j.last_committed_round "
                       "WHERE j.id = ?1",
    [ST_CKPT_GET] = "SELECT round, round, model_hash, model FROM checkpoints "
                    "WHERE job_id = ?1 AND round = ?2",
    [ST_CKPT_ROUNDS] = "SELECT round FROM checkpoints WHERE job_id = ?1 ORDER BY round",
    [ST_VERSION] = "SELECT MAX(version) FROM schema_version",
    [ST_VERSION_INSERT] = "INSERT INTO schema_version(version, applied_ms) VALUES(?1, ?2)",
    /* the round metrics' columns (sfl/wire/roundmetrics.def), bound as ?4, ?5,
     * ... in the table's order ("?" numbers on from ?3; insert_metrics) */
    [ST_METRICS_INSERT] = "INSERT INTO round_metrics(job_id, round, attempt"
#define SFL_METRIC(name, type, fold, weight, when, status, sql, ...) ", " sql
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
                          ") VALUES(?1, ?2, ?3"
#define SFL_METRIC(...) ", ?"
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
                          ")",
    /* accepted and bytes_up come from participation, so rounds committed
     * before round_metrics existed have them too. */
    [ST_HISTORY] = "SELECT r.round, r.attempt, "
                   "(SELECT MIN(f.opened_ms) FROM rounds f "
                   " WHERE f.job_id = r.job_id AND f.round = r.round), "
                   "r.closed_ms, length(r.cohort) / 8, "
                   "(SELECT COUNT(*) FROM participation p WHERE p.job_id = r.job_id "
                   " AND p.round = r.round AND p.attempt = r.attempt "
                   " AND p.status = 'accepted'), "
                   "(SELECT CAST(COALESCE(SUM(p.bytes), 0) AS bigint) FROM participation p "
                   " WHERE p.job_id = r.job_id AND p.round = r.round "
                   " AND p.attempt = r.attempt AND p.status = 'accepted')"
    /* the round metrics from column 7 on, in the table's order (read_history) */
#define SFL_METRIC(name, type, fold, weight, when, status, sql, ...) ", m." sql
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
                   " FROM rounds r LEFT JOIN round_metrics m "
                   "ON m.job_id = r.job_id AND m.round = r.round "
                   "WHERE r.job_id = ?1 AND r.state = 'committed' AND r.round > ?2 "
                   "ORDER BY r.round LIMIT ?3",
};

/* jobs.state holds the first four; "failed" is a job_failures row. */
static const char *const job_states[] = {"active", "paused", "cancelled", "done", "failed"};
static const char *const round_states[] = {"selecting", "training", "aggregating",
                                           "committed", "failed"};
static const char *const part_states[] = {"selected", "accepted", "late", "duplicate",
                                          "rejected"};
#define NSTATES(a) (sizeof(a) / sizeof((a)[0]))

const char *coord_job_state_name(coord_job_state_t st)
{
    return (unsigned)st < NSTATES(job_states) ? job_states[st] : "?";
}

const char *coord_srow_state_name(coord_srow_state_t st)
{
    return (unsigned)st < NSTATES(round_states) ? round_states[st] : "?";
}

const char *coord_part_status_name(coord_part_status_t st)
{
    return (unsigned)st < NSTATES(part_states) ? part_states[st] : "?";
}

void coord_store_free(void *p)
{
    sfl__free(p);
}

/* ---- the driver's statement calls ------------------------------------ */

static int stmt(db_store_t *s, int id, db_stmt_t **out)
{
    return s->drv->stmt(s, id, out);
}

static int db_bind_i64(db_stmt_t *st, int i, int64_t v)
{
    return st->drv->bind_i64(st, i, v);
}

static int db_bind_double(db_stmt_t *st, int i, double v)
{
    return st->drv->bind_double(st, i, v);
}

static int db_bind_null(db_stmt_t *st, int i)
{
    return st->drv->bind_null(st, i);
}

static int db_step(db_stmt_t *st)
{
    return st->drv->step(st);
}

static int db_type(db_stmt_t *st, int i)
{
    return st->drv->type(st, i);
}

static int64_t db_i64(db_stmt_t *st, int i)
{
    return st->drv->col_i64(st, i);
}

static int db_int(db_stmt_t *st, int i)
{
    return (int)st->drv->col_i64(st, i);
}

static double db_double(db_stmt_t *st, int i)
{
    return st->drv->col_double(st, i);
}

static const unsigned char *db_text(db_stmt_t *st, int i)
{
    return st->drv->col_text(st, i);
}

static const void *db_blob(db_stmt_t *st, int i)
{
    return st->drv->col_blob(st, i);
}

static int db_bytes(db_stmt_t *st, int i)
{
    return st->drv->col_bytes(st, i);
}

int coord__db_err(db_store_t *s, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = s->drv->verr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

int64_t coord__db_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
#define now_ms coord__db_now_ms

/* stmt() with the leading parameters ?1..?n bound to ids[0..n); IDS(a, b)
 * gives n and ids. */
static int prep(db_store_t *s, int id, db_stmt_t **out, size_t n, const int64_t *ids)
{
    int rc = stmt(s, id, out);

    for (size_t i = 0; rc == 0 && i < n; i++)
        db_bind_i64(*out, (int)i + 1, ids[i]);
    return rc;
}
#define IDS(...)                                                                           \
    sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (const int64_t[]){__VA_ARGS__}

/* Steps st once: DB_ROW or DB_DONE, else the error with the detail
 * "<fmt>: <message>". */
static int step(db_store_t *s, db_stmt_t *st, const char *fmt, ...) SFL_PRINTF(3, 4);
static int step(db_store_t *s, db_stmt_t *st, const char *fmt, ...)
{
    va_list ap;
    int rc = db_step(st);

    if (rc == DB_ROW || rc == DB_DONE)
        return rc;
    va_start(ap, fmt);
    rc = s->drv->verr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* Ends the use of a statement: drops its result and bindings. */
static void done(db_stmt_t *st)
{
    if (st) {
        st->drv->reset(st);
    }
}

/* A blob, never NULL (zero bytes included); text, NULL for NULL. */
static int bind_blob(db_stmt_t *st, int i, const void *p, size_t n)
{
    return st->drv->bind_blob(st, i, p, n);
}

static int bind_text(db_stmt_t *st, int i, const char *t)
{
    return st->drv->bind_text(st, i, t);
}

/* Runs a statement that returns no rows. */
static int exec_stmt(db_store_t *s, db_stmt_t *st, const char *what)
{
    int rc = step(s, st, "store: %s", what);

    done(st);
    return rc < 0 ? rc : 0;
}

/* Binds a big blob (spec, cohort, model) as parameter i, then runs st like
 * exec_stmt. A database refuses values beyond its limit (SQLite: 1e9
 * bytes by default, PostgreSQL: bytea of 1 GB): SFL_ELIMIT with the detail
 * "<fmt>: <message>". */
static int exec_blob(db_store_t *s, db_stmt_t *st, int i, const void *p, size_t n,
                     const char *what, const char *fmt, ...) SFL_PRINTF(7, 8);
static int exec_blob(db_store_t *s, db_stmt_t *st, int i, const void *p, size_t n,
                     const char *what, const char *fmt, ...)
{
    va_list ap;
    int rc = bind_blob(st, i, p, n);

    if (rc == DB_OK)
        return exec_stmt(s, st, what);
    va_start(ap, fmt);
    rc = s->drv->verr(s, rc, fmt, ap);
    va_end(ap);
    done(st);
    return rc;
}

static int simple(db_store_t *s, int id, const char *what)
{
    db_stmt_t *st;
    int rc = stmt(s, id, &st);

    return rc ? rc : exec_stmt(s, st, what);
}

static int begin(db_store_t *s)
{
    if (s->batch)
        return simple(s, ST_SAVEPOINT, "savepoint");
    return simple(s, ST_BEGIN, "begin transaction");
}

/* Inside a batch: releases the call's savepoint when rc is 0, else rolls
 * the call's changes back; the batch's transaction stays open unless
 * the connection was lost (batch_commit then fails). */
static int end_savepoint(db_store_t *s, int rc)
{
    char keep[512];

    if (s->drv->autocommit(s))
        return rc ? rc : sfl__fail(SFL_EIO, "store: the batch was rolled back");
    if (rc == 0) {
        rc = simple(s, ST_RELEASE, "release savepoint");
        if (rc == 0)
            return 0;
    }
    snprintf(keep, sizeof(keep), "%s", sfl_last_error());
    (void)simple(s, ST_ROLLBACK_TO, "rollback to savepoint");
    (void)simple(s, ST_RELEASE, "release savepoint");
    sfl__fail(rc, "%s", keep);
    return rc;
}

/* Commits when rc is 0, else rolls back; returns the first error. The
 * database may already have rolled back on its own (SQLite: SQLITE_FULL; a
 * lost connection), hence the check. A transaction in which a statement
 * failed is never reported as committed (the driver's txn_failed:
 * PostgreSQL answers its COMMIT with a silent ROLLBACK). */
static int end(db_store_t *s, int rc)
{
    if (s->batch)
        return end_savepoint(s, rc);
    if (rc == 0 && s->drv->txn_failed)
        rc = s->drv->txn_failed(s);
    if (rc == 0) {
        rc = simple(s, ST_COMMIT, "commit transaction");
        if (rc == 0)
            return 0;
    }
    if (!s->drv->autocommit(s)) {
        char keep[512];

        /* ROLLBACK must not overwrite the detail of the real failure. */
        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        (void)simple(s, ST_ROLLBACK, "rollback");
        sfl__fail(rc, "%s", keep);
    }
    return rc;
}

/* The ids as an array parameter's text: "[1,2,3]" with brackets "[]". */
static void ids_text(const char *brackets, const int64_t *v, size_t n, char *buf, size_t cap)
{
    size_t o = 0;

    buf[o++] = brackets[0];
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)v[i]);
    buf[o++] = brackets[1];
    buf[o] = '\0';
}

int coord__db_alloc(size_t size, const db_driver_t *drv, const coord_store_opts_t *opts,
                    db_store_t **out)
{
    db_store_t *s;

    *out = NULL;
    if (sodium_init() < 0)
        return sfl__fail(SFL_EIO, "store: libsodium failed to initialise");
    s = sfl__calloc(1, size);
    if (s == NULL)
        return sfl__fail(SFL_ENOMEM, "store: out of memory");
    s->base.ops = &coord__db_ops;
    s->drv = drv;
    s->keep = opts ? opts->keep_checkpoints : DEFAULT_KEEP;
    *out = s;
    return 0;
}

int coord__db_version_ok(const char *where, int64_t version)
{
    if (version > COORD_STORE_SCHEMA_VERSION)
        return sfl__fail(SFL_EUNSUP,
                         "%s: schema version %lld is newer than this coordinator supports "
                         "(%d); refusing to open it (use a newer sfl-coordinator)",
                         where, (long long)version, COORD_STORE_SCHEMA_VERSION);
    if (version < 0)
        return sfl__fail(SFL_EPARSE, "%s: schema version %lld is invalid", where,
                         (long long)version);
    return 0;
}

int coord__db_begin(db_store_t *s)
{
    return begin(s);
}

int coord__db_end(db_store_t *s, int rc)
{
    return end(s, rc);
}

int coord__db_exec(db_store_t *s, db_stmt_t *st, const char *what)
{
    return exec_stmt(s, st, what);
}

/* begin(), then, once fenced, the fence: the leader row must still carry
 * this store's epoch (a newer master bumped it: SFL_EFENCED, nothing
 * written). */
static int begin_fenced(db_store_t *s)
{
    db_stmt_t *st;
    int rc = begin(s);

    if (rc || s->fence == 0)
        return rc;
    if ((rc = prep(s, ST_FENCE, &st, IDS(s->fence))) == 0)
        rc = exec_stmt(s, st, "fence");
    if (rc == 0 && s->drv->changes(s) != 1)
        rc = sfl__fail(SFL_EFENCED, "store: leader epoch %lld superseded: another round "
                                    "master took over",
                       (long long)s->fence);
    return rc ? end(s, rc) : 0;
}

static int parse_state(const unsigned char *t, const char *const *names, size_t n,
                       const char *what, int *out)
{
    for (size_t i = 0; t && i < n; i++)
        if (strcmp((const char *)t, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    return sfl__fail(SFL_EPARSE, "store: %s has unknown value '%s'", what,
                     t ? (const char *)t : "(null)");
}

/* Copies a TEXT column (NULL reads as "") into dst[0..cap), size-checked. */
static int col_text(db_stmt_t *st, int i, char *dst, size_t cap, const char *what)
{
    int type = db_type(st, i);

    if (type == DB_NULL) {
        dst[0] = '\0';
        return 0;
    }
    if (type != DB_TEXT)
        return sfl__fail(SFL_EPARSE, "store: %s is not text", what);
    const unsigned char *t = db_text(st, i);
    size_t n = (size_t)db_bytes(st, i);
    if (t == NULL)
        return sfl__fail(SFL_ENOMEM, "store: %s: out of memory", what);
    if (n >= cap)
        return sfl__fail(SFL_ELIMIT, "store: %s is %zu bytes, limit %zu", what, n, cap - 1);
    memcpy(dst, t, n);
    dst[n] = '\0';
    return 0;
}

static int col_fixed(db_stmt_t *st, int i, uint8_t *dst, size_t n, const char *what)
{
    if (db_type(st, i) != DB_BLOB)
        return sfl__fail(SFL_EPARSE, "store: %s is not a blob", what);
    const void *p = db_blob(st, i);
    size_t got = (size_t)db_bytes(st, i);
    if (got != n)
        return sfl__fail(SFL_EPARSE, "store: %s is %zu bytes, expected %zu", what, got, n);
    memcpy(dst, p, n);
    return 0;
}

/* Copies a BLOB column into a new buffer after checking its size against
 * max: the length comes from the database, so it is checked before allocating. */
static int col_alloc(db_stmt_t *st, int i, size_t max, uint8_t **out, size_t *len,
                     const char *what)
{
    *out = NULL;
    *len = 0;
    if (db_type(st, i) != DB_BLOB)
        return sfl__fail(SFL_EPARSE, "store: %s is not a blob", what);
    size_t n = (size_t)db_bytes(st, i);
    if (n > max)
        return sfl__fail(SFL_ELIMIT, "store: %s is %zu bytes, limit %zu", what, n, max);
    const void *p = n ? db_blob(st, i) : NULL;
    if (n && p == NULL)
        return sfl__fail(SFL_ENOMEM, "store: %s: out of memory", what);
    uint8_t *buf = sfl__malloc(n);
    if (buf == NULL)
        return sfl__fail(SFL_ENOMEM, "store: %s: out of memory (%zu bytes)", what, n);
    if (n)
        memcpy(buf, p, n);
    *out = buf;
    *len = n;
    return 0;
}

/* Doubles *cap when n reaches it. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = sfl__reallocarray(*arr, ncap, elem);
    if (p == NULL)
        return sfl__fail(SFL_ENOMEM, "store: out of memory listing %zu rows", n + 1);
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Clears each of n elem-sized rows (clear may be NULL), then frees arr. */
static void free_rows(void *arr, size_t n, size_t elem, void (*clear)(void *row))
{
    if (arr == NULL)
        return;
    for (size_t i = 0; clear && i < n; i++)
        clear((unsigned char *)arr + i * elem);
    sfl__free(arr);
}

/* Reads the current row of st into row; max bounds what the row may
 * allocate. */
typedef int (*read_fn)(db_stmt_t *st, size_t max, void *row);

/* Reads every row of st (then reset) into a new array of elem-sized rows,
 * *out and *n set only on success. On failure the rows read so far, the
 * failed one included, are cleared (clear may be NULL) and the array freed. */
static int fetch_all(db_store_t *s, db_stmt_t *st, read_fn rd, size_t max, size_t elem,
                     void (*clear)(void *row), void **out, size_t *n, const char *what)
{
    void *arr = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    while ((rc = step(s, st, "store: %s", what)) == DB_ROW) {
        if ((rc = grow(&arr, &cap, cnt, elem)) != 0)
            break;
        rc = rd(st, max, (unsigned char *)arr + cnt * elem);
        cnt++;
        if (rc)
            break;
    }
    done(st);
    if (rc != DB_DONE) {
        free_rows(arr, cnt, elem, clear);
        return rc;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

static int check_text(const char *t, size_t max, int required, const char *what)
{
    if (t == NULL) {
        if (required)
            return sfl__fail(SFL_EINVAL, "store: %s is missing", what);
        return 0;
    }
    size_t n = strnlen(t, max + 1);
    if (required && n == 0)
        return sfl__fail(SFL_EINVAL, "store: %s is empty", what);
    if (n > max)
        return sfl__fail(SFL_ELIMIT, "store: %s is longer than %zu bytes", what, max);
    return 0;
}

static int lg_recover(coord_store_t *base_, const char *reason, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (n)
        *n = 0;
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = check_text(reason, COORD_REASON_MAX, 0, "reason")) != 0)
        return rc;
    /* One statement, so atomic without an explicit transaction, unless
     * fenced (the fence and the update commit together). */
    if (s->fence && (rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_ROUND_RECOVER, &st, IDS(now_ms()))) == 0) {
        bind_text(st, 2, reason);
        rc = exec_stmt(s, st, "mark live rounds failed");
        if (rc == 0 && n)
            *n = (size_t)s->drv->changes(s);
    }
    if (s->fence) {
        rc = end(s, rc);
        if (rc && n)
            *n = 0;
    }
    return rc;
}

/* ---- agents ---------------------------------------------------------- */

static int read_agent(db_stmt_t *st, size_t max, void *row)
{
    coord_agent_row_t *a = row;
    int rc;

    (void)max;
    memset(a, 0, sizeof(*a));
    a->id = db_i64(st, 0);
    if ((rc = col_text(st, 1, a->name, sizeof(a->name), "agents.name")) != 0 ||
        (rc = col_fixed(st, 2, a->cert_fingerprint, sizeof(a->cert_fingerprint),
                        "agents.cert_fingerprint")) != 0 ||
        (rc = col_fixed(st, 3, a->identity_pk, sizeof(a->identity_pk), "agents.identity_pk")) !=
            0 ||
        (rc = col_text(st, 4, a->capabilities, sizeof(a->capabilities),
                       "agents.capabilities")) != 0 ||
        (rc = col_text(st, 7, a->labels, sizeof(a->labels), "agents.labels")) != 0)
        return rc;
    a->samples = db_i64(st, 5);
    a->dimension = db_i64(st, 6);
    a->joined_ms = db_i64(st, 8);
    a->last_seen_ms = db_i64(st, 9);
    return 0;
}

static void bind_agent(db_stmt_t *st, const coord_agent_row_t *a, int64_t now)
{
    bind_text(st, 1, a->name);
    bind_blob(st, 2, a->cert_fingerprint, sizeof(a->cert_fingerprint));
    bind_blob(st, 3, a->identity_pk, sizeof(a->identity_pk));
    bind_text(st, 4, a->capabilities);
    db_bind_i64(st, 5, a->samples);
    db_bind_i64(st, 6, a->dimension);
    bind_text(st, 7, a->labels);
    db_bind_i64(st, 8, now);
}

static int agent_upsert_once(coord_store_t *base_, const coord_agent_row_t *a, int64_t *id)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int64_t aid = 0;
    int rc;

    if (s == NULL || a == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(a->name, COORD_AGENT_NAME_MAX, 1, "agent name")) != 0 ||
        (rc = check_text(a->capabilities, COORD_AGENT_TEXT_MAX, 0, "agent capabilities")) != 0 ||
        (rc = check_text(a->labels, COORD_AGENT_TEXT_MAX, 0, "agent labels")) != 0)
        return rc;
    if (a->samples < 0 || a->dimension < 0)
        return sfl__fail(SFL_EINVAL, "store: agent '%s': negative samples or dimension",
                         a->name);
    if ((rc = begin(s)) != 0)
        return rc;
    int64_t now = now_ms();

    if ((rc = stmt(s, ST_AGENT_BY_NAME, &st)) != 0)
        goto out;
    bind_text(st, 1, a->name);
    rc = step(s, st, "store: look up agent '%s'", a->name);
    if (rc == DB_ROW) {
        uint8_t pk[COORD_KEY_BYTES];

        uint8_t fpr[COORD_FPR_BYTES];

        aid = db_i64(st, 0);
        if ((rc = col_fixed(st, 1, pk, sizeof(pk), "agents.identity_pk")) != 0 ||
            (rc = col_fixed(st, 2, fpr, sizeof(fpr), "agents.cert_fingerprint")) != 0)
            goto out;
        /* The name is bound to the certificate it first joined with, until
         * the operator revokes that one. */
        if (memcmp(fpr, a->cert_fingerprint, sizeof(fpr)) != 0 && !db_int(st, 3)) {
            rc = sfl__fail(-EACCES,
                           "store: agent '%s' (id %lld) is bound to another certificate",
                           a->name, (long long)aid);
            goto out;
        }
        if (memcmp(pk, a->identity_pk, sizeof(pk)) != 0) {
            rc = sfl__fail(-EEXIST,
                           "store: agent '%s' (id %lld) is registered with a different "
                           "identity key",
                           a->name, (long long)aid);
            goto out;
        }
        done(st);
        if ((rc = stmt(s, ST_AGENT_UPDATE, &st)) != 0)
            goto out;
        bind_agent(st, a, now);
        rc = exec_stmt(s, st, "update agent");
        st = NULL;
        goto out;
    }
    if (rc != DB_DONE)
        goto out;
    done(st);
    if ((rc = stmt(s, ST_AGENT_BY_KEY, &st)) != 0)
        goto out;
    bind_blob(st, 1, a->identity_pk, sizeof(a->identity_pk));
    rc = step(s, st, "store: look up identity key");
    if (rc == DB_ROW) {
        rc = sfl__fail(-EEXIST,
                       "store: agent '%s': identity key already registered to agent '%.64s'",
                       a->name, (const char *)db_text(st, 0));
        goto out;
    }
    if (rc != DB_DONE)
        goto out;
    done(st);
    if ((rc = stmt(s, ST_AGENT_INSERT, &st)) != 0)
        goto out;
    bind_agent(st, a, now);
    rc = exec_stmt(s, st, "insert agent");
    st = NULL;
    if (rc == 0)
        aid = s->drv->last_id(s);
out:
    done(st);
    rc = end(s, rc);
    if (rc == 0 && id)
        *id = aid;
    return rc;
}

/* Where writers may race (the driver's unique_violation; PostgreSQL, READ
 * COMMITTED: each statement sees what committed before it), another
 * process (a front-end) may insert the same new agent between this call's
 * look-ups and its insert: the unique key refuses the second insert, or
 * the key look-up finds the row the name look-up missed (-EEXIST). The
 * upsert then runs once more, now finding the row by name; a real conflict
 * gives the same answer again. */
static int lg_agent_upsert(coord_store_t *base_, const coord_agent_row_t *a, int64_t *id)
{
    db_store_t *s = (db_store_t *)base_;
    int rc;

    if (s == NULL || s->drv->unique_violation == NULL)
        return agent_upsert_once(base_, a, id);
    s->drv->clear_error(s);
    rc = agent_upsert_once(base_, a, id);
    if (rc == -EEXIST || (rc == SFL_EINVAL && s->drv->unique_violation(s))) {
        s->drv->clear_error(s);
        rc = agent_upsert_once(base_, a, id);
    }
    return rc;
}

static int lg_cert_revoke(coord_store_t *base_, const uint8_t fpr[COORD_FPR_BYTES],
                            const char *name, int64_t now_ms)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || fpr == NULL || name == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = begin(s)) != 0)
        return rc;
    if ((rc = stmt(s, ST_REVOKE, &st)) == 0) {
        bind_blob(st, 1, fpr, COORD_FPR_BYTES);
        bind_text(st, 2, name);
        db_bind_i64(st, 3, now_ms);
        rc = exec_stmt(s, st, "revoke a certificate");
        st = NULL;
    }
    done(st);
    return end(s, rc);
}

static int read_fpr(db_stmt_t *st, size_t max, void *row)
{
    (void)max;
    return col_fixed(st, 0, row, COORD_FPR_BYTES, "revoked_certs.fingerprint");
}

static int lg_revoked_list(coord_store_t *base_, uint8_t (**out)[COORD_FPR_BYTES],
                             size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_REVOKED_LIST, &st, 0, NULL)) != 0 ||
        (rc = fetch_all(s, st, read_fpr, 0, COORD_FPR_BYTES, NULL, &arr, n,
                        "list revoked certificates")) != 0)
        return rc;
    *out = arr;
    return 0;
}

static int lg_quarantine_add(coord_store_t *base_, int64_t job, int64_t agent, const char *reason,
                               int64_t now_ms)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || reason == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(reason, COORD_REASON_MAX, 1, "quarantine reason")) != 0)
        return rc;
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_QUAR_ADD, &st, IDS(job, agent))) == 0) {
        bind_text(st, 3, reason);
        db_bind_i64(st, 4, now_ms);
        rc = exec_stmt(s, st, "quarantine an agent");
        st = NULL;
    }
    done(st);
    return end(s, rc);
}

static int lg_quarantine_release(coord_store_t *base_, int64_t job, int64_t agent)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_QUAR_DEL, &st, IDS(job, agent))) == 0) {
        rc = exec_stmt(s, st, "release a quarantined agent");
        st = NULL;
        if (rc == 0 && s->drv->changes(s) == 0)
            rc = sfl__fail(SFL_ENOTFOUND, "store: agent %lld is not quarantined in job %lld",
                           (long long)agent, (long long)job);
    }
    done(st);
    return end(s, rc);
}

static int read_quar(db_stmt_t *st, size_t max, void *row)
{
    coord_quar_row_t *q = row;

    (void)max;
    q->job = db_i64(st, 0);
    q->agent = db_i64(st, 1);
    q->at_ms = db_i64(st, 2);
    return col_text(st, 3, q->reason, sizeof(q->reason), "quarantine.reason");
}

static int lg_quarantine_list(coord_store_t *base_, coord_quar_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_QUAR_LIST, &st, 0, NULL)) != 0 ||
        (rc = fetch_all(s, st, read_quar, 0, sizeof(coord_quar_row_t), NULL, &arr, n,
                        "list quarantined agents")) != 0)
        return rc;
    *out = arr;
    return 0;
}

/* Runs an UPDATE by id; SFL_ENOTFOUND when no row had that id. */
static int update_by_id(db_store_t *s, db_stmt_t *st, const char *what, int64_t id)
{
    int rc = exec_stmt(s, st, what);

    if (rc == 0 && s->drv->changes(s) == 0)
        rc = sfl__fail(SFL_ENOTFOUND, "store: %s: no agent %lld", what, (long long)id);
    return rc;
}

static int lg_agent_rekey(coord_store_t *base_, int64_t id,
                            const uint8_t identity_pk[COORD_KEY_BYTES])
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || identity_pk == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, ST_AGENT_REKEY, &st, IDS(id))) != 0)
        return rc;
    bind_blob(st, 2, identity_pk, COORD_KEY_BYTES);
    rc = db_step(st);
    if ((rc & 0xff) == DB_CONSTRAINT) {
        rc = sfl__fail(-EEXIST, "store: rekey agent %lld: key already registered to another agent",
                       (long long)id);
        done(st);
        return rc;
    }
    if (rc != DB_DONE) {
        rc = coord__db_err(s, rc, "store: rekey agent %lld", (long long)id);
        done(st);
        return rc;
    }
    done(st);
    if (s->drv->changes(s) == 0)
        return sfl__fail(SFL_ENOTFOUND, "store: rekey: no agent %lld", (long long)id);
    return 0;
}

static int lg_agent_touch(coord_store_t *base_, int64_t id)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = prep(s, ST_AGENT_TOUCH, &st, IDS(id, now_ms()))) != 0)
        return rc;
    return update_by_id(s, st, "touch agent", id);
}

static int agent_get(db_store_t *s, int id_stmt, int64_t id, const char *name,
                     coord_agent_row_t *out)
{
    db_stmt_t *st;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, id_stmt, &st, IDS(id))) != 0)
        return rc;
    if (name)
        bind_text(st, 1, name);
    rc = step(s, st, "store: read agent");
    if (rc == DB_ROW)
        rc = read_agent(st, 0, out);
    else if (rc == DB_DONE)
        rc = name ? sfl__fail(SFL_ENOTFOUND, "store: no agent named '%.64s'", name)
                  : sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)id);
    done(st);
    return rc;
}

static int lg_agent_get(coord_store_t *base_, int64_t id, coord_agent_row_t *out)
{
    db_store_t *s = (db_store_t *)base_;
    return agent_get(s, ST_AGENT_GET, id, NULL, out);
}

static int lg_agent_get_by_name(coord_store_t *base_, const char *name, coord_agent_row_t *out)
{
    db_store_t *s = (db_store_t *)base_;
    if (name == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL name");
    return agent_get(s, ST_AGENT_GET_NAME, 0, name, out);
}

static int lg_agent_list(coord_store_t *base_, coord_agent_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_AGENT_LIST, &st, 0, NULL)) != 0 ||
        (rc = fetch_all(s, st, read_agent, 0, sizeof(**out), NULL, &arr, n, "list agents")) != 0)
        return rc;
    *out = arr;
    return 0;
}

/* ---- jobs ------------------------------------------------------------ */

void coord_job_row_clear(coord_job_row_t *j)
{
    if (j == NULL)
        return;
    sfl__free(j->spec);
    memset(j, 0, sizeof(*j));
}

static void clear_job(void *row)
{
    coord_job_row_clear(row);
}

void coord_job_rows_free(coord_job_row_t *jobs, size_t n)
{
    free_rows(jobs, n, sizeof(*jobs), clear_job);
}

static int read_job(db_stmt_t *st, size_t max_spec, void *row)
{
    coord_job_row_t *j = row;
    int rc, state = 0;

    memset(j, 0, sizeof(*j));
    j->id = db_i64(st, 0);
    if ((rc = col_text(st, 1, j->name, sizeof(j->name), "jobs.name")) != 0 ||
        (rc = parse_state(db_text(st, 2), job_states, NSTATES(job_states),
                          "jobs.state", &state)) != 0)
        return rc;
    j->state = (coord_job_state_t)state;
    j->seed = db_i64_to_u64(db_i64(st, 3));
    j->created_ms = db_i64(st, 4);
    j->last_committed_round = db_i64(st, 5);
    if (db_type(st, 7) != DB_NULL) {
        j->state = COORD_JOB_FAILED;
        if ((rc = col_text(st, 7, j->error, sizeof(j->error), "job_failures.error")) != 0)
            return rc;
    }
    return col_alloc(st, 6, max_spec, &j->spec, &j->spec_len, "jobs.spec");
}

static int lg_job_create(coord_store_t *base_, const char *name, const uint8_t *spec,
                           size_t spec_len, uint64_t seed, int64_t *id)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || (spec == NULL && spec_len > 0))
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(name, COORD_JOB_NAME_MAX, 1, "job name")) != 0)
        return rc;
    if (s->fence && (rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = stmt(s, ST_JOB_INSERT, &st)) == 0) {
        bind_text(st, 1, name);
        db_bind_i64(st, 2, db_u64_to_i64(seed));
        db_bind_i64(st, 3, now_ms());
        rc = exec_blob(s, st, 4, spec, spec_len, "insert job", "store: job spec of %zu bytes",
                       spec_len);
    }
    if (rc == 0 && id)
        *id = s->drv->last_id(s);
    if (s->fence)
        rc = end(s, rc);
    return rc;
}

static int lg_job_get(coord_store_t *base_, int64_t id, size_t max_spec, coord_job_row_t *out)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_JOB_GET, &st, IDS(id))) != 0)
        return rc;
    rc = step(s, st, "store: read job %lld", (long long)id);
    if (rc == DB_ROW)
        rc = read_job(st, max_spec, out);
    else if (rc == DB_DONE)
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld", (long long)id);
    done(st);
    if (rc)
        coord_job_row_clear(out);
    return rc;
}

static int lg_job_list(coord_store_t *base_, size_t max_spec, coord_job_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_JOB_LIST, &st, 0, NULL)) != 0 ||
        (rc = fetch_all(s, st, read_job, max_spec, sizeof(**out), clear_job, &arr, n,
                        "list jobs")) != 0)
        return rc;
    *out = arr;
    return 0;
}

/* Reads (state, last_committed_round) of a job inside the caller's
 * transaction; SFL_ENOTFOUND when there is no such job. */
static int job_state(db_store_t *s, int64_t job, coord_job_state_t *state, int64_t *last)
{
    db_stmt_t *st;
    int rc, v = 0;

    if ((rc = prep(s, ST_JOB_STATE, &st, IDS(job))) != 0)
        return rc;
    rc = step(s, st, "store: read job %lld", (long long)job);
    if (rc == DB_ROW) {
        rc = parse_state(db_text(st, 0), job_states, NSTATES(job_states),
                         "jobs.state", &v);
        *state = db_int(st, 2) ? COORD_JOB_FAILED : (coord_job_state_t)v;
        *last = db_i64(st, 1);
    } else if (rc == DB_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld", (long long)job);
    }
    done(st);
    return rc;
}

/* A new round attempt or a commit needs a job that is not finished... */
static int job_writable(int64_t job, coord_job_state_t jstate)
{
    if (jstate == COORD_JOB_CANCELLED || jstate == COORD_JOB_DONE || jstate == COORD_JOB_FAILED)
        return sfl__fail(SFL_EINVAL, "store: job %lld is %s", (long long)job, job_states[jstate]);
    return 0;
}

/* ...and is for the round after the last committed one. */
static int next_round(int64_t job, int64_t round, int64_t last)
{
    if (round != last + 1)
        return sfl__fail(SFL_EINVAL, "store: job %lld: round %lld is not the next round "
                                     "(last committed %lld)",
                         (long long)job, (long long)round, (long long)last);
    return 0;
}

static int lg_job_set_state(coord_store_t *base_, int64_t id, coord_job_state_t state)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    coord_job_state_t cur = COORD_JOB_ACTIVE;
    int64_t last;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((unsigned)state >= NSTATES(job_states) || state == COORD_JOB_FAILED)
        return sfl__fail(SFL_EINVAL, "store: job state %d is unknown (failed: "
                                     "coord_store_job_fail)", (int)state);
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = job_state(s, id, &cur, &last)) != 0)
        goto out;
    if (cur == state)
        goto out;
    if (cur == COORD_JOB_CANCELLED || cur == COORD_JOB_DONE || cur == COORD_JOB_FAILED) {
        rc = sfl__fail(SFL_EINVAL, "store: job %lld is %s and cannot become %s", (long long)id,
                       job_states[cur], job_states[state]);
        goto out;
    }
    if ((rc = prep(s, ST_JOB_SET_STATE, &st, IDS(id))) != 0)
        goto out;
    bind_text(st, 2, job_states[state]);
    rc = exec_stmt(s, st, "set job state");
    st = NULL;
out:
    done(st);
    return end(s, rc);
}

static int lg_job_fail(coord_store_t *base_, int64_t id, const char *error, int64_t now_ms)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    coord_job_state_t cur = COORD_JOB_ACTIVE;
    int64_t last;
    int rc;

    if (s == NULL || error == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = job_state(s, id, &cur, &last)) != 0 || (rc = job_writable(id, cur)) != 0)
        goto out;
    if ((rc = prep(s, ST_JOB_FAIL, &st, IDS(id))) != 0)
        goto out;
    bind_text(st, 2, error);
    db_bind_i64(st, 3, now_ms);
    rc = exec_stmt(s, st, "record a job failure");
    st = NULL;
out:
    done(st);
    return end(s, rc);
}

/* ---- rounds ---------------------------------------------------------- */

void coord_round_clear(coord_round_row_t *r)
{
    if (r == NULL)
        return;
    sfl__free(r->cohort);
    memset(r, 0, sizeof(*r));
}

static void clear_round(void *row)
{
    coord_round_clear(row);
}

void coord_round_list_free(coord_round_row_t *rounds, size_t n)
{
    free_rows(rounds, n, sizeof(*rounds), clear_round);
}

/* Manifest: agent ids as little-endian uint64, strictly ascending, so the
 * same cohort always has the same bytes whatever the host. */
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int read_round(db_stmt_t *st, size_t max_cohort, void *row)
{
    coord_round_row_t *r = row;
    int rc, state = 0;

    memset(r, 0, sizeof(*r));
    r->job_id = db_i64(st, 0);
    r->round = db_i64(st, 1);
    r->attempt = db_i64(st, 2);
    if ((rc = parse_state(db_text(st, 3), round_states, NSTATES(round_states),
                          "rounds.state", &state)) != 0 ||
        (rc = col_fixed(st, 4, r->nonce, sizeof(r->nonce), "rounds.nonce")) != 0 ||
        (rc = col_text(st, 7, r->reason, sizeof(r->reason), "rounds.reason")) != 0)
        return rc;
    r->state = (coord_srow_state_t)state;
    r->opened_ms = db_i64(st, 5);
    r->closed_ms = db_i64(st, 6);

    if (db_type(st, 8) != DB_BLOB)
        return sfl__fail(SFL_EPARSE, "store: rounds.cohort is not a blob");
    size_t bytes = (size_t)db_bytes(st, 8);
    if (bytes % 8 != 0)
        return sfl__fail(SFL_EPARSE, "store: cohort of job %lld round %lld is %zu bytes, "
                                     "not a multiple of 8",
                         (long long)r->job_id, (long long)r->round, bytes);
    size_t n = bytes / 8;
    if (n > max_cohort)
        return sfl__fail(SFL_ELIMIT, "store: cohort of job %lld round %lld has %zu agents, "
                                     "limit %zu",
                         (long long)r->job_id, (long long)r->round, n, max_cohort);
    const uint8_t *p = n ? db_blob(st, 8) : NULL;
    if (n && p == NULL)
        return sfl__fail(SFL_ENOMEM, "store: read cohort: out of memory");
    r->cohort = sfl__mallocarray(n, sizeof(*r->cohort));
    if (r->cohort == NULL)
        return sfl__fail(SFL_ENOMEM, "store: out of memory for a cohort of %zu", n);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = get_u64(p + 8 * i);
        if (v == 0 || v > INT64_MAX || (i > 0 && (int64_t)v <= r->cohort[i - 1]))
            return sfl__fail(SFL_EPARSE, "store: cohort of job %lld round %lld: entry %zu "
                                         "is not an ascending agent id",
                             (long long)r->job_id, (long long)r->round, i);
        r->cohort[i] = (int64_t)v;
    }
    r->cohort_len = n;
    return 0;
}

static int lg_round_next_attempt(coord_store_t *base_, int64_t job, int64_t round,
                                   int64_t *attempt)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || attempt == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, ST_ROUND_MAX_ATTEMPT, &st, IDS(job, round))) != 0)
        return rc;
    rc = db_step(st);
    if (rc == DB_ROW) {
        *attempt = db_i64(st, 0) + 1;
        rc = 0;
    } else {
        rc = coord__db_err(s, rc, "store: read attempts of job %lld round %lld",
                                (long long)job, (long long)round);
    }
    done(st);
    return rc;
}

static int lg_round_open(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                           const uint8_t nonce[COORD_NONCE_BYTES], const int64_t *cohort,
                           size_t n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    uint8_t *manifest = NULL;
    char *ids = NULL;
    coord_job_state_t jstate;
    int64_t last, next, now = now_ms();
    int rc, txn = 0;

    if (s == NULL || nonce == NULL || (cohort == NULL && n > 0))
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if (round < 1 || attempt < 1)
        return sfl__fail(SFL_EINVAL, "store: round %lld attempt %lld: both count from 1",
                         (long long)round, (long long)attempt);
    if (n > (size_t)INT32_MAX / 8)
        return sfl__fail(SFL_ELIMIT, "store: cohort of %zu agents is too large", n);
    for (size_t i = 0; i < n; i++)
        if (cohort[i] <= 0 || (i > 0 && cohort[i] <= cohort[i - 1]))
            return sfl__fail(SFL_EINVAL, "store: cohort entry %zu (%lld) is not a strictly "
                                         "ascending agent id",
                             i, (long long)cohort[i]);
    manifest = sfl__mallocarray(n, 8);
    if (manifest == NULL)
        return sfl__fail(SFL_ENOMEM, "store: out of memory for a cohort of %zu", n);
    for (size_t i = 0; i < n; i++)
        put_u64(manifest + 8 * i, (uint64_t)cohort[i]);

    if ((rc = begin_fenced(s)) != 0)
        goto out;
    txn = 1;
    if ((rc = job_state(s, job, &jstate, &last)) != 0 || (rc = job_writable(job, jstate)) != 0 ||
        (rc = next_round(job, round, last)) != 0)
        goto out;
    if ((rc = prep(s, ST_ROUND_LIVE, &st, IDS(job, round))) != 0)
        goto out;
    rc = step(s, st, "store: find live attempts");
    if (rc == DB_ROW) {
        rc = sfl__fail(SFL_EINVAL, "store: job %lld round %lld attempt %lld is still %s",
                       (long long)job, (long long)round, (long long)db_i64(st, 0),
                       db_text(st, 1) ? (const char *)db_text(st, 1) : "?");
        goto out;
    }
    if (rc != DB_DONE)
        goto out;
    done(st);
    st = NULL;
    if ((rc = lg_round_next_attempt(&s->base, job, round, &next)) != 0)
        goto out;
    if (attempt != next) {
        rc = sfl__fail(attempt < next ? -EEXIST : SFL_EINVAL,
                       "store: job %lld round %lld: attempt %lld, expected %lld", (long long)job,
                       (long long)round, (long long)attempt, (long long)next);
        goto out;
    }
    if ((rc = prep(s, ST_ROUND_INSERT, &st, IDS(job, round, attempt))) != 0)
        goto out;
    bind_blob(st, 4, nonce, COORD_NONCE_BYTES);
    db_bind_i64(st, 5, now);
    rc = exec_blob(s, st, 6, manifest, n * 8, "insert round",
                   "store: cohort manifest of %zu agents", n);
    st = NULL;
    if (rc)
        goto out;
    if (n > 0) {
        /* the cohort in two statements, not one per member: its first id
         * that is no agent (agents are never deleted, so the check holds
         * until the insert), then every member's SELECTED row; the ids as
         * the driver's array literal */
        size_t cap = n * 21 + 3;

        ids = sfl__malloc(cap);
        if (ids == NULL) {
            rc = sfl__fail(SFL_ENOMEM, "store: out of memory for a cohort of %zu", n);
            goto out;
        }
        ids_text(s->drv->array, cohort, n, ids, cap);
        if ((rc = stmt(s, ST_COHORT_MISSING, &st)) != 0)
            goto out;
        bind_text(st, 1, ids);
        rc = step(s, st, "store: check the cohort's agents");
        if (rc == DB_ROW) {
            rc = sfl__fail(SFL_ENOTFOUND, "store: cohort agent %lld is not a registered agent",
                           (long long)db_i64(st, 0));
            goto out;
        }
        if (rc != DB_DONE)
            goto out;
        done(st);
        if ((rc = prep(s, ST_PART_SELECTED_ALL, &st, IDS(job, round, attempt))) != 0)
            goto out;
        bind_text(st, 4, ids);
        db_bind_i64(st, 5, now);
        rc = exec_stmt(s, st, "record the cohort's selection");
        st = NULL;
        if (rc)
            goto out;
    }
    rc = 0;
out:
    done(st);
    if (txn)
        rc = end(s, rc);
    sfl__free(ids);
    sfl__free(manifest);
    return rc;
}

/* Reads the state of one round attempt inside the caller's transaction. */
static int round_state(db_store_t *s, int64_t job, int64_t round, int64_t attempt,
                       coord_srow_state_t *state)
{
    db_stmt_t *st;
    int rc, v = 0;

    if ((rc = prep(s, ST_ROUND_STATE, &st, IDS(job, round, attempt))) != 0)
        return rc;
    rc = step(s, st, "store: read round state");
    if (rc == DB_ROW) {
        rc = parse_state(db_text(st, 0), round_states, NSTATES(round_states),
                         "rounds.state", &v);
        *state = (coord_srow_state_t)v;
    } else if (rc == DB_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld round %lld attempt %lld",
                       (long long)job, (long long)round, (long long)attempt);
    }
    done(st);
    return rc;
}

/* The round diagram: forward one step, or from any live state to failed. */
static int round_step_ok(coord_srow_state_t from, coord_srow_state_t to)
{
    switch (from) {
    case COORD_SROW_SELECTING:
        return to == COORD_SROW_TRAINING || to == COORD_SROW_FAILED;
    case COORD_SROW_TRAINING:
        return to == COORD_SROW_AGGREGATING || to == COORD_SROW_FAILED;
    case COORD_SROW_AGGREGATING:
        return to == COORD_SROW_COMMITTED || to == COORD_SROW_FAILED;
    case COORD_SROW_COMMITTED:
    case COORD_SROW_FAILED:
        return 0;
    }
    return 0;
}

static int set_round_state(db_store_t *s, int64_t job, int64_t round, int64_t attempt,
                           coord_srow_state_t state, const char *reason, int64_t now)
{
    db_stmt_t *st;
    int rc;

    if ((rc = prep(s, ST_ROUND_SET_STATE, &st, IDS(job, round, attempt))) != 0)
        return rc;
    bind_text(st, 4, round_states[state]);
    if (state == COORD_SROW_COMMITTED || state == COORD_SROW_FAILED)
        db_bind_i64(st, 5, now);
    else
        db_bind_null(st, 5);
    bind_text(st, 6, reason);
    return exec_stmt(s, st, "set round state");
}

static int lg_round_set_state(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                                coord_srow_state_t state, const char *reason)
{
    db_store_t *s = (db_store_t *)base_;
    coord_srow_state_t cur = COORD_SROW_SELECTING;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((unsigned)state >= NSTATES(round_states))
        return sfl__fail(SFL_EINVAL, "store: round state %d is unknown", (int)state);
    if (state == COORD_SROW_COMMITTED)
        return sfl__fail(SFL_EINVAL, "store: a round is committed only with its checkpoint "
                                     "(coord_store_round_commit)");
    if ((rc = check_text(reason, COORD_REASON_MAX, 0, "reason")) != 0)
        return rc;
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = round_state(s, job, round, attempt, &cur)) != 0)
        goto out;
    if (!round_step_ok(cur, state)) {
        rc = sfl__fail(SFL_EINVAL, "store: job %lld round %lld attempt %lld is %s and cannot "
                                   "become %s",
                       (long long)job, (long long)round, (long long)attempt, round_states[cur],
                       round_states[state]);
        goto out;
    }
    rc = set_round_state(s, job, round, attempt, state, reason, now_ms());
out:
    return end(s, rc);
}

/* A finite double, or NULL (SQLite would store NaN as NULL anyway). */
static void bind_real(db_stmt_t *st, int i, double v)
{
    if (isfinite(v))
        db_bind_double(st, i, v);
    else
        db_bind_null(st, i);
}

static int insert_metrics(db_store_t *s, int64_t job, int64_t round, int64_t attempt,
                          const sfl_round_metrics_t *m)
{
    db_stmt_t *st;
    int rc = prep(s, ST_METRICS_INSERT, &st, IDS(job, round, attempt));

    if (rc)
        return rc;
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].type == SFL_METRIC_F64)
            bind_real(st, 4 + id, sfl_metric_get(id, m));
        else
            db_bind_i64(st, 4 + id, db_u64_to_i64(sfl_metric_get_u64(id, m)));
    }
    return exec_stmt(s, st, "insert round metrics");
}

static int lg_round_commit(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                             const uint8_t *model, size_t len,
                             const sfl_round_metrics_t *metrics,
                             uint8_t hash[COORD_HASH_BYTES])
{
    db_store_t *s = (db_store_t *)base_;
    static const uint8_t empty[1];
    uint8_t h[COORD_HASH_BYTES];
    db_stmt_t *st = NULL;
    coord_srow_state_t cur = COORD_SROW_SELECTING;
    coord_job_state_t jstate;
    int64_t last, now = now_ms();
    int rc;

    if (s == NULL || (model == NULL && len > 0))
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    /* Hash outside the transaction: the write lock is held only for I/O. */
    crypto_generichash(h, sizeof(h), len ? model : empty, len, NULL, 0);

    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = job_state(s, job, &jstate, &last)) != 0 ||
        (rc = round_state(s, job, round, attempt, &cur)) != 0 ||
        (rc = job_writable(job, jstate)) != 0)
        goto out;
    if (cur != COORD_SROW_AGGREGATING) {
        rc = sfl__fail(SFL_EINVAL, "store: job %lld round %lld attempt %lld is %s, not "
                                   "aggregating; cannot commit",
                       (long long)job, (long long)round, (long long)attempt, round_states[cur]);
        goto out;
    }
    if ((rc = next_round(job, round, last)) != 0 ||
        (rc = set_round_state(s, job, round, attempt, COORD_SROW_COMMITTED, NULL, now)) != 0)
        goto out;
    if ((rc = prep(s, ST_CKPT_INSERT, &st, IDS(job, round))) != 0)
        goto out;
    bind_blob(st, 3, h, sizeof(h));
    db_bind_i64(st, 4, now);
    rc = exec_blob(s, st, 5, model, len, "insert checkpoint", "store: checkpoint of %zu bytes",
                   len);
    st = NULL;
    if (rc)
        goto out;
    if ((rc = prep(s, ST_JOB_SET_COMMITTED, &st, IDS(job, round))) != 0)
        goto out;
    rc = exec_stmt(s, st, "advance last committed round");
    st = NULL;
    if (rc)
        goto out;
    if (s->keep > 0) {
        if ((rc = prep(s, ST_CKPT_PRUNE, &st, IDS(job, round - (int64_t)s->keep))) != 0)
            goto out;
        rc = exec_stmt(s, st, "prune checkpoints");
        st = NULL;
    }
    if (rc == 0 && metrics != NULL)
        rc = insert_metrics(s, job, round, attempt, metrics);
out:
    done(st);
    rc = end(s, rc);
    if (rc == 0 && hash)
        memcpy(hash, h, sizeof(h));
    return rc;
}

static int lg_round_get(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                          size_t max_cohort, coord_round_row_t *out)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_ROUND_GET, &st, IDS(job, round, attempt))) != 0)
        return rc;
    rc = step(s, st, "store: read round");
    if (rc == DB_ROW)
        rc = read_round(st, max_cohort, out);
    else if (rc == DB_DONE)
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld round %lld attempt %lld",
                       (long long)job, (long long)round, (long long)attempt);
    done(st);
    if (rc)
        coord_round_clear(out);
    return rc;
}

static int lg_round_list(coord_store_t *base_, int64_t job, size_t max_cohort,
                           coord_round_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_ROUND_LIST, &st, IDS(job))) != 0 ||
        (rc = fetch_all(s, st, read_round, max_cohort, sizeof(**out), clear_round, &arr, n,
                        "list rounds")) != 0)
        return rc;
    *out = arr;
    return 0;
}

static int read_history(db_stmt_t *st, size_t max, void *row)
{
    coord_history_row_t *h = row;

    (void)max;
    memset(h, 0, sizeof(*h));
    h->round = db_i64(st, 0);
    h->attempt = db_i64(st, 1);
    h->opened_ms = db_i64(st, 2);
    h->committed_ms = db_i64(st, 3);
    h->selected = (uint32_t)db_i64(st, 4);
    h->accepted = (uint32_t)db_i64(st, 5);
    h->bytes_up = (uint64_t)db_i64(st, 6);
    /* NULL (no metrics row, a non-finite value, a column added after the
     * round) reads as 0. */
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].type == SFL_METRIC_F64)
            sfl_metric_set(id, &h->m, db_double(st, 7 + id));
        else
            sfl_metric_set_u64(id, &h->m, (uint64_t)db_i64(st, 7 + id));
    }
    return 0;
}

static int lg_history(coord_store_t *base_, int64_t job, int64_t after_round, size_t limit,
                        coord_history_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    uint64_t lim = limit; /* size_t is 32-bit on armhf: clamp in 64 bits */
    int rc;

    if (s == NULL || out == NULL || n == NULL || limit == 0)
        return sfl__fail(SFL_EINVAL, "store: NULL argument or zero limit");
    *out = NULL;
    *n = 0;
    if (lim > INT64_MAX)
        lim = INT64_MAX;
    if ((rc = prep(s, ST_HISTORY, &st, IDS(job, after_round, (int64_t)lim))) != 0 ||
        (rc = fetch_all(s, st, read_history, 0, sizeof(**out), NULL, &arr, n,
                        "read job history")) != 0)
        return rc;
    *out = arr;
    return 0;
}

/* ---- participation --------------------------------------------------- */

/* One outcome, inside the caller's transaction. */
static int record_part(db_store_t *s, const coord_part_row_t *p)
{
    db_stmt_t *st = NULL;
    coord_srow_state_t cur;
    int rc, prev = 0;

    if ((unsigned)p->status >= NSTATES(part_states) || p->status == COORD_PART_SELECTED)
        return sfl__fail(SFL_EINVAL, "store: participation status %d is not an outcome",
                         (int)p->status);
    if (p->bytes < 0)
        return sfl__fail(SFL_EINVAL, "store: negative byte count");
    if ((rc = check_text(p->reason, COORD_REASON_MAX, 0, "reason")) != 0)
        return rc;
    if ((rc = round_state(s, p->job, p->round, p->attempt, &cur)) != 0)
        return rc;
    if ((rc = prep(s, ST_PART_RECORD, &st, IDS(p->job, p->round, p->attempt, p->agent))) != 0)
        return rc;
    bind_text(st, 5, part_states[p->status]);
    bind_text(st, 6, p->reason);
    db_bind_i64(st, 7, p->bytes);
    db_bind_i64(st, 8, p->at_ms ? p->at_ms : now_ms());
    rc = db_step(st);
    if (rc == DB_FK) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)p->agent);
        goto out;
    }
    if (rc != DB_DONE) {
        rc = coord__db_err(s, rc, "store: record participation of agent %lld",
                                (long long)p->agent);
        goto out;
    }
    done(st);
    st = NULL;
    rc = 0;
    if (s->drv->changes(s) > 0)
        goto out;
    /* The upsert's WHERE kept an earlier outcome: say which. */
    if ((rc = prep(s, ST_PART_STATUS, &st, IDS(p->job, p->round, p->attempt, p->agent))) != 0)
        goto out;
    rc = db_step(st);
    if (rc == DB_ROW)
        rc = parse_state(db_text(st, 0), part_states, NSTATES(part_states),
                         "participation.status", &prev);
    else if (rc == DB_DONE) /* a guarded insert (PostgreSQL's): no such agent */
        rc = sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)p->agent);
    else
        rc = coord__db_err(s, rc, "store: read participation");
    if (rc == 0)
        rc = sfl__fail(-EEXIST, "store: agent %lld in job %lld round %lld attempt %lld is "
                                "already recorded as %s",
                       (long long)p->agent, (long long)p->job, (long long)p->round,
                       (long long)p->attempt, part_states[prev]);
out:
    done(st);
    return rc;
}

static int lg_participation_record(coord_store_t *base_, int64_t job, int64_t round,
                                     int64_t attempt, int64_t agent,
                                     coord_part_status_t status, const char *reason,
                                     int64_t bytes)
{
    db_store_t *s = (db_store_t *)base_;
    coord_part_row_t p = {job, round, attempt, agent, status, reason, bytes, 0};
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    return end(s, record_part(s, &p));
}

/* A row's own refusal (an outcome already there, a round or agent gone, a
 * bad field) skips that row; anything else is the database's failure. */
static int row_error(int rc)
{
    return rc == -EEXIST || rc == SFL_ENOTFOUND || rc == SFL_EINVAL || rc == SFL_ELIMIT;
}

static int lg_participation_batch(coord_store_t *base_, const coord_part_row_t *rows, size_t n,
                                    size_t *skipped)
{
    db_store_t *s = (db_store_t *)base_;
    size_t skip = 0;
    int rc;

    if (skipped)
        *skipped = 0;
    if (s == NULL || (rows == NULL && n > 0))
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if (n == 0)
        return 0;
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = record_part(s, &rows[i]);
        if (rc < 0 && row_error(rc)) {
            skip++;
            rc = 0;
        }
    }
    rc = end(s, rc);
    if (rc == 0 && skipped)
        *skipped = skip;
    return rc;
}

static int read_part(db_stmt_t *st, size_t max, void *row)
{
    coord_participation_t *p = row;
    int rc, v = 0;

    (void)max;
    memset(p, 0, sizeof(*p));
    p->agent_id = db_i64(st, 0);
    if ((rc = parse_state(db_text(st, 1), part_states, NSTATES(part_states),
                          "participation.status", &v)) != 0 ||
        (rc = col_text(st, 2, p->reason, sizeof(p->reason), "participation.reason")) != 0)
        return rc;
    p->status = (coord_part_status_t)v;
    p->bytes = db_i64(st, 3);
    p->at_ms = db_i64(st, 4);
    return 0;
}

static int lg_participation_list(coord_store_t *base_, int64_t job, int64_t round,
                                   int64_t attempt, coord_participation_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_PART_LIST, &st, IDS(job, round, attempt))) != 0 ||
        (rc = fetch_all(s, st, read_part, 0, sizeof(**out), NULL, &arr, n,
                        "list participation")) != 0)
        return rc;
    *out = arr;
    return 0;
}

/* ---- checkpoints ----------------------------------------------------- */

/* Row layout shared by ST_CKPT_LATEST and ST_CKPT_GET: (expected round,
 * round or NULL, hash, model). Copies and verifies the model. */
static int read_checkpoint(db_store_t *s, db_stmt_t *st, int64_t job, int64_t asked,
                           size_t max_len, int64_t *round, uint8_t **model, size_t *len,
                           uint8_t hash[COORD_HASH_BYTES])
{
    uint8_t want[COORD_HASH_BYTES], got[COORD_HASH_BYTES];
    int rc = step(s, st, "store: read checkpoint of job %lld", (long long)job);

    if (rc == DB_DONE && asked == 0)
        return sfl__fail(SFL_ENOTFOUND, "store: no job %lld", (long long)job);
    if (rc == DB_DONE)
        return sfl__fail(SFL_ENOTFOUND, "store: job %lld has no checkpoint of round %lld",
                         (long long)job, (long long)asked);
    if (rc != DB_ROW)
        return rc;
    int64_t r = db_i64(st, 0);
    if (db_type(st, 1) == DB_NULL) {
        if (r == 0)
            return sfl__fail(SFL_ENOTFOUND, "store: job %lld has no committed round",
                             (long long)job);
        /* Commit writes both in one transaction: this is damage. */
        return sfl__fail(SFL_EPARSE, "store: job %lld: checkpoint of committed round %lld "
                                     "is missing",
                         (long long)job, (long long)r);
    }
    if ((rc = col_fixed(st, 2, want, sizeof(want), "checkpoints.model_hash")) != 0 ||
        (rc = col_alloc(st, 3, max_len, model, len, "checkpoints.model")) != 0)
        return rc;
    crypto_generichash(got, sizeof(got), *model, *len, NULL, 0);
    if (memcmp(got, want, sizeof(got)) != 0) {
        sfl__free(*model);
        *model = NULL;
        *len = 0;
        return sfl__fail(SFL_EIO, "store: job %lld round %lld: checkpoint does not match its "
                                  "hash",
                         (long long)job, (long long)r);
    }
    if (round)
        *round = r;
    if (hash)
        memcpy(hash, want, sizeof(want));
    return 0;
}

static int lg_checkpoint_latest(coord_store_t *base_, int64_t job, size_t max_len, int64_t *round,
                                  uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || model == NULL || len == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *model = NULL;
    *len = 0;
    if ((rc = prep(s, ST_CKPT_LATEST, &st, IDS(job))) != 0)
        return rc;
    rc = read_checkpoint(s, st, job, 0, max_len, round, model, len, hash);
    done(st);
    return rc;
}

static int lg_checkpoint_get(coord_store_t *base_, int64_t job, int64_t round, size_t max_len,
                               uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || model == NULL || len == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *model = NULL;
    *len = 0;
    if ((rc = prep(s, ST_CKPT_GET, &st, IDS(job, round))) != 0)
        return rc;
    if (round < 1) {
        done(st);
        return sfl__fail(SFL_EINVAL, "store: round %lld: rounds count from 1", (long long)round);
    }
    rc = read_checkpoint(s, st, job, round, max_len, NULL, model, len, hash);
    done(st);
    return rc;
}

static int read_round_no(db_stmt_t *st, size_t max, void *row)
{
    (void)max;
    *(int64_t *)row = db_i64(st, 0);
    return 0;
}

static int lg_checkpoint_rounds(coord_store_t *base_, int64_t job, int64_t **rounds, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || rounds == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *rounds = NULL;
    *n = 0;
    if ((rc = prep(s, ST_CKPT_ROUNDS, &st, IDS(job))) != 0 ||
        (rc = fetch_all(s, st, read_round_no, 0, sizeof(**rounds), NULL, &arr, n,
                        "list checkpoints")) != 0)
        return rc;
    *rounds = arr;
    return 0;
}

/* ---- statistics rounds ------------------------------------------------- */

static int lg_stats_open(coord_store_t *base_, int64_t job, int64_t attempt)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || attempt < 1)
        return sfl__fail(SFL_EINVAL, "store: bad statistics attempt");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_STATS_OPEN, &st, IDS(job, attempt))) == 0) {
        rc = exec_stmt(s, st, "open a statistics attempt");
        st = NULL;
    }
    done(st);
    return end(s, rc);
}

static int lg_stats_commit(coord_store_t *base_, int64_t job, const uint8_t *moments, size_t len,
                             const uint8_t hash[COORD_HASH_BYTES], int64_t rows, int64_t agents)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st = NULL;
    int rc;

    if (s == NULL || moments == NULL || len == 0 || len % 8 != 0 || rows < 0 || agents < 0)
        return sfl__fail(SFL_EINVAL, "store: bad statistics");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_STATS_COMMIT, &st, IDS(job, rows, agents, now_ms()))) == 0) {
        bind_blob(st, 5, hash, COORD_HASH_BYTES);
        rc = exec_blob(s, st, 6, moments, len, "store statistics", "store: statistics of %zu "
                       "bytes", len);
        st = NULL;
        if (rc == 0 && s->drv->changes(s) == 0)
            rc = sfl__fail(SFL_EINVAL, "store: job %lld has no open statistics round (or it "
                           "is already stored)", (long long)job);
    }
    done(st);
    return end(s, rc);
}

static int lg_stats_get(coord_store_t *base_, int64_t job, size_t max, coord_stats_row_t *out)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_STATS_GET, &st, IDS(job))) != 0)
        return rc;
    rc = step(s, st, "store: read the statistics of job %lld", (long long)job);
    if (rc == DB_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: job %lld has no statistics round", (long long)job);
    } else if (rc == DB_ROW) {
        rc = 0;
        out->attempts = db_i64(st, 0);
        if (db_type(st, 5) != DB_NULL) {
            out->rows = db_i64(st, 1);
            out->agents = db_i64(st, 2);
            out->committed_ms = db_i64(st, 3);
            if ((rc = col_fixed(st, 4, out->hash, COORD_HASH_BYTES,
                                "job_statistics.moments_hash")) == 0)
                rc = col_alloc(st, 5, max, &out->moments, &out->len, "job_statistics.moments");
        }
    }
    done(st);
    return rc;
}


static int lg_batch_begin(coord_store_t *base_)
{
    db_store_t *s = (db_store_t *)base_;
    int rc;

    if (s == NULL || s->batch)
        return sfl__fail(SFL_EINVAL, "store: NULL store or a batch already open");
    if ((rc = simple(s, ST_BEGIN, "begin batch")) == 0) {
        s->batch = 1;
        s->lost = 0;
    }
    return rc;
}

static int lg_batch_commit(coord_store_t *base_)
{
    db_store_t *s = (db_store_t *)base_;

    if (s == NULL || !s->batch)
        return sfl__fail(SFL_EINVAL, "store: no batch open");
    s->batch = 0;
    if (s->drv->autocommit(s) || s->lost)
        return s->drv->batch_gone(s);
    return end(s, 0);
}

/* ---- whole-store calls: the driver's -------------------------------- */

static int lg_read_only(coord_store_t *base_)
{
    db_store_t *s = (db_store_t *)base_;

    return s->drv->read_only(s);
}

void coord__db_close(db_store_t *s)
{
    if (s) {
        s->drv->close(s);
        sfl__free(s);
    }
}

static void lg_close(coord_store_t *base_)
{
    coord__db_close((db_store_t *)base_);
}

static int lg_integrity_check(coord_store_t *base_)
{
    db_store_t *s = (db_store_t *)base_;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->drv->integrity_check(s);
}

static int lg_backup(coord_store_t *base_, const char *dest, uint64_t *bytes)
{
    return ((db_store_t *)base_)->drv->backup(base_, dest, bytes);
}

/* ---- leadership -------------------------------------------------------- */

/* The driver's leader lock first (PostgreSQL: a session advisory lock;
 * SQLite: none, the state_dir lock excludes others), then the epoch bump. */
static int lg_leader_try(coord_store_t *base_, const char *holder, int64_t *epoch)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || epoch == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(holder, 127, 1, "leader holder")) != 0)
        return rc;
    if (s->drv->leader_lock && (rc = s->drv->leader_lock(s)) <= 0)
        return rc;
    if ((rc = begin(s)) != 0)
        goto fail;
    if ((rc = stmt(s, ST_LEADER_BUMP, &st)) == 0) {
        bind_text(st, 1, holder);
        db_bind_i64(st, 2, now_ms());
        rc = step(s, st, "store: take leadership");
        if (rc == DB_ROW) {
            *epoch = db_i64(st, 0);
            rc = 0;
        } else if (rc >= 0) {
            rc = sfl__fail(SFL_EIO, "store: take leadership: no epoch returned");
        }
        done(st);
    }
    if ((rc = end(s, rc)) != 0)
        goto fail;
    s->leads = 1;
    return 1;
fail:
    /* not leading after all: let the lock go */
    if (s->drv->leader_release) {
        s->drv->leader_release(s, rc);
        s->leads = 0;
    }
    return rc;
}

static void lg_fence(coord_store_t *base_, int64_t epoch)
{
    ((db_store_t *)base_)->fence = epoch;
}

static int lg_leader_get(coord_store_t *base_, int64_t *epoch, char holder[128],
                         int64_t *since_ms)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = stmt(s, ST_LEADER_GET, &st)) != 0)
        return rc;
    rc = step(s, st, "store: read the leader");
    if (rc == DB_ROW) {
        if (epoch)
            *epoch = db_i64(st, 0);
        if (since_ms)
            *since_ms = db_i64(st, 2);
        rc = holder ? col_text(st, 1, holder, 128, "leader holder") : 0;
    } else if (rc == DB_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no round master ever led this store");
    }
    done(st);
    return rc;
}

static int lg_leader_held(coord_store_t *base_)
{
    db_store_t *s = (db_store_t *)base_;

    if (s == NULL || !s->leads)
        return 0;
    return s->drv->leader_held ? s->drv->leader_held(s) : 1;
}

/* ---- the masters (schema 10) ------------------------------------------- */

static const char *const master_roles[] = {"single", "leader", "standby"};

static int lg_master_seen(coord_store_t *base_, const coord_master_row_t *m,
                          int64_t forget_before_ms)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL || m == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(m->holder, sizeof(m->holder) - 1, 1, "master holder")) != 0 ||
        (rc = check_text(m->host, sizeof(m->host) - 1, 0, "master host")) != 0)
        return rc;
    if ((unsigned)m->role >= sizeof(master_roles) / sizeof(master_roles[0]) || m->epoch < 0)
        return sfl__fail(SFL_EINVAL, "store: master role %d epoch %lld", (int)m->role,
                         (long long)m->epoch);
    if ((rc = begin(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_MASTER_SEEN, &st, IDS(0, 0, m->epoch, m->pid, 0, m->started_ms,
                                                m->seen_ms))) == 0) {
        bind_text(st, 1, m->holder);
        bind_text(st, 2, master_roles[m->role]);
        bind_text(st, 5, m->host);
        rc = exec_stmt(s, st, "record a master");
    }
    if (rc == 0 && forget_before_ms > 0 &&
        (rc = prep(s, ST_MASTER_FORGET, &st, IDS(forget_before_ms))) == 0) {
        bind_text(st, 2, m->holder);
        rc = exec_stmt(s, st, "forget old masters");
    }
    return end(s, rc);
}

static int lg_master_gone(coord_store_t *base_, const char *holder)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = check_text(holder, 127, 1, "master holder")) != 0)
        return rc;
    if ((rc = stmt(s, ST_MASTER_GONE, &st)) != 0)
        return rc;
    bind_text(st, 1, holder);
    return exec_stmt(s, st, "delete a master");
}

static int read_master(db_stmt_t *st, size_t max, void *row)
{
    coord_master_row_t *m = row;
    char role[16];
    int r = 0, rc;

    (void)max;
    memset(m, 0, sizeof(*m));
    if ((rc = col_text(st, 0, m->holder, sizeof(m->holder), "masters.holder")) != 0 ||
        (rc = col_text(st, 1, role, sizeof(role), "masters.role")) != 0 ||
        (rc = parse_state((const unsigned char *)role, master_roles,
                          sizeof(master_roles) / sizeof(master_roles[0]), "masters.role",
                          &r)) != 0 ||
        (rc = col_text(st, 4, m->host, sizeof(m->host), "masters.host")) != 0)
        return rc;
    m->role = (coord_master_role_t)r;
    m->epoch = db_i64(st, 2);
    m->pid = db_i64(st, 3);
    m->started_ms = db_i64(st, 5);
    m->seen_ms = db_i64(st, 6);
    if (m->holder[0] == '\0' || m->epoch < 0)
        return sfl__fail(SFL_EPARSE, "store: a masters row has no holder or a negative epoch");
    return 0;
}

static int lg_master_list(coord_store_t *base_, coord_master_row_t **out, size_t *n)
{
    db_store_t *s = (db_store_t *)base_;
    db_stmt_t *st;
    void *arr = NULL;
    int rc;

    if (s == NULL || out == NULL || n == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    *out = NULL;
    *n = 0;
    if ((rc = prep(s, ST_MASTER_LIST, &st, IDS(COORD_MASTERS_MAX))) != 0 ||
        (rc = fetch_all(s, st, read_master, 0, sizeof(coord_master_row_t), NULL, &arr, n,
                        "list the masters")) != 0)
        return rc;
    *out = arr;
    return 0;
}

const coord_store_ops_t coord__db_ops = {
    .read_only = lg_read_only,
    .close = lg_close,
    .batch_begin = lg_batch_begin,
    .batch_commit = lg_batch_commit,
    .integrity_check = lg_integrity_check,
    .recover = lg_recover,
    .backup = lg_backup,
    .leader_try = lg_leader_try,
    .fence = lg_fence,
    .leader_get = lg_leader_get,
    .leader_held = lg_leader_held,
    .master_seen = lg_master_seen,
    .master_gone = lg_master_gone,
    .master_list = lg_master_list,
    .agent_upsert = lg_agent_upsert,
    .agent_rekey = lg_agent_rekey,
    .cert_revoke = lg_cert_revoke,
    .revoked_list = lg_revoked_list,
    .quarantine_add = lg_quarantine_add,
    .quarantine_release = lg_quarantine_release,
    .quarantine_list = lg_quarantine_list,
    .stats_open = lg_stats_open,
    .stats_commit = lg_stats_commit,
    .stats_get = lg_stats_get,
    .agent_touch = lg_agent_touch,
    .agent_get = lg_agent_get,
    .agent_get_by_name = lg_agent_get_by_name,
    .agent_list = lg_agent_list,
    .job_create = lg_job_create,
    .job_get = lg_job_get,
    .job_list = lg_job_list,
    .job_set_state = lg_job_set_state,
    .job_fail = lg_job_fail,
    .round_open = lg_round_open,
    .round_next_attempt = lg_round_next_attempt,
    .round_set_state = lg_round_set_state,
    .round_commit = lg_round_commit,
    .history = lg_history,
    .round_get = lg_round_get,
    .round_list = lg_round_list,
    .participation_record = lg_participation_record,
    .participation_batch = lg_participation_batch,
    .participation_list = lg_participation_list,
    .checkpoint_latest = lg_checkpoint_latest,
    .checkpoint_get = lg_checkpoint_get,
    .checkpoint_rounds = lg_checkpoint_rounds,
};

/* The store's PostgreSQL backend (store.h: coord_store_open with
 * "postgresql:CONNINFO"): the same schema, migrations numbering, error
 * contract and invariants as the SQLite one (sqlite.c), through libpq.
 *
 * The store logic below the "statement shim" is sqlite.c's own, kept in
 * step with it: a small shim gives libpq the shape of SQLite's statement
 * API (prepare once, bind, step row by row, read columns, reset), so the
 * checks, transactions and error paths read the same in both backends.
 * Differences:
 * - Statements are prepared once per connection (PQprepare, names "sN"),
 *   parameters sent as text apart from bytea (binary), results read in
 *   binary (int8, bool, float8, bytea, text), so no value reaches SQL text.
 * - A transaction is BEGIN ... COMMIT (READ COMMITTED); writes that read
 *   first (round open, commit) are serialised by the leader row's lock
 *   when fenced, and by the database's unique and foreign keys otherwise.
 *   A failed statement aborts PostgreSQL's transaction: a call that goes on
 *   after one (participation rows of a batch) runs it under a savepoint.
 * - Fencing: coord_store_fence's epoch is checked first in every
 *   transaction that writes jobs, rounds, participation, checkpoints,
 *   statistics or quarantine (UPDATE leader ... WHERE epoch = mine, row
 *   lock held to the commit): a newer master's leader_try waits for that
 *   transaction, then every later one of the old master fails with
 *   SFL_EFENCED.
 * - Leadership: a session advisory lock keyed by the schema's name; lost
 *   with the connection. A lost connection fails the call (-ECONNRESET
 *   with libpq's message); the next call reconnects (PQreset), re-prepares
 *   and no longer leads (coord_store_leader_held 0).
 * - Migrations run under a transaction-level advisory lock, so two
 *   processes starting at once migrate once. */
#include "store/store.h"
#include "store/store_int.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>
#include <sodium.h>

#include "sfl/core/alloc.h"

#define DEFAULT_KEEP 3
#define LIVE_STATES "('selecting','training','aggregating')"
#define MAX_PARAMS 32
/* advisory lock keys: hashtext(current_schema() || suffix) */
#define LOCK_MIGRATE "':sfl-migrate'"
#define LOCK_LEADER "':sfl-leader'"

/* SQLite's result codes, the shim's vocabulary (so the ported logic keeps
 * its tests: (rc & 0xff) == PQ_CONSTRAINT holds for PQ_FK too). */
enum {
    PQ_OK = 0,
    PQ_ERROR = 1,
    PQ_TOOBIG = 18,
    PQ_CONSTRAINT = 19,
    PQ_FK = 19 | (3 << 8),
    PQ_ROW = 100,
    PQ_DONE = 101,
};
enum { PQ_NULL = 5, PQ_INTEGER = 1, PQ_FLOAT = 2, PQ_TEXT = 3, PQ_BLOB = 4 };

/* PostgreSQL type oids (pg_type.h, stable) */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT4 700
#define OID_FLOAT8 701
#define OID_VARCHAR 1043

typedef struct pg_store pg_store_t;

typedef struct {
    pg_store_t *s;
    int id;
    int nparams;
    const char *val[MAX_PARAMS];
    int len[MAX_PARAMS];
    int fmt[MAX_PARAMS];
    char num[MAX_PARAMS][32]; /* text of integer and real parameters */
    PGresult *res;
    int row;                  /* next row to return; -1: not executed */
} pst_t;

enum {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_SAVEPOINT,
    ST_RELEASE,
    ST_ROLLBACK_TO,
    ST_AGENT_BY_NAME,
    ST_REVOKE,
    ST_REVOKED_LIST,
    ST_QUAR_ADD,
    ST_QUAR_DEL,
    ST_QUAR_LIST,
    ST_AGENT_BY_KEY,
    ST_AGENT_INSERT,
    ST_AGENT_UPDATE,
    ST_AGENT_REKEY,
    ST_AGENT_TOUCH,
    ST_AGENT_GET,
    ST_AGENT_GET_NAME,
    ST_AGENT_LIST,
    ST_JOB_INSERT,
    ST_JOB_GET,
    ST_JOB_LIST,
    ST_JOB_STATE,
    ST_JOB_SET_STATE,
    ST_JOB_FAIL,
    ST_JOB_SET_COMMITTED,
    ST_ROUND_INSERT,
    ST_ROUND_LIVE,
    ST_ROUND_MAX_ATTEMPT,
    ST_ROUND_STATE,
    ST_ROUND_SET_STATE,
    ST_ROUND_GET,
    ST_ROUND_LIST,
    ST_ROUND_RECOVER,
    ST_PART_SELECTED,
    ST_PART_RECORD,
    ST_PART_STATUS,
    ST_PART_LIST,
    ST_CKPT_INSERT,
    ST_CKPT_PRUNE,
    ST_CKPT_LATEST,
    ST_CKPT_GET,
    ST_CKPT_ROUNDS,
    ST_VERSION,
    ST_VERSION_INSERT,
    ST_METRICS_INSERT,
    ST_HISTORY,
    ST_STATS_OPEN,
    ST_STATS_COMMIT,
    ST_STATS_GET,
    ST_FENCE,
    ST_LEADER_BUMP,
    ST_LEADER_GET,
    ST_COUNT
};

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

static const char *const sql_text[ST_COUNT] = {
    /* a statistics attempt is counted once opened; a stored sum is final */
    [ST_STATS_OPEN] = "INSERT INTO job_statistics(job_id, attempts) VALUES(?1, ?2) "
                      "ON CONFLICT(job_id) DO UPDATE SET attempts = GREATEST(job_statistics.attempts, ?2) "
                      "WHERE job_statistics.moments IS NULL",
    [ST_STATS_COMMIT] = "UPDATE job_statistics SET rows = ?2, agents = ?3, committed_ms = ?4, "
                        "moments_hash = ?5, moments = ?6 "
                        "WHERE job_id = ?1 AND moments IS NULL",
    [ST_STATS_GET] = "SELECT attempts, rows, agents, committed_ms, moments_hash, moments "
                     "FROM job_statistics WHERE job_id = ?1",
    /* the leader row (schema 9): one row, epoch counted from 1 */
    [ST_FENCE] = "UPDATE leader SET epoch = epoch WHERE epoch = ?1",
    [ST_LEADER_BUMP] = "INSERT INTO leader(one, epoch, holder, since_ms) VALUES(1, 1, ?1, ?2) "
                       "ON CONFLICT(one) DO UPDATE SET epoch = leader.epoch + 1, holder = ?1, "
                       "since_ms = ?2 RETURNING epoch",
    [ST_LEADER_GET] = "SELECT epoch, holder, since_ms FROM leader WHERE one = 1",
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_SAVEPOINT] = "SAVEPOINT sfl_call",
    [ST_RELEASE] = "RELEASE sfl_call",
    [ST_ROLLBACK_TO] = "ROLLBACK TO sfl_call",
    [ST_AGENT_BY_NAME] = "SELECT id, identity_pk, cert_fingerprint, "
                         "EXISTS(SELECT 1 FROM revoked_certs WHERE fingerprint = "
                         "agents.cert_fingerprint) FROM agents WHERE name = ?1",
    [ST_REVOKE] = "INSERT INTO revoked_certs(fingerprint, name, revoked_ms) "
                  "VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING",
    [ST_REVOKED_LIST] = "SELECT fingerprint FROM revoked_certs ORDER BY fingerprint",
    /* the first reason stays: quarantining twice changes nothing */
    [ST_QUAR_ADD] = "INSERT INTO quarantine(job_id, agent_id, reason, at_ms) "
                    "VALUES(?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
    [ST_QUAR_DEL] = "DELETE FROM quarantine WHERE job_id = ?1 AND agent_id = ?2",
    [ST_QUAR_LIST] = "SELECT job_id, agent_id, at_ms, reason FROM quarantine "
                     "ORDER BY job_id, agent_id",
    [ST_AGENT_BY_KEY] = "SELECT name FROM agents WHERE identity_pk = ?1",
    [ST_AGENT_INSERT] = "INSERT INTO agents(name, cert_fingerprint, identity_pk, "
                        "capabilities, samples, dimension, labels, joined_ms, last_seen_ms) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) RETURNING id",
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
                      "last_committed_round, spec) VALUES(?1, 'active', ?2, ?3, 0, ?4) RETURNING id",
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
    [ST_PART_SELECTED] = "INSERT INTO participation(job_id, round, attempt, agent_id, "
                         "status, reason, bytes, at_ms) "
                         "VALUES(?1, ?2, ?3, ?4, 'selected', NULL, 0, ?5)",
    /* Only a SELECTED row may change: an outcome is written once. */
    [ST_PART_RECORD] = "INSERT INTO participation(job_id, round, attempt, agent_id, "
                       "status, reason, bytes, at_ms) SELECT ?1::bigint, ?2::bigint, ?3::bigint, "
                       "?4::bigint, ?5::text, ?6::text, ?7::bigint, ?8::bigint "
                       /* no such agent: nothing inserted (a foreign key error would
                        * abort the caller's transaction) */
                       "WHERE EXISTS(SELECT 1 FROM agents WHERE id = ?4) "
                       "ON CONFLICT(job_id, round, attempt, agent_id) DO UPDATE SET "
                       "status = excluded.status, reason = excluded.reason, "
                       "bytes = excluded.bytes, at_ms = excluded.at_ms "
                       "WHERE participation.status = 'selected'",
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
                   "(SELECT COALESCE(SUM(p.bytes), 0)::bigint FROM participation p "
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


struct pg_store {
    coord_store_t base; /* first: a coord_store_t * is a pg_store_t * */
    PGconn *conn;
    pst_t st[ST_COUNT];
    unsigned char prepared[ST_COUNT]; /* prepared on this connection */
    char sql[ST_COUNT][2048 + 512];   /* the statements, $N-numbered */
    unsigned keep;                    /* checkpoints kept per job; 0: all */
    int batch;                        /* a batch transaction is open */
    int64_t fence;                    /* coord_store_fence's epoch; 0: unfenced */
    int leads;                        /* leader_try won on this session */
    int read_only;                    /* coord_store_read_only */
    unsigned busy_ms;
    int relaxed;
    int64_t changes; /* rows the last command changed */
    int64_t last_id; /* the last "RETURNING id" */
    char sqlstate[6];
    char msg[384];   /* the last error's libpq message */
};

/* jobs.state holds the first four; "failed" is a job_failures row. */
static const char *const job_states[] = {"active", "paused", "cancelled", "done", "failed"};
static const char *const round_states[] = {"selecting", "training", "aggregating",
                                           "committed", "failed"};
static const char *const part_states[] = {"selected", "accepted", "late", "duplicate",
                                          "rejected"};
#define NSTATES(a) (sizeof(a) / sizeof((a)[0]))

/* "?N" -> "$N"; a bare "?" takes the number after the highest so far. */
static void number_params(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    long hi = 0;

    for (const char *p = in; *p && o + 8 < cap; p++) {
        if (*p != '?') {
            out[o++] = *p;
            continue;
        }
        char *end;
        long n = strtol(p + 1, &end, 10);

        if (end == p + 1)
            n = hi + 1;
        if (n > hi)
            hi = n;
        o += (size_t)snprintf(out + o, cap - o, "$%ld", n);
        p = end - 1;
    }
    out[o] = '\0';
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t u64_to_i64(uint64_t v)
{
    int64_t r;

    memcpy(&r, &v, sizeof(r));
    return r;
}

static uint64_t i64_to_u64(int64_t v)
{
    uint64_t r;

    memcpy(&r, &v, sizeof(r));
    return r;
}

/* Keeps the failed result's SQLSTATE and message in s; PGRES_* -> PQ_*. */
static int note_result(pg_store_t *s, PGresult *res)
{
    ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
        const char *t = res ? PQcmdTuples(res) : "";

        s->changes = t && *t ? strtoll(t, NULL, 10) : 0;
        return PQ_OK;
    }
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

    snprintf(s->sqlstate, sizeof(s->sqlstate), "%s", state ? state : "");
    if (m == NULL || *m == '\0')
        m = PQerrorMessage(s->conn);
    snprintf(s->msg, sizeof(s->msg), "%s", m && *m ? m : "no answer from the server");
    /* libpq's messages end in a newline */
    size_t n = strlen(s->msg);
    while (n && (s->msg[n - 1] == '\n' || s->msg[n - 1] == ' '))
        s->msg[--n] = '\0';
    if (strcmp(s->sqlstate, "23503") == 0)
        return PQ_FK;
    if (strncmp(s->sqlstate, "23", 2) == 0)
        return PQ_CONSTRAINT;
    return PQ_ERROR;
}

/* Records "<ctx>: <PostgreSQL message> (SQLSTATE x)" and maps it to an sfl
 * code or -errno: a lost connection -ECONNRESET, a lock wait past
 * lock_timeout or a serialisation failure -EBUSY, a constraint
 * SFL_EINVAL, a value past a limit SFL_ELIMIT, a read-only session
 * -EROFS, a full disk -ENOSPC, anything else SFL_EIO. */
static int vdberr(pg_store_t *s, int rc, const char *fmt, va_list ap) SFL_PRINTF(3, 0);
static int vdberr(pg_store_t *s, int rc, const char *fmt, va_list ap)
{
    char ctx[256];
    const char *st = s->sqlstate;
    int err;

    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    if (rc == PQ_TOOBIG)
        return sfl__fail(SFL_ELIMIT, "%s: value too big for PostgreSQL (bytea: at most 1 GB)",
                         ctx);
    if (s->conn == NULL || PQstatus(s->conn) == CONNECTION_BAD || strncmp(st, "08", 2) == 0 ||
        strncmp(st, "57P", 3) == 0)
        return sfl__fail(-ECONNRESET, "%s: connection to PostgreSQL lost: %s (the next call "
                                      "reconnects)",
                         ctx, s->msg[0] ? s->msg : PQerrorMessage(s->conn));
    if ((rc & 0xff) == PQ_CONSTRAINT)
        err = SFL_EINVAL;
    else if (strcmp(st, "55P03") == 0 || strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0)
        err = -EBUSY;
    else if (strncmp(st, "54", 2) == 0 || strcmp(st, "22001") == 0)
        err = SFL_ELIMIT;
    else if (strcmp(st, "25006") == 0)
        err = -EROFS;
    else if (strcmp(st, "53100") == 0)
        err = -ENOSPC;
    else if (strcmp(st, "53200") == 0)
        err = SFL_ENOMEM;
    else if (strncmp(st, "42", 2) == 0 || strcmp(st, "22P02") == 0)
        err = SFL_EPARSE;
    else
        err = SFL_EIO;
    return sfl__fail(err, "%s: %s (SQLSTATE %s)", ctx, s->msg, st[0] ? st : "?");
}

static int dberr(pg_store_t *s, int rc, const char *fmt, ...) SFL_PRINTF(3, 4);
static int dberr(pg_store_t *s, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = vdberr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* The session's settings, after connecting or reconnecting. */
static int session_setup(pg_store_t *s)
{
    char sql[256];
    PGresult *r;
    int rc;

    snprintf(sql, sizeof(sql),
             "SET lock_timeout = %u; SET synchronous_commit = %s; "
             "SET client_min_messages = warning; SET default_transaction_read_only = %s",
             s->busy_ms, s->relaxed ? "off" : "on", s->read_only ? "on" : "off");
    r = PQexec(s->conn, sql);
    rc = note_result(s, r);
    PQclear(r);
    return rc == PQ_OK ? 0 : dberr(s, rc, "store: session settings");
}

/* A lost connection is re-established here, before the next statement:
 * the prepared statements are gone with it, and so is the advisory lock. */
static int conn_ok(pg_store_t *s)
{
    if (PQstatus(s->conn) == CONNECTION_OK)
        return 0;
    s->leads = 0;
    s->batch = 0;
    memset(s->prepared, 0, sizeof(s->prepared));
    for (int i = 0; i < ST_COUNT; i++) {
        PQclear(s->st[i].res);
        s->st[i].res = NULL;
        s->st[i].row = -1;
    }
    PQreset(s->conn);
    if (PQstatus(s->conn) != CONNECTION_OK) {
        snprintf(s->msg, sizeof(s->msg), "%s", PQerrorMessage(s->conn));
        size_t n = strlen(s->msg);
        while (n && s->msg[n - 1] == '\n')
            s->msg[--n] = '\0';
        return sfl__fail(-ECONNRESET, "store: reconnect to PostgreSQL: %s", s->msg);
    }
    return session_setup(s);
}

static int stmt(pg_store_t *s, int id, pst_t **out)
{
    pst_t *st = &s->st[id];
    int rc;

    *out = NULL;
    if ((rc = conn_ok(s)) != 0)
        return rc;
    if (!s->prepared[id]) {
        char name[16];
        PGresult *r;

        snprintf(name, sizeof(name), "s%d", id);
        r = PQprepare(s->conn, name, s->sql[id], 0, NULL);
        rc = note_result(s, r);
        PQclear(r);
        if (rc != PQ_OK)
            return dberr(s, rc, "store: prepare statement %d", id);
        s->prepared[id] = 1;
    }
    st->s = s;
    st->id = id;
    if (st->row < 0 || st->res == NULL) {
        st->nparams = 0;
        st->row = -1;
    }
    *out = st;
    return 0;
}

static void set_param(pst_t *st, int i, const char *v, int len, int fmt)
{
    if (i < 1 || i > MAX_PARAMS)
        return;
    st->val[i - 1] = v;
    st->len[i - 1] = len;
    st->fmt[i - 1] = fmt;
    if (i > st->nparams)
        st->nparams = i;
}

static int pst_bind_i64(pst_t *st, int i, int64_t v)
{
    if (i < 1 || i > MAX_PARAMS)
        return PQ_ERROR;
    snprintf(st->num[i - 1], sizeof(st->num[0]), "%" PRId64, v);
    set_param(st, i, st->num[i - 1], 0, 0);
    return PQ_OK;
}

static int pst_bind_double(pst_t *st, int i, double v)
{
    if (i < 1 || i > MAX_PARAMS)
        return PQ_ERROR;
    if (isnan(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "NaN");
    else if (isinf(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%sInfinity", v < 0 ? "-" : "");
    else
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%.17g", v);
    set_param(st, i, st->num[i - 1], 0, 0);
    return PQ_OK;
}

static int pst_bind_null(pst_t *st, int i)
{
    set_param(st, i, NULL, 0, 0);
    return PQ_OK;
}

/* Runs st on its first step; then returns its rows one by one. */
static int pst_step(pst_t *st)
{
    pg_store_t *s = st->s;

    if (st->row < 0) {
        char name[16];

        snprintf(name, sizeof(name), "s%d", st->id);
        PQclear(st->res);
        st->res = PQexecPrepared(s->conn, name, st->nparams, st->val, st->len, st->fmt, 1);
        int rc = note_result(s, st->res);
        if (rc != PQ_OK) {
            PQclear(st->res);
            st->res = NULL;
            return rc;
        }
        st->row = 0;
        if (PQresultStatus(st->res) == PGRES_TUPLES_OK && PQntuples(st->res) > 0 &&
            strstr(s->sql[st->id], "RETURNING id") && PQgetlength(st->res, 0, 0) == 8) {
            const unsigned char *p = (const unsigned char *)PQgetvalue(st->res, 0, 0);
            uint64_t v = 0;

            for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
            s->last_id = u64_to_i64(v);
        }
    } else {
        st->row++;
    }
    if (PQresultStatus(st->res) == PGRES_TUPLES_OK && st->row < PQntuples(st->res))
        return PQ_ROW;
    return PQ_DONE;
}

static void pst_reset(pst_t *st)
{
    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
}

static void pst_clear_bindings(pst_t *st)
{
    st->nparams = 0;
}

static int pst_type(pst_t *st, int i)
{
    if (st->res == NULL || st->row < 0 || PQgetisnull(st->res, st->row, i))
        return PQ_NULL;
    switch (PQftype(st->res, i)) {
    case OID_BYTEA: return PQ_BLOB;
    case OID_TEXT:
    case OID_VARCHAR: return PQ_TEXT;
    case OID_FLOAT4:
    case OID_FLOAT8: return PQ_FLOAT;
    default: return PQ_INTEGER;
    }
}

/* Integers of any width, bool as 0/1; NULL (or another type) reads 0. */
static int64_t pst_i64(pst_t *st, int i)
{
    if (pst_type(st, i) != PQ_INTEGER)
        return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(st->res, st->row, i);
    int n = PQgetlength(st->res, st->row, i);
    uint64_t v = 0;

    if (n != 1 && n != 2 && n != 4 && n != 8)
        return 0;
    for (int k = 0; k < n; k++)
        v = v << 8 | p[k];
    if (n < 8 && n > 1 && (v >> (n * 8 - 1)) & 1) /* sign-extend */
        v |= ~(uint64_t)0 << (n * 8);
    return u64_to_i64(v);
}

static int pst_int(pst_t *st, int i)
{
    return (int)pst_i64(st, i);
}

static double pst_double(pst_t *st, int i)
{
    int t = pst_type(st, i);

    if (t == PQ_INTEGER)
        return (double)pst_i64(st, i);
    if (t != PQ_FLOAT)
        return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(st->res, st->row, i);
    int n = PQgetlength(st->res, st->row, i);
    uint64_t v = 0;

    for (int k = 0; k < n; k++)
        v = v << 8 | p[k];
    if (n == 4) {
        uint32_t u = (uint32_t)v;
        float f;

        memcpy(&f, &u, sizeof(f));
        return f;
    }
    double d = 0;
    if (n == 8)
        memcpy(&d, &v, sizeof(d));
    return d;
}

static const unsigned char *pst_text(pst_t *st, int i)
{
    if (pst_type(st, i) == PQ_NULL)
        return NULL;
    return (const unsigned char *)PQgetvalue(st->res, st->row, i);
}

static const void *pst_blob(pst_t *st, int i)
{
    if (pst_type(st, i) == PQ_NULL)
        return NULL;
    return PQgetvalue(st->res, st->row, i);
}

static int pst_bytes(pst_t *st, int i)
{
    if (pst_type(st, i) == PQ_NULL)
        return 0;
    return PQgetlength(st->res, st->row, i);
}

static int64_t pst_changes(pg_store_t *s)
{
    return s->changes;
}

/* Outside any transaction (SQLite's autocommit mode)? A lost connection
 * has no transaction either. */
static int pst_autocommit(pg_store_t *s)
{
    return PQtransactionStatus(s->conn) != PQTRANS_INTRANS &&
           PQtransactionStatus(s->conn) != PQTRANS_INERROR;
}

/* "<what>: <message>" for a whole-string command (DDL, settings). */
static int exec_sql(pg_store_t *s, const char *sql, const char *fmt, ...) SFL_PRINTF(3, 4);
static int exec_sql(pg_store_t *s, const char *sql, const char *fmt, ...)
{
    va_list ap;
    PGresult *r = PQexec(s->conn, sql);
    int rc = note_result(s, r);

    PQclear(r);
    if (rc == PQ_OK)
        return 0;
    va_start(ap, fmt);
    rc = vdberr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* stmt() with the leading parameters ?1..?n bound to ids[0..n); IDS(a, b)
 * gives n and ids. */
static int prep(pg_store_t *s, int id, pst_t **out, size_t n, const int64_t *ids)
{
    int rc = stmt(s, id, out);

    for (size_t i = 0; rc == 0 && i < n; i++)
        pst_bind_i64(*out, (int)i + 1, ids[i]);
    return rc;
}
#define IDS(...)                                                                           \
    sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (const int64_t[]){__VA_ARGS__}

/* Steps st once: PQ_ROW or PQ_DONE, else the error with the detail
 * "<fmt>: <message>". */
static int step(pg_store_t *s, pst_t *st, const char *fmt, ...) SFL_PRINTF(3, 4);
static int step(pg_store_t *s, pst_t *st, const char *fmt, ...)
{
    va_list ap;
    int rc = pst_step(st);

    if (rc == PQ_ROW || rc == PQ_DONE)
        return rc;
    va_start(ap, fmt);
    rc = vdberr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* Ends the use of a statement: drops its result and bindings. */
static void done(pst_t *st)
{
    if (st) {
        pst_reset(st);
        pst_clear_bindings(st);
    }
}

/* bytea goes binary; a zero-length one must not be NULL. */
static int bind_blob(pst_t *st, int i, const void *p, size_t n)
{
    if (n > INT_MAX)
        return PQ_TOOBIG;
    set_param(st, i, n ? (const char *)p : "", (int)n, 1);
    return PQ_OK;
}

static int bind_text(pst_t *st, int i, const char *t)
{
    set_param(st, i, t, 0, 0);
    return PQ_OK;
}

/* Runs a statement that returns no rows. */
static int exec_stmt(pg_store_t *s, pst_t *st, const char *what)
{
    int rc = step(s, st, "store: %s", what);

    done(st);
    return rc < 0 ? rc : 0;
}

/* Binds a big blob (spec, cohort, model) as parameter i, then runs st like
 * exec_stmt. SQLite refuses blobs beyond SQLITE_MAX_LENGTH (1e9 bytes by
 * default): SFL_ELIMIT with the detail "<fmt>: <sqlite message>". */
static int exec_blob(pg_store_t *s, pst_t *st, int i, const void *p, size_t n,
                     const char *what, const char *fmt, ...) SFL_PRINTF(7, 8);
static int exec_blob(pg_store_t *s, pst_t *st, int i, const void *p, size_t n,
                     const char *what, const char *fmt, ...)
{
    va_list ap;
    int rc = bind_blob(st, i, p, n);

    if (rc == PQ_OK)
        return exec_stmt(s, st, what);
    va_start(ap, fmt);
    rc = vdberr(s, rc, fmt, ap);
    va_end(ap);
    done(st);
    return rc;
}

static int simple(pg_store_t *s, int id, const char *what)
{
    pst_t *st;
    int rc = stmt(s, id, &st);

    return rc ? rc : exec_stmt(s, st, what);
}

static int begin(pg_store_t *s)
{
    if (s->batch)
        return simple(s, ST_SAVEPOINT, "savepoint");
    return simple(s, ST_BEGIN, "begin transaction");
}

/* Inside a batch: releases the call's savepoint when rc is 0, else rolls
 * the call's changes back; the batch's transaction stays open unless
 * SQLite ended it itself (batch_commit then fails). */
static int end_savepoint(pg_store_t *s, int rc)
{
    char keep[512];

    if (pst_autocommit(s))
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

/* Commits when rc is 0, else rolls back; returns the first error. SQLite may
 * already have rolled back on its own (e.g. PQ_FULL), hence the check. */
static int end(pg_store_t *s, int rc)
{
    if (s->batch)
        return end_savepoint(s, rc);
    if (rc == 0) {
        rc = simple(s, ST_COMMIT, "commit transaction");
        if (rc == 0)
            return 0;
    }
    if (!pst_autocommit(s)) {
        char keep[512];

        /* ROLLBACK must not overwrite the detail of the real failure. */
        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        (void)simple(s, ST_ROLLBACK, "rollback");
        sfl__fail(rc, "%s", keep);
    }
    return rc;
}

/* begin(), then, once fenced, the fence: the leader row must still carry
 * this store's epoch (a newer master bumped it: SFL_EFENCED, nothing
 * written). */
static int begin_fenced(pg_store_t *s)
{
    pst_t *st;
    int rc = begin(s);

    if (rc || s->fence == 0)
        return rc;
    if ((rc = prep(s, ST_FENCE, &st, IDS(s->fence))) == 0)
        rc = exec_stmt(s, st, "fence");
    if (rc == 0 && pst_changes(s) != 1)
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
static int col_text(pst_t *st, int i, char *dst, size_t cap, const char *what)
{
    int type = pst_type(st, i);

    if (type == PQ_NULL) {
        dst[0] = '\0';
        return 0;
    }
    if (type != PQ_TEXT)
        return sfl__fail(SFL_EPARSE, "store: %s is not text", what);
    const unsigned char *t = pst_text(st, i);
    size_t n = (size_t)pst_bytes(st, i);
    if (t == NULL)
        return sfl__fail(SFL_ENOMEM, "store: %s: out of memory", what);
    if (n >= cap)
        return sfl__fail(SFL_ELIMIT, "store: %s is %zu bytes, limit %zu", what, n, cap - 1);
    memcpy(dst, t, n);
    dst[n] = '\0';
    return 0;
}

static int col_fixed(pst_t *st, int i, uint8_t *dst, size_t n, const char *what)
{
    if (pst_type(st, i) != PQ_BLOB)
        return sfl__fail(SFL_EPARSE, "store: %s is not a blob", what);
    const void *p = pst_blob(st, i);
    size_t got = (size_t)pst_bytes(st, i);
    if (got != n)
        return sfl__fail(SFL_EPARSE, "store: %s is %zu bytes, expected %zu", what, got, n);
    memcpy(dst, p, n);
    return 0;
}

/* Copies a BLOB column into a new buffer after checking its size against
 * max: the length comes from the file, so it is checked before allocating. */
static int col_alloc(pst_t *st, int i, size_t max, uint8_t **out, size_t *len,
                     const char *what)
{
    *out = NULL;
    *len = 0;
    if (pst_type(st, i) != PQ_BLOB)
        return sfl__fail(SFL_EPARSE, "store: %s is not a blob", what);
    size_t n = (size_t)pst_bytes(st, i);
    if (n > max)
        return sfl__fail(SFL_ELIMIT, "store: %s is %zu bytes, limit %zu", what, n, max);
    const void *p = n ? pst_blob(st, i) : NULL;
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
typedef int (*read_fn)(pst_t *st, size_t max, void *row);

/* Reads every row of st (then reset) into a new array of elem-sized rows,
 * *out and *n set only on success. On failure the rows read so far, the
 * failed one included, are cleared (clear may be NULL) and the array freed. */
static int fetch_all(pg_store_t *s, pst_t *st, read_fn rd, size_t max, size_t elem,
                     void (*clear)(void *row), void **out, size_t *n, const char *what)
{
    void *arr = NULL;
    size_t cnt = 0, cap = 0;
    int rc;

    while ((rc = step(s, st, "store: %s", what)) == PQ_ROW) {
        if ((rc = grow(&arr, &cap, cnt, elem)) != 0)
            break;
        rc = rd(st, max, (unsigned char *)arr + cnt * elem);
        cnt++;
        if (rc)
            break;
    }
    done(st);
    if (rc != PQ_DONE) {
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

static int pg_recover(coord_store_t *base_, const char *reason, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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
            *n = (size_t)pst_changes(s);
    }
    if (s->fence) {
        rc = end(s, rc);
        if (rc && n)
            *n = 0;
    }
    return rc;
}

/* ---- agents ---------------------------------------------------------- */

static int read_agent(pst_t *st, size_t max, void *row)
{
    coord_agent_row_t *a = row;
    int rc;

    (void)max;
    memset(a, 0, sizeof(*a));
    a->id = pst_i64(st, 0);
    if ((rc = col_text(st, 1, a->name, sizeof(a->name), "agents.name")) != 0 ||
        (rc = col_fixed(st, 2, a->cert_fingerprint, sizeof(a->cert_fingerprint),
                        "agents.cert_fingerprint")) != 0 ||
        (rc = col_fixed(st, 3, a->identity_pk, sizeof(a->identity_pk), "agents.identity_pk")) !=
            0 ||
        (rc = col_text(st, 4, a->capabilities, sizeof(a->capabilities),
                       "agents.capabilities")) != 0 ||
        (rc = col_text(st, 7, a->labels, sizeof(a->labels), "agents.labels")) != 0)
        return rc;
    a->samples = pst_i64(st, 5);
    a->dimension = pst_i64(st, 6);
    a->joined_ms = pst_i64(st, 8);
    a->last_seen_ms = pst_i64(st, 9);
    return 0;
}

static void bind_agent(pst_t *st, const coord_agent_row_t *a, int64_t now)
{
    bind_text(st, 1, a->name);
    bind_blob(st, 2, a->cert_fingerprint, sizeof(a->cert_fingerprint));
    bind_blob(st, 3, a->identity_pk, sizeof(a->identity_pk));
    bind_text(st, 4, a->capabilities);
    pst_bind_i64(st, 5, a->samples);
    pst_bind_i64(st, 6, a->dimension);
    bind_text(st, 7, a->labels);
    pst_bind_i64(st, 8, now);
}

static int pg_agent_upsert(coord_store_t *base_, const coord_agent_row_t *a, int64_t *id)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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
    if (rc == PQ_ROW) {
        uint8_t pk[COORD_KEY_BYTES];

        uint8_t fpr[COORD_FPR_BYTES];

        aid = pst_i64(st, 0);
        if ((rc = col_fixed(st, 1, pk, sizeof(pk), "agents.identity_pk")) != 0 ||
            (rc = col_fixed(st, 2, fpr, sizeof(fpr), "agents.cert_fingerprint")) != 0)
            goto out;
        /* The name is bound to the certificate it first joined with, until
         * the operator revokes that one. */
        if (memcmp(fpr, a->cert_fingerprint, sizeof(fpr)) != 0 && !pst_int(st, 3)) {
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
    if (rc != PQ_DONE)
        goto out;
    done(st);
    if ((rc = stmt(s, ST_AGENT_BY_KEY, &st)) != 0)
        goto out;
    bind_blob(st, 1, a->identity_pk, sizeof(a->identity_pk));
    rc = step(s, st, "store: look up identity key");
    if (rc == PQ_ROW) {
        rc = sfl__fail(-EEXIST,
                       "store: agent '%s': identity key already registered to agent '%.64s'",
                       a->name, (const char *)pst_text(st, 0));
        goto out;
    }
    if (rc != PQ_DONE)
        goto out;
    done(st);
    if ((rc = stmt(s, ST_AGENT_INSERT, &st)) != 0)
        goto out;
    bind_agent(st, a, now);
    rc = exec_stmt(s, st, "insert agent");
    st = NULL;
    if (rc == 0)
        aid = s->last_id;
out:
    done(st);
    rc = end(s, rc);
    if (rc == 0 && id)
        *id = aid;
    return rc;
}

static int pg_cert_revoke(coord_store_t *base_, const uint8_t fpr[COORD_FPR_BYTES],
                            const char *name, int64_t now_ms)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    int rc;

    if (s == NULL || fpr == NULL || name == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = begin(s)) != 0)
        return rc;
    if ((rc = stmt(s, ST_REVOKE, &st)) == 0) {
        bind_blob(st, 1, fpr, COORD_FPR_BYTES);
        bind_text(st, 2, name);
        pst_bind_i64(st, 3, now_ms);
        rc = exec_stmt(s, st, "revoke a certificate");
        st = NULL;
    }
    done(st);
    return end(s, rc);
}

static int read_fpr(pst_t *st, size_t max, void *row)
{
    (void)max;
    return col_fixed(st, 0, row, COORD_FPR_BYTES, "revoked_certs.fingerprint");
}

static int pg_revoked_list(coord_store_t *base_, uint8_t (**out)[COORD_FPR_BYTES],
                             size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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

static int pg_quarantine_add(coord_store_t *base_, int64_t job, int64_t agent, const char *reason,
                               int64_t now_ms)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    int rc;

    if (s == NULL || reason == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(reason, COORD_REASON_MAX, 1, "quarantine reason")) != 0)
        return rc;
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_QUAR_ADD, &st, IDS(job, agent))) == 0) {
        bind_text(st, 3, reason);
        pst_bind_i64(st, 4, now_ms);
        rc = exec_stmt(s, st, "quarantine an agent");
        st = NULL;
    }
    done(st);
    return end(s, rc);
}

static int pg_quarantine_release(coord_store_t *base_, int64_t job, int64_t agent)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = prep(s, ST_QUAR_DEL, &st, IDS(job, agent))) == 0) {
        rc = exec_stmt(s, st, "release a quarantined agent");
        st = NULL;
        if (rc == 0 && pst_changes(s) == 0)
            rc = sfl__fail(SFL_ENOTFOUND, "store: agent %lld is not quarantined in job %lld",
                           (long long)agent, (long long)job);
    }
    done(st);
    return end(s, rc);
}

static int read_quar(pst_t *st, size_t max, void *row)
{
    coord_quar_row_t *q = row;

    (void)max;
    q->job = pst_i64(st, 0);
    q->agent = pst_i64(st, 1);
    q->at_ms = pst_i64(st, 2);
    return col_text(st, 3, q->reason, sizeof(q->reason), "quarantine.reason");
}

static int pg_quarantine_list(coord_store_t *base_, coord_quar_row_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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
static int update_by_id(pg_store_t *s, pst_t *st, const char *what, int64_t id)
{
    int rc = exec_stmt(s, st, what);

    if (rc == 0 && pst_changes(s) == 0)
        rc = sfl__fail(SFL_ENOTFOUND, "store: %s: no agent %lld", what, (long long)id);
    return rc;
}

static int pg_agent_rekey(coord_store_t *base_, int64_t id,
                            const uint8_t identity_pk[COORD_KEY_BYTES])
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL || identity_pk == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, ST_AGENT_REKEY, &st, IDS(id))) != 0)
        return rc;
    bind_blob(st, 2, identity_pk, COORD_KEY_BYTES);
    rc = pst_step(st);
    if ((rc & 0xff) == PQ_CONSTRAINT) {
        rc = sfl__fail(-EEXIST, "store: rekey agent %lld: key already registered to another agent",
                       (long long)id);
        done(st);
        return rc;
    }
    if (rc != PQ_DONE) {
        rc = dberr(s, rc, "store: rekey agent %lld", (long long)id);
        done(st);
        return rc;
    }
    done(st);
    if (pst_changes(s) == 0)
        return sfl__fail(SFL_ENOTFOUND, "store: rekey: no agent %lld", (long long)id);
    return 0;
}

static int pg_agent_touch(coord_store_t *base_, int64_t id)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = prep(s, ST_AGENT_TOUCH, &st, IDS(id, now_ms()))) != 0)
        return rc;
    return update_by_id(s, st, "touch agent", id);
}

static int agent_get(pg_store_t *s, int id_stmt, int64_t id, const char *name,
                     coord_agent_row_t *out)
{
    pst_t *st;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, id_stmt, &st, IDS(id))) != 0)
        return rc;
    if (name)
        bind_text(st, 1, name);
    rc = step(s, st, "store: read agent");
    if (rc == PQ_ROW)
        rc = read_agent(st, 0, out);
    else if (rc == PQ_DONE)
        rc = name ? sfl__fail(SFL_ENOTFOUND, "store: no agent named '%.64s'", name)
                  : sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)id);
    done(st);
    return rc;
}

static int pg_agent_get(coord_store_t *base_, int64_t id, coord_agent_row_t *out)
{
    pg_store_t *s = (pg_store_t *)base_;
    return agent_get(s, ST_AGENT_GET, id, NULL, out);
}

static int pg_agent_get_by_name(coord_store_t *base_, const char *name, coord_agent_row_t *out)
{
    pg_store_t *s = (pg_store_t *)base_;
    if (name == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL name");
    return agent_get(s, ST_AGENT_GET_NAME, 0, name, out);
}

static int pg_agent_list(coord_store_t *base_, coord_agent_row_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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

static void clear_job(void *row)
{
    coord_job_row_clear(row);
}

static int read_job(pst_t *st, size_t max_spec, void *row)
{
    coord_job_row_t *j = row;
    int rc, state = 0;

    memset(j, 0, sizeof(*j));
    j->id = pst_i64(st, 0);
    if ((rc = col_text(st, 1, j->name, sizeof(j->name), "jobs.name")) != 0 ||
        (rc = parse_state(pst_text(st, 2), job_states, NSTATES(job_states),
                          "jobs.state", &state)) != 0)
        return rc;
    j->state = (coord_job_state_t)state;
    j->seed = i64_to_u64(pst_i64(st, 3));
    j->created_ms = pst_i64(st, 4);
    j->last_committed_round = pst_i64(st, 5);
    if (pst_type(st, 7) != PQ_NULL) {
        j->state = COORD_JOB_FAILED;
        if ((rc = col_text(st, 7, j->error, sizeof(j->error), "job_failures.error")) != 0)
            return rc;
    }
    return col_alloc(st, 6, max_spec, &j->spec, &j->spec_len, "jobs.spec");
}

static int pg_job_create(coord_store_t *base_, const char *name, const uint8_t *spec,
                           size_t spec_len, uint64_t seed, int64_t *id)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL || (spec == NULL && spec_len > 0))
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(name, COORD_JOB_NAME_MAX, 1, "job name")) != 0)
        return rc;
    if (s->fence && (rc = begin_fenced(s)) != 0)
        return rc;
    if ((rc = stmt(s, ST_JOB_INSERT, &st)) == 0) {
        bind_text(st, 1, name);
        pst_bind_i64(st, 2, u64_to_i64(seed));
        pst_bind_i64(st, 3, now_ms());
        rc = exec_blob(s, st, 4, spec, spec_len, "insert job", "store: job spec of %zu bytes",
                       spec_len);
    }
    if (rc == 0 && id)
        *id = s->last_id;
    if (s->fence)
        rc = end(s, rc);
    return rc;
}

static int pg_job_get(coord_store_t *base_, int64_t id, size_t max_spec, coord_job_row_t *out)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_JOB_GET, &st, IDS(id))) != 0)
        return rc;
    rc = step(s, st, "store: read job %lld", (long long)id);
    if (rc == PQ_ROW)
        rc = read_job(st, max_spec, out);
    else if (rc == PQ_DONE)
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld", (long long)id);
    done(st);
    if (rc)
        coord_job_row_clear(out);
    return rc;
}

static int pg_job_list(coord_store_t *base_, size_t max_spec, coord_job_row_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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
static int job_state(pg_store_t *s, int64_t job, coord_job_state_t *state, int64_t *last)
{
    pst_t *st;
    int rc, v = 0;

    if ((rc = prep(s, ST_JOB_STATE, &st, IDS(job))) != 0)
        return rc;
    rc = step(s, st, "store: read job %lld", (long long)job);
    if (rc == PQ_ROW) {
        rc = parse_state(pst_text(st, 0), job_states, NSTATES(job_states),
                         "jobs.state", &v);
        *state = pst_int(st, 2) ? COORD_JOB_FAILED : (coord_job_state_t)v;
        *last = pst_i64(st, 1);
    } else if (rc == PQ_DONE) {
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

static int pg_job_set_state(coord_store_t *base_, int64_t id, coord_job_state_t state)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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

static int pg_job_fail(coord_store_t *base_, int64_t id, const char *error, int64_t now_ms)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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
    pst_bind_i64(st, 3, now_ms);
    rc = exec_stmt(s, st, "record a job failure");
    st = NULL;
out:
    done(st);
    return end(s, rc);
}

/* ---- rounds ---------------------------------------------------------- */

static void clear_round(void *row)
{
    coord_round_clear(row);
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

static int read_round(pst_t *st, size_t max_cohort, void *row)
{
    coord_round_row_t *r = row;
    int rc, state = 0;

    memset(r, 0, sizeof(*r));
    r->job_id = pst_i64(st, 0);
    r->round = pst_i64(st, 1);
    r->attempt = pst_i64(st, 2);
    if ((rc = parse_state(pst_text(st, 3), round_states, NSTATES(round_states),
                          "rounds.state", &state)) != 0 ||
        (rc = col_fixed(st, 4, r->nonce, sizeof(r->nonce), "rounds.nonce")) != 0 ||
        (rc = col_text(st, 7, r->reason, sizeof(r->reason), "rounds.reason")) != 0)
        return rc;
    r->state = (coord_srow_state_t)state;
    r->opened_ms = pst_i64(st, 5);
    r->closed_ms = pst_i64(st, 6);

    if (pst_type(st, 8) != PQ_BLOB)
        return sfl__fail(SFL_EPARSE, "store: rounds.cohort is not a blob");
    size_t bytes = (size_t)pst_bytes(st, 8);
    if (bytes % 8 != 0)
        return sfl__fail(SFL_EPARSE, "store: cohort of job %lld round %lld is %zu bytes, "
                                     "not a multiple of 8",
                         (long long)r->job_id, (long long)r->round, bytes);
    size_t n = bytes / 8;
    if (n > max_cohort)
        return sfl__fail(SFL_ELIMIT, "store: cohort of job %lld round %lld has %zu agents, "
                                     "limit %zu",
                         (long long)r->job_id, (long long)r->round, n, max_cohort);
    const uint8_t *p = n ? pst_blob(st, 8) : NULL;
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

static int pg_round_next_attempt(coord_store_t *base_, int64_t job, int64_t round,
                                   int64_t *attempt)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL || attempt == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = prep(s, ST_ROUND_MAX_ATTEMPT, &st, IDS(job, round))) != 0)
        return rc;
    rc = pst_step(st);
    if (rc == PQ_ROW) {
        *attempt = pst_i64(st, 0) + 1;
        rc = 0;
    } else {
        rc = dberr(s, rc, "store: read attempts of job %lld round %lld",
                                (long long)job, (long long)round);
    }
    done(st);
    return rc;
}

static int pg_round_open(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                           const uint8_t nonce[COORD_NONCE_BYTES], const int64_t *cohort,
                           size_t n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    uint8_t *manifest = NULL;
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
    if (rc == PQ_ROW) {
        rc = sfl__fail(SFL_EINVAL, "store: job %lld round %lld attempt %lld is still %s",
                       (long long)job, (long long)round, (long long)pst_i64(st, 0),
                       pst_text(st, 1) ? (const char *)pst_text(st, 1) : "?");
        goto out;
    }
    if (rc != PQ_DONE)
        goto out;
    done(st);
    st = NULL;
    if ((rc = pg_round_next_attempt(&s->base, job, round, &next)) != 0)
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
    pst_bind_i64(st, 5, now);
    rc = exec_blob(s, st, 6, manifest, n * 8, "insert round",
                   "store: cohort manifest of %zu agents", n);
    st = NULL;
    if (rc)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if ((rc = prep(s, ST_PART_SELECTED, &st, IDS(job, round, attempt, cohort[i], now))) != 0)
            goto out;
        rc = pst_step(st);
        if (rc == PQ_FK) {
            rc = sfl__fail(SFL_ENOTFOUND, "store: cohort agent %lld is not a registered agent",
                           (long long)cohort[i]);
            goto out;
        }
        if (rc != PQ_DONE) {
            rc = dberr(s, rc, "store: record selection of agent %lld",
                                    (long long)cohort[i]);
            goto out;
        }
        pst_reset(st);
    }
    rc = 0;
out:
    done(st);
    if (txn)
        rc = end(s, rc);
    sfl__free(manifest);
    return rc;
}

/* Reads the state of one round attempt inside the caller's transaction. */
static int round_state(pg_store_t *s, int64_t job, int64_t round, int64_t attempt,
                       coord_srow_state_t *state)
{
    pst_t *st;
    int rc, v = 0;

    if ((rc = prep(s, ST_ROUND_STATE, &st, IDS(job, round, attempt))) != 0)
        return rc;
    rc = step(s, st, "store: read round state");
    if (rc == PQ_ROW) {
        rc = parse_state(pst_text(st, 0), round_states, NSTATES(round_states),
                         "rounds.state", &v);
        *state = (coord_srow_state_t)v;
    } else if (rc == PQ_DONE) {
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

static int set_round_state(pg_store_t *s, int64_t job, int64_t round, int64_t attempt,
                           coord_srow_state_t state, const char *reason, int64_t now)
{
    pst_t *st;
    int rc;

    if ((rc = prep(s, ST_ROUND_SET_STATE, &st, IDS(job, round, attempt))) != 0)
        return rc;
    bind_text(st, 4, round_states[state]);
    if (state == COORD_SROW_COMMITTED || state == COORD_SROW_FAILED)
        pst_bind_i64(st, 5, now);
    else
        pst_bind_null(st, 5);
    bind_text(st, 6, reason);
    return exec_stmt(s, st, "set round state");
}

static int pg_round_set_state(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                                coord_srow_state_t state, const char *reason)
{
    pg_store_t *s = (pg_store_t *)base_;
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
static void bind_real(pst_t *st, int i, double v)
{
    if (isfinite(v))
        pst_bind_double(st, i, v);
    else
        pst_bind_null(st, i);
}

static int insert_metrics(pg_store_t *s, int64_t job, int64_t round, int64_t attempt,
                          const sfl_round_metrics_t *m)
{
    pst_t *st;
    int rc = prep(s, ST_METRICS_INSERT, &st, IDS(job, round, attempt));

    if (rc)
        return rc;
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].type == SFL_METRIC_F64)
            bind_real(st, 4 + id, sfl_metric_get(id, m));
        else
            pst_bind_i64(st, 4 + id, u64_to_i64(sfl_metric_get_u64(id, m)));
    }
    return exec_stmt(s, st, "insert round metrics");
}

static int pg_round_commit(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                             const uint8_t *model, size_t len,
                             const sfl_round_metrics_t *metrics,
                             uint8_t hash[COORD_HASH_BYTES])
{
    pg_store_t *s = (pg_store_t *)base_;
    static const uint8_t empty[1];
    uint8_t h[COORD_HASH_BYTES];
    pst_t *st = NULL;
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
    pst_bind_i64(st, 4, now);
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

static int pg_round_get(coord_store_t *base_, int64_t job, int64_t round, int64_t attempt,
                          size_t max_cohort, coord_round_row_t *out)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_ROUND_GET, &st, IDS(job, round, attempt))) != 0)
        return rc;
    rc = step(s, st, "store: read round");
    if (rc == PQ_ROW)
        rc = read_round(st, max_cohort, out);
    else if (rc == PQ_DONE)
        rc = sfl__fail(SFL_ENOTFOUND, "store: no job %lld round %lld attempt %lld",
                       (long long)job, (long long)round, (long long)attempt);
    done(st);
    if (rc)
        coord_round_clear(out);
    return rc;
}

static int pg_round_list(coord_store_t *base_, int64_t job, size_t max_cohort,
                           coord_round_row_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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

static int read_history(pst_t *st, size_t max, void *row)
{
    coord_history_row_t *h = row;

    (void)max;
    memset(h, 0, sizeof(*h));
    h->round = pst_i64(st, 0);
    h->attempt = pst_i64(st, 1);
    h->opened_ms = pst_i64(st, 2);
    h->committed_ms = pst_i64(st, 3);
    h->selected = (uint32_t)pst_i64(st, 4);
    h->accepted = (uint32_t)pst_i64(st, 5);
    h->bytes_up = (uint64_t)pst_i64(st, 6);
    /* NULL (no metrics row, a non-finite value, a column added after the
     * round) reads as 0. */
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].type == SFL_METRIC_F64)
            sfl_metric_set(id, &h->m, pst_double(st, 7 + id));
        else
            sfl_metric_set_u64(id, &h->m, (uint64_t)pst_i64(st, 7 + id));
    }
    return 0;
}

static int pg_history(coord_store_t *base_, int64_t job, int64_t after_round, size_t limit,
                        coord_history_row_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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
static int record_part(pg_store_t *s, const coord_part_row_t *p)
{
    pst_t *st = NULL;
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
    pst_bind_i64(st, 7, p->bytes);
    pst_bind_i64(st, 8, p->at_ms ? p->at_ms : now_ms());
    rc = pst_step(st);
    if (rc == PQ_FK) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)p->agent);
        goto out;
    }
    if (rc != PQ_DONE) {
        rc = dberr(s, rc, "store: record participation of agent %lld",
                                (long long)p->agent);
        goto out;
    }
    done(st);
    st = NULL;
    rc = 0;
    if (pst_changes(s) > 0)
        goto out;
    /* The upsert's WHERE kept an earlier outcome: say which. */
    if ((rc = prep(s, ST_PART_STATUS, &st, IDS(p->job, p->round, p->attempt, p->agent))) != 0)
        goto out;
    rc = pst_step(st);
    if (rc == PQ_ROW)
        rc = parse_state(pst_text(st, 0), part_states, NSTATES(part_states),
                         "participation.status", &prev);
    else if (rc == PQ_DONE) /* the insert's guard: no such agent */
        rc = sfl__fail(SFL_ENOTFOUND, "store: no agent %lld", (long long)p->agent);
    else
        rc = dberr(s, rc, "store: read participation");
    if (rc == 0)
        rc = sfl__fail(-EEXIST, "store: agent %lld in job %lld round %lld attempt %lld is "
                                "already recorded as %s",
                       (long long)p->agent, (long long)p->job, (long long)p->round,
                       (long long)p->attempt, part_states[prev]);
out:
    done(st);
    return rc;
}

static int pg_participation_record(coord_store_t *base_, int64_t job, int64_t round,
                                     int64_t attempt, int64_t agent,
                                     coord_part_status_t status, const char *reason,
                                     int64_t bytes)
{
    pg_store_t *s = (pg_store_t *)base_;
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

static int pg_participation_batch(coord_store_t *base_, const coord_part_row_t *rows, size_t n,
                                    size_t *skipped)
{
    pg_store_t *s = (pg_store_t *)base_;
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

static int read_part(pst_t *st, size_t max, void *row)
{
    coord_participation_t *p = row;
    int rc, v = 0;

    (void)max;
    memset(p, 0, sizeof(*p));
    p->agent_id = pst_i64(st, 0);
    if ((rc = parse_state(pst_text(st, 1), part_states, NSTATES(part_states),
                          "participation.status", &v)) != 0 ||
        (rc = col_text(st, 2, p->reason, sizeof(p->reason), "participation.reason")) != 0)
        return rc;
    p->status = (coord_part_status_t)v;
    p->bytes = pst_i64(st, 3);
    p->at_ms = pst_i64(st, 4);
    return 0;
}

static int pg_participation_list(coord_store_t *base_, int64_t job, int64_t round,
                                   int64_t attempt, coord_participation_t **out, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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
static int read_checkpoint(pg_store_t *s, pst_t *st, int64_t job, int64_t asked,
                           size_t max_len, int64_t *round, uint8_t **model, size_t *len,
                           uint8_t hash[COORD_HASH_BYTES])
{
    uint8_t want[COORD_HASH_BYTES], got[COORD_HASH_BYTES];
    int rc = step(s, st, "store: read checkpoint of job %lld", (long long)job);

    if (rc == PQ_DONE && asked == 0)
        return sfl__fail(SFL_ENOTFOUND, "store: no job %lld", (long long)job);
    if (rc == PQ_DONE)
        return sfl__fail(SFL_ENOTFOUND, "store: job %lld has no checkpoint of round %lld",
                         (long long)job, (long long)asked);
    if (rc != PQ_ROW)
        return rc;
    int64_t r = pst_i64(st, 0);
    if (pst_type(st, 1) == PQ_NULL) {
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

static int pg_checkpoint_latest(coord_store_t *base_, int64_t job, size_t max_len, int64_t *round,
                                  uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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

static int pg_checkpoint_get(coord_store_t *base_, int64_t job, int64_t round, size_t max_len,
                               uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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

static int read_round_no(pst_t *st, size_t max, void *row)
{
    (void)max;
    *(int64_t *)row = pst_i64(st, 0);
    return 0;
}

static int pg_checkpoint_rounds(coord_store_t *base_, int64_t job, int64_t **rounds, size_t *n)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
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

static int pg_stats_open(coord_store_t *base_, int64_t job, int64_t attempt)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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

static int pg_stats_commit(coord_store_t *base_, int64_t job, const uint8_t *moments, size_t len,
                             const uint8_t hash[COORD_HASH_BYTES], int64_t rows, int64_t agents)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st = NULL;
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
        if (rc == 0 && pst_changes(s) == 0)
            rc = sfl__fail(SFL_EINVAL, "store: job %lld has no open statistics round (or it "
                           "is already stored)", (long long)job);
    }
    done(st);
    return end(s, rc);
}

static int pg_stats_get(coord_store_t *base_, int64_t job, size_t max, coord_stats_row_t *out)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    memset(out, 0, sizeof(*out));
    if ((rc = prep(s, ST_STATS_GET, &st, IDS(job))) != 0)
        return rc;
    rc = step(s, st, "store: read the statistics of job %lld", (long long)job);
    if (rc == PQ_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: job %lld has no statistics round", (long long)job);
    } else if (rc == PQ_ROW) {
        rc = 0;
        out->attempts = pst_i64(st, 0);
        if (pst_type(st, 5) != PQ_NULL) {
            out->rows = pst_i64(st, 1);
            out->agents = pst_i64(st, 2);
            out->committed_ms = pst_i64(st, 3);
            if ((rc = col_fixed(st, 4, out->hash, COORD_HASH_BYTES,
                                "job_statistics.moments_hash")) == 0)
                rc = col_alloc(st, 5, max, &out->moments, &out->len, "job_statistics.moments");
        }
    }
    done(st);
    return rc;
}


/* ---- open, migrations, checks ---------------------------------------- */

/* sqlite.c's migrations in PostgreSQL's words (BLOB -> bytea, INTEGER ->
 * bigint, REAL -> double precision, AUTOINCREMENT -> identity; the CHECKs
 * and foreign keys kept); same numbering, append only. */
static const char *const migrations[COORD_STORE_SCHEMA_VERSION] = {
    "CREATE TABLE schema_version("
    "  version bigint PRIMARY KEY,"
    "  applied_ms bigint NOT NULL);"
    "CREATE TABLE agents("
    "  id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
    "  name text NOT NULL UNIQUE,"
    "  cert_fingerprint bytea NOT NULL CHECK(length(cert_fingerprint) = 32),"
    "  identity_pk bytea NOT NULL UNIQUE CHECK(length(identity_pk) = 32),"
    "  capabilities text NOT NULL,"
    "  samples bigint NOT NULL CHECK(samples >= 0),"
    "  dimension bigint NOT NULL CHECK(dimension >= 0),"
    "  labels text NOT NULL,"
    "  joined_ms bigint NOT NULL,"
    "  last_seen_ms bigint NOT NULL);"
    "CREATE TABLE jobs("
    "  id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
    "  name text NOT NULL,"
    "  state text NOT NULL CHECK(state IN ('active','paused','cancelled','done')),"
    "  seed bigint NOT NULL,"
    "  created_ms bigint NOT NULL,"
    "  last_committed_round bigint NOT NULL CHECK(last_committed_round >= 0),"
    "  spec bytea NOT NULL);"
    "CREATE TABLE rounds("
    "  job_id bigint NOT NULL REFERENCES jobs(id),"
    "  round bigint NOT NULL CHECK(round >= 1),"
    "  attempt bigint NOT NULL CHECK(attempt >= 1),"
    "  state text NOT NULL CHECK(state IN "
    "    ('selecting','training','aggregating','committed','failed')),"
    "  nonce bytea NOT NULL CHECK(length(nonce) = 32),"
    "  opened_ms bigint NOT NULL,"
    "  closed_ms bigint,"
    "  reason text,"
    "  cohort bytea NOT NULL CHECK(length(cohort) % 8 = 0),"
    "  PRIMARY KEY(job_id, round, attempt));"
    "CREATE UNIQUE INDEX rounds_one_commit ON rounds(job_id, round) "
    "  WHERE state = 'committed';"
    "CREATE TABLE participation("
    "  job_id bigint NOT NULL,"
    "  round bigint NOT NULL,"
    "  attempt bigint NOT NULL,"
    "  agent_id bigint NOT NULL REFERENCES agents(id),"
    "  status text NOT NULL CHECK(status IN "
    "    ('selected','accepted','late','duplicate','rejected')),"
    "  reason text,"
    "  bytes bigint NOT NULL CHECK(bytes >= 0),"
    "  at_ms bigint NOT NULL,"
    "  PRIMARY KEY(job_id, round, attempt, agent_id),"
    "  FOREIGN KEY(job_id, round, attempt) REFERENCES rounds(job_id, round, attempt));"
    "CREATE INDEX participation_agent ON participation(agent_id);"
    "CREATE TABLE checkpoints("
    "  job_id bigint NOT NULL REFERENCES jobs(id),"
    "  round bigint NOT NULL CHECK(round >= 1),"
    "  model_hash bytea NOT NULL CHECK(length(model_hash) = 32),"
    "  created_ms bigint NOT NULL,"
    "  model bytea NOT NULL,"
    "  PRIMARY KEY(job_id, round));",
    "CREATE TABLE round_metrics("
    "  job_id bigint NOT NULL,"
    "  round bigint NOT NULL,"
    "  attempt bigint NOT NULL,"
    "  samples bigint NOT NULL CHECK(samples >= 0),"
    "  train_loss double precision,"
    "  eval_samples bigint NOT NULL CHECK(eval_samples >= 0),"
    "  eval_accuracy double precision,"
    "  eval_mse double precision,"
    "  model_nnz bigint NOT NULL CHECK(model_nnz >= 0),"
    "  bytes_down bigint NOT NULL CHECK(bytes_down >= 0),"
    "  PRIMARY KEY(job_id, round),"
    "  FOREIGN KEY(job_id, round, attempt) REFERENCES rounds(job_id, round, attempt));",
    "CREATE TABLE job_failures("
    "  job_id bigint PRIMARY KEY REFERENCES jobs(id),"
    "  error text NOT NULL,"
    "  failed_ms bigint NOT NULL);"
    "CREATE TABLE revoked_certs("
    "  fingerprint bytea PRIMARY KEY CHECK(length(fingerprint) = 32),"
    "  name text NOT NULL,"
    "  revoked_ms bigint NOT NULL);",
    "ALTER TABLE round_metrics ADD COLUMN personal_accuracy double precision;",
    "ALTER TABLE round_metrics ADD COLUMN privacy_iterations bigint;"
    "ALTER TABLE round_metrics ADD COLUMN privacy_spent double precision;"
    "ALTER TABLE round_metrics ADD COLUMN privacy_spent_rdp double precision;",
    "CREATE TABLE quarantine("
    "  job_id bigint NOT NULL REFERENCES jobs(id),"
    "  agent_id bigint NOT NULL,"
    "  reason text NOT NULL,"
    "  at_ms bigint NOT NULL,"
    "  PRIMARY KEY(job_id, agent_id));",
    "CREATE TABLE job_statistics("
    "  job_id bigint PRIMARY KEY REFERENCES jobs(id),"
    "  attempts bigint NOT NULL CHECK(attempts >= 0),"
    "  rows bigint CHECK(rows >= 0),"
    "  agents bigint CHECK(agents >= 0),"
    "  committed_ms bigint,"
    "  moments_hash bytea CHECK(moments_hash IS NULL OR length(moments_hash) = 32),"
    "  moments bytea CHECK(moments IS NULL OR length(moments) % 8 = 0));",
    "ALTER TABLE round_metrics ADD COLUMN support_churn bigint;",
    "CREATE TABLE leader("
    "  one bigint PRIMARY KEY CHECK(one = 1),"
    "  epoch bigint NOT NULL CHECK(epoch >= 1),"
    "  holder text NOT NULL,"
    "  since_ms bigint NOT NULL);",
};

/* One value of a one-off query (text result) into buf. */
static int query_text(pg_store_t *s, const char *sql, char *buf, size_t cap, int *isnull,
                      const char *what)
{
    PGresult *r = PQexec(s->conn, sql);
    int rc = note_result(s, r);

    if (rc == PQ_OK && (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)) {
        snprintf(s->msg, sizeof(s->msg), "expected one row");
        s->sqlstate[0] = '\0';
        rc = PQ_ERROR;
    }
    if (rc != PQ_OK) {
        PQclear(r);
        return dberr(s, rc, "store: %s", what);
    }
    *isnull = PQgetisnull(r, 0, 0);
    snprintf(buf, cap, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

/* Creates or migrates the schema in the current schema (search_path), in
 * one transaction under an advisory lock: a second process starting at the
 * same time waits, then finds the work done. A schema holding other tables
 * but no schema_version is not an sfl store (SFL_EPARSE, left alone). */
static int migrate(pg_store_t *s, const char *where)
{
    char buf[64];
    int isnull = 0, rc;
    int64_t version = 0;

    if ((rc = exec_sql(s, "BEGIN", "%s: begin migration", where)) != 0)
        return rc;
    if ((rc = exec_sql(s, "SELECT pg_advisory_xact_lock(hashtext(current_schema() || "
                          LOCK_MIGRATE "))",
                       "%s: migration lock", where)) != 0)
        goto out;
    if ((rc = query_text(s, "SELECT to_regclass('schema_version') IS NOT NULL", buf,
                         sizeof(buf), &isnull, "find schema_version")) != 0)
        goto out;
    if (strcmp(buf, "t") != 0) {
        if ((rc = query_text(s, "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                                "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                                "AND c.relkind = 'r'",
                             buf, sizeof(buf), &isnull, "count tables")) != 0)
            goto out;
        if (strcmp(buf, "0") != 0) {
            rc = sfl__fail(SFL_EPARSE, "%s: the schema holds %s tables but no schema_version: "
                                       "not an sfl coordinator store; refusing to modify it",
                           where, buf);
            goto out;
        }
        version = 0;
    } else {
        if ((rc = query_text(s, "SELECT MAX(version) FROM schema_version", buf, sizeof(buf),
                             &isnull, "read schema version")) != 0)
            goto out;
        version = isnull ? 0 : strtoll(buf, NULL, 10);
    }
    if (version > COORD_STORE_SCHEMA_VERSION) {
        rc = sfl__fail(SFL_EUNSUP,
                       "%s: schema version %lld is newer than this coordinator supports "
                       "(%d); refusing to open it (use a newer sfl-coordinator)",
                       where, (long long)version, COORD_STORE_SCHEMA_VERSION);
        goto out;
    }
    if (version < 0) {
        rc = sfl__fail(SFL_EPARSE, "%s: schema version %lld is invalid", where,
                       (long long)version);
        goto out;
    }
    for (int64_t v = version; v < COORD_STORE_SCHEMA_VERSION; v++) {
        char sql[128];

        if ((rc = exec_sql(s, migrations[v], "%s: migration to schema version %lld", where,
                           (long long)v + 1)) != 0)
            goto out;
        snprintf(sql, sizeof(sql),
                 "INSERT INTO schema_version(version, applied_ms) VALUES(%lld, %lld)",
                 (long long)v + 1, (long long)now_ms());
        if ((rc = exec_sql(s, sql, "%s: record schema version", where)) != 0)
            goto out;
    }
out:
    if (rc == 0)
        return exec_sql(s, "COMMIT", "%s: commit migration", where);
    {
        char keep[512];

        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        PGresult *r = PQexec(s->conn, "ROLLBACK");
        PQclear(r);
        sfl__fail(rc, "%s", keep);
    }
    return rc;
}

static void pg_close(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    if (s == NULL)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        PQclear(s->st[i].res);
    PQfinish(s->conn);
    sfl__free(s);
}

static const coord_store_ops_t pg_ops;

/* The conninfo for messages: host, port and dbname only (never a
 * password). */
static void describe(PGconn *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "postgresql %s:%s/%s", PQhost(c) ? PQhost(c) : "?",
             PQport(c) ? PQport(c) : "?", PQdb(c) ? PQdb(c) : "?");
}

int coord__pg_open(const char *conninfo, const coord_store_opts_t *opts, coord_store_t **out)
{
    pg_store_t *s = NULL;
    char where[256];
    int rc;

    if (out == NULL || conninfo == NULL || conninfo[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: the PostgreSQL conninfo is missing");
    *out = NULL;
    if (sodium_init() < 0)
        return sfl__fail(SFL_EIO, "store: libsodium failed to initialise");
    s = sfl__calloc(1, sizeof(*s));
    if (s == NULL)
        return sfl__fail(SFL_ENOMEM, "store: out of memory");
    s->base.ops = &pg_ops;
    s->keep = opts ? opts->keep_checkpoints : DEFAULT_KEEP;
    s->busy_ms = opts && opts->busy_timeout_ms ? opts->busy_timeout_ms : 5000;
    s->relaxed = opts && opts->relaxed_sync;
    for (int i = 0; i < ST_COUNT; i++) {
        s->st[i].row = -1;
        number_params(sql_text[i], s->sql[i], sizeof(s->sql[i]));
    }
    s->conn = PQconnectdb(conninfo);
    if (s->conn == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "store: PostgreSQL: out of memory");
        goto out;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        char masked[512];
        char m[384];

        coord_store_spec_mask(conninfo, masked, sizeof(masked));
        snprintf(m, sizeof(m), "%s", PQerrorMessage(s->conn));
        for (size_t n = strlen(m); n && (m[n - 1] == '\n' || m[n - 1] == ' ');)
            m[--n] = '\0';
        rc = sfl__fail(-ECONNREFUSED, "store: connect to PostgreSQL (%s): %s", masked, m);
        goto out;
    }
    describe(s->conn, where, sizeof(where));
    if ((rc = session_setup(s)) != 0 || (rc = migrate(s, where)) != 0)
        goto out;
    *out = &s->base;
    s = NULL;
out:
    pg_close(s ? &s->base : NULL);
    return rc;
}

static int pg_read_only(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    s->read_only = 1;
    return exec_sql(s, "SET default_transaction_read_only = on", "store: read only");
}

static int pg_batch_begin(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    int rc;

    if (s == NULL || s->batch)
        return sfl__fail(SFL_EINVAL, "store: NULL store or a batch already open");
    if ((rc = simple(s, ST_BEGIN, "begin batch")) == 0)
        s->batch = 1;
    return rc;
}

static int pg_batch_commit(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    if (s == NULL || !s->batch)
        return sfl__fail(SFL_EINVAL, "store: no batch open");
    s->batch = 0;
    if (pst_autocommit(s))
        return sfl__fail(PQstatus(s->conn) == CONNECTION_OK ? SFL_EIO : -ECONNRESET,
                         "store: the batch was rolled back%s",
                         PQstatus(s->conn) == CONNECTION_OK ? ""
                                                            : " (connection to PostgreSQL lost)");
    return end(s, 0);
}

/* What PostgreSQL can check from here: the schema version is this
 * coordinator's, and every constraint (foreign keys, checks) is validated
 * (the server enforces them on every write; pages are its business:
 * data checksums, amcheck). */
static int pg_integrity_check(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    char buf[256];
    int isnull = 0, rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = conn_ok(s)) != 0)
        return rc;
    if ((rc = query_text(s, "SELECT MAX(version) FROM schema_version", buf, sizeof(buf),
                         &isnull, "read schema version")) != 0)
        return rc;
    if (isnull || strtoll(buf, NULL, 10) != COORD_STORE_SCHEMA_VERSION)
        return sfl__fail(SFL_EPARSE, "store: schema version %s, expected %d",
                         isnull ? "none" : buf, COORD_STORE_SCHEMA_VERSION);
    if ((rc = query_text(s, "SELECT COALESCE(string_agg(conrelid::regclass || '.' || conname, "
                            "', '), '') FROM pg_constraint WHERE NOT convalidated AND "
                            "connamespace = current_schema()::regnamespace",
                         buf, sizeof(buf), &isnull, "check constraints")) != 0)
        return rc;
    if (buf[0])
        return sfl__fail(SFL_EPARSE, "store: constraints not validated: %s", buf);
    return 0;
}

static int pg_backup(coord_store_t *base_, const char *dest, uint64_t *bytes)
{
    (void)base_;
    (void)dest;
    if (bytes)
        *bytes = 0;
    return sfl__fail(SFL_EUNSUP, "backup: the store is PostgreSQL: back it up with pg_dump "
                                 "(or the server's own backups), not the coordinator");
}

/* ---- leadership -------------------------------------------------------- */

static int pg_leader_try(coord_store_t *base_, const char *holder, int64_t *epoch)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    char buf[16];
    int isnull = 0, rc;

    if (s == NULL || epoch == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL argument");
    if ((rc = check_text(holder, 127, 1, "leader holder")) != 0)
        return rc;
    if ((rc = conn_ok(s)) != 0)
        return rc;
    if (!s->leads) {
        if ((rc = query_text(s, "SELECT pg_try_advisory_lock(hashtext(current_schema() || "
                                LOCK_LEADER "))",
                             buf, sizeof(buf), &isnull, "take the leader lock")) != 0)
            return rc;
        if (strcmp(buf, "t") != 0)
            return 0;
        s->leads = 1;
    }
    if ((rc = begin(s)) != 0)
        goto fail;
    if ((rc = stmt(s, ST_LEADER_BUMP, &st)) == 0) {
        bind_text(st, 1, holder);
        pst_bind_i64(st, 2, now_ms());
        rc = step(s, st, "store: take leadership");
        if (rc == PQ_ROW) {
            *epoch = pst_i64(st, 0);
            rc = 0;
        } else if (rc >= 0) {
            rc = sfl__fail(SFL_EIO, "store: take leadership: no epoch returned");
        }
        done(st);
    }
    if ((rc = end(s, rc)) != 0)
        goto fail;
    return 1;
fail:
    /* not leading after all: let the lock go (if the session still exists) */
    if (PQstatus(s->conn) == CONNECTION_OK) {
        char keep[512];

        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        PGresult *r = PQexec(s->conn, "SELECT pg_advisory_unlock(hashtext(current_schema() || "
                                      LOCK_LEADER "))");
        PQclear(r);
        sfl__fail(rc, "%s", keep);
    }
    s->leads = 0;
    return rc;
}

static void pg_fence(coord_store_t *base_, int64_t epoch)
{
    ((pg_store_t *)base_)->fence = epoch;
}

static int pg_leader_get(coord_store_t *base_, int64_t *epoch, char holder[128],
                         int64_t *since_ms)
{
    pg_store_t *s = (pg_store_t *)base_;
    pst_t *st;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = stmt(s, ST_LEADER_GET, &st)) != 0)
        return rc;
    rc = step(s, st, "store: read the leader");
    if (rc == PQ_ROW) {
        if (epoch)
            *epoch = pst_i64(st, 0);
        if (since_ms)
            *since_ms = pst_i64(st, 2);
        rc = holder ? col_text(st, 1, holder, 128, "leader holder") : 0;
    } else if (rc == PQ_DONE) {
        rc = sfl__fail(SFL_ENOTFOUND, "store: no round master ever led this store");
    }
    done(st);
    return rc;
}

/* Asks the server: the lock is in pg_locks for this backend, so a
 * connection lost (and maybe re-established) since reads 0. */
static int pg_leader_held(coord_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    char buf[16];
    int isnull = 0;

    if (s == NULL || !s->leads)
        return 0;
    if (PQstatus(s->conn) != CONNECTION_OK ||
        query_text(s, "SELECT EXISTS(SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                      "AND pid = pg_backend_pid() AND granted AND objsubid = 1 AND objid::bigint = "
                      "(hashtext(current_schema() || " LOCK_LEADER ")::bigint & 4294967295))",
                   buf, sizeof(buf), &isnull, "check the leader lock") != 0 ||
        strcmp(buf, "t") != 0) {
        s->leads = 0;
        return 0;
    }
    return 1;
}

static const coord_store_ops_t pg_ops = {
    .backend = "postgresql",
    .read_only = pg_read_only,
    .close = pg_close,
    .batch_begin = pg_batch_begin,
    .batch_commit = pg_batch_commit,
    .integrity_check = pg_integrity_check,
    .recover = pg_recover,
    .backup = pg_backup,
    .leader_try = pg_leader_try,
    .fence = pg_fence,
    .leader_get = pg_leader_get,
    .leader_held = pg_leader_held,
    .agent_upsert = pg_agent_upsert,
    .agent_rekey = pg_agent_rekey,
    .cert_revoke = pg_cert_revoke,
    .revoked_list = pg_revoked_list,
    .quarantine_add = pg_quarantine_add,
    .quarantine_release = pg_quarantine_release,
    .quarantine_list = pg_quarantine_list,
    .stats_open = pg_stats_open,
    .stats_commit = pg_stats_commit,
    .stats_get = pg_stats_get,
    .agent_touch = pg_agent_touch,
    .agent_get = pg_agent_get,
    .agent_get_by_name = pg_agent_get_by_name,
    .agent_list = pg_agent_list,
    .job_create = pg_job_create,
    .job_get = pg_job_get,
    .job_list = pg_job_list,
    .job_set_state = pg_job_set_state,
    .job_fail = pg_job_fail,
    .round_open = pg_round_open,
    .round_next_attempt = pg_round_next_attempt,
    .round_set_state = pg_round_set_state,
    .round_commit = pg_round_commit,
    .history = pg_history,
    .round_get = pg_round_get,
    .round_list = pg_round_list,
    .participation_record = pg_participation_record,
    .participation_batch = pg_participation_batch,
    .participation_list = pg_participation_list,
    .checkpoint_latest = pg_checkpoint_latest,
    .checkpoint_get = pg_checkpoint_get,
    .checkpoint_rounds = pg_checkpoint_rounds,
};

/* The store's PostgreSQL driver (db.h; store.h: coord_store_open with
 * "postgresql:CONNINFO"): the same schema, migrations numbering, error
 * contract and invariants as the SQLite one (db_sqlite.c), the store's
 * logic being one and the same (storelogic.c). A small shim gives libpq
 * the shape of the driver interface (SQLite's statement API: prepare once,
 * bind, step row by row, read columns, reset).
 * What is PostgreSQL's own:
 * - Statements are prepared once per connection (PQprepare, names "sN"),
 *   parameters sent as text apart from bytea (binary), results read in
 *   binary (int8, bool, float8, bytea, text), so no value reaches SQL text.
 * - A transaction is BEGIN ... COMMIT (READ COMMITTED); writes that read
 *   first (round open, commit) are serialised by the leader row's lock
 *   when fenced, and by the database's unique and foreign keys otherwise.
 *   A failed statement aborts PostgreSQL's transaction: a call that goes on
 *   after one (participation rows of a batch) runs it under a savepoint.
 * - Fencing (storelogic.c's begin_fenced: UPDATE leader ... WHERE epoch =
 *   mine, first in every writing transaction): the row lock is held to the
 *   commit, so a newer master's leader_try waits for that transaction, then
 *   every later one of the old master fails with SFL_EFENCED.
 * - Leadership: a session advisory lock keyed by the schema's name; lost
 *   with the connection. A lost connection fails the call (-ECONNRESET
 *   with libpq's message); the next call reconnects (PQreset), re-prepares
 *   and no longer leads (coord_store_leader_held 0).
 * - Migrations run under a transaction-level advisory lock, so two
 *   processes starting at once migrate once. */
#include "store/store.h"
#include "store/store_int.h"
#include "store/db.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>

#include "sfl/core/alloc.h"

#define MAX_PARAMS 32
/* advisory lock keys: hashtext(current_schema() || suffix) */
#define LOCK_MIGRATE "':sfl-migrate'"
#define LOCK_LEADER "':sfl-leader'"

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
    db_stmt_t head; /* first */
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

/* The store's statements in PostgreSQL's words where they differ from the
 * shared text (storelogic.c). */
static const char *const pg_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_SAVEPOINT] = "SAVEPOINT sfl_call",
    [ST_RELEASE] = "RELEASE sfl_call",
    [ST_ROLLBACK_TO] = "ROLLBACK TO sfl_call",
    [ST_LEADER_BUMP] = DB_SQL_LEADER_BUMP("leader.epoch"),
    /* a statistics attempt is counted once opened; a stored sum is final */
    [ST_STATS_OPEN] = "INSERT INTO job_statistics(job_id, attempts) VALUES(?1, ?2) "
                      "ON CONFLICT(job_id) DO UPDATE SET attempts = GREATEST(job_statistics.attempts, ?2) "
                      "WHERE job_statistics.moments IS NULL",
    /* a round's cohort in two statements, not one per member: its first id
     * that is no agent, then every member's SELECTED row (?4: int8[]) */
    [ST_COHORT_MISSING] = "SELECT c FROM unnest(?1::bigint[]) c "
                          "WHERE NOT EXISTS(SELECT 1 FROM agents WHERE id = c) ORDER BY c LIMIT 1",
    [ST_PART_SELECTED_ALL] = "INSERT INTO participation(job_id, round, attempt, agent_id, "
                             "status, reason, bytes, at_ms) "
                             "SELECT ?1::bigint, ?2::bigint, ?3::bigint, c, 'selected', NULL, 0, "
                             "?5::bigint FROM unnest(?4::bigint[]) c",
    [ST_REVOKE] = "INSERT INTO revoked_certs(fingerprint, name, revoked_ms) "
                  "VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING",
    /* the first reason stays: quarantining twice changes nothing */
    [ST_QUAR_ADD] = "INSERT INTO quarantine(job_id, agent_id, reason, at_ms) "
                    "VALUES(?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
    [ST_AGENT_INSERT] = DB_SQL_AGENT_INSERT(" RETURNING id"),
    [ST_JOB_INSERT] = "INSERT INTO jobs(name, state, seed, created_ms, "
                      "last_committed_round, spec) VALUES(?1, 'active', ?2, ?3, 0, ?4) RETURNING id",
    /* no such agent: nothing inserted (a foreign key error would abort the
     * caller's transaction) */
    [ST_PART_RECORD] = DB_SQL_PART_RECORD("SELECT ?1::bigint, ?2::bigint, ?3::bigint, "
                                          "?4::bigint, ?5::text, ?6::text, ?7::bigint, "
                                          "?8::bigint WHERE EXISTS(SELECT 1 FROM agents "
                                          "WHERE id = ?4) "),
};

struct pg_store {
    db_store_t base; /* first: a coord_store_t * is a db_store_t * is a pg_store_t * */
    PGconn *conn;
    pst_t st[ST_COUNT];
    unsigned char prepared[ST_COUNT]; /* prepared on this connection */
    char sql[ST_COUNT][2048 + 512];   /* the statements, $N-numbered */
    int read_only;                    /* coord_store_read_only */
    unsigned busy_ms;
    int relaxed;
    int64_t changes; /* rows the last command changed */
    int64_t last_id; /* the last "RETURNING id" */
    char sqlstate[6];
    char msg[384];   /* the last error's libpq message */
};

static const db_driver_t pg_driver;

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

/* Keeps the failed result's SQLSTATE and message in s; PGRES_* -> DB_*. */
static int note_result(pg_store_t *s, PGresult *res)
{
    ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK) {
        const char *t = res ? PQcmdTuples(res) : "";

        s->changes = t && *t ? strtoll(t, NULL, 10) : 0;
        return DB_OK;
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
        return DB_FK;
    if (strncmp(s->sqlstate, "23", 2) == 0)
        return DB_CONSTRAINT;
    return DB_ERROR;
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
    if (rc == DB_TOOBIG)
        return sfl__fail(SFL_ELIMIT, "%s: value too big for PostgreSQL (bytea: at most 1 GB)",
                         ctx);
    if (s->conn == NULL || PQstatus(s->conn) == CONNECTION_BAD || strncmp(st, "08", 2) == 0 ||
        strncmp(st, "57P", 3) == 0)
        return sfl__fail(-ECONNRESET, "%s: connection to PostgreSQL lost: %s (the next call "
                                      "reconnects)",
                         ctx, s->msg[0] ? s->msg : PQerrorMessage(s->conn));
    if ((rc & 0xff) == DB_CONSTRAINT)
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
    else if (strncmp(st, "42", 2) == 0)
        err = SFL_EPARSE;
    else if (strncmp(st, "22", 2) == 0) /* a value the server refuses: bad UTF-8 ... */
        err = SFL_EINVAL;
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
    return rc == DB_OK ? 0 : dberr(s, rc, "store: session settings");
}

/* A lost connection is re-established here, before the next statement:
 * the prepared statements are gone with it, and so is the advisory lock. */
static int conn_ok(pg_store_t *s)
{
    if (PQstatus(s->conn) == CONNECTION_OK)
        return 0;
    s->base.leads = 0;
    s->base.lost = 1; /* a batch open on the old session is gone (batch_commit says so) */
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

/* The statement id, prepared on this connection on first use (PQprepare,
 * name "sN"); reconnects first when the connection was lost. */
static int pg_stmt(db_store_t *base, int id, db_stmt_t **out)
{
    pg_store_t *s = (pg_store_t *)base;
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
        if (rc != DB_OK)
            return dberr(s, rc, "store: prepare statement %d", id);
        s->prepared[id] = 1;
    }
    /* a fresh use: no result or parameters left from the last one */
    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
    st->nparams = 0;
    memset(st->val, 0, sizeof(st->val)); /* unbound parameters are NULL, as in SQLite */
    memset(st->len, 0, sizeof(st->len));
    memset(st->fmt, 0, sizeof(st->fmt));
    st->head.drv = &pg_driver;
    st->s = s;
    st->id = id;
    *out = &st->head;
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

static int pg_bind_i64(db_stmt_t *st_, int i, int64_t v)
{
    pst_t *st = (pst_t *)st_;

    if (i < 1 || i > MAX_PARAMS)
        return DB_ERROR;
    snprintf(st->num[i - 1], sizeof(st->num[0]), "%" PRId64, v);
    set_param(st, i, st->num[i - 1], 0, 0);
    return DB_OK;
}

static int pg_bind_double(db_stmt_t *st_, int i, double v)
{
    pst_t *st = (pst_t *)st_;

    if (i < 1 || i > MAX_PARAMS)
        return DB_ERROR;
    if (isnan(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "NaN");
    else if (isinf(v))
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%sInfinity", v < 0 ? "-" : "");
    else
        snprintf(st->num[i - 1], sizeof(st->num[0]), "%.17g", v);
    set_param(st, i, st->num[i - 1], 0, 0);
    return DB_OK;
}

static int pg_bind_null(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    set_param(st, i, NULL, 0, 0);
    return DB_OK;
}

/* Runs st on its first step; then returns its rows one by one. */
static int pg_step(db_stmt_t *st_)
{
    pst_t *st = (pst_t *)st_;

    pg_store_t *s = st->s;

    if (st->row < 0) {
        char name[16];

        snprintf(name, sizeof(name), "s%d", st->id);
        PQclear(st->res);
        st->res = PQexecPrepared(s->conn, name, st->nparams, st->val, st->len, st->fmt, 1);
        int rc = note_result(s, st->res);
        if (rc != DB_OK) {
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
            s->last_id = db_u64_to_i64(v);
        }
    } else {
        st->row++;
    }
    if (PQresultStatus(st->res) == PGRES_TUPLES_OK && st->row < PQntuples(st->res))
        return DB_ROW;
    return DB_DONE;
}

/* Drops the result and the bindings. */
static void pg_reset(db_stmt_t *st_)
{
    pst_t *st = (pst_t *)st_;

    PQclear(st->res);
    st->res = NULL;
    st->row = -1;
    st->nparams = 0;
}

/* bytea goes binary; a zero-length one must not be NULL. */
static int pg_bind_blob(db_stmt_t *st_, int i, const void *p, size_t n)
{
    pst_t *st = (pst_t *)st_;

    if (n > INT_MAX)
        return DB_TOOBIG;
    set_param(st, i, n ? (const char *)p : "", (int)n, 1);
    return DB_OK;
}

static int pg_bind_text(db_stmt_t *st_, int i, const char *t)
{
    set_param((pst_t *)st_, i, t, 0, 0);
    return DB_OK;
}

static int pg_type(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    if (st->res == NULL || st->row < 0 || PQgetisnull(st->res, st->row, i))
        return DB_NULL;
    switch (PQftype(st->res, i)) {
    case OID_BYTEA: return DB_BLOB;
    case OID_TEXT:
    case OID_VARCHAR: return DB_TEXT;
    case OID_FLOAT4:
    case OID_FLOAT8: return DB_FLOAT;
    default: return DB_INTEGER;
    }
}

/* Integers of any width, bool as 0/1; NULL (or another type) reads 0. */
static int64_t pg_col_i64(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    if (pg_type(&st->head, i) != DB_INTEGER)
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
    return db_u64_to_i64(v);
}

static double pg_col_double(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    int t = pg_type(&st->head, i);

    if (t == DB_INTEGER)
        return (double)pg_col_i64(&st->head, i);
    if (t != DB_FLOAT)
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

static const unsigned char *pg_col_text(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    if (pg_type(&st->head, i) == DB_NULL)
        return NULL;
    return (const unsigned char *)PQgetvalue(st->res, st->row, i);
}

static const void *pg_col_blob(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    if (pg_type(&st->head, i) == DB_NULL)
        return NULL;
    return PQgetvalue(st->res, st->row, i);
}

static int pg_col_bytes(db_stmt_t *st_, int i)
{
    pst_t *st = (pst_t *)st_;

    if (pg_type(&st->head, i) == DB_NULL)
        return 0;
    return PQgetlength(st->res, st->row, i);
}

static int64_t pg_changes(db_store_t *s)
{
    return ((pg_store_t *)s)->changes;
}

static int64_t pg_last_id(db_store_t *s)
{
    return ((pg_store_t *)s)->last_id;
}

/* Outside any transaction (SQLite's autocommit mode)? A lost connection
 * has no transaction either. */
static int pg_autocommit(db_store_t *base)
{
    pg_store_t *s = (pg_store_t *)base;

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
    if (rc == DB_OK)
        return 0;
    va_start(ap, fmt);
    rc = vdberr(s, rc, fmt, ap);
    va_end(ap);
    return rc;
}

/* db_sqlite.c's migrations in PostgreSQL's words (BLOB -> bytea, INTEGER ->
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
    "CREATE TABLE masters("
    "  holder text PRIMARY KEY,"
    "  role text NOT NULL CHECK(role IN ('single', 'leader', 'standby')),"
    "  epoch bigint NOT NULL CHECK(epoch >= 0),"
    "  pid bigint NOT NULL,"
    "  host text NOT NULL,"
    "  started_ms bigint NOT NULL,"
    "  seen_ms bigint NOT NULL);",
};

/* One value of a one-off query (text result) into buf. */
static int query_text(pg_store_t *s, const char *sql, char *buf, size_t cap, int *isnull,
                      const char *what)
{
    PGresult *r = PQexec(s->conn, sql);
    int rc = note_result(s, r);

    if (rc == DB_OK && (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)) {
        snprintf(s->msg, sizeof(s->msg), "expected one row");
        s->sqlstate[0] = '\0';
        rc = DB_ERROR;
    }
    if (rc != DB_OK) {
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
    if ((rc = coord__db_version_ok(where, version)) != 0)
        goto out;
    for (int64_t v = version; v < COORD_STORE_SCHEMA_VERSION; v++) {
        char sql[128];

        if ((rc = exec_sql(s, migrations[v], "%s: migration to schema version %lld", where,
                           (long long)v + 1)) != 0)
            goto out;
        snprintf(sql, sizeof(sql),
                 "INSERT INTO schema_version(version, applied_ms) VALUES(%lld, %lld)",
                 (long long)v + 1, (long long)coord__db_now_ms());
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

/* The results and the connection (coord__db_close frees the store). */
static void pg_close(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    for (int i = 0; i < ST_COUNT; i++)
        PQclear(s->st[i].res);
    PQfinish(s->conn);
}

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
    db_store_t *b;
    char where[256];
    int rc;

    if (out == NULL || conninfo == NULL || conninfo[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: the PostgreSQL conninfo is missing");
    *out = NULL;
    if ((rc = coord__db_alloc(sizeof(*s), &pg_driver, opts, &b)) != 0)
        return rc;
    s = (pg_store_t *)b;
    s->busy_ms = opts && opts->busy_timeout_ms ? opts->busy_timeout_ms : 5000;
    s->relaxed = opts && opts->relaxed_sync;
    for (int i = 0; i < ST_COUNT; i++) {
        s->st[i].row = -1;
        number_params(pg_sql[i] ? pg_sql[i] : coord__db_sql[i], s->sql[i], sizeof(s->sql[i]));
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
    *out = &s->base.base;
    s = NULL;
out:
    coord__db_close(s ? &s->base : NULL);
    return rc;
}

static int pg_read_only(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    s->read_only = 1;
    return exec_sql(s, "SET default_transaction_read_only = on", "store: read only");
}

/* The batch's transaction is gone: rolled back, or with the connection. */
static int pg_batch_gone(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    int lost = s->base.lost || PQstatus(s->conn) != CONNECTION_OK;

    if (!pg_autocommit(base_))
        PQclear(PQexec(s->conn, "ROLLBACK"));
    return sfl__fail(lost ? -ECONNRESET : SFL_EIO, "store: the batch was rolled back%s",
                     lost ? " (the connection to PostgreSQL was lost)" : "");
}

/* What PostgreSQL can check from here: the schema version is this
 * coordinator's, and every constraint (foreign keys, checks) is validated
 * (the server enforces them on every write; pages are its business:
 * data checksums, amcheck). */
static int pg_integrity_check(db_store_t *base_)
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

/* The leader lock: a session advisory lock keyed by the schema's name,
 * lost with the connection (reconnecting first when it was lost). */
static int pg_leader_lock(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    char buf[16];
    int isnull = 0, rc;

    if ((rc = conn_ok(s)) != 0)
        return rc;
    if (!s->base.leads) {
        if ((rc = query_text(s, "SELECT pg_try_advisory_lock(hashtext(current_schema() || "
                                LOCK_LEADER "))",
                             buf, sizeof(buf), &isnull, "take the leader lock")) != 0)
            return rc;
        if (strcmp(buf, "t") != 0)
            return 0;
        s->base.leads = 1;
    }
    return 1;
}

/* Not leading after all: lets the lock go (if the session still exists),
 * keeping the error that made it so. */
static void pg_leader_release(db_store_t *base_, int rc)
{
    pg_store_t *s = (pg_store_t *)base_;

    if (PQstatus(s->conn) == CONNECTION_OK) {
        char keep[512];

        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        PGresult *r = PQexec(s->conn, "SELECT pg_advisory_unlock(hashtext(current_schema() || "
                                      LOCK_LEADER "))");
        PQclear(r);
        sfl__fail(rc, "%s", keep);
    }
}

/* Asks the server: the lock is in pg_locks for this backend, so a
 * connection lost (and maybe re-established) since reads 0. */
static int pg_leader_held(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;
    char buf[16];
    int isnull = 0;

    if (s == NULL || !s->base.leads)
        return 0;
    if (PQstatus(s->conn) != CONNECTION_OK ||
        query_text(s, "SELECT EXISTS(SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                      "AND pid = pg_backend_pid() AND granted AND objsubid = 1 AND objid::bigint = "
                      "(hashtext(current_schema() || " LOCK_LEADER ")::bigint & 4294967295))",
                   buf, sizeof(buf), &isnull, "check the leader lock") != 0 ||
        strcmp(buf, "t") != 0) {
        s->base.leads = 0;
        return 0;
    }
    return 1;
}

/* COMMIT of a transaction in which a statement failed is a silent ROLLBACK
 * in PostgreSQL: such a transaction is a failure, never committed. */
static int pg_txn_failed(db_store_t *base_)
{
    pg_store_t *s = (pg_store_t *)base_;

    if (PQtransactionStatus(s->conn) != PQTRANS_INERROR)
        return 0;
    return sfl__fail(SFL_EIO, "store: a statement of the transaction failed (%s): rolled back",
                     s->msg[0] ? s->msg : "?");
}

/* 23505: unique_violation (READ COMMITTED: another session inserted the
 * same key after this transaction's look-up). */
static int pg_unique_violation(db_store_t *base_)
{
    return strcmp(((pg_store_t *)base_)->sqlstate, "23505") == 0;
}

static void pg_clear_error(db_store_t *base_)
{
    ((pg_store_t *)base_)->sqlstate[0] = '\0';
}

static int pg_verr(db_store_t *s, int rc, const char *fmt, va_list ap)
{
    return vdberr((pg_store_t *)s, rc, fmt, ap);
}

static const db_driver_t pg_driver = {
    DB_DRIVER(pg, "postgresql", "{}"),
    .backup = pg_backup,
    .txn_failed = pg_txn_failed,
    .unique_violation = pg_unique_violation,
    .clear_error = pg_clear_error,
    .leader_lock = pg_leader_lock,
    .leader_release = pg_leader_release,
    .leader_held = pg_leader_held,
};

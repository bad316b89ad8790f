#include "store/store.h"
#include "store/store_int.h"
#include "store/db.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>


#include <sqlite3.h>

#include "sfl/core/alloc.h"

/* Durability model. WAL mode: a transaction is committed once its commit
 * frame is in the -wal file; with synchronous=FULL that file is fsynced at
 * every commit, so a commit that returned survives power loss, and a process
 * killed at any instruction leaves either the whole transaction or none of
 * it. Every multi-row change (round open, round commit, migrations) is one
 * BEGIN IMMEDIATE transaction: IMMEDIATE takes the write lock up front, so a
 * read-then-write never fails half way with SQLITE_BUSY, and the busy
 * handler (busy_timeout) applies to it.
 *
 * Values never reach SQL text: every statement is a constant prepared once
 * (lazily, SQLITE_PREPARE_PERSISTENT) with ?N parameters. Big blobs (spec,
 * cohort, model) are the last column of their table, so reading the small
 * columns never walks a blob's overflow pages. */


/* Migration i takes the schema from version i to i + 1; append only. Each
 * runs inside the open transaction together with its schema_version row, so
 * a crash mid-migration leaves the previous version intact. */
static const char *const migrations[COORD_STORE_SCHEMA_VERSION] = {
    "CREATE TABLE schema_version("
    "  version INTEGER PRIMARY KEY,"
    "  applied_ms INTEGER NOT NULL);"
    "CREATE TABLE agents("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  name TEXT NOT NULL UNIQUE,"
    "  cert_fingerprint BLOB NOT NULL CHECK(length(cert_fingerprint) = 32),"
    "  identity_pk BLOB NOT NULL UNIQUE CHECK(length(identity_pk) = 32),"
    "  capabilities TEXT NOT NULL,"
    "  samples INTEGER NOT NULL CHECK(samples >= 0),"
    "  dimension INTEGER NOT NULL CHECK(dimension >= 0),"
    "  labels TEXT NOT NULL,"
    "  joined_ms INTEGER NOT NULL,"
    "  last_seen_ms INTEGER NOT NULL);"
    "CREATE TABLE jobs("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  name TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK(state IN ('active','paused','cancelled','done')),"
    "  seed INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  last_committed_round INTEGER NOT NULL CHECK(last_committed_round >= 0),"
    "  spec BLOB NOT NULL);"
    "CREATE TABLE rounds("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),"
    "  round INTEGER NOT NULL CHECK(round >= 1),"
    "  attempt INTEGER NOT NULL CHECK(attempt >= 1),"
    "  state TEXT NOT NULL CHECK(state IN "
    "    ('selecting','training','aggregating','committed','failed')),"
    "  nonce BLOB NOT NULL CHECK(length(nonce) = 32),"
    "  opened_ms INTEGER NOT NULL,"
    "  closed_ms INTEGER,"
    "  reason TEXT,"
    "  cohort BLOB NOT NULL CHECK(length(cohort) % 8 = 0),"
    "  PRIMARY KEY(job_id, round, attempt));"
    /* At most one committed attempt per round, whatever the code does. */
    "CREATE UNIQUE INDEX rounds_one_commit ON rounds(job_id, round) "
    "  WHERE state = 'committed';"
    "CREATE TABLE participation("
    "  job_id INTEGER NOT NULL,"
    "  round INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  agent_id INTEGER NOT NULL REFERENCES agents(id),"
    "  status TEXT NOT NULL CHECK(status IN "
    "    ('selected','accepted','late','duplicate','rejected')),"
    "  reason TEXT,"
    "  bytes INTEGER NOT NULL CHECK(bytes >= 0),"
    "  at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(job_id, round, attempt, agent_id),"
    "  FOREIGN KEY(job_id, round, attempt) REFERENCES rounds(job_id, round, attempt));"
    "CREATE INDEX participation_agent ON participation(agent_id);"
    "CREATE TABLE checkpoints("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),"
    "  round INTEGER NOT NULL CHECK(round >= 1),"
    "  model_hash BLOB NOT NULL CHECK(length(model_hash) = 32),"
    "  created_ms INTEGER NOT NULL,"
    "  model BLOB NOT NULL,"
    "  PRIMARY KEY(job_id, round));"
    "PRAGMA application_id = 1936092259;", /* APPLICATION_ID */
    /* 2: what each committed round's updates reported (training progress).
     * A table of its own rather than columns of rounds, whose cohort blob
     * stays the last column. Metrics are NULL-able: a NULL reads as 0. */
    "CREATE TABLE round_metrics("
    "  job_id INTEGER NOT NULL,"
    "  round INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL,"
    "  samples INTEGER NOT NULL CHECK(samples >= 0),"
    "  train_loss REAL,"
    "  eval_samples INTEGER NOT NULL CHECK(eval_samples >= 0),"
    "  eval_accuracy REAL,"
    "  eval_mse REAL,"
    "  model_nnz INTEGER NOT NULL CHECK(model_nnz >= 0),"
    "  bytes_down INTEGER NOT NULL CHECK(bytes_down >= 0),"
    "  PRIMARY KEY(job_id, round),"
    "  FOREIGN KEY(job_id, round, attempt) REFERENCES rounds(job_id, round, attempt));",
    /* 2 -> 3: a job that failed (its model could not be restored) stays
     * failed across restarts. */
    "CREATE TABLE job_failures("
    "  job_id INTEGER PRIMARY KEY REFERENCES jobs(id),"
    "  error TEXT NOT NULL,"
    "  failed_ms INTEGER NOT NULL);"
    /* ... and certificates revoked by the operator are refused for good;
     * an agent whose certificate was revoked binds its next one. */
    "CREATE TABLE revoked_certs("
    "  fingerprint BLOB PRIMARY KEY CHECK(length(fingerprint) = 32),"
    "  name TEXT NOT NULL,"
    "  revoked_ms INTEGER NOT NULL);",
    /* 3 -> 4: a personalized algorithm's second figure, the agents' own
     * models on their held-out rows (NULL, read as 0, for older rounds). */
    "ALTER TABLE round_metrics ADD COLUMN personal_accuracy REAL;",
    /* 4 -> 5: a private vertical job's ledger at each commit (NULL, read
     * as 0, for older rounds and other jobs). */
    "ALTER TABLE round_metrics ADD COLUMN privacy_iterations INTEGER;"
    "ALTER TABLE round_metrics ADD COLUMN privacy_spent REAL;"
    "ALTER TABLE round_metrics ADD COLUMN privacy_spent_rdp REAL;",
    /* 5 -> 6: members quarantined for a job (a secure-aggregation round
     * named them as the cause of its failure): never selected for that job
     * again until an operator releases them (docs/security.md). No
     * foreign key on agent_id: the culprit is named by the protocol, and
     * the row must be written even when the agent row is not (yet) there. */
    "CREATE TABLE quarantine("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),"
    "  agent_id INTEGER NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(job_id, agent_id));",
    /* 6 -> 7: a standardize job's statistics round (docs/protocol.md):
     * the attempts opened (numbered on across restarts, like a round's),
     * then, once committed, the pooled moments (1 + 2 d little-endian
     * float64s, last: a blob), their hash, the rows and agents pooled. A
     * table of its own: rounds start at 1. */
    "CREATE TABLE job_statistics("
    "  job_id INTEGER PRIMARY KEY REFERENCES jobs(id),"
    "  attempts INTEGER NOT NULL CHECK(attempts >= 0),"
    "  rows INTEGER CHECK(rows >= 0),"
    "  agents INTEGER CHECK(agents >= 0),"
    "  committed_ms INTEGER,"
    "  moments_hash BLOB CHECK(moments_hash IS NULL OR length(moments_hash) = 32),"
    "  moments BLOB CHECK(moments IS NULL OR length(moments) % 8 = 0));",
    /* 7 -> 8: a horizontal round's support churn (NULL, read as 0, for
     * older rounds). */
    "ALTER TABLE round_metrics ADD COLUMN support_churn INTEGER;",
    /* 8 -> 9: the round master's leadership (coord_store_leader_try): one
     * row; a master fences its writes with the epoch it took. */
    "CREATE TABLE leader("
    "  one INTEGER PRIMARY KEY CHECK(one = 1),"
    "  epoch INTEGER NOT NULL CHECK(epoch >= 1),"
    "  holder TEXT NOT NULL,"
    "  since_ms INTEGER NOT NULL);",
    /* 9 -> 10: the coordinator processes sharing the store (sflctl
     * fleet): each writes its own row, never fenced. */
    "CREATE TABLE masters("
    "  holder TEXT PRIMARY KEY,"
    "  role TEXT NOT NULL CHECK(role IN ('single', 'leader', 'standby')),"
    "  epoch INTEGER NOT NULL CHECK(epoch >= 0),"
    "  pid INTEGER NOT NULL,"
    "  host TEXT NOT NULL,"
    "  started_ms INTEGER NOT NULL,"
    "  seen_ms INTEGER NOT NULL);",
};


/* The store's SQLite statements where they differ from the shared text
 * (storelogic.c): a cohort as a JSON array "[1,2,3]" (json_each). */
static const char *const sq_sql[ST_COUNT] = {
    [ST_COHORT_MISSING] = "SELECT value FROM json_each(?1) "
                          "WHERE NOT EXISTS(SELECT 1 FROM agents WHERE id = value) "
                          "ORDER BY value LIMIT 1",
    [ST_PART_SELECTED_ALL] = "INSERT INTO participation(job_id, round, attempt, agent_id, "
                             "status, reason, bytes, at_ms) "
                             "SELECT ?1, ?2, ?3, value, 'selected', NULL, 0, ?5 "
                             "FROM json_each(?4)",
};

typedef struct {
    db_stmt_t head;
    sqlite3_stmt *st;
} sq_stmt_t;

typedef struct sq_store {
    db_store_t base; /* first: a coord_store_t * is a db_store_t * is a sq_store_t * */
    sqlite3 *db;
    sq_stmt_t st[ST_COUNT];
} sq_store_t;

static const db_driver_t sq_driver;

static sqlite3_stmt *S(db_stmt_t *st)
{
    return ((sq_stmt_t *)st)->st;
}

static const char *rc_name(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_ERROR: return "SQLITE_ERROR";
    case SQLITE_PERM: return "SQLITE_PERM";
    case SQLITE_BUSY: return "SQLITE_BUSY";
    case SQLITE_LOCKED: return "SQLITE_LOCKED";
    case SQLITE_NOMEM: return "SQLITE_NOMEM";
    case SQLITE_READONLY: return "SQLITE_READONLY";
    case SQLITE_IOERR: return "SQLITE_IOERR";
    case SQLITE_CORRUPT: return "SQLITE_CORRUPT";
    case SQLITE_FULL: return "SQLITE_FULL";
    case SQLITE_CANTOPEN: return "SQLITE_CANTOPEN";
    case SQLITE_TOOBIG: return "SQLITE_TOOBIG";
    case SQLITE_CONSTRAINT: return "SQLITE_CONSTRAINT";
    case SQLITE_MISUSE: return "SQLITE_MISUSE";
    case SQLITE_NOTADB: return "SQLITE_NOTADB";
    default: return "SQLITE_?";
    }
}

/* Records "<context>: <sqlite message> (SQLITE_X)" and maps rc to an sfl
 * code or -errno. Call before anything else touches the connection, which
 * would replace sqlite3_errmsg. */
static int vdberr(sqlite3 *db, int rc, const char *fmt, va_list ap) SFL_PRINTF(3, 0);
static int vdberr(sqlite3 *db, int rc, const char *fmt, va_list ap)
{
    char ctx[256];
    int err, sys = db ? sqlite3_system_errno(db) : 0;

    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    switch (rc & 0xff) {
    case SQLITE_NOMEM: err = SFL_ENOMEM; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: err = -EBUSY; break;
    case SQLITE_FULL: err = -ENOSPC; break;
    case SQLITE_READONLY: err = -EROFS; break;
    case SQLITE_PERM: err = -EACCES; break;
    case SQLITE_CANTOPEN: err = sys > 0 ? -sys : SFL_EIO; break;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: err = SFL_EPARSE; break;
    case SQLITE_CONSTRAINT: err = SFL_EINVAL; break;
    case SQLITE_TOOBIG: err = SFL_ELIMIT; break;
    default: err = SFL_EIO; break;
    }
    if (sys > 0 && ((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN))
        return sfl__fail(err, "%s: %s (%s, %s)", ctx, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                         rc_name(rc), strerror(sys));
    return sfl__fail(err, "%s: %s (%s)", ctx, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                     rc_name(rc));
}

int coord__store_dberr(sqlite3 *db, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = vdberr(db, rc, fmt, ap);
    va_end(ap);
    return rc;
}


static int sq_verr(db_store_t *s, int rc, const char *fmt, va_list ap)
{
    return vdberr(((sq_store_t *)s)->db, rc, fmt, ap);
}

/* Returns the prepared statement id, prepared on first use. */
static int sq_stmt(db_store_t *base, int id, db_stmt_t **out)
{
    sq_store_t *s = (sq_store_t *)base;
    const char *sql = sq_sql[id] ? sq_sql[id] : coord__db_sql[id];

    *out = NULL;
    if (s->st[id].st == NULL) {
        int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st[id].st,
                                    NULL);
        if (rc != SQLITE_OK)
            return coord__store_dberr(s->db, rc, "store: prepare statement %d", id);
        s->st[id].head.drv = &sq_driver;
    }
    *out = &s->st[id].head;
    return 0;
}

static int sq_bind_i64(db_stmt_t *st, int i, int64_t v)
{
    return sqlite3_bind_int64(S(st), i, v);
}

static int sq_bind_double(db_stmt_t *st, int i, double v)
{
    return sqlite3_bind_double(S(st), i, v);
}

static int sq_bind_null(db_stmt_t *st, int i)
{
    return sqlite3_bind_null(S(st), i);
}

static int sq_bind_text(db_stmt_t *st, int i, const char *t)
{
    if (t == NULL)
        return sqlite3_bind_null(S(st), i);
    return sqlite3_bind_text(S(st), i, t, -1, SQLITE_STATIC);
}

/* A zero-length blob must not be bound as NULL (a NULL pointer does that). */
static int sq_bind_blob(db_stmt_t *st, int i, const void *p, size_t n)
{
    if (n == 0)
        return sqlite3_bind_zeroblob(S(st), i, 0);
    return sqlite3_bind_blob64(S(st), i, p, (sqlite3_uint64)n, SQLITE_STATIC);
}

static int sq_step(db_stmt_t *st)
{
    return sqlite3_step(S(st));
}

/* Releases the statement's read snapshot and bindings. */
static void sq_reset(db_stmt_t *st)
{
    sqlite3_reset(S(st));
    sqlite3_clear_bindings(S(st));
}

static int sq_type(db_stmt_t *st, int i)
{
    return sqlite3_column_type(S(st), i);
}

static int64_t sq_col_i64(db_stmt_t *st, int i)
{
    return sqlite3_column_int64(S(st), i);
}

static double sq_col_double(db_stmt_t *st, int i)
{
    return sqlite3_column_double(S(st), i);
}

static const unsigned char *sq_col_text(db_stmt_t *st, int i)
{
    return sqlite3_column_text(S(st), i);
}

static const void *sq_col_blob(db_stmt_t *st, int i)
{
    return sqlite3_column_blob(S(st), i);
}

static int sq_col_bytes(db_stmt_t *st, int i)
{
    return sqlite3_column_bytes(S(st), i);
}

static int64_t sq_changes(db_store_t *s)
{
    return sqlite3_changes(((sq_store_t *)s)->db);
}

static int64_t sq_last_id(db_store_t *s)
{
    return sqlite3_last_insert_rowid(((sq_store_t *)s)->db);
}

static int sq_autocommit(db_store_t *s)
{
    return sqlite3_get_autocommit(((sq_store_t *)s)->db);
}


sqlite3 *coord__store_db(coord_store_t *s)
{
    return ((sq_store_t *)s)->db;
}

/* ---- open, migrations, checks ---------------------------------------- */

int coord__store_once(sqlite3 *db, const char *sql, int want_row, sqlite3_stmt **st,
                      const char *fmt, ...)
{
    va_list ap;
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);

    if (rc == SQLITE_OK)
        rc = sqlite3_step(*st);
    if (rc == SQLITE_ROW || (rc == SQLITE_DONE && !want_row))
        return rc;
    va_start(ap, fmt);
    rc = vdberr(db, rc == SQLITE_DONE ? SQLITE_ERROR : rc, fmt, ap);
    va_end(ap);
    return rc;
}

int coord__store_pragma_int(sqlite3 *db, const char *sql, int64_t *v)
{
    sqlite3_stmt *st = NULL;
    int rc = coord__store_once(db, sql, 1, &st, "store: %s", sql);

    if (rc == SQLITE_ROW) {
        *v = sqlite3_column_int64(st, 0);
        rc = 0;
    }
    sqlite3_finalize(st);
    return rc;
}

int coord__store_pragma_ok(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int rc = coord__store_once(db, sql, 1, &st, "store: %s", sql);

    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (t && strcmp((const char *)t, "ok") == 0)
            rc = 0;
        else
            rc = sfl__fail(SFL_EPARSE, "store: %s: %.200s", sql, t ? (const char *)t : "?");
    }
    sqlite3_finalize(st);
    return rc;
}

/* *fresh = 1 for an empty database, 0 for an sfl store; anything else is
 * refused. Only reads. */
static int identify(sq_store_t *s, const char *path, int *fresh)
{
    int64_t app = 0, objects = 0;
    int rc;

    if ((rc = coord__store_pragma_int(s->db, "PRAGMA application_id", &app)) != 0 ||
        (rc = coord__store_pragma_int(s->db, "SELECT count(*) FROM sqlite_master", &objects)) != 0)
        return sfl__wrap(rc, "%s", path);
    *fresh = app == 0 && objects == 0;
    if (!*fresh && app != APPLICATION_ID)
        return sfl__fail(SFL_EPARSE,
                         "%s: not an sfl coordinator store (application_id 0x%llx); "
                         "refusing to modify it",
                         path, (unsigned long long)app);
    return 0;
}

static int migrate(sq_store_t *s, const char *path)
{
    int64_t version = 0;
    db_stmt_t *st = NULL;
    int fresh = 0, rc = coord__db_begin(&s->base);

    if (rc)
        return rc;
    /* Again inside the write lock: another process may have created it. */
    if ((rc = identify(s, path, &fresh)) != 0)
        goto out;
    if (fresh) {
        version = 0;
    } else {
        if ((rc = sq_stmt(&s->base, ST_VERSION, &st)) != 0)
            goto out;
        rc = sqlite3_step(S(st));
        if (rc != SQLITE_ROW) {
            rc = coord__store_dberr(s->db, rc, "%s: read schema version", path);
            goto out;
        }
        version = sqlite3_column_int64(S(st), 0);
        sq_reset(st);
        st = NULL;
        rc = 0;
    }
    if ((rc = coord__db_version_ok(path, version)) != 0)
        goto out;
    for (int64_t v = version; v < COORD_STORE_SCHEMA_VERSION; v++) {
        char *msg = NULL;

        rc = sqlite3_exec(s->db, migrations[v], NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
            rc = sfl__fail(SFL_EIO, "%s: migration to schema version %lld: %s (%s)", path,
                           (long long)v + 1, msg ? msg : "?", rc_name(rc));
            sqlite3_free(msg);
            goto out;
        }
        if ((rc = sq_stmt(&s->base, ST_VERSION_INSERT, &st)) != 0)
            goto out;
        sq_bind_i64(st, 1, v + 1);
        sq_bind_i64(st, 2, coord__db_now_ms());
        rc = coord__db_exec(&s->base, st, "record schema version");
        st = NULL;
        if (rc)
            goto out;
    }
out:
    if (st)
        sq_reset(st);
    return coord__db_end(&s->base, rc);
}

static void sq_close(db_store_t *base_);

int coord__sq_open(const char *path, const coord_store_opts_t *opts, coord_store_t **out)
{
    sq_store_t *s = NULL;
    db_store_t *b;
    int64_t fk = 0;
    char *msg = NULL;
    int rc, fresh = 0;

    if (out == NULL || path == NULL || path[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: path is missing");
    *out = NULL;
    if ((rc = coord__db_alloc(sizeof(*s), &sq_driver, opts, &b)) != 0)
        return rc;
    s = (sq_store_t *)b;

    rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(s->db, rc, "%s: open", path);
        goto out;
    }
    sqlite3_extended_result_codes(s->db, 1);
    unsigned busy = opts && opts->busy_timeout_ms ? opts->busy_timeout_ms : DEFAULT_BUSY_MS;
    sqlite3_busy_timeout(s->db, busy > INT_MAX ? INT_MAX : (int)busy);
    /* Defensive: the schema cannot be altered behind SQLite's back. */
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    /* Read-only checks first, so a file we refuse is left as it was (even
     * journal_mode = WAL would rewrite the header of another database). The
     * first read fails with SQLITE_NOTADB on a file that is not a database.
     * quick_check reads every page (without integrity_check's index
     * cross-checks): refuse a damaged file rather than fail mid-round. */
    if ((rc = identify(s, path, &fresh)) != 0)
        goto out;
    if ((rc = coord__store_pragma_ok(s->db, "PRAGMA quick_check(1)")) != 0) {
        rc = sfl__wrap(SFL_EPARSE, "%s: damaged database", path);
        goto out;
    }
    {
        sqlite3_stmt *st = NULL;

        rc = coord__store_once(s->db, "PRAGMA journal_mode = WAL", 1, &st, "%s: enable WAL", path);
        if (rc != SQLITE_ROW) {
            sqlite3_finalize(st);
            goto out;
        }
        const unsigned char *mode = sqlite3_column_text(st, 0);
        int wal = mode && strcmp((const char *)mode, "wal") == 0;
        sqlite3_finalize(st);
        if (!wal) {
            rc = sfl__fail(SFL_EUNSUP, "%s: the file system does not support WAL mode", path);
            goto out;
        }
    }
    rc = sqlite3_exec(s->db,
                      opts && opts->relaxed_sync
                          ? "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON"
                          : "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
                      NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(s->db, rc, "%s: set pragmas", path);
        goto out;
    }
    /* A build without foreign keys accepts the pragma silently. */
    if ((rc = coord__store_pragma_int(s->db, "PRAGMA foreign_keys", &fk)) != 0)
        goto out;
    if (fk != 1) {
        rc = sfl__fail(SFL_EUNSUP, "%s: this SQLite has no foreign key support", path);
        goto out;
    }
    if ((rc = migrate(s, path)) != 0)
        goto out;
    *out = &s->base.base;
    s = NULL;
out:
    sqlite3_free(msg);
    coord__db_close(s ? &s->base : NULL);
    return rc;
}

static int sq_read_only(db_store_t *base_)
{
    sq_store_t *s = (sq_store_t *)base_;
    int rc = sqlite3_exec(s->db, "PRAGMA query_only = 1", NULL, NULL, NULL);

    return rc == SQLITE_OK ? 0 : coord__store_dberr(s->db, rc, "query_only");
}

/* The statements and the connection (coord__db_close frees the store).
 * The last connection to close checkpoints the WAL into the main file. */
static void sq_close(db_store_t *base_)
{
    sq_store_t *s = (sq_store_t *)base_;

    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i].st);
    sqlite3_close(s->db);
}

static int sq_integrity_check(db_store_t *base_)
{
    sq_store_t *s = (sq_store_t *)base_;
    sqlite3_stmt *st = NULL;
    int rc;

    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    if ((rc = coord__store_pragma_ok(s->db, "PRAGMA integrity_check(1)")) != 0)
        return rc;
    rc = coord__store_once(s->db, "PRAGMA foreign_key_check", 0, &st, "store: foreign_key_check");
    if (rc == SQLITE_ROW)
        rc = sfl__fail(SFL_EPARSE, "store: foreign key violation: %s row %lld references %s",
                       (const char *)sqlite3_column_text(st, 0),
                       (long long)sqlite3_column_int64(st, 1),
                       (const char *)sqlite3_column_text(st, 2));
    else if (rc == SQLITE_DONE)
        rc = 0;
    sqlite3_finalize(st);
    return rc;
}


static int sq_batch_gone(db_store_t *s)
{
    (void)s;
    return sfl__fail(SFL_EIO, "store: the batch was rolled back by SQLite");
}

static const db_driver_t sq_driver = {
    DB_DRIVER(sq, "sqlite", "[]"),
    .backup = coord__sq_backup,
};

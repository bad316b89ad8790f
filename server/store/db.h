/* Private to server/store/: the database driver interface the store's one
 * copy of logic (storelogic.c) is written against, and its two drivers:
 * db_sqlite.c (sqlite3) and db_pg.c (libpq).
 *
 * A driver prepares each statement of the store once (by id, ST_*, from
 * the shared SQL text or its own), binds parameters, steps rows and reads
 * columns with SQLite's vocabulary of result codes (DB_*: SQLite's own
 * values, so the SQLite driver passes them through and the libpq one maps
 * SQLSTATEs onto them). What truly differs between the databases (schema
 * DDL, opening, leadership's lock, integrity check, backup, a read-only
 * session) is a driver hook. */
#ifndef COORD_STORE_DB_H
#define COORD_STORE_DB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfl/core/error.h"
#include "store/store.h"
#include "store/store_int.h"

/* step() and bind answers: SQLite's result codes (extended for DB_FK). */
enum {
    DB_OK = 0,
    DB_ERROR = 1,
    DB_TOOBIG = 18,
    DB_CONSTRAINT = 19,            /* (rc & 0xff) == DB_CONSTRAINT for every kind */
    DB_FK = DB_CONSTRAINT | (3 << 8), /* a foreign key refused the row */
    DB_ROW = 100,
    DB_DONE = 101,
};
/* column types (db_type) */
enum { DB_INTEGER = 1, DB_FLOAT = 2, DB_TEXT = 3, DB_BLOB = 4, DB_NULL = 5 };

/* The store's statements (storelogic.c's coord__db_sql, a driver's own
 * text in its sql table). */
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
    ST_MASTER_SEEN,
    ST_MASTER_FORGET,
    ST_MASTER_GONE,
    ST_MASTER_LIST,
    /* per driver (no shared text): the first id of a cohort (?1: the
     * driver's int array literal, db_driver_t.ids) that is no agent, and
     * every member's SELECTED row (?4: the same array) */
    ST_COHORT_MISSING,
    ST_PART_SELECTED_ALL,
    ST_COUNT
};

/* Statements whose text differs between the databases in one part only,
 * the rest written once: an insert's RETURNING, a participation row's
 * source (VALUES, or PostgreSQL's guarded SELECT). */
#define DB_SQL_AGENT_INSERT(TAIL)                                                   \
    "INSERT INTO agents(name, cert_fingerprint, identity_pk, "                    \
    "capabilities, samples, dimension, labels, joined_ms, last_seen_ms) "          \
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)" TAIL
/* The leader row (schema 9): one row, epoch counted from 1; EPOCH names
 * the stored epoch in the upsert's update. */
#define DB_SQL_LEADER_BUMP(EPOCH)                                                   \
    "INSERT INTO leader(one, epoch, holder, since_ms) VALUES(1, 1, ?1, ?2) "       \
    "ON CONFLICT(one) DO UPDATE SET epoch = " EPOCH " + 1, holder = ?1, "          \
    "since_ms = ?2 RETURNING epoch"
/* Only a SELECTED row may change: an outcome is written once. */
#define DB_SQL_PART_RECORD(SOURCE)                                                  \
    "INSERT INTO participation(job_id, round, attempt, agent_id, "                \
    "status, reason, bytes, at_ms) " SOURCE                                         \
    "ON CONFLICT(job_id, round, attempt, agent_id) DO UPDATE SET "                \
    "status = excluded.status, reason = excluded.reason, "                         \
    "bytes = excluded.bytes, at_ms = excluded.at_ms "                              \
    "WHERE participation.status = 'selected'"

/* The shared SQL text of each statement ("?N" parameters; NULL where each
 * driver has its own). A driver's own text (its table, used by its stmt)
 * replaces it where the databases' dialects differ. */
extern const char *const coord__db_sql[ST_COUNT];

typedef struct db_driver db_driver_t;

/* A 64-bit value's bit pattern as the other signedness (databases store
 * signed integers; seeds are unsigned). */
static inline int64_t db_u64_to_i64(uint64_t v)
{
    int64_t r;

    memcpy(&r, &v, sizeof(r));
    return r;
}

static inline uint64_t db_i64_to_u64(int64_t v)
{
    uint64_t r;

    memcpy(&r, &v, sizeof(r));
    return r;
}

/* The head of a driver's statement. */
typedef struct db_stmt {
    const db_driver_t *drv;
} db_stmt_t;

/* The head of a driver's store (itself headed by coord_store_t): what the
 * logic keeps, whatever the database. */
typedef struct db_store {
    coord_store_t base;
    const db_driver_t *drv;
    unsigned keep; /* checkpoints kept per job; 0: all */
    int batch;     /* a batch transaction is open */
    int lost;      /* the connection was re-established since the batch began */
    int64_t fence; /* coord_store_fence's epoch; 0: unfenced */
    int leads;     /* leader_try won (and, per the driver, still holds) */
} db_store_t;

struct db_driver {
    const char *backend;           /* "sqlite", "postgresql" */
    /* The statement id, ready for binding (no result or bindings left from
     * its last use): prepared on first use. An sfl error code. */
    int (*stmt)(db_store_t *s, int id, db_stmt_t **out);
    /* binds (1-based), DB_OK or a DB_* error; text and blobs are borrowed
     * until the statement is reset; NULL text binds NULL */
    int (*bind_i64)(db_stmt_t *st, int i, int64_t v);
    int (*bind_double)(db_stmt_t *st, int i, double v);
    int (*bind_null)(db_stmt_t *st, int i);
    int (*bind_text)(db_stmt_t *st, int i, const char *t);
    int (*bind_blob)(db_stmt_t *st, int i, const void *p, size_t n);
    /* DB_ROW, DB_DONE or a DB_* error (the message kept for verr) */
    int (*step)(db_stmt_t *st);
    /* Ends a use: drops the result (read snapshot) and the bindings. */
    void (*reset)(db_stmt_t *st);
    int (*type)(db_stmt_t *st, int i);
    int64_t (*col_i64)(db_stmt_t *st, int i);
    double (*col_double)(db_stmt_t *st, int i);
    const unsigned char *(*col_text)(db_stmt_t *st, int i);
    const void *(*col_blob)(db_stmt_t *st, int i);
    int (*col_bytes)(db_stmt_t *st, int i);
    int64_t (*changes)(db_store_t *s);  /* rows the last statement changed */
    int64_t (*last_id)(db_store_t *s);  /* the id the last agent or job insert gave */
    int (*autocommit)(db_store_t *s);   /* no transaction is open */
    /* 0, or the error to return instead of committing: a statement of the
     * open transaction failed, so COMMIT would roll back (NULL: the
     * database does not abort transactions so). */
    int (*txn_failed)(db_store_t *s);
    /* Writers that may race (READ COMMITTED): the last error was a unique
     * key's (another writer inserted the same row first); clear_error
     * forgets it. NULL: writers are serialised (SQLite: BEGIN IMMEDIATE). */
    int (*unique_violation)(db_store_t *s);
    void (*clear_error)(db_store_t *s);
    /* Records "<fmt>: <database message>" and maps rc (DB_*) with the
     * database's own error detail to an sfl code or -errno. */
    int (*verr)(db_store_t *s, int rc, const char *fmt, va_list ap) SFL_PRINTF(3, 0);
    /* The brackets of an int array parameter's text (ST_COHORT_MISSING):
     * "[]" (a JSON array), "{}" (an int8[] literal). */
    const char *array;

    /* whole-store hooks (store.h's contracts) */
    void (*close)(db_store_t *s); /* the connection; coord__db_close frees s */
    int (*read_only)(db_store_t *s);
    int (*integrity_check)(db_store_t *s);
    int (*backup)(coord_store_t *s, const char *dest, uint64_t *bytes);
    /* batch_commit found the batch gone (s->lost or no transaction): the
     * error to return (after rolling back what is left). */
    int (*batch_gone)(db_store_t *s);
    /* Before leader_try's epoch bump: 1 when this session holds (or now
     * takes) the database's leader lock, 0 when another does, < 0 error;
     * NULL: the store is exclusive anyway (always 1). leader_release lets
     * it go after a failed bump; leader_held asks whether it is still
     * held (NULL: s->leads). */
    int (*leader_lock)(db_store_t *s);
    void (*leader_release)(db_store_t *s, int rc); /* rc: the bump's error, kept */
    int (*leader_held)(db_store_t *s);
};

/* A driver's table: the calls every driver has, named PREFIX_stmt,
 * PREFIX_bind_i64, ... (the optional hooks and backup follow it). */
#define DB_DRIVER(P, BACKEND, ARRAY)                                                \
    .backend = BACKEND, .array = ARRAY, .stmt = P##_stmt, .bind_i64 = P##_bind_i64,   \
    .bind_double = P##_bind_double, .bind_null = P##_bind_null,                        \
    .bind_text = P##_bind_text, .bind_blob = P##_bind_blob, .step = P##_step,          \
    .reset = P##_reset, .type = P##_type, .col_i64 = P##_col_i64,                      \
    .col_double = P##_col_double, .col_text = P##_col_text, .col_blob = P##_col_blob,  \
    .col_bytes = P##_col_bytes, .changes = P##_changes, .last_id = P##_last_id,        \
    .autocommit = P##_autocommit, .verr = P##_verr, .close = P##_close,                \
    .read_only = P##_read_only, .integrity_check = P##_integrity_check,                \
    .batch_gone = P##_batch_gone

/* The ops every store has (storelogic.c): coord_store_t.ops. */
extern const coord_store_ops_t coord__db_ops;

/* storelogic.c's helpers the drivers share */
int coord__db_err(db_store_t *s, int rc, const char *fmt, ...) SFL_PRINTF(3, 4);
/* A new store of size bytes (the driver's struct, headed by db_store_t)
 * for drv with opts' settings (NULL: defaults): coord_store_open's start. */
int coord__db_alloc(size_t size, const db_driver_t *drv, const coord_store_opts_t *opts,
                    db_store_t **out) SFL_MUST_CHECK;
/* The schema version found at where: 0 when it is this coordinator's or
 * older (migrations follow), else the error that refuses the store. */
int coord__db_version_ok(const char *where, int64_t version) SFL_MUST_CHECK;
/* Closes s (the driver's close, then frees it); NULL: nothing. */
void coord__db_close(db_store_t *s);
int coord__db_begin(db_store_t *s) SFL_MUST_CHECK;
int coord__db_end(db_store_t *s, int rc);
int coord__db_exec(db_store_t *s, db_stmt_t *st, const char *what);
int64_t coord__db_now_ms(void);

#endif

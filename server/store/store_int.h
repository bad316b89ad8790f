/* Private to server/store/: what the store (store.c) and its online backup
 * (backup.c) share. */
#ifndef COORD_STORE_INT_H
#define COORD_STORE_INT_H

#include <stdint.h>

#include <sqlite3.h>

#include "sfl/core/error.h"
#include "store/store.h"

#define APPLICATION_ID 0x73666c63 /* "sflc" in the database header */
#define DEFAULT_BUSY_MS 5000

/* The store's seam: every coord_store_* call taking a store dispatches
 * through its ops (store.c): storelogic.c's coord__db_ops, whatever the
 * database (db.h: the drivers db_sqlite.c and db_pg.c). Each operation has
 * the contract of its coord_store_* namesake. */
typedef struct coord_store_ops {
    int (*read_only)(coord_store_t *s);
    void (*close)(coord_store_t *s);
    int (*batch_begin)(coord_store_t *s);
    int (*batch_commit)(coord_store_t *s);
    int (*integrity_check)(coord_store_t *s);
    int (*recover)(coord_store_t *s, const char *reason, size_t *n);
    int (*backup)(coord_store_t *s, const char *dest, uint64_t *bytes);
    int (*leader_try)(coord_store_t *s, const char *holder, int64_t *epoch);
    void (*fence)(coord_store_t *s, int64_t epoch);
    int (*leader_get)(coord_store_t *s, int64_t *epoch, char holder[128], int64_t *since_ms);
    int (*leader_held)(coord_store_t *s);
    int (*master_seen)(coord_store_t *s, const coord_master_row_t *m, int64_t forget_before_ms);
    int (*master_gone)(coord_store_t *s, const char *holder);
    int (*master_list)(coord_store_t *s, coord_master_row_t **out, size_t *n);
    int (*agent_upsert)(coord_store_t *s, const coord_agent_row_t *a, int64_t *id);
    int (*agent_rekey)(coord_store_t *s, int64_t id, const uint8_t pk[COORD_KEY_BYTES]);
    int (*cert_revoke)(coord_store_t *s, const uint8_t fpr[COORD_FPR_BYTES], const char *name,
                       int64_t now_ms);
    int (*revoked_list)(coord_store_t *s, uint8_t (**out)[COORD_FPR_BYTES], size_t *n);
    int (*quarantine_add)(coord_store_t *s, int64_t job, int64_t agent, const char *reason,
                          int64_t now_ms);
    int (*quarantine_release)(coord_store_t *s, int64_t job, int64_t agent);
    int (*quarantine_list)(coord_store_t *s, coord_quar_row_t **out, size_t *n);
    int (*stats_open)(coord_store_t *s, int64_t job, int64_t attempt);
    int (*stats_commit)(coord_store_t *s, int64_t job, const uint8_t *moments, size_t len,
                        const uint8_t hash[COORD_HASH_BYTES], int64_t rows, int64_t agents);
    int (*stats_get)(coord_store_t *s, int64_t job, size_t max, coord_stats_row_t *out);
    int (*agent_touch)(coord_store_t *s, int64_t id);
    int (*agent_get)(coord_store_t *s, int64_t id, coord_agent_row_t *out);
    int (*agent_get_by_name)(coord_store_t *s, const char *name, coord_agent_row_t *out);
    int (*agent_list)(coord_store_t *s, coord_agent_row_t **out, size_t *n);
    int (*job_create)(coord_store_t *s, const char *name, const uint8_t *spec, size_t spec_len,
                      uint64_t seed, int64_t *id);
    int (*job_get)(coord_store_t *s, int64_t id, size_t max_spec, coord_job_row_t *out);
    int (*job_list)(coord_store_t *s, size_t max_spec, coord_job_row_t **out, size_t *n);
    int (*job_set_state)(coord_store_t *s, int64_t id, coord_job_state_t state);
    int (*job_fail)(coord_store_t *s, int64_t id, const char *error, int64_t now_ms);
    int (*round_open)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                      const uint8_t nonce[COORD_NONCE_BYTES], const int64_t *cohort, size_t n);
    int (*round_next_attempt)(coord_store_t *s, int64_t job, int64_t round, int64_t *attempt);
    int (*round_set_state)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                           coord_srow_state_t state, const char *reason);
    int (*round_commit)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                        const uint8_t *model, size_t len, const sfl_round_metrics_t *metrics,
                        uint8_t hash[COORD_HASH_BYTES]);
    int (*history)(coord_store_t *s, int64_t job, int64_t after_round, size_t limit,
                   coord_history_row_t **out, size_t *n);
    int (*round_get)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                     size_t max_cohort, coord_round_row_t *out);
    int (*round_list)(coord_store_t *s, int64_t job, size_t max_cohort, coord_round_row_t **out,
                      size_t *n);
    int (*participation_record)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                                int64_t agent, coord_part_status_t status, const char *reason,
                                int64_t bytes);
    int (*participation_batch)(coord_store_t *s, const coord_part_row_t *rows, size_t n,
                               size_t *skipped);
    int (*participation_list)(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                              coord_participation_t **out, size_t *n);
    int (*checkpoint_latest)(coord_store_t *s, int64_t job, size_t max_len, int64_t *round,
                             uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES]);
    int (*checkpoint_get)(coord_store_t *s, int64_t job, int64_t round, size_t max_len,
                          uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES]);
    int (*checkpoint_rounds)(coord_store_t *s, int64_t job, int64_t **rounds, size_t *n);
} coord_store_ops_t;

struct coord_store {
    const coord_store_ops_t *ops;
};

/* The drivers' constructors (coord_store_open's contract; location is a
 * path or a libpq conninfo), and SQLite's online and offline backup
 * (backup.c). */
int coord__sq_open(const char *path, const coord_store_opts_t *opts,
                   coord_store_t **out) SFL_MUST_CHECK;
int coord__pg_open(const char *conninfo, const coord_store_opts_t *opts,
                   coord_store_t **out) SFL_MUST_CHECK;
int coord__sq_backup(coord_store_t *s, const char *dest, uint64_t *bytes) SFL_MUST_CHECK;
int coord__sq_backup_path(const char *db_path, const char *dest,
                          uint64_t *bytes) SFL_MUST_CHECK;

/* The store's connection (borrowed). */
sqlite3 *coord__store_db(coord_store_t *s);
/* Records "<fmt>: <sqlite message> (SQLITE_X)" and maps rc (an SQLite
 * code) to an sfl code or -errno. Call before anything else touches the
 * connection db (NULL: none), which would replace sqlite3_errmsg. */
int coord__store_dberr(sqlite3 *db, int rc, const char *fmt, ...) SFL_PRINTF(3, 4);
/* Prepares a one-off statement (not kept: pragmas, checks) into *st and
 * steps it once: SQLITE_ROW, SQLITE_DONE when want_row is 0, else the error
 * with the detail "<fmt>: <sqlite message>". The caller finalizes *st. */
int coord__store_once(sqlite3 *db, const char *sql, int want_row, sqlite3_stmt **st,
                      const char *fmt, ...) SFL_PRINTF(5, 6);
/* The integer a pragma (or a one-value query) answers, into *v. */
int coord__store_pragma_int(sqlite3 *db, const char *sql, int64_t *v);
/* Runs a check pragma whose single good answer is one row "ok". */
int coord__store_pragma_ok(sqlite3 *db, const char *sql);

#endif

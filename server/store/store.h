/* The coordinator's durable state: agents, jobs, rounds (with their cohort
 * manifests), participation and model checkpoints, in one SQLite database in
 * WAL mode (db_sqlite.c), or in a PostgreSQL schema shared by a fleet of
 * coordinators (db_pg.c; coord_store_open's store spec picks one, and
 * both keep the contract below; PostgreSQL's differences are at
 * coord_store_open). A round commit is one transaction, so after a crash (kill -9,
 * power loss with the default synchronous=FULL) every job resumes from its
 * last committed round and nothing committed is lost. Tables, invariants and
 * recovery are described in docs/operations.md, "State and recovery".
 *
 * Numbering: ids are assigned by the store and never reused; rounds count
 * from 1 (last_committed_round 0 means none yet); attempts count from 1.
 * Timestamps are wall-clock milliseconds since the Unix epoch, taken by the
 * store. A coord_store_t is not safe for concurrent use: the caller
 * serializes calls (one thread at a time). Every function returns 0 or a
 * negative SFL_E code / -errno with sfl_last_error() naming the SQLite error;
 * -EBUSY means another connection held the lock past busy_timeout_ms. */
#ifndef SFL_COORD_STORE_H
#define SFL_COORD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/wire/roundmetrics.h"

#define COORD_STORE_SCHEMA_VERSION 10
#define COORD_AGENT_NAME_MAX 64 /* X.509 ub-common-name */
#define COORD_AGENT_TEXT_MAX 256
#define COORD_JOB_NAME_MAX 128
#define COORD_REASON_MAX 256
#define COORD_HASH_BYTES 32  /* BLAKE2b-256 (crypto_generichash) */
#define COORD_NONCE_BYTES 32
#define COORD_KEY_BYTES 32   /* Ed25519 public key */
#define COORD_FPR_BYTES 32   /* SHA-256 of the certificate DER */

typedef struct coord_store coord_store_t;

typedef struct {
    /* checkpoints kept per job: the last N committed rounds; 0 keeps every
     * round's (sflctl model export --round N of any round) */
    unsigned keep_checkpoints;
    /* how long to wait for a lock held by another connection; 0 = 5000 */
    unsigned busy_timeout_ms;
    /* 0: synchronous=FULL, a commit survives power loss; 1: NORMAL, a commit
     * survives a process crash but the last ones may roll back on power loss */
    int relaxed_sync;
} coord_store_opts_t;

typedef enum {
    COORD_JOB_ACTIVE = 0,
    COORD_JOB_PAUSED,
    COORD_JOB_CANCELLED, /* terminal */
    COORD_JOB_DONE,      /* terminal */
    COORD_JOB_FAILED     /* terminal: coord_store_job_fail */
} coord_job_state_t;

/* SELECTING -> TRAINING -> AGGREGATING -> COMMITTED (only through
 * coord_store_round_commit); any live state -> FAILED. */
typedef enum {
    COORD_SROW_SELECTING = 0,
    COORD_SROW_TRAINING,
    COORD_SROW_AGGREGATING,
    COORD_SROW_COMMITTED,
    COORD_SROW_FAILED
} coord_srow_state_t;

typedef enum {
    COORD_PART_SELECTED = 0, /* written by coord_store_round_open only */
    COORD_PART_ACCEPTED,
    COORD_PART_LATE,
    COORD_PART_DUPLICATE,
    COORD_PART_REJECTED
} coord_part_status_t;

typedef struct {
    int64_t id;                                /* assigned by the store */
    char name[COORD_AGENT_NAME_MAX + 1];       /* certificate CN, unique */
    uint8_t cert_fingerprint[COORD_FPR_BYTES]; /* SHA-256 of the cert DER */
    uint8_t identity_pk[COORD_KEY_BYTES];      /* Ed25519, unique */
    char capabilities[COORD_AGENT_TEXT_MAX + 1];
    int64_t samples;   /* local dataset size, >= 0 */
    int64_t dimension; /* feature dimension, >= 0 */
    char labels[COORD_AGENT_TEXT_MAX + 1];
    int64_t joined_ms;    /* first upsert */
    int64_t last_seen_ms; /* last upsert or touch */
} coord_agent_row_t;

typedef struct {
    int64_t id;
    char name[COORD_JOB_NAME_MAX + 1];
    coord_job_state_t state;
    uint64_t seed;
    int64_t created_ms;
    int64_t last_committed_round; /* 0 before the first commit */
    uint8_t *spec;                /* owned (coord_job_row_clear); opaque */
    size_t spec_len;
    char error[256];              /* why it failed (state COORD_JOB_FAILED), else "" */
} coord_job_row_t;

typedef struct {
    int64_t job_id;
    int64_t round;
    int64_t attempt;
    coord_srow_state_t state;
    uint8_t nonce[COORD_NONCE_BYTES];
    int64_t *cohort; /* owned; the manifest, agent ids strictly ascending */
    size_t cohort_len;
    int64_t opened_ms;
    int64_t closed_ms; /* 0 while the round is live */
    char reason[COORD_REASON_MAX + 1];
} coord_round_row_t;

/* One committed round as coord_store_history reads it. */
typedef struct {
    int64_t round, attempt;
    int64_t opened_ms;    /* the round's first attempt opened */
    int64_t committed_ms;
    uint32_t selected;    /* the committed attempt's cohort */
    uint32_t accepted;    /* its accepted participation rows */
    uint64_t bytes_up;    /* and their update bytes */
    sfl_round_metrics_t m; /* sfl/wire/roundmetrics.h; NULL columns (rounds committed
                              before a metric's migration) read as 0 */
} coord_history_row_t;

typedef struct {
    int64_t agent_id;
    coord_part_status_t status;
    char reason[COORD_REASON_MAX + 1];
    int64_t bytes; /* update size as received */
    int64_t at_ms;
} coord_participation_t;

typedef enum { COORD_STORE_SQLITE = 0, COORD_STORE_POSTGRESQL } coord_store_backend_t;

/* A store spec: "sqlite:PATH", "postgresql:CONNINFO" (a libpq conninfo
 * string or URI), a libpq URI itself ("postgresql://..." or
 * "postgres://...") or a bare PATH (SQLite). *location points into spec.
 * SFL_EINVAL when empty or when the location is. */
int coord_store_spec_parse(const char *spec, coord_store_backend_t *backend,
                           const char **location) SFL_MUST_CHECK;
/* spec with every password masked ("password=***", "user:***@"), for logs;
 * truncated to cap - 1 bytes. */
void coord_store_spec_mask(const char *spec, char *dst, size_t cap);
/* "sqlite" or "postgresql". */
const char *coord_store_backend(const coord_store_t *s);

/* Opens the store a spec names (coord_store_spec_parse).
 *
 * PostgreSQL: connects with libpq (the conninfo's own options: host, port,
 * dbname, user, sslmode ...), creates the schema or applies migrations in
 * one transaction under an advisory lock (two processes starting at once:
 * one migrates, the other waits and sees the result), and prepares its
 * statements once per connection. Many processes may share the database;
 * writes of jobs, rounds, participation, checkpoints, statistics and
 * quarantine are fenced by the leader epoch (coord_store_fence). A lost
 * connection fails the call with -ECONNRESET naming libpq's message; the
 * next call reconnects (and the session's advisory lock is gone:
 * coord_store_leader_held). busy_timeout_ms becomes lock_timeout;
 * relaxed_sync sets synchronous_commit = off for the session. Schema checks
 * as for SQLite: a newer schema is SFL_EUNSUP.
 *
 * SQLite: opens (creating if missing) the store at path and applies schema
 * migrations in one transaction. Refuses, without writing to it, a file that
 * is not an SQLite database or not an sfl store (SFL_EPARSE), a store written
 * by a newer schema (SFL_EUNSUP), and a store that fails quick_check
 * (SFL_EPARSE). opts may be NULL (keep 3 checkpoints). Returns owned
 * (coord_store_close). */
int coord_store_open(const char *path, const coord_store_opts_t *opts,
                     coord_store_t **out) SFL_MUST_CHECK;
/* Refuses every write through this connection from now on (PRAGMA
 * query_only): the coordinator's loop reads through one, the writer
 * thread (writer.h) owns the only one that writes. */
int coord_store_read_only(coord_store_t *s) SFL_MUST_CHECK;
/* Closes the database; NULL is a no-op. */
void coord_store_close(coord_store_t *s);
/* Group commit: between batch_begin (BEGIN IMMEDIATE) and batch_commit
 * every call's own transaction becomes a savepoint of the batch, so a
 * call that fails still undoes only its own changes, while the batch
 * commits (one fsync) or fails as a whole. batch_commit returns 0 once
 * the batch is durable; on failure (also when SQLite rolled the batch back
 * itself, e.g. SQLITE_FULL during a call) nothing of the batch is kept. */
int coord_store_batch_begin(coord_store_t *s) SFL_MUST_CHECK;
int coord_store_batch_commit(coord_store_t *s) SFL_MUST_CHECK;
/* Full PRAGMA integrity_check plus foreign_key_check: 0, or SFL_EPARSE with
 * the first problem in the detail. Reads the whole file. */
int coord_store_integrity_check(coord_store_t *s) SFL_MUST_CHECK;
/* After a restart: marks every live round (selecting, training,
 * aggregating) failed with reason; *n (may be NULL) = rounds marked. */
int coord_store_recover(coord_store_t *s, const char *reason, size_t *n);

/* Online backup with SQLite's backup API, safe while a coordinator writes
 * the store: the copy is one consistent snapshot (a read transaction held
 * for the whole copy, which in WAL mode never blocks the writer), copied a
 * few pages per step into a temporary file next to dest (mode 0600), made a
 * self-contained file (rollback journal mode: no -wal or -shm to carry),
 * verified (PRAGMA integrity_check, the sfl application_id), fsynced and
 * renamed over dest atomically, so dest is either the old file or a good
 * copy. *bytes (may be NULL) = the copy's size. SFL_EINVAL if dest is a
 * directory or the database itself, -errno naming the directory when the
 * temporary cannot be created (e.g. -ENOENT: missing directory).
 *
 * A PostgreSQL store is refused (SFL_EUNSUP naming pg_dump), by both.
 *
 * coord_store_backup_path takes a store spec (a bare path is SQLite's) and
 * opens the file without creating it, refuses a file
 * that is not an sfl store (SFL_EPARSE) and never writes through its
 * connection (query_only), so it is what a second process runs against a
 * live coordinator's state; it applies no migration. */
int coord_store_backup_path(const char *db_path, const char *dest,
                            uint64_t *bytes) SFL_MUST_CHECK;
/* The same through an open store's own connection (a call like any other:
 * the caller serializes it). */
int coord_store_backup(coord_store_t *s, const char *dest, uint64_t *bytes) SFL_MUST_CHECK;

/* Leadership of a store shared by a round master and its standby
 * (docs/operations.md). Call leader_try on a writable connection the
 * master keeps open while it leads (PostgreSQL: the lock is that session's),
 * and fence the writer's connection with the epoch it gives. leader_try: 1 when this connection now leads
 * (PostgreSQL: a session advisory lock, held until the connection closes
 * or is lost; the leader row's epoch is incremented, holder (1..127
 * printable bytes) and since_ms recorded; *epoch = the new epoch), 0 when
 * another session holds it (nothing changed), < 0 an error. SQLite: always
 * 1 (the state_dir lock already excludes others), the epoch incremented
 * all the same. */
int coord_store_leader_try(coord_store_t *s, const char *holder, int64_t *epoch) SFL_MUST_CHECK;
/* From now on every transaction through s that writes jobs, rounds,
 * participation, checkpoints, statistics or quarantine first runs
 * UPDATE leader SET epoch = epoch WHERE epoch = <epoch> (its row lock held
 * to the commit) and, when no row matched, changes nothing and fails with
 * SFL_EFENCED. Agents, certificates and reads are never fenced. 0: unfenced
 * (the default). */
void coord_store_fence(coord_store_t *s, int64_t epoch);
/* The leader row: SFL_ENOTFOUND when nobody ever led. */
int coord_store_leader_get(coord_store_t *s, int64_t *epoch, char holder[128],
                           int64_t *since_ms) SFL_MUST_CHECK;
/* 1 while the lock leader_try took is still this session's; 0 when it was
 * never taken or the connection was lost since (a reconnected session holds
 * no advisory lock: the master must step down); SQLite: 1 after leader_try. */
int coord_store_leader_held(coord_store_t *s) SFL_MUST_CHECK;

/* The masters (schema 10; docs/operations.md, "sflctl fleet"): one row per
 * coordinator process sharing the store, keyed by its holder string (the
 * leader row's). Never fenced: a standby writes its own. role:
 * COORD_MASTER_LEADER / _STANDBY (role master), _SINGLE (role single);
 * epoch: the one it leads with, or the leader row's it last saw (0: none).
 * master_seen upserts m (its seen_ms and started_ms as given) and, in the
 * same transaction, deletes the other rows last seen before
 * forget_before_ms (0: none): processes long gone. master_gone deletes
 * holder's row (a clean shutdown; no row is not an error). master_list
 * returns at most COORD_MASTERS_MAX rows, the freshest first, owned
 * (coord_store_free), *out NULL when *n = 0; a row the database holds that
 * breaks the limits (an unknown role, a holder too long) is SFL_EPARSE /
 * SFL_ELIMIT. holder: 1..127 bytes, host: 0..63. */
#define COORD_MASTERS_MAX 64
#define COORD_MASTER_FORGET_MS 3600000 /* a master's row outlives it by an hour */
typedef enum {
    COORD_MASTER_SINGLE = 0,
    COORD_MASTER_LEADER,
    COORD_MASTER_STANDBY,
} coord_master_role_t;
typedef struct {
    char holder[128];
    coord_master_role_t role;
    int64_t epoch;
    int64_t pid;
    char host[64];
    int64_t started_ms, seen_ms;
} coord_master_row_t;
int coord_store_master_seen(coord_store_t *s, const coord_master_row_t *m,
                            int64_t forget_before_ms) SFL_MUST_CHECK;
int coord_store_master_gone(coord_store_t *s, const char *holder) SFL_MUST_CHECK;
int coord_store_master_list(coord_store_t *s, coord_master_row_t **out,
                            size_t *n) SFL_MUST_CHECK;
/* "single", "leader", "standby". */
const char *coord_master_role_name(coord_master_role_t r);
/* 1 when a master's row was last written more than 3 x retry_ms before
 * now_ms (its process missed three heartbeats: dead, hung or cut off). */
static inline int coord_master_stale(const coord_master_row_t *m, int64_t now_ms,
                                     uint64_t retry_ms)
{
    return now_ms - m->seen_ms > (int64_t)(3 * retry_ms);
}

/* Agents. Upsert by name: inserts (assigning id, joined_ms) or updates the
 * capabilities, dataset summary and last_seen_ms of the agent with that
 * name. The name stays bound to the certificate (fingerprint) it first joined
 * with: another certificate gives -EACCES unless the bound one was revoked
 * (coord_store_cert_revoke), and then becomes the bound one. An existing name
 * with a different identity key, or a key registered under another name,
 * gives -EEXIST too: a key change is an operator decision
 * (coord_store_agent_rekey). a->id, joined_ms and last_seen_ms are ignored;
 * *id (may be NULL) = the agent's id. */
int coord_store_agent_upsert(coord_store_t *s, const coord_agent_row_t *a, int64_t *id);
int coord_store_agent_rekey(coord_store_t *s, int64_t id,
                            const uint8_t identity_pk[COORD_KEY_BYTES]);
/* Certificates the operator revoked (sflctl agent revoke): refused for good.
 * name says whose it was (for the record). Revoking twice is not an error. */
int coord_store_cert_revoke(coord_store_t *s, const uint8_t fpr[COORD_FPR_BYTES],
                            const char *name, int64_t now_ms) SFL_MUST_CHECK;
/* All revoked fingerprints, ascending (for bsearch). Returns owned
 * (coord_store_free); *out NULL when *n = 0. */
int coord_store_revoked_list(coord_store_t *s, uint8_t (**out)[COORD_FPR_BYTES],
                             size_t *n) SFL_MUST_CHECK;
/* Quarantine (docs/security.md): agents a job no longer selects. add is
 * idempotent (a second add keeps the first reason and time); release gives
 * SFL_ENOTFOUND when the agent is not quarantined in that job; list
 * returns every row by (job, agent), owned (coord_store_free), *out NULL
 * when *n = 0. reason: 1..COORD_REASON_MAX bytes. */
typedef struct {
    int64_t job, agent;
    int64_t at_ms;
    char reason[COORD_REASON_MAX + 1];
} coord_quar_row_t;
int coord_store_quarantine_add(coord_store_t *s, int64_t job, int64_t agent, const char *reason,
                               int64_t now_ms) SFL_MUST_CHECK;
int coord_store_quarantine_release(coord_store_t *s, int64_t job,
                                   int64_t agent) SFL_MUST_CHECK;
int coord_store_quarantine_list(coord_store_t *s, coord_quar_row_t **out,
                                size_t *n) SFL_MUST_CHECK;
/* A standardize job's statistics round (docs/protocol.md): stats_open
 * records that attempt (1-based) opened, before its tasks go out (a no-op
 * once the moments are stored); stats_commit stores the pooled moments
 * (len bytes, little-endian float64s), their hash and the rows and agents
 * pooled, once (SFL_EINVAL if stored already or never opened); stats_get
 * reads the row (SFL_ENOTFOUND: none): moments NULL until committed, else
 * owned (coord_store_free), at most max bytes (SFL_ELIMIT). */
typedef struct {
    int64_t attempts;     /* attempts opened */
    int64_t rows, agents, committed_ms;
    uint8_t hash[COORD_HASH_BYTES];
    uint8_t *moments;     /* NULL: not committed */
    size_t len;
} coord_stats_row_t;
int coord_store_stats_open(coord_store_t *s, int64_t job, int64_t attempt) SFL_MUST_CHECK;
int coord_store_stats_commit(coord_store_t *s, int64_t job, const uint8_t *moments, size_t len,
                             const uint8_t hash[COORD_HASH_BYTES], int64_t rows,
                             int64_t agents) SFL_MUST_CHECK;
int coord_store_stats_get(coord_store_t *s, int64_t job, size_t max,
                          coord_stats_row_t *out) SFL_MUST_CHECK;
/* Sets last_seen_ms to now. */
int coord_store_agent_touch(coord_store_t *s, int64_t id);
/* SFL_ENOTFOUND when absent. */
int coord_store_agent_get(coord_store_t *s, int64_t id, coord_agent_row_t *out);
int coord_store_agent_get_by_name(coord_store_t *s, const char *name, coord_agent_row_t *out);
/* All agents by id. Returns owned (coord_store_free); *out NULL when *n = 0. */
int coord_store_agent_list(coord_store_t *s, coord_agent_row_t **out, size_t *n);

/* Jobs. spec is copied (borrows); state starts ACTIVE. */
int coord_store_job_create(coord_store_t *s, const char *name, const uint8_t *spec,
                           size_t spec_len, uint64_t seed, int64_t *id);
/* Fills *out (spec owned, coord_job_row_clear); SFL_ELIMIT if the stored spec is
 * longer than max_spec; SFL_ENOTFOUND when absent. */
int coord_store_job_get(coord_store_t *s, int64_t id, size_t max_spec, coord_job_row_t *out);
/* Frees out->spec and zeroes *out; NULL is a no-op. */
void coord_job_row_clear(coord_job_row_t *j);
/* All jobs by id. Returns owned (coord_job_rows_free). */
int coord_store_job_list(coord_store_t *s, size_t max_spec, coord_job_row_t **out, size_t *n);
void coord_job_rows_free(coord_job_row_t *jobs, size_t n);
/* ACTIVE <-> PAUSED, either -> CANCELLED or DONE; terminal states stay
 * (SFL_EINVAL). Setting the current state again is a no-op. */
int coord_store_job_set_state(coord_store_t *s, int64_t id, coord_job_state_t state);
/* Marks a job failed for good, with why (printable text): it loads as
 * failed and no later change applies to it. SFL_EINVAL if it already ended. */
int coord_store_job_fail(coord_store_t *s, int64_t id, const char *error,
                         int64_t now_ms) SFL_MUST_CHECK;

/* Rounds. Opens attempt `attempt` of round `round` in state SELECTING with
 * its nonce and cohort manifest (agent ids, strictly ascending, each an
 * existing agent; n may be 0), and a SELECTED participation row per cohort
 * member, in one transaction. round must be last_committed_round + 1, the
 * job active or paused, no other attempt of the round live, and attempt the
 * one coord_store_round_next_attempt gives (a used one: -EEXIST). */
int coord_store_round_open(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                           const uint8_t nonce[COORD_NONCE_BYTES], const int64_t *cohort,
                           size_t n);
/* 1 + the highest attempt recorded for (job, round), 1 if none. */
int coord_store_round_next_attempt(coord_store_t *s, int64_t job, int64_t round,
                                   int64_t *attempt);
/* A transition of the diagram above other than to COMMITTED; reason (may be
 * NULL) is kept, e.g. why a round failed. */
int coord_store_round_set_state(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                                coord_srow_state_t state, const char *reason);
/* The commit, in ONE transaction: the AGGREGATING round becomes COMMITTED,
 * the checkpoint (model, borrowed, opaque bytes) is stored with its
 * BLAKE2b-256 hash, jobs.last_committed_round = round, and checkpoints older
 * than the last keep_checkpoints are deleted (none with 0); metrics (may be NULL: none)
 * are stored with the round. hash (may be NULL) receives the
 * model hash. After it returns 0 the commit is durable. A model beyond
 * SQLite's blob limit (1e9 bytes by default) gives SFL_ELIMIT. */
int coord_store_round_commit(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                             const uint8_t *model, size_t len,
                             const sfl_round_metrics_t *metrics,
                             uint8_t hash[COORD_HASH_BYTES]);
/* The committed rounds of job after after_round, ascending, at most limit
 * of them (>= 1): the training history sflctl prints. Returns owned
 * (coord_store_free); *n may be 0. */
int coord_store_history(coord_store_t *s, int64_t job, int64_t after_round, size_t limit,
                        coord_history_row_t **out, size_t *n);
/* One round attempt; the manifest is refused (SFL_ELIMIT) beyond max_cohort
 * ids. Fills *out (cohort owned, coord_round_clear). */
int coord_store_round_get(coord_store_t *s, int64_t job, int64_t round, int64_t attempt,
                          size_t max_cohort, coord_round_row_t *out);
void coord_round_clear(coord_round_row_t *r);
/* Every attempt of every round of job, by (round, attempt): the replay log.
 * Returns owned (coord_round_list_free). */
int coord_store_round_list(coord_store_t *s, int64_t job, size_t max_cohort,
                           coord_round_row_t **out, size_t *n);
void coord_round_list_free(coord_round_row_t *rounds, size_t n);

/* Records an agent's outcome in a round attempt (any status but SELECTED):
 * updates its SELECTED row, or inserts a row for an agent outside the cohort
 * (an unsolicited update). An outcome is written once: if one is already
 * recorded, returns -EEXIST and changes nothing, so the first of two racing
 * updates wins. reason may be NULL. */
int coord_store_participation_record(coord_store_t *s, int64_t job, int64_t round,
                                     int64_t attempt, int64_t agent,
                                     coord_part_status_t status, const char *reason,
                                     int64_t bytes);
/* Many outcomes in one transaction (one fsync instead of one per update):
 * each row as coord_store_participation_record, a row's own refusal
 * (-EEXIST, no such round or agent, a bad field) skipped and counted in
 * *skipped (may be NULL); a database failure rolls the whole batch back. */
typedef struct coord_part_row {
    int64_t job, round, attempt, agent;
    coord_part_status_t status;
    const char *reason;       /* may be NULL; borrowed */
    int64_t bytes;
    int64_t at_ms;            /* when it happened; 0: now */
} coord_part_row_t;
int coord_store_participation_batch(coord_store_t *s, const coord_part_row_t *rows, size_t n,
                                    size_t *skipped) SFL_MUST_CHECK;
/* Rows of one round attempt by agent id. Returns owned (coord_store_free). */
int coord_store_participation_list(coord_store_t *s, int64_t job, int64_t round,
                                   int64_t attempt, coord_participation_t **out, size_t *n);

/* The checkpoint of the job's last committed round: *round, the model
 * (owned, coord_store_free; refused with SFL_ELIMIT beyond max_len bytes
 * before anything is copied) and its hash, verified against the bytes
 * (SFL_EIO on mismatch). SFL_ENOTFOUND if the job has no committed round. */
int coord_store_checkpoint_latest(coord_store_t *s, int64_t job, size_t max_len,
                                  int64_t *round, uint8_t **model, size_t *len,
                                  uint8_t hash[COORD_HASH_BYTES]);
/* The checkpoint of a given round, same contract; SFL_ENOTFOUND if pruned. */
int coord_store_checkpoint_get(coord_store_t *s, int64_t job, int64_t round, size_t max_len,
                               uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES]);
/* Rounds of job that have a checkpoint, ascending. Returns owned
 * (coord_store_free). */
int coord_store_checkpoint_rounds(coord_store_t *s, int64_t job, int64_t **rounds, size_t *n);

/* Frees memory returned by the store; NULL is a no-op. */
void coord_store_free(void *p);

const char *coord_job_state_name(coord_job_state_t st);
const char *coord_srow_state_name(coord_srow_state_t st);
const char *coord_part_status_name(coord_part_status_t st);

#endif

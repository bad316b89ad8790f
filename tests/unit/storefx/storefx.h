/* Fixtures of the store's suites (test_store, and test_backup for its
 * online backup): a temporary directory with one database file per test,
 * agents, deterministic models and committed rounds, raw file and SQL
 * access behind the store's back. Linked into the suites STOREFX_TESTS in
 * the Makefile lists. */
#ifndef SFL_TEST_STOREFX_H
#define SFL_TEST_STOREFX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store/store.h"

/* The group's directory ($TMPDIR or /tmp, sfl-store-XXXXXX), and the
 * buffer dbpath writes into. */
extern char tmpdir[1024];
extern char pathbuf[sizeof(tmpdir) + 512];

/* PostgreSQL (the suites' second group): SFL_TEST_PG is a running
 * cluster's conninfo (tests/pgcluster.sh; tests/run.sh starts one).
 * pg_mode(1) makes dbpath() name a fresh schema of this run in it
 * ("postgresql:CONNINFO options='-csearch_path=SCHEMA'"), store_pg its
 * conninfo; pg_mode(0) goes back to SQLite files (store_pg NULL). raw_sql
 * takes either. pg_group_teardown drops the run's schemas. */
extern const char *store_pg;
int pg_available(void);
void pg_mode(int on);
int pg_group_teardown(void **state);

/* Make tmpdir; remove it and the files in it. */
int group_setup(void **state);
int group_teardown(void **state);

/* tmpdir/name (in pathbuf); each test uses its own file. */
const char *dbpath(const char *name);
/* Opens the store at path keeping keep checkpoints; fails the test
 * otherwise. */
coord_store_t *open_ok(const char *path, unsigned keep);
/* An agent row named name whose keys are derived from key. */
void make_agent(coord_agent_row_t *a, const char *name, uint8_t key);
/* make_agent, upserted: its id. */
int64_t add_agent(coord_store_t *s, const char *name, uint8_t key);
/* Deterministic model bytes for round r of the crash test: model_len(r)
 * bytes from make_model. */
size_t model_len(int64_t r);
void make_model(int64_t r, uint8_t *buf, size_t n);
/* The nonce of round r's attempt. */
void nonce_for(int64_t r, int64_t attempt, uint8_t nonce[COORD_NONCE_BYTES]);
/* Drives round r through open -> training -> aggregating -> commit. */
void commit_round(coord_store_t *s, int64_t job, int64_t r, const int64_t *cohort, size_t n,
                  const uint8_t *model, size_t len);
/* A whole file (free with free()); writes one. */
void file_bytes(const char *path, uint8_t **out, size_t *n);
void write_file(const char *path, const uint8_t *p, size_t n);
/* The first place of needle[0..k) in hay[0..n), or NULL. */
uint8_t *find_bytes(uint8_t *hay, size_t n, const uint8_t *needle, size_t k);
/* Runs one SQL statement on the file directly, behind the store's back. */
void raw_sql(const char *path, const char *sql);
/* The monotonic clock in seconds. */
double now_s(void);

#endif

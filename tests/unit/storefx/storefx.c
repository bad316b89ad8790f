/* The store suites' fixtures (storefx.h). */
#include "storefx.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

char tmpdir[1024];
char pathbuf[sizeof(tmpdir) + 512];
const char *store_pg;
static char pg_prefix[48];

/* One command on a PostgreSQL connection; fails the test otherwise. */
static void pg_exec(const char *conninfo, const char *sql)
{
    PGconn *c = PQconnectdb(conninfo);
    PGresult *r;

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("connect %s: %s", conninfo, PQerrorMessage(c));
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

int pg_available(void)
{
    const char *c = getenv("SFL_TEST_PG");

    return c != NULL && *c != '\0';
}

void pg_mode(int on)
{
    store_pg = on ? getenv("SFL_TEST_PG") : NULL;
    if (on && pg_prefix[0] == '\0')
        snprintf(pg_prefix, sizeof(pg_prefix), "sfl_t%ld_%ld", (long)getpid(),
                 (long)time(NULL) % 100000);
}

int pg_group_teardown(void **state)
{
    const char *c = getenv("SFL_TEST_PG");
    char sql[512];

    if (c && *c && pg_prefix[0]) {
        /* every schema this run made */
        snprintf(sql, sizeof(sql),
                 "DO $$DECLARE n text; BEGIN FOR n IN SELECT nspname FROM pg_namespace "
                 "WHERE nspname LIKE '%s\\_%%' LOOP EXECUTE 'DROP SCHEMA ' || "
                 "quote_ident(n) || ' CASCADE'; END LOOP; END$$",
                 pg_prefix);
        pg_exec(c, sql);
    }
    return group_teardown(state);
}

int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");

    snprintf(tmpdir, sizeof(tmpdir), "%s/sfl-store-XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

int group_teardown(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    struct dirent *e;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(pathbuf, sizeof(pathbuf), "%s/%s", tmpdir, e->d_name);
        unlink(pathbuf);
    }
    closedir(d);
    return rmdir(tmpdir);
}

/* tmpdir/name; each test uses its own file. */
const char *dbpath(const char *name)
{
    if (store_pg) {
        char schema[128], sql[256];
        size_t o = 0;

        /* name as an identifier: "agents.db" -> <prefix>_agents_db */
        o = (size_t)snprintf(schema, sizeof(schema), "%s_", pg_prefix);
        for (const char *p = name; *p && o + 1 < sizeof(schema); p++)
            schema[o++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '_');
        schema[o] = '\0';
        snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS %s", schema);
        pg_exec(store_pg, sql);
        snprintf(pathbuf, sizeof(pathbuf), "postgresql:%s options='-csearch_path=%s'", store_pg,
                 schema);
        return pathbuf;
    }
    snprintf(pathbuf, sizeof(pathbuf), "%s/%s", tmpdir, name);
    return pathbuf;
}

coord_store_t *open_ok(const char *path, unsigned keep)
{
    coord_store_opts_t o = {.keep_checkpoints = keep};
    coord_store_t *s = NULL;
    int rc = coord_store_open(path, &o, &s);

    if (rc != 0)
        fail_msg("open %s: %s: %s", path, sfl_strerror(rc), sfl_last_error());
    return s;
}

void make_agent(coord_agent_row_t *a, const char *name, uint8_t key)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "%s", name);
    memset(a->cert_fingerprint, 0xf0 ^ key, sizeof(a->cert_fingerprint));
    memset(a->identity_pk, key, sizeof(a->identity_pk));
    snprintf(a->capabilities, sizeof(a->capabilities), "mains,unmetered");
    a->samples = 100 + key;
    a->dimension = 1000;
    snprintf(a->labels, sizeof(a->labels), "-1,1");
}

int64_t add_agent(coord_store_t *s, const char *name, uint8_t key)
{
    coord_agent_row_t a;
    int64_t id = 0;

    make_agent(&a, name, key);
    assert_int_equal(coord_store_agent_upsert(s, &a, &id), 0);
    assert_true(id > 0);
    return id;
}

/* Deterministic model bytes for round r of the crash test. */
size_t model_len(int64_t r)
{
    return 20000 + (size_t)((r * 7919) % 40000);
}

void make_model(int64_t r, uint8_t *buf, size_t n)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(r + 1);

    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
}

void nonce_for(int64_t r, int64_t attempt, uint8_t nonce[COORD_NONCE_BYTES])
{
    for (int i = 0; i < COORD_NONCE_BYTES; i++)
        nonce[i] = (uint8_t)(r * 31 + attempt * 7 + i);
}

/* Drives round r through open -> training -> aggregating -> commit. */
void commit_round(coord_store_t *s, int64_t job, int64_t r, const int64_t *cohort, size_t n,
                  const uint8_t *model, size_t len)
{
    uint8_t nonce[COORD_NONCE_BYTES];
    int64_t attempt = 0;

    assert_int_equal(coord_store_round_next_attempt(s, job, r, &attempt), 0);
    nonce_for(r, attempt, nonce);
    assert_int_equal(coord_store_round_open(s, job, r, attempt, nonce, cohort, n), 0);
    assert_int_equal(
        coord_store_round_set_state(s, job, r, attempt, COORD_SROW_TRAINING, NULL), 0);
    assert_int_equal(
        coord_store_round_set_state(s, job, r, attempt, COORD_SROW_AGGREGATING, NULL), 0);
    assert_int_equal(coord_store_round_commit(s, job, r, attempt, model, len, NULL, NULL), 0);
}

void file_bytes(const char *path, uint8_t **out, size_t *n)
{
    FILE *f = fopen(path, "rb");
    long sz;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    sz = ftell(f);
    assert_true(sz >= 0);
    rewind(f);
    *out = malloc((size_t)sz + 1);
    assert_non_null(*out);
    assert_int_equal(fread(*out, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
}

void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

uint8_t *find_bytes(uint8_t *hay, size_t n, const uint8_t *needle, size_t k)
{
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            return hay + i;
    return NULL;
}

/* Runs one SQL statement on the file directly, behind the store's back. */
void raw_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;

    if (strncmp(path, "postgresql:", 11) == 0) {
        pg_exec(path + 11, sql);
        return;
    }
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The store's front: coord_store_open picks the database driver from the
 * store spec (sqlite:PATH, postgresql:CONNINFO, a bare path = sqlite) and
 * every other coord_store_* call dispatches through the store's ops table
 * (store_int.h): the one store logic (storelogic.c) over the driver
 * (db.h: db_sqlite.c, db_pg.c). */
#include "store/store.h"
#include "store/store_int.h"
#include "store/db.h"

#include <stdio.h>
#include <string.h>

#define SQLITE_PREFIX "sqlite:"
#define PG_PREFIX "postgresql:"

int coord_store_spec_parse(const char *spec, coord_store_backend_t *backend,
                           const char **location)
{
    if (spec == NULL || spec[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: the store spec is empty");
    if (strncmp(spec, "postgresql://", 13) == 0 || strncmp(spec, "postgres://", 11) == 0) {
        /* a libpq URI as it stands */
        *backend = COORD_STORE_POSTGRESQL;
        *location = spec;
    } else if (strncmp(spec, PG_PREFIX, strlen(PG_PREFIX)) == 0) {
        *backend = COORD_STORE_POSTGRESQL;
        *location = spec + strlen(PG_PREFIX);
    } else if (strncmp(spec, SQLITE_PREFIX, strlen(SQLITE_PREFIX)) == 0) {
        *backend = COORD_STORE_SQLITE;
        *location = spec + strlen(SQLITE_PREFIX);
    } else {
        *backend = COORD_STORE_SQLITE;
        *location = spec;
    }
    if ((*location)[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: '%s' names no %s", spec,
                         *backend == COORD_STORE_SQLITE ? "database file" : "conninfo");
    return 0;
}

/* Copies spec into dst with the value of every password keyword (conninfo
 * "password=..." or a URI's "user:PASSWORD@") replaced by "***". */
void coord_store_spec_mask(const char *spec, char *dst, size_t cap)
{
    size_t o = 0;

    if (cap == 0)
        return;
    for (const char *p = spec ? spec : ""; *p && o + 1 < cap;) {
        if (strncmp(p, "password", 8) == 0 && (p == spec || p[-1] == ' ' || p[-1] == '?' ||
                                               p[-1] == '&' || p[-1] == ':')) {
            const char *v = p + 8;

            while (*v == ' ')
                v++;
            if (*v == '=') {
                v++;
                while (*v == ' ')
                    v++;
                /* the keyword, "=***", then skip the value (quoted or not) */
                for (const char *k = p; k < p + 8 && o + 1 < cap; k++)
                    dst[o++] = *k;
                for (const char *m = "=***"; *m && o + 1 < cap; m++)
                    dst[o++] = *m;
                if (*v == '\'') {
                    for (v++; *v && *v != '\''; v++)
                        if (*v == '\\' && v[1])
                            v++;
                    if (*v)
                        v++;
                } else {
                    while (*v && *v != ' ' && *v != '&')
                        v++;
                }
                p = v;
                continue;
            }
        }
        /* URI: scheme://user:PASSWORD@host */
        if (strncmp(p, "://", 3) == 0) {
            const char *at = strchr(p + 3, '@'), *colon = strchr(p + 3, ':');
            const char *slash = strchr(p + 3, '/');

            if (at && colon && colon < at && (slash == NULL || at < slash)) {
                for (const char *k = p; k <= colon && o + 1 < cap; k++)
                    dst[o++] = *k;
                for (const char *m = "***"; *m && o + 1 < cap; m++)
                    dst[o++] = *m;
                p = at;
                continue;
            }
        }
        dst[o++] = *p++;
    }
    dst[o] = '\0';
}

int coord_store_open(const char *spec, const coord_store_opts_t *opts, coord_store_t **out)
{
    coord_store_backend_t b;
    const char *loc;
    int rc;

    if (out == NULL || spec == NULL || spec[0] == '\0')
        return sfl__fail(SFL_EINVAL, "store: path is missing");
    *out = NULL;
    if ((rc = coord_store_spec_parse(spec, &b, &loc)) != 0)
        return rc;
    return b == COORD_STORE_POSTGRESQL ? coord__pg_open(loc, opts, out)
                                       : coord__sq_open(loc, opts, out);
}

const char *coord_store_backend(const coord_store_t *s)
{
    if (s == NULL)
        return "none";
    return ((const db_store_t *)s)->drv->backend;
}

void coord_store_close(coord_store_t *s)
{
    if (s)
        s->ops->close(s);
}

void coord_store_fence(coord_store_t *s, int64_t epoch)
{
    if (s)
        s->ops->fence(s, epoch);
}

int coord_store_backup(coord_store_t *s, const char *dest, uint64_t *bytes)
{
    if (bytes)
        *bytes = 0;
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->backup(s, dest, bytes);
}

int coord_store_backup_path(const char *spec, const char *dest, uint64_t *bytes)
{
    coord_store_backend_t b;
    const char *loc;
    int rc;

    if (bytes)
        *bytes = 0;
    if (spec == NULL || spec[0] == '\0')
        return sfl__fail(SFL_EINVAL, "backup: the database path is missing");
    if ((rc = coord_store_spec_parse(spec, &b, &loc)) != 0)
        return rc;
    if (b == COORD_STORE_POSTGRESQL)
        return sfl__fail(SFL_EUNSUP, "backup: the store is PostgreSQL: back it up with "
                                     "pg_dump (or the server's own backups), not --backup");
    return coord__sq_backup_path(loc, dest, bytes);
}

int coord_store_read_only(coord_store_t *s)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->read_only(s);
}

int coord_store_batch_begin(coord_store_t *s)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->batch_begin(s);
}

int coord_store_batch_commit(coord_store_t *s)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->batch_commit(s);
}

int coord_store_integrity_check(coord_store_t *s)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->integrity_check(s);
}

int coord_store_recover(coord_store_t *s, const char *reason, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->recover(s, reason, n);
}

int coord_store_leader_try(coord_store_t *s, const char *holder, int64_t *epoch)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->leader_try(s, holder, epoch);
}

int coord_store_leader_get(coord_store_t *s, int64_t *epoch, char holder[128], int64_t *since_ms)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->leader_get(s, epoch, holder, since_ms);
}

int coord_store_leader_held(coord_store_t *s)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->leader_held(s);
}

int coord_store_master_seen(coord_store_t *s, const coord_master_row_t *m,
                            int64_t forget_before_ms)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->master_seen(s, m, forget_before_ms);
}

int coord_store_master_gone(coord_store_t *s, const char *holder)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->master_gone(s, holder);
}

int coord_store_master_list(coord_store_t *s, coord_master_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->master_list(s, out, n);
}

const char *coord_master_role_name(coord_master_role_t r)
{
    switch (r) {
    case COORD_MASTER_SINGLE: return "single";
    case COORD_MASTER_LEADER: return "leader";
    case COORD_MASTER_STANDBY: return "standby";
    }
    return "?";
}

int coord_store_agent_upsert(coord_store_t *s, const coord_agent_row_t *a, int64_t *id)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_upsert(s, a, id);
}

int coord_store_agent_rekey(coord_store_t *s, int64_t id, const uint8_t pk[COORD_KEY_BYTES])
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_rekey(s, id, pk);
}

int coord_store_cert_revoke(coord_store_t *s, const uint8_t fpr[COORD_FPR_BYTES], const char *name, int64_t now_ms)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->cert_revoke(s, fpr, name, now_ms);
}

int coord_store_revoked_list(coord_store_t *s, uint8_t (**out)[COORD_FPR_BYTES], size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->revoked_list(s, out, n);
}

int coord_store_quarantine_add(coord_store_t *s, int64_t job, int64_t agent, const char *reason, int64_t now_ms)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->quarantine_add(s, job, agent, reason, now_ms);
}

int coord_store_quarantine_release(coord_store_t *s, int64_t job, int64_t agent)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->quarantine_release(s, job, agent);
}

int coord_store_quarantine_list(coord_store_t *s, coord_quar_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->quarantine_list(s, out, n);
}

int coord_store_stats_open(coord_store_t *s, int64_t job, int64_t attempt)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->stats_open(s, job, attempt);
}

int coord_store_stats_commit(coord_store_t *s, int64_t job, const uint8_t *moments, size_t len, const uint8_t hash[COORD_HASH_BYTES], int64_t rows, int64_t agents)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->stats_commit(s, job, moments, len, hash, rows, agents);
}

int coord_store_stats_get(coord_store_t *s, int64_t job, size_t max, coord_stats_row_t *out)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->stats_get(s, job, max, out);
}

int coord_store_agent_touch(coord_store_t *s, int64_t id)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_touch(s, id);
}

int coord_store_agent_get(coord_store_t *s, int64_t id, coord_agent_row_t *out)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_get(s, id, out);
}

int coord_store_agent_get_by_name(coord_store_t *s, const char *name, coord_agent_row_t *out)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_get_by_name(s, name, out);
}

int coord_store_agent_list(coord_store_t *s, coord_agent_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->agent_list(s, out, n);
}

int coord_store_job_create(coord_store_t *s, const char *name, const uint8_t *spec, size_t spec_len, uint64_t seed, int64_t *id)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->job_create(s, name, spec, spec_len, seed, id);
}

int coord_store_job_get(coord_store_t *s, int64_t id, size_t max_spec, coord_job_row_t *out)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->job_get(s, id, max_spec, out);
}

int coord_store_job_list(coord_store_t *s, size_t max_spec, coord_job_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->job_list(s, max_spec, out, n);
}

int coord_store_job_set_state(coord_store_t *s, int64_t id, coord_job_state_t state)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->job_set_state(s, id, state);
}

int coord_store_job_fail(coord_store_t *s, int64_t id, const char *error, int64_t now_ms)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->job_fail(s, id, error, now_ms);
}

int coord_store_round_open(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, const uint8_t nonce[COORD_NONCE_BYTES], const int64_t *cohort, size_t n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_open(s, job, round, attempt, nonce, cohort, n);
}

int coord_store_round_next_attempt(coord_store_t *s, int64_t job, int64_t round, int64_t *attempt)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_next_attempt(s, job, round, attempt);
}

int coord_store_round_set_state(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, coord_srow_state_t state, const char *reason)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_set_state(s, job, round, attempt, state, reason);
}

int coord_store_round_commit(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, const uint8_t *model, size_t len, const sfl_round_metrics_t *metrics, uint8_t hash[COORD_HASH_BYTES])
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_commit(s, job, round, attempt, model, len, metrics, hash);
}

int coord_store_history(coord_store_t *s, int64_t job, int64_t after_round, size_t limit, coord_history_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->history(s, job, after_round, limit, out, n);
}

int coord_store_round_get(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, size_t max_cohort, coord_round_row_t *out)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_get(s, job, round, attempt, max_cohort, out);
}

int coord_store_round_list(coord_store_t *s, int64_t job, size_t max_cohort, coord_round_row_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->round_list(s, job, max_cohort, out, n);
}

int coord_store_participation_record(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, int64_t agent, coord_part_status_t status, const char *reason, int64_t bytes)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->participation_record(s, job, round, attempt, agent, status, reason, bytes);
}

int coord_store_participation_batch(coord_store_t *s, const coord_part_row_t *rows, size_t n, size_t *skipped)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->participation_batch(s, rows, n, skipped);
}

int coord_store_participation_list(coord_store_t *s, int64_t job, int64_t round, int64_t attempt, coord_participation_t **out, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->participation_list(s, job, round, attempt, out, n);
}

int coord_store_checkpoint_latest(coord_store_t *s, int64_t job, size_t max_len, int64_t *round, uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->checkpoint_latest(s, job, max_len, round, model, len, hash);
}

int coord_store_checkpoint_get(coord_store_t *s, int64_t job, int64_t round, size_t max_len, uint8_t **model, size_t *len, uint8_t hash[COORD_HASH_BYTES])
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->checkpoint_get(s, job, round, max_len, model, len, hash);
}

int coord_store_checkpoint_rounds(coord_store_t *s, int64_t job, int64_t **rounds, size_t *n)
{
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return s->ops->checkpoint_rounds(s, job, rounds, n);
}

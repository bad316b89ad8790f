/* Jobs: created (CreateJob, the jobs of coordinator.ini), loaded from the
 * store at start, their O(dim) state allocated when a round first needs it
 * and released when they stop running. */
#include "coord_int.h"
#include "round/jobs.h"
#include "round/driver.h"
#include "round/quarantine.h"
#include "round/suspect.h"
#include "round/coordwrite.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

void coord_job_free(coord_job_t *j)
{
    if (j == NULL)
        return;
    coord_close_attempt(j);
    coord_round_close(&j->rnd);
    if (j->ready)
        coord_model_close(&j->model);
    if (j->shape != NULL)
        j->shape->free(j);
    coord_quarantine_free(j);
    coord_suspect_free(j);
    sfl__free(j->claims);
    sfl__free(j->work_buf);
    sfl__free(j->moments);
    sfl__free(j);
}

/* A standardize job's statistics from the store: the moments when its
 * statistics round committed (checked: length, hash, the standardizer
 * accepts them), else the round to run (without moments its rounds take
 * the statistics shape: coord_shape_for), its attempts numbered on from
 * those a crashed coordinator opened. */
void coord_job_metric_kind(const coord_job_t *j, sfl_metric_job_t *k)
{
    const sfl_algo_t *a = j->model.algo;

    k->classification = strcmp(j->spec.loss, "lsq") != 0;
    k->personalized = k->classification && a != NULL && a->shape == SFL_SHAPE_PERSONALIZED &&
                      a->personal_model != NULL;
    k->vertical = a != NULL && a->shape == SFL_SHAPE_VERTICAL;
}

static int job_stats_load(coord_job_t *j)
{
    coord_stats_row_t row;
    size_t n = SFL_MOMENTS_LEN(j->spec.dimension);
    uint8_t h[SFL_MSG_HASH_BYTES];
    double *m = NULL, *mu = NULL;
    int rc;

    if (!j->spec.standardize)
        return 0;
    rc = coord_store_stats_get(j->co->store, (int64_t)j->id, n * 8, &row);
    if (rc == SFL_ENOTFOUND) {
        row.attempts = 0;
        row.moments = NULL;
    } else if (rc < 0)
        return rc;
    if (row.moments == NULL) {
        j->used_round = 0;
        j->used = row.attempts > 0 && row.attempts < UINT32_MAX ? (uint32_t)row.attempts : 0;
        return 0;
    }
    if ((m = sfl__mallocarray(n, sizeof(double))) == NULL ||
        (mu = sfl__mallocarray(2 * (size_t)j->spec.dimension, sizeof(double))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the job's moments");
        goto out;
    }
    if ((rc = sfl_msg_values_decode(row.moments, row.len, n, 0, m)) < 0)
        goto out;
    sfl_msg_moments_hash(m, n, h);
    if (sodium_memcmp(h, row.hash, sizeof(h)) != 0) {
        rc = sfl__fail(SFL_EPARSE, "the stored moments do not match their hash");
        goto out;
    }
    if ((rc = sfl_moments_standardizer(m, j->spec.dimension, coord_job_std_eps(&j->spec), mu,
                                       mu + j->spec.dimension)) < 0)
        goto out;
    sfl__free(j->moments);
    j->moments = m;
    m = NULL;
    memcpy(j->moments_hash, h, sizeof(h));
    j->moments_rows = row.rows > 0 ? (uint64_t)row.rows : 0;
    j->moments_agents = row.agents > 0 && row.agents < UINT32_MAX ? (uint32_t)row.agents : 0;
out:
    if (rc < 0)
        rc = sfl__wrap(rc, "job %llu statistics", (unsigned long long)j->id);
    sfl__free(mu);
    sfl__free(m);
    coord_store_free(row.moments);
    return rc;
}

static int job_insert(coord_t *co, coord_job_t *j)
{
    if (co->njobs == co->cap_jobs) {
        size_t cap = co->cap_jobs ? 2 * co->cap_jobs : 8;
        coord_job_t **nj = sfl__reallocarray(co->jobs, cap, sizeof(*nj));

        if (nj == NULL)
            return SFL_ENOMEM;
        co->jobs = nj;
        co->cap_jobs = cap;
    }
    co->jobs[co->njobs++] = j;
    return 0;
}

/* Model, aggregator and round machine of a job whose spec is set. */
/* Sets the job up without its O(dim) state (job_model loads that when a
 * round first needs it): committed is its last committed round, and the
 * status shows that round's metrics. */
static int job_prepare(coord_job_t *j, uint64_t committed)
{
    int64_t next = 1;
    int rc;

    if ((rc = coord_model_setup(&j->model, &j->spec)) < 0)
        return rc;
    j->ready = 1;
    j->committed = committed;
    j->used_round = committed + 1;
    if ((rc = coord_store_round_next_attempt(j->co->store, (int64_t)j->id,
                                             (int64_t)committed + 1, &next)) < 0)
        return rc;
    j->used = next > 1 ? (uint32_t)(next - 1) : 0;
    if ((rc = job_stats_load(j)) < 0)
        return rc;
    coord_load_last_metrics(j);
    j->model_nnz = j->last.model_nnz;
    coord_reset_round(j); /* the job takes its shape */
    j->shape->load(j);
    return 0;
}

/* The job's O(dim) state, from its last checkpoint: allocated when a round
 * is about to open, freed when the job pauses or ends (job_release). */
int coord_job_model(coord_job_t *j)
{
    int rc;

    if (j->model.global != NULL)
        return 0;
    if ((rc = coord_model_open(&j->model)) < 0)
        return rc;
    if ((rc = coord_reload_model(j)) < 0 || (rc = j->shape->model(j)) < 0)
        coord_model_close(&j->model);
    return rc;
}

/* Creating a job: its row (and PAUSED for a job created paused), then the
 * job here, then the answer. */
typedef struct {
    coord_write_op_t op;
    coord_t *co;
    coord_job_t *j;             /* owned until inserted */
    uint8_t *bytes;       /* the packed spec */
    size_t len;
    uint64_t need;        /* its model state, counted in creating_bytes */
    int64_t id;
    coord_created_cb after;
    void *ud;
} create_op_t;

static int create_run(coord_store_t *s, coord_write_op_t *op)
{
    create_op_t *o = (create_op_t *)op;
    int rc;

    if ((rc = coord_store_job_create(s, o->j->spec.name, o->bytes, o->len, o->j->spec.seed,
                                     &o->id)) < 0)
        return rc;
    if (o->j->spec.paused && (rc = coord_store_job_set_state(s, o->id, COORD_JOB_PAUSED)) < 0) {
        /* The row exists; mark it so a restart does not run it. */
        if (coord_store_job_set_state(s, o->id, COORD_JOB_CANCELLED) < 0)
            return sfl__wrap(rc, "job %lld is recorded running: neither paused nor cancelled",
                             (long long)o->id);
        return rc;
    }
    return 0;
}

static void create_done(coord_write_op_t *op)
{
    create_op_t *o = (create_op_t *)op;
    coord_t *co = o->co;
    coord_job_t *j = o->j, *made = NULL;
    const char *err = op->error;
    int rc = op->abandoned ? -ECANCELED : op->rc;

    co->creating_bytes -= o->need;
    co->creating_jobs--;
    if (rc == 0) {
        j->id = (uint64_t)o->id;
        if ((rc = job_prepare(j, 0)) < 0 || (rc = job_insert(co, j)) < 0) {
            err = sfl_last_error();
            coord_write_job_state(co, j->id, COORD_JOB_CANCELLED, NULL, NULL);
        } else {
            coord_log(COORD_LOG_INFO, "job_created", "job=%llu name=%s algorithm=%s state=%s",
                      (unsigned long long)j->id, j->spec.name, j->spec.algorithm,
                      sfl_msg_job_state_name(j->state));
            made = j;
            j = NULL;
        }
    }
    o->after(co, made, rc, err, o->ud);
    coord_job_free(j);
    sfl_msg_buf_free(o->bytes);
    sfl__free(o);
    if (made != NULL && !co->stopping)
        coord_schedule(co);
}

static int job_create(coord_t *co, const sfl_job_spec_t *spec, int now, coord_created_cb after,
                      void *ud)
{
    sfl_problem_t prob;
    uint64_t live, need;
    create_op_t *o;
    int rc;

    if ((rc = coord_job_spec_check(spec)) < 0)
        return rc;
    /* Every live job costs a scheduler pass each tick, rows and a line in
     * every listing: bounded in number too, counting those being recorded. */
    if (coord_live_jobs(co) + co->creating_jobs >= co->cfg.max_live_jobs)
        return sfl__fail(-ENOSPC, "%llu jobs are live (pending, running or paused), "
                         "max_live_jobs is %llu: cancel one or raise the limit",
                         (unsigned long long)(coord_live_jobs(co) + co->creating_jobs),
                         (unsigned long long)co->cfg.max_live_jobs);
    /* Its model travels in tasks: it must fit the message limits. */
    if ((rc = sfl_problem_init(&prob, sfl_loss_find(spec->loss), spec->dimension,
                               spec->nlabels)) < 0)
        return rc;
    if (prob.dim > co->lim.max_dim)
        return sfl__fail(SFL_EINVAL, "the job's model has %zu entries, above the "
                         "coordinator's max_dim %u", prob.dim, co->lim.max_dim);
    /* Every job not ended holds its O(dim) state: bounded in sum, counting
     * the jobs still being recorded. */
    live = coord_live_job_bytes(co) + co->creating_bytes;
    need = coord_job_state_bytes(prob.dim);
    if (need > co->cfg.max_job_memory || live > co->cfg.max_job_memory - need)
        return sfl__fail(-ENOSPC, "the job needs %llu bytes of model state, %llu of "
                         "max_job_memory %llu are held by jobs not ended",
                         (unsigned long long)need, (unsigned long long)live,
                         (unsigned long long)co->cfg.max_job_memory);
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL || (o->j = sfl__calloc(1, sizeof(*o->j))) == NULL) {
        sfl__free(o);
        return SFL_ENOMEM;
    }
    if ((rc = sfl_msg_create_job_pack(spec, &o->bytes, &o->len)) < 0) {
        sfl__free(o->j);
        sfl__free(o);
        return rc;
    }
    o->op.run = create_run;
    o->op.done = create_done;
    o->co = co;
    o->j->co = co;
    o->j->shape = &coord_shape_plain; /* its own once prepared */
    o->j->spec = *spec;
    o->j->state = spec->paused ? SFL_JOB_PENDING : SFL_JOB_RUNNING;
    o->need = need;
    o->after = after;
    o->ud = ud;
    co->creating_bytes += need;
    co->creating_jobs++;
    if (now)
        coord_writer_call(co->writer, &o->op); /* the result goes to after */
    else
        coord_writer_post(co->writer, &o->op);
    return 0;
}

int coord_job_create(coord_t *co, const sfl_job_spec_t *spec, coord_created_cb after, void *ud)
{
    return job_create(co, spec, 0, after, ud);
}

/* coord_add_jobdef's answer, written where it waits. */
typedef struct {
    int rc;
    uint64_t id;
    char error[SFL_MSG_TEXT_LEN];
} jobdef_result_t;

static void jobdef_created(coord_t *co, coord_job_t *j, int rc, const char *error, void *ud)
{
    jobdef_result_t *r = ud;

    (void)co;
    r->rc = rc;
    r->id = j ? j->id : 0;
    snprintf(r->error, sizeof(r->error), "%s", error ? error : "");
}

int coord_add_jobdef(coord_t *c, const coord_jobdef_t *d, uint64_t *id, int *created)
{
    jobdef_result_t r = {0};
    sfl_job_spec_t w;
    int rc;

    if (created)
        *created = 0;
    if ((rc = coord_jobdef_wire(d, &w)) < 0)
        return rc;
    for (size_t i = 0; i < c->njobs; i++)
        if (strcmp(c->jobs[i]->spec.name, w.name) == 0) {
            if (id)
                *id = c->jobs[i]->id;
            return 0;
        }
    /* At startup, before the loop serves: waiting on the writer is fine. */
    if ((rc = job_create(c, &w, 1, jobdef_created, &r)) < 0)
        return rc;
    if (r.rc < 0)
        return sfl__fail(r.rc, "%s", r.error);
    if (id)
        *id = r.id;
    if (created)
        *created = 1;
    return 0;
}

/* A job row from the store at start. */
int coord_job_load(coord_t *co, const coord_job_row_t *row)
{
    coord_job_t *j = sfl__calloc(1, sizeof(*j));
    char q[300];
    int rc;

    if (j == NULL)
        return SFL_ENOMEM;
    j->co = co;
    j->shape = &coord_shape_plain; /* its own once prepared */
    j->id = (uint64_t)row->id;
    switch (row->state) {
    case COORD_JOB_ACTIVE: j->state = SFL_JOB_RUNNING; break;
    case COORD_JOB_PAUSED: j->state = SFL_JOB_PAUSED; break;
    case COORD_JOB_CANCELLED: j->state = SFL_JOB_CANCELLED; break;
    case COORD_JOB_FAILED: j->state = SFL_JOB_FAILED; break;
    default: j->state = SFL_JOB_FINISHED; break;
    }
    coord_text_copy(j->error, sizeof(j->error), row->error);
    rc = sfl_msg_create_job_unpack(row->spec, row->spec_len, NULL, &j->spec);
    if (rc == 0)
        rc = job_prepare(j, (uint64_t)row->last_committed_round);
    if (rc == SFL_ENOMEM) {
        coord_job_free(j);
        return rc;
    }
    if (rc < 0) {
        /* Kept visible (Status, ListJobs) but never run. */
        snprintf(j->spec.name, sizeof(j->spec.name), "%.63s", row->name);
        snprintf(j->error, sizeof(j->error), "cannot load the job: %.200s", sfl_last_error());
        j->state = SFL_JOB_FAILED;
        coord_log(COORD_LOG_ERROR, "job_load_failed", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(j->error, q, sizeof(q)));
    } else if (j->state == SFL_JOB_PAUSED && j->committed == 0 && j->wire_attempt == 0) {
        j->state = SFL_JOB_PENDING; /* never started */
    }
    if ((rc = job_insert(co, j)) < 0) {
        coord_job_free(j);
        return rc;
    }
    coord_job_release(j);
    if (j->ready)
        coord_log(COORD_LOG_INFO, "job_resumed",
                  "job=%llu name=%s state=%s committed_round=%llu next_attempt=%u",
                  (unsigned long long)j->id, j->spec.name, sfl_msg_job_state_name(j->state),
                  (unsigned long long)j->committed, j->wire_attempt);
    return 0;
}

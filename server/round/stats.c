/* The statistics round (stats.h): before a standardize job's first
 * training round, every member sends its moments - sealed like an update
 * (held by slot in fstat.c) or as a secure aggregation round's input
 * (saround.c) - and the commit stores their sum with the job; every
 * training task carries them from then on. */
#include "coord_int.h"
#include "round/driver.h"
#include "round/shape.h"
#include "round/stats.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"

/* The statistics round's one mode-2 session (never grouped), or NULL. */
static coord_sa_t *st_sa(coord_job_t *j)
{
    return j->model.spec.secagg ? &j->kst.stats.sa : NULL;
}

static void st_free(coord_job_t *j)
{
    coord_stats_t *st = &j->kst.stats;

    coord_saround_free(&st->sa);
    coord_fstat_close(&st->fstat);
    sfl__free(st->work_moments);
    memset(st, 0, sizeof(*st));
}

/* Round 0, with the statistics round's config (no algorithm phases). */
static void st_plan(const coord_job_t *j, uint64_t *round, coord_round_cfg_t *cfg)
{
    *round = 0;
    coord_job_stats_cfg(&j->spec, cfg);
}

static int st_draw(coord_job_t *j, uint64_t *ids, uint32_t *n)
{
    return st_sa(j) ? coord_saround_draw(j, ids, n) : 0;
}

static int st_open(coord_job_t *j)
{
    coord_sa_t *s = st_sa(j);
    int rc;

    if (s != NULL && (rc = coord_saround_prepare(j, s, 1)) < 0)
        return rc;
    return coord_fstat_begin(&j->kst.stats.fstat, j->spec.dimension, j->rnd.nmembers);
}

/* The task carries no model (all zeros) and asks for the moments. */
static int st_task(const coord_job_t *j, sfl_task_t *t, sfl_msg_sa_round_t *sa, uint32_t g)
{
    const coord_sa_t *s = st_sa((coord_job_t *)j);

    (void)g;
    t->statistics = 1;
    if (s != NULL) {
        coord_saround_task(j, s, sa);
        t->update_mode = SFL_UPDATE_MODE_SECURE_AGG;
        t->secagg = sa;
    }
    return sfl_spvec_new((uint32_t)j->model.prob.dim, 0, &t->model);
}

static int st_start(coord_job_t *j)
{
    coord_sa_t *s = st_sa(j);

    return s ? coord_saround_start(j, s) : 0;
}

static void st_sync(coord_job_t *j)
{
    coord_sa_t *s = st_sa(j);

    if (s != NULL)
        (void)coord_saround_sync(j, s); /* a stage short of t fails at its deadline */
}

/* A member's moments, always float64. */
static void st_limits(const coord_job_t *j, sfl_msg_limits_t *lim, sfl_enc_t *enc)
{
    lim->max_dim = lim->max_nnz = (uint32_t)SFL_MOMENTS_LEN(j->spec.dimension);
    *enc = SFL_ENC_F64;
}

/* ... checked against the rows the member joined with (fstat.h). */
static int st_check(const sfl_payload_t *p, uint32_t features, uint64_t bound)
{
    return coord_fstat_check(p->update, features, p->samples, bound);
}

static int st_add(coord_job_t *j, uint32_t slot, sfl_payload_t *p)
{
    return coord_fstat_add(&j->kst.stats.fstat, slot, p->update);
}

static void st_record(coord_job_t *j)
{
    coord_sa_t *s = st_sa(j);

    if (s != NULL)
        coord_saround_record(j, s);
}

/* Thread pool: the sum, encoded and hashed for the store. */
static int st_fold(coord_job_t *j)
{
    coord_stats_t *st = &j->kst.stats;
    coord_sa_t *s = st_sa(j);
    size_t n = SFL_MOMENTS_LEN(j->spec.dimension);
    int rc;

    if ((st->work_moments = sfl__mallocarray(n, sizeof(double))) == NULL ||
        (j->work_buf = sfl__mallocarray(n, 8)) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the statistics");
    if ((rc = s ? coord_saround_stats(j, s, st->work_moments, &j->work_nnz)
                : coord_fstat_end(&st->fstat, st->work_moments, &j->work_nnz)) < 0 ||
        (rc = sfl_msg_values_encode(st->work_moments, n, 0, j->work_buf)) < 0)
        return rc;
    j->work_len = n * 8;
    sfl_msg_moments_hash(st->work_moments, n, j->work_hash);
    return 0;
}

/* The statistics round's commit: the pooled moments with the job. */
typedef struct {
    coord_write_op_t op;
    coord_job_t *j;
    const uint8_t *buf; /* j->work_buf: the job stays busy until done */
    size_t len;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int64_t rows, agents;
} stats_op_t;

static int stats_run(coord_store_t *s, coord_write_op_t *op)
{
    stats_op_t *o = (stats_op_t *)op;

    return coord_store_stats_commit(s, (int64_t)o->j->id, o->buf, o->len, o->hash, o->rows,
                                    o->agents);
}

static void stats_done(coord_write_op_t *op)
{
    stats_op_t *o = (stats_op_t *)op;

    coord_commit_outcome(o->j, op);
    sfl__free(o);
}

static int st_commit(coord_job_t *j)
{
    stats_op_t *so = sfl__calloc(1, sizeof(*so));

    if (so == NULL)
        return SFL_ENOMEM;
    so->op.run = stats_run;
    so->op.done = stats_done;
    so->j = j;
    so->buf = j->work_buf;
    so->len = j->work_len;
    memcpy(so->hash, j->work_hash, sizeof(so->hash));
    so->rows = (int64_t)j->kst.stats.work_moments[0];
    so->agents = j->work_nnz;
    coord_writer_post(j->co->writer, &so->op);
    return 0;
}

static int st_settle(coord_job_t *j, char *sus, size_t cap, uint32_t *n3)
{
    coord_sa_t *s = st_sa(j);

    *n3 = 0;
    return s ? coord_saround_settle(j, s, sus, cap, n3) : 0;
}

/* The sum (work_moments) stays for committed or failed. */
static void st_close(coord_job_t *j)
{
    coord_sa_t *s = st_sa(j);

    if (s != NULL)
        coord_saround_close(j, s);
    coord_fstat_close(&j->kst.stats.fstat);
}

/* Stored: the moments go into every training task from now on (the job's
 * next round takes its training shape: coord_shape_for). */
static void st_committed(coord_job_t *j)
{
    char hex[17];

    sfl__free(j->moments);
    j->moments = j->kst.stats.work_moments;
    j->kst.stats.work_moments = NULL;
    memcpy(j->moments_hash, j->work_hash, sizeof(j->moments_hash));
    j->moments_rows = (uint64_t)j->moments[0];
    j->moments_agents = j->work_nnz;
    sodium_bin2hex(hex, sizeof(hex), j->moments_hash, 8);
    coord_log(COORD_LOG_INFO, "statistics_committed",
              "job=%llu attempt=%u agents=%u rows=%llu features=%u moments_hash=%s",
              (unsigned long long)j->id, j->wire_attempt, j->moments_agents,
              (unsigned long long)j->moments_rows, j->spec.dimension, hex);
}

static void st_failed(coord_job_t *j, int unattributable, const char *sus, uint32_t n3)
{
    char q[300];

    (void)unattributable, (void)sus, (void)n3; /* blamed in settle; never excused */
    sfl__free(j->kst.stats.work_moments);
    j->kst.stats.work_moments = NULL;
    coord_log(COORD_LOG_ERROR, "aggregation_failed", "job=%llu round=0 attempt=%u error=%s",
              (unsigned long long)j->id, j->wire_attempt,
              coord_log_quote(j->work_err, q, sizeof(q)));
    coord_job_step(j, COORD_EV_AGG_FAILED);
    snprintf(j->rnd.reason, sizeof(j->rnd.reason), "statistics failed: %.100s", j->work_err);
}

const coord_shape_t coord_shape_statistics = {
    .name = "statistics",
    .free = st_free,
    .plan = st_plan,
    .load = coord_shape_nop_load,
    .model = coord_shape_nop_model,
    .ineligible = coord_shape_rows,
    .cohort = coord_shape_nop_cohort,
    .admit = coord_shape_nop_admit,
    .draw = st_draw,
    .open = st_open,
    .ntasks = coord_shape_one_task,
    .task_of = coord_shape_task_zero,
    .task = st_task,
    .start = st_start,
    .sync = st_sync,
    .resend = coord_shape_nop_resend,
    .limits = st_limits,
    .check = st_check,
    .add = st_add,
    .record = st_record,
    .fold = st_fold,
    .commit = st_commit,
    .settle = st_settle,
    .close = st_close,
    .committed = st_committed,
    .failed = st_failed,
    .status = coord_shape_nop_status,
};

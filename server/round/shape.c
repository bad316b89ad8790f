/* The round kinds' table (shape.h): which kind a job's next round is, and
 * what the training kinds (plain, secure aggregation, vertical) share: a
 * round after the last committed one, the global model in the task, mode
 * 1's answers into the aggregator, the checkpoint and its commit. */
#include "coord_int.h"
#include "round/coordwrite.h"
#include "round/driver.h"
#include "round/shape.h"

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

#include <sys/param.h> /* MAX */

const coord_shape_t *coord_shape_for(const coord_job_t *j)
{
    if (j->spec.standardize && j->moments == NULL)
        return &coord_shape_statistics;
    if (j->model.v != NULL)
        return &coord_shape_vertical;
    if (j->model.spec.secagg)
        return &coord_shape_secagg;
    return &coord_shape_plain;
}

void coord_shape_set(coord_job_t *j)
{
    const coord_shape_t *s = coord_shape_for(j);

    if (s == j->shape)
        return;
    j->shape->free(j);
    memset(&j->kst, 0, sizeof(j->kst));
    j->shape = s;
}

void coord_shape_nop(coord_job_t *j)
{
    (void)j;
}

int coord_shape_nop_model(coord_job_t *j)
{
    (void)j;
    return 0;
}

void coord_shape_nop_load(coord_job_t *j)
{
    (void)j;
}

void coord_shape_nop_cohort(coord_job_t *j, uint64_t *ids, uint32_t *n, char *extra, size_t cap)
{
    (void)j, (void)ids, (void)n, (void)cap;
    extra[0] = '\0';
}

int coord_shape_nop_admit(coord_job_t *j, char *why, size_t cap)
{
    (void)j, (void)why, (void)cap;
    return 0;
}

int coord_shape_nop_draw(coord_job_t *j, uint64_t *ids, uint32_t *n)
{
    (void)j, (void)ids, (void)n;
    return 0;
}

int coord_shape_nop_start(coord_job_t *j)
{
    (void)j;
    return 0;
}

void coord_shape_nop_resend(coord_job_t *j, coord_agent_t *a)
{
    (void)j, (void)a;
}

uint32_t coord_shape_one_task(const coord_job_t *j)
{
    (void)j;
    return 1;
}

uint32_t coord_shape_task_zero(const coord_job_t *j, uint64_t agent)
{
    (void)j, (void)agent;
    return 0;
}

int coord_shape_nop_settle(coord_job_t *j, char *sus, size_t cap, uint32_t *n3)
{
    (void)j, (void)sus, (void)cap;
    *n3 = 0;
    return 0;
}

void coord_shape_nop_status(const coord_job_t *j, sfl_job_status_t *st)
{
    (void)j, (void)st;
}

/* Agents widen narrower local data to the task's dimension (a LibSVM
 * shard need not use the last column); wider data cannot fit. */
coord_inelig_t coord_shape_rows(const coord_job_t *j, const coord_agent_t *a, uint32_t *dim,
                                char *why, size_t cap)
{
    *dim = MAX(a->ds.dimension, j->model.spec.dimension);
    if (a->ds.first_column != 0) {
        snprintf(why, cap, "holds a column block (vertical data), the job takes whole rows");
        return COORD_INELIG_FEATURES;
    }
    return COORD_INELIG_NONE;
}

void coord_shape_plan_train(const coord_job_t *j, uint64_t *round, coord_round_cfg_t *cfg)
{
    *round = j->committed + 1;
    *cfg = j->model.rcfg;
}

int coord_shape_task_global(const coord_job_t *j, sfl_task_t *t)
{
    int rc;

    if ((rc = sfl_spvec_new((uint32_t)j->model.prob.dim, 0, &t->model)) < 0)
        return rc;
    return sfl_spvec_from_dense(t->model, j->model.global + j->model.dim - t->model->dim);
}

void coord_shape_limits_model(const coord_job_t *j, sfl_msg_limits_t *lim, sfl_enc_t *enc)
{
    (void)j, (void)lim, (void)enc;
}

int coord_shape_check_model(const sfl_payload_t *p, uint32_t features, uint64_t bound)
{
    (void)p, (void)features, (void)bound;
    return 0;
}

int coord_shape_add_model(coord_job_t *j, uint32_t slot, sfl_payload_t *p)
{
    return coord_model_add(&j->model, slot, &p->update, (double)p->samples);
}

int coord_shape_checkpoint(coord_job_t *j)
{
    int rc = coord_model_encode(&j->model, &j->work_buf, &j->work_len, j->work_hash);

    if (rc == 0) {
        j->work_nnz = (uint32_t)sfl_dvec_nnz(j->model.global, j->model.prob.dim);
        j->work_metrics.model_nnz = j->work_nnz;
    }
    return rc;
}

int coord_shape_fold_model(coord_job_t *j, int (*end)(coord_job_t *j))
{
    size_t d = j->model.prob.dim;
    uint8_t *was = sfl__malloc(d / 8 + 1);
    int rc;

    if (was == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the support");
    sfl_dvec_support_bits(j->model.global, d, was); /* before the round ends */
    rc = end(j);
    if (rc == 0)
        rc = coord_shape_checkpoint(j);
    if (rc == 0)
        j->work_metrics.support_churn = sfl_dvec_support_bits_diff(was, j->model.global, d);
    sfl__free(was);
    return rc;
}

/* The commit: the round, its checkpoint and metrics in one transaction. */
typedef struct {
    coord_write_op_t op;
    coord_job_t *j;
    int64_t round, attempt;
    sfl_round_metrics_t metrics;
    const uint8_t *buf; /* j->work_buf: the job stays busy until done */
    size_t len;
} commit_op_t;

static int commit_run(coord_store_t *s, coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;

    return coord_store_round_commit(s, (int64_t)o->j->id, o->round, o->attempt, o->buf, o->len,
                                    &o->metrics, NULL);
}

static void commit_done(coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;

    coord_commit_outcome(o->j, op);
    sfl__free(o);
}

int coord_shape_commit_model(coord_job_t *j)
{
    commit_op_t *o = sfl__calloc(1, sizeof(*o));

    if (o == NULL)
        return SFL_ENOMEM;
    o->op.run = commit_run;
    o->op.done = commit_done;
    o->j = j;
    o->round = (int64_t)j->rnd.round;
    o->attempt = (int64_t)j->wire_attempt + 1;
    o->metrics = j->work_metrics;
    o->buf = j->work_buf;
    o->len = j->work_len;
    coord_part_flush(j->co); /* the attempt's records in before its commit */
    coord_writer_post(j->co->writer, &o->op);
    return 0;
}

void coord_shape_committed_model(coord_job_t *j)
{
    coord_t *co = j->co;
    char hex[65];

    j->committed = j->model.round;
    j->model_nnz = j->work_nnz;
    j->last = j->work_metrics;
    co->rounds_committed++;
    coord_hist_observe(&co->agg_hist, (double)j->work_ns / 1e9);
    sodium_bin2hex(hex, sizeof(hex), j->model_hash, 8);
    coord_log(COORD_LOG_INFO, "round_committed",
              "job=%llu round=%llu attempt=%u accepted=%u nnz=%u aggregate_ms=%.3f "
              "train_loss=%.6g eval_samples=%llu eval_accuracy=%.6g "
              "personal_accuracy=%.6g eval_mse=%.6g",
              (unsigned long long)j->id, (unsigned long long)j->committed, j->wire_attempt,
              j->rnd.accepted, j->model_nnz, (double)j->work_ns / 1e6, j->last.train_loss,
              (unsigned long long)j->last.eval_samples, j->last.eval_accuracy,
              j->last.personal_accuracy, j->last.eval_mse);
}

void coord_shape_failed_model(coord_job_t *j, int unattributable, const char *sus, uint32_t n3)
{
    char q[300];

    (void)n3;
    coord_log(COORD_LOG_ERROR, "aggregation_failed",
              "job=%llu round=%llu attempt=%u attributable=%s suspects=\"%s\" error=%s",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
              unattributable ? "no" : "-", sus, coord_log_quote(j->work_err, q, sizeof(q)));
    /* The model may have moved (end ran, the commit did not): back to the
     * last committed state. */
    if (coord_reload_model(j) < 0) {
        char why[SFL_MSG_TEXT_LEN];

        snprintf(why, sizeof(why), "cannot reload the last checkpoint: %s", sfl_last_error());
        coord_fail_job(j, why);
    }
    coord_job_step(j, COORD_EV_AGG_FAILED);
    /* the reason the attempt failed says why (a secure sum out of bounds,
     * say), not only that it did */
    snprintf(j->rnd.reason, sizeof(j->rnd.reason), "aggregation failed: %.100s", j->work_err);
}

/* The vertical shape's driver pieces (sfl/algo/vertical.h): the balanced column
 * split, the job check, the streams of a client's step, the privacy spent. */
#include "sfl/algo/vertical.h"

#include <math.h>
#include <string.h>

#include "algo_int.h"
#include "sfl/dp/dp.h"

int sfl_vertical_block(uint32_t d, uint32_t K, uint32_t k, uint32_t *col0, uint32_t *len)
{
    uint32_t base, extra;

    if (K == 0 || K > d || k >= K)
        return sfl__fail(SFL_EINVAL, "cannot give block %u of %u blocks of %u columns", k, K,
                         d);
    /* eq. 11 writes d/K columns each; the first d mod K take one more */
    base = d / K;
    extra = d % K;
    *col0 = k * base + (k < extra ? k : extra);
    *len = base + (k < extra);
    return 0;
}

int sfl_vertical_check(const sfl_vjob_t *job)
{
    const sfl_algo_t *a = job->algo;
    const sfl_problem_t *prob = job->prob;
    int rc;

    if (a->shape != SFL_SHAPE_VERTICAL || a->vertical == NULL)
        return sfl__fail(SFL_EUNSUP, "%s is a horizontal algorithm (rows split among the "
                         "clients): a vertical job needs bcfw or dpbcfw", a->name);
    if ((rc = sfl__algo_check_params(a, job->p, prob)) < 0)
        return rc;
    if (prob->loss->margin_loss == NULL || prob->dim != prob->ncols)
        return sfl__fail(SFL_EINVAL, "%s needs a linear loss (lsq, logistic, sqhinge), "
                         "not %s", a->name, prob->loss->name);
    if (job->nrows == 0)
        return sfl__fail(SFL_EINVAL, "%s: the data has no rows", a->name);
    if (job->nclients == 0 || job->nclients > prob->ncols)
        return sfl__fail(SFL_EINVAL, "%s: %u clients cannot share %u features (1 to %u)",
                         a->name, job->nclients, prob->ncols, prob->ncols);
    if (job->iters == 0)
        return sfl__fail(SFL_EINVAL, "%s: a job needs at least one iteration", a->name);
    return a->vertical->check ? a->vertical->check(job) : 0;
}

void sfl_vertical_rng_seed(sfl_vrng_t *r, uint64_t seed, uint64_t t, uint32_t k,
                           struct sfl_dp_rng *noise)
{
    sfl_rng_seed(&r->common, seed, t, SFL_VERTICAL_COMMON, SFL_STREAM_TRAIN);
    sfl_rng_seed(&r->own, seed, t, k, SFL_STREAM_TRAIN);
    r->noise = noise;
}

int sfl_vertical_client_step(const sfl_vjob_t *job, const sfl_vblock_t *blk, uint64_t t,
                             const double *bcast, void *state, struct sfl_dp_rng *noise,
                             double *msg)
{
    uint32_t col0, len;
    sfl_vrng_t r;
    int rc;

    if ((rc = sfl_vertical_block(job->prob->ncols, job->nclients, blk->client, &col0, &len)) < 0)
        return rc;
    if (blk->col0 != col0 || blk->data->X->ncols != len)
        return sfl__fail(SFL_EDIM, "client %u holds columns [%u, %u), its block is [%u, %u)",
                         blk->client, blk->col0, blk->col0 + blk->data->X->ncols, col0,
                         col0 + len);
    if (blk->data->X->nrows != job->nrows)
        return sfl__fail(SFL_EDIM, "client %u has %u rows, the job %u", blk->client,
                         blk->data->X->nrows, job->nrows);
    sfl_vertical_rng_seed(&r, job->seed, t, blk->client, noise);
    return job->algo->vertical->client_step(job, blk, t, bcast, state, &r, msg);
}

int sfl_vertical_objective(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                           double *f)
{
    const sfl_vertical_ops_t *v = job->algo->vertical;
    int rc;

    *f = 0.0;
    if (v->objective == NULL)
        return 0;
    if (blk->data->X->nrows != job->nrows)
        return sfl__fail(SFL_EDIM, "client %u has %u rows, the job %u", blk->client,
                         blk->data->X->nrows, job->nrows);
    if ((rc = v->objective(job, blk, bcast, f)) <= 0) {
        *f = 0.0;
        return rc;
    }
    if (!isfinite(*f)) {
        *f = 0.0;
        return sfl__fail(SFL_ENUMERIC, "%s: the objective is not finite", job->algo->name);
    }
    return 1;
}

size_t sfl_vertical_msg_bytes(const sfl_vjob_t *job)
{
    const sfl_vertical_ops_t *v = job->algo->vertical;
    size_t n = v->msg_len(job);

    return v->msg_ints * 4 + (n - v->msg_ints) * 8;
}

size_t sfl_vertical_bcast_bytes(const sfl_vjob_t *job)
{
    return job->algo->vertical->bcast_len(job) * 8;
}

double sfl_vertical_delta(const sfl_vjob_t *job)
{
    double delta = sfl_algo_param_or(job->p, "delta", 0.0);

    return delta > 0 ? delta : 1.0 / job->nrows;
}

int sfl_vertical_privacy(const sfl_vjob_t *job, uint64_t iters, sfl_dp_spent_t *spent,
                         int *is_private)
{
    const sfl_vertical_ops_t *v = job->algo->vertical;
    sfl_dp_acct_t acct;
    int rc;

    memset(spent, 0, sizeof(*spent));
    *is_private = 0;
    if (v == NULL)
        return sfl__fail(SFL_EUNSUP, "%s is not a vertical algorithm", job->algo->name);
    if (v->account == NULL)
        return 0;
    sfl_dp_acct_init(&acct);
    if ((rc = v->account(job, iters, &acct)) <= 0)
        return rc;
    if ((rc = sfl_dp_acct_epsilon(&acct, sfl_vertical_delta(job), spent)) < 0) {
        memset(spent, 0, sizeof(*spent));
        return rc;
    }
    *is_private = 1;
    return 0;
}

double sfl_vertical_budget_eps(const sfl_vjob_t *job, const sfl_dp_spent_t *spent)
{
    return sfl_algo_param_or(job->p, "calib", 0.0) == 1.0 ? spent->eps_rdp_tight
                                                          : spent->eps_paper;
}

/* The algorithm registry and the pieces the Fed-HT family shares: local
 * minibatch SGD with optional per-step thresholding, and the weighted-average
 * aggregator with optional final thresholding. */
#include "sfl/algo.h"

#include <math.h>
#include <string.h>

#include "sfl/alloc.h"
#include "sfl/dict.h"

static const sfl_algo_t *const algos[] = {
    &sfl_algo_fedht, &sfl_algo_fediterht, &sfl_algo_diht,
    &sfl_algo_fedavg, &sfl_algo_fedprox,
    &sfl_algo_fedmid, &sfl_algo_feddualavg,
    &sfl_algo_fedgradmp, &sfl_algo_fedgradmp_inexact, NULL,
};

const sfl_algo_t *const *sfl_algo_list(void)
{
    return algos;
}

const sfl_algo_t *sfl_algo_find(const char *name)
{
    for (size_t i = 0; algos[i]; i++)
        if (strcmp(algos[i]->name, name) == 0)
            return algos[i];
    return NULL;
}

void sfl_algo_params_default(sfl_algo_params_t *p)
{
    p->lr = 0.1;
    p->tau = 0;
    p->local_steps = 5;
    p->batch = 10;
    p->lambda = 0.0;
    p->mu = 0.01;
    p->server_lr = 1.0;
    p->l2_ball = 0.0;
    p->inexact_steps = 0;
}

int sfl_problem_init(sfl_problem_t *prob, const sfl_loss_t *loss, uint32_t ncols,
                     uint32_t nclasses)
{
    if (loss == NULL || ncols == 0)
        return sfl__fail(SFL_EINVAL, "problem needs a loss and at least one feature");
    if (loss == &sfl_loss_softmax && nclasses < 2)
        return sfl__fail(SFL_EINVAL, "softmax needs at least 2 classes, data has %u", nclasses);
    if (loss == &sfl_loss_logistic && nclasses != 2)
        return sfl__fail(SFL_EINVAL, "logistic loss needs 2 classes, data has %u", nclasses);
    if (loss->classification == 0 && nclasses != 0)
        return sfl__fail(SFL_EINVAL, "%s is a regression loss but the labels are classes",
                         loss->name);
    prob->loss = loss;
    prob->ncols = ncols;
    prob->nclasses = nclasses;
    prob->dim = loss->dim(ncols, nclasses);
    prob->nblocks = loss == &sfl_loss_softmax ? nclasses : 1;
    prob->dict = NULL;
    return 0;
}

int sfl_dict_attach(sfl_problem_t *prob, const sfl_dict_t *d)
{
    if (prob == NULL || prob->loss == NULL)
        return sfl__fail(SFL_EINVAL, "dict_attach: problem not initialised");
    if (d == NULL) {
        prob->dict = NULL;
        prob->dim = prob->loss->dim(prob->ncols, prob->nclasses);
        return 0;
    }
    if (d->n != prob->ncols)
        return sfl__fail(SFL_EDIM, "dictionary atoms have %u entries, the data %u features",
                         d->n, prob->ncols);
    if ((uint64_t)prob->nblocks * d->m > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "%u blocks of %u atoms exceed 2^32-1 coefficients",
                         prob->nblocks, d->m);
    prob->dict = d;
    prob->dim = (size_t)prob->nblocks * d->m;
    return 0;
}

int sfl_algo_client_round(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob, const double *global,
                          const sfl_dataset_t *local, void *client_state, uint64_t seed,
                          uint64_t round, uint64_t client, sfl_algo_ws_t *ws,
                          sfl_spvec_t *update)
{
    sfl_rng_t rng;

    sfl_rng_seed(&rng, seed, round, client, SFL_STREAM_TRAIN);
    return a->client_update(p, prob, global, local, client_state, &rng, ws, update);
}

int sfl_algo_check(const sfl_algo_t *a, const sfl_algo_params_t *p,
                   const sfl_problem_t *prob)
{
    size_t blocklen = prob->dim / prob->nblocks;

    if (prob->dict != NULL && !a->dictionary)
        return sfl__fail(SFL_EINVAL, "%s does not support a dictionary; use fedgradmp or "
                         "fedgradmp-inexact", a->name);
    if (a->sparse && (p->tau == 0 || p->tau > blocklen))
        return sfl__fail(SFL_EINVAL, "%s: tau must be in [1, %zu], got %u", a->name,
                         blocklen, p->tau);
    if (!(p->lr > 0) || !isfinite(p->lr))
        return sfl__fail(SFL_EINVAL, "%s: learning rate must be positive and finite",
                         a->name);
    if (p->local_steps == 0)
        return sfl__fail(SFL_EINVAL, "%s: local steps K must be at least 1", a->name);
    if (p->batch == 0)
        return sfl__fail(SFL_EINVAL, "%s: batch size must be at least 1", a->name);
    if (!(p->lambda >= 0) || !isfinite(p->lambda))
        return sfl__fail(SFL_EINVAL, "%s: lambda must be >= 0", a->name);
    if (!(p->mu >= 0) || !isfinite(p->mu))
        return sfl__fail(SFL_EINVAL, "%s: mu must be >= 0", a->name);
    if (!(p->server_lr > 0) || !isfinite(p->server_lr))
        return sfl__fail(SFL_EINVAL, "%s: server learning rate must be positive", a->name);
    if (!(p->l2_ball >= 0) || !isfinite(p->l2_ball))
        return sfl__fail(SFL_EINVAL, "%s: l2 ball radius must be >= 0", a->name);
    return 0;
}

void sfl_algo_ws_init(sfl_algo_ws_t *ws)
{
    memset(ws, 0, sizeof(*ws));
    sfl_topk_ws_init(&ws->topk);
}

int sfl_algo_ws_reserve(sfl_algo_ws_t *ws, size_t dim, uint32_t batch)
{
    if (dim > ws->dim) {
        double *x = sfl__mallocarray(dim, sizeof(double));
        double *g = sfl__mallocarray(dim, sizeof(double));

        if (x == NULL || g == NULL) {
            sfl__free(x);
            sfl__free(g);
            return SFL_ENOMEM;
        }
        sfl__free(ws->x);
        sfl__free(ws->g);
        ws->x = x;
        ws->g = g;
        ws->dim = dim;
    }
    if (batch > ws->batch_cap) {
        uint32_t *b = sfl__mallocarray(batch, sizeof(uint32_t));

        if (b == NULL)
            return SFL_ENOMEM;
        sfl__free(ws->batch);
        ws->batch = b;
        ws->batch_cap = batch;
    }
    return sfl_topk_ws_reserve(&ws->topk, dim);
}

void sfl_algo_ws_close(sfl_algo_ws_t *ws)
{
    sfl__free(ws->x);
    sfl__free(ws->g);
    sfl__free(ws->batch);
    sfl_topk_ws_close(&ws->topk);
    memset(ws, 0, sizeof(*ws));
}

int sfl_algo_threshold(const sfl_problem_t *prob, uint32_t tau, double *x,
                       sfl_topk_ws_t *ws)
{
    if (prob->nblocks > 1)
        return sfl_ht_block(x, prob->nblocks, prob->dim / prob->nblocks, tau, ws);
    return sfl_ht_dense(x, prob->dim, tau, ws);
}

int sfl_algo_sample_batch(sfl_rng_t *rng, uint32_t n, uint32_t b, sfl_algo_ws_t *ws,
                          const uint32_t **rows)
{
    int rc;

    *rows = NULL; /* full batch */
    if (b >= n)
        return 0;
    rc = sfl_rng_sample(rng, n, b, ws->batch);
    if (rc < 0)
        return rc;
    *rows = ws->batch;
    return 0;
}

int sfl_algo_local_sgd(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                       const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                       sfl_algo_ws_t *ws, uint32_t steps, double mu, int threshold)
{
    uint32_t n = local->X->nrows;
    size_t d = prob->dim;
    uint32_t b = p->batch < n ? p->batch : n;
    int rc;

    if (n == 0)
        return sfl__fail(SFL_EEMPTY, "client has no samples");
    if (local->X->ncols != prob->ncols)
        return sfl__fail(SFL_EDIM, "client data has %u features, the model %u",
                         local->X->ncols, prob->ncols);
    rc = sfl_algo_ws_reserve(ws, d, b);
    if (rc < 0)
        return rc;
    if (steps == 0)
        steps = p->local_steps;
    memcpy(ws->x, global, d * sizeof(double));
    for (uint32_t k = 0; k < steps; k++) {
        const uint32_t *rows;

        rc = sfl_algo_sample_batch(rng, n, b, ws, &rows);
        if (rc < 0)
            return rc;
        /* g = grad f_B(x) (+ mu (x - global) for FedProx); x -= lr g */
        prob->loss->grad(local, rows, b, ws->x, p->lambda, ws->g);
        if (mu > 0)
            for (size_t j = 0; j < d; j++)
                ws->g[j] += mu * (ws->x[j] - global[j]);
        sfl_dvec_axpy(-p->lr, ws->g, ws->x, d);
        if (threshold) {
            rc = sfl_algo_threshold(prob, p->tau, ws->x, &ws->topk);
            if (rc < 0)
                return rc;
        }
    }
    for (size_t j = 0; j < d; j++)
        if (!isfinite(ws->x[j]))
            return sfl__fail(SFL_ENUMERIC, "local model diverged (learning rate %g too large?)",
                             p->lr);
    return 0;
}

int sfl_algo_sgd_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                        const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                        sfl_algo_ws_t *ws, uint32_t steps, double mu, int threshold,
                        sfl_spvec_t *update)
{
    int rc = sfl_algo_local_sgd(p, prob, global, local, rng, ws, steps, mu, threshold);

    if (rc < 0)
        return rc;
    if (update->dim != prob->dim)
        return sfl__fail(SFL_EDIM, "update vector has dimension %u, the model %zu",
                         update->dim, prob->dim);
    return sfl_spvec_from_dense(update, ws->x);
}

int sfl_agg_init(sfl_agg_t *agg, const sfl_algo_t *a, const sfl_algo_params_t *p,
                 const sfl_problem_t *prob)
{
    memset(agg, 0, sizeof(*agg));
    sfl_topk_ws_init(&agg->topk);
    agg->algo = a;
    agg->params = p;
    agg->prob = prob;
    agg->acc = sfl__calloc(prob->dim, sizeof(double));
    if (agg->acc == NULL)
        return SFL_ENOMEM;
    if (a->sparse) {
        int rc = sfl_topk_ws_reserve(&agg->topk, prob->dim);

        if (rc < 0) {
            sfl_agg_close(agg);
            return rc;
        }
    }
    return 0;
}

void sfl_agg_close(sfl_agg_t *agg)
{
    sfl__free(agg->acc);
    sfl_topk_ws_close(&agg->topk);
    memset(agg, 0, sizeof(*agg));
}

int sfl_agg_avg_begin(sfl_agg_t *agg)
{
    memset(agg->acc, 0, agg->prob->dim * sizeof(double));
    agg->wsum = 0;
    agg->count = 0;
    return 0;
}

int sfl_agg_avg_add(sfl_agg_t *agg, const sfl_spvec_t *update, double weight)
{
    if (update->dim != agg->prob->dim)
        return sfl__fail(SFL_EDIM, "update has dimension %u, the model %zu", update->dim,
                         agg->prob->dim);
    if (!(weight > 0) || !isfinite(weight))
        return sfl__fail(SFL_EINVAL, "update weight must be positive and finite");
    sfl_spvec_axpy(weight, update, agg->acc);
    agg->wsum += weight;
    agg->count++;
    return 0;
}

int sfl_agg_avg_end(sfl_agg_t *agg, double *global)
{
    size_t d = agg->prob->dim;

    if (agg->count == 0)
        return sfl__fail(SFL_EEMPTY, "no updates to aggregate");
    /* x_{t+1} = sum_i p_i x_i with p_i = w_i / sum w */
    for (size_t j = 0; j < d; j++)
        global[j] = agg->acc[j] / agg->wsum;
    return 0;
}

int sfl_agg_avg_end_ht(sfl_agg_t *agg, double *global)
{
    int rc = sfl_agg_avg_end(agg, global);

    if (rc < 0)
        return rc;
    return sfl_algo_threshold(agg->prob, agg->params->tau, global, &agg->topk);
}

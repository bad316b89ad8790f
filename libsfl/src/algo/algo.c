/* The algorithm registry, parameters by table (name, type, range), and the
 * pieces the Fed-HT family shares: local minibatch SGD with optional
 * per-step thresholding. */
#include "sfl/algo/algo.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo_int.h"
#include "sfl/core/alloc.h"
#include "sfl/model/dict.h"
#include "sfl/core/suggest.h"
#include "sfl/algo/vertical.h"

_Static_assert(SFL_LOSS_MAX_CLASSES == 256, "msg.h SFL_MSG_MAX_LABELS is 256");

/* Plug-ins built in with make EXTRA_ALGOS=FILE.c (one SFL_EXTRA_ALGO(sym)
 * line per table, generated; empty in a plain build). */
#define SFL_EXTRA_ALGO(sym) extern const sfl_algo_t sym;
#include "algos_extra.inc"
#undef SFL_EXTRA_ALGO

static const sfl_algo_t *const algos[] = {
    &sfl_algo_fedht, &sfl_algo_fediterht, &sfl_algo_diht,
    &sfl_algo_fedavg, &sfl_algo_fedprox,
    &sfl_algo_fedmid, &sfl_algo_feddualavg,
    &sfl_algo_fedgradmp, &sfl_algo_fedgradmp_inexact,
    &sfl_algo_fedmac, &sfl_algo_pfedme, &sfl_algo_perfedavg,
    &sfl_algo_bcfw, &sfl_algo_dpbcfw,
#define SFL_EXTRA_ALGO(sym) &sym,
#include "algos_extra.inc"
#undef SFL_EXTRA_ALGO
    NULL,
};

const sfl_param_def_t sfl_sgd_param_defs[] = {
    SFL_PARAM_DEF_LR(sfl_sgd_params_t, lr),
    SFL_PARAM_DEF_TAU(sfl_sgd_params_t, tau),
    SFL_PARAM_DEF_K(sfl_sgd_params_t, local_steps),
    SFL_PARAM_DEF_BATCH(sfl_sgd_params_t, batch),
    SFL_PARAM_DEF_LAMBDA(sfl_sgd_params_t, lambda),
    {0},
};

const sfl_param_def_t sfl_server_step_param_defs[] = {
    SFL_PARAM_DEF_LR(sfl_server_step_params_t, sgd.lr),
    SFL_PARAM_DEF_TAU(sfl_server_step_params_t, sgd.tau),
    SFL_PARAM_DEF_K(sfl_server_step_params_t, sgd.local_steps),
    SFL_PARAM_DEF_BATCH(sfl_server_step_params_t, sgd.batch),
    SFL_PARAM_DEF_LAMBDA(sfl_server_step_params_t, sgd.lambda),
    {"server_lr", "eta_g", SFL_PARAM_REAL, offsetof(sfl_server_step_params_t, server_lr), 1, 0,
     HUGE_VAL, SFL_PARAM_OPEN_LO, "server step on the averaged change (1: plain averaging)"},
    {0},
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

int sfl_algo_unknown(const char *name)
{
    sfl_suggest_t sg;

    sfl_suggest_init(&sg, NULL, name);
    for (size_t i = 0; algos[i]; i++)
        sfl_suggest_add(&sg, algos[i]->name);
    return sfl__fail(SFL_EINVAL, "unknown algorithm '%.64s'%s", name, sfl_suggest_text(&sg));
}

const sfl_param_def_t *sfl_algo_param_find(const sfl_algo_t *a, const char *name)
{
    for (const sfl_param_def_t *d = a->params; d && d->name; d++)
        if (strcmp(d->name, name) == 0)
            return d;
    return NULL;
}

int sfl_algo_param_known(const char *name)
{
    for (size_t i = 0; algos[i]; i++)
        if (sfl_algo_param_find(algos[i], name))
            return 1;
    return 0;
}

/* Bytes of d's field; 0 when the field does not fit the holder (a table
 * error sfl_algo_check reports: reads give 0, writes are dropped). */
static size_t width(const sfl_param_def_t *d)
{
    size_t w = d->type == SFL_PARAM_COUNT ? sizeof(uint32_t) : sizeof(double);

    return d->offset <= SFL_ALGO_PARAMS_BYTES - w ? w : 0;
}

static double get_value(const sfl_algo_params_t *p, const sfl_param_def_t *d)
{
    if (width(d) == 0)
        return 0;
    if (d->type == SFL_PARAM_COUNT) {
        uint32_t u;

        memcpy(&u, p->bytes + d->offset, sizeof(u));
        return u;
    }
    double v;

    memcpy(&v, p->bytes + d->offset, sizeof(v));
    return v;
}

static void put_value(sfl_algo_params_t *p, const sfl_param_def_t *d, double v)
{
    if (width(d) == 0)
        return;
    if (d->type == SFL_PARAM_COUNT) {
        uint32_t u = (uint32_t)v;

        memcpy(p->bytes + d->offset, &u, sizeof(u));
    } else {
        memcpy(p->bytes + d->offset, &v, sizeof(v));
    }
}

/* "lr, lambda, tau, ..." for error details. */
static const char *param_names(const sfl_algo_t *a)
{
    static _Thread_local char buf[512];
    size_t n = 0;

    buf[0] = '\0';
    for (const sfl_param_def_t *d = a->params; d && d->name && n < sizeof(buf); d++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", n ? ", " : "", d->name);
    return buf[0] ? buf : "none";
}

static int no_param(const sfl_algo_t *a, const char *name)
{
    return sfl__fail(SFL_EINVAL, "%s has no parameter '%s' (its parameters: %s)", a->name,
                     name, param_names(a));
}

/* Type and table range of v for d. */
static int check_value(const sfl_param_def_t *d, double v)
{
    if (!isfinite(v))
        return sfl__fail(SFL_EINVAL, "%s: must be finite", d->name);
    if (d->type == SFL_PARAM_COUNT && v != floor(v))
        return sfl__fail(SFL_EINVAL, "%s: must be a whole number, got %.17g", d->name, v);
    if ((d->flags & SFL_PARAM_OPEN_LO) ? !(v > d->lo) : !(v >= d->lo))
        return sfl__fail(SFL_EINVAL, "%s: must be %s %g, got %.17g", d->name,
                         (d->flags & SFL_PARAM_OPEN_LO) ? ">" : ">=", d->lo, v);
    if (v > d->hi)
        return sfl__fail(SFL_EINVAL, "%s: must be at most %g, got %.17g", d->name, d->hi, v);
    return 0;
}

void sfl_algo_params_default(const sfl_algo_t *a, sfl_algo_params_t *p)
{
    memset(p, 0, sizeof(*p));
    p->algo = a;
    for (const sfl_param_def_t *d = a->params; d && d->name; d++)
        put_value(p, d, d->def);
}

int sfl_algo_param_set(sfl_algo_params_t *p, const char *name, double v)
{
    const sfl_param_def_t *d = sfl_algo_param_find(p->algo, name);
    int rc;

    if (d == NULL)
        return no_param(p->algo, name);
    if ((rc = check_value(d, v)) < 0)
        return rc;
    put_value(p, d, v);
    return 0;
}

int sfl_algo_param_parse(sfl_algo_params_t *p, const char *name, const char *text)
{
    const sfl_param_def_t *d = sfl_algo_param_find(p->algo, name);
    char *end;
    double v;

    if (d == NULL)
        return no_param(p->algo, name);
    errno = 0;
    if (d->type == SFL_PARAM_COUNT) {
        unsigned long long u;

        if (strspn(text, "0123456789") != strlen(text) || text[0] == '\0')
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s' (a whole number)", name,
                             text);
        u = strtoull(text, &end, 10);
        v = errno == ERANGE ? HUGE_VAL : (double)u;
    } else {
        v = strtod(text, &end);
        if (end == text || *end != '\0' || !isfinite(v))
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s' (a finite number)", name,
                             text);
    }
    return sfl_algo_param_set(p, name, v);
}

double sfl_algo_param_or(const sfl_algo_params_t *p, const char *name, double dflt)
{
    const sfl_param_def_t *d = p->algo ? sfl_algo_param_find(p->algo, name) : NULL;

    return d ? get_value(p, d) : dflt;
}

uint32_t sfl_algo_params_tau(const sfl_algo_params_t *p)
{
    for (const sfl_param_def_t *d = p->algo ? p->algo->params : NULL; d && d->name; d++)
        if (d->flags & SFL_PARAM_SPARSITY)
            return (uint32_t)get_value(p, d);
    return 0;
}

const sfl_param_def_t *sfl_algo_ridge_def(const sfl_algo_t *a)
{
    for (const sfl_param_def_t *d = a ? a->params : NULL; d && d->name; d++)
        if (d->flags & SFL_PARAM_RIDGE)
            return d;
    return NULL;
}

double sfl_algo_params_ridge(const sfl_algo_params_t *p)
{
    const sfl_param_def_t *d = sfl_algo_ridge_def(p->algo);

    return d ? get_value(p, d) : 0.0;
}

int sfl_algo_params_from_list(const sfl_algo_t *a, const sfl_param_list_t *l,
                              sfl_algo_params_t *p)
{
    int rc;

    sfl_algo_params_default(a, p);
    if (l->n > SFL_PARAMS_MAX)
        return sfl__fail(SFL_ELIMIT, "%u parameters, at most %d", l->n, SFL_PARAMS_MAX);
    for (uint32_t i = 0; i < l->n; i++) {
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(l->v[k].name, l->v[i].name) == 0)
                return sfl__fail(SFL_EINVAL, "parameter '%s' given twice", l->v[i].name);
        if ((rc = sfl_algo_param_set(p, l->v[i].name, l->v[i].value)) < 0)
            return rc;
    }
    return 0;
}

void sfl_algo_params_to_list(const sfl_algo_params_t *p, sfl_param_list_t *l)
{
    memset(l, 0, sizeof(*l));
    for (const sfl_param_def_t *d = p->algo->params; d && d->name && l->n < SFL_PARAMS_MAX;
         d++) {
        snprintf(l->v[l->n].name, sizeof(l->v[l->n].name), "%s", d->name);
        l->v[l->n++].value = get_value(p, d);
    }
}

int sfl_problem_init(sfl_problem_t *prob, const sfl_loss_t *loss, uint32_t ncols,
                     uint32_t nclasses)
{
    if (loss == NULL || ncols == 0)
        return sfl__fail(SFL_EINVAL, "problem needs a loss and at least one feature");
    /* logistic and sqhinge: binary, one weight per feature */
    int binary = loss == &sfl_loss_logistic || loss == &sfl_loss_sqhinge;

    if (loss->classification && !binary && nclasses < 2)
        return sfl__fail(SFL_EINVAL, "%s needs at least 2 classes, data has %u", loss->name,
                         nclasses);
    if (binary && nclasses != 2)
        return sfl__fail(SFL_EINVAL, "%s loss needs 2 classes, data has %u", loss->name,
                         nclasses);
    if (loss->classification == 0 && nclasses != 0)
        return sfl__fail(SFL_EINVAL, "%s is a regression loss but the labels are classes",
                         loss->name);
    if (loss->classification && nclasses > SFL_LOSS_MAX_CLASSES)
        return sfl__fail(SFL_ELIMIT, "%s: %u classes, at most %u", loss->name, nclasses,
                         SFL_LOSS_MAX_CLASSES);
    /* Every vector of the problem has dim entries: dim must fit the wire's
     * uint32 dimensions and a size_t count of doubles, on 32-bit targets
     * too (256 classes x 2^24 + 1 features wraps a 32-bit size_t; the
     * loss's dim is 0 for a model that does not fit a size_t). */
    {
        size_t dim = sfl_loss_dim(loss, ncols, nclasses);
        uint64_t most = SIZE_MAX / sizeof(double) < UINT32_MAX ? SIZE_MAX / sizeof(double)
                                                                 : UINT32_MAX;

        if (dim == 0 || dim > most)
            return sfl__fail(SFL_ELIMIT, "a %s model of %u features and %u classes is too "
                             "large (at most %llu entries)", loss->name, ncols, nclasses,
                             (unsigned long long)most);
        prob->dim = dim;
    }
    prob->loss = loss;
    prob->ncols = ncols;
    prob->nclasses = nclasses;
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
        prob->dim = sfl_loss_dim(prob->loss, prob->ncols, prob->nclasses);
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
    if (p->algo != a)
        return sfl__fail(SFL_EINVAL, "%s: parameters were set for %s", a->name,
                         p->algo ? p->algo->name : "no algorithm");
    /* This check serves the drivers of the horizontal and personalized
     * shapes (sfl-sim's round loop, coordinator and agent); the vertical
     * one checks with sfl_vertical_check (vertical.c). */
    if (a->shape == SFL_SHAPE_VERTICAL)
        return sfl__fail(SFL_EUNSUP, "%s is a vertical algorithm (column blocks of aligned "
                         "samples): this driver runs horizontal ones", a->name);
    return sfl__algo_check_params(a, p, prob);
}

int sfl__algo_check_params(const sfl_algo_t *a, const sfl_algo_params_t *p,
                           const sfl_problem_t *prob)
{
    size_t blocklen = prob->dim / prob->nblocks;
    int rc;

    if (p->algo != a)
        return sfl__fail(SFL_EINVAL, "%s: parameters were set for %s", a->name,
                         p->algo ? p->algo->name : "no algorithm");
    if (prob->dict != NULL && !a->dictionary)
        return sfl__fail(SFL_EINVAL, "%s does not support a dictionary; use fedgradmp or "
                         "fedgradmp-inexact", a->name);
    for (const sfl_param_def_t *d = a->params; d && d->name; d++) {
        double v = get_value(p, d);

        if (a->params_size > SFL_ALGO_PARAMS_BYTES || width(d) == 0 ||
            d->offset + width(d) > a->params_size)
            return sfl__fail(SFL_EINVAL, "%s: parameter %s lies outside its %zu-byte struct "
                             "(at most %d bytes)", a->name, d->name, a->params_size,
                             SFL_ALGO_PARAMS_BYTES);
        if ((rc = check_value(d, v)) < 0)
            return sfl__wrap(rc, "%s", a->name);
        if ((d->flags & SFL_PARAM_SPARSITY) && v > (double)blocklen)
            return sfl__fail(SFL_EINVAL, "%s: %s must be in [1, %zu], got %.17g", a->name,
                             d->name, blocklen, v);
    }
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

int sfl_algo_local_sgd(const sfl_sgd_params_t *p, const sfl_problem_t *prob,
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
        sfl_loss_grad(prob->loss, local, rows, b, ws->x, p->lambda, ws->g);
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

int sfl_algo_sgd_update(const sfl_sgd_params_t *p, const sfl_problem_t *prob,
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


size_t sfl_algo_model_state_size(const sfl_algo_params_t *p, const sfl_problem_t *prob)
{
    (void)p;
    return prob->dim * sizeof(double);
}

int sfl_algo_model_state_init(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                              void *state)
{
    (void)p;
    memset(state, 0, prob->dim * sizeof(double));
    return 0;
}

int sfl_algo_model_state_model(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                               const void *state, double *model)
{
    (void)p;
    memcpy(model, state, prob->dim * sizeof(double));
    return 0;
}

int sfl_algo_prune(double *x, size_t d, double eps, double min_density, sfl_topk_ws_t *ws)
{
    size_t keep = 0, floor_k = (size_t)ceil(min_density * (double)d);
    int rc;

    if (!(eps > 0))
        return 0;
    for (size_t j = 0; j < d; j++)
        keep += fabs(x[j]) >= eps;
    if (keep >= floor_k) {
        for (size_t j = 0; j < d; j++)
            if (fabs(x[j]) < eps)
                x[j] = 0.0;
        return 0;
    }
    if ((rc = sfl_topk_ws_reserve(ws, d)) < 0)
        return rc;
    return sfl_ht_dense(x, d, floor_k, ws);
}

int sfl_algo_personal_begin(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                            const double *global, const sfl_dataset_t *local, double *theta,
                            uint32_t batch, sfl_algo_ws_t *ws, uint32_t *b)
{
    uint32_t n = local->X->nrows;
    size_t d = prob->dim;
    int rc;

    if (theta == NULL)
        return sfl__fail(SFL_EINVAL, "%s needs its client state", p->algo->name);
    if (n == 0)
        return sfl__fail(SFL_EEMPTY, "client has no samples");
    *b = batch < n ? batch : n;
    if ((rc = sfl_algo_ws_reserve(ws, d, *b)) < 0)
        return rc;
    memcpy(ws->x, global, d * sizeof(double));
    memcpy(theta, global, d * sizeof(double));
    return 0;
}

int sfl_algo_personal_end(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                          const double *theta, double prune, double min_density,
                          sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    size_t d = prob->dim;
    int rc;

    for (size_t j = 0; j < d; j++)
        if (!isfinite(ws->x[j]) || !isfinite(theta[j]))
            return sfl__fail(SFL_ENUMERIC, "%s diverged (step sizes too large?)",
                             p->algo->name);
    if ((rc = sfl_algo_prune(ws->x, d, prune, min_density, &ws->topk)) < 0)
        return rc;
    return sfl_spvec_from_dense(update, ws->x);
}

/* The weighted fold (fold.h): one place for every algorithm and both
 * drivers, validating each update before it touches the sum. */
#include "sfl/algo/fold.h"

#include <math.h>
#include <string.h>

#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"

int sfl_fold_init(sfl_fold_t *f, const sfl_algo_t *a, const sfl_algo_params_t *p,
                  const sfl_problem_t *prob, const sfl_fold_limits_t *lim)
{
    sfl_fold_limits_t l = lim ? *lim : (sfl_fold_limits_t){0, 0};

    memset(f, 0, sizeof(*f));
    sfl_topk_ws_init(&f->topk);
    if (!(l.max_norm >= 0) || !isfinite(l.max_norm) || !(l.max_weight >= 0) ||
        !isfinite(l.max_weight))
        return sfl__fail(SFL_EINVAL, "fold bounds must be finite and >= 0");
    f->limits.max_norm = l.max_norm > 0 ? l.max_norm : SFL_FOLD_MAX_NORM;
    f->limits.max_weight = l.max_weight > 0 ? l.max_weight : SFL_FOLD_MAX_WEIGHT;
    f->algo = a;
    f->params = p;
    f->prob = prob;
    f->sum = sfl__calloc(prob->dim, sizeof(double));
    if (f->sum == NULL)
        return SFL_ENOMEM;
    if (a->sparse) {
        int rc = sfl_topk_ws_reserve(&f->topk, prob->dim);

        if (rc < 0) {
            sfl_fold_close(f);
            return rc;
        }
    }
    return 0;
}

void sfl_fold_close(sfl_fold_t *f)
{
    sfl__free(f->sum);
    sfl__free(f->cursor);
    sfl_topk_ws_close(&f->topk);
    memset(f, 0, sizeof(*f));
}

void sfl_fold_begin(sfl_fold_t *f)
{
    memset(f->sum, 0, f->prob->dim * sizeof(double));
    f->weight_sum = 0;
    f->count = 0;
}

int sfl_fold_check(const sfl_fold_t *f, const sfl_spvec_t *u, double weight)
{
    return sfl_fold_check_limits(&f->limits, f->prob->dim, u, weight);
}

int sfl_fold_check_limits(const sfl_fold_limits_t *lim, size_t dim, const sfl_spvec_t *u,
                          double weight)
{
    double max_norm = lim->max_norm > 0 ? lim->max_norm : SFL_FOLD_MAX_NORM;
    double max_weight = lim->max_weight > 0 ? lim->max_weight : SFL_FOLD_MAX_WEIGHT;
    double ss = 0;

    if (u->dim != dim)
        return sfl__fail(SFL_EDIM, "update has dimension %u, the model %zu", u->dim, dim);
    if (!(weight > 0) || !isfinite(weight))
        return sfl__fail(SFL_EINVAL, "update weight (declared samples) must be positive and "
                         "finite, got %g", weight);
    if (weight > max_weight)
        return sfl__fail(SFL_ELIMIT, "declared samples %.17g are above the job's max_samples "
                         "%.17g", weight, max_weight);
    for (uint32_t i = 0; i < u->nnz; i++) {
        double v = u->val[i];

        if (!isfinite(v))
            return sfl__fail(SFL_ENUMERIC, "update value at index %u is not finite", u->idx[i]);
        ss += v * v;
    }
    /* ss may overflow to inf for finite values: that is above any bound. */
    if (!(sqrt(ss) <= max_norm))
        return sfl__fail(SFL_ELIMIT, "update norm %.6g is above the job's max_update_norm %.6g",
                         sqrt(ss), max_norm);
    return 0;
}

int sfl_fold_add_partial(sfl_fold_t *f, const double *psum, double weight, uint32_t n)
{
    size_t d = f->prob->dim;
    double ss = 0;

    if (n == 0)
        return sfl__fail(SFL_EINVAL, "a partial sum of no updates");
    if (!(weight > 0) || !isfinite(weight))
        return sfl__fail(SFL_EINVAL, "partial weight must be positive and finite, got %g", weight);
    if (weight > (double)n * f->limits.max_weight)
        return sfl__fail(SFL_ELIMIT, "partial weight %.17g is above %u x the job's max_samples "
                         "%.17g", weight, n, f->limits.max_weight);
    for (size_t i = 0; i < d; i++) {
        if (!isfinite(psum[i]))
            return sfl__fail(SFL_ENUMERIC, "partial sum value at index %zu is not finite", i);
        ss += psum[i] * psum[i];
    }
    /* ||sum_i w_i u_i|| <= sum_i w_i ||u_i|| <= weight x max_norm */
    if (!(sqrt(ss) <= f->limits.max_norm * weight))
        return sfl__fail(SFL_ELIMIT, "partial sum norm %.6g is above the job's max_update_norm "
                         "%.6g x its weight %.17g", sqrt(ss), f->limits.max_norm, weight);
    for (size_t i = 0; i < d; i++)
        f->sum[i] += psum[i];
    f->weight_sum += weight;
    f->count += n;
    return 0;
}

int sfl_fold_add(sfl_fold_t *f, const sfl_spvec_t *u, double weight)
{
    int rc = sfl_fold_check(f, u, weight);

    if (rc < 0)
        return rc;
    sfl_spvec_axpy(weight, u, f->sum);
    f->weight_sum += weight;
    f->count++;
    return 0;
}

/* Updates ahead whose next run sfl_fold_add_many prefetches. */
#define FOLD_AHEAD 4

int sfl_fold_add_many(sfl_fold_t *f, const sfl_fold_item_t *items, size_t n)
{
    size_t d = f->prob->dim;
    int rc;

    for (size_t i = 0; i < n; i++)
        if (items[i].update != NULL &&
            (rc = sfl_fold_check(f, items[i].update, items[i].weight)) < 0)
            return rc;
    if (d <= SFL_FOLD_TILED_DIM) {
        /* The whole sum stays in cache: one pass per update. */
        for (size_t i = 0; i < n; i++)
            if (items[i].update != NULL)
                sfl_spvec_axpy(items[i].weight, items[i].update, f->sum);
    } else {
        if (n > f->ncursor) {
            uint32_t *c = sfl__reallocarray(f->cursor, n, sizeof(*c));

            if (c == NULL)
                return SFL_ENOMEM;
            f->cursor = c;
            f->ncursor = n;
        }
        memset(f->cursor, 0, n * sizeof(*f->cursor));
        /* Indices are strictly increasing (sfl_spvec_t), so each update's
         * pairs in tile [lo, hi) are the next run after its cursor. Per
         * entry the products arrive in item order, as with sfl_fold_add. */
        for (size_t lo = 0; lo < d; lo += SFL_FOLD_TILE) {
            uint32_t hi = (uint32_t)(d - lo < SFL_FOLD_TILE ? d : lo + SFL_FOLD_TILE);

            for (size_t i = 0; i < n; i++) {
                const sfl_spvec_t *u = items[i].update;
                double w = items[i].weight;
                uint32_t j = f->cursor[i];

                if (u == NULL)
                    continue;
                /* A later update's run starts elsewhere in memory: ask for
                 * its first lines now, while this run is added. */
                if (i + FOLD_AHEAD < n && items[i + FOLD_AHEAD].update != NULL) {
                    const sfl_spvec_t *v = items[i + FOLD_AHEAD].update;
                    uint32_t c = f->cursor[i + FOLD_AHEAD];

                    for (uint32_t l = 0; l < 32 && c + l < v->nnz; l += 8) {
                        __builtin_prefetch(v->val + c + l);
                        if (l % 16 == 0)
                            __builtin_prefetch(v->idx + c + l);
                    }
                }
                for (; j < u->nnz && u->idx[j] < hi; j++)
                    f->sum[u->idx[j]] += w * u->val[j];
                f->cursor[i] = j;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (items[i].update != NULL) {
            f->weight_sum += items[i].weight;
            f->count++;
        }
    return 0;
}

int sfl_fold_finish(sfl_fold_t *f, double *global)
{
    if (f->count == 0)
        return sfl__fail(SFL_EEMPTY, "no updates to aggregate");
    return f->algo->finish(f, global);
}

int sfl_fold_mean(sfl_fold_t *f, double *global)
{
    size_t d = f->prob->dim;

    /* x_{t+1} = sum_i p_i x_i with p_i = w_i / sum w */
    for (size_t j = 0; j < d; j++)
        global[j] = f->sum[j] / f->weight_sum;
    return 0;
}

int sfl_fold_mean_ht(sfl_fold_t *f, double *global)
{
    int rc = sfl_fold_mean(f, global);

    if (rc < 0)
        return rc;
    return sfl_algo_threshold(f->prob, sfl_algo_params_tau(f->params), global, &f->topk);
}

int sfl_fold_mix(sfl_fold_t *f, double *global)
{
    double beta = sfl_algo_param_or(f->params, "beta", 1.0);
    size_t d = f->prob->dim;

    for (size_t j = 0; j < d; j++)
        global[j] = (1.0 - beta) * global[j] + beta * (f->sum[j] / f->weight_sum);
    return 0;
}

#include "sfl/model/loss.h"

#include "loss_int.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* The row loops below are written out instead of calling sfl_csr_row_dot /
 * sfl_csr_row_axpy: grad (and eval) is the innermost kernel of every
 * algorithm, the matrix's array pointers stay in locals (registers) for the
 * whole batch, and the dot can use partial sums. bench/bench_grad measures
 * the result. */

/* <z_i, x> with four partial sums: a single running sum would make every
 * row wait on a chain of dependent additions (4 cycles each) instead of on
 * its loads. The order is fixed, so results stay deterministic. */
static double row_dot(const size_t *rowptr, const uint32_t *colind, const double *val,
                      uint32_t i, const double *x)
{
    size_t k = rowptr[i], end = rowptr[i + 1];
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;

    for (; k + 4 <= end; k += 4) {
        s0 += val[k] * x[colind[k]];
        s1 += val[k + 1] * x[colind[k + 1]];
        s2 += val[k + 2] * x[colind[k + 2]];
        s3 += val[k + 3] * x[colind[k + 3]];
    }
    for (; k < end; k++)
        s0 += val[k] * x[colind[k]];
    return (s0 + s1) + (s2 + s3);
}

static void row_axpy(const size_t *rowptr, const uint32_t *colind, const double *val,
                     uint32_t i, double a, double *y)
{
    for (size_t k = rowptr[i], end = rowptr[i + 1]; k < end; k++)
        y[colind[k]] += a * val[k];
}

/* grad += lambda x and, with want_value, returns lambda/2 ||x||^2. Skipped
 * for lambda == 0 so an unregularized call touches only the batch's
 * nonzeros (plus the zeroing). */
double sfl__loss_add_ridge(const double *x, size_t d, double lambda, double *grad, int want_value)
{
    double sq = 0.0;

    if (lambda == 0.0)
        return 0.0;
    if (want_value)
        for (size_t j = 0; j < d; j++)
            sq += x[j] * x[j];
    if (grad)
        for (size_t j = 0; j < d; j++)
            grad[j] += lambda * x[j];
    return 0.5 * lambda * sq;
}

/* Each loss has one worker that both eval (want_value = 1, grad may be
 * NULL) and grad (want_value = 0, grad set) call: the gradient arithmetic
 * is the same instructions in both, so the two gradients agree bit for bit
 * and only the value's terms (log1p, log, the ridge norm) are skipped. The
 * flag is constant for a call, so its branches predict perfectly. */

/* Rows are processed in blocks: the margins of BLOCK rows, then their loss
 * terms and gradient coefficients (exp/log1p for logistic), then their BLOCK
 * axpys. Done row by row, each axpy waits on its dot and on the libm calls
 * and the out-of-order core idles; in blocks the dots (and the axpys) are
 * independent of each other and overlap, and the block's rows are still in
 * cache for the later sweep. coef[] is the only scratch, on the stack. */
#define BLOCK 32

static uint32_t batch_size(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows)
{
    return rows ? nrows : ds->X->nrows;
}

/* lsq and logistic: one weight per feature, no intercept. */
static size_t linear_dim(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses)
{
    (void)l;
    (void)nclasses;
    return ncols;
}

/* ---- linear losses: l(m, y) of the margin m = z'x ------------------- */

enum linear_kind { LINEAR_LSQ, LINEAR_LOGISTIC, LINEAR_SQHINGE };

/* dl/dm for one row; with want_value also adds l(m, y) to *f.
 *   lsq:      l = (m - y)^2,            dl/dm = 2 (m - y)
 *   logistic: l = log(1 + e^m) - y m,   dl/dm = sigma(m) - y
 *   sqhinge:  l = h^2, h = max(0, 1 - s m), s = 2y - 1,  dl/dm = -2 s h
 * Logistic uses the one e = exp(-|m|) <= 1, which never overflows:
 * log(1 + e^m) = max(m, 0) + log1p(e), and sigma = 1 / (1 + e) for m >= 0,
 * e / (1 + e) otherwise. */
static double linear_step(enum linear_kind kind, double m, double y, int want_value, double *f)
{
    if (kind == LINEAR_LSQ) {
        double e = m - y;

        if (want_value)
            *f += e * e;
        return 2.0 * e;
    }
    if (kind == LINEAR_SQHINGE) {
        double s = 2.0 * y - 1.0, h = 1.0 - s * m;

        if (h <= 0.0) /* NaN goes on, as in the other losses */
            return 0.0;
        if (want_value)
            *f += h * h;
        return -2.0 * s * h;
    }
    double e = exp(-fabs(m));
    double sig = (m >= 0.0 ? 1.0 : e) / (1.0 + e);

    if (want_value)
        *f += (m > 0.0 ? m : 0.0) + log1p(e) - y * m;
    return sig - y;
}

static double linear_run(enum linear_kind kind, const sfl_dataset_t *ds, const uint32_t *rows,
                         uint32_t nrows, const double *x, double lambda, double *grad,
                         int want_value)
{
    const sfl_csr_t *X = ds->X;
    const size_t *rp = X->rowptr;
    const uint32_t *ci = X->colind;
    const double *v = X->val;
    const double *y = ds->y;
    size_t d = X->ncols;
    uint32_t n = batch_size(ds, rows, nrows);
    double f = 0.0;

    if (grad)
        memset(grad, 0, d * sizeof(*grad));
    if (n > 0) {
        double inv = 1.0 / n;

        for (uint32_t t0 = 0; t0 < n; t0 += BLOCK) {
            uint32_t nb = n - t0 < BLOCK ? n - t0 : BLOCK;
            double coef[BLOCK];

            for (uint32_t b = 0; b < nb; b++) {
                uint32_t i = rows ? rows[t0 + b] : t0 + b;

                assert(i < X->nrows);
                coef[b] = row_dot(rp, ci, v, i, x);
            }
            for (uint32_t b = 0; b < nb; b++) {
                double yi = y[rows ? rows[t0 + b] : t0 + b];

                coef[b] = linear_step(kind, coef[b], yi, want_value, &f) * inv;
            }
            if (grad)
                for (uint32_t b = 0; b < nb; b++)
                    row_axpy(rp, ci, v, rows ? rows[t0 + b] : t0 + b, coef[b], grad);
        }
        f *= inv;
    }
    return f + sfl__loss_add_ridge(x, d, lambda, grad, want_value);
}

static double lsq_eval(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                       const double *x, double lambda, double *grad)
{
    (void)l;
    return linear_run(LINEAR_LSQ, ds, rows, nrows, x, lambda, grad, 1);
}

static void lsq_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                     const double *x, double lambda, double *grad)
{
    (void)l;
    assert(grad != NULL);
    (void)linear_run(LINEAR_LSQ, ds, rows, nrows, x, lambda, grad, 0);
}

static double lsq_predict(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i, const double *x)
{
    (void)l;
    const sfl_csr_t *X = ds->X;

    return row_dot(X->rowptr, X->colind, X->val, i, x);
}

static double logistic_eval(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                            const double *x, double lambda, double *grad)
{
    (void)l;
    return linear_run(LINEAR_LOGISTIC, ds, rows, nrows, x, lambda, grad, 1);
}

static void logistic_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                          const double *x, double lambda, double *grad)
{
    (void)l;
    assert(grad != NULL);
    (void)linear_run(LINEAR_LOGISTIC, ds, rows, nrows, x, lambda, grad, 0);
}

static double logistic_predict(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i, const double *x)
{
    (void)l;
    const sfl_csr_t *X = ds->X;

    return row_dot(X->rowptr, X->colind, X->val, i, x) > 0.0 ? 1.0 : 0.0;
}

static double sqhinge_eval(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                           uint32_t nrows, const double *x, double lambda, double *grad)
{
    (void)l;
    return linear_run(LINEAR_SQHINGE, ds, rows, nrows, x, lambda, grad, 1);
}

static void sqhinge_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                         uint32_t nrows, const double *x, double lambda, double *grad)
{
    (void)l;
    assert(grad != NULL);
    (void)linear_run(LINEAR_SQHINGE, ds, rows, nrows, x, lambda, grad, 0);
}

/* One row's l(m, y) and dl/dm: the very arithmetic of the row loops. */
static double lsq_margin(double m, double y, double *dl)
{
    double f = 0.0;

    *dl = linear_step(LINEAR_LSQ, m, y, 1, &f);
    return f;
}

static double logistic_margin(double m, double y, double *dl)
{
    double f = 0.0;

    *dl = linear_step(LINEAR_LOGISTIC, m, y, 1, &f);
    return f;
}

static double sqhinge_margin(double m, double y, double *dl)
{
    double f = 0.0;

    *dl = linear_step(LINEAR_SQHINGE, m, y, 1, &f);
    return f;
}

/* ---- softmax: l = -log softmax(X z)_y -------------------------------- */

/* Outside [2, SFL_LOSS_MAX_CLASSES] there is no valid model: 0 tells the
 * caller (which must check) rather than asserting on a dataset property. */
static size_t softmax_dim(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses)
{
    (void)l;
    if (nclasses < 2 || nclasses > SFL_LOSS_MAX_CLASSES)
        return 0;
    /* A product that does not fit is no model either (sfl_problem_init
     * says why): never a wrapped size on a 32-bit target. */
    if ((uint64_t)nclasses * ncols > SIZE_MAX / sizeof(double))
        return 0;
    return (size_t)nclasses * ncols;
}

/* scores[r] = z_i' x_r for every class; returns the largest. */
static double class_scores(const sfl_csr_t *X, uint32_t i, const double *x, uint32_t c,
                           double *scores)
{
    double mx = -INFINITY;

    for (uint32_t r = 0; r < c; r++) {
        scores[r] = row_dot(X->rowptr, X->colind, X->val, i, x + (size_t)r * X->ncols);
        if (scores[r] > mx)
            mx = scores[r];
    }
    return mx;
}

static double softmax_run(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                          const double *x, double lambda, double *grad, int want_value)
{
    const sfl_csr_t *X = ds->X;
    const size_t *rp = X->rowptr;
    const uint32_t *ci = X->colind;
    const double *v = X->val;
    uint32_t c = ds->nclasses;
    size_t ncols = X->ncols;
    size_t d = (size_t)c * ncols;
    uint32_t n = batch_size(ds, rows, nrows);
    double scores[SFL_LOSS_MAX_CLASSES];
    double f = 0.0;

    /* softmax_dim() returned 0 for such datasets; a caller that went on
     * anyway has a bug. Class ids come from sfl_dataset_encode_labels. */
    assert(c >= 2 && c <= SFL_LOSS_MAX_CLASSES);
    if (grad)
        memset(grad, 0, d * sizeof(*grad));
    if (n > 0) {
        double inv = 1.0 / n;

        for (uint32_t t = 0; t < n; t++) {
            uint32_t i = rows ? rows[t] : t;
            uint32_t yi = (uint32_t)ds->y[i];

            assert(i < X->nrows && yi < c);
            /* log-sum-exp with the max subtracted: no overflow, and the
             * largest term is exactly exp(0) = 1 so the sum is >= 1. */
            double mx = class_scores(X, i, x, c, scores);
            double sy = scores[yi] - mx;
            double sum = 0.0;

            for (uint32_t r = 0; r < c; r++) {
                scores[r] = exp(scores[r] - mx);
                sum += scores[r];
            }
            if (want_value)
                f += log(sum) - sy;
            if (grad) {
                for (uint32_t r = 0; r < c; r++) {
                    double g = scores[r] / sum - (r == yi ? 1.0 : 0.0);

                    if (g != 0.0)
                        row_axpy(rp, ci, v, i, g * inv, grad + (size_t)r * ncols);
                }
            }
        }
        f *= inv;
    }
    return f + sfl__loss_add_ridge(x, d, lambda, grad, want_value);
}

static double softmax_eval(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                           const double *x, double lambda, double *grad)
{
    (void)l;
    return softmax_run(ds, rows, nrows, x, lambda, grad, 1);
}

static void softmax_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows, uint32_t nrows,
                         const double *x, double lambda, double *grad)
{
    (void)l;
    assert(grad != NULL);
    (void)softmax_run(ds, rows, nrows, x, lambda, grad, 0);
}

static double softmax_predict(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i, const double *x)
{
    (void)l;
    uint32_t c = ds->nclasses;
    double scores[SFL_LOSS_MAX_CLASSES];
    uint32_t best = 0;

    assert(c >= 2 && c <= SFL_LOSS_MAX_CLASSES);
    class_scores(ds->X, i, x, c, scores);
    /* Strict > keeps the lowest class on ties. */
    for (uint32_t r = 1; r < c; r++)
        if (scores[r] > scores[best])
            best = r;
    return (double)best;
}

const sfl_loss_t sfl_loss_lsq = {
    .name = "lsq",
    .classification = 0,
    .dim = linear_dim,
    .eval = lsq_eval,
    .grad = lsq_grad,
    .predict = lsq_predict,
    .margin_loss = lsq_margin,
};

const sfl_loss_t sfl_loss_logistic = {
    .name = "logistic",
    .classification = 1,
    .dim = linear_dim,
    .eval = logistic_eval,
    .grad = logistic_grad,
    .predict = logistic_predict,
    .margin_loss = logistic_margin,
};

/* Predicts like logistic: the class of the margin's sign. */
const sfl_loss_t sfl_loss_sqhinge = {
    .name = "sqhinge",
    .classification = 1,
    .dim = linear_dim,
    .eval = sqhinge_eval,
    .grad = sqhinge_grad,
    .predict = logistic_predict,
    .margin_loss = sqhinge_margin,
};

const sfl_loss_t sfl_loss_softmax = {
    .name = "softmax",
    .classification = 1,
    .dim = softmax_dim,
    .eval = softmax_eval,
    .grad = softmax_grad,
    .predict = softmax_predict,
};

const sfl_loss_t *sfl_loss_find(const char *name)
{
    static const sfl_loss_t *const all[] = {&sfl_loss_lsq, &sfl_loss_logistic,
                                            &sfl_loss_sqhinge, &sfl_loss_softmax};

    if (name == NULL)
        return NULL;
    for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); j++)
        if (strcmp(all[j]->name, name) == 0)
            return all[j];
    return sfl__loss_mlp_find(name);
}

void sfl_loss_init_model(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses, uint64_t seed,
                         double *x)
{
    if (l->init) {
        sfl_rng_t rng;

        sfl_rng_seed(&rng, seed, 0, 0, SFL_STREAM_INIT);
        l->init(l, ncols, nclasses, &rng, x);
    } else {
        memset(x, 0, sfl_loss_dim(l, ncols, nclasses) * sizeof(double));
    }
}
double sfl_loss_accuracy(const sfl_loss_t *loss, const sfl_dataset_t *ds, const double *x)
{
    uint32_t n = ds->X->nrows;
    uint32_t hit = 0;

    /* NaN rather than a number that looks like a real accuracy. */
    if (!loss->classification || n == 0)
        return NAN;
    for (uint32_t i = 0; i < n; i++)
        if (sfl_loss_predict(loss, ds, i, x) == ds->y[i])
            hit++;
    return (double)hit / n;
}

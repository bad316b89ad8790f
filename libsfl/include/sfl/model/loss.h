/* Losses over minibatches of CSR rows, behind one table.
 *
 * The model x is dense float64 of length loss->dim(ncols, nclasses):
 *   lsq, logistic: ncols weights (no intercept, as in the papers);
 *   softmax:       nclasses blocks of ncols, block r = class r's weights
 *                  (so per-class hard thresholding is sfl_ht_block).
 * All objectives are averages over the rows of the batch plus lambda/2 ||x||^2:
 *   lsq       l = (z'x - y)^2                  (seed 000 supplementary, no 1/2)
 *   logistic  l = log(1 + e^m) - y m, m = z'x  (y in {0,1} class ids)
 *   sqhinge   l = max(0, 1 - s m)^2, s = 2y - 1 (y in {0,1}; seed 003's
 *             smoothed hinge, Table V, without its 1/2 as lsq drops it)
 *   softmax   l = -log softmax(X z)_y          (y in 0..nclasses-1) */
#ifndef SFL_LOSS_H
#define SFL_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_LOSS_MAX_CLASSES 256

typedef struct sfl_loss sfl_loss_t;

struct sfl_loss {
    const char *name;
    /* 1 if targets are class ids (accuracy is meaningful). */
    int classification;
    /* Hidden units of an MLP ("mlp:H", below); 0 for the linear losses. */
    uint32_t hidden;
    /* Every function gets the loss itself first (its hidden size); callers
     * go through the sfl_loss_* wrappers below. */
    /* Model length for a dataset with ncols features and nclasses classes;
     * 0 when the loss cannot model it (softmax: nclasses outside
     * [2, SFL_LOSS_MAX_CLASSES]) -- callers check before eval. */
    size_t (*dim)(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses);
    /* Returns f over rows[0..nrows) of ds (rows == NULL: all rows, nrows
     * ignored). If grad != NULL it is overwritten with the gradient (dim
     * entries). Allocates nothing. An empty batch gives 0 (and grad =
     * lambda x). */
    double (*eval)(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                   uint32_t nrows, const double *x, double lambda, double *grad);
    /* The gradient alone, for training: grad (not NULL) is overwritten with
     * exactly the dim values eval writes for the same arguments, bit for
     * bit, but f is not computed (logistic: one exp per row, no log1p;
     * softmax: the probabilities, no log). Same batch semantics as eval;
     * allocates nothing. */
    void (*grad)(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                 uint32_t nrows, const double *x, double lambda, double *grad);
    /* Prediction for row i: the value (regression) or the class id. */
    double (*predict)(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i,
                      const double *x);
    /* The starting model (dim entries) from rng; NULL: all zeros, which
     * suits the convex losses. An MLP starts random: at zero every hidden
     * unit gets the same gradient and they never differ. */
    void (*init)(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses, sfl_rng_t *rng,
                 double *x);
    /* The linear losses (lsq, logistic, sqhinge): l(m, y) of one row at its
     * margin m = z'x, and dl/dm in *dl; NULL for the others. The vertical
     * algorithms (vertical.h) work from margins alone. */
    double (*margin_loss)(double m, double y, double *dl);
    char namebuf[16]; /* the MLP's name ("mlp:100") */
};

static inline size_t sfl_loss_dim(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses)
{
    return l->dim(l, ncols, nclasses);
}

static inline double sfl_loss_eval(const sfl_loss_t *l, const sfl_dataset_t *ds,
                                   const uint32_t *rows, uint32_t nrows, const double *x,
                                   double lambda, double *grad)
{
    return l->eval(l, ds, rows, nrows, x, lambda, grad);
}

static inline void sfl_loss_grad(const sfl_loss_t *l, const sfl_dataset_t *ds,
                                 const uint32_t *rows, uint32_t nrows, const double *x,
                                 double lambda, double *grad)
{
    l->grad(l, ds, rows, nrows, x, lambda, grad);
}

static inline double sfl_loss_predict(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i,
                                      const double *x)
{
    return l->predict(l, ds, i, x);
}

/* The starting model of a job or simulation seeded with seed: l's init on
 * the stream (seed, 0, 0, SFL_STREAM_INIT), or zeros. The coordinator and
 * sfl-sim both start here, so they start from the same bits. */
void sfl_loss_init_model(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses, uint64_t seed,
                         double *x);

extern const sfl_loss_t sfl_loss_lsq;
extern const sfl_loss_t sfl_loss_logistic;
extern const sfl_loss_t sfl_loss_sqhinge;
extern const sfl_loss_t sfl_loss_softmax;

/* A two-layer perceptron (input - H hidden ReLU units - softmax over the
 * classes), its parameters as one vector so that sparsity, the wire codec
 * and sealing apply unchanged (mlp.c gives the layout). H = 0 is
 * multinomial logistic regression with an intercept. Objective: the mean
 * cross-entropy over the batch plus lambda/2 ||x||^2 over every parameter. */
#define SFL_LOSS_MAX_HIDDEN 1024
#define SFL_LOSS_MLP_FORMS "mlp:H with H in 0..1024"

/* "lsq", "logistic", "sqhinge", "softmax" or "mlp:H" (an MLP with H hidden units:
 * one loss per distinct H, made on first use and kept for the process);
 * NULL if unknown. */
const sfl_loss_t *sfl_loss_find(const char *name);
/* Fraction of rows whose predicted class equals y (classification losses);
 * NaN for a regression loss or a dataset without rows. */
double sfl_loss_accuracy(const sfl_loss_t *loss, const sfl_dataset_t *ds, const double *x);

#ifdef __cplusplus
}
#endif

#endif

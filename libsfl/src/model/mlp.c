/* The two-layer perceptron loss "mlp:H" (sfl/model/loss.h): input z (ncols
 * features, a CSR row) -> H ReLU units -> nclasses scores -> softmax,
 * cross-entropy against the class id. FedMac's and pFedMe's model (seed 002
 * Sec. 5.1: hidden 100 for MNIST, 20 for Synthetic).
 *
 * The parameters are one vector, in this order (n = ncols, C = nclasses):
 *   W1  n x H, input-major: W1[j*H + h] is the weight of feature j into
 *       unit h, so a sparse row's forward pass adds one contiguous run of H
 *       weights per nonzero, and its backward pass one run of H gradients;
 *   b1  H;
 *   W2  C x H, row-major: W2[r*H + h] is unit h's weight in class r's score;
 *   b2  C.
 * dim = H (n + 1) + C (H + 1). H = 0 has no hidden layer: W (n x C,
 * input-major) then b (C), multinomial logistic regression with an
 * intercept, dim = C (n + 1).
 *
 * Rows are processed one at a time with the unit activations on the stack
 * (H <= SFL_LOSS_MAX_HIDDEN), the arithmetic in a fixed order, so results
 * are the same bits on every run, thread and driver. The inputs are sparse
 * (MNIST's rows are 19% nonzero): a row costs about 2 nnz H multiply-adds
 * forward and backward, where a dense product (dgemm on the densified batch)
 * costs 2 n H; bench/bench_mlp measures both. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loss_int.h"

/* Entries of the first layer's outputs: H hidden units, or the C scores. */
static uint32_t first_width(const sfl_loss_t *l, uint32_t nclasses)
{
    return l->hidden ? l->hidden : nclasses;
}

static size_t mlp_dim(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses)
{
    uint64_t h = l->hidden, m = first_width(l, nclasses), d;

    if (nclasses < 2 || nclasses > SFL_LOSS_MAX_CLASSES)
        return 0;
    /* ncols < 2^32 and m <= 1024: no 64-bit overflow. */
    d = m * ((uint64_t)ncols + 1) + (h ? (uint64_t)nclasses * (h + 1) : 0);
    if (d > SIZE_MAX / sizeof(double))
        return 0;
    return (size_t)d;
}

/* The first layer, where the time goes (2 nnz m multiply-adds a row).
 * Units go in blocks of UB whose sums (or gradients) stay in registers
 * while the row's nonzeros stream past, two units per SSE2 / NEON
 * register (GCC's vector extension); the units after the last whole block
 * go one at a time. Every unit still sees its additions in the nonzeros'
 * order (and -std=c11 contracts no multiply-add into an FMA), so the bits
 * are those of the plain loop z[u] += v w[u]: bench/bench_mlp measures
 * the blocked loops at about 1.8x the plain ones on MNIST and faster than
 * densifying the batch for dgemm (docs/operations.md). */
typedef double v2d __attribute__((vector_size(16)));
#define UB 20

static v2d load2(const double *p)
{
    v2d t;

    memcpy(&t, p, sizeof(t));
    return t;
}

/* z[0..m) = b1 + sum_k val_k W1[col_k, :] over row i's nonzeros. */
static void first_forward(const sfl_csr_t *X, uint32_t i, const double *w1, const double *b1,
                          uint32_t m, double *z)
{
    size_t k0 = X->rowptr[i], k1 = X->rowptr[i + 1];
    uint32_t u0 = 0;

    for (; u0 + UB <= m; u0 += UB) {
        v2d acc[UB / 2];

#pragma GCC unroll 16
        for (int q = 0; q < UB / 2; q++)
            acc[q] = load2(b1 + u0 + 2 * q);
        for (size_t k = k0; k < k1; k++) {
            const double *w = w1 + (size_t)X->colind[k] * m + u0;
            v2d v = {X->val[k], X->val[k]};

#pragma GCC unroll 16
            for (int q = 0; q < UB / 2; q++)
                acc[q] += v * load2(w + 2 * q);
        }
        memcpy(z + u0, acc, sizeof(acc));
    }
    for (uint32_t u = u0; u < m; u++) {
        double t = b1[u];

        for (size_t k = k0; k < k1; k++)
            t += X->val[k] * w1[(size_t)X->colind[k] * m + u];
        z[u] = t;
    }
}

/* gW1[col_k, :] += val_k dz[0..m) over row i's nonzeros. */
static void first_backward(const sfl_csr_t *X, uint32_t i, const double *dz, uint32_t m,
                           double *gw1)
{
    size_t k0 = X->rowptr[i], k1 = X->rowptr[i + 1];
    uint32_t u0 = 0;

    for (; u0 + UB <= m; u0 += UB) {
        v2d d[UB / 2];

        memcpy(d, dz + u0, sizeof(d));
        for (size_t k = k0; k < k1; k++) {
            double *g = gw1 + (size_t)X->colind[k] * m + u0;
            v2d v = {X->val[k], X->val[k]};

#pragma GCC unroll 16
            for (int q = 0; q < UB / 2; q++) {
                v2d t = load2(g + 2 * q) + v * d[q];

                memcpy(g + 2 * q, &t, sizeof(t));
            }
        }
    }
    if (u0 == m)
        return;
    for (size_t k = k0; k < k1; k++) {
        double *g = gw1 + (size_t)X->colind[k] * m;
        double v = X->val[k];

        for (uint32_t u = u0; u < m; u++)
            g[u] += v * dz[u];
    }
}

/* The forward pass of row i: a[0..H) the hidden activations (when H > 0)
 * and s[0..C) the class scores. */
static void forward(const sfl_loss_t *l, const sfl_csr_t *X, uint32_t i, uint32_t c,
                    const double *x, double *a, double *s)
{
    uint32_t h = l->hidden, m = first_width(l, c);
    size_t n = X->ncols;
    const double *b1 = x + n * m;
    double *z = h ? a : s;

    first_forward(X, i, x, b1, m, z);
    if (h == 0)
        return;
    for (uint32_t u = 0; u < h; u++)
        a[u] = a[u] > 0.0 ? a[u] : 0.0;
    const double *w2 = b1 + h, *b2 = w2 + (size_t)c * h;
    for (uint32_t r = 0; r < c; r++) {
        double t = b2[r];

        for (uint32_t u = 0; u < h; u++)
            t += w2[(size_t)r * h + u] * a[u];
        s[r] = t;
    }
}

static double mlp_run(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                      uint32_t nrows, const double *x, double lambda, double *grad,
                      int want_value)
{
    const sfl_csr_t *X = ds->X;
    uint32_t c = ds->nclasses, h = l->hidden, m = first_width(l, c);
    size_t n = X->ncols, d = mlp_dim(l, X->ncols, c);
    uint32_t nb = rows ? nrows : X->nrows;
    double a[SFL_LOSS_MAX_HIDDEN], delta[SFL_LOSS_MAX_HIDDEN];
    double s[SFL_LOSS_MAX_CLASSES];
    double f = 0.0;

    if (grad)
        memset(grad, 0, d * sizeof(double));
    if (nb > 0) {
        double inv = 1.0 / nb;

        for (uint32_t t = 0; t < nb; t++) {
            uint32_t i = rows ? rows[t] : t;
            uint32_t yi = (uint32_t)ds->y[i];
            double mx = -INFINITY, sum = 0.0;

            forward(l, X, i, c, x, a, s);
            for (uint32_t r = 0; r < c; r++)
                mx = s[r] > mx ? s[r] : mx;
            double sy = s[yi] - mx;
            for (uint32_t r = 0; r < c; r++) {
                s[r] = exp(s[r] - mx);
                sum += s[r];
            }
            if (want_value)
                f += log(sum) - sy;
            if (grad == NULL)
                continue;
            /* s becomes dl/dscores / nb: (p - onehot(y)) / nb. */
            for (uint32_t r = 0; r < c; r++)
                s[r] = (s[r] / sum - (r == yi ? 1.0 : 0.0)) * inv;
            const double *dz = s; /* gradient at the first layer's outputs */
            if (h) {
                const double *w2 = x + n * h + h;
                double *gw2 = grad + n * h + h, *gb2 = gw2 + (size_t)c * h;

                memset(delta, 0, h * sizeof(double));
                for (uint32_t r = 0; r < c; r++) {
                    for (uint32_t u = 0; u < h; u++) {
                        gw2[(size_t)r * h + u] += s[r] * a[u];
                        delta[u] += s[r] * w2[(size_t)r * h + u];
                    }
                    gb2[r] += s[r];
                }
                /* ReLU: no gradient through a unit that was off. */
                for (uint32_t u = 0; u < h; u++)
                    if (!(a[u] > 0.0))
                        delta[u] = 0.0;
                dz = delta;
            }
            double *gb1 = grad + n * m;
            for (uint32_t u = 0; u < m; u++)
                gb1[u] += dz[u];
            first_backward(X, i, dz, m, grad);
        }
        f *= inv;
    }
    return f + sfl__loss_add_ridge(x, d, lambda, grad, want_value);
}

static double mlp_eval(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                       uint32_t nrows, const double *x, double lambda, double *grad)
{
    return mlp_run(l, ds, rows, nrows, x, lambda, grad, 1);
}

static void mlp_grad(const sfl_loss_t *l, const sfl_dataset_t *ds, const uint32_t *rows,
                     uint32_t nrows, const double *x, double lambda, double *grad)
{
    (void)mlp_run(l, ds, rows, nrows, x, lambda, grad, 0);
}

static double mlp_predict(const sfl_loss_t *l, const sfl_dataset_t *ds, uint32_t i,
                          const double *x)
{
    double a[SFL_LOSS_MAX_HIDDEN], s[SFL_LOSS_MAX_CLASSES];
    uint32_t best = 0;

    forward(l, ds->X, i, ds->nclasses, x, a, s);
    /* Strict > keeps the lowest class on ties, as softmax does. */
    for (uint32_t r = 1; r < ds->nclasses; r++)
        if (s[r] > s[best])
            best = r;
    return (double)best;
}

/* As PyTorch's nn.Linear starts (the papers' code): every weight and bias
 * of a layer with fan-in k uniform in [-1/sqrt(k), 1/sqrt(k)]. */
static void mlp_init(const sfl_loss_t *l, uint32_t ncols, uint32_t nclasses, sfl_rng_t *rng,
                     double *x)
{
    uint32_t h = l->hidden, m = first_width(l, nclasses);
    size_t first = (size_t)m * ((size_t)ncols + 1), d = mlp_dim(l, ncols, nclasses);
    double r1 = 1.0 / sqrt(ncols ? ncols : 1), r2 = h ? 1.0 / sqrt(h) : 0.0;

    for (size_t j = 0; j < d; j++)
        x[j] = (2.0 * sfl_rng_uniform(rng) - 1.0) * (j < first ? r1 : r2);
}

/* One loss per hidden size, made on first use and never freed: the
 * registry hands out pointers that must outlive every job. state[h] goes
 * 0 (empty) -> 1 (being filled by the thread that won the exchange) -> 2
 * (ready, never written again). */
static sfl_loss_t mlp_losses[SFL_LOSS_MAX_HIDDEN + 1];
static _Atomic unsigned char mlp_state[SFL_LOSS_MAX_HIDDEN + 1];

const sfl_loss_t *sfl__loss_mlp_find(const char *name)
{
    unsigned char empty = 0;
    unsigned long h;
    char *end;

    if (strncmp(name, "mlp:", 4) != 0 || name[4] < '0' || name[4] > '9' ||
        (name[4] == '0' && name[5] != '\0'))
        return NULL;
    h = strtoul(name + 4, &end, 10);
    if (*end != '\0' || h > SFL_LOSS_MAX_HIDDEN)
        return NULL;
    if (atomic_compare_exchange_strong(&mlp_state[h], &empty, 1)) {
        sfl_loss_t *l = &mlp_losses[h];

        snprintf(l->namebuf, sizeof(l->namebuf), "mlp:%lu", h);
        l->name = l->namebuf;
        l->classification = 1;
        l->hidden = (uint32_t)h;
        l->dim = mlp_dim;
        l->eval = mlp_eval;
        l->grad = mlp_grad;
        l->predict = mlp_predict;
        l->init = mlp_init;
        atomic_store(&mlp_state[h], 2);
    }
    while (atomic_load(&mlp_state[h]) != 2)
        ; /* another thread is filling the same entry: a few stores */
    return &mlp_losses[h];
}

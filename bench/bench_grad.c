/* bench_grad: cost of a minibatch logistic gradient per nonzero, against
 * the irreducible cost of reading the same nonzeros once.
 *
 *   bench_grad [--quick]
 *
 * The batch is all rows of a random CSR matrix (default 20,000 x 100,000,
 * 50 nonzeros per row), so nnz >> d and the O(d) zeroing of the dense
 * gradient that every call must do is a small, separately measured term.
 * Prints one line:
 *   bench_grad rows= d= nnz= pass_ns_per_nnz= grad_ns_per_nnz= grad_over_pass=
 *              eval_ns_per_nnz= eval_over_pass= zero_us= lsq_over_pass=
 * grad_* is loss->grad, the path training takes (one exp per row):
 * grad_ns_per_nnz = (grad - memset of d doubles) / nnz. eval_over_pass is
 * the same for loss->eval with a gradient, which also pays log1p per row
 * for the value; eval_ns_per_nnz is eval's total per nonzero. lsq_over_pass
 * is grad_over_pass for least squares, which has no libm call per row: it
 * isolates the sparse dot + axpy from the per-row maths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"
#include "sfl/core/rng.h"

#define RUNS 11

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;

    return (a > b) - (a < b);
}

static double median(double *t, int n)
{
    qsort(t, n, sizeof(*t), cmp_double);
    return t[n / 2];
}

/* Keeps results alive so the compiler cannot drop the timed work. */
static volatile double sink;

/* sum over the batch of val * x[col]: one read of every nonzero. Four
 * partial sums so the loop is bound by its loads, not by the latency of one
 * chain of additions: the reference is the fastest plain form. */
static double plain_pass(const sfl_csr_t *X, const uint32_t *rows, uint32_t n, const double *x)
{
    const size_t *rp = X->rowptr;
    const uint32_t *ci = X->colind;
    const double *v = X->val;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;

    for (uint32_t t = 0; t < n; t++) {
        size_t k = rp[rows[t]], end = rp[rows[t] + 1];

        for (; k + 4 <= end; k += 4) {
            s0 += v[k] * x[ci[k]];
            s1 += v[k + 1] * x[ci[k + 1]];
            s2 += v[k + 2] * x[ci[k + 2]];
            s3 += v[k + 3] * x[ci[k + 3]];
        }
        for (; k < end; k++)
            s0 += v[k] * x[ci[k]];
    }
    return (s0 + s1) + (s2 + s3);
}

int main(int argc, char **argv)
{
    uint32_t nrows = 20000, ncols = 100000, per_row = 50;
    sfl_csr_t *X = NULL;
    sfl_dataset_t *ds = NULL;
    double *y = NULL, *x = NULL, *grad = NULL;
    uint32_t *rows = NULL;
    double tp[RUNS], tg[RUNS], te[RUNS], tz[RUNS], tl[RUNS];
    sfl_rng_t r;
    int rc = 1;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) {
            nrows = 2000;
            ncols = 10000;
        } else {
            fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }

    sfl_rng_seed(&r, 2024, 0, 0, SFL_STREAM_DATA);
    if (sfl_csr_new(nrows, ncols, (size_t)nrows * per_row, &X) < 0)
        goto out;
    for (uint32_t i = 0; i < nrows; i++) {
        size_t base = (size_t)i * per_row;

        X->rowptr[i + 1] = base + per_row;
        if (sfl_rng_sample(&r, ncols, per_row, X->colind + base) < 0)
            goto out;
        for (uint32_t k = 0; k < per_row; k++)
            X->val[base + k] = sfl_rng_gauss(&r, 0.0, 1.0);
    }
    y = sfl__mallocarray(nrows, sizeof(*y));
    x = sfl__mallocarray(ncols, sizeof(*x));
    grad = sfl__mallocarray(ncols, sizeof(*grad));
    rows = sfl__mallocarray(nrows, sizeof(*rows));
    if (y == NULL || x == NULL || grad == NULL || rows == NULL)
        goto out;
    for (uint32_t i = 0; i < nrows; i++) {
        y[i] = (double)sfl_rng_below(&r, 2);
        rows[i] = i;
    }
    for (uint32_t j = 0; j < ncols; j++)
        x[j] = sfl_rng_gauss(&r, 0.0, 0.1);
    if (sfl_dataset_new(X, y, &ds) < 0) {
        X = NULL;
        y = NULL;
        goto out;
    }
    X = NULL;
    y = NULL;

    const sfl_csr_t *A = ds->X;
    /* One untimed round of each warms caches and page tables. */
    sink = plain_pass(A, rows, nrows, x);
    sfl_loss_grad(&sfl_loss_logistic, ds, rows, nrows, x, 0.0, grad);
    sink = sfl_loss_eval(&sfl_loss_logistic, ds, rows, nrows, x, 0.0, grad);
    for (int k = 0; k < RUNS; k++) {
        double t0 = now_ns();
        sink = plain_pass(A, rows, nrows, x);
        double t1 = now_ns();
        sfl_loss_grad(&sfl_loss_logistic, ds, rows, nrows, x, 0.0, grad);
        sink = grad[k % ncols];
        double t2 = now_ns();
        sink = sfl_loss_eval(&sfl_loss_logistic, ds, rows, nrows, x, 0.0, grad);
        double t3 = now_ns();
        memset(grad, 0, (size_t)ncols * sizeof(*grad));
        sink = grad[k % ncols];
        double t4 = now_ns();
        sfl_loss_grad(&sfl_loss_lsq, ds, rows, nrows, x, 0.0, grad);
        sink = grad[k % ncols];
        double t5 = now_ns();

        tp[k] = t1 - t0;
        tg[k] = t2 - t1;
        te[k] = t3 - t2;
        tz[k] = t4 - t3;
        tl[k] = t5 - t4;
    }
    double nnz = (double)A->nnz;
    double pass = median(tp, RUNS), gr = median(tg, RUNS), eval = median(te, RUNS);
    double zero = median(tz, RUNS), lsq = median(tl, RUNS);
    double p = pass / nnz, g = (gr - zero) / nnz, e = (eval - zero) / nnz;
    double l = (lsq - zero) / nnz;

    printf("bench_grad rows=%u d=%u nnz=%zu pass_ns_per_nnz=%.3f grad_ns_per_nnz=%.3f "
           "grad_over_pass=%.2f eval_ns_per_nnz=%.3f eval_over_pass=%.2f zero_us=%.1f "
           "lsq_over_pass=%.2f\n",
           nrows, ncols, A->nnz, p, g, g / p, eval / nnz, e / p, zero / 1e3, l / p);
    rc = 0;
out:
    if (rc)
        fprintf(stderr, "bench_grad: setup failed: %s\n", sfl_last_error());
    sfl__free(rows);
    sfl__free(grad);
    sfl__free(x);
    sfl__free(y);
    sfl_csr_free(X);
    sfl_dataset_free(ds);
    return rc;
}

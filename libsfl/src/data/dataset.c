#include "sfl/data/dataset.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"

void sfl_read_limits_default(sfl_read_limits_t *lim)
{
    if (lim == NULL)
        return;
    lim->max_rows = 10000000u;
    lim->max_cols = (uint32_t)1 << 26;
    lim->max_nnz = (size_t)1 << 31;
    lim->max_line = (size_t)64 << 20;
}

int sfl_dataset_new(sfl_csr_t *X, double *y, sfl_dataset_t **out)
{
    sfl_dataset_t *ds = NULL;
    int rc = 0;

    /* Ownership of X and y passes to us even on failure, so a caller can drop
     * its references right after the call whatever the outcome. */
    if (out == NULL || X == NULL || (y == NULL && X->nrows > 0)) {
        rc = sfl__fail(SFL_EINVAL, "dataset_new: NULL argument");
        goto out;
    }
    *out = NULL;
    rc = sfl_csr_validate(X);
    if (rc < 0)
        goto out;
    for (uint32_t i = 0; i < X->nrows; i++) {
        if (!isfinite(y[i])) {
            rc = sfl__fail(SFL_ENUMERIC, "dataset_new: target of row %u is not finite", i);
            goto out;
        }
    }
    ds = sfl__calloc(1, sizeof(*ds));
    if (ds == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    ds->X = X;
    ds->y = y;
    *out = ds;
    return 0;
out:
    sfl_csr_free(X);
    sfl__free(y);
    return rc;
}

void sfl_dataset_free(sfl_dataset_t *ds)
{
    if (ds == NULL)
        return;
    sfl__free(ds->labels);
    sfl__free(ds->y);
    sfl_csr_free(ds->X);
    sfl__free(ds);
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;

    return (a > b) - (a < b);
}

/* Index of v in the ascending, distinct u[0..n); v is known to be there. */
static uint32_t find_label(const double *u, uint32_t n, double v)
{
    uint32_t lo = 0, hi = n;

    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (u[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int sfl_dataset_encode_labels(sfl_dataset_t *ds, uint32_t max_classes)
{
    double *sorted = NULL, *labels = NULL;
    uint32_t n, k = 0;
    int rc = 0;

    if (ds == NULL || ds->X == NULL)
        return sfl__fail(SFL_EINVAL, "encode_labels: NULL dataset");
    /* Already coded: y holds class ids now, so recoding would lose labels. */
    if (ds->nclasses > 0) {
        if (ds->nclasses > max_classes)
            return sfl__fail(SFL_ELIMIT, "encode_labels: %u classes, more than max_classes=%u",
                             ds->nclasses, max_classes);
        return 0;
    }
    n = ds->X->nrows;
    for (uint32_t i = 0; i < n; i++) {
        if (isnan(ds->y[i]))
            return sfl__fail(SFL_ENUMERIC, "encode_labels: label of row %u is NaN", i);
    }
    sorted = sfl__mallocarray(n, sizeof(double));
    if (sorted == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if (n > 0)
        memcpy(sorted, ds->y, (size_t)n * sizeof(double));
    qsort(sorted, n, sizeof(double), cmp_double);
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || sorted[i] != sorted[k - 1])
            sorted[k++] = sorted[i];
    }
    if (k > max_classes) {
        rc = sfl__fail(SFL_ELIMIT,
                       "encode_labels: %u distinct labels, more than max_classes=%u "
                       "(regression targets?)",
                       k, max_classes);
        goto out;
    }
    if (k == 0)
        goto out; /* no rows: nothing to code, stays nclasses == 0 */
    labels = sfl__mallocarray(k, sizeof(double));
    if (labels == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    memcpy(labels, sorted, (size_t)k * sizeof(double));
    for (uint32_t i = 0; i < n; i++)
        ds->y[i] = (double)find_label(labels, k, ds->y[i]);
    ds->labels = labels;
    ds->nclasses = k;
    labels = NULL;
out:
    sfl__free(labels);
    sfl__free(sorted);
    return rc;
}

int sfl_dataset_subset(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t n,
                       sfl_dataset_t **out)
{
    sfl_csr_t *X = NULL;
    double *y = NULL, *labels = NULL;
    sfl_dataset_t *sub = NULL;
    int rc;

    if (out == NULL || ds == NULL || ds->X == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_subset: NULL argument");
    *out = NULL;
    rc = sfl_csr_select_rows(ds->X, rows, n, &X); /* also range-checks rows */
    if (rc < 0)
        return rc;
    y = sfl__mallocarray(n, sizeof(double));
    if (y == NULL) {
        sfl_csr_free(X);
        return SFL_ENOMEM;
    }
    for (uint32_t i = 0; i < n; i++)
        y[i] = ds->y[rows[i]];
    if (ds->nclasses > 0) {
        labels = sfl__mallocarray(ds->nclasses, sizeof(double));
        if (labels == NULL) {
            sfl_csr_free(X);
            sfl__free(y);
            return SFL_ENOMEM;
        }
        memcpy(labels, ds->labels, (size_t)ds->nclasses * sizeof(double));
    }
    rc = sfl_dataset_new(X, y, &sub); /* takes X and y */
    if (rc < 0) {
        sfl__free(labels);
        return rc;
    }
    sub->labels = labels;
    sub->nclasses = ds->nclasses;
    *out = sub;
    return 0;
}

int sfl_dataset_columns(const sfl_dataset_t *ds, uint32_t col0, uint32_t len,
                        sfl_dataset_t **out)
{
    const sfl_csr_t *A;
    sfl_csr_t *X = NULL;
    double *y = NULL, *labels = NULL;
    sfl_dataset_t *sub = NULL;
    size_t nnz = 0;
    int rc;

    if (out == NULL || ds == NULL || ds->X == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_columns: NULL argument");
    *out = NULL;
    A = ds->X;
    if (col0 > A->ncols || len > A->ncols - col0)
        return sfl__fail(SFL_EINVAL, "dataset_columns: columns [%u, %u) outside the %u of "
                         "the data", col0, col0 + len, A->ncols);
    for (size_t e = 0; e < A->nnz; e++)
        nnz += A->colind[e] >= col0 && A->colind[e] - col0 < len;
    if ((rc = sfl_csr_new(A->nrows, len, nnz, &X)) < 0)
        return rc;
    nnz = 0;
    for (uint32_t i = 0; i < A->nrows; i++) {
        for (size_t e = A->rowptr[i]; e < A->rowptr[i + 1]; e++)
            if (A->colind[e] >= col0 && A->colind[e] - col0 < len) {
                X->colind[nnz] = A->colind[e] - col0;
                X->val[nnz++] = A->val[e];
            }
        X->rowptr[i + 1] = nnz;
    }
    y = sfl__mallocarray(A->nrows, sizeof(double));
    labels = ds->nclasses ? sfl__mallocarray(ds->nclasses, sizeof(double)) : NULL;
    if (y == NULL || (ds->nclasses && labels == NULL)) {
        sfl_csr_free(X);
        sfl__free(y);
        sfl__free(labels);
        return SFL_ENOMEM;
    }
    memcpy(y, ds->y, (size_t)A->nrows * sizeof(double));
    if (labels)
        memcpy(labels, ds->labels, (size_t)ds->nclasses * sizeof(double));
    if ((rc = sfl_dataset_new(X, y, &sub)) < 0) { /* takes X and y */
        sfl__free(labels);
        return rc;
    }
    sub->labels = labels;
    sub->nclasses = ds->nclasses;
    *out = sub;
    return 0;
}

int sfl_dataset_split(const sfl_dataset_t *ds, double test_frac, sfl_rng_t *rng,
                      sfl_dataset_t **train, sfl_dataset_t **test)
{
    uint32_t *test_rows = NULL, *train_rows = NULL;
    sfl_dataset_t *tr = NULL, *te = NULL;
    uint32_t n, ntest;
    int rc;

    if (ds == NULL || ds->X == NULL || train == NULL || test == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_split: NULL argument");
    *train = NULL;
    *test = NULL;
    if (!(test_frac >= 0.0 && test_frac < 1.0))
        return sfl__fail(SFL_EINVAL, "dataset_split: test_frac %g not in [0, 1)", test_frac);
    n = ds->X->nrows;
    ntest = (uint32_t)floor(test_frac * (double)n);
    if (n > 0 && ntest >= n)
        ntest = n - 1; /* the contract keeps at least one training row */
    if (test_frac > 0.0 && rng == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_split: NULL rng");

    test_rows = sfl__mallocarray(ntest, sizeof(uint32_t));
    train_rows = sfl__mallocarray(n - ntest, sizeof(uint32_t));
    if (test_rows == NULL || train_rows == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    /* A sorted sample keeps both parts in original order and draws exactly
     * ntest values, so the split depends only on the rng state and n. */
    if (ntest > 0) {
        rc = sfl_rng_sample(rng, n, ntest, test_rows);
        if (rc < 0)
            goto out;
    }
    for (uint32_t r = 0, j = 0, t = 0; r < n; r++) {
        if (j < ntest && test_rows[j] == r)
            j++;
        else
            train_rows[t++] = r;
    }
    rc = sfl_dataset_subset(ds, train_rows, n - ntest, &tr);
    if (rc < 0)
        goto out;
    if (test_frac > 0.0) {
        rc = sfl_dataset_subset(ds, test_rows, ntest, &te);
        if (rc < 0)
            goto out;
    }
    *train = tr;
    *test = te;
    tr = te = NULL;
out:
    sfl_dataset_free(te);
    sfl_dataset_free(tr);
    sfl__free(train_rows);
    sfl__free(test_rows);
    return rc;
}

int sfl_dataset_set_ncols(sfl_dataset_t *ds, uint32_t ncols)
{
    if (ds == NULL || ds->X == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_set_ncols: NULL dataset");
    if (ncols < ds->X->ncols)
        return sfl__fail(SFL_EINVAL, "dataset_set_ncols: %u columns would narrow %u", ncols,
                         ds->X->ncols);
    /* Widening is free: CSR stores no per-column data. */
    ds->X->ncols = ncols;
    return 0;
}

int sfl_dataset_concat(sfl_dataset_t *const *parts, uint32_t n, sfl_dataset_t **out)
{
    const sfl_dataset_t *first;
    uint64_t rows = 0;
    size_t nnz = 0;
    sfl_csr_t *X = NULL;
    double *y = NULL, *labels = NULL;
    int rc;

    if (out == NULL || parts == NULL || n == 0)
        return sfl__fail(SFL_EINVAL, "dataset_concat: nothing to concatenate");
    *out = NULL;
    first = parts[0];
    for (uint32_t p = 0; p < n; p++) {
        const sfl_dataset_t *d = parts[p];

        if (d->X->ncols != first->X->ncols)
            return sfl__fail(SFL_EDIM, "dataset_concat: part %u has %u columns, part 0 %u", p,
                             d->X->ncols, first->X->ncols);
        if (d->nclasses != first->nclasses ||
            (d->nclasses && memcmp(d->labels, first->labels,
                                   (size_t)d->nclasses * sizeof(double)) != 0))
            return sfl__fail(SFL_EINVAL, "dataset_concat: part %u has another label coding", p);
        rows += d->X->nrows;
        nnz += d->X->nnz;
    }
    if (rows > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "dataset_concat: %llu rows", (unsigned long long)rows);
    rc = sfl_csr_new((uint32_t)rows, first->X->ncols, nnz, &X);
    if (rc < 0)
        return rc;
    y = sfl__mallocarray(rows, sizeof(double));
    if (first->nclasses)
        labels = sfl__mallocarray(first->nclasses, sizeof(double));
    if (y == NULL || (first->nclasses && labels == NULL)) {
        rc = SFL_ENOMEM;
        goto out;
    }
    /* Rows are appended part by part; the offsets shift by what came before. */
    uint32_t r = 0;
    size_t k = 0;
    for (uint32_t p = 0; p < n; p++) {
        const sfl_csr_t *a = parts[p]->X;

        memcpy(X->colind + k, a->colind, a->nnz * sizeof(uint32_t));
        memcpy(X->val + k, a->val, a->nnz * sizeof(double));
        for (uint32_t i = 0; i < a->nrows; i++, r++) {
            X->rowptr[r + 1] = k + a->rowptr[i + 1];
            y[r] = parts[p]->y[i];
        }
        k += a->nnz;
    }
    if (labels)
        memcpy(labels, first->labels, (size_t)first->nclasses * sizeof(double));
    rc = sfl_dataset_new(X, y, out); /* takes X and y, even on failure */
    X = NULL;
    y = NULL;
    if (rc < 0)
        goto out;
    (*out)->labels = labels;
    (*out)->nclasses = first->nclasses;
    labels = NULL;
out:
    sfl_csr_free(X);
    sfl__free(y);
    sfl__free(labels);
    return rc;
}

int sfl_dataset_moments(const sfl_dataset_t *ds, uint32_t d, double *m)
{
    const sfl_csr_t *X;

    if (ds == NULL || ds->X == NULL || m == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_moments: NULL argument");
    X = ds->X;
    m[0] += X->nrows;
    for (uint32_t i = 0; i < X->nrows; i++) {
        for (size_t p = X->rowptr[i]; p < X->rowptr[i + 1]; p++) {
            uint32_t j = X->colind[p];
            double v = X->val[p];

            if (j >= d)
                break; /* columns ascend within a row */
            m[1 + j] += v;
            m[1 + (size_t)d + j] += v * v;
        }
    }
    return 0;
}

int sfl_moments_standardizer(const double *m, uint32_t d, double eps, double *mu, double *scale)
{
    double n;

    if (m == NULL || mu == NULL || scale == NULL)
        return sfl__fail(SFL_EINVAL, "moments_standardizer: NULL argument");
    n = m[0];
    if (!(eps > 0) || !isfinite(eps))
        return sfl__fail(SFL_EINVAL, "standardize: eps %g is not > 0", eps);
    if (!(n >= 1) || !isfinite(n))
        return sfl__fail(SFL_EINVAL, "standardize: moments count %g rows (want >= 1)", n);
    for (uint32_t j = 0; j < d; j++) {
        double s = m[1 + j], q = m[1 + (size_t)d + j], var;

        if (!isfinite(s) || !isfinite(q) || q < 0)
            return sfl__fail(SFL_EINVAL, "standardize: moments of feature %u are not valid "
                             "(sum %g, sum of squares %g)", j, s, q);
        mu[j] = s / n;
        /* E[x^2] - mu^2 can come out a hair below 0 for a constant feature. */
        var = q / n - mu[j] * mu[j];
        scale[j] = 1.0 / (sqrt(var > 0 ? var : 0) + eps);
    }
    return 0;
}

int sfl_dataset_standardize(sfl_dataset_t *ds, uint32_t d, const double *mu, const double *scale)
{
    const sfl_csr_t *X;
    sfl_csr_t *Z = NULL;
    size_t nnz = 0, fixed = 0;
    int rc;

    if (ds == NULL || ds->X == NULL || mu == NULL || scale == NULL)
        return sfl__fail(SFL_EINVAL, "dataset_standardize: NULL argument");
    X = ds->X;
    if (d != X->ncols)
        return sfl__fail(SFL_EDIM, "standardize: statistics for %u features, data has %u", d,
                         X->ncols);
    for (uint32_t j = 0; j < d; j++) {
        if (!isfinite(mu[j]) || !isfinite(scale[j]))
            return sfl__fail(SFL_ENUMERIC, "standardize: feature %u has mean %g, scale %g", j,
                             mu[j], scale[j]);
        fixed += mu[j] != 0;
    }
    /* Each row keeps its stored entries and gains the columns with mu != 0. */
    if (fixed > 0 && X->nrows > (SIZE_MAX / 2) / fixed)
        return sfl__fail(SFL_ELIMIT, "standardize: %u rows x %zu dense columns", X->nrows, fixed);
    if ((rc = sfl_csr_new(X->nrows, d, X->nnz + (size_t)X->nrows * fixed, &Z)) < 0)
        return rc;
    for (uint32_t i = 0; i < X->nrows; i++) {
        size_t p = X->rowptr[i], end = X->rowptr[i + 1];

        for (uint32_t j = 0; j < d; j++) {
            double x = 0, z;

            if (p < end && X->colind[p] == j)
                x = X->val[p++];
            else if (mu[j] == 0)
                continue;
            z = (x - mu[j]) * scale[j];
            if (z != 0) {
                Z->colind[nnz] = j;
                Z->val[nnz++] = z;
            }
        }
        Z->rowptr[i + 1] = nnz;
    }
    Z->nnz = nnz;
    sfl_csr_free(ds->X);
    ds->X = Z;
    return 0;
}

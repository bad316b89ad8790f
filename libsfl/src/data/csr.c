#include "sfl/data/csr.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

int sfl_csr_new(uint32_t nrows, uint32_t ncols, size_t nnz, sfl_csr_t **out)
{
    sfl_csr_t *a = NULL;
    int rc = 0;

    if (out == NULL)
        return sfl__fail(SFL_EINVAL, "csr_new: out is NULL");
    *out = NULL;
    /* rowptr has nrows + 1 entries, which wraps on a 32-bit size_t; values
     * are the widest array, so if they fit every array fits. */
    size_t nptr = (size_t)nrows + 1;
    if (nptr == 0 || nptr > SIZE_MAX / sizeof(size_t))
        return sfl__fail(SFL_ELIMIT, "csr_new: %u rows too many", nrows);
    if (nnz > SIZE_MAX / sizeof(double))
        return sfl__fail(SFL_ELIMIT, "csr_new: %zu nonzeros too many", nnz);

    a = sfl__calloc(1, sizeof(*a));
    if (a == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    a->nrows = nrows;
    a->ncols = ncols;
    a->nnz = nnz;
    a->rowptr = sfl__calloc(nptr, sizeof(size_t));
    a->colind = sfl__mallocarray(nnz, sizeof(uint32_t));
    a->val = sfl__mallocarray(nnz, sizeof(double));
    if (a->rowptr == NULL || a->colind == NULL || a->val == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    *out = a;
    a = NULL;
out:
    sfl_csr_free(a);
    return rc;
}

void sfl_csr_free(sfl_csr_t *a)
{
    if (a == NULL)
        return;
    sfl__free(a->val);
    sfl__free(a->colind);
    sfl__free(a->rowptr);
    sfl__free(a);
}

int sfl_csr_from_dense(const double *a, uint32_t nrows, uint32_t ncols, sfl_csr_t **out)
{
    sfl_csr_t *m = NULL;
    size_t nnz = 0;
    int rc;

    if (out == NULL || (a == NULL && nrows > 0 && ncols > 0))
        return sfl__fail(SFL_EINVAL, "csr_from_dense: NULL argument");
    *out = NULL;
    /* Count first so storage is allocated exactly once; reject non-finite
     * values here because every kernel assumes finite entries. */
    for (uint32_t i = 0; i < nrows; i++) {
        const double *row = a + (size_t)i * ncols;
        for (uint32_t j = 0; j < ncols; j++) {
            if (!isfinite(row[j]))
                return sfl__fail(SFL_ENUMERIC, "csr_from_dense: non-finite value at (%u, %u)",
                                 i, j);
            nnz += row[j] != 0.0;
        }
    }
    rc = sfl_csr_new(nrows, ncols, nnz, &m);
    if (rc < 0)
        return rc;
    size_t k = 0;
    for (uint32_t i = 0; i < nrows; i++) {
        const double *row = a + (size_t)i * ncols;
        for (uint32_t j = 0; j < ncols; j++) {
            if (row[j] != 0.0) {
                m->colind[k] = j;
                m->val[k] = row[j];
                k++;
            }
        }
        m->rowptr[i + 1] = k;
    }
    *out = m;
    return 0;
}

int sfl_csr_select_rows(const sfl_csr_t *a, const uint32_t *rows, uint32_t n, sfl_csr_t **out)
{
    sfl_csr_t *m = NULL;
    size_t nnz = 0;
    int rc;

    if (out == NULL || a == NULL || (rows == NULL && n > 0))
        return sfl__fail(SFL_EINVAL, "csr_select_rows: NULL argument");
    *out = NULL;
    for (uint32_t r = 0; r < n; r++) {
        if (rows[r] >= a->nrows)
            return sfl__fail(SFL_EINVAL, "csr_select_rows: row %u out of range (%u rows)",
                             rows[r], a->nrows);
        size_t len = a->rowptr[rows[r] + 1] - a->rowptr[rows[r]];
        /* Rows may repeat, so the sum can exceed a->nnz and even wrap. */
        if (len > SIZE_MAX - nnz)
            return sfl__fail(SFL_ELIMIT, "csr_select_rows: too many nonzeros");
        nnz += len;
    }
    rc = sfl_csr_new(n, a->ncols, nnz, &m);
    if (rc < 0)
        return rc;
    size_t k = 0;
    for (uint32_t r = 0; r < n; r++) {
        size_t lo = a->rowptr[rows[r]], len = a->rowptr[rows[r] + 1] - lo;
        if (len > 0) {
            memcpy(m->colind + k, a->colind + lo, len * sizeof(uint32_t));
            memcpy(m->val + k, a->val + lo, len * sizeof(double));
        }
        k += len;
        m->rowptr[r + 1] = k;
    }
    *out = m;
    return 0;
}

double sfl_csr_row_dot(const sfl_csr_t *a, uint32_t i, const double *x)
{
    /* sum_{k in row i} val[k] * x[colind[k]] */
    assert(a != NULL && i < a->nrows && x != NULL);
    const size_t lo = a->rowptr[i], hi = a->rowptr[i + 1];
    const uint32_t *ci = a->colind;
    const double *v = a->val;
    double s = 0.0;

    for (size_t k = lo; k < hi; k++)
        s += v[k] * x[ci[k]];
    return s;
}

void sfl_csr_row_axpy(const sfl_csr_t *a, uint32_t i, double alpha, double *y)
{
    /* y[colind[k]] += alpha * val[k] for k in row i */
    assert(a != NULL && i < a->nrows && y != NULL);
    const size_t lo = a->rowptr[i], hi = a->rowptr[i + 1];
    const uint32_t *ci = a->colind;
    const double *v = a->val;

    for (size_t k = lo; k < hi; k++)
        y[ci[k]] += alpha * v[k];
}

void sfl_csr_gemv(const sfl_csr_t *a, const double *x, double *y)
{
    /* y_i = <a_i, x> for every row i */
    assert(a != NULL && (x != NULL || a->nnz == 0) && (y != NULL || a->nrows == 0));
    const uint32_t m = a->nrows;
    const size_t *rp = a->rowptr;
    const uint32_t *ci = a->colind;
    const double *v = a->val;

    for (uint32_t i = 0; i < m; i++) {
        double s = 0.0;
        for (size_t k = rp[i]; k < rp[i + 1]; k++)
            s += v[k] * x[ci[k]];
        y[i] = s;
    }
}

int sfl_csr_validate(const sfl_csr_t *a)
{
    if (a == NULL)
        return sfl__fail(SFL_EINVAL, "csr: NULL matrix");
    if (a->rowptr == NULL || ((a->colind == NULL || a->val == NULL) && a->nnz > 0))
        return sfl__fail(SFL_EINVAL, "csr: missing arrays");
    if (a->rowptr[0] != 0)
        return sfl__fail(SFL_EINVAL, "csr: rowptr[0] is %zu, not 0", a->rowptr[0]);
    if (a->rowptr[a->nrows] != a->nnz)
        return sfl__fail(SFL_EINVAL, "csr: rowptr[%u] is %zu but nnz is %zu", a->nrows,
                         a->rowptr[a->nrows], a->nnz);
    /* Check every row's bounds before looking at any entry so a corrupt
     * rowptr cannot send the entry loop out of the arrays. */
    for (uint32_t i = 0; i < a->nrows; i++) {
        if (a->rowptr[i + 1] < a->rowptr[i] || a->rowptr[i + 1] > a->nnz)
            return sfl__fail(SFL_EINVAL, "csr: row %u: rowptr %zu..%zu not monotone within nnz %zu",
                             i, a->rowptr[i], a->rowptr[i + 1], a->nnz);
    }
    for (uint32_t i = 0; i < a->nrows; i++) {
        for (size_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            uint32_t c = a->colind[k];
            if (c >= a->ncols)
                return sfl__fail(SFL_EINVAL, "csr: row %u entry %zu: column %u >= ncols %u", i,
                                 k, c, a->ncols);
            if (k > a->rowptr[i] && c <= a->colind[k - 1])
                return sfl__fail(SFL_EINVAL,
                                 "csr: row %u entry %zu: column %u not after column %u", i, k,
                                 c, a->colind[k - 1]);
            if (!isfinite(a->val[k]))
                return sfl__fail(SFL_ENUMERIC, "csr: row %u entry %zu: non-finite value", i, k);
        }
    }
    return 0;
}

#include "sfl/core/vec.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* Dense kernels are plain sequential loops: the summation order is part of
 * the result, and the simulator and the networked drivers must agree bit for
 * bit, so no BLAS and no reassociation. */

/* sum_i x_i y_i */
double sfl_dvec_dot(const double *x, const double *y, size_t n)
{
    double s = 0.0;

    for (size_t i = 0; i < n; i++)
        s += x[i] * y[i];
    return s;
}

/* y += a x */
void sfl_dvec_axpy(double a, const double *x, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* x *= a */
void sfl_dvec_scale(double a, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

/* sqrt(sum_i x_i^2) */
double sfl_dvec_nrm2(const double *x, size_t n)
{
    double s = 0.0;

    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    /* The plain sum is exact enough and fast; only when it overflowed or may
     * have lost everything to underflow do we pay for a second, scaled pass
     * (divide by the largest magnitude, as LAPACK's dnrm2 does). */
    if (isfinite(s) && s >= DBL_MIN / DBL_EPSILON)
        return sqrt(s);
    double amax = 0.0;

    for (size_t i = 0; i < n; i++) {
        double m = fabs(x[i]);

        if (m > amax || isnan(m))
            amax = m;
    }
    if (amax == 0.0 || !isfinite(amax))
        return amax;
    double t = 0.0;

    for (size_t i = 0; i < n; i++) {
        double r = x[i] / amax;

        t += r * r;
    }
    return amax * sqrt(t);
}

/* #{i : x_i != 0} */
size_t sfl_dvec_nnz(const double *x, size_t n)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += (x[i] != 0.0);
    return c;
}

/* #{i : (x_i != 0) != (y_i != 0)} */
size_t sfl_dvec_support_diff(const double *x, const double *y, size_t n)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += ((x[i] != 0.0) != (y[i] != 0.0));
    return c;
}

void sfl_dvec_support_bits(const double *x, size_t n, uint8_t *bits)
{
    memset(bits, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++)
        bits[i / 8] |= (uint8_t)((x[i] != 0.0) << (i % 8));
}

size_t sfl_dvec_support_bits_diff(const uint8_t *bits, const double *y, size_t n)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += (((bits[i / 8] >> (i % 8)) & 1) != (y[i] != 0.0));
    return c;
}

int sfl_spvec_new(uint32_t dim, uint32_t cap, sfl_spvec_t **out)
{
    sfl_spvec_t *v = NULL;
    int rc = SFL_ENOMEM;

    assert(out != NULL);
    *out = NULL;
    v = sfl__calloc(1, sizeof(*v));
    if (v == NULL)
        goto out;
    v->dim = dim;
    v->idx = sfl__mallocarray(cap, sizeof(*v->idx));
    v->val = sfl__mallocarray(cap, sizeof(*v->val));
    if (v->idx == NULL || v->val == NULL)
        goto out;
    v->cap = cap;
    *out = v;
    v = NULL;
    rc = 0;
out:
    sfl_spvec_free(v);
    return rc;
}

void sfl_spvec_free(sfl_spvec_t *v)
{
    if (v == NULL)
        return;
    sfl__free(v->idx);
    sfl__free(v->val);
    sfl__free(v);
}

int sfl_spvec_reserve(sfl_spvec_t *v, uint32_t cap)
{
    assert(v != NULL);
    if (cap <= v->cap)
        return 0;
    /* Each array is committed as soon as it is grown, so a failure on the
     * second leaves v consistent (cap still describes both arrays). */
    uint32_t *idx = sfl__reallocarray(v->idx, cap, sizeof(*idx));

    if (idx == NULL)
        return SFL_ENOMEM;
    v->idx = idx;
    double *val = sfl__reallocarray(v->val, cap, sizeof(*val));

    if (val == NULL)
        return SFL_ENOMEM;
    v->val = val;
    v->cap = cap;
    return 0;
}

int sfl_spvec_from_dense(sfl_spvec_t *v, const double *x)
{
    uint32_t dim, nnz = 0;
    int rc;

    assert(v != NULL && (x != NULL || v->dim == 0));
    dim = v->dim;
    /* Count (and vet) first so v is untouched on any failure. */
    for (uint32_t i = 0; i < dim; i++) {
        if (!isfinite(x[i]))
            return sfl__fail(SFL_ENUMERIC, "dense entry %u is not finite", i);
        nnz += (x[i] != 0.0);
    }
    rc = sfl_spvec_reserve(v, nnz);
    if (rc < 0)
        return rc;
    uint32_t *idx = v->idx;
    double *val = v->val;
    uint32_t j = 0;

    for (uint32_t i = 0; i < dim; i++) {
        if (x[i] != 0.0) {
            idx[j] = i;
            val[j] = x[i];
            j++;
        }
    }
    v->nnz = j;
    return 0;
}

int sfl_spvec_gather(sfl_spvec_t *v, const double *x, const uint32_t *idx, uint32_t k)
{
    int rc;

    assert(v != NULL);
    if (k > v->dim)
        return sfl__fail(SFL_EINVAL, "gather of %u entries from dimension %u", k, v->dim);
    for (uint32_t j = 0; j < k; j++) {
        if (idx[j] >= v->dim)
            return sfl__fail(SFL_ERANGE, "gather index %u at position %u >= dim %u",
                             idx[j], j, v->dim);
        if (j > 0 && idx[j] <= idx[j - 1])
            return sfl__fail(SFL_EINVAL, "gather indices not strictly increasing at position %u",
                             j);
        if (!isfinite(x[idx[j]]))
            return sfl__fail(SFL_ENUMERIC, "dense entry %u is not finite", idx[j]);
    }
    rc = sfl_spvec_reserve(v, k);
    if (rc < 0)
        return rc;
    for (uint32_t j = 0; j < k; j++) {
        v->idx[j] = idx[j];
        v->val[j] = x[idx[j]];
    }
    v->nnz = k;
    return 0;
}

/* y[v.idx] = v.val */
void sfl_spvec_scatter(const sfl_spvec_t *v, double *y)
{
    const uint32_t *idx = v->idx;
    const double *val = v->val;
    uint32_t nnz = v->nnz;

    for (uint32_t j = 0; j < nnz; j++)
        y[idx[j]] = val[j];
}

/* y += a v */
void sfl_spvec_axpy(double a, const sfl_spvec_t *v, double *y)
{
    const uint32_t *idx = v->idx;
    const double *val = v->val;
    uint32_t nnz = v->nnz;

    for (uint32_t j = 0; j < nnz; j++)
        y[idx[j]] += a * val[j];
}

/* sum_j v.val_j y[v.idx_j] */
double sfl_spvec_dot_dense(const sfl_spvec_t *v, const double *y)
{
    const uint32_t *idx = v->idx;
    const double *val = v->val;
    uint32_t nnz = v->nnz;
    double s = 0.0;

    for (uint32_t j = 0; j < nnz; j++)
        s += val[j] * y[idx[j]];
    return s;
}

/* sum over common indices of u_i v_i, merged in index order */
double sfl_spvec_dot(const sfl_spvec_t *u, const sfl_spvec_t *v)
{
    const uint32_t *ui = u->idx, *vi = v->idx;
    const double *uv = u->val, *vv = v->val;
    uint32_t nu = u->nnz, nv = v->nnz, a = 0, b = 0;
    double s = 0.0;

    assert(u->dim == v->dim);
    while (a < nu && b < nv) {
        if (ui[a] < vi[b]) {
            a++;
        } else if (ui[a] > vi[b]) {
            b++;
        } else {
            s += uv[a] * vv[b];
            a++;
            b++;
        }
    }
    return s;
}

int sfl_spvec_validate(const sfl_spvec_t *v)
{
    if (v == NULL)
        return sfl__fail(SFL_EINVAL, "sparse vector is NULL");
    if (v->nnz > v->cap)
        return sfl__fail(SFL_EPARSE, "nnz %u exceeds capacity %u", v->nnz, v->cap);
    if (v->nnz > v->dim)
        return sfl__fail(SFL_EPARSE, "nnz %u exceeds dim %u", v->nnz, v->dim);
    if (v->nnz > 0 && (v->idx == NULL || v->val == NULL))
        return sfl__fail(SFL_EPARSE, "nnz %u but no storage", v->nnz);
    for (uint32_t j = 0; j < v->nnz; j++) {
        if (v->idx[j] >= v->dim)
            return sfl__fail(SFL_ERANGE, "entry %u: index %u >= dim %u", j, v->idx[j],
                             v->dim);
        if (j > 0 && v->idx[j] <= v->idx[j - 1])
            return sfl__fail(SFL_EPARSE, "entry %u: index %u not above previous %u", j,
                             v->idx[j], v->idx[j - 1]);
        if (!isfinite(v->val[j]))
            return sfl__fail(SFL_ENUMERIC, "entry %u (index %u): value is not finite", j,
                             v->idx[j]);
    }
    return 0;
}

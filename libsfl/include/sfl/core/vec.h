/* Dense and sparse vectors of float64.
 *
 * Dense vectors are plain `double *` with an explicit length. The dense
 * kernels are hand-written, sequential loops on purpose: the simulator and
 * the networked federation must produce bit-identical models, which a
 * threaded BLAS with run-time kernel choice would not guarantee.
 *
 * A sparse vector holds strictly increasing indices in [0, dim) and their
 * values. */
#ifndef SFL_VEC_H
#define SFL_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_spvec {
    uint32_t dim; /* logical length */
    uint32_t nnz; /* stored entries */
    uint32_t cap; /* allocated entries in idx/val */
    uint32_t *idx; /* strictly increasing, < dim */
    double *val;
} sfl_spvec_t;

/* Dense kernels; all lengths are element counts. */
double sfl_dvec_dot(const double *x, const double *y, size_t n);
void sfl_dvec_axpy(double a, const double *x, double *y, size_t n); /* y += a x */
void sfl_dvec_scale(double a, double *x, size_t n);                  /* x *= a */
double sfl_dvec_nrm2(const double *x, size_t n);
size_t sfl_dvec_nnz(const double *x, size_t n);
/* Support churn: #{i : (x_i != 0) != (y_i != 0)}, the entries that enter or
 * leave the support from x to y (-0.0 counts as zero, NaN as nonzero). */
size_t sfl_dvec_support_diff(const double *x, const double *y, size_t n);
/* The same against x's support kept as bits (a copy of x would take 64
 * times the room): bits[i / 8] bit i % 8 = (x_i != 0), (n + 7) / 8 bytes
 * that sfl_dvec_support_bits writes. */
void sfl_dvec_support_bits(const double *x, size_t n, uint8_t *bits);
size_t sfl_dvec_support_bits_diff(const uint8_t *bits, const double *y, size_t n);

/* Returns owned (free with sfl_spvec_free) an empty vector of dimension dim
 * with room for cap entries. */
int sfl_spvec_new(uint32_t dim, uint32_t cap, sfl_spvec_t **out) SFL_MUST_CHECK;
void sfl_spvec_free(sfl_spvec_t *v);
/* Grow capacity to at least cap (contents kept). */
int sfl_spvec_reserve(sfl_spvec_t *v, uint32_t cap) SFL_MUST_CHECK;

/* v = nonzeros of dense x (length v->dim), in index order. A non-finite x
 * is SFL_ENUMERIC and leaves v unchanged. */
int sfl_spvec_from_dense(sfl_spvec_t *v, const double *x) SFL_MUST_CHECK;
/* v = x restricted to the sorted index set idx[0..k) (gather; zeros kept).
 * Unsorted idx is SFL_EINVAL, idx >= v->dim SFL_ERANGE, non-finite
 * gathered values SFL_ENUMERIC; v is unchanged on failure. */
int sfl_spvec_gather(sfl_spvec_t *v, const double *x, const uint32_t *idx,
                     uint32_t k) SFL_MUST_CHECK;
/* y[v.idx] = v.val (scatter); y has length v->dim, other entries untouched. */
void sfl_spvec_scatter(const sfl_spvec_t *v, double *y);
/* y += a * v */
void sfl_spvec_axpy(double a, const sfl_spvec_t *v, double *y);
/* <v, y> with dense y */
double sfl_spvec_dot_dense(const sfl_spvec_t *v, const double *y);
/* <u, v> of two sparse vectors of the same dimension (merge). */
double sfl_spvec_dot(const sfl_spvec_t *u, const sfl_spvec_t *v);
/* Checks the invariants: nnz <= cap, indices strictly increasing and < dim,
 * values finite. Returns 0, or SFL_EPARSE/SFL_ERANGE/SFL_ENUMERIC with
 * sfl_last_error() naming the first bad position. */
int sfl_spvec_validate(const sfl_spvec_t *v) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

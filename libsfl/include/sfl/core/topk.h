/* Hard thresholding H_tau: keep the tau entries of largest magnitude.
 *
 * Selection, not sorting: expected O(n) time with a deterministic pivot
 * sequence. Ties are broken deterministically: between equal magnitudes
 * the smaller index wins, so the result never depends on memory layout or
 * platform. NaN inputs are the caller's error (sfl_topk returns SFL_ENUMERIC). */
#ifndef SFL_TOPK_H
#define SFL_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/vec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reusable scratch space so the kernels allocate nothing. */
typedef struct sfl_topk_ws {
    uint32_t *perm; /* index workspace */
    size_t cap;     /* entries in perm */
} sfl_topk_ws_t;

void sfl_topk_ws_init(sfl_topk_ws_t *ws);
/* Make room for vectors of length n (at most UINT32_MAX, else SFL_EINVAL). */
int sfl_topk_ws_reserve(sfl_topk_ws_t *ws, size_t n) SFL_MUST_CHECK;
void sfl_topk_ws_close(sfl_topk_ws_t *ws);

/* out[0..k) = indices of the k largest |x[i]|, sorted ascending by index.
 * k > n is SFL_EINVAL. ws must have room for n (reserve first). */
int sfl_topk_select(const double *x, size_t n, size_t k, uint32_t *out,
                    sfl_topk_ws_t *ws) SFL_MUST_CHECK;

/* In place: x = H_tau(x), zeroing all but the tau largest magnitudes. */
int sfl_ht_dense(double *x, size_t n, size_t tau, sfl_topk_ws_t *ws) SFL_MUST_CHECK;

/* Per-block variant: x is nblocks consecutive blocks of blocklen entries
 * (the softmax model stores class r in block r); each block keeps its own
 * tau largest magnitudes. ws needs room for blocklen. On failure (a NaN in
 * any block) no block is changed. */
int sfl_ht_block(double *x, size_t nblocks, size_t blocklen, size_t tau,
                 sfl_topk_ws_t *ws) SFL_MUST_CHECK;

/* out = H_tau(x) as a sparse vector (out->dim must equal n, else SFL_EDIM);
 * x untouched. Entries of H_tau(x) that are zero are not stored, so
 * out->nnz <= tau. A kept infinite value is SFL_ENUMERIC (a sparse vector
 * holds finite values). */
int sfl_ht_to_spvec(const double *x, size_t n, size_t tau, sfl_spvec_t *out,
                    sfl_topk_ws_t *ws) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* Sparse vector wire codec.
 *
 * Layout (all varints are unsigned LEB128, at most 5 bytes for 32 bits, and
 * minimal: a redundant trailing 0x00 group is rejected, so each vector has
 * exactly one encoding):
 *   varint dim | varint nnz | u8 encoding |
 *   nnz index gaps: varint (idx[0]) then varint (idx[j] - idx[j-1] - 1) |
 *   values: F64  nnz x 8-byte IEEE-754 little-endian
 *           F32  nnz x 4-byte IEEE-754 little-endian
 *           Q8   f64 lo, f64 hi (little-endian), then nnz bytes q:
 *                value = lo + q * (hi - lo) / 255  (lossy)
 * The gap coding spends about log2(d/k) + 1 bits per index, near the
 * log2 C(d,k) information limit for uniformly spread supports. */
#ifndef SFL_SPCODEC_H
#define SFL_SPCODEC_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/vec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SFL_ENC_F64 = 0,
    SFL_ENC_F32 = 1,
    SFL_ENC_Q8 = 2
} sfl_enc_t;

/* Exact number of bytes sfl_spcodec_encode writes for v. */
size_t sfl_spcodec_size(const sfl_spvec_t *v, sfl_enc_t enc);
/* Encode v (which must satisfy sfl_spvec_validate, else its error) into
 * buf[0..cap); *len = bytes written. SFL_ELIMIT if cap is too small,
 * SFL_ERANGE for an F32 value beyond FLT_MAX or a Q8 range whose width
 * hi - lo overflows. */
int sfl_spcodec_encode(const sfl_spvec_t *v, sfl_enc_t enc, uint8_t *buf, size_t cap,
                       size_t *len) SFL_MUST_CHECK;
/* Decode and validate everything (exact length, dim <= max_dim, nnz <= dim and
 * <= max_nnz checked before allocating, indices in range, values finite,
 * known encoding, lo <= hi). Returns owned (sfl_spvec_free); on failure *out
 * is NULL and sfl_last_error() says what was wrong at which byte offset:
 * SFL_ETRUNC (too short), SFL_EPARSE (bad varint, nnz > dim, lo > hi,
 * trailing bytes), SFL_ELIMIT (max_dim, max_nnz), SFL_ERANGE (index >= dim,
 * varint over 32 bits, Q8 range too wide), SFL_ENUMERIC (NaN/Inf),
 * SFL_EUNSUP (unknown encoding). */
int sfl_spcodec_decode(const uint8_t *buf, size_t len, uint32_t max_dim, uint32_t max_nnz,
                       sfl_spvec_t **out) SFL_MUST_CHECK;
/* The same checks and errors, decoding into the caller's dst (from
 * sfl_spvec_new; reused across calls): its arrays grow (sfl_spvec_reserve)
 * only when dst->cap < nnz, after the header has been checked, so a
 * coordinator decoding update after update allocates nothing once warm.
 * On success dst->dim and dst->nnz are the decoded ones; on failure
 * dst->nnz is 0, dst->dim and the capacity are unchanged and the array
 * contents are unspecified. */
int sfl_spcodec_decode_into(const uint8_t *buf, size_t len, uint32_t max_dim, uint32_t max_nnz,
                            sfl_spvec_t *dst) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

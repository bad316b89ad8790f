/* Sparse vector wire codec.
 *
 * Layout (all varints are unsigned LEB128, at most 5 bytes for 32 bits, and
 * minimal: a redundant trailing 0x00 group is rejected):
 *   varint dim | varint nnz | u8 enc + 4 * layout | index section | values
 * enc (bits 0..1; 3 is refused):
 *   F64  nnz x 8-byte IEEE-754 little-endian
 *   F32  nnz x 4-byte IEEE-754 little-endian
 *   Q8   f64 lo, f64 hi (little-endian), then nnz bytes q:
 *        value = lo + q * (hi - lo) / 255  (lossy)
 * layout (bits 2..7) says how the support idx[0] < ... < idx[nnz-1] is sent:
 *   0        varint: gaps idx[0], idx[j] - idx[j-1] - 1 as varints (the only
 *            layout before there were layouts, so byte 2 of old vectors is
 *            just enc; stored checkpoints and older peers' bytes decode)
 *   1        dense: nothing; nnz == dim, idx[j] = j (memcpy-speed values)
 *   2        bitmap: ceil(dim / 8) bytes, bit i (byte i / 8, bit i % 8) set
 *            iff i is in the support; bits >= dim zero
 *   3 + b    Rice, b = 0..29, over the support's gaps g (as in varint):
 *            g >> b zero bits, a one bit, then the low b bits of g
 *   33 + b   complement Rice, b = 0..29: the same code over the gaps of the
 *            dim - nnz ZERO positions (the support is every other position)
 *   63       refused (SFL_EUNSUP)
 * Bit streams are LSB first (bit i is byte i / 8, bit i % 8) and padded with
 * zero bits to a byte; the index section ends where the values begin, with
 * no spare byte.
 *
 * The encoder computes the exact size of every layout and writes the
 * smallest, ties to the lower layout number, so an empty vector and any
 * vector where varint is no larger keep the old bytes. Rice and complement
 * Rice are costed at every b (one pass: a gap g adds g >> b for each b
 * below its bit length), so the choice is the least over all layouts and
 * parameters, whatever the support's shape. Per index
 * that is about log2 C(dim, nnz) / nnz bits at any density: Rice near
 * log2(dim / nnz) + 1.5 at low density, a bitmap around 50 %, complement
 * Rice above, nothing at 100 % (results/codec.md has the sweep).
 * Lossless: F64 values (and -0.0, explicit zeros in the support) come back
 * bit for bit.
 *
 * One encoding per vector? No longer: the encoder is deterministic and
 * decode then encode gives its bytes back for F64 and F32, but the decoder
 * does not recompute which layout or b would have been smallest (that is
 * the encoder's whole pass), so a vector is accepted in any well-formed
 * layout, each no smaller than the encoder's; varint in particular stays
 * accepted at nnz == dim (stored checkpoints of a full model). Refused:
 * dense with nnz != dim or dim 0, non-minimal varints, nonzero pad bits,
 * spare bytes after the index codes or values. */
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

/* The encoding is the low two bits of the byte after the two varints (the
 * rest is the layout). */
#define SFL_SPCODEC_ENC_MASK 3u

/* Exact number of bytes sfl_spcodec_encode writes for v. */
size_t sfl_spcodec_size(const sfl_spvec_t *v, sfl_enc_t enc);
/* Encode v (which must satisfy sfl_spvec_validate, else its error) into
 * buf[0..cap); *len = bytes written. SFL_ELIMIT if cap is too small,
 * SFL_ERANGE for an F32 value beyond FLT_MAX or a Q8 range whose width
 * hi - lo overflows. */
int sfl_spcodec_encode(const sfl_spvec_t *v, sfl_enc_t enc, uint8_t *buf, size_t cap,
                       size_t *len) SFL_MUST_CHECK;
/* Decode and validate everything (exact length, dim <= max_dim, nnz <= dim and
 * <= max_nnz and the least bytes of the layout present checked before
 * allocating, indices in range, values finite, known encoding and layout,
 * lo <= hi). Returns owned (sfl_spvec_free); on failure *out
 * is NULL and sfl_last_error() says what was wrong at which byte offset:
 * SFL_ETRUNC (too short, Rice code cut off), SFL_EPARSE (bad varint,
 * nnz > dim, lo > hi, trailing bytes, layout not allowed for nnz and dim,
 * nonzero pad bits, bitmap count != nnz), SFL_ELIMIT (max_dim, max_nnz),
 * SFL_ERANGE (index >= dim, varint over 32 bits, Rice code beyond dim,
 * bitmap bit >= dim, Q8 range too wide), SFL_ENUMERIC (NaN/Inf),
 * SFL_EUNSUP (unknown encoding or layout). */
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

/* Secure aggregation's vectors (update mode 2; ../shared/SECURE_AGGREGATION.md
 * section 2, docs/security.md): the common per-round support S_t, the
 * quantization of an update onto it mod 2^32, and the pseudorandom mask
 * words. Everything a client and the coordinator must compute alike, so it
 * is specified to the bit here.
 *
 * Support. S_t = the support of the global model (its nonzero indices) plus
 * an exploration set E_t drawn from the signed round nonce, to size
 * min(size, d): the indices not in the model's support are ranked by
 * rank(i) = bytes 8 i .. 8 i + 7, read as a little-endian uint64 (mask words
 * 2 i and 2 i + 1 below, low first), of the ChaCha20 keystream (the mask
 * words' stream) under the key BLAKE2b-256 (unkeyed) of the 46 bytes
 * "sfl-sa-explore" (14 bytes, no NUL) || nonce (32), ties broken by the
 * smaller i, and the smallest taken. When the model's support alone
 * exceeds size, its first `size` indices by that same rank are kept. S_t is
 * returned ascending. (A stream, not a hash per index: 8 d bytes of
 * ChaCha20 and a linear selection, where d digests and a sort took 0.7 s
 * at d = 1e6 on every agent and on the coordinator's loop.)
 *
 * Quantization (a vector of len = |S_t| + 1 words):
 *   B = 30 - floor(log2 n_max) (= 31 - ceil(log2(n_max + 1))), so that
 *   n_max values of magnitude <= 2^B sum to at most 2^31 - 2^B and a sum
 *   read as int32 cannot wrap (31 - ceil(log2 n_max) would wrap for every
 *   power of two n_max);
 *   f = the largest integer with clip * 2^f <= 2^B (f may be negative);
 *   rho = sfl_sa_rho(weight) = min(weight, w_max) / w_max (0 < weight;
 *   w_max > 0). The weight is public: the coordinator signs each member's
 *   (its declared samples capped at the job's max_weight) into the task,
 *   so the member scales by it and the server divides by the sum of the
 *   rho_u it computes itself; no word of the vector decides the divisor;
 *   slot i < |S_t|: q_i = stochastic rounding of rho * clamp(v_i, -clip, clip) * 2^f
 *   (floor(z) + 1 with probability z - floor(z): one sfl_rng_uniform draw u
 *   per value slot, in slot order, rounding up when u < z - floor(z)),
 *   stored as uint32 (two's complement), so |q_i| <= ceil(rho clip 2^f);
 *   slot |S_t|: 1, the canary (its sum is the number of inputs, so a client
 *   that masked another vector shows).
 *   NaN or infinite values are refused before clipping.
 * Decoding a sum of count inputs of public weights w_u: each slot read as
 * int32; SFL_EBADSIG unless the canary slot equals count; SFL_ERANGE
 * ("secure sum out of bounds") when a slot's |sum| exceeds the sum over
 * the inputs of ceil(rho_u clip 2^f), what count clipped inputs of those
 * weights can reach (a member that sent anything else is not named: the
 * masks hide whose input it was); else values / 2^f / sum of rho_u, the
 * weighted mean.
 *
 * Metrics (sfl_sa_metrics_encode): a round's figures travel summed too, in
 * SFL_SA_METRIC_WORDS words after the canary (the masked vector of the
 * protocol is len = |S_t| + SFL_SA_EXTRA_WORDS words): samples,
 * samples x train loss, eval samples, eval samples x eval accuracy, eval
 * samples x eval mse (mode 1's sums, so the means are the same). Each
 * m >= 0 is X = round(m 2^F) with F = 0 for the two counts and
 * F = 2B - 32 for the others, clamped to 2^(2B) - 1 (NaN and negatives
 * are 0), in two words: X mod 2^B, then X / 2^B (each below 2^B, so n_max
 * of them sum below 2^31 as the values do). Decoding a sum of count
 * inputs refuses a word above count (2^B - 1) (SFL_ERANGE, as for the
 * values).
 *
 * A client's input with error feedback (sfl_sa_client_vector; sfl-sim's
 * --secagg, docs/algorithms.md). delta: the client's change, d entries;
 * e: its residual, d entries (0 at the start, kept across rounds).
 *   z = delta + e (every entry finite, else refused);
 *   v = z on S_t, all but its topk largest |z_j| inside S_t set to 0
 *   (sfl_ht_dense over S_t's slots in ascending index order: equal
 *   magnitudes keep the smaller index; topk >= |S_t| keeps all of S_t);
 *   e <- z - v: z off S_t and at S_t's dropped slots, exactly 0 at the
 *   kept ones (so v + e == z, bit for bit);
 *   the input = sfl_sa_quantize(v on S_t, weight). What clipping and
 *   rounding change is not fed back: the residual holds only what was not
 *   selected.
 * The server's mean (sfl_sa_server_mean): sfl_sa_dequantize of the sum
 * mod 2^32 of count inputs and their public weights, scattered to d
 * entries (0 off S_t).
 *
 * Masks. A key (32 bytes) expands to words w_0, w_1, ... = the keystream of
 * crypto_stream_chacha20_ietf (RFC 8439: 96-bit zero nonce, block counter
 * from 0) read as little-endian uint32; word j is at byte 4 j, so any range
 * can be produced without the ones before it (crypto_stream_chacha20_ietf_xor_ic
 * with the block counter j / 16). */
#ifndef SFL_SAVEC_H
#define SFL_SAVEC_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/rng.h"
#include "sfl/core/topk.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_SA_KEY_BYTES 32
#define SFL_SA_NONCE_BYTES 32

/* S_t into out (capacity min(size, d) entries), ascending; *n its size.
 * global: the model's d entries (nonzero = in the support). SFL_EINVAL for
 * d == 0 or size == 0. */
int sfl_sa_support(const double *global, uint32_t d, uint32_t size,
                   const uint8_t nonce[SFL_SA_NONCE_BYTES], uint32_t *out,
                   uint32_t *n) SFL_MUST_CHECK;

typedef struct sfl_sa_quant {
    double clip;     /* c > 0: values are clamped to [-c, c] */
    double w_max;    /* weights are capped at w_max and scaled by 1 / w_max */
    uint32_t n_max;  /* most inputs a sum may hold (>= 1) */
    uint32_t bits;   /* B, derived */
    int32_t frac;    /* f, derived */
} sfl_sa_quant_t;

/* Fills bits and frac from clip, w_max and n_max; SFL_EINVAL for clip or
 * w_max not finite and > 0, n_max == 0 or n_max > 2^30. */
int sfl_sa_quant_init(sfl_sa_quant_t *q, double clip, double w_max,
                      uint32_t n_max) SFL_MUST_CHECK;

/* rho = min(weight, w_max) / w_max, in (0, 1]; 0 for a weight not finite
 * and > 0. The one computation of a member's scale, on both sides. */
double sfl_sa_rho(const sfl_sa_quant_t *q, double weight);

/* The input of one client: vals[0..k) (its values on S_t, k = |S_t|) and
 * its public weight (> 0, finite) into out[0..k + 1). SFL_ENUMERIC for a
 * value not finite, SFL_EINVAL for a bad weight. */
int sfl_sa_quantize(const sfl_sa_quant_t *q, const double *vals, uint32_t k, double weight,
                    sfl_rng_t *rng, uint32_t *out) SFL_MUST_CHECK;

/* A sum of count inputs sum[0..k + 1) back, weights[0..count) the inputs'
 * public weights: mean[0..k) the weighted mean of the clipped values (sum
 * of rho_u v_u / sum of rho_u), *wsum the sum of rho_u. SFL_EINVAL for
 * count 0 or above n_max or a weight not finite and > 0, SFL_EBADSIG if
 * the canary slot is not count, SFL_ERANGE for a slot out of bounds (see
 * above); mean is then unspecified. */
int sfl_sa_dequantize(const sfl_sa_quant_t *q, const uint32_t *sum, uint32_t k, uint32_t count,
                      const double *weights, double *mean, double *wsum) SFL_MUST_CHECK;

/* One client's input for S_t = support[0..k) (ascending, < d), as above:
 * delta (d entries, borrowed), resid (d entries, updated), topk values
 * kept, weight its public weight, rng its stream for the rounding. vals[0..k)
 * receives v on S_t, out[0..k + 1) the quantized input; ws must have room
 * for k (sfl_topk_ws_reserve). SFL_EINVAL for a support not ascending or
 * out of range, a bad weight or quantizer, SFL_ENUMERIC for a z not finite:
 * on any failure resid and rng are as they were. Allocates nothing. */
int sfl_sa_client_vector(const sfl_sa_quant_t *q, const double *delta, double *resid,
                         uint32_t d, const uint32_t *support, uint32_t k, uint32_t topk,
                         double weight, sfl_rng_t *rng, sfl_topk_ws_t *ws, double *vals,
                         uint32_t *out) SFL_MUST_CHECK;

/* The weighted mean of count inputs of public weights weights[0..count)
 * from their sum mod 2^32 sum[0..k + 1) (sfl_sa_dequantize) into
 * mean[0..d): the value of slot s at support[s], 0 elsewhere; *wsum the
 * sum of the weights rho_u. Errors as sfl_sa_dequantize, and SFL_EINVAL
 * for a support not ascending or out of range (mean then unspecified).
 * Allocates nothing (mean needs d >= k entries; the slots are spread in
 * place). */
int sfl_sa_server_mean(const sfl_sa_quant_t *q, const uint32_t *sum, const uint32_t *support,
                       uint32_t k, uint32_t count, const double *weights, uint32_t d,
                       double *mean, double *wsum) SFL_MUST_CHECK;

/* A standardize job's statistics round under mode 2 (docs/protocol.md
 * "Statistics round"). The moments m[0..1 + 2d) of a member's training rows
 * (sfl/data/dataset.h: n, per-feature sums S_j, sums of squares Q_j), every
 * |x| <= B (the job's standardize_bound), go through mode 2 unchanged
 * (support: all 1 + 2d slots, clip c = B * B, every value kept) as
 *   v = (n / W * c, S_j / W * B, Q_j / W),    each in [-c, c],
 * with W the member's public weight (its declared rows, which the
 * coordinator uses uncapped: w_max = the cohort's largest W). Mode 2's
 * weighted mean is then sum_u W_u v_u / sum_u W_u, so sum W times it,
 * scaled back, is the plain sum of the members' moments
 * (sfl_sa_moments_decode), up to the stochastic rounding: each slot of each
 * input moves by less than one step 2^-f in units of rho v, so
 *   |error of slot i| < count * w_max * 2^-f / s_i,
 * s_i = c, B, 1 for the count, the sums, the sums of squares
 * (sfl_sa_moments_error), and 2^-f <= 2 c / 2^B_bits (B_bits = 30 -
 * floor(log2 n_max), sfl_sa_quant_init): for the sums of squares
 * count * w_max * 2 B^2 / 2^B_bits. */

/* v[0..1 + 2d) from m as above. SFL_ENUMERIC for a value not finite;
 * SFL_EINVAL for a weight or bound not finite and > 0; SFL_ERANGE for a
 * count not in [1, weight] (more rows than the public weight says), a
 * |S_j| above n B or a Q_j not in [0, n B^2] (up to 1e-9 relative
 * rounding): moments of values beyond the bound. */
int sfl_sa_moments_encode(const double *m, uint32_t d, double weight, double bound,
                          double *v) SFL_MUST_CHECK;
/* The plain sum m[0..1 + 2d) from mode 2's weighted mean mean[0..1 + 2d)
 * and wsum = the sum of the inputs' public weights W_u (not of rho_u): the
 * count rounded to a whole number. SFL_EINVAL for a bound or wsum not
 * finite and > 0; SFL_ERANGE for a pooled count below 1. */
int sfl_sa_moments_decode(const double *mean, uint32_t d, double wsum, double bound,
                          double *m) SFL_MUST_CHECK;
/* The bound above on |error| of slot kind part (0 the count, 1 a sum, 2 a
 * sum of squares) for a sum of count inputs through quantizer q (clip
 * bound^2, w_max the largest weight). */
double sfl_sa_moments_error(const sfl_sa_quant_t *q, uint32_t count, double bound, int part);

#define SFL_SA_METRICS 5
#define SFL_SA_METRIC_WORDS (2 * SFL_SA_METRICS)
/* The words of a masked input beyond its |S_t| values. */
#define SFL_SA_EXTRA_WORDS (1 + SFL_SA_METRIC_WORDS) /* the canary, the metrics */

/* One client's metrics m[0..SFL_SA_METRICS) (above) into out. */
void sfl_sa_metrics_encode(const sfl_sa_quant_t *q, const double *m, uint32_t *out);
/* The sum of count inputs' metric words back into m[0..SFL_SA_METRICS);
 * SFL_ERANGE for a word above count (2^B - 1) or count not in [1, n_max]. */
int sfl_sa_metrics_decode(const sfl_sa_quant_t *q, const uint32_t *sum, uint32_t count,
                          double *m) SFL_MUST_CHECK;

/* Words [first, first + n) of key's mask into out; first + n <= 2^36 (the
 * 32-bit block counter). */
void sfl_sa_mask_words(const uint8_t key[SFL_SA_KEY_BYTES], uint64_t first, uint32_t *out,
                       size_t n);
/* vec[0..n) += sign * mask(key)[0..n) mod 2^32 (sign +1 or -1), streaming in
 * blocks (no allocation); n <= 2^36. */
void sfl_sa_mask_add(const uint8_t key[SFL_SA_KEY_BYTES], int sign, uint32_t *vec, size_t n);

#ifdef __cplusplus
}
#endif

#endif

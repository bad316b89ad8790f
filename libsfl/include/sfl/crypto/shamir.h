/* Shamir secret sharing over Z_L, L = 2^252 + 27742317777372353535851937790883648493
 * (the order of Ed25519's prime-order group), with libsodium's constant-time
 * scalar arithmetic (crypto_core_ed25519_scalar_*): secure aggregation's
 * shares of each client's mask seeds (../shared/SECURE_AGGREGATION.md section
 * 2; docs/security.md).
 *
 * A secret is a canonical scalar (32 bytes little-endian, < L). A share is
 * (x, y): x in 1..65535 (x = 1 + the recipient's rank in the sorted cohort;
 * x = 0 would be the secret itself and is never valid), y = f(x) for a random
 * polynomial f of degree t - 1 with f(0) = the secret. Any t shares give the
 * secret back (Lagrange interpolation at 0); t - 1 of them are uniformly
 * distributed whatever the secret is. Nothing here allocates; intermediate
 * scalars (the coefficients) are wiped before returning. */
#ifndef SFL_SHAMIR_H
#define SFL_SHAMIR_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_SHAMIR_BYTES 32  /* a scalar: secret, y */
#define SFL_SHAMIR_MAX 65535 /* shares (n) and x */
#define SFL_SHAMIR_POINT 32  /* an Ed25519 point: a coefficient's commitment */

typedef struct sfl_share {
    uint16_t x;                  /* 1..65535 */
    uint8_t y[SFL_SHAMIR_BYTES]; /* canonical scalar */
} sfl_share_t;

/* 1 if s (32 bytes) is a canonical scalar, < L. */
int sfl_shamir_canonical(const uint8_t s[SFL_SHAMIR_BYTES]);

/* A fresh random canonical scalar (libsodium's generator): a secret to share. */
void sfl_shamir_random(uint8_t s[SFL_SHAMIR_BYTES]);

/* Splits secret into n shares out[0..n), out[i].x = i + 1, threshold t:
 * SFL_EINVAL unless 1 <= t <= n <= SFL_SHAMIR_MAX and secret is canonical.
 * The polynomial's coefficients come from libsodium's generator. */
int sfl_shamir_split(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, uint32_t n,
                     sfl_share_t *out) SFL_MUST_CHECK;
/* The same at the caller's points: out[i].x (nonzero, distinct: the caller
 * sees to it) are kept, out[i].y = f(out[i].x), i < n; 1 <= t <= n. */
int sfl_shamir_split_at(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                        uint32_t n) SFL_MUST_CHECK;

/* split_at with Feldman commitments to the polynomial f(x) = a_0 + a_1 x
 * + ... + a_{t-1} x^{t-1}, a_0 = secret: commit[j] = a_j B, j < t, B the
 * Ed25519 base point (commit[0] = secret B). A share (x, y) is then
 * checkable by anyone: y B = sum_j x^j commit[j]. SFL_EINVAL also for a
 * zero secret. The commitments hide the secret computationally only (it is
 * a discrete logarithm): share only secrets that are uniform scalars. */
int sfl_shamir_split_commit(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                            uint32_t n, uint8_t (*commit)[SFL_SHAMIR_POINT]) SFL_MUST_CHECK;
/* 0 if secret B = c0 (one base-point multiplication), SFL_EBADSIG if not
 * (a zero secret never matches). */
int sfl_shamir_commit_check(const uint8_t secret[SFL_SHAMIR_BYTES],
                            const uint8_t c0[SFL_SHAMIR_POINT]) SFL_MUST_CHECK;
/* Checks shares[0..k) against commit[0..t): ok[i] = 1 if share i lies on
 * the committed polynomial, 0 if not. All k at once with random weights
 * (t + 1 point multiplications), halving a failing set to find the bad
 * ones (about 2 log2 k checks for one bad share, 2 k at worst). work:
 * t scalars of scratch. 0 if all are good, SFL_EBADSIG if some are not,
 * SFL_EINVAL as combine or for a commitment that is not a point of the
 * prime-order group (ok then unwritten). */
int sfl_shamir_verify(const sfl_share_t *shares, uint32_t k,
                      const uint8_t (*commit)[SFL_SHAMIR_POINT], uint32_t t,
                      uint8_t (*work)[SFL_SHAMIR_BYTES], uint8_t *ok) SFL_MUST_CHECK;

/* The secret of shares[0..k) (k >= 1), interpolated at 0 through all of them:
 * with exactly t shares of one polynomial, its secret. SFL_EINVAL (with the
 * index in the detail) for x = 0, a repeated x, a y that is not canonical,
 * k = 0 or k > SFL_SHAMIR_MAX. The caller decides how many shares it
 * needs; sfl_shamir_check says whether more than t agree. */
int sfl_shamir_combine(const sfl_share_t *shares, uint32_t k,
                       uint8_t secret[SFL_SHAMIR_BYTES]) SFL_MUST_CHECK;

/* Combining many secrets whose shares sit at the same x's: the Lagrange
 * coefficients at 0 of the x's of shares[0..k) into lambda[0..k) (the y's
 * are not used but checked as combine checks them), then any shares at
 * those x's, in the same order, combine with sfl_shamir_apply at k scalar
 * products instead of k inversions: the same secret as sfl_shamir_combine. */
int sfl_shamir_lagrange(const sfl_share_t *shares, uint32_t k,
                        uint8_t (*lambda)[SFL_SHAMIR_BYTES]) SFL_MUST_CHECK;
int sfl_shamir_apply(const uint8_t (*lambda)[SFL_SHAMIR_BYTES], const sfl_share_t *shares,
                     uint32_t k, uint8_t secret[SFL_SHAMIR_BYTES]) SFL_MUST_CHECK;

/* The same verdict as sfl_shamir_check at O(k^2) products and k
 * inversions (one random parity check of the Reed-Solomon code: wrong with
 * probability 1 / L), without saying which share disagrees. work: 2 k
 * scalars of scratch. */
int sfl_shamir_agree(const sfl_share_t *shares, uint32_t k, uint32_t t,
                     uint8_t (*work)[SFL_SHAMIR_BYTES]) SFL_MUST_CHECK;

/* 0 if shares[0..k) (k >= t) all lie on one polynomial of degree < t: the
 * secret of the first t equals the secret of every other t of them formed by
 * replacing one share (k - t combinations); SFL_EBADSIG for shares that do
 * not agree (a corrupted or forged share), SFL_EINVAL as combine. */
int sfl_shamir_check(const sfl_share_t *shares, uint32_t k, uint32_t t) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

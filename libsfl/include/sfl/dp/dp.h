/* Differential privacy building blocks (DP-BCFW, seed 003; libsfl/src/dp/;
 * docs/privacy.md says what they guarantee and what they do not).
 *
 * Noise comes from a source of random bits that is either secure
 * (libsodium's CSPRNG: what an agent uses in private mode) or a seeded
 * deterministic stream (tests, and sfl-sim's reproducible runs; an agent
 * never uses it unless its job is in test mode). The samplers never invert
 * the CDF of a uniform double (Mironov 2012: the gaps of floating point
 * leak): they draw integers exactly (Canonne, Kamath, Steinke 2020) and
 * release grid * integer, as cited in dp.c.
 *
 * calib.c turns the paper's privacy parameters into noise scales and bounds
 * the sensitivity of the losses' gradient coordinates. accountant.c composes
 * the per-iteration mechanisms of a run: the paper's (epsilon, delta)
 * accounting and a tighter Renyi-DP one converted to (epsilon, delta),
 * reported side by side. Nothing here allocates. */
#ifndef SFL_DP_H
#define SFL_DP_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Sources of random bits (dp.c) ---- */

typedef enum sfl_dp_source {
    SFL_DP_SECURE = 0, /* libsodium randombytes_buf */
    SFL_DP_SEEDED = 1, /* deterministic: tests and simulation only */
} sfl_dp_source_t;

#define SFL_DP_RNG_BATCH 32

typedef struct sfl_dp_rng {
    sfl_dp_source_t source;
    sfl_rng_t seeded; /* SFL_DP_SEEDED's stream */
    /* SFL_DP_SECURE: randombytes_buf fills a batch (one getrandom per 32
     * words instead of one per word, 20x less time per noise draw); each
     * word is wiped as it is taken */
    uint32_t left;
    uint64_t batch[SFL_DP_RNG_BATCH];
} sfl_dp_rng_t;

/* A secure source. SFL_EIO if libsodium cannot be initialised. */
int sfl_dp_rng_secure(sfl_dp_rng_t *r) SFL_MUST_CHECK;
/* A seeded source: the stream (seed, round, client, SFL_STREAM_DP). */
void sfl_dp_rng_seeded(sfl_dp_rng_t *r, uint64_t seed, uint64_t round, uint64_t client);
/* 64 uniform random bits. */
uint64_t sfl_dp_rng_u64(sfl_dp_rng_t *r);

/* ---- Exact integer samplers (dp.c; Canonne, Kamath, Steinke 2020) ----
 * Rational parameters in 64-bit integers; a zero parameter is SFL_EINVAL,
 * one above its bound SFL_ERANGE (never an overflow). *out is written only
 * on success. */

/* Bound of every integer parameter below. */
#define SFL_DP_EXACT_MAX (UINT64_C(1) << 62)
/* Bound of the discrete Laplace scale t/s. */
#define SFL_DP_DLAPLACE_MAX_SCALE (UINT64_C(1) << 40)

/* *out = 1 with probability exp(-num/den), else 0 (Algorithm 1).
 * 1 <= den <= SFL_DP_EXACT_MAX; any num. */
int sfl_dp_bernoulli_exp(sfl_dp_rng_t *r, uint64_t num, uint64_t den, int *out) SFL_MUST_CHECK;
/* Discrete Laplace of scale t/s (Algorithm 2): P[z] proportional to
 * exp(-|z| s / t) over the integers. 1 <= s, t <= SFL_DP_EXACT_MAX and
 * t/s < SFL_DP_DLAPLACE_MAX_SCALE. */
int sfl_dp_dlaplace(sfl_dp_rng_t *r, uint64_t s, uint64_t t, int64_t *out) SFL_MUST_CHECK;
/* Discrete Gaussian (Algorithm 3): P[z] proportional to
 * exp(-z^2 / (2 sigma2)) over the integers; 1 <= sigma2 < SFL_DP_EXACT_MAX. */
int sfl_dp_dgauss(sfl_dp_rng_t *r, uint64_t sigma2, int64_t *out) SFL_MUST_CHECK;

/* ---- Real-valued noise (dp.c) ---- */

/* The grid of a scale: the largest power of two <= scale / 2^SFL_DP_GRID_BITS.
 * A draw of sfl_dp_laplace or sfl_dp_gaussian is grid * (an exact discrete
 * Laplace or Gaussian integer of scale scale / grid, in [2^20, 2^21)). */
#define SFL_DP_GRID_BITS 20
/* Scales (and sigmas) outside [SFL_DP_SCALE_MIN, SFL_DP_SCALE_MAX] are refused. */
#define SFL_DP_SCALE_MIN 0x1p-900
#define SFL_DP_SCALE_MAX 0x1p+900

/* The grid spacing of scale; NaN if scale is not in the range above. */
double sfl_dp_grid(double scale);

/* One draw of Laplace(0, scale) and of N(0, sigma^2), scale, sigma > 0
 * and finite (otherwise NaN, and the detail says why): safe for floating
 * point (see dp.c). The draw is an exact multiple of sfl_dp_grid(scale);
 * a caller that adds it to a value rounds the value to that grid first, or
 * uses sfl_dp_release_* (docs/privacy.md). The Gaussian's sigma^2, in grid
 * units, is rounded up to an integer (relative increase below 2^-40: never
 * less noise). */
double sfl_dp_laplace(sfl_dp_rng_t *r, double scale);
double sfl_dp_gaussian(sfl_dp_rng_t *r, double sigma);

/* x + noise as it may be released: x rounded to the grid of scale (sigma)
 * plus the draw above, the same draw as sfl_dp_laplace (sfl_dp_gaussian)
 * from the same stream. NaN for a non-finite x or an invalid scale. */
double sfl_dp_release_laplace(sfl_dp_rng_t *r, double x, double scale);
double sfl_dp_release_gaussian(sfl_dp_rng_t *r, double x, double sigma);

/* The exponential mechanism: *out = i with probability proportional to
 * exp(u[i] / beta) over i in [0, n), exactly, for the utilities rounded to
 * the grid beta / 2^20 (the same distribution as argmax u_i/beta + Gumbel
 * noise, drawn without floating point: rejection with exact Bernoullis;
 * dp.c). Utilities of sensitivity Delta make it (2 Delta / beta)-DP and
 * (2 Delta / beta)-bounded-range (SFL_DP_MECH_EM below). SFL_EINVAL for
 * n == 0 or beta not finite and > 0, SFL_ERANGE for |u[i]| / beta above
 * 2^20 or a non-finite u[i]; *out is written only on success. */
int sfl_dp_select_exp(sfl_dp_rng_t *r, const double *u, size_t n, double beta,
                      size_t *out) SFL_MUST_CHECK;

/* ---- Calibration for DP-BCFW (calib.c) ---- */

/* A DP-BCFW run as its privacy calibration sees it (Sec. IV-C). */
typedef struct sfl_dp_bcfw {
    double epsilon; /* the whole run's budget, > 0 */
    double delta;   /* in (0, 1) */
    uint64_t T;     /* iterations, >= 1 */
    uint64_t K;     /* user nodes (feature blocks), >= 1 */
    uint64_t n;     /* samples, >= 1 */
    double eta;     /* radius of the l1 ball, > 0 */
    double G;       /* bound on (1/n) ||A^T (Ax - y)||_inf, > 0 */
} sfl_dp_bcfw_t;

/* The report-noisy-max Laplace scale of the signed index (Sec. IV-C 1):
 *   b = (2 G eta / (K n)) sqrt(2 T log(1 / (delta/2))) / ((epsilon / (2K)) / 2)
 * and the scores' sensitivity the paper calibrates for, 2 G eta / (K n). */
int sfl_dp_bcfw_index_scale(const sfl_dp_bcfw_t *p, double *b) SFL_MUST_CHECK;
int sfl_dp_bcfw_index_sens(const sfl_dp_bcfw_t *p, double *sens) SFL_MUST_CHECK;
/* The same two formulas for any sensitivity sens > 0 of the scores (of
 * the feature's l2): the index scale sens sqrt(2 T log(2/delta)) /
 * (epsilon / (4K)) and the feature sd sens sqrt(K T) sqrt(2 (ln(1/delta) +
 * epsilon/2)) / (epsilon/2), the paper's accounting (docs/privacy.md). */
int sfl_dp_bcfw_index_scale_for(const sfl_dp_bcfw_t *p, double sens, double *b) SFL_MUST_CHECK;
int sfl_dp_bcfw_jl_sigma_for(const sfl_dp_bcfw_t *p, double sens, double *sd) SFL_MUST_CHECK;

/* One sample's contribution (docs/privacy.md, "One sample's contribution"):
 * replace-one neighbours, every feature entry clipped to |a_ji| <= a_max
 * and every residual l'(m_j, y_j) to |r_j| <= r_max, whatever the data and
 * the margins. The LO's value of coordinate i, eta (1/n) sum_j a_ji r_j,
 * moves by at most 2 eta a_max r_max / n (score_sens); the shared feature
 * J a_i moves by J e_j (a_ji - a'_ji), at most 2 a_max c_J in l2, c_J =
 * max_j ||J e_j|| the sketch's largest column norm (1 unsketched:
 * feature_sens). No 1/K: every block holds a part of every row, so one
 * sample moves the scores of all K blocks, each by this much. SFL_EINVAL
 * for n == 0 or a bound not finite and > 0. */
int sfl_dp_bcfw_score_sens(uint64_t n, double eta, double a_max, double r_max,
                           double *sens) SFL_MUST_CHECK;
int sfl_dp_bcfw_feature_sens(double a_max, double c_j, double *sens) SFL_MUST_CHECK;
/* The private JL noise of eq. (17), sigma_J the leading singular value of J:
 *   pi = sigma_J sqrt(K T) sqrt(2 (ln(1/delta) + epsilon/2)) / (n epsilon / 2)
 * and the l2 sensitivity it is calibrated for, sigma_J / n: that of J a / n
 * when one sample moves one entry of a by at most 1 (not of J a itself, as
 * Algorithm 2's line 9 reads; docs/privacy.md). */
int sfl_dp_bcfw_jl_sigma(const sfl_dp_bcfw_t *p, double sigma_j, double *pi) SFL_MUST_CHECK;
int sfl_dp_bcfw_jl_sens(const sfl_dp_bcfw_t *p, double sigma_j, double *sens) SFL_MUST_CHECK;

/* Leading singular value of the m x n row-major matrix J (a Gaussian
 * sketch), by power iteration on J J^T from a fixed start: deterministic.
 * work: 2m + n doubles (borrowed). Returns sqrt(rho + ||J J^T v - rho v||)
 * at convergence (relative residual <= 1e-10), a bound from above of the
 * singular value the iteration converged to. SFL_EINVAL for an empty
 * matrix, SFL_ENUMERIC for a non-finite entry, SFL_ERANGE if it does not
 * converge in SFL_DP_SVD_MAX_ITERS. */
#define SFL_DP_SVD_MAX_ITERS 100000
int sfl_dp_sigma_max(const double *J, size_t m, size_t n, double *work,
                     double *out) SFL_MUST_CHECK;

/* What the sensitivity of a gradient coordinate depends on. Neighbouring
 * datasets differ in one sample (replace-one); every feature entry obeys
 * |a_ji| <= a_max (entrywise: the l1 ball's dual norm, so |a_j . x| <=
 * a_max eta); targets |y_j| <= y_max (lsq; labels of logistic and sqhinge
 * are classes). */
typedef struct sfl_dp_bounds {
    uint64_t n;   /* samples, >= 1 */
    double eta;   /* ||x||_1 <= eta */
    double a_max; /* |a_ji| <= a_max, > 0 */
    double y_max; /* |y_j| <= y_max (lsq only) */
} sfl_dp_bounds_t;

/* For the losses of sfl/model/loss.h by name ("lsq", "logistic", "sqhinge"; as
 * libsfl defines them, without Table V's 1/2): *sens bounds the change of
 * one coordinate (1/n) sum_j a_ji l'(a_j . x, y_j) of the gradient when one
 * sample is replaced, 2 a_max L / n, and *G bounds the coordinate itself,
 * a_max L, where L bounds |l'| on the ball (calib.c's table). SFL_ENOTFOUND
 * for another loss, SFL_EINVAL for bounds out of range. */
int sfl_dp_grad_sens(const char *loss, const sfl_dp_bounds_t *b, double *sens) SFL_MUST_CHECK;
int sfl_dp_grad_bound(const char *loss, const sfl_dp_bounds_t *b, double *G) SFL_MUST_CHECK;

/* ---- Privacy accountant (accountant.c) ---- */

/* X(name, value, what is released). */
#define SFL_DP_MECH_MAP(X)                                                     \
    X(LAPLACE, 1, "a value + Lap(b); l1 sensitivity")                          \
    X(RNM, 2, "argmax of scores + Lap(b) (report-noisy-max); each score's")    \
    X(GAUSSIAN, 3, "a vector + N(0, sigma^2 I); l2 sensitivity")                \
    X(EM, 4, "argmax of scores + Gumbel(b) (exponential mechanism); each score's")

typedef enum sfl_dp_mech {
#define SFL_DP_MECH_ENUM(name, val, what) SFL_DP_MECH_##name = (val),
    SFL_DP_MECH_MAP(SFL_DP_MECH_ENUM)
#undef SFL_DP_MECH_ENUM
} sfl_dp_mech_t;

/* Distinct mechanisms one accountant holds. */
#define SFL_DP_ACCT_MAX 8
/* Size of the encoded state. */
#define SFL_DP_ACCT_BYTES (8 + 32 * SFL_DP_ACCT_MAX)

/* One mechanism: count draws per iteration, over iters iterations. */
typedef struct sfl_dp_entry {
    sfl_dp_mech_t kind;
    uint32_t count; /* draws in one iteration (e.g. K user nodes), >= 1 */
    uint32_t iters; /* iterations recorded, >= 1 */
    double scale;   /* b (Laplace, RNM) or sigma (Gaussian) */
    double sens;    /* the sensitivity the scale is calibrated against */
} sfl_dp_entry_t;

/* Fixed size, embeddable: _init, no _close. */
typedef struct sfl_dp_acct {
    uint32_t n;                        /* entries in use */
    sfl_dp_entry_t e[SFL_DP_ACCT_MAX]; /* in the order first added */
} sfl_dp_acct_t;

/* Privacy spent, both accountings, at one delta. */
typedef struct sfl_dp_spent {
    double eps_paper;     /* as seed 003 counts it (docs/privacy.md) */
    double eps_rdp;       /* RDP, eps = rdp(a) + ln(1/delta)/(a-1) (Mironov 2017) */
    double order;         /* the order a that gave eps_rdp */
    double eps_rdp_tight; /* RDP, Canonne-Kamath-Steinke 2020's conversion */
    double order_tight;   /* the order that gave eps_rdp_tight */
} sfl_dp_spent_t;

void sfl_dp_acct_init(sfl_dp_acct_t *a);
/* Record one iteration in which count draws of a mechanism were released:
 * an entry with the same kind, scale, sensitivity and count gets one more
 * iteration, otherwise a new entry starts. Call once per iteration and
 * mechanism. SFL_EINVAL for a scale or sensitivity not finite and > 0 or a
 * zero count, SFL_ELIMIT past SFL_DP_ACCT_MAX entries, SFL_ERANGE past
 * UINT32_MAX iterations; the accountant is unchanged on failure. */
int sfl_dp_acct_add_laplace(sfl_dp_acct_t *a, double b, double sens, uint32_t count) SFL_MUST_CHECK;
int sfl_dp_acct_add_rnm(sfl_dp_acct_t *a, double b, double sens, uint32_t count) SFL_MUST_CHECK;
int sfl_dp_acct_add_gaussian(sfl_dp_acct_t *a, double sigma, double sens,
                             uint32_t count) SFL_MUST_CHECK;
/* The exponential mechanism of sfl_dp_select_exp with beta = b. */
int sfl_dp_acct_add_em(sfl_dp_acct_t *a, double b, double sens, uint32_t count) SFL_MUST_CHECK;
/* Spent so far, at delta in (0, 1) (otherwise SFL_EINVAL). All zero when
 * nothing was recorded. */
int sfl_dp_acct_epsilon(const sfl_dp_acct_t *a, double delta, sfl_dp_spent_t *out) SFL_MUST_CHECK;
/* The accountant's total Renyi divergence at order alpha > 1 (any alpha,
 * not only the grid the conversion minimises over); NaN for alpha <= 1. */
double sfl_dp_acct_rdp(const sfl_dp_acct_t *a, double alpha);

/* RDP of one draw at order alpha > 1: the Laplace mechanism (Mironov 2017,
 * Prop. 6), the Gaussian mechanism (alpha sens^2 / (2 sigma^2), Prop. 7),
 * and any (eps, 0)-DP mechanism such as report-noisy-max (the sharp bound
 * of randomized response, below min(eps, alpha eps^2 / 2); accountant.c).
 * NaN for alpha <= 1 or a negative or NaN parameter. */
double sfl_dp_rdp_laplace(double alpha, double b, double sens);
double sfl_dp_rdp_gaussian(double alpha, double sigma, double sens);
double sfl_dp_rdp_pure(double alpha, double eps);
/* RDP of an eps-DP mechanism that is also eps-bounded-range, such as the
 * exponential mechanism: the pure bound above, and alpha eps^2 / 8 (eps-BR
 * implies (eps^2/8)-zCDP: Cesar and Rogers 2021, Lemma 3.2), the smaller. */
double sfl_dp_rdp_br(double alpha, double eps);

/* The state as SFL_DP_ACCT_BYTES bytes (little-endian; layout in
 * accountant.c) and back. decode accepts exactly what encode produces:
 * anything else is SFL_EPARSE and leaves *a unchanged. */
void sfl_dp_acct_encode(const sfl_dp_acct_t *a, uint8_t out[SFL_DP_ACCT_BYTES]);
int sfl_dp_acct_decode(sfl_dp_acct_t *a, const uint8_t *buf, size_t len) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* Noise for differential privacy: random bits, exact discrete samplers and
 * the real-valued Laplace and Gaussian built on them.
 *
 * Why not sfl_rng_laplace's b * log(u): Mironov ("On significance of the
 * least significant bits for differential privacy", CCS 2012) shows that
 * the doubles such an inverse CDF can return have data-dependent gaps, so
 * x + noise reveals x. Two fixes exist: Mironov's snapping mechanism
 * (clamp and round to a power-of-two grid after the inverse CDF) and exact
 * sampling of a discrete distribution released on a grid. We take the
 * second for both distributions:
 *
 *   Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
 *   Privacy", NeurIPS 2020 (arXiv:2004.00010), Algorithms 1-3: Bernoulli
 *   (exp(-gamma)) for rational gamma, the discrete Laplace by a geometric
 *   and a rejection, the discrete Gaussian by rejection from the discrete
 *   Laplace. Integer arithmetic only, so no rounding can leak; one sampler
 *   family serves both distributions (snapping would leave the Gaussian
 *   without a fix), and the discrete Gaussian's own guarantee (CKS: it is
 *   (sens^2 / (2 sigma^2))-concentrated DP for integer sens, the same RDP as
 *   the continuous one) is what the accountant counts. Snapping would also
 *   need a clamp bound chosen per use.
 *
 * The grid: for a scale s the spacing is g = 2^(floor(log2 s) - 20), so s/g
 * lies in [2^20, 2^21). The noise is g * Z with Z an exact integer draw of
 * scale s/g, and g * Z is exact in binary64 while |Z| < 2^53. Added to a
 * value x as it stands, x + g Z would reveal x modulo g (the outputs form
 * the lattice x + gZ): sfl_dp_release_* round x to the grid first, so what
 * is released is a function of the integer round(x/g) + Z alone. Its
 * privacy (docs/privacy.md) is the discrete mechanism's on the grid:
 * rounding moves neighbours apart by at most one more grid step, so the
 * loss is that of sensitivity sens + g (sens + g sqrt(m) in l2 for m
 * coordinates), a relative increase of g/sens <= 2^-20 s/sens.
 *
 * 128-bit products and quotients are done in two 64-bit halves (no
 * __int128: armhf has none). */
#include "sfl/dp/dp.h"

#include <math.h>
#include <sodium.h>

int sfl_dp_rng_secure(sfl_dp_rng_t *r)
{
    /* sodium_init is idempotent and thread-safe: 0 first time, 1 after. */
    if (sodium_init() < 0)
        return sfl__fail(SFL_EIO, "libsodium cannot be initialised");
    r->source = SFL_DP_SECURE;
    sfl_rng_seed(&r->seeded, 0, 0, 0, SFL_STREAM_DP); /* unused; defined */
    r->left = 0;
    return 0;
}

void sfl_dp_rng_seeded(sfl_dp_rng_t *r, uint64_t seed, uint64_t round, uint64_t client)
{
    r->source = SFL_DP_SEEDED;
    sfl_rng_seed(&r->seeded, seed, round, client, SFL_STREAM_DP);
}

uint64_t sfl_dp_rng_u64(sfl_dp_rng_t *r)
{
    uint64_t x;

    if (r->source == SFL_DP_SEEDED)
        return sfl_rng_u64(&r->seeded);
    if (r->left == 0) {
        randombytes_buf(r->batch, sizeof(r->batch));
        r->left = SFL_DP_RNG_BATCH;
    }
    x = r->batch[--r->left];
    r->batch[r->left] = 0;
    return x;
}

/* Uniform in [0, n), n >= 1: rejection of the top partial range. */
static uint64_t below(sfl_dp_rng_t *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;

    do {
        v = sfl_dp_rng_u64(r);
    } while (v >= limit);
    return v % n;
}

/* (hi, lo) = a * b. */
static void mul64(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    uint64_t a0 = a & 0xffffffffu, a1 = a >> 32, b0 = b & 0xffffffffu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);

    *lo = (mid << 32) | (p00 & 0xffffffffu);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* (hi, lo) / d with hi < d <= 2^63, so the quotient fits: restoring
 * division, one bit at a time (rem < d <= 2^63, so 2 rem + 1 cannot wrap). */
static uint64_t div128(uint64_t hi, uint64_t lo, uint64_t d, uint64_t *rem)
{
    uint64_t q = 0, r = hi;

    for (int i = 63; i >= 0; i--) {
        r = (r << 1) | ((lo >> i) & 1);
        q <<= 1;
        if (r >= d) {
            r -= d;
            q |= 1;
        }
    }
    *rem = r;
    return q;
}

/* Bernoulli(exp(-num/den)) for 0 <= num <= den (CKS Algorithm 1, gamma in
 * [0, 1]): count K while Bernoulli(gamma / K) succeeds, return K odd.
 * Bernoulli(gamma / K) is Bernoulli(num/den) and Bernoulli(1/K), drawn
 * independently, so no product can overflow. */
static int bern_frac(sfl_dp_rng_t *r, uint64_t num, uint64_t den)
{
    uint64_t k = 1;

    while (below(r, den) < num && below(r, k) == 0)
        k++;
    return (int)(k & 1);
}

/* Bernoulli(exp(-(k + rem/den))), k = khi 2^64 + klo, rem < den (Algorithm 1,
 * gamma > 1): k draws of Bernoulli(exp(-1)) must all succeed, then one of
 * the fractional part. The first failure, almost always within a few
 * draws, ends the loop. */
static int bern_split(sfl_dp_rng_t *r, uint64_t khi, uint64_t klo, uint64_t rem, uint64_t den)
{
    while (khi | klo) {
        if (!bern_frac(r, 1, 1))
            return 0;
        if (klo-- == 0)
            khi--;
    }
    return bern_frac(r, rem, den);
}

int sfl_dp_bernoulli_exp(sfl_dp_rng_t *r, uint64_t num, uint64_t den, int *out)
{
    if (den == 0)
        return sfl__fail(SFL_EINVAL, "bernoulli_exp: zero denominator");
    if (den > SFL_DP_EXACT_MAX)
        return sfl__fail(SFL_ERANGE, "bernoulli_exp: denominator above 2^62");
    *out = bern_split(r, 0, num / den, num % den, den);
    return 0;
}

/* One try of CKS Algorithm 2; 1 and *z on success, 0 to restart. Besides
 * the algorithm's own rejections, a try restarts when V reaches 2^32 or
 * |Z| 2^62, so nothing overflows: with t/s <= 2^40 both events have
 * probability below exp(-2^22), and conditioning on their absence is the
 * only departure from the exact distribution. */
static int dlaplace_try(sfl_dp_rng_t *r, uint64_t s, uint64_t t, int64_t *z)
{
    uint64_t u = below(r, t), v = 0, hi, lo, rem, y;

    if (!bern_frac(r, u, t))
        return 0;
    while (bern_frac(r, 1, 1))
        if (++v == (UINT64_C(1) << 32))
            return 0;
    mul64(t, v, &hi, &lo); /* X = U + t V, geometric(1 - exp(-1/t)) */
    lo += u;
    hi += lo < u;
    if (hi >= s)
        return 0;
    y = div128(hi, lo, s, &rem); /* Y = floor(X / s), geometric(1 - exp(-s/t)) */
    if (y >= SFL_DP_EXACT_MAX)
        return 0;
    int neg = (int)(sfl_dp_rng_u64(r) >> 63);

    if (neg && y == 0)
        return 0;
    *z = neg ? -(int64_t)y : (int64_t)y;
    return 1;
}

static void dlaplace_run(sfl_dp_rng_t *r, uint64_t s, uint64_t t, int64_t *out)
{
    while (!dlaplace_try(r, s, t, out))
        ;
}

int sfl_dp_dlaplace(sfl_dp_rng_t *r, uint64_t s, uint64_t t, int64_t *out)
{
    if (s == 0 || t == 0)
        return sfl__fail(SFL_EINVAL, "dlaplace: zero parameter (s %llu, t %llu)",
                         (unsigned long long)s, (unsigned long long)t);
    if (s > SFL_DP_EXACT_MAX || t > SFL_DP_EXACT_MAX || t / s >= SFL_DP_DLAPLACE_MAX_SCALE)
        return sfl__fail(SFL_ERANGE, "dlaplace: scale %llu/%llu out of range",
                         (unsigned long long)t, (unsigned long long)s);
    dlaplace_run(r, s, t, out);
    return 0;
}

/* floor(sqrt(x)) exactly, x < 2^62 (so (c + 1)^2 cannot wrap). */
static uint64_t isqrt(uint64_t x)
{
    uint64_t c = (uint64_t)sqrt((double)x);

    while (c * c > x)
        c--;
    while ((c + 1) * (c + 1) <= x)
        c++;
    return c;
}

/* CKS Algorithm 3 with Laplace scale sigma2 / c, c = floor(sigma) >= 1,
 * instead of the paper's floor(sigma) + 1 (any positive scale is correct;
 * this one makes sigma2 / scale = c an integer): Y ~ Lap_Z(sigma2 / c),
 * accepted with probability exp(-(|Y| - c)^2 / (2 sigma2)). The exponent is
 * v^2 / (2 sigma2) with v = |Y| - c: a 128-bit numerator over a 63-bit
 * denominator, split into integer and fractional parts. */
static void dgauss_run(sfl_dp_rng_t *r, uint64_t sigma2, int64_t *out)
{
    uint64_t c = isqrt(sigma2), den = 2 * sigma2;
    int64_t y;

    for (;;) {
        uint64_t v, hi, lo, khi, klo, rem;

        dlaplace_run(r, c, sigma2, &y);
        v = y < 0 ? (uint64_t)(-y) : (uint64_t)y;
        v = v >= c ? v - c : c - v;
        mul64(v, v, &hi, &lo);
        khi = hi / den;
        klo = div128(hi % den, lo, den, &rem);
        if (bern_split(r, khi, klo, rem, den)) {
            *out = y;
            return;
        }
    }
}

int sfl_dp_dgauss(sfl_dp_rng_t *r, uint64_t sigma2, int64_t *out)
{
    if (sigma2 == 0)
        return sfl__fail(SFL_EINVAL, "dgauss: zero variance");
    if (sigma2 >= SFL_DP_EXACT_MAX)
        return sfl__fail(SFL_ERANGE, "dgauss: variance %llu above 2^62",
                         (unsigned long long)sigma2);
    dgauss_run(r, sigma2, out);
    return 0;
}

/* *e = the exponent of the grid 2^e of scale; 0, or -1 with the detail
 * set when scale is not usable. */
static int grid_exp(double scale, const char *what, int *e)
{
    if (!(scale >= SFL_DP_SCALE_MIN && scale <= SFL_DP_SCALE_MAX)) {
        sfl__detail("%s %g is not in [2^-900, 2^900]", what, scale);
        return -1;
    }
    (void)frexp(scale, e); /* scale in [2^(*e - 1), 2^*e) */
    *e -= 1 + SFL_DP_GRID_BITS;
    return 0;
}

double sfl_dp_grid(double scale)
{
    int e;

    return grid_exp(scale, "scale", &e) == 0 ? ldexp(1.0, e) : NAN;
}

/* scale / 2^e in [2^20, 2^21) times 2^32: an integer below 2^53, because
 * a double in [2^20, 2^21) is a multiple of 2^-32. */
static uint64_t units_q32(double scale, int e)
{
    return (uint64_t)ldexp(scale, 32 - e);
}

/* One draw of noise of the given scale on its grid 2^*e: *z is a discrete
 * Laplace of scale exactly scale / 2^*e, or a discrete Gaussian of variance
 * (sigma / 2^*e)^2 rounded up to an integer (in [2^40, 2^42]). -1 with the
 * detail set for an unusable scale. */
static int draw(sfl_dp_rng_t *r, int gauss, double scale, int *e, int64_t *z)
{
    uint64_t m, hi, lo;

    if (grid_exp(scale, gauss ? "Gaussian sigma" : "Laplace scale", e) != 0)
        return -1;
    m = units_q32(scale, *e);
    if (!gauss) {
        dlaplace_run(r, UINT64_C(1) << 32, m, z); /* scale m / 2^32 */
        return 0;
    }
    mul64(m, m, &hi, &lo); /* m^2 / 2^64 */
    dgauss_run(r, hi + (lo != 0), z);
    return 0;
}

double sfl_dp_laplace(sfl_dp_rng_t *r, double scale)
{
    int e;
    int64_t z;

    return draw(r, 0, scale, &e, &z) == 0 ? ldexp((double)z, e) : NAN;
}

double sfl_dp_gaussian(sfl_dp_rng_t *r, double sigma)
{
    int e;
    int64_t z;

    return draw(r, 1, sigma, &e, &z) == 0 ? ldexp((double)z, e) : NAN;
}

/* fl(round(x / 2^e) 2^e + z 2^e): a function of the integer round(x/2^e) + z
 * only (while |z| < 2^53). A |x| of 2^53 grid steps or more is on the grid
 * already (its ulp is at least the grid), and x + z 2^e, rounded once, is a
 * function of that exact sum. */
static double release(double x, int e, int64_t z)
{
    double k = ldexp(x, -e);

    if (fabs(k) < 0x1p53)
        return ldexp(nearbyint(k) + (double)z, e);
    return x + ldexp((double)z, e);
}

double sfl_dp_release_laplace(sfl_dp_rng_t *r, double x, double scale)
{
    int e;
    int64_t z;

    if (!isfinite(x) || draw(r, 0, scale, &e, &z) != 0)
        return NAN;
    return release(x, e, z);
}

double sfl_dp_release_gaussian(sfl_dp_rng_t *r, double x, double sigma)
{
    int e;
    int64_t z;

    if (!isfinite(x) || draw(r, 1, sigma, &e, &z) != 0)
        return NAN;
    return release(x, e, z);
}

/* The exponential mechanism by rejection: propose i uniformly, accept with
 * probability exp(-(kmax - k_i) / 2^20), k_i = round(u_i 2^20 / beta), by
 * the exact Bernoulli above. The accepted i has probability proportional
 * to exp(k_i / 2^20), the mechanism on utilities rounded to the grid
 * beta / 2^20 (a sensitivity larger by one grid step at most, as for the
 * release functions), and nothing random touches floating point (the
 * Gumbel-max trick, argmax u_i / beta + Gumbel, has this distribution
 * but draws it through logarithms of uniform doubles). The best candidate
 * is accepted with probability 1, so a proposal succeeds with probability
 * at least 1/n: n tries on average at worst. */
#define SELECT_BITS 20
#define SELECT_MAX_UNITS 0x1p40

int sfl_dp_select_exp(sfl_dp_rng_t *r, const double *u, size_t n, double beta, size_t *out)
{
    int64_t kmax = INT64_MIN;

    if (n == 0 || !(beta > 0 && beta < HUGE_VAL))
        return sfl__fail(SFL_EINVAL, "select_exp: need n >= 1 and beta > 0 finite (got %zu, "
                         "%g)", n, beta);
    for (size_t i = 0; i < n; i++) {
        double k = nearbyint(ldexp(u[i] / beta, SELECT_BITS));

        if (!(fabs(k) <= SELECT_MAX_UNITS))
            return sfl__fail(SFL_ERANGE, "select_exp: utility %zu is %g, beyond 2^20 beta", i,
                             u[i]);
        if ((int64_t)k > kmax)
            kmax = (int64_t)k;
    }
    for (;;) {
        uint64_t i = below(r, n);
        int64_t k = (int64_t)nearbyint(ldexp(u[i] / beta, SELECT_BITS));
        int acc;

        if (sfl_dp_bernoulli_exp(r, (uint64_t)(kmax - k), (uint64_t)1 << SELECT_BITS, &acc) < 0)
            return SFL_EINVAL; /* not reached: the denominator is valid */
        if (acc) {
            *out = (size_t)i;
            return 0;
        }
    }
}

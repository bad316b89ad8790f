#include "sfl/core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void sfl_rng_seed(sfl_rng_t *r, uint64_t seed, uint64_t round, uint64_t client,
                  uint64_t stream)
{
    /* Fold the four coordinates through splitmix64 one after another so that
     * nearby tuples ((7,1,2) vs (7,2,1)) give unrelated states. */
    uint64_t x = seed;

    x = splitmix64(&x) ^ round;
    x = splitmix64(&x) ^ client;
    x = splitmix64(&x) ^ stream;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    /* xoshiro's only bad state is all zeros; splitmix64 cannot produce four
     * zero outputs in a row, but be explicit. */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
        r->s[0] = 1;
    r->has_spare = 0;
    r->spare = 0.0;
}

uint64_t sfl_rng_u64(sfl_rng_t *r)
{
    /* xoshiro256** (Blackman & Vigna). */
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t sfl_rng_below(sfl_rng_t *r, uint64_t n)
{
    /* Rejection on the top of the range: unbiased for every n. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;

    do {
        v = sfl_rng_u64(r);
    } while (v >= limit);
    return v % n;
}

double sfl_rng_uniform(sfl_rng_t *r)
{
    /* 53 random bits, shifted by half an ulp: strictly inside (0, 1). */
    return ((double)(sfl_rng_u64(r) >> 11) + 0.5) * 0x1.0p-53;
}

double sfl_rng_gauss(sfl_rng_t *r, double mean, double sd)
{
    /* Marsaglia polar method; the second deviate is kept for the next call. */
    double u, v, s;

    if (r->has_spare) {
        r->has_spare = 0;
        return mean + sd * r->spare;
    }
    do {
        u = 2.0 * sfl_rng_uniform(r) - 1.0;
        v = 2.0 * sfl_rng_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    s = sqrt(-2.0 * log(s) / s);
    r->spare = v * s;
    r->has_spare = 1;
    return mean + sd * u * s;
}

double sfl_rng_laplace(sfl_rng_t *r, double b)
{
    /* Inverse CDF on u in (0,1) \ {1/2 boundary}: both tails reachable. */
    double u = sfl_rng_uniform(r) - 0.5;

    return u < 0 ? b * log(1.0 + 2.0 * u) : -b * log(1.0 - 2.0 * u);
}

double sfl_rng_gamma(sfl_rng_t *r, double shape)
{
    /* Marsaglia & Tsang (2000); shape < 1 through the boost
     * Gamma(a) = Gamma(a + 1) * U^(1/a). */
    if (shape < 1.0) {
        double g = sfl_rng_gamma(r, shape + 1.0);

        return g * pow(sfl_rng_uniform(r), 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);

    for (;;) {
        double x, v, u;

        do {
            x = sfl_rng_gauss(r, 0.0, 1.0);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        u = sfl_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x)
            return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

void sfl_rng_shuffle(sfl_rng_t *r, uint32_t *a, size_t n)
{
    /* Fisher-Yates. */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)sfl_rng_below(r, i);
        uint32_t t = a[i - 1];

        a[i - 1] = a[j];
        a[j] = t;
    }
}

int sfl_rng_sample(sfl_rng_t *r, uint32_t n, uint32_t k, uint32_t *out)
{
    if (k > n)
        return sfl__fail(SFL_EINVAL, "cannot sample %u of %u without replacement", k, n);
    if (k == 0)
        return 0;
    if ((uint64_t)k * 8 >= n) {
        /* Dense case: selection sampling (Knuth 3.4.2 Algorithm S), O(n),
         * output already sorted. */
        uint32_t need = k;

        for (uint32_t i = 0, m = 0; m < k; i++) {
            if (sfl_rng_below(r, n - i) < need) {
                out[m++] = i;
                need--;
            }
        }
        return 0;
    }
    /* Sparse case: Floyd's algorithm over a sorted array, O(k^2) worst case
     * moves but k < n/8 keeps this to small batches; no allocation. */
    uint32_t m = 0;

    for (uint32_t j = n - k; j < n; j++) {
        uint32_t t = (uint32_t)sfl_rng_below(r, (uint64_t)j + 1);
        /* binary search t in out[0..m) */
        uint32_t lo = 0, hi = m;

        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;

            if (out[mid] < t)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < m && out[lo] == t) {
            /* t already taken: take j, which is larger than anything so far. */
            out[m++] = j;
        } else {
            for (uint32_t q = m; q > lo; q--)
                out[q] = out[q - 1];
            out[lo] = t;
            m++;
        }
    }
    return 0;
}

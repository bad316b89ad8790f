#include "sfl/crypto/savec.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

/* The bit-level rules are in savec.h; this file keeps to them and checks
 * what a caller's parameters could break before any arithmetic relies on
 * them (the int32 bound of a sum, the 32-bit ChaCha20 block counter). */

_Static_assert(SFL_SA_KEY_BYTES == crypto_stream_chacha20_ietf_KEYBYTES, "mask key size");
_Static_assert(crypto_stream_chacha20_ietf_NONCEBYTES == 12, "ietf nonce size");

#define EXPLORE_TAG "sfl-sa-explore"
#define EXPLORE_TAG_LEN (sizeof(EXPLORE_TAG) - 1)
_Static_assert(EXPLORE_TAG_LEN == 14, "exploration tag length");

#define WORDS_PER_BLOCK 16u
/* 64 ChaCha20 blocks (4 KiB) of keystream per call: large enough that the
 * per-call cost vanishes, small enough for any thread's stack. */
#define CHUNK_BLOCKS 64u
#define CHUNK_BYTES (CHUNK_BLOCKS * 64u)
#define MAX_WORDS ((uint64_t)1 << 36)

/* ---- support ------------------------------------------------------------- */

typedef struct {
    uint64_t key; /* the index's rank */
    uint32_t i;
} ranked_t;

/* The exploration key: BLAKE2b-256("sfl-sa-explore" || nonce). */
static void explore_key(const uint8_t nonce[SFL_SA_NONCE_BYTES], uint8_t key[SFL_SA_KEY_BYTES])
{
    uint8_t in[EXPLORE_TAG_LEN + SFL_SA_NONCE_BYTES];

    memcpy(in, EXPLORE_TAG, EXPLORE_TAG_LEN);
    memcpy(in + EXPLORE_TAG_LEN, nonce, SFL_SA_NONCE_BYTES);
    crypto_generichash(key, SFL_SA_KEY_BYTES, in, sizeof in, NULL, 0);
}

static int rank_less(const ranked_t *x, const ranked_t *y)
{
    return x->key < y->key || (x->key == y->key && x->i < y->i);
}

static int by_index(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;

    return (x->i > y->i) - (x->i < y->i);
}

static void swap_ranked(ranked_t *a, ranked_t *b)
{
    ranked_t t = *a;

    *a = *b;
    *b = t;
}

/* Moves the `need` least ranked of c[0..n) (need < n) to c[0..need), in no
 * order: quickselect (Lomuto, the middle element as pivot; the ranks are
 * pseudorandom and distinct, ties being broken by index), expected O(n).
 * Invariant: c[0..lo) rank below all of c[lo..n), c[hi..n) above all of
 * c[0..hi), and lo <= need <= hi. */
static void select_least(ranked_t *c, uint32_t n, uint32_t need)
{
    uint32_t lo = 0, hi = n;

    while (hi - lo > 1) {
        uint32_t store = lo;
        ranked_t pivot;

        swap_ranked(&c[lo + (hi - lo) / 2], &c[hi - 1]);
        pivot = c[hi - 1];
        for (uint32_t i = lo; i < hi - 1; i++)
            if (rank_less(&c[i], &pivot))
                swap_ranked(&c[i], &c[store++]);
        swap_ranked(&c[store], &c[hi - 1]); /* [lo, store) < pivot < (store, hi) */
        if (store == need)
            return;
        if (store < need)
            lo = store + 1;
        else
            hi = store;
    }
}

int sfl_sa_support(const double *global, uint32_t d, uint32_t size,
                   const uint8_t nonce[SFL_SA_NONCE_BYTES], uint32_t *out, uint32_t *n)
{
    assert(global && nonce && out && n);
    *n = 0;
    if (d == 0 || size == 0)
        return sfl__fail(SFL_EINVAL, "secure aggregation support: d and size must be > 0");
    if (sodium_init() < 0)
        return sfl__fail(SFL_EUNSUP, "libsodium failed to initialise");

    uint32_t m = size < d ? size : d, ns = 0;
    for (uint32_t i = 0; i < d; i++)
        ns += global[i] != 0.0;

    /* Ranked are either the indices outside the support (to fill S_t up to
     * m) or, when the support alone is too big, the support itself. */
    int rank_support = ns > m;
    uint32_t ncand = rank_support ? ns : d - ns;
    uint32_t need = rank_support ? m : m - ns;
    ranked_t *cand = NULL;
    uint32_t nsel = 0;

    if (need > 0 && need < ncand) {
        uint8_t key[SFL_SA_KEY_BYTES];
        uint32_t w[2 * 256];

        cand = sfl__mallocarray(ncand, sizeof *cand);
        if (!cand)
            return sfl__fail(SFL_ENOMEM, "secure aggregation support: %u candidates", ncand);
        explore_key(nonce, key);
        uint32_t c = 0;
        for (uint32_t i0 = 0; i0 < d; i0 += 256) {
            uint32_t cnt = d - i0 < 256 ? d - i0 : 256;

            sfl_sa_mask_words(key, 2 * (uint64_t)i0, w, 2 * (size_t)cnt);
            for (uint32_t j = 0; j < cnt; j++)
                if ((global[i0 + j] != 0.0) == rank_support)
                    cand[c++] = (ranked_t){(uint64_t)w[2 * j + 1] << 32 | w[2 * j], i0 + j};
        }
        assert(c == ncand);
        select_least(cand, ncand, need);
        qsort(cand, need, sizeof *cand, by_index);
        nsel = need;
    }

    /* Merge, ascending: an index is kept when its class is taken whole (the
     * support when it fits, the others when all are needed; a ranked
     * support is never needed whole, as ns > m) or when it was selected. */
    int take_support = !rank_support, take_others = !rank_support && need == ncand;
    uint32_t o = 0, s = 0;
    for (uint32_t i = 0; i < d; i++) {
        int in_support = global[i] != 0.0;
        int keep = in_support ? take_support : take_others;
        if (s < nsel && cand[s].i == i) {
            keep = 1;
            s++;
        }
        if (keep)
            out[o++] = i;
    }
    assert(o == m && s == nsel);
    sfl__free(cand);
    *n = m;
    return 0;
}

/* ---- quantization -------------------------------------------------------- */

int sfl_sa_quant_init(sfl_sa_quant_t *q, double clip, double w_max, uint32_t n_max)
{
    assert(q);
    if (!(isfinite(clip) && clip > 0))
        return sfl__fail(SFL_EINVAL, "secure aggregation: clip %g must be finite and > 0",
                         clip);
    if (!(isfinite(w_max) && w_max > 0))
        return sfl__fail(SFL_EINVAL, "secure aggregation: w_max %g must be finite and > 0",
                         w_max);
    if (n_max == 0 || n_max > (UINT32_C(1) << 30))
        return sfl__fail(SFL_EINVAL, "secure aggregation: n_max %u not in [1, 2^30]", n_max);

    uint32_t lg = 0; /* floor(log2 n_max) */
    while ((n_max >> lg) > 1)
        lg++;
    uint32_t bits = 30 - lg;

    /* f from a floating-point guess, then corrected with exact ldexp
     * comparisons, so log2's rounding cannot move it by one. The range of
     * a finite double bounds f to about [-1030, 1105]. */
    double top = ldexp(1.0, (int)bits);
    int f = (int)floor((double)bits - log2(clip));
    while (ldexp(clip, f) > top)
        f--;
    while (ldexp(clip, f + 1) <= top)
        f++;

    q->clip = clip;
    q->w_max = w_max;
    q->n_max = n_max;
    q->bits = bits;
    q->frac = f;
    return 0;
}

/* What sfl_sa_quantize and sfl_sa_dequantize rely on: a sum of n_max
 * slots stays inside int32 (see savec.h). */
static int quant_ok(const sfl_sa_quant_t *q)
{
    return isfinite(q->clip) && q->clip > 0 && isfinite(q->w_max) && q->w_max > 0 &&
           q->n_max >= 1 && q->bits <= 30 &&
           (uint64_t)q->n_max << q->bits < (UINT64_C(1) << 31) &&
           ldexp(q->clip, q->frac) <= ldexp(1.0, (int)q->bits);
}

double sfl_sa_rho(const sfl_sa_quant_t *q, double weight)
{
    assert(q);
    if (!(isfinite(weight) && weight > 0) || !(isfinite(q->w_max) && q->w_max > 0))
        return 0.0;
    return (weight < q->w_max ? weight : q->w_max) / q->w_max;
}

int sfl_sa_quantize(const sfl_sa_quant_t *q, const double *vals, uint32_t k, double weight,
                    sfl_rng_t *rng, uint32_t *out)
{
    assert(q && (vals || k == 0) && rng && out);
    if (!quant_ok(q))
        return sfl__fail(SFL_EINVAL, "secure aggregation: quantizer not initialised");
    if (!(isfinite(weight) && weight > 0))
        return sfl__fail(SFL_EINVAL, "secure aggregation: weight %g must be finite and > 0",
                         weight);
    /* All values checked before any is written or any draw is made: a
     * refused input leaves out and the rng as they were. */
    for (uint32_t i = 0; i < k; i++)
        if (!isfinite(vals[i]))
            return sfl__fail(SFL_ENUMERIC, "secure aggregation: value %u is %g", i, vals[i]);

    double rho = sfl_sa_rho(q, weight);
    double c = q->clip;
    for (uint32_t i = 0; i < k; i++) {
        double v = vals[i] < -c ? -c : vals[i] > c ? c : vals[i];
        /* |rho v| <= rho c as rounding is monotone; ldexp is exact unless
         * it underflows (monotone too), so |z| <= rho c 2^f <= 2^B and the
         * rounded value is within ceil(rho c 2^f) (sfl_sa_dequantize's
         * bound). */
        double z = ldexp(rho * v, q->frac);
        double fl = floor(z);
        double u = sfl_rng_uniform(rng);
        int64_t r = (int64_t)fl + (u < z - fl);
        out[i] = (uint32_t)r; /* two's complement, defined for unsigned */
    }
    out[k] = 1; /* the canary */
    return 0;
}

static int32_t as_int32(uint32_t w)
{
    /* Two's complement without implementation-defined conversion. */
    return w < (UINT32_C(1) << 31) ? (int32_t)w : (int32_t)(w - (UINT32_C(1) << 31)) + INT32_MIN;
}

/* The most |value slot| of one input of weight rho can reach:
 * ceil(rho c 2^f), the quantizer's own arithmetic (<= 2^B). */
static int64_t slot_bound(const sfl_sa_quant_t *q, double rho)
{
    return (int64_t)ceil(ldexp(rho * q->clip, q->frac));
}

int sfl_sa_dequantize(const sfl_sa_quant_t *q, const uint32_t *sum, uint32_t k, uint32_t count,
                      const double *weights, double *mean, double *wsum)
{
    assert(q && sum && (mean || k == 0) && (weights || count == 0) && wsum);
    if (!quant_ok(q))
        return sfl__fail(SFL_EINVAL, "secure aggregation: quantizer not initialised");
    if (count == 0 || count > q->n_max)
        return sfl__fail(SFL_EINVAL, "secure aggregation: %u inputs, n_max is %u", count,
                         q->n_max);
    if (sum[k] != count)
        return sfl__fail(SFL_EBADSIG, "secure aggregation: canary %u for %u inputs", sum[k],
                         count);

    /* The divisor and the bound from the public weights alone: nothing an
     * input holds decides either. */
    double rsum = 0;
    int64_t bound = 0;
    for (uint32_t u = 0; u < count; u++) {
        double rho = sfl_sa_rho(q, weights[u]);

        if (!(rho > 0))
            return sfl__fail(SFL_EINVAL, "secure aggregation: input %u's weight %g must be "
                             "finite and > 0", u, weights[u]);
        rsum += rho;
        bound += slot_bound(q, rho);
    }
    for (uint32_t i = 0; i < k; i++) {
        int64_t v = as_int32(sum[i]);

        if (v > bound || v < -bound)
            return sfl__fail(SFL_ERANGE, "secure sum out of bounds: some member's input is not "
                             "a clipped vector; not attributable (slot %u is %lld, %u inputs "
                             "of their weights reach %lld at most)", i, (long long)v, count,
                             (long long)bound);
    }
    /* value / 2^f / rsum: the mean of rho_u v_u over the rho_u */
    for (uint32_t i = 0; i < k; i++)
        mean[i] = ldexp((double)as_int32(sum[i]), -q->frac) / rsum;
    *wsum = rsum;
    return 0;
}

/* ---- metrics ------------------------------------------------------------- */

/* F of metric j: the counts are whole, the others have 2B - 32 fraction bits. */
static int metric_frac(const sfl_sa_quant_t *q, int j)
{
    return j == 0 || j == 2 ? 0 : 2 * (int)q->bits - 32;
}

void sfl_sa_metrics_encode(const sfl_sa_quant_t *q, const double *m, uint32_t *out)
{
    assert(q && m && out && quant_ok(q));
    double top = ldexp(1.0, 2 * (int)q->bits) - 1;
    uint64_t lo_mask = ((uint64_t)1 << q->bits) - 1;

    for (int j = 0; j < SFL_SA_METRICS; j++) {
        double x = m[j] > 0 ? nearbyint(ldexp(m[j], metric_frac(q, j))) : 0; /* NaN: 0 */
        uint64_t v = x < top ? (uint64_t)x : (uint64_t)top;

        out[2 * j] = (uint32_t)(v & lo_mask);
        out[2 * j + 1] = (uint32_t)(v >> q->bits);
    }
}

int sfl_sa_metrics_decode(const sfl_sa_quant_t *q, const uint32_t *sum, uint32_t count,
                          double *m)
{
    assert(q && sum && m && quant_ok(q));
    /* each input's words are below 2^B (sfl_sa_metrics_encode) */
    uint64_t top = (uint64_t)count * (((uint64_t)1 << q->bits) - 1);
    for (int w = 0; w < SFL_SA_METRIC_WORDS; w++)
        if (count == 0 || count > q->n_max || sum[w] > top)
            return sfl__fail(SFL_ERANGE, "secure sum out of bounds: some member's input is not "
                             "a clipped vector; not attributable (metric word %d is %u, %u "
                             "inputs reach %llu at most)", w, sum[w], count,
                             (unsigned long long)top);
    for (int j = 0; j < SFL_SA_METRICS; j++)
        m[j] = ldexp(ldexp((double)sum[2 * j + 1], (int)q->bits) + (double)sum[2 * j],
                     -metric_frac(q, j));
    return 0;
}

/* ---- a client's input, the server's mean --------------------------------- */

static int support_ok(const uint32_t *support, uint32_t k, uint32_t d)
{
    if (k > d)
        return 0;
    for (uint32_t s = 0; s < k; s++)
        if (support[s] >= d || (s > 0 && support[s] <= support[s - 1]))
            return 0;
    return 1;
}

int sfl_sa_client_vector(const sfl_sa_quant_t *q, const double *delta, double *resid,
                         uint32_t d, const uint32_t *support, uint32_t k, uint32_t topk,
                         double weight, sfl_rng_t *rng, sfl_topk_ws_t *ws, double *vals,
                         uint32_t *out)
{
    assert(q && delta && resid && (support || k == 0) && rng && ws && (vals || k == 0) && out);
    if (!support_ok(support, k, d))
        return sfl__fail(SFL_EINVAL, "secure aggregation: S_t is not ascending in [0, %u)", d);
    /* Every z checked before anything is changed: a residual must never
     * turn NaN silently off S_t, where nothing else would look at it. */
    for (uint32_t j = 0; j < d; j++)
        if (!isfinite(delta[j] + resid[j]))
            return sfl__fail(SFL_ENUMERIC, "secure aggregation: entry %u of the change is %g", j,
                             delta[j] + resid[j]);
    for (uint32_t s = 0; s < k; s++)
        vals[s] = delta[support[s]] + resid[support[s]];
    if (topk < k) {
        int rc = sfl_ht_dense(vals, k, topk, ws);

        if (rc < 0)
            return rc;
    }
    /* Quantize before the residual moves, so a refused weight or quantizer
     * leaves the client's state as it was (sfl_sa_quantize draws nothing
     * before its checks pass). */
    int rc = sfl_sa_quantize(q, vals, k, weight, rng, out);
    if (rc < 0)
        return rc;
    /* e <- z - v: a kept slot has v = z, so its residual is exactly 0 and
     * v + e == z holds bit for bit everywhere. */
    uint32_t s = 0;
    for (uint32_t j = 0; j < d; j++) {
        double z = delta[j] + resid[j];

        if (s < k && support[s] == j)
            resid[j] = vals[s++] != 0.0 ? 0.0 : z;
        else
            resid[j] = z;
    }
    return 0;
}

int sfl_sa_server_mean(const sfl_sa_quant_t *q, const uint32_t *sum, const uint32_t *support,
                       uint32_t k, uint32_t count, const double *weights, uint32_t d,
                       double *mean, double *wsum)
{
    assert(q && sum && (support || k == 0) && mean && wsum);
    if (!support_ok(support, k, d))
        return sfl__fail(SFL_EINVAL, "secure aggregation: S_t is not ascending in [0, %u)", d);
    int rc = sfl_sa_dequantize(q, sum, k, count, weights, mean, wsum);
    if (rc < 0)
        return rc;
    /* Spread slot s to support[s] from the top down: support[s] >= s, so
     * every slot is read before its entry is written over. */
    uint32_t s = k;
    for (uint32_t j = d; j-- > 0;) {
        if (s > 0 && support[s - 1] == j) {
            s--;
            mean[j] = mean[s];
        } else {
            mean[j] = 0.0;
        }
    }
    return 0;
}

/* ---- a statistics round's moments --------------------------------------- */

int sfl_sa_moments_encode(const double *m, uint32_t d, double weight, double bound, double *v)
{
    assert(m && v);
    size_t n = 1 + 2 * (size_t)d;

    if (!(isfinite(weight) && weight > 0) || !(isfinite(bound) && bound > 0) ||
        !isfinite(bound * bound))
        return sfl__fail(SFL_EINVAL, "statistics: weight %g and bound %g must be finite and > 0",
                         weight, bound);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(m[i]))
            return sfl__fail(SFL_ENUMERIC, "statistics: moment %zu is %g", i, m[i]);
    double rows = m[0], c = bound * bound, slack = 1 + 1e-9;
    if (!(rows >= 1 && rows <= weight))
        return sfl__fail(SFL_ERANGE, "statistics: %.17g rows, the public weight is %.17g "
                         "(need 1 <= rows <= weight)", rows, weight);
    for (uint32_t j = 0; j < d; j++) {
        double s = m[1 + j], q = m[1 + (size_t)d + j];

        if (fabs(s) > rows * bound * slack || q < 0 || q > rows * c * slack)
            return sfl__fail(SFL_ERANGE, "statistics: feature %u's sum %g or sum of squares %g "
                             "is beyond %.17g rows of |x| <= standardize_bound %g", j, s, q,
                             rows, bound);
    }
    v[0] = rows / weight * c;
    for (uint32_t j = 0; j < d; j++) {
        v[1 + j] = m[1 + j] / weight * bound;
        v[1 + (size_t)d + j] = m[1 + (size_t)d + j] / weight;
    }
    return 0;
}

int sfl_sa_moments_decode(const double *mean, uint32_t d, double wsum, double bound, double *m)
{
    assert(mean && m);
    if (!(isfinite(wsum) && wsum > 0) || !(isfinite(bound) && bound > 0) ||
        !isfinite(bound * bound))
        return sfl__fail(SFL_EINVAL, "statistics: weight sum %g and bound %g must be finite "
                         "and > 0", wsum, bound);
    double c = bound * bound;
    m[0] = nearbyint(mean[0] * wsum / c);
    if (!(m[0] >= 1))
        return sfl__fail(SFL_ERANGE, "statistics: a pooled count of %g rows", m[0]);
    for (uint32_t j = 0; j < d; j++) {
        m[1 + j] = mean[1 + j] * wsum / bound;
        m[1 + (size_t)d + j] = mean[1 + (size_t)d + j] * wsum;
    }
    return 0;
}

double sfl_sa_moments_error(const sfl_sa_quant_t *q, uint32_t count, double bound, int part)
{
    assert(q);
    double s = part == 0 ? bound * bound : part == 1 ? bound : 1.0;

    return (double)count * q->w_max * ldexp(1.0, -q->frac) / s;
}

/* ---- masks --------------------------------------------------------------- */

/* nblocks keystream blocks of key from block counter blk into buf. */
static void keystream(const uint8_t key[SFL_SA_KEY_BYTES], uint32_t blk, uint32_t nblocks,
                      uint8_t buf[CHUNK_BYTES])
{
    static const uint8_t zero_nonce[12];

    memset(buf, 0, (size_t)nblocks * 64);
    crypto_stream_chacha20_ietf_xor_ic(buf, buf, (unsigned long long)nblocks * 64,
                                       zero_nonce, blk, key);
}

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Words [first, first + n) of key's stream, in chunks: out gets them when
 * vec is NULL, else vec gets them added (sign 1) or subtracted (-1). */
static void mask_stream(const uint8_t key[SFL_SA_KEY_BYTES], uint64_t first, size_t n,
                        uint32_t *out, uint32_t *vec, int sign)
{
    uint8_t buf[CHUNK_BYTES];
    uint64_t blk = first / WORDS_PER_BLOCK;
    uint32_t skip = (uint32_t)(first % WORDS_PER_BLOCK);

    assert(key && (out || vec || n == 0));
    assert(first <= MAX_WORDS && n <= MAX_WORDS - first);
    /* sodium_init only swaps in faster implementations; the reference ones
     * are in place without it, so a failure cannot change the words. */
    if (sodium_init() < 0) {
    }
    while (n > 0) {
        uint64_t want = ((uint64_t)skip + n + WORDS_PER_BLOCK - 1) / WORDS_PER_BLOCK;
        uint32_t nblocks = want < CHUNK_BLOCKS ? (uint32_t)want : CHUNK_BLOCKS;
        size_t take = (size_t)nblocks * WORDS_PER_BLOCK - skip;

        if (take > n)
            take = n;
        keystream(key, (uint32_t)blk, nblocks, buf);
        const uint8_t *p = buf + 4 * (size_t)skip;
        if (!vec) {
            for (size_t j = 0; j < take; j++)
                out[j] = load_le32(p + 4 * j);
            out += take;
        } else if (sign > 0) {
            for (size_t j = 0; j < take; j++)
                vec[j] += load_le32(p + 4 * j);
            vec += take;
        } else {
            for (size_t j = 0; j < take; j++)
                vec[j] -= load_le32(p + 4 * j);
            vec += take;
        }
        n -= take;
        blk += nblocks;
        skip = 0;
    }
    sodium_memzero(buf, sizeof buf);
}

void sfl_sa_mask_words(const uint8_t key[SFL_SA_KEY_BYTES], uint64_t first, uint32_t *out,
                       size_t n)
{
    mask_stream(key, first, n, out, NULL, 0);
}

void sfl_sa_mask_add(const uint8_t key[SFL_SA_KEY_BYTES], int sign, uint32_t *vec, size_t n)
{
    assert(sign == 1 || sign == -1);
    mask_stream(key, 0, n, NULL, vec, sign);
}

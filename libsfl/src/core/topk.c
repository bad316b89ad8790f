#include "sfl/core/topk.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"

/* Ranking used everywhere below: i comes before j when |x_i| > |x_j|, or the
 * magnitudes are equal and i < j. It is a strict total order (indices are
 * distinct), so "the k first" is one well-defined set whatever pivots or
 * memory layout the selection happens to use, and long runs of equal values
 * need no special three-way partitioning.
 *
 * Strategy (close to one pass over x for tau << n):
 *  1. a stratified sample of |x| (fixed-seed SFL_STREAM_PIVOT draws) gives a
 *     threshold t that about tau * (1 + a few sigma) entries reach;
 *  2. one pass collects the candidates {i : |x_i| >= t}, in index order, and
 *     rejects NaN;
 *  3. quickselect finds the k-th ranked candidate on a copy of that list
 *     (in place when the list is over half of x; step 4 then rescans x);
 *  4. the answer is the candidates that rank no later than it, read off the
 *     list in index order, so no final sort is needed.
 * If the sample misses (fewer than k candidates) or the input is small,
 * t = 0 makes every index a candidate and the same steps run over all of x.
 * When the k-th magnitude equals t itself (ties, or zeros when x has fewer
 * than k nonzeros) no selection is needed at all: the candidates above t
 * plus the first ones equal to t in index order are the answer. */

/* Below SAMPLE_MIN_N entries sampling costs more than it saves. A sample of
 * n/64 entries, at most SAMPLE_MAX, measured fastest in bench_topk: a larger
 * one costs more than the candidates its tighter threshold saves. */
#define SAMPLE_MIN_N 65536
#define SAMPLE_DIV 64
#define SAMPLE_MAX 4096
#define SAMPLE_SEED 0x746f706bu /* "topk" */
/* Quickselect ranges this small are finished by insertion sort. */
#define SMALL 16

/* The k-th ranked entry; an entry is kept when it ranks no later. */
typedef struct {
    double mag;
    uint32_t idx;
} kth_t;

void sfl_topk_ws_init(sfl_topk_ws_t *ws)
{
    ws->perm = NULL;
    ws->cap = 0;
}

int sfl_topk_ws_reserve(sfl_topk_ws_t *ws, size_t n)
{
    uint32_t *p;

    assert(ws != NULL);
    if (n <= ws->cap)
        return 0;
    /* Indices are stored as uint32 (as in sfl_spvec_t). */
    if (n > UINT32_MAX)
        return sfl__fail(SFL_EINVAL, "top-k workspace for %zu entries exceeds 2^32-1", n);
    p = sfl__reallocarray(ws->perm, n, sizeof(*p));
    if (p == NULL)
        return SFL_ENOMEM;
    ws->perm = p;
    ws->cap = n;
    return 0;
}

void sfl_topk_ws_close(sfl_topk_ws_t *ws)
{
    if (ws == NULL)
        return;
    sfl__free(ws->perm);
    sfl_topk_ws_init(ws);
}

static inline int before(double ma, uint32_t a, double mb, uint32_t b)
{
    return ma > mb || (ma == mb && a < b);
}

static inline int keeps(double m, uint32_t i, const kth_t *kt)
{
    return m > kt->mag || (m == kt->mag && i <= kt->idx);
}

static inline void swap(uint32_t *a, size_t i, size_t j)
{
    uint32_t t = a[i];

    a[i] = a[j];
    a[j] = t;
}

/* Position (among i, j, l) of the median by rank. */
static size_t med3(const double *x, const uint32_t *a, size_t i, size_t j, size_t l)
{
    double mi = fabs(x[a[i]]), mj = fabs(x[a[j]]), ml = fabs(x[a[l]]);

    if (before(mi, a[i], mj, a[j])) {
        if (before(mj, a[j], ml, a[l]))
            return j;
        return before(mi, a[i], ml, a[l]) ? l : i;
    }
    if (before(mi, a[i], ml, a[l]))
        return i;
    return before(mj, a[j], ml, a[l]) ? l : j;
}

static void insertion_sort(const double *x, uint32_t *a, size_t m)
{
    for (size_t i = 1; i < m; i++) {
        uint32_t v = a[i];
        double mv = fabs(x[v]);
        size_t j = i;

        while (j > 0 && before(mv, v, fabs(x[a[j - 1]]), a[j - 1])) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

/* Heap order for heap_select: with best_root the root is the best ranked of
 * the heap, otherwise the worst. */
static inline int above(const double *x, uint32_t a, uint32_t b, int best_root)
{
    return best_root ? before(fabs(x[a]), a, fabs(x[b]), b)
                     : before(fabs(x[b]), b, fabs(x[a]), a);
}

static void sift_down(const double *x, uint32_t *h, size_t m, size_t i, int best_root)
{
    for (;;) {
        size_t c = 2 * i + 1, top = i;

        if (c < m && above(x, h[c], h[top], best_root))
            top = c;
        if (c + 1 < m && above(x, h[c + 1], h[top], best_root))
            top = c + 1;
        if (top == i)
            return;
        swap(h, i, top);
        i = top;
    }
}

/* Rank-r entry of a[0..m) in O(m log m) worst case: the fallback that keeps
 * adversarial inputs (median-of-3 killers) from going quadratic. Keeps a
 * heap of the r+1 best (root = worst of them) or, when that is the larger
 * side, of the m-r worst (root = best of them). */
static uint32_t heap_select(const double *x, uint32_t *a, size_t m, size_t r)
{
    int best_root = r + 1 > m - r;
    size_t h = best_root ? m - r : r + 1;

    for (size_t i = h / 2; i-- > 0;)
        sift_down(x, a, h, i, best_root);
    for (size_t i = h; i < m; i++) {
        if (above(x, a[0], a[i], best_root)) {
            swap(a, 0, i);
            sift_down(x, a, h, 0, best_root);
        }
    }
    return a[0];
}

/* Uniform-enough position in [lo, lo + len) (multiply-shift; len < 2^32). */
static inline size_t rand_pos(sfl_rng_t *rng, size_t lo, size_t len)
{
    return lo + (size_t)(((sfl_rng_u64(rng) >> 32) * (uint64_t)len) >> 32);
}

/* Rank-r entry (0-based) of a[0..m): quickselect with the median of 3 (or
 * of 3 medians of 3 for long ranges) at random positions and a work budget
 * after which heap_select finishes the job (introselect). The positions come
 * from a fixed-seed SFL_STREAM_PIVOT stream: reproducible work, and unlike
 * fixed positions (lo, mid, hi) they do not degrade on the partly ordered
 * layouts that index order and equal magnitudes produce. */
static uint32_t select_rank(const double *x, uint32_t *a, size_t m, size_t r)
{
    size_t lo = 0, hi = m - 1;
    /* Quickselect partitions about 2.5-3 m entries in total on ordinary
     * input; 8 m only runs out when pivots are repeatedly bad. */
    size_t budget = m > (SIZE_MAX - 64) / 8 ? SIZE_MAX : 8 * m + 64;
    sfl_rng_t rng;

    assert(r < m);
    sfl_rng_seed(&rng, 0x70697674u, m, r, SFL_STREAM_PIVOT);
    while (hi - lo >= SMALL) {
        size_t len = hi - lo + 1, p;

        if (len > budget)
            return heap_select(x, a + lo, len, r - lo);
        budget -= len;
        if (len >= 512) {
            size_t q[9];

            for (int i = 0; i < 9; i++)
                q[i] = rand_pos(&rng, lo, len);
            p = med3(x, a, med3(x, a, q[0], q[1], q[2]), med3(x, a, q[3], q[4], q[5]),
                     med3(x, a, q[6], q[7], q[8]));
        } else {
            p = med3(x, a, rand_pos(&rng, lo, len), rand_pos(&rng, lo, len),
                     rand_pos(&rng, lo, len));
        }
        swap(a, lo, p);
        uint32_t pi = a[lo];
        double pm = fabs(x[pi]);
        size_t j = lo + 1;

        /* Branch-free Lomuto partition: which side an entry goes to is a coin
         * toss, so a branch would mispredict half the time.
         * a[lo+1..j) rank before the pivot, a[j..q) after it. */
        for (size_t q = lo + 1; q <= hi; q++) {
            uint32_t e = a[q];
            double me = fabs(x[e]);
            size_t b = (size_t)((me > pm) | ((me == pm) & (e < pi)));

            a[q] = a[j];
            a[j] = e;
            j += b;
        }
        j--;
        swap(a, lo, j);
        if (j == r)
            return a[r];
        if (j < r)
            lo = j + 1;
        else
            hi = j - 1;
    }
    insertion_sort(x, a + lo, hi - lo + 1);
    return a[r];
}

static int nan_scan(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i]))
            return sfl__fail(SFL_ENUMERIC, "x[%zu] is NaN", i);
    return 0;
}

/* t = a magnitude that, judged from a sample, roughly k(1 + 3.5/sqrt(mu))
 * entries reach, with mu = s k / n the expected sample hits; 0 when the
 * sample is too small to say. perm is scratch. */
static int sample_threshold(const double *x, size_t n, size_t k, uint32_t *perm, double *t)
{
    size_t s = n / SAMPLE_DIV < SAMPLE_MAX ? n / SAMPLE_DIV : SAMPLE_MAX;
    size_t w = n / s;
    sfl_rng_t rng;

    *t = 0.0;
    /* One draw per stratum of width w: positions stay increasing (friendly
     * to the prefetcher) and a fixed seed keeps the work reproducible. */
    sfl_rng_seed(&rng, SAMPLE_SEED, n, k, SFL_STREAM_PIVOT);
    for (size_t j = 0; j < s; j++) {
        size_t i = j * w + (size_t)sfl_rng_below(&rng, w);

        if (isnan(x[i]))
            return sfl__fail(SFL_ENUMERIC, "x[%zu] is NaN", i);
        perm[j] = (uint32_t)i;
    }
    double mu = (double)s * (double)k / (double)n;
    double r = ceil(mu + 3.5 * sqrt(mu)) + 1.0;

    if (r > (double)s)
        return 0;
    *t = fabs(x[select_rank(x, perm, s, (size_t)r - 1)]);
    return 0;
}

#if defined(__GNUC__)
/* GCC -O2 does not vectorize the screening loop on its own, and the
 * generic vector extension (SSE2 on x86-64, NEON on arm64) keeps one source
 * for both. */
typedef double v2d_t __attribute__((vector_size(16)));
typedef int64_t v2i_t __attribute__((vector_size(16)));

static inline v2i_t below2(const double *x, v2d_t tv)
{
    const v2i_t nosign = {INT64_MAX, INT64_MAX};
    v2d_t a;

    memcpy(&a, x, sizeof(a));
    a = (v2d_t)((v2i_t)a & nosign);
    return (v2i_t)(a < tv);
}

/* Some |x[0..8)| >= t, or is NaN (NaN < t is false). */
static inline int block_hit(const double *x, double t)
{
    const v2d_t tv = {t, t};
    /* A tree, not a chain, so the four compares overlap. */
    v2i_t all = (below2(x, tv) & below2(x + 2, tv)) & (below2(x + 4, tv) & below2(x + 6, tv));

    return !(all[0] & all[1]);
}
#else
static inline int block_hit(const double *x, double t)
{
    int all = 1;

    for (int j = 0; j < 8; j++)
        all &= fabs(x[j]) < t;
    return !all;
}
#endif

/* Blocks screened per chunk before the hits are read. */
#define CHUNK 256

/* perm[0..*c) = {i : |x_i| >= t} in index order; *cgt counts |x_i| > t. */
static int collect(const double *x, size_t n, double t, uint32_t *perm, size_t *c, size_t *cgt)
{
    size_t nc = 0, ngt = 0, base = 0;
    uint32_t hits[CHUNK];

    /* For tau << n this pass is the whole cost, and which blocks hold a
     * candidate is unpredictable, so nothing here branches on the data:
     * blocks of 8 are screened with SIMD compares and their numbers appended
     * branch-free to hits[] (a chunk at a time, so x is still in L1 when the
     * hit blocks are read back), then each hit block is read entry by entry,
     * again appending branch-free. */
    while (base < n) {
        size_t nblk = (n - base) / 8, nh = 0, end;

        if (nblk > CHUNK)
            nblk = CHUNK;
        for (size_t b = 0; b < nblk; b++) {
            hits[nh] = (uint32_t)b;
            nh += (size_t)block_hit(x + base + 8 * b, t);
        }
        /* The last, partial block (n % 8 entries) is always read. */
        if (nblk < CHUNK && base + 8 * nblk < n)
            hits[nh++] = (uint32_t)nblk;
        for (size_t h = 0; h < nh; h++) {
            size_t i = base + 8 * (size_t)hits[h];

            end = n - i < 8 ? n : i + 8;
            for (size_t j = i; j < end; j++) {
                double m = fabs(x[j]);

                if (isnan(m))
                    return sfl__fail(SFL_ENUMERIC, "x[%zu] is NaN", j);
                perm[nc] = (uint32_t)j;
                nc += !(m < t);
                ngt += (m > t);
            }
        }
        base += 8 * CHUNK;
    }
    *c = nc;
    *cgt = ngt;
    return 0;
}

/* The k-th ranked entry of x (0 < k < n). On return perm[0..*list) is, when
 * *list > 0, a superset of the answer in index order; when *list == 0 the
 * caller must scan x itself. */
static int find_kth(const double *x, size_t n, size_t k, uint32_t *perm, kth_t *kt, size_t *list)
{
    double t = 0.0;
    size_t c, cgt;
    uint32_t idx;
    int rc;

    assert(k > 0 && k < n);
    if (n >= SAMPLE_MIN_N) {
        rc = sample_threshold(x, n, k, perm, &t);
        if (rc < 0)
            return rc;
    }
    rc = collect(x, n, t, perm, &c, &cgt);
    if (rc < 0)
        return rc;
    if (c < k) {
        /* The sample overestimated; at t = 0 every index is a candidate. */
        t = 0.0;
        rc = collect(x, n, t, perm, &c, &cgt);
        if (rc < 0)
            return rc;
    }
    if (cgt < k) {
        /* The k-th entry has magnitude exactly t (many ties, or zeros when x
         * has fewer than k nonzeros): it is the (k - cgt)-th candidate equal
         * to t in index order, no selection needed. */
        size_t need = k - cgt, j = 0;

        for (;; j++)
            if (fabs(x[perm[j]]) == t && --need == 0)
                break;
        kt->mag = t;
        kt->idx = perm[j];
        *list = c;
        return 0;
    }
    if (c <= n - c) {
        /* Select on a copy so the list keeps its index order. */
        memcpy(perm + c, perm, c * sizeof(*perm));
        idx = select_rank(x, perm + c, c, k - 1);
        *list = c;
    } else {
        idx = select_rank(x, perm, c, k - 1);
        *list = 0;
    }
    kt->mag = fabs(x[idx]);
    kt->idx = idx;
    return 0;
}

static int check_args(size_t n, size_t k, const sfl_topk_ws_t *ws)
{
    assert(ws != NULL);
    if (k > n)
        return sfl__fail(SFL_EINVAL, "top-k: k = %zu exceeds n = %zu", k, n);
    if (n > ws->cap)
        return sfl__fail(SFL_EINVAL, "top-k: workspace holds %zu entries, need %zu", ws->cap,
                         n);
    return 0;
}

int sfl_topk_select(const double *x, size_t n, size_t k, uint32_t *out, sfl_topk_ws_t *ws)
{
    kth_t kt;
    size_t list, o = 0;
    int rc;

    rc = check_args(n, k, ws);
    if (rc < 0)
        return rc;
    if (k == 0 || k == n) {
        rc = nan_scan(x, n);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < k; i++)
            out[i] = (uint32_t)i;
        return 0;
    }
    rc = find_kth(x, n, k, ws->perm, &kt, &list);
    if (rc < 0)
        return rc;
    if (list > 0) {
        const uint32_t *perm = ws->perm;

        for (size_t j = 0; j < list; j++) {
            uint32_t i = perm[j];

            if (keeps(fabs(x[i]), i, &kt))
                out[o++] = i;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            if (keeps(fabs(x[i]), (uint32_t)i, &kt))
                out[o++] = (uint32_t)i;
    }
    assert(o == k);
    return 0;
}

/* x_i = 0 for every i outside the tau first ranked. */
static int ht_one(double *x, size_t n, size_t tau, uint32_t *perm)
{
    kth_t kt;
    size_t list;
    int rc;

    if (tau == n)
        return nan_scan(x, n);
    if (tau == 0) {
        rc = nan_scan(x, n);
        if (rc < 0)
            return rc;
        memset(x, 0, n * sizeof(*x));
        return 0;
    }
    rc = find_kth(x, n, tau, perm, &kt, &list);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (!keeps(fabs(x[i]), (uint32_t)i, &kt))
            x[i] = 0.0;
    return 0;
}

int sfl_ht_dense(double *x, size_t n, size_t tau, sfl_topk_ws_t *ws)
{
    int rc = check_args(n, tau, ws);

    if (rc < 0)
        return rc;
    return ht_one(x, n, tau, ws->perm);
}

int sfl_ht_block(double *x, size_t nblocks, size_t blocklen, size_t tau, sfl_topk_ws_t *ws)
{
    int rc;

    if (blocklen > 0 && nblocks > SIZE_MAX / blocklen)
        return sfl__fail(SFL_EINVAL, "top-k: %zu blocks of %zu overflow", nblocks, blocklen);
    rc = check_args(blocklen, tau, ws);
    if (rc < 0)
        return rc;
    /* Vet every block before changing any, so a NaN in block 5 does not
     * leave blocks 0-4 thresholded. */
    rc = nan_scan(x, nblocks * blocklen);
    if (rc < 0)
        return rc;
    for (size_t b = 0; b < nblocks; b++) {
        rc = ht_one(x + b * blocklen, blocklen, tau, ws->perm);
        assert(rc == 0);
    }
    return 0;
}

int sfl_ht_to_spvec(const double *x, size_t n, size_t tau, sfl_spvec_t *out, sfl_topk_ws_t *ws)
{
    kth_t kt;
    size_t list = 0;
    uint32_t o = 0;
    int rc;

    assert(out != NULL);
    if (out->dim != n)
        return sfl__fail(SFL_EDIM, "top-k: output dim %u, input length %zu", out->dim, n);
    rc = check_args(n, tau, ws);
    if (rc < 0)
        return rc;
    if (tau == 0 || tau == n) {
        rc = nan_scan(x, n);
        if (rc < 0)
            return rc;
        /* Keep everything (tau == n) or nothing. */
        kt.mag = tau == 0 ? INFINITY : 0.0;
        kt.idx = tau == 0 ? 0 : UINT32_MAX;
    } else {
        rc = find_kth(x, n, tau, ws->perm, &kt, &list);
        if (rc < 0)
            return rc;
    }
    /* A sparse vector holds finite values only, so an infinite entry that
     * would be kept is an error, found before out is touched. */
    if (list > 0) {
        for (size_t j = 0; j < list; j++)
            if (isinf(x[ws->perm[j]]) && keeps(INFINITY, ws->perm[j], &kt))
                return sfl__fail(SFL_ENUMERIC, "x[%u] is infinite", ws->perm[j]);
    } else if (tau > 0) {
        for (size_t i = 0; i < n; i++)
            if (isinf(x[i]) && keeps(INFINITY, (uint32_t)i, &kt))
                return sfl__fail(SFL_ENUMERIC, "x[%zu] is infinite", i);
    }
    rc = sfl_spvec_reserve(out, (uint32_t)tau);
    if (rc < 0)
        return rc;
    /* Zeros of H_tau(x) are not stored, as in sfl_spvec_from_dense. */
    if (list > 0) {
        const uint32_t *perm = ws->perm;

        for (size_t j = 0; j < list; j++) {
            uint32_t i = perm[j];

            if (x[i] != 0.0 && keeps(fabs(x[i]), i, &kt)) {
                out->idx[o] = i;
                out->val[o++] = x[i];
            }
        }
    } else if (tau > 0) {
        for (size_t i = 0; i < n; i++) {
            if (x[i] != 0.0 && keeps(fabs(x[i]), (uint32_t)i, &kt)) {
                out->idx[o] = (uint32_t)i;
                out->val[o++] = x[i];
            }
        }
    }
    out->nnz = o;
    return 0;
}

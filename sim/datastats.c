/* sfl-sim's data-side passes over a loaded federation: --standardize (the
 * pooled training data's per-feature mean and deviation, applied to every
 * part) and the overlap summary that shows what a split shares between
 * clients and between training and test rows (--partition pfedme2020). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sim.h"

void sim_standardizer(sfl_dataset_t *const *train, uint32_t n, uint32_t d, double eps,
                      double *mu, double *scale)
{
    size_t len = SFL_MOMENTS_LEN(d);
    double *sum = sim_xcalloc(len, sizeof(double)), *one = sim_xcalloc(len, sizeof(double));
    uint32_t constant = 0;
    double smin = INFINITY, smax = 0;
    int rc;

    if (!(eps > 0) || !isfinite(eps))
        sim_usage_error("--standardize-eps must be finite and > 0", NULL);
    /* Each client's moments from zero into a vector of its own, then the
     * vectors added in client order 0..N-1: exactly what the network's
     * statistics round does (each agent sends its vector, the coordinator
     * sums them in agent order), so both give bit-identical mu and scale
     * for the same client files. Do not accumulate into one vector. */
    for (uint32_t c = 0; c < n; c++) {
        memset(one, 0, len * sizeof(double));
        if ((rc = sfl_dataset_moments(train[c], d, one)) < 0)
            sim_die("standardize", rc);
        for (size_t k = 0; k < len; k++)
            sum[k] += one[k];
    }
    if ((rc = sfl_moments_standardizer(sum, d, eps, mu, scale)) < 0)
        sim_die("standardize", rc);
    for (uint32_t j = 0; j < d; j++) {
        double sigma = 1.0 / scale[j] - eps;

        if (sigma <= 0) {
            constant++;
            continue;
        }
        smin = sigma < smin ? sigma : smin;
        smax = sigma > smax ? sigma : smax;
    }
    /* stderr, even with --quiet: the report quotes it; stdout stays CSV */
    fprintf(stderr, "sfl-sim: standardize: %.0f training rows of %u clients, %u features "
            "(%u constant), sigma %.6g .. %.6g, eps %.6g\n", sum[0], n, d, constant,
            constant < d ? smin : 0, smax, eps);
    free(one);
    free(sum);
}

void sim_standardize_apply(sfl_dataset_t **parts, uint32_t n, uint32_t d, const double *mu,
                           const double *scale)
{
    for (uint32_t c = 0; c < n; c++) {
        int rc;

        if (parts[c] == NULL)
            continue;
        if ((rc = sfl_dataset_standardize(parts[c], d, mu, scale)) < 0)
            sim_die("standardize", rc);
    }
}

/* ---- overlap --------------------------------------------------------- */

typedef struct rowref {
    uint64_t h;                /* hash of the row's entries */
    const sfl_csr_t *X;
    uint32_t i;
    uint32_t test;             /* 0: a training row, 1: a test row */
} rowref_t;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t row_hash(const sfl_csr_t *X, uint32_t i)
{
    uint64_t h = 0x243f6a8885a308d3ULL;

    for (size_t p = X->rowptr[i]; p < X->rowptr[i + 1]; p++) {
        uint64_t bits;

        memcpy(&bits, &X->val[p], sizeof(bits));
        h = mix(mix(h, X->colind[p]), bits);
    }
    return h;
}

/* By hash, then by content (so a hash collision never merges two rows),
 * training rows before test rows among equals. */
static int cmp_row(const void *a, const void *b)
{
    const rowref_t *x = a, *y = b;
    size_t nx, ny;

    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    nx = x->X->rowptr[x->i + 1] - x->X->rowptr[x->i];
    ny = y->X->rowptr[y->i + 1] - y->X->rowptr[y->i];
    if (nx != ny)
        return nx < ny ? -1 : 1;
    for (size_t k = 0; k < nx; k++) {
        uint32_t cx = x->X->colind[x->X->rowptr[x->i] + k];
        uint32_t cy = y->X->colind[y->X->rowptr[y->i] + k];
        double vx = x->X->val[x->X->rowptr[x->i] + k], vy = y->X->val[y->X->rowptr[y->i] + k];

        if (cx != cy)
            return cx < cy ? -1 : 1;
        if (vx != vy)
            return vx < vy ? -1 : 1;
    }
    return (int)x->test - (int)y->test;
}

static int same_row(const rowref_t *x, const rowref_t *y)
{
    rowref_t a = *x, b = *y;

    a.test = b.test = 0;
    return cmp_row(&a, &b) == 0;
}

void sim_overlap_summary(sfl_dataset_t *const *train, uint32_t ntrain,
                         sfl_dataset_t *const *test, uint32_t ntest)
{
    size_t nref = 0, k = 0, distinct = 0, ntr = 0, nte = 0, leaked = 0;
    rowref_t *ref;

    for (uint32_t c = 0; c < ntrain; c++)
        nref += train[c]->X->nrows;
    ntr = nref;
    for (uint32_t c = 0; test && c < ntest; c++)
        nref += test[c] ? test[c]->X->nrows : 0;
    nte = nref - ntr;
    ref = sim_xcalloc(nref, sizeof(*ref));
    for (uint32_t t = 0; t < 2; t++) {
        sfl_dataset_t *const *parts = t == 0 ? train : test;
        uint32_t n = t == 0 ? ntrain : (test ? ntest : 0);

        for (uint32_t c = 0; c < n; c++) {
            if (parts[c] == NULL)
                continue;
            for (uint32_t i = 0; i < parts[c]->X->nrows; i++)
                ref[k++] = (rowref_t){row_hash(parts[c]->X, i), parts[c]->X, i, t};
        }
    }
    qsort(ref, nref, sizeof(*ref), cmp_row);
    /* Runs of equal rows: a run's training rows come first, so a test row
     * is in training iff its run starts with a training row. */
    for (size_t a = 0, b; a < nref; a = b) {
        for (b = a + 1; b < nref && same_row(&ref[a], &ref[b]); b++)
            ;
        if (ref[a].test == 0) {
            distinct++;
            for (size_t q = a; q < b; q++)
                leaked += ref[q].test;
        }
    }
    fprintf(stderr, "sfl-sim: data: %zu training rows (%zu distinct), %zu test rows, "
            "%zu of them (%.1f%%) also in training\n", ntr, distinct, nte, leaked,
            nte ? 100.0 * (double)leaked / (double)nte : 0.0);
    free(ref);
}

#include "sfl/data/partition.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* Every partitioner first decides an owner per row (NONE = left out) and then
 * builds the partition by a counting sort over owners: scanning rows in
 * order makes each client's rows ascending without a sort. */
#define NONE UINT32_MAX

void sfl_partition_free(sfl_partition_t *p)
{
    if (p == NULL)
        return;
    sfl__free(p->rows);
    sfl__free(p->offset);
    sfl__free(p);
}

static int from_owner(const uint32_t *owner, uint32_t nrows, uint32_t nclients,
                      sfl_partition_t **out)
{
    sfl_partition_t *p = NULL;
    uint32_t total = 0;
    int rc = 0;

    p = sfl__calloc(1, sizeof(*p));
    if (p == NULL)
        return SFL_ENOMEM;
    p->nclients = nclients;
    p->offset = sfl__calloc((size_t)nclients + 1, sizeof(uint32_t));
    if (p->offset == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < nrows; i++) {
        if (owner[i] != NONE) {
            p->offset[owner[i] + 1]++;
            total++;
        }
    }
    p->rows = sfl__mallocarray(total, sizeof(uint32_t));
    if (p->rows == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t c = 0; c < nclients; c++)
        p->offset[c + 1] += p->offset[c];
    /* offset[c] serves as client c's write cursor, then is restored. */
    for (uint32_t i = 0; i < nrows; i++)
        if (owner[i] != NONE)
            p->rows[p->offset[owner[i]]++] = i;
    for (uint32_t c = nclients; c > 0; c--)
        p->offset[c] = p->offset[c - 1];
    p->offset[0] = 0;
    *out = p;
    p = NULL;
out:
    sfl_partition_free(p);
    return rc;
}

int sfl_partition_iid(uint32_t nrows, uint32_t nclients, sfl_rng_t *rng,
                      sfl_partition_t **out)
{
    uint32_t *perm = NULL, *owner = NULL;
    int rc = 0;

    if (out == NULL || rng == NULL)
        return sfl__fail(SFL_EINVAL, "partition_iid: NULL argument");
    *out = NULL;
    if (nclients == 0 || nclients > nrows)
        return sfl__fail(SFL_EINVAL, "partition_iid: %u clients for %u rows (need 1..rows)",
                         nclients, nrows);
    perm = sfl__mallocarray(nrows, sizeof(uint32_t));
    owner = sfl__mallocarray(nrows, sizeof(uint32_t));
    if (perm == NULL || owner == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < nrows; i++)
        perm[i] = i;
    sfl_rng_shuffle(rng, perm, nrows);
    /* Client c gets shuffled positions [c n / N, (c+1) n / N): sizes differ
     * by at most one. */
    for (uint32_t c = 0; c < nclients; c++) {
        uint32_t lo = (uint32_t)((uint64_t)c * nrows / nclients);
        uint32_t hi = (uint32_t)((uint64_t)(c + 1) * nrows / nclients);

        for (uint32_t j = lo; j < hi; j++)
            owner[perm[j]] = c;
    }
    rc = from_owner(owner, nrows, nclients, out);
out:
    sfl__free(owner);
    sfl__free(perm);
    return rc;
}

/* Rows bucketed by group: grouped[start[g] .. start[g+1]) are group g's rows
 * in file order (groups in order). start has ngroups + 1 entries. */
static int sort_groups(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                       uint32_t *start, uint32_t *grouped)
{
    for (uint32_t i = 0; i < nrows; i++)
        if (group[i] >= ngroups)
            return sfl__fail(SFL_EINVAL, "partition: row %u has group %u, not below %u", i,
                             group[i], ngroups);
    /* a stable counting sort: each group's rows in file order */
    memset(start, 0, ((size_t)ngroups + 1) * sizeof(*start));
    for (uint32_t i = 0; i < nrows; i++)
        start[group[i] + 1]++;
    for (uint32_t g = 0; g < ngroups; g++)
        start[g + 1] += start[g];
    for (uint32_t i = 0; i < nrows; i++)
        grouped[start[group[i]]++] = i;
    for (uint32_t g = ngroups; g > 0; g--)
        start[g] = start[g - 1];
    start[0] = 0;
    return 0;
}

/* sort_groups, then each group's rows shuffled with rng. */
static int bucket_groups(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                         sfl_rng_t *rng, uint32_t *start, uint32_t *grouped)
{
    int rc = sort_groups(group, nrows, ngroups, start, grouped);

    if (rc < 0)
        return rc;
    for (uint32_t g = 0; g < ngroups; g++)
        sfl_rng_shuffle(rng, grouped + start[g], start[g + 1] - start[g]);
    return 0;
}

/* Choosing per_client distinct groups for each client in turn, uniformly
 * among the groups with parts left, can dead-end (the last client may find
 * only one group with parts). With C clients still to serve, each needing k
 * distinct groups, and r_g parts left in group g, the rest can be served iff
 * sum_g min(r_g, C) >= C k (max-flow/min-cut; with equal client degrees the
 * whole set of clients is the binding cut). For the C' = C - 1 clients after
 * the current one, taking a part from a "tight" group (r_g <= C') lowers
 * sum_g min(r_g, C') by one, from a "loose" group (r_g > C') not at all.
 * So a client draws
 * uniformly among its still-eligible groups, except that tight groups are
 * excluded once it has used up the slack sum_g min(r_g, C-1) - (C-1) k.
 * That never dead-ends, and when nothing binds (plenty of parts) it is the
 * paper's uniform choice. Unused parts are left out. */
static void assign_groups(uint32_t ngroups, uint32_t nclients, uint32_t nparts,
                          uint32_t per_client, sfl_rng_t *rng, uint32_t *left,
                          uint32_t *chosen)
{
    for (uint32_t g = 0; g < ngroups; g++)
        left[g] = nparts;
    for (uint32_t c = 0; c < nclients; c++) {
        uint64_t after = nclients - c - 1; /* clients after this one */
        uint64_t base = 0;
        uint32_t *mine = chosen + (size_t)c * per_client;

        for (uint32_t g = 0; g < ngroups; g++)
            base += left[g] < after ? left[g] : after;
        /* Feasibility of the remaining problem guarantees base >= after*k. */
        uint64_t slack = base - after * per_client;

        for (uint32_t t = 0; t < per_client; t++) {
            uint32_t ncand = 0, pick = 0;

            /* Candidates: parts left, not yet mine, tight only with slack. */
            for (int pass = 0; pass < 2; pass++) {
                uint32_t seen = 0;

                if (pass == 1) {
                    assert(ncand > 0); /* see the feasibility argument above */
                    pick = (uint32_t)sfl_rng_below(rng, ncand);
                }
                for (uint32_t g = 0; g < ngroups; g++) {
                    int ok = left[g] > 0 && (left[g] > after || slack > 0);

                    for (uint32_t q = 0; ok && q < t; q++)
                        ok = mine[q] != g;
                    if (!ok)
                        continue;
                    if (pass == 0) {
                        ncand++;
                    } else if (seen++ == pick) {
                        mine[t] = g;
                        break;
                    }
                }
            }
            if (left[mine[t]] <= after)
                slack--;
            left[mine[t]]--;
        }
    }
}

int sfl_partition_group_skew(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                             uint32_t nclients, uint32_t nparts, uint32_t per_client,
                             sfl_rng_t *rng, sfl_partition_t **out)
{
    uint32_t *start = NULL, *grouped = NULL, *owner = NULL, *left = NULL, *chosen = NULL;
    int rc = 0;

    if (out == NULL || rng == NULL || (group == NULL && nrows > 0))
        return sfl__fail(SFL_EINVAL, "partition_group_skew: NULL argument");
    *out = NULL;
    if (nclients == 0 || ngroups == 0 || nparts == 0 || per_client == 0)
        return sfl__fail(SFL_EINVAL,
                         "partition_group_skew: nclients=%u ngroups=%u nparts=%u "
                         "per_client=%u must all be > 0",
                         nclients, ngroups, nparts, per_client);
    if (per_client > ngroups)
        return sfl__fail(SFL_EINVAL,
                         "partition_group_skew: per_client=%u distinct groups of only %u",
                         per_client, ngroups);
    if ((uint64_t)nclients * per_client > (uint64_t)ngroups * nparts)
        return sfl__fail(SFL_EINVAL,
                         "partition_group_skew: %u clients x %u parts need more than the "
                         "%u groups x %u parts",
                         nclients, per_client, ngroups, nparts);

    start = sfl__mallocarray((size_t)ngroups + 1, sizeof(uint32_t));
    grouped = sfl__mallocarray(nrows, sizeof(uint32_t));
    owner = sfl__mallocarray(nrows, sizeof(uint32_t));
    left = sfl__mallocarray(ngroups, sizeof(uint32_t));
    chosen = sfl__mallocarray((size_t)nclients * per_client, sizeof(uint32_t));
    if (start == NULL || grouped == NULL || owner == NULL || left == NULL || chosen == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    rc = bucket_groups(group, nrows, ngroups, rng, start, grouped);
    if (rc < 0)
        goto out;
    assign_groups(ngroups, nclients, nparts, per_client, rng, left, chosen);

    for (uint32_t i = 0; i < nrows; i++)
        owner[i] = NONE;
    /* Parts of a group go out in order; the group was shuffled, so part q is
     * a random equal-size (+-1) slice. left[] is reused as the next part. */
    for (uint32_t g = 0; g < ngroups; g++)
        left[g] = 0;
    for (uint32_t c = 0; c < nclients; c++) {
        for (uint32_t t = 0; t < per_client; t++) {
            uint32_t g = chosen[(size_t)c * per_client + t];
            uint64_t cnt = start[g + 1] - start[g];
            uint32_t q = left[g]++;
            uint32_t lo = start[g] + (uint32_t)(q * cnt / nparts);
            uint32_t hi = start[g] + (uint32_t)((q + 1) * cnt / nparts);

            for (uint32_t j = lo; j < hi; j++)
                owner[grouped[j]] = c;
        }
    }
    rc = from_owner(owner, nrows, nclients, out);
out:
    sfl__free(chosen);
    sfl__free(left);
    sfl__free(owner);
    sfl__free(grouped);
    sfl__free(start);
    return rc;
}

/* log of a Gamma(alpha, 1) draw. For alpha < 1 the boost
 * G(alpha) = G(alpha + 1) U^(1/alpha) is taken in logs: with a tiny alpha,
 * U^(1/alpha) underflows to 0 for every client and the proportions would be
 * 0/0; in logs the largest one still wins, as Dir(alpha -> 0) should. */
static double log_gamma_draw(sfl_rng_t *rng, double alpha)
{
    if (alpha < 1.0)
        return log(sfl_rng_gamma(rng, alpha + 1.0)) + log(sfl_rng_uniform(rng)) / alpha;
    return log(sfl_rng_gamma(rng, alpha));
}

int sfl_partition_dirichlet(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                            uint32_t nclients, double alpha, sfl_rng_t *rng,
                            sfl_partition_t **out)
{
    uint32_t *start = NULL, *grouped = NULL, *owner = NULL;
    double *prop = NULL;
    int rc = 0;

    if (out == NULL || rng == NULL || (group == NULL && nrows > 0))
        return sfl__fail(SFL_EINVAL, "partition_dirichlet: NULL argument");
    *out = NULL;
    if (nclients == 0 || ngroups == 0)
        return sfl__fail(SFL_EINVAL, "partition_dirichlet: nclients=%u ngroups=%u must be > 0",
                         nclients, ngroups);
    if (!(alpha > 0.0) || isinf(alpha))
        return sfl__fail(SFL_EINVAL, "partition_dirichlet: alpha=%g must be finite and > 0",
                         alpha);

    start = sfl__mallocarray((size_t)ngroups + 1, sizeof(uint32_t));
    grouped = sfl__mallocarray(nrows, sizeof(uint32_t));
    owner = sfl__mallocarray(nrows, sizeof(uint32_t));
    prop = sfl__mallocarray(nclients, sizeof(double));
    if (start == NULL || grouped == NULL || owner == NULL || prop == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    rc = bucket_groups(group, nrows, ngroups, rng, start, grouped);
    if (rc < 0)
        goto out;
    for (uint32_t g = 0; g < ngroups; g++) {
        uint32_t cnt = start[g + 1] - start[g];
        double mx = -INFINITY, sum = 0.0, cum = 0.0;
        uint32_t lo = 0;

        /* Dir(alpha) = normalized Gamma(alpha) draws, normalized in logs
         * (subtracting the max) so nothing underflows to 0/0. */
        for (uint32_t c = 0; c < nclients; c++) {
            prop[c] = log_gamma_draw(rng, alpha);
            if (prop[c] > mx)
                mx = prop[c];
        }
        for (uint32_t c = 0; c < nclients; c++) {
            prop[c] = exp(prop[c] - mx);
            sum += prop[c];
        }
        /* Cut at rounded cumulative proportions; the last cut is exactly cnt
         * so every row of the class is assigned. */
        for (uint32_t c = 0; c < nclients; c++) {
            uint32_t hi;

            cum += prop[c];
            hi = c + 1 == nclients ? cnt : (uint32_t)fmin(floor(cnt * (cum / sum) + 0.5), cnt);
            if (hi < lo)
                hi = lo;
            for (uint32_t j = lo; j < hi; j++)
                owner[grouped[start[g] + j]] = c;
            lo = hi;
        }
    }
    rc = from_owner(owner, nrows, nclients, out);
out:
    sfl__free(prop);
    sfl__free(owner);
    sfl__free(grouped);
    sfl__free(start);
    return rc;
}

/* ---- k-means ---------------------------------------------------------- */

/* ||z_i - c||^2 = ||z_i||^2 - 2 z_i.c + ||c||^2, touching only the row's
 * nonzeros; clamped at 0 against cancellation. */
static double sq_dist(const sfl_csr_t *X, uint32_t i, double rnorm, const double *c,
                      double cnorm)
{
    double dot = 0.0;

    for (size_t k = X->rowptr[i]; k < X->rowptr[i + 1]; k++)
        dot += X->val[k] * c[X->colind[k]];
    double d = rnorm - 2.0 * dot + cnorm;

    return d > 0.0 ? d : 0.0;
}

static double norm2(const double *a, size_t n)
{
    double s = 0.0;

    for (size_t j = 0; j < n; j++)
        s += a[j] * a[j];
    return s;
}

/* c = row i of X, dense. */
static void set_row(const sfl_csr_t *X, uint32_t i, double *c)
{
    memset(c, 0, (size_t)X->ncols * sizeof(*c));
    for (size_t k = X->rowptr[i]; k < X->rowptr[i + 1]; k++)
        c[X->colind[k]] = X->val[k];
}

/* k-means++: the first centre uniform, each next one drawn with probability
 * proportional to D^2, the squared distance to the nearest centre so far. */
static void seed_plusplus(const sfl_csr_t *X, uint32_t k, sfl_rng_t *rng, const double *rnorm,
                          double *cent, double *cnorm, double *dist)
{
    uint32_t n = X->nrows;
    size_t d = X->ncols;
    uint32_t pick = (uint32_t)sfl_rng_below(rng, n);

    for (uint32_t c = 0;; c++) {
        double *cc = cent + (size_t)c * d;
        double total = 0.0;

        set_row(X, pick, cc);
        cnorm[c] = norm2(cc, d);
        for (uint32_t i = 0; i < n; i++) {
            double di = sq_dist(X, i, rnorm[i], cc, cnorm[c]);

            if (c == 0 || di < dist[i])
                dist[i] = di;
            total += dist[i];
        }
        if (c + 1 == k)
            break;
        if (total > 0.0) {
            double target = sfl_rng_uniform(rng) * total, acc = 0.0;

            /* Rounding can leave target above the final sum: fall back to the
             * last row with positive weight. */
            pick = NONE;
            for (uint32_t i = 0; i < n; i++) {
                if (dist[i] <= 0.0)
                    continue;
                pick = i;
                acc += dist[i];
                if (acc > target)
                    break;
            }
        } else {
            /* Every row coincides with a centre (duplicate rows): any row. */
            pick = (uint32_t)sfl_rng_below(rng, n);
        }
    }
}

int sfl_kmeans(const sfl_csr_t *X, uint32_t k, uint32_t max_iter, sfl_rng_t *rng,
               uint32_t *cluster)
{
    double *cent = NULL, *cnorm = NULL, *rnorm = NULL, *dist = NULL;
    uint32_t *count = NULL;
    size_t d;
    uint32_t n;
    int rc = 0;

    if (X == NULL || rng == NULL || cluster == NULL)
        return sfl__fail(SFL_EINVAL, "kmeans: NULL argument");
    n = X->nrows;
    d = X->ncols;
    if (k == 0 || k > n)
        return sfl__fail(SFL_EINVAL, "kmeans: k=%u must be in 1..rows (%u)", k, n);

    cent = sfl__mallocarray((size_t)k * d, sizeof(double));
    cnorm = sfl__mallocarray(k, sizeof(double));
    count = sfl__mallocarray(k, sizeof(uint32_t));
    rnorm = sfl__mallocarray(n, sizeof(double));
    dist = sfl__mallocarray(n, sizeof(double));
    if ((cent == NULL && d > 0) || cnorm == NULL || count == NULL || rnorm == NULL ||
        dist == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        double s = 0.0;

        for (size_t q = X->rowptr[i]; q < X->rowptr[i + 1]; q++)
            s += X->val[q] * X->val[q];
        rnorm[i] = s;
        cluster[i] = NONE;
    }
    seed_plusplus(X, k, rng, rnorm, cent, cnorm, dist);

    /* Lloyd: assign (ties -> lowest cluster id), stop when nothing moved or
     * after max_iter centroid updates; the last assignment always matches the
     * centroids it was computed from. */
    for (uint32_t iter = 0;; iter++) {
        uint32_t moved = 0;

        for (uint32_t i = 0; i < n; i++) {
            uint32_t best = 0;
            double bd = INFINITY;

            for (uint32_t c = 0; c < k; c++) {
                double di = sq_dist(X, i, rnorm[i], cent + (size_t)c * d, cnorm[c]);

                if (di < bd) {
                    bd = di;
                    best = c;
                }
            }
            dist[i] = bd;
            if (cluster[i] != best) {
                cluster[i] = best;
                moved++;
            }
        }
        if (moved == 0 || iter == max_iter)
            break;

        memset(cent, 0, (size_t)k * d * sizeof(*cent));
        memset(count, 0, (size_t)k * sizeof(*count));
        for (uint32_t i = 0; i < n; i++) {
            double *cc = cent + (size_t)cluster[i] * d;

            count[cluster[i]]++;
            for (size_t q = X->rowptr[i]; q < X->rowptr[i + 1]; q++)
                cc[X->colind[q]] += X->val[q];
        }
        for (uint32_t c = 0; c < k; c++) {
            double *cc = cent + (size_t)c * d;

            if (count[c] > 0) {
                for (size_t j = 0; j < d; j++)
                    cc[j] /= count[c];
            } else {
                /* Empty cluster: restart it at the row farthest from its own
                 * centre (lowest id on ties); zeroing that distance keeps a
                 * second empty cluster from taking the same row. */
                uint32_t far = 0;

                for (uint32_t i = 1; i < n; i++)
                    if (dist[i] > dist[far])
                        far = i;
                set_row(X, far, cc);
                dist[far] = 0.0;
            }
            cnorm[c] = norm2(cc, d);
        }
    }
out:
    sfl__free(dist);
    sfl__free(rnorm);
    sfl__free(count);
    sfl__free(cnorm);
    sfl__free(cent);
    return rc;
}

/* ---- pFedMe's label split --------------------------------------------- */

int sfl_partition_labels(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                         uint32_t nclients, uint32_t per_client, uint32_t min_rows,
                         double sigma, sfl_rng_t *rng, sfl_partition_t **out)
{
    uint32_t *start = NULL, *grouped = NULL, *owner = NULL, *holder = NULL;
    double *w = NULL;
    int rc = 0;

    if (out == NULL || rng == NULL || (group == NULL && nrows > 0))
        return sfl__fail(SFL_EINVAL, "partition_labels: NULL argument");
    *out = NULL;
    if (nclients == 0 || ngroups == 0 || per_client == 0 || per_client > ngroups)
        return sfl__fail(SFL_EINVAL, "partition_labels: nclients=%u ngroups=%u per_client=%u "
                         "need 0 < per_client <= ngroups and nclients > 0",
                         nclients, ngroups, per_client);
    if (!(sigma >= 0.0) || isinf(sigma))
        return sfl__fail(SFL_EINVAL, "partition_labels: sigma=%g must be finite and >= 0",
                         sigma);
    start = sfl__mallocarray((size_t)ngroups + 1, sizeof(uint32_t));
    grouped = sfl__mallocarray(nrows, sizeof(uint32_t));
    owner = sfl__mallocarray(nrows, sizeof(uint32_t));
    holder = sfl__mallocarray(nclients, sizeof(uint32_t));
    w = sfl__mallocarray(nclients, sizeof(double));
    if (start == NULL || grouped == NULL || owner == NULL || holder == NULL || w == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if ((rc = bucket_groups(group, nrows, ngroups, rng, start, grouped)) < 0)
        goto out;
    for (uint32_t i = 0; i < nrows; i++)
        owner[i] = NONE;
    for (uint32_t g = 0; g < ngroups; g++) {
        uint32_t cnt = start[g + 1] - start[g], nh = 0, lo = 0;
        double sum = 0.0, cum = 0.0;

        /* Client c holds groups c, c+1, ..., c+per_client-1 (mod ngroups). */
        for (uint32_t c = 0; c < nclients; c++)
            if ((g + ngroups - c % ngroups) % ngroups < per_client)
                holder[nh++] = c;
        if (nh == 0)
            continue; /* nobody holds this group: its rows are left out */
        for (uint32_t h = 0; h < nh; h++) {
            w[h] = exp(sigma * sfl_rng_gauss(rng, 0.0, 1.0));
            sum += w[h];
        }
        /* min_rows each first (as far as the group has rows), then the rest
         * at the cumulative lognormal proportions; the last cut is cnt. */
        uint32_t base = (uint64_t)min_rows * nh <= cnt ? min_rows : cnt / nh;
        uint32_t rest = cnt - base * nh;
        for (uint32_t h = 0; h < nh; h++) {
            uint32_t share, hi;

            cum += w[h];
            share = h + 1 == nh ? rest : (uint32_t)fmin(floor(rest * (cum / sum) + 0.5), rest);
            hi = base * (h + 1) + share;
            if (hi < lo)
                hi = lo;
            for (uint32_t j = lo; j < hi; j++)
                owner[grouped[start[g] + j]] = holder[h];
            lo = hi;
        }
    }
    rc = from_owner(owner, nrows, nclients, out);
out:
    sfl__free(w);
    sfl__free(holder);
    sfl__free(owner);
    sfl__free(grouped);
    sfl__free(start);
    return rc;
}

/* ---- pFedMe's 2020 generator, replayed -------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* The script's ram_dom_gen(total, h): h - 1 draws of numpy's
 * randint(total // (h + 1), total // 2) (high exclusive), each taken off
 * total, then what is left. numpy would raise on an empty range; we take
 * the low end there (only tiny groups get there). */
static void pfedme2020_sizes(uint32_t total, uint32_t h, sfl_rng_t *rng, uint32_t *size)
{
    for (uint32_t i = 0; i + 1 < h; i++) {
        uint32_t lo = total / (h + 1), hi = total / 2;
        uint32_t v = hi > lo ? lo + (uint32_t)sfl_rng_below(rng, hi - lo) : lo;

        size[i] = v;
        total -= v;
    }
    size[h - 1] = total;
}

int sfl_partition_pfedme2020(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                             uint32_t nclients, uint32_t per_client, sfl_rng_t *rng,
                             sfl_partition_t **out)
{
    uint32_t *start = NULL, *grouped = NULL, *holders = NULL, *draws = NULL, *flat = NULL;
    uint32_t *seg_lo = NULL, *seg_hi = NULL;
    unsigned char *used = NULL;
    sfl_partition_t *p = NULL;
    size_t nslots, total = 0;
    uint32_t maxh = 0;
    int rc = 0;

    if (out == NULL || rng == NULL || (group == NULL && nrows > 0))
        return sfl__fail(SFL_EINVAL, "partition_pfedme2020: NULL argument");
    *out = NULL;
    if (nclients == 0 || ngroups == 0 || per_client == 0 || per_client > ngroups)
        return sfl__fail(SFL_EINVAL, "partition_pfedme2020: nclients=%u ngroups=%u "
                         "per_client=%u need 0 < per_client <= ngroups and nclients > 0",
                         nclients, ngroups, per_client);
    nslots = (size_t)nclients * per_client;
    start = sfl__calloc((size_t)ngroups + 1, sizeof(uint32_t));
    grouped = sfl__mallocarray(nrows, sizeof(uint32_t));
    holders = sfl__calloc(ngroups, sizeof(uint32_t));
    used = sfl__calloc(ngroups, 1);
    flat = sfl__mallocarray(nslots, sizeof(uint32_t));
    seg_lo = sfl__mallocarray(nslots, sizeof(uint32_t));
    seg_hi = sfl__mallocarray(nslots, sizeof(uint32_t));
    p = sfl__calloc(1, sizeof(*p));
    if (start == NULL || (grouped == NULL && nrows > 0) || holders == NULL || used == NULL ||
        flat == NULL || seg_lo == NULL || seg_hi == NULL || p == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    /* Each group's rows in file order (the script never shuffles before
     * slicing). */
    if ((rc = sort_groups(group, nrows, ngroups, start, grouped)) < 0)
        goto out;

    /* Holders per group, the sizes each group's draws give, and the draws
     * read out holder-major: draw 0 of groups 0..G-1, then draw 1, ... */
    for (size_t s = 0; s < nslots; s++)
        holders[(s / per_client + s % per_client) % ngroups]++;
    for (uint32_t g = 0; g < ngroups; g++)
        maxh = holders[g] > maxh ? holders[g] : maxh;
    draws = sfl__mallocarray((size_t)ngroups * maxh, sizeof(uint32_t));
    if (draws == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t g = 0; g < ngroups; g++)
        if (holders[g] > 0)
            pfedme2020_sizes(start[g + 1] - start[g], holders[g], rng,
                             draws + (size_t)g * maxh);
    {
        size_t k = 0;

        for (uint32_t i = 0; i < maxh; i++)
            for (uint32_t g = 0; g < ngroups; g++)
                if (i < holders[g])
                    flat[k++] = draws[(size_t)g * maxh + i];
    }

    /* Slot (c, j) takes group (c + j) mod G's rows [first, n) in file
     * order, first being the mask's 0/1 as the comment in the header says. */
    for (size_t s = 0; s < nslots; s++) {
        uint32_t g = (uint32_t)((s / per_client + s % per_client) % ngroups);
        uint32_t cnt = start[g + 1] - start[g], n = flat[s];
        uint32_t first = used[g] ? 1 : (g < nrows && group[g] == ngroups - 1);

        seg_lo[s] = seg_hi[s] = 0;
        if ((uint64_t)first + n >= cnt)
            continue; /* the script's `if idx[l] + num_samples < len(...)` */
        used[g] = 1;
        if (n > first) {
            seg_lo[s] = start[g] + first;
            seg_hi[s] = start[g] + n;
            total += n - first;
        }
    }
    if (total > UINT32_MAX) {
        rc = sfl__fail(SFL_ELIMIT, "partition_pfedme2020: %zu rows in all", total);
        goto out;
    }
    p->nclients = nclients;
    p->offset = sfl__calloc((size_t)nclients + 1, sizeof(uint32_t));
    p->rows = sfl__mallocarray(total, sizeof(uint32_t));
    if (p->offset == NULL || (p->rows == NULL && total > 0)) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t c = 0, k = 0; c < nclients; c++) {
        for (uint32_t j = 0; j < per_client; j++) {
            size_t s = (size_t)c * per_client + j;

            for (uint32_t q = seg_lo[s]; q < seg_hi[s]; q++)
                p->rows[k++] = grouped[q];
        }
        /* distinct groups, so no row twice within a client */
        qsort(p->rows + p->offset[c], k - p->offset[c], sizeof(uint32_t), cmp_u32);
        p->offset[c + 1] = k;
    }
    *out = p;
    p = NULL;
out:
    sfl_partition_free(p);
    sfl__free(used);
    sfl__free(seg_hi);
    sfl__free(seg_lo);
    sfl__free(flat);
    sfl__free(draws);
    sfl__free(holders);
    sfl__free(grouped);
    sfl__free(start);
    return rc;
}

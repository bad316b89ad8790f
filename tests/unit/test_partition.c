#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/partition.h"
#include "sfl/core/rng.h"

/* Offsets monotone, rows in range, ascending per client, each row at most
 * once; returns how many rows are assigned and fills owner (UINT32_MAX = none). */
static uint32_t check_partition(const sfl_partition_t *p, uint32_t nrows, uint32_t *owner)
{
    assert_int_equal(p->offset[0], 0);
    for (uint32_t i = 0; i < nrows; i++)
        owner[i] = UINT32_MAX;
    for (uint32_t c = 0; c < p->nclients; c++) {
        assert_true(p->offset[c + 1] >= p->offset[c]);
        for (uint32_t k = p->offset[c]; k < p->offset[c + 1]; k++) {
            uint32_t r = p->rows[k];

            assert_true(r < nrows);
            if (k > p->offset[c])
                assert_true(r > p->rows[k - 1]);
            assert_int_equal(owner[r], UINT32_MAX);
            owner[r] = c;
        }
    }
    return p->offset[p->nclients];
}

static void test_partition_iid(void **state)
{
    (void)state;
    sfl_rng_t r;
    sfl_partition_t *p = NULL, *q = NULL;
    uint32_t owner[103];

    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_iid(103, 10, &r, &p), 0);
    assert_int_equal(p->nclients, 10);
    assert_int_equal(check_partition(p, 103, owner), 103);
    for (uint32_t c = 0; c < 10; c++) {
        uint32_t sz = p->offset[c + 1] - p->offset[c];
        assert_true(sz == 10 || sz == 11);
    }
    /* Shuffled, not blocks: client 0 is not rows 0..9. */
    assert_true(p->rows[p->offset[1] - 1] > 10);
    /* Same rng state, same partition. */
    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_iid(103, 10, &r, &q), 0);
    assert_memory_equal(p->rows, q->rows, 103 * sizeof(uint32_t));
    sfl_partition_free(q);
    sfl_partition_free(p);
    /* One row per client. */
    assert_int_equal(sfl_partition_iid(5, 5, &r, &p), 0);
    assert_int_equal(check_partition(p, 5, owner), 5);
    sfl_partition_free(p);
    sfl_partition_free(NULL);
}

static void test_partition_iid_bad_args(void **state)
{
    (void)state;
    sfl_rng_t r;
    sfl_partition_t *p = NULL;

    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_iid(10, 0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_iid(10, 11, &r, &p), SFL_EINVAL);
    assert_true(strlen(sfl_last_error()) > 0);
    assert_int_equal(sfl_partition_iid(0, 1, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_iid(10, 2, NULL, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_iid(10, 2, &r, NULL), SFL_EINVAL);
    assert_null(p);
}

/* Group ids with unequal group sizes: row i in group (i * 7 + i / 13) % g. */
static void make_groups(uint32_t *group, uint32_t n, uint32_t g)
{
    for (uint32_t i = 0; i < n; i++)
        group[i] = (i * 7 + i / 13) % g;
}

/* Each client holds exactly per_client distinct groups, one part of each,
 * with the part size floor or ceil of the group size over nparts; no group
 * gives out more than nparts parts. */
static void check_group_skew(const sfl_partition_t *p, const uint32_t *group, uint32_t nrows,
                             uint32_t ngroups, uint32_t nparts, uint32_t per_client)
{
    uint32_t *owner = malloc(nrows * sizeof(uint32_t));
    uint32_t *gsize = calloc(ngroups, sizeof(uint32_t));
    uint32_t *used = calloc(ngroups, sizeof(uint32_t));
    uint32_t *cnt = calloc(ngroups, sizeof(uint32_t));

    assert_true(owner && gsize && used && cnt);
    check_partition(p, nrows, owner);
    for (uint32_t i = 0; i < nrows; i++)
        gsize[group[i]]++;
    for (uint32_t c = 0; c < p->nclients; c++) {
        uint32_t ng = 0;

        memset(cnt, 0, ngroups * sizeof(uint32_t));
        for (uint32_t k = p->offset[c]; k < p->offset[c + 1]; k++)
            cnt[group[p->rows[k]]]++;
        for (uint32_t g = 0; g < ngroups; g++) {
            uint32_t lo = gsize[g] / nparts, hi = (gsize[g] + nparts - 1) / nparts;

            if (cnt[g] == 0 && lo > 0)
                continue; /* not one of this client's groups */
            if (cnt[g] == 0)
                continue; /* an empty part cannot be seen; counted below */
            assert_true(cnt[g] >= lo && cnt[g] <= hi);
            ng++;
            used[g]++;
        }
        /* Groups smaller than nparts give empty parts, invisible here. */
        assert_true(ng <= per_client);
        if (nrows >= (uint64_t)ngroups * nparts)
            assert_int_equal(ng, per_client);
    }
    for (uint32_t g = 0; g < ngroups; g++)
        assert_true(used[g] <= nparts);
    free(cnt);
    free(used);
    free(gsize);
    free(owner);
}

static void test_partition_group_skew(void **state)
{
    (void)state;
    enum { N = 3000, G = 10 };
    uint32_t group[N], owner[N];
    sfl_rng_t r;
    sfl_partition_t *p = NULL;

    make_groups(group, N, G);
    /* The paper's setup: 20 parts per cluster, 2 clusters per client. */
    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_group_skew(group, N, G, 100, 20, 2, &r, &p), 0);
    check_group_skew(p, group, N, G, 20, 2);
    assert_int_equal(check_partition(p, N, owner), N); /* demand == supply */
    sfl_partition_free(p);

    /* Fewer clients than parts: unused parts are left out. */
    assert_int_equal(sfl_partition_group_skew(group, N, G, 7, 20, 3, &r, &p), 0);
    check_group_skew(p, group, N, G, 20, 3);
    uint32_t got = check_partition(p, N, owner), gs[G] = {0}, lo = N, hi = 0;
    for (uint32_t i = 0; i < N; i++)
        gs[group[i]]++;
    for (uint32_t g = 0; g < G; g++) {
        lo = gs[g] / 20 < lo ? gs[g] / 20 : lo;
        hi = (gs[g] + 19) / 20 > hi ? (gs[g] + 19) / 20 : hi;
    }
    assert_true(got >= 7 * 3 * lo && got <= 7 * 3 * hi);
    sfl_partition_free(p);
}

/* Tight configurations where a plain random choice dead-ends often: every
 * part must be used and each client needs many distinct groups. */
static void test_partition_group_skew_never_dead_ends(void **state)
{
    (void)state;
    enum { N = 600 };
    uint32_t group[N], owner[N];
    sfl_rng_t r;
    struct {
        uint32_t ngroups, nparts, nclients, per_client;
    } cfg[] = {{3, 2, 2, 3}, {4, 5, 10, 2}, {5, 3, 5, 3}, {6, 4, 8, 3},
               {10, 20, 100, 2}, {7, 3, 7, 3}, {4, 6, 6, 4}, {12, 2, 4, 6}};

    for (size_t k = 0; k < sizeof(cfg) / sizeof(cfg[0]); k++) {
        uint32_t G = cfg[k].ngroups;

        make_groups(group, N, G);
        for (uint64_t seed = 0; seed < 50; seed++) {
            sfl_partition_t *p = NULL;

            sfl_rng_seed(&r, seed, 0, 0, SFL_STREAM_PARTITION);
            assert_int_equal(sfl_partition_group_skew(group, N, G, cfg[k].nclients,
                                                      cfg[k].nparts, cfg[k].per_client, &r, &p),
                             0);
            check_group_skew(p, group, N, G, cfg[k].nparts, cfg[k].per_client);
            if ((uint64_t)cfg[k].nclients * cfg[k].per_client == (uint64_t)G * cfg[k].nparts)
                assert_int_equal(check_partition(p, N, owner), N);
            sfl_partition_free(p);
        }
    }
}

static void test_partition_group_skew_bad_args(void **state)
{
    (void)state;
    uint32_t group[20];
    sfl_rng_t r;
    sfl_partition_t *p = NULL;

    make_groups(group, 20, 4);
    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_PARTITION);
    /* demand > supply, per_client > ngroups, zeros */
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 5, 2, 2, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 1, 10, 5, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 0, 2, 1, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(group, 20, 0, 1, 2, 1, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 1, 0, 1, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 1, 2, 0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_group_skew(NULL, 20, 4, 1, 2, 1, &r, &p), SFL_EINVAL);
    /* a group id out of range */
    group[17] = 4;
    sfl__clear_error();
    assert_int_equal(sfl_partition_group_skew(group, 20, 4, 2, 2, 2, &r, &p), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "row 17"));
    assert_int_equal(sfl_partition_dirichlet(group, 20, 4, 2, 1.0, &r, &p), SFL_EINVAL);
    assert_null(p);
}

static void test_partition_dirichlet(void **state)
{
    (void)state;
    enum { N = 5000, G = 5, C = 10 };
    uint32_t group[N], owner[N], cnt[C][G];
    sfl_rng_t r;
    sfl_partition_t *p = NULL;

    for (uint32_t i = 0; i < N; i++)
        group[i] = i % G; /* 1000 rows per class */
    sfl_rng_seed(&r, 9, 0, 0, SFL_STREAM_PARTITION);

    /* alpha huge: every client gets about 1/C of every class. */
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, 1e7, &r, &p), 0);
    assert_int_equal(check_partition(p, N, owner), N);
    memset(cnt, 0, sizeof(cnt));
    for (uint32_t i = 0; i < N; i++)
        cnt[owner[i]][group[i]]++;
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t g = 0; g < G; g++)
            assert_true(cnt[c][g] >= 98 && cnt[c][g] <= 102);
    sfl_partition_free(p);

    /* alpha tiny: each class lands (almost) entirely on one client (the
     * runner-up's share is about e^(-gap/alpha) for an Exp gap). */
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, 1e-4, &r, &p), 0);
    assert_int_equal(check_partition(p, N, owner), N);
    memset(cnt, 0, sizeof(cnt));
    for (uint32_t i = 0; i < N; i++)
        cnt[owner[i]][group[i]]++;
    for (uint32_t g = 0; g < G; g++) {
        uint32_t mx = 0;

        for (uint32_t c = 0; c < C; c++)
            mx = cnt[c][g] > mx ? cnt[c][g] : mx;
        assert_true(mx >= 990);
    }
    sfl_partition_free(p);

    /* bad alpha */
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, 0.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, -1.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, NAN, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_dirichlet(group, N, G, C, INFINITY, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_dirichlet(group, N, G, 0, 1.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_dirichlet(group, N, 0, C, 1.0, &r, &p), SFL_EINVAL);
    assert_null(p);
}

/* pFedMe's split: client c holds labels c, c+1 (mod G), every row of a
 * held label is assigned, at least min_rows per held label, sizes differ. */
static void test_partition_labels(void **state)
{
    (void)state;
    enum { N = 6000, G = 10, C = 20 };
    uint32_t *group = malloc(N * sizeof(uint32_t)), *owner = malloc(N * sizeof(uint32_t));
    uint32_t cnt[C][G], size[C];
    sfl_rng_t r;
    sfl_partition_t *p = NULL, *q = NULL;

    for (uint32_t i = 0; i < N; i++)
        group[i] = (i * 7) % G; /* 600 rows per label */
    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, 1.0, &r, &p), 0);
    assert_int_equal(check_partition(p, N, owner), N); /* every label has holders */
    memset(cnt, 0, sizeof(cnt));
    memset(size, 0, sizeof(size));
    for (uint32_t i = 0; i < N; i++) {
        cnt[owner[i]][group[i]]++;
        size[owner[i]]++;
    }
    uint32_t lo = N, hi = 0;
    for (uint32_t c = 0; c < C; c++) {
        for (uint32_t g = 0; g < G; g++) {
            int held = g == c % G || g == (c + 1) % G;

            if (held)
                assert_true(cnt[c][g] >= 10);
            else
                assert_int_equal(cnt[c][g], 0);
        }
        lo = size[c] < lo ? size[c] : lo;
        hi = size[c] > hi ? size[c] : hi;
    }
    assert_true(hi > 2 * lo); /* lognormal sizes: clients differ */
    /* same rng state, same split; sigma 0: equal shares (+-1 per label) */
    sfl_rng_seed(&r, 5, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, 1.0, &r, &q), 0);
    assert_memory_equal(p->rows, q->rows, N * sizeof(uint32_t));
    sfl_partition_free(q);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, 0.0, &r, &q), 0);
    assert_int_equal(check_partition(q, N, owner), N);
    for (uint32_t c = 0; c < C; c++)
        assert_true(q->offset[c + 1] - q->offset[c] >= 299 &&
                    q->offset[c + 1] - q->offset[c] <= 301);
    sfl_partition_free(q);
    sfl_partition_free(p);
    /* a label smaller than min_rows x holders: equal shares, all assigned */
    sfl_rng_seed(&r, 6, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_labels(group, 30, G, C, 2, 10, 1.0, &r, &p), 0);
    assert_int_equal(check_partition(p, 30, owner), 30);
    sfl_partition_free(p);
    /* fewer clients than labels: unheld labels' rows are left out */
    assert_int_equal(sfl_partition_labels(group, N, G, 3, 2, 10, 1.0, &r, &p), 0);
    assert_int_equal(check_partition(p, N, owner), 4 * 600);
    sfl_partition_free(p);
    p = NULL;
    assert_int_equal(sfl_partition_labels(group, N, G, C, 11, 10, 1.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 0, 10, 1.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_labels(group, N, G, 0, 2, 10, 1.0, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, NAN, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, -1, &r, &p), SFL_EINVAL);
    group[7] = G; /* a row whose label is out of range */
    assert_int_equal(sfl_partition_labels(group, N, G, C, 2, 10, 1.0, &r, &p), SFL_EINVAL);
    assert_null(p);
    free(group);
    free(owner);
}

/* pFedMe's 2020 replay: client c holds labels c, c+1 (mod G) as a prefix of
 * each label's rows in file order, starting at 0 for a label's first holder
 * (1 if the mask says so) and at 1 after, so clients sharing a label hold
 * the same rows: many more rows than distinct ones. */
static void test_partition_pfedme2020_overlaps(void **state)
{
    (void)state;
    enum { N = 6000, G = 10, C = 20 };
    uint32_t *group = malloc(N * sizeof(uint32_t)), *pos = malloc(N * sizeof(uint32_t));
    uint32_t *times = calloc(N, sizeof(uint32_t)), seen[G] = {0};
    sfl_rng_t r;
    sfl_partition_t *p = NULL, *q = NULL;
    uint32_t distinct = 0, shared = 0;

    for (uint32_t i = 0; i < N; i++) {
        group[i] = (i * 7) % G; /* 600 rows per label; row 7 has label 9 */
        pos[i] = seen[group[i]]++; /* position within its label, file order */
    }
    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_pfedme2020(group, N, G, C, 2, &r, &p), 0);
    assert_int_equal(p->nclients, C);
    memset(seen, 0, sizeof(seen)); /* now: holders of each label met so far */
    for (uint32_t c = 0; c < C; c++) {
        uint32_t lo[G], hi[G], n[G] = {0};

        assert_true(p->offset[c + 1] >= p->offset[c]);
        for (uint32_t k = p->offset[c]; k < p->offset[c + 1]; k++) {
            uint32_t i = p->rows[k], g = group[i];

            assert_true(i < N);
            if (k > p->offset[c])
                assert_true(i > p->rows[k - 1]); /* ascending, never twice */
            assert_true(g == c % G || g == (c + 1) % G);
            if (n[g]++ == 0)
                lo[g] = pos[i];
            hi[g] = pos[i] + 1;
            times[i]++;
        }
        for (uint32_t j = 0; j < 2; j++) {
            uint32_t g = (c + j) % G;

            if (n[g] == 0)
                continue;
            assert_int_equal(hi[g] - lo[g], n[g]); /* one contiguous slice */
            /* the boolean mask: 0 for a label's first holder (1 for label 7,
             * whose position 7 holds the last label), 1 afterwards */
            assert_int_equal(lo[g], seen[g]++ > 0 ? 1 : g == 7);
            /* clients 0..4 get the groups' first draws, randint(600 / 5, 600 / 2) */
            if (c < 5)
                assert_true(hi[g] >= 120 && hi[g] < 300);
        }
    }
    for (uint32_t i = 0; i < N; i++) {
        distinct += times[i] > 0;
        shared += times[i] > 1;
    }
    assert_true(p->offset[C] > distinct + 1000); /* overlapping copies */
    assert_true(shared > 1000);
    /* same rng state, same split */
    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_partition_pfedme2020(group, N, G, C, 2, &r, &q), 0);
    assert_int_equal(q->offset[C], p->offset[C]);
    assert_memory_equal(p->rows, q->rows, p->offset[C] * sizeof(uint32_t));
    sfl_partition_free(q);
    sfl_partition_free(p);
    p = NULL;
    assert_int_equal(sfl_partition_pfedme2020(group, N, G, C, 11, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_pfedme2020(group, N, G, 0, 2, &r, &p), SFL_EINVAL);
    assert_int_equal(sfl_partition_pfedme2020(NULL, N, G, C, 2, &r, &p), SFL_EINVAL);
    group[5] = G;
    assert_int_equal(sfl_partition_pfedme2020(group, N, G, C, 2, &r, &p), SFL_EINVAL);
    assert_null(p);
    free(times);
    free(pos);
    free(group);
}

/* Three tight blobs far apart in 6 sparse dimensions, rows interleaved. */
static sfl_csr_t *blobs(uint32_t per, uint32_t *truth)
{
    uint32_t n = 3 * per;
    double *a = calloc((size_t)n * 6, sizeof(double));
    sfl_csr_t *X = NULL;
    sfl_rng_t r;

    assert_non_null(a);
    sfl_rng_seed(&r, 77, 0, 0, 99);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t b = (i * 5) % 3;

        truth[i] = b;
        a[i * 6 + 2 * b] = 10.0 + sfl_rng_gauss(&r, 0.0, 0.1);
        a[i * 6 + 2 * b + 1] = sfl_rng_gauss(&r, 0.0, 0.1);
        if (b == 2)
            a[i * 6 + 5] = 0; /* blob 2 rows keep a single nonzero */
    }
    assert_int_equal(sfl_csr_from_dense(a, n, 6, &X), 0);
    free(a);
    return X;
}

static void test_partition_kmeans_blobs(void **state)
{
    (void)state;
    enum { PER = 40, N = 3 * PER };
    uint32_t truth[N], cl[N], cl2[N];
    sfl_csr_t *X = blobs(PER, truth);

    for (uint64_t seed = 0; seed < 20; seed++) {
        sfl_rng_t r;
        uint32_t map[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX};

        sfl_rng_seed(&r, seed, 0, 0, SFL_STREAM_PARTITION);
        assert_int_equal(sfl_kmeans(X, 3, 100, &r, cl), 0);
        /* Exact recovery up to relabeling: a bijection blob -> cluster. */
        for (uint32_t i = 0; i < N; i++) {
            assert_true(cl[i] < 3);
            if (map[truth[i]] == UINT32_MAX)
                map[truth[i]] = cl[i];
            assert_int_equal(map[truth[i]], cl[i]);
        }
        assert_true(map[0] != map[1] && map[1] != map[2] && map[0] != map[2]);
        /* Deterministic for the same rng state. */
        sfl_rng_seed(&r, seed, 0, 0, SFL_STREAM_PARTITION);
        assert_int_equal(sfl_kmeans(X, 3, 100, &r, cl2), 0);
        assert_memory_equal(cl, cl2, sizeof(cl));
    }
    sfl_csr_free(X);
}

static void test_partition_kmeans_degenerate(void **state)
{
    (void)state;
    /* 5 identical rows, one zero row, one other: more clusters than distinct
     * points, so some clusters go empty and are reseeded. */
    const double a[] = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 0, 0, 5, 5};
    uint32_t cl[7];
    sfl_csr_t *X = NULL;
    sfl_rng_t r;

    assert_int_equal(sfl_csr_from_dense(a, 7, 2, &X), 0);
    sfl_rng_seed(&r, 3, 0, 0, SFL_STREAM_PARTITION);
    assert_int_equal(sfl_kmeans(X, 5, 50, &r, cl), 0);
    for (uint32_t i = 0; i < 7; i++)
        assert_true(cl[i] < 5);
    for (uint32_t i = 1; i < 5; i++)
        assert_int_equal(cl[i], cl[0]);
    assert_true(cl[5] != cl[0] && cl[6] != cl[0] && cl[5] != cl[6]);
    /* k = 1 and k = nrows */
    assert_int_equal(sfl_kmeans(X, 1, 10, &r, cl), 0);
    for (uint32_t i = 0; i < 7; i++)
        assert_int_equal(cl[i], 0);
    assert_int_equal(sfl_kmeans(X, 7, 10, &r, cl), 0);
    /* max_iter 0: the seeding's assignment only */
    assert_int_equal(sfl_kmeans(X, 3, 0, &r, cl), 0);
    assert_true(cl[5] != cl[0] && cl[6] != cl[0] && cl[5] != cl[6]);
    /* bad args */
    assert_int_equal(sfl_kmeans(X, 8, 10, &r, cl), SFL_EINVAL);
    assert_int_equal(sfl_kmeans(X, 0, 10, &r, cl), SFL_EINVAL);
    assert_int_equal(sfl_kmeans(NULL, 2, 10, &r, cl), SFL_EINVAL);
    assert_int_equal(sfl_kmeans(X, 2, 10, &r, NULL), SFL_EINVAL);
    sfl_csr_free(X);
}

static void test_partition_failalloc(void **state)
{
    (void)state;
    enum { N = 60 };
    uint32_t group[N], truth[N], cl[N];
    sfl_partition_t *p = NULL;
    sfl_rng_t r;
    sfl_csr_t *X = blobs(N / 3, truth);

    make_groups(group, N, 4);
    sfl_rng_seed(&r, 1, 0, 0, SFL_STREAM_PARTITION);
    FAILALLOC_EACH(sfl_partition_iid(N, 7, &r, &p), {
        sfl_partition_free(p);
        p = NULL;
    });
    FAILALLOC_EACH(sfl_partition_group_skew(group, N, 4, 6, 3, 2, &r, &p), {
        sfl_partition_free(p);
        p = NULL;
    });
    FAILALLOC_EACH(sfl_partition_dirichlet(group, N, 4, 6, 0.5, &r, &p), {
        sfl_partition_free(p);
        p = NULL;
    });
    FAILALLOC_EACH(sfl_partition_labels(group, N, 4, 6, 2, 3, 1.0, &r, &p), {
        sfl_partition_free(p);
        p = NULL;
    });
    FAILALLOC_EACH(sfl_partition_pfedme2020(group, N, 4, 6, 2, &r, &p), {
        sfl_partition_free(p);
        p = NULL;
    });
    FAILALLOC_EACH(sfl_kmeans(X, 3, 20, &r, cl), (void)0);
    sfl_csr_free(X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_iid),
        cmocka_unit_test(test_partition_iid_bad_args),
        cmocka_unit_test(test_partition_group_skew),
        cmocka_unit_test(test_partition_group_skew_never_dead_ends),
        cmocka_unit_test(test_partition_group_skew_bad_args),
        cmocka_unit_test(test_partition_dirichlet),
        cmocka_unit_test(test_partition_labels),
        cmocka_unit_test(test_partition_pfedme2020_overlaps),
        cmocka_unit_test(test_partition_kmeans_blobs),
        cmocka_unit_test(test_partition_kmeans_degenerate),
        cmocka_unit_test(test_partition_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include "sfl/data/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/core/rng.h"

/* Conventions shared by every generator:
 * - N(m, v) in the papers names a variance v, so alpha and beta are
 *   variances (sd = sqrt(alpha)), and Sigma = diag(j^-1.2) gives feature j
 *   (1-based) the sd j^-0.6. FedProx's reference script passes alpha as
 *   numpy's scale (an sd); the two agree for its usual (0,0) and (1,1).
 * - Client i draws from its own stream sfl_rng_seed(seed, 0, i, DATA), so its
 *   data do not depend on nclients or on the other clients; draws shared by
 *   all clients (the SPARSE and GRADMP truth) come from client id SHARED.
 * - Features are dense, stored as dense-in-CSR: every entry, even tiny ones,
 *   so the sparsity pattern never depends on the values drawn (DPBCFW's
 *   are sparse by design: its pattern is drawn apart from the values). */

#define SHARED UINT64_MAX
#define FEDPROX_CLASSES 10u

static const char *kind_name(sfl_synth_kind_t k)
{
    switch (k) {
    case SFL_SYNTH_SIM1:
        return "sim1";
    case SFL_SYNTH_SIM2:
        return "sim2";
    case SFL_SYNTH_SPARSE:
        return "sparse";
    case SFL_SYNTH_FEDPROX:
        return "fedprox";
    case SFL_SYNTH_GRADMP:
        return "gradmp";
    case SFL_SYNTH_DPBCFW:
        return "dpbcfw";
    }
    return "?";
}

void sfl_synth_params_default(sfl_synth_params_t *p, sfl_synth_kind_t kind)
{
    if (p == NULL)
        return;
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->nclients = kind == SFL_SYNTH_GRADMP ? 30 : 100;
    p->n_per_client = 100;
    p->dim = kind == SFL_SYNTH_FEDPROX ? 60 : 1000;
    /* FEDPROX has no sparse model: s is unused there. */
    p->s = kind == SFL_SYNTH_SPARSE ? 20 : kind == SFL_SYNTH_FEDPROX ? 0
         : kind == SFL_SYNTH_GRADMP || kind == SFL_SYNTH_DPBCFW ? 10 : 100;
    p->alpha = kind == SFL_SYNTH_GRADMP ? 1.0 : 0.1;
    p->beta = 0.1;
    p->noise = kind == SFL_SYNTH_DPBCFW ? sqrt(0.001) : 0.0;
    p->decay = 1.1;
    p->density = 0.1;
    p->seed = 0;
}

static int check_var(const char *what, double v)
{
    /* !(v >= 0) also catches NaN. */
    if (!(v >= 0.0) || isinf(v))
        return sfl__fail(SFL_EINVAL, "synth: %s = %g must be finite and >= 0", what, v);
    return 0;
}

static int check_params(const sfl_synth_params_t *p)
{
    int rc;

    if (p->kind < SFL_SYNTH_SIM1 || p->kind > SFL_SYNTH_DPBCFW)
        return sfl__fail(SFL_EINVAL, "synth: unknown kind %d", (int)p->kind);
    if (p->nclients == 0)
        return sfl__fail(SFL_EINVAL, "synth: nclients is 0");
    if (p->n_per_client == 0)
        return sfl__fail(SFL_EINVAL, "synth: n_per_client is 0");
    if (p->dim == 0)
        return sfl__fail(SFL_EINVAL, "synth: dim is 0");
    if (p->kind != SFL_SYNTH_FEDPROX && (p->s == 0 || p->s > p->dim))
        return sfl__fail(SFL_EINVAL, "synth %s: s = %u must be in 1..dim (%u)",
                         kind_name(p->kind), p->s, p->dim);
    if ((rc = check_var("alpha", p->alpha)) < 0 || (rc = check_var("beta", p->beta)) < 0 ||
        (rc = check_var("noise", p->noise)) < 0 || (rc = check_var("decay", p->decay)) < 0)
        return rc;
    if (p->kind == SFL_SYNTH_DPBCFW && !(p->density > 0.0 && p->density <= 1.0))
        return sfl__fail(SFL_EINVAL, "synth dpbcfw: density = %g must be in (0, 1]",
                         p->density);
    return 0;
}

/* A SIM2 row's margin, for ranking within its client. */
typedef struct ranked {
    double m;
    uint32_t row;
} ranked_t;

/* Work space sized once for the largest client, reused by every client. */
typedef struct work {
    double *sd;      /* dim: feature sd j^-0.6 */
    double *model;   /* SIM: x_i (dim); FEDPROX: W_i (10 x dim) then b_i (10) */
    double *mean;    /* dim: v_i */
    ranked_t *rank;  /* SIM2: one entry per row of a client */
} work_t;

/* FEDPROX client size: floor(lognormal(4, 2)) + 50, capped. The cap is
 * applied in double first so an enormous draw cannot overflow the cast. */
static uint32_t fedprox_rows(sfl_rng_t *r, uint32_t n_per_client)
{
    double cap = (double)n_per_client * 10.0;
    double n = floor(exp(sfl_rng_gauss(r, 4.0, 2.0))) + 50.0;

    if (n > cap)
        n = cap;
    return (uint32_t)n;
}

/* Descending margin, then ascending row: a total order, so the ranking does
 * not depend on the qsort implementation. */
static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked_t *a = pa, *b = pb;

    if (a->m != b->m)
        return a->m > b->m ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

/* Labels 1 for the ceil(10%) largest margins of the client. Ranking by the
 * margin z'x_i + b equals ranking by y' = sigmoid(margin) but avoids the ties
 * that sigmoid's saturation at 1.0 would create; any remaining tie goes to
 * the lower row, so the count of positives is exact. */
static void label_top_decile(ranked_t *rank, uint32_t n, double *y)
{
    uint32_t top = (uint32_t)(((uint64_t)n + 9) / 10);

    qsort(rank, n, sizeof(*rank), cmp_ranked);
    for (uint32_t j = 0; j < n; j++)
        y[rank[j].row] = j < top ? 1.0 : 0.0;
}

/* DPBCFW's rows: the gaps between a row's nonzeros are geometric (each
 * entry nonzero with probability density, independently), so a row costs
 * its nonzeros, not dim draws; storage grows as rows come. Draw order per
 * row: gap, value, gap, value, ..., the final gap past the end, the noise. */
static int sparse_generate(const sfl_synth_params_t *p, uint32_t i, const double *truth,
                           sfl_dataset_t **out)
{
    uint32_t d = p->dim, n = p->n_per_client;
    double lq = p->density < 1.0 ? log1p(-p->density) : 0.0;
    size_t cap = (size_t)(p->density * d * n * 1.05) + 16, nnz = 0;
    sfl_csr_t *X = NULL;
    double *y = NULL;
    sfl_rng_t r;
    int rc;

    *out = NULL;
    sfl_rng_seed(&r, p->seed, 0, i, SFL_STREAM_DATA);
    if ((rc = sfl_csr_new(n, d, cap, &X)) < 0)
        return rc;
    if ((y = sfl__mallocarray(n, sizeof(*y))) == NULL) {
        sfl_csr_free(X);
        return SFL_ENOMEM;
    }
    for (uint32_t row = 0; row < n; row++) {
        double j = -1.0;

        for (;;) {
            /* P(gap = k) = (1 - density)^k density, k >= 0 */
            j += 1.0 + (lq < 0.0 ? floor(log(sfl_rng_uniform(&r)) / lq) : 0.0);
            if (j >= d)
                break;
            if (nnz == cap) {
                size_t more = cap + cap / 2;
                uint32_t *ci = sfl__reallocarray(X->colind, more, sizeof(uint32_t));
                double *v;

                if (ci != NULL)
                    X->colind = ci;
                v = ci ? sfl__reallocarray(X->val, more, sizeof(double)) : NULL;
                if (v == NULL) {
                    rc = SFL_ENOMEM;
                    goto fail;
                }
                X->val = v;
                cap = more;
            }
            X->colind[nnz] = (uint32_t)j;
            X->val[nnz++] = sfl_rng_gauss(&r, 0.0, 1.0);
        }
        X->rowptr[row + 1] = nnz;
        y[row] = sfl_csr_row_dot(X, row, truth) + p->noise * sfl_rng_gauss(&r, 0.0, 1.0);
    }
    X->nnz = nnz;
    return sfl_dataset_new(X, y, out); /* takes X and y */
fail:
    sfl__free(y);
    sfl_csr_free(X);
    return rc;
}

static int client_generate(const sfl_synth_params_t *p, uint32_t i, const double *truth,
                           work_t *w, sfl_dataset_t **out)
{
    sfl_rng_t r;
    sfl_csr_t *X = NULL;
    double *y = NULL, *labels = NULL;
    sfl_dataset_t *ds = NULL;
    uint32_t d = p->dim, n = p->n_per_client, nclasses = 0;
    double u = 0.0, sd = 1.0;
    int rc;

    *out = NULL;
    if (p->kind == SFL_SYNTH_DPBCFW)
        return sparse_generate(p, i, truth, out);
    sfl_rng_seed(&r, p->seed, 0, i, SFL_STREAM_DATA);

    /* Per-client parameters, in a fixed draw order (documented for replay):
     * SIM: u_i, x_i[0..s), B_i, v_i; FEDPROX: size, u_i, B_i, W_i, b_i, v_i;
     * GRADMP: mu_i. */
    if (p->kind == SFL_SYNTH_SIM1 || p->kind == SFL_SYNTH_SIM2) {
        u = sfl_rng_gauss(&r, 0.1, sqrt(p->alpha));
        for (uint32_t j = 0; j < d; j++)
            w->model[j] = j < p->s ? sfl_rng_gauss(&r, u, 1.0) : 0.0;
        double B = sfl_rng_gauss(&r, 0.0, sqrt(p->beta));

        for (uint32_t j = 0; j < d; j++)
            w->mean[j] = sfl_rng_gauss(&r, B, 1.0);
    } else if (p->kind == SFL_SYNTH_FEDPROX) {
        n = fedprox_rows(&r, p->n_per_client);
        u = sfl_rng_gauss(&r, 0.0, sqrt(p->alpha));
        double B = sfl_rng_gauss(&r, 0.0, sqrt(p->beta));

        for (size_t j = 0; j < (size_t)FEDPROX_CLASSES * d + FEDPROX_CLASSES; j++)
            w->model[j] = sfl_rng_gauss(&r, u, 1.0);
        for (uint32_t j = 0; j < d; j++)
            w->mean[j] = sfl_rng_gauss(&r, B, 1.0);
    } else if (p->kind == SFL_SYNTH_GRADMP) {
        /* mu_i ~ N(0, alpha); entries' variance 1/i^decay with i 1-based. */
        u = sfl_rng_gauss(&r, 0.0, sqrt(p->alpha));
        sd = pow((double)i + 1.0, -p->decay / 2);
    }

    rc = sfl_csr_new(n, d, (size_t)n * d, &X);
    if (rc < 0)
        goto out;
    y = sfl__mallocarray(n, sizeof(*y));
    if (y == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }

    for (uint32_t row = 0; row < n; row++) {
        size_t base = (size_t)row * d;
        double *z = X->val + base;

        X->rowptr[row + 1] = base + d;
        for (uint32_t j = 0; j < d; j++) {
            X->colind[base + j] = j;
            z[j] = p->kind == SFL_SYNTH_SPARSE   ? sfl_rng_gauss(&r, 0.0, 1.0)
                   : p->kind == SFL_SYNTH_GRADMP ? sfl_rng_gauss(&r, u, sd)
                                                 : sfl_rng_gauss(&r, w->mean[j], w->sd[j]);
        }
        switch (p->kind) {
        case SFL_SYNTH_SIM1:
            y[row] = sfl_csr_row_dot(X, row, w->model) + sfl_rng_gauss(&r, u, 1.0);
            break;
        case SFL_SYNTH_SIM2:
            w->rank[row].m = sfl_csr_row_dot(X, row, w->model) + sfl_rng_gauss(&r, u, 1.0);
            w->rank[row].row = row;
            break;
        case SFL_SYNTH_SPARSE:
        case SFL_SYNTH_GRADMP:
        case SFL_SYNTH_DPBCFW: /* (sparse_generate's) */
            /* The noise is drawn even when noise == 0 so Z does not depend on
             * the noise level, and y = Z x* holds exactly then. */
            y[row] = sfl_csr_row_dot(X, row, truth) + p->noise * sfl_rng_gauss(&r, 0.0, 1.0);
            break;
        case SFL_SYNTH_FEDPROX: {
            /* argmax softmax(W z + b) = argmax of the logits; ties -> lowest. */
            const double *bias = w->model + (size_t)FEDPROX_CLASSES * d;
            double best = -INFINITY;
            uint32_t cls = 0;

            for (uint32_t c = 0; c < FEDPROX_CLASSES; c++) {
                double s = sfl_csr_row_dot(X, row, w->model + (size_t)c * d) + bias[c];

                if (s > best) {
                    best = s;
                    cls = c;
                }
            }
            y[row] = cls;
            break;
        }
        }
    }
    if (p->kind == SFL_SYNTH_SIM2)
        label_top_decile(w->rank, n, y);

    if (p->kind == SFL_SYNTH_SIM2 || p->kind == SFL_SYNTH_FEDPROX) {
        nclasses = p->kind == SFL_SYNTH_SIM2 ? 2 : FEDPROX_CLASSES;
        labels = sfl__mallocarray(nclasses, sizeof(*labels));
        if (labels == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        for (uint32_t c = 0; c < nclasses; c++)
            labels[c] = c;
    }
    rc = sfl_dataset_new(X, y, &ds); /* takes X and y, even on failure */
    X = NULL;
    y = NULL;
    if (rc < 0)
        goto out;
    /* Set directly, not through encode_labels: a client may lack a class,
     * and every client must still share one coding. */
    ds->nclasses = nclasses;
    ds->labels = labels;
    labels = NULL;
    *out = ds;
out:
    sfl__free(labels);
    sfl__free(y);
    sfl_csr_free(X);
    return rc;
}

int sfl_synth_generate(const sfl_synth_params_t *p, sfl_synth_t **out)
{
    sfl_synth_t *s = NULL;
    work_t w = {0};
    uint32_t d, nmax;
    int rc;

    if (out == NULL || p == NULL)
        return sfl__fail(SFL_EINVAL, "synth: NULL argument");
    *out = NULL;
    rc = check_params(p);
    if (rc < 0)
        return rc;
    d = p->dim;
    nmax = p->n_per_client;
    if (p->kind == SFL_SYNTH_FEDPROX)
        nmax = p->n_per_client > UINT32_MAX / 10 ? UINT32_MAX : p->n_per_client * 10;
    if (p->kind != SFL_SYNTH_DPBCFW && (uint64_t)nmax * d > SIZE_MAX / sizeof(double))
        return sfl__fail(SFL_ELIMIT, "synth: %u rows x %u features too large", nmax, d);

    s = sfl__calloc(1, sizeof(*s));
    if (s == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    s->dim = d;
    s->clients = sfl__calloc(p->nclients, sizeof(*s->clients));
    w.sd = sfl__mallocarray(d, sizeof(double));
    w.model = sfl__mallocarray((size_t)FEDPROX_CLASSES * d + FEDPROX_CLASSES, sizeof(double));
    w.mean = sfl__mallocarray(d, sizeof(double));
    if (s->clients == NULL || w.sd == NULL || w.model == NULL || w.mean == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    s->nclients = p->nclients;
    if (p->kind == SFL_SYNTH_SIM2) {
        w.rank = sfl__mallocarray(nmax, sizeof(*w.rank));
        if (w.rank == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
    }
    for (uint32_t j = 0; j < d; j++)
        w.sd[j] = pow((double)j + 1.0, -0.6);

    if (p->kind != SFL_SYNTH_FEDPROX) {
        s->support = sfl__mallocarray(p->s, sizeof(uint32_t));
        if (s->support == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        s->nsupport = p->s;
    }
    if (p->kind == SFL_SYNTH_SIM1 || p->kind == SFL_SYNTH_SIM2) {
        for (uint32_t j = 0; j < p->s; j++)
            s->support[j] = j;
    } else if (p->kind == SFL_SYNTH_SPARSE || p->kind == SFL_SYNTH_GRADMP ||
               p->kind == SFL_SYNTH_DPBCFW) {
        sfl_rng_t r;

        s->truth = sfl__calloc(d, sizeof(double));
        if (s->truth == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        sfl_rng_seed(&r, p->seed, 0, SHARED, SFL_STREAM_DATA);
        rc = sfl_rng_sample(&r, d, p->s, s->support);
        if (rc < 0)
            goto out;
        for (uint32_t j = 0; j < p->s; j++)
            s->truth[s->support[j]] = sfl_rng_gauss(&r, 0.0, 1.0);
        if (p->kind == SFL_SYNTH_GRADMP) {
            /* A standard Gaussian vector, normalised, is uniform on the
             * sphere; a zero draw has probability 0 but is kept off anyway. */
            double nrm = 0.0;

            for (uint32_t j = 0; j < p->s; j++)
                nrm += s->truth[s->support[j]] * s->truth[s->support[j]];
            nrm = sqrt(nrm);
            for (uint32_t j = 0; j < p->s && nrm > 0; j++)
                s->truth[s->support[j]] /= nrm;
        }
    }

    for (uint32_t i = 0; i < p->nclients; i++) {
        rc = client_generate(p, i, s->truth, &w, &s->clients[i]);
        if (rc < 0)
            goto out;
    }
    *out = s;
    s = NULL;
out:
    sfl__free(w.rank);
    sfl__free(w.mean);
    sfl__free(w.model);
    sfl__free(w.sd);
    sfl_synth_free(s);
    return rc;
}

void sfl_synth_free(sfl_synth_t *s)
{
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < s->nclients; i++)
        sfl_dataset_free(s->clients[i]);
    sfl__free(s->clients);
    sfl__free(s->truth);
    sfl__free(s->support);
    sfl__free(s);
}

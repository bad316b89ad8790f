/* Block-coordinate Frank-Wolfe over column blocks (seed 003: Lou and
 * Cheung, "An Uplink Communication-Efficient Approach to Featurewise
 * Distributed Sparse Optimization With Differential Privacy").
 *
 *   bcfw    BCFW-AS (Alg. 1) with exact partial gradients under a sampling
 *           of the coordinates (elementary, tau-nice, (K, tau)-distributed,
 *           importance);
 *   dpbcfw  DP-BCFW (Alg. 2): report-noisy-max on the index, the active
 *           feature shared through a Gaussian sketch J plus Gaussian noise
 *           (eqs. 12-17), every piece switchable (sketch, dp_noise) so the
 *           cost of privacy and of sketching show separately.
 *
 * Problem: min f(x) = mean_j l(a^j' x, y_j) over x in M = M_1 x ... x M_K,
 * M_k = {x_k : ||x_k||_1 <= eta} on client k's columns P_k. Alg. 2 sums one
 * eta-vertex per client into s^t, which is a vertex of this product and not
 * of the single ball ||x||_1 <= eta (||s^t||_1 = K eta); with K = 1 the two
 * agree.
 *
 * Iteration t (gamma = 2 / (p_min t + 2)):
 *   client k, from the broadcast b:
 *     margins  m = b (exact: b = A x) or m = J' b (sketched: b ~ J A x)
 *     r_j = l'(m_j, y_j) / n; g_i = a_i' r on the sampled i of P_k (Table V)
 *     (private: report-noisy-max, one Laplace draw per coordinate on the
 *     LO's values: v_i = eta g_i + Lap(beta))
 *     i* = argmax |v_i|, index = -sign(v_i*) (i* + 1)              (eq. 12)
 *     feature = a_i* (n doubles), or J a_i* (+ xi, xi ~ N(0, pi^2)) (eq. 16)
 *   server:
 *     x <- (1 - gamma) x + gamma eta sum_k sign_k e_i*_k          (Alg. 2, 12-13)
 *     b <- (1 - gamma) b + gamma eta sum_k sign_k feature_k       (14)
 * so b tracks A x (or J A x) exactly as x moves: Alg. 2 line 14 writes the
 * same recursion with its indices shifted by one iteration and a 1/n that
 * we leave in r. The model stays at the server: the clients need b alone.
 *
 * Noise (Sec. IV-C, with delta = 1/n when the parameter is 0; the scales
 * from dp.h's calibration, the draws by its samplers; docs/privacy.md):
 *   dp_noise 1, 2: each client clips its block's entries to clip_a and
 *   every residual to clip_r, so that one sample moves each LO value eta
 *   g_i by at most Delta = 2 eta clip_a clip_r / n and the feature J a_i by
 *   Delta_J = 2 clip_a c_J (c_J = J's largest column norm, 1 unsketched),
 *   whatever the data; then (calib 0)
 *     beta = Delta sqrt(2 T log(2/delta)) / (epsilon / (4K))
 *     sd   = Delta_J sqrt(K T) sqrt(2 (ln(1/delta) + epsilon/2)) / (epsilon/2)
 *   or both scaled until the RDP accountant spends epsilon (calib 1); the
 *   index by Laplace report-noisy-max (select 0) or the exponential
 *   mechanism with scale beta (select 1).
 *   dp_noise 3, Alg. 2 as printed (not private): beta from 2 G eta / (K n),
 *     pi = sigma(J) sqrt(K T) sqrt(2 (ln(1/delta) + epsilon/2)) / (n epsilon/2)
 *   on J a (calibrated for J a / n: n times too little), no clipping.
 * Alg. 2 line 7 writes the Laplace draw next to g_i, but the sensitivity is
 * that of the LO's values eta g_i (Report-Noisy-Max, Definition 2: noise on
 * the values the sensitivity is of), so that is where it goes: the same as
 * Lap(beta / eta) on g_i. */
#include "sfl/algo/vertical.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/dp/dp.h"
#include "sfl/core/error.h"

typedef struct bcfw_params {
    double eta;        /* radius of each block's l1 ball */
    double mix;        /* importance sampling: the uniform share */
    double epsilon;    /* (epsilon, delta)-DP of the whole job */
    double delta;      /* 0: 1/n */
    double grad_bound; /* G, the partial gradients' bound (dp_noise 3) */
    double clip_a;     /* |a_ji| <= clip_a, entries clipped (dp_noise 1, 2) */
    double clip_r;     /* |l'(m_j, y_j)| <= clip_r, residuals clipped */
    uint32_t sampling; /* SAMPLE_* */
    uint32_t tau;      /* coordinates sampled */
    uint32_t m;        /* sketch length */
    uint32_t sketch;   /* 1: share J a */
    uint32_t dp_noise; /* NOISE_* */
    uint32_t select;   /* SELECT_* */
    uint32_t calib;    /* CALIB_* */
} bcfw_params_t;

enum { SAMPLE_ELEMENTARY, SAMPLE_NICE, SAMPLE_DISTRIBUTED, SAMPLE_IMPORTANCE };
/* dp_noise: NOISE_ALL is Alg. 2 with the feature noise calibrated to J a's
 * sensitivity, NOISE_PRINTED with eq. 17's pi as printed (not private) */
enum { NOISE_NONE, NOISE_ALL, NOISE_INDEX, NOISE_PRINTED };
/* select: the index by Laplace report-noisy-max (Alg. 2) or the exponential
 * mechanism; calib: the noise scales by the paper's accounting (Sec. IV-C)
 * or scaled until the RDP accountant spends exactly epsilon */
enum { SELECT_RNM, SELECT_EM };
enum { CALIB_PAPER, CALIB_RDP };

#define PARAM_ETA                                                                          \
    {"eta", "eta", SFL_PARAM_REAL, offsetof(bcfw_params_t, eta), 1, 0, HUGE_VAL,          \
     SFL_PARAM_OPEN_LO, "radius of each client's l1 ball (its block of x)"}

static const sfl_param_def_t bcfw_param_defs[] = {
    PARAM_ETA,
    {"sampling", "S", SFL_PARAM_COUNT, offsetof(bcfw_params_t, sampling), 0, 0, 3, 0,
     "coordinates per iteration: 0 all (elementary), 1 tau of d (tau-nice), 2 tau per "
     "block ((K, tau)-distributed), 3 importance"},
    {"tau", "tau", SFL_PARAM_COUNT, offsetof(bcfw_params_t, tau), 10, 1, UINT32_MAX, 0,
     "coordinates sampled: of d (tau-nice; at most d) or per block (2, 3)"},
    {"mix", "mu", SFL_PARAM_REAL, offsetof(bcfw_params_t, mix), 0.5, 0, 1, SFL_PARAM_OPEN_LO,
     "importance sampling: the uniform share of the probabilities"},
    {0},
};

static const sfl_param_def_t dpbcfw_param_defs[] = {
    PARAM_ETA,
    {"epsilon", "epsilon", SFL_PARAM_REAL, offsetof(bcfw_params_t, epsilon), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "privacy budget of the whole job, (epsilon, delta)-DP"},
    {"delta", "delta", SFL_PARAM_REAL, offsetof(bcfw_params_t, delta), 0, 0, 1, 0,
     "privacy delta (0: 1/n)"},
    {"grad_bound", "G", SFL_PARAM_REAL, offsetof(bcfw_params_t, grad_bound), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "dp_noise 3 only: G of the paper's index sensitivity 2 G eta / (K n)"},
    {"clip_a", "a_max", SFL_PARAM_REAL, offsetof(bcfw_params_t, clip_a), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "dp_noise 1, 2: every feature entry clipped to [-clip_a, clip_a] "
     "(each client its block)"},
    {"clip_r", "r_max", SFL_PARAM_REAL, offsetof(bcfw_params_t, clip_r), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "dp_noise 1, 2: every residual l'(margin, y) clipped to [-clip_r, "
     "clip_r]"},
    {"m", "m", SFL_PARAM_COUNT, offsetof(bcfw_params_t, m), 100, 1, UINT32_MAX, 0,
     "sketch length: an active feature travels as m doubles"},
    {"sketch", "J", SFL_PARAM_COUNT, offsetof(bcfw_params_t, sketch), 1, 0, 1, 0,
     "1: share the feature as J a, m doubles (eq. 16); 0: itself, n doubles"},
    {"dp_noise", "pert", SFL_PARAM_COUNT, offsetof(bcfw_params_t, dp_noise), 1, 0, 3, 0,
     "0 none; 1 noise on the index and the feature (Alg. 2), both for one sample's "
     "contribution after clipping to clip_a, clip_r: private for any data; 2 the index "
     "only, sketch 0 (the model private, the shared features clean; DP-FW when K = 1); 3 Alg. 2 as printed (G, "
     "its 1/K, eq. 17's pi on J a, no clipping: not private; reproduction only)"},
    {"select", "sel", SFL_PARAM_COUNT, offsetof(bcfw_params_t, select), 0, 0, 1, 0,
     "dp_noise 1, 2: the index by 0 Laplace report-noisy-max (Alg. 2), 1 the exponential "
     "mechanism (Gumbel-max, sampled exactly)"},
    {"calib", "cal", SFL_PARAM_COUNT, offsetof(bcfw_params_t, calib), 0, 0, 1, 0,
     "dp_noise 1, 2: noise scales by 0 the paper's accounting (Sec. IV-C), 1 the RDP "
     "accountant (scaled until it spends exactly epsilon)"},
    {0},
};

static const bcfw_params_t *params_of(const sfl_vjob_t *job)
{
    return SFL_ALGO_PARAMS(job->p, bcfw_params_t);
}

/* ---- the pieces ------------------------------------------------------- */

double sfl_bcfw_step(double pmin, uint64_t t)
{
    return 2.0 / (pmin * (double)t + 2.0);
}

/* The largest block: blocks differ by one column at most (eq. 11). */
static uint32_t largest_block(const sfl_vjob_t *job)
{
    uint32_t d = job->prob->ncols, K = job->nclients;

    return d / K + (d % K != 0);
}

double sfl_bcfw_pmin(const sfl_vjob_t *job)
{
    const bcfw_params_t *p = params_of(job);
    double big = largest_block(job), tau = p->tau, pm;

    switch (p->sampling) {
    case SAMPLE_NICE:
        return tau / job->prob->ncols;
    case SAMPLE_DISTRIBUTED:
        return tau >= big ? 1.0 : tau / big;
    case SAMPLE_IMPORTANCE:
        /* p_i >= min(1, tau mix / len) for every i: a bound, since the
         * true minimum needs every client's column norms */
        pm = p->mix * tau / big;
        return pm >= 1.0 ? 1.0 : pm;
    }
    return 1.0;
}

double sfl_bcfw_oracle(const double *g, const uint32_t *sample, uint32_t ns, uint32_t col0)
{
    uint32_t best = 0;
    double big = -1.0;

    if (ns == 0)
        return 0.0;
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t i = sample ? sample[s] : s;

        if (fabs(g[i]) > big) {
            big = fabs(g[i]);
            best = i;
        }
    }
    return (g[best] > 0.0 ? -1.0 : 1.0) * ((double)col0 + best + 1.0);
}

int sfl_bcfw_residual(const sfl_loss_t *loss, const double *m, const double *y, uint32_t n,
                      double *r)
{
    double inv = 1.0 / n;

    if (loss->margin_loss == NULL)
        return sfl__fail(SFL_EUNSUP, "%s is not a linear loss (lsq, logistic, sqhinge)",
                         loss->name);
    for (uint32_t j = 0; j < n; j++) {
        double dl;

        (void)loss->margin_loss(m[j], y[j], &dl);
        if (!isfinite(dl))
            return sfl__fail(SFL_ENUMERIC, "the loss's derivative at row %u is not finite "
                             "(margin %g)", j, m[j]);
        r[j] = dl * inv;
    }
    return 0;
}

/* ---- the common sketch ------------------------------------------------ */

typedef struct bcfw_common {
    uint32_t m, n;
    double sigma; /* J's largest singular value */
    double colmax; /* max_j ||J e_j||, the largest column norm */
    double *J;    /* n columns of m entries: J[j m + r], entries N(0, 1/m) */
} bcfw_common_t;

static void common_free(void *c)
{
    bcfw_common_t *cm = c;

    if (cm == NULL)
        return;
    sfl__free(cm->J);
    sfl__free(cm);
}

/* sigma(J)^2 = the largest eigenvalue of J'J, by power iteration from a
 * seeded start: the Rayleigh quotient ||J v||^2 (v unit), a bound from
 * below that rises to sigma^2, until it changes by less than 1e-9 or after
 * 100 steps (2 m n each). On Gaussian J it is then within about 0.1 % of
 * where 300 steps take it, near 1 + sqrt(n / m). */
static int sketch_sigma(bcfw_common_t *c, sfl_rng_t *rng)
{
    uint32_t m = c->m, n = c->n;
    double *v = sfl__mallocarray(n, sizeof(double)), *u = sfl__mallocarray(m, sizeof(double));
    double ray = 0.0;

    if (v == NULL || u == NULL) {
        sfl__free(v);
        sfl__free(u);
        return SFL_ENOMEM;
    }
    for (uint32_t j = 0; j < n; j++)
        v[j] = sfl_rng_gauss(rng, 0.0, 1.0);
    for (int it = 0; it < 100; it++) {
        double prev = ray, nv = 0.0;

        for (uint32_t j = 0; j < n; j++)
            nv += v[j] * v[j];
        nv = sqrt(nv);
        if (!(nv > 0.0))
            break;
        /* u = J v / ||v||, ray = ||u||^2, v = J' u */
        memset(u, 0, m * sizeof(double));
        for (uint32_t j = 0; j < n; j++) {
            const double *col = c->J + (size_t)j * m;
            double a = v[j] / nv;

            for (uint32_t r = 0; r < m; r++)
                u[r] += a * col[r];
        }
        ray = 0.0;
        for (uint32_t r = 0; r < m; r++)
            ray += u[r] * u[r];
        for (uint32_t j = 0; j < n; j++) {
            const double *col = c->J + (size_t)j * m;
            double s = 0.0;

            for (uint32_t r = 0; r < m; r++)
                s += col[r] * u[r];
            v[j] = s;
        }
        if (it > 0 && fabs(ray - prev) <= 1e-9 * ray)
            break;
    }
    c->sigma = sqrt(ray);
    sfl__free(v);
    sfl__free(u);
    return 0;
}

static int common_new(const sfl_vjob_t *job, void **out)
{
    const bcfw_params_t *p = params_of(job);
    uint32_t m = p->m, n = job->nrows;
    bcfw_common_t *c;
    double sd = 1.0 / sqrt((double)m);
    sfl_rng_t r;
    int rc;

    *out = NULL;
    if (!p->sketch)
        return 0;
    if ((c = sfl__calloc(1, sizeof(*c))) == NULL)
        return SFL_ENOMEM;
    c->m = m;
    c->n = n;
    if ((c->J = sfl__mallocarray((size_t)m * n, sizeof(double))) == NULL) {
        common_free(c);
        return SFL_ENOMEM;
    }
    /* every party draws the same J from the job's seed */
    sfl_rng_seed(&r, job->seed, 0, 0, SFL_STREAM_SKETCH);
    for (size_t e = 0; e < (size_t)m * n; e++)
        c->J[e] = sfl_rng_gauss(&r, 0.0, sd);
    for (uint32_t j = 0; j < n; j++) {
        double s = 0.0;

        for (uint32_t q = 0; q < m; q++)
            s += c->J[(size_t)j * m + q] * c->J[(size_t)j * m + q];
        c->colmax = fmax(c->colmax, sqrt(s));
    }
    if ((rc = sketch_sigma(c, &r)) < 0) {
        common_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* ---- the privacy noise ------------------------------------------------ */

/* The noise of a job as every party computes it. */
typedef struct bcfw_noise {
    sfl_dp_mech_t kind; /* the index's mechanism: RNM (Laplace) or EM */
    double beta;        /* its scale on the LO's values eta g (0: none) */
    double sens_idx;    /* the LO values' sensitivity beta is calibrated for */
    double sd;          /* sd of the Gaussian on the shared feature (0: none) */
    double sens_feat;   /* the feature's l2 sensitivity sd is calibrated for */
    int clip;           /* 1: entries and residuals clipped (dp_noise 1, 2) */
} bcfw_noise_t;

static sfl_dp_bcfw_t calib_of(const sfl_vjob_t *job)
{
    const bcfw_params_t *p = params_of(job);

    return (sfl_dp_bcfw_t){.epsilon = p->epsilon, .delta = sfl_vertical_delta(job),
                           .T = job->iters, .K = job->nclients, .n = job->nrows,
                           .eta = p->eta, .G = p->grad_bound};
}

/* iters iterations of count draws of one mechanism. The accountant takes
 * one iteration per call; a job's T can be in the millions, so the first
 * call makes (or finds) the entry and the rest are added to it directly. */
static int add_iters(sfl_dp_acct_t *a, sfl_dp_mech_t kind, double scale, double sens,
                     uint32_t count, uint64_t iters)
{
    int rc = kind == SFL_DP_MECH_RNM        ? sfl_dp_acct_add_rnm(a, scale, sens, count)
             : kind == SFL_DP_MECH_EM       ? sfl_dp_acct_add_em(a, scale, sens, count)
                                            : sfl_dp_acct_add_gaussian(a, scale, sens, count);

    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < a->n; i++) {
        sfl_dp_entry_t *e = &a->e[i];

        if (e->kind != kind || e->scale != scale || e->sens != sens || e->count != count)
            continue;
        if (iters - 1 > (uint64_t)(UINT32_MAX - e->iters))
            return sfl__fail(SFL_ERANGE, "dp accountant: more than 2^32 - 1 iterations");
        e->iters += (uint32_t)(iters - 1);
        return 0;
    }
    assert(!"the entry the accountant just made or found");
    return SFL_EINVAL;
}

/* Records iters iterations of the K clients' releases with noise nz. */
static int record(const sfl_vjob_t *job, const bcfw_noise_t *nz, uint64_t iters,
                  sfl_dp_acct_t *a)
{
    int rc;

    if (iters > UINT32_MAX)
        return sfl__fail(SFL_ERANGE, "%s: cannot account for %llu iterations (at most "
                         "2^32 - 1)", job->algo->name, (unsigned long long)iters);
    if ((rc = add_iters(a, nz->kind, nz->beta, nz->sens_idx, job->nclients, iters)) < 0)
        return rc;
    if (nz->sd > 0)
        rc = add_iters(a, SFL_DP_MECH_GAUSSIAN, nz->sd, nz->sens_feat, job->nclients, iters);
    return rc;
}

/* eps_rdp_tight of the whole job with both scales multiplied by s. */
static int rdp_spent(const sfl_vjob_t *job, const bcfw_noise_t *nz, double s, double *eps)
{
    bcfw_noise_t t = *nz;
    sfl_dp_spent_t sp;
    sfl_dp_acct_t a;
    int rc;

    t.beta *= s;
    t.sd *= s;
    sfl_dp_acct_init(&a);
    if ((rc = record(job, &t, job->iters, &a)) < 0 ||
        (rc = sfl_dp_acct_epsilon(&a, sfl_vertical_delta(job), &sp)) < 0)
        return rc;
    *eps = sp.eps_rdp_tight;
    return 0;
}

/* calib 1: the smallest factor s (to a relative 1e-12) on the paper's
 * scales for which the RDP accountant spends at most epsilon after T
 * iterations; the split between index and feature stays the paper's.
 * Bisection in log s: the spent epsilon falls as the noise grows. */
static int rdp_calibrate(const sfl_vjob_t *job, bcfw_noise_t *nz)
{
    double eps_target = params_of(job)->epsilon, lo = 1.0, hi = 1.0, e;
    int rc;

    if ((rc = rdp_spent(job, nz, 1.0, &e)) < 0)
        return rc;
    for (int i = 0; e <= eps_target; i++) { /* lo: too little noise */
        if (i == 200)
            return sfl__fail(SFL_ERANGE, "%s: no noise scale spends epsilon %g",
                             job->algo->name, eps_target);
        lo /= 2.0;
        if ((rc = rdp_spent(job, nz, lo, &e)) < 0)
            return rc;
    }
    if ((rc = rdp_spent(job, nz, hi, &e)) < 0)
        return rc;
    for (int i = 0; e > eps_target; i++) { /* hi: enough */
        if (i == 200)
            return sfl__fail(SFL_ERANGE, "%s: no noise scale spends epsilon %g",
                             job->algo->name, eps_target);
        hi *= 2.0;
        if ((rc = rdp_spent(job, nz, hi, &e)) < 0)
            return rc;
    }
    while (hi / lo > 1.0 + 1e-12) {
        double mid = sqrt(lo * hi);

        if ((rc = rdp_spent(job, nz, mid, &e)) < 0)
            return rc;
        if (e > eps_target)
            lo = mid;
        else
            hi = mid;
    }
    nz->beta *= hi;
    nz->sd *= hi;
    return 0;
}

/* The job's noise (docs/privacy.md, "One sample's contribution"):
 *   dp_noise 3, the paper as printed: beta from 2 G eta / (K n), pi of
 *     eq. 17 for sigma(J) / n, no clipping (not private);
 *   dp_noise 1, 2: entries clipped to clip_a and residuals to clip_r, so
 *     that one sample moves every LO value by at most 2 eta clip_a clip_r / n
 *     and the feature J a by 2 clip_a c_J (c_J = J's largest column norm,
 *     1 unsketched), for any data; the paper's formulas with these
 *     sensitivities (calib 0) or scaled to the RDP accountant (calib 1).
 * One place, so that the accounting records the scales the clients draw
 * with. Needs job->common for the feature noise of a sketched job. */
static int noise_scales(const sfl_vjob_t *job, bcfw_noise_t *nz)
{
    const bcfw_params_t *p = params_of(job);
    const bcfw_common_t *cm = job->common;
    sfl_dp_bcfw_t dp = calib_of(job);
    double sigma_j = 1.0, c_j = 1.0;
    int rc;

    memset(nz, 0, sizeof(*nz));
    nz->kind = SFL_DP_MECH_RNM;
    if (p->dp_noise == NOISE_NONE)
        return 0;
    if (p->dp_noise != NOISE_INDEX && p->sketch) {
        if (cm == NULL || cm->n != job->nrows || cm->m != p->m)
            return sfl__fail(SFL_EINVAL, "%s: the feature noise needs the job's sketch "
                             "(sigma(J)), which is missing or for another job",
                             job->algo->name);
        sigma_j = cm->sigma;
        c_j = cm->colmax;
    }
    if (p->dp_noise == NOISE_PRINTED) {
        if ((rc = sfl_dp_bcfw_index_scale(&dp, &nz->beta)) < 0 ||
            (rc = sfl_dp_bcfw_index_sens(&dp, &nz->sens_idx)) < 0 ||
            (rc = sfl_dp_bcfw_jl_sigma(&dp, sigma_j, &nz->sd)) < 0)
            return rc;
        /* recorded against J a's sensitivity sigma(J): n times the sd's */
        nz->sens_feat = sigma_j;
        return 0;
    }
    nz->clip = 1;
    nz->kind = p->select == SELECT_EM ? SFL_DP_MECH_EM : SFL_DP_MECH_RNM;
    if ((rc = sfl_dp_bcfw_score_sens(job->nrows, p->eta, p->clip_a, p->clip_r,
                                     &nz->sens_idx)) < 0 ||
        (rc = sfl_dp_bcfw_index_scale_for(&dp, nz->sens_idx, &nz->beta)) < 0)
        return rc;
    if (p->dp_noise == NOISE_ALL &&
        ((rc = sfl_dp_bcfw_feature_sens(p->clip_a, c_j, &nz->sens_feat)) < 0 ||
         (rc = sfl_dp_bcfw_jl_sigma_for(&dp, nz->sens_feat, &nz->sd)) < 0))
        return rc;
    return p->calib == CALIB_RDP ? rdp_calibrate(job, nz) : 0;
}

static const sfl_vertical_ops_t bcfw_ops;

/* ---- the client ------------------------------------------------------- */

typedef struct bcfw_client {
    sfl_csr_t *at;      /* the block transposed: row i = column col0 + i */
    double *marg;       /* n margins (sketched: J' b) */
    double *r;          /* n residuals l'(m_j, y_j) / n */
    double *g;          /* len: the partial gradient where sampled */
    uint32_t *sample;   /* max(len, tau) sampled coordinates */
    double *prob;       /* len importance probabilities, or NULL */
    double *ja;         /* lsq, sketched: J a_i for every column (len columns
                           of m), or NULL */
    double *ay;         /* with ja: a_i' y */
    double *u;          /* select 1: 2 max(len, tau) utilities, or NULL */
    bcfw_noise_t nz;    /* the job's noise (noise_scales) */
    uint64_t clip_rows; /* rows of the block with an entry clipped */
    uint64_t clip_ents; /* entries clipped */
    uint64_t clip_res;  /* residuals clipped, over all iterations */
    uint64_t res_seen;  /* residuals computed, over all iterations */
} bcfw_client_t;

static void client_free(void *state)
{
    bcfw_client_t *c = state;

    if (c == NULL)
        return;
    sfl_csr_free(c->at);
    sfl__free(c->marg);
    sfl__free(c->r);
    sfl__free(c->g);
    sfl__free(c->sample);
    sfl__free(c->prob);
    sfl__free(c->ja);
    sfl__free(c->ay);
    sfl__free(c->u);
    sfl__free(c);
}

/* at = X' (len rows of n): counts per column, offsets, then the entries
 * in row order, so every row of at has ascending columns. */
static int transpose(const sfl_csr_t *X, sfl_csr_t **out)
{
    sfl_csr_t *at;
    size_t *next;
    int rc;

    if ((rc = sfl_csr_new(X->ncols, X->nrows, X->nnz, &at)) < 0)
        return rc;
    if ((next = sfl__mallocarray((size_t)X->ncols + 1, sizeof(size_t))) == NULL) {
        sfl_csr_free(at);
        return SFL_ENOMEM;
    }
    memset(at->rowptr, 0, ((size_t)X->ncols + 1) * sizeof(size_t));
    for (size_t e = 0; e < X->nnz; e++)
        at->rowptr[X->colind[e] + 1]++;
    for (uint32_t i = 0; i < X->ncols; i++)
        at->rowptr[i + 1] += at->rowptr[i];
    memcpy(next, at->rowptr, ((size_t)X->ncols + 1) * sizeof(size_t));
    for (uint32_t j = 0; j < X->nrows; j++)
        for (size_t e = X->rowptr[j]; e < X->rowptr[j + 1]; e++) {
            size_t at_e = next[X->colind[e]]++;

            at->colind[at_e] = j;
            at->val[at_e] = X->val[e];
        }
    sfl__free(next);
    *out = at;
    return 0;
}

/* p_i = min(1, tau (mix / len + (1 - mix) c_i / sum c)), c_i = ||a_i||_2:
 * the expected sample is at most tau, no column has probability below
 * min(1, mix tau / len), and strong columns are drawn more often. */
static void importance(const bcfw_params_t *p, const sfl_csr_t *at, double *prob)
{
    uint32_t len = at->nrows;
    double sum = 0.0;

    for (uint32_t i = 0; i < len; i++) {
        double s = 0.0;

        for (size_t e = at->rowptr[i]; e < at->rowptr[i + 1]; e++)
            s += at->val[e] * at->val[e];
        prob[i] = sqrt(s);
        sum += prob[i];
    }
    for (uint32_t i = 0; i < len; i++) {
        double w = p->mix / len + (sum > 0.0 ? (1.0 - p->mix) * prob[i] / sum
                                             : (1.0 - p->mix) / len);
        double pi = p->tau * w;

        prob[i] = pi < 1.0 ? pi : 1.0;
    }
}

static int client_new(const sfl_vjob_t *job, const sfl_vblock_t *blk, void **out)
{
    const bcfw_params_t *p = params_of(job);
    const bcfw_common_t *cm = job->common;
    uint32_t n = job->nrows, len = blk->data->X->ncols;
    uint32_t ns = p->sampling == SAMPLE_NICE && p->tau > len ? p->tau : len;
    bcfw_client_t *c;
    int rc;

    *out = NULL;
    if (p->sketch && (cm == NULL || cm->n != n || cm->m != p->m))
        return sfl__fail(SFL_EINVAL, "%s: the job's sketch is missing or for another job",
                         job->algo->name);
    if ((c = sfl__calloc(1, sizeof(*c))) == NULL)
        return SFL_ENOMEM;
    if ((rc = transpose(blk->data->X, &c->at)) < 0)
        goto fail;
    rc = SFL_ENOMEM;
    if ((c->marg = sfl__mallocarray(n, sizeof(double))) == NULL ||
        (c->r = sfl__mallocarray(n, sizeof(double))) == NULL ||
        (c->g = sfl__calloc(len, sizeof(double))) == NULL ||
        (c->sample = sfl__mallocarray(ns, sizeof(uint32_t))) == NULL)
        goto fail;
    if ((rc = noise_scales(job, &c->nz)) < 0)
        goto fail;
    rc = SFL_ENOMEM;
    if (c->nz.kind == SFL_DP_MECH_EM && c->nz.beta > 0 &&
        (c->u = sfl__mallocarray(2 * (size_t)ns, sizeof(double))) == NULL)
        goto fail;
    /* Private runs clip every entry of the block to [-clip_a, clip_a] before
     * anything uses it: each block holder its own entries, so every row
     * obeys |a_ji| <= clip_a across all blocks, the bound the sensitivities
     * assume (docs/privacy.md). */
    if (c->nz.clip) {
        uint8_t *hit = sfl__calloc(n, 1);

        if (hit == NULL)
            goto fail;
        for (size_t e = 0; e < c->at->nnz; e++) {
            double v = c->at->val[e];

            if (!(fabs(v) <= p->clip_a)) {
                c->at->val[e] = isnan(v) ? 0.0 : v > 0 ? p->clip_a : -p->clip_a;
                c->clip_ents++;
                c->clip_rows += !hit[c->at->colind[e]];
                hit[c->at->colind[e]] = 1;
            }
        }
        sfl__free(hit);
    }
    if (p->sampling == SAMPLE_IMPORTANCE) {
        if ((c->prob = sfl__mallocarray(len, sizeof(double))) == NULL)
            goto fail;
        importance(p, c->at, c->prob);
    }
    /* Least squares, sketched: Table V's first row, g_i = (2/n) ((J a_i)' b
     * - a_i' y) with J a_i and a_i' y made once: m per coordinate and
     * iteration instead of J' b's m n (the same value, other roundings).
     * Not when residuals are clipped: that needs each row's residual. */
    if (p->sketch && job->prob->loss == &sfl_loss_lsq && !c->nz.clip) {
        uint32_t m = p->m;

        if ((c->ja = sfl__calloc((size_t)len * m, sizeof(double))) == NULL ||
            (c->ay = sfl__calloc(len, sizeof(double))) == NULL)
            goto fail;
        for (uint32_t i = 0; i < len; i++)
            for (size_t e = c->at->rowptr[i]; e < c->at->rowptr[i + 1]; e++) {
                const double *col = cm->J + (size_t)c->at->colind[e] * m;
                double v = c->at->val[e], *dst = c->ja + (size_t)i * m;

                for (uint32_t r = 0; r < m; r++)
                    dst[r] += v * col[r];
                c->ay[i] += v * blk->data->y[c->at->colind[e]];
            }
    }
    *out = c;
    return 0;
fail:
    client_free(c);
    return rc;
}

/* The coordinates of the block sampled in this iteration, ascending, into
 * c->sample; returns how many. */
static uint32_t sample_block(const bcfw_params_t *p, const sfl_vjob_t *job,
                             const sfl_vblock_t *blk, bcfw_client_t *c, sfl_vrng_t *rng,
                             int *rc)
{
    uint32_t len = blk->data->X->ncols, ns = 0;

    *rc = 0;
    switch (p->sampling) {
    case SAMPLE_NICE:
        /* tau of all d columns from the common stream, so that every client
         * sees the same draw, then the ones in this block */
        if ((*rc = sfl_rng_sample(&rng->common, job->prob->ncols, p->tau, c->sample)) < 0)
            return 0;
        for (uint32_t s = 0; s < p->tau; s++)
            if (c->sample[s] >= blk->col0 && c->sample[s] - blk->col0 < len)
                c->sample[ns++] = c->sample[s] - blk->col0;
        return ns;
    case SAMPLE_DISTRIBUTED:
        ns = p->tau < len ? p->tau : len;
        *rc = sfl_rng_sample(&rng->own, len, ns, c->sample);
        return *rc < 0 ? 0 : ns;
    case SAMPLE_IMPORTANCE:
        for (uint32_t i = 0; i < len; i++)
            if (sfl_rng_uniform(&rng->own) < c->prob[i])
                c->sample[ns++] = i;
        return ns;
    }
    for (uint32_t i = 0; i < len; i++)
        c->sample[i] = i;
    return len;
}

/* The residuals c->r of the broadcast bcast (unless lsq's sketched way
 * needs none), clipped to clip_r / n in private modes. */
static int residuals(const sfl_vjob_t *job, const sfl_vblock_t *blk, bcfw_client_t *c,
                     const double *bcast)
{
    const bcfw_params_t *p = params_of(job);
    const bcfw_common_t *cm = job->common;
    uint32_t n = job->nrows, m = p->sketch ? p->m : n;
    const double *marg = bcast;
    int rc;

    /* margins: b itself, or J' b (but for lsq's own way, below) */
    if (p->sketch && c->ja == NULL) {
        for (uint32_t j = 0; j < n; j++) {
            const double *col = cm->J + (size_t)j * m;
            double s = 0.0;

            for (uint32_t r = 0; r < m; r++)
                s += col[r] * bcast[r];
            c->marg[j] = s;
        }
        marg = c->marg;
    }
    if (c->ja == NULL &&
        (rc = sfl_bcfw_residual(job->prob->loss, marg, blk->data->y, n, c->r)) < 0)
        return rc;
    if (c->nz.clip) {
        /* |l'| <= clip_r for any label and any margin (a sketched or noisy
         * broadcast bounds neither) */
        double rmax = p->clip_r / n;

        for (uint32_t j = 0; j < n; j++)
            if (!(fabs(c->r[j]) <= rmax)) {
                c->r[j] = c->r[j] > 0 ? rmax : -rmax;
                c->clip_res++;
            }
        c->res_seen += n;
    }
    return 0;
}

/* The partial gradient g_i of local column i from the residuals. */
static double partial(const sfl_vjob_t *job, const bcfw_client_t *c, uint32_t i,
                      const double *bcast)
{
    const sfl_csr_t *at = c->at;
    uint32_t n = job->nrows, m = params_of(job)->m;
    double gi = 0.0;

    if (c->ja) {
        const double *col = c->ja + (size_t)i * m;

        for (uint32_t r = 0; r < m; r++)
            gi += col[r] * bcast[r];
        return 2.0 * (gi - c->ay[i]) / n;
    }
    for (size_t e = at->rowptr[i]; e < at->rowptr[i + 1]; e++)
        gi += at->val[e] * c->r[at->colind[e]];
    return gi;
}

int sfl_bcfw_scores(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                    void *state, double *scores)
{
    bcfw_client_t *c = state;
    double eta = params_of(job)->eta;
    int rc;

    if (job->algo->vertical != &bcfw_ops)
        return sfl__fail(SFL_EINVAL, "%s is not bcfw or dpbcfw", job->algo->name);
    if ((rc = residuals(job, blk, c, bcast)) < 0)
        return rc;
    for (uint32_t i = 0; i < blk->data->X->ncols; i++)
        scores[i] = eta * partial(job, c, i, bcast);
    return 0;
}

static int client_step(const sfl_vjob_t *job, const sfl_vblock_t *blk, uint64_t t,
                       const double *bcast, void *state, sfl_vrng_t *rng, double *msg)
{
    const bcfw_params_t *p = params_of(job);
    const bcfw_common_t *cm = job->common;
    bcfw_client_t *c = state;
    const sfl_csr_t *at = c->at;
    uint32_t n = job->nrows, ns, m = p->sketch ? p->m : n;
    double idx;
    int rc;

    (void)t;
    if ((c->nz.beta > 0 || c->nz.sd > 0) && rng->noise == NULL)
        return sfl__fail(SFL_EINVAL, "%s: private noise needs a noise source",
                         job->algo->name);
    if ((rc = residuals(job, blk, c, bcast)) < 0)
        return rc;
    ns = sample_block(p, job, blk, c, rng, &rc);
    if (rc < 0)
        return rc;
    /* partial gradients, perturbed for report-noisy-max */
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t i = c->sample[s];
        double gi = partial(job, c, i, bcast);

        if (!isfinite(gi))
            return sfl__fail(SFL_ENUMERIC, "%s: the partial gradient of column %u is not "
                             "finite", job->algo->name, blk->col0 + i + 1);
        /* report-noisy-max: the noisy LO value eta g_i + Lap(beta), which
         * has the sign of g_i and its argmax without noise */
        if (c->nz.beta > 0 && c->u == NULL &&
            !isfinite(gi = sfl_dp_release_laplace(rng->noise, p->eta * gi, c->nz.beta)))
            return sfl__wrap(SFL_ENUMERIC, "%s: Laplace noise of scale %g",
                             job->algo->name, c->nz.beta);
        c->g[i] = gi;
    }
    if (c->u != NULL && ns > 0) {
        /* the exponential mechanism over the 2 ns vertices -+eta e_i, utility
         * -<g, v> = -+eta g_i (eq. 12's LO value, larger is better) */
        size_t pick;

        for (uint32_t s = 0; s < ns; s++) {
            double v = p->eta * c->g[c->sample[s]];

            c->u[2 * s] = -v; /* vertex +eta e_i */
            c->u[2 * s + 1] = v; /* vertex -eta e_i */
        }
        if ((rc = sfl_dp_select_exp(rng->noise, c->u, 2 * (size_t)ns, c->nz.beta, &pick)) < 0)
            return sfl__wrap(rc, "%s: exponential mechanism of scale %g", job->algo->name,
                             c->nz.beta);
        idx = (pick & 1 ? -1.0 : 1.0) * ((double)blk->col0 + c->sample[pick / 2] + 1.0);
    } else {
        idx = sfl_bcfw_oracle(c->g, c->sample, ns, blk->col0);
    }
    msg[0] = idx;
    memset(msg + 1, 0, m * sizeof(double));
    if (idx == 0.0)
        return 0;
    /* the active feature a_i (i local), exact or sketched */
    {
        uint32_t i = (uint32_t)(fabs(idx) - 1.0) - blk->col0;

        if (c->ja)
            memcpy(msg + 1, c->ja + (size_t)i * m, m * sizeof(double));
        for (size_t e = at->rowptr[i]; e < at->rowptr[i + 1] && !c->ja; e++) {
            uint32_t j = at->colind[e];
            double v = at->val[e];

            if (p->sketch) {
                const double *col = cm->J + (size_t)j * m;

                for (uint32_t r = 0; r < m; r++)
                    msg[1 + r] += v * col[r];
            } else {
                msg[1 + j] = v;
            }
        }
    }
    for (uint32_t r = 0; r < m && c->nz.sd > 0; r++)
        if (!isfinite(msg[1 + r] = sfl_dp_release_gaussian(rng->noise, msg[1 + r], c->nz.sd)))
            return sfl__wrap(SFL_ENUMERIC, "%s: Gaussian noise of sd %g", job->algo->name,
                             c->nz.sd);
    return 0;
}

/* ---- the server ------------------------------------------------------- */

static size_t feature_len(const sfl_vjob_t *job)
{
    const bcfw_params_t *p = params_of(job);

    return p->sketch ? p->m : job->nrows;
}

static size_t bcast_len(const sfl_vjob_t *job)
{
    return feature_len(job);
}

static size_t msg_len(const sfl_vjob_t *job)
{
    return 1 + feature_len(job);
}

static uint32_t steps(const sfl_algo_params_t *p)
{
    (void)p;
    return 1;
}

static int server_step(const sfl_vjob_t *job, uint64_t t, const double *const *msgs,
                       double *global, double *bcast)
{
    const bcfw_params_t *p = params_of(job);
    uint32_t K = job->nclients, d = job->prob->ncols;
    size_t L = feature_len(job);
    double gamma = sfl_bcfw_step(sfl_bcfw_pmin(job), t), ge = gamma * p->eta;
    int rc;

    /* every message first: a bad one changes nothing */
    for (uint32_t k = 0; k < K; k++) {
        double idx = msgs[k][0], a = fabs(idx);
        uint32_t col0, len;

        if ((rc = sfl_vertical_block(d, K, k, &col0, &len)) < 0)
            return rc;
        if (idx != floor(idx) || (a != 0.0 && (a < col0 + 1.0 || a > (double)col0 + len)))
            return sfl__fail(SFL_EINVAL, "client %u sent index %g outside its columns "
                             "[%u, %u]", k, idx, col0 + 1, col0 + len);
        for (size_t r = 0; r < L; r++)
            if (!isfinite(msgs[k][1 + r]))
                return sfl__fail(SFL_ENUMERIC, "client %u sent a non-finite feature", k);
    }
    for (uint32_t j = 0; j < d; j++)
        global[j] *= 1.0 - gamma;
    for (size_t r = 0; r < L; r++)
        bcast[r] *= 1.0 - gamma;
    for (uint32_t k = 0; k < K; k++) {
        double idx = msgs[k][0], sg = idx > 0 ? ge : -ge;

        if (idx == 0.0)
            continue;
        global[(uint32_t)fabs(idx) - 1] += sg;
        for (size_t r = 0; r < L; r++)
            bcast[r] += sg * msgs[k][1 + r];
    }
    return 0;
}

/* ---- checks and tables ------------------------------------------------ */

static int check(const sfl_vjob_t *job)
{
    const bcfw_params_t *p = params_of(job);
    const char *name = job->algo->name;

    if (p->sampling == SAMPLE_NICE && p->tau > job->prob->ncols)
        return sfl__fail(SFL_EINVAL, "%s: tau-nice sampling draws tau of the %u columns, "
                         "got tau %u", name, job->prob->ncols, p->tau);
    /* the sketch lives in memory at every party: m x n doubles */
    if (p->sketch && (uint64_t)p->m * job->nrows > ((uint64_t)1 << 28))
        return sfl__fail(SFL_ELIMIT, "%s: a sketch of m %u x n %u doubles is too large "
                         "(at most 2^28)", name, p->m, job->nrows);
    /* index noise alone, sketched: every margin J'J A x moves with every
     * sample's row, so one sample moves every score, not one term of it */
    if (p->dp_noise == NOISE_INDEX && p->sketch)
        return sfl__fail(SFL_EINVAL, "%s: dp_noise 2 (the index noise alone) needs sketch 0: "
                         "a sketched broadcast mixes every sample into every margin, and the "
                         "index is not private", name);
    if (p->dp_noise != NOISE_NONE) {
        /* the calibration's own checks, before any client starts (the
         * feature's part needs the sketch, made later) */
        sfl_dp_bcfw_t dp = calib_of(job);
        double b, sens;
        int rc = p->dp_noise == NOISE_PRINTED
                     ? sfl_dp_bcfw_index_scale(&dp, &b)
                     : sfl_dp_bcfw_score_sens(job->nrows, p->eta, p->clip_a, p->clip_r, &sens);

        if (rc == 0 && p->dp_noise != NOISE_PRINTED)
            rc = sfl_dp_bcfw_index_scale_for(&dp, sens, &b);
        if (rc < 0)
            return sfl__wrap(rc, "%s", name);
    }
    return 0;
}

/* ---- the privacy spent ------------------------------------------------ */

/* Per iteration, each of the K clients releases its index (one draw of
 * report-noisy-max or of the exponential mechanism) and, with feature
 * noise, its feature plus N(0, sd^2 I); replacing one sample touches every
 * block, so all K draws count. The sensitivities recorded are the ones the
 * scales were calibrated for (noise_scales): one sample's contribution in
 * modes 1 and 2; in mode 3 the paper's 2 G eta / (K n) and J a's sigma(J)
 * (n times its sd's sigma(J) / n, so mode 3 shows as not private). */
static int account(const sfl_vjob_t *job, uint64_t iters, sfl_dp_acct_t *acct)
{
    const bcfw_params_t *p = params_of(job);
    sfl_dp_acct_t a = *acct;
    bcfw_noise_t nz;
    int rc;

    if (p->dp_noise == NOISE_NONE)
        return 0;
    if ((rc = noise_scales(job, &nz)) < 0)
        return rc;
    if (iters == 0)
        return 1;
    if ((rc = record(job, &nz, iters, &a)) < 0)
        return rc;
    *acct = a;
    return 1;
}

static void clipped(const void *state, sfl_vclip_t *out)
{
    const bcfw_client_t *c = state;

    *out = (sfl_vclip_t){.rows = c->clip_rows, .entries = c->clip_ents,
                         .residuals = c->clip_res, .residuals_seen = c->res_seen};
}

/* f(x) = mean_j l(b_j, y_j): exact when b = A x (no sketch), and free of
 * privacy cost only when nothing of the job is private (no noise). */
static int objective(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                     double *f)
{
    const bcfw_params_t *p = params_of(job);
    const sfl_loss_t *loss = job->prob->loss;
    double s = 0.0;

    *f = 0.0;
    if (p->sketch || p->dp_noise != NOISE_NONE)
        return 0;
    if (loss->margin_loss == NULL)
        return sfl__fail(SFL_EUNSUP, "%s is not a linear loss", loss->name);
    for (uint32_t j = 0; j < job->nrows; j++) {
        double dl;

        s += loss->margin_loss(bcast[j], blk->data->y[j], &dl);
    }
    *f = s / job->nrows;
    return 1;
}

static const sfl_vertical_ops_t bcfw_ops = {
    .bcast_len = bcast_len,
    .msg_len = msg_len,
    .msg_ints = 1,
    .steps = steps,
    .check = check,
    .common_new = common_new,
    .common_free = common_free,
    .client_new = client_new,
    .client_free = client_free,
    .client_step = client_step,
    .server_step = server_step,
    .account = account,
    .clipped = clipped,
    .objective = objective,
};

const sfl_algo_t sfl_algo_bcfw = {
    .name = "bcfw",
    .summary = "BCFW-AS: Frank-Wolfe over column blocks, exact gradients, sampled coordinates",
    .params = bcfw_param_defs,
    .params_size = sizeof(bcfw_params_t),
    .shape = SFL_SHAPE_VERTICAL,
    .vertical = &bcfw_ops,
};

const sfl_algo_t sfl_algo_dpbcfw = {
    .name = "dpbcfw",
    .summary = "DP-BCFW: private index and sketched active features over column blocks",
    .params = dpbcfw_param_defs,
    .params_size = sizeof(bcfw_params_t),
    .shape = SFL_SHAPE_VERTICAL,
    .vertical = &bcfw_ops,
};

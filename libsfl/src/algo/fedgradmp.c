/* FedGradMP (seed 004, Alg. 1) and inexact FedGradMP (Alg. 2): federated
 * stochastic gradient matching pursuit. Each of the K local steps is
 *   r      = grad f_B(x)              minibatch gradient (p->sgd.batch rows)
 *   Gamma  = top-2tau |A^T r|         approx_2tau, exact H for the basis
 *   Ghat   = Gamma u Lambda
 *   b      = argmin f_i(x), supp ⊂ Ghat   over ALL the client's rows
 *   Lambda = top-tau |b|,  x = b on Lambda    (then Pi_R if l2_ball > 0)
 * per class block for softmax. The client uploads x_{t,K+1} (tau-sparse per
 * block); the server averages, keeps the top tau per block and projects
 * onto the l2 ball of radius R when one is set.
 *
 * Choices the paper leaves open, and why:
 * - Lambda at the start of a round is supp(x_t), the support (top tau per
 *   block) of the broadcast model: empty in round 1 as in the paper's
 *   Lambda = {} and afterwards the server's current support estimate. The
 *   paper's pseudo-code carries Lambda in one variable across clients and
 *   rounds, which no real federation has; this choice needs no client
 *   state, so any cohort (partial participation) works unchanged.
 * - Exact variant: least squares only. The restricted problem is then the
 *   normal equations (Z_G'Z_G + n lambda/2 A_G'A_G) b = Z_G'y, Z_G the
 *   client's rows restricted to the columns Ghat (times A_Ghat with a
 *   dictionary), solved by LAPACK Cholesky. When they are singular the
 *   minimum-norm least-squares solution is taken instead, one of the
 *   minimisers and the one of smallest norm: with |Ghat| > n rows (the
 *   paper's 100-row clients once 3 tau > 100) by dgelsd on the n x |Ghat|
 *   system itself, O(n^2 |Ghat|); when the Gram is singular for another
 *   reason (duplicate or empty columns) by dgelsd on the Gram, as
 *   pinv(B'B) B'y = pinv(B) y. Cost O(|Ghat|^2 n + |Ghat|^3), memory
 *   O(|Ghat|^2): the design is built 64 rows at a time. Other losses have
 *   no closed form and are refused (use fedgradmp-inexact).
 * - Inexact variant: b is p->inexact_steps (0: 10) full-gradient steps of
 *   size p->sgd.lr on f_i restricted to Ghat, from x restricted to Ghat. Full
 *   local data rather than the step's minibatch: it is f_i the paper
 *   minimises, and GD is the method Sec. IV-A analyses.
 * - Dictionary (Sec. IV-D): the state is the coefficient vector c (prob->dim
 *   = nblocks * atoms, see sfl_dict_attach) and the model is x = A c per
 *   block; model_of converts for evaluation.
 * - Determinism: all reductions are sequential loops in a fixed order;
 *   only the small g x g factorizations go to LAPACK. OpenBLAS may thread
 *   those for large g, and its kernels differ between CPUs, so bit-for-bit
 *   replay across machines needs the same BLAS build and, to be safe,
 *   OPENBLAS_NUM_THREADS=1. */
#include "sfl/algo/algo.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/model/dict.h"

#define DEFAULT_INEXACT_STEPS 10

typedef struct gradmp_params {
    sfl_sgd_params_t sgd;
    double l2_ball;
    uint32_t inexact_steps;
} gradmp_params_t;

#define GRADMP_COMMON_PARAMS                                                            \
    SFL_PARAM_DEF_TAU(gradmp_params_t, sgd.tau),                                        \
    SFL_PARAM_DEF_K(gradmp_params_t, sgd.local_steps),                                  \
    SFL_PARAM_DEF_BATCH(gradmp_params_t, sgd.batch),                                    \
    SFL_PARAM_DEF_LAMBDA(gradmp_params_t, sgd.lambda),                                  \
    {"l2_ball", "R", SFL_PARAM_REAL, offsetof(gradmp_params_t, l2_ball), 0, 0, HUGE_VAL, 0, \
     "project local and global models onto the l2 ball of radius R (0: none)"}

static const sfl_param_def_t exact_params[] = {GRADMP_COMMON_PARAMS, {0}};
static const sfl_param_def_t inexact_params[] = {
    SFL_PARAM_DEF_LR(gradmp_params_t, sgd.lr),
    GRADMP_COMMON_PARAMS,
    {"inexact_steps", "b", SFL_PARAM_COUNT, offsetof(gradmp_params_t, inexact_steps),
     DEFAULT_INEXACT_STEPS, 1, UINT32_MAX, 0,
     "gradient steps that solve each restricted subproblem"},
    {0},
};

/* Rows of the restricted design held at once: enough that each Gram dot is
 * a real loop, small enough that the block stays in cache. */
#define CHUNK 64
/* Largest |Ghat| the exact solve accepts: two g x g matrices of 512 MiB. */
#define GMAX_EXACT 8192

/* Per-call scratch, sized once from the problem and tau. */
typedef struct scratch {
    double *c;       /* dense state (prob->dim); ws->x for the standard basis */
    int own_c;       /* c allocated here (dictionary: ws->x holds A c) */
    double *rc;      /* A^T r (dictionary only; else the gradient is used) */
    uint32_t *gam;   /* Gamma, nblocks * tau2 */
    uint32_t *lam;   /* Lambda, nblocks * tau */
    double *lamv;    /* b on Lambda */
    uint32_t nlam;
    uint32_t *ghat;  /* Gamma u Lambda, gmax */
    double *bv;      /* b on ghat */
    uint32_t *sel;   /* top-tau positions of one block */
    /* exact solve */
    size_t gcap;     /* g the arrays below hold */
    double *gram, *gram2; /* g x g, column-major; 2 = copy for the fallback */
    double *rhs, *rhs2;
    double *chunk;   /* CHUNK x g restricted design block, column-major */
    double *ych;     /* CHUNK targets */
    uint32_t *nzc;   /* nonzero columns of the block */
    double *sv;      /* singular values (dgelsd) */
    double *work;
    lapack_int lwork;
    lapack_int *iwork;
} scratch_t;

static void scratch_free(scratch_t *s)
{
    if (s->own_c)
        sfl__free(s->c);
    sfl__free(s->rc);
    sfl__free(s->gam);
    sfl__free(s->lam);
    sfl__free(s->lamv);
    sfl__free(s->ghat);
    sfl__free(s->bv);
    sfl__free(s->sel);
    sfl__free(s->gram);
    sfl__free(s->gram2);
    sfl__free(s->rhs);
    sfl__free(s->rhs2);
    sfl__free(s->chunk);
    sfl__free(s->ych);
    sfl__free(s->nzc);
    sfl__free(s->sv);
    sfl__free(s->work);
    sfl__free(s->iwork);
    memset(s, 0, sizeof(*s));
}

/* Arrays of the exact solve for |Ghat| <= g with n rows, and LAPACK's
 * workspace (size queries first: dgelsd's needs depend on the shapes it will
 * see, g x g and, when n < g, n x g). */
static int scratch_exact(scratch_t *s, size_t g, uint32_t n)
{
    double wq = 0.0, wq2 = 0.0;
    lapack_int iwq = 0, iwq2 = 0, rank, info;

    if (g > GMAX_EXACT)
        return sfl__fail(SFL_ELIMIT, "fedgradmp: exact solve on %zu coefficients (> %d); "
                         "use fedgradmp-inexact", g, GMAX_EXACT);
    if (g == 0)
        g = 1;
    s->gcap = g;
    s->gram = sfl__mallocarray(g * g, sizeof(double));
    s->gram2 = sfl__mallocarray(g * g, sizeof(double));
    s->rhs = sfl__mallocarray(g, sizeof(double));
    s->rhs2 = sfl__mallocarray(g, sizeof(double));
    s->chunk = sfl__mallocarray((size_t)CHUNK * g, sizeof(double));
    s->ych = sfl__mallocarray(CHUNK, sizeof(double));
    s->nzc = sfl__mallocarray(g, sizeof(uint32_t));
    s->sv = sfl__mallocarray(g, sizeof(double));
    if (!s->gram || !s->gram2 || !s->rhs || !s->rhs2 || !s->chunk || !s->ych || !s->nzc ||
        !s->sv)
        return SFL_ENOMEM;
    info = LAPACKE_dgelsd_work(LAPACK_COL_MAJOR, (lapack_int)g, (lapack_int)g, 1, s->gram2,
                               (lapack_int)g, s->rhs2, (lapack_int)g, s->sv, -1.0, &rank, &wq,
                               -1, &iwq);
    if (info == 0 && n > 0 && n < g)
        info = LAPACKE_dgelsd_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)g, 1, s->gram2,
                                   (lapack_int)n, s->rhs2, (lapack_int)g, s->sv, -1.0, &rank,
                                   &wq2, -1, &iwq2);
    if (info != 0)
        return sfl__fail(SFL_EINVAL, "fedgradmp: LAPACK workspace query failed (%d)",
                         (int)info);
    wq = wq2 > wq ? wq2 : wq;
    iwq = iwq2 > iwq ? iwq2 : iwq;
    /* dpocon needs 3g doubles and g ints, dlansy g doubles. */
    s->lwork = (lapack_int)wq > 3 * (lapack_int)g ? (lapack_int)wq : 3 * (lapack_int)g;
    if (iwq < (lapack_int)g)
        iwq = (lapack_int)g;
    s->work = sfl__mallocarray((size_t)s->lwork, sizeof(double));
    s->iwork = sfl__mallocarray((size_t)iwq, sizeof(lapack_int));
    if (!s->work || !s->iwork)
        return SFL_ENOMEM;
    return 0;
}

/* <a, b> with four partial sums in a fixed order (deterministic, and not
 * one long dependency chain). */
static double dot4(const double *a, const double *b, size_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t k = 0;

    for (; k + 4 <= n; k += 4) {
        s0 += a[k] * b[k];
        s1 += a[k + 1] * b[k + 1];
        s2 += a[k + 2] * b[k + 2];
        s3 += a[k + 3] * b[k + 3];
    }
    for (; k < n; k++)
        s0 += a[k] * b[k];
    return (s0 + s1) + (s2 + s3);
}

/* The first position in a[lo..hi) (sorted) holding a value >= key; hi if
 * there is none. */
static size_t lower_bound(const uint32_t *a, size_t lo, size_t hi, uint32_t key)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* out[q * ld] = Z[i, G[q]] for the columns of G present in row i (out is
 * zeroed by the caller). Both index lists are sorted: walk the shorter one
 * and binary-search the longer, O(min log max) per row, so a dense row of
 * 1e5 entries costs O(g log d), not O(d). */
static void restrict_row(const sfl_csr_t *X, uint32_t i, const uint32_t *G, uint32_t g,
                         double *out, size_t ld)
{
    const uint32_t *ci = X->colind;
    const double *v = X->val;
    size_t k = X->rowptr[i], end = X->rowptr[i + 1];

    if (end - k <= g) {
        uint32_t lo = 0;

        for (; k < end && lo < g; k++) {
            lo = (uint32_t)lower_bound(G, lo, g, ci[k]);
            if (lo < g && G[lo] == ci[k])
                out[(size_t)lo * ld] = v[k];
        }
    } else {
        for (uint32_t q = 0; q < g && k < end; q++) {
            k = lower_bound(ci, k, end, G[q]);
            if (k < end && ci[k] == G[q])
                out[(size_t)q * ld] = v[k];
        }
    }
}

/* out[q * ld] = <z_i, a_{G[q]}>: row i of Z A_G. */
static void restrict_row_dict(const sfl_csr_t *X, uint32_t i, const sfl_dict_t *A,
                              const uint32_t *G, uint32_t g, double *out, size_t ld)
{
    const uint32_t *ci = X->colind;
    const double *v = X->val;
    size_t k0 = X->rowptr[i], end = X->rowptr[i + 1];

    for (uint32_t q = 0; q < g; q++) {
        const double *atom = A->a + (size_t)G[q] * A->n;
        double s = 0.0;

        for (size_t k = k0; k < end; k++)
            s += v[k] * atom[ci[k]];
        out[(size_t)q * ld] = s;
    }
}

/* b[0..g) = argmin_c mean (z'A_G c - y)^2 + lambda/2 ||A_G c||^2 (A = I
 * without a dictionary); see the file comment. */
static int solve_exact(scratch_t *s, const sfl_dataset_t *local, const sfl_dict_t *A,
                       const uint32_t *G, uint32_t g, double lambda, double *b, int *minnorm)
{
    const sfl_csr_t *X = local->X;
    uint32_t n = X->nrows;
    lapack_int gi = (lapack_int)g, info, rank;
    double *gram = s->gram, *rhs = s->rhs;
    double thresh = (double)g * DBL_EPSILON, anorm, rcond = 0.0;

    *minnorm = 0;
    if (g == 0)
        return 0;
    if (g > n && lambda == 0) {
        /* Underdetermined: the Gram is singular for sure, and the
         * minimum-norm solution of the n x g system itself costs O(n^2 g)
         * instead of O(g^3). B (n x g, n < g) fits in gram2. */
        double *B = s->gram2;

        memset(B, 0, (size_t)n * g * sizeof(double));
        for (uint32_t i = 0; i < n; i++) {
            if (A)
                restrict_row_dict(X, i, A, G, g, B + i, n);
            else
                restrict_row(X, i, G, g, B + i, n);
            s->rhs2[i] = local->y[i];
        }
        info = LAPACKE_dgelsd_work(LAPACK_COL_MAJOR, (lapack_int)n, gi, 1, B, (lapack_int)n,
                                   s->rhs2, gi, s->sv, thresh, &rank, s->work, s->lwork,
                                   s->iwork);
        if (info != 0)
            return sfl__fail(SFL_ENUMERIC, "fedgradmp: least-squares SVD did not converge "
                             "(%d)", (int)info);
        memcpy(b, s->rhs2, g * sizeof(double));
        *minnorm = 1;
        return 0;
    }
    /* Gram (upper triangle) and right-hand side, CHUNK rows at a time. */
    memset(gram, 0, (size_t)g * g * sizeof(double));
    memset(rhs, 0, g * sizeof(double));
    for (uint32_t r0 = 0; r0 < n; r0 += CHUNK) {
        uint32_t nr = n - r0 < CHUNK ? n - r0 : CHUNK, nnz = 0;
        double *ch = s->chunk;

        memset(ch, 0, (size_t)nr * g * sizeof(double));
        for (uint32_t i = 0; i < nr; i++) {
            if (A)
                restrict_row_dict(X, r0 + i, A, G, g, ch + i, nr);
            else
                restrict_row(X, r0 + i, G, g, ch + i, nr);
            s->ych[i] = local->y[r0 + i];
        }
        /* Columns that are zero in this block add nothing: skipping them
         * keeps sparse data at the cost of its nonzero columns. */
        for (uint32_t q = 0; q < g; q++) {
            const double *col = ch + (size_t)q * nr;
            uint32_t i = 0;

            while (i < nr && col[i] == 0.0)
                i++;
            if (i < nr)
                s->nzc[nnz++] = q;
        }
        for (uint32_t jb = 0; jb < nnz; jb++) {
            uint32_t qb = s->nzc[jb];
            const double *cb = ch + (size_t)qb * nr;

            rhs[qb] += dot4(cb, s->ych, nr);
            for (uint32_t ja = 0; ja <= jb; ja++) {
                uint32_t qa = s->nzc[ja];

                gram[qa + (size_t)qb * g] += dot4(ch + (size_t)qa * nr, cb, nr);
            }
        }
    }
    if (lambda > 0) {
        /* d/dc of lambda/2 ||A_G c||^2, scaled by n/2 like the data term. */
        double w = 0.5 * lambda * (double)n;

        for (uint32_t qb = 0; qb < g; qb++) {
            if (A == NULL) {
                gram[qb + (size_t)qb * g] += w;
                continue;
            }
            const double *ab = A->a + (size_t)G[qb] * A->n;
            for (uint32_t qa = 0; qa <= qb; qa++)
                gram[qa + (size_t)qb * g] += w * dot4(A->a + (size_t)G[qa] * A->n, ab, A->n);
        }
    }
    memcpy(s->gram2, gram, (size_t)g * g * sizeof(double));
    memcpy(s->rhs2, rhs, g * sizeof(double));

    /* Cholesky, accepted only if its condition estimate is sane: a
     * "successful" factorization of a numerically singular Gram would
     * return noise. */
    {
        anorm = LAPACKE_dlansy_work(LAPACK_COL_MAJOR, '1', 'U', gi, gram, gi, s->work);
        info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', gi, gram, gi);
        if (info == 0)
            info = LAPACKE_dpocon_work(LAPACK_COL_MAJOR, 'U', gi, gram, gi, anorm, &rcond,
                                       s->work, s->iwork);
        if (info == 0 && rcond >= thresh) {
            info = LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'U', gi, 1, gram, gi, rhs, gi);
            if (info != 0)
                return sfl__fail(SFL_ENUMERIC, "fedgradmp: Cholesky solve failed (%d)",
                                 (int)info);
            memcpy(b, rhs, g * sizeof(double));
            return 0;
        }
    }
    /* Minimum-norm fallback on the full symmetric matrix. */
    for (uint32_t qb = 0; qb < g; qb++)
        for (uint32_t qa = qb + 1; qa < g; qa++)
            s->gram2[qa + (size_t)qb * g] = s->gram2[qb + (size_t)qa * g];
    info = LAPACKE_dgelsd_work(LAPACK_COL_MAJOR, gi, gi, 1, s->gram2, gi, s->rhs2, gi, s->sv,
                               thresh, &rank, s->work, s->lwork, s->iwork);
    if (info != 0)
        return sfl__fail(SFL_ENUMERIC, "fedgradmp: least-squares SVD did not converge (%d)",
                         (int)info);
    memcpy(b, s->rhs2, g * sizeof(double));
    *minnorm = 1;
    return 0;
}

/* Problem shape shared by the helpers. */
typedef struct shape {
    const sfl_dict_t *A;
    size_t d;     /* state length */
    uint32_t nb;  /* blocks */
    size_t bl;    /* state block length */
    size_t fl;    /* model block length (features) */
    size_t mdim;  /* model length */
} shape_t;

static int shape_of(const sfl_problem_t *prob, shape_t *sh)
{
    size_t mdim;

    if (prob == NULL || prob->loss == NULL || prob->nblocks == 0)
        return sfl__fail(SFL_EINVAL, "fedgradmp: problem not initialised");
    mdim = sfl_loss_dim(prob->loss, prob->ncols, prob->nclasses);
    sh->A = prob->dict;
    sh->d = prob->dim;
    sh->nb = prob->nblocks;
    sh->bl = prob->dim / prob->nblocks;
    sh->fl = prob->ncols;
    sh->mdim = mdim;
    if (mdim != (size_t)sh->nb * sh->fl)
        return sfl__fail(SFL_EDIM, "fedgradmp: model of %zu entries is not %u blocks of %u",
                         mdim, sh->nb, prob->ncols);
    if (sh->A ? (sh->A->n != prob->ncols || sh->d != (size_t)sh->nb * sh->A->m)
              : sh->d != mdim)
        return sfl__fail(SFL_EDIM, "fedgradmp: state of %zu entries does not match the "
                         "problem (attach dictionaries with sfl_dict_attach)", sh->d);
    if (sh->d == 0 || sh->d % sh->nb != 0 || sh->d > UINT32_MAX)
        return sfl__fail(SFL_EDIM, "fedgradmp: bad state length %zu", sh->d);
    return 0;
}

/* x = model of the state entries idx[0..k) with values val (per block A c,
 * or a scatter for the standard basis). */
static void model_from_support(const shape_t *sh, const uint32_t *idx, const double *val,
                               uint32_t k, double *x)
{
    memset(x, 0, sh->mdim * sizeof(double));
    for (uint32_t q = 0; q < k; q++) {
        if (sh->A == NULL) {
            x[idx[q]] = val[q];
            continue;
        }
        size_t r = idx[q] / sh->bl, j = idx[q] % sh->bl;

        sfl_dvec_axpy(val[q], sh->A->a + j * sh->fl, x + r * sh->fl, sh->fl);
    }
}

/* x = model of the dense state c. */
static void model_from_state(const shape_t *sh, const double *c, double *x)
{
    if (sh->A == NULL) {
        memcpy(x, c, sh->d * sizeof(double));
        return;
    }
    for (uint32_t r = 0; r < sh->nb; r++)
        sfl_dict_apply(sh->A, c + r * sh->bl, x + r * sh->fl);
}

static uint32_t merge_sorted(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb,
                             uint32_t *out)
{
    uint32_t i = 0, j = 0, k = 0;

    while (i < na && j < nb) {
        if (a[i] < b[j])
            out[k++] = a[i++];
        else if (b[j] < a[i])
            out[k++] = b[j++];
        else
            out[k++] = a[i++], j++;
    }
    while (i < na)
        out[k++] = a[i++];
    while (j < nb)
        out[k++] = b[j++];
    return k;
}

int sfl_algo_gradmp_support(const sfl_problem_t *prob, uint32_t tau, const double *proxy,
                            const uint32_t *lam, uint32_t nlam, uint32_t *gam, uint32_t *ghat,
                            uint32_t *ng, sfl_topk_ws_t *ws)
{
    size_t bl = prob->dim / prob->nblocks;
    size_t tau2 = 2 * (size_t)tau < bl ? 2 * (size_t)tau : bl;
    uint32_t ngam = 0;

    if (tau == 0 || tau > bl)
        return sfl__fail(SFL_EINVAL, "fedgradmp: tau must be in [1, %zu], got %u", bl, tau);
    for (uint32_t i = 0; i < nlam; i++)
        if (lam[i] >= prob->dim || (i > 0 && lam[i] <= lam[i - 1]))
            return sfl__fail(SFL_EINVAL, "fedgradmp: support Lambda not sorted or out of "
                             "range at %u", i);
    for (uint32_t r = 0; r < prob->nblocks; r++) {
        int rc = sfl_topk_select(proxy + r * bl, bl, tau2, gam + ngam, ws);

        if (rc == SFL_ENUMERIC)
            return sfl__fail(SFL_ENUMERIC, "fedgradmp: non-finite gradient (diverged? "
                             "learning rate or data scale too large)");
        if (rc < 0)
            return rc;
        for (size_t q = 0; q < tau2; q++)
            gam[ngam + q] += (uint32_t)(r * bl);
        ngam += (uint32_t)tau2;
    }
    *ng = merge_sorted(gam, ngam, lam, nlam, ghat);
    return 0;
}

int sfl_algo_gradmp_solve(const sfl_dataset_t *local, const sfl_dict_t *dict,
                          const uint32_t *G, uint32_t g, double lambda, double *b, int *minnorm)
{
    scratch_t s = {0};
    uint32_t lim;
    int mn = 0, rc;

    if (local == NULL || local->X == NULL || (g > 0 && (G == NULL || b == NULL)))
        return sfl__fail(SFL_EINVAL, "gradmp_solve: NULL argument");
    if (!(lambda >= 0) || !isfinite(lambda))
        return sfl__fail(SFL_EINVAL, "gradmp_solve: lambda must be >= 0 and finite");
    if (dict && dict->n != local->X->ncols)
        return sfl__fail(SFL_EDIM, "gradmp_solve: atoms of %u entries, data of %u features",
                         dict->n, local->X->ncols);
    lim = dict ? dict->m : local->X->ncols;
    for (uint32_t q = 0; q < g; q++)
        if (G[q] >= lim || (q > 0 && G[q] <= G[q - 1]))
            return sfl__fail(SFL_EINVAL, "gradmp_solve: index set not sorted or out of range "
                             "at %u", q);
    rc = scratch_exact(&s, g, local->X->nrows);
    if (rc == 0)
        rc = solve_exact(&s, local, dict, G, g, lambda, b, &mn);
    if (minnorm)
        *minnorm = mn;
    scratch_free(&s);
    return rc;
}

/* b on ghat by `steps` gradient steps on f_i over all local rows, from the
 * current state restricted to ghat. x is model-sized scratch (it may be the
 * state itself, which is read first), gr the gradient. */
static int solve_inexact(const gradmp_params_t *p, const sfl_problem_t *prob,
                         const shape_t *sh, const sfl_dataset_t *local, scratch_t *s,
                         uint32_t ng, uint32_t steps, double *x, double *gr)
{
    const uint32_t *G = s->ghat;
    double *bv = s->bv;

    for (uint32_t q = 0; q < ng; q++)
        bv[q] = s->c[G[q]];
    if (sh->A == NULL)
        model_from_support(sh, G, bv, ng, x);
    for (uint32_t it = 0; it < steps; it++) {
        if (sh->A)
            model_from_support(sh, G, bv, ng, x);
        sfl_loss_grad(prob->loss, local, NULL, 0, x, p->sgd.lambda, gr);
        for (uint32_t q = 0; q < ng; q++) {
            double gq;

            if (sh->A) {
                size_t r = G[q] / sh->bl, j = G[q] % sh->bl;

                gq = dot4(sh->A->a + j * sh->fl, gr + r * sh->fl, sh->fl);
            } else {
                gq = gr[G[q]];
            }
            bv[q] -= p->sgd.lr * gq;
            if (sh->A == NULL)
                x[G[q]] = bv[q];
        }
    }
    return 0;
}

/* Lambda = top tau of |b| per block of ghat, with its values. */
static int select_lambda(const shape_t *sh, uint32_t tau, scratch_t *s, uint32_t ng,
                         sfl_topk_ws_t *ws)
{
    uint32_t q = 0;

    s->nlam = 0;
    for (uint32_t r = 0; r < sh->nb; r++) {
        uint32_t start = q, len, k;
        int rc;

        while (q < ng && s->ghat[q] < (r + 1) * sh->bl)
            q++;
        len = q - start;
        k = len < tau ? len : tau;
        rc = sfl_topk_select(s->bv + start, len, k, s->sel, ws);
        if (rc < 0)
            return rc;
        for (uint32_t i = 0; i < k; i++) {
            s->lam[s->nlam] = s->ghat[start + s->sel[i]];
            s->lamv[s->nlam] = s->bv[start + s->sel[i]];
            s->nlam++;
        }
    }
    return 0;
}

/* Pi_R: scale the state so that the model's l2 norm is at most R. */
static void project_ball(double R, double *val, size_t k, double nrm)
{
    if (nrm > R)
        sfl_dvec_scale(R / nrm, val, k);
}

static int client_update(const sfl_algo_params_t *algo_params, const sfl_problem_t *prob,
                         const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                         sfl_algo_ws_t *ws, sfl_spvec_t *update, int exact)
{
    const gradmp_params_t *p = SFL_ALGO_PARAMS(algo_params, gradmp_params_t);
    const sfl_algo_t *self = exact ? &sfl_algo_fedgradmp : &sfl_algo_fedgradmp_inexact;
    scratch_t s = {0};
    shape_t sh;
    uint32_t n, b, tau, tau2, gblk, ng = 0;
    uint32_t steps = p->inexact_steps ? p->inexact_steps : DEFAULT_INEXACT_STEPS;
    size_t gmax;
    int rc;

    if ((rc = sfl_algo_check(self, algo_params, prob)) < 0 || (rc = shape_of(prob, &sh)) < 0)
        return rc;
    if (exact && prob->loss != &sfl_loss_lsq)
        return sfl__fail(SFL_EUNSUP, "fedgradmp: the exact restricted solve needs the lsq "
                         "loss, not %s; use fedgradmp-inexact (gradient steps, any loss)",
                         prob->loss->name);
    if (local == NULL || local->X == NULL || local->X->nrows == 0)
        return sfl__fail(SFL_EEMPTY, "fedgradmp: client has no samples");
    if (local->X->ncols != prob->ncols)
        return sfl__fail(SFL_EDIM, "fedgradmp: client data has %u features, the model %u",
                         local->X->ncols, prob->ncols);
    if (update->dim != sh.d)
        return sfl__fail(SFL_EDIM, "fedgradmp: update vector has dimension %u, the state %zu",
                         update->dim, sh.d);
    n = local->X->nrows;
    b = p->sgd.batch < n ? p->sgd.batch : n;
    tau = p->sgd.tau;
    tau2 = 2 * (size_t)tau < sh.bl ? 2 * tau : (uint32_t)sh.bl;
    gblk = (size_t)tau2 + tau < sh.bl ? tau2 + tau : (uint32_t)sh.bl;
    gmax = (size_t)sh.nb * gblk;

    rc = sfl_algo_ws_reserve(ws, sh.d > sh.mdim ? sh.d : sh.mdim, b);
    if (rc < 0)
        return rc;
    /* Standard basis: the state is the model, so it lives in ws->x and the
     * update allocates nothing of size d (the agent's budget, DESIGN 6). */
    s.c = ws->x;
    s.gam = sfl__mallocarray((size_t)sh.nb * tau2, sizeof(uint32_t));
    s.lam = sfl__mallocarray((size_t)sh.nb * tau, sizeof(uint32_t));
    s.lamv = sfl__mallocarray((size_t)sh.nb * tau, sizeof(double));
    s.ghat = sfl__mallocarray(gmax, sizeof(uint32_t));
    s.bv = sfl__mallocarray(gmax, sizeof(double));
    s.sel = sfl__mallocarray(tau, sizeof(uint32_t));
    if (!s.gam || !s.lam || !s.lamv || !s.ghat || !s.bv || !s.sel) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if (sh.A) {
        s.own_c = 1;
        s.c = sfl__mallocarray(sh.d, sizeof(double));
        s.rc = sfl__mallocarray(sh.d, sizeof(double));
        if (s.c == NULL || s.rc == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
    }
    if (exact && (rc = scratch_exact(&s, gmax, n)) < 0)
        goto out;

    /* x_{t,1} = x_t, Lambda = supp(x_t) (top tau per block, nonzeros). */
    memcpy(s.c, global, sh.d * sizeof(double));
    for (uint32_t r = 0; r < sh.nb; r++) {
        const double *blk = global + r * sh.bl;

        rc = sfl_topk_select(blk, sh.bl, tau, s.sel, &ws->topk);
        if (rc < 0) {
            if (rc == SFL_ENUMERIC)
                rc = sfl__fail(rc, "fedgradmp: broadcast model holds NaN");
            goto out;
        }
        for (uint32_t i = 0; i < tau; i++)
            if (blk[s.sel[i]] != 0.0)
                s.lam[s.nlam++] = s.sel[i] + (uint32_t)(r * sh.bl);
    }

    for (uint32_t k = 0; k < p->sgd.local_steps; k++) {
        const uint32_t *rows;
        const double *x = s.c, *proxy = ws->g;
        int minnorm;

        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            goto out;
        /* r = grad f_B(x); the selection proxy is A^T r per block. */
        if (sh.A) {
            model_from_state(&sh, s.c, ws->x);
            x = ws->x;
        }
        sfl_loss_grad(prob->loss, local, rows, b, x, p->sgd.lambda, ws->g);
        if (sh.A) {
            for (uint32_t r = 0; r < sh.nb; r++)
                sfl_dict_apply_t(sh.A, ws->g + r * sh.fl, s.rc + r * sh.bl);
            proxy = s.rc;
        }
        rc = sfl_algo_gradmp_support(prob, tau, proxy, s.lam, s.nlam, s.gam, s.ghat, &ng,
                                     &ws->topk);
        if (rc < 0)
            goto out;
        if (exact)
            rc = solve_exact(&s, local, sh.A, s.ghat, ng, p->sgd.lambda, s.bv, &minnorm);
        else
            rc = solve_inexact(p, prob, &sh, local, &s, ng, steps, ws->x, ws->g);
        if (rc < 0)
            goto out;
        for (uint32_t q = 0; q < ng; q++)
            if (!isfinite(s.bv[q])) {
                rc = exact ? sfl__fail(SFL_ENUMERIC, "fedgradmp: restricted solve gave "
                                       "non-finite values (data scale too large?)")
                           : sfl__fail(SFL_ENUMERIC, "fedgradmp-inexact: local solve "
                                       "diverged (learning rate %g too large?)", p->sgd.lr);
                goto out;
            }
        if ((rc = select_lambda(&sh, tau, &s, ng, &ws->topk)) < 0)
            goto out;
        if (p->l2_ball > 0) {
            double nrm;

            if (sh.A) {
                model_from_support(&sh, s.lam, s.lamv, s.nlam, ws->x);
                nrm = sfl_dvec_nrm2(ws->x, sh.mdim);
            } else {
                nrm = sfl_dvec_nrm2(s.lamv, s.nlam);
            }
            project_ball(p->l2_ball, s.lamv, s.nlam, nrm);
        }
        memset(s.c, 0, sh.d * sizeof(double));
        for (uint32_t i = 0; i < s.nlam; i++)
            s.c[s.lam[i]] = s.lamv[i];
    }

    /* Upload x_{t,K+1}: Lambda's nonzero entries. */
    rc = sfl_spvec_reserve(update, s.nlam);
    if (rc < 0)
        goto out;
    update->nnz = 0;
    for (uint32_t i = 0; i < s.nlam; i++) {
        if (s.lamv[i] == 0.0)
            continue;
        update->idx[update->nnz] = s.lam[i];
        update->val[update->nnz] = s.lamv[i];
        update->nnz++;
    }
out:
    scratch_free(&s);
    return rc;
}

static int exact_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                        const double *global, const sfl_dataset_t *local, void *client_state,
                        sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    (void)client_state;
    return client_update(p, prob, global, local, rng, ws, update, 1);
}

static int inexact_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                          const double *global, const sfl_dataset_t *local, void *client_state,
                          sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    (void)client_state;
    return client_update(p, prob, global, local, rng, ws, update, 0);
}

/* Average, H_tau per block, then Pi_R on the model's norm. */
static int finish(sfl_fold_t *f, double *global)
{
    const sfl_problem_t *prob = f->prob;
    double R = SFL_ALGO_PARAMS(f->params, gradmp_params_t)->l2_ball, ss = 0.0;
    int rc = sfl_fold_mean_ht(f, global);

    if (rc < 0 || !(R > 0))
        return rc;
    if (prob->dict == NULL) {
        ss = sfl_dvec_nrm2(global, prob->dim);
        ss *= ss;
    } else {
        /* sum and topk.perm are free until the next begin: the block's
         * nonzero atoms and their values, for ||A c_r||. */
        size_t bl = prob->dim / prob->nblocks;
        uint32_t *idx = f->topk.perm;
        double *val = f->sum;

        for (uint32_t r = 0; r < prob->nblocks; r++) {
            uint32_t k = 0;

            for (size_t j = 0; j < bl; j++)
                if (global[r * bl + j] != 0.0) {
                    idx[k] = (uint32_t)j;
                    val[k++] = global[r * bl + j];
                }
            double nr = sfl_dict_nrm2_sparse(prob->dict, idx, val, k);
            ss += nr * nr;
        }
    }
    project_ball(R, global, prob->dim, sqrt(ss));
    return 0;
}

static int model_of(const sfl_algo_params_t *p, const sfl_problem_t *prob, const double *state,
                    double *model, sfl_topk_ws_t *ws)
{
    shape_t sh;
    int rc = shape_of(prob, &sh);

    (void)p;
    (void)ws;
    if (rc < 0)
        return rc;
    model_from_state(&sh, state, model);
    return 0;
}

const sfl_algo_t sfl_algo_fedgradmp = {
    .name = "fedgradmp",
    .params = exact_params,
    .params_size = sizeof(gradmp_params_t),
    .summary = "FedGradMP: local gradient matching pursuit, exact least-squares subproblems",
    .sparse = 1,
    .dictionary = 1,
    .client_update = exact_update,
    .finish = finish,
    .model_of = model_of,
};

const sfl_algo_t sfl_algo_fedgradmp_inexact = {
    .name = "fedgradmp-inexact",
    .params = inexact_params,
    .params_size = sizeof(gradmp_params_t),
    .summary = "Inexact FedGradMP: subproblems by gradient steps, any loss",
    .sparse = 1,
    .dictionary = 1,
    .client_update = inexact_update,
    .finish = finish,
    .model_of = model_of,
};

/* Calibration of DP-BCFW's noise (seed 003, Sec. IV-C) and sensitivity
 * bounds of the losses' gradient coordinates.
 *
 * The two scales are the paper's formulas as printed; what they spend is
 * counted by the accountant (accountant.c, docs/privacy.md), which also
 * says where the paper's arithmetic is loose. */
#include "sfl/dp/dp.h"

#include <math.h>
#include <string.h>

static int finite_pos(double x)
{
    return x > 0 && x < HUGE_VAL;
}

static int check_bcfw(const sfl_dp_bcfw_t *p)
{
    if (!finite_pos(p->epsilon) || !(p->delta > 0 && p->delta < 1))
        return sfl__fail(SFL_EINVAL, "dp: need epsilon > 0 and 0 < delta < 1 (got %g, %g)",
                         p->epsilon, p->delta);
    if (p->T == 0 || p->K == 0 || p->n == 0)
        return sfl__fail(SFL_EINVAL, "dp: T, K and n must be >= 1");
    if (!finite_pos(p->eta) || !finite_pos(p->G))
        return sfl__fail(SFL_EINVAL, "dp: need eta > 0 and G > 0 (got %g, %g)", p->eta, p->G);
    return 0;
}

static int finite_out(double v, double *out, const char *what)
{
    if (!finite_pos(v))
        return sfl__fail(SFL_ERANGE, "dp: %s is %g", what, v);
    *out = v;
    return 0;
}

int sfl_dp_bcfw_index_sens(const sfl_dp_bcfw_t *p, double *sens)
{
    int rc = check_bcfw(p);

    if (rc != 0)
        return rc;
    return finite_out(2.0 * p->G * p->eta / ((double)p->K * (double)p->n), sens,
                      "the index sensitivity");
}

int sfl_dp_bcfw_index_scale_for(const sfl_dp_bcfw_t *p, double sens, double *b)
{
    /* b = sens sqrt(2 T log(1/(delta/2))) / ((epsilon/(2K))/2): each node's
     * budget epsilon/(2K), halved for report-noisy-max (Lemma 1), spread
     * over T iterations by advanced composition. */
    double eps_node;
    int rc = check_bcfw(p);

    if (rc != 0)
        return rc;
    if (!finite_pos(sens))
        return sfl__fail(SFL_EINVAL, "dp: need a sensitivity > 0 (got %g)", sens);
    eps_node = p->epsilon / (2.0 * (double)p->K) / 2.0;
    return finite_out(sens * sqrt(2.0 * (double)p->T * log(2.0 / p->delta)) / eps_node, b,
                      "the index noise scale");
}

int sfl_dp_bcfw_index_scale(const sfl_dp_bcfw_t *p, double *b)
{
    double sens;
    int rc = sfl_dp_bcfw_index_sens(p, &sens);

    return rc != 0 ? rc : sfl_dp_bcfw_index_scale_for(p, sens, b);
}

int sfl_dp_bcfw_jl_sens(const sfl_dp_bcfw_t *p, double sigma_j, double *sens)
{
    int rc = check_bcfw(p);

    if (rc != 0)
        return rc;
    if (!finite_pos(sigma_j))
        return sfl__fail(SFL_EINVAL, "dp: need sigma(J) > 0 (got %g)", sigma_j);
    return finite_out(sigma_j / (double)p->n, sens, "the JL sensitivity");
}

int sfl_dp_bcfw_jl_sigma_for(const sfl_dp_bcfw_t *p, double sens, double *sd)
{
    /* eq. (17) with sensitivity sens: sens sqrt(K T) sqrt(2 (ln(1/delta) +
     * eps/2)) / (eps/2) */
    double half = p->epsilon / 2.0;
    int rc = check_bcfw(p);

    if (rc != 0)
        return rc;
    if (!finite_pos(sens))
        return sfl__fail(SFL_EINVAL, "dp: need a sensitivity > 0 (got %g)", sens);
    return finite_out(sens * sqrt((double)p->K * (double)p->T) *
                          sqrt(2.0 * (log(1.0 / p->delta) + half)) / half,
                      sd, "the JL noise sigma");
}

int sfl_dp_bcfw_jl_sigma(const sfl_dp_bcfw_t *p, double sigma_j, double *pi)
{
    /* eq. (17): pi = sigma(J) sqrt(K T) sqrt(2 (ln(1/delta) + eps/2)) / (n eps/2) */
    double sens;
    int rc = sfl_dp_bcfw_jl_sens(p, sigma_j, &sens);

    return rc != 0 ? rc : sfl_dp_bcfw_jl_sigma_for(p, sens, pi);
}

int sfl_dp_bcfw_score_sens(uint64_t n, double eta, double a_max, double r_max, double *sens)
{
    /* s_i = eta (1/n) sum_j a_ji r_j; replacing row j swaps one term a_ji r_j
     * (|.| <= a_max r_max) for another: |s_i - s'_i| <= 2 eta a_max r_max / n */
    if (n == 0 || !finite_pos(eta) || !finite_pos(a_max) || !finite_pos(r_max))
        return sfl__fail(SFL_EINVAL, "dp: score sensitivity needs n >= 1 and eta, a_max, "
                         "r_max > 0 (got %g, %g, %g)", eta, a_max, r_max);
    return finite_out(2.0 * eta * a_max * r_max / (double)n, sens, "the score sensitivity");
}

int sfl_dp_bcfw_feature_sens(double a_max, double c_j, double *sens)
{
    /* J a_i - J a'_i = J e_j (a_ji - a'_ji): at most 2 a_max ||J e_j|| */
    if (!finite_pos(a_max) || !finite_pos(c_j))
        return sfl__fail(SFL_EINVAL, "dp: feature sensitivity needs a_max, c_J > 0 (got %g, "
                         "%g)", a_max, c_j);
    return finite_out(2.0 * a_max * c_j, sens, "the feature sensitivity");
}

/* One step of power iteration on M = J J^T (J scaled by sc): w = J^T v,
 * u = J w, rho = v^T M v = ||w||^2; returns ||u - rho v|| and leaves u in
 * *u. */
static double power_step(const double *J, size_t m, size_t n, double sc, const double *v,
                         double *w, double *u, double *rho)
{
    double r2 = 0, p = 0;

    memset(w, 0, n * sizeof(*w));
    for (size_t i = 0; i < m; i++) {
        const double *row = J + i * n;
        double vi = v[i] * sc;

        for (size_t j = 0; j < n; j++)
            w[j] += row[j] * vi;
    }
    for (size_t j = 0; j < n; j++)
        p += w[j] * w[j];
    for (size_t i = 0; i < m; i++) {
        const double *row = J + i * n;
        double s = 0;

        for (size_t j = 0; j < n; j++)
            s += row[j] * w[j];
        u[i] = s * sc;
        r2 += (u[i] - p * v[i]) * (u[i] - p * v[i]);
    }
    *rho = p;
    return sqrt(r2);
}

/* v = x / ||x||; 0 if x is zero. */
static int normalize(const double *x, double *v, size_t m)
{
    double s = 0;

    for (size_t i = 0; i < m; i++)
        s += x[i] * x[i];
    if (s == 0)
        return 0;
    s = 1.0 / sqrt(s);
    for (size_t i = 0; i < m; i++)
        v[i] = x[i] * s;
    return 1;
}

/* A power of two sc with max |J_ij| sc in [0.5, 1), or 0 for a zero
 * matrix; SFL_ENUMERIC for a non-finite entry. */
static int scale_of(const double *J, size_t len, double *sc)
{
    double mx = 0;
    int e;

    for (size_t i = 0; i < len; i++) {
        double a = fabs(J[i]);

        if (!(a < HUGE_VAL))
            return sfl__fail(SFL_ENUMERIC, "dp: sketch entry %zu is not finite", i);
        if (a > mx)
            mx = a;
    }
    if (mx == 0) {
        *sc = 0;
        return 0;
    }
    (void)frexp(mx, &e);
    *sc = ldexp(1.0, -e);
    return 0;
}

int sfl_dp_sigma_max(const double *J, size_t m, size_t n, double *work, double *out)
{
    /* sigma_1(J)^2 = lambda_1(J J^T); iterate v <- J J^T v / ||.||. A start
     * from the fixed stream (0, 0, 0, SFL_STREAM_DP) is deterministic and
     * not orthogonal to the top singular vector except on a null set. */
    double *v = work, *u = work + m, *w = work + 2 * m, sc, rho, res;
    sfl_rng_t g;
    int rc;

    if (m == 0 || n == 0 || m > SIZE_MAX / n)
        return sfl__fail(SFL_EINVAL, "dp: sketch of %zu x %zu", m, n);
    if ((rc = scale_of(J, m * n, &sc)) != 0)
        return rc;
    if (sc == 0) {
        *out = 0;
        return 0;
    }
    sfl_rng_seed(&g, 0, 0, 0, SFL_STREAM_DP);
    for (size_t i = 0; i < m; i++)
        u[i] = sfl_rng_uniform(&g) - 0.5;
    (void)normalize(u, v, m);
    for (int it = 0; it < SFL_DP_SVD_MAX_ITERS; it++) {
        res = power_step(J, m, n, sc, v, w, u, &rho);
        if (res <= 1e-10 * rho && rho > 0) {
            *out = sqrt(rho + res) / sc;
            return 0;
        }
        if (!normalize(u, v, m)) /* v in the null space of J^T */
            return sfl__fail(SFL_ERANGE, "dp: power iteration hit the null space");
    }
    return sfl__fail(SFL_ERANGE, "dp: power iteration did not converge in %d steps",
                     SFL_DP_SVD_MAX_ITERS);
}

/* Bounds of |l'(m, y)| for |m| <= a_max eta, l as sfl/model/loss.h defines it. */
static double lp_lsq(const sfl_dp_bounds_t *b)
{
    return 2.0 * (b->a_max * b->eta + b->y_max); /* l = (m - y)^2 */
}

static double lp_logistic(const sfl_dp_bounds_t *b)
{
    (void)b;
    return 1.0; /* l' = sigmoid(m) - y, y in {0, 1} */
}

static double lp_sqhinge(const sfl_dp_bounds_t *b)
{
    return 2.0 * (1.0 + b->a_max * b->eta); /* l' = -2 s max(0, 1 - s m) */
}

static const struct {
    const char *name;
    double (*lprime)(const sfl_dp_bounds_t *b);
} losses[] = {
    {"lsq", lp_lsq},
    {"logistic", lp_logistic},
    {"sqhinge", lp_sqhinge},
};

/* L = sup |l'| for the named loss, after checking the bounds. */
static int lprime_bound(const char *loss, const sfl_dp_bounds_t *b, double *L)
{
    if (b->n == 0 || !(b->eta >= 0 && b->eta < HUGE_VAL) || !finite_pos(b->a_max) ||
        !(b->y_max >= 0 && b->y_max < HUGE_VAL))
        return sfl__fail(SFL_EINVAL, "dp: bounds need n >= 1, eta >= 0, a_max > 0, y_max >= 0");
    for (size_t i = 0; i < sizeof(losses) / sizeof(losses[0]); i++)
        if (loss != NULL && strcmp(loss, losses[i].name) == 0) {
            *L = losses[i].lprime(b);
            return 0;
        }
    return sfl__fail(SFL_ENOTFOUND, "dp: no sensitivity bound for loss '%s'",
                     loss ? loss : "(null)");
}

int sfl_dp_grad_bound(const char *loss, const sfl_dp_bounds_t *b, double *G)
{
    double L;
    int rc = lprime_bound(loss, b, &L);

    if (rc != 0)
        return rc;
    return finite_out(b->a_max * L, G, "the gradient bound");
}

int sfl_dp_grad_sens(const char *loss, const sfl_dp_bounds_t *b, double *sens)
{
    double L;
    int rc = lprime_bound(loss, b, &L);

    if (rc != 0)
        return rc;
    return finite_out(2.0 * b->a_max * L / (double)b->n, sens, "the gradient sensitivity");
}

/* Privacy accounting of a run: the mechanisms released, composed two ways.
 *
 * The paper's accounting (seed 003, Lemmas 2-3, Theorem 3), applied to what
 * was recorded so far. delta is split equally among the entries (the
 * paper's delta/2 for the index and delta/2 for the features); entries add
 * up (basic composition, its Lemma A). One entry of count k draws per
 * iteration over N iterations spends, at its share delta':
 *   Laplace, report-noisy-max: each draw is eps0-DP, eps0 = sens/b
 *     (Laplace) or 2 sens/b (report-noisy-max, its Lemma 1); the N
 *     iterations compose by advanced composition's leading term
 *     eps0 sqrt(2 N ln(1/delta')) (Dwork and Roth, Thm 3.20, the term the
 *     paper's calibration keeps) or, when smaller, basically, N eps0; the k
 *     draws of one iteration (one per node) add up:
 *       eps = k min(N eps0, eps0 sqrt(2 N ln(1/delta'))).
 *   Gaussian: the k N draws are one Gaussian mechanism of sensitivity
 *     sens sqrt(k N) (the sqrt(KT) of eq. 17), whose epsilon at delta'
 *     solves sigma = sens' sqrt(2 (ln(1/(2 delta')) + eps)) / eps
 *     (Kenthapadi et al. 2013's bound, which eq. 17 is at delta' = delta/2):
 *       eps = (1 + sqrt(1 + 2 z^2 ln(1/(2 delta')))) / z^2,
 *       z = sigma / (sens sqrt(k N)).
 *   The exponential mechanism counts as report-noisy-max (eps0 = 2 sens/b).
 * With the paper's calibration (calib.c) this gives back epsilon/2 + epsilon/2
 * after T iterations, and (epsilon/2) sqrt(t/T) per half after t of them (or
 * the linear basic count when smaller). It is the paper's arithmetic, not a
 * bound this library vouches for: it drops advanced composition's second
 * term N eps0 (e^eps0 - 1), and its K nodes each take delta' where basic
 * composition would give them delta'/K. docs/privacy.md.
 *
 * The Renyi-DP accounting (Mironov, "Renyi Differential Privacy", CSF 2017):
 * every draw's RDP at each order of a grid is summed (composition, Prop. 1)
 * and converted to (epsilon, delta) by eps = min_a rdp(a) + ln(1/delta) /
 * (a - 1) (Prop. 3) and by the tighter eps = rdp(a) + ln((a-1)/a) -
 * (ln delta + ln a)/(a - 1) (Canonne, Kamath, Steinke 2020, Prop. 12; Balle
 * et al. 2020, Thm. 21). The exponential mechanism is also eps0-bounded-
 * range, which caps its RDP at a eps0^2 / 8 (sfl_dp_rdp_br). When every entry is pure DP the order infinity
 * (basic composition, delta = 0) joins the grid. */
#include "sfl/dp/dp.h"

#include <math.h>
#include <string.h>

/* Orders of the RDP grid: dense where the optimum of usual budgets lies,
 * up to 4096 for the first iterations of a run, whose RDP is tiny. */
static const double orders[] = {
    1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
    18, 20, 22, 24, 26, 28, 30, 32, 36, 40, 48, 56, 64, 80, 96, 128, 160, 192, 256, 384,
    512, 768, 1024, 2048, 4096,
};
#define NORDERS (sizeof(orders) / sizeof(orders[0]))

static double rdp_laplace_e(double alpha, const sfl_dp_entry_t *e)
{
    return sfl_dp_rdp_laplace(alpha, e->scale, e->sens);
}

static double rdp_rnm_e(double alpha, const sfl_dp_entry_t *e)
{
    return sfl_dp_rdp_pure(alpha, 2.0 * (e->sens / e->scale));
}

static double rdp_em_e(double alpha, const sfl_dp_entry_t *e)
{
    return sfl_dp_rdp_br(alpha, 2.0 * (e->sens / e->scale));
}

static double rdp_gaussian_e(double alpha, const sfl_dp_entry_t *e)
{
    return sfl_dp_rdp_gaussian(alpha, e->scale, e->sens);
}

/* Per kind: eps0 = pure * sens / scale for the pure-DP ones (0: not pure),
 * and the RDP of one draw. */
static const struct mech {
    sfl_dp_mech_t kind;
    double pure;
    double (*rdp)(double alpha, const sfl_dp_entry_t *e);
} mechs[] = {
    {SFL_DP_MECH_LAPLACE, 1.0, rdp_laplace_e},
    {SFL_DP_MECH_RNM, 2.0, rdp_rnm_e},
    {SFL_DP_MECH_GAUSSIAN, 0.0, rdp_gaussian_e},
    {SFL_DP_MECH_EM, 2.0, rdp_em_e},
};

static const struct mech *mech_of(uint32_t kind)
{
    for (size_t i = 0; i < sizeof(mechs) / sizeof(mechs[0]); i++)
        if ((uint32_t)mechs[i].kind == kind)
            return &mechs[i];
    return NULL;
}

double sfl_dp_rdp_gaussian(double alpha, double sigma, double sens)
{
    if (!(alpha > 1) || !(sigma > 0) || !(sens >= 0))
        return NAN;
    if (sens == 0)
        return 0;
    double z = sens / sigma;

    return alpha * 0.5 * z * z;
}

double sfl_dp_rdp_pure(double alpha, double eps)
{
    /* The sharp bound, attained by randomized response (Steinke, "Sharp RDP
     * & zCDP from Pure DP", differentialprivacy.org 2024, Thm. 4):
     *   eps - log((1 + e^-eps) / (1 + e^-((2a-1) eps))) / (a - 1),
     * with min(eps, a eps^2/2) (D_inf <= eps; Bun and Steinke 2016, Prop.
     * 3.3), which it never exceeds, absorbing rounding. The log is taken
     * as log1p((e^-eps - e^-(c eps)) / (1 + e^-(c eps))), c = 2a - 1, with
     * the difference from expm1s: no cancellation near log 2 for small eps. */
    double c = 2 * alpha - 1, v;

    if (!(alpha > 1) || !(eps >= 0))
        return NAN;
    if (eps == 0)
        return 0;
    if (alpha == HUGE_VAL || eps == HUGE_VAL)
        return eps;
    v = log1p((expm1(-eps) - expm1(-c * eps)) / (1 + exp(-c * eps)));
    v = eps - v / (alpha - 1);
    return fmax(0.0, fmin(v, fmin(eps, alpha * 0.5 * eps * eps)));
}

double sfl_dp_rdp_br(double alpha, double eps)
{
    double v = sfl_dp_rdp_pure(alpha, eps);

    if (v != v || alpha == HUGE_VAL)
        return v;
    return fmin(v, alpha * eps * eps / 8.0);
}

double sfl_dp_rdp_laplace(double alpha, double b, double sens)
{
    /* Mironov Prop. 6 with 1/lambda = r = sens/b:
     *   (1/(a-1)) log(a/(2a-1) e^((a-1) r) + (a-1)/(2a-1) e^(-a r))
     * = r + log1p(w expm1(-(2a-1) r)) / (a-1),  w = (a-1)/(2a-1),
     * which neither overflows nor loses the small values to cancellation.
     * It is at most r (pure r-DP); the clamps only absorb rounding. */
    double r, w, v;

    if (!(alpha > 1) || !(b > 0) || !(sens >= 0))
        return NAN;
    r = sens / b;
    if (r == 0)
        return 0;
    if (alpha == HUGE_VAL || r == HUGE_VAL)
        return r;
    w = (alpha - 1) / (2 * alpha - 1);
    v = r + log1p(w * expm1(-(2 * alpha - 1) * r)) / (alpha - 1);
    return fmax(0.0, fmin(v, r));
}

void sfl_dp_acct_init(sfl_dp_acct_t *a)
{
    memset(a, 0, sizeof(*a));
}

static int finite_pos(double x)
{
    return x > 0 && x < HUGE_VAL;
}

static int same_key(const sfl_dp_entry_t *x, const sfl_dp_entry_t *y)
{
    return x->kind == y->kind && x->count == y->count && x->scale == y->scale &&
           x->sens == y->sens;
}

static int add(sfl_dp_acct_t *a, sfl_dp_mech_t kind, double scale, double sens, uint32_t count)
{
    sfl_dp_entry_t e = {.kind = kind, .count = count, .iters = 1, .scale = scale, .sens = sens};

    if (!finite_pos(scale) || !finite_pos(sens) || count == 0)
        return sfl__fail(SFL_EINVAL, "dp accountant: need scale, sensitivity > 0 and "
                                     "count >= 1 (got %g, %g, %u)", scale, sens, count);
    for (uint32_t i = 0; i < a->n; i++) {
        if (!same_key(&a->e[i], &e))
            continue;
        if (a->e[i].iters == UINT32_MAX)
            return sfl__fail(SFL_ERANGE, "dp accountant: more than 2^32 - 1 iterations");
        a->e[i].iters++;
        return 0;
    }
    if (a->n == SFL_DP_ACCT_MAX)
        return sfl__fail(SFL_ELIMIT, "dp accountant: more than %d distinct mechanisms",
                         SFL_DP_ACCT_MAX);
    a->e[a->n++] = e;
    return 0;
}

int sfl_dp_acct_add_laplace(sfl_dp_acct_t *a, double b, double sens, uint32_t count)
{
    return add(a, SFL_DP_MECH_LAPLACE, b, sens, count);
}

int sfl_dp_acct_add_rnm(sfl_dp_acct_t *a, double b, double sens, uint32_t count)
{
    return add(a, SFL_DP_MECH_RNM, b, sens, count);
}

int sfl_dp_acct_add_gaussian(sfl_dp_acct_t *a, double sigma, double sens, uint32_t count)
{
    return add(a, SFL_DP_MECH_GAUSSIAN, sigma, sens, count);
}

int sfl_dp_acct_add_em(sfl_dp_acct_t *a, double b, double sens, uint32_t count)
{
    return add(a, SFL_DP_MECH_EM, b, sens, count);
}

double sfl_dp_acct_rdp(const sfl_dp_acct_t *a, double alpha)
{
    double sum = 0;

    if (!(alpha > 1))
        return NAN;
    for (uint32_t i = 0; i < a->n; i++) {
        const sfl_dp_entry_t *e = &a->e[i];
        double draws = (double)e->count * (double)e->iters;

        sum += draws * mech_of(e->kind)->rdp(alpha, e);
    }
    return sum;
}

/* The paper's epsilon of one entry at its share dshare of delta (above). */
static double paper_entry(const sfl_dp_entry_t *e, double dshare)
{
    const struct mech *m = mech_of(e->kind);
    double k = e->count, N = e->iters;

    if (m->pure > 0) {
        double eps0 = m->pure * (e->sens / e->scale);

        return k * fmin(N * eps0, eps0 * sqrt(2.0 * N * log(1.0 / dshare)));
    }
    /* iz = 1/z, so a huge or tiny z gives inf or 0, never inf/inf. */
    double iz = e->sens * sqrt(k * N) / e->scale;
    double L = fmax(0.0, log(1.0 / (2.0 * dshare)));

    return iz * iz + sqrt(iz * iz * iz * iz + 2.0 * L * iz * iz);
}

/* Basic composition of pure entries; HUGE_VAL if any entry is not pure. */
static double pure_total(const sfl_dp_acct_t *a)
{
    double sum = 0;

    for (uint32_t i = 0; i < a->n; i++) {
        const sfl_dp_entry_t *e = &a->e[i];
        const struct mech *m = mech_of(e->kind);

        if (m->pure == 0)
            return HUGE_VAL;
        sum += (double)e->count * (double)e->iters * m->pure * (e->sens / e->scale);
    }
    return sum;
}

static void rdp_convert(const sfl_dp_acct_t *a, double delta, sfl_dp_spent_t *out)
{
    double pure = pure_total(a), ld = log(delta);

    out->eps_rdp = out->eps_rdp_tight = pure;
    out->order = out->order_tight = HUGE_VAL;
    for (size_t i = 0; i < NORDERS; i++) {
        double al = orders[i], r = sfl_dp_acct_rdp(a, al);
        double std = r - ld / (al - 1);
        double tight = fmax(0.0, r + log1p(-1.0 / al) - (ld + log(al)) / (al - 1));

        if (std < out->eps_rdp) {
            out->eps_rdp = std;
            out->order = al;
        }
        if (tight < out->eps_rdp_tight) {
            out->eps_rdp_tight = tight;
            out->order_tight = al;
        }
    }
}

int sfl_dp_acct_epsilon(const sfl_dp_acct_t *a, double delta, sfl_dp_spent_t *out)
{
    if (!(delta > 0 && delta < 1))
        return sfl__fail(SFL_EINVAL, "dp accountant: delta %g is not in (0, 1)", delta);
    memset(out, 0, sizeof(*out));
    if (a->n == 0)
        return 0;
    for (uint32_t i = 0; i < a->n; i++)
        out->eps_paper += paper_entry(&a->e[i], delta / a->n);
    rdp_convert(a, delta, out);
    return 0;
}

/* Encoding, SFL_DP_ACCT_BYTES bytes, little-endian:
 *   0  "SDPA"   magic
 *   4  u8       version, 1
 *   5  u8       n, entries in use (<= SFL_DP_ACCT_MAX)
 *   6  u16      0
 *   8 + 32 i    entry i: u8 kind, 3 bytes 0, u32 count, u32 iters, 4 bytes 0,
 *               f64 scale, f64 sens (IEEE 754 binary64 bits);
 *               entries i >= n are 32 zero bytes.
 * Every field has one accepted value per state, so decode(encode(a)) == a
 * and encode(decode(bytes)) == bytes. */
#define ACCT_VERSION 1
_Static_assert(sizeof(double) == sizeof(uint64_t), "binary64 doubles");

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void putd(uint8_t *p, double d)
{
    uint64_t v;

    memcpy(&v, &d, sizeof(v));
    put64(p, v);
}

static double getd(const uint8_t *p)
{
    uint64_t v = get64(p);
    double d;

    memcpy(&d, &v, sizeof(d));
    return d;
}

void sfl_dp_acct_encode(const sfl_dp_acct_t *a, uint8_t out[SFL_DP_ACCT_BYTES])
{
    memset(out, 0, SFL_DP_ACCT_BYTES);
    memcpy(out, "SDPA", 4);
    out[4] = ACCT_VERSION;
    out[5] = (uint8_t)a->n;
    for (uint32_t i = 0; i < a->n; i++) {
        uint8_t *p = out + 8 + 32 * i;

        p[0] = (uint8_t)a->e[i].kind;
        put32(p + 4, a->e[i].count);
        put32(p + 8, a->e[i].iters);
        putd(p + 16, a->e[i].scale);
        putd(p + 24, a->e[i].sens);
    }
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

/* Entry i of buf into *e; 0, or -1 if it is not one that encode writes. */
static int decode_entry(const uint8_t *p, sfl_dp_entry_t *e)
{
    if (mech_of(p[0]) == NULL || !all_zero(p + 1, 3) || !all_zero(p + 12, 4))
        return -1;
    e->kind = (sfl_dp_mech_t)p[0];
    e->count = get32(p + 4);
    e->iters = get32(p + 8);
    e->scale = getd(p + 16);
    e->sens = getd(p + 24);
    if (e->count == 0 || e->iters == 0 || !finite_pos(e->scale) || !finite_pos(e->sens))
        return -1;
    return 0;
}

int sfl_dp_acct_decode(sfl_dp_acct_t *a, const uint8_t *buf, size_t len)
{
    sfl_dp_acct_t t;

    if (len != SFL_DP_ACCT_BYTES)
        return sfl__fail(SFL_EPARSE, "dp accountant: %zu bytes, want %d", len,
                         SFL_DP_ACCT_BYTES);
    if (memcmp(buf, "SDPA", 4) != 0 || buf[4] != ACCT_VERSION || buf[5] > SFL_DP_ACCT_MAX ||
        !all_zero(buf + 6, 2))
        return sfl__fail(SFL_EPARSE, "dp accountant: bad header");
    sfl_dp_acct_init(&t);
    t.n = buf[5];
    for (uint32_t i = 0; i < SFL_DP_ACCT_MAX; i++) {
        const uint8_t *p = buf + 8 + 32 * i;

        if (i >= t.n) {
            if (!all_zero(p, 32))
                return sfl__fail(SFL_EPARSE, "dp accountant: unused entry %u not zero", i);
            continue;
        }
        if (decode_entry(p, &t.e[i]) != 0)
            return sfl__fail(SFL_EPARSE, "dp accountant: bad entry %u", i);
        for (uint32_t j = 0; j < i; j++)
            if (same_key(&t.e[j], &t.e[i]))
                return sfl__fail(SFL_EPARSE, "dp accountant: entries %u and %u repeat", j, i);
    }
    *a = t;
    return 0;
}

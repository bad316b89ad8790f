#include "sfl/crypto/shamir.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* Every operation on a y or a coefficient goes through libsodium's
 * constant-time scalar arithmetic. The x's are public (ranks in the cohort),
 * so checks and loops over them may branch. Intermediates that depend on a y
 * or a coefficient are wiped before returning, on every path. */

_Static_assert(SFL_SHAMIR_BYTES == crypto_core_ed25519_SCALARBYTES, "scalar size");
_Static_assert(SFL_SHAMIR_MAX == UINT16_MAX, "x is a uint16_t");

/* L = 2^252 + 27742317777372353535851937790883648493, little-endian. */
static const uint8_t L_BYTES[SFL_SHAMIR_BYTES] = {
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10,
};

int sfl_shamir_canonical(const uint8_t s[SFL_SHAMIR_BYTES])
{
    unsigned borrow = 0;

    /* s < L iff s - L borrows out of the top byte. Every byte is visited and
     * nothing branches on s: libsodium has no public constant-time test. */
    for (size_t i = 0; i < SFL_SHAMIR_BYTES; i++)
        borrow = (((unsigned)s[i] - L_BYTES[i] - borrow) >> 8) & 1;
    return (int)borrow;
}

void sfl_shamir_random(uint8_t s[SFL_SHAMIR_BYTES])
{
    /* sodium_init makes the generator's first use thread-safe. It fails only
     * when a mutex does; like libsodium's generator, which aborts rather than
     * return weak bytes, this has no way to report that. */
    if (sodium_init() < 0)
        abort();
    crypto_core_ed25519_scalar_random(s); /* uniform in 1..L-1 */
}

/* x as a scalar: 32 bytes, little-endian. */
static void x_scalar(uint8_t out[SFL_SHAMIR_BYTES], uint16_t x)
{
    memset(out, 0, SFL_SHAMIR_BYTES);
    out[0] = (uint8_t)(x & 0xff);
    out[1] = (uint8_t)(x >> 8);
}

int sfl_shamir_split(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, uint32_t n,
                     sfl_share_t *out)
{
    assert(out != NULL);
    if (n > SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "shamir split: need 1 <= t <= n <= %d, got t = %u, n = %u",
                         SFL_SHAMIR_MAX, (unsigned)t, (unsigned)n);
    for (uint32_t i = 0; i < n; i++)
        out[i].x = (uint16_t)(i + 1);
    return sfl_shamir_split_at(secret, t, out, n);
}

/* 0 and p = s B (base when pt is NULL) or s P, the identity for s = 0;
 * -1 if pt is not a usable point (libsodium also refuses a result at the
 * identity, which for a point of prime order L means s = 0 mod L). */
static int mul_point(uint8_t out[SFL_SHAMIR_POINT], const uint8_t s[SFL_SHAMIR_BYTES],
                     const uint8_t *pt)
{
    static const uint8_t identity[SFL_SHAMIR_POINT] = {1};

    if (sodium_is_zero(s, SFL_SHAMIR_BYTES)) {
        memcpy(out, identity, SFL_SHAMIR_POINT);
        return 0;
    }
    if (pt == NULL)
        return crypto_scalarmult_ed25519_base_noclamp(out, s) == 0 ? 0 : -1;
    return crypto_scalarmult_ed25519_noclamp(out, s, pt) == 0 ? 0 : -1;
}

static int split(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                 uint32_t n, uint8_t (*commit)[SFL_SHAMIR_POINT]);

int sfl_shamir_split_at(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                        uint32_t n)
{
    return split(secret, t, out, n, NULL);
}

int sfl_shamir_split_commit(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                            uint32_t n, uint8_t (*commit)[SFL_SHAMIR_POINT])
{
    assert(commit != NULL);
    if (sodium_is_zero(secret, SFL_SHAMIR_BYTES))
        return sfl__fail(SFL_EINVAL, "shamir split: a zero secret has no commitment");
    return split(secret, t, out, n, commit);
}

static int split(const uint8_t secret[SFL_SHAMIR_BYTES], uint32_t t, sfl_share_t *out,
                 uint32_t n, uint8_t (*commit)[SFL_SHAMIR_POINT])
{
    uint8_t a[SFL_SHAMIR_BYTES], prod[SFL_SHAMIR_BYTES], x[SFL_SHAMIR_BYTES];

    assert(secret != NULL && out != NULL);
    if (t < 1 || t > n || n > SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "shamir split: need 1 <= t <= n <= %d, got t = %u, n = %u",
                         SFL_SHAMIR_MAX, (unsigned)t, (unsigned)n);
    for (uint32_t i = 0; i < n; i++)
        if (out[i].x == 0)
            return sfl__fail(SFL_EINVAL, "shamir split: share %u is at x = 0", (unsigned)i);
    if (!sfl_shamir_canonical(secret))
        return sfl__fail(SFL_EINVAL, "shamir split: the secret is not a canonical scalar");
    if (sodium_init() < 0)
        return sfl__fail(SFL_EUNSUP, "libsodium failed to initialise");

    /* f(x) = secret + a_1 x + ... + a_{t-1} x^{t-1} by Horner, all n shares
     * at once: y_i <- y_i x_i + a_j for j = t-1 down to 1, then the last step
     * adds the secret. Each coefficient is drawn when its step comes, so only
     * one is ever held and t needs no buffer. */
    for (uint32_t i = 0; i < n; i++)
        memset(out[i].y, 0, SFL_SHAMIR_BYTES);
    for (uint32_t j = t - 1; j >= 1; j--) {
        crypto_core_ed25519_scalar_random(a); /* nonzero: its commitment is a point */
        if (commit != NULL && mul_point(commit[j], a, NULL) < 0) {
            sodium_memzero(a, sizeof(a));
            return sfl__fail(SFL_EINVAL, "shamir split: a coefficient's commitment failed");
        }
        for (uint32_t i = 0; i < n; i++) {
            x_scalar(x, out[i].x);
            crypto_core_ed25519_scalar_mul(prod, out[i].y, x);
            crypto_core_ed25519_scalar_add(out[i].y, prod, a);
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        x_scalar(x, out[i].x);
        crypto_core_ed25519_scalar_mul(prod, out[i].y, x);
        crypto_core_ed25519_scalar_add(out[i].y, prod, secret);
    }
    sodium_memzero(a, sizeof(a));
    sodium_memzero(prod, sizeof(prod));
    if (commit != NULL && mul_point(commit[0], secret, NULL) < 0)
        return sfl__fail(SFL_EINVAL, "shamir split: the secret's commitment failed");
    return 0;
}

/* shares[0..k) are usable points: x != 0, no x twice, every y canonical.
 * A bitmap of the x's seen keeps it linear in k. */
static int check_points(const char *who, const sfl_share_t *shares, uint32_t k)
{
    uint8_t seen[(SFL_SHAMIR_MAX + 1) / 8];

    if (k < 1 || k > SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "%s: need 1 to %d shares, got %u", who, SFL_SHAMIR_MAX,
                         (unsigned)k);
    assert(shares != NULL);
    memset(seen, 0, sizeof(seen));
    for (uint32_t i = 0; i < k; i++) {
        unsigned x = shares[i].x;

        if (x == 0)
            return sfl__fail(SFL_EINVAL, "%s: share %u: x = 0", who, (unsigned)i);
        if (seen[x / 8] & (1u << (x % 8)))
            return sfl__fail(SFL_EINVAL, "%s: share %u: x = %u repeats an earlier share's", who,
                             (unsigned)i, x);
        seen[x / 8] |= (uint8_t)(1u << (x % 8));
        if (!sfl_shamir_canonical(shares[i].y))
            return sfl__fail(SFL_EINVAL, "%s: share %u: y is not a canonical scalar", who,
                             (unsigned)i);
    }
    return 0;
}

/* The points a[0..na) followed by *extra when extra is not NULL: check's
 * subsets are "the first t - 1 and one more", and nothing here allocates. */
static const sfl_share_t *point(const sfl_share_t *a, uint32_t na, const sfl_share_t *extra,
                                uint32_t i)
{
    return i < na ? &a[i] : extra;
}

/* P = prod_j x_j over the points of a[0..na) and extra. */
static void product_x(const sfl_share_t *a, uint32_t na, const sfl_share_t *extra,
                      uint8_t p[SFL_SHAMIR_BYTES])
{
    uint8_t xj[SFL_SHAMIR_BYTES], tmp[SFL_SHAMIR_BYTES];
    uint32_t k = na + (extra != NULL);

    x_scalar(p, 1);
    for (uint32_t j = 0; j < k; j++) {
        x_scalar(xj, point(a, na, extra, j)->x);
        crypto_core_ed25519_scalar_mul(tmp, p, xj);
        memcpy(p, tmp, SFL_SHAMIR_BYTES);
    }
}

/* den_i = x_i prod_{j != i} (x_j - x_i) through the points of a[0..na) and
 * extra (checked by check_points: the x's are distinct and nonzero, and
 * < L, so it is not 0 mod L). */
static void den_of(const sfl_share_t *a, uint32_t na, const sfl_share_t *extra, uint32_t i,
                   uint8_t den[SFL_SHAMIR_BYTES])
{
    uint32_t k = na + (extra != NULL);
    uint8_t xi[SFL_SHAMIR_BYTES], xj[SFL_SHAMIR_BYTES], diff[SFL_SHAMIR_BYTES];
    uint8_t tmp[SFL_SHAMIR_BYTES];

    x_scalar(xi, point(a, na, extra, i)->x);
    memcpy(den, xi, SFL_SHAMIR_BYTES);
    for (uint32_t j = 0; j < k; j++) {
        if (j == i)
            continue;
        x_scalar(xj, point(a, na, extra, j)->x);
        crypto_core_ed25519_scalar_sub(diff, xj, xi);
        crypto_core_ed25519_scalar_mul(tmp, den, diff);
        memcpy(den, tmp, SFL_SHAMIR_BYTES);
    }
}

/* lambda_i = prod_{j != i} x_j / (x_j - x_i) = P / den_i. Depends only on
 * the public x's. */
static void lambda_of(const sfl_share_t *a, uint32_t na, const sfl_share_t *extra, uint32_t i,
                      const uint8_t p[SFL_SHAMIR_BYTES], uint8_t lam[SFL_SHAMIR_BYTES])
{
    uint8_t den[SFL_SHAMIR_BYTES], inv[SFL_SHAMIR_BYTES];
    int rc;

    den_of(a, na, extra, i, den);
    rc = crypto_core_ed25519_scalar_invert(inv, den);
    assert(rc == 0); /* den != 0: see den_of */
    (void)rc;
    crypto_core_ed25519_scalar_mul(lam, p, inv);
}

/* acc = sum_i y_i lambda[i]; secret material wiped. */
static void apply(const uint8_t (*lambda)[SFL_SHAMIR_BYTES], const sfl_share_t *a, uint32_t k,
                  uint8_t out[SFL_SHAMIR_BYTES])
{
    uint8_t term[SFL_SHAMIR_BYTES], acc[SFL_SHAMIR_BYTES], tmp[SFL_SHAMIR_BYTES];

    memset(acc, 0, sizeof(acc));
    for (uint32_t i = 0; i < k; i++) {
        crypto_core_ed25519_scalar_mul(term, a[i].y, lambda[i]);
        crypto_core_ed25519_scalar_add(tmp, acc, term);
        memcpy(acc, tmp, sizeof(acc));
    }
    memcpy(out, acc, SFL_SHAMIR_BYTES);
    sodium_memzero(tmp, sizeof(tmp));
    sodium_memzero(term, sizeof(term));
    sodium_memzero(acc, sizeof(acc));
}

/* f(0) = sum_i y_i lambda_i through the points of a[0..na) and extra. */
static void interpolate0(const sfl_share_t *a, uint32_t na, const sfl_share_t *extra,
                         uint8_t out[SFL_SHAMIR_BYTES])
{
    uint32_t k = na + (extra != NULL);
    uint8_t p[SFL_SHAMIR_BYTES], lam[SFL_SHAMIR_BYTES];
    uint8_t term[SFL_SHAMIR_BYTES], acc[SFL_SHAMIR_BYTES], tmp[SFL_SHAMIR_BYTES];

    product_x(a, na, extra, p);
    memset(acc, 0, sizeof(acc));
    for (uint32_t i = 0; i < k; i++) {
        lambda_of(a, na, extra, i, p, lam);
        crypto_core_ed25519_scalar_mul(term, point(a, na, extra, i)->y, lam);
        crypto_core_ed25519_scalar_add(tmp, acc, term);
        memcpy(acc, tmp, sizeof(acc));
    }
    memcpy(out, acc, SFL_SHAMIR_BYTES);
    sodium_memzero(tmp, sizeof(tmp));
    sodium_memzero(term, sizeof(term));
    sodium_memzero(acc, sizeof(acc));
}

int sfl_shamir_lagrange(const sfl_share_t *shares, uint32_t k,
                        uint8_t (*lambda)[SFL_SHAMIR_BYTES])
{
    uint8_t p[SFL_SHAMIR_BYTES], den[SFL_SHAMIR_BYTES], inv[SFL_SHAMIR_BYTES];
    uint8_t tmp[SFL_SHAMIR_BYTES];
    int rc = check_points("shamir lagrange", shares, k);

    if (rc < 0)
        return rc;
    /* one inversion for all k (Montgomery's trick, an inversion costing
     * about 240 products): lambda[i] holds den_0 ... den_i on the way up;
     * on the way down inv = 1 / (den_0 ... den_i), so 1 / den_i = inv
     * lambda[i - 1], and inv den_i steps to i - 1. The den's are recomputed
     * rather than kept: nothing here allocates. */
    product_x(shares, k, NULL, p);
    for (uint32_t i = 0; i < k; i++) {
        den_of(shares, k, NULL, i, den);
        if (i == 0)
            memcpy(lambda[0], den, SFL_SHAMIR_BYTES);
        else
            crypto_core_ed25519_scalar_mul(lambda[i], lambda[i - 1], den);
    }
    rc = crypto_core_ed25519_scalar_invert(inv, lambda[k - 1]);
    assert(rc == 0); /* a product of nonzero den's mod the prime L */
    for (uint32_t i = k; i-- > 0;) {
        den_of(shares, k, NULL, i, den);
        if (i > 0)
            crypto_core_ed25519_scalar_mul(tmp, inv, lambda[i - 1]); /* 1 / den_i */
        else
            memcpy(tmp, inv, SFL_SHAMIR_BYTES);
        crypto_core_ed25519_scalar_mul(lambda[i], p, tmp);
        crypto_core_ed25519_scalar_mul(tmp, inv, den);
        memcpy(inv, tmp, SFL_SHAMIR_BYTES);
    }
    return 0;
}

int sfl_shamir_apply(const uint8_t (*lambda)[SFL_SHAMIR_BYTES], const sfl_share_t *shares,
                     uint32_t k, uint8_t secret[SFL_SHAMIR_BYTES])
{
    int rc = check_points("shamir apply", shares, k);

    if (rc < 0)
        return rc;
    apply(lambda, shares, k, secret);
    return 0;
}

int sfl_shamir_combine(const sfl_share_t *shares, uint32_t k, uint8_t secret[SFL_SHAMIR_BYTES])
{
    int rc;

    assert(secret != NULL);
    rc = check_points("shamir combine", shares, k);
    if (rc < 0)
        return rc;
    interpolate0(shares, k, NULL, secret);
    return 0;
}

int sfl_shamir_check(const sfl_share_t *shares, uint32_t k, uint32_t t)
{
    uint8_t first[SFL_SHAMIR_BYTES], other[SFL_SHAMIR_BYTES];
    int rc = 0;

    if (t < 1 || t > k)
        return sfl__fail(SFL_EINVAL, "shamir check: need 1 <= t <= k, got t = %u, k = %u",
                         (unsigned)t, (unsigned)k);
    rc = check_points("shamir check", shares, k);
    if (rc < 0)
        return rc;
    /* The first t define f. Replacing the t-th by share m gives g with
     * g - f = c prod_{j < t-1} (x - x_j); at 0 that is c times a nonzero
     * product, so g(0) = f(0) exactly when c = 0, that is when share m lies
     * on f. So k - t comparisons decide whether all k lie on f. */
    interpolate0(shares, t, NULL, first);
    for (uint32_t m = t; m < k; m++) {
        interpolate0(shares, t - 1, &shares[m], other);
        if (sodium_memcmp(first, other, sizeof(first)) != 0) {
            rc = sfl__fail(SFL_EBADSIG,
                           "shamir check: share %u does not lie on the polynomial of the first %u",
                           (unsigned)m, (unsigned)t);
            break;
        }
    }
    sodium_memzero(first, sizeof(first));
    sodium_memzero(other, sizeof(other));
    return rc;
}

int sfl_shamir_commit_check(const uint8_t secret[SFL_SHAMIR_BYTES],
                            const uint8_t c0[SFL_SHAMIR_POINT])
{
    uint8_t p[SFL_SHAMIR_POINT];
    int rc;

    /* a zero secret (the identity) never matches: commitments are points
     * of prime order */
    rc = sodium_is_zero(secret, SFL_SHAMIR_BYTES) || mul_point(p, secret, NULL) < 0 ||
                 sodium_memcmp(p, c0, SFL_SHAMIR_POINT) != 0
             ? SFL_EBADSIG
             : 0;
    sodium_memzero(p, sizeof(p));
    return rc;
}

/* 1 if shares[0..k) all lie on the committed polynomial, at once: with
 * random weights rho_i, (sum rho_i y_i) B = sum_j (sum_i rho_i x_i^j) C_j.
 * A set with a bad share passes only if the weights hit one value out of
 * L: a 2^-252 chance. t + 1 point multiplications whatever k is. */
static int batch_ok(const sfl_share_t *shares, uint32_t k,
                    const uint8_t (*commit)[SFL_SHAMIR_POINT], uint32_t t,
                    uint8_t (*c)[SFL_SHAMIR_BYTES])
{
    uint8_t rho[SFL_SHAMIR_BYTES], xs[SFL_SHAMIR_BYTES], pw[SFL_SHAMIR_BYTES];
    uint8_t tmp[SFL_SHAMIR_BYTES], y[SFL_SHAMIR_BYTES];
    uint8_t lhs[SFL_SHAMIR_POINT], rhs[SFL_SHAMIR_POINT] = {1}, term[SFL_SHAMIR_POINT];
    int ok = 1;

    memset(y, 0, sizeof(y));
    for (uint32_t j = 0; j < t; j++)
        memset(c[j], 0, SFL_SHAMIR_BYTES);
    for (uint32_t i = 0; i < k; i++) {
        crypto_core_ed25519_scalar_random(rho);
        crypto_core_ed25519_scalar_mul(tmp, rho, shares[i].y);
        crypto_core_ed25519_scalar_add(y, y, tmp);
        x_scalar(xs, shares[i].x);
        memcpy(pw, rho, sizeof(pw)); /* rho x^j */
        for (uint32_t j = 0; j < t; j++) {
            crypto_core_ed25519_scalar_add(c[j], c[j], pw);
            crypto_core_ed25519_scalar_mul(tmp, pw, xs);
            memcpy(pw, tmp, sizeof(pw));
        }
    }
    if (mul_point(lhs, y, NULL) < 0)
        ok = 0;
    for (uint32_t j = 0; ok && j < t; j++) {
        if (sodium_is_zero(c[j], SFL_SHAMIR_BYTES))
            continue;
        if (mul_point(term, c[j], commit[j]) < 0 || crypto_core_ed25519_add(rhs, rhs, term) != 0)
            ok = 0;
    }
    ok = ok && sodium_memcmp(lhs, rhs, SFL_SHAMIR_POINT) == 0;
    sodium_memzero(y, sizeof(y));
    sodium_memzero(tmp, sizeof(tmp));
    sodium_memzero(lhs, sizeof(lhs));
    return ok;
}

/* ok[lo..hi) for the shares in that range, known as a whole to fail when
 * bad is set (its check is then skipped): halves until single shares. */
static void bisect(const sfl_share_t *shares, uint32_t lo, uint32_t hi, int bad,
                   const uint8_t (*commit)[SFL_SHAMIR_POINT], uint32_t t,
                   uint8_t (*c)[SFL_SHAMIR_BYTES], uint8_t *ok)
{
    uint32_t mid;
    int left_ok;

    if (!bad && batch_ok(shares + lo, hi - lo, commit, t, c)) {
        memset(ok + lo, 1, hi - lo);
        return;
    }
    if (hi - lo == 1) {
        ok[lo] = 0;
        return;
    }
    mid = lo + (hi - lo) / 2;
    left_ok = batch_ok(shares + lo, mid - lo, commit, t, c);
    if (left_ok)
        memset(ok + lo, 1, mid - lo);
    else
        bisect(shares, lo, mid, 1, commit, t, c, ok);
    /* the whole failed and the left passed: the right fails */
    bisect(shares, mid, hi, left_ok, commit, t, c, ok);
}

int sfl_shamir_verify(const sfl_share_t *shares, uint32_t k,
                      const uint8_t (*commit)[SFL_SHAMIR_POINT], uint32_t t,
                      uint8_t (*work)[SFL_SHAMIR_BYTES], uint8_t *ok)
{
    int rc = check_points("shamir verify", shares, k);

    if (rc < 0)
        return rc;
    if (t < 1 || t > SFL_SHAMIR_MAX)
        return sfl__fail(SFL_EINVAL, "shamir verify: %u commitments", (unsigned)t);
    for (uint32_t j = 0; j < t; j++)
        if (!crypto_core_ed25519_is_valid_point(commit[j]))
            return sfl__fail(SFL_EINVAL, "shamir verify: commitment %u is not a point of the "
                             "prime-order group", (unsigned)j);
    if (sodium_init() < 0)
        return sfl__fail(SFL_EUNSUP, "libsodium failed to initialise");
    bisect(shares, 0, k, 0, commit, t, work, ok);
    for (uint32_t i = 0; i < k; i++)
        if (!ok[i])
            rc = SFL_EBADSIG;
    if (rc < 0)
        rc = sfl__fail(SFL_EBADSIG, "shamir verify: a share is not on the committed polynomial");
    return rc;
}

int sfl_shamir_agree(const sfl_share_t *shares, uint32_t k, uint32_t t,
                     uint8_t (*work)[SFL_SHAMIR_BYTES])
{
    uint8_t (*v)[SFL_SHAMIR_BYTES] = work, (*h)[SFL_SHAMIR_BYTES] = work + k;
    uint8_t xi[SFL_SHAMIR_BYTES], xj[SFL_SHAMIR_BYTES], d[SFL_SHAMIR_BYTES];
    uint8_t tmp[SFL_SHAMIR_BYTES], hx[SFL_SHAMIR_BYTES], acc[SFL_SHAMIR_BYTES];
    int rc = check_points("shamir agree", shares, k);

    if (rc < 0)
        return rc;
    if (t < 1 || t > k)
        return sfl__fail(SFL_EINVAL, "shamir agree: need 1 <= t <= k, got t = %u, k = %u",
                         (unsigned)t, (unsigned)k);
    if (k == t)
        return 0; /* any t points lie on one polynomial of degree < t */
    if (sodium_init() < 0)
        return sfl__fail(SFL_EUNSUP, "libsodium failed to initialise");
    /* v_i = 1 / prod_{j != i} (x_i - x_j): sum_i v_i p(x_i) is the x^{k-1}
     * coefficient of the polynomial through (x_i, p(x_i)), so it is 0 for
     * every p of degree <= k - 2. With p = h f, h of degree < k - t and f of
     * degree < t, sum_i v_i h(x_i) y_i = 0 when all y_i = f(x_i); when they
     * lie on no such f the sums for the h's form a nonzero linear form, and
     * a random h makes it 0 with probability 1 / L. O(k^2) products and k
     * inversions, against sfl_shamir_check's k - t interpolations. */
    for (uint32_t i = 0; i < k; i++) {
        x_scalar(xi, shares[i].x);
        x_scalar(v[i], 1);
        for (uint32_t j = 0; j < k; j++) {
            if (j == i)
                continue;
            x_scalar(xj, shares[j].x);
            crypto_core_ed25519_scalar_sub(d, xi, xj);
            crypto_core_ed25519_scalar_mul(tmp, v[i], d);
            memcpy(v[i], tmp, sizeof(tmp));
        }
        rc = crypto_core_ed25519_scalar_invert(tmp, v[i]);
        assert(rc == 0); /* distinct x's below L: a nonzero product mod the prime L */
        memcpy(v[i], tmp, sizeof(tmp));
    }
    for (uint32_t m = 0; m < k - t; m++)
        crypto_core_ed25519_scalar_random(h[m]);
    memset(acc, 0, sizeof(acc));
    for (uint32_t i = 0; i < k; i++) {
        x_scalar(xi, shares[i].x);
        memcpy(hx, h[k - t - 1], sizeof(hx)); /* h(x_i) by Horner */
        for (uint32_t m = k - t - 1; m-- > 0;) {
            crypto_core_ed25519_scalar_mul(tmp, hx, xi);
            crypto_core_ed25519_scalar_add(hx, tmp, h[m]);
        }
        crypto_core_ed25519_scalar_mul(tmp, hx, v[i]);
        crypto_core_ed25519_scalar_mul(hx, tmp, shares[i].y);
        crypto_core_ed25519_scalar_add(acc, acc, hx);
    }
    rc = sodium_is_zero(acc, sizeof(acc))
             ? 0
             : sfl__fail(SFL_EBADSIG, "shamir agree: the %u shares lie on no polynomial of "
                         "degree < %u", (unsigned)k, (unsigned)t);
    sodium_memzero(acc, sizeof(acc));
    sodium_memzero(hx, sizeof(hx));
    sodium_memzero(tmp, sizeof(tmp));
    return rc;
}

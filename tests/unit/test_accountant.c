/* The privacy accountant (sfl/dp/dp.h, libsfl/src/dp/accountant.c): RDP of
 * each mechanism, composition, conversion to (epsilon, delta) against
 * values computed by hand, the paper's accounting against its own
 * calibration, and the fixed-size encoding. */
#include "testutil.h"

#include "sfl/dp/dp.h"

static void check_same_entries(const sfl_dp_acct_t *a, const sfl_dp_acct_t *b)
{
    assert_int_equal(a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        assert_int_equal(a->e[i].kind, b->e[i].kind);
        assert_int_equal(a->e[i].count, b->e[i].count);
        assert_int_equal(a->e[i].iters, b->e[i].iters);
        assert_memory_equal(&a->e[i].scale, &b->e[i].scale, sizeof(double));
        assert_memory_equal(&a->e[i].sens, &b->e[i].sens, sizeof(double));
    }
}

/* k draws of N(0, sigma^2) compose, in RDP, to one draw of sigma/sqrt(k):
 * k alpha D^2/(2 sigma^2) = alpha D^2 / (2 (sigma/sqrt k)^2). Counted as 16
 * draws in one iteration or one draw in each of 16, the same. */
static void test_accountant_gaussian_composition(void **state)
{
    (void)state;
    sfl_dp_acct_t many, one, iters;
    sfl_dp_spent_t a, b, c;
    const double al[] = {1.25, 2, 10, 100, 1e4};

    sfl_dp_acct_init(&many);
    sfl_dp_acct_init(&one);
    sfl_dp_acct_init(&iters);
    assert_int_equal(sfl_dp_acct_add_gaussian(&many, 3.0, 1.0, 16), 0);
    assert_int_equal(sfl_dp_acct_add_gaussian(&one, 0.75, 1.0, 1), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(sfl_dp_acct_add_gaussian(&iters, 3.0, 1.0, 1), 0);
    assert_int_equal(iters.n, 1);
    assert_int_equal(iters.e[0].iters, 16);
    for (size_t i = 0; i < sizeof(al) / sizeof(al[0]); i++) {
        assert_close(sfl_dp_acct_rdp(&many, al[i]), sfl_dp_acct_rdp(&one, al[i]), 1e-14, 0);
        assert_close(sfl_dp_acct_rdp(&iters, al[i]), sfl_dp_acct_rdp(&one, al[i]), 1e-14, 0);
        assert_close(sfl_dp_acct_rdp(&one, al[i]), al[i] / (2 * 0.75 * 0.75), 1e-14, 0);
    }
    assert_int_equal(sfl_dp_acct_epsilon(&many, 1e-6, &a), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&one, 1e-6, &b), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&iters, 1e-6, &c), 0);
    assert_close(a.eps_rdp, b.eps_rdp, 1e-14, 0);
    assert_close(a.eps_rdp_tight, b.eps_rdp_tight, 1e-14, 0);
    assert_close(c.eps_rdp, b.eps_rdp, 1e-14, 0);
    /* The paper's count treats them as one Gaussian of sensitivity sqrt(k) D
     * too (eq. 17's sqrt(KT)). */
    assert_close(a.eps_paper, b.eps_paper, 1e-14, 0);
    assert_close(c.eps_paper, b.eps_paper, 1e-14, 0);
    assert_true(isnan(sfl_dp_acct_rdp(&one, 1.0)));
}

static void test_accountant_laplace_rdp(void **state)
{
    (void)state;
    double prev = 0;

    /* alpha 2, sens/b = 1: log(2/3 e + 1/3 e^-2) = log(1.81212 + 0.04511)
     * = log(1.857239...) = 0.61912362999859. */
    assert_close(sfl_dp_rdp_laplace(2.0, 1.0, 1.0), 0.6191236299985928, 1e-13, 0);
    /* alpha -> infinity: tends to sens/b = 0.5, the pure epsilon, from
     * below; log(1/2)/(alpha - 1) is the leading gap. */
    assert_close(sfl_dp_rdp_laplace(1e7, 2.0, 1.0), 0.5, 0, 1e-6);
    assert_close(sfl_dp_rdp_laplace(1e7, 2.0, 1.0), 0.5 - log(2.0) / (1e7 - 1), 0, 1e-9);
    assert_true(sfl_dp_rdp_laplace(INFINITY, 2.0, 1.0) == 0.5);
    for (double al = 1.01; al < 1e6; al *= 1.7) {
        double v = sfl_dp_rdp_laplace(al, 2.0, 1.0);

        assert_true(v >= prev && v <= 0.5);
        prev = v;
    }
    /* Small sensitivity: no cancellation. At a = 2, r = 1e-6 the value is
     * 9.99999666666e-13 (50 digits, Python's decimal), randomized
     * response's bound 9.99999999999583e-13. */
    assert_close(sfl_dp_rdp_laplace(2.0, 1.0, 1e-6), 9.99999666666416667e-13, 1e-8, 0);
    assert_close(sfl_dp_rdp_pure(2.0, 1e-6), 9.99999999999583333e-13, 1e-8, 0);
    assert_true(sfl_dp_rdp_laplace(2.0, 1.0, 0.0) == 0);
    assert_true(isnan(sfl_dp_rdp_laplace(1.0, 1.0, 1.0)));
    assert_true(isnan(sfl_dp_rdp_laplace(2.0, 0.0, 1.0)));
    /* Pure DP (report-noisy-max), randomized response's RDP:
     * eps - log((1 + e^-eps) / (1 + e^-((2a-1) eps))) / (a - 1); at a = 2,
     * eps = 0.1: 0.1 - log(1.9048374 / 1.7408182) = 0.0099585844, just
     * under a eps^2 / 2 = 0.01; at a = 1000, 0.0993550 < eps; at a = 2,
     * eps = 1: 1 - log(1.3678794 / 1.0497871) = 0.7353257. */
    assert_close(sfl_dp_rdp_pure(2.0, 0.1), 0.009958584394956255, 1e-12, 0);
    assert_close(sfl_dp_rdp_pure(1000.0, 0.1), 0.09935495829822466, 1e-12, 0);
    assert_close(sfl_dp_rdp_pure(2.0, 1.0), 0.7353256640555192, 1e-12, 0);
    assert_true(sfl_dp_rdp_pure(INFINITY, 0.1) == 0.1);
    for (double al = 1.01; al < 1e5; al *= 1.9)
        for (double e = 1e-4; e < 10; e *= 3) {
            double v = sfl_dp_rdp_pure(al, e);

            assert_true(v > 0 && v <= e && v <= al * e * e / 2);
        }
    assert_close(sfl_dp_rdp_gaussian(3.0, 2.0, 1.0), 3.0 / 8.0, 1e-15, 0);
}

/* The Gaussian mechanism (sensitivity 1) with (eps, delta) = (1, 1e-5)
 * under the standard conversion, by hand. With L = ln(1e5) = 11.512925,
 * eps(a) = a/(2 sigma^2) + L/(a - 1) is least at a - 1 = sigma sqrt(2L),
 * where eps = 1/(2 sigma^2) + sqrt(2L)/sigma; eps = 1 at
 * 1/sigma = sqrt(2L + 2) - sqrt(2L) = 5.002585 - 4.798526, sigma = 4.9005552,
 * optimal order 24.51. On the grid: a = 24 gives 24/48.02964 + L/23 =
 * 0.4996785 + 0.5005620 = 1.0002405; a = 22 gives 1.0062732, a = 26
 * 1.0018354. The tight conversion (CKS Prop. 12), at a = 22:
 * 22/48.02964 + ln(21/22) - (ln 1e-5 + ln 22)/21 = 0.8125607. */
static void test_accountant_known_gaussian(void **state)
{
    (void)state;
    double L = log(1e5), sigma = 1.0 / (sqrt(2 * L + 2) - sqrt(2 * L));
    sfl_dp_acct_t a;
    sfl_dp_spent_t s;

    assert_close(sigma, 4.900555168628411, 1e-14, 0);
    sfl_dp_acct_init(&a);
    assert_int_equal(sfl_dp_acct_add_gaussian(&a, sigma, 1.0, 1), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 1e-5, &s), 0);
    assert_close(s.eps_rdp, 1.0002404968866883, 1e-12, 0);
    assert_true(s.order == 24);
    assert_close(s.eps_rdp_tight, 0.8125606760068843, 1e-12, 0);
    assert_true(s.order_tight == 22);
}

static void test_accountant_eps_decreases_with_sigma(void **state)
{
    (void)state;
    double prev = INFINITY, prev_paper = INFINITY, prev_tight = INFINITY;

    for (double sigma = 0.5; sigma < 100; sigma *= 1.3) {
        sfl_dp_acct_t a;
        sfl_dp_spent_t s;

        sfl_dp_acct_init(&a);
        assert_int_equal(sfl_dp_acct_add_gaussian(&a, sigma, 1.0, 10), 0);
        assert_int_equal(sfl_dp_acct_epsilon(&a, 1e-6, &s), 0);
        assert_true(s.eps_rdp < prev && s.eps_paper < prev_paper);
        assert_true(s.eps_rdp_tight <= prev_tight && s.eps_rdp_tight <= s.eps_rdp);
        prev = s.eps_rdp, prev_paper = s.eps_paper, prev_tight = s.eps_rdp_tight;
    }
}

/* The paper's DP-BCFW calibration, recorded for T iterations of K nodes,
 * counts as the epsilon it was calibrated for; RDP counts less. */
static void test_accountant_paper_reproduces_calibration(void **state)
{
    (void)state;
    const sfl_dp_bcfw_t p = {
        .epsilon = 1.0, .delta = 1e-5, .T = 100, .K = 4, .n = 1000, .eta = 2.0, .G = 0.5,
    };
    double b, sb, pi, sj;
    sfl_dp_acct_t a;
    sfl_dp_spent_t s;

    assert_int_equal(sfl_dp_bcfw_index_scale(&p, &b), 0);
    assert_int_equal(sfl_dp_bcfw_index_sens(&p, &sb), 0);
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&p, 1.5, &pi), 0);
    assert_int_equal(sfl_dp_bcfw_jl_sens(&p, 1.5, &sj), 0);
    sfl_dp_acct_init(&a);
    for (uint64_t t = 0; t < p.T; t++) {
        assert_int_equal(sfl_dp_acct_add_rnm(&a, b, sb, (uint32_t)p.K), 0);
        assert_int_equal(sfl_dp_acct_add_gaussian(&a, pi, sj, (uint32_t)p.K), 0);
    }
    assert_int_equal(a.n, 2);
    assert_int_equal(sfl_dp_acct_epsilon(&a, p.delta, &s), 0);
    assert_close(s.eps_paper, p.epsilon, 1e-12, 0);
    assert_true(s.eps_rdp < s.eps_paper);
    assert_true(s.eps_rdp_tight < s.eps_rdp);
}

/* After t of T iterations the paper's count of the index is (eps/2)
 * sqrt(t/T) (advanced composition), or the basic K t eps0 when that is
 * smaller. Here only the index is recorded, so asking at delta/2 gives it
 * the paper's delta/2. eps0 = 2 sens/b = (eps/(2K)) / sqrt(2T ln(2/delta))
 * = 0.125 / 49.4086 = 0.00252993. */
static void test_accountant_paper_partial(void **state)
{
    (void)state;
    const sfl_dp_bcfw_t p = {
        .epsilon = 1.0, .delta = 1e-5, .T = 100, .K = 4, .n = 1000, .eta = 2.0, .G = 0.5,
    };
    double b, sb, eps0;
    sfl_dp_acct_t a;
    sfl_dp_spent_t s;

    assert_int_equal(sfl_dp_bcfw_index_scale(&p, &b), 0);
    assert_int_equal(sfl_dp_bcfw_index_sens(&p, &sb), 0);
    eps0 = 2 * sb / b;
    assert_close(eps0, 0.125 / sqrt(200 * log(2e5)), 1e-13, 0);
    sfl_dp_acct_init(&a);
    /* t = 1: basic, K eps0 = 0.0101 < K eps0 sqrt(2 ln(2e5)) = 0.0500. */
    assert_int_equal(sfl_dp_acct_add_rnm(&a, b, sb, 4), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, p.delta / 2, &s), 0);
    assert_close(s.eps_paper, 4 * eps0, 1e-13, 0);
    /* t = 25: advanced, (1/2) sqrt(25/100) = 0.25 < basic 100 eps0 = 0.253. */
    for (int t = 1; t < 25; t++)
        assert_int_equal(sfl_dp_acct_add_rnm(&a, b, sb, 4), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, p.delta / 2, &s), 0);
    assert_close(s.eps_paper, 0.25, 1e-12, 0);
    /* t = T: the index's half of the budget. */
    for (int t = 25; t < 100; t++)
        assert_int_equal(sfl_dp_acct_add_rnm(&a, b, sb, 4), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, p.delta / 2, &s), 0);
    assert_close(s.eps_paper, 0.5, 1e-12, 0);
}

/* Only pure mechanisms: basic composition (order infinity, delta 0) is
 * part of the RDP answer, so a tiny budget is not swamped by ln(1/delta). */
static void test_accountant_pure_only(void **state)
{
    (void)state;
    sfl_dp_acct_t a;
    sfl_dp_spent_t s;

    sfl_dp_acct_init(&a);
    assert_int_equal(sfl_dp_acct_add_laplace(&a, 100.0, 1.0, 1), 0);
    assert_int_equal(sfl_dp_acct_add_rnm(&a, 100.0, 1.0, 1), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 1e-5, &s), 0);
    assert_close(s.eps_rdp, 0.03, 1e-14, 0);
    assert_true(s.order == INFINITY);
    assert_close(s.eps_paper, 0.03, 1e-14, 0); /* basic beats advanced at N = 1 */
}

static void test_accountant_add_errors(void **state)
{
    (void)state;
    sfl_dp_acct_t a, before;
    sfl_dp_spent_t s;

    sfl_dp_acct_init(&a);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 1e-5, &s), 0);
    assert_true(s.eps_paper == 0 && s.eps_rdp == 0 && s.eps_rdp_tight == 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 0.0, &s), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 1.0, &s), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_epsilon(&a, NAN, &s), SFL_EINVAL);
    for (int i = 0; i < SFL_DP_ACCT_MAX; i++)
        assert_int_equal(sfl_dp_acct_add_laplace(&a, 1.0 + i, 1.0, 1), 0);
    before = a;
    assert_int_equal(sfl_dp_acct_add_gaussian(&a, 1.0, 1.0, 1), SFL_ELIMIT);
    assert_int_equal(sfl_dp_acct_add_laplace(&a, 0.0, 1.0, 1), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_add_laplace(&a, 1.0, -1.0, 1), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_add_rnm(&a, NAN, 1.0, 1), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_add_gaussian(&a, 1.0, INFINITY, 1), SFL_EINVAL);
    assert_int_equal(sfl_dp_acct_add_gaussian(&a, 1.0, 1.0, 0), SFL_EINVAL);
    check_same_entries(&a, &before);
    /* A known entry still counts one more iteration. */
    assert_int_equal(sfl_dp_acct_add_laplace(&a, 1.0, 1.0, 1), 0);
    assert_int_equal(a.e[0].iters, 2);
    a.e[0].iters = UINT32_MAX;
    assert_int_equal(sfl_dp_acct_add_laplace(&a, 1.0, 1.0, 1), SFL_ERANGE);
    assert_true(a.e[0].iters == UINT32_MAX);
}

static void fill(sfl_dp_acct_t *a)
{
    sfl_dp_acct_init(a);
    assert_int_equal(sfl_dp_acct_add_rnm(a, 0.39, 5e-4, 4), 0);
    assert_int_equal(sfl_dp_acct_add_gaussian(a, 0.29, 1.5e-3, 4), 0);
    assert_int_equal(sfl_dp_acct_add_rnm(a, 0.39, 5e-4, 4), 0);
    assert_int_equal(sfl_dp_acct_add_laplace(a, 2.5, 1.0, 1), 0);
}

static void test_accountant_encode_roundtrip(void **state)
{
    (void)state;
    sfl_dp_acct_t a, b;
    uint8_t buf[SFL_DP_ACCT_BYTES], again[SFL_DP_ACCT_BYTES];
    const uint8_t head[] = {'S', 'D', 'P', 'A', 1, 3, 0, 0, SFL_DP_MECH_RNM, 0, 0, 0,
                            4, 0, 0, 0, 2, 0, 0, 0};

    assert_int_equal(SFL_DP_ACCT_BYTES, 264);
    fill(&a);
    sfl_dp_acct_encode(&a, buf);
    assert_memory_equal(buf, head, sizeof(head)); /* golden: header, entry 0 */
    assert_int_equal(sfl_dp_acct_decode(&b, buf, sizeof(buf)), 0);
    check_same_entries(&a, &b);
    sfl_dp_acct_encode(&b, again);
    assert_memory_equal(buf, again, sizeof(buf));
    /* The empty accountant too. */
    sfl_dp_acct_init(&a);
    sfl_dp_acct_encode(&a, buf);
    assert_int_equal(sfl_dp_acct_decode(&b, buf, sizeof(buf)), 0);
    assert_int_equal(b.n, 0);
}

/* buf with the byte at off set to v (or the double at off to d). */
static void expect_reject(const uint8_t *good, size_t off, int v)
{
    uint8_t buf[SFL_DP_ACCT_BYTES];
    sfl_dp_acct_t a, keep;

    memcpy(buf, good, sizeof(buf));
    buf[off] = (uint8_t)v;
    fill(&a);
    keep = a;
    if (sfl_dp_acct_decode(&a, buf, sizeof(buf)) != SFL_EPARSE)
        fail_msg("byte %zu = %d accepted", off, v);
    check_same_entries(&a, &keep);
}

static void expect_reject_double(const uint8_t *good, size_t off, double d)
{
    uint8_t buf[SFL_DP_ACCT_BYTES];
    uint64_t bits;
    sfl_dp_acct_t a;

    memcpy(buf, good, sizeof(buf));
    memcpy(&bits, &d, sizeof(bits));
    for (int i = 0; i < 8; i++)
        buf[off + i] = (uint8_t)(bits >> (8 * i));
    if (sfl_dp_acct_decode(&a, buf, sizeof(buf)) != SFL_EPARSE)
        fail_msg("double %g at %zu accepted", d, off);
}

static void test_accountant_decode_rejects(void **state)
{
    (void)state;
    sfl_dp_acct_t a;
    uint8_t good[SFL_DP_ACCT_BYTES + 1];

    fill(&a);
    sfl_dp_acct_encode(&a, good);
    assert_int_equal(sfl_dp_acct_decode(&a, good, SFL_DP_ACCT_BYTES - 1), SFL_EPARSE);
    assert_int_equal(sfl_dp_acct_decode(&a, good, SFL_DP_ACCT_BYTES + 1), SFL_EPARSE);
    assert_int_equal(sfl_dp_acct_decode(&a, good, 0), SFL_EPARSE);
    expect_reject(good, 0, 'X');  /* magic */
    expect_reject(good, 4, 2);    /* version */
    expect_reject(good, 5, 9);    /* n > SFL_DP_ACCT_MAX */
    expect_reject(good, 5, 4);    /* n counts a zero entry */
    expect_reject(good, 7, 1);    /* reserved */
    expect_reject(good, 8, 0);    /* kind 0 */
    expect_reject(good, 8, 5);    /* unknown kind */
    expect_reject(good, 9, 1);    /* padding */
    expect_reject(good, 12, 0);   /* count 0 (4 in the low byte) */
    expect_reject(good, 16, 0);   /* iters 0 (2) */
    expect_reject(good, 20, 1);   /* padding */
    expect_reject(good, 8 + 3 * 32 + 17, 1); /* unused entry */
    expect_reject(good, SFL_DP_ACCT_BYTES - 1, 1);
    expect_reject_double(good, 24, 0.0);
    expect_reject_double(good, 24, -1.0);
    expect_reject_double(good, 24, NAN);
    expect_reject_double(good, 32, INFINITY);
    /* Entry 2 made a copy of entry 0: the same key twice. */
    memcpy(good + 8 + 64, good + 8, 32);
    assert_int_equal(sfl_dp_acct_decode(&a, good, SFL_DP_ACCT_BYTES), SFL_EPARSE);
    assert_detail("dp accountant: entries 0 and 2 repeat");
}

/* The exponential mechanism's entry: eps0 = 2 sens / b as report-noisy-
 * max in the paper's count and in basic composition, but its RDP is the
 * bounded-range one, min(pure, alpha eps0^2 / 8): a quarter of RNM's for
 * small eps0, never above it. */
static void test_accountant_em(void **state)
{
    (void)state;
    sfl_dp_acct_t a, b;
    sfl_dp_spent_t se, sr;
    uint8_t buf[SFL_DP_ACCT_BYTES];

    for (double eps = 1e-3; eps < 50; eps *= 3)
        for (double al = 1.5; al < 5000; al *= 2) {
            double br = sfl_dp_rdp_br(al, eps), pu = sfl_dp_rdp_pure(al, eps);

            assert_true(br <= pu && br <= al * eps * eps / 8 * (1 + 1e-15));
            if (al * eps < 0.01)
                assert_close(br, al * eps * eps / 8, 1e-12, 0);
        }
    assert_true(isnan(sfl_dp_rdp_br(1.0, 0.1)));
    sfl_dp_acct_init(&a);
    sfl_dp_acct_init(&b);
    for (int t = 0; t < 100; t++) {
        assert_int_equal(sfl_dp_acct_add_em(&a, 1.0, 0.01, 4), 0);
        assert_int_equal(sfl_dp_acct_add_rnm(&b, 1.0, 0.01, 4), 0);
    }
    assert_int_equal(a.n, 1);
    assert_int_equal(a.e[0].kind, SFL_DP_MECH_EM);
    assert_close(sfl_dp_acct_rdp(&a, 8), sfl_dp_acct_rdp(&b, 8) / 4, 1e-2, 0);
    assert_int_equal(sfl_dp_acct_epsilon(&a, 1e-5, &se), 0);
    assert_int_equal(sfl_dp_acct_epsilon(&b, 1e-5, &sr), 0);
    assert_close(se.eps_paper, sr.eps_paper, 1e-15, 0);
    assert_true(se.eps_rdp_tight < 0.6 * sr.eps_rdp_tight);
    sfl_dp_acct_encode(&a, buf);
    assert_int_equal(sfl_dp_acct_decode(&b, buf, sizeof(buf)), 0);
    check_same_entries(&a, &b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accountant_gaussian_composition),
        cmocka_unit_test(test_accountant_laplace_rdp),
        cmocka_unit_test(test_accountant_known_gaussian),
        cmocka_unit_test(test_accountant_eps_decreases_with_sigma),
        cmocka_unit_test(test_accountant_paper_reproduces_calibration),
        cmocka_unit_test(test_accountant_paper_partial),
        cmocka_unit_test(test_accountant_pure_only),
        cmocka_unit_test(test_accountant_add_errors),
        cmocka_unit_test(test_accountant_encode_roundtrip),
        cmocka_unit_test(test_accountant_decode_rejects),
        cmocka_unit_test(test_accountant_em),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

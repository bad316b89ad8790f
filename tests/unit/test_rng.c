#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/core/rng.h"

static void test_rng_replay(void **state)
{
    (void)state;
    sfl_rng_t a, b, c;

    sfl_rng_seed(&a, 7, 3, 11, SFL_STREAM_TRAIN);
    sfl_rng_seed(&b, 7, 3, 11, SFL_STREAM_TRAIN);
    for (int i = 0; i < 1000; i++)
        assert_true(sfl_rng_u64(&a) == sfl_rng_u64(&b));
    /* Swapped coordinates and other streams give other sequences. */
    uint64_t first[4];
    sfl_rng_seed(&c, 7, 11, 3, SFL_STREAM_TRAIN);
    first[0] = sfl_rng_u64(&c);
    sfl_rng_seed(&c, 7, 3, 11, SFL_STREAM_DATA);
    first[1] = sfl_rng_u64(&c);
    sfl_rng_seed(&c, 8, 3, 11, SFL_STREAM_TRAIN);
    first[2] = sfl_rng_u64(&c);
    sfl_rng_seed(&c, 7, 3, 11, SFL_STREAM_TRAIN);
    first[3] = sfl_rng_u64(&c);
    assert_true(first[0] != first[3] && first[1] != first[3] && first[2] != first[3]);
}

/* Golden values: the generator must never change silently, or recorded
 * experiments stop replaying. */
static void test_rng_golden(void **state)
{
    (void)state;
    sfl_rng_t r;
    const uint64_t want[3] = {UINT64_C(0x4362029f057b0a66), UINT64_C(0x573d7f7bda84610a),
                              UINT64_C(0x79e619ad396f5402)};

    sfl_rng_seed(&r, 0, 0, 0, 0);
    assert_true(sfl_rng_u64(&r) == UINT64_C(0x8a21cd34a214a917));
    sfl_rng_seed(&r, 7, 3, 11, SFL_STREAM_TRAIN);
    for (int i = 0; i < 3; i++)
        assert_true(sfl_rng_u64(&r) == want[i]);
}

static void test_rng_uniform_range_and_moments(void **state)
{
    (void)state;
    sfl_rng_t r;
    double s = 0, s2 = 0;
    const int n = 200000;

    sfl_rng_seed(&r, 1, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        double u = sfl_rng_uniform(&r);

        assert_true(u > 0 && u < 1);
        s += u;
        s2 += u * u;
    }
    assert_true(fabs(s / n - 0.5) < 0.005);
    assert_true(fabs(s2 / n - s / n * (s / n) - 1.0 / 12) < 0.002);
}

static void moments(double (*draw)(sfl_rng_t *, double), double p, double mean, double var)
{
    sfl_rng_t r;
    double s = 0, s2 = 0;
    const int n = 200000;

    sfl_rng_seed(&r, 2, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        double v = draw(&r, p);

        assert_true(isfinite(v));
        s += v;
        s2 += v * v;
    }
    double m = s / n, v = s2 / n - m * m;
    assert_true(fabs(m - mean) < 0.02 * (1 + sqrt(var)));
    assert_true(fabs(v - var) < 0.03 * var + 1e-3);
}

static double gauss_sd(sfl_rng_t *r, double sd)
{
    return sfl_rng_gauss(r, 1.5, sd);
}

static void test_rng_distributions(void **state)
{
    (void)state;
    moments(gauss_sd, 2.0, 1.5, 4.0);
    moments(sfl_rng_laplace, 0.5, 0.0, 2 * 0.25);
    moments(sfl_rng_gamma, 3.0, 3.0, 3.0);
    moments(sfl_rng_gamma, 0.3, 0.3, 0.3);
}

static void test_rng_below_unbiased(void **state)
{
    (void)state;
    sfl_rng_t r;
    int count[7] = {0};
    const int n = 70000;

    sfl_rng_seed(&r, 3, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        uint64_t v = sfl_rng_below(&r, 7);

        assert_true(v < 7);
        count[v]++;
    }
    for (int i = 0; i < 7; i++)
        assert_true(abs(count[i] - n / 7) < 400);
    assert_true(sfl_rng_below(&r, 1) == 0);
}

static void test_rng_shuffle_is_permutation(void **state)
{
    (void)state;
    sfl_rng_t r;
    uint32_t a[100], seen[100] = {0};

    for (uint32_t i = 0; i < 100; i++)
        a[i] = i;
    sfl_rng_seed(&r, 4, 0, 0, 0);
    sfl_rng_shuffle(&r, a, 100);
    int moved = 0;
    for (uint32_t i = 0; i < 100; i++) {
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (uint32_t i = 0; i < 100; i++)
        assert_int_equal(seen[i], 1);
    assert_true(moved > 80);
    sfl_rng_shuffle(&r, a, 0);
    sfl_rng_shuffle(&r, a, 1);
}

static void test_rng_sample(void **state)
{
    (void)state;
    sfl_rng_t r;
    uint32_t out[50];
    int freq[50] = {0};

    sfl_rng_seed(&r, 5, 0, 0, 0);
    assert_int_equal(sfl_rng_sample(&r, 5, 6, out), SFL_EINVAL);
    assert_int_equal(sfl_rng_sample(&r, 5, 0, out), 0);
    assert_int_equal(sfl_rng_sample(&r, 5, 5, out), 0);
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(out[i], i);
    /* Both the sparse (k < n/8) and the dense path: sorted, distinct, in
     * range, and every element equally likely. */
    const uint32_t ks[2] = {3, 20};
    for (int w = 0; w < 2; w++) {
        memset(freq, 0, sizeof(freq));
        for (int trial = 0; trial < 20000; trial++) {
            assert_int_equal(sfl_rng_sample(&r, 50, ks[w], out), 0);
            for (uint32_t i = 0; i < ks[w]; i++) {
                assert_true(out[i] < 50);
                if (i)
                    assert_true(out[i] > out[i - 1]);
                freq[out[i]]++;
            }
        }
        double expect = 20000.0 * ks[w] / 50;
        for (int i = 0; i < 50; i++)
            assert_true(fabs(freq[i] - expect) < 6 * sqrt(expect));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_replay),
        cmocka_unit_test(test_rng_golden),
        cmocka_unit_test(test_rng_uniform_range_and_moments),
        cmocka_unit_test(test_rng_distributions),
        cmocka_unit_test(test_rng_below_unbiased),
        cmocka_unit_test(test_rng_shuffle_is_permutation),
        cmocka_unit_test(test_rng_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

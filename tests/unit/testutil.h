/* Test helpers shared by the unit suites (header only). */
#ifndef SFL_TEST_TESTUTIL_H
#define SFL_TEST_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

/* Fails unless |a - b| <= atol + rtol |b| (b is the expected value). Equal
 * values pass, so do equal infinities; a NaN never does. cmocka has no
 * floating-point assertion; a macro keeps the caller's file and line. */
#define assert_close(a, b, rtol, atol)                                         \
    do {                                                                       \
        double ac_a_ = (a), ac_b_ = (b);                                       \
        double ac_tol_ = (double)(atol) + (double)(rtol) * fabs(ac_b_);        \
        if (!(ac_a_ == ac_b_ || fabs(ac_a_ - ac_b_) <= ac_tol_))               \
            fail_msg("%s = %.17g, expected %.17g (rtol %g, atol %g)", #a,      \
                     ac_a_, ac_b_, (double)(rtol), (double)(atol));            \
    } while (0)

#endif

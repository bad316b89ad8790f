/* Test helper: an sfl allocator that fails the n-th allocation, so a test
 * can make each allocation of an operation fail in turn (STYLE rule 15). */
#ifndef SFL_TEST_FAILALLOC_H
#define SFL_TEST_FAILALLOC_H

/* Install the counting allocator (idempotent). */
void failalloc_install(void);
/* Fail the n-th allocation from now (0 = the next one); -1 disarms. */
void failalloc_arm(long n);
/* Allocations made since the last arm. */
long failalloc_count(void);
/* Restore the C library allocator. */
void failalloc_uninstall(void);

/* Runs `expr` (an int-valued call) with allocation i failing, for i = 0, 1,
 * ... until it succeeds; asserts that every failed run returned SFL_ENOMEM.
 * `cleanup` runs after every attempt (success or failure). */
#define FAILALLOC_EACH(expr, cleanup)                                          \
    do {                                                                       \
        failalloc_install();                                                   \
        for (long fa_i_ = 0;; fa_i_++) {                                       \
            failalloc_arm(fa_i_);                                              \
            int fa_rc_ = (expr);                                               \
            failalloc_arm(-1);                                                 \
            cleanup;                                                           \
            if (fa_rc_ == 0)                                                   \
                break;                                                         \
            assert_int_equal(fa_rc_, SFL_ENOMEM);                              \
            assert_true(fa_i_ < 100000);                                       \
        }                                                                      \
        failalloc_uninstall();                                                 \
    } while (0)

#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cmocka.h>

#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

static int calls;

static void *count_malloc(size_t n)
{
    calls++;
    return malloc(n);
}

static void *count_realloc(void *p, size_t n)
{
    calls++;
    return realloc(p, n);
}

static void test_alloc_replace(void **state)
{
    (void)state;
    assert_int_equal(sfl_replace_allocator(count_malloc, NULL, free), SFL_EINVAL);
    assert_int_equal(sfl_replace_allocator(count_malloc, count_realloc, free), 0);
    void *p = sfl__malloc(16);
    p = sfl__reallocarray(p, 4, 8);
    assert_non_null(p);
    sfl__free(p);
    assert_int_equal(calls, 2);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);
}

/* ASan brings its own allocator: gcc says so with __SANITIZE_ADDRESS__,
 * clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_ALLOCATOR 1
#endif
#endif

/* A freed block below the threshold stays in the heap (free bytes the
 * allocator holds), so the next round's block of that size faults nothing
 * in. glibc's own allocator only: sanitizers bring theirs. */
static void test_alloc_keep_freed(void **state)
{
    (void)state;
#if defined(__GLIBC__) && !defined(ASAN_ALLOCATOR)
    size_t t = sfl_alloc_keep_freed(64u << 20);
    assert_true(t >= 256u << 10);
    size_t n = t / 2;
    char *p = malloc(n);
    assert_non_null(p);
    memset(p, 1, n);
    free(p);
    struct mallinfo2 mi = mallinfo2();
    assert_true(mi.fordblks >= n); /* kept, not unmapped nor trimmed */
#endif
}

static void test_alloc_overflow(void **state)
{
    (void)state;
    assert_null(sfl__mallocarray(SIZE_MAX / 2, 4));
    assert_null(sfl__calloc(SIZE_MAX / 8 + 1, 8));
    assert_null(sfl__reallocarray(NULL, SIZE_MAX, 2));
    sfl__free(NULL); /* no-op */
    unsigned char *z = sfl__calloc(8, 4);
    assert_non_null(z);
    for (int i = 0; i < 32; i++)
        assert_int_equal(z[i], 0);
    sfl__free(z);
}

static void test_alloc_failalloc(void **state)
{
    (void)state;
    failalloc_install();
    failalloc_arm(1);
    void *a = sfl__malloc(8);
    void *b = sfl__malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_int_equal(failalloc_count(), 2);
    sfl__free(a);
    failalloc_uninstall();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_replace),
        cmocka_unit_test(test_alloc_overflow),
        cmocka_unit_test(test_alloc_keep_freed),
        cmocka_unit_test(test_alloc_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static sfl_malloc_fn a_malloc = malloc;
static sfl_realloc_fn a_realloc = realloc;
static sfl_free_fn a_free = free;

int sfl_replace_allocator(sfl_malloc_fn m, sfl_realloc_fn r, sfl_free_fn f)
{
    if (m == NULL && r == NULL && f == NULL) {
        a_malloc = malloc;
        a_realloc = realloc;
        a_free = free;
        return 0;
    }
    if (m == NULL || r == NULL || f == NULL)
        return SFL_EINVAL;
    a_malloc = m;
    a_realloc = r;
    a_free = f;
    return 0;
}

size_t sfl_alloc_keep_freed(size_t keep)
{
#ifdef __GLIBC__
    /* glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on
     * 64-bit builds, 512 KiB on 32-bit ones): halve until accepted. */
    size_t t = keep > INT_MAX ? (size_t)INT_MAX : keep;

    for (; t >= 64u << 10; t /= 2)
        if (mallopt(M_MMAP_THRESHOLD, (int)t) == 1) {
            (void)mallopt(M_TRIM_THRESHOLD, (int)(keep > INT_MAX ? INT_MAX : keep));
            return t;
        }
#else
    (void)keep;
#endif
    return 0;
}

void *sfl__malloc(size_t size)
{
    /* malloc(0) may return NULL legitimately; callers treat NULL as failure,
     * so always ask for at least one byte. */
    return a_malloc(size ? size : 1);
}

void *sfl__mallocarray(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return sfl__malloc(n * size);
}

void *sfl__calloc(size_t n, size_t size)
{
    void *p = sfl__mallocarray(n, size);

    if (p)
        memset(p, 0, n * size);
    return p;
}

void *sfl__reallocarray(void *ptr, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    size_t bytes = n * size;

    return a_realloc(ptr, bytes ? bytes : 1);
}

void sfl__free(void *ptr)
{
    if (ptr)
        a_free(ptr);
}

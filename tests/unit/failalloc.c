#include "failalloc.h"

#include <stdlib.h>

#include "sfl/core/alloc.h"

static long countdown = -1;
static long made;

static int should_fail(void)
{
    made++;
    if (countdown < 0)
        return 0;
    return countdown-- == 0;
}

static void *fa_malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n);
}

static void *fa_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n);
}

void failalloc_install(void)
{
    (void)sfl_replace_allocator(fa_malloc, fa_realloc, free);
}

void failalloc_arm(long n)
{
    countdown = n;
    made = 0;
}

long failalloc_count(void)
{
    return made;
}

void failalloc_uninstall(void)
{
    countdown = -1;
    (void)sfl_replace_allocator(NULL, NULL, NULL);
}

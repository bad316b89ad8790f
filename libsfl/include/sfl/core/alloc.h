/* One allocator hook for the whole library (and protobuf-c unpacking later). */
#ifndef SFL_ALLOC_H
#define SFL_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*sfl_malloc_fn)(size_t size);
typedef void *(*sfl_realloc_fn)(void *ptr, size_t size);
typedef void (*sfl_free_fn)(void *ptr);

/* Replace the allocator. Call before any other sfl function; passing NULLs
 * restores the C library's. Returns 0 or SFL_EINVAL if only some are NULL. */
int sfl_replace_allocator(sfl_malloc_fn m, sfl_realloc_fn r, sfl_free_fn f);

/* Library-internal wrappers. sfl__calloc / sfl__mallocarray check n*size for
 * overflow and return NULL on it. */
void *sfl__malloc(size_t size);
void *sfl__calloc(size_t n, size_t size);
void *sfl__mallocarray(size_t n, size_t size);
void *sfl__reallocarray(void *ptr, size_t n, size_t size);
void sfl__free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif

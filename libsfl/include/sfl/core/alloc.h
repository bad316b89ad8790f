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

/* Process policy for programs that run round after round with buffers of
 * the model's size (the agent, the coordinator): freed blocks of up to
 * `keep` bytes stay in the process's heap and are reused by the next round,
 * instead of being returned to the kernel and faulted in again page by
 * page (at d = 1e5 that was a quarter of the agents' and the coordinator's
 * CPU: results/agent.md). Up to `keep` bytes of free heap are retained;
 * larger blocks still come from and go back to mmap. glibc only (mallopt
 * M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, clamped to what glibc accepts);
 * elsewhere, and under a sanitizer's allocator, it does nothing. Returns the
 * mmap threshold set, 0 if none. Call once, early, from main. */
size_t sfl_alloc_keep_freed(size_t keep);

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

/* A map from 64-bit ids to pointers, for lookups that run per message or
 * per call over many entries: a gRPC session's calls by stream id (a
 * front-end's link to its master holds one stream per agent), a
 * front-end connection's agents by the front-end's number for them.
 *
 * Open addressing with linear probing, kept at most half full, entries
 * removed by backward shift (no tombstones): get, put and del are O(1)
 * expected whatever the history of puts and dels. Not thread-safe. A
 * zeroed sfl_idmap_t is an empty map. */
#ifndef SFL_IDMAP_H
#define SFL_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_idmap {
    uint64_t *keys;
    void **vals; /* NULL: an empty slot */
    size_t cap;  /* 0 or a power of two */
    size_t n;
} sfl_idmap_t;

/* The value put under key, or NULL. */
void *sfl_idmap_get(const sfl_idmap_t *m, uint64_t key);
/* Puts val (not NULL, else SFL_EINVAL) under key, replacing what was
 * there; SFL_ENOMEM leaves the map as it was. */
int sfl_idmap_put(sfl_idmap_t *m, uint64_t key, void *val) SFL_MUST_CHECK;
/* Room for more entries, so that the next `more` puts of new keys cannot
 * fail; SFL_ENOMEM leaves the map as it was. */
int sfl_idmap_reserve(sfl_idmap_t *m, size_t more) SFL_MUST_CHECK;
/* Removes key; the value that was under it, or NULL. */
void *sfl_idmap_del(sfl_idmap_t *m, uint64_t key);
/* Frees the table (not the values); m is an empty map again. */
void sfl_idmap_free(sfl_idmap_t *m);

#ifdef __cplusplus
}
#endif

#endif

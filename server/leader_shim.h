/* TEMPORARY (until the merge of i28-pgstore, which implements these in
 * server/store/ for both backends; deleted then): the store's leadership
 * API of issue 28 with SQLite's semantics, so this branch builds. */
#ifndef COORD_LEADER_SHIM_H
#define COORD_LEADER_SHIM_H

#include <stdint.h>

#include "store/store.h"

#define SFL_EFENCED (-10018)

int coord_store_leader_try(coord_store_t *s, const char *holder, int64_t *epoch);
void coord_store_fence(coord_store_t *s, int64_t epoch);
int coord_store_leader_get(coord_store_t *s, int64_t *epoch, char holder[128],
                           int64_t *since_ms);
int coord_store_leader_held(coord_store_t *s);

#endif

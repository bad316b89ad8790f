/* Writes posted to the store's writer (coordwrite.c), never waited for.
 * On the loop thread unless said otherwise. */
#ifndef COORD_STORE_COORDWRITE_H
#define COORD_STORE_COORDWRITE_H

#include "coord_int.h"

/* attempt: the wire attempt (the store's minus 1). */
void coord_write_round_state(coord_t *co, uint64_t job, uint64_t round, uint32_t attempt,
                             coord_srow_state_t st, const char *reason);
void coord_write_job_state(coord_t *co, uint64_t job, coord_job_state_t st,
                           coord_written_cb after, void *ud);
void coord_write_job_fail(coord_t *co, uint64_t job, const char *error);
/* Queues an update's participation record (reason may be NULL); written
 * with the others at the next flush, at the latest on the next tick. */
void coord_part_queue(coord_t *co, const coord_part_row_t *row);
/* Posts the queued records as one transaction; a failure is logged. */
void coord_part_flush(coord_t *co);

#endif

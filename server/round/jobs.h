/* The daemon's jobs (job.c): creation, loading, O(dim) state.
 * On the loop thread unless said otherwise. */
#ifndef COORD_ROUND_JOBS_H
#define COORD_ROUND_JOBS_H

#include "coord_int.h"

/* Checks spec and records the job: < 0 if refused now (after not called),
 * 0 when posted, and after then runs with the job (NULL if the store
 * refused it, rc and error saying why). */
int coord_job_create(coord_t *co, const sfl_job_spec_t *spec, coord_created_cb after,
                     void *ud) SFL_MUST_CHECK;
/* A job row from the store at start. */
int coord_job_load(coord_t *co, const coord_job_row_t *row) SFL_MUST_CHECK;
/* Allocates the job's O(dim) state from its last checkpoint. */
int coord_job_model(coord_job_t *j) SFL_MUST_CHECK;
void coord_job_free(coord_job_t *j);
/* Which round metrics the job has (sfl_metric_state). */
void coord_job_metric_kind(const coord_job_t *j, sfl_metric_job_t *k);

#endif

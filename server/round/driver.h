/* The round driver (driver.c): per job, the round machine (round.h) moved
 * on by the scheduler tick and by events, the kind's operations called
 * through j->shape (shape.h). On the loop thread. */
#ifndef COORD_ROUND_DRIVER_H
#define COORD_ROUND_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "coord_int.h"
#include "job/round.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "store/writer.h"

typedef struct coord coord_t;
typedef struct coord_job coord_job_t;
typedef struct coord_attempt_key coord_attempt_key_t;


/* Runs every job's round machine now. */
void coord_schedule(coord_t *co);
/* coord_schedule once after the loop's current batch of I/O, however many
 * events asked for it (a Subscribe, an agent gone): a drive walks every
 * agent, and 10,000 Subscribes in a burst must not walk them 10,000
 * times. */
void coord_schedule_soon(coord_t *co);
/* The scheduler tick (coord_new starts its timer). */
void coord_on_tick(uv_timer_t *t);
/* Moves the job's round machine on: selection, deadlines, aggregation. */
void coord_job_drive(coord_job_t *j);
/* The machine takes event ev now; a refusal is logged (a bug here). */
void coord_job_step(coord_job_t *j, coord_event_t ev);
/* The round after the last committed one (or the statistics round), in
 * SELECTING, with the job's shape for it (coord_shape_set). */
void coord_reset_round(coord_job_t *j);
/* Sets, logs and records the job's new state; releases its model unless
 * running. after (may be NULL) runs once the record is durable or failed. */
void coord_set_job_state(coord_job_t *j, sfl_job_state_t st, coord_written_cb after, void *ud);
/* The job cannot go on: FAILED with why, recorded. */
void coord_fail_job(coord_job_t *j, const char *why);
/* Leaves the open attempt uncommitted (pause, cancel, shutdown). */
void coord_abandon(coord_job_t *j, const char *reason);
/* Shutdown: attempts with their quorum aggregated, the others abandoned. */
void coord_drive_wind_down(coord_t *co);
/* Wipes the attempt's key and drops its task. */
void coord_close_attempt(coord_job_t *j);
coord_attempt_key_t *coord_key_hold(coord_attempt_key_t *k);
void coord_key_drop(coord_attempt_key_t *k);
/* The agents an attempt of j can draw (connected, eligible, not busy in
 * another job's round and, with sub, subscribed now), ascending, into ids
 * (NULL: only counted); their count. */
uint32_t coord_candidates(const coord_job_t *j, uint64_t *ids, int sub);
/* A commit's writer op is done (the kind's commit posted it): the
 * aggregation's end on the loop. */
void coord_commit_outcome(coord_job_t *j, coord_write_op_t *op);
/* Bytes of O(dim) state a job of that dimension holds when loaded. */
uint64_t coord_job_state_bytes(size_t dim);
/* Jobs not ended (pending, running, paused): what max_live_jobs bounds. */
uint64_t coord_live_jobs(const coord_t *co);
/* Sum of it over the jobs not ended that hold it. */
uint64_t coord_live_job_bytes(const coord_t *co);
/* Frees the O(dim) state of a job that is not running (nor aggregating). */
void coord_job_release(coord_job_t *j);
/* The last committed round's metrics (JobStatus's last_*), from the store. */
void coord_load_last_metrics(coord_job_t *j);
/* The global state of the last checkpoint (zero before the first). */
int coord_reload_model(coord_job_t *j) SFL_MUST_CHECK;

#endif

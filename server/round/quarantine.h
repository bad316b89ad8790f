/* Quarantine (quarantine.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_ROUND_QUARANTINE_H
#define COORD_ROUND_QUARANTINE_H

#include "coord_int.h"

/* quarantine.c: members a job's rounds named as culprits, never selected
 * for that job again until an operator releases them (docs/security.md).
 * All on the loop thread. */
/* Quarantines agent for job j with reason (a culprit's description, e.g.
 * "round 4 attempt 1: the shares from 9 do not match its commitment";
 * truncated to printable ASCII): effective at once, recorded through the
 * writer, idempotent (a second call keeps the first reason and changes
 * nothing). When the agent is a member of the job's current attempt, the
 * attempt is excused (coord_round_excuse): its failure does not count
 * toward max_attempts. */
void coord_quarantine(coord_job_t *j, uint64_t agent, const char *reason);
/* The agent's quarantine in job j, or NULL. */
const coord_quar_t *coord_quarantined(const coord_job_t *j, uint64_t agent);
/* At start, after the jobs: every quarantine the store holds. */
int coord_quarantine_load(coord_t *co) SFL_MUST_CHECK;
void coord_quarantine_free(coord_job_t *j);
/* "quarantined in job 3: <reason>; ..." for the agent over all jobs ("" if
 * none), and "agent 9: <reason>; ..." for a job ("" if none): ListAgents'
 * and JobStatus's text. */
void coord_quarantine_text(const coord_t *co, uint64_t agent, char *out, size_t cap);
void coord_quarantine_job_text(const coord_job_t *j, char *out, size_t cap);
/* Admin.ReleaseAgent. */
void coord_h_release(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

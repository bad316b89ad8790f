/* SubmitUpdate and Heartbeat (submit.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_SERVICE_SUBMIT_H
#define COORD_SERVICE_SUBMIT_H

#include "coord_int.h"
#include "round/verdict.h"

void coord_h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* The verdict on what ids alone decide for agent a's update u (job, round,
 * attempt: the open attempt, a member not accepted nor claimed, before the
 * deadline), with *jp the job, reason and *rj why; COORD_SUBMIT_OPEN when
 * the update must be opened (fold mode's Claim judges by it too). */
#define COORD_SUBMIT_OPEN ((coord_upd_verdict_t)-1)
coord_upd_verdict_t coord_submit_prejudge(coord_t *co, coord_agent_t *a, const sfl_update_t *u,
                                          coord_job_t **jp, char *reason, size_t cap, int *rj);
/* Heartbeat: an agent's progress on its task; tells it to abort a closed one. */
void coord_h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

/* Subscribe streams (subs.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_ROUND_SUBS_H
#define COORD_ROUND_SUBS_H

#include "coord_int.h"

/* Ends the agent's held Subscribe with status and message. */
void coord_end_sub(coord_agent_t *a, int status, const char *msg);
/* Sends the job's current task on the agent's Subscribe (not while the
 * attempt's opening is being recorded). */
void coord_send_task(coord_t *co, coord_job_t *j, coord_agent_t *a);
/* Ends, with a paced Wait, the streams that got nothing for the hold time. */
void coord_dismiss_idle(coord_t *co);
/* The Subscribe's cancel callback: the agent's stream is gone. */
void coord_sub_cancelled(sfl_grpc_call_t *call, void *ud);

#endif

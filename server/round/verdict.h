/* An answer's verdict (verdict.c): the UpdateAck it earns and its counters.
 * On the loop thread. */
#ifndef COORD_ROUND_VERDICT_H
#define COORD_ROUND_VERDICT_H

#include "coord_int.h"

/* Counts an update's verdict; rj: the RJ_ reason of a rejection. */
void coord_count_verdict(coord_t *co, coord_upd_verdict_t v, int rj);
/* A secure-aggregation stage answer's or a vertical step answer's verdict
 * (sfl_stage_answers_total): messages within an update, not updates. */
void coord_count_stage(coord_t *co, coord_upd_verdict_t v);
/* The wire's ack status of a verdict. */
sfl_ack_status_t coord_ack_of(coord_upd_verdict_t v);
/* Replies with the UpdateAck of verdict vd (why: its reason unless
 * accepted) for (job, round, attempt). */
void coord_reply_ack(sfl_grpc_call_t *call, coord_upd_verdict_t vd, const char *why,
                     uint64_t job, uint64_t round, uint32_t attempt);
/* The RJ_ reason of a failed sfl_seal_open_update. */
int coord_seal_reason(int rc);

#endif

/* SubmitUpdate and Heartbeat (submit.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_SERVICE_SUBMIT_H
#define COORD_SERVICE_SUBMIT_H

#include "coord_int.h"
#include "round/verdict.h"

void coord_h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* Heartbeat: an agent's progress on its task; tells it to abort a closed one. */
void coord_h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

/* Join and Subscribe (agentsvc.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_SERVICE_AGENTSVC_H
#define COORD_SERVICE_AGENTSVC_H

#include "coord_int.h"

void coord_h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

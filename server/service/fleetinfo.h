/* Admin.Fleet (fleetinfo.c): the fleet as this coordinator sees it. On
 * the loop thread. */
#ifndef COORD_SERVICE_FLEETINFO_H
#define COORD_SERVICE_FLEETINFO_H

#include "coord_int.h"

void coord_h_fleet(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

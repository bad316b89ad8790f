/* The Fleet service (proto/sfl/v1/fleet.proto) on the master: the agents a
 * front-end holds, each as a connection without a transport
 * (coord_conn_t.fe), and their calls relayed to the Coordinator service's
 * handlers. On the loop thread. */
#ifndef COORD_SERVICE_FLEETSVC_H
#define COORD_SERVICE_FLEETSVC_H

#include "coord_int.h"

/* Agents one front-end connection may hold at once (more Joins are
 * refused RESOURCE_EXHAUSTED): the config's max_conns. */

void coord_h_fleet_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_model(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_fleet_gone(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* Fold mode's Claim: a FleetCall relayed to coord_h_claim (foldsvc.c). */
void coord_h_fleet_claim(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* The front-end's agent connection numbered fe_id, or NULL. */
coord_conn_t *coord_fleet_kid(coord_conn_t *fe, uint64_t fe_id);
/* 1 while k can carry calls: its transport (or its front-end's) is open. */
int coord_conn_live(const coord_conn_t *k);
/* A front-end's connection closed: every agent it held goes offline. */
void coord_fleet_closed(coord_conn_t *fe);
/* Drops the agents held by front-ends with this certificate (revoked):
 * returns how many. */
uint32_t coord_fleet_revoke(coord_t *co, const uint8_t fpr[32]);
/* Admin.Fleet's front-ends: one entry per connection of the coordinator
 * role (name, address, agents it holds, ms since its last Fleet call), at
 * most SFL_MSG_FLEET_MAX_FRONTENDS. Fills *out (owned, sfl__free; NULL
 * when *n = 0). */
int coord_fleet_frontends(coord_t *co, sfl_fleet_frontend_t **out, uint32_t *n) SFL_MUST_CHECK;

#endif

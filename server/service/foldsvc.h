/* Fold mode on the master (proto/sfl/v1/fleet.proto: FoldSpec, Claim,
 * Partial; docs/operations.md "Front-ends"): a front-end verifies its
 * agents' updates of a frontend_fold job's plain training rounds itself,
 * claims each from the master (judged exactly once, from the agent's
 * signature over the payload's digest) and sends the folded sum of the
 * claimed ones, checked against the claims and the job's bounds. On the
 * loop thread. */
#ifndef COORD_SERVICE_FOLDSVC_H
#define COORD_SERVICE_FOLDSVC_H

#include "coord_int.h"

/* Fleet.FoldSpec (ud: the front-end's connection). */
void coord_h_fleet_fold_spec(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* The Claim inside a relayed FleetCall (ud: the agent's connection, a kid
 * of the front-end's: fleetsvc.c's relay). */
void coord_h_claim(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* Fleet.Partial (ud: the front-end's connection). */
void coord_h_fleet_partial(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* 1 when j's open attempt folds at front-ends (a frontend_fold job's plain
 * training round, streaming). */
int coord_fold_job(const coord_job_t *j);
/* 1 when the member in slot of j's open attempt was claimed by a front-end
 * (claimed, folded or lost): never accepted again in this attempt. */
int coord_fold_claimed(const coord_job_t *j, uint32_t slot);

#endif

/* Vertical rounds (vround.c; vjob.h, docs/protocol.md "Vertical jobs"):
 * the vertical round kind (coord_shape_vertical) and SubmitStep. */
#ifndef COORD_ROUND_VROUND_H
#define COORD_ROUND_VROUND_H

#include <stddef.h>
#include <stdint.h>

#include "job/ledger.h"
#include "sfl/net/grpc.h"

/* A vertical job's state: the agent of each block in the open attempt
 * and the privacy ledger. */
typedef struct coord_vround {
    uint64_t *vagent;          /* K agent ids, by block; NULL before the first attempt */
    coord_ledger_t ledger;
} coord_vround_t;

void coord_h_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

#endif

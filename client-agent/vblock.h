/* The agent's side of a vertical job (sfl/algo/vertical.h; docs/protocol.md,
 * "Vertical jobs"): it holds one column block of samples shared with other
 * agents, aligned by sample id, and answers every iteration of a round
 * with its block's message.
 *
 * Privacy: the agent keeps its own ledger of a private job, in
 * state_dir/privacy-<job>.ledger (0600, written atomically): the job's
 * budget as first seen, the iterations the agent reserved and the round
 * attempts it answered. A round's iterations are reserved, durably, before
 * its first answer; an agent never answers an attempt twice (not even after
 * a restart: it waits for the next attempt) and refuses a task that would
 * take it past the job's iteration count, past its own max_epsilon, or that
 * changes the budget it first saw. It does not rely on the coordinator to
 * stop. Its noise is from libsodium's generator unless dp_test_noise is set
 * (tests only: the job's seed, as sfl-sim draws it, so nothing is private). */
#ifndef AGENT_VBLOCK_H
#define AGENT_VBLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"

typedef struct agent_vert agent_vert_t;

/* BLAKE2b-256 of the sample ids in ids_file: one id per line, surrounding
 * blanks ignored, hashed as each id followed by '\n' (docs/protocol.md).
 * There must be exactly rows of them, distinct neighbours not required;
 * SFL_EINVAL names the file and line otherwise. */
int agent_vert_ids_hash(const char *ids_file, uint32_t rows,
                        uint8_t hash[SFL_MSG_HASH_BYTES]) SFL_MUST_CHECK;

typedef struct agent_vert_cfg {
    const sfl_dataset_t *data; /* the block: its columns of the n samples */
    uint32_t first_column;     /* 1-based problem column of its column 1 */
    const char *state_dir;     /* the ledger's directory */
    double max_epsilon;        /* 0: the job's own budget is the limit */
    int test_noise;            /* 1: seeded noise (tests only) */
} agent_vert_cfg_t;

/* A verified vertical task (t->rows > 0): checks it against the block (the
 * algorithm is vertical, the block is one of the job's, n matches), the
 * privacy rules above, reserves the round in the ledger, and returns the
 * round's context (*ctx replaced; the job's common object and client state
 * are kept from the previous context when it is the same job). SFL_EINVAL,
 * SFL_EUNSUP, SFL_EDIM, SFL_ELIMIT (budget) with a detail; -EEXIST for
 * an attempt already answered (nothing to do). */
int agent_vert_begin(agent_vert_t **ctx, const sfl_task_t *t,
                     const agent_vert_cfg_t *cfg) SFL_MUST_CHECK;
/* The answer to iteration `it` of the context's round (the next one it has
 * not answered) to the broadcast b[0..nb): the wire message, owned
 * (sfl__free). SFL_EINVAL for an iteration outside the round or already
 * answered, a broadcast of the wrong length. */
int agent_vert_step(agent_vert_t *ctx, uint64_t it, const double *b, size_t nb, uint8_t **msg,
                    size_t *len) SFL_MUST_CHECK;
/* What the answer to iteration it carries besides the message: the
 * objective at the round's starting model over *rows rows, for the round's
 * first iteration once answered and a job whose broadcast gives it
 * (sfl_vertical_objective); 0 and 0 otherwise. */
void agent_vert_objective(const agent_vert_t *ctx, uint64_t it, double *f, uint64_t *rows);
/* The round's identity, for the answers. */
void agent_vert_round(const agent_vert_t *ctx, uint64_t *job, uint64_t *round,
                      uint32_t *attempt, uint64_t *first);
void agent_vert_free(agent_vert_t *ctx);

#endif

/* The agent's side of update mode 2 (secure aggregation; docs/security.md,
 * docs/protocol.md "Update mode 2"): one round's client of sfl/crypto/secagg.h,
 * fed the task, the stages the coordinator sends, and the trained update.
 * Every function returns the answer to send (SubmitSecAgg's packed request,
 * owned; NULL when there is nothing to send yet). A client that finds
 * anything wrong aborts (sfl/crypto/secagg.h) and answers nothing more. */
#ifndef AGENT_SAGENT_H
#define AGENT_SAGENT_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/algo/client.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/secagg.h"
#include "sfl/crypto/seal.h"
#include "sfl/core/vec.h"

typedef struct agent_sa agent_sa_t;

/* Test hook, for the hostile member test double (tests/e2e/hostile_tool.c)
 * only: NULL in sfl-agent. answer is called with each answer right before
 * it is packed and sent, with what the round knows (r: the round as the
 * client was opened with it; st: the coordinator's stage being answered,
 * NULL for stage 1; q: the plaintext input words of a stage 3, k + 2 +
 * metrics, else NULL); it may change m, re-signing with ident what it
 * changed. (Its Join hook is agent.h's agent_test_join_samples.) */
typedef struct agent_sa_hooks {
    void (*answer)(void *ud, const sfl_sa_round_t *r, const sfl_msg_sa_stage_t *st,
                   const sfl_identity_t *ident, const uint32_t *q, sfl_msg_sa_answer_t *m);
    void *ud;
} agent_sa_hooks_t;
extern const agent_sa_hooks_t *agent_sa_test_hooks;

/* A verified mode-2 task: S_t from its model and nonce, the round and the
 * client (refused below the agent's floor pol); *answer its stage-1 answer
 * (the round's keys). id is borrowed for the round's life. */
int agent_sa_begin(const sfl_task_t *t, uint64_t agent_id, const sfl_identity_t *id,
                   const sfl_sa_policy_t *pol, agent_sa_t **out, uint8_t **answer,
                   size_t *len) SFL_MUST_CHECK;
/* Tests only (agent.ini secagg_test_weight): the input is scaled as if
 * the member's public weight were w, as a hostile member that inflates its
 * weight would (docs/security.md). */
void agent_sa_test_weight(agent_sa_t *c, double w);
/* The round's update (the model the agent trained to; samples its count,
 * for the metrics only: the input is scaled by the member's public weight
 * in the task):
 * the change on S_t with the error-feedback residual resid (d entries, the
 * job's, kept across rounds by the caller: zero at first), quantized, and
 * the training's figures rep as the round's metric words (sfl/crypto/savec.h); a
 * stage 3 that waited for it is answered now (*answer, else NULL). */
int agent_sa_update(agent_sa_t *c, const sfl_spvec_t *update, uint64_t samples,
                    const sfl_client_report_t *rep, double *resid, uint8_t **answer,
                    size_t *len) SFL_MUST_CHECK;
/* A stage of this round (the caller checked job, round and attempt):
 * *answer, or NULL for a stage 3 that waits for the update. */
int agent_sa_stage(agent_sa_t *c, const sfl_msg_sa_stage_t *st, uint8_t **answer,
                   size_t *len) SFL_MUST_CHECK;
/* The round it serves. */
void agent_sa_round(const agent_sa_t *c, uint64_t *job, uint64_t *round, uint32_t *attempt);
/* The model's dimension (the residual's length); a statistics round's: the
 * moments' 1 + 2 d. */
uint32_t agent_sa_dim(const agent_sa_t *c);
/* A standardize job's statistics round (round 0) under mode 2: its
 * update is the raw moments of the training rows, encoded with this
 * member's public weight and the job's bound (the task's clip) by
 * agent_sa_update (sfl_sa_moments_encode), every slot kept, no residual. */
int agent_sa_stats(const agent_sa_t *c);
/* SFL_ERANGE naming the first value of data's rows with |x| > bound (the
 * job's standardize_bound: such a row's moments would not fit mode 2's
 * clip), SFL_EINVAL for a bound not finite and > 0. */
int agent_sa_stats_check(const sfl_dataset_t *data, double bound) SFL_MUST_CHECK;
void agent_sa_free(agent_sa_t *c);

/* What an agent keeps of a mode-2 job across its rounds and restarts, in
 * state_dir/secagg-<job>.state (0600, replaced atomically): the last round
 * it took (it never takes one at or before it again: a replayed task) and
 * its error-feedback residual. The file is
 *   "sflsa01\n" | u64 job | u64 round | u32 attempt | u32 d | d x f64
 * all little-endian, exactly 32 + 8 d bytes. */
typedef struct agent_sa_state {
    uint64_t job, round;
    uint32_t attempt, d;
    /* 1 once a round of the job was taken (the file exists): round 0
     * attempt 0 is a round (a standardize job's statistics round), so
     * (round, attempt) alone cannot say "none yet" */
    int taken;
    double *resid;              /* d entries, owned */
} agent_sa_state_t;

/* Loads job's state from dir into *st (cleared first): no file is a fresh
 * state (round 0, zero residual). A file that is not the format above, is
 * another job's or has another d is SFL_EPARSE naming the file (the agent
 * refuses the job's rounds until an operator removes it: taking them could
 * repeat a round). */
int agent_sa_state_load(const char *dir, uint64_t job, uint32_t d,
                        agent_sa_state_t *st) SFL_MUST_CHECK;
int agent_sa_state_save(const char *dir, const agent_sa_state_t *st) SFL_MUST_CHECK;
void agent_sa_state_clear(agent_sa_state_t *st);

#endif

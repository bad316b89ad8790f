/* Round kinds behind one table (docs/design.md, "Round kinds"): what a
 * round of a job does beyond the pure machine (round.h) and the driver's
 * selection, opening, deadlines and commit. Four kinds implement it, each
 * in its own file with its own state (coord_job_t.kst, owned by the kind):
 * plain (plain.c: mode 1's sealed updates, the FedAvg family), secure
 * aggregation (saround.c: update mode 2), vertical (vround.c: column
 * blocks and their iterations) and the statistics round (stats.c: round 0
 * of a standardize job, under either update mode). The driver and the
 * services call j->shape->op(j, ...) and never name a kind; a new kind is
 * one file and its line in coord_shape_for (shape.c).
 *
 * Every operation is set in every kind (test_shape checks it); a kind that
 * has nothing to do points at one of the coord_shape_nop_* below. All run
 * on the loop thread except fold, which runs on the thread pool while the
 * job is busy. */
#ifndef COORD_ROUND_SHAPE_H
#define COORD_ROUND_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "job/model.h"
#include "job/round.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"

typedef struct coord_job coord_job_t;
typedef struct coord_agent coord_agent_t;

typedef struct coord_shape {
    const char *name;          /* "plain", "secagg", "vertical", "statistics" */
    /* j leaves this shape or is freed: frees the kind's state without
     * reporting anything (nothing may be written for the job any more).
     * A job takes a shape with its state j->kst all zeros. */
    void (*free)(coord_job_t *j);
    /* The round the job runs next and its machine's config. */
    void (*plan)(const coord_job_t *j, uint64_t *round, coord_round_cfg_t *cfg);
    /* At start, once the job is prepared (no O(dim) state yet): what the
     * store's last commit says of the kind's state. */
    void (*load)(coord_job_t *j);
    /* The job's O(dim) state was just loaded from its checkpoint: the
     * kind's state that follows from it and the store (SFL_E...). */
    int (*model)(coord_job_t *j) SFL_MUST_CHECK;
    /* Why agent a's data cannot serve the kind's rounds of j
     * (COORD_INELIG_FEATURES with why), or COORD_INELIG_NONE with *dim the
     * dimension its data must fit. */
    coord_inelig_t (*ineligible)(const coord_job_t *j, const coord_agent_t *a, uint32_t *dim,
                                 char *why, size_t cap);
    /* SELECTING: the cohort the kind can use from the available agents
     * ids[0..*n) (ascending, kept so); extra: why others are left out. */
    void (*cohort)(coord_job_t *j, uint64_t *ids, uint32_t *n, char *extra, size_t cap);
    /* Before START: SFL_ELIMIT with why if the round may not run (the job
     * fails with it). */
    int (*admit)(coord_job_t *j, char *why, size_t cap) SFL_MUST_CHECK;
    /* Before START: the candidates ids[0..*n) the attempt draws from. */
    int (*draw)(coord_job_t *j, uint64_t *ids, uint32_t *n) SFL_MUST_CHECK;
    /* After START: the attempt's state for its cohort (before the task). */
    int (*open)(coord_job_t *j) SFL_MUST_CHECK;
    /* How many signed tasks the open attempt has (1, or one per secure
     * aggregation group), and which of them agent gets. */
    uint32_t (*ntasks)(const coord_job_t *j);
    uint32_t (*task_of)(const coord_job_t *j, uint64_t agent);
    /* The kind's part of the attempt's task g (< ntasks): t->model
     * (returns owned, free with sfl_spvec_free) and the kind's fields; sa
     * is the room for a mode-2 round's SecAggRound, borrowed by t. */
    int (*task)(const coord_job_t *j, sfl_task_t *t, sfl_msg_sa_round_t *sa,
                uint32_t g) SFL_MUST_CHECK;
    /* The task is built: what needs its bytes (the mode-2 server). */
    int (*start)(coord_job_t *j) SFL_MUST_CHECK;
    /* TRAINING, after the machine moved: send what its phase asks for. */
    void (*sync)(coord_job_t *j);
    /* A member of the open attempt subscribed again after its task went
     * out: what else it has not answered. */
    void (*resend)(coord_job_t *j, coord_agent_t *a);
    /* SubmitUpdate: the limits the payload is decoded with (lim, enc set
     * to the job's on entry). */
    void (*limits)(const coord_job_t *j, sfl_msg_limits_t *lim, sfl_enc_t *enc);
    /* Thread pool (pure): a decoded payload against what the coordinator
     * knows (the job's features, bound the rows the agent joined with);
     * SFL_E... with a detail refuses it as out of bounds. */
    int (*check)(const sfl_payload_t *p, uint32_t features, uint64_t bound) SFL_MUST_CHECK;
    /* A verified payload of the member in slot: into the attempt's fold
     * (the payload's vector may be taken; SFL_E... refuses it alone). */
    int (*add)(coord_job_t *j, uint32_t slot, sfl_payload_t *p) SFL_MUST_CHECK;
    /* AGGREGATING, on the loop before the fold: the kind's figures into
     * j->work_metrics and its participation records. */
    void (*record)(coord_job_t *j);
    /* Thread pool: the aggregation and what the commit stores, into
     * j->work_buf, work_len, work_hash, work_nnz (SFL_E...). */
    int (*fold)(coord_job_t *j) SFL_MUST_CHECK;
    /* The fold is done: posts its commit to the writer, whose done calls
     * coord_commit_outcome (driver.h). SFL_ENOMEM: nothing posted. */
    int (*commit)(coord_job_t *j) SFL_MUST_CHECK;
    /* The aggregation ended (committed or not), before close: what it
     * says of the members (suspects); 1 if it failed with nobody to name,
     * sus the suspects' text, *n3 how many answered. */
    int (*settle)(coord_job_t *j, char *sus, size_t cap, uint32_t *n3);
    /* The attempt is over (committed, failed, abandoned): reports and
     * frees what the attempt held. */
    void (*close)(coord_job_t *j);
    /* The commit is durable (the machine is in COMMITTED): the job's new
     * state and its log line. */
    void (*committed)(coord_job_t *j);
    /* The aggregation or its commit failed: log, undo, the machine to
     * FAILED with the reason (unattributable, sus, n3 from settle). */
    void (*failed)(coord_job_t *j, int unattributable, const char *sus, uint32_t n3);
    /* The kind's figures in JobStatus (and /metrics). */
    void (*status)(const coord_job_t *j, sfl_job_status_t *st);
} coord_shape_t;

extern const coord_shape_t coord_shape_plain;
extern const coord_shape_t coord_shape_secagg;
extern const coord_shape_t coord_shape_vertical;
extern const coord_shape_t coord_shape_statistics;

/* The shape of j's next round: from its spec (the algorithm's shape,
 * secure_aggregation) and whether a standardize job has its moments. The
 * one place that picks a kind. */
const coord_shape_t *coord_shape_for(const coord_job_t *j);
/* j takes the shape of its next round, freeing the old one's state when
 * it changes. */
void coord_shape_set(coord_job_t *j);

/* What the kinds share (shape.c). */
void coord_shape_nop(coord_job_t *j);
int coord_shape_nop_model(coord_job_t *j) SFL_MUST_CHECK;
void coord_shape_nop_load(coord_job_t *j);
void coord_shape_nop_cohort(coord_job_t *j, uint64_t *ids, uint32_t *n, char *extra, size_t cap);
int coord_shape_nop_admit(coord_job_t *j, char *why, size_t cap) SFL_MUST_CHECK;
int coord_shape_nop_draw(coord_job_t *j, uint64_t *ids, uint32_t *n) SFL_MUST_CHECK;
int coord_shape_nop_start(coord_job_t *j) SFL_MUST_CHECK;
void coord_shape_nop_resend(coord_job_t *j, coord_agent_t *a);
uint32_t coord_shape_one_task(const coord_job_t *j);
uint32_t coord_shape_task_zero(const coord_job_t *j, uint64_t agent);
int coord_shape_nop_settle(coord_job_t *j, char *sus, size_t cap, uint32_t *n3);
void coord_shape_nop_status(const coord_job_t *j, sfl_job_status_t *st);
/* A horizontal job: whole rows, of at most the job's features. */
coord_inelig_t coord_shape_rows(const coord_job_t *j, const coord_agent_t *a, uint32_t *dim,
                                char *why, size_t cap);
/* A training round: the next after the last committed one. */
void coord_shape_plan_train(const coord_job_t *j, uint64_t *round, coord_round_cfg_t *cfg);
/* A training round's task: the global model, dense into a vector. */
int coord_shape_task_global(const coord_job_t *j, sfl_task_t *t) SFL_MUST_CHECK;
/* Mode 1's limits: the job's. */
void coord_shape_limits_model(const coord_job_t *j, sfl_msg_limits_t *lim, sfl_enc_t *enc);
/* Mode 1's check: the decoder's and the aggregator's (coord_model_add). */
int coord_shape_check_model(const sfl_payload_t *p, uint32_t features,
                            uint64_t bound) SFL_MUST_CHECK;
/* Mode 1's add: into the model's aggregator, weighted by samples. */
int coord_shape_add_model(coord_job_t *j, uint32_t slot, sfl_payload_t *p) SFL_MUST_CHECK;
/* Thread pool: the checkpoint of the model (after the kind's fold). */
int coord_shape_checkpoint(coord_job_t *j) SFL_MUST_CHECK;
/* A horizontal round's fold: end (the aggregator's or the secure sum's)
 * moves the model on, then coord_shape_checkpoint; with the round's
 * support_churn, the coordinates that entered or left the support. */
int coord_shape_fold_model(coord_job_t *j, int (*end)(coord_job_t *j)) SFL_MUST_CHECK;
/* A training round's commit: round, checkpoint and metrics together. */
int coord_shape_commit_model(coord_job_t *j) SFL_MUST_CHECK;
void coord_shape_committed_model(coord_job_t *j);
void coord_shape_failed_model(coord_job_t *j, int unattributable, const char *sus, uint32_t n3);

#endif

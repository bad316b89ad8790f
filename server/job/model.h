/* A federated job on the coordinator: its specification (from coordinator.ini
 * or sflctl), the algorithm table it runs, the global model and the streaming
 * aggregator of the current round. No I/O: the daemon feeds it updates and
 * persists what it returns. */
#ifndef COORD_JOB_H
#define COORD_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "job/round.h"
#include "job/vjob.h"
#include "sfl/algo/algo.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "sfl/wire/spcodec.h"

#include "job/spec.h"

/* The round machine's configuration of a spec. */
void coord_job_round_cfg(const sfl_job_spec_t *s, coord_round_cfg_t *out);
/* The statistics round's (a standardize job's round 0): every candidate
 * agent is selected (no sampling: the pooled statistics cover all the
 * agents that can train), one phase "statistics" that ends when every
 * member answered, or at the round's deadline with min_quorum answers. */
void coord_job_stats_cfg(const sfl_job_spec_t *s, coord_round_cfg_t *out);

/* What an agent reported at Join, as far as eligibility goes. */
typedef struct coord_agent_info {
    uint32_t ncols, nclasses;
    uint64_t samples;
    uint32_t nconditions;
    const char *const *conditions;
} coord_agent_info_t;

/* Why an agent cannot take part in a job; the coordinator adds the reasons
 * only it can judge (NOT_JOINED, LABELS, QUARANTINED). */
typedef enum {
    COORD_INELIG_NONE = 0,   /* eligible */
    COORD_INELIG_NOT_JOINED, /* no Join since the coordinator started */
    COORD_INELIG_FEATURES,   /* its data has another number of features */
    COORD_INELIG_SAMPLES,    /* no samples */
    COORD_INELIG_CLASSES,    /* more classes than the job, or classes on a regression job */
    COORD_INELIG_LABELS,     /* a label value the job does not list */
    COORD_INELIG_CONDITION,  /* a required condition not reported */
    COORD_INELIG_QUARANTINED, /* a round of the job named it a culprit (quarantine.c) */
    COORD_INELIG_COUNT
} coord_inelig_t;

/* 1 if the agent can take part in the job (same feature count, label count
 * compatible, at least one sample, every required condition reported). */
int coord_job_eligible(const sfl_job_spec_t *s, const coord_agent_info_t *a);
/* The first reason coord_job_eligible would say no (NONE if it says yes);
 * with why (may be NULL) a one-line detail such as "data has 500
 * features, the job 123", truncated to cap. */
coord_inelig_t coord_job_ineligible(const sfl_job_spec_t *s, const coord_agent_info_t *a,
                                    char *why, size_t cap);

typedef struct coord_model {
    sfl_job_spec_t spec;
    coord_round_cfg_t rcfg;   /* from spec */
    sfl_fold_limits_t limits; /* from spec: the fold keeps a pointer */
    const sfl_algo_t *algo;
    sfl_algo_params_t params; /* resolved from spec.params */
    sfl_problem_t prob;
    size_t dim;          /* entries of global: prob.dim, plus the broadcast
                            of a vertical job (vjob.h) */
    double *global;      /* the state: what a checkpoint holds */
    coord_vjob_t *v;     /* a vertical job: &vert; NULL otherwise */
    coord_vjob_t vert;
    sfl_fold_t agg;
    uint64_t round;      /* last committed round (0: none yet) */
    int aggregating;
    /* Ordered aggregation: the updates of the open round by cohort slot
     * (NULL: none yet), folded by coord_model_end in slot order. */
    sfl_fold_item_t *held;
    uint32_t nslots;
} coord_model_t;

/* What a job is, without its O(dim) state: spec, algorithm, parameters and
 * problem checked and kept; global NULL. */
int coord_model_setup(coord_model_t *j, const sfl_job_spec_t *spec) SFL_MUST_CHECK;
/* Allocates the O(dim) state of a set-up job (global at its start, the
 * fold); coord_model_close frees it again and the job can be opened anew. */
int coord_model_open(coord_model_t *j) SFL_MUST_CHECK;
/* global = the job's starting model (sfl_loss_init_model from the job's
 * seed: zeros for a linear loss, a random MLP), round 0. */
void coord_model_start_model(coord_model_t *j);
/* coord_model_setup, then coord_model_open. */
int coord_model_init(coord_model_t *j, const sfl_job_spec_t *spec) SFL_MUST_CHECK;
void coord_model_close(coord_model_t *j);

/* The global state encoded for checkpoints, and its
 * BLAKE2b-256 hash: always float64, whatever the job's update encoding,
 * so a checkpoint is exactly the model. Returns owned bytes
 * (free with sfl__free). */
int coord_model_encode(const coord_model_t *j, uint8_t **buf, size_t *len,
                     uint8_t hash[32]) SFL_MUST_CHECK;
/* Restores the state of committed round `round` from checkpoint bytes. */
int coord_model_restore(coord_model_t *j, uint64_t round, const uint8_t *buf,
                      size_t len) SFL_MUST_CHECK;

/* Aggregation of one round: begin with the cohort size, add each accepted
 * update with its cohort slot (its index in the sorted manifest) and weight
 * (the agent's sample count), end writes the new global state and advances
 * j->round. Streaming (the default) folds each update as it arrives, in O(d)
 * memory; the sum then depends on arrival order in the last bits. Ordered
 * (spec.ordered_aggregation) takes ownership of *update (set to NULL) and end folds the
 * held updates in slot order, in O(d + cohort x k) memory: a round's result
 * is then a function of the cohort and its updates alone, bit for bit what
 * sfl-sim computes. begin drops anything held from an attempt that never
 * ended; SFL_EINVAL for a slot added twice. */
int coord_model_begin(coord_model_t *j, uint32_t nslots) SFL_MUST_CHECK;
int coord_model_add(coord_model_t *j, uint32_t slot, sfl_spvec_t **update,
                  double weight) SFL_MUST_CHECK;
int coord_model_end(coord_model_t *j) SFL_MUST_CHECK;

#endif

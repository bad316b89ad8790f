/* One client's side of a round, as both drivers run it (docs/design.md
 * section 3, "Client path"), and the client state an algorithm keeps
 * between rounds.
 *
 * sfl_client_round is the agent's whole round short of sealing: checks, the
 * local data seen at the job's dimension with targets coded by the job's
 * labels, training through the algorithm table, the update's size bound,
 * and what the agent reports (local objective at the round's model, a
 * held-out metric). sfl-sim calls it for every virtual client, so a
 * simulation runs the agent's code path.
 *
 * Client state: an algorithm that keeps one (FedMac's personal model)
 * declares its size and an init in its table (sfl_algo_t.state_size,
 * state_init, state_version); the state is then a flat block the framework
 * owns: allocated zeroed, initialised once, handed to client_update every
 * round, wiped when freed, and saved as versioned bytes:
 *   "SFLS" | u32 format (1) | char algo[32] | u32 algo's state_version |
 *   u64 dim | u64 size | size bytes | BLAKE2b-256 of everything before
 * (integers little-endian). sfl_client_state_load refuses any other magic,
 * format, algorithm, state version, dimension or size, a truncated or
 * longer file and a wrong checksum, with a detail; the agent then starts
 * from a fresh state (and says so), sfl-sim never loads. */
#ifndef SFL_CLIENT_H
#define SFL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/algo/algo.h"
#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_CLIENT_STATE_MAGIC "SFLS"
#define SFL_CLIENT_STATE_FORMAT 1
/* Bytes of the saved form around the state itself. */
#define SFL_CLIENT_STATE_OVERHEAD (4 + 4 + 32 + 4 + 8 + 8 + 32)

typedef struct sfl_client_state {
    const sfl_algo_t *algo;
    size_t dim;  /* the problem's state length it was made for */
    size_t size; /* bytes of mem */
    void *mem;   /* the algorithm's state; NULL for an algorithm without */
} sfl_client_state_t;

/* A fresh state for algo on prob (algo's state_init); an algorithm without
 * state gives an empty one (mem NULL), which is valid everywhere. */
int sfl_client_state_new(const sfl_algo_t *a, const sfl_algo_params_t *p,
                         const sfl_problem_t *prob, sfl_client_state_t *st) SFL_MUST_CHECK;
/* Wipes and frees; st is empty afterwards. */
void sfl_client_state_free(sfl_client_state_t *st);
/* The saved form (owned, sfl_client_state_bytes_free); an empty state
 * saves nothing (*buf NULL, *len 0). */
int sfl_client_state_save(const sfl_client_state_t *st, uint8_t **buf,
                          size_t *len) SFL_MUST_CHECK;
void sfl_client_state_bytes_free(uint8_t *buf, size_t len);
/* st from bytes saved for the same algorithm, state version, problem
 * dimension and size; SFL_EPARSE (or SFL_ETRUNC) naming what differs. */
int sfl_client_state_load(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob, const uint8_t *buf, size_t len,
                          sfl_client_state_t *st) SFL_MUST_CHECK;

/* One client's round. */
typedef struct sfl_client_task {
    const sfl_algo_t *algo;
    const sfl_algo_params_t *params; /* checked for algo and prob */
    const sfl_problem_t *prob;       /* the job's problem */
    const double *labels;  /* the job's class values, ascending (nclasses of
                              them); NULL: targets are class indices already */
    const double *global;  /* prob->dim entries: the round's state */
    uint64_t seed, round, client;
    uint32_t max_update_nnz; /* 0: no bound */
} sfl_client_task_t;

/* What a client reports beside its update. */
typedef struct sfl_client_report {
    double train_loss;    /* local objective at the round's model */
    double eval_accuracy; /* held-out accuracy (classification) */
    double eval_mse;      /* held-out mean squared error (lsq) */
    uint64_t eval_samples;/* 0: no held-out rows */
    /* A personalized algorithm (SFL_SHAPE_PERSONALIZED with a
     * personal_model) on a classification problem with held-out rows:
     * has_personal is 1 and personal_accuracy the held-out accuracy of the
     * client's own model after this round's training; else both 0. */
    double personal_accuracy;
    int has_personal;
} sfl_client_report_t;

/* 0 if data (and eval, may be NULL) can be trained for t: the parameters
 * suit algo and the problem, the data has at most the problem's columns.
 * Cheap: no allocation, no pass over the data. */
int sfl_client_check(const sfl_client_task_t *t, const sfl_dataset_t *data,
                     const sfl_dataset_t *eval) SFL_MUST_CHECK;

/* sfl_client_check; the local rows at the job's dimension (CSR keeps
 * nothing per column) with targets coded by t->labels (SFL_EINVAL for a
 * target the job does not list); sfl_algo_client_round with state (may be
 * NULL for an algorithm without one); SFL_ELIMIT for an update over
 * max_update_nnz. When rep is not NULL, also the local objective at the
 * round's model (model_of the state when the algorithm has one) and, when
 * eval has rows, that model's accuracy or MSE on them, and a personalized
 * algorithm's personal accuracy (sfl_client_report_t); non-finite figures
 * are SFL_ENUMERIC. ws grows as needed. */
int sfl_client_round(const sfl_client_task_t *t, const sfl_dataset_t *data,
                     const sfl_dataset_t *eval, sfl_client_state_t *state, sfl_algo_ws_t *ws,
                     sfl_spvec_t *update, sfl_client_report_t *rep) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

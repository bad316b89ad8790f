/* Federated algorithms behind one table (DESIGN.md section 3).
 *
 * An algorithm is plain computation over plain data, with no I/O:
 *   client_update(params, problem, global, local data, client state, rng) -> update
 *   aggregate_begin / aggregate_add(update, weight) / aggregate_end -> new global
 * Two drivers call the table: sfl-sim (virtual clients in one process) and,
 * later, the coordinator and agents over the network. Aggregation streams:
 * the aggregator holds O(dim) memory whatever the number of clients.
 *
 * Determinism: client_update draws only from the rng it is handed, which the
 * driver seeds from (job seed, round, client id, SFL_STREAM_TRAIN); the
 * aggregator adds updates in the order given. Same inputs, same bits. */
#ifndef SFL_ALGO_H
#define SFL_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/dataset.h"
#include "sfl/error.h"
#include "sfl/loss.h"
#include "sfl/rng.h"
#include "sfl/topk.h"
#include "sfl/vec.h"

/* Parameters, named as in the papers. */
typedef struct sfl_algo_params {
    double lr;            /* gamma: local step size */
    uint32_t tau;         /* sparsity level (per class block for softmax) */
    uint32_t local_steps; /* K: local iterations per round */
    uint32_t batch;       /* b: minibatch size (>= local n means full batch) */
    double lambda;        /* l2 weight of the loss (logistic, softmax) */
    double mu;            /* FedProx proximal weight */
    double server_lr;     /* eta_g: server step on the averaged change (FedMid,
                             FedDualAvg); 1 = plain averaging */
    double l2_ball;       /* R: project local and global models onto the l2
                             ball of radius R; 0 = no projection */
    uint32_t inexact_steps; /* fedgradmp-inexact: gradient steps that solve the
                               restricted subproblem to accuracy delta; 0 = 10
                               (fedgradmp solves it exactly and ignores this) */
} sfl_algo_params_t;

/* Fills the defaults: lr 0.1, tau 0 (must be set for sparse algorithms),
 * K 5, batch 10, lambda 0, mu 0.01, server_lr 1, l2_ball 0, inexact_steps 0. */
void sfl_algo_params_default(sfl_algo_params_t *p);

/* The learning problem every client shares. */
typedef struct sfl_problem {
    const sfl_loss_t *loss;
    uint32_t ncols;    /* features */
    uint32_t nclasses; /* 0 for regression */
    size_t dim;        /* length of the state the algorithm table exchanges
                          (global, updates, aggregator): the model length
                          loss->dim(ncols, nclasses), or nblocks * atoms once
                          a dictionary is attached (sfl_dict_attach; the
                          model is then model_of(state)) */
    uint32_t nblocks;  /* hard-thresholding blocks: nclasses for softmax
                          (per-class sparsity), else 1 */
    const struct sfl_dict *dict; /* sparsity w.r.t. this dictionary; NULL =
                                    standard basis (borrowed) */
} sfl_problem_t;

/* Fills dim and nblocks from loss, ncols, nclasses. SFL_EINVAL with detail if
 * the loss does not fit the labels (softmax with < 2 classes, logistic with
 * other than 2). */
int sfl_problem_init(sfl_problem_t *prob, const sfl_loss_t *loss, uint32_t ncols,
                     uint32_t nclasses) SFL_MUST_CHECK;

/* Makes prob (after sfl_problem_init) sparse w.r.t. d (borrowed; must
 * outlive prob): prob->dict = d and prob->dim = nblocks * m, the length of
 * the coefficient state the algorithm table exchanges. The model to evaluate
 * still has loss->dim(ncols, nclasses) entries; algo->model_of maps state to
 * model. d == NULL restores the standard basis. SFL_EDIM if d->n != ncols,
 * SFL_ELIMIT if nblocks * m exceeds 2^32 - 1. */
int sfl_dict_attach(sfl_problem_t *prob, const struct sfl_dict *d) SFL_MUST_CHECK;

/* Scratch a client update needs, reused across calls (one per thread). */
typedef struct sfl_algo_ws {
    size_t dim;
    double *x;         /* local iterate */
    double *g;         /* gradient */
    uint32_t *batch;   /* sampled rows */
    uint32_t batch_cap;
    sfl_topk_ws_t topk;
} sfl_algo_ws_t;

void sfl_algo_ws_init(sfl_algo_ws_t *ws);
int sfl_algo_ws_reserve(sfl_algo_ws_t *ws, size_t dim, uint32_t batch) SFL_MUST_CHECK;
void sfl_algo_ws_close(sfl_algo_ws_t *ws);

struct sfl_algo;

/* Streaming aggregator: a dense accumulator and the running weight. */
typedef struct sfl_agg {
    const struct sfl_algo *algo;
    const sfl_algo_params_t *params; /* borrowed */
    const sfl_problem_t *prob;       /* borrowed */
    double *acc;                     /* dim entries */
    double wsum;
    uint32_t count;
    sfl_topk_ws_t topk;
} sfl_agg_t;

typedef struct sfl_algo {
    const char *name;
    const char *summary;
    /* Nonzero if params->tau must be in [1, dim / nblocks]. */
    int sparse;
    /* Nonzero if the algorithm works with a dictionary (prob->dict). */
    int dictionary;
    /* Train on local from global (dim entries, borrowed) and write the
     * client's message into update (dim must equal prob->dim; contents
     * replaced). client_state may be NULL for algorithms without one. */
    int (*client_update)(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                         const double *global, const sfl_dataset_t *local,
                         void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                         sfl_spvec_t *update);
    int (*aggregate_begin)(sfl_agg_t *agg);
    int (*aggregate_add)(sfl_agg_t *agg, const sfl_spvec_t *update, double weight);
    /* global: in, the model of the round; out, the new model. */
    int (*aggregate_end)(sfl_agg_t *agg, double *global);
    /* Optional: the model to evaluate or export from the broadcast state
     * (FedDualAvg broadcasts a dual vector). NULL: the state is the model.
     * ws is grown as needed. */
    int (*model_of)(const sfl_algo_params_t *p, const sfl_problem_t *prob, const double *state,
                    double *model, sfl_topk_ws_t *ws);
} sfl_algo_t;

extern const sfl_algo_t sfl_algo_fedht;
extern const sfl_algo_t sfl_algo_fediterht;
extern const sfl_algo_t sfl_algo_diht;
extern const sfl_algo_t sfl_algo_fedavg;
extern const sfl_algo_t sfl_algo_fedprox;
extern const sfl_algo_t sfl_algo_fedmid;
extern const sfl_algo_t sfl_algo_feddualavg;
extern const sfl_algo_t sfl_algo_fedgradmp;
extern const sfl_algo_t sfl_algo_fedgradmp_inexact;

/* By name ("fedht", ...); NULL if unknown. sfl_algo_list() is the
 * NULL-terminated table of all algorithms. */
const sfl_algo_t *sfl_algo_find(const char *name);
const sfl_algo_t *const *sfl_algo_list(void);

/* One client's turn in round `round` of a job seeded with `seed`: seeds the
 * client's stream (seed, round, client, SFL_STREAM_TRAIN) and calls
 * a->client_update. Both drivers (sfl-sim and the agent) go through here, so
 * a client draws the same minibatches in a simulation and on a device. */
int sfl_algo_client_round(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob, const double *global,
                          const sfl_dataset_t *local, void *client_state, uint64_t seed,
                          uint64_t round, uint64_t client, sfl_algo_ws_t *ws,
                          sfl_spvec_t *update) SFL_MUST_CHECK;

/* Checks params against the algorithm and problem (tau range, K >= 1,
 * batch >= 1, lr > 0 and finite, ...); SFL_EINVAL with a detail naming the
 * parameter. */
int sfl_algo_check(const sfl_algo_t *a, const sfl_algo_params_t *p,
                   const sfl_problem_t *prob) SFL_MUST_CHECK;

/* Aggregator lifecycle: init allocates the O(dim) accumulator. */
int sfl_agg_init(sfl_agg_t *agg, const sfl_algo_t *a, const sfl_algo_params_t *p,
                 const sfl_problem_t *prob) SFL_MUST_CHECK;
void sfl_agg_close(sfl_agg_t *agg);

/* Shared building blocks for algorithm files (library-internal in spirit;
 * public so the network driver and tests can reuse them). */

/* K local minibatch gradient steps from global into ws->x:
 *   x <- x - lr (grad f_B(x) + mu (x - global)), then x <- H_tau(x) per block
 * if threshold is set. steps overrides p->local_steps when nonzero. */
int sfl_algo_local_sgd(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                       const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                       sfl_algo_ws_t *ws, uint32_t steps, double mu,
                       int threshold) SFL_MUST_CHECK;
/* The rows of one local step: *rows = NULL (all n rows) when b >= n, else b
 * rows drawn from rng into ws->batch (reserved for b by sfl_algo_ws_reserve).
 * Every algorithm draws its minibatches here, so runs are comparable. */
int sfl_algo_sample_batch(sfl_rng_t *rng, uint32_t n, uint32_t b, sfl_algo_ws_t *ws,
                          const uint32_t **rows) SFL_MUST_CHECK;
/* sfl_algo_local_sgd, then update = the local model (sparse if thresholded). */
int sfl_algo_sgd_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                        const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                        sfl_algo_ws_t *ws, uint32_t steps, double mu, int threshold,
                        sfl_spvec_t *update) SFL_MUST_CHECK;
/* The weighted-average aggregator: begin zeroes, add folds w * update in,
 * end writes acc / wsum; end_ht also applies H_tau per block. */
int sfl_agg_avg_begin(sfl_agg_t *agg);
int sfl_agg_avg_add(sfl_agg_t *agg, const sfl_spvec_t *update, double weight);
int sfl_agg_avg_end(sfl_agg_t *agg, double *global);
int sfl_agg_avg_end_ht(sfl_agg_t *agg, double *global);
/* x <- H_tau(x) per the problem's blocks. */
int sfl_algo_threshold(const sfl_problem_t *prob, uint32_t tau, double *x,
                       sfl_topk_ws_t *ws) SFL_MUST_CHECK;

/* FedGradMP's pieces, public for tests and benchmarks (fedgradmp.c).
 * Support step: ghat[0..*ng) = (top min(2tau, blocklen) |proxy| per block)
 * u lam, sorted; proxy has prob->dim entries (A^T r with a dictionary), lam
 * is sorted. gam (scratch) and ghat need room for nblocks * min(2tau,
 * blocklen) and that + nlam entries. Non-finite proxy is SFL_ENUMERIC. */
int sfl_algo_gradmp_support(const sfl_problem_t *prob, uint32_t tau, const double *proxy,
                            const uint32_t *lam, uint32_t nlam, uint32_t *gam, uint32_t *ghat,
                            uint32_t *ng, sfl_topk_ws_t *ws) SFL_MUST_CHECK;
/* Exact restricted least squares: b[0..g) = argmin over c of
 *   mean_i (z_i' A_G c - y_i)^2 + lambda/2 ||A_G c||^2
 * over all rows of local, G[0..g) sorted atom indices (columns when dict ==
 * NULL, A = I). Cholesky on the normal equations; when those are singular
 * (g > rows, or numerically) the minimum-norm solution, and *minnorm
 * (optional) is set to 1. Allocates O(g^2). */
int sfl_algo_gradmp_solve(const sfl_dataset_t *local, const struct sfl_dict *dict,
                          const uint32_t *G, uint32_t g, double lambda, double *b,
                          int *minnorm) SFL_MUST_CHECK;

#endif

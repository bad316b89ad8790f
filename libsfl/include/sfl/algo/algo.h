/* Federated algorithms behind one table (DESIGN.md section 3).
 *
 * An algorithm is plain computation over plain data, with no I/O:
 *   client_update(params, problem, global, local data, client state, rng) -> update
 *   finish(the framework's weighted fold of the updates, fold.h) -> new global
 * Two drivers call the table: sfl-sim (virtual clients in one process) and
 * the coordinator and agents over the network. Aggregation streams: the
 * fold holds O(dim) memory whatever the number of clients.
 *
 * Determinism: client_update draws only from the rng it is handed, which the
 * driver seeds from (job seed, round, client id, SFL_STREAM_TRAIN); the
 * fold adds updates in the order given. Same inputs, same bits. */
#ifndef SFL_ALGO_H
#define SFL_ALGO_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/algo/fold.h"
#include "sfl/model/loss.h"
#include "sfl/core/param.h"
#include "sfl/core/rng.h"
#include "sfl/core/topk.h"
#include "sfl/core/vec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parameters, declared once per algorithm (docs/design.md section 3).
 *
 * Each algorithm keeps its parameters in a struct of its own (doubles and
 * uint32_t counts) and describes every field in a table of sfl_param_def_t:
 * name, type, default, range, the paper's symbol and a line of doc. From
 * that table come validation (sfl_algo_check), the keys of job files and
 * sfl-sim's flags and INI keys (--name, '_' written '-'), --help, the wire
 * encoding (a list of name/value pairs, param.h) and docs/algorithms.md's
 * parameter lists (sfl-sim --list-params; a test keeps them equal). Adding a
 * parameter is adding a field and its table entry in the algorithm's file.
 *
 * The values live in sfl_algo_params_t, laid out as the algorithm's struct;
 * the algorithm reads them with SFL_ALGO_PARAMS(p, its_struct_t). */
typedef enum sfl_param_type {
    SFL_PARAM_REAL,  /* double, finite */
    SFL_PARAM_COUNT, /* uint32_t: an integer value in [lo, hi] */
} sfl_param_type_t;

#define SFL_PARAM_OPEN_LO 1u  /* value > lo (else >= lo) */
#define SFL_PARAM_SPARSITY 2u /* tau: also at most the problem's block length */
#define SFL_PARAM_RIDGE 4u    /* the loss's l2 weight (reported objectives add it) */

typedef struct sfl_param_def {
    const char *name;   /* [a-z0-9_]; NULL ends a table */
    const char *symbol; /* as in the paper ("gamma", "tau", "K") */
    sfl_param_type_t type;
    size_t offset;      /* of the field in the algorithm's struct */
    double def, lo, hi; /* default and range (hi may be HUGE_VAL: any finite) */
    unsigned flags;     /* SFL_PARAM_* */
    const char *doc;    /* one line */
} sfl_param_def_t;

#define SFL_ALGO_PARAMS_BYTES 128

typedef struct sfl_algo_params {
    const struct sfl_algo *algo; /* whose table lays out bytes; NULL = unset */
    SFL_ALIGNAS(double) unsigned char bytes[SFL_ALGO_PARAMS_BYTES];
} sfl_algo_params_t;

/* The algorithm's own view of its values. */
#define SFL_ALGO_PARAMS(p, type) ((const type *)(const void *)(p)->bytes)

/* The parameters of local minibatch SGD, shared by the algorithms that run
 * it (the first member of their structs) and by sfl_algo_local_sgd. */
typedef struct sfl_sgd_params {
    double lr;            /* gamma: local step size */
    double lambda;        /* l2 weight of the loss */
    uint32_t tau;         /* sparsity level (per class block for softmax) */
    uint32_t local_steps; /* K: local iterations per round */
    uint32_t batch;       /* b: minibatch size (>= local n: full batch) */
} sfl_sgd_params_t;

/* Table entries of the shared parameters, for a struct T whose member m is
 * (or holds) the field. */
#define SFL_PARAM_DEF_LR(T, m)                                                         \
    {"lr", "gamma", SFL_PARAM_REAL, offsetof(T, m), 0.01, 0, HUGE_VAL, SFL_PARAM_OPEN_LO, \
     "local step size"}
#define SFL_PARAM_DEF_LAMBDA(T, m)                                                     \
    {"lambda", "lambda", SFL_PARAM_REAL, offsetof(T, m), 0, 0, HUGE_VAL, SFL_PARAM_RIDGE, \
     "l2 weight of the loss (logistic, softmax)"}
#define SFL_PARAM_DEF_TAU(T, m)                                                        \
    {"tau", "tau", SFL_PARAM_COUNT, offsetof(T, m), 10, 1, UINT32_MAX, SFL_PARAM_SPARSITY, \
     "sparsity level: nonzeros kept (per class block for softmax)"}
#define SFL_PARAM_DEF_K(T, m)                                                          \
    {"local_steps", "K", SFL_PARAM_COUNT, offsetof(T, m), 5, 1, UINT32_MAX, 0,          \
     "local iterations per round"}
#define SFL_PARAM_DEF_BATCH(T, m)                                                      \
    {"batch", "b", SFL_PARAM_COUNT, offsetof(T, m), 10, 1, UINT32_MAX, 0,               \
     "minibatch size (at least the local row count: full batch)"}

/* The table of an algorithm whose parameters are exactly local SGD's
 * (lr, tau, local_steps, batch, lambda; struct sfl_sgd_params_t). */
extern const sfl_param_def_t sfl_sgd_param_defs[];

/* Local SGD plus a server step on the averaged change (FedMid, FedDualAvg):
 * the struct and its table. */
typedef struct sfl_server_step_params {
    sfl_sgd_params_t sgd;
    double server_lr; /* eta_g: 1 = plain averaging */
} sfl_server_step_params_t;
extern const sfl_param_def_t sfl_server_step_param_defs[];

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
struct sfl_vertical_ops;

/* What one round exchanges (docs/design.md section 3, "Shapes"). */
typedef enum sfl_algo_shape {
    /* One global state; each selected client trains on its own rows and
     * sends one vector; the framework folds them weighted by samples. */
    SFL_SHAPE_HORIZONTAL = 0,
    /* The horizontal exchange, and a private model per client kept in its
     * client state and never sent (FedMac's theta_i): evaluation reports
     * the global model and each client's personal_model. */
    SFL_SHAPE_PERSONALIZED,
    /* Column blocks of aligned samples, many short exchanges among all
     * clients (sfl_vertical_ops_t, sfl/algo/vertical.h); client_update and
     * finish are NULL. */
    SFL_SHAPE_VERTICAL,
} sfl_algo_shape_t;

typedef struct sfl_algo {
    const char *name;
    const char *summary;
    /* Nonzero if the algorithm keeps tau nonzeros (it has a parameter
     * flagged SFL_PARAM_SPARSITY). */
    int sparse;
    /* Its parameters: a table ended by a NULL name, describing a struct of
     * params_size bytes (at most SFL_ALGO_PARAMS_BYTES). */
    const sfl_param_def_t *params;
    size_t params_size;
    /* Nonzero if the algorithm works with a dictionary (prob->dict). */
    int dictionary;
    /* Train on local from global (dim entries, borrowed) and write the
     * client's message into update (dim must equal prob->dim; contents
     * replaced). client_state is the block below (NULL for an algorithm
     * without one); it may change it: the drivers keep it to the next
     * round this client trains, the agent across its restarts. */
    int (*client_update)(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                         const double *global, const sfl_dataset_t *local,
                         void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                         sfl_spvec_t *update);
    /* Client state (optional; sfl/algo/client.h): state_size gives the bytes of
     * a flat block for (p, prob), 0 or NULL for none; state_init fills the
     * zeroed block once; state_version names its layout in saved bytes
     * (bump it when the layout changes, and old files are refused). */
    size_t (*state_size)(const sfl_algo_params_t *p, const sfl_problem_t *prob);
    int (*state_init)(const sfl_algo_params_t *p, const sfl_problem_t *prob, void *state);
    uint32_t state_version;
    /* The round's end, from the framework's fold (fold.h: sum, weight_sum,
     * count >= 1, the round's parameters): global is in, the state of the
     * round, and out, the new state. sfl_fold_mean, sfl_fold_mean_ht or the
     * algorithm's own. */
    int (*finish)(sfl_fold_t *fold, double *global);
    /* Optional: the model to evaluate or export from the broadcast state
     * (FedDualAvg broadcasts a dual vector). NULL: the state is the model.
     * ws is grown as needed. */
    int (*model_of)(const sfl_algo_params_t *p, const sfl_problem_t *prob, const double *state,
                    double *model, sfl_topk_ws_t *ws);
    /* What a round exchanges (below); 0 = SFL_SHAPE_HORIZONTAL. */
    sfl_algo_shape_t shape;
    /* SFL_SHAPE_PERSONALIZED: the client's own model (loss->dim entries)
     * from its client state, for evaluation next to the global model. */
    int (*personal_model)(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                          const void *client_state, double *model);
    /* SFL_SHAPE_VERTICAL: the iteration's two halves (sfl/algo/vertical.h). */
    const struct sfl_vertical_ops *vertical;
} sfl_algo_t;

/* The vertical shape's table (sfl_vertical_ops_t, its driver pieces and
 * the algorithms bcfw and dpbcfw) is in sfl/algo/vertical.h. */

extern const sfl_algo_t sfl_algo_fedht;
extern const sfl_algo_t sfl_algo_fediterht;
extern const sfl_algo_t sfl_algo_diht;
extern const sfl_algo_t sfl_algo_fedavg;
extern const sfl_algo_t sfl_algo_fedprox;
extern const sfl_algo_t sfl_algo_fedmid;
extern const sfl_algo_t sfl_algo_feddualavg;
extern const sfl_algo_t sfl_algo_fedgradmp;
extern const sfl_algo_t sfl_algo_fedgradmp_inexact;
extern const sfl_algo_t sfl_algo_fedmac;
extern const sfl_algo_t sfl_algo_pfedme;
extern const sfl_algo_t sfl_algo_perfedavg;

/* By name ("fedht", ...); NULL if unknown. sfl_algo_list() is the
 * NULL-terminated table of all algorithms. */
const sfl_algo_t *sfl_algo_find(const char *name);
const sfl_algo_t *const *sfl_algo_list(void);
/* The error for a name sfl_algo_find does not know: SFL_EINVAL with the
 * detail "unknown algorithm 'fedavgg'; did you mean 'fedavg'? (valid:
 * fedht, ...)" (sfl/core/suggest.h). */
int sfl_algo_unknown(const char *name) SFL_MUST_CHECK;

/* One client's turn in round `round` of a job seeded with `seed`: seeds the
 * client's stream (seed, round, client, SFL_STREAM_TRAIN) and calls
 * a->client_update. Both drivers (sfl-sim and the agent) go through here, so
 * a client draws the same minibatches in a simulation and on a device. */
int sfl_algo_client_round(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob, const double *global,
                          const sfl_dataset_t *local, void *client_state, uint64_t seed,
                          uint64_t round, uint64_t client, sfl_algo_ws_t *ws,
                          sfl_spvec_t *update) SFL_MUST_CHECK;

/* Checks params against the algorithm and problem: they were filled for
 * a, every value is in its table range, tau is at most the problem's block
 * length. SFL_EINVAL with a detail naming the parameter. */
int sfl_algo_check(const sfl_algo_t *a, const sfl_algo_params_t *p,
                   const sfl_problem_t *prob) SFL_MUST_CHECK;

/* Parameter values by name. All fail with SFL_EINVAL and a detail:
 *   "fedht has no parameter 'mu' (lr, lambda, tau, local_steps, batch)",
 *   "tau: invalid value 'twenty'", "lr: must be > 0, got -1". */
/* p = a's defaults. */
void sfl_algo_params_default(const sfl_algo_t *a, sfl_algo_params_t *p);
/* a's definition of name; NULL if a has none. */
const sfl_param_def_t *sfl_algo_param_find(const sfl_algo_t *a, const char *name);
/* Sets one value after checking its type and table range (not the
 * problem-dependent tau bound: sfl_algo_check). */
int sfl_algo_param_set(sfl_algo_params_t *p, const char *name, double v) SFL_MUST_CHECK;
/* sfl_algo_param_set from text (a whole number for a count, any finite
 * decimal for a real). */
int sfl_algo_param_parse(sfl_algo_params_t *p, const char *name,
                         const char *text) SFL_MUST_CHECK;
/* The value of name, or dflt when the algorithm has no such parameter. */
double sfl_algo_param_or(const sfl_algo_params_t *p, const char *name, double dflt);
/* The value of the SFL_PARAM_SPARSITY parameter; 0 if there is none. */
uint32_t sfl_algo_params_tau(const sfl_algo_params_t *p);
/* The loss's l2 weight: the value of the SFL_PARAM_RIDGE parameter, 0 if
 * the algorithm has none (FedMac's and pFedMe's lambda weigh other terms),
 * and a's definition of it (NULL if none). Reported objectives add
 * ridge/2 ||x||^2. */
double sfl_algo_params_ridge(const sfl_algo_params_t *p);
const sfl_param_def_t *sfl_algo_ridge_def(const struct sfl_algo *a);
/* a's defaults, then every pair of l (no name twice). */
int sfl_algo_params_from_list(const sfl_algo_t *a, const sfl_param_list_t *l,
                              sfl_algo_params_t *p) SFL_MUST_CHECK;
/* Every parameter of p's algorithm, in table order. */
void sfl_algo_params_to_list(const sfl_algo_params_t *p, sfl_param_list_t *l);
/* Nonzero if some algorithm of the registry has a parameter called name
 * (job files and sfl-sim accept exactly these keys). */
int sfl_algo_param_known(const char *name);

/* Shared building blocks for algorithm files (library-internal in spirit;
 * public so the network driver and tests can reuse them). */

/* K local minibatch gradient steps from global into ws->x:
 *   x <- x - lr (grad f_B(x) + mu (x - global)), then x <- H_tau(x) per block
 * if threshold is set. steps overrides p->local_steps when nonzero. */
int sfl_algo_local_sgd(const sfl_sgd_params_t *p, const sfl_problem_t *prob,
                       const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                       sfl_algo_ws_t *ws, uint32_t steps, double mu,
                       int threshold) SFL_MUST_CHECK;
/* The rows of one local step: *rows = NULL (all n rows) when b >= n, else b
 * rows drawn from rng into ws->batch (reserved for b by sfl_algo_ws_reserve).
 * Every algorithm draws its minibatches here, so runs are comparable. */
int sfl_algo_sample_batch(sfl_rng_t *rng, uint32_t n, uint32_t b, sfl_algo_ws_t *ws,
                          const uint32_t **rows) SFL_MUST_CHECK;
/* sfl_algo_local_sgd, then update = the local model (sparse if thresholded). */
int sfl_algo_sgd_update(const sfl_sgd_params_t *p, const sfl_problem_t *prob,
                        const double *global, const sfl_dataset_t *local, sfl_rng_t *rng,
                        sfl_algo_ws_t *ws, uint32_t steps, double mu, int threshold,
                        sfl_spvec_t *update) SFL_MUST_CHECK;
/* x <- H_tau(x) per the problem's blocks. */
int sfl_algo_threshold(const sfl_problem_t *prob, uint32_t tau, double *x,
                       sfl_topk_ws_t *ws) SFL_MUST_CHECK;

/* The personalized algorithms' shared pieces (FedMac, pFedMe, Per-FedAvg).
 * Their client state is one model of prob->dim doubles (theta_i), zeroed
 * at first: sfl_algo_model_state_size / _init / sfl_algo_model_state_model
 * fill the table's state_size, state_init and personal_model. */
size_t sfl_algo_model_state_size(const sfl_algo_params_t *p, const sfl_problem_t *prob);
int sfl_algo_model_state_init(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                              void *state);
int sfl_algo_model_state_model(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                               const void *state, double *model);
/* Their server step is sfl_fold_mix (fold.h). A client round of theirs
 * begins with sfl_algo_personal_begin: the state and rows are checked
 * (SFL_EINVAL "<algo> needs its client state", SFL_EEMPTY), ws is reserved
 * for the problem and min(batch, rows) (*b), and w = ws->x and theta (the
 * state) are both the round's global. It ends with sfl_algo_personal_end:
 * SFL_ENUMERIC "<algo> diverged (...)" unless w and theta are finite, then w
 * pruned (sfl_algo_prune) and written into update. */
int sfl_algo_personal_begin(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                            const double *global, const sfl_dataset_t *local, double *theta,
                            uint32_t batch, sfl_algo_ws_t *ws, uint32_t *b) SFL_MUST_CHECK;
int sfl_algo_personal_end(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                          const double *theta, double prune, double min_density,
                          sfl_algo_ws_t *ws, sfl_spvec_t *update) SFL_MUST_CHECK;
/* Their sparsity (seed 002 Sec. 5.5): entries of x (d of them) with |x_j|
 * < eps become 0, unless fewer than ceil(min_density d) would be left: then
 * x keeps exactly that many, the largest (H_k). eps = 0 changes nothing.
 * The smoothed l1 (gamma phi_rho) drives entries toward 0 but never to it;
 * this makes them 0 so the update travels sparse. */
int sfl_algo_prune(double *x, size_t d, double eps, double min_density,
                   sfl_topk_ws_t *ws) SFL_MUST_CHECK;
/* The table entries of the two pruning parameters, for a struct T with
 * double members named by eps_m and dens_m. */
#define SFL_PARAM_DEF_PRUNE(T, eps_m, dens_m)                                              \
    {"prune", "epsilon", SFL_PARAM_REAL, offsetof(T, eps_m), 0, 0, HUGE_VAL, 0,            \
     "the sent model's entries below this magnitude become 0 (0: none)"},                 \
    {"min_density", "s_min", SFL_PARAM_REAL, offsetof(T, dens_m), 0.5, 0, 1, 0,             \
     "pruning keeps at least this fraction of the entries (the paper: 0.5)"}

/* FedMac's smoothed l1 (seed 002 Sec. 3.2):
 *   phi_rho(x) = rho sum_j log cosh(x_j / rho)  ->  ||x||_1 as rho -> 0,
 * returned; grad (optional) = tanh(x_j / rho). rho > 0. */
double sfl_phi_rho(const double *x, size_t d, double rho, double *grad);

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

#ifdef __cplusplus
}
#endif

#endif

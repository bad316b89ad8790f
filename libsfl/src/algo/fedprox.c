/* FedProx (Li et al.): FedAvg whose local objective adds the proximal term
 * mu/2 ||x - x_t||^2, which limits client drift on non-IID data. Dense. */
#include "sfl/algo/algo.h"

typedef struct fedprox_params {
    sfl_sgd_params_t sgd;
    double mu;
} fedprox_params_t;

static const sfl_param_def_t param_defs[] = {
    SFL_PARAM_DEF_LR(fedprox_params_t, sgd.lr),
    SFL_PARAM_DEF_K(fedprox_params_t, sgd.local_steps),
    SFL_PARAM_DEF_BATCH(fedprox_params_t, sgd.batch),
    SFL_PARAM_DEF_LAMBDA(fedprox_params_t, sgd.lambda),
    {"mu", "mu", SFL_PARAM_REAL, offsetof(fedprox_params_t, mu), 0.01, 0, HUGE_VAL, 0,
     "proximal weight: local steps add mu (x - global) to the gradient"},
    {0},
};

static int fedprox_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                                 const double *global, const sfl_dataset_t *local,
                                 void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                                 sfl_spvec_t *update)
{
    const fedprox_params_t *q = SFL_ALGO_PARAMS(p, fedprox_params_t);

    (void)client_state;
    return sfl_algo_sgd_update(&q->sgd, prob, global, local, rng, ws, 0, q->mu, 0, update);
}

const sfl_algo_t sfl_algo_fedprox = {
    .name = "fedprox",
    .summary = "FedProx: local SGD with proximal term mu, weighted average (dense)",
    .sparse = 0,
    .params = param_defs,
    .params_size = sizeof(fedprox_params_t),
    .client_update = fedprox_client_update,
    .finish = sfl_fold_mean,
};

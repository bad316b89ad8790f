/* FedAvg (McMahan et al.): K local SGD steps, weighted average; the dense
 * baseline (no sparsity constraint, tau ignored). */
#include "sfl/algo/algo.h"

static int fedavg_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                                const double *global, const sfl_dataset_t *local,
                                void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                                sfl_spvec_t *update)
{
    (void)client_state;
    return sfl_algo_sgd_update(SFL_ALGO_PARAMS(p, sfl_sgd_params_t), prob, global, local, rng, ws, 0, 0.0, 0, update);
}

static const sfl_param_def_t param_defs[] = {
    SFL_PARAM_DEF_LR(sfl_sgd_params_t, lr),
    SFL_PARAM_DEF_K(sfl_sgd_params_t, local_steps),
    SFL_PARAM_DEF_BATCH(sfl_sgd_params_t, batch),
    SFL_PARAM_DEF_LAMBDA(sfl_sgd_params_t, lambda),
    {0},
};

const sfl_algo_t sfl_algo_fedavg = {
    .name = "fedavg",
    .summary = "FedAvg: local SGD, weighted average (dense baseline)",
    .sparse = 0,
    .params = param_defs,
    .params_size = sizeof(sfl_sgd_params_t),
    .client_update = fedavg_client_update,
    .finish = sfl_fold_mean,
};

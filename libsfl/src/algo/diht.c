/* Distributed-IHT (seed 000, supplementary Alg. 3): the baseline that
 * communicates after every local step: one minibatch SGD step per round, the
 * server averages and hard-thresholds. K is ignored (always 1). */
#include "sfl/algo/algo.h"

static int diht_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                              const double *global, const sfl_dataset_t *local,
                              void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                              sfl_spvec_t *update)
{
    (void)client_state;
    return sfl_algo_sgd_update(SFL_ALGO_PARAMS(p, sfl_sgd_params_t), prob, global, local, rng, ws, 1, 0.0, 0, update);
}

static const sfl_param_def_t param_defs[] = {
    SFL_PARAM_DEF_LR(sfl_sgd_params_t, lr),
    SFL_PARAM_DEF_TAU(sfl_sgd_params_t, tau),
    SFL_PARAM_DEF_BATCH(sfl_sgd_params_t, batch),
    SFL_PARAM_DEF_LAMBDA(sfl_sgd_params_t, lambda),
    {0},
};

const sfl_algo_t sfl_algo_diht = {
    .name = "diht",
    .summary = "Distributed-IHT: one SGD step per round, server averages and thresholds",
    .sparse = 1,
    .params = param_defs,
    .params_size = sizeof(sfl_sgd_params_t),
    .client_update = diht_client_update,
    .finish = sfl_fold_mean_ht,
};

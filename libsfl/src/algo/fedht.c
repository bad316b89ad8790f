/* Fed-HT (seed 000, Alg. 1): K local minibatch SGD steps, the client sends
 * its (dense) local model, the server averages and hard-thresholds. */
#include "sfl/algo/algo.h"

static int fedht_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                               const double *global, const sfl_dataset_t *local,
                               void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                               sfl_spvec_t *update)
{
    (void)client_state;
    return sfl_algo_sgd_update(SFL_ALGO_PARAMS(p, sfl_sgd_params_t), prob, global, local, rng, ws, 0, 0.0, 0, update);
}

const sfl_algo_t sfl_algo_fedht = {
    .name = "fedht",
    .summary = "Fed-HT: local SGD, server averages and keeps the tau largest",
    .sparse = 1,
    .params = sfl_sgd_param_defs,
    .params_size = sizeof(sfl_sgd_params_t),
    .client_update = fedht_client_update,
    .finish = sfl_fold_mean_ht,
};

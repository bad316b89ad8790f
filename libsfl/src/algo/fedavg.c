/* FedAvg (McMahan et al.): K local SGD steps, weighted average; the dense
 * baseline (no sparsity constraint, tau ignored). */
#include "sfl/algo.h"

static int fedavg_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                                const double *global, const sfl_dataset_t *local,
                                void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                                sfl_spvec_t *update)
{
    (void)client_state;
    return sfl_algo_sgd_update(p, prob, global, local, rng, ws, 0, 0.0, 0, update);
}

const sfl_algo_t sfl_algo_fedavg = {
    .name = "fedavg",
    .summary = "FedAvg: local SGD, weighted average (dense baseline)",
    .sparse = 0,
    .client_update = fedavg_client_update,
    .aggregate_begin = sfl_agg_avg_begin,
    .aggregate_add = sfl_agg_avg_add,
    .aggregate_end = sfl_agg_avg_end,
};

/* FedProx (Li et al.): FedAvg whose local objective adds the proximal term
 * mu/2 ||x - x_t||^2, which limits client drift on non-IID data. Dense. */
#include "sfl/algo.h"

static int fedprox_client_update(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                                 const double *global, const sfl_dataset_t *local,
                                 void *client_state, sfl_rng_t *rng, sfl_algo_ws_t *ws,
                                 sfl_spvec_t *update)
{
    (void)client_state;
    return sfl_algo_sgd_update(p, prob, global, local, rng, ws, 0, p->mu, 0, update);
}

const sfl_algo_t sfl_algo_fedprox = {
    .name = "fedprox",
    .summary = "FedProx: local SGD with proximal term mu, weighted average (dense)",
    .sparse = 0,
    .client_update = fedprox_client_update,
    .aggregate_begin = sfl_agg_avg_begin,
    .aggregate_add = sfl_agg_avg_add,
    .aggregate_end = sfl_agg_avg_end,
};

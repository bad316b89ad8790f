/* Per-FedAvg, first-order (Fallah, Mokhtari, Ozdaglar, NeurIPS 2020:
 * "Personalized Federated Learning with Theoretical Guarantees: A
 * Model-Agnostic Meta-Learning Approach", Per-FedAvg (FO)), one of FedMac's
 * baselines (seed 002 Sec. 5.3, appendix Tables 2-3, which call its two
 * step sizes eta and eta_p; Per-FedAvg calls them beta and alpha).
 *
 * Client, from the round's global w^t:
 *   w = w^t
 *   R times (local_steps):
 *     draw D1; temp = w - eta_p grad l(w; D1)          (the MAML inner step)
 *     draw D2; w <- w - eta grad l(temp; D2)           (first-order outer step)
 *   send w.
 * Personal model (the client state, never sent): Per-FedAvg personalizes by
 * one step of local adaptation; here from the round's final w on a fresh
 * minibatch D: theta = w - eta_p grad l(w; D).
 * Server: w^{t+1} = (1 - beta) w^t + beta sum_i p_i w_i (p_i = n_i / sum n;
 * beta = 1 is Per-FedAvg's plain average).
 *
 * Every |D| is `batch`, all three drawn from the round's rng. */
#include "sfl/algo/algo.h"

#include <math.h>
#include <string.h>

#include "sfl/core/error.h"

typedef struct perfedavg_params {
    double eta;   /* Per-FedAvg's beta: the outer (meta) step */
    double eta_p; /* Per-FedAvg's alpha: the inner and adaptation step */
    double beta;  /* server mixing */
    uint32_t local_steps;
    uint32_t batch;
} perfedavg_params_t;

/* Defaults: FedMac's Table 2 for Per-FedAvg. */
static const sfl_param_def_t perfedavg_param_defs[] = {
    {"eta", "eta", SFL_PARAM_REAL, offsetof(perfedavg_params_t, eta), 0.02, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "outer step, Per-FedAvg's beta: w <- w - eta grad l(temp; D2)"},
    {"eta_p", "eta_p", SFL_PARAM_REAL, offsetof(perfedavg_params_t, eta_p), 0.05, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO,
     "inner and adaptation step, Per-FedAvg's alpha: temp = w - eta_p grad l(w; D1)"},
    {"beta", "beta", SFL_PARAM_REAL, offsetof(perfedavg_params_t, beta), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "server mixing: w <- (1 - beta) w + beta mean(w_i)"},
    {"local_steps", "R", SFL_PARAM_COUNT, offsetof(perfedavg_params_t, local_steps), 20, 1,
     UINT32_MAX, 0, "local rounds per round, two minibatches each"},
    {"batch", "D", SFL_PARAM_COUNT, offsetof(perfedavg_params_t, batch), 20, 1, UINT32_MAX, 0,
     "minibatch size of D1, D2 and the adaptation batch (at least the local rows: full batch)"},
    {0},
};

static int perfedavg_update(const sfl_algo_params_t *params, const sfl_problem_t *prob,
                            const double *global, const sfl_dataset_t *local, void *client_state,
                            sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    const perfedavg_params_t *p = SFL_ALGO_PARAMS(params, perfedavg_params_t);
    double *theta = client_state, *w, *g;
    const uint32_t *rows;
    uint32_t n = local->X->nrows, b;
    size_t d = prob->dim;
    int rc;

    if ((rc = sfl_algo_personal_begin(params, prob, global, local, theta, p->batch, ws, &b)) < 0)
        return rc;
    w = ws->x;
    g = ws->g;
    /* theta holds temp during the round (it is rewritten at the end anyway),
     * so the workspace needs no third vector. */
    for (uint32_t r = 0; r < p->local_steps; r++) {
        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            return rc;
        sfl_loss_grad(prob->loss, local, rows, b, w, 0.0, g);
        for (size_t j = 0; j < d; j++)
            theta[j] = w[j] - p->eta_p * g[j];
        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            return rc;
        sfl_loss_grad(prob->loss, local, rows, b, theta, 0.0, g);
        for (size_t j = 0; j < d; j++)
            w[j] -= p->eta * g[j];
    }
    /* one step of adaptation from the final w: the personal model */
    if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
        return rc;
    sfl_loss_grad(prob->loss, local, rows, b, w, 0.0, g);
    for (size_t j = 0; j < d; j++)
        theta[j] = w[j] - p->eta_p * g[j];
    return sfl_algo_personal_end(params, prob, theta, 0.0, 0.0, ws, update);
}

const sfl_algo_t sfl_algo_perfedavg = {
    .name = "perfedavg",
    .summary = "Per-FedAvg (first-order MAML): w_i sent, theta_i = one adaptation step kept, "
               "server mix beta",
    .sparse = 0,
    .params = perfedavg_param_defs,
    .params_size = sizeof(perfedavg_params_t),
    .client_update = perfedavg_update,
    .state_size = sfl_algo_model_state_size,
    .state_init = sfl_algo_model_state_init,
    .state_version = 1,
    .finish = sfl_fold_mix,
    .shape = SFL_SHAPE_PERSONALIZED,
    .personal_model = sfl_algo_model_state_model,
};

/* A toy personalized algorithm, built in as a plug-in by tests/e2e/plugin.sh
 * (make EXTRA_ALGOS=tests/e2e/toy_algo.c): one file, its parameter table,
 * a client state, and nothing else changed anywhere.
 *
 * Every client keeps a personal model theta (its client state, never sent).
 * In a round it takes K minibatch steps on its own loss pulled toward the
 * global model,
 *   theta <- theta - lr (grad f_B(theta) + pull (theta - global)),
 * and sends theta; the server averages (pFedMe's shape, without its inner
 * loop). `pull` is the parameter no built-in algorithm has. */
#include "sfl/algo/algo.h"

#include <math.h>
#include <string.h>

typedef struct toy_params {
    sfl_sgd_params_t sgd;
    double pull;
} toy_params_t;

static const sfl_param_def_t toy_param_defs[] = {
    SFL_PARAM_DEF_LR(toy_params_t, sgd.lr),
    SFL_PARAM_DEF_K(toy_params_t, sgd.local_steps),
    SFL_PARAM_DEF_BATCH(toy_params_t, sgd.batch),
    SFL_PARAM_DEF_LAMBDA(toy_params_t, sgd.lambda),
    {"pull", "mu_p", SFL_PARAM_REAL, offsetof(toy_params_t, pull), 0.5, 0, HUGE_VAL, 0,
     "weight of the pull of the personal model toward the global one"},
    {0},
};

/* theta: prob->dim doubles, from 0. */
static size_t toy_state_size(const sfl_algo_params_t *p, const sfl_problem_t *prob)
{
    (void)p;
    return prob->dim * sizeof(double);
}

static int toy_state_init(const sfl_algo_params_t *p, const sfl_problem_t *prob, void *state)
{
    (void)p;
    memset(state, 0, prob->dim * sizeof(double));
    return 0;
}

static int toy_update(const sfl_algo_params_t *params, const sfl_problem_t *prob,
                      const double *global, const sfl_dataset_t *local, void *client_state,
                      sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    const toy_params_t *p = SFL_ALGO_PARAMS(params, toy_params_t);
    double *theta = client_state;
    uint32_t n = local->X->nrows, b = p->sgd.batch < n ? p->sgd.batch : n;
    size_t d = prob->dim;
    int rc;

    if (theta == NULL)
        return sfl__fail(SFL_EINVAL, "toy-personal needs its client state");
    if (n == 0)
        return sfl__fail(SFL_EEMPTY, "client has no samples");
    if ((rc = sfl_algo_ws_reserve(ws, d, b)) < 0)
        return rc;
    for (uint32_t k = 0; k < p->sgd.local_steps; k++) {
        const uint32_t *rows;

        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            return rc;
        sfl_loss_grad(prob->loss, local, rows, b, theta, p->sgd.lambda, ws->g);
        for (size_t j = 0; j < d; j++)
            theta[j] -= p->sgd.lr * (ws->g[j] + p->pull * (theta[j] - global[j]));
    }
    for (size_t j = 0; j < d; j++)
        if (!isfinite(theta[j]))
            return sfl__fail(SFL_ENUMERIC, "personal model diverged");
    return sfl_spvec_from_dense(update, theta);
}

static int toy_personal_model(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                              const void *client_state, double *model)
{
    (void)p;
    memcpy(model, client_state, prob->dim * sizeof(double));
    return 0;
}

const sfl_algo_t sfl_algo_toy_personal = {
    .name = "toy-personal",
    .summary = "test plug-in: personal models pulled toward the mean, which the server keeps",
    .params = toy_param_defs,
    .params_size = sizeof(toy_params_t),
    .client_update = toy_update,
    .state_size = toy_state_size,
    .state_init = toy_state_init,
    .state_version = 1,
    .finish = sfl_fold_mean,
    .shape = SFL_SHAPE_PERSONALIZED,
    .personal_model = toy_personal_model,
};

/* pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020: "Personalized Federated
 * Learning with Moreau Envelopes", Alg. 1), one of FedMac's baselines
 * (seed 002 Sec. 5.3, appendix Tables 2-3). Personalized shape: every
 * client keeps its personal model theta_i (its client state, never sent);
 * what travels is the local model w_i.
 *
 * Client, from the round's global w^t:
 *   w = theta = w^t (pFedMe's code sets the personal model to the global one
 *   at the round's start and keeps it across the local rounds)
 *   R times (local_steps): draw a minibatch D (|D| = batch);
 *     K times (inner_steps), an approximate solution of the Moreau envelope's
 *     inner problem  min_theta l(theta; D) + lambda/2 ||theta - w||^2:
 *       theta <- theta - eta_p (grad l(theta; D) + gamma tanh(theta/rho)
 *                               + lambda (theta - w))
 *     w <- w - eta lambda (w - theta)
 *   send w; keep theta.
 * Server: w^{t+1} = (1 - beta) w^t + beta sum_i p_i w_i (p_i = n_i / sum n,
 * as pFedMe's code weights by sample counts).
 *
 * gamma tanh(theta/rho) is the gradient of gamma phi_rho(theta)
 * (sfl_phi_rho): "modified pFedMe" with an approximate l1 on theta (seed 002
 * Sec. 5.3, Fig. 4); gamma = 0 is plain pFedMe.
 *
 * lambda is the Moreau-envelope weight, not the loss's l2 weight: its table
 * entry has no SFL_PARAM_RIDGE, so sfl-sim neither defaults it to 1e-4 nor
 * adds it to the objectives it reports. */
#include "sfl/algo/algo.h"

#include <math.h>
#include <string.h>

#include "sfl/core/error.h"

typedef struct pfedme_params {
    double eta;   /* step of w */
    double eta_p; /* step of theta */
    double lambda; /* Moreau-envelope weight */
    double beta;  /* server mixing */
    double gamma; /* smoothed-l1 weight on theta (modified pFedMe) */
    double rho;   /* smoothing of phi_rho */
    uint32_t local_steps;
    uint32_t batch;
    uint32_t inner_steps;
    double prune;       /* entries of the sent w below this become 0 */
    double min_density; /* ... keeping at least this fraction */
} pfedme_params_t;

/* Defaults: FedMac's Table 2 for pFedMe (eta 0.02, eta_p 0.05, lambda 15,
 * R = |D| = 20, beta 1) and pFedMe's own K = 5. */
static const sfl_param_def_t pfedme_param_defs[] = {
    {"eta", "eta", SFL_PARAM_REAL, offsetof(pfedme_params_t, eta), 0.02, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "step size of the local model w: w <- w - eta lambda (w - theta)"},
    {"eta_p", "eta_p", SFL_PARAM_REAL, offsetof(pfedme_params_t, eta_p), 0.05, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "step size of the personalized model theta (the inner problem)"},
    {"lambda", "lambda", SFL_PARAM_REAL, offsetof(pfedme_params_t, lambda), 15, 0, HUGE_VAL, 0,
     "Moreau-envelope weight: theta's steps add lambda (theta - w)"},
    {"beta", "beta", SFL_PARAM_REAL, offsetof(pfedme_params_t, beta), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "server mixing: w <- (1 - beta) w + beta mean(w_i)"},
    {"gamma", "gamma", SFL_PARAM_REAL, offsetof(pfedme_params_t, gamma), 0, 0, HUGE_VAL, 0,
     "smoothed-l1 weight on theta (modified pFedMe, seed 002 Fig. 4; 0: pFedMe)"},
    {"rho", "rho", SFL_PARAM_REAL, offsetof(pfedme_params_t, rho), 0.01, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "smoothing of phi_rho = rho sum log cosh(x/rho) (with gamma)"},
    {"local_steps", "R", SFL_PARAM_COUNT, offsetof(pfedme_params_t, local_steps), 20, 1,
     UINT32_MAX, 0, "local rounds per round, one minibatch each"},
    {"batch", "D", SFL_PARAM_COUNT, offsetof(pfedme_params_t, batch), 20, 1, UINT32_MAX, 0,
     "minibatch size, the paper's size of D (at least the local rows: full batch)"},
    {"inner_steps", "K", SFL_PARAM_COUNT, offsetof(pfedme_params_t, inner_steps), 5, 1,
     UINT32_MAX, 0, "gradient steps on theta per local round (pFedMe: 5; FedMac's runs: 1)"},
    SFL_PARAM_DEF_PRUNE(pfedme_params_t, prune, min_density),
    {0},
};

static int pfedme_update(const sfl_algo_params_t *params, const sfl_problem_t *prob,
                         const double *global, const sfl_dataset_t *local, void *client_state,
                         sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    const pfedme_params_t *p = SFL_ALGO_PARAMS(params, pfedme_params_t);
    double *theta = client_state, *w, *g;
    uint32_t n = local->X->nrows, b;
    size_t d = prob->dim;
    int rc;

    /* w = theta = w^t */
    if ((rc = sfl_algo_personal_begin(params, prob, global, local, theta, p->batch, ws, &b)) < 0)
        return rc;
    w = ws->x;
    g = ws->g;
    for (uint32_t r = 0; r < p->local_steps; r++) {
        const uint32_t *rows;

        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            return rc;
        for (uint32_t k = 0; k < p->inner_steps; k++) {
            sfl_loss_grad(prob->loss, local, rows, b, theta, 0.0, g);
            if (p->gamma > 0)
                for (size_t j = 0; j < d; j++)
                    g[j] += p->gamma * tanh(theta[j] / p->rho);
            for (size_t j = 0; j < d; j++)
                theta[j] -= p->eta_p * (g[j] + p->lambda * (theta[j] - w[j]));
        }
        for (size_t j = 0; j < d; j++)
            w[j] -= p->eta * p->lambda * (w[j] - theta[j]);
    }
    /* the sent w pruned (Sec. 5.5); theta keeps every entry */
    return sfl_algo_personal_end(params, prob, theta, p->prune, p->min_density, ws, update);
}

const sfl_algo_t sfl_algo_pfedme = {
    .name = "pfedme",
    .summary = "pFedMe: personalized theta_i by K steps on the Moreau envelope, w_i sent, "
               "server mix beta",
    .sparse = 0,
    .params = pfedme_param_defs,
    .params_size = sizeof(pfedme_params_t),
    .client_update = pfedme_update,
    .state_size = sfl_algo_model_state_size,
    .state_init = sfl_algo_model_state_init,
    .state_version = 1,
    .finish = sfl_fold_mix,
    .shape = SFL_SHAPE_PERSONALIZED,
    .personal_model = sfl_algo_model_state_model,
};

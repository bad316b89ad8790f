/* FedMac (seed 002: "FedMac: Sparse Personalized Federated Learning via
 * Maximizing Correlation", Alg. 1, eqs. 6-9). Personalized shape: every
 * client keeps its own model theta_i (its client state, never sent); what
 * travels is the local-global model w_i.
 *
 * Smoothed l1: phi_rho(x) = rho sum_n log cosh(x_n / rho), gradient
 * tanh(x_n / rho) (sfl_phi_rho).
 *
 * Client, from the round's global w^t (Alg. 1, ClientUpdate):
 *   theta = w = w^t
 *   R times (local_steps): draw a minibatch D (|D| = batch);
 *     theta_steps times (the paper iterates once, Sec. 5.1):
 *       theta <- theta - eta_p (grad l(theta; D) + gamma tanh(theta/rho) - lambda w)
 *     w <- w - eta (lambda (w - theta) + gamma_w tanh(w/rho))          (8)'s gradient
 *   send w; keep theta (the personalized model) as the client state.
 * Server: w^{t+1} = (1 - beta) w^t + beta sum_i p_i w_i over the cohort.
 * The paper writes the mean as 1/S sum_i; its code base (pFedMe's) weights
 * by the clients' sample counts, and so does sfl's fold: p_i = n_i / sum n.
 *
 * T (rounds) and S (cohort) are the job's, not the algorithm's. */
#include "sfl/algo/algo.h"

#include <math.h>
#include <string.h>

#include "sfl/core/error.h"

typedef struct fedmac_params {
    double eta;       /* step of w */
    double eta_p;     /* step of theta */
    double lambda;    /* correlation weight */
    double gamma;     /* smoothed-l1 weight on theta */
    double gamma_w;   /* smoothed-l1 weight on w */
    double beta;      /* server mixing */
    double rho;       /* smoothing of phi_rho */
    uint32_t local_steps;
    uint32_t batch;
    uint32_t theta_steps;
    double prune;       /* entries of the sent w below this become 0 */
    double min_density; /* ... keeping at least this fraction */
} fedmac_params_t;

/* Defaults: the paper's MNIST setting (Table 2). */
static const sfl_param_def_t fedmac_param_defs[] = {
    {"eta", "eta", SFL_PARAM_REAL, offsetof(fedmac_params_t, eta), 3000, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "step size of the local-global model w (eq. 8)"},
    {"eta_p", "eta_p", SFL_PARAM_REAL, offsetof(fedmac_params_t, eta_p), 0.05, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "step size of the personalized model theta (eq. 9)"},
    {"lambda", "lambda", SFL_PARAM_REAL, offsetof(fedmac_params_t, lambda), 1e-4, 0, HUGE_VAL,
     0, "weight of the correlation <theta, w> and of the ridge on w"},
    {"gamma", "gamma", SFL_PARAM_REAL, offsetof(fedmac_params_t, gamma), 0, 0, HUGE_VAL, 0,
     "smoothed-l1 weight on theta (sparsity of the personalized model)"},
    {"gamma_w", "gamma_w", SFL_PARAM_REAL, offsetof(fedmac_params_t, gamma_w), 0, 0, HUGE_VAL,
     0, "smoothed-l1 weight on w (sparsity of what is sent)"},
    {"beta", "beta", SFL_PARAM_REAL, offsetof(fedmac_params_t, beta), 1, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "server mixing: w <- (1 - beta) w + beta mean(w_i)"},
    {"rho", "rho", SFL_PARAM_REAL, offsetof(fedmac_params_t, rho), 0.01, 0, HUGE_VAL,
     SFL_PARAM_OPEN_LO, "smoothing of phi_rho = rho sum log cosh(x/rho) (not given in the paper)"},
    {"local_steps", "R", SFL_PARAM_COUNT, offsetof(fedmac_params_t, local_steps), 20, 1,
     UINT32_MAX, 0, "local rounds per round, one minibatch each"},
    {"batch", "D", SFL_PARAM_COUNT, offsetof(fedmac_params_t, batch), 20, 1, UINT32_MAX, 0,
     "minibatch size, the paper's size of D (at least the local rows: full batch)"},
    {"theta_steps", "K_theta", SFL_PARAM_COUNT, offsetof(fedmac_params_t, theta_steps), 1, 1,
     UINT32_MAX, 0, "gradient steps on theta per local round (the paper: 1)"},
    SFL_PARAM_DEF_PRUNE(fedmac_params_t, prune, min_density),
    {0},
};

double sfl_phi_rho(const double *x, size_t d, double rho, double *grad)
{
    double f = 0.0;

    for (size_t j = 0; j < d; j++) {
        double a = fabs(x[j]) / rho;

        /* log cosh a = a + log1p(e^{-2a}) - log 2: no overflow for large a */
        f += a + log1p(exp(-2.0 * a)) - 0.69314718055994530942; /* log 2 */
        if (grad)
            grad[j] = tanh(x[j] / rho);
    }
    return rho * f;
}

static int fedmac_update(const sfl_algo_params_t *params, const sfl_problem_t *prob,
                         const double *global, const sfl_dataset_t *local, void *client_state,
                         sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    const fedmac_params_t *p = SFL_ALGO_PARAMS(params, fedmac_params_t);
    double *theta = client_state, *w, *g;
    uint32_t n = local->X->nrows, b;
    size_t d = prob->dim;
    int rc;

    /* theta^{t,0} = w^{t,0} = w^t */
    if ((rc = sfl_algo_personal_begin(params, prob, global, local, theta, p->batch, ws, &b)) < 0)
        return rc;
    w = ws->x;
    g = ws->g;
    for (uint32_t r = 0; r < p->local_steps; r++) {
        const uint32_t *rows;

        if ((rc = sfl_algo_sample_batch(rng, n, b, ws, &rows)) < 0)
            return rc;
        for (uint32_t k = 0; k < p->theta_steps; k++) {
            sfl_loss_grad(prob->loss, local, rows, b, theta, 0.0, g);
            if (p->gamma > 0)
                for (size_t j = 0; j < d; j++)
                    g[j] += p->gamma * tanh(theta[j] / p->rho);
            for (size_t j = 0; j < d; j++)
                theta[j] -= p->eta_p * (g[j] - p->lambda * w[j]);
        }
        for (size_t j = 0; j < d; j++) {
            double gw = p->lambda * (w[j] - theta[j]);

            if (p->gamma_w > 0)
                gw += p->gamma_w * tanh(w[j] / p->rho);
            w[j] -= p->eta * gw;
        }
    }
    /* the sent w pruned (Sec. 5.5); theta keeps every entry */
    return sfl_algo_personal_end(params, prob, theta, p->prune, p->min_density, ws, update);
}

const sfl_algo_t sfl_algo_fedmac = {
    .name = "fedmac",
    .summary = "FedMac: personalized theta_i kept on the client, w_i sent, server mix beta",
    .sparse = 0,
    .params = fedmac_param_defs,
    .params_size = sizeof(fedmac_params_t),
    .client_update = fedmac_update,
    .state_size = sfl_algo_model_state_size,
    .state_init = sfl_algo_model_state_init,
    .state_version = 1,
    .finish = sfl_fold_mix,
    .shape = SFL_SHAPE_PERSONALIZED,
    .personal_model = sfl_algo_model_state_model,
};

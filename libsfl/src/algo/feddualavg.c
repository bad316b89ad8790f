/* FedDualAvg (Yuan, Zaheer, Reddi, "Federated Composite Optimization", ICML
 * 2021) with the sparsity constraint, as FedGradMP's comparison runs it
 * (seed 004, Sec. V-B). The server keeps a dual state z_t, and that is what
 * it broadcasts (`global`); the model is the primal point H_tau(z_t)
 * (model_of).
 *
 * Primal recovery. With mirror map h = 1/2 ||x||^2 and psi the characteristic
 * function of the tau-sparse vectors, the paper's
 *   x = grad (h + eta~ psi)^*(z) = argmin_{||x||_0 <= tau} 1/2 ||x - z||^2
 * is H_tau(z) for every eta~ > 0, because eta~ psi = psi for an indicator.
 * So the schedule eta~_{t,k} = eta_g lr t K + lr k drops out and the client
 * needs no round counter. eta~ is 0 only at t = k = 0, where the formula
 * would return z itself; we threshold there too, which is the same for the
 * usual start z_0 = 0 and keeps every iterate feasible.
 *
 * Client: z <- z_t; K times x = H_tau(z), z <- z - lr grad f_B(x); sends
 * Delta = z_K - z_t. Server: z_{t+1} = z_t + eta_g sum_i p_i Delta_i.
 *
 * What travels: Delta, dense in general. The dual z is dense by design (it
 * keeps the mass below the threshold that H_tau discards), so sending z_K
 * would cost as much; Delta = -lr sum_k g_k is the paper's message, is
 * exactly zero on features absent from the client's data, and is the small
 * quantity, so float32 or quantized transport errs relative to the round's
 * step rather than to the accumulated state. */
#include "sfl/algo/algo.h"

#include <math.h>
#include <string.h>

#include "sfl/core/error.h"

static int feddualavg_client_update(const sfl_algo_params_t *algo_params,
                                    const sfl_problem_t *prob, const double *global,
                                    const sfl_dataset_t *local, void *client_state,
                                    sfl_rng_t *rng, sfl_algo_ws_t *ws, sfl_spvec_t *update)
{
    const sfl_sgd_params_t *p = &SFL_ALGO_PARAMS(algo_params, sfl_server_step_params_t)->sgd;
    uint32_t n = local->X->nrows;
    size_t d = prob->dim;
    uint32_t b = p->batch < n ? p->batch : n;
    double *delta;
    int rc;

    (void)client_state;
    if (n == 0)
        return sfl__fail(SFL_EEMPTY, "client has no samples");
    if (local->X->ncols != prob->ncols)
        return sfl__fail(SFL_EDIM, "client data has %u features, the model %u",
                         local->X->ncols, prob->ncols);
    if (update->dim != d)
        return sfl__fail(SFL_EDIM, "update vector has dimension %u, the model %zu",
                         update->dim, d);
    rc = sfl_algo_ws_reserve(ws, d, b);
    if (rc < 0)
        return rc;
    /* The running change Delta lives in the update's own storage: the
     * message needs about dim entries anyway (Delta is dense), and the
     * workspace holds only x and g. The update reads as empty until it is
     * written at the end, so a failure never leaves a half-built message. */
    rc = sfl_spvec_reserve(update, update->dim);
    if (rc < 0)
        return rc;
    update->nnz = 0;
    delta = update->val;
    memset(delta, 0, d * sizeof(double));
    for (uint32_t k = 0; k < p->local_steps; k++) {
        const uint32_t *rows;

        rc = sfl_algo_sample_batch(rng, n, b, ws, &rows);
        if (rc < 0)
            return rc;
        /* x = H_tau(z_t + Delta); Delta -= lr grad f_B(x). Keeping Delta rather
         * than z makes the message exact, not z_K - z_t after cancellation. */
        for (size_t j = 0; j < d; j++)
            ws->x[j] = global[j] + delta[j];
        rc = sfl_algo_threshold(prob, p->tau, ws->x, &ws->topk);
        if (rc == SFL_ENUMERIC)
            return sfl__fail(rc, "local dual diverged (learning rate %g too large?)", p->lr);
        if (rc < 0)
            return rc;
        sfl_loss_grad(prob->loss, local, rows, b, ws->x, p->lambda, ws->g);
        sfl_dvec_axpy(-p->lr, ws->g, delta, d);
    }
    for (size_t j = 0; j < d; j++)
        if (!isfinite(delta[j]))
            return sfl__fail(SFL_ENUMERIC, "local dual diverged (learning rate %g too large?)",
                             p->lr);
    /* from_dense writes into the storage delta points at: copy it out. */
    memcpy(ws->x, delta, d * sizeof(double));
    return sfl_spvec_from_dense(update, ws->x);
}

static int feddualavg_finish(sfl_fold_t *f, double *global)
{
    double eta = SFL_ALGO_PARAMS(f->params, sfl_server_step_params_t)->server_lr;
    size_t d = f->prob->dim;

    /* z_{t+1} = z_t + eta_g sum_i p_i Delta_i; the dual is not thresholded */
    for (size_t j = 0; j < d; j++)
        global[j] += eta * (f->sum[j] / f->weight_sum);
    return 0;
}

/* model = H_tau(z): the primal point of the broadcast dual (see the top). */
static int feddualavg_model_of(const sfl_algo_params_t *p, const sfl_problem_t *prob,
                               const double *state, double *model, sfl_topk_ws_t *ws)
{
    uint32_t tau = SFL_ALGO_PARAMS(p, sfl_server_step_params_t)->sgd.tau;
    int rc = sfl_topk_ws_reserve(ws, prob->dim);

    if (rc < 0)
        return rc;
    memcpy(model, state, prob->dim * sizeof(double));
    return sfl_algo_threshold(prob, tau, model, ws);
}

const sfl_algo_t sfl_algo_feddualavg = {
    .name = "feddualavg",
    .summary = "FedDualAvg: local dual averaging, model H_tau(dual), server step eta_g",
    .sparse = 1,
    .params = sfl_server_step_param_defs,
    .params_size = sizeof(sfl_server_step_params_t),
    .client_update = feddualavg_client_update,
    .finish = feddualavg_finish,
    .model_of = feddualavg_model_of,
};

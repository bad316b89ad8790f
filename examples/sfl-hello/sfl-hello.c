/* sfl-hello: a federated sparse regression with libsfl, as a program of
 * your own would use it (docs/library.md).
 *
 * Ten clients hold rows y = z'x* + noise of one 5-sparse x* in R^200
 * (sfl/data/synth.h); each round every client runs FedIter-HT's local steps
 * from the global model (sfl_algo_client_round: the same code sfl-sim and
 * sfl-agent run), and the weighted fold of their sparse updates gives the
 * next global model (sfl/algo/fold.h). Prints the objective and the relative
 * error ||x - x*|| / ||x*|| per round; exits 0 once the error is below
 * 1e-3, 1 otherwise.
 *
 *   usage: sfl-hello [ROUNDS]   (default 50) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sfl/algo/algo.h>
#include <sfl/model/eval.h>
#include <sfl/data/synth.h>
#include <sfl/core/version.h>

int main(int argc, char **argv)
{
    const sfl_algo_t *algo = sfl_algo_find("fediterht");
    uint32_t rounds = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 50;
    sfl_synth_params_t sp;
    sfl_synth_t *fed = NULL;
    sfl_problem_t prob;
    sfl_algo_params_t params;
    sfl_algo_ws_t ws;
    sfl_fold_t fold = {0};
    sfl_spvec_t *update = NULL;
    double *x = NULL, *weight = NULL, err = 1.0;
    int rc;

    printf("libsfl %s (built against %s)\n", sfl_version(), SFL_VERSION);
    sfl_algo_ws_init(&ws);
    sfl_synth_params_default(&sp, SFL_SYNTH_SPARSE);
    sp.nclients = 10;
    sp.dim = 200;
    sp.s = 5;
    sp.seed = 42;
    if ((rc = sfl_synth_generate(&sp, &fed)) < 0 ||
        (rc = sfl_problem_init(&prob, &sfl_loss_lsq, fed->dim, 0)) < 0)
        goto out;
    sfl_algo_params_default(algo, &params);
    if ((rc = sfl_algo_param_set(&params, "tau", 5)) < 0 ||
        (rc = sfl_algo_param_set(&params, "lr", 0.05)) < 0 ||
        (rc = sfl_algo_param_set(&params, "batch", 100)) < 0 ||
        (rc = sfl_algo_check(algo, &params, &prob)) < 0 ||
        (rc = sfl_fold_init(&fold, algo, &params, &prob, NULL)) < 0 ||
        (rc = sfl_spvec_new((uint32_t)prob.dim, 0, &update)) < 0)
        goto out;
    x = calloc(prob.dim, sizeof(*x));
    weight = calloc(fed->nclients, sizeof(*weight));
    if (x == NULL || weight == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (uint32_t c = 0; c < fed->nclients; c++)
        weight[c] = fed->clients[c]->X->nrows;

    for (uint32_t t = 1; t <= rounds; t++) {
        sfl_fold_begin(&fold);
        for (uint32_t c = 0; c < fed->nclients; c++) {
            rc = sfl_algo_client_round(algo, &params, &prob, x, fed->clients[c], NULL,
                                       sp.seed, t, c, &ws, update);
            if (rc < 0 || (rc = sfl_fold_add(&fold, update, weight[c])) < 0)
                goto out;
        }
        if ((rc = sfl_fold_finish(&fold, x)) < 0)
            goto out;
        err = sfl_eval_rel_error(x, fed->truth, prob.dim);
        printf("round %u objective %.6g rel_error %.3g nnz %zu\n", t,
               sfl_eval_objective(prob.loss, fed->clients, fed->nclients, weight, x, 0),
               err, sfl_dvec_nnz(x, prob.dim));
    }
out:
    if (rc < 0)
        fprintf(stderr, "sfl-hello: %s\n", sfl_error_message(rc));
    free(weight);
    free(x);
    sfl_spvec_free(update);
    sfl_fold_close(&fold);
    sfl_algo_ws_close(&ws);
    sfl_synth_free(fed);
    return rc < 0 || !(err < 1e-3);
}

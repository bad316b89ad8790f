/* Model quality measures shared by the simulator and the coordinator. */
#ifndef SFL_EVAL_H
#define SFL_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"

#ifdef __cplusplus
extern "C" {
#endif

/* f(x) = sum_i w_i f_i(x) / sum_i w_i over the clients' full local data
 * (w_i = sample counts gives the average over all samples). Clients with no
 * rows are skipped. Returns NaN when the total weight is 0. */
double sfl_eval_objective(const sfl_loss_t *loss, sfl_dataset_t *const *clients,
                          uint32_t nclients, const double *w, const double *x, double lambda);

/* (1/n) sum_i (predict_i(x) - y_i)^2 over the n rows of ds: the mean squared
 * error of a regression model (NaN for no rows). */
double sfl_eval_mse(const sfl_loss_t *loss, const sfl_dataset_t *ds, const double *x);

/* ||x - truth|| / ||truth|| (NaN if truth is zero). */
double sfl_eval_rel_error(const double *x, const double *truth, size_t d);

/* Support recovery of x against the sorted true support S:
 * precision = |supp(x) ∩ S| / |supp(x)| (1 when x == 0), recall = |supp(x) ∩ S| / |S|. */
void sfl_eval_support(const double *x, size_t d, const uint32_t *support, uint32_t nsupport,
                      double *precision, double *recall);

#ifdef __cplusplus
}
#endif

#endif

/* Between the loss files (loss.c, mlp.c); not installed. */
#ifndef SFL_LOSS_INT_H
#define SFL_LOSS_INT_H

#include "sfl/model/loss.h"

/* grad += lambda x over d entries and, with want_value, returns
 * lambda/2 ||x||^2 (0 and nothing touched for lambda == 0). */
double sfl__loss_add_ridge(const double *x, size_t d, double lambda, double *grad,
                           int want_value);

/* The "mlp:H" loss for name, or NULL if name is not of that form. */
const sfl_loss_t *sfl__loss_mlp_find(const char *name);

#endif

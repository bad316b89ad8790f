/* libsfl-internal pieces of the algorithm layer. */
#ifndef SFL_ALGO_INT_H
#define SFL_ALGO_INT_H

#include "sfl/algo/algo.h"

/* sfl_algo_check without the shape: parameters filled for a, every value
 * in its table range, tau at most the block length, a dictionary only for
 * an algorithm that takes one. The vertical check builds on it. */
int sfl__algo_check_params(const sfl_algo_t *a, const sfl_algo_params_t *p,
                           const sfl_problem_t *prob) SFL_MUST_CHECK;

#endif

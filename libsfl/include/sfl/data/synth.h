/* Synthetic federations with known structure.
 *
 * SFL_SYNTH_SIM1 / SIM2: Simulation I (linear) and II (logistic) of Tong et
 *   al. (seeds 000 Sec. V-A, 001 Sec. 5.1). Client i has its own model x_i:
 *   the first s (paper: 100) entries ~ N(u_i, 1), the rest 0, u_i ~ N(0.1,
 *   alpha); features z ~ N(v_i, Sigma), Sigma = diag(1/j^1.2) (j 1-based),
 *   v_i entries ~ N(B_i, 1), B_i ~ N(0, beta); noise b ~ N(u_i, 1).
 *   SIM1: y = z'x_i + b. SIM2: y' = sigmoid(z'x_i + b); the top 10% of a
 *   client's y' get label 1, the rest 0 (the paper: top 100 of 1000).
 *   No single truth: support = the first s coordinates, truth = NULL.
 * SFL_SYNTH_SPARSE: one s-sparse truth x* (support uniform, values N(0,1)),
 *   z ~ N(0, I), y = z'x* + N(0, noise^2); IID across clients; truth known.
 * SFL_SYNTH_FEDPROX: synthetic(alpha, beta) of Li et al. (FedProx): d = 60
 *   (unless set), 10 classes, W_i, b_i ~ N(u_i, 1), u_i ~ N(0, alpha),
 *   z ~ N(v_i, Sigma) as above, y = argmax softmax(W_i z + b_i); client
 *   sizes log-normal (mean log 4, sd 2) + 50, capped at n_per_client * 10.
 *   No truth, no support; s is unused.
 * SFL_SYNTH_GRADMP: FedGradMP's sparse regression (seed 004 Sec. V-A, V-C):
 *   client i (1-based) has entries ~ N(mu_i, 1/i^decay), mu_i ~ N(0, alpha)
 *   (decay 1.1 in Sec. V-A/V-C, 0.2 in Sec. V-B);
 *   one s-sparse truth x# (support uniform, nonzeros uniform on the unit
 *   sphere S^(s-1)); y = Z x# + N(0, noise^2). Defaults 30 clients x 100
 *   rows, dim 1000, s 10, alpha 1.0, noise 0; truth known; beta unused.
 * SFL_SYNTH_DPBCFW: DP-BCFW's sparse regression (seed 003 Sec. V): every
 *   entry of a row is nonzero with probability density (the paper's
 *   feature sparsity ratio), nonzeros ~ N(0, 1), stored sparse; one
 *   s-sparse truth (support uniform, values N(0, 1): the variable sparsity
 *   ratio is s/dim); y = z'x* + N(0, noise^2), noise default sqrt(0.001)
 *   (the paper's N(0, 0.001)). Defaults dim 1000, s 10, density 0.1; a
 *   client's rows are a prefix of the rows of a larger n_per_client.
 * N(m, v) names a variance v throughout (alpha, beta are variances). */
#ifndef SFL_SYNTH_H
#define SFL_SYNTH_H

#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SFL_SYNTH_SIM1 = 1,
    SFL_SYNTH_SIM2,
    SFL_SYNTH_SPARSE,
    SFL_SYNTH_FEDPROX,
    SFL_SYNTH_GRADMP,
    SFL_SYNTH_DPBCFW
} sfl_synth_kind_t;

typedef struct sfl_synth_params {
    sfl_synth_kind_t kind;
    uint32_t nclients;     /* default 100 (GRADMP: 30) */
    uint32_t n_per_client; /* default 100 */
    uint32_t dim;          /* default 1000 (60 for FEDPROX) */
    uint32_t s;            /* nonzeros of each model; default 100 (SPARSE: 20,
                              GRADMP and DPBCFW: 10) */
    double alpha;          /* default 0.1 (GRADMP: 1.0) */
    double beta;           /* default 0.1 */
    double noise;          /* SPARSE, GRADMP, DPBCFW: noise sd, default 0
                              (DPBCFW: sqrt(0.001)) */
    double decay;          /* GRADMP only: client i's entry variance 1/i^decay,
                              default 1.1 */
    double density;        /* DPBCFW only: fraction of nonzero entries, in
                              (0, 1], default 0.1 */
    uint64_t seed;
} sfl_synth_params_t;

typedef struct sfl_synth {
    uint32_t nclients;
    sfl_dataset_t **clients; /* nclients datasets, owned */
    uint32_t dim;
    double *truth;           /* dim entries, or NULL when not known */
    uint32_t *support;       /* nsupport sorted indices, or NULL */
    uint32_t nsupport;
} sfl_synth_t;

/* Fills defaults for kind (seed 0). */
void sfl_synth_params_default(sfl_synth_params_t *p, sfl_synth_kind_t kind);
/* Generates the federation; deterministic in p (client i's data depends only
 * on seed and i). Invalid sizes (0 clients, s > dim, negative variances)
 * fail with SFL_EINVAL and a detail. Returns owned (sfl_synth_free). */
int sfl_synth_generate(const sfl_synth_params_t *p, sfl_synth_t **out) SFL_MUST_CHECK;
void sfl_synth_free(sfl_synth_t *s);

#ifdef __cplusplus
}
#endif

#endif

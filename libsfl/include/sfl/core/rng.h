/* Seeded pseudo-random numbers. xoshiro256** seeded through splitmix64 from
 * (seed, round, client, stream) so any client's draws in any round can be
 * replayed independently of every other client and of execution order.
 * Not for secrets: keys and DP noise use libsodium. */
#ifndef SFL_RNG_H
#define SFL_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_rng {
    uint64_t s[4];
    double spare;   /* cached second Gaussian deviate */
    int has_spare;
} sfl_rng_t;

/* Well-known stream ids so independent uses never share a sequence. */
enum {
    SFL_STREAM_DATA = 1,      /* synthetic data generation */
    SFL_STREAM_PARTITION = 2, /* partitioners, train/test split */
    SFL_STREAM_TRAIN = 3,     /* client minibatch sampling */
    SFL_STREAM_COHORT = 4,    /* cohort sampling */
    SFL_STREAM_PIVOT = 5,     /* internal: top-k pivots */
    SFL_STREAM_DICT = 6,      /* random dictionaries */
    SFL_STREAM_INIT = 7,      /* the starting model (sfl_loss_init_model) */
    SFL_STREAM_DP = 8,        /* seeded DP noise (sfl_dp_rng_seeded; tests, sfl-sim) */
    SFL_STREAM_SKETCH = 9,    /* the vertical algorithms' common sketch J (vertical.h) */
    SFL_STREAM_SECAGG = 10    /* sfl-sim --secagg: a client's stochastic rounding (savec.h) */
};

void sfl_rng_seed(sfl_rng_t *r, uint64_t seed, uint64_t round, uint64_t client,
                  uint64_t stream);
uint64_t sfl_rng_u64(sfl_rng_t *r);
/* Uniform in [0, n), unbiased; n > 0. */
uint64_t sfl_rng_below(sfl_rng_t *r, uint64_t n);
/* Uniform double in (0, 1): never returns 0 or 1. */
double sfl_rng_uniform(sfl_rng_t *r);
/* N(mean, sd^2). */
double sfl_rng_gauss(sfl_rng_t *r, double mean, double sd);
/* Laplace(0, b). */
double sfl_rng_laplace(sfl_rng_t *r, double b);
/* Gamma(shape, 1), shape > 0 (Marsaglia-Tsang). */
double sfl_rng_gamma(sfl_rng_t *r, double shape);
/* Uniform shuffle of a[0..n). */
void sfl_rng_shuffle(sfl_rng_t *r, uint32_t *a, size_t n);
/* out[0..k) = k distinct values of [0, n), sorted ascending, uniformly among
 * all k-subsets. k > n is SFL_EINVAL. Allocates nothing. */
int sfl_rng_sample(sfl_rng_t *r, uint32_t n, uint32_t k, uint32_t *out) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

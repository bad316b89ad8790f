/* sfl-sim: configuration shared by the option parser and the driver. */
#ifndef SIM_H
#define SIM_H

#include <stdint.h>

typedef struct sim_cfg {
    char *algo;
    char *data;       /* synth:KIND | libsvm:FILE | csv:FILE */
    char *partition;  /* iid | label | dirichlet:A | kmeans:K */
    char *test;       /* held-out file (same format as data) */
    char *loss;       /* lsq | logistic | softmax; empty = from the data */
    char *encoding;   /* f64 | f32 | q8 */
    char *plot;       /* PNG path */
    char *output;     /* CSV path; empty = stdout */
    char *dictionary; /* gaussian:M | FILE; empty = standard basis */
    char *dump_data;  /* write the training data (LibSVM) here */
    char *model_out;  /* write the final model here */
    char *dump_shards;/* write each client's data to DIR/client-<i>.svm */
    uint32_t clients, rounds, tau, local_steps, batch;
    uint32_t dim, samples, support, parts, kmeans_iter, cohort, inexact_steps;
    double lr, lambda, mu, alpha, beta, noise, decay, test_frac, l2_ball, server_lr;
    uint64_t seed;
    int no_wall_clock, quiet, centralized;
    /* which options were given explicitly (flags or config) */
    unsigned char given[64];
} sim_cfg_t;

/* Option ids for given[] that the driver consults. */
enum { SIM_OPT_LR, SIM_OPT_K, SIM_OPT_TEST_FRAC, SIM_OPT_LAMBDA, SIM_OPT_PARTITION,
       SIM_OPT_TAU, SIM_OPT_ALPHA, SIM_OPT_BETA, SIM_OPT_DIM, SIM_OPT_SUPPORT,
       SIM_OPT_SAMPLES, SIM_OPT_NOISE, SIM_OPT_DECAY };

/* Parses argv (and --config FILE); prints --help and exits 0 when asked;
 * on a bad flag or file prints one line and returns -1. */
int sim_options(int argc, char **argv, sim_cfg_t *cfg);
void sim_cfg_free(sim_cfg_t *cfg);

/* Best (lr, K) of the paper's grid for a data preset and algorithm, found by
 * sim/tune.sh; 0 if no entry. */
int sim_paper_defaults(const char *preset, const char *algo, double *lr, uint32_t *k);

#endif

/* sfl-sim: configuration shared by the option parser and the driver. */
#ifndef SIM_H
#define SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sfl/core/param.h"

#define SIM_MAX_PARAMS SFL_PARAMS_MAX

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
    uint32_t clients, rounds;
    uint32_t eval_every; /* metrics (a CSV row) every this many rounds */
    uint32_t dim, samples, support, parts, kmeans_iter, cohort;
    double alpha, beta, noise, decay, density, test_frac;
    /* algorithm parameters given (flags or config), as text: the
     * algorithm's table checks them once it is known */
    struct {
        char name[SFL_PARAM_NAME_LEN];
        char *text;
    } params[SIM_MAX_PARAMS];
    uint32_t nparams;
    uint64_t seed;
    int no_wall_clock, quiet, centralized;
    int standardize;        /* --standardize: pooled training mean and sd */
    double standardize_eps; /* --standardize-eps: scale = 1 / (sigma + eps) */
    /* --secagg: mode 2's support rule, error feedback and quantization
     * (secagg.c); 0 for sa_support, sa_topk and sa_wmax = derived */
    int secagg;
    uint32_t sa_support, sa_topk;
    double sa_clip, sa_wmax;
    /* which options were given explicitly (flags or config) */
    unsigned char given[64];
} sim_cfg_t;

/* Option ids for given[] that the driver consults. */
enum { SIM_OPT_TEST_FRAC, SIM_OPT_PARTITION, SIM_OPT_ALPHA, SIM_OPT_BETA, SIM_OPT_DIM, SIM_OPT_SUPPORT,
       SIM_OPT_SAMPLES, SIM_OPT_NOISE, SIM_OPT_DECAY, SIM_OPT_DENSITY, SIM_OPT_CLIENTS,
       SIM_OPT_ENCODING, SIM_OPT_SA };

/* Parses argv (and --config FILE); prints --help and exits 0 when asked;
 * on a bad flag or file prints one line and returns -1. */
int sim_options(int argc, char **argv, sim_cfg_t *cfg);
void sim_cfg_free(sim_cfg_t *cfg);
/* The text given for an algorithm parameter; NULL if none. */
const char *sim_param_given(const sim_cfg_t *cfg, const char *name);
/* docs/algorithms.md's parameter tables (sfl-sim --list-params). */
void sim_list_params(FILE *f);

/* Best (lr, K) of the paper's grid for a data preset and algorithm, found by
 * sim/tune.sh; 0 if no entry. */
int sim_paper_defaults(const char *preset, const char *algo, double *lr, uint32_t *k);

/* sfl_sim.c's helpers, shared with the vertical driver. */
struct sfl_dataset;
struct sfl_loss;
struct sfl_synth_params;
/* "sfl-sim: error: what: message" and exit 1; die_sys for -errno. */
void sim_die(const char *what, int rc);
/* Codes test's labels by train's classes (a label train lacks: an error
 * naming path and the row, exit 1). */
void sim_code_test_labels(const struct sfl_dataset *train, struct sfl_dataset *test,
                          const char *path);
void sim_die_sys(const char *what, int err);
/* "sfl-sim: error: msg: arg" and exit 2. */
void sim_usage_error(const char *msg, const char *arg);
void *sim_xcalloc(size_t n, size_t size);
double sim_now_ms(void);
/* The data file path in the form kind names, widened to min_cols. */
int sim_read_file(const char *kind, const char *path, uint32_t min_cols,
                  struct sfl_dataset **out);
/* --loss, else from the labels. */
const struct sfl_loss *sim_choose_loss(const sim_cfg_t *cfg, const struct sfl_dataset *ds);
/* The synthetic generator's parameters for synth:kind from the flags. */
void sim_synth_params(const char *kind, const sim_cfg_t *cfg, struct sfl_synth_params *p);
/* --model-out's form; mkdir -p. */
void sim_write_model(const char *path, const double *x, size_t d);
void sim_make_dirs(const char *dir);
/* --plot: obj[0..n) against 1..n; 0, or -1 with why filled. */
int sim_plot(const char *png, const double *obj, uint32_t n, const sim_cfg_t *cfg, char *why,
             size_t cap);

/* datastats.c. --standardize: mu and scale (d each, caller's) from the
 * pooled moments of train[0..n), summed per client in client order (the
 * network's statistics round sums the agents' vectors the same way); prints
 * a summary line to stderr. Errors exit. */
void sim_standardizer(struct sfl_dataset *const *train, uint32_t n, uint32_t d, double eps,
                      double *mu, double *scale);
/* x -> (x - mu) scale on every non-NULL parts[c]. */
void sim_standardize_apply(struct sfl_dataset **parts, uint32_t n, uint32_t d,
                           const double *mu, const double *scale);
/* One stderr line: training rows, distinct training rows, test rows and how
 * many test rows equal some training row (test may be NULL). */
void sim_overlap_summary(struct sfl_dataset *const *train, uint32_t ntrain,
                         struct sfl_dataset *const *test, uint32_t ntest);

/* The vertical driver (vertical.c): --partition features:K, or a vertical
 * algorithm (refused without it). Returns the exit status. */
struct sfl_algo;
int sim_vertical(sim_cfg_t *cfg, const struct sfl_algo *algo);

/* --secagg's simulation of secure aggregation (mode 2) in the horizontal
 * driver (secagg.c): every selected client's update becomes a quantized
 * input on the common support S_t, and the fold receives the one mean the
 * server would decode. */
struct sfl_algo_params;
struct sfl_problem;
struct sfl_spvec;
typedef struct sim_sa sim_sa_t;
/* The round's state for (cfg, params, prob), nclients clients whose
 * largest sample count is w_big, npick of them per round; usage errors
 * exit 2. Free with sim_sa_free. */
sim_sa_t *sim_sa_new(const sim_cfg_t *cfg, const struct sfl_algo_params *p,
                     const struct sfl_problem *prob, uint32_t nclients, double w_big,
                     uint32_t npick);
void sim_sa_free(sim_sa_t *s);
/* Round t: nonce_t and S_t from the global state x_t; an empty sum. */
void sim_sa_begin(sim_sa_t *s, uint32_t t, const double *global);
/* Client c's update (the algorithm's message, from the broadcast bcast)
 * with its weight into the sum; returns the bytes it sends. */
uint64_t sim_sa_add(sim_sa_t *s, uint32_t t, uint32_t c, const double *bcast,
                    const struct sfl_spvec *update, double weight);
/* The server's decode: out = global + the mean change on S_t (0 elsewhere),
 * the one update the fold then receives, with weight 1. */
void sim_sa_finish(sim_sa_t *s, const double *global, struct sfl_spvec *out);
/* One line: the quantizer and how many values sent were clipped. */
void sim_sa_summary(const sim_sa_t *s, FILE *f);

#endif

/* Test helpers shared by the algorithm suites (test_algo, test_fedmid,
 * test_feddualavg, test_fedgradmp): small datasets with known answers and a
 * federation driven through the algorithm table, asserting as it goes. */
#ifndef SFL_TEST_TESTFED_H
#define SFL_TEST_TESTFED_H

#include <stdint.h>

#include "sfl/algo/algo.h"
#include "sfl/algo/client.h"
#include "sfl/data/synth.h"

/* Dataset from a dense row-major n x d matrix a (zeros are not stored) and
 * targets y. Returns owned (sfl_dataset_free). */
sfl_dataset_t *testfed_dense_data(const double *a, const double *y, uint32_t n, uint32_t d);

/* Identity design: rows e_j with target y_j, so f(x) = (1/n) ||x - y||^2 and
 * grad f(x) = (2/n)(x - y): one full-batch step of size n/2 lands exactly on
 * y, from anywhere. Returns owned (sfl_dataset_free). */
sfl_dataset_t *testfed_identity_data(const double *y, uint32_t n);

/* The noiseless sparse federation most tests train on: 4 clients x 60 rows,
 * dim 80, a 4-sparse truth, seed 3. Returns owned (sfl_synth_free). */
sfl_synth_t *testfed_small_sparse(void);

/* Parameters in tests. testfed_params_default fills a "universal" table
 * holding every parameter name of the registry (lr, tau, local_steps,
 * batch, lambda, mu, server_lr, l2_ball, inexact_steps) with the usual
 * defaults and wide ranges; testfed_set sets one by name (asserting);
 * testfed_as(algo, p) gives algo's own parameters with every value p has
 * for one of algo's names (asserted in range), so one p serves several
 * algorithms as the tests' old single struct did. testfed_run,
 * testfed_update and testfed_client_once convert by themselves; the result
 * of testfed_as is one slot per (p, algo), refreshed at each call. */
void testfed_params_default(sfl_algo_params_t *p);
void testfed_set(sfl_algo_params_t *p, const char *name, double v);
const sfl_algo_params_t *testfed_as(const sfl_algo_t *algo, const sfl_algo_params_t *p);
/* sfl_algo_param_set(name, v) on algo's defaults: its return code. */
int testfed_try(const sfl_algo_t *algo, const char *name, double v);

/* What testfed_run asserts beyond success and valid messages:
 * TESTFED_SPARSE, that every upload and every new state holds at most tau
 * nonzeros per block (not for algorithms that send dense messages). */
enum { TESTFED_ANY = 0, TESTFED_SPARSE = 1 };

/* One federation run, from state 0. Zero-initialise, then set what the test
 * needs; everything marked optional may stay NULL / 0. */
typedef struct testfed {
    const sfl_algo_t *algo;
    const sfl_algo_params_t *p;
    const sfl_problem_t *prob;
    sfl_dataset_t *const *clients;
    uint32_t nclients;
    uint32_t rounds;
    /* Cohort: round t runs the clients c with c % stride == t % stride;
     * 0 or 1 runs everyone every round. */
    uint32_t stride;
    int check; /* TESTFED_ANY or TESTFED_SPARSE */
    const double *truth; /* optional: the model-space truth errors are against */
    double *errs;        /* optional: relative error after each round (needs truth) */
    double *out_model;   /* optional: the final model (model_of the state) */
    double *out_state;   /* optional: the final state */
} testfed_t;

/* Runs f: in round t client c trains with the rng seeded (7, t, c,
 * SFL_STREAM_TRAIN), every upload is validated and added with its sample
 * count as weight. Any failure fails the test. Returns the relative error of
 * the final model against truth (0 without one). */
double testfed_run(const testfed_t *f);

/* testfed_run over s: least squares on s->dim features, every client every
 * round, errors against s->truth. */
double testfed_run_synth(const sfl_algo_t *algo, const sfl_synth_t *s,
                         const sfl_algo_params_t *p, uint32_t rounds, int check,
                         double *out_model, double *out_state);

/* One client to call client_update on by hand: the identity design on y (n
 * samples and features) and the same with no samples, least squares over dim
 * features (dim != n: a model that does not fit the data), default
 * parameters, a workspace, a message of dim entries and the rng of client 0
 * in round 1. */
typedef struct testfed_client {
    sfl_dataset_t *ds;
    sfl_dataset_t *empty;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
    sfl_rng_t r;
} testfed_client_t;

void testfed_client_init(testfed_client_t *c, const double *y, uint32_t n, uint32_t dim);
void testfed_client_close(testfed_client_t *c);
/* algo's client_update from the model x on data into c->u, with c's
 * problem, parameters, workspace and rng. */
int testfed_update(const sfl_algo_t *algo, testfed_client_t *c, const double *x,
                   const sfl_dataset_t *data);

/* One client update of algo with a fresh workspace, message and rng (client
 * 0, round 1), freed before returning: for FAILALLOC_EACH, every allocation
 * it makes can fail. Returns client_update's code. */
int testfed_client_once(const sfl_algo_t *algo, const sfl_algo_params_t *p,
                        const sfl_problem_t *prob, const double *x, const sfl_dataset_t *ds);

/* A personalized algorithm's client on the identity design (n samples and
 * features, least squares): problem, algo's default parameters with a full
 * batch, a fresh client state, a workspace and a message. */
typedef struct testfed_personal {
    const sfl_algo_t *algo;
    sfl_dataset_t *ds;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_client_state_t st;
    sfl_algo_ws_t ws;
    sfl_spvec_t *u;
} testfed_personal_t;

void testfed_personal_init(testfed_personal_t *c, const sfl_algo_t *algo, const double *y,
                           uint32_t n);
void testfed_personal_close(testfed_personal_t *c);
/* sfl_algo_param_set, asserting success. */
void testfed_personal_set(testfed_personal_t *c, const char *name, double v);
/* One round from global through sfl_algo_client_round (seed 7, client 0). */
int testfed_personal_round(testfed_personal_t *c, const double *global, uint64_t round);

#endif

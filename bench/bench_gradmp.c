/* Where a FedGradMP local step spends its time: the minibatch gradient, the
 * support selection (top 2tau of d, merge with Lambda) and the restricted
 * solve over all client rows, plus whole client updates (K = 1) of both
 * variants.
 *
 *   bench_gradmp [--quick]
 *
 * Synthetic lsq client (N(0,1) features, y = Z x# for a tau-sparse x#),
 * batch 40, Lambda = supp(x#) as in a later round. Configurations: d = 1e4
 * and 1e5 with 100 dense rows (the paper's client size: |Ghat| > 100 takes
 * the minimum-norm path), and n = 4 tau rows (Cholesky path; 1% dense at
 * d = 1e5 to bound memory). Medians of 5 runs; one line per configuration:
 *   bench_gradmp d= n= density= tau= g= path= grad_ms= select_ms= solve_ms=
 *                exact_update_ms= inexact_update_ms= */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/core/rng.h"

#define RUNS 5

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *t)
{
    qsort(t, RUNS, sizeof(*t), cmp_double);
    return t[RUNS / 2];
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_gradmp: %s: %s: %s\n", what, sfl_strerror(rc), sfl_last_error());
    exit(1);
}

/* n x d rows with the given density (column j kept with that probability),
 * N(0,1) values, y = Z xs. */
static sfl_dataset_t *make_client(uint32_t n, uint32_t d, double density, const double *xs,
                                  sfl_rng_t *r)
{
    size_t cap = (size_t)((double)n * d * density * 1.2) + (size_t)n * 16;
    sfl_csr_t *X;
    sfl_dataset_t *ds;
    double *y = sfl__mallocarray(n, sizeof(double));
    size_t k = 0;
    int rc;

    if (y == NULL || (rc = sfl_csr_new(n, d, cap, &X)) < 0)
        die("allocating the client", SFL_ENOMEM);
    for (uint32_t i = 0; i < n; i++) {
        double s = 0;

        for (uint32_t j = 0; j < d; j++) {
            if (density < 1.0 && sfl_rng_uniform(r) >= density)
                continue;
            if (k == cap)
                die("client nnz estimate", SFL_ELIMIT);
            X->colind[k] = j;
            X->val[k] = sfl_rng_gauss(r, 0.0, 1.0);
            s += X->val[k] * xs[j];
            k++;
        }
        X->rowptr[i + 1] = k;
        y[i] = s;
    }
    X->nnz = k;
    if ((rc = sfl_dataset_new(X, y, &ds)) < 0)
        die("dataset", rc);
    return ds;
}

static void run(uint32_t d, uint32_t n, double density, uint32_t tau)
{
    sfl_rng_t r;
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_algo_ws_t ws;
    sfl_topk_ws_t tk;
    double *xs = calloc(d, sizeof(double)), *g = malloc(d * sizeof(double));
    uint32_t *lam = malloc(tau * sizeof(uint32_t)), *gam = malloc(2 * tau * sizeof(uint32_t));
    uint32_t *ghat = malloc(3 * tau * sizeof(uint32_t)), *batch = malloc(40 * sizeof(uint32_t));
    double *b = malloc(3 * tau * sizeof(double));
    double tg[RUNS], ts[RUNS], tv[RUNS], te[RUNS], ti[RUNS];
    uint32_t ng = 0;
    int minnorm = 0, rc;

    sfl_rng_seed(&r, 1, d, n, SFL_STREAM_DATA);
    if ((rc = sfl_rng_sample(&r, d, tau, lam)) < 0)
        die("support", rc);
    for (uint32_t i = 0; i < tau; i++)
        xs[lam[i]] = sfl_rng_gauss(&r, 0.0, 1.0);
    sfl_dataset_t *ds = make_client(n, d, density, xs, &r);

    if ((rc = sfl_problem_init(&prob, &sfl_loss_lsq, d, 0)) < 0)
        die("problem", rc);
    /* tau, batch 40, one local step, lr 1e-3 (the inexact variant's) */
    sfl_algo_params_default(&sfl_algo_fedgradmp_inexact, &p);
    if (sfl_algo_param_set(&p, "tau", tau) < 0 || sfl_algo_param_set(&p, "batch", 40) < 0 ||
        sfl_algo_param_set(&p, "local_steps", 1) < 0 || sfl_algo_param_set(&p, "lr", 1e-3) < 0)
        die("params", SFL_EINVAL);
    sfl_algo_ws_init(&ws);
    sfl_topk_ws_init(&tk);
    if ((rc = sfl_topk_ws_reserve(&tk, d)) < 0)
        die("topk", rc);
    for (int k = 0; k < RUNS; k++) {
        double t0 = now_ms();

        if ((rc = sfl_rng_sample(&r, n, 40 < n ? 40 : n, batch)) < 0)
            die("batch", rc);
        sfl_loss_grad(&sfl_loss_lsq, ds, batch, 40 < n ? 40 : n, xs, 0.0, g);
        double t1 = now_ms();
        /* At x# the gradient vanishes; select on the gradient at 0.5 x#
         * instead, which is what a mid-run step sees. */
        if (k == 0)
            for (uint32_t i = 0; i < tau; i++)
                xs[lam[i]] *= 0.5;
        if ((rc = sfl_algo_gradmp_support(&prob, tau, g, lam, tau, gam, ghat, &ng, &tk)) < 0)
            die("support", rc);
        double t2 = now_ms();
        if ((rc = sfl_algo_gradmp_solve(ds, NULL, ghat, ng, 0.0, b, &minnorm)) < 0)
            die("solve", rc);
        double t3 = now_ms();
        tg[k] = t1 - t0;
        ts[k] = t2 - t1;
        tv[k] = t3 - t2;
    }
    for (int v = 0; v < 2; v++) {
        const sfl_algo_t *a = v ? &sfl_algo_fedgradmp_inexact : &sfl_algo_fedgradmp;
        sfl_algo_params_t pa;
        sfl_param_list_t pl;
        sfl_spvec_t *u;

        /* the same values, for each variant's table */
        sfl_algo_params_to_list(&p, &pl);
        sfl_algo_params_default(a, &pa);
        for (uint32_t i = 0; i < pl.n; i++)
            if (sfl_algo_param_find(a, pl.v[i].name) &&
                sfl_algo_param_set(&pa, pl.v[i].name, pl.v[i].value) < 0)
                die("params", SFL_EINVAL);
        if ((rc = sfl_spvec_new(d, 0, &u)) < 0)
            die("update", rc);
        for (int k = 0; k < RUNS; k++) {
            double t0 = now_ms();

            if ((rc = a->client_update(&pa, &prob, xs, ds, NULL, &r, &ws, u)) < 0)
                die(a->name, rc);
            (v ? ti : te)[k] = now_ms() - t0;
        }
        sfl_spvec_free(u);
    }
    printf("bench_gradmp d=%u n=%u density=%g tau=%u g=%u path=%s grad_ms=%.3f select_ms=%.3f "
           "solve_ms=%.3f exact_update_ms=%.3f inexact_update_ms=%.3f\n",
           d, n, density, tau, ng, minnorm ? "minnorm" : "chol", median(tg), median(ts),
           median(tv), median(te), median(ti));
    fflush(stdout);
    sfl_topk_ws_close(&tk);
    sfl_algo_ws_close(&ws);
    sfl_dataset_free(ds);
    free(b);
    free(batch);
    free(ghat);
    free(gam);
    free(lam);
    free(g);
    free(xs);
}

int main(int argc, char **argv)
{
    const uint32_t taus[] = {10, 50, 100, 200, 400};
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    size_t nt = quick ? 2 : 5;

    for (size_t i = 0; i < nt; i++)
        run(10000, 100, 1.0, taus[i]);
    for (size_t i = 0; i < nt; i++)
        run(100000, 100, 1.0, taus[i]);
    for (size_t i = 0; i < nt; i++)
        run(10000, 4 * taus[i], 1.0, taus[i]);
    for (size_t i = 0; i < nt; i++)
        run(100000, 4 * taus[i], 0.01, taus[i]);
    return 0;
}

/* BCFW-AS and DP-BCFW (seed 003) through the vertical table: the pieces
 * (block split, oracle, step rule, residuals), one iteration by hand,
 * convergence against a projected-gradient reference, the samplings, the
 * sketch, the noise and its calibration, the privacy accounting, and every
 * refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "testfed.h"
#include "testutil.h"
#include "sfl/dp/dp.h"
#include "sfl/model/eval.h"
#include "sfl/algo/vertical.h"

/* A vertical run in the test: the problem, the job, its K blocks, their
 * states, the model and the broadcast. */
typedef struct vrun {
    sfl_problem_t prob;
    sfl_algo_params_t p;
    sfl_vjob_t job;
    const sfl_dataset_t *all;
    uint32_t K;
    sfl_dataset_t *data[16];
    sfl_vblock_t blk[16];
    void *state[16];
    void *common;
    double *msg[16];
    double *x, *b;
    int unchecked; /* skip sfl_vertical_check (a reference run it refuses) */
} vrun_t;

static void vrun_open(vrun_t *v, const sfl_algo_t *a, const sfl_dataset_t *all,
                      const sfl_loss_t *loss, uint32_t K, uint64_t T)
{
    uint32_t d = all->X->ncols;

    memset(v, 0, sizeof(*v));
    v->all = all;
    v->K = K;
    assert_true(K <= 16);
    assert_int_equal(sfl_problem_init(&v->prob, loss, d, all->nclasses), 0);
    sfl_algo_params_default(a, &v->p);
    v->job = (sfl_vjob_t){.algo = a, .p = &v->p, .prob = &v->prob, .nrows = all->X->nrows,
                          .nclients = K, .iters = T, .seed = 7};
}

/* After the parameters are set: check, common part, states. */
static void vrun_start(vrun_t *v)
{
    const sfl_vertical_ops_t *ops = v->job.algo->vertical;
    uint32_t d = v->prob.ncols;

    if (!v->unchecked)
        assert_int_equal(sfl_vertical_check(&v->job), 0);
    assert_int_equal(ops->common_new(&v->job, &v->common), 0);
    v->job.common = v->common;
    for (uint32_t k = 0; k < v->K; k++) {
        uint32_t col0, len;

        assert_int_equal(sfl_vertical_block(d, v->K, k, &col0, &len), 0);
        assert_int_equal(sfl_dataset_columns(v->all, col0, len, &v->data[k]), 0);
        v->blk[k] = (sfl_vblock_t){.client = k, .col0 = col0, .data = v->data[k]};
        assert_int_equal(ops->client_new(&v->job, &v->blk[k], &v->state[k]), 0);
        v->msg[k] = calloc(ops->msg_len(&v->job), sizeof(double));
        assert_non_null(v->msg[k]);
    }
    v->x = calloc(d, sizeof(double));
    v->b = calloc(ops->bcast_len(&v->job), sizeof(double));
    assert_true(v->x && v->b);
}

/* Iteration t: every client (seeded noise), then the server. */
static void vrun_step(vrun_t *v, uint64_t t)
{
    for (uint32_t k = 0; k < v->K; k++) {
        sfl_dp_rng_t noise;

        sfl_dp_rng_seeded(&noise, v->job.seed, t, k);
        assert_int_equal(sfl_vertical_client_step(&v->job, &v->blk[k], t, v->b, v->state[k],
                                                  &noise, v->msg[k]),
                         0);
    }
    assert_int_equal(v->job.algo->vertical->server_step(&v->job, t,
                                                        (const double *const *)v->msg, v->x,
                                                        v->b),
                     0);
}

static void vrun_close(vrun_t *v)
{
    const sfl_vertical_ops_t *ops = v->job.algo->vertical;

    for (uint32_t k = 0; k < v->K; k++) {
        ops->client_free(v->state[k]);
        sfl_dataset_free(v->data[k]);
        free(v->msg[k]);
    }
    ops->common_free(v->common);
    free(v->x);
    free(v->b);
}

static double objective(const vrun_t *v, const double *x)
{
    sfl_dataset_t *all = (sfl_dataset_t *)v->all;
    double one = 1.0;

    return sfl_eval_objective(v->prob.loss, &all, 1, &one, x, 0.0);
}

/* n x d Gaussian design (a third of the entries 0), targets by kind:
 * regression y = A x0 + noise, classes {0, 1} otherwise. */
static sfl_dataset_t *random_data(uint64_t seed, uint32_t n, uint32_t d, int classes)
{
    double *a = calloc((size_t)n * d, sizeof(double)), *y = calloc(n, sizeof(double));
    sfl_dataset_t *ds;
    sfl_rng_t r;

    assert_true(a && y);
    sfl_rng_seed(&r, seed, 0, 0, 99);
    for (size_t e = 0; e < (size_t)n * d; e++)
        a[e] = sfl_rng_below(&r, 3) == 0 ? 0.0 : sfl_rng_gauss(&r, 0.0, 1.0);
    for (uint32_t i = 0; i < n; i++) {
        double m = 0;

        for (uint32_t j = 0; j < d; j++)
            m += a[(size_t)i * d + j] * (j % 3 == 0 ? 1.0 : 0.0);
        y[i] = classes ? (m + sfl_rng_gauss(&r, 0, 0.5) > 0) : m + sfl_rng_gauss(&r, 0, 0.1);
    }
    ds = testfed_dense_data(a, y, n, d);
    if (classes)
        assert_int_equal(sfl_dataset_encode_labels(ds, 2), 0);
    free(a);
    free(y);
    return ds;
}

static void test_bcfw_tables(void **state)
{
    (void)state;
    const sfl_algo_t *b = sfl_algo_find("bcfw"), *dp = sfl_algo_find("dpbcfw");

    assert_ptr_equal(b, &sfl_algo_bcfw);
    assert_ptr_equal(dp, &sfl_algo_dpbcfw);
    assert_int_equal(b->shape, SFL_SHAPE_VERTICAL);
    assert_int_equal(dp->shape, SFL_SHAPE_VERTICAL);
    assert_int_equal(b->vertical->msg_ints, 1);
    assert_null(b->client_update);
    assert_non_null(sfl_algo_param_find(b, "sampling"));
    assert_non_null(sfl_algo_param_find(dp, "epsilon"));
    assert_null(sfl_algo_param_find(dp, "sampling")); /* Alg. 2: every coordinate */
}

/* eq. 11, balanced: the first d mod K blocks have one column more. */
static void test_bcfw_blocks(void **state)
{
    (void)state;
    uint32_t c, l;
    const uint32_t want[3][2] = {{0, 4}, {4, 3}, {7, 3}};

    for (uint32_t k = 0; k < 3; k++) {
        assert_int_equal(sfl_vertical_block(10, 3, k, &c, &l), 0);
        assert_int_equal(c, want[k][0]);
        assert_int_equal(l, want[k][1]);
    }
    assert_int_equal(sfl_vertical_block(8, 8, 7, &c, &l), 0);
    assert_true(c == 7 && l == 1);
    assert_int_equal(sfl_vertical_block(10, 0, 0, &c, &l), SFL_EINVAL);
    assert_int_equal(sfl_vertical_block(10, 11, 0, &c, &l), SFL_EINVAL);
    assert_int_equal(sfl_vertical_block(10, 3, 3, &c, &l), SFL_EINVAL);
}

/* eq. 12: the sampled coordinate of largest |g|, first on ties; the vertex
 * -sign(g) eta e_i as a signed 1-based column of the problem. */
static void test_bcfw_oracle(void **state)
{
    (void)state;
    const double g[] = {0.5, -2.0, 1.9, 2.0, 0.0};
    const uint32_t some[] = {0, 2}, zero[] = {4};

    assert_true(sfl_bcfw_oracle(g, NULL, 5, 0) == 2.0);     /* -2 at 1: +(1 + 1) */
    assert_true(sfl_bcfw_oracle(g, NULL, 5, 10) == 12.0);   /* the block's offset */
    assert_true(sfl_bcfw_oracle(g, some, 2, 0) == -3.0);    /* 1.9 at 2: -(2 + 1) */
    assert_true(sfl_bcfw_oracle(g + 2, NULL, 2, 2) == -4.0); /* 1.9 vs 2.0 */
    assert_true(sfl_bcfw_oracle(g, zero, 1, 0) == 5.0);     /* sign(0) = +1 */
    assert_true(sfl_bcfw_oracle(g, NULL, 0, 0) == 0.0);     /* nothing sampled */
}

/* gamma^t = 2 / (p_min t + 2), and p_min per sampling. */
static void test_bcfw_step_rule(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(1, 4, 11, 0);
    vrun_t v;

    assert_true(sfl_bcfw_step(1.0, 0) == 1.0);
    assert_true(sfl_bcfw_step(1.0, 2) == 0.5);
    assert_close(sfl_bcfw_step(0.4, 5), 0.5, 1e-15, 0);
    assert_close(sfl_bcfw_step(0.16, 100), 2.0 / 18.0, 1e-15, 0);
    vrun_open(&v, &sfl_algo_bcfw, ds, &sfl_loss_lsq, 2, 10); /* blocks of 6 and 5 */
    assert_true(sfl_bcfw_pmin(&v.job) == 1.0);
    assert_int_equal(sfl_algo_param_set(&v.p, "tau", 4), 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 1), 0);
    assert_close(sfl_bcfw_pmin(&v.job), 4.0 / 11.0, 1e-15, 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 2), 0);
    assert_close(sfl_bcfw_pmin(&v.job), 4.0 / 6.0, 1e-15, 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "tau", 9), 0);
    assert_true(sfl_bcfw_pmin(&v.job) == 1.0);
    assert_int_equal(sfl_algo_param_set(&v.p, "tau", 4), 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 3), 0);
    assert_close(sfl_bcfw_pmin(&v.job), 0.5 * 4.0 / 6.0, 1e-15, 0);
    sfl_dataset_free(ds);
}

/* Two rows, four columns, two clients; eta 0.5, lsq (l = (m - y)^2):
 *   A = [1 0 2 0; 0 1 0 -1], y = (1, 2).
 * t = 0: x = 0, r = 2 (0 - y) / 2 = (-1, -2), g = A'r = (-1, -2, -2, 2).
 *   client 0 picks column 2 (g -2): +2, a_2 = (0, 1);
 *   client 1 picks column 3 (the first of |2|, g -2): +3, a_3 = (2, 0).
 *   gamma 1: x = (0, .5, .5, 0), b = .5 (0, 1) + .5 (2, 0) = (1, .5) = A x.
 * t = 1: r = 2 ((1, .5) - y) / 2 = (0, -1.5), g = (0, -1.5, 0, 1.5):
 *   +2 with (0, 1); -4 with (0, -1). gamma 2/3:
 *   x = (0, .5, .5, 0)/3 + (2/3)(.5)(e_2 - e_4) = (0, 1/2, 1/6, -1/3),
 *   b = (1, .5)/3 + (1/3)((0, 1) - (0, -1)) = (1/3, 5/6) = A x. */
static void test_bcfw_one_iteration_by_hand(void **state)
{
    (void)state;
    const double a[] = {1, 0, 2, 0, 0, 1, 0, -1}, y[] = {1, 2};
    sfl_dataset_t *ds = testfed_dense_data(a, y, 2, 4);

    for (int alg = 0; alg < 2; alg++) {
        vrun_t v;

        /* bcfw elementary, and dpbcfw exact and non-private: the same */
        vrun_open(&v, alg ? &sfl_algo_dpbcfw : &sfl_algo_bcfw, ds, &sfl_loss_lsq, 2, 2);
        assert_int_equal(sfl_algo_param_set(&v.p, "eta", 0.5), 0);
        if (alg) {
            assert_int_equal(sfl_algo_param_set(&v.p, "sketch", 0), 0);
            assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 0), 0);
        }
        vrun_start(&v);
        assert_int_equal(v.job.algo->vertical->msg_len(&v.job), 3);
        assert_int_equal(sfl_vertical_msg_bytes(&v.job), 4 + 2 * 8);
        assert_int_equal(sfl_vertical_bcast_bytes(&v.job), 2 * 8);
        vrun_step(&v, 0);
        assert_true(v.msg[0][0] == 2 && v.msg[0][1] == 0 && v.msg[0][2] == 1);
        assert_true(v.msg[1][0] == 3 && v.msg[1][1] == 2 && v.msg[1][2] == 0);
        assert_true(v.x[0] == 0 && v.x[1] == 0.5 && v.x[2] == 0.5 && v.x[3] == 0);
        assert_true(v.b[0] == 1 && v.b[1] == 0.5);
        vrun_step(&v, 1);
        assert_true(v.msg[0][0] == 2 && v.msg[1][0] == -4);
        assert_true(v.msg[1][1] == 0 && v.msg[1][2] == -1);
        assert_close(v.x[0], 0, 0, 1e-15);
        assert_close(v.x[1], 0.5, 1e-15, 0);
        assert_close(v.x[2], 1.0 / 6, 1e-15, 0);
        assert_close(v.x[3], -1.0 / 3, 1e-15, 0);
        assert_close(v.b[0], 1.0 / 3, 1e-15, 0);
        assert_close(v.b[1], 5.0 / 6, 1e-15, 0);
        vrun_close(&v);
    }
    sfl_dataset_free(ds);
}

/* Euclidean projection of v (n entries) onto {||v||_1 <= r} (Duchi et al.
 * 2008: sort the magnitudes, find the threshold). */
static void project_l1(double *v, uint32_t n, double r)
{
    double u[64], css = 0, theta = 0, l1 = 0;

    for (uint32_t i = 0; i < n; i++)
        l1 += fabs(v[i]);
    if (l1 <= r)
        return;
    for (uint32_t i = 0; i < n; i++)
        u[i] = fabs(v[i]);
    for (uint32_t i = 1; i < n; i++) /* insertion sort, descending */
        for (uint32_t j = i; j > 0 && u[j] > u[j - 1]; j--) {
            double t = u[j];

            u[j] = u[j - 1];
            u[j - 1] = t;
        }
    for (uint32_t i = 0; i < n; i++) {
        css += u[i];
        if (u[i] - (css - r) / (i + 1) > 0)
            theta = (css - r) / (i + 1);
    }
    for (uint32_t i = 0; i < n; i++)
        v[i] = v[i] > 0 ? fmax(v[i] - theta, 0) : -fmax(-v[i] - theta, 0);
}

/* The minimizer of mean (a'x - y)^2 over the product of K l1 balls of
 * radius eta, by projected gradient descent with step 1/L. */
static void reference_solution(const sfl_dataset_t *ds, uint32_t K, double eta, double *x)
{
    uint32_t n = ds->X->nrows, d = ds->X->ncols;
    double g[64], L = 0;

    /* L = 2/n ||A||_F^2 bounds the gradient's Lipschitz constant */
    for (size_t e = 0; e < ds->X->nnz; e++)
        L += ds->X->val[e] * ds->X->val[e];
    L *= 2.0 / n;
    memset(x, 0, d * sizeof(double));
    for (int it = 0; it < 200000; it++) {
        sfl_loss_grad(&sfl_loss_lsq, ds, NULL, 0, x, 0.0, g);
        for (uint32_t j = 0; j < d; j++)
            x[j] -= g[j] / L;
        for (uint32_t k = 0; k < K; k++) {
            uint32_t c, l;

            assert_int_equal(sfl_vertical_block(d, K, k, &c, &l), 0);
            project_l1(x + c, l, eta);
        }
    }
}

static double block_l1(const double *x, uint32_t d, uint32_t K, uint32_t k)
{
    uint32_t c, l;
    double s = 0;

    assert_int_equal(sfl_vertical_block(d, K, k, &c, &l), 0);
    for (uint32_t j = c; j < c + l; j++)
        s += fabs(x[j]);
    return s;
}

/* Exact BCFW with elementary sampling reaches the constrained minimizer
 * (O(1/t)), staying inside every block's ball; b tracks A x throughout. */
static void test_bcfw_converges_lsq(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(3, 40, 8, 0);
    double xs[8], m[40];

    for (uint32_t K = 1; K <= 2; K++) {
        vrun_t v;
        double fstar, eta = 0.6; /* the unconstrained solution has l1 norm about 3 */
        const uint64_t T = 20000;

        reference_solution(ds, K, eta, xs);
        vrun_open(&v, &sfl_algo_bcfw, ds, &sfl_loss_lsq, K, T);
        assert_int_equal(sfl_algo_param_set(&v.p, "eta", eta), 0);
        vrun_start(&v);
        for (uint64_t t = 0; t < T; t++) {
            vrun_step(&v, t);
            if (t % 1000 == 0)
                for (uint32_t k = 0; k < K; k++)
                    assert_true(block_l1(v.x, 8, K, k) <= eta * (1 + 1e-12));
        }
        fstar = objective(&v, xs);
        assert_true(objective(&v, v.x) >= fstar - 1e-12);
        assert_close(objective(&v, v.x), fstar, 1e-7, 0);
        for (uint32_t j = 0; j < 8; j++)
            assert_close(v.x[j], xs[j], 0, 1e-3);
        sfl_csr_gemv(ds->X, v.x, m);
        for (uint32_t i = 0; i < 40; i++)
            assert_close(v.b[i], m[i], 1e-9, 1e-9);
        vrun_close(&v);
    }
    sfl_dataset_free(ds);
}

/* The partial gradient a_i' r from the margins (Table V) is the loss's
 * gradient, against central differences of the full objective, per loss. */
static void test_bcfw_block_grad_finite_differences(void **state)
{
    (void)state;
    const sfl_loss_t *losses[] = {&sfl_loss_lsq, &sfl_loss_logistic, &sfl_loss_sqhinge};

    for (size_t l = 0; l < 3; l++) {
        sfl_dataset_t *ds = random_data(10 + l, 12, 6, losses[l] != &sfl_loss_lsq);
        sfl_dataset_t *blk;
        double x[6], m[12], r[12], g[6], h = 1e-6;
        sfl_rng_t rng;

        sfl_rng_seed(&rng, 5, l, 0, 98);
        for (uint32_t j = 0; j < 6; j++)
            x[j] = sfl_rng_gauss(&rng, 0, 0.3);
        sfl_csr_gemv(ds->X, x, m);
        assert_int_equal(sfl_bcfw_residual(losses[l], m, ds->y, 12, r), 0);
        /* client 1 of 2 holds columns 3..5 */
        assert_int_equal(sfl_dataset_columns(ds, 3, 3, &blk), 0);
        memset(g, 0, sizeof(g));
        for (uint32_t i = 0; i < 12; i++)
            sfl_csr_row_axpy(blk->X, i, r[i], g);
        for (uint32_t i = 0; i < 3; i++) {
            double xp[6], xm[6], fd;

            memcpy(xp, x, sizeof(x));
            memcpy(xm, x, sizeof(x));
            xp[3 + i] += h;
            xm[3 + i] -= h;
            fd = (sfl_loss_eval(losses[l], ds, NULL, 0, xp, 0, NULL) -
                  sfl_loss_eval(losses[l], ds, NULL, 0, xm, 0, NULL)) / (2 * h);
            assert_close(g[i], fd, 1e-6, 1e-8);
        }
        sfl_dataset_free(blk);
        sfl_dataset_free(ds);
    }
    /* a loss without margins has no residual */
    double m0 = 0, y0 = 0, r0;
    assert_int_equal(sfl_bcfw_residual(&sfl_loss_softmax, &m0, &y0, 1, &r0), SFL_EUNSUP);
}

/* The samplings, seen in the messages: tau-nice with tau = 1 samples one
 * coordinate of all d, so exactly one client answers per iteration;
 * (K, tau)-distributed samples in every block, so every client does. */
static void test_bcfw_samplings(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(4, 30, 12, 0);
    uint32_t hits[12] = {0};

    for (int s = 1; s <= 3; s++) {
        vrun_t v;

        vrun_open(&v, &sfl_algo_bcfw, ds, &sfl_loss_lsq, 3, 200);
        assert_int_equal(sfl_algo_param_set(&v.p, "sampling", s), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "tau", s == 3 ? 2 : 1), 0);
        vrun_start(&v);
        for (uint64_t t = 0; t < 200; t++) {
            uint32_t answered = 0;

            vrun_step(&v, t);
            for (uint32_t k = 0; k < 3; k++) {
                double idx = fabs(v.msg[k][0]);

                answered += idx != 0;
                if (idx != 0) {
                    assert_true(idx >= 4 * k + 1 && idx <= 4 * k + 4);
                    hits[(uint32_t)idx - 1] += s == 2;
                }
            }
            if (s == 1)
                assert_int_equal(answered, 1);
            if (s == 2)
                assert_int_equal(answered, 3);
        }
        assert_true(objective(&v, v.x) < objective(&v, (double[12]){0}));
        vrun_close(&v);
    }
    /* a uniform draw of 1 of 4: every coordinate comes up in 200 tries */
    for (uint32_t j = 0; j < 12; j++)
        assert_true(hits[j] > 0);
    sfl_dataset_free(ds);
}

/* Same job, same bits; the common sketch is the same at every party. */
static void test_bcfw_deterministic(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(5, 50, 10, 0);
    double first[10];

    for (int rep = 0; rep < 2; rep++) {
        vrun_t v;

        vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 2, 30);
        assert_int_equal(sfl_algo_param_set(&v.p, "m", 20), 0);
        vrun_start(&v);
        for (uint64_t t = 0; t < 30; t++)
            vrun_step(&v, t);
        if (rep == 0)
            memcpy(first, v.x, sizeof(first));
        else
            assert_memory_equal(first, v.x, sizeof(first));
        vrun_close(&v);
    }
    sfl_dataset_free(ds);
}

/* dpbcfw without the sketch and the noise is bcfw with elementary sampling,
 * bit for bit: the same exchange, so each costs what it adds alone. */
static void test_bcfw_dpbcfw_exact_is_bcfw(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(12, 40, 12, 1);
    double x[2][12];

    for (int a = 0; a < 2; a++) {
        vrun_t v;

        vrun_open(&v, a ? &sfl_algo_dpbcfw : &sfl_algo_bcfw, ds, &sfl_loss_sqhinge, 3, 80);
        assert_int_equal(sfl_algo_param_set(&v.p, "eta", 0.7), 0);
        if (a) {
            assert_int_equal(sfl_algo_param_set(&v.p, "sketch", 0), 0);
            assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 0), 0);
        }
        vrun_start(&v);
        for (uint64_t t = 0; t < 80; t++)
            vrun_step(&v, t);
        memcpy(x[a], v.x, sizeof(x[a]));
        vrun_close(&v);
    }
    assert_memory_equal(x[0], x[1], sizeof(x[0]));
    sfl_dataset_free(ds);
}

/* Without noise, a long sketch (m = 100 n) gives nearly the exact run: J'J
 * is close to I on the few directions involved. */
static void test_bcfw_sketch_close_to_exact(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(6, 30, 10, 0);
    double fx[2];

    for (int sk = 0; sk < 2; sk++) {
        vrun_t v;

        vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 2, 60);
        assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 0), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "sketch", sk), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "m", 3000), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "eta", 0.5), 0);
        vrun_start(&v);
        if (sk)
            assert_int_equal(sfl_vertical_bcast_bytes(&v.job), 3000 * 8);
        for (uint64_t t = 0; t < 60; t++)
            vrun_step(&v, t);
        fx[sk] = objective(&v, v.x);
        vrun_close(&v);
    }
    assert_close(fx[1], fx[0], 0.02, 0);
    sfl_dataset_free(ds);
}

/* The largest |entry| of a dataset. */
static double max_abs(const sfl_dataset_t *ds)
{
    double m = 0.0;

    for (size_t e = 0; e < ds->X->nnz; e++)
        m = fmax(m, fabs(ds->X->val[e]));
    return m;
}

/* The private run: noise where asked, seeded (replays), and with a huge
 * budget (and clip_a above every entry: nothing clipped) the same path as
 * the non-private one. */
static void test_bcfw_private(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(8, 40, 10, 1);
    double f[3];

    for (int c = 0; c < 3; c++) {
        vrun_t v;

        vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_logistic, 2, 40);
        assert_int_equal(sfl_algo_param_set(&v.p, "sketch", 0), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", c == 0 ? 0 : 1), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "epsilon", c == 1 ? 1e9 : 0.01), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "clip_a", max_abs(ds)), 0);
        vrun_start(&v);
        for (uint64_t t = 0; t < 40; t++)
            vrun_step(&v, t);
        f[c] = objective(&v, v.x);
        vrun_close(&v);
    }
    assert_close(f[1], f[0], 1e-6, 0);
    assert_true(f[2] > f[0]); /* epsilon 0.01 on 40 rows: mostly noise */
    sfl_dataset_free(ds);
}

/* The feature noise. Unsketched, dp_noise 1 adds 2n times the sd of
 * dp_noise 3 (eq. 17's pi as printed, for sensitivity sigma(I) / n = 1/n)
 * to the same feature: mode 1's sensitivity is one sample's, 2 clip_a
 * (clip_a 1). With n a power of two the grids of the two sds differ by
 * exactly 2n, so the same seeded bits give the same integer draw and
 * noise_1 = 2n noise_3 up to the rounding of the feature to each grid;
 * dp_noise 2 (the same index noise, no feature noise; refused with the
 * sketch, which it does not protect, but a reference here) gives the clean
 * feature. The rms of mode 3's draws is checked against pi, and sketched,
 * that of mode 1 against the sd its account op records. Entries are
 * below clip_a here (the data scaled by 1 / max |a|), so nothing is
 * clipped and the features agree. */
static void test_bcfw_feature_noise(void **state)
{
    (void)state;
    const uint32_t n = 16, seeds = 8;
    sfl_dataset_t *ds = random_data(13, n, 4, 0);
    double amax = max_abs(ds);

    for (size_t e = 0; e < ds->X->nnz; e++)
        ds->X->val[e] /= amax;
    for (int sk = 0; sk < 2; sk++) {
        double ms3 = 0.0, ms1 = 0.0, sd1 = 0.0;

        for (uint64_t seed = 1; seed <= seeds; seed++) {
            const int modes[3] = {2, 1, 3};
            double msg[3][1 + 16], big = 0.0;
            size_t L = 0;

            for (int i = 0; i < 3; i++) {
                vrun_t v;

                vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 2, 3);
                v.job.seed = seed;
                assert_int_equal(sfl_algo_param_set(&v.p, "sketch", sk), 0);
                assert_int_equal(sfl_algo_param_set(&v.p, "m", 8), 0);
                assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", modes[i]), 0);
                /* mode 3's 2 G eta / (K n) equal to one sample's 2 eta / n,
                 * so that all three draw the same index noise */
                assert_int_equal(sfl_algo_param_set(&v.p, "grad_bound", 2), 0);
                v.unchecked = modes[i] == 2;
                vrun_start(&v);
                L = v.job.algo->vertical->msg_len(&v.job);
                assert_int_equal(L, 1 + (sk ? 8 : n));
                if (modes[i] == 1) {
                    sfl_dp_acct_t a;

                    sfl_dp_acct_init(&a);
                    assert_int_equal(v.job.algo->vertical->account(&v.job, 1, &a), 1);
                    sd1 = a.e[1].scale;
                }
                vrun_step(&v, 0);
                memcpy(msg[i], v.msg[0], L * sizeof(double));
                vrun_close(&v);
            }
            assert_true(msg[0][0] != 0.0);
            assert_true(msg[1][0] == msg[0][0] && msg[2][0] == msg[0][0]); /* same index */
            for (size_t r = 1; r < L; r++) {
                big = fmax(big, fabs(msg[1][r] - msg[0][r]));
                ms3 += (msg[2][r] - msg[0][r]) * (msg[2][r] - msg[0][r]) /
                       (double)((L - 1) * seeds);
                ms1 += (msg[1][r] - msg[0][r]) * (msg[1][r] - msg[0][r]) /
                       (double)((L - 1) * seeds);
            }
            assert_true(big > 0.0);
            for (size_t r = 1; r < L && !sk; r++)
                assert_close(msg[1][r] - msg[0][r], 2 * n * (msg[2][r] - msg[0][r]), 0,
                             1e-5 * big);
        }
        if (sk)
            assert_close(sqrt(ms1), sd1, 0.25, 0); /* 64 draws: 3 standard errors */
        if (!sk) {
            /* 128 seeded draws of N(0, pi^2): their rms is within 20 % of
             * pi (3 standard errors); a wrong calibration is off by n */
            sfl_dp_bcfw_t dp = {.epsilon = 1, .delta = 1.0 / n, .T = 3, .K = 2, .n = n,
                                .eta = 1, .G = 1};
            double pi;

            assert_int_equal(sfl_dp_bcfw_jl_sigma(&dp, 1.0, &pi), 0);
            assert_close(sqrt(ms3), pi, 0.2, 0);
        }
    }
    sfl_dataset_free(ds);
}

/* The account op and sfl_vertical_privacy: the paper's accounting of the
 * corrected calibration (dp_noise 1) gives back epsilon after the job's T
 * iterations and less before; eq. 17 as printed (3) is far from private by
 * RDP; no noise, nothing private. */
static void test_bcfw_account(void **state)
{
    (void)state;
    const uint32_t n = 50, T = 30, K = 2;
    sfl_dataset_t *ds = random_data(14, n, 10, 0);
    const sfl_vertical_ops_t *ops = sfl_algo_dpbcfw.vertical;
    sfl_dp_bcfw_t dp = {.epsilon = 1, .delta = 1.0 / n, .T = T, .K = K, .n = n, .eta = 1,
                        .G = 1};
    sfl_dp_spent_t s, zero = {0}, prev = {0};
    sfl_dp_acct_t a, b;
    double beta, isens, beta3, isens3, pi, jsens, sd1, gauss[2][2] = {{0}};
    int priv;
    vrun_t v;

    /* modes 1, 2: one sample's contribution, clip_a = clip_r = 1; 3: the
     * paper's 2 G eta / (K n) */
    assert_int_equal(sfl_dp_bcfw_score_sens(n, 1.0, 1.0, 1.0, &isens), 0);
    assert_close(isens, 2.0 / n, 1e-15, 0);
    assert_int_equal(sfl_dp_bcfw_index_scale_for(&dp, isens, &beta), 0);
    assert_int_equal(sfl_dp_bcfw_index_scale(&dp, &beta3), 0);
    assert_int_equal(sfl_dp_bcfw_index_sens(&dp, &isens3), 0);
    assert_close(beta, K * beta3, 1e-15, 0); /* no 1/K */
    assert_int_equal(sfl_dp_bcfw_jl_sigma(&dp, 1.0, &pi), 0);
    assert_int_equal(sfl_dp_bcfw_jl_sens(&dp, 1.0, &jsens), 0);
    assert_int_equal(sfl_dp_bcfw_jl_sigma_for(&dp, 2.0, &sd1), 0);
    assert_close(sd1, 2 * n * pi, 1e-15, 0);
    for (int c = 0; c < 3; c++) {
        int mode = c == 2 ? 3 : 1, sk = c != 0;

        vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, K, T);
        assert_int_equal(sfl_algo_param_set(&v.p, "m", 20), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "sketch", sk), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", mode), 0);
        vrun_start(&v);
        /* what T iterations record: K draws of each mechanism per iteration */
        sfl_dp_acct_init(&a);
        assert_int_equal(ops->account(&v.job, T, &a), 1);
        assert_int_equal(a.n, 2);
        assert_int_equal(a.e[0].kind, SFL_DP_MECH_RNM);
        assert_true(a.e[0].count == K && a.e[0].iters == T);
        assert_close(a.e[0].scale, mode == 1 ? beta : beta3, 1e-15, 0);
        assert_close(a.e[0].sens, mode == 1 ? isens : isens3, 1e-15, 0);
        assert_int_equal(a.e[1].kind, SFL_DP_MECH_GAUSSIAN);
        assert_true(a.e[1].count == K && a.e[1].iters == T);
        /* sigma / sens is eq. 17's for the recorded sensitivity (1: one
         * sample's, 2 clip_a c_J) or pi / sigma(J) (3, n times too small) */
        assert_close(a.e[1].scale / a.e[1].sens, (mode == 1 ? n : 1) * pi / (n * jsens),
                     1e-12, 0);
        if (!sk)
            assert_close(a.e[1].sens, mode == 1 ? 2.0 : 1.0, 1e-15, 0);
        if (sk) {
            gauss[mode == 3][0] = a.e[1].scale;
            gauss[mode == 3][1] = a.e[1].sens;
        }
        /* in two calls, the same entries */
        sfl_dp_acct_init(&b);
        assert_int_equal(ops->account(&v.job, 10, &b), 1);
        assert_int_equal(ops->account(&v.job, T - 10, &b), 1);
        assert_memory_equal(&a, &b, sizeof(a));
        /* too many iterations: refused, the accountant unchanged */
        assert_int_equal(ops->account(&v.job, (uint64_t)UINT32_MAX + 1, &b), SFL_ERANGE);
        assert_int_equal(ops->account(&v.job, UINT32_MAX - 10, &b), SFL_ERANGE);
        assert_memory_equal(&a, &b, sizeof(a));
        /* what it spends, after 0, 1, T / 2 and T iterations */
        assert_int_equal(sfl_vertical_privacy(&v.job, 0, &s, &priv), 0);
        assert_int_equal(priv, 1);
        assert_memory_equal(&s, &zero, sizeof(s));
        for (uint64_t t = 1; t <= T; t += t == 1 ? T / 2 - 1 : T / 2) {
            assert_int_equal(sfl_vertical_privacy(&v.job, t, &s, &priv), 0);
            assert_int_equal(priv, 1);
            assert_true(s.eps_paper > prev.eps_paper && s.eps_rdp > prev.eps_rdp);
            prev = s;
        }
        if (mode == 1) {
            assert_close(s.eps_paper, 1.0, 1e-9, 0);
            assert_true(s.eps_rdp < 1.0);
        } else {
            assert_true(s.eps_rdp > 20.0); /* n times too little feature noise */
        }
        prev = zero;
        /* sketched: sigma(J) comes from the common sketch */
        if (sk) {
            v.job.common = NULL;
            assert_int_equal(ops->account(&v.job, T, &b), SFL_EINVAL);
            assert_detail("dpbcfw: the feature noise needs the job's sketch");
            assert_int_equal(sfl_vertical_privacy(&v.job, T, &s, &priv), SFL_EINVAL);
            assert_int_equal(priv, 0);
            assert_memory_equal(&s, &zero, sizeof(s));
            /* the index noise alone does not need it */
            assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 2), 0);
            assert_int_equal(sfl_vertical_privacy(&v.job, T, &s, &priv), 0);
            assert_int_equal(priv, 1);
            assert_true(s.eps_paper > 0.4 && s.eps_paper < 0.5); /* the index's half */
            v.job.common = v.common;
        }
        vrun_close(&v);
    }
    /* sketched: mode 1's sensitivity 2 c_J (J's largest column norm, about
     * 1 for N(0, 1/m) entries), mode 3's sigma(J) (about 1 + sqrt(n/m)) */
    assert_true(gauss[0][1] > 1.0 && gauss[0][1] < 4.0);
    assert_true(gauss[0][1] < 2.0 * gauss[1][1]);
    /* no noise, or no privacy at all: nothing recorded, not private */
    for (int c = 0; c < 2; c++) {
        vrun_open(&v, c ? &sfl_algo_bcfw : &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, K, T);
        if (!c)
            assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 0), 0);
        vrun_start(&v);
        sfl_dp_acct_init(&a);
        assert_int_equal(v.job.algo->vertical->account(&v.job, T, &a), 0);
        assert_int_equal(a.n, 0);
        s.eps_paper = 1;
        priv = 1;
        assert_int_equal(sfl_vertical_privacy(&v.job, T, &s, &priv), 0);
        assert_int_equal(priv, 0);
        assert_memory_equal(&s, &zero, sizeof(s));
        assert_true(sfl_vertical_delta(&v.job) == 1.0 / n);
        vrun_close(&v);
    }
    /* the delta: the parameter, or 1/n */
    vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, K, T);
    assert_true(sfl_vertical_delta(&v.job) == 1.0 / n);
    assert_int_equal(sfl_algo_param_set(&v.p, "delta", 1e-5), 0);
    assert_true(sfl_vertical_delta(&v.job) == 1e-5);
    sfl_dataset_free(ds);
}

/* Every refusal, each with its detail. */
/* Neighbouring datasets: the rows of random_data(seed, n, d, 0), and the
 * same with row j replaced by an adversarial one (entries sign * 1e6,
 * target -sign * 1e6), far outside the paper's bounds. */
static void neighbours(uint64_t seed, uint32_t n, uint32_t d, uint32_t j, double sign,
                       sfl_dataset_t **ds, sfl_dataset_t **adv)
{
    double *a = calloc((size_t)n * d, sizeof(double)), *y = calloc(n, sizeof(double));
    sfl_rng_t r;

    assert_true(a && y);
    sfl_rng_seed(&r, seed, 0, 0, 99);
    for (size_t e = 0; e < (size_t)n * d; e++)
        a[e] = sfl_rng_below(&r, 3) == 0 ? 0.0 : sfl_rng_gauss(&r, 0.0, 1.0);
    for (uint32_t i = 0; i < n; i++)
        y[i] = sfl_rng_gauss(&r, 0.0, 1.0);
    *ds = testfed_dense_data(a, y, n, d);
    for (uint32_t i = 0; i < d; i++)
        a[(size_t)j * d + i] = sign * 1e6;
    y[j] = -sign * 1e6;
    *adv = testfed_dense_data(a, y, n, d);
    free(a);
    free(y);
}

/* Privacy for any data: on neighbouring datasets that differ in one
 * adversarial row, with the same broadcast (the transcript so far, which
 * the composition conditions on), the released quantities move by at most
 * the sensitivity their noise is calibrated for:
 *   the LO values eta g_i of every block (sfl_bcfw_scores) by the
 *   accountant's recorded index sensitivity 2 eta clip_a clip_r / n;
 *   the shared feature J a_i (the message, same seeded noise) by the
 *   recorded l2 sensitivity 2 clip_a c_J, up to the grid's rounding.
 * The old calibration, mode 3 (no clipping, 2 G eta / (K n) and sigma(J)),
 * fails the same checks by orders of magnitude; and with the clipping,
 * the scores still move by more than 2 G eta / (K n) (G = clip_a clip_r):
 * the paper's 1/K does not hold. */
static void test_bcfw_adversarial_row(void **state)
{
    (void)state;
    const uint32_t n = 32, d = 12, K = 4, T = 5, j = 5;
    const sfl_loss_t *losses[2] = {&sfl_loss_lsq, &sfl_loss_logistic};

    for (int li = 0; li < 2; li++)
        for (int mode = 1; mode <= 3; mode += 2)
            for (int sg = -1; sg <= 1; sg += 2) {
                sfl_dataset_t *ds[2];
                double score[2][16], sens_idx = 0, worst = 0;
                vrun_t v[2];
                sfl_rng_t r;

                neighbours(40 + li, n, d, j, sg, &ds[0], &ds[1]);
                if (li == 1) /* logistic: classes; the adversarial row's label 1 */
                    for (int w = 0; w < 2; w++) {
                        for (uint32_t i = 0; i < n; i++)
                            ds[w]->y[i] = ds[w]->y[i] > 0;
                        assert_int_equal(sfl_dataset_encode_labels(ds[w], 2), 0);
                    }
                for (int w = 0; w < 2; w++) {
                    vrun_open(&v[w], &sfl_algo_dpbcfw, ds[w], losses[li], K, T);
                    assert_int_equal(sfl_algo_param_set(&v[w].p, "sketch", 0), 0);
                    assert_int_equal(sfl_algo_param_set(&v[w].p, "dp_noise", mode), 0);
                    assert_int_equal(sfl_algo_param_set(&v[w].p, "eta", 3), 0);
                    vrun_start(&v[w]);
                }
                {
                    sfl_dp_acct_t a;

                    sfl_dp_acct_init(&a);
                    assert_int_equal(sfl_algo_dpbcfw.vertical->account(&v[0].job, 1, &a), 1);
                    sens_idx = a.e[0].sens;
                }
                /* the broadcast: any margins the transcript gives */
                sfl_rng_seed(&r, 5, 0, 0, 98);
                for (uint32_t i = 0; i < n; i++)
                    v[0].b[i] = v[1].b[i] = sfl_rng_gauss(&r, 0.0, 3.0);
                for (uint32_t k = 0; k < K; k++) {
                    for (int w = 0; w < 2; w++)
                        assert_int_equal(sfl_bcfw_scores(&v[w].job, &v[w].blk[k], v[w].b,
                                                         v[w].state[k], score[w]),
                                         0);
                    for (uint32_t i = 0; i < v[0].blk[k].data->X->ncols; i++)
                        worst = fmax(worst, fabs(score[0][i] - score[1][i]));
                }
                if (mode == 1) {
                    double full;

                    assert_int_equal(sfl_dp_bcfw_score_sens(n, 3.0, 1.0, 1.0, &full), 0);
                    assert_close(sens_idx, full, 1e-15, 0);
                    assert_true(worst <= sens_idx * (1 + 1e-12));
                    assert_true(li == 1 || worst > sens_idx / K); /* lsq: no 1/K */
                    for (int w = 0; w < 2; w++) { /* the counts: block 0, columns 0-2 */
                        uint64_t rows = 0, ents = 0;
                        sfl_vclip_t c;

                        for (uint32_t i = 0; i < n; i++) {
                            uint64_t e0 = ents;

                            for (size_t e = ds[w]->X->rowptr[i]; e < ds[w]->X->rowptr[i + 1];
                                 e++)
                                ents += ds[w]->X->colind[e] < 3 && fabs(ds[w]->X->val[e]) > 1;
                            rows += ents > e0;
                        }
                        sfl_algo_dpbcfw.vertical->clipped(v[w].state[0], &c);
                        assert_int_equal(c.rows, rows);
                        assert_int_equal(c.entries, ents);
                        assert_int_equal(c.residuals_seen, n);
                        assert_true(c.residuals >= (uint64_t)(w && li == 0)); /* lsq: 2e6 */
                    }
                } else {
                    assert_true(worst > 1e3 * sens_idx); /* the old formula fails */
                }
                for (int w = 0; w < 2; w++)
                    vrun_close(&v[w]);
                sfl_dataset_free(ds[0]);
                sfl_dataset_free(ds[1]);
            }
}

/* The shared feature J a_i on the same neighbours: one client (K = 1)
 * with one column (so the same at both) releases J a_i +
 * N(0, sd^2) from the same seeded bits, so the messages differ by J (a_i -
 * a'_i) rounded to the grid: at most the recorded 2 clip_a c_J (plus the
 * grid) with clipping, far more than mode 3's sigma(J) without. */
static void test_bcfw_adversarial_feature(void **state)
{
    (void)state;
    const uint32_t n = 64, d = 1, m = 16;

    for (int mode = 1; mode <= 3; mode += 2) {
        sfl_dataset_t *ds[2];
        double diff = 0, sens, sd;
        vrun_t v[2];

        neighbours(50, n, d, 9, 1.0, &ds[0], &ds[1]);
        for (int w = 0; w < 2; w++) {
            vrun_open(&v[w], &sfl_algo_dpbcfw, ds[w], &sfl_loss_lsq, 1, 3);
            assert_int_equal(sfl_algo_param_set(&v[w].p, "m", m), 0);
            assert_int_equal(sfl_algo_param_set(&v[w].p, "dp_noise", mode), 0);
            vrun_start(&v[w]);
            vrun_step(&v[w], 0);
        }
        {
            sfl_dp_acct_t a;

            sfl_dp_acct_init(&a);
            assert_int_equal(sfl_algo_dpbcfw.vertical->account(&v[0].job, 1, &a), 1);
            sens = a.e[1].sens;
            sd = a.e[1].scale;
        }
        assert_true(fabs(v[0].msg[0][0]) == fabs(v[1].msg[0][0])); /* the same column */
        for (uint32_t q = 1; q <= m; q++)
            diff += (v[0].msg[0][q] - v[1].msg[0][q]) * (v[0].msg[0][q] - v[1].msg[0][q]);
        diff = sqrt(diff);
        if (mode == 1)
            assert_true(diff <= sens + 2 * sqrt((double)m) * sfl_dp_grid(sd));
        else
            assert_true(diff > 1e3 * sens);
        for (int w = 0; w < 2; w++)
            vrun_close(&v[w]);
        sfl_dataset_free(ds[0]);
        sfl_dataset_free(ds[1]);
    }
}

/* select 1 (the exponential mechanism) and calib 1 (the RDP accountant):
 * with a huge budget the exponential mechanism picks the LO's vertex, as
 * the non-private run does; calib 1 spends exactly epsilon by RDP (tight
 * conversion) after T iterations, with less noise than calib 0, for both
 * selections; the EM is recorded as such and its RDP is below RNM's. */
static void test_bcfw_select_calib(void **state)
{
    (void)state;
    const uint32_t n = 40, T = 20;
    sfl_dataset_t *ds = random_data(8, n, 10, 1);
    double f[2], eps_tight[2][2], scale[2][2];

    for (int c = 0; c < 2; c++) {
        vrun_t v;

        vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_logistic, 2, T);
        assert_int_equal(sfl_algo_param_set(&v.p, "sketch", 0), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", c == 0 ? 0 : 2), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "select", 1), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "epsilon", 1e7), 0);
        assert_int_equal(sfl_algo_param_set(&v.p, "clip_a", max_abs(ds)), 0);
        vrun_start(&v);
        for (uint64_t t = 0; t < T; t++)
            vrun_step(&v, t);
        f[c] = objective(&v, v.x);
        vrun_close(&v);
    }
    assert_close(f[1], f[0], 1e-9, 0);
    for (int sel = 0; sel < 2; sel++)
        for (int cal = 0; cal < 2; cal++) {
            sfl_dp_spent_t sp;
            sfl_dp_acct_t a;
            int priv;
            vrun_t v;

            vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_logistic, 2, T);
            assert_int_equal(sfl_algo_param_set(&v.p, "m", 20), 0);
            assert_int_equal(sfl_algo_param_set(&v.p, "select", sel), 0);
            assert_int_equal(sfl_algo_param_set(&v.p, "calib", cal), 0);
            vrun_start(&v);
            sfl_dp_acct_init(&a);
            assert_int_equal(sfl_algo_dpbcfw.vertical->account(&v.job, T, &a), 1);
            assert_int_equal(a.e[0].kind, sel ? SFL_DP_MECH_EM : SFL_DP_MECH_RNM);
            scale[sel][cal] = a.e[0].scale;
            assert_int_equal(sfl_vertical_privacy(&v.job, T, &sp, &priv), 0);
            eps_tight[sel][cal] = sp.eps_rdp_tight;
            if (cal)
                assert_close(sp.eps_rdp_tight, 1.0, 1e-9, 0);
            else
                assert_close(sp.eps_paper, 1.0, 1e-9, 0);
            /* the budget an agent holds it to: the calibration's own */
            assert_close(sfl_vertical_budget_eps(&v.job, &sp), 1.0, 1e-9, 0);
            vrun_step(&v, 0); /* it runs */
            vrun_close(&v);
        }
    for (int sel = 0; sel < 2; sel++) {
        assert_true(eps_tight[sel][0] < 1.0);
        assert_true(scale[sel][1] < scale[sel][0]);
    }
    assert_true(scale[0][0] == scale[1][0]);   /* the paper's: the same scale */
    assert_true(eps_tight[1][0] < eps_tight[0][0]); /* the EM's RDP is smaller */
    sfl_dataset_free(ds);
}

static void test_bcfw_refusals(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(9, 6, 5, 0);
    sfl_algo_params_t hp;
    vrun_t v;

    /* the horizontal drivers refuse it, the vertical check a horizontal one */
    vrun_open(&v, &sfl_algo_bcfw, ds, &sfl_loss_lsq, 2, 5);
    assert_int_equal(sfl_algo_check(&sfl_algo_bcfw, &v.p, &v.prob), SFL_EUNSUP);
    assert_detail("bcfw is a vertical algorithm");
    sfl_algo_params_default(&sfl_algo_fedavg, &hp);
    v.job.algo = &sfl_algo_fedavg;
    v.job.p = &hp;
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EUNSUP);
    assert_detail("fedavg is a horizontal algorithm");
    v.job.algo = &sfl_algo_bcfw;
    v.job.p = &v.p;
    /* sizes */
    v.job.nclients = 6;
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    assert_detail("bcfw: 6 clients cannot share 5 features");
    v.job.nclients = 2;
    v.job.iters = 0;
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    v.job.iters = 5;
    v.job.nrows = 0;
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    v.job.nrows = 6;
    /* tau-nice draws tau of d */
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 1), 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "tau", 6), 0);
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    assert_detail("bcfw: tau-nice sampling draws tau of the 5 columns");
    assert_int_equal(sfl_algo_param_set(&v.p, "tau", 5), 0);
    assert_int_equal(sfl_vertical_check(&v.job), 0);
    /* parameter ranges */
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 4), SFL_EINVAL);
    assert_int_equal(sfl_algo_param_set(&v.p, "eta", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "dp_noise", 4), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "delta", 1.5), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "m", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "clip_a", 0), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "clip_r", -1), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "select", 2), SFL_EINVAL);
    assert_int_equal(testfed_try(&sfl_algo_dpbcfw, "calib", 2), SFL_EINVAL);
    /* the index noise alone does not protect a sketched run */
    {
        vrun_t w;

        vrun_open(&w, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 2, 5);
        assert_int_equal(sfl_algo_param_set(&w.p, "dp_noise", 2), 0);
        assert_int_equal(sfl_vertical_check(&w.job), SFL_EINVAL);
        assert_detail("dpbcfw: dp_noise 2 (the index noise alone) needs sketch 0");
        assert_int_equal(sfl_algo_param_set(&w.p, "sketch", 0), 0);
        assert_int_equal(sfl_vertical_check(&w.job), 0);
    }
    /* a loss without margins */
    assert_int_equal(sfl_problem_init(&v.prob, &sfl_loss_softmax, 5, 3), 0);
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    assert_detail("bcfw needs a linear loss");
    assert_int_equal(sfl_problem_init(&v.prob, &sfl_loss_lsq, 5, 0), 0);
    assert_int_equal(sfl_algo_param_set(&v.p, "sampling", 0), 0);
    vrun_start(&v);
    /* a block that is not the client's, rows that are not the job's */
    v.blk[1].col0 = 2;
    assert_int_equal(sfl_vertical_client_step(&v.job, &v.blk[1], 0, v.b, v.state[1], NULL,
                                              v.msg[1]),
                     SFL_EDIM);
    v.blk[1].col0 = 3;
    v.job.nrows = 7;
    assert_int_equal(sfl_vertical_client_step(&v.job, &v.blk[1], 0, v.b, v.state[1], NULL,
                                              v.msg[1]),
                     SFL_EDIM);
    v.job.nrows = 6;
    /* messages no client could send change nothing */
    vrun_step(&v, 0);
    double x0[5], b0[6];
    memcpy(x0, v.x, sizeof(x0));
    memcpy(b0, v.b, sizeof(b0));
    v.msg[0][0] = 4; /* client 0 holds columns 1..3 */
    assert_int_equal(v.job.algo->vertical->server_step(&v.job, 1, (const double *const *)v.msg,
                                                       v.x, v.b),
                     SFL_EINVAL);
    v.msg[0][0] = 1.5;
    assert_int_equal(v.job.algo->vertical->server_step(&v.job, 1, (const double *const *)v.msg,
                                                       v.x, v.b),
                     SFL_EINVAL);
    v.msg[0][0] = -1;
    v.msg[1][2] = NAN;
    assert_int_equal(v.job.algo->vertical->server_step(&v.job, 1, (const double *const *)v.msg,
                                                       v.x, v.b),
                     SFL_ENUMERIC);
    assert_memory_equal(v.x, x0, sizeof(x0));
    assert_memory_equal(v.b, b0, sizeof(b0));
    vrun_close(&v);
    /* private noise needs its source */
    vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 1, 5);
    vrun_start(&v);
    assert_int_equal(sfl_vertical_client_step(&v.job, &v.blk[0], 0, v.b, v.state[0], NULL,
                                              v.msg[0]),
                     SFL_EINVAL);
    assert_detail("dpbcfw: private noise needs a noise source");
    vrun_close(&v);
    /* privacy parameters the calibration refuses, before any client starts */
    vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 1, 5);
    assert_int_equal(sfl_algo_param_set(&v.p, "delta", 1), 0);
    assert_int_equal(sfl_vertical_check(&v.job), SFL_EINVAL);
    assert_detail("dpbcfw: dp: need epsilon > 0 and 0 < delta < 1");
    assert_int_equal(sfl_algo_param_set(&v.p, "dp_noise", 0), 0);
    assert_int_equal(sfl_vertical_check(&v.job), 0); /* no noise, no calibration */
    /* a sketch beyond memory */
    vrun_open(&v, &sfl_algo_dpbcfw, ds, &sfl_loss_lsq, 1, 5);
    v.job.nrows = 1u << 20;
    assert_int_equal(sfl_algo_param_set(&v.p, "m", 1024), 0);
    assert_int_equal(sfl_vertical_check(&v.job), SFL_ELIMIT);
    sfl_dataset_free(ds);
}

/* Every allocation of the common part and of a client's state fails in
 * turn: SFL_ENOMEM, nothing leaked (ASan). */
static void test_bcfw_alloc(void **state)
{
    (void)state;
    sfl_dataset_t *ds = random_data(11, 8, 6, 0), *blk;
    const sfl_vertical_ops_t *ops = sfl_algo_dpbcfw.vertical;
    void *common = NULL, *st = NULL;
    vrun_t v;

    assert_int_equal(sfl_dataset_columns(ds, 0, 3, &blk), 0);
    for (int s = 0; s < 2; s++) {
        vrun_open(&v, s ? &sfl_algo_dpbcfw : &sfl_algo_bcfw, ds, &sfl_loss_lsq, 2, 5);
        assert_int_equal(sfl_algo_param_set(&v.p, s ? "m" : "sampling", s ? 4 : 3), 0);
        FAILALLOC_EACH(ops->common_new(&v.job, &common), {
            ops->common_free(common);
            common = NULL;
        });
        assert_int_equal(ops->common_new(&v.job, &common), 0);
        v.job.common = common;
        sfl_vblock_t b = {.client = 0, .col0 = 0, .data = blk};
        FAILALLOC_EACH(ops->client_new(&v.job, &b, &st), {
            ops->client_free(st);
            st = NULL;
        });
        ops->common_free(common);
        common = NULL;
    }
    ops->client_free(NULL);
    ops->common_free(NULL);
    sfl_dataset_free(blk);
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bcfw_tables),
        cmocka_unit_test(test_bcfw_blocks),
        cmocka_unit_test(test_bcfw_oracle),
        cmocka_unit_test(test_bcfw_step_rule),
        cmocka_unit_test(test_bcfw_one_iteration_by_hand),
        cmocka_unit_test(test_bcfw_converges_lsq),
        cmocka_unit_test(test_bcfw_block_grad_finite_differences),
        cmocka_unit_test(test_bcfw_samplings),
        cmocka_unit_test(test_bcfw_deterministic),
        cmocka_unit_test(test_bcfw_dpbcfw_exact_is_bcfw),
        cmocka_unit_test(test_bcfw_sketch_close_to_exact),
        cmocka_unit_test(test_bcfw_private),
        cmocka_unit_test(test_bcfw_feature_noise),
        cmocka_unit_test(test_bcfw_account),
        cmocka_unit_test(test_bcfw_adversarial_row),
        cmocka_unit_test(test_bcfw_adversarial_feature),
        cmocka_unit_test(test_bcfw_select_calib),
        cmocka_unit_test(test_bcfw_refusals),
        cmocka_unit_test(test_bcfw_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

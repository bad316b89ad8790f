/* sfl-sim --secagg: secure aggregation's mode 2 without its cryptography
 * (docs/algorithms.md, "Secure aggregation in sfl-sim"). The pairwise and
 * self masks cancel exactly in a sum mod 2^32, so the server's view is the
 * plain sum of the quantized inputs; what is simulated is everything that
 * changes the numbers: the common support S_t, each client's top-k inside
 * it with its error-feedback residual, clipping, the weights rho_u and the
 * stochastic rounding (libsfl's savec.h, which an agent will call alike). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/algo/algo.h"
#include "sfl/crypto/savec.h"
#include "sim.h"

#define NONCE_TAG "sfl-sim-sa-nonce"
#define NONCE_TAG_LEN (sizeof(NONCE_TAG) - 1)

struct sim_sa {
    uint64_t seed;
    uint32_t d, nclients;
    uint32_t size, topk;  /* |S_t| asked for; values each client keeps */
    sfl_sa_quant_t q;
    uint32_t *support;    /* S_t, min(size, d) entries */
    uint32_t k;           /* |S_t| of this round */
    uint32_t count;       /* inputs summed this round */
    uint32_t *in, *sum;   /* one input, the round's sum: size + 1 words */
    double *w;            /* the round's inputs' public weights, npick */
    uint32_t npick;
    double *delta, *vals; /* d, size */
    double *mean;         /* d: the decoded mean change */
    double **resid;       /* per client, d entries, made when it first trains */
    sfl_topk_ws_t ws;
    /* for the summary line */
    uint64_t nvals, nclipped;
    double vmax;
};

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (int b = 0; b < 8; b++)
        p[b] = (uint8_t)(v >> (8 * b));
}

sim_sa_t *sim_sa_new(const sim_cfg_t *cfg, const sfl_algo_params_t *p,
                     const sfl_problem_t *prob, uint32_t nclients, double w_big, uint32_t npick)
{
    sim_sa_t *s = sim_xcalloc(1, sizeof(*s));
    uint64_t k, size;
    int rc;

    if (prob->dim > UINT32_MAX)
        sim_usage_error("--secagg: the model has more than 2^32-1 entries", NULL);
    if (sodium_init() < 0)
        sim_die("--secagg", SFL_EUNSUP);
    s->seed = cfg->seed;
    s->d = (uint32_t)prob->dim;
    s->nclients = nclients;
    /* k: the model's nonzeros as the algorithm bounds them (tau per block),
     * else every entry (a dense algorithm such as FedAvg). */
    k = sfl_algo_params_tau(p) ? (uint64_t)sfl_algo_params_tau(p) * prob->nblocks : s->d;
    if (k > s->d)
        k = s->d;
    size = cfg->sa_support ? cfg->sa_support : 2 * k;
    s->size = size < s->d ? (uint32_t)size : s->d;
    s->topk = cfg->sa_topk ? cfg->sa_topk : (uint32_t)k;
    if ((rc = sfl_sa_quant_init(&s->q, cfg->sa_clip, cfg->sa_wmax > 0 ? cfg->sa_wmax : w_big,
                                npick)) < 0) {
        fprintf(stderr, "sfl-sim: error: --secagg: %s\n", sfl_error_message(rc));
        exit(2);
    }
    s->support = sim_xcalloc(s->size, sizeof(uint32_t));
    s->in = sim_xcalloc((size_t)s->size + 1, sizeof(uint32_t));
    s->sum = sim_xcalloc((size_t)s->size + 1, sizeof(uint32_t));
    s->npick = npick;
    s->w = sim_xcalloc(npick ? npick : 1, sizeof(double));
    s->delta = sim_xcalloc(s->d, sizeof(double));
    s->vals = sim_xcalloc(s->size, sizeof(double));
    s->mean = sim_xcalloc(s->d, sizeof(double));
    s->resid = sim_xcalloc(nclients, sizeof(double *));
    sfl_topk_ws_init(&s->ws);
    if ((rc = sfl_topk_ws_reserve(&s->ws, s->size)) < 0)
        sim_die("--secagg", rc);
    return s;
}

void sim_sa_begin(sim_sa_t *s, uint32_t t, const double *global)
{
    /* The stand-in for the coordinator's signed round nonce: public, fresh
     * per round, the same for every client. */
    uint8_t in[NONCE_TAG_LEN + 16], nonce[SFL_SA_NONCE_BYTES];
    int rc;

    memcpy(in, NONCE_TAG, NONCE_TAG_LEN);
    put_u64le(in + NONCE_TAG_LEN, s->seed);
    put_u64le(in + NONCE_TAG_LEN + 8, t);
    crypto_generichash(nonce, sizeof nonce, in, sizeof in, NULL, 0);
    if ((rc = sfl_sa_support(global, s->d, s->size, nonce, s->support, &s->k)) < 0)
        sim_die("--secagg: support", rc);
    memset(s->sum, 0, ((size_t)s->k + 1) * sizeof(uint32_t));
    s->count = 0;
}

uint64_t sim_sa_add(sim_sa_t *s, uint32_t t, uint32_t c, const double *bcast,
                    const sfl_spvec_t *update, double weight)
{
    sfl_rng_t r;
    int rc;

    if (s->resid[c] == NULL)
        s->resid[c] = sim_xcalloc(s->d, sizeof(double));
    /* The algorithm's message is model-like (its weighted mean is what the
     * fold takes), so the change is the message less the broadcast. */
    memset(s->delta, 0, s->d * sizeof(double));
    sfl_spvec_scatter(update, s->delta);
    for (uint32_t j = 0; j < s->d; j++)
        s->delta[j] -= bcast[j];
    sfl_rng_seed(&r, s->seed, t, c, SFL_STREAM_SECAGG);
    rc = sfl_sa_client_vector(&s->q, s->delta, s->resid[c], s->d, s->support, s->k, s->topk,
                              weight, &r, &s->ws, s->vals, s->in);
    if (rc < 0) {
        fprintf(stderr, "\nsfl-sim: error: round %u client %u: --secagg: %s\n", t, c,
                sfl_error_message(rc));
        exit(1);
    }
    for (uint32_t i = 0; i < s->k; i++) {
        double a = fabs(s->vals[i]);

        s->nvals += a != 0.0;
        s->nclipped += a > s->q.clip;
        if (a > s->vmax)
            s->vmax = a;
    }
    if (s->count >= s->npick) {
        fprintf(stderr, "\nsfl-sim: error: round %u: --secagg: more than %u inputs\n", t,
                s->npick);
        exit(1);
    }
    for (uint32_t i = 0; i < s->k + 1; i++)
        s->sum[i] += s->in[i]; /* mod 2^32, as the masked sum */
    s->w[s->count++] = weight; /* public, as the coordinator's */
    /* What the masked vector weighs on the wire: k values and the canary
     * of 4 bytes and the metric words (sfl/crypto/savec.h; the keys, shares and
     * signatures of the protocol are not counted). */
    return 4 * ((uint64_t)s->k + SFL_SA_EXTRA_WORDS);
}

void sim_sa_finish(sim_sa_t *s, const double *global, sfl_spvec_t *out)
{
    double wsum;
    int rc = sfl_sa_server_mean(&s->q, s->sum, s->support, s->k, s->count, s->w, s->d,
                                s->mean, &wsum);

    if (rc < 0)
        sim_die("--secagg: the server's sum", rc);
    for (uint32_t j = 0; j < s->d; j++)
        s->mean[j] += global[j];
    if ((rc = sfl_spvec_from_dense(out, s->mean)) < 0)
        sim_die("--secagg", rc);
}

void sim_sa_summary(const sim_sa_t *s, FILE *f)
{
    fprintf(f,
            "sfl-sim: secagg: |S_t|=%u topk=%u clip=%g f=%d w_max=%g n_max=%u: "
            "%llu of %llu nonzero values sent were clipped, the largest |v| %.4g\n",
            s->size, s->topk, s->q.clip, (int)s->q.frac, s->q.w_max, s->q.n_max,
            (unsigned long long)s->nclipped, (unsigned long long)s->nvals, s->vmax);
}

void sim_sa_free(sim_sa_t *s)
{
    if (s == NULL)
        return;
    for (uint32_t c = 0; c < s->nclients; c++)
        free(s->resid[c]);
    free(s->resid);
    sfl_topk_ws_close(&s->ws);
    free(s->mean);
    free(s->vals);
    free(s->delta);
    free(s->sum);
    free(s->w);
    free(s->in);
    free(s->support);
    free(s);
}

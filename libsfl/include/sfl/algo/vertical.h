/* The vertical shape (docs/design.md section 3, "Shapes"): K clients hold
 * disjoint column blocks of the same n samples, aligned by sample id, and a
 * job is T short iterations among all of them (DP-BCFW, seed 003, Alg. 2).
 *
 * One iteration t = 0, 1, ..., T - 1:
 *   every client k:  msg_k = client_step(job, block_k, t, b)     (pure)
 *   the server:      (x, b) = server_step(job, t, msg_1..msg_K)  (client order)
 * where b is the broadcast (bcast_len doubles, DP-BCFW's q-hat), msg_k the
 * client's answer (msg_len doubles; its first msg_ints entries are integers,
 * sent as 32-bit, the rest float64) and x the model (the problem's dim
 * entries), which stays at the server. Both start at 0. Two drivers call
 * the table: sfl-sim's vertical loop (virtual clients in one process) and
 * the coordinator's vertical round with its agents.
 *
 * What each party derives on its own, never sent:
 *   common  from the job alone (seed, sizes, parameters): DP-BCFW's sketch
 *           J. Identical at every party, read-only; a simulation makes it
 *           once for all its virtual clients.
 *   client state  from the job and the party's block (its columns
 *           transposed, scratch). It holds nothing learned, so an agent
 *           that restarts rebuilds it.
 *
 * Determinism: every draw comes from the sfl_vrng_t the driver hands in,
 * seeded by sfl_vertical_rng_seed from (job seed, t, k); the privacy noise
 * from its sfl_dp_rng_t (seeded in sfl-sim, secure on an agent). Same
 * inputs, same bits. */
#ifndef SFL_VERTICAL_H
#define SFL_VERTICAL_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/algo/algo.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sfl_dp_acct;
struct sfl_dp_rng;
struct sfl_dp_spent;

/* A vertical job as every party knows it (all borrowed). */
typedef struct sfl_vjob {
    const sfl_algo_t *algo;      /* its shape is SFL_SHAPE_VERTICAL */
    const sfl_algo_params_t *p;
    const sfl_problem_t *prob;   /* ncols: d, the features of all blocks */
    uint32_t nrows;              /* n: the aligned samples */
    uint32_t nclients;           /* K: the block holders, 1 <= K <= d */
    uint64_t iters;              /* T: iterations of the whole job (privacy
                                    noise spends epsilon over T of them) */
    uint64_t seed;               /* the job's seed */
    const void *common;          /* from vertical->common_new; NULL if none */
} sfl_vjob_t;

/* One client's block. */
typedef struct sfl_vblock {
    uint32_t client;            /* k in [0, K) */
    uint32_t col0;              /* its first column of the problem; it holds
                                   [col0, col0 + data->X->ncols) */
    const sfl_dataset_t *data;  /* its columns of the n rows, in sample-id
                                   order, with the targets (every block
                                   holder has them, Table V); borrowed */
} sfl_vblock_t;

/* The randomness of one client's step. */
typedef struct sfl_vrng {
    sfl_rng_t common;           /* the same stream at every client in the
                                   iteration (a tau-nice sample of [d]) */
    sfl_rng_t own;              /* this client's alone */
    struct sfl_dp_rng *noise;   /* privacy noise (borrowed; NULL: the
                                   algorithm must not need any) */
} sfl_vrng_t;

/* What a client's clipping changed (DP-BCFW, dp_noise 1 and 2). */
typedef struct sfl_vclip {
    uint64_t rows;           /* rows of its block with an entry clipped */
    uint64_t entries;        /* entries of its block clipped */
    uint64_t residuals;      /* residuals clipped, over all its iterations */
    uint64_t residuals_seen; /* residuals computed, over all its iterations */
} sfl_vclip_t;

typedef struct sfl_vertical_ops {
    /* Entries of the broadcast and of one client's message. */
    size_t (*bcast_len)(const sfl_vjob_t *job);
    size_t (*msg_len)(const sfl_vjob_t *job);
    /* The leading entries of a message that are integers (sent as int32). */
    uint32_t msg_ints;
    /* Iterations per round (a driver's progress and CSV unit). */
    uint32_t (*steps)(const sfl_algo_params_t *p);
    /* The algorithm's own checks of a job (after the table's ranges):
     * SFL_EINVAL with a detail. Optional. */
    int (*check)(const sfl_vjob_t *job);
    /* Optional: the common object (owned; free with common_free). */
    int (*common_new)(const sfl_vjob_t *job, void **common);
    void (*common_free)(void *common);
    /* The client state (owned; free with client_free, which takes NULL). */
    int (*client_new)(const sfl_vjob_t *job, const sfl_vblock_t *blk, void **state);
    void (*client_free)(void *state);
    /* Iteration t's answer of block blk to the broadcast bcast: msg
     * (msg_len entries, replaced). Pure: no I/O, draws only from rng, the
     * state is scratch. */
    int (*client_step)(const sfl_vjob_t *job, const sfl_vblock_t *blk, uint64_t t,
                       const double *bcast, void *state, sfl_vrng_t *rng, double *msg);
    /* Iteration t's end: msgs[k] is client k's answer; global (the model)
     * and bcast are in, the state before, and out, the state after. A
     * message no client could have sent (an index out of range, a
     * non-finite value) is SFL_EINVAL / SFL_ENUMERIC and changes nothing. */
    int (*server_step)(const sfl_vjob_t *job, uint64_t t, const double *const *msgs,
                       double *global, double *bcast);
    /* Optional (NULL: the algorithm releases nothing private). Records
     * into acct (initialised by the caller; borrowed) the mechanisms that
     * iters iterations of the whole job release, all K clients together,
     * with the scales client_step draws with. Returns 1 if the job
     * releases private noise (iters == 0 records nothing), 0 if it
     * releases none (nothing recorded), < 0 on error (acct unchanged).
     * May need job->common (DP-BCFW's sigma(J) when sketched): SFL_EINVAL
     * without it. */
    int (*account)(const sfl_vjob_t *job, uint64_t iters, struct sfl_dp_acct *acct);
    /* Optional (NULL: nothing is clipped): the counts of a client state's
     * clipping so far, into *out (replaced). */
    void (*clipped)(const void *state, sfl_vclip_t *out);
    /* Optional (NULL: never). The objective f(x) = mean_j l(a^j' x, y_j)
     * at the model x the broadcast bcast stands for, from block blk's
     * targets, when bcast is exactly the margins A x and releasing f costs
     * no privacy (BCFW-AS, DP-BCFW unsketched and without noise): *f and 1.
     * 0 when the broadcast cannot give it (a sketch J A x, or noisy), < 0
     * on error. Pure. */
    int (*objective)(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                     double *f);
} sfl_vertical_ops_t;

extern const sfl_algo_t sfl_algo_bcfw;
extern const sfl_algo_t sfl_algo_dpbcfw;

/* Client k's columns of d split among K as eq. 11 does, balanced: the
 * first d mod K blocks have one column more. SFL_EINVAL unless
 * 1 <= K <= d and k < K. */
int sfl_vertical_block(uint32_t d, uint32_t K, uint32_t k, uint32_t *col0,
                       uint32_t *len) SFL_MUST_CHECK;

/* Checks job: a vertical algorithm, parameters filled for it and in their
 * table ranges, a linear loss (lsq, logistic, sqhinge), no dictionary,
 * n >= 1, 1 <= K <= d, T >= 1, then the algorithm's own check. SFL_EUNSUP
 * for a horizontal algorithm, SFL_EINVAL otherwise, with a detail. */
int sfl_vertical_check(const sfl_vjob_t *job) SFL_MUST_CHECK;

/* The streams of client k's step in iteration t of a job seeded with seed:
 * common (seed, t, SFL_VERTICAL_COMMON, SFL_STREAM_TRAIN), own (seed, t,
 * k, SFL_STREAM_TRAIN); noise is borrowed. */
#define SFL_VERTICAL_COMMON UINT64_MAX
void sfl_vertical_rng_seed(sfl_vrng_t *r, uint64_t seed, uint64_t t, uint32_t k,
                           struct sfl_dp_rng *noise);

/* One client's step as both drivers run it: checks the block against the
 * job (its columns, its rows), seeds the streams and calls client_step. */
int sfl_vertical_client_step(const sfl_vjob_t *job, const sfl_vblock_t *blk, uint64_t t,
                             const double *bcast, void *state, struct sfl_dp_rng *noise,
                             double *msg) SFL_MUST_CHECK;

/* The objective a block holder can report at the model bcast stands for
 * (the ops' objective, checked: the block against the job, a finite
 * value): 1 and *f, 0 when the job's broadcast cannot give it (*f = 0). */
int sfl_vertical_objective(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                           double *f) SFL_MUST_CHECK;

/* The delta of job's privacy guarantee: its algorithm's `delta`
 * parameter, or 1/n when that is 0 or absent. */
double sfl_vertical_delta(const sfl_vjob_t *job);

/* What iters iterations of job (all K clients) spend, both accountings of
 * sfl/dp/dp.h at sfl_vertical_delta(job): *spent (replaced) and *is_private
 * = 1; all zeros and *is_private = 0 when the job releases nothing
 * private (no account op, or no noise). Zeros with *is_private = 1 for
 * iters == 0. For DP-BCFW with dp_noise 1, eps_paper after job->iters
 * iterations gives back the job's epsilon (with 2, about the index's
 * half of it; with 3, eps_rdp shows that it is not private). Errors of
 * the account op (SFL_EINVAL: a sketched job without job->common;
 * SFL_ERANGE: iters above 2^32 - 1) leave *spent zero, *is_private 0. */
int sfl_vertical_privacy(const sfl_vjob_t *job, uint64_t iters, struct sfl_dp_spent *spent,
                         int *is_private) SFL_MUST_CHECK;

/* The epsilon of *spent that job is calibrated by, the one to hold a
 * budget against: eps_rdp_tight when its `calib` parameter is 1 (the noise
 * scaled to the RDP accountant), else eps_paper (the paper's accounting). */
double sfl_vertical_budget_eps(const sfl_vjob_t *job, const struct sfl_dp_spent *spent);

/* Bytes of one client's message on the wire (msg_ints int32, the rest
 * float64) and of one copy of the broadcast (float64). */
size_t sfl_vertical_msg_bytes(const sfl_vjob_t *job);
size_t sfl_vertical_bcast_bytes(const sfl_vjob_t *job);

/* DP-BCFW's pieces (bcfw.c), public for tests. */

/* The step size gamma^t = 2 / (p_min t + 2) (Sec. III-D). */
double sfl_bcfw_step(double pmin, uint64_t t);
/* p_min of job's sampling: elementary 1, tau-nice tau/d, (K, tau)-
 * distributed min(1, tau / largest block), importance a lower bound,
 * min(1, mix tau / largest block) (bcfw.c). */
double sfl_bcfw_pmin(const sfl_vjob_t *job);
/* The partial linear oracle of eq. 12 over the sampled coordinates
 * sample[0..ns) (local indices) of a block whose gradient is g: the
 * coordinate i of largest |g_i| (the first on ties) and the l1 ball's
 * vertex -sign(g_i) eta e_i, returned as the signed 1-based column of the
 * problem, -sign(g_i) (col0 + i + 1) (sign(0) = +1); 0 if ns == 0.
 * sample == NULL means all of 0..ns. */
double sfl_bcfw_oracle(const double *g, const uint32_t *sample, uint32_t ns, uint32_t col0);
/* The per-row derivatives of the loss at the margins m (n of them):
 * r_j = l'(m_j, y_j) / n, so that the partial gradient of column a_i is
 * a_i' r (Table V). SFL_EUNSUP for a loss without margin_loss. */
int sfl_bcfw_residual(const sfl_loss_t *loss, const double *m, const double *y, uint32_t n,
                      double *r) SFL_MUST_CHECK;
/* The LO values eta g_i of every column of block blk (local order, into
 * scores[0..len)) at broadcast bcast, as client state (from client_new of
 * bcfw or dpbcfw; scratch) computes them before any noise: the scores the
 * index's sensitivity bounds (clipped in dp_noise 1 and 2). For tests and
 * audits. */
int sfl_bcfw_scores(const sfl_vjob_t *job, const sfl_vblock_t *blk, const double *bcast,
                    void *state, double *scores) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

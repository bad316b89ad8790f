/* The weighted fold every algorithm's aggregation goes through
 * (docs/design.md section 3, docs/security.md).
 *
 * A round's updates are folded into one dense sum, each scaled by its
 * weight (the samples the client declared), in the order given:
 *   sum += w_i u_i,  weight_sum += w_i.
 * Then the algorithm's finish hook (sfl_algo_t.finish) turns the sum into
 * the next global state: the weighted mean, thresholded, a server step...
 * O(dim) memory whatever the number of updates. The coordinator (server/
 * job.c) and sfl-sim share this code, so validation happens here, once, for
 * every algorithm: an update is refused before it touches the sum when a
 * value is not finite, its l2 norm is above the job's bound, or its weight
 * is not in (0, max_weight]. A refused update leaves the fold as it was,
 * so the other clients' updates still make a round.
 *
 * The fold is the seam where other aggregators plug in (a robust mean, or
 * secure aggregation's modular sum): only begin/add/finish see updates. */
#ifndef SFL_FOLD_H
#define SFL_FOLD_H

#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/topk.h"
#include "sfl/core/vec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sfl_algo;
struct sfl_algo_params;
struct sfl_problem;

/* Defaults for a job that sets no bound (0). Far above any honest update
 * of our experiments (models and changes of norm < 1e4; a device's rows <
 * 1e7), far below overflow: 1e4 clients x 1e9 x 1e8 = 1e21 per entry. */
#define SFL_FOLD_MAX_NORM 1e8
#define SFL_FOLD_MAX_WEIGHT 1e9

typedef struct sfl_fold_limits {
    double max_norm;   /* l2 norm of one update; 0 = SFL_FOLD_MAX_NORM */
    double max_weight; /* weight (declared samples) of one update; 0 = default */
} sfl_fold_limits_t;

typedef struct sfl_fold {
    const struct sfl_algo *algo;
    const struct sfl_algo_params *params; /* borrowed */
    const struct sfl_problem *prob;       /* borrowed */
    sfl_fold_limits_t limits;             /* the defaults filled in */
    double *sum;                          /* dim entries */
    double weight_sum;
    uint32_t count;
    sfl_topk_ws_t topk; /* for finish hooks that threshold */
    uint32_t *cursor;   /* sfl_fold_add_many's per-update positions, kept */
    size_t ncursor;     /* across rounds; grown to the largest batch */
} sfl_fold_t;

/* One update of a batch for sfl_fold_add_many; update NULL = none (an
 * empty cohort slot), skipped. */
typedef struct sfl_fold_item {
    sfl_spvec_t *update; /* not modified */
    double weight;
} sfl_fold_item_t;

/* Entries of the sum one sweep of sfl_fold_add_many works on (64 KiB of
 * doubles: the tile stays in L1-L2 while every update's pairs in it are added). */
#define SFL_FOLD_TILE 8192u
/* Sums of at most this many entries (1 MiB: they stay in L2 anyway) are
 * added update by update. */
#define SFL_FOLD_TILED_DIM 131072u

/* Allocates the O(dim) sum; lim NULL = the defaults. SFL_EINVAL for a
 * negative or non-finite bound. */
int sfl_fold_init(sfl_fold_t *f, const struct sfl_algo *a, const struct sfl_algo_params *p,
                  const struct sfl_problem *prob, const sfl_fold_limits_t *lim) SFL_MUST_CHECK;
void sfl_fold_close(sfl_fold_t *f);
/* Empties the sum for a new round. */
void sfl_fold_begin(sfl_fold_t *f);
/* What sfl_fold_add would refuse, without adding: SFL_EDIM (dimension),
 * SFL_EINVAL (weight not positive and finite), SFL_ELIMIT (weight or norm
 * above the bound), SFL_ENUMERIC (a value not finite), with a detail such
 * as "update norm 1e+300 is above the job's max_update_norm 1e+08". */
int sfl_fold_check(const sfl_fold_t *f, const sfl_spvec_t *update,
                   double weight) SFL_MUST_CHECK;
/* The same checks without a fold: against dimension dim and lim (its
 * zeros the defaults). For a front-end that checks what the master will
 * (docs/operations.md "Front-ends", fold mode). */
int sfl_fold_check_limits(const sfl_fold_limits_t *lim, size_t dim, const sfl_spvec_t *update,
                          double weight) SFL_MUST_CHECK;
/* sfl_fold_check, then sum += weight * update. On failure nothing changes. */
int sfl_fold_add(sfl_fold_t *f, const sfl_spvec_t *update, double weight) SFL_MUST_CHECK;
/* sfl_fold_add of items[0], items[1], ... in that order, bit for bit: every
 * entry of the sum gets the same products weight * value added in the same
 * order. Every item is checked first; on a failure nothing changes. A sum
 * of more than SFL_FOLD_TILED_DIM entries is swept SFL_FOLD_TILE entries at
 * a time, each tile taking every update's pairs that fall in it (indices
 * are increasing), so the scatter-add hits cache instead of memory. The
 * per-update cursors are kept in the fold (grown, never shrunk; SFL_ENOMEM
 * when growing fails, nothing changed). n = 0 (or only NULL updates) adds
 * nothing. */
int sfl_fold_add_many(sfl_fold_t *f, const sfl_fold_item_t *items, size_t n) SFL_MUST_CHECK;
/* A partial sum folded elsewhere (a front-end's group, fold mode): sum +=
 * psum (dense, dim entries), weight_sum += weight, count += n. Checked
 * first, nothing changed on failure: n >= 1; weight positive, finite and
 * at most n x max_weight; every value finite (SFL_ENUMERIC); ||psum|| at
 * most max_norm x weight (SFL_ELIMIT): the triangle bound of n updates of
 * norm <= max_norm weighted by w_i summing to weight, so a partial cannot
 * move the sum further than its members could have. */
int sfl_fold_add_partial(sfl_fold_t *f, const double *psum, double weight,
                         uint32_t n) SFL_MUST_CHECK;
/* global: in, the state of the round; out, the algorithm's finish of the
 * sum. SFL_EEMPTY when nothing was added. */
int sfl_fold_finish(sfl_fold_t *f, double *global) SFL_MUST_CHECK;

/* Finish hooks the algorithms share: the weighted mean sum / weight_sum,
 * and the mean hard-thresholded to tau per block. */
int sfl_fold_mean(sfl_fold_t *f, double *global) SFL_MUST_CHECK;
int sfl_fold_mean_ht(sfl_fold_t *f, double *global) SFL_MUST_CHECK;
/* The personalized algorithms' server step (FedMac, pFedMe, Per-FedAvg):
 * w <- (1 - beta) w + beta sum / weight_sum, beta the algorithm's
 * parameter "beta" (1 if it has none). */
int sfl_fold_mix(sfl_fold_t *f, double *global) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

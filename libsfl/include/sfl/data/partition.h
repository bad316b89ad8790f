/* Splitting one dataset's rows among clients (non-IID federations). */
#ifndef SFL_PARTITION_H
#define SFL_PARTITION_H

#include <stdint.h>

#include "sfl/data/csr.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Client c owns rows[offset[c] .. offset[c+1]), ascending. */
typedef struct sfl_partition {
    uint32_t nclients;
    uint32_t *offset; /* nclients + 1 */
    uint32_t *rows;   /* offset[nclients] row ids */
} sfl_partition_t;

void sfl_partition_free(sfl_partition_t *p);

/* IID: a uniform shuffle cut into nclients near-equal parts. */
int sfl_partition_iid(uint32_t nrows, uint32_t nclients, sfl_rng_t *rng,
                      sfl_partition_t **out) SFL_MUST_CHECK;

/* Group skew (001 Sec. 5.2): the rows of each group (class label or cluster
 * id, group[i] in [0, ngroups)) are shuffled and cut into nparts equal parts;
 * each client takes one part from each of per_client distinct groups, chosen
 * at random among the groups with parts left (restricted, when needed, so
 * that no later client is left without per_client distinct groups). Unused
 * parts are left out. Requires per_client <= ngroups and
 * nclients * per_client <= ngroups * nparts; otherwise SFL_EINVAL. */
int sfl_partition_group_skew(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                             uint32_t nclients, uint32_t nparts, uint32_t per_client,
                             sfl_rng_t *rng, sfl_partition_t **out) SFL_MUST_CHECK;

/* Dirichlet(alpha) label skew: for each class, proportions over clients are
 * drawn from Dir(alpha) and the class's shuffled rows cut accordingly. */
int sfl_partition_dirichlet(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                            uint32_t nclients, double alpha, sfl_rng_t *rng,
                            sfl_partition_t **out) SFL_MUST_CHECK;

/* pFedMe's non-IID label split (Dinh et al. 2020; FedMac, seed 002 Sec.
 * 5.1): client c holds the per_client groups c, c+1, ... (mod ngroups), so
 * with 20 clients, 10 labels and 2 per client each label has 4 holders.
 * Each group's shuffled rows go to its holders: min_rows to each first (or
 * an equal share when the group is smaller), then the rest in proportions
 * exp(sigma N(0,1)) drawn per holder (lognormal), so clients differ in
 * size. Rows of a group nobody holds are left out. SFL_EINVAL unless
 * 0 < per_client <= ngroups, nclients > 0 and sigma finite >= 0. */
int sfl_partition_labels(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                         uint32_t nclients, uint32_t per_client, uint32_t min_rows,
                         double sigma, sfl_rng_t *rng, sfl_partition_t **out) SFL_MUST_CHECK;

/* pFedMe's 2020 MNIST generator replayed (CharlieDinh/pFedMe,
 * data/Mnist/generate_niid_20users.py as of May 2020, before the June 2021
 * fix): client c holds groups c, c+1, ... (mod ngroups) as above, but its
 * rows of group g are a PREFIX of g's rows in file order, so clients that
 * share a group get overlapping copies of the same rows. Sizes: for each
 * group, with h holders and total its row count, h - 1 draws
 * randint(total / (h + 1), total / 2) (total shrinking by each draw) and the
 * remainder; the draws are read out holder-major across groups (draw 0 of
 * every group, then draw 1, ...) and handed to (client, slot) pairs in
 * order, so a client's size for one group may come from another group's
 * draws, as in the script. The prefix starts at row 1 instead of 0 once a
 * group has been handed out (the script's idx is a boolean mask, and
 * idx[g] += n sets it to True) and, for the first holder, iff the row at
 * position g of the pool is in the last group (the mask's entry). A slot
 * whose prefix would reach the end of its group is skipped (the script's
 * check). Rows repeat across clients (never within one); each client's rows
 * ascend. What the script does not replay: its y list is longer than its X
 * list by the skipped first row, so one row per client is mislabelled (see
 * docs/algorithms.md). SFL_EINVAL as sfl_partition_labels. */
int sfl_partition_pfedme2020(const uint32_t *group, uint32_t nrows, uint32_t ngroups,
                             uint32_t nclients, uint32_t per_client, sfl_rng_t *rng,
                             sfl_partition_t **out) SFL_MUST_CHECK;

/* k-means (k-means++ seeding, Lloyd iterations until no row moves or
 * max_iter) on the rows of X; cluster[i] receives the cluster id of row i.
 * Requires 1 <= k <= X->nrows. Deterministic for a given rng state. */
int sfl_kmeans(const sfl_csr_t *X, uint32_t k, uint32_t max_iter, sfl_rng_t *rng,
               uint32_t *cluster) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

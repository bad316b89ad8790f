/* A labelled dataset: features as CSR rows plus one target per row.
 *
 * Regression: y holds real targets and nclasses == 0.
 * Classification: after sfl_dataset_encode_labels, y holds class ids
 * 0..nclasses-1 (as doubles) and labels[c] the original label value of
 * class c, ascending; binary problems have nclasses == 2 (class 1 is the
 * larger original label, e.g. +1 of {-1,+1}). */
#ifndef SFL_DATASET_H
#define SFL_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/csr.h"
#include "sfl/core/error.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_dataset {
    sfl_csr_t *X;     /* owned */
    double *y;        /* X->nrows targets, owned */
    uint32_t nclasses;/* 0 = regression */
    double *labels;   /* nclasses original label values, owned (NULL if 0) */
} sfl_dataset_t;

/* Takes X and y (both must come from the sfl allocator), even on failure;
 * returns owned. Fails on an invalid X or a non-finite target. */
int sfl_dataset_new(sfl_csr_t *X, double *y, sfl_dataset_t **out) SFL_MUST_CHECK;
void sfl_dataset_free(sfl_dataset_t *ds);
/* Maps distinct target values to class ids; fails with SFL_ELIMIT when there
 * are more than max_classes distinct values (a regression file read as
 * classification, say). */
int sfl_dataset_encode_labels(sfl_dataset_t *ds, uint32_t max_classes) SFL_MUST_CHECK;
/* New dataset of rows[0..n) (copies; label coding kept). */
int sfl_dataset_subset(const sfl_dataset_t *ds, const uint32_t *rows, uint32_t n,
                       sfl_dataset_t **out) SFL_MUST_CHECK;
/* New dataset of columns [col0, col0 + len) of ds, renumbered from 0, with
 * every row, the targets and the label coding (copies): one client's block
 * of a feature-partitioned (vertical) job. SFL_EINVAL if the range is not
 * inside ds's columns. */
int sfl_dataset_columns(const sfl_dataset_t *ds, uint32_t col0, uint32_t len,
                        sfl_dataset_t **out) SFL_MUST_CHECK;
/* New dataset of all rows of parts[0..n), in order (copies). All parts must
 * have the same column count and label coding; SFL_EDIM / SFL_EINVAL with a
 * detail otherwise, SFL_EINVAL for n == 0. */
int sfl_dataset_concat(sfl_dataset_t *const *parts, uint32_t n, sfl_dataset_t **out) SFL_MUST_CHECK;
/* Random split: a fraction test_frac of the rows (rounded down, at least one
 * row stays in train) goes to *test, the rest to *train, each in original
 * order. test_frac == 0 gives *test == NULL. */
int sfl_dataset_split(const sfl_dataset_t *ds, double test_frac, sfl_rng_t *rng,
                      sfl_dataset_t **train, sfl_dataset_t **test) SFL_MUST_CHECK;
/* Limits every reader enforces before allocating. On malformed input a reader
 * fails with SFL_EPARSE (or SFL_ELIMIT) and sets sfl_last_error() to
 * "NAME:LINE:COL: what was wrong" (1-based). */
typedef struct sfl_read_limits {
    uint32_t max_rows;     /* default 10,000,000 */
    uint32_t max_cols;     /* largest feature index / column count; default 1<<26 */
    size_t max_nnz;        /* default 1<<31 */
    size_t max_line;       /* bytes per line; default 64 MiB */
} sfl_read_limits_t;

/* Fills in the defaults above. */
void sfl_read_limits_default(sfl_read_limits_t *lim);

/* A data file named by a spec, as sfl-sim's --data and the agent's data
 * take it: "libsvm:FILE", "csv:FILE" (numeric, label in the first column)
 * or "idx:IMAGES,LABELS" (IDX images and labels such as MNIST's, gzip or
 * not: sfl/data/idx.h). The column count is widened to min_cols at least; lim
 * may be NULL. SFL_EINVAL, naming the forms, for another spec. */
int sfl_dataset_read(const char *spec, uint32_t min_cols, const sfl_read_limits_t *lim,
                     sfl_dataset_t **out) SFL_MUST_CHECK;
/* 0 if spec has one of those forms (the files are not opened), SFL_EINVAL
 * naming the forms otherwise. */
int sfl_dataset_spec_check(const char *spec) SFL_MUST_CHECK;
#define SFL_DATASET_SPEC_FORMS "libsvm:FILE, csv:FILE or idx:IMAGES,LABELS"

/* Widen (never narrow) the column count, e.g. so a test file that happens
 * not to use the last feature matches its training file. */
int sfl_dataset_set_ncols(sfl_dataset_t *ds, uint32_t ncols) SFL_MUST_CHECK;

/* Per-feature standardisation, x -> (x - mu) * scale with scale = 1 / (sigma +
 * eps) (pFedMe's MNIST preprocessing with eps = 0.001). The statistics come
 * from moments: a vector m of 1 + 2 d doubles, m[0] the row count, m[1 + j]
 * the sum of feature j, m[1 + d + j] the sum of its squares. Moments add
 * (sums of several datasets' vectors are the pooled data's), so a federation
 * can aggregate them like an update without any row leaving its owner. */
#define SFL_MOMENTS_LEN(d) (1 + 2 * (size_t)(d))
#define SFL_STANDARDIZE_EPS 0.001
/* m[0 .. SFL_MOMENTS_LEN(d)) += ds's moments over its first d columns (columns
 * at or beyond d are ignored; d may exceed ds's column count). */
int sfl_dataset_moments(const sfl_dataset_t *ds, uint32_t d, double *m) SFL_MUST_CHECK;
/* mu[j] = m's mean of feature j, scale[j] = 1 / (sigma_j + eps), sigma_j the
 * population standard deviation (numpy's std, ddof 0). SFL_EINVAL when m[0] <
 * 1, m is not finite, a sum of squares is negative or eps is not > 0. */
int sfl_moments_standardizer(const double *m, uint32_t d, double eps, double *mu,
                             double *scale) SFL_MUST_CHECK;
/* Replaces ds's features by (x - mu) * scale over columns [0, d) (d must equal
 * ds's column count): the result is dense where mu != 0, exact zeros stay
 * implicit. SFL_EDIM for another d, SFL_ENUMERIC for non-finite mu or scale. */
int sfl_dataset_standardize(sfl_dataset_t *ds, uint32_t d, const double *mu,
                            const double *scale) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

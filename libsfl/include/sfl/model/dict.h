/* Dictionaries: models sparse in a set of atoms (seed 004, Sec. II, IV-D).
 *
 * A dictionary is a dense n x m matrix A whose columns are the atoms; a model
 * x in R^n is tau-sparse w.r.t. A when x = A c with c tau-sparse. n is the
 * number of features (prob->ncols); softmax models apply A to each class
 * block, so the coefficient state has nclasses blocks of m.
 *
 * Storage is column-major: atom j is a[j*n .. j*n + n), contiguous, which is
 * what A^T r (one dot per atom) and LAPACK want.
 *
 * The standard basis needs no dictionary: prob->dict == NULL. */
#ifndef SFL_DICT_H
#define SFL_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_dict {
    uint32_t n; /* atom length: the model's features */
    uint32_t m; /* number of atoms */
    double *a;  /* n * m entries, column-major (atom j at a + j * n), owned */
} sfl_dict_t;

/* Default cap on n * m for sfl_dict_parse / sfl_dict_read (512 MiB of
 * doubles). */
#define SFL_DICT_MAX_ENTRIES ((size_t)1 << 26)

/* Returns owned (free with sfl_dict_free) an all-zero n x m dictionary.
 * n or m == 0 is SFL_EINVAL. */
int sfl_dict_new(uint32_t n, uint32_t m, sfl_dict_t **out) SFL_MUST_CHECK;
/* The n x n identity (the standard basis, spelled out; NULL is cheaper). */
int sfl_dict_identity(uint32_t n, sfl_dict_t **out) SFL_MUST_CHECK;
/* n x m with independent N(0, 1/n) entries (Sec. IV-D), drawn from rng in
 * column-major order. */
int sfl_dict_gaussian(uint32_t n, uint32_t m, sfl_rng_t *rng, sfl_dict_t **out) SFL_MUST_CHECK;
void sfl_dict_free(sfl_dict_t *d);

/* Text format: first line "n m" (two positive integers), then n lines of m
 * numbers each, row i of A on line i (numpy.savetxt's layout); blank and
 * space/tab separated; empty lines and lines starting with '#' are skipped.
 * n * m above max_entries (0 = SFL_DICT_MAX_ENTRIES) is SFL_ELIMIT, checked
 * before allocating. Malformed input is SFL_EPARSE (SFL_ETRUNC when rows are
 * missing) with "name:line:col: what" in sfl_last_error(); non-finite values
 * are rejected. buf need not be NUL-terminated. */
int sfl_dict_parse(const char *buf, size_t len, const char *name, size_t max_entries,
                   sfl_dict_t **out) SFL_MUST_CHECK;
/* sfl_dict_parse on the contents of path (read whole, under a size bound
 * derived from max_entries). */
int sfl_dict_read(const char *path, size_t max_entries, sfl_dict_t **out) SFL_MUST_CHECK;

/* Kernels (no allocation). */
/* x = A c  (c: m entries, x: n entries; zero coefficients are skipped) */
void sfl_dict_apply(const sfl_dict_t *d, const double *c, double *x);
/* x = sum_q val[q] a_{idx[q]}  (idx[q] < m) */
void sfl_dict_apply_sparse(const sfl_dict_t *d, const uint32_t *idx, const double *val,
                           uint32_t k, double *x);
/* c = A^T r  (r: n entries, c: m entries) */
void sfl_dict_apply_t(const sfl_dict_t *d, const double *r, double *c);
/* || sum_q val[q] a_{idx[q]} ||_2 without workspace, O(n k). */
double sfl_dict_nrm2_sparse(const sfl_dict_t *d, const uint32_t *idx, const double *val,
                            uint32_t k);


#ifdef __cplusplus
}
#endif

#endif

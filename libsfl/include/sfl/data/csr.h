/* Compressed sparse row matrices (float64 values, 32-bit column indices). */
#ifndef SFL_CSR_H
#define SFL_CSR_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_csr {
    uint32_t nrows;
    uint32_t ncols;
    size_t nnz;       /* == rowptr[nrows] */
    size_t *rowptr;   /* nrows + 1 offsets into colind/val */
    uint32_t *colind; /* strictly increasing within a row, < ncols */
    double *val;
} sfl_csr_t;

/* Returns owned (free with sfl_csr_free) a matrix with storage for nnz
 * entries and rowptr zeroed; the caller fills it. */
int sfl_csr_new(uint32_t nrows, uint32_t ncols, size_t nnz, sfl_csr_t **out) SFL_MUST_CHECK;
void sfl_csr_free(sfl_csr_t *a);
/* Nonzeros of the dense row-major nrows x ncols matrix a. */
int sfl_csr_from_dense(const double *a, uint32_t nrows, uint32_t ncols,
                       sfl_csr_t **out) SFL_MUST_CHECK;
/* New matrix made of rows[0..n) of a, in that order (rows may repeat). */
int sfl_csr_select_rows(const sfl_csr_t *a, const uint32_t *rows, uint32_t n,
                        sfl_csr_t **out) SFL_MUST_CHECK;
/* Row kernels: <a_i, x> and y += alpha a_i. */
double sfl_csr_row_dot(const sfl_csr_t *a, uint32_t i, const double *x);
void sfl_csr_row_axpy(const sfl_csr_t *a, uint32_t i, double alpha, double *y);
/* y = A x (y has nrows entries). */
void sfl_csr_gemv(const sfl_csr_t *a, const double *x, double *y);
/* Checks rowptr monotone, column indices sorted/unique/in range, values
 * finite; says what is wrong through sfl_last_error(). */
int sfl_csr_validate(const sfl_csr_t *a) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* LibSVM / SVMlight text reader. */
#ifndef SFL_LIBSVM_H
#define SFL_LIBSVM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LibSVM: "label idx:val idx:val ...", 1-based indices in any order (sorted
 * on load; a repeated index is an error), '#' comments, blank lines, CRLF.
 * ncols = max(largest index, min_cols). lim may be NULL for defaults. */
int sfl_libsvm_read(const char *path, uint32_t min_cols, const sfl_read_limits_t *lim,
                    sfl_dataset_t **out) SFL_MUST_CHECK;
/* The same from memory; name is used in error messages. */
int sfl_libsvm_parse(const char *buf, size_t len, const char *name, uint32_t min_cols,
                     const sfl_read_limits_t *lim, sfl_dataset_t **out) SFL_MUST_CHECK;
/* Appends ds to f in LibSVM form: the original label (labels[y] for coded
 * classes), then 1-based idx:val with values printed exactly (%.17g), so
 * reading the text back gives the same bits. Returns 0 or -errno. */
int sfl_libsvm_write(FILE *f, const sfl_dataset_t *ds) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

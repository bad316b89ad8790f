/* Dense numeric CSV reader. */
#ifndef SFL_CSV_H
#define SFL_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sfl_csv_opts {
    int label_col;  /* column holding the target; negative counts from the end
                       (-1 = last); default 0 */
    int header;     /* 1: first line is a header; -1: detect (non-numeric first
                       line); default -1 */
    char delim;     /* ',' default; ';' '\t' ' ' allowed */
} sfl_csv_opts_t;

void sfl_csv_opts_default(sfl_csv_opts_t *o);
/* Dense numeric CSV; every row must have the same number of fields; zeros are
 * not stored. opts/lim may be NULL for defaults. */
int sfl_csv_read(const char *path, const sfl_csv_opts_t *opts, const sfl_read_limits_t *lim,
                 sfl_dataset_t **out) SFL_MUST_CHECK;
int sfl_csv_parse(const char *buf, size_t len, const char *name, const sfl_csv_opts_t *opts,
                  const sfl_read_limits_t *lim, sfl_dataset_t **out) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

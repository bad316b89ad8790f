/* Named numeric parameters as programs carry them: on the wire (msg.h),
 * in job files and stored job specs. Which names exist, their types, ranges
 * and defaults is each algorithm's business (algo.h, sfl_param_def_t); this
 * header is only the carrier, so the wire layer needs no algorithm. */
#ifndef SFL_PARAM_H
#define SFL_PARAM_H

#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_PARAM_NAME_LEN 32 /* 1..31 of [a-z0-9_] + NUL */
#define SFL_PARAMS_MAX 32     /* parameters per algorithm and per list */

typedef struct sfl_param_value {
    char name[SFL_PARAM_NAME_LEN];
    double value; /* finite; a count is an integer value */
} sfl_param_value_t;

typedef struct sfl_param_list {
    uint32_t n;
    sfl_param_value_t v[SFL_PARAMS_MAX];
} sfl_param_list_t;

/* Nonzero if name is 1..31 characters of [a-z0-9_] starting with a letter. */
int sfl_param_name_ok(const char *name);
/* The entry called name; NULL if none. */
const sfl_param_value_t *sfl_param_list_find(const sfl_param_list_t *l, const char *name);
/* Sets name to value, replacing an entry of that name or appending one.
 * SFL_EINVAL for a bad name, SFL_ELIMIT when the list is full. */
int sfl_param_list_set(sfl_param_list_t *l, const char *name, double value) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

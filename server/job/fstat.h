/* A standardize job's statistics round (docs/protocol.md "Statistics
 * round"): before its first training round every eligible agent sends the
 * moments of its training rows (sfl/data/dataset.h: the row count, each
 * feature's sum and sum of squares, SFL_MOMENTS_LEN(d) values), and the
 * coordinator adds them up. Pure: no I/O, no clock.
 *
 * The sum is a plain one (moments add; no weights), folded at the end in
 * cohort-slot order (ascending agent id) from zeros: with the same client
 * files it is bit for bit sfl-sim's --standardize sum over clients 0..N-1. */
#ifndef COORD_FSTAT_H
#define COORD_FSTAT_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/vec.h"

typedef struct coord_fstat {
    uint32_t d;       /* features */
    uint32_t nslots;  /* the attempt's cohort */
    double **held;    /* by slot: an accepted agent's moments (owned), or NULL */
} coord_fstat_t;

/* Checks one agent's moments vector v against what the coordinator knows:
 * dimension SFL_MOMENTS_LEN(d), every value finite, the count an integer
 * equal to rows (the samples its payload declares) and in [1, bound] (the
 * training rows it joined with), every sum of squares >= 0, and each
 * feature's sum and sum of squares consistent (sum^2 <= count x sum of
 * squares, up to rounding). SFL_EINVAL (SFL_ENUMERIC for a non-finite
 * value) with a detail naming the first fault. */
int coord_fstat_check(const sfl_spvec_t *v, uint32_t d, uint64_t rows,
                      uint64_t bound) SFL_MUST_CHECK;
/* Starts an attempt of nslots members over d features (anything held from
 * an earlier attempt is dropped). SFL_ENOMEM. */
int coord_fstat_begin(coord_fstat_t *f, uint32_t d, uint32_t nslots) SFL_MUST_CHECK;
/* Holds a checked vector for slot (copied; v is borrowed). SFL_EINVAL for
 * a slot out of range or held already, SFL_ENOMEM. */
int coord_fstat_add(coord_fstat_t *f, uint32_t slot, const sfl_spvec_t *v) SFL_MUST_CHECK;
/* m[0 .. SFL_MOMENTS_LEN(d)) = the held vectors summed in slot order from
 * zeros; *agents their number. SFL_EEMPTY when none is held. */
int coord_fstat_end(const coord_fstat_t *f, double *m, uint32_t *agents) SFL_MUST_CHECK;
/* Frees what is held; the struct can begin again. */
void coord_fstat_close(coord_fstat_t *f);

#endif

/* The statistics round kind (stats.c; docs/protocol.md "Statistics
 * round"): round 0 of a standardize job, whose agents send the moments of
 * their training rows, summed in plain (fstat.h) or under secure
 * aggregation (saround.h) as the job's update mode says. */
#ifndef COORD_ROUND_STATS_H
#define COORD_ROUND_STATS_H

#include "job/fstat.h"
#include "round/saround.h"

/* The statistics round's state: the moments held (mode 1) or the mode-2
 * round, and the sum the fold made, for the commit. */
typedef struct coord_stats {
    coord_sa_t sa;             /* under secure aggregation */
    coord_fstat_t fstat;       /* in plain */
    double *work_moments;      /* SFL_MOMENTS_LEN(d), owned, from fold to commit */
} coord_stats_t;

#endif

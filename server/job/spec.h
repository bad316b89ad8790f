/* A job's specification on the coordinator: defaults, the [job NAME] keys,
 * the checks. Every field is declared once, in sfl/wire/jobspec.def (name,
 * type, member, proto field, default, range, help); the message codec and
 * this module are both driven by it. */
#ifndef COORD_JOB_SPEC_H
#define COORD_JOB_SPEC_H

#include <stdio.h>

#include "sfl/algo/algo.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"

#define COORD_MAX_CONDITIONS 8

/* A job's specification has one form, the CreateJob message's own
 * (sfl_job_spec_t, sfl/wire/msg.h): a [job] section is read into one, sflctl
 * sends one, the store keeps it packed, and the coordinator checks and runs
 * it. These are what the coordinator adds to that form. */

/* Every field at the table's default (jobspec.def's def column; the
 * algorithm's parameters are filled from its table later). */
void coord_job_spec_default(sfl_job_spec_t *s);
/* Sets one key (a [job] section's, jobspec.def's key column, or one of the
 * algorithms' parameters; documented in docs/configuration.md; "classes"
 * is the section reader's, jobdef.c). Older names are read as their
 * field's (heartbeat_ms as heartbeat_timeout_ms). SFL_EINVAL with a detail
 * naming the key for an unknown key or a bad value. */
int coord_job_spec_set(sfl_job_spec_t *s, const char *key, const char *value) SFL_MUST_CHECK;
/* Writes the [job] keys, one a line with its default and help, for --help. */
void coord_job_spec_help(FILE *f);
/* The coordinator's checks of a whole spec (algorithm and loss known, the
 * loss fits the labels, parameters in range for the algorithm, round
 * configuration, at most COORD_MAX_CONDITIONS conditions, no dictionary);
 * the message's own checks are sfl_msg_create_job_pack's. */
int coord_job_spec_check(const sfl_job_spec_t *s) SFL_MUST_CHECK;
/* The spec's algorithm parameters: the algorithm's defaults and the values
 * given (SFL_EINVAL naming the parameter for an unknown name, a non-integer
 * count, a value out of range). */
int coord_job_spec_params(const sfl_job_spec_t *s, sfl_algo_params_t *p) SFL_MUST_CHECK;

/* A standardize + secure_aggregation job's bound B on every feature value
 * (its moments fit mode 2's fixed point, sfl/crypto/savec.h): 100 by default. The
 * stored sums of squares are then within count x w_max x 2 B^2 / 2^bits
 * of the plain sum (docs/protocol.md "Statistics round"). */
#define COORD_STANDARDIZE_BOUND 100.0
/* The spec's standardize_bound, 0 read as COORD_STANDARDIZE_BOUND. */
double coord_job_std_bound(const sfl_job_spec_t *s);
/* secagg_groups = frontend: 1 (one session per front-end group), else 0;
 * secagg_min_group with 0 read as COORD_SA_MIN_GROUP. */
#define COORD_SA_MIN_GROUP 10
int coord_job_sa_grouped(const sfl_job_spec_t *s);
uint32_t coord_job_sa_min_group(const sfl_job_spec_t *s);
/* The spec's standardize_eps, 0 read as SFL_STANDARDIZE_EPS. */
double coord_job_std_eps(const sfl_job_spec_t *s);

#endif

/* A [job NAME] section of an INI file (coordinator.ini's jobs, sflctl's job
 * files) read into a job spec and checked as CreateJob would: the job
 * definitions the coordinator and sflctl share. Pure: no daemon state. */
#ifndef COORD_JOBDEF_H
#define COORD_JOBDEF_H

#include "sfl/core/error.h"
#include "sfl/wire/msg.h"

/* A [job NAME] section being read: a job spec in its one form
 * (sfl_job_spec_t, the CreateJob message's) set by the keys of
 * coord_job_spec_set (job.h), plus `classes`, checked against the number
 * of labels. */
typedef struct coord_jobdef coord_jobdef_t;

/* The NAME of an INI section "job NAME" (spaces after "job" skipped):
 * 1 and *name set (borrowed from section), 0 for another section, or
 * SFL_EINVAL for an empty name or one inih may have cut (section names
 * are at most SFL_INI_SECTION_MAX = 48 bytes, so job names stop at 44). */
int coord_job_section(const char *section, const char **name) SFL_MUST_CHECK;

/* Returns owned (coord_jobdef_free), with the job defaults and name. */
int coord_jobdef_new(const char *name, coord_jobdef_t **out) SFL_MUST_CHECK;
int coord_jobdef_set(coord_jobdef_t *d, const char *key, const char *value) SFL_MUST_CHECK;
/* The whole definition as CreateJob would check it (algorithm, loss,
 * labels, parameters, round configuration); SFL_EINVAL with a detail. */
int coord_jobdef_check(const coord_jobdef_t *d) SFL_MUST_CHECK;
/* coord_jobdef_check, and on success *out = the definition in wire form
 * (what a CreateJob for it carries). Details do not name the job. */
int coord_jobdef_wire(const coord_jobdef_t *d, sfl_job_spec_t *out) SFL_MUST_CHECK;
void coord_jobdef_free(coord_jobdef_t *d);

#endif

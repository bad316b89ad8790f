/* Registry (registry.c): clocks, agents, jobs by id, eligibility.
 * On the loop thread unless said otherwise. */
#ifndef COORD_ROUND_REGISTRY_H
#define COORD_ROUND_REGISTRY_H

#include "coord_int.h"

uint64_t coord_now_ms(const coord_t *co);
int64_t coord_wall_ms(void);
coord_agent_t *coord_agent_find(const coord_t *co, uint64_t id);
coord_agent_t *coord_agent_by_name(const coord_t *co, const char *name);
/* Sets a->ds from a Join's summary (SFL_ENOMEM, a->ds unchanged). */
int coord_agent_set_ds(coord_agent_t *a, const sfl_dataset_summary_t *ds) SFL_MUST_CHECK;
/* The agent's summary in the wire's form, in *tmp (returned). */
const sfl_dataset_summary_t *coord_agent_summary(const coord_agent_t *a, sfl_dataset_summary_t *tmp);
/* Frees an agent (its labels too); NULL is a no-op. */
void coord_agent_free(coord_agent_t *a);
/* Inserts keeping agents ascending by id, indexed by a->name, which must
 * be set and stays (SFL_ENOMEM). */
int coord_agent_insert(coord_t *co, coord_agent_t *a) SFL_MUST_CHECK;
/* The operator revoked this certificate (bsearch in co->revoked). */
bool coord_cert_revoked(const coord_t *co, const uint8_t fpr[32]);
coord_job_t *coord_job_find(const coord_t *co, uint64_t id);
/* Cancelled, finished or failed. */
int coord_job_final(const coord_job_t *j);
/* Tags as "a,b,c" (the store's text form) and back. */
void coord_tags_text(const sfl_tags_t *t, char *out, size_t cap);
void coord_tags_parse(const char *s, sfl_tags_t *t);
/* Why the agent cannot take part in the job (job.h's reasons plus
 * NOT_JOINED and LABELS), with a detail; NONE if it can. */
coord_inelig_t coord_ineligible(const coord_job_t *j, const coord_agent_t *a, char *why, size_t cap);
int coord_eligible(const coord_job_t *j, const coord_agent_t *a);
/* The job schedules rounds now (running, not stopping). */
int coord_running(const coord_job_t *j);
/* Selected in another job's open attempt (self excepted). */
int coord_busy_elsewhere(const coord_t *co, const coord_agent_t *a, const coord_job_t *self);
/* Some running job can use the agent. */
int coord_usable(const coord_t *co, const coord_agent_t *a);

#endif

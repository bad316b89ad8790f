/* Suspects (suspect.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_ROUND_SUSPECT_H
#define COORD_ROUND_SUSPECT_H

#include "coord_int.h"

/* suspect.c: suspicion for secure sums that fail unattributably
 * (docs/security.md). On the loop thread. */
/* The agent's count in job j (0: not suspect). */
uint32_t coord_suspicion(const coord_job_t *j, uint64_t agent);
/* +1 for each of ids[0..n) (a failed attempt's U3); 0 or SFL_ENOMEM (the
 * counts of those before the failing one are raised). */
int coord_suspect_blame(coord_job_t *j, const uint64_t *ids, uint32_t n) SFL_MUST_CHECK;
/* Back to 0 for each of ids[0..n) (a committed round's U3). */
void coord_suspect_clear(coord_job_t *j, const uint64_t *ids, uint32_t n);
void coord_suspect_free(coord_job_t *j);
/* Agents the job suspects (count >= 1). */
uint32_t coord_suspects(const coord_job_t *j);
/* How many of n candidates with these counts a mode-2 attempt keeps: all
 * when none is suspect or n <= min_keep; else all but half (rounded up) of
 * those at the highest count, and at least min_keep (the smallest cohort
 * the job's quorum and threshold allow). Pure. */
uint32_t coord_suspect_keep(const uint32_t *counts, uint32_t n, uint32_t min_keep);
/* keep of the n candidates ids (ascending) into out (ascending): ordered
 * by (count ascending, a draw from the cohort's stream for (seed, round,
 * attempt)), so the least suspect are kept and ties at the boundary are
 * broken at random. Pure; 0, SFL_EINVAL (keep > n) or SFL_ENOMEM. */
int coord_suspect_pick(uint64_t seed, uint64_t round, uint32_t attempt, const uint64_t *ids,
                       const uint32_t *counts, uint32_t n, uint32_t keep,
                       uint64_t *out) SFL_MUST_CHECK;
/* "agent 9 (2), agent 4 (1)": the suspects among ids[0..n) (ids NULL:
 * all the job's), as many as fit in cap, then "and N more". */
void coord_suspect_text(const coord_job_t *j, const uint64_t *ids, uint32_t n, char *out,
                        size_t cap);

#endif

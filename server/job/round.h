/* The coordinator's round state machine and cohort sampling: pure logic, no
 * I/O, no clock of its own (callers pass `now` in ms), so every transition is
 * unit-tested and any round can be replayed from its manifest.
 *
 *   SELECTING --start--> TRAINING (phase 0, 1, ..., n-1) --last phase ends--> AGGREGATING
 *      ^                     |  a phase ends early once its target answered or
 *      |                     |  nobody else can; at its deadline with
 *      |                     |  answers >= its quorum -> the next phase, else FAILED
 *      +----- retry (attempt + 1, fresh cohort) <-- FAILED (attempts left)
 *   AGGREGATING --aggregated--> COMMITTED;  --error--> FAILED
 *
 * TRAINING is a sequence of declared collecting phases (coord_phase_t): in
 * each, every member still in the attempt answers once (its update, a key,
 * a share, a masked input ...); members that did not answer a phase drop
 * out of the later ones. A plain round has one phase, "upload" (cohort,
 * min_quorum, deadline_ms); secure aggregation or a vertical iteration
 * declares more instead of adding states.
 *
 * State changes only in coord_round_step() and the answers
 * (coord_round_answer), one switch each (STYLE rule 10). */
#ifndef COORD_ROUND_H
#define COORD_ROUND_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

typedef enum {
    COORD_ROUND_SELECTING = 0,
    COORD_ROUND_TRAINING,
    COORD_ROUND_AGGREGATING,
    COORD_ROUND_COMMITTED,
    COORD_ROUND_FAILED
} coord_round_state_t;

/* Verdict on one submitted update (maps 1:1 onto the wire's UpdateAck). */
typedef enum {
    COORD_UPD_ACCEPTED = 0,
    COORD_UPD_LATE,        /* the round already closed */
    COORD_UPD_DUPLICATE,   /* this agent's update was already accepted */
    COORD_UPD_WRONG_ROUND, /* another job, round or attempt */
    COORD_UPD_REJECTED     /* not selected for this attempt */
} coord_upd_verdict_t;

/* What happened to a selected agent this attempt. */
typedef enum {
    COORD_MEMBER_PENDING = 0,
    COORD_MEMBER_ACCEPTED,
    COORD_MEMBER_DEAD, /* no heartbeat within the timeout */
    COORD_MEMBER_DROPPED /* did not answer an earlier phase: out of this attempt */
} coord_member_state_t;

/* A collecting phase of an attempt. */
typedef struct coord_phase {
    char name[24];            /* "upload", "advertise_keys", ... (logs) */
    uint64_t deadline_ms;     /* from the phase's start */
    uint32_t target;          /* answers that end it early; 0: every member still in */
    uint32_t quorum;          /* answers it needs at its deadline (>= 1) */
} coord_phase_t;

#define COORD_MAX_PHASES 8

typedef struct coord_round_cfg {
    uint32_t cohort;          /* target number of accepted updates */
    double overselect;        /* select ceil(cohort * (1 + overselect)) */
    uint32_t min_quorum;      /* accepted updates needed at the deadline */
    uint64_t deadline_ms;     /* training window */
    uint64_t heartbeat_ms;    /* silence after which a member is dead */
    uint32_t max_attempts;    /* attempts per round before the job stops */
    /* The collecting phases; nphases 0: one "upload" phase of cohort,
     * min_quorum and deadline_ms (coord_round_init fills it in). */
    uint32_t nphases;
    coord_phase_t phases[COORD_MAX_PHASES];
} coord_round_cfg_t;

typedef struct coord_member {
    uint64_t agent;
    coord_member_state_t state;
    uint64_t last_seen_ms;
} coord_member_t;

typedef struct coord_round {
    coord_round_state_t state;
    coord_round_cfg_t cfg;
    uint64_t job, round;
    uint32_t attempt;          /* 0-based */
    uint32_t phase;            /* TRAINING: the phase collecting now */
    uint8_t nonce[32];         /* filled by the caller at start */
    uint64_t opened_ms, deadline_at_ms; /* deadline_at_ms: the current phase's */
    coord_member_t *members;   /* the cohort manifest, sorted by agent id */
    uint32_t nmembers;
    uint32_t accepted, dead;   /* of the current phase: answered; dead or dropped */
    char reason[128];          /* why the last attempt failed */
    /* Attempts of this round whose failure a named culprit caused and who
     * is now excluded (coord_round_excuse): they do not count toward
     * max_attempts. excuse: the current attempt is one. */
    uint32_t excused;
    int excuse;
    /* Of those, attempts whose secure sum failed with no one to name
     * (coord_round_excuse_unattributed). */
    uint32_t unattributed;
    /* coord_round_hold: answers are taken without closing the phase until
     * released (a front-end's partial sum: all its members or none). */
    int held;
} coord_round_t;

/* Events fed to coord_round_step. */
typedef enum {
    COORD_EV_START,      /* agents/nagents: eligible agents, sorted ascending */
    COORD_EV_TICK,       /* time passes: deadline and heartbeat checks */
    COORD_EV_AGGREGATED, /* the aggregation finished and was checkpointed */
    COORD_EV_AGG_FAILED,
    COORD_EV_RETRY       /* start the next attempt after FAILED */
} coord_event_t;

/* The current attempt (open, aggregating or just failed) failed or will
 * fail because of a member now excluded from the job (quarantine.c): at
 * RETRY it is not counted toward max_attempts. The caller excuses an
 * attempt only for a member newly excluded, so a round gets at most one
 * excused attempt per agent and retries stay bounded. A no-op when no
 * attempt is open or failed. */
void coord_round_excuse(coord_round_t *r);
/* The current attempt failed and no one can be named (a secure sum out of
 * bounds): excused as above while fewer than bound such attempts of this
 * round were; 1 if excused, 0 if it counts. The caller passes the number
 * of candidates when the retry can leave out a different subset of them,
 * 0 when it cannot (so a round cannot retry forever). */
int coord_round_excuse_unattributed(coord_round_t *r, uint32_t bound);

/* Checks cfg (cohort >= 1, quorum in [1, cohort], deadline > 0, ...). */
int coord_round_cfg_check(const coord_round_cfg_t *cfg) SFL_MUST_CHECK;

void coord_round_init(coord_round_t *r, const coord_round_cfg_t *cfg, uint64_t job,
                      uint64_t round);
void coord_round_close(coord_round_t *r);

/* The cohort for (seed, round, attempt): min(ceil(cohort * (1 + overselect)),
 * n) of the n eligible agents (sorted ascending), drawn uniformly without
 * replacement from the cohort stream, output sorted. Deterministic, so the
 * manifest can be recomputed and checked. *nout receives the count. */
int coord_cohort_sample(uint64_t seed, uint64_t round, uint32_t attempt,
                        const coord_round_cfg_t *cfg, const uint64_t *eligible, uint32_t n,
                        uint64_t *out, uint32_t *nout) SFL_MUST_CHECK;

/* Drives the machine. START needs seed, agents and nagents; others ignore
 * them. Returns 0, or SFL_EINVAL for an event that the current state does
 * not accept (the state is unchanged), or SFL_EEMPTY when START finds fewer
 * eligible agents than the quorum (state FAILED, reason set). */
int coord_round_step(coord_round_t *r, coord_event_t ev, uint64_t now_ms, uint64_t seed,
                     const uint64_t *agents, uint32_t nagents) SFL_MUST_CHECK;

/* An answer from agent for (job, round, attempt) to phase `phase`: the
 * verdict, and on ACCEPTED the member is marked. A phase that is over gives
 * LATE, one not begun WRONG_ROUND, a member that dropped out REJECTED. When
 * the phase's target is reached (or every member still in has answered or
 * died) the next phase begins, after the last AGGREGATING. */
coord_upd_verdict_t coord_round_answer(coord_round_t *r, uint64_t agent, uint64_t job,
                                       uint64_t round, uint32_t attempt, uint32_t phase,
                                       uint64_t now_ms);
/* Holds the phase open while a batch of answers is taken (on = 1), then
 * releases it (on = 0), closing it if the batch reached its target or
 * every member answered: a fold-mode partial's members are all accepted,
 * even past the target, since its sum holds them all. */
void coord_round_hold(coord_round_t *r, int on, uint64_t now_ms);
/* coord_round_answer to the last phase: a plain round's update. */
coord_upd_verdict_t coord_round_submit(coord_round_t *r, uint64_t agent, uint64_t job,
                                       uint64_t round, uint32_t attempt, uint64_t now_ms);
/* The current phase (TRAINING), or NULL. */
const coord_phase_t *coord_round_phase(const coord_round_t *r);

/* Agent leaves the open attempt (TRAINING): its secure aggregation group
 * was dropped. It counts as dropped out from now on (an answer of it to
 * the current phase no longer counts); coord_round_recheck then ends the
 * phase if nobody else can answer. A no-op otherwise. */
void coord_round_drop(coord_round_t *r, uint64_t agent);
void coord_round_recheck(coord_round_t *r, uint64_t now_ms);

/* A heartbeat / progress report from a selected agent; 0 or SFL_ENOTFOUND. */
int coord_round_heartbeat(coord_round_t *r, uint64_t agent, uint64_t now_ms);

/* Is agent in this attempt's cohort? */
int coord_round_is_member(const coord_round_t *r, uint64_t agent);
/* Its entry in the manifest (binary search), or NULL. */
const coord_member_t *coord_round_member(const coord_round_t *r, uint64_t agent);

/* Pace steering: how long an agent that was not selected should wait before
 * asking again: until this attempt's deadline, plus a spread of up to a
 * quarter of the deadline derived from the agent id so retries do not arrive
 * together. At least min_ms. */
uint64_t coord_round_retry_after(const coord_round_t *r, uint64_t agent, uint64_t now_ms,
                                 uint64_t min_ms);

const char *coord_round_state_name(coord_round_state_t s);
const char *coord_upd_verdict_name(coord_upd_verdict_t v);

#endif

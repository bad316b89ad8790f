#include "job/round.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"

const char *coord_round_state_name(coord_round_state_t s)
{
    switch (s) {
    case COORD_ROUND_SELECTING: return "selecting";
    case COORD_ROUND_TRAINING: return "training";
    case COORD_ROUND_AGGREGATING: return "aggregating";
    case COORD_ROUND_COMMITTED: return "committed";
    case COORD_ROUND_FAILED: return "failed";
    }
    return "?";
}

const char *coord_upd_verdict_name(coord_upd_verdict_t v)
{
    switch (v) {
    case COORD_UPD_ACCEPTED: return "accepted";
    case COORD_UPD_LATE: return "late";
    case COORD_UPD_DUPLICATE: return "duplicate";
    case COORD_UPD_WRONG_ROUND: return "wrong_round";
    case COORD_UPD_REJECTED: return "rejected";
    }
    return "?";
}

int coord_round_cfg_check(const coord_round_cfg_t *c)
{
    if (c->cohort == 0)
        return sfl__fail(SFL_EINVAL, "cohort size must be at least 1");
    if (!(c->overselect >= 0) || c->overselect > 10)
        return sfl__fail(SFL_EINVAL, "over-selection must be in [0, 10]");
    if (c->min_quorum == 0 || c->min_quorum > c->cohort)
        return sfl__fail(SFL_EINVAL, "minimum quorum must be in [1, cohort = %u]", c->cohort);
    if (c->deadline_ms == 0)
        return sfl__fail(SFL_EINVAL, "round deadline must be positive");
    if (c->heartbeat_ms == 0)
        return sfl__fail(SFL_EINVAL, "heartbeat timeout must be positive");
    if (c->max_attempts == 0)
        return sfl__fail(SFL_EINVAL, "max attempts must be at least 1");
    if (c->nphases > COORD_MAX_PHASES)
        return sfl__fail(SFL_EINVAL, "at most %d phases", COORD_MAX_PHASES);
    for (uint32_t i = 0; i < c->nphases; i++) {
        const coord_phase_t *p = &c->phases[i];

        if (p->name[0] == '\0' || memchr(p->name, '\0', sizeof(p->name)) == NULL)
            return sfl__fail(SFL_EINVAL, "phase %u needs a name", i);
        if (p->deadline_ms == 0 || p->quorum == 0 || (p->target && p->target < p->quorum))
            return sfl__fail(SFL_EINVAL, "phase %s: deadline and quorum must be positive, "
                             "target 0 or >= quorum", p->name);
    }
    return 0;
}

void coord_round_init(coord_round_t *r, const coord_round_cfg_t *cfg, uint64_t job,
                      uint64_t round)
{
    memset(r, 0, sizeof(*r));
    r->cfg = *cfg;
    if (r->cfg.nphases == 0) {
        r->cfg.nphases = 1;
        r->cfg.phases[0] = (coord_phase_t){"upload", cfg->deadline_ms, cfg->cohort,
                                           cfg->min_quorum};
    }
    r->job = job;
    r->round = round;
    r->state = COORD_ROUND_SELECTING;
}

void coord_round_close(coord_round_t *r)
{
    sfl__free(r->members);
    r->members = NULL;
    r->nmembers = 0;
}

int coord_cohort_sample(uint64_t seed, uint64_t round, uint32_t attempt,
                        const coord_round_cfg_t *cfg, const uint64_t *eligible, uint32_t n,
                        uint64_t *out, uint32_t *nout)
{
    double want = ceil(cfg->cohort * (1.0 + cfg->overselect));
    uint32_t k = want >= n ? n : (uint32_t)want;
    uint32_t *pick;
    sfl_rng_t rng;
    int rc;

    for (uint32_t i = 1; i < n; i++)
        if (eligible[i] <= eligible[i - 1])
            return sfl__fail(SFL_EINVAL, "eligible agents must be sorted and unique");
    pick = sfl__mallocarray(k ? k : 1, sizeof(*pick));
    if (pick == NULL)
        return SFL_ENOMEM;
    /* The attempt is folded into the client slot of the stream coordinates:
     * every retry draws a fresh cohort, and every (round, attempt) replays. */
    sfl_rng_seed(&rng, seed, round, attempt, SFL_STREAM_COHORT);
    rc = sfl_rng_sample(&rng, n, k, pick);
    if (rc == 0) {
        for (uint32_t i = 0; i < k; i++)
            out[i] = eligible[pick[i]];
        *nout = k;
    }
    sfl__free(pick);
    return rc;
}

static coord_member_t *find_member(const coord_round_t *r, uint64_t agent)
{
    uint32_t lo = 0, hi = r->nmembers;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (r->members[mid].agent < agent)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nmembers && r->members[lo].agent == agent ? &r->members[lo] : NULL;
}

int coord_round_is_member(const coord_round_t *r, uint64_t agent)
{
    return find_member(r, agent) != NULL;
}

const coord_member_t *coord_round_member(const coord_round_t *r, uint64_t agent)
{
    return find_member(r, agent);
}

static void fail(coord_round_t *r, const char *why)
{
    snprintf(r->reason, sizeof(r->reason), "%s", why);
    r->state = COORD_ROUND_FAILED;
}

const coord_phase_t *coord_round_phase(const coord_round_t *r)
{
    return r->state == COORD_ROUND_TRAINING ? &r->cfg.phases[r->phase] : NULL;
}

/* Phase p begins: members that answered the last one stay in (pending),
 * the others drop out. */
static void begin_phase(coord_round_t *r, uint32_t p, uint64_t now)
{
    r->phase = p;
    r->accepted = r->dead = 0;
    for (uint32_t i = 0; i < r->nmembers; i++) {
        coord_member_t *m = &r->members[i];

        if (p > 0)
            m->state = m->state == COORD_MEMBER_ACCEPTED ? COORD_MEMBER_PENDING
                                                         : COORD_MEMBER_DROPPED;
        if (m->state == COORD_MEMBER_DROPPED)
            r->dead++;
    }
    r->deadline_at_ms = now + r->cfg.phases[p].deadline_ms;
}

/* The current phase ended with r->accepted answers: the next one, the
 * aggregation, or a failure below its quorum. */
static void end_phase(coord_round_t *r, uint64_t now, const char *how)
{
    const coord_phase_t *p = &r->cfg.phases[r->phase];

    if (r->accepted < p->quorum) {
        char why[128];

        if (r->cfg.nphases == 1) {
            snprintf(why, sizeof(why), "%s with %u of %u updates (quorum %u)", how,
                     r->accepted, r->nmembers, p->quorum);
        } else {
            uint32_t in = 0;

            for (uint32_t i = 0; i < r->nmembers; i++)
                in += r->members[i].state != COORD_MEMBER_DROPPED;
            snprintf(why, sizeof(why), "phase %s: %s with %u of %u answers (quorum %u)",
                     p->name, how, r->accepted, in, p->quorum);
        }
        fail(r, why);
    } else if (r->phase + 1 < r->cfg.nphases) {
        begin_phase(r, r->phase + 1, now);
    } else {
        r->state = COORD_ROUND_AGGREGATING;
    }
}

/* A phase closes early once its target is met or nobody else can answer. */
static void maybe_close(coord_round_t *r, uint64_t now)
{
    const coord_phase_t *p = &r->cfg.phases[r->phase];
    uint32_t target = p->target ? p->target : r->nmembers;

    if (r->state != COORD_ROUND_TRAINING || r->held)
        return;
    if (r->accepted >= target || r->accepted + r->dead == r->nmembers) {
        if (r->accepted >= p->quorum)
            end_phase(r, now, "");
        else
            fail(r, r->cfg.nphases == 1
                        ? "every selected agent answered or died below quorum"
                        : "every member still in answered or died below the phase's quorum");
    }
}

static int start(coord_round_t *r, uint64_t now, uint64_t seed, const uint64_t *agents,
                 uint32_t n)
{
    uint64_t *ids;
    uint32_t k = 0;
    int rc;

    coord_round_close(r);
    r->accepted = r->dead = 0;
    r->reason[0] = '\0';
    if (n < r->cfg.min_quorum) {
        char why[96];

        snprintf(why, sizeof(why), "%u eligible agents, quorum needs %u", n, r->cfg.min_quorum);
        fail(r, why);
        return sfl__fail(SFL_EEMPTY, "%s", why);
    }
    ids = sfl__mallocarray(n, sizeof(*ids));
    r->members = sfl__calloc(n, sizeof(*r->members));
    if (ids == NULL || r->members == NULL) {
        sfl__free(ids);
        coord_round_close(r);
        return SFL_ENOMEM;
    }
    rc = coord_cohort_sample(seed, r->round, r->attempt, &r->cfg, agents, n, ids, &k);
    if (rc < 0) {
        sfl__free(ids);
        coord_round_close(r);
        return rc;
    }
    for (uint32_t i = 0; i < k; i++)
        r->members[i] = (coord_member_t){ids[i], COORD_MEMBER_PENDING, now};
    sfl__free(ids);
    r->nmembers = k;
    r->opened_ms = now;
    begin_phase(r, 0, now);
    r->state = COORD_ROUND_TRAINING;
    return 0;
}

static void tick(coord_round_t *r, uint64_t now)
{
    for (uint32_t i = 0; i < r->nmembers; i++) {
        coord_member_t *m = &r->members[i];

        if (m->state == COORD_MEMBER_PENDING && now > m->last_seen_ms &&
            now - m->last_seen_ms > r->cfg.heartbeat_ms) {
            m->state = COORD_MEMBER_DEAD;
            r->dead++;
        }
    }
    if (now >= r->deadline_at_ms) {
        end_phase(r, now, "deadline");
        return;
    }
    maybe_close(r, now);
}

int coord_round_step(coord_round_t *r, coord_event_t ev, uint64_t now_ms, uint64_t seed,
                     const uint64_t *agents, uint32_t nagents)
{
    switch (r->state) {
    case COORD_ROUND_SELECTING:
        if (ev == COORD_EV_START)
            return start(r, now_ms, seed, agents, nagents);
        if (ev == COORD_EV_TICK)
            return 0;
        break;
    case COORD_ROUND_TRAINING:
        if (ev == COORD_EV_TICK) {
            tick(r, now_ms);
            return 0;
        }
        break;
    case COORD_ROUND_AGGREGATING:
        if (ev == COORD_EV_AGGREGATED) {
            r->state = COORD_ROUND_COMMITTED;
            return 0;
        }
        if (ev == COORD_EV_AGG_FAILED) {
            fail(r, "aggregation failed");
            return 0;
        }
        if (ev == COORD_EV_TICK)
            return 0; /* aggregation runs off the loop; time may pass */
        break;
    case COORD_ROUND_COMMITTED:
        if (ev == COORD_EV_TICK)
            return 0;
        break;
    case COORD_ROUND_FAILED:
        if (ev == COORD_EV_RETRY) {
            /* an attempt a culprit failed, now excluded, is not counted:
             * one member cannot use up the attempts and pause the job */
            if (r->excuse)
                r->excused++;
            r->excuse = 0;
            if (r->attempt + 1 - r->excused >= r->cfg.max_attempts)
                return sfl__fail(SFL_ELIMIT, "round %llu failed %u times: %s",
                                 (unsigned long long)r->round, r->attempt + 1 - r->excused,
                                 r->reason);
            r->attempt++;
            r->state = COORD_ROUND_SELECTING;
            return 0;
        }
        if (ev == COORD_EV_TICK)
            return 0;
        break;
    }
    return sfl__fail(SFL_EINVAL, "event %d not accepted in state %s", (int)ev,
                     coord_round_state_name(r->state));
}

void coord_round_excuse(coord_round_t *r)
{
    if (r->state == COORD_ROUND_TRAINING || r->state == COORD_ROUND_AGGREGATING ||
        r->state == COORD_ROUND_FAILED)
        r->excuse = 1;
}

int coord_round_excuse_unattributed(coord_round_t *r, uint32_t bound)
{
    if (r->state != COORD_ROUND_FAILED)
        return 0;
    if (r->excuse)
        return 1; /* already excused (a culprit named too) */
    if (r->unattributed >= bound)
        return 0;
    r->unattributed++;
    r->excuse = 1;
    return 1;
}

void coord_round_hold(coord_round_t *r, int on, uint64_t now_ms)
{
    r->held = on;
    if (!on)
        maybe_close(r, now_ms);
}

coord_upd_verdict_t coord_round_submit(coord_round_t *r, uint64_t agent, uint64_t job,
                                       uint64_t round, uint32_t attempt, uint64_t now_ms)
{
    return coord_round_answer(r, agent, job, round, attempt, r->cfg.nphases - 1, now_ms);
}

coord_upd_verdict_t coord_round_answer(coord_round_t *r, uint64_t agent, uint64_t job,
                                       uint64_t round, uint32_t attempt, uint32_t phase,
                                       uint64_t now_ms)
{
    coord_member_t *m;

    if (job != r->job || round != r->round || attempt != r->attempt) {
        /* An update for an earlier attempt of this round, or an earlier round,
         * arrived after it closed: late rather than wrong. */
        if (job == r->job && (round < r->round || (round == r->round && attempt < r->attempt)))
            return COORD_UPD_LATE;
        return COORD_UPD_WRONG_ROUND;
    }
    m = find_member(r, agent);
    if (m == NULL || m->state == COORD_MEMBER_DROPPED)
        return COORD_UPD_REJECTED;
    if (r->state == COORD_ROUND_TRAINING && phase > r->phase)
        return COORD_UPD_WRONG_ROUND; /* not begun */
    if (r->state == COORD_ROUND_TRAINING && phase == r->phase &&
        m->state == COORD_MEMBER_ACCEPTED)
        return COORD_UPD_DUPLICATE;
    if (r->state != COORD_ROUND_TRAINING || phase < r->phase || now_ms >= r->deadline_at_ms)
        return m->state == COORD_MEMBER_ACCEPTED && phase == r->cfg.nphases - 1
                   ? COORD_UPD_DUPLICATE
                   : COORD_UPD_LATE;
    if (m->state == COORD_MEMBER_DEAD)
        r->dead--; /* silent, but its answer is on time: take it */
    m->state = COORD_MEMBER_ACCEPTED;
    m->last_seen_ms = now_ms;
    r->accepted++;
    maybe_close(r, now_ms);
    return COORD_UPD_ACCEPTED;
}

void coord_round_drop(coord_round_t *r, uint64_t agent)
{
    coord_member_t *m = find_member(r, agent);

    if (m == NULL || r->state != COORD_ROUND_TRAINING)
        return;
    switch (m->state) {
    case COORD_MEMBER_PENDING: r->dead++; break;
    case COORD_MEMBER_ACCEPTED: r->accepted--, r->dead++; break;
    case COORD_MEMBER_DEAD: break; /* counted already */
    case COORD_MEMBER_DROPPED: return;
    }
    m->state = COORD_MEMBER_DROPPED;
}

void coord_round_recheck(coord_round_t *r, uint64_t now_ms)
{
    maybe_close(r, now_ms);
}

int coord_round_heartbeat(coord_round_t *r, uint64_t agent, uint64_t now_ms)
{
    coord_member_t *m = find_member(r, agent);

    if (m == NULL)
        return SFL_ENOTFOUND;
    if (now_ms > m->last_seen_ms)
        m->last_seen_ms = now_ms;
    return 0;
}

uint64_t coord_round_retry_after(const coord_round_t *r, uint64_t agent, uint64_t now_ms,
                                 uint64_t min_ms)
{
    uint64_t wait = r->deadline_at_ms > now_ms ? r->deadline_at_ms - now_ms : 0;
    uint64_t spread = r->cfg.deadline_ms / 4;
    /* A fixed per-agent offset (splitmix of the id) spreads the retries. */
    uint64_t z = agent + 0x9e3779b97f4a7c15ULL;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    if (spread)
        wait += z % spread;
    return wait < min_ms ? min_ms : wait;
}

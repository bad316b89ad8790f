/* Suspicion (docs/security.md, "Unattributable failures: suspicion"): a
 * secure sum out of bounds or with a broken canary names nobody (the masks
 * hide whose input is whose), so every member of the failed attempt's U3
 * becomes a little more suspect, and every member of a committed round's
 * U3 is cleared. Selection for a mode-2 job leaves the most suspect out
 * while the cohort can do without them (coord_suspect_pick), so one member
 * that garbles its masked input is cornered in a few attempts and kept out
 * of later rounds. Per job, in memory only (sorted by agent id, count >= 1):
 * a restart forgets it, and the next failure the member causes starts it
 * again. */
#include "coord_int.h"
#include "round/suspect.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"

/* Index of agent in j->sus, or where it would go (*found 0). */
static size_t sus_pos(const coord_job_t *j, uint64_t agent, int *found)
{
    size_t lo = 0, hi = j->nsus;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (j->sus[mid].agent < agent)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < j->nsus && j->sus[lo].agent == agent;
    return lo;
}

uint32_t coord_suspicion(const coord_job_t *j, uint64_t agent)
{
    int found;
    size_t i = sus_pos(j, agent, &found);

    return found ? j->sus[i].count : 0;
}

int coord_suspect_blame(coord_job_t *j, const uint64_t *ids, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        int found;
        size_t i = sus_pos(j, ids[k], &found);
        coord_suspect_t *grown;

        if (found) {
            if (j->sus[i].count < UINT32_MAX)
                j->sus[i].count++;
            continue;
        }
        grown = sfl__reallocarray(j->sus, j->nsus + 1, sizeof(*grown));
        if (grown == NULL)
            return sfl__fail(SFL_ENOMEM, "no memory for the suspects");
        j->sus = grown;
        memmove(j->sus + i + 1, j->sus + i, (j->nsus - i) * sizeof(*j->sus));
        j->sus[i] = (coord_suspect_t){ids[k], 1};
        j->nsus++;
    }
    return 0;
}

void coord_suspect_clear(coord_job_t *j, const uint64_t *ids, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        int found;
        size_t i = sus_pos(j, ids[k], &found);

        if (!found)
            continue;
        memmove(j->sus + i, j->sus + i + 1, (j->nsus - i - 1) * sizeof(*j->sus));
        j->nsus--;
    }
}

void coord_suspect_free(coord_job_t *j)
{
    sfl__free(j->sus);
    j->sus = NULL;
    j->nsus = 0;
}

uint32_t coord_suspect_keep(const uint32_t *counts, uint32_t n, uint32_t min_keep)
{
    uint32_t top = 0, ntop = 0;

    for (uint32_t i = 0; i < n; i++) {
        if (counts[i] > top) {
            top = counts[i];
            ntop = 0;
        }
        ntop += counts[i] == top;
    }
    if (top == 0 || n <= min_keep)
        return n;
    /* half of the most suspect (rounded up) left out, the other half drawn
     * with the rest: whether that attempt commits (they are cleared) or
     * fails (the half left out drops below the top), the top group
     * shrinks, so an honest member tied with the culprit is not left out
     * for good, and the culprit ends alone at the top */
    ntop = (ntop + 1) / 2;
    return n - ntop > min_keep ? n - ntop : min_keep;
}

/* Ascending ids, in place (insertion sort: a cohort's worth). */
static void sort_ids(uint64_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        uint32_t k = i;

        for (; k > 0 && v[k - 1] > x; k--)
            v[k] = v[k - 1];
        v[k] = x;
    }
}

int coord_suspect_pick(uint64_t seed, uint64_t round, uint32_t attempt, const uint64_t *ids,
                       const uint32_t *counts, uint32_t n, uint32_t keep, uint64_t *out)
{
    uint32_t level = 0, below = 0, at = 0, o = 0, *pick = NULL, *tie = NULL;
    sfl_rng_t rng;
    int rc = 0;

    if (keep > n)
        return sfl__fail(SFL_EINVAL, "keep %u of %u candidates", keep, n);
    /* the level L where the kept end: every candidate below L is kept, and
     * keep - below of those at L, drawn at random */
    for (;;) {
        uint32_t next = UINT32_MAX;

        below += at;
        at = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (counts[i] == level)
                at++;
            else if (counts[i] > level && counts[i] < next)
                next = counts[i];
        }
        if (below + at >= keep || next == UINT32_MAX)
            break;
        level = next;
    }
    if ((tie = sfl__mallocarray(at ? at : 1, sizeof(*tie))) == NULL ||
        (pick = sfl__mallocarray(at ? at : 1, sizeof(*pick))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the selection");
        goto out;
    }
    at = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (counts[i] < level)
            out[o++] = ids[i];
        else if (counts[i] == level)
            tie[at++] = i;
    }
    /* the cohort's own stream, a slot of its own: every (round, attempt)
     * replays, and the draw is not the cohort draw's */
    sfl_rng_seed(&rng, seed, round, (uint64_t)attempt | (1ull << 32), SFL_STREAM_COHORT);
    if ((rc = sfl_rng_sample(&rng, at, keep - o, pick)) < 0)
        goto out;
    for (uint32_t k = 0, need = keep - o; k < need; k++)
        out[o++] = ids[tie[pick[k]]];
    sort_ids(out, keep);
out:
    sfl__free(pick);
    sfl__free(tie);
    return rc;
}

uint32_t coord_suspects(const coord_job_t *j)
{
    return (uint32_t)j->nsus;
}

void coord_suspect_text(const coord_job_t *j, const uint64_t *ids, uint32_t n, char *out, size_t cap)
{
    size_t o = 0;
    uint32_t shown = 0, more = 0;

    out[0] = '\0';
    for (uint32_t k = 0; k < (ids ? n : (uint32_t)j->nsus); k++) {
        uint64_t a = ids ? ids[k] : j->sus[k].agent;
        uint32_t c = coord_suspicion(j, a);
        int w;

        if (c == 0)
            continue;
        if (more > 0 || o + 60 > cap) { /* an entry and " and N more" fit */
            more++;
            continue;
        }
        w = snprintf(out + o, cap - o, "%sagent %llu (%u)", shown ? ", " : "",
                     (unsigned long long)a, c);
        if (w < 0 || (size_t)w >= cap - o) {
            out[o] = '\0';
            more++;
            continue;
        }
        o += (size_t)w;
        shown++;
    }
    if (more > 0 && o + 1 < cap)
        snprintf(out + o, cap - o, " and %u more", more);
}

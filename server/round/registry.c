/* The coordinator's registry: clocks, agents (by id, by name, revoked
 * certificates), jobs by id, and who may take part in which job
 * (eligibility, an agent busy elsewhere). */
#include "coord_int.h"
#include "round/quarantine.h"
#include "round/registry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include <time.h>

uint64_t coord_now_ms(const coord_t *co)
{
    return uv_now(co->loop);
}

int64_t coord_wall_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

coord_agent_t *coord_agent_find(const coord_t *co, uint64_t id)
{
    size_t lo = 0, hi = co->nagents;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (co->agents[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < co->nagents && co->agents[lo]->id == id ? co->agents[lo] : NULL;
}

static int fpr_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

bool coord_cert_revoked(const coord_t *co, const uint8_t fpr[32])
{
    return co->nrevoked > 0 && bsearch(fpr, co->revoked, co->nrevoked, 32, fpr_cmp) != NULL;
}

int coord_agent_set_ds(coord_agent_t *a, const sfl_dataset_summary_t *ds)
{
    double *labels = NULL;

    if (ds->nlabels > SFL_MSG_MAX_LABELS)
        return sfl__fail(SFL_EINVAL, "%u labels, more than %d", ds->nlabels,
                         SFL_MSG_MAX_LABELS);
    if (ds->nlabels > 0) {
        if ((labels = sfl__mallocarray(ds->nlabels, sizeof(*labels))) == NULL)
            return SFL_ENOMEM;
        memcpy(labels, ds->labels, ds->nlabels * sizeof(*labels));
    }
    sfl__free(a->ds.labels);
    a->ds.samples = ds->samples;
    a->ds.dimension = ds->dimension;
    a->ds.nlabels = ds->nlabels;
    a->ds.labels = labels;
    a->ds.first_column = ds->first_column;
    a->ds.has_ids = ds->has_ids;
    memcpy(a->ds.ids_hash, ds->ids_hash, sizeof(a->ds.ids_hash));
    return 0;
}

const sfl_dataset_summary_t *coord_agent_summary(const coord_agent_t *a, sfl_dataset_summary_t *tmp)
{
    memset(tmp, 0, sizeof(*tmp));
    tmp->samples = a->ds.samples;
    tmp->dimension = a->ds.dimension;
    tmp->nlabels = a->ds.nlabels;
    if (a->ds.nlabels > 0)
        memcpy(tmp->labels, a->ds.labels, a->ds.nlabels * sizeof(*tmp->labels));
    tmp->first_column = a->ds.first_column;
    tmp->has_ids = a->ds.has_ids;
    memcpy(tmp->ids_hash, a->ds.ids_hash, sizeof(tmp->ids_hash));
    return tmp;
}

void coord_agent_free(coord_agent_t *a)
{
    if (a == NULL)
        return;
    sfl__free(a->ds.labels);
    sfl__free(a);
}

/* FNV-1a: names are certificate CNs, the table is internal. */
static size_t name_hash(const char *name)
{
    uint64_t h = 14695981039346656037ull;

    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return (size_t)h;
}

/* Every agent is found by name in O(1): each connection's and each Join's
 * lookup would otherwise walk all 10,000. */
coord_agent_t *coord_agent_by_name(const coord_t *co, const char *name)
{
    size_t mask = co->cap_by_name - 1;

    if (co->cap_by_name == 0)
        return NULL;
    for (size_t i = name_hash(name) & mask; co->by_name[i] != NULL; i = (i + 1) & mask)
        if (strcmp(co->by_name[i]->name, name) == 0)
            return co->by_name[i];
    return NULL;
}

static void name_put(coord_agent_t **t, size_t cap, coord_agent_t *a)
{
    size_t i = name_hash(a->name) & (cap - 1);

    while (t[i] != NULL)
        i = (i + 1) & (cap - 1);
    t[i] = a;
}

/* Room for one more name, the table kept at most half full. */
static int name_reserve(coord_t *co)
{
    size_t cap = co->cap_by_name ? co->cap_by_name : 64;
    coord_agent_t **t;

    while (2 * (co->nagents + 1) > cap)
        cap *= 2;
    if (cap == co->cap_by_name)
        return 0;
    if ((t = sfl__calloc(cap, sizeof(*t))) == NULL)
        return SFL_ENOMEM;
    for (size_t i = 0; i < co->nagents; i++)
        name_put(t, cap, co->agents[i]);
    sfl__free(co->by_name);
    co->by_name = t;
    co->cap_by_name = cap;
    return 0;
}

int coord_agent_insert(coord_t *co, coord_agent_t *a)
{
    size_t pos = co->nagents;

    if (co->nagents == co->cap_agents) {
        size_t cap = co->cap_agents ? 2 * co->cap_agents : 16;
        coord_agent_t **na = sfl__reallocarray(co->agents, cap, sizeof(*na));

        if (na == NULL)
            return SFL_ENOMEM;
        co->agents = na;
        co->cap_agents = cap;
    }
    if (name_reserve(co) < 0)
        return SFL_ENOMEM;
    while (pos > 0 && co->agents[pos - 1]->id > a->id)
        pos--;
    memmove(co->agents + pos + 1, co->agents + pos, (co->nagents - pos) * sizeof(*co->agents));
    co->agents[pos] = a;
    co->nagents++;
    name_put(co->by_name, co->cap_by_name, a);
    return 0;
}

coord_job_t *coord_job_find(const coord_t *co, uint64_t id)
{
    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->id == id)
            return co->jobs[i];
    return NULL;
}

int coord_job_final(const coord_job_t *j)
{
    return j->state == SFL_JOB_CANCELLED || j->state == SFL_JOB_FINISHED ||
           j->state == SFL_JOB_FAILED;
}

/* Comma-separated tags for the store's text column. */
void coord_tags_text(const sfl_tags_t *t, char *out, size_t cap)
{
    size_t o = 0;

    out[0] = '\0';
    for (uint32_t i = 0; i < t->n; i++) {
        int n = snprintf(out + o, cap - o, "%s%s", i ? "," : "", t->tag[i]);

        if (n < 0 || (size_t)n >= cap - o) {
            out[o] = '\0';
            return;
        }
        o += (size_t)n;
    }
}

void coord_tags_parse(const char *s, sfl_tags_t *t)
{
    memset(t, 0, sizeof(*t));
    while (*s) {
        char tag[SFL_MSG_TAG_LEN];
        size_t n = strcspn(s, ",");

        if (n > 0 && n < sizeof(tag)) {
            memcpy(tag, s, n);
            tag[n] = '\0';
            if (sfl_msg_tags_add(t, tag) < 0) {
                /* a stored tag that is no longer valid is dropped */
            }
        }
        s += n + (s[n] == ',');
    }
}

/* ---- eligibility and pace steering ------------------------------------------------- */

/* Why the agent cannot serve the job (COORD_INELIG_NONE: it can), with a
 * detail into why (may be NULL) for the job's waiting reason. */
coord_inelig_t coord_ineligible(const coord_job_t *j, const coord_agent_t *a, char *why, size_t cap)
{
    const char *conds[2 * SFL_MSG_MAX_TAGS];
    coord_agent_info_t info;
    coord_inelig_t r;
    uint32_t n = 0, dim;
    char tmp[1];

    if (why == NULL) {
        why = tmp;
        cap = sizeof(tmp);
    }
    if (coord_quarantined(j, a->id) != NULL) {
        snprintf(why, cap, "quarantined: %s", coord_quarantined(j, a->id)->reason);
        return COORD_INELIG_QUARANTINED;
    }
    if (!a->joined) {
        snprintf(why, cap, "not joined since the coordinator started");
        return COORD_INELIG_NOT_JOINED;
    }
    /* A job's required conditions may be met by a capability ("gpu") or
     * by a reported condition ("mains_power"). */
    for (uint32_t i = 0; i < a->caps.n; i++)
        conds[n++] = a->caps.tag[i];
    for (uint32_t i = 0; i < a->conds.n; i++)
        conds[n++] = a->conds.tag[i];
    /* Whole rows, or a vertical job's column blocks: the kind says, and
     * which dimension the data must fit. Agents report integer targets as
     * labels, which a regression job ignores. */
    if ((r = j->shape->ineligible(j, a, &dim, why, cap)) != COORD_INELIG_NONE)
        return r;
    info = (coord_agent_info_t){dim, j->spec.nlabels ? a->ds.nlabels : 0, a->ds.samples, n,
                                conds};
    if ((r = coord_job_ineligible(&j->model.spec, &info, why, cap)) != COORD_INELIG_NONE)
        return r;
    for (uint32_t i = 0; j->spec.nlabels && i < a->ds.nlabels; i++) {
        uint32_t k = 0;

        while (k < j->spec.nlabels && j->spec.labels[k] != a->ds.labels[i])
            k++;
        if (k == j->spec.nlabels) {
            snprintf(why, cap, "label %g not among the job's labels", a->ds.labels[i]);
            return COORD_INELIG_LABELS;
        }
    }
    return COORD_INELIG_NONE;
}

int coord_eligible(const coord_job_t *j, const coord_agent_t *a)
{
    return j->ready && coord_ineligible(j, a, NULL, 0) == COORD_INELIG_NONE;
}

int coord_running(const coord_job_t *j)
{
    return j->ready && j->state == SFL_JOB_RUNNING && !j->co->stopping;
}

/* Selected for another job's attempt and not done with it yet. */
int coord_busy_elsewhere(const coord_t *co, const coord_agent_t *a, const coord_job_t *self)
{
    for (size_t i = 0; i < co->njobs; i++) {
        const coord_job_t *j = co->jobs[i];
        const coord_member_t *m;

        if (j == self || !coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING)
            continue;
        m = coord_round_member(&j->rnd, a->id);
        if (m && m->state == COORD_MEMBER_PENDING)
            return 1;
    }
    return 0;
}

/* Some running job could select the agent (now or in a later round). */
int coord_usable(const coord_t *co, const coord_agent_t *a)
{
    for (size_t i = 0; i < co->njobs; i++)
        if (coord_running(co->jobs[i]) && coord_eligible(co->jobs[i], a))
            return 1;
    return 0;
}

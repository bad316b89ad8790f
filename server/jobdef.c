/* Job definitions: a [job NAME] section's keys onto a job spec, and the
 * wire spec (CreateJob) onto job.h's, with the coordinator's checks. */
#include "coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/alloc.h"
#include "sfl/ini.h"
#include "sfl/loss.h"
#include "sfl/msg.h"

#include "job.h"

/* ---- job definitions ([job NAME]) ----------------------------------------------- */

struct coord_jobdef {
    coord_job_spec_t spec;
    uint32_t nlabels;
    double labels[SFL_MSG_MAX_LABELS];
    int paused;
};

int coord_job_section(const char *section, const char **name)
{
    const char *n = section + 4;

    *name = NULL;
    if (strncmp(section, "job ", 4) != 0)
        return 0;
    if (strlen(section) > SFL_INI_SECTION_MAX)
        return sfl__fail(SFL_EINVAL, "[%s...]: job names in INI files are at most %d characters",
                         section, SFL_INI_SECTION_MAX - 4);
    while (*n == ' ')
        n++;
    if (*n == '\0')
        return sfl__fail(SFL_EINVAL, "[%s]: the job needs a name, [job NAME]", section);
    *name = n;
    return 1;
}

int coord_jobdef_new(const char *name, coord_jobdef_t **out)
{
    coord_jobdef_t *d;
    int rc;

    *out = NULL;
    d = sfl__calloc(1, sizeof(*d));
    if (d == NULL)
        return SFL_ENOMEM;
    coord_job_spec_default(&d->spec);
    if ((rc = coord_job_spec_set(&d->spec, "name", name)) < 0) {
        sfl__free(d);
        return rc;
    }
    *out = d;
    return 0;
}

void coord_jobdef_free(coord_jobdef_t *d)
{
    sfl__free(d);
}

int coord_jobdef_set(coord_jobdef_t *d, const char *key, const char *v)
{
    if (strcmp(key, "labels") == 0) {
        const char *p = v;
        uint32_t n = 0;

        while (*p) {
            char *end;
            double x;

            errno = 0;
            x = strtod(p, &end);
            if (end == p || errno || !isfinite(x) || (*end != ',' && *end != '\0') ||
                n == SFL_MSG_MAX_LABELS || (n > 0 && x <= d->labels[n - 1]))
                return sfl__fail(SFL_EINVAL,
                                 "labels: want up to %d finite values, ascending, comma-separated",
                                 SFL_MSG_MAX_LABELS);
            d->labels[n++] = x;
            p = *end ? end + 1 : end;
        }
        d->nlabels = n;
        return 0;
    }
    if (strcmp(key, "paused") == 0) {
        if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
            return sfl__fail(SFL_EINVAL, "paused: want 0 or 1, got '%s'", v);
        d->paused = v[0] == '1';
        return 0;
    }
    return coord_job_spec_set(&d->spec, key, v);
}

/* The wire spec of a [job] section (what CreateJob would carry). Details
 * do not name the job: every caller says which section or job it was. */
static int jobdef_to_wire(const coord_jobdef_t *d, sfl_job_spec_t *w)
{
    const coord_job_spec_t *s = &d->spec;

    memset(w, 0, sizeof(*w));
    if (d->nlabels == 0 && s->nclasses > 0)
        return sfl__fail(SFL_EINVAL, "classes = %u needs labels = v1,v2,...", s->nclasses);
    if (d->nlabels > 0 && s->nclasses > 0 && s->nclasses != d->nlabels)
        return sfl__fail(SFL_EINVAL, "classes = %u but %u labels", s->nclasses, d->nlabels);
    if (s->round.deadline_ms > UINT32_MAX || s->round.heartbeat_ms > UINT32_MAX)
        return sfl__fail(SFL_EINVAL, "deadline_ms and heartbeat_ms must be below 2^32");
    snprintf(w->name, sizeof(w->name), "%s", s->name);
    snprintf(w->algorithm, sizeof(w->algorithm), "%s", s->algo);
    snprintf(w->loss, sizeof(w->loss), "%s", s->loss);
    {
        sfl_algo_params_t params;
        int rc = coord_job_spec_params(s, &params);

        if (rc < 0)
            return rc;
        sfl_algo_params_to_list(&params, &w->params);
    }
    w->dimension = s->ncols;
    w->nlabels = d->nlabels;
    memcpy(w->labels, d->labels, d->nlabels * sizeof(double));
    w->rounds = s->rounds;
    w->cohort_size = s->round.cohort;
    w->over_selection = s->round.overselect;
    w->min_quorum = s->round.min_quorum;
    w->round_deadline_ms = (uint32_t)s->round.deadline_ms;
    w->value_encoding = s->encoding;
    w->seed = s->seed;
    for (uint32_t i = 0; i < s->nconditions; i++)
        if (sfl_msg_tags_add(&w->required_conditions, s->conditions[i]) < 0)
            return sfl__fail(SFL_EINVAL, "conditions: '%s' is not a tag (1-31 of [a-z0-9_.:-])",
                             s->conditions[i]);
    w->max_attempts = s->round.max_attempts;
    w->paused = d->paused;
    w->heartbeat_timeout_ms = (uint32_t)s->round.heartbeat_ms;
    w->ordered_aggregation = s->ordered;
    w->max_update_norm = s->limits.max_norm;
    w->max_samples = s->limits.max_weight;
    return 0;
}


int coord_jobdef_wire(const coord_jobdef_t *d, sfl_job_spec_t *w)
{
    coord_job_spec_t s;
    uint8_t *buf = NULL;
    size_t len;
    int rc;

    if ((rc = jobdef_to_wire(d, w)) < 0 || (rc = coord_spec_from_wire(w, &s)) < 0)
        return rc;
    rc = sfl_msg_create_job_pack(w, &buf, &len);
    sfl_msg_buf_free(buf);
    return rc;
}

int coord_jobdef_check(const coord_jobdef_t *d)
{
    sfl_job_spec_t w;

    return coord_jobdef_wire(d, &w);
}

/* The job.h spec of a wire spec, with the coordinator's checks. */
int coord_spec_from_wire(const sfl_job_spec_t *w, coord_job_spec_t *s)
{
    coord_job_spec_default(s);
    if (strlen(w->algorithm) >= sizeof(s->algo) || sfl_algo_find(w->algorithm) == NULL)
        return sfl__fail(SFL_EINVAL, "algorithm: unknown algorithm '%s'", w->algorithm);
    if (strlen(w->loss) >= sizeof(s->loss) || sfl_loss_find(w->loss) == NULL)
        return sfl__fail(SFL_EINVAL, "loss: unknown loss '%s' (lsq, logistic, softmax)",
                         w->loss);
    if (w->dictionary[0])
        return sfl__fail(SFL_EINVAL, "dictionary: not supported by this coordinator yet");
    if (w->required_conditions.n > COORD_MAX_CONDITIONS)
        return sfl__fail(SFL_EINVAL, "required_conditions: at most %d",
                         COORD_MAX_CONDITIONS);
    /* lengths checked above (name: both 64) */
    memcpy(s->name, w->name, sizeof(s->name));
    memcpy(s->algo, w->algorithm, strlen(w->algorithm) + 1);
    memcpy(s->loss, w->loss, strlen(w->loss) + 1);
    s->params = w->params;
    s->ncols = w->dimension;
    s->nclasses = w->nlabels;
    s->rounds = w->rounds;
    s->round = (coord_round_cfg_t){.cohort = w->cohort_size,
                                   .overselect = w->over_selection,
                                   .min_quorum = w->min_quorum,
                                   .deadline_ms = w->round_deadline_ms,
                                   .heartbeat_ms = w->heartbeat_timeout_ms,
                                   .max_attempts = w->max_attempts};
    s->encoding = w->value_encoding;
    s->seed = w->seed;
    s->ordered = w->ordered_aggregation;
    s->limits = (sfl_fold_limits_t){.max_norm = w->max_update_norm,
                                    .max_weight = w->max_samples};
    s->nconditions = w->required_conditions.n;
    for (uint32_t i = 0; i < s->nconditions; i++)
        snprintf(s->conditions[i], sizeof(s->conditions[i]), "%s",
                 w->required_conditions.tag[i]);
    return coord_job_spec_check(s);
}

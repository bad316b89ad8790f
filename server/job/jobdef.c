/* Job definitions: a [job NAME] section's keys onto a job spec, and the
 * wire spec (CreateJob) onto job.h's, with the coordinator's checks. */
#include "job/jobdef.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/ini.h"
#include "sfl/model/loss.h"
#include "sfl/wire/msg.h"

#include "job/model.h"

/* ---- job definitions ([job NAME]) ----------------------------------------------- */

/* A section being read: the spec itself, and the one key that is not part
 * of it ("classes", only checked against the labels' count). */
struct coord_jobdef {
    sfl_job_spec_t spec;
    uint32_t classes; /* 0: not given */
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
    if (strcmp(key, "classes") == 0) {
        char *end;
        unsigned long n;

        errno = 0;
        n = strtoul(v, &end, 10);
        if (*v == '-' || end == v || *end || errno || n == 0 || n > SFL_MSG_MAX_LABELS)
            return sfl__fail(SFL_EINVAL, "classes: want 1..%d, got '%s'", SFL_MSG_MAX_LABELS, v);
        d->classes = (uint32_t)n;
        return 0;
    }
    return coord_job_spec_set(&d->spec, key, v);
}

/* The spec a [job] section makes, as CreateJob carries it: every parameter
 * of the algorithm named (the defaults filled in), checked as the
 * coordinator and the message check it. Details do not name the job: every
 * caller says which section or job it was. */
int coord_jobdef_wire(const coord_jobdef_t *d, sfl_job_spec_t *w)
{
    sfl_algo_params_t params;
    uint8_t *buf = NULL;
    size_t len;
    int rc;

    *w = d->spec;
    if (d->classes > 0 && w->nlabels == 0)
        return sfl__fail(SFL_EINVAL, "classes = %u needs labels = v1,v2,...", d->classes);
    if (d->classes > 0 && d->classes != w->nlabels)
        return sfl__fail(SFL_EINVAL, "classes = %u but %u labels", d->classes, w->nlabels);
    if ((rc = coord_job_spec_params(w, &params)) < 0)
        return rc;
    sfl_algo_params_to_list(&params, &w->params);
    if ((rc = coord_job_spec_check(w)) < 0)
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

/* sflctl's job files: one [job NAME] section with a coordinator.ini job's
 * keys, checked as the coordinator checks a CreateJob. */
#include "ctl.h"

#include <stdio.h>
#include <string.h>

#include "job/jobdef.h"
#include "sfl/core/alloc.h"
#include "sfl/core/ini.h"

typedef struct job_ctx {
    coord_jobdef_t *d; /* made at the first key */
    char section[128]; /* the [job NAME] seen, "" before */
    int rc;
} job_ctx_t;

static int job_key(job_ctx_t *x, const char *section, const char *key, const char *v)
{
    const char *name;
    int rc = coord_job_section(section, &name);

    if (rc < 0)
        return rc;
    if (rc == 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [job NAME])", section);
    if (x->section[0] == '\0') {
        if ((rc = coord_jobdef_new(name, &x->d)) < 0)
            return rc;
        snprintf(x->section, sizeof(x->section), "%s", section);
    } else if (strcmp(x->section, section) != 0) {
        return sfl__fail(SFL_EINVAL, "[%s]: a job file holds one [job NAME] section", section);
    }
    if (strcmp(key, "name") == 0)
        return sfl__fail(SFL_EINVAL, "name: the job's name is the section's, [job NAME]");
    return coord_jobdef_set(x->d, key, v);
}

static int on_job_key(void *ud, const char *section, const char *name, const char *value)
{
    return job_key(ud, section, name, value);
}

/* A job file's text (file or buffer) into out. */
static int job_parse(const char *path, const char *buf, size_t len, sfl_job_spec_t *out)
{
    job_ctx_t x;
    int rc;

    memset(&x, 0, sizeof(x));
    rc = buf ? sfl_ini_parse_buffer(path, buf, len, on_job_key, &x)
             : sfl_ini_parse_file(path, on_job_key, &x);
    if (rc < 0)
        goto out;
    if (x.section[0] == '\0') {
        rc = sfl__fail(SFL_EINVAL, "%s: no [job NAME] section", path);
        goto out;
    }
    /* Checked as the coordinator checks a CreateJob, so nothing is sent
     * that it refuses. */
    if ((rc = coord_jobdef_wire(x.d, out)) < 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        rc = sfl__fail(rc, "%s: [%s]: %s", path, x.section, detail);
    }
out:
    coord_jobdef_free(x.d);
    return rc;
}

int ctl_job_load(const char *path, sfl_job_spec_t *out)
{
    return job_parse(path, NULL, 0, out);
}

int ctl_job_parse(const char *name, const char *buf, size_t len, sfl_job_spec_t *out)
{
    return job_parse(name, buf ? buf : "", len, out);
}

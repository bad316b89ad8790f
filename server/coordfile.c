#include "coordfile.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/ini.h"

void coord_file_clear(coord_file_t *f)
{
    for (size_t i = 0; i < f->njobs; i++)
        coord_jobdef_free(f->jobs[i]);
    f->njobs = 0;
}

static int jobdef_for(coord_file_t *f, const char *name, coord_jobdef_t **out)
{
    int rc;

    for (size_t i = 0; i < f->njobs; i++)
        if (strcmp(f->names[i], name) == 0) {
            *out = f->jobs[i];
            return 0;
        }
    if (f->njobs == COORD_FILE_MAX_JOBS)
        return sfl__fail(SFL_ELIMIT, "more than %d [job] sections", COORD_FILE_MAX_JOBS);
    if (strlen(name) >= sizeof(f->names[0]))
        return sfl__fail(SFL_EINVAL, "job name '%s' is longer than 63 characters", name);
    if ((rc = coord_jobdef_new(name, &f->jobs[f->njobs])) < 0)
        return rc;
    snprintf(f->names[f->njobs], sizeof(f->names[0]), "%s", name);
    *out = f->jobs[f->njobs++];
    return 0;
}

static int on_key(void *ud, const char *section, const char *key, const char *value)
{
    coord_file_t *f = ud;
    coord_jobdef_t *d = NULL;
    const char *jn;
    int rc;

    if (strcmp(section, "coordinator") == 0)
        return coord_config_set(&f->cfg, key, value);
    if ((rc = coord_job_section(section, &jn)) < 0)
        return rc;
    if (rc == 0)
        return sfl__fail(SFL_EINVAL,
                         "unknown section [%s] (expected [coordinator] or [job NAME])", section);
    if ((rc = jobdef_for(f, jn, &d)) < 0)
        return rc;
    return coord_jobdef_set(d, key, value);
}

int coord_file_load(coord_file_t *f, const char *path)
{
    return sfl_ini_parse_file(path, on_key, f);
}

int coord_file_parse(coord_file_t *f, const char *name, const char *buf, size_t len)
{
    return sfl_ini_parse_buffer(name, buf ? buf : "", len, on_key, f);
}

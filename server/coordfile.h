/* coordinator.ini as read by sfl-coordinator (and its fuzzer): the
 * [coordinator] keys onto a configuration and one job definition per
 * [job NAME] section, through sfl/core/ini.h (errors name file, line and key). */
#ifndef COORD_COORDFILE_H
#define COORD_COORDFILE_H

#include <stddef.h>

#include "coord.h"

#define COORD_FILE_MAX_JOBS 256

typedef struct coord_file {
    coord_config_t cfg;                       /* start from coord_config_default */
    char names[COORD_FILE_MAX_JOBS][64];      /* of the [job NAME] sections */
    coord_jobdef_t *jobs[COORD_FILE_MAX_JOBS]; /* owned */
    size_t njobs;
} coord_file_t;

/* Sets the file's keys on f->cfg and adds its jobs to f (keys of a job
 * given in several sections of the same name go to one definition). Jobs
 * are not checked here (coord_jobdef_check). On failure f holds what was
 * read before the error; coord_file_clear it either way. */
int coord_file_load(coord_file_t *f, const char *path) SFL_MUST_CHECK;
/* The same over buf[0..len) (borrowed), errors named after name. */
int coord_file_parse(coord_file_t *f, const char *name, const char *buf,
                     size_t len) SFL_MUST_CHECK;
/* Frees the job definitions; cfg stays. */
void coord_file_clear(coord_file_t *f);

#endif

/* libFuzzer entry point for the INI files, through the programs' real
 * parsers: each input is read as a coordinator.ini (coord_file_parse, then
 * every job checked as at start), a job file (ctl_job_parse), an agent.ini
 * (agent_config_parse) and an sflctl.ini (ctl_config_parse), and by
 * sfl_ini_parse_buffer itself with a callback that checks what it is given.
 * Every failure must name the file. Built with libsfl, libcoord and libagent
 * (-Ilibsfl/include -Ilibsfl/src -Iserver -Iclient-agent). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "coordfile.h"
#include "ctl.h"
#include "sfl/core/ini.h"

#define NAME "fuzz.ini"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A failure says which file. */
static void named(int rc)
{
    if (rc < 0 && strncmp(sfl_last_error(), NAME, strlen(NAME)) != 0)
        __builtin_trap();
}

static int check_pair(void *ud, const char *section, const char *key, const char *value)
{
    (void)ud;
    if (strlen(section) > SFL_INI_SECTION_MAX || key[0] == '\0' || value == NULL)
        __builtin_trap();
    /* refuse some keys, as a program would */
    if (key[0] == 'x')
        return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    static coord_file_t f;
    agent_config_t a;
    ctl_config_t c;
    sfl_job_spec_t w;
    int rc;

    named(sfl_ini_parse_buffer(NAME, buf, size, check_pair, NULL));

    coord_config_default(&f.cfg);
    rc = coord_file_parse(&f, NAME, buf, size);
    named(rc);
    if (rc == 0) {
        (void)coord_config_check(&f.cfg);
        for (size_t i = 0; i < f.njobs; i++)
            (void)coord_jobdef_check(f.jobs[i]);
    }
    coord_file_clear(&f);

    named(ctl_job_parse(NAME, buf, size, &w));

    agent_config_default(&a);
    rc = agent_config_parse(&a, NAME, buf, size);
    named(rc);
    if (rc == 0)
        (void)agent_config_check(&a);

    ctl_config_default(&c);
    rc = ctl_config_parse(&c, NAME, buf, size);
    named(rc);
    if (rc == 0)
        (void)ctl_config_check(&c);
    return 0;
}

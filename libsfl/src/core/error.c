#include "sfl/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[512];

const char *sfl_strerror(int err)
{
    switch (err) {
#define SFL_ERR_CASE(name, val, msg)                                           \
    case SFL_##name:                                                           \
        return msg;
        SFL_ERRNO_MAP(SFL_ERR_CASE)
#undef SFL_ERR_CASE
    case 0:
        return "success";
    default:
        /* -errno from the system passes through unchanged. */
        if (err < 0 && err > -4096)
            return strerror(-err);
        return "unknown error";
    }
}

const char *sfl_last_error(void)
{
    return detail;
}

const char *sfl_error_message(int err)
{
    static _Thread_local char msg[sizeof(detail) + 128];
    const char *why = sfl_strerror(err);

    if (detail[0] == '\0')
        snprintf(msg, sizeof(msg), "%s", why);
    else if (err < 0 && err > -4096 && strstr(detail, why) == NULL)
        snprintf(msg, sizeof(msg), "%s: %s", detail, why);
    else
        snprintf(msg, sizeof(msg), "%s", detail);
    return msg;
}

int sfl__fail(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    return err;
}

void sfl__clear_error(void)
{
    detail[0] = '\0';
}

#include "sfl/core/error.h"

#include <ctype.h>
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

/* needle in hay, ASCII case ignored: libuv says "address already in use"
 * where strerror says "Address already in use". */
static int says(const char *hay, const char *needle)
{
    size_t n = strlen(needle);

    for (; *hay; hay++) {
        size_t i = 0;

        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

const char *sfl_error_message(int err)
{
    static _Thread_local char msg[sizeof(detail) + 128];
    const char *why = sfl_strerror(err);

    /* why cut at 120 characters (strerror's are under 60), so "detail: why"
     * always fits: gcc checks that on 32-bit targets, where an unbounded
     * "%s" could be 2^31 characters long. */
    if (detail[0] == '\0')
        snprintf(msg, sizeof(msg), "%s", why);
    else if (err < 0 && err > -4096 && !says(detail, why))
        snprintf(msg, sizeof(msg), "%s: %.120s", detail, why);
    else
        snprintf(msg, sizeof(msg), "%s", detail);
    return msg;
}

/* Through a copy: an argument may be sfl_last_error() itself. */
static void vdetail(const char *fmt, va_list ap)
{
    char tmp[sizeof(detail)];

    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    memcpy(detail, tmp, sizeof(detail));
}

/* detail = "<fmt>: <detail as it was>", through a copy of the old one. */
static void vprepend(const char *fmt, va_list ap)
{
    char old[sizeof(detail)];
    int n;

    memcpy(old, detail, sizeof(old));
    vdetail(fmt, ap);
    n = (int)strlen(detail);
    /* ": " and as much of the old detail as fits, always terminated. */
    if ((size_t)n + 3 < sizeof(detail) && old[0] != '\0') {
        size_t room = sizeof(detail) - (size_t)n - 3, k = strnlen(old, room);

        memcpy(detail + n, ": ", 2);
        memcpy(detail + n + 2, old, k);
        detail[n + 2 + k] = '\0';
    }
}

void sfl__detail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vdetail(fmt, ap);
    va_end(ap);
}

void sfl__prepend(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vprepend(fmt, ap);
    va_end(ap);
}

int sfl__detail_ret(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vdetail(fmt, ap);
    va_end(ap);
    return err;
}

int sfl__prepend_ret(int err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vprepend(fmt, ap);
    va_end(ap);
    return err;
}

void sfl__clear_error(void)
{
    detail[0] = '\0';
}

/* Log lines (log.h): the format every sfl program shares. */
#include "sfl/core/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static sfl_log_level_t log_level = SFL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
#define N_LEVELS (sizeof(level_names) / sizeof(level_names[0]))

const char *sfl_log_level_name(sfl_log_level_t level)
{
    return (unsigned)level < N_LEVELS ? level_names[level] : "?";
}

int sfl_log_level_parse(const char *name, sfl_log_level_t *out)
{
    for (size_t i = 0; i < N_LEVELS; i++)
        if (name != NULL && strcmp(name, level_names[i]) == 0) {
            *out = (sfl_log_level_t)i;
            return 0;
        }
    return sfl__fail(SFL_EINVAL, "log_level: '%.40s' is not debug, info, warn or error",
                     name ? name : "");
}

void sfl_log_set_level(sfl_log_level_t level)
{
    log_level = level;
}

sfl_log_level_t sfl_log_get_level(void)
{
    return log_level;
}

void sfl_log_vwrite(FILE *f, sfl_log_level_t level, const char *event, const char *fmt,
                    va_list ap)
{
    char line[2048], ts[32];
    struct timespec now;
    struct tm tm;
    int n;

    if (f == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof(line), "ts=%s.%03ldZ level=%s event=%s", ts,
                 now.tv_nsec / 1000000, sfl_log_level_name(level), event);
    if (fmt && *fmt && n > 0 && (size_t)n + 1 < sizeof(line)) {
        line[n++] = ' ';
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    }
    /* One write per line, so concurrent writers do not interleave. */
    fprintf(f, "%s\n", line);
}

void sfl_log(sfl_log_level_t level, const char *event, const char *fmt, ...)
{
    va_list ap;

    if (level < log_level)
        return;
    va_start(ap, fmt);
    sfl_log_vwrite(stderr, level, event, fmt, ap);
    va_end(ap);
}

const char *sfl_log_quote(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    int bare;

    if (s == NULL)
        s = "";
    bare = s[0] != '\0';
    for (const char *p = s; *p && bare; p++)
        if (*p <= ' ' || *p > '~' || *p == '"' || *p == '=')
            bare = 0;
    if (cap == 0)
        return out;
    if (bare) {
        snprintf(out, cap, "%s", s);
        return out;
    }
    if (cap < 3) {
        out[0] = '\0';
        return out;
    }
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[5];
        size_t n;

        if (*p == '"' || *p == '\\')
            n = (size_t)snprintf(esc, sizeof(esc), "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            n = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
        else
            n = (size_t)snprintf(esc, sizeof(esc), "%c", *p);
        if (o + n + 2 > cap)
            break;
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

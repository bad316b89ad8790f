/* Log lines, one format for every sfl program (the coordinator's, the
 * agent's): one line per event,
 *   ts=2026-11-27T22:17:23.857Z level=info event=round_committed job=1 ...
 * the UTC time to the millisecond, a level, an event name, then key=value
 * pairs; values from peers or files go through sfl_log_quote. Levels, from
 * the chattiest: debug, info, warn, error. */
#ifndef SFL_LOG_H
#define SFL_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "sfl/core/error.h"

typedef enum {
    SFL_LOG_DEBUG = 0,
    SFL_LOG_INFO,
    SFL_LOG_WARN,
    SFL_LOG_ERROR
} sfl_log_level_t;

/* "debug", "info", "warn", "error"; "?" outside the enum. */
const char *sfl_log_level_name(sfl_log_level_t level);
/* SFL_EINVAL (detail "log_level: 'NAME' is not debug, info, warn or error")
 * for any other name. */
int sfl_log_level_parse(const char *name, sfl_log_level_t *out) SFL_MUST_CHECK;

/* The process-wide level below which sfl_log drops lines [info]. */
void sfl_log_set_level(sfl_log_level_t level);
sfl_log_level_t sfl_log_get_level(void);
/* One line to stderr if level is at least the process-wide one. fmt gives
 * the key=value pairs after event (NULL or "" for none). */
void sfl_log(sfl_log_level_t level, const char *event, const char *fmt, ...) SFL_PRINTF(3, 4);
/* One line to f (borrowed) whatever the process-wide level: for a component
 * that keeps its own level and stream. A line is cut at 2 KiB and written
 * with one call, so lines of concurrent writers do not interleave. */
void sfl_log_vwrite(FILE *f, sfl_log_level_t level, const char *event, const char *fmt,
                    va_list ap);

/* s as a log value: bare if it is non-empty printable ASCII without space,
 * '"' or '=', else double-quoted with '"' and '\' escaped and other bytes
 * outside 0x20..0x7e as \xNN; NULL as "". Truncated to fit cap. Returns
 * out. */
const char *sfl_log_quote(const char *s, char *out, size_t cap);

#endif

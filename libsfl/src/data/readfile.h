/* Library-internal helpers shared by the text readers (libsvm.c, csv.c):
 * reading a whole file under a size bound, splitting lines, and parsing
 * one number token. Not installed; names are sfl__. */
#ifndef SFL_DATA_READFILE_H
#define SFL_DATA_READFILE_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

/* Longest number token sfl__parse_number accepts: real data needs ~25
 * bytes, and the cap lets it copy into a stack buffer since the input is
 * not NUL-terminated. */
#define SFL__NUM_MAX 127
/* Longest token excerpt quoted in an error message. */
#define SFL__EXCERPT_MAX 24
/* Size of the buffer sfl__excerpt writes: the excerpt, "...", NUL. */
#define SFL__EXCERPT_BUF (SFL__EXCERPT_MAX + 4)

/* Results of sfl__parse_number. */
enum {
    SFL__NUM_OK = 0,
    SFL__NUM_LONG,     /* longer than SFL__NUM_MAX bytes */
    SFL__NUM_BAD,      /* empty, leading space or not all of it a number */
    SFL__NUM_NONFINITE /* nan, inf, or overflows a double (1e999) */
};

/* Field separators inside a line. */
static inline int sfl__is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Parses all of s[0..n) as a finite double (strtod syntax: decimal, or C99
 * hex floats such as 0x1p-3; underflow gives 0 or a subnormal, accepted).
 * Returns SFL__NUM_*; *v is written for SFL__NUM_OK and NONFINITE. */
int sfl__parse_number(const char *s, size_t n, double *v);

/* Printable copy of s[0..n) for an error message in out (SFL__EXCERPT_BUF
 * bytes): at most SFL__EXCERPT_MAX bytes then "...", non-printable bytes as
 * '?', so a file cannot put control characters into a log line. Returns out. */
const char *sfl__excerpt(char out[SFL__EXCERPT_BUF], const char *s, size_t n);

/* The line of buf[0..len) starting at pos (< len): *end is its '\n' (or
 * len), *content ends before a trailing '\r'. */
void sfl__line_bounds(const char *buf, size_t len, size_t pos, size_t *end, size_t *content);

/* Checks line number `line` (s[0..n), without its '\n'): SFL_ELIMIT when
 * longer than max_line, SFL_EPARSE at a NUL byte; the detail is
 * "name:line:col: ...". */
int sfl__check_line(const char *name, size_t line, const char *s, size_t n, size_t max_line);

/* Largest file the limits describe: max_rows + extra_lines lines (a header,
 * say) of max_line bytes plus a newline, saturating below SIZE_MAX. lim ==
 * NULL means the defaults. */
size_t sfl__read_bound(const sfl_read_limits_t *lim, uint32_t extra_lines);

/* Reads all of path into *out (returns owned, free with sfl__free; not
 * NUL-terminated) and its length into *outlen. Fails with -errno (-ENOENT,
 * -EISDIR, ...) or SFL_ELIMIT for more than max bytes, checked before
 * reading for regular files and while reading for pipes and devices. */
int sfl__read_file(const char *path, size_t max, char **out, size_t *outlen) SFL_MUST_CHECK;

#endif

#include "data/readfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

int sfl__parse_number(const char *s, size_t n, double *v)
{
    char tmp[SFL__NUM_MAX + 1];
    char *end;

    if (n > SFL__NUM_MAX)
        return SFL__NUM_LONG;
    if (n == 0 || isspace((unsigned char)s[0]))
        return SFL__NUM_BAD; /* strtod would skip leading white space */
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    *v = strtod(tmp, &end);
    /* A NUL inside the token also ends strtod early, so it lands here. */
    if (end != tmp + n)
        return SFL__NUM_BAD;
    if (!isfinite(*v))
        return SFL__NUM_NONFINITE;
    return SFL__NUM_OK;
}

const char *sfl__excerpt(char out[SFL__EXCERPT_BUF], const char *s, size_t n)
{
    size_t m = n > SFL__EXCERPT_MAX ? SFL__EXCERPT_MAX : n, i;

    for (i = 0; i < m; i++)
        out[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
    if (m < n)
        out[i++] = '.', out[i++] = '.', out[i++] = '.';
    out[i] = '\0';
    return out;
}

void sfl__line_bounds(const char *buf, size_t len, size_t pos, size_t *end, size_t *content)
{
    const char *nl = memchr(buf + pos, '\n', len - pos);
    size_t e = nl ? (size_t)(nl - buf) : len;

    *end = e;
    *content = (e > pos && buf[e - 1] == '\r') ? e - 1 : e;
}

int sfl__check_line(const char *name, size_t line, const char *s, size_t n, size_t max_line)
{
    /* Length first: a reader can then rely on lines being bounded even
     * when the line also holds a NUL further on. */
    if (n > max_line)
        return sfl__fail(SFL_ELIMIT, "%s:%zu:%zu: line longer than %zu bytes", name, line,
                         max_line + 1, max_line);
    const char *nul = memchr(s, '\0', n);
    if (nul)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: NUL byte in text", name, line,
                         (size_t)(nul - s) + 1);
    return 0;
}

/* Blank and comment lines do not count as rows, so a valid file could in
 * principle be longer than this; that is the price of refusing huge files
 * before reading them. */
size_t sfl__read_bound(const sfl_read_limits_t *lim, uint32_t extra_lines)
{
    sfl_read_limits_t deflim;

    if (lim == NULL) {
        sfl_read_limits_default(&deflim);
        lim = &deflim;
    }
    size_t per = lim->max_line < SIZE_MAX ? lim->max_line + 1 : SIZE_MAX;
    size_t rows = (size_t)lim->max_rows + extra_lines;

    /* uint32 + uint32 wraps only where size_t is 32 bits: saturate too. */
    if (rows < lim->max_rows || (per != 0 && rows > (SIZE_MAX - 1) / per))
        return SIZE_MAX - 1;
    return rows * per;
}

int sfl__read_file(const char *path, size_t max, char **out, size_t *outlen)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0, cap;
    int fd, rc = 0;

    /* max + 1 below must not wrap. */
    if (max == SIZE_MAX)
        max = SIZE_MAX - 1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sfl__fail(-errno, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        rc = sfl__fail(-errno, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = sfl__fail(-EISDIR, "%s: %s", path, strerror(EISDIR));
        goto out;
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max) {
        rc = sfl__fail(SFL_ELIMIT, "%s: %jd bytes is more than the read limits allow (%zu)",
                       path, (intmax_t)st.st_size, max);
        goto out;
    }
    /* Regular files: one allocation of the known size (+1 so EOF is seen
     * without growing). Pipes and the like grow by doubling up to max + 1,
     * and that extra byte is how "more than max" shows. */
    cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    if (cap > max)
        cap = max + 1;
    buf = sfl__malloc(cap);
    if (buf == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                rc = sfl__fail(SFL_ELIMIT, "%s: more than %zu bytes, the read limits' bound",
                               path, max);
                goto out;
            }
            size_t ncap = cap > max / 2 ? max + 1 : cap * 2;
            char *nb = sfl__reallocarray(buf, ncap, 1);
            if (nb == NULL) {
                rc = SFL_ENOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = sfl__fail(-errno, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *out = buf;
    *outlen = len;
    buf = NULL;
out:
    sfl__free(buf);
    close(fd);
    return rc;
}

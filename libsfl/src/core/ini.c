/* INI files through libinih's ini_parse_stream, with our own line reader:
 * the reader counts lines (so the callback's errors carry a line number
 * without libinih's compile-time INI_HANDLER_LINENO), refuses what libinih
 * would silently cut (long lines, NUL bytes), strips leading blanks (so
 * libinih never takes an indented line for a continuation), and stops the
 * parse at the first error by returning NULL. */
#include "sfl/core/ini.h"

#include <errno.h>
#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* A (section, key) seen, for duplicates: section '\0' key '\0'. */
typedef struct seen {
    char *sk;
    size_t len; /* of sk, the NULs inside included */
    int line;
} seen_t;

typedef struct src {
    const char *name;
    FILE *f;           /* a file, or */
    const char *buf;   /* a buffer */
    size_t len, pos;
    size_t total;      /* bytes read */
    int line;          /* lines handed to libinih so far: the current one */
    int rc, err_line;  /* the first error of ours (0: none) */
    char detail[400];
    sfl_ini_cb cb;
    void *ud;
    seen_t *seen;      /* open addressing, cap a power of two */
    size_t nseen, cap;
} src_t;

static int next_byte(src_t *s)
{
    int c;

    if (s->f != NULL) {
        c = getc(s->f);
        if (c == EOF && ferror(s->f))
            return -2;
        return c;
    }
    return s->pos < s->len ? (unsigned char)s->buf[s->pos++] : EOF;
}

/* Records the first error at the current line. */
static void fail_at(src_t *s, int rc, const char *detail)
{
    if (s->rc != 0)
        return;
    s->rc = rc;
    s->err_line = s->line;
    snprintf(s->detail, sizeof(s->detail), "%s", detail);
}

/* fgets for libinih: one line (with its '\n') into str[0..num), blanks at
 * its start removed. NULL at the end, or to stop after an error. */
static char *reader(char *str, int num, void *stream)
{
    src_t *s = stream;
    size_t n = 0;
    int c, start = 1, any = 0;
    char why[96];

    if (s->rc != 0 || num < 3)
        return NULL;
    s->line++;
    for (;;) {
        c = next_byte(s);
        if (c == -2) {
            s->line--;
            fail_at(s, SFL_EIO, "read error");
            return NULL;
        }
        if (c == EOF)
            break;
        any = 1;
        if (++s->total > SFL_INI_MAX_BYTES) {
            snprintf(why, sizeof(why), "file larger than %u bytes", SFL_INI_MAX_BYTES);
            fail_at(s, SFL_ELIMIT, why);
            return NULL;
        }
        if (c == '\0') {
            fail_at(s, SFL_EPARSE, "NUL byte in the line");
            return NULL;
        }
        if (start && (c == ' ' || c == '\t'))
            continue;
        start = 0;
        if (c == '\n')
            break;
        /* room for this byte, '\n' and the NUL */
        if (n + 3 > (size_t)num) {
            snprintf(why, sizeof(why), "line longer than %d characters", num - 2);
            fail_at(s, SFL_ELIMIT, why);
            return NULL;
        }
        str[n++] = (char)c;
    }
    if (!any) {
        s->line--;
        return NULL;
    }
    str[n++] = '\n';
    str[n] = '\0';
    return str;
}

static uint64_t hash_sk(const char *sk, size_t len)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)sk[i]) * 1099511628211ull;
    return h;
}

/* Inserts (section, key) at the current line; *first = the line of an
 * earlier one (0 if new). SFL_ENOMEM. */
static int seen_add(src_t *s, const char *section, const char *key, int *first)
{
    size_t ls = strlen(section), lk = strlen(key), len = ls + 1 + lk;
    size_t i;
    char *sk;

    *first = 0;
    if (2 * (s->nseen + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        seen_t *t = sfl__calloc(cap, sizeof(*t));

        if (t == NULL)
            return SFL_ENOMEM;
        for (size_t j = 0; j < s->cap; j++) {
            if (s->seen[j].sk == NULL)
                continue;
            i = hash_sk(s->seen[j].sk, s->seen[j].len) & (cap - 1);
            while (t[i].sk != NULL)
                i = (i + 1) & (cap - 1);
            t[i] = s->seen[j];
        }
        sfl__free(s->seen);
        s->seen = t;
        s->cap = cap;
    }
    sk = sfl__malloc(len + 1);
    if (sk == NULL)
        return SFL_ENOMEM;
    memcpy(sk, section, ls + 1);
    memcpy(sk + ls + 1, key, lk + 1);
    for (i = hash_sk(sk, len) & (s->cap - 1); s->seen[i].sk != NULL; i = (i + 1) & (s->cap - 1))
        if (s->seen[i].len == len && memcmp(s->seen[i].sk, sk, len) == 0) {
            *first = s->seen[i].line;
            sfl__free(sk);
            return 0;
        }
    s->seen[i] = (seen_t){sk, len, s->line};
    s->nseen++;
    return 0;
}

static int on_pair(void *user, const char *section, const char *key, const char *value)
{
    src_t *s = user;
    char why[200];
    int rc, first;

    if (s->rc != 0)
        return 0;
    if (strlen(section) > SFL_INI_SECTION_MAX) {
        snprintf(why, sizeof(why), "section name [%.60s...] longer than %d characters", section,
                 SFL_INI_SECTION_MAX);
        fail_at(s, SFL_ELIMIT, why);
        return 0;
    }
    if (key[0] == '\0') {
        fail_at(s, SFL_EPARSE, "no key before '='");
        return 0;
    }
    if ((rc = seen_add(s, section, key, &first)) < 0) {
        fail_at(s, rc, "out of memory");
        return 0;
    }
    if (first) {
        snprintf(why, sizeof(why), "duplicate key '%.100s' (first set on line %d)", key, first);
        fail_at(s, SFL_EINVAL, why);
        return 0;
    }
    sfl__clear_error();
    if ((rc = s->cb(s->ud, section, key, value)) < 0) {
        fail_at(s, rc, sfl_last_error()[0] ? sfl_last_error() : sfl_strerror(rc));
        return 0;
    }
    return 1;
}

static int parse(src_t *s)
{
    int r = ini_parse_stream(reader, s, on_pair, s);

    for (size_t i = 0; i < s->cap; i++)
        sfl__free(s->seen[i].sk);
    sfl__free(s->seen);
    s->seen = NULL;
    if (r == -2)
        return sfl__fail(SFL_ENOMEM, "%s: out of memory", s->name);
    /* libinih goes on after a line it cannot parse and returns the first
     * such line; ours stop it. The earlier one is the first error. */
    if (r > 0 && (s->rc == 0 || r < s->err_line))
        return sfl__fail(SFL_EPARSE,
                         "%s:%d: malformed line (want [section], key = value or a comment)",
                         s->name, r);
    if (s->rc != 0)
        return sfl__fail(s->rc, "%s:%d: %s", s->name, s->err_line, s->detail);
    return 0;
}

int sfl_ini_parse_buffer(const char *name, const char *buf, size_t len, sfl_ini_cb cb, void *ud)
{
    src_t s;

    memset(&s, 0, sizeof(s));
    s.name = name;
    s.buf = buf;
    s.len = len;
    s.cb = cb;
    s.ud = ud;
    return parse(&s);
}

int sfl_ini_parse_file(const char *path, sfl_ini_cb cb, void *ud)
{
    src_t s;
    int rc;

    memset(&s, 0, sizeof(s));
    s.name = path;
    s.cb = cb;
    s.ud = ud;
    s.f = fopen(path, "r");
    if (s.f == NULL)
        return sfl__fail(-errno, "%s: cannot open: %s", path, strerror(errno));
    rc = parse(&s);
    fclose(s.f);
    return rc;
}

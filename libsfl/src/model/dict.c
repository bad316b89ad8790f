#include "sfl/model/dict.h"

#include <math.h>
#include <string.h>

#include "data/readfile.h"
#include "sfl/core/alloc.h"
#include "sfl/core/vec.h"

int sfl_dict_new(uint32_t n, uint32_t m, sfl_dict_t **out)
{
    sfl_dict_t *d;

    if (out == NULL)
        return sfl__fail(SFL_EINVAL, "dict: NULL argument");
    *out = NULL;
    if (n == 0 || m == 0)
        return sfl__fail(SFL_EINVAL, "dict: %u x %u, both sizes must be positive", n, m);
    if ((uint64_t)n * m > SIZE_MAX / sizeof(double))
        return sfl__fail(SFL_ELIMIT, "dict: %u x %u does not fit in memory", n, m);
    d = sfl__calloc(1, sizeof(*d));
    if (d == NULL)
        return SFL_ENOMEM;
    d->a = sfl__calloc((size_t)n * m, sizeof(double));
    if (d->a == NULL) {
        sfl__free(d);
        return SFL_ENOMEM;
    }
    d->n = n;
    d->m = m;
    *out = d;
    return 0;
}

void sfl_dict_free(sfl_dict_t *d)
{
    if (d == NULL)
        return;
    sfl__free(d->a);
    sfl__free(d);
}

int sfl_dict_identity(uint32_t n, sfl_dict_t **out)
{
    int rc = sfl_dict_new(n, n, out);

    if (rc < 0)
        return rc;
    for (uint32_t j = 0; j < n; j++)
        (*out)->a[(size_t)j * n + j] = 1.0;
    return 0;
}

int sfl_dict_gaussian(uint32_t n, uint32_t m, sfl_rng_t *rng, sfl_dict_t **out)
{
    int rc;

    if (rng == NULL)
        return sfl__fail(SFL_EINVAL, "dict: NULL rng");
    rc = sfl_dict_new(n, m, out);
    if (rc < 0)
        return rc;
    /* Variance 1/n makes E ||a_j||^2 = 1, so A is near-isometric on sparse
     * vectors (Sec. IV-D, Corollary 10). */
    double sd = 1.0 / sqrt((double)n);
    size_t len = (size_t)n * m;

    for (size_t k = 0; k < len; k++)
        (*out)->a[k] = sfl_rng_gauss(rng, 0.0, sd);
    return 0;
}

/* ---- text format ---------------------------------------------------- */

typedef struct parser {
    const char *name;
    const char *buf;
    size_t len;
    size_t pos;  /* start of the next line */
    size_t line; /* 1-based number of the line last returned */
} parser_t;

/* Next line that is neither empty (blanks only) nor a '#' comment; 0 at the
 * end of input, 1 with [*s, *s + *n) the line, or a negative error. */
static int next_line(parser_t *p, const char **s, size_t *n)
{
    while (p->pos < p->len) {
        size_t end, content, i = p->pos;
        int rc;

        sfl__line_bounds(p->buf, p->len, p->pos, &end, &content);
        p->line++;
        p->pos = end + 1;
        rc = sfl__check_line(p->name, p->line, p->buf + i, content - i, SIZE_MAX - 1);
        if (rc < 0)
            return rc;
        size_t j = i;
        while (j < content && sfl__is_blank(p->buf[j]))
            j++;
        if (j == content || p->buf[j] == '#')
            continue;
        *s = p->buf + i;
        *n = content - i;
        return 1;
    }
    return 0;
}

/* Token after position *i of s[0..n): [*tok, *tok + *tlen); 0 if none. */
static int next_token(const char *s, size_t n, size_t *i, size_t *tok, size_t *tlen)
{
    size_t j = *i;

    while (j < n && sfl__is_blank(s[j]))
        j++;
    if (j == n)
        return 0;
    *tok = j;
    while (j < n && !sfl__is_blank(s[j]))
        j++;
    *tlen = j - *tok;
    *i = j;
    return 1;
}

/* A positive decimal integer <= UINT32_MAX, digits only. */
static int parse_size(const char *s, size_t n, uint32_t *v)
{
    uint64_t x = 0;

    if (n == 0 || n > 10)
        return -1;
    for (size_t k = 0; k < n; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        x = x * 10 + (uint64_t)(s[k] - '0');
    }
    if (x == 0 || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

static int parse_header(parser_t *p, size_t max_entries, uint32_t *n, uint32_t *m)
{
    const char *s;
    size_t len, i = 0, tok[3], tl[3];
    char ex[SFL__EXCERPT_BUF];
    int rc = next_line(p, &s, &len), k;

    if (rc < 0)
        return rc;
    if (rc == 0)
        return sfl__fail(SFL_EEMPTY, "%s: empty dictionary file (expected a header \"n m\")",
                         p->name);
    for (k = 0; k < 3 && next_token(s, len, &i, &tok[k], &tl[k]); k++)
        ;
    if (k != 2)
        return sfl__fail(SFL_EPARSE, "%s:%zu:1: header must be \"n m\" (two sizes), found %d "
                         "fields", p->name, p->line, k);
    if (parse_size(s + tok[0], tl[0], n) < 0)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: '%s' is not a size in 1..4294967295",
                         p->name, p->line, tok[0] + 1, sfl__excerpt(ex, s + tok[0], tl[0]));
    if (parse_size(s + tok[1], tl[1], m) < 0)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: '%s' is not a size in 1..4294967295",
                         p->name, p->line, tok[1] + 1, sfl__excerpt(ex, s + tok[1], tl[1]));
    if ((uint64_t)*n * *m > max_entries)
        return sfl__fail(SFL_ELIMIT, "%s:%zu:1: %u x %u dictionary exceeds the limit of %zu "
                         "entries", p->name, p->line, *n, *m, max_entries);
    return 0;
}

/* Row `row` of A from one line: exactly m numbers into column-major a. */
static int parse_row(parser_t *p, const char *s, size_t len, uint32_t row, sfl_dict_t *d)
{
    size_t i = 0, tok, tl;
    char ex[SFL__EXCERPT_BUF];
    uint32_t j = 0;

    while (next_token(s, len, &i, &tok, &tl)) {
        double v;
        int r;

        if (j == d->m)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: more than %u values in row %u",
                             p->name, p->line, tok + 1, d->m, row + 1);
        r = sfl__parse_number(s + tok, tl, &v);
        if (r == SFL__NUM_NONFINITE)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: '%s' is not finite", p->name, p->line,
                             tok + 1, sfl__excerpt(ex, s + tok, tl));
        if (r != SFL__NUM_OK)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: '%s' is not a number", p->name, p->line,
                             tok + 1, sfl__excerpt(ex, s + tok, tl));
        d->a[(size_t)j * d->n + row] = v;
        j++;
    }
    if (j != d->m)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: row %u has %u values, expected %u", p->name,
                         p->line, len + 1, row + 1, j, d->m);
    return 0;
}

int sfl_dict_parse(const char *buf, size_t len, const char *name, size_t max_entries,
                   sfl_dict_t **out)
{
    parser_t p = {0};
    sfl_dict_t *d = NULL;
    uint32_t n = 0, m = 0, row;
    const char *s;
    size_t sl;
    int rc;

    if (out == NULL || (buf == NULL && len > 0))
        return sfl__fail(SFL_EINVAL, "dict_parse: NULL argument");
    *out = NULL;
    p.name = name ? name : "<dictionary>";
    p.buf = buf;
    p.len = len;
    if (max_entries == 0)
        max_entries = SFL_DICT_MAX_ENTRIES;
    rc = parse_header(&p, max_entries, &n, &m);
    if (rc < 0)
        return rc;
    rc = sfl_dict_new(n, m, &d);
    if (rc < 0)
        return rc;
    for (row = 0; row < n; row++) {
        rc = next_line(&p, &s, &sl);
        if (rc < 0)
            goto out;
        if (rc == 0) {
            rc = sfl__fail(SFL_ETRUNC, "%s:%zu: truncated: %u of %u rows", p.name, p.line + 1,
                           row, n);
            goto out;
        }
        rc = parse_row(&p, s, sl, row, d);
        if (rc < 0)
            goto out;
    }
    rc = next_line(&p, &s, &sl);
    if (rc < 0)
        goto out;
    if (rc > 0) {
        rc = sfl__fail(SFL_EPARSE, "%s:%zu:1: more than the %u rows the header declares",
                       p.name, p.line, n);
        goto out;
    }
    *out = d;
    d = NULL;
out:
    sfl_dict_free(d);
    return rc;
}

int sfl_dict_read(const char *path, size_t max_entries, sfl_dict_t **out)
{
    char *buf = NULL;
    size_t len = 0, bound;
    int rc;

    if (out == NULL || path == NULL)
        return sfl__fail(SFL_EINVAL, "dict_read: NULL argument");
    *out = NULL;
    if (max_entries == 0)
        max_entries = SFL_DICT_MAX_ENTRIES;
    /* Each value is at most SFL__NUM_MAX bytes plus a separator; 1 MiB more
     * covers the header, comments and blank lines of any sane file. */
    bound = max_entries > (SIZE_MAX - (1u << 20)) / (SFL__NUM_MAX + 1)
                ? SIZE_MAX - 1
                : max_entries * (SFL__NUM_MAX + 1) + (1u << 20);
    rc = sfl__read_file(path, bound, &buf, &len);
    if (rc < 0)
        return rc;
    rc = sfl_dict_parse(buf, len, path, max_entries, out);
    sfl__free(buf);
    return rc;
}

/* ---- kernels -------------------------------------------------------- */

void sfl_dict_apply(const sfl_dict_t *d, const double *c, double *x)
{
    size_t n = d->n;

    memset(x, 0, n * sizeof(double));
    for (uint32_t j = 0; j < d->m; j++)
        if (c[j] != 0.0)
            sfl_dvec_axpy(c[j], d->a + (size_t)j * n, x, n);
}

void sfl_dict_apply_sparse(const sfl_dict_t *d, const uint32_t *idx, const double *val,
                           uint32_t k, double *x)
{
    size_t n = d->n;

    memset(x, 0, n * sizeof(double));
    for (uint32_t q = 0; q < k; q++)
        sfl_dvec_axpy(val[q], d->a + (size_t)idx[q] * n, x, n);
}

void sfl_dict_apply_t(const sfl_dict_t *d, const double *r, double *c)
{
    size_t n = d->n;

    for (uint32_t j = 0; j < d->m; j++)
        c[j] = sfl_dvec_dot(d->a + (size_t)j * n, r, n);
}

double sfl_dict_nrm2_sparse(const sfl_dict_t *d, const uint32_t *idx, const double *val,
                            uint32_t k)
{
    /* Row by row, (A_S c_S)_i = sum_q a[i + idx_q n] val_q: strided reads,
     * but no scratch vector, so the aggregator can call it as is. */
    const double *a = d->a;
    size_t n = d->n;
    double ss = 0.0;

    for (size_t i = 0; i < n; i++) {
        double s = 0.0;

        for (uint32_t q = 0; q < k; q++)
            s += a[i + (size_t)idx[q] * n] * val[q];
        ss += s * s;
    }
    return sqrt(ss);
}

#include "sfl/data/csv.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "data/readfile.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

typedef struct parser {
    const char *buf;
    size_t len;
    const char *name;
    const sfl_read_limits_t *lim;
    char delim;
} parser_t;

/* Iterator over the fields of one line. */
typedef struct fields {
    const char *s;
    size_t n;
    size_t i;
    char delim;
    int done;
} fields_t;

static void fields_init(fields_t *it, const char *s, size_t n, char delim)
{
    it->s = s;
    it->n = n;
    it->i = 0;
    it->delim = delim;
    it->done = 0;
}

/* Next field as s[*fs..*fe), trimmed of spaces and tabs. A space delimiter
 * means "runs of blanks", as in whitespace-separated data files; any other
 * delimiter separates exactly, so "1,,2" has an empty middle field. */
static int next_field(fields_t *it, size_t *fs, size_t *fe)
{
    const char *s = it->s;

    if (it->delim == ' ') {
        while (it->i < it->n && sfl__is_blank(s[it->i]))
            it->i++;
        if (it->i >= it->n)
            return 0;
        *fs = it->i;
        while (it->i < it->n && !sfl__is_blank(s[it->i]))
            it->i++;
        *fe = it->i;
        return 1;
    }
    if (it->done)
        return 0;
    size_t a = it->i, e = a;
    while (e < it->n && s[e] != it->delim)
        e++;
    if (e >= it->n)
        it->done = 1;
    else
        it->i = e + 1;
    size_t b = e, a0 = a;
    while (a < b && sfl__is_blank(s[a]))
        a++;
    while (b > a && sfl__is_blank(s[b - 1]))
        b--;
    if (a == b)
        a = b = a0; /* an empty field is reported where it starts */
    *fs = a;
    *fe = b;
    return 1;
}

static int is_blank_line(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!sfl__is_blank(s[i]))
            return 0;
    }
    return 1;
}

/* A header line holds at least one field that is not a number (an empty
 * field is a missing value, not a name). */
static int looks_like_header(const parser_t *p, const char *s, size_t n)
{
    fields_t it;
    size_t fs, fe;
    double v;

    fields_init(&it, s, n, p->delim);
    while (next_field(&it, &fs, &fe)) {
        int r = sfl__parse_number(s + fs, fe - fs, &v);
        if (fe > fs && (r == SFL__NUM_BAD || r == SFL__NUM_LONG))
            return 1;
    }
    return 0;
}

/* Number of fields of s[0..n); *extra is the column of field number want
 * (0-based) if there is one, else the column just past the line. */
static uint32_t count_fields(const parser_t *p, const char *s, size_t n, uint32_t want,
                             size_t *extra)
{
    fields_t it;
    size_t fs, fe;
    uint32_t k = 0;

    *extra = n + 1;
    fields_init(&it, s, n, p->delim);
    while (next_field(&it, &fs, &fe)) {
        if (k == want)
            *extra = fs + 1;
        k++;
    }
    return k;
}

typedef struct shape {
    uint32_t nrows;   /* data rows */
    uint32_t nfields; /* fields per line */
    size_t hdr_line;  /* line number of the header, 0 if none */
} shape_t;

/* Pass 1: header, field count, row count; checks line length, NUL bytes,
 * quotes, ragged rows and the row limit. */
static int shape_pass(const parser_t *p, int header, shape_t *sh)
{
    size_t pos = 0, line = 1, first_line = 0;

    sh->nrows = 0;
    sh->nfields = 0;
    sh->hdr_line = 0;
    while (pos < p->len) {
        size_t end, content;
        sfl__line_bounds(p->buf, p->len, pos, &end, &content);
        const char *s = p->buf + pos;
        size_t n = content - pos;
        int rc = sfl__check_line(p->name, line, s, end - pos, p->lim->max_line);
        if (rc < 0)
            return rc;
        if (is_blank_line(s, n))
            goto next;

        size_t extra;
        uint32_t k = count_fields(p, s, n, first_line ? sh->nfields : UINT32_MAX, &extra);
        if (first_line == 0) {
            first_line = line;
            sh->nfields = k;
            if (header == 1 || (header == -1 && looks_like_header(p, s, n))) {
                /* Names are skipped, never interpreted, so quoting (as R
                 * writes headers) is harmless here. */
                sh->hdr_line = line;
                goto next;
            }
        }
        const char *q = memchr(s, '"', n);
        if (q)
            return sfl__fail(SFL_EUNSUP, "%s:%zu:%zu: quoted fields are not supported", p->name,
                             line, (size_t)(q - s) + 1);
        if (k != sh->nfields)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: expected %u fields (as line %zu), found %u",
                             p->name, line, extra, sh->nfields, first_line, k);
        if (sh->nrows >= p->lim->max_rows)
            return sfl__fail(SFL_ELIMIT, "%s:%zu:1: more than %u rows", p->name, line,
                             p->lim->max_rows);
        sh->nrows++;
next:
        pos = end + 1;
        line++;
    }
    return 0;
}

/* Pass 2 for one data line: fields into row `row` of X/y. */
static int parse_row(const parser_t *p, const char *s, size_t n, size_t line, uint32_t lcol,
                     sfl_csr_t *X, double *y, uint32_t row, size_t cap, size_t *k)
{
    char ex[SFL__EXCERPT_BUF];
    fields_t it;
    size_t fs, fe;
    uint32_t f = 0, c = 0;

    fields_init(&it, s, n, p->delim);
    while (next_field(&it, &fs, &fe)) {
        double v;
        if (fe == fs)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: empty field %u", p->name, line, fs + 1,
                             f + 1);
        int r = sfl__parse_number(s + fs, fe - fs, &v);
        if (r == SFL__NUM_LONG)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: field longer than %d bytes", p->name,
                             line, fs + 1, SFL__NUM_MAX);
        if (r == SFL__NUM_BAD)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: field '%s' is not a number", p->name, line,
                             fs + 1, sfl__excerpt(ex, s + fs, fe - fs));
        if (r == SFL__NUM_NONFINITE)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: field '%s' is not finite", p->name, line,
                             fs + 1, sfl__excerpt(ex, s + fs, fe - fs));
        if (f == lcol) {
            y[row] = v;
        } else {
            if (v != 0.0) {
                if (*k >= cap)
                    return sfl__fail(SFL_ELIMIT, "%s:%zu:%zu: more than %zu nonzeros", p->name,
                                     line, fs + 1, p->lim->max_nnz);
                X->colind[*k] = c;
                X->val[*k] = v;
                (*k)++;
            }
            c++;
        }
        f++;
    }
    X->rowptr[row + 1] = *k;
    return 0;
}

void sfl_csv_opts_default(sfl_csv_opts_t *o)
{
    if (o == NULL)
        return;
    o->label_col = 0;
    o->header = -1;
    o->delim = ',';
}

int sfl_csv_parse(const char *buf, size_t len, const char *name, const sfl_csv_opts_t *opts,
                  const sfl_read_limits_t *lim, sfl_dataset_t **out)
{
    sfl_read_limits_t deflim;
    sfl_csv_opts_t defopts;
    sfl_csr_t *X = NULL;
    double *y = NULL;
    parser_t p;
    shape_t sh;
    uint32_t lcol;
    size_t cap, k = 0, pos = 0, line = 1;
    int rc;

    if (out == NULL || (buf == NULL && len > 0))
        return sfl__fail(SFL_EINVAL, "csv_parse: NULL argument");
    *out = NULL;
    if (opts == NULL) {
        sfl_csv_opts_default(&defopts);
        opts = &defopts;
    }
    if (lim == NULL) {
        sfl_read_limits_default(&deflim);
        lim = &deflim;
    }
    p.name = name ? name : "<memory>";
    if (opts->delim != ',' && opts->delim != ';' && opts->delim != '\t' && opts->delim != ' ')
        return sfl__fail(SFL_EINVAL, "%s: delimiter must be ',' ';' tab or space", p.name);
    if (opts->header < -1 || opts->header > 1)
        return sfl__fail(SFL_EINVAL, "%s: header option %d is not -1, 0 or 1", p.name,
                         opts->header);
    p.buf = buf;
    p.len = len;
    p.lim = lim;
    p.delim = opts->delim;

    rc = shape_pass(&p, opts->header, &sh);
    if (rc < 0)
        return rc;
    if (sh.nrows == 0)
        return sfl__fail(SFL_EEMPTY, "%s: no data rows", p.name);
    int64_t lc = opts->label_col < 0 ? (int64_t)sh.nfields + opts->label_col : opts->label_col;
    if (lc < 0 || lc >= (int64_t)sh.nfields)
        return sfl__fail(SFL_EINVAL, "%s: label column %d out of range for %u fields", p.name,
                         opts->label_col, sh.nfields);
    lcol = (uint32_t)lc;
    if (sh.nfields - 1 > lim->max_cols)
        return sfl__fail(SFL_ELIMIT, "%s: %u feature columns, more than max_cols %u", p.name,
                         sh.nfields - 1, lim->max_cols);
    /* Dense upper bound: each stored value costs a field of >= 2 bytes in
     * the text, so this stays within a small multiple of the input size. */
    cap = (size_t)sh.nrows * (sh.nfields - 1);
    if (sh.nfields - 1 != 0 && cap / (sh.nfields - 1) != sh.nrows)
        cap = SIZE_MAX;
    if (cap > lim->max_nnz)
        cap = lim->max_nnz;
    rc = sfl_csr_new(sh.nrows, sh.nfields - 1, cap, &X);
    if (rc < 0)
        goto out;
    y = sfl__mallocarray(sh.nrows, sizeof(double));
    if (y == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }

    uint32_t row = 0;
    while (pos < len) {
        size_t end, content;
        sfl__line_bounds(buf, len, pos, &end, &content);
        if (line != sh.hdr_line && !is_blank_line(buf + pos, content - pos)) {
            rc = parse_row(&p, buf + pos, content - pos, line, lcol, X, y, row, cap, &k);
            if (rc < 0)
                goto out;
            row++;
        }
        pos = end + 1;
        line++;
    }
    assert(row == sh.nrows);
    X->nnz = k;
    rc = sfl_dataset_new(X, y, out); /* takes X and y */
    X = NULL;
    y = NULL;
out:
    sfl__free(y);
    sfl_csr_free(X);
    return rc;
}

int sfl_csv_read(const char *path, const sfl_csv_opts_t *opts, const sfl_read_limits_t *lim,
                 sfl_dataset_t **out)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;

    if (out == NULL || path == NULL)
        return sfl__fail(SFL_EINVAL, "csv_read: NULL argument");
    *out = NULL;
    /* One more line than max_rows: the header. */
    rc = sfl__read_file(path, sfl__read_bound(lim, 1), &buf, &len);
    if (rc < 0)
        return rc;
    rc = sfl_csv_parse(buf, len, path, opts, lim, out);
    sfl__free(buf);
    return rc;
}

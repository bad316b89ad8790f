#include "sfl/data/libsvm.h"

#include <errno.h>
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
} parser_t;

/* Bounds of one line starting at pos: *end is the '\n' (or len), *content
 * ends before a trailing '\r' and before any '#' comment. Both passes use
 * this so they agree on which lines hold rows. */
static void line_bounds(const parser_t *p, size_t pos, size_t *end, size_t *content)
{
    sfl__line_bounds(p->buf, p->len, pos, end, content);
    const char *hash = memchr(p->buf + pos, '#', *content - pos);
    if (hash)
        *content = (size_t)(hash - p->buf);
}

/* Pass 1: row count and an upper bound on nonzeros (colons outside
 * comments), checking line length, NUL bytes and the row limit. */
static int count_pass(const parser_t *p, uint32_t *nrows, size_t *ncolons)
{
    size_t pos = 0, line = 1, colons = 0;
    uint32_t rows = 0;

    while (pos < p->len) {
        size_t end, content;
        line_bounds(p, pos, &end, &content);
        int rc = sfl__check_line(p->name, line, p->buf + pos, end - pos, p->lim->max_line);
        if (rc < 0)
            return rc;
        int blank = 1;
        for (size_t i = pos; i < content; i++) {
            colons += p->buf[i] == ':';
            blank &= sfl__is_blank(p->buf[i]);
        }
        if (!blank) {
            if (rows >= p->lim->max_rows)
                return sfl__fail(SFL_ELIMIT, "%s:%zu:1: more than %u rows", p->name, line,
                                 p->lim->max_rows);
            rows++;
        }
        pos = end + 1;
        line++;
    }
    *nrows = rows;
    *ncolons = colons;
    return 0;
}

/* Heap sort of c[0..n) carrying v along: rows are usually sorted already,
 * but a hostile file must not get quadratic time, and no workspace. */
static void sift_down(uint32_t *c, double *v, size_t root, size_t n)
{
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && c[child + 1] > c[child])
            child++;
        if (c[root] >= c[child])
            return;
        uint32_t tc = c[root];
        double tv = v[root];
        c[root] = c[child], v[root] = v[child];
        c[child] = tc, v[child] = tv;
        root = child;
    }
}

static void sort_row(uint32_t *c, double *v, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(c, v, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t tc = c[0];
        double tv = v[0];
        c[0] = c[end], v[0] = v[end];
        c[end] = tc, v[end] = tv;
        sift_down(c, v, 0, end);
    }
}

/* Column of the second token with 1-based index idx in an already parsed
 * line; only used to name a duplicate found after sorting. */
static size_t second_occurrence(const char *s, size_t n, uint64_t idx)
{
    size_t i = 0, seen = 0;

    while (i < n && sfl__is_blank(s[i]))
        i++;
    while (i < n && !sfl__is_blank(s[i]))
        i++; /* label */
    for (;;) {
        while (i < n && sfl__is_blank(s[i]))
            i++;
        if (i >= n)
            return 1;
        size_t start = i;
        uint64_t v = 0;
        int digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && v <= idx)
            v = v * 10 + (uint64_t)(s[i++] - '0'), digits = 1;
        if (digits && i < n && s[i] == ':' && v == idx && ++seen == 2)
            return start + 1;
        while (i < n && !sfl__is_blank(s[i]))
            i++;
    }
}

typedef struct fill {
    sfl_csr_t *X;
    double *y;
    size_t cap;      /* entries allocated */
    size_t k;        /* entries stored */
    uint32_t row;    /* rows stored */
    uint32_t maxidx; /* largest 1-based index seen */
} fill_t;

/* Parses the non-blank line s[0..n) (line number line) into row f->row. */
static int parse_row(const parser_t *p, const char *s, size_t n, size_t line, fill_t *f)
{
    char ex[SFL__EXCERPT_BUF];
    size_t i = 0, start, rs = f->k;
    double label;
    int sorted = 1, r;

    while (i < n && sfl__is_blank(s[i]))
        i++;
    start = i;
    while (i < n && !sfl__is_blank(s[i]))
        i++;
    if (memchr(s + start, ':', i - start))
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: label missing (line starts with feature '%s')",
                         p->name, line, start + 1, sfl__excerpt(ex, s + start, i - start));
    r = sfl__parse_number(s + start, i - start, &label);
    if (r == SFL__NUM_LONG)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: label token longer than %d bytes", p->name,
                         line, start + 1, SFL__NUM_MAX);
    if (r != SFL__NUM_OK)
        return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: label '%s' is not a finite number", p->name,
                         line, start + 1, sfl__excerpt(ex, s + start, i - start));

    for (;;) {
        while (i < n && sfl__is_blank(s[i]))
            i++;
        if (i >= n)
            break;
        start = i;
        while (i < n && !sfl__is_blank(s[i]))
            i++;
        const char *t = s + start;
        size_t tn = i - start, d = 0;
        uint64_t idx = 0;

        if (tn >= 4 && memcmp(t, "qid:", 4) == 0)
            continue; /* SVMlight ranking group id: not a feature */
        while (d < tn && t[d] >= '0' && t[d] <= '9') {
            idx = idx * 10 + (uint64_t)(t[d] - '0');
            d++;
            if (idx > p->lim->max_cols)
                return sfl__fail(SFL_ELIMIT, "%s:%zu:%zu: feature index '%s' above max_cols %u",
                                 p->name, line, start + 1, sfl__excerpt(ex, t, tn), p->lim->max_cols);
        }
        if (d == 0) {
            if (t[0] == ':')
                return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: empty feature index", p->name, line,
                                 start + 1);
            if (t[0] == '-')
                return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: negative feature index '%s'", p->name,
                                 line, start + 1, sfl__excerpt(ex, t, tn));
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: expected feature index, got '%s'",
                             p->name, line, start + 1, sfl__excerpt(ex, t, tn));
        }
        if (d == tn || t[d] != ':')
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: expected ':' after feature index", p->name,
                             line, start + 1);
        if (idx == 0)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: feature index 0 (indices are 1-based)",
                             p->name, line, start + 1);
        double v;
        if (tn - d - 1 == 0)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: missing value after '%s'", p->name, line,
                             start + 1, sfl__excerpt(ex, t, tn));
        r = sfl__parse_number(t + d + 1, tn - d - 1, &v);
        if (r == SFL__NUM_LONG)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: value token longer than %d bytes",
                             p->name, line, start + 1, SFL__NUM_MAX);
        if (r == SFL__NUM_BAD)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: value in '%s' is not a number", p->name,
                             line, start + 1, sfl__excerpt(ex, t, tn));
        if (r == SFL__NUM_NONFINITE)
            return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: value in '%s' is not finite", p->name,
                             line, start + 1, sfl__excerpt(ex, t, tn));
        /* Every stored entry had a colon, so the count pass's bound holds;
         * the cap is lower only when max_nnz cut it. */
        if (f->k >= f->cap)
            return sfl__fail(SFL_ELIMIT, "%s:%zu:%zu: more than %zu nonzeros", p->name, line,
                             start + 1, p->lim->max_nnz);
        uint32_t c = (uint32_t)(idx - 1);
        if (f->k > rs && c <= f->X->colind[f->k - 1]) {
            if (c == f->X->colind[f->k - 1])
                return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: duplicate feature index %u", p->name,
                                 line, start + 1, c + 1);
            sorted = 0;
        }
        f->X->colind[f->k] = c;
        f->X->val[f->k] = v;
        f->k++;
        if (idx > f->maxidx)
            f->maxidx = (uint32_t)idx;
    }

    uint32_t *ci = f->X->colind;
    double *va = f->X->val;
    if (!sorted) {
        sort_row(ci + rs, va + rs, f->k - rs);
        for (size_t q = rs + 1; q < f->k; q++) {
            if (ci[q] == ci[q - 1])
                return sfl__fail(SFL_EPARSE, "%s:%zu:%zu: duplicate feature index %u", p->name,
                                 line, second_occurrence(s, n, (uint64_t)ci[q] + 1), ci[q] + 1);
        }
    }
    /* Explicit zeros carry no information in CSR; drop them only now so a
     * duplicate zero entry is still reported. */
    size_t w = rs;
    for (size_t q = rs; q < f->k; q++) {
        if (va[q] != 0.0) {
            ci[w] = ci[q];
            va[w] = va[q];
            w++;
        }
    }
    f->k = w;
    f->y[f->row] = label;
    f->row++;
    f->X->rowptr[f->row] = f->k;
    return 0;
}

int sfl_libsvm_parse(const char *buf, size_t len, const char *name, uint32_t min_cols,
                     const sfl_read_limits_t *lim, sfl_dataset_t **out)
{
    sfl_read_limits_t deflim;
    parser_t p;
    fill_t f = { 0 };
    uint32_t nrows = 0;
    size_t colons = 0, pos = 0, line = 1;
    int rc;

    if (out == NULL || (buf == NULL && len > 0))
        return sfl__fail(SFL_EINVAL, "libsvm_parse: NULL argument");
    *out = NULL;
    if (lim == NULL) {
        sfl_read_limits_default(&deflim);
        lim = &deflim;
    }
    p.buf = buf;
    p.len = len;
    p.name = name ? name : "<memory>";
    p.lim = lim;

    rc = count_pass(&p, &nrows, &colons);
    if (rc < 0)
        return rc;
    if (nrows == 0)
        return sfl__fail(SFL_EEMPTY, "%s: no data rows", p.name);
    f.cap = colons < lim->max_nnz ? colons : lim->max_nnz;
    rc = sfl_csr_new(nrows, 0, f.cap, &f.X);
    if (rc < 0)
        goto out;
    f.y = sfl__mallocarray(nrows, sizeof(double));
    if (f.y == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }

    while (pos < len) {
        size_t end, content, i;
        line_bounds(&p, pos, &end, &content);
        for (i = pos; i < content && sfl__is_blank(buf[i]); i++)
            ;
        if (i < content) {
            rc = parse_row(&p, buf + pos, content - pos, line, &f);
            if (rc < 0)
                goto out;
        }
        pos = end + 1;
        line++;
    }
    assert(f.row == nrows);
    f.X->nnz = f.k;
    f.X->ncols = f.maxidx > min_cols ? f.maxidx : min_cols;
    rc = sfl_dataset_new(f.X, f.y, out); /* takes X and y */
    f.X = NULL;
    f.y = NULL;
out:
    sfl__free(f.y);
    sfl_csr_free(f.X);
    return rc;
}

int sfl_libsvm_read(const char *path, uint32_t min_cols, const sfl_read_limits_t *lim,
                    sfl_dataset_t **out)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;

    if (out == NULL || path == NULL)
        return sfl__fail(SFL_EINVAL, "libsvm_read: NULL argument");
    *out = NULL;
    rc = sfl__read_file(path, sfl__read_bound(lim, 0), &buf, &len);
    if (rc < 0)
        return rc;
    rc = sfl_libsvm_parse(buf, len, path, min_cols, lim, out);
    sfl__free(buf);
    return rc;
}

int sfl_libsvm_write(FILE *f, const sfl_dataset_t *ds)
{
    const sfl_csr_t *X;

    if (f == NULL || ds == NULL || ds->X == NULL)
        return sfl__fail(SFL_EINVAL, "libsvm_write: NULL argument");
    X = ds->X;
    for (uint32_t i = 0; i < X->nrows; i++) {
        double label = ds->nclasses ? ds->labels[(uint32_t)ds->y[i]] : ds->y[i];

        fprintf(f, "%.17g", label);
        for (size_t k = X->rowptr[i]; k < X->rowptr[i + 1]; k++)
            fprintf(f, " %u:%.17g", X->colind[k] + 1, X->val[k]);
        fputc('\n', f);
    }
    if (ferror(f))
        return sfl__fail(-EIO, "libsvm_write: write failed");
    return 0;
}

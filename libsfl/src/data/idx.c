/* IDX reader (sfl/data/idx.h): header checks before any allocation, gzip
 * inflated by zlib into a buffer that never grows past the bound, and the
 * images/labels pair as a sparse dataset. */
#include "sfl/data/idx.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <zlib.h>

#include "data/readfile.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"

#define IDX_UBYTE 0x08

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *type_name(uint8_t t)
{
    switch (t) {
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return "unknown";
    }
}

static int parse_plain(const uint8_t *buf, size_t len, const char *name, size_t max_bytes,
                       sfl_idx_t **out)
{
    sfl_idx_t *x;
    size_t n = 1, header;
    uint32_t nd;

    *out = NULL;
    if (len < 4)
        return sfl__fail(SFL_EPARSE, "%s: truncated: %zu bytes, an idx header has at least 4",
                         name, len);
    if (buf[0] != 0 || buf[1] != 0)
        return sfl__fail(SFL_EPARSE, "%s: not an idx file (magic %02x %02x %02x %02x)", name,
                         buf[0], buf[1], buf[2], buf[3]);
    if (buf[2] != IDX_UBYTE)
        return sfl__fail(SFL_EPARSE, "%s: element type 0x%02x (%s) is not supported: only "
                         "unsigned bytes (0x08)", name, buf[2], type_name(buf[2]));
    nd = buf[3];
    if (nd < 1 || nd > SFL_IDX_MAX_DIMS)
        return sfl__fail(SFL_EPARSE, "%s: %u dimensions; 1 to %d are supported", name, nd,
                         SFL_IDX_MAX_DIMS);
    header = 4 + 4 * (size_t)nd;
    if (len < header)
        return sfl__fail(SFL_EPARSE, "%s: truncated header: %zu bytes of %zu", name, len, header);
    for (uint32_t i = 0; i < nd; i++) {
        uint32_t d = be32(buf + 4 + 4 * i);

        if (d == 0)
            return sfl__fail(SFL_EPARSE, "%s: dimension %u is 0", name, i + 1);
        if (n > max_bytes / d)
            return sfl__fail(SFL_ELIMIT, "%s: the header announces more than %zu elements",
                             name, max_bytes);
        n *= d;
    }
    if (len - header != n)
        return sfl__fail(SFL_EPARSE, "%s: %zu bytes of data where the header announces %zu%s",
                         name, len - header, n, len - header < n ? " (truncated)" : "");
    x = sfl__calloc(1, sizeof(*x));
    if (x == NULL || (x->data = sfl__malloc(n)) == NULL) {
        sfl__free(x);
        return SFL_ENOMEM;
    }
    x->ndims = nd;
    for (uint32_t i = 0; i < nd; i++)
        x->dims[i] = be32(buf + 4 + 4 * i);
    memcpy(x->data, buf + header, n);
    x->len = n;
    *out = x;
    return 0;
}

void sfl_idx_free(sfl_idx_t *x)
{
    if (x == NULL)
        return;
    sfl__free(x->data);
    sfl__free(x);
}

/* Inflates the gzip stream in[0..inlen) into *out (owned), at most cap
 * bytes. */
static int gunzip(const char *name, const uint8_t *in, size_t inlen, size_t cap, uint8_t **out,
                  size_t *outlen)
{
    z_stream z;
    uint8_t *buf = NULL;
    size_t size = 0, used = 0;
    int zr, rc = 0;

    *out = NULL;
    *outlen = 0;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return sfl__fail(SFL_ENOMEM, "%s: cannot start zlib", name);
    z.next_in = (Bytef *)(uintptr_t)in;
    do {
        size_t chunk;

        if (used == size) {
            size_t want = size ? 2 * size : (inlen < SIZE_MAX / 4 ? 4 * inlen + 64 : SIZE_MAX);
            void *grown;

            if (size >= cap + 1) {
                rc = sfl__fail(SFL_ELIMIT, "%s: inflates to more than %zu bytes", name, cap);
                goto out;
            }
            if (want > cap + 1)
                want = cap + 1; /* one past the bound shows the overflow */
            if ((grown = sfl__reallocarray(buf, want, 1)) == NULL) {
                rc = SFL_ENOMEM;
                goto out;
            }
            buf = grown;
            size = want;
        }
        /* zlib counts in uInt: feed and drain it in pieces it can hold. */
        if (z.avail_in == 0) {
            size_t left = inlen - (size_t)(z.next_in - in);

            z.avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
        }
        chunk = size - used > UINT_MAX ? UINT_MAX : size - used;
        z.next_out = buf + used;
        z.avail_out = (uInt)chunk;
        zr = inflate(&z, Z_NO_FLUSH);
        used += chunk - z.avail_out;
        if (zr == Z_STREAM_END)
            break;
        if (zr == Z_BUF_ERROR && z.avail_in == 0 && (size_t)(z.next_in - in) == inlen) {
            rc = sfl__fail(SFL_EPARSE, "%s: truncated gzip stream (%zu bytes inflated)", name,
                           used);
            goto out;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = sfl__fail(SFL_EPARSE, "%s: damaged gzip stream: %s", name,
                           z.msg ? z.msg : "inflate failed");
            goto out;
        }
    } while (1);
    if (used > cap) {
        rc = sfl__fail(SFL_ELIMIT, "%s: inflates to more than %zu bytes", name, cap);
        goto out;
    }
    if ((size_t)(z.next_in - in) != inlen) {
        rc = sfl__fail(SFL_EPARSE, "%s: %zu bytes after the gzip stream", name,
                       inlen - (size_t)(z.next_in - in));
        goto out;
    }
    *out = buf;
    *outlen = used;
    buf = NULL;
out:
    inflateEnd(&z);
    sfl__free(buf);
    return rc;
}

int sfl_idx_parse(const uint8_t *buf, size_t len, const char *name, size_t max_bytes,
                  sfl_idx_t **out)
{
    /* a header of at most 16 bytes before the elements */
    size_t cap = max_bytes > SIZE_MAX - 16 ? SIZE_MAX - 16 : max_bytes + 16;
    uint8_t *plain = NULL;
    size_t plen = 0;
    int rc;

    *out = NULL;
    if (len < 2 || buf[0] != 0x1f || buf[1] != 0x8b)
        return parse_plain(buf, len, name, max_bytes, out);
    if ((rc = gunzip(name, buf, len, cap, &plain, &plen)) == 0)
        rc = parse_plain(plain, plen, name, max_bytes, out);
    sfl__free(plain);
    return rc;
}

int sfl_idx_read(const char *path, size_t max_bytes, sfl_idx_t **out)
{
    size_t cap = max_bytes > SIZE_MAX / 2 ? SIZE_MAX / 2 : max_bytes;
    char *file = NULL;
    size_t flen = 0;
    int rc;

    *out = NULL;
    /* A gzip file of incompressible bytes is a little larger than them. */
    if ((rc = sfl__read_file(path, cap + cap / 64 + 1024, &file, &flen)) < 0)
        return sfl__wrap(rc, "%s", path);
    rc = sfl_idx_parse((const uint8_t *)file, flen, path, max_bytes, out);
    sfl__free(file);
    return rc;
}

int sfl_idx_to_dataset(const sfl_idx_t *im, const char *imname, const sfl_idx_t *lb,
                       const char *lbname, const sfl_read_limits_t *lim, sfl_dataset_t **out)
{
    sfl_read_limits_t def;
    sfl_csr_t *X = NULL;
    double *y = NULL;
    size_t nnz = 0, pix;
    uint32_t n;
    int rc;

    *out = NULL;
    if (lim == NULL) {
        sfl_read_limits_default(&def);
        lim = &def;
    }
    if (im->ndims != 3)
        return sfl__fail(SFL_EPARSE, "%s: %u dimensions; images have 3 (count, height, width)",
                         imname, im->ndims);
    if (lb->ndims != 1)
        return sfl__fail(SFL_EPARSE, "%s: %u dimensions; labels have 1 (count)", lbname,
                         lb->ndims);
    n = im->dims[0];
    if (lb->dims[0] != n)
        return sfl__fail(SFL_EPARSE, "%s has %u images but %s %u labels", imname, n, lbname,
                         lb->dims[0]);
    if (n > lim->max_rows)
        return sfl__fail(SFL_ELIMIT, "%s: %u images, above the limit of %u rows", imname, n,
                         lim->max_rows);
    pix = (size_t)im->dims[1] * im->dims[2]; /* both < 2^32; im->len bounds the product */
    if (pix > lim->max_cols)
        return sfl__fail(SFL_ELIMIT, "%s: %u x %u pixels, above the limit of %u columns", imname,
                         im->dims[1], im->dims[2], lim->max_cols);
    for (size_t i = 0; i < im->len; i++)
        nnz += im->data[i] != 0;
    if (nnz > lim->max_nnz)
        return sfl__fail(SFL_ELIMIT, "%s: %zu nonzero pixels, above the limit of %zu", imname,
                         nnz, lim->max_nnz);
    if ((rc = sfl_csr_new(n, (uint32_t)pix, nnz, &X)) < 0)
        return rc;
    if ((y = sfl__mallocarray(n ? n : 1, sizeof(*y))) == NULL) {
        sfl_csr_free(X);
        return SFL_ENOMEM;
    }
    nnz = 0;
    for (uint32_t r = 0; r < n; r++) {
        const uint8_t *p = im->data + (size_t)r * pix;

        X->rowptr[r] = nnz;
        for (size_t c = 0; c < pix; c++)
            if (p[c]) {
                X->colind[nnz] = (uint32_t)c;
                X->val[nnz++] = p[c] / 255.0;
            }
        y[r] = lb->data[r];
    }
    X->rowptr[n] = nnz;
    return sfl_dataset_new(X, y, out);
}

int sfl_idx_dataset(const char *images, const char *labels, const sfl_read_limits_t *lim,
                    sfl_dataset_t **out)
{
    sfl_read_limits_t def;
    sfl_idx_t *im = NULL, *lb = NULL;
    size_t max;
    int rc;

    *out = NULL;
    if (lim == NULL) {
        sfl_read_limits_default(&def);
        lim = &def;
    }
    /* Every pixel a nonzero at worst: the image bytes are bounded by max_nnz. */
    max = lim->max_nnz;
    if ((rc = sfl_idx_read(images, max, &im)) == 0 &&
        (rc = sfl_idx_read(labels, lim->max_rows, &lb)) == 0)
        rc = sfl_idx_to_dataset(im, images, lb, labels, lim, out);
    sfl_idx_free(im);
    sfl_idx_free(lb);
    return rc;
}

/* sflctl's files: an exported model checked against its hash and rendered
 * (text, libsvm, npy, spcodec), a standardize job's moments, and the atomic
 * write that puts them on disk. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/wire/spcodec.h"

int ctl_export_bytes(const sfl_export_t *e, uint8_t **buf, size_t *len)
{
    uint8_t hash[SFL_MSG_HASH_BYTES], *b = NULL;
    size_t cap;
    int rc;

    *buf = NULL;
    *len = 0;
    if (e->model == NULL)
        return sfl__fail(SFL_EINVAL, "export: no model");
    cap = sfl_spcodec_size(e->model, SFL_ENC_F64);
    b = sfl__malloc(cap ? cap : 1);
    if (b == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_spcodec_encode(e->model, SFL_ENC_F64, b, cap, len)) < 0)
        goto out;
    /* The codec has one encoding per vector, so re-encoding gives back the
     * bytes the coordinator hashed; checking says so rather than trusting. */
    crypto_generichash(hash, sizeof(hash), b, *len, NULL, 0);
    if (memcmp(hash, e->model_hash, sizeof(hash)) != 0) {
        rc = sfl__fail(SFL_EPARSE, "export: model bytes do not match model_hash");
        goto out;
    }
    *buf = b;
    b = NULL;
out:
    sfl__free(b);
    if (rc < 0)
        *len = 0;
    return rc;
}

int ctl_format_parse(const char *s, ctl_format_t *out)
{
    static const char *const names[] = {"text", "libsvm", "npy", "spcodec"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (ctl_format_t)i;
            return 0;
        }
    return sfl__fail(SFL_EINVAL, "unknown --format '%s' (text, libsvm, npy or spcodec)", s);
}

/* Appends a little-endian IEEE double. */
static void put_f64le(uint8_t *p, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof(u));
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

/* NumPy format 1.0: magic, version, a little-endian uint16 header length,
 * then a Python dict literal padded with spaces to a newline so that data
 * starts at a multiple of 64 bytes, then the dense values. */
static int render_npy(const sfl_spvec_t *v, uint8_t **buf, size_t *len)
{
    char hdr[128];
    int hl = snprintf(hdr, sizeof(hdr),
                      "{'descr': '<f8', 'fortran_order': False, 'shape': (%u,), }", v->dim);
    size_t pre = 10 + (size_t)hl + 1, pad = (64 - pre % 64) % 64, hlen = (size_t)hl + pad + 1;
    uint8_t *b;

    if ((size_t)v->dim > (SIZE_MAX - 10 - hlen) / 8)
        return sfl__fail(SFL_ELIMIT, "npy: dimension %u is too large", v->dim);
    *len = 10 + hlen + (size_t)v->dim * 8;
    b = sfl__calloc(*len, 1);
    if (b == NULL)
        return sfl__fail(SFL_ENOMEM, "npy: no memory for %zu bytes", *len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hlen & 0xff);
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + 10, hdr, (size_t)hl);
    memset(b + 10 + hl, ' ', pad);
    b[10 + hlen - 1] = '\n';
    /* calloc gave +0.0 everywhere, whose bytes are all zero too. */
    for (uint32_t k = 0; k < v->nnz; k++)
        put_f64le(b + 10 + hlen + (size_t)v->idx[k] * 8, v->val[k]);
    *buf = b;
    return 0;
}

/* text and libsvm through a memory stream, copied into sfl memory. */
static int render_lines(const sfl_export_t *e, ctl_format_t fmt, uint8_t **buf, size_t *len)
{
    const sfl_spvec_t *v = e->model;
    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    int rc = 0;

    if (f == NULL)
        return sfl__fail(-errno, "model export: %s", strerror(errno));
    if (fmt == CTL_FORMAT_TEXT) {
        fprintf(f, "# sfl model: job %" PRIu64 ", round %" PRIu64 ", algorithm %s, loss %s\n",
                e->job_id, e->round, e->algorithm, e->loss);
        fprintf(f, "# dimension %u, nnz %u; lines: index (1-based, as sfl-sim --model-out) value\n",
                v->dim, v->nnz);
        if (e->nlabels > 0) {
            fprintf(f, "# labels");
            for (uint32_t i = 0; i < e->nlabels; i++)
                fprintf(f, " %.17g", e->labels[i]);
            fputc('\n', f);
        }
        for (uint32_t k = 0; k < v->nnz; k++)
            fprintf(f, "%llu %.17g\n", (unsigned long long)v->idx[k] + 1, v->val[k]);
    } else {
        fputc('0', f);
        for (uint32_t k = 0; k < v->nnz; k++)
            fprintf(f, " %llu:%.17g", (unsigned long long)v->idx[k] + 1, v->val[k]);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || mem == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "model export: out of memory");
        goto out;
    }
    *buf = sfl__malloc(n ? n : 1);
    if (*buf == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "model export: no memory for %zu bytes", n);
        goto out;
    }
    memcpy(*buf, mem, n);
    *len = n;
out:
    free(mem);
    return rc;
}

int ctl_model_render(const sfl_export_t *e, ctl_format_t fmt, uint8_t **buf, size_t *len)
{
    uint8_t *codec = NULL;
    size_t clen = 0;
    int rc;

    *buf = NULL;
    *len = 0;
    /* Every format starts from a model whose hash was checked. */
    if ((rc = ctl_export_bytes(e, &codec, &clen)) < 0)
        return rc;
    switch (fmt) {
    case CTL_FORMAT_SPCODEC:
        *buf = codec;
        *len = clen;
        return 0;
    case CTL_FORMAT_NPY:
        rc = render_npy(e->model, buf, len);
        break;
    case CTL_FORMAT_TEXT:
    case CTL_FORMAT_LIBSVM:
        rc = render_lines(e, fmt, buf, len);
        break;
    default:
        rc = sfl__fail(SFL_EINVAL, "model export: unknown format %d", (int)fmt);
    }
    sfl__free(codec);
    return rc;
}

int ctl_write_atomic(const char *path, const uint8_t *buf, size_t len)
{
    char tmp[CTL_PATH_MAX + 8];
    int fd = -1, rc = 0;
    size_t off = 0;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return sfl__fail(SFL_EINVAL, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sfl__fail(-errno, "%s: cannot create: %s", tmp, strerror(errno));
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = sfl__fail(-errno, "%s: write: %s", tmp, strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0) {
        rc = sfl__fail(-errno, "%s: fsync: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = sfl__fail(-errno, "%s: close: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        rc = sfl__fail(-errno, "%s: rename to %s: %s", tmp, path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmp);
    return rc;
}

int ctl_moments_render(const sfl_export_t *e, uint8_t **buf, size_t *len)
{
    size_t n = 1 + 2 * (size_t)e->dimension, sz = 0;
    char *mem = NULL;
    FILE *f;
    int rc = 0;

    *buf = NULL;
    *len = 0;
    if (e->moments == NULL)
        return sfl__fail(SFL_EINVAL, "model export: the job is not standardized");
    if ((f = open_memstream(&mem, &sz)) == NULL)
        return sfl__fail(-errno, "model export: %s", strerror(errno));
    fprintf(f, "# sfl moments: job %" PRIu64 ", dimension %u, standardize_eps %.17g\n",
            e->job_id, e->dimension, e->standardize_eps);
    fprintf(f, "# lines: rows, then each feature's sum (%u), then each feature's sum of "
            "squares (%u); x -> (x - sum/rows) / (sqrt(squares/rows - (sum/rows)^2) + eps)\n",
            e->dimension, e->dimension);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.17g\n", e->moments[i]);
    if (fclose(f) != 0 || mem == NULL) {
        free(mem);
        return sfl__fail(SFL_ENOMEM, "model export: out of memory");
    }
    if ((*buf = sfl__malloc(sz ? sz : 1)) == NULL)
        rc = sfl__fail(SFL_ENOMEM, "model export: out of memory");
    else {
        memcpy(*buf, mem, sz);
        *len = sz;
    }
    free(mem);
    return rc;
}

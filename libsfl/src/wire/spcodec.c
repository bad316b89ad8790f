#include "sfl/wire/spcodec.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* Layout and limits are in spcodec.h. The decoder treats every byte as
 * hostile: each field is bounds-checked where it is read, sizes are checked
 * against the caller's limits and against the bytes actually present before
 * anything is allocated, and errors name the byte offset. Varints must be
 * minimal (no redundant 0x80 continuation bytes), so every vector has exactly
 * one encoding and a decoded message re-encodes to the same bytes. */

#define VARINT_MAX 5
#define Q8_HEADER 16

static size_t varint_len(uint32_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t put_varint(uint8_t *p, uint32_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Little-endian on every host: the wire order is fixed, the host's is not. */
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static void put_f64(uint8_t *p, double d)
{
    uint64_t v;

    memcpy(&v, &d, sizeof(v));
    put_u64(p, v);
}

static double get_f64(const uint8_t *p)
{
    uint64_t v = get_u64(p);
    double d;

    memcpy(&d, &v, sizeof(d));
    return d;
}

/* 64-bit so that a hostile nnz cannot wrap the sum on a 32-bit host. */
static uint64_t value_bytes(uint32_t nnz, sfl_enc_t enc)
{
    switch (enc) {
    case SFL_ENC_F64:
        return (uint64_t)nnz * 8;
    case SFL_ENC_F32:
        return (uint64_t)nnz * 4;
    case SFL_ENC_Q8:
        return Q8_HEADER + (uint64_t)nnz;
    }
    return 0;
}

size_t sfl_spcodec_size(const sfl_spvec_t *v, sfl_enc_t enc)
{
    size_t n = varint_len(v->dim) + varint_len(v->nnz) + 1;

    for (uint32_t j = 0; j < v->nnz; j++)
        n += varint_len(j == 0 ? v->idx[0] : v->idx[j] - v->idx[j - 1] - 1);
    return n + (size_t)value_bytes(v->nnz, enc);
}

/* q = round((v - lo) / (hi - lo) * 255); lo = min, hi = max of the values. */
static int q8_range(const sfl_spvec_t *v, double *lo, double *hi)
{
    double a = 0.0, b = 0.0;

    if (v->nnz > 0)
        a = b = v->val[0];
    for (uint32_t j = 1; j < v->nnz; j++) {
        if (v->val[j] < a)
            a = v->val[j];
        if (v->val[j] > b)
            b = v->val[j];
    }
    /* The decoder rejects a range whose width overflows, so never send one. */
    if (!isfinite(b - a))
        return sfl__fail(SFL_ERANGE, "q8: value range [%g, %g] too wide", a, b);
    *lo = a;
    *hi = b;
    return 0;
}

int sfl_spcodec_encode(const sfl_spvec_t *v, sfl_enc_t enc, uint8_t *buf, size_t cap,
                       size_t *len)
{
    double lo = 0.0, hi = 0.0;
    size_t need, o = 0;
    int rc;

    assert(len != NULL);
    *len = 0;
    if (enc != SFL_ENC_F64 && enc != SFL_ENC_F32 && enc != SFL_ENC_Q8)
        return sfl__fail(SFL_EINVAL, "spcodec: unknown encoding %d", (int)enc);
    rc = sfl_spvec_validate(v);
    if (rc < 0)
        return rc;
    if (enc == SFL_ENC_F32) {
        for (uint32_t j = 0; j < v->nnz; j++)
            if (fabs(v->val[j]) > FLT_MAX)
                return sfl__fail(SFL_ERANGE, "f32: entry %u (index %u) value %g out of float range",
                                 j, v->idx[j], v->val[j]);
    } else if (enc == SFL_ENC_Q8) {
        rc = q8_range(v, &lo, &hi);
        if (rc < 0)
            return rc;
    }
    need = sfl_spcodec_size(v, enc);
    if (need > cap)
        return sfl__fail(SFL_ELIMIT, "spcodec: need %zu bytes, buffer holds %zu", need, cap);

    o += put_varint(buf + o, v->dim);
    o += put_varint(buf + o, v->nnz);
    buf[o++] = (uint8_t)enc;
    for (uint32_t j = 0; j < v->nnz; j++)
        o += put_varint(buf + o, j == 0 ? v->idx[0] : v->idx[j] - v->idx[j - 1] - 1);
    switch (enc) {
    case SFL_ENC_F64:
        for (uint32_t j = 0; j < v->nnz; j++, o += 8)
            put_f64(buf + o, v->val[j]);
        break;
    case SFL_ENC_F32:
        for (uint32_t j = 0; j < v->nnz; j++, o += 4) {
            float f = (float)v->val[j];
            uint32_t u;

            memcpy(&u, &f, sizeof(u));
            put_u32(buf + o, u);
        }
        break;
    case SFL_ENC_Q8: {
        double w = hi - lo;

        put_f64(buf + o, lo);
        put_f64(buf + o + 8, hi);
        o += Q8_HEADER;
        for (uint32_t j = 0; j < v->nnz; j++) {
            /* v - lo <= hi - lo after rounding too, so s stays in [0, 255]. */
            double s = w > 0.0 ? (v->val[j] - lo) / w * 255.0 : 0.0;

            buf[o++] = (uint8_t)floor(s + 0.5);
        }
        break;
    }
    }
    assert(o == need);
    *len = o;
    return 0;
}

/* Reads a minimal LEB128 varint of at most 32 bits at *off. */
static int get_varint(const uint8_t *buf, size_t len, size_t *off, const char *what,
                      uint32_t *out)
{
    size_t start = *off;
    uint64_t v = 0;

    for (size_t n = 0;; n++) {
        if (n == VARINT_MAX)
            return sfl__fail(SFL_EPARSE, "spcodec: %s: varint longer than %d bytes at byte %zu",
                             what, VARINT_MAX, start);
        if (start + n >= len)
            return sfl__fail(SFL_ETRUNC, "spcodec: %s: truncated varint at byte %zu", what,
                             start);
        uint8_t b = buf[start + n];

        v |= (uint64_t)(b & 0x7f) << (7 * n);
        if (b & 0x80)
            continue;
        if (b == 0 && n > 0)
            return sfl__fail(SFL_EPARSE, "spcodec: %s: non-minimal varint at byte %zu", what,
                             start);
        if (v > UINT32_MAX)
            return sfl__fail(SFL_ERANGE, "spcodec: %s: varint exceeds 32 bits at byte %zu",
                             what, start);
        *off = start + n + 1;
        *out = (uint32_t)v;
        return 0;
    }
}

static int decode_values(const uint8_t *buf, size_t len, size_t off, sfl_enc_t enc,
                         uint32_t nnz, double *val, size_t *end)
{

    /* The caller checked that the minimum length is present; the values are
     * fixed-size, so only the index varints could have eaten into it. */
    if (len - off < value_bytes(nnz, enc))
        return sfl__fail(SFL_ETRUNC, "spcodec: values need %llu bytes at byte %zu, %zu left",
                         (unsigned long long)value_bytes(nnz, enc), off, len - off);
    switch (enc) {
    case SFL_ENC_F64:
        for (uint32_t j = 0; j < nnz; j++, off += 8) {
            val[j] = get_f64(buf + off);
            if (!isfinite(val[j]))
                return sfl__fail(SFL_ENUMERIC, "spcodec: value %u not finite at byte %zu", j,
                                 off);
        }
        break;
    case SFL_ENC_F32:
        for (uint32_t j = 0; j < nnz; j++, off += 4) {
            uint32_t u = get_u32(buf + off);
            float f;

            memcpy(&f, &u, sizeof(f));
            if (!isfinite(f))
                return sfl__fail(SFL_ENUMERIC, "spcodec: value %u not finite at byte %zu", j,
                                 off);
            val[j] = f;
        }
        break;
    case SFL_ENC_Q8: {
        double lo = get_f64(buf + off), hi = get_f64(buf + off + 8);

        if (!isfinite(lo) || !isfinite(hi))
            return sfl__fail(SFL_ENUMERIC, "spcodec: q8 range not finite at byte %zu", off);
        if (!(lo <= hi))
            return sfl__fail(SFL_EPARSE, "spcodec: q8 lo %g > hi %g at byte %zu", lo, hi, off);
        if (!isfinite(hi - lo))
            return sfl__fail(SFL_ERANGE, "spcodec: q8 range [%g, %g] too wide at byte %zu", lo,
                             hi, off);
        off += Q8_HEADER;
        /* (q / 255) <= 1 first, so the product cannot overflow; the sum
         * could still round past DBL_MAX at the very edge of the range. */
        for (uint32_t j = 0; j < nnz; j++, off++) {
            val[j] = lo + (hi - lo) * ((double)buf[off] / 255.0);
            if (!isfinite(val[j]))
                return sfl__fail(SFL_ERANGE, "spcodec: q8 value %u overflows at byte %zu", j,
                                 off);
        }
        break;
    }
    }
    *end = off;
    return 0;
}

int sfl_spcodec_decode_into(const uint8_t *buf, size_t len, uint32_t max_dim, uint32_t max_nnz,
                            sfl_spvec_t *dst)
{
    uint32_t dim, nnz, gap;
    uint64_t need, prev = 0;
    size_t off = 0, at;
    sfl_enc_t enc;
    int rc;

    assert(dst != NULL);
    dst->nnz = 0;
    if (buf == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "spcodec: NULL buffer");
    rc = get_varint(buf, len, &off, "dim", &dim);
    if (rc < 0)
        return rc;
    if (dim > max_dim)
        return sfl__fail(SFL_ELIMIT, "spcodec: dim %u exceeds limit %u (byte 0)", dim, max_dim);
    at = off;
    rc = get_varint(buf, len, &off, "nnz", &nnz);
    if (rc < 0)
        return rc;
    if (nnz > dim)
        return sfl__fail(SFL_EPARSE, "spcodec: nnz %u exceeds dim %u at byte %zu", nnz, dim, at);
    if (nnz > max_nnz)
        return sfl__fail(SFL_ELIMIT, "spcodec: nnz %u exceeds limit %u at byte %zu", nnz,
                         max_nnz, at);
    if (off >= len)
        return sfl__fail(SFL_ETRUNC, "spcodec: missing encoding byte at byte %zu", off);
    switch (buf[off]) {
    case SFL_ENC_F64:
    case SFL_ENC_F32:
    case SFL_ENC_Q8:
        enc = (sfl_enc_t)buf[off];
        break;
    default:
        return sfl__fail(SFL_EUNSUP, "spcodec: unknown encoding %u at byte %zu", buf[off], off);
    }
    off++;
    /* At least one byte per index plus the values must be present before
     * nnz is trusted with an allocation. */
    need = (uint64_t)nnz + value_bytes(nnz, enc);
    if (need > len - off)
        return sfl__fail(SFL_ETRUNC,
                         "spcodec: %u entries need at least %llu bytes after byte %zu, %zu left",
                         nnz, (unsigned long long)need, off, len - off);
    rc = sfl_spvec_reserve(dst, nnz);
    if (rc < 0)
        return rc;
    for (uint32_t j = 0; j < nnz; j++) {
        at = off;
        rc = get_varint(buf, len, &off, "index gap", &gap);
        if (rc < 0)
            return rc;
        /* 64-bit sum: a gap that would wrap a uint32 lands here as >= dim. */
        uint64_t i = j == 0 ? gap : prev + 1 + gap;

        if (i >= dim)
            return sfl__fail(SFL_ERANGE, "spcodec: index %llu of entry %u >= dim %u at byte %zu",
                             (unsigned long long)i, j, dim, at);
        dst->idx[j] = (uint32_t)i;
        prev = i;
    }
    rc = decode_values(buf, len, off, enc, nnz, dst->val, &off);
    if (rc < 0)
        return rc;
    if (off != len)
        return sfl__fail(SFL_EPARSE, "spcodec: %zu trailing bytes at byte %zu", len - off, off);
    dst->dim = dim;
    dst->nnz = nnz;
    return 0;
}

int sfl_spcodec_decode(const uint8_t *buf, size_t len, uint32_t max_dim, uint32_t max_nnz,
                       sfl_spvec_t **out)
{
    /* Decoded into an empty vector on the stack first, so that nothing is
     * allocated before the header has been checked. */
    sfl_spvec_t tmp = {0};
    sfl_spvec_t *v = NULL;
    int rc;

    assert(out != NULL);
    *out = NULL;
    rc = sfl_spcodec_decode_into(buf, len, max_dim, max_nnz, &tmp);
    if (rc < 0)
        goto out;
    /* An empty vector still owns (one-entry) arrays, as sfl_spvec_new's do. */
    rc = sfl_spvec_reserve(&tmp, 1);
    if (rc < 0)
        goto out;
    v = sfl__calloc(1, sizeof(*v));
    if (v == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    *v = tmp;
    tmp = (sfl_spvec_t){0};
    *out = v;
out:
    sfl__free(tmp.idx);
    sfl__free(tmp.val);
    return rc;
}

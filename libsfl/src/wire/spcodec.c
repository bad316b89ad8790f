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
 * minimal (no redundant 0x80 continuation bytes) and bit streams end at
 * their last code, so each layout has one byte string per vector; which
 * layouts the decoder accepts for a vector is in spcodec.h. */

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

/* Index layouts, in the encoding byte's bits 2..7 (spcodec.h). */
#define LAY_VARINT 0u
#define LAY_DENSE 1u
#define LAY_BITMAP 2u
#define RICE_BMAX 29u
#define LAY_RICE 3u                             /* + b: Rice over the support's gaps */
#define LAY_CRICE (LAY_RICE + RICE_BMAX + 1)    /* + b: Rice over the zeros' gaps */
#define LAY_END (LAY_CRICE + RICE_BMAX + 1)     /* 63: refused */

/* s[b] += g >> b for every b with a nonzero term: the quotient bits a Rice
 * code of parameter b spends on g (its 1 + b other bits are counted apart). */
static void rice_acc(uint64_t *s, uint32_t g)
{
    for (unsigned b = 0; b <= RICE_BMAX && (g >> b) != 0; b++)
        s[b] += g >> b;
}

static uint64_t rice_bytes(uint64_t codes, unsigned b, uint64_t quot)
{
    return (codes * (1 + b) + quot + 7) / 8;
}

/* The smallest index layout for v, exactly: every candidate's size is
 * computed in one pass over the support and the least taken, ties to the
 * earlier in the order varint, dense, bitmap, Rice b = 0..29, complement
 * Rice b = 0..29. Returns the index section's bytes, *code its layout.
 *
 * The complement's codes are the gaps between consecutive zero positions:
 * a block of g zeros after a run of `run` nonzeros gives the gap `run` for
 * its first zero and 0 for the other g - 1. */
static uint64_t choose(const sfl_spvec_t *v, unsigned *code)
{
    uint64_t sv = 0, s[RICE_BMAX + 1] = {0}, t[RICE_BMAX + 1] = {0}, best;
    uint32_t k = v->nnz, z = v->dim - v->nnz, run = 0, next = 0;

    for (uint32_t j = 0; j < k; j++) {
        uint32_t g = v->idx[j] - next;

        sv += varint_len(g);
        rice_acc(s, g);
        if (g > 0) {
            rice_acc(t, run);
            run = 0;
        }
        run++;
        next = v->idx[j] + 1;
    }
    if (next < v->dim)
        rice_acc(t, run);
    *code = LAY_VARINT;
    best = sv;
    if (k == v->dim && best > 0) {
        *code = LAY_DENSE;
        best = 0;
    }
    if (((uint64_t)v->dim + 7) / 8 < best) {
        *code = LAY_BITMAP;
        best = ((uint64_t)v->dim + 7) / 8;
    }
    for (unsigned b = 0; b <= RICE_BMAX; b++) {
        if (rice_bytes(k, b, s[b]) < best) {
            *code = LAY_RICE + b;
            best = rice_bytes(k, b, s[b]);
        }
    }
    for (unsigned b = 0; b <= RICE_BMAX; b++) {
        if (rice_bytes(z, b, t[b]) < best) {
            *code = LAY_CRICE + b;
            best = rice_bytes(z, b, t[b]);
        }
    }
    return best;
}

size_t sfl_spcodec_size(const sfl_spvec_t *v, sfl_enc_t enc)
{
    unsigned code;
    uint64_t n = varint_len(v->dim) + varint_len(v->nnz) + 1 + choose(v, &code);

    return (size_t)(n + value_bytes(v->nnz, enc));
}

/* LSB-first bit writer: bit i of the section is byte i / 8, bit i % 8. */
typedef struct {
    uint8_t *p;
    size_t o;
    uint64_t acc;
    unsigned n;
} bitw_t;

/* Appends the low nb <= 32 bits of v; whole 32-bit words are stored as
 * they fill (n < 32 between calls), the tail by bitw_end. */
static void bitw_put(bitw_t *w, uint64_t v, unsigned nb)
{
    w->acc |= v << w->n;
    w->n += nb;
    if (w->n >= 32) {
        put_u32(w->p + w->o, (uint32_t)w->acc);
        w->o += 4;
        w->acc >>= 32;
        w->n -= 32;
    }
}

static void bitw_end(bitw_t *w)
{
    for (; w->n > 0; w->n = w->n > 8 ? w->n - 8 : 0) {
        w->p[w->o++] = (uint8_t)w->acc;
        w->acc >>= 8;
    }
}

/* Rice code of g: q = g >> b zero bits, a one bit, then the low b bits. */
static void bitw_rice(bitw_t *w, uint32_t g, unsigned b)
{
    uint32_t q = g >> b;

    for (; q >= 32; q -= 32)
        bitw_put(w, 0, 32);
    bitw_put(w, (uint64_t)1 << q, q + 1);
    if (b > 0)
        bitw_put(w, g & ((1u << b) - 1), b);
}

static size_t put_index(const sfl_spvec_t *v, unsigned code, uint8_t *p, uint64_t bytes)
{
    bitw_t w = {p, 0, 0, 0};
    uint32_t next = 0, run = 0;

    if (code == LAY_VARINT) {
        for (uint32_t j = 0; j < v->nnz; j++) {
            w.o += put_varint(p + w.o, v->idx[j] - next);
            next = v->idx[j] + 1;
        }
        return w.o;
    }
    if (code == LAY_DENSE)
        return 0;
    if (code == LAY_BITMAP) {
        memset(p, 0, (size_t)bytes);
        for (uint32_t j = 0; j < v->nnz; j++)
            p[v->idx[j] / 8] |= (uint8_t)(1u << (v->idx[j] % 8));
        return (size_t)bytes;
    }
    if (code < LAY_CRICE) {
        for (uint32_t j = 0; j < v->nnz; j++) {
            bitw_rice(&w, v->idx[j] - next, code - LAY_RICE);
            next = v->idx[j] + 1;
        }
    } else {
        unsigned b = code - LAY_CRICE;

        for (uint32_t j = 0; j <= v->nnz; j++) {
            uint32_t at = j < v->nnz ? v->idx[j] : v->dim; /* the end closes the last block */
            uint32_t g = at - next;

            if (g > 0) {
                bitw_rice(&w, run, b);
                for (uint32_t i = 1; i < g; i++)
                    bitw_put(&w, 1, 1 + b); /* gap 0 */
                run = 0;
            }
            run++;
            next = at + 1;
        }
    }
    bitw_end(&w);
    return w.o;
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
    unsigned code;
    uint64_t ibytes = choose(v, &code);

    need = varint_len(v->dim) + varint_len(v->nnz) + 1 + (size_t)ibytes +
           (size_t)value_bytes(v->nnz, enc);
    if (need > cap)
        return sfl__fail(SFL_ELIMIT, "spcodec: need %zu bytes, buffer holds %zu", need, cap);

    o += put_varint(buf + o, v->dim);
    o += put_varint(buf + o, v->nnz);
    buf[o++] = (uint8_t)(enc | code << 2);
    o += put_index(v, code, buf + o, ibytes);
    switch (enc) {
    case SFL_ENC_F64:
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (v->nnz > 0)
            memcpy(buf + o, v->val, (size_t)v->nnz * 8);
        o += (size_t)v->nnz * 8;
#else
        for (uint32_t j = 0; j < v->nnz; j++, o += 8)
            put_f64(buf + o, v->val[j]);
#endif
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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The wire order is the host's: one copy, then the finite check. */
        if (nnz > 0)
            memcpy(val, buf + off, (size_t)nnz * 8);
#else
        for (uint32_t j = 0; j < nnz; j++)
            val[j] = get_f64(buf + off + 8 * (size_t)j);
#endif
        for (uint32_t j = 0; j < nnz; j++)
            if (!isfinite(val[j]))
                return sfl__fail(SFL_ENUMERIC, "spcodec: value %u not finite at byte %zu", j,
                                 off + 8 * (size_t)j);
        off += 8 * (size_t)nnz;
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

/* LSB-first bit reader over the index section p[0..n), by bit position. */
typedef struct {
    const uint8_t *p;
    size_t n, pos;
} bitr_t;

static uint64_t load_le64(const uint8_t *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return v;
#else
    return get_u64(p);
#endif
}

/* The bits from pos on, zeros past the end; *avail of them are real
 * (at most 57). */
static uint64_t bitr_peek(const bitr_t *r, unsigned *avail)
{
    size_t byte = r->pos >> 3, left = 8 * r->n - r->pos;
    uint64_t w = 0;

    if (byte + 8 <= r->n)
        w = load_le64(r->p + byte);
    else
        for (size_t i = byte; i < r->n; i++)
            w |= (uint64_t)r->p[i] << (8 * (i - byte));
    *avail = left < 57 ? (unsigned)left : 57;
    return w >> (r->pos & 7);
}

static int bitr_rice_slow(bitr_t *r, unsigned b, uint32_t max, size_t base, uint32_t *out);

/* One Rice code of parameter b whose value must be <= max. The common
 * case, the whole code within the next 57 bits of the section, is one load;
 * bitr_rice_slow takes long quotients, the section's end and the errors. */
static inline int bitr_rice(bitr_t *r, unsigned b, uint32_t max, size_t base, uint32_t *out)
{
    size_t byte = r->pos >> 3;

    if (byte + 8 <= r->n) {
        uint64_t w = load_le64(r->p + byte) >> (r->pos & 7);

        if (w != 0) {
            unsigned t = (unsigned)__builtin_ctzll(w);

            if (t + 1 + b <= 57) {
                uint64_t g = (uint64_t)t << b | ((w >> (t + 1)) & (((uint64_t)1 << b) - 1));

                if (g <= max) {
                    r->pos += t + 1 + b;
                    *out = (uint32_t)g;
                    return 0;
                }
            }
        }
    }
    return bitr_rice_slow(r, b, max, base, out);
}

static int bitr_rice_slow(bitr_t *r, unsigned b, uint32_t max, size_t base, uint32_t *out)
{
    uint64_t q = 0, w;
    unsigned avail;

    for (;;) {
        w = bitr_peek(r, &avail);
        if (avail == 0)
            return sfl__fail(SFL_ETRUNC, "spcodec: truncated Rice code at byte %zu",
                             base + r->pos / 8);
        w &= ~(uint64_t)0 >> (64 - avail);
        if (w != 0) {
            unsigned t = (unsigned)__builtin_ctzll(w);

            q += t;
            r->pos += t + 1;
            break;
        }
        q += avail;
        r->pos += avail;
        if (q > (max >> b))
            break; /* refused below; stops a long run of zero bits early */
    }
    if (q > (max >> b))
        return sfl__fail(SFL_ERANGE, "spcodec: Rice quotient %llu beyond %u at byte %zu",
                         (unsigned long long)q, max >> b, base + r->pos / 8);
    w = bitr_peek(r, &avail);
    if (avail < b)
        return sfl__fail(SFL_ETRUNC, "spcodec: truncated Rice code at byte %zu",
                         base + r->pos / 8);
    uint64_t g = q << b | (w & (((uint64_t)1 << b) - 1));

    r->pos += b;
    if (g > max)
        return sfl__fail(SFL_ERANGE, "spcodec: Rice code %llu beyond %u at byte %zu",
                         (unsigned long long)g, max, base + (r->pos - 1) / 8);
    *out = (uint32_t)g;
    return 0;
}

/* The section must end with the last code: pad bits zero, no spare byte. */
static int bitr_end(const bitr_t *r, size_t base)
{
    size_t bits = r->pos, used = (bits + 7) / 8;

    if (bits % 8 != 0 && (r->p[used - 1] >> (bits % 8)) != 0)
        return sfl__fail(SFL_EPARSE, "spcodec: nonzero padding bits at byte %zu",
                         base + used - 1);
    if (used != r->n)
        return sfl__fail(SFL_EPARSE, "spcodec: %zu bytes after the index codes at byte %zu",
                         r->n - used, base + used);
    return 0;
}

static int get_varint_index(const uint8_t *buf, size_t len, size_t off, uint32_t dim,
                            uint32_t nnz, uint32_t *idx, size_t *end)
{
    uint64_t prev = 0;
    uint32_t gap;
    int rc;

    for (uint32_t j = 0; j < nnz; j++) {
        size_t at = off;

        rc = get_varint(buf, len, &off, "index gap", &gap);
        if (rc < 0)
            return rc;
        /* 64-bit sum: a gap that would wrap a uint32 lands here as >= dim. */
        uint64_t i = j == 0 ? gap : prev + 1 + gap;

        if (i >= dim)
            return sfl__fail(SFL_ERANGE, "spcodec: index %llu of entry %u >= dim %u at byte %zu",
                             (unsigned long long)i, j, dim, at);
        idx[j] = (uint32_t)i;
        prev = i;
    }
    *end = off;
    return 0;
}

static int get_bitmap_index(const uint8_t *p, size_t n, size_t base, uint32_t dim,
                            uint32_t nnz, uint32_t *idx)
{
    uint32_t j = 0;

    if (dim % 8 != 0 && (p[n - 1] >> (dim % 8)) != 0)
        return sfl__fail(SFL_ERANGE, "spcodec: bitmap bit beyond dim %u at byte %zu", dim,
                         base + n - 1);
    for (size_t o = 0; o < n; o += 8) {
        uint64_t w = 0;

        if (o + 8 <= n)
            w = get_u64(p + o);
        else
            for (size_t i = o; i < n; i++)
                w |= (uint64_t)p[i] << (8 * (i - o));
        while (w != 0) {
            if (j == nnz)
                return sfl__fail(SFL_EPARSE, "spcodec: bitmap has more than nnz %u bits set "
                                             "at byte %zu", nnz, base + o);
            idx[j++] = (uint32_t)(8 * o + (unsigned)__builtin_ctzll(w));
            w &= w - 1;
        }
    }
    if (j != nnz)
        return sfl__fail(SFL_EPARSE, "spcodec: bitmap has %u bits set, nnz %u at byte %zu", j,
                         nnz, base);
    return 0;
}

static int get_rice_index(const uint8_t *p, size_t n, size_t base, uint32_t dim, uint32_t nnz,
                          unsigned b, uint32_t *idx)
{
    bitr_t r = {p, n, 0};
    uint32_t next = 0, g;
    int rc;

    for (uint32_t j = 0; j < nnz; j++) {
        /* next <= dim - 1 - (entries still to come) keeps every index < dim */
        rc = bitr_rice(&r, b, dim - next - (nnz - j), base, &g);
        if (rc < 0)
            return rc;
        idx[j] = next + g;
        next = idx[j] + 1;
    }
    return bitr_end(&r, base);
}

/* Complement: the dim - nnz zero positions as Rice gaps; the support is
 * every other position. */
static int get_crice_index(const uint8_t *p, size_t n, size_t base, uint32_t dim,
                           uint32_t nnz, unsigned b, uint32_t *idx)
{
    bitr_t r = {p, n, 0};
    uint32_t z = dim - nnz, next = 0, j = 0, g;
    int rc;

    for (uint32_t i = 0; i < z; i++) {
        /* the zeros still to come after this one must fit below dim */
        rc = bitr_rice(&r, b, dim - next - (z - i), base, &g);
        if (rc < 0)
            return rc;
        for (uint32_t k = 0; k < g; k++)
            idx[j++] = next + k;
        next += g + 1;
    }
    while (next < dim)
        idx[j++] = next++;
    assert(j == nnz);
    return bitr_end(&r, base);
}

int sfl_spcodec_decode_into(const uint8_t *buf, size_t len, uint32_t max_dim, uint32_t max_nnz,
                            sfl_spvec_t *dst)
{
    uint32_t dim, nnz;
    uint64_t need, vb, least;
    size_t off = 0, at, n;
    unsigned code;
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
    code = buf[off] >> 2;
    switch (buf[off] & SFL_SPCODEC_ENC_MASK) {
    case SFL_ENC_F64:
    case SFL_ENC_F32:
    case SFL_ENC_Q8:
        enc = (sfl_enc_t)(buf[off] & SFL_SPCODEC_ENC_MASK);
        break;
    default:
        return sfl__fail(SFL_EUNSUP, "spcodec: unknown encoding %u at byte %zu", buf[off], off);
    }
    if (code >= LAY_END)
        return sfl__fail(SFL_EUNSUP, "spcodec: unknown layout %u at byte %zu", code, off);
    /* A dense layout with nnz != dim is not a vector. (nnz == dim in
     * another layout is allowed: stored checkpoints of a full model are in
     * varint.) */
    if (code == LAY_DENSE && (nnz != dim || dim == 0))
        return sfl__fail(SFL_EPARSE, "spcodec: layout %u with nnz %u of dim %u at byte %zu",
                         code, nnz, dim, off);
    off++;
    /* The least each layout can take (a byte per varint, 1 + b bits per Rice
     * code, the whole bitmap) plus the values must be present before nnz is
     * trusted with an allocation; the values alone are >= nnz bytes. */
    vb = value_bytes(nnz, enc);
    if (code == LAY_VARINT)
        least = nnz;
    else if (code == LAY_DENSE)
        least = 0;
    else if (code == LAY_BITMAP)
        least = ((uint64_t)dim + 7) / 8;
    else if (code < LAY_CRICE)
        least = rice_bytes(nnz, code - LAY_RICE, 0);
    else
        least = rice_bytes(dim - nnz, code - LAY_CRICE, 0);
    need = least + vb;
    if (need > len - off)
        return sfl__fail(SFL_ETRUNC,
                         "spcodec: %u entries need at least %llu bytes after byte %zu, %zu left",
                         nnz, (unsigned long long)need, off, len - off);
    rc = sfl_spvec_reserve(dst, nnz);
    if (rc < 0)
        return rc;
    /* Every layout but varint ends where the values begin: len - vb. */
    n = (size_t)(len - off - vb);
    if (code == LAY_VARINT) {
        rc = get_varint_index(buf, len, off, dim, nnz, dst->idx, &off);
    } else if (code == LAY_DENSE) {
        for (uint32_t j = 0; j < nnz; j++)
            dst->idx[j] = j;
    } else if (code == LAY_BITMAP) {
        if (n != least)
            rc = sfl__fail(SFL_EPARSE, "spcodec: %llu bytes after the bitmap at byte %zu",
                           (unsigned long long)(n - least), off + (size_t)least);
        else
            rc = get_bitmap_index(buf + off, n, off, dim, nnz, dst->idx);
        off += n;
    } else if (code < LAY_CRICE) {
        rc = get_rice_index(buf + off, n, off, dim, nnz, code - LAY_RICE, dst->idx);
        off += n;
    } else {
        rc = get_crice_index(buf + off, n, off, dim, nnz, code - LAY_CRICE, dst->idx);
        off += n;
    }
    if (rc < 0)
        return rc;
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

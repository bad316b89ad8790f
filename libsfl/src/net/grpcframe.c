#include "sfl/net/grpcframe.h"

#include <assert.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* The assembly buffer starts at this size and doubles, capped at the
 * announced length: memory follows the bytes received, not the bytes
 * promised. A buffer above KEEP_MAX is dropped between messages so a
 * long-lived stream that once carried a big message does not pin it. */
#define GROW_MIN 4096u
#define KEEP_MAX (64u * 1024u)

/* Zero-length messages need a valid pointer that is not into the input (the
 * input may end exactly at the prefix). */
static const uint8_t empty[1];

void sfl_grpcframe_init(sfl_grpcframe_t *d, uint32_t max_message)
{
    assert(d != NULL);
    memset(d, 0, sizeof(*d));
    d->max_message = max_message;
}

void sfl_grpcframe_close(sfl_grpcframe_t *d)
{
    if (d == NULL)
        return;
    sfl__free(d->buf);
    memset(d, 0, sizeof(*d));
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Called once the five prefix bytes are in: decides before any allocation. */
static int check_prefix(sfl_grpcframe_t *d)
{
    uint8_t flag = d->prefix[0];
    uint32_t n = get_be32(d->prefix + 1);

    if (flag == 1)
        return sfl__fail(SFL_EUNSUP, "grpc: compressed message (flag 1) but no compression "
                                     "was negotiated");
    if (flag != 0)
        return sfl__fail(SFL_EPARSE, "grpc: message flag byte %u (expected 0 or 1)",
                         (unsigned)flag);
    if (n > d->max_message)
        return sfl__fail(SFL_ELIMIT, "grpc: message of %u bytes exceeds the limit of %u", n,
                         d->max_message);
    d->need = n;
    d->have = 0;
    return 0;
}

static int reserve(sfl_grpcframe_t *d, uint32_t want)
{
    uint32_t nc = d->cap ? d->cap : GROW_MIN;
    uint8_t *nb;

    if (want <= d->cap)
        return 0;
    while (nc < want && nc <= UINT32_MAX / 2)
        nc *= 2;
    if (nc < want || nc > d->need)
        nc = d->need;
    nb = sfl__reallocarray(d->buf, nc, 1);
    if (nb == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: cannot buffer a %u-byte message", d->need);
    d->buf = nb;
    d->cap = nc;
    return 0;
}

int sfl_grpcframe_feed(sfl_grpcframe_t *d, const uint8_t *buf, size_t len, size_t *used,
                       const uint8_t **msg, size_t *msg_len)
{
    size_t off = 0;
    int rc = 0;

    assert(d != NULL && used != NULL && msg != NULL && msg_len != NULL);
    assert(buf != NULL || len == 0);
    *msg = NULL;
    *msg_len = 0;
    if (d->err != 0) {
        *used = 0;
        return sfl__fail(d->err, "grpc: message stream already failed (%s)",
                         sfl_strerror(d->err));
    }
    if (d->prefix_len == 0 && d->cap > KEEP_MAX) {
        sfl__free(d->buf);
        d->buf = NULL;
        d->cap = 0;
    }
    while (off < len) {
        if (d->prefix_len < SFL_GRPCFRAME_PREFIX) {
            d->prefix[d->prefix_len++] = buf[off++];
            if (d->prefix_len < SFL_GRPCFRAME_PREFIX)
                continue;
            rc = check_prefix(d);
            if (rc != 0)
                goto out;
            if (d->need == 0) {
                *msg = empty;
                d->prefix_len = 0;
                rc = 1;
                goto out;
            }
            if (len - off >= d->need) {
                /* Whole message inside this chunk: hand it out in place. */
                *msg = buf + off;
                *msg_len = d->need;
                off += d->need;
                d->prefix_len = 0;
                rc = 1;
                goto out;
            }
            continue;
        }
        size_t take = d->need - d->have;
        if (take > len - off)
            take = len - off;
        rc = reserve(d, d->have + (uint32_t)take);
        if (rc != 0)
            goto out;
        memcpy(d->buf + d->have, buf + off, take);
        d->have += (uint32_t)take;
        off += take;
        if (d->have == d->need) {
            *msg = d->buf;
            *msg_len = d->need;
            d->prefix_len = 0;
            rc = 1;
            goto out;
        }
    }
out:
    if (rc < 0)
        d->err = rc;
    *used = off;
    return rc;
}

int sfl_grpcframe_take(sfl_grpcframe_t *d, const uint8_t *msg, size_t len, uint8_t **out)
{
    assert(d != NULL && out != NULL);
    *out = NULL;
    if (len == 0)
        return 0;
    assert(msg != NULL);
    if (msg == d->buf) {
        *out = d->buf;
        d->buf = NULL;
        d->cap = 0;
        return 0;
    }
    *out = sfl__malloc(len);
    if (*out == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: cannot copy a %zu-byte message", len);
    memcpy(*out, msg, len);
    return 0;
}

int sfl_grpcframe_end(const sfl_grpcframe_t *d)
{
    assert(d != NULL);
    if (d->err != 0)
        return d->err;
    if (d->prefix_len == 0)
        return 0;
    if (d->prefix_len < SFL_GRPCFRAME_PREFIX)
        return sfl__fail(SFL_ETRUNC, "grpc: stream ended inside a message prefix (%u of 5 bytes)",
                         (unsigned)d->prefix_len);
    return sfl__fail(SFL_ETRUNC, "grpc: stream ended %u bytes into a %u-byte message", d->have,
                     d->need);
}

int sfl_grpcframe_prefix(uint8_t out[SFL_GRPCFRAME_PREFIX], size_t len)
{
    assert(out != NULL);
    if (len > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "grpc: message of %zu bytes does not fit the 32-bit length",
                         len);
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
    return 0;
}

int sfl_grpcframe_encode(const uint8_t *msg, size_t len, uint8_t *buf, size_t cap,
                         size_t *written)
{
    uint8_t pre[SFL_GRPCFRAME_PREFIX];
    int rc;

    assert(buf != NULL && written != NULL && (msg != NULL || len == 0));
    *written = 0;
    /* The length check comes first, so buf is not written on failure. */
    rc = sfl_grpcframe_prefix(pre, len);
    if (rc != 0)
        return rc;
    if (cap < SFL_GRPCFRAME_PREFIX || cap - SFL_GRPCFRAME_PREFIX < len)
        return sfl__fail(SFL_ELIMIT, "grpc: %zu-byte buffer too small for a %zu-byte message",
                         cap, len);
    memcpy(buf, pre, SFL_GRPCFRAME_PREFIX);
    if (len > 0)
        memcpy(buf + SFL_GRPCFRAME_PREFIX, msg, len);
    *written = len + SFL_GRPCFRAME_PREFIX;
    return 0;
}

/* libFuzzer entry point for the gRPC message deframer.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ilibsfl/include \
 *       tests/fuzz/fuzz_grpcframe.c libsfl/src/net/grpcframe.c \
 *       libsfl/src/core/alloc.c libsfl/src/core/error.c -o build/fuzz_grpcframe
 *   ./build/fuzz_grpcframe -max_total_time=30 corpus/
 *
 * Input: byte 0 picks the message limit, byte 1 the chunking, the rest is
 * the stream. Beyond "no crash": feeding the stream whole and in uneven
 * chunks must give the same messages and the same outcome, and re-framing
 * the messages must give back exactly the bytes they came from (the framing
 * has one encoding per message). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/net/grpcframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t *out; /* messages re-framed */
    size_t len;
    size_t cap;
    int rc;       /* first error, else sfl_grpcframe_end's result */
} run_t;

static void reframe(run_t *r, const uint8_t *msg, size_t len)
{
    size_t w;

    if (sfl_grpcframe_encode(msg, len, r->out + r->len, r->cap - r->len, &w) != 0)
        abort();
    r->len += w;
}

/* chunk == 0: one shot; else chunk sizes cycle 1..chunk. */
static void run(const uint8_t *data, size_t size, uint32_t max, size_t chunk, run_t *r)
{
    sfl_grpcframe_t d;
    size_t off = 0, k = 0;

    sfl_grpcframe_init(&d, max);
    r->len = 0;
    r->rc = 0;
    while (off < size && r->rc == 0) {
        size_t n = chunk == 0 ? size - off : 1 + k++ % chunk;
        if (n > size - off)
            n = size - off;
        const uint8_t *p = data + off;
        off += n;
        while (n > 0) {
            const uint8_t *msg;
            size_t used, mlen;
            int rc = sfl_grpcframe_feed(&d, p, n, &used, &msg, &mlen);

            if (used > n)
                abort();
            p += used;
            n -= used;
            if (rc < 0) {
                r->rc = rc;
                break;
            }
            if (rc == 0) {
                if (n != 0)
                    abort(); /* 0 means everything was consumed */
                break;
            }
            if (mlen > max || msg == NULL)
                abort();
            reframe(r, msg, mlen);
        }
    }
    if (r->rc == 0)
        r->rc = sfl_grpcframe_end(&d);
    sfl_grpcframe_close(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_t a, b;

    if (size < 2)
        return 0;
    uint32_t max = (uint32_t)data[0] * 61u;
    size_t chunk = 1 + data[1] % 13u;
    data += 2;
    size -= 2;
    /* Re-framed output never exceeds the input. */
    a.out = malloc(size + 1);
    b.out = malloc(size + 1);
    if (a.out == NULL || b.out == NULL)
        abort();
    a.cap = b.cap = size + 1;
    run(data, size, max, 0, &a);
    run(data, size, max, chunk, &b);
    if (a.rc != b.rc || a.len != b.len || memcmp(a.out, b.out, a.len) != 0)
        abort();
    if (a.len > size || memcmp(a.out, data, a.len) != 0)
        abort();
    if (a.rc == 0 && a.len != size)
        abort(); /* a clean end consumed everything as messages */
    free(a.out);
    free(b.out);
    return 0;
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/net/grpcframe.h"

/* Frames msgs[i] of lens[i] bytes back to back into a fresh buffer. */
static uint8_t *frame_all(const uint8_t *const *msgs, const size_t *lens, size_t n,
                          size_t *total)
{
    size_t len = 0, off = 0, w;
    uint8_t *buf;

    for (size_t i = 0; i < n; i++)
        len += SFL_GRPCFRAME_PREFIX + lens[i];
    buf = malloc(len ? len : 1);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sfl_grpcframe_encode(msgs[i], lens[i], buf + off, len - off, &w), 0);
        assert_int_equal(w, lens[i] + SFL_GRPCFRAME_PREFIX);
        off += w;
    }
    *total = len;
    return buf;
}

/* Feeds buf in chunks of `chunk` bytes; checks the messages come out equal
 * to msgs. Returns the number of messages seen. */
static size_t deframe_chunks(const uint8_t *buf, size_t len, size_t chunk, uint32_t max,
                             const uint8_t *const *msgs, const size_t *lens)
{
    sfl_grpcframe_t d;
    size_t seen = 0;

    sfl_grpcframe_init(&d, max);
    for (size_t off = 0; off < len;) {
        size_t n = len - off < chunk ? len - off : chunk;
        const uint8_t *p = buf + off;

        off += n;
        while (n > 0) {
            const uint8_t *msg;
            size_t used, mlen;
            int rc = sfl_grpcframe_feed(&d, p, n, &used, &msg, &mlen);

            assert_true(rc == 0 || rc == 1);
            assert_true(used <= n);
            p += used;
            n -= used;
            if (rc == 1) {
                assert_int_equal(mlen, lens[seen]);
                if (mlen > 0)
                    assert_memory_equal(msg, msgs[seen], mlen);
                seen++;
            } else {
                assert_int_equal(n, 0);
            }
        }
    }
    assert_int_equal(sfl_grpcframe_end(&d), 0);
    sfl_grpcframe_close(&d);
    return seen;
}

static void test_grpcframe_roundtrip_chunks(void **state)
{
    uint8_t big[70000];
    const uint8_t a[] = "hello";
    const uint8_t *msgs[] = {a, (const uint8_t *)"", big, a};
    const size_t lens[] = {5, 0, sizeof(big), 5};
    size_t total;
    uint8_t *buf;
    static const size_t chunks[] = {1, 2, 3, 4, 5, 6, 7, 4096, 70005, 1000000};

    (void)state;
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (uint8_t)(i * 31 + 7);
    buf = frame_all(msgs, lens, 4, &total);
    assert_int_equal(total, 4 * 5 + 5 + 0 + sizeof(big) + 5);
    /* Exact wire bytes of the first message. */
    const uint8_t first[] = {0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'};
    assert_memory_equal(buf, first, sizeof(first));
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++)
        assert_int_equal(deframe_chunks(buf, total, chunks[i], 1u << 20, msgs, lens), 4);
    free(buf);
}

static void test_grpcframe_zero_copy_and_take(void **state)
{
    const uint8_t a[] = "abcdef";
    const uint8_t *msgs[] = {a};
    const size_t lens[] = {6};
    size_t total, used, mlen;
    const uint8_t *msg;
    uint8_t *owned;
    uint8_t *buf = frame_all(msgs, lens, 1, &total);
    sfl_grpcframe_t d;

    (void)state;
    sfl_grpcframe_init(&d, 100);
    /* Whole message in one chunk: returned in place. */
    assert_int_equal(sfl_grpcframe_feed(&d, buf, total, &used, &msg, &mlen), 1);
    assert_ptr_equal(msg, buf + 5);
    assert_int_equal(used, total);
    assert_int_equal(sfl_grpcframe_take(&d, msg, mlen, &owned), 0);
    assert_memory_equal(owned, "abcdef", 6);
    sfl__free(owned);
    /* Split message: assembled in d, take steals the buffer. */
    assert_int_equal(sfl_grpcframe_feed(&d, buf, 7, &used, &msg, &mlen), 0);
    assert_int_equal(used, 7);
    assert_int_equal(sfl_grpcframe_feed(&d, buf + 7, total - 7, &used, &msg, &mlen), 1);
    assert_ptr_equal(msg, d.buf);
    assert_int_equal(sfl_grpcframe_take(&d, msg, mlen, &owned), 0);
    assert_ptr_equal(owned, msg);
    assert_null(d.buf);
    assert_memory_equal(owned, "abcdef", 6);
    sfl__free(owned);
    /* Zero-length message: take gives NULL. */
    const uint8_t zero[5] = {0};
    assert_int_equal(sfl_grpcframe_feed(&d, zero, 5, &used, &msg, &mlen), 1);
    assert_non_null(msg);
    assert_int_equal(mlen, 0);
    assert_int_equal(sfl_grpcframe_take(&d, msg, mlen, &owned), 0);
    assert_null(owned);
    sfl_grpcframe_close(&d);
    free(buf);
}

static void test_grpcframe_stops_after_each_message(void **state)
{
    const uint8_t *msgs[] = {(const uint8_t *)"x", (const uint8_t *)"yz"};
    const size_t lens[] = {1, 2};
    size_t total, used, mlen;
    const uint8_t *msg;
    uint8_t *buf = frame_all(msgs, lens, 2, &total);
    sfl_grpcframe_t d;

    (void)state;
    sfl_grpcframe_init(&d, 10);
    assert_int_equal(sfl_grpcframe_feed(&d, buf, total, &used, &msg, &mlen), 1);
    assert_int_equal(used, 6);
    assert_int_equal(mlen, 1);
    assert_int_equal(sfl_grpcframe_feed(&d, buf + used, total - used, &used, &msg, &mlen), 1);
    assert_int_equal(used, 7);
    assert_memory_equal(msg, "yz", 2);
    assert_int_equal(sfl_grpcframe_feed(&d, buf, 0, &used, &msg, &mlen), 0);
    assert_int_equal(used, 0);
    sfl_grpcframe_close(&d);
    free(buf);
}

/* Counts allocations above a size: the oversized test must see none. */
static size_t biggest;

static void *track_malloc(size_t n)
{
    if (n > biggest)
        biggest = n;
    return malloc(n);
}

static void *track_realloc(void *p, size_t n)
{
    if (n > biggest)
        biggest = n;
    return realloc(p, n);
}

static void test_grpcframe_oversized(void **state)
{
    /* Announces 1 GiB; the limit is 1 MiB. */
    const uint8_t hdr[] = {0, 0x40, 0, 0, 0, 1, 2, 3};
    const uint8_t just[] = {0, 0, 0, 0x04, 0x01}; /* 1025 bytes, limit 1024 */
    size_t used, mlen;
    const uint8_t *msg;
    sfl_grpcframe_t d;

    (void)state;
    biggest = 0;
    assert_int_equal(sfl_replace_allocator(track_malloc, track_realloc, free), 0);
    sfl_grpcframe_init(&d, 1u << 20);
    assert_int_equal(sfl_grpcframe_feed(&d, hdr, sizeof(hdr), &used, &msg, &mlen), SFL_ELIMIT);
    assert_int_equal(used, 5);
    assert_null(msg);
    assert_non_null(strstr(sfl_last_error(), "1073741824"));
    /* Sticky. */
    assert_int_equal(sfl_grpcframe_feed(&d, hdr + 5, 3, &used, &msg, &mlen), SFL_ELIMIT);
    assert_int_equal(used, 0);
    assert_int_equal(sfl_grpcframe_end(&d), SFL_ELIMIT);
    sfl_grpcframe_close(&d);
    assert_int_equal(biggest, 0);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);

    sfl_grpcframe_init(&d, 1024);
    assert_int_equal(sfl_grpcframe_feed(&d, just, 5, &used, &msg, &mlen), SFL_ELIMIT);
    sfl_grpcframe_close(&d);
}

static void test_grpcframe_grows_with_bytes_received(void **state)
{
    /* Announces 1 MiB, sends 10 bytes: the buffer stays small. */
    uint8_t hdr[15] = {0, 0, 0x10, 0, 0};
    size_t used, mlen;
    const uint8_t *msg;
    sfl_grpcframe_t d;

    (void)state;
    biggest = 0;
    assert_int_equal(sfl_replace_allocator(track_malloc, track_realloc, free), 0);
    sfl_grpcframe_init(&d, 1u << 20);
    assert_int_equal(sfl_grpcframe_feed(&d, hdr, sizeof(hdr), &used, &msg, &mlen), 0);
    assert_true(biggest <= 4096);
    assert_int_equal(sfl_grpcframe_end(&d), SFL_ETRUNC);
    sfl_grpcframe_close(&d);
    assert_int_equal(sfl_replace_allocator(NULL, NULL, NULL), 0);
}

static void test_grpcframe_compressed_and_bad_flag(void **state)
{
    const uint8_t comp[] = {1, 0, 0, 0, 1, 'x'};
    const uint8_t bad[] = {2, 0, 0, 0, 1, 'x'};
    size_t used, mlen;
    const uint8_t *msg;
    sfl_grpcframe_t d;

    (void)state;
    sfl_grpcframe_init(&d, 100);
    assert_int_equal(sfl_grpcframe_feed(&d, comp, sizeof(comp), &used, &msg, &mlen), SFL_EUNSUP);
    assert_non_null(strstr(sfl_last_error(), "compress"));
    sfl_grpcframe_close(&d);
    sfl_grpcframe_init(&d, 100);
    assert_int_equal(sfl_grpcframe_feed(&d, bad, sizeof(bad), &used, &msg, &mlen), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "flag"));
    sfl_grpcframe_close(&d);
}

static void test_grpcframe_truncated(void **state)
{
    const uint8_t part[] = {0, 0, 0, 0, 9, 'a', 'b'};
    size_t used, mlen;
    const uint8_t *msg;
    sfl_grpcframe_t d;

    (void)state;
    for (size_t cut = 1; cut <= sizeof(part); cut++) {
        sfl_grpcframe_init(&d, 100);
        assert_int_equal(sfl_grpcframe_feed(&d, part, cut, &used, &msg, &mlen), 0);
        assert_int_equal(used, cut);
        assert_int_equal(sfl_grpcframe_end(&d), SFL_ETRUNC);
        sfl_grpcframe_close(&d);
    }
    sfl_grpcframe_init(&d, 100);
    assert_int_equal(sfl_grpcframe_end(&d), 0); /* empty stream is fine */
    sfl_grpcframe_close(&d);
    sfl_grpcframe_close(NULL);
}

static void test_grpcframe_encode_limits(void **state)
{
    uint8_t buf[8], pre[5];
    size_t w = 99;

    (void)state;
    assert_int_equal(sfl_grpcframe_encode((const uint8_t *)"abcd", 4, buf, 8, &w), SFL_ELIMIT);
    assert_int_equal(w, 0);
    assert_int_equal(sfl_grpcframe_encode((const uint8_t *)"abc", 3, buf, 8, &w), 0);
    assert_int_equal(w, 8);
    assert_int_equal(sfl_grpcframe_encode(NULL, 0, buf, 4, &w), SFL_ELIMIT);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(sfl_grpcframe_prefix(pre, (size_t)UINT32_MAX + 1), SFL_ELIMIT);
#endif
    assert_int_equal(sfl_grpcframe_prefix(pre, 0x01020304), 0);
    const uint8_t want[] = {0, 1, 2, 3, 4};
    assert_memory_equal(pre, want, 5);
}

static int feed_split(void)
{
    const uint8_t buf[] = {0, 0, 0, 0, 3, 'a', 'b', 'c'};
    size_t used, mlen;
    const uint8_t *msg;
    uint8_t *owned = NULL;
    sfl_grpcframe_t d;
    int rc;

    sfl_grpcframe_init(&d, 100);
    rc = sfl_grpcframe_feed(&d, buf, 6, &used, &msg, &mlen);
    if (rc < 0)
        goto out;
    rc = sfl_grpcframe_feed(&d, buf + 6, 2, &used, &msg, &mlen);
    if (rc < 0)
        goto out;
    assert_int_equal(rc, 1);
    rc = sfl_grpcframe_take(&d, msg, mlen, &owned);
    if (rc == 0)
        assert_memory_equal(owned, "abc", 3);
out:
    sfl__free(owned);
    sfl_grpcframe_close(&d);
    return rc;
}

static int take_copy(void)
{
    const uint8_t buf[] = {0, 0, 0, 0, 2, 'h', 'i'};
    size_t used, mlen;
    const uint8_t *msg;
    uint8_t *owned = NULL;
    sfl_grpcframe_t d;
    int rc;

    sfl_grpcframe_init(&d, 100);
    rc = sfl_grpcframe_feed(&d, buf, sizeof(buf), &used, &msg, &mlen);
    assert_int_equal(rc, 1);
    rc = sfl_grpcframe_take(&d, msg, mlen, &owned);
    sfl__free(owned);
    sfl_grpcframe_close(&d);
    return rc;
}

static void test_grpcframe_failalloc(void **state)
{
    (void)state;
    FAILALLOC_EACH(feed_split(), (void)0);
    FAILALLOC_EACH(take_copy(), (void)0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grpcframe_roundtrip_chunks),
        cmocka_unit_test(test_grpcframe_zero_copy_and_take),
        cmocka_unit_test(test_grpcframe_stops_after_each_message),
        cmocka_unit_test(test_grpcframe_oversized),
        cmocka_unit_test(test_grpcframe_grows_with_bytes_received),
        cmocka_unit_test(test_grpcframe_compressed_and_bad_flag),
        cmocka_unit_test(test_grpcframe_truncated),
        cmocka_unit_test(test_grpcframe_encode_limits),
        cmocka_unit_test(test_grpcframe_failalloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

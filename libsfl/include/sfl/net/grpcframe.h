/* gRPC message framing: the 5-byte length prefix, independent of HTTP/2.
 *
 * On a gRPC stream every message is
 *   u8 compressed flag (0 or 1) | u32 big-endian length | length bytes.
 * sfl never negotiates compression (no grpc-encoding), so a message with the
 * flag set is rejected; any other flag value is malformed.
 *
 * The deframer takes arbitrary chunks (a DATA frame may hold half a prefix or
 * ten messages) and yields complete messages. A length above the configured
 * maximum is rejected as soon as the prefix is complete, before anything is
 * allocated; below it, the assembly buffer grows with the bytes that actually
 * arrived, so a peer announcing a large message and sending nothing costs
 * nothing. A message that arrives whole inside one chunk is returned in place,
 * without a copy. */
#ifndef SFL_GRPCFRAME_H
#define SFL_GRPCFRAME_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_GRPCFRAME_PREFIX 5

/* Incremental deframer, embedded in its owner (_init / _close). */
typedef struct {
    /* largest accepted message length */
    uint32_t max_message;
    /* length of the message being assembled (valid once prefix_len == 5) */
    uint32_t need;
    /* bytes of that message held in buf */
    uint32_t have;
    /* allocated size of buf */
    uint32_t cap;
    /* assembly buffer (sfl__malloc), NULL until a split message needs it */
    uint8_t *buf;
    /* prefix bytes collected so far, and how many */
    uint8_t prefix[SFL_GRPCFRAME_PREFIX];
    uint8_t prefix_len;
    /* sticky error: once feed failed, it keeps failing with this code */
    int err;
} sfl_grpcframe_t;

/* Ready to receive messages of at most max_message bytes. */
void sfl_grpcframe_init(sfl_grpcframe_t *d, uint32_t max_message);
/* Releases the buffer; d may be re-initialised. */
void sfl_grpcframe_close(sfl_grpcframe_t *d);

/* Consumes bytes of buf[0..len) until one message is complete or the input
 * runs out; *used = bytes consumed. Returns
 *   1  a message is complete: *msg, *msg_len borrow it (it points into buf or
 *      into d) until the next call on d; call again with buf + *used for more;
 *   0  all input consumed, no message complete yet;
 *   <0 an error, and every later call returns it too:
 *      SFL_ELIMIT length above max_message (nothing allocated for it),
 *      SFL_EUNSUP compressed flag set, SFL_EPARSE flag byte not 0 or 1,
 *      SFL_ENOMEM.
 * sfl_last_error() names the length, the limit or the flag. */
int sfl_grpcframe_feed(sfl_grpcframe_t *d, const uint8_t *buf, size_t len, size_t *used,
                       const uint8_t **msg, size_t *msg_len) SFL_MUST_CHECK;

/* Returns owned (sfl__free) the message msg, len that feed just returned:
 * the assembly buffer itself when the message was assembled in d (no copy;
 * d allocates a fresh one if needed later), else a copy. A zero-length
 * message gives *out = NULL. SFL_ENOMEM on allocation failure. */
int sfl_grpcframe_take(sfl_grpcframe_t *d, const uint8_t *msg, size_t len,
                       uint8_t **out) SFL_MUST_CHECK;

/* At end of stream: 0 when no message is half received, SFL_ETRUNC when one
 * is (sfl_last_error() says how much is missing), or the sticky error. */
int sfl_grpcframe_end(const sfl_grpcframe_t *d) SFL_MUST_CHECK;

/* Writes the uncompressed prefix for a len-byte message; SFL_ELIMIT if len
 * does not fit in 32 bits. */
int sfl_grpcframe_prefix(uint8_t out[SFL_GRPCFRAME_PREFIX], size_t len) SFL_MUST_CHECK;

/* Writes prefix + msg[0..len) into buf[0..cap); *written = len + 5.
 * SFL_ELIMIT if cap is too small or len does not fit in 32 bits. */
int sfl_grpcframe_encode(const uint8_t *msg, size_t len, uint8_t *buf, size_t cap,
                         size_t *written) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* libFuzzer: the coordinator's /metrics HTTP request parser
 * (coord_metrics_parse, server/metrics.h), as the endpoint drives it: the
 * request arrives in reads of arbitrary size and is classified after each.
 * Byte 0 picks the read size and the request limit, the rest is what the
 * client sends; the bytes are copied to a buffer of exactly their length,
 * so ASan sees any read past it.
 *
 * Beyond "no crash": once a prefix is decided (anything but INCOMPLETE),
 * every longer prefix gets the same answer unless it exceeds the limit
 * (the endpoint stops reading there, but the parser must not flip). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coord_http_req_t first = COORD_HTTP_INCOMPLETE;
    size_t step, max, off = 0;
    char *req;

    if (size < 1)
        return 0;
    step = 1 + (data[0] & 15);
    max = (data[0] & 0x80) ? 64 : 8192;
    data++;
    size--;
    req = malloc(size ? size : 1);
    if (req == NULL)
        abort();
    memcpy(req, data, size);
    do {
        off = off + step > size ? size : off + step;
        char *exact = malloc(off ? off : 1); /* reads past off are caught */

        if (exact == NULL)
            abort();
        memcpy(exact, req, off);
        coord_http_req_t r = coord_metrics_parse(exact, off, max);
        free(exact);
        if ((unsigned)r > COORD_HTTP_TOO_LARGE)
            abort();
        if (r == COORD_HTTP_TOO_LARGE) {
            if (off <= max)
                abort();
            break;
        }
        if (first != COORD_HTTP_INCOMPLETE && r != first)
            abort();
        if (first == COORD_HTTP_INCOMPLETE)
            first = r;
    } while (off < size);
    free(req);
    return 0;
}

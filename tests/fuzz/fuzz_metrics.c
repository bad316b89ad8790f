/* libFuzzer: the metrics listener's HTTP request parser (coord_metrics_parse,
 * server/http/metrics.h) with the coordinator's pages, as the endpoint drives it:
 * the request arrives in reads of arbitrary size and is classified after each.
 * Byte 0 picks the read size and the request limit, the rest is what the
 * client sends; the bytes are copied to a buffer of exactly their length,
 * so ASan sees any read past it.
 *
 * Beyond "no crash": once a prefix is decided (anything but INCOMPLETE),
 * every longer prefix gets the same answer (and page) unless it exceeds the
 * limit (the endpoint stops reading there, but the parser must not flip). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The coordinator's paths (server/coord.c); "/" must not match the others. */
static const coord_http_page_t pages[] = {
    {"/metrics", "text/plain", NULL, NULL},
    {"/", "text/html", NULL, NULL},
    {"/status", "text/html", NULL, NULL},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coord_http_req_t first = COORD_HTTP_INCOMPLETE;
    uint32_t first_page = 0;
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
        uint32_t page = UINT32_MAX;
        coord_http_req_t r = coord_metrics_parse(exact, off, max, pages, 3, &page);
        free(exact);
        if ((r == COORD_HTTP_GET || r == COORD_HTTP_HEAD) && page >= 3)
            abort();
        if ((unsigned)r > COORD_HTTP_TOO_LARGE)
            abort();
        if (r == COORD_HTTP_TOO_LARGE) {
            if (off <= max)
                abort();
            break;
        }
        if (first != COORD_HTTP_INCOMPLETE &&
            (r != first || ((r == COORD_HTTP_GET || r == COORD_HTTP_HEAD) && page != first_page)))
            abort();
        if (first == COORD_HTTP_INCOMPLETE) {
            first = r;
            first_page = page;
        }
    } while (off < size);
    free(req);
    return 0;
}

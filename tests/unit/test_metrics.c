#include "testutil.h"

#include <string.h>

#include "http/metrics.h"

/* The metrics listener's request parser (coord_metrics_parse); the
 * endpoint itself over TCP is tested in test_coordmetrics.c. */

/* The coordinator's table (server/coord.c): only the paths matter here. */
static const coord_http_page_t pages[] = {
    {"/metrics", "text/plain", NULL, NULL},
    {"/", "text/html", NULL, NULL},
    {"/status", "text/html", NULL, NULL},
};
static uint32_t page; /* of the last parse */

static coord_http_req_t parse_n(const char *req, size_t len, size_t max)
{
    page = 99;
    return coord_metrics_parse(req, len, max, pages, 3, &page);
}

static coord_http_req_t parse(const char *req)
{
    return parse_n(req, strlen(req), 8192);
}

static void test_metrics_parse_requests(void **state)
{
    (void)state;
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(parse("GET /metrics?x=1 HTTP/1.0\n\n"), COORD_HTTP_GET);
    assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n"), COORD_HTTP_HEAD);
    assert_int_equal(parse("POST /metrics HTTP/1.1\r\n\r\n"), COORD_HTTP_METHOD);
    assert_int_equal(parse("GET /nope HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metrics HTTP/2.0\r\n\r\n"), COORD_HTTP_BAD);
    assert_int_equal(parse("GET /metrics\r\n\r\n"), COORD_HTTP_BAD);
    assert_int_equal(parse("\r\n\r\n"), COORD_HTTP_BAD);
    /* Not finished: no blank line yet. */
    assert_int_equal(parse(""), COORD_HTTP_INCOMPLETE);
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n"), COORD_HTTP_INCOMPLETE);
}

/* Each page by its path, with or without a query, nothing else: "/" is
 * not a prefix of every path. */
static void test_metrics_parse_pages(void **state)
{
    (void)state;
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(page, 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(page, 1);
    assert_int_equal(parse("GET /?refresh=0 HTTP/1.1\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(page, 1);
    assert_int_equal(parse("HEAD /status HTTP/1.1\r\n\r\n"), COORD_HTTP_HEAD);
    assert_int_equal(page, 2);
    assert_int_equal(parse("GET /status?x HTTP/1.1\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(page, 2);
    assert_int_equal(parse("GET /statusx HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /status/ HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET //etc/passwd HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /index.html HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("POST / HTTP/1.1\r\n\r\n"), COORD_HTTP_METHOD);
    assert_int_equal(parse("PUT /status HTTP/1.1\r\n\r\n"), COORD_HTTP_METHOD);
    assert_int_equal(parse("DELETE / HTTP/1.1\r\n\r\n"), COORD_HTTP_METHOD);
    /* no pages: every target is unknown */
    assert_int_equal(coord_metrics_parse("GET / HTTP/1.1\r\n\r\n", 18, 8192, pages, 0, &page),
                     COORD_HTTP_NOT_FOUND);
}

static void test_metrics_parse_limits(void **state)
{
    (void)state;
    char line[300];
    const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";

    memset(line, 'a', sizeof(line));
    memcpy(line, "GET /", 5);
    memcpy(line + 200, " HTTP/1.1\r\n\r\n", 14);
    assert_int_equal(parse_n(line, 214, 8192), COORD_HTTP_URI_TOO_LONG);
    /* More than the limit, finished or not. */
    assert_int_equal(parse_n(req, sizeof(req) - 1, sizeof(req) - 2),
                     COORD_HTTP_TOO_LARGE);
    assert_int_equal(parse_n(req, sizeof(req) - 1, sizeof(req) - 1), COORD_HTTP_GET);
}

/* The bytes are not a C string: a NUL in the request line is refused, one
 * in a header is skipped, and nothing is read past len. */
static void test_metrics_parse_nul_bytes(void **state)
{
    (void)state;
    static const char nul_line[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
    static const char nul_header[] = "GET /metrics HTTP/1.1\r\nX: \0\r\n\r\n";
    char *exact;

    assert_int_equal(parse_n(nul_line, sizeof(nul_line) - 1, 8192), COORD_HTTP_BAD);
    assert_int_equal(parse_n(nul_header, sizeof(nul_header) - 1, 8192),
                     COORD_HTTP_GET);
    /* Exactly the request's bytes on the heap, no terminator. */
    exact = malloc(25);
    assert_non_null(exact);
    memcpy(exact, "GET /metrics HTTP/1.1\r\n\r\n", 25);
    assert_int_equal(parse_n(exact, 25, 8192), COORD_HTTP_GET);
    assert_int_equal(parse_n(exact, 24, 8192), COORD_HTTP_INCOMPLETE);
    free(exact);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_parse_requests),
        cmocka_unit_test(test_metrics_parse_pages),
        cmocka_unit_test(test_metrics_parse_limits),
        cmocka_unit_test(test_metrics_parse_nul_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include "testutil.h"

#include <string.h>

#include "metrics.h"

/* The /metrics endpoint's request parser (coord_metrics_parse); the
 * endpoint itself over TCP is tested in test_coord.c. */

static coord_http_req_t parse(const char *req)
{
    return coord_metrics_parse(req, strlen(req), 8192);
}

static void test_metrics_parse_requests(void **state)
{
    (void)state;
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), COORD_HTTP_GET);
    assert_int_equal(parse("GET /metrics?x=1 HTTP/1.0\n\n"), COORD_HTTP_GET);
    assert_int_equal(parse("HEAD /metrics HTTP/1.1\r\n\r\n"), COORD_HTTP_HEAD);
    assert_int_equal(parse("POST /metrics HTTP/1.1\r\n\r\n"), COORD_HTTP_METHOD);
    assert_int_equal(parse("GET / HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metricsx HTTP/1.1\r\n\r\n"), COORD_HTTP_NOT_FOUND);
    assert_int_equal(parse("GET /metrics HTTP/2.0\r\n\r\n"), COORD_HTTP_BAD);
    assert_int_equal(parse("GET /metrics\r\n\r\n"), COORD_HTTP_BAD);
    assert_int_equal(parse("\r\n\r\n"), COORD_HTTP_BAD);
    /* Not finished: no blank line yet. */
    assert_int_equal(parse(""), COORD_HTTP_INCOMPLETE);
    assert_int_equal(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n"), COORD_HTTP_INCOMPLETE);
}

static void test_metrics_parse_limits(void **state)
{
    (void)state;
    char line[300];
    const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";

    memset(line, 'a', sizeof(line));
    memcpy(line, "GET /", 5);
    memcpy(line + 200, " HTTP/1.1\r\n\r\n", 14);
    assert_int_equal(coord_metrics_parse(line, 214, 8192), COORD_HTTP_URI_TOO_LONG);
    /* More than the limit, finished or not. */
    assert_int_equal(coord_metrics_parse(req, sizeof(req) - 1, sizeof(req) - 2),
                     COORD_HTTP_TOO_LARGE);
    assert_int_equal(coord_metrics_parse(req, sizeof(req) - 1, sizeof(req) - 1), COORD_HTTP_GET);
}

/* The bytes are not a C string: a NUL in the request line is refused, one
 * in a header is skipped, and nothing is read past len. */
static void test_metrics_parse_nul_bytes(void **state)
{
    (void)state;
    static const char nul_line[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
    static const char nul_header[] = "GET /metrics HTTP/1.1\r\nX: \0\r\n\r\n";
    char *exact;

    assert_int_equal(coord_metrics_parse(nul_line, sizeof(nul_line) - 1, 8192), COORD_HTTP_BAD);
    assert_int_equal(coord_metrics_parse(nul_header, sizeof(nul_header) - 1, 8192),
                     COORD_HTTP_GET);
    /* Exactly the request's bytes on the heap, no terminator. */
    exact = malloc(25);
    assert_non_null(exact);
    memcpy(exact, "GET /metrics HTTP/1.1\r\n\r\n", 25);
    assert_int_equal(coord_metrics_parse(exact, 25, 8192), COORD_HTTP_GET);
    assert_int_equal(coord_metrics_parse(exact, 24, 8192), COORD_HTTP_INCOMPLETE);
    free(exact);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_parse_requests),
        cmocka_unit_test(test_metrics_parse_limits),
        cmocka_unit_test(test_metrics_parse_nul_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

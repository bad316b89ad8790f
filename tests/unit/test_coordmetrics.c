/* server/coordmetrics.c: the /metrics page over HTTP, on the in-process coordinator (coordfx.h). */
#include "coordfx.h"

/* /metrics answers only GET /metrics, within its limits. */
static void test_coord_metrics_http(void **state)
{
    static char big[10000];
    const char *r;

    (void)state;
    fx_start();
    r = fx_http("GET /nope HTTP/1.1\r\n\r\n", 22);
    assert_non_null(strstr(r, "HTTP/1.1 404"));
    r = fx_http("POST /metrics HTTP/1.1\r\n\r\n", 26);
    assert_non_null(strstr(r, "HTTP/1.1 405"));
    r = fx_http("hello\r\n\r\n", 9);
    assert_non_null(strstr(r, "HTTP/1.1 400"));
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    r = fx_http(big, sizeof(big));
    assert_non_null(strstr(r, "HTTP/1.1 431"));
    r = fx_http("HEAD /metrics HTTP/1.0\r\n\r\n", 26);
    assert_non_null(strstr(r, "HTTP/1.1 200"));
    assert_null(strstr(r, "sfl_agents_known"));
    r = fx_http("GET /metrics HTTP/1.0\r\n\r\n", 25);
    assert_non_null(strstr(r, "# TYPE sfl_agents_known gauge\nsfl_agents_known 0\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_metrics_http, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

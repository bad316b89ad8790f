/* server/service/coordmetrics.c and coordstatus.c: the /metrics page and the status
 * page over HTTP, on the in-process coordinator (coordfx.h). */
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
    /* role single serves, with no epoch (server/leader.c) */
    assert_non_null(strstr(r, "# TYPE sfl_leader gauge\nsfl_leader 1\n"));
    assert_non_null(strstr(r, "# TYPE sfl_leader_epoch gauge\nsfl_leader_epoch 0\n"));
}

/* How many times needle occurs in h. */
static size_t count(const char *h, const char *needle)
{
    size_t n = 0;

    for (const char *p = h; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The number of points of the polyline of series label in page r (-1: none). */
static long points_of(const char *r, const char *label)
{
    char key[128];
    const char *p;
    long n = 1;

    snprintf(key, sizeof(key), "data-series=\"%s\" points=\"", label);
    if ((p = strstr(r, key)) == NULL)
        return -1;
    for (p += strlen(key); *p != '"'; p++) {
        assert_true(*p != '\0');
        n += *p == ' ';
    }
    return n;
}

/* The page's body: after the blank line that ends the headers. */
static const char *body_of(const char *r)
{
    const char *b = strstr(r, "\r\n\r\n");

    assert_non_null(b);
    return b + 4;
}

static const char *http(const char *req)
{
    return fx_http(req, strlen(req));
}

/* Two agents through two committed rounds of a job with a hostile name:
 * GET / and /status show the job, its rounds (a plot point per committed
 * round, read again after each commit) and the agents, with every name
 * escaped, under a policy that runs no script; HEAD has no body; other
 * methods and paths get 405 and 404. */
static void test_coord_status_page(void **state)
{
    static const char hostile[] = "<script>alert(\"x\")</script>'&";
    static const double v[3] = {1.0, -2.0, 0.5};
    /* attempt, selected, accepted, then the round metrics of an lsq job:
     * objective (train loss), test_mse, eval_samples (roundmetrics.def) */
    static const char cells[] =
        "<td>0</td><td>2</td><td>2</td><td>2.5</td><td>1.25</td><td>16</td>";
    tagent_t *a1 = &F.ag[0], *a2 = &F.ag[1];
    sfl_task_t *t[2];
    sfl_job_spec_t spec;
    sfl_job_status_t js;
    const char *r, *b;
    int status;

    (void)state;
    fx_start();
    fx_cli_connect(&F.admin, "admin/alice");
    /* before any job or agent */
    r = http("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "\r\nContent-Type: text/html; charset=utf-8\r\n"));
    assert_non_null(strstr(r, "<p>no jobs</p>"));
    assert_non_null(strstr(r, "<p>no agents</p>"));

    fx_job_spec(&spec, 60000, 3); /* never reached: 10x what a loaded machine needs */
    snprintf(spec.name, sizeof(spec.name), "%s", hostile);
    js = fx_create_job(&F.admin, &spec, &status);
    assert_int_equal(status, 0);
    assert_int_equal(js.state, SFL_JOB_RUNNING);
    fx_agent_join(a1, "agent/a1");
    fx_agent_join(a2, "agent/a2");
    fx_agent_subscribe(a1);
    fx_agent_subscribe(a2);
    t[0] = fx_next_task(a1);
    t[1] = fx_next_task(a2);
    for (uint64_t round = 1; round <= 2; round++) {
        char row[160];

        assert_int_equal(t[0]->round, round);
        for (int i = 0; i < 2; i++) {
            size_t len;
            uint8_t *upd = fx_make_update(t[i], F.ag[i].id, NULL, F.ag[i].agent_id, v,
                                          8 + 16 * (uint64_t)i, &len);

            assert_int_equal(fx_submit(&F.ag[i], upd, len).status, SFL_ACK_ACCEPTED);
            sfl_msg_buf_free(upd);
            sfl_msg_task_free(t[i]);
        }
        /* the next round's task: this one is committed */
        t[0] = fx_next_task(a1);
        t[1] = fx_next_task(a2);
        assert_int_equal(t[0]->round, round + 1);
        r = http(round == 1 ? "GET / HTTP/1.1\r\n\r\n" : "GET /status?x=1 HTTP/1.0\r\n\r\n");
        assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
        b = body_of(r);
        /* a point per committed round, in every plot of an lsq job */
        assert_int_equal(points_of(b, "train loss"), (long)round);
        assert_int_equal(points_of(b, "mse"), (long)round);
        assert_int_equal(points_of(b, "epsilon spent"), -1); /* not private */
        /* the newest round first in the table: train loss (8 * 8/8 + 24 *
         * 24/8) / 32 over samples 8 + 24 (coordfx.h's figures, exact in
         * binary); no column for what an lsq job cannot have */
        snprintf(row, sizeof(row), "<tr><td>%llu</td>%s", (unsigned long long)round, cells);
        assert_non_null(strstr(b, row));
        assert_int_equal(count(b, "<table class=\"rounds\">"), 1);
        assert_non_null(strstr(b, "<th>test_mse</th><th>eval_samples</th>"));
        assert_null(strstr(b, "<th>test_accuracy</th>"));
        assert_null(strstr(b, "<th>personal_accuracy</th>"));
        assert_non_null(strstr(b, "<th>samples</th><th>support_churn</th>"));
        assert_int_equal(count(b, cells), (size_t)round);
    }
    sfl_msg_task_free(t[0]);
    sfl_msg_task_free(t[1]);
    /* the policy: nothing runs, nothing loads, not framed */
    assert_non_null(strstr(r, "\r\nContent-Security-Policy: default-src 'none'; "
                              "style-src 'unsafe-inline'; frame-ancestors 'none'\r\n"));
    assert_non_null(strstr(r, "\r\nX-Content-Type-Options: nosniff\r\n"));
    /* the job's name only escaped, in the table and its section */
    assert_null(strstr(b, "<script"));
    assert_null(strstr(b, "alert(\""));
    assert_int_equal(count(b, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39;&amp;"), 2);
    assert_non_null(
        strstr(b, "<td>running</td><td>2/5</td><td>loss 2.5, mse 1.25 (16 held out)</td>"));
    /* both agents, connected, two accepted updates each */
    assert_non_null(strstr(b, "2 connected, 2 known"));
    assert_non_null(strstr(b, "<td>a1</td><td>yes</td>"));
    assert_non_null(strstr(b, "<td>a2</td><td>yes</td>"));
    /* balanced: every table and plot closed */
    assert_int_equal(count(b, "<table"), count(b, "</table>"));
    assert_int_equal(count(b, "<svg"), count(b, "</svg>"));
    assert_int_equal(count(b, "<section"), count(b, "</section>"));
    assert_non_null(strstr(b, "</html>\n"));

    r = http("HEAD / HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(r, "Content-Type: text/html"));
    assert_string_equal(body_of(r), "");
    r = http("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 405 Method Not Allowed\r\n"));
    assert_non_null(strstr(r, "\r\nAllow: GET, HEAD\r\n"));
    r = http("GET /status/x HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 404 Not Found\r\n"));
    assert_non_null(strstr(r, "pages: /metrics / /status\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_coord_metrics_http, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_coord_status_page, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, fx_group_setup, fx_group_teardown);
}

/* server/http/statuspage.c: the status page's HTML escaping and SVG plots (the
 * page over HTTP is in test_coordmetrics.c, in Chromium in
 * tests/e2e/progress.sh). */
#include "testutil.h"

#include "http/statuspage.h"

static coord_text_t T;

static int setup(void **state)
{
    (void)state;
    coord_text_init(&T);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    coord_text_close(&T);
    return 0;
}

static const char *esc(const char *s)
{
    coord_text_close(&T);
    coord_text_init(&T);
    coord_html_text(&T, s);
    assert_int_equal(T.err, 0);
    return T.len ? T.buf : "";
}

/* How many times needle occurs in h. */
static size_t count(const char *h, const char *needle)
{
    size_t n = 0;

    for (const char *p = h; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The points of the k-th <polyline> of T (0-based): how many, and the
 * first and last x into *x0, *x1. -1 if there is no such polyline. */
static long polyline_points(size_t k, double *x0, double *x1)
{
    const char *p = T.buf;
    long n = 0;

    for (size_t i = 0; i <= k; i++)
        if (p == NULL || (p = strstr(p + (i ? 1 : 0), "<polyline")) == NULL)
            return -1;
    p = strstr(p, "points=\"");
    assert_non_null(p);
    p += 8;
    while (*p != '"') {
        double x, y;
        int used = 0;

        assert_int_equal(sscanf(p, "%lf,%lf%n", &x, &y, &used), 2);
        assert_true(isfinite(x) && isfinite(y));
        /* inside the plot frame (viewBox 560 x 230, the frame below the
         * title and legend) */
        assert_true(x >= 64 && x <= 548 && y >= 40 && y <= 200);
        if (n == 0)
            *x0 = x;
        *x1 = x;
        n++;
        p += used;
        if (*p == ' ')
            p++;
    }
    return n;
}

/* Every character that could end a text or an attribute or start markup
 * is a reference; bytes outside printable ASCII become '?'. */
static void test_statuspage_escape(void **state)
{
    (void)state;
    assert_string_equal(esc("plain job-1_a.b"), "plain job-1_a.b");
    assert_string_equal(esc("<script>alert(\"x\")</script>"),
                        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    assert_string_equal(esc("a'b&c"), "a&#39;b&amp;c");
    assert_string_equal(esc("\" onmouseover='x' a=\""),
                        "&quot; onmouseover=&#39;x&#39; a=&quot;");
    assert_string_equal(esc("&amp;"), "&amp;amp;");
    assert_string_equal(esc("tab\there\nnl\x7f\xc3\xa9\xff"), "tab?here?nl????");
    assert_string_equal(esc(""), "");
    assert_string_equal(esc(NULL), "");
    /* nothing that opens a tag or closes an attribute is left */
    esc("</td><img src=x onerror=alert(1)>'\"`");
    assert_null(strchr(T.buf, '<'));
    assert_null(strchr(T.buf, '>'));
    assert_null(strchr(T.buf, '"'));
    assert_null(strchr(T.buf, '\''));
}

/* Downsampling keeps the first and the last point and at most max, evenly
 * spread and strictly ascending; a short series keeps every point. */
static void test_statuspage_pick(void **state)
{
    static size_t idx[COORD_PLOT_POINTS];
    static const size_t ns[] = {0, 1, 2, 3, 239, 240, 241, 480, 1000, 100000};

    (void)state;
    for (size_t c = 0; c < sizeof(ns) / sizeof(ns[0]); c++) {
        size_t n = ns[c], m = coord_plot_pick(n, COORD_PLOT_POINTS, idx);

        assert_int_equal(m, n < COORD_PLOT_POINTS ? n : COORD_PLOT_POINTS);
        if (m == 0)
            continue;
        assert_int_equal(idx[0], 0);
        assert_int_equal(idx[m - 1], n - 1);
        for (size_t k = 1; k < m; k++) {
            assert_true(idx[k] > idx[k - 1]);
            /* evenly: no gap more than one wider than the step */
            assert_true(idx[k] - idx[k - 1] <= (n - 1) / (m - 1) + 1);
        }
    }
    /* max below 2 still draws the ends */
    assert_int_equal(coord_plot_pick(10, 1, idx), 2);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 9);
}

/* A polyline has a point per round that reported the value, within the
 * frame, left to right; a series with none gets no polyline. */
static void test_statuspage_plot_points(void **state)
{
    double x[6] = {1, 2, 3, 4, 5, 6}, loss[6] = {0.69, 0.5, 0.4, 0.35, 0.3, 0.28};
    double acc[6] = {NAN, 0.6, INFINITY, 0.8, 0.85, 0.9}, none[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    coord_plot_series_t s[3] = {{"loss", "#1f77b4", loss}, {"accuracy", "#2ca02c", acc},
                                {"<b>never</b>", "#ff7f0e", none}};
    double x0, x1;

    (void)state;
    coord_html_plot(&T, "Loss & \"accuracy\"", x, 6, s, 3);
    assert_int_equal(T.err, 0);
    assert_int_equal(count(T.buf, "<svg"), 1);
    assert_int_equal(count(T.buf, "</svg>"), 1);
    assert_int_equal(count(T.buf, "<polyline"), 2);
    assert_int_equal(polyline_points(0, &x0, &x1), 6);
    assert_true(x0 < x1);
    assert_int_equal(polyline_points(1, &x0, &x1), 4); /* NaN and inf left out */
    assert_int_equal(polyline_points(2, &x0, &x1), -1);
    assert_non_null(strstr(T.buf, "data-series=\"loss\""));
    assert_non_null(strstr(T.buf, "Loss &amp; &quot;accuracy&quot;"));
    assert_non_null(strstr(T.buf, "&lt;b&gt;never&lt;/b&gt; (none)"));
    assert_null(strstr(T.buf, "<b>"));
    assert_non_null(strstr(T.buf, ">round 1<"));
    assert_non_null(strstr(T.buf, ">round 6<"));
}

/* 10,000 rounds draw COORD_PLOT_POINTS points from the first round to the
 * last; one round and a flat series still draw inside the frame. */
static void test_statuspage_plot_downsampled(void **state)
{
    enum { N = 10000 };
    double *x = malloc(N * sizeof(double)), *y = malloc(N * sizeof(double)), x0, x1;
    coord_plot_series_t s = {"eps", "#d62728", y};

    (void)state;
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < N; i++) {
        x[i] = i + 1;
        y[i] = 0.001 * i;
    }
    coord_html_plot(&T, "many", x, N, &s, 1);
    assert_int_equal(polyline_points(0, &x0, &x1), COORD_PLOT_POINTS);
    assert_non_null(strstr(T.buf, ">round 10000<"));
    assert_true(T.len < 16384); /* bounded whatever the history's length */
    coord_text_close(&T);
    coord_text_init(&T);
    coord_html_plot(&T, "one", x, 1, &s, 1);
    assert_int_equal(polyline_points(0, &x0, &x1), 1);
    coord_text_close(&T);
    coord_text_init(&T);
    for (int i = 0; i < 5; i++)
        y[i] = 0.5;
    coord_html_plot(&T, "flat", x, 5, &s, 1);
    assert_int_equal(polyline_points(0, &x0, &x1), 5);
    coord_text_close(&T);
    coord_text_init(&T);
    coord_html_plot(&T, "empty", x, 0, &s, 1);
    assert_int_equal(count(T.buf, "<polyline"), 0);
    assert_non_null(strstr(T.buf, "no committed round yet"));
    free(x);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_statuspage_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statuspage_pick, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statuspage_plot_points, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statuspage_plot_downsampled, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* HTML escaping and inline SVG plots for the status page (statuspage.h). */
#include "http/statuspage.h"

#include <math.h>
#include <string.h>

void coord_html_text(coord_text_t *t, const char *s)
{
    const char *run;

    if (s == NULL)
        return;
    /* Runs of plain bytes are appended whole, the rest one by one. */
    for (run = s; *s; s++) {
        const char *rep;
        unsigned char c = (unsigned char)*s;

        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&#39;"; break;
        default: rep = c < 0x20 || c > 0x7e ? "?" : NULL; break;
        }
        if (rep == NULL)
            continue;
        coord_text_add(t, run, (size_t)(s - run));
        coord_text_add(t, rep, strlen(rep));
        run = s + 1;
    }
    coord_text_add(t, run, (size_t)(s - run));
}

size_t coord_plot_pick(size_t n, size_t max, size_t *idx)
{
    if (max < 2)
        max = 2;
    if (n <= max) {
        for (size_t i = 0; i < n; i++)
            idx[i] = i;
        return n;
    }
    /* idx[k] = round(k (n-1) / (max-1)): strictly ascending since the step
     * (n-1)/(max-1) exceeds 1, idx[0] = 0 and idx[max-1] = n-1. */
    for (size_t k = 0; k < max; k++)
        idx[k] = (size_t)(((unsigned long long)k * (n - 1) + (max - 1) / 2) / (max - 1));
    return max;
}

/* Plot geometry in SVG user units (the viewBox). */
/* The title on the first line, the legend on the second, then the frame. */
enum { W = 560, H = 230, LEFT = 64, RIGHT = 12, TOP = 40, BOTTOM = 30 };

static double px(double x, double x0, double x1)
{
    return x1 > x0 ? LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT) : LEFT;
}

static double py(double y, double y0, double y1)
{
    return H - BOTTOM - (y - y0) / (y1 - y0) * (H - TOP - BOTTOM);
}

void coord_html_plot(coord_text_t *t, const char *title, const double *x, size_t n,
                     const coord_plot_series_t *series, size_t ns)
{
    size_t idx[COORD_PLOT_POINTS], m = coord_plot_pick(n, COORD_PLOT_POINTS, idx);
    double y0 = INFINITY, y1 = -INFINITY;
    double lx = LEFT;

    for (size_t s = 0; s < ns; s++)
        for (size_t k = 0; k < m; k++) {
            double v = series[s].y[idx[k]];

            if (isfinite(v)) {
                y0 = v < y0 ? v : y0;
                y1 = v > y1 ? v : y1;
            }
        }
    if (y0 > y1) { /* nothing to draw */
        y0 = 0;
        y1 = 1;
    } else if (y0 == y1) { /* a flat line sits in the middle */
        double d = y0 != 0 ? fabs(y0) * 0.05 : 0.5;

        y0 -= d;
        y1 += d;
    }
    coord_text_printf(t,
                      "<svg class=\"plot\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
                      "role=\"img\" xmlns=\"http://www.w3.org/2000/svg\"><title>",
                      W, H, W, H);
    coord_html_text(t, title);
    coord_text_printf(t,
                      "</title><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                      "fill=\"#fafafa\" stroke=\"#999\"/>"
                      "<text x=\"%d\" y=\"13\" class=\"pt\">",
                      LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM, LEFT);
    coord_html_text(t, title);
    coord_text_printf(t, "</text>");
    for (int g = 1; g < 4; g++) /* horizontal grid at quarters */
        coord_text_printf(t,
                          "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>",
                          LEFT, W - RIGHT, TOP + g * (H - TOP - BOTTOM) / 4.0,
                          TOP + g * (H - TOP - BOTTOM) / 4.0);
    if (m == 0) {
        coord_text_printf(t,
                          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no committed round "
                          "yet</text></svg>",
                          (W + LEFT) / 2, H / 2);
        return;
    }
    coord_text_printf(t,
                      "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>"
                      "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>"
                      "<text x=\"%d\" y=\"%d\">round %.0f</text>"
                      "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">round %.0f</text>",
                      LEFT - 4, TOP + 10, y1, LEFT - 4, H - BOTTOM, y0, LEFT, H - 10, x[idx[0]],
                      W - RIGHT, H - 10, x[idx[m - 1]]);
    for (size_t s = 0; s < ns; s++) {
        int any = 0;

        for (size_t k = 0; k < m; k++) {
            double v = series[s].y[idx[k]];

            if (!isfinite(v))
                continue;
            if (!any) {
                coord_text_printf(t,
                                  "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" "
                                  "stroke-width=\"2\" data-series=\"",
                                  series[s].color);
                coord_html_text(t, series[s].label);
                coord_text_printf(t, "\" points=\"");
            }
            coord_text_printf(t, "%s%.1f,%.1f", any ? " " : "",
                              px(x[idx[k]], x[idx[0]], x[idx[m - 1]]), py(v, y0, y1));
            any = 1;
        }
        if (any)
            coord_text_printf(t, "\"/>");
        /* the legend: a swatch and the label, left to right under the title */
        coord_text_printf(t,
                          "<rect x=\"%.0f\" y=\"20\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                          "<text x=\"%.0f\" y=\"29\">",
                          lx, series[s].color, lx + 14);
        coord_html_text(t, series[s].label);
        coord_text_printf(t, "%s</text>", any ? "" : " (none)");
        lx += 24 + 7.5 * (double)(series[s].label ? strlen(series[s].label) : 0) +
              (any ? 0 : 50);
    }
    coord_text_printf(t, "</svg>");
}

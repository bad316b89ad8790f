/* Building blocks of the coordinator's status page (GET / on the metrics
 * listener, coordstatus.c): HTML escaping and inline SVG line plots. Pure
 * functions over a coord_text_t, so tests/unit/test_statuspage.c checks
 * them without a coordinator. The page loads nothing from elsewhere: no
 * script, no stylesheet, no font, no image but these SVGs. */
#ifndef COORD_STATUSPAGE_H
#define COORD_STATUSPAGE_H

#include <stddef.h>

#include "http/metrics.h"

/* At most this many points in one plot's polylines: a longer history is
 * downsampled (coord_plot_pick). */
#define COORD_PLOT_POINTS 240

/* Appends s (borrowed, NUL-terminated; NULL appends nothing) with & < > " '
 * as character references and every byte outside printable ASCII as '?':
 * safe in element text and in a double- or single-quoted attribute, and
 * valid UTF-8 whatever s holds. */
void coord_html_text(coord_text_t *t, const char *s);

/* Chooses at most max (>= 2) of n points spread evenly, the first and the
 * last always in: their indices, ascending, into idx (room for
 * min(n, max)); returns how many. n <= max picks every point. */
size_t coord_plot_pick(size_t n, size_t max, size_t *idx);

/* One line of a plot: y[0..n) over the plot's x (a non-finite y is no
 * point: rounds that did not report the value). */
typedef struct coord_plot_series {
    const char *label; /* legend text (escaped) */
    const char *color; /* CSS colour, a constant of the caller (not escaped) */
    const double *y;   /* borrowed */
} coord_plot_series_t;

/* Appends an <svg> line plot titled title (escaped) of x[0..n) (rounds,
 * ascending) against each of series[0..ns): one <polyline
 * class="series"> per series with a finite point, over the same
 * coord_plot_pick choice of at most COORD_PLOT_POINTS of the n points;
 * axes labelled with the first and last x and the y range. n == 0 draws
 * the frame with "no committed round yet". */
void coord_html_plot(coord_text_t *t, const char *title, const double *x, size_t n,
                     const coord_plot_series_t *series, size_t ns);

#endif

/* The /metrics page (coordmetrics.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_HTTP_COORDMETRICS_H
#define COORD_HTTP_COORDMETRICS_H

#include "coord_int.h"

int coord_render_metrics(coord_text_t *t, void *ud);

#endif

/* The status page (coordstatus.c).
 * On the loop thread unless said otherwise. */
#ifndef COORD_HTTP_COORDSTATUS_H
#define COORD_HTTP_COORDSTATUS_H

#include "coord_int.h"

/* coordstatus.c: the status page at / and /status (metrics.h's render
 * callback; ud is the coordinator), and what it keeps between requests. */
int coord_render_status(coord_text_t *t, void *ud);
void coord_status_free(coord_status_t *s);

#endif

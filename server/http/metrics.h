/* Prometheus metrics for the coordinator: a text buffer for the exposition
 * format, fixed-bucket histograms, and a minimal HTTP/1.1 endpoint that
 * answers GET (and HEAD) for a fixed table of pages over plain TCP: the
 * coordinator's /metrics, and its status page at / and /status.
 *
 * The endpoint has no authentication and no TLS: bind it to loopback (the
 * default) or a private interface. It reads one request of at most
 * max_request bytes within timeout_ms, answers it and closes the
 * connection (Connection: close), so a client can hold at most one small
 * buffer and one timer for a bounded time; at most max_clients are served
 * at once, others are closed at accept. Everything runs on the loop thread. */
#ifndef COORD_METRICS_H
#define COORD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sfl/core/error.h"

/* A growing text buffer. Errors are sticky: after a failed allocation every
 * append is a no-op and err is SFL_ENOMEM, so renderers check once. */
typedef struct coord_text {
    char *buf; /* NUL-terminated when len > 0; owned */
    size_t len, cap;
    int err;
} coord_text_t;

void coord_text_init(coord_text_t *t);
void coord_text_close(coord_text_t *t);
void coord_text_printf(coord_text_t *t, const char *fmt, ...) SFL_PRINTF(2, 3);
/* Appends s[0..n) (borrowed, any bytes; the buffer stays NUL-terminated). */
void coord_text_add(coord_text_t *t, const char *s, size_t n);
/* "# HELP name help" and "# TYPE name type" lines of one metric family. */
void coord_text_family(coord_text_t *t, const char *name, const char *type, const char *help);

#define COORD_HIST_MAX 16

/* A Prometheus histogram with fixed upper bounds (seconds, ascending). */
typedef struct coord_hist {
    uint32_t n;                      /* bounds in use, <= COORD_HIST_MAX */
    double le[COORD_HIST_MAX];       /* upper bounds */
    uint64_t bucket[COORD_HIST_MAX]; /* observations <= le[i] (not cumulative) */
    uint64_t count;                  /* all observations, +Inf bucket */
    double sum;
} coord_hist_t;

/* Bounds le[0..n) must ascend; n is capped at COORD_HIST_MAX. */
void coord_hist_init(coord_hist_t *h, const double *le, uint32_t n);
void coord_hist_observe(coord_hist_t *h, double v);
/* The family: _bucket{le=...} (cumulative), _sum and _count lines. */
void coord_hist_render(coord_text_t *t, const char *name, const char *help,
                       const coord_hist_t *h);

/* Fills out with a page's body; returns 0 or a negative error (answered
 * with HTTP 500). */
typedef int (*coord_metrics_render_cb)(coord_text_t *out, void *ud);

/* One page the endpoint serves: GET path or path?query. */
typedef struct coord_http_page {
    const char *path;         /* "/metrics"; "/" matches only "/" and "/?..." */
    const char *content_type; /* of the 200 answer */
    const char *headers;      /* more header lines, each ending in CRLF; may be NULL */
    coord_metrics_render_cb render;
} coord_http_page_t;

/* What the bytes of a request read so far ask for (the endpoint's parser,
 * a pure function so it can be fuzzed: tests/fuzz/fuzz_metrics.c). Only the
 * request line matters (METHOD SP TARGET SP HTTP/1.x); headers are skipped. */
typedef enum {
    COORD_HTTP_INCOMPLETE = 0, /* no blank line yet: read more */
    COORD_HTTP_GET,            /* GET of a page[?...]: 200 with its body */
    COORD_HTTP_HEAD,           /* HEAD of a page[?...]: 200, no body */
    COORD_HTTP_BAD,            /* 400: empty or malformed request line */
    COORD_HTTP_URI_TOO_LONG,   /* 414: request line of 128 bytes or more */
    COORD_HTTP_METHOD,         /* 405: another method */
    COORD_HTTP_NOT_FOUND,      /* 404: no page has that path */
    COORD_HTTP_TOO_LARGE       /* 431: more than max_request bytes */
} coord_http_req_t;

/* Classifies req[0..len) (borrowed, not NUL-terminated, any bytes) against
 * pages[0..npages) (borrowed); for GET and HEAD *page is the page's index. */
coord_http_req_t coord_metrics_parse(const char *req, size_t len, size_t max_request,
                                     const coord_http_page_t *pages, uint32_t npages,
                                     uint32_t *page);

typedef struct coord_metrics_srv coord_metrics_srv_t;

typedef struct coord_metrics_opts {
    size_t max_request;   /* request line and headers, bytes [8192] */
    uint64_t timeout_ms;  /* per connection, from accept to close [5000] */
    uint32_t max_clients; /* served at once [16] */
} coord_metrics_opts_t;

/* Listens on addr (opts may be NULL) and serves pages[0..npages), each
 * rendered with ud. pages and ud are borrowed until coord_metrics_srv_close.
 * Returns owned, or -errno from bind/listen, SFL_ENOMEM. */
int coord_metrics_srv_new(uv_loop_t *loop, const struct sockaddr *addr,
                          const coord_metrics_opts_t *opts, const coord_http_page_t *pages,
                          uint32_t npages, void *ud, coord_metrics_srv_t **out) SFL_MUST_CHECK;
/* The bound port (useful after binding port 0), or -errno. */
int coord_metrics_srv_port(const coord_metrics_srv_t *m);
/* Stops listening and drops every client; once all handles have closed,
 * frees m and calls closed(ud) (may be NULL). m is invalid on return.
 * NULL: closed is not called. */
void coord_metrics_srv_close(coord_metrics_srv_t *m, void (*closed)(void *ud), void *ud);

#endif

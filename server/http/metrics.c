#include "http/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* ---- text ------------------------------------------------------------- */

void coord_text_init(coord_text_t *t)
{
    memset(t, 0, sizeof(*t));
}

void coord_text_close(coord_text_t *t)
{
    sfl__free(t->buf);
    memset(t, 0, sizeof(*t));
}

void coord_text_printf(coord_text_t *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->err)
        return;
    va_start(ap, fmt);
    n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->err = SFL_EINVAL;
        return;
    }
    if (t->buf == NULL || (size_t)n >= t->cap - t->len) {
        size_t cap = t->cap ? t->cap : 1024;
        char *nb;

        while (cap - t->len <= (size_t)n)
            cap *= 2;
        nb = sfl__reallocarray(t->buf, cap, 1);
        if (nb == NULL) {
            t->err = SFL_ENOMEM;
            return;
        }
        t->buf = nb;
        t->cap = cap;
        va_start(ap, fmt);
        n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->err = SFL_EINVAL;
            return;
        }
    }
    t->len += (size_t)n;
}

void coord_text_add(coord_text_t *t, const char *s, size_t n)
{
    if (t->err)
        return;
    if (t->buf == NULL || n >= t->cap - t->len) {
        size_t cap = t->cap ? t->cap : 1024;
        char *nb;

        while (cap - t->len <= n) {
            if (cap > SIZE_MAX / 2) {
                t->err = SFL_ENOMEM;
                return;
            }
            cap *= 2;
        }
        if ((nb = sfl__reallocarray(t->buf, cap, 1)) == NULL) {
            t->err = SFL_ENOMEM;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

void coord_text_family(coord_text_t *t, const char *name, const char *type, const char *help)
{
    coord_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- histograms --------------------------------------------------------- */

void coord_hist_init(coord_hist_t *h, const double *le, uint32_t n)
{
    memset(h, 0, sizeof(*h));
    h->n = n > COORD_HIST_MAX ? COORD_HIST_MAX : n;
    memcpy(h->le, le, h->n * sizeof(*le));
}

void coord_hist_observe(coord_hist_t *h, double v)
{
    for (uint32_t i = 0; i < h->n; i++)
        if (v <= h->le[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

void coord_hist_render(coord_text_t *t, const char *name, const char *help,
                       const coord_hist_t *h)
{
    uint64_t cum = 0;

    coord_text_family(t, name, "histogram", help);
    for (uint32_t i = 0; i < h->n; i++) {
        cum += h->bucket[i];
        coord_text_printf(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[i],
                          (unsigned long long)cum);
    }
    coord_text_printf(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                      (unsigned long long)h->count, name, h->sum, name,
                      (unsigned long long)h->count);
}

/* ---- HTTP endpoint -------------------------------------------------------- */

typedef struct client client_t;

struct coord_metrics_srv {
    uv_loop_t *loop;
    uv_tcp_t tcp;
    coord_metrics_opts_t opts;
    const coord_http_page_t *pages;
    uint32_t npages;
    void *ud;
    client_t *clients;
    uint32_t nclients;
    /* handles still to close before m can be freed (closing phase) */
    int closing, open_handles;
    void (*closed)(void *ud);
    void *closed_ud;
};

struct client {
    coord_metrics_srv_t *m;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    char *req;    /* max_request bytes */
    size_t len;
    char *resp;   /* owned while the write is in flight */
    int handles;  /* of tcp and timer, still open */
    int answered; /* a response is queued: ignore further input */
    client_t *prev, *next;
};

static void maybe_finish(coord_metrics_srv_t *m)
{
    if (m->closing && m->open_handles == 0) {
        void (*cb)(void *) = m->closed;
        void *ud = m->closed_ud;

        sfl__free(m);
        if (cb)
            cb(ud);
    }
}

static void client_handle_closed(uv_handle_t *h)
{
    client_t *c = h->data;
    coord_metrics_srv_t *m = c->m;

    if (--c->handles > 0)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        m->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    m->nclients--;
    sfl__free(c->req);
    sfl__free(c->resp);
    sfl__free(c);
    m->open_handles--;
    maybe_finish(m);
}

static void client_close(client_t *c)
{
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    uv_close((uv_handle_t *)&c->tcp, client_handle_closed);
    uv_close((uv_handle_t *)&c->timer, client_handle_closed);
}

static void on_written(uv_write_t *wr, int status)
{
    (void)status;
    client_close(wr->data);
}

/* Queues the whole response and closes after it is written; ctype NULL:
 * plain text. */
static void respond(client_t *c, int code, const char *reason, const char *ctype,
                    const char *extra, const char *body, size_t blen, int head_only)
{
    coord_text_t t;
    uv_buf_t b;

    c->answered = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    coord_text_init(&t);
    coord_text_printf(&t,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n%s\r\n",
                      code, reason, ctype ? ctype : "text/plain; charset=utf-8", blen,
                      extra ? extra : "");
    if (!head_only && blen > 0 && t.err == 0) {
        /* Body through "%.*s" would stop at a NUL; append raw bytes. */
        size_t need = t.len + blen + 1;

        if (need > t.cap) {
            char *nb = sfl__reallocarray(t.buf, need, 1);

            if (nb == NULL)
                t.err = SFL_ENOMEM;
            else {
                t.buf = nb;
                t.cap = need;
            }
        }
        if (t.err == 0) {
            memcpy(t.buf + t.len, body, blen);
            t.len += blen;
            t.buf[t.len] = '\0';
        }
    }
    if (t.err) {
        coord_text_close(&t);
        client_close(c);
        return;
    }
    c->resp = t.buf;
    c->wr.data = c;
    b = uv_buf_init(c->resp, (unsigned)t.len);
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        client_close(c);
}

static void respond_text(client_t *c, int code, const char *reason, const char *extra,
                         const char *msg)
{
    respond(c, code, reason, NULL, extra, msg, strlen(msg), 0);
}

/* Whether needle[0..n) occurs in h[0..len). */
static int contains(const char *h, size_t len, const char *needle, size_t n)
{
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(h + i, needle, n) == 0)
            return 1;
    return 0;
}

coord_http_req_t coord_metrics_parse(const char *req, size_t len, size_t max_request,
                                     const coord_http_page_t *pages, uint32_t npages,
                                     uint32_t *page)
{
    char method[8], target[64], version[16];
    char line[128];
    size_t n = 0;

    if (len > max_request)
        return COORD_HTTP_TOO_LARGE;
    if (!contains(req, len, "\r\n\r\n", 4) && !contains(req, len, "\n\n", 2))
        return COORD_HTTP_INCOMPLETE;
    while (n < len && req[n] != '\r' && req[n] != '\n')
        n++;
    if (n == 0)
        return COORD_HTTP_BAD;
    if (n >= sizeof(line))
        return COORD_HTTP_URI_TOO_LONG;
    /* A NUL would end the line early for sscanf: refuse it instead. */
    if (memchr(req, '\0', n) != NULL)
        return COORD_HTTP_BAD;
    memcpy(line, req, n);
    line[n] = '\0';
    if (sscanf(line, "%7s %63s %15s", method, target, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0)
        return COORD_HTTP_BAD;
    if (strcmp(method, "HEAD") != 0 && strcmp(method, "GET") != 0)
        return COORD_HTTP_METHOD;
    for (uint32_t i = 0; i < npages; i++) {
        size_t pl = strlen(pages[i].path);

        if (strncmp(target, pages[i].path, pl) == 0 &&
            (target[pl] == '\0' || target[pl] == '?')) {
            *page = i;
            return strcmp(method, "HEAD") == 0 ? COORD_HTTP_HEAD : COORD_HTTP_GET;
        }
    }
    return COORD_HTTP_NOT_FOUND;
}

static void handle(client_t *c, coord_http_req_t r, uint32_t page)
{
    const coord_http_page_t *p;
    coord_text_t t;
    int rc;

    switch (r) {
    case COORD_HTTP_INCOMPLETE:
        return;
    case COORD_HTTP_TOO_LARGE:
        respond_text(c, 431, "Request Header Fields Too Large", NULL, "request too large\n");
        return;
    case COORD_HTTP_URI_TOO_LONG:
        respond_text(c, 414, "URI Too Long", NULL, "request line too long\n");
        return;
    case COORD_HTTP_BAD:
        respond_text(c, 400, "Bad Request", NULL, "bad request\n");
        return;
    case COORD_HTTP_METHOD:
        respond_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
                     "read-only: only GET and HEAD\n");
        return;
    case COORD_HTTP_NOT_FOUND: {
        coord_text_t l;

        coord_text_init(&l);
        coord_text_printf(&l, "not found; pages:");
        for (uint32_t i = 0; i < c->m->npages; i++)
            coord_text_printf(&l, " %s", c->m->pages[i].path);
        coord_text_printf(&l, "\n");
        respond_text(c, 404, "Not Found", NULL, l.err ? "not found\n" : l.buf);
        coord_text_close(&l);
        return;
    }
    case COORD_HTTP_GET:
    case COORD_HTTP_HEAD:
        break;
    }
    p = &c->m->pages[page];
    coord_text_init(&t);
    rc = p->render(&t, c->m->ud);
    if (rc == 0 && t.err == 0)
        respond(c, 200, "OK", p->content_type, p->headers, t.buf ? t.buf : "", t.len,
                r == COORD_HTTP_HEAD);
    else
        respond_text(c, 500, "Internal Server Error", NULL, "cannot render the page\n");
    coord_text_close(&t);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    client_t *c = h->data;
    size_t room = c->m->opts.max_request - c->len;

    (void)suggested;
    /* One byte more than the limit can hold, so an oversized request is
     * detected instead of silently truncated. */
    *b = uv_buf_init(c->req + c->len, (unsigned)(room + 1));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    client_t *c = s->data;
    coord_http_req_t r;
    uint32_t page = 0;

    (void)b;
    if (nread < 0) {
        client_close(c);
        return;
    }
    if (c->answered)
        return;
    c->len += (size_t)nread;
    r = coord_metrics_parse(c->req, c->len, c->m->opts.max_request, c->m->pages, c->m->npages,
                            &page);
    handle(c, r, page);
}

static void on_timeout(uv_timer_t *t)
{
    client_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    coord_metrics_srv_t *m = server->data;
    client_t *c;

    if (status < 0 || m->closing)
        return;
    c = sfl__calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->req = sfl__malloc(m->opts.max_request + 1);
    if (c->req == NULL || uv_tcp_init(m->loop, &c->tcp) != 0) {
        sfl__free(c->req);
        sfl__free(c);
        return;
    }
    c->m = m;
    c->tcp.data = c;
    c->timer.data = c;
    uv_timer_init(m->loop, &c->timer);
    c->handles = 2;
    m->open_handles++;
    c->next = m->clients;
    if (m->clients)
        m->clients->prev = c;
    m->clients = c;
    m->nclients++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || m->nclients > m->opts.max_clients) {
        client_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, m->opts.timeout_ms, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
        client_close(c);
}

int coord_metrics_srv_new(uv_loop_t *loop, const struct sockaddr *addr,
                          const coord_metrics_opts_t *opts, const coord_http_page_t *pages,
                          uint32_t npages, void *ud, coord_metrics_srv_t **out)
{
    coord_metrics_srv_t *m;
    int rc;

    *out = NULL;
    m = sfl__calloc(1, sizeof(*m));
    if (m == NULL)
        return SFL_ENOMEM;
    m->loop = loop;
    m->pages = pages;
    m->npages = npages;
    m->ud = ud;
    if (opts)
        m->opts = *opts;
    if (m->opts.max_request == 0)
        m->opts.max_request = 8192;
    if (m->opts.timeout_ms == 0)
        m->opts.timeout_ms = 5000;
    if (m->opts.max_clients == 0)
        m->opts.max_clients = 16;
    if ((rc = uv_tcp_init(loop, &m->tcp)) != 0) {
        sfl__free(m);
        return sfl__fail(rc, "metrics: %s", uv_strerror(rc));
    }
    m->tcp.data = m;
    m->open_handles = 1;
    if ((rc = uv_tcp_bind(&m->tcp, addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&m->tcp, 16, on_connection)) != 0) {
        int err = sfl__fail(rc, "metrics: cannot listen: %s", uv_strerror(rc));

        coord_metrics_srv_close(m, NULL, NULL);
        return err;
    }
    *out = m;
    return 0;
}

int coord_metrics_srv_port(const coord_metrics_srv_t *m)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss), rc;

    rc = uv_tcp_getsockname(&m->tcp, (struct sockaddr *)&ss, &len);
    if (rc != 0)
        return rc;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void listener_closed(uv_handle_t *h)
{
    coord_metrics_srv_t *m = h->data;

    m->open_handles--;
    maybe_finish(m);
}

void coord_metrics_srv_close(coord_metrics_srv_t *m, void (*closed)(void *ud), void *ud)
{
    if (m == NULL)
        return;
    m->closing = 1;
    m->closed = closed;
    m->closed_ud = ud;
    uv_close((uv_handle_t *)&m->tcp, listener_closed);
    for (client_t *c = m->clients; c != NULL; c = c->next)
        client_close(c);
}

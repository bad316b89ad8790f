#include "sfl/net/grpcconn.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* One client connection and its session. The channel owns a timer that
 * serves for the session's deadlines and for writes queued outside feed
 * (a wake): a zero timeout makes the loop's next poll non-blocking, so the
 * write happens in the next iteration, never inside the call that queued
 * it. Freeing waits for that timer's close callback, which is also where
 * on_close runs: by then no transport or session callback is on the stack
 * (STYLE rule 6). */

/* gRPC deadlines are checked at least this often. */
#define TICK_MAX_MS 1000u

struct sfl_grpcconn {
    sfl_conn_t *conn;          /* NULL once the transport closed */
    int server;                /* made by sfl_grpcconn_accept */
    uint64_t *sent;            /* adds the bytes written (NULL: not counted) */
    sfl_grpc_session_t *sess;
    uv_timer_t timer;
    sfl_grpcconn_cbs_t cbs;
    void *ud;
    int opened;                /* on_connect(c, 0) seen */
    int closing;               /* sfl_grpcconn_close called */
    int shut;                  /* the transport was told to close: write nothing more */
    int pumping, again;        /* inside feed or the write loop; a wake came meanwhile */
    int status;                /* the first error */
    char detail[256];
};

static void on_timer(uv_timer_t *t);

/* Keeps the first failure: later ones are usually its consequences. */
static void note(sfl_grpcconn_t *g, int status, const char *what, const char *why)
{
    if (g->status == 0)
        g->status = status;
    if (g->detail[0] == '\0')
        snprintf(g->detail, sizeof(g->detail), "%s%s", what, why);
}

/* Ticks the session and writes its output; only from loop callbacks that
 * are not the session's. */
static void pump(sfl_grpcconn_t *g)
{
    uint64_t next = UINT64_MAX;
    int rc = 0, wrc = 0;

    if (g->conn == NULL || g->shut || !g->opened)
        return;
    g->pumping = 1;
    do {
        g->again = 0;
        (void)sfl_grpc_session_tick(g->sess, &next);
        while (!sfl_conn_congested(g->conn)) {
            const uint8_t *p;
            size_t n;

            if ((rc = sfl_grpc_session_pending(g->sess, &p, &n)) < 0 || n == 0)
                break;
            if ((wrc = sfl_conn_write(g->conn, p, n)) < 0)
                break;
            sfl_grpc_session_consumed(g->sess, n);
            if (g->sent != NULL)
                *g->sent += n;
        }
    } while (rc == 0 && wrc == 0 && g->again);
    g->pumping = 0;
    if (rc < 0 || wrc < 0) {
        if (rc < 0)
            note(g, rc, "http2: ", sfl_strerror(rc));
        else
            note(g, wrc, "write: ", sfl_strerror(wrc));
        g->shut = 1;
        sfl_conn_abort(g->conn);
        return;
    }
    /* A client's close ends its calls; a server's lets them run out. */
    if ((g->closing && !g->server) || sfl_grpc_session_done(g->sess)) {
        g->shut = 1;
        sfl_conn_close(g->conn);
        return;
    }
    uv_timer_start(&g->timer, on_timer, next < TICK_MAX_MS ? next : TICK_MAX_MS, 0);
}

static void on_timer(uv_timer_t *t)
{
    pump(t->data);
}

static void on_wake(sfl_grpc_session_t *s, void *ud)
{
    sfl_grpcconn_t *g = ud;

    (void)s;
    if (g->pumping)
        g->again = 1;
    else if (g->conn != NULL && !g->shut)
        uv_timer_start(&g->timer, on_timer, 0, 0);
}

static void on_connect(sfl_conn_t *c, int status)
{
    sfl_grpcconn_t *g = sfl_conn_data(c);

    if (status < 0) {
        note(g, status, "", sfl_last_error());
        return; /* on_close follows */
    }
    g->opened = 1;
    if (!g->closing && g->cbs.on_open != NULL)
        g->cbs.on_open(g, g->ud);
    pump(g);
}

static void on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    sfl_grpcconn_t *g = sfl_conn_data(c);
    int rc;

    if (g->closing || g->shut)
        return;
    g->pumping = 1;
    rc = sfl_grpc_session_feed(g->sess, buf, len);
    g->pumping = 0;
    /* The session has queued a GOAWAY and ends once it is written. */
    if (rc < 0)
        note(g, rc, "protocol error: ", sfl_last_error());
    pump(g);
}

static void on_drain(sfl_conn_t *c)
{
    pump(sfl_conn_data(c));
}

static void on_timer_closed(uv_handle_t *h)
{
    sfl_grpcconn_t *g = h->data;

    if (g->detail[0] == '\0')
        snprintf(g->detail, sizeof(g->detail), "closed");
    g->cbs.on_close(g, g->status, g->detail, g->ud);
    /* Unfinished calls end here with UNAVAILABLE (a server's session went
     * in sfl_grpcconn_closed). */
    sfl_grpc_session_free(g->sess);
    sfl__free(g);
}

static void on_close(sfl_conn_t *c, int status)
{
    sfl_grpcconn_t *g = sfl_conn_data(c);

    if (status < 0)
        note(g, status, "", sfl_last_error()[0] ? sfl_last_error() : sfl_strerror(status));
    g->conn = NULL;
    g->shut = 1;
    uv_timer_stop(&g->timer);
    uv_close((uv_handle_t *)&g->timer, on_timer_closed);
}

static const sfl_conn_cbs_t conn_cbs = {on_connect, on_data, on_drain, on_close};

int sfl_grpcconn_connect(uv_loop_t *loop, const struct sockaddr *addr,
                         const sfl_conn_opts_t *opts, const sfl_grpc_config_t *cfg,
                         const char *authority, const sfl_grpcconn_cbs_t *cbs, void *ud,
                         sfl_grpcconn_t **out)
{
    sfl_grpcconn_t *g;
    int rc;

    *out = NULL;
    g = sfl__calloc(1, sizeof(*g));
    if (g == NULL)
        return SFL_ENOMEM;
    g->cbs = *cbs;
    g->ud = ud;
    rc = sfl_grpc_client_new(cfg, opts != NULL && opts->tls != NULL ? "https" : "http",
                             authority, &g->sess);
    if (rc < 0)
        goto out;
    if ((rc = sfl_conn_connect(loop, addr, opts, &conn_cbs, g, &g->conn)) < 0)
        goto out;
    /* Only now: a handle, once initialised, could only be freed later from
     * its close callback. No callback can run before we return. */
    uv_timer_init(loop, &g->timer);
    g->timer.data = g;
    sfl_grpc_session_set_wake(g->sess, on_wake, g);
    *out = g;
    return 0;
out:
    sfl_grpc_session_free(g->sess);
    sfl__free(g);
    return rc;
}

int sfl_grpcconn_accept(uv_loop_t *loop, sfl_conn_t *c, const sfl_grpc_config_t *cfg,
                        const sfl_grpc_method_t *methods, size_t n, void *sud,
                        const sfl_grpcconn_cbs_t *cbs, void *ud, sfl_grpcconn_t **out)
{
    sfl_grpcconn_t *g;
    int rc;

    *out = NULL;
    g = sfl__calloc(1, sizeof(*g));
    if (g == NULL)
        return SFL_ENOMEM;
    g->server = 1;
    g->opened = 1;
    g->conn = c;
    g->cbs = *cbs;
    g->ud = ud;
    if ((rc = sfl_grpc_server_new(cfg, methods, n, sud, &g->sess)) < 0) {
        sfl__free(g);
        return rc;
    }
    uv_timer_init(loop, &g->timer);
    g->timer.data = g;
    sfl_grpc_session_set_wake(g->sess, on_wake, g);
    *out = g;
    return 0;
}

int sfl_grpcconn_feed(sfl_grpcconn_t *g, const uint8_t *buf, size_t len)
{
    int rc = 0;

    if (!g->shut) {
        g->pumping = 1;
        rc = sfl_grpc_session_feed(g->sess, buf, len);
        g->pumping = 0;
        if (rc < 0)
            note(g, rc, "protocol error: ", sfl_last_error());
    }
    pump(g);
    return rc;
}

void sfl_grpcconn_pump(sfl_grpcconn_t *g)
{
    pump(g);
}

void sfl_grpcconn_closed(sfl_grpcconn_t *g, int status)
{
    if (status < 0)
        note(g, status, "", sfl_last_error()[0] ? sfl_last_error() : sfl_strerror(status));
    g->conn = NULL;
    g->shut = 1;
    uv_timer_stop(&g->timer);
    /* Held calls (a Subscribe) get their cancel callbacks now. */
    sfl_grpc_session_free(g->sess);
    g->sess = NULL;
    uv_close((uv_handle_t *)&g->timer, on_timer_closed);
}

void sfl_grpcconn_count_sent(sfl_grpcconn_t *g, uint64_t *counter)
{
    g->sent = counter;
}

sfl_grpc_session_t *sfl_grpcconn_session(const sfl_grpcconn_t *g)
{
    return g->sess;
}

sfl_conn_t *sfl_grpcconn_conn(const sfl_grpcconn_t *g)
{
    return g->conn;
}

void sfl_grpcconn_close(sfl_grpcconn_t *g)
{
    if (g->conn == NULL || g->closing || g->sess == NULL)
        return;
    g->closing = 1;
    if (!g->opened) {
        g->shut = 1;
        sfl_conn_close(g->conn);
        return;
    }
    sfl_grpc_session_shutdown(g->sess);
    /* Written and closed from the loop: this may run inside the session's
     * callbacks, where pending must not be called. */
    if (!g->shut)
        uv_timer_start(&g->timer, on_timer, 0, 0);
}

int sfl_grpcconn_split_hostport(const char *s, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon, *h = s;
    size_t hn, pn;

    if (s[0] == '[') {
        const char *end = strchr(s, ']');

        if (end == NULL || end[1] != ':')
            return sfl__fail(SFL_EINVAL, "bad address '%s' (want [v6]:port)", s);
        h = s + 1;
        hn = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return sfl__fail(SFL_EINVAL, "missing port in '%s'", s);
        hn = (size_t)(colon - s);
    }
    pn = strlen(colon + 1);
    if (hn == 0 || hn >= hcap || pn == 0 || pn >= pcap ||
        strspn(colon + 1, "0123456789") != pn)
        return sfl__fail(SFL_EINVAL, "bad address '%s' (want host:port)", s);
    memcpy(host, h, hn);
    host[hn] = '\0';
    memcpy(port, colon + 1, pn + 1);
    return 0;
}

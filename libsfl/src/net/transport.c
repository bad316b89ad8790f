#include "net/transport_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#ifdef __linux__
#include <linux/tcp.h> /* TCP_USER_TIMEOUT, which glibc hides in strict modes */
#endif
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "net/srcmap.h"
#include "sfl/core/alloc.h"

/* The connection core: socket, timers, output queue and the state machine,
 * shared by every transport; plus the plain TCP transport. Memory follows
 * libuv's rule: a connection is freed only from the close callback of the
 * last of its handles, never inside a callback chain the application is
 * in. Work an application call would otherwise do synchronously (a
 * graceful close, resuming a paused reader) is marked and done later from
 * the connection's `defer` handle, like Redis's beforeSleep. STYLE rule 6
 * names a uv_check_t; a check handle runs after the poll phase and does not
 * keep the poll from blocking, so a close requested from a timer callback
 * would wait for the next unrelated event (Node pairs its check handle with
 * an idle handle for this reason). An idle handle runs before the poll and
 * makes it non-blocking while active, which is what deferred work needs. */

#define DEF_CONNECT_MS 10000
#define DEF_HANDSHAKE_MS 10000
#define DEF_IDLE_MS 120000
#define DEF_UNACKED_MS 30000
#define KEEPALIVE_S 10
#define DEF_CLOSE_MS 2000
#define DEF_READ_BUDGET ((size_t)256 * 1024)
#define DEF_HIGH_WATER ((size_t)1024 * 1024)
#define DEF_WRITE_MAX ((size_t)16 * 1024 * 1024)
#define DEF_MAX_CONNS 4096
#define DEF_MAX_HANDSHAKES 512
#define DEF_MAX_HANDSHAKES_PER_IP 64
/* The kernel's queue of connections not yet accepted (capped at
 * net.core.somaxconn). We take every connection from it as soon as it is
 * there, so nobody waits in it behind a flood. */
#define LISTEN_BACKLOG 4096

/* Reads land in one per-thread buffer: libuv calls alloc_cb and read_cb
 * back to back, and every transport consumes (or copies) the bytes before
 * read_cb returns, so a per-connection buffer would only cost memory
 * (64 KiB x thousands of agents). 64 KiB is what one read may bring in,
 * which bounds the work of one callback. */
static _Thread_local uint8_t read_buf[65536];

typedef enum {
    EV_CONNECTED, /* TCP is up (connected or accepted) */
    EV_READY,     /* transport handshake done */
    EV_CLOSE,     /* graceful close: app, idle timeout, peer EOF, TLS alert */
    EV_EOF,       /* the peer will send nothing more */
    EV_FIN_SENT,  /* our shutdown completed */
    EV_TIMEOUT,   /* the current deadline passed */
    EV_ABORT,     /* close the handles now */
    EV_HANDLE_CLOSED
} conn_ev_t;

struct sfl_listener {
    uv_tcp_t tcp;
    uv_tcp_t reject; /* accepts and drops one refused connection at a time */
    uv_idle_t resume; /* takes the held connection once a handshake ended */
    uv_loop_t *loop;
    sfl_conn_opts_t opts;
    sfl_conn_cbs_t cbs;
    sfl_listener_reject_cb on_reject;
    void *data;
    sfl_conn_t *conns; /* accepted and not yet closed (until detached) */
    size_t nconns;
    size_t nhandshakes; /* of them, holding a handshake slot */
    sfl__srcmap_t srcs; /* per source address, the number of those */
    int handles; /* open handles; the listener is freed when none are left */
    /* accept_pending: libuv holds an accepted connection we have not taken
     * (the reject handle was busy) */
    unsigned closing : 1, reject_busy : 1, accept_pending : 1;
};

static const sfl__xport_t xport_tcp;
static void conn_step(sfl_conn_t *c, conn_ev_t ev);
static void accept_one(sfl_listener_t *l);

static void on_resume(uv_idle_t *h)
{
    sfl_listener_t *l = h->data;

    uv_idle_stop(h);
    if (l->accept_pending && !l->reject_busy && !l->closing) {
        l->accept_pending = 0;
        accept_one(l);
    }
}

/* c's handshake slot is given back (it opened, failed or was detached). */
static void handshake_ended(sfl_listener_t *l, sfl_conn_t *c)
{
    if (!c->counted)
        return;
    c->counted = 0;
    sfl__srcmap_del(&l->srcs, c->src);
    l->nhandshakes--;
    if (l->accept_pending && !l->closing)
        uv_idle_start(&l->resume, on_resume);
}

static const char *state_name(sfl_conn_state_t s)
{
    switch (s) {
    case SFL_CONN_CONNECTING:
        return "connecting";
    case SFL_CONN_HANDSHAKE:
        return "in its handshake";
    case SFL_CONN_OPEN:
        return "open";
    case SFL_CONN_SHUTDOWN:
        return "closing";
    case SFL_CONN_CLOSING:
    case SFL_CONN_CLOSED:
        break;
    }
    return "closed";
}

/* Keep the first error: later ones are usually its consequences. */
SFL_PRINTF(3, 0)
static void conn_verror(sfl_conn_t *c, int status, const char *fmt, va_list ap)
{
    if (c->status != 0)
        return;
    c->status = status;
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
}

SFL_PRINTF(3, 4)
static void conn_error(sfl_conn_t *c, int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conn_verror(c, status, fmt, ap);
    va_end(ap);
}

static void addr_name(const struct sockaddr *sa, char *buf, size_t cap)
{
    char ip[64];

    buf[0] = '\0';
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        if (uv_ip4_name(in, ip, sizeof(ip)) == 0)
            snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (uv_ip6_name(in6, ip, sizeof(ip)) == 0)
            snprintf(buf, cap, "[%s]:%u", ip, (unsigned)ntohs(in6->sin6_port));
    }
}

static int opts_check(const sfl_conn_opts_t *in, sfl_conn_opts_t *o)
{
    if (in)
        *o = *in;
    else
        memset(o, 0, sizeof(*o));
    if (!o->connect_timeout_ms)
        o->connect_timeout_ms = DEF_CONNECT_MS;
    if (!o->handshake_timeout_ms)
        o->handshake_timeout_ms = DEF_HANDSHAKE_MS;
    if (!o->idle_timeout_ms)
        o->idle_timeout_ms = DEF_IDLE_MS;
    if (!o->close_timeout_ms)
        o->close_timeout_ms = DEF_CLOSE_MS;
    if (!o->unacked_timeout_ms || o->unacked_timeout_ms > UINT_MAX)
        o->unacked_timeout_ms = DEF_UNACKED_MS;
    if (!o->read_budget)
        o->read_budget = DEF_READ_BUDGET;
    if (!o->write_max)
        o->write_max = DEF_WRITE_MAX;
    if (!o->write_high_water)
        o->write_high_water = o->write_max / 2 < DEF_HIGH_WATER ? o->write_max / 2 : DEF_HIGH_WATER;
    if (!o->max_conns)
        o->max_conns = DEF_MAX_CONNS;
    if (!o->max_handshakes)
        o->max_handshakes = DEF_MAX_HANDSHAKES;
    if (!o->max_handshakes_per_ip)
        o->max_handshakes_per_ip = DEF_MAX_HANDSHAKES_PER_IP;
    if (o->max_handshakes_per_ip > o->max_handshakes)
        o->max_handshakes_per_ip = o->max_handshakes;
    if (o->max_handshakes > INT_MAX / 4)
        return sfl__fail(SFL_EINVAL, "transport: max_handshakes %zu is above INT_MAX / 4",
                         o->max_handshakes);
    /* uv_buf_t lengths are unsigned int and SSL_write takes an int. */
    if (o->write_max > INT_MAX / 2)
        return sfl__fail(SFL_EINVAL, "transport: write_max %zu is above INT_MAX / 2", o->write_max);
    if (o->write_high_water == 0 || o->write_high_water > o->write_max)
        return sfl__fail(SFL_EINVAL, "transport: write_high_water %zu must be in 1..write_max (%zu)",
                         o->write_high_water, o->write_max);
    return 0;
}

/* Allocates c and initialises its handles (which cannot fail on Unix once
 * the memory exists); from here on, c goes away only through uv_close. */
static int conn_new(uv_loop_t *loop, const sfl_conn_opts_t *o, const sfl_conn_cbs_t *cbs,
                    void *data, sfl_conn_t **out)
{
    sfl_conn_t *c = sfl__calloc(1, sizeof(*c));

    *out = NULL;
    if (!c)
        return sfl__fail(SFL_ENOMEM, "transport: no memory for a connection");
    c->loop = loop;
    c->type = o->tls ? &sfl__xport_tls : &xport_tcp;
    c->state = SFL_CONN_CONNECTING;
    c->cbs = *cbs;
    c->data = data;
    c->connect_ms = o->connect_timeout_ms;
    c->handshake_ms = o->handshake_timeout_ms;
    c->idle_ms = o->idle_timeout_ms;
    c->unacked_ms = o->unacked_timeout_ms;
    c->close_ms = o->close_timeout_ms;
    c->read_budget = o->read_budget;
    c->high_water = o->write_high_water;
    c->write_max = o->write_max;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->timer);
    uv_idle_init(loop, &c->defer);
    c->tcp.data = c;
    c->timer.data = c;
    c->defer.data = c;
    c->connect_req.data = c;
    c->shutdown_req.data = c;
    c->handles = 3;
    if (o->tls) {
        sfl__tls_ref(o->tls);
        c->tls = o->tls;
    }
    *out = c;
    return 0;
}

static void listener_unlink(sfl_conn_t *c)
{
    sfl_listener_t *l = c->listener;

    if (!l)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->listener = NULL;
    l->nconns--;
    handshake_ended(l, c);
}

/* Every handle has closed: the last callbacks, then the memory. */
static void conn_finish(sfl_conn_t *c)
{
    int status = c->status;

    if (c->silent) {
        /* the application never saw this connection */
    } else if (c->opened) {
        if (status)
            sfl__fail(status, "%s", c->detail);
        else
            sfl__clear_error();
        c->cbs.on_close(c, status);
    } else if (!c->accepted) {
        if (!status)
            status = UV_ECANCELED;
        sfl__fail(status, "%s", c->detail);
        c->cbs.on_connect(c, status);
        sfl__fail(status, "%s", c->detail);
        c->cbs.on_close(c, status);
    } else if (c->listener && c->listener->on_reject) {
        if (!status)
            status = UV_ECONNABORTED;
        c->listener->on_reject(c->listener, status, c->detail);
    }
    listener_unlink(c);
    c->type->destroy(c);
    sfl_tls_free(c->tls);
    sfl__free(c);
}

static void handle_closed(uv_handle_t *h)
{
    conn_step(h->data, EV_HANDLE_CLOSED);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = (char *)read_buf;
    buf->len = sizeof(read_buf);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void defer_cb(uv_idle_t *h);
static void timer_cb(uv_timer_t *t);

static int read_start(sfl_conn_t *c)
{
    int rc;

    if (c->reading || c->eof)
        return 0;
    rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (rc == 0)
        c->reading = 1;
    return rc;
}

static void read_stop(sfl_conn_t *c)
{
    if (c->reading)
        uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

static void arm_timer(sfl_conn_t *c, uint64_t ms)
{
    uv_timer_start(&c->timer, timer_cb, ms, 0);
}

static void schedule(sfl_conn_t *c)
{
    uv_idle_start(&c->defer, defer_cb);
}

/* Best effort: a socket option that fails leaves the idle timeout in
 * charge, as before. */
static void dead_peer_detection(sfl_conn_t *c)
{
    (void)uv_tcp_keepalive(&c->tcp, 1, KEEPALIVE_S);
#ifdef __linux__
    uv_os_fd_t fd;
    unsigned int ms = (unsigned int)c->unacked_ms;

    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
#endif
}

/* The connection state machine (STYLE rule 10): every state change happens
 * here. Errors are recorded with conn_error() before the event is sent. */
static void conn_step(sfl_conn_t *c, conn_ev_t ev)
{
    int drop = 0;
    int rc;

    switch (c->state) {
    case SFL_CONN_CONNECTING:
        if (ev == EV_CONNECTED) {
            c->state = SFL_CONN_HANDSHAKE;
            if (c->accepted) {
                /* A client's deadline covers connect and handshake. */
                c->deadline = uv_now(c->loop) + c->handshake_ms;
                arm_timer(c, c->handshake_ms);
            }
            uv_tcp_nodelay(&c->tcp, 1);
            dead_peer_detection(c);
            rc = read_start(c);
            if (rc) {
                conn_error(c, rc, "read: %s", uv_strerror(rc));
                conn_step(c, EV_ABORT);
                return;
            }
            c->type->start(c);
            return;
        }
        /* Nothing to flush before TCP is up. */
        drop = ev == EV_CLOSE || ev == EV_EOF || ev == EV_TIMEOUT || ev == EV_ABORT;
        break;
    case SFL_CONN_HANDSHAKE:
        if (ev == EV_READY) {
            c->state = SFL_CONN_OPEN;
            c->opened = 1;
            if (c->listener)
                handshake_ended(c->listener, c);
            c->last_active = uv_now(c->loop);
            arm_timer(c, c->idle_ms);
            sfl__clear_error();
            c->cbs.on_connect(c, 0);
            return;
        }
        if (ev != EV_CLOSE) {
            drop = ev == EV_EOF || ev == EV_TIMEOUT || ev == EV_ABORT;
            break;
        }
        /* A handshake failure closes gracefully so its alert reaches the
         * peer. */
        /* fall through */
    case SFL_CONN_OPEN:
        if (ev == EV_EOF) {
            c->eof = 1;
            ev = EV_CLOSE;
        }
        if (ev == EV_CLOSE || ev == EV_TIMEOUT) {
            c->state = SFL_CONN_SHUTDOWN;
            c->deadline = uv_now(c->loop) + c->close_ms;
            arm_timer(c, c->close_ms);
            c->shutdown_pending = 1;
            schedule(c);
            return;
        }
        drop = ev == EV_ABORT;
        break;
    case SFL_CONN_SHUTDOWN:
        if (ev == EV_EOF)
            c->eof = 1;
        if (ev == EV_FIN_SENT)
            c->fin_sent = 1;
        drop = ev == EV_ABORT || ev == EV_TIMEOUT || (c->eof && c->fin_sent);
        break;
    case SFL_CONN_CLOSING:
        if (ev == EV_HANDLE_CLOSED && --c->handles == 0) {
            c->state = SFL_CONN_CLOSED;
            conn_finish(c);
        }
        return;
    case SFL_CONN_CLOSED:
        return;
    }
    if (!drop)
        return;
    c->state = SFL_CONN_CLOSING;
    c->reading = 0;
    /* Pending writes, connect and shutdown requests get UV_ECANCELED
     * before the handle's close callback. */
    uv_close((uv_handle_t *)&c->tcp, handle_closed);
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    uv_close((uv_handle_t *)&c->defer, handle_closed);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    sfl_conn_t *c = req->data;

    if (c->state != SFL_CONN_SHUTDOWN)
        return;
    if (status < 0) {
        conn_error(c, status, "shutdown: %s", uv_strerror(status));
        conn_step(c, EV_ABORT);
        return;
    }
    conn_step(c, EV_FIN_SENT);
}

/* Graceful close, deferred: the transport's goodbye, then FIN
 * once everything queued is written; keep reading (and discarding) so the
 * peer's FIN is seen and our unread input does not turn into a reset. */
static void do_shutdown(sfl_conn_t *c)
{
    int rc;

    c->type->shutdown(c);
    if (c->state != SFL_CONN_SHUTDOWN)
        return;
    rc = uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, shutdown_cb);
    if (rc == 0) {
        c->paused = 0;
        rc = read_start(c);
    }
    if (rc) {
        conn_error(c, rc, "shutdown: %s", uv_strerror(rc));
        conn_step(c, EV_ABORT);
    }
}

static void defer_cb(uv_idle_t *h)
{
    sfl_conn_t *c = h->data;
    int rc;

    if (c->shutdown_pending && c->state == SFL_CONN_SHUTDOWN) {
        c->shutdown_pending = 0;
        do_shutdown(c);
    }
    if (c->paused && c->state <= SFL_CONN_SHUTDOWN) {
        /* One loop iteration has passed since the budget ran out. */
        c->budget_used = 0;
        if (c->state == SFL_CONN_OPEN)
            c->type->resume(c);
        if (c->state <= SFL_CONN_SHUTDOWN && c->budget_used < c->read_budget) {
            c->paused = 0;
            rc = read_start(c);
            if (rc) {
                conn_error(c, rc, "read: %s", uv_strerror(rc));
                conn_step(c, EV_ABORT);
            }
        }
    }
    if (c->state < SFL_CONN_CLOSING && !c->paused && !c->shutdown_pending)
        uv_idle_stop(h);
}

static void timer_cb(uv_timer_t *t)
{
    sfl_conn_t *c = t->data;
    uint64_t now = uv_now(c->loop);
    uint64_t quiet;

    switch (c->state) {
    case SFL_CONN_OPEN:
        quiet = now - c->last_active;
        if (quiet < c->idle_ms) {
            /* Cheaper than restarting the timer on every read. */
            arm_timer(c, c->idle_ms - quiet);
            return;
        }
        conn_error(c, UV_ETIMEDOUT, "idle timeout: no traffic for %llu ms",
                   (unsigned long long)quiet);
        break;
    case SFL_CONN_CONNECTING:
    case SFL_CONN_HANDSHAKE:
    case SFL_CONN_SHUTDOWN:
        if (now < c->deadline) {
            arm_timer(c, c->deadline - now);
            return;
        }
        if (c->state == SFL_CONN_CONNECTING)
            conn_error(c, UV_ETIMEDOUT, "connect %s: not connected within %llu ms", c->name,
                       (unsigned long long)c->connect_ms);
        else if (c->state == SFL_CONN_HANDSHAKE)
            conn_error(c, UV_ETIMEDOUT, "%s %s: handshake not done within %llu ms", c->type->name,
                       c->name,
                       (unsigned long long)(c->accepted ? c->handshake_ms : c->connect_ms));
        /* A close that outlives close_ms keeps the status it had. */
        break;
    case SFL_CONN_CLOSING:
    case SFL_CONN_CLOSED:
        return;
    }
    conn_step(c, EV_TIMEOUT);
}

/* An accepted TLS connection's first bytes: 1 if the peer has already closed
 * (FIN or reset queued behind them). A client that gave up while waiting
 * in the listen backlog (a storm) then costs no handshake crypto: its
 * EOF arrives in the next read callback and closes it. */
static int peer_gone(sfl_conn_t *c)
{
    uv_os_fd_t fd;
    char b;
    ssize_t r;

    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return 0;
    r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    sfl_conn_t *c = s->data;

    if (n == 0)
        return;
    if (n < 0) {
        c->reading = 0;
        if (n == UV_EOF) {
            c->eof = 1;
            if (c->state == SFL_CONN_HANDSHAKE)
                conn_error(c, UV_ECONNRESET, "%s %s: peer closed the connection during the handshake",
                           c->type->name, c->name);
            conn_step(c, EV_EOF);
        } else {
            read_stop(c);
            conn_error(c, (int)n, "read: %s", uv_strerror((int)n));
            conn_step(c, EV_ABORT);
        }
        return;
    }
    c->last_active = uv_now(c->loop);
    /* While closing, input is read only to see the peer's FIN. */
    if (c->state != SFL_CONN_HANDSHAKE && c->state != SFL_CONN_OPEN)
        return;
    if (c->accepted && !c->peeked && c->type != &xport_tcp) { /* (TLS never half-closes) */
        c->peeked = 1;
        if (peer_gone(c))
            return;
    }
    c->type->feed(c, (const uint8_t *)buf->base, (size_t)n);
    if (c->state == SFL_CONN_OPEN && c->budget_used >= c->read_budget) {
        /* Let the other connections have this iteration. */
        read_stop(c);
        c->paused = 1;
        schedule(c);
    }
}

static void connect_cb(uv_connect_t *req, int status)
{
    sfl_conn_t *c = req->data;

    if (c->state != SFL_CONN_CONNECTING)
        return;
    if (status < 0) {
        conn_error(c, status, "connect %s: %s", c->name, uv_strerror(status));
        conn_step(c, EV_ABORT);
        return;
    }
    conn_step(c, EV_CONNECTED);
}

static void write_cb(uv_write_t *req, int status)
{
    sfl__wreq_t *w = req->data;
    sfl_conn_t *c = w->conn;

    c->queued -= w->len;
    sfl__free(w);
    if (status < 0) {
        if (status != UV_ECANCELED) {
            conn_error(c, status, "write: %s", uv_strerror(status));
            conn_step(c, EV_ABORT);
        }
        return;
    }
    c->last_active = uv_now(c->loop);
    /* Hysteresis: resume the producer at half the mark, not at each byte. */
    if (c->congested && c->queued <= c->high_water / 2) {
        c->congested = 0;
        if (c->state == SFL_CONN_OPEN && c->cbs.on_drain)
            c->cbs.on_drain(c);
    }
}

sfl__wreq_t *sfl__wreq_new(size_t len)
{
    sfl__wreq_t *w;

    if (len > SIZE_MAX - sizeof(*w))
        return NULL;
    w = sfl__malloc(sizeof(*w) + len);
    if (w)
        w->len = len;
    return w;
}

int sfl__conn_send(sfl_conn_t *c, sfl__wreq_t *w)
{
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned int)w->len);
    int rc;

    if (c->state >= SFL_CONN_CLOSING) {
        sfl__free(w);
        return UV_ECANCELED;
    }
    w->conn = c;
    w->req.data = w;
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
    if (rc) {
        sfl__free(w);
        conn_error(c, rc, "write: %s", uv_strerror(rc));
        conn_step(c, EV_ABORT);
        return rc;
    }
    c->queued += w->len;
    if (c->queued >= c->high_water)
        c->congested = 1;
    return 0;
}

void sfl__conn_ready(sfl_conn_t *c)
{
    conn_step(c, EV_READY);
}

int sfl__conn_can_deliver(const sfl_conn_t *c)
{
    return c->state == SFL_CONN_OPEN && c->budget_used < c->read_budget;
}

void sfl__conn_deliver(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    if (c->state != SFL_CONN_OPEN || len == 0)
        return;
    c->budget_used += len;
    if (c->cbs.on_data)
        c->cbs.on_data(c, buf, len);
}

void sfl__conn_eof(sfl_conn_t *c)
{
    conn_step(c, EV_EOF);
}

void sfl__conn_fail(sfl_conn_t *c, int status, int graceful, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conn_verror(c, status, fmt, ap);
    va_end(ap);
    conn_step(c, graceful ? EV_CLOSE : EV_ABORT);
}

/* ---- plain TCP ------------------------------------------------------- */

static int tcp_init(sfl_conn_t *c)
{
    (void)c;
    return 0;
}

static void tcp_start(sfl_conn_t *c)
{
    sfl__conn_ready(c);
}

static void tcp_feed(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    sfl__conn_deliver(c, buf, len);
}

static void tcp_resume(sfl_conn_t *c)
{
    (void)c;
}

static int tcp_write(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    sfl__wreq_t *w = sfl__wreq_new(len);

    if (!w)
        return sfl__fail(SFL_ENOMEM, "transport: no memory to queue %zu bytes", len);
    memcpy(w->data, buf, len);
    return sfl__conn_send(c, w);
}

static void tcp_shutdown(sfl_conn_t *c)
{
    (void)c;
}

static int tcp_peer(const sfl_conn_t *c, sfl_peer_t *out)
{
    (void)c;
    (void)out;
    return sfl__fail(SFL_ENOTFOUND, "transport: a plain TCP peer has no certificate");
}

static void tcp_destroy(sfl_conn_t *c)
{
    (void)c;
}

static const sfl__xport_t xport_tcp = {
    .name = "tcp",
    .init = tcp_init,
    .start = tcp_start,
    .feed = tcp_feed,
    .resume = tcp_resume,
    .write = tcp_write,
    .shutdown = tcp_shutdown,
    .peer = tcp_peer,
    .destroy = tcp_destroy,
};

/* ---- public connection API -------------------------------------------- */

static int cbs_check(const sfl_conn_cbs_t *cbs)
{
    if (!cbs || !cbs->on_connect || !cbs->on_close)
        return sfl__fail(SFL_EINVAL, "transport: on_connect and on_close are required");
    return 0;
}

static int addr_check(const struct sockaddr *addr)
{
    if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
        return sfl__fail(SFL_EINVAL, "transport: address must be IPv4 or IPv6");
    return 0;
}

int sfl_conn_connect(uv_loop_t *loop, const struct sockaddr *addr, const sfl_conn_opts_t *opts,
                     const sfl_conn_cbs_t *cbs, void *data, sfl_conn_t **out)
{
    sfl_conn_opts_t o;
    sfl_conn_t *c = NULL;
    int rc;

    if (!out)
        return sfl__fail(SFL_EINVAL, "transport: out is NULL");
    *out = NULL;
    if (!loop)
        return sfl__fail(SFL_EINVAL, "transport: loop is NULL");
    rc = cbs_check(cbs);
    if (rc == 0)
        rc = addr_check(addr);
    if (rc == 0)
        rc = opts_check(opts, &o);
    if (rc)
        return rc;
    if (o.tls && sfl__tls_is_server(o.tls))
        return sfl__fail(SFL_EINVAL, "transport: connect with a server TLS context");
    rc = conn_new(loop, &o, cbs, data, &c);
    if (rc)
        return rc;
    addr_name(addr, c->name, sizeof(c->name));
    rc = c->type->init(c);
    if (rc)
        goto out;
    rc = uv_tcp_connect(&c->connect_req, &c->tcp, addr, connect_cb);
    if (rc) {
        sfl__fail(rc, "connect %s: %s", c->name, uv_strerror(rc));
        goto out;
    }
    c->deadline = uv_now(loop) + c->connect_ms;
    arm_timer(c, c->connect_ms);
    *out = c;
out:
    if (rc) {
        /* Rule 2: an error return never calls back. */
        c->silent = 1;
        conn_step(c, EV_ABORT);
    }
    return rc;
}

int sfl_conn_write(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    if (!c || (!buf && len))
        return sfl__fail(SFL_EINVAL, "transport: write of NULL");
    if (c->state != SFL_CONN_OPEN)
        return sfl__fail(SFL_EINVAL, "transport: write on a connection that is %s",
                         state_name(c->state));
    if (len == 0)
        return 0;
    if (c->queued >= c->write_max || len > c->write_max - c->queued)
        return sfl__fail(SFL_ELIMIT, "transport: %zu bytes queued, %zu more would pass the %zu-byte cap",
                         c->queued, len, c->write_max);
    return c->type->write(c, buf, len);
}

size_t sfl_conn_queued(const sfl_conn_t *c)
{
    return c->queued;
}

int sfl_conn_congested(const sfl_conn_t *c)
{
    return c->congested;
}

void sfl_conn_close(sfl_conn_t *c)
{
    if (!c)
        return;
    if (!c->opened)
        conn_error(c, UV_ECANCELED, "closed by the application before it opened");
    conn_step(c, EV_CLOSE);
}

void sfl_conn_abort(sfl_conn_t *c)
{
    if (!c)
        return;
    if (!c->opened)
        conn_error(c, UV_ECANCELED, "closed by the application before it opened");
    conn_step(c, EV_ABORT);
}

void *sfl_conn_data(const sfl_conn_t *c)
{
    return c->data;
}

void sfl_conn_set_data(sfl_conn_t *c, void *data)
{
    c->data = data;
}

int sfl_conn_peer_name(const sfl_conn_t *c, char *buf, size_t cap)
{
    size_t n = strlen(c->name);

    if (n == 0)
        return UV_ENOTCONN;
    if (!buf || n >= cap)
        return sfl__fail(SFL_ELIMIT, "transport: peer name needs %zu bytes", n + 1);
    memcpy(buf, c->name, n + 1);
    return 0;
}

int sfl_conn_peer(const sfl_conn_t *c, sfl_peer_t *out)
{
    if (!c || !out)
        return sfl__fail(SFL_EINVAL, "transport: peer of NULL");
    if (!c->opened)
        return sfl__fail(SFL_ENOTFOUND, "transport: connection not open");
    return c->type->peer(c, out);
}

const char *sfl_role_name(sfl_role_t role)
{
    switch (role) {
    case SFL_ROLE_AGENT:
        return "agent";
    case SFL_ROLE_ADMIN:
        return "admin";
    case SFL_ROLE_COORDINATOR:
        return "coordinator";
    case SFL_ROLE_NONE:
        break;
    }
    return "none";
}

/* ---- listener ------------------------------------------------------- */

static void listener_closed(uv_handle_t *h)
{
    sfl_listener_t *l = h->data;

    if (--l->handles > 0)
        return;
    sfl_tls_free(l->opts.tls);
    sfl__srcmap_close(&l->srcs);
    sfl__free(l);
}

static void reject_closed(uv_handle_t *h)
{
    sfl_listener_t *l = h->data;

    l->reject_busy = 0;
    if (l->closing) {
        listener_closed(h);
        return;
    }
    l->handles--;
    /* libuv holds the connection we could not take and stops accepting
     * until it is taken: take it now. */
    if (l->accept_pending) {
        l->accept_pending = 0;
        accept_one(l);
    }
}

/* Accept the pending connection only to close it. */
SFL_PRINTF(3, 4)
static void refuse(sfl_listener_t *l, int status, const char *fmt, ...)
{
    char detail[256];
    va_list ap;

    if (l->reject_busy) {
        l->accept_pending = 1;
        return;
    }
    uv_tcp_init(l->loop, &l->reject);
    l->reject.data = l;
    l->reject_busy = 1;
    l->handles++;
    uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&l->reject);
    uv_close((uv_handle_t *)&l->reject, reject_closed);
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (l->on_reject)
        l->on_reject(l, status, detail);
}

/* The key of a peer's per-source count: an IPv4 address as ::ffff:a.b.c.d,
 * an IPv6 one cut to its /64 (one host usually holds a whole /64). */
static void src_key(const struct sockaddr *sa, uint8_t out[SFL_SRC_KEY])
{
    memset(out, 0, SFL_SRC_KEY);
    if (sa->sa_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 8);
    }
}

/* Every slot is taken and c's source holds `mine` of them: frees the slot of
 * the oldest handshake of the source holding the most, if it holds more than
 * mine + 1 (so two sources never evict each other back and forth). 1 if a
 * slot was freed. A flood from a few addresses thus cannot keep a new
 * source out for as long as its handshakes last. */
static int evict_one(sfl_listener_t *l, uint32_t mine)
{
    const sfl__src_slot_t *top = sfl__srcmap_max(&l->srcs);
    sfl_conn_t *c, *victim = NULL;
    char detail[200];

    if (top == NULL || top->n <= mine + 1)
        return 0;
    for (c = l->conns; c != NULL; c = c->next) /* newest first: the last is oldest */
        if (c->counted && memcmp(c->src, top->src, SFL_SRC_KEY) == 0)
            victim = c;
    if (victim == NULL)
        return 0;
    snprintf(detail, sizeof(detail),
             "listener: %s evicted: its source holds %u of the %zu handshake slots", victim->name,
             (unsigned)top->n, l->opts.max_handshakes);
    victim->silent = 1;
    listener_unlink(victim);
    if (l->on_reject)
        l->on_reject(l, UV_ECONNABORTED, detail);
    conn_step(victim, EV_ABORT);
    return 1;
}

static void accept_one(sfl_listener_t *l)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    sfl_conn_t *c;
    uint32_t mine;
    int rc;

    if (l->nconns >= l->opts.max_conns) {
        refuse(l, SFL_ELIMIT, "listener: %zu connections open, the maximum", l->nconns);
        return;
    }
    rc = conn_new(l->loop, &l->opts, &l->cbs, l->data, &c);
    if (rc) {
        refuse(l, rc, "listener: no memory for a connection");
        return;
    }
    c->accepted = 1;
    c->listener = l;
    c->next = l->conns;
    if (l->conns)
        l->conns->prev = c;
    l->conns = c;
    l->nconns++;
    rc = uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&c->tcp);
    if (rc) {
        conn_error(c, rc, "accept: %s", uv_strerror(rc));
        conn_step(c, EV_ABORT);
        return;
    }
    rc = uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len);
    if (rc) {
        conn_error(c, rc, "accept: no peer address: %s", uv_strerror(rc));
        conn_step(c, EV_ABORT);
        return;
    }
    addr_name((struct sockaddr *)&ss, c->name, sizeof(c->name));
    src_key((struct sockaddr *)&ss, c->src);
    /* Per source first, then the global slots (rule 23: a peer's share of
     * a shared resource is bounded before it gets any). */
    mine = sfl__srcmap_count(&l->srcs, c->src);
    if (mine >= l->opts.max_handshakes_per_ip) {
        conn_error(c, SFL_ELIMIT, "listener: %s refused: %u handshakes in progress from its "
                   "address, the maximum", c->name, (unsigned)mine);
        conn_step(c, EV_ABORT);
        return;
    }
    if (l->nhandshakes >= l->opts.max_handshakes && !evict_one(l, mine)) {
        conn_error(c, SFL_ELIMIT, "listener: %s refused: %zu handshakes in progress, the maximum",
                   c->name, l->nhandshakes);
        conn_step(c, EV_ABORT);
        return;
    }
    c->counted = 1;
    sfl__srcmap_add(&l->srcs, c->src);
    l->nhandshakes++;
    rc = c->type->init(c);
    if (rc) {
        conn_error(c, rc, "%s", sfl_last_error());
        conn_step(c, EV_ABORT);
        return;
    }
    conn_step(c, EV_CONNECTED);
}

static void listen_cb(uv_stream_t *server, int status)
{
    sfl_listener_t *l = server->data;

    if (status < 0) {
        if (l->on_reject)
            l->on_reject(l, status, uv_strerror(status));
        return;
    }
    accept_one(l);
}

int sfl_listener_new(uv_loop_t *loop, const struct sockaddr *addr, const sfl_conn_opts_t *opts,
                     const sfl_conn_cbs_t *cbs, sfl_listener_reject_cb on_reject, void *data,
                     sfl_listener_t **out)
{
    sfl_listener_t *l;
    char name[80];
    int rc;

    if (!out)
        return sfl__fail(SFL_EINVAL, "listener: out is NULL");
    *out = NULL;
    if (!loop)
        return sfl__fail(SFL_EINVAL, "listener: loop is NULL");
    rc = cbs_check(cbs);
    if (rc == 0)
        rc = addr_check(addr);
    if (rc)
        return rc;
    l = sfl__calloc(1, sizeof(*l));
    if (!l)
        return sfl__fail(SFL_ENOMEM, "listener: no memory");
    rc = opts_check(opts, &l->opts);
    if (rc) {
        sfl__free(l);
        return rc;
    }
    if (l->opts.tls && !sfl__tls_is_server(l->opts.tls)) {
        sfl__free(l);
        return sfl__fail(SFL_EINVAL, "listener: needs a server TLS context");
    }
    if (l->opts.tls)
        sfl__tls_ref(l->opts.tls);
    rc = sfl__srcmap_init(&l->srcs, l->opts.max_handshakes, uv_hrtime());
    if (rc) {
        sfl_tls_free(l->opts.tls); /* the reference taken above; NULL-safe */
        sfl__free(l);
        return rc;
    }
    l->loop = loop;
    l->cbs = *cbs;
    l->on_reject = on_reject;
    l->data = data;
    uv_tcp_init(loop, &l->tcp);
    l->tcp.data = l;
    uv_idle_init(loop, &l->resume);
    l->resume.data = l;
    l->handles = 2;
    addr_name(addr, name, sizeof(name));
    rc = uv_tcp_bind(&l->tcp, addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&l->tcp, LISTEN_BACKLOG, listen_cb);
    if (rc) {
        sfl__fail(rc, "listen %s: %s", name, uv_strerror(rc));
        l->closing = 1;
        uv_close((uv_handle_t *)&l->resume, listener_closed);
        uv_close((uv_handle_t *)&l->tcp, listener_closed);
        return rc;
    }
    *out = l;
    return 0;
}

int sfl_listener_port(const sfl_listener_t *l)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    int rc = uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &len);

    if (rc)
        return rc;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

void *sfl_listener_data(const sfl_listener_t *l)
{
    return l->data;
}

void sfl_listener_close(sfl_listener_t *l)
{
    sfl_conn_t *c, *next;

    if (!l || l->closing)
        return;
    l->closing = 1;
    for (c = l->conns; c; c = next) {
        next = c->next;
        c->listener = NULL;
        c->prev = c->next = NULL;
        c->counted = 0;
        if (!c->opened) {
            c->silent = 1;
            conn_step(c, EV_ABORT);
        }
    }
    l->conns = NULL;
    l->nconns = l->nhandshakes = 0;
    sfl__srcmap_clear(&l->srcs);
    uv_close((uv_handle_t *)&l->resume, listener_closed);
    uv_close((uv_handle_t *)&l->tcp, listener_closed);
}

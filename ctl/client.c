/* sflctl's client. It is a gRPC channel (sfl/net/grpcconn.h) with one
 * caller that waits: every call runs the loop until its callback has fired,
 * which is what a command-line tool wants and keeps the session driven only
 * from loop callbacks (never from inside its own). */
#include "ctl.h"

#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "sfl/core/alloc.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/net/transport.h"

/* Replies the tool accepts; an export of a d = 1e6 dense model is ~9 MB. */
#define CTL_MAX_MESSAGE (64u << 20)

struct ctl_client {
    uv_loop_t *loop;
    uint64_t timeout_ms;
    sfl_grpcconn_t *g; /* NULL once closed */
    uv_timer_t nap;    /* ctl_client_sleep */
    int nap_open;      /* nap not yet closed */
    int opened, closed, napped, interrupted;
    int settled;       /* opened or closed: ctl_client_open may return */
    char why[256];     /* why the connection failed or closed */
    /* the call in flight */
    sfl_grpc_call_t *call;
    ctl_result_t *res;
    int done, rc;
};

static void on_open(sfl_grpcconn_t *g, void *ud)
{
    ctl_client_t *k = ud;

    (void)g;
    k->opened = k->settled = 1;
}

static void on_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    ctl_client_t *k = ud;

    (void)g;
    if (status < 0 && k->why[0] == '\0')
        snprintf(k->why, sizeof(k->why), "%s", detail);
    /* The call in flight, if any, ends after this with UNAVAILABLE. */
    k->g = NULL;
    k->closed = k->settled = 1;
}

static const sfl_grpcconn_cbs_t conn_cbs = {on_open, on_close};

/* Runs the loop until *flag; -ECANCELED once interrupted. */
static int run_until(ctl_client_t *k, const int *flag)
{
    while (!*flag && !k->interrupted && uv_loop_alive(k->loop))
        uv_run(k->loop, UV_RUN_ONCE);
    return *flag ? 0 : -ECANCELED;
}

static void unavailable(ctl_result_t *r, const char *where, const char *why)
{
    r->status = SFL_GRPC_STATUS_UNAVAILABLE;
    snprintf(r->message, sizeof(r->message), "%.200s: %.300s", where, why);
}

/* One address of coordinator = A,B,... (addr: host:port). */
static int open_one(uv_loop_t *loop, const ctl_config_t *cfg, const char *addr,
                    ctl_client_t **out, ctl_result_t *r)
{
    sfl_grpc_config_t g = {.max_message = CTL_MAX_MESSAGE, .idle_timeout_ms = UINT32_MAX};
    sfl_conn_opts_t o = {.connect_timeout_ms = cfg->timeout_ms};
    char host[256], port[16];
    struct addrinfo hints;
    uv_getaddrinfo_t gai;
    ctl_client_t *k = NULL;
    int rc;

    *out = NULL;
    memset(r, 0, sizeof(*r));
    rc = sfl_grpcconn_split_hostport(addr, host, sizeof(host), port, sizeof(port));
    if (rc < 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        return sfl__fail(rc, "coordinator: %s", detail);
    }
    {
        sfl_tls_config_t t = {
            .cert_file = cfg->cert,
            .key_file = cfg->key,
            .ca_file = cfg->ca,
            .verify_host = cfg->server_name[0] ? cfg->server_name : host,
            .alpn = "h2",
            .alpn_required = 1,
        };

        if ((rc = sfl_tls_new(&t, 0, &o.tls)) < 0)
            return rc;
    }
    memset(&gai, 0, sizeof(gai));
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* No callback: resolves synchronously, which a CLI may. */
    if ((rc = uv_getaddrinfo(loop, &gai, NULL, host, port, &hints)) < 0) {
        unavailable(r, addr, uv_strerror(rc)); /* resolving */
        rc = 0;
        goto out;
    }
    k = sfl__calloc(1, sizeof(*k));
    if (k == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    k->loop = loop;
    k->timeout_ms = cfg->timeout_ms;
    uv_timer_init(loop, &k->nap);
    k->nap.data = k;
    k->nap_open = 1;
    rc = sfl_grpcconn_connect(loop, gai.addrinfo->ai_addr, &o, &g, addr, &conn_cbs,
                              k, &k->g);
    if (rc == SFL_ENOMEM)
        goto out;
    if (rc < 0) {
        unavailable(r, addr, sfl_strerror(rc));
        rc = 0;
        goto out;
    }
    (void)run_until(k, &k->settled);
    /* A refused TLS 1.3 client learns it only after its handshake: the
     * first call reports that. */
    if (!k->opened) {
        unavailable(r, "cannot connect", k->why[0] ? k->why : addr);
        goto out;
    }
    *out = k;
    k = NULL;
out:
    uv_freeaddrinfo(gai.addrinfo);
    ctl_client_free(k);
    sfl_tls_free(o.tls);
    return rc;
}

/* coordinator = A,B,... (a fleet's masters: only the leader listens):
 * the first address that connects; r says why the last one did not. */
int ctl_client_open(uv_loop_t *loop, const ctl_config_t *cfg, ctl_client_t **out,
                    ctl_result_t *r)
{
    const char *p = cfg->coordinator;
    char one[sizeof(cfg->coordinator)];
    int rc;

    *out = NULL;
    for (int i = 0;; i++) {
        size_t n = strcspn(p, ",");

        if (n == 0 || n >= sizeof(one) || i == CTL_MAX_COORDINATORS)
            return sfl__fail(SFL_EINVAL, "coordinator: '%s' is not a list of up to %d "
                             "host:port", cfg->coordinator, CTL_MAX_COORDINATORS);
        memcpy(one, p, n);
        one[n] = '\0';
        if ((rc = open_one(loop, cfg, one, out, r)) < 0 || *out != NULL || p[n] == '\0')
            return rc;
        p += n + 1;
    }
}

static void on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                     size_t len, void *ud)
{
    ctl_client_t *k = ud;
    ctl_result_t *r = k->res;

    (void)call;
    k->call = NULL;
    k->done = 1;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    if (status == SFL_GRPC_STATUS_UNAVAILABLE && k->why[0] && strlen(message) < 64)
        snprintf(r->message, sizeof(r->message), "%.63s%s%.300s", message, message[0] ? ": " : "",
                 k->why);
    if (status != SFL_GRPC_STATUS_OK)
        return;
    r->resp = sfl__malloc(len ? len : 1);
    if (r->resp == NULL) {
        k->rc = SFL_ENOMEM;
        return;
    }
    memcpy(r->resp, resp, len);
    r->len = len;
}

int ctl_client_call(ctl_client_t *k, const char *path, const uint8_t *req, size_t len,
                    ctl_result_t *r)
{
    int rc;

    ctl_result_clear(r);
    if (k->interrupted)
        return -ECANCELED;
    if (k->g == NULL) {
        unavailable(r, "connection closed", k->why[0] ? k->why : "by the coordinator");
        return 0;
    }
    k->res = r;
    k->done = 0;
    k->rc = 0;
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(k->g), path, req, len, (uint32_t)k->timeout_ms,
                             on_unary, k, &k->call);
    if (rc == -ENOTCONN) {
        unavailable(r, "connection closed", k->why[0] ? k->why : "by the coordinator");
        return 0;
    }
    if (rc < 0)
        return rc;
    rc = run_until(k, &k->done);
    if (rc < 0) {
        if (k->call != NULL)
            sfl_grpc_cancel(k->call);
        k->call = NULL;
        return rc;
    }
    return k->rc;
}

void ctl_client_interrupt(ctl_client_t *k)
{
    k->interrupted = 1;
}

static void on_nap(uv_timer_t *t)
{
    ctl_client_t *k = t->data;

    k->napped = 1;
}

int ctl_client_sleep(ctl_client_t *k, uint64_t ms)
{
    k->napped = 0;
    uv_timer_start(&k->nap, on_nap, ms, 0);
    return run_until(k, &k->napped);
}

static void on_nap_closed(uv_handle_t *h)
{
    ctl_client_t *k = h->data;

    k->nap_open = 0;
}

void ctl_client_free(ctl_client_t *k)
{
    if (k == NULL)
        return;
    if (k->call != NULL)
        sfl_grpc_cancel(k->call);
    k->call = NULL;
    if (k->g != NULL) {
        /* GOAWAY, then the transport closes (close_timeout_ms). */
        sfl_grpcconn_close(k->g);
        while (k->g != NULL)
            uv_run(k->loop, UV_RUN_ONCE);
    }
    if (k->nap_open) {
        uv_close((uv_handle_t *)&k->nap, on_nap_closed);
        while (k->nap_open)
            uv_run(k->loop, UV_RUN_ONCE);
    }
    sfl__free(k);
}

void ctl_result_clear(ctl_result_t *r)
{
    sfl__free(r->resp);
    memset(r, 0, sizeof(*r));
}

/* Plain TCP transport: server and client in one uv loop on 127.0.0.1, every
 * run bounded by a watchdog timer, callbacks counted (libuv test style). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>
#ifdef __linux__
#include <linux/tcp.h>
#endif

#include "failalloc.h"
#include "net/transport_int.h" /* the socket, to check its options */
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/net/transport.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int timed_out;
    sfl_listener_t *l;
    int port;
    sfl_conn_opts_t sopts, copts;
    /* server side */
    sfl_conn_t *srv;
    int srv_connect, srv_data, srv_close, srv_close_status, srv_drain, rejects, reject_status;
    char srv_detail[256], reject_detail[256];
    size_t srv_bytes;
    int close_in_data; /* server: write "bye" and close from on_data */
    int echo;          /* server: echo what it gets */
    /* client side */
    sfl_conn_t *cli;
    int cli_connect, cli_connect_status, cli_data, cli_close, cli_close_status, cli_drain;
    char cli_detail[256];
    size_t cli_bytes;
    uint8_t *expect; /* bytes the client expects back */
    size_t expect_len;
    int close_when_done;
    int done;
} fx_t;

static fx_t F;

static void watchdog_cb(uv_timer_t *t)
{
    (void)t;
    F.timed_out = 1;
    uv_stop(&F.loop);
}

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof(F));
    assert_int_equal(uv_loop_init(&F.loop), 0);
    uv_timer_init(&F.loop, &F.watchdog);
    uv_timer_start(&F.watchdog, watchdog_cb, WATCHDOG_MS, 0);
    /* The watchdog must not keep the loop alive by itself. */
    uv_unref((uv_handle_t *)&F.watchdog);
    return 0;
}

/* Run the loop until *flag is set; the watchdog fails the test instead of
 * letting it hang. */
static void run_until(const int *flag)
{
    while (!*flag) {
        if (F.timed_out)
            fail_msg("watchdog: condition not reached within %d ms", WATCHDOG_MS);
        if (!uv_loop_alive(&F.loop))
            fail_msg("loop ran out of work before the condition");
        uv_run(&F.loop, UV_RUN_ONCE);
    }
}

/* Close what is left, let every handle close, and check nothing leaked. */
static int teardown(void **state)
{
    (void)state;
    sfl_listener_close(F.l);
    F.l = NULL;
    while (uv_loop_alive(&F.loop) && !F.timed_out)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&F.watchdog, NULL);
    uv_run(&F.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&F.loop), 0);
    free(F.expect);
    return 0;
}

/* ---- server callbacks ----------------------------------------------- */

static void srv_on_connect(sfl_conn_t *c, int status)
{
    assert_int_equal(status, 0);
    assert_ptr_equal(sfl_conn_data(c), &F);
    F.srv = c;
    F.srv_connect++;
}

static void srv_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    F.srv_data++;
    F.srv_bytes += len;
    if (F.echo)
        assert_int_equal(sfl_conn_write(c, buf, len), 0);
    if (F.close_in_data) {
        assert_int_equal(sfl_conn_write(c, (const uint8_t *)"bye", 3), 0);
        sfl_conn_close(c);
        sfl_conn_close(c); /* idempotent */
        /* Marked, not freed: on_close has not run and c is still valid. */
        assert_int_equal(F.srv_close, 0);
        assert_int_equal(sfl_conn_write(c, buf, len), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "closing"));
    }
}

static void srv_on_drain(sfl_conn_t *c)
{
    (void)c;
    F.srv_drain++;
}

static void srv_on_close(sfl_conn_t *c, int status)
{
    assert_ptr_equal(c, F.srv);
    F.srv_close++;
    F.srv_close_status = status;
    snprintf(F.srv_detail, sizeof(F.srv_detail), "%s", status ? sfl_last_error() : "");
    F.srv = NULL;
}

static void on_reject(sfl_listener_t *l, int status, const char *detail)
{
    assert_ptr_equal(sfl_listener_data(l), &F);
    F.rejects++;
    F.reject_status = status;
    snprintf(F.reject_detail, sizeof(F.reject_detail), "%s", detail);
}

static const sfl_conn_cbs_t srv_cbs = {srv_on_connect, srv_on_data, srv_on_drain, srv_on_close};

/* ---- client callbacks ----------------------------------------------- */

static void cli_on_connect(sfl_conn_t *c, int status)
{
    F.cli_connect++;
    F.cli_connect_status = status;
    if (status)
        snprintf(F.cli_detail, sizeof(F.cli_detail), "%s", sfl_last_error());
    else
        assert_ptr_equal(c, F.cli);
}

static void cli_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    F.cli_data++;
    if (F.expect) {
        assert_true(F.cli_bytes + len <= F.expect_len);
        assert_memory_equal(buf, F.expect + F.cli_bytes, len);
    }
    F.cli_bytes += len;
    if (F.close_when_done && F.cli_bytes == F.expect_len)
        sfl_conn_close(c);
}

static void cli_on_drain(sfl_conn_t *c)
{
    (void)c;
    F.cli_drain++;
}

static void cli_on_close(sfl_conn_t *c, int status)
{
    assert_ptr_equal(c, F.cli);
    F.cli_close++;
    F.cli_close_status = status;
    if (status && !F.cli_detail[0])
        snprintf(F.cli_detail, sizeof(F.cli_detail), "%s", sfl_last_error());
    F.cli = NULL;
    F.done = 1;
}

static const sfl_conn_cbs_t cli_cbs = {cli_on_connect, cli_on_data, cli_on_drain, cli_on_close};

static void loopback(struct sockaddr_in *a, int port)
{
    assert_int_equal(uv_ip4_addr("127.0.0.1", port, a), 0);
}

static void listen_here(void)
{
    struct sockaddr_in a;

    loopback(&a, 0);
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, &F.sopts, &srv_cbs,
                                      on_reject, &F, &F.l),
                     0);
    F.port = sfl_listener_port(F.l);
    assert_true(F.port > 0);
}

static void connect_here(int port)
{
    struct sockaddr_in a;

    loopback(&a, port);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &F.copts, &cli_cbs, &F,
                                      &F.cli),
                     0);
    assert_non_null(F.cli);
}

static uint8_t *pattern(size_t n, unsigned seed)
{
    uint8_t *p = malloc(n);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
    return p;
}

/* ---- tests ------------------------------------------------------------ */

/* Echo 300 KB in uneven writes through a server whose read budget forces
 * it to yield several times; every byte comes back in order. */
static void test_transport_echo(void **state)
{
    static const size_t sizes[] = {1, 1000, 65536, 100000, 133463};
    size_t total = 0, off = 0;
    sfl_peer_t peer;
    char name[64];

    (void)state;
    F.echo = 1;
    F.sopts.read_budget = 16 * 1024;
    F.close_when_done = 1;
    listen_here();
    connect_here(F.port);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        total += sizes[i];
    F.expect = pattern(total, 7);
    F.expect_len = total;
    /* Writing before the connection is open is refused, not queued. */
    assert_int_equal(sfl_conn_write(F.cli, F.expect, 10), SFL_EINVAL);
    run_until(&F.cli_connect);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(sfl_conn_peer_name(F.cli, name, sizeof(name)), 0);
    assert_int_equal(strncmp(name, "127.0.0.1:", 10), 0);
    assert_int_equal(atoi(name + 10), F.port);
    assert_int_equal(sfl_conn_peer_name(F.cli, name, 5), SFL_ELIMIT);
    assert_int_equal(sfl_conn_peer(F.cli, &peer), SFL_ENOTFOUND);
    /* Dead peers are detected by the kernel: keepalive, and on Linux
     * TCP_USER_TIMEOUT = unacked_timeout_ms (default 30 s). */
    {
        uv_os_fd_t fd;
        int on = 0;
        socklen_t len = sizeof(on);

        assert_int_equal(uv_fileno((const uv_handle_t *)&F.cli->tcp, &fd), 0);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
        assert_int_equal(on, 1);
#ifdef __linux__
        unsigned int ms = 0;
        len = sizeof(ms);
        assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, &len), 0);
        assert_int_equal(ms, 30000);
#endif
    }
    assert_int_equal(sfl_conn_write(F.cli, F.expect, 0), 0);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        assert_int_equal(sfl_conn_write(F.cli, F.expect + off, sizes[i]), 0);
        off += sizes[i];
    }
    assert_int_equal(sfl_conn_queued(F.cli), total);
    run_until(&F.done);
    assert_int_equal(F.cli_bytes, total);
    assert_int_equal(F.srv_bytes, total);
    assert_true(F.srv_data >= (int)(total / 65536));
    assert_int_equal(F.cli_connect, 1);
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.cli_close_status, 0);
    run_until(&F.srv_close);
    assert_int_equal(F.srv_connect, 1);
    assert_int_equal(F.srv_close, 1);
    assert_int_equal(F.srv_close_status, 0);
    assert_int_equal(F.rejects, 0);
}

/* Closing from inside on_data: the connection stays valid until on_close,
 * which runs once, later; what was written before the close still arrives. */
static void test_transport_close_in_callback(void **state)
{
    (void)state;
    F.close_in_data = 1;
    listen_here();
    connect_here(F.port);
    run_until(&F.cli_connect);
    assert_int_equal(sfl_conn_write(F.cli, (const uint8_t *)"hi", 2), 0);
    run_until(&F.done);
    assert_int_equal(F.srv_data, 1);
    assert_int_equal(F.cli_bytes, 3);
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.cli_close_status, 0);
    run_until(&F.srv_close);
    assert_int_equal(F.srv_close, 1);
    assert_int_equal(F.srv_close_status, 0);
}

static size_t iter_bytes, iter_max;

static void iter_reset(uv_prepare_t *p)
{
    (void)p;
    iter_bytes = 0;
}

static void budget_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    (void)c;
    (void)buf;
    F.srv_bytes += len;
    iter_bytes += len;
    if (iter_bytes > iter_max)
        iter_max = iter_bytes;
    if (F.srv_bytes == F.expect_len)
        F.done = 1;
}

/* Per loop iteration (a uv_prepare_t marks each one) a connection gets at
 * most its read budget plus the read that crossed it; without the budget
 * libuv would hand it up to 32 reads of 64 KiB in one go. */
static void test_transport_read_budget(void **state)
{
    static const sfl_conn_cbs_t budget_cbs = {srv_on_connect, budget_on_data, NULL, srv_on_close};
    const size_t total = 4 << 20, budget = 32 * 1024;
    struct sockaddr_in a;
    static uv_prepare_t prep; /* static: outlives a failed assertion */
    uint8_t *buf = pattern(total, 5);

    (void)state;
    iter_max = 0;
    F.sopts.read_budget = budget;
    F.expect_len = total;
    loopback(&a, 0);
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, &F.sopts, &budget_cbs,
                                      on_reject, &F, &F.l),
                     0);
    F.port = sfl_listener_port(F.l);
    uv_prepare_init(&F.loop, &prep);
    uv_prepare_start(&prep, iter_reset);
    connect_here(F.port);
    run_until(&F.cli_connect);
    assert_int_equal(sfl_conn_write(F.cli, buf, total), 0);
    run_until(&F.done);
    assert_int_equal(F.srv_bytes, total);
    assert_true(iter_max > 0);
    if (iter_max > budget + 65536)
        fail_msg("%zu bytes delivered in one loop iteration, budget %zu", iter_max, budget);
    uv_close((uv_handle_t *)&prep, NULL);
    sfl_conn_close(F.cli);
    run_until(&F.srv_close);
    free(buf);
}

/* A connection nobody talks on is closed by the idle timer. */
static void test_transport_idle_timeout(void **state)
{
    uint64_t t0;

    (void)state;
    F.sopts.idle_timeout_ms = 100;
    listen_here();
    connect_here(F.port);
    run_until(&F.cli_connect);
    uv_update_time(&F.loop);
    t0 = uv_now(&F.loop);
    run_until(&F.srv_close);
    uv_update_time(&F.loop);
    assert_true(uv_now(&F.loop) - t0 >= 90);
    assert_int_equal(F.srv_close_status, -ETIMEDOUT);
    assert_non_null(strstr(F.srv_detail, "idle timeout"));
    run_until(&F.done);
    assert_int_equal(F.cli_close_status, 0); /* the client just saw EOF */
    assert_int_equal(F.srv_data, 0);
}

/* A raw server that accepts and does not read until told to. */
static uv_tcp_t raw_server, raw_peer;
static size_t raw_bytes;
static int raw_closed;
static char raw_buf[65536];

static void raw_alloc(uv_handle_t *h, size_t n, uv_buf_t *b)
{
    (void)h;
    (void)n;
    b->base = raw_buf;
    b->len = sizeof(raw_buf);
}

static void raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    if (n > 0) {
        raw_bytes += (size_t)n;
    } else if (n < 0) {
        uv_close((uv_handle_t *)s, NULL);
        raw_closed = 1;
    }
}

static void raw_accept(uv_stream_t *s, int status)
{
    assert_int_equal(status, 0);
    uv_tcp_init(s->loop, &raw_peer);
    assert_int_equal(uv_accept(s, (uv_stream_t *)&raw_peer), 0);
    F.srv_connect++;
}

static int raw_listen(void)
{
    struct sockaddr_in a;
    struct sockaddr_storage ss;
    int len = sizeof(ss);

    loopback(&a, 0);
    uv_tcp_init(&F.loop, &raw_server);
    assert_int_equal(uv_tcp_bind(&raw_server, (struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&raw_server, 8, raw_accept), 0);
    assert_int_equal(uv_tcp_getsockname(&raw_server, (struct sockaddr *)&ss, &len), 0);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void timer_flag(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* The output queue reports congestion while the peer does not read,
 * refuses writes past the cap, and drains (once) when the peer reads. */
static void test_transport_backpressure(void **state)
{
    const size_t chunk = 1 << 20, nchunks = 24;
    uint8_t *buf = pattern(chunk, 3);
    static uv_timer_t t;
    int waited = 0;
    size_t q;

    (void)state;
    raw_bytes = 0;
    raw_closed = 0;
    F.copts.write_high_water = 1 << 20;
    F.copts.write_max = 32 << 20;
    connect_here(raw_listen());
    run_until(&F.cli_connect);
    assert_int_equal(F.cli_connect_status, 0);
    assert_int_equal(sfl_conn_congested(F.cli), 0);
    for (size_t i = 0; i < nchunks; i++)
        assert_int_equal(sfl_conn_write(F.cli, buf, chunk), 0);
    assert_int_equal(sfl_conn_congested(F.cli), 1);
    q = sfl_conn_queued(F.cli);
    assert_int_equal(q, nchunks * chunk); /* nothing completes inside a call */
    /* Congested is advice: writes still succeed up to the hard cap... */
    assert_int_equal(sfl_conn_write(F.cli, buf, chunk), 0);
    assert_int_equal(sfl_conn_write(F.cli, buf, chunk), 0);
    free(buf);
    /* ...past it they are refused and nothing is queued. */
    buf = calloc(1, 9 << 20);
    assert_non_null(buf);
    assert_int_equal(sfl_conn_write(F.cli, buf, 9 << 20), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "cap"));
    assert_true(sfl_conn_queued(F.cli) <= (nchunks + 2) * chunk);
    /* The kernel takes a few MB, then the queue stays up. */
    uv_timer_init(&F.loop, &t);
    t.data = &waited;
    uv_timer_start(&t, timer_flag, 150, 0);
    run_until(&waited);
    uv_close((uv_handle_t *)&t, NULL);
    assert_int_equal(sfl_conn_congested(F.cli), 1);
    assert_int_equal(F.cli_drain, 0);
    assert_true(sfl_conn_queued(F.cli) > (1 << 20));
    /* Now the peer reads. */
    assert_int_equal(uv_read_start((uv_stream_t *)&raw_peer, raw_alloc, raw_read), 0);
    run_until(&F.cli_drain);
    assert_int_equal(sfl_conn_congested(F.cli), 0);
    assert_true(sfl_conn_queued(F.cli) <= (1 << 19));
    sfl_conn_close(F.cli);
    run_until(&F.done);
    assert_int_equal(F.cli_drain, 1);
    assert_int_equal(raw_bytes, (nchunks + 2) * chunk);
    free(buf);
    run_until(&raw_closed);
    uv_close((uv_handle_t *)&raw_server, NULL);
}

/* A port that was free a moment ago (bound, then closed). */
static int closed_port(void)
{
    struct sockaddr_in a;
    struct sockaddr_storage ss;
    int len = sizeof(ss), port;
    uv_tcp_t probe;

    loopback(&a, 0);
    uv_tcp_init(&F.loop, &probe);
    assert_int_equal(uv_tcp_bind(&probe, (struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_tcp_getsockname(&probe, (struct sockaddr *)&ss, &len), 0);
    port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&probe, NULL);
    uv_run(&F.loop, UV_RUN_NOWAIT);
    return port;
}

/* Connecting to a port nothing listens on fails with a clear error, then
 * on_close, and nothing else. */
static void test_transport_connect_refused(void **state)
{
    int port = closed_port();
    char want[64];

    (void)state;
    connect_here(port);
    run_until(&F.done);
    assert_int_equal(F.cli_connect, 1);
    assert_int_equal(F.cli_connect_status, -ECONNREFUSED);
    snprintf(want, sizeof(want), "connect 127.0.0.1:%d: connection refused", port);
    assert_string_equal(F.cli_detail, want);
    assert_int_equal(F.cli_close, 1);
    assert_int_equal(F.cli_close_status, -ECONNREFUSED);
    assert_int_equal(F.cli_data, 0);
}

/* A listener whose accept queue is full drops SYNs: the connect timer,
 * not the kernel's minutes of retries, ends the attempt. */
static void test_transport_connect_timeout(void **state)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int lfd, fill[4];
    uint64_t t0;

    (void)state;
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    loopback(&a, 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 0), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fill[i] >= 0);
        fcntl(fill[i], F_SETFL, O_NONBLOCK);
        (void)connect(fill[i], (struct sockaddr *)&a, sizeof(a));
    }
    F.copts.connect_timeout_ms = 200;
    uv_update_time(&F.loop);
    t0 = uv_now(&F.loop);
    connect_here(ntohs(a.sin_port));
    run_until(&F.done);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
    if (F.cli_connect_status == 0)
        skip(); /* this kernel accepted beyond the backlog */
    assert_int_equal(F.cli_connect_status, -ETIMEDOUT);
    assert_non_null(strstr(F.cli_detail, "not connected within 200 ms"));
    assert_true(uv_now(&F.loop) - t0 >= 190);
    assert_int_equal(F.cli_close, 1);
}

/* Connections past max_conns are refused and reported to on_reject. */
static void test_transport_max_conns(void **state)
{
    sfl_conn_t *first;

    (void)state;
    F.sopts.max_conns = 1;
    listen_here();
    connect_here(F.port);
    run_until(&F.srv_connect);
    run_until(&F.cli_connect);
    first = F.cli;
    F.cli = NULL;
    /* The second client's callbacks use F.cli: keep the first aside. */
    connect_here(F.port);
    run_until(&F.rejects);
    assert_int_equal(F.reject_status, SFL_ELIMIT);
    assert_non_null(strstr(F.reject_detail, "1 connections open"));
    run_until(&F.done);
    assert_int_equal(F.srv_connect, 1);
    assert_true(F.cli_close_status == 0 || F.cli_close_status == -ECONNRESET);
    F.cli = first;
    F.done = 0;
    sfl_conn_close(first);
    run_until(&F.done);
    run_until(&F.srv_close);
}

/* Bad arguments fail with SFL_EINVAL and no callback; a busy port is
 * reported as such; NULLs are no-ops. */
static void test_transport_bad_args(void **state)
{
    struct sockaddr_in a;
    struct sockaddr bad = {.sa_family = AF_UNIX};
    sfl_conn_cbs_t no_close = {cli_on_connect, NULL, NULL, NULL};
    sfl_listener_t *l2 = (sfl_listener_t *)&a;
    sfl_conn_t *c = (sfl_conn_t *)&a;
    sfl_conn_opts_t o = {0};

    (void)state;
    listen_here();
    loopback(&a, F.port);
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, NULL, &no_close, NULL, &c),
                     SFL_EINVAL);
    assert_null(c);
    c = (sfl_conn_t *)&a;
    assert_int_equal(sfl_conn_connect(&F.loop, &bad, NULL, &cli_cbs, NULL, &c), SFL_EINVAL);
    assert_null(c);
    o.write_max = 1000;
    o.write_high_water = 2000;
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &cli_cbs, NULL, &c),
                     SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "write_high_water"));
    o.write_max = SIZE_MAX; /* above INT_MAX / 2 with a 32-bit size_t too */
    o.write_high_water = 0;
    assert_int_equal(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, &o, &cli_cbs, NULL, &c),
                     SFL_EINVAL);
    assert_int_equal(sfl_listener_new(&F.loop, (struct sockaddr *)&a, NULL, &srv_cbs, NULL, NULL,
                                      &l2),
                     -EADDRINUSE);
    assert_null(l2);
    assert_non_null(strstr(sfl_last_error(), "listen 127.0.0.1:"));
    assert_int_equal(sfl_conn_write(NULL, NULL, 0), SFL_EINVAL);
    assert_string_equal(sfl_role_name(SFL_ROLE_ADMIN), "admin");
    assert_string_equal(sfl_role_name((sfl_role_t)42), "none");
    sfl_conn_close(NULL);
    sfl_conn_abort(NULL);
    sfl_listener_close(NULL);
    sfl_tls_free(NULL);
    uv_run(&F.loop, UV_RUN_NOWAIT);
    assert_int_equal(F.cli_connect + F.cli_close, 0);
}

/* Abort drops the queue at once; on_close still comes exactly once. */
static void test_transport_abort(void **state)
{
    (void)state;
    listen_here();
    connect_here(F.port);
    run_until(&F.srv_connect);
    /* Abort before the client saw its on_connect: it learns -ECANCELED. */
    sfl_conn_abort(F.cli);
    sfl_conn_abort(F.cli);
    sfl_conn_close(F.cli);
    run_until(&F.done);
    if (F.cli_connect_status == 0) {
        assert_int_equal(F.cli_close_status, 0);
    } else {
        assert_int_equal(F.cli_connect_status, -ECANCELED);
        assert_int_equal(F.cli_close_status, -ECANCELED);
    }
    assert_int_equal(F.cli_close, 1);
    run_until(&F.srv_close);
    assert_int_equal(F.srv_close, 1);
}

static sfl_conn_t *fa_conn;
static int fa_closed;

static void fa_on_connect(sfl_conn_t *c, int status)
{
    (void)c;
    assert_int_equal(status, -ECONNREFUSED);
}

static void fa_on_close(sfl_conn_t *c, int status)
{
    (void)c;
    (void)status;
    fa_closed++;
}

/* After an attempt: a connection that was made runs to its on_close. */
static void fa_drain(void)
{
    if (fa_conn)
        run_until(&fa_closed);
    fa_conn = NULL;
    fa_closed = 0;
}

/* Every allocation of connect and listen fails in turn: SFL_ENOMEM, no
 * callback, no leak; and an accept without memory is refused cleanly. */
static void test_transport_alloc_failure(void **state)
{
    static const sfl_conn_cbs_t fa_cbs = {fa_on_connect, NULL, NULL, fa_on_close};
    struct sockaddr_in a;
    sfl_listener_t *l = NULL;

    (void)state;
    loopback(&a, 0);
    FAILALLOC_EACH(sfl_listener_new(&F.loop, (struct sockaddr *)&a, NULL, &srv_cbs, on_reject, &F,
                                    &l),
                   (sfl_listener_close(l), l = NULL, uv_run(&F.loop, UV_RUN_NOWAIT)));
    loopback(&a, closed_port());
    FAILALLOC_EACH(sfl_conn_connect(&F.loop, (struct sockaddr *)&a, NULL, &fa_cbs, NULL, &fa_conn),
                   fa_drain());
    /* The server cannot allocate the accepted connection: refused. */
    listen_here();
    failalloc_install();
    failalloc_arm(1); /* allocation 0: the client's connection; 1: the server's */
    connect_here(F.port);
    run_until(&F.rejects);
    failalloc_uninstall();
    assert_int_equal(F.reject_status, SFL_ENOMEM);
    assert_int_equal(F.srv_connect, 0);
    run_until(&F.done);
    assert_int_equal(F.cli_close, 1);
}

/* The listener's per-source counts (net/srcmap.h) against a plain array:
 * 400,000 random adds and deletes over 12 random keys, at most 8 of them
 * counted at once (a 16-slot table: long probe runs, every deletion's
 * back-shift exercised), counts kept small so keys come and go, and every
 * count and the largest compared after each step. Seeded: the same run
 * every time. */
static void test_transport_srcmap(void **state)
{
    enum { KEYS = 12, LIVE = 8 };
    sfl__srcmap_t m;
    uint32_t ref[KEYS] = {0};
    uint8_t key[KEYS][SFL_SRC_KEY];
    unsigned live = 0, seed = 12345, gone = 0;

    (void)state;
    assert_int_equal(sfl__srcmap_init(&m, LIVE, 7), 0);
    assert_int_equal(m.cap, 16);
    for (int k = 0; k < KEYS; k++)
        for (int i = 0; i < SFL_SRC_KEY; i++) {
            seed = seed * 1103515245u + 12345u;
            key[k][i] = (uint8_t)(seed >> 16);
        }
    assert_null(sfl__srcmap_max(&m));
    for (int i = 0; i < 400000; i++) {
        uint32_t top = 0;
        const sfl__src_slot_t *t;
        int k, up;

        seed = seed * 1103515245u + 12345u;
        k = (int)((seed >> 16) % KEYS);
        up = (seed >> 26 & 3) == 0;
        if (ref[k] == 0 ? live < LIVE : up && ref[k] < 3) {
            live += ref[k] == 0;
            ref[k]++;
            sfl__srcmap_add(&m, key[k]);
        } else if (ref[k] > 0) {
            ref[k]--;
            live -= ref[k] == 0;
            gone += ref[k] == 0;
            sfl__srcmap_del(&m, key[k]);
        }
        for (int j = 0; j < KEYS; j++) {
            assert_int_equal(sfl__srcmap_count(&m, key[j]), ref[j]);
            top = ref[j] > top ? ref[j] : top;
        }
        t = sfl__srcmap_max(&m);
        if (top == 0)
            assert_null(t);
        else
            assert_int_equal(t->n, top);
    }
    assert_true(gone > 10000); /* keys did come and go */
    sfl__srcmap_clear(&m);
    for (int j = 0; j < KEYS; j++)
        assert_int_equal(sfl__srcmap_count(&m, key[j]), 0);
    sfl__srcmap_close(&m);
    sfl__srcmap_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_transport_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_close_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_read_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_idle_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_connect_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_connect_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_max_conns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transport_alloc_failure, setup, teardown),
        cmocka_unit_test(test_transport_srcmap),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

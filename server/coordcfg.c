/* The coordinator's configuration ([coordinator] keys, their checks and
 * help). */
#include "coord.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/core/error.h"
#include "sfl/net/grpcconn.h"

/* ---- configuration ------------------------------------------------------------ */

void coord_config_default(coord_config_t *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->listen, sizeof(c->listen), "%s", SFL_LISTEN_DEFAULT);
    snprintf(c->ca, sizeof(c->ca), "/etc/sfl/pki/ca.crt");
    snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/sfl");
    snprintf(c->metrics_listen, sizeof(c->metrics_listen), "127.0.0.1:9464");
    snprintf(c->admin_listen, sizeof(c->admin_listen), "%s", SFL_ADMIN_LISTEN_DEFAULT);
    snprintf(c->log_level, sizeof(c->log_level), "info");
    c->max_agents = 10000;
    c->max_conns = 4096;
    c->max_handshakes = 512;
    c->max_handshakes_per_ip = 64;
    c->max_message = 64u << 20;
    c->max_streams = 32;
    c->handshake_timeout_ms = 10000;
    c->idle_timeout_ms = 120000;
    c->heartbeat_interval_ms = 10000;
    c->join_retry_ms = 0;
    c->pace_min_ms = 1000;
    c->idle_retry_ms = 1000;
    c->subscribe_hold_ms = 60000;
    c->select_wait_ms = 2000;
    c->tick_ms = 200;
    c->shutdown_timeout_ms = 10000;
    c->keep_checkpoints = 3;
    c->max_job_memory = (uint64_t)4 << 30;
    c->max_live_jobs = 64;
    c->max_buffered = 64u << 20;
    c->max_buffered_total = (uint64_t)1 << 30;
    c->body_timeout_ms = 60000;
    c->relaxed_sync = 0;
}

#define S(k, f, a, h) {k, offsetof(coord_config_t, f), sizeof(((coord_config_t *)0)->f), 0, a, h}
#define N(k, f, a, h) {k, offsetof(coord_config_t, f), 0, 1, a, h}
static const struct {
    const char *key;
    size_t off, cap;
    int number;
    const char *arg, *help;
} keys[] = {
    S("listen", listen, "HOST:PORT",
      "address of the gRPC/TLS listener (default " SFL_LISTEN_DEFAULT ")"),
    S("cert", cert, "FILE", "coordinator certificate, PEM (sfl-pki coordinator); required"),
    S("key", key, "FILE", "its private key, PEM; required"),
    S("ca", ca, "FILE", "federation CA certificate (default /etc/sfl/pki/ca.crt)"),
    S("state_dir", state_dir, "DIR",
      "coordinator.db and the identity key coordinator.key (default /var/lib/sfl)"),
    S("metrics_listen", metrics_listen, "HOST:PORT",
      "Prometheus /metrics and the read-only status page / over plain HTTP (default "
      "127.0.0.1:9464; off = none)"),
    S("admin_listen", admin_listen, "HOST:PORT",
      "a listener of its own for sflctl (mutual TLS, admin certificates only), so a flood of "
      "the agents' listener cannot delay it (default " SFL_ADMIN_LISTEN_DEFAULT "; off = none)"),
    S("log_level", log_level, "LEVEL", "debug, info, warn or error (default info)"),
    N("max_agents", max_agents, "N", "known agents; more are refused at Join (default 10000)"),
    N("max_conns", max_conns, "N", "open connections (default 4096)"),
    N("max_handshakes", max_handshakes, "N",
      "connections in their TLS handshake at once, ~50 KB each; a newcomer evicts the "
      "oldest of the address holding the most, or is refused (default 512)"),
    N("max_handshakes_per_ip", max_handshakes_per_ip, "N",
      "of them, from one source address (IPv6: one /64); more are refused (default 64; "
      "at most max_handshakes)"),
    N("max_message", max_message, "BYTES",
      "largest gRPC message either way, e.g. a task with its model (default 67108864)"),
    N("max_streams", max_streams, "N", "concurrent calls per connection (default 32)"),
    N("max_buffered", max_buffered, "BYTES",
      "request bytes a connection may hold before its calls run; past it the peer gets no "
      "more flow-control window (default 67108864)"),
    N("max_buffered_total", max_buffered_total, "BYTES",
      "the same over all connections (default 1073741824)"),
    N("body_timeout_ms", body_timeout_ms, "MS",
      "a request's body must arrive within this of its headers (default 60000)"),
    N("handshake_timeout_ms", handshake_timeout_ms, "MS", "TLS handshake (default 10000)"),
    N("idle_timeout_ms", idle_timeout_ms, "MS",
      "a connection without traffic or calls is closed (default 120000)"),
    N("heartbeat_interval_ms", heartbeat_interval_ms, "MS",
      "heartbeat period told to agents (default 10000)"),
    N("join_retry_ms", join_retry_ms, "MS", "wait before the first Subscribe (default 0)"),
    N("pace_min_ms", pace_min_ms, "MS", "shortest Wait given to an agent (default 1000)"),
    N("idle_retry_ms", idle_retry_ms, "MS",
      "Wait ending a held Subscribe of an agent no running job can use (default 1000)"),
    N("subscribe_hold_ms", subscribe_hold_ms, "MS",
      "a Subscribe that got nothing this long ends with a Wait (default 60000)"),
    N("select_wait_ms", select_wait_ms, "MS",
      "gather subscribers this long before starting a round with fewer than the full "
      "cohort (default 2000)"),
    N("tick_ms", tick_ms, "MS", "scheduler period: deadlines and heartbeats (default 200)"),
    N("shutdown_timeout_ms", shutdown_timeout_ms, "MS",
      "graceful stop, then connections are dropped (default 10000)"),
    N("keep_checkpoints", keep_checkpoints, "N", "checkpoints kept per job, the last N rounds' (default 3; 0: all)"),
    N("max_job_memory", max_job_memory, "BYTES",
      "model state of all jobs not ended (about 3 x 8 bytes x dimension each); "
      "CreateJob past it is refused (default 4294967296)"),
    N("max_live_jobs", max_live_jobs, "N",
      "jobs not ended (pending, running or paused); CreateJob past it is refused "
      "(default 64)"),
    N("relaxed_sync", relaxed_sync, "0|1",
      "SQLite synchronous=NORMAL: faster, last commits may roll back on power loss"),
};
#undef S
#undef N

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

const coord_config_key_t *coord_config_keys(size_t *n)
{
    static coord_config_key_t out[NKEYS];

    for (size_t i = 0; i < NKEYS; i++)
        out[i] = (coord_config_key_t){keys[i].key, keys[i].arg, keys[i].help};
    *n = NKEYS;
    return out;
}

int coord_config_set(coord_config_t *c, const char *key, const char *v)
{
    for (size_t i = 0; i < NKEYS; i++) {
        char *end;
        unsigned long long x;

        if (strcmp(key, keys[i].key) != 0)
            continue;
        if (!keys[i].number) {
            size_t n = strlen(v);

            if (n >= keys[i].cap)
                return sfl__fail(SFL_EINVAL, "%s: value longer than %zu characters", key,
                                 keys[i].cap - 1);
            memcpy((char *)c + keys[i].off, v, n + 1);
            return 0;
        }
        errno = 0;
        x = strtoull(v, &end, 10);
        if (*v == '-' || *v == '\0' || *end || errno)
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", key, v);
        *(uint64_t *)(void *)((char *)c + keys[i].off) = x;
        return 0;
    }
    return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
}

int coord_config_check(const coord_config_t *c)
{
    struct sockaddr_storage ss;
    coord_log_level_t lvl;
    int rc;

    if (c->cert[0] == '\0' || c->key[0] == '\0' || c->ca[0] == '\0')
        return sfl__fail(SFL_EINVAL, "cert, key and ca are required");
    if (c->state_dir[0] == '\0')
        return sfl__fail(SFL_EINVAL, "state_dir is required");
    if ((rc = coord_addr_parse(c->listen, &ss)) < 0)
        return rc;
    if (c->metrics_listen[0] && strcmp(c->metrics_listen, "off") != 0 &&
        (rc = coord_addr_parse(c->metrics_listen, &ss)) < 0)
        return rc;
    if ((rc = coord_log_level_parse(c->log_level, &lvl)) < 0)
        return rc;
    if (c->max_message < 65536 || c->max_message > (1u << 30))
        return sfl__fail(SFL_EINVAL, "max_message must be in [65536, 2^30]");
    if (c->admin_listen[0] && strcmp(c->admin_listen, "off") != 0 &&
        (rc = coord_addr_parse(c->admin_listen, &ss)) < 0)
        return rc;
    if (c->max_handshakes == 0 || c->max_handshakes > c->max_conns ||
        c->max_handshakes > (1u << 20))
        return sfl__fail(SFL_EINVAL, "max_handshakes must be in [1, max_conns] and <= 2^20");
    /* above max_handshakes it means max_handshakes (the transport caps it),
     * so lowering max_handshakes alone stays a valid configuration */
    if (c->max_handshakes_per_ip == 0)
        return sfl__fail(SFL_EINVAL, "max_handshakes_per_ip must be >= 1");
    if (c->max_agents == 0 || c->max_conns == 0 || c->max_streams == 0 ||
        c->max_streams > 1000)
        return sfl__fail(SFL_EINVAL, "max_agents, max_conns must be >= 1, max_streams 1..1000");
    if (c->handshake_timeout_ms == 0 || c->idle_timeout_ms == 0 || c->tick_ms == 0 ||
        c->heartbeat_interval_ms == 0 || c->heartbeat_interval_ms > UINT32_MAX ||
        c->pace_min_ms == 0 || c->idle_retry_ms == 0 || c->subscribe_hold_ms == 0 ||
        c->shutdown_timeout_ms == 0)
        return sfl__fail(SFL_EINVAL, "timeouts and periods must be positive");
    if (c->idle_timeout_ms >= UINT32_MAX || c->pace_min_ms > UINT32_MAX ||
        c->idle_retry_ms > UINT32_MAX || c->join_retry_ms > UINT32_MAX)
        return sfl__fail(SFL_EINVAL, "timeouts must be below 2^32 ms");
    if (c->max_buffered < c->max_message || c->max_buffered > UINT32_MAX ||
        c->max_buffered_total < c->max_buffered)
        return sfl__fail(SFL_EINVAL, "need max_message <= max_buffered <= max_buffered_total, "
                                     "max_buffered < 2^32");
    if (c->body_timeout_ms == 0 || c->body_timeout_ms >= UINT32_MAX)
        return sfl__fail(SFL_EINVAL, "body_timeout_ms must be in [1, 2^32)");
    if (c->max_job_memory == 0)
        return sfl__fail(SFL_EINVAL, "max_job_memory must be >= 1");
    if (c->max_live_jobs == 0 || c->max_live_jobs > 100000)
        return sfl__fail(SFL_EINVAL, "max_live_jobs must be in [1, 100000]");
    if (c->keep_checkpoints > 1000000)
        return sfl__fail(SFL_EINVAL, "keep_checkpoints must be in [0, 1000000] (0: all)");
    if (c->relaxed_sync > 1)
        return sfl__fail(SFL_EINVAL, "relaxed_sync must be 0 or 1");
    return 0;
}

int coord_addr_parse(const char *s, struct sockaddr_storage *out)
{
    char host[128];
    const char *colon;
    char *end;
    unsigned long port;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');

        if (rb == NULL || rb[1] != ':')
            return sfl__fail(SFL_EINVAL, "address '%s': want [v6addr]:port", s);
        n = (size_t)(rb - s - 1);
        colon = rb + 1;
        if (n >= sizeof(host))
            return sfl__fail(SFL_EINVAL, "address '%s': host too long", s);
        memcpy(host, s + 1, n);
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return sfl__fail(SFL_EINVAL, "address '%s': want host:port", s);
        n = (size_t)(colon - s);
        if (n >= sizeof(host))
            return sfl__fail(SFL_EINVAL, "address '%s': host too long", s);
        memcpy(host, s, n);
    }
    host[n] = '\0';
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end || errno || port > 65535)
        return sfl__fail(SFL_EINVAL, "address '%s': bad port", s);
    if (host[0] == '\0')
        snprintf(host, sizeof(host), "0.0.0.0");
    else if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)out) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)out) == 0)
        return 0;
    return sfl__fail(SFL_EINVAL, "address '%s': '%s' is not an IP address", s, host);
}

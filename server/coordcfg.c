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

#include "sfl/core/cfgkey.h"
#include "sfl/core/error.h"
#include "store/store.h"
#include "sfl/net/grpcconn.h"

/* ---- configuration ------------------------------------------------------------ */

#define S(k, f, def, a, h) SFL_CFG_S(k, coord_config_t, f, def, a, h)
#define N(k, f, def, a, h) SFL_CFG_N(k, coord_config_t, f, def, 0, UINT64_MAX, a, h)
static const sfl_cfg_key_t keys[] = {
    S("listen", listen, SFL_LISTEN_DEFAULT, "HOST:PORT", "address of the gRPC/TLS listener"),
    S("cert", cert, "", "FILE", "coordinator certificate, PEM (sfl-pki coordinator); required"),
    S("key", key, "", "FILE", "its private key, PEM; required"),
    S("ca", ca, "/etc/sfl/pki/ca.crt", "FILE", "federation CA certificate"),
    S("state_dir", state_dir, "/var/lib/sfl", "DIR",
      "coordinator.db and the identity key coordinator.key"),
    S("store", store, "", "SPEC",
      "sqlite:PATH or postgresql:CONNINFO (a libpq conninfo, or a postgresql:// URI as it "
      "stands; a fleet's masters share it); a bare PATH is SQLite; default "
      "sqlite:state_dir/coordinator.db"),
    S("metrics_listen", metrics_listen, "127.0.0.1:9464", "HOST:PORT",
      "Prometheus /metrics and the read-only status page / over plain HTTP; off = none"),
    S("admin_listen", admin_listen, SFL_ADMIN_LISTEN_DEFAULT, "HOST:PORT",
      "a listener of its own for sflctl (mutual TLS, admin certificates only), so a flood of "
      "the agents' listener cannot delay it; off = none"),
    S("log_level", log_level, "info", "LEVEL", "debug, info, warn or error"),
    N("max_agents", max_agents, "10000", "N", "known agents; more are refused at Join"),
    N("max_conns", max_conns, "4096", "N", "open connections"),
    N("max_handshakes", max_handshakes, "512", "N",
      "connections in their TLS handshake at once, ~50 KB each; a newcomer evicts the "
      "oldest of the address holding the most, or is refused"),
    N("max_handshakes_per_ip", max_handshakes_per_ip, "64", "N",
      "of them, from one source address (IPv6: one /64); more are refused; at most "
      "max_handshakes"),
    N("max_message", max_message, "67108864", "BYTES",
      "largest gRPC message either way, e.g. a task with its model"),
    N("max_streams", max_streams, "32", "N", "concurrent calls per connection"),
    N("max_buffered", max_buffered, "67108864", "BYTES",
      "request bytes a connection may hold before its calls run; past it the peer gets no "
      "more flow-control window"),
    N("max_buffered_total", max_buffered_total, "1073741824", "BYTES",
      "the same over all connections"),
    N("body_timeout_ms", body_timeout_ms, "60000", "MS",
      "a request's body must arrive within this of its headers"),
    N("handshake_timeout_ms", handshake_timeout_ms, "10000", "MS", "TLS handshake"),
    N("idle_timeout_ms", idle_timeout_ms, "120000", "MS",
      "a connection without traffic or calls is closed"),
    N("heartbeat_interval_ms", heartbeat_interval_ms, "10000", "MS",
      "heartbeat period told to agents"),
    N("join_retry_ms", join_retry_ms, "0", "MS", "wait before the first Subscribe"),
    N("pace_min_ms", pace_min_ms, "1000", "MS", "shortest Wait given to an agent"),
    N("idle_retry_ms", idle_retry_ms, "1000", "MS",
      "Wait ending a held Subscribe of an agent no running job can use"),
    N("subscribe_hold_ms", subscribe_hold_ms, "60000", "MS",
      "a Subscribe that got nothing this long ends with a Wait (not while a job "
      "that could draw the agent gathers its cohort)"),
    N("select_wait_ms", select_wait_ms, "2000", "MS",
      "gather subscribers this long before starting a round with fewer than the full "
      "cohort"),
    N("tick_ms", tick_ms, "200", "MS", "scheduler period: deadlines and heartbeats"),
    N("shutdown_timeout_ms", shutdown_timeout_ms, "10000", "MS",
      "graceful stop, then connections are dropped"),
    N("keep_checkpoints", keep_checkpoints, "3", "N",
      "checkpoints kept per job, the last N rounds' (0: all)"),
    N("max_job_memory", max_job_memory, "4294967296", "BYTES",
      "model state of all jobs not ended (about 3 x 8 bytes x dimension each); "
      "CreateJob past it is refused"),
    N("max_live_jobs", max_live_jobs, "64", "N",
      "jobs not ended (pending, running or paused); CreateJob past it is refused"),
    N("tls_ticket_lifetime", tls_ticket_lifetime, "43200", "S",
      "TLS 1.3 resumption: an agent rejoins within this of its last connection without "
      "sending its certificate again (revocation is still checked); 0 = off, at most 604800"),
    N("tls_ticket_rotate", tls_ticket_rotate, "21600", "S",
      "a new ticket key (state_dir/tls-ticket.keys) this often; the old ones open tickets "
      "until they expire"),
    N("relaxed_sync", relaxed_sync, "0", "0|1",
      "SQLite synchronous=NORMAL (PostgreSQL: synchronous_commit=off): faster, last commits "
      "may roll back on power loss"),
    S("role", role, COORD_ROLE_SINGLE, "ROLE",
      "single (one process), master (rounds, with a standby master on the same PostgreSQL "
      "store taking over when it dies: docs/operations.md, Failover) or frontend (holds agents "
      "and relays their calls to a master: docs/operations.md, Front-ends)"),
    N("leader_retry_ms", leader_retry_ms, "500", "MS",
      "role master: a standby tries the leader lock this often, the leader checks this often "
      "that it still holds it; each also writes its row of the masters table (sflctl fleet "
      "shows it stale after 3 x this)"),
    S("master", master, "", "HOST:PORT[,...]",
      "frontend: the masters it may reach, tried in turn (a standby does not listen)"),
    N("fold_flush_ms", fold_flush_ms, "200", "MS",
      "frontend, frontend_fold jobs: a partial sum goes to the master this long after the "
      "first update folded into it, at the latest; 1..60000"),
    N("master_silent_ms", master_silent_ms, "30000", "MS",
      "frontend: a master that answered none of the calls relayed to it, nor the keepalive "
      "ping sent every quarter of this, for this long (frozen, cut off) is taken for gone: "
      "its connection is dropped and the next address of master tried; 1000..3600000"),
};
#undef S
#undef N

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void coord_config_default(coord_config_t *c)
{
    memset(c, 0, sizeof(*c));
    sfl_cfg_defaults(keys, NKEYS, c);
}

const sfl_cfg_key_t *coord_config_keys(size_t *n)
{
    *n = NKEYS;
    return keys;
}

int coord_config_set(coord_config_t *c, const char *key, const char *v)
{
    int rc = sfl_cfg_set(keys, NKEYS, c, key, v);

    if (rc == 1)
        return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
    return rc;
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
    if (c->tls_ticket_lifetime > 604800)
        return sfl__fail(SFL_EINVAL, "tls_ticket_lifetime must be <= 604800 (7 days, RFC 8446)");
    if (c->tls_ticket_rotate == 0 || c->tls_ticket_rotate > 604800)
        return sfl__fail(SFL_EINVAL, "tls_ticket_rotate must be in [1, 604800]");
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
    if (strcmp(c->role, COORD_ROLE_FRONTEND) == 0 && c->master[0] == '\0')
        return sfl__fail(SFL_EINVAL, "role frontend needs master = HOST:PORT[,HOST:PORT...]");
    if (c->max_streams > 1000)
        return sfl__fail(SFL_EINVAL, "max_streams must be 1..1000");
    if (c->relaxed_sync > 1)
        return sfl__fail(SFL_EINVAL, "relaxed_sync must be 0 or 1");
    if (strcmp(c->role, COORD_ROLE_SINGLE) != 0 && strcmp(c->role, COORD_ROLE_MASTER) != 0 &&
        strcmp(c->role, COORD_ROLE_FRONTEND) != 0)
        return sfl__fail(SFL_EINVAL, "role must be single, master or frontend, not '%s'",
                         c->role);
    if (c->fold_flush_ms == 0 || c->fold_flush_ms > 60000)
        return sfl__fail(SFL_EINVAL, "fold_flush_ms must be in [1, 60000]");
    if (c->master_silent_ms < 1000 || c->master_silent_ms > 3600000)
        return sfl__fail(SFL_EINVAL, "master_silent_ms must be in [1000, 3600000]");
    if (c->leader_retry_ms == 0 || c->leader_retry_ms > 60000)
        return sfl__fail(SFL_EINVAL, "leader_retry_ms must be in [1, 60000]");
    if (c->store[0]) {
        coord_store_backend_t b;
        const char *loc;

        if ((rc = coord_store_spec_parse(c->store, &b, &loc)) < 0)
            return sfl__wrap(rc, "store");
    }
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

int coord_store_spec(const coord_config_t *c, char *buf, size_t cap)
{
    int n = c->store[0] ? snprintf(buf, cap, "%s", c->store)
                        : snprintf(buf, cap, "sqlite:%s/coordinator.db", c->state_dir);

    if (n < 0 || (size_t)n >= cap)
        return sfl__fail(SFL_ELIMIT, "store: the store spec is longer than %zu bytes", cap - 1);
    return 0;
}

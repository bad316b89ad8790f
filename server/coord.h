/* The coordinator daemon's state and its gRPC services (docs/protocol.md),
 * without main(): sfl-coordinator and the unit tests drive the same code.
 *
 * One coord_t owns, on one libuv loop: the TLS listener (client
 * certificates required; role from the certificate's OU), a gRPC server
 * session per connection, the agents and jobs in memory, the SQLite store
 * (state_dir/coordinator.db), the coordinator's Ed25519 identity
 * (state_dir/coordinator.key, created on first start) and the optional
 * /metrics endpoint. Round state machines (round.h) and jobs (job.h) run on
 * the loop; each round's aggregation end, encode and checkpoint commit run
 * on the libuv thread pool, so the loop keeps answering while it runs.
 *
 * Lifecycle: coord_new (opens and recovers the state, starts listening) ->
 * uv_run -> coord_shutdown (graceful: stops accepting, finishes or abandons
 * open rounds, waits for running aggregations, closes connections) -> its
 * callback -> coord_free. Logs go to stderr, one key=value line per event. */
#ifndef COORD_COORD_H
#define COORD_COORD_H

#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>
#include <uv.h>

#include "sfl/core/cfgkey.h"
#include "sfl/core/error.h"
#include "sfl/core/log.h"
#include "sfl/wire/msg.h"
#include "sfl/core/version.h"

#include "job/jobdef.h"

#define COORD_PATH_MAX 1024
#define COORD_VERSION SFL_VERSION /* sfl/core/version.h */

typedef struct coord coord_t;

/* coordinator.ini section [coordinator]; every key is also a flag. Zero
 * fields of a memset config are NOT defaults: start from
 * coord_config_default. */
typedef struct coord_config {
    char listen[256];           /* host:port (IPv6 as [addr]:port) */
    char cert[COORD_PATH_MAX];  /* coordinator certificate (PEM) */
    char key[COORD_PATH_MAX];   /* its private key (PEM) */
    char ca[COORD_PATH_MAX];    /* federation CA (PEM) */
    char state_dir[COORD_PATH_MAX]; /* store and identity key */
    char store[1024];           /* sqlite:PATH | postgresql:CONNINFO | PATH; "":
                                   sqlite:state_dir/coordinator.db (coord_store_spec) */
    char metrics_listen[256];   /* host:port of /metrics; "" or "off": none */
    char admin_listen[256];     /* host:port of the admin listener; "" or "off": none */
    char log_level[16];         /* debug | info | warn | error */
    uint64_t max_agents;        /* known agents; more are refused at Join */
    uint64_t max_conns;         /* open connections */
    uint64_t max_handshakes;    /* connections in their TLS handshake at once */
    uint64_t max_handshakes_per_ip; /* of them, from one source address */
    uint64_t max_message;       /* bytes of one gRPC message, either way */
    uint64_t max_streams;       /* concurrent calls per connection */
    uint64_t handshake_timeout_ms; /* TLS handshake after accept */
    uint64_t idle_timeout_ms;   /* connection without traffic */
    uint64_t heartbeat_interval_ms; /* told to agents at Join and Heartbeat */
    uint64_t join_retry_ms;     /* JoinReply.retry_after_ms */
    uint64_t pace_min_ms;       /* shortest Wait given to an agent */
    uint64_t idle_retry_ms;     /* Wait ending an idle agent's held Subscribe */
    uint64_t subscribe_hold_ms; /* a Subscribe held this long without work ends with a Wait */
    uint64_t select_wait_ms;    /* gather subscribers this long before a short cohort */
    uint64_t tick_ms;           /* scheduler period (deadlines, heartbeats) */
    uint64_t shutdown_timeout_ms; /* graceful stop, then connections are dropped */
    uint64_t keep_checkpoints;  /* per job */
    uint64_t max_job_memory;    /* bytes of O(dim) state of all live jobs */
    uint64_t max_live_jobs;     /* jobs not ended (pending, running, paused) */
    uint64_t max_buffered;      /* request bytes one connection may hold before its calls run */
    uint64_t max_buffered_total; /* the same over all connections */
    uint64_t body_timeout_ms;   /* a request's body must follow its headers within this */
    uint64_t relaxed_sync;      /* 0 | 1: SQLite synchronous=NORMAL */
    uint64_t tls_ticket_lifetime; /* s a resumption ticket is valid; 0: no tickets */
    uint64_t tls_ticket_rotate;   /* s between new ticket keys (state_dir/tls-ticket.keys) */
    char role[16];              /* single | master | frontend (COORD_ROLE_*) */
    uint64_t leader_retry_ms;   /* master: a standby tries the leader lock this often; the
                                   leader checks it still holds it this often */
    char master[1024];          /* frontend: HOST:PORT[,HOST:PORT...] of the masters */
    uint64_t fold_flush_ms;     /* frontend, fold mode: a partial this long after its
                                   first update at the latest, [1, 60000] */
    uint64_t master_silent_ms;  /* frontend: the master's connection dropped after this
                                   long without an answer to a relayed call, [1000, 3600000] */
} coord_config_t;

/* role = ...: single, today's coordinator; master, the same with leadership
 * (a PostgreSQL store shared with a standby: docs/operations.md, "Failover");
 * frontend, a process that holds agents for the master. */
#define COORD_ROLE_SINGLE "single"
#define COORD_ROLE_MASTER "master"
#define COORD_ROLE_FRONTEND "frontend"
/* sfl-coordinator's exit status when it stopped because another master
 * leads (fenced): a supervisor restarts it, and it comes back as standby. */
#define COORD_EXIT_FENCED 3

/* What a master's program hears about its leadership (leader.h), on the
 * loop: leading once a standby took over and serves (not called when
 * coord_new already serves: coord_serving_now), lost when it stopped
 * serving because another master leads (rc SFL_EFENCED): the program
 * exits with COORD_EXIT_FENCED. Without lost, coord_shutdown runs. */
typedef struct {
    void (*leading)(coord_t *co, void *ud);
    void (*lost)(coord_t *co, int rc, void *ud);
    void *ud;
} coord_leader_cbs_t;

void coord_config_default(coord_config_t *cfg);
/* One key = value of [coordinator]; SFL_EINVAL naming the key otherwise. */
int coord_config_set(coord_config_t *cfg, const char *key, const char *value) SFL_MUST_CHECK;
/* Everything needed to start is present and in range. */
int coord_config_check(const coord_config_t *cfg) SFL_MUST_CHECK;

/* The [coordinator] keys (sfl/core/cfgkey.h: default, argument name, help),
 * for --help and docs. */
const sfl_cfg_key_t *coord_config_keys(size_t *n);

/* "host:port", "[v6]:port" or ":port" (all interfaces) into out; SFL_EINVAL. */
int coord_addr_parse(const char *s, struct sockaddr_storage *out) SFL_MUST_CHECK;


/* Opens the state (identity, store, recovery: every job resumes from its
 * last committed round), listens, and starts metrics and the scheduler.
 * cfg is copied. Returns owned (coord_shutdown, then coord_free). Errors
 * name the file or address in sfl_last_error(). */
int coord_new(uv_loop_t *loop, const coord_config_t *cfg, coord_t **out) SFL_MUST_CHECK;

/* Creates the job unless a job of that name exists (config jobs are
 * created once; later edits of a section do not change a created job).
 * *id (may be NULL) = the new or existing job's id; *created = 1 if new.
 * Waits for the store's writer (its queue, then the record): meant for the
 * start and SIGHUP, not for anything a peer can trigger. */
int coord_add_jobdef(coord_t *c, const coord_jobdef_t *d, uint64_t *id,
                     int *created) SFL_MUST_CHECK;

/* The store the configuration names (its `store` key, else
 * sqlite:state_dir/coordinator.db) into buf; SFL_ELIMIT if it does not fit. */
int coord_store_spec(const coord_config_t *c, char *buf, size_t cap) SFL_MUST_CHECK;

/* The public key of the identity in state_dir/coordinator.key, creating
 * the directory (0700) and the key (0600) if missing, as coord_new would. */
int coord_identity_public(const char *state_dir, uint8_t pk[32]) SFL_MUST_CHECK;

/* Bound ports (after listen ":0"), or -errno / SFL_ENOTFOUND. */
int coord_port(const coord_t *c);
int coord_admin_port(const coord_t *c);
int coord_metrics_port(const coord_t *c);
/* The coordinator's Ed25519 public key (what agents pin). */
const uint8_t *coord_public_key(const coord_t *c);
/* 1 when it serves (role single: from coord_new; a master: while it
 * leads), 0 for a standby or a fenced master. */
int coord_serving_now(const coord_t *c);
/* The leader epoch this master holds; 0 for role single or a standby. */
int64_t coord_leader_epoch(const coord_t *c);
/* Set right after coord_new (cbs copied). */
void coord_set_leader_cbs(coord_t *c, const coord_leader_cbs_t *cbs);

/* Graceful stop (SIGTERM): no new connections or calls; open Subscribes
 * end with UNAVAILABLE; a training attempt that already has its quorum is
 * aggregated and committed, others are recorded failed; running
 * aggregations finish. Connections still open after timeout_ms (0 = the
 * config's) are dropped. done(c, ud) runs once nothing is left on the loop
 * that belongs to c; then call coord_free. Idempotent. */
void coord_shutdown(coord_t *c, uint64_t timeout_ms, void (*done)(coord_t *c, void *ud),
                    void *ud);
/* Frees c after coord_shutdown's callback (closes the store, wipes the
 * identity). NULL does nothing. */
void coord_free(coord_t *c);

/* ---- logging: sfl/core/log.h's lines on stderr ("ts=... level=... event=... k=v ...") ----
 * The coordinator's names for the shared module (libsfl/src/core/log.c), which
 * the agent uses too; values from peers must go through coord_log_quote. */

typedef sfl_log_level_t coord_log_level_t;
#define COORD_LOG_DEBUG SFL_LOG_DEBUG
#define COORD_LOG_INFO SFL_LOG_INFO
#define COORD_LOG_WARN SFL_LOG_WARN
#define COORD_LOG_ERROR SFL_LOG_ERROR
#define coord_log_level_parse sfl_log_level_parse
#define coord_log_set_level sfl_log_set_level
#define coord_log sfl_log
#define coord_log_quote sfl_log_quote

#endif

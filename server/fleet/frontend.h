/* The front-end role of sfl-coordinator (role = frontend; docs/operations.md
 * "Front-ends"): it holds agents - terminates their mutual TLS with its own
 * certificate and serves them the Coordinator service - and relays every
 * call to the round master over one mutual-TLS gRPC connection of its own
 * (proto/sfl/v1/fleet.proto). It keeps nothing about rounds but, in fold
 * mode, the partial sums of the attempts it folds: no store, no identity
 * key, no job. Lifecycle: fe_new (listens, connects) -> uv_run
 * -> fe_shutdown -> its callback -> fe_free. Loop thread only. */
#ifndef COORD_FLEET_FRONTEND_H
#define COORD_FLEET_FRONTEND_H

#include <stdint.h>

#include <sys/socket.h>

#include <uv.h>

#include "sfl/core/error.h"

typedef struct fe fe_t;

/* What the front-end takes from the [coordinator] keys. */
typedef struct fe_config {
    const struct sockaddr *listen; /* the agents' listener */
    const char *cert, *key, *ca; /* its certificate (coordinator role), key, the CA */
    const char *master;   /* HOST:PORT[,HOST:PORT...]: the masters it may reach */
    uint64_t max_conns, max_handshakes, max_handshakes_per_ip;
    uint64_t max_message; /* the master's: agents' messages get 1 KiB less */
    uint64_t max_streams, max_buffered, max_buffered_total;
    uint64_t handshake_timeout_ms, idle_timeout_ms, body_timeout_ms;
    uint64_t fold_flush_ms; /* fold mode: a partial at the latest this long after its first
                               update; 0 = 200 */
    uint64_t master_silent_ms; /* the master taken for gone after this long without an
                                  answer to a relayed call or a keepalive ping (sent
                                  every quarter of it); 0 = 30000 */
} fe_config_t;

/* Parses "HOST:PORT[,HOST:PORT...]" (at most 8, each host:port or
 * [v6]:port): *n addresses. SFL_EINVAL naming the bad one. */
int fe_master_list_check(const char *list, size_t *n) SFL_MUST_CHECK;

/* Masters are resolved on each connection attempt; cfg is copied (its
 * strings too). Returns owned. */
int fe_new(uv_loop_t *loop, const fe_config_t *cfg, fe_t **out) SFL_MUST_CHECK;
/* Bound port of the agents' listener. */
int fe_port(const fe_t *fe);
/* 1 while its connection to a master is open. */
int fe_master_open(const fe_t *fe);
/* What a front-end counts (its /metrics, rendered by the program):
 * agents connected now, 1 while its master connection is open, calls
 * relayed by method (fe_method_names), calls it could not relay (no master
 * connection, the call could not be started, no memory), models fetched and
 * their bytes, models the master answered that were not the task's
 * (model_mismatch), Joins refused here (no or a bad join_proof). */
#define FE_METHODS 6
extern const char *const fe_method_names[FE_METHODS];
typedef struct fe_stats {
    uint64_t agents;
    int master_connected;
    uint64_t relayed[FE_METHODS];
    uint64_t relay_failures;
    uint64_t models_fetched, model_bytes, model_mismatches;
    uint64_t join_refused;
    uint64_t heartbeats_answered; /* idle agents' heartbeats answered here, not relayed */
    uint64_t master_silent; /* master connections dropped: no answer for master_silent_ms */
} fe_stats_t;
void fe_stats(const fe_t *fe, fe_stats_t *out);
/* Stops listening, closes every connection; done(ud) runs once nothing of
 * fe is left on the loop. */
void fe_shutdown(fe_t *fe, void (*done)(void *ud), void *ud);
void fe_free(fe_t *fe);

#endif

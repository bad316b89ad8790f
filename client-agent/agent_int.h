/* Inside the agent: the agent's struct and what agent.c lends the round
 * kinds (kind.h, kind_*.c) and the client state (cstate.c). Not a public
 * header: the agent's own files only. */
#ifndef AGENT_AGENT_INT_H
#define AGENT_AGENT_INT_H

#include <stdarg.h>

#include "agent.h"
#include "kind.h"
#include "sfl/algo/client.h"
#include "sfl/core/log.h"
#include "sfl/core/vec.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/net/transport.h"

#define AGENT_PATH_SUBMIT "/sfl.v1.Coordinator/SubmitUpdate"

/* One task's work on the thread pool, and (a sealed update) its
 * submission. */
struct agent_work {
    agent_ctx_t *a;
    const agent_shape_t *shape; /* the task's kind */
    uv_work_t req;
    sfl_task_t *task;    /* owned */
    uint64_t agent_id;   /* the id the update is sealed for */
    uint64_t started_ms; /* loop time */
    int rc;              /* the work's result */
    char err[256];       /* its detail (sfl_last_error is per thread) */
    int aborted;         /* HeartbeatReply.abort or stop: drop the result */
    uint8_t *msg;        /* a sealed kind's packed Update */
    size_t len;
    uint32_t tries;      /* submissions started */
    agent_cstate_io_t cs; /* the job's client state in (borrowed) and out */
    /* a kind that sends the update otherwise (update mode 2): the update
     * itself, its samples and the training's figures */
    sfl_spvec_t *update;
    uint64_t samples;
    sfl_client_report_t rep;
};

struct agent_ctx {
    uv_loop_t *loop;
    agent_config_t cfg;
    FILE *log;
    agent_state_cb observer;
    void *observer_ud;
    agent_state_t state;
    agent_stats_t stats;

    /* Loaded once by agent_new. */
    sfl_dataset_t *data; /* targets as read (original label values) */
    sfl_dataset_t *eval; /* held-out rows (eval_fraction, eval_file) or NULL */
    sfl_dataset_summary_t summary;
    sfl_identity_t *id;
    int id_created;
    uint8_t coord_pk[SFL_SEAL_PK_BYTES]; /* pinned: tasks verify against it */
    sfl_tags_t conditions;
    /* The job of the last verified task, for job_start / job_end lines. */
    struct {
        uint64_t id; /* 0: none */
        uint64_t tasks, last_round;
    } job;
    char fpr_hex[65]; /* SHA-256 of our certificate, as sfl-pki fingerprint prints it */
    /* The coordinator's addresses (coordinator = A,B,...: a fleet's masters
     * or front-ends): the agent connects to addr[cur] and, whenever it
     * backs off (a failed connect, a lost session), moves on to the next.
     * Each has its TLS client context (verify_host is per context); those
     * with the same verified name share one (tls_owned 0 on the others). */
    struct {
        char host[256], port[16];
        char text[272];   /* host:port as given, for logs and :authority */
        sfl_tls_t *tls;
        int tls_owned;
    } addr[AGENT_MAX_COORDINATORS];
    uint32_t naddr, cur;

    /* The client state of the job trained last (sfl/algo/client.h; cstate.c):
     * the state of the rounds known committed (state_dir/client-state-<job>.bin)
     * and the one a trained round left, pending until a task says whether
     * that round committed (client-state-<job>.pending, its round inside);
     * bytes NULL: none. */
    struct {
        uint64_t job;
        uint8_t *bytes, *pbytes;
        size_t len, plen;
        uint64_t pround;
    } cstate;

    /* Handles, from agent_start to the stopped callback. */
    int started, stopping, closing_handles, handles;
    agent_stopped_cb stopped_cb;
    void *stopped_ud;
    agent_stopped_cb fatal_cb; /* agent_set_fatal */
    void *fatal_ud;
    int failed;                /* the error that stopped the agent by itself */
    uv_timer_t timer;      /* BACKOFF and WAITING delays */
    uv_timer_t hb_timer;   /* heartbeats while joined */
    uv_getaddrinfo_t gai;
    int resolving;

    /* The connection. */
    sfl_grpcconn_t *link;
    int link_opened; /* the current link has opened */
    int nlinks;      /* links not yet closed, detached ones included */
    sfl_grpc_call_t *join_call, *sub_call, *hb_call, *submit_call;
    uint64_t agent_id;
    uint32_t hb_ms;
    uint32_t attempt;          /* reconnects since the last Join */
    uint64_t hb_job, hb_round; /* what the outstanding heartbeat reported */
    uint32_t hb_attempt;

    /* How the Subscribe stream ended, acted on once no task is in hand. */
    int saw_wait;
    uint64_t resub_at; /* loop time of the next Subscribe; 0 = at once */
    int resub_reset;   /* the stream failed: reconnect and rejoin */

    /* Work. */
    agent_work_t *work;   /* on the thread pool */
    agent_work_t *outbox; /* sealed, being submitted or waiting to be */
    sfl_task_t *next;     /* a verified task that arrived while busy */
    const agent_shape_t *next_shape; /* its kind */
    sfl_algo_ws_t ws;     /* touched only by the work in flight */

    /* Each round kind's state, in agent_shapes order (kind.h). */
    void **kind;
};

/* A log line (key=value; sfl/core/log.h). */
void agent__say(const agent_ctx_t *a, sfl_log_level_t level, const char *event,
                const char *fmt, ...) SFL_PRINTF(4, 5);
/* s as a log value (sfl_log_quote): peer text may hold anything. */
const char *agent__quote(char *out, size_t cap, const char *s);
/* A gRPC status by name, or an sfl / -errno code's text, quoted. */
const char *agent__status_name(char *out, size_t cap, int status);
/* Counts an ack's verdict in the stats. */
void agent__count_ack(agent_ctx_t *a, const sfl_ack_t *ack);
/* Refuses t (taken, freed) with why in the log. */
void agent__refuse(agent_ctx_t *a, sfl_task_t *t, const char *why);
/* Queues t (taken) as work of its kind s on the thread pool; on failure t
 * is refused and freed. 0 or < 0. */
int agent__work_start(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t);
void agent__work_free(agent_work_t *w);
/* The task that waits while the agent is busy (one, the newest). */
void agent__work_next(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t);
/* The plaintext update is private to this agent: wiped, then freed. */
void agent__wipe_update(sfl_spvec_t *upd);
/* Drops the link and waits to reconnect (the state it returns). */
agent_state_t agent__backoff(agent_ctx_t *a, const char *what, int status, const char *message);
/* Connected and joined, nothing in hand: the next state. */
agent_state_t agent__settle(agent_ctx_t *a);
/* A sealed kind's work is back: kept in the outbox and submitted. */
agent_state_t agent__sealed_trained(agent_ctx_t *a, void *st, agent_work_t *w,
                                    agent_state_t from);
/* The state of kind s in a. */
void *agent__kind_state(const agent_ctx_t *a, const agent_shape_t *s);

/* agent_new's loading (local.c): the local data, each kind's setup of it,
 * the Join summary, the identity key and the held-out split. */
int agent__local_load(agent_ctx_t *a) SFL_MUST_CHECK;

/* The client state (cstate.c): before training round `round` of job, the
 * job's state in a->cstate; after a round trained, the state it left
 * pending. */
void agent__cstate_load(agent_ctx_t *a, uint64_t job, uint64_t round);
void agent__cstate_save(agent_ctx_t *a, agent_work_t *w);
void agent__cstate_clear(agent_ctx_t *a);

/* The task's client round (kind_update.c): the update (owned; wipe before
 * freeing) and its report; the state the round left into cs->out. */
int agent__train_update(const sfl_task_t *t, const sfl_dataset_t *data,
                        const sfl_dataset_t *eval, uint64_t agent_id, sfl_algo_ws_t *ws,
                        agent_cstate_io_t *cs, sfl_spvec_t **out,
                        sfl_client_report_t *rep) SFL_MUST_CHECK;
/* A sealed kind's task (kind_update.c): trained now, or waiting while busy. */
agent_state_t agent__sealed_task(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t,
                                 agent_state_t from);

/* A standardize job's statistics (kind_stats.c): the rows task t trains
 * and evaluates on (thread pool; *data, *eval borrowed), and, on the loop
 * before its work is queued, the statistics it names (the training kinds'
 * prepare: 0, or < 0 with why set); agent__std_held: they are the ones
 * kept. */
int agent__std_data(agent_ctx_t *a, const sfl_task_t *t, const sfl_dataset_t **data,
                    const sfl_dataset_t **eval) SFL_MUST_CHECK;
int agent__std_for(agent_ctx_t *a, sfl_task_t *t, char *why, size_t cap);
int agent__std_held(const agent_ctx_t *a, const sfl_task_t *t);

#endif

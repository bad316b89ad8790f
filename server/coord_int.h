/* The coordinator's state as its modules share it - the agents, their
 * connections, the jobs (with their round kind's state: round/shape.h),
 * the coordinator - and coord.c's helpers (connections, the gRPC glue).
 * Each module declares its functions in its own header (service/NAME.h,
 * round/driver.h, round/jobs.h, round/coordwrite.h, service/coordmetrics.h, ...).
 * Internal: the programs use coord.h; unit tests of the modules use this. */
#ifndef COORD_COORD_INT_H
#define COORD_COORD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sfl/core/idmap.h"

#include "coord.h"
#include "job/model.h"
#include "http/metrics.h"
#include "job/round.h"
#include "round/saround.h"
#include "round/shape.h"
#include "round/stats.h"
#include "round/vround.h"
#include "store/store.h"
#include "store/writer.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/seal.h"
#include "sfl/net/transport.h"

/* Specs are stored as packed CreateJobRequests; a spec is a few KiB. */
#define SPEC_MAX 65536
/* A secure aggregation job's max_weight when its spec leaves
 * secagg_max_weight unset (docs/configuration.md): members that declared
 * more samples count as this many. */
#define COORD_SA_MAX_WEIGHT 10000.0

typedef struct coord_conn coord_conn_t;
typedef struct coord_agent coord_agent_t;
typedef struct coord_job coord_job_t;
typedef struct coord_attempt_key coord_attempt_key_t;
typedef struct coord_status coord_status_t;

/* An agent's dataset summary as Join gave it, with only its own labels
 * (sfl_dataset_summary_t has room for SFL_MSG_MAX_LABELS: 2 KiB an agent). */
typedef struct {
    uint64_t samples;
    uint32_t dimension;
    uint32_t nlabels;
    double *labels;           /* nlabels, owned (sfl__free); NULL when 0 */
    uint32_t first_column;
    int has_ids;
    uint8_t ids_hash[SFL_MSG_HASH_BYTES];
} coord_ds_t;

struct coord_agent {
    uint64_t id;
    char name[SFL_PEER_CN_MAX + 1]; /* certificate CN */
    uint8_t fpr[32];
    uint8_t pk[SFL_SEAL_PK_BYTES];  /* Ed25519 identity, registered at Join */
    sfl_tags_t caps, conds;
    coord_ds_t ds;
    char version[SFL_MSG_NAME_LEN];
    int joined;               /* the dataset is known from a Join of this process */
    coord_conn_t *conn;             /* bound connection; NULL when offline */
    sfl_grpc_call_t *sub;     /* open Subscribe */
    uint64_t sub_idle_since;  /* ms: subscribed, or last message sent on it */
    sfl_agent_phase_t phase;
    uint64_t hb_job, hb_round;
    uint32_t progress;
    int64_t last_seen_ms;     /* wall clock */
    uint64_t accepted;
    int verifying;            /* an update of it is on the thread pool */
    uint64_t moments_job;     /* the standardize job whose moments went out on
                                 this agent's session (since its Join); 0: none */
};

struct coord_conn {
    coord_t *co;
    sfl_conn_t *c;            /* NULL once the transport closed */
    sfl_grpcconn_t *g;        /* the gRPC server channel over c */
    sfl_peer_t peer;
    int has_peer;
    char addr[64];
    coord_agent_t *agent;           /* bound by Join */
    uint32_t refused;         /* requests refused (logged up to a cap) */
    int doomed;               /* refused too many: closed after this feed */
    coord_conn_t *prev, *next;
    /* Front-ends (service/fleetsvc.c). An agent a front-end holds has a
     * connection here without a transport: c NULL, fe its front-end's
     * connection, fe_id the front-end's number for the agent's connection
     * there, peer the agent certificate the front-end verified. A
     * front-end's connection lists those in kids (kid_prev, kid_next)
     * and finds them by fe_id in kid_map (every relayed call looks its
     * kid up: tens of thousands per front-end). */
    coord_conn_t *fe;
    uint64_t fe_id;
    coord_conn_t *kids, *kid_prev, *kid_next;
    size_t nkids;
    sfl_idmap_t kid_map;
    int64_t fe_last_ms;       /* a front-end's last Fleet call (wall clock) */
    /* Fold mode (service/foldsvc.c): this front-end connection's number
     * (> 0 once it claimed, never reused by this process), which its
     * claims carry. */
    uint64_t fe_serial;
};

/* A member of the open attempt claimed by a front-end (fold mode,
 * service/foldsvc.c), by cohort slot. */
typedef enum {
    COORD_CLAIM_NONE = 0,
    COORD_CLAIM_CLAIMED, /* the front-end folds it: counted when its partial arrives */
    COORD_CLAIM_FOLDED,  /* its partial was added */
    COORD_CLAIM_LOST     /* its partial was refused: never counted in this attempt */
} coord_claim_state_t;

typedef struct coord_claim {
    uint64_t fe;         /* the claiming connection's fe_serial */
    double weight;       /* the samples the agent signed */
    uint8_t state;       /* coord_claim_state_t */
} coord_claim_t;

/* A member a job no longer selects (quarantine.c). */
typedef struct coord_quar {
    uint64_t agent;
    int64_t at_ms;                 /* wall clock */
    char reason[SFL_MSG_TEXT_LEN]; /* printable ASCII, never "" */
} coord_quar_t;

/* An agent a job suspects (suspect.c): count unattributable failures. */
typedef struct coord_suspect {
    uint64_t agent;
    uint32_t count; /* >= 1 */
} coord_suspect_t;

struct coord_job {
    coord_t *co;
    uint64_t id;
    sfl_job_spec_t spec;      /* as created (wire form, stored packed) */
    sfl_job_state_t state;
    char error[SFL_MSG_TEXT_LEN];
    char waiting[SFL_MSG_TEXT_LEN]; /* why SELECTING cannot start the round; "" otherwise */
    int ready;                /* model and rnd initialised */
    /* The kind of its rounds (shape.h: coord_shape_for) and that kind's
     * state, owned by it (zeros when the job takes the shape). */
    const coord_shape_t *shape;
    union {
        coord_sagrp_t sg;     /* coord_shape_secagg */
        coord_vround_t vr;    /* coord_shape_vertical */
        coord_stats_t stats;  /* coord_shape_statistics */
    } kst;
    coord_model_t model;        /* global model and streaming aggregator */
    coord_round_t rnd;        /* the round in progress (committed + 1) */
    uint64_t committed;       /* last committed round */
    uint32_t wire_attempt;    /* current (or next) attempt: store attempt - 1 */
    uint32_t used;            /* attempts of round used_round recorded or posted: */
    uint64_t used_round;      /* never reused, not even across restarts */
    int opened;               /* the attempt's row is written or posted */
    int opening;              /* ... and not durable yet: its task waits */
    uint64_t open_seq;        /* which opening a completion belongs to */
    uint64_t select_since;    /* ms: SELECTING began */
    uint64_t round_since;     /* ms: first attempt of the round opened */
    coord_attempt_key_t *key;       /* the attempt's X25519 key; NULL once closed */
    uint8_t model_hash[SFL_MSG_HASH_BYTES];
    uint8_t *task;            /* packed TaskOrWait of the attempt */
    size_t task_len;
    /* Secure aggregation per front-end group: the signed tasks of groups
     * 1 .. ntasks - 1 (task, task_m, task_lite, task_m_lite above are
     * group 0's; shape->task_of says whose is which). */
    struct coord_gtask *gtasks;
    uint32_t ntasks;
    int64_t deadline_wall;
    uint32_t model_nnz;
    /* The open attempt's round metrics as sums (sfl_metrics_fold: its
     * accepted updates' counts, their weighted figures, bytes_down). */
    sfl_round_metrics_t fold;
    sfl_round_metrics_t work_metrics; /* the fold's means, for the commit */
    sfl_round_metrics_t last;         /* of the last committed round */
    /* aggregation end on the thread pool: while busy the loop leaves
     * model's arrays alone */
    uv_work_t work;
    int busy;
    int work_rc;
    char work_err[SFL_MSG_TEXT_LEN];
    uint8_t *work_buf;        /* the encoded checkpoint, for the writer */
    size_t work_len;
    uint8_t work_hash[32];
    uint64_t work_ns;
    uint32_t work_nnz;
    /* Quarantined members, ascending agent id (quarantine.c). */
    coord_quar_t *quar;
    size_t nquar;
    /* Suspicion for unattributable failures, ascending agent id (suspect.c;
     * in memory only). */
    coord_suspect_t *sus;
    size_t nsus;
    /* Standardize jobs (docs/protocol.md "Statistics round"): moments,
     * once the statistics round (stats.h) stored them, the pooled moments
     * (SFL_MOMENTS_LEN(dimension), owned) with their hash and the rows and
     * agents pooled; task_m the open attempt's task with the moments beside
     * it, for an agent's first task of the job on its session. */
    double *moments;
    uint8_t moments_hash[SFL_MSG_HASH_BYTES];
    uint64_t moments_rows;
    uint32_t moments_agents;
    uint8_t *task_m;
    size_t task_m_len;
    /* The same two without their model, for agents a front-end holds
     * (proto/sfl/v1/fleet.proto, Fleet.Subscribe): the model goes to each
     * front-end once (Fleet.Model), from task[model_off, + model_len).
     * NULL when the task has no model beside its signature. */
    uint8_t *task_lite, *task_m_lite;
    size_t task_lite_len, task_m_lite_len;
    size_t model_off, model_len;
    /* Fold mode (service/foldsvc.c): the open attempt's claims by cohort
     * slot (nclaims of them), for attempt claims_attempt of round
     * claims_round; made on the first claim, dropped with the attempt. */
    coord_claim_t *claims;
    uint32_t nclaims;
    uint64_t claims_round;
    uint32_t claims_attempt;
};

/* One group's signed task in its four forms (coord_job_t.task ...). */
typedef struct coord_gtask {
    uint8_t *task, *task_m, *task_lite, *task_m_lite;
    size_t task_len, task_m_len, task_lite_len, task_m_lite_len;
} coord_gtask_t;

/* Rejection reasons counted for metrics. */
enum {
    RJ_NOT_SELECTED,
    RJ_TRUNCATED,
    RJ_TOO_LARGE,
    RJ_DECRYPT,
    RJ_SIGNATURE,
    RJ_PAYLOAD,
    RJ_ENCODING,
    RJ_BOUNDS, /* the fold's checks: norm, declared samples, finite values */
    RJ_OTHER,
    RJ_COUNT
};
struct coord {
    uv_loop_t *loop;
    coord_config_t cfg;
    /* Refusal log lines of this second, and those not written (log_ok). */
    uint64_t refusal_second;
    uint32_t refusal_lines, refusal_dropped;
    sfl_msg_limits_t lim;
    sfl_identity_t *id;
    coord_store_t *store;     /* the loop's, read-only (query_only) */
    coord_writer_t *writer;   /* every write: the writer thread's connection */
    uint64_t creating_bytes;  /* model state of jobs whose creation is being recorded */
    uint64_t creating_jobs;   /* ... and their number */
    uint32_t joins_pending;   /* Joins waiting for the writer (agentsvc.c) */
    int state_fd;             /* state_dir/coordinator.lock, flock'ed; -1: none */
    sfl_tls_t *tls;
    /* request bytes all connections hold before their calls run */
    sfl_grpc_budget_t *budget;
    /* certificates revoked by the operator, ascending (bsearch) */
    uint8_t (*revoked)[32];
    size_t nrevoked;
    sfl_listener_t *listener;
    sfl_listener_t *admin;    /* admin_listen's, or NULL */
    coord_metrics_srv_t *metrics;
    int metrics_open;
    coord_status_t *status;   /* the status page's rounds, kept between requests */
    uv_timer_t tick, stop_timer;
    /* coord_schedule_soon: the jobs driven once after this batch of I/O */
    uv_check_t sched_check;
    int sched_pending;
    uint64_t dismiss_next;    /* coord_dismiss_idle's next walk (loop ms) */
    uv_timer_t ticket_timer;  /* checks ticket key rotation (tls_ticket_rotate) */
    sfl_ticket_keys_t *tickets; /* state_dir/tls-ticket.keys as installed; NULL: off */
    int handles;              /* our uv handles not yet closed (timers) */
    coord_conn_t *conns;
    size_t nconns;
    uint64_t fe_serials;      /* fold mode: the last coord_conn_t.fe_serial given */
    coord_agent_t **agents;         /* ascending id */
    size_t nagents, cap_agents;
    coord_agent_t **by_name;        /* open addressing on the name, at most half full */
    size_t cap_by_name;       /* 0 or a power of two */
    coord_job_t **jobs;             /* ascending id */
    size_t njobs, cap_jobs;
    int64_t started_ms;
    uint64_t verdicts[5];     /* updates by coord_upd_verdict_t: mode 1's
                                 submissions; mode 2's U3 members and a
                                 vertical round's block holders, accepted
                                 once each when their round aggregates */
    uint64_t stage_verdicts[5]; /* mode 2's stage and vertical step answers */
    uint64_t update_bytes;    /* bytes of accepted updates (the history's
                                 bytes_up: every accepted participation row) */
    uint64_t rejects[RJ_COUNT];
    uint64_t bytes_in, bytes_out, rounds_committed, rounds_failed, tls_refused;
    uint64_t fleet_certs_refused; /* relayed agent certificates refused (fleetsvc.c) */
    uint64_t quarantines;     /* members quarantined since start (quarantine.c) */
    uint64_t conns_closed, trimmed_at; /* connections gone; malloc_trim's mark */
    /* Participation records waiting for their batch (coord_part_flush):
     * one transaction per scheduler tick instead of one per update. */
    struct coord_part_q {
        coord_part_row_t row;
        char reason[SFL_MSG_TEXT_LEN];
    } *partq;
    size_t npartq, cap_partq;
    coord_hist_t agg_hist, round_hist, lag_hist, write_hist;
    uint64_t tick_hr;         /* uv_hrtime of the last scheduler tick */
    double lag_max;           /* the longest the loop was late for a tick, s */
    int stopping, finished;
    /* Leadership (leader.c). */
    int master;               /* role = master */
    int serving;              /* listening and running rounds (single: from coord_new) */
    int fenced;               /* another master leads: stopped serving */
    int64_t epoch;            /* the leader epoch held; 0: role single */
    char holder[128];         /* who we are in the leader row */
    char host[64];            /* ... and in our masters row (with our pid) */
    int master_row_err;       /* writing our masters row failed (logged once) */
    uv_timer_t leader_timer;  /* a standby's tries, a leader's checks */
    int leader_op;            /* a try or check is on the writer */
    int timers;               /* tick, stop, ticket and leader timers initialised */
    int standby_err;          /* the last try failed (logged once) */
    int first_tasks;          /* a master's first tasks since it leads not sent yet */
    uint64_t standby_since;   /* uv_now when the standby began */
    size_t abandoned;         /* rounds recovery marked failed at the start */
    coord_leader_cbs_t lcbs;
    uint32_t verifying;       /* updates on the thread pool */
    void (*done)(coord_t *c, void *ud);
    void *done_ud;
};

struct coord_attempt_key {
    sfl_roundkey_t *rk;
    uint32_t refs;
};

/* ---- shared by the modules ---- */

/* Runs on the loop once a posted write is durable (rc 0) or failed (rc <
 * 0, error says why; -ECANCELED: the coordinator is being freed). */
typedef void (*coord_written_cb)(coord_t *co, uint64_t job, int rc, const char *error,
                                 void *ud);
/* A job creation's result: the job, or NULL with rc and error. */
typedef void (*coord_created_cb)(coord_t *co, coord_job_t *j, int rc, const char *error, void *ud);

/* coord.c: lifecycle, connections, the gRPC glue. */
/* Loads the state and starts serving (listeners, scheduler): from
 * coord_new, or when a standby master takes over (leader.c). */
int coord__serve(coord_t *co) SFL_MUST_CHECK;
/* Peer-supplied or library text into a wire text field: printable ASCII
 * only (the field's rule), truncated to fit. */
void coord_text_copy(char *dst, size_t cap, const char *src);
/* Ends the shutdown once nothing is left running. */
void coord_check_stopped(coord_t *co);
/* Replies with buf (owned, freed here) or, when rc < 0, fails the call. */
void coord_reply_packed(sfl_grpc_call_t *call, int rc, uint8_t *buf, size_t len);
/* Finishes the call with status and a formatted message, logged as refused. */
void coord_fail_call(sfl_grpc_call_t *call, int status, const char *fmt, ...) SFL_PRINTF(3, 4);
void coord_fail_unpack(sfl_grpc_call_t *call, int rc);
/* 0 if the coordinator takes calls, or the call is finished. */
int coord_serving(sfl_grpc_call_t *call, const coord_conn_t *k);
/* 1 if a refusal may be logged now (20 a second process-wide), *dropped
 * the lines left out since. */
int coord_refusal_log_ok(coord_t *co, uint32_t *dropped);
/* The connection is now this agent's (a previous one is let go). */
void coord_bind_agent(coord_conn_t *k, coord_agent_t *a);
/* The agent this connection joined as, or NULL with the call failed. */
coord_agent_t *coord_bound_agent(sfl_grpc_call_t *call, coord_conn_t *k, uint64_t agent_id);

#endif

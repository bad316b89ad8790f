/* The coordinator's state as its modules share it: coord.c (lifecycle,
 * connections, the gRPC glue), registry.c (agents, jobs by id,
 * eligibility), subs.c (Subscribe streams), driver.c (the round driver),
 * jobs.c (job creation and loading), coordwrite.c (writes to the store's
 * writer, writer.h), agentsvc.c (Join, Subscribe), submit.c (SubmitUpdate,
 * Heartbeat), admin.c (the Admin service), coordmetrics.c (/metrics),
 * coordstatus.c (the status page at /).
 * Internal: the programs use coord.h; unit tests of the modules use this. */
#ifndef COORD_COORD_INT_H
#define COORD_COORD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "coord.h"
#include "round/fstat.h"
#include "job/model.h"
#include "http/metrics.h"
#include "round/round.h"
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
};

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
    /* Vertical jobs (vround.c): the agent of each block in the open
     * attempt, and the privacy ledger (vjob.h): iterations released and
     * what they spent (priv 0: the job releases nothing private). */
    uint64_t *vagent;
    uint64_t released;
    sfl_dp_spent_t spent;
    int priv;
    /* Update mode 2 (saround.c): the open attempt's server, its cohort's
     * keys, support S_t (sa_k indices), threshold, quantization, and the
     * stages sent after the first. */
    struct sfl_sa_server *sa;
    sfl_msg_sa_member_t *sa_members;
    uint32_t *sa_support;
    uint32_t sa_k, sa_t, sa_topk, sa_sent, sa_degree;
    uint32_t sa_blamed; /* the server's culprits already quarantined */
    double sa_clip, sa_wmax;
    /* Quarantined members, ascending agent id (quarantine.c). */
    coord_quar_t *quar;
    size_t nquar;
    double *sa_w3;      /* U3's public weights (ascending ids), at stage 3's end */
    uint64_t *sa_u3;    /* U3's ids, ascending, at stage 3's end */
    uint32_t sa_n3;     /* |U3| */
    /* Bytes of the stage answers each member sent in the open attempt and
     * the server accepted (parallel to rnd.members): a U3 member's is its
     * update's bytes_up in the history (coord_saround_record). */
    uint64_t *sa_bytes;
    /* The fold failed on the secure sum itself (out of bounds, canary):
     * some member of U3, nobody named (saround.c sets it, driver.c reads). */
    int work_unattributable;
    /* Suspicion for unattributable failures, ascending agent id (suspect.c;
     * in memory only). */
    coord_suspect_t *sus;
    size_t nsus;
    /* Standardize jobs (fstat.h, docs/protocol.md "Statistics round"):
     * stats, the statistics round (round 0) is the open or next round (no
     * moments stored yet); moments, once stored, the pooled moments
     * (SFL_MOMENTS_LEN(dimension), owned) with their hash and the rows and
     * agents pooled; task_m the open attempt's task with the moments beside
     * it, for an agent's first task of the job on its session. */
    int stats;
    coord_fstat_t fstat;
    double *moments;
    uint8_t moments_hash[SFL_MSG_HASH_BYTES];
    uint64_t stats_rows;
    uint32_t stats_agents;
    double *work_moments;     /* the statistics round's sum, for the commit */
    uint8_t *task_m;
    size_t task_m_len;
};

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
    int handles;              /* our uv handles not yet closed (timers) */
    coord_conn_t *conns;
    size_t nconns;
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

/* registry.c: clocks, agents, jobs by id, eligibility. */
uint64_t coord_now_ms(const coord_t *co);
int64_t coord_wall_ms(void);
coord_agent_t *coord_agent_find(const coord_t *co, uint64_t id);
coord_agent_t *coord_agent_by_name(const coord_t *co, const char *name);
/* Sets a->ds from a Join's summary (SFL_ENOMEM, a->ds unchanged). */
int coord_agent_set_ds(coord_agent_t *a, const sfl_dataset_summary_t *ds) SFL_MUST_CHECK;
/* The agent's summary in the wire's form, in *tmp (returned). */
const sfl_dataset_summary_t *coord_agent_summary(const coord_agent_t *a, sfl_dataset_summary_t *tmp);
/* Frees an agent (its labels too); NULL is a no-op. */
void coord_agent_free(coord_agent_t *a);
/* Inserts keeping agents ascending by id, indexed by a->name, which must
 * be set and stays (SFL_ENOMEM). */
int coord_agent_insert(coord_t *co, coord_agent_t *a) SFL_MUST_CHECK;
/* The operator revoked this certificate (bsearch in co->revoked). */
bool coord_cert_revoked(const coord_t *co, const uint8_t fpr[32]);
coord_job_t *coord_job_find(const coord_t *co, uint64_t id);
/* Cancelled, finished or failed. */
int coord_job_final(const coord_job_t *j);
/* Tags as "a,b,c" (the store's text form) and back. */
void coord_tags_text(const sfl_tags_t *t, char *out, size_t cap);
void coord_tags_parse(const char *s, sfl_tags_t *t);
/* Why the agent cannot take part in the job (job.h's reasons plus
 * NOT_JOINED and LABELS), with a detail; NONE if it can. */
coord_inelig_t coord_ineligible(const coord_job_t *j, const coord_agent_t *a, char *why, size_t cap);
int coord_eligible(const coord_job_t *j, const coord_agent_t *a);
/* The job schedules rounds now (running, not stopping). */
int coord_running(const coord_job_t *j);
/* Selected in another job's open attempt (self excepted). */
int coord_busy_elsewhere(const coord_t *co, const coord_agent_t *a, const coord_job_t *self);
/* Some running job can use the agent. */
int coord_usable(const coord_t *co, const coord_agent_t *a);

/* subs.c: Subscribe streams. */
/* Ends the agent's held Subscribe with status and message. */
void coord_end_sub(coord_agent_t *a, int status, const char *msg);
/* Sends the job's current task on the agent's Subscribe (not while the
 * attempt's opening is being recorded). */
void coord_send_task(coord_t *co, coord_job_t *j, coord_agent_t *a);
/* Ends, with a paced Wait, the streams that got nothing for the hold time. */
void coord_dismiss_idle(coord_t *co);
/* The Subscribe's cancel callback: the agent's stream is gone. */
void coord_sub_cancelled(sfl_grpc_call_t *call, void *ud);

/* driver.c: the round driver. */
/* Runs every job's round machine now. */
void coord_schedule(coord_t *co);
/* The scheduler tick (coord_new starts its timer). */
void coord_on_tick(uv_timer_t *t);
/* Moves the job's round machine on: selection, deadlines, aggregation. */
void coord_job_drive(coord_job_t *j);
/* The round after the last committed one, in SELECTING. */
void coord_reset_round(coord_job_t *j);
/* Sets, logs and records the job's new state; releases its model unless
 * running. after (may be NULL) runs once the record is durable or failed. */
void coord_set_job_state(coord_job_t *j, sfl_job_state_t st, coord_written_cb after, void *ud);
/* Leaves the open attempt uncommitted (pause, cancel, shutdown). */
void coord_abandon(coord_job_t *j, const char *reason);
/* Shutdown: attempts with their quorum aggregated, the others abandoned. */
void coord_drive_wind_down(coord_t *co);
/* Wipes the attempt's key and drops its task. */
void coord_close_attempt(coord_job_t *j);
coord_attempt_key_t *coord_key_hold(coord_attempt_key_t *k);
void coord_key_drop(coord_attempt_key_t *k);
/* Bytes of O(dim) state a job of that dimension holds when loaded. */
uint64_t coord_job_state_bytes(size_t dim);
/* Jobs not ended (pending, running, paused): what max_live_jobs bounds. */
uint64_t coord_live_jobs(const coord_t *co);
/* Sum of it over the jobs not ended that hold it. */
uint64_t coord_live_job_bytes(const coord_t *co);
/* Frees the O(dim) state of a job that is not running (nor aggregating). */
void coord_job_release(coord_job_t *j);
/* The last committed round's metrics (JobStatus's last_*), from the store. */
void coord_load_last_metrics(coord_job_t *j);
/* The global state of the last checkpoint (zero before the first). */
int coord_reload_model(coord_job_t *j) SFL_MUST_CHECK;

/* jobs.c: creation, loading, O(dim) state. */
/* Checks spec and records the job: < 0 if refused now (after not called),
 * 0 when posted, and after then runs with the job (NULL if the store
 * refused it, rc and error saying why). */
int coord_job_create(coord_t *co, const sfl_job_spec_t *spec, coord_created_cb after,
                     void *ud) SFL_MUST_CHECK;
/* A job row from the store at start. */
int coord_job_load(coord_t *co, const coord_job_row_t *row) SFL_MUST_CHECK;
/* Allocates the job's O(dim) state from its last checkpoint. */
int coord_job_model(coord_job_t *j) SFL_MUST_CHECK;
void coord_job_free(coord_job_t *j);
/* Which round metrics the job has (sfl_metric_state). */
void coord_job_metric_kind(const coord_job_t *j, sfl_metric_job_t *k);

/* coordwrite.c: writes posted to the writer, never waited for. */
/* attempt: the wire attempt (the store's minus 1). */
void coord_write_round_state(coord_t *co, uint64_t job, uint64_t round, uint32_t attempt,
                             coord_srow_state_t st, const char *reason);
void coord_write_job_state(coord_t *co, uint64_t job, coord_job_state_t st,
                           coord_written_cb after, void *ud);
void coord_write_job_fail(coord_t *co, uint64_t job, const char *error);
/* Queues an update's participation record (reason may be NULL); written
 * with the others at the next flush, at the latest on the next tick. */
void coord_part_queue(coord_t *co, const coord_part_row_t *row);
/* Posts the queued records as one transaction; a failure is logged. */
void coord_part_flush(coord_t *co);

/* vround.c: vertical rounds (vjob.h). */
/* The cohort of a vertical round from the available agents ids[0..*n):
 * one per block with the same sample ids; extra: why others are left out. */
void coord_vround_pick(coord_job_t *j, uint64_t *ids, uint32_t *n, char *extra, size_t cap);
/* The ledger from the attempts the store recorded (model load). */
int coord_vround_ledger(coord_job_t *j) SFL_MUST_CHECK;
/* At start: the ledger as the last commit recorded it, if it is current. */
void coord_vround_load(coord_job_t *j);
/* The ledger into a commit's metrics. */
void coord_vround_metrics(const coord_job_t *j, sfl_round_metrics_t *m);
/* SFL_ELIMIT with why if round j->rnd.round would pass the privacy budget. */
int coord_vround_budget(coord_job_t *j, char *why, size_t cap) SFL_MUST_CHECK;
/* The attempt opened (after START): blocks of the members, the first
 * iteration, the ledger counts the round's iterations. */
int coord_vround_open(coord_job_t *j) SFL_MUST_CHECK;
/* The open iteration's step to agent a, or to every block holder (NULL). */
void coord_vround_send(coord_job_t *j, coord_agent_t *a);
/* A block holder subscribed again: the step it has not answered. */
void coord_vround_resend(coord_job_t *j, coord_agent_t *a);
void coord_vround_status(const coord_job_t *j, sfl_job_status_t *st);
void coord_h_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* quarantine.c: agent is never selected for job j again without an
 * admin's word; reason is a short key ("bad_share_dealt", from
 * sfl_sa_blame_name). Called on the loop thread by saround.c: from the
 * SubmitSecAgg handler as soon as a stage's message convicts its sender,
 * and from coord_saround_close for what the finish found (after the
 * aggregation, or when the attempt is abandoned; not when the job is
 * freed: coord_saround_free). */
void coord_quarantine(coord_job_t *j, uint64_t agent, const char *reason);

/* saround.c: update mode 2's rounds. */
/* After START: threshold, S_t, the cohort's keys (for the task). */
int coord_saround_prepare(coord_job_t *j) SFL_MUST_CHECK;
void coord_saround_task(const coord_job_t *j, sfl_msg_sa_round_t *out);
/* After the task is built: the protocol's server. */
int coord_saround_start(coord_job_t *j) SFL_MUST_CHECK;
/* Sends the stages the round machine has moved on to. */
void coord_saround_sync(coord_job_t *j);
/* Thread pool: unmask, fold global + the mean change. */
int coord_saround_fold(coord_job_t *j) SFL_MUST_CHECK;
/* Thread pool: a statistics round's sum (a standardize job's round 0 in
 * mode 2, sfl/crypto/savec.h): unmask, m[0..SFL_MOMENTS_LEN(d)) the members'
 * moments summed, *agents |U3|. */
int coord_saround_stats(coord_job_t *j, double *m, uint32_t *agents) SFL_MUST_CHECK;
/* Quarantines the server's culprits not yet reported, then frees it. */
void coord_saround_close(coord_job_t *j);
/* Frees the round's server and state without reporting (the job is being
 * freed: nothing may be written or excused for it any more). */
void coord_saround_free(coord_job_t *j);
/* The members' SecAggAnswer into the server's struct for its stage (the
 * server's verdict), and the boxes of stage 2 for member v in the wire's
 * struct (*out owned, sfl__free; *n of them): the forwarding path, a box
 * copied exactly (sfl/wire/msg.h asserts the sizes agree). */
struct sfl_sa_server;
int coord_saround_take(struct sfl_sa_server *sa, const sfl_msg_sa_answer_t *m) SFL_MUST_CHECK;
int coord_saround_inbox(const struct sfl_sa_server *sa, uint64_t v, sfl_msg_sa_box_t **out,
                        uint32_t *n) SFL_MUST_CHECK;
void coord_h_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* The accepted participation rows of an attempt whose secure sum is about
 * to be folded: one per member of U3 (u3, n3 ids ascending), with the bytes
 * of the stage answers it sent (bytes[i] for members[i], n of them,
 * ascending ids). Fills out (n3 rows, reason NULL) and returns how many;
 * an id of U3 that is not a member is left out. Pure. */
uint32_t coord_saround_part_rows(const coord_member_t *members, const uint64_t *bytes, uint32_t n,
                                 const uint64_t *u3, uint32_t n3, int64_t job, int64_t round,
                                 int64_t attempt, int64_t at_ms, coord_part_row_t *out);
/* Queues those rows for the open attempt and counts them as accepted
 * updates (sfl_updates_total, sfl_update_bytes_total). */
void coord_saround_record(coord_job_t *j);

/* agentsvc.c: Join and Subscribe. */
void coord_h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* submit.c: SubmitUpdate, verified on the thread pool, folded on the loop. */
void coord_h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* Heartbeat: an agent's progress on its task; tells it to abort a closed one. */
void coord_h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* Counts an update's verdict; rj: the RJ_ reason of a rejection. */
void coord_count_verdict(coord_t *co, coord_upd_verdict_t v, int rj);
/* A secure-aggregation stage answer's or a vertical step answer's verdict
 * (sfl_stage_answers_total): messages within an update, not updates. */
void coord_count_stage(coord_t *co, coord_upd_verdict_t v);
/* The wire's ack status of a verdict. */
sfl_ack_status_t coord_ack_of(coord_upd_verdict_t v);
/* Replies with the UpdateAck of verdict vd (why: its reason unless
 * accepted) for (job, round, attempt). */
void coord_reply_ack(sfl_grpc_call_t *call, coord_upd_verdict_t vd, const char *why,
                     uint64_t job, uint64_t round, uint32_t attempt);
/* The RJ_ reason of a failed sfl_seal_open_update. */
int coord_seal_reason(int rc);

/* admin.c: the Admin service (docs/protocol.md), and the agents connected. */
uint32_t coord_connected_agents(const coord_t *co);
void coord_h_status(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_list_agents(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_list_jobs(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_create_job(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_pause(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_resume(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_cancel(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_export(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_history(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
void coord_h_revoke(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* quarantine.c: members a job's rounds named as culprits, never selected
 * for that job again until an operator releases them (docs/security.md).
 * All on the loop thread. */
/* Quarantines agent for job j with reason (a culprit's description, e.g.
 * "round 4 attempt 1: the shares from 9 do not match its commitment";
 * truncated to printable ASCII): effective at once, recorded through the
 * writer, idempotent (a second call keeps the first reason and changes
 * nothing). When the agent is a member of the job's current attempt, the
 * attempt is excused (coord_round_excuse): its failure does not count
 * toward max_attempts. */
void coord_quarantine(coord_job_t *j, uint64_t agent, const char *reason);
/* The agent's quarantine in job j, or NULL. */
const coord_quar_t *coord_quarantined(const coord_job_t *j, uint64_t agent);
/* At start, after the jobs: every quarantine the store holds. */
int coord_quarantine_load(coord_t *co) SFL_MUST_CHECK;
void coord_quarantine_free(coord_job_t *j);
/* "quarantined in job 3: <reason>; ..." for the agent over all jobs ("" if
 * none), and "agent 9: <reason>; ..." for a job ("" if none): ListAgents'
 * and JobStatus's text. */
void coord_quarantine_text(const coord_t *co, uint64_t agent, char *out, size_t cap);
void coord_quarantine_job_text(const coord_job_t *j, char *out, size_t cap);
/* Admin.ReleaseAgent. */
void coord_h_release(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* suspect.c: suspicion for secure sums that fail unattributably
 * (docs/security.md). On the loop thread. */
/* The agent's count in job j (0: not suspect). */
uint32_t coord_suspicion(const coord_job_t *j, uint64_t agent);
/* +1 for each of ids[0..n) (a failed attempt's U3); 0 or SFL_ENOMEM (the
 * counts of those before the failing one are raised). */
int coord_suspect_blame(coord_job_t *j, const uint64_t *ids, uint32_t n) SFL_MUST_CHECK;
/* Back to 0 for each of ids[0..n) (a committed round's U3). */
void coord_suspect_clear(coord_job_t *j, const uint64_t *ids, uint32_t n);
void coord_suspect_free(coord_job_t *j);
/* Agents the job suspects (count >= 1). */
uint32_t coord_suspects(const coord_job_t *j);
/* How many of n candidates with these counts a mode-2 attempt keeps: all
 * when none is suspect or n <= min_keep; else all but half (rounded up) of
 * those at the highest count, and at least min_keep (the smallest cohort
 * the job's quorum and threshold allow). Pure. */
uint32_t coord_suspect_keep(const uint32_t *counts, uint32_t n, uint32_t min_keep);
/* keep of the n candidates ids (ascending) into out (ascending): ordered
 * by (count ascending, a draw from the cohort's stream for (seed, round,
 * attempt)), so the least suspect are kept and ties at the boundary are
 * broken at random. Pure; 0, SFL_EINVAL (keep > n) or SFL_ENOMEM. */
int coord_suspect_pick(uint64_t seed, uint64_t round, uint32_t attempt, const uint64_t *ids,
                       const uint32_t *counts, uint32_t n, uint32_t keep,
                       uint64_t *out) SFL_MUST_CHECK;
/* "agent 9 (2), agent 4 (1)": the suspects among ids[0..n) (ids NULL:
 * all the job's), as many as fit in cap, then "and N more". */
void coord_suspect_text(const coord_job_t *j, const uint64_t *ids, uint32_t n, char *out,
                        size_t cap);

/* coordmetrics.c: the /metrics page (metrics.h's render callback). */
int coord_render_metrics(coord_text_t *t, void *ud);

/* coordstatus.c: the status page at / and /status (metrics.h's render
 * callback; ud is the coordinator), and what it keeps between requests. */
int coord_render_status(coord_text_t *t, void *ud);
void coord_status_free(coord_status_t *s);
/* admin.c: JobStatus of job j, as Status and ListJobs answer it. */
void coord_job_status(const coord_job_t *j, sfl_job_status_t *st);

#endif

/* sfl-agent: the agent's connection state machine (DESIGN.md section 6,
 * docs/protocol.md). Everything runs on one uv loop except training, which
 * goes to the libuv thread pool; main_agent.c holds only flags, the config
 * file and signals.
 *
 *   DISCONNECTED -> CONNECTING -> JOINING -> [WAITING ->] SUBSCRIBED
 *   SUBSCRIBED -> TRAINING -> SUBMITTING -> SUBSCRIBED (or WAITING)
 *   any connected state -> BACKOFF on an error or a disconnect
 *   BACKOFF -> CONNECTING after a jittered exponential delay
 *
 * What a task asks for is its round kind's (kind.h: the plain update, the
 * statistics round, secure aggregation, vertical), each in its own
 * kind_*.c; this machine names none of them.
 *
 * Memory stays O(model + local data): the local data is loaded once, a task
 * holds one model, training one dense copy of it plus the algorithm's
 * workspace, and the update is sealed and packed once. */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "config.h"
#include "sfl/algo/algo.h"
#include "sfl/data/dataset.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/seal.h"
#include "sfl/core/version.h"

#define AGENT_VERSION "sfl-agent " SFL_VERSION /* sfl/core/version.h */
/* The identity key's file name inside state_dir. */
#define AGENT_IDENTITY_FILE "identity.key"
/* Largest client state file read back (state_dir/client-state-<job>.bin). */
#define AGENT_CSTATE_MAX ((size_t)1 << 30)
/* Largest gRPC message the agent sends or accepts (a task carries the
 * model): the sfl_msg default, so any model the wire allows fits. */
#define AGENT_MAX_MESSAGE (64u << 20)
/* A sealed update is submitted at most this many times (the first try and
 * the resubmissions after reconnecting), then dropped. */
#define AGENT_SUBMIT_TRIES 3
/* sfl-agent's exit status after agent_failed: an error that retrying
 * cannot fix (docs/configuration.md; the systemd unit does not restart on
 * it). */
#define AGENT_EXIT_FATAL 3

typedef enum {
    AGENT_DISCONNECTED = 0, /* not started, or stopped */
    AGENT_CONNECTING,       /* resolving the name, TCP connect, TLS handshake */
    AGENT_JOINING,          /* Join sent */
    AGENT_WAITING,          /* joined; Subscribe after the coordinator's delay */
    AGENT_SUBSCRIBED,       /* Subscribe stream open, no task in hand */
    AGENT_TRAINING,         /* joined, a task is training on the thread pool */
    AGENT_SUBMITTING,       /* SubmitUpdate sent */
    AGENT_BACKOFF           /* not connected; reconnect after a delay */
} agent_state_t;

/* "disconnected", "connecting", ... */
const char *agent_state_name(agent_state_t s);

typedef struct agent_ctx agent_ctx_t;

/* Every state change, after it happened (for tests and monitoring). */
typedef void (*agent_state_cb)(agent_ctx_t *a, agent_state_t from, agent_state_t to, void *ud);
/* The agent has stopped: every handle is closed and no work is running.
 * The callback may call agent_free. */
typedef void (*agent_stopped_cb)(agent_ctx_t *a, void *ud);

/* Counters since agent_new. */
typedef struct agent_stats {
    uint64_t connects;      /* connections opened (TLS verified) */
    uint64_t connect_fails; /* resolve, connect or handshake failures */
    uint64_t joins;         /* Join replies accepted */
    uint64_t subscribes;    /* Subscribe calls started */
    uint64_t waits;         /* Wait messages received */
    uint64_t steps;         /* vertical iterations answered */
    uint64_t tasks;         /* tasks received */
    uint64_t tasks_refused; /* bad signature, malformed, or not trainable here */
    uint64_t trained;       /* tasks trained and sealed */
    uint64_t submits;       /* SubmitUpdate calls started */
    uint64_t acks[SFL_ACK_REJECTED + 1]; /* verdicts, by sfl_ack_status_t */
    uint64_t heartbeats;    /* Heartbeat replies */
    uint64_t backoffs;      /* times BACKOFF was entered */
    uint64_t last_backoff_ms; /* the delay drawn the last time */
    uint64_t last_resub_ms;   /* the last delay drawn before a Subscribe */
} agent_stats_t;

/* Loads everything the agent needs before it touches the network: checks
 * cfg (agent_config_check; copied), reads the local data (libsvm:FILE or
 * csv:FILE) once, loads the identity key from state_dir/identity.key or,
 * when there is none, generates one and saves it atomically with mode 0600
 * (state_dir is created 0700 if missing), parses the pinned coordinator key
 * and builds the TLS client context. loop is borrowed (must outlive the
 * agent). Returns owned (agent_free). Errors: SFL_EINVAL (config, a bad
 * condition tag), the readers' codes for the data, sfl_identity_load's for
 * the key (SFL_EINSECURE for a key file others can read), SFL_EIO for TLS
 * files, SFL_ENOMEM; the detail names the culprit. */
int agent_new(uv_loop_t *loop, const agent_config_t *cfg, agent_ctx_t **out) SFL_MUST_CHECK;
/* Logs go to f (key=value lines; default stderr; NULL silences them). */
void agent_set_log(agent_ctx_t *a, FILE *f);
/* cb runs after every state change (NULL removes it). */
void agent_set_observer(agent_ctx_t *a, agent_state_cb cb, void *ud);
/* Starts connecting (the first attempt is immediate). Once only.
 * -EALREADY if started; a -errno from libuv. */
int agent_start(agent_ctx_t *a) SFL_MUST_CHECK;
/* Graceful stop: cancels calls and timers, closes the connection, lets a
 * running training finish (its result is dropped), closes the handles, then
 * calls cb from the loop. Only after agent_start; a second call does
 * nothing. */
void agent_stop(agent_ctx_t *a, agent_stopped_cb cb, void *ud);
/* Errors that retrying cannot fix end the agent instead of a reconnect
 * loop: a certificate refused either way (SFL_ECERT from the transport:
 * unknown CA, host name mismatch, our certificate refused), a server whose
 * certificate is not a coordinator's, Join refused with PERMISSION_DENIED
 * or UNAUTHENTICATED, a coordinator key other than coordinator_pk. The
 * agent logs one `event=fatal` line (status, error, what to fix), stops as
 * agent_stop would and then calls cb (may free a). Everything else is
 * retried with backoff. */
void agent_set_fatal(agent_ctx_t *a, agent_stopped_cb cb, void *ud);
/* 0, or the error that stopped the agent by itself. */
int agent_failed(const agent_ctx_t *a);
/* Frees an agent that was never started or has stopped. NULL is a no-op. */
void agent_free(agent_ctx_t *a);

agent_state_t agent_state(const agent_ctx_t *a);
const agent_stats_t *agent_stats(const agent_ctx_t *a);
/* The id of the last Join reply (0 before the first). */
uint64_t agent_joined_id(const agent_ctx_t *a);
/* The agent's Ed25519 identity public key. */
const uint8_t *agent_identity_pk(const agent_ctx_t *a);
/* What Join reports about the local data (samples: the training rows). */
const sfl_dataset_summary_t *agent_summary(const agent_ctx_t *a);
/* Held-out rows (eval_fraction or eval_file); 0 without. */
uint32_t agent_eval_rows(const agent_ctx_t *a);

/* ---- pieces, public for tests ------------------------------------------- */

/* Test hook, for the hostile member test double (tests/e2e/hostile_tool.c)
 * only: 0 in sfl-agent; when nonzero, the sample count Join declares
 * instead of the training rows. */
extern uint64_t agent_test_join_samples;

/* What an error means to the agent. */
typedef enum {
    AGENT_ERR_RETRY = 0, /* may pass: reconnect with backoff */
    AGENT_ERR_PERMANENT, /* retrying cannot fix it: exit AGENT_EXIT_FATAL */
    AGENT_ERR_REVOKED,   /* the coordinator revoked our certificate: likewise */
    AGENT_ERR_EXPIRED    /* the coordinator's alert: our certificate is outside its
                            validity dates by its clock; permanent when by ours too */
} agent_err_t;

/* Classifies an error during `what` ("connect", "join", a state name):
 * status is a gRPC status (>= 0) or a negative sfl / -errno code, message
 * its words (may be NULL). *fix is set to what to do about it (static
 * text) for every class but AGENT_ERR_RETRY, where it is NULL. Pure. */
agent_err_t agent_error_class(const char *what, int status, const char *message,
                              const char **fix);

/* What Join reports about data: rows, columns and, when the targets take at
 * most SFL_MSG_MAX_LABELS distinct values that are all integers, those
 * values ascending (class labels); otherwise nlabels 0 (regression).
 * SFL_ENOMEM. */
int agent_summarize(const sfl_dataset_t *data, sfl_dataset_summary_t *sum) SFL_MUST_CHECK;

/* 0 if this agent can train task on data: a known algorithm and loss, the
 * sealed update mode, no dictionary, a dimension at least the data's
 * columns, labels for a classification loss, a model of the problem's
 * dimension, parameters the algorithm accepts. SFL_EUNSUP, SFL_EDIM or
 * SFL_EINVAL with a detail otherwise. Cheap: no allocation, no pass over
 * the data. */
int agent_task_check(const sfl_task_t *task, const sfl_dataset_t *data) SFL_MUST_CHECK;

/* A job's client state on its way through a round (sfl/algo/client.h): in, the
 * bytes the agent kept for the job (NULL: none yet); out, the state the
 * round left (owned by the caller, sfl_client_state_bytes_free; NULL for an
 * algorithm without state); note, why in was not used, if it was not. */
typedef struct agent_cstate_io {
    const uint8_t *in;
    size_t in_len;
    uint8_t *out;
    size_t out_len;
    char note[256];
} agent_cstate_io_t;

/* One task's work, as the thread pool runs it: the checks of
 * agent_task_check; libsfl's client round (sfl_client_round: local targets
 * coded by the task's labels, training from the task's model with the
 * job's client state, SFL_ELIMIT beyond max_update_nnz, the local objective
 * and, when eval (the held-out rows, may be NULL) has rows, the task
 * model's accuracy or MSE on them); then agent_seal_payload of
 * UpdatePayload { update in the task's value encoding, samples = local
 * rows, those figures }. cs (may be NULL: a fresh state, not kept) carries
 * the job's client state in and out. Borrows everything; ws grows as
 * needed. Returns the Update bytes owned (sfl_msg_buf_free). */
int agent_train_task(const sfl_task_t *task, const sfl_dataset_t *data,
                     const sfl_dataset_t *eval, const sfl_identity_t *id, uint64_t agent_id,
                     sfl_algo_ws_t *ws, agent_cstate_io_t *cs, uint8_t **msg,
                     size_t *len) SFL_MUST_CHECK;

/* A statistics task's work (docs/protocol.md "Statistics round"): the
 * moments of data (the training rows, after the held-out split) over the
 * task's dimension (sfl_dataset_moments from zeros), sealed as an
 * UpdatePayload { update = the SFL_MOMENTS_LEN(dimension) values, float64,
 * samples = the rows }. Returns the Update bytes owned (sfl_msg_buf_free). */
int agent_stats_task(const sfl_task_t *task, const sfl_dataset_t *data,
                     const sfl_identity_t *id, uint64_t agent_id, uint8_t **msg,
                     size_t *len) SFL_MUST_CHECK;
/* A statistics task in update mode 2: the raw moments of data as above into
 * *out (owned, SFL_MOMENTS_LEN(dimension) entries), for agent_sa_update to
 * encode with the member's weight; SFL_ERANGE when a value of data is
 * beyond the job's standardize_bound (the task's secagg clip,
 * agent_sa_stats_check), SFL_EINVAL for a task that is not one. */
int agent_stats_moments(const sfl_task_t *task, const sfl_dataset_t *data,
                        sfl_spvec_t **out) SFL_MUST_CHECK;
/* The standardised copies of data and eval (eval may be NULL: *seval
 * NULL) that a standardize job's tasks train and evaluate on: widened to
 * the task's dimension, x -> (x - mu) * scale with mu and scale from
 * moments (SFL_MOMENTS_LEN(dimension) values) and eps
 * (sfl_moments_standardizer). Moments that are not a valid summary
 * (count < 1, not finite, a negative sum of squares) give SFL_EINVAL.
 * Returns owned datasets (sfl_dataset_free). */
int agent_standardize(const double *moments, uint32_t dimension, double eps,
                      const sfl_dataset_t *data, const sfl_dataset_t *eval,
                      sfl_dataset_t **sdata, sfl_dataset_t **seval) SFL_MUST_CHECK;

/* Signs pl with id, bound to (round key, job, round, nonce, agent_id,
 * model hash), and packs the Update message (owned), mode SIGNED: payload |
 * sigma, not sealed (docs/security.md, "The seal"). */
int agent_seal_payload(const sfl_task_t *task, const sfl_payload_t *pl,
                       const sfl_identity_t *id, uint64_t agent_id, uint8_t **msg,
                       size_t *len) SFL_MUST_CHECK;

/* The generator of the eval_fraction split: seeded from the first 8 bytes
 * of the agent's identity public key (little-endian) as
 * sfl_rng_seed(seed, 0, 0, SFL_STREAM_PARTITION), then
 * sfl_dataset_split(data, eval_fraction) draws the held-out rows. The same
 * identity and data give the same split on every start. */
void agent_eval_rng(const uint8_t pk[SFL_SEAL_PK_BYTES], sfl_rng_t *r);

/* Reconnect delay before attempt n (0 = the first retry): uniform in
 * [max(min_ms, hi / 2), hi] with hi = min(max_ms, min_ms * 2^(n+1)), so always
 * within [min_ms, max_ms], doubling per attempt and never without jitter
 * unless min_ms == max_ms. r is a uniform 32-bit draw (the agent uses
 * libsodium's randombytes_random). Requires 0 < min_ms <= max_ms. */
uint64_t agent_backoff_delay(uint64_t min_ms, uint64_t max_ms, uint32_t n, uint32_t r);

#endif

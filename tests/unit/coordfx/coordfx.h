/* The coordinator in-process, for the unit suites of its modules: coord.c
 * on a uv loop with real TLS over loopback (certificates by
 * deploy/pki/sfl-pki in a temporary directory) and minimal gRPC clients
 * (sfl/net/grpcconn.h channels). In-test agents join, subscribe, verify the
 * signed task and send fixed sealed updates. Every run is bounded by a
 * watchdog; suites check the store directly after the coordinator stopped.
 * Linked into the suites COORDFX_TESTS in the Makefile lists. */
#ifndef SFL_TEST_COORDFX_H
#define SFL_TEST_COORDFX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord.h"
#include "failalloc.h"
#include "testutil.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/seal.h"
#include "sfl/wire/spcodec.h"
#include "sfl/net/transport.h"
#include "store/store.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */
#define PKI "deploy/pki/sfl-pki"
#define DIM 20

typedef struct cli {
    sfl_grpcconn_t *c;      /* NULL once closed */
    sfl_grpc_session_t *s;  /* its session, NULL once closed */
    int opened, closed, connect_status;
    uint8_t cert_sha256[32];  /* SHA-256 of its own certificate */
    char who[64];             /* its certificate, "agent/a1" (fx_cli_connect) */
} cli_t;

typedef struct {
    int done, status;
    char msg[512];
    uint8_t *resp;
    size_t len;
} res_t;

#define MAX_MSGS 16

typedef struct {
    int done, status, n;
    char msg[256];
    uint8_t *m[MAX_MSGS];
    size_t len[MAX_MSGS];
    sfl_grpc_call_t *call; /* for sfl_grpc_cancel while !done */
} stream_t;

typedef struct {
    cli_t cli;
    sfl_identity_t *id;
    uint64_t agent_id;
    uint8_t coord_pk[32];
    stream_t sub;
    int seen; /* stream messages consumed */
} tagent_t;

typedef struct {
    uv_loop_t loop;
    uv_timer_t watchdog;
    int timed_out;
    char state[64];
    coord_config_t cfg;
    coord_t *co;
    int port, mport, stopped;
    cli_t admin;
    tagent_t ag[3];
} fx_t;

extern fx_t F;

void fx_run_until(const int *flag);
/* The fixture's PKI root: the CA is in ca/, certificates in ca/agent/... */
const char *fx_pki_dir(void);
void fx_cli_connect(cli_t *k, const char *who);
void fx_cli_close(cli_t *k);
/* The unary callback fx_call uses: fills the res_t in ud. */
void fx_on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                 size_t len, void *ud);
void fx_call(cli_t *k, const char *path, uint8_t *req, size_t len, res_t *r);
void fx_stream_clear(stream_t *s);
/* This connection's Join binding (its exported keying material). */
void fx_join_binding(cli_t *k, uint8_t binding[SFL_SEAL_BINDING_BYTES]);
/* A packed JoinRequest presenting id's public key with a join_proof over
 * k's connection signed by signer (NULL: no proof). Free with
 * sfl_msg_buf_free (fx_call does). */
uint8_t *fx_join_req_as(cli_t *k, const sfl_identity_t *id, const sfl_identity_t *signer,
                        uint32_t version, size_t *len);
/* fx_join_req_as(k, id, id, ...): what an honest agent sends. */
uint8_t *fx_join_req(cli_t *k, const sfl_identity_t *id, uint32_t version, size_t *len);
void fx_agent_join(tagent_t *t, const char *who);
void fx_agent_subscribe(tagent_t *t);
/* A Subscribe of t's whose messages go to into (not t->sub). */
void fx_agent_subscribe_into(tagent_t *t, stream_t *into);
sfl_task_t *fx_next_message(tagent_t *t, sfl_wait_t *w);
sfl_task_t *fx_next_task(tagent_t *t);
uint8_t *fx_make_update(const sfl_task_t *t, const sfl_identity_t *signer,
                        const uint8_t *seal_pk, uint64_t agent_id, const double vals[3],
                        uint64_t samples, size_t *len);
sfl_ack_t fx_submit(tagent_t *t, const uint8_t *upd, size_t len);
sfl_heartbeat_reply_t fx_heartbeat(tagent_t *t, uint64_t job, uint64_t round,
                                   uint32_t attempt);
void fx_idle_heartbeat(tagent_t *t);
sfl_status_t *fx_admin_status(cli_t *k);
void fx_job_spec(sfl_job_spec_t *s, uint32_t deadline_ms, uint32_t max_attempts);
sfl_job_status_t fx_create_job(cli_t *k, const sfl_job_spec_t *s, int *status);
sfl_export_t *fx_export_model(cli_t *k, uint64_t job, uint64_t round, int *status);
sfl_job_history_t *fx_job_history(cli_t *k, uint64_t job, uint64_t after, int *status);
const char *fx_http(const char *req, size_t len);
void fx_config(coord_config_t *c);
void fx_start(void);
void fx_stop(void);
int fx_setup(void **state);
int fx_teardown(void **state);
int fx_group_setup(void **state);
int fx_group_teardown(void **state);
/* The status of job id in a Status reply (fails the test if absent). */
sfl_job_status_t *fx_find_job(sfl_status_t *st, uint64_t id);
/* PauseJob, ResumeJob or CancelJob (path) on job id. */
sfl_job_status_t fx_job_call(cli_t *k, const char *path, uint64_t id, int *status);

/* ---- vertical jobs ---- */
/* The summary of a column block: samples rows of the problem's columns
 * [first_column, first_column + width) (1-based), sample ids hashing to
 * ids_hash (has_ids 1). */
void fx_block_summary(sfl_dataset_summary_t *ds, uint64_t samples, uint32_t first_column,
                      uint32_t width, const uint8_t ids_hash[SFL_MSG_HASH_BYTES]);
/* fx_agent_join with the dataset summary ds (borrowed); joining again on
 * the same connection replaces the agent's summary. */
void fx_agent_join_ds(tagent_t *t, const char *who, const sfl_dataset_summary_t *ds);
/* The next stream message by sfl_msg_sub_unpack: returns 't' (*task set,
 * owned, signature verified as fx_next_message does), 'w' (*w filled) or
 * 's' (*step filled, owned: sfl_msg_vstep_clear). */
int fx_next_sub(tagent_t *t, sfl_task_t **task, sfl_wait_t *w, sfl_vstep_t *step);
/* SubmitStep with answer m on t's connection: the gRPC status, and for 0
 * the UpdateAck in *ack; the status message into msg[0..cap). */
int fx_submit_step(tagent_t *t, const sfl_step_answer_t *m, sfl_ack_t *ack, char *msg,
                   size_t cap);
/* Runs the loop for ms milliseconds (the watchdog still applies). */
void fx_run_for(uint64_t ms);

#endif

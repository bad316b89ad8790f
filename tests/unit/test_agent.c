/* sfl-agent's state machine (client-agent/agent.c), driven in-process on a uv
 * loop against a fake coordinator built from the library's own gRPC server
 * session and TLS listener. Certificates come from deploy/pki/sfl-pki (tests
 * run from the repository root) in a temporary directory. Every run is
 * bounded by a watchdog; SFL_TEST_VERBOSE=1 shows the agent's log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "agent.h"
#include "config.h"
#include "failalloc.h"
#include "testutil.h"
#include "sfl/core/alloc.h"
#include "sfl/algo/client.h"
#include "sfl/data/csr.h"
#include "sfl/net/grpc.h"
#include "sfl/data/libsvm.h"
#include "sfl/model/loss.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/seal.h"
#include "sfl/net/transport.h"

#define WATCHDOG_MS 60000 /* a failure detector: 10x and more what a loaded machine needs */
#define PKI "deploy/pki/sfl-pki"
#define AGENT_ID 7
#define NROWS 24
#define NCOLS 8
#define MAX_CONNS 8
#define MAX_SEEN 256

static char dir[64];
static char reg_path[128]; /* regression data: non-integer targets */
static char cls_path[128]; /* classification data: labels -1 / +1 */

/* ---- fixture -------------------------------------------------------------- */

typedef enum {
    SUB_HOLD,    /* keep the stream open, send nothing */
    SUB_TASK,    /* send the current task, keep the stream open */
    SUB_BADTASK, /* send the task signed by the wrong key, keep the stream open */
    SUB_STDTASK, /* send the task with S.moments beside it, keep the stream open */
    SUB_WAIT,    /* Wait { wait_ms }, then end the stream OK */
    SUB_CLOSE    /* end the call UNAVAILABLE and drop the connection */
} sub_action_t;

typedef struct fconn {
    int used, closing;
    sfl_conn_t *c;
    sfl_grpc_session_t *s;
} fconn_t;

static struct {
    uv_loop_t loop;
    uv_timer_t watchdog, sleeper;
    uv_idle_t flush;
    int timed_out, slept;
    /* the fake coordinator */
    sfl_tls_t *stls;
    sfl_listener_t *l;
    int port;
    fconn_t conns[MAX_CONNS];
    sfl_roundkey_t *rk;
    sfl_task_t task; /* the current task; model borrowed from `model` */
    sfl_spvec_t *model;
    uint8_t *task_msg, *bad_msg, *std_msg;
    size_t task_len, bad_len, std_len;
    double *moments; /* a standardize task's (SFL_MOMENTS_LEN(NCOLS)), or NULL */
    /* script */
    sub_action_t script[16];
    int nscript;
    uint32_t wait_ms, join_retry_ms;
    int join_wrong_key, submit_close;
    /* observed on the coordinator */
    int accepted, closed, joins, subscribes, submits, heartbeats;
    uint64_t conn_at[32], join_at[32], sub_at[32], sub_delay[32];
    sfl_join_req_t join;
    int join_proof_ok; /* the last Join's proof verified over its connection */
    sfl_heartbeat_req_t hb;
    sfl_grpc_call_t *held;
    sfl_payload_t *payload; /* the last update, opened and decoded */
    int open_rc;
    uint8_t *sealed[4]; /* sealed bytes of the first submits */
    size_t sealed_len[4];
    /* the agent */
    agent_ctx_t *agent;
    agent_state_t seen[MAX_SEEN];
    uint64_t backoff_ms[MAX_SEEN];
    int nseen, nbackoff, stopped;
    FILE *log;
} S;

static sfl_identity_t *coord_id, *rogue_id, *agent_key;

/* NROWS x NCOLS, about three quarters nonzero, every column used. */
static void write_data(const char *path, int classification)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    for (int i = 0; i < NROWS; i++) {
        double y = classification ? (i % 3 == 0 ? -1.0 : 1.0) : 0.37 * i - 1.3;

        fprintf(f, "%.17g", y);
        for (int j = 0; j < NCOLS; j++)
            if ((i + j) % 4 != 0)
                fprintf(f, " %d:%.17g", j + 1, sin(7.0 * i + 3.0 * j + 1.0));
        fputc('\n', f);
    }
    assert_int_equal(fclose(f), 0);
}

static int group_setup(void **state)
{
    (void)state;
    if (access(PKI, R_OK) != 0) {
        fprintf(stderr, "test_agent: %s not found: run from the repository root\n", PKI);
        return -1;
    }
    snprintf(dir, sizeof(dir), "/tmp/sfl-agent-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    test_sh("sh %s init %s/ca >/dev/null", PKI, dir);
    test_sh("sh %s coordinator %s/ca coord >/dev/null", PKI, dir);
    test_sh("sh %s agent %s/ca agent-7 >/dev/null", PKI, dir);
    snprintf(reg_path, sizeof(reg_path), "%s/reg.svm", dir);
    snprintf(cls_path, sizeof(cls_path), "%s/cls.svm", dir);
    write_data(reg_path, 0);
    write_data(cls_path, 1);
    if (sfl_identity_generate(&coord_id) < 0 || sfl_identity_generate(&rogue_id) < 0 ||
        sfl_identity_generate(&agent_key) < 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sfl_identity_free(coord_id);
    sfl_identity_free(rogue_id);
    sfl_identity_free(agent_key);
    if (dir[0] && strncmp(dir, "/tmp/sfl-agent-", 15) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    S.timed_out = 1;
    uv_stop(&S.loop);
}

/* Runs the loop until cond holds; the watchdog bounds it. */
#define RUN_UNTIL(cond)                                                                  \
    do {                                                                                 \
        while (!(cond)) {                                                                \
            if (S.timed_out)                                                             \
                fail_msg("watchdog: '%s' not reached within %d ms", #cond, WATCHDOG_MS); \
            uv_run(&S.loop, UV_RUN_ONCE);                                                \
        }                                                                                \
    } while (0)

static void on_sleeper(uv_timer_t *t)
{
    (void)t;
    S.slept = 1;
}

static void run_for(uint64_t ms)
{
    S.slept = 0;
    uv_timer_start(&S.sleeper, on_sleeper, ms, 0);
    RUN_UNTIL(S.slept);
}

/* ---- the fake coordinator ---------------------------------------------------- */

static void srv_pump(fconn_t *f)
{
    const uint8_t *p;
    size_t n;
    uint64_t next;

    if (f->closing || f->s == NULL)
        return;
    (void)sfl_grpc_session_tick(f->s, &next);
    for (;;) {
        assert_int_equal(sfl_grpc_session_pending(f->s, &p, &n), 0);
        if (n == 0)
            break;
        if (sfl_conn_write(f->c, p, n) != 0) {
            f->closing = 1;
            sfl_conn_abort(f->c);
            return;
        }
        sfl_grpc_session_consumed(f->s, n);
    }
    if (sfl_grpc_session_done(f->s)) {
        f->closing = 1;
        sfl_conn_close(f->c);
    }
}

static void srv_pump_all(void)
{
    for (int i = 0; i < MAX_CONNS; i++)
        if (S.conns[i].used)
            srv_pump(&S.conns[i]);
}

static void on_srv_flush(uv_idle_t *h)
{
    uv_idle_stop(h);
    srv_pump_all();
}

static void srv_wake(sfl_grpc_session_t *s, void *ud)
{
    (void)s;
    (void)ud;
    uv_idle_start(&S.flush, on_srv_flush);
}

static void drop_conn(fconn_t *f)
{
    if (!f->closing) {
        f->closing = 1;
        sfl_conn_abort(f->c);
    }
}

/* rc is the pack's result, made before the call (argument order is
 * unspecified, so never pack inside the argument list). */
static void reply_msg(sfl_grpc_call_t *call, int rc, uint8_t *buf, size_t len)
{
    if (rc != 0)
        fail_msg("coordinator: pack: %s", sfl_last_error());
    rc = sfl_grpc_reply(call, buf, len);
    if (rc != 0)
        fail_msg("coordinator: reply: %s", sfl_last_error());
    sfl_msg_buf_free(buf);
}

static void h_join(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    sfl_join_reply_t r = {.agent_id = AGENT_ID, .heartbeat_interval_ms = 1000,
                          .protocol_version = SFL_MSG_PROTOCOL_VERSION};
    uint8_t *buf;
    size_t n;
    int rc;

    fconn_t *f = ud;
    uint8_t binding[SFL_SEAL_BINDING_BYTES];

    S.join_at[S.joins++ % 32] = uv_now(&S.loop);
    if (sfl_msg_join_req_unpack(req, len, NULL, &S.join) < 0) {
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_INVALID_ARGUMENT, sfl_last_error());
        return;
    }
    /* As the coordinator: the proof of possession over this connection. */
    S.join_proof_ok =
        S.join.has_proof &&
        sfl_conn_export_keying_material(f->c, SFL_SEAL_JOIN_LABEL, binding, sizeof(binding)) == 0 &&
        sfl_seal_verify_join(S.join.identity_key, binding, S.join.proof) == 0;
    r.retry_after_ms = S.join_retry_ms;
    memcpy(r.coordinator_key, (S.join_wrong_key ? rogue_id : coord_id)->pk, 32);
    rc = sfl_msg_join_reply_pack(&r, &buf, &n);
    reply_msg(call, rc, buf, n);
}

static void on_held_cancel(sfl_grpc_call_t *call, void *ud)
{
    (void)ud;
    if (call == S.held)
        S.held = NULL;
    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
}

static void hold(sfl_grpc_call_t *call)
{
    S.held = call;
    sfl_grpc_call_on_cancel(call, on_held_cancel, NULL);
}

static void h_subscribe(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    fconn_t *f = ud;
    sfl_subscribe_req_t r;
    int k = S.subscribes++;
    sub_action_t act = k < S.nscript ? S.script[k] : SUB_HOLD;

    S.sub_at[k % 32] = uv_now(&S.loop);
    S.sub_delay[k % 32] = S.agent ? agent_stats(S.agent)->last_resub_ms : 0;
    assert_int_equal(sfl_msg_subscribe_req_unpack(req, len, NULL, &r), 0);
    assert_int_equal(r.agent_id, AGENT_ID);
    switch (act) {
    case SUB_HOLD:
        hold(call);
        break;
    case SUB_TASK:
        assert_int_equal(sfl_grpc_send(call, S.task_msg, S.task_len), 0);
        hold(call);
        break;
    case SUB_BADTASK:
        assert_int_equal(sfl_grpc_send(call, S.bad_msg, S.bad_len), 0);
        hold(call);
        break;
    case SUB_STDTASK:
        assert_int_equal(sfl_grpc_send(call, S.std_msg, S.std_len), 0);
        hold(call);
        break;
    case SUB_WAIT: {
        sfl_wait_t w = {.retry_after_ms = S.wait_ms};
        uint8_t *buf;
        size_t n;

        snprintf(w.reason, sizeof(w.reason), "not selected");
        assert_int_equal(sfl_msg_wait_pack(&w, &buf, &n), 0);
        assert_int_equal(sfl_grpc_send(call, buf, n), 0);
        sfl_msg_buf_free(buf);
        assert_int_equal(sfl_grpc_finish(call, SFL_GRPC_STATUS_OK, NULL), 0);
        break;
    }
    case SUB_CLOSE:
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE, "going away");
        drop_conn(f);
        break;
    }
}

/* Opens the update as the coordinator would: with its own round key and
 * context, never with anything from the message. */
static void h_submit(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    fconn_t *f = ud;
    sfl_update_t *u = NULL;
    sfl_upd_ctx_t expect;
    sfl_ack_t ack = {.job_id = S.task.job_id, .round = S.task.round,
                     .attempt = S.task.attempt};
    uint8_t *buf;
    size_t pll = 0, n;
    int k = S.submits++, rc;

    (void)ud;
    if (sfl_msg_update_unpack(req, len, NULL, &u) < 0) {
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_INVALID_ARGUMENT, sfl_last_error());
        return;
    }
    if (k < 4) {
        S.sealed[k] = malloc(u->sealed_len);
        assert_non_null(S.sealed[k]);
        memcpy(S.sealed[k], u->sealed, u->sealed_len);
        S.sealed_len[k] = u->sealed_len;
    }
    if (S.submit_close > 0) {
        S.submit_close--;
        sfl_msg_update_free(u);
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_UNAVAILABLE, "overloaded");
        drop_conn(f);
        return;
    }
    assert_int_equal(u->agent_id, AGENT_ID);
    assert_int_equal(u->mode, SFL_UPDATE_MODE_SIGNED);
    memcpy(expect.round_pk, S.rk->pk, 32);
    expect.job = S.task.job_id;
    expect.round = S.task.round;
    memcpy(expect.nonce, S.task.round_nonce, 32);
    expect.agent_id = AGENT_ID;
    memcpy(expect.model_hash, S.task.model_hash, 32);
    S.open_rc = sfl_seal_check_update(S.join.identity_key, &expect, u->sealed, u->sealed_len,
                                      1 << 20, NULL, &pll);
    if (S.open_rc == 0) {
        sfl_msg_payload_free(S.payload);
        S.payload = NULL;
        assert_int_equal(sfl_msg_payload_unpack(u->sealed, pll, NULL, S.task.model->dim,
                                                &S.payload),
                         0);
        ack.status = SFL_ACK_ACCEPTED;
    } else {
        ack.status = SFL_ACK_REJECTED;
        snprintf(ack.reason, sizeof(ack.reason), "%s", sfl_strerror(S.open_rc));
    }
    sfl_msg_update_free(u);
    rc = sfl_msg_ack_pack(&ack, &buf, &n);
    reply_msg(call, rc, buf, n);
}

static void h_heartbeat(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    sfl_heartbeat_reply_t r = {.interval_ms = 1000};
    uint8_t *buf;
    size_t n;
    int rc;

    (void)ud;
    assert_int_equal(sfl_msg_heartbeat_req_unpack(req, len, NULL, &S.hb), 0);
    S.heartbeats++;
    rc = sfl_msg_heartbeat_reply_pack(&r, &buf, &n);
    reply_msg(call, rc, buf, n);
}

static const sfl_grpc_method_t methods[] = {
    {"/sfl.v1.Coordinator/Join", SFL_GRPC_KIND_UNARY, h_join, 0, NULL, 0},
    {"/sfl.v1.Coordinator/Subscribe", SFL_GRPC_KIND_SERVER_STREAM, h_subscribe, 0, NULL, 0},
    {"/sfl.v1.Coordinator/SubmitUpdate", SFL_GRPC_KIND_UNARY, h_submit, 0, NULL, 0},
    {"/sfl.v1.Coordinator/Heartbeat", SFL_GRPC_KIND_UNARY, h_heartbeat, 0, NULL, 0},
};

static void srv_on_connect(sfl_conn_t *c, int status)
{
    sfl_grpc_config_t cfg = {.max_message = 1 << 22};
    fconn_t *f;
    int i = 0;

    assert_int_equal(status, 0);
    while (i < MAX_CONNS && S.conns[i].used)
        i++;
    assert_true(i < MAX_CONNS);
    f = &S.conns[i];
    memset(f, 0, sizeof(*f));
    f->used = 1;
    f->c = c;
    sfl_conn_set_data(c, f);
    S.conn_at[S.accepted++ % 32] = uv_now(&S.loop);
    assert_int_equal(sfl_grpc_server_new(&cfg, methods, 4, f, &f->s), 0);
    sfl_grpc_session_set_wake(f->s, srv_wake, f);
    srv_pump(f);
}

static void srv_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    fconn_t *f = sfl_conn_data(c);

    if (f->closing)
        return;
    if (sfl_grpc_session_feed(f->s, buf, len) < 0)
        fprintf(stderr, "test_agent: coordinator: %s\n", sfl_last_error());
    srv_pump(f);
}

static void srv_on_close(sfl_conn_t *c, int status)
{
    fconn_t *f = sfl_conn_data(c);

    (void)status;
    if (f == NULL || f == (void *)&S) /* closed before it opened */
        return;
    sfl_grpc_session_free(f->s); /* outside its callbacks: the reaper's place */
    memset(f, 0, sizeof(*f));
    S.closed++;
}

static const sfl_conn_cbs_t srv_cbs = {srv_on_connect, srv_on_data, NULL, srv_on_close};

static void listen_on(int port)
{
    struct sockaddr_in a;
    sfl_conn_opts_t o = {.tls = S.stls};

    assert_int_equal(uv_ip4_addr("127.0.0.1", port, &a), 0);
    assert_int_equal(sfl_listener_new(&S.loop, (struct sockaddr *)&a, &o, &srv_cbs, NULL, &S,
                                      &S.l),
                     0);
    S.port = sfl_listener_port(S.l);
}

/* The coordinator goes away: no listener, every connection dropped. */
static void coordinator_kill(void)
{
    sfl_listener_close(S.l);
    S.l = NULL;
    S.held = NULL;
    for (int i = 0; i < MAX_CONNS; i++)
        if (S.conns[i].used)
            drop_conn(&S.conns[i]);
}

/* ---- tasks ------------------------------------------------------------------ */

/* A task of the current round key: fediterht by default, loss and labels as
 * given; *signed_bytes (optional) receives the bytes the coordinator signs. */
static void fill_task(sfl_task_t *t, const char *loss, uint32_t nlabels, const double *labels,
                      uint64_t round)
{
    memset(t, 0, sizeof(*t));
    t->job_id = 1;
    t->round = round;
    t->attempt = 0;
    snprintf(t->algorithm, sizeof(t->algorithm), "fediterht");
    memset(&t->params, 0, sizeof(t->params));
    assert_int_equal(sfl_param_list_set(&t->params, "tau", 3), 0);
    assert_int_equal(sfl_param_list_set(&t->params, "lr", 0.05), 0);
    assert_int_equal(sfl_param_list_set(&t->params, "local_steps", 5), 0);
    assert_int_equal(sfl_param_list_set(&t->params, "batch", 4), 0);
    snprintf(t->loss, sizeof(t->loss), "%s", loss);
    t->dimension = NCOLS;
    t->nlabels = nlabels;
    if (nlabels)
        memcpy(t->labels, labels, nlabels * sizeof(double));
    t->seed = 42;
    t->value_encoding = SFL_ENC_F64;
    t->update_mode = SFL_UPDATE_MODE_SEALED;
    t->model = S.model;
    t->model_encoding = SFL_ENC_F64;
    t->deadline_ms = 4102444800000; /* 2100 */
    randombytes_buf(t->round_nonce, sizeof(t->round_nonce));
    memcpy(t->round_key, S.rk->pk, 32);
}

/* SignedTask messages for S.task: signed by the coordinator and by a rogue. */
static void sign_task(void)
{
    uint8_t *tb, sig[64];
    size_t tl;

    sfl_msg_buf_free(S.task_msg);
    sfl_msg_buf_free(S.bad_msg);
    assert_int_equal(sfl_msg_task_sign_bytes(&S.task, &tb, &tl), 0);
    assert_int_equal(sfl_seal_sign_detached(coord_id, SFL_MSG_TASK_CONTEXT, tb, tl, sig), 0);
    assert_int_equal(sfl_msg_task_pack(&S.task, tb, tl, sig, &S.task_msg, &S.task_len), 0);
    if (S.moments != NULL) {
        sfl_msg_buf_free(S.std_msg);
        assert_int_equal(sfl_msg_task_pack_moments(&S.task, tb, tl, sig, S.moments,
                                                   SFL_MOMENTS_LEN(NCOLS), &S.std_msg,
                                                   &S.std_len), 0);
    }
    assert_int_equal(sfl_seal_sign_detached(rogue_id, SFL_MSG_TASK_CONTEXT, tb, tl, sig), 0);
    assert_int_equal(sfl_msg_task_pack(&S.task, tb, tl, sig, &S.bad_msg, &S.bad_len), 0);
    sfl_msg_buf_free(tb);
}

/* A fresh round key and regression task for `round`. */
static void new_round(uint64_t round)
{
    sfl_roundkey_free(S.rk);
    assert_int_equal(sfl_roundkey_new(&S.rk), 0);
    fill_task(&S.task, "lsq", 0, NULL, round);
    sign_task();
}

/* What sfl_algo_client_round computes for task t on the data at path, as
 * a simulation would (labels coded by sfl_dataset_encode_labels). */
static sfl_spvec_t *reference(const char *path, const sfl_task_t *t, uint64_t client)
{
    const sfl_loss_t *loss = sfl_loss_find(t->loss);
    sfl_dataset_t *ds;
    sfl_problem_t prob;
    sfl_algo_ws_t ws;
    sfl_algo_params_t ap;
    sfl_spvec_t *u;
    double *global;

    assert_int_equal(sfl_libsvm_read(path, 0, NULL, &ds), 0);
    assert_int_equal(sfl_dataset_set_ncols(ds, t->dimension), 0);
    if (t->has_moments) {
        /* a standardize job's task: the rows as the pooled statistics make them */
        double mu[NCOLS], sc[NCOLS];

        assert_int_equal(t->dimension, NCOLS);
        assert_non_null(S.moments);
        assert_int_equal(sfl_moments_standardizer(S.moments, NCOLS, t->standardize_eps, mu, sc),
                         0);
        assert_int_equal(sfl_dataset_standardize(ds, NCOLS, mu, sc), 0);
    }
    if (loss->classification)
        assert_int_equal(sfl_dataset_encode_labels(ds, SFL_LOSS_MAX_CLASSES), 0);
    assert_int_equal(sfl_problem_init(&prob, loss, t->dimension, ds->nclasses), 0);
    global = calloc(prob.dim, sizeof(double));
    assert_non_null(global);
    sfl_spvec_scatter(t->model, global);
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_spvec_new((uint32_t)prob.dim, 0, &u), 0);
    assert_int_equal(sfl_algo_params_from_list(sfl_algo_find(t->algorithm), &t->params, &ap), 0);
    assert_int_equal(sfl_algo_client_round(sfl_algo_find(t->algorithm), &ap, &prob,
                                           global, ds, NULL, t->seed, t->round, client, &ws, u),
                     0);
    sfl_algo_ws_close(&ws);
    free(global);
    sfl_dataset_free(ds);
    return u;
}

static void assert_same_bits(const sfl_spvec_t *got, const sfl_spvec_t *want)
{
    assert_int_equal(got->dim, want->dim);
    assert_int_equal(got->nnz, want->nnz);
    assert_true(want->nnz > 0);
    assert_memory_equal(got->idx, want->idx, want->nnz * sizeof(uint32_t));
    assert_memory_equal(got->val, want->val, want->nnz * sizeof(double));
}

static void expect_payload_is_reference(const char *path)
{
    sfl_spvec_t *want = reference(path, &S.task, AGENT_ID);

    assert_non_null(S.payload);
    assert_int_equal(S.open_rc, 0);
    assert_same_bits(S.payload->update, want);
    assert_int_equal(S.payload->samples, NROWS);
    assert_true(isfinite(S.payload->train_loss) && S.payload->train_loss > 0);
    sfl_spvec_free(want);
}

/* ---- the agent ---------------------------------------------------------------- */

static void observe(agent_ctx_t *a, agent_state_t from, agent_state_t to, void *ud)
{
    (void)from;
    (void)ud;
    if (S.nseen < MAX_SEEN)
        S.seen[S.nseen++] = to;
    if (to == AGENT_BACKOFF && S.nbackoff < MAX_SEEN)
        S.backoff_ms[S.nbackoff++] = agent_stats(a)->last_backoff_ms;
}

/* 1 if seq[0..n) occurs in order (not necessarily adjacent) in S.seen. */
static int seen_in_order(const agent_state_t *seq, int n)
{
    int k = 0;

    for (int i = 0; i < S.nseen && k < n; i++)
        if (S.seen[i] == seq[k])
            k++;
    return k == n;
}

static void agent_cfg(agent_config_t *c, const char *state, const char *data)
{
    char hex[65];

    agent_config_default(c);
    snprintf(c->coordinator, sizeof(c->coordinator), "127.0.0.1:%d", S.port);
    snprintf(c->ca, sizeof(c->ca), "%s/ca/ca.crt", dir);
    snprintf(c->cert, sizeof(c->cert), "%s/ca/agent/agent-7.crt", dir);
    snprintf(c->key, sizeof(c->key), "%s/ca/agent/agent-7.key", dir);
    snprintf(c->state_dir, sizeof(c->state_dir), "%s/%s", dir, state);
    snprintf(c->coordinator_pk, sizeof(c->coordinator_pk), "%s",
             sfl_seal_pk_to_hex(coord_id->pk, hex));
    snprintf(c->data, sizeof(c->data), "libsvm:%s", data);
    assert_int_equal(agent_config_set(c, "conditions", "mains_power,unmetered"), 0);
    c->backoff_min_ms = 20;
    c->backoff_max_ms = 80;
    c->connect_timeout_ms = 2000;
    c->heartbeat_ms = 50;
}

static void start_agent(const agent_config_t *c)
{
    assert_int_equal(agent_new(&S.loop, c, &S.agent), 0);
    agent_set_log(S.agent, S.log);
    agent_set_observer(S.agent, observe, NULL);
    assert_int_equal(agent_start(S.agent), 0);
    assert_int_equal(agent_start(S.agent), -EALREADY);
}

static void on_stopped(agent_ctx_t *a, void *ud)
{
    (void)ud;
    assert_ptr_equal(a, S.agent);
    S.stopped = 1;
}

static void stop_agent(void)
{
    agent_stop(S.agent, on_stopped, NULL);
    agent_stop(S.agent, on_stopped, NULL); /* a second stop does nothing */
    RUN_UNTIL(S.stopped);
    assert_int_equal(agent_state(S.agent), AGENT_DISCONNECTED);
    agent_free(S.agent);
    S.agent = NULL;
}

static int log_has(const char *needle)
{
    char line[2048];
    int hit = 0;

    if (S.log == NULL)
        return 0;
    fflush(S.log);
    rewind(S.log);
    while (!hit && fgets(line, sizeof(line), S.log))
        hit = strstr(line, needle) != NULL;
    fseek(S.log, 0, SEEK_END);
    return hit;
}

static int setup(void **state)
{
    char cert[128], key[128], ca[128];
    sfl_tls_config_t t = {
        .cert_file = cert,
        .key_file = key,
        .ca_file = ca,
        .require_client_cert = 1,
        .alpn = "h2",
        .alpn_required = 1,
    };

    (void)state;
    memset(&S, 0, sizeof(S));
    snprintf(cert, sizeof(cert), "%s/ca/coordinator/coord.crt", dir);
    snprintf(key, sizeof(key), "%s/ca/coordinator/coord.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca/ca.crt", dir);
    assert_int_equal(uv_loop_init(&S.loop), 0);
    uv_timer_init(&S.loop, &S.watchdog);
    uv_timer_init(&S.loop, &S.sleeper);
    uv_idle_init(&S.loop, &S.flush);
    uv_timer_start(&S.watchdog, on_watchdog, WATCHDOG_MS, 0);
    assert_int_equal(sfl_tls_new(&t, 1, &S.stls), 0);
    listen_on(0);
    assert_int_equal(sfl_spvec_new(NCOLS, 4, &S.model), 0);
    S.model->nnz = 2;
    S.model->idx[0] = 1;
    S.model->val[0] = 0.25;
    S.model->idx[1] = 4;
    S.model->val[1] = -0.5;
    new_round(3);
    S.log = tmpfile();
    assert_non_null(S.log);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    /* An agent a failed test left running is stopped; one the watchdog
     * caught is leaked rather than freed while in use. */
    if (S.agent != NULL && !S.timed_out) {
        agent_stop(S.agent, on_stopped, NULL);
        while (!S.stopped && !S.timed_out)
            uv_run(&S.loop, UV_RUN_ONCE);
    }
    if (S.agent != NULL && S.stopped)
        agent_free(S.agent);
    if (S.l != NULL)
        sfl_listener_close(S.l);
    for (int i = 0; i < MAX_CONNS; i++)
        if (S.conns[i].used)
            drop_conn(&S.conns[i]);
    while (S.closed < S.accepted && !S.timed_out)
        uv_run(&S.loop, UV_RUN_ONCE);
    sfl_tls_free(S.stls);
    uv_close((uv_handle_t *)&S.watchdog, NULL);
    uv_close((uv_handle_t *)&S.sleeper, NULL);
    uv_close((uv_handle_t *)&S.flush, NULL);
    uv_run(&S.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&S.loop), 0);
    sfl_msg_payload_free(S.payload);
    sfl_msg_buf_free(S.task_msg);
    sfl_msg_buf_free(S.bad_msg);
    sfl_msg_buf_free(S.std_msg);
    free(S.moments);
    sfl_spvec_free(S.model);
    sfl_roundkey_free(S.rk);
    for (int i = 0; i < 4; i++)
        free(S.sealed[i]);
    if (S.log != NULL) {
        if (getenv("SFL_TEST_VERBOSE")) {
            char line[2048];

            rewind(S.log);
            while (fgets(line, sizeof(line), S.log))
                fputs(line, stderr);
        }
        fclose(S.log);
    }
    return 0;
}

/* ---- pure pieces ------------------------------------------------------------- */

static void test_agent_backoff_delay(void **state)
{
    static const uint64_t ranges[][2] = {{20, 80}, {500, 60000}, {100, 100}, {1, 3},
                                         {7, UINT64_MAX / 4}};
    static const uint32_t draws[] = {0, 1, 1u << 31, 0x9e3779b9u, UINT32_MAX};

    (void)state;
    for (size_t k = 0; k < sizeof(ranges) / sizeof(ranges[0]); k++) {
        uint64_t min = ranges[k][0], max = ranges[k][1];

        for (uint32_t n = 0; n < 80; n++) {
            uint64_t hi = min, lo;

            for (uint32_t i = 0; i <= n && hi < max; i++)
                hi = hi > max / 2 ? max : 2 * hi;
            lo = hi / 2 > min ? hi / 2 : min;
            for (size_t r = 0; r < sizeof(draws) / sizeof(draws[0]); r++) {
                uint64_t d = agent_backoff_delay(min, max, n, draws[r]);

                assert_true(d >= min && d <= max);
                assert_true(d >= lo && d <= hi);
            }
            assert_int_equal(agent_backoff_delay(min, max, n, 0), lo);
        }
    }
    /* Doubling, then capped; jitter spans [hi/2, hi]. */
    assert_int_equal(agent_backoff_delay(500, 60000, 0, UINT32_MAX), 1000);
    assert_int_equal(agent_backoff_delay(500, 60000, 0, 0), 500);
    assert_int_equal(agent_backoff_delay(500, 60000, 1, UINT32_MAX), 2000);
    assert_int_equal(agent_backoff_delay(500, 60000, 1, 0), 1000);
    assert_int_equal(agent_backoff_delay(500, 60000, 6, UINT32_MAX), 60000);
    assert_int_equal(agent_backoff_delay(500, 60000, UINT32_MAX, 0), 30000);
    assert_int_equal(agent_backoff_delay(100, 100, 3, 12345), 100);
}

static void test_agent_task_check(void **state)
{
    static const double pm[] = {-1, 1};
    sfl_dataset_t *ds;
    sfl_task_t t;
    sfl_spvec_t *wide;

    (void)state;
    assert_int_equal(sfl_libsvm_read(reg_path, 0, NULL, &ds), 0);
    fill_task(&t, "lsq", 0, NULL, 1);
    assert_int_equal(agent_task_check(&t, ds), 0);

    snprintf(t.algorithm, sizeof(t.algorithm), "fedmagic");
    assert_int_equal(agent_task_check(&t, ds), SFL_EUNSUP);
    assert_detail("task: unknown algorithm 'fedmagic'");
    fill_task(&t, "hinge", 0, NULL, 1);
    assert_int_equal(agent_task_check(&t, ds), SFL_EUNSUP);
    assert_detail("task: unknown loss");
    fill_task(&t, "lsq", 0, NULL, 1);
    t.update_mode = SFL_UPDATE_MODE_SECURE_AGG;
    assert_int_equal(agent_task_check(&t, ds), SFL_EUNSUP);
    assert_detail("task: update mode 2");
    fill_task(&t, "lsq", 0, NULL, 1);
    snprintf(t.dictionary, sizeof(t.dictionary), "gaussian:16");
    assert_int_equal(agent_task_check(&t, ds), SFL_EUNSUP);
    assert_detail("task: dictionary");
    fill_task(&t, "lsq", 0, NULL, 1);
    t.dimension = NCOLS - 1; /* the data has more features than the job */
    assert_int_equal(agent_task_check(&t, ds), SFL_EDIM);
    assert_detail("task: dimension 7, but the local data has 8 features");
    fill_task(&t, "lsq", 0, NULL, 1);
    t.dimension = NCOLS + 2; /* wider is fine, but the model must match it */
    assert_int_equal(agent_task_check(&t, ds), SFL_EDIM);
    assert_detail("task: model has dimension 8, the problem 10");
    assert_int_equal(sfl_spvec_new(NCOLS + 2, 0, &wide), 0);
    t.model = wide;
    assert_int_equal(agent_task_check(&t, ds), 0);
    sfl_spvec_free(wide);
    fill_task(&t, "logistic", 0, NULL, 1);
    assert_int_equal(agent_task_check(&t, ds), SFL_EINVAL);
    assert_detail("task: loss logistic needs the job's labels");
    fill_task(&t, "logistic", 2, pm, 1);
    assert_int_equal(agent_task_check(&t, ds), 0);
    fill_task(&t, "lsq", 0, NULL, 1);
    assert_int_equal(sfl_param_list_set(&t.params, "tau", 0), 0); /* fediterht is sparse */
    assert_int_equal(agent_task_check(&t, ds), SFL_EINVAL);
    assert_detail("task: tau: must be >= 1, got 0");
    assert_int_equal(sfl_param_list_set(&t.params, "tau", 9), 0);
    assert_int_equal(agent_task_check(&t, ds), SFL_EINVAL);
    assert_detail("fediterht: tau must be in [1, 8], got 9");
    assert_int_equal(sfl_param_list_set(&t.params, "tau", 3), 0);
    assert_int_equal(sfl_param_list_set(&t.params, "mu", 0.5), 0);
    assert_int_equal(agent_task_check(&t, ds), SFL_EINVAL);
    assert_detail("task: fediterht has no parameter 'mu' (its parameters: lr, tau, local_steps, "
                  "batch, lambda)");
    sfl_dataset_free(ds);
}

/* Unpacks and checks an Update the way the coordinator does. */
static sfl_payload_t *open_update_dim(const uint8_t *msg, size_t len, const sfl_task_t *t,
                                      uint32_t dim);

static sfl_payload_t *open_update(const uint8_t *msg, size_t len, const sfl_task_t *t)
{
    return open_update_dim(msg, len, t, t->model->dim);
}

static sfl_payload_t *open_update_dim(const uint8_t *msg, size_t len, const sfl_task_t *t,
                                      uint32_t dim)
{
    sfl_update_t *u;
    sfl_upd_ctx_t x;
    sfl_payload_t *p;
    size_t pll;

    assert_int_equal(sfl_msg_update_unpack(msg, len, NULL, &u), 0);
    assert_int_equal(u->job_id, t->job_id);
    assert_int_equal(u->round, t->round);
    assert_int_equal(u->agent_id, AGENT_ID);
    memcpy(x.round_pk, S.rk->pk, 32);
    x.job = t->job_id;
    x.round = t->round;
    memcpy(x.nonce, t->round_nonce, 32);
    x.agent_id = AGENT_ID;
    memcpy(x.model_hash, t->model_hash, 32);
    assert_int_equal(u->mode, SFL_UPDATE_MODE_SIGNED);
    assert_int_equal(sfl_seal_check_update(agent_key->pk, &x, u->sealed, u->sealed_len, 1 << 20,
                                           NULL, &pll),
                     0);
    assert_int_equal(sfl_msg_payload_unpack(u->sealed, pll, NULL, dim, &p), 0);
    sfl_msg_update_free(u);
    return p;
}

/* A statistics task: the sealed update is the training rows' moments over
 * the task's dimension, from zeros, bit for bit sfl_dataset_moments' (what
 * sfl-sim computes for a client), float64, weight the rows; and the
 * standardised copies the training rounds use are sfl_dataset_standardize's
 * of the pooled statistics; moments that summarise nothing are refused. */
static void test_agent_statistics(void **state)
{
    const uint32_t n = 1 + 2 * (NCOLS + 2);
    sfl_dataset_t *ds, *sd = NULL, *se = NULL, *want = NULL, *parts[1];
    double m[1 + 2 * (NCOLS + 2)] = {0}, got[1 + 2 * (NCOLS + 2)] = {0}, mu[NCOLS + 2],
                                          sc[NCOLS + 2];
    sfl_payload_t *p;
    sfl_task_t t;
    uint8_t *msg = NULL, *sign;
    size_t len, slen;

    (void)state;
    assert_int_equal(sfl_libsvm_read(reg_path, 0, NULL, &ds), 0);
    fill_task(&t, "lsq", 0, NULL, 0);
    t.dimension = NCOLS + 2; /* wider than the data: widened */
    t.statistics = 1;
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0); /* sets model_hash */
    sfl_msg_buf_free(sign);
    assert_int_equal(agent_stats_task(&t, ds, agent_key, AGENT_ID, &msg, &len), 0);
    p = open_update_dim(msg, len, &t, n);
    assert_int_equal(p->samples, NROWS);
    assert_int_equal(p->encoding, SFL_ENC_F64);
    sfl_spvec_scatter(p->update, got);
    assert_int_equal(sfl_dataset_moments(ds, NCOLS + 2, m), 0);
    assert_memory_equal(got, m, sizeof(m));
    assert_true(m[0] == NROWS);
    sfl_msg_payload_free(p);
    sfl_msg_buf_free(msg);
    t.statistics = 0;
    assert_int_equal(agent_stats_task(&t, ds, agent_key, AGENT_ID, &msg, &len), SFL_EINVAL);

    /* the standardised rows: as sfl_dataset_standardize makes them */
    assert_int_equal(agent_standardize(m, NCOLS + 2, 0.001, ds, ds, &sd, &se), 0);
    assert_non_null(se);
    parts[0] = ds;
    assert_int_equal(sfl_dataset_concat(parts, 1, &want), 0);
    assert_int_equal(sfl_dataset_set_ncols(want, NCOLS + 2), 0);
    assert_int_equal(sfl_moments_standardizer(m, NCOLS + 2, 0.001, mu, sc), 0);
    assert_int_equal(sfl_dataset_standardize(want, NCOLS + 2, mu, sc), 0);
    assert_int_equal(sd->X->nnz, want->X->nnz);
    assert_memory_equal(sd->X->val, want->X->val, want->X->nnz * sizeof(double));
    assert_memory_equal(se->X->val, want->X->val, want->X->nnz * sizeof(double));
    assert_memory_equal(sd->y, ds->y, NROWS * sizeof(double)); /* targets as they were */
    sfl_dataset_free(sd);
    sfl_dataset_free(se);
    assert_int_equal(agent_standardize(m, NCOLS + 2, 0.001, ds, NULL, &sd, &se), 0);
    assert_null(se);
    sfl_dataset_free(sd);
    /* a summary of no rows, a negative sum of squares: refused, nothing made */
    m[0] = 0;
    assert_int_equal(agent_standardize(m, NCOLS + 2, 0.001, ds, NULL, &sd, &se), SFL_EINVAL);
    assert_null(sd);
    m[0] = NROWS;
    m[1 + NCOLS + 2] = -1;
    assert_int_equal(agent_standardize(m, NCOLS + 2, 0.001, ds, NULL, &sd, &se), SFL_EINVAL);
    assert_null(sd);
    assert_non_null(strstr(sfl_last_error(), "statistics"));
    sfl_dataset_free(want);
    sfl_dataset_free(ds);
}

static void test_agent_train_task_matches_client_round(void **state)
{
    static const double pm[] = {-1, 1}, wrong[] = {1, 2};
    sfl_dataset_t *ds;
    sfl_algo_ws_t ws;
    sfl_task_t t;
    sfl_payload_t *p;
    sfl_spvec_t *want;
    uint8_t *msg, *sign;
    size_t len, slen;

    (void)state;
    sfl_algo_ws_init(&ws);
    /* Regression: the targets as they are. */
    assert_int_equal(sfl_libsvm_read(reg_path, 0, NULL, &ds), 0);
    fill_task(&t, "lsq", 0, NULL, 5);
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0); /* sets model_hash */
    sfl_msg_buf_free(sign);
    assert_int_equal(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len), 0);
    p = open_update(msg, len, &t);
    want = reference(reg_path, &t, AGENT_ID);
    assert_same_bits(p->update, want);
    assert_int_equal(p->samples, NROWS);
    sfl_spvec_free(want);
    /* Another client id draws other minibatches. */
    want = reference(reg_path, &t, AGENT_ID + 1);
    assert_true(want->nnz != p->update->nnz ||
                memcmp(want->val, p->update->val, want->nnz * sizeof(double)) != 0);
    sfl_spvec_free(want);
    sfl_msg_payload_free(p);
    sfl_msg_buf_free(msg);
    sfl_dataset_free(ds);

    /* Classification: local labels -1/+1 numbered by the job's list, as
     * sfl_dataset_encode_labels numbers them in a simulation. */
    assert_int_equal(sfl_libsvm_read(cls_path, 0, NULL, &ds), 0);
    fill_task(&t, "logistic", 2, pm, 2);
    assert_int_equal(sfl_param_list_set(&t.params, "lambda", 1e-3), 0);
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0);
    sfl_msg_buf_free(sign);
    assert_int_equal(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len), 0);
    p = open_update(msg, len, &t);
    want = reference(cls_path, &t, AGENT_ID);
    assert_same_bits(p->update, want);
    sfl_spvec_free(want);
    sfl_msg_payload_free(p);
    sfl_msg_buf_free(msg);
    /* A local label the job does not list. */
    fill_task(&t, "logistic", 2, wrong, 2);
    assert_int_equal(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len),
                     SFL_EINVAL);
    assert_detail("task: local label -1 (row 1) is not among the job's 2 labels");
    assert_null(msg);
    /* More nonzeros than the task allows. */
    fill_task(&t, "logistic", 2, pm, 2);
    t.max_update_nnz = 2;
    assert_int_equal(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len),
                     SFL_ELIMIT);
    assert_detail("update has 3 nonzeros, the task allows 2");
    /* An untrainable task is refused before any work. */
    fill_task(&t, "lsq", 0, NULL, 2);
    t.update_mode = SFL_UPDATE_MODE_SECURE_AGG;
    assert_int_equal(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len),
                     SFL_EUNSUP);
    sfl_dataset_free(ds);
    sfl_algo_ws_close(&ws);
}

/* The held-out metric is the task model's (before local training):
 * accuracy for logistic, mean squared error for lsq; the update itself is
 * unchanged by evaluation. */
static void test_agent_train_task_eval(void **state)
{
    static const double pm[] = {-1, 1};
    sfl_dataset_t *ds, *tr, *ev;
    sfl_algo_ws_t ws;
    sfl_task_t t;
    sfl_payload_t *p, *q;
    sfl_rng_t r, r2;
    uint8_t *msg, *msg2, *sign;
    size_t len, len2, slen;
    double want = 0, x[NCOLS] = {0};
    sfl_dataset_t *coded;

    (void)state;
    sfl_algo_ws_init(&ws);
    assert_int_equal(sfl_libsvm_read(cls_path, 0, NULL, &ds), 0);
    agent_eval_rng(agent_key->pk, &r);
    agent_eval_rng(agent_key->pk, &r2);
    assert_int_equal(sfl_rng_u64(&r), sfl_rng_u64(&r2)); /* same identity, same split */
    agent_eval_rng(agent_key->pk, &r);
    assert_int_equal(sfl_dataset_split(ds, 0.5, &r, &tr, &ev), 0);
    assert_int_equal(tr->X->nrows + ev->X->nrows, ds->X->nrows);
    assert_true(ev->X->nrows > 0);
    fill_task(&t, "logistic", 2, pm, 2);
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0);
    sfl_msg_buf_free(sign);
    assert_int_equal(agent_train_task(&t, tr, ev, agent_key, AGENT_ID, &ws, NULL, &msg, &len), 0);
    assert_int_equal(agent_train_task(&t, tr, NULL, agent_key, AGENT_ID, &ws, NULL, &msg2, &len2), 0);
    p = open_update(msg, len, &t);
    q = open_update(msg2, len2, &t);
    assert_same_bits(p->update, q->update);
    assert_true(p->train_loss == q->train_loss);
    assert_int_equal(p->samples, tr->X->nrows);
    assert_int_equal(p->eval_samples, ev->X->nrows);
    assert_int_equal(q->eval_samples, 0);
    sfl_spvec_scatter(S.model, x);
    {
        uint32_t *all = calloc(ev->X->nrows, sizeof(uint32_t));

        for (uint32_t i = 0; i < ev->X->nrows; i++)
            all[i] = i;
        assert_int_equal(sfl_dataset_subset(ev, all, ev->X->nrows, &coded), 0);
        free(all);
    }
    for (uint32_t i = 0; i < coded->X->nrows; i++)
        coded->y[i] = coded->y[i] > 0; /* -1 -> class 0, +1 -> class 1 */
    assert_true(p->eval_accuracy == sfl_loss_accuracy(&sfl_loss_logistic, coded, x));
    assert_true(p->eval_mse == 0);
    assert_true(p->personal_accuracy == 0); /* not a personalized algorithm */
    sfl_msg_payload_free(p);
    sfl_msg_payload_free(q);
    sfl_msg_buf_free(msg);
    sfl_msg_buf_free(msg2);

    /* A personalized algorithm (FedMac) adds its own model's accuracy on
     * the same rows: theta as the round left it, in the state kept. */
    {
        agent_cstate_io_t cs = {0};
        sfl_client_state_t st;
        sfl_algo_params_t ap;
        sfl_problem_t prob;

        fill_task(&t, "logistic", 2, pm, 2);
        snprintf(t.algorithm, sizeof(t.algorithm), "fedmac");
        memset(&t.params, 0, sizeof(t.params));
        assert_int_equal(sfl_param_list_set(&t.params, "eta_p", 1), 0);
        assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0);
        sfl_msg_buf_free(sign);
        assert_int_equal(
            agent_train_task(&t, tr, ev, agent_key, AGENT_ID, &ws, &cs, &msg, &len), 0);
        p = open_update(msg, len, &t);
        assert_non_null(cs.out);
        assert_int_equal(sfl_problem_init(&prob, &sfl_loss_logistic, NCOLS, 2), 0);
        sfl_algo_params_default(&sfl_algo_fedmac, &ap);
        assert_int_equal(
            sfl_client_state_load(&sfl_algo_fedmac, &ap, &prob, cs.out, cs.out_len, &st), 0);
        assert_int_equal(p->eval_samples, ev->X->nrows);
        assert_true(p->eval_accuracy == sfl_loss_accuracy(&sfl_loss_logistic, coded, x));
        assert_true(p->personal_accuracy ==
                    sfl_loss_accuracy(&sfl_loss_logistic, coded, st.mem));
        sfl_client_state_free(&st);
        sfl_client_state_bytes_free(cs.out, cs.out_len);
        sfl_msg_payload_free(p);
        sfl_msg_buf_free(msg);
    }
    sfl_dataset_free(coded);

    /* Least squares: mean squared error on the held-out rows. */
    fill_task(&t, "lsq", 0, NULL, 2);
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0);
    sfl_msg_buf_free(sign);
    assert_int_equal(agent_train_task(&t, tr, ev, agent_key, AGENT_ID, &ws, NULL, &msg, &len), 0);
    p = open_update(msg, len, &t);
    for (uint32_t i = 0; i < ev->X->nrows; i++) {
        double e = sfl_csr_row_dot(ev->X, i, x) - ev->y[i];

        want += e * e;
    }
    assert_true(fabs(p->eval_mse - want / ev->X->nrows) < 1e-12);
    assert_true(p->eval_accuracy == 0);
    sfl_msg_payload_free(p);
    sfl_msg_buf_free(msg);
    sfl_dataset_free(tr);
    sfl_dataset_free(ev);
    sfl_dataset_free(ds);
    sfl_algo_ws_close(&ws);
}

static void test_agent_train_task_failalloc(void **state)
{
    static const double pm[] = {-1, 1};
    sfl_dataset_t *ds;
    sfl_algo_ws_t ws;
    sfl_task_t t;
    uint8_t *msg = NULL, *sign;
    size_t len, slen;

    (void)state;
    assert_int_equal(sfl_libsvm_read(cls_path, 0, NULL, &ds), 0);
    fill_task(&t, "logistic", 2, pm, 2);
    assert_int_equal(sfl_msg_task_sign_bytes(&t, &sign, &slen), 0);
    sfl_msg_buf_free(sign);
    sfl_algo_ws_init(&ws);
    FAILALLOC_EACH(agent_train_task(&t, ds, NULL, agent_key, AGENT_ID, &ws, NULL, &msg, &len), {
        sfl_msg_buf_free(msg);
        msg = NULL;
        sfl_algo_ws_close(&ws);
        sfl_algo_ws_init(&ws);
    });
    sfl_dataset_free(ds);
}

/* ---- construction --------------------------------------------------------------- */

/* The held-out split: a fraction of data (rounded down) or another file
 * whose labels data has; Join reports the training rows. */
static void test_agent_new_eval(void **state)
{
    agent_config_t c;
    agent_ctx_t *a = NULL;
    char path[256];
    FILE *f;

    (void)state;
    agent_cfg(&c, "st-eval", cls_path);
    assert_int_equal(agent_config_set(&c, "eval_fraction", "0.3"), 0);
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    assert_int_equal(agent_eval_rows(a), 7); /* floor(0.3 * 24) */
    assert_int_equal(agent_summary(a)->samples, NROWS - 7);
    assert_int_equal(agent_summary(a)->nlabels, 2);
    agent_free(a);
    a = NULL;

    agent_cfg(&c, "st-eval", cls_path);
    snprintf(c.eval_file, sizeof(c.eval_file), "libsvm:%s", cls_path);
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    assert_int_equal(agent_eval_rows(a), NROWS);
    assert_int_equal(agent_summary(a)->samples, NROWS);
    agent_free(a);
    a = NULL;

    snprintf(path, sizeof(path), "%s/held.svm", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("1 1:0.5\n3 2:1\n", f);
    fclose(f);
    snprintf(c.eval_file, sizeof(c.eval_file), "libsvm:%s", path);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("eval_file: label 3 is not among the labels of data");
    assert_null(a);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("1 1:0.5\n0.25 2:1\n", f);
    fclose(f);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("eval_file: targets are not class labels, data's are");
    /* regression data takes any held-out targets */
    agent_cfg(&c, "st-eval", reg_path);
    snprintf(c.eval_file, sizeof(c.eval_file), "libsvm:%s", path);
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    assert_int_equal(agent_eval_rows(a), 2);
    agent_free(a);
    a = NULL;
    snprintf(c.eval_file, sizeof(c.eval_file), "libsvm:%s/none.svm", dir);
    assert_true(agent_new(&S.loop, &c, &a) < 0);
    assert_null(a);
}

static void test_agent_new_errors(void **state)
{
    agent_config_t c;
    agent_ctx_t *a = NULL;
    char path[256];
    FILE *f;

    (void)state;
    agent_cfg(&c, "st-errors", reg_path);
    c.coordinator[0] = '\0';
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("missing required setting 'coordinator'");
    assert_null(a);

    agent_cfg(&c, "st-errors", reg_path);
    snprintf(c.coordinator, sizeof(c.coordinator), "127.0.0.1:http");
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("coordinator: bad address");

    agent_cfg(&c, "st-errors", reg_path);
    snprintf(c.coordinator, sizeof(c.coordinator), "127.0.0.1:1,,127.0.0.1:2");
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("coordinator: '127.0.0.1:1,,127.0.0.1:2' is not a list of host:port");

    agent_cfg(&c, "st-errors", reg_path);
    snprintf(c.coordinator, sizeof(c.coordinator),
             "h:1,h:2,h:3,h:4,h:5,h:6,h:7,h:8,h:9");
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("coordinator: at most 8 addresses");

    agent_cfg(&c, "st-errors", reg_path);
    assert_int_equal(agent_config_set(&c, "conditions", "Mains Power"), 0);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("conditions: 'Mains Power' is not a tag");

    agent_cfg(&c, "st-errors", reg_path);
    memset(c.coordinator_pk, '0', 64); /* the identity point: small order */
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINVAL);
    assert_detail("coordinator_pk is not a usable Ed25519 public key; on the coordinator, "
                  "'sfl-coordinator --config FILE --public-key' prints the key to pin");

    snprintf(path, sizeof(path), "%s/missing.svm", dir);
    agent_cfg(&c, "st-errors", path);
    assert_true(agent_new(&S.loop, &c, &a) < 0);
    assert_null(a);

    snprintf(path, sizeof(path), "%s/bad.svm", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("1 1:0.5\n2 3:x\n", f);
    fclose(f);
    agent_cfg(&c, "st-errors", path);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "bad.svm:2:"));

    snprintf(path, sizeof(path), "%s/empty.svm", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    agent_cfg(&c, "st-errors", path);
    assert_true(agent_new(&S.loop, &c, &a) < 0);
    assert_null(a);

    agent_cfg(&c, "st-errors", reg_path);
    snprintf(c.ca, sizeof(c.ca), "%s/nope.crt", dir);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EIO);
    assert_null(a);

    /* A key file others can read is refused, never used. */
    agent_cfg(&c, "st-errors", reg_path);
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    agent_free(a);
    a = NULL;
    snprintf(path, sizeof(path), "%s/st-errors/%s", dir, AGENT_IDENTITY_FILE);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EINSECURE);
    assert_null(a);
    /* A corrupt key file is not replaced by a new identity. */
    assert_int_equal(chmod(path, 0600), 0);
    f = fopen(path, "r+");
    assert_non_null(f);
    fputs("sfl-identity-v1\nzz", f);
    fclose(f);
    assert_int_equal(agent_new(&S.loop, &c, &a), SFL_EPARSE);
    assert_null(a);
}

static void test_agent_new_failalloc(void **state)
{
    agent_config_t c;
    agent_ctx_t *a = NULL;

    (void)state;
    agent_cfg(&c, "st-failalloc", reg_path);
    FAILALLOC_EACH(agent_new(&S.loop, &c, &a), {
        agent_free(a);
        a = NULL;
    });
}

static void test_agent_identity_created_once(void **state)
{
    agent_config_t c;
    agent_ctx_t *a;
    uint8_t pk[32];
    char path[512], sdir[256];
    struct stat st;

    (void)state;
    agent_cfg(&c, "st-identity", reg_path);
    snprintf(sdir, sizeof(sdir), "%s/st-identity", dir);
    snprintf(path, sizeof(path), "%s/%s", sdir, AGENT_IDENTITY_FILE);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    memcpy(pk, agent_identity_pk(a), 32);
    agent_free(a);
    assert_int_equal(stat(sdir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, SFL_IDENTITY_FILE_BYTES);

    /* The second start uses the same key. */
    assert_int_equal(agent_new(&S.loop, &c, &a), 0);
    assert_memory_equal(agent_identity_pk(a), pk, 32);
    agent_free(a);
    /* And that is the key the coordinator sees at Join. */
    start_agent(&c);
    RUN_UNTIL(S.joins == 1);
    assert_memory_equal(S.join.identity_key, pk, 32);
    stop_agent();
}

/* ---- against the fake coordinator ---------------------------------------------- */

static void test_agent_trains_and_submits(void **state)
{
    static const agent_state_t path[] = {AGENT_CONNECTING, AGENT_JOINING,    AGENT_SUBSCRIBED,
                                         AGENT_TRAINING,   AGENT_SUBMITTING, AGENT_SUBSCRIBED};
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.script[S.nscript++] = SUB_TASK;
    agent_cfg(&c, "st-train", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(st->acks[SFL_ACK_ACCEPTED] == 1 && agent_state(S.agent) == AGENT_SUBSCRIBED);
    /* Join carried the identity, conditions and a summary of the data. */
    assert_int_equal(S.join.protocol_version, SFL_MSG_PROTOCOL_VERSION);
    assert_int_equal(S.join.dataset.samples, NROWS);
    assert_int_equal(S.join.dataset.dimension, NCOLS);
    assert_int_equal(S.join.dataset.nlabels, 0);
    assert_true(sfl_msg_tags_has(&S.join.conditions, "mains_power"));
    assert_true(sfl_msg_tags_has(&S.join.conditions, "unmetered"));
    assert_memory_equal(S.join.identity_key, agent_identity_pk(S.agent), 32);
    /* it proved it holds that key, over the connection it joined on */
    assert_true(S.join_proof_ok);
    assert_int_equal(agent_joined_id(S.agent), AGENT_ID);
    /* One update, sealed to the round key, bound to the task, equal bit for
     * bit to what the simulator's entry point computes. */
    assert_int_equal(S.submits, 1);
    expect_payload_is_reference(reg_path);
    assert_true(seen_in_order(path, 6));
    assert_int_equal(st->tasks, 1);
    assert_int_equal(st->trained, 1);
    assert_int_equal(st->tasks_refused, 0);
    assert_int_equal(st->backoffs, 0);
    /* Idle heartbeats every heartbeat_ms (the agent's 50 ms beats the
     * coordinator's 1000). */
    RUN_UNTIL(S.heartbeats >= 3);
    assert_int_equal(S.hb.agent_id, AGENT_ID);
    assert_int_equal(S.hb.phase, SFL_PHASE_IDLE);
    assert_true(sfl_msg_tags_has(&S.hb.conditions, "mains_power"));
    assert_int_equal(S.joins, 1);
    assert_int_equal(S.subscribes, 1);
    /* The coordinator has no running job for it any more: the job ended. */
    {
        sfl_wait_t w = {.retry_after_ms = 60000};
        sfl_grpc_call_t *sub = S.held;
        uint8_t *buf;
        size_t n;

        snprintf(w.reason, sizeof(w.reason), "%s", SFL_MSG_WAIT_NO_JOB);
        assert_non_null(sub);
        S.held = NULL;
        assert_int_equal(sfl_msg_wait_pack(&w, &buf, &n), 0);
        assert_int_equal(sfl_grpc_send(sub, buf, n), 0);
        sfl_msg_buf_free(buf);
        assert_int_equal(sfl_grpc_finish(sub, SFL_GRPC_STATUS_OK, NULL), 0);
        RUN_UNTIL(log_has("event=job_end"));
    }
    /* At info, the default (issue 24, item 6): the coordinator's line
     * format, the job's start and end, no line per round. */
    assert_true(log_has("level=info event=job_start job=1 round=3 algorithm="));
    assert_true(log_has("level=info event=job_end job=1 tasks=1 last_round=3 "
                        "reason=\"no running job for this agent\""));
    assert_true(log_has("level=info event=joined "));
    assert_false(log_has("event=ack "));
    assert_false(log_has("event=training "));
    assert_false(log_has("event=trained "));
    assert_false(log_has("event=submitting "));
    assert_false(log_has("event=wait "));
    assert_false(log_has("sfl-agent level="));
    stop_agent();
    RUN_UNTIL(S.closed == S.accepted);
    assert_true(log_has("event=stopped"));
    {
        char line[2048];

        /* every line starts with its UTC time */
        fflush(S.log);
        rewind(S.log);
        while (fgets(line, sizeof(line), S.log))
            assert_true(strncmp(line, "ts=20", 5) == 0 && strstr(line, "Z level=") == line + 26);
        fseek(S.log, 0, SEEK_END);
    }
}

/* A standardize job's training task: one that names statistics the agent
 * does not hold is refused and the agent joins again (the coordinator sends
 * them once a session); the next task brings them beside the signed bytes,
 * and the update is trained on the rows they standardise, bit for bit. */
static void test_agent_standardize_rejoins(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;
    sfl_dataset_t *ds;

    (void)state;
    /* the pooled statistics: here the agent's own rows, doubled */
    assert_non_null(S.moments = calloc(SFL_MOMENTS_LEN(NCOLS), sizeof(double)));
    assert_int_equal(sfl_libsvm_read(reg_path, 0, NULL, &ds), 0);
    assert_int_equal(sfl_dataset_moments(ds, NCOLS, S.moments), 0);
    assert_int_equal(sfl_dataset_moments(ds, NCOLS, S.moments), 0);
    sfl_dataset_free(ds);
    S.task.has_moments = 1;
    S.task.standardize_eps = 0.25;
    sfl_msg_moments_hash(S.moments, SFL_MOMENTS_LEN(NCOLS), S.task.moments_hash);
    sign_task();
    S.script[S.nscript++] = SUB_TASK;    /* names them, without them */
    S.script[S.nscript++] = SUB_STDTASK; /* the next session's first task */
    agent_cfg(&c, "st-std", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(st->acks[SFL_ACK_ACCEPTED] == 1);
    assert_int_equal(st->tasks_refused, 1);
    assert_true(log_has("the task names statistics this agent does not hold"));
    assert_int_equal(S.joins, 2);
    assert_true(log_has("level=info event=statistics job=1 rows=48 features=8 eps=0.25"));
    expect_payload_is_reference(reg_path); /* standardised: t->has_moments */
    {
        sfl_spvec_t *raw;

        S.task.has_moments = 0; /* what the raw rows would give: not this */
        raw = reference(reg_path, &S.task, AGENT_ID);
        assert_true(raw->nnz != S.payload->update->nnz ||
                    memcmp(raw->val, S.payload->update->val, raw->nnz * sizeof(double)) != 0);
        sfl_spvec_free(raw);
        S.task.has_moments = 1;
    }
    stop_agent();
}

static void test_agent_refuses_bad_signature(void **state)
{
    static const uint8_t garbage[] = {0x0a, 0x03, 0xff, 0xff, 0xff};
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.script[S.nscript++] = SUB_BADTASK;
    agent_cfg(&c, "st-badsig", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(st->tasks_refused == 1);
    run_for(100);
    assert_int_equal(S.submits, 0);
    assert_int_equal(st->trained, 0);
    assert_int_equal(agent_state(S.agent), AGENT_SUBSCRIBED);
    assert_true(log_has("event=task_refused job=1 round=3 attempt=0 reason=\"signature does "
                        "not verify"));
    /* Garbage on the stream is refused too, and the stream stays usable. */
    assert_non_null(S.held);
    assert_int_equal(sfl_grpc_send(S.held, garbage, sizeof(garbage)), 0);
    RUN_UNTIL(st->tasks_refused == 2);
    assert_true(log_has("reason=malformed"));
    assert_int_equal(agent_state(S.agent), AGENT_SUBSCRIBED);
    /* The properly signed task on the same stream is trained. */
    assert_int_equal(sfl_grpc_send(S.held, S.task_msg, S.task_len), 0);
    RUN_UNTIL(S.payload != NULL && agent_state(S.agent) == AGENT_SUBSCRIBED);
    expect_payload_is_reference(reg_path);
    assert_int_equal(S.submits, 1);
    assert_int_equal(S.subscribes, 1);
    assert_int_equal(st->backoffs, 0);
    stop_agent();
}

static void test_agent_wait_resubscribes(void **state)
{
    static const agent_state_t path[] = {AGENT_JOINING, AGENT_WAITING, AGENT_SUBSCRIBED,
                                         AGENT_WAITING, AGENT_SUBSCRIBED, AGENT_TRAINING};
    agent_config_t c;
    uint64_t gap;

    (void)state;
    S.join_retry_ms = 60; /* pace steering before the first Subscribe */
    S.wait_ms = 150;
    S.script[S.nscript++] = SUB_WAIT;
    S.script[S.nscript++] = SUB_TASK;
    agent_cfg(&c, "st-wait", reg_path);
    c.log_level = SFL_LOG_DEBUG; /* the per-round lines too */
    start_agent(&c);
    RUN_UNTIL(S.payload != NULL);
    assert_int_equal(S.subscribes, 2);
    assert_int_equal(agent_stats(S.agent)->waits, 1);
    /* The delay drawn is retry_after plus at most 10% of jitter, and the
     * Subscribe never comes sooner (a loaded machine may make it later:
     * no upper bound on the elapsed time). */
    assert_true(S.sub_delay[0] >= 60 && S.sub_delay[0] <= 60 + 6);
    gap = S.sub_at[0] - S.join_at[0];
    assert_true(gap >= 60);
    assert_true(S.sub_delay[1] >= 150 && S.sub_delay[1] <= 150 + 15);
    gap = S.sub_at[1] - S.sub_at[0];
    assert_true(gap >= 150);
    assert_true(seen_in_order(path, 6));
    assert_int_equal(S.joins, 1);
    assert_int_equal(agent_stats(S.agent)->backoffs, 0);
    expect_payload_is_reference(reg_path);
    RUN_UNTIL(log_has("level=debug event=ack job=1 round=3 attempt=0 status=accepted"));
    assert_true(log_has("level=debug event=wait retry_after_ms=150 reason=\"not selected\""));
    assert_true(log_has("level=debug event=training job=1 round=3 "));
    assert_true(log_has("level=debug event=submitting job=1 round=3 "));
    stop_agent();
}

static void test_agent_reconnects_with_backoff(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.script[S.nscript++] = SUB_CLOSE;
    S.script[S.nscript++] = SUB_CLOSE;
    S.script[S.nscript++] = SUB_TASK;
    agent_cfg(&c, "st-reconnect", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(S.payload != NULL && st->acks[SFL_ACK_ACCEPTED] == 1);
    assert_int_equal(S.accepted, 3);
    assert_int_equal(S.joins, 3);
    assert_int_equal(st->backoffs, 2);
    assert_int_equal(st->connects, 3);
    /* Every Join resets the backoff, so each delay is the first one:
     * [backoff_min, 2 backoff_min]. */
    assert_int_equal(S.nbackoff, 2);
    for (int i = 0; i < 2; i++) {
        uint64_t gap = S.conn_at[i + 1] - S.conn_at[i];

        assert_true(S.backoff_ms[i] >= 20 && S.backoff_ms[i] <= 40);
        assert_true(gap >= S.backoff_ms[i]);
    }
    assert_true(log_has("event=disconnected"));
    expect_payload_is_reference(reg_path);
    stop_agent();
}

/* coordinator = A,B: a failed connect to A (nothing listens there: a
 * standby master) moves the agent on to B, where it joins and submits. */
static void test_agent_tries_next_address(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.script[S.nscript++] = SUB_TASK;
    agent_cfg(&c, "st-addrs", reg_path);
    snprintf(c.coordinator, sizeof(c.coordinator), "127.0.0.1:1,127.0.0.1:%d", S.port);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(S.payload != NULL && st->acks[SFL_ACK_ACCEPTED] == 1);
    assert_true(st->connect_fails >= 1);
    assert_int_equal(st->connects, 1);
    assert_int_equal(S.joins, 1);
    assert_true(log_has("coordinator=127.0.0.1:1"));
    expect_payload_is_reference(reg_path);
    stop_agent();
}

static void test_agent_resubmits_after_reconnect(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.submit_close = 1; /* the first SubmitUpdate: UNAVAILABLE, connection dropped */
    S.script[S.nscript++] = SUB_TASK;
    agent_cfg(&c, "st-resubmit", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(st->acks[SFL_ACK_ACCEPTED] == 1 && agent_state(S.agent) == AGENT_SUBSCRIBED);
    /* The same sealed bytes went again after the rejoin, before any new
     * Subscribe; the task was trained once. */
    assert_int_equal(S.submits, 2);
    assert_int_equal(S.joins, 2);
    assert_int_equal(st->trained, 1);
    assert_int_equal(st->submits, 2);
    assert_int_equal(S.sealed_len[0], S.sealed_len[1]);
    assert_memory_equal(S.sealed[0], S.sealed[1], S.sealed_len[0]);
    RUN_UNTIL(S.subscribes == 2);
    assert_true(S.sub_at[1] >= S.join_at[1]);
    expect_payload_is_reference(reg_path);
    stop_agent();
}

static void test_agent_survives_coordinator_restart(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;
    int port;

    (void)state;
    agent_cfg(&c, "st-restart", reg_path);
    start_agent(&c);
    st = agent_stats(S.agent);
    RUN_UNTIL(agent_state(S.agent) == AGENT_SUBSCRIBED);
    /* The coordinator dies: connections refused, delays grow and stay
     * within [backoff_min, backoff_max] = [20, 80]. */
    port = S.port;
    coordinator_kill();
    RUN_UNTIL(S.nbackoff >= 4);
    assert_true(st->connect_fails >= 3);
    for (int i = 0; i < S.nbackoff; i++) {
        uint64_t hi = 20u << (i + 1), lo;

        if (hi > 80)
            hi = 80;
        lo = hi / 2 > 20 ? hi / 2 : 20;
        assert_true(S.backoff_ms[i] >= lo && S.backoff_ms[i] <= hi);
    }
    /* It comes back on the same port with a new round: the agent rejoins,
     * resubscribes and trains what the new coordinator sends. */
    new_round(4);
    S.script[S.subscribes] = SUB_TASK;
    S.nscript = S.subscribes + 1;
    listen_on(port);
    RUN_UNTIL(S.payload != NULL && st->acks[SFL_ACK_ACCEPTED] == 1);
    assert_int_equal(S.joins, 2);
    assert_int_equal(st->joins, 2);
    expect_payload_is_reference(reg_path);
    assert_int_equal(S.task.round, 4);
    stop_agent();
}

/* A coordinator presenting another key than coordinator_pk: retrying
 * cannot fix that, so the agent gives up after the first Join (one fatal
 * line naming the fix), stops by itself and calls the fatal callback. */
static void test_agent_rejects_unpinned_coordinator(void **state)
{
    agent_config_t c;
    const agent_stats_t *st;

    (void)state;
    S.join_wrong_key = 1;
    agent_cfg(&c, "st-pin", reg_path);
    assert_int_equal(agent_new(&S.loop, &c, &S.agent), 0);
    agent_set_log(S.agent, S.log);
    agent_set_observer(S.agent, observe, NULL);
    agent_set_fatal(S.agent, on_stopped, NULL);
    assert_int_equal(agent_start(S.agent), 0);
    st = agent_stats(S.agent);
    RUN_UNTIL(S.stopped);
    assert_int_equal(S.joins, 1);
    assert_int_equal(st->joins, 0);
    assert_int_equal(S.subscribes, 0);
    assert_int_equal(st->backoffs, 0);
    assert_int_equal(agent_failed(S.agent), SFL_EBADSIG);
    assert_int_equal(agent_state(S.agent), AGENT_DISCONNECTED);
    assert_true(log_has("event=coordinator_key_mismatch"));
    assert_true(log_has("event=fatal during=join"));
    assert_true(log_has("--public-key"));
    assert_true(log_has("exit_status=3"));
    /* a stop after it does nothing */
    agent_stop(S.agent, on_stopped, NULL);
    agent_free(S.agent);
    S.agent = NULL;
    S.join_wrong_key = 0;
}

/* Which errors end the agent (exit 3) and which are retried (issue 24,
 * item 4): a revoked certificate, said in a gRPC status on the verified
 * connection, on any call; the coordinator's alert on our expired
 * certificate (final when our clock agrees: decided by the agent);
 * certificates refused for what they are; the rest is retried. */
static void test_agent_error_class(void **state)
{
    static const struct {
        const char *what;
        int status;
        const char *message;
        agent_err_t want;
        const char *fix; /* a piece of it, or NULL */
    } cases[] = {
        {"join", SFL_GRPC_STATUS_PERMISSION_DENIED,
         SFL_MSG_REVOKED " (fingerprint 00ff)", AGENT_ERR_REVOKED, "revoked this agent's"},
        {"subscribed", SFL_GRPC_STATUS_UNAUTHENTICATED, SFL_MSG_REVOKED, AGENT_ERR_REVOKED,
         "ask the operator"},
        /* the words without the status, or another status: not revoked */
        {"subscribed", SFL_GRPC_STATUS_UNAVAILABLE, SFL_MSG_REVOKED, AGENT_ERR_RETRY, NULL},
        {"connect", -ECONNRESET, SFL_MSG_REVOKED, AGENT_ERR_RETRY, NULL},
        /* what the old coordinator left an agent with: retried */
        {"join", -EPIPE, "Broken pipe", AGENT_ERR_RETRY, NULL},
        {"join", -ENOTCONN, "Transport endpoint is not connected", AGENT_ERR_RETRY, NULL},
        {"connect", -EPROTO, "tls read 1.2.3.4:7443: sslv3 alert certificate expired",
         AGENT_ERR_EXPIRED, "validity dates"},
        /* the coordinator's certificate expired by our clock: retried */
        {"connect", -EPROTO, "tls handshake x: certificate verify failed (certificate has expired)",
         AGENT_ERR_RETRY, NULL},
        {"connect", SFL_ECERT, "tls read x: tlsv1 alert unknown ca", AGENT_ERR_PERMANENT,
         "does not know the CA"},
        {"connect", SFL_ECERT, "tls read x: sslv3 alert bad certificate", AGENT_ERR_PERMANENT,
         "refused this agent's certificate"},
        {"connect", SFL_ECERT, "tls handshake x: certificate verify failed (hostname mismatch)",
         AGENT_ERR_PERMANENT, "server_name"},
        {"join", SFL_GRPC_STATUS_PERMISSION_DENIED, "/sfl.v1.Coordinator/Join needs a "
         "certificate with role agent, not admin", AGENT_ERR_PERMANENT, "role"},
        {"join", SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down", AGENT_ERR_RETRY,
         NULL},
        {"connect", -ETIMEDOUT, NULL, AGENT_ERR_RETRY, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *fix = "unset";
        agent_err_t got = agent_error_class(cases[i].what, cases[i].status, cases[i].message,
                                            &fix);

        if (got != cases[i].want)
            fail_msg("case %zu (%s): class %d, want %d", i, cases[i].message ? cases[i].message
                     : "-", (int)got, (int)cases[i].want);
        if (cases[i].fix == NULL)
            assert_null(fix);
        else
            assert_non_null(strstr(fix, cases[i].fix));
    }
}

static void test_agent_stop_while_reconnecting(void **state)
{
    agent_config_t c;

    (void)state;
    agent_cfg(&c, "st-stop", reg_path);
    c.backoff_min_ms = c.backoff_max_ms = 2000;
    coordinator_kill();
    start_agent(&c);
    RUN_UNTIL(agent_state(S.agent) == AGENT_BACKOFF);
    stop_agent(); /* long before the 2 s delay */
    assert_false(S.timed_out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_backoff_delay),
        cmocka_unit_test(test_agent_error_class),
        cmocka_unit_test_setup_teardown(test_agent_task_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_train_task_matches_client_round, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_agent_train_task_eval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_statistics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_train_task_failalloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_new_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_new_eval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_new_failalloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_identity_created_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_trains_and_submits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_standardize_rejoins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_refuses_bad_signature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_wait_resubscribes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_reconnects_with_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_tries_next_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_resubmits_after_reconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_survives_coordinator_restart, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_agent_rejects_unpinned_coordinator, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_agent_stop_while_reconnecting, setup, teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

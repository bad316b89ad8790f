/* Records the seeds that come from real exchanges into tests/fuzz/corpus/
 * (make fuzz-capture; the files are committed, so this only runs when the
 * wire format changes):
 *   fuzz_grpc_server, fuzz_grpc_client: the two directions of one real
 *     in-memory gRPC session (client and server sessions pumping bytes to
 *     each other), with the calls and handlers those fuzzers use;
 *   fuzz_grpcframe: real packed messages in gRPC framing;
 *   fuzz_msg: every message type as the coordinator or agent packs it,
 *     behind the fuzzer's type byte;
 *   fuzz_seal: an update sealed and signed by the agent with the fuzzer's
 *     fixed keys, the golden identity file and signatures;
 *   fuzz_metrics: the requests curl and Prometheus send;
 *   fuzz_spcodec: a model as the coordinator encodes it in each encoding.
 * Every file is named real-<what>. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sodium.h>

#include "sfl/net/grpc.h"
#include "sfl/net/grpcframe.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/seal.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/vec.h"

static const char *root;

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "capture: %s: %s (%s)\n", what, sfl_strerror(rc), sfl_last_error());
        exit(1);
    }
}

/* root/fuzzer/real-name = prefix[0..np) | b[0..n) */
static void save(const char *fuzzer, const char *name, const void *prefix, size_t np,
                 const void *b, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, fuzzer);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/real-%s", root, fuzzer, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(prefix, 1, np, f) != np || fwrite(b, 1, n, f) != n ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static sfl_spvec_t *model(uint32_t dim, uint32_t nnz)
{
    sfl_spvec_t *v = NULL;

    check(sfl_spvec_new(dim, nnz, &v), "spvec");
    for (uint32_t i = 0; i < nnz; i++) {
        v->idx[i] = i * (dim / nnz) + 3;
        v->val[i] = (i % 2 ? -1.0 : 1.0) * (0.25 + 0.5 * i);
    }
    v->nnz = nnz;
    return v;
}

/* ---- messages ------------------------------------------------------------ */

static void msg(uint8_t type, const char *name, int rc, uint8_t *b, size_t n)
{
    check(rc, name);
    save("fuzz_msg", name, &type, 1, b, n);
    sfl_msg_buf_free(b);
}

static void job(sfl_job_status_t *j, uint64_t id)
{
    memset(j, 0, sizeof(*j));
    j->job_id = id;
    snprintf(j->name, sizeof(j->name), "job-%llu", (unsigned long long)id);
    strcpy(j->algorithm, "fediterht");
    j->state = SFL_JOB_RUNNING;
    j->committed_round = 4;
    j->rounds = 40;
    j->round_state = SFL_ROUND_TRAINING;
    j->attempt = 0;
    j->selected = 8;
    j->accepted = 3;
    j->cohort_size = 8;
    j->min_quorum = 6;
    j->deadline_ms = 1764000000000LL;
    j->model_nnz = 20;
}

static void messages(void)
{
    uint8_t *b = NULL, *tb = NULL, sig[SFL_MSG_SIG_BYTES];
    size_t n = 0, tn = 0;
    sfl_spvec_t *m = model(1000, 20);
    sfl_identity_t *coord = NULL;
    uint8_t seed[32];

    memset(seed, 1, sizeof(seed));
    check(sfl_identity_from_seed(seed, &coord), "identity");

    sfl_join_req_t jr;
    memset(&jr, 0, sizeof(jr));
    for (int i = 0; i < 32; i++)
        jr.identity_key[i] = (uint8_t)(0x80 + i);
    check(sfl_msg_tags_add(&jr.capabilities, "arch:arm64"), "tag");
    check(sfl_msg_tags_add(&jr.conditions, "mains_power"), "tag");
    jr.dataset.samples = 1200;
    jr.dataset.dimension = 1000;
    jr.dataset.nlabels = 2;
    jr.dataset.labels[0] = -1;
    jr.dataset.labels[1] = 1;
    jr.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    strcpy(jr.agent_version, "sfl-agent 0.4.0");
    {
        /* a proof over a stand-in for the connection's exported bytes */
        uint8_t binding[SFL_SEAL_BINDING_BYTES];

        memset(binding, 0x5a, sizeof(binding));
        check(sfl_seal_sign_join(coord, binding, jr.proof), "join proof");
        jr.has_proof = 1;
    }
    msg(0, "join-request", sfl_msg_join_req_pack(&jr, &b, &n), b, n);

    sfl_join_reply_t jp = {.agent_id = 7, .heartbeat_interval_ms = 5000,
                           .protocol_version = SFL_MSG_PROTOCOL_VERSION};
    memcpy(jp.coordinator_key, coord->pk, 32);
    msg(1, "join-reply", sfl_msg_join_reply_pack(&jp, &b, &n), b, n);

    sfl_subscribe_req_t sr;
    memset(&sr, 0, sizeof(sr));
    sr.agent_id = 7;
    check(sfl_msg_tags_add(&sr.conditions, "mains_power"), "tag");
    msg(2, "subscribe-request", sfl_msg_subscribe_req_pack(&sr, &b, &n), b, n);

    /* A task as the coordinator signs and sends it, and a wait. */
    sfl_task_t t;
    memset(&t, 0, sizeof(t));
    t.job_id = 1;
    t.round = 3;
    strcpy(t.algorithm, "fediterht");
    memset(&t.params, 0, sizeof(t.params));
    if (sfl_param_list_set(&t.params, "tau", 20) < 0)
        exit(1);
    strcpy(t.loss, "logistic");
    t.dimension = 1000;
    t.nlabels = 2;
    t.labels[0] = -1;
    t.labels[1] = 1;
    t.seed = 7;
    t.value_encoding = SFL_ENC_F32;
    t.update_mode = SFL_UPDATE_MODE_SEALED;
    t.model = m;
    t.model_encoding = SFL_ENC_F64;
    t.deadline_ms = 1764000030000LL;
    for (int i = 0; i < 32; i++) {
        t.round_nonce[i] = (uint8_t)(0x40 + i);
        t.round_key[i] = (uint8_t)i;
    }
    check(sfl_msg_task_sign_bytes(&t, &tb, &tn), "task bytes");
    check(sfl_seal_sign_detached(coord, SFL_MSG_TASK_CONTEXT, tb, tn, sig), "sign task");
    msg(3, "task", sfl_msg_task_pack(&t, tb, tn, sig, &b, &n), b, n);
    sfl_msg_buf_free(tb);
    t.model_encoding = SFL_ENC_Q8;
    check(sfl_msg_task_sign_bytes(&t, &tb, &tn), "task bytes");
    check(sfl_seal_sign_detached(coord, SFL_MSG_TASK_CONTEXT, tb, tn, sig), "sign task");
    msg(3, "task-q8", sfl_msg_task_pack(&t, tb, tn, sig, &b, &n), b, n);
    sfl_msg_buf_free(tb);
    sfl_wait_t w = {.retry_after_ms = 2000};
    strcpy(w.reason, "not selected this round");
    msg(3, "wait", sfl_msg_wait_pack(&w, &b, &n), b, n);

    /* The payload an agent seals (dimension: fuzz_msg's PAYLOAD_DIM). */
    sfl_payload_t p = {.update = m, .encoding = SFL_ENC_F32, .samples = 1200,
                       .train_loss = 0.6931};
    msg(5, "payload", sfl_msg_payload_pack(&p, &b, &n), b, n);
    p.encoding = SFL_ENC_Q8;
    msg(5, "payload-q8", sfl_msg_payload_pack(&p, &b, &n), b, n);

    uint8_t sealed[64];
    for (size_t i = 0; i < sizeof(sealed); i++)
        sealed[i] = (uint8_t)(i * 37);
    sfl_update_t u = {.job_id = 1, .round = 3, .agent_id = 7, .mode = SFL_UPDATE_MODE_SEALED,
                      .sealed = sealed, .sealed_len = sizeof(sealed)};
    msg(4, "update", sfl_msg_update_pack(&u, &b, &n), b, n);

    sfl_ack_t a = {.status = SFL_ACK_ACCEPTED, .job_id = 1, .round = 3};
    msg(6, "ack", sfl_msg_ack_pack(&a, &b, &n), b, n);
    a.status = SFL_ACK_REJECTED;
    strcpy(a.reason, "signature does not verify");
    msg(6, "ack-rejected", sfl_msg_ack_pack(&a, &b, &n), b, n);

    sfl_heartbeat_req_t hr;
    memset(&hr, 0, sizeof(hr));
    hr.agent_id = 7;
    hr.phase = SFL_PHASE_TRAINING;
    hr.job_id = 1;
    hr.round = 3;
    hr.progress_permille = 500;
    check(sfl_msg_tags_add(&hr.conditions, "mains_power"), "tag");
    msg(7, "heartbeat-request", sfl_msg_heartbeat_req_pack(&hr, &b, &n), b, n);
    sfl_heartbeat_reply_t hp = {.interval_ms = 5000, .abort = 0, .deadline_ms = 1764000030000LL};
    msg(8, "heartbeat-reply", sfl_msg_heartbeat_reply_pack(&hp, &b, &n), b, n);

    sfl_job_spec_t s;
    memset(&s, 0, sizeof(s));
    strcpy(s.name, "colon-fediterht");
    strcpy(s.algorithm, "fediterht");
    memset(&s.params, 0, sizeof(s.params));
    if (sfl_param_list_set(&s.params, "tau", 20) < 0)
        exit(1);
    strcpy(s.loss, "logistic");
    s.dimension = 2000;
    s.nlabels = 2;
    s.labels[0] = -1;
    s.labels[1] = 1;
    s.rounds = 40;
    s.cohort_size = 8;
    s.over_selection = 0.25;
    s.min_quorum = 6;
    s.round_deadline_ms = 30000;
    s.value_encoding = SFL_ENC_F32;
    s.seed = 7;
    s.max_attempts = 3;
    s.heartbeat_timeout_ms = 20000;
    s.ordered_aggregation = 1;
    msg(9, "create-job", sfl_msg_create_job_pack(&s, &b, &n), b, n);
    msg(10, "job-request", sfl_msg_job_req_pack(1, &b, &n), b, n);

    sfl_job_status_t js[3];
    for (int i = 0; i < 3; i++)
        job(&js[i], (uint64_t)i + 1);
    msg(11, "job-reply", sfl_msg_job_reply_pack(&js[0], &b, &n), b, n);
    msg(12, "status-request", sfl_msg_status_req_pack(&b, &n), b, n);
    sfl_status_t st = {.started_ms = 1764000000000LL, .connected_agents = 8,
                       .known_agents = 9, .updates_accepted = 120, .updates_rejected = 1,
                       .bytes_in = 123456, .bytes_out = 654321, .njobs = 3, .jobs = js};
    strcpy(st.version, "0.4.0");
    msg(13, "status", sfl_msg_status_pack(&st, &b, &n), b, n);
    sfl_job_list_t jl = {.n = 3, .jobs = js};
    msg(14, "job-list", sfl_msg_job_list_pack(&jl, &b, &n), b, n);
    msg(15, "list-agents-request", sfl_msg_list_agents_req_pack(1, &b, &n), b, n);

    sfl_agent_info_t ag[2];
    memset(ag, 0, sizeof(ag));
    for (int i = 0; i < 2; i++) {
        ag[i].agent_id = (uint64_t)i + 7;
        snprintf(ag[i].subject, sizeof(ag[i].subject), "agent-%d", i);
        ag[i].connected = 1;
        check(sfl_msg_tags_add(&ag[i].conditions, "mains_power"), "tag");
        ag[i].dataset.samples = 1200;
        ag[i].dataset.dimension = 2000;
        ag[i].last_seen_ms = 1764000000000LL;
        ag[i].phase = SFL_PHASE_IDLE;
        strcpy(ag[i].agent_version, "sfl-agent 0.4.0");
    }
    sfl_agent_list_t al = {.n = 2, .agents = ag};
    msg(16, "agent-list", sfl_msg_agent_list_pack(&al, &b, &n), b, n);
    msg(17, "export-request", sfl_msg_export_req_pack(1, 0, &b, &n), b, n);
    sfl_export_t ex = {.job_id = 1, .round = 40, .dimension = 1000, .nlabels = 2, .model = m};
    strcpy(ex.algorithm, "fediterht");
    strcpy(ex.loss, "logistic");
    ex.labels[0] = -1;
    ex.labels[1] = 1;
    msg(18, "export", sfl_msg_export_pack(&ex, &b, &n), b, n);

    /* The model as spcodec bytes, each encoding. */
    static const char *const enc_name[] = {"f64", "f32", "q8"};
    for (int e = 0; e < 3; e++) {
        size_t len = sfl_spcodec_size(m, (sfl_enc_t)e), got = 0;
        uint8_t *buf = malloc(len);

        if (buf == NULL)
            exit(1);
        check(sfl_spcodec_encode(m, (sfl_enc_t)e, buf, len, &got), "encode");
        char name[32];
        snprintf(name, sizeof(name), "model-%s", enc_name[e]);
        save("fuzz_spcodec", name, "", 0, buf, got);
        free(buf);
    }

    /* gRPC framing of three of them (fuzz_grpcframe: limit byte, chunk). */
    {
        uint8_t fr[4096], hdr[2] = {0xff, 0x04};
        size_t off = 0, fw = 0;
        uint8_t *p1 = NULL, *p2 = NULL;
        size_t n1 = 0, n2 = 0;

        check(sfl_msg_join_req_pack(&jr, &p1, &n1), "join");
        check(sfl_msg_heartbeat_req_pack(&hr, &p2, &n2), "heartbeat");
        check(sfl_grpcframe_encode(p1, n1, fr + off, sizeof(fr) - off, &fw), "frame");
        off += fw;
        check(sfl_grpcframe_encode(p2, n2, fr + off, sizeof(fr) - off, &fw), "frame");
        off += fw;
        check(sfl_grpcframe_encode((const uint8_t *)"", 0, fr + off, sizeof(fr) - off, &fw), "frame");
        off += fw;
        save("fuzz_grpcframe", "messages", hdr, 2, fr, off);
        sfl_msg_buf_free(p1);
        sfl_msg_buf_free(p2);
    }
    sfl_identity_free(coord);
    sfl_spvec_free(m);
}

/* ---- sealed update (keys and context as in fuzz_seal.c) ------------------ */

static const uint8_t rfc_seed[32] = {
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
};

static void sealing(void)
{
    sfl_identity_t *agent = NULL;
    uint8_t seed[crypto_box_SEEDBYTES], sk[crypto_box_SECRETKEYBYTES];
    sfl_upd_ctx_t c;
    sfl_spvec_t *m = model(1000, 20);
    sfl_payload_t p = {.update = m, .encoding = SFL_ENC_F32, .samples = 1200,
                       .train_loss = 0.6931};
    uint8_t *payload = NULL, *sealed;
    size_t n = 0, len = 0;
    char keyfile[SFL_IDENTITY_FILE_BYTES + 1], hex[65];

    check(sfl_identity_from_seed(rfc_seed, &agent), "identity");
    for (size_t i = 0; i < sizeof(seed); i++)
        seed[i] = (uint8_t)(0xa0 + i);
    memset(&c, 0, sizeof(c));
    if (crypto_box_seed_keypair(c.round_pk, sk, seed) != 0)
        exit(1);
    c.job = 1;
    c.round = 3;
    for (size_t i = 0; i < sizeof(c.nonce); i++)
        c.nonce[i] = (uint8_t)(0x40 + i);
    c.agent_id = 7;
    sfl_seal_hash("global model bytes", 18, c.model_hash);
    check(sfl_msg_payload_pack(&p, &payload, &n), "payload");
    sealed = malloc(n + SFL_SEAL_OVERHEAD);
    if (sealed == NULL)
        exit(1);
    check(sfl_seal_update(agent, &c, payload, n, sealed, n + SFL_SEAL_OVERHEAD, &len), "seal");
    save("fuzz_seal", "sealed-update", "\x01", 1, sealed, len);
    save("fuzz_seal", "seal-payload", "\x02\x00\x00", 3, payload, n);

    /* The identity file as sfl_identity_save writes it. */
    snprintf(keyfile, sizeof(keyfile), "sfl-identity-v1\n%s\n", "9d61b19deffd5a60ba844af492ec"
             "2cc44449c5697b326919703bac031cae7f60");
    snprintf(keyfile + 81, sizeof(keyfile) - 81, "%s\n", sfl_seal_pk_to_hex(agent->pk, hex));
    save("fuzz_seal", "identity", "\x00", 1, keyfile, SFL_IDENTITY_FILE_BYTES);

    /* A task signature: u8 n | context | sig | pk | msg. */
    {
        uint8_t rec[1 + 11 + 64 + 32 + 64];
        const char *ctx = SFL_MSG_TASK_CONTEXT;

        rec[0] = 11;
        memcpy(rec + 1, ctx, 11);
        memcpy(rec + 12 + 64, agent->pk, 32);
        memcpy(rec + 12 + 96, payload, 64);
        check(sfl_seal_sign_detached(agent, ctx, payload, 64, rec + 12), "sign");
        save("fuzz_seal", "task-signature", "\x03", 1, rec, sizeof(rec));
    }
    /* An update signature: sig | round_pk | job | round | nonce | agent |
     * model_hash | payload. */
    {
        uint8_t rec[64 + 120];

        check(sfl_seal_sign_update(agent, &c, payload, n, rec), "sign update");
        memcpy(rec + 64, c.round_pk, 32);
        memcpy(rec + 96, &c.job, 8);
        memcpy(rec + 104, &c.round, 8);
        memcpy(rec + 112, c.nonce, 32);
        memcpy(rec + 144, &c.agent_id, 8);
        memcpy(rec + 152, c.model_hash, 32);
        save("fuzz_seal", "update-signature", "\x04", 1, rec, sizeof(rec));
        /* payload follows the record */
        char path[512];
        snprintf(path, sizeof(path), "%s/fuzz_seal/real-update-signature", root);
        FILE *f = fopen(path, "ab");
        if (f == NULL || fwrite(payload, 1, n, f) != n || fclose(f) != 0)
            exit(1);
    }
    sodium_memzero(sk, sizeof(sk));
    sfl_msg_buf_free(payload);
    free(sealed);
    sfl_spvec_free(m);
    sfl_identity_free(agent);
}

/* ---- a gRPC session (methods and calls as in the two session fuzzers) ---- */

static uint64_t now_ms = 1000;

static uint64_t clk(void *ud)
{
    (void)ud;
    return now_ms;
}

static void h_echo(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud)
{
    (void)ud;
    (void)sfl_grpc_reply(c, r, n);
}

static sfl_grpc_call_t *held;

static void h_hold(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud)
{
    (void)ud;
    (void)r;
    (void)n;
    held = c;
}

static void h_stream(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud)
{
    (void)ud;
    for (int i = 0; i < 3; i++)
        (void)sfl_grpc_send(c, r, n);
    (void)sfl_grpc_finish(c, 0, NULL);
}

static void c_unary(sfl_grpc_call_t *c, int st, const char *m, const uint8_t *r, size_t n,
                    void *ud)
{
    (void)c, (void)st, (void)m, (void)r, (void)n, (void)ud;
}

static void c_msg(sfl_grpc_call_t *c, const uint8_t *r, size_t n, void *ud)
{
    (void)c, (void)r, (void)n, (void)ud;
}

static void c_done(sfl_grpc_call_t *c, int st, const char *m, void *ud)
{
    (void)c, (void)st, (void)m, (void)ud;
}

typedef struct {
    uint8_t *b;
    size_t n, cap;
} rec_t;

static int move(sfl_grpc_session_t *from, sfl_grpc_session_t *to, rec_t *r)
{
    const uint8_t *buf;
    size_t n;

    if (sfl_grpc_session_pending(from, &buf, &n) != 0 || n == 0)
        return 0;
    if (r->n + n > r->cap) {
        r->cap = 2 * (r->n + n);
        r->b = realloc(r->b, r->cap);
        if (r->b == NULL)
            exit(1);
    }
    memcpy(r->b + r->n, buf, n);
    r->n += n;
    (void)sfl_grpc_session_feed(to, buf, n);
    sfl_grpc_session_consumed(from, n);
    return 1;
}

static void pump(sfl_grpc_session_t *cli, sfl_grpc_session_t *srv, rec_t *up, rec_t *down)
{
    for (int i = 0; i < 1000; i++)
        if (!(move(cli, srv, up) | move(srv, cli, down)))
            return;
}

/* The calls of fuzz_grpc_client (unary E, stream S, unary E), then a held
 * call finished by the server and a cancelled one; req are the bodies. */
static void session(const char *name, const uint8_t *req, size_t rlen)
{
    static const sfl_grpc_method_t methods[] = {
        {"/a/E", SFL_GRPC_KIND_UNARY, h_echo, 0, NULL, 0},
        {"/a/H", SFL_GRPC_KIND_SERVER_STREAM, h_hold, 0, NULL, 0},
        {"/a/S", SFL_GRPC_KIND_SERVER_STREAM, h_stream, 0, NULL, 0},
    };
    sfl_grpc_config_t scfg = {.now_ms = clk, .max_message = 4096, .max_streams = 8};
    sfl_grpc_config_t ccfg = {.now_ms = clk, .max_message = 4096};
    sfl_grpc_session_t *srv = NULL, *cli = NULL;
    sfl_grpc_call_t *sc = NULL, *hc = NULL;
    rec_t up = {0}, down = {0};
    char nm[64];

    held = NULL;
    check(sfl_grpc_server_new(&scfg, methods, 3, NULL, &srv), "server");
    check(sfl_grpc_client_new(&ccfg, "http", "x", &cli), "client");
    check(sfl_grpc_call_unary(cli, "/a/E", req, rlen, 300, c_unary, NULL, NULL), "unary");
    check(sfl_grpc_call_stream(cli, "/a/S", req, rlen, 0, c_msg, c_done, NULL, &sc), "stream");
    check(sfl_grpc_call_unary(cli, "/a/E", req, rlen, 0, c_unary, NULL, NULL), "unary");
    pump(cli, srv, &up, &down);
    check(sfl_grpc_call_stream(cli, "/a/H", req, rlen, 0, c_msg, c_done, NULL, &hc), "hold");
    pump(cli, srv, &up, &down);
    if (held != NULL) {
        (void)sfl_grpc_send(held, req, rlen);
        (void)sfl_grpc_finish(held, 0, NULL);
        held = NULL;
    }
    pump(cli, srv, &up, &down);
    check(sfl_grpc_call_stream(cli, "/a/H", req, rlen, 0, c_msg, c_done, NULL, &hc), "hold");
    pump(cli, srv, &up, &down);
    sfl_grpc_cancel(hc);
    pump(cli, srv, &up, &down);
    if (held != NULL) /* cancelled, but still the handler's to finish */
        (void)sfl_grpc_finish(held, 0, NULL);
    check(sfl_grpc_call_unary(cli, "/a/Unknown", req, rlen, 0, c_unary, NULL, NULL), "unknown");
    pump(cli, srv, &up, &down);
    sfl_grpc_session_shutdown(srv);
    pump(cli, srv, &up, &down);
    /* fuzz_grpc_server: byte 0 even = the preface is in the bytes. */
    snprintf(nm, sizeof(nm), "%s", name);
    save("fuzz_grpc_server", nm, "\x00", 1, up.b, up.n);
    save("fuzz_grpc_client", nm, "", 0, down.b, down.n);
    free(up.b);
    free(down.b);
    sfl_grpc_session_free(cli);
    sfl_grpc_session_free(srv);
}

static void sessions(void)
{
    sfl_join_req_t jr;
    uint8_t *b = NULL;
    size_t n = 0;

    session("session", (const uint8_t *)"hi", 2);
    memset(&jr, 0, sizeof(jr));
    jr.identity_key[0] = 1;
    jr.dataset.samples = 10;
    jr.dataset.dimension = 5;
    jr.protocol_version = SFL_MSG_PROTOCOL_VERSION;
    check(sfl_msg_join_req_pack(&jr, &b, &n), "join");
    session("session-join", b, n);
    sfl_msg_buf_free(b);
}

static void http(void)
{
    static const char curl[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\n"
                               "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n";
    static const char prom[] =
        "GET /metrics HTTP/1.1\r\nHost: coordinator:9464\r\nUser-Agent: Prometheus/2.42.0\r\n"
        "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
        "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n";
    static const char head[] = "HEAD /metrics HTTP/1.0\n\n";

    /* byte 0: reads of 16 bytes (curl), 1 byte (Prometheus), 8 (HEAD). */
    save("fuzz_metrics", "curl", "\x0f", 1, curl, sizeof(curl) - 1);
    save("fuzz_metrics", "prometheus", "\x00", 1, prom, sizeof(prom) - 1);
    save("fuzz_metrics", "head", "\x07", 1, head, sizeof(head) - 1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: capture CORPUS_DIR\n");
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        perror(root);
        return 1;
    }
    messages();
    sealing();
    sessions();
    http();
    return 0;
}

/* libFuzzer: every wire message the coordinator or the agent unpacks
 * (sfl_msg_*_unpack, msg.h). Byte 0 picks the message type (modulo the
 * table size), the rest are the message bytes; seeds in
 * tests/fuzz/corpus/fuzz_msg/ are real packed messages behind their type
 * byte (tests/fuzz/capture.c).
 *
 * Beyond "no crash, no leak": whatever unpacks must pack again (unpack
 * accepts nothing that pack would refuse to send) and the packed bytes must
 * unpack to the same struct, so the two sides agree on every check. Small
 * limits so the fuzzer reaches every limit check, and bounded memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/wire/msg.h"
#include "sfl/core/vec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sfl_msg_limits_t lim = {
    .max_message = 1 << 16,
    .max_dim = 1 << 20,
    .max_nnz = 4096,
    .max_items = 64,
};

/* The payload's expected dimension: the coordinator passes the job's. */
#define PAYLOAD_DIM 1000

static void die(const char *what, int rc)
{
    fprintf(stderr, "fuzz_msg: %s: %s (%s)\n", what, sfl_strerror(rc), sfl_last_error());
    abort();
}

static int same_vec(const sfl_spvec_t *a, const sfl_spvec_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return a->dim == b->dim && a->nnz == b->nnz &&
           (a->nnz == 0 || (memcmp(a->idx, b->idx, a->nnz * sizeof(*a->idx)) == 0 &&
                            memcmp(a->val, b->val, a->nnz * sizeof(*a->val)) == 0));
}

/* Structs filled in place: unpack, pack, unpack again, compare bytes (both
 * structs are zeroed by unpack first, padding included). */
#define FLAT(type, packfn, unpackfn)                                                  \
    static void fz_##unpackfn(const uint8_t *d, size_t n)                             \
    {                                                                                 \
        type a, b;                                                                    \
        uint8_t *buf = NULL;                                                          \
        size_t len = 0;                                                               \
        int rc;                                                                       \
                                                                                      \
        memset(&a, 0, sizeof(a));                                                     \
        memset(&b, 0, sizeof(b));                                                     \
        if (sfl_msg_##unpackfn(d, n, &lim, &a) != 0)                                  \
            return;                                                                   \
        if ((rc = sfl_msg_##packfn(&a, &buf, &len)) != 0)                             \
            die(#packfn " refused what " #unpackfn " accepted", rc);                  \
        if ((rc = sfl_msg_##unpackfn(buf, len, &lim, &b)) != 0)                       \
            die(#unpackfn " refused what " #packfn " made", rc);                      \
        if (memcmp(&a, &b, sizeof(a)) != 0)                                           \
            die(#unpackfn ": round trip changed the message", 0);                     \
        sfl_msg_buf_free(buf);                                                        \
    }

FLAT(sfl_join_req_t, join_req_pack, join_req_unpack)
FLAT(sfl_join_reply_t, join_reply_pack, join_reply_unpack)
FLAT(sfl_subscribe_req_t, subscribe_req_pack, subscribe_req_unpack)
FLAT(sfl_ack_t, ack_pack, ack_unpack)
FLAT(sfl_heartbeat_req_t, heartbeat_req_pack, heartbeat_req_unpack)
FLAT(sfl_heartbeat_reply_t, heartbeat_reply_pack, heartbeat_reply_unpack)
FLAT(sfl_job_spec_t, create_job_pack, create_job_unpack)
FLAT(sfl_job_status_t, job_reply_pack, job_reply_unpack)
FLAT(sfl_revoke_t, revoke_req_pack, revoke_req_unpack)
FLAT(sfl_revoke_t, revoke_reply_pack, revoke_reply_unpack)
FLAT(sfl_release_t, release_req_pack, release_req_unpack)
FLAT(sfl_release_t, release_reply_pack, release_reply_unpack)

static void fz_job_req(const uint8_t *d, size_t n)
{
    uint64_t a, b;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_job_req_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_job_req_pack(a, &buf, &len)) != 0)
        die("job_req_pack", rc);
    if ((rc = sfl_msg_job_req_unpack(buf, len, &lim, &b)) != 0 || a != b)
        die("job_req round trip", rc);
    sfl_msg_buf_free(buf);
}

static void fz_empty(const uint8_t *d, size_t n)
{
    (void)sfl_msg_status_req_unpack(d, n, &lim);
    (void)sfl_msg_list_jobs_req_unpack(d, n, &lim);
}

static void fz_list_agents_req(const uint8_t *d, size_t n)
{
    int a, b;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_list_agents_req_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_list_agents_req_pack(a, &buf, &len)) != 0)
        die("list_agents_req_pack", rc);
    if ((rc = sfl_msg_list_agents_req_unpack(buf, len, &lim, &b)) != 0 || a != b)
        die("list_agents_req round trip", rc);
    sfl_msg_buf_free(buf);
}

static void fz_export_req(const uint8_t *d, size_t n)
{
    uint64_t job, round, job2, round2;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_export_req_unpack(d, n, &lim, &job, &round) != 0)
        return;
    if ((rc = sfl_msg_export_req_pack(job, round, &buf, &len)) != 0)
        die("export_req_pack", rc);
    if ((rc = sfl_msg_export_req_unpack(buf, len, &lim, &job2, &round2)) != 0 || job != job2 ||
        round != round2)
        die("export_req round trip", rc);
    sfl_msg_buf_free(buf);
}

/* Task: re-sign the unpacked struct's bytes and wrap them again. */
static void fz_task_or_wait(const uint8_t *d, size_t n)
{
    sfl_task_t *t = NULL, *t2 = NULL;
    sfl_wait_t w, w2;
    uint8_t sig[SFL_MSG_SIG_BYTES], *tb = NULL, *buf = NULL;
    size_t tlen = 0, len = 0;
    int rc;

    memset(&w, 0, sizeof(w));
    memset(&w2, 0, sizeof(w2));
    if (sfl_msg_task_or_wait_unpack(d, n, &lim, &t, &w) != 0)
        return;
    if (t == NULL) {
        if ((rc = sfl_msg_wait_pack(&w, &buf, &len)) != 0)
            die("wait_pack refused an unpacked wait", rc);
        if ((rc = sfl_msg_task_or_wait_unpack(buf, len, &lim, &t2, &w2)) != 0 || t2 != NULL ||
            memcmp(&w, &w2, sizeof(w)) != 0)
            die("wait round trip", rc);
        sfl_msg_buf_free(buf);
        return;
    }
    memcpy(sig, t->signature, sizeof(sig));
    if ((rc = sfl_msg_task_sign_bytes(t, &tb, &tlen)) != 0)
        die("task_sign_bytes refused an unpacked task", rc);
    if ((rc = sfl_msg_task_pack(t, tb, tlen, sig, &buf, &len)) != 0)
        die("task_pack", rc);
    if ((rc = sfl_msg_task_or_wait_unpack(buf, len, &lim, &t2, &w2)) != 0 || t2 == NULL)
        die("task_or_wait_unpack refused a re-packed task", rc);
    /* q8 is lossy: re-encoding decoded q8 values may move one step. */
    if (t2->job_id != t->job_id || t2->round != t->round ||
        (t->model_encoding != SFL_ENC_Q8 && !same_vec(t->model, t2->model)) ||
        memcmp(t2->model_hash, t->model_hash, SFL_MSG_HASH_BYTES) != 0 ||
        memcmp(t2->signature, sig, sizeof(sig)) != 0 || t2->signed_len != tlen ||
        memcmp(t2->signed_bytes, tb, tlen) != 0)
        die("task round trip changed the task", 0);
    sfl_msg_buf_free(tb);
    sfl_msg_buf_free(buf);
    sfl_msg_task_free(t2);
    sfl_msg_task_free(t);
}

/* A Subscribe message that may be a vertical step: a step packs again to
 * the same step. */
static void fz_sub(const uint8_t *d, size_t n)
{
    sfl_task_t *t = NULL, *t2 = NULL;
    sfl_wait_t w, w2;
    sfl_vstep_t s, s2;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc, kind, kind2;

    sfl_msg_sa_stage_t a, a2;
    uint8_t *buf2 = NULL;
    size_t len2 = 0;

    memset(&s, 0, sizeof(s));
    memset(&s2, 0, sizeof(s2));
    memset(&a, 0, sizeof(a));
    memset(&a2, 0, sizeof(a2));
    if (sfl_msg_sub_unpack(d, n, &lim, &t, &w, &s, &a, &kind) != 0)
        return;
    sfl_msg_task_free(t);
    if (kind == 'a') {
        /* a secure aggregation stage packs to bytes that unpack and pack
         * to the same bytes */
        if ((rc = sfl_msg_sa_stage_pack(&a, &buf, &len)) != 0)
            die("sa_stage_pack refused an unpacked stage", rc);
        if ((rc = sfl_msg_sub_unpack(buf, len, &lim, &t2, &w2, &s2, &a2, &kind2)) != 0 ||
            kind2 != 'a' || (rc = sfl_msg_sa_stage_pack(&a2, &buf2, &len2)) != 0 ||
            len2 != len || memcmp(buf, buf2, len) != 0)
            die("secagg stage round trip changed it", rc);
        sfl_msg_buf_free(buf2);
        sfl_msg_buf_free(buf);
        sfl_msg_sa_stage_clear(&a2);
        sfl_msg_sa_stage_clear(&a);
        return;
    }
    if (kind != 's')
        return;
    if ((rc = sfl_msg_vstep_pack(&s, &buf, &len)) != 0)
        die("vstep_pack refused an unpacked step", rc);
    if ((rc = sfl_msg_sub_unpack(buf, len, &lim, &t2, &w2, &s2, NULL, &kind2)) != 0 ||
        kind2 != 's' ||
        s2.job_id != s.job_id || s2.round != s.round || s2.attempt != s.attempt ||
        s2.iteration != s.iteration || s2.nbcast != s.nbcast ||
        memcmp(s2.bcast, s.bcast, s.nbcast * sizeof(double)) != 0)
        die("step round trip changed the step", rc);
    sfl_msg_buf_free(buf);
    sfl_msg_vstep_clear(&s2);
    sfl_msg_vstep_clear(&s);
}

/* An agent's answer to a vertical iteration, and its values as the
 * coordinator decodes them (1 to 4 integers, the rest float64). */
static void fz_step_answer(const uint8_t *d, size_t n)
{
    sfl_step_answer_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL, *enc;
    double v[64];
    size_t len = 0;
    int rc;

    if (sfl_msg_step_answer_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_step_answer_pack(a, &buf, &len)) != 0)
        die("step_answer_pack refused an unpacked answer", rc);
    if ((rc = sfl_msg_step_answer_unpack(buf, len, &lim, &b)) != 0 || a->msg_len != b->msg_len ||
        memcmp(a->msg, b->msg, a->msg_len) != 0 || a->iteration != b->iteration)
        die("step answer round trip", rc);
    for (size_t ints = 0; ints <= 4; ints++) {
        size_t nv = a->msg_len >= 4 * ints ? ints + (a->msg_len - 4 * ints) / 8 : 0;

        if (nv == 0 || nv > 64 || sfl_msg_values_decode(a->msg, a->msg_len, nv, ints, v) != 0)
            continue;
        /* what decodes encodes back to the same bytes */
        if ((enc = malloc(a->msg_len)) == NULL)
            die("no memory", 0);
        if ((rc = sfl_msg_values_encode(v, nv, ints, enc)) != 0 ||
            memcmp(enc, a->msg, a->msg_len) != 0)
            die("values round trip", rc);
        free(enc);
    }
    sfl_msg_buf_free(buf);
    sfl_msg_step_answer_free(b);
    sfl_msg_step_answer_free(a);
}

/* An agent's answer to a secure aggregation stage: unpack, pack, unpack,
 * pack gives the same bytes. */
static void fz_sa_answer(const uint8_t *d, size_t n)
{
    sfl_msg_sa_answer_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    int rc;

    if (sfl_msg_sa_answer_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_sa_answer_pack(a, &buf, &len)) != 0)
        die("sa_answer_pack refused an unpacked answer", rc);
    if ((rc = sfl_msg_sa_answer_unpack(buf, len, &lim, &b)) != 0 ||
        (rc = sfl_msg_sa_answer_pack(b, &buf2, &len2)) != 0 || len2 != len ||
        memcmp(buf, buf2, len) != 0)
        die("secagg answer round trip changed it", rc);
    sfl_msg_buf_free(buf2);
    sfl_msg_buf_free(buf);
    sfl_msg_sa_answer_free(b);
    sfl_msg_sa_answer_free(a);
}

static void fz_update(const uint8_t *d, size_t n)
{
    sfl_update_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_update_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_update_pack(a, &buf, &len)) != 0)
        die("update_pack refused an unpacked update", rc);
    if ((rc = sfl_msg_update_unpack(buf, len, &lim, &b)) != 0)
        die("update round trip", rc);
    if (a->job_id != b->job_id || a->round != b->round || a->attempt != b->attempt ||
        a->agent_id != b->agent_id || a->mode != b->mode || a->sealed_len != b->sealed_len ||
        memcmp(a->sealed, b->sealed, a->sealed_len) != 0)
        die("update round trip changed the update", 0);
    sfl_msg_buf_free(buf);
    sfl_msg_update_free(b);
    sfl_msg_update_free(a);
}

static void fz_payload(const uint8_t *d, size_t n)
{
    sfl_payload_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_payload_unpack(d, n, &lim, PAYLOAD_DIM, &a) != 0)
        return;
    if ((rc = sfl_msg_payload_pack(a, &buf, &len)) != 0)
        die("payload_pack refused an unpacked payload", rc);
    if ((rc = sfl_msg_payload_unpack(buf, len, &lim, PAYLOAD_DIM, &b)) != 0)
        die("payload round trip", rc);
    if (a->encoding != b->encoding || a->samples != b->samples ||
        memcmp(&a->train_loss, &b->train_loss, sizeof(double)) != 0 ||
        (a->encoding != SFL_ENC_Q8 && !same_vec(a->update, b->update)))
        die("payload round trip changed the payload", 0);
    sfl_msg_buf_free(buf);
    sfl_msg_payload_free(b);
    sfl_msg_payload_free(a);
}

static void fz_status(const uint8_t *d, size_t n)
{
    sfl_status_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_status_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_status_pack(a, &buf, &len)) != 0)
        die("status_pack refused an unpacked status", rc);
    if ((rc = sfl_msg_status_unpack(buf, len, &lim, &b)) != 0)
        die("status round trip", rc);
    if (a->njobs != b->njobs ||
        (a->njobs > 0 && memcmp(a->jobs, b->jobs, a->njobs * sizeof(*a->jobs)) != 0))
        die("status round trip changed the jobs", 0);
    sfl_msg_buf_free(buf);
    sfl_msg_status_free(b);
    sfl_msg_status_free(a);
}

static void fz_job_list(const uint8_t *d, size_t n)
{
    sfl_job_list_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    int rc;

    if (sfl_msg_job_list_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_job_list_pack(a, &buf, &len)) != 0)
        die("job_list_pack refused an unpacked list", rc);
    if ((rc = sfl_msg_job_list_unpack(buf, len, &lim, &b)) != 0)
        die("job_list round trip", rc);
    if ((rc = sfl_msg_job_list_pack(b, &buf2, &len2)) != 0 || len2 != len ||
        memcmp(buf, buf2, len) != 0)
        die("job_list round trip changed the message", rc);
    sfl_msg_buf_free(buf2);
    sfl_msg_buf_free(buf);
    sfl_msg_job_list_free(b);
    sfl_msg_job_list_free(a);
}

static void fz_agent_list(const uint8_t *d, size_t n)
{
    sfl_agent_list_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    int rc;

    if (sfl_msg_agent_list_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_agent_list_pack(a, &buf, &len)) != 0)
        die("agent_list_pack refused an unpacked list", rc);
    if ((rc = sfl_msg_agent_list_unpack(buf, len, &lim, &b)) != 0)
        die("agent_list round trip", rc);
    if ((rc = sfl_msg_agent_list_pack(b, &buf2, &len2)) != 0 || len2 != len ||
        memcmp(buf, buf2, len) != 0)
        die("agent_list round trip changed the message", rc);
    sfl_msg_buf_free(buf2);
    sfl_msg_buf_free(buf);
    sfl_msg_agent_list_free(b);
    sfl_msg_agent_list_free(a);
}

static void fz_fleet(const uint8_t *d, size_t n)
{
    sfl_fleet_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    int rc;

    if (sfl_msg_fleet_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_fleet_pack(a, &buf, &len)) != 0)
        die("fleet_pack refused an unpacked fleet", rc);
    if ((rc = sfl_msg_fleet_unpack(buf, len, &lim, &b)) != 0)
        die("fleet round trip", rc);
    if ((rc = sfl_msg_fleet_pack(b, &buf2, &len2)) != 0 || len2 != len ||
        memcmp(buf, buf2, len) != 0)
        die("fleet round trip changed the message", rc);
    sfl_msg_buf_free(buf2);
    sfl_msg_buf_free(buf);
    sfl_msg_fleet_free(b);
    sfl_msg_fleet_free(a);
}

static void fz_export(const uint8_t *d, size_t n)
{
    sfl_export_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_export_unpack(d, n, &lim, &a) != 0)
        return;
    if ((rc = sfl_msg_export_pack(a, &buf, &len)) != 0)
        die("export_pack refused an unpacked export", rc);
    if ((rc = sfl_msg_export_unpack(buf, len, &lim, &b)) != 0)
        die("export round trip", rc);
    if (a->job_id != b->job_id || a->round != b->round || a->dimension != b->dimension ||
        !same_vec(a->model, b->model))
        die("export round trip changed the export", 0);
    sfl_msg_buf_free(buf);
    sfl_msg_export_free(b);
    sfl_msg_export_free(a);
}

/* Seeds name their type by this order: append only. */
static void (*const types[])(const uint8_t *, size_t) = {
    fz_join_req_unpack,        /* 0 */
    fz_join_reply_unpack,      /* 1 */
    fz_subscribe_req_unpack,   /* 2 */
    fz_task_or_wait,           /* 3 */
    fz_update,                 /* 4 */
    fz_payload,                /* 5 */
    fz_ack_unpack,             /* 6 */
    fz_heartbeat_req_unpack,   /* 7 */
    fz_heartbeat_reply_unpack, /* 8 */
    fz_create_job_unpack,      /* 9 */
    fz_job_req,                /* 10 */
    fz_job_reply_unpack,       /* 11 */
    fz_empty,                  /* 12: StatusRequest, ListJobsRequest */
    fz_status,                 /* 13 */
    fz_job_list,               /* 14 */
    fz_list_agents_req,        /* 15 */
    fz_agent_list,             /* 16 */
    fz_export_req,             /* 17 */
    fz_export,                 /* 18 */
    fz_revoke_req_unpack,      /* 19 */
    fz_revoke_reply_unpack,    /* 20 */
    fz_sub,                    /* 21: TaskOrWait with a vertical step */
    fz_step_answer,            /* 22 */
    fz_sa_answer,              /* 23 */
    fz_release_req_unpack,     /* 24 */
    fz_release_reply_unpack,   /* 25 */
    fz_fleet,                  /* 26 */
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    types[data[0] % (sizeof(types) / sizeof(types[0]))](data + 1, size - 1);
    return 0;
}

/* libFuzzer: the Fleet service's FleetCall (sfl_msg_fleet_call_unpack), what
 * the master unpacks from a front-end, and the agent request inside it, as
 * the master's Coordinator handlers then unpack it (Join, Subscribe,
 * SubmitUpdate, Heartbeat); and the same bytes as a task the master sends
 * without its model (sfl_msg_task_strip_model, put_model, needs_model) and
 * as the model a front-end fetched and checks (sfl_msg_fleet_model_hash).
 * Fold mode's messages too (FleetFoldSpec and its request, FleetClaim -
 * the request inside a Claim's FleetCall -, FleetPartial and its reply):
 * each that unpacks packs again to bytes that unpack the same.
 * Seeds in tests/fuzz/corpus/fuzz_fleet/.
 *
 * Beyond "no crash, no leak": whatever unpacks packs again to bytes that
 * unpack to the same call (the agent's certificate included: its bytes are
 * carried, bounded, not parsed here - the master verifies them) (the two sides agree on every check). Small
 * limits, so the limit checks are reached. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/wire/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sfl_msg_limits_t lim = {
    .max_message = 1 << 16,
    .max_dim = 1 << 20,
    .max_nnz = 4096,
    .max_items = 64,
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "fuzz_fleet: %s: %s (%s)\n", what, sfl_strerror(rc), sfl_last_error());
    abort();
}

/* The same bytes as a TaskOrWait the master sends a front-end: what the
 * front-end checks (needs_model) and assembles (put_model), and what the
 * master strips; strip then put gives bytes that strip to the same. */
static void task_model(const uint8_t *d, size_t n)
{
    uint8_t *lite = NULL, *full = NULL, *lite2 = NULL, hash[SFL_MSG_HASH_BYTES];
    size_t llen, flen, l2, moff, mlen, moff2, mlen2;
    uint64_t job;
    int rc;

    {
        uint64_t r, job2;
        uint32_t at;

        /* both read the Task's fields: a task needs_model names, task_ids
         * names the same */
        if (sfl_msg_task_needs_model(d, n, &job, hash) == 1 &&
            (sfl_msg_task_ids(d, n, &job2, &r, &at) != 1 || job2 != job))
            die("task_ids disagrees with needs_model", 0);
        (void)sfl_msg_task_ids(d, n, &job2, &r, &at);
    }
    if (sfl_msg_task_strip_model(d, n, &lite, &llen, &moff, &mlen) != 0)
        return;
    if (moff > n || mlen > n - moff)
        die("strip_model: the model is not inside the message", 0);
    if ((rc = sfl_msg_task_put_model(lite, llen, d + moff, mlen, &full, &flen)) != 0)
        die("put_model refused what strip_model made", rc);
    if ((rc = sfl_msg_task_strip_model(full, flen, &lite2, &l2, &moff2, &mlen2)) != 0)
        die("strip_model refused what put_model made", rc);
    if (l2 != llen || memcmp(lite, lite2, llen) != 0 || mlen2 != mlen ||
        memcmp(full + moff2, d + moff, mlen) != 0)
        die("strip / put round trip changed the task", 0);
    sfl_msg_buf_free(lite);
    sfl_msg_buf_free(lite2);
    sfl_msg_buf_free(full);
}

/* The inner request, as each relayed handler would read it. */
static void inner(const uint8_t *d, size_t n)
{
    uint8_t mh[SFL_MSG_HASH_BYTES];

    task_model(d, n);
    /* the same bytes as a model a master answered (the front-end's check) */
    (void)sfl_msg_fleet_model_hash(d, n, mh);
    sfl_join_req_t j;
    sfl_subscribe_req_t s;
    sfl_heartbeat_req_t h;
    sfl_update_t *u = NULL;

    (void)sfl_msg_join_req_unpack(d, n, &lim, &j);
    (void)sfl_msg_subscribe_req_unpack(d, n, &lim, &s);
    (void)sfl_msg_heartbeat_req_unpack(d, n, &lim, &h);
    if (sfl_msg_update_unpack(d, n, &lim, &u) == 0)
        sfl_msg_update_free(u);
}

/* Fold mode: the same bytes as each of its messages. */
static void fold_msgs(const uint8_t *d, size_t n)
{
    sfl_fleet_fold_spec_t fs, fs2;
    sfl_fleet_claim_t cl, cl2;
    sfl_fleet_partial_t *p = NULL, *p2 = NULL;
    uint64_t job, round;
    uint32_t attempt, acc;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    (void)sfl_msg_fleet_fold_spec_req_unpack(d, n, &lim, &job, &round, &attempt);
    (void)sfl_msg_fleet_partial_reply_unpack(d, n, &lim, &acc);
    if (sfl_msg_fleet_fold_spec_unpack(d, n, &lim, &fs) == 0) {
        if ((rc = sfl_msg_fleet_fold_spec_pack(&fs, &buf, &len)) != 0)
            die("fold_spec_pack refused what fold_spec_unpack accepted", rc);
        if ((rc = sfl_msg_fleet_fold_spec_unpack(buf, len, &lim, &fs2)) != 0 ||
            memcmp(&fs, &fs2, sizeof(fs)) != 0)
            die("fold_spec: round trip changed the message", rc);
        sfl_msg_buf_free(buf);
    }
    if (sfl_msg_fleet_claim_unpack(d, n, &lim, &cl) == 0) {
        if ((rc = sfl_msg_fleet_claim_pack(&cl, &buf, &len)) != 0)
            die("claim_pack refused what claim_unpack accepted", rc);
        if ((rc = sfl_msg_fleet_claim_unpack(buf, len, &lim, &cl2)) != 0 ||
            memcmp(&cl, &cl2, sizeof(cl)) != 0)
            die("claim: round trip changed the message", rc);
        sfl_msg_buf_free(buf);
    }
    if (sfl_msg_fleet_partial_unpack(d, n, &lim, &p) == 0) {
        if ((rc = sfl_msg_fleet_partial_pack(p, &buf, &len)) != 0)
            die("partial_pack refused what partial_unpack accepted", rc);
        if ((rc = sfl_msg_fleet_partial_unpack(buf, len, &lim, &p2)) != 0)
            die("partial_unpack refused what partial_pack made", rc);
        if (p->nmembers != p2->nmembers ||
            memcmp(p->members, p2->members, p->nmembers * sizeof(*p->members)) != 0 ||
            p->weight_sum != p2->weight_sum || p->sum->nnz != p2->sum->nnz ||
            p->sum->dim != p2->sum->dim ||
            memcmp(p->sum->val, p2->sum->val, p->sum->nnz * sizeof(double)) != 0 ||
            memcmp(p->metric_sums, p2->metric_sums, sizeof(p->metric_sums)) != 0)
            die("partial: round trip changed the message", 0);
        sfl_msg_buf_free(buf);
        sfl_msg_fleet_partial_free(p2);
        sfl_msg_fleet_partial_free(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_fleet_call_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    fold_msgs(data, size);
    if (sfl_msg_fleet_call_unpack(data, size, &lim, &a) != 0)
        return 0;
    if ((rc = sfl_msg_fleet_call_pack(a, &buf, &len)) != 0)
        die("fleet_call_pack refused what fleet_call_unpack accepted", rc);
    if ((rc = sfl_msg_fleet_call_unpack(buf, len, &lim, &b)) != 0)
        die("fleet_call_unpack refused what fleet_call_pack made", rc);
    if (strcmp(a->agent_cn, b->agent_cn) != 0 ||
        memcmp(a->cert_sha256, b->cert_sha256, 32) != 0 || a->conn_id != b->conn_id ||
        a->request_len != b->request_len ||
        (a->request_len > 0 && memcmp(a->request, b->request, a->request_len) != 0) ||
        a->agent_cert_len != b->agent_cert_len ||
        (a->agent_cert_len > 0 && memcmp(a->agent_cert, b->agent_cert, a->agent_cert_len) != 0))
        die("fleet_call: round trip changed the message", 0);
    inner(a->request, a->request_len);
    fold_msgs(a->request, a->request_len);
    sfl_msg_buf_free(buf);
    sfl_msg_fleet_call_free(a);
    sfl_msg_fleet_call_free(b);
    return 0;
}

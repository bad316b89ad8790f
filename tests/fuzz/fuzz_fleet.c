/* libFuzzer: the Fleet service's FleetCall (sfl_msg_fleet_call_unpack), what
 * the master unpacks from a front-end, and the agent request inside it, as
 * the master's Coordinator handlers then unpack it (Join, Subscribe,
 * SubmitUpdate, Heartbeat). Seeds in tests/fuzz/corpus/fuzz_fleet/.
 *
 * Beyond "no crash, no leak": whatever unpacks packs again to bytes that
 * unpack to the same call (the two sides agree on every check). Small
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

/* The inner request, as each relayed handler would read it. */
static void inner(const uint8_t *d, size_t n)
{
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_fleet_call_t *a = NULL, *b = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    if (sfl_msg_fleet_call_unpack(data, size, &lim, &a) != 0)
        return 0;
    if ((rc = sfl_msg_fleet_call_pack(a, &buf, &len)) != 0)
        die("fleet_call_pack refused what fleet_call_unpack accepted", rc);
    if ((rc = sfl_msg_fleet_call_unpack(buf, len, &lim, &b)) != 0)
        die("fleet_call_unpack refused what fleet_call_pack made", rc);
    if (strcmp(a->agent_cn, b->agent_cn) != 0 ||
        memcmp(a->cert_sha256, b->cert_sha256, 32) != 0 || a->conn_id != b->conn_id ||
        a->request_len != b->request_len ||
        (a->request_len > 0 && memcmp(a->request, b->request, a->request_len) != 0))
        die("fleet_call: round trip changed the message", 0);
    inner(a->request, a->request_len);
    sfl_msg_buf_free(buf);
    sfl_msg_fleet_call_free(a);
    sfl_msg_fleet_call_free(b);
    return 0;
}

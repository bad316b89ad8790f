/* libsfl/src/wire/msg_fleet.c: the Fleet service's FleetCall (what a
 * front-end relays for an agent): round trip, and every malformed,
 * truncated or oversized form refused with the error a peer deserves. */
#include "testutil.h"

#include <stdio.h>

#include <sodium.h>

#include "failalloc.h"
#include "sfl/wire/msg.h"

/* ---- a tiny protobuf writer, to forge what the packer refuses to make ---- */

typedef struct pbw {
    uint8_t b[16384];
    size_t n;
} pbw_t;

static void w_varint(pbw_t *w, uint64_t v)
{
    while (v >= 0x80) {
        w->b[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->b[w->n++] = (uint8_t)v;
    assert_true(w->n < sizeof(w->b) - 16);
}

static void w_bytes(pbw_t *w, uint32_t field, const void *d, size_t n)
{
    w_varint(w, (uint64_t)field << 3 | 2);
    w_varint(w, n);
    assert_true(w->n + n < sizeof(w->b));
    if (n > 0)
        memcpy(w->b + w->n, d, n);
    w->n += n;
}

static void w_uint(pbw_t *w, uint32_t field, uint64_t v)
{
    w_varint(w, (uint64_t)field << 3);
    w_varint(w, v);
}

static const uint8_t sha[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

/* A well-formed FleetCall with cn, sha[0..shalen), request, conn_id. */
static void forge(pbw_t *w, const char *cn, size_t shalen, const char *req, uint64_t conn)
{
    w->n = 0;
    if (cn)
        w_bytes(w, 1, cn, strlen(cn));
    w_bytes(w, 2, sha, shalen);
    if (req)
        w_bytes(w, 3, req, strlen(req));
    if (conn)
        w_uint(w, 4, conn);
}

static int unpack_rc(const pbw_t *w, const sfl_msg_limits_t *lim)
{
    sfl_fleet_call_t *m = NULL;
    int rc = sfl_msg_fleet_call_unpack(w->b, w->n, lim, &m);

    if (rc < 0)
        assert_null(m);
    sfl_msg_fleet_call_free(m);
    return rc;
}

static void test_fleet_round_trip(void **state)
{
    sfl_fleet_call_t in, *out = NULL;
    uint8_t req[300], *buf = NULL;
    size_t len;

    (void)state;
    memset(&in, 0, sizeof(in));
    snprintf(in.agent_cn, sizeof(in.agent_cn), "agent-7 \xc3\xa9t\xc3\xa9"); /* UTF-8 */
    memcpy(in.cert_sha256, sha, 32);
    for (size_t i = 0; i < sizeof(req); i++)
        req[i] = (uint8_t)(i * 7);
    in.request = req;
    in.request_len = sizeof(req);
    in.conn_id = 1ull << 40;
    assert_int_equal(sfl_msg_fleet_call_pack(&in, &buf, &len), 0);
    assert_int_equal(sfl_msg_fleet_call_unpack(buf, len, NULL, &out), 0);
    assert_string_equal(out->agent_cn, in.agent_cn);
    assert_memory_equal(out->cert_sha256, sha, 32);
    assert_int_equal(out->request_len, sizeof(req));
    assert_memory_equal(out->request, req, sizeof(req));
    assert_true(out->conn_id == in.conn_id);
    assert_null(out->agent_cert);
    assert_int_equal(out->agent_cert_len, 0);
    sfl_msg_fleet_call_free(out);
    sfl_msg_buf_free(buf);

    /* with the agent's certificate, up to the largest allowed */
    {
        static uint8_t der[SFL_MSG_CERT_DER_MAX];

        for (size_t i = 0; i < sizeof(der); i++)
            der[i] = (uint8_t)(i * 13 + 1);
        for (size_t n = 1; n <= sizeof(der); n += sizeof(der) - 1) {
            in.agent_cert = der;
            in.agent_cert_len = n;
            assert_int_equal(sfl_msg_fleet_call_pack(&in, &buf, &len), 0);
            assert_int_equal(sfl_msg_fleet_call_unpack(buf, len, NULL, &out), 0);
            assert_int_equal(out->agent_cert_len, n);
            assert_memory_equal(out->agent_cert, der, n);
            assert_memory_equal(out->request, req, sizeof(req));
            sfl_msg_fleet_call_free(out);
            sfl_msg_buf_free(buf);
        }
        in.agent_cert = NULL;
        in.agent_cert_len = 0;
    }

    /* Gone: no request */
    in.request = NULL;
    in.request_len = 0;
    snprintf(in.agent_cn, sizeof(in.agent_cn), "%.64s",
             "0123456789012345678901234567890123456789012345678901234567890123");
    assert_int_equal(sfl_msg_fleet_call_pack(&in, &buf, &len), 0);
    assert_int_equal(sfl_msg_fleet_call_unpack(buf, len, NULL, &out), 0);
    assert_int_equal(strlen(out->agent_cn), 64);
    assert_null(out->request);
    assert_int_equal(out->request_len, 0);
    sfl_msg_fleet_call_free(out);
    sfl_msg_buf_free(buf);
    sfl_msg_fleet_call_free(NULL);
}

/* What pack refuses to send. */
static void test_fleet_pack_refuses(void **state)
{
    sfl_fleet_call_t m;
    uint8_t *buf = (uint8_t *)1;
    size_t len = 1;

    (void)state;
    memset(&m, 0, sizeof(m));
    memcpy(m.cert_sha256, sha, 32);
    m.conn_id = 1;
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL); /* no cn */
    assert_null(buf);
    assert_int_equal(len, 0);
    snprintf(m.agent_cn, sizeof(m.agent_cn), "a\tb");
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL);
    snprintf(m.agent_cn, sizeof(m.agent_cn), "a\x7f");
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL);
    snprintf(m.agent_cn, sizeof(m.agent_cn), "a");
    m.conn_id = 0;
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "conn_id"));
    m.conn_id = 1;
    m.request_len = 5; /* and no bytes */
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL);
    m.request_len = 0;
    m.agent_cert_len = 5; /* and no bytes */
    assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "agent_cert"));
    {
        static uint8_t der[SFL_MSG_CERT_DER_MAX + 1];

        m.agent_cert = der;
        m.agent_cert_len = sizeof(der);
        assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), SFL_ELIMIT);
        assert_null(buf);
        m.agent_cert_len = sizeof(der) - 1;
        assert_int_equal(sfl_msg_fleet_call_pack(&m, &buf, &len), 0);
        sfl_msg_buf_free(buf);
    }
}

/* Malformed, truncated and oversized bytes from a front-end. */
static void test_fleet_unpack_refuses(void **state)
{
    sfl_msg_limits_t lim;
    pbw_t w;
    char big[80];

    (void)state;
    sfl_msg_limits_default(&lim);
    forge(&w, "agent-1", 32, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), 0);
    /* every truncation of a well-formed call is refused: mid-field it does
     * not parse, at a field boundary a required field is missing (conn_id
     * last) */
    for (size_t n = 0; n < w.n; n++) {
        pbw_t c = w;
        int rc;

        c.n = n;
        rc = unpack_rc(&c, &lim);
        assert_true(rc == SFL_EPARSE);
    }
    forge(&w, NULL, 32, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "agent_cn missing"));
    forge(&w, "agent-1", 31, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "cert_sha256"));
    forge(&w, "agent-1", 0, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    forge(&w, "agent-1", 32, "req", 0);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "conn_id"));
    forge(&w, "agent\n1", 32, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "control character"));
    memset(big, 'x', 65);
    big[65] = '\0';
    forge(&w, big, 32, "req", 9);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "at most 64"));
    /* a wire type that does not match the field, garbage */
    w.n = 0;
    w_uint(&w, 1, 5);
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    memset(w.b, 0xff, 40);
    w.n = 40;
    assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
    /* the agent's certificate: any bytes up to 8192 (the master parses
     * and verifies them), not one more; a wrong wire type */
    {
        static uint8_t der[SFL_MSG_CERT_DER_MAX + 1];

        memset(der, 0x30, sizeof(der));
        forge(&w, "agent-1", 32, "req", 9);
        w_bytes(&w, 5, der, SFL_MSG_CERT_DER_MAX);
        assert_int_equal(unpack_rc(&w, &lim), 0);
        forge(&w, "agent-1", 32, "req", 9);
        w_bytes(&w, 5, der, sizeof(der));
        assert_int_equal(unpack_rc(&w, &lim), SFL_ELIMIT);
        assert_non_null(strstr(sfl_last_error(), "agent_cert"));
        forge(&w, "agent-1", 32, "req", 9);
        w_uint(&w, 5, 7);
        assert_int_equal(unpack_rc(&w, &lim), SFL_EPARSE);
        /* given twice: protobuf's last one wins, bounded all the same */
        forge(&w, "agent-1", 32, "req", 9);
        w_bytes(&w, 5, der, 10);
        w_bytes(&w, 5, der, 20);
        {
            sfl_fleet_call_t *m = NULL;

            assert_int_equal(sfl_msg_fleet_call_unpack(w.b, w.n, &lim, &m), 0);
            assert_int_equal(m->agent_cert_len, 20);
            sfl_msg_fleet_call_free(m);
        }
    }
    /* larger than max_message: refused before protobuf-c allocates */
    forge(&w, "agent-1", 32, "a request of some length", 9);
    lim.max_message = w.n - 1;
    assert_int_equal(unpack_rc(&w, &lim), SFL_ELIMIT);
    lim.max_message = w.n;
    assert_int_equal(unpack_rc(&w, &lim), 0);
}

/* Out of memory at every allocation: SFL_ENOMEM, nothing leaked (ASan). */
static void test_fleet_unpack_oom(void **state)
{
    sfl_fleet_call_t *m = NULL;
    pbw_t w;

    (void)state;
    forge(&w, "agent-1", 32, "request", 3);
    FAILALLOC_EACH(sfl_msg_fleet_call_unpack(w.b, w.n, NULL, &m),
                   (sfl_msg_fleet_call_free(m), m = NULL));
}

/* A task as the coordinator packs it (the fuzz seed capture.c recorded: a type byte, then the
 * packed TaskOrWait). */
static uint8_t *golden_task(size_t *len)
{
    FILE *f = fopen("tests/fuzz/corpus/fuzz_msg/real-task", "rb");
    uint8_t *b = malloc(1 << 20);
    size_t n;

    assert_non_null(f);
    assert_non_null(b);
    n = fread(b, 1, 1 << 20, f);
    fclose(f);
    assert_true(n > 100);
    memmove(b, b + 1, n - 1);
    *len = n - 1;
    return b;
}

/* strip, put and needs_model: put(strip(x)) == x byte for byte, and the
 * stripped task names its job and model hash. */
static void test_fleet_task_model(void **state)
{
    uint8_t *tow, *lite = NULL, *back = NULL, *again = NULL, hash[32];
    size_t len, llen, blen, alen, moff, mlen;
    sfl_task_t *t = NULL;
    uint64_t job;

    (void)state;
    tow = golden_task(&len);
    assert_int_equal(sfl_msg_task_needs_model(tow, len, &job, hash), 0);
    assert_int_equal(sfl_msg_task_strip_model(tow, len, &lite, &llen, &moff, &mlen), 0);
    assert_true(llen + mlen < len && moff + mlen <= len && mlen > 0);
    assert_int_equal(sfl_msg_task_needs_model(lite, llen, &job, hash), 1);
    /* the job and hash the agent's unpacking sees */
    {
        sfl_wait_t w;

        assert_int_equal(sfl_msg_task_or_wait_unpack(tow, len, NULL, &t, &w), 0);
        assert_non_null(t);
    }
    assert_true(job == t->job_id);
    assert_memory_equal(hash, t->model_hash, 32);
    /* task_ids: the same with or without the model */
    {
        uint64_t j2, r2;
        uint32_t a2;

        assert_int_equal(sfl_msg_task_ids(tow, len, &j2, &r2, &a2), 1);
        assert_true(j2 == t->job_id && r2 == t->round && a2 == t->attempt);
        assert_int_equal(sfl_msg_task_ids(lite, llen, &j2, &r2, &a2), 1);
        assert_true(j2 == t->job_id && r2 == t->round && a2 == t->attempt);
    }
    sfl_msg_task_free(t);
    assert_int_equal(sfl_msg_task_put_model(lite, llen, tow + moff, mlen, &back, &blen), 0);
    assert_int_equal(blen, len);
    assert_memory_equal(back, tow, len);
    /* nothing to strip twice, nothing to put twice */
    assert_int_equal(sfl_msg_task_strip_model(lite, llen, &again, &alen, &moff, &mlen),
                     SFL_ENOTFOUND);
    assert_null(again);
    assert_int_equal(sfl_msg_task_put_model(tow, len, tow, 4, &again, &alen), SFL_EINVAL);
    assert_null(again);
    /* every truncation: an error or a non-task, never a read past the end */
    for (size_t n = 0; n < llen; n++) {
        int rc = sfl_msg_task_needs_model(lite, n, &job, hash);
        uint64_t r2;
        uint32_t a2;

        assert_true(rc == 0 || rc == SFL_EPARSE);
        rc = sfl_msg_task_ids(lite, n, &job, &r2, &a2);
        assert_true(rc == 0 || rc == 1 || rc == SFL_EPARSE);
        rc = sfl_msg_task_put_model(lite, n, tow, 4, &again, &alen);
        assert_true(rc < 0 || rc == 0);
        sfl_msg_buf_free(again);
        again = NULL;
    }
    sfl_msg_buf_free(lite);
    sfl_msg_buf_free(back);
    free(tow);
}

/* Not tasks: a wait, garbage. */
static void test_fleet_task_model_others(void **state)
{
    sfl_wait_t w = {.retry_after_ms = 100};
    uint8_t *buf = NULL, *out = NULL, hash[32], junk[16];
    size_t len, olen, moff, mlen;
    uint64_t job;

    (void)state;
    snprintf(w.reason, sizeof(w.reason), "not selected");
    assert_int_equal(sfl_msg_wait_pack(&w, &buf, &len), 0);
    assert_int_equal(sfl_msg_task_needs_model(buf, len, &job, hash), 0);
    {
        uint64_t r2;
        uint32_t a2;

        assert_int_equal(sfl_msg_task_ids(buf, len, &job, &r2, &a2), 0);
        assert_int_equal(sfl_msg_task_ids(junk, 0, &job, &r2, &a2), 0);
    }
    assert_int_equal(sfl_msg_task_strip_model(buf, len, &out, &olen, &moff, &mlen), SFL_ENOTFOUND);
    assert_int_equal(sfl_msg_task_put_model(buf, len, junk, 1, &out, &olen), SFL_EINVAL);
    sfl_msg_buf_free(buf);
    memset(junk, 0xff, sizeof(junk));
    assert_int_equal(sfl_msg_task_needs_model(junk, sizeof(junk), &job, hash), SFL_EPARSE);
    junk[0] = 0x0a;
    junk[1] = 0x7f; /* a length past the end */
    assert_int_equal(sfl_msg_task_needs_model(junk, sizeof(junk), &job, hash), SFL_EPARSE);
    {
        uint64_t r2;
        uint32_t a2;

        assert_int_equal(sfl_msg_task_ids(junk, sizeof(junk), &job, &r2, &a2), SFL_EPARSE);
    }
}

/* Fleet.Model's messages. */
static void test_fleet_model_msgs(void **state)
{
    uint8_t hash[32], h2[32], *buf = NULL, *model = NULL, m[100];
    size_t len, mlen;
    uint64_t job;

    (void)state;
    memset(hash, 7, sizeof(hash));
    assert_int_equal(sfl_msg_fleet_model_req_pack(3, hash, &buf, &len), 0);
    assert_int_equal(sfl_msg_fleet_model_req_unpack(buf, len, NULL, &job, h2), 0);
    assert_true(job == 3);
    assert_memory_equal(h2, hash, 32);
    sfl_msg_buf_free(buf);
    assert_int_equal(sfl_msg_fleet_model_req_pack(0, hash, &buf, &len), SFL_EINVAL);
    assert_int_equal(sfl_msg_fleet_model_req_unpack((const uint8_t *)"\x08\x03", 2, NULL, &job, h2),
                     SFL_EPARSE); /* no hash */
    memset(m, 9, sizeof(m));
    assert_int_equal(sfl_msg_fleet_model_reply_pack(m, sizeof(m), &buf, &len), 0);
    assert_int_equal(sfl_msg_fleet_model_reply_unpack(buf, len, NULL, &model, &mlen), 0);
    assert_int_equal(mlen, sizeof(m));
    assert_memory_equal(model, m, sizeof(m));
    sfl_msg_buf_free(model);
    {
        sfl_msg_limits_t lim;

        sfl_msg_limits_default(&lim);
        lim.max_message = len - 1;
        assert_int_equal(sfl_msg_fleet_model_reply_unpack(buf, len, &lim, &model, &mlen),
                         SFL_ELIMIT);
        assert_null(model);
    }
    sfl_msg_buf_free(buf);
    assert_int_equal(sfl_msg_fleet_model_reply_unpack((const uint8_t *)"", 0, NULL, &model, &mlen),
                     SFL_EPARSE);
}

/* The hash a front-end checks a fetched model by: the task's model_hash for
 * the model the master strips from it; another for a model with a byte
 * changed; malformed, truncated and data-less models refused. */
static void test_fleet_model_hash(void **state)
{
    uint8_t *tow, *lite = NULL, *model, want[32], got[32];
    size_t len, llen, moff, mlen;
    uint64_t job;

    (void)state;
    tow = golden_task(&len);
    assert_int_equal(sfl_msg_task_strip_model(tow, len, &lite, &llen, &moff, &mlen), 0);
    assert_int_equal(sfl_msg_task_needs_model(lite, llen, &job, want), 1);
    model = tow + moff;
    assert_int_equal(sfl_msg_fleet_model_hash(model, mlen, got), 0);
    assert_memory_equal(got, want, 32);
    /* a hostile master's bytes: the last value byte changed */
    model[mlen - 1] ^= 0x40;
    assert_int_equal(sfl_msg_fleet_model_hash(model, mlen, got), 0);
    assert_memory_not_equal(got, want, 32);
    model[mlen - 1] ^= 0x40;
    /* every truncation: refused, or another hash (never the one named) */
    for (size_t n = 0; n < mlen; n++) {
        int rc = sfl_msg_fleet_model_hash(model, n, got);

        assert_true(rc == SFL_EPARSE || (rc == 0 && memcmp(got, want, 32) != 0));
    }
    /* not a SparseVector with data */
    assert_int_equal(sfl_msg_fleet_model_hash(NULL, 0, got), SFL_EPARSE);
    assert_int_equal(sfl_msg_fleet_model_hash((const uint8_t *)"\x08\x05", 2, got),
                     SFL_EPARSE); /* dim only */
    assert_int_equal(sfl_msg_fleet_model_hash((const uint8_t *)"\x10\x05", 2, got),
                     SFL_EPARSE); /* data as a varint */
    assert_int_equal(sfl_msg_fleet_model_hash((const uint8_t *)"\x12\x00", 2, got),
                     SFL_EPARSE); /* empty data */
    assert_int_equal(sfl_msg_fleet_model_hash((const uint8_t *)"\x12\x05" "ab", 4, got),
                     SFL_EPARSE); /* past the end */
    assert_int_equal(sfl_msg_fleet_model_hash((const uint8_t *)"\x12\x01" "a" "\x12\x01" "b", 6, got),
                     0); /* the last data counts, as protobuf-c reads it */
    {
        uint8_t hb[32];

        crypto_generichash(hb, 32, (const uint8_t *)"b", 1, NULL, 0);
        assert_memory_equal(got, hb, 32);
    }
    sfl_msg_buf_free(lite);
    free(tow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fleet_round_trip),
        cmocka_unit_test(test_fleet_pack_refuses),
        cmocka_unit_test(test_fleet_unpack_refuses),
        cmocka_unit_test(test_fleet_unpack_oom),
        cmocka_unit_test(test_fleet_task_model),
        cmocka_unit_test(test_fleet_task_model_others),
        cmocka_unit_test(test_fleet_model_msgs),
        cmocka_unit_test(test_fleet_model_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* libFuzzer: sealed updates, signatures and identity files (seal.h), with a
 * fixed test round key (X25519 from a fixed seed) and the RFC 8032 test-1
 * identity as the agent. Byte 0 picks what the rest is:
 *   0  identity file text (sfl_identity_parse); a parsed identity must sign
 *      what its public key verifies
 *   1  a sealed update opened by the coordinator (sfl_seal_open_update with
 *      the fixed key, agent and context); seeds are real sealed updates
 *      (tests/fuzz/capture.c), so mutations reach the decryption check
 *   2  u8 what | u8 where | payload: the agent seals payload, then "what"
 *      tampers with one context field or one sealed byte; the open must
 *      succeed exactly when nothing was changed, and give back the payload
 *   3  u8 n | context[n] | sig[64] | pk[32] | msg: sfl_seal_verify_detached
 *      and sfl_identity_pk_check, pk also through sfl_seal_pk_from_hex
 *   4  sig[64] | ctx fields | payload: sfl_seal_verify_update
 *   5  a signed update (payload | sigma) checked by the coordinator
 *      (sfl_seal_check_update with the fixed agent and context), hashed
 *      here and by the caller alike
 * Nothing random: the same input always takes the same path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/crypto/seal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* RFC 8032 section 7.1, test 1 (tests/vectors/seal_identity_v1.key). */
static const uint8_t agent_seed[32] = {
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
};

#define MAX_PAYLOAD 4096

static sfl_identity_t *agent;
static sfl_roundkey_t rk;

static void die(const char *what, int rc)
{
    fprintf(stderr, "fuzz_seal: %s: %s (%s)\n", what, sfl_strerror(rc), sfl_last_error());
    abort();
}

/* Built once and kept for the process (not a leak: reachable). The round
 * key is made here from a fixed seed because sfl_roundkey_new only draws
 * fresh ones; the struct is as seal.h documents it. */
static void setup(void)
{
    uint8_t seed[crypto_box_SEEDBYTES];

    if (agent != NULL)
        return;
    if (sfl_seal_init() != 0 || sfl_identity_from_seed(agent_seed, &agent) != 0)
        abort();
    for (size_t i = 0; i < sizeof(seed); i++)
        seed[i] = (uint8_t)(0xa0 + i);
    rk.sk = sodium_malloc(crypto_box_SECRETKEYBYTES);
    if (rk.sk == NULL || crypto_box_seed_keypair(rk.pk, rk.sk, seed) != 0)
        abort();
}

/* The context the capture program sealed its update under. */
static sfl_upd_ctx_t fixed_ctx(void)
{
    sfl_upd_ctx_t c;

    memset(&c, 0, sizeof(c));
    memcpy(c.round_pk, rk.pk, sizeof(c.round_pk));
    c.job = 1;
    c.round = 3;
    for (size_t i = 0; i < sizeof(c.nonce); i++)
        c.nonce[i] = (uint8_t)(0x40 + i);
    c.agent_id = 7;
    sfl_seal_hash("global model bytes", 18, c.model_hash);
    return c;
}

static void fz_identity(const uint8_t *d, size_t n)
{
    sfl_identity_t *id = NULL;
    uint8_t sig[SFL_SEAL_SIG_BYTES];
    int rc;

    if (sfl_identity_parse((const char *)d, n, "fuzz", &id) != 0) {
        if (id != NULL)
            abort();
        return;
    }
    if ((rc = sfl_identity_pk_check(id->pk)) != 0)
        die("parsed identity has a bad public key", rc);
    if ((rc = sfl_seal_sign_detached(id, "fuzz", d, n, sig)) != 0 ||
        (rc = sfl_seal_verify_detached(id->pk, "fuzz", d, n, sig)) != 0)
        die("parsed identity cannot sign", rc);
    sfl_identity_free(id);
}

static void fz_open(const uint8_t *d, size_t n)
{
    sfl_upd_ctx_t c = fixed_ctx();
    uint8_t *payload = NULL, sig[SFL_SEAL_SIG_BYTES];
    size_t plen = 0;

    if (sfl_seal_open_update(&rk, agent->pk, &c, d, n, MAX_PAYLOAD, &payload, &plen, sig) != 0) {
        if (payload != NULL)
            abort();
        return;
    }
    if (plen + SFL_SEAL_OVERHEAD != n || sfl_seal_verify_update(agent->pk, &c, payload, plen,
                                                                 sig) != 0)
        abort();
    sodium_memzero(payload, plen);
    sfl__free(payload);
}

static void fz_tamper(const uint8_t *d, size_t n)
{
    sfl_upd_ctx_t c = fixed_ctx(), expect;
    uint8_t *sealed, *payload = NULL;
    size_t len = 0, plen = 0;
    int rc, changed = 1;

    if (n < 2)
        return;
    uint8_t what = d[0], where = d[1];
    d += 2;
    n -= 2;
    if (n > MAX_PAYLOAD)
        n = MAX_PAYLOAD;
    sealed = malloc(n + SFL_SEAL_OVERHEAD);
    if (sealed == NULL)
        abort();
    if ((rc = sfl_seal_update(agent, &c, d, n, sealed, n + SFL_SEAL_OVERHEAD, &len)) != 0)
        die("seal", rc);
    expect = c;
    switch (what % 9) {
    case 0: changed = 0; break;
    case 1: expect.job ^= 1ull << (where % 64); break;
    case 2: expect.round ^= 1ull << (where % 64); break;
    case 3: expect.agent_id ^= 1ull << (where % 64); break;
    case 4: expect.nonce[where % 32] ^= (uint8_t)(1 + (what >> 4)); break;
    case 5: expect.model_hash[where % 32] ^= (uint8_t)(1 + (what >> 4)); break;
    case 6: sealed[where % len] ^= (uint8_t)(1 + (what >> 4)); break;
    case 7: len = where % len; break; /* truncated */
    case 8: /* signed by someone else: the key of the round instead */
        changed = 2;
        break;
    }
    rc = sfl_seal_open_update(&rk, changed == 2 ? rk.pk : agent->pk, &expect, sealed, len,
                              MAX_PAYLOAD, &payload, &plen, NULL);
    if (changed == 0) {
        if (rc != 0)
            die("an untouched sealed update does not open", rc);
        if (plen != n || (n > 0 && memcmp(payload, d, n) != 0))
            die("opened payload differs", 0);
        sfl__free(payload);
    } else if (rc == 0 || payload != NULL) {
        die("a tampered sealed update opened", rc);
    }
    free(sealed);
}

static void fz_detached(const uint8_t *d, size_t n)
{
    char ctx[256], hex[2 * SFL_SEAL_PK_BYTES + 1];
    uint8_t pk2[SFL_SEAL_PK_BYTES];

    if (n < 1)
        return;
    size_t cl = d[0];
    if (n < 1 + cl + SFL_SEAL_SIG_BYTES + SFL_SEAL_PK_BYTES)
        return;
    memcpy(ctx, d + 1, cl);
    ctx[cl] = '\0';
    const uint8_t *sig = d + 1 + cl, *pk = sig + SFL_SEAL_SIG_BYTES;
    const uint8_t *msg = pk + SFL_SEAL_PK_BYTES;
    size_t mlen = n - (size_t)(msg - d);

    (void)sfl_identity_pk_check(pk);
    (void)sfl_seal_verify_detached(pk, ctx, msg, mlen, sig);
    /* The agent's own key: a verify here is a forgery unless the input
     * carries the agent's real signature (a seed from a real exchange). */
    (void)sfl_seal_verify_detached(agent->pk, ctx, msg, mlen, sig);
    if (sfl_seal_pk_from_hex(sfl_seal_pk_to_hex(pk, hex), pk2) != 0 ||
        memcmp(pk, pk2, sizeof(pk2)) != 0)
        abort();
    /* Arbitrary text as hex: NUL-terminate the message. */
    if (mlen < 100) {
        char text[100];

        memcpy(text, msg, mlen);
        text[mlen] = '\0';
        (void)sfl_seal_pk_from_hex(text, pk2);
    }
}

static void fz_verify_update(const uint8_t *d, size_t n)
{
    sfl_upd_ctx_t c;
    const size_t need = SFL_SEAL_SIG_BYTES + 32 + 8 + 8 + 32 + 8 + 32;

    if (n < need)
        return;
    const uint8_t *sig = d, *p = d + SFL_SEAL_SIG_BYTES;
    memcpy(c.round_pk, p, 32);
    memcpy(&c.job, p + 32, 8);
    memcpy(&c.round, p + 40, 8);
    memcpy(c.nonce, p + 48, 32);
    memcpy(&c.agent_id, p + 80, 8);
    memcpy(c.model_hash, p + 88, 32);
    (void)sfl_seal_verify_update(agent->pk, &c, d + need, n - need, sig);
}

static void fz_check(const uint8_t *d, size_t n)
{
    uint8_t *m = malloc(n ? n : 1), h[SFL_SEAL_HASH_BYTES];
    size_t pl = 0;
    int a, b;
    sfl_upd_ctx_t c = fixed_ctx();

    if (m == NULL)
        return;
    if (n)
        memcpy(m, d, n); /* exact size: a read past the end is caught */
    a = sfl_seal_check_update(agent->pk, &c, m, n, n, NULL, &pl);
    if (a == 0 && pl + SFL_SEAL_SIGNED_OVERHEAD != n)
        abort();
    if (n >= SFL_SEAL_SIGNED_OVERHEAD) {
        sfl_seal_hash(m, n - SFL_SEAL_SIGNED_OVERHEAD, h);
        b = sfl_seal_check_update(agent->pk, &c, m, n, n, h, &pl);
        if (a != b)
            abort();
    }
    free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void (*const modes[])(const uint8_t *, size_t) = {
        fz_identity, fz_open, fz_tamper, fz_detached, fz_verify_update, fz_check,
    };

    setup();
    if (size < 1)
        return 0;
    modes[data[0] % (sizeof(modes) / sizeof(modes[0]))](data + 1, size - 1);
    return 0;
}

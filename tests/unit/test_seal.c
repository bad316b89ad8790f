#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/crypto/seal.h"
#include "testutil.h"

/* ---- known answers ------------------------------------------------------- */

/* RFC 8032 section 7.1, TEST 1 (empty message). */
static const uint8_t rfc_seed[32] = {
    0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
    0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
};
static const uint8_t rfc_pk[32] = {
    0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
    0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
};
static const uint8_t rfc_sig[64] = {
    0xe5, 0x56, 0x43, 0x00, 0xc3, 0x60, 0xac, 0x72, 0x90, 0x86, 0xe2, 0xcc, 0x80, 0x6e, 0x82, 0x8a,
    0x84, 0x87, 0x7f, 0x1e, 0xb8, 0xe5, 0xd9, 0x74, 0xd8, 0x73, 0xe0, 0x65, 0x22, 0x49, 0x01, 0x55,
    0x5f, 0xb8, 0x82, 0x15, 0x90, 0xa3, 0x3b, 0xac, 0xc6, 0x1e, 0x39, 0x70, 0x1c, 0xf9, 0xb4, 0x6b,
    0xd2, 0x5b, 0xf5, 0xf0, 0x59, 0x5b, 0xbe, 0x24, 0x65, 0x51, 0x41, 0x43, 0x8e, 0x7a, 0x10, 0x0b,
};

/* The golden update context; tests/vectors/seal_vectors.py builds the same
 * one with python3-cryptography, independently of libsfl. */
static const uint8_t golden_model_hash[32] = {
    0x83, 0x09, 0x7f, 0xa5, 0x2b, 0xa1, 0xc8, 0x2d, 0x3c, 0xfc, 0xe3, 0x23, 0x8b, 0x99, 0x0a, 0x62,
    0xe3, 0x72, 0xeb, 0x7e, 0x98, 0xf8, 0x9b, 0xec, 0x34, 0x79, 0x8f, 0x59, 0x1f, 0x50, 0xb6, 0x05,
};
static const char golden_model[] = "global model bytes";
static const char golden_payload[] = "sparse update payload";

/* The signed bytes, written out field by field (seal.h layout). */
static const uint8_t golden_upd_signed[SFL_SEAL_UPD_SIGNED_BYTES] = {
    /* off 0: context length, off 1: "sfl-upd-v1" */
    0x0a, 's', 'f', 'l', '-', 'u', 'p', 'd', '-', 'v', '1',
    /* off 11: round_pk = 00 01 .. 1f */
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    /* off 43: job 0x0102030405060708, little-endian */
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
    /* off 51: round 42 */
    0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    /* off 59: nonce = 40 41 .. 5f */
    0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b, 0x4c, 0x4d, 0x4e, 0x4f,
    0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b, 0x5c, 0x5d, 0x5e, 0x5f,
    /* off 91: agent id 7 */
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    /* off 99: model hash = BLAKE2b-256("global model bytes") */
    0x83, 0x09, 0x7f, 0xa5, 0x2b, 0xa1, 0xc8, 0x2d, 0x3c, 0xfc, 0xe3, 0x23, 0x8b, 0x99, 0x0a, 0x62,
    0xe3, 0x72, 0xeb, 0x7e, 0x98, 0xf8, 0x9b, 0xec, 0x34, 0x79, 0x8f, 0x59, 0x1f, 0x50, 0xb6, 0x05,
    /* off 131: BLAKE2b-256("sparse update payload") */
    0xff, 0xc2, 0x06, 0x34, 0x36, 0x51, 0x71, 0xb1, 0xc7, 0xcb, 0x92, 0xea, 0xaa, 0x4b, 0x4c, 0x1d,
    0x7b, 0x97, 0xfa, 0xd7, 0x44, 0xf5, 0x18, 0xf1, 0x05, 0x37, 0x3f, 0x6a, 0xdd, 0xde, 0x13, 0xb2,
};
/* Ed25519 by the RFC 8032 test-1 key over golden_upd_signed. */
static const uint8_t golden_upd_sig[64] = {
    0xa4, 0x88, 0x35, 0x93, 0x15, 0x39, 0xbb, 0x1e, 0x07, 0x30, 0x03, 0x2b, 0xd8, 0x6e, 0x91, 0xde,
    0xd9, 0x16, 0x98, 0x16, 0xd7, 0x82, 0x5b, 0x7e, 0xd6, 0x53, 0xe8, 0x52, 0x4a, 0x0f, 0x70, 0x93,
    0x07, 0x2e, 0xc1, 0xdc, 0x90, 0xce, 0x8d, 0x20, 0xd5, 0x0e, 0xf8, 0x7d, 0x59, 0x98, 0x6c, 0xd8,
    0x04, 0xc6, 0xae, 0x21, 0x17, 0x06, 0x0a, 0x85, 0x3d, 0xf8, 0xa8, 0x43, 0x5f, 0x29, 0x57, 0x07,
};
/* Ed25519 by the same key over 0x0b "sfl-task-v1" BLAKE2b-256("task message"). */
static const uint8_t golden_task_sig[64] = {
    0xa2, 0xb0, 0x1a, 0x62, 0x8d, 0x4d, 0x89, 0x7b, 0x7e, 0x22, 0x64, 0xe4, 0xe0, 0xdf, 0x1d, 0x8b,
    0xd7, 0x59, 0x0c, 0x47, 0x18, 0x53, 0xd1, 0x49, 0x0d, 0x5a, 0x32, 0x5a, 0x7f, 0xfd, 0x44, 0x86,
    0x3f, 0x23, 0xcf, 0x76, 0xb7, 0x4c, 0xba, 0x9e, 0xf8, 0xb6, 0x37, 0x6c, 0xcc, 0xa5, 0x5f, 0xb7,
    0x79, 0xba, 0x10, 0xfc, 0x74, 0x4d, 0x48, 0xbb, 0xae, 0x8d, 0x3b, 0x0f, 0xc7, 0x89, 0x62, 0x03,
};

static const char golden_keyfile[] =
    "sfl-identity-v1\n"
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60\n"
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a\n";

/* ---- helpers ------------------------------------------------------------- */

static sfl_upd_ctx_t golden_ctx(void)
{
    sfl_upd_ctx_t c;

    memset(&c, 0xEE, sizeof(c)); /* padding must not matter */
    for (int i = 0; i < 32; i++) {
        c.round_pk[i] = (uint8_t)i;
        c.nonce[i] = (uint8_t)(0x40 + i);
    }
    c.job = 0x0102030405060708ULL;
    c.round = 42;
    c.agent_id = 7;
    sfl_seal_hash(golden_model, strlen(golden_model), c.model_hash);
    return c;
}

/* A context for a live round key. */
static sfl_upd_ctx_t ctx_for(const sfl_roundkey_t *rk)
{
    sfl_upd_ctx_t c = golden_ctx();

    memcpy(c.round_pk, rk->pk, 32);
    randombytes_buf(c.nonce, sizeof(c.nonce));
    return c;
}

/* An exact-size heap copy, so ASan catches a read past the end. */
static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);

    assert_non_null(q);
    if (n)
        memcpy(q, p, n);
    return q;
}

/* Seals payload for (id, ctx); returns malloc'ed bytes, *len their size. */
static uint8_t *seal_new(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                         size_t n, size_t *len)
{
    size_t cap = sfl_seal_sealed_size(n);
    uint8_t *out = malloc(cap);

    assert_non_null(out);
    assert_int_equal(sfl_seal_update(id, ctx, payload, n, out, cap, len), 0);
    assert_int_equal(*len, n + SFL_SEAL_OVERHEAD);
    return out;
}

static int open_rc(const sfl_roundkey_t *rk, const uint8_t *pk, const sfl_upd_ctx_t *ctx,
                   const uint8_t *sealed, size_t len)
{
    uint8_t *p = (uint8_t *)1;
    size_t n = 99;
    int rc = sfl_seal_open_update(rk, pk, ctx, sealed, len, 1 << 20, &p, &n, NULL);

    if (rc < 0) {
        assert_null(p);
        assert_int_equal(n, 0);
    }
    sfl__free(p);
    return rc;
}

static void write_file(const char *path, const void *b, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void make_dir(char *tmpl)
{
    assert_non_null(mkdtemp(tmpl));
}

/* Removes dir and the plain files in it. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        if (unlink(p) != 0)
            (void)rmdir(p);
    }
    closedir(d);
    assert_int_equal(rmdir(dir), 0);
}

/* ---- tests --------------------------------------------------------------- */

static void test_seal_rfc8032(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    uint8_t sig[64];

    assert_int_equal(sfl_seal_init(), 0);
    assert_int_equal(sfl_identity_from_seed(rfc_seed, &id), 0);
    assert_memory_equal(id->pk, rfc_pk, 32);
    /* libsodium's secret key is seed | pk: our key handling keeps that form. */
    assert_memory_equal(id->sk, rfc_seed, 32);
    assert_memory_equal(id->sk + 32, rfc_pk, 32);
    assert_int_equal(crypto_sign_detached(sig, NULL, (const uint8_t *)"", 0, id->sk), 0);
    assert_memory_equal(sig, rfc_sig, 64);
    assert_int_equal(crypto_sign_verify_detached(rfc_sig, (const uint8_t *)"", 0, rfc_pk), 0);
    assert_int_equal(sfl_identity_pk_check(id->pk), 0);
    sfl_identity_free(id);
    sfl_identity_free(NULL);
}

static void test_seal_hash(void **state)
{
    (void)state;
    /* RFC 7693 appendix A: BLAKE2b-512("abc"), through libsodium. */
    static const uint8_t abc512[64] = {
        0xBA, 0x80, 0xA5, 0x3F, 0x98, 0x1C, 0x4D, 0x0D, 0x6A, 0x27, 0x97, 0xB6, 0x9F, 0x12, 0xF6,
        0xE9, 0x4C, 0x21, 0x2F, 0x14, 0x68, 0x5A, 0xC4, 0xB7, 0x4B, 0x12, 0xBB, 0x6F, 0xDB, 0xFF,
        0xA2, 0xD1, 0x7D, 0x87, 0xC5, 0x39, 0x2A, 0xAB, 0x79, 0x2D, 0xC2, 0x52, 0xD5, 0xDE, 0x45,
        0x33, 0xCC, 0x95, 0x18, 0xD3, 0x8A, 0xA8, 0xDB, 0xF1, 0x92, 0x5A, 0xB9, 0x23, 0x86, 0xED,
        0xD4, 0x00, 0x99, 0x23,
    };
    /* BLAKE2b-256 (digest length 32 in the parameter block, so not a
     * prefix of the 512-bit digest). */
    static const uint8_t abc256[32] = {
        0xbd, 0xdd, 0x81, 0x3c, 0x63, 0x42, 0x39, 0x72, 0x31, 0x71, 0xef, 0x3f, 0xee, 0x98, 0x57, 0x9b,
        0x94, 0x96, 0x4e, 0x3b, 0xb1, 0xcb, 0x3e, 0x42, 0x72, 0x62, 0xc8, 0xc0, 0x68, 0xd5, 0x23, 0x19,
    };
    static const uint8_t empty256[32] = {
        0x0e, 0x57, 0x51, 0xc0, 0x26, 0xe5, 0x43, 0xb2, 0xe8, 0xab, 0x2e, 0xb0, 0x60, 0x99, 0xda, 0xa1,
        0xd1, 0xe5, 0xdf, 0x47, 0x77, 0x8f, 0x77, 0x87, 0xfa, 0xab, 0x45, 0xcd, 0xf1, 0x2f, 0xe3, 0xa8,
    };
    uint8_t h[64];

    assert_int_equal(crypto_generichash(h, 64, (const uint8_t *)"abc", 3, NULL, 0), 0);
    assert_memory_equal(h, abc512, 64);
    sfl_seal_hash("abc", 3, h);
    assert_memory_equal(h, abc256, 32);
    sfl_seal_hash(NULL, 0, h);
    assert_memory_equal(h, empty256, 32);
    sfl_seal_hash(golden_model, strlen(golden_model), h);
    assert_memory_equal(h, golden_model_hash, 32);
}

static void test_seal_pk_hex(void **state)
{
    (void)state;
    char hex[65], upper[65];
    uint8_t pk[32];

    assert_string_equal(sfl_seal_pk_to_hex(rfc_pk, hex),
                        "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
    assert_int_equal(sfl_seal_pk_from_hex(hex, pk), 0);
    assert_memory_equal(pk, rfc_pk, 32);
    for (int i = 0; i < 65; i++)
        upper[i] = (char)((hex[i] >= 'a' && hex[i] <= 'f') ? hex[i] - 32 : hex[i]);
    memset(pk, 0, 32);
    assert_int_equal(sfl_seal_pk_from_hex(upper, pk), 0);
    assert_memory_equal(pk, rfc_pk, 32);

    memset(pk, 0x55, 32);
    hex[63] = '\0'; /* 63 digits */
    assert_int_equal(sfl_seal_pk_from_hex(hex, pk), SFL_EPARSE);
    assert_detail("public key: expected 64 hex digits");
    hex[63] = 'a';
    char longer[70];
    snprintf(longer, sizeof(longer), "%s00", hex);
    assert_int_equal(sfl_seal_pk_from_hex(longer, pk), SFL_EPARSE);
    hex[10] = 'g';
    assert_int_equal(sfl_seal_pk_from_hex(hex, pk), SFL_EPARSE);
    hex[10] = ' ';
    assert_int_equal(sfl_seal_pk_from_hex(hex, pk), SFL_EPARSE);
    assert_int_equal(sfl_seal_pk_from_hex("", pk), SFL_EPARSE);
    assert_int_equal(sfl_seal_pk_from_hex(NULL, pk), SFL_EINVAL);
    for (int i = 0; i < 32; i++)
        assert_int_equal(pk[i], 0x55); /* untouched on failure */
}

static void test_seal_pk_check(void **state)
{
    (void)state;
    uint8_t pk[32];

    assert_int_equal(sfl_identity_pk_check(rfc_pk), 0);
    memset(pk, 0, 32); /* y = 0: a point of order 4 */
    assert_int_equal(sfl_identity_pk_check(pk), SFL_EINVAL);
    pk[0] = 1; /* y = 1: the identity */
    assert_int_equal(sfl_identity_pk_check(pk), SFL_EINVAL);
    assert_detail("identity public key is not a valid Ed25519 point");
    memset(pk, 0xff, 32); /* non-canonical */
    assert_int_equal(sfl_identity_pk_check(pk), SFL_EINVAL);
}

static void test_seal_sign_verify(void **state)
{
    (void)state;
    sfl_identity_t *a = NULL, *b = NULL, *r = NULL;
    const char msg[] = "task message";
    uint8_t sig[64], bad[64];

    assert_int_equal(sfl_identity_generate(&a), 0);
    assert_int_equal(sfl_identity_generate(&b), 0);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", msg, strlen(msg), sig), 0);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", msg, strlen(msg), sig), 0);
    /* another key, another message, a shorter message */
    assert_int_equal(sfl_seal_verify_detached(b->pk, "sfl-task-v1", msg, strlen(msg), sig),
                     SFL_EBADSIG);
    assert_detail("'sfl-task-v1' signature does not verify");
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", "task messagE", strlen(msg),
                                              sig),
                     SFL_EBADSIG);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", msg, strlen(msg) - 1, sig),
                     SFL_EBADSIG);
    /* every bit position of the signature matters (byte-wise flips) */
    for (int i = 0; i < 64; i++) {
        memcpy(bad, sig, 64);
        bad[i] ^= (uint8_t)(1u << (i % 8));
        assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", msg, strlen(msg), bad),
                         SFL_EBADSIG);
    }
    /* empty message */
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", NULL, 0, sig), 0);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", "", 0, sig), 0);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", NULL, 3, sig), SFL_EINVAL);

    /* deterministic, and equal to the independently computed vector */
    assert_int_equal(sfl_identity_from_seed(rfc_seed, &r), 0);
    assert_int_equal(sfl_seal_sign_detached(r, "sfl-task-v1", msg, strlen(msg), sig), 0);
    assert_memory_equal(sig, golden_task_sig, 64);
    assert_int_equal(sfl_seal_verify_detached(rfc_pk, "sfl-task-v1", msg, strlen(msg),
                                              golden_task_sig),
                     0);
    sfl_identity_free(r);
    sfl_identity_free(b);
    sfl_identity_free(a);
}

static void test_seal_context_separation(void **state)
{
    (void)state;
    sfl_identity_t *a = NULL;
    sfl_upd_ctx_t c = golden_ctx();
    uint8_t sig[64], upd[SFL_SEAL_UPD_SIGNED_BYTES], h[32];
    char ctx65[66];

    assert_int_equal(sfl_identity_generate(&a), 0);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", "m", 1, sig), 0);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-admin-v1", "m", 1, sig), SFL_EBADSIG);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v2", "m", 1, sig), SFL_EBADSIG);
    /* a task signature is not an update signature, whatever the task says:
     * not even over a message made of an update's signed bytes */
    assert_int_equal(sfl_seal_verify_update(a->pk, &c, "m", 1, sig), SFL_EBADSIG);
    sfl_seal_hash(golden_payload, strlen(golden_payload), h);
    sfl_seal_upd_signed_bytes(&c, h, upd);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", upd, sizeof(upd), sig), 0);
    assert_int_equal(sfl_seal_verify_update(a->pk, &c, golden_payload, strlen(golden_payload), sig),
                     SFL_EBADSIG);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", upd + 11, sizeof(upd) - 11, sig),
                     0);
    assert_int_equal(sfl_seal_verify_update(a->pk, &c, golden_payload, strlen(golden_payload), sig),
                     SFL_EBADSIG);
    /* and the other way: an update signature is no generic signature */
    assert_int_equal(sfl_seal_sign_update(a, &c, golden_payload, strlen(golden_payload), sig), 0);
    assert_int_equal(sfl_seal_verify_detached(a->pk, "sfl-task-v1", upd, sizeof(upd), sig),
                     SFL_EBADSIG);

    /* the update context is reserved; malformed contexts are refused */
    assert_int_equal(sfl_seal_sign_detached(a, SFL_SEAL_CONTEXT_UPDATE, "m", 1, sig), SFL_EINVAL);
    assert_detail("signature context 'sfl-upd-v1' is reserved for updates");
    assert_int_equal(sfl_seal_verify_detached(a->pk, SFL_SEAL_CONTEXT_UPDATE, "m", 1, sig),
                     SFL_EINVAL);
    assert_int_equal(sfl_seal_sign_detached(a, "", "m", 1, sig), SFL_EINVAL);
    assert_int_equal(sfl_seal_sign_detached(a, NULL, "m", 1, sig), SFL_EINVAL);
    assert_int_equal(sfl_seal_sign_detached(a, "sfl\ntask", "m", 1, sig), SFL_EINVAL);
    assert_detail("signature context: byte 3 is not printable ASCII");
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-\xc3\xa9", "m", 1, sig), SFL_EINVAL);
    memset(ctx65, 'x', 65);
    ctx65[65] = '\0';
    assert_int_equal(sfl_seal_sign_detached(a, ctx65, "m", 1, sig), SFL_EINVAL);
    ctx65[64] = '\0'; /* 64 is the maximum */
    assert_int_equal(sfl_seal_sign_detached(a, ctx65, "m", 1, sig), 0);
    assert_int_equal(sfl_seal_verify_detached(a->pk, ctx65, "m", 1, sig), 0);
    sfl_identity_free(a);
}

/* Join's proof of possession: the documented signed bytes (checked here
 * with libsodium alone), refused for another key or another connection's
 * binding, and its context reserved so the generic API cannot mint one. */
static void test_seal_join_proof(void **state)
{
    sfl_identity_t *a, *b;
    uint8_t bind1[SFL_SEAL_BINDING_BYTES], bind2[SFL_SEAL_BINDING_BYTES];
    uint8_t sig[64], sig2[64], signed_bytes[1 + 11 + 32];

    (void)state;
    assert_int_equal(sfl_identity_generate(&a), 0);
    assert_int_equal(sfl_identity_generate(&b), 0);
    memset(bind1, 0x11, sizeof(bind1));
    memset(bind2, 0x11, sizeof(bind2));
    bind2[31] ^= 1;
    assert_int_equal(sfl_seal_sign_join(a, bind1, sig), 0);
    assert_int_equal(sfl_seal_verify_join(a->pk, bind1, sig), 0);
    /* u8 11 | "sfl-join-v1" | BLAKE2b-256(binding), as coordinator.proto says */
    signed_bytes[0] = 11;
    memcpy(signed_bytes + 1, "sfl-join-v1", 11);
    crypto_generichash(signed_bytes + 12, 32, bind1, sizeof(bind1), NULL, 0);
    assert_int_equal(crypto_sign_verify_detached(sig, signed_bytes, sizeof(signed_bytes), a->pk),
                     0);
    /* another key presented with a's proof; another connection's binding */
    assert_int_equal(sfl_seal_verify_join(b->pk, bind1, sig), SFL_EBADSIG);
    assert_int_equal(sfl_seal_verify_join(a->pk, bind2, sig), SFL_EBADSIG);
    assert_detail("Join proof does not verify: not signed with this identity key over this "
                  "connection");
    /* b signing for a's key: the proof is b's, not a's */
    assert_int_equal(sfl_seal_sign_join(b, bind1, sig2), 0);
    assert_int_equal(sfl_seal_verify_join(a->pk, bind1, sig2), SFL_EBADSIG);
    /* the context is reserved, both ways */
    assert_int_equal(sfl_seal_sign_detached(a, SFL_SEAL_CONTEXT_JOIN, bind1, 32, sig2),
                     SFL_EINVAL);
    assert_detail("signature context 'sfl-join-v1' is reserved for Join proofs");
    assert_int_equal(sfl_seal_verify_detached(a->pk, SFL_SEAL_CONTEXT_JOIN, bind1, 32, sig),
                     SFL_EINVAL);
    /* a generic signature of the same bytes under another context is no proof */
    assert_int_equal(sfl_seal_sign_detached(a, "sfl-task-v1", bind1, 32, sig2), 0);
    assert_int_equal(sfl_seal_verify_join(a->pk, bind1, sig2), SFL_EBADSIG);
    sfl_identity_free(b);
    sfl_identity_free(a);
}

static void test_seal_upd_signed_golden(void **state)
{
    (void)state;
    sfl_upd_ctx_t c = golden_ctx();
    sfl_identity_t *id = NULL;
    uint8_t h[32], out[SFL_SEAL_UPD_SIGNED_BYTES], sig[64];
    const size_t n = strlen(golden_payload);

    sfl_seal_hash(golden_payload, n, h);
    sfl_seal_upd_signed_bytes(&c, h, out);
    assert_memory_equal(out, golden_upd_signed, sizeof(out));
    assert_memory_equal(c.model_hash, golden_model_hash, 32);

    assert_int_equal(sfl_identity_from_seed(rfc_seed, &id), 0);
    assert_int_equal(sfl_seal_sign_update(id, &c, golden_payload, n, sig), 0);
    assert_memory_equal(sig, golden_upd_sig, 64);
    assert_int_equal(crypto_sign_verify_detached(golden_upd_sig, golden_upd_signed,
                                                 sizeof(golden_upd_signed), rfc_pk),
                     0);
    assert_int_equal(sfl_seal_verify_update(rfc_pk, &c, golden_payload, n, golden_upd_sig), 0);
    sfl_identity_free(id);

    /* The copies in tests/vectors/ agree (when run from the source root). */
    static const struct {
        const char *file;
        const uint8_t *bytes;
        size_t len;
    } files[] = {
        {"tests/vectors/seal_upd_signed.bin", golden_upd_signed, sizeof(golden_upd_signed)},
        {"tests/vectors/seal_upd_sig.bin", golden_upd_sig, 64},
        {"tests/vectors/seal_task_sig.bin", golden_task_sig, 64},
        {"tests/vectors/seal_identity_v1.key", (const uint8_t *)golden_keyfile,
         sizeof(golden_keyfile) - 1},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        FILE *f = fopen(files[i].file, "rb");
        uint8_t b[256];

        if (f == NULL)
            continue;
        size_t got = fread(b, 1, sizeof(b), f);
        fclose(f);
        assert_int_equal(got, files[i].len);
        assert_memory_equal(b, files[i].bytes, got);
    }
}

/* Mode 1 as agents send it: payload | sigma, checked in place. Every field
 * of the context, every byte, truncation and the size limit are refused;
 * the digest API agrees with the one that hashes. */
static void test_seal_signed(void **state)
{
    (void)state;
    sfl_upd_ctx_t c = golden_ctx(), x;
    sfl_identity_t *id = NULL, *other = NULL;
    const size_t n = strlen(golden_payload);
    uint8_t buf[64 + 64], h[32], sig[64], *m;
    size_t len = 0, pl = 99;

    assert_int_equal(sfl_identity_from_seed(rfc_seed, &id), 0);
    assert_int_equal(sfl_identity_generate(&other), 0);
    assert_int_equal(sfl_seal_signed_size(n), n + 64);
    assert_int_equal(sfl_seal_signed_size(SIZE_MAX - 10), 0);
    assert_int_equal(sfl_seal_sign_into(id, &c, golden_payload, n, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, n + 64);
    assert_memory_equal(buf, golden_payload, n);
    assert_memory_equal(buf + n, golden_upd_sig, 64); /* the same sigma as sealed */
    /* digest API = hashing API */
    sfl_seal_hash(golden_payload, n, h);
    assert_int_equal(sfl_seal_sign_update_digest(id, &c, h, sig), 0);
    assert_memory_equal(sig, golden_upd_sig, 64);
    assert_int_equal(sfl_seal_verify_update_digest(rfc_pk, &c, h, sig), 0);
    h[0] ^= 1;
    assert_int_equal(sfl_seal_verify_update_digest(rfc_pk, &c, h, sig), SFL_EBADSIG);
    h[0] ^= 1;

    m = dup_bytes(buf, len); /* exact size: ASan sees a read past the end */
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, len, n, NULL, &pl), 0);
    assert_int_equal(pl, n);
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, len, n, h, &pl), 0);
    /* a hash that is not the payload's (a wrong streaming digest) */
    h[5] ^= 0x80;
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, len, n, h, &pl), SFL_EBADSIG);
    /* oversized, truncated, empty, NULL */
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, len, n - 1, NULL, &pl), SFL_ELIMIT);
    assert_int_equal(pl, 0);
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, 63, n, NULL, &pl), SFL_ETRUNC);
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, 0, n, NULL, &pl), SFL_ETRUNC);
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, NULL, len, n, NULL, &pl), SFL_ETRUNC);
    /* a signature-only message is an empty payload, signed or not */
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m + n, 64, n, NULL, &pl), SFL_EBADSIG);
    /* dropping a payload byte shifts the signature: refused */
    assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m + 1, len - 1, n, NULL, &pl),
                     SFL_EBADSIG);
    /* every byte altered, one at a time */
    for (size_t i = 0; i < len; i++) {
        m[i] ^= 0x20;
        assert_int_equal(sfl_seal_check_update(rfc_pk, &c, m, len, n, NULL, &pl), SFL_EBADSIG);
        m[i] ^= 0x20;
    }
    /* another signer's key; each context field replayed elsewhere */
    assert_int_equal(sfl_seal_check_update(other->pk, &c, m, len, n, NULL, &pl), SFL_EBADSIG);
    for (int f = 0; f < 6; f++) {
        x = c;
        switch (f) {
        case 0: x.round_pk[3] ^= 1; break;
        case 1: x.job++; break;
        case 2: x.round++; break;
        case 3: x.nonce[31] ^= 1; break;
        case 4: x.agent_id++; break;
        default: x.model_hash[0] ^= 1; break;
        }
        assert_int_equal(sfl_seal_check_update(rfc_pk, &x, m, len, n, NULL, &pl), SFL_EBADSIG);
    }
    /* sign_into: too small a buffer, NULL payload */
    assert_int_equal(sfl_seal_sign_into(id, &c, golden_payload, n, buf, n + 63, &len),
                     SFL_ELIMIT);
    assert_int_equal(len, 0);
    assert_int_equal(sfl_seal_sign_into(id, &c, NULL, 3, buf, sizeof(buf), &len), SFL_EINVAL);
    assert_int_equal(sfl_seal_sign_into(id, &c, NULL, 0, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 64);
    free(m);
    sfl_identity_free(other);
    sfl_identity_free(id);
}

static void test_seal_roundtrip(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    uint8_t *sealed, *p = NULL, sig[64], want[64];
    size_t len, n;
    static uint8_t big[100000];

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    sfl_upd_ctx_t c = ctx_for(rk);

    const size_t sizes[] = {0, 1, strlen(golden_payload), sizeof(big)};
    randombytes_buf(big, sizeof(big));
    memcpy(big, golden_payload, strlen(golden_payload));
    for (size_t s = 0; s < 4; s++) {
        sealed = seal_new(id, &c, big, sizes[s], &len);
        memset(sig, 0, 64);
        assert_int_equal(sfl_seal_open_update(rk, id->pk, &c, sealed, len, sizes[s], &p, &n, sig),
                         0);
        assert_int_equal(n, sizes[s]);
        assert_non_null(p);
        if (n)
            assert_memory_equal(p, big, n);
        /* the signature handed back is the agent's, verifiable later */
        assert_int_equal(sfl_seal_sign_update(id, &c, big, sizes[s], want), 0);
        assert_memory_equal(sig, want, 64);
        assert_int_equal(sfl_seal_verify_update(id->pk, &c, p, n, sig), 0);
        sfl__free(p);
        p = NULL;
        /* sealing is randomised (ephemeral key): two seals differ */
        size_t len2;
        uint8_t *again = seal_new(id, &c, big, sizes[s], &len2);
        assert_int_equal(len2, len);
        assert_memory_not_equal(again, sealed, len);
        free(again);
        free(sealed);
    }
    assert_int_equal(sfl_seal_sealed_size(5), 5 + SFL_SEAL_OVERHEAD);
    sfl_roundkey_free(rk);
    sfl_roundkey_free(NULL);
    sfl_identity_free(id);
}

static void test_seal_tamper(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    size_t len;

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    sfl_upd_ctx_t c = ctx_for(rk);
    uint8_t *sealed = seal_new(id, &c, golden_payload, strlen(golden_payload), &len);

    assert_int_equal(open_rc(rk, id->pk, &c, sealed, len), 0);
    /* Every byte of every region: ephemeral pk [0,32), tag [32,48),
     * ciphertext of the payload [48, len-64), of the signature [len-64, len).
     * Flipping the low or the high bit (X25519 ignores the top bit of a u
     * coordinate, but the nonce hashes the raw bytes) is always caught. */
    for (size_t i = 0; i < len; i++) {
        for (int b = 0; b < 2; b++) {
            uint8_t *t = dup_bytes(sealed, len);

            t[i] ^= b ? 0x80 : 0x01;
            int rc = open_rc(rk, id->pk, &c, t, len);
            if (rc != SFL_EDECRYPT)
                fail_msg("flip of byte %zu bit %d: rc %d", i, b ? 7 : 0, rc);
            free(t);
        }
    }
    assert_detail("cannot open sealed update");
    /* one byte added */
    uint8_t *longer = malloc(len + 1);
    assert_non_null(longer);
    memcpy(longer, sealed, len);
    longer[len] = 0;
    assert_int_equal(open_rc(rk, id->pk, &c, longer, len + 1), SFL_EDECRYPT);
    free(longer);
    free(sealed);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

static void test_seal_wrong_round_key(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk_t = NULL, *rk_t1 = NULL;
    size_t len;

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk_t), 0);
    assert_int_equal(sfl_roundkey_new(&rk_t1), 0);
    sfl_upd_ctx_t c = ctx_for(rk_t);
    uint8_t *sealed = seal_new(id, &c, golden_payload, strlen(golden_payload), &len);

    /* Replayed into round t+1: the coordinator opens with that round's key. */
    sfl_upd_ctx_t c1 = c;
    memcpy(c1.round_pk, rk_t1->pk, 32);
    c1.round = c.round + 1;
    randombytes_buf(c1.nonce, sizeof(c1.nonce));
    assert_int_equal(open_rc(rk_t1, id->pk, &c1, sealed, len), SFL_EDECRYPT);
    assert_int_equal(open_rc(rk_t, id->pk, &c, sealed, len), 0);
    /* a context that names another key than the one opening is a caller bug */
    assert_int_equal(open_rc(rk_t, id->pk, &c1, sealed, len), SFL_EINVAL);
    assert_detail("open: expected context names another round key");
    free(sealed);
    sfl_roundkey_free(rk_t1);
    sfl_roundkey_free(rk_t);
    sfl_identity_free(id);
}

static void test_seal_reseal_attack(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL, *other = NULL;
    uint8_t *p = NULL, sig[64];
    size_t len, n;
    const size_t plen = strlen(golden_payload);

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    assert_int_equal(sfl_roundkey_new(&other), 0);
    sfl_upd_ctx_t c = ctx_for(rk);
    uint8_t *sealed = seal_new(id, &c, golden_payload, plen, &len);

    assert_int_equal(sfl_seal_open_update(rk, id->pk, &c, sealed, len, plen, &p, &n, sig), 0);
    /* Whoever saw payload | sigma (the coordinator, a proxy, a stored copy)
     * re-seals it to another recipient key with everything else equal. */
    uint8_t *plain = malloc(n + 64), *resealed = malloc(len);
    assert_non_null(plain);
    assert_non_null(resealed);
    memcpy(plain, p, n);
    memcpy(plain + n, sig, 64);
    assert_int_equal(crypto_box_seal(resealed, plain, n + 64, other->pk), 0);
    sfl_upd_ctx_t c2 = c;
    memcpy(c2.round_pk, other->pk, 32);
    assert_int_equal(open_rc(other, id->pk, &c2, resealed, len), SFL_EBADSIG);
    assert_detail("update signature does not verify for agent 7");
    /* the same re-seal to the right key is just the original update */
    assert_int_equal(crypto_box_seal(resealed, plain, n + 64, rk->pk), 0);
    assert_int_equal(open_rc(rk, id->pk, &c, resealed, len), 0);
    /* a payload swapped under the original signature fails too */
    plain[0] ^= 1;
    assert_int_equal(crypto_box_seal(resealed, plain, n + 64, rk->pk), 0);
    assert_int_equal(open_rc(rk, id->pk, &c, resealed, len), SFL_EBADSIG);
    free(resealed);
    free(plain);
    sfl__free(p);
    free(sealed);
    sfl_roundkey_free(other);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

static void test_seal_context_mismatch(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL, *mallory = NULL;
    sfl_roundkey_t *rk = NULL;
    size_t len;

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_identity_generate(&mallory), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    sfl_upd_ctx_t c = ctx_for(rk), e;
    uint8_t *sealed = seal_new(id, &c, golden_payload, strlen(golden_payload), &len);

    /* The coordinator's expectation differs in exactly one field. */
    e = c;
    e.agent_id++; /* submitted on another agent's connection */
    assert_int_equal(open_rc(rk, id->pk, &e, sealed, len), SFL_EBADSIG);
    e = c;
    e.model_hash[5] ^= 1; /* trained from a stale model */
    assert_int_equal(open_rc(rk, id->pk, &e, sealed, len), SFL_EBADSIG);
    e = c;
    e.job++;
    assert_int_equal(open_rc(rk, id->pk, &e, sealed, len), SFL_EBADSIG);
    e = c;
    e.round++; /* the same key reused for another round would still not help */
    assert_int_equal(open_rc(rk, id->pk, &e, sealed, len), SFL_EBADSIG);
    e = c;
    e.nonce[31] ^= 0x80; /* the round was restarted with a fresh nonce */
    assert_int_equal(open_rc(rk, id->pk, &e, sealed, len), SFL_EBADSIG);
    /* verified against another agent's registered key */
    assert_int_equal(open_rc(rk, mallory->pk, &c, sealed, len), SFL_EBADSIG);
    /* a small-order "registered" key never verifies anything */
    uint8_t zero[32] = {0};
    assert_int_equal(open_rc(rk, zero, &c, sealed, len), SFL_EBADSIG);
    /* Mallory seals her own update claiming agent 7: signed with her key */
    size_t mlen;
    uint8_t *forged = seal_new(mallory, &c, golden_payload, strlen(golden_payload), &mlen);
    assert_int_equal(open_rc(rk, id->pk, &c, forged, mlen), SFL_EBADSIG);
    free(forged);
    assert_int_equal(open_rc(rk, id->pk, &c, sealed, len), 0);
    free(sealed);
    sfl_roundkey_free(rk);
    sfl_identity_free(mallory);
    sfl_identity_free(id);
}

static void test_seal_truncated(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    size_t len;

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    sfl_upd_ctx_t c = ctx_for(rk);
    uint8_t *sealed = seal_new(id, &c, golden_payload, strlen(golden_payload), &len);

    for (size_t n = 0; n < len; n++) {
        uint8_t *t = dup_bytes(sealed, n);
        int rc = open_rc(rk, id->pk, &c, t, n);

        if (n < SFL_SEAL_OVERHEAD) {
            assert_int_equal(rc, SFL_ETRUNC);
            assert_detail("sealed update is ");
        } else {
            assert_int_equal(rc, SFL_EDECRYPT);
        }
        free(t);
    }
    assert_int_equal(open_rc(rk, id->pk, &c, NULL, 0), SFL_ETRUNC);
    assert_int_equal(open_rc(rk, id->pk, &c, NULL, 500), SFL_ETRUNC);
    free(sealed);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

static void test_seal_limits(void **state)
{
    (void)state;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    uint8_t *p = (uint8_t *)1, out[256], small[SFL_SEAL_OVERHEAD + 3];
    size_t len, n = 7;
    int rc;

    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_roundkey_new(&rk), 0);
    sfl_upd_ctx_t c = ctx_for(rk);
    uint8_t *sealed = seal_new(id, &c, golden_payload, 21, &len);

    /* A payload over the limit is refused before anything is allocated:
     * the counting allocator sees no call at all. */
    failalloc_install();
    failalloc_arm(-1);
    rc = sfl_seal_open_update(rk, id->pk, &c, sealed, len, 20, &p, &n, NULL);
    long made = failalloc_count();
    failalloc_uninstall();
    assert_int_equal(rc, SFL_ELIMIT);
    assert_int_equal(made, 0);
    assert_null(p);
    assert_int_equal(n, 0);
    assert_detail("sealed update carries a 21-byte payload, limit 20");
    /* a hostile length claim (a huge buffer) is just as cheap */
    assert_int_equal(open_rc(rk, id->pk, &c, sealed, SIZE_MAX), SFL_ELIMIT);
    assert_int_equal(sfl_seal_open_update(rk, id->pk, &c, sealed, len, 21, &p, &n, NULL), 0);
    sfl__free(p);

    /* The agent side: the output buffer must hold payload + 112. */
    failalloc_install();
    failalloc_arm(-1);
    rc = sfl_seal_update(id, &c, golden_payload, 4, small, sizeof(small), &len);
    made = failalloc_count();
    failalloc_uninstall();
    assert_int_equal(rc, SFL_ELIMIT);
    assert_int_equal(made, 0);
    assert_int_equal(len, 0);
    assert_detail("seal: a 4-byte payload needs 116 bytes, buffer holds 115");
    assert_int_equal(sfl_seal_update(id, &c, golden_payload, 3, small, sizeof(small), &len), 0);
    assert_int_equal(len, sizeof(small));
    assert_int_equal(sfl_seal_update(id, &c, out, SIZE_MAX - 100, out, sizeof(out), &len),
                     SFL_ELIMIT);
    assert_int_equal(sfl_seal_sealed_size(SIZE_MAX - SFL_SEAL_OVERHEAD + 1), 0);
    assert_int_equal(sfl_seal_sealed_size(SIZE_MAX - SFL_SEAL_OVERHEAD), SIZE_MAX);
    assert_int_equal(sfl_seal_update(id, &c, NULL, 3, out, sizeof(out), &len), SFL_EINVAL);

    /* A small-order round key (from a broken or hostile coordinator):
     * libsodium refuses the all-zero shared secret. */
    memset(c.round_pk, 0, 32);
    assert_int_equal(sfl_seal_update(id, &c, golden_payload, 3, out, sizeof(out), &len),
                     SFL_EINVAL);
    assert_detail("seal: round public key rejected");
    assert_int_equal(len, 0);
    free(sealed);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

static void test_seal_identity_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/sfl_seal_XXXXXX", path[128], rel[160], cwd[512];
    sfl_identity_t *id = NULL, *back = NULL, *rfc = NULL;
    struct stat st;
    uint8_t s1[64], s2[64];

    make_dir(dir);
    snprintf(path, sizeof(path), "%s/agent.key", dir);
    assert_int_equal(sfl_identity_generate(&id), 0);
    assert_int_equal(sfl_identity_save(id, path), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, SFL_IDENTITY_FILE_BYTES);
    assert_int_equal(count_entries(dir), 1); /* no temporary left */
    assert_int_equal(sfl_identity_load(path, &back), 0);
    assert_memory_equal(back->pk, id->pk, 32);
    assert_int_equal(sfl_seal_sign_detached(id, "t", "m", 1, s1), 0);
    assert_int_equal(sfl_seal_sign_detached(back, "t", "m", 1, s2), 0);
    assert_memory_equal(s1, s2, 64);
    sfl_identity_free(back);
    back = NULL;

    /* Saving again replaces the file atomically, still 0600, still alone. */
    assert_int_equal(sfl_identity_from_seed(rfc_seed, &rfc), 0);
    assert_int_equal(sfl_identity_save(rfc, path), 0);
    assert_int_equal(count_entries(dir), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* exact bytes of the format */
    FILE *f = fopen(path, "rb");
    char text[200];
    assert_non_null(f);
    size_t got = fread(text, 1, sizeof(text), f);
    fclose(f);
    assert_int_equal(got, sizeof(golden_keyfile) - 1);
    assert_memory_equal(text, golden_keyfile, got);
    assert_int_equal(sfl_identity_load(path, &back), 0);
    assert_memory_equal(back->pk, rfc_pk, 32);
    sfl_identity_free(back);
    back = NULL;

    /* Read-only for the owner is fine too; upper-case hex is accepted. */
    char upper[sizeof(golden_keyfile)];
    memcpy(upper, golden_keyfile, sizeof(upper));
    for (size_t i = 16; i < sizeof(upper); i++)
        if (upper[i] >= 'a' && upper[i] <= 'f')
            upper[i] = (char)(upper[i] - 32);
    write_file(path, upper, sizeof(upper) - 1, 0400);
    assert_int_equal(sfl_identity_load(path, &back), 0);
    assert_memory_equal(back->pk, rfc_pk, 32);
    sfl_identity_free(back);
    back = NULL;
    assert_int_equal(chmod(path, 0600), 0);

    /* A relative path (directory part ".") */
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(sfl_identity_save(id, "rel.key"), 0);
    assert_int_equal(sfl_identity_load("rel.key", &back), 0);
    assert_memory_equal(back->pk, id->pk, 32);
    sfl_identity_free(back);
    back = NULL;
    assert_int_equal(chdir(cwd), 0);
    snprintf(rel, sizeof(rel), "%s/rel.key", dir);
    assert_int_equal(count_entries(dir), 2);
    assert_int_equal(unlink(rel), 0);

    sfl_identity_free(rfc);
    sfl_identity_free(id);
    remove_dir(dir);
}

/* The same parser from memory, as tests/fuzz/fuzz_seal.c drives it. */
static void test_seal_identity_parse(void **state)
{
    (void)state;
    const size_t flen = sizeof(golden_keyfile) - 1;
    sfl_identity_t *id = NULL;
    char text[sizeof(golden_keyfile) + 1];

    assert_int_equal(sfl_identity_parse(golden_keyfile, flen, "mem", &id), 0);
    assert_memory_equal(id->pk, rfc_pk, sizeof(rfc_pk));
    sfl_identity_free(id);
    id = (sfl_identity_t *)1;
    assert_int_equal(sfl_identity_parse(golden_keyfile, flen - 1, "mem", &id), SFL_ETRUNC);
    assert_null(id);
    assert_non_null(strstr(sfl_last_error(), "mem: 145 bytes"));
    assert_int_equal(sfl_identity_parse(NULL, 0, NULL, &id), SFL_ETRUNC);
    memcpy(text, golden_keyfile, flen);
    text[flen] = '\n';
    assert_int_equal(sfl_identity_parse(text, flen + 1, "mem", &id), SFL_EPARSE);
    text[50] = text[50] == '8' ? '9' : '8';
    assert_int_equal(sfl_identity_parse(text, flen, "mem", &id), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "mem: public key does not match"));
    assert_null(id);
}

static void test_seal_identity_file_bad(void **state)
{
    (void)state;
    char dir[] = "/tmp/sfl_seal_XXXXXX", path[128], sub[128], missing[160];
    sfl_identity_t *id = NULL, *back = (sfl_identity_t *)1;
    char text[sizeof(golden_keyfile)];
    const size_t flen = sizeof(golden_keyfile) - 1;

    make_dir(dir);
    snprintf(path, sizeof(path), "%s/agent.key", dir);

    /* Permissions: any access for group or others is refused before the
     * secret is read; the message says how to fix it. */
    static const mode_t modes[] = {0644, 0640, 0604, 0660, 0606, 0610, 0601, 0666};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        write_file(path, golden_keyfile, flen, modes[i]);
        assert_int_equal(sfl_identity_load(path, &back), SFL_EINSECURE);
        assert_null(back);
        assert_non_null(strstr(sfl_last_error(), "chmod 600"));
    }
    write_file(path, golden_keyfile, flen, 0644);
    assert_int_equal(sfl_identity_load(path, &back), SFL_EINSECURE);
    assert_detail(path);
    assert_non_null(strstr(sfl_last_error(), "mode 0644"));

    /* Truncated at every length, and one byte too long. */
    for (size_t n = 0; n < flen; n++) {
        write_file(path, golden_keyfile, n, 0600);
        assert_int_equal(sfl_identity_load(path, &back), SFL_ETRUNC);
        assert_null(back);
    }
    memcpy(text, golden_keyfile, flen);
    text[flen] = '\n';
    write_file(path, text, flen + 1, 0600);
    assert_int_equal(sfl_identity_load(path, &back), SFL_EPARSE);

    /* Corruptions, each of the right size. */
    static const struct {
        size_t off;
        char c;
        int rc;
        const char *detail;
    } bad[] = {
        {0, 'S', SFL_EPARSE, "not an sfl identity file"},
        {14, '2', SFL_EUNSUP, "unsupported identity file version"},
        {15, ' ', SFL_EPARSE, "not an sfl identity file"},
        {16, 'g', SFL_EPARSE, ":2: expected 64 hex digits of the secret seed"},
        {50, '8', SFL_EPARSE, "public key does not match the secret seed"}, /* seed bit rot */
        {79, 'z', SFL_EPARSE, ":2:"},
        {80, ' ', SFL_EPARSE, ":2:"}, /* newline after the seed */
        {81, '0', SFL_EPARSE, "public key does not match"},
        {100, '-', SFL_EPARSE, ":3: expected 64 hex digits of the public key"},
        {145, '\r', SFL_EPARSE, ":3:"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[200];

        memcpy(text, golden_keyfile, flen);
        assert_true(text[bad[i].off] != bad[i].c);
        text[bad[i].off] = bad[i].c;
        write_file(path, text, flen, 0600);
        assert_int_equal(sfl_identity_load(path, &back), bad[i].rc);
        assert_null(back);
        snprintf(want, sizeof(want), "%s", bad[i].detail);
        if (strstr(sfl_last_error(), want) == NULL)
            fail_msg("offset %zu: detail '%s' lacks '%s'", bad[i].off, sfl_last_error(), want);
    }

    /* Not a file, not there. */
    assert_int_equal(sfl_identity_load(dir, &back), SFL_EINVAL);
    assert_detail(dir);
    snprintf(missing, sizeof(missing), "%s/none/agent.key", dir);
    assert_int_equal(sfl_identity_load(missing, &back), -ENOENT);
    assert_int_equal(sfl_identity_load("", &back), SFL_EINVAL);

    /* Saving where it cannot work leaves nothing behind. */
    assert_int_equal(sfl_identity_from_seed(rfc_seed, &id), 0);
    assert_int_equal(sfl_identity_save(id, missing), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "cannot create temporary file"));
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    int before = count_entries(dir);
    assert_int_equal(sfl_identity_save(id, sub), -EISDIR); /* rename onto a directory */
    assert_non_null(strstr(sfl_last_error(), "rename"));
    assert_int_equal(count_entries(dir), before);
    assert_int_equal(count_entries(sub), 0);
    assert_int_equal(sfl_identity_save(id, ""), SFL_EINVAL);
    assert_int_equal(sfl_identity_save(id, NULL), SFL_EINVAL);
    sfl_identity_free(id);
    remove_dir(dir);
}

static void test_seal_failalloc(void **state)
{
    (void)state;
    char dir[] = "/tmp/sfl_seal_XXXXXX", path[128];
    sfl_identity_t *id = NULL, *back = NULL;
    sfl_roundkey_t *rk = NULL;
    uint8_t *p = NULL, out[256];
    size_t len, n;

    FAILALLOC_EACH(sfl_identity_generate(&id), (sfl_identity_free(id), id = NULL));
    FAILALLOC_EACH(sfl_identity_from_seed(rfc_seed, &id), (void)0);
    assert_memory_equal(id->pk, rfc_pk, 32);
    FAILALLOC_EACH(sfl_roundkey_new(&rk), (void)0);
    assert_non_null(rk);

    make_dir(dir);
    snprintf(path, sizeof(path), "%s/agent.key", dir);
    /* each failure leaves the directory as it was, empty (fa_rc_ is the
     * attempt's result inside FAILALLOC_EACH) */
    FAILALLOC_EACH(sfl_identity_save(id, path),
                   assert_int_equal(count_entries(dir), fa_rc_ == 0 ? 1 : 0));
    assert_int_equal(count_entries(dir), 1);
    FAILALLOC_EACH(sfl_identity_load(path, &back), (void)0);
    assert_memory_equal(back->pk, rfc_pk, 32);
    sfl_identity_free(back);
    assert_int_equal(unlink(path), 0);
    remove_dir(dir);

    sfl_upd_ctx_t c = ctx_for(rk);
    FAILALLOC_EACH(sfl_seal_update(id, &c, golden_payload, 10, out, sizeof(out), &len), (void)0);
    assert_int_equal(len, 10 + SFL_SEAL_OVERHEAD);
    FAILALLOC_EACH(sfl_seal_open_update(rk, id->pk, &c, out, len, 10, &p, &n, NULL), (void)0);
    assert_int_equal(n, 10);
    assert_memory_equal(p, golden_payload, 10);
    sfl__free(p);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

static void test_seal_fresh_keys(void **state)
{
    (void)state;
    sfl_roundkey_t *r1 = NULL, *r2 = NULL;
    sfl_identity_t *a = NULL, *b = NULL;

    assert_int_equal(sfl_roundkey_new(&r1), 0);
    assert_int_equal(sfl_roundkey_new(&r2), 0);
    assert_memory_not_equal(r1->pk, r2->pk, 32);
    assert_memory_not_equal(r1->sk, r2->sk, 32);
    /* the pair is consistent: pk = X25519(sk, base point) */
    uint8_t pk[32];
    assert_int_equal(crypto_scalarmult_base(pk, r1->sk), 0);
    assert_memory_equal(pk, r1->pk, 32);
    assert_int_equal(sfl_identity_generate(&a), 0);
    assert_int_equal(sfl_identity_generate(&b), 0);
    assert_memory_not_equal(a->pk, b->pk, 32);
    assert_memory_not_equal(a->sk, b->sk, 32);
    assert_int_equal(sfl_identity_pk_check(a->pk), 0);
    sfl_identity_free(b);
    sfl_identity_free(a);
    sfl_roundkey_free(r2);
    sfl_roundkey_free(r1);
}

/* Several threads use the module at once from a cold start of each call
 * path; sodium_init is reached concurrently. */
static void *thread_main(void *arg)
{
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    uint8_t out[256], *p = NULL;
    size_t len, n;
    intptr_t bad = 0;

    (void)arg;
    if (sfl_seal_init() != 0 || sfl_identity_generate(&id) != 0 || sfl_roundkey_new(&rk) != 0)
        return (void *)1;
    sfl_upd_ctx_t c = ctx_for(rk);
    for (int i = 0; i < 20 && !bad; i++) {
        if (sfl_seal_update(id, &c, golden_payload, 21, out, sizeof(out), &len) != 0 ||
            sfl_seal_open_update(rk, id->pk, &c, out, len, 21, &p, &n, NULL) != 0 || n != 21 ||
            memcmp(p, golden_payload, 21) != 0)
            bad = 1;
        sfl__free(p);
        p = NULL;
    }
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
    return (void *)bad;
}

static void test_seal_threads(void **state)
{
    (void)state;
    pthread_t t[4];

    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_main, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r;

        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_threads), /* first: concurrent first use */
        cmocka_unit_test(test_seal_rfc8032),
        cmocka_unit_test(test_seal_hash),
        cmocka_unit_test(test_seal_pk_hex),
        cmocka_unit_test(test_seal_pk_check),
        cmocka_unit_test(test_seal_sign_verify),
        cmocka_unit_test(test_seal_context_separation),
        cmocka_unit_test(test_seal_join_proof),
        cmocka_unit_test(test_seal_upd_signed_golden),
        cmocka_unit_test(test_seal_signed),
        cmocka_unit_test(test_seal_roundtrip),
        cmocka_unit_test(test_seal_tamper),
        cmocka_unit_test(test_seal_wrong_round_key),
        cmocka_unit_test(test_seal_reseal_attack),
        cmocka_unit_test(test_seal_context_mismatch),
        cmocka_unit_test(test_seal_truncated),
        cmocka_unit_test(test_seal_limits),
        cmocka_unit_test(test_seal_identity_file),
        cmocka_unit_test(test_seal_identity_file_bad),
        cmocka_unit_test(test_seal_identity_parse),
        cmocka_unit_test(test_seal_failalloc),
        cmocka_unit_test(test_seal_fresh_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#include "sfl/crypto/seal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/core/file.h"

/* Layouts are in seal.h. Two rules run through this file: secrets (seeds,
 * secret keys, the identity file's text, plaintext updates) only ever sit in
 * sodium_malloc memory or are wiped before their buffer is released, and
 * everything a peer or a file controls is checked before it is used. */

_Static_assert(SFL_SEAL_PK_BYTES == crypto_sign_PUBLICKEYBYTES, "ed25519 pk size");
_Static_assert(SFL_SEAL_PK_BYTES == crypto_box_PUBLICKEYBYTES, "x25519 pk size");
_Static_assert(SFL_SEAL_SEED_BYTES == crypto_sign_SEEDBYTES, "ed25519 seed size");
_Static_assert(SFL_SEAL_SIG_BYTES == crypto_sign_BYTES, "ed25519 signature size");
_Static_assert(SFL_SEAL_OVERHEAD == crypto_box_SEALBYTES + crypto_sign_BYTES, "seal overhead");
_Static_assert(SFL_SEAL_UPD_SIGNED_BYTES == 1 + 10 + 32 + 8 + 8 + 32 + 8 + 32 + 32,
               "update signed bytes");
_Static_assert(sizeof(SFL_SEAL_CONTEXT_UPDATE) - 1 == 10, "update context length");
_Static_assert(sizeof(SFL_SEAL_CONTEXT_JOIN) - 1 == 11, "join context length");

#define FILE_HEADER "sfl-identity-v1\n"
#define FILE_HEADER_LEN (sizeof(FILE_HEADER) - 1)
#define FILE_VERSION_PREFIX "sfl-identity-v"
#define HEX_LEN (2 * 32)
#define FILE_SEED_OFF FILE_HEADER_LEN
#define FILE_PK_OFF (FILE_SEED_OFF + HEX_LEN + 1)
_Static_assert(FILE_PK_OFF + HEX_LEN + 1 == SFL_IDENTITY_FILE_BYTES, "identity file size");

/* Scratch for the identity file in secure memory: its text holds the seed in
 * hex. One byte more than the file so a grown file is noticed and so
 * sodium_bin2hex has room for its NUL. */
typedef struct {
    char text[SFL_IDENTITY_FILE_BYTES + 1];
    uint8_t seed[SFL_SEAL_SEED_BYTES];
} keyfile_t;

static int crypto_ready(void)
{
    /* sodium_init is idempotent and thread-safe (it returns 1 once done), so
     * entry points call it instead of requiring an init call from users. */
    if (sodium_init() < 0)
        return sfl__fail(SFL_EUNSUP, "libsodium failed to initialise");
    return 0;
}

int sfl_seal_init(void)
{
    return crypto_ready();
}

void sfl_seal_hash(const void *data, size_t len, uint8_t out[SFL_SEAL_HASH_BYTES])
{
    assert(data != NULL || len == 0);
    /* BLAKE2b needs no sodium_init (the reference code is the default), so
     * this cannot fail and returns nothing. */
    crypto_generichash(out, SFL_SEAL_HASH_BYTES, data, len, NULL, 0);
}

char *sfl_seal_pk_to_hex(const uint8_t pk[SFL_SEAL_PK_BYTES], char out[2 * SFL_SEAL_PK_BYTES + 1])
{
    return sodium_bin2hex(out, 2 * SFL_SEAL_PK_BYTES + 1, pk, SFL_SEAL_PK_BYTES);
}

/* Exactly 2 * n hex digits at hex into bin[n]; sodium_hex2bin is constant
 * time, which matters for the seed. */
static int hex_exact(const char *hex, size_t hexlen, uint8_t *bin, size_t n)
{
    size_t got = 0;
    const char *end = NULL;

    if (hexlen != 2 * n)
        return -1;
    if (sodium_hex2bin(bin, n, hex, hexlen, NULL, &got, &end) != 0 || got != n ||
        end != hex + hexlen)
        return -1;
    return 0;
}

int sfl_seal_pk_from_hex(const char *hex, uint8_t pk[SFL_SEAL_PK_BYTES])
{
    uint8_t tmp[SFL_SEAL_PK_BYTES];
    size_t n;

    if (hex == NULL)
        return sfl__fail(SFL_EINVAL, "public key: NULL");
    n = strnlen(hex, HEX_LEN + 1);
    if (hex_exact(hex, n, tmp, sizeof(tmp)) != 0)
        return sfl__fail(SFL_EPARSE, "public key: expected %d hex digits", HEX_LEN);
    memcpy(pk, tmp, sizeof(tmp));
    return 0;
}

int sfl_identity_pk_check(const uint8_t pk[SFL_SEAL_PK_BYTES])
{
    int rc = crypto_ready();

    if (rc < 0)
        return rc;
    /* Rejects non-canonical encodings, points off the curve, small-order
     * points and points outside the prime-order subgroup: keys for which a
     * signature could verify for more than one message or none. */
    if (!crypto_core_ed25519_is_valid_point(pk))
        return sfl__fail(SFL_EINVAL, "identity public key is not a valid Ed25519 point");
    return 0;
}

/* ---- identities ---------------------------------------------------------- */

/* An identity whose secret buffer exists but holds nothing yet. */
static int identity_alloc(sfl_identity_t **out)
{
    sfl_identity_t *id;

    *out = NULL;
    id = sfl__malloc(sizeof(*id));
    if (id == NULL)
        return sfl__fail(SFL_ENOMEM, "identity: out of memory");
    id->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    if (id->sk == NULL) {
        sfl__free(id);
        return sfl__fail(SFL_ENOMEM, "identity: cannot allocate secure memory");
    }
    *out = id;
    return 0;
}

void sfl_identity_free(sfl_identity_t *id)
{
    if (id == NULL)
        return;
    sodium_free(id->sk); /* wipes first, even when read-only */
    sodium_memzero(id, sizeof(*id));
    sfl__free(id);
}

int sfl_identity_generate(sfl_identity_t **out)
{
    sfl_identity_t *id = NULL;
    int rc;

    assert(out != NULL);
    *out = NULL;
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    rc = identity_alloc(&id);
    if (rc < 0)
        return rc;
    crypto_sign_keypair(id->pk, id->sk);
    sodium_mprotect_readonly(id->sk);
    *out = id;
    return 0;
}

int sfl_identity_from_seed(const uint8_t seed[SFL_SEAL_SEED_BYTES], sfl_identity_t **out)
{
    sfl_identity_t *id = NULL;
    int rc;

    assert(seed != NULL && out != NULL);
    *out = NULL;
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    rc = identity_alloc(&id);
    if (rc < 0)
        return rc;
    crypto_sign_seed_keypair(id->pk, id->sk, seed);
    sodium_mprotect_readonly(id->sk);
    *out = id;
    return 0;
}

/* Writes all of buf, retrying short writes and EINTR. */
/* Reads until cap bytes or end of file; *got = bytes read. */
static int read_upto(int fd, char *buf, size_t cap, size_t *got)
{
    *got = 0;
    while (*got < cap) {
        ssize_t r = read(fd, buf + *got, cap - *got);

        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

/* Makes the rename durable. Some file systems cannot fsync a directory
 * (EINVAL); the file itself is already synced there, so that is accepted. */
int sfl_identity_save(const sfl_identity_t *id, const char *path)
{
    keyfile_t *kf;
    int rc;

    assert(id != NULL);
    if (path == NULL || path[0] == '\0')
        return sfl__fail(SFL_EINVAL, "identity: empty path");
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    kf = sodium_malloc(sizeof(*kf));
    if (kf == NULL)
        return sfl__fail(SFL_ENOMEM, "%s: out of memory", path);
    memcpy(kf->text, FILE_HEADER, FILE_HEADER_LEN);
    sodium_bin2hex(kf->text + FILE_SEED_OFF, HEX_LEN + 1, id->sk, SFL_SEAL_SEED_BYTES);
    kf->text[FILE_SEED_OFF + HEX_LEN] = '\n';
    sodium_bin2hex(kf->text + FILE_PK_OFF, HEX_LEN + 1, id->pk, SFL_SEAL_PK_BYTES);
    kf->text[FILE_PK_OFF + HEX_LEN] = '\n';
    /* 0600, fsync, rename, fsync of the directory. */
    rc = sfl_file_write_atomic(path, kf->text, SFL_IDENTITY_FILE_BYTES);
    sodium_free(kf);
    return rc;
}

/* Parses the identity file text (exactly SFL_IDENTITY_FILE_BYTES) into id. */
static int parse_keyfile(const char *path, keyfile_t *kf, sfl_identity_t *id)
{
    const char *t = kf->text;
    uint8_t pk[SFL_SEAL_PK_BYTES];

    if (memcmp(t, FILE_HEADER, FILE_HEADER_LEN) != 0) {
        /* "sfl-identity-v<digits>\n" is a format from another release:
         * say so rather than "malformed". */
        size_t i = sizeof(FILE_VERSION_PREFIX) - 1, d = i;

        if (memcmp(t, FILE_VERSION_PREFIX, i) == 0) {
            while (d < FILE_HEADER_LEN + 8 && t[d] >= '0' && t[d] <= '9')
                d++;
            if (d > i && t[d] == '\n')
                return sfl__fail(SFL_EUNSUP, "%s: unsupported identity file version %.*s "
                                 "(this build reads v1)", path, (int)(d - i), t + i);
        }
        return sfl__fail(SFL_EPARSE, "%s: not an sfl identity file (expected '%.15s' header)",
                         path, FILE_HEADER);
    }
    if (t[FILE_SEED_OFF + HEX_LEN] != '\n' ||
        hex_exact(t + FILE_SEED_OFF, HEX_LEN, kf->seed, sizeof(kf->seed)) != 0)
        return sfl__fail(SFL_EPARSE, "%s:2: expected %d hex digits of the secret seed", path,
                         HEX_LEN);
    if (t[FILE_PK_OFF + HEX_LEN] != '\n' ||
        hex_exact(t + FILE_PK_OFF, HEX_LEN, pk, sizeof(pk)) != 0)
        return sfl__fail(SFL_EPARSE, "%s:3: expected %d hex digits of the public key", path,
                         HEX_LEN);
    crypto_sign_seed_keypair(id->pk, id->sk, kf->seed);
    if (sodium_memcmp(id->pk, pk, sizeof(pk)) != 0)
        return sfl__fail(SFL_EPARSE, "%s: public key does not match the secret seed (corrupt file)",
                         path);
    return 0;
}

int sfl_identity_parse(const char *text, size_t len, const char *name, sfl_identity_t **out)
{
    sfl_identity_t *id = NULL;
    keyfile_t *kf = NULL;
    int rc;

    assert(out != NULL);
    *out = NULL;
    if (name == NULL)
        name = "identity";
    if (text == NULL || len != SFL_IDENTITY_FILE_BYTES)
        return sfl__fail(text == NULL || len < SFL_IDENTITY_FILE_BYTES ? SFL_ETRUNC : SFL_EPARSE,
                         "%s: %zu bytes, an identity file has %d", name,
                         text == NULL ? (size_t)0 : len, SFL_IDENTITY_FILE_BYTES);
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    /* The seed's hex is a secret too: parse a copy in secure memory. */
    kf = sodium_malloc(sizeof(*kf));
    if (kf == NULL)
        return sfl__fail(SFL_ENOMEM, "%s: cannot allocate secure memory", name);
    memcpy(kf->text, text, len);
    rc = identity_alloc(&id);
    if (rc < 0)
        goto out;
    rc = parse_keyfile(name, kf, id);
    if (rc < 0)
        goto out;
    sodium_mprotect_readonly(id->sk);
    *out = id;
    id = NULL;
out:
    sfl_identity_free(id);
    sodium_free(kf);
    return rc;
}

int sfl_identity_load(const char *path, sfl_identity_t **out)
{
    keyfile_t *kf = NULL;
    struct stat st;
    size_t got;
    int fd = -1, rc;

    assert(out != NULL);
    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return sfl__fail(SFL_EINVAL, "identity: empty path");
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = -errno;
        return sfl__fail(rc, "%s: %s", path, strerror(-rc));
    }
    /* fstat on the open descriptor, not stat on the name, so the file
     * checked is the file read. */
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        (void)sfl__fail(rc, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = sfl__fail(SFL_EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        rc = sfl__fail(SFL_EINSECURE,
                       "%s: secret key file has mode %04o, accessible to group or others; "
                       "refusing it (chmod 600 %s)",
                       path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (st.st_size < (off_t)SFL_IDENTITY_FILE_BYTES) {
        rc = sfl__fail(SFL_ETRUNC, "%s: %lld bytes, an identity file has %d", path,
                       (long long)st.st_size, SFL_IDENTITY_FILE_BYTES);
        goto out;
    }
    if (st.st_size > (off_t)SFL_IDENTITY_FILE_BYTES) {
        rc = sfl__fail(SFL_EPARSE, "%s: %lld bytes, an identity file has %d", path,
                       (long long)st.st_size, SFL_IDENTITY_FILE_BYTES);
        goto out;
    }
    kf = sodium_malloc(sizeof(*kf));
    if (kf == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "%s: cannot allocate secure memory", path);
        goto out;
    }
    /* Ask for one byte more than the size: a file that changed since fstat
     * is caught either way. */
    rc = read_upto(fd, kf->text, sizeof(kf->text), &got);
    if (rc < 0) {
        (void)sfl__fail(rc, "%s: read: %s", path, strerror(-rc));
        goto out;
    }
    rc = sfl_identity_parse(kf->text, got, path, out);

out:
    sodium_free(kf); /* wipes the seed's hex */
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- detached signatures ------------------------------------------------- */

/* Printable ASCII, 1..SFL_SEAL_CONTEXT_MAX bytes; *n = its length. The
 * reserved contexts are refused unless reserved_ok (their own functions). */
static int check_context_as(const char *context, size_t *n, int reserved_ok)
{
    size_t i;

    if (context == NULL)
        return sfl__fail(SFL_EINVAL, "signature context: NULL");
    *n = strnlen(context, SFL_SEAL_CONTEXT_MAX + 1);
    if (*n == 0 || *n > SFL_SEAL_CONTEXT_MAX)
        return sfl__fail(SFL_EINVAL, "signature context must be 1 to %d bytes",
                         SFL_SEAL_CONTEXT_MAX);
    for (i = 0; i < *n; i++)
        if (context[i] < 0x20 || context[i] > 0x7e)
            return sfl__fail(SFL_EINVAL, "signature context: byte %zu is not printable ASCII",
                             i);
    if (reserved_ok)
        return 0;
    if (strcmp(context, SFL_SEAL_CONTEXT_UPDATE) == 0)
        return sfl__fail(SFL_EINVAL, "signature context '%s' is reserved for updates",
                         SFL_SEAL_CONTEXT_UPDATE);
    if (strcmp(context, SFL_SEAL_CONTEXT_JOIN) == 0)
        return sfl__fail(SFL_EINVAL, "signature context '%s' is reserved for Join proofs",
                         SFL_SEAL_CONTEXT_JOIN);
    return 0;
}

static int check_context(const char *context, size_t *n)
{
    return check_context_as(context, n, 0);
}

/* u8 n | context | BLAKE2b-256(msg) into buf; returns its length. */
static size_t detached_bytes(const char *context, size_t n, const void *msg, size_t len,
                             uint8_t buf[1 + SFL_SEAL_CONTEXT_MAX + SFL_SEAL_HASH_BYTES])
{
    buf[0] = (uint8_t)n;
    memcpy(buf + 1, context, n);
    sfl_seal_hash(msg, len, buf + 1 + n);
    return 1 + n + SFL_SEAL_HASH_BYTES;
}

int sfl_seal_sign_detached(const sfl_identity_t *id, const char *context, const void *msg,
                           size_t len, uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[1 + SFL_SEAL_CONTEXT_MAX + SFL_SEAL_HASH_BYTES];
    size_t n;
    int rc;

    assert(id != NULL && sig != NULL);
    if (msg == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "sign: NULL message of %zu bytes", len);
    rc = check_context(context, &n);
    if (rc == 0)
        rc = crypto_ready();
    if (rc < 0)
        return rc;
    crypto_sign_detached(sig, NULL, buf, detached_bytes(context, n, msg, len, buf), id->sk);
    return 0;
}

int sfl_seal_verify_detached(const uint8_t pk[SFL_SEAL_PK_BYTES], const char *context,
                             const void *msg, size_t len, const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[1 + SFL_SEAL_CONTEXT_MAX + SFL_SEAL_HASH_BYTES];
    size_t n;
    int rc;

    assert(pk != NULL && sig != NULL);
    if (msg == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "verify: NULL message of %zu bytes", len);
    rc = check_context(context, &n);
    if (rc == 0)
        rc = crypto_ready();
    if (rc < 0)
        return rc;
    if (crypto_sign_verify_detached(sig, buf, detached_bytes(context, n, msg, len, buf), pk) != 0)
        return sfl__fail(SFL_EBADSIG, "'%s' signature does not verify", context);
    return 0;
}

/* ---- Join proof of possession -------------------------------------------- */

int sfl_seal_sign_join(const sfl_identity_t *id, const uint8_t binding[SFL_SEAL_BINDING_BYTES],
                       uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[1 + SFL_SEAL_CONTEXT_MAX + SFL_SEAL_HASH_BYTES];
    size_t n;
    int rc;

    assert(id != NULL && binding != NULL && sig != NULL);
    if ((rc = check_context_as(SFL_SEAL_CONTEXT_JOIN, &n, 1)) < 0 || (rc = crypto_ready()) < 0)
        return rc;
    crypto_sign_detached(sig, NULL, buf,
                         detached_bytes(SFL_SEAL_CONTEXT_JOIN, n, binding,
                                        SFL_SEAL_BINDING_BYTES, buf),
                         id->sk);
    return 0;
}

int sfl_seal_verify_join(const uint8_t pk[SFL_SEAL_PK_BYTES],
                         const uint8_t binding[SFL_SEAL_BINDING_BYTES],
                         const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[1 + SFL_SEAL_CONTEXT_MAX + SFL_SEAL_HASH_BYTES];
    size_t n;
    int rc;

    assert(pk != NULL && binding != NULL && sig != NULL);
    if ((rc = check_context_as(SFL_SEAL_CONTEXT_JOIN, &n, 1)) < 0 || (rc = crypto_ready()) < 0)
        return rc;
    if (crypto_sign_verify_detached(sig, buf,
                                    detached_bytes(SFL_SEAL_CONTEXT_JOIN, n, binding,
                                                   SFL_SEAL_BINDING_BYTES, buf),
                                    pk) != 0)
        return sfl__fail(SFL_EBADSIG, "Join proof does not verify: not signed with this "
                                      "identity key over this connection");
    return 0;
}

/* ---- round keys ---------------------------------------------------------- */

int sfl_roundkey_new(sfl_roundkey_t **out)
{
    sfl_roundkey_t *rk;
    int rc;

    assert(out != NULL);
    *out = NULL;
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    rk = sfl__malloc(sizeof(*rk));
    if (rk == NULL)
        return sfl__fail(SFL_ENOMEM, "round key: out of memory");
    rk->sk = sodium_malloc(crypto_box_SECRETKEYBYTES);
    if (rk->sk == NULL) {
        sfl__free(rk);
        return sfl__fail(SFL_ENOMEM, "round key: cannot allocate secure memory");
    }
    crypto_box_keypair(rk->pk, rk->sk);
    sodium_mprotect_readonly(rk->sk);
    *out = rk;
    return 0;
}

void sfl_roundkey_free(sfl_roundkey_t *rk)
{
    if (rk == NULL)
        return;
    sodium_free(rk->sk);
    sodium_memzero(rk, sizeof(*rk));
    sfl__free(rk);
}

/* ---- updates ------------------------------------------------------------- */

/* Little-endian on every host: the signed bytes are fixed, the host's order
 * is not. */
static uint8_t *put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return p + 8;
}

static uint8_t *put_bytes(uint8_t *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

void sfl_seal_upd_signed_bytes(const sfl_upd_ctx_t *ctx,
                               const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                               uint8_t out[SFL_SEAL_UPD_SIGNED_BYTES])
{
    uint8_t *p = out;

    /* Written field by field, never by copying the struct: padding and host
     * byte order must not reach the signature. */
    *p++ = (uint8_t)(sizeof(SFL_SEAL_CONTEXT_UPDATE) - 1);
    p = put_bytes(p, SFL_SEAL_CONTEXT_UPDATE, sizeof(SFL_SEAL_CONTEXT_UPDATE) - 1);
    p = put_bytes(p, ctx->round_pk, sizeof(ctx->round_pk));
    p = put_u64(p, ctx->job);
    p = put_u64(p, ctx->round);
    p = put_bytes(p, ctx->nonce, sizeof(ctx->nonce));
    p = put_u64(p, ctx->agent_id);
    p = put_bytes(p, ctx->model_hash, sizeof(ctx->model_hash));
    p = put_bytes(p, payload_hash, SFL_SEAL_HASH_BYTES);
    assert(p == out + SFL_SEAL_UPD_SIGNED_BYTES);
}

int sfl_seal_sign_update_digest(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx,
                                const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                                uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[SFL_SEAL_UPD_SIGNED_BYTES];
    int rc;

    assert(id != NULL && ctx != NULL && payload_hash != NULL && sig != NULL);
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    sfl_seal_upd_signed_bytes(ctx, payload_hash, buf);
    crypto_sign_detached(sig, NULL, buf, sizeof(buf), id->sk);
    return 0;
}

int sfl_seal_sign_update(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                         size_t len, uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t h[SFL_SEAL_HASH_BYTES];

    assert(id != NULL && ctx != NULL && sig != NULL);
    if (payload == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "sign update: NULL payload of %zu bytes", len);
    sfl_seal_hash(payload, len, h);
    return sfl_seal_sign_update_digest(id, ctx, h, sig);
}

int sfl_seal_verify_update_digest(const uint8_t pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *ctx,
                                  const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                                  const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t buf[SFL_SEAL_UPD_SIGNED_BYTES];
    int rc;

    assert(pk != NULL && ctx != NULL && payload_hash != NULL && sig != NULL);
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    sfl_seal_upd_signed_bytes(ctx, payload_hash, buf);
    /* One code for every mismatch: the signature cannot say which field
     * differed, only that the agent did not sign this (ctx, payload). */
    if (crypto_sign_verify_detached(sig, buf, sizeof(buf), pk) != 0)
        return sfl__fail(SFL_EBADSIG,
                         "update signature does not verify for agent %llu, job %llu, round %llu "
                         "(other signer, round key, nonce, model hash or payload)",
                         (unsigned long long)ctx->agent_id, (unsigned long long)ctx->job,
                         (unsigned long long)ctx->round);
    return 0;
}

int sfl_seal_verify_update(const uint8_t pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *ctx,
                           const void *payload, size_t len, const uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t h[SFL_SEAL_HASH_BYTES];

    assert(pk != NULL && ctx != NULL && sig != NULL);
    if (payload == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "verify update: NULL payload of %zu bytes", len);
    sfl_seal_hash(payload, len, h);
    return sfl_seal_verify_update_digest(pk, ctx, h, sig);
}

size_t sfl_seal_signed_size(size_t payload_len)
{
    if (payload_len > SIZE_MAX - SFL_SEAL_SIGNED_OVERHEAD)
        return 0;
    return payload_len + SFL_SEAL_SIGNED_OVERHEAD;
}

int sfl_seal_sign_into(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                       size_t len, uint8_t *out, size_t cap, size_t *outlen)
{
    size_t need = sfl_seal_signed_size(len);
    int rc;

    assert(id != NULL && ctx != NULL && outlen != NULL);
    *outlen = 0;
    if (payload == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "sign: NULL payload of %zu bytes", len);
    if (need == 0 || need > cap || out == NULL)
        return sfl__fail(SFL_ELIMIT, "sign: a %zu-byte payload needs %zu bytes, buffer holds %zu",
                         len, need, out == NULL ? 0 : cap);
    if (len > 0)
        memcpy(out, payload, len);
    rc = sfl_seal_sign_update(id, ctx, out, len, out + len);
    if (rc < 0)
        return rc;
    *outlen = need;
    return 0;
}

int sfl_seal_check_update(const uint8_t agent_pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *expect,
                          const uint8_t *msg, size_t len, size_t max_payload,
                          const uint8_t *payload_hash, size_t *payload_len)
{
    uint8_t h[SFL_SEAL_HASH_BYTES];
    size_t n;
    int rc;

    assert(agent_pk != NULL && expect != NULL && payload_len != NULL);
    *payload_len = 0;
    if (msg == NULL || len < SFL_SEAL_SIGNED_OVERHEAD)
        return sfl__fail(SFL_ETRUNC, "signed update is %zu bytes, shorter than its %d-byte "
                         "signature", msg == NULL ? 0 : len, SFL_SEAL_SIGNED_OVERHEAD);
    n = len - SFL_SEAL_SIGNED_OVERHEAD;
    if (n > max_payload)
        return sfl__fail(SFL_ELIMIT, "update carries a %zu-byte payload, limit %zu", n,
                         max_payload);
    if (payload_hash == NULL) {
        sfl_seal_hash(msg, n, h);
        payload_hash = h;
    }
    rc = sfl_seal_verify_update_digest(agent_pk, expect, payload_hash, msg + n);
    if (rc < 0)
        return rc;
    *payload_len = n;
    return 0;
}

size_t sfl_seal_sealed_size(size_t payload_len)
{
    if (payload_len > SIZE_MAX - SFL_SEAL_OVERHEAD)
        return 0;
    return payload_len + SFL_SEAL_OVERHEAD;
}

int sfl_seal_update(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                    size_t len, uint8_t *out, size_t cap, size_t *outlen)
{
    size_t need = sfl_seal_sealed_size(len), plen;
    uint8_t *plain = NULL;
    int rc;

    assert(id != NULL && ctx != NULL && outlen != NULL);
    *outlen = 0;
    if (payload == NULL && len > 0)
        return sfl__fail(SFL_EINVAL, "seal: NULL payload of %zu bytes", len);
    if (need == 0 || need > cap || out == NULL)
        return sfl__fail(SFL_ELIMIT, "seal: a %zu-byte payload needs %zu bytes, buffer holds %zu",
                         len, need, out == NULL ? 0 : cap);
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    /* crypto_box_seal wants payload | sigma contiguous and promises nothing
     * about overlapping buffers, hence the copy (wiped below: it is the
     * plaintext update). */
    plen = len + SFL_SEAL_SIG_BYTES;
    plain = sfl__malloc(plen);
    if (plain == NULL)
        return sfl__fail(SFL_ENOMEM, "seal: out of memory for %zu bytes", plen);
    if (len > 0)
        memcpy(plain, payload, len);
    rc = sfl_seal_sign_update(id, ctx, payload, len, plain + len);
    if (rc < 0)
        goto out;
    if (crypto_box_seal(out, plain, plen, ctx->round_pk) != 0) {
        sodium_memzero(out, need);
        rc = sfl__fail(SFL_EINVAL, "seal: round public key rejected (small-order point)");
        goto out;
    }
    *outlen = need;
out:
    sodium_memzero(plain, plen);
    sfl__free(plain);
    return rc;
}

int sfl_seal_open_update(const sfl_roundkey_t *rk, const uint8_t agent_pk[SFL_SEAL_PK_BYTES],
                         const sfl_upd_ctx_t *expect, const uint8_t *sealed, size_t len,
                         size_t max_payload, uint8_t **payload, size_t *payload_len,
                         uint8_t sig[SFL_SEAL_SIG_BYTES])
{
    uint8_t *plain = NULL;
    size_t plen = 0, n;
    int rc;

    assert(rk != NULL && agent_pk != NULL && expect != NULL);
    assert(payload != NULL && payload_len != NULL);
    *payload = NULL;
    *payload_len = 0;
    /* The coordinator's own bookkeeping, not peer input: the context must
     * name the key we open with, or the signature check would test a key
     * other than the one that decrypted. */
    if (memcmp(expect->round_pk, rk->pk, SFL_SEAL_PK_BYTES) != 0)
        return sfl__fail(SFL_EINVAL, "open: expected context names another round key");
    if (sealed == NULL || len < SFL_SEAL_OVERHEAD)
        return sfl__fail(SFL_ETRUNC, "sealed update is %zu bytes, shorter than the %d-byte "
                         "overhead", sealed == NULL ? 0 : len, SFL_SEAL_OVERHEAD);
    n = len - SFL_SEAL_OVERHEAD;
    if (n > max_payload)
        return sfl__fail(SFL_ELIMIT, "sealed update carries a %zu-byte payload, limit %zu", n,
                         max_payload);
    rc = crypto_ready();
    if (rc < 0)
        return rc;
    plen = n + SFL_SEAL_SIG_BYTES;
    plain = sfl__malloc(plen);
    if (plain == NULL)
        return sfl__fail(SFL_ENOMEM, "open: out of memory for %zu bytes", plen);
    if (crypto_box_seal_open(plain, sealed, len, rk->pk, rk->sk) != 0) {
        rc = sfl__fail(SFL_EDECRYPT, "cannot open sealed update: not sealed to this round's "
                       "key, or altered in transit");
        goto out;
    }
    rc = sfl_seal_check_update(agent_pk, expect, plain, plen, max_payload, NULL, &n);
    if (rc < 0)
        goto out;
    if (sig != NULL)
        memcpy(sig, plain + n, SFL_SEAL_SIG_BYTES);
    *payload = plain;
    *payload_len = n;
    plain = NULL;
out:
    if (plain != NULL) {
        sodium_memzero(plain, plen);
        sfl__free(plain);
    }
    return rc;
}

/* Update crypto, mode 1 (signed; formerly also sealed), on libsodium.
 *
 * Keys. An identity is a long-lived Ed25519 key pair (agents sign updates,
 * the coordinator signs tasks). A round key is a fresh X25519 pair made by
 * the coordinator for one round; updates are sealed to its public half and
 * its secret is wiped when the round closes. Secrets live in sodium_malloc
 * memory (guard pages, locked, read-only after creation) and are wiped on
 * every path, error paths included.
 *
 * Signed bytes. Every signature covers a context string, length-prefixed, so
 * the signed bytes of two contexts never share a prefix and a signature made
 * for one purpose (a task, "sfl-task-v1") never verifies for another (an
 * update, "sfl-upd-v1"). Generic messages (sfl_seal_sign_detached) are
 *   u8 n | context[n] | BLAKE2b-256(msg)                        (n + 33 bytes)
 * and an update signature (sfl_seal_sign_update) covers exactly these
 * SFL_SEAL_UPD_SIGNED_BYTES = 163 bytes, integers little-endian:
 *   off   0  u8   10                       length of the context
 *   off   1  10   "sfl-upd-v1"             context, reserved for updates
 *   off  11  32   round_pk                 X25519 round key the update is sealed to
 *   off  43  u64  job
 *   off  51  u64  round
 *   off  59  32   round nonce              from the coordinator-signed task
 *   off  91  u64  agent_id
 *   off  99  32   model_hash               BLAKE2b-256 of the global model bytes
 *                                          the agent trained from (as in the task)
 *   off 131  32   BLAKE2b-256(payload)
 * Signed update (what agents send, UPDATE_MODE_SIGNED): payload | sigma (64),
 * in the clear inside the agent's mutual TLS (payload + 64 bytes).
 * Sealed update (UPDATE_MODE_SEALED, accepted from older agents for one
 * release): crypto_box_seal(payload | sigma, round_pk), i.e.
 *   ephemeral X25519 pk (32) | Poly1305 tag (16) | XSalsa20 ciphertext of
 *   payload | sigma (64)                       (payload + 112 bytes)
 * docs/security.md explains what each field protects against.
 *
 * Identity file (sfl_identity_save/load), text, exactly 146 bytes, mode 0600:
 *   "sfl-identity-v1\n"
 *   64 hex digits: the 32-byte Ed25519 seed, then "\n"
 *   64 hex digits: the 32-byte Ed25519 public key, then "\n"
 * The public key is redundant; load recomputes it from the seed and refuses a
 * file where they disagree, which catches a corrupted seed.
 *
 * Thread safety: every function may be called from any thread; libsodium is
 * initialised on first use (sodium_init is idempotent and thread-safe). */
#ifndef SFL_SEAL_H
#define SFL_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_SEAL_PK_BYTES 32   /* Ed25519 or X25519 public key */
#define SFL_SEAL_SEED_BYTES 32 /* Ed25519 seed */
#define SFL_SEAL_SIG_BYTES 64  /* Ed25519 signature */
#define SFL_SEAL_HASH_BYTES 32 /* BLAKE2b-256 */
#define SFL_SEAL_NONCE_BYTES 32
/* Sealed size minus payload size: crypto_box_SEALBYTES (48) + signature. */
#define SFL_SEAL_OVERHEAD 112
/* Signed size minus payload size: the signature. */
#define SFL_SEAL_SIGNED_OVERHEAD SFL_SEAL_SIG_BYTES
#define SFL_SEAL_UPD_SIGNED_BYTES 163
/* Longest context string; contexts are printable ASCII, 1..64 bytes. */
#define SFL_SEAL_CONTEXT_MAX 64
/* The context of update signatures; refused by sfl_seal_sign_detached so the
 * generic API can never mint an update signature. */
#define SFL_SEAL_CONTEXT_UPDATE "sfl-upd-v1"
#define SFL_IDENTITY_FILE_BYTES 146
/* Proof of possession at Join (docs/security.md, "Binding and revocation").
 * The agent exports SFL_SEAL_BINDING_BYTES of keying material from its TLS
 * connection to the coordinator under SFL_SEAL_JOIN_LABEL
 * (sfl_conn_export_keying_material) and signs them with its identity key
 * under the context SFL_SEAL_CONTEXT_JOIN; the coordinator exports the same
 * bytes on its end of the connection and verifies. Signed bytes, the
 * detached layout:  u8 11 | "sfl-join-v1" | BLAKE2b-256(binding)  (44 bytes).
 * The context is reserved: sfl_seal_sign_detached refuses it, so no other
 * API can mint a Join proof. */
#define SFL_SEAL_CONTEXT_JOIN "sfl-join-v1"
#define SFL_SEAL_JOIN_LABEL "EXPORTER-sfl-join-v1"
#define SFL_SEAL_BINDING_BYTES 32

typedef struct {
    /* Ed25519 public key. */
    uint8_t pk[SFL_SEAL_PK_BYTES];
    /* Ed25519 secret key in libsodium's 64-byte form (seed | pk), in
     * sodium_malloc memory, read-only; never copy it out. */
    uint8_t *sk;
} sfl_identity_t;

typedef struct {
    /* X25519 public key; goes into the signed task. */
    uint8_t pk[SFL_SEAL_PK_BYTES];
    /* X25519 secret key, 32 bytes in sodium_malloc memory, read-only. */
    uint8_t *sk;
} sfl_roundkey_t;

/* What an update is bound to. The agent fills it from the signed task it
 * trained on; the coordinator fills it from its OWN state (the round it is
 * running, the agent id bound to the authenticated connection), never from
 * anything in the submitted message. */
typedef struct {
    /* public half of the round key the update is sealed to */
    uint8_t round_pk[SFL_SEAL_PK_BYTES];
    uint64_t job;
    uint64_t round;
    /* fresh per round, from the coordinator-signed task */
    uint8_t nonce[SFL_SEAL_NONCE_BYTES];
    uint64_t agent_id;
    /* sfl_seal_hash of the global model bytes carried by the task */
    uint8_t model_hash[SFL_SEAL_HASH_BYTES];
} sfl_upd_ctx_t;

/* Initialise libsodium early (optional: every function does it on first
 * use). SFL_EUNSUP if libsodium cannot start. */
int sfl_seal_init(void) SFL_MUST_CHECK;

/* out = BLAKE2b-256(data[0..len)), unkeyed. data may be NULL when len == 0. */
void sfl_seal_hash(const void *data, size_t len, uint8_t out[SFL_SEAL_HASH_BYTES]);

/* Lowercase hex of a public key (64 digits and a NUL), e.g. for logs and
 * for pinning the coordinator's key in agent.ini. Returns out. */
char *sfl_seal_pk_to_hex(const uint8_t pk[SFL_SEAL_PK_BYTES], char out[2 * SFL_SEAL_PK_BYTES + 1]);
/* Parses exactly 64 hex digits (either case) from a NUL-terminated string.
 * SFL_EPARSE otherwise; pk is written only on success. */
int sfl_seal_pk_from_hex(const char *hex, uint8_t pk[SFL_SEAL_PK_BYTES]) SFL_MUST_CHECK;
/* 0 if pk is a usable Ed25519 identity key: canonical, on the curve, in the
 * prime-order subgroup, not of small order. SFL_EINVAL otherwise. Check an
 * agent's key with it before registering it at Join. */
int sfl_identity_pk_check(const uint8_t pk[SFL_SEAL_PK_BYTES]) SFL_MUST_CHECK;

/* Fresh identity from the system CSPRNG. Returns owned (sfl_identity_free). */
int sfl_identity_generate(sfl_identity_t **out) SFL_MUST_CHECK;
/* Identity from a 32-byte Ed25519 seed (RFC 8032 secret key); borrows seed.
 * For tests and known-answer checks. Returns owned (sfl_identity_free). */
int sfl_identity_from_seed(const uint8_t seed[SFL_SEAL_SEED_BYTES],
                           sfl_identity_t **out) SFL_MUST_CHECK;
/* Writes the identity file (format above) atomically: a temporary file in the
 * same directory created with mode 0600, fsync, rename over path, fsync of
 * the directory. On failure path is untouched and no temporary file remains.
 * Errors: -errno (the detail names the step and the path). */
int sfl_identity_save(const sfl_identity_t *id, const char *path) SFL_MUST_CHECK;
/* Reads an identity file. Refuses, before reading any byte of the secret:
 * a file that is not regular, and one whose mode gives the group or others
 * any access (SFL_EINSECURE; "chmod 600" fixes it). Then: SFL_ETRUNC if
 * shorter than 146 bytes, SFL_EPARSE if longer, with a bad header, bad hex
 * or a public key that does not match the seed, SFL_EUNSUP for another
 * format version; -errno from open/read. Returns owned (sfl_identity_free). */
int sfl_identity_load(const char *path, sfl_identity_t **out) SFL_MUST_CHECK;
/* Parses the text of an identity file from memory, text[0..len) (borrowed;
 * it holds the secret seed, so the caller wipes it): the checks of
 * sfl_identity_load after the file's own (type, mode), with the same codes.
 * name labels the error details (the path, for load). Returns owned
 * (sfl_identity_free). */
int sfl_identity_parse(const char *text, size_t len, const char *name,
                       sfl_identity_t **out) SFL_MUST_CHECK;
/* Wipes and frees the secret key; NULL is a no-op. */
void sfl_identity_free(sfl_identity_t *id);

/* sig = Ed25519(id, u8 n | context | BLAKE2b-256(msg)). SFL_EINVAL for a
 * context that is empty, longer than SFL_SEAL_CONTEXT_MAX, not printable
 * ASCII, SFL_SEAL_CONTEXT_UPDATE or SFL_SEAL_CONTEXT_JOIN. msg may be NULL when len == 0. */
int sfl_seal_sign_detached(const sfl_identity_t *id, const char *context, const void *msg,
                           size_t len, uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;
/* 0 if sig is pk's signature of msg under context; SFL_EBADSIG if not (also
 * for a non-canonical signature or a small-order pk), SFL_EINVAL for a
 * context sfl_seal_sign_detached would refuse. */
int sfl_seal_verify_detached(const uint8_t pk[SFL_SEAL_PK_BYTES], const char *context,
                             const void *msg, size_t len,
                             const uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;

/* Join proof: sig = Ed25519(id, u8 11 | "sfl-join-v1" | BLAKE2b-256(binding)),
 * binding being this connection's exported keying material (above). */
int sfl_seal_sign_join(const sfl_identity_t *id, const uint8_t binding[SFL_SEAL_BINDING_BYTES],
                       uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;
/* 0 if sig is pk's Join proof over binding; SFL_EBADSIG if not (another key,
 * another connection's binding, a non-canonical signature). */
int sfl_seal_verify_join(const uint8_t pk[SFL_SEAL_PK_BYTES],
                         const uint8_t binding[SFL_SEAL_BINDING_BYTES],
                         const uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;

/* Fresh X25519 round key from the CSPRNG. Returns owned (sfl_roundkey_free);
 * free it when the round closes, which wipes the secret, after which no
 * update sealed to it can be opened by anyone. */
int sfl_roundkey_new(sfl_roundkey_t **out) SFL_MUST_CHECK;
/* Wipes and frees; NULL is a no-op. */
void sfl_roundkey_free(sfl_roundkey_t *rk);

/* The 163 bytes an update signature covers (layout above), from ctx and the
 * payload's BLAKE2b-256. Public so that an auditor holding (ctx, payload,
 * sigma) can check the record without libsfl internals. */
void sfl_seal_upd_signed_bytes(const sfl_upd_ctx_t *ctx,
                               const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                               uint8_t out[SFL_SEAL_UPD_SIGNED_BYTES]);
/* sigma over the update signed bytes. payload may be NULL when len == 0. */
int sfl_seal_sign_update(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                         size_t len, uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;
/* 0 if sig is pk's update signature of (ctx, payload), else SFL_EBADSIG. */
int sfl_seal_verify_update(const uint8_t pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *ctx,
                           const void *payload, size_t len,
                           const uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;

/* The same from the payload's digest (sfl_seal_hash), for a caller that
 * already hashed the payload (while encoding or receiving it): the payload
 * is read once, not once more per signature. */
int sfl_seal_sign_update_digest(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx,
                                const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                                uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;
int sfl_seal_verify_update_digest(const uint8_t pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *ctx,
                                  const uint8_t payload_hash[SFL_SEAL_HASH_BYTES],
                                  const uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;

/* payload_len + SFL_SEAL_SIGNED_OVERHEAD, or 0 if that overflows size_t. */
size_t sfl_seal_signed_size(size_t payload_len);
/* Agent side, mode 1: writes payload | sigma into out[0..cap) (must not
 * overlap payload); *outlen = sfl_seal_signed_size(len). The payload is
 * hashed once. SFL_ELIMIT if cap is too small, SFL_EINVAL for a NULL
 * payload of nonzero length. Borrows everything. */
int sfl_seal_sign_into(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                       size_t len, uint8_t *out, size_t cap, size_t *outlen) SFL_MUST_CHECK;
/* Coordinator side, mode 1: checks msg[0..len) = payload | sigma against
 * agent_pk and the coordinator's own expected context. payload_hash is
 * BLAKE2b-256 of msg[0..len - 64) if the caller computed it while the bytes
 * arrived, or NULL (then it is computed here). Checks, in order:
 *   SFL_ETRUNC    len < SFL_SEAL_SIGNED_OVERHEAD
 *   SFL_ELIMIT    payload longer than max_payload
 *   SFL_EBADSIG   the signature does not verify: another signer, or any of
 *                 round key, job, round, nonce, agent id, model hash or
 *                 payload differ from what the agent signed
 * On success the payload is msg[0..*payload_len) (borrowed: no copy). The
 * one check of every mode-1 update: sfl_seal_open_update ends in it. */
int sfl_seal_check_update(const uint8_t agent_pk[SFL_SEAL_PK_BYTES], const sfl_upd_ctx_t *expect,
                          const uint8_t *msg, size_t len, size_t max_payload,
                          const uint8_t *payload_hash, size_t *payload_len) SFL_MUST_CHECK;

/* payload_len + SFL_SEAL_OVERHEAD, or 0 if that overflows size_t. */
size_t sfl_seal_sealed_size(size_t payload_len);
/* Agent side: signs (ctx, payload) with id and seals payload | sigma to
 * ctx->round_pk into out[0..cap) (must not overlap payload); *outlen = bytes
 * written = sfl_seal_sealed_size(len). SFL_ELIMIT if cap is too small
 * (checked before allocating), SFL_EINVAL if libsodium refuses round_pk (a
 * small-order point), SFL_ENOMEM. Borrows everything. */
int sfl_seal_update(const sfl_identity_t *id, const sfl_upd_ctx_t *ctx, const void *payload,
                    size_t len, uint8_t *out, size_t cap, size_t *outlen) SFL_MUST_CHECK;
/* Coordinator side: opens sealed[0..len) with the round key rk and verifies
 * the signature against agent_pk (the key registered at Join for the agent
 * on this connection) and the coordinator's expected context (expect->
 * round_pk must equal rk->pk, else SFL_EINVAL). Checks, in order:
 *   SFL_ETRUNC    len < SFL_SEAL_OVERHEAD
 *   SFL_ELIMIT    payload longer than max_payload (before any allocation)
 *   SFL_EDECRYPT  cannot open: sealed to another key (another round, an old
 *                 round whose key is gone) or ciphertext altered
 *   SFL_EBADSIG   opened but the signature does not verify: another signer,
 *                 or any of round key, job, round, nonce, agent id, model
 *                 hash or payload differ from what the agent signed (a
 *                 re-sealed, replayed, misattributed or stale update)
 *   SFL_ENOMEM
 * On success *payload is owned (sfl__free; the allocation may be larger
 * than *payload_len) and, if sig is not NULL, sigma is copied there so the
 * caller can keep a transferable record. On failure *payload is NULL and no
 * plaintext is left in memory. Detail in sfl_last_error(). */
int sfl_seal_open_update(const sfl_roundkey_t *rk, const uint8_t agent_pk[SFL_SEAL_PK_BYTES],
                         const sfl_upd_ctx_t *expect, const uint8_t *sealed, size_t len,
                         size_t max_payload, uint8_t **payload, size_t *payload_len,
                         uint8_t sig[SFL_SEAL_SIG_BYTES]) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

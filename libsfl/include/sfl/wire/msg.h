/* Wire messages (the .proto files in proto/sfl/v1/, docs/protocol.md) as plain sfl types.
 *
 * This module is the only code that sees protobuf-c's generated names
 * (STYLE rule 1): programs fill and read the structs below, and move bytes
 * to and from the gRPC transport.
 *
 * Packing validates the struct first (SFL_EINVAL with a detail naming the
 * field), so a program never sends what its peer would refuse.
 * Unpacking treats every byte as hostile:
 *   - the length is checked against the limit before protobuf-c sees it
 *     (SFL_ELIMIT); messages without a vector or list are further capped at
 *     SFL_MSG_CONTROL_MAX;
 *   - protobuf-c allocates through the sfl allocator (sfl_replace_allocator);
 *   - then every field is checked: SFL_EPARSE for bytes that are not the
 *     message, a missing required field, a fixed-size byte field of the wrong
 *     length (keys, nonces and hashes 32 bytes, signatures 64), an overlong or
 *     unprintable string, a zero id; SFL_EUNSUP for an unknown enum value;
 *     SFL_ENUMERIC for NaN or infinity; SFL_EDIM when a SparseVector's dim
 *     disagrees with its data; the sfl_spcodec_decode codes for bad vector
 *     bytes; SFL_ELIMIT for counts over a limit.
 * Every failure leaves a detail in sfl_last_error() that starts with the
 * message's name, e.g. "task: round_key is 31 bytes, want 32". Unknown
 * fields are ignored (a newer peer may add fields). A NULL lim means
 * sfl_msg_limits_default.
 *
 * Ownership: pack functions borrow their input and return the bytes owned
 * (free with sfl_msg_buf_free). Structs with pointer members are returned
 * owned by unpack (free with the matching _free, which frees the pointer
 * members too; NULL is a no-op); a struct a program fills for pack keeps
 * its own pointers, never pass it to _free. Structs without pointer members
 * are filled in place. On failure outputs are NULL / unspecified. */
#ifndef SFL_MSG_H
#define SFL_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/param.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/seal.h"
#include "sfl/crypto/secagg.h"
#include "sfl/crypto/shamir.h"
#include "sfl/wire/roundmetrics.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/vec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_MSG_PROTOCOL_VERSION 2 /* 2: algorithm parameters as a name/value list */
#define SFL_MSG_KEY_BYTES 32   /* Ed25519 and X25519 public keys */
#define SFL_MSG_SIG_BYTES 64   /* Ed25519 signature */
#define SFL_MSG_NONCE_BYTES 32 /* round nonce */
#define SFL_MSG_HASH_BYTES 32  /* BLAKE2b-256 */
/* The sizes the wire shares with the crypto layer are defined there once;
 * the programs copy between the two structs, so they must agree exactly. */
SFL_STATIC_ASSERT(SFL_MSG_KEY_BYTES == SFL_SEAL_PK_BYTES, "identity and round keys");
SFL_STATIC_ASSERT(SFL_MSG_SIG_BYTES == SFL_SEAL_SIG_BYTES, "Ed25519 signatures");
SFL_STATIC_ASSERT(SFL_MSG_NONCE_BYTES == SFL_SA_NONCE_BYTES, "round nonce");
SFL_STATIC_ASSERT(SFL_MSG_HASH_BYTES == SFL_SEAL_HASH_BYTES && SFL_MSG_HASH_BYTES == SFL_SA_HASH,
               "hashes and commitments");
#define SFL_MSG_NAME_LEN 64    /* names, versions: 63 printable ASCII + NUL */
#define SFL_MSG_TEXT_LEN 256   /* reasons, errors: 255 printable ASCII + NUL */
#define SFL_MSG_TAG_LEN 32     /* one tag: 1..31 of [a-z0-9_.:-] + NUL */
#define SFL_MSG_MAX_TAGS 16    /* tags per set */
#define SFL_MSG_MAX_LABELS 256 /* SFL_LOSS_MAX_CLASSES (loss.h; asserted in algo.c) */
/* The grpc-message, after PERMISSION_DENIED, with which the coordinator
 * answers every call of a revoked certificate, followed by " (fingerprint
 * HEX)"; an agent that reads it stops for good (docs/protocol.md). */
#define SFL_MSG_REVOKED "certificate revoked"
/* The reason of the Wait the coordinator paces an agent away with when no
 * running job can use it: an agent that worked for a job knows it ended. */
#define SFL_MSG_WAIT_NO_JOB "no running job for this agent"
/* Byte cap of every message that carries no vector and no list. */
#define SFL_MSG_CONTROL_MAX 65536
/* The signature context of tasks: the coordinator signs the task bytes with
 * sfl_seal_sign_detached(id, SFL_MSG_TASK_CONTEXT, ...) and agents verify
 * them with sfl_seal_verify_detached (seal.h). */
#define SFL_MSG_TASK_CONTEXT "sfl-task-v1"

typedef struct sfl_msg_limits {
    size_t max_message; /* packed bytes of one message; default 64 MiB */
    uint32_t max_dim;   /* SparseVector dimension; default 1 << 26 */
    uint32_t max_nnz;   /* SparseVector nonzeros; default 1 << 23 */
    uint32_t max_items; /* entries of an Admin list reply; default 10000 */
} sfl_msg_limits_t;

void sfl_msg_limits_default(sfl_msg_limits_t *lim);
void sfl_msg_buf_free(uint8_t *buf);

/* Enums carry the proto numbers; 0 (UNSPECIFIED) is never valid. */
typedef enum {
    SFL_UPDATE_MODE_SEALED = 1,
    SFL_UPDATE_MODE_SECURE_AGG = 2, /* secure aggregation */
    /* Update only (never a task's mode): mode 1 as agents send it, payload |
     * sigma in the clear inside mutual TLS (docs/security.md, "The seal"). */
    SFL_UPDATE_MODE_SIGNED = 3
} sfl_update_mode_t;

typedef enum {
    SFL_ACK_ACCEPTED = 1,
    SFL_ACK_LATE = 2,
    SFL_ACK_DUPLICATE = 3,
    SFL_ACK_WRONG_ROUND = 4,
    SFL_ACK_REJECTED = 5
} sfl_ack_status_t;

typedef enum {
    SFL_PHASE_IDLE = 1,
    SFL_PHASE_TRAINING = 2,
    SFL_PHASE_UPLOADING = 3
} sfl_agent_phase_t;

typedef enum {
    SFL_JOB_PENDING = 1,
    SFL_JOB_RUNNING = 2,
    SFL_JOB_PAUSED = 3,
    SFL_JOB_CANCELLED = 4,
    SFL_JOB_FINISHED = 5,
    SFL_JOB_FAILED = 6
} sfl_job_state_t;

typedef enum {
    SFL_ROUND_NONE = 0, /* no round open (job not running) */
    SFL_ROUND_SELECTING = 1,
    SFL_ROUND_TRAINING = 2,
    SFL_ROUND_AGGREGATING = 3,
    SFL_ROUND_COMMITTED = 4
} sfl_round_state_t;

/* Lowercase names for logs and metrics labels ("accepted", "wrong_round",
 * "running", "training", ...); "unknown" for other values. */
const char *sfl_msg_ack_name(sfl_ack_status_t s);
const char *sfl_msg_phase_name(sfl_agent_phase_t p);
const char *sfl_msg_job_state_name(sfl_job_state_t s);
const char *sfl_msg_round_state_name(sfl_round_state_t s);

/* A set of capability or condition tags, e.g. "mains_power". */
typedef struct sfl_tags {
    uint32_t n;
    char tag[SFL_MSG_MAX_TAGS][SFL_MSG_TAG_LEN];
} sfl_tags_t;

/* Adds tag unless present. SFL_EINVAL for bad syntax, SFL_ELIMIT when full. */
int sfl_msg_tags_add(sfl_tags_t *t, const char *tag) SFL_MUST_CHECK;
/* 1 if t holds tag, else 0. */
int sfl_msg_tags_has(const sfl_tags_t *t, const char *tag);

typedef struct sfl_dataset_summary {
    uint64_t samples;   /* local training rows */
    uint32_t dimension; /* features (columns) */
    uint32_t nlabels;   /* distinct label values; 0 for regression */
    double labels[SFL_MSG_MAX_LABELS]; /* strictly ascending, finite */
    /* Vertical data: the problem column (1-based) of the first local
     * column, 0 for whole rows; the hash of the sample ids, has_ids 0 for
     * none. first_column + dimension - 1 fits in 32 bits. */
    uint32_t first_column;
    int has_ids;
    uint8_t ids_hash[SFL_MSG_HASH_BYTES];
} sfl_dataset_summary_t;

/* Coordinator.Join */
#define SFL_MSG_CERT_PROOF_MAX 512 /* bytes of JoinRequest.cert_proof (SFL_TLS_SIG_MAX) */
typedef struct sfl_join_req {
    uint8_t identity_key[SFL_MSG_KEY_BYTES]; /* Ed25519 public key */
    sfl_tags_t capabilities;
    sfl_tags_t conditions;
    sfl_dataset_summary_t dataset;
    uint32_t protocol_version; /* >= 1 */
    char agent_version[SFL_MSG_NAME_LEN];
    /* Proof of possession of identity_key: its signature over this TLS
     * connection's exported keying material (sfl_seal_sign_join). has_proof
     * 0 = absent on the wire (the coordinator refuses such a Join). */
    int has_proof;
    uint8_t proof[SFL_MSG_SIG_BYTES];
    /* The certificate key's signature binding identity_key to the agent's
     * certificate (sfl_tls_cert_binding_sign); cert_proof_len 0 = absent. */
    uint8_t cert_proof[SFL_MSG_CERT_PROOF_MAX];
    size_t cert_proof_len;
} sfl_join_req_t;

typedef struct sfl_join_reply {
    uint64_t agent_id; /* > 0 */
    uint8_t coordinator_key[SFL_MSG_KEY_BYTES]; /* Ed25519 public key */
    uint32_t retry_after_ms;
    uint32_t heartbeat_interval_ms; /* > 0 */
    uint32_t protocol_version;      /* >= 1 */
} sfl_join_reply_t;

int sfl_msg_join_req_pack(const sfl_join_req_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_join_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_join_req_t *m) SFL_MUST_CHECK;
int sfl_msg_join_reply_pack(const sfl_join_reply_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_join_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_join_reply_t *m) SFL_MUST_CHECK;

/* Coordinator.Subscribe request */
typedef struct sfl_subscribe_req {
    uint64_t agent_id; /* > 0 */
    sfl_tags_t conditions;
} sfl_subscribe_req_t;

int sfl_msg_subscribe_req_pack(const sfl_subscribe_req_t *m, uint8_t **out,
                               size_t *len) SFL_MUST_CHECK;
int sfl_msg_subscribe_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_subscribe_req_t *m) SFL_MUST_CHECK;

/* Update mode 2 (secure aggregation) on the wire: the protocol is
 * sfl/crypto/secagg.h's (the programs move these fields into its structs); every
 * key, signature, nonce and share here has its exact length, checked on
 * unpack. Repeated fields hold at most lim's max_items entries. */
#define SFL_MSG_SA_NONCE SFL_SA_BOX_NONCE /* defined once, in sfl/crypto/secagg.h */
#define SFL_MSG_SA_CT SFL_SA_BOX_BYTES
#define SFL_MSG_SA_POINT SFL_SHAMIR_POINT /* a Feldman commitment */
#define SFL_MSG_SA_SHARE SFL_SHAMIR_BYTES  /* a released share's y */
/* A masked input's words beyond its support (sfl/crypto/savec.h) */
#define SFL_MSG_SA_EXTRA SFL_SA_EXTRA_WORDS

typedef struct sfl_msg_sa_member {
    uint64_t agent_id; /* > 0 */
    uint8_t pk[SFL_MSG_KEY_BYTES];
    double weight;     /* its public aggregation weight, in (0, max_weight] */
} sfl_msg_sa_member_t;

/* Task.secagg: threshold > nmembers / 2; members strictly ascending, each
 * weight finite in (0, max_weight]; support_size, top_k >= 1; clip,
 * max_weight finite and > 0. */
typedef struct sfl_msg_sa_round {
    uint32_t threshold;
    uint32_t nmembers;
    sfl_msg_sa_member_t *members; /* pack: borrowed, unpack: owned */
    uint32_t support_size, top_k;
    double clip, max_weight;
    uint32_t degree;              /* 0 (complete) or even */
} sfl_msg_sa_round_t;

typedef struct sfl_msg_sa_keys {
    uint64_t agent_id; /* > 0 */
    uint8_t c_pk[SFL_MSG_KEY_BYTES], s_pk[SFL_MSG_KEY_BYTES];
    uint8_t sig[SFL_MSG_SIG_BYTES];
} sfl_msg_sa_keys_t;

typedef struct sfl_msg_sa_box {
    uint64_t from, to; /* > 0, different */
    uint8_t nonce[SFL_MSG_SA_NONCE];
    uint8_t ct[SFL_MSG_SA_CT];
} sfl_msg_sa_box_t;

typedef struct sfl_msg_sa_sig {
    uint64_t agent_id; /* > 0 */
    uint8_t sig[SFL_MSG_SIG_BYTES];
} sfl_msg_sa_sig_t;

typedef struct sfl_msg_sa_reveal {
    uint64_t of;       /* > 0 */
    int self_mask;     /* 0 or 1 */
    uint16_t x;        /* >= 1 */
    uint8_t y[SFL_MSG_SA_SHARE];
    uint8_t sig[SFL_MSG_SIG_BYTES]; /* the dealer's (of's) signature of it */
} sfl_msg_sa_reveal_t;

/* The programs copy these fields to and from sfl/crypto/secagg.h's structs field
 * by field: the same sizes, checked here. */
#define SFL_MSG_SAME_SIZE_(a, fa, b, fb) (sizeof(((a *)0)->fa) == sizeof(((b *)0)->fb))
SFL_STATIC_ASSERT(SFL_MSG_SAME_SIZE_(sfl_msg_sa_box_t, ct, sfl_sa_box_t, ct) &&
               SFL_MSG_SAME_SIZE_(sfl_msg_sa_box_t, nonce, sfl_sa_box_t, nonce),
               "a share box on the wire and in sfl/crypto/secagg.h");
SFL_STATIC_ASSERT(SFL_MSG_SAME_SIZE_(sfl_msg_sa_keys_t, c_pk, sfl_sa_adv_t, c_pk) &&
               SFL_MSG_SAME_SIZE_(sfl_msg_sa_keys_t, s_pk, sfl_sa_adv_t, s_pk) &&
               SFL_MSG_SAME_SIZE_(sfl_msg_sa_keys_t, sig, sfl_sa_adv_t, sig),
               "round keys on the wire and in sfl/crypto/secagg.h");
SFL_STATIC_ASSERT(SFL_MSG_SAME_SIZE_(sfl_msg_sa_reveal_t, y, sfl_share_t, y),
               "a released share on the wire and in sfl/crypto/shamir.h");
SFL_STATIC_ASSERT(SFL_MSG_SAME_SIZE_(sfl_msg_sa_member_t, pk, sfl_sa_member_t, pk),
               "a member's identity key");

/* TaskOrWait.secagg: stage 2 (keys), 3 (clients = U2, boxes), 4 (clients
 * = U3) or 5 (signatures); the fields of other stages empty. Arrays: pack
 * borrowed, unpack owned (sfl_msg_sa_stage_clear). */
typedef struct sfl_msg_sa_stage {
    uint64_t job_id, round; /* > 0, >= 1 */
    uint32_t attempt, stage;
    uint32_t nkeys, nclients, nboxes, nsigs;
    sfl_msg_sa_keys_t *keys;
    uint64_t *clients;      /* strictly ascending */
    sfl_msg_sa_box_t *boxes;
    sfl_msg_sa_sig_t *sigs;
} sfl_msg_sa_stage_t;

/* SubmitSecAgg's request: stage 1 (keys), 2 (commitments, signature, boxes),
 * 3 (masked, signature), 4 (signature) or 5 (reveals); the fields of other
 * stages absent. Arrays: pack borrowed, unpack owned
 * (sfl_msg_sa_answer_free). */
typedef struct sfl_msg_sa_answer {
    uint64_t job_id, round, agent_id;
    uint32_t attempt, stage;
    sfl_msg_sa_keys_t keys;
    uint32_t ncommits;      /* stage 2: >= 2, even, at most 2 x lim's max_items */
    uint8_t (*commits)[SFL_MSG_SA_POINT];
    uint8_t sig[SFL_MSG_SIG_BYTES];
    uint32_t nboxes, nmasked, nreveals;
    sfl_msg_sa_box_t *boxes;
    uint32_t *masked;       /* at most lim's max_dim + 2 words */
    sfl_msg_sa_reveal_t *reveals;
} sfl_msg_sa_answer_t;

/* A round's task (proto Task inside SignedTask inside TaskOrWait). */
typedef struct sfl_task {
    uint64_t job_id;  /* > 0 */
    uint64_t round;   /* >= 1; 0 for a statistics round */
    uint32_t attempt; /* 0 first cohort, +1 per retry */
    char algorithm[SFL_MSG_NAME_LEN];
    sfl_param_list_t params; /* every parameter of the algorithm */
    char loss[SFL_MSG_NAME_LEN];
    uint32_t dimension; /* features */
    uint32_t nlabels;   /* classes; 0 for regression */
    double labels[SFL_MSG_MAX_LABELS]; /* strictly ascending, finite */
    char dictionary[SFL_MSG_NAME_LEN]; /* "" = standard basis */
    uint64_t seed;
    sfl_enc_t value_encoding; /* for the agent's update */
    sfl_update_mode_t update_mode;
    sfl_spvec_t *model;       /* global state; pack: borrowed, unpack: owned */
    sfl_enc_t model_encoding; /* how model travels */
    uint8_t model_hash[SFL_MSG_HASH_BYTES]; /* BLAKE2b-256 of model's codec bytes */
    int64_t deadline_ms;
    uint8_t round_nonce[SFL_MSG_NONCE_BYTES];
    uint8_t round_key[SFL_MSG_KEY_BYTES]; /* X25519 public key */
    uint32_t max_update_nnz;              /* 0 = model dimension */
    /* Vertical rounds (rows > 0): model is the broadcast at the round's
     * start; the round runs iterations [first_iteration, first_iteration +
     * round_iterations) of iterations, among clients block holders. All 0
     * or all set (rows, clients, iterations, round_iterations >= 1,
     * first_iteration + round_iterations <= iterations). */
    uint32_t rows, clients;
    uint64_t iterations, first_iteration;
    uint32_t round_iterations;
    /* Update mode 2: present (pack: borrowed, unpack: owned) exactly when
     * update_mode is SFL_UPDATE_MODE_SECURE_AGG. */
    sfl_msg_sa_round_t *secagg;
    /* Standardize jobs: statistics, the job's statistics round (round 0,
     * sealed mode, not vertical; the agent sends its rows' moments); in its
     * training rounds has_moments 1, moments_hash the BLAKE2b-256 of the
     * pooled moments' wire bytes (SFL_MOMENTS_LEN(dimension) little-endian
     * float64s) and standardize_eps > 0 and finite. */
    int statistics;
    int has_moments;
    uint8_t moments_hash[SFL_MSG_HASH_BYTES];
    double standardize_eps;
    /* Set by unpack only: the moments when the SignedTask carried them
     * (owned, SFL_MOMENTS_LEN(dimension) values matching moments_hash),
     * else NULL. */
    double *moments;
    /* Set by unpack only. */
    uint8_t signature[SFL_MSG_SIG_BYTES];
    uint8_t *signed_bytes; /* owned: the Task bytes exactly as received,
                              which the signature covers */
    size_t signed_len;
} sfl_task_t;

/* Pace steering for an agent that is not selected. */
typedef struct sfl_wait {
    uint32_t retry_after_ms; /* > 0 */
    char reason[SFL_MSG_TEXT_LEN];
} sfl_wait_t;

/* The bytes the coordinator signs: the packed Task without its model
 * (fields in number order, protobuf-c's deterministic packing; the same
 * struct always gives the same bytes). It signs them under
 * SFL_MSG_TASK_CONTEXT and hands the same bytes to sfl_msg_task_pack; an
 * agent verifies the signature over t->signed_bytes of the unpacked task,
 * the bytes as received, so nothing is ever re-encoded for verification.
 * Sets t->model_hash from the encoded model, so the hash can never
 * disagree with the model; the model travels beside the signature
 * (SignedTask.model), bound to it by that hash. The signature field of t is
 * ignored. Returns owned bytes. */
int sfl_msg_task_sign_bytes(sfl_task_t *t, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* A TaskOrWait carrying the task: task[0..task_len) from
 * sfl_msg_task_sign_bytes(t) (borrowed, wrapped as they are), their
 * signature and t's model, encoded again: SFL_EINVAL if its hash is not
 * t->model_hash (t changed since it was signed) or for no bytes. */
int sfl_msg_task_pack(const sfl_task_t *t, const uint8_t *task, size_t task_len,
                      const uint8_t signature[SFL_MSG_SIG_BYTES], uint8_t **out,
                      size_t *len) SFL_MUST_CHECK;
/* The same with a standardize job's pooled moments beside the signed bytes
 * (SignedTask.moments): n values, little-endian float64 (n 0: none). */
int sfl_msg_task_pack_moments(const sfl_task_t *t, const uint8_t *task, size_t task_len,
                              const uint8_t signature[SFL_MSG_SIG_BYTES],
                              const double *moments, size_t n, uint8_t **out,
                              size_t *len) SFL_MUST_CHECK;
/* hash = BLAKE2b-256 of moments[0..n) as they travel (little-endian
 * float64s): what Task.moments_hash names. */
void sfl_msg_moments_hash(const double *moments, size_t n,
                          uint8_t hash[SFL_MSG_HASH_BYTES]);
/* A TaskOrWait carrying a Wait. */
int sfl_msg_wait_pack(const sfl_wait_t *w, uint8_t **out, size_t *len) SFL_MUST_CHECK;

/* A vertical round's next iteration (TaskOrWait.step). */
typedef struct sfl_vstep {
    uint64_t job_id;   /* > 0 */
    uint64_t round;    /* >= 1 */
    uint32_t attempt;
    uint64_t iteration;
    double *bcast;     /* nbcast values (>= 1), finite; pack: borrowed,
                          unpack: owned (free with sfl_msg_vstep_clear) */
    uint32_t nbcast;
} sfl_vstep_t;

int sfl_msg_vstep_pack(const sfl_vstep_t *s, uint8_t **out, size_t *len) SFL_MUST_CHECK;
void sfl_msg_vstep_clear(sfl_vstep_t *s);

/* One Subscribe stream message: a task, a wait, (step not NULL) a
 * vertical step or (sa not NULL) a secure aggregation stage; exactly one of
 * *task (owned), *wait, *step, *sa is set (*kind says which: 't', 'w', 's',
 * 'a'). A step's broadcast is at most lim's max_dim values. With step or
 * sa NULL, that kind is SFL_EPARSE. */
int sfl_msg_sub_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                       sfl_task_t **task, sfl_wait_t *wait, sfl_vstep_t *step,
                       sfl_msg_sa_stage_t *sa, int *kind) SFL_MUST_CHECK;

int sfl_msg_sa_stage_pack(const sfl_msg_sa_stage_t *m, uint8_t **out,
                          size_t *len) SFL_MUST_CHECK;
void sfl_msg_sa_stage_clear(sfl_msg_sa_stage_t *m);
int sfl_msg_sa_answer_pack(const sfl_msg_sa_answer_t *m, uint8_t **out,
                           size_t *len) SFL_MUST_CHECK;
int sfl_msg_sa_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_msg_sa_answer_t **out) SFL_MUST_CHECK;
void sfl_msg_sa_answer_free(sfl_msg_sa_answer_t *m);
/* One Subscribe stream message: either *task is set (returns owned, free
 * with sfl_msg_task_free; its model has been decoded with lim's max_dim
 * and max_nnz, its dim checked against the SparseVector, its hash checked
 * against model_hash) and *wait is untouched, or *task is NULL and *wait
 * is filled. The task's signature is NOT verified here. */
int sfl_msg_task_or_wait_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_task_t **task, sfl_wait_t *wait) SFL_MUST_CHECK;
void sfl_msg_task_free(sfl_task_t *t);

/* Coordinator.SubmitStep request: an agent's answer to one iteration. */
typedef struct sfl_step_answer {
    uint64_t job_id;   /* > 0 */
    uint64_t round;    /* >= 1 */
    uint32_t attempt;
    uint64_t agent_id; /* > 0 */
    uint64_t iteration;
    uint8_t *msg;      /* the algorithm's message (sfl_msg_values_encode),
                          never empty; pack: borrowed, unpack: owned */
    size_t msg_len;
    /* The objective at the round's starting model (sfl_vertical_objective),
     * over objective_rows rows; 0 and 0: not reported. Finite. */
    double objective;
    uint64_t objective_rows;
} sfl_step_answer_t;

int sfl_msg_step_answer_pack(const sfl_step_answer_t *m, uint8_t **out,
                             size_t *len) SFL_MUST_CHECK;
/* msg_len is at most lim's max_message. */
int sfl_msg_step_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_step_answer_t **out) SFL_MUST_CHECK;
void sfl_msg_step_answer_free(sfl_step_answer_t *m);

/* n values as the wire carries a vertical message: the first nints as
 * little-endian int32 (each an integer in the int32 range), the rest as
 * little-endian float64 (finite). Bytes: 4 nints + 8 (n - nints).
 * encode: SFL_EINVAL for a value that does not fit; decode: SFL_EPARSE for
 * another length, a non-finite value. */
size_t sfl_msg_values_bytes(size_t n, size_t nints);
int sfl_msg_values_encode(const double *v, size_t n, size_t nints, uint8_t *out) SFL_MUST_CHECK;
int sfl_msg_values_decode(const uint8_t *buf, size_t len, size_t n, size_t nints,
                          double *v) SFL_MUST_CHECK;

/* Coordinator.SubmitUpdate request */
typedef struct sfl_update {
    uint64_t job_id;   /* > 0 */
    uint64_t round;    /* >= 1; 0 for a statistics round's moments */
    uint32_t attempt;
    uint64_t agent_id; /* > 0 */
    sfl_update_mode_t mode;
    /* SEALED: crypto_box_seal(payload | sigma); SIGNED: payload | sigma.
     * Never empty; pack: borrowed, unpack: owned */
    uint8_t *sealed;
    size_t sealed_len;
} sfl_update_t;

int sfl_msg_update_pack(const sfl_update_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_update_free). */
int sfl_msg_update_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_update_t **out) SFL_MUST_CHECK;
void sfl_msg_update_free(sfl_update_t *m);

/* The plaintext an agent seals (proto UpdatePayload). */
typedef struct sfl_payload {
    sfl_spvec_t *update; /* pack: borrowed, unpack: owned */
    sfl_enc_t encoding;  /* how update travels */
    uint64_t samples;    /* > 0: the aggregation weight */
    double train_loss;   /* finite */
    /* The agent's held-out split: rows (0 = none; then both metrics are 0),
     * accuracy in [0, 1] (classification) or mean squared error >= 0 (lsq),
     * finite. */
    uint64_t eval_samples;
    double eval_accuracy;
    double eval_mse;
    /* A personalized algorithm's own model on the same rows: accuracy in
     * [0, 1]; 0 otherwise (and when eval_samples is 0). */
    double personal_accuracy;
} sfl_payload_t;

int sfl_msg_payload_pack(const sfl_payload_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_payload_free). The update must have dimension dim
 * (SFL_EDIM otherwise) and at most lim->max_nnz nonzeros. */
int sfl_msg_payload_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint32_t dim, sfl_payload_t **out) SFL_MUST_CHECK;
void sfl_msg_payload_free(sfl_payload_t *m);

/* Coordinator.SubmitUpdate reply */
typedef struct sfl_ack {
    sfl_ack_status_t status;
    char reason[SFL_MSG_TEXT_LEN];
    uint64_t job_id;
    uint64_t round;
    uint32_t attempt;
} sfl_ack_t;

int sfl_msg_ack_pack(const sfl_ack_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_ack_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                       sfl_ack_t *m) SFL_MUST_CHECK;

/* Coordinator.Heartbeat */
typedef struct sfl_heartbeat_req {
    uint64_t agent_id; /* > 0 */
    sfl_agent_phase_t phase;
    uint64_t job_id; /* 0, 0, 0 when idle */
    uint64_t round;
    uint32_t attempt;
    uint32_t progress_permille; /* 0..1000 */
    sfl_tags_t conditions;
} sfl_heartbeat_req_t;

typedef struct sfl_heartbeat_reply {
    uint32_t interval_ms; /* > 0 */
    int abort;            /* 0 or 1 */
    int64_t deadline_ms;
} sfl_heartbeat_reply_t;

int sfl_msg_heartbeat_req_pack(const sfl_heartbeat_req_t *m, uint8_t **out,
                               size_t *len) SFL_MUST_CHECK;
int sfl_msg_heartbeat_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_heartbeat_req_t *m) SFL_MUST_CHECK;
int sfl_msg_heartbeat_reply_pack(const sfl_heartbeat_reply_t *m, uint8_t **out,
                                 size_t *len) SFL_MUST_CHECK;
int sfl_msg_heartbeat_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   sfl_heartbeat_reply_t *m) SFL_MUST_CHECK;

/* Admin: jobs. A spec's checks on unpack and pack: name, algorithm and loss
 * non-empty; dimension, rounds, cohort_size, round_deadline_ms,
 * max_attempts, heartbeat_timeout_ms >= 1; 1 <= min_quorum <= cohort_size;
 * over_selection finite and >= 0; params: well-formed distinct names, finite
 * values. Whether the algorithm and loss exist and the parameters suit them
 * is the coordinator's check (sfl_algo_params_from_list, sfl_algo_check). */
typedef struct sfl_job_spec {
    char name[SFL_MSG_NAME_LEN];
    char algorithm[SFL_MSG_NAME_LEN];
    sfl_param_list_t params; /* a program reading a job file fills the defaults */
    char loss[SFL_MSG_NAME_LEN];
    uint32_t dimension;
    uint32_t nlabels;
    double labels[SFL_MSG_MAX_LABELS];
    uint32_t rounds;
    uint32_t cohort_size;
    double over_selection;
    uint32_t min_quorum;
    uint32_t round_deadline_ms;
    sfl_enc_t value_encoding;
    uint64_t seed;
    sfl_tags_t required_conditions;
    char dictionary[SFL_MSG_NAME_LEN];
    uint32_t max_attempts; /* per round, >= 1 */
    int paused;            /* 0 or 1: create PENDING */
    uint32_t heartbeat_timeout_ms;
    int ordered_aggregation; /* 0 or 1 */
    double max_update_norm;  /* finite, >= 0; 0 = default */
    double max_samples;      /* finite, >= 0; 0 = default */
    uint32_t rows;                 /* vertical jobs: n */
    uint32_t iterations_per_round; /* vertical jobs; 0 = 100 */
    int secagg;                    /* 0 or 1: update mode 2 */
    uint32_t sa_threshold, sa_support, sa_topk, sa_degree; /* 0: the defaults */
    double sa_clip, sa_max_weight; /* finite, >= 0; 0: the defaults */
    int standardize;               /* 0 or 1: the statistics round, then standardised rows */
    double standardize_eps;        /* finite, >= 0; 0: SFL_STANDARDIZE_EPS */
    double standardize_bound;      /* finite, >= 0; 0: 100 (server/job/model.h; mode 2 only) */
    char description[SFL_MSG_TEXT_LEN]; /* the operator's note; "" none */
    char sa_groups[16];            /* "" or "none", "frontend" (server/job/spec.c) */
    uint32_t sa_min_group;         /* secagg_groups = frontend: 0 (10) or >= 3 */
    int frontend_fold;             /* 0 or 1: front-ends fold (fleet.proto, Fleet.Partial) */
} sfl_job_spec_t;

typedef struct sfl_job_status {
    uint64_t job_id; /* > 0 */
    char name[SFL_MSG_NAME_LEN];
    char algorithm[SFL_MSG_NAME_LEN];
    sfl_job_state_t state;
    uint64_t committed_round;
    uint32_t rounds;
    sfl_round_state_t round_state; /* SFL_ROUND_NONE unless running */
    uint32_t attempt;
    uint32_t selected;
    uint32_t accepted;
    uint32_t cohort_size;
    uint32_t min_quorum;
    int64_t deadline_ms;
    char error[SFL_MSG_TEXT_LEN];
    uint32_t model_nnz;
    /* The last committed round's progress (RoundSummary): the metrics
     * sfl/wire/roundmetrics.def marks LAST (JobStatus.last_NAME; the others
     * do not travel: 0 after unpack), all finite; last.samples 0 = none yet. */
    sfl_round_metrics_t last;
    char loss[SFL_MSG_NAME_LEN]; /* JobSpec.loss */
    char waiting[SFL_MSG_TEXT_LEN]; /* why the round cannot start; "" otherwise */
    uint64_t iteration; /* vertical jobs: the iteration in progress */
    /* Private jobs: the ledger (all finite, >= 0; 0 otherwise). */
    double privacy_epsilon, privacy_delta, privacy_spent, privacy_spent_rdp;
    uint64_t privacy_iterations;
    /* Members quarantined in this job (docs/security.md) and what for,
     * e.g. "agent 9: ..." (text "" exactly when the count is 0). */
    uint32_t quarantined;
    char quarantine[SFL_MSG_TEXT_LEN];
    /* Standardize jobs: 1 while the statistics round is open or next, 2
     * once the moments are stored (0: not standardize); the rows and
     * agents they pool. */
    uint32_t statistics;
    uint64_t statistics_rows;
    uint32_t statistics_agents;
    char description[SFL_MSG_TEXT_LEN]; /* JobSpec.description */
} sfl_job_status_t;

/* CreateJobRequest */
int sfl_msg_create_job_pack(const sfl_job_spec_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_create_job_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_job_spec_t *m) SFL_MUST_CHECK;
/* RevokeRequest / RevokeReply. Request: exactly one of agent (a name) and
 * fingerprint (has_fingerprint). Reply: fingerprint (required), agent ("" =
 * bound to none), closed. */
typedef struct {
    char agent[SFL_MSG_NAME_LEN];
    uint8_t fingerprint[SFL_MSG_HASH_BYTES];
    int has_fingerprint; /* 0 | 1 */
    uint32_t closed;
} sfl_revoke_t;
int sfl_msg_revoke_req_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_revoke_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_revoke_t *m) SFL_MUST_CHECK;
int sfl_msg_revoke_reply_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_revoke_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_revoke_t *m) SFL_MUST_CHECK;

/* ReleaseRequest / ReleaseReply (Admin.ReleaseAgent): job_id, agent_id >
 * 0; the reply adds the reason the agent was quarantined for. */
typedef struct {
    uint64_t job_id;
    uint64_t agent_id;
    char reason[SFL_MSG_TEXT_LEN];
} sfl_release_t;
int sfl_msg_release_req_pack(const sfl_release_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_release_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_release_t *m) SFL_MUST_CHECK;
int sfl_msg_release_reply_pack(const sfl_release_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_release_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_release_t *m) SFL_MUST_CHECK;

/* FleetRequest (empty) / FleetReply (Admin.Fleet): the answering
 * coordinator's role, the leader row (has_leader: epoch >= 1, holder,
 * since_ms >= 0), its own epoch, the front-ends attached (at most
 * SFL_MSG_FLEET_MAX_FRONTENDS) and the masters sharing the store (at most
 * SFL_MSG_FLEET_MAX_MASTERS). Unpack returns the reply owned
 * (sfl_msg_fleet_free). */
#define SFL_MSG_FLEET_MAX_FRONTENDS 4096
typedef struct {
    char name[SFL_MSG_NAME_LEN];
    char address[SFL_MSG_NAME_LEN];
    uint32_t agents;
    uint64_t lag_ms;
} sfl_fleet_frontend_t;
/* A master row (holder 1..127 bytes, role "leader" | "standby" |
 * "single", host 0..63). */
#define SFL_MSG_FLEET_MAX_MASTERS 64
typedef struct {
    char holder[128];
    char role[16];
    uint64_t epoch;
    char host[SFL_MSG_NAME_LEN];
    uint64_t pid;
    int64_t started_ms;
    uint64_t seen_ago_ms;
    int stale; /* 0 | 1 */
} sfl_fleet_master_t;
typedef struct {
    char role[SFL_MSG_NAME_LEN];
    int has_leader; /* 0 | 1 */
    uint64_t epoch;
    char holder[SFL_MSG_TEXT_LEN];
    int64_t since_ms;
    uint64_t own_epoch;
    uint32_t n;
    sfl_fleet_frontend_t *frontends; /* n; owned after unpack, borrowed for pack */
    uint32_t nmasters;               /* <= SFL_MSG_FLEET_MAX_MASTERS */
    sfl_fleet_master_t *masters;     /* nmasters; owned after unpack, borrowed for pack */
} sfl_fleet_t;
int sfl_msg_fleet_req_pack(uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_req_unpack(const uint8_t *buf, size_t len,
                             const sfl_msg_limits_t *lim) SFL_MUST_CHECK;
int sfl_msg_fleet_pack(const sfl_fleet_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                         sfl_fleet_t **out) SFL_MUST_CHECK;
void sfl_msg_fleet_free(sfl_fleet_t *m);

/* JobRequest (Pause/Resume/CancelJob): job_id > 0 */
int sfl_msg_job_req_pack(uint64_t job_id, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_job_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint64_t *job_id) SFL_MUST_CHECK;
/* JobReply (CreateJob, Pause/Resume/CancelJob) */
int sfl_msg_job_reply_pack(const sfl_job_status_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_job_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_job_status_t *m) SFL_MUST_CHECK;

/* Admin.Status and Admin.ListJobs requests (empty messages; unpack only
 * checks that the bytes are one). */
int sfl_msg_status_req_pack(uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_status_req_unpack(const uint8_t *buf, size_t len,
                              const sfl_msg_limits_t *lim) SFL_MUST_CHECK;
int sfl_msg_list_jobs_req_pack(uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_list_jobs_req_unpack(const uint8_t *buf, size_t len,
                                 const sfl_msg_limits_t *lim) SFL_MUST_CHECK;

typedef struct sfl_status {
    char version[SFL_MSG_NAME_LEN];
    int64_t started_ms;
    uint32_t connected_agents;
    uint32_t known_agents;
    uint64_t updates_accepted;
    uint64_t updates_rejected;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint32_t njobs;
    sfl_job_status_t *jobs; /* pack: borrowed, unpack: owned */
} sfl_status_t;

int sfl_msg_status_pack(const sfl_status_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_status_free); at most lim->max_items jobs. */
int sfl_msg_status_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_status_t **out) SFL_MUST_CHECK;
void sfl_msg_status_free(sfl_status_t *m);

/* ListJobsReply */
typedef struct sfl_job_list {
    uint32_t n;
    sfl_job_status_t *jobs; /* pack: borrowed, unpack: owned */
} sfl_job_list_t;

int sfl_msg_job_list_pack(const sfl_job_list_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_job_list_free); at most lim->max_items jobs. */
int sfl_msg_job_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_job_list_t **out) SFL_MUST_CHECK;
void sfl_msg_job_list_free(sfl_job_list_t *m);

/* Admin.ListAgents */
typedef struct sfl_agent_info {
    uint64_t agent_id; /* > 0 */
    char subject[SFL_MSG_NAME_LEN];
    int connected; /* 0 or 1 */
    sfl_tags_t capabilities;
    sfl_tags_t conditions;
    sfl_dataset_summary_t dataset;
    int64_t last_seen_ms;
    sfl_agent_phase_t phase;
    uint64_t job_id;
    uint64_t round;
    uint32_t progress_permille;
    uint64_t updates_accepted;
    char agent_version[SFL_MSG_NAME_LEN];
    /* "quarantined in job 3: <reason>" for each job that quarantined it
     * (truncated); "" when none. */
    char quarantine[SFL_MSG_TEXT_LEN];
} sfl_agent_info_t;

typedef struct sfl_agent_list {
    uint32_t n;
    sfl_agent_info_t *agents; /* pack: borrowed, unpack: owned */
} sfl_agent_list_t;

int sfl_msg_list_agents_req_pack(int connected_only, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_list_agents_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   int *connected_only) SFL_MUST_CHECK;
int sfl_msg_agent_list_pack(const sfl_agent_list_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_agent_list_free); at most lim->max_items agents. */
int sfl_msg_agent_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_agent_list_t **out) SFL_MUST_CHECK;
void sfl_msg_agent_list_free(sfl_agent_list_t *m);

/* Admin.ExportModel */
typedef struct sfl_export {
    uint64_t job_id; /* > 0 */
    uint64_t round;  /* >= 1 */
    char algorithm[SFL_MSG_NAME_LEN];
    char loss[SFL_MSG_NAME_LEN];
    uint32_t dimension;
    uint32_t nlabels;
    double labels[SFL_MSG_MAX_LABELS];
    sfl_spvec_t *model; /* pack: borrowed (sent as f64), unpack: owned */
    /* Unpack only (pack computes it): BLAKE2b-256 of the model's bytes. */
    uint8_t model_hash[SFL_MSG_HASH_BYTES];
    /* A standardize job's pooled moments, 1 + 2 dimension finite values
     * (pack: borrowed, unpack: owned), and its eps (> 0); NULL and 0
     * otherwise. */
    double *moments;
    double standardize_eps;
} sfl_export_t;

/* ExportModelRequest: job_id > 0, round 0 = last committed. */
int sfl_msg_export_req_pack(uint64_t job_id, uint64_t round, uint8_t **out,
                            size_t *len) SFL_MUST_CHECK;
int sfl_msg_export_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              uint64_t *job_id, uint64_t *round) SFL_MUST_CHECK;
int sfl_msg_export_pack(const sfl_export_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_export_free); model hash checked. */
int sfl_msg_export_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_export_t **out) SFL_MUST_CHECK;
void sfl_msg_export_free(sfl_export_t *m);

/* Admin.JobHistory: one committed round (proto RoundSummary). samples 0 =
 * no metrics were kept for the round (then the metric fields are 0). */
typedef struct sfl_round_summary {
    uint64_t round; /* >= 1 */
    uint32_t attempt;
    int64_t opened_ms, committed_ms;
    uint32_t selected, accepted;
    uint64_t bytes_up;
    /* every round metric (sfl/wire/roundmetrics.def), RoundSummary's
     * fields of the same names; F64s finite, privacy_spent* >= 0 */
    sfl_round_metrics_t m;
} sfl_round_summary_t;

typedef struct sfl_job_history {
    uint64_t job_id; /* > 0 */
    char loss[SFL_MSG_NAME_LEN];
    uint32_t n;
    sfl_round_summary_t *rounds; /* strictly ascending round; pack: borrowed,
                                    unpack: owned */
    int more;                    /* 0 or 1 */
    char algorithm[SFL_MSG_NAME_LEN]; /* JobSpec.algorithm; "" from an older coordinator */
} sfl_job_history_t;

/* JobHistoryRequest: job_id > 0, rounds after after_round. */
int sfl_msg_history_req_pack(uint64_t job_id, uint64_t after_round, uint8_t **out,
                             size_t *len) SFL_MUST_CHECK;
int sfl_msg_history_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               uint64_t *job_id, uint64_t *after_round) SFL_MUST_CHECK;
int sfl_msg_history_pack(const sfl_job_history_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_history_free); at most lim->max_items rounds. */
int sfl_msg_history_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           sfl_job_history_t **out) SFL_MUST_CHECK;
void sfl_msg_history_free(sfl_job_history_t *m);

/* ---- Fleet service (proto/sfl/v1/fleet.proto): a front-end's relayed call */

#define SFL_MSG_CN_MAX 64 /* bytes of a certificate CN (sfl_peer_t's SFL_PEER_CN_MAX) */
#define SFL_MSG_CERT_DER_MAX 8192 /* bytes of a relayed certificate (SFL_TLS_CERT_DER_MAX) */

typedef struct sfl_fleet_call {
    /* 1..SFL_MSG_CN_MAX bytes, none below 0x20 nor 0x7f */
    char agent_cn[SFL_MSG_CN_MAX + 1];
    uint8_t cert_sha256[32];
    /* the Coordinator request, packed; pack: borrowed, unpack: owned (NULL
     * when request_len is 0) */
    uint8_t *request;
    size_t request_len;
    uint64_t conn_id; /* > 0: the front-end's number for the agent's connection */
    /* the agent's certificate, DER, at most SFL_MSG_CERT_DER_MAX bytes (0:
     * none); pack: borrowed, unpack: owned. Not parsed here: the master
     * verifies it (sfl_tls_verify_der). */
    uint8_t *agent_cert;
    size_t agent_cert_len;
} sfl_fleet_call_t;

int sfl_msg_fleet_call_pack(const sfl_fleet_call_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_fleet_call_free); the whole message is at most
 * lim->max_message bytes. */
int sfl_msg_fleet_call_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_fleet_call_t **out) SFL_MUST_CHECK;
void sfl_msg_fleet_call_free(sfl_fleet_call_t *m);

/* Fleet.Model: the request (job_id > 0, model_hash) and the reply (the
 * model as SignedTask.model carries it: a packed SparseVector, not checked
 * here; unpack: owned, at most lim->max_message bytes). */
int sfl_msg_fleet_model_req_pack(uint64_t job_id, const uint8_t hash[SFL_MSG_HASH_BYTES],
                                 uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_model_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   uint64_t *job_id, uint8_t hash[SFL_MSG_HASH_BYTES]) SFL_MUST_CHECK;
int sfl_msg_fleet_model_reply_pack(const uint8_t *model, size_t model_len, uint8_t **out,
                                   size_t *len) SFL_MUST_CHECK;
/* *model owned (sfl_msg_buf_free); SFL_EPARSE when it is empty. */
int sfl_msg_fleet_model_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                     uint8_t **model, size_t *model_len) SFL_MUST_CHECK;
/* The model_hash a task names its model by: BLAKE2b-256 of the packed
 * SparseVector's data (what an agent checks), for a front-end to check the
 * model a master answered before keeping it. SFL_EPARSE when model is not
 * a SparseVector with data. */
int sfl_msg_fleet_model_hash(const uint8_t *model, size_t len,
                             uint8_t hash[SFL_MSG_HASH_BYTES]) SFL_MUST_CHECK;

/* ---- Fleet fold mode (fleet.proto: FoldSpec, Claim, Partial) ---------------------- */

/* Members one FleetPartial may name. */
#define SFL_MSG_PARTIAL_MAX 65536u

/* FleetFoldSpec: fold 0 leaves every other field zero (checked). fold 1:
 * dimension >= 1, a known encoding, bounds finite and >= 0 (0: the
 * defaults), the three 32-byte values. */
typedef struct sfl_fleet_fold_spec {
    int fold;
    uint32_t dimension;
    sfl_enc_t encoding;
    double max_update_norm, max_samples;
    uint8_t round_pk[SFL_MSG_KEY_BYTES];
    uint8_t nonce[SFL_MSG_HASH_BYTES];
    uint8_t model_hash[SFL_MSG_HASH_BYTES];
} sfl_fleet_fold_spec_t;

/* FleetFoldSpecRequest: job_id > 0. */
int sfl_msg_fleet_fold_spec_req_pack(uint64_t job_id, uint64_t round, uint32_t attempt,
                                     uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_fold_spec_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                       uint64_t *job_id, uint64_t *round,
                                       uint32_t *attempt) SFL_MUST_CHECK;
int sfl_msg_fleet_fold_spec_pack(const sfl_fleet_fold_spec_t *m, uint8_t **out,
                                 size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_fold_spec_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   sfl_fleet_fold_spec_t *m) SFL_MUST_CHECK;

/* FleetClaim (a Claim's FleetCall.request): job_id, agent_id, samples > 0,
 * the payload's BLAKE2b-256 and the agent's update signature. */
typedef struct sfl_fleet_claim {
    uint64_t job_id, round;
    uint32_t attempt;
    uint64_t agent_id;
    uint64_t samples;
    uint8_t payload_hash[SFL_MSG_HASH_BYTES];
    uint8_t signature[SFL_MSG_SIG_BYTES];
    uint64_t update_bytes;
} sfl_fleet_claim_t;

int sfl_msg_fleet_claim_pack(const sfl_fleet_claim_t *m, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_claim_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_fleet_claim_t *m) SFL_MUST_CHECK;

/* FleetPartial: job_id > 0; 1 to min(SFL_MSG_PARTIAL_MAX, lim->max_items)
 * members, each > 0 (distinctness is the master's check: it names the
 * one); weight_sum positive and finite; sum a float64 SparseVector within
 * lim's max_dim and max_nnz, every value finite; metric_sums exactly
 * SFL_METRIC_COUNT finite values. */
typedef struct sfl_fleet_partial {
    uint64_t job_id, round;
    uint32_t attempt;
    uint64_t *members; /* pack: borrowed, unpack: owned */
    uint32_t nmembers;
    double weight_sum;
    sfl_spvec_t *sum;  /* pack: borrowed (sent as f64), unpack: owned */
    double metric_sums[SFL_METRIC_COUNT];
    uint64_t update_bytes;
} sfl_fleet_partial_t;

int sfl_msg_fleet_partial_pack(const sfl_fleet_partial_t *m, uint8_t **out,
                               size_t *len) SFL_MUST_CHECK;
/* Returns owned (sfl_msg_fleet_partial_free). */
int sfl_msg_fleet_partial_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_fleet_partial_t **out) SFL_MUST_CHECK;
void sfl_msg_fleet_partial_free(sfl_fleet_partial_t *m);
int sfl_msg_fleet_partial_reply_pack(uint32_t accepted, uint8_t **out, size_t *len) SFL_MUST_CHECK;
int sfl_msg_fleet_partial_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                       uint32_t *accepted) SFL_MUST_CHECK;

/* A task without its model, on the protobuf wire (no decoding of the task
 * or the model): what lets a master send a front-end the model once for all
 * its agents (proto/sfl/v1/fleet.proto, Fleet.Subscribe). tow is a packed
 * TaskOrWait.
 * sfl_msg_task_strip_model: the same TaskOrWait without SignedTask.model
 * (owned), and where the model's bytes (the packed SparseVector) sit in tow;
 * SFL_ENOTFOUND when tow is not a task or its SignedTask has no model.
 * sfl_msg_task_put_model: the inverse, SignedTask.model appended (the field
 * protobuf-c packs last): put(strip(x)) == x byte for byte. SFL_EINVAL when
 * the SignedTask already has a model or tow is not a task.
 * sfl_msg_task_needs_model: 1 when tow is a task with no model at all
 * (neither SignedTask.model nor Task.model) and a model_hash, with the
 * task's job_id and model_hash; 0 for anything else that parses (a wait, a
 * step, a task with its model); SFL_EPARSE for bytes that do not. */
int sfl_msg_task_strip_model(const uint8_t *tow, size_t len, uint8_t **out, size_t *out_len,
                             size_t *model_off, size_t *model_len) SFL_MUST_CHECK;
int sfl_msg_task_put_model(const uint8_t *tow, size_t len, const uint8_t *model,
                           size_t model_len, uint8_t **out, size_t *out_len) SFL_MUST_CHECK;
int sfl_msg_task_needs_model(const uint8_t *tow, size_t len, uint64_t *job_id,
                             uint8_t hash[SFL_MSG_HASH_BYTES]) SFL_MUST_CHECK;
/* 1 when tow is a task, with its Task's job_id, round and attempt (0 when
 * absent); 0 for anything else that parses; SFL_EPARSE for bytes that do
 * not. What a front-end in fold mode counts: the agents it gave an
 * attempt's task. */
int sfl_msg_task_ids(const uint8_t *tow, size_t len, uint64_t *job_id, uint64_t *round,
                     uint32_t *attempt) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* Private to libsfl/src/wire/: what the message codec's files share.
 *
 * The only files that know protobuf-c's generated names (STYLE rule 1):
 * msg.c holds the shared steps, field helpers, names and limits; one file
 * per service holds its messages: msg_coord.c (the Coordinator service:
 * Join, Subscribe, Task/Wait, Update, payload, ack, Heartbeat), msg_admin.c
 * (the Admin service), msg_secagg.c (secure aggregation, update mode 2),
 * msg_vertical.c (vertical steps, answers, values), msg_fleet.c (the Fleet
 * service front-ends call on the master).
 *
 * Every message goes through the same three steps. Packing: check the sfl
 * struct (check_*), point a stack-built generated struct at its fields
 * (borrowing, no copies except encoded vectors), pack once into an exact
 * buffer. Unpacking: size check, protobuf-c unpack through the sfl allocator,
 * copy into the sfl struct with wire-only checks (byte lengths, string
 * lengths, counts), then the same check_* as packing, with the codes a peer
 * deserves (SFL_EPARSE / SFL_EUNSUP instead of SFL_EINVAL). One set of
 * checks for both directions keeps "what we send" and "what we accept"
 * identical. Those steps exist once, in sfl__msg_pack_msg and
 * sfl__msg_unpack_msg; each message only supplies a msg_type_t: its check,
 * put (sfl -> generated struct) and get (generated struct -> sfl, with the
 * checks).
 *
 * Unknown fields are ignored, never an error: that is what lets a newer peer
 * add fields (docs/protocol.md, versioning). */
#ifndef SFL_WIRE_MSG_INT_H
#define SFL_WIRE_MSG_INT_H

#include <assert.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sfl/core/alloc.h"
#include "sfl/v1/admin.pb-c.h"
#include "sfl/v1/common.pb-c.h"
#include "sfl/v1/coordinator.pb-c.h"
#include "sfl/v1/fleet.pb-c.h"
#include "sfl/wire/msg.h"


/* ---- errors -------------------------------------------------------------- */

/* Which message is being handled and how its structural errors are coded:
 * SFL_EPARSE for bytes from a peer, SFL_EINVAL for a struct from our own
 * program. Unpacking also carries what the checks compare against. */
typedef struct chk {
    const char *msg;
    int bad;
    const sfl_msg_limits_t *lim; /* unpack: the limits in force */
    uint32_t dim;                /* unpack of a payload: the task model's dimension */
} chk_t;

#define ENUM_CODE(c) ((c)->bad == SFL_EPARSE ? SFL_EUNSUP : SFL_EINVAL)

/* ---- message types: the shared steps ------------------------------------------ */

/* Stack scratch for packing one message. The generated structs borrow the
 * sfl struct's fields or point at these; data, blk and ptrs are owned and
 * freed once the bytes are out. */
typedef struct wire {
    union {
        ProtobufCMessage base;
        Sfl__V1__JoinRequest join_req;
        Sfl__V1__JoinReply join_reply;
        Sfl__V1__SubscribeRequest subscribe_req;
        Sfl__V1__Task task;
        Sfl__V1__TaskOrWait task_or_wait;
        Sfl__V1__Update update;
        Sfl__V1__UpdatePayload payload;
        Sfl__V1__UpdateAck ack;
        Sfl__V1__HeartbeatRequest heartbeat_req;
        Sfl__V1__HeartbeatReply heartbeat_reply;
        Sfl__V1__CreateJobRequest create_job;
        Sfl__V1__JobRequest job_req;
        Sfl__V1__JobReply job_reply;
        Sfl__V1__StatusReply status;
        Sfl__V1__ListJobsReply job_list;
        Sfl__V1__ListAgentsRequest list_agents_req;
        Sfl__V1__ListAgentsReply agent_list;
        Sfl__V1__ExportModelRequest export_req;
        Sfl__V1__ExportModelReply export;
        Sfl__V1__JobHistoryRequest history_req;
        Sfl__V1__JobHistoryReply history;
        Sfl__V1__RevokeRequest revoke_req;
        Sfl__V1__RevokeReply revoke_reply;
        Sfl__V1__ReleaseRequest release_req;
        Sfl__V1__ReleaseReply release_reply;
        Sfl__V1__FleetReply fleet;
        Sfl__V1__StepAnswer step_answer;
        Sfl__V1__SecAggAnswer sa_answer;
        Sfl__V1__FleetCall fleet_call;
        Sfl__V1__FleetModelRequest fleet_model_req;
        Sfl__V1__FleetModelReply fleet_model_reply;
        Sfl__V1__FleetFoldSpecRequest fleet_fold_spec_req;
        Sfl__V1__FleetFoldSpec fleet_fold_spec;
        Sfl__V1__FleetClaim fleet_claim;
        Sfl__V1__FleetPartial fleet_partial;
        Sfl__V1__FleetPartialReply fleet_partial_reply;
    } pb; /* the message itself, initialised from its type's descriptor */
    Sfl__V1__DatasetSummary ds;
    Sfl__V1__AlgorithmParams pp;
    Sfl__V1__Param param[SFL_PARAMS_MAX];
    Sfl__V1__Param *params[SFL_PARAMS_MAX];
    Sfl__V1__SparseVector sv;
    Sfl__V1__JobSpec spec;
    Sfl__V1__JobStatus job;
    Sfl__V1__SignedTask signed_task;
    Sfl__V1__Wait wait;
    Sfl__V1__VerticalStep vstep;
    char *tags[2][SFL_MSG_MAX_TAGS];
    uint8_t hash[SFL_MSG_HASH_BYTES]; /* BLAKE2b-256 of data, where put needs it */
    uint8_t *data;                    /* owned: the encoded vector */
    void *blk, *ptrs;                 /* owned: list entries, pointers to them */
    void *more[10];                   /* owned: further lists (secure aggregation) */
    Sfl__V1__SecAggRound sa_round;
    Sfl__V1__SecAggStage sa_stage;
    Sfl__V1__SecAggKeys sa_keys;
} wire_t;

/* One message as sfl__msg_pack_msg and sfl__msg_unpack_msg drive it. */
typedef struct msg_type {
    const char *name; /* starts every detail, e.g. "join request" */
    const ProtobufCMessageDescriptor *desc;
    /* Pack: check the sfl struct, then point w->pb at it. NULL check: put
     * checks (or there is nothing to check); NULL put: an empty message. */
    int (*check)(const chk_t *c, const void *m);
    int (*put)(const chk_t *c, const void *m, wire_t *w);
    /* Unpack: copy pb into m with every check; NULL for an empty message. */
    int (*get)(const chk_t *c, void *pb, void *m);
    size_t size; /* of the sfl struct */
    /* Set when unpack returns the struct owned; NULL when it fills the
     * caller's struct in place. Owned structs carry a vector or a list, so
     * their bytes may reach max_message; the others stop at control_max. */
    void (*free)(void *m);
    uint32_t items; /* field counted against max_items before unpacking; 0 none */
    /* Set for a message that is private (the plaintext update): the copies
     * the codec makes on the way, protobuf-c's and the encoded vector,
     * are wiped before they are freed. */
    void (*wipe)(void *pb);
} msg_type_t;


/* ---- tiny helpers -------------------------------------------------------- */

static inline void clear_out(uint8_t **out, size_t *len)
{
    assert(out != NULL && len != NULL);
    *out = NULL;
    *len = 0;
}

static inline const sfl_msg_limits_t *limits(const sfl_msg_limits_t *lim, sfl_msg_limits_t *tmp)
{
    if (lim != NULL)
        return lim;
    sfl_msg_limits_default(tmp);
    return tmp;
}

/* protobuf-c's structs are not const-correct; packing only reads them. */
static inline ProtobufCBinaryData bin(const uint8_t *p, size_t n)
{
    ProtobufCBinaryData b = {n, (uint8_t *)(uintptr_t)p};

    return b;
}

static inline char *str(const char *s)
{
    return (char *)(uintptr_t)s;
}

/* ---- msg.c: allocator, errors, pack / unpack, field helpers, shared steps ------ */

void sfl__msg_free_pb(void *m);
int sfl__msg_fail(const chk_t *c, int code, const char *fmt, ...) SFL_PRINTF(3, 4);
void *sfl__msg_unpack(const ProtobufCMessageDescriptor *d, const chk_t *c, const uint8_t *buf,
                      size_t len, size_t max, int *rc);
int sfl__msg_get_fixed(const chk_t *c, const char *field, const ProtobufCBinaryData *b,
                       uint8_t *dst, size_t n);
int sfl__msg_get_str(const chk_t *c, const char *field, const char *src, char *dst, size_t cap);
int sfl__msg_get_tags(const chk_t *c, const char *field, char *const *src, size_t n,
                      sfl_tags_t *t);
int sfl__msg_get_labels(const chk_t *c, const char *field, const double *src, size_t n,
                        uint32_t *nl, double *dst);
int sfl__msg_get_enc(const chk_t *c, const char *field, int v, sfl_enc_t *out);
int sfl__msg_check_params(const chk_t *c, const sfl_param_list_t *p);
int sfl__msg_get_params(const chk_t *c, const Sfl__V1__AlgorithmParams *p, sfl_param_list_t *o);
int sfl__msg_get_summary(const chk_t *c, const Sfl__V1__DatasetSummary *p,
                         sfl_dataset_summary_t *o);
int sfl__msg_get_sparse(const chk_t *c, const char *field, const Sfl__V1__SparseVector *sv,
                        uint32_t max_dim, uint32_t max_nnz, sfl_spvec_t **out, sfl_enc_t *enc,
                        uint8_t *hash);
void sfl__msg_put_tags(const sfl_tags_t *t, char **ptrs, size_t *n, char ***field);
void sfl__msg_put_summary(const sfl_dataset_summary_t *s, Sfl__V1__DatasetSummary *o);
int sfl__msg_put_sparse(const chk_t *c, const char *field, const sfl_spvec_t *v, sfl_enc_t enc,
                        Sfl__V1__SparseVector *sv, uint8_t **data);
int sfl__msg_check_str(const chk_t *c, const char *field, const char *s, size_t cap,
                       int required);
int sfl__msg_check_tags(const chk_t *c, const char *field, const sfl_tags_t *t);
int sfl__msg_check_labels(const chk_t *c, const char *field, uint32_t n, const double *l);
int sfl__msg_check_finite(const chk_t *c, const char *field, double v);
int sfl__msg_check_enum(const chk_t *c, const char *field, int v, int lo, int hi);
int sfl__msg_check_enc(const chk_t *c, const char *field, sfl_enc_t e);
int sfl__msg_check_id(const chk_t *c, const char *field, uint64_t v);
int sfl__msg_check_bool(const chk_t *c, const char *field, int v);
int sfl__msg_check_summary(const chk_t *c, const sfl_dataset_summary_t *s);
int sfl__msg_pack_msg(const msg_type_t *t, const void *m, uint8_t *hash, uint8_t **out,
                      size_t *len);
void *sfl__msg_unpack_msg(const msg_type_t *t, const uint8_t *buf, size_t len,
                          const sfl_msg_limits_t *lim, uint32_t dim, void *m, int *rc);
int sfl__msg_unpack_in(const msg_type_t *t, const uint8_t *buf, size_t len,
                       const sfl_msg_limits_t *lim, void *m);
int sfl__msg_check_list(const chk_t *c, const char *what, const void *a, uint32_t n, size_t size,
                        int (*check)(const chk_t *, const void *));
int sfl__msg_alloc_list(const chk_t *c, const char *what, uint32_t n, size_t size, wire_t *w);
void *sfl__msg_get_list(const chk_t *c, const char *what, const void *src, size_t n, size_t size,
                        int (*get)(const chk_t *, const void *, size_t, void *), int *rc);

/* ---- msg_coord.c --------------------------------------------------------------- */

void sfl__msg_put_params(const sfl_param_list_t *p, wire_t *w);

/* ---- msg_secagg.c: used by the task and the subscribe message ------------------ */

int sfl__msg_check_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r);
int sfl__msg_put_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r, wire_t *w);
void sfl__msg_sa_round_free(sfl_msg_sa_round_t *r);
int sfl__msg_get_sa_round(const chk_t *c, const Sfl__V1__SecAggRound *p, sfl_msg_sa_round_t **out);
int sfl__msg_get_sa_stage(const chk_t *c, const Sfl__V1__SecAggStage *p, sfl_msg_sa_stage_t *m);

/* ---- msg_vertical.c: used by the subscribe message ----------------------------- */

int sfl__msg_get_vstep(const chk_t *c, const Sfl__V1__VerticalStep *pb, sfl_vstep_t *st);

#endif

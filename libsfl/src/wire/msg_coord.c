/* The Coordinator service's messages: Join, Subscribe, Task / Wait (and the
 * subscribe message that carries them), Update, payload, ack, Heartbeat.
 * (msg_int.h: the steps they go through.) */
#include "msg_int.h"

#include <math.h>
#include <string.h>

#include <sodium.h>

/* ---- Join ------------------------------------------------------------------ */

static int check_join_req(const chk_t *c, const void *p)
{
    const sfl_join_req_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_tags(c, "capabilities", &m->capabilities)) < 0 ||
        (rc = sfl__msg_check_tags(c, "conditions", &m->conditions)) < 0 ||
        (rc = sfl__msg_check_summary(c, &m->dataset)) < 0 ||
        (rc = sfl__msg_check_str(c, "agent_version", m->agent_version, SFL_MSG_NAME_LEN, 0)) < 0)
        return rc;
    if (m->protocol_version == 0)
        return sfl__msg_fail(c, c->bad, "protocol_version missing");
    if (m->cert_proof_len > sizeof(m->cert_proof))
        return sfl__msg_fail(c, c->bad, "cert_proof is %zu bytes, at most %zu",
                             m->cert_proof_len, sizeof(m->cert_proof));
    return 0;
}

static int put_join_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_join_req_t *m = p;
    Sfl__V1__JoinRequest *pb = &w->pb.join_req;

    (void)c;
    pb->identity_key = bin(m->identity_key, SFL_MSG_KEY_BYTES);
    sfl__msg_put_tags(&m->capabilities, w->tags[0], &pb->n_capabilities, &pb->capabilities);
    sfl__msg_put_tags(&m->conditions, w->tags[1], &pb->n_conditions, &pb->conditions);
    sfl__msg_put_summary(&m->dataset, &w->ds);
    pb->dataset = &w->ds;
    pb->protocol_version = m->protocol_version;
    pb->agent_version = str(m->agent_version);
    if (m->has_proof)
        pb->join_proof = bin(m->proof, SFL_MSG_SIG_BYTES);
    pb->cert_proof = bin(m->cert_proof, m->cert_proof_len);
    return 0;
}

static int get_join_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JoinRequest *pb = p;
    sfl_join_req_t *m = out;
    int rc;

    if ((rc = sfl__msg_get_fixed(c, "identity_key", &pb->identity_key, m->identity_key,
                                 SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = sfl__msg_get_tags(c, "capabilities", pb->capabilities, pb->n_capabilities,
                                &m->capabilities)) < 0 ||
        (rc = sfl__msg_get_tags(c, "conditions", pb->conditions, pb->n_conditions,
                                &m->conditions)) < 0 ||
        (rc = sfl__msg_get_summary(c, pb->dataset, &m->dataset)) < 0 ||
        (rc = sfl__msg_get_str(c, "agent_version", pb->agent_version, m->agent_version,
                               SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->protocol_version = pb->protocol_version;
    /* Absent is decoded (the coordinator refuses it with a clear status);
     * present must be a whole signature. */
    if (pb->join_proof.len > 0) {
        if ((rc = sfl__msg_get_fixed(c, "join_proof", &pb->join_proof, m->proof,
                                     SFL_MSG_SIG_BYTES)) < 0)
            return rc;
        m->has_proof = 1;
    }
    if (pb->cert_proof.len > sizeof(m->cert_proof))
        return sfl__msg_fail(c, c->bad, "cert_proof is %zu bytes, at most %zu",
                             pb->cert_proof.len, sizeof(m->cert_proof));
    if (pb->cert_proof.len > 0)
        memcpy(m->cert_proof, pb->cert_proof.data, pb->cert_proof.len);
    m->cert_proof_len = pb->cert_proof.len;
    return check_join_req(c, m);
}

static const msg_type_t join_req_type = {"join request", &sfl__v1__join_request__descriptor,
    check_join_req, put_join_req, get_join_req, sizeof(sfl_join_req_t), NULL, 0, NULL};

int sfl_msg_join_req_pack(const sfl_join_req_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&join_req_type, m, NULL, out, len);
}

int sfl_msg_join_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_join_req_t *m)
{
    return sfl__msg_unpack_in(&join_req_type, buf, len, lim, m);
}

static int check_join_reply(const chk_t *c, const void *p)
{
    const sfl_join_reply_t *m = p;
    int rc = sfl__msg_check_id(c, "agent_id", m->agent_id);

    if (rc < 0)
        return rc;
    if (m->heartbeat_interval_ms == 0)
        return sfl__msg_fail(c, c->bad, "heartbeat_interval_ms missing (0)");
    if (m->protocol_version == 0)
        return sfl__msg_fail(c, c->bad, "protocol_version missing");
    return 0;
}

static int put_join_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_join_reply_t *m = p;
    Sfl__V1__JoinReply *pb = &w->pb.join_reply;

    (void)c;
    pb->agent_id = m->agent_id;
    pb->coordinator_key = bin(m->coordinator_key, SFL_MSG_KEY_BYTES);
    pb->retry_after_ms = m->retry_after_ms;
    pb->heartbeat_interval_ms = m->heartbeat_interval_ms;
    pb->protocol_version = m->protocol_version;
    return 0;
}

static int get_join_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JoinReply *pb = p;
    sfl_join_reply_t *m = out;
    int rc;

    rc = sfl__msg_get_fixed(c, "coordinator_key", &pb->coordinator_key, m->coordinator_key,
                            SFL_MSG_KEY_BYTES);
    if (rc < 0)
        return rc;
    m->agent_id = pb->agent_id;
    m->retry_after_ms = pb->retry_after_ms;
    m->heartbeat_interval_ms = pb->heartbeat_interval_ms;
    m->protocol_version = pb->protocol_version;
    return check_join_reply(c, m);
}

static const msg_type_t join_reply_type = {"join reply", &sfl__v1__join_reply__descriptor,
    check_join_reply, put_join_reply, get_join_reply, sizeof(sfl_join_reply_t), NULL, 0, NULL};

int sfl_msg_join_reply_pack(const sfl_join_reply_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&join_reply_type, m, NULL, out, len);
}

int sfl_msg_join_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_join_reply_t *m)
{
    return sfl__msg_unpack_in(&join_reply_type, buf, len, lim, m);
}

/* ---- Subscribe ------------------------------------------------------------- */

static int check_subscribe_req(const chk_t *c, const void *p)
{
    const sfl_subscribe_req_t *m = p;
    int rc = sfl__msg_check_id(c, "agent_id", m->agent_id);

    return rc < 0 ? rc : sfl__msg_check_tags(c, "conditions", &m->conditions);
}

static int put_subscribe_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_subscribe_req_t *m = p;
    Sfl__V1__SubscribeRequest *pb = &w->pb.subscribe_req;

    (void)c;
    pb->agent_id = m->agent_id;
    sfl__msg_put_tags(&m->conditions, w->tags[0], &pb->n_conditions, &pb->conditions);
    return 0;
}

static int get_subscribe_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__SubscribeRequest *pb = p;
    sfl_subscribe_req_t *m = out;
    int rc;

    rc = sfl__msg_get_tags(c, "conditions", pb->conditions, pb->n_conditions, &m->conditions);
    if (rc < 0)
        return rc;
    m->agent_id = pb->agent_id;
    return check_subscribe_req(c, m);
}

static const msg_type_t subscribe_req_type = {"subscribe request",
    &sfl__v1__subscribe_request__descriptor, check_subscribe_req, put_subscribe_req,
    get_subscribe_req, sizeof(sfl_subscribe_req_t), NULL, 0, NULL};

int sfl_msg_subscribe_req_pack(const sfl_subscribe_req_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&subscribe_req_type, m, NULL, out, len);
}

int sfl_msg_subscribe_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_subscribe_req_t *m)
{
    return sfl__msg_unpack_in(&subscribe_req_type, buf, len, lim, m);
}

/* ---- Task, Wait ---------------------------------------------------------------- */

/* Everything but the model, which pack encodes and unpack decodes. */
static int check_task(const chk_t *c, const void *p)
{
    const sfl_task_t *t = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", t->job_id)) < 0 ||
        (!t->statistics && (rc = sfl__msg_check_id(c, "round", t->round)) < 0) ||
        (rc = sfl__msg_check_bool(c, "statistics", t->statistics)) < 0 ||
        (rc = sfl__msg_check_bool(c, "has_moments", t->has_moments)) < 0 ||
        (rc = sfl__msg_check_str(c, "algorithm", t->algorithm, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = sfl__msg_check_params(c, &t->params)) < 0 ||
        (rc = sfl__msg_check_str(c, "loss", t->loss, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = sfl__msg_check_labels(c, "labels", t->nlabels, t->labels)) < 0 ||
        (rc = sfl__msg_check_str(c, "dictionary", t->dictionary, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_enc(c, "value_encoding", t->value_encoding)) < 0 ||
        (rc = sfl__msg_check_enum(c, "update_mode", (int)t->update_mode, 1, 2)) < 0)
        return rc;
    if (t->dimension == 0)
        return sfl__msg_fail(c, c->bad, "dimension missing (0)");
    if (t->model != NULL && t->max_update_nnz > t->model->dim)
        return sfl__msg_fail(c, c->bad, "max_update_nnz %u exceeds the model dimension %u",
                             t->max_update_nnz, t->model->dim);
    if ((t->secagg != NULL) != (t->update_mode == SFL_UPDATE_MODE_SECURE_AGG))
        return sfl__msg_fail(c, c->bad, "secagg parameters %s update mode %d",
                             t->secagg ? "with" : "missing for", (int)t->update_mode);
    if (t->secagg != NULL && (rc = sfl__msg_check_sa_round(c, t->secagg)) < 0)
        return rc;
    if ((t->rows | t->clients | t->iterations | t->first_iteration | t->round_iterations) != 0 &&
        (t->rows == 0 || t->clients == 0 || t->round_iterations == 0 ||
         t->first_iteration > t->iterations ||
         t->round_iterations > t->iterations - t->first_iteration))
        return sfl__msg_fail(c, c->bad,
                             "vertical round: rows %u, clients %u, iterations %llu + %u of "
                             "%llu",
                             t->rows, t->clients, (unsigned long long)t->first_iteration,
                             t->round_iterations, (unsigned long long)t->iterations);
    /* The statistics round is round 0 of a horizontal job, sealed or
     * secure aggregation, and carries no statistics of its own. */
    if (t->statistics && (t->round != 0 ||
                          (t->update_mode != SFL_UPDATE_MODE_SEALED &&
                           t->update_mode != SFL_UPDATE_MODE_SECURE_AGG) ||
                          t->rows != 0 || t->has_moments))
        return sfl__msg_fail(c, c->bad,
                             "statistics task: round %llu (want 0), update mode %d (want "
                             "sealed or secure aggregation), %s, %s",
                             (unsigned long long)t->round, (int)t->update_mode,
                             t->rows ? "vertical" : "horizontal",
                             t->has_moments ? "moments_hash set" : "no moments_hash");
    if (t->has_moments != (t->standardize_eps != 0) ||
        (t->has_moments && !(isfinite(t->standardize_eps) && t->standardize_eps > 0)))
        return sfl__msg_fail(c, c->bad,
                             "moments_hash %s with standardize_eps %g (want both or neither, "
                             "eps > 0 and finite)",
                             t->has_moments ? "present" : "absent", t->standardize_eps);
    return 0;
}

void sfl__msg_put_params(const sfl_param_list_t *p, wire_t *w)
{
    for (uint32_t i = 0; i < p->n; i++) {
        sfl__v1__param__init(&w->param[i]);
        w->param[i].name = str(p->v[i].name);
        w->param[i].value = p->v[i].value;
        w->params[i] = &w->param[i];
    }
    w->pp.n_values = p->n;
    w->pp.values = w->params;
}

/* The Task without its model: model_hash is the hash of the model's bytes
 * that sfl_msg_task_sign_bytes encoded just before. */
static int put_task(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_task_t *t = p;
    Sfl__V1__Task *pb = &w->pb.task;
    int rc;

    sfl__msg_put_params(&t->params, w);
    pb->job_id = t->job_id;
    pb->round = t->round;
    pb->attempt = t->attempt;
    pb->algorithm = str(t->algorithm);
    pb->params = &w->pp;
    pb->loss = str(t->loss);
    pb->dimension = t->dimension;
    pb->n_labels = t->nlabels;
    pb->labels = (double *)(uintptr_t)t->labels;
    pb->dictionary = str(t->dictionary);
    pb->seed = t->seed;
    pb->value_encoding = (Sfl__V1__ValueEncoding)(t->value_encoding + 1);
    pb->update_mode = (Sfl__V1__UpdateMode)t->update_mode;
    pb->model_hash = bin((uint8_t *)(uintptr_t)t->model_hash, SFL_MSG_HASH_BYTES);
    pb->deadline_ms = t->deadline_ms;
    pb->round_nonce = bin(t->round_nonce, SFL_MSG_NONCE_BYTES);
    pb->round_key = bin(t->round_key, SFL_MSG_KEY_BYTES);
    pb->max_update_nnz = t->max_update_nnz;
    pb->rows = t->rows;
    pb->clients = t->clients;
    pb->iterations = t->iterations;
    pb->first_iteration = t->first_iteration;
    pb->round_iterations = t->round_iterations;
    pb->statistics = t->statistics;
    if (t->has_moments)
        pb->moments_hash = bin(t->moments_hash, SFL_MSG_HASH_BYTES);
    pb->standardize_eps = t->standardize_eps;
    if (t->secagg != NULL) {
        if ((rc = sfl__msg_put_sa_round(c, t->secagg, w)) < 0)
            return rc;
        pb->secagg = &w->sa_round;
    }
    return 0;
}

/* Unpacked by sfl_msg_task_or_wait_unpack, from inside a SignedTask. */
static const msg_type_t task_type = {"task", &sfl__v1__task__descriptor, check_task, put_task, NULL,
    0, NULL, 0, NULL};

/* The model's codec bytes into w (w->sv, w->data) and their hash. */
static int put_model(const chk_t *c, const sfl_task_t *t, wire_t *w, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    int rc = sfl__msg_put_sparse(c, "model", t->model, t->model_encoding, &w->sv, &w->data);

    if (rc == 0)
        crypto_generichash(hash, SFL_MSG_HASH_BYTES, w->sv.data.data, w->sv.data.len, NULL, 0);
    return rc;
}

int sfl_msg_task_sign_bytes(sfl_task_t *t, uint8_t **out, size_t *len)
{
    const chk_t c = {"task", SFL_EINVAL, NULL, 0};
    wire_t w = {.sv = SFL__V1__SPARSE_VECTOR__INIT};
    int rc;

    clear_out(out, len);
    /* model_hash first: the signed bytes carry it, not the model */
    rc = put_model(&c, t, &w, t->model_hash);
    sfl__free(w.data);
    return rc < 0 ? rc : sfl__msg_pack_msg(&task_type, t, NULL, out, len);
}

/* The arguments of sfl_msg_task_pack. */
typedef struct signed_task {
    const sfl_task_t *t;
    const uint8_t *task;
    size_t len;
    const uint8_t *signature;
    const double *moments;
    size_t nmoments;
} signed_task_t;

static int put_signed_task(const chk_t *c, const void *p, wire_t *w)
{
    const signed_task_t *m = p;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int rc;

    if (m->task == NULL || m->len == 0)
        return sfl__msg_fail(c, SFL_EINVAL, "no task bytes (use sfl_msg_task_sign_bytes)");
    if (m->t == NULL)
        return sfl__msg_fail(c, SFL_EINVAL, "no task");
    if ((rc = put_model(c, m->t, w, hash)) < 0)
        return rc;
    if (sodium_memcmp(hash, m->t->model_hash, SFL_MSG_HASH_BYTES) != 0)
        return sfl__msg_fail(c, SFL_EINVAL, "the model is not the one signed (model_hash)");
    w->signed_task.model = &w->sv;
    w->signed_task.task = bin(m->task, m->len);
    w->signed_task.signature = bin(m->signature, SFL_MSG_SIG_BYTES);
    if (m->nmoments > 0) {
        /* w->data holds the model */
        if ((w->more[0] = sfl__mallocarray(m->nmoments, 8)) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu moments", m->nmoments);
        if (sfl_msg_values_encode(m->moments, m->nmoments, 0, w->more[0]) < 0)
            return sfl__msg_fail(c, SFL_EINVAL, "moments: %s", sfl_last_error());
        w->signed_task.moments = bin(w->more[0], m->nmoments * 8);
    }
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_TASK;
    w->pb.task_or_wait.task = &w->signed_task;
    return 0;
}

static const msg_type_t signed_task_type = {"task", &sfl__v1__task_or_wait__descriptor, NULL,
    put_signed_task, NULL, 0, NULL, 0, NULL};

int sfl_msg_task_pack(const sfl_task_t *t, const uint8_t *task, size_t task_len,
                      const uint8_t signature[SFL_MSG_SIG_BYTES], uint8_t **out, size_t *len)
{
    const signed_task_t m = {t, task, task_len, signature, NULL, 0};

    return sfl__msg_pack_msg(&signed_task_type, &m, NULL, out, len);
}

int sfl_msg_task_pack_moments(const sfl_task_t *t, const uint8_t *task, size_t task_len,
                              const uint8_t signature[SFL_MSG_SIG_BYTES],
                              const double *moments, size_t n, uint8_t **out, size_t *len)
{
    const signed_task_t m = {t, task, task_len, signature, moments, n};

    if (n > 0 && moments == NULL) {
        clear_out(out, len);
        return sfl__fail(SFL_EINVAL, "task: NULL moments");
    }
    return sfl__msg_pack_msg(&signed_task_type, &m, NULL, out, len);
}

void sfl_msg_moments_hash(const double *moments, size_t n, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    crypto_generichash_state st;

    /* the wire bytes, hashed a value at a time: no copy of the vector */
    crypto_generichash_init(&st, NULL, 0, SFL_MSG_HASH_BYTES);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[8];
        uint64_t u;

        memcpy(&u, &moments[i], 8);
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)(u >> (8 * k));
        crypto_generichash_update(&st, b, sizeof(b));
    }
    crypto_generichash_final(&st, hash, SFL_MSG_HASH_BYTES);
}

static int check_wait(const chk_t *c, const void *p)
{
    const sfl_wait_t *w = p;

    if (w->retry_after_ms == 0)
        return sfl__msg_fail(c, c->bad, "retry_after_ms missing (0)");
    return sfl__msg_check_str(c, "reason", w->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_wait(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_wait_t *m = p;

    (void)c;
    w->wait.retry_after_ms = m->retry_after_ms;
    w->wait.reason = str(m->reason);
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_WAIT;
    w->pb.task_or_wait.wait = &w->wait;
    return 0;
}

static const msg_type_t wait_type = {"wait", &sfl__v1__task_or_wait__descriptor, check_wait,
    put_wait, NULL, 0, NULL, 0, NULL};

int sfl_msg_wait_pack(const sfl_wait_t *w, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&wait_type, w, NULL, out, len);
}

void sfl_msg_task_free(sfl_task_t *t)
{
    if (t == NULL)
        return;
    sfl_spvec_free(t->model);
    sfl__msg_sa_round_free(t->secagg);
    sfl__free(t->signed_bytes);
    sfl__free(t->moments);
    sfl__free(t);
}

/* The inner Task of a SignedTask whose bytes are already in t->signed_bytes,
 * with the model sv beside them (SignedTask.model; NULL: inside the Task, as
 * coordinators before that field sent it). Not through sfl__msg_unpack_msg:
 * the bytes are the envelope's, the struct is already allocated, and the
 * model is decoded after the rest of the envelope is gone. */
static int get_task(const chk_t *c, const sfl_msg_limits_t *lim, sfl_task_t *t,
                    const Sfl__V1__SparseVector *sv)
{
    Sfl__V1__Task *pb = NULL;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int v, rc;

    pb = sfl__msg_unpack(task_type.desc, c, t->signed_bytes, t->signed_len, lim->max_message, &rc);
    if (pb == NULL)
        goto out;
    t->job_id = pb->job_id;
    t->round = pb->round;
    t->attempt = pb->attempt;
    t->dimension = pb->dimension;
    t->seed = pb->seed;
    t->deadline_ms = pb->deadline_ms;
    t->max_update_nnz = pb->max_update_nnz;
    t->rows = pb->rows;
    t->clients = pb->clients;
    t->iterations = pb->iterations;
    t->first_iteration = pb->first_iteration;
    t->round_iterations = pb->round_iterations;
    t->statistics = pb->statistics ? 1 : 0;
    t->standardize_eps = pb->standardize_eps;
    if (pb->moments_hash.len > 0) {
        t->has_moments = 1;
        if ((rc = sfl__msg_get_fixed(c, "moments_hash", &pb->moments_hash, t->moments_hash,
                                     SFL_MSG_HASH_BYTES)) < 0)
            goto out;
    }
    v = (int)pb->update_mode;
    if ((rc = sfl__msg_get_str(c, "algorithm", pb->algorithm, t->algorithm, SFL_MSG_NAME_LEN)) <
            0 ||
        (rc = sfl__msg_get_params(c, pb->params, &t->params)) < 0 ||
        (rc = sfl__msg_get_str(c, "loss", pb->loss, t->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_labels(c, "labels", pb->labels, pb->n_labels, &t->nlabels, t->labels)) <
            0 ||
        (rc = sfl__msg_get_str(c, "dictionary", pb->dictionary, t->dictionary, SFL_MSG_NAME_LEN)) <
            0 ||
        (rc = sfl__msg_get_enc(c, "value_encoding", (int)pb->value_encoding, &t->value_encoding)) <
            0 ||
        (rc = sfl__msg_check_enum(c, "update_mode", v, 1, 2)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "model_hash", &pb->model_hash, t->model_hash,
                                 SFL_MSG_HASH_BYTES)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "round_nonce", &pb->round_nonce, t->round_nonce,
                                 SFL_MSG_NONCE_BYTES)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "round_key", &pb->round_key, t->round_key, SFL_MSG_KEY_BYTES)) <
            0)
        goto out;
    t->update_mode = (sfl_update_mode_t)v;
    if (pb->secagg != NULL && (rc = sfl__msg_get_sa_round(c, pb->secagg, &t->secagg)) < 0)
        goto out;
    if (sv != NULL && pb->model != NULL) {
        rc = sfl__msg_fail(c, c->bad, "a model both inside and beside the signed task");
        goto out;
    }
    rc = sfl__msg_get_sparse(c, "model", sv != NULL ? sv : pb->model, lim->max_dim,
                             lim->max_nnz, &t->model, &t->model_encoding, hash);
    if (rc < 0)
        goto out;
    /* The signature covers model_hash, which binds the model to the signed
     * task; checking here lets agents sign model_hash as "the model I
     * trained from" without hashing it themselves. */
    if (memcmp(hash, t->model_hash, SFL_MSG_HASH_BYTES) != 0) {
        rc = sfl__msg_fail(c, c->bad, "model_hash does not match the model");
        goto out;
    }
    rc = check_task(c, t);
out:
    sfl__msg_free_pb(pb);
    return rc;
}

/* SignedTask.moments of a checked task t: exactly SFL_MOMENTS_LEN(dimension)
 * finite float64s whose hash is the signed moments_hash (they travel
 * outside the signature), into t->moments. */
static int get_moments(const chk_t *c, sfl_task_t *t, const uint8_t *b, size_t len)
{
    size_t n = 1 + 2 * (size_t)t->dimension;
    uint8_t h[SFL_MSG_HASH_BYTES];

    if (!t->has_moments)
        return sfl__msg_fail(c, c->bad, "moments without a moments_hash");
    if (len != 8 * n)
        return sfl__msg_fail(c, c->bad, "moments are %zu bytes, want %zu (1 + 2 x %u float64s)",
                             len, 8 * n, t->dimension);
    crypto_generichash(h, sizeof(h), b, len, NULL, 0);
    if (sodium_memcmp(h, t->moments_hash, sizeof(h)) != 0)
        return sfl__msg_fail(c, c->bad, "moments do not match the signed moments_hash");
    if ((t->moments = sfl__mallocarray(n, sizeof(double))) == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the moments");
    if (sfl_msg_values_decode(b, len, n, 0, t->moments) < 0)
        return sfl__msg_fail(c, c->bad, "moments: %s", sfl_last_error());
    return 0;
}

/* Not through sfl__msg_unpack_msg either: one envelope, two outcomes (an owned task
 * or a wait in place), each with its own detail prefix. */
int sfl_msg_task_or_wait_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_task_t **task, sfl_wait_t *wait)
{
    int kind;

    return sfl_msg_sub_unpack(buf, len, lim, task, wait, NULL, NULL, &kind);
}

int sfl_msg_sub_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                       sfl_task_t **task, sfl_wait_t *wait, sfl_vstep_t *step,
                       sfl_msg_sa_stage_t *sa, int *kind)
{
    sfl_msg_limits_t tmp;
    const chk_t cs = {"subscribe message", SFL_EPARSE, limits(lim, &tmp), 0};
    const chk_t ct = {"task", SFL_EPARSE, cs.lim, 0};
    const chk_t cw = {"wait", SFL_EPARSE, cs.lim, 0};
    const chk_t cv = {"step", SFL_EPARSE, cs.lim, 0};
    Sfl__V1__TaskOrWait *pb = NULL;
    Sfl__V1__SparseVector *msv = NULL;
    sfl_task_t *t = NULL;
    uint8_t *mb = NULL;
    size_t mlen = 0;
    int rc;

    assert(task != NULL && wait != NULL && kind != NULL);
    *task = NULL;
    *kind = 0;
    lim = cs.lim;
    pb = sfl__msg_unpack(&sfl__v1__task_or_wait__descriptor, &cs, buf, len, lim->max_message, &rc);
    if (pb == NULL)
        goto out;
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_STEP && pb->step != NULL) {
        if (step == NULL)
            rc = sfl__msg_fail(&cs, SFL_EPARSE, "a vertical step where none is expected");
        else if ((rc = sfl__msg_get_vstep(&cv, pb->step, step)) == 0)
            *kind = 's';
        goto out;
    }
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_SECAGG && pb->secagg != NULL) {
        const chk_t ca = {"secagg stage", SFL_EPARSE, cs.lim, 0};

        if (sa == NULL)
            rc =
                sfl__msg_fail(&cs, SFL_EPARSE, "a secure aggregation stage where none is expected");
        else if ((rc = sfl__msg_get_sa_stage(&ca, pb->secagg, sa)) == 0)
            *kind = 'a';
        goto out;
    }
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_WAIT && pb->wait != NULL) {
        sfl_wait_t w;

        memset(&w, 0, sizeof(w));
        w.retry_after_ms = pb->wait->retry_after_ms;
        if ((rc = sfl__msg_get_str(&cw, "reason", pb->wait->reason, w.reason, SFL_MSG_TEXT_LEN)) <
                0 ||
            (rc = check_wait(&cw, &w)) < 0)
            goto out;
        *wait = w;
        *kind = 'w';
        goto out;
    }
    if (pb->kind_case != SFL__V1__TASK_OR_WAIT__KIND_TASK || pb->task == NULL) {
        rc = sfl__msg_fail(&cs, SFL_EPARSE, "neither task, wait, step nor secagg stage");
        goto out;
    }
    t = sfl__calloc(1, sizeof(*t));
    if (t == NULL) {
        rc = sfl__msg_fail(&ct, SFL_ENOMEM, "no memory");
        goto out;
    }
    rc =
        sfl__msg_get_fixed(&ct, "signature", &pb->task->signature, t->signature, SFL_MSG_SIG_BYTES);
    if (rc < 0)
        goto out;
    if (pb->task->task.len == 0) {
        rc = sfl__msg_fail(&ct, SFL_EPARSE, "signed task is empty");
        goto out;
    }
    /* Keep the signed bytes exactly as received: the agent verifies these,
     * never a re-encoding (see SignedTask in coordinator.proto). protobuf-c
     * allocated them with our allocator as a block of their own (freed field
     * by field in free_unpacked), so they are taken over, not copied. */
    t->signed_bytes = pb->task->task.data;
    t->signed_len = pb->task->task.len;
    pb->task->task.data = NULL;
    pb->task->task.len = 0;
    mb = pb->task->moments.data;
    mlen = pb->task->moments.len;
    pb->task->moments.data = NULL;
    pb->task->moments.len = 0;
    msv = pb->task->model;
    pb->task->model = NULL;
    /* The rest of the envelope goes before the model is decoded, so peak
     * memory is the task bytes plus one copy of the model. */
    sfl__msg_free_pb(pb);
    pb = NULL;
    rc = get_task(&ct, lim, t, msv);
    if (rc < 0)
        goto out;
    if (mlen > 0 && (rc = get_moments(&ct, t, mb, mlen)) < 0)
        goto out;
    *task = t;
    *kind = 't';
    t = NULL;
out:
    sfl__free(mb);
    sfl__msg_free_pb(msv);
    sfl_msg_task_free(t);
    sfl__msg_free_pb(pb);
    return rc;
}

/* ---- Update, payload, ack --------------------------------------------------------- */

static int check_update(const chk_t *c, const void *p)
{
    const sfl_update_t *m = p;
    int rc;

    /* round 0: a statistics round's update */
    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = sfl__msg_check_enum(c, "mode", (int)m->mode, 1, 3)) < 0)
        return rc;
    if (m->sealed_len == 0 || m->sealed == NULL)
        return sfl__msg_fail(c, c->bad, "sealed payload missing");
    return 0;
}

static int put_update(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_update_t *m = p;
    Sfl__V1__Update *pb = &w->pb.update;

    (void)c;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->agent_id = m->agent_id;
    pb->mode = (Sfl__V1__UpdateMode)m->mode;
    pb->sealed = bin(m->sealed, m->sealed_len);
    return 0;
}

static int get_update(const chk_t *c, void *p, void *out)
{
    Sfl__V1__Update *pb = p;
    sfl_update_t *m = out;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->agent_id = pb->agent_id;
    m->mode = (sfl_update_mode_t)pb->mode;
    /* protobuf-c allocated the bytes with our allocator as their own block
     * (freed field by field in free_unpacked), so they can be taken over
     * instead of copied: the sealed update is the one big field here. */
    m->sealed = pb->sealed.data;
    m->sealed_len = pb->sealed.len;
    pb->sealed.data = NULL;
    pb->sealed.len = 0;
    return check_update(c, m);
}

void sfl_msg_update_free(sfl_update_t *m)
{
    if (m != NULL)
        sfl__free(m->sealed);
    sfl__free(m);
}

static void free_update(void *m)
{
    sfl_msg_update_free(m);
}

static const msg_type_t update_type = {"update", &sfl__v1__update__descriptor, check_update,
    put_update, get_update, sizeof(sfl_update_t), free_update, 0, NULL};

int sfl_msg_update_pack(const sfl_update_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&update_type, m, NULL, out, len);
}

int sfl_msg_update_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_update_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&update_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

static int check_payload(const chk_t *c, const void *p)
{
    const sfl_payload_t *m = p;

    int rc;

    if (m->samples == 0)
        return sfl__msg_fail(c, c->bad, "samples missing (0)");
    if ((rc = sfl__msg_check_finite(c, "train_loss", m->train_loss)) < 0 ||
        (rc = sfl__msg_check_finite(c, "eval_accuracy", m->eval_accuracy)) < 0 ||
        (rc = sfl__msg_check_finite(c, "eval_mse", m->eval_mse)) < 0 ||
        (rc = sfl__msg_check_finite(c, "personal_accuracy", m->personal_accuracy)) < 0)
        return rc;
    if (m->eval_accuracy < 0 || m->eval_accuracy > 1)
        return sfl__msg_fail(c, c->bad, "eval_accuracy %g is not in [0, 1]", m->eval_accuracy);
    if (m->personal_accuracy < 0 || m->personal_accuracy > 1)
        return sfl__msg_fail(c, c->bad, "personal_accuracy %g is not in [0, 1]",
                             m->personal_accuracy);
    if (m->eval_mse < 0)
        return sfl__msg_fail(c, c->bad, "eval_mse %g is negative", m->eval_mse);
    if (m->eval_samples == 0 &&
        (m->eval_accuracy != 0 || m->eval_mse != 0 || m->personal_accuracy != 0))
        return sfl__msg_fail(c, c->bad, "eval metrics without eval_samples");
    return 0;
}

static int put_payload(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_payload_t *m = p;
    Sfl__V1__UpdatePayload *pb = &w->pb.payload;

    pb->update = &w->sv;
    pb->samples = m->samples;
    pb->train_loss = m->train_loss;
    pb->eval_samples = m->eval_samples;
    pb->eval_accuracy = m->eval_accuracy;
    pb->eval_mse = m->eval_mse;
    pb->personal_accuracy = m->personal_accuracy;
    return sfl__msg_put_sparse(c, "update", m->update, m->encoding, &w->sv, &w->data);
}

static int get_payload(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__UpdatePayload *pb = p;
    sfl_payload_t *m = out;
    int rc;

    m->samples = pb->samples;
    m->train_loss = pb->train_loss;
    m->eval_samples = pb->eval_samples;
    m->eval_accuracy = pb->eval_accuracy;
    m->eval_mse = pb->eval_mse;
    m->personal_accuracy = pb->personal_accuracy;
    if ((rc = check_payload(c, m)) < 0)
        return rc;
    /* Checked before decoding so a wrong-sized vector is never allocated. */
    if (pb->update != NULL && pb->update->dim != c->dim)
        return sfl__msg_fail(c, SFL_EDIM, "update.dim is %u, the task's model has %u",
                             pb->update->dim, c->dim);
    return sfl__msg_get_sparse(c, "update", pb->update, c->dim, c->lim->max_nnz, &m->update,
                               &m->encoding, NULL);
}

/* The plaintext update is private to its agent: wiped before it is freed. */
void sfl_msg_payload_free(sfl_payload_t *m)
{
    if (m != NULL && m->update != NULL) {
        if (m->update->val != NULL)
            sodium_memzero(m->update->val, m->update->cap * sizeof(double));
        if (m->update->idx != NULL)
            sodium_memzero(m->update->idx, m->update->cap * sizeof(uint32_t));
    }
    if (m != NULL)
        sfl_spvec_free(m->update);
    sfl__free(m);
}

static void wipe_payload_pb(void *p)
{
    Sfl__V1__UpdatePayload *pb = p;

    if (pb->update != NULL && pb->update->data.data != NULL)
        sodium_memzero(pb->update->data.data, pb->update->data.len);
}

static void free_payload(void *m)
{
    sfl_msg_payload_free(m);
}

static const msg_type_t payload_type = {"update payload", &sfl__v1__update_payload__descriptor,
    check_payload, put_payload, get_payload, sizeof(sfl_payload_t), free_payload, 0,
    wipe_payload_pb};

int sfl_msg_payload_pack(const sfl_payload_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&payload_type, m, NULL, out, len);
}

int sfl_msg_payload_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint32_t dim, sfl_payload_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&payload_type, buf, len, lim, dim, NULL, &rc);
    return rc;
}

static int check_ack(const chk_t *c, const void *p)
{
    const sfl_ack_t *m = p;
    int rc = sfl__msg_check_enum(c, "status", (int)m->status, 1, 5);

    return rc < 0 ? rc : sfl__msg_check_str(c, "reason", m->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_ack(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_ack_t *m = p;
    Sfl__V1__UpdateAck *pb = &w->pb.ack;

    (void)c;
    pb->status = (Sfl__V1__AckStatus)m->status;
    pb->reason = str(m->reason);
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    return 0;
}

static int get_ack(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__UpdateAck *pb = p;
    sfl_ack_t *m = out;
    int rc;

    m->status = (sfl_ack_status_t)pb->status;
    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    if ((rc = sfl__msg_get_str(c, "reason", pb->reason, m->reason, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    return check_ack(c, m);
}

static const msg_type_t ack_type = {"update ack", &sfl__v1__update_ack__descriptor, check_ack,
    put_ack, get_ack, sizeof(sfl_ack_t), NULL, 0, NULL};

int sfl_msg_ack_pack(const sfl_ack_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&ack_type, m, NULL, out, len);
}

int sfl_msg_ack_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim, sfl_ack_t *m)
{
    return sfl__msg_unpack_in(&ack_type, buf, len, lim, m);
}

/* ---- Heartbeat ----------------------------------------------------------------- */

static int check_heartbeat_req(const chk_t *c, const void *p)
{
    const sfl_heartbeat_req_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = sfl__msg_check_enum(c, "phase", (int)m->phase, 1, 3)) < 0 ||
        (rc = sfl__msg_check_tags(c, "conditions", &m->conditions)) < 0)
        return rc;
    if (m->progress_permille > 1000)
        return sfl__msg_fail(c, c->bad, "progress_permille %u exceeds 1000", m->progress_permille);
    return 0;
}

static int put_heartbeat_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_heartbeat_req_t *m = p;
    Sfl__V1__HeartbeatRequest *pb = &w->pb.heartbeat_req;

    (void)c;
    pb->agent_id = m->agent_id;
    pb->phase = (Sfl__V1__AgentPhase)m->phase;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->progress_permille = m->progress_permille;
    sfl__msg_put_tags(&m->conditions, w->tags[0], &pb->n_conditions, &pb->conditions);
    return 0;
}

static int get_heartbeat_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__HeartbeatRequest *pb = p;
    sfl_heartbeat_req_t *m = out;
    int rc;

    m->agent_id = pb->agent_id;
    m->phase = (sfl_agent_phase_t)pb->phase;
    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->progress_permille = pb->progress_permille;
    if ((rc = sfl__msg_get_tags(c, "conditions", pb->conditions, pb->n_conditions,
                                &m->conditions)) < 0)
        return rc;
    return check_heartbeat_req(c, m);
}

static const msg_type_t heartbeat_req_type = {"heartbeat", &sfl__v1__heartbeat_request__descriptor,
    check_heartbeat_req, put_heartbeat_req, get_heartbeat_req, sizeof(sfl_heartbeat_req_t), NULL,
    0, NULL};

int sfl_msg_heartbeat_req_pack(const sfl_heartbeat_req_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&heartbeat_req_type, m, NULL, out, len);
}

int sfl_msg_heartbeat_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_heartbeat_req_t *m)
{
    return sfl__msg_unpack_in(&heartbeat_req_type, buf, len, lim, m);
}

static int check_heartbeat_reply(const chk_t *c, const void *p)
{
    const sfl_heartbeat_reply_t *m = p;

    if (m->interval_ms == 0)
        return sfl__msg_fail(c, c->bad, "interval_ms missing (0)");
    return sfl__msg_check_bool(c, "abort", m->abort);
}

static int put_heartbeat_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_heartbeat_reply_t *m = p;
    Sfl__V1__HeartbeatReply *pb = &w->pb.heartbeat_reply;

    (void)c;
    pb->interval_ms = m->interval_ms;
    pb->abort = m->abort;
    pb->deadline_ms = m->deadline_ms;
    return 0;
}

static int get_heartbeat_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__HeartbeatReply *pb = p;
    sfl_heartbeat_reply_t *m = out;

    m->interval_ms = pb->interval_ms;
    m->abort = pb->abort ? 1 : 0;
    m->deadline_ms = pb->deadline_ms;
    return check_heartbeat_reply(c, m);
}

static const msg_type_t heartbeat_reply_type = {"heartbeat reply",
    &sfl__v1__heartbeat_reply__descriptor, check_heartbeat_reply, put_heartbeat_reply,
    get_heartbeat_reply, sizeof(sfl_heartbeat_reply_t), NULL, 0, NULL};

int sfl_msg_heartbeat_reply_pack(const sfl_heartbeat_reply_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&heartbeat_reply_type, m, NULL, out, len);
}

int sfl_msg_heartbeat_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   sfl_heartbeat_reply_t *m)
{
    return sfl__msg_unpack_in(&heartbeat_reply_type, buf, len, lim, m);
}

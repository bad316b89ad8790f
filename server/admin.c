/* The Admin service (docs/protocol.md, "Service Admin"): status, lists,
 * job creation and control, model export, history, certificate revocation.
 * Who may call it was checked when each call's HEADERS arrived. */
#include "coord_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/alloc.h"
#include "sfl/spcodec.h"
#include "sfl/topk.h"
#include "sfl/vec.h"

/* ---- Admin service ---------------------------------------------------------------- */

static void job_status(const job_t *j, sfl_job_status_t *st)
{
    memset(st, 0, sizeof(*st));
    st->job_id = j->id;
    coord_text_copy(st->name, sizeof(st->name), j->spec.name);
    coord_text_copy(st->algorithm, sizeof(st->algorithm), j->spec.algorithm);
    st->state = j->state;
    st->committed_round = j->committed;
    st->rounds = j->spec.rounds;
    st->cohort_size = j->spec.cohort_size;
    st->min_quorum = j->spec.min_quorum;
    coord_text_copy(st->error, sizeof(st->error), j->error);
    st->model_nnz = j->model_nnz;
    st->last_train_loss = j->last.train_loss;
    st->last_samples = j->last.samples;
    st->last_eval_samples = j->last.eval_samples;
    st->last_eval_accuracy = j->last.eval_accuracy;
    st->last_eval_mse = j->last.eval_mse;
    coord_text_copy(st->loss, sizeof(st->loss), j->spec.loss);
    st->round_state = SFL_ROUND_NONE;
    if (j->state != SFL_JOB_RUNNING || !j->ready)
        return;
    st->attempt = j->wire_attempt;
    switch (j->rnd.state) {
    case COORD_ROUND_SELECTING:
    case COORD_ROUND_FAILED: /* about to retry */
        st->round_state = SFL_ROUND_SELECTING;
        coord_text_copy(st->waiting, sizeof(st->waiting), j->waiting);
        return;
    case COORD_ROUND_TRAINING: st->round_state = SFL_ROUND_TRAINING; break;
    case COORD_ROUND_AGGREGATING: st->round_state = SFL_ROUND_AGGREGATING; break;
    case COORD_ROUND_COMMITTED: st->round_state = SFL_ROUND_COMMITTED; break;
    }
    st->selected = j->rnd.nmembers;
    st->accepted = j->rnd.accepted;
    st->deadline_ms = j->deadline_wall;
}

static sfl_job_status_t *all_job_status(const coord_t *co, uint32_t *n)
{
    uint32_t cnt = co->njobs > co->lim.max_items ? co->lim.max_items : (uint32_t)co->njobs;
    sfl_job_status_t *st = sfl__calloc(cnt ? cnt : 1, sizeof(*st));

    *n = 0;
    if (st == NULL)
        return NULL;
    for (uint32_t i = 0; i < cnt; i++)
        job_status(co->jobs[i], &st[i]);
    *n = cnt;
    return st;
}

uint32_t coord_connected_agents(const coord_t *co)
{
    uint32_t n = 0;

    for (size_t i = 0; i < co->nagents; i++)
        n += co->agents[i]->conn != NULL;
    return n;
}

void coord_h_status(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_status_t st;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_status_req_unpack(req, len, &co->lim)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    memset(&st, 0, sizeof(st));
    snprintf(st.version, sizeof(st.version), "sfl-coordinator %s", COORD_VERSION);
    st.started_ms = co->started_ms;
    st.connected_agents = coord_connected_agents(co);
    st.known_agents = (uint32_t)co->nagents;
    st.updates_accepted = co->verdicts[COORD_UPD_ACCEPTED];
    for (int v = 1; v < 5; v++)
        st.updates_rejected += co->verdicts[v];
    st.bytes_in = co->bytes_in;
    st.bytes_out = co->bytes_out;
    st.jobs = all_job_status(co, &st.njobs);
    if (st.jobs == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    rc = sfl_msg_status_pack(&st, &buf, &blen);
    sfl__free(st.jobs);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_list_agents(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_agent_list_t l = {0};
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc, only = 0;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_list_agents_req_unpack(req, len, &co->lim, &only)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    l.agents = sfl__calloc(co->nagents ? co->nagents : 1, sizeof(*l.agents));
    if (l.agents == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (size_t i = 0; i < co->nagents && l.n < co->lim.max_items; i++) {
        const agent_t *a = co->agents[i];
        sfl_agent_info_t *o = &l.agents[l.n];

        if (only && a->conn == NULL)
            continue;
        o->agent_id = a->id;
        coord_text_copy(o->subject, sizeof(o->subject), a->name);
        o->connected = a->conn != NULL;
        o->capabilities = a->caps;
        o->conditions = a->conds;
        o->dataset = a->ds;
        o->last_seen_ms = a->last_seen_ms;
        o->phase = a->joined ? a->phase : 0;
        o->job_id = a->hb_job;
        o->round = a->hb_round;
        o->progress_permille = a->progress > 1000 ? 1000 : a->progress;
        o->updates_accepted = a->accepted;
        coord_text_copy(o->agent_version, sizeof(o->agent_version), a->version);
        l.n++;
    }
    rc = sfl_msg_agent_list_pack(&l, &buf, &blen);
    sfl__free(l.agents);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_list_jobs(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_job_list_t l = {0};
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_list_jobs_req_unpack(req, len, &co->lim)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    l.jobs = all_job_status(co, &l.n);
    if (l.jobs == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    rc = sfl_msg_job_list_pack(&l, &buf, &blen);
    sfl__free(l.jobs);
    coord_reply_packed(call, rc, buf, blen);
}

static void reply_job(sfl_grpc_call_t *call, const job_t *j)
{
    sfl_job_status_t st;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    job_status(j, &st);
    rc = sfl_msg_job_reply_pack(&st, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_create_job(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    sfl_job_spec_t spec;
    job_t *j = NULL;
    char q[300];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_create_job_unpack(req, len, &co->lim, &spec)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((rc = coord_job_create(co, &spec, &j)) < 0) {
        if (rc == SFL_EINVAL || rc == SFL_ELIMIT) {
            coord_fail_call(call, SFL_GRPC_STATUS_INVALID_ARGUMENT, "%s", sfl_last_error());
        } else if (rc == -ENOSPC) {
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", sfl_last_error());
        } else {
            coord_log(COORD_LOG_ERROR, "job_create_failed", "error=%s",
                      coord_log_quote(sfl_last_error(), q, sizeof(q)));
            coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot create the job: %s",
                      sfl_last_error());
        }
        return;
    }
    coord_log(COORD_LOG_INFO, "admin", "op=create_job job=%llu by=%s", (unsigned long long)j->id,
              coord_log_quote(k->peer.cn, q, sizeof(q)));
    coord_schedule(co);
    reply_job(call, j);
}

typedef enum { OP_PAUSE, OP_RESUME, OP_CANCEL } job_op_t;

static void job_op(sfl_grpc_call_t *call, const uint8_t *req, size_t len, conn_t *k, job_op_t op)
{
    static const char *const names[] = {"pause_job", "resume_job", "cancel_job"};
    coord_t *co = k->co;
    uint64_t id = 0;
    job_t *j;
    char q[300];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_job_req_unpack(req, len, &co->lim, &id)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((j = coord_job_find(co, id)) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no job %llu", (unsigned long long)id);
        return;
    }
    switch (op) {
    case OP_PAUSE:
        if (j->state != SFL_JOB_RUNNING && j->state != SFL_JOB_PENDING) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "job %llu is %s",
                      (unsigned long long)id, sfl_msg_job_state_name(j->state));
            return;
        }
        coord_abandon(j, "paused by operator");
        coord_set_job_state(j, SFL_JOB_PAUSED);
        break;
    case OP_RESUME:
        if ((j->state != SFL_JOB_PAUSED && j->state != SFL_JOB_PENDING) || !j->ready) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "job %llu is %s",
                      (unsigned long long)id, sfl_msg_job_state_name(j->state));
            return;
        }
        j->error[0] = '\0';
        if (!j->busy)
            coord_reset_round(j);
        coord_set_job_state(j, SFL_JOB_RUNNING);
        break;
    case OP_CANCEL:
        if (coord_job_final(j)) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "job %llu is already %s",
                      (unsigned long long)id, sfl_msg_job_state_name(j->state));
            return;
        }
        coord_abandon(j, "cancelled by operator");
        coord_set_job_state(j, SFL_JOB_CANCELLED);
        break;
    }
    coord_log(COORD_LOG_INFO, "admin", "op=%s job=%llu by=%s", names[op], (unsigned long long)id,
              coord_log_quote(k->peer.cn, q, sizeof(q)));
    coord_schedule(co);
    reply_job(call, j);
}

void coord_h_pause(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    job_op(call, req, len, ud, OP_PAUSE);
}

void coord_h_resume(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    job_op(call, req, len, ud, OP_RESUME);
}

void coord_h_cancel(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    job_op(call, req, len, ud, OP_CANCEL);
}

/* The exported model of a checkpoint: model_of the broadcast state. */
static int export_model(const job_t *j, const uint8_t *ck, size_t cklen, sfl_spvec_t **out)
{
    const coord_job_t *m = &j->model;
    size_t dim = m->prob.dim;
    sfl_spvec_t *v = NULL;
    double *state = NULL, *model = NULL;
    sfl_topk_ws_t ws;
    int rc;

    *out = NULL;
    sfl_topk_ws_init(&ws);
    if ((rc = sfl_spcodec_decode(ck, cklen, (uint32_t)dim, (uint32_t)dim, &v)) < 0)
        goto out;
    if (m->algo->model_of == NULL) {
        *out = v;
        v = NULL;
        goto out;
    }
    state = sfl__calloc(dim, sizeof(double));
    model = sfl__calloc(dim, sizeof(double));
    if (state == NULL || model == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    sfl_spvec_scatter(v, state);
    if ((rc = m->algo->model_of(&m->params, &m->prob, state, model, &ws)) < 0 ||
        (rc = sfl_spvec_from_dense(v, model)) < 0)
        goto out;
    *out = v;
    v = NULL;
out:
    sfl_topk_ws_close(&ws);
    sfl__free(state);
    sfl__free(model);
    sfl_spvec_free(v);
    return rc;
}

void coord_h_export(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    uint64_t id = 0, round = 0;
    uint8_t *ck = NULL, hash[COORD_HASH_BYTES], *buf = NULL;
    size_t cklen = 0, blen = 0;
    int64_t got = 0;
    sfl_export_t e;
    job_t *j;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_export_req_unpack(req, len, &co->lim, &id, &round)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((j = coord_job_find(co, id)) == NULL || !j->ready) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no job %llu", (unsigned long long)id);
        return;
    }
    if (j->committed == 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                        "job %llu has no committed round yet",
                  (unsigned long long)id);
        return;
    }
    if (round == 0)
        rc = coord_store_checkpoint_latest(co->store, (int64_t)id, j->model.prob.dim * 13 + 64,
                                           &got, &ck, &cklen, hash);
    else {
        got = (int64_t)round;
        rc = coord_store_checkpoint_get(co->store, (int64_t)id, (int64_t)round,
                                        j->model.prob.dim * 13 + 64, &ck, &cklen, hash);
    }
    if (rc == SFL_ENOTFOUND) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "job %llu has no checkpoint of round %llu",
                  (unsigned long long)id, (unsigned long long)round);
        return;
    }
    memset(&e, 0, sizeof(e));
    if (rc == 0)
        rc = export_model(j, ck, cklen, &e.model);
    coord_store_free(ck);
    if (rc < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_INTERNAL, "cannot read the checkpoint: %s",
                  sfl_last_error());
        return;
    }
    e.job_id = id;
    e.round = (uint64_t)got;
    snprintf(e.algorithm, sizeof(e.algorithm), "%s", j->spec.algorithm);
    snprintf(e.loss, sizeof(e.loss), "%s", j->spec.loss);
    e.dimension = j->spec.dimension;
    e.nlabels = j->spec.nlabels;
    memcpy(e.labels, j->spec.labels, sizeof(e.labels));
    rc = sfl_msg_export_pack(&e, &buf, &blen);
    sfl_spvec_free(e.model);
    coord_reply_packed(call, rc, buf, blen);
}

/* Rounds per JobHistory reply: ~100 bytes each, so a page stays far below
 * any message limit; sflctl asks again for the rest. */
#define HISTORY_PAGE 1000

void coord_h_history(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;
    uint64_t id = 0, after = 0;
    coord_srow_history_t *h = NULL;
    sfl_job_history_t r;
    uint8_t *buf = NULL;
    size_t n = 0, blen = 0, page = HISTORY_PAGE;
    job_t *j;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_history_req_unpack(req, len, &co->lim, &id, &after)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((j = coord_job_find(co, id)) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no job %llu", (unsigned long long)id);
        return;
    }
    if (page > co->lim.max_items)
        page = co->lim.max_items;
    if (after > INT64_MAX)
        after = INT64_MAX;
    /* One more than a page tells whether another page follows. */
    if ((rc = coord_store_history(co->store, (int64_t)id, (int64_t)after, page + 1, &h, &n)) <
        0) {
        coord_fail_call(call, SFL_GRPC_STATUS_INTERNAL, "cannot read the history: %s",
                  sfl_last_error());
        return;
    }
    memset(&r, 0, sizeof(r));
    r.job_id = id;
    snprintf(r.loss, sizeof(r.loss), "%s", j->spec.loss);
    r.more = n > page;
    r.n = (uint32_t)(n > page ? page : n);
    r.rounds = r.n ? sfl__calloc(r.n, sizeof(*r.rounds)) : NULL;
    if (r.n && r.rounds == NULL) {
        coord_store_free(h);
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "no memory for the history");
        return;
    }
    for (uint32_t i = 0; i < r.n; i++) {
        sfl_round_summary_t *o = &r.rounds[i];

        o->round = (uint64_t)h[i].round;
        o->attempt = (uint32_t)(h[i].attempt - 1); /* the wire counts from 0 */
        o->opened_ms = h[i].opened_ms;
        o->committed_ms = h[i].committed_ms;
        o->selected = h[i].selected;
        o->accepted = h[i].accepted;
        o->samples = h[i].m.samples;
        o->train_loss = h[i].m.train_loss;
        o->eval_samples = h[i].m.eval_samples;
        o->eval_accuracy = h[i].m.eval_accuracy;
        o->eval_mse = h[i].m.eval_mse;
        o->model_nnz = h[i].m.model_nnz;
        o->bytes_up = h[i].bytes_up;
        o->bytes_down = h[i].m.bytes_down;
    }
    coord_store_free(h);
    rc = sfl_msg_history_pack(&r, &buf, &blen);
    sfl__free(r.rounds);
    coord_reply_packed(call, rc, buf, blen);
}

/* RevokeCertificate: recorded in the store first, then refused here (the
 * sorted list the connect check searches) and its connections closed. */
void coord_h_revoke(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    conn_t *k = ud, *c, *next;
    coord_t *co = k->co;
    sfl_revoke_t m, r;
    agent_t *a = NULL;
    uint8_t *buf = NULL;
    size_t blen = 0, pos;
    char q[300];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_revoke_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    memset(&r, 0, sizeof(r));
    r.has_fingerprint = 1;
    if (!m.has_fingerprint) {
        if ((a = coord_agent_by_name(co, m.agent)) == NULL) {
            coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no agent named %s", m.agent);
            return;
        }
        memcpy(r.fingerprint, a->fpr, sizeof(r.fingerprint));
    } else {
        memcpy(r.fingerprint, m.fingerprint, sizeof(r.fingerprint));
        for (size_t i = 0; i < co->nagents && a == NULL; i++)
            if (memcmp(co->agents[i]->fpr, r.fingerprint, sizeof(r.fingerprint)) == 0)
                a = co->agents[i];
    }
    if (a != NULL)
        snprintf(r.agent, sizeof(r.agent), "%.63s", a->name);
    if (!coord_cert_revoked(co, r.fingerprint)) {
        void *grown = sfl__reallocarray(co->revoked, co->nrevoked + 1, 32);

        if (grown == NULL) {
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        co->revoked = grown;
        rc = coord_store_cert_revoke(co->store, r.fingerprint, r.agent, coord_wall_ms());
        if (rc < 0) {
            coord_log(COORD_LOG_ERROR, "store_error", "error=%s",
                      coord_log_quote(sfl_last_error(), q, sizeof(q)));
            coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE,
                            "cannot record the revocation; retry");
            return;
        }
        for (pos = 0; pos < co->nrevoked && memcmp(co->revoked[pos], r.fingerprint, 32) < 0;
             pos++)
            ;
        memmove(co->revoked + pos + 1, co->revoked + pos, (co->nrevoked - pos) * 32);
        memcpy(co->revoked[pos], r.fingerprint, 32);
        co->nrevoked++;
    }
    for (c = co->conns; c != NULL; c = next) {
        next = c->next;
        if (c != k && c->has_peer && c->c != NULL &&
            memcmp(c->peer.sha256, r.fingerprint, sizeof(r.fingerprint)) == 0) {
            sfl_conn_abort(c->c);
            r.closed++;
        }
    }
    {
        char hex[65];

        sodium_bin2hex(hex, sizeof(hex), r.fingerprint, sizeof(r.fingerprint));
        coord_log(COORD_LOG_WARN, "cert_revoked", "fingerprint=%s agent=%s closed=%u", hex,
                  r.agent[0] ? coord_log_quote(r.agent, q, sizeof(q)) : "-", r.closed);
    }
    rc = sfl_msg_revoke_reply_pack(&r, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

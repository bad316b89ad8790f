/* The Admin service (docs/protocol.md, "Service Admin"): status, lists,
 * job creation and control, model export, history, certificate revocation.
 * Who may call it was checked when each call's HEADERS arrived. */
#include "coord_int.h"
#include "round/jobs.h"
#include "round/driver.h"
#include "round/quarantine.h"
#include "round/suspect.h"
#include "service/admin.h"
#include "service/fleetsvc.h"
#include "round/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/topk.h"
#include "sfl/core/vec.h"

/* ---- Admin service ---------------------------------------------------------------- */

/* A mode-2 job's suspects (suspect.c) after the waiting text: who is
 * drawn last, and why. */
static void suspects_text(const coord_job_t *j, sfl_job_status_t *st)
{
    char list[SFL_MSG_TEXT_LEN];
    size_t o = strlen(st->waiting);

    if (j->nsus == 0)
        return;
    coord_suspect_text(j, NULL, 0, list, sizeof(list));
    snprintf(st->waiting + o, sizeof(st->waiting) - o,
             "%ssuspects of unattributable secure sums, drawn last: %s", o ? "; " : "", list);
}

static void job_status(const coord_job_t *j, sfl_job_status_t *st)
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
    st->last = j->last;
    j->shape->status(j, st);
    coord_text_copy(st->loss, sizeof(st->loss), j->spec.loss);
    coord_text_copy(st->description, sizeof(st->description), j->spec.description);
    st->quarantined = (uint32_t)j->nquar;
    coord_quarantine_job_text(j, st->quarantine, sizeof(st->quarantine));
    if (j->spec.standardize) {
        st->statistics = j->moments != NULL ? 2 : 1;
        st->statistics_rows = j->moments_rows;
        st->statistics_agents = j->moments_agents;
    }
    st->round_state = SFL_ROUND_NONE;
    if (j->state != SFL_JOB_RUNNING || !j->ready)
        return;
    st->attempt = j->wire_attempt;
    switch (j->rnd.state) {
    case COORD_ROUND_SELECTING:
    case COORD_ROUND_FAILED: /* about to retry */
        st->round_state = SFL_ROUND_SELECTING;
        coord_text_copy(st->waiting, sizeof(st->waiting), j->waiting);
        suspects_text(j, st);
        return;
    case COORD_ROUND_TRAINING: st->round_state = SFL_ROUND_TRAINING; break;
    case COORD_ROUND_AGGREGATING: st->round_state = SFL_ROUND_AGGREGATING; break;
    case COORD_ROUND_COMMITTED: st->round_state = SFL_ROUND_COMMITTED; break;
    }
    st->selected = j->rnd.nmembers;
    st->accepted = j->rnd.accepted;
    st->deadline_ms = j->deadline_wall;
    suspects_text(j, st);
}

void coord_job_status(const coord_job_t *j, sfl_job_status_t *st)
{
    job_status(j, st);
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
    coord_conn_t *k = ud;
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
    coord_conn_t *k = ud;
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
        const coord_agent_t *a = co->agents[i];
        sfl_agent_info_t *o = &l.agents[l.n];

        if (only && a->conn == NULL)
            continue;
        o->agent_id = a->id;
        coord_text_copy(o->subject, sizeof(o->subject), a->name);
        o->connected = a->conn != NULL;
        o->capabilities = a->caps;
        o->conditions = a->conds;
        (void)coord_agent_summary(a, &o->dataset);
        o->last_seen_ms = a->last_seen_ms;
        o->phase = a->joined ? a->phase : 0;
        o->job_id = a->hb_job;
        o->round = a->hb_round;
        o->progress_permille = a->progress > 1000 ? 1000 : a->progress;
        o->updates_accepted = a->accepted;
        coord_text_copy(o->agent_version, sizeof(o->agent_version), a->version);
        coord_quarantine_text(co, a->id, o->quarantine, sizeof(o->quarantine));
        l.n++;
    }
    rc = sfl_msg_agent_list_pack(&l, &buf, &blen);
    sfl__free(l.agents);
    coord_reply_packed(call, rc, buf, blen);
}

void coord_h_list_jobs(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
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

static void reply_job(sfl_grpc_call_t *call, const coord_job_t *j)
{
    sfl_job_status_t st;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    job_status(j, &st);
    rc = sfl_msg_job_reply_pack(&st, &buf, &blen);
    coord_reply_packed(call, rc, buf, blen);
}

/* The job is recorded (or refused by the store): the answer. */
static void job_created(coord_t *co, coord_job_t *j, int rc, const char *error, void *ud)
{
    sfl_grpc_call_t *call = ud;
    char q[300];

    if (j == NULL) {
        coord_log(COORD_LOG_ERROR, "job_create_failed", "error=%s",
                  coord_log_quote(error, q, sizeof(q)));
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot create the job: %s", error);
        return;
    }
    (void)co;
    (void)rc;
    reply_job(call, j);
}

void coord_h_create_job(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_job_spec_t spec;
    char q[300], p[120];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_create_job_unpack(req, len, &co->lim, &spec)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    coord_log(COORD_LOG_INFO, "admin", "op=create_job name=%s by=%s",
              coord_log_quote(spec.name, q, sizeof(q)), coord_log_quote(k->peer.cn, p, sizeof(p)));
    if ((rc = coord_job_create(co, &spec, job_created, call)) < 0) {
        if (rc == SFL_EINVAL || rc == SFL_ELIMIT)
            coord_fail_call(call, SFL_GRPC_STATUS_INVALID_ARGUMENT, "%s", sfl_last_error());
        else if (rc == -ENOSPC)
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", sfl_last_error());
        else
            coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot create the job: %s",
                            sfl_last_error());
    }
}

typedef enum { OP_PAUSE, OP_RESUME, OP_CANCEL } job_op_t;

/* A pause, resume or cancel is durable: the answer (the job as it is now). */
static void job_state_recorded(coord_t *co, uint64_t id, int rc, const char *error, void *ud)
{
    sfl_grpc_call_t *call = ud;
    coord_job_t *j = coord_job_find(co, id);

    if (rc < 0 || j == NULL)
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE,
                        "the change is in effect but not recorded (a restart undoes it): %s",
                        error);
    else
        reply_job(call, j);
}

static void job_op(sfl_grpc_call_t *call, const uint8_t *req, size_t len, coord_conn_t *k, job_op_t op)
{
    static const char *const names[] = {"pause_job", "resume_job", "cancel_job"};
    static const sfl_job_state_t states[] = {SFL_JOB_PAUSED, SFL_JOB_RUNNING, SFL_JOB_CANCELLED};
    coord_t *co = k->co;
    uint64_t id = 0;
    coord_job_t *j;
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
        break;
    case OP_CANCEL:
        if (coord_job_final(j)) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "job %llu is already %s",
                      (unsigned long long)id, sfl_msg_job_state_name(j->state));
            return;
        }
        coord_abandon(j, "cancelled by operator");
        break;
    }
    coord_log(COORD_LOG_INFO, "admin", "op=%s job=%llu by=%s", names[op], (unsigned long long)id,
              coord_log_quote(k->peer.cn, q, sizeof(q)));
    /* In effect now; answered once recorded (job_state_recorded). */
    coord_set_job_state(j, states[op], job_state_recorded, call);
    coord_schedule(co);
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
static int export_model(const coord_job_t *j, const uint8_t *ck, size_t cklen, sfl_spvec_t **out)
{
    const coord_model_t *m = &j->model;
    size_t dim = m->prob.dim;
    sfl_spvec_t *v = NULL;
    double *state = NULL, *model = NULL;
    sfl_topk_ws_t ws;
    int rc;

    *out = NULL;
    sfl_topk_ws_init(&ws);
    if ((rc = sfl_spcodec_decode(ck, cklen, (uint32_t)m->dim, (uint32_t)m->dim, &v)) < 0)
        goto out;
    if (m->v != NULL) {
        /* [x, b]: the model is x */
        sfl_spvec_t *x = NULL;

        if ((state = sfl__calloc(m->dim, sizeof(double))) == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        sfl_spvec_scatter(v, state);
        if ((rc = sfl_spvec_new((uint32_t)dim, 0, &x)) < 0 ||
            (rc = sfl_spvec_from_dense(x, state)) < 0) {
            sfl_spvec_free(x);
            goto out;
        }
        *out = x;
        goto out;
    }
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

/* "; kept: rounds 5, 6, 7" (at most a few, then "..."), or "" */
static void kept_rounds(coord_t *co, uint64_t job, char *out, size_t cap)
{
    int64_t *r = NULL;
    size_t n = 0, o;

    out[0] = '\0';
    if (coord_store_checkpoint_rounds(co->store, (int64_t)job, &r, &n) < 0 || n == 0) {
        coord_store_free(r);
        return;
    }
    o = (size_t)snprintf(out, cap, "; kept: round%s", n > 1 ? "s" : "");
    for (size_t i = 0; i < n && o < cap; i++) {
        if (i == 8 && n > 9) {
            o += (size_t)snprintf(out + o, cap - o, " ... %lld", (long long)r[n - 1]);
            break;
        }
        o += (size_t)snprintf(out + o, cap - o, "%s %lld", i ? "," : "", (long long)r[i]);
    }
    coord_store_free(r);
}

void coord_h_export(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    uint64_t id = 0, round = 0;
    uint8_t *ck = NULL, hash[COORD_HASH_BYTES], *buf = NULL;
    size_t cklen = 0, blen = 0;
    int64_t got = 0;
    sfl_export_t e;
    coord_job_t *j;
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
        rc = coord_store_checkpoint_latest(co->store, (int64_t)id, j->model.dim * 13 + 64,
                                           &got, &ck, &cklen, hash);
    else {
        got = (int64_t)round;
        rc = coord_store_checkpoint_get(co->store, (int64_t)id, (int64_t)round,
                                        j->model.dim * 13 + 64, &ck, &cklen, hash);
    }
    if (rc == SFL_ENOTFOUND) {
        char kept[160];

        kept_rounds(co, id, kept, sizeof(kept));
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND,
                        round > j->committed
                            ? "job %llu has no checkpoint of round %llu: not committed (the "
                              "last committed is %llu)%s"
                            : "job %llu has no checkpoint of round %llu: not kept (keep_checkpoints "
                              "= %llu in coordinator.ini keeps the last rounds' only; 0 keeps "
                              "all)%s",
                        (unsigned long long)id, (unsigned long long)round,
                        round > j->committed ? (unsigned long long)j->committed
                                             : (unsigned long long)co->cfg.keep_checkpoints,
                        kept);
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
    /* the model is over standardised features: its transform goes with it */
    e.moments = j->moments;
    e.standardize_eps = j->moments ? coord_job_std_eps(&j->spec) : 0;
    rc = sfl_msg_export_pack(&e, &buf, &blen);
    sfl_spvec_free(e.model);
    coord_reply_packed(call, rc, buf, blen);
}

/* Rounds per JobHistory reply: ~100 bytes each, so a page stays far below
 * any message limit; sflctl asks again for the rest. */
#define HISTORY_PAGE 1000

void coord_h_history(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    uint64_t id = 0, after = 0;
    coord_history_row_t *h = NULL;
    sfl_job_history_t r;
    uint8_t *buf = NULL;
    size_t n = 0, blen = 0, page = HISTORY_PAGE;
    coord_job_t *j;
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
    snprintf(r.algorithm, sizeof(r.algorithm), "%s", j->spec.algorithm);
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
        o->bytes_up = h[i].bytes_up;
        o->m = h[i].m;
    }
    coord_store_free(h);
    rc = sfl_msg_history_pack(&r, &buf, &blen);
    sfl__free(r.rounds);
    coord_reply_packed(call, rc, buf, blen);
}

/* RevokeCertificate: refused at once here (the sorted list the connect
 * check searches) and its connections closed, then recorded; the answer
 * waits for the record. */
typedef struct {
    coord_write_op_t op;
    sfl_grpc_call_t *call;
    sfl_revoke_t r;       /* the answer */
    int64_t at_ms;
} revoke_op_t;

static int revoke_run(coord_store_t *s, coord_write_op_t *op)
{
    revoke_op_t *o = (revoke_op_t *)op;

    return coord_store_cert_revoke(s, o->r.fingerprint, o->r.agent, o->at_ms);
}

static void revoke_done(coord_write_op_t *op)
{
    revoke_op_t *o = (revoke_op_t *)op;
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[300];
    int rc;

    if (op->rc < 0 || op->abandoned) {
        if (!op->abandoned)
            coord_log(COORD_LOG_ERROR, "store_error", "op=revoke error=%s",
                      coord_log_quote(op->error, q, sizeof(q)));
        coord_fail_call(o->call, SFL_GRPC_STATUS_UNAVAILABLE,
                        "the certificate is refused until a restart but the revocation is not "
                        "recorded; retry");
    } else {
        rc = sfl_msg_revoke_reply_pack(&o->r, &buf, &blen);
        coord_reply_packed(o->call, rc, buf, blen);
    }
    sfl__free(o);
}

/* Self-protection (docs/security.md): the coordinator's own certificate
 * and the one the call comes with are never revoked. The coordinator does
 * not know every admin certificate the CA has issued, but it need not: a
 * revocation always comes with an admin certificate, and that one is never
 * the one revoked, so at least one admin certificate always remains. Answers
 * the call and returns < 0 on refusal. */
static int revoke_refused(coord_t *co, const coord_conn_t *k, sfl_grpc_call_t *call,
                          const uint8_t fpr[32])
{
    uint8_t own[32];
    char hex[65];

    sodium_bin2hex(hex, sizeof(hex), fpr, 32);
    if (k->has_peer && sodium_memcmp(k->peer.sha256, fpr, 32) == 0) {
        coord_log(COORD_LOG_WARN, "revoke_refused", "fingerprint=%s reason=caller", hex);
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                        "certificate %s is this call's own certificate (admin %s): revoking it "
                        "would lock this admin out; revoke it with another admin certificate",
                        hex, k->peer.cn);
        return -1;
    }
    if (co->tls != NULL && sfl_tls_cert_sha256(co->tls, own) == 0 &&
        sodium_memcmp(own, fpr, 32) == 0) {
        coord_log(COORD_LOG_WARN, "revoke_refused", "fingerprint=%s reason=coordinator", hex);
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                        "certificate %s is the coordinator's own certificate: it cannot revoke "
                        "itself; replace it (sfl-pki --force coordinator) and restart the "
                        "coordinator (docs/operations.md)",
                        hex);
        return -1;
    }
    return 0;
}

void coord_h_revoke(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud, *c, *next;
    coord_t *co = k->co;
    sfl_revoke_t m;
    revoke_op_t *o;
    coord_agent_t *a = NULL;
    size_t pos;
    char q[300];
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_revoke_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->op.run = revoke_run;
    o->op.done = revoke_done;
    o->call = call;
    o->at_ms = coord_wall_ms();
    o->r.has_fingerprint = 1;
    if (!m.has_fingerprint) {
        if ((a = coord_agent_by_name(co, m.agent)) == NULL) {
            sfl__free(o);
            coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no agent named %s", m.agent);
            return;
        }
        memcpy(o->r.fingerprint, a->fpr, sizeof(o->r.fingerprint));
    } else {
        memcpy(o->r.fingerprint, m.fingerprint, sizeof(o->r.fingerprint));
        for (size_t i = 0; i < co->nagents && a == NULL; i++)
            if (memcmp(co->agents[i]->fpr, o->r.fingerprint, sizeof(o->r.fingerprint)) == 0)
                a = co->agents[i];
    }
    if (revoke_refused(co, k, call, o->r.fingerprint) < 0) {
        sfl__free(o);
        return;
    }
    if (a != NULL)
        snprintf(o->r.agent, sizeof(o->r.agent), "%.63s", a->name);
    if (!coord_cert_revoked(co, o->r.fingerprint)) {
        void *grown = sfl__reallocarray(co->revoked, co->nrevoked + 1, 32);

        if (grown == NULL) {
            sfl__free(o);
            coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        co->revoked = grown;
        for (pos = 0; pos < co->nrevoked && memcmp(co->revoked[pos], o->r.fingerprint, 32) < 0;
             pos++)
            ;
        memmove(co->revoked + pos + 1, co->revoked + pos, (co->nrevoked - pos) * 32);
        memcpy(co->revoked[pos], o->r.fingerprint, 32);
        co->nrevoked++;
    }
    for (c = co->conns; c != NULL; c = next) {
        next = c->next;
        if (c != k && c->has_peer && c->c != NULL &&
            memcmp(c->peer.sha256, o->r.fingerprint, sizeof(o->r.fingerprint)) == 0) {
            sfl_conn_abort(c->c);
            o->r.closed++;
        }
    }
    o->r.closed += coord_fleet_revoke(co, o->r.fingerprint); /* held by front-ends */
    {
        char hex[65];

        sodium_bin2hex(hex, sizeof(hex), o->r.fingerprint, sizeof(o->r.fingerprint));
        coord_log(COORD_LOG_WARN, "cert_revoked", "fingerprint=%s agent=%s closed=%u", hex,
                  o->r.agent[0] ? coord_log_quote(o->r.agent, q, sizeof(q)) : "-", o->r.closed);
    }
    coord_writer_post(co->writer, &o->op);
}

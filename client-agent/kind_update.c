/* The plain update, the round kind of a signed update (kind.h): a task
 * trains libsfl's client round on the local rows (standardised for a
 * standardize job: kind_stats.c), the update is encoded and signed for the
 * round (bound to its key, job, round and nonce), and agent.c's outbox submits it (SubmitUpdate). The pure
 * pieces (agent_task_check, agent_train_task, agent_seal_payload) are
 * agent.h's. */
#include "agent_int.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/model/loss.h"

/* The task as libsfl's client round takes it: algorithm, loss, problem and
 * parameters resolved and checked against what this agent supports. */
typedef struct task_view {
    const sfl_algo_t *algo;
    sfl_algo_params_t params;
    sfl_problem_t prob;
} task_view_t;

static int task_view(const sfl_task_t *t, const sfl_dataset_t *data, task_view_t *v)
{
    const sfl_loss_t *loss = sfl_loss_find(t->loss);
    int rc;

    v->algo = sfl_algo_find(t->algorithm);
    if (v->algo == NULL)
        return sfl__fail(SFL_EUNSUP, "task: unknown algorithm '%s'", t->algorithm);
    if (loss == NULL)
        return sfl__fail(SFL_EUNSUP, "task: unknown loss '%s'", t->loss);
    if (t->update_mode != SFL_UPDATE_MODE_SEALED &&
        !(t->update_mode == SFL_UPDATE_MODE_SECURE_AGG && t->secagg != NULL))
        return sfl__fail(SFL_EUNSUP, "task: update mode %d is not supported by this agent",
                         (int)t->update_mode);
    if (t->dictionary[0] != '\0')
        return sfl__fail(SFL_EUNSUP, "task: dictionary '%s' is not supported by this agent",
                         t->dictionary);
    if (data->X->ncols > t->dimension)
        return sfl__fail(SFL_EDIM, "task: dimension %u, but the local data has %u features",
                         t->dimension, data->X->ncols);
    if (loss->classification && t->nlabels == 0)
        return sfl__fail(SFL_EINVAL, "task: loss %s needs the job's labels", loss->name);
    if ((rc = sfl_problem_init(&v->prob, loss, t->dimension,
                               loss->classification ? t->nlabels : 0)) < 0)
        return rc;
    if (t->model == NULL || t->model->dim != v->prob.dim)
        return sfl__fail(SFL_EDIM, "task: model has dimension %u, the problem %zu",
                         t->model ? t->model->dim : 0, v->prob.dim);
    if ((rc = sfl_algo_params_from_list(v->algo, &t->params, &v->params)) < 0)
        return sfl__wrap(rc, "task");
    return 0;
}

static sfl_client_task_t client_task(const sfl_task_t *t, const task_view_t *v,
                                     const double *global, uint64_t agent_id)
{
    return (sfl_client_task_t){.algo = v->algo,
                               .params = &v->params,
                               .prob = &v->prob,
                               .labels = t->labels,
                               .global = global,
                               .seed = t->seed,
                               .round = t->round,
                               .client = agent_id,
                               .max_update_nnz = t->max_update_nnz};
}

int agent_task_check(const sfl_task_t *t, const sfl_dataset_t *data)
{
    task_view_t v;
    sfl_client_task_t ct;
    int rc;

    if ((rc = task_view(t, data, &v)) < 0)
        return rc;
    ct = client_task(t, &v, NULL, 0);
    return sfl_client_check(&ct, data, NULL);
}

/* The client state this task trains with: loaded from cs->in (the bytes
 * the agent kept for the job), or fresh when there are none or they do not
 * load (cs->note says why, for the log). */
static int state_for(const task_view_t *v, agent_cstate_io_t *cs, sfl_client_state_t *st)
{
    if (cs != NULL && cs->in != NULL) {
        if (sfl_client_state_load(v->algo, &v->params, &v->prob, cs->in, cs->in_len, st) == 0)
            return 0;
        snprintf(cs->note, sizeof(cs->note), "%s; starting from a fresh state",
                 sfl_last_error());
    }
    return sfl_client_state_new(v->algo, &v->params, &v->prob, st);
}

void agent__wipe_update(sfl_spvec_t *upd)
{
    if (upd != NULL && upd->cap > 0) {
        sodium_memzero(upd->val, upd->cap * sizeof(double));
        sodium_memzero(upd->idx, upd->cap * sizeof(uint32_t));
    }
    sfl_spvec_free(upd);
}

int agent__train_update(const sfl_task_t *t, const sfl_dataset_t *data,
                         const sfl_dataset_t *eval, uint64_t agent_id, sfl_algo_ws_t *ws,
                        agent_cstate_io_t *cs, sfl_spvec_t **out, sfl_client_report_t *rep)
{
    task_view_t v;
    sfl_client_task_t ct;
    sfl_client_state_t st = {0};
    double *global = NULL;
    sfl_spvec_t *upd = NULL;
    int rc;

    *out = NULL;
    if ((rc = task_view(t, data, &v)) < 0)
        return rc;
    global = sfl__calloc(v.prob.dim, sizeof(double));
    if (global == NULL)
        return SFL_ENOMEM;
    sfl_spvec_scatter(t->model, global);
    ct = client_task(t, &v, global, agent_id);
    if ((rc = sfl_spvec_new((uint32_t)v.prob.dim, 0, &upd)) < 0 ||
        (rc = state_for(&v, cs, &st)) < 0 ||
        (rc = sfl_client_round(&ct, data, eval, &st, ws, upd, rep)) < 0)
        goto out;
    /* The state this round left, for the agent to keep once the update is
     * made (never on a failure: a failed round leaves the old state). */
    if (cs != NULL && (rc = sfl_client_state_save(&st, &cs->out, &cs->out_len)) < 0)
        goto out;
    *out = upd;
    upd = NULL;
out:
    sfl_client_state_free(&st);
    agent__wipe_update(upd);
    sfl__free(global);
    return rc;
}

int agent_train_task(const sfl_task_t *t, const sfl_dataset_t *data, const sfl_dataset_t *eval,
                     const sfl_identity_t *id, uint64_t agent_id, sfl_algo_ws_t *ws,
                     agent_cstate_io_t *cs, uint8_t **msg, size_t *len)
{
    sfl_client_report_t rep;
    sfl_spvec_t *upd = NULL;
    sfl_payload_t pl;
    int rc;

    *msg = NULL;
    *len = 0;
    if ((rc = agent__train_update(t, data, eval, agent_id, ws, cs, &upd, &rep)) < 0)
        return rc;
    memset(&pl, 0, sizeof(pl));
    pl.update = upd;
    pl.encoding = t->value_encoding;
    pl.samples = data->X->nrows;
    pl.train_loss = rep.train_loss;
    pl.eval_accuracy = rep.eval_accuracy;
    pl.eval_mse = rep.eval_mse;
    pl.personal_accuracy = rep.personal_accuracy;
    pl.eval_samples = rep.eval_samples;
    rc = agent_seal_payload(t, &pl, id, agent_id, msg, len);
    if (rc < 0 && cs != NULL) {
        sfl_client_state_bytes_free(cs->out, cs->out_len);
        cs->out = NULL;
        cs->out_len = 0;
    }
    agent__wipe_update(upd);
    return rc;
}

int agent_seal_payload(const sfl_task_t *t, const sfl_payload_t *pl, const sfl_identity_t *id,
                       uint64_t agent_id, uint8_t **msg, size_t *len)
{
    uint8_t *payload = NULL, *signed_ = NULL;
    size_t plen = 0, cap, slen = 0;
    int rc;

    *msg = NULL;
    *len = 0;
    if ((rc = sfl_msg_payload_pack(pl, &payload, &plen)) < 0)
        goto out;
    cap = sfl_seal_signed_size(plen);
    if (cap == 0) {
        rc = sfl__fail(SFL_ELIMIT, "payload of %zu bytes is too large to sign", plen);
        goto out;
    }
    signed_ = sfl__malloc(cap);
    if (signed_ == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    {
        sfl_upd_ctx_t ctx;

        memcpy(ctx.round_pk, t->round_key, sizeof(ctx.round_pk));
        ctx.job = t->job_id;
        ctx.round = t->round;
        memcpy(ctx.nonce, t->round_nonce, sizeof(ctx.nonce));
        ctx.agent_id = agent_id;
        memcpy(ctx.model_hash, t->model_hash, sizeof(ctx.model_hash));
        /* Signed, not sealed: the mutual TLS that carries it is the only
         * hop, and its recipient is the seal's (docs/security.md). */
        if ((rc = sfl_seal_sign_into(id, &ctx, payload, plen, signed_, cap, &slen)) < 0)
            goto out;
    }
    {
        sfl_update_t m = {t->job_id, t->round, t->attempt, agent_id, SFL_UPDATE_MODE_SIGNED,
                          signed_, slen};

        rc = sfl_msg_update_pack(&m, msg, len);
    }
out:
    /* The plaintext update stays private to this agent's memory. */
    if (payload != NULL)
        sodium_memzero(payload, plen);
    sfl_msg_buf_free(payload);
    if (signed_ != NULL)
        sodium_memzero(signed_, cap);
    sfl__free(signed_);
    return rc;
}

/* ---- the kind ------------------------------------------------------------ */

agent_state_t agent__sealed_task(agent_ctx_t *a, const agent_shape_t *s, sfl_task_t *t,
                                 agent_state_t from)
{
    int rc;

    if ((rc = agent_task_check(t, a->data)) < 0) {
        agent__refuse(a, t, sfl_last_error());
        return from;
    }
    if (t->has_moments && t->moments == NULL && !agent__std_held(a, t)) {
        /* The coordinator sends a job's statistics with the first task of a
         * session; this one names statistics that never arrived here (or
         * were refused). A new Join starts a session that brings them. */
        agent__refuse(a, t, "the task names statistics this agent does not hold (sent once a "
                      "session): rejoining");
        if (from == AGENT_SUBSCRIBED)
            return agent__backoff(a, "task", SFL_GRPC_STATUS_UNAVAILABLE,
                                  "the job's statistics are missing: rejoining");
        return from;
    }
    if (from == AGENT_SUBSCRIBED)
        return agent__work_start(a, s, t) == 0 ? AGENT_TRAINING : from;
    agent__work_next(a, s, t);
    return from;
}

static int update_claims(const sfl_task_t *t)
{
    (void)t;
    return 1;
}

static agent_state_t update_task(agent_ctx_t *a, void *st, sfl_task_t *t, agent_state_t from)
{
    (void)st;
    return agent__sealed_task(a, &agent_shape_update, t, from);
}

static int update_trains(const sfl_task_t *t)
{
    (void)t;
    return 1;
}

/* The loop touches neither the data, the identity nor ws while this runs;
 * the task is the work's own. */
static void update_work(agent_ctx_t *a, agent_work_t *w)
{
    const sfl_dataset_t *data, *eval;

    if ((w->rc = agent__std_data(a, w->task, &data, &eval)) < 0)
        return;
    w->rc = agent_train_task(w->task, data, eval, a->id, w->agent_id, &a->ws, &w->cs, &w->msg,
                             &w->len);
}

const agent_shape_t agent_shape_update = {
    .name = "update",
    .job_kind = "horizontal",
    .claims = update_claims,
    .task = update_task,
    .prepare = agent__std_for,
    .trains = update_trains,
    .work = update_work,
    .trained = agent__sealed_trained,
    .outbox = 1,
};

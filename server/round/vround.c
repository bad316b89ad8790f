/* Vertical rounds (vjob.h; docs/protocol.md, "Vertical jobs"): the cohort
 * is one agent per column block, all with the same sample ids; the round's
 * task carries the broadcast at its start, every later iteration goes out
 * as a VerticalStep on the agents' held Subscribe streams once all K
 * answers to the last one are in (SubmitStep), and the round ends, like
 * any other, with a commit of its checkpoint. */
#include "coord_int.h"
#include "round/driver.h"
#include "round/registry.h"
#include "round/verdict.h"
#include "round/subs.h"
#include "round/coordwrite.h"
#include "round/shape.h"
#include "round/vround.h"

#include <math.h>

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

/* Filters the available agents ids[0..*n) to the cohort of a vertical
 * round: for the sample ids most blocks share (ties: the lowest agent id's),
 * one agent per block, the lowest id. extra gets what keeps the job
 * waiting beyond missing agents ("" if nothing): agents with other ids. */
static void vr_cohort(coord_job_t *j, uint64_t *ids, uint32_t *n, char *extra, size_t cap)
{
    coord_t *co = j->co;
    coord_vjob_t *v = j->model.v;
    uint32_t K = v->vj.nclients, best = 0, got = 0, other = 0;
    const uint8_t *hash = NULL;
    uint64_t *pick = sfl__calloc(K, sizeof(*pick)), first_other = 0;
    sfl_dataset_summary_t tmp;
    char why[8];

    extra[0] = '\0';
    if (!j->ready) { /* no blocks known yet: all of them wait */
        sfl__free(pick);
        return;
    }
    if (pick == NULL) {
        *n = 0;
        return;
    }
    /* the ids with most blocks covered: O(n^2 / K) over distinct hashes,
     * and a job has a handful of agents per block */
    for (uint32_t i = 0; i < *n; i++) {
        const coord_agent_t *a = coord_agent_find(co, ids[i]);
        uint32_t cover = 0;

        if (hash != NULL && sodium_memcmp(a->ds.ids_hash, hash, SFL_MSG_HASH_BYTES) == 0)
            continue;
        memset(pick, 0, K * sizeof(*pick));
        for (uint32_t e = i; e < *n; e++) {
            const coord_agent_t *b = coord_agent_find(co, ids[e]);
            int k = coord_vjob_block_of(v, coord_agent_summary(b, &tmp), why, sizeof(why));

            if (k >= 0 && pick[k] == 0 &&
                sodium_memcmp(a->ds.ids_hash, b->ds.ids_hash, SFL_MSG_HASH_BYTES) == 0) {
                pick[k] = b->id;
                cover++;
            }
        }
        if (cover > best) {
            best = cover;
            hash = a->ds.ids_hash;
        }
    }
    memset(pick, 0, K * sizeof(*pick));
    for (uint32_t i = 0; i < *n; i++) {
        const coord_agent_t *a = coord_agent_find(co, ids[i]);
        int k = coord_vjob_block_of(v, coord_agent_summary(a, &tmp), why, sizeof(why));

        if (k < 0)
            continue;
        if (sodium_memcmp(a->ds.ids_hash, hash, SFL_MSG_HASH_BYTES) != 0) {
            if (other++ == 0)
                first_other = a->id;
            continue;
        }
        if (pick[k] == 0) {
            pick[k] = a->id;
            got++;
        }
    }
    /* ids stays ascending: the agents picked, in their order */
    *n = 0;
    for (uint32_t i = 0; got > 0 && i < K; i++)
        if (pick[i] != 0)
            ids[(*n)++] = pick[i];
    for (uint32_t a = 1; a < *n; a++)
        for (uint32_t b = a; b > 0 && ids[b - 1] > ids[b]; b--) {
            uint64_t t = ids[b];

            ids[b] = ids[b - 1];
            ids[b - 1] = t;
        }
    if (other > 0)
        snprintf(extra, cap, "%u agent%s (e.g. %llu) hold%s other sample ids", other,
                 other == 1 ? "" : "s", (unsigned long long)first_other,
                 other == 1 ? "s" : "");
    sfl__free(pick);
}

/* The ledger after its released iterations; an error is logged. */
static void note_spent(coord_job_t *j)
{
    char q[300];

    if (coord_ledger_spend(&j->kst.vr.ledger, j->model.v) < 0)
        coord_log(COORD_LOG_ERROR, "privacy_ledger", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(sfl_last_error(), q, sizeof(q)));
}

/* Every attempt the store knows released its iterations. */
static int count_released(coord_job_t *j)
{
    coord_round_row_t *rows = NULL;
    size_t n = 0;
    int rc;

    j->kst.vr.ledger.released = 0;
    rc = coord_store_round_list(j->co->store, (int64_t)j->id, j->model.spec.cohort_size, &rows,
                                &n);
    if (rc < 0)
        return rc;
    coord_ledger_count(&j->kst.vr.ledger, &j->model.spec, rows, n);
    coord_round_list_free(rows, n);
    return 0;
}

/* The model is loaded: the ledger from the attempts the store recorded. */
static int vr_model(coord_job_t *j)
{
    int rc = count_released(j);

    if (rc == 0)
        note_spent(j);
    return rc;
}

/* At start: what the last commit recorded, while no attempt came after it;
 * a job that runs again recomputes it with its model (vr_model). */
static void vr_load(coord_job_t *j)
{
    if (count_released(j) == 0)
        coord_ledger_restore(&j->kst.vr.ledger, &j->last);
}

/* The ledger into the commit's metrics. */
static void vr_record(coord_job_t *j)
{
    coord_ledger_metrics(&j->kst.vr.ledger, j->model.v, &j->work_metrics);
}

static int vr_admit(coord_job_t *j, char *why, size_t cap)
{
    char q[300];
    int rc = coord_ledger_budget(&j->kst.vr.ledger, j->model.v, &j->model.spec,
                                 sfl_algo_param_or(&j->model.params, "epsilon", 0),
                                 j->rnd.round, why, cap);

    if (rc < 0)
        coord_log(COORD_LOG_WARN, "privacy_budget", "job=%llu reason=%s",
                  (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
    return rc;
}

/* The attempt opened (after START): blocks of the members, the first
 * iteration, the ledger counts the round's iterations. */
static int vr_open(coord_job_t *j)
{
    coord_vjob_t *v = j->model.v;
    sfl_dataset_summary_t tmp;
    char why[8];

    sfl__free(j->kst.vr.vagent);
    if ((j->kst.vr.vagent = sfl__calloc(v->vj.nclients, sizeof(uint64_t))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the block holders");
    for (uint32_t i = 0; i < j->rnd.nmembers; i++) {
        const coord_agent_t *a = coord_agent_find(j->co, j->rnd.members[i].agent);
        int k = a ? coord_vjob_block_of(v, coord_agent_summary(a, &tmp), why, sizeof(why)) : -1;

        if (k < 0)
            return sfl__fail(SFL_EINVAL, "agent %llu holds no block of the job",
                             (unsigned long long)j->rnd.members[i].agent);
        j->kst.vr.vagent[k] = a->id;
    }
    coord_vjob_begin(v, &j->model.spec, j->rnd.round, j->model.global, j->model.dim);
    coord_ledger_release(&j->kst.vr.ledger, (uint32_t)(v->end - v->t));
    note_spent(j);
    return 0;
}

static void send_step(coord_t *co, coord_job_t *j, coord_agent_t *a, const uint8_t *buf, size_t len)
{
    if (a == NULL || a->sub == NULL)
        return;
    if (sfl_grpc_send(a->sub, buf, len) < 0) {
        coord_end_sub(a, SFL_GRPC_STATUS_INTERNAL, "cannot send the step");
        return;
    }
    a->sub_idle_since = coord_now_ms(co);
    j->fold.bytes_down += len;
}

/* Iteration t's step to one agent (a reconnect), or to every block holder
 * (a == NULL). */
static void vr_send(coord_job_t *j, coord_agent_t *a)
{
    coord_t *co = j->co;
    coord_vjob_t *v = j->model.v;
    sfl_vstep_t st = {.job_id = j->id, .round = j->rnd.round, .attempt = j->wire_attempt,
                      .iteration = v->t, .bcast = j->model.global + j->model.prob.dim,
                      .nbcast = (uint32_t)v->nb};
    uint8_t *buf = NULL;
    size_t len = 0;
    char q[300];

    if (sfl_msg_vstep_pack(&st, &buf, &len) < 0) {
        coord_log(COORD_LOG_ERROR, "step_failed", "job=%llu iteration=%llu error=%s",
                  (unsigned long long)j->id, (unsigned long long)v->t,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        return;
    }
    for (uint32_t k = 0; k < v->vj.nclients; k++)
        if (a == NULL || j->kst.vr.vagent[k] == a->id)
            send_step(co, j, coord_agent_find(co, j->kst.vr.vagent[k]), buf, len);
    sfl_msg_buf_free(buf);
}

/* A reconnected block holder of the open round: past its first iteration,
 * the step it has not answered. */
static void vr_resend(coord_job_t *j, coord_agent_t *a)
{
    coord_vjob_t *v = j->model.v;
    uint64_t first;
    uint32_t count;

    coord_vjob_span(&j->model.spec, j->rnd.round, &first, &count);
    if (v->t == first || j->kst.vr.vagent == NULL)
        return;
    for (uint32_t k = 0; k < v->vj.nclients; k++)
        if (j->kst.vr.vagent[k] == a->id && !v->got[k])
            vr_send(j, a);
}

/* The iteration is complete: the server's step, then the next iteration's
 * broadcast or the round's end. */
static void advance(coord_job_t *j)
{
    coord_t *co = j->co;
    coord_vjob_t *v = j->model.v;
    uint64_t now = coord_now_ms(co);
    char q[300];
    int rc = coord_vjob_advance(v, j->model.global);

    if (rc < 0) {
        /* a message no agent of ours could send: the iteration never
         * completes and the attempt fails at its deadline */
        coord_log(COORD_LOG_ERROR, "step_refused", "job=%llu iteration=%llu error=%s",
                  (unsigned long long)j->id, (unsigned long long)v->t,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        return;
    }
    if (rc == 0) {
        vr_send(j, NULL);
        return;
    }
    /* every block holder answered every iteration: accepted, with the bytes
     * of its answers (the audit record and the history's bytes_up) */
    {
        uint64_t first;
        uint32_t count;
        size_t per = sfl_msg_values_bytes(v->nm, v->vj.algo->vertical->msg_ints);

        coord_vjob_span(&j->model.spec, j->rnd.round, &first, &count);
        for (uint32_t i = 0; i < j->rnd.nmembers; i++) {
            (void)coord_round_answer(&j->rnd, j->rnd.members[i].agent, j->id, j->rnd.round,
                                     j->rnd.attempt, 0, now);
            coord_part_queue(co, &(coord_part_row_t){(int64_t)j->id, (int64_t)j->rnd.round,
                                                     (int64_t)j->wire_attempt + 1,
                                                     (int64_t)j->rnd.members[i].agent,
                                                     COORD_PART_ACCEPTED, NULL,
                                                     (int64_t)(per * count), coord_wall_ms()});
            co->verdicts[COORD_UPD_ACCEPTED]++; /* one update a block holder a round */
        }
    }
    coord_job_drive(j);
}

/* The objective at the round's starting model, from the first answer to
 * its first iteration that reports one over the job's rows (all block
 * holders compute it from the same broadcast): the round's train loss in
 * the history, as a mode-1 round's is the agents' mean (sfl_metrics_means). */
static void take_objective(coord_job_t *j, const sfl_step_answer_t *m)
{
    uint64_t first;
    uint32_t count;

    coord_vjob_span(&j->model.spec, j->rnd.round, &first, &count);
    if (m->iteration != first || m->objective_rows != j->model.v->vj.nrows ||
        !isfinite(m->objective) || j->fold.samples > 0)
        return;
    j->fold.samples = m->objective_rows;
    j->fold.train_loss = m->objective * (double)m->objective_rows;
}

void coord_h_step(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *c = ud;
    coord_t *co = c->co;
    sfl_step_answer_t *m = NULL;
    coord_agent_t *a;
    coord_job_t *j;
    coord_upd_verdict_t vd = COORD_UPD_REJECTED;
    uint32_t k = 0;
    char why[SFL_MSG_TEXT_LEN], q[400];
    int rc;

    if (coord_serving(call, c) < 0)
        return;
    if ((rc = sfl_msg_step_answer_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((a = coord_bound_agent(call, c, m->agent_id)) == NULL)
        goto out;
    why[0] = '\0';
    j = coord_job_find(co, m->job_id);
    if (j == NULL || !j->ready || j->shape != &coord_shape_vertical) {
        snprintf(why, sizeof(why), "no vertical job %llu", (unsigned long long)m->job_id);
        vd = COORD_UPD_WRONG_ROUND;
    } else if (m->round == j->rnd.round && m->attempt == j->wire_attempt &&
               (j->rnd.state == COORD_ROUND_AGGREGATING ||
                j->rnd.state == COORD_ROUND_COMMITTED)) {
        /* every answer of the attempt is in: a repeat of its last one */
        snprintf(why, sizeof(why), "round %llu attempt %u has all its answers",
                 (unsigned long long)m->round, m->attempt);
        vd = COORD_UPD_DUPLICATE;
    } else if (!coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING || j->opening ||
               m->round != j->rnd.round || m->attempt != j->wire_attempt) {
        snprintf(why, sizeof(why), "round %llu attempt %u is not open",
                 (unsigned long long)m->round, m->attempt);
        vd = m->round < j->rnd.round || (m->round == j->rnd.round && m->attempt < j->wire_attempt)
                 ? COORD_UPD_LATE
                 : COORD_UPD_WRONG_ROUND;
    } else {
        while (k < j->model.v->vj.nclients && j->kst.vr.vagent[k] != a->id)
            k++;
        if (k == j->model.v->vj.nclients)
            snprintf(why, sizeof(why), "agent %llu holds no block of this attempt",
                     (unsigned long long)a->id);
        else {
            (void)coord_round_heartbeat(&j->rnd, a->id, coord_now_ms(co));
            vd = coord_vjob_answer(j->model.v, k, m->iteration, m->msg, m->msg_len, why,
                                   sizeof(why));
            if (vd == COORD_UPD_ACCEPTED)
                take_objective(j, m);
        }
    }
    /* an iteration's answer is not an update: each block holder counts as
     * one accepted update when the round's last iteration is in (advance) */
    coord_count_stage(co, vd);
    if (vd != COORD_UPD_ACCEPTED)
        coord_log(COORD_LOG_WARN, "step", "agent=%llu job=%llu round=%llu iteration=%llu "
                  "verdict=%s reason=%s", (unsigned long long)a->id,
                  (unsigned long long)m->job_id, (unsigned long long)m->round,
                  (unsigned long long)m->iteration, coord_upd_verdict_name(vd),
                  coord_log_quote(why, q, sizeof(q)));
    coord_reply_ack(call, vd, why, m->job_id, m->round, m->attempt);
    if (vd == COORD_UPD_ACCEPTED && coord_vjob_complete(j->model.v))
        advance(j);
out:
    sfl_msg_step_answer_free(m);
}

static void vr_status(const coord_job_t *j, sfl_job_status_t *st)
{
    const coord_vjob_t *v = j->model.v;

    if (v == NULL)
        return;
    st->iteration = j->rnd.state == COORD_ROUND_TRAINING && v->got != NULL
                        ? v->t
                        : j->committed * v->per_round;
    coord_ledger_status(&j->kst.vr.ledger, v, sfl_algo_param_or(&j->model.params, "epsilon", 0),
                        st);
}

/* ---- the vertical round kind (shape.h) ---- */

static void vr_free(coord_job_t *j)
{
    sfl__free(j->kst.vr.vagent);
    memset(&j->kst.vr, 0, sizeof(j->kst.vr));
}

/* A vertical job takes column blocks of its samples, one per block, each
 * checked against the job's whole dimension. */
static coord_inelig_t vr_ineligible(const coord_job_t *j, const coord_agent_t *a, uint32_t *dim,
                                    char *why, size_t cap)
{
    sfl_dataset_summary_t ds;

    *dim = j->model.spec.dimension;
    if (coord_vjob_block_of(j->model.v, coord_agent_summary(a, &ds), why, cap) < 0)
        return COORD_INELIG_FEATURES;
    return COORD_INELIG_NONE;
}

/* The task carries the broadcast at the round's start (the tail of the
 * state [x, b]) and the round's iterations. */
static int vr_task(const coord_job_t *j, sfl_task_t *t, sfl_msg_sa_round_t *sa, uint32_t g)
{
    const coord_vjob_t *v = j->model.v;
    int rc;

    (void)g;
    (void)sa;
    if ((rc = sfl_spvec_new((uint32_t)v->nb, 0, &t->model)) < 0 ||
        (rc = sfl_spvec_from_dense(t->model, j->model.global + j->model.dim - v->nb)) < 0)
        return rc;
    t->rows = v->vj.nrows;
    t->clients = v->vj.nclients;
    t->iterations = v->vj.iters;
    t->first_iteration = v->t;
    t->round_iterations = (uint32_t)(v->end - v->t);
    return 0;
}

/* The state moved with the iterations: the round is the checkpoint. */
static int vr_fold(coord_job_t *j)
{
    j->model.round++;
    return coord_shape_checkpoint(j);
}

const coord_shape_t coord_shape_vertical = {
    .name = "vertical",
    .free = vr_free,
    .plan = coord_shape_plan_train,
    .load = vr_load,
    .model = vr_model,
    .ineligible = vr_ineligible,
    .cohort = vr_cohort,
    .admit = vr_admit,
    .draw = coord_shape_nop_draw,
    .open = vr_open,
    .ntasks = coord_shape_one_task,
    .task_of = coord_shape_task_zero,
    .task = vr_task,
    .start = coord_shape_nop_start,
    .sync = coord_shape_nop,
    .resend = vr_resend,
    .limits = coord_shape_limits_model,
    .check = coord_shape_check_model,
    .add = coord_shape_add_model,
    .record = vr_record,
    .fold = vr_fold,
    .commit = coord_shape_commit_model,
    .settle = coord_shape_nop_settle,
    .close = coord_shape_nop,
    .committed = coord_shape_committed_model,
    .failed = coord_shape_failed_model,
    .status = vr_status,
};

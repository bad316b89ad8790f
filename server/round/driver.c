/* The round driver: per job, the round machine (round.h) moved on by the
 * scheduler tick and by events - selection, the attempt's opening (recorded
 * before its tasks go out), deadlines, the aggregation on the thread pool
 * and its commit on the store's writer, retries - and a job's state
 * changes. */
#include "coord_int.h"
#include "round/jobs.h"
#include "round/registry.h"
#include "round/subs.h"
#include "round/coordwrite.h"
#include "round/driver.h"
#include "leader.h"
#include "round/shape.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* An event the machine refuses is a bug here, not a peer's doing. */
static void step(coord_job_t *j, coord_event_t ev, uint64_t now)
{
    if (coord_round_step(&j->rnd, ev, now, 0, NULL, 0) < 0) {
        char q[300];

        coord_log(COORD_LOG_ERROR, "round_event_refused", "job=%llu event=%d error=%s",
                  (unsigned long long)j->id, (int)ev,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
    }
}

void coord_job_step(coord_job_t *j, coord_event_t ev)
{
    step(j, ev, coord_now_ms(j->co));
}

/* The attempt's round key, shared by reference count with workers verifying
 * updates sealed to it (loop thread only): closing the attempt drops the
 * job's reference, the last one wipes the secret. */

static int key_new(coord_attempt_key_t **out)
{
    coord_attempt_key_t *k = sfl__calloc(1, sizeof(*k));
    int rc;

    *out = NULL;
    if (k == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_roundkey_new(&k->rk)) < 0) {
        sfl__free(k);
        return rc;
    }
    k->refs = 1;
    *out = k;
    return 0;
}

coord_attempt_key_t *coord_key_hold(coord_attempt_key_t *k)
{
    k->refs++;
    return k;
}

void coord_key_drop(coord_attempt_key_t *k)
{
    if (k != NULL && --k->refs == 0) {
        sfl_roundkey_free(k->rk);
        sfl__free(k);
    }
}

static void gtask_free(coord_gtask_t *o);

void coord_close_attempt(coord_job_t *j)
{
    /* Wiping the round key is what makes every later update for this
     * attempt unopenable, by anyone (after a worker still verifying one
     * has finished). */
    coord_key_drop(j->key);
    j->key = NULL;
    sfl_msg_buf_free(j->task);
    j->task = NULL;
    j->task_len = 0;
    sfl_msg_buf_free(j->task_m);
    j->task_m = NULL;
    j->task_m_len = 0;
    sfl_msg_buf_free(j->task_lite);
    j->task_lite = NULL;
    j->task_lite_len = 0;
    sfl_msg_buf_free(j->task_m_lite);
    j->task_m_lite = NULL;
    j->task_m_lite_len = 0;
    j->model_off = j->model_len = 0;
    for (uint32_t g = 1; g < j->ntasks; g++)
        gtask_free(&j->gtasks[g - 1]);
    sfl__free(j->gtasks);
    j->gtasks = NULL;
    j->ntasks = 0;
}

static void store_round_state(coord_job_t *j, coord_srow_state_t st, const char *reason)
{
    /* a statistics round's attempts are counted (stats_open), their
     * states not kept: only the sum it commits */
    if (!j->opened || j->rnd.round == 0)
        return;
    coord_part_flush(j->co); /* the attempt's records before its outcome */
    coord_write_round_state(j->co, j->id, j->rnd.round, j->wire_attempt, st, reason);
}

/* The round after the last committed one, in SELECTING, with the next
 * attempt number (attempts are never reused, not even across restarts:
 * job_prepare starts the count from the store), and a fresh attempt
 * budget. */
void coord_reset_round(coord_job_t *j)
{
    uint64_t next;
    coord_round_cfg_t cfg;

    coord_round_close(&j->rnd);
    coord_shape_set(j);
    j->shape->plan(j, &next, &cfg);
    coord_round_init(&j->rnd, &cfg, j->id, next);
    if (j->used_round != next) {
        j->used_round = next;
        j->used = 0;
    }
    j->wire_attempt = j->used;
    j->opened = 0;
    j->opening = 0;
    j->select_since = coord_now_ms(j->co);
    j->waiting[0] = '\0';
}

/* Bytes of a job's O(dim) state in RAM: the global state, the fold's sum
 * and its top-k scratch (max_job_memory counts these). */
uint64_t coord_job_state_bytes(size_t dim)
{
    return (uint64_t)dim * 3 * sizeof(double);
}

uint64_t coord_live_job_bytes(const coord_t *co)
{
    uint64_t n = 0;

    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->ready && !coord_job_final(co->jobs[i]))
            n += coord_job_state_bytes(co->jobs[i]->model.dim);
    return n;
}

uint64_t coord_live_jobs(const coord_t *co)
{
    uint64_t n = 0;

    for (size_t i = 0; i < co->njobs; i++)
        n += !coord_job_final(co->jobs[i]);
    return n;
}

/* A job that is not running keeps its model in the store (checkpoints:
 * ExportModel reads them, job_model reloads them), not in RAM; one
 * aggregating on the thread pool is released when it returns (agg_after). */
void coord_job_release(coord_job_t *j)
{
    if (!j->busy && j->model.global != NULL && j->state != SFL_JOB_RUNNING)
        coord_model_close(&j->model);
}

/* The state takes effect here at once (a paused job opens no round from
 * now on); the record follows on the writer, and after answers whoever
 * must know it is durable. */
void coord_set_job_state(coord_job_t *j, sfl_job_state_t st, coord_written_cb after, void *ud)
{
    coord_job_state_t row;

    switch (st) {
    case SFL_JOB_RUNNING: row = COORD_JOB_ACTIVE; break;
    case SFL_JOB_PENDING:
    case SFL_JOB_PAUSED: row = COORD_JOB_PAUSED; break;
    case SFL_JOB_CANCELLED: row = COORD_JOB_CANCELLED; break;
    case SFL_JOB_FINISHED: row = COORD_JOB_DONE; break;
    default: row = COORD_JOB_PAUSED; break;
    }
    j->state = st;
    coord_write_job_state(j->co, j->id, row, after, ud);
    coord_log(COORD_LOG_INFO, "job_state", "job=%llu state=%s", (unsigned long long)j->id,
              sfl_msg_job_state_name(st));
    coord_job_release(j);
}

/* Leaves the open attempt uncommitted (pause, cancel, shutdown). */
void coord_abandon(coord_job_t *j, const char *reason)
{
    if (j->busy || !j->ready)
        return; /* the aggregation in flight ends it */
    if (j->rnd.state == COORD_ROUND_TRAINING || j->rnd.state == COORD_ROUND_AGGREGATING) {
        store_round_state(j, COORD_SROW_FAILED, reason);
        coord_log(COORD_LOG_INFO, "round_abandoned", "job=%llu round=%llu attempt=%u reason=\"%s\"",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
                  reason);
    }
    coord_close_attempt(j);
    j->shape->close(j);
    coord_reset_round(j);
}

/* The job cannot go on: it stops here and the failure is recorded (the
 * writer records it before anything posted later), so that a restart
 * does not run it again; a record that fails is logged as missing. */
void coord_fail_job(coord_job_t *j, const char *why)
{
    char q[300];

    coord_write_job_fail(j->co, j->id, why);
    coord_text_copy(j->error, sizeof(j->error), why);
    j->state = SFL_JOB_FAILED;
    coord_log(COORD_LOG_ERROR, "job_state", "job=%llu state=failed error=%s",
              (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
}

static void pause_failed(coord_job_t *j, const char *why)
{
    coord_text_copy(j->error, sizeof(j->error), why);
    coord_abandon(j, why);
    coord_set_job_state(j, SFL_JOB_PAUSED, NULL, NULL);
}

/* Signed task g (of the kind's ntasks) in its forms, into *o; model_off
 * and model_len of its stripped form. */
static int build_one(coord_job_t *j, uint32_t g, coord_gtask_t *o, size_t *model_off,
                     size_t *model_len)
{
    coord_t *co = j->co;
    sfl_task_t t;
    sfl_msg_sa_round_t sa;
    uint8_t *tb = NULL, sig[SFL_SEAL_SIG_BYTES];
    size_t tl = 0;
    int rc;

    memset(&t, 0, sizeof(t));
    t.update_mode = SFL_UPDATE_MODE_SEALED;
    /* the kind's part: the model (or the broadcast, or none), its mode */
    if ((rc = j->shape->task(j, &t, &sa, g)) < 0)
        goto out;
    if (!t.statistics && j->moments != NULL) {
        t.has_moments = 1;
        memcpy(t.moments_hash, j->moments_hash, sizeof(t.moments_hash));
        t.standardize_eps = coord_job_std_eps(&j->spec);
    }
    t.job_id = j->id;
    t.round = j->rnd.round;
    t.attempt = j->wire_attempt;
    snprintf(t.algorithm, sizeof(t.algorithm), "%s", j->spec.algorithm);
    sfl_algo_params_to_list(&j->model.params, &t.params);
    snprintf(t.loss, sizeof(t.loss), "%s", j->spec.loss);
    t.dimension = j->spec.dimension;
    t.nlabels = j->spec.nlabels;
    memcpy(t.labels, j->spec.labels, sizeof(t.labels));
    t.seed = j->spec.seed;
    t.value_encoding = j->spec.value_encoding;
    /* The model always travels exactly (float64): agents must train from
     * the very state the coordinator aggregates into. */
    t.model_encoding = SFL_ENC_F64;
    t.deadline_ms = j->deadline_wall;
    memcpy(t.round_nonce, j->rnd.nonce, sizeof(t.round_nonce));
    memcpy(t.round_key, j->key->rk->pk, sizeof(t.round_key));
    t.max_update_nnz = 0;
    if ((rc = sfl_msg_task_sign_bytes(&t, &tb, &tl)) < 0 ||
        (rc = sfl_seal_sign_detached(co->id, SFL_MSG_TASK_CONTEXT, tb, tl, sig)) < 0 ||
        (rc = sfl_msg_task_pack(&t, tb, tl, sig, &o->task, &o->task_len)) < 0)
        goto out;
    if (t.has_moments &&
        (rc = sfl_msg_task_pack_moments(&t, tb, tl, sig, j->moments,
                                        SFL_MOMENTS_LEN(j->spec.dimension), &o->task_m,
                                        &o->task_m_len)) < 0)
        goto out;
    if (o->task_len > co->cfg.max_message || o->task_m_len > co->cfg.max_message) {
        rc = sfl__fail(SFL_ELIMIT, "task of %zu bytes exceeds max_message %llu",
                       o->task_m_len > o->task_len ? o->task_m_len : o->task_len,
                       (unsigned long long)co->cfg.max_message);
        goto out;
    }
    memcpy(j->model_hash, t.model_hash, sizeof(j->model_hash));
    /* For front-ends' agents: the tasks without their model (fleetsvc.c). */
    rc = sfl_msg_task_strip_model(o->task, o->task_len, &o->task_lite, &o->task_lite_len,
                                  model_off, model_len);
    if (rc == 0 && o->task_m != NULL) {
        size_t off, n;

        rc = sfl_msg_task_strip_model(o->task_m, o->task_m_len, &o->task_m_lite,
                                      &o->task_m_lite_len, &off, &n);
    }
    if (rc == SFL_ENOTFOUND)
        rc = 0; /* no model beside the signature: sent whole */
out:
    sfl_msg_buf_free(tb);
    sfl_spvec_free(t.model);
    return rc;
}

static void gtask_free(coord_gtask_t *o)
{
    sfl_msg_buf_free(o->task);
    sfl_msg_buf_free(o->task_m);
    sfl_msg_buf_free(o->task_lite);
    sfl_msg_buf_free(o->task_m_lite);
    memset(o, 0, sizeof(*o));
}

/* The attempt's signed tasks: one, or one per secure aggregation group
 * (shape->ntasks; group 0's in j->task..., the others' in j->gtasks). The
 * model is the same in each: Fleet.Model serves it from group 0's. */
static int build_task(coord_job_t *j)
{
    uint32_t n = j->shape->ntasks(j);
    coord_gtask_t o = {0};
    size_t off = 0, len = 0;
    int rc;

    if ((rc = build_one(j, 0, &o, &j->model_off, &j->model_len)) < 0) {
        gtask_free(&o);
        return rc;
    }
    j->task = o.task, j->task_len = o.task_len;
    j->task_m = o.task_m, j->task_m_len = o.task_m_len;
    j->task_lite = o.task_lite, j->task_lite_len = o.task_lite_len;
    j->task_m_lite = o.task_m_lite, j->task_m_lite_len = o.task_m_lite_len;
    if (n <= 1)
        return 0;
    if ((j->gtasks = sfl__calloc(n - 1, sizeof(*j->gtasks))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the groups' tasks");
    j->ntasks = n;
    for (uint32_t g = 1; g < n; g++)
        if ((rc = build_one(j, g, &j->gtasks[g - 1], &off, &len)) < 0)
            return rc;
    return 0;
}

/* Appends to out[0..cap) at *o; what does not fit is cut off. */
static void put(char *out, size_t cap, size_t *o, const char *fmt, ...) SFL_PRINTF(4, 5);
static void put(char *out, size_t cap, size_t *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*o + 1 >= cap)
        return;
    va_start(ap, fmt);
    n = vsnprintf(out + *o, cap - *o, fmt, ap);
    va_end(ap);
    if (n > 0)
        *o = *o + (size_t)n < cap ? *o + (size_t)n : cap - 1;
}

/* Why a job in SELECTING with n usable agents cannot start its round
 * (fewer than min_quorum), into j->waiting, logged once per change: the
 * counts of connected, eligible and available agents (avail: eligible,
 * subscribed now and not busy in another job's round), why available ones
 * are left out (extra, a vertical job's: other sample ids), and the most common reason the others are not
 * eligible, with the first such agent's detail. Empty once the round can
 * start. */
static void note_waiting(coord_job_t *j, uint32_t n, uint32_t avail, const char *extra)
{
    coord_t *co = j->co;
    uint32_t connected = 0, elig = 0, count[COORD_INELIG_COUNT] = {0}, need, top = 0;
    uint64_t first[COORD_INELIG_COUNT] = {0};
    char detail[COORD_INELIG_COUNT][128], text[SFL_MSG_TEXT_LEN], q[600];
    size_t o = 0;

    need = j->model.rcfg.min_quorum;
    if (n >= need) {
        j->waiting[0] = '\0';
        return;
    }
    for (size_t i = 0; i < co->nagents; i++) {
        const coord_agent_t *a = co->agents[i];
        coord_inelig_t r;

        if (a->conn == NULL)
            continue;
        connected++;
        if ((r = coord_ineligible(j, a, NULL, 0)) == COORD_INELIG_NONE) {
            elig++;
            continue;
        }
        /* the detail only for the first of each reason: this runs every
         * tick while the job waits, over every agent */
        if (count[r]++ == 0) {
            first[r] = a->id;
            (void)coord_ineligible(j, a, detail[r], sizeof(detail[r]));
        }
        if (count[r] > count[top])
            top = r;
    }
    put(text, sizeof(text), &o, "selecting %u/%u: waiting for %u more agent%s (", n, need,
        need - n, need - n == 1 ? "" : "s");
    if (connected == 0)
        put(text, sizeof(text), &o, "none connected");
    else
        put(text, sizeof(text), &o, "%u connected, %u eligible", connected, elig);
    if (elig > avail)
        put(text, sizeof(text), &o, ", %u of them not subscribed now", elig - avail);
    if (extra[0])
        put(text, sizeof(text), &o, "; %s", extra);
    if (count[top])
        put(text, sizeof(text), &o, "; %u not eligible, e.g. agent %llu: %s", connected - elig,
            (unsigned long long)first[top], detail[top]);
    put(text, sizeof(text), &o, ")");
    if (strcmp(text, j->waiting) == 0)
        return;
    memcpy(j->waiting, text, sizeof(text));
    coord_log(COORD_LOG_INFO, "job_waiting", "job=%llu round=%llu reason=%s",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round,
              coord_log_quote(j->waiting, q, sizeof(q)));
}


/* Opening an attempt: its row (nonce, cohort manifest, SELECTED
 * participation) and TRAINING, in the store before any task goes out, so
 * that no agent works on an attempt a restart would not know. */
typedef struct {
    coord_write_op_t op;
    coord_t *co;
    uint64_t job, seq;
    int64_t round, attempt;
    uint8_t nonce[COORD_NONCE_BYTES];
    size_t n;
    int64_t cohort[]; /* ascending agent ids */
} open_op_t;

static int open_run(coord_store_t *s, coord_write_op_t *op)
{
    open_op_t *o = (open_op_t *)op;
    int rc;

    if (o->round == 0) /* the statistics round: its attempt counted */
        return coord_store_stats_open(s, (int64_t)o->job, o->attempt);
    if ((rc = coord_store_round_open(s, (int64_t)o->job, o->round, o->attempt, o->nonce,
                                     o->cohort, o->n)) < 0)
        return rc;
    return coord_store_round_set_state(s, (int64_t)o->job, o->round, o->attempt,
                                       COORD_SROW_TRAINING, NULL);
}

/* The attempt is durable: its tasks go out, unless it ended meanwhile
 * (paused, cancelled, its deadline passed), which the writer then records
 * after this. */
static void open_done(coord_write_op_t *op)
{
    open_op_t *o = (open_op_t *)op;
    coord_t *co = o->co;
    coord_job_t *j = op->abandoned ? NULL : coord_job_find(co, o->job);
    char why[SFL_MSG_TEXT_LEN], q[300];

    if (j == NULL || j->open_seq != o->seq || !j->opening) {
        if (j != NULL && op->rc < 0)
            coord_log(COORD_LOG_ERROR, "store_error", "job=%llu round=%lld error=%s",
                      (unsigned long long)o->job, (long long)o->round,
                      coord_log_quote(op->error, q, sizeof(q)));
        sfl__free(o);
        return;
    }
    j->opening = 0;
    if (op->rc < 0)
        coord_leader_write_failed(co, op->rc); /* fenced: stops serving */
    if (op->rc < 0) {
        /* Nothing an agent can fix: the job pauses with the reason instead
         * of burning its attempts. */
        snprintf(why, sizeof(why), "cannot open round %lld: %.200s", (long long)o->round,
                 op->error);
        coord_log(COORD_LOG_ERROR, "round_open_failed", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
        j->opened = 0; /* no row to mark failed */
        pause_failed(j, why);
    } else {
        for (uint32_t i = 0; i < j->rnd.nmembers; i++) {
            coord_agent_t *a = coord_agent_find(co, j->rnd.members[i].agent);

            if (a)
                coord_send_task(co, j, a);
        }
        if (co->first_tasks) {
            /* A master's first tasks since it took the lead: where a
             * takeover ends for the agents (ha_soak.sh measures to it). */
            co->first_tasks = 0;
            coord_log(COORD_LOG_INFO, "first_tasks", "epoch=%lld job=%llu round=%lld "
                      "agents=%u", (long long)co->epoch, (unsigned long long)j->id,
                      (long long)o->round, j->rnd.nmembers);
        }
    }
    sfl__free(o);
    coord_schedule(co);
}

/* The agents an attempt of j can draw (connected, eligible, not busy in
 * another job's round and, with sub, subscribed now), ascending, into ids
 * (NULL: only counted); their count. Without sub: those a retry will draw
 * from once they ask again (an agent re-subscribes between tasks). */
uint32_t coord_candidates(const coord_job_t *j, uint64_t *ids, int sub)
{
    const coord_t *co = j->co;
    uint32_t n = 0;

    for (size_t i = 0; i < co->nagents; i++) {
        const coord_agent_t *a = co->agents[i];

        if ((a->sub || !sub) && a->conn && coord_eligible(j, a) &&
            !coord_busy_elsewhere(co, a, j)) {
            if (ids != NULL)
                ids[n] = a->id;
            n++;
        }
    }
    return n;
}

/* SELECTING: start the attempt once enough eligible agents subscribe. The
 * full selection (cohort * (1 + over_selection)) starts at once; a smaller
 * one that still reaches the quorum after select_wait_ms. Fewer than the
 * quorum keep waiting without using up an attempt. */
static void try_start(coord_job_t *j)
{
    coord_t *co = j->co;
    const coord_round_cfg_t *rc_ = &j->model.rcfg;
    uint64_t now = coord_now_ms(co), *ids = NULL;
    uint32_t n = 0;
    double want = ceil(rc_->cohort * (1.0 + rc_->overselect));
    open_op_t *o = NULL;
    char why[200], q[300];
    int rc;

    ids = sfl__mallocarray(co->nagents ? co->nagents : 1, sizeof(*ids));
    if (ids == NULL)
        return;
    n = coord_candidates(j, ids, 1);
    {
        uint32_t avail = n;
        char extra[160];

        j->shape->cohort(j, ids, &n, extra, sizeof(extra));
        note_waiting(j, n, avail, extra);
    }
    if (n < rc_->min_quorum || (n < want && now - j->select_since < co->cfg.select_wait_ms))
        goto out;
    if ((rc = coord_job_model(j)) < 0) {
        snprintf(why, sizeof(why), "cannot load the last checkpoint: %s", sfl_last_error());
        if (rc == SFL_ENOMEM)
            pause_failed(j, why); /* the operator may resume once memory is there */
        else
            coord_fail_job(j, why);
        goto out;
    }
    if (j->shape->admit(j, why, sizeof(why)) < 0) {
        coord_fail_job(j, why);
        goto out;
    }
    if (j->shape->draw(j, ids, &n) < 0 ||
        (rc = coord_round_step(&j->rnd, COORD_EV_START, now, j->spec.seed, ids, n)) < 0) {
        /* no memory: the next tick tries again */
        coord_log(COORD_LOG_ERROR, "round_start_failed", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(sfl_last_error(), q, sizeof(q)));
        goto out;
    }
    o = sfl__calloc(1, sizeof(*o) + (j->rnd.nmembers ? j->rnd.nmembers : 1) * sizeof(int64_t));
    if (o == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for the cohort");
        goto fail;
    }
    j->wire_attempt = j->used++;
    randombytes_buf(j->rnd.nonce, sizeof(j->rnd.nonce));
    j->deadline_wall = coord_wall_ms() + (int64_t)rc_->deadline_ms;
    if (j->round_since == 0)
        j->round_since = now;
    o->op.run = open_run;
    o->op.done = open_done;
    o->co = co;
    o->job = j->id;
    o->seq = ++j->open_seq;
    o->round = (int64_t)j->rnd.round;
    o->attempt = (int64_t)j->wire_attempt + 1;
    memcpy(o->nonce, j->rnd.nonce, sizeof(o->nonce));
    o->n = j->rnd.nmembers;
    for (uint32_t i = 0; i < j->rnd.nmembers; i++)
        o->cohort[i] = (int64_t)j->rnd.members[i].agent;
    coord_part_flush(co); /* the writer keeps the order: earlier records first */
    coord_writer_post(co->writer, &o->op);
    j->opened = j->opening = 1;
    if ((rc = key_new(&j->key)) < 0 || (rc = j->shape->open(j)) < 0 ||
        (rc = build_task(j)) < 0 || (rc = j->shape->start(j)) < 0)
        goto fail;
    memset(&j->fold, 0, sizeof(j->fold));
    coord_log(COORD_LOG_INFO, "round_open",
              "job=%llu round=%llu attempt=%u selected=%u eligible=%u deadline_ms=%llu",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
              j->rnd.nmembers, n, (unsigned long long)rc_->deadline_ms);
    goto out; /* the tasks go out in open_done */
fail:
    /* The task cannot be made: nothing an agent can fix, so the job stops
     * with the reason instead of burning its attempts. */
    if (!j->opening)
        sfl__free(o);
    j->opening = 0;
    snprintf(why, sizeof(why), "cannot open round %llu: %s", (unsigned long long)j->rnd.round,
             sfl_last_error());
    coord_log(COORD_LOG_ERROR, "round_open_failed", "job=%llu error=%s",
              (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
    pause_failed(j, why);
out:
    sfl__free(ids);
}

/* JobStatus's last_* after a restart: the last committed round's row. */
void coord_load_last_metrics(coord_job_t *j)
{
    coord_history_row_t *h = NULL;
    size_t n = 0;

    memset(&j->last, 0, sizeof(j->last));
    if (j->committed == 0)
        return;
    if (coord_store_history(j->co->store, (int64_t)j->id, (int64_t)j->committed - 1, 1, &h,
                            &n) == 0 &&
        n == 1)
        j->last = h[0].m;
    coord_store_free(h);
}

int coord_reload_model(coord_job_t *j)
{
    coord_t *co = j->co;
    uint8_t *buf = NULL, hash[COORD_HASH_BYTES];
    size_t len = 0;
    int64_t round = 0;
    int rc;

    /* A checkpoint is at most 5 (varint index gap) + 8 (f64) bytes a
     * coordinate plus its header. */
    rc = coord_store_checkpoint_latest(co->store, (int64_t)j->id, j->model.dim * 13 + 64,
                                       &round, &buf, &len, hash);
    if (rc == SFL_ENOTFOUND) {
        coord_model_start_model(&j->model);
        j->committed = 0;
        j->model_nnz = (uint32_t)sfl_dvec_nnz(j->model.global, j->model.prob.dim);
        memset(&j->last, 0, sizeof(j->last));
        return 0;
    }
    if (rc == 0)
        rc = coord_model_restore(&j->model, (uint64_t)round, buf, len);
    coord_store_free(buf);
    if (rc == 0) {
        j->committed = (uint64_t)round;
        j->model_nnz = (uint32_t)sfl_dvec_nnz(j->model.global, j->model.prob.dim);
        coord_load_last_metrics(j);
    }
    return rc;
}

/* Thread pool: the aggregation's end and the checkpoint's encoding. The
 * commit is the writer's (commit_run). */
static void agg_work(uv_work_t *w)
{
    coord_job_t *j = w->data;
    uint64_t t0 = uv_hrtime();
    int rc = j->shape->fold(j);

    if (rc < 0)
        coord_text_copy(j->work_err, sizeof(j->work_err), sfl_last_error());
    j->work_rc = rc;
    j->work_ns = uv_hrtime() - t0;
}

static void attempt_failed(coord_job_t *j);
static void agg_finish(coord_job_t *j);

static void next_round(coord_job_t *j)
{
    coord_t *co = j->co;
    uint64_t now = coord_now_ms(co);

    if (j->round_since) {
        coord_hist_observe(&co->round_hist, (double)(now - j->round_since) / 1000.0);
        j->round_since = 0;
    }
    if (j->committed >= j->spec.rounds && !coord_job_final(j)) {
        coord_set_job_state(j, SFL_JOB_FINISHED, NULL, NULL);
        coord_round_close(&j->rnd);
        coord_round_init(&j->rnd, &j->model.rcfg, j->id, j->committed + 1);
        return;
    }
    coord_reset_round(j);
}

/* The aggregation is over, committed (work_rc 0) or not. */
static void agg_finish(coord_job_t *j)
{
    coord_t *co = j->co;
    char sus[SFL_MSG_TEXT_LEN] = "";
    uint32_t n3 = 0;
    int unattributable;

    j->busy = 0;
    j->opened = j->work_rc != 0; /* a commit closes the attempt's row */
    sfl__free(j->work_buf);
    j->work_buf = NULL;
    unattributable = j->shape->settle(j, sus, sizeof(sus), &n3);
    j->shape->close(j);
    if (j->work_rc == 0) {
        step(j, COORD_EV_AGGREGATED, coord_now_ms(co));
        j->shape->committed(j);
        next_round(j);
    } else {
        j->shape->failed(j, unattributable, sus, n3);
        attempt_failed(j);
    }
    coord_job_release(j);
    if (co->stopping)
        coord_check_stopped(co);
    else {
        coord_job_drive(j);
        coord_dismiss_idle(co);
    }
}

/* A commit's outcome (a round's or the statistics round's) back on the loop. */
void coord_commit_outcome(coord_job_t *j, coord_write_op_t *op)
{
    if (!op->abandoned) {
        if (op->rc < 0)
            coord_leader_write_failed(j->co, op->rc); /* fenced: stops serving */
        j->work_rc = op->rc;
        if (op->rc < 0)
            coord_text_copy(j->work_err, sizeof(j->work_err), op->error);
        agg_finish(j);
    }
}

static void agg_after(uv_work_t *w, int status)
{
    coord_job_t *j = w->data;

    (void)status; /* work items are never cancelled */
    if (j->work_rc == 0) {
        if (j->shape->commit(j) == 0)
            return; /* coord_commit_outcome follows */
        j->work_rc = SFL_ENOMEM;
        coord_text_copy(j->work_err, sizeof(j->work_err), "no memory for the commit");
    }
    agg_finish(j);
}

static void start_aggregation(coord_job_t *j)
{
    int rc;

    sfl_metrics_means(&j->fold, &j->work_metrics); /* the round's means */
    j->shape->record(j); /* the kind's figures and records, before the commit's */
    store_round_state(j, COORD_SROW_AGGREGATING, NULL);
    coord_close_attempt(j);
    j->busy = 1;
    j->work.data = j;
    j->work_rc = 0;
    j->work_err[0] = '\0';
    rc = uv_queue_work(j->co->loop, &j->work, agg_work, agg_after);
    if (rc != 0) {
        j->busy = 0;
        step(j, COORD_EV_AGG_FAILED, coord_now_ms(j->co));
    }
}

static void attempt_failed(coord_job_t *j)
{
    coord_t *co = j->co;
    char reason[sizeof(j->rnd.reason)], q[300];
    int rc;

    snprintf(reason, sizeof(reason), "%s", j->rnd.reason);
    store_round_state(j, COORD_SROW_FAILED, reason);
    j->opened = 0;
    coord_close_attempt(j);
    j->shape->close(j);
    co->rounds_failed++;
    coord_log(COORD_LOG_WARN, "round_failed", "job=%llu round=%llu attempt=%u reason=%s",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
              coord_log_quote(reason, q, sizeof(q)));
    rc = coord_round_step(&j->rnd, COORD_EV_RETRY, coord_now_ms(co), 0, NULL, 0);
    if (rc < 0) {
        char why[SFL_MSG_TEXT_LEN];

        /* Out of attempts: the job pauses with the reason, and an operator
         * who fixed the cause resumes it with a fresh budget. */
        snprintf(why, sizeof(why), "%s", sfl_last_error());
        coord_reset_round(j);
        if (j->state == SFL_JOB_RUNNING) {
            coord_text_copy(j->error, sizeof(j->error), why);
            coord_set_job_state(j, SFL_JOB_PAUSED, NULL, NULL);
            coord_log(COORD_LOG_WARN, "job_paused", "job=%llu error=%s",
                      (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
        }
        return;
    }
    j->wire_attempt++;
    j->select_since = coord_now_ms(co);
}

/* One switch over the round state; each case does what the state asks
 * for and may move the machine on, which the loop then follows. */
void coord_job_drive(coord_job_t *j)
{
    for (int turn = 0; turn < 8; turn++) {
        coord_round_state_t before = j->rnd.state;

        if (!coord_running(j) || j->busy)
            return;
        switch (j->rnd.state) {
        case COORD_ROUND_SELECTING:
            try_start(j);
            break;
        case COORD_ROUND_TRAINING:
            step(j, COORD_EV_TICK, coord_now_ms(j->co));
            j->shape->sync(j);
            break;
        case COORD_ROUND_AGGREGATING:
            start_aggregation(j);
            break;
        case COORD_ROUND_COMMITTED:
            next_round(j);
            break;
        case COORD_ROUND_FAILED:
            attempt_failed(j);
            break;
        }
        if (j->rnd.state == before)
            return;
    }
}

void coord_schedule(coord_t *co)
{
    if (co->stopping)
        return;
    for (size_t i = 0; i < co->njobs; i++)
        coord_job_drive(co->jobs[i]);
    coord_dismiss_idle(co);
}

static void on_sched_check(uv_check_t *h)
{
    coord_t *co = h->data;

    uv_check_stop(h);
    co->sched_pending = 0;
    coord_schedule(co);
}

void coord_schedule_soon(coord_t *co)
{
    if (co->sched_pending || co->stopping || co->finished)
        return;
    co->sched_pending = 1;
    uv_check_start(&co->sched_check, on_sched_check);
}

void coord_on_tick(uv_timer_t *t)
{
    coord_t *co = t->data;
    uint64_t hr = uv_hrtime();

    /* Loop lag: how late this tick runs, i.e. how long the loop was kept
     * from its timers (a handler, a store write waiting on SQLite). */
    if (co->tick_hr != 0) {
        uint64_t due = co->tick_hr + co->cfg.tick_ms * 1000000u;
        double lag = hr > due ? (double)(hr - due) / 1e9 : 0.0;

        coord_hist_observe(&co->lag_hist, lag);
        if (lag > co->lag_max)
            co->lag_max = lag;
    }
    co->tick_hr = hr;
    coord_part_flush(co);
#ifdef __GLIBC__
    uint64_t gone = co->tls_refused + co->conns_closed;

    /* A burst of connections (a reconnect storm, a half-open flood) leaves
     * glibc's heap holding their freed TLS state: given back once 64 or
     * more have gone since the last time. */
    if (gone - co->trimmed_at >= 64) {
        malloc_trim(0);
        co->trimmed_at = gone;
    }
#endif
    coord_schedule(co);
}

/* Shutdown: finish what can be finished. An attempt with its quorum is
 * aggregated now (time is moved to its deadline, where the machine closes
 * it on quorum), others are recorded failed. */
void coord_drive_wind_down(coord_t *co)
{
    for (size_t i = 0; i < co->njobs; i++) {
        coord_job_t *j = co->jobs[i];

        if (!j->ready || j->busy || j->state != SFL_JOB_RUNNING ||
            j->rnd.state != COORD_ROUND_TRAINING)
            continue;
        if (j->rnd.accepted >= j->rnd.cfg.min_quorum) {
            step(j, COORD_EV_TICK, j->rnd.deadline_at_ms);
            if (j->rnd.state == COORD_ROUND_AGGREGATING) {
                start_aggregation(j);
                continue;
            }
        }
        coord_abandon(j, "coordinator shutting down");
    }
}

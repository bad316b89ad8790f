#include "coord.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/alloc.h"
#include "sfl/grpc.h"
#include "sfl/grpcconn.h"
#include "sfl/ini.h"
#include "sfl/msg.h"
#include "sfl/seal.h"
#include "sfl/transport.h"

#include "coord_int.h"


/* Peer-supplied or library text into a wire text field: printable ASCII
 * only (the field's rule), truncated to fit. */
void coord_text_copy(char *dst, size_t cap, const char *src)
{
    size_t i = 0;

    for (; src[i] && i + 1 < cap; i++)
        dst[i] = src[i] >= 0x20 && src[i] <= 0x7e ? src[i] : '?';
    dst[i] = '\0';
}

/* ---- state ---------------------------------------------------------------------- */


uint64_t coord_now_ms(const coord_t *co)
{
    return uv_now(co->loop);
}

int64_t coord_wall_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

agent_t *coord_agent_find(const coord_t *co, uint64_t id)
{
    size_t lo = 0, hi = co->nagents;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (co->agents[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < co->nagents && co->agents[lo]->id == id ? co->agents[lo] : NULL;
}

static int fpr_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

bool coord_cert_revoked(const coord_t *co, const uint8_t fpr[32])
{
    return co->nrevoked > 0 && bsearch(fpr, co->revoked, co->nrevoked, 32, fpr_cmp) != NULL;
}

agent_t *coord_agent_by_name(const coord_t *co, const char *name)
{
    for (size_t i = 0; i < co->nagents; i++)
        if (strcmp(co->agents[i]->name, name) == 0)
            return co->agents[i];
    return NULL;
}

int coord_agent_insert(coord_t *co, agent_t *a)
{
    size_t pos = co->nagents;

    if (co->nagents == co->cap_agents) {
        size_t cap = co->cap_agents ? 2 * co->cap_agents : 16;
        agent_t **na = sfl__reallocarray(co->agents, cap, sizeof(*na));

        if (na == NULL)
            return SFL_ENOMEM;
        co->agents = na;
        co->cap_agents = cap;
    }
    while (pos > 0 && co->agents[pos - 1]->id > a->id)
        pos--;
    memmove(co->agents + pos + 1, co->agents + pos, (co->nagents - pos) * sizeof(*co->agents));
    co->agents[pos] = a;
    co->nagents++;
    return 0;
}

job_t *coord_job_find(const coord_t *co, uint64_t id)
{
    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->id == id)
            return co->jobs[i];
    return NULL;
}

int coord_job_final(const job_t *j)
{
    return j->state == SFL_JOB_CANCELLED || j->state == SFL_JOB_FINISHED ||
           j->state == SFL_JOB_FAILED;
}

/* Comma-separated tags for the store's text column. */
void coord_tags_text(const sfl_tags_t *t, char *out, size_t cap)
{
    size_t o = 0;

    out[0] = '\0';
    for (uint32_t i = 0; i < t->n; i++) {
        int n = snprintf(out + o, cap - o, "%s%s", i ? "," : "", t->tag[i]);

        if (n < 0 || (size_t)n >= cap - o) {
            out[o] = '\0';
            return;
        }
        o += (size_t)n;
    }
}

static void tags_parse(const char *s, sfl_tags_t *t)
{
    memset(t, 0, sizeof(*t));
    while (*s) {
        char tag[SFL_MSG_TAG_LEN];
        size_t n = strcspn(s, ",");

        if (n > 0 && n < sizeof(tag)) {
            memcpy(tag, s, n);
            tag[n] = '\0';
            if (sfl_msg_tags_add(t, tag) < 0) {
                /* a stored tag that is no longer valid is dropped */
            }
        }
        s += n + (s[n] == ',');
    }
}

/* ---- eligibility and pace steering ------------------------------------------------- */

/* Why the agent cannot serve the job (COORD_INELIG_NONE: it can), with a
 * detail into why (may be NULL) for the job's waiting reason. */
static coord_inelig_t ineligible(const job_t *j, const agent_t *a, char *why, size_t cap)
{
    const char *conds[2 * SFL_MSG_MAX_TAGS];
    coord_agent_info_t info;
    coord_inelig_t r;
    uint32_t n = 0;
    char tmp[1];

    if (why == NULL) {
        why = tmp;
        cap = sizeof(tmp);
    }
    if (!a->joined) {
        snprintf(why, cap, "not joined since the coordinator started");
        return COORD_INELIG_NOT_JOINED;
    }
    /* A job's required conditions may be met by a capability ("gpu") or
     * by a reported condition ("mains_power"). */
    for (uint32_t i = 0; i < a->caps.n; i++)
        conds[n++] = a->caps.tag[i];
    for (uint32_t i = 0; i < a->conds.n; i++)
        conds[n++] = a->conds.tag[i];
    /* Agents widen narrower local data to the task's dimension (a LibSVM
     * shard need not use the last column); wider data cannot fit. Agents
     * report integer targets as labels, which a regression job ignores. */
    info = (coord_agent_info_t){a->ds.dimension <= j->model.spec.dimension ? j->model.spec.dimension
                                                                       : a->ds.dimension,
                                j->spec.nlabels ? a->ds.nlabels : 0, a->ds.samples, n,
                                conds};
    if ((r = coord_job_ineligible(&j->model.spec, &info, why, cap)) != COORD_INELIG_NONE)
        return r;
    for (uint32_t i = 0; j->spec.nlabels && i < a->ds.nlabels; i++) {
        uint32_t k = 0;

        while (k < j->spec.nlabels && j->spec.labels[k] != a->ds.labels[i])
            k++;
        if (k == j->spec.nlabels) {
            snprintf(why, cap, "label %g not among the job's labels", a->ds.labels[i]);
            return COORD_INELIG_LABELS;
        }
    }
    return COORD_INELIG_NONE;
}

static int eligible(const job_t *j, const agent_t *a)
{
    return j->ready && ineligible(j, a, NULL, 0) == COORD_INELIG_NONE;
}

int coord_running(const job_t *j)
{
    return j->ready && j->state == SFL_JOB_RUNNING && !j->co->stopping;
}

/* Selected for another job's attempt and not done with it yet. */
static int busy_elsewhere(const coord_t *co, const agent_t *a, const job_t *self)
{
    for (size_t i = 0; i < co->njobs; i++) {
        const job_t *j = co->jobs[i];
        const coord_member_t *m;

        if (j == self || !coord_running(j) || j->rnd.state != COORD_ROUND_TRAINING)
            continue;
        m = coord_round_member(&j->rnd, a->id);
        if (m && m->state == COORD_MEMBER_PENDING)
            return 1;
    }
    return 0;
}

/* Some running job could select the agent (now or in a later round). */
static int usable(const coord_t *co, const agent_t *a)
{
    for (size_t i = 0; i < co->njobs; i++)
        if (coord_running(co->jobs[i]) && eligible(co->jobs[i], a))
            return 1;
    return 0;
}

/* ---- Subscribe streams ---------------------------------------------------------- */

void coord_end_sub(agent_t *a, int status, const char *msg)
{
    sfl_grpc_call_t *call = a->sub;

    if (call == NULL)
        return;
    a->sub = NULL;
    (void)sfl_grpc_finish(call, status, msg);
}

static void send_wait(coord_t *co, agent_t *a, uint32_t retry_ms, const char *reason)
{
    sfl_wait_t w = {0};
    uint8_t *buf = NULL;
    size_t len;
    int rc;

    if (a->sub == NULL)
        return;
    w.retry_after_ms = retry_ms;
    coord_text_copy(w.reason, sizeof(w.reason), reason);
    rc = sfl_msg_wait_pack(&w, &buf, &len);
    if (rc == 0)
        rc = sfl_grpc_send(a->sub, buf, len);
    sfl_msg_buf_free(buf);
    coord_log(COORD_LOG_DEBUG, "wait", "agent=%llu retry_ms=%u", (unsigned long long)a->id,
              retry_ms);
    coord_end_sub(a, rc == 0 ? SFL_GRPC_STATUS_OK : SFL_GRPC_STATUS_INTERNAL,
            rc == 0 ? NULL : "cannot send wait");
    (void)co;
}

void coord_send_task(coord_t *co, job_t *j, agent_t *a)
{
    int rc;

    if (a->sub == NULL || j->task == NULL || j->opening)
        return; /* an opening attempt's tasks go out once it is recorded */
    rc = sfl_grpc_send(a->sub, j->task, j->task_len);
    a->sub_idle_since = coord_now_ms(co);
    if (rc >= 0)
        j->fold.bytes_down += j->task_len;
    if (rc < 0) {
        char q[300];

        coord_log(COORD_LOG_WARN, "task_send_failed", "job=%llu round=%llu agent=%llu error=%s",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                  (unsigned long long)a->id, coord_log_quote(sfl_last_error(), q, sizeof(q)));
        coord_end_sub(a, rc == SFL_ELIMIT ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                    : SFL_GRPC_STATUS_INTERNAL,
                "cannot send the task");
    }
}

/* Ends, with a paced Wait, the streams that got nothing for the hold time.
 * Until then every subscriber keeps its stream, whether a running job can
 * use it or not, selected or not: a round that opens (the next round, a
 * retry, a job created or resumed) reaches it at once, instead of after a
 * Wait it cannot be called back from. */
void coord_dismiss_idle(coord_t *co)
{
    uint64_t now = coord_now_ms(co);

    for (size_t i = 0; i < co->nagents; i++) {
        agent_t *a = co->agents[i];
        int use;

        if (a->sub == NULL || now - a->sub_idle_since < co->cfg.subscribe_hold_ms ||
            busy_elsewhere(co, a, NULL))
            continue;
        use = usable(co, a);
        send_wait(co, a, (uint32_t)(use ? co->cfg.pace_min_ms : co->cfg.idle_retry_ms),
                  use ? "no round started within the hold time" : "no running job for this agent");
    }
}

void coord_sub_cancelled(sfl_grpc_call_t *call, void *ud)
{
    agent_t *a = ud;

    if (a->sub == call)
        a->sub = NULL;
    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
}

/* ---- rounds --------------------------------------------------------------------------- */

void coord_job_drive(job_t *j);

/* An event the machine refuses is a bug here, not a peer's doing. */
static void step(job_t *j, coord_event_t ev, uint64_t now)
{
    if (coord_round_step(&j->rnd, ev, now, 0, NULL, 0) < 0) {
        char q[300];

        coord_log(COORD_LOG_ERROR, "round_event_refused", "job=%llu event=%d error=%s",
                  (unsigned long long)j->id, (int)ev,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
    }
}

/* The attempt's round key, shared by reference count with workers verifying
 * updates sealed to it (loop thread only): closing the attempt drops the
 * job's reference, the last one wipes the secret. */

static int key_new(attempt_key_t **out)
{
    attempt_key_t *k = sfl__calloc(1, sizeof(*k));
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

attempt_key_t *coord_key_hold(attempt_key_t *k)
{
    k->refs++;
    return k;
}

void coord_key_drop(attempt_key_t *k)
{
    if (k != NULL && --k->refs == 0) {
        sfl_roundkey_free(k->rk);
        sfl__free(k);
    }
}

static void close_attempt(job_t *j)
{
    /* Wiping the round key is what makes every later update for this
     * attempt unopenable, by anyone (after a worker still verifying one
     * has finished). */
    coord_key_drop(j->key);
    j->key = NULL;
    sfl_msg_buf_free(j->task);
    j->task = NULL;
    j->task_len = 0;
}

static void store_round_state(job_t *j, coord_srow_state_t st, const char *reason)
{
    if (!j->opened)
        return;
    coord_part_flush(j->co); /* the attempt's records before its outcome */
    coord_write_round_state(j->co, j->id, j->rnd.round, j->wire_attempt, st, reason);
}

/* The round after the last committed one, in SELECTING, with the next
 * attempt number (attempts are never reused, not even across restarts:
 * job_prepare starts the count from the store), and a fresh attempt
 * budget. */
void coord_reset_round(job_t *j)
{
    coord_round_close(&j->rnd);
    coord_round_init(&j->rnd, &j->model.rcfg, j->id, j->committed + 1);
    if (j->used_round != j->committed + 1) {
        j->used_round = j->committed + 1;
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

static uint64_t live_job_bytes(const coord_t *co)
{
    uint64_t n = 0;

    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->ready && !coord_job_final(co->jobs[i]))
            n += coord_job_state_bytes(co->jobs[i]->model.prob.dim);
    return n;
}

/* A job that is not running keeps its model in the store (checkpoints:
 * ExportModel reads them, job_model reloads them), not in RAM; one
 * aggregating on the thread pool is released when it returns (agg_after). */
static void job_release(job_t *j)
{
    if (!j->busy && j->model.global != NULL && j->state != SFL_JOB_RUNNING)
        coord_job_close(&j->model);
}

/* The state takes effect here at once (a paused job opens no round from
 * now on); the record follows on the writer, and after answers whoever
 * must know it is durable. */
void coord_set_job_state(job_t *j, sfl_job_state_t st, coord_written_cb after, void *ud)
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
    job_release(j);
}

/* Leaves the open attempt uncommitted (pause, cancel, shutdown). */
void coord_abandon(job_t *j, const char *reason)
{
    if (j->busy || !j->ready)
        return; /* the aggregation in flight ends it */
    if (j->rnd.state == COORD_ROUND_TRAINING || j->rnd.state == COORD_ROUND_AGGREGATING) {
        store_round_state(j, COORD_SROW_FAILED, reason);
        coord_log(COORD_LOG_INFO, "round_abandoned", "job=%llu round=%llu attempt=%u reason=\"%s\"",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round, j->wire_attempt,
                  reason);
    }
    close_attempt(j);
    coord_reset_round(j);
}

/* The job cannot go on: it stops here and the failure is recorded (the
 * writer records it before anything posted later), so that a restart
 * does not run it again; a record that fails is logged as missing. */
static void fail_job(job_t *j, const char *why)
{
    char q[300];

    coord_write_job_fail(j->co, j->id, why);
    coord_text_copy(j->error, sizeof(j->error), why);
    j->state = SFL_JOB_FAILED;
    coord_log(COORD_LOG_ERROR, "job_state", "job=%llu state=failed error=%s",
              (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
}

static void pause_failed(job_t *j, const char *why)
{
    coord_text_copy(j->error, sizeof(j->error), why);
    coord_abandon(j, why);
    coord_set_job_state(j, SFL_JOB_PAUSED, NULL, NULL);
}

static int build_task(job_t *j)
{
    coord_t *co = j->co;
    sfl_task_t t;
    sfl_spvec_t *model = NULL;
    uint8_t *tb = NULL, sig[SFL_SEAL_SIG_BYTES];
    size_t tl = 0;
    int rc;

    memset(&t, 0, sizeof(t));
    if ((rc = sfl_spvec_new((uint32_t)j->model.prob.dim, 0, &model)) < 0 ||
        (rc = sfl_spvec_from_dense(model, j->model.global)) < 0)
        goto out;
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
    t.update_mode = SFL_UPDATE_MODE_SEALED;
    t.model = model;
    /* The model always travels exactly (float64): agents must train from
     * the very state the coordinator aggregates into. */
    t.model_encoding = SFL_ENC_F64;
    t.deadline_ms = j->deadline_wall;
    memcpy(t.round_nonce, j->rnd.nonce, sizeof(t.round_nonce));
    memcpy(t.round_key, j->key->rk->pk, sizeof(t.round_key));
    t.max_update_nnz = 0;
    if ((rc = sfl_msg_task_sign_bytes(&t, &tb, &tl)) < 0 ||
        (rc = sfl_seal_sign_detached(co->id, SFL_MSG_TASK_CONTEXT, tb, tl, sig)) < 0 ||
        (rc = sfl_msg_task_pack(tb, tl, sig, &j->task, &j->task_len)) < 0)
        goto out;
    if (j->task_len > co->cfg.max_message) {
        rc = sfl__fail(SFL_ELIMIT, "task of %zu bytes exceeds max_message %llu", j->task_len,
                       (unsigned long long)co->cfg.max_message);
        goto out;
    }
    memcpy(j->model_hash, t.model_hash, sizeof(j->model_hash));
out:
    sfl_msg_buf_free(tb);
    sfl_spvec_free(model);
    return rc;
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

/* Why a job in SELECTING with n available agents cannot start its round
 * (fewer than min_quorum), into j->waiting, logged once per change: the
 * counts of connected, eligible and available agents, and the most common
 * reason the others are not eligible, with the first such agent's detail.
 * Empty once the round can start. */
static void note_waiting(job_t *j, uint32_t n)
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
        const agent_t *a = co->agents[i];
        coord_inelig_t r;

        if (a->conn == NULL)
            continue;
        connected++;
        if ((r = ineligible(j, a, NULL, 0)) == COORD_INELIG_NONE) {
            elig++;
            continue;
        }
        /* the detail only for the first of each reason: this runs every
         * tick while the job waits, over every agent */
        if (count[r]++ == 0) {
            first[r] = a->id;
            (void)ineligible(j, a, detail[r], sizeof(detail[r]));
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
    if (elig > n)
        put(text, sizeof(text), &o, ", %u of them busy", elig - n);
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

static int job_model(job_t *j);

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
    job_t *j = op->abandoned ? NULL : coord_job_find(co, o->job);
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
    if (op->rc < 0) {
        /* Nothing an agent can fix: the job pauses with the reason instead
         * of burning its attempts. */
        snprintf(why, sizeof(why), "cannot open round %lld: %.200s", (long long)o->round, op->error);
        coord_log(COORD_LOG_ERROR, "round_open_failed", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(why, q, sizeof(q)));
        j->opened = 0; /* no row to mark failed */
        pause_failed(j, why);
    } else {
        for (uint32_t i = 0; i < j->rnd.nmembers; i++) {
            agent_t *a = coord_agent_find(co, j->rnd.members[i].agent);

            if (a)
                coord_send_task(co, j, a);
        }
    }
    sfl__free(o);
    coord_schedule(co);
}

/* SELECTING: start the attempt once enough eligible agents subscribe. The
 * full selection (cohort * (1 + over_selection)) starts at once; a smaller
 * one that still reaches the quorum after select_wait_ms. Fewer than the
 * quorum keep waiting without using up an attempt. */
static void try_start(job_t *j)
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
    for (size_t i = 0; i < co->nagents; i++) {
        agent_t *a = co->agents[i];

        if (a->sub && a->conn && eligible(j, a) && !busy_elsewhere(co, a, j))
            ids[n++] = a->id;
    }
    note_waiting(j, n);
    if (n < rc_->min_quorum || (n < want && now - j->select_since < co->cfg.select_wait_ms))
        goto out;
    if ((rc = job_model(j)) < 0) {
        snprintf(why, sizeof(why), "cannot load the last checkpoint: %s", sfl_last_error());
        if (rc == SFL_ENOMEM)
            pause_failed(j, why); /* the operator may resume once memory is there */
        else
            fail_job(j, why);
        goto out;
    }
    if ((rc = coord_round_step(&j->rnd, COORD_EV_START, now, j->spec.seed, ids, n)) < 0) {
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
    if ((rc = key_new(&j->key)) < 0 || (rc = coord_job_begin(&j->model, j->rnd.nmembers)) < 0 ||
        (rc = build_task(j)) < 0)
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
static void load_last_metrics(job_t *j)
{
    coord_srow_history_t *h = NULL;
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

static int reload_model(job_t *j)
{
    coord_t *co = j->co;
    uint8_t *buf = NULL, hash[COORD_HASH_BYTES];
    size_t len = 0;
    int64_t round = 0;
    int rc;

    /* A checkpoint is at most 5 (varint index gap) + 8 (f64) bytes a
     * coordinate plus its header. */
    rc = coord_store_checkpoint_latest(co->store, (int64_t)j->id, j->model.prob.dim * 13 + 64,
                                       &round, &buf, &len, hash);
    if (rc == SFL_ENOTFOUND) {
        memset(j->model.global, 0, j->model.prob.dim * sizeof(double));
        j->model.round = 0;
        j->committed = 0;
        j->model_nnz = 0;
        memset(&j->last, 0, sizeof(j->last));
        return 0;
    }
    if (rc == 0)
        rc = coord_job_restore(&j->model, (uint64_t)round, buf, len);
    coord_store_free(buf);
    if (rc == 0) {
        j->committed = (uint64_t)round;
        j->model_nnz = (uint32_t)sfl_dvec_nnz(j->model.global, j->model.prob.dim);
        load_last_metrics(j);
    }
    return rc;
}

/* Thread pool: the aggregation's end and the checkpoint's encoding. The
 * commit is the writer's (commit_run). */
static void agg_work(uv_work_t *w)
{
    job_t *j = w->data;
    uint64_t t0 = uv_hrtime();
    int rc;

    rc = coord_job_end(&j->model);
    if (rc == 0)
        rc = coord_job_encode(&j->model, &j->work_buf, &j->work_len, j->work_hash);
    if (rc == 0) {
        j->work_nnz = (uint32_t)sfl_dvec_nnz(j->model.global, j->model.prob.dim);
        j->work_metrics.model_nnz = j->work_nnz;
    }
    if (rc < 0)
        coord_text_copy(j->work_err, sizeof(j->work_err), sfl_last_error());
    j->work_rc = rc;
    j->work_ns = uv_hrtime() - t0;
}

void coord_check_stopped(coord_t *co);
static void attempt_failed(job_t *j);

static void next_round(job_t *j)
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
static void agg_finish(job_t *j)
{
    coord_t *co = j->co;
    char q[300], hex[65];

    j->busy = 0;
    j->opened = j->work_rc != 0; /* a commit closes the attempt's row */
    sfl__free(j->work_buf);
    j->work_buf = NULL;
    if (j->work_rc == 0) {
        step(j, COORD_EV_AGGREGATED, coord_now_ms(co));
        j->committed = j->model.round;
        j->model_nnz = j->work_nnz;
        j->last = j->work_metrics;
        co->rounds_committed++;
        coord_hist_observe(&co->agg_hist, (double)j->work_ns / 1e9);
        sodium_bin2hex(hex, sizeof(hex), j->model_hash, 8);
        coord_log(COORD_LOG_INFO, "round_committed",
                  "job=%llu round=%llu attempt=%u accepted=%u nnz=%u aggregate_ms=%.3f "
                  "train_loss=%.6g eval_samples=%llu eval_accuracy=%.6g eval_mse=%.6g",
                  (unsigned long long)j->id, (unsigned long long)j->committed, j->wire_attempt,
                  j->rnd.accepted, j->model_nnz, (double)j->work_ns / 1e6, j->last.train_loss,
                  (unsigned long long)j->last.eval_samples, j->last.eval_accuracy,
                  j->last.eval_mse);
        next_round(j);
    } else {
        coord_log(COORD_LOG_ERROR, "aggregation_failed", "job=%llu round=%llu error=%s",
                  (unsigned long long)j->id, (unsigned long long)j->rnd.round,
                  coord_log_quote(j->work_err, q, sizeof(q)));
        /* The model may have moved (end ran, the commit did not): back to
         * the last committed state. */
        if (reload_model(j) < 0) {
            char why[SFL_MSG_TEXT_LEN];

            snprintf(why, sizeof(why), "cannot reload the last checkpoint: %s",
                     sfl_last_error());
            fail_job(j, why);
        }
        step(j, COORD_EV_AGG_FAILED, coord_now_ms(co));
        attempt_failed(j);
    }
    job_release(j);
    if (co->stopping)
        coord_check_stopped(co);
    else {
        coord_job_drive(j);
        coord_dismiss_idle(co);
    }
}

/* The commit: the round, its checkpoint and metrics in one transaction. */
typedef struct {
    coord_write_op_t op;
    job_t *j;
    int64_t round, attempt;
    coord_round_metrics_t metrics;
    const uint8_t *buf; /* j->work_buf: the job stays busy until done */
    size_t len;
} commit_op_t;

static int commit_run(coord_store_t *s, coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;

    return coord_store_round_commit(s, (int64_t)o->j->id, o->round, o->attempt, o->buf, o->len,
                                    &o->metrics, NULL);
}

static void commit_done(coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;
    job_t *j = o->j;

    if (!op->abandoned) {
        j->work_rc = op->rc;
        if (op->rc < 0)
            coord_text_copy(j->work_err, sizeof(j->work_err), op->error);
        agg_finish(j);
    }
    sfl__free(o);
}

static void agg_after(uv_work_t *w, int status)
{
    job_t *j = w->data;
    commit_op_t *o;

    (void)status; /* work items are never cancelled */
    if (j->work_rc == 0) {
        if ((o = sfl__calloc(1, sizeof(*o))) == NULL) {
            j->work_rc = SFL_ENOMEM;
            coord_text_copy(j->work_err, sizeof(j->work_err), "no memory for the commit");
        } else {
            o->op.run = commit_run;
            o->op.done = commit_done;
            o->j = j;
            o->round = (int64_t)j->rnd.round;
            o->attempt = (int64_t)j->wire_attempt + 1;
            o->metrics = j->work_metrics;
            o->buf = j->work_buf;
            o->len = j->work_len;
            coord_part_flush(j->co); /* the attempt's records in before its commit */
            coord_writer_post(j->co->writer, &o->op);
            return;
        }
    }
    agg_finish(j);
}

/* The attempt's progress as sample-weighted means. A mean that is not
 * finite (sums beyond the double range) is dropped, not stored. */
static void fold_metrics(job_t *j)
{
    coord_round_metrics_t *m = &j->work_metrics;

    memset(m, 0, sizeof(*m));
    m->bytes_down = j->fold.bytes_down > INT64_MAX ? INT64_MAX : j->fold.bytes_down;
    if (j->fold.samples > 0) {
        m->samples = j->fold.samples;
        m->train_loss = j->fold.loss / (double)j->fold.samples;
    }
    if (j->fold.eval_samples > 0) {
        m->eval_samples = j->fold.eval_samples;
        m->eval_accuracy = j->fold.accuracy / (double)j->fold.eval_samples;
        m->eval_mse = j->fold.mse / (double)j->fold.eval_samples;
    }
    /* SQLite integers are signed 64-bit. */
    if (!isfinite(m->train_loss) || m->samples > INT64_MAX) {
        m->samples = 0;
        m->train_loss = 0;
    }
    if (!isfinite(m->eval_accuracy) || !isfinite(m->eval_mse) || m->eval_samples > INT64_MAX) {
        m->eval_samples = 0;
        m->eval_accuracy = m->eval_mse = 0;
    }
}

static void start_aggregation(job_t *j)
{
    int rc;

    fold_metrics(j);
    store_round_state(j, COORD_SROW_AGGREGATING, NULL);
    close_attempt(j);
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

static void attempt_failed(job_t *j)
{
    coord_t *co = j->co;
    char reason[sizeof(j->rnd.reason)], q[300];
    int rc;

    snprintf(reason, sizeof(reason), "%s", j->rnd.reason);
    store_round_state(j, COORD_SROW_FAILED, reason);
    j->opened = 0;
    close_attempt(j);
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
void coord_job_drive(job_t *j)
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

static void on_tick(uv_timer_t *t)
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

/* ---- jobs ----------------------------------------------------------------------------- */

static void job_free(job_t *j)
{
    if (j == NULL)
        return;
    close_attempt(j);
    coord_round_close(&j->rnd);
    if (j->ready)
        coord_job_close(&j->model);
    sfl__free(j->work_buf);
    sfl__free(j);
}

static int job_insert(coord_t *co, job_t *j)
{
    if (co->njobs == co->cap_jobs) {
        size_t cap = co->cap_jobs ? 2 * co->cap_jobs : 8;
        job_t **nj = sfl__reallocarray(co->jobs, cap, sizeof(*nj));

        if (nj == NULL)
            return SFL_ENOMEM;
        co->jobs = nj;
        co->cap_jobs = cap;
    }
    co->jobs[co->njobs++] = j;
    return 0;
}

/* Model, aggregator and round machine of a job whose spec is set. */
/* Sets the job up without its O(dim) state (job_model loads that when a
 * round first needs it): committed is its last committed round, and the
 * status shows that round's metrics. */
static int job_prepare(job_t *j, uint64_t committed)
{
    int64_t next = 1;
    int rc;

    if ((rc = coord_job_setup(&j->model, &j->spec)) < 0)
        return rc;
    j->ready = 1;
    j->committed = committed;
    j->used_round = committed + 1;
    if ((rc = coord_store_round_next_attempt(j->co->store, (int64_t)j->id,
                                             (int64_t)committed + 1, &next)) < 0)
        return rc;
    j->used = next > 1 ? (uint32_t)(next - 1) : 0;
    load_last_metrics(j);
    j->model_nnz = j->last.model_nnz;
    coord_reset_round(j);
    return 0;
}

/* The job's O(dim) state, from its last checkpoint: allocated when a round
 * is about to open, freed when the job pauses or ends (job_release). */
static int job_model(job_t *j)
{
    int rc;

    if (j->model.global != NULL)
        return 0;
    if ((rc = coord_job_open(&j->model)) < 0)
        return rc;
    if ((rc = reload_model(j)) < 0)
        coord_job_close(&j->model);
    return rc;
}

/* Creating a job: its row (and PAUSED for a job created paused), then the
 * job here, then the answer. */
typedef struct {
    coord_write_op_t op;
    coord_t *co;
    job_t *j;             /* owned until inserted */
    uint8_t *bytes;       /* the packed spec */
    size_t len;
    uint64_t need;        /* its model state, counted in creating_bytes */
    int64_t id;
    coord_created_cb after;
    void *ud;
} create_op_t;

static int create_run(coord_store_t *s, coord_write_op_t *op)
{
    create_op_t *o = (create_op_t *)op;
    int rc;

    if ((rc = coord_store_job_create(s, o->j->spec.name, o->bytes, o->len, o->j->spec.seed,
                                     &o->id)) < 0)
        return rc;
    if (o->j->spec.paused && (rc = coord_store_job_set_state(s, o->id, COORD_JOB_PAUSED)) < 0) {
        /* The row exists; mark it so a restart does not run it. */
        if (coord_store_job_set_state(s, o->id, COORD_JOB_CANCELLED) < 0)
            return sfl__wrap(rc, "job %lld is recorded running: neither paused nor cancelled",
                             (long long)o->id);
        return rc;
    }
    return 0;
}

static void create_done(coord_write_op_t *op)
{
    create_op_t *o = (create_op_t *)op;
    coord_t *co = o->co;
    job_t *j = o->j, *made = NULL;
    const char *err = op->error;
    int rc = op->abandoned ? -ECANCELED : op->rc;

    co->creating_bytes -= o->need;
    if (rc == 0) {
        j->id = (uint64_t)o->id;
        if ((rc = job_prepare(j, 0)) < 0 || (rc = job_insert(co, j)) < 0) {
            err = sfl_last_error();
            coord_write_job_state(co, j->id, COORD_JOB_CANCELLED, NULL, NULL);
        } else {
            coord_log(COORD_LOG_INFO, "job_created", "job=%llu name=%s algorithm=%s state=%s",
                      (unsigned long long)j->id, j->spec.name, j->spec.algorithm,
                      sfl_msg_job_state_name(j->state));
            made = j;
            j = NULL;
        }
    }
    o->after(co, made, rc, err, o->ud);
    job_free(j);
    sfl_msg_buf_free(o->bytes);
    sfl__free(o);
    if (made != NULL && !co->stopping)
        coord_schedule(co);
}

static int job_create(coord_t *co, const sfl_job_spec_t *spec, int now, coord_created_cb after,
                      void *ud)
{
    sfl_problem_t prob;
    uint64_t live, need;
    create_op_t *o;
    int rc;

    if ((rc = coord_job_spec_check(spec)) < 0)
        return rc;
    /* Its model travels in tasks: it must fit the message limits. */
    if ((rc = sfl_problem_init(&prob, sfl_loss_find(spec->loss), spec->dimension,
                               spec->nlabels)) < 0)
        return rc;
    if (prob.dim > co->lim.max_dim)
        return sfl__fail(SFL_EINVAL, "the job's model has %zu entries, above the "
                         "coordinator's max_dim %u", prob.dim, co->lim.max_dim);
    /* Every job not ended holds its O(dim) state: bounded in sum, counting
     * the jobs still being recorded. */
    live = live_job_bytes(co) + co->creating_bytes;
    need = coord_job_state_bytes(prob.dim);
    if (need > co->cfg.max_job_memory || live > co->cfg.max_job_memory - need)
        return sfl__fail(-ENOSPC, "the job needs %llu bytes of model state, %llu of "
                         "max_job_memory %llu are held by jobs not ended",
                         (unsigned long long)need, (unsigned long long)live,
                         (unsigned long long)co->cfg.max_job_memory);
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL || (o->j = sfl__calloc(1, sizeof(*o->j))) == NULL) {
        sfl__free(o);
        return SFL_ENOMEM;
    }
    if ((rc = sfl_msg_create_job_pack(spec, &o->bytes, &o->len)) < 0) {
        sfl__free(o->j);
        sfl__free(o);
        return rc;
    }
    o->op.run = create_run;
    o->op.done = create_done;
    o->co = co;
    o->j->co = co;
    o->j->spec = *spec;
    o->j->state = spec->paused ? SFL_JOB_PENDING : SFL_JOB_RUNNING;
    o->need = need;
    o->after = after;
    o->ud = ud;
    co->creating_bytes += need;
    if (now)
        coord_writer_call(co->writer, &o->op); /* the result goes to after */
    else
        coord_writer_post(co->writer, &o->op);
    return 0;
}

int coord_job_create(coord_t *co, const sfl_job_spec_t *spec, coord_created_cb after, void *ud)
{
    return job_create(co, spec, 0, after, ud);
}

/* coord_add_jobdef's answer, written where it waits. */
typedef struct {
    int rc;
    uint64_t id;
    char error[SFL_MSG_TEXT_LEN];
} jobdef_result_t;

static void jobdef_created(coord_t *co, job_t *j, int rc, const char *error, void *ud)
{
    jobdef_result_t *r = ud;

    (void)co;
    r->rc = rc;
    r->id = j ? j->id : 0;
    snprintf(r->error, sizeof(r->error), "%s", error ? error : "");
}

int coord_add_jobdef(coord_t *c, const coord_jobdef_t *d, uint64_t *id, int *created)
{
    jobdef_result_t r = {0};
    sfl_job_spec_t w;
    int rc;

    if (created)
        *created = 0;
    if ((rc = coord_jobdef_wire(d, &w)) < 0)
        return rc;
    for (size_t i = 0; i < c->njobs; i++)
        if (strcmp(c->jobs[i]->spec.name, w.name) == 0) {
            if (id)
                *id = c->jobs[i]->id;
            return 0;
        }
    /* At startup, before the loop serves: waiting on the writer is fine. */
    if ((rc = job_create(c, &w, 1, jobdef_created, &r)) < 0)
        return rc;
    if (r.rc < 0)
        return sfl__fail(r.rc, "%s", r.error);
    if (id)
        *id = r.id;
    if (created)
        *created = 1;
    return 0;
}

/* A job row from the store at start. */
static int job_load(coord_t *co, const coord_srow_job_t *row)
{
    job_t *j = sfl__calloc(1, sizeof(*j));
    char q[300];
    int rc;

    if (j == NULL)
        return SFL_ENOMEM;
    j->co = co;
    j->id = (uint64_t)row->id;
    switch (row->state) {
    case COORD_JOB_ACTIVE: j->state = SFL_JOB_RUNNING; break;
    case COORD_JOB_PAUSED: j->state = SFL_JOB_PAUSED; break;
    case COORD_JOB_CANCELLED: j->state = SFL_JOB_CANCELLED; break;
    case COORD_JOB_FAILED: j->state = SFL_JOB_FAILED; break;
    default: j->state = SFL_JOB_FINISHED; break;
    }
    coord_text_copy(j->error, sizeof(j->error), row->error);
    rc = sfl_msg_create_job_unpack(row->spec, row->spec_len, NULL, &j->spec);
    if (rc == 0)
        rc = job_prepare(j, (uint64_t)row->last_committed_round);
    if (rc == SFL_ENOMEM) {
        job_free(j);
        return rc;
    }
    if (rc < 0) {
        /* Kept visible (Status, ListJobs) but never run. */
        snprintf(j->spec.name, sizeof(j->spec.name), "%.63s", row->name);
        snprintf(j->error, sizeof(j->error), "cannot load the job: %.200s", sfl_last_error());
        j->state = SFL_JOB_FAILED;
        coord_log(COORD_LOG_ERROR, "job_load_failed", "job=%llu error=%s",
                  (unsigned long long)j->id, coord_log_quote(j->error, q, sizeof(q)));
    } else if (j->state == SFL_JOB_PAUSED && j->committed == 0 && j->wire_attempt == 0) {
        j->state = SFL_JOB_PENDING; /* never started */
    }
    if ((rc = job_insert(co, j)) < 0) {
        job_free(j);
        return rc;
    }
    job_release(j);
    if (j->ready)
        coord_log(COORD_LOG_INFO, "job_resumed",
                  "job=%llu name=%s state=%s committed_round=%llu next_attempt=%u",
                  (unsigned long long)j->id, j->spec.name, sfl_msg_job_state_name(j->state),
                  (unsigned long long)j->committed, j->wire_attempt);
    return 0;
}

/* ---- gRPC helpers ----------------------------------------------------------------- */

void coord_reply_packed(sfl_grpc_call_t *call, int rc, uint8_t *buf, size_t len)
{
    if (rc < 0) {
        char msg[300];

        snprintf(msg, sizeof(msg), "cannot encode the reply: %s", sfl_last_error());
        (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_INTERNAL, msg);
    } else {
        (void)sfl_grpc_reply(call, buf, len);
    }
    sfl_msg_buf_free(buf);
}

/* One log line per refused request, so an operator sees why a peer's call
 * failed; capped per connection so a peer cannot flood the log, and over
 * the whole process (a Join storm from many connections) at
 * REFUSALS_PER_SECOND lines a second: the lines not written are counted
 * and the next line written says how many (dropped=N). */
#define REFUSALS_LOGGED 8
/* Refused calls after which a connection is closed. */
#define REFUSALS_CLOSE 1000u
#define REFUSALS_PER_SECOND 20

/* 1 if a refusal line may be written now; *dropped = lines not written
 * since the last one that was. */
int coord_refusal_log_ok(coord_t *co, uint32_t *dropped)
{
    uint64_t sec = coord_now_ms(co) / 1000;

    if (sec != co->refusal_second) {
        co->refusal_second = sec;
        co->refusal_lines = 0;
    }
    if (co->refusal_lines >= REFUSALS_PER_SECOND) {
        co->refusal_dropped++;
        return 0;
    }
    co->refusal_lines++;
    *dropped = co->refusal_dropped;
    co->refusal_dropped = 0;
    return 1;
}

static void log_refused(conn_t *k, const char *path, int status, const char *msg)
{
    char q[600], p[120];
    uint32_t dropped;

    if (k == NULL)
        return;
    if (++k->refused == REFUSALS_CLOSE) {
        /* A peer that only sends what is refused (a Join storm, junk
         * streams) gets no more of the loop: closed once out of feed. */
        k->doomed = 1;
        coord_log(COORD_LOG_WARN, "conn_closed", "addr=%s reason=\"%u calls refused\"", k->addr,
                  REFUSALS_CLOSE);
    }
    if (k->refused > REFUSALS_LOGGED + 1 || !coord_refusal_log_ok(k->co, &dropped))
        return;
    if (k->refused > REFUSALS_LOGGED) {
        coord_log(COORD_LOG_WARN, "call_refused", "addr=%s further refusals on this connection "
                  "are not logged dropped=%u", k->addr, dropped);
        return;
    }
    coord_log(COORD_LOG_WARN, "call_refused",
              "addr=%s peer=%s path=%s status=%s message=%s dropped=%u", k->addr,
              k->has_peer ? coord_log_quote(k->peer.cn, p, sizeof(p)) : "-",
              path[0] ? path : "-", sfl_grpc_status_name(status),
              coord_log_quote(msg, q, sizeof(q)), dropped);
}

static void on_refused(const char *path, int status, const char *message, void *ud)
{
    log_refused(ud, path, status, message);
}

void coord_fail_call(sfl_grpc_call_t *call, int status, const char *fmt, ...) SFL_PRINTF(3, 4);
void coord_fail_call(sfl_grpc_call_t *call, int status, const char *fmt, ...)
{
    sfl_grpc_session_t *s = sfl_grpc_call_session(call);
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_refused(s ? sfl_grpc_session_user(s) : NULL, sfl_grpc_call_path(call), status, msg);
    (void)sfl_grpc_finish(call, status, msg);
}

void coord_fail_unpack(sfl_grpc_call_t *call, int rc)
{
    coord_fail_call(call, rc == SFL_ELIMIT ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                     : SFL_GRPC_STATUS_INVALID_ARGUMENT,
              "%s", sfl_last_error());
}

/* 0 if the coordinator takes calls, or the call is finished. Who may call
 * what was checked when the call's HEADERS arrived (methods[]). */
int coord_serving(sfl_grpc_call_t *call, const conn_t *k)
{
    if (k->co->stopping) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down");
        return -1;
    }
    return 0;
}

void coord_bind_agent(conn_t *k, agent_t *a)
{
    if (a->conn == k)
        return;
    if (a->conn) {
        /* The same certificate connected again: the newer connection wins. */
        a->conn->agent = NULL;
        coord_end_sub(a, SFL_GRPC_STATUS_FAILED_PRECONDITION, "the agent connected again");
    }
    if (k->agent && k->agent != a)
        k->agent->conn = NULL;
    a->conn = k;
    k->agent = a;
}

/* The agent bound to this connection, which must be agent_id; else the
 * call is finished and NULL returned. An agent that joined earlier in this
 * process with the same certificate is bound again without a Join. */
agent_t *coord_bound_agent(sfl_grpc_call_t *call, conn_t *k, uint64_t agent_id)
{
    agent_t *a = k->agent;

    if (a == NULL) {
        a = coord_agent_by_name(k->co, k->peer.cn);
        if (a == NULL || !a->joined || sodium_memcmp(a->fpr, k->peer.sha256, 32) != 0) {
            coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION, "join first");
            return NULL;
        }
        coord_bind_agent(k, a);
    }
    if (a->id != agent_id) {
        coord_fail_call(call, SFL_GRPC_STATUS_PERMISSION_DENIED,
                  "agent_id %llu is not bound to this certificate",
                  (unsigned long long)agent_id);
        return NULL;
    }
    a->last_seen_ms = coord_wall_ms();
    return a;
}

/* Who may call what, and how big a request may be: checked when a call's
 * HEADERS arrive, before any of its body is kept (sfl/grpc.h). Only an
 * update carries a vector; every other request is a few fields. */
#define R_AGENT (1u << SFL_ROLE_AGENT), "agent"
#define R_ADMIN (1u << SFL_ROLE_ADMIN), "admin"
#define SMALL_REQUEST (64u << 10)
static const sfl_grpc_method_t methods[] = {
    {"/sfl.v1.Coordinator/Join", SFL_GRPC_KIND_UNARY, coord_h_join, R_AGENT, SMALL_REQUEST},
    {"/sfl.v1.Coordinator/Subscribe", SFL_GRPC_KIND_SERVER_STREAM, coord_h_subscribe, R_AGENT,
     SMALL_REQUEST},
    {"/sfl.v1.Coordinator/SubmitUpdate", SFL_GRPC_KIND_UNARY, coord_h_submit, R_AGENT, 0},
    {"/sfl.v1.Coordinator/Heartbeat", SFL_GRPC_KIND_UNARY, coord_h_heartbeat, R_AGENT,
     SMALL_REQUEST},
    {"/sfl.v1.Admin/Status", SFL_GRPC_KIND_UNARY, coord_h_status, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ListAgents", SFL_GRPC_KIND_UNARY, coord_h_list_agents, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ListJobs", SFL_GRPC_KIND_UNARY, coord_h_list_jobs, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/CreateJob", SFL_GRPC_KIND_UNARY, coord_h_create_job, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/PauseJob", SFL_GRPC_KIND_UNARY, coord_h_pause, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ResumeJob", SFL_GRPC_KIND_UNARY, coord_h_resume, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/CancelJob", SFL_GRPC_KIND_UNARY, coord_h_cancel, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/ExportModel", SFL_GRPC_KIND_UNARY, coord_h_export, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/JobHistory", SFL_GRPC_KIND_UNARY, coord_h_history, R_ADMIN, SMALL_REQUEST},
    {"/sfl.v1.Admin/RevokeCertificate", SFL_GRPC_KIND_UNARY, coord_h_revoke, R_ADMIN,
     SMALL_REQUEST},
};
#undef R_AGENT
#undef R_ADMIN

/* ---- connections: a gRPC server channel over a TLS connection (grpcconn.h) ----------- */

static void handle_gone(coord_t *co);

/* The channel is gone (after conn_on_close): so is the connection. */
static void conn_freed(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    conn_t *k = ud;
    coord_t *co = k->co;

    (void)g;
    (void)status;
    (void)detail;
    sfl__free(k);
    handle_gone(co);
}

static void conn_on_connect(sfl_conn_t *c, int status)
{
    coord_t *co = sfl_conn_data(c);
    sfl_grpc_config_t gc;
    conn_t *k;
    char q[200];

    if (status < 0)
        return;
    k = sfl__calloc(1, sizeof(*k));
    if (k == NULL) {
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    k->co = co;
    k->c = c;
    k->has_peer = sfl_conn_peer(c, &k->peer) == 0;
    if (sfl_conn_peer_name(c, k->addr, sizeof(k->addr)) < 0)
        snprintf(k->addr, sizeof(k->addr), "?");
    if (k->has_peer && coord_cert_revoked(co, k->peer.sha256)) {
        uint32_t dropped;

        co->tls_refused++;
        if (coord_refusal_log_ok(co, &dropped))
            coord_log(COORD_LOG_WARN, "conn_refused", "addr=%s cn=%s error=revoked dropped=%u",
                      k->addr, coord_log_quote(k->peer.cn, q, sizeof(q)), dropped);
        sfl__free(k);
        sfl_conn_set_data(c, NULL);
        sfl_conn_abort(c);
        return;
    }
    memset(&gc, 0, sizeof(gc));
    gc.max_message = (uint32_t)co->cfg.max_message;
    gc.max_streams = (uint32_t)co->cfg.max_streams;
    gc.idle_timeout_ms = (uint32_t)co->cfg.idle_timeout_ms;
    gc.on_refused = on_refused;
    gc.peer_roles = k->has_peer ? 1u << k->peer.role : 0;
    gc.peer_role_name = sfl_role_name(k->has_peer ? k->peer.role : SFL_ROLE_NONE);
    gc.max_buffered = (uint32_t)co->cfg.max_buffered;
    gc.body_timeout_ms = (uint32_t)co->cfg.body_timeout_ms;
    gc.budget = co->budget;
    {
        static const sfl_grpcconn_cbs_t cbs = {NULL, conn_freed};

        if (sfl_grpcconn_accept(co->loop, c, &gc, methods, sizeof(methods) / sizeof(methods[0]),
                                k, &cbs, k, &k->g) < 0) {
            sfl__free(k);
            sfl_conn_set_data(c, NULL);
            sfl_conn_abort(c);
            return;
        }
    }
    sfl_grpcconn_count_sent(k->g, &co->bytes_out);
    co->handles++;
    k->next = co->conns;
    if (co->conns)
        co->conns->prev = k;
    co->conns = k;
    co->nconns++;
    sfl_conn_set_data(c, k);
    coord_log(COORD_LOG_DEBUG, "conn_open", "addr=%s cn=%s role=%s", k->addr,
              coord_log_quote(k->has_peer ? k->peer.cn : "", q, sizeof(q)),
              sfl_role_name(k->has_peer ? k->peer.role : SFL_ROLE_NONE));
    if (co->stopping)
        sfl_grpcconn_close(k->g);
    sfl_grpcconn_pump(k->g);
}

static void conn_on_data(sfl_conn_t *c, const uint8_t *buf, size_t len)
{
    conn_t *k = sfl_conn_data(c);
    int rc;

    if (k == NULL || k->c == NULL)
        return;
    k->co->bytes_in += len;
    rc = sfl_grpcconn_feed(k->g, buf, len);
    if (rc < 0) {
        char q[300];

        coord_log(COORD_LOG_WARN, "protocol_error", "addr=%s error=%s", k->addr,
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
    }
    if (k->doomed && k->c != NULL)
        sfl_conn_abort(k->c);
}

static void conn_on_drain(sfl_conn_t *c)
{
    conn_t *k = sfl_conn_data(c);

    if (k)
        sfl_grpcconn_pump(k->g);
}

static void conn_on_close(sfl_conn_t *c, int status)
{
    conn_t *k = sfl_conn_data(c);
    coord_t *co;

    if (k == NULL)
        return;
    co = k->co;
    k->c = NULL;
    coord_log(COORD_LOG_DEBUG, "conn_close", "addr=%s status=%d", k->addr, status);
    if (k->agent) {
        k->agent->conn = NULL;
        k->agent->last_seen_ms = coord_wall_ms();
        k->agent = NULL;
    }
    /* Cancels the calls still held (a Subscribe): coord_sub_cancelled; k itself
     * goes in conn_freed. */
    sfl_grpcconn_closed(k->g, status);
    if (k->prev)
        k->prev->next = k->next;
    else
        co->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    co->nconns--;
    co->conns_closed++;
    if (co->stopping)
        coord_check_stopped(co);
    else
        coord_schedule(co); /* an agent left: eligibility changed */
}

static void on_reject(sfl_listener_t *l, int status, const char *detail)
{
    coord_t *co = sfl_listener_data(l);
    char q[400];

    co->tls_refused++;
    coord_log(COORD_LOG_WARN, "conn_refused", "status=%d error=%s", status,
              coord_log_quote(detail ? detail : "", q, sizeof(q)));
}

static const sfl_conn_cbs_t conn_cbs = {conn_on_connect, conn_on_data, conn_on_drain,
                                        conn_on_close};

/* ---- lifecycle ------------------------------------------------------------------------- */

static int state_dir_make(const char *dir)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return sfl__fail(-errno, "state_dir %s: %s", dir, strerror(errno));
    return 0;
}

/* Takes state_dir/coordinator.lock (flock, exclusive, held until the fd
 * closes, also when the process dies) and writes our pid into it: a second
 * coordinator on the same state refuses to start instead of writing into
 * the live database. SFL_EBUSY names the holder's pid. */
static int state_lock(const char *dir, int *out)
{
    char path[COORD_PATH_MAX + 32], buf[32];
    ssize_t n;
    int fd, e;

    *out = -1;
    snprintf(path, sizeof(path), "%s/coordinator.lock", dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return sfl__fail(-errno, "%s: cannot open: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        e = errno;
        n = e == EWOULDBLOCK ? pread(fd, buf, sizeof(buf) - 1, 0) : 0;
        close(fd);
        if (e != EWOULDBLOCK)
            return sfl__fail(-e, "%s: cannot lock: %s", path, strerror(e));
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        return sfl__fail(SFL_EBUSY,
                         "state directory %s is in use by another sfl-coordinator (pid %s)", dir,
                         buf[0] && strspn(buf, "0123456789") == strlen(buf) ? buf : "unknown");
    }
    n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        e = errno;
        close(fd);
        return sfl__fail(-e, "%s: cannot write: %s", path, strerror(e));
    }
    *out = fd;
    return 0;
}

/* Loads state_dir/coordinator.key, or makes it at the first start. */
static int identity_open(const char *dir, sfl_identity_t **out)
{
    char path[COORD_PATH_MAX + 32], hex[65];
    int rc;

    *out = NULL;
    if ((rc = state_dir_make(dir)) < 0)
        return rc;
    snprintf(path, sizeof(path), "%s/coordinator.key", dir);
    rc = sfl_identity_load(path, out);
    if (rc != -ENOENT)
        return rc;
    if ((rc = sfl_identity_generate(out)) < 0)
        return rc;
    if ((rc = sfl_identity_save(*out, path)) < 0) {
        sfl_identity_free(*out);
        *out = NULL;
        return rc;
    }
    coord_log(COORD_LOG_INFO, "identity_created", "path=%s public_key=%s", path,
              sfl_seal_pk_to_hex((*out)->pk, hex));
    return 0;
}

int coord_identity_public(const char *state_dir, uint8_t pk[32])
{
    sfl_identity_t *id = NULL;
    int rc = identity_open(state_dir, &id);

    if (rc == 0)
        memcpy(pk, id->pk, 32);
    sfl_identity_free(id);
    return rc;
}

static void write_observed(void *ud, double seconds)
{
    coord_t *co = ud;

    coord_hist_observe(&co->write_hist, seconds);
}

static void writes_drained(void *ud)
{
    coord_check_stopped(ud);
}

/* Two connections to the store: the writer's (migrations and recovery run
 * on it first, before its thread starts) and the loop's, read-only. */
static int load_state(coord_t *co)
{
    static const coord_writer_cbs_t wcbs = {write_observed, writes_drained, NULL};
    coord_writer_cbs_t cbs = wcbs;
    char path[COORD_PATH_MAX + 32];
    coord_store_opts_t so = {0};
    coord_store_t *wdb = NULL;
    coord_agent_t *rows = NULL;
    coord_srow_job_t *jobs = NULL;
    size_t n = 0, nj = 0, marked = 0;
    int rc;

    snprintf(path, sizeof(path), "%s/coordinator.db", co->cfg.state_dir);
    so.keep_checkpoints = (unsigned)co->cfg.keep_checkpoints;
    so.relaxed_sync = (int)co->cfg.relaxed_sync;
    if ((rc = coord_store_open(path, &so, &wdb)) < 0 ||
        (rc = coord_store_recover(wdb, "coordinator restarted", &marked)) < 0) {
        coord_store_close(wdb);
        return rc;
    }
    cbs.ud = co;
    if ((rc = coord_writer_new(co->loop, wdb, &cbs, &co->writer)) < 0) {
        coord_store_close(wdb);
        return rc;
    }
    if ((rc = coord_store_open(path, &so, &co->store)) < 0 ||
        (rc = coord_store_read_only(co->store)) < 0)
        return rc;
    if ((rc = coord_store_agent_list(co->store, &rows, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        agent_t *a = sfl__calloc(1, sizeof(*a));

        if (a != NULL)
            a->id = (uint64_t)rows[i].id;
        if (a == NULL || (rc = coord_agent_insert(co, a)) < 0) {
            sfl__free(a);
            rc = SFL_ENOMEM;
            goto out;
        }
        snprintf(a->name, sizeof(a->name), "%s", rows[i].name);
        memcpy(a->fpr, rows[i].cert_fingerprint, sizeof(a->fpr));
        memcpy(a->pk, rows[i].identity_pk, sizeof(a->pk));
        tags_parse(rows[i].capabilities, &a->caps);
        a->ds.samples = (uint64_t)rows[i].samples;
        a->ds.dimension = rows[i].dimension > UINT32_MAX ? UINT32_MAX : (uint32_t)rows[i].dimension;
        a->last_seen_ms = rows[i].last_seen_ms;
    }
    if ((rc = coord_store_revoked_list(co->store, &co->revoked, &co->nrevoked)) < 0 ||
        (rc = coord_store_job_list(co->store, SPEC_MAX, &jobs, &nj)) < 0)
        goto out;
    for (size_t i = 0; i < nj; i++)
        if ((rc = job_load(co, &jobs[i])) < 0)
            goto out;
    coord_log(COORD_LOG_INFO, "state_loaded", "db=%s agents=%zu jobs=%zu rounds_abandoned=%zu",
              path, n, nj, marked);
out:
    coord_store_free(rows);
    coord_job_list_free(jobs, nj);
    return rc;
}

int coord_new(uv_loop_t *loop, const coord_config_t *cfg, coord_t **out)
{
    static const double agg_le[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60};
    static const double round_le[] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
    static const double lag_le[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};
    struct sockaddr_storage ss;
    sfl_tls_config_t tc;
    sfl_conn_opts_t co_opts;
    coord_log_level_t lvl = COORD_LOG_INFO;
    coord_t *co;
    int rc;

    *out = NULL;
    if ((rc = coord_config_check(cfg)) < 0)
        return rc;
    if ((rc = sfl_seal_init()) < 0)
        return rc;
    co = sfl__calloc(1, sizeof(*co));
    if (co == NULL)
        return SFL_ENOMEM;
    co->state_fd = -1;
    co->loop = loop;
    co->cfg = *cfg;
    co->started_ms = coord_wall_ms();
    if (coord_log_level_parse(cfg->log_level, &lvl) == 0)
        coord_log_set_level(lvl);
    sfl_msg_limits_default(&co->lim);
    co->lim.max_message = cfg->max_message;
    if ((rc = sfl_grpc_budget_new(cfg->max_buffered_total, &co->budget)) < 0) {
        sfl__free(co);
        return rc;
    }
    coord_hist_init(&co->agg_hist, agg_le, sizeof(agg_le) / sizeof(agg_le[0]));
    coord_hist_init(&co->round_hist, round_le, sizeof(round_le) / sizeof(round_le[0]));
    coord_hist_init(&co->lag_hist, lag_le, sizeof(lag_le) / sizeof(lag_le[0]));
    coord_hist_init(&co->write_hist, agg_le, sizeof(agg_le) / sizeof(agg_le[0]));
    if ((rc = state_dir_make(cfg->state_dir)) < 0 ||
        (rc = state_lock(cfg->state_dir, &co->state_fd)) < 0 ||
        (rc = identity_open(cfg->state_dir, &co->id)) < 0 || (rc = load_state(co)) < 0)
        goto fail;
    memset(&tc, 0, sizeof(tc));
    tc.cert_file = cfg->cert;
    tc.key_file = cfg->key;
    tc.ca_file = cfg->ca;
    tc.require_client_cert = 1;
    tc.alpn = "h2";
    tc.alpn_required = 1;
    if ((rc = sfl_tls_new(&tc, 1, &co->tls)) < 0)
        goto fail;
    memset(&co_opts, 0, sizeof(co_opts));
    co_opts.tls = co->tls;
    co_opts.handshake_timeout_ms = cfg->handshake_timeout_ms;
    co_opts.idle_timeout_ms = cfg->idle_timeout_ms;
    co_opts.max_conns = cfg->max_conns;
    co_opts.max_handshakes = cfg->max_handshakes;
    /* The listeners' details already say "listen ADDR: why". */
    if ((rc = coord_addr_parse(cfg->listen, &ss)) < 0 ||
        (rc = sfl_listener_new(loop, (struct sockaddr *)&ss, &co_opts, &conn_cbs, on_reject, co,
                               &co->listener)) < 0) {
        char detail[512];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        rc = sfl__fail(rc, "listen%s%s", strncmp(detail, "listen ", 7) == 0 ? "" : ": ",
                       strncmp(detail, "listen ", 7) == 0 ? detail + 6 : detail);
        goto fail;
    }
    if (cfg->metrics_listen[0] && strcmp(cfg->metrics_listen, "off") != 0) {
        if ((rc = coord_addr_parse(cfg->metrics_listen, &ss)) < 0 ||
            (rc = coord_metrics_srv_new(loop, (struct sockaddr *)&ss, NULL, coord_render_metrics,
                                        co, &co->metrics)) < 0) {
            char detail[512];

            snprintf(detail, sizeof(detail), "%s", sfl_last_error());
            rc = sfl__fail(rc, "metrics_listen %s: %s", cfg->metrics_listen, detail);
            goto fail;
        }
        co->metrics_open = 1;
    }
    uv_timer_init(loop, &co->tick);
    uv_timer_init(loop, &co->stop_timer);
    co->tick.data = co->stop_timer.data = co;
    co->handles += 2;
    uv_timer_start(&co->tick, on_tick, cfg->tick_ms, cfg->tick_ms);
    {
        char hex[65];

        coord_log(COORD_LOG_INFO, "started",
                  "version=%s listen=%s port=%d metrics=%s public_key=%s", COORD_VERSION,
                  cfg->listen, coord_port(co), co->metrics ? cfg->metrics_listen : "off",
                  sfl_seal_pk_to_hex(co->id->pk, hex));
    }
    *out = co;
    return 0;
fail:
    /* Handles made so far free themselves on the loop's next turns. */
    sfl_listener_close(co->listener);
    co->listener = NULL;
    coord_metrics_srv_close(co->metrics, NULL, NULL);
    co->metrics = NULL;
    coord_free(co);
    return rc;
}

int coord_port(const coord_t *c)
{
    return c->listener ? sfl_listener_port(c->listener) : SFL_ENOTFOUND;
}

int coord_metrics_port(const coord_t *c)
{
    return c->metrics ? coord_metrics_srv_port(c->metrics) : SFL_ENOTFOUND;
}

const uint8_t *coord_public_key(const coord_t *c)
{
    return c->id->pk;
}

/* done runs once shutdown has finished and the last of our handles closed. */
static void handle_gone(coord_t *co)
{
    if (--co->handles == 0 && co->finished && co->done)
        co->done(co, co->done_ud);
}

static void timer_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

static void metrics_closed(void *ud)
{
    coord_t *co = ud;

    co->metrics_open = 0;
    coord_check_stopped(co);
}

void coord_check_stopped(coord_t *co)
{
    if (!co->stopping || co->finished || co->nconns > 0 || co->metrics_open || co->verifying)
        return;
    for (size_t i = 0; i < co->njobs; i++)
        if (co->jobs[i]->busy)
            return;
    /* Everything recorded before "stopped": the last records, then the
     * writer's queue (writes_drained calls back). */
    coord_part_flush(co);
    if (coord_writer_pending(co->writer) > 0)
        return;
    co->finished = 1;
    coord_log(COORD_LOG_INFO, "stopped", "rounds_committed=%llu",
              (unsigned long long)co->rounds_committed);
    uv_close((uv_handle_t *)&co->tick, timer_closed);
    uv_close((uv_handle_t *)&co->stop_timer, timer_closed);
}

static void on_stop_timeout(uv_timer_t *t)
{
    coord_t *co = t->data;

    coord_log(COORD_LOG_WARN, "shutdown_timeout", "connections=%zu", co->nconns);
    for (conn_t *k = co->conns; k != NULL; k = k->next)
        if (k->c)
            sfl_conn_abort(k->c);
    coord_check_stopped(co);
}

void coord_shutdown(coord_t *co, uint64_t timeout_ms, void (*done)(coord_t *c, void *ud),
                    void *ud)
{
    if (co->stopping)
        return;
    co->done = done;
    co->done_ud = ud;
    coord_log(COORD_LOG_INFO, "shutdown", "connections=%zu", co->nconns);
    sfl_listener_close(co->listener);
    co->listener = NULL;
    if (co->metrics) {
        coord_metrics_srv_close(co->metrics, metrics_closed, co);
        co->metrics = NULL;
    }
    /* Finish what can be finished: an attempt with its quorum is
     * aggregated now (time is moved to its deadline, where the machine
     * closes it on quorum), others are recorded failed. */
    for (size_t i = 0; i < co->njobs; i++) {
        job_t *j = co->jobs[i];

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
    co->stopping = 1;
    for (size_t i = 0; i < co->nagents; i++)
        coord_end_sub(co->agents[i], SFL_GRPC_STATUS_UNAVAILABLE, "coordinator shutting down");
    for (conn_t *k = co->conns; k != NULL; k = k->next)
        if (k->c) {
            sfl_grpcconn_close(k->g);
        }
    uv_timer_stop(&co->tick);
    uv_timer_start(&co->stop_timer, on_stop_timeout,
                   timeout_ms ? timeout_ms : co->cfg.shutdown_timeout_ms, 0);
    coord_check_stopped(co);
}

void coord_free(coord_t *co)
{
    if (co == NULL)
        return;
    if (co->writer != NULL)
        coord_part_flush(co);
    /* Lets the writer finish its queue (completions are only released). */
    coord_writer_free(co->writer);
    co->writer = NULL;
    sfl__free(co->partq);
    for (size_t i = 0; i < co->njobs; i++)
        job_free(co->jobs[i]);
    sfl__free(co->jobs);
    for (size_t i = 0; i < co->nagents; i++)
        sfl__free(co->agents[i]);
    sfl__free(co->agents);
    coord_store_close(co->store);
    sfl_identity_free(co->id);
    sfl_tls_free(co->tls);
    sfl_grpc_budget_free(co->budget);
    coord_store_free(co->revoked);
    /* After the store: the next coordinator may open it once this is gone. */
    if (co->state_fd >= 0)
        close(co->state_fd);
    sfl__free(co);
}

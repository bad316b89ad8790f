/* The coordinator's small writes as writer operations (writer.h): round and
 * job states, failures and the participation batch. Each is posted from the
 * loop and never waited for; a failure is logged with what was not
 * recorded, and a caller that must answer only once the change is durable
 * passes a callback. The writes whose completion moves the coordinator on
 * live with their logic: opening a round and the commit (coord.c), Join
 * (agentsvc.c), CreateJob (coord.c), RevokeCertificate (admin.c). */
#include "coord_int.h"
#include "round/registry.h"
#include "round/coordwrite.h"
#include "leader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* An operation that logs its failure, naming what it recorded. */
typedef struct logged_op {
    coord_write_op_t op;
    coord_t *co;
    uint64_t job;
    coord_written_cb after; /* may be NULL */
    void *ud;
    char what[96];
} logged_op_t;

static void logged_done(coord_write_op_t *op)
{
    logged_op_t *l = (logged_op_t *)op;

    if (op->rc < 0 && !op->abandoned) {
        char q[300];

        coord_log(COORD_LOG_ERROR, "store_error", "%s error=%s", l->what,
                  coord_log_quote(op->error, q, sizeof(q)));
        coord_leader_write_failed(l->co, op->rc); /* fenced: stops serving */
    }
    if (l->after)
        l->after(l->co, l->job, op->abandoned ? -ECANCELED : op->rc, op->error, l->ud);
    sfl__free(op);
}

/* A zeroed record of size bytes (a logged_op_t first) with its header set,
 * or NULL with the loss logged and after told. */
static void *logged_new(coord_t *co, size_t size, uint64_t job, int (*run)(coord_store_t *,
                                                                           coord_write_op_t *),
                        coord_written_cb after, void *ud, const char *what)
{
    logged_op_t *l = sfl__calloc(1, size);

    if (l == NULL) {
        coord_log(COORD_LOG_ERROR, "store_error", "%s error=\"no memory to record it\"", what);
        if (after)
            after(co, job, SFL_ENOMEM, "no memory to record it", ud);
        return NULL;
    }
    l->op.run = run;
    l->op.done = logged_done;
    l->co = co;
    l->job = job;
    l->after = after;
    l->ud = ud;
    snprintf(l->what, sizeof(l->what), "%s", what);
    return l;
}

/* ---- round state ------------------------------------------------------------------- */

typedef struct {
    logged_op_t l;
    int64_t round, attempt;
    coord_srow_state_t st;
    int has_reason;
    char reason[COORD_REASON_MAX + 1];
} round_state_op_t;

static int round_state_run(coord_store_t *s, coord_write_op_t *op)
{
    round_state_op_t *o = (round_state_op_t *)op;

    return coord_store_round_set_state(s, (int64_t)o->l.job, o->round, o->attempt, o->st,
                                       o->has_reason ? o->reason : NULL);
}

void coord_write_round_state(coord_t *co, uint64_t job, uint64_t round, uint32_t attempt,
                             coord_srow_state_t st, const char *reason)
{
    char what[96];
    round_state_op_t *o;

    snprintf(what, sizeof(what), "job=%llu round=%llu attempt=%u state=%s",
             (unsigned long long)job, (unsigned long long)round, attempt,
             coord_srow_state_name(st));
    if ((o = logged_new(co, sizeof(*o), job, round_state_run, NULL, NULL, what)) == NULL)
        return;
    o->round = (int64_t)round;
    o->attempt = (int64_t)attempt + 1; /* the store counts from 1 */
    o->st = st;
    if (reason != NULL) {
        o->has_reason = 1;
        snprintf(o->reason, sizeof(o->reason), "%s", reason);
    }
    coord_writer_post(co->writer, &o->l.op);
}

/* ---- job state and failure --------------------------------------------------------- */

typedef struct {
    logged_op_t l;
    coord_job_state_t st;
    int fail;
    char error[SFL_MSG_TEXT_LEN];
    int64_t at_ms;
} job_state_op_t;

static int job_state_run(coord_store_t *s, coord_write_op_t *op)
{
    job_state_op_t *o = (job_state_op_t *)op;

    if (o->fail)
        return coord_store_job_fail(s, (int64_t)o->l.job, o->error, o->at_ms);
    return coord_store_job_set_state(s, (int64_t)o->l.job, o->st);
}

void coord_write_job_state(coord_t *co, uint64_t job, coord_job_state_t st,
                           coord_written_cb after, void *ud)
{
    char what[96];
    job_state_op_t *o;

    snprintf(what, sizeof(what), "job=%llu state=%s", (unsigned long long)job,
             coord_job_state_name(st));
    if ((o = logged_new(co, sizeof(*o), job, job_state_run, after, ud, what)) == NULL)
        return;
    o->st = st;
    coord_writer_post(co->writer, &o->l.op);
}

void coord_write_job_fail(coord_t *co, uint64_t job, const char *error)
{
    char what[96];
    job_state_op_t *o;

    snprintf(what, sizeof(what), "job=%llu state=failed failure_not_recorded=1",
             (unsigned long long)job);
    if ((o = logged_new(co, sizeof(*o), job, job_state_run, NULL, NULL, what)) == NULL)
        return;
    o->fail = 1;
    snprintf(o->error, sizeof(o->error), "%s", error);
    o->at_ms = coord_wall_ms();
    coord_writer_post(co->writer, &o->l.op);
}

/* ---- participation ----------------------------------------------------------------- */

/* Past this many queued records a flush does not wait for the tick. */
#define PARTQ_FLUSH 256

typedef struct {
    logged_op_t l;
    struct coord_part_q *q; /* owned: the queue as it was */
    size_t n, skipped;
} part_op_t;

static int part_run(coord_store_t *s, coord_write_op_t *op)
{
    part_op_t *o = (part_op_t *)op;
    coord_part_row_t *rows = sfl__mallocarray(o->n, sizeof(*rows));
    int rc;

    if (rows == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the batch");
    for (size_t i = 0; i < o->n; i++) {
        rows[i] = o->q[i].row;
        rows[i].reason = o->q[i].row.reason != NULL ? o->q[i].reason : NULL;
    }
    rc = coord_store_participation_batch(s, rows, o->n, &o->skipped);
    sfl__free(rows);
    return rc;
}

static void part_done(coord_write_op_t *op)
{
    part_op_t *o = (part_op_t *)op;

    if (op->rc == 0 && o->skipped > 0)
        coord_log(COORD_LOG_DEBUG, "participation_skipped", "records=%zu skipped=%zu", o->n,
                  o->skipped);
    sfl__free(o->q);
    logged_done(op);
}

void coord_part_queue(coord_t *co, const coord_part_row_t *row)
{
    struct coord_part_q *q;

    /* A statistics round (round 0) keeps no participation rows: they
     * belong to a round's row, and it has none (job_statistics). */
    if (row->round < 1)
        return;

    if (co->npartq == co->cap_partq) {
        size_t cap = co->cap_partq ? 2 * co->cap_partq : 64;
        void *grown = sfl__reallocarray(co->partq, cap, sizeof(*co->partq));

        if (grown == NULL) {
            coord_log(COORD_LOG_ERROR, "store_error",
                      "error=\"no memory to queue a participation record\" job=%lld agent=%lld",
                      (long long)row->job, (long long)row->agent);
            return;
        }
        co->partq = grown;
        co->cap_partq = cap;
    }
    if (row->status == COORD_PART_ACCEPTED && row->bytes > 0)
        co->update_bytes += (uint64_t)row->bytes;
    q = &co->partq[co->npartq++];
    q->row = *row;
    q->reason[0] = '\0';
    if (row->reason != NULL)
        snprintf(q->reason, sizeof(q->reason), "%s", row->reason);
    q->row.reason = row->reason != NULL ? q->reason : NULL; /* a flag: the array moves */
    if (co->npartq >= PARTQ_FLUSH)
        coord_part_flush(co);
}

void coord_part_flush(coord_t *co)
{
    char what[96];
    part_op_t *o;

    if (co->npartq == 0)
        return;
    snprintf(what, sizeof(what), "participation_records_lost=%zu", co->npartq);
    if ((o = logged_new(co, sizeof(*o), 0, part_run, NULL, NULL, what)) == NULL) {
        co->npartq = 0;
        return;
    }
    /* The queue itself goes with the batch; the next record starts a new one. */
    o->q = co->partq;
    o->n = co->npartq;
    o->l.op.done = part_done;
    o->l.op.batchable = 1;
    co->partq = NULL;
    co->npartq = co->cap_partq = 0;
    coord_writer_post(co->writer, &o->l.op);
}

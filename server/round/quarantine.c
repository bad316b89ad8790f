/* Quarantine (docs/security.md, "Quarantine"): a member that a job's round
 * named as the cause of its failure (a dealer of bad shares, a commitment
 * that is not of its seed, ...) is never selected for that job again until
 * an operator releases it (sflctl job release). In memory per job (sorted
 * by agent id, searched at every eligibility check), persisted through the
 * writer (store.h, table quarantine) and loaded at start, so it survives
 * kill -9 and restart. The attempt the culprit failed is excused
 * (coord_round_excuse): one member cannot use up a round's attempts and
 * pause the job. */
#include "coord_int.h"
#include "round/driver.h"
#include "round/quarantine.h"
#include "round/registry.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* Index of agent in j->quar, or where it would go (*found 0). */
static size_t quar_pos(const coord_job_t *j, uint64_t agent, int *found)
{
    size_t lo = 0, hi = j->nquar;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (j->quar[mid].agent < agent)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < j->nquar && j->quar[lo].agent == agent;
    return lo;
}

const coord_quar_t *coord_quarantined(const coord_job_t *j, uint64_t agent)
{
    int found;
    size_t i = quar_pos(j, agent, &found);

    return found ? &j->quar[i] : NULL;
}

/* Inserts in order; 1 if added, 0 if it was there, SFL_ENOMEM. */
static int quar_put(coord_job_t *j, uint64_t agent, int64_t at_ms, const char *reason)
{
    int found;
    size_t i = quar_pos(j, agent, &found);
    coord_quar_t *grown;

    if (found)
        return 0;
    grown = sfl__reallocarray(j->quar, j->nquar + 1, sizeof(*grown));
    if (grown == NULL)
        return SFL_ENOMEM;
    j->quar = grown;
    memmove(j->quar + i + 1, j->quar + i, (j->nquar - i) * sizeof(*j->quar));
    j->quar[i].agent = agent;
    j->quar[i].at_ms = at_ms;
    coord_text_copy(j->quar[i].reason, sizeof(j->quar[i].reason), reason);
    if (j->quar[i].reason[0] == '\0')
        snprintf(j->quar[i].reason, sizeof(j->quar[i].reason), "no reason given");
    j->nquar++;
    return 1;
}

static void quar_drop(coord_job_t *j, uint64_t agent)
{
    int found;
    size_t i = quar_pos(j, agent, &found);

    if (!found)
        return;
    memmove(j->quar + i, j->quar + i + 1, (j->nquar - i - 1) * sizeof(*j->quar));
    j->nquar--;
}

void coord_quarantine_free(coord_job_t *j)
{
    sfl__free(j->quar);
    j->quar = NULL;
    j->nquar = 0;
}

/* ---- quarantining ------------------------------------------------------------------ */

typedef struct {
    coord_write_op_t op;
    coord_t *co;
    uint64_t job, agent;
    int64_t at_ms;
    char reason[COORD_REASON_MAX + 1];
} quar_op_t;

static int quar_run(coord_store_t *s, coord_write_op_t *op)
{
    quar_op_t *o = (quar_op_t *)op;

    return coord_store_quarantine_add(s, (int64_t)o->job, (int64_t)o->agent, o->reason,
                                      o->at_ms);
}

static void quar_done(coord_write_op_t *op)
{
    quar_op_t *o = (quar_op_t *)op;
    char q[300];

    /* The quarantine holds in memory either way; only a restart would
     * forget it, and the next failure it causes records it again. */
    if (op->rc < 0 && !op->abandoned)
        coord_log(COORD_LOG_ERROR, "store_error", "op=quarantine job=%llu agent=%llu error=%s",
                  (unsigned long long)o->job, (unsigned long long)o->agent,
                  coord_log_quote(op->error, q, sizeof(q)));
    sfl__free(o);
}

void coord_quarantine(coord_job_t *j, uint64_t agent, const char *reason)
{
    coord_t *co = j->co;
    int64_t now = coord_wall_ms();
    quar_op_t *o;
    char q[300];
    int rc;

    if (agent == 0)
        return;
    if ((rc = quar_put(j, agent, now, reason ? reason : "")) == 0)
        return; /* already quarantined: nothing changes, nothing is excused */
    if (rc < 0) {
        /* Not excluded: its next failure names it again. */
        coord_log(COORD_LOG_ERROR, "quarantine_failed", "job=%llu agent=%llu error=\"no memory\"",
                  (unsigned long long)j->id, (unsigned long long)agent);
        return;
    }
    co->quarantines++;
    if (coord_round_is_member(&j->rnd, agent))
        coord_round_excuse(&j->rnd);
    coord_log(COORD_LOG_WARN, "agent_quarantined", "job=%llu round=%llu agent=%llu reason=%s",
              (unsigned long long)j->id, (unsigned long long)j->rnd.round,
              (unsigned long long)agent,
              coord_log_quote(coord_quarantined(j, agent)->reason, q, sizeof(q)));
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL) {
        coord_log(COORD_LOG_ERROR, "store_error",
                  "op=quarantine job=%llu agent=%llu error=\"no memory to record it\"",
                  (unsigned long long)j->id, (unsigned long long)agent);
        return;
    }
    o->op.run = quar_run;
    o->op.done = quar_done;
    o->co = co;
    o->job = j->id;
    o->agent = agent;
    o->at_ms = now;
    snprintf(o->reason, sizeof(o->reason), "%s", coord_quarantined(j, agent)->reason);
    coord_writer_post(co->writer, &o->op);
}

int coord_quarantine_load(coord_t *co)
{
    coord_quar_row_t *rows = NULL;
    size_t n = 0, kept = 0;
    int rc;

    if ((rc = coord_store_quarantine_list(co->store, &rows, &n)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        coord_job_t *j = coord_job_find(co, (uint64_t)rows[i].job);

        if (j == NULL || rows[i].agent <= 0)
            continue;
        if ((rc = quar_put(j, (uint64_t)rows[i].agent, rows[i].at_ms, rows[i].reason)) < 0)
            break;
        kept++;
        rc = 0;
    }
    coord_store_free(rows);
    if (rc == 0 && kept > 0)
        coord_log(COORD_LOG_INFO, "quarantine_loaded", "agents=%zu", kept);
    return rc;
}

void coord_quarantine_text(const coord_t *co, uint64_t agent, char *out, size_t cap)
{
    size_t o = 0, shown = 0, more = 0;

    out[0] = '\0';
    for (size_t i = 0; i < co->njobs; i++) {
        const coord_quar_t *q = coord_quarantined(co->jobs[i], agent);
        int w;

        if (q == NULL)
            continue;
        w = snprintf(out + o, cap - o, "%squarantined in job %llu: %s", shown ? "; " : "",
                     (unsigned long long)co->jobs[i]->id, q->reason);
        if (w < 0 || (size_t)w >= cap - o) {
            out[o] = '\0';
            more++;
            continue;
        }
        o += (size_t)w;
        shown++;
    }
    if (more > 0 && shown == 0)
        snprintf(out, cap, "quarantined in %zu jobs", more);
}

void coord_quarantine_job_text(const coord_job_t *j, char *out, size_t cap)
{
    size_t o = 0;

    out[0] = '\0';
    for (size_t i = 0; i < j->nquar; i++) {
        int w = snprintf(out + o, cap - o, "%sagent %llu: %s", i ? "; " : "",
                         (unsigned long long)j->quar[i].agent, j->quar[i].reason);

        if (w < 0 || (size_t)w >= cap - o) {
            /* the count is in JobStatus.quarantined; the text says more exist */
            snprintf(out, cap, "%zu agents, e.g. agent %llu: %.*s", j->nquar,
                     (unsigned long long)j->quar[0].agent, (int)(cap > 80 ? cap - 80 : 0),
                     j->quar[0].reason);
            return;
        }
        o += (size_t)w;
    }
}

/* ---- ReleaseAgent (Admin) ----------------------------------------------------------- */

/* Recorded first, then lifted: until the row is gone the agent stays out,
 * so an answer of OK means a restart will not bring the quarantine back. */
typedef struct {
    coord_write_op_t op;
    coord_t *co;
    sfl_grpc_call_t *call;
    sfl_release_t r;
} release_op_t;

static int release_run(coord_store_t *s, coord_write_op_t *op)
{
    release_op_t *o = (release_op_t *)op;

    return coord_store_quarantine_release(s, (int64_t)o->r.job_id, (int64_t)o->r.agent_id);
}

static void release_done(coord_write_op_t *op)
{
    release_op_t *o = (release_op_t *)op;
    coord_job_t *j = op->abandoned ? NULL : coord_job_find(o->co, o->r.job_id);
    uint8_t *buf = NULL;
    size_t blen = 0;
    char q[300];
    int rc;

    if (op->abandoned) {
        coord_fail_call(o->call, SFL_GRPC_STATUS_UNAVAILABLE, "the coordinator is stopping");
    } else if (op->rc < 0 && op->rc != SFL_ENOTFOUND) {
        coord_log(COORD_LOG_ERROR, "store_error", "op=release error=%s",
                  coord_log_quote(op->error, q, sizeof(q)));
        coord_fail_call(o->call, SFL_GRPC_STATUS_UNAVAILABLE,
                        "the release is not recorded; the agent stays quarantined; retry");
    } else {
        /* SFL_ENOTFOUND: the row was never written (its write failed), the
         * quarantine held in memory only: lifting it is what was asked. */
        if (j != NULL)
            quar_drop(j, o->r.agent_id);
        coord_log(COORD_LOG_WARN, "agent_released", "job=%llu agent=%llu",
                  (unsigned long long)o->r.job_id, (unsigned long long)o->r.agent_id);
        rc = sfl_msg_release_reply_pack(&o->r, &buf, &blen);
        coord_reply_packed(o->call, rc, buf, blen);
        if (j != NULL && !o->co->stopping)
            coord_job_drive(j);
    }
    sfl__free(o);
}

void coord_h_release(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    const coord_quar_t *q;
    release_op_t *o;
    sfl_release_t m;
    coord_job_t *j;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_release_req_unpack(req, len, &co->lim, &m)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    if ((j = coord_job_find(co, m.job_id)) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_NOT_FOUND, "no job %llu",
                        (unsigned long long)m.job_id);
        return;
    }
    if ((q = coord_quarantined(j, m.agent_id)) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_FAILED_PRECONDITION,
                        "agent %llu is not quarantined in job %llu",
                        (unsigned long long)m.agent_id, (unsigned long long)m.job_id);
        return;
    }
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL) {
        coord_fail_call(call, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    o->op.run = release_run;
    o->op.done = release_done;
    o->co = co;
    o->call = call;
    o->r = m;
    snprintf(o->r.reason, sizeof(o->r.reason), "%s", q->reason);
    coord_writer_post(co->writer, &o->op);
}

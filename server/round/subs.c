/* Subscribe streams: an agent's held stream gets its task when selected,
 * a paced Wait when nothing came within the hold time, and is ended on
 * cancel or when replaced. */
#include "coord_int.h"
#include "round/registry.h"
#include "round/subs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"

void coord_end_sub(coord_agent_t *a, int status, const char *msg)
{
    sfl_grpc_call_t *call = a->sub;

    if (call == NULL)
        return;
    a->sub = NULL;
    (void)sfl_grpc_finish(call, status, msg);
}

static void send_wait(coord_t *co, coord_agent_t *a, uint32_t retry_ms, const char *reason)
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

void coord_send_task(coord_t *co, coord_job_t *j, coord_agent_t *a)
{
    coord_gtask_t t0 = {j->task, j->task_m, j->task_lite, j->task_m_lite,
                        j->task_len, j->task_m_len, j->task_lite_len, j->task_m_lite_len};
    const coord_gtask_t *tk = &t0;
    const uint8_t *buf;
    size_t len;
    uint32_t g;
    int rc, moments = 0;

    if (a->sub == NULL || j->task == NULL || j->opening)
        return; /* an opening attempt's tasks go out once it is recorded */
    /* secure aggregation per front-end group: the agent's group's task */
    if (j->ntasks > 1 && (g = j->shape->task_of(j, a->id)) > 0 && g < j->ntasks)
        tk = &j->gtasks[g - 1];
    buf = tk->task;
    len = tk->task_len;
    /* a standardize job's moments: with the first task of the job on the
     * agent's session, which keeps them (docs/protocol.md) */
    if (tk->task_m != NULL && a->moments_job != j->id) {
        buf = tk->task_m;
        len = tk->task_m_len;
        moments = 1;
    }
    /* An agent a front-end holds: the task without its model, which the
     * front-end puts back from its copy (fleetsvc.c, Fleet.Model). */
    if (a->conn != NULL && a->conn->fe != NULL && tk->task_lite != NULL) {
        buf = moments ? tk->task_m_lite : tk->task_lite;
        len = moments ? tk->task_m_lite_len : tk->task_lite_len;
    }
    rc = sfl_grpc_send(a->sub, buf, len);
    a->sub_idle_since = coord_now_ms(co);
    if (rc >= 0) {
        j->fold.bytes_down += len;
        if (moments)
            a->moments_job = j->id;
    }
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

/* A running job that is gathering its cohort (SELECTING) could draw a: its
 * round starts when its select wait ends, and takes the agents subscribed
 * at that instant. */
static int selecting_for(const coord_t *co, const coord_agent_t *a)
{
    for (size_t i = 0; i < co->njobs; i++) {
        const coord_job_t *j = co->jobs[i];

        if (coord_running(j) && j->rnd.state == COORD_ROUND_SELECTING && coord_eligible(j, a))
            return 1;
    }
    return 0;
}

/* Ends, with a paced Wait, the streams that got nothing for the hold time.
 * Until then every subscriber keeps its stream, whether a running job can
 * use it or not, selected or not: a round that opens (the next round, a
 * retry, a job created or resumed) reaches it at once, instead of after a
 * Wait it cannot be called back from. Past it too while a job that could
 * draw the agent is selecting: a Wait then would leave the agent out of the
 * round whose select wait ends before it is back. A walk over every agent,
 * so at most once per quarter of the hold time (1 s at most), not on every
 * drive: a stream is ended at most that much after its hold time. */
void coord_dismiss_idle(coord_t *co)
{
    uint64_t now = coord_now_ms(co), every = co->cfg.subscribe_hold_ms / 4;

    if (now < co->dismiss_next)
        return;
    co->dismiss_next = now + (every < 1000 ? every : 1000);
    for (size_t i = 0; i < co->nagents; i++) {
        coord_agent_t *a = co->agents[i];
        int use;

        if (a->sub == NULL || now - a->sub_idle_since < co->cfg.subscribe_hold_ms ||
            coord_busy_elsewhere(co, a, NULL) || selecting_for(co, a))
            continue;
        use = coord_usable(co, a);
        send_wait(co, a, (uint32_t)(use ? co->cfg.pace_min_ms : co->cfg.idle_retry_ms),
                  use ? "no round started within the hold time" : SFL_MSG_WAIT_NO_JOB);
    }
}

void coord_sub_cancelled(sfl_grpc_call_t *call, void *ud)
{
    coord_agent_t *a = ud;

    if (a->sub == call)
        a->sub = NULL;
    (void)sfl_grpc_finish(call, SFL_GRPC_STATUS_CANCELLED, NULL);
}

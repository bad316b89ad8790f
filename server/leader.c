/* Leadership of a round master: see leader.h. The tries and checks are
 * writer operations (the session that holds the lock is the one that
 * writes), one at a time, from a loop timer. */
#include "leader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sfl/core/alloc.h"

#include "coord_int.h"
#include "store/store.h"

/* OP_GONE: a clean shutdown deletes our masters row. */
typedef enum { OP_RECOVER, OP_TRY, OP_CHECK, OP_GONE } leader_kind_t;

typedef struct {
    coord_write_op_t op;
    coord_t *co;
    leader_kind_t kind;
    char holder[128];  /* ours (OP_TRY) */
    int64_t epoch;     /* in: ours (OP_CHECK); out: the new one (OP_TRY) */
    int leads;         /* OP_TRY: 1 we lead, 0 another session does */
    int lost;          /* OP_CHECK: 1 we no longer lead */
    char why[160];     /* ... and why */
    size_t marked;     /* rounds recovery marked failed */
    int master;        /* role master (else single) */
    char host[64];     /* for our masters row */
    int64_t started_ms;
    char row_err[160]; /* writing our masters row failed: why */
} leader_op_t;

/* Our row of the masters table (sflctl fleet), after a recovery (single),
 * a try (leader or standby) or a check (leader): role, the epoch we lead
 * with or saw, now. Unfenced, so a standby writes it too. A failure never
 * fails the try or check (the table only informs the operator): it is
 * kept for a warning. A leader forgets rows not written for an hour (their
 * processes are long gone), a single coordinator every other row (it holds
 * the state_dir lock: nobody else runs). */
static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void heartbeat(coord_store_t *s, leader_op_t *o)
{
    coord_master_row_t m;
    int64_t forget = 0, e = 0;

    memset(&m, 0, sizeof(m));
    snprintf(m.holder, sizeof(m.holder), "%s", o->holder);
    snprintf(m.host, sizeof(m.host), "%s", o->host);
    m.pid = (int64_t)getpid();
    m.started_ms = o->started_ms;
    m.seen_ms = wall_ms();
    if (!o->master) {
        m.role = COORD_MASTER_SINGLE;
        forget = m.seen_ms + 1;
    } else if (o->kind == OP_TRY ? o->leads : !o->lost) {
        m.role = COORD_MASTER_LEADER;
        m.epoch = o->epoch;
        forget = m.seen_ms - COORD_MASTER_FORGET_MS;
    } else if (o->kind == OP_TRY) {
        m.role = COORD_MASTER_STANDBY;
        if (coord_store_leader_get(s, &e, NULL, NULL) == 0)
            m.epoch = e;
    } else {
        return; /* lost: stepping down */
    }
    if (coord_store_master_seen(s, &m, forget) < 0)
        snprintf(o->row_err, sizeof(o->row_err), "%s", sfl_last_error());
}

static int leader_act(coord_store_t *s, leader_op_t *o);

static int leader_run(coord_store_t *s, coord_write_op_t *op)
{
    leader_op_t *o = (leader_op_t *)op;
    int rc;

    if (o->kind == OP_GONE)
        return coord_store_master_gone(s, o->holder);
    if ((rc = leader_act(s, o)) >= 0)
        heartbeat(s, o);
    return rc;
}

static int leader_act(coord_store_t *s, leader_op_t *o)
{
    char holder[128];
    int64_t e = 0, since = 0;
    int rc;

    switch (o->kind) {
    case OP_RECOVER:
        return coord_store_recover(s, "coordinator restarted", &o->marked);
    case OP_TRY:
        if ((rc = coord_store_leader_try(s, o->holder, &o->epoch)) <= 0)
            return rc;
        o->leads = 1;
        /* From here every write of this connection is conditional on our
         * epoch, recovery's first. */
        coord_store_fence(s, o->epoch);
        return coord_store_recover(s, "round master changed", &o->marked);
    case OP_CHECK:
        rc = coord_store_leader_get(s, &e, holder, &since);
        if (!coord_store_leader_held(s)) {
            o->lost = 1;
            snprintf(o->why, sizeof(o->why), "the store connection was reset: the leader lock "
                     "is lost");
        } else if (rc == 0 && e != o->epoch) {
            o->lost = 1;
            snprintf(o->why, sizeof(o->why), "epoch %lld leads (holder %.100s)", (long long)e,
                     holder);
        }
        return rc == SFL_ENOTFOUND ? 0 : rc;
    case OP_GONE:
        break;
    }
    return SFL_EINVAL;
}

static void post(coord_t *co, leader_kind_t kind);

/* Another master leads, or may: stop serving now. Nothing this process
 * still has in memory may be written (its writes are fenced anyway). */
static void lost(coord_t *co, const char *why)
{
    char q[300];

    if (co->fenced)
        return;
    co->fenced = 1;
    co->serving = 0;
    coord_log(COORD_LOG_ERROR, "fenced", "epoch=%lld reason=%s exit_status=%d",
              (long long)co->epoch, coord_log_quote(why, q, sizeof(q)), COORD_EXIT_FENCED);
    uv_timer_stop(&co->leader_timer);
    /* No new agent or operator: the other master serves them. */
    sfl_listener_close(co->listener);
    co->listener = NULL;
    sfl_listener_close(co->admin);
    co->admin = NULL;
    if (co->lcbs.lost != NULL)
        co->lcbs.lost(co, SFL_EFENCED, co->lcbs.ud);
    else
        coord_shutdown(co, 0, NULL, NULL);
}

static void took_over(coord_t *co, const leader_op_t *o)
{
    char holder[128];
    int64_t e, since;
    int rc;

    co->epoch = o->epoch;
    co->first_tasks = 1;
    coord_log(COORD_LOG_INFO, "leader", "epoch=%lld holder=%s standby_ms=%llu "
              "rounds_abandoned=%zu", (long long)o->epoch, co->holder,
              (unsigned long long)(uv_now(co->loop) - co->standby_since), o->marked);
    /* The loop's read connection may have been lost while we waited (the
     * server restarted): a failed call makes the next one reconnect, so
     * one cheap read first, then the state. */
    if (coord_store_leader_get(co->store, &e, holder, &since) < 0 &&
        coord_store_leader_get(co->store, &e, holder, &since) < 0)
        coord_log(COORD_LOG_WARN, "store_read_failed", "error=\"%s\"", sfl_last_error());
    if ((rc = coord__serve(co)) < 0) {
        char q[400];

        coord_log(COORD_LOG_ERROR, "takeover_failed", "epoch=%lld error=%s",
                  (long long)o->epoch, coord_log_quote(sfl_last_error(), q, sizeof(q)));
        lost(co, "cannot start serving after taking over");
        return;
    }
    if (co->lcbs.leading != NULL)
        co->lcbs.leading(co, co->lcbs.ud);
}

static void leader_done(coord_write_op_t *op)
{
    leader_op_t *o = (leader_op_t *)op;
    coord_t *co = o->co;
    char q[300];

    if (o->kind == OP_GONE) {
        if (op->rc < 0 && !op->abandoned)
            coord_log(COORD_LOG_WARN, "master_row_failed", "error=%s",
                      coord_log_quote(op->error, q, sizeof(q)));
        sfl__free(o);
        return;
    }
    co->leader_op = 0;
    if (op->abandoned || co->stopping || co->fenced) {
        sfl__free(o);
        return;
    }
    if (o->row_err[0] != '\0' && !co->master_row_err)
        coord_log(COORD_LOG_WARN, "master_row_failed", "error=%s",
                  coord_log_quote(o->row_err, q, sizeof(q)));
    co->master_row_err = o->row_err[0] != '\0';
    switch (o->kind) {
    case OP_RECOVER:
    case OP_GONE:
        break;
    case OP_TRY:
        if (op->rc < 0) {
            /* The store is unreachable (restarting?): keep trying, say so
             * once per outage. */
            if (!co->standby_err)
                coord_log(COORD_LOG_WARN, "standby_error", "error=%s",
                          coord_log_quote(op->error, q, sizeof(q)));
            co->standby_err = 1;
            if (o->leads) {
                /* Recovery failed under the lock: leave it to another. */
                lost(co, "recovery after taking over failed");
                break;
            }
        } else if (o->leads) {
            took_over(co, o);
        } else if (co->standby_err) {
            co->standby_err = 0;
            coord_log(COORD_LOG_INFO, "standby", "holder=%s store=reachable", co->holder);
        }
        break;
    case OP_CHECK:
        if (o->lost)
            lost(co, o->why);
        else if (op->rc < 0)
            coord_log(COORD_LOG_WARN, "leader_check_failed", "epoch=%lld error=%s",
                      (long long)co->epoch, coord_log_quote(op->error, q, sizeof(q)));
        break;
    }
    sfl__free(o);
}

/* What the writer thread needs of co, copied. */
static void fill(leader_op_t *o, coord_t *co, leader_kind_t kind)
{
    o->op.run = leader_run;
    o->co = co;
    o->kind = kind;
    o->epoch = co->epoch;
    o->master = co->master;
    o->started_ms = co->started_ms;
    snprintf(o->holder, sizeof(o->holder), "%s", co->holder);
    snprintf(o->host, sizeof(o->host), "%s", co->host);
}

static void post(coord_t *co, leader_kind_t kind)
{
    leader_op_t *o;

    if (co->leader_op)
        return;
    if ((o = sfl__calloc(1, sizeof(*o))) == NULL)
        return; /* the next tick tries again */
    fill(o, co, kind);
    o->op.done = leader_done;
    co->leader_op = 1;
    coord_writer_post(co->writer, &o->op);
}

static void on_leader_timer(uv_timer_t *t)
{
    coord_t *co = t->data;

    if (co->stopping || co->fenced)
        return;
    post(co, co->serving ? OP_CHECK : OP_TRY);
}

static void noop_done(coord_write_op_t *op)
{
    (void)op;
}

/* Synchronously, at startup (coord_writer_call): the first try. */
static int call(coord_t *co, leader_kind_t kind, leader_op_t *o)
{
    memset(o, 0, sizeof(*o));
    fill(o, co, kind);
    o->op.done = noop_done;
    coord_writer_call(co->writer, &o->op);
    if (o->op.rc < 0)
        return sfl__fail(o->op.rc, "%s", o->op.error);
    return 0;
}

int coord_leader_start(coord_t *co)
{
    char host[64];
    leader_op_t o;
    int rc;

    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "?");
    host[sizeof(host) - 1] = '\0';
    snprintf(co->holder, sizeof(co->holder), "%.63s pid %ld listen %.40s", host,
             (long)getpid(), co->cfg.listen);
    snprintf(co->host, sizeof(co->host), "%s", host);
    co->master = strcmp(co->cfg.role, COORD_ROLE_MASTER) == 0;
    if (!co->master) {
        if ((rc = call(co, OP_RECOVER, &o)) < 0)
            return rc;
        co->abandoned = o.marked;
        return 1;
    }
    if ((rc = call(co, OP_TRY, &o)) < 0)
        return rc;
    co->standby_since = uv_now(co->loop);
    if (o.leads) {
        co->epoch = o.epoch;
        co->first_tasks = 1;
        co->abandoned = o.marked;
        coord_log(COORD_LOG_INFO, "leader", "epoch=%lld holder=%s standby_ms=0 "
                  "rounds_abandoned=%zu", (long long)o.epoch, co->holder, o.marked);
        return 1;
    }
    coord_log(COORD_LOG_INFO, "standby", "holder=%s retry_ms=%llu", co->holder,
              (unsigned long long)co->cfg.leader_retry_ms);
    return 0;
}

void coord_leader_write_failed(coord_t *co, int rc)
{
    if (!co->master || co->fenced || co->stopping)
        return;
    if (rc == SFL_EFENCED) {
        lost(co, "a write was refused: superseded by a newer round master");
        return;
    }
    post(co, OP_CHECK);
}

void coord_leader_arm(coord_t *co)
{
    if (co->master)
        uv_timer_start(&co->leader_timer, on_leader_timer, co->cfg.leader_retry_ms,
                       co->cfg.leader_retry_ms);
}

void coord_leader_stop(coord_t *co)
{
    leader_op_t *o;

    uv_timer_stop(&co->leader_timer);
    /* A clean shutdown: our masters row goes (before "stopped": the
     * shutdown waits for the writer's queue). Not once fenced: the store
     * may be out of reach, and the row going stale says the same. */
    if (co->fenced || co->writer == NULL || co->holder[0] == '\0' ||
        (o = sfl__calloc(1, sizeof(*o))) == NULL)
        return;
    fill(o, co, OP_GONE);
    o->op.done = leader_done;
    coord_writer_post(co->writer, &o->op);
}

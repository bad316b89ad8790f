/* The coordinator's loop beside a big checkpoint commit (issue 11, item 2),
 * measured on the store itself: a round commit with a MB-megabyte
 * checkpoint (default 256) runs while the loop records an agent every
 * millisecond.
 *
 *   before: the design the coordinator had (the commit on a worker thread
 *           through a second connection; the loop writing through its own,
 *           waiting in SQLite's busy handler) - the longest single loop write.
 *   after:  the single writer (server/store/writer.h): the commit and the loop's
 *           writes are posted to one thread; the loop only posts - the
 *           longest the loop was late for its 1 ms timer, and the longest a
 *           record waited behind the commit (delayed, not blocking).
 *
 * Usage: bench_writer [MB]. Writes to a temporary directory under TMPDIR. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "store/store.h"
#include "store/writer.h"

static char dir[512];

static double ms_since(uint64_t t0)
{
    return (double)(uv_hrtime() - t0) / 1e6;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_writer: %s: %s\n", what, sfl_last_error());
    exit(1);
}

/* A job with round 1 open and aggregating, ready for its commit. */
static coord_store_t *prepare(const char *name, int64_t *job)
{
    static const uint8_t nonce[COORD_NONCE_BYTES];
    char path[600];
    coord_store_t *s = NULL;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (coord_store_open(path, NULL, &s) < 0 ||
        coord_store_job_create(s, "big", (const uint8_t *)"spec", 4, 1, job) < 0 ||
        coord_store_round_open(s, *job, 1, 1, nonce, NULL, 0) < 0 ||
        coord_store_round_set_state(s, *job, 1, 1, COORD_SROW_TRAINING, NULL) < 0 ||
        coord_store_round_set_state(s, *job, 1, 1, COORD_SROW_AGGREGATING, NULL) < 0)
        die("prepare");
    return s;
}

static void agent_row(coord_agent_row_t *a, int i)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->name, sizeof(a->name), "agent-%d", i);
    a->cert_fingerprint[0] = (uint8_t)i;
    a->cert_fingerprint[1] = (uint8_t)(i >> 8);
    a->identity_pk[0] = (uint8_t)i;
    a->identity_pk[1] = (uint8_t)(i >> 8);
    a->identity_pk[2] = 1;
}

/* ---- before: two connections ------------------------------------------------------ */

typedef struct {
    coord_store_t *s;
    int64_t job;
    const uint8_t *model;
    size_t len;
    volatile int done;
    double ms;
} commit_arg_t;

static void commit_thread(void *p)
{
    commit_arg_t *c = p;
    uint64_t t0 = uv_hrtime();

    if (coord_store_round_commit(c->s, c->job, 1, 1, c->model, c->len, NULL, NULL) < 0)
        die("commit");
    c->ms = ms_since(t0);
    c->done = 1;
}

static void before(const uint8_t *model, size_t len)
{
    char path[600];
    coord_store_t *loopdb = NULL;
    commit_arg_t c = {0};
    uv_thread_t th;
    double worst = 0;
    int n = 0;

    c.s = prepare("before.db", &c.job);
    c.model = model;
    c.len = len;
    snprintf(path, sizeof(path), "%s/before.db", dir);
    if (coord_store_open(path, NULL, &loopdb) < 0)
        die("open");
    uv_thread_create(&th, commit_thread, &c);
    while (!c.done) {
        coord_agent_row_t a;
        uint64_t t0 = uv_hrtime();
        double w;

        agent_row(&a, n++);
        if (coord_store_agent_upsert(loopdb, &a, NULL) < 0)
            die("upsert");
        w = ms_since(t0);
        if (w > worst)
            worst = w;
        uv_sleep(1);
    }
    uv_thread_join(&th);
    printf("bench_writer mode=before checkpoint_mb=%zu commit_ms=%.1f loop_writes=%d "
           "longest_loop_write_ms=%.1f\n", len >> 20, c.ms, n, worst);
    coord_store_close(loopdb);
    coord_store_close(c.s);
}

/* ---- after: the single writer ----------------------------------------------------- */

typedef struct {
    coord_write_op_t op;
    int64_t job;
    const uint8_t *model;
    size_t len;
    int *committed;
} commit_op_t;

typedef struct {
    coord_write_op_t op;
    coord_agent_row_t a;
    uint64_t posted;
    double *max_wait;
} upsert_op_t;

static int commit_run(coord_store_t *s, coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;

    return coord_store_round_commit(s, o->job, 1, 1, o->model, o->len, NULL, NULL);
}

static void commit_done(coord_write_op_t *op)
{
    commit_op_t *o = (commit_op_t *)op;

    if (op->rc < 0) {
        fprintf(stderr, "bench_writer: commit: %s\n", op->error);
        exit(1);
    }
    *o->committed = 1;
}

static int upsert_run(coord_store_t *s, coord_write_op_t *op)
{
    return coord_store_agent_upsert(s, &((upsert_op_t *)op)->a, NULL);
}

static void upsert_done(coord_write_op_t *op)
{
    upsert_op_t *o = (upsert_op_t *)op;

    if (op->rc < 0) {
        fprintf(stderr, "bench_writer: upsert: %s\n", op->error);
        exit(1);
    }
    if (ms_since(o->posted) > *o->max_wait)
        *o->max_wait = ms_since(o->posted);
    free(o);
}

typedef struct {
    coord_writer_t *w;
    uv_timer_t timer;
    uint64_t last;
    double worst_lag, max_wait;
    int n, committed;
} after_t;

static void on_tick(uv_timer_t *t)
{
    after_t *x = t->data;
    uint64_t now = uv_hrtime();
    double lag = (double)(now - x->last) / 1e6 - 1.0;
    upsert_op_t *o;

    if (lag > x->worst_lag)
        x->worst_lag = lag;
    x->last = now;
    if (x->committed) {
        uv_timer_stop(t);
        uv_close((uv_handle_t *)t, NULL);
        return;
    }
    if ((o = calloc(1, sizeof(*o))) == NULL)
        exit(1);
    o->op.run = upsert_run;
    o->op.done = upsert_done;
    agent_row(&o->a, x->n++);
    o->posted = now;
    o->max_wait = &x->max_wait;
    coord_writer_post(x->w, &o->op);
}

static void after(const uint8_t *model, size_t len)
{
    uv_loop_t loop;
    commit_op_t c = {0};
    after_t x = {0};
    uint64_t t0;

    uv_loop_init(&loop);
    c.op.run = commit_run;
    c.op.done = commit_done;
    c.model = model;
    c.len = len;
    c.committed = &x.committed;
    if (coord_writer_new(&loop, prepare("after.db", &c.job), NULL, &x.w) < 0)
        die("writer");
    t0 = uv_hrtime();
    coord_writer_post(x.w, &c.op);
    uv_timer_init(&loop, &x.timer);
    x.timer.data = &x;
    x.last = uv_hrtime();
    uv_timer_start(&x.timer, on_tick, 1, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    printf("bench_writer mode=after checkpoint_mb=%zu commit_ms=%.1f loop_writes=%d "
           "longest_loop_lag_ms=%.1f longest_record_wait_ms=%.1f\n",
           len >> 20, ms_since(t0), x.n, x.worst_lag, x.max_wait);
    coord_writer_free(x.w);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

static void cleanup(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[900];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 256, len;
    uint8_t *model;

    if (mb == 0 || mb > 900) {
        fprintf(stderr, "usage: bench_writer [MB, 1..900]\n");
        return 2;
    }
    len = mb << 20;
    if ((model = malloc(len)) == NULL)
        return 1;
    for (size_t i = 0; i < len; i++)
        model[i] = (uint8_t)(i * 2654435761u >> 13);
    snprintf(dir, sizeof(dir), "%s/sfl-bench-writer-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        return 1;
    atexit(cleanup);
    before(model, len);
    after(model, len);
    free(model);
    return 0;
}

/* The single SQLite writer (writer.h): one thread, a FIFO of operations
 * under a mutex, and a uv_async that brings their completions back to the
 * loop in the same order. */
#include "store/writer.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

/* Operations in one group commit at most: bounds how long the first of
 * them waits for its done (a Join's row is ~1 ms of SQLite work). */
#define WRITER_BATCH_MAX 256

struct coord_writer {
    uv_async_t async;        /* first: the close callback frees the writer */
    uv_thread_t thread;
    uv_mutex_t lock;
    uv_cond_t cond;
    coord_store_t *store;    /* the writer thread's once started */
    /* under lock */
    coord_write_op_t *todo, **todo_tail; /* posted, not run */
    coord_write_op_t *ran, **ran_tail;   /* run, done not called */
    size_t queued, max_queue;
    int stop;
    /* loop thread only */
    size_t pending;          /* posted, done not called */
    coord_writer_cbs_t cbs;
};

static void run_one(coord_store_t *s, coord_write_op_t *op)
{
    uint64_t t0 = uv_hrtime();

    op->rc = op->run(s, op);
    op->error[0] = '\0';
    if (op->rc < 0)
        snprintf(op->error, sizeof(op->error), "%s", sfl_last_error());
    op->run_ns = uv_hrtime() - t0;
}

/* Takes the next operation, or (under lock) the run of batchable ones at
 * the head of the queue, WRITER_BATCH_MAX at most, as a list. */
static coord_write_op_t *take_todo(coord_writer_t *w)
{
    coord_write_op_t *head = w->todo, *last = head;
    size_t n = 1;

    if (head->batchable)
        while (last->next != NULL && last->next->batchable && n < WRITER_BATCH_MAX) {
            last = last->next;
            n++;
        }
    w->todo = last->next;
    if (w->todo == NULL)
        w->todo_tail = &w->todo;
    last->next = NULL;
    w->queued -= n;
    return head;
}

/* Runs a list of batchable operations in one transaction; when the batch
 * cannot begin, one by one. A failed commit fails them all: none of their
 * changes was kept. */
static void run_batch(coord_store_t *s, coord_write_op_t *l)
{
    uint64_t t0 = uv_hrtime(), share;
    size_t n = 0;
    int rc;

    if (l->next == NULL || coord_store_batch_begin(s) != 0) {
        for (coord_write_op_t *op = l; op != NULL; op = op->next)
            run_one(s, op);
        return;
    }
    for (coord_write_op_t *op = l; op != NULL; op = op->next, n++)
        run_one(s, op);
    rc = coord_store_batch_commit(s);
    share = (uv_hrtime() - t0) / n;
    for (coord_write_op_t *op = l; op != NULL; op = op->next) {
        op->run_ns = share;
        if (rc < 0 && op->rc == 0) {
            op->rc = rc;
            snprintf(op->error, sizeof(op->error), "%s", sfl_last_error());
        }
    }
}

static void writer_main(void *arg)
{
    coord_writer_t *w = arg;

    uv_mutex_lock(&w->lock);
    for (;;) {
        coord_write_op_t *l, *tail;

        while (w->todo == NULL && !w->stop)
            uv_cond_wait(&w->cond, &w->lock);
        if (w->todo == NULL)
            break; /* stop, and the queue is drained */
        l = take_todo(w);
        uv_mutex_unlock(&w->lock);
        run_batch(w->store, l);
        for (tail = l; tail->next != NULL; tail = tail->next)
            ;
        uv_mutex_lock(&w->lock);
        *w->ran_tail = l;
        w->ran_tail = &tail->next;
        uv_async_send(&w->async);
    }
    uv_mutex_unlock(&w->lock);
}

/* Takes the completed operations, in order. */
static coord_write_op_t *take_ran(coord_writer_t *w)
{
    coord_write_op_t *l;

    uv_mutex_lock(&w->lock);
    l = w->ran;
    w->ran = NULL;
    w->ran_tail = &w->ran;
    uv_mutex_unlock(&w->lock);
    return l;
}

static void deliver(coord_writer_t *w, coord_write_op_t *l, int abandoned)
{
    while (l != NULL) {
        coord_write_op_t *next = l->next;

        if (--w->pending == 0)
            uv_unref((uv_handle_t *)&w->async); /* nothing to wait for */
        l->abandoned = abandoned;
        if (!abandoned && w->cbs.observe)
            w->cbs.observe(w->cbs.ud, (double)l->run_ns / 1e9);
        l->done(l);
        l = next;
    }
}

static void on_async(uv_async_t *a)
{
    coord_writer_t *w = (coord_writer_t *)a;
    coord_write_op_t *l = take_ran(w);

    if (l == NULL)
        return;
    deliver(w, l, 0);
    if (w->pending == 0 && w->cbs.drained)
        w->cbs.drained(w->cbs.ud);
}

int coord_writer_new(uv_loop_t *loop, coord_store_t *s, const coord_writer_cbs_t *cbs,
                     coord_writer_t **out)
{
    coord_writer_t *w = sfl__calloc(1, sizeof(*w));

    *out = NULL;
    if (w == NULL)
        return SFL_ENOMEM;
    w->todo_tail = &w->todo;
    w->ran_tail = &w->ran;
    if (cbs != NULL)
        w->cbs = *cbs;
    if (uv_mutex_init(&w->lock) != 0) {
        sfl__free(w);
        return sfl__fail(SFL_ENOMEM, "writer: cannot create a mutex");
    }
    if (uv_cond_init(&w->cond) != 0) {
        uv_mutex_destroy(&w->lock);
        sfl__free(w);
        return sfl__fail(SFL_ENOMEM, "writer: cannot create a condition variable");
    }
    if (uv_async_init(loop, &w->async, on_async) != 0) {
        uv_cond_destroy(&w->cond);
        uv_mutex_destroy(&w->lock);
        sfl__free(w);
        return sfl__fail(SFL_ENOMEM, "writer: cannot create its loop handle");
    }
    uv_unref((uv_handle_t *)&w->async);
    w->store = s;
    if (uv_thread_create(&w->thread, writer_main, w) != 0) {
        w->store = NULL;
        coord_writer_free(w); /* closes the handle; s stays the caller's */
        return sfl__fail(SFL_ENOMEM, "writer: cannot start its thread");
    }
    *out = w;
    return 0;
}

void coord_writer_post(coord_writer_t *w, coord_write_op_t *op)
{
    op->next = NULL;
    op->rc = 0;
    op->abandoned = 0;
    op->error[0] = '\0';
    if (w->pending++ == 0)
        uv_ref((uv_handle_t *)&w->async); /* the loop lives until done ran */
    uv_mutex_lock(&w->lock);
    *w->todo_tail = op;
    w->todo_tail = &op->next;
    if (++w->queued > w->max_queue)
        w->max_queue = w->queued;
    uv_cond_signal(&w->cond);
    uv_mutex_unlock(&w->lock);
}

void coord_writer_call(coord_writer_t *w, coord_write_op_t *op)
{
    /* Behind everything posted before it, as a post would be. */
    for (;;) {
        deliver(w, take_ran(w), 0);
        if (w->pending == 0)
            break;
        uv_sleep(1);
    }
    uv_mutex_lock(&w->lock); /* the thread is idle: its store is ours */
    run_one(w->store, op);
    uv_mutex_unlock(&w->lock);
    op->abandoned = 0;
    if (w->cbs.observe)
        w->cbs.observe(w->cbs.ud, (double)op->run_ns / 1e9);
    op->done(op);
}

size_t coord_writer_pending(const coord_writer_t *w)
{
    return w->pending;
}

size_t coord_writer_max_queue(const coord_writer_t *w)
{
    return w->max_queue;
}

static void writer_closed(uv_handle_t *h)
{
    sfl__free(h); /* async is the first member */
}

void coord_writer_free(coord_writer_t *w)
{
    if (w == NULL)
        return;
    uv_mutex_lock(&w->lock);
    w->stop = 1;
    uv_cond_signal(&w->cond);
    uv_mutex_unlock(&w->lock);
    if (w->store != NULL)
        uv_thread_join(&w->thread);
    deliver(w, take_ran(w), 1);
    coord_store_close(w->store);
    uv_cond_destroy(&w->cond);
    uv_mutex_destroy(&w->lock);
    uv_close((uv_handle_t *)&w->async, writer_closed);
}

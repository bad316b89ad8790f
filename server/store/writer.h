/* The coordinator's one SQLite writer: a thread that owns the only write
 * connection to the store. The event loop posts operations and never waits
 * on SQLite: operations run on the writer thread one at a time, in the order
 * they were posted, and each one's completion then runs on the loop with the
 * result. A checkpoint commit of hundreds of megabytes therefore delays the
 * writes queued behind it (a Join's record, a round's opening), never the
 * loop: connections keep being served meanwhile. Reads go through the
 * loop's own read-only connection (WAL: readers never wait on the writer).
 *
 * Batchable operations queued back to back run as one transaction (group
 * commit), 256 at most: a Join storm costs one fsync per
 * writer turn, not one per agent.
 *
 * Acting on a write: whatever another party may rely on (a reply, a task
 * sent to an agent) happens in the completion, after the write is durable;
 * docs/design.md, "The single writer", lists which state changes take
 * effect in memory at once and which wait. */
#ifndef COORD_WRITER_H
#define COORD_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "store/store.h"

typedef struct coord_writer coord_writer_t;
typedef struct coord_write_op coord_write_op_t;

/* An operation, embedded in the poster's own record (first member or found
 * with a container cast): the writer never allocates, so a post cannot
 * fail. */
struct coord_write_op {
    /* Writer thread: the write, against the only write connection. Returns
     * 0 or a negative code with sfl_last_error() set (copied to error). */
    int (*run)(coord_store_t *s, coord_write_op_t *op);
    /* Loop thread, once, after run: reads rc and error and releases the
     * record. abandoned = 1 when the coordinator is being freed without a
     * shutdown: only release. */
    void (*done)(coord_write_op_t *op);
    /* Set by the poster: run may share one transaction (one fsync) with
     * the batchable operations queued next to it (coord_store_batch_begin;
     * its own transaction becomes a savepoint). Then done runs only once
     * the whole batch is durable, and a failed batch commit fails every
     * operation in it. For many small writes (Joins, participation). */
    int batchable;
    int rc;
    int abandoned;
    char error[256];
    uint64_t run_ns;       /* how long run took */
    coord_write_op_t *next; /* the writer's */
};

/* Called on the loop (either may be NULL): observe with each operation's
 * run time in seconds, before its done; drained once no operation is
 * pending any more, after the last done. */
typedef struct {
    void (*observe)(void *ud, double seconds);
    void (*drained)(void *ud);
    void *ud;
} coord_writer_cbs_t;

/* Starts the thread; s becomes the writer's (closed by coord_writer_free). */
int coord_writer_new(uv_loop_t *loop, coord_store_t *s, const coord_writer_cbs_t *cbs,
                     coord_writer_t **out) SFL_MUST_CHECK;
/* Queues op (run and done set), from the loop thread. While operations
 * are pending the writer keeps the loop alive (uv_run returns only after
 * their done ran). */
void coord_writer_post(coord_writer_t *w, coord_write_op_t *op);
/* Runs op now and waits for it, done included, on the calling (loop)
 * thread: for startup, before the coordinator serves, never after. */
void coord_writer_call(coord_writer_t *w, coord_write_op_t *op);
/* Operations posted whose done has not run yet. */
size_t coord_writer_pending(const coord_writer_t *w);
/* The deepest the queue has been. */
size_t coord_writer_max_queue(const coord_writer_t *w);
/* Lets the thread finish the queue, joins it and closes the store; dones
 * not yet run are called with abandoned = 1. The handle is freed on the
 * loop's next turn. NULL is a no-op. */
void coord_writer_free(coord_writer_t *w);

#endif

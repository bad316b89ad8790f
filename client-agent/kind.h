/* The agent's round kinds behind one table (docs/design.md, "The agent"):
 * the agent-side twin of libsfl's algorithm table. agent.c keeps the
 * connection, Join/Subscribe, the task loop and the sealed update's outbox;
 * everything a kind of round does with a verified task, its work on the
 * thread pool, the stage messages of its round and its state is one
 * agent_shape_t in its own file (kind_*.c). A new round kind is that file
 * plus its entry in agent_shapes (kind.c). */
#ifndef AGENT_SHAPE_H
#define AGENT_SHAPE_H

#include <stddef.h>

#include "agent.h"
#include "sfl/wire/msg.h"

typedef struct agent_work agent_work_t;

/* A stage message of a round in hand, as the Subscribe stream brought it
 * (sfl_msg_sub_unpack): kind is its kind letter, the member for it set
 * (borrowed for the call). */
typedef struct agent_stage {
    int kind;
    const sfl_vstep_t *vstep;         /* kind 's' */
    const sfl_msg_sa_stage_t *sa;     /* kind 'a' */
} agent_stage_t;

typedef struct agent_shape {
    /* the kind's name, and the job kind job_start logs for it */
    const char *name, *job_kind;
    /* its state inside the agent: zeroed at agent_new, closed by close */
    size_t state_size;
    /* agent_new, once the local data is read (before eval_file): the
     * kind's part of the data's shape and of the Join summary. 0 or < 0
     * (agent_new fails). NULL: none. */
    int (*setup)(agent_ctx_t *a, void *st);
    /* agent_start: the kind's lines of the starting log. NULL: none. */
    void (*started)(agent_ctx_t *a, void *st);
    /* 1 if a task of this kind: the table is tried in order, the first
     * that claims a verified task gets it. Pure. */
    int (*claims)(const sfl_task_t *t);
    /* A verified task t (taken: freed, refused or kept) in state from;
     * returns the next state (only step() sets it). */
    agent_state_t (*task)(agent_ctx_t *a, void *st, sfl_task_t *t, agent_state_t from);
    /* Before t's work is queued (no work in flight): what the work needs
     * that the loop must set up; 0, or < 0 with why set (t is refused).
     * NULL: nothing. */
    int (*prepare)(agent_ctx_t *a, sfl_task_t *t, char *why, size_t cap);
    /* 1 if t's work trains: it uses and leaves the job's client state. */
    int (*trains)(const sfl_task_t *t);
    /* The work, on the thread pool: sets w->rc (and w->msg or w->update).
     * NULL: the kind queues no work. */
    void (*work)(agent_ctx_t *a, agent_work_t *w);
    /* The work is back on the loop (w taken); the next state. */
    agent_state_t (*trained)(agent_ctx_t *a, void *st, agent_work_t *w, agent_state_t from);
    /* 1: the work's result is a sealed update that waits in the outbox
     * across a lost link (submitted after the rejoin); 0: its round lives
     * on the link, and a result that comes back without one is dropped. */
    int outbox;
    /* The kind letter of its stage messages (0: none) and what to do
     * with one. */
    int stage_kind;
    void (*stage)(agent_ctx_t *a, void *st, const agent_stage_t *m);
    /* Between its messages: 1 and the round's job, round, attempt and
     * phase into r if it holds a round (the heartbeat reports it); else 0.
     * NULL: never. */
    int (*in_round)(const void *st, sfl_heartbeat_req_t *r);
    /* The link is gone: forget its calls, cancelling them first if
     * cancel. NULL: it makes none. */
    void (*unlink)(void *st, int cancel);
    /* Releases what the state holds (not the state itself). */
    void (*close)(void *st);
} agent_shape_t;

/* The table, in the order tasks are offered; agent_nshapes entries. */
extern const agent_shape_t *const agent_shapes[];
extern const size_t agent_nshapes;

/* The kinds (kind_*.c). */
extern const agent_shape_t agent_shape_vertical;
extern const agent_shape_t agent_shape_secagg;
extern const agent_shape_t agent_shape_stats;
extern const agent_shape_t agent_shape_update;

/* The kind of t (the last entry claims every task: never NULL). */
const agent_shape_t *agent_shape_for(const sfl_task_t *t);
/* The kind whose stage messages have letter kind; NULL for none. */
const agent_shape_t *agent_shape_staged(int kind);
/* s's index in the table; agent_nshapes for none. */
size_t agent_shape_index(const agent_shape_t *s);

#endif

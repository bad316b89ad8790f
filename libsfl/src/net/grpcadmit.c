/* Admission control of a gRPC server's requests: request budgets. A
 * request's DATA waits unacknowledged (so flow control bounds it to
 * PENDING_WINDOW) until its size is known from the message prefix and fits
 * both its connection's max_buffered and the process budget shared by all
 * the connections (sfl_grpc_budget_t, grpc.h); then it is reserved,
 * acknowledged and decoded. Calls waiting for the process budget queue in
 * arrival order across connections; one waiting for its own connection's
 * room stays out of that queue so it cannot stall the others. */
#include "net/grpc_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

struct sfl_grpc_budget {
    uint64_t limit;
    uint64_t used;
    /* calls waiting for admission, oldest first: only the head may take
     * what is released, whichever connection it is on */
    sfl_grpc_call_t *qhead, *qtail;
};

int sfl_grpc_budget_new(uint64_t limit, sfl_grpc_budget_t **out)
{
    assert(out != NULL);
    *out = sfl__calloc(1, sizeof(**out));
    if (*out == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a budget");
    (*out)->limit = limit;
    return 0;
}

void sfl_grpc_budget_free(sfl_grpc_budget_t *b)
{
    assert(b == NULL || b->qhead == NULL); /* its sessions are gone */
    sfl__free(b);
}

uint64_t sfl_grpc_budget_used(const sfl_grpc_budget_t *b)
{
    return b->used;
}

/* Room for need more request bytes on the connection. */
static bool fits_conn(const sfl_grpc_session_t *s, size_t need)
{
    return s->reserved <= s->max_buffered && need <= s->max_buffered - s->reserved;
}

/* Room in the process, for c as the oldest waiting call. */
static bool fits_budget(const sfl_grpc_budget_t *b, const sfl_grpc_call_t *c, size_t need)
{
    return b == NULL || ((b->qhead == NULL || b->qhead == c) && b->used <= b->limit &&
                         need <= b->limit - b->used);
}

static void enqueue_wait(sfl_grpc_budget_t *b, sfl_grpc_call_t *c)
{
    if (c->queued_b)
        return;
    c->queued_b = true;
    c->qnext = NULL;
    c->qprev = b->qtail;
    if (b->qtail != NULL)
        b->qtail->qnext = c;
    else
        b->qhead = c;
    b->qtail = c;
}

void sfl__grpc_budget_dequeue(sfl_grpc_budget_t *b, sfl_grpc_call_t *c)
{
    if (!c->queued_b)
        return;
    if (c->qprev != NULL)
        c->qprev->qnext = c->qnext;
    else
        b->qhead = c->qnext;
    if (c->qnext != NULL)
        c->qnext->qprev = c->qprev;
    else
        b->qtail = c->qprev;
    c->qprev = c->qnext = NULL;
    c->queued_b = false;
}

/* The budget's oldest waiting call may fit now: its session tries at its
 * next tick (or right away when it is the caller's own). */
void sfl__grpc_budget_kick(sfl_grpc_budget_t *b, const sfl_grpc_session_t *self)
{
    if (b->qhead != NULL && b->qhead->s != self && b->used < b->limit)
        sfl__grpc_wake(b->qhead->s);
}

/* The session's calls whose DATA waits in pend, in the order their first
 * byte came: admission walks these, not the session's every call (a
 * front-end's link to its master holds a stream per agent). */
static void wait_add(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    if (c->waiting)
        return;
    c->waiting = true;
    c->wnext = NULL;
    c->wprev = s->wtail;
    if (s->wtail != NULL)
        s->wtail->wnext = c;
    else
        s->whead = c;
    s->wtail = c;
}

void sfl__grpc_wait_del(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    if (!c->waiting)
        return;
    if (c->wprev != NULL)
        c->wprev->wnext = c->wnext;
    else
        s->whead = c->wnext;
    if (c->wnext != NULL)
        c->wnext->wprev = c->wprev;
    else
        s->wtail = c->wprev;
    c->wprev = c->wnext = NULL;
    c->waiting = false;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

typedef enum {
    ADMITTED,
    REFUSED,     /* it can never fit: answered RESOURCE_EXHAUSTED */
    WAIT_DATA,   /* its size is not known yet */
    WAIT_CONN,   /* its connection has no room */
    WAIT_BUDGET  /* in the process queue */
} admit_t;

/* Admits c if its request's size is known and fits the budgets: reserves
 * it, acknowledges the waiting bytes and decodes them. The size is the
 * message's own prefix (the method's max_request bounds it); a body that
 * ended shorter than a prefix is let through for the decoder to refuse.
 * What is reserved is what the call will hold: the message's n bytes
 * (c->req); its 5-byte prefix is parsed, never kept. Reserving n + 5 made a
 * message of exactly max_message wait forever for a connection whose
 * max_buffered is max_message (issue 23, finding 8). A request that no
 * release can ever make room for is answered at once, not left waiting. */
static admit_t admit(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    size_t need = c->pend_len;
    uint8_t *pend = c->pend;
    char msg[160];

    if (c->pend_len >= SFL_GRPCFRAME_PREFIX) {
        uint32_t n = be32(c->pend + 1);

        /* too big: reserve nothing, the decoder refuses the prefix */
        need = n > c->rx.max_message ? 0 : (size_t)n;
    } else if (!c->remote_closed) {
        return WAIT_DATA;
    }
    if (need > s->max_buffered || (s->budget != NULL && need > s->budget->limit)) {
        snprintf(msg, sizeof(msg), "request of %zu bytes exceeds the %llu bytes %s may buffer",
                 need,
                 (unsigned long long)(need > s->max_buffered ? s->max_buffered : s->budget->limit),
                 need > s->max_buffered ? "a connection" : "the process");
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return REFUSED;
    }
    /* A call its own connection has no room for waits for that
     * connection's releases, outside the process queue: a connection
     * holding its budget cannot stall the others. */
    if (!fits_conn(s, need)) {
        if (s->budget != NULL)
            sfl__grpc_budget_dequeue(s->budget, c);
        return WAIT_CONN;
    }
    if (!fits_budget(s->budget, c, need)) {
        enqueue_wait(s->budget, c);
        return WAIT_BUDGET;
    }
    if (s->budget != NULL)
        sfl__grpc_budget_dequeue(s->budget, c);
    sfl__grpc_wait_del(s, c);
    c->admitted = true;
    c->reserved = need;
    s->reserved += need;
    if (s->budget != NULL)
        s->budget->used += need;
    need = c->pend_len;
    c->pend = NULL;
    c->pend_len = 0;
    s->pending -= need;
    /* A body that fits the window the stream started with needs no more
     * window: acknowledging its bytes would only send WINDOW_UPDATEs (a
     * frame, a TLS record and a packet per request, results/wire.md). */
    c->one_flight = c->remote_closed || c->reserved <= PENDING_WINDOW - SFL_GRPCFRAME_PREFIX;
    if (!c->one_flight) {
        (void)nghttp2_session_consume_stream(s->h2, c->stream_id, need);
        (void)nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, c->stream_id,
                                                    SERVER_WINDOW);
    }
    if (s->budget != NULL)
        sfl__grpc_budget_kick(s->budget, s); /* the next in line may fit too */
    sfl__grpc_server_data(s, c, pend, need);
    sfl__free(pend);
    if (c->remote_closed && c->state == CALL_RECV_BODY)
        sfl__grpc_server_request_done(s, c);
    return ADMITTED;
}

void sfl__grpc_admit(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    (void)admit(s, c);
}

/* Admits this session's waiting calls that now fit, oldest first; runs
 * inside the session's own entry points only (handlers may run). Once one
 * waits for room on the connection the newer ones wait too (a big request
 * is not starved by small ones); the process queue keeps its own order. */
void sfl__grpc_admit_waiting(sfl_grpc_session_t *s)
{
    sfl_grpc_call_t *c, *nx;

    if (s->h2 == NULL)
        return;
    for (c = s->whead; c != NULL; c = nx) {
        nx = c->wnext; /* admitted, c leaves the list */
        if (c->state != CALL_RECV_BODY || c->admitted || c->pend_len == 0)
            continue;
        if (admit(s, c) == WAIT_CONN)
            break;
    }
}


/* len bytes of DATA arrived on stream id (c its call, or NULL). An admitted
 * request's bytes are acknowledged at once (its reservation covers them;
 * only for the connection when its body fits its first window: admit);
 * one not yet admitted keeps them in pend, acknowledged for the connection
 * but not for the stream (so they bound themselves to PENDING_WINDOW and do
 * not stall the other streams); the bytes of anything else are dropped and
 * acknowledged. */
void sfl__grpc_server_chunk(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int32_t id,
                         const uint8_t *data, size_t len)
{
    uint8_t *p;

    if (c == NULL || c->state != CALL_RECV_BODY) {
        (void)nghttp2_session_consume(s->h2, id, len);
        return;
    }
    if (c->admitted) {
        if (c->one_flight)
            (void)nghttp2_session_consume_connection(s->h2, len);
        else
            (void)nghttp2_session_consume(s->h2, id, len);
        sfl__grpc_server_data(s, c, data, len);
        return;
    }
    (void)nghttp2_session_consume_connection(s->h2, len);
    /* At most one stream window: nghttp2 enforces flow control. */
    p = sfl__reallocarray(c->pend, c->pend_len + len, 1);
    if (p == NULL) {
        (void)nghttp2_session_consume_stream(s->h2, id, len);
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    memcpy(p + c->pend_len, data, len);
    c->pend = p;
    c->pend_len += len;
    s->pending += len;
    wait_add(s, c);
    sfl__grpc_admit_waiting(s); /* c among them, in its turn */
}

/* c holds no request bytes any more: handler ran, refused, stream gone. */
void sfl__grpc_unhold(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    if (s->budget != NULL)
        sfl__grpc_budget_dequeue(s->budget, c);
    if (c->pend_len > 0) {
        if (s->h2 != NULL)
            (void)nghttp2_session_consume_stream(s->h2, c->stream_id, c->pend_len);
        s->pending -= c->pend_len;
    }
    sfl__free(c->pend);
    c->pend = NULL;
    c->pend_len = 0;
    sfl__grpc_wait_del(s, c);
    if (c->reserved == 0)
        return;
    s->reserved -= c->reserved;
    if (s->budget != NULL)
        s->budget->used -= c->reserved;
    c->reserved = 0;
    sfl__grpc_admit_waiting(s);
    if (s->budget != NULL)
        sfl__grpc_budget_kick(s->budget, s);
}

void sfl__grpc_admit_drop(sfl_grpc_session_t *s)
{
    if (s->budget != NULL)
        s->budget->used -= s->reserved;
    s->reserved = s->pending = 0;
}

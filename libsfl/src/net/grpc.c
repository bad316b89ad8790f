/* MAP_ANONYMOUS (not in POSIX 2008) for the nghttp2 allocator. */
#define _DEFAULT_SOURCE
#include "sfl/net/grpc.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>

#include <nghttp2/nghttp2.h>

#include "net/grpc_int.h"
#include "sfl/core/alloc.h"
#include "sfl/net/grpcframe.h"

/* Design notes (the contract is in grpc.h).
 *
 * nghttp2 does the HTTP/2 work in memory: nghttp2_session_mem_recv eats the
 * peer's bytes and calls us back per frame / header / data chunk,
 * nghttp2_session_mem_send hands out the frames to write. Everything gRPC
 * sits in those callbacks.
 *
 * Calls are found by stream id in the session's list, never through
 * nghttp2's stream user data: a call can outlive its stream (the server
 * application still holds it) and a stream can outlive its client call
 * (cancelled, waiting for the RST to go out), and a pointer kept on the
 * other side would dangle in either case. Sessions carry few streams, so
 * the linear search costs nothing.
 *
 * A server call has two owners: the session, while the stream is open, and
 * the application, from the handler until finish. It is freed when both
 * have let go. A client call belongs to the session; after its final
 * callback it stays as an inert entry until nghttp2 closes the stream.
 *
 * The session's own state (open, draining, closing, done) changes only in
 * session_event(). */

#define DEF_MAX_MESSAGE (4u << 20)
#define DEF_MAX_STREAMS 100u
#define DEF_MAX_HEADER_LIST (16u << 10)
#define DEF_MAX_FRAME 16384u
#define DEF_IDLE_MS 300000u
/* Longest grpc-message we send, before percent-encoding (3x after). */
#define MAX_STATUS_MESSAGE 1024
/* pending() gathers frames up to about this many bytes per batch. */
#define OUT_BATCH (64u * 1024u)
/* Flow-control windows we grant: bigger than HTTP/2's 64 KiB default so a
 * multi-megabyte model does not crawl at one window per round trip. They do
 * not bound memory (the message limit does). */
#define STREAM_WINDOW (1 << 20)
#define CONN_WINDOW (4 << 20)
#define DEF_BODY_MS 60000u
#define NO_DEADLINE UINT64_MAX

typedef enum {
    EV_SHUTDOWN, /* the application asked for a graceful close */
    EV_GOAWAY,   /* the peer sent GOAWAY */
    EV_FATAL,    /* protocol violation we must answer with GOAWAY */
    EV_GOAWAY_SENT_ERR, /* nghttp2 answered a violation with GOAWAY itself */
    EV_IDLE,     /* no call for idle_timeout_ms */
    EV_BROKEN,   /* nghttp2 itself failed (memory): nothing more can be sent */
    EV_QUIET     /* nghttp2 wants neither to read nor to write */
} session_event_t;

/* Header flags of a server request, judged when the header block ends. */
enum {
    HDR_POST = 1 << 0,
    HDR_TE = 1 << 1,
    HDR_BAD_TIMEOUT = 1 << 2,
    HDR_BAD_ENCODING = 1 << 3,
    HDR_TOO_BIG = 1 << 4,
    HDR_CT_GRPC = 1 << 5,    /* application/grpc or +proto */
    HDR_CT_OTHER = 1 << 6,   /* application/grpc+something else */
    HDR_BAD_STATUS = 1 << 7, /* client: unparsable grpc-status */
    HDR_LENGTH = 1 << 8      /* server: content-length given */
};

/* One framed message waiting to be handed to nghttp2. */
struct outmsg {
    struct outmsg *next;
    size_t len;
    size_t off;
    uint8_t data[];
};

/* ---- small helpers ---------------------------------------------------- */

const char *sfl_grpc_status_name(int status)
{
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};

    if (status < 0 || status > SFL_GRPC_STATUS_UNAUTHENTICATED)
        return "?";
    return names[status];
}

static uint64_t monotonic_ms(void *ud)
{
    struct timespec ts;

    (void)ud;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t now(const sfl_grpc_session_t *s)
{
    return s->now_ms(s->clock_ud);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static bool value_is(const uint8_t *v, size_t len, const char *lit)
{
    size_t n = strlen(lit);

    return len == n && memcmp(v, lit, n) == 0;
}

static nghttp2_nv mknv(const char *name, const char *value)
{
    nghttp2_nv nv = {(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value, strlen(name),
                     strlen(value), NGHTTP2_NV_FLAG_NONE};
    return nv;
}

int sfl_grpc_timeout_parse(const char *v, size_t len, uint64_t *ms)
{
    uint64_t n = 0;

    assert(ms != NULL && (v != NULL || len == 0));
    *ms = 0;
    /* TimeoutValue is 1..8 ASCII digits, then one unit character. */
    if (len < 2 || len > 9)
        return sfl__fail(SFL_EPARSE, "grpc-timeout: %zu characters (expected 2 to 9)", len);
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return sfl__fail(SFL_EPARSE, "grpc-timeout: byte 0x%02x is not a digit",
                             (unsigned)(uint8_t)v[i]);
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    switch (v[len - 1]) {
    case 'H':
        *ms = n * 3600000u;
        break;
    case 'M':
        *ms = n * 60000u;
        break;
    case 'S':
        *ms = n * 1000u;
        break;
    case 'm':
        *ms = n;
        break;
    case 'u':
        *ms = (n + 999u) / 1000u;
        break;
    case 'n':
        *ms = (n + 999999u) / 1000000u;
        break;
    default:
        return sfl__fail(SFL_EPARSE, "grpc-timeout: unknown unit byte 0x%02x",
                         (unsigned)(uint8_t)v[len - 1]);
    }
    return 0;
}

void sfl_grpc_timeout_format(uint64_t ms, char out[16])
{
    static const struct {
        uint64_t per;
        char unit;
    } units[] = {{1, 'm'}, {1000, 'S'}, {60000, 'M'}, {3600000, 'H'}};
    uint64_t v = ms;
    char unit = 'm';

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        v = ms / units[i].per + (ms % units[i].per != 0);
        unit = units[i].unit;
        if (v <= 99999999u)
            break;
    }
    if (v > 99999999u)
        v = 99999999u;
    snprintf(out, 16, "%llu%c", (unsigned long long)v, unit);
}

size_t sfl_grpc_message_encode(const char *msg, size_t len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0, written = 0;
    bool full = out == NULL || cap == 0;

    assert(msg != NULL || len == 0);
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)msg[i];
        bool esc = c < 0x20 || c > 0x7e || c == '%';
        size_t w = esc ? 3 : 1;

        /* Stop at the first piece that does not fit: never split an escape. */
        if (!full && written + w < cap) {
            if (esc) {
                out[written] = '%';
                out[written + 1] = hex[c >> 4];
                out[written + 2] = hex[c & 15];
            } else {
                out[written] = (char)c;
            }
            written += w;
        } else {
            full = true;
        }
        n += w;
    }
    if (out != NULL && cap > 0)
        out[written] = '\0';
    return n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t sfl_grpc_message_decode(char *str, size_t len)
{
    size_t j = 0;

    assert(str != NULL);
    for (size_t i = 0; i < len; i++) {
        int hi, lo;

        if (str[i] == '%' && len - i > 2 && (hi = hexval(str[i + 1])) >= 0 &&
            (lo = hexval(str[i + 2])) >= 0) {
            str[j++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            str[j++] = str[i];
        }
    }
    str[j] = '\0';
    return j;
}

/* How gRPC clients read an HTTP status that came without grpc-status. */
static int status_from_http(int http)
{
    switch (http) {
    case 400:
        return SFL_GRPC_STATUS_INTERNAL;
    case 401:
        return SFL_GRPC_STATUS_UNAUTHENTICATED;
    case 403:
        return SFL_GRPC_STATUS_PERMISSION_DENIED;
    case 404:
        return SFL_GRPC_STATUS_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return SFL_GRPC_STATUS_UNAVAILABLE;
    default:
        return SFL_GRPC_STATUS_UNKNOWN;
    }
}

static int status_from_rst(uint32_t code)
{
    switch (code) {
    case NGHTTP2_REFUSED_STREAM:
        return SFL_GRPC_STATUS_UNAVAILABLE;
    case NGHTTP2_CANCEL:
        return SFL_GRPC_STATUS_CANCELLED;
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return SFL_GRPC_STATUS_RESOURCE_EXHAUSTED;
    case NGHTTP2_INADEQUATE_SECURITY:
        return SFL_GRPC_STATUS_PERMISSION_DENIED;
    default:
        return SFL_GRPC_STATUS_INTERNAL;
    }
}

/* ---- nghttp2 allocator ------------------------------------------------ */

/* Everything through sfl's hook, except blocks of H2_PAGED_MIN bytes and
 * more: each nghttp2 session allocates a 16 KiB frame buffer (its
 * NGHTTP2_FRAMEBUF_CHUNKLEN) up front and writes each outgoing frame at
 * its start, so an idle agent's session only ever touches the first page
 * or two of it. From the heap the whole block counts in the RSS (and its
 * neighbours' freed pages with it); given pages of its own, only the pages
 * written do, and those go back to the kernel (MADV_DONTNEED: zero pages
 * when next touched) whenever the session has sent everything
 * (release_pages): an idle connection holds none of it. The session (the
 * allocator's user data) records its paged blocks, H2_PAGED_SLOTS at most
 * (beyond that: the heap); heap blocks carry a header with their size, so
 * that realloc knows it. */
#define H2_HDR 16
#define H2_PAGED_MIN ((size_t)16384)

static int paged_slot(const sfl_grpc_session_t *s, const void *ptr)
{
    for (int i = 0; i < H2_PAGED_SLOTS; i++)
        if (s->paged[i] == ptr)
            return i;
    return -1;
}

static void *h2_alloc(sfl_grpc_session_t *s, size_t size, int zero)
{
    uint8_t *p;
    int i;

    if (size > SIZE_MAX - 2 * H2_HDR - 4096)
        return NULL;
    if (size >= H2_PAGED_MIN && (i = paged_slot(s, NULL)) >= 0) {
        size_t page = 4096, len = (size + page - 1) / page * page;

        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        s->paged[i] = p; /* mmap's pages are zero already */
        s->paged_len[i] = len;
        s->paged_framebuf[i] = s->new_h2;
        return p;
    }
    p = zero ? sfl__calloc(1, size + H2_HDR) : sfl__malloc(size + H2_HDR);
    if (p == NULL)
        return NULL;
    *(size_t *)p = size;
    return p + H2_HDR;
}

static void h2_free(void *ptr, void *ud)
{
    sfl_grpc_session_t *s = ud;
    int i;

    if (ptr == NULL)
        return;
    if ((i = paged_slot(s, ptr)) >= 0) {
        (void)munmap(ptr, s->paged_len[i]);
        s->paged[i] = NULL;
        s->paged_len[i] = 0;
        s->paged_framebuf[i] = false;
        return;
    }
    sfl__free((uint8_t *)ptr - H2_HDR);
}

static void *h2_malloc(size_t size, void *ud)
{
    return h2_alloc(ud, size, 0);
}

static void *h2_calloc(size_t n, size_t size, void *ud)
{
    if (size != 0 && n > SIZE_MAX / size)
        return NULL;
    return h2_alloc(ud, n * size, 1);
}

static void *h2_realloc(void *ptr, size_t size, void *ud)
{
    sfl_grpc_session_t *s = ud;
    int i;
    size_t old;
    void *p;

    if (ptr == NULL)
        return h2_alloc(s, size, 0);
    i = paged_slot(s, ptr);
    if (i < 0 && size < H2_PAGED_MIN) {
        uint8_t *base = sfl__reallocarray((uint8_t *)ptr - H2_HDR, size + H2_HDR, 1);

        if (base == NULL)
            return NULL;
        *(size_t *)base = size;
        return base + H2_HDR;
    }
    old = i >= 0 ? s->paged_len[i] : *(size_t *)((uint8_t *)ptr - H2_HDR);
    if ((p = h2_alloc(s, size, 0)) == NULL)
        return NULL;
    memcpy(p, ptr, old < size ? old : size);
    h2_free(ptr, s);
    return p;
}

/* Gives the frame buffer's pages back to the kernel; only once nghttp2
 * has nothing left to send (the buffer holds no live byte). Other paged
 * blocks (a header value of 16 KiB or more that nghttp2 keeps) are live. */
static void release_pages(sfl_grpc_session_t *s)
{
    for (int i = 0; i < H2_PAGED_SLOTS; i++)
        if (s->paged[i] != NULL && s->paged_framebuf[i])
            (void)madvise(s->paged[i], s->paged_len[i], MADV_DONTNEED);
}

/* ---- calls ------------------------------------------------------------ */

static sfl_grpc_call_t *find_call(const sfl_grpc_session_t *s, int32_t id)
{
    return id > 0 ? sfl_idmap_get(&s->by_id, (uint64_t)id) : NULL;
}

/* c's deadline becomes d (the session's bound follows an earlier one). */
static void set_deadline(sfl_grpc_session_t *s, sfl_grpc_call_t *c, uint64_t d)
{
    c->deadline = d;
    if (d < s->next_deadline)
        s->next_deadline = d;
}

/* Links c, whose stream_id is set, into s; room in s->by_id for it must
 * have been reserved (sfl_idmap_reserve), so this cannot fail. */
static void link_call(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    int rc = sfl_idmap_put(&s->by_id, (uint64_t)c->stream_id, c);

    assert(rc == 0);
    (void)rc;
    c->s = s;
    c->prev = NULL;
    c->next = s->calls;
    if (s->calls != NULL)
        s->calls->prev = c;
    s->calls = c;
    s->n_calls++;
}

static void unlink_call(sfl_grpc_call_t *c)
{
    sfl_grpc_session_t *s = c->s;

    if (sfl_idmap_get(&s->by_id, (uint64_t)c->stream_id) == c)
        (void)sfl_idmap_del(&s->by_id, (uint64_t)c->stream_id);
    sfl__grpc_wait_del(s, c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->s = NULL;
    if (--s->n_calls == 0 && s->now_ms != NULL)
        s->idle_since = now(s);
}

/* Drops what only the stream needed; the struct may live on for the app. */
static void release_buffers(sfl_grpc_call_t *c)
{
    struct outmsg *m = c->q_head;

    while (m != NULL) {
        struct outmsg *next = m->next;
        sfl__free(m);
        m = next;
    }
    c->q_head = c->q_tail = NULL;
    c->queued = 0;
    sfl_grpcframe_close(&c->rx);
    sfl__free(c->req);
    c->req = NULL;
    sfl__free(c->pend);
    c->pend = NULL;
    c->pend_len = 0;
    sfl__free(c->resp);
    c->resp = NULL;
    sfl__free(c->grpc_message);
    c->grpc_message = NULL;
    sfl__free(c->trailer_msg);
    c->trailer_msg = NULL;
}

static void free_call(sfl_grpc_call_t *c)
{
    release_buffers(c);
    sfl__free(c);
}

static struct outmsg *frame_message(const uint8_t *msg, size_t len)
{
    struct outmsg *m = sfl__malloc(sizeof(*m) + SFL_GRPCFRAME_PREFIX + len);

    if (m == NULL)
        return NULL;
    m->next = NULL;
    m->off = 0;
    m->len = SFL_GRPCFRAME_PREFIX + len;
    /* Cannot fail: every caller checked len <= max_message < 2^31. */
    if (sfl_grpcframe_prefix(m->data, len) != 0) {
        sfl__free(m);
        return NULL;
    }
    if (len > 0)
        memcpy(m->data + SFL_GRPCFRAME_PREFIX, msg, len);
    return m;
}

static void enqueue(sfl_grpc_call_t *c, struct outmsg *m)
{
    if (c->q_tail != NULL)
        c->q_tail->next = m;
    else
        c->q_head = m;
    c->q_tail = m;
    c->queued += m->len;
    c->n_sent++;
}

void sfl__grpc_wake(sfl_grpc_session_t *s)
{
    if (s != NULL && s->depth == 0 && s->wake != NULL)
        s->wake(s, s->wake_ud);
}

/* ---- session state machine ------------------------------------------- */

static void session_event(sfl_grpc_session_t *s, session_event_t ev, uint32_t h2err)
{
    switch (s->state) {
    case SESSION_OPEN:
    case SESSION_DRAINING:
        switch (ev) {
        case EV_SHUTDOWN:
            if (s->state == SESSION_OPEN) {
                int32_t last = s->server ? nghttp2_session_get_last_proc_stream_id(s->h2) : 0;
                /* Failure (memory) leaves us open; the owner can still free. */
                if (nghttp2_submit_goaway(s->h2, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR,
                                          NULL, 0) == 0)
                    s->state = SESSION_DRAINING;
            }
            break;
        case EV_GOAWAY:
            s->state = SESSION_DRAINING;
            break;
        case EV_FATAL:
        case EV_IDLE:
            /* Queues GOAWAY and makes nghttp2 stop reading; once it is
             * written nghttp2 wants nothing more and EV_QUIET ends it. */
            (void)nghttp2_session_terminate_session(s->h2, h2err);
            s->state = SESSION_CLOSING;
            break;
        case EV_GOAWAY_SENT_ERR:
            s->state = SESSION_CLOSING;
            break;
        case EV_BROKEN:
            s->state = SESSION_DONE;
            break;
        case EV_QUIET:
            s->state = SESSION_DONE;
            break;
        }
        break;
    case SESSION_CLOSING:
        if (ev == EV_QUIET || ev == EV_BROKEN)
            s->state = SESSION_DONE;
        break;
    case SESSION_DONE:
        break;
    }
}

/* Every entry point ends here: nghttp2 done with both directions and our
 * buffer drained means the connection has nothing left to do. */
static void check_quiet(sfl_grpc_session_t *s)
{
    if (s->state == SESSION_DONE || s->out_off < s->out_len)
        return;
    if (!nghttp2_session_want_read(s->h2) && !nghttp2_session_want_write(s->h2))
        session_event(s, EV_QUIET, 0);
}

/* ---- server side ------------------------------------------------------ */

static int submit_trailers_only(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int http,
                                int status, const char *msg)
{
    char hs[8], st[8], enc[3 * MAX_STATUS_MESSAGE + 1];
    nghttp2_nv nv[4];
    size_t n = 0, mlen = msg != NULL ? strlen(msg) : 0;

    if (mlen > MAX_STATUS_MESSAGE)
        mlen = MAX_STATUS_MESSAGE;
    snprintf(hs, sizeof(hs), "%d", http);
    snprintf(st, sizeof(st), "%d", status);
    nv[n++] = mknv(":status", hs);
    nv[n++] = mknv("content-type", "application/grpc");
    nv[n++] = mknv("grpc-status", st);
    if (mlen > 0) {
        sfl_grpc_message_encode(msg, mlen, enc, sizeof(enc));
        nv[n++] = mknv("grpc-message", enc);
    }
    c->headers_sent = true;
    c->trailers_sent = true;
    return nghttp2_submit_response(s->h2, c->stream_id, nv, n, NULL);
}

/* Ends a server call from our side with `status`: as trailers after the
 * queued messages if response headers went out, else trailers-only. */
static void end_call(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int http, int status,
                     const char *msg)
{
    int rv;

    c->state = CALL_FINISHING;
    c->status = status;
    if (!c->headers_sent) {
        rv = submit_trailers_only(s, c, http, status, msg);
    } else {
        size_t mlen = msg != NULL ? strlen(msg) : 0;

        if (mlen > MAX_STATUS_MESSAGE)
            mlen = MAX_STATUS_MESSAGE;
        if (mlen > 0) {
            size_t need = sfl_grpc_message_encode(msg, mlen, NULL, 0) + 1;
            /* Out of memory only costs the message text, not the status. */
            c->trailer_msg = sfl__malloc(need);
            if (c->trailer_msg != NULL)
                sfl_grpc_message_encode(msg, mlen, c->trailer_msg, need);
        }
        rv = nghttp2_session_resume_data(s->h2, c->stream_id);
        if (rv == NGHTTP2_ERR_INVALID_ARGUMENT)
            rv = 0; /* not deferred: nghttp2 will ask for data anyway */
    }
    if (rv != 0)
        (void)nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->stream_id,
                                        NGHTTP2_INTERNAL_ERROR);
}

/* Refuses a request before the handler saw it. */
void sfl__grpc_reject(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int http, int status,
                   const char *msg)
{
    sfl__grpc_unhold(s, c);
    sfl_grpcframe_close(&c->rx);
    sfl__free(c->req);
    c->req = NULL;
    if (s->on_refused)
        s->on_refused(c->path, status, msg, s->ud);
    end_call(s, c, http, status, msg);
}

static const sfl_grpc_method_t *lookup(const sfl_grpc_session_t *s, const uint8_t *path,
                                       size_t len)
{
    for (size_t i = 0; i < s->n_methods; i++)
        if (value_is(path, len, s->methods[i].path))
            return &s->methods[i];
    return NULL;
}

/* HDR_CT_GRPC for application/grpc[+proto][;params], HDR_CT_OTHER for
 * another gRPC codec (+json), 0 for anything else (HTTP 415). */
static unsigned content_type(const uint8_t *v, size_t len)
{
    static const char grpc[] = "application/grpc";
    static const char proto[] = "+proto";
    const size_t g = sizeof(grpc) - 1, p = sizeof(proto) - 1;

    if (len < g || memcmp(v, grpc, g) != 0)
        return 0;
    if (len == g || v[g] == ';')
        return HDR_CT_GRPC;
    if (v[g] != '+')
        return 0;
    if (len >= g + p && memcmp(v + g, proto, p) == 0 && (len == g + p || v[g + p] == ';'))
        return HDR_CT_GRPC;
    return HDR_CT_OTHER;
}

static void server_header(sfl_grpc_session_t *s, sfl_grpc_call_t *c, const uint8_t *name,
                          size_t nlen, const uint8_t *value, size_t vlen)
{
    uint64_t ms;

    if (value_is(name, nlen, ":method")) {
        if (value_is(value, vlen, "POST"))
            c->hdr |= HDR_POST;
    } else if (value_is(name, nlen, ":path")) {
        c->method = lookup(s, value, vlen);
        size_t n = vlen < sizeof(c->path) - 1 ? vlen : sizeof(c->path) - 1;
        memcpy(c->path, value, n);
        c->path[n] = '\0';
    } else if (value_is(name, nlen, "content-type")) {
        c->hdr |= content_type(value, vlen);
    } else if (value_is(name, nlen, "te")) {
        if (value_is(value, vlen, "trailers"))
            c->hdr |= HDR_TE;
    } else if (value_is(name, nlen, "grpc-timeout")) {
        if (sfl_grpc_timeout_parse((const char *)value, vlen, &ms) != 0)
            c->hdr |= HDR_BAD_TIMEOUT;
        else
            set_deadline(s, c, add_sat(now(s), ms));
    } else if (value_is(name, nlen, "grpc-encoding")) {
        if (!value_is(value, vlen, "identity"))
            c->hdr |= HDR_BAD_ENCODING;
    } else if (value_is(name, nlen, "content-length")) {
        /* nghttp2 checks its syntax and the body against it */
        c->hdr |= HDR_LENGTH;
        c->content_length = 0;
        for (size_t i = 0; i < vlen && value[i] >= '0' && value[i] <= '9'; i++)
            c->content_length = c->content_length > UINT64_MAX / 16
                                    ? UINT64_MAX
                                    : c->content_length * 10 + (uint64_t)(value[i] - '0');
    }
}

/* The request header block is complete: accept it or answer with an error. */
static void server_headers_done(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    char msg[160];

    if (c->hdr & HDR_TOO_BIG) {
        snprintf(msg, sizeof(msg), "request headers exceed %u bytes", s->max_header_list);
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
    } else if (!(c->hdr & HDR_POST)) {
        sfl__grpc_reject(s, c, 405, SFL_GRPC_STATUS_INTERNAL, "method must be POST");
    } else if (!(c->hdr & (HDR_CT_GRPC | HDR_CT_OTHER))) {
        sfl__grpc_reject(s, c, 415, SFL_GRPC_STATUS_INTERNAL,
                         "content-type must be application/grpc");
    } else if (c->hdr & HDR_CT_OTHER) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_UNIMPLEMENTED,
               "only application/grpc+proto is supported");
    } else if (!(c->hdr & HDR_TE)) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_INTERNAL, "missing \"te: trailers\"");
    } else if (c->hdr & HDR_BAD_ENCODING) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_UNIMPLEMENTED, "compression is not supported");
    } else if (c->hdr & HDR_BAD_TIMEOUT) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_INTERNAL, "malformed grpc-timeout");
    } else if (s->refuse_status != 0) {
        sfl__grpc_reject(s, c, 200, s->refuse_status, s->refuse_msg);
    } else if (c->method == NULL) {
        snprintf(msg, sizeof(msg), "unknown method %s", c->path);
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_UNIMPLEMENTED, msg);
    } else if (c->method->roles != 0 && !(c->method->roles & s->peer_roles)) {
        snprintf(msg, sizeof(msg), "%s needs a certificate with role %s, not %s", c->path,
                 c->method->roles_name ? c->method->roles_name : "?",
                 s->peer_role_name && s->peer_role_name[0] ? s->peer_role_name : "none");
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_PERMISSION_DENIED, msg);
    } else {
        uint32_t max = c->method->max_request ? c->method->max_request : s->max_message;

        if ((c->hdr & HDR_LENGTH) && c->content_length > (uint64_t)max + SFL_GRPCFRAME_PREFIX) {
            snprintf(msg, sizeof(msg), "request of %llu bytes exceeds %u for %s",
                     (unsigned long long)c->content_length, max + SFL_GRPCFRAME_PREFIX, c->path);
            sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
            return;
        }
        sfl_grpcframe_init(&c->rx, max);
        c->kind = c->method->kind;
        c->state = CALL_RECV_BODY;
        c->req_deadline = c->deadline;
        if (s->body_ms != UINT32_MAX && add_sat(now(s), s->body_ms) < c->deadline)
            set_deadline(s, c, add_sat(now(s), s->body_ms));
    }
}

void sfl__grpc_server_data(sfl_grpc_session_t *s, sfl_grpc_call_t *c, const uint8_t *data,
                        size_t len)
{
    while (len > 0) {
        const uint8_t *msg;
        size_t used, mlen;
        int rc = sfl_grpcframe_feed(&c->rx, data, len, &used, &msg, &mlen);

        data += used;
        len -= used;
        if (rc < 0) {
            sfl__grpc_reject(s, c, 200,
                   rc == SFL_ELIMIT || rc == SFL_ENOMEM ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                                        : SFL_GRPC_STATUS_INTERNAL,
                   sfl_last_error());
            return;
        }
        if (rc == 0)
            return;
        if (c->n_req > 0) {
            sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_INTERNAL,
                   "more than one request message on a unary-request method");
            return;
        }
        if (sfl_grpcframe_take(&c->rx, msg, mlen, &c->req) != 0) {
            sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, sfl_last_error());
            return;
        }
        c->req_len = mlen;
        c->n_req = 1;
    }
}

/* The client half-closed: the request is complete, run the handler. */
static void server_request_end(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    c->remote_closed = true;
    if (c->state != CALL_RECV_BODY)
        return;
    if (c->admitted)
        sfl__grpc_server_request_done(s, c);
    else
        sfl__grpc_admit(s, c); /* finishes it once admitted */
}

/* The whole request is decoded: check it and run the handler. */
void sfl__grpc_server_request_done(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    if (sfl_grpcframe_end(&c->rx) != 0) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_INTERNAL, sfl_last_error());
        return;
    }
    if (c->n_req == 0) {
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_INTERNAL, "missing request message");
        return;
    }
    sfl_grpcframe_close(&c->rx);
    c->state = CALL_ACTIVE;
    c->app_holds = true;
    set_deadline(s, c, c->req_deadline);
    /* The handler may finish the call right away; the session still holds
     * it until the stream closes, so c stays valid here. */
    c->method->handler(c, c->req != NULL ? c->req : (const uint8_t *)"", c->req_len, s->ud);
    sfl__free(c->req);
    c->req = NULL;
    sfl__grpc_unhold(s, c);
}

/* Stream gone (reset, or both sides ended). */
static void server_stream_closed(sfl_grpc_call_t *c)
{
    sfl__grpc_unhold(c->s, c);
    unlink_call(c);
    release_buffers(c);
    if (!c->app_holds) {
        free_call(c);
        return;
    }
    c->state = CALL_CLOSED;
    if (!c->cancelled) {
        c->cancelled = true;
        if (c->on_cancel != NULL)
            c->on_cancel(c, c->cancel_ud); /* may finish, hence free, c */
    }
}

/* ---- client side ------------------------------------------------------ */

/* Delivers the final status once; the call stays until its stream closes. */
static void deliver(sfl_grpc_call_t *c, int status, const char *msg)
{
    sfl_grpc_unary_cb ucb = c->unary_cb;
    sfl_grpc_done_cb dcb = c->done_cb;

    if (c->state == CALL_DONE)
        return;
    c->state = CALL_DONE;
    c->unary_cb = NULL;
    c->done_cb = NULL;
    c->msg_cb = NULL;
    if (msg == NULL)
        msg = "";
    if (ucb != NULL) {
        bool ok = status == SFL_GRPC_STATUS_OK;
        ucb(c, status, msg, ok && c->resp != NULL ? c->resp : (const uint8_t *)"",
            ok ? c->resp_len : 0, c->ud);
    } else if (dcb != NULL) {
        dcb(c, status, msg, c->ud);
    }
    sfl__free(c->resp);
    c->resp = NULL;
}

static void reset_stream(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    if (s == NULL || s->h2 == NULL)
        return;
    if (c->headers_sent)
        (void)nghttp2_submit_rst_stream(s->h2, NGHTTP2_FLAG_NONE, c->stream_id, NGHTTP2_CANCEL);
    else
        c->rst_on_open = true;
}

/* We give up on a call (bad response, deadline): report and reset. */
static void fail_local(sfl_grpc_session_t *s, sfl_grpc_call_t *c, int status, const char *msg)
{
    char copy[256];

    /* msg may be sfl_last_error(), which the callback may overwrite. */
    snprintf(copy, sizeof(copy), "%s", msg);
    /* Both sides already ended: the stream closes by itself. */
    if (!c->remote_closed || c->q_head != NULL)
        reset_stream(s, c);
    deliver(c, status, copy);
}

static int parse_status(const uint8_t *v, size_t len)
{
    int n = 0;

    if (len == 0 || len > 3)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

static void client_header(sfl_grpc_call_t *c, const uint8_t *name, size_t nlen,
                          const uint8_t *value, size_t vlen)
{
    if (value_is(name, nlen, ":status")) {
        c->http_status = parse_status(value, vlen);
    } else if (value_is(name, nlen, "content-type")) {
        if (content_type(value, vlen) != 0)
            c->hdr |= HDR_CT_GRPC;
    } else if (value_is(name, nlen, "grpc-status")) {
        int st = parse_status(value, vlen);
        if (st < 0)
            c->hdr |= HDR_BAD_STATUS;
        /* Codes this side does not know read as UNKNOWN, per the spec. */
        c->grpc_status = st > SFL_GRPC_STATUS_UNAUTHENTICATED ? SFL_GRPC_STATUS_UNKNOWN : st;
    } else if (value_is(name, nlen, "grpc-message")) {
        sfl__free(c->grpc_message);
        c->grpc_message = sfl__malloc(vlen + 1);
        /* Out of memory loses the text only. */
        if (c->grpc_message != NULL) {
            memcpy(c->grpc_message, value, vlen);
            sfl_grpc_message_decode(c->grpc_message, vlen);
        }
    }
}

/* The server ended its side: decide the call's outcome. */
static void client_complete(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    char msg[160];
    int st = c->grpc_status;

    c->remote_closed = true;
    if (c->state != CALL_ACTIVE)
        return;
    if (c->hdr & HDR_TOO_BIG) {
        snprintf(msg, sizeof(msg), "response headers exceed %u bytes", s->max_header_list);
        fail_local(s, c, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        return;
    }
    if (c->hdr & HDR_BAD_STATUS) {
        fail_local(s, c, SFL_GRPC_STATUS_INTERNAL, "malformed grpc-status");
        return;
    }
    if (st < 0) {
        if (c->http_status != 200) {
            snprintf(msg, sizeof(msg), "HTTP status %d without grpc-status", c->http_status);
            fail_local(s, c, status_from_http(c->http_status), msg);
        } else {
            fail_local(s, c, SFL_GRPC_STATUS_INTERNAL, "response without grpc-status");
        }
        return;
    }
    if (st == SFL_GRPC_STATUS_OK) {
        if (sfl_grpcframe_end(&c->rx) != 0) {
            fail_local(s, c, SFL_GRPC_STATUS_INTERNAL, sfl_last_error());
            return;
        }
        if (c->unary_cb != NULL && c->n_resp != 1) {
            fail_local(s, c, SFL_GRPC_STATUS_INTERNAL, "unary call without a response message");
            return;
        }
    }
    /* Our request may still be going out if the server answered early. */
    if (c->q_head != NULL)
        reset_stream(s, c);
    deliver(c, st, c->grpc_message);
}

static void client_headers_done(sfl_grpc_session_t *s, sfl_grpc_call_t *c,
                                const nghttp2_frame *f)
{
    char msg[64];

    if (c->state != CALL_ACTIVE)
        return;
    if (f->headers.cat == NGHTTP2_HCAT_RESPONSE && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        if (c->hdr & HDR_TOO_BIG) {
            snprintf(msg, sizeof(msg), "response headers exceed %u bytes", s->max_header_list);
            fail_local(s, c, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, msg);
        } else if (c->http_status != 200) {
            snprintf(msg, sizeof(msg), "HTTP status %d", c->http_status);
            fail_local(s, c, status_from_http(c->http_status), msg);
        } else if (!(c->hdr & HDR_CT_GRPC)) {
            fail_local(s, c, SFL_GRPC_STATUS_UNKNOWN, "response is not application/grpc");
        }
        return;
    }
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
        client_complete(s, c);
}

static void client_data(sfl_grpc_session_t *s, sfl_grpc_call_t *c, const uint8_t *data,
                        size_t len)
{
    while (len > 0 && c->state == CALL_ACTIVE) {
        const uint8_t *msg;
        size_t used, mlen;
        int rc = sfl_grpcframe_feed(&c->rx, data, len, &used, &msg, &mlen);

        data += used;
        len -= used;
        if (rc < 0) {
            fail_local(s, c,
                       rc == SFL_ELIMIT || rc == SFL_ENOMEM ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                                            : SFL_GRPC_STATUS_INTERNAL,
                       sfl_last_error());
            return;
        }
        if (rc == 0)
            return;
        if (c->msg_cb != NULL) {
            c->msg_cb(c, mlen > 0 ? msg : (const uint8_t *)"", mlen, c->ud);
            continue; /* the callback may have cancelled: loop re-checks */
        }
        if (c->n_resp > 0) {
            fail_local(s, c, SFL_GRPC_STATUS_INTERNAL,
                       "more than one response message on a unary call");
            return;
        }
        if (sfl_grpcframe_take(&c->rx, msg, mlen, &c->resp) != 0) {
            fail_local(s, c, SFL_GRPC_STATUS_RESOURCE_EXHAUSTED, sfl_last_error());
            return;
        }
        c->resp_len = mlen;
        c->n_resp = 1;
    }
}

static void client_stream_closed(sfl_grpc_call_t *c, uint32_t code)
{
    char msg[96];

    unlink_call(c);
    if (c->state != CALL_DONE) {
        snprintf(msg, sizeof(msg), "stream reset (HTTP/2 %s)", nghttp2_http2_strerror(code));
        deliver(c, status_from_rst(code), msg);
    }
    free_call(c);
}

/* ---- nghttp2 callbacks ------------------------------------------------ */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c;

    (void)h2;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (s->server && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        c = sfl__calloc(1, sizeof(*c));
        if (c == NULL || sfl_idmap_reserve(&s->by_id, 1) < 0) {
            sfl__free(c);
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream */
        }
        c->server = true;
        c->stream_id = f->hd.stream_id;
        c->state = CALL_RECV_HEADERS;
        c->deadline = NO_DEADLINE;
        c->grpc_status = -1;
        sfl_grpcframe_init(&c->rx, s->max_message);
        link_call(s, c);
        return 0;
    }
    c = find_call(s, f->hd.stream_id);
    if (c != NULL) /* each header block is measured on its own */
        c->hdr_bytes = 0;
    return 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *f, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c = find_call(s, f->hd.stream_id);
    uint64_t sz = (uint64_t)nlen + vlen + 32; /* RFC 9113 6.5.2 field size */

    (void)h2;
    (void)flags;
    if (c == NULL || f->hd.type != NGHTTP2_HEADERS || (c->hdr & HDR_TOO_BIG))
        return 0;
    if (sz > s->max_header_list || c->hdr_bytes > s->max_header_list - sz) {
        c->hdr |= HDR_TOO_BIG; /* answered when the block ends */
        return 0;
    }
    c->hdr_bytes += (uint32_t)sz;
    if (!c->server)
        client_header(c, name, nlen, value, vlen);
    else if (f->headers.cat == NGHTTP2_HCAT_REQUEST)
        server_header(s, c, name, nlen, value, vlen);
    /* request trailers carry nothing gRPC needs */
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c;

    (void)h2;
    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        c = find_call(s, f->hd.stream_id);
        if (c == NULL)
            break;
        if (c->server) {
            if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST &&
                c->state == CALL_RECV_HEADERS)
                server_headers_done(s, c);
            if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
                server_request_end(s, c);
        } else if (f->hd.type == NGHTTP2_HEADERS) {
            client_headers_done(s, c, f);
        } else if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            client_complete(s, c);
        }
        break;
    case NGHTTP2_GOAWAY:
        s->goaway_recv = true;
        session_event(s, EV_GOAWAY, 0);
        break;
    case NGHTTP2_PING:
        if (f->hd.flags & NGHTTP2_FLAG_ACK)
            s->pongs++;
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c = find_call(s, id);

    (void)h2;
    (void)flags;
    if (s->server)
        sfl__grpc_server_chunk(s, c, id, data, len);
    else if (c != NULL && c->state == CALL_ACTIVE)
        client_data(s, c, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t code, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c = find_call(s, id);

    (void)h2;
    if (c == NULL)
        return 0;
    if (c->server)
        server_stream_closed(c);
    else
        client_stream_closed(c, code);
    return 0;
}

static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *f, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c;

    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR &&
        (s->state == SESSION_OPEN || s->state == SESSION_DRAINING)) {
        /* nghttp2 found a connection error while reading and answered it;
         * its debug data says why. */
        snprintf(s->reason, sizeof(s->reason), "http2: %s: %.*s",
                 nghttp2_http2_strerror(f->goaway.error_code), (int)f->goaway.opaque_data_len,
                 f->goaway.opaque_data != NULL ? (const char *)f->goaway.opaque_data : "");
        s->peer_broke = true;
        if (s->fatal == 0)
            s->fatal = SFL_EPARSE;
        session_event(s, EV_GOAWAY_SENT_ERR, 0);
        return 0;
    }
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    c = find_call(s, f->hd.stream_id);
    if (c == NULL)
        return 0;
    if (c->server) {
        /* Our response ended before the request did (a rejection): tell the
         * client to stop sending, as RFC 9113 8.1 asks. */
        if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && !c->remote_closed)
            (void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, c->stream_id,
                                            NGHTTP2_NO_ERROR);
    } else if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        c->headers_sent = true;
        if (c->rst_on_open)
            (void)nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, c->stream_id,
                                            NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_frame_not_send(nghttp2_session *h2, const nghttp2_frame *f, int err, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c;
    char msg[96];

    if (f->hd.type != NGHTTP2_HEADERS || s->server)
        return 0;
    c = find_call(s, f->hd.stream_id);
    if (c == NULL)
        return 0;
    snprintf(msg, sizeof(msg), "request not sent: %s", nghttp2_strerror(err));
    deliver(c, SFL_GRPC_STATUS_UNAVAILABLE, msg);
    /* A stream that never opened never closes: drop the call now. */
    if (nghttp2_session_find_stream(h2, f->hd.stream_id) == NULL) {
        unlink_call(c);
        free_call(c);
    }
    return 0;
}

static int on_error(nghttp2_session *h2, int code, const char *msg, size_t len, void *ud)
{
    sfl_grpc_session_t *s = ud;

    (void)h2;
    (void)code;
    snprintf(s->reason, sizeof(s->reason), "%.*s", (int)len, msg);
    return 0;
}

/* Copies queued message bytes into nghttp2's DATA frame buffer. */
static ssize_t data_read(nghttp2_session *h2, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    sfl_grpc_session_t *s = ud;
    sfl_grpc_call_t *c = find_call(s, id);
    size_t n = 0;

    (void)src;
    if (c == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    while (n < length && c->q_head != NULL) {
        struct outmsg *m = c->q_head;
        size_t k = m->len - m->off;

        if (k > length - n)
            k = length - n;
        memcpy(buf + n, m->data + m->off, k);
        m->off += k;
        n += k;
        c->queued -= k;
        if (m->off == m->len) {
            c->q_head = m->next;
            if (c->q_head == NULL)
                c->q_tail = NULL;
            sfl__free(m);
        }
    }
    if (c->q_head != NULL)
        return (ssize_t)n;
    if (!c->server) {
        *flags |= NGHTTP2_DATA_FLAG_EOF; /* the request is one message */
        return (ssize_t)n;
    }
    if (c->state == CALL_FINISHING && !c->trailers_sent) {
        char st[8];
        nghttp2_nv nv[2];
        size_t k = 0;

        snprintf(st, sizeof(st), "%d", c->status);
        nv[k++] = mknv("grpc-status", st);
        if (c->trailer_msg != NULL && c->trailer_msg[0] != '\0')
            nv[k++] = mknv("grpc-message", c->trailer_msg);
        if (nghttp2_submit_trailer(h2, id, nv, k) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        c->trailers_sent = true;
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        return (ssize_t)n;
    }
    return n > 0 ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
}

/* ---- sessions --------------------------------------------------------- */

static int config(sfl_grpc_session_t *s, const sfl_grpc_config_t *cfg)
{
    static const sfl_grpc_config_t zero;

    if (cfg == NULL)
        cfg = &zero;
    s->max_message = cfg->max_message ? cfg->max_message : DEF_MAX_MESSAGE;
    s->max_streams = cfg->max_streams ? cfg->max_streams : DEF_MAX_STREAMS;
    s->max_header_list = cfg->max_header_list ? cfg->max_header_list : DEF_MAX_HEADER_LIST;
    s->max_frame = cfg->max_frame ? cfg->max_frame : DEF_MAX_FRAME;
    s->idle_ms = cfg->idle_timeout_ms ? cfg->idle_timeout_ms : DEF_IDLE_MS;
    s->now_ms = cfg->now_ms ? cfg->now_ms : monotonic_ms;
    s->clock_ud = cfg->clock_ud;
    s->on_refused = cfg->on_refused;
    s->peer_roles = cfg->peer_roles;
    s->peer_role_name = cfg->peer_role_name;
    s->body_ms = cfg->body_timeout_ms ? cfg->body_timeout_ms : DEF_BODY_MS;
    s->budget = cfg->budget;
    if (cfg->refuse_status < 0 || cfg->refuse_status > SFL_GRPC_STATUS_UNAUTHENTICATED)
        return sfl__fail(SFL_EINVAL, "grpc: refuse_status %d is not a gRPC status",
                         cfg->refuse_status);
    s->refuse_status = cfg->refuse_status;
    snprintf(s->refuse_msg, sizeof(s->refuse_msg), "%s",
             cfg->refuse_message ? cfg->refuse_message : "");
    if (s->max_message > UINT32_MAX / 2 - SFL_GRPCFRAME_PREFIX)
        return sfl__fail(SFL_EINVAL, "grpc: max_message %u too large", s->max_message);
    s->max_queued = cfg->max_queued ? cfg->max_queued : 2 * s->max_message;
    if (s->max_queued < s->max_message + SFL_GRPCFRAME_PREFIX)
        return sfl__fail(SFL_EINVAL, "grpc: max_queued %u below one message (%u)",
                         s->max_queued, s->max_message + SFL_GRPCFRAME_PREFIX);
    if (s->max_frame < 16384 || s->max_frame > 16777215)
        return sfl__fail(SFL_EINVAL, "grpc: max_frame %u outside 16384..16777215", s->max_frame);
    if (s->max_header_list < 1024)
        return sfl__fail(SFL_EINVAL, "grpc: max_header_list %u below 1024", s->max_header_list);
    s->max_buffered = cfg->max_buffered ? cfg->max_buffered : s->max_message;
    s->reset_burst = cfg->reset_burst;
    s->reset_rate = cfg->reset_rate;
    return 0;
}

static int h2_error(int rv, const char *what)
{
    if (rv == NGHTTP2_ERR_NOMEM)
        return sfl__fail(SFL_ENOMEM, "http2: %s: out of memory", what);
    return sfl__fail(SFL_EIO, "http2: %s: %s", what, nghttp2_strerror(rv));
}

static int session_new(sfl_grpc_session_t *s)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    nghttp2_mem mem = {s, h2_malloc, h2_free, h2_calloc, h2_realloc};
    nghttp2_settings_entry iv[6];
    size_t n = 0;
    int rv;

    rv = nghttp2_session_callbacks_new(&cb);
    if (rv != 0)
        goto out;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
    nghttp2_session_callbacks_set_error_callback2(cb, on_error);
    rv = nghttp2_option_new(&opt);
    if (rv != 0)
        goto out;
    /* Closed streams are kept only for RFC 7540 priorities, unused here. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* No HPACK dynamic table either way (ours here, the peer's through
     * SETTINGS_HEADER_TABLE_SIZE = 0 below): each entry is a block of its
     * own in every idle connection's state, ~3.5 KB per agent with
     * 100,000 of them, against a few dozen bytes of literal headers per
     * call. The headers decode the same: a lossless change of encoding. */
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, 0);
    if (s->server && (s->reset_burst != 0 || s->reset_rate != 0))
        nghttp2_option_set_stream_reset_rate_limit(opt, s->reset_burst ? s->reset_burst : 1000,
                                                   s->reset_rate ? s->reset_rate : 33);
    /* A server acknowledges request bytes itself, as its budgets allow. */
    if (s->server)
        nghttp2_option_set_no_auto_window_update(opt, 1);
    /* its blocks of H2_PAGED_MIN bytes and more: the frame buffer */
    s->new_h2 = true;
    if (s->server)
        rv = nghttp2_session_server_new3(&s->h2, cb, s, opt, &mem);
    else
        rv = nghttp2_session_client_new3(&s->h2, cb, s, opt, &mem);
    s->new_h2 = false;
    if (rv != 0)
        goto out;
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_FRAME_SIZE, s->max_frame};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, s->max_header_list};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 0};
    iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
                                       s->server ? PENDING_WINDOW : STREAM_WINDOW};
    if (s->server)
        iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                           s->max_streams};
    else
        iv[n++] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_ENABLE_PUSH, 0};
    rv = nghttp2_submit_settings(s->h2, NGHTTP2_FLAG_NONE, iv, n);
    if (rv != 0)
        goto out;
    rv = nghttp2_session_set_local_window_size(s->h2, NGHTTP2_FLAG_NONE, 0,
                                               s->server ? SERVER_WINDOW : CONN_WINDOW);
out:
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return rv != 0 ? h2_error(rv, "session setup") : 0;
}

int sfl_grpc_server_new(const sfl_grpc_config_t *cfg, const sfl_grpc_method_t *methods,
                        size_t n, void *ud, sfl_grpc_session_t **out)
{
    sfl_grpc_session_t *s = NULL;
    int rc;

    assert(out != NULL && (methods != NULL || n == 0));
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (methods[i].path == NULL || methods[i].path[0] != '/' || methods[i].handler == NULL)
            return sfl__fail(SFL_EINVAL, "grpc: method %zu needs a '/' path and a handler", i);
    s = sfl__calloc(1, sizeof(*s));
    if (s == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a session");
    s->server = true;
    s->methods = methods;
    s->n_methods = n;
    s->ud = ud;
    rc = config(s, cfg);
    if (rc != 0)
        goto out;
    rc = session_new(s);
    if (rc != 0)
        goto out;
    s->idle_since = now(s);
    s->next_deadline = NO_DEADLINE;
    *out = s;
    s = NULL;
out:
    sfl_grpc_session_free(s);
    return rc;
}

static char *dupstr(const char *str)
{
    size_t n = strlen(str) + 1;
    char *p = sfl__malloc(n);

    if (p != NULL)
        memcpy(p, str, n);
    return p;
}

int sfl_grpc_client_new(const sfl_grpc_config_t *cfg, const char *scheme,
                        const char *authority, sfl_grpc_session_t **out)
{
    sfl_grpc_session_t *s = NULL;
    int rc;

    assert(out != NULL && scheme != NULL && authority != NULL);
    *out = NULL;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        return sfl__fail(SFL_EINVAL, "grpc: scheme \"%s\" (expected http or https)", scheme);
    if (authority[0] == '\0')
        return sfl__fail(SFL_EINVAL, "grpc: empty authority");
    s = sfl__calloc(1, sizeof(*s));
    if (s == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a session");
    rc = config(s, cfg);
    if (rc != 0)
        goto out;
    s->scheme = dupstr(scheme);
    s->authority = dupstr(authority);
    if (s->scheme == NULL || s->authority == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "grpc: out of memory for a session");
        goto out;
    }
    rc = session_new(s);
    if (rc != 0)
        goto out;
    s->idle_since = now(s);
    s->next_deadline = NO_DEADLINE;
    *out = s;
    s = NULL;
out:
    sfl_grpc_session_free(s);
    return rc;
}

void sfl_grpc_session_free(sfl_grpc_session_t *s)
{
    sfl_grpc_call_t *gone = NULL;

    if (s == NULL)
        return;
    assert(s->depth == 0); /* never from inside the session's callbacks */
    s->depth++;
    s->state = SESSION_DONE;
    sfl__grpc_admit_drop(s);
    /* nghttp2_session_del runs no callbacks. */
    nghttp2_session_del(s->h2);
    s->h2 = NULL;
    /* Detach every call first, so that whatever the callbacks below do with
     * other calls, none of them reaches back into this session. */
    while (s->calls != NULL) {
        sfl_grpc_call_t *c = s->calls;
        unlink_call(c);
        if (s->budget != NULL)
            sfl__grpc_budget_dequeue(s->budget, c);
        release_buffers(c);
        c->reserved = 0;
        c->next = gone;
        gone = c;
    }
    while (gone != NULL) {
        sfl_grpc_call_t *c = gone;
        gone = c->next;
        c->next = NULL;
        if (!c->server) {
            deliver(c, SFL_GRPC_STATUS_UNAVAILABLE, "connection closed");
            free_call(c);
        } else if (!c->app_holds) {
            free_call(c);
        } else {
            bool notify = !c->cancelled;
            c->state = CALL_CLOSED;
            c->cancelled = true;
            if (notify && c->on_cancel != NULL)
                c->on_cancel(c, c->cancel_ud);
        }
    }
    if (s->budget != NULL)
        sfl__grpc_budget_kick(s->budget, s);
    sfl_idmap_free(&s->by_id);
    sfl__free(s->out);
    sfl__free(s->scheme);
    sfl__free(s->authority);
    sfl__free(s);
}

size_t sfl_grpc_session_buffered(const sfl_grpc_session_t *s)
{
    return s->reserved + s->pending;
}

bool sfl_grpc_session_want_write(sfl_grpc_session_t *s)
{
    assert(s != NULL);
    if (s->out_off < s->out_len)
        return true;
    return s->state != SESSION_DONE && nghttp2_session_want_write(s->h2);
}

static int append_out(sfl_grpc_session_t *s, const uint8_t *p, size_t n)
{
    if (s->out_cap - s->out_len < n) {
        size_t cap = s->out_cap ? s->out_cap : 4096;
        uint8_t *nb;

        while (cap - s->out_len < n)
            cap *= 2;
        nb = sfl__reallocarray(s->out, cap, 1);
        if (nb == NULL)
            return sfl__fail(SFL_ENOMEM, "http2: out of memory for output");
        s->out = nb;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

/* Moves frames from nghttp2 into our buffer. Only when the buffer is empty:
 * the transport may still hold a pointer into the last batch. */
static int fill_out(sfl_grpc_session_t *s)
{
    int rc = 0;

    if (s->out_off != s->out_len || s->state == SESSION_DONE)
        return 0;
    s->out_off = s->out_len = 0;
    s->depth++;
    s->h2_drained = false;
    while (s->out_len < OUT_BATCH) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(s->h2, &p);

        if (n < 0) {
            rc = h2_error((int)n, "writing");
            snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
            session_event(s, EV_BROKEN, 0);
            break;
        }
        if (n == 0) {
            s->h2_drained = true;
            break;
        }
        rc = append_out(s, p, (size_t)n);
        if (rc != 0) {
            /* Those bytes are lost: the connection cannot go on. */
            snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
            session_event(s, EV_BROKEN, 0);
            break;
        }
    }
    s->depth--;
    if (rc != 0 && s->fatal == 0)
        s->fatal = rc;
    return rc;
}

int sfl_grpc_session_feed(sfl_grpc_session_t *s, const uint8_t *buf, size_t len)
{
    ssize_t rv;
    int rc = 0;

    assert(s != NULL && s->depth == 0 && (buf != NULL || len == 0));
    if (s->state == SESSION_CLOSING || s->state == SESSION_DONE) {
        if (s->fatal == 0)
            return 0;
        return sfl__fail(s->fatal, "%s (connection already failed)", s->reason);
    }
    s->reason[0] = '\0';
    s->depth++;
    rv = nghttp2_session_mem_recv(s->h2, buf, len);
    s->depth--;
    if (rv < 0) {
        if (rv == NGHTTP2_ERR_NOMEM) {
            rc = sfl__fail(SFL_ENOMEM, "http2: out of memory while reading");
            session_event(s, EV_BROKEN, 0);
        } else {
            rc = sfl__fail(SFL_EPARSE, "http2: %s%s%s", nghttp2_strerror((int)rv),
                           s->reason[0] ? ": " : "", s->reason);
            session_event(s, EV_FATAL, NGHTTP2_PROTOCOL_ERROR);
        }
    } else {
        /* Serialise the answer now: a connection error nghttp2 answered
         * with GOAWAY becomes visible (on_frame_send) and is reported here,
         * where the caller knows which peer sent the bytes. */
        rc = fill_out(s);
        if (rc == 0 && s->peer_broke)
            rc = sfl__fail(SFL_EPARSE, "%s", s->reason);
    }
    if (rc != 0 && s->fatal == 0) {
        s->fatal = rc;
        snprintf(s->reason, sizeof(s->reason), "%s", sfl_last_error());
    }
    check_quiet(s);
    return rc;
}

int sfl_grpc_session_pending(sfl_grpc_session_t *s, const uint8_t **buf, size_t *len)
{
    int rc;

    assert(s != NULL && buf != NULL && len != NULL && s->depth == 0);
    rc = fill_out(s);
    check_quiet(s);
    *len = s->out_len - s->out_off;
    *buf = *len > 0 ? s->out + s->out_off : NULL;
    return rc;
}

void sfl_grpc_session_consumed(sfl_grpc_session_t *s, size_t n)
{
    assert(s != NULL && n <= s->out_len - s->out_off);
    s->out_off += n;
    if (s->out_off == s->out_len) {
        /* Idle connections keep no output buffer, nor nghttp2's frame
         * buffer's pages once it has sent everything. */
        sfl__free(s->out);
        s->out = NULL;
        s->out_cap = s->out_len = s->out_off = 0;
        if (s->h2_drained) {
            release_pages(s);
            s->h2_drained = false;
        }
        if (s->state != SESSION_DONE)
            check_quiet(s);
    }
}

/* A call's deadline passed. */
static void expire(sfl_grpc_session_t *s, sfl_grpc_call_t *c)
{
    c->deadline = NO_DEADLINE;
    if (!c->server) {
        if (c->state == CALL_ACTIVE)
            fail_local(s, c, SFL_GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
        return;
    }
    switch (c->state) {
    case CALL_RECV_HEADERS:
        sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
        break;
    case CALL_RECV_BODY:
        if (c->req_deadline > now(s)) {
            char msg[80];

            snprintf(msg, sizeof(msg), "request not complete %u ms after its headers",
                     s->body_ms);
            sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_DEADLINE_EXCEEDED, msg);
        } else {
            sfl__grpc_reject(s, c, 200, SFL_GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
        }
        break;
    case CALL_ACTIVE:
        end_call(s, c, 200, SFL_GRPC_STATUS_DEADLINE_EXCEEDED, "deadline exceeded");
        c->cancelled = true;
        if (c->on_cancel != NULL)
            c->on_cancel(c, c->cancel_ud); /* c stays: the session holds it */
        break;
    default:
        break;
    }
}

int sfl_grpc_session_tick(sfl_grpc_session_t *s, uint64_t *next_ms)
{
    uint64_t t, next = UINT64_MAX;

    assert(s != NULL && next_ms != NULL && s->depth == 0);
    *next_ms = UINT64_MAX;
    if (s->state == SESSION_DONE)
        return 0;
    t = now(s);
    s->depth++;
    if (s->pending > 0)
        sfl__grpc_admit_waiting(s);
    /* The calls are walked only once the earliest deadline any may have
     * passed (a link with thousands of deadline-free streams is not walked
     * on every read); the walk finds the next one. */
    if (s->next_deadline <= t) {
        s->next_deadline = NO_DEADLINE;
        for (sfl_grpc_call_t *c = s->calls, *nx; c != NULL; c = nx) {
            nx = c->next; /* callbacks may add calls (at the head, via set_deadline) */
            if (c->deadline == NO_DEADLINE)
                continue;
            if (c->deadline <= t)
                expire(s, c);
            else if (c->deadline < s->next_deadline)
                s->next_deadline = c->deadline;
        }
    }
    if (s->next_deadline != NO_DEADLINE)
        next = s->next_deadline > t ? s->next_deadline - t : 0;
    if (s->state == SESSION_OPEN && s->n_calls == 0 && s->idle_ms != UINT32_MAX) {
        uint64_t end = add_sat(s->idle_since, s->idle_ms);
        if (t >= end)
            session_event(s, EV_IDLE, NGHTTP2_NO_ERROR);
        else if (end - t < next)
            next = end - t;
    }
    s->depth--;
    check_quiet(s);
    *next_ms = next;
    return 0;
}

void sfl_grpc_session_shutdown(sfl_grpc_session_t *s)
{
    assert(s != NULL);
    session_event(s, EV_SHUTDOWN, 0);
    check_quiet(s);
    sfl__grpc_wake(s);
}

int sfl_grpc_session_ping(sfl_grpc_session_t *s)
{
    int rv;

    assert(s != NULL);
    if (s->state != SESSION_OPEN)
        return sfl__fail(SFL_EINVAL, "grpc: ping on a closing session");
    if ((rv = nghttp2_submit_ping(s->h2, NGHTTP2_FLAG_NONE, NULL)) != 0)
        return h2_error(rv, "submitting a ping");
    sfl__grpc_wake(s);
    return 0;
}

uint64_t sfl_grpc_session_pongs(const sfl_grpc_session_t *s)
{
    assert(s != NULL);
    return s->pongs;
}

bool sfl_grpc_session_done(sfl_grpc_session_t *s)
{
    assert(s != NULL);
    return s->state == SESSION_DONE && s->out_off == s->out_len;
}

size_t sfl_grpc_session_calls(const sfl_grpc_session_t *s)
{
    assert(s != NULL);
    return s->n_calls;
}

void sfl_grpc_session_set_wake(sfl_grpc_session_t *s, sfl_grpc_wake_cb cb, void *ud)
{
    assert(s != NULL);
    s->wake = cb;
    s->wake_ud = ud;
}

void *sfl_grpc_session_user(const sfl_grpc_session_t *s)
{
    assert(s != NULL);
    return s->ud;
}

/* ---- server calls ----------------------------------------------------- */

static int send_msg(sfl_grpc_call_t *c, const uint8_t *msg, size_t len)
{
    sfl_grpc_session_t *s;
    struct outmsg *m;

    assert(c != NULL && c->server && c->app_holds && (msg != NULL || len == 0));
    s = c->s;
    if (c->cancelled || s == NULL)
        return sfl__fail(-ECANCELED, "grpc: call %s was cancelled", sfl_grpc_call_path(c));
    if (c->state != CALL_ACTIVE)
        return sfl__fail(SFL_EINVAL, "grpc: call %s already finished", sfl_grpc_call_path(c));
    if (c->kind == SFL_GRPC_KIND_UNARY && c->n_sent > 0)
        return sfl__fail(SFL_EINVAL, "grpc: unary call %s already has its response",
                         sfl_grpc_call_path(c));
    if (len > s->max_message)
        return sfl__fail(SFL_ELIMIT, "grpc: response of %zu bytes exceeds the limit of %u", len,
                         s->max_message);
    if (c->queued > s->max_queued - SFL_GRPCFRAME_PREFIX - len)
        return sfl__fail(SFL_ELIMIT, "grpc: %zu bytes already queued on %s (limit %u)",
                         c->queued, sfl_grpc_call_path(c), s->max_queued);
    m = frame_message(msg, len);
    if (m == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a %zu-byte response", len);
    if (!c->headers_sent) {
        nghttp2_nv nv[2] = {mknv(":status", "200"), mknv("content-type", "application/grpc")};
        nghttp2_data_provider prd = {{0}, data_read};
        int rv = nghttp2_submit_response(s->h2, c->stream_id, nv, 2, &prd);

        if (rv != 0) {
            sfl__free(m);
            return h2_error(rv, "submitting a response");
        }
        c->headers_sent = true;
        enqueue(c, m);
    } else {
        enqueue(c, m);
        (void)nghttp2_session_resume_data(s->h2, c->stream_id);
    }
    return 0;
}

int sfl_grpc_send(sfl_grpc_call_t *c, const uint8_t *msg, size_t len)
{
    int rc = send_msg(c, msg, len);

    if (rc == 0)
        sfl__grpc_wake(c->s);
    return rc;
}

/* Releases the application's hold; *s_out is the session to wake, if any. */
static int finish_call(sfl_grpc_call_t *c, int status, const char *message,
                       sfl_grpc_session_t **s_out)
{
    sfl_grpc_session_t *s;
    int rc = 0;

    assert(c != NULL && c->server && c->app_holds);
    *s_out = NULL;
    c->app_holds = false;
    s = c->s;
    if (s == NULL) {
        free_call(c); /* the stream is gone; we were the last owner */
        return sfl__fail(-ECANCELED, "grpc: call was cancelled");
    }
    if (c->cancelled || c->state != CALL_ACTIVE)
        return sfl__fail(-ECANCELED, "grpc: call %s was cancelled", sfl_grpc_call_path(c));
    if (status < 0 || status > SFL_GRPC_STATUS_UNAUTHENTICATED) {
        rc = sfl__fail(SFL_EINVAL, "grpc: status %d out of range", status);
        status = SFL_GRPC_STATUS_INTERNAL;
        message = "server error: invalid status";
    } else if (status == SFL_GRPC_STATUS_OK && c->kind == SFL_GRPC_KIND_UNARY &&
               c->n_sent == 0) {
        rc = sfl__fail(SFL_EINVAL, "grpc: unary call %s finished OK without a response",
                       sfl_grpc_call_path(c));
        status = SFL_GRPC_STATUS_INTERNAL;
        message = "server error: no response";
    }
    end_call(s, c, 200, status, message);
    *s_out = s;
    return rc;
}

int sfl_grpc_finish(sfl_grpc_call_t *c, int status, const char *message)
{
    sfl_grpc_session_t *s;
    int rc = finish_call(c, status, message, &s);

    sfl__grpc_wake(s);
    return rc;
}

int sfl_grpc_reply(sfl_grpc_call_t *c, const uint8_t *msg, size_t len)
{
    char detail[256];
    sfl_grpc_session_t *s;
    int rc = send_msg(c, msg, len);

    if (rc == 0) {
        rc = finish_call(c, SFL_GRPC_STATUS_OK, NULL, &s);
        sfl__grpc_wake(s); /* once for both */
        return rc;
    }
    snprintf(detail, sizeof(detail), "%s", sfl_last_error());
    (void)sfl_grpc_finish(c,
                          rc == SFL_ELIMIT ? SFL_GRPC_STATUS_RESOURCE_EXHAUSTED
                                           : SFL_GRPC_STATUS_INTERNAL,
                          rc == SFL_ELIMIT ? "response too large" : "server error");
    return sfl__fail(rc, "%s", detail);
}

void sfl_grpc_call_on_cancel(sfl_grpc_call_t *c, sfl_grpc_cancel_cb cb, void *ud)
{
    assert(c != NULL && c->server);
    c->on_cancel = cb;
    c->cancel_ud = ud;
}

uint64_t sfl_grpc_call_deadline(const sfl_grpc_call_t *c)
{
    assert(c != NULL);
    return c->deadline;
}

const char *sfl_grpc_call_path(const sfl_grpc_call_t *c)
{
    assert(c != NULL);
    return c->server && c->method != NULL ? c->method->path : c->path;
}

sfl_grpc_session_t *sfl_grpc_call_session(const sfl_grpc_call_t *c)
{
    assert(c != NULL);
    return c->server && c->cancelled ? NULL : c->s;
}

size_t sfl_grpc_call_queued(const sfl_grpc_call_t *c)
{
    assert(c != NULL);
    return c->queued;
}

/* ---- client calls ----------------------------------------------------- */

static int start_call(sfl_grpc_session_t *s, const char *path, const uint8_t *req, size_t len,
                      uint32_t timeout_ms, sfl_grpc_call_t *c, sfl_grpc_call_t **out)
{
    char tmo[16];
    nghttp2_nv nv[9];
    size_t n = 0;
    nghttp2_data_provider prd = {{0}, data_read};
    struct outmsg *m;
    int32_t id;

    if (s->state != SESSION_OPEN) {
        sfl__free(c);
        return sfl__fail(-ENOTCONN, "grpc: session is closing");
    }
    if (len > s->max_message) {
        sfl__free(c);
        return sfl__fail(SFL_ELIMIT, "grpc: request of %zu bytes exceeds the limit of %u", len,
                         s->max_message);
    }
    m = frame_message(req, len);
    if (m == NULL) {
        sfl__free(c);
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a %zu-byte request", len);
    }
    c->state = CALL_ACTIVE;
    c->grpc_status = -1;
    set_deadline(s, c, timeout_ms ? add_sat(now(s), timeout_ms) : NO_DEADLINE);
    sfl_grpcframe_init(&c->rx, s->max_message);
    enqueue(c, m);
    nv[n++] = mknv(":method", "POST");
    nv[n++] = mknv(":scheme", s->scheme);
    nv[n++] = mknv(":path", path);
    nv[n++] = mknv(":authority", s->authority);
    nv[n++] = mknv("te", "trailers");
    nv[n++] = mknv("content-type", "application/grpc");
    nv[n++] = mknv("user-agent", "sfl-grpc/1");
    if (timeout_ms) {
        sfl_grpc_timeout_format(timeout_ms, tmo);
        nv[n++] = mknv("grpc-timeout", tmo);
    }
    if (sfl_idmap_reserve(&s->by_id, 1) < 0) {
        free_call(c);
        return SFL_ENOMEM;
    }
    id = nghttp2_submit_request(s->h2, NULL, nv, n, &prd, NULL);
    if (id < 0) {
        free_call(c);
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE)
            return sfl__fail(SFL_ELIMIT, "grpc: no stream id left on this connection");
        return h2_error(id, "submitting a request");
    }
    c->stream_id = id;
    link_call(s, c);
    if (out != NULL)
        *out = c;
    sfl__grpc_wake(s);
    return 0;
}

/* A client call of the given kind for path, or an error for a bad path. */
static int new_client_call(const char *path, sfl_grpc_kind_t kind, void *ud,
                           sfl_grpc_call_t **out)
{
    sfl_grpc_call_t *c;

    /* The path travels whole; only the copy kept for logs is truncated. */
    if (path == NULL || path[0] != '/')
        return sfl__fail(SFL_EINVAL, "grpc: path must start with '/'");
    c = sfl__calloc(1, sizeof(*c));
    if (c == NULL)
        return sfl__fail(SFL_ENOMEM, "grpc: out of memory for a call");
    snprintf(c->path, sizeof(c->path), "%s", path);
    c->kind = kind;
    c->ud = ud;
    *out = c;
    return 0;
}

int sfl_grpc_call_unary(sfl_grpc_session_t *s, const char *path, const uint8_t *req,
                        size_t len, uint32_t timeout_ms, sfl_grpc_unary_cb cb, void *ud,
                        sfl_grpc_call_t **call)
{
    sfl_grpc_call_t *c = NULL;
    int rc;

    assert(s != NULL && !s->server && cb != NULL && (req != NULL || len == 0));
    if (call != NULL)
        *call = NULL;
    rc = new_client_call(path, SFL_GRPC_KIND_UNARY, ud, &c);
    if (rc != 0)
        return rc;
    c->unary_cb = cb;
    return start_call(s, path, req, len, timeout_ms, c, call);
}

int sfl_grpc_call_stream(sfl_grpc_session_t *s, const char *path, const uint8_t *req,
                         size_t len, uint32_t timeout_ms, sfl_grpc_message_cb on_message,
                         sfl_grpc_done_cb on_done, void *ud, sfl_grpc_call_t **call)
{
    sfl_grpc_call_t *c = NULL;
    int rc;

    assert(s != NULL && !s->server && on_message != NULL && on_done != NULL);
    assert(req != NULL || len == 0);
    if (call != NULL)
        *call = NULL;
    rc = new_client_call(path, SFL_GRPC_KIND_SERVER_STREAM, ud, &c);
    if (rc != 0)
        return rc;
    c->msg_cb = on_message;
    c->done_cb = on_done;
    return start_call(s, path, req, len, timeout_ms, c, call);
}

void sfl_grpc_cancel(sfl_grpc_call_t *c)
{
    assert(c != NULL && !c->server);
    if (c->state == CALL_DONE)
        return;
    c->state = CALL_DONE;
    c->unary_cb = NULL;
    c->msg_cb = NULL;
    c->done_cb = NULL;
    reset_stream(c->s, c);
    sfl__grpc_wake(c->s);
}

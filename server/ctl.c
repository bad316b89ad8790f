/* sflctl's pieces. The client is a gRPC channel (sfl/grpcconn.h) with one
 * caller that waits: every call runs the loop until its callback has fired,
 * which is what a command-line tool wants and keeps the session driven only
 * from loop callbacks (never from inside its own). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ini.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "coord.h"
#include "sfl/alloc.h"
#include "sfl/grpc.h"
#include "sfl/grpcconn.h"
#include "sfl/spcodec.h"
#include "sfl/transport.h"

/* Replies the tool accepts; an export of a d = 1e6 dense model is ~9 MB. */
#define CTL_MAX_MESSAGE (64u << 20)

/* ---- configuration ----------------------------------------------------------- */

void ctl_config_default(ctl_config_t *c)
{
    memset(c, 0, sizeof(*c));
    c->timeout_ms = 10000;
}

static const struct {
    const char *key;
    size_t off, cap;
} strings[] = {
#define S(k, f) {k, offsetof(ctl_config_t, f), sizeof(((ctl_config_t *)0)->f)}
    S("coordinator", coordinator), S("server_name", server_name), S("ca", ca),
    S("cert", cert), S("key", key),
#undef S
};

int ctl_config_set(ctl_config_t *c, const char *key, const char *v)
{
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        size_t n = strlen(v);

        if (strcmp(key, strings[i].key) != 0)
            continue;
        if (n >= strings[i].cap)
            return sfl__fail(SFL_EINVAL, "%s: value longer than %zu characters", key,
                             strings[i].cap - 1);
        memcpy((char *)c + strings[i].off, v, n + 1);
        return 0;
    }
    if (strcmp(key, "timeout_ms") == 0) {
        char *end;
        unsigned long long x;

        errno = 0;
        x = strtoull(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno || x == 0 || x > INT32_MAX)
            return sfl__fail(SFL_EINVAL, "timeout_ms: want 1..%d, got '%s'", INT32_MAX, v);
        c->timeout_ms = x;
        return 0;
    }
    return sfl__fail(SFL_EINVAL, "unknown sflctl key '%s'", key);
}

typedef struct cfg_ctx {
    ctl_config_t *c;
    int rc;
} cfg_ctx_t;

static int on_cfg_key(void *user, const char *section, const char *name, const char *value)
{
    cfg_ctx_t *x = user;

    if (strcmp(section, "sflctl") != 0) {
        x->rc = sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [sflctl])", section);
        return 0;
    }
    x->rc = ctl_config_set(x->c, name, value);
    return x->rc == 0;
}

/* inih's result as an sfl error naming file and line. */
static int ini_result(const char *path, int line, int rc)
{
    char detail[256];

    if (line < 0)
        return sfl__fail(-ENOENT, "%s: cannot open", path);
    if (line == 0)
        return 0;
    snprintf(detail, sizeof(detail), "%s", sfl_last_error());
    return sfl__fail(rc ? rc : SFL_EPARSE, "%s:%d: %s", path, line,
                     rc ? detail : "malformed line");
}

int ctl_config_load(ctl_config_t *c, const char *path)
{
    cfg_ctx_t x = {c, 0};
    int line = ini_parse(path, on_cfg_key, &x);

    return ini_result(path, line, x.rc);
}

int ctl_config_check(const ctl_config_t *c)
{
    static const char *const need[] = {"coordinator", "ca", "cert", "key"};
    const char *have[] = {c->coordinator, c->ca, c->cert, c->key};

    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (have[i][0] == '\0')
            return sfl__fail(SFL_EINVAL, "missing required setting '%s'", need[i]);
    if (c->timeout_ms == 0 || c->timeout_ms > INT32_MAX)
        return sfl__fail(SFL_EINVAL, "timeout_ms: want 1..%d", INT32_MAX);
    return 0;
}

int ctl_parse_id(const char *s, uint64_t *id)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || x == 0)
        return sfl__fail(SFL_EINVAL, "'%s' is not a job id (a number >= 1)", s);
    *id = x;
    return 0;
}

/* ---- job files ----------------------------------------------------------------- */

typedef struct job_ctx {
    coord_jobdef_t *d; /* made at the first key */
    char section[128]; /* the [job NAME] seen, "" before */
    int rc;
} job_ctx_t;

static int job_key(job_ctx_t *x, const char *section, const char *key, const char *v)
{
    const char *name;
    int rc = coord_job_section(section, &name);

    if (rc < 0)
        return rc;
    if (rc == 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [job NAME])", section);
    if (x->section[0] == '\0') {
        if ((rc = coord_jobdef_new(name, &x->d)) < 0)
            return rc;
        snprintf(x->section, sizeof(x->section), "%s", section);
    } else if (strcmp(x->section, section) != 0) {
        return sfl__fail(SFL_EINVAL, "[%s]: a job file holds one [job NAME] section", section);
    }
    if (strcmp(key, "name") == 0)
        return sfl__fail(SFL_EINVAL, "name: the job's name is the section's, [job NAME]");
    return coord_jobdef_set(x->d, key, v);
}

static int on_job_key(void *user, const char *section, const char *name, const char *value)
{
    job_ctx_t *x = user;

    x->rc = job_key(x, section, name, value);
    return x->rc == 0;
}

int ctl_job_load(const char *path, sfl_job_spec_t *out)
{
    job_ctx_t x;
    int line, rc;

    memset(&x, 0, sizeof(x));
    line = ini_parse(path, on_job_key, &x);
    if ((rc = ini_result(path, line, x.rc)) < 0)
        goto out;
    if (x.section[0] == '\0') {
        rc = sfl__fail(SFL_EINVAL, "%s: no [job NAME] section", path);
        goto out;
    }
    /* Checked as the coordinator checks a CreateJob, so nothing is sent
     * that it refuses. */
    if ((rc = coord_jobdef_wire(x.d, out)) < 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        rc = sfl__fail(rc, "%s: [%s]: %s", path, x.section, detail);
    }
out:
    coord_jobdef_free(x.d);
    return rc;
}

/* ---- client ---------------------------------------------------------------------- */

struct ctl_client {
    uv_loop_t *loop;
    uint64_t timeout_ms;
    sfl_grpcconn_t *g; /* NULL once closed */
    uv_timer_t nap;    /* ctl_client_sleep */
    int nap_open;      /* nap not yet closed */
    int opened, closed, napped, interrupted;
    int settled;       /* opened or closed: ctl_client_open may return */
    char why[256];     /* why the connection failed or closed */
    /* the call in flight */
    sfl_grpc_call_t *call;
    ctl_result_t *res;
    int done, rc;
};

static void on_open(sfl_grpcconn_t *g, void *ud)
{
    ctl_client_t *k = ud;

    (void)g;
    k->opened = k->settled = 1;
}

static void on_close(sfl_grpcconn_t *g, int status, const char *detail, void *ud)
{
    ctl_client_t *k = ud;

    (void)g;
    if (status < 0 && k->why[0] == '\0')
        snprintf(k->why, sizeof(k->why), "%s", detail);
    /* The call in flight, if any, ends after this with UNAVAILABLE. */
    k->g = NULL;
    k->closed = k->settled = 1;
}

static const sfl_grpcconn_cbs_t conn_cbs = {on_open, on_close};

/* Runs the loop until *flag; -ECANCELED once interrupted. */
static int run_until(ctl_client_t *k, const int *flag)
{
    while (!*flag && !k->interrupted && uv_loop_alive(k->loop))
        uv_run(k->loop, UV_RUN_ONCE);
    return *flag ? 0 : -ECANCELED;
}

static void unavailable(ctl_result_t *r, const char *where, const char *why)
{
    r->status = SFL_GRPC_STATUS_UNAVAILABLE;
    snprintf(r->message, sizeof(r->message), "%.200s: %.300s", where, why);
}

int ctl_client_open(uv_loop_t *loop, const ctl_config_t *cfg, ctl_client_t **out,
                    ctl_result_t *r)
{
    sfl_grpc_config_t g = {.max_message = CTL_MAX_MESSAGE, .idle_timeout_ms = UINT32_MAX};
    sfl_conn_opts_t o = {.connect_timeout_ms = cfg->timeout_ms};
    char host[256], port[16];
    struct addrinfo hints;
    uv_getaddrinfo_t gai;
    ctl_client_t *k = NULL;
    int rc;

    *out = NULL;
    memset(r, 0, sizeof(*r));
    rc = sfl_grpcconn_split_hostport(cfg->coordinator, host, sizeof(host), port, sizeof(port));
    if (rc < 0) {
        char detail[256];

        snprintf(detail, sizeof(detail), "%s", sfl_last_error());
        return sfl__fail(rc, "coordinator: %s", detail);
    }
    {
        sfl_tls_config_t t = {
            .cert_file = cfg->cert,
            .key_file = cfg->key,
            .ca_file = cfg->ca,
            .verify_host = cfg->server_name[0] ? cfg->server_name : host,
            .alpn = "h2",
            .alpn_required = 1,
        };

        if ((rc = sfl_tls_new(&t, 0, &o.tls)) < 0)
            return rc;
    }
    memset(&gai, 0, sizeof(gai));
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* No callback: resolves synchronously, which a CLI may. */
    if ((rc = uv_getaddrinfo(loop, &gai, NULL, host, port, &hints)) < 0) {
        unavailable(r, cfg->coordinator, uv_strerror(rc)); /* resolving */
        rc = 0;
        goto out;
    }
    k = sfl__calloc(1, sizeof(*k));
    if (k == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    k->loop = loop;
    k->timeout_ms = cfg->timeout_ms;
    uv_timer_init(loop, &k->nap);
    k->nap.data = k;
    k->nap_open = 1;
    rc = sfl_grpcconn_connect(loop, gai.addrinfo->ai_addr, &o, &g, cfg->coordinator, &conn_cbs,
                              k, &k->g);
    if (rc == SFL_ENOMEM)
        goto out;
    if (rc < 0) {
        unavailable(r, cfg->coordinator, sfl_strerror(rc));
        rc = 0;
        goto out;
    }
    (void)run_until(k, &k->settled);
    /* A refused TLS 1.3 client learns it only after its handshake: the
     * first call reports that. */
    if (!k->opened) {
        unavailable(r, "cannot connect", k->why[0] ? k->why : cfg->coordinator);
        goto out;
    }
    *out = k;
    k = NULL;
out:
    uv_freeaddrinfo(gai.addrinfo);
    ctl_client_free(k);
    sfl_tls_free(o.tls);
    return rc;
}

static void on_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
                     size_t len, void *ud)
{
    ctl_client_t *k = ud;
    ctl_result_t *r = k->res;

    (void)call;
    k->call = NULL;
    k->done = 1;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    if (status == SFL_GRPC_STATUS_UNAVAILABLE && k->why[0] && strlen(message) < 64)
        snprintf(r->message, sizeof(r->message), "%.63s%s%.300s", message, message[0] ? ": " : "",
                 k->why);
    if (status != SFL_GRPC_STATUS_OK)
        return;
    r->resp = sfl__malloc(len ? len : 1);
    if (r->resp == NULL) {
        k->rc = SFL_ENOMEM;
        return;
    }
    memcpy(r->resp, resp, len);
    r->len = len;
}

int ctl_client_call(ctl_client_t *k, const char *path, const uint8_t *req, size_t len,
                    ctl_result_t *r)
{
    int rc;

    ctl_result_clear(r);
    if (k->interrupted)
        return -ECANCELED;
    if (k->g == NULL) {
        unavailable(r, "connection closed", k->why[0] ? k->why : "by the coordinator");
        return 0;
    }
    k->res = r;
    k->done = 0;
    k->rc = 0;
    rc = sfl_grpc_call_unary(sfl_grpcconn_session(k->g), path, req, len, (uint32_t)k->timeout_ms,
                             on_unary, k, &k->call);
    if (rc == -ENOTCONN) {
        unavailable(r, "connection closed", k->why[0] ? k->why : "by the coordinator");
        return 0;
    }
    if (rc < 0)
        return rc;
    rc = run_until(k, &k->done);
    if (rc < 0) {
        if (k->call != NULL)
            sfl_grpc_cancel(k->call);
        k->call = NULL;
        return rc;
    }
    return k->rc;
}

void ctl_client_interrupt(ctl_client_t *k)
{
    k->interrupted = 1;
}

static void on_nap(uv_timer_t *t)
{
    ctl_client_t *k = t->data;

    k->napped = 1;
}

int ctl_client_sleep(ctl_client_t *k, uint64_t ms)
{
    k->napped = 0;
    uv_timer_start(&k->nap, on_nap, ms, 0);
    return run_until(k, &k->napped);
}

static void on_nap_closed(uv_handle_t *h)
{
    ctl_client_t *k = h->data;

    k->nap_open = 0;
}

void ctl_client_free(ctl_client_t *k)
{
    if (k == NULL)
        return;
    if (k->call != NULL)
        sfl_grpc_cancel(k->call);
    k->call = NULL;
    if (k->g != NULL) {
        /* GOAWAY, then the transport closes (close_timeout_ms). */
        sfl_grpcconn_close(k->g);
        while (k->g != NULL)
            uv_run(k->loop, UV_RUN_ONCE);
    }
    if (k->nap_open) {
        uv_close((uv_handle_t *)&k->nap, on_nap_closed);
        while (k->nap_open)
            uv_run(k->loop, UV_RUN_ONCE);
    }
    sfl__free(k);
}

void ctl_result_clear(ctl_result_t *r)
{
    sfl__free(r->resp);
    memset(r, 0, sizeof(*r));
}

/* ---- output ----------------------------------------------------------------------- */

/* "3d04h", "1h02m", "5m03s", "12s"; negative ages (clock skew) as 0s. */
static const char *duration(int64_t ms, char *out, size_t cap)
{
    uint64_t s = ms > 0 ? (uint64_t)ms / 1000 : 0;

    if (s >= 86400)
        snprintf(out, cap, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(out, cap, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(out, cap, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(out, cap, "%" PRIu64 "s", s);
    return out;
}

static int running(const sfl_job_status_t *j)
{
    return j->state == SFL_JOB_RUNNING;
}

void ctl_print_jobs(FILE *f, const sfl_job_status_t *jobs, uint32_t n)
{
    int wn = 4, wa = 9;

    if (n == 0) {
        fprintf(f, "no jobs\n");
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        int a = (int)strlen(jobs[i].name), b = (int)strlen(jobs[i].algorithm);

        wn = a > wn ? a : wn;
        wa = b > wa ? b : wa;
    }
    fprintf(f, "%-4s %-*s %-*s %-9s %-11s %-11s %-7s %-8s %s\n", "ID", wn, "NAME", wa,
            "ALGORITHM", "STATE", "ROUNDS", "ROUND", "ATTEMPT", "ACCEPTED", "NNZ");
    for (uint32_t i = 0; i < n; i++) {
        const sfl_job_status_t *j = &jobs[i];
        char rounds[32], att[16] = "-", acc[32] = "-";

        snprintf(rounds, sizeof(rounds), "%" PRIu64 "/%u", j->committed_round, j->rounds);
        if (running(j)) {
            snprintf(att, sizeof(att), "%u", j->attempt);
            snprintf(acc, sizeof(acc), "%u/%u", j->accepted, j->cohort_size);
        }
        fprintf(f, "%-4" PRIu64 " %-*s %-*s %-9s %-11s %-11s %-7s %-8s %u\n", j->job_id, wn,
                j->name, wa, j->algorithm, sfl_msg_job_state_name(j->state), rounds,
                running(j) ? sfl_msg_round_state_name(j->round_state) : "-", att, acc,
                j->model_nnz);
        if (j->error[0])
            fprintf(f, "     error: %s\n", j->error);
        if (running(j) && j->waiting[0])
            fprintf(f, "     %s\n", j->waiting);
    }
}

void ctl_print_status(FILE *f, const sfl_status_t *s, int64_t now_ms)
{
    char up[32];

    fprintf(f, "coordinator  %s, up %s\n", s->version,
            duration(now_ms - s->started_ms, up, sizeof(up)));
    fprintf(f, "agents       %u connected, %u known\n", s->connected_agents, s->known_agents);
    fprintf(f, "updates      %" PRIu64 " accepted, %" PRIu64 " rejected\n", s->updates_accepted,
            s->updates_rejected);
    fprintf(f, "bytes        %" PRIu64 " in, %" PRIu64 " out\n", s->bytes_in, s->bytes_out);
    fprintf(f, "jobs         %u\n", s->njobs);
    if (s->njobs > 0) {
        fputc('\n', f);
        ctl_print_jobs(f, s->jobs, s->njobs);
    }
}

void ctl_print_agents(FILE *f, const sfl_agent_list_t *l, int64_t now_ms)
{
    int ws = 7;

    if (l->n == 0) {
        fprintf(f, "no agents\n");
        return;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        int a = (int)strlen(l->agents[i].subject);

        ws = a > ws ? a : ws;
    }
    fprintf(f, "%-4s %-*s %-9s %-9s %-4s %-6s %-8s %-8s %-8s %-7s %-9s %s\n", "ID", ws, "SUBJECT",
            "CONNECTED", "PHASE", "JOB", "ROUND", "PROGRESS", "ACCEPTED", "SAMPLES", "DIM",
            "LAST SEEN", "VERSION");
    for (uint32_t i = 0; i < l->n; i++) {
        const sfl_agent_info_t *a = &l->agents[i];
        char job[24] = "-", round[24] = "-", prog[16], seen[32] = "-";

        if (a->job_id) {
            snprintf(job, sizeof(job), "%" PRIu64, a->job_id);
            snprintf(round, sizeof(round), "%" PRIu64, a->round);
        }
        snprintf(prog, sizeof(prog), "%u.%u%%", a->progress_permille / 10,
                 a->progress_permille % 10);
        if (a->last_seen_ms > 0) {
            char d[24];

            snprintf(seen, sizeof(seen), "%s ago",
                     duration(now_ms - a->last_seen_ms, d, sizeof(d)));
        }
        fprintf(f,
                "%-4" PRIu64 " %-*s %-9s %-9s %-4s %-6s %-8s %-8" PRIu64 " %-8" PRIu64
                " %-7u %-9s %s\n",
                a->agent_id, ws, a->subject, a->connected ? "yes" : "no",
                a->phase ? sfl_msg_phase_name(a->phase) : "-", job, round, prog,
                a->updates_accepted, a->dataset.samples, a->dataset.dimension, seen,
                a->agent_version[0] ? a->agent_version : "-");
    }
}

void ctl_print_job(FILE *f, const sfl_job_status_t *j)
{
    fprintf(f, "job %" PRIu64 " %s: %s, %" PRIu64 "/%u rounds committed%s%s\n", j->job_id,
            j->name, sfl_msg_job_state_name(j->state), j->committed_round, j->rounds,
            j->error[0] ? "; error: " : "", j->error);
}

const char *ctl_watch_line(const sfl_job_status_t *j, char *out, size_t cap)
{
    if (running(j) && j->waiting[0])
        snprintf(out, cap, "job %" PRIu64 " %s: round %" PRIu64 "/%u %s", j->job_id, j->name,
                 j->committed_round + 1, j->rounds, j->waiting);
    else if (running(j))
        snprintf(out, cap,
                 "job %" PRIu64 " %s: round %" PRIu64 "/%u attempt %u %s, %u/%u accepted "
                 "(%u selected, quorum %u)",
                 j->job_id, j->name, j->committed_round + 1, j->rounds, j->attempt,
                 sfl_msg_round_state_name(j->round_state), j->accepted, j->cohort_size,
                 j->selected, j->min_quorum);
    else
        snprintf(out, cap, "job %" PRIu64 " %s: %s, %" PRIu64 "/%u rounds committed%s%s",
                 j->job_id, j->name, sfl_msg_job_state_name(j->state), j->committed_round,
                 j->rounds, j->error[0] ? "; error: " : "", j->error);
    return out;
}

void ctl_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- files ------------------------------------------------------------------------ */

int ctl_export_bytes(const sfl_export_t *e, uint8_t **buf, size_t *len)
{
    uint8_t hash[SFL_MSG_HASH_BYTES], *b = NULL;
    size_t cap;
    int rc;

    *buf = NULL;
    *len = 0;
    if (e->model == NULL)
        return sfl__fail(SFL_EINVAL, "export: no model");
    cap = sfl_spcodec_size(e->model, SFL_ENC_F64);
    b = sfl__malloc(cap ? cap : 1);
    if (b == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_spcodec_encode(e->model, SFL_ENC_F64, b, cap, len)) < 0)
        goto out;
    /* The codec has one encoding per vector, so re-encoding gives back the
     * bytes the coordinator hashed; checking says so rather than trusting. */
    crypto_generichash(hash, sizeof(hash), b, *len, NULL, 0);
    if (memcmp(hash, e->model_hash, sizeof(hash)) != 0) {
        rc = sfl__fail(SFL_EPARSE, "export: model bytes do not match model_hash");
        goto out;
    }
    *buf = b;
    b = NULL;
out:
    sfl__free(b);
    if (rc < 0)
        *len = 0;
    return rc;
}

int ctl_write_atomic(const char *path, const uint8_t *buf, size_t len)
{
    char tmp[CTL_PATH_MAX + 8];
    int fd = -1, rc = 0;
    size_t off = 0;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return sfl__fail(SFL_EINVAL, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sfl__fail(-errno, "%s: cannot create: %s", tmp, strerror(errno));
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = sfl__fail(-errno, "%s: write: %s", tmp, strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0) {
        rc = sfl__fail(-errno, "%s: fsync: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) < 0) {
        fd = -1;
        rc = sfl__fail(-errno, "%s: close: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        rc = sfl__fail(-errno, "%s: rename to %s: %s", tmp, path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmp);
    return rc;
}

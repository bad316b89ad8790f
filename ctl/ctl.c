/* sflctl's pieces. The client is a gRPC channel (sfl/net/grpcconn.h) with one
 * caller that waits: every call runs the loop until its callback has fired,
 * which is what a command-line tool wants and keeps the session driven only
 * from loop callbacks (never from inside its own). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "coord.h"
#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"
#include "sfl/core/ini.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/suggest.h"
#include "sfl/net/transport.h"

/* Replies the tool accepts; an export of a d = 1e6 dense model is ~9 MB. */
#define CTL_MAX_MESSAGE (64u << 20)

/* ---- configuration ----------------------------------------------------------- */

/* sflctl.ini's keys (and flags). coordinator defaults to the coordinator's
 * admin_listen: sflctl does not queue behind the agents' connections
 * (docs/security.md). */
static const sfl_cfg_key_t keys[] = {
    SFL_CFG_S("coordinator", ctl_config_t, coordinator, "127.0.0.1:7444", "HOST:PORT",
              "the coordinator's admin_listen address ([v6]:port); its listen address "
              "works too, queued with the agents"),
    SFL_CFG_S("server_name", ctl_config_t, server_name, "", "NAME",
              "name the coordinator certificate must carry (default: HOST)"),
    SFL_CFG_S("ca", ctl_config_t, ca, "", "FILE", "federation CA certificate (PEM); required"),
    SFL_CFG_S("cert", ctl_config_t, cert, "", "FILE", "admin certificate (PEM); required"),
    SFL_CFG_S("key", ctl_config_t, key, "", "FILE", "its private key (PEM); required"),
    SFL_CFG_N("timeout_ms", ctl_config_t, timeout_ms, "10000", 1, INT32_MAX, "MS",
              "connect, and each call's deadline"),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void ctl_config_default(ctl_config_t *c)
{
    memset(c, 0, sizeof(*c));
    sfl_cfg_defaults(keys, NKEYS, c);
}

int ctl_config_set(ctl_config_t *c, const char *key, const char *v)
{
    int rc = sfl_cfg_set(keys, NKEYS, c, key, v);

    if (rc == 1)
        return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
    return rc;
}

int ctl_config_known(const char *key)
{
    return sfl_cfg_find(keys, NKEYS, key) != NULL;
}

const sfl_cfg_key_t *ctl_config_keys(size_t *n)
{
    *n = NKEYS;
    return keys;
}

static int on_cfg_key(void *ud, const char *section, const char *key, const char *value)
{
    if (strcmp(section, "sflctl") != 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [sflctl])", section);
    return ctl_config_set(ud, key, value);
}

int ctl_config_load(ctl_config_t *c, const char *path)
{
    return sfl_ini_parse_file(path, on_cfg_key, c);
}

int ctl_config_parse(ctl_config_t *c, const char *name, const char *buf, size_t len)
{
    return sfl_ini_parse_buffer(name, buf ? buf : "", len, on_cfg_key, c);
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

/* ---- command line ------------------------------------------------------------------ */

static const struct {
    const char *w1, *w2; /* the command's words; w2 may be NULL */
    int nargs;           /* operands after the words */
    int id;              /* operands[0] is a job id */
    int opt_id;          /* or: no operand, or one job id (watch [ID]) */
} cmds[] = {
    [CTL_CMD_STATUS] = {"status", NULL, 0, 0, 0},
    [CTL_CMD_AGENTS] = {"agents", NULL, 0, 0, 0},
    [CTL_CMD_JOBS] = {"jobs", NULL, 0, 0, 0},
    [CTL_CMD_JOB_CREATE] = {"job", "create", 1, 0, 0},
    [CTL_CMD_JOB_PAUSE] = {"job", "pause", 1, 1, 0},
    [CTL_CMD_JOB_RESUME] = {"job", "resume", 1, 1, 0},
    [CTL_CMD_JOB_CANCEL] = {"job", "cancel", 1, 1, 0},
    [CTL_CMD_JOB_HISTORY] = {"job", "history", 1, 1, 0},
    [CTL_CMD_MODEL_EXPORT] = {"model", "export", 2, 1, 0},
    [CTL_CMD_WATCH] = {"watch", NULL, 0, 0, 1},
    [CTL_CMD_AGENT_REVOKE] = {"agent", "revoke", 1, 0, 0},
    [CTL_CMD_JOB_RELEASE] = {"job", "release", 2, 1, 0},
};

static int find_cmd(const char *const *words, int n, ctl_args_t *a)
{
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        int nw = cmds[i].w2 ? 2 : 1;

        if (n < nw || strcmp(words[0], cmds[i].w1) != 0 ||
            (cmds[i].w2 && strcmp(words[1], cmds[i].w2) != 0))
            continue;
        int id = cmds[i].id || (cmds[i].opt_id && n - nw == 1);

        if (n - nw != cmds[i].nargs && !(cmds[i].opt_id && n - nw == 1))
            return sfl__fail(SFL_EINVAL, "wrong number of operands for '%s%s%s'", cmds[i].w1,
                             cmds[i].w2 ? " " : "", cmds[i].w2 ? cmds[i].w2 : "");
        a->cmd = (ctl_cmd_t)i;
        a->noperands = n - nw;
        for (int k = 0; k < a->noperands; k++)
            a->operands[k] = words[nw + k];
        if (id && ctl_parse_id(a->operands[0], &a->id) < 0)
            return SFL_EINVAL;
        if (a->cmd == CTL_CMD_JOB_RELEASE && ctl_parse_id(a->operands[1], &a->agent) < 0)
            return sfl__fail(SFL_EINVAL, "'%.100s' is not an agent id (a number >= 1, as "
                             "sflctl agents shows)", a->operands[1]);
        return 0;
    }
    if (n == 0)
        return sfl__fail(SFL_EINVAL, "no command (status, agents, jobs, job ..., model export, "
                                     "watch, agent revoke)");
    {
        /* the nearest command: "job lst" -> 'job list'... compared as the
         * one or two words the user gave */
        char said[128], name[64];
        sfl_suggest_t sg;

        snprintf(said, sizeof(said), "%.60s%s%.60s", words[0], n > 1 ? " " : "",
                 n > 1 ? words[1] : "");
        /* both words, then the first alone ("jbs 3" -> 'jobs') */
        for (int pass = 0; pass < 2; pass++) {
            sfl_suggest_init(&sg, NULL, pass ? words[0] : said);
            for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                snprintf(name, sizeof(name), "%s%s%s", cmds[i].w1, cmds[i].w2 ? " " : "",
                         cmds[i].w2 ? cmds[i].w2 : "");
                sfl_suggest_add(&sg, name);
            }
            if (sfl_suggest_best(&sg) != NULL || n < 2)
                break;
        }
        return sfl__fail(SFL_EINVAL, "unknown command '%s'%s", said, sfl_suggest_text(&sg));
    }
}

/* "unknown option '--timout_ms'; did you mean '--timeout_ms'? (valid: ...)" */
static int unknown_option(const char *arg, size_t n, const char *key)
{
    static const char *const own[] = {"config", "format", "round", "version", "help"};
    sfl_suggest_t sg;

    sfl_suggest_init(&sg, "--", key);
    for (size_t i = 0; i < NKEYS; i++)
        sfl_suggest_add(&sg, keys[i].key);
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        sfl_suggest_add(&sg, own[i]);
    return sfl__fail(SFL_EINVAL, "unknown option '%.*s'%s", (int)(n + 2), arg,
                     sfl_suggest_text(&sg));
}

int ctl_args_parse(int argc, char **argv, ctl_args_t *a)
{
    const char *words[CTL_MAX_OPERANDS + 2];
    int nwords = 0;

    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq, *v;
        char key[32];
        size_t n;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            a->help = 1;
            return 0;
        }
        if (strcmp(arg, "--version") == 0) {
            a->version = 1;
            return 0;
        }
        if (arg[0] == '-' && arg[1] != '-' && arg[1] != '\0')
            return sfl__fail(SFL_EINVAL, "unknown option '%.100s'", arg);
        if (strncmp(arg, "--", 2) != 0) {
            if (nwords == (int)(sizeof(words) / sizeof(words[0])))
                return sfl__fail(SFL_EINVAL, "too many operands");
            words[nwords++] = arg;
            continue;
        }
        eq = strchr(arg + 2, '=');
        n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (n == 0 || n >= sizeof(key))
            return sfl__fail(SFL_EINVAL, "unknown option '%.*s'", (int)(n + 2 < 200 ? n + 2 : 200),
                             arg);
        for (size_t k = 0; k < n; k++)
            key[k] = arg[2 + k] == '-' ? '_' : arg[2 + k];
        key[n] = '\0';
        if (strcmp(key, "config") != 0 && strcmp(key, "format") != 0 &&
            strcmp(key, "round") != 0 && !ctl_config_known(key))
            return unknown_option(arg, n, key);
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return sfl__fail(SFL_EINVAL, "option '%s' needs a value", arg);
        if (strcmp(key, "config") == 0) {
            a->config = v;
            continue;
        }
        if (strcmp(key, "round") == 0) {
            char *end;
            unsigned long long r;

            errno = 0;
            r = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || errno || r == 0 || r > INT64_MAX)
                return sfl__fail(SFL_EINVAL, "--round: want a round number >= 1, got '%.40s'",
                                 v);
            a->round = r;
            continue;
        }
        if (strcmp(key, "format") == 0) {
            ctl_format_t f;
            int rc = ctl_format_parse(v, &f);

            if (rc < 0)
                return rc;
            a->format = v;
            continue;
        }
        if (a->nflags == CTL_MAX_FLAGS)
            return sfl__fail(SFL_EINVAL, "more than %d options", CTL_MAX_FLAGS);
        memcpy(a->keys[a->nflags], key, n + 1);
        a->values[a->nflags++] = v;
    }
    int rc = find_cmd(words, nwords, a);

    if (rc == 0 && a->format != NULL && a->cmd != CTL_CMD_MODEL_EXPORT)
        return sfl__fail(SFL_EINVAL, "--format applies only to model export");
    if (rc == 0 && a->round != 0 && a->cmd != CTL_CMD_MODEL_EXPORT)
        return sfl__fail(SFL_EINVAL, "--round applies only to model export");
    return rc;
}

int ctl_args_apply(const ctl_args_t *a, ctl_config_t *c)
{
    int rc;

    for (size_t i = 0; i < a->nflags; i++)
        if ((rc = ctl_config_set(c, a->keys[i], a->values[i])) < 0)
            return rc;
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

static int on_job_key(void *ud, const char *section, const char *name, const char *value)
{
    return job_key(ud, section, name, value);
}

/* A job file's text (file or buffer) into out. */
static int job_parse(const char *path, const char *buf, size_t len, sfl_job_spec_t *out)
{
    job_ctx_t x;
    int rc;

    memset(&x, 0, sizeof(x));
    rc = buf ? sfl_ini_parse_buffer(path, buf, len, on_job_key, &x)
             : sfl_ini_parse_file(path, on_job_key, &x);
    if (rc < 0)
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

int ctl_job_load(const char *path, sfl_job_spec_t *out)
{
    return job_parse(path, NULL, 0, out);
}

int ctl_job_parse(const char *name, const char *buf, size_t len, sfl_job_spec_t *out)
{
    return job_parse(name, buf ? buf : "", len, out);
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
    fprintf(f, "%-4s %-*s %-*s %-9s %-11s %-11s %-7s %-8s %-7s %s\n", "ID", wn, "NAME", wa,
            "ALGORITHM", "STATE", "ROUNDS", "ROUND", "ATTEMPT", "ACCEPTED", "NNZ",
            "LAST ROUND");
    for (uint32_t i = 0; i < n; i++) {
        const sfl_job_status_t *j = &jobs[i];
        char rounds[32], att[16] = "-", acc[32] = "-", prog[160];

        snprintf(rounds, sizeof(rounds), "%" PRIu64 "/%u", j->committed_round, j->rounds);
        if (running(j)) {
            snprintf(att, sizeof(att), "%u", j->attempt);
            snprintf(acc, sizeof(acc), "%u/%u", j->accepted, j->cohort_size);
        }
        ctl_progress(j, prog, sizeof(prog));
        fprintf(f, "%-4" PRIu64 " %-*s %-*s %-9s %-11s %-11s %-7s %-8s %-7u %s\n", j->job_id,
                wn, j->name, wa, j->algorithm, sfl_msg_job_state_name(j->state), rounds,
                running(j) ? sfl_msg_round_state_name(j->round_state) : "-", att, acc,
                j->model_nnz, prog[0] ? prog : "-");
        if (j->description[0])
            fprintf(f, "     %s\n", j->description);
        if (j->error[0])
            fprintf(f, "     error: %s\n", j->error);
        if (running(j) && j->waiting[0])
            fprintf(f, "     %s\n", j->waiting);
        if (j->quarantined > 0)
            fprintf(f, "     quarantined %u: %s\n", j->quarantined, j->quarantine);
        if (running(j) && j->statistics == 1)
            fprintf(f, "     statistics round (round 0): the agents' moments, before round 1\n");
        if (j->statistics == 2)
            fprintf(f, "     standardized: statistics of %" PRIu64 " rows from %u agents\n",
                    j->statistics_rows, j->statistics_agents);
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
        if (a->quarantine[0])
            fprintf(f, "     %s\n", a->quarantine);
    }
}

static int classification(const char *loss)
{
    return strcmp(loss, "lsq") != 0;
}

/* Whether a job's agents report a personal accuracy: its algorithm keeps a
 * model per agent, and the loss classifies. Decided by the algorithm, not
 * by the value, so a personal model that gets every row wrong still shows
 * its 0. */
static int personalized(const char *algorithm, const char *loss)
{
    const sfl_algo_t *a = sfl_algo_find(algorithm);

    return a != NULL && a->shape == SFL_SHAPE_PERSONALIZED && a->personal_model != NULL &&
           classification(loss);
}

const char *ctl_progress(const sfl_job_status_t *j, char *out, size_t cap)
{
    char pacc[32] = "";
    size_t o;

    out[0] = '\0';
    if (cap == 0)
        return out;
    if (j->privacy_epsilon > 0 || j->iteration > 0) {
        /* a vertical job: its iteration and privacy ledger */
        o = (size_t)snprintf(out, cap, "iteration %" PRIu64, j->iteration);
        if (j->privacy_epsilon > 0 && o < cap)
            snprintf(out + o, cap - o, ", epsilon %.4g of %.4g spent (rdp %.4g, %" PRIu64
                     " iterations)", j->privacy_spent, j->privacy_epsilon,
                     j->privacy_spent_rdp, j->privacy_iterations);
        return out;
    }
    if (j->last_samples == 0)
        return out;
    o = (size_t)snprintf(out, cap, "loss %.4g", j->last_train_loss);
    if (personalized(j->algorithm, j->loss))
        snprintf(pacc, sizeof(pacc), ", pacc %.4g", j->last_personal_accuracy);
    if (j->last_eval_samples > 0 && o < cap)
        snprintf(out + o, cap - o, ", %s %.4g%s (%" PRIu64 " held out)",
                 classification(j->loss) ? "accuracy" : "mse",
                 classification(j->loss) ? j->last_eval_accuracy : j->last_eval_mse, pacc,
                 j->last_eval_samples);
    return out;
}

static int vertical(const char *algorithm)
{
    const sfl_algo_t *a = sfl_algo_find(algorithm);

    return a != NULL && a->shape == SFL_SHAPE_VERTICAL;
}

/* A cell: "n/a" where the value cannot exist for the job (na), empty where
 * it could but was not reported (!have), else the value. */
#define CELL(f, na, have, ...)                                                                 \
    do {                                                                                       \
        if (na)                                                                                \
            fputs("n/a", f);                                                                   \
        else if (have)                                                                         \
            fprintf(f, __VA_ARGS__);                                                           \
    } while (0)

void ctl_print_history(FILE *f, const sfl_job_history_t *h, int header, int64_t t0_ms)
{
    int cls = classification(h->loss), pers = personalized(h->algorithm, h->loss);
    int vert = vertical(h->algorithm);

    /* New columns come last (personal_accuracy, then the privacy ledger),
     * so scripts that read the columns by position still read the same. */
    if (header)
        fprintf(f, "round,objective,test_accuracy,test_mse,eval_samples,nnz,bytes_up,bytes_down,"
                   "accepted,selected,samples,attempt,round_ms,wall_ms,personal_accuracy,"
                   "privacy_iterations,privacy_spent,privacy_spent_rdp\n");
    for (uint32_t i = 0; i < h->n; i++) {
        const sfl_round_summary_t *r = &h->rounds[i];
        /* the round's metrics were kept: every committed attempt sent a
         * task (bytes_down > 0); a round committed before schema 2 has none */
        int known = r->bytes_down > 0 || r->samples > 0;
        int rep = r->samples > 0; /* the agents reported their training */
        int ev = rep && r->eval_samples > 0;

        /* a vertical job's objective is its block holders' word where the
         * broadcast is exactly the margins A x (bcfw, dpbcfw unsketched and
         * without noise); elsewhere nobody holds A x (a sketch, noise) and
         * the coordinator no labels: n/a (docs/operations.md, "History") */
        fprintf(f, "%" PRIu64 ",", r->round);
        CELL(f, vert && !rep, rep, "%.10g", r->train_loss);
        fputc(',', f);
        CELL(f, vert || !cls, ev, "%.6f", r->eval_accuracy);
        fputc(',', f);
        CELL(f, vert || cls, ev, "%.10g", r->eval_mse);
        fputc(',', f);
        CELL(f, vert, rep, "%" PRIu64, r->eval_samples);
        fputc(',', f);
        CELL(f, 0, known, "%u", r->model_nnz);
        fprintf(f, ",%" PRIu64 ",", r->bytes_up);
        CELL(f, 0, known, "%" PRIu64, r->bytes_down);
        fprintf(f, ",%u,%u,", r->accepted, r->selected);
        CELL(f, vert && !rep, rep, "%" PRIu64, r->samples);
        fprintf(f, ",%u,%" PRId64 ",%" PRId64 ",", r->attempt, r->committed_ms - r->opened_ms,
                r->committed_ms - t0_ms);
        CELL(f, !pers, ev, "%.6f", r->personal_accuracy);
        /* the ledger of a private vertical job; no other job keeps one */
        if (r->privacy_iterations > 0)
            fprintf(f, ",%" PRIu64 ",%.10g,%.10g", r->privacy_iterations, r->privacy_spent,
                    r->privacy_spent_rdp);
        else if (known)
            fputs(",n/a,n/a,n/a", f);
        else
            fputs(",,,", f);
        fputc('\n', f);
    }
}
#undef CELL

void ctl_print_job(FILE *f, const sfl_job_status_t *j)
{
    fprintf(f, "job %" PRIu64 " %s: %s, %" PRIu64 "/%u rounds committed%s%s\n", j->job_id,
            j->name, sfl_msg_job_state_name(j->state), j->committed_round, j->rounds,
            j->error[0] ? "; error: " : "", j->error);
}

const char *ctl_watch_line(const sfl_job_status_t *j, char *out, size_t cap)
{
    char prog[96];
    size_t o;

    ctl_progress(j, prog, sizeof(prog));
    if (running(j) && j->statistics == 1) {
        /* round 0: the statistics round, before the first training round */
        if (j->waiting[0])
            snprintf(out, cap, "job %" PRIu64 " %s: statistics round %s", j->job_id, j->name,
                     j->waiting);
        else
            snprintf(out, cap,
                     "job %" PRIu64 " %s: statistics round attempt %u %s, %u/%u answered",
                     j->job_id, j->name, j->attempt, sfl_msg_round_state_name(j->round_state),
                     j->accepted, j->selected);
        return out;
    }
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
    o = strlen(out);
    if (prog[0] && o < cap)
        snprintf(out + o, cap - o, "; last round %s", prog);
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

int ctl_format_parse(const char *s, ctl_format_t *out)
{
    static const char *const names[] = {"text", "libsvm", "npy", "spcodec"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (ctl_format_t)i;
            return 0;
        }
    return sfl__fail(SFL_EINVAL, "unknown --format '%s' (text, libsvm, npy or spcodec)", s);
}

/* Appends a little-endian IEEE double. */
static void put_f64le(uint8_t *p, double v)
{
    uint64_t u;

    memcpy(&u, &v, sizeof(u));
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

/* NumPy format 1.0: magic, version, a little-endian uint16 header length,
 * then a Python dict literal padded with spaces to a newline so that data
 * starts at a multiple of 64 bytes, then the dense values. */
static int render_npy(const sfl_spvec_t *v, uint8_t **buf, size_t *len)
{
    char hdr[128];
    int hl = snprintf(hdr, sizeof(hdr),
                      "{'descr': '<f8', 'fortran_order': False, 'shape': (%u,), }", v->dim);
    size_t pre = 10 + (size_t)hl + 1, pad = (64 - pre % 64) % 64, hlen = (size_t)hl + pad + 1;
    uint8_t *b;

    if ((size_t)v->dim > (SIZE_MAX - 10 - hlen) / 8)
        return sfl__fail(SFL_ELIMIT, "npy: dimension %u is too large", v->dim);
    *len = 10 + hlen + (size_t)v->dim * 8;
    b = sfl__calloc(*len, 1);
    if (b == NULL)
        return sfl__fail(SFL_ENOMEM, "npy: no memory for %zu bytes", *len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hlen & 0xff);
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + 10, hdr, (size_t)hl);
    memset(b + 10 + hl, ' ', pad);
    b[10 + hlen - 1] = '\n';
    /* calloc gave +0.0 everywhere, whose bytes are all zero too. */
    for (uint32_t k = 0; k < v->nnz; k++)
        put_f64le(b + 10 + hlen + (size_t)v->idx[k] * 8, v->val[k]);
    *buf = b;
    return 0;
}

/* text and libsvm through a memory stream, copied into sfl memory. */
static int render_lines(const sfl_export_t *e, ctl_format_t fmt, uint8_t **buf, size_t *len)
{
    const sfl_spvec_t *v = e->model;
    char *mem = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&mem, &n);
    int rc = 0;

    if (f == NULL)
        return sfl__fail(-errno, "model export: %s", strerror(errno));
    if (fmt == CTL_FORMAT_TEXT) {
        fprintf(f, "# sfl model: job %" PRIu64 ", round %" PRIu64 ", algorithm %s, loss %s\n",
                e->job_id, e->round, e->algorithm, e->loss);
        fprintf(f, "# dimension %u, nnz %u; lines: index (1-based, as sfl-sim --model-out) value\n",
                v->dim, v->nnz);
        if (e->nlabels > 0) {
            fprintf(f, "# labels");
            for (uint32_t i = 0; i < e->nlabels; i++)
                fprintf(f, " %.17g", e->labels[i]);
            fputc('\n', f);
        }
        for (uint32_t k = 0; k < v->nnz; k++)
            fprintf(f, "%llu %.17g\n", (unsigned long long)v->idx[k] + 1, v->val[k]);
    } else {
        fputc('0', f);
        for (uint32_t k = 0; k < v->nnz; k++)
            fprintf(f, " %llu:%.17g", (unsigned long long)v->idx[k] + 1, v->val[k]);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || mem == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "model export: out of memory");
        goto out;
    }
    *buf = sfl__malloc(n ? n : 1);
    if (*buf == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "model export: no memory for %zu bytes", n);
        goto out;
    }
    memcpy(*buf, mem, n);
    *len = n;
out:
    free(mem);
    return rc;
}

int ctl_model_render(const sfl_export_t *e, ctl_format_t fmt, uint8_t **buf, size_t *len)
{
    uint8_t *codec = NULL;
    size_t clen = 0;
    int rc;

    *buf = NULL;
    *len = 0;
    /* Every format starts from a model whose hash was checked. */
    if ((rc = ctl_export_bytes(e, &codec, &clen)) < 0)
        return rc;
    switch (fmt) {
    case CTL_FORMAT_SPCODEC:
        *buf = codec;
        *len = clen;
        return 0;
    case CTL_FORMAT_NPY:
        rc = render_npy(e->model, buf, len);
        break;
    case CTL_FORMAT_TEXT:
    case CTL_FORMAT_LIBSVM:
        rc = render_lines(e, fmt, buf, len);
        break;
    default:
        rc = sfl__fail(SFL_EINVAL, "model export: unknown format %d", (int)fmt);
    }
    sfl__free(codec);
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

int ctl_moments_render(const sfl_export_t *e, uint8_t **buf, size_t *len)
{
    size_t n = 1 + 2 * (size_t)e->dimension, sz = 0;
    char *mem = NULL;
    FILE *f;
    int rc = 0;

    *buf = NULL;
    *len = 0;
    if (e->moments == NULL)
        return sfl__fail(SFL_EINVAL, "model export: the job is not standardized");
    if ((f = open_memstream(&mem, &sz)) == NULL)
        return sfl__fail(-errno, "model export: %s", strerror(errno));
    fprintf(f, "# sfl moments: job %" PRIu64 ", dimension %u, standardize_eps %.17g\n",
            e->job_id, e->dimension, e->standardize_eps);
    fprintf(f, "# lines: rows, then each feature's sum (%u), then each feature's sum of "
            "squares (%u); x -> (x - sum/rows) / (sqrt(squares/rows - (sum/rows)^2) + eps)\n",
            e->dimension, e->dimension);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.17g\n", e->moments[i]);
    if (fclose(f) != 0 || mem == NULL) {
        free(mem);
        return sfl__fail(SFL_ENOMEM, "model export: out of memory");
    }
    if ((*buf = sfl__malloc(sz ? sz : 1)) == NULL)
        rc = sfl__fail(SFL_ENOMEM, "model export: out of memory");
    else {
        memcpy(*buf, mem, sz);
        *len = sz;
    }
    free(mem);
    return rc;
}

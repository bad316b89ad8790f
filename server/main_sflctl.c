/* sflctl: the operator's command line for the coordinator's Admin service.
 * Flags and sflctl.ini, one command per run, then the calls; the pieces
 * live in ctl.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "coord.h"
#include "ctl.h"
#include "sfl/alloc.h"
#include "sfl/grpc.h"

#define PROG "sflctl"
#define MAX_WORDS 4
#define WATCH_MS 500
#define WATCH_LINE 512 /* name, round and a waiting reason of up to 255 */

static const char usage_text[] =
    "usage: " PROG " [OPTIONS] COMMAND\n"
    "Talks to the coordinator's Admin service (gRPC, mutual TLS) with an admin\n"
    "certificate.\n"
    "\n"
    "Commands:\n"
    "  status                     coordinator counters and every job\n"
    "  agents                     known agents (connected or not)\n"
    "  jobs                       every job and its current round\n"
    "  job create FILE            create the job of FILE's [job NAME] section\n"
    "                             (keys as in coordinator.ini)\n"
    "  job pause ID               stop scheduling rounds (the open attempt is\n"
    "                             abandoned and retried on resume)\n"
    "  job resume ID              continue from the last committed round\n"
    "  job cancel ID              stop for good\n"
    "  model export ID FILE       write the last committed model (spcodec bytes)\n"
    "                             to FILE atomically\n"
    "  watch [ID]                 live view of the running jobs' rounds (every\n"
    "                             500 ms; Ctrl-C quits); with ID only that job,\n"
    "                             until it stops running: exit status 0 once it\n"
    "                             finished, 1 if it is paused, failed or cancelled\n"
    "\n"
    "Options (also keys of section [sflctl] of the config file; flags win):\n"
    "  --config FILE              INI file (default ~/.config/sfl/sflctl.ini if it\n"
    "                             exists)\n"
    "  --coordinator HOST:PORT    coordinator address ([v6]:port); required\n"
    "  --server-name NAME         name the coordinator certificate must carry\n"
    "                             (default: HOST)\n"
    "  --ca FILE                  federation CA certificate (PEM); required\n"
    "  --cert FILE                admin certificate (PEM); required\n"
    "  --key FILE                 its private key (PEM); required\n"
    "  --timeout-ms MS            connect, and each call's deadline (default 10000)\n"
    "  --version                  print the version\n"
    "  -h, --help                 this text\n"
    "\n"
    "Exit status: 0 done, 1 the call failed (the gRPC status and message are\n"
    "printed on one line), 2 bad usage, option, config or job file.\n";

static void usage_error(const char *what, const char *detail)
{
    fprintf(stderr, PROG ": %s%s%s\nTry '" PROG " --help'.\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(2);
}

/* "--server-name" -> "server_name" into key; *value points at an "=VALUE". */
static void flag_key(const char *arg, char *key, size_t cap, const char **value)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);

    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++)
        key[i] = arg[i] == '-' ? '_' : arg[i];
    key[n] = '\0';
    *value = eq ? eq + 1 : NULL;
}

static int64_t unix_ms(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* ---- commands --------------------------------------------------------------------- */

typedef struct app {
    ctl_config_t cfg;
    uv_loop_t *loop;
    ctl_client_t *cli;
    uv_signal_t sigint;
    int sig_on;
    char **args; /* the command's operands */
    uint64_t id;
    sfl_job_spec_t spec;
} app_t;

/* Prints a failed call's status on one line; returns the exit code. */
static int call_failed(const ctl_result_t *r)
{
    char msg[sizeof(r->message)];

    /* grpc-message is the peer's text: keep it on one line. */
    snprintf(msg, sizeof(msg), "%s", r->message[0] ? r->message : "(no message)");
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    fprintf(stderr, PROG ": %s: %s\n", sfl_grpc_status_name(r->status), msg);
    return 1;
}

static int local_failed(const char *what, int rc)
{
    fprintf(stderr, PROG ": %s: %s: %s\n", what, sfl_strerror(rc), sfl_last_error());
    return 1;
}

/* One call; takes req (an sfl_msg buffer). 0 with r OK, else the exit code. */
static int rpc(app_t *a, const char *method, uint8_t *req, size_t len, ctl_result_t *r)
{
    char path[64];
    int rc;

    memset(r, 0, sizeof(*r));
    if (a->cli == NULL) {
        if ((rc = ctl_client_open(a->loop, &a->cfg, &a->cli, r)) < 0) {
            sfl_msg_buf_free(req);
            return local_failed("connect", rc);
        }
        if (a->cli == NULL) {
            sfl_msg_buf_free(req);
            return call_failed(r);
        }
    }
    snprintf(path, sizeof(path), "/sfl.v1.Admin/%s", method);
    rc = ctl_client_call(a->cli, path, req, len, r);
    sfl_msg_buf_free(req);
    if (rc == -ECANCELED)
        return -1; /* Ctrl-C: the caller decides */
    if (rc < 0)
        return local_failed(method, rc);
    if (r->status != SFL_GRPC_STATUS_OK) {
        int code = call_failed(r);

        ctl_result_clear(r);
        return code;
    }
    return 0;
}

static int reply_failed(const char *method, int rc)
{
    return local_failed(method, rc);
}

static int cmd_status(app_t *a)
{
    ctl_result_t r;
    sfl_status_t *s = NULL;
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_status_req_pack(&req, &len)) < 0)
        return local_failed("Status", rc);
    if ((rc = rpc(a, "Status", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_status_unpack(r.resp, r.len, NULL, &s);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed("Status", rc);
    ctl_print_status(stdout, s, unix_ms());
    sfl_msg_status_free(s);
    return 0;
}

static int list_jobs(app_t *a, sfl_job_list_t **out)
{
    ctl_result_t r;
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_list_jobs_req_pack(&req, &len)) < 0)
        return local_failed("ListJobs", rc);
    if ((rc = rpc(a, "ListJobs", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_job_list_unpack(r.resp, r.len, NULL, out);
    ctl_result_clear(&r);
    return rc < 0 ? reply_failed("ListJobs", rc) : 0;
}

static int cmd_jobs(app_t *a)
{
    sfl_job_list_t *l = NULL;
    int rc;

    if ((rc = list_jobs(a, &l)) != 0)
        return rc;
    ctl_print_jobs(stdout, l->jobs, l->n);
    sfl_msg_job_list_free(l);
    return 0;
}

static int cmd_agents(app_t *a)
{
    ctl_result_t r;
    sfl_agent_list_t *l = NULL;
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_list_agents_req_pack(0, &req, &len)) < 0)
        return local_failed("ListAgents", rc);
    if ((rc = rpc(a, "ListAgents", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_agent_list_unpack(r.resp, r.len, NULL, &l);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed("ListAgents", rc);
    ctl_print_agents(stdout, l, unix_ms());
    sfl_msg_agent_list_free(l);
    return 0;
}

/* CreateJob and the JobRequest calls answer with a JobReply. */
static int job_reply(app_t *a, const char *method, uint8_t *req, size_t len)
{
    ctl_result_t r;
    sfl_job_status_t j;
    int rc;

    if ((rc = rpc(a, method, req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_job_reply_unpack(r.resp, r.len, NULL, &j);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed(method, rc);
    ctl_print_job(stdout, &j);
    return 0;
}

static int cmd_job_create(app_t *a)
{
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_create_job_pack(&a->spec, &req, &len)) < 0)
        return local_failed("CreateJob", rc);
    return job_reply(a, "CreateJob", req, len);
}

static int job_op(app_t *a, const char *method)
{
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_job_req_pack(a->id, &req, &len)) < 0)
        return local_failed(method, rc);
    return job_reply(a, method, req, len);
}

static int cmd_job_pause(app_t *a)
{
    return job_op(a, "PauseJob");
}

static int cmd_job_resume(app_t *a)
{
    return job_op(a, "ResumeJob");
}

static int cmd_job_cancel(app_t *a)
{
    return job_op(a, "CancelJob");
}

static int cmd_model_export(app_t *a)
{
    const char *file = a->args[1];
    ctl_result_t r;
    sfl_export_t *e = NULL;
    uint8_t *req = NULL, *bytes = NULL;
    size_t len;
    char hex[2 * SFL_MSG_HASH_BYTES + 1];
    int rc;

    if ((rc = sfl_msg_export_req_pack(a->id, 0, &req, &len)) < 0)
        return local_failed("ExportModel", rc);
    if ((rc = rpc(a, "ExportModel", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_export_unpack(r.resp, r.len, NULL, &e);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed("ExportModel", rc);
    if ((rc = ctl_export_bytes(e, &bytes, &len)) < 0 ||
        (rc = ctl_write_atomic(file, bytes, len)) < 0) {
        rc = local_failed("model export", rc);
        goto out;
    }
    ctl_hex(e->model_hash, SFL_MSG_HASH_BYTES, hex);
    printf("job %llu round %llu: dimension %u, nnz %u, hash %s, %zu bytes -> %s\n",
           (unsigned long long)e->job_id, (unsigned long long)e->round, e->model->dim,
           e->model->nnz, hex, len, file);
out:
    sfl__free(bytes);
    sfl_msg_export_free(e);
    return rc;
}

static void on_sigint(uv_signal_t *h, int signum)
{
    app_t *a = h->data;

    (void)signum;
    if (a->cli == NULL)
        exit(0); /* still connecting: nothing to tear down */
    ctl_client_interrupt(a->cli);
}

/* What watch printed for a job: its last line. */
typedef struct seen {
    uint64_t id;
    char line[WATCH_LINE];
} seen_t;

static seen_t *seen_find(seen_t **v, size_t *n, uint64_t id, int *fresh)
{
    seen_t *g;

    *fresh = 0;
    for (size_t i = 0; i < *n; i++)
        if ((*v)[i].id == id)
            return &(*v)[i];
    g = sfl__reallocarray(*v, *n + 1, sizeof(**v));
    if (g == NULL)
        return NULL;
    *v = g;
    memset(&g[*n], 0, sizeof(g[*n]));
    g[*n].id = id;
    *fresh = 1;
    return &g[(*n)++];
}

/* On a terminal the running jobs' lines are redrawn in place; otherwise a
 * line goes out whenever a running job's line changes (and once more when
 * it stops running), which suits logs and pipes. With a job id (a->id)
 * only that job is shown, and the watch ends once it stops running. */
static int cmd_watch(app_t *a)
{
    int tty = isatty(STDOUT_FILENO), drawn = 0, rc = 0, end = -1;
    seen_t *seen = NULL;
    size_t nseen = 0;

    for (;;) {
        sfl_job_list_t *l = NULL;
        int lines = 0, found = 0;

        if ((rc = list_jobs(a, &l)) != 0)
            break;
        if (tty && drawn > 0)
            printf("\033[%dA", drawn);
        for (uint32_t i = 0; i < l->n; i++) {
            const sfl_job_status_t *j = &l->jobs[i];
            char line[WATCH_LINE];
            int fresh;
            seen_t *s;

            if (a->id && j->job_id != a->id)
                continue;
            found = 1;
            ctl_watch_line(j, line, sizeof(line));
            if (a->id && j->state != SFL_JOB_RUNNING) {
                /* its last line, once, on a terminal too */
                end = j->state == SFL_JOB_FINISHED ? 0 : 1;
                if (tty)
                    printf("\r\033[K%s\n", line);
                else if ((s = seen_find(&seen, &nseen, j->job_id, &fresh)) == NULL ||
                         strcmp(s->line, line) != 0)
                    printf("%s\n", line);
                lines++;
                continue;
            }
            if (tty) {
                if (j->state == SFL_JOB_RUNNING) {
                    printf("\r\033[K%s\n", line);
                    lines++;
                }
                continue;
            }
            if ((s = seen_find(&seen, &nseen, j->job_id, &fresh)) == NULL) {
                sfl_msg_job_list_free(l);
                rc = local_failed("watch", SFL_ENOMEM);
                goto out;
            }
            if (strcmp(s->line, line) != 0 && (j->state == SFL_JOB_RUNNING || !fresh))
                printf("%s\n", line);
            snprintf(s->line, sizeof(s->line), "%s", line);
        }
        if (a->id && !found) {
            sfl_msg_job_list_free(l);
            fprintf(stderr, PROG ": NOT_FOUND: no job %llu\n", (unsigned long long)a->id);
            rc = 1;
            goto out;
        }
        if (tty && lines == 0) {
            printf("\r\033[Kno running job\n");
            lines = 1;
        }
        if (tty)
            printf("\033[J");
        drawn = lines;
        fflush(stdout);
        sfl_msg_job_list_free(l);
        if (end >= 0) {
            rc = end;
            goto out;
        }
        if (ctl_client_sleep(a->cli, WATCH_MS) < 0)
            break;
    }
    /* Ctrl-C (rpc returns -1, sleep -ECANCELED) is a normal end. */
    if (rc < 0)
        rc = 0;
out:
    sfl__free(seen);
    return rc;
}

typedef struct cmd {
    const char *w1, *w2; /* the command's words; w2 may be NULL */
    int nargs;           /* operands after the words */
    int id;              /* args[0] is a job id */
    int (*run)(app_t *a);
} cmd_t;

static const cmd_t cmds[] = {
    {"status", NULL, 0, 0, cmd_status},
    {"agents", NULL, 0, 0, cmd_agents},
    {"jobs", NULL, 0, 0, cmd_jobs},
    {"job", "create", 1, 0, cmd_job_create},
    {"job", "pause", 1, 1, cmd_job_pause},
    {"job", "resume", 1, 1, cmd_job_resume},
    {"job", "cancel", 1, 1, cmd_job_cancel},
    {"model", "export", 2, 1, cmd_model_export},
    {"watch", NULL, 0, 0, cmd_watch},
    {"watch", NULL, 1, 1, cmd_watch},
};

/* The entry whose words and operand count match (a command may have one
 * entry per count: watch, watch ID). */
static const cmd_t *find_cmd(char **words, int n, app_t *a)
{
    const cmd_t *named = NULL;

    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        const cmd_t *c = &cmds[i];
        int nw = c->w2 ? 2 : 1;

        if (n < nw || strcmp(words[0], c->w1) != 0 || (c->w2 && strcmp(words[1], c->w2) != 0))
            continue;
        named = c;
        if (n - nw != c->nargs)
            continue;
        a->args = words + nw;
        return c;
    }
    if (named)
        usage_error("wrong number of operands for", named->w2 ? named->w2 : named->w1);
    usage_error("unknown command", n > 0 ? words[0] : NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    static app_t app;
    char *words[MAX_WORDS + 1];
    const char *config = NULL;
    const cmd_t *cmd;
    int nwords = 0, rc;

    ctl_config_default(&app.cfg);
    /* The file first, so that flags override it wherever they appear. */
    for (int i = 1; i < argc; i++) {
        char key[64];
        const char *v;

        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            puts(PROG " " COORD_VERSION);
            return 0;
        }
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        flag_key(argv[i] + 2, key, sizeof(key), &v);
        if (v == NULL && ++i >= argc)
            usage_error("missing value for", argv[i - 1]);
        if (strcmp(key, "config") == 0)
            config = v ? v : argv[i];
    }
    if (config != NULL) {
        if (ctl_config_load(&app.cfg, config) < 0)
            usage_error("config", sfl_last_error());
    } else if (getenv("HOME") != NULL) {
        char path[CTL_PATH_MAX];

        snprintf(path, sizeof(path), "%s/.config/sfl/sflctl.ini", getenv("HOME"));
        if (access(path, F_OK) == 0 && ctl_config_load(&app.cfg, path) < 0)
            usage_error("config", sfl_last_error());
    }
    for (int i = 1; i < argc; i++) {
        char key[64];
        const char *v;

        if (strncmp(argv[i], "--", 2) != 0) {
            if (nwords == MAX_WORDS)
                usage_error("too many operands", NULL);
            words[nwords++] = argv[i];
            continue;
        }
        flag_key(argv[i] + 2, key, sizeof(key), &v);
        if (v == NULL)
            v = argv[++i];
        if (strcmp(key, "config") != 0 && ctl_config_set(&app.cfg, key, v) < 0)
            usage_error(sfl_last_error(), NULL);
    }
    words[nwords] = NULL;
    cmd = find_cmd(words, nwords, &app);
    /* Everything the command needs from its operands is checked before the
     * first byte goes out. */
    if (cmd->id && ctl_parse_id(app.args[0], &app.id) < 0)
        usage_error(sfl_last_error(), NULL);
    if (cmd->run == cmd_job_create && ctl_job_load(app.args[0], &app.spec) < 0)
        usage_error("job file", sfl_last_error());
    if (ctl_config_check(&app.cfg) < 0)
        usage_error(sfl_last_error(), NULL);

    if (sodium_init() < 0) {
        fprintf(stderr, PROG ": libsodium failed to initialise\n");
        return 1;
    }
    /* Writes to a peer that went away must fail, not kill the tool. */
    signal(SIGPIPE, SIG_IGN);
    app.loop = uv_default_loop();
    if (cmd->run == cmd_watch) {
        uv_signal_init(app.loop, &app.sigint);
        app.sigint.data = &app;
        uv_signal_start(&app.sigint, on_sigint, SIGINT);
        app.sig_on = 1;
    }
    rc = cmd->run(&app);
    ctl_client_free(app.cli);
    if (app.sig_on)
        uv_close((uv_handle_t *)&app.sigint, NULL);
    uv_run(app.loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(app.loop);
    return rc < 0 ? 1 : rc;
}

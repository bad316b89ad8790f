/* sflctl: the operator's command line for the coordinator's Admin service.
 * Flags and sflctl.ini, one command per run, then the calls; the pieces
 * live in ctl/ (ctl.h): config.c, jobfile.c, client.c, print.c, export.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "ctl.h"
#include "sfl/core/alloc.h"
#include "sfl/core/version.h"
#include "sfl/net/grpc.h"
#include "sfl/net/grpcconn.h"

#define PROG "sflctl"
#define WATCH_MS 500
#define WATCH_LINE 512 /* name, round and a waiting reason of up to 255 */

static const char usage_text[] =
    "usage: " PROG " [OPTIONS] COMMAND\n"
    "Talks to the coordinator's Admin service (gRPC, mutual TLS) with an admin\n"
    "certificate.\n"
    "\n"
    "Commands:\n"
    "  status                     coordinator counters and every job\n"
    "  fleet                      the round master that leads (epoch, holder,\n"
    "                             since when), every master sharing the store\n"
    "                             (leader or standby, epoch, ms since seen,\n"
    "                             stale) and the front-ends attached\n"
    "  agents                     known agents (connected or not)\n"
    "  jobs                       every job and its current round\n"
    "  job create FILE            create the job of FILE's [job NAME] section\n"
    "                             (keys as in coordinator.ini)\n"
    "  job pause ID               stop scheduling rounds (the open attempt is\n"
    "                             abandoned and retried on resume)\n"
    "  job resume ID              continue from the last committed round\n"
    "  job cancel ID              stop for good\n"
    "  job history ID             per-round CSV of the committed rounds: round,\n"
    "                             objective (train loss), test_accuracy or\n"
    "                             test_mse (agents' held-out rows), nnz, bytes,\n"
    "                             accepted and selected agents, wall time,\n"
    "                             personal_accuracy (personalized algorithms),\n"
    "                             privacy ledger (private vertical jobs),\n"
    "                             support_churn (horizontal jobs);\n"
    "                             n/a where the job kind has no such value\n"
    "  model export ID FILE [--format text|libsvm|npy|spcodec] [--round N]\n"
    "                             write the last committed model (--round N: the\n"
    "                             model round N committed, while its checkpoint is\n"
    "                             kept: the coordinator's keep_checkpoints) to FILE\n"
    "                             atomically: text (default; '# ' header with\n"
    "                             job, round, dimension, nnz, then 'index value'\n"
    "                             lines, 1-based), libsvm (one line '0 i:v ...',\n"
    "                             1-based), npy (dense float64, NumPy .npy 1.0)\n"
    "                             or spcodec (the bytes the model hash covers)\n"
    "  job release ID AGENT       let agent AGENT (its id, as agents shows) be\n"
    "                             selected for job ID again after a round named\n"
    "                             it a culprit and quarantined it (refused for\n"
    "                             an agent not quarantined in that job)\n"
    "  agent revoke NAME|FINGERPRINT\n"
    "                             revoke for good the certificate agent NAME is\n"
    "                             bound to, or the one with that SHA-256 (64 hex\n"
    "                             digits, sfl-pki fingerprint): its connections\n"
    "                             close, it is refused from then on, and the\n"
    "                             agent may join with a new certificate and its\n"
    "                             own identity key; the coordinator's certificate\n"
    "                             and the one sflctl uses cannot be revoked\n"
    "  watch [ID]                 live view of the running jobs' rounds (every\n"
    "                             500 ms; Ctrl-C quits); with ID only that job,\n"
    "                             until it stops running: exit status 0 once it\n"
    "                             finished, 1 if it is paused, failed or cancelled\n"
    "\n"
    "Options (also keys of section [sflctl] of the config file; flags win):\n"
    "  --config FILE              INI file (default ~/.config/sfl/sflctl.ini if it\n"
    "                             exists)\n";

/* after the [sflctl] keys (ctl_config_keys) */
static const char usage_tail[] =
    "  --format FORMAT            model export's format (not a config key): text,\n"
    "                             libsvm, npy or spcodec\n"
    "  --round N                  model export's round (not a config key)\n"
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
    const char *const *args; /* the command's operands */
    uint64_t id;
    uint64_t agent;          /* job release */
    ctl_format_t format;     /* model export --format */
    const char *format_name; /* its name, "text" by default */
    uint64_t round;          /* model export --round; 0: the last committed */
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
    fprintf(stderr, PROG ": %s: %s\n", what, sfl_error_message(rc));
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

static int cmd_fleet(app_t *a)
{
    ctl_result_t r;
    sfl_fleet_t *f = NULL;
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_fleet_req_pack(&req, &len)) < 0)
        return local_failed("Fleet", rc);
    if ((rc = rpc(a, "Fleet", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_fleet_unpack(r.resp, r.len, NULL, &f);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed("Fleet", rc);
    ctl_print_fleet(stdout, f, unix_ms());
    sfl_msg_fleet_free(f);
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

static int cmd_agent_revoke(app_t *a)
{
    const char *what = a->args[0];
    sfl_revoke_t m, r;
    ctl_result_t res;
    uint8_t *req = NULL;
    size_t len, n = 0;
    char hex[2 * SFL_MSG_HASH_BYTES + 1];
    int rc;

    memset(&m, 0, sizeof(m));
    if (strlen(what) == 2 * SFL_MSG_HASH_BYTES &&
        sodium_hex2bin(m.fingerprint, sizeof(m.fingerprint), what, strlen(what), NULL, &n,
                       NULL) == 0 &&
        n == sizeof(m.fingerprint))
        m.has_fingerprint = 1;
    else
        snprintf(m.agent, sizeof(m.agent), "%s", what);
    if ((rc = sfl_msg_revoke_req_pack(&m, &req, &len)) < 0)
        return local_failed("RevokeCertificate", rc);
    if ((rc = rpc(a, "RevokeCertificate", req, len, &res)) != 0)
        return rc;
    rc = sfl_msg_revoke_reply_unpack(res.resp, res.len, NULL, &r);
    ctl_result_clear(&res);
    if (rc < 0)
        return reply_failed("RevokeCertificate", rc);
    sodium_bin2hex(hex, sizeof(hex), r.fingerprint, sizeof(r.fingerprint));
    printf("revoked certificate %s (agent %s); %u connection%s closed\n", hex,
           r.agent[0] ? r.agent : "-", r.closed, r.closed == 1 ? "" : "s");
    return 0;
}

static int cmd_job_release(app_t *a)
{
    sfl_release_t m = {.job_id = a->id, .agent_id = a->agent}, r;
    ctl_result_t res;
    uint8_t *req = NULL;
    size_t len;
    int rc;

    if ((rc = sfl_msg_release_req_pack(&m, &req, &len)) < 0)
        return local_failed("ReleaseAgent", rc);
    if ((rc = rpc(a, "ReleaseAgent", req, len, &res)) != 0)
        return rc;
    rc = sfl_msg_release_reply_unpack(res.resp, res.len, NULL, &r);
    ctl_result_clear(&res);
    if (rc < 0)
        return reply_failed("ReleaseAgent", rc);
    printf("released agent %llu in job %llu (quarantined for: %s)\n",
           (unsigned long long)r.agent_id, (unsigned long long)r.job_id, r.reason);
    return 0;
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

    if ((rc = sfl_msg_export_req_pack(a->id, a->round, &req, &len)) < 0)
        return local_failed("ExportModel", rc);
    if ((rc = rpc(a, "ExportModel", req, len, &r)) != 0)
        return rc;
    rc = sfl_msg_export_unpack(r.resp, r.len, NULL, &e);
    ctl_result_clear(&r);
    if (rc < 0)
        return reply_failed("ExportModel", rc);
    if ((rc = ctl_model_render(e, a->format, &bytes, &len)) < 0 ||
        (rc = ctl_write_atomic(file, bytes, len)) < 0) {
        rc = local_failed("model export", rc);
        goto out;
    }
    ctl_hex(e->model_hash, SFL_MSG_HASH_BYTES, hex);
    printf("job %llu round %llu: dimension %u, nnz %u, hash %s, %zu bytes -> %s (%s)\n",
           (unsigned long long)e->job_id, (unsigned long long)e->round, e->model->dim,
           e->model->nnz, hex, len, file, a->format_name);
    if (e->moments != NULL) {
        /* the model's inputs are standardised: the transform beside it */
        char mfile[4096];

        sfl__free(bytes);
        bytes = NULL;
        if ((size_t)snprintf(mfile, sizeof(mfile), "%s.moments", file) >= sizeof(mfile)) {
            rc = local_failed("model export", sfl__fail(SFL_EINVAL, "file name too long"));
            goto out;
        }
        if ((rc = ctl_moments_render(e, &bytes, &len)) < 0 ||
            (rc = ctl_write_atomic(mfile, bytes, len)) < 0) {
            rc = local_failed("model export", rc);
            goto out;
        }
        printf("standardized: moments of %.17g rows, eps %.17g -> %s\n", e->moments[0],
               e->standardize_eps, mfile);
    }
out:
    sfl__free(bytes);
    sfl_msg_export_free(e);
    return rc;
}

/* JobHistory page by page; the CSV goes out as the pages come. */
static int cmd_job_history(app_t *a)
{
    uint64_t after = 0;
    int64_t t0 = 0;
    int first = 1;

    for (;;) {
        ctl_result_t r;
        sfl_job_history_t *h = NULL;
        uint8_t *req = NULL;
        size_t len;
        int rc, more;

        if ((rc = sfl_msg_history_req_pack(a->id, after, &req, &len)) < 0)
            return local_failed("JobHistory", rc);
        if ((rc = rpc(a, "JobHistory", req, len, &r)) != 0)
            return rc;
        rc = sfl_msg_history_unpack(r.resp, r.len, NULL, &h);
        ctl_result_clear(&r);
        if (rc < 0)
            return reply_failed("JobHistory", rc);
        if (first && h->n > 0)
            t0 = h->rounds[0].opened_ms;
        ctl_print_history(stdout, h, first, t0);
        first = 0;
        more = h->more && h->n > 0 && h->rounds[h->n - 1].round > after;
        if (h->n > 0)
            after = h->rounds[h->n - 1].round;
        sfl_msg_history_free(h);
        if (!more)
            break;
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, PROG ": job history: writing the CSV: %s\n", strerror(errno));
        return 1;
    }
    return 0;
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

/* By ctl_cmd_t. */
static int (*const run[])(app_t *a) = {
    [CTL_CMD_STATUS] = cmd_status,
    [CTL_CMD_AGENTS] = cmd_agents,
    [CTL_CMD_JOBS] = cmd_jobs,
    [CTL_CMD_JOB_CREATE] = cmd_job_create,
    [CTL_CMD_JOB_PAUSE] = cmd_job_pause,
    [CTL_CMD_JOB_RESUME] = cmd_job_resume,
    [CTL_CMD_JOB_CANCEL] = cmd_job_cancel,
    [CTL_CMD_JOB_HISTORY] = cmd_job_history,
    [CTL_CMD_MODEL_EXPORT] = cmd_model_export,
    [CTL_CMD_WATCH] = cmd_watch,
    [CTL_CMD_AGENT_REVOKE] = cmd_agent_revoke,
    [CTL_CMD_JOB_RELEASE] = cmd_job_release,
    [CTL_CMD_FLEET] = cmd_fleet,
};

int main(int argc, char **argv)
{
    static app_t app;
    static ctl_args_t args;
    char path[CTL_PATH_MAX] = "";
    int rc, loaded = 0;

    ctl_config_default(&app.cfg);
    if (ctl_args_parse(argc, argv, &args) < 0)
        usage_error(sfl_last_error(), NULL);
    if (args.help) {
        size_t n;
        const sfl_cfg_key_t *k = ctl_config_keys(&n);

        fputs(usage_text, stdout);
        sfl_cfg_usage(stdout, k, n);
        fputs(usage_tail, stdout);
        return 0;
    }
    if (args.version) {
        puts(PROG " " SFL_VERSION);
        return 0;
    }
    /* The file first, so that flags override it wherever they appear. */
    if (args.config != NULL) {
        if (ctl_config_load(&app.cfg, args.config) < 0)
            usage_error(sfl_last_error(), NULL);
        loaded = 1;
    } else if (getenv("HOME") != NULL) {
        snprintf(path, sizeof(path), "%s/" CTL_DEFAULT_CONFIG, getenv("HOME"));
        if (access(path, F_OK) == 0) {
            if (ctl_config_load(&app.cfg, path) < 0)
                usage_error(sfl_last_error(), NULL);
            loaded = 1;
        }
    } else
        snprintf(path, sizeof(path), "$HOME/" CTL_DEFAULT_CONFIG " (HOME is not set)");
    if (ctl_args_apply(&args, &app.cfg) < 0)
        usage_error(sfl_last_error(), NULL);
    app.args = args.operands;
    app.id = args.id;
    app.agent = args.agent;
    app.format_name = args.format ? args.format : "text";
    app.round = args.round;
    if (ctl_format_parse(app.format_name, &app.format) < 0)
        usage_error(sfl_last_error(), NULL);
    /* Everything the command needs from its operands is checked before the
     * first byte goes out. */
    if (args.cmd == CTL_CMD_JOB_CREATE && ctl_job_load(app.args[0], &app.spec) < 0)
        usage_error(sfl_last_error(), NULL);
    if (ctl_config_check(&app.cfg) < 0) {
        /* no file at all: say where sflctl looked and how to give one */
        if (!loaded && args.nflags == 0) {
            fprintf(stderr,
                    PROG ": no configuration: no --config FILE and no file at %s.\n"
                    "Pass --config FILE (an [sflctl] section with coordinator, ca, cert, key;\n"
                    "docs/configuration.md), put one at that path, or give --ca, --cert and\n"
                    "--key as flags.\nTry '" PROG " --help'.\n",
                    path);
            return 2;
        }
        usage_error(sfl_last_error(), NULL);
    }

    if (sodium_init() < 0) {
        fprintf(stderr, PROG ": libsodium failed to initialise\n");
        return 1;
    }
    /* Writes to a peer that went away must fail, not kill the tool. */
    signal(SIGPIPE, SIG_IGN);
    app.loop = uv_default_loop();
    if (args.cmd == CTL_CMD_WATCH) {
        uv_signal_init(app.loop, &app.sigint);
        app.sigint.data = &app;
        uv_signal_start(&app.sigint, on_sigint, SIGINT);
        app.sig_on = 1;
    }
    rc = run[args.cmd](&app);
    if (app.sig_on) {
        /* The command is over: a late SIGINT must not turn its end into a
         * kill. timeout(1) sends one to the process and one to its group,
         * and the second may come after closing the handle restored the
         * default action. Blocked, it stays pending until exit. */
        sigset_t block;

        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, NULL);
    }
    ctl_client_free(app.cli);
    if (app.sig_on)
        uv_close((uv_handle_t *)&app.sigint, NULL);
    uv_run(app.loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(app.loop);
    return rc < 0 ? 1 : rc;
}

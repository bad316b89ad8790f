/* sfl-agent: flags, agent.ini and signals around agent.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "agent.h"
#include "config.h"
#include "sfl/core/alloc.h"
#include "sfl/core/log.h"
#include "sfl/core/suggest.h"

static const char usage_text[] =
    "usage: sfl-agent [--config FILE] [--KEY VALUE ...]\n"
    "Joins a federation: connects out to the coordinator over mutual TLS,\n"
    "trains on local data when selected and submits signed updates.\n"
    "Logs one line per event to stderr, as the coordinator does (ts=... level=...\n"
    "event=... key=value ...). SIGTERM or SIGINT stop it.\n"
    "\n"
    "  --config FILE              INI file with an [agent] section; its keys are the\n"
    "                             options below without dashes; flags win\n"
    "  --coordinator HOST:PORT[,HOST:PORT...]\n"
    "                             coordinator address ([v6]:port for IPv6); required.\n"
    "                             A list (up to 8: a fleet's masters or front-ends):\n"
    "                             after a failed connect or a lost session the agent\n"
    "                             backs off and tries the next address\n"
    "  --server_name NAME         name the coordinator certificate must carry\n"
    "                             (default: the HOST of the address connected to)\n"
    "  --ca FILE                  federation CA certificate (PEM); required\n"
    "  --cert FILE                this agent's certificate (PEM); required\n"
    "  --key FILE                 its private key (PEM); required\n"
    "  --coordinator_pk HEX       the coordinator's Ed25519 task-signing key, 64 hex\n"
    "                             digits (pinned); required\n"
    "  --data SPEC                libsvm:FILE, csv:FILE (label in the first column) or\n"
    "                             idx:IMAGES,LABELS (IDX files such as MNIST's, gzip or not);\n"
    "                             required\n"
    "  --eval_fraction F          hold out this fraction of data's rows (rounded\n"
    "                             down; split seeded from the identity key) and\n"
    "                             report the task model's accuracy (logistic,\n"
    "                             softmax) or MSE (lsq) on them (default 0: none)\n"
    "  --eval_file SPEC           held-out rows from libsvm:FILE, csv:FILE or idx:IMAGES,LABELS\n"
    "                             instead (excludes --eval_fraction)\n"
    "  --state_dir DIR            identity key (made at first start, mode 0600)\n"
    "                             and client state (default /var/lib/sfl-agent)\n"
    "  --conditions A,B           conditions reported to the coordinator, e.g.\n"
    "                             mains_power,unmetered (at most 8)\n"
    "  --backoff_min_ms MS        first reconnect delay (default 500)\n"
    "  --backoff_max_ms MS        longest reconnect delay (default 60000)\n"
    "  --connect_timeout_ms MS    connect + TLS handshake, and control calls\n"
    "                             (default 10000)\n"
    "  --heartbeat_interval_ms MS longest gap between heartbeats; the coordinator's\n"
    "                             interval wins when shorter (default 10000; the\n"
    "                             older name --heartbeat_ms still works)\n"
    "  --block FIRST:COUNT        vertical data: data holds problem columns\n"
    "                             FIRST..FIRST+COUNT-1 (1-based) of samples that\n"
    "                             other agents hold other columns of\n"
    "  --ids_file FILE            with --block: the sample id of each row of data,\n"
    "                             one per line (rows are aligned by these ids)\n"
    "  --max_epsilon E            refuse a private job that would spend more than\n"
    "                             epsilon E of this agent's data (default 0: the\n"
    "                             job's own budget is the limit)\n"
    "  --dp_test_noise 0|1        tests only: privacy noise from the job's seed, as\n"
    "                             sfl-sim draws it; NOT private (default 0)\n"
    "  --secagg_min_cohort N      take part in no secure aggregation round of a\n"
    "                             cohort below N (default 3)\n"
    "  --secagg_min_threshold T   nor one whose threshold is below T (default 2;\n"
    "                             above half the cohort always)\n"
    "  --secagg_min_degree K      nor one whose mask graph gives each client\n"
    "                             fewer than K neighbours (default 16)\n"
    "  --secagg_max_colluders C   nor one whose threshold t is not above\n"
    "                             (n + C) / 2 for its cohort n: safe against a\n"
    "                             coordinator colluding with C agents (default\n"
    "                             n/3: t >= floor(2n / 3) + 1)\n"
    "  --secagg_test_stop S       tests only: the agent kills itself (SIGKILL)\n"
    "                             when it would answer secure aggregation stage\n"
    "                             S (1..5), as a client that drops out (default 0)\n"
    "  --secagg_test_weight W     tests only: a hostile member, scaling its secure\n"
    "                             aggregation input as if its weight were W\n"
    "                             (default 0: its public weight, as it must)\n"
    "  --log_level LEVEL          debug, info, warn or error (default info: start,\n"
    "                             connection changes, each job's start and end,\n"
    "                             warnings; debug adds a few lines per round)\n"
    "  --version                  print the version\n"
    "  -h, --help                 this text\n"
    "\n"
    "Dashes and underscores are interchangeable in flags (--state-dir), and\n"
    "--KEY=VALUE works too. Exit status: 0 after a clean stop, 2 for a bad flag,\n"
    "value or config file, 1 when the agent cannot start (data, identity key,\n"
    "TLS files), 3 when it gave up on an error that retrying cannot fix (a\n"
    "certificate refused either way or revoked, server_name not in the\n"
    "coordinator's certificate, a coordinator key other than coordinator_pk);\n"
    "connection failures and timeouts are retried with backoff.\n";

static void usage_error(const char *what, const char *detail)
{
    fprintf(stderr, "sfl-agent: %s%s%s\nTry 'sfl-agent --help'.\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(2);
}

/* "--state-dir" -> "state_dir" into key; *value points at an "=VALUE" part. */
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

static agent_ctx_t *the_agent;
static uv_signal_t sig_term, sig_int;

static void on_stopped(agent_ctx_t *a, void *ud)
{
    (void)a;
    (void)ud;
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    sfl_log(SFL_LOG_INFO, "signal", "signal=%s", signum == SIGTERM ? "TERM" : "INT");
    agent_stop(the_agent, on_stopped, NULL);
}

int main(int argc, char **argv)
{
    agent_config_t cfg;
    uv_loop_t *loop;
    int rc;

    /* The task's model, its decoded copy and the update are the size of the
     * model every round: keep freed ones for the next round (alloc.h). */
    (void)sfl_alloc_keep_freed(64u << 20);
    agent_config_default(&cfg);
    /* The file first, so that flags override it wherever they appear. */
    for (int i = 1; i < argc; i++) {
        char key[64];
        const char *v;

        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--version") == 0) {
            puts(AGENT_VERSION);
            return 0;
        }
        if (strncmp(argv[i], "--", 2) != 0) {
            char what[96];

            snprintf(what, sizeof(what), "%s '%.60s'",
                     argv[i][0] == '-' ? "unknown option" : "unexpected argument", argv[i]);
            usage_error(what, NULL);
        }
        flag_key(argv[i] + 2, key, sizeof(key), &v);
        if (strcmp(key, "config") != 0 && !agent_config_known(key)) {
            sfl_suggest_t sg;

            sfl_suggest_init(&sg, "--", key);
            agent_config_suggest(&sg);
            sfl_suggest_add(&sg, "config");
            sfl_suggest_add(&sg, "version");
            sfl_suggest_add(&sg, "help");
            fprintf(stderr, "sfl-agent: unknown option '%.*s'%s\nTry 'sfl-agent --help'.\n",
                    (int)strcspn(argv[i], "="), argv[i], sfl_suggest_text(&sg));
            exit(2);
        }
        if (v == NULL && ++i >= argc) {
            char what[96];

            snprintf(what, sizeof(what), "option '%s' needs a value", argv[i - 1]);
            usage_error(what, NULL);
        }
        if (strcmp(key, "config") == 0 && agent_config_load(&cfg, v ? v : argv[i]) < 0)
            usage_error(sfl_last_error(), NULL);
    }
    for (int i = 1; i < argc; i++) {
        char key[64];
        const char *v;

        flag_key(argv[i] + 2, key, sizeof(key), &v);
        if (v == NULL)
            v = argv[++i];
        if (strcmp(key, "config") != 0 && agent_config_set(&cfg, key, v) < 0)
            usage_error(sfl_last_error(), NULL);
    }
    if (agent_config_check(&cfg) < 0)
        usage_error(sfl_last_error(), NULL);
    sfl_log_set_level(cfg.log_level);

    /* Writes to a peer that went away must fail, not kill the agent. */
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    if ((rc = agent_new(loop, &cfg, &the_agent)) < 0) {
        char q[600];

        sfl_log(SFL_LOG_ERROR, "start_failed", "error=%s",
                sfl_log_quote(sfl_error_message(rc), q, sizeof(q)));
        return 1;
    }
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    agent_set_fatal(the_agent, on_stopped, NULL);
    if ((rc = agent_start(the_agent)) < 0) {
        char q[300];

        sfl_log(SFL_LOG_ERROR, "start_failed", "error=%s",
                sfl_log_quote(uv_strerror(rc), q, sizeof(q)));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    rc = agent_failed(the_agent);
    agent_free(the_agent);
    (void)uv_loop_close(loop);
    return rc < 0 ? AGENT_EXIT_FATAL : 0;
}

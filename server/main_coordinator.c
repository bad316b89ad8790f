/* sfl-coordinator: configuration (coordinator.ini and flags), signals,
 * the service manager's notifications (notify.h), --backup and the loop;
 * everything else is coord.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "coord.h"
#include "coordfile.h"
#include "fleet/frontend.h"
#include "http/metrics.h"
#include "job/spec.h"
#include "notify.h"
#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"
#include "sfl/core/error.h"
#include "sfl/core/suggest.h"
#include "sfl/net/transport.h"
#include "store/store.h"

#define PROG "sfl-coordinator"
#define MAX_FLAGS 64

static void usage(FILE *f)
{
    size_t n;
    const sfl_cfg_key_t *k = coord_config_keys(&n);

    fprintf(f,
            "usage: " PROG " [--config FILE] [--KEY VALUE ...] [--check | --backup DEST]\n"
            "Runs the federation coordinator: agents join over mutual TLS (gRPC),\n"
            "jobs run rounds of signed sparse updates, state lives in SQLite (or PostgreSQL).\n"
            "With role = master (a PostgreSQL store) only the process that holds the\n"
            "store's leader lock listens and runs rounds; a second master on the same\n"
            "store waits as the standby and takes over when the leader dies.\n"
            "With --role frontend it only holds agents and relays their calls to the\n"
            "master(s) given by --master (docs/operations.md, Front-ends).\n\n"
            "  --config FILE              coordinator.ini: section [coordinator] with the\n"
            "                             keys below, and one [job NAME] section per job\n"
            "  --check                    check the configuration and jobs, and that cert,\n"
            "                             key and ca can be read, the key matches the\n"
            "                             certificate, which verifies against the CA now\n"
            "                             and has the coordinator role; then exit\n"
            "  --public-key               print the coordinator's Ed25519 public key (what\n"
            "                             agents pin as coordinator_pk), creating the\n"
            "                             identity in state_dir if needed, then exit\n"
            "  --backup DEST              copy the SQLite store (state_dir/coordinator.db\n"
            "                             or the store key's) to DEST with SQLite's online\n"
            "                             backup (safe while the coordinator runs), verify\n"
            "                             the copy, then exit; a PostgreSQL store is\n"
            "                             refused: back it up with pg_dump\n"
            "  --version                  print the version\n"
            "  -h, --help                 this text\n\n"
            "[coordinator] keys, also flags (--max-agents N or --max_agents N; the\n"
            "command line wins over the file):\n");
    sfl_cfg_usage(f, k, n);
    fprintf(f,
            "\n[job NAME] keys (docs/configuration.md) with their defaults; a job is\n"
            "created once, when its name is new, and then lives in the state database:\n");
    coord_job_spec_help(f);
    fprintf(f, "  classes               labels      if given, the number of labels\n"
               "  and the chosen algorithm's parameters (docs/algorithms.md):\n");
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        fprintf(f, "    %-18s", (*a)->name);
        for (const sfl_param_def_t *d = (*a)->params; d && d->name; d++)
            fprintf(f, " %s", d->name);
        fputc('\n', f);
    }
    fprintf(f,
            "\nSignals: SIGTERM or SIGINT stop gracefully (no new connections, rounds\n"
            "with a quorum are committed, others recorded failed); SIGHUP re-reads the\n"
            "file: log_level, and jobs whose names are new are created.\n"
            "Under systemd (Type=notify) it sends READY=1 once listening, RELOADING=1\n"
            "and READY=1 around a reload, STOPPING=1, and WATCHDOG=1 at half of\n"
            "WatchdogSec, on $NOTIFY_SOCKET.\n\n"
            "Exit status: 0 after a graceful stop, 2 for a bad flag, value or file,\n"
            "1 for a runtime failure (certificates, state directory, address in use),\n"
            "3 when a round master stopped because another one leads (fenced: start it\n"
            "again, it waits as the standby).\n");
}

/* What one reading of the file (and the flags) gives. */
typedef coord_file_t loaded_t;

typedef struct {
    const char *key, *value;
} flag_t;

typedef struct {
    const char *config;
    flag_t flags[MAX_FLAGS];
    size_t nflags;
    int check, public_key;
    const char *backup; /* --backup DEST */
} args_t;

/* --key-with-dashes or --key_with_underscores into the config key. */
static int flag_key(const char *arg, char *key, size_t cap, const char **eq)
{
    size_t n;

    *eq = strchr(arg, '=');
    n = *eq ? (size_t)(*eq - arg) : strlen(arg);
    if (n == 0 || n >= cap)
        return -1;
    for (size_t i = 0; i < n; i++)
        key[i] = arg[i] == '-' ? '_' : arg[i];
    key[n] = '\0';
    return 0;
}

/* Applies the flags; all config keys are strings or numbers, never bare. */
static int apply_flags(coord_config_t *cfg, const args_t *a)
{
    int rc;

    for (size_t i = 0; i < a->nflags; i++)
        if ((rc = coord_config_set(cfg, a->flags[i].key, a->flags[i].value)) < 0)
            return rc;
    return 0;
}

static int flag_given(const args_t *a, const char *key)
{
    for (size_t i = 0; i < a->nflags; i++)
        if (strcmp(a->flags[i].key, key) == 0)
            return 1;
    return 0;
}

static char keybuf[MAX_FLAGS][64];

static int parse_args(int argc, char **argv, args_t *a)
{
    size_t n;
    const sfl_cfg_key_t *k = coord_config_keys(&n);

    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq, *value;
        char key[64] = "";
        size_t j;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(arg, "--version") == 0) {
            printf(PROG " %s\n", COORD_VERSION);
            exit(0);
        }
        if (strcmp(arg, "--check") == 0) {
            a->check = 1;
            continue;
        }
        if (strcmp(arg, "--public-key") == 0 || strcmp(arg, "--public_key") == 0) {
            a->public_key = 1;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, PROG ": error: %s '%s'\nTry '" PROG " --help'.\n",
                    arg[0] == '-' ? "unknown option" : "unexpected argument", arg);
            return -1;
        }
        j = n;
        if (flag_key(arg + 2, key, sizeof(key), &eq) == 0)
            for (j = 0; j < n && strcmp(k[j].key, key) != 0; j++)
                ;
        if (j == n && strcmp(key, "config") != 0 && strcmp(key, "backup") != 0) {
            static const char *const own[] = {"config", "backup", "check", "public-key",
                                              "version", "help"};
            sfl_suggest_t sg;

            sfl_suggest_init(&sg, "--", key);
            for (size_t q = 0; q < n; q++)
                sfl_suggest_add(&sg, k[q].key);
            for (size_t q = 0; q < sizeof(own) / sizeof(own[0]); q++)
                sfl_suggest_add(&sg, own[q]);
            fprintf(stderr, PROG ": error: unknown option '%.*s'%s\nTry '" PROG " --help'.\n",
                    (int)strcspn(arg, "="), arg, sfl_suggest_text(&sg));
            return -1;
        }
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else {
            fprintf(stderr, PROG ": error: option '%s' needs a value\n", arg);
            return -1;
        }
        if (strcmp(key, "config") == 0) {
            a->config = value;
            continue;
        }
        if (strcmp(key, "backup") == 0) {
            a->backup = value;
            continue;
        }
        if (a->nflags == MAX_FLAGS) {
            fprintf(stderr, PROG ": error: too many options\n");
            return -1;
        }
        snprintf(keybuf[a->nflags], sizeof(keybuf[0]), "%s", key);
        a->flags[a->nflags] = (flag_t){keybuf[a->nflags], value};
        a->nflags++;
    }
    return 0;
}

/* The configuration: defaults, then the file, then the flags. */
static int load_all(const args_t *a, loaded_t *l)
{
    int rc;

    coord_config_default(&l->cfg);
    if (a->config && (rc = coord_file_load(l, a->config)) < 0)
        return rc;
    if ((rc = apply_flags(&l->cfg, a)) < 0)
        return rc;
    /* printing the key and a backup need only state_dir */
    return a->public_key || a->backup ? 0 : coord_config_check(&l->cfg);
}

typedef struct {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t watchdog; /* WATCHDOG=1 pings, when systemd asks for them */
    coord_t *co;
    fe_t *fe;                /* role = frontend: instead of co */
    coord_metrics_srv_t *fe_metrics; /* ... and its /metrics (metrics_listen) */
    args_t args;
    loaded_t *l; /* the configuration started with (its jobs) */
    int stopped, watchdog_on;
    int status;  /* 2: a job of the configuration could not be created */
} app_t;

static app_t app;

/* Tells the service manager (a no-op without $NOTIFY_SOCKET). A failure is
 * logged, never fatal: systemd's own start and watchdog timeouts act on a
 * message that did not arrive. A failing watchdog ping is logged once. */
static void notify(coord_notify_t what, const char *status)
{
    static int watchdog_warned;
    char q[400];

    if (coord_notify(what, status) == 0 || (what == COORD_NOTIFY_WATCHDOG && watchdog_warned))
        return;
    watchdog_warned |= what == COORD_NOTIFY_WATCHDOG;
    coord_log(COORD_LOG_WARN, "notify_failed", "error=%s",
              coord_log_quote(sfl_last_error(), q, sizeof(q)));
}

/* From a loop timer: a ping proves the loop turns, which is what a hung
 * coordinator would stop doing. */
static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    notify(COORD_NOTIFY_WATCHDOG, NULL);
}

static void watchdog_start(app_t *a)
{
    uint64_t us = 0, ms;
    char q[400];

    if (coord_notify_watchdog_usec(&us) < 0) {
        coord_log(COORD_LOG_WARN, "watchdog", "error=%s",
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        return;
    }
    if (us == 0)
        return;
    ms = us / 2000 ? us / 2000 : 1; /* half the interval, as sd_watchdog_enabled(3) advises */
    uv_timer_init(&a->loop, &a->watchdog);
    a->watchdog.data = a;
    uv_timer_start(&a->watchdog, on_watchdog, ms, ms);
    a->watchdog_on = 1;
    coord_log(COORD_LOG_INFO, "watchdog", "interval_ms=%llu", (unsigned long long)ms);
}

static void stopped(coord_t *c, void *ud)
{
    app_t *a = ud;

    (void)c;
    a->stopped = 1;
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sighup, NULL);
    if (a->watchdog_on)
        uv_close((uv_handle_t *)&a->watchdog, NULL);
}

/* Serving (at the start, or when a standby master takes over): the
 * configuration's jobs are created, then the service manager hears READY.
 * -1 if a job cannot be created (shutting down, exit status 2). */
static int serving(app_t *a)
{
    char ready[320];

    for (size_t i = 0; i < a->l->njobs; i++)
        if (coord_add_jobdef(a->co, a->l->jobs[i], NULL, NULL) < 0) {
            fprintf(stderr, PROG ": error: job %s: %s\n", a->l->names[i], sfl_last_error());
            coord_shutdown(a->co, 0, stopped, a);
            return -1;
        }
    /* Listening, state recovered, config jobs created: what READY=1
     * promises (coord_new or the takeover does the first two). */
    snprintf(ready, sizeof(ready), "running; listening on %.200s (port %d)", a->l->cfg.listen,
             coord_port(a->co));
    notify(COORD_NOTIFY_READY, ready);
    return 0;
}

static void on_leading(coord_t *c, void *ud)
{
    app_t *a = ud;

    (void)c;
    if (serving(a) < 0)
        a->status = 2;
}

/* Another round master leads: whatever this one holds may not be written
 * (its writes are fenced), so it exits at once; its supervisor starts it
 * again, as a standby. */
static void on_lost(coord_t *c, int rc, void *ud)
{
    (void)c;
    (void)rc;
    (void)ud;
    notify(COORD_NOTIFY_STOPPING, "fenced: another round master leads");
    fflush(stderr);
    /* _exit: no atexit handlers racing the writer thread, which may be
     * inside libpq or OpenSSL right now; nothing of ours needs flushing. */
    _exit(COORD_EXIT_FENCED);
}

static void fe_stopped(void *ud)
{
    stopped(NULL, ud);
}

static void on_stop_signal(uv_signal_t *s, int signum)
{
    app_t *a = s->data;

    coord_log(COORD_LOG_INFO, "signal", "signal=%s", signum == SIGTERM ? "TERM" : "INT");
    if (a->fe != NULL) {
        notify(COORD_NOTIFY_STOPPING, "stopping: closing agents' connections");
        coord_metrics_srv_close(a->fe_metrics, NULL, NULL);
        a->fe_metrics = NULL;
        fe_shutdown(a->fe, fe_stopped, a);
        return;
    }
    notify(COORD_NOTIFY_STOPPING, "stopping: committing rounds that have a quorum");
    coord_shutdown(a->co, 0, stopped, a);
}

/* SIGHUP: what can change without a restart. Listener, certificates and
 * limits stay as started; log_level changes and new jobs are created. The
 * service manager sees RELOADING=1 and, whatever the outcome, READY=1 with
 * the outcome as status (a failed reload keeps the running configuration). */
static void on_reload(uv_signal_t *s, int signum)
{
    app_t *a = s->data;
    loaded_t *l = NULL;
    coord_log_level_t lvl;
    char status[320];
    size_t added = 0;
    int rc;

    (void)signum;
    notify(COORD_NOTIFY_RELOADING, "reloading the configuration");
    if (a->args.config == NULL) {
        coord_log(COORD_LOG_INFO, "reload", "config=none");
        snprintf(status, sizeof(status), "running; reload: no configuration file");
        goto out;
    }
    if ((l = calloc(1, sizeof(*l))) == NULL) {
        coord_log(COORD_LOG_ERROR, "reload_failed", "error=\"out of memory\"");
        snprintf(status, sizeof(status), "running; reload failed: out of memory");
        goto out;
    }
    if ((rc = load_all(&a->args, l)) < 0) {
        char q[400];

        snprintf(status, sizeof(status), "running; reload failed: %s", sfl_last_error());
        coord_log(COORD_LOG_ERROR, "reload_failed", "error=%s",
                  coord_log_quote(sfl_last_error(), q, sizeof(q)));
        goto out;
    }
    if (!flag_given(&a->args, "log_level") && coord_log_level_parse(l->cfg.log_level, &lvl) == 0)
        coord_log_set_level(lvl);
    for (size_t i = 0; i < l->njobs; i++) {
        int created = 0;

        if (coord_add_jobdef(a->co, l->jobs[i], NULL, &created) < 0) {
            char q[400];

            coord_log(COORD_LOG_ERROR, "reload_job_failed", "name=%s error=%s", l->names[i],
                      coord_log_quote(sfl_last_error(), q, sizeof(q)));
        }
        added += (size_t)created;
    }
    coord_log(COORD_LOG_INFO, "reload", "config=%s jobs_added=%zu log_level=%s",
              a->args.config, added, l->cfg.log_level);
    snprintf(status, sizeof(status), "running; reloaded %.200s: %zu jobs added", a->args.config,
             added);
out:
    if (l) {
        coord_file_clear(l);
        free(l);
    }
    notify(COORD_NOTIFY_READY, status);
}

/* --backup DEST: from a separate process, while the daemon may run. */
static int run_backup(const coord_config_t *cfg, const char *dest)
{
    char db[sizeof(cfg->store) + COORD_PATH_MAX + 32];
    uint64_t bytes = 0;
    int rc;

    /* the configured store; PostgreSQL is refused (SFL_EUNSUP: pg_dump) */
    if ((rc = coord_store_spec(cfg, db, sizeof(db))) < 0 ||
        (rc = coord_store_backup_path(db, dest, &bytes)) < 0) {
        fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
        return 1;
    }
    {
        coord_store_backend_t b;
        const char *path = db;

        /* the file's path, as operators name it (only SQLite gets here) */
        if (coord_store_spec_parse(db, &b, &path) < 0)
            path = db;
        printf("backup of %s written to %s: %llu bytes, integrity_check ok\n", path, dest,
               (unsigned long long)bytes);
    }
    return 0;
}

/* A front-end has nothing to reload (it keeps no jobs; its log level is
 * its start's): the signal is only acknowledged. */
static void on_reload_frontend(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    coord_log(COORD_LOG_INFO, "reload", "role=frontend changed=none "
              "reason=\"a front-end reloads nothing: restart it to change its configuration\"");
    notify(COORD_NOTIFY_READY, "front-end; nothing to reload");
}

/* SIGTERM and SIGINT stop, SIGHUP runs reload; the watchdog starts. */
static void signals_start(uv_signal_cb reload)
{
    uv_signal_init(&app.loop, &app.sigterm);
    uv_signal_init(&app.loop, &app.sigint);
    uv_signal_init(&app.loop, &app.sighup);
    app.sigterm.data = app.sigint.data = app.sighup.data = &app;
    uv_signal_start(&app.sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&app.sigint, on_stop_signal, SIGINT);
    uv_signal_start(&app.sighup, reload, SIGHUP);
    watchdog_start(&app);
}

/* A front-end's /metrics: what fe_stats counts (docs/operations.md,
 * "Front-ends"). */
static int render_fe_metrics(coord_text_t *t, void *ud)
{
    app_t *a = ud;
    fe_stats_t st;

    if (a->fe == NULL)
        return SFL_EINVAL;
    fe_stats(a->fe, &st);
    coord_text_family(t, "sfl_fe_agents", "gauge", "Agents connected to this front-end.");
    coord_text_printf(t, "sfl_fe_agents %llu\n", (unsigned long long)st.agents);
    coord_text_family(t, "sfl_fe_master_connected", "gauge",
                      "1 while the connection to a round master is open.");
    coord_text_printf(t, "sfl_fe_master_connected %d\n", st.master_connected ? 1 : 0);
    coord_text_family(t, "sfl_fe_relayed_calls_total", "counter",
                      "Agents' calls relayed to the master, by method.");
    for (size_t i = 0; i < FE_METHODS; i++)
        coord_text_printf(t, "sfl_fe_relayed_calls_total{method=\"%s\"} %llu\n",
                          fe_method_names[i], (unsigned long long)st.relayed[i]);
    coord_text_family(t, "sfl_fe_heartbeats_answered_total", "counter",
                      "Idle agents' heartbeats this front-end answered itself (a repeat of "
                      "one the master answered), not relayed.");
    coord_text_printf(t, "sfl_fe_heartbeats_answered_total %llu\n",
                      (unsigned long long)st.heartbeats_answered);
    coord_text_family(t, "sfl_fe_master_silent_total", "counter",
                      "Master connections this front-end dropped because the master answered no "
                      "relayed call, nor its keepalive ping, for master_silent_ms.");
    coord_text_printf(t, "sfl_fe_master_silent_total %llu\n",
                      (unsigned long long)st.master_silent);
    coord_text_family(t, "sfl_fe_relay_failures_total", "counter",
                      "Agents' calls the front-end could not relay (no master, out of memory).");
    coord_text_printf(t, "sfl_fe_relay_failures_total %llu\n",
                      (unsigned long long)st.relay_failures);
    coord_text_family(t, "sfl_fe_models_fetched_total", "counter",
                      "Task models fetched from the master (Fleet.Model) and kept.");
    coord_text_printf(t, "sfl_fe_models_fetched_total %llu\n",
                      (unsigned long long)st.models_fetched);
    coord_text_family(t, "sfl_fe_model_bytes_total", "counter",
                      "Bytes of the task models fetched and kept.");
    coord_text_printf(t, "sfl_fe_model_bytes_total %llu\n", (unsigned long long)st.model_bytes);
    coord_text_family(t, "sfl_fe_model_mismatches_total", "counter",
                      "Models the master answered that were not the task's model_hash.");
    coord_text_printf(t, "sfl_fe_model_mismatches_total %llu\n",
                      (unsigned long long)st.model_mismatches);
    coord_text_family(t, "sfl_fe_join_refused_total", "counter",
                      "Joins refused by the front-end (no or a bad join_proof).");
    coord_text_printf(t, "sfl_fe_join_refused_total %llu\n", (unsigned long long)st.join_refused);
    return t->err;
}

static const coord_http_page_t fe_pages[] = {
    {"/metrics", "text/plain; version=0.0.4; charset=utf-8", NULL, render_fe_metrics},
};

/* role = frontend (fleet/frontend.h): no store, no identity, no jobs;
 * the agents' listener and a connection to a master. */
static int run_frontend(const coord_config_t *cfg)
{
    struct sockaddr_storage ss;
    coord_log_level_t lvl;
    fe_config_t fc;
    size_t n;
    int rc;

    if ((rc = coord_config_check(cfg)) < 0 || (rc = fe_master_list_check(cfg->master, &n)) < 0 ||
        (rc = coord_addr_parse(cfg->listen, &ss)) < 0) {
        fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
        return 2;
    }
    if (coord_log_level_parse(cfg->log_level, &lvl) == 0)
        coord_log_set_level(lvl);
    memset(&fc, 0, sizeof(fc));
    fc.listen = (const struct sockaddr *)&ss;
    fc.cert = cfg->cert;
    fc.key = cfg->key;
    fc.ca = cfg->ca;
    fc.master = cfg->master;
    fc.max_conns = cfg->max_conns;
    fc.max_handshakes = cfg->max_handshakes;
    fc.max_handshakes_per_ip = cfg->max_handshakes_per_ip;
    fc.max_message = cfg->max_message;
    fc.max_streams = cfg->max_streams;
    fc.max_buffered = cfg->max_buffered;
    fc.max_buffered_total = cfg->max_buffered_total;
    fc.handshake_timeout_ms = cfg->handshake_timeout_ms;
    fc.idle_timeout_ms = cfg->idle_timeout_ms;
    fc.body_timeout_ms = cfg->body_timeout_ms;
    fc.fold_flush_ms = cfg->fold_flush_ms;
    fc.master_silent_ms = cfg->master_silent_ms;
    if (cfg->metrics_listen[0] && strcmp(cfg->metrics_listen, "off") != 0) {
        struct sockaddr_storage ms;

        if ((rc = coord_addr_parse(cfg->metrics_listen, &ms)) < 0 ||
            (rc = coord_metrics_srv_new(&app.loop, (struct sockaddr *)&ms, NULL, fe_pages,
                                        sizeof(fe_pages) / sizeof(fe_pages[0]), &app,
                                        &app.fe_metrics)) < 0) {
            fprintf(stderr, PROG ": error: metrics_listen %s: %s\n", cfg->metrics_listen,
                    rc == UV_EADDRINUSE ? "address already in use" : sfl_error_message(rc));
            return 1;
        }
        coord_log(COORD_LOG_INFO, "metrics", "role=frontend listen=%s port=%d",
                  cfg->metrics_listen, coord_metrics_srv_port(app.fe_metrics));
    }
    if ((rc = fe_new(&app.loop, &fc, &app.fe)) < 0) {
        fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
        coord_metrics_srv_close(app.fe_metrics, NULL, NULL);
        app.fe_metrics = NULL;
        uv_run(&app.loop, UV_RUN_DEFAULT);
        return 1;
    }
    signals_start(on_reload_frontend);
    {
        char ready[320];

        snprintf(ready, sizeof(ready), "front-end; listening on %.200s (port %d)", cfg->listen,
                 fe_port(app.fe));
        notify(COORD_NOTIFY_READY, ready);
    }
    uv_run(&app.loop, UV_RUN_DEFAULT);
    fe_free(app.fe);
    uv_run(&app.loop, UV_RUN_DEFAULT);
    return app.stopped ? 0 : 1;
}

int main(int argc, char **argv)
{
    static loaded_t l;
    int rc, status = 1;

    /* Tasks, updates, aggregates and checkpoints are the size of a job's
     * model every round: keep freed ones for the next round (alloc.h). */
    (void)sfl_alloc_keep_freed(256u << 20);
    if (parse_args(argc, argv, &app.args) < 0)
        return 2;
    if ((rc = load_all(&app.args, &l)) < 0) {
        fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
        coord_file_clear(&l);
        return 2;
    }
    for (size_t i = 0; i < l.njobs; i++)
        if ((rc = coord_jobdef_check(l.jobs[i])) < 0) {
            fprintf(stderr, PROG ": error: %s: [job %s]: %s\n", app.args.config, l.names[i],
                    sfl_last_error());
            coord_file_clear(&l);
            return 2;
        }
    if (app.args.public_key) {
        uint8_t pk[32];
        char hex[65];

        if ((rc = coord_identity_public(l.cfg.state_dir, pk)) < 0) {
            fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
            coord_file_clear(&l);
            return 1;
        }
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", pk[i]);
        printf("%s\n", hex);
        coord_file_clear(&l);
        return 0;
    }
    if (app.args.backup) {
        coord_file_clear(&l);
        return run_backup(&l.cfg, app.args.backup);
    }
    if (app.args.check) {
        size_t nm;

        if (strcmp(l.cfg.role, COORD_ROLE_FRONTEND) == 0 &&
            (rc = fe_master_list_check(l.cfg.master, &nm)) < 0) {
            fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
            coord_file_clear(&l);
            return 2;
        }
        /* What the TLS listener will need, checked now rather than by the
         * first agent that connects. */
        if ((rc = sfl_tls_check_identity(l.cfg.cert, l.cfg.key, l.cfg.ca,
                                         SFL_ROLE_COORDINATOR)) < 0) {
            fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
            coord_file_clear(&l);
            return 1;
        }
        printf("configuration ok: %zu job sections; %s (role coordinator) matches %s and "
               "verifies against %s\n",
               l.njobs, l.cfg.cert, l.cfg.key, l.cfg.ca);
        coord_file_clear(&l);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    if (uv_loop_init(&app.loop) != 0) {
        fprintf(stderr, PROG ": error: cannot create the event loop\n");
        coord_file_clear(&l);
        return 1;
    }
    if (strcmp(l.cfg.role, COORD_ROLE_FRONTEND) == 0) {
        status = run_frontend(&l.cfg);
        (void)uv_loop_close(&app.loop);
        coord_file_clear(&l);
        return status;
    }
    if ((rc = coord_new(&app.loop, &l.cfg, &app.co)) < 0) {
        fprintf(stderr, PROG ": error: %s\n", sfl_error_message(rc));
        goto out;
    }
    signals_start(on_reload);
    app.l = &l;
    {
        static const coord_leader_cbs_t lcbs = {on_leading, on_lost, &app};

        coord_set_leader_cbs(app.co, &lcbs);
    }
    if (coord_serving_now(app.co)) {
        if (serving(&app) < 0) {
            status = 2;
            goto run;
        }
    } else {
        notify(COORD_NOTIFY_READY, "standby: another round master leads");
    }
    status = 0;
run:
    uv_run(&app.loop, UV_RUN_DEFAULT);
    if (!app.stopped && status == 0)
        status = 1;
    if (app.status != 0)
        status = app.status;
out:
    coord_free(app.co);
    /* Handles that closed themselves (listener, metrics) finish here. */
    uv_run(&app.loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&app.loop);
    coord_file_clear(&l);
    return status;
}

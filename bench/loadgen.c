/* Load generator for bench/bench_load.sh: many real agents in one process.
 *
 *   loadgen --pki DIR --agents N --coordinator HOST:PORT[,HOST:PORT...] --coordinator-pk HEX
 *           --data-dir DIR --shards S --work DIR --seconds T [--rate R]
 *           [--procs P] [--dests K] [--heartbeat-ms H] [--log 0|1]
 *
 * Each agent is client-agent's agent_ctx_t (agent.h) on one shared uv loop, so
 * every one does what sfl-agent does: mutual TLS, Join, Subscribe, train
 * the task it is given on the libuv thread pool, seal, sign and submit.
 * Certificates: sfl-pki takes ~90 ms per agent (three openssl processes),
 * too slow for a thousand, so the agent certificates are issued here with
 * the same profile (O=sfl, OU=agent, CN=load-NNNNN, P-256, clientAuth)
 * from DIR/ca.key and DIR/ca.crt made by `sfl-pki init DIR`. Agent i trains
 * on DIR/client-(i mod S).svm. Agents start at R per second (default 500)
 * so the coordinator is not handed a thousand handshakes in one tick (R is
 * the total over all processes). With P > 1 the agents are split over P
 * forked processes (agent i in process i mod P), so that one load
 * generator's own loop is not what limits thousands of agents; each
 * process is sent SIGTERM if this one dies; each process issues its own
 * agents' certificates. With K > 1 (an IPv4 HOST only) agent i connects
 * to HOST with i mod K added to its last byte (127.0.0.1, 127.0.0.2, ...):
 * loopback offers ~28,000 ephemeral ports (net.ipv4.ip_local_port_range)
 * per destination address and port, so 100,000 agents need K >= 4 and a
 * coordinator listening on 0.0.0.0. With a list of L addresses
 * (HOST:PORT,HOST:PORT,...: front-ends, bench/bench_fleet.sh) agent i
 * connects to the (i mod L)-th only (not --dests).
 * With H the agents' heartbeat_interval_ms is H (agent.ini's key; the
 * coordinator's heartbeat_interval_ms must be at least H for it to hold).
 * With --log 1 each process writes its agents' warnings (sfl-agent's log
 * lines at level warn: disconnected, coordinator_silent, stream_ended...)
 * to DIR/agents-K.log (K: the process's index), the reasons behind the
 * backoffs count.
 * Once the agents start, stderr
 * gets "loadgen: start_ms=M" (M: UTC milliseconds of the day, as the
 * coordinator's log timestamps). After T seconds every agent stops
 * gracefully and one line is printed, summed over the processes (rss_kb:
 * the sum of their peak RSS):
 *   loadgen agents=... joined=... tasks=... trained=... accepted=...
 *           rejected=... connect_fails=... backoffs=... rss_kb=... cpu_s=...
 * (cpu_s: user + system seconds, summed too). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <uv.h>

#include "agent.h"
#include "config.h"

typedef struct {
    const char *pki, *coordinator, *coordinator_pk, *data_dir, *work;
    unsigned agents, shards, seconds, rate, procs, dests, heartbeat_ms, log;
} opts_t;

/* What one process reports; summed over the processes. */
typedef struct {
    unsigned long long joined, tasks, trained, accepted, rejected, fails, backoffs, rss_kb,
        cpu_ms;
} tally_t;

static opts_t o = {.rate = 500, .procs = 1, .dests = 1};
static unsigned char coord_ip[4]; /* o.coordinator's address and port when o.dests > 1 */
static unsigned coord_port;
static agent_ctx_t **agents;
static unsigned first, step = 1; /* this process runs agents first, first + step, ... */
static FILE *agent_log;           /* --log: this process's agents' warnings */
static unsigned started, stopped;
static uv_timer_t start_timer, end_timer;
static uv_signal_t sig_term, sig_int;

/* ---- certificates ---------------------------------------------------------- */

static int add_ext(X509 *ca, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *e;
    int ok;

    X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
    e = X509V3_EXT_nconf_nid(NULL, &ctx, nid, value);
    if (e == NULL)
        return -1;
    ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? 0 : -1;
}

static int write_pem(const char *path, mode_t mode, EVP_PKEY *k, X509 *x)
{
    FILE *f = fopen(path, "w");
    int ok;

    if (f == NULL)
        return -1;
    (void)chmod(path, mode);
    ok = k ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL)
           : PEM_write_X509(f, x);
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* DIR/agent-i.{key,crt}: the profile of `sfl-pki agent`, signed by the CA. */
static int issue(X509 *ca, EVP_PKEY *cakey, unsigned i)
{
    char cn[32], path[1100];
    unsigned char serial[16];
    EVP_PKEY *k = NULL;
    X509 *x = NULL;
    BIGNUM *bn = NULL;
    X509_NAME *n;
    int rc = -1;

    snprintf(cn, sizeof(cn), "load-%05u", i);
    if ((k = EVP_EC_gen("P-256")) == NULL || (x = X509_new()) == NULL ||
        RAND_bytes(serial, sizeof(serial)) != 1)
        goto out;
    serial[0] &= 0x7f; /* positive */
    if ((bn = BN_bin2bn(serial, sizeof(serial), NULL)) == NULL ||
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) == NULL || !X509_set_version(x, 2) ||
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 7) == NULL || !X509_set_pubkey(x, k))
        goto out;
    n = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"sfl", -1, -1,
                                    0) ||
        !X509_NAME_add_entry_by_txt(n, "OU", MBSTRING_ASC, (const unsigned char *)"agent", -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                    0) ||
        !X509_set_issuer_name(x, X509_get_subject_name(ca)))
        goto out;
    if (add_ext(ca, x, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
        add_ext(ca, x, NID_key_usage, "critical,digitalSignature") < 0 ||
        add_ext(ca, x, NID_ext_key_usage, "clientAuth") < 0 ||
        add_ext(ca, x, NID_subject_key_identifier, "hash") < 0 ||
        add_ext(ca, x, NID_authority_key_identifier, "keyid") < 0 ||
        !X509_sign(x, cakey, EVP_sha256()))
        goto out;
    snprintf(path, sizeof(path), "%s/agent-%u.key", o.work, i);
    if (write_pem(path, 0600, k, NULL) < 0)
        goto out;
    snprintf(path, sizeof(path), "%s/agent-%u.crt", o.work, i);
    if (write_pem(path, 0644, NULL, x) < 0)
        goto out;
    rc = 0;
out:
    BN_free(bn);
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

static int issue_all(void)
{
    char path[1100];
    EVP_PKEY *cakey = NULL;
    X509 *ca = NULL;
    FILE *f;
    int rc = -1;

    snprintf(path, sizeof(path), "%s/ca.key", o.pki);
    if ((f = fopen(path, "r")) == NULL)
        goto out;
    cakey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    snprintf(path, sizeof(path), "%s/ca.crt", o.pki);
    if ((f = fopen(path, "r")) == NULL)
        goto out;
    ca = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (ca == NULL || cakey == NULL)
        goto out;
    for (unsigned i = first; i < o.agents; i += step)
        if (issue(ca, cakey, i) < 0)
            goto out;
    rc = 0;
out:
    if (rc < 0)
        fprintf(stderr, "loadgen: cannot issue certificates from %s (%s)\n", o.pki, path);
    X509_free(ca);
    EVP_PKEY_free(cakey);
    return rc;
}

/* ---- agents ------------------------------------------------------------------ */

#define MAX_LIST 64
static const char *list[MAX_LIST]; /* o.coordinator's addresses when a list */
static unsigned nlist;

/* Agent i's coordinator address: o.coordinator, the (i mod L)-th of a list
 * of L, or with o.dests > 1 its IPv4 address with i mod K added to the
 * last byte. */
static const char *dest_of(unsigned i, char *buf, size_t cap)
{
    if (nlist > 1)
        return list[i % nlist];
    if (o.dests <= 1)
        return o.coordinator;
    snprintf(buf, cap, "%u.%u.%u.%u:%u", coord_ip[0], coord_ip[1], coord_ip[2],
             coord_ip[3] + i % o.dests, coord_port);
    return buf;
}

static int make_agent(uv_loop_t *loop, unsigned i)
{
    char v[1100], key[32];
    char dest[32];
    agent_config_t c;
    struct {
        const char *k, *v;
    } kv[] = {
        {"coordinator", dest_of(i, dest, sizeof(dest))}, {"server_name", "127.0.0.1"},
        {"coordinator_pk", o.coordinator_pk}, {"backoff_min_ms", "200"},
        {"backoff_max_ms", "2000"}, {"log_level", "warn"},
    };

    agent_config_default(&c);
    for (size_t j = 0; j < sizeof(kv) / sizeof(kv[0]); j++)
        if (agent_config_set(&c, kv[j].k, kv[j].v) < 0)
            goto fail;
    snprintf(v, sizeof(v), "%u", o.heartbeat_ms);
    if (o.heartbeat_ms && agent_config_set(&c, "heartbeat_interval_ms", v) < 0)
        goto fail;
    snprintf(v, sizeof(v), "%s/ca.crt", o.pki);
    if (agent_config_set(&c, "ca", v) < 0)
        goto fail;
    snprintf(v, sizeof(v), "%s/agent-%u.crt", o.work, i);
    if (agent_config_set(&c, "cert", v) < 0)
        goto fail;
    snprintf(v, sizeof(v), "%s/agent-%u.key", o.work, i);
    if (agent_config_set(&c, "key", v) < 0)
        goto fail;
    snprintf(v, sizeof(v), "%s/state-%u", o.work, i);
    if (agent_config_set(&c, "state_dir", v) < 0)
        goto fail;
    snprintf(v, sizeof(v), "libsvm:%s/client-%u.svm", o.data_dir, i % o.shards);
    if (agent_config_set(&c, "data", v) < 0 || agent_new(loop, &c, &agents[i]) < 0)
        goto fail;
    agent_set_log(agents[i], agent_log);
    return 0;
fail:
    snprintf(key, sizeof(key), "agent %u", i);
    fprintf(stderr, "loadgen: %s: %s\n", key, sfl_last_error());
    return -1;
}

/* The agents of this process. */
static unsigned mine(void)
{
    return first < o.agents ? (o.agents - first + step - 1) / step : 0;
}

static agent_ctx_t *agent_at(unsigned n)
{
    return agents[first + n * step];
}

static void on_start_tick(uv_timer_t *t)
{
    /* this process's share of the rate per second, in 20 ms ticks: by the
     * k-th tick r * k / 50 agents have started (at least one a second) */
    static unsigned long long ticks;
    unsigned long long r = o.rate / o.procs ? o.rate / o.procs : 1;
    unsigned long long due = r * ++ticks / 50;
    unsigned n = due > started ? (unsigned)(due - started) : 0;

    if (ticks == 1) {
        struct timeval tv;

        gettimeofday(&tv, NULL);
        if (first == 0)
            fprintf(stderr, "loadgen: start_ms=%lld\n",
                    (long long)(tv.tv_sec % 86400) * 1000 + tv.tv_usec / 1000);
    }
    for (; n > 0 && started < mine(); n--, started++) {
        int rc = agent_start(agent_at(started));

        if (rc < 0)
            fprintf(stderr, "loadgen: agent %u: start: %s\n", first + started * step,
                    uv_strerror(rc));
    }
    if (started == mine())
        uv_timer_stop(t);
}

static void close_all(void)
{
    uv_close((uv_handle_t *)&start_timer, NULL);
    uv_close((uv_handle_t *)&end_timer, NULL);
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
}

static void on_stopped(agent_ctx_t *a, void *ud)
{
    (void)a;
    (void)ud;
    if (++stopped == started)
        close_all();
}

static void stop_all(void)
{
    uv_timer_stop(&start_timer);
    uv_timer_stop(&end_timer);
    uv_signal_stop(&sig_term);
    uv_signal_stop(&sig_int);
    if (started == 0) {
        close_all();
        return;
    }
    for (unsigned i = 0; i < started; i++)
        agent_stop(agent_at(i), on_stopped, NULL);
}

static void on_end(uv_timer_t *t)
{
    (void)t;
    stop_all();
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    (void)signum;
    stop_all();
}

static long rss_kb(const char *field)
{
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, strlen(field)) == 0)
            v = strtol(line + strlen(field), NULL, 10);
    fclose(f);
    return v;
}

/* User + system time of this process, certificates included. */
static unsigned long long cpu_ms(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) < 0)
        return 0;
    return (unsigned long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (unsigned long long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static int usage(void)
{
    fprintf(stderr, "usage: loadgen --pki DIR --agents N --coordinator HOST:PORT[,HOST:PORT...] "
                    "--coordinator-pk HEX --data-dir DIR --shards S --work DIR --seconds T "
                    "[--rate R] [--procs P] [--dests K] [--heartbeat-ms H] [--log 0|1]\n");
    return 2;
}

static void print_tally(FILE *f, const tally_t *t)
{
    fprintf(f,
            "loadgen agents=%u joined=%llu tasks=%llu trained=%llu accepted=%llu "
            "rejected=%llu connect_fails=%llu backoffs=%llu rss_kb=%llu cpu_s=%.1f\n",
            o.agents, t->joined, t->tasks, t->trained, t->accepted, t->rejected, t->fails,
            t->backoffs, t->rss_kb, (double)t->cpu_ms / 1000);
}

/* Runs this process's agents for o.seconds into *t. */
static int run_agents(tally_t *t)
{
    uv_loop_t *loop = uv_default_loop();

    memset(t, 0, sizeof(*t));
    if (issue_all() < 0)
        return -1;
    if (o.log) {
        char path[1100];

        snprintf(path, sizeof(path), "%s/agents-%u.log", o.work, first);
        if ((agent_log = fopen(path, "w")) == NULL) {
            fprintf(stderr, "loadgen: %s: %s\n", path, strerror(errno));
            return -1;
        }
        setvbuf(agent_log, NULL, _IOLBF, 0);
    }
    for (unsigned n = 0; n < mine(); n++)
        if (make_agent(loop, first + n * step) < 0)
            return -1;
    uv_timer_init(loop, &start_timer);
    uv_timer_init(loop, &end_timer);
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    /* The loop's clock was read when it was made, before the agents were
     * (seconds for thousands): T counts from now. */
    uv_update_time(loop);
    uv_timer_start(&start_timer, on_start_tick, 0, 20);
    uv_timer_start(&end_timer, on_end, (uint64_t)o.seconds * 1000, 0);
    if (first == 0)
        fprintf(stderr, "loadgen: %u agents ready in %u process(es), starting at %u/s\n",
                o.agents, o.procs, o.rate);
    uv_run(loop, UV_RUN_DEFAULT);
    for (unsigned n = 0; n < mine(); n++) {
        const agent_stats_t *s = agent_stats(agent_at(n));

        t->joined += agent_joined_id(agent_at(n)) != 0;
        t->tasks += s->tasks;
        t->trained += s->trained;
        t->accepted += s->acks[SFL_ACK_ACCEPTED];
        for (int v = SFL_ACK_LATE; v <= SFL_ACK_REJECTED; v++)
            t->rejected += s->acks[v];
        t->fails += s->connect_fails;
        t->backoffs += s->backoffs;
    }
    t->rss_kb = (unsigned long long)rss_kb("VmHWM:");
    t->cpu_ms = cpu_ms();
    return 0;
}

/* Forks the processes (agents k, k + P, ...), each writing its tally to a
 * pipe, and sums them. */
static int run_procs(tally_t *sum)
{
    pid_t *pids = calloc(o.procs, sizeof(*pids));
    int fd[2], rc = 0;

    memset(sum, 0, sizeof(*sum));
    if (pids == NULL || pipe(fd) < 0) {
        free(pids);
        return -1;
    }
    step = o.procs;
    for (unsigned k = 0; k < o.procs; k++) {
        if ((pids[k] = fork()) < 0) {
            rc = -1;
            break;
        }
        if (pids[k] == 0) {
            tally_t t;

            close(fd[0]);
            (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
            first = k;
            if (run_agents(&t) < 0 || write(fd[1], &t, sizeof(t)) != (ssize_t)sizeof(t))
                _exit(1);
            _exit(0);
        }
    }
    close(fd[1]);
    for (unsigned k = 0; k < o.procs && pids[k] > 0; k++) {
        tally_t t;
        int st;

        if (read(fd[0], &t, sizeof(t)) == (ssize_t)sizeof(t)) {
            sum->joined += t.joined;
            sum->tasks += t.tasks;
            sum->trained += t.trained;
            sum->accepted += t.accepted;
            sum->rejected += t.rejected;
            sum->fails += t.fails;
            sum->backoffs += t.backoffs;
            sum->rss_kb += t.rss_kb;
            sum->cpu_ms += t.cpu_ms;
        }
        if (waitpid(pids[k], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = -1;
    }
    close(fd[0]);
    free(pids);
    return rc;
}

int main(int argc, char **argv)
{
    tally_t t;
    int rc = 1;

    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];

        if (strcmp(k, "--pki") == 0)
            o.pki = v;
        else if (strcmp(k, "--coordinator") == 0)
            o.coordinator = v;
        else if (strcmp(k, "--coordinator-pk") == 0)
            o.coordinator_pk = v;
        else if (strcmp(k, "--data-dir") == 0)
            o.data_dir = v;
        else if (strcmp(k, "--work") == 0)
            o.work = v;
        else if (strcmp(k, "--agents") == 0)
            o.agents = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--shards") == 0)
            o.shards = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--seconds") == 0)
            o.seconds = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--rate") == 0)
            o.rate = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--procs") == 0)
            o.procs = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--dests") == 0)
            o.dests = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--heartbeat-ms") == 0)
            o.heartbeat_ms = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(k, "--log") == 0)
            o.log = strcmp(v, "1") == 0;
        else
            return usage();
    }
    if (argc % 2 == 0 || !o.pki || !o.coordinator || !o.coordinator_pk || !o.data_dir ||
        !o.work || o.agents == 0 || o.shards == 0 || o.seconds == 0 || o.rate == 0 ||
        o.procs == 0 || o.procs > o.agents || o.dests == 0 || o.dests > 254)
        return usage();
    if (strchr(o.coordinator, ',')) {
        /* a list: split a copy at the commas (kept for the process's life) */
        char *copy = strdup(o.coordinator), *save = NULL;

        if (!copy)
            return 1;
        for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
            if (nlist == MAX_LIST || o.dests > 1 || !strchr(a, ':')) {
                fprintf(stderr, "loadgen: --coordinator: at most %d HOST:PORT, without "
                                "--dests\n", MAX_LIST);
                return 2;
            }
            list[nlist++] = a;
        }
        if (nlist < 2) {
            fprintf(stderr, "loadgen: --coordinator: an empty address in the list\n");
            return 2;
        }
    }
    if (o.dests > 1) {
        unsigned a, b, c, d;
        char tail;

        if (sscanf(o.coordinator, "%u.%u.%u.%u:%u%c", &a, &b, &c, &d, &coord_port, &tail) != 5 ||
            a > 255 || b > 255 || c > 255 || d + o.dests - 1 > 255 || coord_port == 0 ||
            coord_port > 65535) {
            fprintf(stderr, "loadgen: --dests %u needs an IPv4 --coordinator A.B.C.D:PORT "
                            "with D + %u below 256\n", o.dests, o.dests - 1);
            return 2;
        }
        coord_ip[0] = (unsigned char)a;
        coord_ip[1] = (unsigned char)b;
        coord_ip[2] = (unsigned char)c;
        coord_ip[3] = (unsigned char)d;
    }
    /* as sfl-agent: a write to a connection the coordinator dropped (a
     * kill -9) is an error to handle, not a signal that ends the process */
    signal(SIGPIPE, SIG_IGN);
    if ((agents = calloc(o.agents, sizeof(*agents))) == NULL)
        goto out;
    if (o.procs > 1 ? run_procs(&t) < 0 : run_agents(&t) < 0)
        goto out;
    print_tally(stdout, &t);
    rc = 0;
out:
    for (unsigned i = 0; agents && i < o.agents; i++)
        agent_free(agents[i]);
    free(agents);
    if (o.procs == 1)
        (void)uv_loop_close(uv_default_loop());
    return rc;
}

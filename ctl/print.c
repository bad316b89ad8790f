/* The text sflctl prints: status, jobs, agents, a job's progress and
 * history, watch lines. */
#include "ctl.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sfl/algo/algo.h"

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

void ctl_print_fleet(FILE *f, const sfl_fleet_t *m, int64_t now_ms)
{
    char up[32];

    fprintf(f, "answering    %s%s\n", m->role,
            m->own_epoch ? " (leads)" : "");
    if (m->has_leader)
        fprintf(f, "leader       epoch %" PRIu64 ", %s, since %s\n", m->epoch, m->holder,
                duration(now_ms - m->since_ms, up, sizeof(up)));
    else
        fprintf(f, "leader       none (a single coordinator, or no master has led yet)\n");
    fprintf(f, "masters      %u\n", m->nmasters);
    if (m->nmasters > 0) {
        fprintf(f, "\n%-8s %6s %8s %-6s %s\n", "ROLE", "EPOCH", "SEEN_MS", "STATE", "HOLDER");
        for (uint32_t i = 0; i < m->nmasters; i++) {
            const sfl_fleet_master_t *r = &m->masters[i];
            char ep[24] = "-";

            if (r->epoch)
                snprintf(ep, sizeof(ep), "%" PRIu64, r->epoch);
            fprintf(f, "%-8s %6s %8" PRIu64 " %-6s %s\n", r->role, ep, r->seen_ago_ms,
                    r->stale ? "stale" : "live", r->holder);
        }
        fputc('\n', f);
    }
    fprintf(f, "front-ends   %u\n", m->n);
    if (m->n == 0)
        return;
    fprintf(f, "\n%-24s %-24s %8s %8s\n", "NAME", "ADDRESS", "AGENTS", "LAG_MS");
    for (uint32_t i = 0; i < m->n; i++)
        fprintf(f, "%-24s %-24s %8u %8" PRIu64 "\n", m->frontends[i].name,
                m->frontends[i].address[0] ? m->frontends[i].address : "-",
                m->frontends[i].agents, m->frontends[i].lag_ms);
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

/* Which round metrics a job has, from its algorithm and loss. Decided by
 * the algorithm, not by the values, so a personal model that gets every
 * row wrong still shows its 0. */
static sfl_metric_job_t metric_kind(const char *algorithm, const char *loss)
{
    const sfl_algo_t *a = sfl_algo_find(algorithm);
    sfl_metric_job_t k;

    k.classification = strcmp(loss, "lsq") != 0;
    k.personalized = k.classification && a != NULL && a->shape == SFL_SHAPE_PERSONALIZED &&
                     a->personal_model != NULL;
    k.vertical = a != NULL && a->shape == SFL_SHAPE_VERTICAL;
    return k;
}

const char *ctl_progress(const sfl_job_status_t *j, char *out, size_t cap)
{
    sfl_metric_job_t k = metric_kind(j->algorithm, j->loss);

    return sfl_metrics_job_progress(j, &k, out, cap);
}

/* The summary's own columns (not round metrics), each printed before the
 * metric it precedes in the CSV; r NULL: their names. */
static void own_columns(FILE *f, int id, const sfl_round_summary_t *r, int64_t t0_ms)
{
    if (id == SFL_METRIC_ID(bytes_down)) {
        if (r)
            fprintf(f, ",%" PRIu64, r->bytes_up);
        else
            fputs(",bytes_up", f);
    } else if (id == SFL_METRIC_ID(samples)) {
        if (r)
            fprintf(f, ",%u,%u", r->accepted, r->selected);
        else
            fputs(",accepted,selected", f);
    } else if (id == SFL_METRIC_ID(personal_accuracy)) {
        if (r)
            fprintf(f, ",%u,%" PRId64 ",%" PRId64, r->attempt, r->committed_ms - r->opened_ms,
                    r->committed_ms - t0_ms);
        else
            fputs(",attempt,round_ms,wall_ms", f);
    }
}

void ctl_print_history(FILE *f, const sfl_job_history_t *h, int header, int64_t t0_ms)
{
    sfl_metric_job_t k = metric_kind(h->algorithm, h->loss);

    /* The round metrics in sfl/wire/roundmetrics.def's order; new ones come
     * last, so scripts that read the columns by position still read the
     * same. */
    if (header) {
        fputs("round", f);
        for (int id = 0; id < SFL_METRIC_COUNT; id++) {
            own_columns(f, id, NULL, 0);
            fprintf(f, ",%s", sfl_metrics[id].csv);
        }
        fputc('\n', f);
    }
    for (uint32_t i = 0; i < h->n; i++) {
        const sfl_round_summary_t *r = &h->rounds[i];

        /* A cell is "n/a" where the value cannot exist for the job, empty
         * where it could but the round has none (a round committed before
         * schema 2 kept no metrics). A vertical job's objective is its
         * block holders' word where the broadcast is exactly the margins
         * A x (bcfw, dpbcfw unsketched and without noise); elsewhere nobody
         * holds A x (a sketch, noise) and the coordinator no labels: n/a
         * (docs/operations.md, "History"). */
        fprintf(f, "%" PRIu64, r->round);
        for (int id = 0; id < SFL_METRIC_COUNT; id++) {
            sfl_metric_state_t st = sfl_metric_state(id, &r->m, &k);

            own_columns(f, id, r, t0_ms);
            fputc(',', f);
            if (st == SFL_METRIC_NA)
                fputs("n/a", f);
            else if (st == SFL_METRIC_EMPTY)
                continue;
            else if (sfl_metrics[id].type == SFL_METRIC_F64)
                fprintf(f, sfl_metrics[id].fmt, sfl_metric_get(id, &r->m));
            else
                fprintf(f, "%" PRIu64, sfl_metric_get_u64(id, &r->m));
        }
        fputc('\n', f);
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

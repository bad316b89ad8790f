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

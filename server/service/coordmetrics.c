/* The coordinator's /metrics page (Prometheus text): counters, gauges and
 * histograms of its state, rendered on the loop for each request. */
#include "coord_int.h"
#include "service/coordmetrics.h"
#include "round/jobs.h"
#include "round/driver.h"
#include "round/suspect.h"
#include "service/admin.h"

#include <stdio.h>
#include <string.h>

static const char *const rj_names[RJ_COUNT] = {"not_selected", "truncated", "too_large",
                                               "decrypt", "bad_signature", "payload",
                                               "encoding", "out_of_bounds", "other"};

/* ---- metrics ------------------------------------------------------------------------ */

/* The labels of job j: job="ID",name="NAME" with the name escaped as the
 * exposition format wants (backslash, double quote). */
static const char *job_labels(const coord_job_t *j, char *out, size_t cap)
{
    size_t o = (size_t)snprintf(out, cap, "job=\"%llu\",name=\"", (unsigned long long)j->id);

    for (const char *c = j->spec.name; *c && o + 4 < cap; c++) {
        if (*c == '\\' || *c == '"')
            out[o++] = '\\';
        out[o++] = *c;
    }
    snprintf(out + o, cap - o, "\"");
    return out;
}

/* The job's own gauges: a line per job that has the value. */
enum { COMMITTED, RUNNING, ITER, EPS, EPS_RDP, EPS_BUDGET, PITERS, NFAM };

static void render_own(coord_text_t *t, const coord_t *co, int f)
{
    static const char *const fam[NFAM][2] = {
        {"sfl_job_committed_round", "Rounds committed, per job."},
        {"sfl_job_running",
         "1 while the job is running (not pending, paused, cancelled, finished or failed)."},
        {"sfl_job_iteration", "Vertical jobs: the iteration in progress."},
        {"sfl_job_privacy_epsilon_spent",
         "Private jobs: epsilon spent by the iterations released (paper's accounting; "
         "failed and interrupted attempts count in full)."},
        {"sfl_job_privacy_epsilon_spent_rdp",
         "Private jobs: the same by Renyi DP (docs/privacy.md)."},
        {"sfl_job_privacy_epsilon_budget", "Private jobs: the job's epsilon."},
        {"sfl_job_privacy_iterations", "Private jobs: iterations released."},
    };
    char lab[200];

    coord_text_family(t, fam[f][0], "gauge", fam[f][1]);
    for (size_t i = 0; i < co->njobs; i++) {
        const coord_job_t *j = co->jobs[i];
        sfl_job_status_t st = {0};
        sfl_metric_job_t k;
        double v;

        j->shape->status(j, &st);
        coord_job_metric_kind(j, &k);
        if (f == COMMITTED)
            v = (double)j->committed;
        else if (f == RUNNING)
            v = j->state == SFL_JOB_RUNNING;
        else if (f == ITER && k.vertical)
            v = (double)st.iteration;
        else if (f >= EPS && st.privacy_epsilon > 0)
            v = f == EPS ? st.privacy_spent
              : f == EPS_RDP ? st.privacy_spent_rdp
              : f == EPS_BUDGET ? st.privacy_epsilon
              : (double)st.privacy_iterations;
        else
            continue;
        coord_text_printf(t, "%s{%s} %.17g\n", fam[f][0], job_labels(j, lab, sizeof(lab)), v);
    }
}

/* A round metric's gauge (sfl/wire/roundmetrics.def): a line per job whose last
 * committed round has the value. */
static void render_metric(coord_text_t *t, const coord_t *co, int id)
{
    const sfl_metric_t *d = &sfl_metrics[id];
    char lab[200];

    coord_text_family(t, d->prom, "gauge", d->help);
    for (size_t i = 0; i < co->njobs; i++) {
        const coord_job_t *j = co->jobs[i];
        sfl_metric_job_t k;

        coord_job_metric_kind(j, &k);
        if (sfl_metric_state(id, &j->last, &k) == SFL_METRIC_VALUE)
            coord_text_printf(t, "%s{%s} %.17g\n", d->prom, job_labels(j, lab, sizeof(lab)),
                              sfl_metric_get(id, &j->last));
    }
}

/* Per-job gauges, one family at a time (no line before the first round
 * with metrics). */
static void render_progress(coord_text_t *t, const coord_t *co)
{
    render_own(t, co, COMMITTED);
    render_own(t, co, RUNNING);
    for (int id = 0; id < SFL_METRIC_COUNT; id++)
        if (sfl_metrics[id].prom[0])
            render_metric(t, co, id);
    for (int f = ITER; f < NFAM; f++)
        render_own(t, co, f);
}

int coord_render_metrics(coord_text_t *t, void *ud)
{
    static const char *const verdicts[5] = {"accepted", "late", "duplicate", "wrong_round",
                                            "rejected"};
    static const sfl_job_state_t states[] = {SFL_JOB_PENDING, SFL_JOB_RUNNING,
                                             SFL_JOB_PAUSED, SFL_JOB_CANCELLED,
                                             SFL_JOB_FINISHED, SFL_JOB_FAILED};
    coord_t *co = ud;

    coord_text_family(t, "sfl_agents_connected", "gauge",
                      "Agents bound by Join to an open connection.");
    coord_text_printf(t, "sfl_agents_connected %u\n", coord_connected_agents(co));
    coord_text_family(t, "sfl_agents_known", "gauge", "Agents ever registered.");
    coord_text_printf(t, "sfl_agents_known %zu\n", co->nagents);
    coord_text_family(t, "sfl_connections_open", "gauge", "Open TLS connections.");
    coord_text_printf(t, "sfl_connections_open %zu\n", co->nconns);
    {
        size_t fes = 0, held = 0;

        for (const coord_conn_t *k = co->conns; k != NULL; k = k->next) {
            if (k->has_peer && k->peer.role == SFL_ROLE_COORDINATOR)
                fes++;
            for (const coord_conn_t *kid = k->kids; kid != NULL; kid = kid->kid_next)
                held += kid->agent != NULL;
        }
        coord_text_family(t, "sfl_frontends_connected", "gauge",
                          "Front-ends connected (certificates of the coordinator role).");
        coord_text_printf(t, "sfl_frontends_connected %zu\n", fes);
        coord_text_family(t, "sfl_frontend_agents", "gauge",
                          "Agents connected through front-ends (part of sfl_agents_connected).");
        coord_text_printf(t, "sfl_frontend_agents %zu\n", held);
    }
    coord_text_family(t, "sfl_connections_refused_total", "counter",
                      "Connections refused before they opened (TLS handshake, limits).");
    coord_text_printf(t, "sfl_connections_refused_total %llu\n",
                      (unsigned long long)co->tls_refused);
    coord_text_family(t, "sfl_frontend_certs_refused_total", "counter",
                      "Agent certificates front-ends relayed that did not verify (Fleet).");
    coord_text_printf(t, "sfl_frontend_certs_refused_total %llu\n",
                      (unsigned long long)co->fleet_certs_refused);
    coord_text_family(t, "sfl_jobs", "gauge", "Jobs by state.");
    for (size_t s = 0; s < sizeof(states) / sizeof(states[0]); s++) {
        uint32_t n = 0;

        for (size_t i = 0; i < co->njobs; i++)
            n += co->jobs[i]->state == states[s];
        coord_text_printf(t, "sfl_jobs{state=\"%s\"} %u\n", sfl_msg_job_state_name(states[s]),
                          n);
    }
    {
        uint64_t held = 0;

        for (size_t i = 0; i < co->njobs; i++)
            if (co->jobs[i]->model.global != NULL)
                held += coord_job_state_bytes(co->jobs[i]->model.dim);
        coord_text_family(t, "sfl_job_model_bytes", "gauge",
                          "Model state held in memory by running jobs (max_job_memory bounds "
                          "what jobs not ended may reserve).");
        coord_text_printf(t, "sfl_job_model_bytes %llu\n", (unsigned long long)held);
    }
    render_progress(t, co);
    coord_text_family(t, "sfl_job_quarantined", "gauge",
                      "Members quarantined in the job: never selected for it again until "
                      "released (sflctl job release).");
    for (size_t i = 0; i < co->njobs; i++) {
        char lab[200];

        coord_text_printf(t, "sfl_job_quarantined{%s} %zu\n",
                          job_labels(co->jobs[i], lab, sizeof(lab)), co->jobs[i]->nquar);
    }
    coord_text_family(t, "sfl_job_suspects", "gauge",
                      "Members suspected of a secure sum that failed with no one to name "
                      "(in a failed attempt's U3, not in a committed one since): drawn last.");
    for (size_t i = 0; i < co->njobs; i++) {
        char lab[200];

        coord_text_printf(t, "sfl_job_suspects{%s} %u\n",
                          job_labels(co->jobs[i], lab, sizeof(lab)),
                          coord_suspects(co->jobs[i]));
    }
    coord_text_family(t, "sfl_quarantines_total", "counter",
                      "Members quarantined since start (a round named them as its culprit).");
    coord_text_printf(t, "sfl_quarantines_total %llu\n", (unsigned long long)co->quarantines);
    coord_text_family(t, "sfl_rounds_committed_total", "counter", "Rounds committed.");
    coord_text_printf(t, "sfl_rounds_committed_total %llu\n",
                      (unsigned long long)co->rounds_committed);
    coord_text_family(t, "sfl_rounds_failed_total", "counter",
                      "Round attempts that failed (quorum missed, aggregation error).");
    coord_text_printf(t, "sfl_rounds_failed_total %llu\n", (unsigned long long)co->rounds_failed);
    coord_text_family(t, "sfl_updates_total", "counter",
                      "Updates by verdict: mode 1's submissions; a secure-aggregation "
                      "round's U3 members and a vertical round's block holders, accepted "
                      "once each when the round aggregates (the history's accepted).");
    for (int v = 0; v < 5; v++)
        coord_text_printf(t, "sfl_updates_total{verdict=\"%s\"} %llu\n", verdicts[v],
                          (unsigned long long)co->verdicts[v]);
    coord_text_family(t, "sfl_update_bytes_total", "counter",
                      "Bytes of accepted updates (the history's bytes_up): sealed mode-1 "
                      "updates, a U3 member's secure-aggregation answers, a block holder's "
                      "step answers.");
    coord_text_printf(t, "sfl_update_bytes_total %llu\n", (unsigned long long)co->update_bytes);
    coord_text_family(t, "sfl_stage_answers_total", "counter",
                      "Secure-aggregation stage answers and vertical step answers by verdict "
                      "(messages within an update).");
    for (int v = 0; v < 5; v++)
        coord_text_printf(t, "sfl_stage_answers_total{verdict=\"%s\"} %llu\n", verdicts[v],
                          (unsigned long long)co->stage_verdicts[v]);
    coord_text_family(t, "sfl_updates_rejected_total", "counter",
                      "Updates with verdict rejected, by reason.");
    for (int r = 0; r < RJ_COUNT; r++)
        coord_text_printf(t, "sfl_updates_rejected_total{reason=\"%s\"} %llu\n", rj_names[r],
                          (unsigned long long)co->rejects[r]);
    coord_text_family(t, "sfl_received_bytes_total", "counter",
                      "HTTP/2 bytes received from agents and admins (inside TLS).");
    coord_text_printf(t, "sfl_received_bytes_total %llu\n", (unsigned long long)co->bytes_in);
    coord_text_family(t, "sfl_sent_bytes_total", "counter",
                      "HTTP/2 bytes sent to agents and admins (inside TLS).");
    coord_text_printf(t, "sfl_sent_bytes_total %llu\n", (unsigned long long)co->bytes_out);
    coord_hist_render(t, "sfl_aggregation_seconds",
                      "Aggregation end and checkpoint encoding of a round (thread pool).",
                      &co->agg_hist);
    coord_hist_render(t, "sfl_round_duration_seconds",
                      "From a round's first attempt opening to its commit.", &co->round_hist);
    coord_hist_render(t, "sfl_loop_lag_seconds",
                      "How late each scheduler tick ran: time the event loop was kept busy.",
                      &co->lag_hist);
    coord_text_family(t, "sfl_loop_lag_max_seconds", "gauge",
                      "The longest the event loop was late for a tick since start.");
    coord_text_printf(t, "sfl_loop_lag_max_seconds %.6f\n", co->lag_max);
    coord_hist_render(t, "sfl_store_write_seconds",
                      "Each write of the store's writer thread (a commit with its checkpoint).",
                      &co->write_hist);
    coord_text_family(t, "sfl_store_queue", "gauge",
                      "Writes posted to the store's writer and not yet completed.");
    coord_text_printf(t, "sfl_store_queue %zu\n", coord_writer_pending(co->writer));
    coord_text_family(t, "sfl_leader", "gauge",
                      "1 while this coordinator serves (role single, or the round master that "
                      "leads), 0 for a standby or a fenced master.");
    coord_text_printf(t, "sfl_leader %d\n", co->serving ? 1 : 0);
    coord_text_family(t, "sfl_leader_epoch", "gauge",
                      "The leader epoch this master holds (0: role single, or not leading).");
    coord_text_printf(t, "sfl_leader_epoch %lld\n", co->serving ? (long long)co->epoch : 0LL);
    coord_text_family(t, "sfl_start_time_seconds", "gauge", "Start time, Unix seconds.");
    coord_text_printf(t, "sfl_start_time_seconds %.3f\n", (double)co->started_ms / 1000.0);
    return t->err;
}

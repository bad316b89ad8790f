/* The coordinator's status page: GET / (and /status) on the metrics
 * listener, a read-only HTML view of what `sflctl status`, `sflctl jobs`,
 * `sflctl agents`, `sflctl job history` and /metrics already show, with
 * inline SVG plots of each recent job's loss, accuracy and privacy spent per
 * round. Rendered on the loop for each request (docs/operations.md, "Status
 * page"); statuspage.h builds the HTML pieces.
 *
 * Work per request is bounded: at most STATUS_JOBS jobs, STATUS_AGENTS
 * agents, plots for the STATUS_DETAIL most recent jobs over their last
 * STATUS_ROUNDS rounds (downsampled to COORD_PLOT_POINTS), and a page of at
 * most STATUS_MAX_BYTES. The rounds come from the store through the loop's
 * read-only connection, as Admin.JobHistory reads them (WAL: never waiting
 * for the writer), and are kept between requests: a request reads only the
 * rounds committed since the last one, so reloading the page costs the
 * store nothing while no round commits. */
#include "coord_int.h"
#include "service/coordstatus.h"
#include "round/jobs.h"
#include "round/quarantine.h"
#include "service/admin.h"
#include "round/registry.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sfl/core/alloc.h"
#include "http/statuspage.h"

#define STATUS_JOBS 100          /* rows of the jobs table: the most recent jobs */
#define STATUS_DETAIL 6          /* jobs with plots: the most recent */
#define STATUS_ROUNDS 1000       /* rounds kept per plotted job: the most recent */
#define STATUS_TABLE_ROUNDS 10   /* rounds in a job's table: the last */
#define STATUS_AGENTS 200        /* rows of the agents table */
#define STATUS_MAX_BYTES (1u << 20)
/* Room kept for one more row or section: a table row stays far below it
 * (its longest texts are a few SFL_MSG_TEXT_LEN, escaped at most x6). */
#define STATUS_RESERVE (64u << 10)
#define STATUS_REFRESH_S 10

/* The last rounds of one job, as read from the store. */
typedef struct {
    uint64_t job;               /* 0: unused */
    coord_history_row_t *rows; /* ascending rounds, at most STATUS_ROUNDS; owned */
    size_t n;
    int rc;                     /* of the last read (< 0: shown, rows kept) */
} status_hist_t;

struct coord_status {
    status_hist_t h[STATUS_DETAIL];
};

void coord_status_free(coord_status_t *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < STATUS_DETAIL; i++)
        sfl__free(s->h[i].rows);
    sfl__free(s);
}

/* Brings h up to job j's committed round: reads only the rounds after the
 * ones it holds (all of the last STATUS_ROUNDS the first time). */
static void hist_update(coord_t *co, status_hist_t *h, const coord_job_t *j)
{
    uint64_t last = h->n ? (uint64_t)h->rows[h->n - 1].round : 0;
    uint64_t after, floor = j->committed > STATUS_ROUNDS ? j->committed - STATUS_ROUNDS : 0;
    coord_history_row_t *got = NULL, *rows;
    size_t k = 0, keep, drop;

    if (h->n > 0 && last == j->committed && h->rc == 0)
        return;
    after = last > floor ? last : floor;
    if (after >= j->committed && h->rc == 0)
        return;
    h->rc = coord_store_history(co->store, (int64_t)j->id, (int64_t)after, STATUS_ROUNDS, &got,
                                &k);
    if (h->rc < 0)
        return;
    /* The rounds kept: those after floor, then the new ones. */
    for (drop = 0; drop < h->n && (uint64_t)h->rows[drop].round <= floor; drop++)
        ;
    keep = h->n - drop;
    if (keep + k > STATUS_ROUNDS)
        drop += keep + k - STATUS_ROUNDS, keep = STATUS_ROUNDS - k;
    if (k == 0 && drop == 0) {
        coord_store_free(got);
        return;
    }
    rows = sfl__reallocarray(NULL, keep + k ? keep + k : 1, sizeof(*rows));
    if (rows == NULL) {
        coord_store_free(got);
        h->rc = SFL_ENOMEM;
        return;
    }
    if (keep)
        memcpy(rows, h->rows + drop, keep * sizeof(*rows));
    if (k)
        memcpy(rows + keep, got, k * sizeof(*rows));
    coord_store_free(got);
    sfl__free(h->rows);
    h->rows = rows;
    h->n = keep + k;
}

/* The cached rounds of job j (an entry of a job no longer shown is reused). */
static status_hist_t *hist_of(coord_t *co, const coord_job_t *const *shown, size_t nshown,
                              const coord_job_t *j)
{
    coord_status_t *s = co->status;
    status_hist_t *h = NULL;

    for (int i = 0; i < STATUS_DETAIL && h == NULL; i++)
        if (s->h[i].job == j->id)
            h = &s->h[i];
    for (int i = 0; i < STATUS_DETAIL && h == NULL; i++) {
        int used = 0;

        for (size_t k = 0; k < nshown; k++)
            used |= s->h[i].job == shown[k]->id && shown[k] != j;
        if (!used) {
            h = &s->h[i];
            sfl__free(h->rows);
            memset(h, 0, sizeof(*h));
            h->job = j->id;
        }
    }
    if (h != NULL)
        hist_update(co, h, j);
    return h;
}

static const char *utc(int64_t ms, char *out, size_t cap)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0 || gmtime_r(&s, &tm) == NULL)
        snprintf(out, cap, "-");
    else
        strftime(out, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return out;
}

static int room(const coord_text_t *t)
{
    return t->len + STATUS_RESERVE < STATUS_MAX_BYTES;
}

/* <td>text</td>, text escaped. */
static void td(coord_text_t *t, const char *text)
{
    coord_text_add(t, "<td>", 4);
    coord_html_text(t, text);
    coord_text_add(t, "</td>", 5);
}

static void summary(coord_text_t *t, const coord_t *co, int64_t now)
{
    uint64_t rejected = 0;
    char a[40], b[40];

    for (int v = 1; v < 5; v++)
        rejected += co->verdicts[v];
    coord_text_printf(t, "<table class=\"kv\"><tr><th>coordinator</th><td>sfl-coordinator %s, "
                         "up since %s</td></tr>",
                      COORD_VERSION, utc(co->started_ms, a, sizeof(a)));
    coord_text_printf(t, "<tr><th>agents</th><td id=\"agents-count\">%u connected, %zu known"
                         "</td></tr>",
                      coord_connected_agents(co), co->nagents);
    coord_text_printf(t, "<tr><th>updates</th><td>%llu accepted, %llu rejected</td></tr>",
                      (unsigned long long)co->verdicts[COORD_UPD_ACCEPTED],
                      (unsigned long long)rejected);
    coord_text_printf(t, "<tr><th>rounds</th><td>%llu committed, %llu attempts failed</td></tr>",
                      (unsigned long long)co->rounds_committed,
                      (unsigned long long)co->rounds_failed);
    coord_text_printf(t, "<tr><th>jobs</th><td>%zu</td></tr>", co->njobs);
    coord_text_printf(t, "<tr><th>page</th><td>%s, reloads every %d s</td></tr></table>\n",
                      utc(now, b, sizeof(b)), STATUS_REFRESH_S);
}

static void jobs_table(coord_text_t *t, const coord_t *co)
{
    size_t first = co->njobs > STATUS_JOBS ? co->njobs - STATUS_JOBS : 0;

    coord_text_printf(t, "<h2>Jobs</h2>\n");
    if (co->njobs == 0) {
        coord_text_printf(t, "<p>no jobs</p>\n");
        return;
    }
    if (first > 0)
        coord_text_printf(t, "<p>the %d most recent of %zu jobs (sflctl jobs lists all)</p>\n",
                          STATUS_JOBS, co->njobs);
    coord_text_printf(t, "<table id=\"jobs\"><tr><th>ID</th><th>name</th><th>algorithm</th>"
                         "<th>loss</th><th>state</th><th>rounds</th><th>progress</th>"
                         "<th>privacy spent</th><th>quarantined</th><th>note</th></tr>\n");
    for (size_t i = co->njobs; i-- > first;) {
        const coord_job_t *j = co->jobs[i];
        sfl_job_status_t st;
        sfl_metric_job_t k;
        char prog[160], buf[96];

        if (!room(t)) {
            coord_text_printf(t, "<tr><td colspan=\"10\">%zu more not shown (page size "
                                 "limit)</td></tr>\n",
                              i + 1 - first);
            break;
        }
        coord_job_status(j, &st);
        coord_job_metric_kind(j, &k);
        coord_text_printf(t, "<tr id=\"job-row-%llu\"><td><a href=\"#job-%llu\">%llu</a></td>",
                          (unsigned long long)j->id, (unsigned long long)j->id,
                          (unsigned long long)j->id);
        td(t, st.name);
        td(t, st.algorithm);
        td(t, st.loss);
        td(t, sfl_msg_job_state_name(st.state));
        coord_text_printf(t, "<td>%llu/%u</td>", (unsigned long long)st.committed_round,
                          st.rounds);
        td(t, sfl_metrics_job_progress(&st, &k, prog, sizeof(prog)));
        if (st.privacy_epsilon > 0)
            snprintf(buf, sizeof(buf), "%.4g of %.4g (rdp %.4g)", st.privacy_spent,
                     st.privacy_epsilon, st.privacy_spent_rdp);
        else
            snprintf(buf, sizeof(buf), "-");
        td(t, buf);
        coord_text_printf(t, "<td>%u</td>", st.quarantined);
        coord_text_add(t, "<td>", 4);
        coord_html_text(t, st.error[0] ? st.error : st.waiting);
        if (st.quarantine[0]) {
            coord_text_add(t, "<br>", 4);
            coord_html_text(t, st.quarantine);
        }
        coord_text_printf(t, "</td></tr>\n");
    }
    coord_text_printf(t, "</table>\n");
}

/* The latest rounds, newest first: the round's own columns, then every
 * round metric the job can have (sfl/wire/roundmetrics.def, named as in
 * sflctl job history), "-" where the round has none, "n/a" where it
 * cannot. */
static void rounds_table(coord_text_t *t, const coord_job_t *j, const status_hist_t *h)
{
    size_t first = h->n > STATUS_TABLE_ROUNDS ? h->n - STATUS_TABLE_ROUNDS : 0;
    sfl_metric_job_t k;

    coord_job_metric_kind(j, &k);
    coord_text_printf(t, "<table class=\"rounds\"><tr><th>round</th><th>attempt</th>"
                         "<th>selected</th><th>accepted</th>");
    for (int id = 0; id < SFL_METRIC_COUNT; id++)
        if (sfl_metric_applies(id, &k))
            coord_text_printf(t, "<th>%s</th>", sfl_metrics[id].csv);
    coord_text_printf(t, "<th>bytes_up</th><th>round_ms</th><th>committed</th></tr>\n");
    for (size_t i = h->n; i-- > first;) {
        const coord_history_row_t *r = &h->rows[i];
        char ts[40];

        coord_text_printf(t, "<tr><td>%lld</td><td>%lld</td><td>%u</td><td>%u</td>",
                          (long long)r->round, (long long)(r->attempt - 1), r->selected,
                          r->accepted);
        for (int id = 0; id < SFL_METRIC_COUNT; id++) {
            sfl_metric_state_t st = sfl_metric_state(id, &r->m, &k);

            if (!sfl_metric_applies(id, &k))
                continue;
            if (st != SFL_METRIC_VALUE)
                coord_text_printf(t, "<td>%s</td>", st == SFL_METRIC_NA ? "n/a" : "-");
            else if (sfl_metrics[id].type == SFL_METRIC_F64)
                coord_text_printf(t, "<td>%.6g</td>", sfl_metric_get(id, &r->m));
            else
                coord_text_printf(t, "<td>%llu</td>",
                                  (unsigned long long)sfl_metric_get_u64(id, &r->m));
        }
        coord_text_printf(t, "<td>%llu</td><td>%lld</td><td>%s</td></tr>\n",
                          (unsigned long long)r->bytes_up,
                          (long long)(r->committed_ms - r->opened_ms),
                          utc(r->committed_ms, ts, sizeof(ts)));
    }
    coord_text_printf(t, "</table>\n");
}

/* One job's section: plots of its last rounds and a table of the latest. */
static int job_detail(coord_text_t *t, coord_t *co, const coord_job_t *const *shown, size_t nshown,
                      const coord_job_t *j)
{
    status_hist_t *h = hist_of(co, shown, nshown, j);
    double *x = NULL, *y = NULL;
    coord_plot_series_t s[2];
    sfl_metric_job_t k;
    int cls, pers, priv = 0;
    size_t n;

    coord_job_metric_kind(j, &k);
    cls = k.classification;
    pers = k.personalized;
    coord_text_printf(t, "<section class=\"job\" id=\"job-%llu\"><h2>Job %llu: ",
                      (unsigned long long)j->id, (unsigned long long)j->id);
    coord_html_text(t, j->spec.name);
    coord_text_printf(t, "</h2><p>");
    coord_html_text(t, j->spec.algorithm);
    coord_text_printf(t, ", loss ");
    coord_html_text(t, j->spec.loss);
    coord_text_printf(t, ", %s, %llu of %u rounds committed</p>\n",
                      sfl_msg_job_state_name(j->state), (unsigned long long)j->committed,
                      j->spec.rounds);
    if (h == NULL || h->rc < 0) {
        coord_text_printf(t, "<p class=\"err\">cannot read the rounds from the store: ");
        coord_html_text(t, h == NULL ? "no room" : sfl_strerror(h->rc));
        coord_text_printf(t, "</p></section>\n");
        return 0;
    }
    n = h->n;
    if (n > 0 && (uint64_t)h->rows[0].round > 1)
        coord_text_printf(t, "<p>the last %zu rounds (sflctl job history %llu has all)</p>\n", n,
                          (unsigned long long)j->id);
    x = sfl__calloc(n ? n : 1, sizeof(*x));
    y = sfl__calloc(2 * (n ? n : 1), sizeof(*y));
    if (x == NULL || y == NULL) {
        sfl__free(x);
        sfl__free(y);
        return SFL_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const coord_history_row_t *r = &h->rows[i];

        x[i] = (double)r->round;
        y[i] = r->m.samples > 0 ? r->m.train_loss : NAN;
        priv |= r->m.privacy_iterations > 0;
    }
    s[0] = (coord_plot_series_t){"train loss", "#1f77b4", y};
    coord_html_plot(t, "Train loss per round", x, n, s, 1);
    for (size_t i = 0; i < n; i++) {
        const coord_history_row_t *r = &h->rows[i];
        int ev = r->m.samples > 0 && r->m.eval_samples > 0;

        y[i] = ev ? (cls ? r->m.eval_accuracy : r->m.eval_mse) : NAN;
        y[n + i] = ev && pers ? r->m.personal_accuracy : NAN;
    }
    s[0] = (coord_plot_series_t){cls ? "accuracy" : "mse", "#2ca02c", y};
    s[1] = (coord_plot_series_t){"personal accuracy", "#ff7f0e", y + n};
    coord_html_plot(t, cls ? "Held-out accuracy per round" : "Held-out MSE per round", x, n, s,
                    pers ? 2 : 1);
    if (priv) {
        for (size_t i = 0; i < n; i++) {
            const coord_history_row_t *r = &h->rows[i];

            y[i] = r->m.privacy_iterations > 0 ? r->m.privacy_spent : NAN;
            y[n + i] = r->m.privacy_iterations > 0 ? r->m.privacy_spent_rdp : NAN;
        }
        s[0] = (coord_plot_series_t){"epsilon spent", "#d62728", y};
        s[1] = (coord_plot_series_t){"epsilon spent (RDP)", "#9467bd", y + n};
        coord_html_plot(t, "Privacy spent per round", x, n, s, 2);
    }
    sfl__free(x);
    sfl__free(y);
    if (n > 0)
        rounds_table(t, j, h);
    coord_text_printf(t, "</section>\n");
    return 0;
}

static void agents_table(coord_text_t *t, const coord_t *co, int64_t now)
{
    size_t shown = 0;

    coord_text_printf(t, "<h2>Agents</h2>\n");
    if (co->nagents == 0) {
        coord_text_printf(t, "<p>no agents</p>\n");
        return;
    }
    coord_text_printf(t, "<table id=\"agents\"><tr><th>ID</th><th>subject</th><th>connected</th>"
                         "<th>phase</th><th>job</th><th>round</th><th>progress</th>"
                         "<th>accepted</th><th>samples</th><th>last seen</th><th>version</th>"
                         "<th>quarantine</th></tr>\n");
    for (size_t i = 0; i < co->nagents; i++, shown++) {
        const coord_agent_t *a = co->agents[i];
        char q[SFL_MSG_TEXT_LEN], seen[48];
        uint32_t prog = a->progress > 1000 ? 1000 : a->progress;

        if (shown == STATUS_AGENTS || !room(t)) {
            coord_text_printf(t, "<tr><td colspan=\"12\">%zu more not shown (sflctl agents "
                                 "lists all)</td></tr>\n",
                              co->nagents - i);
            break;
        }
        coord_text_printf(t, "<tr><td>%llu</td>", (unsigned long long)a->id);
        td(t, a->name);
        coord_text_printf(t, "<td>%s</td><td>%s</td>", a->conn ? "yes" : "no",
                          a->joined && a->phase ? sfl_msg_phase_name(a->phase) : "-");
        if (a->hb_job)
            coord_text_printf(t, "<td>%llu</td><td>%llu</td>", (unsigned long long)a->hb_job,
                              (unsigned long long)a->hb_round);
        else
            coord_text_printf(t, "<td>-</td><td>-</td>");
        coord_text_printf(t, "<td>%u.%u%%</td><td>%llu</td><td>%llu</td>", prog / 10, prog % 10,
                          (unsigned long long)a->accepted, (unsigned long long)a->ds.samples);
        if (a->last_seen_ms > 0)
            snprintf(seen, sizeof(seen), "%lld s ago",
                     (long long)((now - a->last_seen_ms) / 1000));
        else
            snprintf(seen, sizeof(seen), "-");
        td(t, seen);
        td(t, a->version[0] ? a->version : "-");
        coord_quarantine_text(co, a->id, q, sizeof(q));
        td(t, q);
        coord_text_printf(t, "</tr>\n");
    }
    coord_text_printf(t, "</table>\n");
}

static const char css[] =
    "body{font:14px sans-serif;margin:16px;color:#222;background:#fff}"
    "h1{font-size:20px}h2{font-size:17px;margin-top:24px}"
    "table{border-collapse:collapse;margin:8px 0}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    "th{background:#eee}table.kv th{width:110px}"
    "svg.plot{margin:4px 8px 4px 0;font:11px sans-serif}svg .pt{font-weight:bold}"
    ".err{color:#b00}";

int coord_render_status(coord_text_t *t, void *ud)
{
    coord_t *co = ud;
    const coord_job_t *shown[STATUS_DETAIL];
    size_t nshown = 0;
    int64_t now = coord_wall_ms();
    int rc = 0;

    if (co->status == NULL && (co->status = sfl__calloc(1, sizeof(*co->status))) == NULL)
        return SFL_ENOMEM;
    for (size_t i = co->njobs; i-- > 0 && nshown < STATUS_DETAIL;)
        shown[nshown++] = co->jobs[i];
    coord_text_printf(t, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                         "<meta http-equiv=\"refresh\" content=\"%d\">"
                         "<title>sfl coordinator</title><style>%s</style></head><body>\n"
                         "<h1>sfl coordinator</h1>\n",
                      STATUS_REFRESH_S, css);
    summary(t, co, now);
    jobs_table(t, co);
    for (size_t i = 0; i < nshown && rc == 0; i++)
        if (room(t))
            rc = job_detail(t, co, shown, nshown, shown[i]);
    if (rc == 0)
        agents_table(t, co, now);
    coord_text_printf(t, "<p><small>Read-only. The same as sflctl status, jobs, agents and job "
                         "history show; /metrics has the counters.</small></p>\n"
                         "</body></html>\n");
    if (rc == 0 && t->err == 0 && t->len > STATUS_MAX_BYTES)
        rc = sfl__fail(SFL_ELIMIT, "status page of %zu bytes", t->len);
    return rc < 0 ? rc : t->err;
}

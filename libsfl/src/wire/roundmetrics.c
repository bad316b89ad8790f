/* The round-metric table (sfl/wire/roundmetrics.def) and what is done with it
 * everywhere alike: the fold, a round's means, a value's state and the
 * progress text. */
#include "sfl/wire/roundmetrics.h"
#include "sfl/wire/msg.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const sfl_metric_t sfl_metrics[SFL_METRIC_COUNT] = {
#define SFL_METRIC(name, type, fold, weight, when, status, sql, csv, fmt, label, show, prom,    \
                   help)                                                                       \
    {#name, SFL_METRIC_##type, SFL_METRIC_##fold, SFL_METRIC_ID_##weight, SFL_METRIC_##when,     \
     SFL_METRIC_STATUS_##status, offsetof(sfl_round_metrics_t, name), sql, csv, fmt, label, SFL_METRIC_SHOW_##show, prom,   \
     help},
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
};

/* Each MEAN's weight is a WEIGHT metric (the table's promise, checked by
 * the compiler: SFL_METRIC_ID_none is -1, a missing name does not build). */

static void *field(int id, sfl_round_metrics_t *m)
{
    return (unsigned char *)m + sfl_metrics[id].offset;
}

static const void *cfield(int id, const sfl_round_metrics_t *m)
{
    return (const unsigned char *)m + sfl_metrics[id].offset;
}

double sfl_metric_get(int id, const sfl_round_metrics_t *m)
{
    const void *f = cfield(id, m);

    switch (sfl_metrics[id].type) {
    case SFL_METRIC_U64:
        return (double)*(const uint64_t *)f;
    case SFL_METRIC_U32:
        return (double)*(const uint32_t *)f;
    default:
        return *(const double *)f;
    }
}

uint64_t sfl_metric_get_u64(int id, const sfl_round_metrics_t *m)
{
    const void *f = cfield(id, m);

    switch (sfl_metrics[id].type) {
    case SFL_METRIC_U64:
        return *(const uint64_t *)f;
    case SFL_METRIC_U32:
        return *(const uint32_t *)f;
    default:
        return 0;
    }
}

void sfl_metric_set_u64(int id, sfl_round_metrics_t *m, uint64_t v)
{
    void *f = field(id, m);

    switch (sfl_metrics[id].type) {
    case SFL_METRIC_U64:
        *(uint64_t *)f = v;
        break;
    case SFL_METRIC_U32:
        *(uint32_t *)f = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
        break;
    default:
        *(double *)f = (double)v;
    }
}

void sfl_metric_set(int id, sfl_round_metrics_t *m, double v)
{
    if (sfl_metrics[id].type == SFL_METRIC_F64)
        *(double *)field(id, m) = v;
    else
        sfl_metric_set_u64(id, m, !(v > 0) ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX
                                                                            : (uint64_t)v);
}

sfl_metric_state_t sfl_metric_state(int id, const sfl_round_metrics_t *m,
                                    const sfl_metric_job_t *k)
{
    int rep = m->samples > 0, ev = rep && m->eval_samples > 0;
    int kept = m->bytes_down > 0 || rep;
    int na, have;

    switch (sfl_metrics[id].when) {
    case SFL_METRIC_REPORTED:
        na = k->vertical && !rep, have = rep;
        break;
    case SFL_METRIC_EVAL_ROWS:
        na = k->vertical, have = rep;
        break;
    case SFL_METRIC_EVAL_CLS:
        na = k->vertical || !k->classification, have = ev;
        break;
    case SFL_METRIC_EVAL_LSQ:
        na = k->vertical || k->classification, have = ev;
        break;
    case SFL_METRIC_PERSONAL:
        na = !k->personalized, have = ev;
        break;
    case SFL_METRIC_KEPT:
        na = 0, have = kept;
        break;
    case SFL_METRIC_HORIZ:
        na = k->vertical, have = kept;
        break;
    default: /* SFL_METRIC_PRIVATE: a private job's ledger; no other job keeps one */
        have = m->privacy_iterations > 0, na = kept && !have;
        break;
    }
    return na ? SFL_METRIC_NA : have ? SFL_METRIC_VALUE : SFL_METRIC_EMPTY;
}

int sfl_metric_applies(int id, const sfl_metric_job_t *k)
{
    sfl_round_metrics_t all;

    /* a round that kept and reported everything: samples, held-out rows
     * and a ledger (which only private vertical jobs keep) */
    memset(&all, 0, sizeof(all));
    all.samples = all.eval_samples = all.bytes_down = 1;
    all.privacy_iterations = k->vertical;
    return sfl_metric_state(id, &all, k) == SFL_METRIC_VALUE;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* An update's reported figure of metric id (the agents report the WEIGHT
 * and MEAN metrics, UpdatePayload's fields of the same names). */
static double reported(int id, const sfl_payload_t *p)
{
    switch (id) {
#define SFL_METRIC(name, type, fold, ...) SFL_METRIC_REPORT_##fold(name)
#define SFL_METRIC_REPORT_WEIGHT(name)                                                          \
    case SFL_METRIC_ID_##name:                                                                 \
        return (double)p->name;
#define SFL_METRIC_REPORT_MEAN(name)                                                            \
    case SFL_METRIC_ID_##name:                                                                 \
        return p->name;
#define SFL_METRIC_REPORT_TOTAL(name)
#define SFL_METRIC_REPORT_SET(name)
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    default:
        return 0;
    }
}

static uint64_t reported_count(int id, const sfl_payload_t *p)
{
    switch (id) {
#define SFL_METRIC(name, type, fold, ...) SFL_METRIC_COUNT_##fold(name)
#define SFL_METRIC_COUNT_WEIGHT(name)                                                           \
    case SFL_METRIC_ID_##name:                                                                 \
        return p->name;
#define SFL_METRIC_COUNT_MEAN(name)
#define SFL_METRIC_COUNT_TOTAL(name)
#define SFL_METRIC_COUNT_SET(name)
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    default:
        return 0;
    }
}

void sfl_metrics_fold(sfl_round_metrics_t *sums, const sfl_payload_t *p)
{
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        const sfl_metric_t *d = &sfl_metrics[id];

        if (d->fold == SFL_METRIC_WEIGHT)
            sfl_metric_set_u64(id, sums,
                               add_sat(sfl_metric_get_u64(id, sums), reported_count(id, p)));
        else if (d->fold == SFL_METRIC_MEAN)
            sfl_metric_set(id, sums,
                           sfl_metric_get(id, sums) +
                               (double)reported_count(d->weight, p) * reported(id, p));
    }
}

void sfl_metrics_means(const sfl_round_metrics_t *sums, sfl_round_metrics_t *out)
{
    memset(out, 0, sizeof(*out));
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        const sfl_metric_t *d = &sfl_metrics[id];
        uint64_t v = sfl_metric_get_u64(id, sums);

        if (d->fold == SFL_METRIC_TOTAL)
            sfl_metric_set_u64(id, out, v > INT64_MAX ? INT64_MAX : v);
        else if (d->fold == SFL_METRIC_WEIGHT && v > 0 && v <= INT64_MAX)
            sfl_metric_set_u64(id, out, v);
    }
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        const sfl_metric_t *d = &sfl_metrics[id];
        uint64_t w;

        if (d->fold != SFL_METRIC_MEAN || (w = sfl_metric_get_u64(d->weight, out)) == 0)
            continue;
        sfl_metric_set(id, out, sfl_metric_get(id, sums) / (double)w);
    }
    /* SQLite holds no NaN: a weight one of whose means is not finite is
     * dropped with all its means. */
    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        const sfl_metric_t *d = &sfl_metrics[id];

        if (d->fold != SFL_METRIC_MEAN || isfinite(sfl_metric_get(id, out)))
            continue;
        sfl_metric_set_u64(d->weight, out, 0);
        for (int o = 0; o < SFL_METRIC_COUNT; o++)
            if (sfl_metrics[o].fold == SFL_METRIC_MEAN && sfl_metrics[o].weight == d->weight)
                sfl_metric_set(o, out, 0);
    }
}

const char *sfl_metrics_progress(const sfl_round_metrics_t *m, const sfl_metric_job_t *k,
                                 char *out, size_t cap)
{
    size_t o = 0;

    if (cap == 0)
        return out;
    out[0] = '\0';
    if (m->samples == 0)
        return out;
    for (int pass = 0; pass < 2; pass++)
        for (int id = 0; id < SFL_METRIC_COUNT && o < cap; id++) {
            const sfl_metric_t *d = &sfl_metrics[id];
            int n;

            if (d->show != (pass ? SFL_METRIC_SHOW_SUFFIX : SFL_METRIC_SHOW_VALUE) ||
                sfl_metric_state(id, m, k) != SFL_METRIC_VALUE ||
                (pass && sfl_metric_get_u64(id, m) == 0))
                continue;
            if (pass)
                n = snprintf(out + o, cap - o, " (%" PRIu64 " %s)", sfl_metric_get_u64(id, m),
                             d->label);
            else
                n = snprintf(out + o, cap - o, "%s%s %.4g", o ? ", " : "", d->label,
                             sfl_metric_get(id, m));
            o = n < 0 ? cap : o + (size_t)n;
        }
    return out;
}

const char *sfl_metrics_job_progress(const sfl_job_status_t *j, const sfl_metric_job_t *k,
                                     char *out, size_t cap)
{
    int o;

    if (cap == 0)
        return out;
    out[0] = '\0';
    if (j->privacy_epsilon > 0 || j->iteration > 0) {
        /* a vertical job: its iteration and privacy ledger */
        o = snprintf(out, cap, "iteration %" PRIu64, j->iteration);
        if (j->privacy_epsilon > 0 && o >= 0 && (size_t)o < cap)
            snprintf(out + o, cap - (size_t)o,
                     ", epsilon %.4g of %.4g spent (rdp %.4g, %" PRIu64 " iterations)",
                     j->privacy_spent, j->privacy_epsilon, j->privacy_spent_rdp,
                     j->privacy_iterations);
        return out;
    }
    return sfl_metrics_progress(&j->last, k, out, cap);
}

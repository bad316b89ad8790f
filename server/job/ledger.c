#include "job/ledger.h"

#include <stdio.h>
#include <string.h>

void coord_ledger_count(coord_ledger_t *l, const sfl_job_spec_t *s, const coord_round_row_t *rows,
                        size_t n)
{
    l->released = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t first;
        uint32_t count;

        coord_vjob_span(s, (uint64_t)rows[i].round, &first, &count);
        l->released += count;
    }
}

void coord_ledger_release(coord_ledger_t *l, uint32_t count)
{
    l->released += count;
}

int coord_ledger_spend(coord_ledger_t *l, const coord_vjob_t *v)
{
    int rc = coord_vjob_spent(v, l->released, &l->spent, &l->priv);

    if (rc < 0) {
        l->priv = 1; /* keep counting; figures unknown */
        memset(&l->spent, 0, sizeof(l->spent));
    }
    return rc;
}

void coord_ledger_restore(coord_ledger_t *l, const sfl_round_metrics_t *last)
{
    if (last->privacy_iterations > 0 && last->privacy_iterations == l->released) {
        l->priv = 1;
        l->spent.eps_paper = last->privacy_spent;
        l->spent.eps_rdp_tight = last->privacy_spent_rdp;
    }
}

double coord_ledger_eps(const coord_ledger_t *l, const coord_vjob_t *v)
{
    return sfl_vertical_budget_eps(&v->vj, &l->spent);
}

void coord_ledger_metrics(const coord_ledger_t *l, const coord_vjob_t *v,
                          sfl_round_metrics_t *m)
{
    if (!l->priv)
        return;
    m->privacy_iterations = l->released;
    m->privacy_spent = coord_ledger_eps(l, v);
    m->privacy_spent_rdp = l->spent.eps_rdp_tight;
}

int coord_ledger_budget(const coord_ledger_t *l, const coord_vjob_t *v, const sfl_job_spec_t *s,
                        double eps, uint64_t round, char *why, size_t cap)
{
    uint64_t first;
    uint32_t count;

    if (!l->priv)
        return 0;
    coord_vjob_span(s, round, &first, &count);
    if (l->released + count <= v->vj.iters)
        return 0;
    snprintf(why, cap, "privacy budget exhausted: %llu of its %llu iterations released "
             "(epsilon %.4g of %.4g spent, by the accounting its noise is calibrated by; "
             "failed and interrupted "
             "attempts count in full), round %llu needs %u more",
             (unsigned long long)l->released, (unsigned long long)v->vj.iters,
             coord_ledger_eps(l, v), eps, (unsigned long long)round, count);
    return SFL_ELIMIT;
}

void coord_ledger_status(const coord_ledger_t *l, const coord_vjob_t *v, double eps,
                         sfl_job_status_t *st)
{
    if (!l->priv)
        return;
    st->privacy_epsilon = eps;
    st->privacy_delta = sfl_vertical_delta(&v->vj);
    st->privacy_spent = coord_ledger_eps(l, v);
    st->privacy_spent_rdp = l->spent.eps_rdp_tight;
    st->privacy_iterations = l->released;
}

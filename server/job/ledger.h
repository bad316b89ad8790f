/* A vertical job's privacy ledger (docs/security.md, "Vertical jobs"):
 * the iterations its attempts released and what they spent by the
 * accounting the job's noise is calibrated by. Every attempt opened counts
 * all its iterations, finished or not (an attempt that fails or that a
 * crash cuts short has released some of them, and nobody can know how
 * many), so the ledger never under-counts; it needs no write of its own,
 * as the store records every attempt before its task goes out. Pure: the
 * caller reads the store and logs. */
#ifndef COORD_ROUND_LEDGER_H
#define COORD_ROUND_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "job/vjob.h"
#include "sfl/core/error.h"
#include "sfl/dp/dp.h"
#include "store/store.h"

typedef struct coord_ledger {
    uint64_t released;      /* iterations released */
    sfl_dp_spent_t spent;   /* what they spent (priv 1) */
    int priv;               /* 0: the job releases nothing private */
} coord_ledger_t;

/* released = the iterations of the attempts rows[0..n) (their rounds' spans
 * under spec s); spent is left as it was. */
void coord_ledger_count(coord_ledger_t *l, const sfl_job_spec_t *s, const coord_round_row_t *rows,
                        size_t n);
/* An attempt of `count` iterations opened: released += count. */
void coord_ledger_release(coord_ledger_t *l, uint32_t count);
/* spent and priv after `released` iterations (sfl_vertical_privacy). On an
 * error the ledger keeps counting with its figures unknown (priv 1, spent
 * 0) and the error is returned for the caller to log. */
int coord_ledger_spend(coord_ledger_t *l, const coord_vjob_t *v) SFL_MUST_CHECK;
/* At start, without the model: what the last commit recorded (last), taken
 * if no attempt came after it (its iterations are released). */
void coord_ledger_restore(coord_ledger_t *l, const sfl_round_metrics_t *last);
/* The epsilon spent by the accounting the job's noise is calibrated by
 * (the paper's, or the RDP accountant's for DP-BCFW's calib 1). */
double coord_ledger_eps(const coord_ledger_t *l, const coord_vjob_t *v);
/* The ledger into a commit's metrics (nothing for a job without noise). */
void coord_ledger_metrics(const coord_ledger_t *l, const coord_vjob_t *v,
                          sfl_round_metrics_t *m);
/* SFL_ELIMIT with why if round `round` (under spec s, budget epsilon eps)
 * would release more than the job's T iterations; 0 otherwise. */
int coord_ledger_budget(const coord_ledger_t *l, const coord_vjob_t *v, const sfl_job_spec_t *s,
                        double eps, uint64_t round, char *why, size_t cap) SFL_MUST_CHECK;
/* JobStatus's privacy figures (nothing for a job without noise). */
void coord_ledger_status(const coord_ledger_t *l, const coord_vjob_t *v, double eps,
                         sfl_job_status_t *st);

#endif

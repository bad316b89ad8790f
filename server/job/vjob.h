/* A vertical job on the coordinator (sfl/algo/vertical.h; docs/design.md,
 * "Shapes"): K agents hold the column blocks of the same n samples, and a
 * round runs S iterations among all of them. Pure, like job/model.c: the
 * vertical round kind (vround.c) feeds it the agents' answers and sends
 * what it returns.
 *
 * Round r runs iterations [(r - 1) S, min(r S, T)) of T = rounds * S, S =
 * iterations_per_round. Its task carries the broadcast at the round's
 * start; every later iteration goes out as a VerticalStep. The model x
 * and the broadcast b are one state vector [x, b] of d + bcast_len
 * entries (coord_model_t.global), so a round's checkpoint holds both and a
 * restart resumes where the last commit left them. The privacy ledger
 * that counts the iterations released is ledger.h's. */
#ifndef COORD_VJOB_H
#define COORD_VJOB_H

#include <stddef.h>
#include <stdint.h>

#include "job/round.h"
#include "sfl/algo/algo.h"
#include "sfl/dp/dp.h"
#include "sfl/wire/msg.h"
#include "sfl/algo/vertical.h"

#define COORD_VJOB_PER_ROUND_DEFAULT 100

typedef struct coord_vjob {
    sfl_vjob_t vj;        /* algo, params, problem borrowed from the job */
    uint32_t per_round;   /* S */
    size_t nb, nm;        /* broadcast and message entries */
    /* The open state (coord_vjob_open). */
    void *common;         /* the algorithm's common object (the sketch J) */
    uint64_t t, end;      /* the iteration in progress; the round's end */
    double *msgs;         /* K x nm answers of iteration t */
    const double **rows;  /* K pointers into msgs */
    uint8_t *got;         /* K flags: client k answered t */
    uint32_t ngot;
    double *saved;        /* the state at the start of round saved_round */
    uint64_t saved_round;
} coord_vjob_t;

/* S of a spec (iterations_per_round, 0: the default). */
uint32_t coord_vjob_per_round(const sfl_job_spec_t *s);
/* Round r's iterations: [*first, *first + *count). */
void coord_vjob_span(const sfl_job_spec_t *s, uint64_t round, uint64_t *first, uint32_t *count);
/* Fills v from a vertical spec, its resolved parameters and problem (both
 * borrowed for v's life) and checks the job: rows >= 1, cohort_size = K
 * (every block holder takes part in every iteration), sfl_vertical_check.
 * SFL_EINVAL with a detail naming the key. */
int coord_vjob_setup(coord_vjob_t *v, const sfl_job_spec_t *s, const sfl_algo_params_t *p,
                     const sfl_problem_t *prob) SFL_MUST_CHECK;
/* Allocates the open state (the common object: O(m n) for DP-BCFW's sketch). */
int coord_vjob_open(coord_vjob_t *v) SFL_MUST_CHECK;
void coord_vjob_close(coord_vjob_t *v);

/* Which block of the job an agent's data is: its k, or -1 with why
 * ("block [3, 53) is not one of the job's 4 blocks of 200 columns: ..."). */
int coord_vjob_block_of(const coord_vjob_t *v, const sfl_dataset_summary_t *ds, char *why,
                        size_t cap);

/* An attempt of round r begins: t = its first iteration, no answers, and
 * the state [x, b] (dim entries) as the round started, whatever an
 * earlier attempt of the round did to it. */
void coord_vjob_begin(coord_vjob_t *v, const sfl_job_spec_t *s, uint64_t round, double *state,
                      size_t dim);
/* Client k's answer msg[0..len) (wire bytes) to iteration `iteration`:
 * ACCEPTED (kept), DUPLICATE (k already answered t), WRONG_ROUND (another
 * iteration), REJECTED (bytes that do not decode; why says so). */
coord_upd_verdict_t coord_vjob_answer(coord_vjob_t *v, uint32_t k, uint64_t iteration,
                                      const uint8_t *msg, size_t len, char *why, size_t cap);
/* 1 once every client answered iteration t. */
int coord_vjob_complete(const coord_vjob_t *v);
/* The server's step of iteration t on state = [x, b] (the algorithm checks
 * every message; an error changes nothing), then t + 1. Returns 1 when the
 * round's last iteration is done, 0 otherwise, < 0 on error. */
int coord_vjob_advance(coord_vjob_t *v, double *state) SFL_MUST_CHECK;

/* What `iters` released iterations spend (sfl_vertical_privacy): 0 and
 * *priv = 0 for a job without privacy noise. */
int coord_vjob_spent(const coord_vjob_t *v, uint64_t iters, sfl_dp_spent_t *spent,
                     int *priv) SFL_MUST_CHECK;

#endif

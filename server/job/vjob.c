/* A vertical job on the coordinator: vjob.h. */
#include "job/vjob.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

uint32_t coord_vjob_per_round(const sfl_job_spec_t *s)
{
    return s->iterations_per_round ? s->iterations_per_round : COORD_VJOB_PER_ROUND_DEFAULT;
}

static uint64_t total_iters(const sfl_job_spec_t *s)
{
    return (uint64_t)s->rounds * coord_vjob_per_round(s);
}

void coord_vjob_span(const sfl_job_spec_t *s, uint64_t round, uint64_t *first, uint32_t *count)
{
    uint64_t S = coord_vjob_per_round(s), T = total_iters(s);

    *first = round > 0 ? (round - 1) * S : 0;
    if (*first > T)
        *first = T;
    *count = (uint32_t)(T - *first < S ? T - *first : S);
}

int coord_vjob_setup(coord_vjob_t *v, const sfl_job_spec_t *s, const sfl_algo_params_t *p,
                     const sfl_problem_t *prob)
{
    const sfl_algo_t *a = sfl_algo_find(s->algorithm);
    int rc;

    memset(v, 0, sizeof(*v));
    if (a == NULL || a->shape != SFL_SHAPE_VERTICAL)
        return sfl__fail(SFL_EINVAL, "algorithm: %s is not a vertical algorithm", s->algorithm);
    if (s->rows == 0)
        return sfl__fail(SFL_EINVAL, "rows: a vertical job (%s) needs the number of aligned "
                         "samples every block holder has", s->algorithm);
    if (s->min_quorum != s->cohort_size)
        return sfl__fail(SFL_EINVAL, "min_quorum: every one of the %u block holders answers "
                         "every iteration of a vertical job, so min_quorum must be %u, "
                         "not %u", s->cohort_size, s->cohort_size, s->min_quorum);
    if (s->over_selection != 0)
        return sfl__fail(SFL_EINVAL, "over_selection: a vertical job selects exactly its "
                         "%u block holders (set 0)", s->cohort_size);
    if ((uint64_t)s->rounds * coord_vjob_per_round(s) > UINT32_MAX)
        return sfl__fail(SFL_EINVAL, "rounds x iterations_per_round: at most 2^32 - 1 "
                         "iterations");
    v->vj = (sfl_vjob_t){.algo = a, .p = p, .prob = prob, .nrows = s->rows,
                         .nclients = s->cohort_size, .iters = total_iters(s), .seed = s->seed};
    if ((rc = sfl_vertical_check(&v->vj)) < 0)
        return rc;
    v->per_round = coord_vjob_per_round(s);
    v->nb = a->vertical->bcast_len(&v->vj);
    v->nm = a->vertical->msg_len(&v->vj);
    return 0;
}

int coord_vjob_open(coord_vjob_t *v)
{
    const sfl_vertical_ops_t *ops = v->vj.algo->vertical;
    uint32_t K = v->vj.nclients;
    int rc;

    v->msgs = sfl__calloc((size_t)K * v->nm, sizeof(double));
    v->rows = sfl__calloc(K, sizeof(*v->rows));
    v->got = sfl__calloc(K, 1);
    v->saved = sfl__calloc(v->vj.prob->dim + v->nb, sizeof(double));
    v->saved_round = 0;
    if (v->msgs == NULL || v->rows == NULL || v->got == NULL || v->saved == NULL) {
        coord_vjob_close(v);
        return sfl__fail(SFL_ENOMEM, "no memory for %u answers of %zu values", K, v->nm);
    }
    for (uint32_t k = 0; k < K; k++)
        v->rows[k] = v->msgs + (size_t)k * v->nm;
    if (ops->common_new != NULL && (rc = ops->common_new(&v->vj, &v->common)) < 0) {
        coord_vjob_close(v);
        return rc;
    }
    v->vj.common = v->common;
    return 0;
}

void coord_vjob_close(coord_vjob_t *v)
{
    if (v->common != NULL)
        v->vj.algo->vertical->common_free(v->common);
    v->common = NULL;
    v->vj.common = NULL;
    sfl__free(v->msgs);
    sfl__free(v->rows);
    sfl__free(v->got);
    sfl__free(v->saved);
    v->saved = NULL;
    v->msgs = NULL;
    v->rows = NULL;
    v->got = NULL;
    v->ngot = 0;
}

int coord_vjob_block_of(const coord_vjob_t *v, const sfl_dataset_summary_t *ds, char *why,
                        size_t cap)
{
    uint32_t d = v->vj.prob->ncols, K = v->vj.nclients, col0, len;

    if (ds->first_column == 0 || !ds->has_ids) {
        snprintf(why, cap, "holds whole rows; a vertical job needs a column block with sample "
                 "ids (agent.ini block and ids_file)");
        return -1;
    }
    if (ds->samples != v->vj.nrows) {
        snprintf(why, cap, "holds %llu samples, the job %u", (unsigned long long)ds->samples,
                 v->vj.nrows);
        return -1;
    }
    for (uint32_t k = 0; k < K; k++) {
        if (sfl_vertical_block(d, K, k, &col0, &len) < 0)
            break;
        if (ds->first_column == col0 + 1 && ds->dimension == len)
            return (int)k;
    }
    if (sfl_vertical_block(d, K, 0, &col0, &len) < 0)
        len = 0;
    snprintf(why, cap, "block [%u, %llu] is not one of the job's %u blocks of %u columns "
             "(the first is [1, %u])", ds->first_column,
             (unsigned long long)ds->first_column + ds->dimension - 1, K, d, len);
    return -1;
}

void coord_vjob_begin(coord_vjob_t *v, const sfl_job_spec_t *s, uint64_t round, double *state,
                      size_t dim)
{
    uint32_t n;

    if (v->saved_round == round)
        memcpy(state, v->saved, dim * sizeof(double));
    else
        memcpy(v->saved, state, dim * sizeof(double));
    v->saved_round = round;

    coord_vjob_span(s, round, &v->t, &n);
    v->end = v->t + n;
    memset(v->got, 0, v->vj.nclients);
    v->ngot = 0;
}

coord_upd_verdict_t coord_vjob_answer(coord_vjob_t *v, uint32_t k, uint64_t iteration,
                                      const uint8_t *msg, size_t len, char *why, size_t cap)
{
    const sfl_vertical_ops_t *ops = v->vj.algo->vertical;

    if (iteration != v->t || v->t >= v->end) {
        snprintf(why, cap, "iteration %llu is not the one open (%llu)",
                 (unsigned long long)iteration, (unsigned long long)v->t);
        return COORD_UPD_WRONG_ROUND;
    }
    if (k >= v->vj.nclients)
        return COORD_UPD_REJECTED;
    if (v->got[k]) {
        snprintf(why, cap, "already answered iteration %llu", (unsigned long long)iteration);
        return COORD_UPD_DUPLICATE;
    }
    if (sfl_msg_values_decode(msg, len, v->nm, ops->msg_ints, v->msgs + (size_t)k * v->nm) < 0) {
        snprintf(why, cap, "%s", sfl_last_error());
        return COORD_UPD_REJECTED;
    }
    v->got[k] = 1;
    v->ngot++;
    return COORD_UPD_ACCEPTED;
}

int coord_vjob_complete(const coord_vjob_t *v)
{
    return v->ngot == v->vj.nclients;
}

int coord_vjob_advance(coord_vjob_t *v, double *state)
{
    double *x = state, *b = state + v->vj.prob->dim;
    int rc;

    if (!coord_vjob_complete(v) || v->t >= v->end)
        return sfl__fail(SFL_EINVAL, "iteration %llu is not complete",
                         (unsigned long long)v->t);
    if ((rc = v->vj.algo->vertical->server_step(&v->vj, v->t, v->rows, x, b)) < 0)
        return rc;
    v->t++;
    memset(v->got, 0, v->vj.nclients);
    v->ngot = 0;
    return v->t == v->end;
}

int coord_vjob_spent(const coord_vjob_t *v, uint64_t iters, sfl_dp_spent_t *spent, int *priv)
{
    return sfl_vertical_privacy(&v->vj, iters, spent, priv);
}

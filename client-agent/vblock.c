/* The agent's side of a vertical job: vblock.h. */
#include "vblock.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/dp/dp.h"
#include "sfl/core/file.h"
#include "sfl/model/loss.h"
#include "sfl/algo/vertical.h"

struct agent_vert {
    uint64_t job, round;
    uint32_t attempt;
    uint64_t first, end, next; /* the round's iterations; the next to answer */
    sfl_algo_params_t params;
    sfl_problem_t prob;
    sfl_vjob_t vj;
    sfl_vblock_t blk;
    sfl_dataset_t *data;       /* the block, targets coded by the job's labels */
    void *common, *state;
    double *msg;
    size_t nm, nb;
    int test_noise;
    /* the objective at the round's starting model, from the answer to its
     * first iteration (agent_vert_objective); rows 0: none */
    double objective;
    uint64_t objective_rows;
};

int agent_vert_ids_hash(const char *ids_file, uint32_t rows, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    crypto_generichash_state st;
    uint8_t *buf = NULL;
    size_t len = 0, i = 0, line = 0, n = 0;
    int rc;

    if ((rc = sfl_file_read(ids_file, (size_t)1 << 30, &buf, &len)) < 0)
        return sfl__wrap(rc, "ids_file %s", ids_file);
    crypto_generichash_init(&st, NULL, 0, SFL_MSG_HASH_BYTES);
    while (i < len) {
        size_t a, b, e = i;

        while (e < len && buf[e] != '\n')
            e++;
        line++;
        for (a = i; a < e && (buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\r'); a++)
            ;
        for (b = e; b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\t' || buf[b - 1] == '\r'); b--)
            ;
        if (b == a) {
            if (e < len || i < e) { /* a blank line, not the end of the file */
                rc = sfl__fail(SFL_EINVAL, "%s:%zu: empty sample id", ids_file, line);
                goto out;
            }
        } else {
            crypto_generichash_update(&st, buf + a, b - a);
            crypto_generichash_update(&st, (const uint8_t *)"\n", 1);
            n++;
        }
        i = e + 1;
    }
    if (n != rows) {
        rc = sfl__fail(SFL_EINVAL, "%s: %zu sample ids for %u rows of data", ids_file, n, rows);
        goto out;
    }
    crypto_generichash_final(&st, hash, SFL_MSG_HASH_BYTES);
    rc = 0;
out:
    sfl_file_free(buf, len);
    return rc;
}

static void free_job(agent_vert_t *c)
{
    const sfl_vertical_ops_t *ops = c->vj.algo ? c->vj.algo->vertical : NULL;

    if (ops != NULL) {
        ops->client_free(c->state);
        if (c->common != NULL)
            ops->common_free(c->common);
    }
    c->state = c->common = NULL;
    sfl_dataset_free(c->data);
    c->data = NULL;
    sfl__free(c->msg);
    c->msg = NULL;
}

void agent_vert_free(agent_vert_t *c)
{
    if (c == NULL)
        return;
    free_job(c);
    sfl__free(c);
}

void agent_vert_round(const agent_vert_t *c, uint64_t *job, uint64_t *round, uint32_t *attempt,
                      uint64_t *first)
{
    *job = c->job;
    *round = c->round;
    *attempt = c->attempt;
    *first = c->first;
}

/* The job as the task describes it, into c (params, prob, vj). */
static int job_view(agent_vert_t *c, const sfl_task_t *t, const agent_vert_cfg_t *cfg)
{
    const sfl_algo_t *algo = sfl_algo_find(t->algorithm);
    const sfl_loss_t *loss = sfl_loss_find(t->loss);
    uint32_t col0, len, k;
    int rc;

    if (algo == NULL || algo->shape != SFL_SHAPE_VERTICAL)
        return sfl__fail(SFL_EUNSUP, "task: '%s' is not a vertical algorithm this agent knows",
                         t->algorithm);
    if (loss == NULL)
        return sfl__fail(SFL_EUNSUP, "task: unknown loss '%s'", t->loss);
    if ((rc = sfl_algo_params_from_list(algo, &t->params, &c->params)) < 0)
        return sfl__wrap(rc, "task");
    if ((rc = sfl_problem_init(&c->prob, loss, t->dimension,
                               loss->classification ? t->nlabels : 0)) < 0)
        return rc;
    c->vj = (sfl_vjob_t){.algo = algo, .p = &c->params, .prob = &c->prob, .nrows = t->rows,
                         .nclients = t->clients, .iters = t->iterations, .seed = t->seed};
    if ((rc = sfl_vertical_check(&c->vj)) < 0)
        return sfl__wrap(rc, "task");
    if (cfg->data->X->nrows != t->rows)
        return sfl__fail(SFL_EDIM, "task: %u samples, this agent holds %u", t->rows,
                         cfg->data->X->nrows);
    for (k = 0; k < t->clients; k++)
        if (sfl_vertical_block(t->dimension, t->clients, k, &col0, &len) == 0 &&
            col0 + 1 == cfg->first_column && len == cfg->data->X->ncols)
            break;
    if (k == t->clients)
        return sfl__fail(SFL_EDIM, "task: columns [%u, %u] are not one of the job's %u blocks "
                         "of %u columns", cfg->first_column,
                         cfg->first_column + cfg->data->X->ncols - 1, t->clients, t->dimension);
    c->blk.client = k;
    c->blk.col0 = cfg->first_column - 1;
    return 0;
}

/* The block with its targets coded by the task's labels (class ids), as
 * sfl-sim holds it; regression targets as they are. */
static int code_block(agent_vert_t *c, const sfl_task_t *t, const sfl_dataset_t *data)
{
    sfl_dataset_t *d;
    int rc;

    if ((rc = sfl_dataset_columns(data, 0, data->X->ncols, &d)) < 0)
        return rc;
    if (c->prob.loss->classification) {
        for (uint32_t r = 0; r < d->X->nrows; r++) {
            uint32_t cls = 0;

            while (cls < t->nlabels && t->labels[cls] != d->y[r])
                cls++;
            if (cls == t->nlabels) {
                rc = sfl__fail(SFL_EINVAL, "row %u: target %.17g is not among the job's labels",
                               r + 1, d->y[r]);
                sfl_dataset_free(d);
                return rc;
            }
            d->y[r] = cls;
        }
    }
    c->data = d;
    c->blk.data = d;
    return 0;
}

/* ---- the ledger ------------------------------------------------------- */

typedef struct ledger {
    double epsilon, delta;
    uint64_t iters, reserved, round;
    uint32_t attempt;
} ledger_t;

static void ledger_path(const agent_vert_cfg_t *cfg, uint64_t job, char *path, size_t cap)
{
    snprintf(path, cap, "%s/privacy-%" PRIu64 ".ledger", cfg->state_dir, job);
}

/* 0 and *l, SFL_ENOTFOUND for none, SFL_EPARSE for a damaged file. */
static int ledger_read(const char *path, ledger_t *l)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char text[512];
    int rc;

    rc = sfl_file_read(path, sizeof(text) - 1, &buf, &len);
    if (rc == -ENOENT || rc == SFL_ENOTFOUND)
        return SFL_ENOTFOUND;
    if (rc < 0)
        return rc;
    memcpy(text, buf, len);
    text[len] = '\0';
    sfl_file_free(buf, len);
    if (sscanf(text, "sfl-privacy-ledger 1\nepsilon %lg\ndelta %lg\niterations %" SCNu64
               "\nreserved %" SCNu64 "\nlast %" SCNu64 " %" SCNu32,
               &l->epsilon, &l->delta, &l->iters, &l->reserved, &l->round, &l->attempt) != 6)
        return sfl__fail(SFL_EPARSE, "%s: not a privacy ledger this agent wrote", path);
    return 0;
}

static int ledger_write(const char *path, const ledger_t *l)
{
    char text[512];
    int n = snprintf(text, sizeof(text),
                     "sfl-privacy-ledger 1\nepsilon %.17g\ndelta %.17g\niterations %" PRIu64
                     "\nreserved %" PRIu64 "\nlast %" PRIu64 " %" PRIu32 "\n",
                     l->epsilon, l->delta, l->iters, l->reserved, l->round, l->attempt);

    return sfl_file_write_atomic(path, text, (size_t)n);
}

/* The privacy rules of vertical.h for task t; reserves its iterations. */
static int reserve(const agent_vert_t *c, const sfl_task_t *t, const agent_vert_cfg_t *cfg)
{
    sfl_dp_spent_t spent;
    ledger_t l, now;
    char path[1200];
    int priv, rc;

    if ((rc = sfl_vertical_privacy(&c->vj, t->round_iterations, &spent, &priv)) < 0)
        return rc;
    if (!priv)
        return 0;
    now = (ledger_t){.epsilon = sfl_algo_param_or(&c->params, "epsilon", 0),
                     .delta = sfl_vertical_delta(&c->vj), .iters = t->iterations};
    ledger_path(cfg, t->job_id, path, sizeof(path));
    rc = ledger_read(path, &l);
    if (rc == SFL_ENOTFOUND)
        l = now;
    else if (rc < 0)
        return rc;
    else if (l.epsilon != now.epsilon || l.delta != now.delta || l.iters != now.iters)
        return sfl__fail(SFL_EINVAL, "job %" PRIu64 " asks for (epsilon %.6g, delta %.6g) over "
                         "%" PRIu64 " iterations; it began with (%.6g, %.6g) over %" PRIu64,
                         t->job_id, now.epsilon, now.delta, now.iters, l.epsilon, l.delta,
                         l.iters);
    else if (t->round < l.round || (t->round == l.round && t->attempt <= l.attempt))
        return sfl__fail(-EEXIST, "round %" PRIu64 " attempt %u was answered before "
                         "(ledger %s): waiting for a new attempt", t->round, t->attempt, path);
    if (l.reserved + t->round_iterations > l.iters)
        return sfl__fail(SFL_ELIMIT, "privacy budget of job %" PRIu64 " exhausted: %" PRIu64
                         " of its %" PRIu64 " iterations answered, round %" PRIu64 " needs %u",
                         t->job_id, l.reserved, l.iters, t->round, t->round_iterations);
    if (cfg->max_epsilon > 0) {
        if ((rc = sfl_vertical_privacy(&c->vj, l.reserved + t->round_iterations, &spent,
                                       &priv)) < 0)
            return rc;
        if (sfl_vertical_budget_eps(&c->vj, &spent) > cfg->max_epsilon)
            return sfl__fail(SFL_ELIMIT, "job %" PRIu64 " would spend epsilon %.6g of this "
                             "agent's data, above its max_epsilon %.6g", t->job_id,
                             sfl_vertical_budget_eps(&c->vj, &spent), cfg->max_epsilon);
    }
    l.reserved += t->round_iterations;
    l.round = t->round;
    l.attempt = t->attempt;
    return ledger_write(path, &l);
}

/* ---- rounds and steps ------------------------------------------------- */

int agent_vert_begin(agent_vert_t **ctx, const sfl_task_t *t, const agent_vert_cfg_t *cfg)
{
    agent_vert_t *old = *ctx, *c;
    const sfl_vertical_ops_t *ops;
    int rc, carry;

    if (old != NULL && old->job == t->job_id && old->round == t->round &&
        old->attempt == t->attempt)
        return sfl__fail(-EEXIST, "round %" PRIu64 " attempt %u is in hand", t->round,
                         t->attempt);
    if ((c = sfl__calloc(1, sizeof(*c))) == NULL)
        return SFL_ENOMEM;
    if ((rc = job_view(c, t, cfg)) < 0)
        goto fail;
    ops = c->vj.algo->vertical;
    c->nb = ops->bcast_len(&c->vj);
    c->nm = ops->msg_len(&c->vj);
    if (t->model == NULL || t->model->dim != c->nb) {
        rc = sfl__fail(SFL_EDIM, "task: broadcast of %u values, the job's has %zu",
                       t->model ? t->model->dim : 0, c->nb);
        goto fail;
    }
    /* the job's common object and block state carry over between rounds:
     * borrowed until the round is reserved, then taken */
    carry = old != NULL && old->job == t->job_id && old->vj.iters == c->vj.iters &&
            old->vj.nrows == c->vj.nrows && old->vj.nclients == c->vj.nclients &&
            old->vj.seed == c->vj.seed && old->blk.client == c->blk.client &&
            old->common != NULL && memcmp(&old->params, &c->params, sizeof(c->params)) == 0;
    if (carry)
        c->vj.common = old->common;
    else {
        if ((rc = code_block(c, t, cfg->data)) < 0 ||
            (ops->common_new != NULL && (rc = ops->common_new(&c->vj, &c->common)) < 0))
            goto fail;
        c->vj.common = c->common;
        if ((rc = ops->client_new(&c->vj, &c->blk, &c->state)) < 0)
            goto fail;
        if ((c->msg = sfl__calloc(c->nm, sizeof(double))) == NULL) {
            rc = SFL_ENOMEM;
            goto fail;
        }
    }
    if ((rc = reserve(c, t, cfg)) < 0)
        goto fail;
    if (carry) {
        c->common = old->common;
        c->state = old->state;
        c->data = old->data;
        c->msg = old->msg;
        c->blk.data = c->data;
        old->common = old->state = NULL;
        old->data = NULL;
        old->msg = NULL;
    }
    c->job = t->job_id;
    c->round = t->round;
    c->attempt = t->attempt;
    c->first = c->next = t->first_iteration;
    c->end = t->first_iteration + t->round_iterations;
    c->test_noise = cfg->test_noise;
    agent_vert_free(old);
    *ctx = c;
    return 0;
fail:
    agent_vert_free(c);
    return rc;
}

int agent_vert_step(agent_vert_t *c, uint64_t it, const double *b, size_t nb, uint8_t **msg,
                    size_t *len)
{
    const sfl_vertical_ops_t *ops = c->vj.algo->vertical;
    sfl_dp_rng_t noise;
    uint8_t *out;
    size_t n;
    int rc;

    *msg = NULL;
    if (it < c->next || it >= c->end)
        return sfl__fail(SFL_EINVAL, "iteration %" PRIu64 " is not one this agent may answer "
                         "(next %" PRIu64 ", round ends before %" PRIu64 ")", it, c->next,
                         c->end);
    if (nb != c->nb)
        return sfl__fail(SFL_EDIM, "broadcast of %zu values, the job's has %zu", nb, c->nb);
    if (c->test_noise)
        sfl_dp_rng_seeded(&noise, c->vj.seed, it, c->blk.client);
    else if ((rc = sfl_dp_rng_secure(&noise)) < 0)
        return rc;
    if ((rc = sfl_vertical_client_step(&c->vj, &c->blk, it, b, c->state, &noise, c->msg)) < 0)
        return rc;
    if (it == c->first) {
        double f;

        if ((rc = sfl_vertical_objective(&c->vj, &c->blk, b, &f)) < 0)
            return rc;
        c->objective = rc == 1 ? f : 0.0;
        c->objective_rows = rc == 1 ? c->vj.nrows : 0;
    }
    n = sfl_msg_values_bytes(c->nm, ops->msg_ints);
    if ((out = sfl__malloc(n)) == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_msg_values_encode(c->msg, c->nm, ops->msg_ints, out)) < 0) {
        sfl__free(out);
        return rc;
    }
    /* never twice: a later step may only move on */
    c->next = it + 1;
    *msg = out;
    *len = n;
    return 0;
}

void agent_vert_objective(const agent_vert_t *c, uint64_t it, double *f, uint64_t *rows)
{
    int have = c != NULL && it == c->first && c->next > c->first;

    *f = have ? c->objective : 0.0;
    *rows = have ? c->objective_rows : 0;
}

/* The statistics round (docs/protocol.md "Statistics round"), the round
 * kind of a standardize job's round 0 when sealed: the moments of the
 * local training rows, sealed and submitted like an update (under update
 * mode 2 the secure aggregation kind sends them: agent_stats_moments).
 * Its state is what the round gave the job's later rounds: the pooled
 * moments, as the tasks' moments_hash names them, and the local rows
 * standardised with them, which every kind that trains on the job's rows
 * reads through agent__std_data. */
#include "agent_int.h"

#include <inttypes.h>
#include <string.h>

#include <sodium.h>

#include "sagent.h"
#include "sfl/core/alloc.h"
#include "sfl/model/eval.h"

/* The pooled moments of job `job` and the training and held-out rows
 * standardised with them (built by the first work that needs them, on the
 * thread pool; the loop replaces them only with no work in flight). Kept
 * for the session: a new Join brings them again. */
typedef struct stats_state {
    uint64_t job; /* 0: none */
    uint8_t hash[SFL_MSG_HASH_BYTES];
    double *moments;
    double eps;
    sfl_dataset_t *train, *eval;
} stats_state_t;

/* The moments of data over t's dimension as a vector (owned; wipe before
 * freeing): sfl_dataset_moments from zeros, as sfl-sim makes each
 * client's. */
static int moments_of(const sfl_task_t *t, const sfl_dataset_t *data, sfl_spvec_t **out)
{
    size_t n = SFL_MOMENTS_LEN(t->dimension);
    double *m = NULL;
    sfl_spvec_t *v = NULL;
    int rc;

    *out = NULL;
    if (n > UINT32_MAX)
        return sfl__fail(SFL_ELIMIT, "statistics of %u features", t->dimension);
    if ((m = sfl__calloc(n, sizeof(double))) == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_dataset_moments(data, t->dimension, m)) < 0 ||
        (rc = sfl_spvec_new((uint32_t)n, 0, &v)) < 0 || (rc = sfl_spvec_from_dense(v, m)) < 0)
        goto out;
    *out = v;
    v = NULL;
out:
    /* the moments summarise private rows: wiped like an update */
    sodium_memzero(m, n * sizeof(double));
    sfl__free(m);
    agent__wipe_update(v);
    return rc;
}

int agent_stats_moments(const sfl_task_t *t, const sfl_dataset_t *data, sfl_spvec_t **out)
{
    int rc;

    *out = NULL;
    if (!t->statistics || t->secagg == NULL)
        return sfl__fail(SFL_EINVAL, "not a secure aggregation statistics task");
    /* every value within the job's bound, or the moments would not fit */
    if ((rc = agent_sa_stats_check(data, t->secagg->clip)) < 0)
        return rc;
    return moments_of(t, data, out);
}

int agent_stats_task(const sfl_task_t *t, const sfl_dataset_t *data, const sfl_identity_t *id,
                     uint64_t agent_id, uint8_t **msg, size_t *len)
{
    sfl_spvec_t *v = NULL;
    sfl_payload_t pl;
    int rc;

    *msg = NULL;
    *len = 0;
    if (!t->statistics)
        return sfl__fail(SFL_EINVAL, "not a statistics task");
    if ((rc = moments_of(t, data, &v)) < 0)
        return rc;
    memset(&pl, 0, sizeof(pl));
    pl.update = v;
    pl.encoding = SFL_ENC_F64;
    pl.samples = data->X->nrows;
    rc = agent_seal_payload(t, &pl, id, agent_id, msg, len);
    agent__wipe_update(v);
    return rc;
}

/* A copy of src (a one-part concat) widened to d columns, x -> (x - mu) *
 * scale. */
static int std_copy(const sfl_dataset_t *src, uint32_t d, const double *mu,
                    const double *scale, sfl_dataset_t **out)
{
    sfl_dataset_t *parts[1] = {(sfl_dataset_t *)src}, *c = NULL;
    int rc;

    *out = NULL;
    if ((rc = sfl_dataset_concat(parts, 1, &c)) < 0 || (rc = sfl_dataset_set_ncols(c, d)) < 0 ||
        (rc = sfl_dataset_standardize(c, d, mu, scale)) < 0) {
        sfl_dataset_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int agent_standardize(const double *moments, uint32_t d, double eps, const sfl_dataset_t *data,
                      const sfl_dataset_t *eval, sfl_dataset_t **sdata, sfl_dataset_t **seval)
{
    sfl_dataset_t *sd = NULL, *se = NULL;
    double *mu = NULL;
    int rc;

    *sdata = *seval = NULL;
    if ((mu = sfl__mallocarray(2 * (size_t)d, sizeof(double))) == NULL)
        return SFL_ENOMEM;
    if ((rc = sfl_moments_standardizer(moments, d, eps, mu, mu + d)) < 0) {
        rc = sfl__wrap(rc, "the job's statistics");
        goto out;
    }
    if ((rc = std_copy(data, d, mu, mu + d, &sd)) < 0 ||
        (eval != NULL && (rc = std_copy(eval, d, mu, mu + d, &se)) < 0))
        goto out;
    *sdata = sd;
    *seval = se;
    sd = se = NULL;
out:
    sfl_dataset_free(sd);
    sfl_dataset_free(se);
    sfl__free(mu);
    return rc;
}

/* ---- the job's statistics, for the rounds after it ------------------------ */

int agent__std_held(const agent_ctx_t *a, const sfl_task_t *t)
{
    const stats_state_t *s = agent__kind_state(a, &agent_shape_stats);

    return s->job == t->job_id && s->moments != NULL &&
           sodium_memcmp(s->hash, t->moments_hash, sizeof(s->hash)) == 0;
}

static void drop_rows(stats_state_t *s)
{
    sfl_dataset_free(s->train);
    sfl_dataset_free(s->eval);
    s->train = s->eval = NULL;
}

/* Moments that came with the task are checked and kept, else the ones kept
 * must be the ones it names (no work in flight). */
int agent__std_for(agent_ctx_t *a, sfl_task_t *t, char *why, size_t cap)
{
    stats_state_t *s = agent__kind_state(a, &agent_shape_stats);
    double *mu = NULL;
    int rc;

    if (!t->has_moments)
        return 0;
    if (a->work != NULL) {
        snprintf(why, cap, "statistics arrived while training");
        return SFL_EINVAL;
    }
    if (t->moments != NULL) {
        /* the same check the work's standardizer makes, before anything
         * kept is replaced: a summary of no rows, or a negative variance,
         * is refused here (their length and hash unpack checked) */
        if ((mu = sfl__mallocarray(2 * (size_t)t->dimension, sizeof(double))) == NULL) {
            snprintf(why, cap, "out of memory");
            return SFL_ENOMEM;
        }
        rc = sfl_moments_standardizer(t->moments, t->dimension, t->standardize_eps, mu,
                                      mu + t->dimension);
        sfl__free(mu);
        if (rc < 0) {
            snprintf(why, cap, "the job's statistics are not usable: %s", sfl_last_error());
            return rc;
        }
        sfl__free(s->moments);
        drop_rows(s);
        s->moments = t->moments;
        t->moments = NULL;
        s->job = t->job_id;
        memcpy(s->hash, t->moments_hash, sizeof(s->hash));
        s->eps = t->standardize_eps;
        agent__say(a, SFL_LOG_INFO, "statistics", "job=%" PRIu64 " rows=%.17g features=%u eps=%g",
                   t->job_id, s->moments[0], t->dimension, t->standardize_eps);
        return 0;
    }
    if (!agent__std_held(a, t)) {
        snprintf(why, cap, "the task names statistics this agent does not hold");
        return SFL_ENOTFOUND;
    }
    if (s->eps != t->standardize_eps) {
        drop_rows(s);
        s->eps = t->standardize_eps;
    }
    return 0;
}

int agent__std_data(agent_ctx_t *a, const sfl_task_t *t, const sfl_dataset_t **data,
                    const sfl_dataset_t **eval)
{
    stats_state_t *s = agent__kind_state(a, &agent_shape_stats);
    int rc;

    *data = a->data;
    *eval = a->eval;
    if (!t->has_moments)
        return 0;
    if (s->train == NULL &&
        (rc = agent_standardize(s->moments, t->dimension, s->eps, a->data, a->eval, &s->train,
                                &s->eval)) < 0)
        return rc;
    *data = s->train;
    *eval = s->eval;
    return 0;
}

/* ---- the kind ------------------------------------------------------------- */

static int stats_claims(const sfl_task_t *t)
{
    return t->statistics;
}

static agent_state_t stats_task(agent_ctx_t *a, void *st, sfl_task_t *t, agent_state_t from)
{
    (void)st;
    return agent__sealed_task(a, &agent_shape_stats, t, from);
}

/* a statistics round trains nothing: the client state stays as it is */
static int stats_trains(const sfl_task_t *t)
{
    (void)t;
    return 0;
}

static void stats_work(agent_ctx_t *a, agent_work_t *w)
{
    w->rc = agent_stats_task(w->task, a->data, a->id, w->agent_id, &w->msg, &w->len);
}

static void stats_close(void *st)
{
    stats_state_t *s = st;

    sfl__free(s->moments);
    drop_rows(s);
}

const agent_shape_t agent_shape_stats = {
    .name = "statistics",
    .job_kind = "horizontal",
    .state_size = sizeof(stats_state_t),
    .claims = stats_claims,
    .task = stats_task,
    .prepare = agent__std_for,
    .trains = stats_trains,
    .work = stats_work,
    .trained = agent__sealed_trained,
    .outbox = 1,
    .close = stats_close,
};

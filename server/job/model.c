#include "job/model.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"
#include "sfl/crypto/seal.h"

void coord_job_round_cfg(const sfl_job_spec_t *s, coord_round_cfg_t *out)
{
    /* secure aggregation: a phase per stage of its protocol (sfl/crypto/secagg.h),
     * each with the round's deadline; the driver sets their quorum to the
     * threshold once the cohort is known (server/round/saround.c) */
    static const char *const sa_phase[5] = {"advertise", "share", "input", "consist",
                                            "unmask"};

    *out = (coord_round_cfg_t){.cohort = s->cohort_size,
                               .overselect = s->over_selection,
                               .min_quorum = s->min_quorum,
                               .deadline_ms = s->round_deadline_ms,
                               .heartbeat_ms = s->heartbeat_timeout_ms,
                               .max_attempts = s->max_attempts};
    if (!s->secagg)
        return;
    out->nphases = 5;
    for (uint32_t p = 0; p < 5; p++) {
        snprintf(out->phases[p].name, sizeof(out->phases[p].name), "%s", sa_phase[p]);
        out->phases[p].deadline_ms = s->round_deadline_ms;
        out->phases[p].quorum = s->min_quorum;
    }
}

void coord_job_stats_cfg(const sfl_job_spec_t *s, coord_round_cfg_t *out)
{
    /* a cohort no federation reaches: the sample is every candidate */
    *out = (coord_round_cfg_t){.cohort = UINT32_MAX / 4,
                               .overselect = 0,
                               .min_quorum = s->min_quorum,
                               .deadline_ms = s->round_deadline_ms,
                               .heartbeat_ms = s->heartbeat_timeout_ms,
                               .max_attempts = s->max_attempts,
                               .nphases = 1};
    out->phases[0] = (coord_phase_t){"statistics", s->round_deadline_ms, 0, s->min_quorum};
    if (s->secagg) {
        /* mode 2: the training rounds' five stages (their quorum is set
         * to the threshold when the cohort is known) */
        coord_round_cfg_t t;

        coord_job_round_cfg(s, &t);
        out->nphases = t.nphases;
        memcpy(out->phases, t.phases, sizeof(out->phases));
    }
}

int coord_job_eligible(const sfl_job_spec_t *s, const coord_agent_info_t *a)
{
    return coord_job_ineligible(s, a, NULL, 0) == COORD_INELIG_NONE;
}

coord_inelig_t coord_job_ineligible(const sfl_job_spec_t *s, const coord_agent_info_t *a,
                                    char *why, size_t cap)
{
    char tmp[1];

    if (why == NULL) {
        why = tmp;
        cap = sizeof(tmp);
    }
    if (a->ncols != s->dimension) {
        snprintf(why, cap, "data has %u features, the job %u", a->ncols, s->dimension);
        return COORD_INELIG_FEATURES;
    }
    if (a->samples == 0) {
        snprintf(why, cap, "no samples");
        return COORD_INELIG_SAMPLES;
    }
    /* An agent may lack some classes locally (label skew), never have more. */
    if (s->nlabels == 0 ? a->nclasses != 0 : a->nclasses > s->nlabels) {
        snprintf(why, cap, "data has %u classes, the job %u", a->nclasses, s->nlabels);
        return COORD_INELIG_CLASSES;
    }
    for (uint32_t i = 0; i < s->required_conditions.n; i++) {
        const char *c = s->required_conditions.tag[i];
        uint32_t k = 0;

        while (k < a->nconditions && strcmp(a->conditions[k], c) != 0)
            k++;
        if (k == a->nconditions) {
            snprintf(why, cap, "condition %s not reported", c);
            return COORD_INELIG_CONDITION;
        }
    }
    return COORD_INELIG_NONE;
}

int coord_model_setup(coord_model_t *j, const sfl_job_spec_t *spec)
{
    int rc;

    memset(j, 0, sizeof(*j));
    if ((rc = coord_job_spec_check(spec)) < 0)
        return rc;
    j->spec = *spec;
    coord_job_round_cfg(spec, &j->rcfg);
    j->limits = (sfl_fold_limits_t){.max_norm = spec->max_update_norm,
                                    .max_weight = spec->max_samples};
    j->algo = sfl_algo_find(spec->algorithm);
    if ((rc = coord_job_spec_params(spec, &j->params)) < 0 ||
        (rc = sfl_problem_init(&j->prob, sfl_loss_find(spec->loss), spec->dimension,
                               spec->nlabels)) < 0)
        return rc;
    j->dim = j->prob.dim;
    if (j->algo->shape == SFL_SHAPE_VERTICAL) {
        if ((rc = coord_vjob_setup(&j->vert, spec, &j->params, &j->prob)) < 0)
            return rc;
        j->v = &j->vert;
        j->dim += j->v->nb;
    }
    return 0;
}

int coord_model_init(coord_model_t *j, const sfl_job_spec_t *spec)
{
    int rc = coord_model_setup(j, spec);

    return rc < 0 ? rc : coord_model_open(j);
}

void coord_model_start_model(coord_model_t *j)
{
    /* From the job's seed: zeros for a linear loss, a random MLP; what
     * sfl-sim starts from with the same seed. */
    memset(j->global, 0, j->dim * sizeof(double));
    sfl_loss_init_model(j->prob.loss, j->prob.ncols, j->prob.nclasses, j->spec.seed, j->global);
    j->round = 0;
}

int coord_model_open(coord_model_t *j)
{
    int rc;

    assert(j->global == NULL);
    j->round = 0;
    j->global = sfl__calloc(j->dim, sizeof(double));
    if (j->global == NULL)
        return SFL_ENOMEM;
    coord_model_start_model(j);
    if (j->v != NULL) {
        if ((rc = coord_vjob_open(j->v)) < 0)
            coord_model_close(j);
        return rc;
    }
    /* The fold keeps pointers to the job's own copies. */
    if ((rc = sfl_fold_init(&j->agg, j->algo, &j->params, &j->prob, &j->limits)) < 0) {
        coord_model_close(j);
        return rc;
    }
    return 0;
}

static void drop_held(coord_model_t *j)
{
    for (uint32_t i = 0; i < j->nslots; i++)
        sfl_spvec_free(j->held[i].update);
    sfl__free(j->held);
    j->held = NULL;
    j->nslots = 0;
}

void coord_model_close(coord_model_t *j)
{
    drop_held(j);
    if (j->agg.sum)
        sfl_fold_close(&j->agg);
    if (j->v != NULL)
        coord_vjob_close(j->v);
    sfl__free(j->global);
    j->global = NULL;
}

int coord_model_encode(const coord_model_t *j, uint8_t **buf, size_t *len, uint8_t hash[32])
{
    sfl_spvec_t *v = NULL;
    uint8_t *b = NULL;
    size_t n;
    int rc;

    *buf = NULL;
    if ((rc = sfl_spvec_new((uint32_t)j->dim, 0, &v)) < 0)
        return rc;
    if ((rc = sfl_spvec_from_dense(v, j->global)) < 0)
        goto out;
    /* Always float64, whatever the job's update encoding: restart, recovery
     * and ExportModel read back exactly the model the job holds. */
    n = sfl_spcodec_size(v, SFL_ENC_F64);
    b = sfl__malloc(n);
    if (b == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if ((rc = sfl_spcodec_encode(v, SFL_ENC_F64, b, n, len)) < 0)
        goto out;
    sfl_seal_hash(b, *len, hash);
    *buf = b;
    b = NULL;
out:
    sfl__free(b);
    sfl_spvec_free(v);
    return rc;
}

int coord_model_restore(coord_model_t *j, uint64_t round, const uint8_t *buf, size_t len)
{
    sfl_spvec_t *v;
    int rc = sfl_spcodec_decode(buf, len, (uint32_t)j->dim, (uint32_t)j->dim, &v);

    if (rc < 0)
        return rc;
    if (v->dim != j->dim) {
        sfl_spvec_free(v);
        return sfl__fail(SFL_EDIM, "checkpoint has dimension %u, the job %zu", v->dim, j->dim);
    }
    memset(j->global, 0, j->dim * sizeof(double));
    sfl_spvec_scatter(v, j->global);
    sfl_spvec_free(v);
    j->round = round;
    return 0;
}

int coord_model_begin(coord_model_t *j, uint32_t nslots)
{

    drop_held(j);
    j->aggregating = 0;
    if (j->spec.ordered_aggregation) {
        j->held = sfl__calloc(nslots ? nslots : 1, sizeof(*j->held));
        if (j->held == NULL)
            return SFL_ENOMEM;
        j->nslots = nslots;
    }
    sfl_fold_begin(&j->agg);
    j->aggregating = 1;
    return 0;
}

int coord_model_add(coord_model_t *j, uint32_t slot, sfl_spvec_t **update, double weight)
{
    int rc;

    if (!j->aggregating)
        return sfl__fail(SFL_EINVAL, "no round is being aggregated");
    if (!j->spec.ordered_aggregation)
        return sfl_fold_add(&j->agg, *update, weight);
    if (slot >= j->nslots)
        return sfl__fail(SFL_EINVAL, "cohort slot %u of %u", slot, j->nslots);
    if (j->held[slot].update != NULL)
        return sfl__fail(SFL_EINVAL, "cohort slot %u already has an update", slot);
    /* The fold's checks now, so that end cannot fail on what an agent sent
     * (bounded updates cannot overflow the sum either). */
    if ((rc = sfl_fold_check(&j->agg, *update, weight)) < 0)
        return rc;
    j->held[slot].update = *update;
    j->held[slot].weight = weight;
    *update = NULL;
    return 0;
}

int coord_model_end(coord_model_t *j)
{
    int rc = 0;

    if (!j->aggregating)
        return sfl__fail(SFL_EINVAL, "no round is being aggregated");
    /* In slot order, bit for bit the per-update fold, tile by tile. */
    rc = sfl_fold_add_many(&j->agg, j->held, j->nslots);
    drop_held(j);
    if (rc == 0)
        rc = sfl_fold_finish(&j->agg, j->global);
    j->aggregating = 0;
    if (rc == 0)
        j->round++;
    return rc;
}

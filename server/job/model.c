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

void coord_job_spec_default(sfl_job_spec_t *s)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "job");
    snprintf(s->algorithm, sizeof(s->algorithm), "fediterht");
    snprintf(s->loss, sizeof(s->loss), "lsq");
    s->rounds = 10;
    s->cohort_size = 8;
    s->over_selection = 0.25;
    s->min_quorum = 6;
    s->round_deadline_ms = 60000;
    s->heartbeat_timeout_ms = 30000;
    s->max_attempts = 3;
    s->value_encoding = SFL_ENC_F64;
    s->seed = 1;
    s->standardize_eps = SFL_STANDARDIZE_EPS;
    s->standardize_bound = COORD_STANDARDIZE_BOUND;
}

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

double coord_job_std_bound(const sfl_job_spec_t *s)
{
    return s->standardize_bound > 0 ? s->standardize_bound : COORD_STANDARDIZE_BOUND;
}

double coord_job_std_eps(const sfl_job_spec_t *s)
{
    return s->standardize_eps > 0 ? s->standardize_eps : SFL_STANDARDIZE_EPS;
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long x;

    if (*v == '-' || *v == '\0')
        return -1;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*end || errno || x > max)
        return -1;
    *out = x;
    return 0;
}

static int parse_f64(const char *v, double *out)
{
    char *end;
    double x;

    errno = 0;
    x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x))
        return -1;
    *out = x;
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *v)
{
    size_t n = strlen(v);

    if (n == 0 || n >= cap)
        return -1;
    memcpy(dst, v, n + 1);
    return 0;
}

/* Key table: integer keys write a uint32/uint64 at an offset, doubles
 * likewise, flags (0 or 1) an int. */
typedef enum { K_U32, K_U64, K_F64, K_FLAG } key_type_t;

static const struct {
    const char *key;
    key_type_t type;
    size_t off;
} numeric[] = {
#define F(k, t, field) {k, t, offsetof(sfl_job_spec_t, field)}
    F("features", K_U32, dimension),
    F("rounds", K_U32, rounds),
    F("cohort", K_U32, cohort_size),
    F("overselect", K_F64, over_selection),
    F("min_quorum", K_U32, min_quorum),
    F("deadline_ms", K_U32, round_deadline_ms),
    F("heartbeat_ms", K_U32, heartbeat_timeout_ms),
    F("max_attempts", K_U32, max_attempts),
    F("seed", K_U64, seed),
    F("max_update_norm", K_F64, max_update_norm),
    F("max_samples", K_F64, max_samples),
    F("paused", K_FLAG, paused),
    F("rows", K_U32, rows),
    F("secure_aggregation", K_FLAG, secagg),
    F("secagg_threshold", K_U32, sa_threshold),
    F("secagg_support", K_U32, sa_support),
    F("secagg_topk", K_U32, sa_topk),
    F("secagg_clip", K_F64, sa_clip),
    F("secagg_max_weight", K_F64, sa_max_weight),
    F("secagg_degree", K_U32, sa_degree),
    F("iterations_per_round", K_U32, iterations_per_round),
    F("standardize", K_FLAG, standardize),
    F("standardize_eps", K_F64, standardize_eps),
    F("standardize_bound", K_F64, standardize_bound),
#undef F
};

int coord_job_spec_set(sfl_job_spec_t *s, const char *key, const char *v)
{
    if (strcmp(key, "name") == 0) {
        if (copy_str(s->name, sizeof(s->name), v) < 0)
            return sfl__fail(SFL_EINVAL, "job name must be 1..%d characters",
                             (int)sizeof(s->name) - 1);
        return 0;
    }
    if (strcmp(key, "algo") == 0) {
        if (sfl_algo_find(v) == NULL || copy_str(s->algorithm, sizeof(s->algorithm), v) < 0)
            return sfl__wrap(sfl_algo_unknown(v), "algo");
        return 0;
    }
    if (strcmp(key, "loss") == 0) {
        if (sfl_loss_find(v) == NULL || copy_str(s->loss, sizeof(s->loss), v) < 0)
            return sfl__fail(SFL_EINVAL, "loss: unknown '%s' (known: lsq, logistic, softmax)", v);
        return 0;
    }
    if (strcmp(key, "encoding") == 0) {
        if (strcmp(v, "f64") == 0)
            s->value_encoding = SFL_ENC_F64;
        else if (strcmp(v, "f32") == 0)
            s->value_encoding = SFL_ENC_F32;
        else if (strcmp(v, "q8") == 0)
            s->value_encoding = SFL_ENC_Q8;
        else
            return sfl__fail(SFL_EINVAL, "encoding: unknown '%s' (known: f64, f32, q8)", v);
        return 0;
    }
    if (strcmp(key, "aggregation") == 0) {
        if (strcmp(v, "streaming") == 0)
            s->ordered_aggregation = 0;
        else if (strcmp(v, "ordered") == 0)
            s->ordered_aggregation = 1;
        else
            return sfl__fail(SFL_EINVAL, "aggregation: unknown '%s' (known: streaming, ordered)", v);
        return 0;
    }
    if (strcmp(key, "conditions") == 0) {
        /* Comma-separated, e.g. "mains_power,unmetered". */
        const char *p = v;
        char tag[SFL_MSG_TAG_LEN];

        memset(&s->required_conditions, 0, sizeof(s->required_conditions));
        while (*p) {
            size_t n = strcspn(p, ",");

            if (n == 0 || n >= sizeof(tag) || s->required_conditions.n == COORD_MAX_CONDITIONS)
                return sfl__fail(SFL_EINVAL, "conditions: at most %d names of 1..31 characters",
                                 COORD_MAX_CONDITIONS);
            memcpy(tag, p, n);
            tag[n] = '\0';
            if (sfl_msg_tags_add(&s->required_conditions, tag) < 0)
                return sfl__fail(SFL_EINVAL,
                                 "conditions: '%s' is not a tag (1-31 of [a-z0-9_.:-])", tag);
            p += n + (p[n] == ',');
        }
        return 0;
    }
    if (strcmp(key, "labels") == 0) {
        const char *p = v;
        uint32_t n = 0;

        while (*p) {
            char *end;
            double x;

            errno = 0;
            x = strtod(p, &end);
            if (end == p || errno || !isfinite(x) || (*end != ',' && *end != '\0') ||
                n == SFL_MSG_MAX_LABELS || (n > 0 && x <= s->labels[n - 1]))
                return sfl__fail(SFL_EINVAL,
                                 "labels: want up to %d finite values, ascending, comma-separated",
                                 SFL_MSG_MAX_LABELS);
            s->labels[n++] = x;
            p = *end ? end + 1 : end;
        }
        s->nlabels = n;
        return 0;
    }
    for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
        void *field;
        uint64_t u;
        double d;

        if (strcmp(key, numeric[i].key) != 0)
            continue;
        field = (char *)s + numeric[i].off;
        switch (numeric[i].type) {
        case K_U32:
            if (parse_u64(v, UINT32_MAX, &u) < 0)
                goto bad;
            *(uint32_t *)field = (uint32_t)u;
            return 0;
        case K_U64:
            if (parse_u64(v, UINT64_MAX, &u) < 0)
                goto bad;
            *(uint64_t *)field = u;
            return 0;
        case K_F64:
            if (parse_f64(v, &d) < 0)
                goto bad;
            *(double *)field = d;
            return 0;
        case K_FLAG:
            if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
                return sfl__fail(SFL_EINVAL, "%s: want 0 or 1, got '%s'", key, v);
            *(int *)field = v[0] == '1';
            return 0;
        }
    bad:
        if (numeric[i].type == K_U32)
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s' (an integer, 0 to 2^32-1)",
                             key, v);
        return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", key, v);
    }
    if (sfl_algo_param_known(key)) {
        /* An algorithm parameter: kept by name until the whole section is
         * read (algo may come later); its type and range are checked
         * against the algorithm by coord_job_spec_params. */
        double d;

        if (parse_f64(v, &d) < 0)
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", key, v);
        return sfl_param_list_set(&s->params, key, d);
    }
    return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
}

int coord_job_spec_params(const sfl_job_spec_t *s, sfl_algo_params_t *p)
{
    const sfl_algo_t *a = sfl_algo_find(s->algorithm);

    if (a == NULL)
        return sfl__wrap(sfl_algo_unknown(s->algorithm), "algorithm");
    return sfl_algo_params_from_list(a, &s->params, p);
}

int coord_job_spec_check(const sfl_job_spec_t *s)
{
    const sfl_loss_t *l = sfl_loss_find(s->loss);
    coord_round_cfg_t round;
    sfl_algo_params_t params;
    sfl_problem_t prob;
    int rc;

    if (sfl_algo_find(s->algorithm) == NULL)
        return sfl__wrap(sfl_algo_unknown(s->algorithm), "algorithm");
    if (l == NULL)
        return sfl__fail(SFL_EINVAL, "loss: unknown loss '%s' (lsq, logistic, softmax, " SFL_LOSS_MLP_FORMS ")", s->loss);
    if (s->dictionary[0])
        return sfl__fail(SFL_EINVAL, "dictionary: not supported by this coordinator yet");
    if (s->required_conditions.n > COORD_MAX_CONDITIONS)
        return sfl__fail(SFL_EINVAL, "required_conditions: at most %d", COORD_MAX_CONDITIONS);
    if (s->rounds == 0)
        return sfl__fail(SFL_EINVAL, "job %s: rounds must be at least 1", s->name);
    if ((rc = sfl_problem_init(&prob, l, s->dimension, s->nlabels)) < 0)
        return rc;
    if ((rc = coord_job_spec_params(s, &params)) < 0)
        return rc;
    if (s->secagg && sfl_algo_find(s->algorithm)->shape != SFL_SHAPE_HORIZONTAL)
        return sfl__fail(SFL_EINVAL, "secure_aggregation: %s is not a horizontal algorithm "
                         "(its updates are not one weighted mean)", s->algorithm);
    if (s->secagg && s->sa_degree % 2 != 0)
        return sfl__fail(SFL_EINVAL, "secagg_degree: %u is odd (a Harary graph's degree is even; "
                         "0 chooses it)", s->sa_degree);
    if (s->secagg && s->min_quorum < 3)
        return sfl__fail(SFL_EINVAL, "secure_aggregation: min_quorum must be at least 3 (a "
                         "sum of fewer reveals too much)");
    if (s->secagg && sfl_algo_find(s->algorithm)->state_size != NULL &&
        sfl_algo_find(s->algorithm)->state_size(&params, &prob) > 0)
        return sfl__fail(SFL_EINVAL, "secure_aggregation: %s keeps a client state, which mode "
                         "2 does not carry yet", s->algorithm);
    if (sfl_algo_find(s->algorithm)->shape == SFL_SHAPE_VERTICAL) {
        coord_vjob_t v;

        if ((rc = coord_vjob_setup(&v, s, &params, &prob)) < 0)
            return rc;
    } else if ((rc = sfl_algo_check(sfl_algo_find(s->algorithm), &params, &prob)) < 0)
        return rc;
    if (s->standardize && sfl_algo_find(s->algorithm)->shape == SFL_SHAPE_VERTICAL)
        return sfl__fail(SFL_EINVAL, "standardize: not supported for vertical jobs (%s): a "
                         "block holder sees only its own columns, so its rows' statistics "
                         "are its own (standardise the columns before the job)",
                         s->algorithm);
    if (!(s->standardize_bound >= 0) || !isfinite(s->standardize_bound) ||
        !isfinite(coord_job_std_bound(s) * coord_job_std_bound(s)))
        return sfl__fail(SFL_EINVAL, "standardize_bound: %g is not finite and >= 0 with a "
                         "finite square (0: %g)", s->standardize_bound, COORD_STANDARDIZE_BOUND);
    if (!(s->standardize_eps >= 0) || !isfinite(s->standardize_eps))
        return sfl__fail(SFL_EINVAL, "standardize_eps: %g is not finite and >= 0 (0: %g)",
                         s->standardize_eps, SFL_STANDARDIZE_EPS);
    if (!(s->max_update_norm >= 0) || !(s->max_samples >= 0))
        return sfl__fail(SFL_EINVAL, "job %s: max_update_norm and max_samples must be >= 0 "
                         "(0: the defaults)", s->name);
    coord_job_round_cfg(s, &round);
    return coord_round_cfg_check(&round);
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
    for (uint32_t i = 0; i < j->nslots && rc == 0; i++)
        if (j->held[i].update != NULL)
            rc = sfl_fold_add(&j->agg, j->held[i].update, j->held[i].weight);
    drop_held(j);
    if (rc == 0)
        rc = sfl_fold_finish(&j->agg, j->global);
    j->aggregating = 0;
    if (rc == 0)
        j->round++;
    return rc;
}

/* A job's specification: defaults, [job] keys and checks, from the one
 * table of its fields (sfl/wire/jobspec.def). */
#include "job/spec.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/model/loss.h"

#include "job/model.h"

/* ---- the table ------------------------------------------------------------ */

typedef enum { T_U32, T_U64, T_F64, T_FLAG, T_STR, T_ENC, T_LABELS, T_TAGS, T_PARAMS } key_type_t;
enum { ANY, REQ, NONNEG, EVEN };

static const struct key {
    const char *key;
    key_type_t type;
    size_t off, size;
    int range, ini;
    const char *help;
} keys[] = {
#define SFL_JOBSPEC_FIELD(key, type, member, proto, def, range, ini, help)                         \
    {#key, T_##type, offsetof(sfl_job_spec_t, member), sizeof(((sfl_job_spec_t *)0)->member),     \
     range, ini, help},
#include "sfl/wire/jobspec.def"
#undef SFL_JOBSPEC_FIELD
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* Names a field had before it got the table's (docs/configuration.md). */
static const struct {
    const char *old, *key;
} aliases[] = {
    {"heartbeat_ms", "heartbeat_timeout_ms"},
};

#define DEF_U32(m, v) s->m = v;
#define DEF_U64(m, v) s->m = v;
#define DEF_F64(m, v) s->m = v;
#define DEF_FLAG(m, v) s->m = v;
#define DEF_STR(m, v) snprintf(s->m, sizeof(s->m), "%s", v);
#define DEF_ENC(m, v) s->m = v;
#define DEF_LABELS(m, v)
#define DEF_TAGS(m, v)
#define DEF_PARAMS(m, v)

void coord_job_spec_default(sfl_job_spec_t *s)
{
    memset(s, 0, sizeof(*s));
#define SFL_JOBSPEC_FIELD(key, type, member, proto, def, range, ini, help) DEF_##type(member, def)
#include "sfl/wire/jobspec.def"
#undef SFL_JOBSPEC_FIELD
}

double coord_job_std_bound(const sfl_job_spec_t *s)
{
    return s->standardize_bound > 0 ? s->standardize_bound : COORD_STANDARDIZE_BOUND;
}

int coord_job_sa_grouped(const sfl_job_spec_t *s)
{
    return s->secagg && strcmp(s->sa_groups, "frontend") == 0;
}

uint32_t coord_job_sa_min_group(const sfl_job_spec_t *s)
{
    return s->sa_min_group ? s->sa_min_group : COORD_SA_MIN_GROUP;
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

static const char *const enc_names[] = {"f64", "f32", "q8"};

/* A field's value as its key is written, into buf: what --help shows. */
static const char *key_text(const struct key *k, const sfl_job_spec_t *s, char *buf, size_t cap)
{
    const char *p = (const char *)s + k->off;

    switch (k->type) {
    case T_U32:
        if (k->range == REQ && *(const uint32_t *)p == 0)
            return "required";
        snprintf(buf, cap, "%u", *(const uint32_t *)p);
        return buf;
    case T_U64:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p);
        return buf;
    case T_F64:
        snprintf(buf, cap, "%g", *(const double *)p);
        return buf;
    case T_FLAG:
        if (strcmp(k->key, "aggregation") == 0)
            return *(const int *)p ? "ordered" : "streaming";
        return *(const int *)p ? "1" : "0";
    case T_STR:
        return *p ? p : "none";
    case T_ENC:
        return enc_names[*(const sfl_enc_t *)p];
    case T_LABELS:
    case T_TAGS:
    case T_PARAMS:
        break;
    }
    return "none";
}

/* Columns: key from 2, default from 24, help from 36 wrapped before 80. */
static void help_line(FILE *f, const char *key, const char *def, const char *h)
{
    int col = fprintf(f, "  %-21s %-11s", key, def);

    if (col > 35) {
        fprintf(f, "\n%35s", "");
        col = 35;
    }
    while (*h) {
        size_t w = strcspn(h, " ");

        if (col > 35 && col + 1 + (int)w > 79) {
            fprintf(f, "\n%35s", "");
            col = 35;
        }
        col += fprintf(f, " %.*s", (int)w, h);
        h += w;
        while (*h == ' ')
            h++;
    }
    fputc('\n', f);
}

void coord_job_spec_help(FILE *f)
{
    sfl_job_spec_t s;
    char buf[64];

    coord_job_spec_default(&s);
    help_line(f, "key", "default", "meaning");
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].ini)
            help_line(f, keys[i].key, key_text(&keys[i], &s, buf, sizeof(buf)), keys[i].help);
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        char h[96];

        snprintf(h, sizeof(h), "older name of %s", aliases[i].key);
        help_line(f, aliases[i].old, "", h);
    }
}

/* ---- [job] keys ------------------------------------------------------------- */

/* The keys parsed by hand (their values are names or lists); every other
 * ini key of the table by its type. */
static int set_special(sfl_job_spec_t *s, const char *key, const char *v)
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
    if (strcmp(key, "secagg_groups") == 0) {
        if (strcmp(v, "none") != 0 && strcmp(v, "frontend") != 0)
            return sfl__fail(SFL_EINVAL, "secagg_groups: unknown '%s' (known: none, frontend)", v);
        snprintf(s->sa_groups, sizeof(s->sa_groups), "%s", v);
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
    return 1;
}

int coord_job_spec_set(sfl_job_spec_t *s, const char *key, const char *v)
{
    int rc;

    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(key, aliases[i].old) == 0)
            key = aliases[i].key;
    if ((rc = set_special(s, key, v)) <= 0)
        return rc;
    for (size_t i = 0; i < NKEYS; i++) {
        void *field = (char *)s + keys[i].off;
        uint64_t u;
        double d;

        if (!keys[i].ini || strcmp(key, keys[i].key) != 0)
            continue;
        switch (keys[i].type) {
        case T_U32:
            if (parse_u64(v, UINT32_MAX, &u) < 0)
                return sfl__fail(SFL_EINVAL,
                                 "%s: invalid value '%s' (an integer, 0 to 2^32-1)", key, v);
            *(uint32_t *)field = (uint32_t)u;
            return 0;
        case T_U64:
            if (parse_u64(v, UINT64_MAX, &u) < 0)
                break;
            *(uint64_t *)field = u;
            return 0;
        case T_F64:
            if (parse_f64(v, &d) < 0)
                break;
            *(double *)field = d;
            return 0;
        case T_FLAG:
            if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
                return sfl__fail(SFL_EINVAL, "%s: want 0 or 1, got '%s'", key, v);
            *(int *)field = v[0] == '1';
            return 0;
        case T_STR:
            if (strlen(v) >= keys[i].size)
                return sfl__fail(SFL_EINVAL, "%s: at most %zu characters", key,
                                 keys[i].size - 1);
            memcpy(field, v, strlen(v) + 1);
            return 0;
        case T_ENC:
        case T_LABELS:
        case T_TAGS:
        case T_PARAMS:
            break; /* set_special's */
        }
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
    if (s->sa_groups[0] && strcmp(s->sa_groups, "none") != 0 &&
        strcmp(s->sa_groups, "frontend") != 0)
        return sfl__fail(SFL_EINVAL, "secagg_groups: unknown '%s' (known: none, frontend)",
                         s->sa_groups);
    if (!s->secagg && strcmp(s->sa_groups, "frontend") == 0)
        return sfl__fail(SFL_EINVAL, "secagg_groups: frontend needs secure_aggregation = 1");
    if (strcmp(s->sa_groups, "frontend") == 0 && s->sa_threshold != 0)
        return sfl__fail(SFL_EINVAL, "secagg_groups = frontend: secagg_threshold must be 0 "
                         "(each group's is 2 g / 3 + 1 of its size g)");
    if (s->sa_min_group != 0 && s->sa_min_group < 3)
        return sfl__fail(SFL_EINVAL, "secagg_min_group: %u is below 3 (a group's sum of fewer "
                         "reveals too much; 0: %u)", s->sa_min_group, COORD_SA_MIN_GROUP);
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
    if (s->frontend_fold && s->ordered_aggregation)
        return sfl__fail(SFL_EINVAL, "frontend_fold: not with aggregation = ordered (a "
                         "front-end's partial sum is folded as it arrives; an ordered job "
                         "needs every update at the master)");
    if (!(s->max_update_norm >= 0) || !(s->max_samples >= 0))
        return sfl__fail(SFL_EINVAL, "job %s: max_update_norm and max_samples must be >= 0 "
                         "(0: the defaults)", s->name);
    coord_job_round_cfg(s, &round);
    return coord_round_cfg_check(&round);
}


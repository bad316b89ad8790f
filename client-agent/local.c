/* What the agent holds locally, loaded once by agent_new: its rows (data,
 * eval_file or the eval_fraction split), the Join summary of them, and its
 * identity key in state_dir. */
#include "agent_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sfl/core/alloc.h"

uint64_t agent_test_join_samples = 0;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

int agent_summarize(const sfl_dataset_t *data, sfl_dataset_summary_t *sum)
{
    uint32_t n = data->X->nrows, k = 0;
    double *v;
    int integral = 1;

    memset(sum, 0, sizeof(*sum));
    sum->samples = n;
    sum->dimension = data->X->ncols;
    if (n == 0)
        return 0;
    v = sfl__mallocarray(n, sizeof(double));
    if (v == NULL)
        return SFL_ENOMEM;
    memcpy(v, data->y, (size_t)n * sizeof(double));
    qsort(v, n, sizeof(double), cmp_double);
    for (uint32_t i = 0; i < n && k <= SFL_MSG_MAX_LABELS; i++) {
        if (k > 0 && v[i] == v[k - 1])
            continue;
        integral &= v[i] == floor(v[i]);
        v[k++] = v[i];
    }
    /* The data says nothing about the task; few integer values are what
     * class labels look like, anything else is reported as regression. */
    if (integral && k <= SFL_MSG_MAX_LABELS) {
        sum->nlabels = k;
        memcpy(sum->labels, v, (size_t)k * sizeof(double));
    }
    sfl__free(v);
    return 0;
}

static int read_data(const char *spec, sfl_dataset_t **out)
{
    int rc;

    if ((rc = sfl_dataset_read(spec, 0, NULL, out)) < 0)
        return rc;
    if ((*out)->X->nrows == 0)
        return sfl__fail(SFL_EEMPTY, "%s: no samples", spec);
    return 0;
}

/* Reads data (and eval_file) and fills the Join summary. The summary's
 * labels are those of all local rows, held-out ones included, so the agent
 * is only selected for jobs that can code every row; split_eval later sets
 * its samples to the training rows, the update's weight. */
static int load_data(agent_ctx_t *a)
{
    sfl_dataset_summary_t ev;
    uint32_t ncols;
    int rc;

    if ((rc = read_data(a->cfg.data, &a->data)) < 0 ||
        (rc = agent_summarize(a->data, &a->summary)) < 0)
        return rc;
    /* each kind's part of the data and of the Join summary */
    for (size_t i = 0; i < agent_nshapes; i++)
        if (agent_shapes[i]->setup != NULL && (rc = agent_shapes[i]->setup(a, a->kind[i])) < 0)
            return rc;
    if (a->cfg.eval_file[0] == '\0')
        return 0;
    if ((rc = read_data(a->cfg.eval_file, &a->eval)) < 0 ||
        (rc = agent_summarize(a->eval, &ev)) < 0)
        return rc;
    /* Regression data (no labels) takes any targets; class labels must be
     * data's, or no job could code the held-out rows. */
    if (a->summary.nlabels > 0 && ev.nlabels == 0)
        return sfl__fail(SFL_EINVAL, "eval_file: targets are not class labels, data's are");
    for (uint32_t i = 0; a->summary.nlabels > 0 && i < ev.nlabels; i++)
        if (bsearch(&ev.labels[i], a->summary.labels, a->summary.nlabels, sizeof(double),
                    cmp_double) == NULL)
            return sfl__fail(SFL_EINVAL, "eval_file: label %.17g is not among the labels of "
                             "data", ev.labels[i]);
    /* One feature space: the wider of the two. */
    ncols = a->eval->X->ncols > a->data->X->ncols ? a->eval->X->ncols : a->data->X->ncols;
    if ((rc = sfl_dataset_set_ncols(a->data, ncols)) < 0 ||
        (rc = sfl_dataset_set_ncols(a->eval, ncols)) < 0)
        return rc;
    a->summary.dimension = ncols;
    return 0;
}

/* eval_fraction: holds out rows of data, drawn from the identity key. */
static int split_eval(agent_ctx_t *a)
{
    sfl_dataset_t *train = NULL, *eval = NULL;
    sfl_rng_t r;
    int rc;

    if (a->cfg.eval_fraction > 0) {
        agent_eval_rng(a->id->pk, &r);
        if ((rc = sfl_dataset_split(a->data, a->cfg.eval_fraction, &r, &train, &eval)) < 0)
            return rc;
        sfl_dataset_free(a->data);
        a->data = train;
        if (eval != NULL && eval->X->nrows == 0) {
            sfl_dataset_free(eval);
            eval = NULL;
        }
        a->eval = eval;
    }
    a->summary.samples = a->data->X->nrows;
    if (agent_test_join_samples != 0)
        a->summary.samples = agent_test_join_samples; /* a hostile test double */
    return 0;
}

void agent_eval_rng(const uint8_t pk[SFL_SEAL_PK_BYTES], sfl_rng_t *r)
{
    uint64_t seed = 0;

    for (int i = 0; i < 8; i++)
        seed |= (uint64_t)pk[i] << (8 * i);
    sfl_rng_seed(r, seed, 0, 0, SFL_STREAM_PARTITION);
}

/* The identity key lives in state_dir; the first start makes it. */
static int load_identity(agent_ctx_t *a)
{
    char path[AGENT_PATH_MAX + sizeof(AGENT_IDENTITY_FILE) + 1];
    int rc;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", a->cfg.state_dir, AGENT_IDENTITY_FILE) >=
        sizeof(path))
        return sfl__fail(SFL_EINVAL, "state_dir is too long");
    if (mkdir(a->cfg.state_dir, 0700) < 0 && errno != EEXIST)
        return sfl__fail(-errno, "state_dir %s: cannot create: %s", a->cfg.state_dir,
                         strerror(errno));
    rc = sfl_identity_load(path, &a->id);
    if (rc != -ENOENT)
        return rc;
    if ((rc = sfl_identity_generate(&a->id)) < 0)
        return rc;
    if ((rc = sfl_identity_save(a->id, path)) < 0)
        return rc;
    a->id_created = 1;
    return 0;
}

int agent__local_load(agent_ctx_t *a)
{
    int rc;

    /* The identity seeds the held-out split. */
    if ((rc = load_data(a)) < 0 || (rc = load_identity(a)) < 0 || (rc = split_eval(a)) < 0)
        return rc;
    return 0;
}

/* One client's round and the client state's lifecycle (client.h). */
#include "sfl/algo/client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/model/eval.h"

/* ---- client state ------------------------------------------------------ */

#define NAME_BYTES 32
#define HASH_BYTES 32
#define HEAD_BYTES (4 + 4 + NAME_BYTES + 4 + 8 + 8)

static size_t state_bytes(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob)
{
    return a->state_size && a->state_init ? a->state_size(p, prob) : 0;
}

int sfl_client_state_new(const sfl_algo_t *a, const sfl_algo_params_t *p,
                         const sfl_problem_t *prob, sfl_client_state_t *st)
{
    size_t size = state_bytes(a, p, prob);
    int rc;

    memset(st, 0, sizeof(*st));
    st->algo = a;
    st->dim = prob->dim;
    if (size == 0)
        return 0;
    st->mem = sfl__calloc(1, size);
    if (st->mem == NULL)
        return SFL_ENOMEM;
    st->size = size;
    if ((rc = a->state_init(p, prob, st->mem)) < 0)
        sfl_client_state_free(st);
    return rc;
}

void sfl_client_state_free(sfl_client_state_t *st)
{
    if (st->mem != NULL) {
        sodium_memzero(st->mem, st->size);
        sfl__free(st->mem);
    }
    memset(st, 0, sizeof(*st));
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *b)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++)
        v |= (uint32_t)b[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

/* The header for st (HEAD_BYTES). */
static void head(const sfl_algo_t *a, size_t dim, size_t size, uint8_t *h)
{
    memcpy(h, SFL_CLIENT_STATE_MAGIC, 4);
    put32(h + 4, SFL_CLIENT_STATE_FORMAT);
    memset(h + 8, 0, NAME_BYTES);
    memcpy(h + 8, a->name, strnlen(a->name, NAME_BYTES - 1));
    put32(h + 8 + NAME_BYTES, a->state_version);
    put64(h + 12 + NAME_BYTES, dim);
    put64(h + 20 + NAME_BYTES, size);
}

int sfl_client_state_save(const sfl_client_state_t *st, uint8_t **buf, size_t *len)
{
    size_t n;
    uint8_t *b;

    *buf = NULL;
    *len = 0;
    if (st->mem == NULL)
        return 0;
    n = HEAD_BYTES + st->size + HASH_BYTES;
    b = sfl__malloc(n);
    if (b == NULL)
        return SFL_ENOMEM;
    head(st->algo, st->dim, st->size, b);
    memcpy(b + HEAD_BYTES, st->mem, st->size);
    crypto_generichash(b + HEAD_BYTES + st->size, HASH_BYTES, b, HEAD_BYTES + st->size, NULL, 0);
    *buf = b;
    *len = n;
    return 0;
}

void sfl_client_state_bytes_free(uint8_t *buf, size_t len)
{
    if (buf == NULL)
        return;
    sodium_memzero(buf, len);
    sfl__free(buf);
}

int sfl_client_state_load(const sfl_algo_t *a, const sfl_algo_params_t *p,
                          const sfl_problem_t *prob, const uint8_t *buf, size_t len,
                          sfl_client_state_t *st)
{
    size_t size = state_bytes(a, p, prob);
    uint8_t want[HEAD_BYTES], hash[HASH_BYTES];
    char name[NAME_BYTES];

    memset(st, 0, sizeof(*st));
    if (len < HEAD_BYTES + HASH_BYTES)
        return sfl__fail(SFL_ETRUNC, "client state: %zu bytes, shorter than its header", len);
    if (memcmp(buf, SFL_CLIENT_STATE_MAGIC, 4) != 0)
        return sfl__fail(SFL_EPARSE, "client state: not a client state file");
    if (get32(buf + 4) != SFL_CLIENT_STATE_FORMAT)
        return sfl__fail(SFL_EPARSE, "client state: format %u, this build reads %d",
                         get32(buf + 4), SFL_CLIENT_STATE_FORMAT);
    memcpy(name, buf + 8, NAME_BYTES);
    name[NAME_BYTES - 1] = '\0';
    for (char *c = name; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            *c = '?';
    if (strncmp(name, a->name, NAME_BYTES) != 0)
        return sfl__fail(SFL_EPARSE, "client state: saved by algorithm '%s', not %s", name,
                         a->name);
    if (get32(buf + 8 + NAME_BYTES) != a->state_version)
        return sfl__fail(SFL_EPARSE, "client state: %s state version %u, this build has %u",
                         a->name, get32(buf + 8 + NAME_BYTES), a->state_version);
    if (get64(buf + 12 + NAME_BYTES) != prob->dim)
        return sfl__fail(SFL_EPARSE, "client state: for dimension %llu, the job has %zu",
                         (unsigned long long)get64(buf + 12 + NAME_BYTES), prob->dim);
    if (get64(buf + 20 + NAME_BYTES) != size)
        return sfl__fail(SFL_EPARSE, "client state: %llu bytes of state, the job needs %zu",
                         (unsigned long long)get64(buf + 20 + NAME_BYTES), size);
    if (len != HEAD_BYTES + size + HASH_BYTES)
        return sfl__fail(len < HEAD_BYTES + size + HASH_BYTES ? SFL_ETRUNC : SFL_EPARSE,
                         "client state: %zu bytes, want %zu", len, HEAD_BYTES + size + HASH_BYTES);
    head(a, prob->dim, size, want);
    crypto_generichash(hash, HASH_BYTES, buf, HEAD_BYTES + size, NULL, 0);
    if (memcmp(want, buf, HEAD_BYTES) != 0 ||
        sodium_memcmp(hash, buf + HEAD_BYTES + size, HASH_BYTES) != 0)
        return sfl__fail(SFL_EPARSE, "client state: checksum mismatch (damaged file)");
    st->algo = a;
    st->dim = prob->dim;
    if (size == 0)
        return 0;
    st->mem = sfl__malloc(size);
    if (st->mem == NULL)
        return SFL_ENOMEM;
    st->size = size;
    memcpy(st->mem, buf + HEAD_BYTES, size);
    return 0;
}

/* ---- one client's round ------------------------------------------------ */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

int sfl_client_check(const sfl_client_task_t *t, const sfl_dataset_t *data,
                     const sfl_dataset_t *eval)
{
    const sfl_problem_t *prob = t->prob;
    int rc;

    if ((rc = sfl_algo_check(t->algo, t->params, prob)) < 0)
        return rc;
    if (data->X->ncols > prob->ncols)
        return sfl__fail(SFL_EDIM, "task: dimension %u, but the local data has %u features",
                         prob->ncols, data->X->ncols);
    if (eval != NULL && eval->X->ncols > prob->ncols)
        return sfl__fail(SFL_EDIM, "task: dimension %u, but the held-out data has %u features",
                         prob->ncols, eval->X->ncols);
    return 0;
}

/* The rows of ds at the job's dimension, targets coded into y (NULL: as
 * they are). */
static int view_of(const sfl_client_task_t *t, const sfl_dataset_t *ds, double *y,
                   sfl_csr_t *xv, sfl_dataset_t *view)
{
    uint32_t nclasses = t->prob->nclasses;

    *xv = *ds->X;
    xv->ncols = t->prob->ncols;
    view->X = xv;
    view->y = ds->y;
    view->nclasses = nclasses;
    view->labels = nclasses ? (double *)t->labels : NULL;
    if (nclasses == 0 || t->labels == NULL) {
        if (nclasses)
            view->labels = ds->labels;
        return 0;
    }
    /* y[i] = the index of the local target in the job's ascending labels,
     * so every client numbers the classes alike. */
    for (uint32_t i = 0; i < ds->X->nrows; i++) {
        const double *hit = bsearch(&ds->y[i], t->labels, nclasses, sizeof(double), cmp_double);

        if (hit == NULL)
            return sfl__fail(SFL_EINVAL, "task: local label %.17g (row %u) is not among the "
                             "job's %u labels", ds->y[i], i + 1, nclasses);
        y[i] = (double)(hit - t->labels);
    }
    view->y = y;
    return 0;
}

/* The report's figures at model x (the round's model) and, when pm is not
 * NULL, the held-out accuracy of the client's personal model pm. */
static int report(const sfl_client_task_t *t, const sfl_dataset_t *view,
                  const sfl_dataset_t *eval, double *y, const double *x, const double *pm,
                  sfl_client_report_t *rep)
{
    const sfl_loss_t *loss = t->prob->loss;
    int rc;

    rep->train_loss = sfl_loss_eval(loss, view, NULL, 0, x, sfl_algo_params_ridge(t->params),
                                 NULL);
    if (!isfinite(rep->train_loss))
        return sfl__fail(SFL_ENUMERIC, "local objective at the task's model is not finite");
    if (eval == NULL || eval->X->nrows == 0)
        return 0;
    sfl_csr_t xv;
    sfl_dataset_t ev;

    if ((rc = view_of(t, eval, y, &xv, &ev)) < 0)
        return rc;
    if (t->prob->nclasses)
        rep->eval_accuracy = sfl_loss_accuracy(loss, &ev, x);
    else
        rep->eval_mse = sfl_eval_mse(loss, &ev, x);
    if (!isfinite(rep->eval_accuracy) || !isfinite(rep->eval_mse))
        return sfl__fail(SFL_ENUMERIC, "held-out metric at the task's model is not finite");
    rep->eval_samples = eval->X->nrows;
    if (pm == NULL)
        return 0;
    rep->personal_accuracy = sfl_loss_accuracy(loss, &ev, pm);
    if (!isfinite(rep->personal_accuracy))
        return sfl__fail(SFL_ENUMERIC, "held-out accuracy of the personal model is not finite");
    rep->has_personal = 1;
    return 0;
}

/* Whether the report carries a personal accuracy: the client's own model
 * (personalized shape) on held-out rows of a classification problem. */
static int personal(const sfl_client_task_t *t, const sfl_dataset_t *eval,
                    const sfl_client_state_t *state)
{
    return t->algo->shape == SFL_SHAPE_PERSONALIZED && t->algo->personal_model != NULL &&
           t->prob->nclasses != 0 && eval != NULL && state != NULL && state->mem != NULL;
}

int sfl_client_round(const sfl_client_task_t *t, const sfl_dataset_t *data,
                     const sfl_dataset_t *eval, sfl_client_state_t *state, sfl_algo_ws_t *ws,
                     sfl_spvec_t *update, sfl_client_report_t *rep)
{
    const sfl_problem_t *prob = t->prob;
    uint32_t rows = data->X->nrows;
    double *y = NULL, *model = NULL, *pm = NULL;
    sfl_csr_t xv;
    sfl_dataset_t view;
    int rc;

    if (rep != NULL)
        memset(rep, 0, sizeof(*rep));
    if (eval != NULL && eval->X->nrows == 0)
        eval = NULL;
    if ((rc = sfl_client_check(t, data, rep ? eval : NULL)) < 0)
        return rc;
    if (state != NULL && state->mem != NULL &&
        (state->algo != t->algo || state->dim != prob->dim))
        return sfl__fail(SFL_EINVAL, "client state of %s for dimension %zu, the task is %s, %zu",
                         state->algo->name, state->dim, t->algo->name, prob->dim);
    if (prob->nclasses && t->labels != NULL) {
        /* Room for the held-out targets too: they are coded after training. */
        if (rep != NULL && eval != NULL && eval->X->nrows > rows)
            rows = eval->X->nrows;
        y = sfl__mallocarray(rows ? rows : 1, sizeof(double));
        if (y == NULL)
            return SFL_ENOMEM;
    }
    if ((rc = view_of(t, data, y, &xv, &view)) < 0)
        goto out;
    rc = sfl_algo_client_round(t->algo, t->params, prob, t->global, &view,
                               state ? state->mem : NULL, t->seed, t->round, t->client, ws,
                               update);
    if (rc < 0)
        goto out;
    if (t->max_update_nnz != 0 && update->nnz > t->max_update_nnz) {
        rc = sfl__fail(SFL_ELIMIT, "update has %u nonzeros, the task allows %u", update->nnz,
                       t->max_update_nnz);
        goto out;
    }
    if (rep == NULL)
        goto out;
    /* The table returns no objective: report the local objective at the
     * model this round started from (docs/protocol.md, agent notes). */
    if (t->algo->model_of != NULL) {
        model = sfl__calloc(sfl_loss_dim(prob->loss, prob->ncols, prob->nclasses), sizeof(double));
        if (model == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        if ((rc = t->algo->model_of(t->params, prob, t->global, model, &ws->topk)) < 0)
            goto out;
    }
    /* The personal model after this round's training (the state holds it). */
    if (personal(t, eval, state)) {
        pm = sfl__calloc(sfl_loss_dim(prob->loss, prob->ncols, prob->nclasses), sizeof(double));
        if (pm == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        if ((rc = t->algo->personal_model(t->params, prob, state->mem, pm)) < 0)
            goto out;
    }
    rc = report(t, &view, eval, y, model ? model : t->global, pm, rep);
out:
    sfl__free(pm);
    sfl__free(model);
    sfl__free(y);
    return rc;
}

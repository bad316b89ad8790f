#include "sfl/model/eval.h"

#include <math.h>

#include "sfl/core/vec.h"

double sfl_eval_objective(const sfl_loss_t *loss, sfl_dataset_t *const *clients,
                          uint32_t nclients, const double *w, const double *x, double lambda)
{
    double num = 0, den = 0;

    for (uint32_t i = 0; i < nclients; i++) {
        if (clients[i]->X->nrows == 0 || !(w[i] > 0))
            continue;
        num += w[i] * sfl_loss_eval(loss, clients[i], NULL, 0, x, lambda, NULL);
        den += w[i];
    }
    return den > 0 ? num / den : NAN;
}

double sfl_eval_mse(const sfl_loss_t *loss, const sfl_dataset_t *ds, const double *x)
{
    uint32_t n = ds->X->nrows;
    double sum = 0;

    for (uint32_t i = 0; i < n; i++) {
        double e = sfl_loss_predict(loss, ds, i, x) - ds->y[i];

        sum += e * e;
    }
    return n ? sum / n : NAN;
}

double sfl_eval_rel_error(const double *x, const double *truth, size_t d)
{
    /* ||x - x*|| / ||x*|| */
    double num = 0, den = 0;

    for (size_t j = 0; j < d; j++) {
        double e = x[j] - truth[j];

        num += e * e;
        den += truth[j] * truth[j];
    }
    return den > 0 ? sqrt(num / den) : NAN;
}

void sfl_eval_support(const double *x, size_t d, const uint32_t *support, uint32_t nsupport,
                      double *precision, double *recall)
{
    size_t nnz = 0, hit = 0;
    uint32_t s = 0;

    for (size_t j = 0; j < d; j++) {
        while (s < nsupport && support[s] < j)
            s++;
        if (x[j] == 0)
            continue;
        nnz++;
        if (s < nsupport && support[s] == j)
            hit++;
    }
    *precision = nnz ? (double)hit / (double)nnz : 1.0;
    *recall = nsupport ? (double)hit / (double)nsupport : 1.0;
}

#include "job/fstat.h"

#include <math.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"

/* Relative slack of the sum / sum-of-squares consistency test: both are
 * float64 sums of up to 2^53 terms, so sum^2 and count x sumsq of a
 * constant feature may disagree in their last bits; a hostile vector that
 * claims a negative variance is off by far more. */
#define CS_SLACK 1e-9

int coord_fstat_check(const sfl_spvec_t *v, uint32_t d, uint64_t rows, uint64_t bound)
{
    size_t len = SFL_MOMENTS_LEN(d);
    double *m = NULL, n;
    int rc = 0;

    if (v == NULL)
        return sfl__fail(SFL_EINVAL, "moments missing");
    if (v->dim != len)
        return sfl__fail(SFL_EINVAL, "moments of length %u, want %zu (1 + 2 x %u features)",
                         v->dim, len, d);
    for (uint32_t k = 0; k < v->nnz; k++)
        if (!isfinite(v->val[k]))
            return sfl__fail(SFL_ENUMERIC, "moments entry %u is not finite", v->idx[k]);
    if ((m = sfl__calloc(len, sizeof(double))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory to check the moments");
    sfl_spvec_scatter(v, m);
    n = m[0];
    if (!(n >= 1) || n != floor(n) || n > 9007199254740992.0 /* 2^53 */) {
        rc = sfl__fail(SFL_EINVAL, "moments count %.17g is not a whole number >= 1", n);
        goto out;
    }
    if ((uint64_t)n != rows) {
        rc = sfl__fail(SFL_EINVAL, "moments count %.17g, the update declares %llu rows", n,
                       (unsigned long long)rows);
        goto out;
    }
    if ((uint64_t)n > bound) {
        rc = sfl__fail(SFL_EINVAL, "moments count %.17g, the agent joined with %llu training "
                       "rows", n, (unsigned long long)bound);
        goto out;
    }
    for (uint32_t j = 0; j < d; j++) {
        double sum = m[1 + j], sq = m[1 + (size_t)d + j];

        if (sq < 0) {
            rc = sfl__fail(SFL_EINVAL, "moments: feature %u's sum of squares %.17g is negative",
                           j, sq);
            goto out;
        }
        if (sum * sum > n * sq * (1 + CS_SLACK)) {
            rc = sfl__fail(SFL_EINVAL, "moments: feature %u's sum %.17g and sum of squares "
                           "%.17g over %.17g rows give a negative variance", j, sum, sq, n);
            goto out;
        }
    }
out:
    sfl__free(m);
    return rc;
}

void coord_fstat_close(coord_fstat_t *f)
{
    if (f->held != NULL)
        for (uint32_t i = 0; i < f->nslots; i++)
            sfl__free(f->held[i]);
    sfl__free(f->held);
    f->held = NULL;
    f->nslots = 0;
}

int coord_fstat_begin(coord_fstat_t *f, uint32_t d, uint32_t nslots)
{
    coord_fstat_close(f);
    f->d = d;
    if (nslots > 0 && (f->held = sfl__calloc(nslots, sizeof(*f->held))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the statistics round");
    f->nslots = nslots;
    return 0;
}

int coord_fstat_add(coord_fstat_t *f, uint32_t slot, const sfl_spvec_t *v)
{
    size_t len = SFL_MOMENTS_LEN(f->d);
    double *m;

    if (slot >= f->nslots || f->held[slot] != NULL)
        return sfl__fail(SFL_EINVAL, "statistics: slot %u out of range or held already", slot);
    if (v->dim != len)
        return sfl__fail(SFL_EINVAL, "statistics: moments of length %u, want %zu", v->dim, len);
    if ((m = sfl__calloc(len, sizeof(double))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the moments");
    sfl_spvec_scatter(v, m);
    f->held[slot] = m;
    return 0;
}

int coord_fstat_end(const coord_fstat_t *f, double *m, uint32_t *agents)
{
    size_t len = SFL_MOMENTS_LEN(f->d);
    uint32_t n = 0;

    /* from zeros, one agent's vector at a time in slot order: the order
     * sfl-sim adds its clients' vectors in */
    memset(m, 0, len * sizeof(double));
    for (uint32_t s = 0; s < f->nslots; s++) {
        if (f->held[s] == NULL)
            continue;
        for (size_t i = 0; i < len; i++)
            m[i] += f->held[s][i];
        n++;
    }
    *agents = n;
    if (n == 0)
        return sfl__fail(SFL_EEMPTY, "statistics: no moments held");
    return 0;
}

/* Data files named by a spec (sfl_dataset_read): one place that knows the
 * forms sfl-sim and the agent accept. */
#include "sfl/data/dataset.h"

#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/data/csv.h"
#include "sfl/data/idx.h"
#include "sfl/data/libsvm.h"

int sfl_dataset_spec_check(const char *spec)
{
    const char *comma;

    if ((strncmp(spec, "libsvm:", 7) == 0 && spec[7]) || (strncmp(spec, "csv:", 4) == 0 && spec[4]))
        return 0;
    if (strncmp(spec, "idx:", 4) == 0 && (comma = strchr(spec + 4, ',')) != NULL &&
        comma > spec + 4 && comma[1] && strchr(comma + 1, ',') == NULL)
        return 0;
    return sfl__fail(SFL_EINVAL, "data '%.200s': want " SFL_DATASET_SPEC_FORMS, spec);
}

int sfl_dataset_read(const char *spec, uint32_t min_cols, const sfl_read_limits_t *lim,
                     sfl_dataset_t **out)
{
    int rc;

    *out = NULL;
    if ((rc = sfl_dataset_spec_check(spec)) < 0)
        return rc;
    if (strncmp(spec, "libsvm:", 7) == 0)
        return sfl_libsvm_read(spec + 7, min_cols, lim, out);
    if (strncmp(spec, "csv:", 4) == 0) {
        rc = sfl_csv_read(spec + 4, NULL, lim, out);
    } else {
        const char *comma = strchr(spec + 4, ',');
        size_t n = (size_t)(comma - (spec + 4));
        char *images = sfl__malloc(n + 1);

        if (images == NULL)
            return SFL_ENOMEM;
        memcpy(images, spec + 4, n);
        images[n] = '\0';
        rc = sfl_idx_dataset(images, comma + 1, lim, out);
        sfl__free(images);
    }
    if (rc == 0 && min_cols > (*out)->X->ncols && (rc = sfl_dataset_set_ncols(*out, min_cols)) < 0) {
        sfl_dataset_free(*out);
        *out = NULL;
    }
    return rc;
}

/* libFuzzer entry point for the IDX reader (sfl/data/idx.h), plain and gzip:
 * whatever it accepts is a consistent file, and an accepted images file
 * goes through the dataset conversion with a labels file made to match.
 * A small bound so the fuzzer also reaches the size checks and stops gzip
 * bombs early. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sfl/data/csr.h"
#include "sfl/data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_idx_t *x = NULL, lb;
    sfl_dataset_t *ds = NULL;
    size_t n = 1;

    if (sfl_idx_parse(data, size, "fuzz", 1 << 16, &x) != 0)
        return 0;
    for (uint32_t i = 0; i < x->ndims; i++)
        n *= x->dims[i];
    if (x->ndims < 1 || x->ndims > SFL_IDX_MAX_DIMS || n != x->len || n > (1 << 16))
        __builtin_trap();
    if (x->ndims == 3) {
        memset(&lb, 0, sizeof(lb));
        lb.ndims = 1;
        lb.dims[0] = x->dims[0];
        lb.data = x->data; /* as many label bytes as images, at least */
        lb.len = x->dims[0];
        if (sfl_idx_to_dataset(x, "fuzz", &lb, "labels", NULL, &ds) == 0) {
            if (sfl_csr_validate(ds->X) != 0)
                __builtin_trap();
            sfl_dataset_free(ds);
        }
    }
    sfl_idx_free(x);
    return 0;
}

/* libFuzzer entry point for the LibSVM reader:
 *   clang -g -fsanitize=fuzzer,address -Ilibsfl/include -Ilibsfl/src \
 *       tests/fuzz/fuzz_libsvm.c libsfl/src/[star]/[star].c -lm
 * Small limits so the fuzzer also reaches every limit check. */
#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/data/libsvm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_read_limits_t lim;
    sfl_dataset_t *ds = NULL;

    sfl_read_limits_default(&lim);
    lim.max_rows = 1000;
    lim.max_cols = 100000;
    lim.max_nnz = 10000;
    lim.max_line = 4096;
    if (sfl_libsvm_parse((const char *)data, size, "fuzz", 0, &lim, &ds) == 0) {
        /* Whatever was accepted must be a valid dataset. */
        if (sfl_csr_validate(ds->X) != 0)
            __builtin_trap();
        (void)sfl_dataset_encode_labels(ds, 16);
        sfl_dataset_free(ds);
    }
    return 0;
}

/* libFuzzer entry point for the CSV reader:
 *   clang -g -fsanitize=fuzzer,address -Ilibsfl/include -Ilibsfl/src \
 *       tests/fuzz/fuzz_csv.c libsfl/src/[star]/[star].c -lm
 * The first byte picks the options; the rest is the text. */
#include <stddef.h>
#include <stdint.h>

#include "sfl/data/csv.h"
#include "sfl/data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char delims[4] = { ',', ';', '\t', ' ' };
    sfl_read_limits_t lim;
    sfl_csv_opts_t o;
    sfl_dataset_t *ds = NULL;

    if (size < 1)
        return 0;
    sfl_csv_opts_default(&o);
    o.delim = delims[data[0] & 3];
    o.header = (int)((data[0] >> 2) % 3) - 1;
    o.label_col = (int)((data[0] >> 4) & 7) - 4;
    sfl_read_limits_default(&lim);
    lim.max_rows = 1000;
    lim.max_cols = 1000;
    lim.max_nnz = 10000;
    lim.max_line = 4096;
    if (sfl_csv_parse((const char *)data + 1, size - 1, "fuzz", &o, &lim, &ds) == 0) {
        if (sfl_csr_validate(ds->X) != 0)
            __builtin_trap();
        sfl_dataset_free(ds);
    }
    return 0;
}

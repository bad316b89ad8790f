/* libFuzzer entry point for the sparse vector decoder.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ilibsfl/include \
 *       tests/fuzz/fuzz_spcodec.c libsfl/src/wire/spcodec.c \
 *       libsfl/src/core/vec.c libsfl/src/core/error.c libsfl/src/core/alloc.c \
 *       -lm -o build/fuzz_spcodec
 *   ./build/fuzz_spcodec -max_total_time=30 corpus/ tests/vectors/
 *
 * Beyond "no crash": whatever decodes must validate, and lossless encodings
 * must re-encode to exactly the input (varints are minimal, so there is one
 * encoding per vector); q8 must re-encode to the same length. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/wire/spcodec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_spvec_t *v = NULL;
    uint8_t *again = NULL;
    size_t len = 0;

    /* Limits a real receiver would set; large enough to reach every path. */
    if (sfl_spcodec_decode(data, size, 1u << 24, 1u << 16, &v) != 0) {
        if (v != NULL)
            abort(); /* failure must leave *out NULL */
        return 0;
    }
    if (sfl_spvec_validate(v) != 0)
        abort();
    sfl_enc_t enc = SFL_ENC_F64;

    /* The encoding byte follows the two varints. */
    size_t off = 0;
    for (int f = 0; f < 2; f++)
        while (data[off++] & 0x80)
            ;
    enc = (sfl_enc_t)data[off];
    if (sfl_spcodec_size(v, enc) != size)
        abort();
    again = malloc(size ? size : 1);
    if (again == NULL)
        abort();
    if (sfl_spcodec_encode(v, enc, again, size, &len) != 0 || len != size)
        abort();
    if (enc != SFL_ENC_Q8 && memcmp(again, data, size) != 0)
        abort();
    free(again);
    sfl_spvec_free(v);
    return 0;
}

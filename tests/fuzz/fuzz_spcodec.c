/* libFuzzer entry point for the sparse vector decoder.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ilibsfl/include \
 *       tests/fuzz/fuzz_spcodec.c libsfl/src/wire/spcodec.c \
 *       libsfl/src/core/vec.c libsfl/src/core/error.c libsfl/src/core/alloc.c \
 *       -lm -o build/fuzz_spcodec
 *   ./build/fuzz_spcodec -max_total_time=30 corpus/ tests/vectors/
 *
 * Beyond "no crash": whatever decodes must validate; decode_into on a reused
 * vector must agree with decode; the encoder's choice (the smallest layout)
 * is never longer than the input, and a lossless encoding re-encodes to
 * bytes that decode to the same vector bit for bit and re-encode to
 * themselves (one canonical encoding per vector); q8 re-encodes to no more
 * bytes than the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/wire/spcodec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sfl_spvec_t *into;

static int same(const sfl_spvec_t *a, const sfl_spvec_t *b)
{
    return a->dim == b->dim && a->nnz == b->nnz &&
           (a->nnz == 0 || (memcmp(a->idx, b->idx, a->nnz * sizeof(*a->idx)) == 0 &&
                            memcmp(a->val, b->val, a->nnz * sizeof(*a->val)) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sfl_spvec_t *v = NULL, *w = NULL;
    uint8_t *again = NULL, *third = NULL;
    size_t len = 0, len3 = 0;
    int rc;

    if (into == NULL && sfl_spvec_new(0, 0, &into) != 0)
        abort();
    /* Limits a real receiver would set; large enough to reach every path. */
    rc = sfl_spcodec_decode(data, size, 1u << 24, 1u << 16, &v);
    if (sfl_spcodec_decode_into(data, size, 1u << 24, 1u << 16, into) != rc)
        abort();
    if (rc != 0) {
        if (v != NULL || into->nnz != 0)
            abort(); /* failure must leave *out NULL, dst empty */
        return 0;
    }
    if (sfl_spvec_validate(v) != 0 || !same(v, into))
        abort();

    /* The encoding is the low two bits of the byte after the two varints. */
    size_t off = 0;
    for (int f = 0; f < 2; f++)
        while (data[off++] & 0x80)
            ;
    sfl_enc_t enc = (sfl_enc_t)(data[off] & 3);

    len = sfl_spcodec_size(v, enc);
    if (len > size)
        abort();
    again = malloc(len ? len : 1);
    third = malloc(len ? len : 1);
    if (again == NULL || third == NULL)
        abort();
    if (sfl_spcodec_encode(v, enc, again, len, &len3) != 0 || len3 != len)
        abort();
    if (enc != SFL_ENC_Q8) {
        if (sfl_spcodec_decode(again, len, 1u << 24, 1u << 16, &w) != 0 || !same(v, w))
            abort();
        if (sfl_spcodec_encode(w, enc, third, len, &len3) != 0 || len3 != len ||
            memcmp(third, again, len) != 0)
            abort();
        sfl_spvec_free(w);
    }
    free(third);
    free(again);
    sfl_spvec_free(v);
    return 0;
}

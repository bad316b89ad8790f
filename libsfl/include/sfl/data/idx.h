/* IDX files, the format MNIST is distributed in (LeCun, Cortes, Burges):
 * a 4-byte magic - two zero bytes, the element type (0x08: unsigned byte)
 * and the number of dimensions - then each dimension as a big-endian
 * 32-bit count, then the elements in row-major order. Files are read plain
 * or gzip-compressed (detected by the gzip magic; zlib inflates them), as
 * the canonical train-images-idx3-ubyte.gz etc. are. Every size is checked
 * against a bound before anything is allocated, and a malformed, truncated
 * or oversized file gets SFL_EPARSE or SFL_ELIMIT with a detail naming the
 * file, never a crash. */
#ifndef SFL_IDX_H
#define SFL_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/data/dataset.h"
#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_IDX_MAX_DIMS 3

typedef struct sfl_idx {
    uint32_t ndims;                   /* 1 .. SFL_IDX_MAX_DIMS */
    uint32_t dims[SFL_IDX_MAX_DIMS];  /* each >= 1 */
    uint8_t *data;                    /* len = product of dims bytes, owned */
    size_t len;
} sfl_idx_t;

/* An IDX file in memory, gzip-compressed or not; name is used in error
 * messages. Only unsigned-byte elements (type 0x08) are supported, at most
 * max_bytes of them: a gzip stream that inflates beyond is stopped there
 * (SFL_ELIMIT), a damaged or truncated one is SFL_EPARSE. Returns owned
 * (sfl_idx_free). */
int sfl_idx_parse(const uint8_t *buf, size_t len, const char *name, size_t max_bytes,
                  sfl_idx_t **out) SFL_MUST_CHECK;
/* The same from a file; -errno (with the path) when it cannot be read. */
int sfl_idx_read(const char *path, size_t max_bytes, sfl_idx_t **out) SFL_MUST_CHECK;
void sfl_idx_free(sfl_idx_t *x);

/* An images file (3 dimensions: n x height x width) and its labels file (1
 * dimension: n) as a dataset: one row per image, its pixels scaled to
 * [0, 1] (p / 255; zeros left out of the sparse rows), the label value as
 * the row's target (code classes with sfl_dataset_encode_labels). The
 * counts must agree (SFL_EPARSE otherwise); n against lim->max_rows and
 * height x width against lim->max_cols (SFL_ELIMIT). lim may be NULL. */
int sfl_idx_dataset(const char *images, const char *labels, const sfl_read_limits_t *lim,
                    sfl_dataset_t **out) SFL_MUST_CHECK;
/* The same from two parsed files (names for the messages). */
int sfl_idx_to_dataset(const sfl_idx_t *images, const char *images_name,
                       const sfl_idx_t *labels, const char *labels_name,
                       const sfl_read_limits_t *lim, sfl_dataset_t **out) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

/* Whole files: an atomic replace for state that must survive a crash, and
 * a bounded read. */
#ifndef SFL_FILE_H
#define SFL_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replaces path with buf[0..len) so that a crash leaves either the old or
 * the new contents, never a mix: a temporary file in the same directory
 * (mode 0600 whatever the umask), write, fsync, rename over path, fsync of
 * the directory. On failure the temporary is removed; -errno with a detail
 * naming the file and the step. */
int sfl_file_write_atomic(const char *path, const void *buf, size_t len) SFL_MUST_CHECK;

/* Reads all of path into *buf (owned, free with sfl_file_free; NUL after
 * the last byte, not counted in *len). A file over max bytes is SFL_ELIMIT,
 * refused before reading it; a missing file is -ENOENT. */
int sfl_file_read(const char *path, size_t max, uint8_t **buf, size_t *len) SFL_MUST_CHECK;

/* Frees a buffer of sfl_file_read after wiping it (it may hold secrets or
 * private state). NULL is a no-op. */
void sfl_file_free(uint8_t *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif

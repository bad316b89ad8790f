/* INI files (coordinator.ini, job files, agent.ini, sflctl.ini, sfl-sim
 * --config), read with libinih's syntax and checked the same way for every
 * program: `[section]` headers, `key = value` (or `key: value`) lines,
 * comments from ';' or '#' at the start of a line and from ' ;' inside one.
 * On top of libinih:
 *   - every error names the file and line: "c.ini:9: unknown key 'listn'";
 *   - the callback's own error (a detail naming the key and the reason,
 *     e.g. "tau: invalid value 'twenty'") stops the parse at that line;
 *   - a key given twice in a section is an error (naming the first line);
 *   - lines longer than libinih's buffer (198 bytes of text), NUL bytes,
 *     section names libinih would cut (48 bytes and more) and files over
 *     SFL_INI_MAX_BYTES are errors, never silently cut;
 *   - leading blanks are ignored: an indented line never continues the value
 *     of the line above (libinih's multi-line values are not used). */
#ifndef SFL_INI_H
#define SFL_INI_H

#include <stddef.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest INI input read. */
#define SFL_INI_MAX_BYTES (1u << 20)
/* Longest section name (libinih keeps 49 bytes; one more could be cut). */
#define SFL_INI_SECTION_MAX 48

/* One key = value, in file order (section "" before the first header).
 * The strings are borrowed for the call. Returns 0, or a negative sfl code
 * with a detail (sfl__fail) that starts with the key: "tau: invalid value
 * 'twenty'", "unknown key 'listn'"; the parse stops there and returns that
 * code, the detail prefixed with "NAME:LINE: ". */
typedef int (*sfl_ini_cb)(void *ud, const char *section, const char *key, const char *value);

/* Reads path. Errors: -errno when it cannot be opened or read ("PATH:
 * cannot open: reason"), SFL_EPARSE for a line that is not a header, a key
 * or a comment, SFL_ELIMIT for a line or file too long, SFL_EINVAL for a
 * duplicate key, the callback's code; the detail names path and line. */
int sfl_ini_parse_file(const char *path, sfl_ini_cb cb, void *ud) SFL_MUST_CHECK;
/* The same over buf[0..len) (borrowed; need not be NUL-terminated), errors
 * named after name. */
int sfl_ini_parse_buffer(const char *name, const char *buf, size_t len, sfl_ini_cb cb,
                         void *ud) SFL_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif

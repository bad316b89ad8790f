/* TLS 1.3 session-ticket keys: what lets a client resume (no certificate
 * sent or verified again) with a coordinator that restarted since.
 *
 * A key encrypts (AES-256-CBC) and authenticates (HMAC-SHA256) the tickets
 * OpenSSL issues; the 16-byte name in each ticket says which key opens it.
 * The newest key issues tickets for rotate_s; it and the older ones then
 * only open tickets until no ticket they issued can still be valid
 * (created + rotate_s + lifetime_s), after which they are dropped.
 *
 * Key file (state_dir/tls-ticket.keys), text, mode 0600, at most
 * SFL_TICKET_KEYS_MAX keys, newest first:
 *   "sfl-ticket-keys-v1\n"
 *   per key: created (decimal seconds since the epoch) " " 160 hex digits
 *   (name 16 | aes 32 | hmac 32 bytes) "\n"
 * Written atomically (sfl_file_write_atomic); read only after the same
 * checks as the identity file (regular file, no group or other access). */
#ifndef SFL_TLSTICKET_H
#define SFL_TLSTICKET_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SFL_TICKET_KEYS_MAX 8
#define SFL_TICKET_KEY_HEX 160
/* header + SFL_TICKET_KEYS_MAX lines of at most 20 + 1 + 160 + 1 bytes */
#define SFL_TICKET_FILE_MAX (19 + SFL_TICKET_KEYS_MAX * 182)

typedef struct {
    uint64_t created; /* seconds since the epoch */
    uint8_t name[16];
    uint8_t aes[32];
    uint8_t hmac[32];
} sfl_ticket_key_t;

typedef struct {
    sfl_ticket_key_t k[SFL_TICKET_KEYS_MAX]; /* k[0] issues, all open */
    size_t n;
} sfl_ticket_keys_t;

/* Parses a key file's text[0..len) (borrowed). name labels the details.
 * SFL_EPARSE (bad header, line, hex, duplicate name, not newest first, no
 * key), SFL_ELIMIT (more than SFL_TICKET_KEYS_MAX keys or bytes past
 * SFL_TICKET_FILE_MAX), SFL_EUNSUP (another format version). */
int sfl_ticket_keys_parse(const char *text, size_t len, const char *name,
                          sfl_ticket_keys_t *out) SFL_MUST_CHECK;
/* Reads path: -ENOENT if missing, SFL_EINSECURE (group/other access),
 * SFL_EINVAL (not a regular file), else what parse returns. */
int sfl_ticket_keys_load(const char *path, sfl_ticket_keys_t *out) SFL_MUST_CHECK;
/* Writes keys to path atomically (mode 0600). -errno. */
int sfl_ticket_keys_save(const sfl_ticket_keys_t *keys, const char *path) SFL_MUST_CHECK;
/* Brings keys up to date at now: drops the keys no valid ticket can need
 * (created + rotate_s + lifetime_s <= now), and makes a new first key if
 * there is none or the newest is rotate_s old (a newest key from the future,
 * a clock set back, is replaced too). 1 if keys changed (save them), 0 if
 * not, SFL_EINVAL for rotate_s or lifetime_s 0. */
int sfl_ticket_keys_rotate(sfl_ticket_keys_t *keys, uint64_t now, uint64_t rotate_s,
                           uint64_t lifetime_s) SFL_MUST_CHECK;
/* Wipes the key material. */
void sfl_ticket_keys_wipe(sfl_ticket_keys_t *keys);

#ifdef __cplusplus
}
#endif

#endif

#include "sfl/net/tlsticket.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "sfl/core/file.h"

/* Ticket keys in state_dir (format in sfl/net/tlsticket.h). The file holds
 * secrets: parsed in place, wiped after, never logged. */

#define HEADER "sfl-ticket-keys-v1\n"
#define HEADER_LEN (sizeof(HEADER) - 1)
#define VERSION_PREFIX "sfl-ticket-keys-v"

void sfl_ticket_keys_wipe(sfl_ticket_keys_t *keys)
{
    if (keys != NULL)
        sodium_memzero(keys, sizeof(*keys));
}

/* One line "created hex\n" at text[*off..len). */
static int parse_line(const char *text, size_t len, size_t *off, const char *name, size_t lineno,
                      sfl_ticket_key_t *k)
{
    uint8_t raw[80];
    size_t i = *off, bin = 0, digits = 0;
    uint64_t v = 0;

    while (i < len && text[i] >= '0' && text[i] <= '9' && digits < 20) {
        if (v > (UINT64_MAX - (uint64_t)(text[i] - '0')) / 10)
            return sfl__fail(SFL_EPARSE, "%s:%zu: creation time out of range", name, lineno);
        v = v * 10 + (uint64_t)(text[i] - '0');
        i++;
        digits++;
    }
    if (digits == 0 || i >= len || text[i] != ' ')
        return sfl__fail(SFL_EPARSE, "%s:%zu: expected 'created hex'", name, lineno);
    i++;
    if (len - i < SFL_TICKET_KEY_HEX + 1 || text[i + SFL_TICKET_KEY_HEX] != '\n' ||
        sodium_hex2bin(raw, sizeof(raw), text + i, SFL_TICKET_KEY_HEX, NULL, &bin, NULL) != 0 ||
        bin != sizeof(raw)) {
        sodium_memzero(raw, sizeof(raw));
        return sfl__fail(SFL_EPARSE, "%s:%zu: expected %d hex digits of key", name, lineno,
                         SFL_TICKET_KEY_HEX);
    }
    k->created = v;
    memcpy(k->name, raw, 16);
    memcpy(k->aes, raw + 16, 32);
    memcpy(k->hmac, raw + 48, 32);
    sodium_memzero(raw, sizeof(raw));
    *off = i + SFL_TICKET_KEY_HEX + 1;
    return 0;
}

int sfl_ticket_keys_parse(const char *text, size_t len, const char *name, sfl_ticket_keys_t *out)
{
    size_t off = HEADER_LEN, lineno = 2;
    int rc;

    if (out == NULL)
        return sfl__fail(SFL_EINVAL, "ticket keys: NULL argument");
    memset(out, 0, sizeof(*out));
    if (name == NULL)
        name = "ticket keys";
    if (text == NULL)
        return sfl__fail(SFL_EINVAL, "%s: NULL text", name);
    if (len > SFL_TICKET_FILE_MAX)
        return sfl__fail(SFL_ELIMIT, "%s: %zu bytes, at most %d", name, len, SFL_TICKET_FILE_MAX);
    if (len < HEADER_LEN || memcmp(text, HEADER, HEADER_LEN) != 0) {
        size_t p = sizeof(VERSION_PREFIX) - 1;

        if (len > p && memcmp(text, VERSION_PREFIX, p) == 0 && text[p] >= '0' && text[p] <= '9')
            return sfl__fail(SFL_EUNSUP, "%s: unsupported ticket key file version "
                                         "(this build reads v1)", name);
        return sfl__fail(SFL_EPARSE, "%s: not an sfl ticket key file (expected '%.18s')", name,
                         HEADER);
    }
    while (off < len) {
        sfl_ticket_key_t *k;

        if (out->n == SFL_TICKET_KEYS_MAX) {
            rc = sfl__fail(SFL_ELIMIT, "%s: more than %d keys", name, SFL_TICKET_KEYS_MAX);
            goto fail;
        }
        k = &out->k[out->n];
        if ((rc = parse_line(text, len, &off, name, lineno, k)) < 0)
            goto fail;
        for (size_t j = 0; j < out->n; j++) {
            if (sodium_memcmp(out->k[j].name, k->name, 16) == 0) {
                rc = sfl__fail(SFL_EPARSE, "%s:%zu: key name repeated", name, lineno);
                goto fail;
            }
        }
        if (out->n > 0 && k->created > out->k[out->n - 1].created) {
            rc = sfl__fail(SFL_EPARSE, "%s:%zu: keys are not newest first", name, lineno);
            goto fail;
        }
        out->n++;
        lineno++;
    }
    if (out->n == 0) {
        rc = sfl__fail(SFL_EPARSE, "%s: no key", name);
        goto fail;
    }
    return 0;
fail:
    sfl_ticket_keys_wipe(out);
    return rc;
}

int sfl_ticket_keys_load(const char *path, sfl_ticket_keys_t *out)
{
    char *text = NULL;
    struct stat st;
    size_t got = 0;
    int fd, rc;

    if (path == NULL || out == NULL)
        return sfl__fail(SFL_EINVAL, "ticket keys: NULL argument");
    memset(out, 0, sizeof(*out));
    if (sodium_init() < 0)
        return sfl__fail(SFL_ENOMEM, "ticket keys: libsodium init failed");
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = -errno;
        return sfl__fail(rc, "%s: %s", path, strerror(-rc));
    }
    /* fstat on the descriptor: the file checked is the file read. */
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        (void)sfl__fail(rc, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = sfl__fail(SFL_EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        rc = sfl__fail(SFL_EINSECURE,
                       "%s: secret key file has mode %04o, accessible to group or others; "
                       "refusing it (chmod 600 %s)",
                       path, (unsigned)(st.st_mode & 07777), path);
        goto out;
    }
    if (st.st_size > SFL_TICKET_FILE_MAX) {
        rc = sfl__fail(SFL_ELIMIT, "%s: %lld bytes, at most %d", path, (long long)st.st_size,
                       SFL_TICKET_FILE_MAX);
        goto out;
    }
    if ((text = sodium_malloc(SFL_TICKET_FILE_MAX + 1)) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "%s: cannot allocate secure memory", path);
        goto out;
    }
    /* One byte more than allowed: a file grown since fstat is caught. */
    while (got < SFL_TICKET_FILE_MAX + 1) {
        ssize_t r = read(fd, text + got, SFL_TICKET_FILE_MAX + 1 - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            (void)sfl__fail(rc, "%s: read: %s", path, strerror(-rc));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    rc = sfl_ticket_keys_parse(text, got, path, out);
out:
    if (text != NULL)
        sodium_free(text); /* wipes */
    close(fd);
    return rc;
}

int sfl_ticket_keys_save(const sfl_ticket_keys_t *keys, const char *path)
{
    char *text;
    size_t off;
    int rc;

    if (keys == NULL || path == NULL || keys->n == 0 || keys->n > SFL_TICKET_KEYS_MAX)
        return sfl__fail(SFL_EINVAL, "ticket keys: nothing to save");
    if (sodium_init() < 0)
        return sfl__fail(SFL_ENOMEM, "ticket keys: libsodium init failed");
    if ((text = sodium_malloc(SFL_TICKET_FILE_MAX + 1)) == NULL)
        return sfl__fail(SFL_ENOMEM, "%s: cannot allocate secure memory", path);
    memcpy(text, HEADER, HEADER_LEN);
    off = HEADER_LEN;
    for (size_t i = 0; i < keys->n; i++) {
        const sfl_ticket_key_t *k = &keys->k[i];
        uint8_t raw[80];

        memcpy(raw, k->name, 16);
        memcpy(raw + 16, k->aes, 32);
        memcpy(raw + 48, k->hmac, 32);
        off += (size_t)snprintf(text + off, 22, "%llu ", (unsigned long long)k->created);
        sodium_bin2hex(text + off, SFL_TICKET_KEY_HEX + 1, raw, sizeof(raw));
        sodium_memzero(raw, sizeof(raw));
        off += SFL_TICKET_KEY_HEX;
        text[off++] = '\n';
    }
    rc = sfl_file_write_atomic(path, text, off);
    sodium_free(text);
    return rc;
}

int sfl_ticket_keys_rotate(sfl_ticket_keys_t *keys, uint64_t now, uint64_t rotate_s,
                           uint64_t lifetime_s)
{
    size_t kept = 0;
    int changed = 0;

    if (keys == NULL || rotate_s == 0 || lifetime_s == 0 || keys->n > SFL_TICKET_KEYS_MAX)
        return sfl__fail(SFL_EINVAL, "ticket keys: bad rotation arguments");
    if (sodium_init() < 0)
        return sfl__fail(SFL_ENOMEM, "ticket keys: libsodium init failed");
    /* A key issued tickets until it was replaced (at most created +
     * rotate_s); they live lifetime_s more. A key from the future (clock set
     * back) is kept for opening until the same bound. */
    for (size_t i = 0; i < keys->n; i++) {
        const sfl_ticket_key_t *k = &keys->k[i];

        if (k->created + rotate_s + lifetime_s > now && k->created < now + rotate_s + lifetime_s)
            keys->k[kept++] = *k;
        else
            changed = 1;
    }
    for (size_t i = kept; i < keys->n; i++)
        sodium_memzero(&keys->k[i], sizeof(keys->k[i]));
    keys->n = kept;
    if (keys->n == 0 || keys->k[0].created + rotate_s <= now || keys->k[0].created > now) {
        if (keys->n == SFL_TICKET_KEYS_MAX)
            keys->n--; /* the oldest goes: its tickets resume no more */
        memmove(&keys->k[1], &keys->k[0], keys->n * sizeof(keys->k[0]));
        keys->n++;
        keys->k[0].created = now;
        randombytes_buf(keys->k[0].name, sizeof(keys->k[0].name));
        randombytes_buf(keys->k[0].aes, sizeof(keys->k[0].aes));
        randombytes_buf(keys->k[0].hmac, sizeof(keys->k[0].hmac));
        changed = 1;
    }
    /* Newest first also when a clock set back left an older "future" key. */
    for (size_t i = 1; i < keys->n; i++)
        if (keys->k[i].created > keys->k[0].created)
            keys->k[i].created = keys->k[0].created;
    return changed;
}

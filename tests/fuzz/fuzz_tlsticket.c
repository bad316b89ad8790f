/* libFuzzer: the TLS ticket key file (sfl_ticket_keys_parse,
 * sfl/net/tlsticket.h). A parse either fails with a detail naming the file
 * and no key left in the output, or gives 1..SFL_TICKET_KEYS_MAX keys,
 * newest first with distinct names, that save and parse back to the same
 * keys (the written text is built in memory here, as save formats it). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sfl/core/error.h"
#include "sfl/net/tlsticket.h"

#define NAME "fuzz.keys"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t format(const sfl_ticket_keys_t *k, char *out, size_t cap)
{
    size_t off = (size_t)snprintf(out, cap, "sfl-ticket-keys-v1\n");

    for (size_t i = 0; i < k->n; i++) {
        const sfl_ticket_key_t *e = &k->k[i];

        off += (size_t)snprintf(out + off, cap - off, "%llu ", (unsigned long long)e->created);
        for (size_t j = 0; j < 16; j++)
            off += (size_t)snprintf(out + off, cap - off, "%02x", e->name[j]);
        for (size_t j = 0; j < 32; j++)
            off += (size_t)snprintf(out + off, cap - off, "%02x", e->aes[j]);
        for (size_t j = 0; j < 32; j++)
            off += (size_t)snprintf(out + off, cap - off, "%02x", e->hmac[j]);
        off += (size_t)snprintf(out + off, cap - off, "\n");
    }
    return off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sfl_ticket_keys_t k, back;
    static const sfl_ticket_key_t zero;
    static char text[SFL_TICKET_FILE_MAX + 64];
    size_t len;
    int rc = sfl_ticket_keys_parse((const char *)data, size, NAME, &k);

    if (rc < 0) {
        if (strncmp(sfl_last_error(), NAME, strlen(NAME)) != 0 || k.n != 0 ||
            memcmp(&k.k[0], &zero, sizeof(zero)) != 0)
            __builtin_trap();
        return 0;
    }
    if (rc != 0 || k.n == 0 || k.n > SFL_TICKET_KEYS_MAX)
        __builtin_trap();
    for (size_t i = 1; i < k.n; i++) {
        if (k.k[i].created > k.k[i - 1].created)
            __builtin_trap();
        for (size_t j = 0; j < i; j++)
            if (memcmp(k.k[i].name, k.k[j].name, 16) == 0)
                __builtin_trap();
    }
    len = format(&k, text, sizeof(text));
    if (len > SFL_TICKET_FILE_MAX || sfl_ticket_keys_parse(text, len, NAME, &back) != 0 ||
        back.n != k.n || memcmp(back.k, k.k, k.n * sizeof(k.k[0])) != 0)
        __builtin_trap();
    return 0;
}

/* Library-internal: counts per source address (the listener's handshakes in
 * progress per peer address, transport.c). Open addressing with linear
 * probing over a table sized once, at least twice the most keys it will
 * hold, so it never fills and nothing is allocated per connection. */
#ifndef SFL_NET_SRCMAP_H
#define SFL_NET_SRCMAP_H

#include <stddef.h>
#include <stdint.h>

#define SFL_SRC_KEY 16 /* an IPv4 address as ::ffff:a.b.c.d, or an IPv6 /64 */

typedef struct {
    uint8_t src[SFL_SRC_KEY];
    uint32_t n; /* 0: a free slot */
} sfl__src_slot_t;

typedef struct {
    sfl__src_slot_t *slots;
    size_t cap;    /* a power of two */
    uint64_t seed; /* of the hash: not chosen by a peer */
} sfl__srcmap_t;

/* Room for max_keys keys with non-zero counts at once. SFL_ENOMEM. */
int sfl__srcmap_init(sfl__srcmap_t *m, size_t max_keys, uint64_t seed);
/* Frees the table; the struct may be reused after init. NULL-safe. */
void sfl__srcmap_close(sfl__srcmap_t *m);
/* Forget every key. */
void sfl__srcmap_clear(sfl__srcmap_t *m);
uint32_t sfl__srcmap_count(const sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY]);
/* count + 1. The caller keeps the number of keys within max_keys. */
void sfl__srcmap_add(sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY]);
/* count - 1; the count must be > 0. */
void sfl__srcmap_del(sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY]);
/* The key with the largest count (ties: any), or NULL when all are 0. */
const sfl__src_slot_t *sfl__srcmap_max(const sfl__srcmap_t *m);

#endif

#include "net/srcmap.h"

#include <assert.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/error.h"

int sfl__srcmap_init(sfl__srcmap_t *m, size_t max_keys, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    for (m->cap = 2; m->cap < 2 * max_keys;)
        m->cap *= 2;
    m->slots = sfl__calloc(m->cap, sizeof(*m->slots));
    if (m->slots == NULL)
        return sfl__fail(SFL_ENOMEM, "srcmap: no memory for %zu slots", m->cap);
    m->seed = seed;
    return 0;
}

void sfl__srcmap_close(sfl__srcmap_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->slots);
    m->slots = NULL;
    m->cap = 0;
}

void sfl__srcmap_clear(sfl__srcmap_t *m)
{
    memset(m->slots, 0, m->cap * sizeof(*m->slots));
}

static size_t home(const sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY])
{
    uint64_t h = 0xcbf29ce484222325u ^ m->seed; /* FNV-1a, seeded */

    for (int i = 0; i < SFL_SRC_KEY; i++)
        h = (h ^ src[i]) * 0x100000001b3u;
    /* FNV's low bits depend only on the inputs' low bits: MurmurHash3's
     * finalizer spreads every bit over the slot index */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return (size_t)h & (m->cap - 1);
}

/* The slot of src, or the free slot where it would go (there is always one:
 * at most half the slots are in use). */
static sfl__src_slot_t *find(const sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY])
{
    size_t i = home(m, src);

    while (m->slots[i].n != 0 && memcmp(m->slots[i].src, src, SFL_SRC_KEY) != 0)
        i = (i + 1) & (m->cap - 1);
    return &m->slots[i];
}

uint32_t sfl__srcmap_count(const sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY])
{
    return find(m, src)->n;
}

void sfl__srcmap_add(sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY])
{
    sfl__src_slot_t *e = find(m, src);

    if (e->n == 0)
        memcpy(e->src, src, SFL_SRC_KEY);
    e->n++;
}

/* Linear probing's deletion: later members of the run move back into the
 * hole when their home is not cyclically in (hole, j], so every lookup
 * still finds them without tombstones. */
void sfl__srcmap_del(sfl__srcmap_t *m, const uint8_t src[SFL_SRC_KEY])
{
    size_t mask = m->cap - 1, hole, j;
    sfl__src_slot_t *e = find(m, src);

    assert(e->n > 0);
    if (--e->n > 0)
        return;
    hole = (size_t)(e - m->slots);
    for (j = (hole + 1) & mask; m->slots[j].n != 0; j = (j + 1) & mask) {
        size_t h = home(m, m->slots[j].src);

        if (((j - h) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            m->slots[j].n = 0;
            hole = j;
        }
    }
}

const sfl__src_slot_t *sfl__srcmap_max(const sfl__srcmap_t *m)
{
    const sfl__src_slot_t *top = NULL;

    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].n > 0 && (top == NULL || m->slots[i].n > top->n))
            top = &m->slots[i];
    return top;
}

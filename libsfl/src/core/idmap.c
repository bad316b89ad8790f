/* The id map (sfl/core/idmap.h). */
#include "sfl/core/idmap.h"

#include <stdint.h>
#include <string.h>

#include "sfl/core/alloc.h"

/* A 64-bit mix (splitmix64's finalizer): stream ids are odd, connection
 * numbers consecutive; both would cluster under their low bits alone. */
static size_t slot(uint64_t key, size_t cap)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (size_t)key & (cap - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const sfl_idmap_t *m, uint64_t key)
{
    size_t i = slot(key, m->cap);

    while (m->vals[i] != NULL && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *sfl_idmap_get(const sfl_idmap_t *m, uint64_t key)
{
    return m->cap == 0 ? NULL : m->vals[find(m, key)];
}

/* A table of at least twice n + more slots, the entries moved over. */
static int grow(sfl_idmap_t *m, size_t more)
{
    size_t cap = m->cap ? m->cap : 16;
    sfl_idmap_t t = {0};

    while (cap / 2 < m->n + more && cap <= SIZE_MAX / 4)
        cap *= 2;
    if (cap / 2 < m->n + more || (t.keys = sfl__calloc(cap, sizeof(*t.keys))) == NULL ||
        (t.vals = sfl__calloc(cap, sizeof(*t.vals))) == NULL) {
        sfl__free(t.keys);
        return sfl__fail(SFL_ENOMEM, "idmap: out of memory for %zu slots", cap);
    }
    t.cap = cap;
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i] != NULL) {
            size_t j = find(&t, m->keys[i]);

            t.keys[j] = m->keys[i];
            t.vals[j] = m->vals[i];
        }
    t.n = m->n;
    sfl_idmap_free(m);
    *m = t;
    return 0;
}

int sfl_idmap_reserve(sfl_idmap_t *m, size_t more)
{
    if (more > SIZE_MAX / 4 - m->n)
        return sfl__fail(SFL_ENOMEM, "idmap: room for %zu more entries is too much", more);
    return m->n + more <= m->cap / 2 ? 0 : grow(m, more);
}

int sfl_idmap_put(sfl_idmap_t *m, uint64_t key, void *val)
{
    size_t i;
    int rc;

    if (val == NULL)
        return sfl__fail(SFL_EINVAL, "idmap: a NULL value");
    if ((rc = sfl_idmap_reserve(m, 1)) < 0)
        return rc;
    i = find(m, key);
    if (m->vals[i] == NULL)
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return 0;
}

void *sfl_idmap_del(sfl_idmap_t *m, uint64_t key)
{
    size_t i, j, mask = m->cap - 1;
    void *val;

    if (m->cap == 0 || (val = m->vals[i = find(m, key)]) == NULL)
        return NULL;
    m->vals[i] = NULL;
    m->n--;
    /* Backward shift: an entry further along the run moves into the hole
     * unless its home slot lies cyclically in (i, j]. */
    for (j = (i + 1) & mask; m->vals[j] != NULL; j = (j + 1) & mask) {
        size_t h = slot(m->keys[j], m->cap);

        if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        m->vals[j] = NULL;
        i = j;
    }
    return val;
}

void sfl_idmap_free(sfl_idmap_t *m)
{
    sfl__free(m->keys);
    sfl__free(m->vals);
    memset(m, 0, sizeof(*m));
}

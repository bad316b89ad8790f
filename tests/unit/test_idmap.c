/* sfl/core/idmap.h: the map against a plain array, through growth and
 * backward-shift deletion, and its refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "sfl/core/idmap.h"
#include "sfl/core/rng.h"

#define KEYS 3000

static void test_idmap_empty(void **state)
{
    sfl_idmap_t m = {0};
    int x;

    (void)state;
    assert_null(sfl_idmap_get(&m, 0));
    assert_null(sfl_idmap_get(&m, UINT64_MAX));
    assert_null(sfl_idmap_del(&m, 7));
    assert_int_equal(sfl_idmap_put(&m, 7, NULL), SFL_EINVAL);
    assert_int_equal(m.n, 0);
    assert_int_equal(sfl_idmap_put(&m, 0, &x), 0); /* 0 is a key like any other */
    assert_ptr_equal(sfl_idmap_get(&m, 0), &x);
    assert_ptr_equal(sfl_idmap_del(&m, 0), &x);
    assert_null(sfl_idmap_get(&m, 0));
    sfl_idmap_free(&m);
    assert_int_equal(m.cap, 0);
}

/* Random puts (new and replacing), deletes and gets over a fixed key set
 * (odd stream ids, even numbers, keys spread over 64 bits; distinct), each
 * checked against an array; every key checked at intervals. */
static void test_idmap_model(void **state)
{
    static uint64_t keys[KEYS];
    static int vals[4];
    static int *ref[KEYS];
    sfl_idmap_t m = {0};
    sfl_rng_t r;
    size_t n = 0;

    (void)state;
    sfl_rng_seed(&r, 11, 0, 0, 0);
    for (size_t i = 0; i < KEYS; i++)
        keys[i] = i % 3 == 0 ? 2 * i + 1 : i % 3 == 1 ? 2 * i : sfl_rng_u64(&r) | 1ull << 63;
    memset(ref, 0, sizeof(ref));
    for (int step = 0; step < 300000; step++) {
        /* phases: mostly puts (growth), then mostly deletes (shifts) */
        uint64_t p = (step / 20000) % 2 ? 30 : 70;
        size_t i = (size_t)(sfl_rng_u64(&r) % KEYS);
        uint64_t op = sfl_rng_u64(&r) % 100;

        if (op < p) {
            int *v = &vals[sfl_rng_u64(&r) % 4];

            assert_int_equal(sfl_idmap_put(&m, keys[i], v), 0);
            n += ref[i] == NULL;
            ref[i] = v;
        } else {
            assert_ptr_equal(sfl_idmap_del(&m, keys[i]), ref[i]);
            n -= ref[i] != NULL;
            ref[i] = NULL;
        }
        assert_ptr_equal(sfl_idmap_get(&m, keys[i]), ref[i]);
        assert_int_equal(m.n, n);
        assert_true(2 * m.n <= m.cap);
        if (step % 5000 == 0)
            for (size_t k = 0; k < KEYS; k++)
                assert_ptr_equal(sfl_idmap_get(&m, keys[k]), ref[k]);
    }
    for (size_t k = 0; k < KEYS; k++)
        assert_ptr_equal(sfl_idmap_get(&m, keys[k]), ref[k]);
    sfl_idmap_free(&m);
}

/* Keys that all want one slot: a single run, deleted from its middle. */
static void test_idmap_one_run(void **state)
{
    sfl_idmap_t m = {0};
    int v[8];

    (void)state;
    for (uint64_t k = 0; k < 8; k++)
        assert_int_equal(sfl_idmap_put(&m, k << 40, &v[k]), 0);
    for (uint64_t k = 1; k < 8; k += 2)
        assert_ptr_equal(sfl_idmap_del(&m, k << 40), &v[k]);
    for (uint64_t k = 0; k < 8; k++)
        assert_ptr_equal(sfl_idmap_get(&m, k << 40), k % 2 ? NULL : &v[k]);
    sfl_idmap_free(&m);
}

/* A growth that cannot allocate leaves the map as it was. */
static int put_many(sfl_idmap_t *m, int *v)
{
    for (uint64_t k = 0; k < 100; k++) {
        int rc = sfl_idmap_put(m, k, v);

        if (rc < 0)
            return rc;
    }
    return 0;
}

static void test_idmap_enomem(void **state)
{
    sfl_idmap_t m = {0};
    int v;

    (void)state;
    FAILALLOC_EACH(put_many(&m, &v), {
        for (uint64_t k = 0; k < 100; k++)
            assert_true(sfl_idmap_get(&m, k) == NULL || sfl_idmap_get(&m, k) == &v);
        assert_true(2 * m.n <= m.cap || m.cap == 0);
    });
    for (uint64_t k = 0; k < 100; k++)
        assert_ptr_equal(sfl_idmap_get(&m, k), &v);
    assert_int_equal(m.n, 100);
    /* after a reserve, that many new keys go in without allocating */
    assert_int_equal(sfl_idmap_reserve(&m, 500), 0);
    failalloc_install();
    failalloc_arm(0);
    for (uint64_t k = 100; k < 600; k++)
        assert_int_equal(sfl_idmap_put(&m, k, &v), 0);
    assert_int_equal(failalloc_count(), 0);
    failalloc_arm(-1);
    failalloc_uninstall();
    assert_int_equal(sfl_idmap_reserve(&m, SIZE_MAX), SFL_ENOMEM);
    assert_int_equal(m.n, 600);
    sfl_idmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idmap_empty),
        cmocka_unit_test(test_idmap_model),
        cmocka_unit_test(test_idmap_one_run),
        cmocka_unit_test(test_idmap_enomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

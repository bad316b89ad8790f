/* The round kinds' table (server/round/shape.h): every kind sets every
 * operation, and a job's next round takes the kind its spec and its
 * stored statistics call for, the old kind's state freed on the change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "coord_int.h"
#include "round/shape.h"
#include "sfl/core/alloc.h"

static const coord_shape_t *const kinds[] = {&coord_shape_plain, &coord_shape_secagg,
                                             &coord_shape_vertical, &coord_shape_statistics};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Every member after the name is an operation: a pointer to a function.
 * Read as such, none may be NULL (an operation added to the table and
 * left out of a kind fails here). */
typedef void (*op_t)(void);
_Static_assert((sizeof(coord_shape_t) - offsetof(coord_shape_t, free)) % sizeof(op_t) == 0,
               "coord_shape_t: a name, then operations only");

static void test_shape_every_kind_has_every_operation(void **state)
{
    size_t nops = (sizeof(coord_shape_t) - offsetof(coord_shape_t, free)) / sizeof(op_t);

    (void)state;
    assert_true(nops >= 20);
    for (size_t k = 0; k < NKINDS; k++) {
        const unsigned char *base = (const unsigned char *)kinds[k] + offsetof(coord_shape_t, free);

        assert_non_null(kinds[k]->name);
        for (size_t i = 0; i < nops; i++) {
            op_t op;

            memcpy(&op, base + i * sizeof(op_t), sizeof(op));
            if (op == NULL)
                fail_msg("kind %s: operation %zu is not set", kinds[k]->name, i);
        }
        for (size_t o = 0; o < k; o++)
            assert_string_not_equal(kinds[k]->name, kinds[o]->name);
    }
}

/* A job as coord_shape_for sees it: its spec (the model's copy too), the
 * vertical model or none, the moments or none. */
static coord_job_t *job(int secagg, int vertical, int standardize, int moments)
{
    coord_job_t *j = sfl__calloc(1, sizeof(*j));

    assert_non_null(j);
    j->shape = &coord_shape_plain;
    j->spec.secagg = secagg;
    j->spec.standardize = standardize;
    j->model.spec = j->spec;
    j->model.v = vertical ? &j->model.vert : NULL;
    if (moments)
        assert_non_null(j->moments = sfl__calloc(3, sizeof(double)));
    return j;
}

static void drop(coord_job_t *j)
{
    j->shape->free(j);
    sfl__free(j->moments);
    sfl__free(j);
}

static void test_shape_lookup_by_spec(void **state)
{
    static const struct {
        int secagg, vertical, standardize, moments;
        const coord_shape_t *want;
    } cases[] = {
        {0, 0, 0, 0, &coord_shape_plain},
        {1, 0, 0, 0, &coord_shape_secagg},
        {0, 1, 0, 0, &coord_shape_vertical},
        /* a standardize job's round 0, under either update mode */
        {0, 0, 1, 0, &coord_shape_statistics},
        {1, 0, 1, 0, &coord_shape_statistics},
        /* ... and its training rounds once the moments are stored */
        {0, 0, 1, 1, &coord_shape_plain},
        {1, 0, 1, 1, &coord_shape_secagg},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        coord_job_t *j = job(cases[i].secagg, cases[i].vertical, cases[i].standardize,
                             cases[i].moments);

        assert_ptr_equal(coord_shape_for(j), cases[i].want);
        coord_shape_set(j);
        assert_ptr_equal(j->shape, cases[i].want);
        drop(j);
    }
}

/* The statistics round commits: the job's next round is a training one,
 * and the statistics round's state is freed (ASan: nothing leaks) and
 * zero for the new kind. */
static void test_shape_change_frees_the_old_state(void **state)
{
    coord_job_t *j = job(1, 0, 1, 0);
    static const unsigned char zero[sizeof(j->kst)];

    (void)state;
    coord_shape_set(j);
    assert_ptr_equal(j->shape, &coord_shape_statistics);
    assert_non_null(j->kst.stats.work_moments = sfl__calloc(3, sizeof(double)));
    assert_non_null(j->kst.stats.sa.u3 = sfl__calloc(2, sizeof(uint64_t)));
    coord_shape_set(j); /* the same kind: the state stays */
    assert_non_null(j->kst.stats.work_moments);
    assert_non_null(j->moments = sfl__calloc(3, sizeof(double)));
    coord_shape_set(j);
    assert_ptr_equal(j->shape, &coord_shape_secagg);
    assert_memory_equal(&j->kst, zero, sizeof(zero));
    drop(j);

    j = job(0, 1, 0, 0);
    coord_shape_set(j);
    assert_ptr_equal(j->shape, &coord_shape_vertical);
    assert_non_null(j->kst.vr.vagent = sfl__calloc(4, sizeof(uint64_t)));
    drop(j); /* the kind frees its block holders */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_every_kind_has_every_operation),
        cmocka_unit_test(test_shape_lookup_by_spec),
        cmocka_unit_test(test_shape_change_frees_the_old_state),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

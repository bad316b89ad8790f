/* server/job/jobdef.c: [job NAME] sections read into the one job spec form
 * (sfl_job_spec_t), and what the coordinator refuses in a spec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "coord.h"
#include "job/model.h"
#include "sfl/core/error.h"

static void test_jobdef_sections(void **state)
{
    const char *jn;
    char sec[64];

    (void)state;
    assert_int_equal(coord_job_section("coordinator", &jn), 0);
    assert_null(jn);
    assert_int_equal(coord_job_section("job   lsq", &jn), 1);
    assert_string_equal(jn, "lsq");
    assert_int_equal(coord_job_section("job  ", &jn), SFL_EINVAL);
    snprintf(sec, sizeof(sec), "job %044d", 7); /* 48 bytes: kept whole */
    assert_int_equal(coord_job_section(sec, &jn), 1);
    assert_int_equal(strlen(jn), 44);
    snprintf(sec, sizeof(sec), "job %045d", 7); /* 49: inih may have cut it */
    assert_int_equal(coord_job_section(sec, &jn), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "at most 44 characters"));
}

static void test_jobdef_keys_and_wire(void **state)
{
    coord_jobdef_t *d = NULL;
    sfl_job_spec_t w;

    (void)state;
    assert_int_equal(coord_jobdef_new("cls", &d), 0);
    assert_int_equal(coord_jobdef_set(d, "features", "10"), 0);
    assert_int_equal(coord_jobdef_set(d, "loss", "logistic"), 0);
    assert_int_equal(coord_jobdef_set(d, "classes", "2"), 0);
    assert_int_equal(coord_jobdef_check(d), SFL_EINVAL); /* labels missing */
    assert_int_equal(coord_jobdef_set(d, "labels", "1,-1"), SFL_EINVAL); /* not ascending */
    assert_int_equal(coord_jobdef_set(d, "labels", "-1,0,1"), 0);
    assert_int_equal(coord_jobdef_check(d), SFL_EINVAL); /* classes = 2, 3 labels */
    assert_string_equal(sfl_last_error(), "classes = 2 but 3 labels");
    assert_int_equal(coord_jobdef_set(d, "labels", "-1,1"), 0);
    assert_int_equal(coord_jobdef_set(d, "paused", "2"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_set(d, "paused", "1"), 0);
    assert_int_equal(coord_jobdef_set(d, "bogus", "1"), SFL_EINVAL);
    assert_int_equal(coord_jobdef_check(d), 0);
    assert_int_equal(coord_jobdef_wire(d, &w), 0);
    assert_string_equal(w.name, "cls");
    assert_int_equal(w.paused, 1);
    assert_int_equal(w.dimension, 10);

    /* every parameter named: the algorithm's defaults filled in */
    assert_non_null(sfl_param_list_find(&w.params, "tau"));
    assert_int_equal(w.nlabels, 2);

    /* what the coordinator refuses in a spec */
    assert_int_equal(coord_job_spec_check(&w), 0);
    {
        sfl_job_spec_t bad = w;

        snprintf(bad.algorithm, sizeof(bad.algorithm), "sgd9");
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        assert_string_equal(sfl_last_error(), "algorithm: unknown algorithm 'sgd9' (valid: fedht, "
                                              "fediterht, diht, fedavg, fedprox, fedmid, "
                                              "feddualavg, fedgradmp, fedgradmp-inexact, "
                                              "fedmac, pfedme, perfedavg, bcfw, dpbcfw)");
        /* the nearest one, when there is one (issue 24 item 8) */
        snprintf(bad.algorithm, sizeof(bad.algorithm), "fedmax");
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        assert_non_null(strstr(sfl_last_error(), "'fedmax'; did you mean 'fedmac'? (valid: "));
        bad = w;
        snprintf(bad.loss, sizeof(bad.loss), "hinge");
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        bad = w;
        snprintf(bad.dictionary, sizeof(bad.dictionary), "d");
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        bad = w;
        bad.cohort_size = 0;
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        bad = w;
        for (int i = 0; i < 9; i++) {
            char tag[16];

            snprintf(tag, sizeof(tag), "c%d", i);
            assert_int_equal(sfl_msg_tags_add(&bad.required_conditions, tag), 0);
        }
        assert_int_equal(coord_job_spec_check(&bad), SFL_EINVAL);
        assert_string_equal(sfl_last_error(), "required_conditions: at most 8");
    }
    coord_jobdef_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobdef_sections),
        cmocka_unit_test(test_jobdef_keys_and_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

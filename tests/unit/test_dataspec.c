/* libsfl/src/data/dataspec.c: the data specs sfl-sim's --data and the
 * agent's data take (libsvm:FILE, csv:FILE, idx:IMAGES,LABELS): each form
 * read through the one reader, widened to min_cols; malformed specs refused
 * with the forms named, a missing file with its path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failalloc.h"
#include "sfl/data/dataset.h"

static char dir[64];

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sfl-dataspec-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const void *buf, size_t len)
{
    char p[128];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void test_dataspec_check(void **state)
{
    static const char *const good[] = {"libsvm:a.svm", "csv:a.csv", "idx:i.gz,l.gz",
                                       "idx:/d/i,/d/l"};
    static const char *const bad[] = {"", "libsvm:", "csv:", "idx:i.gz", "idx:,l.gz",
                                      "idx:i.gz,", "idx:i,l,m", "parquet:x", "a.svm",
                                      "LIBSVM:a.svm"};

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (sfl_dataset_spec_check(good[i]) != 0)
            fail_msg("'%s' refused: %s", good[i], sfl_last_error());
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sfl_dataset_spec_check(bad[i]) != SFL_EINVAL)
            fail_msg("'%s' accepted", bad[i]);
        assert_non_null(strstr(sfl_last_error(), "want " SFL_DATASET_SPEC_FORMS));
    }
}

/* The same three rows in each form, read through the one reader. */
static void test_dataspec_read(void **state)
{
    static const char svm[] = "1 1:0.5 3:2\n0 2:1\n1 1:1\n";
    static const char csv[] = "1,0.5,0,2\n0,0,1,0\n1,1,0,0\n";
    /* 3 images of 1 x 3 bytes, and their labels */
    static const uint8_t im[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 3,
                                 255, 0, 51, 0, 255, 0, 255, 0, 0};
    static const uint8_t lb[] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 0, 1};
    char spec[300];
    sfl_dataset_t *ds = NULL;
    const char *forms[3];

    (void)state;
    write_file("a.svm", svm, sizeof(svm) - 1);
    write_file("a.csv", csv, sizeof(csv) - 1);
    write_file("im", im, sizeof(im));
    write_file("lb", lb, sizeof(lb));
    forms[0] = "libsvm:%s/a.svm";
    forms[1] = "csv:%s/a.csv";
    forms[2] = "idx:%s/im,%s/lb";
    for (int f = 0; f < 3; f++) {
        snprintf(spec, sizeof(spec), forms[f], dir, dir);
        if (sfl_dataset_read(spec, 0, NULL, &ds) != 0)
            fail_msg("%s: %s", spec, sfl_last_error());
        assert_int_equal(ds->X->nrows, 3);
        assert_int_equal(ds->X->ncols, 3);
        assert_true(ds->y[0] == 1 && ds->y[1] == 0 && ds->y[2] == 1);
        assert_int_equal(ds->X->nnz, 4);
        sfl_dataset_free(ds);
        ds = NULL;
        /* widened, never narrowed */
        assert_int_equal(sfl_dataset_read(spec, 10, NULL, &ds), 0);
        assert_int_equal(ds->X->ncols, 10);
        sfl_dataset_free(ds);
        ds = NULL;
        assert_int_equal(sfl_dataset_read(spec, 2, NULL, &ds), 0);
        assert_int_equal(ds->X->ncols, 3);
        sfl_dataset_free(ds);
        ds = NULL;
    }
    /* each allocation failing in turn: an error, nothing leaked */
    snprintf(spec, sizeof(spec), "idx:%s/im,%s/lb", dir, dir);
    FAILALLOC_EACH(sfl_dataset_read(spec, 10, NULL, &ds), (sfl_dataset_free(ds), ds = NULL));
}

static void test_dataspec_errors(void **state)
{
    char spec[300];
    sfl_dataset_t *ds = NULL;

    (void)state;
    assert_int_equal(sfl_dataset_read("hdf5:x", 0, NULL, &ds), SFL_EINVAL);
    snprintf(spec, sizeof(spec), "libsvm:%s/missing.svm", dir);
    assert_int_equal(sfl_dataset_read(spec, 0, NULL, &ds), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "missing.svm"));
    snprintf(spec, sizeof(spec), "idx:%s/missing,%s/lb", dir, dir);
    assert_int_equal(sfl_dataset_read(spec, 0, NULL, &ds), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "missing"));
    /* the labels file given as images: the wrong shape, said */
    snprintf(spec, sizeof(spec), "idx:%s/lb,%s/lb", dir, dir);
    assert_int_equal(sfl_dataset_read(spec, 0, NULL, &ds), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "images have 3"));
    assert_null(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dataspec_check),
        cmocka_unit_test(test_dataspec_read),
        cmocka_unit_test(test_dataspec_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

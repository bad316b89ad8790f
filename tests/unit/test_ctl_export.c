/* sflctl's model export files (ctl/export.c): the bytes checked against the
 * model hash, every --format, and the atomic write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "failalloc.h"
#include "sfl/core/alloc.h"
#include "sfl/wire/msg.h"
#include "testutil.h"

static char dir[64]; /* temporary files */

static sfl_export_t *export_roundtrip(void)
{
    sfl_spvec_t *v = NULL;
    sfl_export_t e, *got = NULL;
    uint8_t *buf = NULL;
    size_t len;

    assert_int_equal(sfl_spvec_new(1000, 3, &v), 0);
    v->nnz = 3;
    v->idx[0] = 4, v->idx[1] = 70, v->idx[2] = 999;
    v->val[0] = 0.5, v->val[1] = -2.25, v->val[2] = 1e-300;
    memset(&e, 0, sizeof(e));
    e.job_id = 2;
    e.round = 9;
    snprintf(e.algorithm, sizeof(e.algorithm), "fediterht");
    snprintf(e.loss, sizeof(e.loss), "lsq");
    e.dimension = 1000;
    e.model = v;
    assert_int_equal(sfl_msg_export_pack(&e, &buf, &len), 0);
    assert_int_equal(sfl_msg_export_unpack(buf, len, NULL, &got), 0);
    sfl_msg_buf_free(buf);
    sfl_spvec_free(v);
    return got;
}

static void test_ctl_export_bytes(void **state)
{
    sfl_export_t *e = export_roundtrip();
    sfl_spvec_t *back = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;

    (void)state;
    assert_int_equal(ctl_export_bytes(e, &buf, &len), 0);
    assert_int_equal(len, sfl_spcodec_size(e->model, SFL_ENC_F64));
    assert_int_equal(sfl_spcodec_decode(buf, len, 1000, 1000, &back), 0);
    assert_int_equal(back->nnz, 3);
    assert_int_equal(back->idx[2], 999);
    assert_true(back->val[1] == -2.25);
    sfl_spvec_free(back);
    sfl__free(buf);

    FAILALLOC_EACH(ctl_export_bytes(e, &buf, &len), (sfl__free(buf), buf = NULL));

    /* bytes that are not what the hash says */
    e->model_hash[0] ^= 1;
    assert_int_equal(ctl_export_bytes(e, &buf, &len), SFL_EPARSE);
    assert_detail("export: model bytes do not match model_hash");
    assert_null(buf);
    assert_int_equal(len, 0);
    sfl_msg_export_free(e);
}

/* Every --format writer, on the same checked model (dim 1000, 3 nonzeros). */
static void test_ctl_model_formats(void **state)
{
    sfl_export_t *e = export_roundtrip();
    ctl_format_t fmt;
    uint8_t *buf = NULL, *codec = NULL;
    size_t len = 0, clen = 0;

    (void)state;
    assert_int_equal(ctl_format_parse("npy", &fmt), 0);
    assert_int_equal(fmt, CTL_FORMAT_NPY);
    assert_int_equal(ctl_format_parse("csv", &fmt), SFL_EINVAL);
    assert_detail("unknown --format 'csv' (text, libsvm, npy or spcodec)");

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_TEXT, &buf, &len), 0);
    {
        const char want[] = "# sfl model: job 2, round 9, algorithm fediterht, loss lsq\n"
                            "# dimension 1000, nnz 3; lines: index (1-based, as sfl-sim "
                            "--model-out) value\n"
                            "5 0.5\n71 -2.25\n1000 1e-300\n";

        assert_int_equal(len, sizeof(want) - 1);
        assert_memory_equal(buf, want, len);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_LIBSVM, &buf, &len), 0);
    {
        const char want[] = "0 5:0.5 71:-2.25 1000:1e-300\n";

        assert_int_equal(len, sizeof(want) - 1);
        assert_memory_equal(buf, want, len);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_NPY, &buf, &len), 0);
    {
        const char hdr[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000,), }";
        size_t hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        double x;

        assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
        assert_int_equal((10 + hlen) % 64, 0);
        assert_int_equal(len, 10 + hlen + 1000 * 8);
        assert_memory_equal(buf + 10, hdr, sizeof(hdr) - 1);
        assert_int_equal(buf[10 + hlen - 1], '\n');
        assert_int_equal(buf[10 + sizeof(hdr) - 1], ' ');
        /* little-endian float64 at index * 8 (the host here is little-endian) */
        memcpy(&x, buf + 10 + hlen + 70 * 8, 8);
        assert_true(x == -2.25);
        memcpy(&x, buf + 10 + hlen + 999 * 8, 8);
        assert_true(x == 1e-300);
        memcpy(&x, buf + 10 + hlen + 5 * 8, 8);
        assert_true(x == 0);
    }
    sfl__free(buf);

    assert_int_equal(ctl_model_render(e, CTL_FORMAT_SPCODEC, &buf, &len), 0);
    assert_int_equal(ctl_export_bytes(e, &codec, &clen), 0);
    assert_int_equal(len, clen);
    assert_memory_equal(buf, codec, len);
    sfl__free(buf);
    sfl__free(codec);

    for (int k = 0; k < 4; k++)
        FAILALLOC_EACH(ctl_model_render(e, (ctl_format_t)k, &buf, &len),
                       (sfl__free(buf), buf = NULL));
    /* every format refuses a model that does not match its hash */
    e->model_hash[0] ^= 1;
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ctl_model_render(e, (ctl_format_t)k, &buf, &len), SFL_EPARSE);
        assert_null(buf);
    }
    sfl_msg_export_free(e);
}

static void test_ctl_write_atomic(void **state)
{
    char path[128], tmp[140], got[16] = {0};
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/model.bin", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"first", 5), 0);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"second", 6), 0);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, sizeof(got) - 1, f), 6);
    fclose(f);
    assert_string_equal(got, "second");
    assert_int_equal(access(tmp, F_OK), -1);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"", 0), 0);

    /* no directory: nothing written, nothing left over */
    snprintf(path, sizeof(path), "%s/no/such/model.bin", dir);
    assert_int_equal(ctl_write_atomic(path, (const uint8_t *)"x", 1), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "cannot create"));
    /* the target is a directory: rename fails, the temporary file goes */
    snprintf(path, sizeof(path), "%s/adir", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    assert_true(ctl_write_atomic(path, (const uint8_t *)"x", 1) < 0);
    assert_int_equal(access(tmp, F_OK), -1);
    {
        char huge[CTL_PATH_MAX + 16];

        memset(huge, 'a', sizeof(huge) - 1);
        huge[sizeof(huge) - 1] = '\0';
        assert_int_equal(ctl_write_atomic(huge, (const uint8_t *)"x", 1), SFL_EINVAL);
    }
}

static int group_setup(void **state)
{
    (void)state;
    return test_tmpdir(dir, sizeof(dir), "sfl-ctlexp-");
}

static int group_teardown(void **state)
{
    (void)state;
    test_rmtree(dir, "sfl-ctlexp-");
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctl_export_bytes),
        cmocka_unit_test(test_ctl_model_formats),
        cmocka_unit_test(test_ctl_write_atomic),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

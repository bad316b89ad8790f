/* libsfl/src/data/idx.c: IDX files plain and gzip-compressed; every
 * malformed, truncated, oversized or hostile header or stream gets a clear
 * error; the images/labels pair as a dataset (the idx: data spec:
 * test_dataspec.c); the real MNIST files when
 * ../shared/data is there (skipped with the reason otherwise). */
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

#include <zlib.h>

#include "failalloc.h"
#include "sfl/data/idx.h"

static char dir[64];

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sfl-idx-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* An idx file of unsigned bytes with dims d[0..nd) and data 1, 2, 3, ... */
static size_t make_idx(uint8_t *buf, uint32_t nd, const uint32_t *d)
{
    size_t o = 4, n = 1;

    buf[0] = buf[1] = 0;
    buf[2] = 0x08;
    buf[3] = (uint8_t)nd;
    for (uint32_t i = 0; i < nd; i++) {
        buf[o++] = (uint8_t)(d[i] >> 24);
        buf[o++] = (uint8_t)(d[i] >> 16);
        buf[o++] = (uint8_t)(d[i] >> 8);
        buf[o++] = (uint8_t)d[i];
        n *= d[i];
    }
    for (size_t i = 0; i < n; i++)
        buf[o++] = (uint8_t)(i % 7); /* zeros among them */
    return o;
}

/* dir/name; two buffers in turn, so one call can take two paths. */
static const char *path(const char *name)
{
    static char p[2][128];
    static int k;

    k ^= 1;
    snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
    return p[k];
}

static void write_plain(const char *name, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path(name), "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *name, const uint8_t *buf, size_t len)
{
    gzFile g = gzopen(path(name), "wb9");

    assert_non_null(g);
    assert_int_equal(gzwrite(g, buf, (unsigned)len), (int)len);
    assert_int_equal(gzclose(g), Z_OK);
}

static void test_idx_parse(void **state)
{
    static const uint32_t d[3] = {2, 3, 4};
    uint8_t buf[64];
    size_t len = make_idx(buf, 3, d);
    sfl_idx_t *x = NULL;

    (void)state;
    assert_int_equal(sfl_idx_parse(buf, len, "t", 1000, &x), 0);
    assert_int_equal(x->ndims, 3);
    assert_int_equal(x->dims[2], 4);
    assert_int_equal(x->len, 24);
    assert_int_equal(x->data[8], 1);
    sfl_idx_free(x);
    FAILALLOC_EACH(sfl_idx_parse(buf, len, "t", 1000, &x), (sfl_idx_free(x), x = NULL));
}

static void expect(const uint8_t *buf, size_t len, size_t max, int rc, const char *detail)
{
    sfl_idx_t *x = NULL;

    if (sfl_idx_parse(buf, len, "bad.idx", max, &x) != rc ||
        strstr(sfl_last_error(), detail) == NULL)
        fail_msg("want %d '%s', got '%s'", rc, detail, sfl_last_error());
    assert_null(x);
}

/* Each malformed header says what is wrong, before anything is allocated. */
static void test_idx_malformed(void **state)
{
    static const uint32_t d[3] = {2, 3, 4};
    uint8_t buf[64], bad[64];
    size_t len = make_idx(buf, 3, d);

    (void)state;
    expect(buf, 3, 1000, SFL_EPARSE, "bad.idx: truncated: 3 bytes");
    memcpy(bad, buf, len);
    bad[0] = 0x1f;
    expect(bad, len, 1000, SFL_EPARSE, "not an idx file (magic 1f 00 08 03)");
    memcpy(bad, buf, len);
    bad[2] = 0x0D;
    expect(bad, len, 1000, SFL_EPARSE, "element type 0x0d (float) is not supported");
    bad[2] = 0x08;
    bad[3] = 0;
    expect(bad, len, 1000, SFL_EPARSE, "0 dimensions; 1 to 3 are supported");
    bad[3] = 4;
    expect(bad, len, 1000, SFL_EPARSE, "4 dimensions");
    bad[3] = 3;
    expect(bad, 10, 1000, SFL_EPARSE, "truncated header: 10 bytes of 16");
    memcpy(bad, buf, len);
    bad[11] = 0; /* the second dimension */
    expect(bad, len, 1000, SFL_EPARSE, "dimension 2 is 0");
    expect(buf, len - 1, 1000, SFL_EPARSE, "23 bytes of data where the header announces 24 (truncated)");
    memcpy(bad, buf, len);
    bad[len] = 9;
    expect(bad, len + 1, 1000, SFL_EPARSE, "25 bytes of data where the header announces 24");
    expect(buf, len, 23, SFL_ELIMIT, "more than 23 elements");
    /* a header announcing 2^32-1 x 2^32-1 x 2^32-1: refused, no overflow */
    memcpy(bad, buf, 16);
    memset(bad + 4, 0xff, 12);
    expect(bad, 16, SIZE_MAX, SFL_ELIMIT, "more than");
}

/* gzip: read back; truncated, damaged, trailing data and a bomb refused. */
static void test_idx_gzip(void **state)
{
    static const uint32_t d[3] = {3, 5, 5};
    uint8_t buf[128], *gz;
    size_t len = make_idx(buf, 3, d), glen;
    sfl_idx_t *x = NULL;
    FILE *f;
    long n;

    (void)state;
    write_gz("ok.idx.gz", buf, len);
    assert_int_equal(sfl_idx_read(path("ok.idx.gz"), 1000, &x), 0);
    assert_int_equal(x->len, 75);
    assert_memory_equal(x->data, buf + 16, 75);
    sfl_idx_free(x);
    x = NULL;
    write_plain("ok.idx", buf, len);
    assert_int_equal(sfl_idx_read(path("ok.idx"), 1000, &x), 0);
    sfl_idx_free(x);
    x = NULL;

    /* the compressed bytes, to damage */
    f = fopen(path("ok.idx.gz"), "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    rewind(f);
    gz = malloc((size_t)n + 8);
    assert_non_null(gz);
    assert_int_equal(fread(gz, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    glen = (size_t)n;
    write_plain("cut.gz", gz, glen / 2);
    assert_int_equal(sfl_idx_read(path("cut.gz"), 1000, &x), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "truncated gzip stream"));
    gz[glen - 5] ^= 0xff; /* the length in the trailer */
    write_plain("crc.gz", gz, glen);
    assert_int_equal(sfl_idx_read(path("crc.gz"), 1000, &x), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "damaged gzip stream"));
    gz[glen - 5] ^= 0xff;
    memcpy(gz + glen, "junk", 4);
    write_plain("trail.gz", gz, glen + 4);
    assert_int_equal(sfl_idx_read(path("trail.gz"), 1000, &x), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "4 bytes after the gzip stream"));
    free(gz);
    assert_null(x);

    /* a bomb: 4 MiB of zeros in a few KB, read with a 100 KB bound */
    {
        size_t big = (size_t)4 << 20;
        uint8_t *z = calloc(1, big);

        assert_non_null(z);
        z[2] = 0x08;
        z[3] = 1;
        z[4] = 0x00;
        z[5] = 0x3f;
        z[6] = 0xff;
        z[7] = 0xf8; /* 4 MiB - 8 elements */
        write_gz("bomb.gz", z, big);
        free(z);
        assert_int_equal(sfl_idx_read(path("bomb.gz"), 100000, &x), SFL_ELIMIT);
        assert_non_null(strstr(sfl_last_error(), "inflates to more than"));
        assert_null(x);
    }
    assert_int_equal(sfl_idx_read(path("missing.gz"), 1000, &x), -ENOENT);
    assert_non_null(strstr(sfl_last_error(), "missing.gz"));
}

/* Images and labels as a dataset: pixels / 255, zeros left out. */
static void test_idx_dataset(void **state)
{
    static const uint32_t di[3] = {3, 2, 2}, dl[1] = {3}, dl4[1] = {4};
    uint8_t im[64], lb[16];
    size_t ilen = make_idx(im, 3, di), llen = make_idx(lb, 1, dl);
    sfl_read_limits_t lim;
    sfl_dataset_t *ds = NULL;

    (void)state;
    im[16] = 255;
    write_gz("im.gz", im, ilen);
    write_plain("lb", lb, llen);
    assert_int_equal(sfl_idx_dataset(path("im.gz"), path("lb"), NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 3);
    assert_int_equal(ds->X->ncols, 4);
    /* bytes 255,1,2,3 | 4,5,6,0 | 1,2,3,4: 11 nonzeros */
    assert_int_equal(ds->X->nnz, 11);
    assert_true(ds->X->val[0] == 1.0);
    assert_true(ds->X->val[1] == 1 / 255.0);
    assert_int_equal(ds->X->rowptr[2], 7);
    assert_true(ds->y[0] == 0 && ds->y[1] == 1 && ds->y[2] == 2);
    assert_int_equal(sfl_csr_validate(ds->X), 0);
    sfl_dataset_free(ds);
    ds = NULL;

    llen = make_idx(lb, 1, dl4);
    write_plain("lb4", lb, llen);
    assert_int_equal(sfl_idx_dataset(path("im.gz"), path("lb4"), NULL, &ds), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "has 3 images but"));
    assert_int_equal(sfl_idx_dataset(path("lb4"), path("lb4"), NULL, &ds), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), "images have 3"));
    sfl_read_limits_default(&lim);
    lim.max_rows = 2;
    assert_int_equal(sfl_idx_dataset(path("im.gz"), path("lb"), &lim, &ds), SFL_ELIMIT);
    sfl_read_limits_default(&lim);
    lim.max_cols = 3;
    assert_int_equal(sfl_idx_dataset(path("im.gz"), path("lb"), &lim, &ds), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "2 x 2 pixels"));
    assert_null(ds);
}

/* The canonical MNIST files, when ../shared/data is there. */
static void test_idx_mnist(void **state)
{
    const char *base = getenv("SFL_TEST_DATA") ? getenv("SFL_TEST_DATA") : "../shared/data";
    char im[512], lb[512];
    sfl_dataset_t *ds = NULL;

    (void)state;
    snprintf(im, sizeof(im), "%s/mnist/t10k-images-idx3-ubyte.gz", base);
    snprintf(lb, sizeof(lb), "%s/mnist/t10k-labels-idx1-ubyte.gz", base);
    if (access(im, R_OK) != 0 || access(lb, R_OK) != 0) {
        printf("skipped: %s not found (MNIST is in ../shared/data, not in the repository)\n", im);
        fflush(stdout);
        skip();
    }
    assert_int_equal(sfl_idx_dataset(im, lb, NULL, &ds), 0);
    assert_int_equal(ds->X->nrows, 10000);
    assert_int_equal(ds->X->ncols, 784);
    assert_true(ds->y[0] == 7 && ds->y[1] == 2 && ds->y[2] == 1); /* the test set's first digits */
    for (size_t i = 0; i < ds->X->nnz; i++)
        assert_true(ds->X->val[i] > 0 && ds->X->val[i] <= 1);
    assert_int_equal(sfl_dataset_encode_labels(ds, 10), 0);
    assert_int_equal(ds->nclasses, 10);
    sfl_dataset_free(ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_parse),
        cmocka_unit_test(test_idx_malformed),
        cmocka_unit_test(test_idx_gzip),
        cmocka_unit_test(test_idx_dataset),
        cmocka_unit_test(test_idx_mnist),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

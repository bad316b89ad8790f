/* libsfl/src/core/cfgkey.c: a configuration table sets defaults, reads
 * keys by type and range, and prints each default with its help. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sfl/core/cfgkey.h"

typedef struct {
    char host[8];
    uint64_t timeout_ms, n;
} cfg_t;

static const sfl_cfg_key_t keys[] = {
    SFL_CFG_S("host", cfg_t, host, "a:1", "HOST:PORT", "where to connect"),
    SFL_CFG_N("timeout_ms", cfg_t, timeout_ms, "10000", 1, INT32_MAX, "MS", "call deadline"),
    SFL_CFG_N("n", cfg_t, n, "0", 0, UINT64_MAX, "N", "a count"),
};
#define NK (sizeof(keys) / sizeof(keys[0]))

static void test_cfgkey_defaults_set_help(void **state)
{
    cfg_t c;
    char h[128];

    (void)state;
    memset(&c, 0xff, sizeof(c));
    sfl_cfg_defaults(keys, NK, &c);
    assert_string_equal(c.host, "a:1");
    assert_int_equal(c.timeout_ms, 10000);
    assert_int_equal(c.n, 0);
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "n", "18446744073709551615"), 0);
    assert_true(c.n == UINT64_MAX);
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "host", "b:22"), 0);
    assert_string_equal(c.host, "b:22");
    /* not the table's: the caller's (its own keys, or unknown) */
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "port", "1"), 1);
    assert_null(sfl_cfg_find(keys, NK, "port"));
    assert_ptr_equal(sfl_cfg_find(keys, NK, "n"), &keys[2]);
    /* refused values name the key; the field keeps its value */
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "host", "12345678"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "host: value longer than 7 characters");
    assert_string_equal(c.host, "b:22");
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "timeout_ms", "0"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "timeout_ms: want 1..2147483647, got '0'");
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "timeout_ms", "-5"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "timeout_ms: invalid value '-5'");
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "n", ""), SFL_EINVAL);
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "n", "1x"), SFL_EINVAL);
    assert_int_equal(sfl_cfg_set(keys, NK, &c, "n", "18446744073709551616"), SFL_EINVAL);
    assert_int_equal(c.timeout_ms, 10000);
    sfl_cfg_help(&keys[1], h, sizeof(h));
    assert_string_equal(h, "call deadline (default 10000)");
}

/* --help: the flag with dashes, the help from column 29, wrapped before 80. */
static void test_cfgkey_usage(void **state)
{
    static const sfl_cfg_key_t k[] = {
        SFL_CFG_N("idle_timeout_ms", cfg_t, n, "120000", 0, UINT64_MAX, "MS",
                  "a connection without traffic or calls is closed"),
        SFL_CFG_S("metrics_listen", cfg_t, host, "", "HOST:PORT", "x"),
    };
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);

    (void)state;
    assert_non_null(f);
    sfl_cfg_usage(f, k, 2);
    fclose(f);
    assert_string_equal(out, "  --idle-timeout-ms MS       a connection without traffic or "
                             "calls is closed\n"
                             "                             (default 120000)\n"
                             "  --metrics-listen HOST:PORT\n"
                             "                             x\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfgkey_defaults_set_help),
        cmocka_unit_test(test_cfgkey_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

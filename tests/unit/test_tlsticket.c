/* Ticket keys (sfl/net/tlsticket.h): rotation schedule, the key file's
 * round trip, its checks (mode, type, size) and malformed, truncated,
 * oversized and hostile text. */
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

#include <sys/stat.h>

#include "testutil.h"
#include "sfl/core/error.h"
#include "sfl/net/tlsticket.h"

#define ROT 3600u
#define LIFE 7200u

static char dir[64];

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sfl-tlsticket-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (strncmp(dir, "/tmp/sfl-tlsticket-", 19) == 0)
        test_sh("rm -rf '%s'", dir);
    return 0;
}

/* A new set gets one key; it issues for ROT seconds, then a new one comes
 * first and the old is kept until no ticket of it can be valid. */
static void test_rotate_schedule(void **state)
{
    sfl_ticket_keys_t k = {0};
    uint8_t first[16];

    (void)state;
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000, ROT, LIFE), 1);
    assert_int_equal(k.n, 1);
    assert_int_equal(k.k[0].created, 1000);
    memcpy(first, k.k[0].name, 16);
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000 + ROT - 1, ROT, LIFE), 0);
    assert_int_equal(k.n, 1);
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000 + ROT, ROT, LIFE), 1);
    assert_int_equal(k.n, 2);
    assert_memory_equal(k.k[1].name, first, 16);
    assert_memory_not_equal(k.k[0].name, first, 16);
    assert_memory_not_equal(k.k[0].aes, k.k[1].aes, 32);
    /* the first key's last ticket (issued at 1000 + ROT) lives until +LIFE */
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000 + ROT + LIFE - 1, ROT, LIFE), 1);
    assert_int_equal(k.n, 3); /* a third key came, the first is still needed */
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000 + ROT + LIFE, ROT, LIFE), 1);
    for (size_t i = 0; i < k.n; i++)
        assert_memory_not_equal(k.k[i].name, first, 16);
    /* long asleep: everything old goes, one fresh key */
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1000000, ROT, LIFE), 1);
    assert_int_equal(k.n, 1);
    assert_int_equal(k.k[0].created, 1000000);
    /* a clock set back: the "future" key is replaced as issuer */
    memcpy(first, k.k[0].name, 16);
    assert_int_equal(sfl_ticket_keys_rotate(&k, 999000, ROT, LIFE), 1);
    assert_int_equal(k.n, 2);
    assert_int_equal(k.k[0].created, 999000);
    assert_true(k.k[1].created <= k.k[0].created);
    /* bad arguments */
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1, 0, LIFE), SFL_EINVAL);
    assert_int_equal(sfl_ticket_keys_rotate(&k, 1, ROT, 0), SFL_EINVAL);
    assert_int_equal(sfl_ticket_keys_rotate(NULL, 1, ROT, LIFE), SFL_EINVAL);
    sfl_ticket_keys_wipe(&k);
}

/* Rotating every ROT with a huge lifetime never holds more than the cap:
 * the oldest goes. */
static void test_rotate_cap(void **state)
{
    sfl_ticket_keys_t k = {0};

    (void)state;
    for (uint64_t t = 0; t < 20; t++) {
        assert_int_equal(sfl_ticket_keys_rotate(&k, 10 + t * ROT, ROT, 1000 * ROT), 1);
        assert_true(k.n <= SFL_TICKET_KEYS_MAX);
        assert_int_equal(k.k[0].created, 10 + t * ROT);
        for (size_t i = 1; i < k.n; i++)
            assert_true(k.k[i].created < k.k[i - 1].created);
    }
    assert_int_equal(k.n, SFL_TICKET_KEYS_MAX);
}

static void test_save_load_round_trip(void **state)
{
    sfl_ticket_keys_t a = {0}, b;
    char p[128];
    struct stat st;

    (void)state;
    snprintf(p, sizeof(p), "%s/keys", dir);
    assert_int_equal(sfl_ticket_keys_load(p, &b), -ENOENT);
    assert_int_equal(sfl_ticket_keys_rotate(&a, 5000, ROT, LIFE), 1);
    assert_int_equal(sfl_ticket_keys_rotate(&a, 5000 + ROT, ROT, LIFE), 1);
    assert_int_equal(sfl_ticket_keys_save(&a, p), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(sfl_ticket_keys_load(p, &b), 0);
    assert_int_equal(b.n, 2);
    assert_memory_equal(&a.k[0], &b.k[0], sizeof(a.k[0]));
    assert_memory_equal(&a.k[1], &b.k[1], sizeof(a.k[1]));
    /* group-readable: refused before reading */
    assert_int_equal(chmod(p, 0640), 0);
    assert_int_equal(sfl_ticket_keys_load(p, &b), SFL_EINSECURE);
    assert_non_null(strstr(sfl_last_error(), "chmod 600"));
    assert_int_equal(b.n, 0);
    assert_int_equal(chmod(p, 0600), 0);
    /* a directory is not a key file */
    assert_int_equal(sfl_ticket_keys_load(dir, &b), SFL_EINVAL);
    /* nothing to save */
    b.n = 0;
    assert_int_equal(sfl_ticket_keys_save(&b, p), SFL_EINVAL);
    /* oversized on disk: refused by size */
    snprintf(p, sizeof(p), "%s/big", dir);
    test_sh("head -c %d /dev/zero > '%s' && chmod 600 '%s'", SFL_TICKET_FILE_MAX + 1, p, p);
    assert_int_equal(sfl_ticket_keys_load(p, &b), SFL_ELIMIT);
}

#define HDR "sfl-ticket-keys-v1\n"
#define K1 "00112233445566778899aabbccddeeff"                                   \
           "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" \
           "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
#define K2 "ffeeddccbbaa99887766554433221100"                                   \
           "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" \
           "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"

static int parse(const char *text, sfl_ticket_keys_t *k)
{
    return sfl_ticket_keys_parse(text, strlen(text), "t", k);
}

static void test_parse_good_and_malformed(void **state)
{
    sfl_ticket_keys_t k;
    char big[SFL_TICKET_FILE_MAX + 400];
    size_t off;

    (void)state;
    assert_int_equal(parse(HDR "20 " K1 "\n10 " K2 "\n", &k), 0);
    assert_int_equal(k.n, 2);
    assert_int_equal(k.k[0].created, 20);
    assert_int_equal(k.k[0].name[1], 0x11);
    assert_int_equal(k.k[1].hmac[31], 0x3f);
    /* truncated: header only, half a line, no final newline */
    assert_int_equal(parse(HDR, &k), SFL_EPARSE);
    assert_int_equal(parse("sfl-ticket", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "20 " K1, &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "20 00112233\n", &k), SFL_EPARSE);
    assert_int_equal(parse("", &k), SFL_EPARSE);
    /* malformed */
    assert_int_equal(parse("sfl-ticket-keys-v2\n20 " K1 "\n", &k), SFL_EUNSUP);
    assert_int_equal(parse("sfl-identity-v1\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "x " K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR " " K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "20\t" K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "20 " K1 " \n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "20 g" K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "99999999999999999999 " K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "123456789012345678901 " K1 "\n", &k), SFL_EPARSE);
    /* hostile: a repeated name (which key opens?), out of order */
    assert_int_equal(parse(HDR "20 " K1 "\n10 " K1 "\n", &k), SFL_EPARSE);
    assert_int_equal(parse(HDR "10 " K1 "\n20 " K2 "\n", &k), SFL_EPARSE);
    assert_int_equal(k.n, 0);
    /* embedded NUL */
    {
        char t[] = HDR "20 " K1 "\n";

        t[sizeof(HDR) + 5] = '\0';
        assert_int_equal(sfl_ticket_keys_parse(t, sizeof(t) - 1, "t", &k), SFL_EPARSE);
    }
    /* oversized: too many keys, too many bytes */
    off = (size_t)snprintf(big, sizeof(big), HDR);
    for (int i = 0; i < SFL_TICKET_KEYS_MAX + 1; i++) {
        off += (size_t)snprintf(big + off, sizeof(big) - off, "%d %02x%s\n", 100 - i, i,
                                &K1[2]);
    }
    assert_int_equal(sfl_ticket_keys_parse(big, off, "t", &k), SFL_ELIMIT);
    memset(big, 'a', sizeof(big));
    assert_int_equal(sfl_ticket_keys_parse(big, sizeof(big), "t", &k), SFL_ELIMIT);
    assert_int_equal(sfl_ticket_keys_parse(NULL, 0, "t", &k), SFL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rotate_schedule),
        cmocka_unit_test(test_rotate_cap),
        cmocka_unit_test(test_save_load_round_trip),
        cmocka_unit_test(test_parse_good_and_malformed),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

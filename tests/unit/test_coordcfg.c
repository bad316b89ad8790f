/* server/coordcfg.c: the [coordinator] keys, their checks, addresses and
 * the log's quoting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "coord.h"
#include "sfl/core/error.h"

static void ready(coord_config_t *c)
{
    coord_config_default(c);
    snprintf(c->cert, sizeof(c->cert), "c.crt");
    snprintf(c->key, sizeof(c->key), "c.key");
}

static void test_coordcfg_keys(void **state)
{
    coord_config_t c;
    size_t n = 0;
    const sfl_cfg_key_t *k = coord_config_keys(&n);

    (void)state;
    coord_config_default(&c);
    /* the table's defaults */
    assert_string_equal(c.listen, "0.0.0.0:7443");
    assert_string_equal(c.cert, "");
    assert_true(c.max_message == 64u << 20 && c.max_job_memory == (uint64_t)4 << 30 &&
                c.keep_checkpoints == 3 && c.tick_ms == 200 && c.relaxed_sync == 0);
    assert_true(c.tls_ticket_lifetime == 43200 && c.tls_ticket_rotate == 21600);
    assert_int_equal(coord_config_set(&c, "max_agents", "12"), 0);
    assert_int_equal(c.max_agents, 12);
    assert_int_equal(coord_config_set(&c, "max_agents", "-1"), SFL_EINVAL);
    assert_int_equal(coord_config_set(&c, "max_agents", ""), SFL_EINVAL);
    assert_int_equal(coord_config_set(&c, "nope", "1"), SFL_EINVAL);
    assert_string_equal(sfl_last_error(), "unknown key 'nope'");
    assert_int_equal(coord_config_set(&c, "listen", "127.0.0.1:1"), 0);
    assert_string_equal(c.listen, "127.0.0.1:1");
    assert_int_equal(coord_config_check(&c), SFL_EINVAL); /* no certificates */
    /* every key has an argument and a help line, and can be set */
    assert_true(n > 20);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(k[i].arg);
        assert_true(strlen(k[i].help) > 5);
    }
}

static void test_coordcfg_check(void **state)
{
    coord_config_t c;

    (void)state;
    ready(&c);
    assert_int_equal(coord_config_check(&c), 0);
    /* the request budgets: max_message <= max_buffered <= max_buffered_total */
    c.max_buffered = c.max_message - 1;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "max_buffered"));
    ready(&c);
    c.max_buffered_total = c.max_buffered - 1;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    ready(&c);
    c.body_timeout_ms = 0;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    ready(&c);
    c.max_message = 1000;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    ready(&c);
    c.max_job_memory = 0;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    ready(&c);
    assert_int_equal(c.max_live_jobs, 64);
    assert_int_equal(coord_config_set(&c, "max_live_jobs", "3"), 0);
    assert_int_equal(c.max_live_jobs, 3);
    assert_int_equal(coord_config_check(&c), 0);
    c.max_live_jobs = 0;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "max_live_jobs"));
    /* resumption tickets: lifetime 0 (off) .. 7 days, rotation 1 s .. 7 days */
    ready(&c);
    c.tls_ticket_lifetime = 0;
    assert_int_equal(coord_config_check(&c), 0);
    c.tls_ticket_lifetime = 604801;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tls_ticket_lifetime"));
    ready(&c);
    c.tls_ticket_rotate = 0;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "tls_ticket_rotate"));
    ready(&c);
    snprintf(c.log_level, sizeof(c.log_level), "loud");
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    /* the accept path: per-source handshakes in [1, max_handshakes], an
     * admin listener that parses or is off */
    ready(&c);
    assert_string_equal(c.admin_listen, "127.0.0.1:7444");
    assert_int_equal(c.max_handshakes_per_ip, 64);
    c.max_handshakes_per_ip = 0;
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "max_handshakes_per_ip"));
    c.max_handshakes_per_ip = 64;
    c.max_handshakes = 32; /* lowering max_handshakes alone stays valid */
    assert_int_equal(coord_config_check(&c), 0);
    assert_int_equal(coord_config_set(&c, "admin_listen", "nowhere"), 0);
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_int_equal(coord_config_set(&c, "admin_listen", "off"), 0);
    assert_int_equal(coord_config_check(&c), 0);
    /* a front-end's silence limit (its keepalive pings go every quarter of
     * it): 1 s .. 1 h */
    ready(&c);
    assert_int_equal(c.master_silent_ms, 30000);
    assert_int_equal(coord_config_set(&c, "master_silent_ms", "1000"), 0);
    assert_int_equal(coord_config_check(&c), 0);
    assert_int_equal(coord_config_set(&c, "master_silent_ms", "999"), 0);
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "master_silent_ms"));
    assert_int_equal(coord_config_set(&c, "master_silent_ms", "3600001"), 0);
    assert_int_equal(coord_config_check(&c), SFL_EINVAL);
    assert_int_equal(coord_config_set(&c, "master_silent_ms", "-1"), SFL_EINVAL);
}

static void test_coordcfg_addr_and_quote(void **state)
{
    struct sockaddr_storage ss;
    char q[64];
    coord_log_level_t lvl;

    (void)state;
    assert_int_equal(coord_addr_parse("127.0.0.1:80", &ss), 0);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(coord_addr_parse("[::1]:80", &ss), 0);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(coord_addr_parse(":7443", &ss), 0);
    assert_int_equal(coord_addr_parse("localhost:1", &ss), 0);
    assert_int_equal(coord_addr_parse("host", &ss), SFL_EINVAL);
    assert_int_equal(coord_addr_parse("example.org:1", &ss), SFL_EINVAL);
    assert_int_equal(coord_addr_parse("1.2.3.4:99999", &ss), SFL_EINVAL);
    assert_int_equal(coord_addr_parse("[::1:80", &ss), SFL_EINVAL);
    assert_string_equal(coord_log_quote("plain", q, sizeof(q)), "plain");
    assert_string_equal(coord_log_quote("a \"b\"\n", q, sizeof(q)), "\"a \\\"b\\\"\\x0a\"");
    assert_string_equal(coord_log_quote("", q, sizeof(q)), "\"\"");
    assert_string_equal(coord_log_quote("a=b", q, sizeof(q)), "\"a=b\"");
    assert_string_equal(coord_log_quote("\x1b[2J", q, 7), "\"\\x1b\"");
    assert_int_equal(coord_log_level_parse("warn", &lvl), 0);
    assert_int_equal(lvl, COORD_LOG_WARN);
    assert_int_equal(coord_log_level_parse("WARN", &lvl), SFL_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coordcfg_keys),
        cmocka_unit_test(test_coordcfg_check),
        cmocka_unit_test(test_coordcfg_addr_and_quote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

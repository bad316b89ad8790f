/* libsfl/src/core/suggest.c: the nearest valid name and the list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "sfl/core/suggest.h"

static void test_suggest_distance(void **state)
{
    (void)state;
    assert_int_equal(sfl_suggest_distance("", ""), 0);
    assert_int_equal(sfl_suggest_distance("rounds", "rounds"), 0);
    assert_int_equal(sfl_suggest_distance("rouds", "rounds"), 1);   /* insert */
    assert_int_equal(sfl_suggest_distance("roundss", "rounds"), 1); /* delete */
    assert_int_equal(sfl_suggest_distance("fedht", "fedxt"), 1);    /* substitute */
    assert_int_equal(sfl_suggest_distance("kitten", "sitting"), 3);
    assert_int_equal(sfl_suggest_distance("", "abc"), 3);
    assert_int_equal(sfl_suggest_distance("FedAvg", "fedavg"), 0);  /* case */
    assert_int_equal(sfl_suggest_distance("dp-noise", "dp_noise"), 0);
    assert_int_equal(sfl_suggest_distance("abc", "xyz"), 3);
}

static void test_suggest_nearest_and_list(void **state)
{
    static const char *const algos[] = {"fedht", "fediterht", "fedavg", "fedprox", "dpbcfw"};
    sfl_suggest_t s;

    (void)state;
    sfl_suggest_init(&s, NULL, "fedavgg");
    for (size_t i = 0; i < 5; i++)
        sfl_suggest_add(&s, algos[i]);
    assert_string_equal(sfl_suggest_best(&s), "fedavg");
    assert_string_equal(sfl_suggest_text(&s), "; did you mean 'fedavg'? (valid: fedht, "
                                              "fediterht, fedavg, fedprox, dpbcfw)");
    /* the first of equally near names */
    sfl_suggest_init(&s, "--", "fedxt");
    sfl_suggest_add(&s, "fedht");
    sfl_suggest_add(&s, "fedat");
    assert_string_equal(sfl_suggest_text(&s), "; did you mean '--fedht'? (valid: --fedht, "
                                              "--fedat)");
    /* nothing near: the list alone */
    sfl_suggest_init(&s, NULL, "sgd");
    for (size_t i = 0; i < 5; i++)
        sfl_suggest_add(&s, algos[i]);
    assert_null(sfl_suggest_best(&s));
    assert_string_equal(sfl_suggest_text(&s),
                        " (valid: fedht, fediterht, fedavg, fedprox, dpbcfw)");
    /* a one-letter word is never "near" a one-letter name it differs from */
    sfl_suggest_init(&s, NULL, "x");
    sfl_suggest_add(&s, "y");
    assert_null(sfl_suggest_best(&s));
    /* no names: nothing to say */
    sfl_suggest_init(&s, NULL, "x");
    assert_string_equal(sfl_suggest_text(&s), "");
}

/* Bounded: a long list ends in "...", long and odd names do not overflow. */
static void test_suggest_bounded(void **state)
{
    char name[200], big[SFL_SUGGEST_NAME + 10];
    sfl_suggest_t s;

    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sfl_suggest_init(&s, "--", big);
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "option_number_%d", i);
        sfl_suggest_add(&s, name);
    }
    sfl_suggest_add(&s, big); /* too long to list or suggest */
    assert_true(strlen(sfl_suggest_text(&s)) < sizeof(s.text));
    assert_non_null(strstr(s.text, ", ..."));
    assert_null(strstr(s.text, ", ..., ..."));
    assert_int_equal(sfl_suggest_distance(big, big), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suggest_distance),
        cmocka_unit_test(test_suggest_nearest_and_list),
        cmocka_unit_test(test_suggest_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

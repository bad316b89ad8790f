/* server/round/registry.c: agents kept by id (inserted in any order), found by id
 * and by name; revoked certificates; tags in the store's text form and
 * back; eligibility with the coordinator's own reasons (not joined, a
 * label the job does not list, a condition met by a capability); an agent
 * selected in another job's open attempt is busy there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord_int.h"
#include "round/registry.h"
#include "job/model.h"
#include "sfl/core/alloc.h"

static coord_agent_t *agent(uint64_t id, const char *name)
{
    coord_agent_t *a = calloc(1, sizeof(*a));

    assert_non_null(a);
    a->id = id;
    snprintf(a->name, sizeof(a->name), "%s", name);
    a->fpr[0] = (uint8_t)id;
    return a;
}

static void free_agents(coord_t *co)
{
    for (size_t i = 0; i < co->nagents; i++) {
        sfl__free(co->agents[i]->ds.labels);
        free(co->agents[i]);
    }
    sfl__free(co->agents);
    sfl__free(co->by_name);
}

static void test_registry_agents(void **state)
{
    static const uint64_t ids[] = {7, 3, 11, 1, 5, 9};
    coord_t co;
    uint8_t (*rev)[32];
    uint8_t fpr[32] = {0};

    (void)state;
    memset(&co, 0, sizeof(co));
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char name[16];

        snprintf(name, sizeof(name), "agent-%llu", (unsigned long long)ids[i]);
        assert_int_equal(coord_agent_insert(&co, agent(ids[i], name)), 0);
    }
    assert_int_equal(co.nagents, 6);
    for (size_t i = 1; i < co.nagents; i++)
        assert_true(co.agents[i - 1]->id < co.agents[i]->id);
    assert_int_equal(coord_agent_find(&co, 9)->id, 9);
    assert_null(coord_agent_find(&co, 4));
    assert_null(coord_agent_find(&co, 12));
    assert_int_equal(coord_agent_by_name(&co, "agent-11")->id, 11);
    assert_null(coord_agent_by_name(&co, "agent-2"));

    /* revoked: sorted fingerprints, searched */
    rev = calloc(3, 32);
    assert_non_null(rev);
    rev[0][0] = 1;
    rev[1][0] = 5;
    rev[2][0] = 9;
    co.revoked = rev;
    co.nrevoked = 3;
    fpr[0] = 5;
    assert_true(coord_cert_revoked(&co, fpr));
    fpr[0] = 6;
    assert_false(coord_cert_revoked(&co, fpr));
    free(rev);
    free_agents(&co);
}

/* Found by name through the table's growth (64 -> 4096 places). */
static void test_registry_by_name(void **state)
{
    coord_t co;
    char name[32];

    (void)state;
    memset(&co, 0, sizeof(co));
    assert_null(coord_agent_by_name(&co, "load-00000"));
    for (uint64_t i = 1; i <= 2000; i++) {
        snprintf(name, sizeof(name), "load-%05llu", (unsigned long long)i);
        assert_int_equal(coord_agent_insert(&co, agent(i, name)), 0);
    }
    assert_true(co.cap_by_name >= 2 * co.nagents);
    for (uint64_t i = 1; i <= 2000; i++) {
        snprintf(name, sizeof(name), "load-%05llu", (unsigned long long)i);
        assert_int_equal(coord_agent_by_name(&co, name)->id, i);
    }
    assert_null(coord_agent_by_name(&co, "load-02001"));
    assert_null(coord_agent_by_name(&co, ""));
    free_agents(&co);
}

static void test_registry_tags(void **state)
{
    sfl_tags_t t, back;
    char text[64];

    (void)state;
    memset(&t, 0, sizeof(t));
    assert_int_equal(sfl_msg_tags_add(&t, "gpu"), 0);
    assert_int_equal(sfl_msg_tags_add(&t, "mains_power"), 0);
    coord_tags_text(&t, text, sizeof(text));
    assert_string_equal(text, "gpu,mains_power");
    coord_tags_parse(text, &back);
    assert_int_equal(back.n, 2);
    assert_string_equal(back.tag[1], "mains_power");
    /* truncated at a tag's end, never mid-tag */
    coord_tags_text(&t, text, 8);
    assert_string_equal(text, "gpu");
    /* what is not a tag any more is dropped, the rest kept */
    coord_tags_parse("ok,Not A Tag,,x", &back);
    assert_int_equal(back.n, 2);
    assert_string_equal(back.tag[0], "ok");
    assert_string_equal(back.tag[1], "x");
}

/* A job of dimension 20, labels -1 and 1, that requires "mains_power". */
static void job_init(coord_job_t *j, coord_t *co, uint64_t id)
{
    sfl_job_spec_t s;

    memset(j, 0, sizeof(*j));
    coord_job_spec_default(&s);
    s.dimension = 20;
    assert_int_equal(coord_job_spec_set(&s, "loss", "logistic"), 0);
    assert_int_equal(coord_job_spec_set(&s, "labels", "-1,1"), 0);
    assert_int_equal(coord_job_spec_set(&s, "conditions", "mains_power"), 0);
    assert_int_equal(coord_job_spec_set(&s, "cohort", "2"), 0);
    assert_int_equal(coord_job_spec_set(&s, "min_quorum", "1"), 0);
    j->co = co;
    j->id = id;
    j->spec = s;
    assert_int_equal(coord_model_setup(&j->model, &s), 0);
    j->shape = coord_shape_for(j); /* its rounds' kind: which data it takes */
    j->ready = 1;
    j->state = SFL_JOB_RUNNING;
    coord_round_init(&j->rnd, &j->model.rcfg, id, 1);
}

static void test_registry_eligibility(void **state)
{
    coord_t co;
    coord_job_t j;
    coord_agent_t *a = agent(1, "a");
    char why[128];

    (void)state;
    memset(&co, 0, sizeof(co));
    job_init(&j, &co, 1);
    assert_int_equal(coord_ineligible(&j, a, why, sizeof(why)), COORD_INELIG_NOT_JOINED);
    a->joined = 1;
    a->ds.samples = 10;
    a->ds.dimension = 12; /* narrower data is widened */
    {
        sfl_dataset_summary_t ds = {.samples = 10, .dimension = 12, .nlabels = 2,
                                    .labels = {-1, 1}};

        assert_int_equal(coord_agent_set_ds(a, &ds), 0);
    }
    assert_int_equal(coord_ineligible(&j, a, why, sizeof(why)), COORD_INELIG_CONDITION);
    assert_string_equal(why, "condition mains_power not reported");
    /* a capability meets a required condition too */
    assert_int_equal(sfl_msg_tags_add(&a->caps, "mains_power"), 0);
    assert_int_equal(coord_ineligible(&j, a, why, sizeof(why)), COORD_INELIG_NONE);
    assert_true(coord_eligible(&j, a));
    a->ds.labels[1] = 2;
    assert_int_equal(coord_ineligible(&j, a, why, sizeof(why)), COORD_INELIG_LABELS);
    assert_string_equal(why, "label 2 not among the job's labels");
    a->ds.labels[1] = 1;
    a->ds.dimension = 21; /* wider cannot fit */
    assert_int_equal(coord_ineligible(&j, a, why, sizeof(why)), COORD_INELIG_FEATURES);
    a->ds.dimension = 20;
    j.ready = 0; /* a job that could not be set up takes nobody */
    assert_false(coord_eligible(&j, a));
    j.ready = 1;
    coord_round_close(&j.rnd);
    coord_model_close(&j.model);
    sfl__free(a->ds.labels);
    free(a);
}

static void test_registry_busy_elsewhere(void **state)
{
    coord_t co;
    coord_job_t j1, j2;
    coord_job_t *jobs[2] = {&j1, &j2};
    uint64_t ids[] = {1, 2};
    coord_agent_t *a = agent(1, "a"), *b = agent(3, "b");

    (void)state;
    memset(&co, 0, sizeof(co));
    job_init(&j1, &co, 1);
    job_init(&j2, &co, 2);
    co.jobs = jobs;
    co.njobs = 2;
    assert_false(coord_busy_elsewhere(&co, a, &j2));
    /* j1 opens an attempt with agents 1 and 2 */
    assert_int_equal(coord_round_step(&j1.rnd, COORD_EV_START, 0, 1, ids, 2), 0);
    assert_int_equal(j1.rnd.state, COORD_ROUND_TRAINING);
    assert_true(coord_busy_elsewhere(&co, a, &j2));
    assert_false(coord_busy_elsewhere(&co, a, &j1)); /* not elsewhere: its own job */
    assert_false(coord_busy_elsewhere(&co, b, &j2)); /* not selected */
    j1.state = SFL_JOB_PAUSED; /* a job that does not run holds nobody */
    assert_false(coord_busy_elsewhere(&co, a, &j2));
    for (int i = 0; i < 2; i++) {
        coord_round_close(&jobs[i]->rnd);
        coord_model_close(&jobs[i]->model);
    }
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_agents),
        cmocka_unit_test(test_registry_by_name),
        cmocka_unit_test(test_registry_tags),
        cmocka_unit_test(test_registry_eligibility),
        cmocka_unit_test(test_registry_busy_elsewhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

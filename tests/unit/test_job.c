#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "failalloc.h"
#include "job/model.h"
#include "sfl/core/alloc.h"
#include "testfed.h"

/* The statistics round selects every candidate: one phase that waits for
 * every member, the job's quorum at its deadline. */
static void test_job_stats_round_cfg(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_round_cfg_t c;
    coord_round_t r;
    uint64_t ids[7] = {1, 2, 3, 5, 8, 13, 21};

    coord_job_spec_default(&s); /* cohort 8, overselect 0.25, quorum 6 */
    s.min_quorum = 3;
    coord_job_stats_cfg(&s, &c);
    assert_int_equal(coord_round_cfg_check(&c), 0);
    coord_round_init(&r, &c, 1, 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 0, 7, ids, 7), 0);
    assert_int_equal(r.nmembers, 7);
    assert_memory_equal(&r.members[6].agent, &ids[6], sizeof(ids[6]));
    for (uint32_t i = 0; i < 6; i++)
        assert_int_equal(coord_round_submit(&r, ids[i], 1, 0, 0, 10), COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_TRAINING); /* waits for the 7th */
    assert_int_equal(coord_round_submit(&r, ids[6], 1, 0, 0, 10), COORD_UPD_ACCEPTED);
    assert_int_equal(r.state, COORD_ROUND_AGGREGATING);
    coord_round_close(&r);
    /* fewer than the quorum: the round cannot start */
    coord_round_init(&r, &c, 1, 0);
    assert_int_equal(coord_round_step(&r, COORD_EV_START, 0, 7, ids, 2), SFL_EEMPTY);
    coord_round_close(&r);
    /* with secure aggregation: every candidate still, through the training
     * rounds' five stages */
    s.secagg = 1;
    coord_job_stats_cfg(&s, &c);
    assert_int_equal(coord_round_cfg_check(&c), 0);
    assert_true(c.cohort == UINT32_MAX / 4 && c.nphases == 5);
    assert_string_equal(c.phases[0].name, "advertise");
    assert_string_equal(c.phases[4].name, "unmask");
}

static void test_job_eligibility(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    const char *conds[] = {"unmetered", "mains_power"};
    coord_agent_info_t a = {.ncols = 20, .nclasses = 0, .samples = 5, .nconditions = 2,
                            .conditions = conds};

    coord_job_spec_default(&s);
    s.dimension = 20;
    assert_int_equal(coord_job_spec_set(&s, "conditions", "mains_power"), 0);
    assert_true(coord_job_eligible(&s, &a));
    a.nconditions = 1; /* only "unmetered" */
    assert_false(coord_job_eligible(&s, &a));
    a.nconditions = 2;
    a.ncols = 21;
    assert_false(coord_job_eligible(&s, &a));
    a.ncols = 20;
    a.samples = 0;
    assert_false(coord_job_eligible(&s, &a));
    a.samples = 5;
    assert_int_equal(coord_job_spec_set(&s, "labels", "0,1,2"), 0);
    a.nclasses = 2; /* label skew: fewer local classes is fine */
    assert_true(coord_job_eligible(&s, &a));
    a.nclasses = 4;
    assert_false(coord_job_eligible(&s, &a));
}

/* Each refusal names its reason and a detail an operator can act on. */
static void test_job_ineligible_reasons(void **state)
{
    const char *conds[] = {"unmetered"};
    coord_agent_info_t a = {.ncols = 500, .nclasses = 0, .samples = 5, .nconditions = 1,
                            .conditions = conds};
    sfl_job_spec_t s;
    char why[128];

    (void)state;
    coord_job_spec_default(&s);
    s.dimension = 123;
    assert_int_equal(coord_job_ineligible(&s, &a, why, sizeof(why)), COORD_INELIG_FEATURES);
    assert_string_equal(why, "data has 500 features, the job 123");
    assert_int_equal(coord_job_ineligible(&s, &a, NULL, 0), COORD_INELIG_FEATURES);
    a.ncols = 123;
    a.samples = 0;
    assert_int_equal(coord_job_ineligible(&s, &a, why, sizeof(why)), COORD_INELIG_SAMPLES);
    a.samples = 5;
    a.nclasses = 2;
    assert_int_equal(coord_job_ineligible(&s, &a, why, sizeof(why)), COORD_INELIG_CLASSES);
    assert_string_equal(why, "data has 2 classes, the job 0");
    a.nclasses = 0;
    assert_int_equal(coord_job_spec_set(&s, "conditions", "unmetered,mains_power"), 0);
    assert_int_equal(coord_job_ineligible(&s, &a, why, sizeof(why)), COORD_INELIG_CONDITION);
    assert_string_equal(why, "condition mains_power not reported");
    /* truncated, never overrun */
    assert_int_equal(coord_job_ineligible(&s, &a, why, 10), COORD_INELIG_CONDITION);
    assert_string_equal(why, "condition");
    a.nconditions = 0;
    assert_int_equal(coord_job_spec_set(&s, "conditions", ""), 0);
    assert_int_equal(coord_job_ineligible(&s, &a, why, sizeof(why)), COORD_INELIG_NONE);
}

/* The coordinator's aggregation path gives the same bits as a simulated
 * federation of the same clients, seed and rounds: streaming when updates
 * arrive in client order, ordered in any arrival order (here reversed). */
static void run_matches_simulation(int ordered)
{
    sfl_synth_t *syn = testfed_small_sparse();
    sfl_job_spec_t s;
    coord_model_t j;
    sfl_algo_ws_t ws;
    double *expect = calloc(syn->dim, sizeof(double));

    coord_job_spec_default(&s);
    s.dimension = syn->dim;
    assert_int_equal(coord_job_spec_set(&s, "tau", "8"), 0);
    assert_int_equal(coord_job_spec_set(&s, "lr", "0.02"), 0);
    s.seed = 7; /* testfed's seed */
    s.ordered_aggregation = ordered;
    assert_int_equal(coord_model_init(&j, &s), 0);
    sfl_algo_ws_init(&ws);
    for (uint64_t t = 1; t <= 4; t++) {
        assert_int_equal(coord_model_begin(&j, syn->nclients), 0);
        for (uint32_t i = 0; i < syn->nclients; i++) {
            uint32_t c = ordered ? syn->nclients - 1 - i : i;
            sfl_spvec_t *u;

            assert_int_equal(sfl_spvec_new((uint32_t)j.prob.dim, 0, &u), 0);
            assert_int_equal(sfl_algo_client_round(j.algo, &j.params, &j.prob, j.global,
                                                   syn->clients[c], NULL, s.seed, t, c, &ws, u),
                             0);
            assert_int_equal(coord_model_add(&j, c, &u, syn->clients[c]->X->nrows), 0);
            assert_true(ordered ? u == NULL : u != NULL); /* ordered holds it */
            sfl_spvec_free(u);
        }
        assert_int_equal(coord_model_end(&j), 0);
    }
    assert_int_equal(j.round, 4);
    testfed_run_synth(&sfl_algo_fediterht, syn, &j.params, 4, TESTFED_SPARSE, expect, NULL);
    assert_memory_equal(j.global, expect, syn->dim * sizeof(double));
    /* Adding outside a round is refused. */
    sfl_spvec_t *u;
    assert_int_equal(sfl_spvec_new((uint32_t)j.prob.dim, 0, &u), 0);
    assert_int_equal(coord_model_add(&j, 0, &u, 1.0), SFL_EINVAL);
    assert_int_equal(coord_model_end(&j), SFL_EINVAL);
    sfl_spvec_free(u);
    sfl_algo_ws_close(&ws);
    coord_model_close(&j);
    free(expect);
    sfl_synth_free(syn);
}

static void test_job_matches_simulation(void **state)
{
    (void)state;
    run_matches_simulation(0);
}

static void test_job_ordered_matches_simulation_in_any_order(void **state)
{
    (void)state;
    run_matches_simulation(1);
}

/* Ordered mode refuses what would make its fold ambiguous and never leaks
 * what it holds: a slot twice, a slot outside the cohort, a wrong dimension;
 * begin drops an attempt that never ended. */
static void test_job_ordered_hostile(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t j;
    sfl_spvec_t *u = NULL, *w = NULL;

    coord_job_spec_default(&s);
    s.dimension = 30;
    s.ordered_aggregation = 1;
    assert_int_equal(coord_model_init(&j, &s), 0);
    assert_int_equal(coord_model_begin(&j, 3), 0);
    assert_int_equal(sfl_spvec_new(30, 0, &u), 0);
    assert_int_equal(coord_model_add(&j, 3, &u, 1.0), SFL_EINVAL);
    assert_non_null(u);
    assert_int_equal(coord_model_add(&j, 1, &u, 0.0), SFL_EINVAL);
    assert_int_equal(coord_model_add(&j, 1, &u, NAN), SFL_EINVAL);
    assert_int_equal(coord_model_add(&j, 1, &u, 2.0), 0);
    assert_null(u);
    assert_int_equal(sfl_spvec_new(30, 0, &u), 0);
    assert_int_equal(coord_model_add(&j, 1, &u, 2.0), SFL_EINVAL);
    assert_int_equal(sfl_spvec_new(29, 0, &w), 0);
    assert_int_equal(coord_model_add(&j, 2, &w, 1.0), SFL_EDIM);
    sfl_spvec_free(w);
    /* A new attempt drops the held update (ASan would report a leak). */
    assert_int_equal(coord_model_begin(&j, 2), 0);
    assert_int_equal(coord_model_add(&j, 1, &u, 1.0), 0);
    assert_int_equal(coord_model_end(&j), 0);
    assert_int_equal(j.round, 1);
    /* Allocation failures of begin leave nothing held. */
    FAILALLOC_EACH(coord_model_begin(&j, 100), (void)0);
    assert_int_equal(j.nslots, 100);
    coord_model_close(&j);
}

/* Checkpoint bytes restore the exact state; the hash identifies the bytes. */
/* One agent's hostile update is refused for it alone, in both aggregation
 * modes, before it reaches the sum; the round commits with the others. */
static void test_job_hostile_update_alone(void **state)
{
    (void)state;

    for (int ordered = 0; ordered < 2; ordered++) {
        sfl_job_spec_t s;
        coord_model_t j;
        sfl_spvec_t *u;
        const double honest[6] = {1, 0, 2, 0, 0, 3};

        coord_job_spec_default(&s);
        s.dimension = 6;
        s.ordered_aggregation = ordered;
        assert_int_equal(coord_job_spec_set(&s, "algo", "fedavg"), 0);
        assert_int_equal(coord_job_spec_set(&s, "max_update_norm", "1000"), 0);
        assert_int_equal(coord_job_spec_set(&s, "max_samples", "500"), 0);
        assert_int_equal(coord_model_init(&j, &s), 0);
        assert_int_equal(coord_model_begin(&j, 5), 0);
        /* slot 0: values that overflow the sum once weighted */
        assert_int_equal(sfl_spvec_new(6, 0, &u), 0);
        assert_int_equal(sfl_spvec_from_dense(u, (const double[6]){1e300, 1e300, 0, 0, 0, 0}), 0);
        assert_int_equal(coord_model_add(&j, 0, &u, 1e6), SFL_ELIMIT);
        assert_int_equal(coord_model_add(&j, 0, &u, 10), SFL_ELIMIT);
        assert_non_null(strstr(sfl_last_error(), "max_update_norm"));
        /* slot 1: a value that is not finite */
        u->val[1] = NAN;
        assert_int_equal(coord_model_add(&j, 1, &u, 10), SFL_ENUMERIC);
        sfl_spvec_free(u);
        /* slot 2: an honest update declaring far more samples than allowed */
        assert_int_equal(sfl_spvec_new(6, 0, &u), 0);
        assert_int_equal(sfl_spvec_from_dense(u, (const double[6]){0, 0, 0, 0, 900, 0}), 0);
        assert_int_equal(coord_model_add(&j, 2, &u, 1e12), SFL_ELIMIT);
        assert_non_null(strstr(sfl_last_error(), "max_samples 500"));
        sfl_spvec_free(u);
        /* slots 3, 4: honest */
        for (uint32_t slot = 3; slot < 5; slot++) {
            assert_int_equal(sfl_spvec_new(6, 0, &u), 0);
            assert_int_equal(sfl_spvec_from_dense(u, honest), 0);
            assert_int_equal(coord_model_add(&j, slot, &u, 20), 0);
            sfl_spvec_free(u);
        }
        assert_int_equal(coord_model_end(&j), 0);
        assert_int_equal(j.round, 1);
        assert_memory_equal(j.global, honest, sizeof(honest));
        coord_model_close(&j);
    }
}

/* A job starts from sfl_loss_init_model with its seed (sfl-sim's start):
 * zeros for a linear loss, a random MLP; coord_model_start_model restores
 * it. */
static void test_job_start_model(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t j;
    const sfl_loss_t *l = sfl_loss_find("mlp:3");

    coord_job_spec_default(&s);
    s.dimension = 6;
    snprintf(s.loss, sizeof(s.loss), "mlp:3");
    s.nlabels = 3;
    s.labels[0] = 0, s.labels[1] = 1, s.labels[2] = 2;
    s.seed = 11;
    if (coord_model_init(&j, &s) != 0)
        fail_msg("%s", sfl_last_error());
    size_t d = sfl_loss_dim(l, 6, 3);
    double *want = calloc(d, sizeof(double));
    assert_non_null(want);
    assert_int_equal(j.prob.dim, d);
    sfl_loss_init_model(l, 6, 3, 11, want);
    assert_memory_equal(j.global, want, d * sizeof(double));
    assert_true(sfl_dvec_nnz(j.global, d) == d);
    j.global[0] = 42;
    j.round = 9;
    coord_model_start_model(&j);
    assert_memory_equal(j.global, want, d * sizeof(double));
    assert_int_equal(j.round, 0);
    coord_model_close(&j);
    free(want);
    /* a linear job starts at zero */
    coord_job_spec_default(&s);
    s.dimension = 20;
    assert_int_equal(coord_model_init(&j, &s), 0);
    assert_int_equal(sfl_dvec_nnz(j.global, 20), 0);
    coord_model_close(&j);
}

static void test_job_checkpoint_round_trip(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t a, b;
    uint8_t *buf, *buf2, h[32], h2[32];
    size_t len, len2;

    coord_job_spec_default(&s);
    s.dimension = 50;
    assert_int_equal(coord_model_init(&a, &s), 0);
    for (size_t i = 0; i < 50; i += 7)
        a.global[i] = 1.0 / (double)(i + 3);
    assert_int_equal(coord_model_encode(&a, &buf, &len, h), 0);
    assert_int_equal(coord_model_init(&b, &s), 0);
    assert_int_equal(coord_model_restore(&b, 12, buf, len), 0);
    assert_int_equal(b.round, 12);
    assert_memory_equal(a.global, b.global, 50 * sizeof(double));
    assert_int_equal(coord_model_encode(&b, &buf2, &len2, h2), 0);
    assert_memory_equal(h, h2, 32);
    /* Corrupt or foreign checkpoints are refused and leave the state alone. */
    assert_int_not_equal(coord_model_restore(&b, 13, buf, len - 1), 0);
    assert_int_equal(b.round, 12);
    sfl_job_spec_t other = s;
    other.dimension = 40;
    coord_model_t c;
    assert_int_equal(coord_model_init(&c, &other), 0);
    assert_int_not_equal(coord_model_restore(&c, 1, buf, len), 0);
    coord_model_close(&c);
    sfl__free(buf);
    sfl__free(buf2);
    coord_model_close(&a);
    coord_model_close(&b);
    /* Lossy update encodings never reach the checkpoint: it is float64. */
    for (int e = SFL_ENC_F32; e <= SFL_ENC_Q8; e++) {
        s.value_encoding = (sfl_enc_t)e;
        assert_int_equal(coord_model_init(&a, &s), 0);
        assert_int_equal(coord_model_init(&b, &s), 0);
        for (size_t i = 0; i < 50; i += 3)
            a.global[i] = 1.0 / (double)(i + 3) - 0.1234567891234;
        assert_int_equal(coord_model_encode(&a, &buf, &len, h), 0);
        assert_int_equal(coord_model_restore(&b, 3, buf, len), 0);
        assert_memory_equal(a.global, b.global, 50 * sizeof(double));
        sfl__free(buf);
        coord_model_close(&a);
        coord_model_close(&b);
    }
    s.value_encoding = SFL_ENC_F64;
    /* Allocation failures. */
    FAILALLOC_EACH(coord_model_init(&a, &s), coord_model_close(&a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_stats_round_cfg),
        cmocka_unit_test(test_job_eligibility),
        cmocka_unit_test(test_job_ineligible_reasons),
        cmocka_unit_test(test_job_matches_simulation),
        cmocka_unit_test(test_job_ordered_matches_simulation_in_any_order),
        cmocka_unit_test(test_job_ordered_hostile),
        cmocka_unit_test(test_job_hostile_update_alone),
        cmocka_unit_test(test_job_start_model),
        cmocka_unit_test(test_job_checkpoint_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

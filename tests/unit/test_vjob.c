/* server/job/vjob.c: a vertical job on the coordinator. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "job/model.h"
#include "sfl/core/alloc.h"
#include "sfl/dp/dp.h"
#include "testfed.h"

#define N 12
#define D 9
#define K 3

/* A spec of a vertical job over N rows and D features, K block holders. */
static void spec_of(sfl_job_spec_t *s, const char *algo)
{
    coord_job_spec_default(s);
    assert_int_equal(coord_job_spec_set(s, "algo", algo), 0);
    assert_int_equal(coord_job_spec_set(s, "loss", "lsq"), 0);
    s->dimension = D;
    s->rows = N;
    s->cohort_size = K;
    s->min_quorum = K;
    s->over_selection = 0;
    s->rounds = 3;
    s->iterations_per_round = 4;
    s->seed = 5;
}

static void test_vjob_refusals(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t j;

    spec_of(&s, "dpbcfw");
    assert_int_equal(coord_job_spec_check(&s), 0);
    s.rows = 0;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "rows:"));
    spec_of(&s, "dpbcfw");
    s.min_quorum = K - 1;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "min_quorum: every one of the 3 block holders"));
    spec_of(&s, "dpbcfw");
    s.over_selection = 0.25;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "over_selection"));
    spec_of(&s, "dpbcfw");
    s.cohort_size = s.min_quorum = D + 1; /* more clients than features */
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    spec_of(&s, "dpbcfw");
    s.rounds = UINT32_MAX;
    assert_int_equal(coord_job_spec_check(&s), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "2^32"));
    /* a horizontal job has no vertical part */
    coord_job_spec_default(&s);
    s.dimension = 2 * D;
    if (coord_model_init(&j, &s) != 0)
        fail_msg("%s", sfl_last_error());
    assert_null(j.v);
    assert_int_equal(j.dim, 2 * D);
    coord_model_close(&j);
    /* the spec keys */
    assert_int_equal(coord_job_spec_set(&s, "rows", "77"), 0);
    assert_int_equal(s.rows, 77);
    assert_int_equal(coord_job_spec_set(&s, "iterations_per_round", "5"), 0);
    assert_int_equal(s.iterations_per_round, 5);
    assert_int_equal(coord_job_spec_set(&s, "rows", "-1"), SFL_EINVAL);
}

static void test_vjob_span(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    uint64_t first;
    uint32_t n;

    spec_of(&s, "bcfw");
    s.rounds = 3;
    s.iterations_per_round = 0;
    assert_int_equal(coord_vjob_per_round(&s), COORD_VJOB_PER_ROUND_DEFAULT);
    s.iterations_per_round = 4;
    coord_vjob_span(&s, 1, &first, &n);
    assert_true(first == 0 && n == 4);
    coord_vjob_span(&s, 3, &first, &n);
    assert_true(first == 8 && n == 4);
    /* past the end: nothing */
    coord_vjob_span(&s, 4, &first, &n);
    assert_true(first == 12 && n == 0);
}

static void test_vjob_blocks(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t j;
    sfl_dataset_summary_t ds = {0};
    char why[200];

    spec_of(&s, "bcfw");
    assert_int_equal(coord_model_init(&j, &s), 0);
    assert_non_null(j.v);
    assert_int_equal(j.dim, D + j.v->nb);
    ds.samples = N;
    ds.dimension = 3;
    assert_int_equal(coord_vjob_block_of(j.v, &ds, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "holds whole rows"));
    ds.has_ids = 1;
    for (uint32_t k = 0; k < K; k++) {
        ds.first_column = 1 + 3 * k;
        assert_int_equal(coord_vjob_block_of(j.v, &ds, why, sizeof(why)), (int)k);
    }
    ds.first_column = 2;
    assert_int_equal(coord_vjob_block_of(j.v, &ds, why, sizeof(why)), -1);
    assert_string_equal(why, "block [2, 4] is not one of the job's 3 blocks of 9 columns "
                             "(the first is [1, 3])");
    ds.first_column = 1;
    ds.samples = N - 1;
    assert_int_equal(coord_vjob_block_of(j.v, &ds, why, sizeof(why)), -1);
    assert_string_equal(why, "holds 11 samples, the job 12");
    coord_model_close(&j);
}

/* One iteration through the coordinator's job equals the algorithm's own
 * server step on the same messages; the answers' verdicts. */
static void test_vjob_iterations(void **state)
{
    (void)state;
    double a[N * D], y[N], state0[64], x[D], b[64];
    sfl_job_spec_t s;
    coord_model_t j;
    sfl_dataset_t *all = NULL, *blk[K];
    void *cs[K];
    char why[200];
    uint8_t wire[K][256];
    size_t wlen;

    for (uint32_t i = 0; i < N * D; i++)
        a[i] = ((i * 7919u) % 13) / 13.0 - 0.4;
    for (uint32_t i = 0; i < N; i++)
        y[i] = (i % 3) - 1.0;
    all = testfed_dense_data(a, y, N, D);
    spec_of(&s, "bcfw");
    assert_int_equal(coord_model_init(&j, &s), 0);
    coord_model_start_model(&j);
    coord_vjob_begin(j.v, &s, 1, j.global, j.dim);
    assert_true(j.v->t == 0 && j.v->end == 4);
    wlen = sfl_msg_values_bytes(j.v->nm, j.v->vj.algo->vertical->msg_ints);
    assert_true(wlen <= sizeof(wire[0]) && j.v->nb <= 64);
    memcpy(state0, j.global, j.dim * sizeof(double));
    for (uint32_t k = 0; k < K; k++) {
        sfl_vblock_t vb = {.client = k, .col0 = 3 * k};
        double msg[32];

        assert_int_equal(sfl_dataset_columns(all, 3 * k, 3, &blk[k]), 0);
        vb.data = blk[k];
        assert_int_equal(j.v->vj.algo->vertical->client_new(&j.v->vj, &vb, &cs[k]), 0);
        assert_int_equal(sfl_vertical_client_step(&j.v->vj, &vb, 0, j.global + D, cs[k], NULL,
                                                  msg), 0);
        assert_int_equal(sfl_msg_values_encode(msg, j.v->nm,
                                               j.v->vj.algo->vertical->msg_ints, wire[k]), 0);
    }
    /* wrong iteration, bad bytes, then every answer once */
    assert_int_equal(coord_vjob_answer(j.v, 0, 1, wire[0], wlen, why, sizeof(why)),
                     COORD_UPD_WRONG_ROUND);
    assert_int_equal(coord_vjob_answer(j.v, 0, 0, wire[0], wlen - 1, why, sizeof(why)),
                     COORD_UPD_REJECTED);
    assert_non_null(strstr(why, "bytes, expected"));
    assert_int_equal(coord_vjob_advance(j.v, j.global), SFL_EINVAL);
    for (uint32_t k = 0; k < K; k++) {
        assert_false(coord_vjob_complete(j.v));
        assert_int_equal(coord_vjob_answer(j.v, k, 0, wire[k], wlen, why, sizeof(why)),
                         COORD_UPD_ACCEPTED);
    }
    assert_int_equal(coord_vjob_answer(j.v, 1, 0, wire[1], wlen, why, sizeof(why)),
                     COORD_UPD_DUPLICATE);
    assert_true(coord_vjob_complete(j.v));
    /* the algorithm's own step on the same messages */
    {
        double m[K][32];
        const double *rows[K];

        for (uint32_t k = 0; k < K; k++) {
            assert_int_equal(sfl_msg_values_decode(wire[k], wlen, j.v->nm,
                                                   j.v->vj.algo->vertical->msg_ints, m[k]), 0);
            rows[k] = m[k];
        }
        memcpy(x, state0, D * sizeof(double));
        memcpy(b, state0 + D, j.v->nb * sizeof(double));
        assert_int_equal(j.v->vj.algo->vertical->server_step(&j.v->vj, 0, rows, x, b), 0);
    }
    assert_int_equal(coord_vjob_advance(j.v, j.global), 0);
    assert_memory_equal(j.global, x, sizeof(x));
    assert_memory_equal(j.global + D, b, j.v->nb * sizeof(double));
    assert_true(j.v->t == 1 && !coord_vjob_complete(j.v));
    /* the checkpoint holds [x, b] and restores both */
    {
        uint8_t *ck = NULL, hash[32];
        size_t len = 0;

        assert_int_equal(coord_model_encode(&j, &ck, &len, hash), 0);
        coord_model_start_model(&j);
        assert_int_equal(coord_model_restore(&j, 1, ck, len), 0);
        assert_memory_equal(j.global, x, sizeof(x));
        assert_memory_equal(j.global + D, b, j.v->nb * sizeof(double));
        sfl__free(ck);
    }
    /* another attempt of round 1 starts from the round's start again */
    coord_vjob_begin(j.v, &s, 1, j.global, j.dim);
    assert_memory_equal(j.global, state0, j.dim * sizeof(double));
    assert_true(j.v->t == 0 && !coord_vjob_complete(j.v));
    for (uint32_t k = 0; k < K; k++) {
        j.v->vj.algo->vertical->client_free(cs[k]);
        sfl_dataset_free(blk[k]);
    }
    sfl_dataset_free(all);
    coord_model_close(&j);
}

/* The ledger: a private job spends its epsilon over its iterations, a
 * non-private one nothing. */
static void test_vjob_spent(void **state)
{
    (void)state;
    sfl_job_spec_t s;
    coord_model_t j;
    sfl_dp_spent_t sp;
    int priv = -1;

    spec_of(&s, "dpbcfw");
    assert_int_equal(coord_model_init(&j, &s), 0);
    assert_int_equal(coord_vjob_spent(j.v, 12, &sp, &priv), 0);
    assert_int_equal(priv, 1);
    assert_true(fabs(sp.eps_paper - 1.0) < 1e-9);
    assert_int_equal(coord_vjob_spent(j.v, 3, &sp, &priv), 0);
    assert_true(sp.eps_paper > 0 && sp.eps_paper < 1.0);
    coord_model_close(&j);
    spec_of(&s, "bcfw");
    assert_int_equal(coord_model_init(&j, &s), 0);
    assert_int_equal(coord_vjob_spent(j.v, 12, &sp, &priv), 0);
    assert_int_equal(priv, 0);
    coord_model_close(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vjob_refusals),
        cmocka_unit_test(test_vjob_span),
        cmocka_unit_test(test_vjob_blocks),
        cmocka_unit_test(test_vjob_iterations),
        cmocka_unit_test(test_vjob_spent),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

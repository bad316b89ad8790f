/* client-agent/vblock.c: the agent's side of a vertical job. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vblock.h"
#include "sfl/core/alloc.h"
#include "sfl/dp/dp.h"
#include "sfl/wire/spcodec.h"
#include "sfl/algo/vertical.h"
#include "testfed.h"
#include "testutil.h"

#define N 10
#define D 6
#define K 2

typedef struct fx {
    char dir[64];
    sfl_dataset_t *all, *blk[K];
    sfl_task_t t;
    sfl_algo_params_t p;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    double a[N * D], y[N];

    snprintf(f->dir, sizeof(f->dir), "/tmp/test_vblock.XXXXXX");
    if (f == NULL || mkdtemp(f->dir) == NULL)
        return -1;
    for (uint32_t i = 0; i < N * D; i++)
        a[i] = ((i * 31u) % 11) / 11.0 - 0.3;
    for (uint32_t i = 0; i < N; i++)
        y[i] = (double)(i % 2);
    f->all = testfed_dense_data(a, y, N, D);
    for (uint32_t k = 0; k < K; k++)
        if (sfl_dataset_columns(f->all, 3 * k, 3, &f->blk[k]) < 0)
            return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    sfl_spvec_free(f->t.model);
    for (uint32_t k = 0; k < K; k++)
        sfl_dataset_free(f->blk[k]);
    sfl_dataset_free(f->all);
    free(f);
    return 0;
}

/* A round's task of a dpbcfw job on the fixture's data (noise as given). */
static void task_of(fx_t *f, double dp_noise, uint64_t round, uint32_t attempt)
{
    const sfl_algo_t *algo = sfl_algo_find("dpbcfw");
    sfl_vjob_t vj;
    sfl_problem_t prob;

    sfl_algo_params_default(algo, &f->p);
    testfed_set(&f->p, "m", 4);
    testfed_set(&f->p, "dp_noise", dp_noise);
    sfl_spvec_free(f->t.model);
    memset(&f->t, 0, sizeof(f->t));
    f->t.job_id = 9;
    f->t.round = round;
    f->t.attempt = attempt;
    snprintf(f->t.algorithm, sizeof(f->t.algorithm), "dpbcfw");
    sfl_algo_params_to_list(&f->p, &f->t.params);
    snprintf(f->t.loss, sizeof(f->t.loss), "lsq");
    f->t.dimension = D;
    f->t.seed = 3;
    f->t.rows = N;
    f->t.clients = K;
    f->t.iterations = 8;
    f->t.round_iterations = 4;
    f->t.first_iteration = (round - 1) * 4;
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, D, 0), 0);
    vj = (sfl_vjob_t){.algo = algo, .p = &f->p, .prob = &prob, .nrows = N, .nclients = K,
                      .iters = 8, .seed = 3};
    assert_int_equal(sfl_spvec_new((uint32_t)algo->vertical->bcast_len(&vj), 0, &f->t.model), 0);
}

static agent_vert_cfg_t cfg_of(fx_t *f, uint32_t k, int test_noise)
{
    return (agent_vert_cfg_t){.data = f->blk[k], .first_column = 1 + 3 * k,
                              .state_dir = f->dir, .test_noise = test_noise};
}

static void write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static void test_vblock_ids_hash(void **state)
{
    fx_t *f = *state;
    char path[128];
    uint8_t h1[32], h2[32];

    snprintf(path, sizeof(path), "%s/ids", f->dir);
    write_text(path, "a\nb\nc\n");
    assert_int_equal(agent_vert_ids_hash(path, 3, h1), 0);
    /* blanks around an id and no final newline: the same ids */
    write_text(path, " a\t\nb\r\nc");
    assert_int_equal(agent_vert_ids_hash(path, 3, h2), 0);
    assert_memory_equal(h1, h2, 32);
    write_text(path, "a\nc\nb\n");
    assert_int_equal(agent_vert_ids_hash(path, 3, h2), 0);
    assert_memory_not_equal(h1, h2, 32);
    assert_int_equal(agent_vert_ids_hash(path, 4, h2), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "3 sample ids for 4 rows"));
    write_text(path, "a\n\nc\n");
    assert_int_equal(agent_vert_ids_hash(path, 2, h2), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), ":2: empty sample id"));
    snprintf(path, sizeof(path), "%s/none", f->dir);
    assert_true(agent_vert_ids_hash(path, 3, h2) < 0);
}

static void test_vblock_refusals(void **state)
{
    fx_t *f = *state;
    agent_vert_t *c = NULL;
    agent_vert_cfg_t cfg = cfg_of(f, 0, 1);

    task_of(f, 0, 1, 0);
    snprintf(f->t.algorithm, sizeof(f->t.algorithm), "fediterht");
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), SFL_EUNSUP);
    task_of(f, 0, 1, 0);
    cfg.first_column = 2; /* not one of the job's blocks */
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), SFL_EDIM);
    assert_non_null(strstr(sfl_last_error(), "columns [2, 4] are not one of the job's 2"));
    cfg = cfg_of(f, 0, 1);
    f->t.rows = N + 1;
    assert_true(agent_vert_begin(&c, &f->t, &cfg) < 0);
    assert_null(c);
}

/* The answers equal sfl_vertical_client_step's with the seeded stream, in
 * order, never twice; the ledger of a private job. */
static void test_vblock_steps_and_ledger(void **state)
{
    fx_t *f = *state;
    agent_vert_t *c = NULL;
    agent_vert_cfg_t cfg = cfg_of(f, 1, 1);
    double b[64] = {0}, want[64];
    uint8_t *msg = NULL, *enc;
    size_t len, nb = f->t.model ? f->t.model->dim : 0;
    char path[128];
    struct stat st;
    FILE *fp;
    void *cs = NULL;
    sfl_dp_rng_t noise;
    sfl_problem_t prob;
    sfl_vjob_t vj;
    sfl_vblock_t vb = {.client = 1, .col0 = 3, .data = f->blk[1]};
    uint64_t job, round, first;
    uint32_t attempt;

    task_of(f, 1, 1, 0);
    nb = f->t.model->dim;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), 0);
    agent_vert_round(c, &job, &round, &attempt, &first);
    assert_true(job == 9 && round == 1 && attempt == 0 && first == 0);
    snprintf(path, sizeof(path), "%s/privacy-9.ledger", f->dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* iteration 1 before 0, a wrong broadcast: refused */
    assert_int_equal(agent_vert_step(c, 4, b, nb, &msg, &len), SFL_EINVAL);
    assert_int_equal(agent_vert_step(c, 0, b, nb - 1, &msg, &len), SFL_EDIM);
    assert_int_equal(agent_vert_step(c, 0, b, nb, &msg, &len), 0);
    /* what sfl-sim's client 1 sends in iteration 0 */
    assert_int_equal(sfl_problem_init(&prob, &sfl_loss_lsq, D, 0), 0);
    vj = (sfl_vjob_t){.algo = sfl_algo_find("dpbcfw"), .p = &f->p, .prob = &prob, .nrows = N,
                      .nclients = K, .iters = 8, .seed = 3};
    assert_int_equal(vj.algo->vertical->common_new(&vj, (void **)&vj.common), 0);
    assert_int_equal(vj.algo->vertical->client_new(&vj, &vb, &cs), 0);
    sfl_dp_rng_seeded(&noise, 3, 0, 1);
    assert_int_equal(sfl_vertical_client_step(&vj, &vb, 0, b, cs, &noise, want), 0);
    enc = sfl__malloc(len);
    assert_int_equal(sfl_msg_values_encode(want, vj.algo->vertical->msg_len(&vj),
                                           vj.algo->vertical->msg_ints, enc), 0);
    assert_memory_equal(msg, enc, len);
    sfl__free(enc);
    sfl__free(msg);
    vj.algo->vertical->client_free(cs);
    vj.algo->vertical->common_free((void *)vj.common);
    /* never twice */
    assert_int_equal(agent_vert_step(c, 0, b, nb, &msg, &len), SFL_EINVAL);
    assert_int_equal(agent_vert_step(c, 1, b, nb, &msg, &len), 0);
    sfl__free(msg);
    /* the same attempt again (a restart): refused, it was answered */
    agent_vert_free(c);
    c = NULL;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), -EEXIST);
    /* the next attempt reserves the round again: 8 of 8 */
    task_of(f, 1, 1, 1);
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), 0);
    /* round 2 would need 4 more: the budget is spent */
    task_of(f, 1, 2, 0);
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "privacy budget of job 9 exhausted: 8 of its 8"));
    /* another epsilon for the same job: refused */
    task_of(f, 1, 2, 0);
    for (uint32_t i = 0; i < f->t.params.n; i++)
        if (strcmp(f->t.params.v[i].name, "epsilon") == 0)
            f->t.params.v[i].value = 2;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "it began with"));
    /* a damaged ledger is an error, not a fresh budget */
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("reserved 0\n", fp);
    fclose(fp);
    task_of(f, 1, 2, 0);
    if (agent_vert_begin(&c, &f->t, &cfg) != SFL_EPARSE)
        fail_msg("%s", sfl_last_error());
    agent_vert_free(c);
}

static void test_vblock_max_epsilon(void **state)
{
    fx_t *f = *state;
    agent_vert_t *c = NULL;
    agent_vert_cfg_t cfg = cfg_of(f, 0, 1);

    /* the job's first round spends a share of its epsilon 1, more than an
     * agent allowing 0.1 gives */
    cfg.max_epsilon = 0.1;
    task_of(f, 1, 1, 0);
    f->t.job_id = 10;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "above its max_epsilon 0.1"));
    cfg.max_epsilon = 5;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), 0);
    /* a job without noise keeps no ledger */
    task_of(f, 0, 1, 0);
    f->t.job_id = 11;
    assert_int_equal(agent_vert_begin(&c, &f->t, &cfg), 0);
    {
        char path[128];

        snprintf(path, sizeof(path), "%s/privacy-11.ledger", f->dir);
        assert_int_equal(access(path, F_OK), -1);
    }
    agent_vert_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_vblock_ids_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vblock_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vblock_steps_and_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vblock_max_epsilon, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* client-agent/sagent.c: the agent's side of update mode 2: its floor and
 * the state it keeps on disk across restarts (the last round taken, the
 * error-feedback residual), with damaged files refused by name. */
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

#include "sagent.h"
#include "sfl/alloc.h"
#include "sfl/file.h"

#define D 6

typedef struct fx {
    char dir[64], path[128];
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_sagent.XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/secagg-7.state", f->dir);
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
    free(f);
    return 0;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *fp = fopen(path, "wb");

    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* A damaged state file: refused, naming the file, and the state left empty. */
static void assert_refused(const fx_t *f, uint64_t job, uint32_t d)
{
    agent_sa_state_t st = {0};

    assert_int_equal(agent_sa_state_load(f->dir, job, d, &st), SFL_EPARSE);
    assert_non_null(strstr(sfl_last_error(), f->path));
    assert_non_null(strstr(sfl_last_error(), "remove it"));
    assert_null(st.resid);
    assert_int_equal(st.job, 0);
}

static void test_sagent_state(void **state)
{
    fx_t *f = *state;
    const double vals[D] = {0.5, -0.0, 1e-300, -3.25e12, 7, 0};
    agent_sa_state_t st = {0}, back = {0};
    struct stat sb;
    uint8_t *buf = NULL;
    size_t len = 0;

    /* no file: a fresh state */
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &st), 0);
    assert_true(st.job == 7 && st.round == 0 && st.attempt == 0 && st.d == D);
    for (uint32_t i = 0; i < D; i++)
        assert_true(st.resid[i] == 0);

    /* saved and loaded back bit for bit, 0600, 32 + 8 d bytes */
    st.round = 12;
    st.attempt = 3;
    memcpy(st.resid, vals, sizeof(vals));
    assert_int_equal(agent_sa_state_save(f->dir, &st), 0);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(sb.st_size, 32 + 8 * D);
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &back), 0);
    assert_true(back.round == 12 && back.attempt == 3 && back.d == D);
    assert_memory_equal(back.resid, vals, sizeof(vals));
    /* load clears what it is given first */
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &back), 0);
    agent_sa_state_clear(&back);
    assert_null(back.resid);

    /* another dimension, another job's file, truncated, longer, bad magic */
    assert_refused(f, 7, D + 1);
    assert_int_equal(sfl_file_read(f->path, 1 << 20, &buf, &len), 0);
    st.job = 8;
    assert_int_equal(agent_sa_state_save(f->dir, &st), 0);
    {
        char other[160];
        uint8_t *ob = NULL;
        size_t olen = 0;

        snprintf(other, sizeof(other), "%s/secagg-8.state", f->dir);
        assert_int_equal(sfl_file_read(other, 1 << 20, &ob, &olen), 0);
        write_bytes(f->path, ob, olen); /* job 8's bytes under job 7's name */
        sfl_file_free(ob, olen);
    }
    assert_refused(f, 7, D);
    write_bytes(f->path, buf, len - 1);
    assert_refused(f, 7, D);
    write_bytes(f->path, buf, 10);
    assert_refused(f, 7, D);
    {
        uint8_t *longer = calloc(len + 8, 1);

        assert_non_null(longer);
        memcpy(longer, buf, len);
        write_bytes(f->path, longer, len + 8);
        free(longer);
    }
    assert_refused(f, 7, D);
    buf[3] ^= 0x20;
    write_bytes(f->path, buf, len);
    assert_refused(f, 7, D);
    buf[3] ^= 0x20;
    write_bytes(f->path, buf, len);
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &back), 0);
    assert_int_equal(back.round, 12);

    /* a state_dir too long for a path */
    {
        char *dir = malloc(5000);

        assert_non_null(dir);
        memset(dir, 'd', 4999);
        dir[4999] = '\0';
        assert_int_equal(agent_sa_state_load(dir, 7, D, &st), SFL_EINVAL);
        free(dir);
    }
    sfl_file_free(buf, len);
    agent_sa_state_clear(&st);
    agent_sa_state_clear(&back);
}

/* A mode-2 task of 5 members (ids 1..5), the agent's identity as member 3. */
typedef struct tfx {
    sfl_task_t t;
    sfl_msg_sa_round_t sr;
    sfl_msg_sa_member_t m[5];
    sfl_identity_t *id[5];
} tfx_t;

static void task_init(tfx_t *x)
{
    memset(x, 0, sizeof(*x));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sfl_identity_generate(&x->id[i]), 0);
        x->m[i].agent_id = (uint64_t)i + 1;
        memcpy(x->m[i].pk, x->id[i]->pk, SFL_MSG_KEY_BYTES);
    }
    x->sr = (sfl_msg_sa_round_t){.threshold = 4, .nmembers = 5, .members = x->m,
                                 .support_size = 4, .top_k = 2, .clip = 1,
                                 .max_weight = 10};
    x->t.job_id = 7;
    x->t.round = 3;
    x->t.secagg = &x->sr;
    assert_int_equal(sfl_spvec_new(D, 2, &x->t.model), 0);
    x->t.model->idx[0] = 1;
    x->t.model->idx[1] = 4;
    x->t.model->val[0] = 0.5;
    x->t.model->val[1] = -2;
    x->t.model->nnz = 2;
    memset(x->t.round_nonce, 0x11, sizeof(x->t.round_nonce));
}

static void task_free(tfx_t *x)
{
    for (int i = 0; i < 5; i++)
        sfl_identity_free(x->id[i]);
    sfl_spvec_free(x->t.model);
}

/* The keys answer comes back for a task within the floor; below it (cohort,
 * threshold, graph degree), not a member, or no parameters: refused. */
static void test_sagent_begin_floor(void **state)
{
    tfx_t x;
    sfl_sa_policy_t pol;
    agent_sa_t *c = NULL;
    uint8_t *ans = NULL;
    size_t len = 0;
    uint64_t job, round;
    uint32_t attempt;

    (void)state;
    task_init(&x);
    sfl_sa_policy_default(&pol);
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), 0);
    assert_non_null(c);
    assert_true(ans != NULL && len > 0);
    agent_sa_round(c, &job, &round, &attempt);
    assert_true(job == 7 && round == 3 && attempt == 0);
    assert_int_equal(agent_sa_dim(c), D);
    sfl_msg_buf_free(ans);
    agent_sa_free(c);

    pol.min_n = 6;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    assert_null(c);
    assert_null(ans);
    sfl_sa_policy_default(&pol);
    pol.min_t = 5;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    sfl_sa_policy_default(&pol);
    x.sr.degree = 2; /* a Harary graph of degree 2 < 16 */
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "degree"));
    x.sr.degree = 0;
    x.sr.threshold = 2; /* not above half */
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    x.sr.threshold = 4;
    assert_int_equal(agent_sa_begin(&x.t, 9, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    x.t.secagg = NULL;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    assert_null(c);
    task_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sagent_state, setup, teardown),
        cmocka_unit_test(test_sagent_begin_floor),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

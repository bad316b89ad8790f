/* client-agent/sagent.c: the agent's side of update mode 2: its floor and
 * the state it keeps on disk across restarts (the last round taken, the
 * error-feedback residual), with damaged files refused by name. */
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

#include "coord_int.h"
#include "sagent.h"
#include "sfl/core/alloc.h"
#include "sfl/data/csr.h"
#include "sfl/data/dataset.h"
#include "sfl/core/file.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/secagg.h"

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

    /* no file: a fresh state, nothing taken (round 0 attempt 0, a
     * statistics round's first, is not a replay) */
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &st), 0);
    assert_true(st.job == 7 && st.round == 0 && st.attempt == 0 && st.d == D && !st.taken);
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
    assert_true(st.taken); /* saved: taken */
    assert_int_equal(agent_sa_state_load(f->dir, 7, D, &back), 0);
    assert_true(back.round == 12 && back.attempt == 3 && back.d == D && back.taken);
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
        x->m[i].weight = 10;
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
    /* n / 2 + 1 = 3 of 5: a coordinator with floor(5 / 3) = 1 colluder
     * could gather 3 signatures over each of two U3 sets (issue 23 finding
     * 5): refused by default; the default threshold 4 = floor(10 / 3) + 1
     * was taken above; an agent that assumes no colluder takes 3 */
    x.sr.threshold = 3;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "colluders"));
    assert_null(c);
    pol.max_colluders = 0;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), 0);
    sfl_msg_buf_free(ans);
    agent_sa_free(c);
    c = NULL;
    ans = NULL;
    pol.max_colluders = 2; /* t > (5 + 2) / 2: 4 is taken, 3 not */
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    x.sr.threshold = 4;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), 0);
    sfl_msg_buf_free(ans);
    agent_sa_free(c);
    c = NULL;
    ans = NULL;
    sfl_sa_policy_default(&pol);
    assert_int_equal(agent_sa_begin(&x.t, 9, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    x.t.secagg = NULL;
    assert_int_equal(agent_sa_begin(&x.t, 3, x.id[2], &pol, &c, &ans, &len), SFL_EINVAL);
    assert_null(c);
    task_free(&x);
}

/* A whole round of FN real agents (agent_sa_*) through the coordinator's
 * forwarding code (coord_saround_take, coord_saround_inbox) and the wire at
 * a limit of FN items, so every inbox is full: FN - 1 boxes, the most a
 * member can be sent. Run under ASan (make SAN=1): a copy of more than a
 * box's bytes (114 into 98, the bug of 639d1d6) reads past the last box. */
#define FN 8

typedef struct rfx {
    sfl_task_t t;
    sfl_msg_sa_round_t sr;
    sfl_msg_sa_member_t m[FN];
    sfl_identity_t *id[FN];
    agent_sa_t *c[FN];
    sfl_sa_server_t *sa;
    sfl_msg_limits_t lim;
    uint32_t support[D], k;
    const double (*moments)[5]; /* a statistics round (2 features): each member's */
} rfx_t;

#define SB 2.0 /* the statistics round's bound B */

static void rfx_init(rfx_t *x, uint32_t t)
{
    double global[D] = {0};
    sfl_sa_member_t sm[FN];
    sfl_sa_round_t r;

    memset(x, 0, sizeof(*x));
    sfl_msg_limits_default(&x->lim);
    x->lim.max_items = FN;
    for (int i = 0; i < FN; i++) {
        assert_int_equal(sfl_identity_generate(&x->id[i]), 0);
        x->m[i].agent_id = (uint64_t)i + 1;
        memcpy(x->m[i].pk, x->id[i]->pk, SFL_MSG_KEY_BYTES);
        x->m[i].weight = i < 5 ? 2.0 * (i + 1) : 10; /* public: 2, 4, .., 10 */
        sm[i].id = x->m[i].agent_id;
        memcpy(sm[i].pk, x->m[i].pk, sizeof(sm[i].pk));
    }
    x->sr = (sfl_msg_sa_round_t){.threshold = t, .nmembers = FN, .members = x->m,
                                 .support_size = 4, .top_k = 4, .clip = 1,
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
    sfl_spvec_scatter(x->t.model, global);
    assert_int_equal(sfl_sa_support(global, D, 4, x->t.round_nonce, x->support, &x->k), 0);
    r = (sfl_sa_round_t){.job = 7, .round = 3, .len = x->k + SFL_SA_EXTRA_WORDS, .t = t,
                         .n = FN, .members = sm};
    memcpy(r.nonce, x->t.round_nonce, sizeof(r.nonce));
    sfl_sa_support_hash(x->support, x->k, r.support_hash);
    assert_int_equal(sfl_sa_server_new(&r, &x->sa), 0);
}

/* The same cohort in a statistics round (round 0, attempt 0) of 2 features:
 * the 5 moments, every slot in the support, clip B = SB, the members' rows
 * as their weights (max 10). */
static void rfx_init_stats(rfx_t *x, uint32_t t, const double (*moments)[5])
{
    double zeros[5] = {0};
    sfl_sa_member_t sm[FN];
    sfl_sa_round_t r;

    rfx_init(x, t);
    sfl_sa_server_free(x->sa);
    x->sa = NULL;
    x->moments = moments;
    x->t.round = 0;
    x->t.statistics = 1;
    x->t.dimension = 2;
    x->sr.support_size = x->sr.top_k = 5;
    x->sr.clip = SB;
    for (int i = 0; i < FN; i++) {
        sm[i].id = x->m[i].agent_id;
        memcpy(sm[i].pk, x->m[i].pk, sizeof(sm[i].pk));
    }
    assert_int_equal(sfl_sa_support(zeros, 5, 5, x->t.round_nonce, x->support, &x->k), 0);
    assert_int_equal(x->k, 5);
    r = (sfl_sa_round_t){.job = 7, .round = 0, .len = x->k + SFL_SA_EXTRA_WORDS, .t = t,
                         .n = FN, .members = sm};
    memcpy(r.nonce, x->t.round_nonce, sizeof(r.nonce));
    sfl_sa_support_hash(x->support, x->k, r.support_hash);
    assert_int_equal(sfl_sa_server_new(&r, &x->sa), 0);
}

static void rfx_free(rfx_t *x)
{
    for (int i = 0; i < FN; i++) {
        agent_sa_free(x->c[i]);
        sfl_identity_free(x->id[i]);
    }
    sfl_sa_server_free(x->sa);
    sfl_spvec_free(x->t.model);
}

/* An agent's answer over the wire (at the fixture's limit) into the server. */
static void rfx_take(rfx_t *x, uint8_t *ans, size_t len)
{
    sfl_msg_sa_answer_t *m = NULL;

    assert_non_null(ans);
    assert_int_equal(sfl_msg_sa_answer_unpack(ans, len, &x->lim, &m), 0);
    assert_int_equal(coord_saround_take(x->sa, m), 0);
    sfl_msg_sa_answer_free(m);
    sfl_msg_buf_free(ans);
}

/* A stage over the wire (packed, then unpacked at the fixture's limit) to
 * agent i; its answer, if any, into the server. */
static void rfx_stage(rfx_t *x, int i, const sfl_msg_sa_stage_t *st)
{
    sfl_msg_sa_stage_t got = {0};
    sfl_task_t *task = NULL;
    sfl_wait_t wait;
    uint8_t *buf = NULL, *ans = NULL;
    size_t len = 0, alen = 0;
    int kind = 0;

    assert_int_equal(sfl_msg_sa_stage_pack(st, &buf, &len), 0);
    assert_int_equal(sfl_msg_sub_unpack(buf, len, &x->lim, &task, &wait, NULL, &got, &kind), 0);
    assert_int_equal(kind, 'a');
    sfl_msg_buf_free(buf);
    assert_int_equal(agent_sa_stage(x->c[i], &got, &ans, &alen), 0);
    if (ans != NULL)
        rfx_take(x, ans, alen);
    sfl_msg_sa_stage_clear(&got);
}

/* Agent i's update: v on every entry, samples its training's. */
static void rfx_update(rfx_t *x, int i, double v, uint64_t samples)
{
    sfl_client_report_t rep = {.train_loss = 0.5};
    double resid[D] = {0}, global[D] = {0};
    sfl_spvec_t *u = NULL;
    uint8_t *ans = NULL;
    size_t len = 0;

    if (x->moments != NULL) {
        /* a statistics round: the raw moments; the residual is not touched */
        (void)v;
        assert_int_equal(sfl_spvec_new(5, 0, &u), 0);
        assert_int_equal(sfl_spvec_from_dense(u, x->moments[i]), 0);
        assert_int_equal(agent_sa_update(x->c[i], u, samples, &rep, resid, &ans, &len), 0);
        for (int j = 0; j < D; j++)
            assert_true(resid[j] == 0);
        if (ans != NULL)
            rfx_take(x, ans, len);
        sfl_spvec_free(u);
        return;
    }
    sfl_spvec_scatter(x->t.model, global);
    for (int j = 0; j < D; j++)
        global[j] += v;
    assert_int_equal(sfl_spvec_new(D, 0, &u), 0);
    assert_int_equal(sfl_spvec_from_dense(u, global), 0);
    assert_int_equal(agent_sa_update(x->c[i], u, samples, &rep, resid, &ans, &len), 0);
    if (ans != NULL)
        rfx_take(x, ans, len);
    sfl_spvec_free(u);
}

/* Stages 1 to 5 with every agent, updates v[i]; the sum of U3's inputs
 * into sum (k + SFL_SA_EXTRA_WORDS words). Agent `hostile` (-1: none) is
 * given a copy of the task in which its own weight is `hweight`: it speaks
 * the whole protocol correctly and only scales its input wrongly. */
static void rfx_round_h(rfx_t *x, const double *v, uint32_t *sum, int hostile, double hweight);

static void rfx_round(rfx_t *x, const double *v, uint32_t *sum)
{
    rfx_round_h(x, v, sum, -1, 0);
}

static void rfx_round_h(rfx_t *x, const double *v, uint32_t *sum, int hostile, double hweight)
{
    const sfl_sa_adv_t *u1;
    const uint64_t *u2, *u3;
    const sfl_sa_consist_t *sigs;
    sfl_msg_sa_keys_t keys[FN];
    sfl_msg_sa_sig_t msigs[FN];
    sfl_sa_policy_t pol;
    uint32_t n, count = 0;

    sfl_sa_policy_default(&pol);
    for (int i = 0; i < FN; i++) {
        sfl_msg_sa_member_t m[FN];
        sfl_msg_sa_round_t sr = x->sr;
        sfl_task_t t = x->t;
        uint8_t *ans = NULL;
        size_t len = 0;

        if (i == hostile) {
            memcpy(m, x->m, sizeof(m));
            m[i].weight = hweight;
            sr.members = m;
            t.secagg = &sr;
        }
        assert_int_equal(agent_sa_begin(&t, (uint64_t)i + 1, x->id[i], &pol, &x->c[i], &ans,
                                        &len), 0);
        rfx_take(x, ans, len);
    }
    assert_int_equal(sfl_sa_server_end_adv(x->sa, &u1, &n), 0);
    assert_int_equal(n, FN);
    for (uint32_t i = 0; i < n; i++) {
        keys[i].agent_id = u1[i].id;
        memcpy(keys[i].c_pk, u1[i].c_pk, sizeof(keys[i].c_pk));
        memcpy(keys[i].s_pk, u1[i].s_pk, sizeof(keys[i].s_pk));
        memcpy(keys[i].sig, u1[i].sig, sizeof(keys[i].sig));
    }
    for (int i = 0; i < FN; i++)
        rfx_stage(x, i, &(sfl_msg_sa_stage_t){.job_id = 7, .round = x->t.round, .stage = 2,
                                              .nkeys = n, .keys = keys});
    assert_int_equal(sfl_sa_server_end_shares(x->sa, &u2, &n), 0);
    assert_int_equal(n, FN);
    for (int i = 0; i < FN; i++) {
        sfl_msg_sa_stage_t st = {.job_id = 7, .round = x->t.round, .stage = 3, .nclients = n,
                                 .clients = (uint64_t *)(uintptr_t)u2};

        /* the inbox is full: one box from each other member, at the limit */
        assert_int_equal(coord_saround_inbox(x->sa, (uint64_t)i + 1, &st.boxes, &st.nboxes), 0);
        assert_int_equal(st.nboxes, FN - 1);
        assert_int_equal(st.nboxes, x->lim.max_items - 1);
        rfx_stage(x, i, &st); /* held until the update */
        sfl__free(st.boxes);
        /* decrypts its FN - 1 boxes, answers; member 1 trained on (says it
         * had) 1e9 samples: its input is scaled by its public weight */
        rfx_update(x, i, v[i], i == 1 ? 1000000000 : 5);
    }
    assert_int_equal(sfl_sa_server_end_inputs(x->sa, &u3, &n), 0);
    assert_int_equal(n, FN);
    for (int i = 0; i < FN; i++)
        rfx_stage(x, i, &(sfl_msg_sa_stage_t){.job_id = 7, .round = x->t.round, .stage = 4,
                                              .nclients = n,
                                              .clients = (uint64_t *)(uintptr_t)u3});
    assert_int_equal(sfl_sa_server_end_consist(x->sa, &sigs, &n), 0);
    for (uint32_t i = 0; i < n; i++) {
        msigs[i].agent_id = sigs[i].id;
        memcpy(msigs[i].sig, sigs[i].sig, sizeof(msigs[i].sig));
    }
    for (int i = 0; i < FN; i++)
        rfx_stage(x, i, &(sfl_msg_sa_stage_t){.job_id = 7, .round = x->t.round, .stage = 5,
                                              .nsigs = n, .sigs = msigs});
    assert_int_equal(sfl_sa_server_finish(x->sa, sum, &count), 0);
    assert_int_equal(count, FN);
}

/* A standardize job's statistics round through the real protocol: every
 * member's raw moments, encoded with its public weight (its rows) at bound
 * B, come back as their plain sum within sfl_sa_moments_error, the count
 * exact (sfl/crypto/savec.h; the coordinator's coord_saround_stats). */
static void test_sagent_statistics(void **state)
{
    /* 2 features, every |x| <= SB; rows <= the public weights 2, 4, .., 10 */
    static const double mom[FN][5] = {
        {2, 1.5, -1, 2.25, 1},   {3, -2, 0.5, 4, 0.25},   {6, 4, 3, 8, 6},
        {8, 0, -8, 16, 8},       {10, 5, 2, 10, 12},      {1, 2, -2, 4, 4},
        {10, -10, 10, 20, 16},   {7, 0.25, 0, 0.5, 0}};
    const double v[FN] = {0};
    double want[5] = {0}, mean[5], got[5], wsum, w[FN], wpub = 0;
    uint32_t sum[5 + SFL_SA_EXTRA_WORDS];
    sfl_sa_quant_t q;
    rfx_t x;

    (void)state;
    for (int i = 0; i < FN; i++)
        for (int j = 0; j < 5; j++)
            want[j] += mom[i][j];
    assert_int_equal(sfl_sa_quant_init(&q, SB * SB, 10, FN), 0);
    /* honest, then member 1 scaling as if its weight were 10 (public 4):
     * rho v = x / w_max whatever weight it uses (n <= W), so the sum is the
     * same, within the bound */
    for (int hostile = -1; hostile <= 1; hostile += 2) {
        wpub = 0;
        rfx_init_stats(&x, 6, mom);
        rfx_round_h(&x, v, sum, hostile, 10);
        for (int i = 0; i < FN; i++) {
            w[i] = x.m[i].weight;
            wpub += w[i];
        }
        assert_int_equal(sfl_sa_server_mean(&q, sum, x.support, x.k, FN, w, 5, mean, &wsum), 0);
        assert_int_equal(sfl_sa_moments_decode(mean, 2, wpub, SB, got), 0);
        assert_true(got[0] == want[0]);
        for (int j = 1; j < 5; j++)
            assert_true(fabs(got[j] - want[j]) <
                        sfl_sa_moments_error(&q, FN, SB, j <= 2 ? 1 : 2));
        rfx_free(&x);
    }
}

/* A statistics task whose support does not cover every moment (another
 * length) is refused before any key goes out; so is moments of more rows
 * than the member's public weight, or beyond the bound, at its update. */
static void test_sagent_statistics_refusals(void **state)
{
    static const double mom[FN][5] = {{3, 0, 0, 1, 1}}; /* 3 rows, weight 2 */
    sfl_sa_policy_t pol;
    sfl_client_report_t rep = {0};
    sfl_spvec_t *u = NULL;
    uint8_t *ans = NULL;
    size_t len = 0;
    double bad[5] = {2, 0, 0, 9, 0}; /* Q 9 > 2 x B^2 */
    rfx_t x;

    (void)state;
    sfl_sa_policy_default(&pol);
    rfx_init_stats(&x, 6, mom);
    x.sr.support_size = 4;
    assert_int_equal(agent_sa_begin(&x.t, 1, x.id[0], &pol, &x.c[0], &ans, &len), SFL_EINVAL);
    assert_non_null(strstr(sfl_last_error(), "statistics round of 5 moments"));
    assert_null(x.c[0]);
    x.sr.support_size = 5;
    x.sr.clip = 1e300; /* B^2 not finite */
    assert_int_equal(agent_sa_begin(&x.t, 1, x.id[0], &pol, &x.c[0], &ans, &len), SFL_EINVAL);
    x.sr.clip = SB;
    assert_int_equal(agent_sa_begin(&x.t, 1, x.id[0], &pol, &x.c[0], &ans, &len), 0);
    sfl_msg_buf_free(ans);
    assert_true(agent_sa_stats(x.c[0]) && agent_sa_dim(x.c[0]) == 5);
    assert_int_equal(sfl_spvec_new(5, 0, &u), 0);
    assert_int_equal(sfl_spvec_from_dense(u, mom[0]), 0);
    assert_int_equal(agent_sa_update(x.c[0], u, 3, &rep, NULL, &ans, &len), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "public weight"));
    sfl_spvec_free(u);
    assert_int_equal(sfl_spvec_new(5, 0, &u), 0);
    assert_int_equal(sfl_spvec_from_dense(u, bad), 0);
    assert_int_equal(agent_sa_update(x.c[0], u, 2, &rep, NULL, &ans, &len), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "standardize_bound"));
    assert_null(ans);
    sfl_spvec_free(u);
    rfx_free(&x);
}

/* The values the statistics round's moments come from: every |x| <= B, or
 * the agent refuses naming the row, the feature and the bound. */
static void test_sagent_stats_check(void **state)
{
    const double a[6] = {1, -2, 0, 0.5, 0, 2};
    sfl_csr_t *X = NULL;
    double *y = sfl__calloc(2, sizeof(double));
    sfl_dataset_t *ds = NULL;

    (void)state;
    assert_non_null(y);
    assert_int_equal(sfl_csr_from_dense(a, 2, 3, &X), 0);
    assert_int_equal(sfl_dataset_new(X, y, &ds), 0);
    assert_int_equal(agent_sa_stats_check(ds, 2), 0);
    assert_int_equal(agent_sa_stats_check(ds, 1.5), SFL_ERANGE);
    assert_non_null(strstr(sfl_last_error(), "row 0 feature 1 is -2, beyond the job's "
                                            "standardize_bound 1.5"));
    assert_int_equal(agent_sa_stats_check(ds, 0), SFL_EINVAL);
    assert_int_equal(agent_sa_stats_check(ds, NAN), SFL_EINVAL);
    sfl_dataset_free(ds);
}

static void test_sagent_full_inbox(void **state)
{
    const double v[FN] = {0.25, -0.5, 0.125, 0.75, -0.25, 0.5, 0, 0.375};
    uint32_t sum[D + SFL_SA_EXTRA_WORDS];
    double mean[D], wsum, want = 0, w[FN], rsum = 0, m[SFL_SA_METRICS];
    sfl_sa_quant_t q;
    rfx_t x;

    (void)state;
    _Static_assert(sizeof(((sfl_msg_sa_box_t *)0)->ct) == SFL_SA_BOX_BYTES, "one box size");
    rfx_init(&x, 6);
    rfx_round(&x, v, sum);
    /* the boxes arrived intact (every agent decrypted FN - 1 of them) and
     * the sum is the cohort's mean */
    assert_int_equal(sfl_sa_quant_init(&q, 1, 10, FN), 0);
    for (int i = 0; i < FN; i++) {
        w[i] = x.m[i].weight;
        rsum += w[i] / 10;
        want += w[i] / 10 * v[i];
    }
    want /= rsum;
    assert_int_equal(sfl_sa_server_mean(&q, sum, x.support, x.k, FN, w, D, mean, &wsum), 0);
    assert_true(wsum == rsum);
    for (uint32_t s = 0; s < x.k; s++)
        assert_true(fabs(mean[x.support[s]] - want) < 1e-6);
    /* the metrics: the samples each trained on, summed */
    assert_int_equal(sfl_sa_metrics_decode(&q, sum + x.k + 1, FN, m), 0);
    assert_true(m[0] == 1000000000.0 + 5 * (FN - 1));
    rfx_free(&x);
}

/* Issue 23 finding 2 through the real protocol: a member that inflates its
 * own weight (its public weight 2 of max_weight 10; it scales as if 10)
 * while every stage it speaks is valid: the masks hide it, the shares open,
 * and the sum is refused as out of bounds before anything would be folded,
 * named as not attributable. Honest, the same round decodes. */
static void test_sagent_inflated_weight(void **state)
{
    const double v[FN] = {0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75};
    uint32_t sum[D + SFL_SA_EXTRA_WORDS];
    double mean[D], wsum, w[FN];
    sfl_sa_quant_t q;

    (void)state;
    assert_int_equal(sfl_sa_quant_init(&q, 1, 10, FN), 0);
    for (int hostile = -1; hostile <= 0; hostile++) {
        rfx_t x;

        rfx_init(&x, 6);
        for (int i = 0; i < FN; i++)
            x.m[i].weight = w[i] = 2; /* rho 0.2 each */
        rfx_round_h(&x, v, sum, hostile, 10);
        int rc = sfl_sa_server_mean(&q, sum, x.support, x.k, FN, w, D, mean, &wsum);
        if (hostile < 0) {
            assert_int_equal(rc, 0);
            for (uint32_t s = 0; s < x.k; s++)
                assert_true(fabs(mean[x.support[s]] - 0.75) < 1e-6);
        } else {
            /* 7 x 0.2 x 0.75 + 1 x 0.75 = 2.1 > 8 x 0.2 = 1.6 (x clip 2^f) */
            assert_int_equal(rc, SFL_ERANGE);
            assert_non_null(strstr(sfl_last_error(), "secure sum out of bounds"));
            assert_non_null(strstr(sfl_last_error(), "not attributable"));
        }
        rfx_free(&x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sagent_state, setup, teardown),
        cmocka_unit_test(test_sagent_begin_floor),
        cmocka_unit_test(test_sagent_full_inbox),
        cmocka_unit_test(test_sagent_statistics),
        cmocka_unit_test(test_sagent_statistics_refusals),
        cmocka_unit_test(test_sagent_stats_check),
        cmocka_unit_test(test_sagent_inflated_weight),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}

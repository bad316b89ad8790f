/* The agent's side of update mode 2: sagent.h. */
#include "sagent.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/data/dataset.h"
#include "sfl/core/file.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/secagg.h"
#include "sfl/core/topk.h"

const agent_sa_hooks_t *agent_sa_test_hooks = NULL;

struct agent_sa {
    uint64_t job, round, agent_id;
    uint32_t attempt, d, k, topk, n;
    int stats;                 /* a statistics round: d = 1 + 2 features */
    double bound;              /* its standardize_bound B (the task's clip) */
    sfl_sa_member_t *members;
    uint32_t *support;         /* S_t, k indices */
    double *global;            /* the task's model, d entries */
    sfl_sa_quant_t quant;
    double weight;             /* this member's public weight (the task's) */
    sfl_sa_client_t *c;
    uint32_t *q;               /* the quantized input and metrics once trained */
    int trained;
    sfl_msg_sa_stage_t held;   /* a stage 3 that came before the update */
    int holding;
    sfl_sa_round_t r;          /* as the client was opened (test hook) */
    const sfl_identity_t *ident;
};

void agent_sa_free(agent_sa_t *c)
{
    if (c == NULL)
        return;
    sfl_sa_client_free(c->c);
    sfl__free(c->members);
    sfl__free(c->support);
    sfl__free(c->global);
    if (c->q != NULL)
        sodium_memzero(c->q, ((size_t)c->k + SFL_SA_EXTRA_WORDS) * sizeof(uint32_t));
    sfl__free(c->q);
    sfl_msg_sa_stage_clear(&c->held);
    sfl__free(c);
}

void agent_sa_round(const agent_sa_t *c, uint64_t *job, uint64_t *round, uint32_t *attempt)
{
    *job = c->job;
    *round = c->round;
    *attempt = c->attempt;
}

uint32_t agent_sa_dim(const agent_sa_t *c)
{
    return c->d;
}

int agent_sa_stats(const agent_sa_t *c)
{
    return c->stats;
}

int agent_sa_stats_check(const sfl_dataset_t *data, double bound)
{
    const sfl_csr_t *X = data->X;

    if (!(isfinite(bound) && bound > 0))
        return sfl__fail(SFL_EINVAL, "standardize_bound %g must be finite and > 0", bound);
    for (uint32_t r = 0; r < X->nrows; r++)
        for (size_t e = X->rowptr[r]; e < X->rowptr[r + 1]; e++)
            if (!(fabs(X->val[e]) <= bound))
                return sfl__fail(SFL_ERANGE, "statistics: row %u feature %u is %g, beyond the "
                                 "job's standardize_bound %g (secure aggregation sums only "
                                 "values in [-B, B]: raise the bound or rescale the data)", r,
                                 X->colind[e], X->val[e], bound);
    return 0;
}

#define STATE_MAGIC "sflsa01\n"
#define STATE_HEAD 32

static int state_path(const char *dir, uint64_t job, char *path, size_t cap)
{
    if ((size_t)snprintf(path, cap, "%s/secagg-%llu.state", dir, (unsigned long long)job) >= cap)
        return sfl__fail(SFL_EINVAL, "state_dir is too long");
    return 0;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;

    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void agent_sa_state_clear(agent_sa_state_t *st)
{
    sfl__free(st->resid);
    memset(st, 0, sizeof(*st));
}

int agent_sa_state_load(const char *dir, uint64_t job, uint32_t d, agent_sa_state_t *st)
{
    char path[4096];
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    agent_sa_state_clear(st);
    if ((rc = state_path(dir, job, path, sizeof(path))) < 0)
        return rc;
    if ((st->resid = sfl__calloc(d ? d : 1, sizeof(double))) == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the residual");
    st->job = job;
    st->d = d;
    rc = sfl_file_read(path, STATE_HEAD + 8 * (size_t)d, &buf, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && (len != STATE_HEAD + 8 * (size_t)d || memcmp(buf, STATE_MAGIC, 8) != 0 ||
                    get_le(buf + 8, 8) != job || get_le(buf + 28, 4) != d))
        rc = sfl__fail(SFL_EPARSE, "%s is not this job's secure aggregation state (%zu bytes; "
                       "want %zu for job %llu, d = %u): remove it to let the agent take the "
                       "job's rounds again", path, len, STATE_HEAD + 8 * (size_t)d,
                       (unsigned long long)job, d);
    else if (rc == SFL_ELIMIT)
        rc = sfl__fail(SFL_EPARSE, "%s is larger than job %llu's state: remove it to let the "
                       "agent take the job's rounds again", path, (unsigned long long)job);
    if (rc == 0) {
        st->taken = 1;
        st->round = get_le(buf + 16, 8);
        st->attempt = (uint32_t)get_le(buf + 24, 4);
        for (uint32_t i = 0; i < d; i++) {
            uint64_t bits = get_le(buf + STATE_HEAD + 8 * (size_t)i, 8);

            memcpy(&st->resid[i], &bits, sizeof(double));
        }
    }
    sfl_file_free(buf, len);
    if (rc < 0)
        agent_sa_state_clear(st);
    return rc;
}

int agent_sa_state_save(const char *dir, const agent_sa_state_t *st)
{
    size_t len = STATE_HEAD + 8 * (size_t)st->d;
    uint8_t *buf = sfl__calloc(len, 1);
    char path[4096];
    int rc;

    if (buf == NULL)
        return sfl__fail(SFL_ENOMEM, "no memory for the secure aggregation state");
    memcpy(buf, STATE_MAGIC, 8);
    put_le(buf + 8, st->job, 8);
    put_le(buf + 16, st->round, 8);
    put_le(buf + 24, st->attempt, 4);
    put_le(buf + 28, st->d, 4);
    for (uint32_t i = 0; i < st->d; i++) {
        uint64_t bits;

        memcpy(&bits, &st->resid[i], sizeof(bits));
        put_le(buf + STATE_HEAD + 8 * (size_t)i, bits, 8);
    }
    rc = state_path(dir, st->job, path, sizeof(path));
    if (rc == 0)
        rc = sfl_file_write_atomic(path, buf, len);
    if (rc == 0)
        ((agent_sa_state_t *)st)->taken = 1;
    sodium_memzero(buf, len);
    sfl__free(buf);
    return rc;
}

/* SubmitSecAgg's request for m (its ids filled here), answering st (NULL:
 * the task). */
static int answer_pack(const agent_sa_t *c, const sfl_msg_sa_stage_t *st,
                       sfl_msg_sa_answer_t *m, uint8_t **out, size_t *len)
{
    m->job_id = c->job;
    m->round = c->round;
    m->attempt = c->attempt;
    m->agent_id = c->agent_id;
    if (agent_sa_test_hooks != NULL && agent_sa_test_hooks->answer != NULL)
        agent_sa_test_hooks->answer(agent_sa_test_hooks->ud, &c->r, st, c->ident,
                                    m->stage == 3 ? c->q : NULL, m);
    return sfl_msg_sa_answer_pack(m, out, len);
}

int agent_sa_begin(const sfl_task_t *t, uint64_t agent_id, const sfl_identity_t *id,
                   const sfl_sa_policy_t *pol, agent_sa_t **out, uint8_t **answer, size_t *len)
{
    const sfl_msg_sa_round_t *sr = t->secagg;
    agent_sa_t *c;
    sfl_sa_round_t r;
    sfl_sa_adv_t adv;
    sfl_msg_sa_answer_t m = {.stage = 1};
    int rc;

    *out = NULL;
    *answer = NULL;
    if (sr == NULL || t->model == NULL)
        return sfl__fail(SFL_EINVAL, "secure aggregation: the task has no parameters");
    if ((c = sfl__calloc(1, sizeof(*c))) == NULL)
        return SFL_ENOMEM;
    c->job = t->job_id;
    c->round = t->round;
    c->attempt = t->attempt;
    c->agent_id = agent_id;
    c->d = t->model->dim;
    c->topk = sr->top_k;
    c->n = sr->nmembers;
    if (t->statistics) {
        /* the moments, every slot sent (sfl/crypto/savec.h); the quantizer's clip
         * is B^2, B the task's clip */
        c->stats = 1;
        c->bound = sr->clip;
        c->d = (uint32_t)SFL_MOMENTS_LEN(t->dimension);
        if (sr->support_size < c->d || sr->top_k < c->d || !isfinite(sr->clip * sr->clip)) {
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: a statistics round of %u moments "
                           "with a support of %u, top_k %u, bound %g (want every slot and a "
                           "finite B^2)", c->d, sr->support_size, sr->top_k, sr->clip);
            goto fail;
        }
    }
    if ((c->members = sfl__calloc(sr->nmembers, sizeof(*c->members))) == NULL ||
        (c->support = sfl__calloc(sr->support_size, sizeof(uint32_t))) == NULL ||
        (c->global = sfl__calloc(c->d, sizeof(double))) == NULL) {
        rc = SFL_ENOMEM;
        goto fail;
    }
    if (!c->stats) /* a statistics round's "model" is zeros: nothing to subtract */
        sfl_spvec_scatter(t->model, c->global);
    if ((rc = sfl_sa_support(c->global, c->d, sr->support_size, t->round_nonce, c->support,
                             &c->k)) < 0 ||
        (rc = sfl_sa_quant_init(&c->quant, c->stats ? sr->clip * sr->clip : sr->clip,
                                sr->max_weight, sr->nmembers)) < 0)
        goto fail;
    if ((c->q = sfl__calloc((size_t)c->k + SFL_SA_EXTRA_WORDS, sizeof(uint32_t))) == NULL) {
        rc = SFL_ENOMEM;
        goto fail;
    }
    for (uint32_t i = 0; i < sr->nmembers; i++) {
        c->members[i].id = sr->members[i].agent_id;
        memcpy(c->members[i].pk, sr->members[i].pk, sizeof(c->members[i].pk));
        if (sr->members[i].agent_id == agent_id)
            c->weight = sr->members[i].weight;
    }
    r = (sfl_sa_round_t){.job = t->job_id, .round = t->round, .attempt = t->attempt,
                         .len = c->k + SFL_SA_EXTRA_WORDS, .t = sr->threshold,
                         .n = sr->nmembers,
                         .degree = sr->degree, .members = c->members};
    memcpy(r.nonce, t->round_nonce, sizeof(r.nonce));
    memcpy(r.model_hash, t->model_hash, sizeof(r.model_hash));
    sfl_sa_support_hash(c->support, c->k, r.support_hash);
    if ((rc = sfl_sa_client_new(&r, pol, agent_id, id, &c->c, &adv)) < 0)
        goto fail;
    c->r = r;
    c->ident = id;
    m.keys.agent_id = adv.id;
    memcpy(m.keys.c_pk, adv.c_pk, sizeof(m.keys.c_pk));
    memcpy(m.keys.s_pk, adv.s_pk, sizeof(m.keys.s_pk));
    memcpy(m.keys.sig, adv.sig, sizeof(m.keys.sig));
    if ((rc = answer_pack(c, NULL, &m, answer, len)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    agent_sa_free(c);
    return rc;
}

/* Stage 3 with the input ready. */
static int input(agent_sa_t *c, const sfl_msg_sa_stage_t *st, uint8_t **answer, size_t *len)
{
    sfl_sa_box_t *boxes = sfl__calloc(st->nboxes ? st->nboxes : 1, sizeof(*boxes));
    sfl_sa_input_t in;
    sfl_msg_sa_answer_t m = {.stage = 3};
    int rc;

    if (boxes == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < st->nboxes; i++) {
        boxes[i].from = st->boxes[i].from;
        boxes[i].to = st->boxes[i].to;
        memcpy(boxes[i].nonce, st->boxes[i].nonce, sizeof(boxes[i].nonce));
        memcpy(boxes[i].ct, st->boxes[i].ct, sizeof(boxes[i].ct));
    }
    rc = sfl_sa_client_input(c->c, st->clients, st->nclients, boxes, st->nboxes, c->q, &in);
    sfl__free(boxes);
    if (rc < 0)
        return rc;
    m.nmasked = in.len;
    m.masked = in.y;
    memcpy(m.sig, in.sig, sizeof(m.sig));
    rc = answer_pack(c, st, &m, answer, len);
    sfl_sa_input_clear(&in);
    return rc;
}

void agent_sa_test_weight(agent_sa_t *c, double w)
{
    c->weight = w;
}

int agent_sa_update(agent_sa_t *c, const sfl_spvec_t *update, uint64_t samples,
                    const sfl_client_report_t *rep, double *resid, uint8_t **answer,
                    size_t *len)
{
    const double m[SFL_SA_METRICS] = {
        (double)samples, (double)samples * rep->train_loss, (double)rep->eval_samples,
        (double)rep->eval_samples * rep->eval_accuracy, (double)rep->eval_samples * rep->eval_mse};
    double *delta = sfl__calloc(c->d, sizeof(double)), *vals = NULL, *scratch = NULL;
    sfl_topk_ws_t ws;
    sfl_rng_t rng;
    uint8_t seed[8];
    uint64_t s = 0;
    int rc;

    *answer = NULL;
    sfl_topk_ws_init(&ws);
    if (delta == NULL || (vals = sfl__calloc((size_t)c->k + 1, sizeof(double))) == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if (update->dim != c->d) {
        rc = sfl__fail(SFL_EDIM, "secure aggregation: an update of %u, the model %u",
                       update->dim, c->d);
        goto out;
    }
    sfl_spvec_scatter(update, delta);
    for (uint32_t i = 0; i < c->d; i++)
        delta[i] -= c->global[i];
    if (c->stats) {
        /* the raw moments, encoded for mode 2's weighted mean with this
         * member's public weight (sfl/crypto/savec.h); every slot kept, so no
         * residual: a zero one of the moments' length, the job's left as
         * it is */
        if (c->k != c->d) {
            rc = sfl__fail(SFL_EINVAL, "secure aggregation: a statistics round's support of "
                           "%u slots, the moments have %u", c->k, c->d);
            goto out;
        }
        if ((scratch = sfl__calloc(c->d, sizeof(double))) == NULL) {
            rc = SFL_ENOMEM;
            goto out;
        }
        /* vals (k + 1 >= d entries) as the encoder's output, then delta */
        if ((rc = sfl_sa_moments_encode(delta, (c->d - 1) / 2, c->weight, c->bound, vals)) < 0)
            goto out;
        memcpy(delta, vals, c->d * sizeof(double));
        resid = scratch;
    }
    /* the stochastic rounding's draws: fresh, never the job's seed */
    randombytes_buf(seed, sizeof(seed));
    for (int i = 0; i < 8; i++)
        s |= (uint64_t)seed[i] << (8 * i);
    sfl_rng_seed(&rng, s, c->round, c->agent_id, SFL_STREAM_SECAGG);
    if ((rc = sfl_topk_ws_reserve(&ws, c->k ? c->k : 1)) < 0 ||
        (rc = sfl_sa_client_vector(&c->quant, delta, resid, c->d, c->support, c->k, c->topk,
                                   c->weight, &rng, &ws, vals, c->q)) < 0)
        goto out;
    sfl_sa_metrics_encode(&c->quant, m, c->q + c->k + 1);
    c->trained = 1;
    if (c->holding) {
        rc = input(c, &c->held, answer, len);
        sfl_msg_sa_stage_clear(&c->held);
        c->holding = 0;
    }
out:
    if (delta != NULL)
        sodium_memzero(delta, c->d * sizeof(double));
    if (vals != NULL)
        sodium_memzero(vals, ((size_t)c->k + 1) * sizeof(double));
    if (scratch != NULL)
        sodium_memzero(scratch, c->d * sizeof(double));
    sfl__free(scratch);
    sfl__free(delta);
    sfl__free(vals);
    sfl_topk_ws_close(&ws);
    return rc;
}

int agent_sa_stage(agent_sa_t *c, const sfl_msg_sa_stage_t *st, uint8_t **answer, size_t *len)
{
    sfl_msg_sa_answer_t m = {.stage = st->stage};
    int rc = 0;

    *answer = NULL;
    switch (st->stage) {
    case 2: {
        sfl_sa_adv_t *advs = sfl__calloc(st->nkeys ? st->nkeys : 1, sizeof(*advs));
        sfl_sa_shares_t sh;

        if (advs == NULL)
            return SFL_ENOMEM;
        for (uint32_t i = 0; i < st->nkeys; i++) {
            advs[i].id = st->keys[i].agent_id;
            memcpy(advs[i].c_pk, st->keys[i].c_pk, sizeof(advs[i].c_pk));
            memcpy(advs[i].s_pk, st->keys[i].s_pk, sizeof(advs[i].s_pk));
            memcpy(advs[i].sig, st->keys[i].sig, sizeof(advs[i].sig));
        }
        rc = sfl_sa_client_share(c->c, advs, st->nkeys, &sh);
        sfl__free(advs);
        if (rc < 0)
            return rc;
        _Static_assert(SFL_MSG_SA_POINT == SFL_SA_POINT, "a commitment's size");
        m.commits = sh.commit; /* borrowed until sh is cleared */
        m.ncommits = sh.ncommit;
        memcpy(m.sig, sh.sig, sizeof(m.sig));
        m.nboxes = sh.nboxes;
        if ((m.boxes = sfl__calloc(sh.nboxes ? sh.nboxes : 1, sizeof(*m.boxes))) == NULL) {
            sfl_sa_shares_clear(&sh);
            return SFL_ENOMEM;
        }
        for (uint32_t i = 0; i < sh.nboxes; i++) {
            m.boxes[i].from = sh.boxes[i].from;
            m.boxes[i].to = sh.boxes[i].to;
            memcpy(m.boxes[i].nonce, sh.boxes[i].nonce, sizeof(m.boxes[i].nonce));
            memcpy(m.boxes[i].ct, sh.boxes[i].ct, sizeof(m.boxes[i].ct));
        }
        rc = answer_pack(c, st, &m, answer, len);
        sfl_sa_shares_clear(&sh);
        sfl__free(m.boxes);
        return rc;
    }
    case 3:
        if (c->trained)
            return input(c, st, answer, len);
        /* held until the update is ready (a copy: st is the caller's) */
        sfl_msg_sa_stage_clear(&c->held);
        c->held = *st;
        c->held.clients = sfl__calloc(st->nclients ? st->nclients : 1, sizeof(uint64_t));
        c->held.boxes = sfl__calloc(st->nboxes ? st->nboxes : 1, sizeof(*st->boxes));
        c->held.keys = NULL;
        c->held.sigs = NULL;
        if (c->held.clients == NULL || c->held.boxes == NULL) {
            sfl_msg_sa_stage_clear(&c->held);
            return SFL_ENOMEM;
        }
        memcpy(c->held.clients, st->clients, st->nclients * sizeof(uint64_t));
        memcpy(c->held.boxes, st->boxes, st->nboxes * sizeof(*st->boxes));
        c->holding = 1;
        return 0;
    case 4: {
        sfl_sa_consist_t cs;

        if ((rc = sfl_sa_client_consist(c->c, st->clients, st->nclients, &cs)) < 0)
            return rc;
        memcpy(m.sig, cs.sig, sizeof(m.sig));
        return answer_pack(c, st, &m, answer, len);
    }
    case 5: {
        sfl_sa_consist_t *sigs = sfl__calloc(st->nsigs ? st->nsigs : 1, sizeof(*sigs));
        sfl_sa_reveal_t *rv = sfl__calloc(c->n, sizeof(*rv));
        uint32_t nr = 0;

        if (sigs == NULL || rv == NULL ||
            (m.reveals = sfl__calloc(c->n, sizeof(*m.reveals))) == NULL) {
            sfl__free(sigs);
            sfl__free(rv);
            return SFL_ENOMEM;
        }
        for (uint32_t i = 0; i < st->nsigs; i++) {
            sigs[i].id = st->sigs[i].agent_id;
            memcpy(sigs[i].sig, st->sigs[i].sig, sizeof(sigs[i].sig));
        }
        rc = sfl_sa_client_unmask(c->c, sigs, st->nsigs, rv, &nr);
        for (uint32_t i = 0; rc == 0 && i < nr; i++) {
            m.reveals[i].of = rv[i].of;
            m.reveals[i].self_mask = rv[i].type == 'b';
            m.reveals[i].x = rv[i].share.x;
            memcpy(m.reveals[i].y, rv[i].share.y, sizeof(m.reveals[i].y));
            memcpy(m.reveals[i].sig, rv[i].sig, sizeof(m.reveals[i].sig));
        }
        m.nreveals = nr;
        if (rc == 0)
            rc = answer_pack(c, st, &m, answer, len);
        sodium_memzero(rv, c->n * sizeof(*rv));
        sodium_memzero(m.reveals, c->n * sizeof(*m.reveals));
        sfl__free(rv);
        sfl__free(m.reveals);
        sfl__free(sigs);
        return rc;
    }
    default:
        return sfl__fail(SFL_EINVAL, "secure aggregation: stage %u", st->stage);
    }
}

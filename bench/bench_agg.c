/* Coordinator aggregation cost against one plain pass, and bytes on the wire
 * per update against the information limit.
 *
 *   bench_agg [--quick] [--dense]
 *
 * n = 1000 updates of k = 1e4 nonzeros over d = 1e6 (--quick: 100 updates),
 * supports uniform k-subsets, values uniform in (-1, 1) (seeded). The
 * aggregation is what the coordinator runs per round through
 * server/job/model.c: sfl_fold_begin, the cohort's updates in slot order by
 * sfl_fold_add_many (tile by tile), then FedIter-HT's finish (average, then
 * H_tau with tau = k). agg_each is the previous path, sfl_fold_add per
 * update (still the streaming aggregation's), timed in the same run; the
 * two sums must be equal bit for bit. --dense: FedAvg, n = 50 dense updates
 * of d = k = 1e5 (bench-peer's dense case), no wire lines. The baseline
 * is one scatter-add pass acc[idx] += val over the same n * k index-value
 * pairs into a dense d-array, and a plain read pass over them. The ingest
 * figure is what the coordinator does per update before aggregate_add:
 * unpack the Update message, open and verify the sealed payload, unpack the
 * payload (decoding the sparse vector). Times are medians of 5 runs (ingest:
 * of 21 updates). Prints:
 *   bench_agg algo=... n=... k=... d=... agg_ms=... agg_each_ms=... pass_ms=...
 *             read_ms=... agg_over_pass=... agg_over_read=...
 *             agg_each_over_read=... ingest_ms_per_update=...
 *   bench_wire enc=... codec_bytes=... payload_bytes=... update_bytes=...
 *             limit_bytes=... codec_over_limit=... update_over_limit=...
 * where limit_bytes = (log2 C(d,k) + value_bits * k) / 8, value_bits 64 for
 * f64, 32 for f32, 8 for q8 plus q8's 16-byte range (lo, hi: information the
 * receiver needs), and update_bytes is the packed SubmitUpdate request
 * (sealed payload + envelope). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfl/algo/algo.h"
#include "sfl/core/alloc.h"
#include "sfl/model/loss.h"
#include "sfl/wire/msg.h"
#include "sfl/core/rng.h"
#include "sfl/crypto/seal.h"
#include "sfl/wire/spcodec.h"
#include "sfl/core/vec.h"

#define RUNS 5
#define INGEST_RUNS 21
#define WEIGHT 60.0 /* samples per agent: the aggregation weight */

/* Written after every pass so the compiler must compute it. */
static volatile double sink;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_u32(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return (a > b) - (a < b);
}

/* out[0..k) = a uniform k-subset of [0, d), sorted. Rejection on a mark
 * array: O(k log k) per call where sfl_rng_sample's O(d) pass would make
 * the setup dominate the run. mark (d bytes, zero) is left zero. */
static void sample_support(sfl_rng_t *rng, uint32_t d, uint32_t k, uint8_t *mark, uint32_t *out)
{
    uint32_t m = 0;

    while (m < k) {
        uint32_t i = (uint32_t)sfl_rng_below(rng, d);

        if (!mark[i]) {
            mark[i] = 1;
            out[m++] = i;
        }
    }
    for (uint32_t j = 0; j < k; j++)
        mark[out[j]] = 0;
    qsort(out, k, sizeof(*out), cmp_u32);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return t[n / 2];
}

/* acc[idx] += val over every pair: the arithmetic of aggregate_add with
 * weight 1, and nothing else. */
static void scatter_pass(sfl_spvec_t *const *u, size_t n, double *acc, size_t d)
{
    memset(acc, 0, d * sizeof(*acc));
    for (size_t i = 0; i < n; i++) {
        const uint32_t *idx = u[i]->idx;
        const double *val = u[i]->val;

        for (uint32_t j = 0; j < u[i]->nnz; j++)
            acc[idx[j]] += val[j];
    }
    sink = acc[u[0]->idx[0]];
}

/* sum of val + idx over every pair, two accumulators: the memory floor. */
static void read_pass(sfl_spvec_t *const *u, size_t n)
{
    double s0 = 0, s1 = 0;
    uint64_t si = 0;

    for (size_t i = 0; i < n; i++) {
        const uint32_t *idx = u[i]->idx;
        const double *val = u[i]->val;
        uint32_t j = 0;

        for (; j + 2 <= u[i]->nnz; j += 2) {
            s0 += val[j];
            s1 += val[j + 1];
            si += idx[j] + idx[j + 1];
        }
        for (; j < u[i]->nnz; j++)
            s0 += val[j];
    }
    sink = s0 + s1 + (double)si;
}

/* log2 C(d, k) */
static double log2_binom(double d, double k)
{
    return (lgamma(d + 1) - lgamma(k + 1) - lgamma(d - k + 1)) / log(2.0);
}

/* One update as an agent sends it and the coordinator ingests it: payload,
 * sealed and signed to a round key, in an Update envelope. Prints the wire
 * line for enc; for f64 also measures ingest into *ingest_ms. */
static int wire(const sfl_spvec_t *v, sfl_enc_t enc, const sfl_identity_t *id,
                const sfl_roundkey_t *rk, double *ingest_ms)
{
    static const char *const names[] = {"f64", "f32", "q8"};
    static const double bits[] = {64, 32, 8};
    sfl_payload_t pl = {0};
    sfl_update_t up = {0};
    sfl_upd_ctx_t ctx;
    sfl_msg_limits_t lim;
    uint8_t *pb = NULL, *sealed = NULL, *ub = NULL;
    size_t plen = 0, slen = 0, ulen = 0;
    double t[INGEST_RUNS];
    int rc;

    memset(&ctx, 0, sizeof(ctx));
    memcpy(ctx.round_pk, rk->pk, sizeof(ctx.round_pk));
    ctx.job = 1;
    ctx.round = 1;
    ctx.agent_id = 7;
    pl.update = (sfl_spvec_t *)v;
    pl.encoding = enc;
    pl.samples = (uint64_t)WEIGHT;
    pl.train_loss = 0.5;
    if ((rc = sfl_msg_payload_pack(&pl, &pb, &plen)) < 0)
        goto out;
    if ((sealed = malloc(sfl_seal_sealed_size(plen))) == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    if ((rc = sfl_seal_update(id, &ctx, pb, plen, sealed, sfl_seal_sealed_size(plen), &slen)) < 0)
        goto out;
    up.job_id = 1;
    up.round = 1;
    up.agent_id = 7;
    up.mode = SFL_UPDATE_MODE_SEALED;
    up.sealed = sealed;
    up.sealed_len = slen;
    if ((rc = sfl_msg_update_pack(&up, &ub, &ulen)) < 0)
        goto out;
    sfl_msg_limits_default(&lim);
    for (int r = 0; ingest_ms && r < INGEST_RUNS; r++) {
        sfl_update_t *got = NULL;
        sfl_payload_t *p = NULL;
        uint8_t *plain = NULL;
        size_t plain_len = 0;
        double t0 = now_ms();

        if ((rc = sfl_msg_update_unpack(ub, ulen, &lim, &got)) == 0 &&
            (rc = sfl_seal_open_update(rk, id->pk, &ctx, got->sealed, got->sealed_len,
                                       lim.max_message, &plain, &plain_len, NULL)) == 0)
            rc = sfl_msg_payload_unpack(plain, plain_len, &lim, v->dim, &p);
        t[r] = now_ms() - t0;
        if (rc == 0 && p->update->nnz != v->nnz)
            rc = SFL_EPARSE;
        sfl_msg_payload_free(p);
        sfl__free(plain);
        sfl_msg_update_free(got);
        if (rc < 0)
            goto out;
    }
    if (ingest_ms)
        *ingest_ms = median(t, INGEST_RUNS);
    double limit = (log2_binom(v->dim, v->nnz) + bits[enc] * v->nnz) / 8 +
                   (enc == SFL_ENC_Q8 ? 16 : 0);
    size_t codec = sfl_spcodec_size(v, enc);

    printf("bench_wire enc=%s k=%u d=%u codec_bytes=%zu payload_bytes=%zu update_bytes=%zu "
           "limit_bytes=%.0f codec_over_limit=%.4f update_over_limit=%.4f\n",
           names[enc], v->nnz, v->dim, codec, plen, ulen, limit, (double)codec / limit,
           (double)ulen / limit);
out:
    sfl_msg_buf_free(ub);
    free(sealed);
    sfl_msg_buf_free(pb);
    return rc;
}

int main(int argc, char **argv)
{
    size_t n = 1000;
    uint32_t d = 1000000, k = 10000;
    double t_agg[RUNS], t_each[RUNS], t_pass[RUNS], t_read[RUNS], ingest = 0;
    sfl_spvec_t **u = NULL;
    sfl_fold_item_t *items = NULL;
    double *global = NULL, *acc = NULL, *each = NULL;
    uint8_t *mark = NULL;
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    sfl_algo_params_t params;
    sfl_problem_t prob;
    sfl_fold_t agg;
    sfl_rng_t rng;
    const sfl_algo_t *algo = &sfl_algo_fediterht;
    int rc = 1, agg_open = 0, dense = 0;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) {
            n = n < 100 ? n : 100;
        } else if (strcmp(argv[a], "--dense") == 0) {
            dense = 1;
            algo = &sfl_algo_fedavg;
            n = 50;
            d = k = 100000;
        } else {
            fprintf(stderr, "usage: %s [--quick] [--dense]\n", argv[0]);
            return 2;
        }
    }
    sfl_algo_params_default(algo, &params);
    if ((!dense && sfl_algo_param_set(&params, "tau", k) != 0) ||
        sfl_problem_init(&prob, &sfl_loss_lsq, d, 0) != 0 ||
        sfl_algo_check(algo, &params, &prob) != 0 ||
        sfl_fold_init(&agg, algo, &params, &prob, NULL) != 0) {
        fprintf(stderr, "bench_agg: setup: %s\n", sfl_last_error());
        return 1;
    }
    agg_open = 1;
    u = calloc(n, sizeof(*u));
    global = calloc(d, sizeof(*global));
    acc = calloc(d, sizeof(*acc));
    each = calloc(d, sizeof(*each));
    items = calloc(n, sizeof(*items));
    mark = calloc(d, 1);
    if (u == NULL || global == NULL || acc == NULL || each == NULL || items == NULL ||
        mark == NULL)
        goto oom;
    sfl_rng_seed(&rng, 42, 0, 0, SFL_STREAM_DATA);
    for (size_t i = 0; i < n; i++) {
        if (sfl_spvec_new(d, k, &u[i]) != 0)
            goto oom;
        sample_support(&rng, d, k, mark, u[i]->idx);
        for (uint32_t j = 0; j < k; j++)
            u[i]->val[j] = 2 * sfl_rng_uniform(&rng) - 1;
        u[i]->nnz = k;
        items[i] = (sfl_fold_item_t){u[i], WEIGHT};
    }

    for (int r = 0; r < RUNS; r++) {
        double tb = now_ms();

        sfl_fold_begin(&agg);
        for (size_t i = 0; i < n; i++)
            if (sfl_fold_add(&agg, u[i], WEIGHT) != 0)
                goto fail;
        if (sfl_fold_finish(&agg, global) != 0)
            goto fail;
        double te = now_ms();

        memcpy(each, agg.sum, d * sizeof(*each));
        double t0 = now_ms();

        sfl_fold_begin(&agg);
        if (sfl_fold_add_many(&agg, items, n) != 0 || sfl_fold_finish(&agg, global) != 0)
            goto fail;
        double t1 = now_ms();

        if (memcmp(each, agg.sum, d * sizeof(*each)) != 0) {
            fprintf(stderr, "bench_agg: sfl_fold_add_many's sum differs from sfl_fold_add's\n");
            goto out;
        }
        double t1b = now_ms(); /* the check is not timed */

        scatter_pass(u, n, acc, d);
        double t2 = now_ms();

        read_pass(u, n);
        double t3 = now_ms();

        t_each[r] = te - tb;
        t_agg[r] = t1 - t0;
        t_pass[r] = t2 - t1b;
        t_read[r] = t3 - t2;
    }
    /* The pass doubles as a check: the global is H_k of the average. */
    if (!dense && sfl_dvec_nnz(global, d) != k) {
        fprintf(stderr, "bench_agg: the aggregate has %zu nonzeros, not %u\n",
                sfl_dvec_nnz(global, d), k);
        goto out;
    }

    if (dense)
        goto report;
    if (sfl_identity_generate(&id) != 0 || sfl_roundkey_new(&rk) != 0)
        goto fail;
    if (wire(u[0], SFL_ENC_F64, id, rk, &ingest) != 0 ||
        wire(u[0], SFL_ENC_F32, id, rk, NULL) != 0 || wire(u[0], SFL_ENC_Q8, id, rk, NULL) != 0)
        goto fail;

report:;
    double agg_ms = median(t_agg, RUNS), pass_ms = median(t_pass, RUNS);
    double read_ms = median(t_read, RUNS), each_ms = median(t_each, RUNS);

    printf("bench_agg algo=%s n=%zu k=%u d=%u agg_ms=%.3f agg_each_ms=%.3f pass_ms=%.3f "
           "read_ms=%.3f agg_over_pass=%.2f agg_over_read=%.2f agg_each_over_read=%.2f "
           "ingest_ms_per_update=%.3f\n",
           algo->name, n, k, d, agg_ms, each_ms, pass_ms, read_ms, agg_ms / pass_ms,
           agg_ms / read_ms, each_ms / read_ms, ingest);
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "bench_agg: out of memory\n");
    goto out;
fail:
    fprintf(stderr, "bench_agg: %s\n", sfl_last_error());
out:
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
    for (size_t i = 0; u && i < n; i++)
        sfl_spvec_free(u[i]);
    free(u);
    free(mark);
    free(acc);
    free(each);
    free(items);
    free(global);
    if (agg_open)
        sfl_fold_close(&agg);
    return rc;
}

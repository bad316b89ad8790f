/* bench_ingest: the coordinator's CPU per mode-1 update against its floor,
 * and the agent's cost of protecting one (issue 27, goal 2;
 * results/ingest.md).
 *
 *   bench_ingest [RUNS [signed]]
 *
 * With "signed", only the signed chain runs (after one signing), for a
 * profile of the path as it is now (perf record bench_ingest 200 signed).
 *
 * Two updates, f64: dense (d = 1e5, every coordinate) and sparse (k = 1e4,
 * d = 1e6). For each, in one run, interleaved, median of RUNS (default 15):
 *   floor   TLS 1.3 record decryption of the update's bytes (OpenSSL EVP
 *           AES-256-GCM, 16 KiB records) + one BLAKE2b of the payload +
 *           decode (sfl_msg_payload_unpack) + fold (acc[idx] += w * val)
 *   sealed  the coordinator's path before issue 27: TLS records of the
 *           sealed bytes + sfl_seal_open_update (X25519 + XSalsa20-Poly1305
 *           into a fresh buffer, then the signature) + decode + fold
 *   signed  the path now: TLS records of payload | sigma +
 *           sfl_seal_check_update in place (hash + Ed25519) + decode + fold
 * and on the agent sfl_seal_update (sign + seal) beside sfl_seal_sign_into
 * (sign). Printed as ratios to the floor; absolute ms beside them only to
 * read the ratios (shared machines: the load average is printed too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "sfl/core/alloc.h"
#include "sfl/core/rng.h"
#include "sfl/core/vec.h"
#include "sfl/crypto/seal.h"
#include "sfl/wire/msg.h"

#define REC 16384 /* TLS record plaintext */

static volatile double sink;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
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

static void die(const char *what)
{
    fprintf(stderr, "bench_ingest: %s: %s\n", what, sfl_last_error());
    exit(1);
}

/* TLS records of n bytes, encrypted once; tls_open decrypts them all into
 * out (as the record layer does into the connection's buffer). */
typedef struct {
    uint8_t key[32], iv[12];
    uint8_t *ct, *tags;
    size_t n;
    EVP_CIPHER_CTX *ctx;
} records_t;

static void records_make(records_t *r, const uint8_t *pt, size_t n)
{
    int len;

    memset(r, 0, sizeof(*r));
    memset(r->key, 0x5a, sizeof(r->key));
    r->n = n;
    r->ct = malloc(n);
    r->tags = malloc((n / REC + 1) * 16);
    r->ctx = EVP_CIPHER_CTX_new();
    if (r->ct == NULL || r->tags == NULL || r->ctx == NULL)
        exit(1);
    for (size_t off = 0, i = 0; off < n; off += REC, i++) {
        size_t m = n - off < REC ? n - off : REC;

        memcpy(r->iv, &i, sizeof(i));
        EVP_EncryptInit_ex(r->ctx, EVP_aes_256_gcm(), NULL, r->key, r->iv);
        EVP_EncryptUpdate(r->ctx, r->ct + off, &len, pt + off, (int)m);
        EVP_EncryptFinal_ex(r->ctx, r->ct + off + len, &len);
        EVP_CIPHER_CTX_ctrl(r->ctx, EVP_CTRL_GCM_GET_TAG, 16, r->tags + 16 * i);
    }
}

static void records_open(records_t *r, uint8_t *out)
{
    int len;

    for (size_t off = 0, i = 0; off < r->n; off += REC, i++) {
        size_t m = r->n - off < REC ? r->n - off : REC;

        memcpy(r->iv, &i, sizeof(i));
        EVP_DecryptInit_ex(r->ctx, EVP_aes_256_gcm(), NULL, r->key, r->iv);
        EVP_DecryptUpdate(r->ctx, out + off, &len, r->ct + off, (int)m);
        EVP_CIPHER_CTX_ctrl(r->ctx, EVP_CTRL_GCM_SET_TAG, 16, r->tags + 16 * i);
        if (EVP_DecryptFinal_ex(r->ctx, out + off + len, &len) != 1) {
            fprintf(stderr, "bench_ingest: record %zu does not open\n", i);
            exit(1);
        }
    }
}

static void fold(const uint8_t *pl, size_t n, uint32_t d, double *acc)
{
    sfl_payload_t *p = NULL;

    if (sfl_msg_payload_unpack(pl, n, NULL, d, &p) < 0)
        die("unpack");
    for (uint32_t j = 0; j < p->update->nnz; j++)
        acc[p->update->idx[j]] += (double)p->samples * p->update->val[j];
    sink = acc[p->update->idx[0]];
    sfl_msg_payload_free(p);
}

static void run_case(const char *name, uint32_t d, uint32_t k, int runs, int only)
{
    sfl_identity_t *id = NULL;
    sfl_roundkey_t *rk = NULL;
    sfl_spvec_t *v = NULL;
    sfl_upd_ctx_t ctx;
    sfl_payload_t p;
    sfl_rng_t rng;
    uint8_t *pl = NULL, *sealed, *sgn, *rx, h[SFL_SEAL_HASH_BYTES];
    size_t plen = 0, slen = 0, glen = 0, n;
    records_t rs, rg;
    double *t[5], *acc = calloc(d, sizeof(double));
    double load[3] = {0, 0, 0};
    FILE *f;

    for (int i = 0; i < 5; i++)
        if ((t[i] = calloc((size_t)runs, sizeof(double))) == NULL)
            exit(1);
    if (acc == NULL || sfl_identity_generate(&id) < 0 || sfl_roundkey_new(&rk) < 0 ||
        sfl_spvec_new(d, k, &v) < 0)
        die("setup");
    sfl_rng_seed(&rng, 27, 0, 0, 0);
    for (uint32_t j = 0; j < k; j++) {
        v->idx[j] = (uint32_t)((uint64_t)j * d / k);
        v->val[j] = sfl_rng_uniform(&rng) - 0.5;
    }
    v->nnz = k;
    memset(&p, 0, sizeof(p));
    p.update = v;
    p.encoding = SFL_ENC_F64;
    p.samples = 60;
    if (sfl_msg_payload_pack(&p, &pl, &plen) < 0)
        die("pack");
    memset(&ctx, 0, sizeof(ctx));
    memcpy(ctx.round_pk, rk->pk, sizeof(ctx.round_pk));
    ctx.job = 1;
    ctx.round = 3;
    ctx.agent_id = 7;
    sealed = malloc(sfl_seal_sealed_size(plen));
    sgn = malloc(sfl_seal_signed_size(plen));
    rx = malloc(sfl_seal_sealed_size(plen));
    if (sealed == NULL || sgn == NULL || rx == NULL)
        exit(1);
    for (int r = 0; r < (only ? 1 : runs); r++) {
        double t0 = now_ms();

        if (sfl_seal_update(id, &ctx, pl, plen, sealed, sfl_seal_sealed_size(plen), &slen) < 0)
            die("seal");
        double t1 = now_ms();

        if (sfl_seal_sign_into(id, &ctx, pl, plen, sgn, sfl_seal_signed_size(plen), &glen) < 0)
            die("sign");
        t[3][r] = t1 - t0;
        t[4][r] = now_ms() - t1;
    }
    records_make(&rs, sealed, slen);
    records_make(&rg, sgn, glen);
    for (int r = 0; r < runs; r++) {
        uint8_t *open = NULL;
        double t0 = now_ms();

        if (only) {
            records_open(&rg, rx);
            if (sfl_seal_check_update(id->pk, &ctx, rx, glen, plen, NULL, &n) < 0)
                die("check");
            fold(rx, n, d, acc);
            continue;
        }
        /* floor */
        records_open(&rg, rx);
        sfl_seal_hash(rx, plen, h);
        fold(rx, plen, d, acc);
        double t1 = now_ms();

        /* sealed: before issue 27 */
        records_open(&rs, rx);
        if (sfl_seal_open_update(rk, id->pk, &ctx, rx, slen, plen, &open, &n, NULL) < 0)
            die("open");
        fold(open, n, d, acc);
        sfl__free(open);
        double t2 = now_ms();

        /* signed: now */
        records_open(&rg, rx);
        if (sfl_seal_check_update(id->pk, &ctx, rx, glen, plen, NULL, &n) < 0)
            die("check");
        fold(rx, n, d, acc);
        double t3 = now_ms();

        t[0][r] = t1 - t0;
        t[1][r] = t2 - t1;
        t[2][r] = t3 - t2;
    }
    f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
            load[0] = -1;
        fclose(f);
    }
    if (only) {
        printf("bench_ingest case=%s signed chain only: %d runs\n", name, runs);
        goto out;
    }
    double fl = median(t[0], runs), se = median(t[1], runs), si = median(t[2], runs);
    double as = median(t[3], runs), ag = median(t[4], runs);

    printf("bench_ingest case=%s d=%u k=%u payload_bytes=%zu coord: floor_ms=%.3f sealed_ms=%.3f "
           "signed_ms=%.3f sealed/floor=%.2f signed/floor=%.2f | agent: seal_ms=%.3f sign_ms=%.3f "
           "seal/sign=%.2f | load=%.2f runs=%d\n",
           name, d, k, plen, fl, se, si, se / fl, si / fl, as, ag, as / ag, load[0], runs);
out:
    EVP_CIPHER_CTX_free(rs.ctx);
    EVP_CIPHER_CTX_free(rg.ctx);
    free(rs.ct);
    free(rs.tags);
    free(rg.ct);
    free(rg.tags);
    for (int i = 0; i < 5; i++)
        free(t[i]);
    free(sealed);
    free(sgn);
    free(rx);
    free(acc);
    sfl_msg_buf_free(pl);
    sfl_spvec_free(v);
    sfl_roundkey_free(rk);
    sfl_identity_free(id);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 15;
    int only = argc > 2 && strcmp(argv[2], "signed") == 0;

    if (runs < 1)
        runs = 1;
    run_case("dense", 100000, 100000, runs, only);
    run_case("sparse", 1000000, 10000, runs, only);
    return 0;
}

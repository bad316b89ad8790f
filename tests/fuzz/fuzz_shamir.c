/* libFuzzer: the checks the coordinator runs on what dealers and holders
 * send at the end of a secure aggregation round (sfl/crypto/shamir.h): Feldman
 * commitments and released shares, both from peers. Byte 0 picks the mode:
 *   0  u8 t | u8 k | t commitments (32 bytes each, as sent) | k shares
 *      (u16 x | y[32]): sfl_shamir_verify on anything; when it says every
 *      share is good (and k >= t) the first t combine to a secret that
 *      passes sfl_shamir_commit_check against the first commitment
 *   1  u8 t | u8 k | t coefficients (32 bytes, reduced mod L; 0 read as 1) |
 *      k x steps (u8, x_i = x_{i-1} + step + 1) | u16 tamper bitmap | k
 *      deltas (u8): an honest dealer's commitments and shares, then the
 *      shares in the bitmap get y + delta + 1. sfl_shamir_verify must flag
 *      exactly those, and the secret must pass its commitment check;
 *      sfl_shamir_agree (k >= t) must pass untouched shares and refuse 1 to
 *      k - t tampered ones (fewer than the code's distance; more may happen
 *      to agree, e.g. all moved by one constant)
 * Missing bytes read as 0. The check's weights are random, so a bad share
 * passes by chance with probability 2^-252: never, in practice. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "sfl/crypto/shamir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TMAX 8
#define KMAX 16

typedef struct {
    const uint8_t *d;
    size_t n, at;
} rd_t;

static uint8_t u8(rd_t *r)
{
    return r->at < r->n ? r->d[r->at++] : 0;
}

static void bytes(rd_t *r, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = u8(r);
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz_shamir: %s\n", what);
    abort();
}

static void raw(rd_t *r)
{
    uint8_t commit[TMAX][SFL_SHAMIR_POINT], work[TMAX][SFL_SHAMIR_BYTES], ok[KMAX];
    uint8_t secret[SFL_SHAMIR_BYTES];
    sfl_share_t sh[KMAX];
    uint32_t t = 1 + u8(r) % TMAX, k = 1 + u8(r) % KMAX;
    int rc;

    for (uint32_t j = 0; j < t; j++)
        bytes(r, commit[j], SFL_SHAMIR_POINT);
    for (uint32_t i = 0; i < k; i++) {
        sh[i].x = (uint16_t)(u8(r) | u8(r) << 8);
        bytes(r, sh[i].y, SFL_SHAMIR_BYTES);
    }
    rc = sfl_shamir_verify(sh, k, (const uint8_t (*)[SFL_SHAMIR_POINT])commit, t, work, ok);
    if (rc != 0 && rc != SFL_EBADSIG && rc != SFL_EINVAL)
        die("verify: an unexpected error");
    if (rc == 0 && k >= t) {
        if (sfl_shamir_combine(sh, t, secret) != 0)
            die("shares that verify do not combine");
        if (sfl_shamir_commit_check(secret, commit[0]) != 0)
            die("shares that verify miss their commitment");
    }
}

static void honest(rd_t *r)
{
    uint8_t a[TMAX][SFL_SHAMIR_BYTES], commit[TMAX][SFL_SHAMIR_POINT];
    uint8_t work[TMAX][SFL_SHAMIR_BYTES], ok[KMAX], wide[64], xs[32], tmp[32];
    uint8_t agree[2 * KMAX][SFL_SHAMIR_BYTES];
    sfl_share_t sh[KMAX];
    uint32_t t = 1 + u8(r) % TMAX, k = 1 + u8(r) % KMAX, x = 0, bad = 0;
    uint16_t tamper;
    int rc;

    for (uint32_t j = 0; j < t; j++) {
        memset(wide, 0, sizeof(wide));
        bytes(r, wide, 32);
        crypto_core_ed25519_scalar_reduce(a[j], wide);
        if (sodium_is_zero(a[j], 32))
            a[j][0] = 1;
        if (crypto_scalarmult_ed25519_base_noclamp(commit[j], a[j]) != 0)
            die("a nonzero coefficient has no commitment");
    }
    for (uint32_t i = 0; i < k; i++) {
        x += 1u + u8(r);
        sh[i].x = (uint16_t)x;
        /* y = f(x) by Horner */
        memset(xs, 0, sizeof(xs));
        xs[0] = (uint8_t)x;
        xs[1] = (uint8_t)(x >> 8);
        memcpy(sh[i].y, a[t - 1], 32);
        for (uint32_t j = t - 1; j-- > 0;) {
            crypto_core_ed25519_scalar_mul(tmp, sh[i].y, xs);
            crypto_core_ed25519_scalar_add(sh[i].y, tmp, a[j]);
        }
    }
    tamper = (uint16_t)(u8(r) | u8(r) << 8);
    for (uint32_t i = 0; i < k; i++) {
        uint8_t delta[32] = {0};

        delta[0] = (uint8_t)(u8(r) + 1); /* 1..256: never 0 */
        if (delta[0] == 0)
            delta[0] = 1, delta[1] = 1;
        if (tamper & (1u << i)) {
            crypto_core_ed25519_scalar_add(tmp, sh[i].y, delta);
            memcpy(sh[i].y, tmp, 32);
            bad++;
        }
    }
    rc = sfl_shamir_verify(sh, k, (const uint8_t (*)[SFL_SHAMIR_POINT])commit, t, work, ok);
    if (rc != (bad ? SFL_EBADSIG : 0))
        die("verify's verdict is not the tampering's");
    for (uint32_t i = 0; i < k; i++)
        if (ok[i] != !(tamper & (1u << i)))
            die("verify flagged the wrong shares");
    if (sfl_shamir_commit_check(a[0], commit[0]) != 0)
        die("the secret misses its commitment");
    if (k >= t) {
        rc = sfl_shamir_agree(sh, k, t, agree);
        if (bad == 0 && rc != 0)
            die("agree refused the shares of one polynomial");
        if (bad >= 1 && bad <= k - t && rc != SFL_EBADSIG)
            die("agree passed shares a few of which were moved");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd_t r = {data, size, 1};

    if (size < 1 || sodium_init() < 0)
        return 0;
    if (data[0] % 2 == 0)
        raw(&r);
    else
        honest(&r);
    return 0;
}

/* sfl-hostile: a hostile member for tests/e2e/sa_hostile.sh. It is a real
 * agent (client-agent's library: Join over mutual TLS, Subscribe, training,
 * the whole secure-aggregation protocol through sagent.c) that tampers with
 * its own mode-2 answers through sagent.h's test hook, re-signing what it
 * changed with its own identity key so that every message is one it could
 * have sent honestly:
 *
 *   --attack commit   stage 2: a signed commitment that is not of its r_b
 *                     (the seed its holders rebuild fails it at the unmask)
 *   --attack weight   stage 3: its plaintext weight word -2^30 (masks are
 *                     additive, so the masked word is shifted by the
 *                     difference); with no weight word, harmless
 *   --attack input    stage 3: garbage added to its masked values
 *   --attack box      stage 2: every share box's ciphertext corrupted (the
 *                     boxes are not signed: a holder cannot open its box)
 *   --attack samples  declares 1e9 samples at Join
 *   --attack none     no tampering: the control
 *
 * Every other option is sfl-agent's (--config FILE, --KEY VALUE). Each
 * tampered answer is logged on stderr as "sfl-hostile event=tampered
 * attack=... stage=... round=...". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <uv.h>

#include "agent.h"
#include "config.h"
#include "sagent.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "sfl/crypto/savec.h"
#include "sfl/crypto/seal.h"
#include "sfl/crypto/secagg.h"

/* The contexts sfl/crypto/secagg.h's client signs under (libsfl/src/crypto/secagg.c):
 * a test double must sign what it changed as an honest client would. */
#define CTX_SHARES "sfl-sa-shares-v2"
#define CTX_INPUT "sfl-sa-input-v1"

typedef enum { A_COMMIT, A_WEIGHT, A_INPUT, A_BOX, A_SAMPLES, A_NONE } attack_t;

static const char *const attack_names[] = {"commit", "weight", "input", "box", "samples",
                                           "none"};

static struct {
    attack_t attack;
    uint8_t sid[SFL_SA_HASH]; /* the round's session id, from stage 2's keys */
    uint64_t sid_round;
    uint32_t sid_attempt;
    int has_sid;
} H;

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void tampered(const sfl_msg_sa_answer_t *m)
{
    fprintf(stderr, "sfl-hostile event=tampered attack=%s stage=%u round=%llu attempt=%u\n",
            attack_names[H.attack], m->stage, (unsigned long long)m->round, m->attempt);
}

/* sid from the round and U1 (stage 2's keys, in the order sent), as the
 * client computes it. */
static int session_id(const sfl_sa_round_t *r, const sfl_msg_sa_stage_t *st)
{
    sfl_sa_adv_t *u1 = calloc(st->nkeys ? st->nkeys : 1, sizeof(*u1));

    if (u1 == NULL)
        return -1;
    for (uint32_t i = 0; i < st->nkeys; i++) {
        u1[i].id = st->keys[i].agent_id;
        memcpy(u1[i].c_pk, st->keys[i].c_pk, 32);
        memcpy(u1[i].s_pk, st->keys[i].s_pk, 32);
    }
    sfl_sa_session_id(r, u1, st->nkeys, H.sid);
    free(u1);
    H.sid_round = r->round;
    H.sid_attempt = r->attempt;
    H.has_sid = 1;
    return 0;
}

/* sig over sid | id | BLAKE2b-256(words little-endian): stage 3's. */
static int sign_input(const sfl_identity_t *ident, sfl_msg_sa_answer_t *m)
{
    uint8_t msg[SFL_SA_HASH + 8 + SFL_SA_HASH], w[4];
    crypto_generichash_state st;

    memcpy(msg, H.sid, SFL_SA_HASH);
    put64(msg + SFL_SA_HASH, m->agent_id);
    crypto_generichash_init(&st, NULL, 0, SFL_SA_HASH);
    for (uint32_t i = 0; i < m->nmasked; i++) {
        for (int k = 0; k < 4; k++)
            w[k] = (uint8_t)(m->masked[i] >> (8 * k));
        crypto_generichash_update(&st, w, 4);
    }
    crypto_generichash_final(&st, msg + SFL_SA_HASH + 8, SFL_SA_HASH);
    return sfl_seal_sign_detached(ident, CTX_INPUT, msg, sizeof(msg), m->sig);
}

static void on_answer(void *ud, const sfl_sa_round_t *r, const sfl_msg_sa_stage_t *st,
                      const sfl_identity_t *ident, const uint32_t *q, sfl_msg_sa_answer_t *m)
{
    (void)ud;
    if (m->stage == 2 && st != NULL && session_id(r, st) < 0)
        return;
    switch (H.attack) {
    case A_COMMIT:
        if (m->stage == 2 && m->ncommits > 0) {
            /* C_0 of r_b's polynomial replaced by another point of the
             * group, the commitments signed again: a commitment that is not
             * of its r_b, which its shares then all miss */
            uint8_t sc[crypto_core_ed25519_SCALARBYTES], *msg;
            size_t len = SFL_SA_HASH + 16 + (size_t)m->ncommits * SFL_MSG_SA_POINT;

            if ((msg = malloc(len)) == NULL)
                break;
            crypto_core_ed25519_scalar_random(sc);
            if (crypto_scalarmult_ed25519_base_noclamp(m->commits[0], sc) != 0) {
                free(msg);
                break;
            }
            memcpy(msg, H.sid, SFL_SA_HASH);
            put64(msg + SFL_SA_HASH, m->agent_id);
            put64(msg + SFL_SA_HASH + 8, m->ncommits);
            memcpy(msg + SFL_SA_HASH + 16, m->commits, (size_t)m->ncommits * SFL_MSG_SA_POINT);
            if (sfl_seal_sign_detached(ident, CTX_SHARES, msg, len, m->sig) == 0)
                tampered(m);
            free(msg);
        }
        break;
    case A_WEIGHT:
    case A_INPUT:
        if (m->stage == 3 && q != NULL && H.has_sid && H.sid_round == r->round &&
            H.sid_attempt == r->attempt && m->nmasked >= SFL_MSG_SA_EXTRA) {
            uint32_t k = m->nmasked - SFL_MSG_SA_EXTRA;

            if (H.attack == A_WEIGHT) {
#if SFL_MSG_SA_EXTRA == 2 + SFL_SA_METRIC_WORDS
                /* the layout of sfl/crypto/savec.h with its weight word: k values,
                 * the weight, the canary, the metrics. Plaintext word k (the
                 * weight) becomes -2^30. */
                m->masked[k] += (uint32_t)0xc0000000u - q[k];
#else
                /* no weight word in the input any more: nothing to aim at */
                fprintf(stderr, "sfl-hostile event=no_weight_word\n");
                break;
#endif
            } else {
                for (uint32_t i = 0; i < k; i++)
                    m->masked[i] += randombytes_random();
            }
            if (sign_input(ident, m) == 0)
                tampered(m);
        }
        break;
    case A_BOX:
        if (m->stage == 2 && m->nboxes > 0) {
            for (uint32_t i = 0; i < m->nboxes; i++)
                m->boxes[i].ct[i % 16] ^= 0x5a;
            tampered(m);
        }
        break;
    case A_SAMPLES:
    case A_NONE:
        break;
    }
}

static agent_sa_hooks_t hooks = {.answer = on_answer};

static void usage(const char *why)
{
    fprintf(stderr, "sfl-hostile: %s\nusage: sfl-hostile --attack commit|weight|input|box|samples|none "
            "[sfl-agent options]\n", why);
    exit(2);
}

static agent_ctx_t *the_agent;
static uv_signal_t sig_term, sig_int;

static void on_stopped(agent_ctx_t *a, void *ud)
{
    (void)a;
    (void)ud;
    uv_close((uv_handle_t *)&sig_term, NULL);
    uv_close((uv_handle_t *)&sig_int, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    agent_stop(the_agent, on_stopped, NULL);
}

int main(int argc, char **argv)
{
    agent_config_t cfg;
    uv_loop_t *loop;
    int rc, attack = -1;

    agent_config_default(&cfg);
    /* --attack and --config first; then the other flags over the file. */
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0 || i + 1 >= argc)
            usage("want --KEY VALUE pairs");
        if (strcmp(argv[i], "--attack") == 0) {
            for (int a = 0; a < (int)(sizeof(attack_names) / sizeof(attack_names[0])); a++)
                if (strcmp(argv[i + 1], attack_names[a]) == 0)
                    attack = a;
            if (attack < 0)
                usage("unknown attack");
        } else if (strcmp(argv[i], "--config") == 0 &&
                   agent_config_load(&cfg, argv[i + 1]) < 0)
            usage(sfl_last_error());
        i++;
    }
    if (attack < 0)
        usage("--attack is required");
    for (int i = 1; i < argc; i += 2) {
        const char *key = argv[i] + 2;

        if (strcmp(key, "attack") == 0 || strcmp(key, "config") == 0)
            continue;
        if (!agent_config_known(key) || agent_config_set(&cfg, key, argv[i + 1]) < 0)
            usage(sfl_last_error());
    }
    if (agent_config_check(&cfg) < 0)
        usage(sfl_last_error());
    H.attack = (attack_t)attack;
    if (H.attack == A_SAMPLES)
        agent_test_join_samples = 1000000000u;
    agent_sa_test_hooks = &hooks;
    fprintf(stderr, "sfl-hostile event=armed attack=%s\n", attack_names[H.attack]);

    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    if ((rc = agent_new(loop, &cfg, &the_agent)) < 0) {
        fprintf(stderr, "sfl-hostile event=start_failed error=\"%s\"\n", sfl_error_message(rc));
        return 1;
    }
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    agent_set_fatal(the_agent, on_stopped, NULL);
    if ((rc = agent_start(the_agent)) < 0) {
        fprintf(stderr, "sfl-hostile event=start_failed error=\"%s\"\n", uv_strerror(rc));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    rc = agent_failed(the_agent);
    agent_free(the_agent);
    (void)uv_loop_close(loop);
    return rc < 0 ? 1 : 0;
}

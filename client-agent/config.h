/* sfl-agent configuration: agent.ini's [agent] section, every key also a
 * command-line flag (--key value). Documented in docs/configuration.md. */
#ifndef AGENT_CONFIG_H
#define AGENT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "sfl/core/error.h"
#include "sfl/core/log.h"

#define AGENT_PATH_MAX 1024
#define AGENT_COLLUDERS_THIRD UINT64_MAX /* secagg_max_colluders = n/3 (the default) */
#define AGENT_MAX_CONDITIONS 8
/* addresses in coordinator = A,B,... */
#define AGENT_MAX_COORDINATORS 8
/* How to get the right coordinator_pk, for errors about it. */
#define AGENT_PK_HINT                                                                  \
    "on the coordinator, 'sfl-coordinator --config FILE --public-key' prints the key " \
    "to pin"

typedef struct agent_config {
    char coordinator[1024];    /* host:port[,host:port...]: at most AGENT_MAX_COORDINATORS */
    char server_name[256];     /* name in the coordinator certificate */
    char ca[AGENT_PATH_MAX];   /* federation CA (PEM) */
    char cert[AGENT_PATH_MAX]; /* this agent's certificate (PEM) */
    char key[AGENT_PATH_MAX];  /* its TLS private key (PEM) */
    char state_dir[AGENT_PATH_MAX]; /* identity key and client state live here */
    char coordinator_pk[65];   /* pinned Ed25519 key of the coordinator, hex */
    char data[AGENT_PATH_MAX]; /* libsvm:FILE or csv:FILE */
    char eval_file[AGENT_PATH_MAX]; /* held-out rows, same form; "" = none */
    double eval_fraction;      /* [0, 1): rows of data held out; 0 = none */
    uint32_t nconditions;
    char conditions[AGENT_MAX_CONDITIONS][32];
    uint64_t backoff_min_ms, backoff_max_ms; /* reconnect backoff, jittered */
    uint64_t connect_timeout_ms, heartbeat_ms;
    /* Vertical data (client-agent/vertical.h): the block's first problem
     * column (1-based) and width, 0 0 for whole rows; its sample ids. */
    uint32_t block_first, block_cols;
    char ids_file[AGENT_PATH_MAX];
    double max_epsilon;        /* 0: no limit of the agent's own */
    uint64_t dp_test_noise;    /* 1: seeded privacy noise (tests only) */
    uint64_t secagg_test_stop; /* tests only: SIGKILL itself at this secure
                                  aggregation stage (1..5); 0 = never */
    uint64_t secagg_min_cohort, secagg_min_threshold, secagg_min_degree; /* the agent's floor */
    uint64_t secagg_max_colluders; /* c: t > (n + c) / 2; AGENT_COLLUDERS_THIRD: n / 3 */
    uint64_t secagg_test_weight;   /* tests only: scale the input as if this were the
                                      agent's public weight (a hostile member); 0 = never */
    sfl_log_level_t log_level; /* lines below it are not written [info] */
} agent_config_t;

void agent_config_default(agent_config_t *c);
/* One key = value; SFL_EINVAL with a detail naming the key otherwise. */
int agent_config_set(agent_config_t *c, const char *key, const char *value) SFL_MUST_CHECK;
/* 1 if key is an agent key (a flag --key), else 0. */
int agent_config_known(const char *key);
/* Adds every key agent_config_known knows to sg (an unknown flag's
 * suggestion, sfl/core/suggest.h). */
struct sfl_suggest;
void agent_config_suggest(struct sfl_suggest *sg);
/* Reads an INI file ([agent] section only) with sfl_ini_parse_file: errors
 * name file, line and key ("agent.ini:3: unknown key 'cert_file'"). */
int agent_config_load(agent_config_t *c, const char *path) SFL_MUST_CHECK;
/* The same over buf[0..len) (borrowed), errors named after name. */
int agent_config_parse(agent_config_t *c, const char *name, const char *buf,
                       size_t len) SFL_MUST_CHECK;
/* Everything needed to run is present and consistent. */
int agent_config_check(const agent_config_t *c) SFL_MUST_CHECK;

#endif

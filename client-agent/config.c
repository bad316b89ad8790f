#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/cfgkey.h"
#include "sfl/data/dataset.h"
#include "sfl/core/ini.h"
#include "sfl/core/suggest.h"

/* The keys with a string or a whole number (sfl/core/cfgkey.h); the others
 * are parsed by hand in agent_config_set. Checks across keys are
 * agent_config_check's; --help is main_agent.c's (it interleaves these with
 * the hand-parsed keys). */
#define S(k, f, def) SFL_CFG_S(k, agent_config_t, f, def, "", "")
#define N(k, f, def) SFL_CFG_N(k, agent_config_t, f, def, 0, UINT64_MAX, "", "")
static const sfl_cfg_key_t keys[] = {
    S("coordinator", coordinator, ""),
    S("server_name", server_name, ""),
    S("ca", ca, ""),
    S("cert", cert, ""),
    S("key", key, ""),
    S("state_dir", state_dir, "/var/lib/sfl-agent"),
    S("coordinator_pk", coordinator_pk, ""),
    S("data", data, ""),
    S("eval_file", eval_file, ""),
    S("ids_file", ids_file, ""),
    N("backoff_min_ms", backoff_min_ms, "500"),
    N("backoff_max_ms", backoff_max_ms, "60000"),
    N("connect_timeout_ms", connect_timeout_ms, "10000"),
    N("heartbeat_interval_ms", heartbeat_ms, "10000"),
    N("dp_test_noise", dp_test_noise, "0"),
    N("secagg_test_stop", secagg_test_stop, "0"),
    N("secagg_min_cohort", secagg_min_cohort, "3"),
    N("secagg_min_threshold", secagg_min_threshold, "2"),
    N("secagg_min_degree", secagg_min_degree, "16"),
    N("secagg_max_colluders", secagg_max_colluders, ""), /* n/3: AGENT_COLLUDERS_THIRD */
    N("secagg_test_weight", secagg_test_weight, "0"),
};
#undef S
#undef N

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void agent_config_default(agent_config_t *c)
{
    memset(c, 0, sizeof(*c));
    sfl_cfg_defaults(keys, NKEYS, c);
    c->secagg_max_colluders = AGENT_COLLUDERS_THIRD;
    c->log_level = SFL_LOG_INFO;
}

/* Names a key had before it got the one the coordinator uses for the same
 * concept (docs/configuration.md); they still read as the key. */
static const struct {
    const char *old, *key;
} aliases[] = {
    {"heartbeat_ms", "heartbeat_interval_ms"},
};

static const char *canonical(const char *key)
{
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(key, aliases[i].old) == 0)
            return aliases[i].key;
    return key;
}

int agent_config_set(agent_config_t *c, const char *key, const char *v)
{
    const char *k = canonical(key);
    int rc;

    if (strcmp(k, "secagg_max_colluders") == 0 && strcmp(v, "n/3") == 0) {
        c->secagg_max_colluders = AGENT_COLLUDERS_THIRD;
        return 0;
    }
    if ((rc = sfl_cfg_set(keys, NKEYS, c, k, v)) <= 0) {
        if (rc < 0 && k != key) /* the detail names the key as given */
            return sfl__fail(rc, "%s: invalid value '%s'", key, v);
        return rc;
    }
    if (strcmp(key, "eval_fraction") == 0 || strcmp(key, "max_epsilon") == 0) {
        int frac = key[0] == 'e';
        char *end;
        double x;

        errno = 0;
        x = strtod(v, &end);
        if (*v == '\0' || *end || errno || !(x >= 0 && (frac ? x < 1 : x < HUGE_VAL)))
            return sfl__fail(SFL_EINVAL, "%s: '%s' is not a number in [0, %s)", key, v,
                             frac ? "1" : "inf");
        *(frac ? &c->eval_fraction : &c->max_epsilon) = x;
        return 0;
    }
    if (strcmp(key, "block") == 0) {
        unsigned long first, cols;
        char *end, *end2 = NULL;

        errno = 0;
        first = strtoul(v, &end, 10);
        cols = *end == ':' ? strtoul(end + 1, &end2, 10) : 0;
        if (*v < '1' || *v > '9' || *end != ':' || end[1] < '1' || end[1] > '9' || *end2 ||
            errno || first > UINT32_MAX || cols > UINT32_MAX || first - 1 + cols > UINT32_MAX)
            return sfl__fail(SFL_EINVAL, "block: '%s' is not FIRST:COUNT (the 1-based problem "
                             "column of the data's first column, and its number of columns)",
                             v);
        c->block_first = (uint32_t)first;
        c->block_cols = (uint32_t)cols;
        return 0;
    }
    if (strcmp(key, "log_level") == 0)
        return sfl_log_level_parse(v, &c->log_level);
    if (strcmp(key, "conditions") == 0) {
        const char *p = v;

        c->nconditions = 0;
        while (*p) {
            size_t n = strcspn(p, ",");

            if (n == 0 || n >= sizeof(c->conditions[0]) || c->nconditions == AGENT_MAX_CONDITIONS)
                return sfl__fail(SFL_EINVAL, "conditions: at most %d names of 1..31 characters",
                                 AGENT_MAX_CONDITIONS);
            memcpy(c->conditions[c->nconditions], p, n);
            c->conditions[c->nconditions++][n] = '\0';
            p += n + (p[n] == ',');
        }
        return 0;
    }
    return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
}

void agent_config_suggest(sfl_suggest_t *sg)
{
    static const char *const by_hand[] = {"eval_fraction", "conditions", "max_epsilon", "block"};

    for (size_t i = 0; i < NKEYS; i++)
        sfl_suggest_add(sg, keys[i].key);
    for (size_t i = 0; i < sizeof(by_hand) / sizeof(by_hand[0]); i++)
        sfl_suggest_add(sg, by_hand[i]);
}

int agent_config_known(const char *key)
{
    key = canonical(key);
    if (sfl_cfg_find(keys, NKEYS, key) != NULL)
        return 1;
    /* The keys agent_config_set parses by hand. */
    return strcmp(key, "eval_fraction") == 0 || strcmp(key, "conditions") == 0 ||
           strcmp(key, "max_epsilon") == 0 || strcmp(key, "block") == 0 ||
           strcmp(key, "log_level") == 0;
}

static int on_key(void *ud, const char *section, const char *key, const char *value)
{
    if (strcmp(section, "agent") != 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [agent])", section);
    return agent_config_set(ud, key, value);
}

int agent_config_load(agent_config_t *c, const char *path)
{
    return sfl_ini_parse_file(path, on_key, c);
}

int agent_config_parse(agent_config_t *c, const char *name, const char *buf, size_t len)
{
    return sfl_ini_parse_buffer(name, buf ? buf : "", len, on_key, c);
}

int agent_config_check(const agent_config_t *c)
{
    static const char *const need[] = {"coordinator", "ca", "cert", "key", "coordinator_pk",
                                       "data"};
    const char *have[] = {c->coordinator, c->ca, c->cert, c->key, c->coordinator_pk, c->data};

    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (have[i][0] == '\0')
            return sfl__fail(SFL_EINVAL, "missing required setting '%s'", need[i]);
    if (strchr(c->coordinator, ':') == NULL)
        return sfl__fail(SFL_EINVAL, "coordinator must be host:port, got '%s'", c->coordinator);
    if (strlen(c->coordinator_pk) != 64 ||
        strspn(c->coordinator_pk, "0123456789abcdefABCDEF") != 64)
        return sfl__fail(SFL_EINVAL, "coordinator_pk must be 64 hex digits; " AGENT_PK_HINT);
    if (sfl_dataset_spec_check(c->data) < 0)
        return sfl__fail(SFL_EINVAL, "data must be " SFL_DATASET_SPEC_FORMS);
    if (c->eval_file[0] != '\0' && sfl_dataset_spec_check(c->eval_file) < 0)
        return sfl__fail(SFL_EINVAL, "eval_file must be " SFL_DATASET_SPEC_FORMS);
    if (c->eval_file[0] != '\0' && c->eval_fraction > 0)
        return sfl__fail(SFL_EINVAL, "eval_file and eval_fraction exclude each other");
    if ((c->block_first != 0) != (c->ids_file[0] != '\0'))
        return sfl__fail(SFL_EINVAL, "block and ids_file go together (vertical data)");
    if (c->block_first != 0 && (c->eval_file[0] != '\0' || c->eval_fraction > 0))
        return sfl__fail(SFL_EINVAL, "vertical data (block) holds out no rows: eval_file and "
                         "eval_fraction do not apply");
    if (c->dp_test_noise > 1)
        return sfl__fail(SFL_EINVAL, "dp_test_noise is 0 or 1");
    if (c->secagg_test_stop > 5)
        return sfl__fail(SFL_EINVAL, "secagg_test_stop is 0 to 5");
    if (c->secagg_min_cohort < 3 || c->secagg_min_cohort > 65535 ||
        c->secagg_min_threshold < 2 || c->secagg_min_threshold > 65535 ||
        c->secagg_min_degree < 2 || c->secagg_min_degree > 65535)
        return sfl__fail(SFL_EINVAL, "secagg_min_cohort (3 to 65535), secagg_min_threshold "
                         "and secagg_min_degree (2 to 65535): a smaller secure aggregation "
                         "reveals too much");
    if (c->secagg_max_colluders != AGENT_COLLUDERS_THIRD && c->secagg_max_colluders > 65535)
        return sfl__fail(SFL_EINVAL, "secagg_max_colluders: 0 to 65535, or n/3 (the default)");
    if (c->backoff_min_ms == 0 || c->backoff_max_ms < c->backoff_min_ms)
        return sfl__fail(SFL_EINVAL, "backoff: need 0 < backoff_min_ms <= backoff_max_ms");
    if (c->connect_timeout_ms == 0 || c->heartbeat_ms == 0)
        return sfl__fail(SFL_EINVAL, "timeouts must be positive");
    return 0;
}

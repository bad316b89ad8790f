#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/data/dataset.h"
#include "sfl/core/ini.h"
#include "sfl/core/suggest.h"

void agent_config_default(agent_config_t *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->state_dir, sizeof(c->state_dir), "/var/lib/sfl-agent");
    c->backoff_min_ms = 500;
    c->backoff_max_ms = 60000;
    c->connect_timeout_ms = 10000;
    c->heartbeat_ms = 10000;
    c->secagg_min_cohort = 3;
    c->secagg_min_threshold = 2;
    c->secagg_min_degree = 16;
    c->secagg_max_colluders = AGENT_COLLUDERS_THIRD;
    c->log_level = SFL_LOG_INFO;
}

static const struct {
    const char *key;
    size_t off, cap;
} strings[] = {
#define S(k, f) {k, offsetof(agent_config_t, f), sizeof(((agent_config_t *)0)->f)}
    S("coordinator", coordinator), S("server_name", server_name), S("ca", ca),
    S("cert", cert), S("key", key), S("state_dir", state_dir),
    S("coordinator_pk", coordinator_pk), S("data", data), S("eval_file", eval_file),
    S("ids_file", ids_file),
#undef S
};

static const struct {
    const char *key;
    size_t off;
} numbers[] = {
    {"backoff_min_ms", offsetof(agent_config_t, backoff_min_ms)},
    {"backoff_max_ms", offsetof(agent_config_t, backoff_max_ms)},
    {"connect_timeout_ms", offsetof(agent_config_t, connect_timeout_ms)},
    {"heartbeat_interval_ms", offsetof(agent_config_t, heartbeat_ms)},
    {"dp_test_noise", offsetof(agent_config_t, dp_test_noise)},
    {"secagg_test_stop", offsetof(agent_config_t, secagg_test_stop)},
    {"secagg_min_cohort", offsetof(agent_config_t, secagg_min_cohort)},
    {"secagg_min_threshold", offsetof(agent_config_t, secagg_min_threshold)},
    {"secagg_min_degree", offsetof(agent_config_t, secagg_min_degree)},
    {"secagg_max_colluders", offsetof(agent_config_t, secagg_max_colluders)},
    {"secagg_test_weight", offsetof(agent_config_t, secagg_test_weight)},
};

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

    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        size_t n = strlen(v);

        if (strcmp(key, strings[i].key) != 0)
            continue;
        if (n >= strings[i].cap)
            return sfl__fail(SFL_EINVAL, "%s: value longer than %zu characters", key,
                             strings[i].cap - 1);
        memcpy((char *)c + strings[i].off, v, n + 1);
        return 0;
    }
    if (strcmp(key, "secagg_max_colluders") == 0 && strcmp(v, "n/3") == 0) {
        c->secagg_max_colluders = AGENT_COLLUDERS_THIRD;
        return 0;
    }
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        char *end;
        unsigned long long x;

        if (strcmp(k, numbers[i].key) != 0)
            continue;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (*v == '-' || *v == '\0' || *end || errno)
            return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", key, v);
        *(uint64_t *)((char *)c + numbers[i].off) = x;
        return 0;
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

    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        sfl_suggest_add(sg, strings[i].key);
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++)
        sfl_suggest_add(sg, numbers[i].key);
    for (size_t i = 0; i < sizeof(by_hand) / sizeof(by_hand[0]); i++)
        sfl_suggest_add(sg, by_hand[i]);
}

int agent_config_known(const char *key)
{
    key = canonical(key);
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        if (strcmp(key, strings[i].key) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++)
        if (strcmp(key, numbers[i].key) == 0)
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

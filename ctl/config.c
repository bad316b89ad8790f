/* sflctl's configuration: the [sflctl] section of sflctl.ini, the command
 * line (every key is also a flag) and job ids (docs/configuration.md, section
 * sflctl). */
#include "ctl.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/core/alloc.h"
#include "sfl/core/ini.h"
#include "sfl/core/suggest.h"
#include "sfl/net/grpcconn.h"

/* sflctl.ini's keys (and flags). coordinator defaults to the coordinator's
 * admin_listen: sflctl does not queue behind the agents' connections
 * (docs/security.md). */
static const sfl_cfg_key_t keys[] = {
    SFL_CFG_S("coordinator", ctl_config_t, coordinator, SFL_ADMIN_LISTEN_DEFAULT, "HOST:PORT",
              "the coordinator's admin_listen address ([v6]:port); its listen address "
              "works too, queued with the agents"),
    SFL_CFG_S("server_name", ctl_config_t, server_name, "", "NAME",
              "name the coordinator certificate must carry (default: HOST)"),
    SFL_CFG_S("ca", ctl_config_t, ca, "", "FILE", "federation CA certificate (PEM); required"),
    SFL_CFG_S("cert", ctl_config_t, cert, "", "FILE", "admin certificate (PEM); required"),
    SFL_CFG_S("key", ctl_config_t, key, "", "FILE", "its private key (PEM); required"),
    SFL_CFG_N("timeout_ms", ctl_config_t, timeout_ms, "10000", 1, INT32_MAX, "MS",
              "connect, and each call's deadline"),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

void ctl_config_default(ctl_config_t *c)
{
    memset(c, 0, sizeof(*c));
    sfl_cfg_defaults(keys, NKEYS, c);
}

int ctl_config_set(ctl_config_t *c, const char *key, const char *v)
{
    int rc = sfl_cfg_set(keys, NKEYS, c, key, v);

    if (rc == 1)
        return sfl__fail(SFL_EINVAL, "unknown key '%s'", key);
    return rc;
}

int ctl_config_known(const char *key)
{
    return sfl_cfg_find(keys, NKEYS, key) != NULL;
}

const sfl_cfg_key_t *ctl_config_keys(size_t *n)
{
    *n = NKEYS;
    return keys;
}

static int on_cfg_key(void *ud, const char *section, const char *key, const char *value)
{
    if (strcmp(section, "sflctl") != 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [sflctl])", section);
    return ctl_config_set(ud, key, value);
}

int ctl_config_load(ctl_config_t *c, const char *path)
{
    return sfl_ini_parse_file(path, on_cfg_key, c);
}

int ctl_config_parse(ctl_config_t *c, const char *name, const char *buf, size_t len)
{
    return sfl_ini_parse_buffer(name, buf ? buf : "", len, on_cfg_key, c);
}

int ctl_config_check(const ctl_config_t *c)
{
    static const char *const need[] = {"coordinator", "ca", "cert", "key"};
    const char *have[] = {c->coordinator, c->ca, c->cert, c->key};

    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (have[i][0] == '\0')
            return sfl__fail(SFL_EINVAL, "missing required setting '%s'", need[i]);
    if (c->timeout_ms == 0 || c->timeout_ms > INT32_MAX)
        return sfl__fail(SFL_EINVAL, "timeout_ms: want 1..%d", INT32_MAX);
    return 0;
}

int ctl_parse_id(const char *s, uint64_t *id)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || x == 0)
        return sfl__fail(SFL_EINVAL, "'%s' is not a job id (a number >= 1)", s);
    *id = x;
    return 0;
}

/* ---- command line ------------------------------------------------------------------ */

static const struct {
    const char *w1, *w2; /* the command's words; w2 may be NULL */
    int nargs;           /* operands after the words */
    int id;              /* operands[0] is a job id */
    int opt_id;          /* or: no operand, or one job id (watch [ID]) */
} cmds[] = {
    [CTL_CMD_STATUS] = {"status", NULL, 0, 0, 0},
    [CTL_CMD_AGENTS] = {"agents", NULL, 0, 0, 0},
    [CTL_CMD_JOBS] = {"jobs", NULL, 0, 0, 0},
    [CTL_CMD_JOB_CREATE] = {"job", "create", 1, 0, 0},
    [CTL_CMD_JOB_PAUSE] = {"job", "pause", 1, 1, 0},
    [CTL_CMD_JOB_RESUME] = {"job", "resume", 1, 1, 0},
    [CTL_CMD_JOB_CANCEL] = {"job", "cancel", 1, 1, 0},
    [CTL_CMD_JOB_HISTORY] = {"job", "history", 1, 1, 0},
    [CTL_CMD_MODEL_EXPORT] = {"model", "export", 2, 1, 0},
    [CTL_CMD_WATCH] = {"watch", NULL, 0, 0, 1},
    [CTL_CMD_AGENT_REVOKE] = {"agent", "revoke", 1, 0, 0},
    [CTL_CMD_JOB_RELEASE] = {"job", "release", 2, 1, 0},
    [CTL_CMD_FLEET] = {"fleet", NULL, 0, 0, 0},
};

static int find_cmd(const char *const *words, int n, ctl_args_t *a)
{
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        int nw = cmds[i].w2 ? 2 : 1;

        if (n < nw || strcmp(words[0], cmds[i].w1) != 0 ||
            (cmds[i].w2 && strcmp(words[1], cmds[i].w2) != 0))
            continue;
        int id = cmds[i].id || (cmds[i].opt_id && n - nw == 1);

        if (n - nw != cmds[i].nargs && !(cmds[i].opt_id && n - nw == 1))
            return sfl__fail(SFL_EINVAL, "wrong number of operands for '%s%s%s'", cmds[i].w1,
                             cmds[i].w2 ? " " : "", cmds[i].w2 ? cmds[i].w2 : "");
        a->cmd = (ctl_cmd_t)i;
        a->noperands = n - nw;
        for (int k = 0; k < a->noperands; k++)
            a->operands[k] = words[nw + k];
        if (id && ctl_parse_id(a->operands[0], &a->id) < 0)
            return SFL_EINVAL;
        if (a->cmd == CTL_CMD_JOB_RELEASE && ctl_parse_id(a->operands[1], &a->agent) < 0)
            return sfl__fail(SFL_EINVAL, "'%.100s' is not an agent id (a number >= 1, as "
                             "sflctl agents shows)", a->operands[1]);
        return 0;
    }
    if (n == 0)
        return sfl__fail(SFL_EINVAL, "no command (status, agents, jobs, job ..., model export, "
                                     "watch, agent revoke)");
    {
        /* the nearest command: "job lst" -> 'job list'... compared as the
         * one or two words the user gave */
        char said[128], name[64];
        sfl_suggest_t sg;

        snprintf(said, sizeof(said), "%.60s%s%.60s", words[0], n > 1 ? " " : "",
                 n > 1 ? words[1] : "");
        /* both words, then the first alone ("jbs 3" -> 'jobs') */
        for (int pass = 0; pass < 2; pass++) {
            sfl_suggest_init(&sg, NULL, pass ? words[0] : said);
            for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                snprintf(name, sizeof(name), "%s%s%s", cmds[i].w1, cmds[i].w2 ? " " : "",
                         cmds[i].w2 ? cmds[i].w2 : "");
                sfl_suggest_add(&sg, name);
            }
            if (sfl_suggest_best(&sg) != NULL || n < 2)
                break;
        }
        return sfl__fail(SFL_EINVAL, "unknown command '%s'%s", said, sfl_suggest_text(&sg));
    }
}

/* "unknown option '--timout_ms'; did you mean '--timeout_ms'? (valid: ...)" */
static int unknown_option(const char *arg, size_t n, const char *key)
{
    static const char *const own[] = {"config", "format", "round", "version", "help"};
    sfl_suggest_t sg;

    sfl_suggest_init(&sg, "--", key);
    for (size_t i = 0; i < NKEYS; i++)
        sfl_suggest_add(&sg, keys[i].key);
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        sfl_suggest_add(&sg, own[i]);
    return sfl__fail(SFL_EINVAL, "unknown option '%.*s'%s", (int)(n + 2), arg,
                     sfl_suggest_text(&sg));
}

int ctl_args_parse(int argc, char **argv, ctl_args_t *a)
{
    const char *words[CTL_MAX_OPERANDS + 2];
    int nwords = 0;

    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *eq, *v;
        char key[32];
        size_t n;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            a->help = 1;
            return 0;
        }
        if (strcmp(arg, "--version") == 0) {
            a->version = 1;
            return 0;
        }
        if (arg[0] == '-' && arg[1] != '-' && arg[1] != '\0')
            return sfl__fail(SFL_EINVAL, "unknown option '%.100s'", arg);
        if (strncmp(arg, "--", 2) != 0) {
            if (nwords == (int)(sizeof(words) / sizeof(words[0])))
                return sfl__fail(SFL_EINVAL, "too many operands");
            words[nwords++] = arg;
            continue;
        }
        eq = strchr(arg + 2, '=');
        n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (n == 0 || n >= sizeof(key))
            return sfl__fail(SFL_EINVAL, "unknown option '%.*s'", (int)(n + 2 < 200 ? n + 2 : 200),
                             arg);
        for (size_t k = 0; k < n; k++)
            key[k] = arg[2 + k] == '-' ? '_' : arg[2 + k];
        key[n] = '\0';
        if (strcmp(key, "config") != 0 && strcmp(key, "format") != 0 &&
            strcmp(key, "round") != 0 && !ctl_config_known(key))
            return unknown_option(arg, n, key);
        if (eq)
            v = eq + 1;
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return sfl__fail(SFL_EINVAL, "option '%s' needs a value", arg);
        if (strcmp(key, "config") == 0) {
            a->config = v;
            continue;
        }
        if (strcmp(key, "round") == 0) {
            char *end;
            unsigned long long r;

            errno = 0;
            r = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || errno || r == 0 || r > INT64_MAX)
                return sfl__fail(SFL_EINVAL, "--round: want a round number >= 1, got '%.40s'",
                                 v);
            a->round = r;
            continue;
        }
        if (strcmp(key, "format") == 0) {
            ctl_format_t f;
            int rc = ctl_format_parse(v, &f);

            if (rc < 0)
                return rc;
            a->format = v;
            continue;
        }
        if (a->nflags == CTL_MAX_FLAGS)
            return sfl__fail(SFL_EINVAL, "more than %d options", CTL_MAX_FLAGS);
        memcpy(a->keys[a->nflags], key, n + 1);
        a->values[a->nflags++] = v;
    }
    int rc = find_cmd(words, nwords, a);

    if (rc == 0 && a->format != NULL && a->cmd != CTL_CMD_MODEL_EXPORT)
        return sfl__fail(SFL_EINVAL, "--format applies only to model export");
    if (rc == 0 && a->round != 0 && a->cmd != CTL_CMD_MODEL_EXPORT)
        return sfl__fail(SFL_EINVAL, "--round applies only to model export");
    return rc;
}

int ctl_args_apply(const ctl_args_t *a, ctl_config_t *c)
{
    int rc;

    for (size_t i = 0; i < a->nflags; i++)
        if ((rc = ctl_config_set(c, a->keys[i], a->values[i])) < 0)
            return rc;
    return 0;
}

/* sfl-sim flags and config files: one table drives getopt_long, the INI
 * reader (keys are the long flag names, in section [sim]) and --help. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfl/algo/algo.h"
#include "sfl/data/dataset.h"
#include "sfl/core/suggest.h"
#include "sfl/core/ini.h"
#include "sfl/core/version.h"
#include "sim.h"

#define PARAM_OPT_BASE 1024

typedef enum { T_STR, T_U32, T_U64, T_DBL, T_FLAG } opt_type_t;

typedef struct opt {
    const char *name;
    opt_type_t type;
    size_t off;
    int id; /* SIM_OPT_* or -1 */
    const char *arg;
    const char *help;
} opt_t;

#define O(f) offsetof(sim_cfg_t, f)
static const opt_t opts[] = {
    {"algo", T_STR, O(algo), -1, "NAME", "algorithm (see below); default fediterht"},
    {"data", T_STR, O(data), -1, "SPEC",
     "synth:sim1|sim2|sparse|fedprox|gradmp|dpbcfw, libsvm:FILE, csv:FILE or\n"
     "                       idx:IMAGES,LABELS; default synth:sim1"},
    {"partition", T_STR, O(partition), SIM_OPT_PARTITION, "P",
     "file data: iid, label, pfedme, pfedme2020, dirichlet:ALPHA or kmeans:K\n"
     "                       (default iid); pfedme: client c holds labels c and c+1 (mod\n"
     "                       classes), lognormal sizes, each client's rows split into its own\n"
     "                       train and test parts; pfedme2020: pFedMe's 2020 script replayed,\n"
     "                       clients sharing a label hold overlapping copies of its first rows\n"
     "                       (both print a stderr line, even with --quiet: training rows,\n"
     "                       distinct ones, test rows also in training; docs/algorithms.md);\n"
     "                       features:K (file or synthetic data, a vertical\n"
     "                       algorithm: bcfw, dpbcfw): K clients hold balanced contiguous column\n"
     "                       blocks of the same rows, one CSV row per evaluated iteration"},
    {"test", T_STR, O(test), -1, "FILE", "held-out file in the format of --data"},
    {"standardize", T_FLAG, O(standardize), -1, NULL,
     "x -> (x - mu) / (sigma + eps) per feature, mu and sigma (numpy's std) of\n"
     "                       the pooled training parts of all clients (after partition and\n"
     "                       test split), applied to every training and test part (pFedMe's\n"
     "                       MNIST preprocessing; docs/algorithms.md); --dump-* write raw rows;\n"
     "                       a summary line goes to stderr, even with --quiet"},
    {"standardize-eps", T_DBL, O(standardize_eps), -1, "E",
     "--standardize's eps, in the data's units (default 0.001; the idx reader\n"
     "                       scales pixels to [0,1], so 0.001/255 is pFedMe's eps on 0..255)"},
    {"test-frac", T_DBL, O(test_frac), SIM_OPT_TEST_FRAC, "F",
     "fraction held out for test_accuracy (default 0.2 for files, 0 for synth)"},
    {"loss", T_STR, O(loss), -1, "L",
     "lsq, logistic, sqhinge (squared hinge, 2 labels), softmax or mlp:H (a\n"
     "                       two-layer perceptron with H hidden ReLU units; mlp:0 is\n"
     "                       multinomial logistic with intercepts)\n"
     "                       (default: from the labels)"},
    {"clients", T_U32, O(clients), SIM_OPT_CLIENTS, "N",
     "number of clients (default 100; features:K: K)"},
    {"rounds", T_U32, O(rounds), -1, "T",
     "communication rounds (default 100; vertical: iterations)"},
    {"eval-every", T_U32, O(eval_every), -1, "E",
     "metrics (one CSV row) every E rounds, and after the first and last (default 1)"},
    {"seed", T_U64, O(seed), -1, "S", "seed of every random draw (default 1)"},
    {"dictionary", T_STR, O(dictionary), -1, "D",
     "fedgradmp: sparse w.r.t. gaussian:M (M random atoms) or a dictionary FILE"},
    {"cohort", T_U32, O(cohort), -1, "L", "clients sampled per round (default 0: all)"},
    {"centralized", T_FLAG, O(centralized), -1, NULL,
     "all data in one client, one local step per round (centralized IHT / GradMP)"},
    {"alpha", T_DBL, O(alpha), SIM_OPT_ALPHA, "A", "synth: heterogeneity (default 0.1; gradmp 1)"},
    {"synth-beta", T_DBL, O(beta), SIM_OPT_BETA, "B",
     "synth: data heterogeneity (default 0.1; --beta is an algorithm parameter)"},
    {"dim", T_U32, O(dim), SIM_OPT_DIM, "D", "synth: dimension (default 1000; fedprox 60)"},
    {"samples", T_U32, O(samples), SIM_OPT_SAMPLES, "N",
     "synth: samples per client (default 100; features:K: in all)"},
    {"support", T_U32, O(support), SIM_OPT_SUPPORT, "S",
     "synth: nonzeros of the true model (default 100; sparse 20)"},
    {"noise", T_DBL, O(noise), SIM_OPT_NOISE, "SIGMA",
     "synth:sparse|gradmp|dpbcfw noise sd (default 0; dpbcfw sqrt(0.001))"},
    {"decay", T_DBL, O(decay), SIM_OPT_DECAY, "E",
     "synth:gradmp: client i's entry variance 1/i^E (default 1.1)"},
    {"density", T_DBL, O(density), SIM_OPT_DENSITY, "F",
     "synth:dpbcfw: fraction of nonzero feature entries (default 0.1)"},
    {"parts", T_U32, O(parts), -1, "P", "label/kmeans partition: parts per group (default 20)"},
    {"kmeans-iter", T_U32, O(kmeans_iter), -1, "I", "k-means iterations (default 50)"},
    {"encoding", T_STR, O(encoding), SIM_OPT_ENCODING, "E",
     "values of the clients' updates on the wire: f64, f32 or q8 (default f64);\n"
     "                       lossy ones are applied; the model is broadcast as f64, as the\n"
     "                       coordinator does"},
    {"secagg", T_FLAG, O(secagg), -1, NULL,
     "simulate secure aggregation (mode 2) without its cryptography: each\n"
     "                       client sends its top-k change inside the round's common support\n"
     "                       S_t, with error feedback, quantized mod 2^32; the fold gets the\n"
     "                       decoded weighted mean (horizontal algorithms; docs/algorithms.md);\n"
     "                       bytes_up counts the masked vectors, 4 (|S_t| + 11) per client"},
    {"secagg-support", T_U32, O(sa_support), SIM_OPT_SA, "N",
     "--secagg: |S_t| (default 0: 2k; k = tau x blocks, or the dimension)"},
    {"secagg-topk", T_U32, O(sa_topk), SIM_OPT_SA, "N",
     "--secagg: values each client keeps inside S_t (default 0: k)"},
    {"secagg-clip", T_DBL, O(sa_clip), SIM_OPT_SA, "C",
     "--secagg: values sent are clamped to [-C, C] (default 100)"},
    {"secagg-max-weight", T_DBL, O(sa_wmax), SIM_OPT_SA, "W",
     "--secagg: weights min(n_i, W) / W (default 0: the largest client's samples)"},
    {"output", T_STR, O(output), -1, "FILE", "write the CSV here instead of stdout"},
    {"plot", T_STR, O(plot), -1, "PNG",
     "also draw objective vs rounds with gnuplot (failing: a warning)"},
    {"model-out", T_STR, O(model_out), -1, "FILE",
     "write the final model: '# sfl model dim=D', then 'index value' (1-based) per nonzero"},
    {"dump-shards", T_STR, O(dump_shards), -1, "DIR",
     "write client i's training data to DIR/client-<i>.svm, one LibSVM shard per\n"
     "                       agent (DIR is created if missing), client i's own test part (synthetic data\n"
     "                       with --test-frac, --partition pfedme) to DIR/client-<i>.test.svm, and the\n"
     "                       truth, if known, to DIR/truth; then exit. features:K: client k's\n"
     "                       columns (renumbered from 1) to DIR/client-<k>.svm, the sample id of\n"
     "                       each row to DIR/client-<k>.ids, the blocks to DIR/blocks\n"
     "                       (docs/configuration.md)"},
    {"dump-data", T_STR, O(dump_data), -1, "FILE",
     "write all clients' training data to FILE (LibSVM) and the truth, if known, to FILE.truth"},
    {"no-wall-clock", T_FLAG, O(no_wall_clock), -1, NULL,
     "write wall_ms as 0 so runs compare byte for byte"},
    {"quiet", T_FLAG, O(quiet), -1, NULL, "no progress line, no summary"},
};
#undef O
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* Older names of options that took the coordinator's [job] key for the same
 * field (secagg_max_weight, ...; docs/configuration.md): still read, as
 * flags and as INI keys. */
static const struct {
    const char *old, *name;
} aliases[] = {
    {"sa-support", "secagg-support"},
    {"sa-topk", "secagg-topk"},
    {"sa-clip", "secagg-clip"},
    {"sa-wmax", "secagg-max-weight"},
};

#define NALIASES (sizeof(aliases) / sizeof(aliases[0]))

/* One flag per distinct algorithm parameter name (the first algorithm that
 * has it documents it): --local-steps for local_steps. */
typedef struct param_opt {
    char flag[SFL_PARAM_NAME_LEN];
    const sfl_param_def_t *def;
} param_opt_t;

static param_opt_t param_opts[SFL_PARAMS_MAX * 4];
static uint32_t nparam_opts;

static void collect_param_opts(void)
{
    nparam_opts = 0;
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++)
        for (const sfl_param_def_t *d = (*a)->params; d && d->name; d++) {
            uint32_t i = 0;

            while (i < nparam_opts && strcmp(param_opts[i].def->name, d->name) != 0)
                i++;
            if (i < nparam_opts || nparam_opts == sizeof(param_opts) / sizeof(param_opts[0]))
                continue;
            param_opts[i].def = d;
            snprintf(param_opts[i].flag, sizeof(param_opts[i].flag), "%s", d->name);
            for (char *c = param_opts[i].flag; *c; c++)
                if (*c == '_')
                    *c = '-';
            nparam_opts++;
        }
}

/* The parameter a flag or INI key names (local-steps or local_steps). */
static const param_opt_t *find_param_opt(const char *name)
{
    for (uint32_t i = 0; i < nparam_opts; i++)
        if (strcmp(param_opts[i].flag, name) == 0 || strcmp(param_opts[i].def->name, name) == 0)
            return &param_opts[i];
    return NULL;
}

/* Keeps the text of a parameter's value (the algorithm checks it later);
 * a later value for the same name replaces the earlier. */
static int set_param(sim_cfg_t *cfg, const param_opt_t *po, const char *val)
{
    uint32_t i = 0;
    char *t;

    while (i < cfg->nparams && strcmp(cfg->params[i].name, po->def->name) != 0)
        i++;
    if (i == SIM_MAX_PARAMS)
        return sfl__fail(SFL_ELIMIT, "more than %d algorithm parameters", SIM_MAX_PARAMS);
    if ((t = strdup(val)) == NULL)
        return sfl__fail(SFL_ENOMEM, "%s: out of memory", po->flag);
    free(cfg->params[i].text);
    cfg->params[i].text = t;
    snprintf(cfg->params[i].name, sizeof(cfg->params[i].name), "%s", po->def->name);
    cfg->nparams += i == cfg->nparams;
    return 0;
}

const char *sim_param_given(const sim_cfg_t *cfg, const char *name)
{
    for (uint32_t i = 0; i < cfg->nparams; i++)
        if (strcmp(cfg->params[i].name, name) == 0)
            return cfg->params[i].text;
    return NULL;
}

void sim_list_params(FILE *f)
{
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        fprintf(f, "#### %s\n\n| parameter | symbol | type | default | range | meaning |\n"
                   "| --- | --- | --- | --- | --- | --- |\n", (*a)->name);
        for (const sfl_param_def_t *d = (*a)->params; d && d->name; d++) {
            char hi[32];

            if (d->hi == HUGE_VAL)
                snprintf(hi, sizeof(hi), "inf");
            else if (d->hi == UINT32_MAX)
                snprintf(hi, sizeof(hi), "2^32-1");
            else
                snprintf(hi, sizeof(hi), "%g", d->hi);
            fprintf(f, "| `%s` | %s | %s | %g | %s%g, %s%s | %s%s |\n", d->name, d->symbol,
                    d->type == SFL_PARAM_COUNT ? "count" : "real", d->def,
                    (d->flags & SFL_PARAM_OPEN_LO) ? "(" : "[", d->lo, hi,
                    d->hi == HUGE_VAL ? ")" : "]", d->doc,
                    (d->flags & SFL_PARAM_SPARSITY) ? "; at most the block length" : "");
        }
        fprintf(f, "\n");
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sfl-sim [--config FILE] [OPTIONS]\n"
               "Runs a federated algorithm over virtual clients in one process and\n"
               "writes one CSV row per round to stdout (messages go to stderr).\n\n"
               "  --config FILE        INI file; keys are option names in section [sim];\n"
               "                       flags given on the command line win\n");
    for (size_t i = 0; i < NOPTS; i++) {
        char lhs[40];

        snprintf(lhs, sizeof(lhs), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        fprintf(f, "  %-20s %s\n", lhs, opts[i].help);
    }
    for (size_t i = 0; i < NALIASES; i++)
        fprintf(f, "  --%-18s older name of --%s\n", aliases[i].old, aliases[i].name);
    fprintf(f, "  --list-params        every algorithm's parameters as markdown tables\n"
               "  --version            print the version\n"
               "  -h, --help           this text\n\n"
               "algorithm parameters (each algorithm's table; a value for a parameter the\n"
               "algorithm does not have is ignored with a note):\n");
    for (uint32_t i = 0; i < nparam_opts; i++) {
        const sfl_param_def_t *d = param_opts[i].def;
        char lhs[64], arg[16];
        size_t k;

        for (k = 0; d->symbol[k] && k + 1 < sizeof(arg); k++)
            arg[k] = (char)toupper((unsigned char)d->symbol[k]);
        arg[k] = '\0';
        snprintf(lhs, sizeof(lhs), "--%.31s %.15s", param_opts[i].flag, arg);
        fprintf(f, "  %-20s %s (default %g%s)\n", lhs, d->doc, d->def,
                strcmp(d->name, "tau") == 0      ? "; sfl-sim: 200"
                : strcmp(d->name, "lr") == 0     ? "; sfl-sim: the paper grid's best when known"
                : strcmp(d->name, "local_steps") == 0 ? "; sfl-sim: the paper grid's best when known"
                : (d->flags & SFL_PARAM_RIDGE) ? "; sfl-sim: 1e-4 for classification"
                                                 : "");
    }
    fprintf(f, "\nalgorithms:\n");
    for (const sfl_algo_t *const *a = sfl_algo_list(); *a; a++) {
        fprintf(f, "  %-18s %s\n", (*a)->name, (*a)->summary);
        fprintf(f, "  %-18s parameters:", "");
        for (const sfl_param_def_t *d = (*a)->params; d && d->name; d++)
            fprintf(f, " %s", d->name);
        fprintf(f, "\n");
    }
    fprintf(f, "\nCSV columns: round, objective, rel_error (truth known), support_precision,\n"
               "support_recall (support known), test_accuracy (classification with a test\n"
               "set), personal_objective (personalized algorithms: the mean objective of\n"
               "the clients' own models on their data), personal_accuracy (personalized\n"
               "algorithms with a test part per client: each client's own model on its own\n"
               "test part, pooled), nnz, bytes_up, bytes_down, support_churn (the\n"
               "coordinates that entered or left the support of the global model, the\n"
               "nnz column's vector, from x_t to x_{t+1}, summed over the rounds since the\n"
               "previous row: per round with --eval-every 1), wall_ms. Vertical algorithms:\n"
               "one row per evaluated iteration, the round column counting iterations, no\n"
               "support_churn; bytes_up is what the K clients send in it (a 4-byte signed\n"
               "index and a float64 feature each), bytes_down the broadcast to the K clients.\n");
}

/* 0, or SFL_EINVAL / SFL_ENOMEM with a detail naming the option. */
static int set_opt(sim_cfg_t *cfg, const opt_t *o, const char *val)
{
    void *p = (char *)cfg + o->off;
    char *end;

    errno = 0;
    switch (o->type) {
    case T_STR: {
        char *s = strdup(val);

        if (s == NULL)
            return sfl__fail(SFL_ENOMEM, "%s: out of memory", o->name);
        free(*(char **)p);
        *(char **)p = s;
        break;
    }
    case T_U32:
    case T_U64: {
        if (*val == '-' || *val == '\0')
            goto bad;
        unsigned long long v = strtoull(val, &end, 10);

        if (*end != '\0' || errno || (o->type == T_U32 && v > UINT32_MAX))
            goto bad;
        if (o->type == T_U32)
            *(uint32_t *)p = (uint32_t)v;
        else
            *(uint64_t *)p = v;
        break;
    }
    case T_DBL: {
        double v = strtod(val, &end);

        if (end == val || *end != '\0' || errno || !isfinite(v))
            goto bad;
        *(double *)p = v;
        break;
    }
    case T_FLAG:
        if (val && strcmp(val, "1") && strcmp(val, "true") && strcmp(val, "yes") &&
            strcmp(val, "0") && strcmp(val, "false") && strcmp(val, "no"))
            goto bad;
        *(int *)p = val == NULL || strchr("1ty", val[0]) != NULL;
        break;
    }
    if (o->id >= 0)
        cfg->given[o->id] = 1;
    return 0;
bad:
    return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", o->name, val);
}

/* name as a flag (standardize-eps) or with underscores (standardize_eps, an
 * INI key written like the algorithm parameters'). */
static int same_name(const char *a, const char *b)
{
    while (*a && (*a == *b || (*a == '-' && *b == '_')))
        a++, b++;
    return *a == '\0' && *b == '\0';
}

static const opt_t *find_opt(const char *name)
{
    for (size_t i = 0; i < NALIASES; i++)
        if (same_name(aliases[i].old, name))
            name = aliases[i].name;
    for (size_t i = 0; i < NOPTS; i++)
        if (same_name(opts[i].name, name))
            return &opts[i];
    return NULL;
}

static int ini_set(void *ud, const char *section, const char *name, const char *value)
{
    const opt_t *o;

    if (strcmp(section, "sim") != 0)
        return sfl__fail(SFL_EINVAL, "unknown section [%s] (expected [sim])", section);
    if ((o = find_opt(name)) == NULL) {
        const param_opt_t *po = find_param_opt(name);

        if (po == NULL)
            return sfl__fail(SFL_EINVAL, "unknown key '%s'", name);
        return set_param(ud, po, value);
    }
    return set_opt(ud, o, value);
}

static void defaults(sim_cfg_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->algo = strdup("fediterht");
    cfg->data = strdup("synth:sim1");
    cfg->partition = strdup("iid");
    cfg->encoding = strdup("f64");
    cfg->clients = 100;
    cfg->rounds = 100;
    cfg->eval_every = 1;
    cfg->seed = 1;
    cfg->alpha = 0.1;
    cfg->beta = 0.1;
    cfg->dim = 1000;
    cfg->samples = 100;
    cfg->support = 100;
    cfg->parts = 20;
    cfg->kmeans_iter = 50;
    cfg->sa_clip = 100;
    cfg->standardize_eps = SFL_STANDARDIZE_EPS;
}

int sim_options(int argc, char **argv, sim_cfg_t *cfg)
{
    struct option lo[NOPTS + NALIASES + sizeof(param_opts) / sizeof(param_opts[0]) + 5];
    const char *config = NULL;
    size_t nlo = 0;
    int c;

    defaults(cfg);
    collect_param_opts();
    for (size_t i = 0; i < NOPTS; i++)
        lo[nlo++] = (struct option){opts[i].name, opts[i].type == T_FLAG ? no_argument
                                                                          : required_argument,
                                    NULL, (int)(256 + i)};
    for (size_t i = 0; i < NALIASES; i++)
        lo[nlo++] = (struct option){aliases[i].old, required_argument, NULL,
                                    (int)(256 + (find_opt(aliases[i].name) - opts))};
    for (uint32_t i = 0; i < nparam_opts; i++)
        lo[nlo++] = (struct option){param_opts[i].flag, required_argument, NULL,
                                    (int)(PARAM_OPT_BASE + i)};
    lo[nlo++] = (struct option){"config", required_argument, NULL, 'c'};
    lo[nlo++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[nlo++] = (struct option){"list-params", no_argument, NULL, 'L'};
    lo[nlo++] = (struct option){"version", no_argument, NULL, 'V'};
    lo[nlo] = (struct option){NULL, 0, NULL, 0};

    /* Pass 1: --help and --config only, so flags override the file. */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hc:", lo, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c == 'L') {
            sim_list_params(stdout);
            exit(0);
        }
        if (c == 'V') {
            printf("sfl-sim %s\n", SFL_VERSION);
            exit(0);
        }
        if (c == 'c')
            config = optarg;
    }
    if (config && sfl_ini_parse_file(config, ini_set, cfg) < 0) {
        fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
        return -1;
    }
    /* Pass 2: everything else. */
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hc:", lo, NULL)) != -1) {
        if (c == 'c' || c == 'h')
            continue;
        if (c == '?') {
            /* "--bogus=1" is the option --bogus */
            const char *arg = argv[optind - 1];
            int n = (int)strcspn(arg, "=");
            char name[64];

            snprintf(name, sizeof(name), "%.*s", n > 2 ? n - 2 : 0, arg + 2);
            if (strncmp(arg, "--", 2) == 0 && arg[n] == '=' && find_opt(name) != NULL)
                fprintf(stderr, "sfl-sim: error: option '--%s' takes no value\n", name);
            else {
                sfl_suggest_t sg;

                sfl_suggest_init(&sg, "--", name);
                for (int k = 0; lo[k].name != NULL; k++)
                    sfl_suggest_add(&sg, lo[k].name);
                fprintf(stderr, "sfl-sim: error: unknown option '%.*s'%s\n", n, arg,
                        strncmp(arg, "--", 2) == 0 ? sfl_suggest_text(&sg) : " (see --help)");
            }
            return -1;
        }
        if (c == ':') {
            fprintf(stderr, "sfl-sim: error: option '%s' needs a value\n", argv[optind - 1]);
            return -1;
        }
        if (c >= PARAM_OPT_BASE) {
            if (set_param(cfg, &param_opts[c - PARAM_OPT_BASE], optarg) < 0) {
                fprintf(stderr, "sfl-sim: error: --%s\n", sfl_last_error());
                return -1;
            }
            continue;
        }
        if (set_opt(cfg, &opts[c - 256], optarg) < 0) {
            fprintf(stderr, "sfl-sim: error: --%s\n", sfl_last_error());
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sfl-sim: error: unexpected argument '%s' (see --help)\n",
                argv[optind]);
        return -1;
    }
    return 0;
}

void sim_cfg_free(sim_cfg_t *cfg)
{
    for (uint32_t i = 0; i < cfg->nparams; i++) {
        free(cfg->params[i].text);
        cfg->params[i].text = NULL;
    }
    cfg->nparams = 0;
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].type == T_STR) {
            char **p = (char **)((char *)cfg + opts[i].off);

            free(*p);
            *p = NULL;
        }
}

typedef struct paper_default {
    const char *preset, *algo;
    double lr;
    uint32_t k;
} paper_default_t;

/* Generated by sim/tune.sh (see docs/algorithms.md). */
static const paper_default_t paper_defaults[] = {
#include "defaults.inc"
    {NULL, NULL, 0, 0},
};

int sim_paper_defaults(const char *preset, const char *algo, double *lr, uint32_t *k)
{
    for (const paper_default_t *d = paper_defaults; d->preset; d++)
        if (strcmp(d->preset, preset) == 0 && strcmp(d->algo, algo) == 0) {
            *lr = d->lr;
            *k = d->k;
            return 1;
        }
    return 0;
}

/* sfl-sim: the in-process driver of the algorithm table. Virtual clients
 * train one after another and their updates stream into the aggregator in
 * client order, so a run is a pure function of its flags and seed. Updates
 * and the broadcast model pass through the wire codec, so byte counts and
 * lossy encodings are exactly what the network would see. */
#include <errno.h>
#include <float.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "sfl/algo/algo.h"
#include "sfl/algo/client.h"
#include "sfl/data/csv.h"
#include "sfl/model/dict.h"
#include "sfl/model/eval.h"
#include "sfl/data/libsvm.h"
#include "sfl/data/partition.h"
#include "sfl/wire/spcodec.h"
#include "sfl/data/synth.h"
#include "sim.h"

/* The federation the driver runs on. */
typedef struct fed {
    uint32_t nclients;
    sfl_dataset_t **train; /* per client */
    int train_owned;       /* 0: borrowed from synth */
    sfl_dataset_t **test;  /* per client (synth) or test[0] only (files); may be NULL */
    uint32_t ntest;
    double *weight;        /* p_i, proportional to local sample counts */
    uint32_t ncols, nclasses;
    const sfl_loss_t *loss;
    const double *truth;   /* or NULL */
    const uint32_t *support;
    uint32_t nsupport;
    sfl_synth_t *synth;    /* owned, when synthetic */
    char preset[64];       /* key of the paper-default table */
} fed_t;

/* what, then sfl_error_message (whose detail may name what already). */
void sim_die(const char *what, int rc)
{
    const char *msg = sfl_error_message(rc);

    if (strncmp(msg, what, strlen(what)) == 0)
        fprintf(stderr, "sfl-sim: error: %s\n", msg);
    else
        fprintf(stderr, "sfl-sim: error: %s: %s\n", what, msg);
    exit(1);
}

/* A system call of ours failed with -errno err: no library detail. */
void sim_die_sys(const char *what, int err)
{
    sfl__clear_error();
    sim_die(what, err);
}

void sim_usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "sfl-sim: error: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

void *sim_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);

    if (p == NULL)
        sim_die("memory", SFL_ENOMEM);
    return p;
}

static void fed_free(fed_t *f)
{
    for (uint32_t i = 0; f->train && f->train_owned && i < f->nclients; i++)
        sfl_dataset_free(f->train[i]);
    for (uint32_t i = 0; f->test && i < f->ntest; i++)
        sfl_dataset_free(f->test[i]);
    free(f->train);
    free(f->test);
    free(f->weight);
    sfl_synth_free(f->synth);
}

static const struct {
    const char *name;
    sfl_synth_kind_t kind;
} synth_kinds[] = {
    {"sim1", SFL_SYNTH_SIM1},
    {"sim2", SFL_SYNTH_SIM2},
    {"sparse", SFL_SYNTH_SPARSE},
    {"fedprox", SFL_SYNTH_FEDPROX},
    {"gradmp", SFL_SYNTH_GRADMP},
    {"dpbcfw", SFL_SYNTH_DPBCFW},
};

void sim_synth_params(const char *kind, const sim_cfg_t *cfg, sfl_synth_params_t *p)
{
    size_t i;

    for (i = 0; i < sizeof(synth_kinds) / sizeof(synth_kinds[0]); i++)
        if (strcmp(kind, synth_kinds[i].name) == 0)
            break;
    if (i == sizeof(synth_kinds) / sizeof(synth_kinds[0]))
        sim_usage_error("unknown synthetic data (sim1, sim2, sparse, fedprox, gradmp, dpbcfw)",
                        kind);
    sfl_synth_params_default(p, synth_kinds[i].kind);
    p->nclients = cfg->clients;
    p->seed = cfg->seed;
    if (cfg->given[SIM_OPT_SAMPLES])
        p->n_per_client = cfg->samples;
    if (cfg->given[SIM_OPT_DIM])
        p->dim = cfg->dim;
    if (cfg->given[SIM_OPT_SUPPORT])
        p->s = cfg->support;
    if (cfg->given[SIM_OPT_ALPHA])
        p->alpha = cfg->alpha;
    if (cfg->given[SIM_OPT_BETA])
        p->beta = cfg->beta;
    if (cfg->given[SIM_OPT_NOISE])
        p->noise = cfg->noise;
    if (cfg->given[SIM_OPT_DECAY])
        p->decay = cfg->decay;
    if (cfg->given[SIM_OPT_DENSITY])
        p->density = cfg->density;
}

static void load_synth(fed_t *f, const char *kind, const sim_cfg_t *cfg)
{
    sfl_synth_params_t p;
    int rc;

    if (cfg->given[SIM_OPT_PARTITION])
        sim_usage_error("--partition applies to file data; synthetic federations are "
                    "generated per client (or --partition features:K)", NULL);
    sim_synth_params(kind, cfg, &p);
    rc = sfl_synth_generate(&p, &f->synth);
    if (rc < 0)
        sim_die("synthetic data", rc);
    f->nclients = f->synth->nclients;
    f->train = sim_xcalloc(f->nclients, sizeof(*f->train));
    f->ncols = f->synth->clients[0]->X->ncols;
    f->nclasses = f->synth->clients[0]->nclasses;
    f->truth = f->synth->truth;
    f->support = f->synth->support;
    f->nsupport = f->synth->nsupport;
    snprintf(f->preset, sizeof(f->preset), "%s", kind);
    f->loss = f->nclasses == 0 ? &sfl_loss_lsq
              : f->nclasses == 2 ? &sfl_loss_logistic : &sfl_loss_softmax;
    if (cfg->loss && cfg->loss[0] && (f->loss = sfl_loss_find(cfg->loss)) == NULL)
        sim_usage_error("unknown loss (lsq, logistic, sqhinge, softmax, "
                        SFL_LOSS_MLP_FORMS ")", cfg->loss);
    if (!(cfg->test_frac > 0)) {
        memcpy(f->train, f->synth->clients, f->nclients * sizeof(*f->train));
        return;
    }
    /* Hold out part of every client's data; the union is the test set. */
    f->train_owned = 1;
    f->ntest = f->nclients;
    f->test = sim_xcalloc(f->nclients, sizeof(*f->test));
    for (uint32_t c = 0; c < f->nclients; c++) {
        sfl_rng_t r;

        sfl_rng_seed(&r, cfg->seed, 0, c, SFL_STREAM_PARTITION);
        rc = sfl_dataset_split(f->synth->clients[c], cfg->test_frac, &r, &f->train[c],
                               &f->test[c]);
        if (rc < 0)
            sim_die("test split", rc);
    }
}

/* path in the form kind names (libsvm, csv, idx: "IMAGES,LABELS"). */
int sim_read_file(const char *kind, const char *path, uint32_t min_cols,
                     sfl_dataset_t **out)
{
    char spec[4200];

    if ((size_t)snprintf(spec, sizeof(spec), "%s:%s", kind, path) >= sizeof(spec))
        return sfl__fail(SFL_ELIMIT, "%.64s...: path too long", path);
    return sfl_dataset_read(spec, min_cols, NULL, out);
}

/* Loss from --loss or from the labels: 2 distinct values -> logistic, a few
 * integers -> softmax, anything else -> least squares. */
const sfl_loss_t *sim_choose_loss(const sim_cfg_t *cfg, const sfl_dataset_t *ds)
{
    uint32_t n = ds->X->nrows, distinct = 0;
    double seen[101];
    int integral = 1;

    if (cfg->loss && cfg->loss[0]) {
        const sfl_loss_t *l = sfl_loss_find(cfg->loss);

        if (l == NULL)
            sim_usage_error("unknown loss (lsq, logistic, sqhinge, softmax, "
                            SFL_LOSS_MLP_FORMS ")", cfg->loss);
        return l;
    }
    for (uint32_t i = 0; i < n && distinct <= 100; i++) {
        uint32_t j = 0;

        if (ds->y[i] != floor(ds->y[i]))
            integral = 0;
        while (j < distinct && seen[j] != ds->y[i])
            j++;
        if (j == distinct)
            seen[distinct++] = ds->y[i];
    }
    if (distinct == 2)
        return &sfl_loss_logistic;
    if (integral && distinct > 2 && distinct <= 100)
        return &sfl_loss_softmax;
    return &sfl_loss_lsq;
}

/* Row i's group is its class id (y holds coded labels); what is the usage
 * error when the data has no classes. Free with free(). */
static uint32_t *class_groups(const sfl_dataset_t *ds, const char *what)
{
    uint32_t n = ds->X->nrows, *g;

    if (ds->nclasses == 0)
        sim_usage_error(what, NULL);
    g = sim_xcalloc(n, sizeof(*g));
    for (uint32_t i = 0; i < n; i++)
        g[i] = (uint32_t)ds->y[i];
    return g;
}

static void partition_rows(const sim_cfg_t *cfg, const sfl_dataset_t *ds, uint32_t nclients,
                           sfl_partition_t **out)
{
    const char *p = cfg->partition;
    uint32_t n = ds->X->nrows;
    sfl_rng_t r;
    int rc;

    sfl_rng_seed(&r, cfg->seed, 0, 0, SFL_STREAM_PARTITION);
    if (strcmp(p, "iid") == 0) {
        rc = sfl_partition_iid(n, nclients, &r, out);
    } else if (strcmp(p, "label") == 0) {
        uint32_t *g = class_groups(ds, "--partition label needs class labels");

        rc = sfl_partition_group_skew(g, n, ds->nclasses, nclients, cfg->parts, 2, &r, out);
        free(g);
    } else if (strncmp(p, "dirichlet:", 10) == 0) {
        char *end;
        double a = strtod(p + 10, &end);
        uint32_t *g;

        if (end == p + 10 || *end || !(a > 0) || !isfinite(a))
            sim_usage_error("bad --partition dirichlet:ALPHA (ALPHA > 0)", p);
        g = class_groups(ds, "--partition dirichlet needs class labels");
        rc = sfl_partition_dirichlet(g, n, ds->nclasses, nclients, a, &r, out);
        free(g);
    } else if (strcmp(p, "pfedme") == 0) {
        uint32_t *g = class_groups(ds, "--partition pfedme needs class labels");

        /* 2 labels per client, at least 10 rows of each, lognormal sizes */
        rc = sfl_partition_labels(g, n, ds->nclasses, nclients, 2, 10, 1.0, &r, out);
        free(g);
    } else if (strcmp(p, "pfedme2020") == 0) {
        uint32_t *g = class_groups(ds, "--partition pfedme2020 needs class labels");

        rc = sfl_partition_pfedme2020(g, n, ds->nclasses, nclients, 2, &r, out);
        free(g);
    } else if (strncmp(p, "kmeans:", 7) == 0) {
        char *end;
        unsigned long k = strtoul(p + 7, &end, 10);
        uint32_t *g;

        if (end == p + 7 || *end || k < 2 || k > 1000)
            sim_usage_error("bad --partition kmeans:K (2 <= K <= 1000)", p);
        g = sim_xcalloc(n, sizeof(*g));
        rc = sfl_kmeans(ds->X, (uint32_t)k, cfg->kmeans_iter, &r, g);
        if (rc == 0)
            rc = sfl_partition_group_skew(g, n, (uint32_t)k, nclients, cfg->parts, 2, &r, out);
        free(g);
    } else {
        sim_usage_error("unknown --partition (iid, label, pfedme, pfedme2020, dirichlet:A, "
                        "kmeans:K)", p);
        return;
    }
    if (rc < 0)
        sim_die("partition", rc);
}

/* pFedMe's splits (pfedme, pfedme2020) hold out part of each client's rows. */
static int is_pfedme(const char *partition)
{
    return strcmp(partition, "pfedme") == 0 || strcmp(partition, "pfedme2020") == 0;
}

void sim_code_test_labels(const sfl_dataset_t *train, sfl_dataset_t *test, const char *path)
{
    for (uint32_t i = 0; i < test->X->nrows; i++) {
        uint32_t c = 0;

        while (c < train->nclasses && train->labels[c] != test->y[i])
            c++;
        if (c == train->nclasses) {
            fprintf(stderr, "sfl-sim: error: %s: row %u has label %g not seen in training\n",
                    path, i + 1, test->y[i]);
            exit(1);
        }
        test->y[i] = c;
    }
    test->nclasses = train->nclasses;
}

static void load_file(fed_t *f, const char *kind, const char *path, sim_cfg_t *cfg)
{
    sfl_dataset_t *all = NULL, *train = NULL, *test = NULL;
    sfl_partition_t *part = NULL;
    int rc;

    rc = sim_read_file(kind, path, 0, &all);
    if (rc < 0)
        sim_die(path, rc);
    if (cfg->test) {
        rc = sim_read_file(kind, cfg->test, all->X->ncols, &test);
        if (rc < 0)
            sim_die(cfg->test, rc);
        rc = sfl_dataset_set_ncols(all, test->X->ncols);
        if (rc < 0)
            sim_die(cfg->test, rc);
    }
    f->loss = sim_choose_loss(cfg, all);
    if (f->loss->classification) {
        rc = sfl_dataset_encode_labels(all, SFL_LOSS_MAX_CLASSES);
        if (rc < 0)
            sim_die(path, rc);
        if (test)
            sim_code_test_labels(all, test, cfg->test);
    }
    /* pFedMe's protocol: every client's own rows split into its train and
     * test parts (the test part keeps the client's labels). */
    int per_client = test == NULL && cfg->test_frac > 0 && is_pfedme(cfg->partition);
    if (test == NULL && cfg->test_frac > 0 && !per_client) {
        sfl_rng_t r;

        sfl_rng_seed(&r, cfg->seed, 1, 0, SFL_STREAM_PARTITION);
        rc = sfl_dataset_split(all, cfg->test_frac, &r, &train, &test);
        if (rc < 0)
            sim_die("test split", rc);
        sfl_dataset_free(all);
    } else {
        train = all;
    }
    f->nclients = cfg->clients;
    f->ncols = train->X->ncols;
    f->nclasses = train->nclasses;
    partition_rows(cfg, train, f->nclients, &part);
    f->train = sim_xcalloc(f->nclients, sizeof(*f->train));
    f->train_owned = 1;
    if (per_client) {
        f->test = sim_xcalloc(f->nclients, sizeof(*f->test));
        f->ntest = f->nclients;
    }
    for (uint32_t c = 0; c < f->nclients; c++) {
        sfl_dataset_t *mine;
        sfl_rng_t r;

        rc = sfl_dataset_subset(train, part->rows + part->offset[c],
                                part->offset[c + 1] - part->offset[c], &mine);
        if (rc < 0)
            sim_die("partition", rc);
        if (!per_client || mine->X->nrows < 2) {
            f->train[c] = mine;
            continue;
        }
        sfl_rng_seed(&r, cfg->seed, 0, c, SFL_STREAM_PARTITION);
        rc = sfl_dataset_split(mine, cfg->test_frac, &r, &f->train[c], &f->test[c]);
        sfl_dataset_free(mine);
        if (rc < 0)
            sim_die("test split", rc);
    }
    if (test) {
        f->test = sim_xcalloc(1, sizeof(*f->test));
        f->test[0] = test;
        f->ntest = 1;
    }
    sfl_partition_free(part);
    sfl_dataset_free(train);
    const char *base = strrchr(path, '/');
    snprintf(f->preset, sizeof(f->preset), "%s", base ? base + 1 : path);
}

/* --centralized: every client's data in one client (the centralized
 * reference the federated runs are measured against). */
static void centralize(fed_t *f)
{
    sfl_dataset_t *all;
    int rc = sfl_dataset_concat(f->train, f->nclients, &all);

    if (rc < 0)
        sim_die("centralized data", rc);
    if (f->train_owned)
        for (uint32_t c = 0; c < f->nclients; c++)
            sfl_dataset_free(f->train[c]);
    f->train[0] = all;
    f->train_owned = 1;
    f->nclients = 1;
}

static void load_dictionary(const sim_cfg_t *cfg, uint32_t ncols, sfl_dict_t **out)
{
    const char *d = cfg->dictionary;
    int rc;

    if (strncmp(d, "gaussian:", 9) == 0) {
        char *end;
        unsigned long m = strtoul(d + 9, &end, 10);
        sfl_rng_t r;

        if (end == d + 9 || *end || m == 0 || m > UINT32_MAX)
            sim_usage_error("bad --dictionary gaussian:M (M atoms, M >= 1)", d);
        sfl_rng_seed(&r, cfg->seed, 0, 0, SFL_STREAM_DICT);
        rc = sfl_dict_gaussian(ncols, (uint32_t)m, &r, out);
    } else {
        rc = sfl_dict_read(d, 0, out);
    }
    if (rc < 0)
        sim_die(d, rc);
}

/* Sparse text form of a model: what --model-out and --dump-data write. */
void sim_write_model(const char *path, const double *x, size_t d)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        sim_die_sys(path, -errno);
    fprintf(f, "# sfl model dim=%zu\n", d);
    for (size_t j = 0; j < d; j++)
        if (x[j] != 0)
            fprintf(f, "%zu %.17g\n", j + 1, x[j]);
    if (ferror(f) | fclose(f))
        sim_die_sys(path, -EIO);
}

static void dump_data(const char *path, const fed_t *f)
{
    FILE *out = fopen(path, "w");
    int rc = 0;

    if (out == NULL)
        sim_die_sys(path, -errno);
    for (uint32_t c = 0; c < f->nclients && rc == 0; c++)
        rc = sfl_libsvm_write(out, f->train[c]);
    if (rc < 0 || ferror(out) | fclose(out))
        rc < 0 ? sim_die(path, rc) : sim_die_sys(path, -EIO);
    if (f->truth) {
        char tpath[4096];

        snprintf(tpath, sizeof(tpath), "%s.truth", path);
        sim_write_model(tpath, f->truth, f->ncols);
    }
}

/* mkdir -p: dir and its missing parents (0755, as a user's mkdir would). */
void sim_make_dirs(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof(path))
        sim_usage_error("--dump-shards: bad directory name", dir);
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        struct stat st;

        if (path[i] != '/' && path[i] != '\0')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "sfl-sim: error: cannot create directory %s: %s\n", path,
                    strerror(errno));
            exit(1);
        }
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "sfl-sim: error: %s is not a directory\n", path);
            exit(1);
        }
        path[i] = dir[i];
    }
}

/* --dump-shards: one LibSVM file per client, for agents of a networked
 * federation that should see exactly the simulated clients' data. DIR is
 * created if missing. */
static void dump_shards(const char *dir, const fed_t *f)
{
    sim_make_dirs(dir);
    for (uint32_t c = 0; c < f->nclients; c++) {
        char path[4096];
        FILE *out;
        int rc;

        snprintf(path, sizeof(path), "%s/client-%u.svm", dir, c);
        out = fopen(path, "w");
        if (out == NULL)
            sim_die_sys(path, -errno);
        rc = sfl_libsvm_write(out, f->train[c]);
        if (rc < 0 || ferror(out) | fclose(out))
            rc < 0 ? sim_die(path, rc) : sim_die_sys(path, -EIO);
        /* a client's own test part, when it has one (an agent's eval_file) */
        if (f->ntest != f->nclients || f->test[c] == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/client-%u.test.svm", dir, c);
        if ((out = fopen(path, "w")) == NULL)
            sim_die_sys(path, -errno);
        rc = sfl_libsvm_write(out, f->test[c]);
        if (rc < 0 || ferror(out) | fclose(out))
            rc < 0 ? sim_die(path, rc) : sim_die_sys(path, -EIO);
    }
    if (f->truth) {
        char path[4096];

        snprintf(path, sizeof(path), "%s/truth", dir);
        sim_write_model(path, f->truth, f->ncols);
    }
}

double sim_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int parse_encoding(const char *s, sfl_enc_t *e)
{
    if (strcmp(s, "f64") == 0)
        *e = SFL_ENC_F64;
    else if (strcmp(s, "f32") == 0)
        *e = SFL_ENC_F32;
    else if (strcmp(s, "q8") == 0)
        *e = SFL_ENC_Q8;
    else
        return -1;
    return 0;
}

/* Sends v through the codec: *bytes += its size, and v is replaced by what
 * the receiver decodes (identical for f64). */
static void wire(sfl_spvec_t **v, sfl_enc_t enc, uint8_t **buf, size_t *cap, uint64_t *bytes)
{
    size_t need = sfl_spcodec_size(*v, enc), len;
    sfl_spvec_t *back;
    int rc;

    if (need > *cap) {
        free(*buf);
        *buf = malloc(need);
        if (*buf == NULL)
            sim_die("wire", SFL_ENOMEM);
        *cap = need;
    }
    rc = sfl_spcodec_encode(*v, enc, *buf, *cap, &len);
    if (rc < 0)
        sim_die("encode", rc);
    *bytes += len;
    if (enc == SFL_ENC_F64)
        return;
    rc = sfl_spcodec_decode(*buf, len, (*v)->dim, (*v)->dim, &back);
    if (rc < 0)
        sim_die("decode", rc);
    sfl_spvec_free(*v);
    *v = back;
}

/* The gnuplot program of --plot. Every user string (the PNG path, the data
 * file, the title) arrives as an argument of `gnuplot -c` (ARG1..ARG4) and
 * is used as a string value, never pasted into the program text, so quotes,
 * spaces or newlines in a file name cannot change what gnuplot runs. */
static const char plot_script[] =
    "set terminal pngcairo size 800,500 noenhanced\n"
    "set output ARG1\n"
    "set logscale y\n"
    "set xlabel 'round'\n"
    "set ylabel 'objective'\n"
    "set grid\n"
    "set title ARG3\n"
    "plot ARG2 using 1:2 with lines lw 2 title ARG4\n"
    "unset output\n";

static int write_file(const char *path, const char *text, const double *obj, uint32_t n)
{
    FILE *f = fopen(path, "w");
    int ok;

    if (f == NULL)
        return -errno;
    if (text != NULL)
        fputs(text, f);
    for (uint32_t t = 0; t < n; t++)
        if (isfinite(obj[t]) && obj[t] > 0) /* a log scale has no room for the rest */
            fprintf(f, "%u %.17g\n", t + 1, obj[t]);
    ok = !ferror(f);
    if (fclose(f) != 0 || !ok)
        return -EIO;
    return 0;
}

/* gnuplot's complaint in its stderr file: the text after "line N: " of the
 * first line that has one (gnuplot's error format), else the last
 * non-empty line; "" when there is none. */
static void gnuplot_reason(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    char line[512];
    int found = 0;

    out[0] = '\0';
    while (f && !found && fgets(line, sizeof(line), f)) {
        char *p = strstr(line, "\" line "), *e;
        const char *src;

        line[strcspn(line, "\n")] = '\0';
        if (p && (e = strstr(p, ": ")) != NULL) {
            src = e + 2;
            found = 1;
        } else if (line[strspn(line, " \t^")] != '\0') {
            src = line;
        } else {
            continue;
        }
        {
            size_t n = strlen(src) < cap - 1 ? strlen(src) : cap - 1;

            memcpy(out, src, n);
            out[n] = '\0';
        }
    }
    if (f)
        fclose(f);
}

/* How to get gnuplot (Debian; make test and make demo install it). */
#define GNUPLOT_HOW                                                                           \
    ": gnuplot is not installed (sudo apt-get install gnuplot-nox, or make deps-test)"

/* Draws obj[0..n) (the objective of rounds 1..n) into png with gnuplot.
 * The data and the program go through a private temporary directory
 * ($TMPDIR or /tmp) that is removed before returning, whatever happens.
 * Returns 0, or fills why and returns -1: the caller only warns, the
 * simulation's CSV is already out. */
int sim_plot(const char *png, const double *obj, uint32_t n, const sim_cfg_t *cfg, char *why,
                size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    char dir[4096], data[4200], prog[4200], errs[4200], title[512], said[256];
    posix_spawn_file_actions_t fa;
    char *argv[] = {"gnuplot", "-c", prog, (char *)png, data, title, cfg->algo, NULL};
    pid_t pid;
    int rc, status = 0, made = 0;

    if (tmp == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    if ((size_t)snprintf(dir, sizeof(dir), "%s/sfl-sim-plot-XXXXXX", tmp) >= sizeof(dir)) {
        snprintf(why, cap, "TMPDIR is too long");
        return -1;
    }
    if (mkdtemp(dir) == NULL) {
        snprintf(why, cap, "cannot make a temporary directory in %s: %s", tmp, strerror(errno));
        return -1;
    }
    snprintf(data, sizeof(data), "%s/objective.dat", dir);
    snprintf(prog, sizeof(prog), "%s/plot.gp", dir);
    snprintf(errs, sizeof(errs), "%s/gnuplot.err", dir);
    snprintf(title, sizeof(title), "%s on %s", cfg->algo, cfg->data);
    rc = -1;
    if ((made = write_file(data, NULL, obj, n)) < 0 || write_file(prog, plot_script, obj, 0) < 0) {
        snprintf(why, cap, "cannot write the plot's input in %s: %s", tmp,
                 strerror(made < 0 ? -made : EIO));
        goto out;
    }
    fflush(NULL); /* nothing of ours may be written twice by the child */
    /* gnuplot reads nothing from us and its messages are summed up in our
     * one warning line. */
    if ((errno = posix_spawn_file_actions_init(&fa)) != 0) {
        snprintf(why, cap, "cannot run gnuplot: %s", strerror(errno));
        goto out;
    }
    if ((errno = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) == 0 &&
        (errno = posix_spawn_file_actions_addopen(&fa, 1, errs, O_WRONLY | O_CREAT | O_TRUNC,
                                                  0600)) == 0 &&
        (errno = posix_spawn_file_actions_adddup2(&fa, 1, 2)) == 0)
        errno = posix_spawnp(&pid, "gnuplot", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (errno != 0) {
        int err = errno;

        snprintf(why, cap, "cannot run gnuplot: %s%s", strerror(err),
                 err == ENOENT ? GNUPLOT_HOW : "");
        goto out;
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, cap, "waiting for gnuplot: %s", strerror(errno));
            goto out;
        }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            snprintf(why, cap, "cannot run gnuplot%s", GNUPLOT_HOW);
        else {
            gnuplot_reason(errs, said, sizeof(said));
            snprintf(why, cap, "gnuplot failed (%s %d)%s%s",
                     WIFEXITED(status) ? "exit status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                     said[0] ? ": " : "", said);
        }
        goto out;
    }
    rc = 0;
out:
    unlink(data);
    unlink(prog);
    unlink(errs);
    rmdir(dir);
    return rc;
}

/* The metric columns of one CSV row for the model x (md entries); returns
 * the objective. */
static double write_metrics(FILE *out, uint32_t t, const fed_t *f, const sfl_loss_t *loss,
                            const double *x, size_t md, double lambda, int has_truth,
                            int has_support, int has_acc)
{
    double objective = sfl_eval_objective(loss, f->train, f->nclients, f->weight, x, lambda);

    fprintf(out, "%u,%.10g", t, objective);
    if (has_truth)
        fprintf(out, ",%.10g", sfl_eval_rel_error(x, f->truth, md));
    if (has_support) {
        double pr, rec;

        sfl_eval_support(x, md, f->support, f->nsupport, &pr, &rec);
        fprintf(out, ",%.6f,%.6f", pr, rec);
    }
    if (has_acc) {
        /* Accuracy over the union of the test parts. */
        double correct = 0, total = 0;

        for (uint32_t i = 0; i < f->ntest; i++) {
            uint32_t n = f->test[i]->X->nrows;

            if (n == 0)
                continue;
            correct += sfl_loss_accuracy(loss, f->test[i], x) * n;
            total += n;
        }
        fprintf(out, ",%.6f", total > 0 ? correct / total : NAN);
    }
    return objective;
}

/* A personalized algorithm's second figure: the sample-weighted mean, over
 * the clients that have trained, of each one's objective on its own
 * training data at its personal model (docs/design.md, "Shapes"). */
static double personal_objective(const sfl_algo_t *algo, const sfl_algo_params_t *p,
                                 const sfl_problem_t *prob, const fed_t *f,
                                 const sfl_client_state_t *cs, double *model)
{
    double sum = 0, wsum = 0, lambda = sfl_algo_params_ridge(p);

    for (uint32_t c = 0; c < f->nclients; c++) {
        if (cs[c].mem == NULL || f->train[c]->X->nrows == 0)
            continue;
        if (algo->personal_model(p, prob, cs[c].mem, model) < 0)
            sim_die("personal model", SFL_EINVAL);
        sum += f->weight[c] * sfl_loss_eval(prob->loss, f->train[c], NULL, 0, model, lambda, NULL);
        wsum += f->weight[c];
    }
    return wsum > 0 ? sum / wsum : NAN;
}

/* A personalized algorithm's accuracy: every client's model on its own
 * test part (a client that has not trained yet uses the global model),
 * pooled over the clients (correct / rows), as pFedMe's evaluation does. */
static double personal_accuracy(const sfl_algo_t *algo, const sfl_algo_params_t *p,
                                const sfl_problem_t *prob, const fed_t *f,
                                const sfl_client_state_t *cs, const double *global,
                                double *model)
{
    double correct = 0, total = 0;

    for (uint32_t c = 0; c < f->nclients; c++) {
        const sfl_dataset_t *t = f->test[c];
        const double *x = global;

        if (t == NULL || t->X->nrows == 0)
            continue;
        if (cs[c].mem) {
            if (algo->personal_model(p, prob, cs[c].mem, model) < 0)
                sim_die("personal model", SFL_EINVAL);
            x = model;
        }
        correct += sfl_loss_accuracy(prob->loss, t, x) * t->X->nrows;
        total += t->X->nrows;
    }
    return total > 0 ? correct / total : NAN;
}

/* An sfl-sim default for a parameter, where the algorithm has it. */
static void set_sim_default(sfl_algo_params_t *p, const char *name, double v)
{
    if (sfl_algo_param_find(p->algo, name) != NULL && sfl_algo_param_set(p, name, v) < 0) {
        fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
        exit(2);
    }
}

int main(int argc, char **argv)
{
    sim_cfg_t cfg;
    fed_t fed = {0};
    const sfl_algo_t *algo;
    sfl_algo_params_t params;
    sfl_problem_t prob;
    const sfl_loss_t *loss;
    sfl_enc_t enc;
    FILE *out = stdout;
    double *objs = NULL; /* every round's objective, for --plot */
    int rc, progress;

    if (sim_options(argc, argv, &cfg) < 0)
        return 2;
    algo = sfl_algo_find(cfg.algo);
    if (algo == NULL && sfl_algo_unknown(cfg.algo) < 0)
        sim_usage_error(sfl_last_error(), NULL); /* --algo: the valid ones, the nearest */
    if (parse_encoding(cfg.encoding, &enc) < 0)
        sim_usage_error("unknown --encoding (f64, f32, q8)", cfg.encoding);
    if (cfg.clients == 0 || cfg.rounds == 0 || cfg.eval_every == 0)
        sim_usage_error("--clients, --rounds and --eval-every must be at least 1", NULL);
    if (!(cfg.test_frac >= 0 && cfg.test_frac < 1))
        sim_usage_error("--test-frac must be in [0, 1)", NULL);
    /* --secagg simulates the horizontal exchange: one vector per client
     * folded into one global state. */
    if (cfg.secagg) {
        if (strncmp(cfg.partition, "features:", 9) == 0)
            sim_usage_error("--secagg simulates horizontal algorithms only, not "
                            "--partition features:K", NULL);
        if (algo->shape != SFL_SHAPE_HORIZONTAL) {
            fprintf(stderr, "sfl-sim: error: --secagg simulates horizontal algorithms only; "
                            "%s is %s\n", algo->name,
                    algo->shape == SFL_SHAPE_VERTICAL ? "vertical" : "personalized");
            exit(2);
        }
        if (enc != SFL_ENC_F64)
            sim_usage_error("--secagg sends quantized words; --encoding does not apply",
                            cfg.encoding);
        if (!(cfg.sa_clip > 0))
            sim_usage_error("--secagg-clip must be > 0", NULL);
        if (cfg.sa_wmax < 0)
            sim_usage_error("--secagg-max-weight must be >= 0 (0: the largest client's samples)",
                            NULL);
    } else if (cfg.given[SIM_OPT_SA] && !cfg.quiet) {
        fprintf(stderr, "sfl-sim: note: the --secagg-* options apply with --secagg only; ignored\n");
    }
    /* Column blocks (--partition features:K) and the vertical algorithms
     * have a driver of their own (vertical.c). */
    if (strncmp(cfg.partition, "features:", 9) == 0 || algo->shape == SFL_SHAPE_VERTICAL) {
        if (cfg.standardize)
            sim_usage_error("--standardize applies to horizontal runs, not to --partition "
                            "features:K or a vertical algorithm", NULL);
        rc = sim_vertical(&cfg, algo);
        sim_cfg_free(&cfg);
        return rc;
    }

    /* Data. */
    if (strncmp(cfg.data, "synth:", 6) == 0) {
        load_synth(&fed, cfg.data + 6, &cfg);
    } else if (sfl_dataset_spec_check(cfg.data) == 0) {
        char *colon = strchr(cfg.data, ':');

        *colon = '\0';
        if (!cfg.given[SIM_OPT_TEST_FRAC] && cfg.test == NULL)
            cfg.test_frac = is_pfedme(cfg.partition) ? 0.25 : 0.2;
        load_file(&fed, cfg.data, colon + 1, &cfg);
        *colon = ':';
        /* pFedMe's splits say what they share even with --quiet: the
         * report quotes pfedme2020's overlap against pfedme's none */
        if (!cfg.quiet || is_pfedme(cfg.partition))
            sim_overlap_summary(fed.train, fed.nclients, fed.test, fed.ntest);
    } else {
        sim_usage_error("--data must be synth:KIND, " SFL_DATASET_SPEC_FORMS, cfg.data);
    }
    loss = fed.loss;
    rc = sfl_problem_init(&prob, loss, fed.ncols, fed.nclasses);
    if (rc < 0)
        sim_die("problem", rc);
    sfl_dict_t *dict = NULL;
    if (cfg.dictionary && cfg.dictionary[0]) {
        load_dictionary(&cfg, fed.ncols, &dict);
        if ((rc = sfl_dict_attach(&prob, dict)) < 0)
            sim_die("dictionary", rc);
    }
    /* The statistics come from the clients' training parts before
     * --centralized pools them (the same sums either way); the dumps below
     * write raw rows, so the transform is applied after them. */
    double *std_mu = NULL, *std_scale = NULL;
    if (cfg.standardize) {
        std_mu = sim_xcalloc(fed.ncols, sizeof(double));
        std_scale = sim_xcalloc(fed.ncols, sizeof(double));
        sim_standardizer(fed.train, fed.nclients, fed.ncols, cfg.standardize_eps, std_mu,
                         std_scale);
    }
    if (cfg.centralized) {
        if (cfg.cohort)
            sim_usage_error("--centralized and --cohort exclude each other", NULL);
        centralize(&fed);
    }
    if (cfg.dump_data)
        dump_data(cfg.dump_data, &fed);
    if (cfg.dump_shards) {
        dump_shards(cfg.dump_shards, &fed);
        free(std_mu);
        free(std_scale);
        sfl_dict_free(dict);
        fed_free(&fed);
        sim_cfg_free(&cfg);
        return 0;
    }
    if (cfg.standardize) {
        sim_standardize_apply(fed.train, fed.nclients, fed.ncols, std_mu, std_scale);
        sim_standardize_apply(fed.test, fed.test ? fed.ntest : 0, fed.ncols, std_mu, std_scale);
        free(std_mu);
        free(std_scale);
    }

    /* Parameters: given values, else sfl-sim's experiment defaults (tau 200;
     * the paper grid's best lr and K for this data; lambda 1e-4 for
     * classification), else the algorithm's table. */
    sfl_algo_params_default(algo, &params);
    {
        double lr;
        uint32_t k;
        int have = sim_paper_defaults(fed.preset, cfg.algo, &lr, &k);

        set_sim_default(&params, "tau", 200);
        if (loss->classification && sfl_algo_ridge_def(algo))
            set_sim_default(&params, sfl_algo_ridge_def(algo)->name, 1e-4);
        if (have) {
            set_sim_default(&params, "lr", lr);
            set_sim_default(&params, "local_steps", k);
        }
        if (sfl_algo_params_tau(&params) > prob.dim / prob.nblocks)
            set_sim_default(&params, "tau", (double)(prob.dim / prob.nblocks));
    }
    for (uint32_t i = 0; i < cfg.nparams; i++) {
        if (sfl_algo_param_find(algo, cfg.params[i].name) == NULL) {
            if (!cfg.quiet)
                fprintf(stderr, "sfl-sim: note: %s has no parameter '%s'; ignored\n",
                        algo->name, cfg.params[i].name);
            continue;
        }
        if (sfl_algo_param_parse(&params, cfg.params[i].name, cfg.params[i].text) < 0) {
            fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
            return 2;
        }
    }
    if (cfg.centralized && sfl_algo_param_find(algo, "local_steps"))
        set_sim_default(&params, "local_steps", 1); /* one round = one step */
    rc = sfl_algo_check(algo, &params, &prob);
    if (rc < 0) {
        fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
        return 2;
    }

    /* p_i proportional to local sample counts; empty clients sit out. */
    fed.weight = sim_xcalloc(fed.nclients, sizeof(double));
    uint32_t active = 0;
    for (uint32_t c = 0; c < fed.nclients; c++) {
        fed.weight[c] = fed.train[c]->X->nrows;
        active += fed.train[c]->X->nrows > 0;
    }
    if (active == 0)
        sim_usage_error("no client has any data", NULL);
    if (active < fed.nclients && !cfg.quiet)
        fprintf(stderr, "sfl-sim: note: %u of %u clients have no data and sit out\n",
                fed.nclients - active, fed.nclients);

    /* Output: the CSV goes out row by row as rounds finish (flushed), with
     * or without --plot, so an interrupted or failed run keeps every
     * finished round. */
    if (cfg.plot)
        objs = sim_xcalloc(cfg.rounds, sizeof(double));
    if (cfg.output) {
        out = fopen(cfg.output, "w");
        if (out == NULL) {
            fprintf(stderr, "sfl-sim: error: cannot write %s: %s\n", cfg.output,
                    strerror(errno));
            return 1;
        }
    }
    int has_truth = fed.truth != NULL, has_support = fed.support != NULL && dict == NULL;
    int has_acc = loss->classification && fed.ntest > 0;
    int has_personal = algo->shape == SFL_SHAPE_PERSONALIZED && algo->personal_model != NULL;
    int has_pacc = has_personal && has_acc && fed.ntest == fed.nclients && dict == NULL;
    /* support_churn sits before wall_ms, so scripts reading bytes_up,
     * bytes_down by position and wall_ms as the last column keep working. */
    fprintf(out, "round,objective%s%s%s%s%s,nnz,bytes_up,bytes_down,support_churn,wall_ms\n",
            has_truth ? ",rel_error" : "",
            has_support ? ",support_precision,support_recall" : "",
            has_acc ? ",test_accuracy" : "", has_personal ? ",personal_objective" : "",
            has_pacc ? ",personal_accuracy" : "");
    progress = !cfg.quiet && isatty(STDERR_FILENO);

    /* Rounds. */
    size_t d = prob.dim, md = sfl_loss_dim(loss, fed.ncols, fed.nclasses);
    double *global = sim_xcalloc(d, sizeof(double));
    /* The coordinator's start for the same seed (a random MLP, else 0). */
    if (dict == NULL)
        sfl_loss_init_model(loss, fed.ncols, fed.nclasses, cfg.seed, global);
    /* The model the metrics see: the state itself, or model_of(state) (a
     * dictionary's A c, FedDualAvg's thresholded dual). */
    double *model = algo->model_of ? sim_xcalloc(md, sizeof(double)) : global;
    uint32_t *ids = sim_xcalloc(active, sizeof(uint32_t));
    uint32_t *pick = sim_xcalloc(active, sizeof(uint32_t));
    uint32_t nids = 0, npick;
    double *bcast = sim_xcalloc(d, sizeof(double));
    sfl_spvec_t *gsp = NULL, *upd = NULL;
    sfl_algo_ws_t ws;
    sfl_fold_t agg;
    uint8_t *buf = NULL;
    size_t cap = 0;
    double t0 = sim_now_ms(), objective = NAN;
    uint64_t churn = 0; /* support changes since the last row written */

    for (uint32_t c = 0; c < fed.nclients; c++)
        if (fed.weight[c] > 0)
            ids[nids++] = c;
    npick = cfg.cohort && cfg.cohort < nids ? cfg.cohort : nids;
    sim_sa_t *sa = NULL; /* --secagg */
    if (cfg.secagg) {
        double w_big = 0;

        for (uint32_t c = 0; c < fed.nclients; c++)
            w_big = fed.weight[c] > w_big ? fed.weight[c] : w_big;
        sa = sim_sa_new(&cfg, &params, &prob, fed.nclients, w_big, npick);
    }
    sfl_algo_ws_init(&ws);
    /* One client state per virtual client, made when it first trains. */
    sfl_client_state_t *cstate = sim_xcalloc(fed.nclients, sizeof(*cstate));
    double *pmodel = sim_xcalloc(md, sizeof(double)); /* a personal model */
    /* No bound on norm or weight: simulated clients are not hostile, and a
     * diverging run (a step size too large, as some experiments show on
     * purpose) must run to its end as it would without the fold's bounds.
     * Values must still be finite. */
    rc = sfl_fold_init(&agg, algo, &params, &prob,
                       &(sfl_fold_limits_t){.max_norm = DBL_MAX, .max_weight = DBL_MAX});
    if (rc < 0)
        sim_die("aggregator", rc);
    /* One update message for every client of every round: each client
     * rewrites it whole, and its storage stays grown instead of being
     * allocated afresh per client. */
    if ((rc = sfl_spvec_new((uint32_t)d, 0, &upd)) < 0)
        sim_die("update", rc);
    for (uint32_t t = 1; t <= cfg.rounds; t++) {
        uint64_t up = 0, down = 0;

        /* Broadcast x_t as the coordinator does: exactly (float64), so
         * clients train from the very state the fold aggregates into; the
         * job's encoding applies to the clients' updates. */
        if ((rc = sfl_spvec_new((uint32_t)d, 0, &gsp)) < 0 ||
            (rc = sfl_spvec_from_dense(gsp, global)) < 0)
            sim_die("broadcast", rc);
        wire(&gsp, SFL_ENC_F64, &buf, &cap, &down);
        down *= npick;
        memset(bcast, 0, d * sizeof(double));
        sfl_spvec_scatter(gsp, bcast);
        sfl_spvec_free(gsp);

        /* The round's cohort: all clients with data, or L of them drawn from
         * (seed, round) so any round's cohort can be replayed. */
        if (npick < nids) {
            sfl_rng_t r;

            sfl_rng_seed(&r, cfg.seed, t, 0, SFL_STREAM_COHORT);
            if ((rc = sfl_rng_sample(&r, nids, npick, pick)) < 0)
                sim_die("cohort", rc);
        } else {
            for (uint32_t i = 0; i < nids; i++)
                pick[i] = i;
        }
        sfl_fold_begin(&agg);
        if (sa)
            sim_sa_begin(sa, t, global);
        for (uint32_t i = 0; i < npick; i++) {
            uint32_t c = ids[pick[i]];

            /* The agent's client round (sfl_client_round), with this
             * virtual client's own state; targets are class indices
             * already. */
            sfl_client_task_t ct = {.algo = algo, .params = &params, .prob = &prob,
                                    .global = bcast, .seed = cfg.seed, .round = t,
                                    .client = c};

            if (cstate[c].algo == NULL &&
                (rc = sfl_client_state_new(algo, &params, &prob, &cstate[c])) < 0)
                sim_die("client state", rc);
            rc = sfl_client_round(&ct, fed.train[c], NULL, &cstate[c], &ws, upd, NULL);
            if (rc < 0) {
                fprintf(stderr, "\nsfl-sim: error: round %u client %u: %s\n", t, c,
                        sfl_error_message(rc));
                return 1;
            }
            if (sa) {
                up += sim_sa_add(sa, t, c, bcast, upd, fed.weight[c]);
                continue;
            }
            wire(&upd, enc, &buf, &cap, &up);
            if ((rc = sfl_fold_add(&agg, upd, fed.weight[c])) < 0)
                sim_die("aggregate", rc);
        }
        /* The server decodes one weighted mean; it is the round's only
         * update (the weight cancels in the mean). */
        if (sa) {
            sim_sa_finish(sa, global, upd);
            if ((rc = sfl_fold_add(&agg, upd, 1.0)) < 0)
                sim_die("aggregate", rc);
        }
        if ((rc = sfl_fold_finish(&agg, global)) < 0)
            sim_die("aggregate", rc);
        /* bcast holds x_t exactly (the broadcast's nonzeros, zeros elsewhere),
         * so this is the round's churn from x_t to x_{t+1}; rounds without a
         * row add up into the next one. */
        churn += sfl_dvec_support_diff(bcast, global, d);

        /* Metrics of x_{t+1} (on the rounds --eval-every asks for). */
        if (t % cfg.eval_every != 0 && t != 1 && t != cfg.rounds) {
            if (objs)
                objs[t - 1] = NAN;
            continue;
        }
        if (algo->model_of &&
            (rc = algo->model_of(&params, &prob, global, model, &agg.topk)) < 0)
            sim_die("model", rc);
        objective = write_metrics(out, t, &fed, loss, model, md,
                                  sfl_algo_params_ridge(&params), has_truth,
                                  has_support, has_acc);
        if (has_personal)
            fprintf(out, ",%.10g", personal_objective(algo, &params, &prob, &fed, cstate, pmodel));
        if (has_pacc)
            fprintf(out, ",%.6f",
                    personal_accuracy(algo, &params, &prob, &fed, cstate, model, pmodel));
        fprintf(out, ",%zu,%llu,%llu,%llu,%.1f\n", sfl_dvec_nnz(global, d),
                (unsigned long long)up, (unsigned long long)down, (unsigned long long)churn,
                cfg.no_wall_clock ? 0.0 : sim_now_ms() - t0);
        churn = 0;
        if (fflush(out) != 0) {
            fprintf(stderr, "\nsfl-sim: error: writing the CSV: %s\n", strerror(errno));
            return 1;
        }
        if (objs)
            objs[t - 1] = objective;
        if (progress)
            fprintf(stderr, "\rsfl-sim: round %u/%u objective %.6g nnz %zu   ", t, cfg.rounds,
                    objective, sfl_dvec_nnz(global, d));
    }
    if (progress)
        fputc('\n', stderr);
    if (cfg.model_out)
        sim_write_model(cfg.model_out, model, md);
    if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
        fprintf(stderr, "sfl-sim: error: writing the CSV: %s\n", strerror(errno));
        return 1;
    }
    if (cfg.plot) {
        char why[512];

        /* The run succeeded and its CSV is out: a plot that cannot be drawn
         * is worth a warning, not a failed run. */
        if (sim_plot(cfg.plot, objs, cfg.rounds, &cfg, why, sizeof(why)) < 0)
            fprintf(stderr, "sfl-sim: warning: no plot written to %s: %s\n", cfg.plot, why);
        free(objs);
    }
    if (!cfg.quiet) {
        struct rusage ru;
        sfl_param_list_t pl;

        getrusage(RUSAGE_SELF, &ru);
        sfl_algo_params_to_list(&params, &pl);
        fprintf(stderr, "sfl-sim: algo=%s data=%s clients=%u rounds=%u", algo->name, cfg.data,
                fed.nclients, cfg.rounds);
        for (uint32_t i = 0; i < pl.n; i++)
            fprintf(stderr, " %s=%g", pl.v[i].name, pl.v[i].value);
        fprintf(stderr, " objective=%.6g nnz=%zu wall_ms=%.0f peak_rss_kb=%ld\n", objective,
                sfl_dvec_nnz(global, d), sim_now_ms() - t0, ru.ru_maxrss);
        if (sa)
            sim_sa_summary(sa, stderr);
    }
    sim_sa_free(sa);
    free(buf);
    sfl_spvec_free(upd);
    if (model != global)
        free(model);
    free(ids);
    free(pick);
    sfl_dict_free(dict);
    free(global);
    free(bcast);
    sfl_fold_close(&agg);
    for (uint32_t c = 0; c < fed.nclients; c++)
        sfl_client_state_free(&cstate[c]);
    free(cstate);
    free(pmodel);
    sfl_algo_ws_close(&ws);
    fed_free(&fed);
    sim_cfg_free(&cfg);
    return 0;
}

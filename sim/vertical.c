/* sfl-sim's vertical driver (--partition features:K; docs/design.md
 * section 3, "Shapes"). The data's columns go in K balanced contiguous
 * blocks (eq. 11 of seed 003), one per virtual client, every client with
 * all the rows; each iteration runs every client's step in client order,
 * then the server's, through the same calls an agent and the coordinator
 * make (sfl_vertical_client_step, server_step). The model stays at the
 * server; the metrics see it against the pooled columns. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sfl/dp/dp.h"
#include "sfl/model/eval.h"
#include "sfl/data/libsvm.h"
#include "sfl/data/synth.h"
#include "sfl/algo/vertical.h"
#include "sim.h"

/* The data of a vertical run. */
typedef struct vdata {
    sfl_dataset_t *train;   /* every column of the training rows (owned) */
    sfl_dataset_t *test;    /* held-out rows, every column (owned), or NULL */
    const sfl_loss_t *loss;
    sfl_synth_t *synth;     /* the generator's output (truth, support), or NULL */
    uint32_t K;
    sfl_dataset_t **blocks; /* K column blocks of train (owned) */
} vdata_t;

static void vdata_free(vdata_t *v)
{
    for (uint32_t k = 0; v->blocks && k < v->K; k++)
        sfl_dataset_free(v->blocks[k]);
    free(v->blocks);
    sfl_dataset_free(v->train);
    sfl_dataset_free(v->test);
    sfl_synth_free(v->synth);
}

/* K of "features:K"; 0 if partition is something else. */
static uint32_t features_k(const char *partition)
{
    char *end;
    unsigned long k;

    if (strncmp(partition, "features:", 9) != 0)
        return 0;
    k = strtoul(partition + 9, &end, 10);
    if (end == partition + 9 || *end || partition[9] == '-' || k == 0 || k > UINT32_MAX)
        sim_usage_error("bad --partition features:K (K >= 1 clients)", partition);
    return (uint32_t)k;
}

/* A training part and a held-out part of all, split as the row driver
 * splits file data (seed, round 1), or all of it for training. */
static void split_rows(sfl_dataset_t *all, const sim_cfg_t *cfg, uint64_t round, vdata_t *v)
{
    sfl_rng_t r;
    int rc;

    if (!(cfg->test_frac > 0)) {
        v->train = all;
        return;
    }
    sfl_rng_seed(&r, cfg->seed, round, 0, SFL_STREAM_PARTITION);
    if ((rc = sfl_dataset_split(all, cfg->test_frac, &r, &v->train, &v->test)) < 0)
        sim_die("test split", rc);
    sfl_dataset_free(all);
}

static void load_synth(const char *kind, sim_cfg_t *cfg, vdata_t *v)
{
    sfl_synth_params_t p;
    sfl_dataset_t *all;
    uint32_t nc;
    int rc;

    /* one client's rows: --samples of them, every column */
    sim_synth_params(kind, cfg, &p);
    p.nclients = 1;
    if ((rc = sfl_synth_generate(&p, &v->synth)) < 0)
        sim_die("synthetic data", rc);
    nc = v->synth->clients[0]->nclasses;
    v->loss = nc == 0 ? &sfl_loss_lsq : nc == 2 ? &sfl_loss_logistic : &sfl_loss_softmax;
    if (cfg->loss && cfg->loss[0] && (v->loss = sfl_loss_find(cfg->loss)) == NULL)
        sim_usage_error("unknown loss (lsq, logistic, sqhinge, softmax, " SFL_LOSS_MLP_FORMS ")",
                        cfg->loss);
    /* the generator keeps its client; training works on a copy */
    all = v->synth->clients[0];
    v->synth->clients[0] = NULL;
    v->synth->nclients = 0;
    split_rows(all, cfg, 0, v);
}

static void load_file(char *spec, sim_cfg_t *cfg, vdata_t *v)
{
    char *colon = strchr(spec, ':');
    sfl_dataset_t *all = NULL, *test = NULL;
    int rc;

    *colon = '\0';
    if ((rc = sim_read_file(spec, colon + 1, 0, &all)) < 0)
        sim_die(colon + 1, rc);
    if (cfg->test) {
        if ((rc = sim_read_file(spec, cfg->test, all->X->ncols, &test)) < 0)
            sim_die(cfg->test, rc);
        if ((rc = sfl_dataset_set_ncols(all, test->X->ncols)) < 0)
            sim_die(cfg->test, rc);
    }
    *colon = ':';
    v->loss = sim_choose_loss(cfg, all);
    if (v->loss->classification) {
        if ((rc = sfl_dataset_encode_labels(all, SFL_LOSS_MAX_CLASSES)) < 0)
            sim_die(colon + 1, rc);
        if (test)
            sim_code_test_labels(all, test, cfg->test);
    }
    if (test) {
        v->train = all;
        v->test = test;
        return;
    }
    if (!cfg->given[SIM_OPT_TEST_FRAC])
        cfg->test_frac = 0.2;
    split_rows(all, cfg, 1, v);
}

/* --dump-shards DIR for a vertical federation (docs/configuration.md):
 * client k's columns of the training rows in DIR/client-<k>.svm (its
 * features renumbered from 1), DIR/client-<k>.ids (line r: the sample id of
 * row r, the same in every shard), the held-out rows likewise in
 * client-<k>.test.svm and .test.ids, DIR/blocks (k col0 ncols per client),
 * and the truth, if known, in DIR/truth. */
static void write_ids(const char *path, uint32_t n, uint32_t id0)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        sim_die_sys(path, -errno);
    for (uint32_t r = 0; r < n; r++)
        fprintf(f, "%u\n", id0 + r);
    if (ferror(f) | fclose(f))
        sim_die_sys(path, -EIO);
}

static void write_shard(const char *path, const sfl_dataset_t *ds)
{
    FILE *f = fopen(path, "w");
    int rc;

    if (f == NULL)
        sim_die_sys(path, -errno);
    rc = sfl_libsvm_write(f, ds);
    if (rc < 0 || ferror(f) | fclose(f))
        rc < 0 ? sim_die(path, rc) : sim_die_sys(path, -EIO);
}

static void dump_shards(const char *dir, const vdata_t *v)
{
    uint32_t d = v->train->X->ncols, n = v->train->X->nrows;
    uint32_t nt = v->test ? v->test->X->nrows : 0;
    char path[4200];
    FILE *f;

    sim_make_dirs(dir);
    snprintf(path, sizeof(path), "%s/blocks", dir);
    if ((f = fopen(path, "w")) == NULL)
        sim_die_sys(path, -errno);
    fprintf(f, "# sfl vertical shards: features %u rows %u test_rows %u clients %u\n"
               "# client col0 ncols (feature j of client-<k>.svm is feature col0 + j)\n",
            d, n, nt, v->K);
    for (uint32_t k = 0; k < v->K; k++) {
        uint32_t col0, len;

        if (sfl_vertical_block(d, v->K, k, &col0, &len) < 0)
            sim_die("blocks", SFL_EINVAL);
        fprintf(f, "%u %u %u\n", k, col0, len);
    }
    if (ferror(f) | fclose(f))
        sim_die_sys(path, -EIO);
    for (uint32_t k = 0; k < v->K; k++) {
        uint32_t col0, len;
        sfl_dataset_t *tb;
        int rc;

        snprintf(path, sizeof(path), "%s/client-%u.svm", dir, k);
        write_shard(path, v->blocks[k]);
        snprintf(path, sizeof(path), "%s/client-%u.ids", dir, k);
        write_ids(path, n, 0);
        if (v->test == NULL)
            continue;
        if (sfl_vertical_block(d, v->K, k, &col0, &len) < 0 ||
            (rc = sfl_dataset_columns(v->test, col0, len, &tb)) < 0)
            sim_die("test shard", SFL_EINVAL);
        snprintf(path, sizeof(path), "%s/client-%u.test.svm", dir, k);
        write_shard(path, tb);
        sfl_dataset_free(tb);
        /* held-out rows continue the ids after the training rows */
        snprintf(path, sizeof(path), "%s/client-%u.test.ids", dir, k);
        write_ids(path, nt, n);
    }
    if (v->synth && v->synth->truth) {
        snprintf(path, sizeof(path), "%s/truth", dir);
        sim_write_model(path, v->synth->truth, d);
    }
}

/* Refusals that need no data: the shape against the partition, and the
 * row driver's options. */
static void check_options(const sim_cfg_t *cfg, const sfl_algo_t *algo, uint32_t K)
{
    char msg[256];

    if (K == 0) {
        snprintf(msg, sizeof(msg), "%s is a vertical algorithm (clients hold column blocks "
                 "of the same rows): give --partition features:K", algo->name);
        sim_usage_error(msg, NULL);
    }
    if (algo->shape != SFL_SHAPE_VERTICAL && !cfg->dump_shards) {
        snprintf(msg, sizeof(msg), "--partition features:K splits the columns, and %s is a "
                 "horizontal algorithm (clients hold rows): use bcfw or dpbcfw", algo->name);
        sim_usage_error(msg, NULL);
    }
    if (cfg->given[SIM_OPT_CLIENTS] && cfg->clients != K)
        sim_usage_error("--clients differs from K of --partition features:K", NULL);
    if (cfg->cohort || cfg->centralized || (cfg->dictionary && cfg->dictionary[0]))
        sim_usage_error("--cohort, --centralized and --dictionary apply to row partitions, "
                        "not features:K", NULL);
    if (cfg->given[SIM_OPT_ENCODING] && strcmp(cfg->encoding, "f64") != 0)
        sim_usage_error("vertical messages travel as float64: --encoding f64 only", NULL);
}

static void set_params(const sim_cfg_t *cfg, const sfl_algo_t *algo, sfl_algo_params_t *p)
{
    sfl_algo_params_default(algo, p);
    for (uint32_t i = 0; i < cfg->nparams; i++) {
        if (sfl_algo_param_find(algo, cfg->params[i].name) == NULL) {
            if (!cfg->quiet)
                fprintf(stderr, "sfl-sim: note: %s has no parameter '%s'; ignored\n",
                        algo->name, cfg->params[i].name);
            continue;
        }
        if (sfl_algo_param_parse(p, cfg->params[i].name, cfg->params[i].text) < 0) {
            fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
            exit(2);
        }
    }
}

/* One CSV row's metric columns; returns the objective. */
static double write_metrics(FILE *out, uint32_t round, const vdata_t *v, const double *x,
                            int has_truth, int has_support, int has_acc)
{
    sfl_dataset_t *tr = v->train;
    double one = 1.0, obj = sfl_eval_objective(v->loss, &tr, 1, &one, x, 0.0);
    uint32_t d = tr->X->ncols;

    fprintf(out, "%u,%.10g", round, obj);
    if (has_truth)
        fprintf(out, ",%.10g", sfl_eval_rel_error(x, v->synth->truth, d));
    if (has_support) {
        double pr, rec;

        sfl_eval_support(x, d, v->synth->support, v->synth->nsupport, &pr, &rec);
        fprintf(out, ",%.6f,%.6f", pr, rec);
    }
    if (has_acc)
        fprintf(out, ",%.6f", sfl_loss_accuracy(v->loss, v->test, x));
    return obj;
}

int sim_vertical(sim_cfg_t *cfg, const sfl_algo_t *algo)
{
    const sfl_vertical_ops_t *ops = algo->vertical;
    uint32_t K = features_k(cfg->partition), d, n;
    vdata_t v = {0};
    sfl_algo_params_t params;
    sfl_problem_t prob;
    sfl_vjob_t job = {0};
    sfl_vblock_t *blk;
    void *common = NULL, **state;
    double *global, *bcast, **msgs, *objs = NULL, t0, objective = NAN;
    size_t blen, mlen;
    uint64_t T, up1, down1;
    uint32_t steps;
    FILE *out = stdout;
    int rc, progress;

    check_options(cfg, algo, K);
    if (!(cfg->test_frac >= 0 && cfg->test_frac < 1))
        sim_usage_error("--test-frac must be in [0, 1)", NULL);
    v.K = K;
    if (strncmp(cfg->data, "synth:", 6) == 0)
        load_synth(cfg->data + 6, cfg, &v);
    else if (sfl_dataset_spec_check(cfg->data) == 0)
        load_file(cfg->data, cfg, &v);
    else
        sim_usage_error("--data must be synth:KIND, " SFL_DATASET_SPEC_FORMS, cfg->data);
    d = v.train->X->ncols;
    n = v.train->X->nrows;
    if (K > d) {
        char msg[128];

        snprintf(msg, sizeof(msg), "--partition features:%u: the data has %u features", K, d);
        sim_usage_error(msg, NULL);
    }
    if (cfg->dump_data) {
        char tpath[4200];

        /* the pooled training rows, every column, as the row driver writes */
        write_shard(cfg->dump_data, v.train);
        snprintf(tpath, sizeof(tpath), "%s.truth", cfg->dump_data);
        if (v.synth && v.synth->truth)
            sim_write_model(tpath, v.synth->truth, d);
    }
    v.blocks = sim_xcalloc(K, sizeof(*v.blocks));
    for (uint32_t k = 0; k < K; k++) {
        uint32_t col0, len;

        if ((rc = sfl_vertical_block(d, K, k, &col0, &len)) < 0 ||
            (rc = sfl_dataset_columns(v.train, col0, len, &v.blocks[k])) < 0)
            sim_die("column blocks", rc);
    }
    if (cfg->dump_shards) {
        dump_shards(cfg->dump_shards, &v);
        vdata_free(&v);
        return 0;
    }

    /* The job: the algorithm's table checks it all. */
    if ((rc = sfl_problem_init(&prob, v.loss, d, v.train->nclasses)) < 0)
        sim_die("problem", rc);
    set_params(cfg, algo, &params);
    steps = ops->steps(&params);
    T = (uint64_t)cfg->rounds * steps;
    job = (sfl_vjob_t){.algo = algo, .p = &params, .prob = &prob, .nrows = n,
                       .nclients = K, .iters = T, .seed = cfg->seed};
    if (sfl_vertical_check(&job) < 0) {
        fprintf(stderr, "sfl-sim: error: %s\n", sfl_last_error());
        vdata_free(&v);
        return 2;
    }
    if (ops->common_new && (rc = ops->common_new(&job, &common)) < 0)
        sim_die("the job's common part", rc);
    job.common = common;
    blk = sim_xcalloc(K, sizeof(*blk));
    state = sim_xcalloc(K, sizeof(*state));
    msgs = sim_xcalloc(K, sizeof(*msgs));
    mlen = ops->msg_len(&job);
    blen = ops->bcast_len(&job);
    for (uint32_t k = 0; k < K; k++) {
        uint32_t len;

        blk[k].client = k;
        blk[k].data = v.blocks[k];
        if (sfl_vertical_block(d, K, k, &blk[k].col0, &len) < 0)
            sim_die("blocks", SFL_EINVAL);
        if ((rc = ops->client_new(&job, &blk[k], &state[k])) < 0)
            sim_die("client state", rc);
        msgs[k] = sim_xcalloc(mlen, sizeof(double));
    }
    global = sim_xcalloc(d, sizeof(double));
    bcast = sim_xcalloc(blen, sizeof(double));
    up1 = (uint64_t)K * sfl_vertical_msg_bytes(&job) * steps;
    down1 = (uint64_t)K * sfl_vertical_bcast_bytes(&job) * steps;

    if (cfg->plot)
        objs = sim_xcalloc(cfg->rounds, sizeof(double));
    if (cfg->output && (out = fopen(cfg->output, "w")) == NULL) {
        fprintf(stderr, "sfl-sim: error: cannot write %s: %s\n", cfg->output, strerror(errno));
        return 1;
    }
    int has_truth = v.synth && v.synth->truth, has_support = v.synth && v.synth->support;
    int has_acc = v.loss->classification && v.test && v.test->X->nrows > 0;

    fprintf(out, "round,objective%s%s%s,nnz,bytes_up,bytes_down,wall_ms\n",
            has_truth ? ",rel_error" : "",
            has_support ? ",support_precision,support_recall" : "",
            has_acc ? ",test_accuracy" : "");
    progress = !cfg->quiet && isatty(STDERR_FILENO);
    t0 = sim_now_ms();
    for (uint32_t round = 1; round <= cfg->rounds; round++) {
        for (uint32_t s = 0; s < steps; s++) {
            uint64_t t = (uint64_t)(round - 1) * steps + s;

            for (uint32_t k = 0; k < K; k++) {
                sfl_dp_rng_t noise;

                /* seeded privacy noise: a simulation replays */
                sfl_dp_rng_seeded(&noise, cfg->seed, t, k);
                rc = sfl_vertical_client_step(&job, &blk[k], t, bcast, state[k], &noise,
                                              msgs[k]);
                if (rc < 0) {
                    fprintf(stderr, "\nsfl-sim: error: iteration %llu client %u: %s\n",
                            (unsigned long long)t + 1, k, sfl_error_message(rc));
                    return 1;
                }
            }
            if ((rc = ops->server_step(&job, t, (const double *const *)msgs, global,
                                       bcast)) < 0) {
                fprintf(stderr, "\nsfl-sim: error: iteration %llu server: %s\n",
                        (unsigned long long)t + 1, sfl_error_message(rc));
                return 1;
            }
        }
        if (round % cfg->eval_every != 0 && round != 1 && round != cfg->rounds) {
            if (objs)
                objs[round - 1] = NAN;
            continue;
        }
        objective = write_metrics(out, round, &v, global, has_truth, has_support, has_acc);
        fprintf(out, ",%zu,%llu,%llu,%.1f\n", sfl_dvec_nnz(global, d),
                (unsigned long long)up1, (unsigned long long)down1,
                cfg->no_wall_clock ? 0.0 : sim_now_ms() - t0);
        if (fflush(out) != 0) {
            fprintf(stderr, "\nsfl-sim: error: writing the CSV: %s\n", strerror(errno));
            return 1;
        }
        if (objs)
            objs[round - 1] = objective;
        if (progress)
            fprintf(stderr, "\rsfl-sim: iteration %u/%u objective %.6g nnz %zu   ", round,
                    cfg->rounds, objective, sfl_dvec_nnz(global, d));
    }
    if (progress)
        fputc('\n', stderr);
    if (cfg->model_out)
        sim_write_model(cfg->model_out, global, d);
    if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
        fprintf(stderr, "sfl-sim: error: writing the CSV: %s\n", strerror(errno));
        return 1;
    }
    if (cfg->plot) {
        char why[512];

        if (sim_plot(cfg->plot, objs, cfg->rounds, cfg, why, sizeof(why)) < 0)
            fprintf(stderr, "sfl-sim: warning: no plot written to %s: %s\n", cfg->plot, why);
        free(objs);
    }
    {
        /* what the run spent and what its clipping changed: one line, also
         * with --quiet, for a run that releases private noise */
        sfl_dp_spent_t sp;
        sfl_vclip_t cl, sum = {0};
        int priv = 0;

        if ((rc = sfl_vertical_privacy(&job, (uint64_t)cfg->rounds * steps, &sp, &priv)) < 0) {
            fprintf(stderr, "sfl-sim: error: %s\n", sfl_error_message(rc));
            return 1;
        }
        for (uint32_t k = 0; k < K && ops->clipped; k++) {
            ops->clipped(state[k], &cl);
            sum.rows += cl.rows;
            sum.entries += cl.entries;
            sum.residuals += cl.residuals;
            sum.residuals_seen += cl.residuals_seen;
        }
        if (priv) {
            sfl_dp_acct_t one; /* the scales of one iteration */

            sfl_dp_acct_init(&one);
            if ((rc = ops->account(&job, 1, &one)) < 0) {
                fprintf(stderr, "sfl-sim: error: %s\n", sfl_error_message(rc));
                return 1;
            }
            fprintf(stderr, "sfl-sim: privacy: delta=%.6g eps_paper=%.6g eps_rdp=%.6g "
                    "eps_rdp_tight=%.6g index_scale=%.6g index_sens=%.6g feature_sd=%.6g "
                    "feature_sens=%.6g clipped_row_blocks=%llu clipped_entries=%llu "
                    "clipped_residuals=%llu residuals=%llu\n", sfl_vertical_delta(&job),
                    sp.eps_paper, sp.eps_rdp, sp.eps_rdp_tight, one.e[0].scale, one.e[0].sens,
                    one.n > 1 ? one.e[1].scale : 0.0, one.n > 1 ? one.e[1].sens : 0.0,
                    (unsigned long long)sum.rows, (unsigned long long)sum.entries,
                    (unsigned long long)sum.residuals, (unsigned long long)sum.residuals_seen);
        }
    }
    if (!cfg->quiet) {
        struct rusage ru;
        sfl_param_list_t pl;

        getrusage(RUSAGE_SELF, &ru);
        sfl_algo_params_to_list(&params, &pl);
        fprintf(stderr, "sfl-sim: algo=%s data=%s clients=%u rounds=%u rows=%u", algo->name,
                cfg->data, K, cfg->rounds, n);
        for (uint32_t i = 0; i < pl.n; i++)
            fprintf(stderr, " %s=%g", pl.v[i].name, pl.v[i].value);
        fprintf(stderr, " objective=%.6g nnz=%zu wall_ms=%.0f peak_rss_kb=%ld\n", objective,
                sfl_dvec_nnz(global, d), sim_now_ms() - t0, ru.ru_maxrss);
    }
    for (uint32_t k = 0; k < K; k++) {
        ops->client_free(state[k]);
        free(msgs[k]);
    }
    if (ops->common_free)
        ops->common_free(common);
    free(state);
    free(msgs);
    free(blk);
    free(global);
    free(bcast);
    vdata_free(&v);
    return 0;
}

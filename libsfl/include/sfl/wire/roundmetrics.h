/* Round metrics: what a committed round's updates reported and what the
 * round made, declared once in sfl/wire/roundmetrics.def. The table drives the
 * coordinator's fold, its store, /metrics and status page, the wire's
 * JobStatus and JobHistory, and sflctl's jobs, watch and history. */
#ifndef SFL_WIRE_ROUNDMETRICS_H
#define SFL_WIRE_ROUNDMETRICS_H

#include <stddef.h>
#include <stdint.h>

#define SFL_METRIC_T_U64 uint64_t
#define SFL_METRIC_T_U32 uint32_t
#define SFL_METRIC_T_F64 double

/* One committed round's metrics (or, as a fold's sums, an attempt's). */
typedef struct sfl_round_metrics {
#define SFL_METRIC(name, type, ...) SFL_METRIC_T_##type name;
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
} sfl_round_metrics_t;

/* SFL_METRIC_ID(name): the metric's index in sfl_metrics[]. */
enum {
#define SFL_METRIC(name, ...) SFL_METRIC_ID_##name,
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    SFL_METRIC_COUNT
};
#define SFL_METRIC_ID(name) SFL_METRIC_ID_##name
#define SFL_METRIC_ID_none (-1)

typedef enum { SFL_METRIC_U64, SFL_METRIC_U32, SFL_METRIC_F64 } sfl_metric_type_t;

typedef enum {
    SFL_METRIC_WEIGHT, /* an update's reported count, summed */
    SFL_METRIC_MEAN,   /* an update's reported figure: the weighted mean */
    SFL_METRIC_TOTAL,  /* the coordinator's running sum over the attempt */
    SFL_METRIC_SET     /* set by the round at its commit */
} sfl_metric_fold_t;

/* Which jobs have a metric (else "n/a") and when a round has a value
 * (else empty): see sfl_metric_state. */
typedef enum {
    SFL_METRIC_REPORTED,  /* the agents reported training (samples > 0) */
    SFL_METRIC_EVAL_ROWS, /* horizontal jobs, once the agents reported */
    SFL_METRIC_EVAL_CLS,  /* horizontal classification jobs, held-out rows */
    SFL_METRIC_EVAL_LSQ,  /* horizontal least-squares jobs, held-out rows */
    SFL_METRIC_PERSONAL,  /* personalized classification jobs, held-out rows */
    SFL_METRIC_KEPT,      /* every round whose metrics were kept */
    SFL_METRIC_HORIZ,     /* horizontal jobs, every round whose metrics were kept */
    SFL_METRIC_PRIVATE    /* private jobs (privacy_iterations > 0) */
} sfl_metric_when_t;

typedef enum { SFL_METRIC_SHOW_NONE, SFL_METRIC_SHOW_VALUE, SFL_METRIC_SHOW_SUFFIX } sfl_metric_show_t;

#define SFL_METRIC_STATUS_LAST 1
#define SFL_METRIC_STATUS_NONE 0

typedef struct sfl_metric {
    const char *name;
    sfl_metric_type_t type;
    sfl_metric_fold_t fold;
    int weight; /* MEAN: the index of its WEIGHT metric; else -1 */
    sfl_metric_when_t when;
    int status;    /* 1: JobStatus carries it as last_NAME (status LAST) */
    size_t offset; /* in sfl_round_metrics_t */
    const char *sql, *csv, *fmt, *label;
    sfl_metric_show_t show;
    const char *prom, *help; /* prom "" = not on /metrics */
} sfl_metric_t;

/* The table, SFL_METRIC_COUNT entries in roundmetrics.def's order. */
extern const sfl_metric_t sfl_metrics[SFL_METRIC_COUNT];

/* What kind of job a metric is read for. */
typedef struct sfl_metric_job {
    int classification; /* the job's loss classifies (not lsq) */
    int personalized;   /* its algorithm keeps a model per agent (and classifies) */
    int vertical;       /* a vertical job */
} sfl_metric_job_t;

typedef enum {
    SFL_METRIC_NA,    /* cannot exist for the job */
    SFL_METRIC_EMPTY, /* could, but the round has none */
    SFL_METRIC_VALUE
} sfl_metric_state_t;

/* Whether round m has metric id a value for job k. A round's metrics were
 * kept when it sent a task (bytes_down > 0) or its agents reported. */
sfl_metric_state_t sfl_metric_state(int id, const sfl_round_metrics_t *m,
                                    const sfl_metric_job_t *k);

/* Whether a job of kind k can have metric id at all (a round of its that
 * reported everything has a value, or the job is vertical for the ledger). */
int sfl_metric_applies(int id, const sfl_metric_job_t *k);

/* The value of metric id in m, as a double and as an integer (F64: 0). */
double sfl_metric_get(int id, const sfl_round_metrics_t *m);
uint64_t sfl_metric_get_u64(int id, const sfl_round_metrics_t *m);
/* Sets metric id in m from an integer (U32 saturates) or a double. */
void sfl_metric_set_u64(int id, sfl_round_metrics_t *m, uint64_t v);
void sfl_metric_set(int id, sfl_round_metrics_t *m, double v);

struct sfl_payload;

/* The fold: sums holds an attempt's sums (zeroed when it opens). Adds an
 * accepted update's reported WEIGHT and MEAN figures: WEIGHTs saturate,
 * MEANs add weight * value. TOTAL metrics the caller adds itself. */
void sfl_metrics_fold(sfl_round_metrics_t *sums, const struct sfl_payload *p);
/* The attempt's metrics from its sums: WEIGHTs and TOTALs as summed,
 * MEANs divided by their weight, SET metrics 0 (the round sets them). A
 * weight beyond a signed 64-bit integer (the store's) or a mean that is
 * not finite drops the weight and its means (0); a TOTAL saturates at
 * INT64_MAX. */
void sfl_metrics_means(const sfl_round_metrics_t *sums, sfl_round_metrics_t *out);

/* The short progress text of a job's last committed round for sflctl jobs,
 * watch and the status page: "loss 0.69, accuracy 0.95, pacc 0.975 (20
 * held out)" (VALUE labels in the table's order, then SUFFIX ones that are
 * not 0); "" when
 * the agents reported nothing. Returns out (always terminated, cap > 0). */
const char *sfl_metrics_progress(const sfl_round_metrics_t *m, const sfl_metric_job_t *k,
                                 char *out, size_t cap);

struct sfl_job_status;

/* A job's progress as sflctl jobs, watch and the status page show it: a
 * vertical job's iteration and privacy ledger ("iteration 12, epsilon 0.5
 * of 1 spent (rdp 0.4, 300 iterations)"), else sfl_metrics_progress of its
 * last committed round (j->last). Returns out (terminated, cap > 0). */
const char *sfl_metrics_job_progress(const struct sfl_job_status *j, const sfl_metric_job_t *k,
                                     char *out, size_t cap);

#endif

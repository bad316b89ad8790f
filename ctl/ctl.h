/* sflctl's pieces, without main(): its configuration and flags (config.c),
 * job files (jobfile.c), the one-connection gRPC client it calls the Admin
 * service with (client.c), the text it prints (print.c) and the model export
 * files (export.c) (docs/configuration.md, section sflctl). */
#ifndef COORD_CTL_H
#define COORD_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <uv.h>

#include "sfl/core/cfgkey.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"

#define CTL_PATH_MAX 1024

/* sflctl.ini section [sflctl]; every key is also a flag. */
typedef struct ctl_config {
    char coordinator[1024];   /* host:port, [v6]:port; a list A,B,... (CTL_MAX_COORDINATORS) */
    char server_name[256];    /* name in the coordinator certificate; "" = host */
    char ca[CTL_PATH_MAX];    /* federation CA (PEM) */
    char cert[CTL_PATH_MAX];  /* admin certificate (PEM) */
    char key[CTL_PATH_MAX];   /* its private key (PEM) */
    uint64_t timeout_ms;      /* connect, and each call's deadline */
} ctl_config_t;

void ctl_config_default(ctl_config_t *c);
/* One key = value; SFL_EINVAL naming the key otherwise. */
int ctl_config_set(ctl_config_t *c, const char *key, const char *value) SFL_MUST_CHECK;
/* 1 if key is an sflctl key (a flag --key), else 0. */
int ctl_config_known(const char *key);
/* The keys of [sflctl] (sfl/core/cfgkey.h), for --help. */
const sfl_cfg_key_t *ctl_config_keys(size_t *n);
/* Reads [sflctl] of an INI file (sfl_ini_parse_file: -errno if it cannot
 * be opened, else errors name file, line and key). */
int ctl_config_load(ctl_config_t *c, const char *path) SFL_MUST_CHECK;
/* The same over buf[0..len) (borrowed), errors named after name. */
int ctl_config_parse(ctl_config_t *c, const char *name, const char *buf,
                     size_t len) SFL_MUST_CHECK;
/* coordinator, ca, cert and key are set, timeout_ms in 1..2^31. */
int ctl_config_check(const ctl_config_t *c) SFL_MUST_CHECK;

/* ---- command line ------------------------------------------------------ */

#define CTL_MAX_FLAGS 32
#define CTL_MAX_OPERANDS 4

typedef enum {
    CTL_CMD_STATUS,
    CTL_CMD_AGENTS,
    CTL_CMD_JOBS,
    CTL_CMD_JOB_CREATE,  /* operand: FILE */
    CTL_CMD_JOB_PAUSE,   /* operand: ID */
    CTL_CMD_JOB_RESUME,  /* operand: ID */
    CTL_CMD_JOB_CANCEL,  /* operand: ID */
    CTL_CMD_JOB_HISTORY, /* operand: ID */
    CTL_CMD_MODEL_EXPORT, /* operands: ID FILE */
    CTL_CMD_WATCH,       /* operand: none, or ID */
    CTL_CMD_AGENT_REVOKE, /* operand: agent NAME or certificate FINGERPRINT */
    CTL_CMD_JOB_RELEASE, /* operands: ID AGENT (an agent id) */
    CTL_CMD_FLEET
} ctl_cmd_t;
/* The last command (a new one goes before it, or moves this). */
#define CTL_CMD_LAST CTL_CMD_FLEET

/* What sflctl's arguments say. Strings are borrowed from argv. */
/* Where sflctl looks for its file without --config, under $HOME. */
#define CTL_DEFAULT_CONFIG ".config/sfl/sflctl.ini"

typedef struct ctl_args {
    int help, version;   /* -h/--help or --version seen: nothing else checked */
    const char *config;  /* --config FILE, or NULL */
    size_t nflags;       /* the other options, keys with '_' for '-' */
    char keys[CTL_MAX_FLAGS][32];
    const char *values[CTL_MAX_FLAGS];
    ctl_cmd_t cmd;
    int noperands;       /* after the command's words */
    const char *operands[CTL_MAX_OPERANDS];
    uint64_t id;         /* commands on a job: operands[0] parsed */
    uint64_t agent;      /* job release: operands[1] parsed */
    const char *format;  /* model export --format NAME (checked), or NULL */
    uint64_t round;      /* model export --round N (>= 1), 0: the last committed */
} ctl_args_t;

/* Parses argv[1..argc) (--KEY VALUE, --KEY=VALUE, dashes or underscores,
 * anywhere; then the command's words and operands) without touching any
 * file. --format is model export's own option, not a config key.
 * SFL_EINVAL with a detail for a usage error: "unknown option '--bogus'",
 * "option '--ca' needs a value", "unknown command 'x'", a bad job id, a
 * wrong number of operands, an unknown format or --format elsewhere. */
int ctl_args_parse(int argc, char **argv, ctl_args_t *a) SFL_MUST_CHECK;
/* Sets the parsed options on c (after the config file), in order. */
int ctl_args_apply(const ctl_args_t *a, ctl_config_t *c) SFL_MUST_CHECK;

/* A job id: decimal, 1..2^64-1. SFL_EINVAL otherwise. */
int ctl_parse_id(const char *s, uint64_t *id) SFL_MUST_CHECK;

/* A job file: exactly one [job NAME] section with the keys of a
 * coordinator.ini job (coord_jobdef_set: job.h keys plus labels, paused).
 * Unset keys take the coordinator's defaults (coord_job_spec_default), the
 * spec is checked as CreateJob would (coord_job_spec_check, sfl_msg pack
 * checks) and returned in wire form. Errors name file, line and key. */
int ctl_job_load(const char *path, sfl_job_spec_t *out) SFL_MUST_CHECK;
/* The same for a job file's text buf[0..len) (borrowed), errors named
 * after name (for tests and fuzzers). */
int ctl_job_parse(const char *name, const char *buf, size_t len,
                  sfl_job_spec_t *out) SFL_MUST_CHECK;

/* ---- client ------------------------------------------------------------ */

typedef struct ctl_client ctl_client_t;

/* The end of one call. status is a gRPC status, or UNAVAILABLE when the
 * connection failed (message says why). resp is owned (sfl__free) and set
 * only for OK. */
typedef struct ctl_result {
    int status;
    char message[512];
    uint8_t *resp;
    size_t len;
} ctl_result_t;

/* Addresses in coordinator = A,B,... */
#define CTL_MAX_COORDINATORS 8
/* Resolves cfg->coordinator, connects with TLS 1.3 (ALPN h2, the admin
 * certificate) and runs loop until the handshake is done or failed; with
 * a list, to the first address that connects (a fleet's leader). On
 * failure *out is NULL and r says why (UNAVAILABLE); the return is 0 then
 * too. A negative return is a local failure (TLS files: SFL_EIO, memory).
 * Returns owned (ctl_client_free). */
int ctl_client_open(uv_loop_t *loop, const ctl_config_t *cfg, ctl_client_t **out,
                    ctl_result_t *r) SFL_MUST_CHECK;
/* One unary call to path with req[0..len) (borrowed), deadline
 * cfg->timeout_ms; runs the loop until it ends. Frees a previous r->resp.
 * SFL_ENOMEM, or -ECANCELED after ctl_client_interrupt. */
int ctl_client_call(ctl_client_t *k, const char *path, const uint8_t *req, size_t len,
                    ctl_result_t *r) SFL_MUST_CHECK;
/* Makes the running (or next) ctl_client_call or ctl_client_sleep return
 * -ECANCELED; for a signal handler on the same loop. */
void ctl_client_interrupt(ctl_client_t *k);
/* Runs the loop for ms (0 or -ECANCELED). */
int ctl_client_sleep(ctl_client_t *k, uint64_t ms);
/* Closes the connection, runs the loop until its handles are closed, frees.
 * NULL does nothing. */
void ctl_client_free(ctl_client_t *k);
void ctl_result_clear(ctl_result_t *r);

/* ---- output -------------------------------------------------------------- */

/* now_ms: Unix ms, for ages ("12s ago"). */
void ctl_print_status(FILE *f, const sfl_status_t *s, int64_t now_ms);
/* sflctl fleet: role, leader (epoch, holder, since), the masters (role,
 * epoch, ms since seen, live or stale, holder), front-ends. */
void ctl_print_fleet(FILE *f, const sfl_fleet_t *m, int64_t now_ms);
void ctl_print_jobs(FILE *f, const sfl_job_status_t *jobs, uint32_t n);
void ctl_print_agents(FILE *f, const sfl_agent_list_t *l, int64_t now_ms);
/* The job's progress (sfl_metrics_job_progress): the last committed
 * round's as "loss 0.1234, accuracy 0.9 (200 held out)" ("accuracy" for
 * logistic and softmax jobs, "mse" for lsq; the eval part only when agents
 * reported held-out rows; a personalized algorithm's classification job
 * adds the agents' own models' accuracy: "accuracy 0.9, pacc 0.95 (200
 * held out)"), or "" before the first round with metrics; a vertical job's
 * iteration and privacy ledger. Truncated to cap; returns out. */
const char *ctl_progress(const sfl_job_status_t *j, char *out, size_t cap);
/* The per-round CSV of sflctl job history: header (when header is set)
 * round, the round metrics' columns (sfl/wire/roundmetrics.def:
 * objective,test_accuracy,test_mse,eval_samples,nnz,bytes_down,samples,
 * personal_accuracy,privacy_*...) with bytes_up before bytes_down,
 * accepted,selected before samples, attempt,round_ms,wall_ms before
 * personal_accuracy, then one row per round of h. objective is the round's
 * train loss (the sample-weighted mean the coordinator folded), test_accuracy /
 * test_mse the held-out metric that fits h->loss, personal_accuracy the
 * agents' own models on the same rows (personalized algorithms,
 * h->algorithm, with a classification loss); a cell the round has no value
 * for is empty. wall_ms counts from t0_ms (when round 1 opened), round_ms
 * from the round's first attempt opening to its commit. */
void ctl_print_history(FILE *f, const sfl_job_history_t *h, int header, int64_t t0_ms);
/* One line: "job 2 NAME: STATE, round 3/10". */
void ctl_print_job(FILE *f, const sfl_job_status_t *j);
/* sflctl watch's line for a job, no newline: its round, attempt, round
 * state and accepted / cohort while RUNNING (or why the round cannot
 * start), else its state. Truncated to cap (snprintf); returns out. */
const char *ctl_watch_line(const sfl_job_status_t *j, char *out, size_t cap);
/* b[0..n) as 2n lowercase hex digits and a NUL into out. */
void ctl_hex(const uint8_t *b, size_t n, char *out);

/* The model of an ExportModel reply as the bytes its hash covers (the
 * SparseVector's spcodec f64 encoding), checked against e->model_hash
 * (SFL_EPARSE if they differ). Returns owned (sfl__free). */
int ctl_export_bytes(const sfl_export_t *e, uint8_t **buf, size_t *len) SFL_MUST_CHECK;

/* sflctl model export --format. */
typedef enum {
    CTL_FORMAT_TEXT = 0, /* "# ..." header lines, then "index value" (1-based) */
    CTL_FORMAT_LIBSVM,   /* one line "0 i:v ..." with 1-based indices */
    CTL_FORMAT_NPY,      /* dense float64 .npy, format version 1.0 */
    CTL_FORMAT_SPCODEC   /* the spcodec f64 bytes model_hash covers */
} ctl_format_t;

/* "text", "libsvm", "npy" or "spcodec"; SFL_EINVAL naming the choices. */
int ctl_format_parse(const char *s, ctl_format_t *out) SFL_MUST_CHECK;
/* The model of an export in format fmt, after ctl_export_bytes has checked
 * it against model_hash (SFL_EPARSE otherwise). text and libsvm print
 * values with %.17g (they read back exactly); npy has shape (dimension,)
 * with the model's coordinates in order. Returns owned (sfl__free). */
int ctl_model_render(const sfl_export_t *e, ctl_format_t fmt, uint8_t **buf,
                     size_t *len) SFL_MUST_CHECK;

/* A standardize job's export: its moments as text, a header of # lines
 * (job, eps, the layout), then the 1 + 2 dimension values one a line with
 * %.17g (they read back exactly): the row count, each feature's sum, each
 * feature's sum of squares. SFL_EINVAL without moments. Returns owned
 * (sfl__free). */
int ctl_moments_render(const sfl_export_t *e, uint8_t **buf, size_t *len) SFL_MUST_CHECK;

/* Writes buf[0..len) to path through path.tmp, fsync and rename, so path
 * holds the old content or the new, never a part. -errno with detail. */
int ctl_write_atomic(const char *path, const uint8_t *buf, size_t len) SFL_MUST_CHECK;

#endif

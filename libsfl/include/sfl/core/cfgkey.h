/* A program's configuration keys as one table (coordinator.ini's
 * [coordinator], agent.ini, sflctl.ini): per key its name, type, where the
 * value goes, its default as a file would write it, its range and its help.
 * The same rows set a struct's defaults, read `key = value` and flags, and
 * print --help, so a default is written once. Keys whose values are lists
 * or names a program parses itself stay outside the table (sfl_cfg_set
 * returns 1 for them). */
#ifndef SFL_CFGKEY_H
#define SFL_CFGKEY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sfl/core/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SFL_CFG_STR, /* a char array of size bytes; longer values are refused */
    SFL_CFG_U64  /* a uint64_t, decimal, in [min, max] */
} sfl_cfg_type_t;

typedef struct sfl_cfg_key {
    const char *key;
    sfl_cfg_type_t type;
    size_t off, size;  /* the field: offsetof, sizeof */
    const char *def;   /* the default as written in a file; "" none */
    uint64_t min, max; /* SFL_CFG_U64: the accepted range */
    const char *arg;   /* --help's placeholder, e.g. "MS" */
    const char *help;  /* one sentence; --help adds "(default DEF)" */
} sfl_cfg_key_t;

/* Rows: SFL_CFG_S(key, struct, field, def, arg, help) for a string,
 * SFL_CFG_N(key, struct, field, def, min, max, arg, help) for a number. */
#define SFL_CFG_S(k, T, f, def, arg, help)                                                         \
    {k, SFL_CFG_STR, offsetof(T, f), sizeof(((T *)0)->f), def, 0, 0, arg, help}
#define SFL_CFG_N(k, T, f, def, lo, hi, arg, help)                                                 \
    {k, SFL_CFG_U64, offsetof(T, f), sizeof(((T *)0)->f), def, lo, hi, arg, help}

/* The row named key, or NULL. */
const sfl_cfg_key_t *sfl_cfg_find(const sfl_cfg_key_t *keys, size_t n, const char *key);
/* Sets key in obj: 0, 1 when the table has no such key (the caller's keys
 * or "unknown key"), or SFL_EINVAL with a detail naming the key: "max_conns:
 * invalid value 'x'", "timeout_ms: want 1..2147483647, got '0'", "ca: value
 * longer than 255 characters". */
int sfl_cfg_set(const sfl_cfg_key_t *keys, size_t n, void *obj, const char *key,
                const char *v) SFL_MUST_CHECK;
/* Every row's default into obj (the table's defaults must be valid; ""
 * leaves the field as it is). */
void sfl_cfg_defaults(const sfl_cfg_key_t *keys, size_t n, void *obj);
/* A row's help as --help prints it: the sentence and "(default DEF)". */
void sfl_cfg_help(const sfl_cfg_key_t *k, char *buf, size_t cap);
/* --help's lines for the rows: "  --KEY ARG" (underscores as dashes), the
 * help from column 29, words wrapped before column 80. */
void sfl_cfg_usage(FILE *f, const sfl_cfg_key_t *keys, size_t n);

#ifdef __cplusplus
}
#endif

#endif

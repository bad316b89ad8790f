#include "sfl/core/cfgkey.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const sfl_cfg_key_t *sfl_cfg_find(const sfl_cfg_key_t *keys, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i].key, key) == 0)
            return &keys[i];
    return NULL;
}

int sfl_cfg_set(const sfl_cfg_key_t *keys, size_t n, void *obj, const char *key, const char *v)
{
    const sfl_cfg_key_t *k = sfl_cfg_find(keys, n, key);
    char *field, *end;
    unsigned long long x;

    if (k == NULL)
        return 1;
    field = (char *)obj + k->off;
    if (k->type == SFL_CFG_STR) {
        size_t len = strlen(v);

        if (len >= k->size)
            return sfl__fail(SFL_EINVAL, "%s: value longer than %zu characters", key,
                             k->size - 1);
        memcpy(field, v, len + 1);
        return 0;
    }
    assert(k->size == sizeof(uint64_t));
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*v < '0' || *v > '9' || *end || errno)
        return sfl__fail(SFL_EINVAL, "%s: invalid value '%s'", key, v);
    if (x < k->min || x > k->max)
        return sfl__fail(SFL_EINVAL, "%s: want %llu..%llu, got '%s'", key,
                         (unsigned long long)k->min, (unsigned long long)k->max, v);
    memcpy(field, &(uint64_t){x}, sizeof(uint64_t));
    return 0;
}

void sfl_cfg_defaults(const sfl_cfg_key_t *keys, size_t n, void *obj)
{
    for (size_t i = 0; i < n; i++) {
        int rc;

        if (keys[i].def[0] == '\0')
            continue; /* none: the caller's zeroed field, or its own */
        rc = sfl_cfg_set(&keys[i], 1, obj, keys[i].key, keys[i].def);
        assert(rc == 0);
        (void)rc;
    }
}

void sfl_cfg_help(const sfl_cfg_key_t *k, char *buf, size_t cap)
{
    if (k->def[0] != '\0')
        snprintf(buf, cap, "%s (default %s)", k->help, k->def);
    else
        snprintf(buf, cap, "%s", k->help);
}

void sfl_cfg_usage(FILE *f, const sfl_cfg_key_t *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char flag[64], help[512];
        const char *h = help;
        int col;

        sfl_cfg_help(&keys[i], help, sizeof(help));
        snprintf(flag, sizeof(flag), "%s %s", keys[i].key, keys[i].arg);
        for (char *p = flag; *p && *p != ' '; p++)
            if (*p == '_')
                *p = '-';
        col = fprintf(f, "  --%s", flag);
        if (col > 27) {
            fputc('\n', f);
            col = 0;
        }
        fprintf(f, "%*s", 29 - col, "");
        col = 29;
        while (*h) {
            size_t w = strcspn(h, " ");

            if (col > 29 && col + 1 + (int)w > 79) {
                fprintf(f, "\n%29s", "");
                col = 29;
            } else if (col > 29) {
                fputc(' ', f);
                col++;
            }
            fprintf(f, "%.*s", (int)w, h);
            col += (int)w;
            h += w;
            while (*h == ' ')
                h++;
        }
        fputc('\n', f);
    }
}

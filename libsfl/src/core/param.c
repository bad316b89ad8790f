/* Named parameter lists (param.h). */
#include "sfl/core/param.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/error.h"

int sfl_param_name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n >= SFL_PARAM_NAME_LEN || !(name[0] >= 'a' && name[0] <= 'z'))
        return 0;
    return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

const sfl_param_value_t *sfl_param_list_find(const sfl_param_list_t *l, const char *name)
{
    for (uint32_t i = 0; i < l->n && i < SFL_PARAMS_MAX; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return &l->v[i];
    return NULL;
}

int sfl_param_list_set(sfl_param_list_t *l, const char *name, double value)
{
    uint32_t i = 0;

    if (!sfl_param_name_ok(name))
        return sfl__fail(SFL_EINVAL, "'%s' is not a parameter name (1-31 of [a-z0-9_])", name);
    while (i < l->n && strcmp(l->v[i].name, name) != 0)
        i++;
    if (i == SFL_PARAMS_MAX)
        return sfl__fail(SFL_ELIMIT, "more than %d parameters", SFL_PARAMS_MAX);
    snprintf(l->v[i].name, sizeof(l->v[i].name), "%s", name);
    l->v[i].value = value;
    l->n += i == l->n;
    return 0;
}

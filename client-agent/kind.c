/* The agent's round kinds: kind.h. */
#include "kind.h"

/* Tried in this order: a vertical task (rows > 0) before the update modes,
 * mode 2 before the sealed kinds, the plain update last (it claims every
 * task). */
const agent_shape_t *const agent_shapes[] = {
    &agent_shape_vertical,
    &agent_shape_secagg,
    &agent_shape_stats,
    &agent_shape_update,
};
const size_t agent_nshapes = sizeof(agent_shapes) / sizeof(agent_shapes[0]);

const agent_shape_t *agent_shape_for(const sfl_task_t *t)
{
    for (size_t i = 0; i + 1 < agent_nshapes; i++)
        if (agent_shapes[i]->claims(t))
            return agent_shapes[i];
    return agent_shapes[agent_nshapes - 1];
}

const agent_shape_t *agent_shape_staged(int kind)
{
    for (size_t i = 0; kind != 0 && i < agent_nshapes; i++)
        if (agent_shapes[i]->stage_kind == kind)
            return agent_shapes[i];
    return NULL;
}

size_t agent_shape_index(const agent_shape_t *s)
{
    size_t i = 0;

    while (i < agent_nshapes && agent_shapes[i] != s)
        i++;
    return i;
}

/* Vertical federation's messages: steps, step answers and the values
 * encoding they share.
 * (msg_int.h: the steps they go through.) */
#include "msg_int.h"

#include <math.h>
#include <string.h>

/* ---- vertical steps and answers ---------------------------------------------- */

size_t sfl_msg_values_bytes(size_t n, size_t nints)
{
    return nints > n ? 0 : 4 * nints + 8 * (n - nints);
}

int sfl_msg_values_encode(const double *v, size_t n, size_t nints, uint8_t *out)
{
    if (nints > n)
        return sfl__fail(SFL_EINVAL, "%zu integers in a message of %zu values", nints, n);
    for (size_t i = 0; i < n; i++) {
        if (i < nints) {
            uint32_t u;

            if (!(v[i] >= INT32_MIN && v[i] <= INT32_MAX) || v[i] != (double)(int32_t)v[i])
                return sfl__fail(SFL_EINVAL, "message value %zu (%.17g) is not an int32", i,
                                 v[i]);
            u = (uint32_t)(int32_t)v[i];
            for (int b = 0; b < 4; b++)
                *out++ = (uint8_t)(u >> (8 * b));
        } else {
            uint64_t u;

            if (!isfinite(v[i]))
                return sfl__fail(SFL_EINVAL, "message value %zu is not finite", i);
            memcpy(&u, &v[i], 8);
            for (int b = 0; b < 8; b++)
                *out++ = (uint8_t)(u >> (8 * b));
        }
    }
    return 0;
}

int sfl_msg_values_decode(const uint8_t *buf, size_t len, size_t n, size_t nints, double *v)
{
    if (nints > n || len != sfl_msg_values_bytes(n, nints))
        return sfl__fail(SFL_EPARSE, "message of %zu bytes, expected %zu (%zu values, %zu of "
                         "them int32)", len, sfl_msg_values_bytes(n, nints), n, nints);
    for (size_t i = 0; i < n; i++) {
        if (i < nints) {
            uint32_t u = 0;

            for (int b = 0; b < 4; b++)
                u |= (uint32_t)*buf++ << (8 * b);
            v[i] = (double)(int32_t)u;
        } else {
            uint64_t u = 0;

            for (int b = 0; b < 8; b++)
                u |= (uint64_t)*buf++ << (8 * b);
            memcpy(&v[i], &u, 8);
            if (!isfinite(v[i]))
                return sfl__fail(SFL_EPARSE, "message value %zu is not finite", i);
        }
    }
    return 0;
}

static int check_vstep(const chk_t *c, const void *p)
{
    const sfl_vstep_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "round", m->round)) < 0)
        return rc;
    if (m->nbcast == 0 || m->bcast == NULL)
        return sfl__msg_fail(c, c->bad, "broadcast missing");
    for (uint32_t i = 0; i < m->nbcast; i++)
        if (!isfinite(m->bcast[i]))
            return sfl__msg_fail(c, c->bad, "broadcast value %u is not finite", i);
    return 0;
}

static int put_vstep(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_vstep_t *m = p;
    size_t n = sfl_msg_values_bytes(m->nbcast, 0);

    if ((w->data = sfl__malloc(n)) == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the broadcast");
    if (sfl_msg_values_encode(m->bcast, m->nbcast, 0, w->data) < 0)
        return sfl__msg_fail(c, SFL_EINVAL, "%s", sfl_last_error());
    w->vstep.job_id = m->job_id;
    w->vstep.round = m->round;
    w->vstep.attempt = m->attempt;
    w->vstep.iteration = m->iteration;
    w->vstep.broadcast = bin(w->data, n);
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_STEP;
    w->pb.task_or_wait.step = &w->vstep;
    return 0;
}

static const msg_type_t vstep_type = {"step", &sfl__v1__task_or_wait__descriptor, check_vstep,
    put_vstep, NULL, 0, NULL, 0, NULL};

int sfl_msg_vstep_pack(const sfl_vstep_t *st, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&vstep_type, st, NULL, out, len);
}

void sfl_msg_vstep_clear(sfl_vstep_t *st)
{
    if (st == NULL)
        return;
    sfl__free(st->bcast);
    memset(st, 0, sizeof(*st));
}

int sfl__msg_get_vstep(const chk_t *c, const Sfl__V1__VerticalStep *pb, sfl_vstep_t *st)
{
    size_t n;
    int rc;

    memset(st, 0, sizeof(*st));
    st->job_id = pb->job_id;
    st->round = pb->round;
    st->attempt = pb->attempt;
    st->iteration = pb->iteration;
    n = pb->broadcast.len / 8;
    if (pb->broadcast.len % 8 != 0 || n == 0)
        return sfl__msg_fail(c, c->bad, "broadcast of %zu bytes is not a whole number of float64s",
                             pb->broadcast.len);
    if (n > c->lim->max_dim)
        return sfl__msg_fail(c, SFL_ELIMIT, "broadcast of %zu values exceeds the limit of %u", n,
                             c->lim->max_dim);
    if ((st->bcast = sfl__mallocarray(n, sizeof(double))) == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the broadcast");
    st->nbcast = (uint32_t)n;
    if (sfl_msg_values_decode(pb->broadcast.data, pb->broadcast.len, n, 0, st->bcast) < 0)
        rc = sfl__msg_fail(c, c->bad, "broadcast: %s", sfl_last_error());
    else
        rc = check_vstep(c, st);
    if (rc < 0)
        sfl_msg_vstep_clear(st);
    return rc;
}

static int check_step_answer(const chk_t *c, const void *p)
{
    const sfl_step_answer_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "round", m->round)) < 0 ||
        (rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0)
        return rc;
    if (m->msg_len == 0 || m->msg == NULL)
        return sfl__msg_fail(c, c->bad, "message missing");
    if (!isfinite(m->objective) || (m->objective_rows == 0 && m->objective != 0))
        return sfl__msg_fail(c, c->bad, "objective %g over %llu rows", m->objective,
                             (unsigned long long)m->objective_rows);
    return 0;
}

static int put_step_answer(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_step_answer_t *m = p;
    Sfl__V1__StepAnswer *pb = &w->pb.step_answer;

    (void)c;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->agent_id = m->agent_id;
    pb->iteration = m->iteration;
    pb->message = bin(m->msg, m->msg_len);
    pb->objective = m->objective;
    pb->objective_rows = m->objective_rows;
    return 0;
}

static int get_step_answer(const chk_t *c, void *p, void *out)
{
    Sfl__V1__StepAnswer *pb = p;
    sfl_step_answer_t *m = out;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->agent_id = pb->agent_id;
    m->iteration = pb->iteration;
    /* taken over, as get_update does */
    m->msg = pb->message.data;
    m->msg_len = pb->message.len;
    pb->message.data = NULL;
    pb->message.len = 0;
    m->objective = pb->objective;
    m->objective_rows = pb->objective_rows;
    return check_step_answer(c, m);
}

void sfl_msg_step_answer_free(sfl_step_answer_t *m)
{
    if (m != NULL)
        sfl__free(m->msg);
    sfl__free(m);
}

static void free_step_answer(void *m)
{
    sfl_msg_step_answer_free(m);
}

static const msg_type_t step_answer_type = {"step answer", &sfl__v1__step_answer__descriptor,
    check_step_answer, put_step_answer, get_step_answer, sizeof(sfl_step_answer_t),
    free_step_answer, 0, NULL};

int sfl_msg_step_answer_pack(const sfl_step_answer_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&step_answer_type, m, NULL, out, len);
}

int sfl_msg_step_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_step_answer_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&step_answer_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* The Fleet service's message (proto/sfl/v1/fleet.proto): one agent's call
 * as a front-end relays it to the master. */
#include "msg_int.h"

#include <math.h>
#include <string.h>

#include <sodium.h>

static int check_fleet_call(const chk_t *c, const void *p)
{
    const sfl_fleet_call_t *m = p;
    size_t n = strnlen(m->agent_cn, sizeof(m->agent_cn));
    int rc;

    if (n == 0)
        return sfl__msg_fail(c, c->bad, "agent_cn missing");
    if (n > SFL_MSG_CN_MAX)
        return sfl__msg_fail(c, c->bad, "agent_cn is longer than %d bytes", SFL_MSG_CN_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)m->agent_cn[i] < 0x20 || m->agent_cn[i] == 0x7f)
            return sfl__msg_fail(c, c->bad, "agent_cn has a control character");
    if ((rc = sfl__msg_check_id(c, "conn_id", m->conn_id)) < 0)
        return rc;
    if (m->request_len > 0 && m->request == NULL)
        return sfl__msg_fail(c, SFL_EINVAL, "request length %zu but no bytes", m->request_len);
    if (m->agent_cert_len > 0 && m->agent_cert == NULL)
        return sfl__msg_fail(c, SFL_EINVAL, "agent_cert length %zu but no bytes",
                             m->agent_cert_len);
    if (m->agent_cert_len > SFL_MSG_CERT_DER_MAX)
        return sfl__msg_fail(c, SFL_ELIMIT, "agent_cert is %zu bytes, at most %d",
                             m->agent_cert_len, SFL_MSG_CERT_DER_MAX);
    return 0;
}

static int put_fleet_call(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_fleet_call_t *m = p;
    Sfl__V1__FleetCall *pb = &w->pb.fleet_call;

    (void)c;
    pb->agent_cn = str(m->agent_cn);
    pb->cert_sha256 = bin(m->cert_sha256, sizeof(m->cert_sha256));
    pb->request = bin(m->request, m->request_len);
    pb->conn_id = m->conn_id;
    pb->agent_cert = bin(m->agent_cert, m->agent_cert_len);
    return 0;
}

static int get_fleet_call(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetCall *pb = p;
    sfl_fleet_call_t *m = out;
    size_t n = pb->agent_cn != NULL ? strlen(pb->agent_cn) : 0;
    int rc;

    if (n > SFL_MSG_CN_MAX)
        return sfl__msg_fail(c, c->bad, "agent_cn is %zu bytes, at most %d", n, SFL_MSG_CN_MAX);
    if (n > 0)
        memcpy(m->agent_cn, pb->agent_cn, n);
    m->agent_cn[n] = '\0';
    m->conn_id = pb->conn_id;
    if ((rc = sfl__msg_get_fixed(c, "cert_sha256", &pb->cert_sha256, m->cert_sha256,
                                 sizeof(m->cert_sha256))) < 0)
        return rc;
    /* protobuf-c allocated the bytes with our allocator as their own block
     * (msg_coord.c's update does the same): taken over, not copied. */
    if (pb->request.len > 0) {
        m->request = pb->request.data;
        m->request_len = pb->request.len;
        pb->request.data = NULL;
        pb->request.len = 0;
    }
    if (pb->agent_cert.len > SFL_MSG_CERT_DER_MAX) /* before it is taken over */
        return sfl__msg_fail(c, SFL_ELIMIT, "agent_cert is %zu bytes, at most %d",
                             pb->agent_cert.len, SFL_MSG_CERT_DER_MAX);
    if (pb->agent_cert.len > 0) {
        m->agent_cert = pb->agent_cert.data;
        m->agent_cert_len = pb->agent_cert.len;
        pb->agent_cert.data = NULL;
        pb->agent_cert.len = 0;
    }
    return check_fleet_call(c, m);
}

void sfl_msg_fleet_call_free(sfl_fleet_call_t *m)
{
    if (m != NULL) {
        sfl__free(m->request);
        sfl__free(m->agent_cert);
    }
    sfl__free(m);
}

static void free_fleet_call(void *m)
{
    sfl_msg_fleet_call_free(m);
}

static const msg_type_t fleet_call_type = {"fleet call", &sfl__v1__fleet_call__descriptor,
    check_fleet_call, put_fleet_call, get_fleet_call, sizeof(sfl_fleet_call_t), free_fleet_call,
    0, NULL};

int sfl_msg_fleet_call_pack(const sfl_fleet_call_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&fleet_call_type, m, NULL, out, len);
}

int sfl_msg_fleet_call_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_fleet_call_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&fleet_call_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Fleet.Model ----------------------------------------------------------------- */

typedef struct {
    uint64_t job_id;
    uint8_t hash[SFL_MSG_HASH_BYTES];
} model_req_t;

static int check_model_req(const chk_t *c, const void *p)
{
    return sfl__msg_check_id(c, "job_id", ((const model_req_t *)p)->job_id);
}

static int put_model_req(const chk_t *c, const void *p, wire_t *w)
{
    const model_req_t *m = p;

    (void)c;
    w->pb.fleet_model_req.job_id = m->job_id;
    w->pb.fleet_model_req.model_hash = bin(m->hash, sizeof(m->hash));
    return 0;
}

static int get_model_req(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetModelRequest *pb = p;
    model_req_t *m = out;
    int rc = sfl__msg_get_fixed(c, "model_hash", &pb->model_hash, m->hash, sizeof(m->hash));

    m->job_id = pb->job_id;
    return rc < 0 ? rc : check_model_req(c, m);
}

static const msg_type_t model_req_type = {"fleet model request",
    &sfl__v1__fleet_model_request__descriptor, check_model_req, put_model_req, get_model_req,
    sizeof(model_req_t), NULL, 0, NULL};

int sfl_msg_fleet_model_req_pack(uint64_t job_id, const uint8_t hash[SFL_MSG_HASH_BYTES],
                                 uint8_t **out, size_t *len)
{
    model_req_t m;

    m.job_id = job_id;
    memcpy(m.hash, hash, sizeof(m.hash));
    return sfl__msg_pack_msg(&model_req_type, &m, NULL, out, len);
}

int sfl_msg_fleet_model_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   uint64_t *job_id, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    model_req_t m;
    int rc = sfl__msg_unpack_in(&model_req_type, buf, len, lim, &m);

    *job_id = rc == 0 ? m.job_id : 0;
    memcpy(hash, m.hash, sizeof(m.hash));
    return rc;
}

typedef struct {
    uint8_t *model;
    size_t model_len;
} model_reply_t;

static int check_model_reply(const chk_t *c, const void *p)
{
    const model_reply_t *m = p;

    if (m->model_len == 0 || m->model == NULL)
        return sfl__msg_fail(c, c->bad, "model missing");
    return 0;
}

static int put_model_reply(const chk_t *c, const void *p, wire_t *w)
{
    const model_reply_t *m = p;

    (void)c;
    w->pb.fleet_model_reply.model = bin(m->model, m->model_len);
    return 0;
}

static int get_model_reply(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetModelReply *pb = p;
    model_reply_t *m = out;

    m->model = pb->model.data; /* taken over, as the update's bytes */
    m->model_len = pb->model.len;
    pb->model.data = NULL;
    pb->model.len = 0;
    return check_model_reply(c, m);
}

static void free_model_reply(void *p)
{
    model_reply_t *m = p;

    if (m != NULL)
        sfl__free(m->model);
    sfl__free(m);
}

static const msg_type_t model_reply_type = {"fleet model reply",
    &sfl__v1__fleet_model_reply__descriptor, check_model_reply, put_model_reply, get_model_reply,
    sizeof(model_reply_t), free_model_reply, 0, NULL};

int sfl_msg_fleet_model_reply_pack(const uint8_t *model, size_t model_len, uint8_t **out,
                                   size_t *len)
{
    model_reply_t m = {(uint8_t *)(uintptr_t)model, model_len};

    return sfl__msg_pack_msg(&model_reply_type, &m, NULL, out, len);
}

int sfl_msg_fleet_model_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                     uint8_t **model, size_t *model_len)
{
    model_reply_t *m;
    int rc;

    *model = NULL;
    *model_len = 0;
    m = sfl__msg_unpack_msg(&model_reply_type, buf, len, lim, 0, NULL, &rc);
    if (m != NULL) {
        *model = m->model;
        *model_len = m->model_len;
        sfl__free(m);
    }
    return rc;
}

/* ---- a task's model on the wire ---------------------------------------------------- */

/* One field of buf[0..n) at *off: its number, wire type, and for a
 * length-delimited field its payload (val, vlen) - for a varint its value -
 * with *off moved past it. SFL_EPARSE for anything malformed. */
static int field_next(const uint8_t *b, size_t n, size_t *off, uint32_t *num, uint32_t *wt,
                      const uint8_t **val, size_t *vlen, uint64_t *v)
{
    uint64_t key = 0, x = 0;
    size_t o = *off;
    int shift;

    for (shift = 0;; shift += 7) {
        if (o >= n || shift > 63)
            return sfl__fail(SFL_EPARSE, "task: truncated or overlong field key");
        key |= (uint64_t)(b[o] & 0x7f) << shift;
        if ((b[o++] & 0x80) == 0)
            break;
    }
    *num = (uint32_t)(key >> 3);
    *wt = (uint32_t)(key & 7);
    if (key >> 3 == 0 || key >> 3 > 536870911u)
        return sfl__fail(SFL_EPARSE, "task: bad field number");
    *val = NULL;
    *vlen = 0;
    switch (*wt) {
    case 0:
    case 2:
        for (shift = 0;; shift += 7) {
            if (o >= n || shift > 63)
                return sfl__fail(SFL_EPARSE, "task: truncated varint");
            x |= (uint64_t)(b[o] & 0x7f) << shift;
            if ((b[o++] & 0x80) == 0)
                break;
        }
        if (*wt == 0) {
            *v = x;
            break;
        }
        if (x > n - o)
            return sfl__fail(SFL_EPARSE, "task: field length past the end");
        *val = b + o;
        *vlen = (size_t)x;
        o += (size_t)x;
        break;
    case 1:
        if (n - o < 8)
            return sfl__fail(SFL_EPARSE, "task: truncated fixed64");
        o += 8;
        break;
    case 5:
        if (n - o < 4)
            return sfl__fail(SFL_EPARSE, "task: truncated fixed32");
        o += 4;
        break;
    default:
        return sfl__fail(SFL_EPARSE, "task: wire type %u", *wt);
    }
    *off = o;
    return 0;
}

/* The SignedTask of a TaskOrWait (field 1, exactly once, nothing else):
 * 1, or 0 when tow is something else (a wait, a step, a stage). */
static int signed_task(const uint8_t *tow, size_t len, const uint8_t **st, size_t *st_len)
{
    size_t off = 0;
    int found = 0;

    while (off < len) {
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v;
        int rc = field_next(tow, len, &off, &num, &wt, &val, &vlen, &v);

        if (rc < 0)
            return rc;
        if (num == 1 && wt == 2) {
            if (found)
                return sfl__fail(SFL_EPARSE, "task: two SignedTasks");
            found = 1;
            *st = val;
            *st_len = vlen;
        } else if (num <= 4) {
            return 0; /* another kind of message (or a task, mistyped) */
        }
    }
    return found;
}

/* The Task inside a SignedTask (its field 1, the last one if repeated, as
 * protobuf-c keeps it): 1, or 0 when there is none. */
static int st_task(const uint8_t *st, size_t st_len, const uint8_t **task, size_t *task_len)
{
    size_t off = 0;

    *task = NULL;
    *task_len = 0;
    while (off < st_len) {
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v;
        int rc = field_next(st, st_len, &off, &num, &wt, &val, &vlen, &v);

        if (rc < 0)
            return rc;
        if (num == 1 && wt == 2) {
            *task = val;
            *task_len = vlen;
        }
    }
    return *task != NULL;
}

/* Where SignedTask.model's field (key, length and payload) sits in st:
 * [*f_off, *f_end), its payload at *m_off for *m_len; 0 when absent. */
static int st_model(const uint8_t *st, size_t len, size_t *f_off, size_t *f_end, size_t *m_off,
                    size_t *m_len)
{
    size_t off = 0;
    int found = 0;

    while (off < len) {
        size_t at = off;
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v;
        int rc = field_next(st, len, &off, &num, &wt, &val, &vlen, &v);

        if (rc < 0)
            return rc;
        if (num == 4) {
            if (wt != 2 || found)
                return sfl__fail(SFL_EPARSE, "task: SignedTask.model malformed or repeated");
            found = 1;
            *f_off = at;
            *f_end = off;
            *m_off = (size_t)(val - st);
            *m_len = vlen;
        }
    }
    return found;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* tag(1, bytes) | length | a[0..na) | b[0..nb) | c[0..nc) into a new buffer. */
static int wrap3(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, const uint8_t *c,
                 size_t nc, uint8_t **out, size_t *out_len)
{
    size_t inner = na + nb + nc, n;
    uint8_t *p;

    if (inner > SIZE_MAX - 16 || (p = sfl__malloc(inner + 16)) == NULL)
        return sfl__fail(SFL_ENOMEM, "task: no memory");
    p[0] = 0x0a; /* field 1, length-delimited */
    n = 1 + varint_put(p + 1, inner);
    if (na)
        memcpy(p + n, a, na);
    if (nb)
        memcpy(p + n + na, b, nb);
    if (nc)
        memcpy(p + n + na + nb, c, nc);
    *out = p;
    *out_len = n + inner;
    return 0;
}

int sfl_msg_task_strip_model(const uint8_t *tow, size_t len, uint8_t **out, size_t *out_len,
                             size_t *model_off, size_t *model_len)
{
    const uint8_t *st = NULL;
    size_t st_len = 0, f_off, f_end, m_off, m_len;
    int rc;

    *out = NULL;
    *out_len = 0;
    if ((rc = signed_task(tow, len, &st, &st_len)) <= 0)
        return rc < 0 ? rc : sfl__fail(SFL_ENOTFOUND, "not a task");
    if ((rc = st_model(st, st_len, &f_off, &f_end, &m_off, &m_len)) <= 0)
        return rc < 0 ? rc : sfl__fail(SFL_ENOTFOUND, "the task carries no SignedTask.model");
    *model_off = (size_t)(st - tow) + m_off;
    *model_len = m_len;
    return wrap3(st, f_off, st + f_end, st_len - f_end, NULL, 0, out, out_len);
}

int sfl_msg_task_put_model(const uint8_t *tow, size_t len, const uint8_t *model,
                           size_t model_len, uint8_t **out, size_t *out_len)
{
    const uint8_t *st = NULL;
    size_t st_len = 0, f_off, f_end, m_off, m_len, n;
    uint8_t key[16];
    int rc;

    *out = NULL;
    *out_len = 0;
    if ((rc = signed_task(tow, len, &st, &st_len)) <= 0)
        return rc < 0 ? rc : sfl__fail(SFL_EINVAL, "not a task");
    if ((rc = st_model(st, st_len, &f_off, &f_end, &m_off, &m_len)) != 0)
        return rc < 0 ? rc : sfl__fail(SFL_EINVAL, "the task already carries its model");
    key[0] = 0x22; /* field 4, length-delimited */
    n = 1 + varint_put(key + 1, model_len);
    {
        /* SignedTask | key | model: wrap3 takes three parts, the key and
         * the model go in one buffer */
        uint8_t *km = sfl__malloc(n + model_len + 1);

        if (km == NULL)
            return sfl__fail(SFL_ENOMEM, "task: no memory");
        memcpy(km, key, n);
        if (model_len)
            memcpy(km + n, model, model_len);
        rc = wrap3(st, st_len, km, n + model_len, NULL, 0, out, out_len);
        sfl__free(km);
    }
    return rc;
}

int sfl_msg_task_needs_model(const uint8_t *tow, size_t len, uint64_t *job_id,
                             uint8_t hash[SFL_MSG_HASH_BYTES])
{
    const uint8_t *st = NULL, *task = NULL;
    size_t st_len = 0, task_len = 0, off = 0, f_off, f_end, m_off, m_len;
    int rc, has_hash = 0, has_model = 0;

    *job_id = 0;
    if ((rc = signed_task(tow, len, &st, &st_len)) <= 0)
        return rc;
    if ((rc = st_model(st, st_len, &f_off, &f_end, &m_off, &m_len)) != 0)
        return rc < 0 ? rc : 0;
    if ((rc = st_task(st, st_len, &task, &task_len)) <= 0)
        return rc;
    while (off < task_len) {
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v = 0;

        if ((rc = field_next(task, task_len, &off, &num, &wt, &val, &vlen, &v)) < 0)
            return rc;
        if (num == 1 && wt == 0)
            *job_id = v;
        else if (num == 13)
            has_model = 1;
        else if (num == 14 && wt == 2 && vlen == SFL_MSG_HASH_BYTES) {
            memcpy(hash, val, SFL_MSG_HASH_BYTES);
            has_hash = 1;
        }
    }
    return has_hash && !has_model && *job_id > 0;
}

int sfl_msg_task_ids(const uint8_t *tow, size_t len, uint64_t *job_id, uint64_t *round,
                     uint32_t *attempt)
{
    const uint8_t *st = NULL, *task = NULL;
    size_t st_len = 0, task_len = 0, off = 0;
    int rc;

    *job_id = *round = 0;
    *attempt = 0;
    if ((rc = signed_task(tow, len, &st, &st_len)) <= 0)
        return rc;
    if ((rc = st_task(st, st_len, &task, &task_len)) <= 0)
        return rc;
    while (off < task_len) {
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v = 0;

        if ((rc = field_next(task, task_len, &off, &num, &wt, &val, &vlen, &v)) < 0)
            return rc;
        if (num == 1 && wt == 0)
            *job_id = v;
        else if (num == 2 && wt == 0)
            *round = v;
        else if (num == 3 && wt == 0)
            *attempt = (uint32_t)v;
    }
    return 1;
}

/* ---- Fleet fold mode: FoldSpec, Claim, Partial ---------------------------------- */

typedef struct {
    uint64_t job_id, round;
    uint32_t attempt;
} fold_spec_req_t;

static int check_fold_spec_req(const chk_t *c, const void *p)
{
    return sfl__msg_check_id(c, "job_id", ((const fold_spec_req_t *)p)->job_id);
}

static int put_fold_spec_req(const chk_t *c, const void *p, wire_t *w)
{
    const fold_spec_req_t *m = p;

    (void)c;
    w->pb.fleet_fold_spec_req.job_id = m->job_id;
    w->pb.fleet_fold_spec_req.round = m->round;
    w->pb.fleet_fold_spec_req.attempt = m->attempt;
    return 0;
}

static int get_fold_spec_req(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetFoldSpecRequest *pb = p;
    fold_spec_req_t *m = out;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    return check_fold_spec_req(c, m);
}

static const msg_type_t fold_spec_req_type = {"fleet fold spec request",
    &sfl__v1__fleet_fold_spec_request__descriptor, check_fold_spec_req, put_fold_spec_req,
    get_fold_spec_req, sizeof(fold_spec_req_t), NULL, 0, NULL};

int sfl_msg_fleet_fold_spec_req_pack(uint64_t job_id, uint64_t round, uint32_t attempt,
                                     uint8_t **out, size_t *len)
{
    fold_spec_req_t m = {job_id, round, attempt};

    return sfl__msg_pack_msg(&fold_spec_req_type, &m, NULL, out, len);
}

int sfl_msg_fleet_fold_spec_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                       uint64_t *job_id, uint64_t *round, uint32_t *attempt)
{
    fold_spec_req_t m;
    int rc = sfl__msg_unpack_in(&fold_spec_req_type, buf, len, lim, &m);

    *job_id = rc == 0 ? m.job_id : 0;
    *round = rc == 0 ? m.round : 0;
    *attempt = rc == 0 ? m.attempt : 0;
    return rc;
}

static int check_fold_spec(const chk_t *c, const void *p)
{
    const sfl_fleet_fold_spec_t *m = p;
    static const uint8_t zero[SFL_MSG_HASH_BYTES];
    int rc;

    if ((rc = sfl__msg_check_bool(c, "fold", m->fold)) < 0)
        return rc;
    if (!m->fold) {
        if (m->dimension != 0 || m->max_update_norm != 0 || m->max_samples != 0 ||
            memcmp(m->round_pk, zero, sizeof(zero)) != 0 ||
            memcmp(m->nonce, zero, sizeof(zero)) != 0 ||
            memcmp(m->model_hash, zero, sizeof(zero)) != 0)
            return sfl__msg_fail(c, c->bad, "a spec that does not fold carries fold fields");
        return 0;
    }
    if (m->dimension == 0)
        return sfl__msg_fail(c, c->bad, "dimension missing (0)");
    if (c->lim != NULL && m->dimension > c->lim->max_dim)
        return sfl__msg_fail(c, SFL_ELIMIT, "dimension %u exceeds the limit of %u", m->dimension,
                             c->lim->max_dim);
    if ((rc = sfl__msg_check_enc(c, "encoding", m->encoding)) < 0)
        return rc;
    if (!(m->max_update_norm >= 0) || !isfinite(m->max_update_norm) ||
        !(m->max_samples >= 0) || !isfinite(m->max_samples))
        return sfl__msg_fail(c, c->bad, "max_update_norm %g, max_samples %g (want finite, >= 0)",
                             m->max_update_norm, m->max_samples);
    return 0;
}

static int put_fold_spec(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_fleet_fold_spec_t *m = p;
    Sfl__V1__FleetFoldSpec *pb = &w->pb.fleet_fold_spec;

    (void)c;
    pb->fold = m->fold;
    if (!m->fold)
        return 0;
    pb->dimension = m->dimension;
    pb->encoding = (Sfl__V1__ValueEncoding)(m->encoding + 1);
    pb->max_update_norm = m->max_update_norm;
    pb->max_samples = m->max_samples;
    pb->round_pk = bin(m->round_pk, sizeof(m->round_pk));
    pb->nonce = bin(m->nonce, sizeof(m->nonce));
    pb->model_hash = bin(m->model_hash, sizeof(m->model_hash));
    return 0;
}

static int get_fold_spec(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetFoldSpec *pb = p;
    sfl_fleet_fold_spec_t *m = out;
    int rc;

    m->fold = pb->fold ? 1 : 0;
    if (!m->fold) {
        if (pb->dimension != 0 || pb->encoding != 0 || pb->max_update_norm != 0 ||
            pb->max_samples != 0 || pb->round_pk.len || pb->nonce.len || pb->model_hash.len)
            return sfl__msg_fail(c, c->bad, "a spec that does not fold carries fold fields");
        return 0;
    }
    m->dimension = pb->dimension;
    m->max_update_norm = pb->max_update_norm;
    m->max_samples = pb->max_samples;
    if ((rc = sfl__msg_get_enc(c, "encoding", pb->encoding, &m->encoding)) < 0 ||
        (rc = sfl__msg_get_fixed(c, "round_pk", &pb->round_pk, m->round_pk,
                                 sizeof(m->round_pk))) < 0 ||
        (rc = sfl__msg_get_fixed(c, "nonce", &pb->nonce, m->nonce, sizeof(m->nonce))) < 0 ||
        (rc = sfl__msg_get_fixed(c, "model_hash", &pb->model_hash, m->model_hash,
                                 sizeof(m->model_hash))) < 0)
        return rc;
    return check_fold_spec(c, m);
}

static const msg_type_t fold_spec_type = {"fleet fold spec", &sfl__v1__fleet_fold_spec__descriptor,
    check_fold_spec, put_fold_spec, get_fold_spec, sizeof(sfl_fleet_fold_spec_t), NULL, 0, NULL};

int sfl_msg_fleet_fold_spec_pack(const sfl_fleet_fold_spec_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&fold_spec_type, m, NULL, out, len);
}

int sfl_msg_fleet_fold_spec_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   sfl_fleet_fold_spec_t *m)
{
    return sfl__msg_unpack_in(&fold_spec_type, buf, len, lim, m);
}

static int check_claim(const chk_t *c, const void *p)
{
    const sfl_fleet_claim_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "samples", m->samples)) < 0)
        return rc;
    return 0;
}

static int put_claim(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_fleet_claim_t *m = p;
    Sfl__V1__FleetClaim *pb = &w->pb.fleet_claim;

    (void)c;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->agent_id = m->agent_id;
    pb->samples = m->samples;
    pb->payload_hash = bin(m->payload_hash, sizeof(m->payload_hash));
    pb->signature = bin(m->signature, sizeof(m->signature));
    pb->update_bytes = m->update_bytes;
    return 0;
}

static int get_claim(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetClaim *pb = p;
    sfl_fleet_claim_t *m = out;
    int rc;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->agent_id = pb->agent_id;
    m->samples = pb->samples;
    m->update_bytes = pb->update_bytes;
    if ((rc = sfl__msg_get_fixed(c, "payload_hash", &pb->payload_hash, m->payload_hash,
                                 sizeof(m->payload_hash))) < 0 ||
        (rc = sfl__msg_get_fixed(c, "signature", &pb->signature, m->signature,
                                 sizeof(m->signature))) < 0)
        return rc;
    return check_claim(c, m);
}

static const msg_type_t claim_type = {"fleet claim", &sfl__v1__fleet_claim__descriptor,
    check_claim, put_claim, get_claim, sizeof(sfl_fleet_claim_t), NULL, 0, NULL};

int sfl_msg_fleet_claim_pack(const sfl_fleet_claim_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&claim_type, m, NULL, out, len);
}

int sfl_msg_fleet_claim_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_fleet_claim_t *m)
{
    return sfl__msg_unpack_in(&claim_type, buf, len, lim, m);
}

static uint32_t partial_max(const chk_t *c)
{
    uint32_t n = SFL_MSG_PARTIAL_MAX;

    if (c->lim != NULL && c->lim->max_items < n)
        n = c->lim->max_items;
    return n;
}

static int check_partial(const chk_t *c, const void *p)
{
    const sfl_fleet_partial_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0)
        return rc;
    if (m->nmembers == 0 || m->members == NULL)
        return sfl__msg_fail(c, c->bad, "members missing");
    if (m->nmembers > partial_max(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%u members exceed the limit of %u", m->nmembers,
                             partial_max(c));
    for (uint32_t i = 0; i < m->nmembers; i++)
        if (m->members[i] == 0)
            return sfl__msg_fail(c, c->bad, "members[%u] is 0", i);
    if (!(m->weight_sum > 0) || !isfinite(m->weight_sum))
        return sfl__msg_fail(c, c->bad, "weight_sum %g (want positive, finite)", m->weight_sum);
    if (m->sum == NULL)
        return sfl__msg_fail(c, c->bad, "sum missing");
    for (uint32_t i = 0; i < m->sum->nnz; i++)
        if (!isfinite(m->sum->val[i]))
            return sfl__msg_fail(c, SFL_ENUMERIC, "sum value at index %u is not finite",
                                 m->sum->idx[i]);
    for (int i = 0; i < SFL_METRIC_COUNT; i++)
        if (!isfinite(m->metric_sums[i]))
            return sfl__msg_fail(c, SFL_ENUMERIC, "metric_sums[%d] is not finite", i);
    return 0;
}

static int put_partial(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_fleet_partial_t *m = p;
    Sfl__V1__FleetPartial *pb = &w->pb.fleet_partial;
    int rc;

    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->n_members = m->nmembers;
    pb->members = m->members;
    pb->weight_sum = m->weight_sum;
    pb->n_metric_sums = SFL_METRIC_COUNT;
    pb->metric_sums = (double *)(uintptr_t)m->metric_sums;
    pb->update_bytes = m->update_bytes;
    if ((rc = sfl__msg_put_sparse(c, "sum", m->sum, SFL_ENC_F64, &w->sv, &w->data)) < 0)
        return rc;
    pb->sum = &w->sv;
    return 0;
}

static int get_partial(const chk_t *c, void *p, void *out)
{
    Sfl__V1__FleetPartial *pb = p;
    sfl_fleet_partial_t *m = out;
    sfl_enc_t enc = SFL_ENC_F64;
    int rc;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->weight_sum = pb->weight_sum;
    m->update_bytes = pb->update_bytes;
    if (pb->n_members == 0)
        return sfl__msg_fail(c, c->bad, "members missing");
    if (pb->n_members > partial_max(c))
        return sfl__msg_fail(c, SFL_ELIMIT, "%zu members exceed the limit of %u", pb->n_members,
                             partial_max(c));
    if (pb->n_metric_sums != SFL_METRIC_COUNT)
        return sfl__msg_fail(c, c->bad, "%zu metric_sums, want %d", pb->n_metric_sums,
                             SFL_METRIC_COUNT);
    memcpy(m->metric_sums, pb->metric_sums, sizeof(m->metric_sums));
    if ((m->members = sfl__malloc(pb->n_members * sizeof(*m->members))) == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory");
    memcpy(m->members, pb->members, pb->n_members * sizeof(*m->members));
    m->nmembers = (uint32_t)pb->n_members;
    if ((rc = sfl__msg_get_sparse(c, "sum", pb->sum, c->lim->max_dim, c->lim->max_nnz, &m->sum,
                                  &enc, NULL)) < 0)
        return rc;
    if (enc != SFL_ENC_F64)
        return sfl__msg_fail(c, c->bad, "sum is not float64 (encoding %d)", (int)enc);
    return check_partial(c, m);
}

void sfl_msg_fleet_partial_free(sfl_fleet_partial_t *m)
{
    if (m != NULL) {
        sfl__free(m->members);
        sfl_spvec_free(m->sum);
    }
    sfl__free(m);
}

static void free_partial(void *m)
{
    sfl_msg_fleet_partial_free(m);
}

static const msg_type_t partial_type = {"fleet partial", &sfl__v1__fleet_partial__descriptor,
    check_partial, put_partial, get_partial, sizeof(sfl_fleet_partial_t), free_partial, 0, NULL};

int sfl_msg_fleet_partial_pack(const sfl_fleet_partial_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&partial_type, m, NULL, out, len);
}

int sfl_msg_fleet_partial_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_fleet_partial_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&partial_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

static int put_partial_reply(const chk_t *c, const void *p, wire_t *w)
{
    (void)c;
    w->pb.fleet_partial_reply.accepted = *(const uint32_t *)p;
    return 0;
}

static int get_partial_reply(const chk_t *c, void *p, void *out)
{
    (void)c;
    *(uint32_t *)out = ((Sfl__V1__FleetPartialReply *)p)->accepted;
    return 0;
}

static const msg_type_t partial_reply_type = {"fleet partial reply",
    &sfl__v1__fleet_partial_reply__descriptor, NULL, put_partial_reply, get_partial_reply,
    sizeof(uint32_t), NULL, 0, NULL};

int sfl_msg_fleet_partial_reply_pack(uint32_t accepted, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&partial_reply_type, &accepted, NULL, out, len);
}

int sfl_msg_fleet_partial_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                       uint32_t *accepted)
{
    return sfl__msg_unpack_in(&partial_reply_type, buf, len, lim, accepted);
}

/* ---- Fleet.Model: the hash of a fetched model ---------------------------------- */

/* SparseVector.data's BLAKE2b-256, as the agent's unpack hashes it (the
 * last data field, as protobuf-c keeps the last of a repeated scalar). */
int sfl_msg_fleet_model_hash(const uint8_t *model, size_t len, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    const uint8_t *data = NULL;
    size_t off = 0, dlen = 0;
    int rc;

    if (model == NULL || len == 0)
        return sfl__fail(SFL_EPARSE, "model: empty");
    while (off < len) {
        uint32_t num, wt;
        const uint8_t *val;
        size_t vlen;
        uint64_t v = 0;

        if ((rc = field_next(model, len, &off, &num, &wt, &val, &vlen, &v)) < 0)
            return rc;
        if (num == 2) {
            if (wt != 2)
                return sfl__fail(SFL_EPARSE, "model: data is not bytes");
            data = val;
            dlen = vlen;
        }
    }
    if (data == NULL || dlen == 0)
        return sfl__fail(SFL_EPARSE, "model: no data");
    crypto_generichash(hash, SFL_MSG_HASH_BYTES, data, dlen, NULL, 0);
    return 0;
}

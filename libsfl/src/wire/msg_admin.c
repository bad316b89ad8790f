/* The Admin service's messages: job spec, job status, status and lists,
 * agents, export, history, revoke, release.
 * (msg_int.h: the steps they go through.) */
#include "msg_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

/* ---- Admin: jobs ------------------------------------------------------------ */

/* The JobSpec fields come from one table, sfl/wire/jobspec.def: a check,
 * a put and a get per type, each row expanded into the three. */
enum { ANY, REQ, NONNEG, EVEN };

static int spec_check_num(const chk_t *c, const char *f, double v, uint64_t u, int range)
{
    if (range == REQ && u == 0)
        return sfl__msg_fail(c, c->bad, "%s missing (0)", f);
    if (range == EVEN && u % 2 != 0)
        return sfl__msg_fail(c, c->bad, "%s %llu (need 0 or even)", f, (unsigned long long)u);
    if (range == NONNEG && v < 0)
        return sfl__msg_fail(c, c->bad, "%s must be >= 0 (got %g)", f, v);
    return 0;
}

#define SPEC_CHECK_U32(f, s, x, range) spec_check_num(c, f, 0, s->x, range)
#define SPEC_CHECK_U64(f, s, x, range) spec_check_num(c, f, 0, s->x, range)
#define SPEC_CHECK_F64(f, s, x, range)                                                             \
    ((rc = sfl__msg_check_finite(c, f, s->x)) < 0 ? rc : spec_check_num(c, f, s->x, 0, range))
#define SPEC_CHECK_FLAG(f, s, x, range) sfl__msg_check_bool(c, f, s->x)
#define SPEC_CHECK_STR(f, s, x, range) sfl__msg_check_str(c, f, s->x, sizeof(s->x), range == REQ)
#define SPEC_CHECK_ENC(f, s, x, range) sfl__msg_check_enc(c, f, s->x)
#define SPEC_CHECK_LABELS(f, s, x, range) sfl__msg_check_labels(c, f, s->n##x, s->x)
#define SPEC_CHECK_TAGS(f, s, x, range) sfl__msg_check_tags(c, f, &s->x)
#define SPEC_CHECK_PARAMS(f, s, x, range) sfl__msg_check_params(c, &s->x)

static int check_job_spec(const chk_t *c, const void *p)
{
    const sfl_job_spec_t *m = p;
    int rc = 0;

#define SFL_JOBSPEC_FIELD(key, type, member, proto, def, range, ini, help)                         \
    if ((rc = SPEC_CHECK_##type(#proto, m, member, range)) < 0)                                    \
        return rc;
#include "sfl/wire/jobspec.def"
#undef SFL_JOBSPEC_FIELD
    if (m->min_quorum > m->cohort_size)
        return sfl__msg_fail(c, c->bad, "min_quorum %u not in [1, cohort_size %u]", m->min_quorum,
                             m->cohort_size);
    return 0;
}

#define SPEC_PUT_U32(x, s, m) js->x = s->m;
#define SPEC_PUT_U64(x, s, m) js->x = s->m;
#define SPEC_PUT_F64(x, s, m) js->x = s->m;
#define SPEC_PUT_FLAG(x, s, m) js->x = s->m;
#define SPEC_PUT_STR(x, s, m) js->x = str(s->m);
#define SPEC_PUT_ENC(x, s, m) js->x = (Sfl__V1__ValueEncoding)(s->m + 1);
#define SPEC_PUT_LABELS(x, s, m)                                                                   \
    js->n_##x = s->n##m;                                                                           \
    js->x = (double *)(uintptr_t)s->m;
#define SPEC_PUT_TAGS(x, s, m) sfl__msg_put_tags(&s->m, w->tags[0], &js->n_##x, &js->x);
#define SPEC_PUT_PARAMS(x, s, m)                                                                   \
    sfl__msg_put_params(&s->m, w);                                                                 \
    js->x = &w->pp;

static int put_job_spec(const chk_t *c, const void *pv, wire_t *w)
{
    const sfl_job_spec_t *p = pv;
    Sfl__V1__JobSpec *js = &w->spec;

    (void)c;
#define SFL_JOBSPEC_FIELD(key, type, member, proto, def, range, ini, help)                         \
    SPEC_PUT_##type(proto, p, member)
#include "sfl/wire/jobspec.def"
#undef SFL_JOBSPEC_FIELD
    w->pb.create_job.spec = js;
    return 0;
}

#define SPEC_GET_U32(f, x, s, m) (s->m = js->x, 0)
#define SPEC_GET_U64(f, x, s, m) (s->m = js->x, 0)
#define SPEC_GET_F64(f, x, s, m) (s->m = js->x, 0)
#define SPEC_GET_FLAG(f, x, s, m) (s->m = js->x ? 1 : 0, 0)
#define SPEC_GET_STR(f, x, s, m) sfl__msg_get_str(c, f, js->x, s->m, sizeof(s->m))
#define SPEC_GET_ENC(f, x, s, m) sfl__msg_get_enc(c, f, (int)js->x, &s->m)
#define SPEC_GET_LABELS(f, x, s, m) sfl__msg_get_labels(c, f, js->x, js->n_##x, &s->n##m, s->m)
#define SPEC_GET_TAGS(f, x, s, m) sfl__msg_get_tags(c, f, js->x, js->n_##x, &s->m)
#define SPEC_GET_PARAMS(f, x, s, m) sfl__msg_get_params(c, js->x, &s->m)

static int get_job_spec(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobSpec *js = ((const Sfl__V1__CreateJobRequest *)p)->spec;
    sfl_job_spec_t *o = out;
    int rc;

    if (js == NULL)
        return sfl__msg_fail(c, SFL_EPARSE, "spec missing");
#define SFL_JOBSPEC_FIELD(key, type, member, proto, def, range, ini, help)                         \
    if ((rc = SPEC_GET_##type(#proto, proto, o, member)) < 0)                                      \
        return rc;
#include "sfl/wire/jobspec.def"
#undef SFL_JOBSPEC_FIELD
    return check_job_spec(c, o);
}

static const msg_type_t create_job_type = {"job spec", &sfl__v1__create_job_request__descriptor,
    check_job_spec, put_job_spec, get_job_spec, sizeof(sfl_job_spec_t), NULL, 0, NULL};

int sfl_msg_create_job_pack(const sfl_job_spec_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&create_job_type, m, NULL, out, len);
}

int sfl_msg_create_job_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_job_spec_t *m)
{
    return sfl__msg_unpack_in(&create_job_type, buf, len, lim, m);
}

/* Every F64 round metric in m finite (only the JobStatus ones, last, for
 * JobStatus: the others do not travel); names prefix + the metric's. */
static int check_metrics(const chk_t *c, const char *prefix, const sfl_round_metrics_t *m,
                         int last)
{
    char name[64];
    int rc;

    for (int id = 0; id < SFL_METRIC_COUNT; id++) {
        if (sfl_metrics[id].type != SFL_METRIC_F64 || (last && !sfl_metrics[id].status))
            continue;
        snprintf(name, sizeof(name), "%s%s", prefix, sfl_metrics[id].name);
        if ((rc = sfl__msg_check_finite(c, name, sfl_metric_get(id, m))) < 0)
            return rc;
    }
    return 0;
}

static int check_job_status(const chk_t *c, const void *p)
{
    const sfl_job_status_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_str(c, "name", m->name, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_enum(c, "state", (int)m->state, 1, 6)) < 0 ||
        (rc = sfl__msg_check_enum(c, "round_state", (int)m->round_state, 0, 4)) < 0 ||
        (rc = sfl__msg_check_str(c, "error", m->error, SFL_MSG_TEXT_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_metrics(c, "last_", &m->last, 1)) < 0 ||
        (rc = sfl__msg_check_finite(c, "privacy_epsilon", m->privacy_epsilon)) < 0 ||
        (rc = sfl__msg_check_finite(c, "privacy_delta", m->privacy_delta)) < 0 ||
        (rc = sfl__msg_check_finite(c, "privacy_spent", m->privacy_spent)) < 0 ||
        (rc = sfl__msg_check_finite(c, "privacy_spent_rdp", m->privacy_spent_rdp)) < 0 ||
        (rc = sfl__msg_check_str(c, "waiting", m->waiting, SFL_MSG_TEXT_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "quarantine", m->quarantine, SFL_MSG_TEXT_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "description", m->description, SFL_MSG_TEXT_LEN, 0)) < 0)
        return rc;
    if ((m->quarantined == 0) != (m->quarantine[0] == '\0'))
        return sfl__msg_fail(c, c->bad,
                             "quarantine text without quarantined agents, or the reverse");
    if (m->statistics > 2)
        return sfl__msg_fail(c, c->bad, "statistics %u (want 0, 1 or 2)", m->statistics);
    if (m->privacy_epsilon < 0 || m->privacy_delta < 0 || m->privacy_spent < 0 ||
        m->privacy_spent_rdp < 0)
        return sfl__msg_fail(c, c->bad, "privacy ledger values must be >= 0");
    return 0;
}

static void put_job_status(const sfl_job_status_t *m, Sfl__V1__JobStatus *o)
{
    o->job_id = m->job_id;
    o->name = str(m->name);
    o->algorithm = str(m->algorithm);
    o->state = (Sfl__V1__JobState)m->state;
    o->committed_round = m->committed_round;
    o->rounds = m->rounds;
    o->round_state = (Sfl__V1__RoundState)m->round_state;
    o->attempt = m->attempt;
    o->selected = m->selected;
    o->accepted = m->accepted;
    o->cohort_size = m->cohort_size;
    o->min_quorum = m->min_quorum;
    o->deadline_ms = m->deadline_ms;
    o->error = str(m->error);
    o->model_nnz = m->model_nnz;
#define SFL_METRIC(name, type, fold, weight, when, status, ...) METRIC_PUT_##status(name)
#define METRIC_PUT_LAST(name) o->last_##name = m->last.name;
#define METRIC_PUT_NONE(name)
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    o->loss = str(m->loss);
    o->waiting = str(m->waiting);
    o->iteration = m->iteration;
    o->privacy_epsilon = m->privacy_epsilon;
    o->privacy_delta = m->privacy_delta;
    o->privacy_spent = m->privacy_spent;
    o->privacy_spent_rdp = m->privacy_spent_rdp;
    o->privacy_iterations = m->privacy_iterations;
    o->quarantined = m->quarantined;
    o->quarantine = str(m->quarantine);
    o->statistics = m->statistics;
    o->statistics_rows = m->statistics_rows;
    o->statistics_agents = m->statistics_agents;
    o->description = str(m->description);
}

static int get_job_status(const chk_t *c, const Sfl__V1__JobStatus *p, sfl_job_status_t *m)
{
    int rc;

    memset(m, 0, sizeof(*m));
    if (p == NULL)
        return sfl__msg_fail(c, c->bad, "job missing");
    m->job_id = p->job_id;
    m->state = (sfl_job_state_t)p->state;
    m->committed_round = p->committed_round;
    m->rounds = p->rounds;
    m->round_state = (sfl_round_state_t)p->round_state;
    m->attempt = p->attempt;
    m->selected = p->selected;
    m->accepted = p->accepted;
    m->cohort_size = p->cohort_size;
    m->min_quorum = p->min_quorum;
    m->deadline_ms = p->deadline_ms;
    m->model_nnz = p->model_nnz;
#define SFL_METRIC(name, type, fold, weight, when, status, ...) METRIC_GET_##status(name)
#define METRIC_GET_LAST(name) m->last.name = p->last_##name;
#define METRIC_GET_NONE(name)
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    m->iteration = p->iteration;
    m->privacy_epsilon = p->privacy_epsilon;
    m->privacy_delta = p->privacy_delta;
    m->privacy_spent = p->privacy_spent;
    m->privacy_spent_rdp = p->privacy_spent_rdp;
    m->privacy_iterations = p->privacy_iterations;
    if ((rc = sfl__msg_get_str(c, "name", p->name, m->name, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "algorithm", p->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "error", p->error, m->error, SFL_MSG_TEXT_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "loss", p->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "waiting", p->waiting, m->waiting, SFL_MSG_TEXT_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "quarantine", p->quarantine, m->quarantine, SFL_MSG_TEXT_LEN)) <
            0 ||
        (rc = sfl__msg_get_str(c, "description", p->description, m->description,
                               SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    m->quarantined = p->quarantined;
    m->statistics = p->statistics;
    m->statistics_rows = p->statistics_rows;
    m->statistics_agents = p->statistics_agents;
    return check_job_status(c, m);
}

/* ---- RevokeRequest / RevokeReply ---------------------------------------- */

static int check_revoke_req(const chk_t *c, const void *p)
{
    const sfl_revoke_t *m = p;
    int rc = sfl__msg_check_str(c, "agent", m->agent, SFL_MSG_NAME_LEN, 0);

    if (rc < 0)
        return rc;
    if ((m->agent[0] != '\0') == m->has_fingerprint)
        return sfl__msg_fail(c, c->bad, "want exactly one of agent and fingerprint");
    return 0;
}

static int put_revoke_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_revoke_t *m = p;

    (void)c;
    w->pb.revoke_req.agent = str(m->agent);
    if (m->has_fingerprint)
        w->pb.revoke_req.fingerprint = bin(m->fingerprint, SFL_MSG_HASH_BYTES);
    return 0;
}

static int get_revoke_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__RevokeRequest *pb = p;
    sfl_revoke_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    if ((rc = sfl__msg_get_str(c, "agent", pb->agent, m->agent, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    if (pb->fingerprint.len > 0) {
        if ((rc = sfl__msg_get_fixed(c, "fingerprint", &pb->fingerprint, m->fingerprint,
                                     SFL_MSG_HASH_BYTES)) < 0)
            return rc;
        m->has_fingerprint = 1;
    }
    return check_revoke_req(c, m);
}

static const msg_type_t revoke_req_type = {"revoke request", &sfl__v1__revoke_request__descriptor,
    check_revoke_req, put_revoke_req, get_revoke_req, sizeof(sfl_revoke_t), NULL, 0, NULL};

static int check_revoke_reply(const chk_t *c, const void *p)
{
    const sfl_revoke_t *m = p;

    if (!m->has_fingerprint)
        return sfl__msg_fail(c, c->bad, "fingerprint missing");
    return sfl__msg_check_str(c, "agent", m->agent, SFL_MSG_NAME_LEN, 0);
}

static int put_revoke_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_revoke_t *m = p;

    (void)c;
    w->pb.revoke_reply.fingerprint = bin(m->fingerprint, SFL_MSG_HASH_BYTES);
    w->pb.revoke_reply.agent = str(m->agent);
    w->pb.revoke_reply.closed = m->closed;
    return 0;
}

static int get_revoke_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__RevokeReply *pb = p;
    sfl_revoke_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    if ((rc = sfl__msg_get_fixed(c, "fingerprint", &pb->fingerprint, m->fingerprint,
                                 SFL_MSG_HASH_BYTES)) < 0 ||
                 (rc = sfl__msg_get_str(c, "agent", pb->agent, m->agent, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->has_fingerprint = 1;
    m->closed = pb->closed;
    return check_revoke_reply(c, m);
}

static const msg_type_t revoke_reply_type = {"revoke reply", &sfl__v1__revoke_reply__descriptor,
    check_revoke_reply, put_revoke_reply, get_revoke_reply, sizeof(sfl_revoke_t), NULL, 0, NULL};

int sfl_msg_revoke_req_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&revoke_req_type, m, NULL, out, len);
}

int sfl_msg_revoke_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_revoke_t *m)
{
    return sfl__msg_unpack_in(&revoke_req_type, buf, len, lim, m);
}

int sfl_msg_revoke_reply_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&revoke_reply_type, m, NULL, out, len);
}

int sfl_msg_revoke_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_revoke_t *m)
{
    return sfl__msg_unpack_in(&revoke_reply_type, buf, len, lim, m);
}

/* ---- ReleaseRequest / ReleaseReply ---------------------------------------- */

static int check_release_req(const chk_t *c, const void *p)
{
    const sfl_release_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "agent_id", m->agent_id)) < 0)
        return rc;
    return 0;
}

static int put_release_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_release_t *m = p;

    (void)c;
    w->pb.release_req.job_id = m->job_id;
    w->pb.release_req.agent_id = m->agent_id;
    return 0;
}

static int get_release_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ReleaseRequest *pb = p;
    sfl_release_t *m = out;

    memset(m, 0, sizeof(*m));
    m->job_id = pb->job_id;
    m->agent_id = pb->agent_id;
    return check_release_req(c, m);
}

static const msg_type_t release_req_type = {"release request",
    &sfl__v1__release_request__descriptor, check_release_req, put_release_req,
    get_release_req, sizeof(sfl_release_t), NULL, 0, NULL};

static int check_release_reply(const chk_t *c, const void *p)
{
    const sfl_release_t *m = p;
    int rc;

    if ((rc = check_release_req(c, m)) < 0)
        return rc;
    return sfl__msg_check_str(c, "reason", m->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_release_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_release_t *m = p;

    (void)c;
    w->pb.release_reply.job_id = m->job_id;
    w->pb.release_reply.agent_id = m->agent_id;
    w->pb.release_reply.reason = str(m->reason);
    return 0;
}

static int get_release_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ReleaseReply *pb = p;
    sfl_release_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    m->job_id = pb->job_id;
    m->agent_id = pb->agent_id;
    if ((rc = sfl__msg_get_str(c, "reason", pb->reason, m->reason, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    return check_release_reply(c, m);
}

static const msg_type_t release_reply_type = {"release reply",
    &sfl__v1__release_reply__descriptor, check_release_reply, put_release_reply,
    get_release_reply, sizeof(sfl_release_t), NULL, 0, NULL};

int sfl_msg_release_req_pack(const sfl_release_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&release_req_type, m, NULL, out, len);
}

int sfl_msg_release_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_release_t *m)
{
    return sfl__msg_unpack_in(&release_req_type, buf, len, lim, m);
}

int sfl_msg_release_reply_pack(const sfl_release_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&release_reply_type, m, NULL, out, len);
}

int sfl_msg_release_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_release_t *m)
{
    return sfl__msg_unpack_in(&release_reply_type, buf, len, lim, m);
}

/* JobRequest carries only the id, which put checks. */
static int put_job_req(const chk_t *c, const void *p, wire_t *w)
{
    const uint64_t *job_id = p;
    int rc = sfl__msg_check_id(c, "job_id", *job_id);

    w->pb.job_req.job_id = *job_id;
    return rc;
}

static int get_job_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobRequest *pb = p;
    int rc = sfl__msg_check_id(c, "job_id", pb->job_id);

    if (rc == 0)
        *(uint64_t *)out = pb->job_id;
    return rc;
}

static const msg_type_t job_req_type = {"job request", &sfl__v1__job_request__descriptor, NULL,
    put_job_req, get_job_req, sizeof(uint64_t), NULL, 0, NULL};

int sfl_msg_job_req_pack(uint64_t job_id, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&job_req_type, &job_id, NULL, out, len);
}

int sfl_msg_job_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint64_t *job_id)
{
    return sfl__msg_unpack_in(&job_req_type, buf, len, lim, job_id);
}

static int put_job_reply(const chk_t *c, const void *p, wire_t *w)
{
    (void)c;
    put_job_status(p, &w->job);
    w->pb.job_reply.job = &w->job;
    return 0;
}

static int get_job_reply(const chk_t *c, void *p, void *out)
{
    return get_job_status(c, ((const Sfl__V1__JobReply *)p)->job, out);
}

static const msg_type_t job_reply_type = {"job reply", &sfl__v1__job_reply__descriptor,
    check_job_status, put_job_reply, get_job_reply, sizeof(sfl_job_status_t), NULL, 0, NULL};

int sfl_msg_job_reply_pack(const sfl_job_status_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&job_reply_type, m, NULL, out, len);
}

int sfl_msg_job_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_job_status_t *m)
{
    return sfl__msg_unpack_in(&job_reply_type, buf, len, lim, m);
}

/* ---- Admin: empty requests, status, lists ---------------------------------------- */

/* Empty messages still go through protobuf-c, so a request that is not one
 * (garbage, a wrong wire type) is refused like any other. */
static const msg_type_t status_req_type = {"status request", &sfl__v1__status_request__descriptor,
    NULL, NULL, NULL, 0, NULL, 0, NULL};

static const msg_type_t list_jobs_req_type = {"list jobs request",
    &sfl__v1__list_jobs_request__descriptor, NULL, NULL, NULL, 0, NULL, 0, NULL};

int sfl_msg_status_req_pack(uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&status_req_type, NULL, NULL, out, len);
}

int sfl_msg_status_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim)
{
    return sfl__msg_unpack_in(&status_req_type, buf, len, lim, NULL);
}

int sfl_msg_list_jobs_req_pack(uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&list_jobs_req_type, NULL, NULL, out, len);
}

int sfl_msg_list_jobs_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim)
{
    return sfl__msg_unpack_in(&list_jobs_req_type, buf, len, lim, NULL);
}

/* Jobs as w->blk and w->ptrs; *field gets the pointers. */
static int put_jobs(const chk_t *c, const sfl_job_status_t *jobs, uint32_t n, wire_t *w,
                    Sfl__V1__JobStatus ***field)
{
    static const Sfl__V1__JobStatus init = SFL__V1__JOB_STATUS__INIT;
    Sfl__V1__JobStatus *blk, **ptrs;
    int rc = sfl__msg_alloc_list(c, "jobs", n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < n; i++) {
        blk[i] = init;
        put_job_status(&jobs[i], &blk[i]);
        ptrs[i] = &blk[i];
    }
    *field = ptrs;
    return 0;
}

static int get_job_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    Sfl__V1__JobStatus *const *jobs = src;

    return get_job_status(c, jobs[i], dst);
}

static int check_status(const chk_t *c, const void *p)
{
    const sfl_status_t *m = p;
    int rc = sfl__msg_check_str(c, "version", m->version, SFL_MSG_NAME_LEN, 0);

    return rc < 0 ? rc
                  : sfl__msg_check_list(c, "jobs", m->jobs, m->njobs, sizeof(*m->jobs),
                                        check_job_status);
}

static int put_status(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_status_t *m = p;
    Sfl__V1__StatusReply *pb = &w->pb.status;

    pb->version = str(m->version);
    pb->started_ms = m->started_ms;
    pb->connected_agents = m->connected_agents;
    pb->known_agents = m->known_agents;
    pb->updates_accepted = m->updates_accepted;
    pb->updates_rejected = m->updates_rejected;
    pb->bytes_in = m->bytes_in;
    pb->bytes_out = m->bytes_out;
    pb->n_jobs = m->njobs;
    return put_jobs(c, m->jobs, m->njobs, w, &pb->jobs);
}

static int get_status(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__StatusReply *pb = p;
    sfl_status_t *m = out;
    int rc;

    m->started_ms = pb->started_ms;
    m->connected_agents = pb->connected_agents;
    m->known_agents = pb->known_agents;
    m->updates_accepted = pb->updates_accepted;
    m->updates_rejected = pb->updates_rejected;
    m->bytes_in = pb->bytes_in;
    m->bytes_out = pb->bytes_out;
    m->njobs = (uint32_t)pb->n_jobs;
    if ((rc = sfl__msg_get_str(c, "version", pb->version, m->version, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_check_str(c, "version", m->version, SFL_MSG_NAME_LEN, 0)) < 0)
        return rc;
    m->jobs = sfl__msg_get_list(c, "jobs", pb->jobs, pb->n_jobs, sizeof(*m->jobs), get_job_at, &rc);
    return rc;
}

void sfl_msg_status_free(sfl_status_t *m)
{
    if (m != NULL)
        sfl__free(m->jobs);
    sfl__free(m);
}

static void free_status(void *m)
{
    sfl_msg_status_free(m);
}

static const msg_type_t status_type = {"status", &sfl__v1__status_reply__descriptor, check_status,
    put_status, get_status, sizeof(sfl_status_t), free_status, 9, NULL};

int sfl_msg_status_pack(const sfl_status_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&status_type, m, NULL, out, len);
}

int sfl_msg_status_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_status_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&status_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

static int check_job_list(const chk_t *c, const void *p)
{
    const sfl_job_list_t *m = p;

    return sfl__msg_check_list(c, "jobs", m->jobs, m->n, sizeof(*m->jobs), check_job_status);
}

static int put_job_list(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_job_list_t *m = p;

    w->pb.job_list.n_jobs = m->n;
    return put_jobs(c, m->jobs, m->n, w, &w->pb.job_list.jobs);
}

static int get_job_list(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ListJobsReply *pb = p;
    sfl_job_list_t *m = out;
    int rc;

    m->n = (uint32_t)pb->n_jobs;
    m->jobs = sfl__msg_get_list(c, "jobs", pb->jobs, pb->n_jobs, sizeof(*m->jobs), get_job_at, &rc);
    return rc;
}

void sfl_msg_job_list_free(sfl_job_list_t *m)
{
    if (m != NULL)
        sfl__free(m->jobs);
    sfl__free(m);
}

static void free_job_list(void *m)
{
    sfl_msg_job_list_free(m);
}

static const msg_type_t job_list_type = {"job list", &sfl__v1__list_jobs_reply__descriptor,
    check_job_list, put_job_list, get_job_list, sizeof(sfl_job_list_t), free_job_list, 1, NULL};

int sfl_msg_job_list_pack(const sfl_job_list_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&job_list_type, m, NULL, out, len);
}

int sfl_msg_job_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_job_list_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&job_list_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: agents ------------------------------------------------------------- */

static int put_list_agents_req(const chk_t *c, const void *p, wire_t *w)
{
    const int *connected_only = p;
    int rc = sfl__msg_check_bool(c, "connected_only", *connected_only);

    w->pb.list_agents_req.connected_only = *connected_only;
    return rc;
}

static int get_list_agents_req(const chk_t *c, void *p, void *out)
{
    (void)c;
    *(int *)out = ((const Sfl__V1__ListAgentsRequest *)p)->connected_only ? 1 : 0;
    return 0;
}

static const msg_type_t list_agents_req_type = {"list agents request",
    &sfl__v1__list_agents_request__descriptor, NULL, put_list_agents_req, get_list_agents_req,
    sizeof(int), NULL, 0, NULL};

int sfl_msg_list_agents_req_pack(int connected_only, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&list_agents_req_type, &connected_only, NULL, out, len);
}

int sfl_msg_list_agents_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   int *connected_only)
{
    return sfl__msg_unpack_in(&list_agents_req_type, buf, len, lim, connected_only);
}

static int check_agent(const chk_t *c, const void *p)
{
    const sfl_agent_info_t *a = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "agent_id", a->agent_id)) < 0 ||
        (rc = sfl__msg_check_str(c, "subject", a->subject, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_bool(c, "connected", a->connected)) < 0 ||
        (rc = sfl__msg_check_tags(c, "capabilities", &a->capabilities)) < 0 ||
        (rc = sfl__msg_check_tags(c, "conditions", &a->conditions)) < 0 ||
        (rc = sfl__msg_check_summary(c, &a->dataset)) < 0 ||
        (rc = sfl__msg_check_enum(c, "phase", (int)a->phase, 0, 3)) < 0 ||
        (rc = sfl__msg_check_str(c, "agent_version", a->agent_version, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "quarantine", a->quarantine, SFL_MSG_TEXT_LEN, 0)) < 0)
        return rc;
    if (a->progress_permille > 1000)
        return sfl__msg_fail(c, c->bad, "progress_permille %u exceeds 1000", a->progress_permille);
    return 0;
}

/* Scratch for one AgentInfo on the wire. */
typedef struct agent_pb {
    Sfl__V1__AgentInfo ai;
    Sfl__V1__DatasetSummary ds;
    char *caps[SFL_MSG_MAX_TAGS];
    char *conds[SFL_MSG_MAX_TAGS];
} agent_pb_t;

static int check_agent_list(const chk_t *c, const void *p)
{
    const sfl_agent_list_t *m = p;

    return sfl__msg_check_list(c, "agents", m->agents, m->n, sizeof(*m->agents), check_agent);
}

static int put_agent_list(const chk_t *c, const void *p, wire_t *w)
{
    static const Sfl__V1__AgentInfo ai_init = SFL__V1__AGENT_INFO__INIT;
    static const Sfl__V1__DatasetSummary ds_init = SFL__V1__DATASET_SUMMARY__INIT;
    const sfl_agent_list_t *m = p;
    agent_pb_t *blk;
    Sfl__V1__AgentInfo **ptrs;
    int rc = sfl__msg_alloc_list(c, "agents", m->n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < m->n; i++) {
        const sfl_agent_info_t *a = &m->agents[i];
        agent_pb_t *q = &blk[i];

        q->ai = ai_init;
        q->ds = ds_init;
        q->ai.agent_id = a->agent_id;
        q->ai.subject = str(a->subject);
        q->ai.connected = a->connected;
        sfl__msg_put_tags(&a->capabilities, q->caps, &q->ai.n_capabilities, &q->ai.capabilities);
        sfl__msg_put_tags(&a->conditions, q->conds, &q->ai.n_conditions, &q->ai.conditions);
        sfl__msg_put_summary(&a->dataset, &q->ds);
        q->ai.dataset = &q->ds;
        q->ai.last_seen_ms = a->last_seen_ms;
        q->ai.phase = (Sfl__V1__AgentPhase)a->phase;
        q->ai.job_id = a->job_id;
        q->ai.round = a->round;
        q->ai.progress_permille = a->progress_permille;
        q->ai.updates_accepted = a->updates_accepted;
        q->ai.agent_version = str(a->agent_version);
        q->ai.quarantine = str(a->quarantine);
        ptrs[i] = &q->ai;
    }
    w->pb.agent_list.n_agents = m->n;
    w->pb.agent_list.agents = ptrs;
    return 0;
}

static int get_agent_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__AgentInfo *p = ((Sfl__V1__AgentInfo *const *)src)[i];
    sfl_agent_info_t *a = dst;
    int rc;

    memset(a, 0, sizeof(*a));
    a->agent_id = p->agent_id;
    a->connected = p->connected ? 1 : 0;
    a->last_seen_ms = p->last_seen_ms;
    a->phase = (sfl_agent_phase_t)p->phase;
    a->job_id = p->job_id;
    a->round = p->round;
    a->progress_permille = p->progress_permille;
    a->updates_accepted = p->updates_accepted;
    if ((rc = sfl__msg_get_str(c, "subject", p->subject, a->subject, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_tags(c, "capabilities", p->capabilities, p->n_capabilities,
                                &a->capabilities)) < 0 ||
        (rc = sfl__msg_get_tags(c, "conditions", p->conditions, p->n_conditions, &a->conditions)) <
            0 ||
        (rc = sfl__msg_get_str(c, "agent_version", p->agent_version, a->agent_version,
                               SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "quarantine", p->quarantine, a->quarantine, SFL_MSG_TEXT_LEN)) <
            0)
        return rc;
    /* The summary is optional in a listing (an agent known only by id). */
    if (p->dataset != NULL && (rc = sfl__msg_get_summary(c, p->dataset, &a->dataset)) < 0)
        return rc;
    return check_agent(c, a);
}

static int get_agent_list(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ListAgentsReply *pb = p;
    sfl_agent_list_t *m = out;
    int rc;

    m->n = (uint32_t)pb->n_agents;
    m->agents = sfl__msg_get_list(c, "agents", pb->agents, pb->n_agents, sizeof(*m->agents),
                                  get_agent_at, &rc);
    return rc;
}

void sfl_msg_agent_list_free(sfl_agent_list_t *m)
{
    if (m != NULL)
        sfl__free(m->agents);
    sfl__free(m);
}

static void free_agent_list(void *m)
{
    sfl_msg_agent_list_free(m);
}

static const msg_type_t agent_list_type = {"agent list",
                                           &sfl__v1__list_agents_reply__descriptor,
                                           check_agent_list,
                                           put_agent_list,
                                           get_agent_list,
                                           sizeof(sfl_agent_list_t),
                                           free_agent_list,
                                           1,
                                           NULL};

int sfl_msg_agent_list_pack(const sfl_agent_list_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&agent_list_type, m, NULL, out, len);
}

int sfl_msg_agent_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_agent_list_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&agent_list_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: export ----------------------------------------------------------- */

/* The arguments of sfl_msg_export_req_pack / _unpack. */
typedef struct export_req {
    uint64_t job_id;
    uint64_t round;
} export_req_t;

static int put_export_req(const chk_t *c, const void *p, wire_t *w)
{
    const export_req_t *m = p;
    int rc = sfl__msg_check_id(c, "job_id", m->job_id);

    w->pb.export_req.job_id = m->job_id;
    w->pb.export_req.round = m->round;
    return rc;
}

static int get_export_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ExportModelRequest *pb = p;
    export_req_t *m = out;
    int rc = sfl__msg_check_id(c, "job_id", pb->job_id);

    if (rc == 0) {
        m->job_id = pb->job_id;
        m->round = pb->round;
    }
    return rc;
}

static const msg_type_t export_req_type = {"export request",
    &sfl__v1__export_model_request__descriptor, NULL, put_export_req, get_export_req,
    sizeof(export_req_t), NULL, 0, NULL};

int sfl_msg_export_req_pack(uint64_t job_id, uint64_t round, uint8_t **out, size_t *len)
{
    const export_req_t m = {job_id, round};

    return sfl__msg_pack_msg(&export_req_type, &m, NULL, out, len);
}

int sfl_msg_export_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              uint64_t *job_id, uint64_t *round)
{
    export_req_t m;
    int rc = sfl__msg_unpack_in(&export_req_type, buf, len, lim, &m);

    *job_id = m.job_id;
    *round = m.round;
    return rc;
}

static int check_export(const chk_t *c, const void *p)
{
    const sfl_export_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_id(c, "round", m->round)) < 0 ||
        (rc = sfl__msg_check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_labels(c, "labels", m->nlabels, m->labels)) < 0)
        return rc;
    return 0;
}

static int put_export(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_export_t *m = p;
    Sfl__V1__ExportModelReply *pb = &w->pb.export;
    int rc = sfl__msg_put_sparse(c, "model", m->model, SFL_ENC_F64, &w->sv, &w->data);

    if (rc < 0)
        return rc;
    crypto_generichash(w->hash, SFL_MSG_HASH_BYTES, w->sv.data.data, w->sv.data.len, NULL, 0);
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->algorithm = str(m->algorithm);
    pb->loss = str(m->loss);
    pb->dimension = m->dimension;
    pb->n_labels = m->nlabels;
    pb->labels = (double *)(uintptr_t)m->labels;
    pb->model = &w->sv;
    pb->model_hash = bin(w->hash, SFL_MSG_HASH_BYTES);
    if (m->moments != NULL) {
        size_t n = 1 + 2 * (size_t)m->dimension;

        if (!(m->standardize_eps > 0) || !isfinite(m->standardize_eps))
            return sfl__msg_fail(c, c->bad, "standardize_eps %g (want > 0, finite)",
                                 m->standardize_eps);
        if ((w->more[9] = sfl__mallocarray(n, 8)) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the moments");
        if (sfl_msg_values_encode(m->moments, n, 0, w->more[9]) < 0)
            return sfl__msg_fail(c, c->bad, "moments: %s", sfl_last_error());
        pb->moments = bin(w->more[9], n * 8);
        pb->standardize_eps = m->standardize_eps;
    }
    return 0;
}

static int get_export(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ExportModelReply *pb = p;
    sfl_export_t *m = out;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int rc;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->dimension = pb->dimension;
    if ((rc = sfl__msg_get_str(c, "algorithm", pb->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) <
            0 ||
        (rc = sfl__msg_get_str(c, "loss", pb->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_labels(c, "labels", pb->labels, pb->n_labels, &m->nlabels, m->labels)) <
            0 ||
        (rc = sfl__msg_get_fixed(c, "model_hash", &pb->model_hash, m->model_hash,
                                 SFL_MSG_HASH_BYTES)) < 0 ||
        (rc = check_export(c, m)) < 0 ||
        (rc = sfl__msg_get_sparse(c, "model", pb->model, c->lim->max_dim, c->lim->max_nnz,
                                  &m->model, NULL, hash)) < 0)
        return rc;
    if (memcmp(hash, m->model_hash, SFL_MSG_HASH_BYTES) != 0)
        return sfl__msg_fail(c, SFL_EPARSE, "model_hash does not match the model");
    if (pb->moments.len > 0 || pb->standardize_eps != 0) {
        size_t n = 1 + 2 * (size_t)m->dimension;

        if (pb->moments.len != 8 * n || !(pb->standardize_eps > 0) ||
            !isfinite(pb->standardize_eps))
            return sfl__msg_fail(c, SFL_EPARSE,
                                 "moments of %zu bytes with standardize_eps %g (want %zu "
                                 "bytes, eps > 0)",
                                 pb->moments.len, pb->standardize_eps, 8 * n);
        if ((m->moments = sfl__mallocarray(n, sizeof(double))) == NULL)
            return sfl__msg_fail(c, SFL_ENOMEM, "no memory for the moments");
        if (sfl_msg_values_decode(pb->moments.data, pb->moments.len, n, 0, m->moments) < 0)
            return sfl__msg_fail(c, SFL_EPARSE, "moments: %s", sfl_last_error());
        m->standardize_eps = pb->standardize_eps;
    }
    return 0;
}

void sfl_msg_export_free(sfl_export_t *m)
{
    if (m != NULL) {
        sfl_spvec_free(m->model);
        sfl__free(m->moments);
    }
    sfl__free(m);
}

static void free_export(void *m)
{
    sfl_msg_export_free(m);
}

static const msg_type_t export_type = {"export", &sfl__v1__export_model_reply__descriptor,
    check_export, put_export, get_export, sizeof(sfl_export_t), free_export, 0, NULL};

int sfl_msg_export_pack(const sfl_export_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&export_type, m, NULL, out, len);
}

int sfl_msg_export_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_export_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&export_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: job history ------------------------------------------------------- */

static int put_history_req(const chk_t *c, const void *p, wire_t *w)
{
    const uint64_t *a = p; /* job_id, after_round */

    w->pb.history_req.job_id = a[0];
    w->pb.history_req.after_round = a[1];
    return sfl__msg_check_id(c, "job_id", a[0]);
}

static int get_history_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobHistoryRequest *pb = p;
    uint64_t *a = out;

    a[0] = pb->job_id;
    a[1] = pb->after_round;
    return sfl__msg_check_id(c, "job_id", pb->job_id);
}

static const msg_type_t history_req_type = {"job history request",
    &sfl__v1__job_history_request__descriptor, NULL, put_history_req, get_history_req,
    2 * sizeof(uint64_t), NULL, 0, NULL};

int sfl_msg_history_req_pack(uint64_t job_id, uint64_t after_round, uint8_t **out, size_t *len)
{
    const uint64_t a[2] = {job_id, after_round};

    return sfl__msg_pack_msg(&history_req_type, a, NULL, out, len);
}

int sfl_msg_history_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               uint64_t *job_id, uint64_t *after_round)
{
    uint64_t a[2];
    int rc = sfl__msg_unpack_in(&history_req_type, buf, len, lim, a);

    *job_id = rc < 0 ? 0 : a[0];
    *after_round = rc < 0 ? 0 : a[1];
    return rc;
}

static int check_round_summary(const chk_t *c, const void *p)
{
    const sfl_round_summary_t *r = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "rounds.round", r->round)) < 0 ||
        (rc = check_metrics(c, "rounds.", &r->m, 0)) < 0)
        return rc;
    if (r->m.privacy_spent < 0 || r->m.privacy_spent_rdp < 0)
        return sfl__msg_fail(c, c->bad, "rounds.privacy_spent must be >= 0");
    return 0;
}

static int check_history(const chk_t *c, const void *p)
{
    const sfl_job_history_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = sfl__msg_check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_bool(c, "more", m->more)) < 0 ||
        (rc = sfl__msg_check_list(c, "rounds", m->rounds, m->n, sizeof(*m->rounds),
                         check_round_summary)) < 0)
        return rc;
    for (uint32_t i = 1; i < m->n; i++)
        if (m->rounds[i].round <= m->rounds[i - 1].round)
            return sfl__msg_fail(c, c->bad, "rounds are not strictly ascending at entry %u", i);
    return 0;
}

static int put_history(const chk_t *c, const void *p, wire_t *w)
{
    static const Sfl__V1__RoundSummary init = SFL__V1__ROUND_SUMMARY__INIT;
    const sfl_job_history_t *m = p;
    Sfl__V1__JobHistoryReply *pb = &w->pb.history;
    Sfl__V1__RoundSummary *blk, **ptrs;
    int rc = sfl__msg_alloc_list(c, "rounds", m->n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    pb->job_id = m->job_id;
    pb->loss = str(m->loss);
    pb->algorithm = str(m->algorithm);
    pb->more = m->more != 0;
    pb->n_rounds = m->n;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < m->n; i++) {
        const sfl_round_summary_t *r = &m->rounds[i];

        blk[i] = init;
        blk[i].round = r->round;
        blk[i].attempt = r->attempt;
        blk[i].opened_ms = r->opened_ms;
        blk[i].committed_ms = r->committed_ms;
        blk[i].selected = r->selected;
        blk[i].accepted = r->accepted;
        blk[i].bytes_up = r->bytes_up;
#define SFL_METRIC(name, ...) blk[i].name = r->m.name;
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
        ptrs[i] = &blk[i];
    }
    pb->rounds = ptrs;
    return 0;
}

static int get_round_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__RoundSummary *p = ((Sfl__V1__RoundSummary *const *)src)[i];
    sfl_round_summary_t *r = dst;

    memset(r, 0, sizeof(*r));
    if (p == NULL)
        return sfl__msg_fail(c, c->bad, "round missing");
    r->round = p->round;
    r->attempt = p->attempt;
    r->opened_ms = p->opened_ms;
    r->committed_ms = p->committed_ms;
    r->selected = p->selected;
    r->accepted = p->accepted;
    r->bytes_up = p->bytes_up;
#define SFL_METRIC(name, ...) r->m.name = p->name;
#include "sfl/wire/roundmetrics.def"
#undef SFL_METRIC
    return check_round_summary(c, r);
}

static int get_history(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobHistoryReply *pb = p;
    sfl_job_history_t *m = out;
    int rc;

    m->job_id = pb->job_id;
    m->more = pb->more != 0;
    m->n = (uint32_t)pb->n_rounds;
    if ((rc = sfl__msg_get_str(c, "loss", pb->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "algorithm", pb->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->rounds = sfl__msg_get_list(c, "rounds", pb->rounds, pb->n_rounds, sizeof(*m->rounds),
                                  get_round_at, &rc);
    if (rc < 0)
        return rc;
    return check_history(c, m);
}

void sfl_msg_history_free(sfl_job_history_t *m)
{
    if (m != NULL)
        sfl__free(m->rounds);
    sfl__free(m);
}

static void free_history(void *m)
{
    sfl_msg_history_free(m);
}

static const msg_type_t history_type = {"job history", &sfl__v1__job_history_reply__descriptor,
    check_history, put_history, get_history, sizeof(sfl_job_history_t), free_history, 3, NULL};

int sfl_msg_history_pack(const sfl_job_history_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&history_type, m, NULL, out, len);
}

int sfl_msg_history_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           sfl_job_history_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&history_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: fleet ---------------------------------------------------------- */

static const msg_type_t fleet_req_type = {"fleet request", &sfl__v1__fleet_request__descriptor,
    NULL, NULL, NULL, 0, NULL, 0, NULL};

int sfl_msg_fleet_req_pack(uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&fleet_req_type, NULL, NULL, out, len);
}

int sfl_msg_fleet_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim)
{
    return sfl__msg_unpack_in(&fleet_req_type, buf, len, lim, NULL);
}

static int check_frontend(const chk_t *c, const void *p)
{
    const sfl_fleet_frontend_t *f = p;
    int rc;

    if ((rc = sfl__msg_check_str(c, "name", f->name, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = sfl__msg_check_str(c, "address", f->address, SFL_MSG_NAME_LEN, 0)) < 0)
        return rc;
    return 0;
}

static int check_master(const chk_t *c, const void *p)
{
    const sfl_fleet_master_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_str(c, "holder", m->holder, sizeof(m->holder), 1)) < 0 ||
        (rc = sfl__msg_check_str(c, "role", m->role, sizeof(m->role), 1)) < 0 ||
        (rc = sfl__msg_check_str(c, "host", m->host, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = sfl__msg_check_bool(c, "stale", m->stale)) < 0)
        return rc;
    if (strcmp(m->role, "leader") != 0 && strcmp(m->role, "standby") != 0 &&
        strcmp(m->role, "single") != 0)
        return sfl__msg_fail(c, c->bad, "master role '%s' is not leader, standby or single",
                             m->role);
    return 0;
}

static int check_fleet(const chk_t *c, const void *p)
{
    const sfl_fleet_t *m = p;
    int rc;

    if ((rc = sfl__msg_check_str(c, "role", m->role, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = sfl__msg_check_bool(c, "has_leader", m->has_leader)) < 0 ||
        (rc = sfl__msg_check_str(c, "holder", m->holder, SFL_MSG_TEXT_LEN, 0)) < 0)
        return rc;
    if (m->has_leader && (m->epoch == 0 || m->since_ms < 0))
        return sfl__msg_fail(c, c->bad, "leader: epoch must be >= 1 and since_ms >= 0");
    if (!m->has_leader && (m->epoch != 0 || m->holder[0] != '\0' || m->since_ms != 0))
        return sfl__msg_fail(c, c->bad, "leader fields without has_leader");
    if (m->n > SFL_MSG_FLEET_MAX_FRONTENDS)
        return sfl__msg_fail(c, c->bad, "%u front-ends exceed %u", m->n,
                             SFL_MSG_FLEET_MAX_FRONTENDS);
    if (m->nmasters > SFL_MSG_FLEET_MAX_MASTERS)
        return sfl__msg_fail(c, c->bad, "%u masters exceed %u", m->nmasters,
                             SFL_MSG_FLEET_MAX_MASTERS);
    if ((rc = sfl__msg_check_list(c, "masters", m->masters, m->nmasters, sizeof(*m->masters),
                                  check_master)) < 0)
        return rc;
    return sfl__msg_check_list(c, "frontends", m->frontends, m->n, sizeof(*m->frontends),
                               check_frontend);
}

/* The masters' entries and pointers in one allocation (w->more[0]: blk
 * and ptrs hold the front-ends'), freed with the wire. */
static int put_masters(const chk_t *c, const sfl_fleet_t *m, wire_t *w)
{
    static const Sfl__V1__FleetMaster init = SFL__V1__FLEET_MASTER__INIT;
    Sfl__V1__FleetMaster *blk;
    Sfl__V1__FleetMaster **ptrs;

    if (m->nmasters == 0)
        return 0;
    blk = sfl__calloc(m->nmasters, sizeof(*blk) + sizeof(*ptrs));
    if (blk == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for %u masters", m->nmasters);
    ptrs = (Sfl__V1__FleetMaster **)(blk + m->nmasters);
    for (uint32_t i = 0; i < m->nmasters; i++) {
        const sfl_fleet_master_t *f = &m->masters[i];

        blk[i] = init;
        blk[i].holder = str(f->holder);
        blk[i].role = str(f->role);
        blk[i].epoch = f->epoch;
        blk[i].host = str(f->host);
        blk[i].pid = f->pid;
        blk[i].started_ms = f->started_ms;
        blk[i].seen_ago_ms = f->seen_ago_ms;
        blk[i].stale = f->stale ? 1 : 0;
        ptrs[i] = &blk[i];
    }
    w->pb.fleet.n_masters = m->nmasters;
    w->pb.fleet.masters = ptrs;
    w->more[0] = blk;
    return 0;
}

static int put_fleet(const chk_t *c, const void *p, wire_t *w)
{
    static const Sfl__V1__FleetFrontend fe_init = SFL__V1__FLEET_FRONTEND__INIT;
    const sfl_fleet_t *m = p;
    Sfl__V1__FleetFrontend *blk, **ptrs;
    int rc = sfl__msg_alloc_list(c, "frontends", m->n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < m->n; i++) {
        blk[i] = fe_init;
        blk[i].name = str(m->frontends[i].name);
        blk[i].address = str(m->frontends[i].address);
        blk[i].agents = m->frontends[i].agents;
        blk[i].lag_ms = m->frontends[i].lag_ms;
        ptrs[i] = &blk[i];
    }
    w->pb.fleet.role = str(m->role);
    w->pb.fleet.has_leader = m->has_leader;
    w->pb.fleet.epoch = m->epoch;
    w->pb.fleet.holder = str(m->holder);
    w->pb.fleet.since_ms = m->since_ms;
    w->pb.fleet.own_epoch = m->own_epoch;
    w->pb.fleet.n_frontends = m->n;
    w->pb.fleet.frontends = ptrs;
    return put_masters(c, m, w);
}

static int get_frontend_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__FleetFrontend *p = ((Sfl__V1__FleetFrontend *const *)src)[i];
    sfl_fleet_frontend_t *f = dst;
    int rc;

    memset(f, 0, sizeof(*f));
    f->agents = p->agents;
    f->lag_ms = p->lag_ms;
    if ((rc = sfl__msg_get_str(c, "name", p->name, f->name, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "address", p->address, f->address, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    return check_frontend(c, f);
}

static int get_master_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__FleetMaster *p = ((Sfl__V1__FleetMaster *const *)src)[i];
    sfl_fleet_master_t *f = dst;
    int rc;

    memset(f, 0, sizeof(*f));
    f->epoch = p->epoch;
    f->pid = p->pid;
    f->started_ms = p->started_ms;
    f->seen_ago_ms = p->seen_ago_ms;
    f->stale = p->stale ? 1 : 0;
    if ((rc = sfl__msg_get_str(c, "holder", p->holder, f->holder, sizeof(f->holder))) < 0 ||
        (rc = sfl__msg_get_str(c, "role", p->role, f->role, sizeof(f->role))) < 0 ||
        (rc = sfl__msg_get_str(c, "host", p->host, f->host, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    return check_master(c, f);
}

static int get_fleet(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__FleetReply *pb = p;
    sfl_fleet_t *m = out;
    int rc;

    m->has_leader = pb->has_leader ? 1 : 0;
    m->epoch = pb->epoch;
    m->since_ms = pb->since_ms;
    m->own_epoch = pb->own_epoch;
    if ((rc = sfl__msg_get_str(c, "role", pb->role, m->role, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = sfl__msg_get_str(c, "holder", pb->holder, m->holder, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    if (pb->n_frontends > SFL_MSG_FLEET_MAX_FRONTENDS)
        return sfl__msg_fail(c, c->bad, "%zu front-ends exceed %u", pb->n_frontends,
                             SFL_MSG_FLEET_MAX_FRONTENDS);
    m->n = (uint32_t)pb->n_frontends;
    m->frontends = sfl__msg_get_list(c, "frontends", pb->frontends, pb->n_frontends,
                                     sizeof(*m->frontends), get_frontend_at, &rc);
    if (rc < 0)
        return rc;
    if (pb->n_masters > SFL_MSG_FLEET_MAX_MASTERS)
        return sfl__msg_fail(c, c->bad, "%zu masters exceed %u", pb->n_masters,
                             SFL_MSG_FLEET_MAX_MASTERS);
    m->nmasters = (uint32_t)pb->n_masters;
    m->masters = sfl__msg_get_list(c, "masters", pb->masters, pb->n_masters,
                                   sizeof(*m->masters), get_master_at, &rc);
    if (rc < 0)
        return rc;
    return check_fleet(c, m);
}

void sfl_msg_fleet_free(sfl_fleet_t *m)
{
    if (m != NULL) {
        sfl__free(m->frontends);
        sfl__free(m->masters);
    }
    sfl__free(m);
}

static void free_fleet(void *m)
{
    sfl_msg_fleet_free(m);
}

static const msg_type_t fleet_type = {"fleet reply", &sfl__v1__fleet_reply__descriptor,
    check_fleet, put_fleet, get_fleet, sizeof(sfl_fleet_t), free_fleet, 7, NULL};

int sfl_msg_fleet_pack(const sfl_fleet_t *m, uint8_t **out, size_t *len)
{
    return sfl__msg_pack_msg(&fleet_type, m, NULL, out, len);
}

int sfl_msg_fleet_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                         sfl_fleet_t **out)
{
    int rc;

    *out = sfl__msg_unpack_msg(&fleet_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* The Fleet service's message (proto/sfl/v1/fleet.proto): one agent's call
 * as a front-end relays it to the master. */
#include "msg_int.h"

#include <string.h>

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
    return check_fleet_call(c, m);
}

void sfl_msg_fleet_call_free(sfl_fleet_call_t *m)
{
    if (m != NULL)
        sfl__free(m->request);
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

/* Admin.Fleet: the role of the answering process, the store's leader row
 * (one read on the loop's connection: a round trip to PostgreSQL) and the
 * front-ends the front-end service reports through co->fleet_frontends. */
#include "service/fleetinfo.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

#include "store/store.h"

void coord_h_fleet(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud)
{
    coord_conn_t *k = ud;
    coord_t *co = k->co;
    sfl_fleet_t f;
    char holder[128];
    int64_t epoch = 0, since = 0;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc;

    if (coord_serving(call, k) < 0)
        return;
    if ((rc = sfl_msg_fleet_req_unpack(req, len, &co->lim)) < 0) {
        coord_fail_unpack(call, rc);
        return;
    }
    memset(&f, 0, sizeof(f));
    snprintf(f.role, sizeof(f.role), "%s", co->cfg.role);
    f.own_epoch = co->serving && co->epoch > 0 ? (uint64_t)co->epoch : 0;
    rc = coord_store_leader_get(co->store, &epoch, holder, &since);
    if (rc < 0 && rc != SFL_ENOTFOUND) {
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot read the leader row: %s",
                        sfl_last_error());
        return;
    }
    if (rc == 0 && epoch > 0) {
        f.has_leader = 1;
        f.epoch = (uint64_t)epoch;
        coord_text_copy(f.holder, sizeof(f.holder), holder);
        f.since_ms = since < 0 ? 0 : since;
    }
    /* The front-end service's hook (NULL: none attached). */
    if (co->fleet_frontends != NULL &&
        (rc = co->fleet_frontends(co, &f.frontends, &f.n)) < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_INTERNAL, "front-ends: %s", sfl_last_error());
        return;
    }
    rc = sfl_msg_fleet_pack(&f, &buf, &blen);
    sfl__free(f.frontends);
    coord_reply_packed(call, rc, buf, blen);
}

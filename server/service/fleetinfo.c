/* Admin.Fleet: the role of the answering process, the store's leader row
 * and masters table (two reads on the loop's connection: round trips to
 * PostgreSQL) and the front-ends attached (service/fleetsvc.c). */
#include "service/fleetinfo.h"

#include <stdio.h>
#include <string.h>

#include "sfl/core/alloc.h"

#include "round/registry.h"
#include "service/fleetsvc.h"
#include "store/store.h"

/* The masters table as the reply carries it: each row's age by this
 * process's clock, stale past 3 x leader_retry_ms; the answering process's
 * own row is fresh by definition (it answers; a single coordinator writes
 * its row once, at the start). Returns owned (sfl__free) in *out. */
static int masters(coord_t *co, sfl_fleet_master_t **out, uint32_t *n)
{
    coord_master_row_t *rows = NULL;
    sfl_fleet_master_t *m = NULL;
    size_t nr = 0;
    int64_t now = coord_wall_ms();
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = coord_store_master_list(co->store, &rows, &nr)) < 0)
        return rc;
    if (nr > 0 && (m = sfl__calloc(nr, sizeof(*m))) == NULL) {
        rc = sfl__fail(SFL_ENOMEM, "no memory for %zu masters", nr);
        goto out;
    }
    for (size_t i = 0; i < nr; i++) {
        int self = strcmp(rows[i].holder, co->holder) == 0;

        coord_text_copy(m[i].holder, sizeof(m[i].holder), rows[i].holder);
        snprintf(m[i].role, sizeof(m[i].role), "%s", coord_master_role_name(rows[i].role));
        m[i].epoch = (uint64_t)rows[i].epoch;
        coord_text_copy(m[i].host, sizeof(m[i].host), rows[i].host);
        m[i].pid = rows[i].pid < 0 ? 0 : (uint64_t)rows[i].pid;
        m[i].started_ms = rows[i].started_ms;
        m[i].seen_ago_ms = self || now <= rows[i].seen_ms ? 0 : (uint64_t)(now - rows[i].seen_ms);
        m[i].stale = !self && coord_master_stale(&rows[i], now, co->cfg.leader_retry_ms);
    }
    *out = m;
    *n = (uint32_t)nr;
out:
    coord_store_free(rows);
    return rc;
}

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
    if ((rc = coord_fleet_frontends(co, &f.frontends, &f.n)) < 0) {
        coord_fail_call(call, SFL_GRPC_STATUS_INTERNAL, "front-ends: %s", sfl_last_error());
        return;
    }
    if ((rc = masters(co, &f.masters, &f.nmasters)) < 0) {
        sfl__free(f.frontends);
        coord_fail_call(call, SFL_GRPC_STATUS_UNAVAILABLE, "cannot read the masters: %s",
                        sfl_last_error());
        return;
    }
    rc = sfl_msg_fleet_pack(&f, &buf, &blen);
    sfl__free(f.frontends);
    sfl__free(f.masters);
    coord_reply_packed(call, rc, buf, blen);
}

/* An answer's verdict as the services and the round kinds reply and count
 * it: the UpdateAck of a verdict, the counters behind /metrics. */
#include "round/verdict.h"

#include <string.h>

static const sfl_ack_status_t ack_of[5] = {SFL_ACK_ACCEPTED, SFL_ACK_LATE, SFL_ACK_DUPLICATE,
                                           SFL_ACK_WRONG_ROUND, SFL_ACK_REJECTED};

sfl_ack_status_t coord_ack_of(coord_upd_verdict_t v)
{
    return ack_of[v];
}

void coord_reply_ack(sfl_grpc_call_t *call, coord_upd_verdict_t vd, const char *why,
                     uint64_t job, uint64_t round, uint32_t attempt)
{
    sfl_ack_t ack;
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;

    memset(&ack, 0, sizeof(ack));
    ack.status = coord_ack_of(vd);
    coord_text_copy(ack.reason, sizeof(ack.reason), vd == COORD_UPD_ACCEPTED ? "" : why);
    ack.job_id = job;
    ack.round = round;
    ack.attempt = attempt;
    rc = sfl_msg_ack_pack(&ack, &buf, &len);
    coord_reply_packed(call, rc, buf, len);
}

void coord_count_verdict(coord_t *co, coord_upd_verdict_t v, int rj)
{
    if ((unsigned)v < 5)
        co->verdicts[v]++;
    if (v == COORD_UPD_REJECTED)
        co->rejects[rj >= 0 && rj < RJ_COUNT ? rj : RJ_OTHER]++;
}

void coord_count_stage(coord_t *co, coord_upd_verdict_t v)
{
    if ((unsigned)v < 5)
        co->stage_verdicts[v]++;
}

int coord_seal_reason(int rc)
{
    switch (rc) {
    case SFL_ETRUNC: return RJ_TRUNCATED;
    case SFL_ELIMIT: return RJ_TOO_LARGE;
    case SFL_EDECRYPT: return RJ_DECRYPT;
    case SFL_EBADSIG: return RJ_SIGNATURE;
    default: return RJ_OTHER;
    }
}

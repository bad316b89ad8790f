/* Update mode 2, secure aggregation (saround.c; docs/security.md): the
 * secure aggregation round kind (coord_shape_secagg) and the mode-2 rounds
 * a statistics round runs on (stats.c). On the loop thread, except
 * the secure aggregation kind's fold and coord_saround_stats (the thread pool). */
#ifndef COORD_ROUND_SAROUND_H
#define COORD_ROUND_SAROUND_H

#include <stddef.h>
#include <stdint.h>

#include "job/round.h"
#include "sfl/core/error.h"
#include "sfl/wire/msg.h"
#include "sfl/net/grpc.h"
#include "store/store.h"

typedef struct coord_job coord_job_t;
struct sfl_sa_server;

/* The open attempt's mode-2 state of one session: the server, its
 * members' keys (the cohort's, or a front-end group's: members, n of
 * them), support S_t (k indices), threshold, quantization, the stages
 * sent after the first, and what the end of stage 3 fixed (U3). */
typedef struct coord_sa {
    struct sfl_sa_server *srv;
    int stats;                 /* a statistics round's (the moments, dense) */
    sfl_msg_sa_member_t *members;
    uint32_t n;                /* members of the session, ascending ids */
    int dropped;               /* a group out of the attempt (srv freed) */
    char why[128];             /* a group out at the aggregation: why ("" in) */
    uint32_t *support;
    uint32_t k, t, topk, sent, degree;
    uint32_t blamed;           /* the server's culprits already quarantined */
    double clip, wmax;
    double *w3;                /* U3's public weights (ascending ids) */
    uint64_t *u3;              /* U3's ids, ascending */
    uint32_t n3;               /* |U3| */
    /* Bytes of the stage answers each member sent in the open attempt and
     * the server accepted (parallel to rnd.members): a U3 member's is its
     * update's bytes_up in the history (coord_saround_record). */
    uint64_t *bytes;
    /* The fold failed on the secure sum itself (out of bounds, canary):
     * some member of U3, nobody named. */
    int unattributable;
} coord_sa_t;

/* The secure aggregation kind's state (coord_shape_secagg): the attempt's
 * sessions, g[0..ng), one for the cohort (secagg_groups = none) or one per
 * front-end group (coord_sa_group), and the group of each of rnd.members
 * (gof, parallel to it). */
typedef struct coord_sagrp {
    coord_sa_t *g;
    uint32_t ng;
    uint32_t *gof;
    int grouped;               /* secagg_groups = frontend */
    coord_sa_t idle;           /* coord_sa_of's before an attempt opens (no server) */
} coord_sagrp_t;

/* The front-end groups of a cohort of n members (ascending ids) whose
 * member i came through the connection keys[i] (0: directly): members with
 * one key form a group; groups smaller than min are merged, all of them
 * into one, which joins the smallest group of at least min if it is still
 * smaller than min; a cohort smaller than min is one group. Groups are
 * numbered by their smallest member id: gof[i] is member i's, *ng their
 * count. 0 or SFL_ENOMEM. Pure. */
int coord_sa_group(const uint64_t *keys, uint32_t n, uint32_t min, uint32_t *gof,
                   uint32_t *ng) SFL_MUST_CHECK;
/* The mode-2 session of j's open attempt that agent takes part in, or NULL
 * for a job whose rounds are not mode 2 or an agent in none of them. */
coord_sa_t *coord_sa_of(coord_job_t *j, uint64_t agent);
/* After START: threshold, S_t, the cohort's keys (for the task); stats: a
 * statistics round's (the moments, their rows as weights). */
int coord_saround_prepare(coord_job_t *j, coord_sa_t *s, int stats) SFL_MUST_CHECK;
/* The same for a session of the members ids[0..n) (ascending) only; the
 * round machine's phase quorums are left to the caller. */
int coord_saround_prepare_ids(coord_job_t *j, coord_sa_t *s, int stats, const uint64_t *ids,
                              uint32_t n) SFL_MUST_CHECK;
void coord_saround_task(const coord_job_t *j, const coord_sa_t *s, sfl_msg_sa_round_t *out);
/* After the task is built: the protocol's server. */
int coord_saround_start(coord_job_t *j, coord_sa_t *s) SFL_MUST_CHECK;
/* Sends the stages the round machine has moved on to; < 0 when the
 * server could not end a stage (its count below t, no memory). */
int coord_saround_sync(coord_job_t *j, coord_sa_t *s);
/* Thread pool: a statistics round's sum (sfl/crypto/savec.h): unmask,
 * m[0..SFL_MOMENTS_LEN(d)) the members' moments summed, *agents |U3|. */
int coord_saround_stats(coord_job_t *j, coord_sa_t *s, double *m,
                        uint32_t *agents) SFL_MUST_CHECK;
/* The aggregation ended: a committed U3 is cleared of suspicion, a sum
 * that failed with nobody to name makes each of U3 more suspect (returns
 * 1, sus their text); *n3 |U3|. */
int coord_saround_settle(coord_job_t *j, coord_sa_t *s, char *sus, size_t cap, uint32_t *n3);
/* Before START: the candidates ids[0..*n) (ascending) less the most
 * suspect (suspect.c), logged with whom it left out; 0 or SFL_ENOMEM. */
int coord_saround_draw(coord_job_t *j, uint64_t *ids, uint32_t *n) SFL_MUST_CHECK;
/* Quarantines the server's culprits not yet reported, then frees it. */
void coord_saround_close(coord_job_t *j, coord_sa_t *s);
/* Frees the round's server and state without reporting. */
void coord_saround_free(coord_sa_t *s);
/* The members' SecAggAnswer into the server's struct for its stage (the
 * server's verdict), and the boxes of stage 2 for member v in the wire's
 * struct (*out owned, sfl__free; *n of them): the forwarding path, a box
 * copied exactly (sfl/wire/msg.h asserts the sizes agree). */
int coord_saround_take(struct sfl_sa_server *sa, const sfl_msg_sa_answer_t *m) SFL_MUST_CHECK;
int coord_saround_inbox(const struct sfl_sa_server *sa, uint64_t v, sfl_msg_sa_box_t **out,
                        uint32_t *n) SFL_MUST_CHECK;
void coord_h_secagg(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);
/* The accepted participation rows of an attempt whose secure sum is about
 * to be folded: one per member of U3 (u3, n3 ids ascending), with the bytes
 * of the stage answers it sent (bytes[i] for members[i], n of them,
 * ascending ids). Fills out (n3 rows, reason NULL) and returns how many;
 * an id of U3 that is not a member is left out. Pure. */
uint32_t coord_saround_part_rows(const coord_member_t *members, const uint64_t *bytes, uint32_t n,
                                 const uint64_t *u3, uint32_t n3, int64_t job, int64_t round,
                                 int64_t attempt, int64_t at_ms, coord_part_row_t *out);
/* Queues those rows for the open attempt and counts them as accepted
 * updates (sfl_updates_total, sfl_update_bytes_total). */
void coord_saround_record(coord_job_t *j, coord_sa_t *s);

#endif

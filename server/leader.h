/* The coordinator's leadership (role = master; docs/operations.md,
 * "Failover"): the writer's store connection holds the store's leader
 * lock (store.h, coord_store_leader_try) and every write through it is
 * fenced with the leader epoch (coord_store_fence), so a master that lost
 * the lock can never commit. A master that does not get the lock is the
 * standby: it serves nothing and tries again every leader_retry_ms; once
 * it leads it recovers (marks the rounds in flight failed, as after
 * kill -9) and starts serving. A leader checks as often that it still
 * leads; when it does not (a write refused SFL_EFENCED, the connection
 * reset, another epoch in the leader row) it stops serving at once and
 * tells the program (coord_leader_cbs_t.lost), which exits with
 * COORD_EXIT_FENCED. role = single recovers and serves at once, unfenced. */
#ifndef COORD_LEADER_H
#define COORD_LEADER_H

#include <stdint.h>

typedef struct coord coord_t;

/* From coord_new, once the store and its writer are open: recovers and
 * returns 1 (serve now) for role single, and for a master that got the
 * lock; 0 for a standby (its timer is running; coord__serve follows on
 * the loop when it leads); < 0 on error. */
int coord_leader_start(coord_t *co);
/* From coord_new once its timers exist: a master's tries (standby) or
 * checks (leader) every leader_retry_ms, each followed by a write of its
 * row in the store's masters table (sflctl fleet; role single writes its
 * row once, at the start). */
void coord_leader_arm(coord_t *co);
/* A write failed with rc (loop thread): SFL_EFENCED stops serving at once;
 * any other failure makes a master check at once that it still leads. */
void coord_leader_write_failed(coord_t *co, int rc);
/* Shutdown: no more tries or checks; our masters row is deleted (the
 * writer's queue, which the shutdown waits for), unless fenced. */
void coord_leader_stop(coord_t *co);

#endif

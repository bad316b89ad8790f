/* The job's client state across rounds (sfl/algo/client.h): what a round
 * left is kept pending, on disk, until a later task says the round
 * committed. The loop thread only. */
#include "agent_int.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "sfl/core/alloc.h"
#include "sfl/core/file.h"

/* state_dir/client-state-<job>.bin, or .pending */
static int cstate_path(const agent_ctx_t *a, uint64_t job, int pending, char *path, size_t cap)
{
    if ((size_t)snprintf(path, cap, "%s/client-state-%" PRIu64 ".%s", a->cfg.state_dir, job,
                         pending ? "pending" : "bin") >= cap)
        return sfl__fail(SFL_EINVAL, "state_dir is too long");
    return 0;
}

void agent__cstate_clear(agent_ctx_t *a)
{
    sfl_file_free(a->cstate.bytes, a->cstate.len);
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    memset(&a->cstate, 0, sizeof(a->cstate));
}

/* Reads one of the job's files into *b (none: NULL); errors are logged and
 * read as none (the job's state starts fresh, said so). */
static void cstate_read(agent_ctx_t *a, uint64_t job, int pending, uint8_t **b, size_t *n)
{
    char path[AGENT_PATH_MAX + 64], q[300];
    int rc;

    *b = NULL;
    *n = 0;
    if (cstate_path(a, job, pending, path, sizeof(path)) < 0)
        return;
    rc = sfl_file_read(path, AGENT_CSTATE_MAX + 8, b, n);
    if (rc == -ENOENT)
        return;
    if (rc == 0 && pending && *n < 8)
        rc = sfl__fail(SFL_ETRUNC, "%s: %zu bytes, no round", path, *n);
    if (rc < 0) {
        agent__say(a, SFL_LOG_ERROR, "client_state",
            "job=%" PRIu64 " error=%s; starting from a fresh state",
            job, agent__quote(q, sizeof(q), sfl_last_error()));
        sfl_file_free(*b, *n);
        *b = NULL;
        *n = 0;
    }
}

/* Before training round `round` of job (loop thread): a->cstate is the
 * job's state, from memory or state_dir. A pending state (the one a round
 * left) is settled now: a task for a later round means its round
 * committed, so it becomes the job's state (rename over the .bin); a task
 * for the same round or an earlier one (a retry, the same attempt again
 * after a restart) means it did not, and it is dropped. So a client's
 * state advances with the committed rounds only, whatever crashed when:
 * exactly as in sfl-sim. */
void agent__cstate_load(agent_ctx_t *a, uint64_t job, uint64_t round)
{
    char from[AGENT_PATH_MAX + 64], to[AGENT_PATH_MAX + 64], q[300];

    if (a->cstate.job != job) {
        uint8_t *pb;
        size_t pn;

        agent__cstate_clear(a);
        a->cstate.job = job;
        cstate_read(a, job, 0, &a->cstate.bytes, &a->cstate.len);
        cstate_read(a, job, 1, &pb, &pn);
        if (pb != NULL) {
            for (int i = 0; i < 8; i++)
                a->cstate.pround |= (uint64_t)pb[i] << (8 * i);
            a->cstate.pbytes = pb;
            a->cstate.plen = pn;
        }
    }
    if (a->cstate.pbytes == NULL)
        return;
    if (cstate_path(a, job, 1, from, sizeof(from)) < 0 ||
        cstate_path(a, job, 0, to, sizeof(to)) < 0)
        return;
    if (round > a->cstate.pround) {
        /* The pending file is the round, then the state: the state goes to
         * the .bin atomically (write, then drop the pending). */
        if (sfl_file_write_atomic(to, a->cstate.pbytes + 8, a->cstate.plen - 8) < 0) {
            agent__say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=%s", job,
                agent__quote(q, sizeof(q), sfl_last_error()));
            return;
        }
        sfl_file_free(a->cstate.bytes, a->cstate.len);
        a->cstate.bytes = sfl__malloc(a->cstate.plen - 8 ? a->cstate.plen - 8 : 1);
        if (a->cstate.bytes != NULL) {
            memcpy(a->cstate.bytes, a->cstate.pbytes + 8, a->cstate.plen - 8);
            a->cstate.len = a->cstate.plen - 8;
        } else {
            a->cstate.len = 0;
        }
    }
    (void)unlink(from);
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    a->cstate.pbytes = NULL;
    a->cstate.plen = 0;
    a->cstate.pround = 0;
}

/* After a round trained (loop thread): the state it left is kept pending,
 * on disk first — atomically, 0600 (sfl_file_write_atomic), the round in
 * its first 8 bytes — until a task says whether the round committed
 * (agent__cstate_load). A failed write is logged; the round's update still
 * goes out, and the next round trains from the last committed state. */
void agent__cstate_save(agent_ctx_t *a, agent_work_t *w)
{
    uint64_t job = w->task->job_id, round = w->task->round;
    char path[AGENT_PATH_MAX + 64], q[300];
    uint8_t *b;
    size_t n;

    w->cs.in = NULL;
    if (w->cs.out == NULL)
        return;
    n = w->cs.out_len + 8;
    b = sfl__malloc(n);
    if (b == NULL) {
        agent__say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=out of memory", job);
        return;
    }
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(round >> (8 * i));
    memcpy(b + 8, w->cs.out, w->cs.out_len);
    if (cstate_path(a, job, 1, path, sizeof(path)) < 0 || sfl_file_write_atomic(path, b, n) < 0) {
        agent__say(a, SFL_LOG_ERROR, "client_state", "job=%" PRIu64 " error=%s", job,
            agent__quote(q, sizeof(q), sfl_last_error()));
        sfl_file_free(b, n);
        return;
    }
    if (a->cstate.job != job) {
        agent__cstate_clear(a);
        a->cstate.job = job;
        cstate_read(a, job, 0, &a->cstate.bytes, &a->cstate.len);
    }
    sfl_file_free(a->cstate.pbytes, a->cstate.plen);
    a->cstate.pbytes = b;
    a->cstate.plen = n;
    a->cstate.pround = round;
}


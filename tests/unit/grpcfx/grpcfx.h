/* An in-memory gRPC client and server session pumping bytes to each other
 * on a fake clock, for the suites of sfl/net/grpc.h (test_grpc, and
 * test_grpcadmit for its admission control): a server with the methods
 * below whose handlers record into sctx, client callbacks recording into a
 * result_t, and allocation tracking. Tests count callbacks and assert the
 * counts. Linked into the suites GRPCFX_TESTS in the Makefile lists. */
#ifndef SFL_TEST_GRPCFX_H
#define SFL_TEST_GRPCFX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sfl/net/grpc.h"

#define MAX_HELD 8
#define FAIL_MSG "bad input: 100% sure\n\xc3\xa9t\xc3\xa9 \x01"
typedef struct {
    int handled;
    int cancelled;
    int wakes;
    uint64_t deadline;
    sfl_grpc_call_t *held[MAX_HELD];
    int n_held;
} srv_ctx_t;

extern uint64_t fake_now; /* the sessions' clock (fake_clock) */
uint64_t fake_clock(void *ud);

/* ---- server side: handlers recording into one context -------------------- */

extern srv_ctx_t sctx;
/* Set by the allocation-failure test: handlers then tolerate ENOMEM. */
extern bool lenient;

/* Replies with the request. */
void h_echo(sfl_grpc_call_t *call, const uint8_t *req, size_t len, void *ud);

/* /t.Svc/Echo, Hold (kept in sctx.held), Fail (FAIL_MSG), Stream ("N": N
 * messages), Watch, Big (over a 1024-byte client limit), Admin (role bit 2),
 * Small (requests up to 1000 bytes), Sink (OK with nothing). */
extern const sfl_grpc_method_t methods[];
extern const size_t n_methods;
#define N_METHODS n_methods

/* ---- client side: results ------------------------------------------------ */

typedef struct {
    int done;
    int status;
    char message[512];
    uint8_t resp[300000];
    size_t len;
    int n_msgs;
    bool cancel_on_first; /* cancel from inside the message callback */
} result_t;

void c_unary(sfl_grpc_call_t *call, int status, const char *message, const uint8_t *resp,
             size_t len, void *ud);
/* Stream messages: checks they are "", "m1", "m2", ... */
void c_msg(sfl_grpc_call_t *call, const uint8_t *msg, size_t len, void *ud);
void c_done(sfl_grpc_call_t *call, int status, const char *message, void *ud);

/* ---- the pair ------------------------------------------------------------ */

typedef struct {
    sfl_grpc_session_t *cli;
    sfl_grpc_session_t *srv;
} pair_t;

/* Allocation tracking for "rejected before allocation" checks: with
 * track_malloc and track_realloc installed (sfl_replace_allocator), biggest
 * is the largest allocation made while bytes were fed. */
extern size_t biggest;
void *track_malloc(size_t n);
void *track_realloc(void *p, size_t n);

/* A server (scfg, or a default on the fake clock; sctx cleared) and a
 * client session; the clock is set to 1000. */
void pair_open(pair_t *p, const sfl_grpc_config_t *scfg, const sfl_grpc_config_t *ccfg);
void pair_close(pair_t *p);
/* Moves one batch from -> to; returns feed's result. */
int move(sfl_grpc_session_t *from, sfl_grpc_session_t *to, size_t *moved);
/* Pumps until quiet; the first feed error is returned (and pumping goes on
 * so the GOAWAY gets through). */
int pump_rc(pair_t *p);
/* pump_rc, which must return 0. */
void pump(pair_t *p);

#endif

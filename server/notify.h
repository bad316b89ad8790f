/* The systemd notification protocol (sd_notify(3)) without libsystemd: one
 * datagram of newline-separated VAR=value lines to the AF_UNIX socket named
 * by $NOTIFY_SOCKET, which systemd sets for a Type=notify service. Without
 * the variable every call is a no-op returning 0, so the coordinator runs
 * the same under systemd, in a container or in a terminal.
 *
 * A send never blocks: the socket is non-blocking and a full receiver queue
 * gives -EAGAIN (the message is dropped). Failures return a negative code
 * with sfl_last_error() naming the variable and the reason. */
#ifndef COORD_NOTIFY_H
#define COORD_NOTIFY_H

#include <stdint.h>

#include "sfl/core/error.h"

/* Longest datagram sent: the fixed lines plus a STATUS of up to ~400 bytes
 * (a longer status is truncated, never refused). */
#define COORD_NOTIFY_MAX 512

typedef enum {
    COORD_NOTIFY_READY = 0, /* "READY=1": started, or a reload finished */
    COORD_NOTIFY_RELOADING, /* "RELOADING=1\nMONOTONIC_USEC=<CLOCK_MONOTONIC us>" */
    COORD_NOTIFY_STOPPING,  /* "STOPPING=1": graceful stop began */
    COORD_NOTIFY_WATCHDOG,  /* "WATCHDOG=1": the loop is alive */
    COORD_NOTIFY_STATUS     /* only the STATUS line */
} coord_notify_t;

/* Sends the lines of `what`, then "STATUS=<status>" when status is not NULL
 * (control characters in it become spaces, so it stays one line), to
 * $NOTIFY_SOCKET. 0 when sent or when the variable is unset or empty;
 * SFL_EINVAL for a NULL-status COORD_NOTIFY_STATUS or an unknown what. */
int coord_notify(coord_notify_t what, const char *status);

/* The same datagram to addr: an absolute path ("/run/systemd/notify") or an
 * abstract socket ("@name"). SFL_ELIMIT for an address longer than a
 * sockaddr_un holds, SFL_EUNSUP for any other form (e.g. "vsock:..."),
 * -errno from the send (-ENOENT, -ECONNREFUSED, -EAGAIN ...). */
int coord_notify_to(const char *addr, coord_notify_t what, const char *status);

/* *usec = $WATCHDOG_USEC, the interval within which systemd wants
 * COORD_NOTIFY_WATCHDOG (send at half of it), when it is set and
 * $WATCHDOG_PID is unset or this process; else *usec = 0 and 0 is returned.
 * SFL_EINVAL (and *usec = 0) for a value that is not a positive decimal. */
int coord_notify_watchdog_usec(uint64_t *usec);

#endif

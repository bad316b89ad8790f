#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

/* Why not libsystemd: one more runtime dependency (and its transitive ones
 * on a Pi image) for a protocol that is one sendto(). The message format
 * and the address forms follow sd_notify(3); only AF_UNIX is supported
 * (systemd uses nothing else for services). */

static const char *const lines[] = {
    [COORD_NOTIFY_READY] = "READY=1",
    [COORD_NOTIFY_RELOADING] = "RELOADING=1",
    [COORD_NOTIFY_STOPPING] = "STOPPING=1",
    [COORD_NOTIFY_WATCHDOG] = "WATCHDOG=1",
    [COORD_NOTIFY_STATUS] = NULL,
};

/* The datagram for what + status into buf[0..COORD_NOTIFY_MAX); *len its
 * length (no terminator is sent). */
static int build(coord_notify_t what, const char *status, char *buf, size_t *len)
{
    size_t n = 0;
    int w;

    if ((unsigned)what > COORD_NOTIFY_STATUS)
        return sfl__fail(SFL_EINVAL, "notify: unknown message %d", (int)what);
    if (what == COORD_NOTIFY_STATUS && status == NULL)
        return sfl__fail(SFL_EINVAL, "notify: a status message needs a status");
    if (lines[what]) {
        w = snprintf(buf, COORD_NOTIFY_MAX, "%s\n", lines[what]);
        n = (size_t)w;
    }
    if (what == COORD_NOTIFY_RELOADING) {
        /* systemd >= 253 (Type=notify-reload) requires the time the reload
         * began, on its clock, to tell this reload from an earlier one. */
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        w = snprintf(buf + n, COORD_NOTIFY_MAX - n, "MONOTONIC_USEC=%llu\n",
                     (unsigned long long)ts.tv_sec * 1000000ULL +
                         (unsigned long long)ts.tv_nsec / 1000ULL);
        n += (size_t)w;
    }
    if (status) {
        /* One line whatever the text: a newline in a peer-supplied error
         * message would otherwise start a new assignment. */
        memcpy(buf + n, "STATUS=", 7);
        n += 7;
        for (const char *p = status; *p && n < COORD_NOTIFY_MAX - 1; p++)
            buf[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
    } else if (n > 0) {
        n--; /* no trailing newline */
    }
    *len = n;
    return 0;
}

int coord_notify_to(const char *addr, coord_notify_t what, const char *status)
{
    struct sockaddr_un sa;
    socklen_t salen;
    char msg[COORD_NOTIFY_MAX];
    size_t n, len = 0;
    ssize_t sent;
    int fd, rc;

    if (addr == NULL || addr[0] == '\0')
        return sfl__fail(SFL_EINVAL, "NOTIFY_SOCKET is empty");
    if ((rc = build(what, status, msg, &len)) < 0)
        return rc;
    /* The variable comes from the environment: bound before anything is
     * copied. */
    n = strnlen(addr, sizeof(sa.sun_path) + 1);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (addr[0] == '/') {
        if (n >= sizeof(sa.sun_path))
            return sfl__fail(SFL_ELIMIT,
                             "NOTIFY_SOCKET '%.60s...' is longer than a unix socket path "
                             "(%zu bytes at most)",
                             addr, sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path, addr, n);
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    } else if (addr[0] == '@') {
        /* Abstract namespace: a leading NUL, and the length says where the
         * name ends (no terminator). */
        if (n < 2)
            return sfl__fail(SFL_EINVAL, "NOTIFY_SOCKET '@' names no abstract socket");
        if (n > sizeof(sa.sun_path))
            return sfl__fail(SFL_ELIMIT,
                             "NOTIFY_SOCKET '%.60s...' is longer than an abstract socket name "
                             "(%zu bytes at most)",
                             addr, sizeof(sa.sun_path) - 1);
        memcpy(sa.sun_path + 1, addr + 1, n - 1);
        salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        return sfl__fail(SFL_EUNSUP,
                         "NOTIFY_SOCKET '%.60s' is neither an absolute path nor an abstract "
                         "socket (@name)",
                         addr);
    }
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        rc = -errno;
        return sfl__fail(rc, "NOTIFY_SOCKET: socket: %s", strerror(-rc));
    }
    do
        sent = sendto(fd, msg, len, MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen);
    while (sent < 0 && errno == EINTR);
    if (sent < 0) {
        rc = -errno;
        (void)sfl__fail(rc, "NOTIFY_SOCKET %.100s: %s", addr, strerror(-rc));
    } else if ((size_t)sent != len) {
        rc = sfl__fail(SFL_EIO, "NOTIFY_SOCKET %.100s: sent %zd of %zu bytes", addr, sent, len);
    }
    close(fd);
    return rc;
}

int coord_notify(coord_notify_t what, const char *status)
{
    const char *addr = getenv("NOTIFY_SOCKET");
    char msg[COORD_NOTIFY_MAX];
    size_t len;

    if (addr == NULL || addr[0] == '\0')
        return build(what, status, msg, &len); /* argument errors even so */
    return coord_notify_to(addr, what, status);
}

/* A positive decimal without sign, spaces or overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    if (s[0] == '\0')
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return v > 0 ? 0 : -1;
}

int coord_notify_watchdog_usec(uint64_t *usec)
{
    const char *s = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
    uint64_t v = 0, pid = 0;

    *usec = 0;
    if (s == NULL || s[0] == '\0')
        return 0;
    if (parse_u64(s, &v) < 0)
        return sfl__fail(SFL_EINVAL, "WATCHDOG_USEC '%.40s' is not a positive number of "
                                     "microseconds", s);
    if (p && p[0]) {
        if (parse_u64(p, &pid) < 0)
            return sfl__fail(SFL_EINVAL, "WATCHDOG_PID '%.40s' is not a process id", p);
        /* Inherited by a process the service started: not ours to ping. */
        if (pid != (uint64_t)getpid())
            return 0;
    }
    *usec = v;
    return 0;
}

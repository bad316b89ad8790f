#include "testutil.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

/* Every test receives on a real AF_UNIX datagram socket, as systemd does. */

static char tmpdir[256];
static char sockpath[sizeof(tmpdir) + 32];

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sfl-notify-XXXXXX");
    if (mkdtemp(tmpdir) == NULL)
        return -1;
    snprintf(sockpath, sizeof(sockpath), "%s/notify", tmpdir);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    unlink(sockpath);
    return rmdir(tmpdir);
}

/* A datagram socket bound to path, or to the abstract name when path
 * starts with '@'. */
static int listen_dgram(const char *path)
{
    struct sockaddr_un sa;
    socklen_t len;
    size_t n = strlen(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    assert_true(n < sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        unlink(path);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    if (bind(fd, (struct sockaddr *)&sa, len) != 0)
        fail_msg("bind %s: %s", path, strerror(errno));
    return fd;
}

/* The next datagram, NUL-terminated; fails if there is none. */
static size_t recv_one(int fd, char *buf, size_t cap)
{
    ssize_t n = recv(fd, buf, cap - 1, MSG_DONTWAIT);

    if (n < 0)
        fail_msg("no datagram: %s", strerror(errno));
    buf[n] = '\0';
    return (size_t)n;
}

static void assert_nothing(int fd)
{
    char b[8];

    assert_int_equal(recv(fd, b, sizeof(b), MSG_DONTWAIT), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
}

static uint64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void test_notify_datagrams(void **state)
{
    (void)state;
    int fd = listen_dgram(sockpath);
    char buf[2048], big[1000];
    uint64_t t0, t1;
    unsigned long long mono = 0;
    size_t n;
    int used = 0;

    assert_int_equal(setenv("NOTIFY_SOCKET", sockpath, 1), 0);

    assert_int_equal(coord_notify(COORD_NOTIFY_READY, "listening on 127.0.0.1:7443"), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "READY=1\nSTATUS=listening on 127.0.0.1:7443");

    assert_int_equal(coord_notify(COORD_NOTIFY_READY, NULL), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "READY=1");

    t0 = mono_us();
    assert_int_equal(coord_notify(COORD_NOTIFY_RELOADING, NULL), 0);
    t1 = mono_us();
    recv_one(fd, buf, sizeof(buf));
    assert_int_equal(sscanf(buf, "RELOADING=1\nMONOTONIC_USEC=%llu%n", &mono, &used), 1);
    assert_int_equal((size_t)used, strlen(buf)); /* nothing after the number */
    assert_true(mono >= t0 && mono <= t1);

    assert_int_equal(coord_notify(COORD_NOTIFY_RELOADING, "reloading /etc/sfl/c.ini"), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_non_null(strstr(buf, "\nSTATUS=reloading /etc/sfl/c.ini"));
    assert_int_equal(strncmp(buf, "RELOADING=1\nMONOTONIC_USEC=", 27), 0);

    assert_int_equal(coord_notify(COORD_NOTIFY_STOPPING, "stopping"), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "STOPPING=1\nSTATUS=stopping");

    assert_int_equal(coord_notify(COORD_NOTIFY_WATCHDOG, NULL), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "WATCHDOG=1");

    /* A status stays one line: a newline must not start an assignment. */
    assert_int_equal(coord_notify(COORD_NOTIFY_STATUS, "bad\nREADY=1\tx\x7f"), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "STATUS=bad READY=1 x ");

    /* A long status is cut to the datagram limit, not refused. */
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(coord_notify(COORD_NOTIFY_STOPPING, big), 0);
    n = recv_one(fd, buf, sizeof(buf));
    assert_int_equal(n, COORD_NOTIFY_MAX - 1);
    assert_int_equal(strncmp(buf, "STOPPING=1\nSTATUS=xxx", 21), 0);

    assert_int_equal(coord_notify(COORD_NOTIFY_STATUS, NULL), SFL_EINVAL);
    assert_int_equal(coord_notify((coord_notify_t)99, NULL), SFL_EINVAL);
    assert_nothing(fd);
    close(fd);
    unsetenv("NOTIFY_SOCKET");
}

static void test_notify_abstract(void **state)
{
    (void)state;
    char name[64], buf[256];
    int fd;

    snprintf(name, sizeof(name), "@sfl-notify-test-%ld", (long)getpid());
    fd = listen_dgram(name);
    assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
    assert_int_equal(coord_notify(COORD_NOTIFY_READY, "abstract"), 0);
    recv_one(fd, buf, sizeof(buf));
    assert_string_equal(buf, "READY=1\nSTATUS=abstract");
    /* The same name as a path is another socket (none there). */
    assert_int_equal(coord_notify_to(name + 1, COORD_NOTIFY_READY, NULL), SFL_EUNSUP);
    close(fd);
    /* Nobody bound to it any more. */
    assert_int_equal(coord_notify(COORD_NOTIFY_READY, NULL), -ECONNREFUSED);
    assert_detail("NOTIFY_SOCKET @sfl-notify-test-");
    unsetenv("NOTIFY_SOCKET");
}

static void test_notify_unset(void **state)
{
    (void)state;
    int fd = listen_dgram(sockpath);

    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(coord_notify(COORD_NOTIFY_READY, "x"), 0);
    assert_int_equal(coord_notify(COORD_NOTIFY_WATCHDOG, NULL), 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", "", 1), 0);
    assert_int_equal(coord_notify(COORD_NOTIFY_STOPPING, NULL), 0);
    /* Argument errors are reported even with nobody listening. */
    assert_int_equal(coord_notify(COORD_NOTIFY_STATUS, NULL), SFL_EINVAL);
    assert_nothing(fd);
    close(fd);
    unsetenv("NOTIFY_SOCKET");
}

static void test_notify_bad_address(void **state)
{
    (void)state;
    char longpath[300], longabs[300];

    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    assert_int_equal(setenv("NOTIFY_SOCKET", longpath, 1), 0);
    assert_int_equal(coord_notify(COORD_NOTIFY_READY, NULL), SFL_ELIMIT);
    assert_detail("NOTIFY_SOCKET '/aaa");
    assert_non_null(strstr(sfl_last_error(), "longer than a unix socket path (107 bytes"));
    /* 107 bytes is the longest path that fits, 108 does not. */
    longpath[108] = '\0';
    assert_int_equal(coord_notify_to(longpath, COORD_NOTIFY_READY, NULL), SFL_ELIMIT);
    longpath[107] = '\0';
    assert_int_equal(coord_notify_to(longpath, COORD_NOTIFY_READY, NULL), -ENOENT);

    memset(longabs, 'b', sizeof(longabs) - 1);
    longabs[0] = '@';
    longabs[sizeof(longabs) - 1] = '\0';
    assert_int_equal(coord_notify_to(longabs, COORD_NOTIFY_READY, NULL), SFL_ELIMIT);
    assert_non_null(strstr(sfl_last_error(), "abstract socket name"));

    assert_int_equal(coord_notify_to("@", COORD_NOTIFY_READY, NULL), SFL_EINVAL);
    assert_int_equal(coord_notify_to("", COORD_NOTIFY_READY, NULL), SFL_EINVAL);
    assert_int_equal(coord_notify_to(NULL, COORD_NOTIFY_READY, NULL), SFL_EINVAL);
    assert_int_equal(coord_notify_to("run/notify", COORD_NOTIFY_READY, NULL), SFL_EUNSUP);
    assert_detail("NOTIFY_SOCKET 'run/notify' is neither an absolute path");
    assert_int_equal(coord_notify_to("vsock:2:1234", COORD_NOTIFY_READY, NULL), SFL_EUNSUP);

    /* A path where nothing listens, and a file that is not a socket. */
    unlink(sockpath);
    assert_int_equal(coord_notify_to(sockpath, COORD_NOTIFY_READY, NULL), -ENOENT);
    assert_detail("NOTIFY_SOCKET /tmp/sfl-notify-");
    FILE *f = fopen(sockpath, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(coord_notify_to(sockpath, COORD_NOTIFY_READY, NULL), -ECONNREFUSED);
    unlink(sockpath);
    unsetenv("NOTIFY_SOCKET");
}

/* A receiver that never reads: the queue fills and sends fail at once with
 * -EAGAIN instead of blocking the event loop. */
static void test_notify_never_blocks(void **state)
{
    (void)state;
    int fd = listen_dgram(sockpath), rc = 0, sent = 0;
    uint64_t t0 = mono_us();

    for (int i = 0; i < 100000 && rc == 0; i++)
        if ((rc = coord_notify_to(sockpath, COORD_NOTIFY_WATCHDOG, NULL)) == 0)
            sent++;
    assert_int_equal(rc, -EAGAIN);
    assert_true(sent > 0);
    assert_true(mono_us() - t0 < 5000000u);
    close(fd);
    unlink(sockpath);
}

static void test_notify_watchdog(void **state)
{
    (void)state;
    char pid[32];
    uint64_t us = 1;

    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_int_equal(us, 0);

    assert_int_equal(setenv("WATCHDOG_USEC", "30000000", 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_int_equal(us, 30000000);

    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    assert_int_equal(setenv("WATCHDOG_PID", pid, 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_int_equal(us, 30000000);

    /* Meant for another process (e.g. our parent): no pings from us. */
    snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
    assert_int_equal(setenv("WATCHDOG_PID", pid, 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_int_equal(us, 0);

    assert_int_equal(setenv("WATCHDOG_PID", "12x", 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), SFL_EINVAL);
    assert_detail("WATCHDOG_PID '12x'");
    unsetenv("WATCHDOG_PID");

    static const char *const bad[] = {"0", "-5", "abc", " 10", "10s", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        us = 1;
        assert_int_equal(setenv("WATCHDOG_USEC", bad[i], 1), 0);
        assert_int_equal(coord_notify_watchdog_usec(&us), SFL_EINVAL);
        assert_int_equal(us, 0);
        assert_detail("WATCHDOG_USEC '");
    }
    assert_int_equal(setenv("WATCHDOG_USEC", "18446744073709551615", 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_true(us == UINT64_MAX);
    assert_int_equal(setenv("WATCHDOG_USEC", "", 1), 0);
    assert_int_equal(coord_notify_watchdog_usec(&us), 0);
    assert_int_equal(us, 0);
    unsetenv("WATCHDOG_USEC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_notify_datagrams),    cmocka_unit_test(test_notify_abstract),
        cmocka_unit_test(test_notify_unset),        cmocka_unit_test(test_notify_bad_address),
        cmocka_unit_test(test_notify_never_blocks), cmocka_unit_test(test_notify_watchdog),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

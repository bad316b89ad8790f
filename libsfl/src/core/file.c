/* Whole files (file.h). */
#include "sfl/core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sfl/core/alloc.h"

static int write_all(int fd, const uint8_t *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync of the directory that holds path, so the rename itself is durable. */
static int sync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    int fd, rc = 0;

    if (slash == NULL)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (dir == NULL)
        return SFL_ENOMEM;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        rc = -errno;
    else if (fsync(fd) != 0 && errno != EINVAL)
        rc = -errno;
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        (void)sfl__fail(rc, "%s: fsync of directory %s: %s", path, dir, strerror(-rc));
    free(dir);
    return rc;
}

int sfl_file_write_atomic(const char *path, const void *buf, size_t len)
{
    static const char suffix[] = ".tmp.XXXXXX";
    size_t plen;
    char *tmp;
    int fd, rc;

    if (path == NULL || path[0] == '\0')
        return sfl__fail(SFL_EINVAL, "empty path");
    plen = strlen(path);
    tmp = sfl__malloc(plen + sizeof(suffix));
    if (tmp == NULL)
        return SFL_ENOMEM;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, suffix, sizeof(suffix));
    /* mkstemp creates the file 0600 whatever the umask; fchmod says so and
     * covers libcs that differ. The same directory keeps rename atomic. */
    fd = mkstemp(tmp);
    if (fd < 0) {
        rc = sfl__fail(-errno, "%s: cannot create temporary file: %s", tmp, strerror(errno));
        sfl__free(tmp);
        return rc;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (fchmod(fd, S_IRUSR | S_IWUSR) != 0)
        rc = sfl__fail(-errno, "%s: chmod 600: %s", tmp, strerror(errno));
    else if ((rc = write_all(fd, buf, len)) < 0)
        rc = sfl__fail(rc, "%s: write: %s", tmp, strerror(-rc));
    else if (fsync(fd) != 0)
        rc = sfl__fail(-errno, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = sfl__fail(-errno, "%s: close: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0)
        rc = sfl__fail(-errno, "%s: rename from %s: %s", path, tmp, strerror(errno));
    if (rc < 0)
        (void)unlink(tmp);
    else
        rc = sync_parent(path);
    sfl__free(tmp);
    return rc;
}

int sfl_file_read(const char *path, size_t max, uint8_t **buf, size_t *len)
{
    struct stat st;
    uint8_t *b = NULL;
    size_t got = 0;
    int fd, rc = 0;

    *buf = NULL;
    *len = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sfl__fail(-errno, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        rc = sfl__fail(-errno, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = sfl__fail(SFL_EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)st.st_size > max) {
        rc = sfl__fail(SFL_ELIMIT, "%s: %lld bytes, at most %zu", path,
                       (long long)st.st_size, max);
        goto out;
    }
    b = sfl__malloc((size_t)st.st_size + 1);
    if (b == NULL) {
        rc = SFL_ENOMEM;
        goto out;
    }
    /* Read to the end, never past max: the file may grow meanwhile. */
    for (;;) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size + 1 - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = sfl__fail(-errno, "%s: read: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got > (size_t)st.st_size) {
            rc = sfl__fail(SFL_EINVAL, "%s: changed while read", path);
            goto out;
        }
    }
    b[got] = 0;
    *buf = b;
    *len = got;
    b = NULL;
out:
    if (b != NULL)
        sfl_file_free(b, got);
    close(fd);
    return rc;
}

void sfl_file_free(uint8_t *buf, size_t len)
{
    if (buf == NULL)
        return;
    /* A volatile pointer keeps the wipe from being optimised away. */
    volatile uint8_t *v = buf;
    for (size_t i = 0; i < len; i++)
        v[i] = 0;
    sfl__free(buf);
}

/* The store's online backup (store/store.h, coord_store_backup): SQLite's
 * backup API copies the database under one read snapshot into a temporary
 * file next to the destination, which is checked (integrity, ours), made a
 * single rollback-mode file, synced and renamed into place, so the
 * destination holds a whole store or is left as it was. */
#include "store/store.h"
#include "store/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sfl/core/alloc.h"

/* Pages per sqlite3_backup_step (4 KiB pages: 256 KiB). The source is read
 * under one snapshot, so step size does not affect consistency; small steps
 * bound how long each call holds the source connection's mutex, which is
 * what another thread using the same connection waits on. */
#define BACKUP_PAGES 64
#define BACKUP_BUSY_TRIES 500 /* x 10 ms */
#define BACKUP_PATH_MAX 4096

static const char *const backup_sidecars[] = {"", "-journal", "-wal", "-shm"};

static void backup_unlink(const char *tmp)
{
    char p[BACKUP_PATH_MAX + 16];

    for (size_t i = 0; i < sizeof(backup_sidecars) / sizeof(backup_sidecars[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", tmp, backup_sidecars[i]);
        (void)unlink(p);
    }
}

/* Makes the rename durable; a file system that cannot fsync a directory
 * (EINVAL) already has the file synced. */
static int backup_sync_dir(const char *dest)
{
    char dir[BACKUP_PATH_MAX];
    const char *slash = strrchr(dest, '/');
    int fd, rc = 0;

    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else
        snprintf(dir, sizeof(dir), "%.*s", slash == dest ? 1 : (int)(slash - dest), dest);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        rc = sfl__fail(-errno, "backup: fsync of directory %s: %s", dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

static int backup_sync_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

    if (fd < 0 || fsync(fd) != 0)
        rc = sfl__fail(-errno, "backup: fsync %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The copy's checks, on its own connection: one file, sound, ours. */
static int backup_verify(sqlite3 *dst, const char *tmp, uint64_t *bytes)
{
    sqlite3_stmt *st = NULL;
    int64_t app = 0, pages = 0, psize = 0;
    int rc;

    /* The copied header says WAL, like the source's; rollback mode makes
     * the copy a single file that opens anywhere (the coordinator switches
     * it back to WAL at open). */
    rc = coord__store_once(dst, "PRAGMA journal_mode = DELETE", 1, &st,
                           "backup: %s: journal mode", tmp);
    if (rc == SQLITE_ROW) {
        const unsigned char *m = sqlite3_column_text(st, 0);

        rc = m && strcmp((const char *)m, "delete") == 0
                 ? 0
                 : sfl__fail(SFL_EIO, "backup: %s: cannot leave WAL mode (%s)", tmp,
                             m ? (const char *)m : "?");
    }
    sqlite3_finalize(st);
    if (rc != 0)
        return rc;
    if ((rc = coord__store_pragma_ok(dst, "PRAGMA integrity_check(1)")) != 0) {
        char keep[512];

        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        return sfl__fail(SFL_EPARSE, "backup: the copy fails its check: %s", keep);
    }
    if ((rc = coord__store_pragma_int(dst, "PRAGMA application_id", &app)) != 0 ||
        (rc = coord__store_pragma_int(dst, "PRAGMA page_count", &pages)) != 0 ||
        (rc = coord__store_pragma_int(dst, "PRAGMA page_size", &psize)) != 0)
        return rc;
    if (app != APPLICATION_ID)
        return sfl__fail(SFL_EPARSE, "backup: the copy is not an sfl coordinator store "
                                     "(application_id 0x%llx)",
                         (unsigned long long)app);
    if (bytes)
        *bytes = (uint64_t)pages * (uint64_t)psize;
    return 0;
}

/* Copies the database of src into dest (coord_store_backup's contract). */
static int backup_to(sqlite3 *src, const char *dest, uint64_t *bytes)
{
    char tmp[BACKUP_PATH_MAX];
    const char *src_path = sqlite3_db_filename(src, "main");
    sqlite3 *dst = NULL;
    sqlite3_backup *b = NULL;
    struct stat ds, ss;
    int rc, r, fd, made = 0, tries = 0;

    if (dest == NULL || dest[0] == '\0')
        return sfl__fail(SFL_EINVAL, "backup: the destination is missing");
    if (strlen(dest) + 16 > sizeof(tmp))
        return sfl__fail(SFL_ELIMIT, "backup: destination path longer than %d bytes",
                         BACKUP_PATH_MAX - 16);
    if (stat(dest, &ds) == 0) {
        if (S_ISDIR(ds.st_mode))
            return sfl__fail(SFL_EINVAL, "backup: %s is a directory; name the file to write",
                             dest);
        if (src_path && src_path[0] && stat(src_path, &ss) == 0 && ss.st_dev == ds.st_dev &&
            ss.st_ino == ds.st_ino)
            return sfl__fail(SFL_EINVAL, "backup: %s is the database itself", dest);
    }
    /* In dest's directory, so the rename is atomic and never crosses file
     * systems; mkstemp makes it 0600 whatever the umask (checkpoints are
     * the federation's models). */
    snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", dest);
    fd = mkstemp(tmp);
    if (fd < 0) {
        rc = -errno;
        return sfl__fail(rc, "backup: cannot create %s: %s", tmp, strerror(-rc));
    }
    made = 1;
    close(fd);
    rc = sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(dst, rc, "backup: %s: open", tmp);
        goto out;
    }
    sqlite3_extended_result_codes(dst, 1);
    /* One snapshot for the whole copy: without it every commit by another
     * connection would restart the copy, and a busy coordinator could keep
     * a large one from ever finishing. In WAL mode a reader does not block
     * the writer; the WAL only grows until the copy ends. */
    rc = sqlite3_exec(src, "BEGIN; SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(src, rc, "backup: %s: read transaction", src_path);
        goto out;
    }
    b = sqlite3_backup_init(dst, "main", src, "main");
    if (b == NULL) {
        rc = coord__store_dberr(dst, sqlite3_errcode(dst), "backup: %s", tmp);
        goto out;
    }
    for (;;) {
        r = sqlite3_backup_step(b, BACKUP_PAGES);
        if (r == SQLITE_DONE)
            break;
        if (r == SQLITE_OK)
            continue;
        if ((r == SQLITE_BUSY || r == SQLITE_LOCKED) && ++tries < BACKUP_BUSY_TRIES) {
            sqlite3_sleep(10);
            continue;
        }
        break;
    }
    /* A step's error is reported by finish, with the message on dst. */
    r = sqlite3_backup_finish(b);
    b = NULL;
    if (r != SQLITE_OK) {
        rc = coord__store_dberr(dst, r, "backup: copy %s to %s", src_path, tmp);
        goto out;
    }
    (void)sqlite3_exec(src, "COMMIT", NULL, NULL, NULL);
    if ((rc = backup_verify(dst, tmp, bytes)) != 0)
        goto out;
    r = sqlite3_close(dst);
    dst = NULL;
    if (r != SQLITE_OK) {
        rc = coord__store_dberr(NULL, r, "backup: %s: close", tmp);
        goto out;
    }
    if ((rc = backup_sync_file(tmp)) != 0)
        goto out;
    if (rename(tmp, dest) != 0) {
        rc = -errno;
        (void)sfl__fail(rc, "backup: rename %s to %s: %s", tmp, dest, strerror(-rc));
        goto out;
    }
    made = 0;
    rc = backup_sync_dir(dest);
out:
    if (b)
        (void)sqlite3_backup_finish(b);
    if (!sqlite3_get_autocommit(src))
        (void)sqlite3_exec(src, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(dst);
    if (made)
        backup_unlink(tmp);
    if (rc != 0 && bytes)
        *bytes = 0;
    return rc;
}

int coord__sq_backup(coord_store_t *s, const char *dest, uint64_t *bytes)
{
    if (bytes)
        *bytes = 0;
    if (s == NULL)
        return sfl__fail(SFL_EINVAL, "store: NULL store");
    return backup_to(coord__store_db(s), dest, bytes);
}

int coord__sq_backup_path(const char *db_path, const char *dest, uint64_t *bytes)
{
    sqlite3 *src = NULL;
    int64_t app = 0;
    int rc;

    if (bytes)
        *bytes = 0;
    if (db_path == NULL || db_path[0] == '\0')
        return sfl__fail(SFL_EINVAL, "backup: the database path is missing");
    /* Read-write without CREATE: a read-only connection could not recover
     * a WAL left by a crash, and a missing store must not be created. */
    rc = sqlite3_open_v2(db_path, &src, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(src, rc, "backup: %s: open", db_path);
        goto out;
    }
    sqlite3_extended_result_codes(src, 1);
    sqlite3_busy_timeout(src, DEFAULT_BUSY_MS);
    sqlite3_db_config(src, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    rc = sqlite3_exec(src, "PRAGMA query_only = 1", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        rc = coord__store_dberr(src, rc, "backup: %s: query_only", db_path);
        goto out;
    }
    if ((rc = coord__store_pragma_int(src, "PRAGMA application_id", &app)) != 0) {
        char keep[512];

        snprintf(keep, sizeof(keep), "%s", sfl_last_error());
        rc = sfl__fail(rc, "backup: %s: %s", db_path, keep);
        goto out;
    }
    if (app != APPLICATION_ID) {
        rc = sfl__fail(SFL_EPARSE, "backup: %s: not an sfl coordinator store (application_id "
                                   "0x%llx)",
                       db_path, (unsigned long long)app);
        goto out;
    }
    rc = backup_to(src, dest, bytes);
out:
    sqlite3_close(src);
    return rc;
}

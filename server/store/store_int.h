/* Private to server/store/: what the store (store.c) and its online backup
 * (backup.c) share. */
#ifndef COORD_STORE_INT_H
#define COORD_STORE_INT_H

#include <stdint.h>

#include <sqlite3.h>

#include "sfl/core/error.h"
#include "store/store.h"

#define APPLICATION_ID 0x73666c63 /* "sflc" in the database header */
#define DEFAULT_BUSY_MS 5000

/* The store's connection (borrowed). */
sqlite3 *coord__store_db(coord_store_t *s);
/* Records "<fmt>: <sqlite message> (SQLITE_X)" and maps rc (an SQLite
 * code) to an sfl code or -errno. Call before anything else touches the
 * connection db (NULL: none), which would replace sqlite3_errmsg. */
int coord__store_dberr(sqlite3 *db, int rc, const char *fmt, ...) SFL_PRINTF(3, 4);
/* Prepares a one-off statement (not kept: pragmas, checks) into *st and
 * steps it once: SQLITE_ROW, SQLITE_DONE when want_row is 0, else the error
 * with the detail "<fmt>: <sqlite message>". The caller finalizes *st. */
int coord__store_once(sqlite3 *db, const char *sql, int want_row, sqlite3_stmt **st,
                      const char *fmt, ...) SFL_PRINTF(5, 6);
/* The integer a pragma (or a one-value query) answers, into *v. */
int coord__store_pragma_int(sqlite3 *db, const char *sql, int64_t *v);
/* Runs a check pragma whose single good answer is one row "ok". */
int coord__store_pragma_ok(sqlite3 *db, const char *sql);

#endif

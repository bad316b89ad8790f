/* sfl error codes: 0 is success, failures are negative. System errors pass
 * through as -errno (like libuv); sfl's own codes live below -10000 so they
 * never collide with an errno value. */
#ifndef SFL_ERROR_H
#define SFL_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* C11's _Static_assert and _Alignas as C++11 spells them: the public
 * headers compile as C++ too. */
#ifdef __cplusplus
#define SFL_STATIC_ASSERT(c, m) static_assert(c, m)
#define SFL_ALIGNAS(t) alignas(t)
#else
#define SFL_STATIC_ASSERT(c, m) _Static_assert(c, m)
#define SFL_ALIGNAS(t) _Alignas(t)
#endif

#if defined(__GNUC__)
#define SFL_MUST_CHECK __attribute__((warn_unused_result))
#define SFL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SFL_MUST_CHECK
#define SFL_PRINTF(f, a)
#endif

/* X(name, value, message) */
#define SFL_ERRNO_MAP(X)                                                       \
    X(EINVAL, -10001, "invalid argument")                                      \
    X(ENOMEM, -10002, "out of memory")                                         \
    X(EPARSE, -10003, "malformed input")                                       \
    X(ERANGE, -10004, "value out of range")                                    \
    X(ELIMIT, -10005, "size limit exceeded")                                   \
    X(EIO, -10006, "input/output error")                                       \
    X(ENOTFOUND, -10007, "not found")                                          \
    X(EEMPTY, -10008, "empty input")                                           \
    X(EDIM, -10009, "dimension mismatch")                                      \
    X(ENUMERIC, -10010, "non-finite value")                                    \
    X(ETRUNC, -10011, "truncated input")                                       \
    X(EUNSUP, -10012, "not supported")                                         \
    X(EDECRYPT, -10013, "cannot decrypt")                                      \
    X(EBADSIG, -10014, "bad signature")                                        \
    X(EINSECURE, -10015, "insecure file permissions")                          \
    X(EBUSY, -10016, "in use by another process")                              \
    X(ECERT, -10017, "certificate not accepted")                               \
    X(EFENCED, -10018, "superseded by a newer round master")

typedef enum {
#define SFL_ERR_ENUM(name, val, msg) SFL_##name = (val),
    SFL_ERRNO_MAP(SFL_ERR_ENUM)
#undef SFL_ERR_ENUM
} sfl_errno_t;

/* Static description of an error code (sfl or -errno). Never NULL. */
const char *sfl_strerror(int err);

/* Detail of the most recent failure in this thread, e.g.
 * "data.svm:12:7: expected ':' after index". Empty string when none was set.
 * Functions that fail with a cause worth naming (a file position, a bad
 * parameter) set it; programs print sfl_error_message(). */
const char *sfl_last_error(void);

/* What to show a user for the failure err that the last call in this
 * thread returned, on one line: the detail (which names the culprit), with
 * ": " and the system's reason appended for a -errno code unless the detail
 * already says it; sfl_strerror(err) alone when there is no detail. Use it
 * instead of printing sfl_last_error() next to sfl_strerror(), which says
 * "No such file or directory" twice when the detail has it. Thread-local
 * storage, valid until the next call in the thread. */
const char *sfl_error_message(int err);

/* Library-internal: record the detail for the current failure; evaluates
 * to err (taken before the detail is formatted, so `-errno` is the caller's
 * errno), so callers write `return sfl__fail(SFL_EPARSE, "...")` and static
 * analyzers see the code returned. sfl__wrap keeps the current detail and
 * puts context before it: after a failure of a callee,
 *   return sfl__wrap(rc, "task");   ->  "task: <the callee's detail>"
 * Both format through a copy, so an argument may even be sfl_last_error(). */
#if defined(__GNUC__)
#define sfl__fail(err, ...) \
    __extension__({ int sfl__err_ = (err); sfl__detail(__VA_ARGS__); sfl__err_; })
#define sfl__wrap(err, ...) \
    __extension__({ int sfl__err_ = (err); sfl__prepend(__VA_ARGS__); sfl__err_; })
#else
#define sfl__fail(err, ...) sfl__detail_ret((err), __VA_ARGS__)
#define sfl__wrap(err, ...) sfl__prepend_ret((err), __VA_ARGS__)
#endif
void sfl__detail(const char *fmt, ...) SFL_PRINTF(1, 2);
void sfl__prepend(const char *fmt, ...) SFL_PRINTF(1, 2);
int sfl__detail_ret(int err, const char *fmt, ...) SFL_PRINTF(2, 3);
int sfl__prepend_ret(int err, const char *fmt, ...) SFL_PRINTF(2, 3);
void sfl__clear_error(void);

#ifdef __cplusplus
}
#endif

#endif

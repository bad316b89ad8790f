/* The version of sfl, defined here once: the library (soname
 * libsfl.so.MAJOR, the ABI's version node, sfl.pc), every program's
 * --version, the man pages and sfl-pki read it from this file.
 *
 * Semantic versioning of the library's ABI: MAJOR changes when a public
 * symbol is removed or changes meaning (and with it the soname); MINOR when
 * symbols are added (a new version node in libsfl/libsfl.map); PATCH for
 * fixes. */
#ifndef SFL_VERSION_H
#define SFL_VERSION_H

#define SFL_VERSION_MAJOR 0
#define SFL_VERSION_MINOR 1
#define SFL_VERSION_PATCH 0

#define SFL__STR(x) #x
#define SFL__XSTR(x) SFL__STR(x)
/* "MAJOR.MINOR.PATCH" of the headers compiled against. */
#define SFL_VERSION                                                            \
    SFL__XSTR(SFL_VERSION_MAJOR) "." SFL__XSTR(SFL_VERSION_MINOR) "." SFL__XSTR(SFL_VERSION_PATCH)
/* One number that compares: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define SFL_VERSION_NUMBER                                                     \
    (SFL_VERSION_MAJOR * 10000 + SFL_VERSION_MINOR * 100 + SFL_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked at run time ("MAJOR.MINOR.PATCH"; a
 * shared libsfl may be newer than the headers a program was built with).
 * Static storage, never NULL. */
const char *sfl_version(void);

#ifdef __cplusplus
}
#endif

#endif

/* "Did you mean": the nearest valid name to a mistyped one (an option, an
 * algorithm), and the list of the valid ones, for an error message. Every
 * program's unknown-name message is built here, so they read alike.
 *
 *   sfl_suggest_t s;
 *   sfl_suggest_init(&s, "--", "rouds");
 *   for (each valid name) sfl_suggest_add(&s, name);
 *   fprintf(stderr, "unknown option '--rouds'%s\n", sfl_suggest_text(&s));
 *   -> "unknown option '--rouds'; did you mean '--rounds'? (valid: --algo, ...)"
 */
#ifndef SFL_SUGGEST_H
#define SFL_SUGGEST_H

#include <stddef.h>

#define SFL_SUGGEST_NAME 64    /* longest name compared; longer ones are skipped */
#define SFL_SUGGEST_LIST 2048  /* the list's text, "..." past it */

typedef struct sfl_suggest {
    char word[SFL_SUGGEST_NAME]; /* the unknown name, truncated */
    const char *prefix;          /* put before each name ("--"); borrowed */
    char best[SFL_SUGGEST_NAME]; /* the nearest so far; "" if none is near */
    size_t best_d;               /* its distance */
    size_t n;                    /* names added */
    int full;                    /* the list ends in ", ..." */
    char list[SFL_SUGGEST_LIST + 8];                   /* "--a, --b, ..." */
    char text[SFL_SUGGEST_LIST + 3 * SFL_SUGGEST_NAME]; /* sfl_suggest_text's */
} sfl_suggest_t;

/* Levenshtein distance between a and b, letters compared without case,
 * '-' and '_' alike (--dp-noise is --dp_noise). Strings longer than
 * SFL_SUGGEST_NAME - 1 are compared on their first SFL_SUGGEST_NAME - 1. */
size_t sfl_suggest_distance(const char *a, const char *b);

/* Starts a suggestion for word (borrowed for the call, copied); prefix
 * (may be NULL) is borrowed until the last sfl_suggest_text. */
void sfl_suggest_init(sfl_suggest_t *s, const char *prefix, const char *word);
/* One valid name (borrowed for the call): listed, and kept as the
 * suggestion if it is the nearest yet and near enough (at most 2 edits,
 * or a third of the word's length if that is more, and fewer edits than
 * the word has letters). The first of equally near names wins. */
void sfl_suggest_add(sfl_suggest_t *s, const char *name);
/* "; did you mean 'NAME'? (valid: A, B, ...)" or, with nothing near,
 * " (valid: A, B, ...)"; "" when no name was added. Points into s. */
const char *sfl_suggest_text(sfl_suggest_t *s);
/* The nearest name, or NULL if none is near enough. Points into s. */
const char *sfl_suggest_best(const sfl_suggest_t *s);

#endif

/* The nearest valid name to an unknown one (sfl/core/suggest.h). */
#include "sfl/core/suggest.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int fold(int c)
{
    return c == '-' ? '_' : tolower((unsigned char)c);
}

/* d(a, b) = min over edits (insert, delete, substitute: 1 each); one row
 * of the table at a time, no allocation (both strings are bounded). */
size_t sfl_suggest_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, SFL_SUGGEST_NAME - 1), lb = strnlen(b, SFL_SUGGEST_NAME - 1);
    size_t row[SFL_SUGGEST_NAME];

    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (fold(a[i - 1]) != fold(b[j - 1]));

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

void sfl_suggest_init(sfl_suggest_t *s, const char *prefix, const char *word)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->word, sizeof(s->word), "%s", word ? word : "");
    s->prefix = prefix ? prefix : "";
}

void sfl_suggest_add(sfl_suggest_t *s, const char *name)
{
    size_t len = strlen(s->list), lw = strlen(s->word), d, near;

    if (strlen(name) >= SFL_SUGGEST_NAME)
        return;
    /* a name goes in whole or not at all; past the bound, one ", ..." */
    if (len + 2 + strlen(s->prefix) + strlen(name) <= SFL_SUGGEST_LIST && !s->full)
        snprintf(s->list + len, sizeof(s->list) - len, "%s%s%s", s->n ? ", " : "", s->prefix,
                 name);
    else if (!s->full) {
        snprintf(s->list + len, sizeof(s->list) - len, ", ...");
        s->full = 1;
    }
    s->n++;
    d = sfl_suggest_distance(s->word, name);
    near = lw / 3 > 2 ? lw / 3 : 2;
    if (d <= near && d < lw && (s->best[0] == '\0' || d < s->best_d)) {
        snprintf(s->best, sizeof(s->best), "%s", name);
        s->best_d = d;
    }
}

const char *sfl_suggest_best(const sfl_suggest_t *s)
{
    return s->best[0] ? s->best : NULL;
}

const char *sfl_suggest_text(sfl_suggest_t *s)
{
    if (s->n == 0)
        return "";
    if (s->best[0])
        snprintf(s->text, sizeof(s->text), "; did you mean '%.8s%s'? (valid: %s)", s->prefix,
                 s->best, s->list);
    else
        snprintf(s->text, sizeof(s->text), " (valid: %s)", s->list);
    return s->text;
}

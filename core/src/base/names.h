/* names.h — "did you mean": how close a typed name is to the names that exist (flag
 * names, flag values, plugin names), by one rule everywhere. */
#ifndef CNNB_BASE_NAMES_H
#define CNNB_BASE_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* Levenshtein distance between a and b (NULL reads as ""). */
int cnnb_edit_distance(const char *a, const char *b);
/* The rule every suggestion uses: `distance` from `typed` is close enough to suggest when
 * it is at most max(2, strlen(typed) / 3). */
bool cnnb_names_close_enough(const char *typed, int distance);
/* The name in names[0..count) closest to `typed`, if close enough to suggest; else NULL.
 * Ties go to the earlier name. */
const char *cnnb_closest_name(const char *typed, const char *const *names, size_t count);

#endif

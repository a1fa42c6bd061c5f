/* names.c — Levenshtein distance, the measure behind every "did you mean" (flag
 * names, flag values, plugin names). Names are short, so two rows of ints suffice. */
#include <stdlib.h>
#include <string.h>

#include "base/names.h"

int cnnb_edit_distance(const char *a, const char *b) {
  if (!a) a = "";
  if (!b) b = "";
  size_t la = strlen(a), lb = strlen(b);
  int *prev = malloc((lb + 1) * sizeof *prev);
  int *cur = malloc((lb + 1) * sizeof *cur);
  if (!prev || !cur) {
    free(prev);
    free(cur);
    /* Without memory no suggestion is better than a wrong one: report "far". */
    return (int)(la > lb ? la : lb);
  }
  for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      int del = prev[j] + 1;
      int ins = cur[j - 1] + 1;
      int best = sub < del ? sub : del;
      cur[j] = best < ins ? best : ins;
    }
    int *t = prev;
    prev = cur;
    cur = t;
  }
  int d = prev[lb];
  free(prev);
  free(cur);
  return d;
}

/* One rule for every suggestion: short names allow two edits, long ones a third. */
bool cnnb_names_close_enough(const char *typed, int distance) {
  int len = (int)strlen(typed);
  int limit = len / 3 > 2 ? len / 3 : 2;
  return distance <= limit;
}

const char *cnnb_closest_name(const char *typed, const char *const *names, size_t count) {
  if (!typed || !names) return NULL;
  const char *best = NULL;
  int best_d = 0;
  for (size_t i = 0; i < count; i++) {
    if (!names[i]) continue;
    int d = cnnb_edit_distance(typed, names[i]);
    if (!best || d < best_d) best = names[i], best_d = d;
  }
  return best && cnnb_names_close_enough(typed, best_d) ? best : NULL;
}

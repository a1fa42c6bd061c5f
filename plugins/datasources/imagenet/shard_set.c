/* shard_set.c — checking a split's shard names form a whole set (shard_set.h). */
#include "shard_set.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NAMED_MISSING = 5 };

/* Appends to buf (always terminated). */
static void append(char *buf, size_t size, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + used, size - used, fmt, ap);
  va_end(ap);
}

/* "<digits>" at *p, moving *p past them: the value, or -1 when none (or too many). */
static long digits(const char **p) {
  const char *s = *p;
  long v = 0;
  int n = 0;
  while (*s >= '0' && *s <= '9') {
    if (++n > 9) return -1;
    v = v * 10 + (*s++ - '0');
  }
  if (n == 0) return -1;
  *p = s;
  return v;
}

/* "<subset>-<index>-of-<total>" exactly: 0 with both, else -1. */
static int parse_name(const char *name, const char *subset, long *index, long *total) {
  size_t n = strlen(subset);
  if (strncmp(name, subset, n) != 0 || name[n] != '-') return -1;
  const char *p = name + n + 1;
  if ((*index = digits(&p)) < 0 || strncmp(p, "-of-", 4) != 0) return -1;
  p += 4;
  if ((*total = digits(&p)) < 0 || *p != '\0') return -1;
  return 0;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

int shard_set_check(const char *dir, const char *subset, char **files, size_t *count,
                    int allow_missing, char *warning, size_t warning_size, char *err,
                    size_t err_size) {
  warning[0] = '\0';
  /* Drop what is no shard, keeping the order. */
  size_t kept = 0, dropped = 0;
  for (size_t i = 0; i < *count; i++) {
    long index, total;
    if (parse_name(base_name(files[i]), subset, &index, &total) == 0) {
      files[kept++] = files[i];
      continue;
    }
    if (dropped++ == 0)
      append(warning, warning_size, "%s: ignored as no shard (not named %s-NNNNN-of-NNNNN): %s",
             dir, subset, base_name(files[i]));
    else if (dropped <= NAMED_MISSING) append(warning, warning_size, ", %s", base_name(files[i]));
    free(files[i]);
  }
  if (dropped > NAMED_MISSING)
    append(warning, warning_size, " and %zu more", dropped - NAMED_MISSING);
  *count = kept;
  if (kept == 0) return 0;

  /* The count the first name claims; every other name must claim the same. */
  char problem[1536] = "";
  long index, total;
  parse_name(base_name(files[0]), subset, &index, &total);
  for (size_t i = 1; i < kept && !problem[0]; i++) {
    long other_index, other;
    parse_name(base_name(files[i]), subset, &other_index, &other);
    if (other != total)
      snprintf(problem, sizeof problem, "the shard names disagree on how many there are: %s, %s",
               base_name(files[0]), base_name(files[i]));
  }
  for (size_t i = 0; i < kept && !problem[0]; i++) {
    parse_name(base_name(files[i]), subset, &index, &total);
    if (index >= total)
      snprintf(problem, sizeof problem, "%s is numbered beyond its own count", base_name(files[i]));
  }
  if (!problem[0] && kept < (size_t)total) {
    /* Sorted names of one count: a missing index is a gap in the numbers. */
    long missing = total - (long)kept;
    snprintf(problem, sizeof problem, "%ld of the %ld shards %s-*-of-%05ld %s missing:", missing,
             total, subset, total, missing == 1 ? "is" : "are");
    long named = 0, next = 0;
    for (size_t i = 0; i <= kept; i++) {
      long have = total;
      if (i < kept) parse_name(base_name(files[i]), subset, &have, &total);
      for (; next < have; next++)
        if (named++ < NAMED_MISSING)
          append(problem, sizeof problem, "%s %s-%05ld-of-%05ld", named > 1 ? "," : "", subset,
                 next, total);
      next = have + 1;
    }
    if (named > NAMED_MISSING)
      append(problem, sizeof problem, " and %ld more", named - NAMED_MISSING);
  }
  if (!problem[0]) return 0;
  if (!allow_missing) {
    snprintf(err, err_size, "--data_dir=%s: %s (--%s reads the shards that are there)", dir,
             problem, SHARD_SET_ALLOW_FLAG);
    return -1;
  }
  append(warning, warning_size, "%s%s: %s; reading the %zu that are there (--%s)",
         warning[0] ? "; " : "", dir, problem, kept, SHARD_SET_ALLOW_FLAG);
  return 0;
}

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

int shard_set_parse_name(const char *name, const char *subset, long *index, long *total) {
  size_t n = strlen(subset);
  if (strncmp(name, subset, n) != 0 || name[n] != '-') return -1;
  const char *p = name + n + 1;
  if ((*index = digits(&p)) < 0 || strncmp(p, "-of-", 4) != 0) return -1;
  p += 4;
  if ((*total = digits(&p)) < 0 || *p != '\0') return -1;
  return 0;
}

static int compare_longs(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* Several sets side by side: refused whatever allow_missing says, since reading them all
 * would count the same examples once per set (three runs of one folder into one
 * directory trained on every image three times), and no flag can say which set is meant.
 * Names each count and how many files claim it, the first few. */
static int describe_mix(const char *dir, const char *subset, char **files, size_t kept, char *err,
                        size_t err_size) {
  long *totals = malloc(kept * sizeof *totals);
  if (!totals) {
    snprintf(err, err_size, "--data_dir=%s: out of memory checking the shard names", dir);
    return -1;
  }
  for (size_t i = 0; i < kept; i++) {
    long index;
    shard_set_parse_name(base_name(files[i]), subset, &index, &totals[i]);
  }
  qsort(totals, kept, sizeof *totals, compare_longs);
  size_t sets = 0;
  for (size_t i = 0; i < kept; i++) sets += i == 0 || totals[i] != totals[i - 1];
  snprintf(err, err_size,
           "--data_dir=%s holds %zu sets of %s shards that differ in their count:", dir, sets,
           subset);
  size_t named = 0;
  for (size_t i = 0; i < kept;) {
    size_t run = 1;
    while (i + run < kept && totals[i + run] == totals[i]) run++;
    if (named++ < NAMED_MISSING)
      append(err, err_size, "%s %zu of %s-*-of-%05ld", named > 1 ? "," : "", run, subset,
             totals[i]);
    i += run;
  }
  if (named > NAMED_MISSING) append(err, err_size, " and %zu more sets", named - NAMED_MISSING);
  append(err, err_size,
         "; read together they would count the same examples once per set: keep one set in "
         "the directory (cnnbench-mkrecords --overwrite replaces a set whole)");
  free(totals);
  return -1;
}

int shard_set_check(const char *dir, const char *subset, char **files, size_t *count,
                    int allow_missing, char *warning, size_t warning_size, char *err,
                    size_t err_size) {
  warning[0] = '\0';
  /* Drop what is no shard, keeping the order. */
  size_t kept = 0, dropped = 0;
  for (size_t i = 0; i < *count; i++) {
    long index, total;
    if (shard_set_parse_name(base_name(files[i]), subset, &index, &total) == 0) {
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

  /* The count the first name claims; every other name must claim the same, or the
   * directory holds several sets (a converter run again with another count). */
  char problem[1536] = "";
  long index, total;
  shard_set_parse_name(base_name(files[0]), subset, &index, &total);
  for (size_t i = 1; i < kept; i++) {
    long other_index, other;
    shard_set_parse_name(base_name(files[i]), subset, &other_index, &other);
    if (other != total) return describe_mix(dir, subset, files, kept, err, err_size);
  }
  for (size_t i = 0; i < kept && !problem[0]; i++) {
    shard_set_parse_name(base_name(files[i]), subset, &index, &total);
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
      if (i < kept) shard_set_parse_name(base_name(files[i]), subset, &have, &total);
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

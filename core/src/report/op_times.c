/* op_times.c — the traced steps' time by op kind (op_times.h). */
#include "report/op_times.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct op_time {
  char name[64];
  int host; /* a host event's name, not an op kind */
  double forward_us, backward_us, other_us;
  int64_t calls; /* nodes run (a forward and its backward are one) or host events */
} op_time;

static double total(const op_time *t) { return t->forward_us + t->backward_us + t->other_us; }

static int by_total_desc(const void *a, const void *b) {
  double x = total(a), y = total(b);
  return (x < y) - (x > y);
}

/* The row of `name` (host or not), added when new; NULL when out of memory. */
static op_time *row(op_time **rows, size_t *n, size_t *cap, const char *name, int host) {
  for (size_t i = 0; i < *n; i++)
    if ((*rows)[i].host == host && strcmp((*rows)[i].name, name) == 0) return &(*rows)[i];
  if (*n == *cap) {
    size_t grown = *cap ? 2 * *cap : 32;
    op_time *p = realloc(*rows, grown * sizeof *p);
    if (!p) return NULL;
    *rows = p;
    *cap = grown;
  }
  op_time *r = &(*rows)[(*n)++];
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  r->host = host;
  return r;
}

int cnnb_op_times_print(const json_t *events, int64_t steps, int32_t top, FILE *out) {
  op_time *rows = NULL;
  size_t n = 0, cap = 0;
  double all_us = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *ph = json_string_value(json_object_get(e, "ph"));
    if (!ph || strcmp(ph, "X") != 0) continue;
    const char *op = json_string_value(json_object_get(json_object_get(e, "args"), "op"));
    const char *cat = json_string_value(json_object_get(e, "cat"));
    int host = !op && cat && strcmp(cat, "host") == 0;
    if (!op && !host) continue; /* a pass's or a plugin's span: its nodes count */
    const char *name = op ? op : json_string_value(json_object_get(e, "name"));
    op_time *r = name ? row(&rows, &n, &cap, name, host) : NULL;
    if (!name) continue;
    if (!r) {
      free(rows);
      return -1;
    }
    double dur = json_number_value(json_object_get(e, "dur"));
    if (op && cat && strcmp(cat, "forward") == 0) r->forward_us += dur;
    else if (op && cat && strcmp(cat, "backward") == 0) r->backward_us += dur;
    else r->other_us += dur;
    if (!(op && cat && strcmp(cat, "backward") == 0)) r->calls++; /* a node's run, once */
    all_us += dur;
  }
  qsort(rows, n, sizeof *rows, by_total_desc);
  double per = steps > 0 ? (double)steps : 1.0;
  fprintf(out, "Top %d ops by time, per step of the %lld traced (all replicas):\n", (int)top,
          (long long)steps);
  fprintf(out, "%-30s %8s %12s %12s %12s %7s\n", "op", "calls", "forward ms", "backward ms",
          "total ms", "share");
  for (size_t k = 0; k < n && k < (size_t)top; k++) {
    const op_time *r = &rows[k];
    char label[80];
    snprintf(label, sizeof label, "%s%s", r->name, r->host ? " (host)" : "");
    fprintf(out, "%-30s %8.1f %12.3f %12.3f %12.3f %6.1f%%\n", label, (double)r->calls / per,
            r->forward_us / per / 1e3, r->backward_us / per / 1e3, total(r) / per / 1e3,
            all_us > 0 ? 100.0 * total(r) / all_us : 0.0);
  }
  free(rows);
  return 0;
}

/* tune_results.c — OUT/results.jsonl: one JSON object a line for every run this
 * directory has seen, appended and flushed as each run ends, so Ctrl-C or a crash keeps
 * everything measured so far. A later call reads it first and reuses a measurement of
 * the same command (its key) at least as long as the one it would run: a rerun with a
 * larger budget continues the search instead of measuring again. A torn last line (a
 * killed writer) is skipped. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

static char *copy(const char *s) { return s ? tune_format("%s", s) : NULL; }

static void result_copy(tune_result *to, const tune_result *from) {
  *to = *from;
  to->model = copy(from->model);
  to->key = copy(from->key);
  to->label = copy(from->label);
  to->kind = copy(from->kind);
  to->strategy = copy(from->strategy);
  to->error = copy(from->error);
  to->command = copy(from->command);
}

void tune_result_free(tune_result *r) {
  free(r->model);
  free(r->key);
  free(r->label);
  free(r->kind);
  free(r->strategy);
  free(r->error);
  free(r->command);
  memset(r, 0, sizeof *r);
}

static void push(tune_results *rs, const tune_result *r) {
  if (rs->n == rs->cap) {
    /* Results are handed out by pointer: grow by a new block, never moving old ones. */
    fprintf(stderr, "cnnbench-tune: error: more than %zu runs in one result file\n", rs->cap);
    exit(TUNE_EXIT_RUNTIME);
  }
  result_copy(&rs->v[rs->n++], r);
}

static json_t *number_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static const char *string_of(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

bool tune_results_open(tune_results *rs, const char *out_dir, char *err, size_t err_size) {
  memset(rs, 0, sizeof *rs);
  rs->cap = 100000;
  rs->v = tune_alloc(rs->cap * sizeof *rs->v);
  char *path = tune_format("%s/results.jsonl", out_dir);
  FILE *in = fopen(path, "r");
  if (in) {
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) >= 0) {
      json_t *o = json_loads(line, 0, NULL);
      if (!o) continue;
      tune_result r = {0};
      r.model = (char *)string_of(o, "model");
      r.key = (char *)string_of(o, "key");
      r.label = (char *)string_of(o, "label");
      r.kind = (char *)string_of(o, "kind");
      r.strategy = (char *)string_of(o, "strategy");
      r.error = (char *)string_of(o, "error");
      r.command = (char *)string_of(o, "command");
      r.steps = (int)json_integer_value(json_object_get(o, "steps"));
      r.ok = json_is_true(json_object_get(o, "ok"));
      r.oom = json_is_true(json_object_get(o, "oom"));
      r.ips = json_number_value(json_object_get(o, "images_per_sec"));
      r.spread = json_number_value(json_object_get(o, "spread"));
      r.step_mean = json_number_value(json_object_get(o, "step_seconds"));
      r.wall_s = json_number_value(json_object_get(o, "wall_seconds"));
      r.peak_rss_kb = (long)json_integer_value(json_object_get(o, "peak_rss_kb"));
      if (r.model && r.key && r.kind) push(rs, &r);
      json_decref(o);
    }
    free(line);
    fclose(in);
  }
  rs->file = fopen(path, "a");
  if (!rs->file) {
    snprintf(err, err_size, "--out: cannot write %s: %s", path, strerror(errno));
    free(path);
    return false;
  }
  free(path);
  return true;
}

const tune_result *tune_results_add(tune_results *rs, const tune_result *r) {
  push(rs, r);
  json_t *o = json_object();
  json_object_set_new(o, "model", json_string(r->model));
  json_object_set_new(o, "kind", json_string(r->kind));
  json_object_set_new(o, "key", json_string(r->key));
  json_object_set_new(o, "label", json_string(r->label ? r->label : ""));
  json_object_set_new(o, "strategy", json_string(r->strategy ? r->strategy : ""));
  json_object_set_new(o, "steps", json_integer(r->steps));
  json_object_set_new(o, "ok", json_boolean(r->ok));
  json_object_set_new(o, "oom", json_boolean(r->oom));
  json_object_set_new(o, "images_per_sec", r->ok ? number_or_null(r->ips) : json_null());
  json_object_set_new(o, "spread", r->ok ? number_or_null(r->spread) : json_null());
  json_object_set_new(o, "step_seconds", r->ok ? number_or_null(r->step_mean) : json_null());
  json_object_set_new(o, "wall_seconds", number_or_null(r->wall_s));
  json_object_set_new(o, "peak_rss_kb", json_integer(r->peak_rss_kb));
  json_object_set_new(o, "error", r->error ? json_string(r->error) : json_null());
  json_object_set_new(o, "command", json_string(r->command ? r->command : ""));
  char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (text && rs->file) {
    fprintf(rs->file, "%s\n", text);
    fflush(rs->file);
  }
  free(text);
  return &rs->v[rs->n - 1];
}

const tune_result *tune_results_find(const tune_results *rs, const char *model, const char *key,
                                     int steps) {
  const tune_result *best = NULL;
  for (size_t i = 0; i < rs->n; i++) {
    const tune_result *r = &rs->v[i];
    if (strcmp(r->model, model) != 0 || strcmp(r->key, key) != 0) continue;
    if (!r->ok) return r; /* refused or failed: it will fail again */
    if (r->steps >= steps && (!best || r->steps < best->steps)) best = r;
  }
  return best;
}

void tune_results_close(tune_results *rs) {
  for (size_t i = 0; i < rs->n; i++) tune_result_free(&rs->v[i]);
  free(rs->v);
  if (rs->file) fclose(rs->file);
  memset(rs, 0, sizeof *rs);
}

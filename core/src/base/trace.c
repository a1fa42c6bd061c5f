/* trace.c — the --trace_file recorder (trace.h) and the SDK's cnnb_trace_* (cnnb/trace.h).
 *
 * Events are jansson objects appended under a mutex to one array, written whole at the
 * end of the run: tracing a step must not wait for a disk, and the few steps a trace
 * covers fit in memory (a ResNet-50 step is about a thousand events). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "base/trace.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ctx_internal.h"
#include "base/output_file.h"

struct cnnb_trace {
  pthread_mutex_t lock;
  FILE *file;
  char *path;
  cnnb_log_settings *family; /* whose `tracing` begin and end switch; NULL: not attached */
  int32_t rank;
  bool in_window;   /* between begin and end: appends are kept */
  bool warned_args; /* a plugin's bad args_json was reported once */
  json_t *events;   /* the traceEvents array */
  json_t *other;    /* otherData */
  int64_t steps;    /* traced steps asked for */
  char **tracks;    /* track names; track i is tid i + 1 */
  int32_t num_tracks, max_tracks;
};

void cnnb_trace_path(const char *path, int32_t rank, int32_t world_size, char *out, size_t size) {
  if (world_size <= 1) {
    snprintf(out, size, "%s", path);
    return;
  }
  size_t len = strlen(path);
  size_t stem = len >= 5 && strcmp(path + len - 5, ".json") == 0 ? len - 5 : len;
  snprintf(out, size, "%.*s.rank%d.json", (int)stem, path, (int)rank);
}

/* A metadata event ("M") naming this rank's process or one of its threads. */
static json_t *metadata(const char *what, int32_t pid, int32_t tid, const char *name) {
  /* ts 0: metadata has no time, but every event then carries the same fields. */
  json_t *e = json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", what, "ph", "M", "ts", 0, "pid",
                        (int)pid, "args", "name", name);
  if (e && tid > 0) json_object_set_new(e, "tid", json_integer(tid));
  else if (e) json_object_set_new(e, "tid", json_integer(0));
  return e;
}

cnnb_status cnnb_trace_open(cnnb_ctx *ctx, const char *path, const cnnb_trace_info *info,
                            cnnb_trace **out) {
  *out = NULL;
  char file[4096];
  cnnb_trace_path(path, info->rank, info->world_size, file, sizeof file);
  cnnb_trace *t = calloc(1, sizeof *t);
  const char *flag = info->flag ? info->flag : "trace_file";
  if (!t) return cnnb_error(ctx, CNNB_ENOMEM, "--%s: out of memory", flag);
  pthread_mutex_init(&t->lock, NULL);
  if (!(t->path = strdup(file)) || !(t->events = json_array())) {
    cnnb_trace_free(t);
    return cnnb_error(ctx, CNNB_ENOMEM, "--%s: out of memory", flag);
  }
  t->rank = info->rank;
  t->steps = info->steps;
  if (!(t->file = cnnb_output_fopen(file))) {
    int err = errno;
    cnnb_trace_free(t);
    return cnnb_error(ctx, CNNB_EIO, "--%s=%s: cannot create %s: %s", flag, path, file,
                      cnnb_output_strerror(err));
  }
  char process[32];
  snprintf(process, sizeof process, "rank %d", (int)info->rank);
  t->other = json_pack("{s:s, s:s, s:s, s:I, s:i, s:i}", "model", info->model ? info->model : "",
                       "device", info->device ? info->device : "", "strategy",
                       info->strategy ? info->strategy : "", "steps", (json_int_t)info->steps,
                       "rank", (int)info->rank, "world_size", (int)info->world_size);
  json_t *name = metadata("process_name", info->rank, 0, process);
  if (!t->other || !name || json_array_append_new(t->events, name) != 0) {
    cnnb_trace_free(t);
    return cnnb_error(ctx, CNNB_ENOMEM, "--%s: out of memory", flag);
  }
  cnnb_log(ctx, CNNB_LOG_INFO, "tracing %lld steps to %s", (long long)info->steps, file);
  *out = t;
  return CNNB_OK;
}

void cnnb_trace_attach(cnnb_ctx *ctx, cnnb_trace *t) {
  if (!ctx) return;
  if (t) t->family = ctx->log;
  else atomic_store_explicit(&ctx->log->tracing, NULL, memory_order_release);
}

void cnnb_trace_begin(cnnb_trace *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  t->in_window = t->file != NULL;
  pthread_mutex_unlock(&t->lock);
  if (t->family && t->in_window)
    atomic_store_explicit(&t->family->tracing, t, memory_order_release);
}

void cnnb_trace_end(cnnb_trace *t) {
  if (!t) return;
  if (t->family) atomic_store_explicit(&t->family->tracing, NULL, memory_order_release);
  pthread_mutex_lock(&t->lock);
  t->in_window = false;
  pthread_mutex_unlock(&t->lock);
}

/* The tid of `track`, adding it (and its thread_name event) on first use; under lock.
 * 0 when out of memory. */
static int32_t track_tid(cnnb_trace *t, const char *track) {
  for (int32_t i = 0; i < t->num_tracks; i++)
    if (strcmp(t->tracks[i], track) == 0) return i + 1;
  if (t->num_tracks == t->max_tracks) {
    int32_t grown = t->max_tracks ? 2 * t->max_tracks : 16;
    char **more = realloc(t->tracks, (size_t)grown * sizeof *more);
    if (!more) return 0;
    t->tracks = more, t->max_tracks = grown;
  }
  char *copy = strdup(track);
  json_t *name = copy ? metadata("thread_name", t->rank, t->num_tracks + 1, track) : NULL;
  /* Rows sort by this index, so tracks appear in the order they were first used. */
  json_t *order = json_pack("{s:s, s:s, s:i, s:i, s:i, s:{s:i}}", "name", "thread_sort_index", "ph",
                            "M", "ts", 0, "pid", (int)t->rank, "tid", (int)t->num_tracks + 1,
                            "args", "sort_index", (int)t->num_tracks + 1);
  if (!name || !order || json_array_append_new(t->events, name) != 0 ||
      json_array_append_new(t->events, order) != 0) {
    free(copy);
    return 0;
  }
  t->tracks[t->num_tracks++] = copy;
  return t->num_tracks;
}

/* Microseconds to the nanosecond: what the clock resolves, and short in the file. */
static double to_ns(double us) { return round(us * 1000.0) / 1000.0; }

void cnnb_trace_add(cnnb_trace *t, const char *track, const char *name, const char *cat,
                    double start_us, double end_us, json_t *args) {
  if (!t || !track || !name || !(end_us >= start_us)) {
    json_decref(args);
    return;
  }
  pthread_mutex_lock(&t->lock);
  int32_t tid = t->in_window ? track_tid(t, track) : 0;
  json_t *e = tid ? json_pack("{s:s, s:s, s:f, s:f, s:i, s:i}", "name", name, "ph", "X", "ts",
                              to_ns(start_us), "dur", to_ns(to_ns(end_us) - to_ns(start_us)), "pid",
                              (int)t->rank, "tid", (int)tid)
                  : NULL;
  if (e && cat) json_object_set_new(e, "cat", json_string(cat));
  if (e && args) json_object_set(e, "args", args);
  if (e) json_array_append_new(t->events, e);
  pthread_mutex_unlock(&t->lock);
  json_decref(args);
}

cnnb_status cnnb_trace_finish(cnnb_trace *t, cnnb_ctx *ctx) {
  if (!t || !t->file) return CNNB_OK;
  cnnb_trace_end(t);
  pthread_mutex_lock(&t->lock);
  json_t *doc = json_pack("{s:O, s:s, s:O}", "traceEvents", t->events, "displayTimeUnit", "ms",
                          "otherData", t->other);
  /* 16 significant digits keep a CLOCK_MONOTONIC microsecond time to the nanosecond after
   * days of uptime. */
  errno = 0;
  int rc = doc ? json_dumpf(doc, t->file, JSON_REAL_PRECISION(16) | JSON_COMPACT) : -1;
  /* The first failure's errno: a full disk fails the dump's writes, and the close then
   * only repeats it (or says nothing). */
  int err = rc != 0 ? (doc ? errno : ENOMEM) : 0;
  json_decref(doc);
  if (fflush(t->file) != 0 && !err) err = errno ? errno : EIO;
  if (fclose(t->file) != 0 && !err) err = errno ? errno : EIO;
  if (rc != 0 && !err) err = EIO;
  t->file = NULL;
  pthread_mutex_unlock(&t->lock);
  if (err)
    return cnnb_error(ctx, CNNB_EIO, "--trace_file: writing %s failed: %s", t->path, strerror(err));
  cnnb_log(ctx, CNNB_LOG_INFO, "trace written to %s (%zu events)", t->path,
           json_array_size(t->events));
  return CNNB_OK;
}

const json_t *cnnb_trace_events(const cnnb_trace *t) { return t ? t->events : NULL; }

int64_t cnnb_trace_steps(const cnnb_trace *t) { return t ? t->steps : 0; }

void cnnb_trace_free(cnnb_trace *t) {
  if (!t) return;
  if (t->file) fclose(t->file);
  pthread_mutex_destroy(&t->lock);
  json_decref(t->events);
  json_decref(t->other);
  for (int32_t i = 0; i < t->num_tracks; i++) free(t->tracks[i]);
  free(t->tracks);
  free(t->path);
  free(t);
}

/* ---- the SDK (cnnb/trace.h) ------------------------------------------------------- */

int32_t cnnb_trace_active(const cnnb_ctx *ctx) {
  return ctx && atomic_load_explicit(&ctx->log->tracing, memory_order_relaxed) != NULL;
}

double cnnb_trace_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

void cnnb_trace_event(const cnnb_ctx *ctx, const char *track, const char *name, double start_us,
                      double end_us, const char *args_json) {
  cnnb_trace *t = ctx ? atomic_load_explicit(&ctx->log->tracing, memory_order_acquire) : NULL;
  if (!t) return;
  json_t *args = NULL;
  if (args_json) {
    json_error_t error;
    args = json_loads(args_json, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(args)) {
      pthread_mutex_lock(&t->lock);
      bool warn = !t->warned_args;
      t->warned_args = true;
      pthread_mutex_unlock(&t->lock);
      if (warn)
        cnnb_log(ctx, CNNB_LOG_WARN,
                 "trace event '%s' on '%s': args dropped, not a JSON object (%s)", name ? name : "",
                 track ? track : "", args ? "another JSON value" : error.text);
      json_decref(args);
      args = NULL;
    }
  }
  cnnb_trace_add(t, track, name, NULL, start_us, end_us, args);
}

void cnnb_trace_host_event(const cnnb_ctx *ctx, const char *track, const char *name,
                           const char *cat, double start_us, double end_us, json_t *args) {
  cnnb_trace *t = ctx ? atomic_load_explicit(&ctx->log->tracing, memory_order_acquire) : NULL;
  if (t) cnnb_trace_add(t, track, name, cat, start_us, end_us, args);
  else json_decref(args);
}

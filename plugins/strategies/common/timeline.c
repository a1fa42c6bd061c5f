/* timeline.c — a strategy's Chrome trace per rank (timeline.h): events formatted under a
 * lock, one a line, into a stdio buffer flushed once a step; and each all-reduce also
 * given to the host's --trace_file while it records. */
#define _POSIX_C_SOURCE 200809L
#include "timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct timeline {
  cnnb_ctx *ctx; /* the strategy's: where --trace_file is found */
  FILE *file;    /* NULL: no --*_timeline, the trace alone */
  int32_t rank;
  pthread_mutex_t lock;
};

void timeline_path(const char *path, int32_t rank, char *out, size_t size) {
  size_t len = strlen(path);
  size_t stem = len >= 5 && strcmp(path + len - 5, ".json") == 0 ? len - 5 : len;
  snprintf(out, size, "%.*s.rank%d.json", (int)stem, path, (int)rank);
}

cnnb_status timeline_open(cnnb_ctx *ctx, const char *flag, const char *path, int32_t rank,
                          timeline **out) {
  *out = NULL;
  timeline *t = calloc(1, sizeof *t);
  if (!t) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for --%s", flag);
  t->ctx = ctx;
  t->rank = rank;
  pthread_mutex_init(&t->lock, NULL);
  *out = t;
  if (!path || !*path) return CNNB_OK;
  char file[4096];
  timeline_path(path, rank, file, sizeof file);
  if (!(t->file = fopen(file, "w"))) {
    int err = errno;
    timeline_close(t);
    *out = NULL;
    return cnnb_error(ctx, CNNB_EIO, "--%s=%s: cannot create %s: %s", flag, path, file,
                      strerror(err));
  }
  fprintf(t->file, "[\n");
  fprintf(t->file,
          "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
          "\"args\": {\"name\": \"step thread\"}},\n",
          (int)rank, TIMELINE_STEP_THREAD);
  fprintf(t->file,
          "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
          "\"args\": {\"name\": \"communication thread\"}},\n",
          (int)rank, TIMELINE_COMM_THREAD);
  cnnb_log(ctx, CNNB_LOG_INFO, "writing the timeline to %s", file);
  return CNNB_OK;
}

void timeline_close(timeline *t) {
  if (!t) return;
  if (t->file) {
    /* The last event carries no comma, so a finished file is strict JSON. */
    fprintf(t->file,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
            "\"args\": {\"name\": \"rank %d\"}}\n]\n",
            (int)t->rank, (int)t->rank);
    fclose(t->file);
  }
  pthread_mutex_destroy(&t->lock);
  free(t);
}

/* One event at ts: ph is "i" (an instant), "B" or "E" (the start or end of a span on the
 * thread); args is the inside of the args object ("" for none). */
static void event_at(timeline *t, double ts, const char *name, const char *ph, int tid,
                     const char *args) {
  if (!t || !t->file) return;
  pthread_mutex_lock(&t->lock);
  fprintf(t->file, "{\"name\": \"%s\", \"ph\": \"%s\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d%s",
          name, ph, ts, (int)t->rank, tid, *ph == 'i' ? ", \"s\": \"t\"" : "");
  if (*args) fprintf(t->file, ", \"args\": {%s}", args);
  fputs("},\n", t->file);
  pthread_mutex_unlock(&t->lock);
}

static void event(timeline *t, const char *name, const char *ph, int tid, const char *args) {
  if (t && t->file) event_at(t, cnnb_trace_now_us(), name, ph, tid, args);
}

bool timeline_recording(const timeline *t) { return t && (t->file || cnnb_trace_active(t->ctx)); }

void timeline_bucket_ready(timeline *t, int64_t step, int32_t bucket, int64_t offset,
                           int64_t count) {
  if (!t || !t->file) return;
  char args[160];
  snprintf(args, sizeof args, "\"step\": %lld, \"bucket\": %d, \"offset\": %lld, \"count\": %lld",
           (long long)step, (int)bucket, (long long)offset, (long long)count);
  event(t, "bucket ready", "i", TIMELINE_STEP_THREAD, args);
}

/* The args both outputs show: "step": S, "what": ..., "bytes": N, "how": ... */
static void allreduce_args(const timeline_span *span, char *out, size_t size) {
  snprintf(out, size, "\"step\": %lld, \"what\": \"%s\", \"bytes\": %lld, \"how\": \"%s\"",
           (long long)span->step, span->what, (long long)span->bytes, span->how);
}

void timeline_allreduce_begin(timeline *t, timeline_span *span, int tid, int64_t step,
                              const char *what, int64_t bytes, const char *how) {
  span->traced = t && cnnb_trace_active(t->ctx);
  if (!t || (!t->file && !span->traced)) return;
  span->start_us = cnnb_trace_now_us();
  span->tid = tid;
  span->step = step;
  span->bytes = bytes;
  snprintf(span->what, sizeof span->what, "%s", what);
  snprintf(span->how, sizeof span->how, "%s", how ? how : "");
  if (!t->file) return;
  char args[384];
  allreduce_args(span, args, sizeof args);
  event_at(t, span->start_us, "allreduce", "B", tid, args);
}

void timeline_allreduce_end(timeline *t, const timeline_span *span) {
  if (!t || (!t->file && !span->traced)) return;
  double end = cnnb_trace_now_us();
  event_at(t, end, "allreduce", "E", span->tid, "");
  if (!span->traced) return;
  char track[96], args[400];
  snprintf(track, sizeof track, "allreduce %s", span->what);
  args[0] = '{';
  allreduce_args(span, args + 1, sizeof args - 2);
  strcat(args, "}");
  cnnb_trace_event(t->ctx, track, "allreduce", span->start_us, end, args);
}

void timeline_backward_done(timeline *t, int64_t step) {
  if (!t || !t->file) return;
  char args[64];
  snprintf(args, sizeof args, "\"step\": %lld", (long long)step);
  event(t, "backward done", "i", TIMELINE_STEP_THREAD, args);
}

void timeline_flush(timeline *t) {
  if (!t || !t->file) return;
  pthread_mutex_lock(&t->lock);
  fflush(t->file);
  pthread_mutex_unlock(&t->lock);
}

/* timeline.c — a strategy's Chrome trace per rank (timeline.h): events formatted under a
 * lock, one a line, into a stdio buffer flushed once a step. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "timeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct timeline {
  FILE *file;
  int32_t rank;
  pthread_mutex_t lock;
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

void timeline_path(const char *path, int32_t rank, char *out, size_t size) {
  size_t len = strlen(path);
  size_t stem = len >= 5 && strcmp(path + len - 5, ".json") == 0 ? len - 5 : len;
  snprintf(out, size, "%.*s.rank%d.json", (int)stem, path, (int)rank);
}

cnnb_status timeline_open(cnnb_ctx *ctx, const char *flag, const char *path, int32_t rank,
                          timeline **out) {
  *out = NULL;
  if (!path || !*path) return CNNB_OK;
  char file[4096];
  timeline_path(path, rank, file, sizeof file);
  timeline *t = calloc(1, sizeof *t);
  if (!t) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for --%s", flag);
  if (!(t->file = fopen(file, "w"))) {
    int err = errno;
    free(t);
    return cnnb_error(ctx, CNNB_EIO, "--%s=%s: cannot create %s: %s", flag, path, file,
                      strerror(err));
  }
  t->rank = rank;
  pthread_mutex_init(&t->lock, NULL);
  fprintf(t->file, "[\n");
  fprintf(t->file, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
          "\"args\": {\"name\": \"step thread\"}},\n", (int)rank, TIMELINE_STEP_THREAD);
  fprintf(t->file, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, "
          "\"args\": {\"name\": \"communication thread\"}},\n", (int)rank, TIMELINE_COMM_THREAD);
  cnnb_log(ctx, CNNB_LOG_INFO, "writing the timeline to %s", file);
  *out = t;
  return CNNB_OK;
}

void timeline_close(timeline *t) {
  if (!t) return;
  /* The last event carries no comma, so a finished file is strict JSON. */
  fprintf(t->file, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
          "\"args\": {\"name\": \"rank %d\"}}\n]\n", (int)t->rank, (int)t->rank);
  fclose(t->file);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

/* One event: ph is "i" (an instant), "B" or "E" (the start or end of a span on the
 * thread); args is the inside of the args object ("" for none). */
static void event(timeline *t, const char *name, const char *ph, int tid, const char *args) {
  double ts = now_us();
  pthread_mutex_lock(&t->lock);
  fprintf(t->file, "{\"name\": \"%s\", \"ph\": \"%s\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d%s",
          name, ph, ts, (int)t->rank, tid, *ph == 'i' ? ", \"s\": \"t\"" : "");
  if (*args) fprintf(t->file, ", \"args\": {%s}", args);
  fputs("},\n", t->file);
  pthread_mutex_unlock(&t->lock);
}

void timeline_bucket_ready(timeline *t, int64_t step, int32_t bucket, int64_t offset,
                           int64_t count) {
  if (!t) return;
  char args[160];
  snprintf(args, sizeof args, "\"step\": %lld, \"bucket\": %d, \"offset\": %lld, \"count\": %lld",
           (long long)step, (int)bucket, (long long)offset, (long long)count);
  event(t, "bucket ready", "i", TIMELINE_STEP_THREAD, args);
}

void timeline_allreduce_begin(timeline *t, int tid, int64_t step, const char *what,
                              int64_t bytes, const char *how) {
  if (!t) return;
  char args[384];
  snprintf(args, sizeof args, "\"step\": %lld, \"what\": \"%s\", \"bytes\": %lld, \"how\": \"%s\"",
           (long long)step, what, (long long)bytes, how);
  event(t, "allreduce", "B", tid, args);
}

void timeline_allreduce_end(timeline *t, int tid) {
  if (!t) return;
  event(t, "allreduce", "E", tid, "");
}

void timeline_backward_done(timeline *t, int64_t step) {
  if (!t) return;
  char args[64];
  snprintf(args, sizeof args, "\"step\": %lld", (long long)step);
  event(t, "backward done", "i", TIMELINE_STEP_THREAD, args);
}

void timeline_flush(timeline *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  fflush(t->file);
  pthread_mutex_unlock(&t->lock);
}

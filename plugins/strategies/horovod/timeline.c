/* timeline.c — horovod's Chrome trace per rank (timeline.h). */
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

cnnb_status timeline_open(cnnb_ctx *ctx, const char *path, int32_t rank, timeline **out) {
  *out = NULL;
  if (!path || !*path) return CNNB_OK;
  char file[4096];
  timeline_path(path, rank, file, sizeof file);
  timeline *t = calloc(1, sizeof *t);
  if (!t) return cnnb_error(ctx, CNNB_ENOMEM, "out of memory for --horovod_timeline");
  if (!(t->file = fopen(file, "w"))) {
    int err = errno;
    free(t);
    return cnnb_error(ctx, CNNB_EIO, "--horovod_timeline=%s: cannot create %s: %s", path, file,
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

void timeline_event(timeline *t, const char *name, const char *ph, int tid, const char *args) {
  if (!t) return;
  double ts = now_us();
  pthread_mutex_lock(&t->lock);
  fprintf(t->file, "{\"name\": \"%s\", \"ph\": \"%s\", \"ts\": %.3f, \"pid\": %d, \"tid\": %d%s",
          name, ph, ts, (int)t->rank, tid, *ph == 'i' ? ", \"s\": \"t\"" : "");
  if (*args) fprintf(t->file, ", \"args\": {%s}", args);
  fputs("},\n", t->file);
  pthread_mutex_unlock(&t->lock);
}

void timeline_flush(timeline *t) {
  if (!t) return;
  pthread_mutex_lock(&t->lock);
  fflush(t->file);
  pthread_mutex_unlock(&t->lock);
}

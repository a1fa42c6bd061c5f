/* event_file.c — a TensorBoard events file (event_file.h). */
#define _GNU_SOURCE /* asprintf, gethostname */
#include "report/event_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tfrecord/tfrecord.h>

#include "base/clock.h"
#include "base/dirs.h"

/* Past this many runs started in one second in one directory, something else is wrong. */
#define MAX_SUFFIX 100

struct cnnb_event_file {
  cnnb_ctx *ctx;
  char *label, *path;
  tfrecord_writer *writer;
};

/* One encoded event into the file, flushed. Frees `pb`. */
static cnnb_status write_event(cnnb_event_file *f, cnnb_pb *pb, int encoded) {
  char err[512];
  cnnb_status st = CNNB_OK;
  if (encoded != 0)
    st = cnnb_error(f->ctx, CNNB_ENOMEM, "%s: out of memory for an event of %s", f->label, f->path);
  else if (tfrecord_write(f->writer, pb->data, pb->size, err, sizeof err) != 0 ||
           tfrecord_writer_flush(f->writer, err, sizeof err) != 0)
    st = cnnb_error(f->ctx, CNNB_EIO, "%s: writing events: %s", f->label, err);
  cnnb_pb_free(pb);
  return st;
}

/* The file name: TensorFlow's, and a suffix when it is taken. */
static cnnb_status create_file(cnnb_event_file *f, const char *dir) {
  char host[256] = "";
  if (gethostname(host, sizeof host) != 0 || !*host) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  long long now = (long long)cnnb_unix_seconds();
  char err[512] = "";
  for (int suffix = 0; suffix < MAX_SUFFIX; suffix++) {
    free(f->path);
    f->path = NULL;
    int n = suffix
                ? asprintf(&f->path, "%s/events.out.tfevents.%010lld.%s.%d", dir, now, host, suffix)
                : asprintf(&f->path, "%s/events.out.tfevents.%010lld.%s", dir, now, host);
    if (n < 0) {
      f->path = NULL;
      return cnnb_error(f->ctx, CNNB_ENOMEM, "%s: out of memory", f->label);
    }
    if (tfrecord_writer_create(f->path, &f->writer, err, sizeof err) == 0) return CNNB_OK;
    if (errno != EEXIST) break;
  }
  return cnnb_error(f->ctx, CNNB_EIO, "%s: cannot write an events file: %s", f->label, err);
}

static void free_file(cnnb_event_file *f) {
  free(f->label);
  free(f->path);
  free(f);
}

cnnb_status cnnb_event_file_open(cnnb_ctx *ctx, const char *label, const char *dir,
                                 cnnb_event_file **out) {
  *out = NULL;
  cnnb_event_file *f = calloc(1, sizeof *f);
  if (!f || !(f->label = strdup(label))) {
    free(f);
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory", label);
  }
  f->ctx = ctx;
  cnnb_status st = cnnb_make_dirs(ctx, label, dir);
  if (st == CNNB_OK) st = create_file(f, dir);
  if (st == CNNB_OK) {
    cnnb_pb pb = {0};
    st = write_event(f, &pb, cnnb_event_encode_file_version(&pb, cnnb_unix_seconds()));
  }
  if (st != CNNB_OK) {
    if (f->writer) tfrecord_writer_close(f->writer, NULL, 0);
    free_file(f);
    return st;
  }
  *out = f;
  return CNNB_OK;
}

cnnb_status cnnb_event_file_session_start(cnnb_event_file *f, int64_t step) {
  cnnb_pb pb = {0};
  return write_event(f, &pb, cnnb_event_encode_session_start(&pb, cnnb_unix_seconds(), step));
}

cnnb_status cnnb_event_file_scalars(cnnb_event_file *f, int64_t step,
                                    const cnnb_event_scalar *values, size_t count) {
  cnnb_pb pb = {0};
  return write_event(f, &pb,
                     cnnb_event_encode_scalars(&pb, cnnb_unix_seconds(), step, values, count));
}

const char *cnnb_event_file_path(const cnnb_event_file *f) { return f->path; }

cnnb_status cnnb_event_file_close(cnnb_event_file *f) {
  if (!f) return CNNB_OK;
  char err[512];
  cnnb_status st = CNNB_OK;
  if (tfrecord_writer_close(f->writer, err, sizeof err) != 0)
    st = cnnb_error(f->ctx, CNNB_EIO, "%s: closing the events file: %s", f->label, err);
  free_file(f);
  return st;
}

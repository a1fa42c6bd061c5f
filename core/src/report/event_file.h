/* event_file.h — one TensorBoard events file: TFRecord framing (common/tfrecord) around
 * the Event protobufs of event_proto.h, as TensorFlow's tf.summary.FileWriter writes
 * them, so `tensorboard --logdir` (and its EventAccumulator) reads the run.
 *
 * The file is DIR/events.out.tfevents.<Unix seconds, 10 digits>.<hostname> (TensorFlow's
 * name); it is always a new file: when that name exists (two runs in one second), ".1",
 * ".2", ... is added, so a run never replaces an events file it did not write. Each
 * event is flushed as it is written, so a killed run leaves whole records. Failures are
 * CNNB_EIO in ctx's error naming `label` (the flag that asked for the file) and the path.
 * Host-internal. */
#ifndef CNNB_EVENT_FILE_H
#define CNNB_EVENT_FILE_H

#include <stdint.h>
#include <cnnb/ctx.h>

#include "report/event_proto.h"

typedef struct cnnb_event_file cnnb_event_file;

/* Makes `dir` (and its parents) when missing, creates the file and writes its first
 * record (file_version), so a directory that cannot take the file is refused here,
 * before anything else. */
cnnb_status cnnb_event_file_open(cnnb_ctx *ctx, const char *label, const char *dir,
                                 cnnb_event_file **out);
/* A SessionLog START at global step `step` (event_proto.h). */
cnnb_status cnnb_event_file_session_start(cnnb_event_file *f, int64_t step);
/* One event holding `count` scalars at global step `step`. */
cnnb_status cnnb_event_file_scalars(cnnb_event_file *f, int64_t step,
                                    const cnnb_event_scalar *values, size_t count);
/* The file's path. */
const char *cnnb_event_file_path(const cnnb_event_file *f);
/* Flushes, fsyncs and closes; NULL is fine. A failure is reported in the ctx given at
 * open (CNNB_EIO). */
cnnb_status cnnb_event_file_close(cnnb_event_file *f);

#endif

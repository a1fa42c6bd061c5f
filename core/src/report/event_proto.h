/* event_proto.h — the few protobuf messages of a TensorBoard events file, encoded by hand
 * (tensorflow/core/util/event.proto, summary.proto). Each record of the file is one
 * serialized Event:
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                Summary summary = 5; SessionLog session_log = 7; }
 *   Summary    { repeated Value value = 1; }
 *   Value      { string tag = 1; float simple_value = 2; }
 *   SessionLog { SessionStatus status = 1; }   START = 1
 * on the protobuf wire format: each field a key varint (field number << 3 | wire type),
 * then a varint (type 0), 8 little-endian bytes (type 1: double), a varint length and
 * the bytes (type 2: strings and nested messages), or 4 little-endian bytes (type 5:
 * float). Only these fields, so no protobuf library is needed; unit_event_proto checks the
 * bytes against protobuf's own encoding and cli_tensorboard reads the files with
 * TensorBoard. Pure (no I/O). Host-internal. */
#ifndef CNNB_EVENT_PROTO_H
#define CNNB_EVENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer; `failed` once an allocation failed (the bytes are then
 * incomplete and must not be written). Zero-initialized is empty. */
typedef struct cnnb_pb {
  uint8_t *data;
  size_t size, cap;
  bool failed;
} cnnb_pb;

void cnnb_pb_free(cnnb_pb *pb);
void cnnb_pb_varint(cnnb_pb *pb, uint64_t value); /* a bare varint */
void cnnb_pb_field_varint(cnnb_pb *pb, uint32_t field, uint64_t value);
void cnnb_pb_field_double(cnnb_pb *pb, uint32_t field, double value);
void cnnb_pb_field_float(cnnb_pb *pb, uint32_t field, float value);
void cnnb_pb_field_bytes(cnnb_pb *pb, uint32_t field, const void *data, size_t size);

/* A scalar of a Summary: TensorBoard's "simple_value" (a float). */
typedef struct cnnb_event_scalar {
  const char *tag;
  double value; /* stored as float, as TensorFlow's tf.summary.scalar stores it */
} cnnb_event_scalar;

/* Each encodes one Event into `out` (appended; 0, or -1 when out of memory). */
/* The first record of every events file: file_version "brain.Event:2". */
int cnnb_event_encode_file_version(cnnb_pb *out, double wall_time);
/* A SessionLog START at `step`: where a run (or a resumed run) begins, so TensorBoard
 * drops the events a killed run left after that step. */
int cnnb_event_encode_session_start(cnnb_pb *out, double wall_time, int64_t step);
/* A Summary of `count` scalars at `step`. */
int cnnb_event_encode_scalars(cnnb_pb *out, double wall_time, int64_t step,
                              const cnnb_event_scalar *values, size_t count);

#endif

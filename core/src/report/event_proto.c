/* event_proto.c — protobuf's wire format for the Event messages of event_proto.h. */
#include "report/event_proto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FILE_VERSION "brain.Event:2"

enum wire_type { VARINT = 0, FIXED64 = 1, LENGTH_DELIMITED = 2, FIXED32 = 5 };
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5 };
enum { EVENT_SESSION_LOG = 7, SESSION_LOG_STATUS = 1, SESSION_LOG_START = 1 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };

static void append(cnnb_pb *pb, const void *data, size_t size) {
  if (pb->failed) return;
  if (pb->size + size > pb->cap) {
    size_t cap = pb->cap ? pb->cap : 64;
    while (cap < pb->size + size) cap *= 2;
    uint8_t *grown = realloc(pb->data, cap);
    if (!grown) {
      pb->failed = true;
      return;
    }
    pb->data = grown;
    pb->cap = cap;
  }
  if (size) memcpy(pb->data + pb->size, data, size);
  pb->size += size;
}

void cnnb_pb_free(cnnb_pb *pb) {
  free(pb->data);
  *pb = (cnnb_pb){0};
}

/* Seven bits a byte, least significant first, the high bit set on all but the last. */
void cnnb_pb_varint(cnnb_pb *pb, uint64_t value) {
  uint8_t bytes[10];
  size_t n = 0;
  do {
    bytes[n] = (uint8_t)(value & 0x7f);
    value >>= 7;
    if (value) bytes[n] |= 0x80;
    n++;
  } while (value);
  append(pb, bytes, n);
}

static void key(cnnb_pb *pb, uint32_t field, enum wire_type type) {
  cnnb_pb_varint(pb, (uint64_t)field << 3 | (uint64_t)type);
}

/* Little-endian, whatever the host's order. */
static void fixed(cnnb_pb *pb, uint64_t bits, size_t size) {
  uint8_t bytes[8];
  for (size_t i = 0; i < size; i++) bytes[i] = (uint8_t)(bits >> (8 * i));
  append(pb, bytes, size);
}

void cnnb_pb_field_varint(cnnb_pb *pb, uint32_t field, uint64_t value) {
  key(pb, field, VARINT);
  cnnb_pb_varint(pb, value);
}

void cnnb_pb_field_double(cnnb_pb *pb, uint32_t field, double value) {
  uint64_t bits;
  memcpy(&bits, &value, sizeof bits);
  key(pb, field, FIXED64);
  fixed(pb, bits, 8);
}

void cnnb_pb_field_float(cnnb_pb *pb, uint32_t field, float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  key(pb, field, FIXED32);
  fixed(pb, bits, 4);
}

void cnnb_pb_field_bytes(cnnb_pb *pb, uint32_t field, const void *data, size_t size) {
  key(pb, field, LENGTH_DELIMITED);
  cnnb_pb_varint(pb, size);
  append(pb, data, size);
}

/* A nested message's bytes as a length-delimited field; frees `inner`. */
static void field_message(cnnb_pb *pb, uint32_t field, cnnb_pb *inner) {
  if (inner->failed) pb->failed = true;
  else cnnb_pb_field_bytes(pb, field, inner->data, inner->size);
  cnnb_pb_free(inner);
}

/* Event's head: wall_time, then step (int64: a negative step is its two's complement,
 * ten bytes, as protobuf encodes one). A zero is left out, as proto3 leaves out a field
 * at its default: the bytes are the ones protobuf itself writes. */
static void event_head(cnnb_pb *out, double wall_time, int64_t step) {
  if (wall_time != 0 || signbit(wall_time)) cnnb_pb_field_double(out, EVENT_WALL_TIME, wall_time);
  if (step != 0) cnnb_pb_field_varint(out, EVENT_STEP, (uint64_t)step);
}

int cnnb_event_encode_file_version(cnnb_pb *out, double wall_time) {
  event_head(out, wall_time, 0);
  cnnb_pb_field_bytes(out, EVENT_FILE_VERSION, FILE_VERSION, strlen(FILE_VERSION));
  return out->failed ? -1 : 0;
}

int cnnb_event_encode_session_start(cnnb_pb *out, double wall_time, int64_t step) {
  event_head(out, wall_time, step);
  cnnb_pb log = {0};
  cnnb_pb_field_varint(&log, SESSION_LOG_STATUS, SESSION_LOG_START);
  field_message(out, EVENT_SESSION_LOG, &log);
  return out->failed ? -1 : 0;
}

int cnnb_event_encode_scalars(cnnb_pb *out, double wall_time, int64_t step,
                              const cnnb_event_scalar *values, size_t count) {
  event_head(out, wall_time, step);
  cnnb_pb summary = {0};
  for (size_t i = 0; i < count; i++) {
    cnnb_pb value = {0};
    cnnb_pb_field_bytes(&value, VALUE_TAG, values[i].tag, strlen(values[i].tag));
    cnnb_pb_field_float(&value, VALUE_SIMPLE_VALUE, (float)values[i].value);
    field_message(&summary, SUMMARY_VALUE, &value);
  }
  field_message(out, EVENT_SUMMARY, &summary);
  return out->failed ? -1 : 0;
}

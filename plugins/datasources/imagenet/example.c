/* example.c — tf.Example in protobuf wire format, read and written by hand:
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }   (repeated MapEntry { key = 1; value = 2; })
 *   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
 *                      Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1; }
 *   Int64List { repeated int64 value = 1; }
 * The parser walks the record once, remembers where the wanted features' values lie (the
 * last of a repeated key wins, as protobuf merges maps), and decodes only those; repeated
 * numbers are accepted packed (wire type 2) and unpacked, as any protobuf parser must.
 * Every length is checked against the bytes left in its enclosing message. */
#include "example.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };
enum { KIND_NONE = 0, KIND_BYTES = 1, KIND_FLOAT = 2, KIND_INT64 = 3 };
static const char *const kind_names[] = {"an empty feature", "a bytes_list", "a float_list",
                                         "an int64_list"};

typedef struct span {
  const uint8_t *p;
  size_t n;
} span;

typedef struct field {
  uint32_t number;
  int wire;
  uint64_t value; /* varint, fixed64, fixed32 */
  span bytes;     /* WIRE_BYTES */
} field;          /* declared zeroed: gcc 12 at -O3 cannot see that next_field fills it */

typedef struct parser {
  const uint8_t *start; /* the record, for offsets in messages */
  char *err;
  size_t err_size;
} parser;

static int fail(parser *ps, const char *fmt, ...) {
  if (ps->err && ps->err_size) {
    int n = snprintf(ps->err, ps->err_size, "tf.Example: ");
    if (n >= 0 && (size_t)n < ps->err_size) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(ps->err + n, ps->err_size - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return -1;
}

/* A varint at *p before end: at most 10 bytes. 0, or -1 (truncated or too long). */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end) return -1;
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* The next field of the message in [*p, end): 1, 0 at the end, -1 with err. */
static int next_field(parser *ps, const uint8_t **p, const uint8_t *end, field *f) {
  if (*p >= end) return 0;
  size_t at = (size_t)(*p - ps->start);
  uint64_t tag;
  if (varint(p, end, &tag) != 0) return fail(ps, "truncated field tag at byte %zu", at);
  if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
    return fail(ps, "invalid field number %llu at byte %zu", (unsigned long long)(tag >> 3), at);
  f->number = (uint32_t)(tag >> 3);
  f->wire = (int)(tag & 7);
  switch (f->wire) {
    case WIRE_VARINT:
      if (varint(p, end, &f->value) != 0)
        return fail(ps, "field %u at byte %zu: truncated varint", f->number, at);
      return 1;
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
      size_t n = f->wire == WIRE_FIXED64 ? 8 : 4;
      if ((size_t)(end - *p) < n)
        return fail(ps, "field %u at byte %zu: truncated fixed%zu", f->number, at, n * 8);
      f->value = 0;
      for (size_t i = 0; i < n; i++) f->value |= (uint64_t)(*p)[i] << (8 * i);
      *p += n;
      return 1;
    }
    case WIRE_BYTES: {
      uint64_t n;
      if (varint(p, end, &n) != 0)
        return fail(ps, "field %u at byte %zu: truncated length", f->number, at);
      if (n > (uint64_t)(end - *p))
        return fail(ps, "field %u at byte %zu: length %llu runs past its message (%zu bytes left)",
                    f->number, at, (unsigned long long)n, (size_t)(end - *p));
      f->bytes.p = *p;
      f->bytes.n = (size_t)n;
      *p += n;
      return 1;
    }
    default: /* groups (3, 4) are deprecated and never in a tf.Example; 6, 7 do not exist */
      return fail(ps, "field %u at byte %zu: unsupported wire type %d", f->number, at, f->wire);
  }
}

/* The wanted features, by key; the value spans are the Feature messages. */
enum { F_IMAGE, F_LABEL, F_XMIN, F_YMIN, F_XMAX, F_YMAX, F_COUNT };
static const char *const wanted[F_COUNT] = {"image/encoded",          "image/class/label",
                                            "image/object/bbox/xmin", "image/object/bbox/ymin",
                                            "image/object/bbox/xmax", "image/object/bbox/ymax"};

typedef struct found {
  int present[F_COUNT];
  span feature[F_COUNT];
} found;

static int parse_entry(parser *ps, span entry, found *fd) {
  const uint8_t *p = entry.p, *end = entry.p + entry.n;
  span key = {(const uint8_t *)"", 0}, value = {entry.p, 0};
  field f = {0};
  int r;
  while ((r = next_field(ps, &p, end, &f)) > 0) {
    if (f.number == 1 || f.number == 2) {
      if (f.wire != WIRE_BYTES)
        return fail(ps, "a feature map entry's %s at byte %zu has wire type %d, expected 2",
                    f.number == 1 ? "key" : "value", (size_t)(p - ps->start), f.wire);
      if (f.number == 1) key = f.bytes;
      else value = f.bytes;
    }
  }
  if (r < 0) return -1;
  for (int i = 0; i < F_COUNT; i++) {
    if (key.n == strlen(wanted[i]) && memcmp(key.p, wanted[i], key.n) == 0) {
      fd->present[i] = 1;
      fd->feature[i] = value;
    }
  }
  return 0;
}

static int parse_features(parser *ps, span features, found *fd) {
  const uint8_t *p = features.p, *end = features.p + features.n;
  field f = {0};
  int r;
  while ((r = next_field(ps, &p, end, &f)) > 0) {
    if (f.number != 1) continue;
    if (f.wire != WIRE_BYTES)
      return fail(ps, "a feature map entry has wire type %d, expected 2", f.wire);
    if (parse_entry(ps, f.bytes, fd) != 0) return -1;
  }
  return r;
}

/* A Feature's kind and its list message (the last of the oneof wins, as in protobuf). */
static int feature_list(parser *ps, int which, span feature, int *kind, span *list) {
  const uint8_t *p = feature.p, *end = feature.p + feature.n;
  field f = {0};
  int r;
  *kind = KIND_NONE;
  list->p = feature.p;
  list->n = 0;
  while ((r = next_field(ps, &p, end, &f)) > 0) {
    if (f.number < 1 || f.number > 3) continue;
    if (f.wire != WIRE_BYTES)
      return fail(ps, "feature %s: list has wire type %d, expected 2", wanted[which], f.wire);
    *kind = (int)f.number;
    *list = f.bytes;
  }
  return r;
}

/* Walks a list's values (field 1): calls `value` with each one's bytes (BytesList), fixed32
 * (FloatList) or varint (Int64List), packed runs unpacked. Returns the count or -1. */
typedef struct list_item {
  span bytes;
  uint64_t number;
} list_item;
typedef void (*item_fn)(void *ctx, size_t index, const list_item *item);

static long walk_list(parser *ps, int which, int kind, span list, item_fn fn, void *ctx) {
  const uint8_t *p = list.p, *end = list.p + list.n;
  field f = {0};
  int r;
  size_t count = 0;
  while ((r = next_field(ps, &p, end, &f)) > 0) {
    if (f.number != 1) continue;
    list_item item = {{NULL, 0}, 0};
    int ok = (kind == KIND_BYTES && f.wire == WIRE_BYTES) ||
             (kind == KIND_FLOAT && (f.wire == WIRE_FIXED32 || f.wire == WIRE_BYTES)) ||
             (kind == KIND_INT64 && (f.wire == WIRE_VARINT || f.wire == WIRE_BYTES));
    if (!ok)
      return fail(ps, "feature %s: a value of %s has wire type %d", wanted[which], kind_names[kind],
                  f.wire);
    if (kind == KIND_BYTES || f.wire != WIRE_BYTES) {
      item.bytes = f.bytes;
      item.number = f.value;
      if (fn) fn(ctx, count, &item);
      count++;
    } else if (kind == KIND_FLOAT) { /* packed floats: 4 bytes each */
      if (f.bytes.n % 4)
        return fail(ps, "feature %s: packed floats of %zu bytes (not a multiple of 4)",
                    wanted[which], f.bytes.n);
      for (size_t i = 0; i < f.bytes.n; i += 4) {
        const uint8_t *q = f.bytes.p + i;
        item.number = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                      (uint32_t)q[3] << 24;
        if (fn) fn(ctx, count, &item);
        count++;
      }
    } else { /* packed varints */
      const uint8_t *q = f.bytes.p, *qend = f.bytes.p + f.bytes.n;
      while (q < qend) {
        if (varint(&q, qend, &item.number) != 0)
          return fail(ps, "feature %s: truncated packed varint", wanted[which]);
        if (fn) fn(ctx, count, &item);
        count++;
      }
    }
  }
  if (r < 0) return -1;
  return (long)count;
}

static void take_bytes(void *ctx, size_t index, const list_item *item) {
  *(span *)ctx = item->bytes;
}
static void take_int64(void *ctx, size_t index, const list_item *item) {
  *(int64_t *)ctx = (int64_t)item->number;
}
typedef struct box_ctx {
  image_box *boxes;
  int coord; /* 0 ymin, 1 xmin, 2 ymax, 3 xmax: image_box's order */
} box_ctx;
static void take_float(void *ctx, size_t index, const list_item *item) {
  box_ctx *b = ctx;
  if (index >= IMAGE_MAX_BOXES) return;
  uint32_t bits = (uint32_t)item->number;
  float v;
  memcpy(&v, &bits, sizeof v);
  float *slot = &b->boxes[index].ymin;
  slot[b->coord] = v;
}

/* Kind and count of feature `which`; a kind other than `expected` (an empty feature aside)
 * is an error. */
static long feature_values(parser *ps, const found *fd, int which, int expected, item_fn fn,
                           void *ctx) {
  int kind;
  span list;
  if (!fd->present[which]) return 0;
  if (feature_list(ps, which, fd->feature[which], &kind, &list) != 0) return -1;
  if (kind == KIND_NONE) return 0;
  if (kind != expected)
    return fail(ps, "feature %s is %s, expected %s", wanted[which], kind_names[kind],
                kind_names[expected]);
  return walk_list(ps, which, kind, list, fn, ctx);
}

int example_parse(const uint8_t *data, size_t size, example_view *out, char *err, size_t err_size) {
  if (!data) data = (const uint8_t *)""; /* (NULL, 0): no arithmetic on a null pointer */
  parser ps = {data, err, err_size};
  memset(out, 0, sizeof *out);
  found fd;
  memset(&fd, 0, sizeof fd);
  const uint8_t *p = data, *end = data + size;
  field f = {0};
  int r;
  while ((r = next_field(&ps, &p, end, &f)) > 0) {
    if (f.number != 1) continue;
    if (f.wire != WIRE_BYTES)
      return fail(&ps, "Example.features has wire type %d, expected 2", f.wire);
    if (parse_features(&ps, f.bytes, &fd) != 0) return -1;
  }
  if (r < 0) return -1;

  span image = {NULL, 0};
  long n = feature_values(&ps, &fd, F_IMAGE, KIND_BYTES, take_bytes, &image);
  if (n < 0) return -1;
  if (n == 0) return fail(&ps, "no image/encoded");
  if (n != 1) return fail(&ps, "image/encoded has %ld values, expected 1", n);
  out->image = image.p;
  out->image_size = image.n;

  int64_t label = 0;
  n = feature_values(&ps, &fd, F_LABEL, KIND_INT64, take_int64, &label);
  if (n < 0) return -1;
  if (n > 1) return fail(&ps, "image/class/label has %ld values, expected 1", n);
  out->label = n == 1 ? label : 0;
  out->has_label = n == 1;

  /* xmin, ymin, xmax, ymax into image_box's ymin, xmin, ymax, xmax. */
  static const int coord_of[4] = {1, 0, 3, 2};
  long counts[4];
  for (int i = 0; i < 4; i++) {
    box_ctx ctx = {out->boxes, coord_of[i]};
    counts[i] = feature_values(&ps, &fd, F_XMIN + i, KIND_FLOAT, take_float, &ctx);
    if (counts[i] < 0) return -1;
  }
  if (counts[0] != counts[1] || counts[0] != counts[2] || counts[0] != counts[3])
    return fail(&ps,
                "bounding box lists of unequal lengths (xmin %ld, ymin %ld, xmax %ld, ymax %ld)",
                counts[0], counts[1], counts[2], counts[3]);
  out->num_boxes = counts[0] < IMAGE_MAX_BOXES ? (int)counts[0] : IMAGE_MAX_BOXES;
  return 0;
}

/* ---- encoding ---- */

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}
static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}
/* A length-delimited field's size with its tag (field numbers here are < 16: one byte). */
static size_t wrapped(size_t n) { return 1 + varint_size(n) + n; }

typedef struct feature_out {
  const char *key;
  int kind;
  const void *bytes; /* KIND_BYTES: one value */
  size_t nbytes;
  const int64_t *ints; /* KIND_INT64 */
  const float *floats; /* KIND_FLOAT */
  size_t count;        /* values of ints/floats */
} feature_out;

/* The packed numbers' bytes (ints/floats). */
static size_t packed_size(const feature_out *f) {
  size_t payload = 0;
  if (f->kind == KIND_FLOAT) payload = 4 * f->count;
  for (size_t i = 0; f->kind == KIND_INT64 && i < f->count; i++)
    payload += varint_size((uint64_t)f->ints[i]);
  return payload;
}
/* The list message (inside the Feature's field). */
static size_t list_size(const feature_out *f) {
  if (f->kind == KIND_BYTES) return wrapped(f->nbytes);
  return f->count ? wrapped(packed_size(f)) : 0; /* packed, as proto3 writes repeated numbers */
}
static size_t feature_size(const feature_out *f) { return wrapped(list_size(f)); }
static size_t entry_size(const feature_out *f) {
  return wrapped(strlen(f->key)) + wrapped(feature_size(f));
}

static uint8_t *put_feature_entry(uint8_t *p, const feature_out *f) {
  size_t klen = strlen(f->key);
  *p++ = 0x0a; /* Features.feature (1, bytes): a map entry */
  p = put_varint(p, entry_size(f));
  *p++ = 0x0a; /* MapEntry.key */
  p = put_varint(p, klen);
  memcpy(p, f->key, klen);
  p += klen;
  *p++ = 0x12; /* MapEntry.value: the Feature */
  p = put_varint(p, feature_size(f));
  *p++ = (uint8_t)(f->kind << 3 | WIRE_BYTES); /* bytes_list / float_list / int64_list */
  p = put_varint(p, list_size(f));
  if (f->kind == KIND_BYTES) {
    *p++ = 0x0a;
    p = put_varint(p, f->nbytes);
    if (f->nbytes) memcpy(p, f->bytes, f->nbytes);
    return p + f->nbytes;
  }
  if (!f->count) return p;
  *p++ = 0x0a; /* value, packed */
  p = put_varint(p, packed_size(f));
  for (size_t i = 0; i < f->count; i++) {
    if (f->kind == KIND_INT64) {
      p = put_varint(p, (uint64_t)f->ints[i]);
    } else {
      uint32_t bits;
      memcpy(&bits, &f->floats[i], 4);
      for (int b = 0; b < 4; b++) *p++ = (uint8_t)(bits >> (8 * b));
    }
  }
  return p;
}

int example_encode(const example_fields *in, uint8_t **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  size_t nb = in->num_boxes > 0 ? (size_t)in->num_boxes : 0;
  /* xmin, ymin, xmax, ymax lists and the per-box label list build_imagenet_data.py writes. */
  float *coords = malloc(4 * nb * sizeof *coords + 1);
  int64_t *box_labels = malloc(nb * sizeof *box_labels + 1);
  if (!coords || !box_labels) {
    free(coords);
    free(box_labels);
    return -1;
  }
  for (size_t i = 0; i < nb; i++) {
    coords[0 * nb + i] = in->boxes[i].xmin;
    coords[1 * nb + i] = in->boxes[i].ymin;
    coords[2 * nb + i] = in->boxes[i].xmax;
    coords[3 * nb + i] = in->boxes[i].ymax;
    box_labels[i] = in->label;
  }
  int64_t height = in->height, width = in->width, channels = in->channels, label = in->label;
#define BYTES(k, s) \
  { .key = k, .kind = KIND_BYTES, .bytes = (s) ? (s) : "", .nbytes = (s) ? strlen(s) : 0 }
#define INT(k, v) \
  { .key = k, .kind = KIND_INT64, .ints = &(v), .count = 1 }
  const feature_out features[] = {
      INT("image/height", height),
      INT("image/width", width),
      BYTES("image/colorspace", in->colorspace),
      INT("image/channels", channels),
      INT("image/class/label", label),
      BYTES("image/class/synset", in->synset),
      BYTES("image/class/text", in->text),
      {.key = "image/object/bbox/xmin", .kind = KIND_FLOAT, .floats = coords, .count = nb},
      {.key = "image/object/bbox/xmax", .kind = KIND_FLOAT, .floats = coords + 2 * nb, .count = nb},
      {.key = "image/object/bbox/ymin", .kind = KIND_FLOAT, .floats = coords + nb, .count = nb},
      {.key = "image/object/bbox/ymax", .kind = KIND_FLOAT, .floats = coords + 3 * nb, .count = nb},
      {.key = "image/object/bbox/label", .kind = KIND_INT64, .ints = box_labels, .count = nb},
      BYTES("image/format", "JPEG"),
      BYTES("image/filename", in->filename),
      {.key = "image/encoded", .kind = KIND_BYTES, .bytes = in->image, .nbytes = in->image_size},
  };
#undef BYTES
#undef INT
  enum { N = sizeof features / sizeof features[0] };
  size_t inner = 0;
  for (int i = 0; i < N; i++) inner += wrapped(entry_size(&features[i]));
  size_t total = wrapped(inner);
  uint8_t *buf = malloc(total);
  if (buf) {
    uint8_t *p = buf;
    *p++ = 0x0a; /* Example.features */
    p = put_varint(p, inner);
    for (int i = 0; i < N; i++) p = put_feature_entry(p, &features[i]);
    *out = buf;
    *out_size = (size_t)(p - buf);
  }
  free(coords);
  free(box_labels);
  return buf ? 0 : -1;
}

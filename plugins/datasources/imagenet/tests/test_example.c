/* test_example.c — the tf.Example decoder and encoder (plugins/datasources/imagenet/
 * example.c): bytes TensorFlow serialized decode to what TensorFlow put in; encode then
 * parse gives back every field; repeated numbers are read packed, unpacked and mixed;
 * unknown features and unknown fields (every wire type, at every nesting level) are
 * skipped; malformed inputs (truncations at every byte, lengths running past their
 * message, wrong wire types, wrong feature kinds, bbox lists of unequal lengths, a second
 * image) fail with a message saying what, and never read outside the record. */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"

/* TensorFlow 2.21: tf.train.Example(...).SerializeToString(deterministic=True) of
 * label 417, synset n02692877, height 375, width 500, colorspace RGB, two boxes
 * (xmin .125 .5, ymin .25 .0625, xmax .75 1, ymax .875 .5), bbox/label [417, 417] and a
 * 22-byte image/encoded. */
static const char tf_example_hex[] =
    "0a80030a1b0a11696d6167652f636c6173732f6c6162656c12061a040a02a1030a230a12696d6167652f63"
    "6c6173732f73796e736574120d0a0b0a096e30323639323837370a1b0a10696d6167652f636f6c6f727370"
    "61636512070a050a035247420a2b0a0d696d6167652f656e636f646564121a0a180a16ffd8ffe04a464946"
    "2d6973682062797465730001ffd90a160a0c696d6167652f68656967687412061a040a02f7020a230a1769"
    "6d6167652f6f626a6563742f62626f782f6c6162656c12081a060a04a103a1030a260a16696d6167652f6f"
    "626a6563742f62626f782f786d6178120c120a0a080000403f0000803f0a260a16696d6167652f6f626a65"
    "63742f62626f782f786d696e120c120a0a080000003e0000003f0a260a16696d6167652f6f626a6563742f"
    "62626f782f796d6178120c120a0a080000603f0000003f0a260a16696d6167652f6f626a6563742f62626f"
    "782f796d696e120c120a0a080000803e0000803d0a150a0b696d6167652f776964746812061a040a02f403";

static size_t unhex(const char *hex, uint8_t *out) {
  size_t n = strlen(hex) / 2;
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    out[i] = (uint8_t)v;
  }
  return n;
}

/* A small protobuf writer for hand-made records. */
typedef struct pb {
  uint8_t *p;
  size_t n, cap;
} pb;
static void put(pb *b, const void *data, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    ck_assert_ptr_nonnull(b->p);
  }
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
}
static void varint(pb *b, uint64_t v) {
  do {
    uint8_t c = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) c |= 0x80;
    put(b, &c, 1);
  } while (v);
}
static void tag(pb *b, uint32_t field, int wire) {
  varint(b, (uint64_t)field << 3 | (unsigned)wire);
}
static void field_bytes(pb *b, uint32_t field, const void *data, size_t n) {
  tag(b, field, 2);
  varint(b, n);
  put(b, data, n);
}
static void field_msg(pb *b, uint32_t field, pb *inner) { /* consumes inner */
  field_bytes(b, field, inner->p, inner->n);
  free(inner->p);
  *inner = (pb){0};
}
static void fixed32(pb *b, uint32_t field, float f) {
  tag(b, field, 5);
  uint8_t raw[4];
  memcpy(raw, &f, 4);
  put(b, raw, 4); /* little-endian hosts only: these tests run on x86-64 and arm64 */
}
/* Features entry key -> feature (consumes feature). */
static void entry(pb *features, const char *key, pb *feature) {
  pb e = {0};
  field_bytes(&e, 1, key, strlen(key));
  field_msg(&e, 2, feature);
  field_msg(features, 1, &e);
}
static pb bytes_feature(const void *data, size_t n) {
  pb list = {0}, f = {0};
  field_bytes(&list, 1, data, n);
  field_msg(&f, 1, &list);
  return f;
}
static pb int64_feature_unpacked(const int64_t *v, size_t n) {
  pb list = {0}, f = {0};
  for (size_t i = 0; i < n; i++) {
    tag(&list, 1, 0);
    varint(&list, (uint64_t)v[i]);
  }
  field_msg(&f, 3, &list);
  return f;
}
static pb float_feature_unpacked(const float *v, size_t n) {
  pb list = {0}, f = {0};
  for (size_t i = 0; i < n; i++) fixed32(&list, 1, v[i]);
  field_msg(&f, 2, &list);
  return f;
}
static pb float_feature_packed(const float *v, size_t n) {
  pb list = {0}, f = {0}, packed = {0};
  for (size_t i = 0; i < n; i++) put(&packed, &v[i], 4);
  field_msg(&list, 1, &packed);
  field_msg(&f, 2, &list);
  return f;
}
static pb example_of(pb *features) {
  pb ex = {0};
  field_msg(&ex, 1, features);
  return ex;
}

static const uint8_t jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5, 0xff, 0xd9};

START_TEST(parses_tensorflow_bytes) {
  uint8_t buf[512];
  size_t n = unhex(tf_example_hex, buf);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(buf, n, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert(ex.has_label);
  ck_assert_int_eq(ex.label, 417);
  ck_assert_uint_eq(ex.image_size, 22);
  ck_assert(ex.image > buf && ex.image + ex.image_size <= buf + n); /* zero-copy */
  ck_assert_int_eq(memcmp(ex.image, "\xff\xd8\xff\xe0JFIF-ish bytes\x00\x01\xff\xd9", 22), 0);
  ck_assert_int_eq(ex.num_boxes, 2);
  const image_box want[2] = {{.ymin = .25f, .xmin = .125f, .ymax = .875f, .xmax = .75f},
                             {.ymin = .0625f, .xmin = .5f, .ymax = .5f, .xmax = 1.f}};
  for (int i = 0; i < 2; i++) {
    ck_assert_float_eq(ex.boxes[i].ymin, want[i].ymin);
    ck_assert_float_eq(ex.boxes[i].xmin, want[i].xmin);
    ck_assert_float_eq(ex.boxes[i].ymax, want[i].ymax);
    ck_assert_float_eq(ex.boxes[i].xmax, want[i].xmax);
  }
}
END_TEST

START_TEST(encode_round_trip) {
  image_box boxes[3] = {{0.1f, 0.2f, 0.3f, 0.4f}, {0.f, 0.f, 1.f, 1.f}, {0.5f, 0.25f, 0.75f, 0.5f}};
  for (int nb = 0; nb <= 3; nb++) {
    example_fields in = {.image = jpeg,
                         .image_size = sizeof jpeg,
                         .label = 1000,
                         .synset = "n15075141",
                         .text = "toilet tissue",
                         .filename = "x.JPEG",
                         .colorspace = "RGB",
                         .height = 333,
                         .width = 500,
                         .channels = 3,
                         .boxes = boxes,
                         .num_boxes = nb};
    uint8_t *rec;
    size_t size;
    ck_assert_int_eq(example_encode(&in, &rec, &size), 0);
    /* The encoder's fields are where protobuf puts them: the synset's and filename's
     * bytes appear as written. */
    ck_assert_ptr_nonnull(memmem(rec, size, "image/class/synset", 18));
    ck_assert_ptr_nonnull(memmem(rec, size, "n15075141", 9));
    ck_assert_ptr_nonnull(memmem(rec, size, "image/object/bbox/label", 23));
    example_view ex;
    char err[256];
    ck_assert_msg(example_parse(rec, size, &ex, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(ex.label, 1000);
    ck_assert(ex.has_label);
    ck_assert_uint_eq(ex.image_size, sizeof jpeg);
    ck_assert_int_eq(memcmp(ex.image, jpeg, sizeof jpeg), 0);
    ck_assert(ex.image >= rec && ex.image + ex.image_size <= rec + size);
    ck_assert_int_eq(ex.num_boxes, nb);
    for (int i = 0; i < nb; i++)
      ck_assert_int_eq(memcmp(&ex.boxes[i], &boxes[i], sizeof boxes[i]), 0);
    /* Every proper prefix is malformed (image/encoded comes last), and says so. */
    for (size_t cut = 0; cut < size; cut++) {
      uint8_t *prefix = malloc(cut + 1); /* exact size: ASan sees a read past it */
      if (cut) memcpy(prefix, rec, cut);
      err[0] = 0;
      ck_assert_msg(example_parse(prefix, cut, &ex, err, sizeof err) == -1, "prefix %zu parsed",
                    cut);
      ck_assert_msg(strncmp(err, "tf.Example: ", 12) == 0, "prefix %zu: '%s'", cut, err);
      free(prefix);
    }
    free(rec);
  }
}
END_TEST

START_TEST(encode_edge_values) {
  /* A large label and empty strings still round trip; negative numbers take 10 bytes. */
  example_fields in = {.image = jpeg,
                       .image_size = sizeof jpeg,
                       .label = -5,
                       .height = 1,
                       .width = 1 << 20,
                       .channels = 1};
  uint8_t *rec;
  size_t size;
  ck_assert_int_eq(example_encode(&in, &rec, &size), 0);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(rec, size, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(ex.label, -5);
  ck_assert_int_eq(ex.num_boxes, 0);
  free(rec);
}
END_TEST

START_TEST(unpacked_and_mixed) {
  pb features = {0}, f;
  f = bytes_feature(jpeg, sizeof jpeg);
  entry(&features, "image/encoded", &f);
  int64_t label = 7;
  f = int64_feature_unpacked(&label, 1);
  entry(&features, "image/class/label", &f);
  float xmin[2] = {0.1f, 0.2f}, ymin[2] = {0.3f, 0.4f}, xmax[2] = {0.5f, 0.6f},
        ymax[2] = {0.7f, 0.8f};
  f = float_feature_unpacked(xmin, 2);
  entry(&features, "image/object/bbox/xmin", &f);
  f = float_feature_packed(ymin, 2);
  entry(&features, "image/object/bbox/ymin", &f);
  /* xmax: one packed run and one unpacked value, which protobuf concatenates. */
  pb list = {0}, packed = {0};
  put(&packed, &xmax[0], 4);
  field_msg(&list, 1, &packed);
  fixed32(&list, 1, xmax[1]);
  f = (pb){0};
  field_msg(&f, 2, &list);
  entry(&features, "image/object/bbox/xmax", &f);
  f = float_feature_unpacked(ymax, 2);
  entry(&features, "image/object/bbox/ymax", &f);
  pb ex_pb = example_of(&features);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(ex_pb.p, ex_pb.n, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(ex.label, 7);
  ck_assert_int_eq(ex.num_boxes, 2);
  for (int i = 0; i < 2; i++) {
    ck_assert_float_eq(ex.boxes[i].xmin, xmin[i]);
    ck_assert_float_eq(ex.boxes[i].ymin, ymin[i]);
    ck_assert_float_eq(ex.boxes[i].xmax, xmax[i]);
    ck_assert_float_eq(ex.boxes[i].ymax, ymax[i]);
  }
  free(ex_pb.p);
}
END_TEST

/* Unknown fields of each wire type, added to a message. */
static void junk(pb *b) {
  tag(b, 9, 0);
  varint(b, 1234567);
  tag(b, 10, 1);
  put(b, "12345678", 8);
  tag(b, 11, 5);
  put(b, "1234", 4);
  field_bytes(b, 12, "whatever", 8);
  tag(b, 536870911, 0); /* the largest field number */
  varint(b, 0);
}

START_TEST(skips_unknown) {
  pb features = {0}, f;
  junk(&features);
  int64_t other = 99;
  f = int64_feature_unpacked(&other, 1);
  entry(&features, "image/class/label_ext", &f); /* a key with a wanted key as prefix */
  f = bytes_feature("text", 4);
  entry(&features, "image/class/text", &f);
  /* image/encoded with junk in its Feature and its BytesList. */
  pb list = {0};
  junk(&list);
  field_bytes(&list, 1, jpeg, sizeof jpeg);
  junk(&list);
  f = (pb){0};
  junk(&f);
  field_msg(&f, 1, &list);
  junk(&f);
  /* and in its map entry */
  pb e = {0};
  junk(&e);
  field_bytes(&e, 1, "image/encoded", 13);
  field_msg(&e, 2, &f);
  junk(&e);
  field_msg(&features, 1, &e);
  /* An empty label feature (no kind): not a label. */
  f = (pb){0};
  entry(&features, "image/class/label", &f);
  pb ex_pb = {0};
  junk(&ex_pb);
  field_msg(&ex_pb, 1, &features);
  junk(&ex_pb);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(ex_pb.p, ex_pb.n, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert_uint_eq(ex.image_size, sizeof jpeg);
  ck_assert_int_eq(memcmp(ex.image, jpeg, sizeof jpeg), 0);
  ck_assert(!ex.has_label);
  ck_assert_int_eq(ex.num_boxes, 0);
  free(ex_pb.p);
}
END_TEST

START_TEST(last_duplicate_wins) {
  /* A key given twice: protobuf's map keeps the last. */
  pb features = {0}, f;
  f = bytes_feature("first", 5);
  entry(&features, "image/encoded", &f);
  f = bytes_feature(jpeg, sizeof jpeg);
  entry(&features, "image/encoded", &f);
  pb ex_pb = example_of(&features);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(ex_pb.p, ex_pb.n, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert_uint_eq(ex.image_size, sizeof jpeg);
  free(ex_pb.p);
}
END_TEST

START_TEST(caps_boxes) {
  enum { N = IMAGE_MAX_BOXES + 10 };
  float v[N];
  for (int i = 0; i < N; i++) v[i] = (float)i / N;
  pb features = {0}, f;
  f = bytes_feature(jpeg, sizeof jpeg);
  entry(&features, "image/encoded", &f);
  const char *keys[4] = {"image/object/bbox/xmin", "image/object/bbox/ymin",
                         "image/object/bbox/xmax", "image/object/bbox/ymax"};
  for (int k = 0; k < 4; k++) {
    f = float_feature_packed(v, N);
    entry(&features, keys[k], &f);
  }
  pb ex_pb = example_of(&features);
  example_view ex;
  char err[256];
  ck_assert_msg(example_parse(ex_pb.p, ex_pb.n, &ex, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(ex.num_boxes, IMAGE_MAX_BOXES);
  ck_assert_float_eq(ex.boxes[IMAGE_MAX_BOXES - 1].xmin, v[IMAGE_MAX_BOXES - 1]);
  free(ex_pb.p);
}
END_TEST

/* Malformed records: each built here, each with the message it must give. */
typedef pb (*build_fn)(void);
static pb with_image(pb *features) {
  pb f = bytes_feature(jpeg, sizeof jpeg);
  entry(features, "image/encoded", &f);
  return example_of(features);
}
static pb no_image(void) {
  pb features = {0};
  int64_t l = 3;
  pb f = int64_feature_unpacked(&l, 1);
  entry(&features, "image/class/label", &f);
  return example_of(&features);
}
static pb two_images(void) {
  pb features = {0}, list = {0}, f = {0};
  field_bytes(&list, 1, jpeg, sizeof jpeg);
  field_bytes(&list, 1, jpeg, sizeof jpeg);
  field_msg(&f, 1, &list);
  entry(&features, "image/encoded", &f);
  return example_of(&features);
}
static pb image_as_int64(void) {
  pb features = {0};
  int64_t l = 3;
  pb f = int64_feature_unpacked(&l, 1);
  entry(&features, "image/encoded", &f);
  return example_of(&features);
}
static pb label_as_float(void) {
  pb features = {0};
  float l = 3;
  pb f = float_feature_unpacked(&l, 1);
  entry(&features, "image/class/label", &f);
  return with_image(&features);
}
static pb two_labels(void) {
  pb features = {0};
  int64_t l[2] = {3, 4};
  pb f = int64_feature_unpacked(l, 2);
  entry(&features, "image/class/label", &f);
  return with_image(&features);
}
static pb unequal_boxes(void) {
  pb features = {0}, f;
  float v[3] = {0.1f, 0.2f, 0.3f};
  const char *keys[4] = {"image/object/bbox/xmin", "image/object/bbox/ymin",
                         "image/object/bbox/xmax", "image/object/bbox/ymax"};
  for (int k = 0; k < 4; k++) {
    f = float_feature_packed(v, k == 2 ? 2 : 3);
    entry(&features, keys[k], &f);
  }
  return with_image(&features);
}
static pb missing_box_list(void) {
  pb features = {0};
  float v = 0.5f;
  pb f = float_feature_packed(&v, 1);
  entry(&features, "image/object/bbox/xmin", &f);
  return with_image(&features);
}
static pb packed_float_ragged(void) {
  pb features = {0}, list = {0}, f = {0};
  field_bytes(&list, 1, "123456", 6);
  field_msg(&f, 2, &list);
  entry(&features, "image/object/bbox/ymin", &f);
  return with_image(&features);
}
static pb packed_varint_truncated(void) {
  pb features = {0}, list = {0}, f = {0};
  field_bytes(&list, 1, "\x05\x85", 2);
  field_msg(&f, 3, &list);
  entry(&features, "image/class/label", &f);
  return with_image(&features);
}
static pb length_past_end(void) {
  pb ex = {0};
  tag(&ex, 1, 2);
  varint(&ex, 1000);
  put(&ex, "abc", 3);
  return ex;
}
static pb huge_length(void) {
  pb ex = {0};
  tag(&ex, 1, 2);
  varint(&ex, UINT64_MAX);
  return ex;
}
static pb group_wire_type(void) {
  pb features = {0};
  tag(&features, 5, 3);
  return with_image(&features);
}
static pb features_wrong_wire(void) {
  pb ex = {0};
  tag(&ex, 1, 0);
  varint(&ex, 5);
  return ex;
}
static pb overlong_varint(void) {
  pb ex = {0};
  tag(&ex, 9, 0);
  put(&ex, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
  return ex;
}
static pb field_zero(void) {
  pb ex = {0};
  tag(&ex, 0, 0);
  varint(&ex, 1);
  return ex;
}
static pb value_wrong_wire(void) {
  pb features = {0}, e = {0};
  field_bytes(&e, 1, "image/encoded", 13);
  tag(&e, 2, 0);
  varint(&e, 1);
  field_msg(&features, 1, &e);
  return example_of(&features);
}
static pb empty_record(void) { return (pb){0}; }

static const struct {
  build_fn build;
  const char *want;
} malformed[] = {
    {no_image, "no image/encoded"},
    {empty_record, "no image/encoded"},
    {two_images, "image/encoded has 2 values, expected 1"},
    {image_as_int64, "feature image/encoded is an int64_list, expected a bytes_list"},
    {label_as_float, "feature image/class/label is a float_list, expected an int64_list"},
    {two_labels, "image/class/label has 2 values, expected 1"},
    {unequal_boxes, "bounding box lists of unequal lengths (xmin 3, ymin 3, xmax 2, ymax 3)"},
    {missing_box_list, "bounding box lists of unequal lengths (xmin 1, ymin 0, xmax 0, ymax 0)"},
    {packed_float_ragged, "packed floats of 6 bytes (not a multiple of 4)"},
    {packed_varint_truncated, "truncated packed varint"},
    {length_past_end, "length 1000 runs past its message (3 bytes left)"},
    {huge_length, "runs past its message"},
    {group_wire_type, "unsupported wire type 3"},
    {features_wrong_wire, "Example.features has wire type 0, expected 2"},
    {overlong_varint, "field 9 at byte 0: truncated varint"},
    {field_zero, "invalid field number 0 at byte 0"},
    {value_wrong_wire, "value at byte"},
};

START_TEST(rejects_malformed) {
  pb rec = malformed[_i].build();
  uint8_t *exact = malloc(rec.n + 1);
  if (rec.n) memcpy(exact, rec.p, rec.n);
  example_view ex;
  char err[256] = "";
  ck_assert_int_eq(example_parse(exact, rec.n, &ex, err, sizeof err), -1);
  ck_assert_msg(strstr(err, malformed[_i].want), "case %d: got \"%s\", want \"%s\"", _i, err,
                malformed[_i].want);
  ck_assert_msg(strncmp(err, "tf.Example: ", 12) == 0, "%s", err);
  free(exact);
  free(rec.p);
}
END_TEST

START_TEST(small_error_buffer) {
  /* A short err buffer is filled and terminated, never overrun. */
  char err[8];
  memset(err, 'x', sizeof err);
  example_view ex;
  ck_assert_int_eq(example_parse((const uint8_t *)"\x08", 1, &ex, err, 5), -1);
  ck_assert_int_eq(err[4], 0);
  ck_assert_int_eq(err[5], 'x');
  ck_assert_int_eq(example_parse((const uint8_t *)"\x08", 1, &ex, NULL, 0), -1);
  ck_assert_int_eq(example_parse(NULL, 0, &ex, err, sizeof err), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("example");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, parses_tensorflow_bytes);
  tcase_add_test(tc, encode_round_trip);
  tcase_add_test(tc, encode_edge_values);
  tcase_add_test(tc, unpacked_and_mixed);
  tcase_add_test(tc, skips_unknown);
  tcase_add_test(tc, last_duplicate_wins);
  tcase_add_test(tc, caps_boxes);
  tcase_add_loop_test(tc, rejects_malformed, 0, (int)(sizeof malformed / sizeof malformed[0]));
  tcase_add_test(tc, small_error_buffer);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

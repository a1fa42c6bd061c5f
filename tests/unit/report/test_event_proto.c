/* test_event_proto.c — TensorBoard's Event protobufs as report/event_proto.c encodes them,
 * byte for byte against protobuf's own encoding, and an events file as
 * report/event_file.c writes it: TFRecord records (read back with common/tfrecord's
 * reader, both CRCs checked) holding file_version first, a new file name every time
 * (never an existing file replaced), and a refusal naming the flag and the path.
 * cli_tensorboard reads whole runs' files with TensorBoard itself.
 *
 * The expected bytes were printed by protobuf 7.36 (Python) through tensorboard 2.21's
 * own copy of event.proto:
 *   from tensorboard.compat.proto import event_pb2
 *   e = event_pb2.Event(wall_time=2.0, step=7)
 *   e.summary.value.add(tag="total_loss", simple_value=6.5); ...
 *   e.SerializeToString() */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <tfrecord/tfrecord.h>

#include "base/host_ctx.h"
#include "report/event_file.h"
#include "report/event_proto.h"

static void assert_bytes(const cnnb_pb *pb, const uint8_t *want, size_t size) {
  ck_assert(!pb->failed);
  ck_assert_uint_eq(pb->size, size);
  for (size_t i = 0; i < size; i++)
    ck_assert_msg(pb->data[i] == want[i], "byte %zu: 0x%02x, want 0x%02x", i, pb->data[i], want[i]);
}

START_TEST(file_version_as_protobuf) {
  static const uint8_t want[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8,
                                 0x3f, 0x1a, 0x0d, 0x62, 0x72, 0x61, 0x69, 0x6e,
                                 0x2e, 0x45, 0x76, 0x65, 0x6e, 0x74, 0x3a, 0x32};
  cnnb_pb pb = {0};
  ck_assert_int_eq(cnnb_event_encode_file_version(&pb, 1.5), 0);
  assert_bytes(&pb, want, sizeof want);
  cnnb_pb_free(&pb);
}
END_TEST

START_TEST(session_start_as_protobuf) {
  /* wall_time 1796181249.25, step 300 (a two-byte varint), session_log {status: START}. */
  static const uint8_t want[] = {0x09, 0x00, 0x00, 0x50, 0x40, 0xe3, 0xc3, 0xda,
                                 0x41, 0x10, 0xac, 0x02, 0x3a, 0x02, 0x08, 0x01};
  cnnb_pb pb = {0};
  ck_assert_int_eq(cnnb_event_encode_session_start(&pb, 1796181249.25, 300), 0);
  assert_bytes(&pb, want, sizeof want);
  cnnb_pb_free(&pb);
  /* Step 0 and wall time 0 are left out, as proto3 leaves out defaults. */
  static const uint8_t zero[] = {0x3a, 0x02, 0x08, 0x01};
  ck_assert_int_eq(cnnb_event_encode_session_start(&pb, 0.0, 0), 0);
  assert_bytes(&pb, zero, sizeof zero);
  cnnb_pb_free(&pb);
}
END_TEST

START_TEST(scalars_as_protobuf) {
  static const uint8_t want[] = {
      0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x10, 0x07, 0x2a, 0x2b, 0x0a,
      0x11, 0x0a, 0x0a, 0x74, 0x6f, 0x74, 0x61, 0x6c, 0x5f, 0x6c, 0x6f, 0x73, 0x73, 0x15,
      0x00, 0x00, 0xd0, 0x40, 0x0a, 0x16, 0x0a, 0x0f, 0x65, 0x76, 0x61, 0x6c, 0x2f, 0x41,
      0x63, 0x63, 0x75, 0x72, 0x61, 0x63, 0x79, 0x40, 0x31, 0x15, 0x00, 0x00, 0x80, 0x3e};
  cnnb_event_scalar v[] = {{"total_loss", 6.5}, {"eval/Accuracy@1", 0.25}};
  cnnb_pb pb = {0};
  ck_assert_int_eq(cnnb_event_encode_scalars(&pb, 2.0, 7, v, 2), 0);
  assert_bytes(&pb, want, sizeof want);
  cnnb_pb_free(&pb);
  /* No scalars: an empty summary, still present. */
  static const uint8_t empty[] = {0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x08, 0x40, 0x10, 0x05, 0x2a, 0x00};
  ck_assert_int_eq(cnnb_event_encode_scalars(&pb, 3.0, 5, NULL, 0), 0);
  assert_bytes(&pb, empty, sizeof empty);
  cnnb_pb_free(&pb);
}
END_TEST

START_TEST(varints_as_protobuf) {
  /* A negative int64 is ten bytes (Event(step=-1): 0x10 then these). */
  static const uint8_t minus_one[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  cnnb_pb pb = {0};
  cnnb_pb_varint(&pb, (uint64_t)(int64_t)-1);
  assert_bytes(&pb, minus_one, sizeof minus_one);
  cnnb_pb_free(&pb);
  static const uint8_t small[] = {0x00, 0x7f, 0x80, 0x01, 0xac, 0x02};
  cnnb_pb_varint(&pb, 0);
  cnnb_pb_varint(&pb, 127);
  cnnb_pb_varint(&pb, 128);
  cnnb_pb_varint(&pb, 300);
  assert_bytes(&pb, small, sizeof small);
  cnnb_pb_free(&pb);
}
END_TEST

static char dir[256];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/cnnb_test_event_proto.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ctx = cnnb_ctx_create("test", NULL);
  ck_assert_ptr_nonnull(ctx);
}

static void teardown(void) {
  char command[512];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(command), 0);
  cnnb_ctx_destroy(ctx);
}

/* The records of `path` re-encoded for comparison: their count, the first one's bytes. */
static int count_records(const char *path, cnnb_pb *first) {
  tfrecord_reader *r;
  char err[256];
  ck_assert_int_eq(tfrecord_open(path, &r, err, sizeof err), TFRECORD_OK);
  const uint8_t *data;
  size_t size;
  int n = 0;
  tfrecord_result res;
  while ((res = tfrecord_next(r, &data, &size, err, sizeof err)) == TFRECORD_OK) {
    if (n++ == 0 && first) {
      first->data = malloc(size);
      memcpy(first->data, data, size);
      first->size = size;
    }
  }
  ck_assert_msg(res == TFRECORD_END, "%s", err);
  tfrecord_close(r);
  return n;
}

START_TEST(file_of_records_never_replaced) {
  char sub[320];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  cnnb_event_file *f = NULL, *g = NULL;
  ck_assert_int_eq(cnnb_event_file_open(ctx, "--train_dir=x", sub, &f), CNNB_OK);
  ck_assert_int_eq(cnnb_event_file_open(ctx, "--train_dir=x", sub, &g), CNNB_OK);
  char path[512], other[512];
  snprintf(path, sizeof path, "%s", cnnb_event_file_path(f));
  snprintf(other, sizeof other, "%s", cnnb_event_file_path(g));
  /* TensorFlow's name, and another one for the second file of the same second. */
  char prefix[400];
  snprintf(prefix, sizeof prefix, "%s/events.out.tfevents.", sub);
  ck_assert(strncmp(path, prefix, strlen(prefix)) == 0);
  ck_assert_str_ne(path, other);
  cnnb_event_scalar v[] = {{"total_loss", 1.0}};
  ck_assert_int_eq(cnnb_event_file_session_start(f, 0), CNNB_OK);
  ck_assert_int_eq(cnnb_event_file_scalars(f, 3, v, 1), CNNB_OK);
  /* Flushed as written: readable before the file is closed. */
  cnnb_pb first = {0};
  ck_assert_int_eq(count_records(path, &first), 3);
  cnnb_pb want = {0};
  /* The first record is the file_version event (its wall time is now: compare the rest). */
  ck_assert_int_eq(cnnb_event_encode_file_version(&want, 1.0), 0);
  ck_assert_uint_eq(first.size, want.size);
  ck_assert(memcmp(first.data + 9, want.data + 9, want.size - 9) == 0);
  cnnb_pb_free(&first);
  cnnb_pb_free(&want);
  ck_assert_int_eq(cnnb_event_file_close(f), CNNB_OK);
  ck_assert_int_eq(cnnb_event_file_close(g), CNNB_OK);
  ck_assert_int_eq(count_records(path, NULL), 3);
  ck_assert_int_eq(count_records(other, NULL), 1);
}
END_TEST

START_TEST(unwritable_directory_named) {
  char file[320], under[400];
  snprintf(file, sizeof file, "%s/regular", dir);
  FILE *f = fopen(file, "w");
  ck_assert_ptr_nonnull(f);
  fclose(f);
  snprintf(under, sizeof under, "%s/train", file);
  cnnb_event_file *ev = (cnnb_event_file *)1;
  ck_assert_int_eq(cnnb_event_file_open(ctx, "--train_dir=T", under, &ev), CNNB_EIO);
  ck_assert_ptr_null(ev);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(strstr(msg, "--train_dir=T: ") && strstr(msg, file), "%s", msg);
}
END_TEST

int main(void) {
  Suite *s = suite_create("event_proto");
  TCase *tc = tcase_create("encoding");
  tcase_add_test(tc, file_version_as_protobuf);
  tcase_add_test(tc, session_start_as_protobuf);
  tcase_add_test(tc, scalars_as_protobuf);
  tcase_add_test(tc, varints_as_protobuf);
  suite_add_tcase(s, tc);
  TCase *files = tcase_create("files");
  tcase_add_checked_fixture(files, setup, teardown);
  tcase_add_test(files, file_of_records_never_replaced);
  tcase_add_test(files, unwritable_directory_named);
  suite_add_tcase(s, files);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

/* test_tfrecord.c — the TFRecord framing (common/tfrecord: crc32c.c, tfrecord.c)
 * that the imagenet datasource and the core's event files share: CRC-32C against the standard
 * vectors and TensorFlow's own bytes, the SSE4.2 and table paths agreeing at every length and
 * alignment; records written and read back (through the parser and through the file reader with
 * records larger than its read chunk and straddling chunk boundaries); a flipped data byte (its
 * length's CRC intact) reported as BAD_DATA with the record's byte offset, that record alone lost
 * and the next one read; and each damage to the framing — a flipped length byte, a header or data
 * cut short, an impossible length — reported as CORRUPT with the record's byte offset (and the file
 * name from the reader), never read past or allocated for. The reader over a file's bytes in memory
 * (tfrecord_open_memory) reads, skips and fails as the file reader does. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tfrecord/crc32c.h>
#include <tfrecord/tfrecord.h>

/* TensorFlow 2.21's tf.io.TFRecordWriter writing b"" then b"hello". */
static const uint8_t tf_records[] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, 0x03,
                                     0x98, 0x07, 0xd8, 0xea, 0x82, 0xa2, 0x05, 0x00, 0x00, 0x00,
                                     0x00, 0x00, 0x00, 0x00, 0xea, 0xb2, 0x04, 0x3e, 0x68, 0x65,
                                     0x6c, 0x6c, 0x6f, 0xbb, 0x1f, 0x1c, 0x19};

static char dir[256];
static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_tfrecord.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, size, f), size);
  ck_assert_int_eq(fclose(f), 0);
}
static uint8_t *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc((size_t)n + 1);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

START_TEST(crc_vectors) {
  /* RFC 3720 (iSCSI) B.4 and TensorFlow's crc32c_test.cc StandardResults. */
  uint8_t buf[32];
  ck_assert_uint_eq(crc32c("123456789", 9), 0xe3069283u);
  memset(buf, 0, 32);
  ck_assert_uint_eq(crc32c(buf, 32), 0x8a9136aau);
  memset(buf, 0xff, 32);
  ck_assert_uint_eq(crc32c(buf, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  ck_assert_uint_eq(crc32c(buf, 32), 0x46dd794eu);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  ck_assert_uint_eq(crc32c(buf, 32), 0x113fdb5cu);
  ck_assert_uint_eq(crc32c("", 0), 0);
  /* Extending continues a CRC (crc32c_test.cc Extend). */
  ck_assert_uint_eq(crc32c_extend(crc32c("hello ", 6), "world", 5), crc32c("hello world", 11));
  /* Masked: the CRCs in TensorFlow's own file (the length 0, the empty data, "hello"). */
  uint8_t zero8[8] = {0};
  ck_assert_uint_eq(crc32c_mask(crc32c(zero8, 8)), 0x07980329u);
  ck_assert_uint_eq(crc32c_mask(crc32c("", 0)), 0xa282ead8u);
  ck_assert_uint_eq(crc32c_mask(crc32c("hello", 5)), 0x191c1fbbu);
  ck_assert_uint_ne(crc32c_mask(crc32c("foo", 3)), crc32c("foo", 3));
}
END_TEST

START_TEST(crc_paths_agree) {
  enum { N = 1100 };
  uint8_t *buf = malloc(N + 16);
  uint32_t seed = 12345;
  for (int i = 0; i < N + 16; i++) {
    seed = seed * 1103515245u + 12345u;
    buf[i] = (uint8_t)(seed >> 16);
  }
  for (size_t off = 0; off < 8; off++)
    for (size_t n = 0; n <= N; n += (n < 80 ? 1 : 37)) {
      uint32_t fast = crc32c(buf + off, n), slow = crc32c_extend_portable(0, buf + off, n);
      ck_assert_msg(fast == slow, "offset %zu length %zu: %08x vs %08x", off, n, fast, slow);
      size_t half = n / 3;
      ck_assert_uint_eq(crc32c_extend(crc32c(buf + off, half), buf + off + half, n - half), fast);
    }
  free(buf);
}
END_TEST

START_TEST(reads_tensorflow_bytes) {
  size_t pos = 0, size;
  const uint8_t *data;
  char err[256];
  ck_assert_int_eq(tfrecord_parse(tf_records, sizeof tf_records, &pos, &data, &size, err,
                                  sizeof err),
                   TFRECORD_OK);
  ck_assert_uint_eq(size, 0);
  ck_assert_int_eq(tfrecord_parse(tf_records, sizeof tf_records, &pos, &data, &size, err,
                                  sizeof err),
                   TFRECORD_OK);
  ck_assert_uint_eq(size, 5);
  ck_assert_int_eq(memcmp(data, "hello", 5), 0);
  ck_assert_int_eq(tfrecord_parse(tf_records, sizeof tf_records, &pos, &data, &size, err,
                                  sizeof err),
                   TFRECORD_END);
  /* The writer produces the same bytes. */
  char path[300];
  snprintf(path, sizeof path, "%s/w", dir);
  tfrecord_writer *w;
  ck_assert_int_eq(tfrecord_writer_open(path, &w, err, sizeof err), 0);
  ck_assert_int_eq(tfrecord_write(w, "", 0, err, sizeof err), 0);
  ck_assert_int_eq(tfrecord_write(w, "hello", 5, err, sizeof err), 0);
  ck_assert_int_eq(tfrecord_writer_close(w, err, sizeof err), 0);
  size_t n;
  uint8_t *bytes = read_all(path, &n);
  ck_assert_uint_eq(n, sizeof tf_records);
  ck_assert_int_eq(memcmp(bytes, tf_records, n), 0);
  free(bytes);
}
END_TEST

/* Record i's content: its index and length woven in, so a misplaced byte shows. */
static uint8_t pattern(size_t i, size_t k) { return (uint8_t)(i * 131 + k * 7 + (k >> 9)); }

static size_t write_records(const char *path, const size_t *sizes, size_t count) {
  char err[256];
  tfrecord_writer *w;
  ck_assert_int_eq(tfrecord_writer_open(path, &w, err, sizeof err), 0);
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    uint8_t *buf = malloc(sizes[i] + 1);
    for (size_t k = 0; k < sizes[i]; k++) buf[k] = pattern(i, k);
    ck_assert_int_eq(tfrecord_write(w, buf, sizes[i], err, sizeof err), 0);
    free(buf);
    total += 16 + sizes[i];
  }
  ck_assert_int_eq(tfrecord_writer_close(w, err, sizeof err), 0);
  return total;
}

static void check_record(size_t i, const uint8_t *data, size_t size, size_t want) {
  ck_assert_uint_eq(size, want);
  for (size_t k = 0; k < size; k++)
    if (data[k] != pattern(i, k)) ck_abort_msg("record %zu byte %zu differs", i, k);
}

START_TEST(reader_across_chunks) {
  /* The reader reads 1 MiB at a time: records end just before, at and after a chunk's end,
   * and some are several chunks long (the buffer grows). */
  const size_t M = 1 << 20;
  size_t sizes[] = {0, 1,  100, M - 16 - 117, 5,    M - 1,     M, M + 1, 3 * M + 17,
                    0, 12, 4,   2 * M,        1000, 64 * 1024, 1};
  size_t count = sizeof sizes / sizeof sizes[0];
  char path[300], err[512];
  snprintf(path, sizeof path, "%s/big", dir);
  size_t total = write_records(path, sizes, count);
  tfrecord_reader *r;
  ck_assert_int_eq(tfrecord_open(path, &r, err, sizeof err), TFRECORD_OK);
  const uint8_t *data;
  size_t size;
  for (size_t i = 0; i < count; i++) {
    ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_OK);
    check_record(i, data, size, sizes[i]);
  }
  ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_END);
  ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_END);
  tfrecord_close(r);
  /* The same through the pure parser over the whole file. */
  size_t n, pos = 0;
  uint8_t *buf = read_all(path, &n);
  ck_assert_uint_eq(n, total);
  for (size_t i = 0; i < count; i++) {
    ck_assert_int_eq(tfrecord_parse(buf, n, &pos, &data, &size, err, sizeof err), TFRECORD_OK);
    check_record(i, data, size, sizes[i]);
  }
  ck_assert_int_eq(tfrecord_parse(buf, n, &pos, &data, &size, err, sizeof err), TFRECORD_END);
  free(buf);
}
END_TEST

START_TEST(skip_across_chunks) {
  /* Skipping reads headers only: records inside the buffer, past its end, several chunks
   * long; reads after skips start at the right byte (tfrecord_offset) and read right. */
  const size_t M = 1 << 20;
  size_t sizes[] = {0, 1,  100, M - 16 - 117, 5,    M - 1,     M, M + 1, 3 * M + 17,
                    0, 12, 4,   2 * M,        1000, 64 * 1024, 1};
  size_t count = sizeof sizes / sizeof sizes[0];
  char path[300], err[512];
  snprintf(path, sizeof path, "%s/big", dir);
  size_t total = write_records(path, sizes, count);
  size_t n;
  uint8_t *bytes = read_all(path, &n);
  /* Patterns 4..7: the same over the file's bytes in memory (tfrecord_open_memory). */
  for (int pattern_bits = 0; pattern_bits < 8; pattern_bits++) {
    tfrecord_reader *r;
    ck_assert_int_eq(pattern_bits >= 4 ? tfrecord_open_memory(path, bytes, n, &r, err, sizeof err)
                                       : tfrecord_open(path, &r, err, sizeof err),
                     TFRECORD_OK);
    uint64_t offset = 0;
    for (size_t i = 0; i < count; i++) {
      ck_assert_uint_eq(tfrecord_offset(r), offset);
      /* 0: skip all; 1: read all; 2: skip odd ones; 3: skip even ones. */
      int bits = pattern_bits % 4;
      int skip = bits == 0 || (bits == 2 && i % 2) || (bits == 3 && !(i % 2));
      if (skip) {
        ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_OK);
      } else {
        const uint8_t *data;
        size_t size;
        ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_OK);
        check_record(i, data, size, sizes[i]);
      }
      offset += 16 + sizes[i];
    }
    ck_assert_uint_eq(tfrecord_offset(r), total);
    ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_END);
    tfrecord_close(r);
  }
  free(bytes);
}
END_TEST

START_TEST(empty_file) {
  char path[300], err[256];
  snprintf(path, sizeof path, "%s/empty", dir);
  write_file(path, NULL, 0);
  tfrecord_reader *r;
  ck_assert_int_eq(tfrecord_open(path, &r, err, sizeof err), TFRECORD_OK);
  const uint8_t *data;
  size_t size;
  ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_END);
  tfrecord_close(r);
}
END_TEST

START_TEST(open_errors) {
  char path[300], err[512];
  tfrecord_reader *r = (tfrecord_reader *)1;
  snprintf(path, sizeof path, "%s/missing", dir);
  ck_assert_int_eq(tfrecord_open(path, &r, err, sizeof err), TFRECORD_IO);
  ck_assert_ptr_null(r);
  ck_assert_msg(strstr(err, path) && strstr(err, "No such file"), "%s", err);
  ck_assert_int_eq(tfrecord_open(dir, &r, err, sizeof err), TFRECORD_IO);
  ck_assert_msg(strstr(err, "is a directory"), "%s", err);
  tfrecord_writer *w;
  snprintf(path, sizeof path, "%s/no/such/dir", dir);
  ck_assert_int_eq(tfrecord_writer_open(path, &w, err, sizeof err), -1);
  ck_assert_msg(strstr(err, path), "%s", err);
}
END_TEST

/* Three records (10, 5000, 7 bytes); the damaged one is the second, at byte 26. */
enum { SECOND = 16 + 10, SECOND_LEN = 5000 };
typedef void (*damage_fn)(uint8_t *buf, size_t *len);

static void flip_data(uint8_t *b, size_t *len) { b[SECOND + 12 + 1234] ^= 0x10; }
static void flip_length(uint8_t *b, size_t *len) { b[SECOND + 1] ^= 0x01; }
static void flip_data_crc(uint8_t *b, size_t *len) { b[SECOND + 12 + SECOND_LEN] ^= 0x80; }
static void cut_header(uint8_t *b, size_t *len) { *len = SECOND + 5; }
static void cut_data(uint8_t *b, size_t *len) { *len = SECOND + 12 + 10; }
static void cut_footer(uint8_t *b, size_t *len) { *len = SECOND + 12 + SECOND_LEN + 2; }
/* A length with a valid CRC: only the length checks can refuse it. */
static void set_length(uint8_t *b, uint64_t n) {
  for (int i = 0; i < 8; i++) b[SECOND + i] = (uint8_t)(n >> (8 * i));
  uint32_t c = crc32c_mask(crc32c(b + SECOND, 8));
  for (int i = 0; i < 4; i++) b[SECOND + 8 + i] = (uint8_t)(c >> (8 * i));
}
static void huge_length(uint8_t *b, size_t *len) { set_length(b, (uint64_t)1 << 40); }
static void past_end_length(uint8_t *b, size_t *len) { set_length(b, 900u << 20); }

static const struct {
  damage_fn fn;
  const char *want;
} damages[] = {
    {flip_data, "record at byte 26: data CRC mismatch (stored 0x"},
    {flip_length, "record at byte 26: length CRC mismatch (stored 0x"},
    {flip_data_crc, "record at byte 26: data CRC mismatch"},
    {cut_header, "record at byte 26: truncated header: 5 of 12 bytes"},
    {cut_data, "record at byte 26: truncated: 22 of 5016 bytes"},
    {cut_footer, "record at byte 26: truncated: 5014 of 5016 bytes"},
    {huge_length, "record at byte 26: impossible length 1099511627776 (more than 1 GiB)"},
    {past_end_length, "record at byte 26: truncated: "},
};

START_TEST(corruption) {
  size_t sizes[] = {10, SECOND_LEN, 7};
  char path[300], bad[320], err[512];
  snprintf(path, sizeof path, "%s/good", dir);
  write_records(path, sizes, 3);
  size_t len;
  uint8_t *buf = read_all(path, &len);
  damages[_i].fn(buf, &len);
  const uint8_t *data;
  size_t size, pos = 0;
  /* A data CRC failure with the length's CRC intact loses that record alone: the parser
   * and the reader are past it and read the third; every other damage loses the framing. */
  int data_only = strstr(damages[_i].want, "data CRC") != NULL;
  /* The parser: the first record, then the damage. */
  ck_assert_int_eq(tfrecord_parse(buf, len, &pos, &data, &size, err, sizeof err), TFRECORD_OK);
  if (data_only) {
    ck_assert_int_eq(tfrecord_parse(buf, len, &pos, &data, &size, err, sizeof err),
                     TFRECORD_BAD_DATA);
    ck_assert_uint_eq(pos, SECOND + 12 + SECOND_LEN + 4);
    ck_assert_msg(strstr(err, damages[_i].want), "got \"%s\", want \"%s\"", err, damages[_i].want);
    ck_assert_int_eq(tfrecord_parse(buf, len, &pos, &data, &size, err, sizeof err), TFRECORD_OK);
    check_record(2, data, size, 7);
    ck_assert_int_eq(tfrecord_parse(buf, len, &pos, &data, &size, err, sizeof err), TFRECORD_END);
  } else {
    ck_assert_int_eq(tfrecord_parse(buf, len, &pos, &data, &size, err, sizeof err),
                     TFRECORD_CORRUPT);
    ck_assert_uint_eq(pos, SECOND);
    ck_assert_msg(strstr(err, damages[_i].want), "got \"%s\", want \"%s\"", err, damages[_i].want);
  }
  /* The reader: the same, with the file named; after a lost framing the file stays
   * unusable. */
  snprintf(bad, sizeof bad, "%s/bad%d", dir, _i);
  write_file(bad, buf, len);
  /* Through the file reader, then through a reader over the same bytes in memory
   * (--datasets_use_caching's): the same results, the same messages. */
  for (int memory = 0; memory < 2; memory++) {
    tfrecord_reader *r;
    ck_assert_int_eq(memory ? tfrecord_open_memory(bad, buf, len, &r, err, sizeof err)
                            : tfrecord_open(bad, &r, err, sizeof err),
                     TFRECORD_OK);
    ck_assert_uint_eq(tfrecord_file_size(r), len);
    ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_OK);
    check_record(0, data, size, 10);
    char want[600];
    snprintf(want, sizeof want, "%s: %s", bad, damages[_i].want);
    if (data_only) {
      ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_BAD_DATA);
      ck_assert_msg(strstr(err, want), "got \"%s\", want \"%s\"", err, want);
      ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_OK);
      check_record(2, data, size, 7);
      ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_END);
    } else {
      ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_CORRUPT);
      ck_assert_msg(strstr(err, want), "got \"%s\", want \"%s\"", err, want);
      ck_assert_uint_eq(tfrecord_offset(r), SECOND);
      ck_assert_int_eq(tfrecord_next(r, &data, &size, err, sizeof err), TFRECORD_CORRUPT);
    }
    tfrecord_close(r);
    /* Skipping sees what the headers show: damage to the data passes unseen (the record
     * counts, and so does the next). */
    ck_assert_int_eq(memory ? tfrecord_open_memory(bad, buf, len, &r, err, sizeof err)
                            : tfrecord_open(bad, &r, err, sizeof err),
                     TFRECORD_OK);
    ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_OK);
    if (strstr(damages[_i].want, "data CRC")) {
      ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_OK);
      ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_OK);
      ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_END);
    } else {
      ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_CORRUPT);
      ck_assert_msg(strstr(err, want), "skip: got \"%s\", want \"%s\"", err, want);
      ck_assert_int_eq(tfrecord_skip(r, err, sizeof err), TFRECORD_CORRUPT);
    }
    tfrecord_close(r);
  }
  free(buf);
}
END_TEST

START_TEST(writer_refuses_oversize) {
  char path[300], err[256];
  snprintf(path, sizeof path, "%s/over", dir);
  tfrecord_writer *w;
  ck_assert_int_eq(tfrecord_writer_open(path, &w, err, sizeof err), 0);
  /* The size alone is refused: no byte of the (unallocated) data is read. */
  ck_assert_int_eq(tfrecord_write(w, "", ((size_t)1 << 30) + 1, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "1 GiB"), "%s", err);
  /* Nothing was written: the file stays a valid (empty) TFRecord file. */
  ck_assert_int_eq(tfrecord_writer_close(w, err, sizeof err), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tfrecord");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, crc_vectors);
  tcase_add_test(tc, crc_paths_agree);
  tcase_add_test(tc, reads_tensorflow_bytes);
  tcase_add_test(tc, reader_across_chunks);
  tcase_add_test(tc, skip_across_chunks);
  tcase_add_test(tc, empty_file);
  tcase_add_test(tc, open_errors);
  tcase_add_loop_test(tc, corruption, 0, (int)(sizeof damages / sizeof damages[0]));
  tcase_add_test(tc, writer_refuses_oversize);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

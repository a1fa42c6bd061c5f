/* test_safetensors.c — the safetensors layer (core/src/store/safetensors.c, atomic_file.c):
 * tensors of each dtype (scalars, 4-D, empty) and metadata written and read back; the
 * bytes on disk exactly as the format lays them out (the size field, the compact JSON
 * header padded with spaces to 8 bytes, offsets relative to the data); every kind of bad
 * file refused with a message naming the file and the problem (each crafted by hand);
 * a valid file cut at every interesting point refused, never read past (ASan builds
 * check that); writes that replace a file whole and leave no temporary behind, and a
 * write into a missing directory refused with the reason. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags/flags.h"
#include "store/safetensors.h"

static char dir[256];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_safetensors.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ctx = cnnb_ctx_create("test", NULL);
}
static void teardown(void) {
  cnnb_ctx_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, size, f), size);
  ck_assert_int_eq(fclose(f), 0);
}
static unsigned char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return buf;
}

/* A file of `header` (its size field says header_size, normally strlen(header)) then
 * data_size bytes of data. */
static void craft(const char *path, const char *header, uint64_t header_size, size_t data_size) {
  size_t len = strlen(header);
  unsigned char *buf = calloc(1, 8 + len + data_size);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(header_size >> (8 * i));
  memcpy(buf + 8, header, len);
  for (size_t i = 0; i < data_size; i++) buf[8 + len + i] = (unsigned char)i;
  write_file(path, buf, 8 + len + data_size);
  free(buf);
}

static void path_of(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
}

/* Opening `path` fails with `status`, and the message names the file and has `want`. */
static void assert_refused(const char *path, cnnb_status status, const char *want) {
  cnnb_safetensors *f = (cnnb_safetensors *)1;
  cnnb_clear_error(ctx);
  cnnb_status st = cnnb_safetensors_open(ctx, path, &f);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(st == status, "%s: status %d, want %d (%s)", want, (int)st, (int)status, msg);
  ck_assert_ptr_null(f);
  ck_assert_msg(strstr(msg, path), "message does not name the file: %s", msg);
  ck_assert_msg(strstr(msg, want), "got \"%s\", want \"%s\"", msg, want);
  /* The header-only check that a resume makes of every file refuses it the same way. */
  cnnb_clear_error(ctx);
  st = cnnb_safetensors_check_file(ctx, path);
  msg = cnnb_error_message(ctx);
  ck_assert_msg(st == status, "check_file: %s: status %d, want %d (%s)", want, (int)st, (int)status,
                msg);
  ck_assert_msg(strstr(msg, want), "check_file: got \"%s\", want \"%s\"", msg, want);
}

static float f32_4d_values(int i) { return (float)i * 0.25f - 3.0f; }

START_TEST(round_trip) {
  char path[300];
  path_of(path, sizeof path, "a.safetensors");
  float scalar = 3.5f, four_d[2 * 3 * 4 * 5];
  for (int i = 0; i < 120; i++) four_d[i] = f32_4d_values(i);
  int64_t counts[3] = {-1, 0, INT64_MAX};
  int64_t step = 1234567890123LL;
  uint16_t halves[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  uint16_t bf[4] = {0x3f80, 0xbf80, 0x4049, 0x0000};
  cnnb_st_tensor in[] = {
      {"scalar", CNNB_ST_F32, 0, {0}, &scalar, 4},
      {"conv/weights", CNNB_ST_F32, 4, {2, 3, 4, 5}, four_d, sizeof four_d},
      {"counts", CNNB_ST_I64, 1, {3}, counts, sizeof counts},
      {"global_step", CNNB_ST_I64, 0, {0}, &step, 8},
      {"empty", CNNB_ST_F32, 2, {0, 3}, NULL, 0},
      {"half", CNNB_ST_F16, 1, {4}, halves, sizeof halves},
      {"bf16", CNNB_ST_BF16, 2, {2, 2}, bf, sizeof bf},
  };
  enum { N = sizeof in / sizeof in[0] };
  cnnb_st_meta meta[] = {{"format", "pt"}, {"model", "resnet50 \"v1.5\" é"}};
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, in, N, meta, 2), CNNB_OK);

  cnnb_safetensors *f;
  ck_assert_msg(cnnb_safetensors_open(ctx, path, &f) == CNNB_OK, "%s", cnnb_error_message(ctx));
  ck_assert_uint_eq(cnnb_safetensors_count(f), N);
  for (size_t i = 0; i < N; i++) {
    /* Laid out in the order given, so file order is that order. */
    const cnnb_st_tensor *t = cnnb_safetensors_tensor(f, i);
    ck_assert_str_eq(t->name, in[i].name);
    ck_assert_ptr_eq(cnnb_safetensors_find(f, in[i].name), t);
    ck_assert_uint_eq(t->dtype, in[i].dtype);
    ck_assert_int_eq(t->ndims, in[i].ndims);
    for (int d = 0; d < t->ndims; d++) ck_assert_int_eq(t->dims[d], in[i].dims[d]);
    ck_assert_uint_eq(t->bytes, in[i].bytes);
    if (t->bytes) ck_assert_int_eq(memcmp(t->data, in[i].data, t->bytes), 0);
  }
  ck_assert_ptr_null(cnnb_safetensors_tensor(f, N));
  ck_assert_ptr_null(cnnb_safetensors_find(f, "absent"));
  ck_assert_ptr_null(cnnb_safetensors_find(f, "__metadata__"));
  ck_assert_str_eq(cnnb_safetensors_meta(f, "format"), "pt");
  ck_assert_str_eq(cnnb_safetensors_meta(f, "model"), "resnet50 \"v1.5\" é");
  ck_assert_ptr_null(cnnb_safetensors_meta(f, "absent"));
  cnnb_safetensors_close(f);

  /* No tensors and no metadata is a valid file too ("{}" padded). */
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, NULL, 0, NULL, 0), CNNB_OK);
  ck_assert_int_eq(cnnb_safetensors_open(ctx, path, &f), CNNB_OK);
  ck_assert_uint_eq(cnnb_safetensors_count(f), 0);
  ck_assert_ptr_null(cnnb_safetensors_meta(f, "format"));
  cnnb_safetensors_close(f);
}
END_TEST

START_TEST(bytes_on_disk) {
  char path[300];
  path_of(path, sizeof path, "b.safetensors");
  float a[2] = {1.0f, 2.0f};
  int64_t b = 7;
  cnnb_st_tensor in[] = {{"a", CNNB_ST_F32, 1, {2}, a, 8}, {"b", CNNB_ST_I64, 0, {0}, &b, 8}};
  cnnb_st_meta meta[] = {{"format", "pt"}};
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, in, 2, meta, 1), CNNB_OK);
  size_t size;
  unsigned char *bytes = read_all(path, &size);
  const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}";
  size_t len = strlen(json), padded = (len + 7) / 8 * 8;
  ck_assert_uint_ne(len, padded); /* so the padding is exercised */
  ck_assert_uint_eq(size, 8 + padded + 16);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | bytes[i];
  ck_assert_uint_eq(n, padded);
  ck_assert_int_eq(memcmp(bytes + 8, json, len), 0);
  for (size_t i = len; i < padded; i++) ck_assert_int_eq(bytes[8 + i], ' ');
  /* Little-endian data, back to back from the end of the header. */
  const unsigned char want[16] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 7, 0, 0, 0, 0, 0, 0, 0};
  ck_assert_int_eq(memcmp(bytes + 8 + padded, want, 16), 0);
  free(bytes);
}
END_TEST

/* A file whose header lists tensors out of data order reads them in data order. */
START_TEST(file_order_is_data_order) {
  char path[300];
  path_of(path, sizeof path, "order.safetensors");
  const char *h = "{\"late\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                  "\"early\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                  "\"none\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[8,8]}}";
  craft(path, h, strlen(h), 12);
  cnnb_safetensors *f;
  ck_assert_msg(cnnb_safetensors_open(ctx, path, &f) == CNNB_OK, "%s", cnnb_error_message(ctx));
  ck_assert_uint_eq(cnnb_safetensors_count(f), 3);
  ck_assert_str_eq(cnnb_safetensors_tensor(f, 0)->name, "early");
  ck_assert_str_eq(cnnb_safetensors_tensor(f, 1)->name, "none");
  ck_assert_str_eq(cnnb_safetensors_tensor(f, 2)->name, "late");
  const unsigned char *late = cnnb_safetensors_find(f, "late")->data;
  ck_assert_int_eq(late[0], 8); /* craft() fills data byte i with i */
  cnnb_safetensors_close(f);
}
END_TEST

/* Each bad file: its header (data_size bytes of data follow) and what the message says. */
static const struct bad {
  const char *header;
  size_t data_size;
  const char *want;
} bads[] = {
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4,
     "not valid JSON (line 1, column"},
    {"[1]", 0, "does not start with '{'"},
    {" {}", 0, "does not start with '{'"},
    {"{\"a\":3}", 0, "tensor 'a': its entry is not a JSON object"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
     "tensor 'a': dtype \"F64\""},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': no \"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': no \"shape\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape dim 0 is not an integer >= 0"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2.5],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': shape dim 1"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': 9 dims"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
     "tensor 'a': data_offsets [0, 8] span 8 bytes, but its dtype and shape need 12"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a': its shape's size overflows"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
     "tensor 'a': \"data_offsets\" is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
     "tensor 'a': \"data_offsets\" is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
     "tensor 'a': data_offsets [0, 8] run past the 4 bytes of data"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, "tensor 'b': data_offsets [4, 8] overlap tensor 'a'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
     12, "tensor 'b': data_offsets [8, 12] leave a gap of 4 unused bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
     "tensor 'a': data_offsets [4, 8] leave a gap of 4"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6,
     "2 trailing bytes after the last tensor 'a'"},
    {"{}", 1, "1 trailing bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, "duplicate object key"},
    {"{\"__metadata__\":{\"step\":100}}", 0, "\"__metadata__\" entry 'step' is not a string"},
    {"{\"__metadata__\":[\"pt\"]}", 0, "\"__metadata__\" is not a JSON object"},
    {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "a tensor with an empty name"},
};

START_TEST(refuses_bad_header) {
  const struct bad *b = &bads[_i];
  char path[300];
  path_of(path, sizeof path, "bad.safetensors");
  craft(path, b->header, strlen(b->header), b->data_size);
  assert_refused(path, CNNB_EINVAL, b->want);
}
END_TEST

START_TEST(refuses_bad_size_field) {
  char path[300];
  path_of(path, sizeof path, "size.safetensors");
  write_file(path, "\x02\0\0\0\0", 5);
  assert_refused(path, CNNB_EINVAL, "5 bytes, too short");
  write_file(path, "", 0);
  assert_refused(path, CNNB_EINVAL, "0 bytes, too short");
  craft(path, "{}", 3, 0);
  assert_refused(path, CNNB_EINVAL, "header size 3 bytes, but the file has only 2");
  craft(path, "{}", (uint64_t)1 << 40, 0);
  assert_refused(path, CNNB_EINVAL, "exceeds safetensors' limit");
  craft(path, "{}", UINT64_MAX, 0);
  assert_refused(path, CNNB_EINVAL, "exceeds safetensors' limit");
  craft(path, "{}", 0, 2);
  assert_refused(path, CNNB_EINVAL, "does not start with '{'");
  /* Not a file at all. */
  path_of(path, sizeof path, "missing.safetensors");
  assert_refused(path, CNNB_EIO, "No such file or directory");
  assert_refused(dir, CNNB_EIO, dir);
}
END_TEST

/* A valid file cut short anywhere is refused, whatever part the cut lands in. */
START_TEST(refuses_truncated) {
  char path[300], cut_path[300];
  path_of(path, sizeof path, "whole.safetensors");
  path_of(cut_path, sizeof cut_path, "cut.safetensors");
  float w[64];
  for (int i = 0; i < 64; i++) w[i] = (float)i;
  int64_t s = 5;
  cnnb_st_tensor in[] = {{"w", CNNB_ST_F32, 2, {8, 8}, w, sizeof w},
                         {"s", CNNB_ST_I64, 0, {0}, &s, 8}};
  cnnb_st_meta meta[] = {{"format", "pt"}};
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, in, 2, meta, 1), CNNB_OK);
  size_t size;
  unsigned char *bytes = read_all(path, &size);
  size_t header_end = size - sizeof w - 8;
  size_t cuts[] = {
      0,        1,        7,       8, 9, header_end / 2, header_end - 1, header_end, header_end + 1,
      size - 9, size - 8, size - 1};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    /* A copy of exactly `cut` bytes, so reading past it is a heap overflow ASan reports. */
    write_file(cut_path, bytes, cuts[k]);
    cnnb_safetensors *f = NULL;
    cnnb_clear_error(ctx);
    ck_assert_msg(cnnb_safetensors_open(ctx, cut_path, &f) == CNNB_EINVAL,
                  "cut at %zu of %zu opened", cuts[k], size);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(cnnb_error_message(ctx), cut_path), "%s", cnnb_error_message(ctx));
    /* The header-only check (what a resume asks of every checkpoint) agrees. */
    cnnb_clear_error(ctx);
    ck_assert_msg(cnnb_safetensors_check_file(ctx, cut_path) == CNNB_EINVAL,
                  "cut at %zu of %zu checked whole", cuts[k], size);
    ck_assert_msg(strstr(cnnb_error_message(ctx), cut_path), "%s", cnnb_error_message(ctx));
  }
  ck_assert_int_eq(cnnb_safetensors_check_file(ctx, path), CNNB_OK);
  /* Bytes past the last tensor: refused by both, saying how many. */
  unsigned char *longer = malloc(size + 70);
  memcpy(longer, bytes, size);
  memset(longer + size, 0, 70);
  write_file(cut_path, longer, size + 70);
  free(longer);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_safetensors_check_file(ctx, cut_path), CNNB_EINVAL);
  ck_assert_msg(strstr(cnnb_error_message(ctx), "70 trailing bytes"), "%s",
                cnnb_error_message(ctx));
  assert_refused(cut_path, CNNB_EINVAL, "70 trailing bytes");
  /* Cutting inside the data names the torn tensor. */
  write_file(cut_path, bytes, size - 1);
  assert_refused(cut_path, CNNB_EINVAL, "tensor 's': data_offsets [256, 264] run past");
  free(bytes);
}
END_TEST

START_TEST(writer_refuses_bad_tensors) {
  char path[300];
  path_of(path, sizeof path, "w.safetensors");
  float v[2] = {0};
  const struct {
    cnnb_st_tensor t[2];
    size_t n;
    const char *want;
  } cases[] = {
      {{{"a", CNNB_ST_F32, 1, {2}, v, 8}, {"a", CNNB_ST_F32, 1, {2}, v, 8}},
       2,
       "tensor name 'a' given twice"},
      {{{"", CNNB_ST_F32, 1, {2}, v, 8}}, 1, "a tensor without a name"},
      {{{NULL, CNNB_ST_F32, 1, {2}, v, 8}}, 1, "a tensor without a name"},
      {{{"__metadata__", CNNB_ST_F32, 1, {2}, v, 8}}, 1, "reserved"},
      {{{"a", CNNB_ST_F32, 1, {2}, v, 4}}, 1, "tensor 'a': 4 bytes given"},
      {{{"a", 99, 1, {2}, v, 8}}, 1, "tensor 'a': unknown dtype 99"},
      {{{"a", CNNB_ST_F32, 1, {-2}, v, 8}}, 1, "tensor 'a': a negative"},
      {{{"a", CNNB_ST_F32, 9, {2}, v, 8}}, 1, "tensor 'a': 9 dims"},
      {{{"a", CNNB_ST_F32, 1, {2}, NULL, 8}}, 1, "tensor 'a': no data"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    cnnb_clear_error(ctx);
    ck_assert_int_eq(cnnb_safetensors_write(ctx, path, cases[k].t, cases[k].n, NULL, 0),
                     CNNB_EINVAL);
    const char *msg = cnnb_error_message(ctx);
    ck_assert_msg(strstr(msg, path) && strstr(msg, cases[k].want), "got \"%s\", want \"%s\"", msg,
                  cases[k].want);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing written */
  }
  cnnb_st_meta dup[] = {{"k", "1"}, {"k", "2"}};
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, NULL, 0, dup, 2), CNNB_EINVAL);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "metadata key 'k' given twice"));
}
END_TEST

static size_t entries_in(const char *d) {
  DIR *dp = opendir(d);
  ck_assert_ptr_nonnull(dp);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(dp)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(dp);
  return n;
}

START_TEST(atomic_replace) {
  char path[300];
  path_of(path, sizeof path, "r.safetensors");
  float one = 1.0f, two[2] = {2.0f, 2.0f};
  cnnb_st_tensor t1 = {"x", CNNB_ST_F32, 0, {0}, &one, 4};
  cnnb_st_tensor t2 = {"y", CNNB_ST_F32, 1, {2}, two, 8};
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, &t1, 1, NULL, 0), CNNB_OK);
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, &t2, 1, NULL, 0), CNNB_OK);
  ck_assert_uint_eq(entries_in(dir), 1); /* no "<path>.tmp.<pid>" left */
  cnnb_safetensors *f;
  ck_assert_int_eq(cnnb_safetensors_open(ctx, path, &f), CNNB_OK);
  ck_assert_uint_eq(cnnb_safetensors_count(f), 1);
  ck_assert_str_eq(cnnb_safetensors_tensor(f, 0)->name, "y");
  cnnb_safetensors_close(f);

  /* A write that fails leaves the old file as it was, and no temporary. */
  cnnb_st_tensor bad = {"z", 99, 0, {0}, &one, 4};
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, &bad, 1, NULL, 0), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_safetensors_open(ctx, path, &f), CNNB_OK);
  ck_assert_str_eq(cnnb_safetensors_tensor(f, 0)->name, "y");
  cnnb_safetensors_close(f);
  ck_assert_uint_eq(entries_in(dir), 1);

  /* Into a directory that does not exist: the path, the step and the reason. */
  char missing[300];
  snprintf(missing, sizeof missing, "%s/no/such/dir/m.safetensors", dir);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_safetensors_write(ctx, missing, &t1, 1, NULL, 0), CNNB_EIO);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(strstr(msg, missing) && strstr(msg, "creating the temporary file") &&
                    strstr(msg, "No such file or directory"),
                "%s", msg);
  ck_assert_uint_eq(entries_in(dir), 1);
}
END_TEST

/* The temporary file is removed when the rename fails (the target is a directory). */
START_TEST(failed_rename_leaves_no_tmp) {
  char path[300];
  path_of(path, sizeof path, "isdir");
  char sub[320];
  snprintf(sub, sizeof sub, "%s/inside", path);
  ck_assert_int_eq(mkdir(path, 0777), 0);
  ck_assert_int_eq(mkdir(sub, 0777), 0); /* rename(2) onto a non-empty directory fails */
  float one = 1.0f;
  cnnb_st_tensor t = {"x", CNNB_ST_F32, 0, {0}, &one, 4};
  cnnb_clear_error(ctx);
  ck_assert_int_eq(cnnb_safetensors_write(ctx, path, &t, 1, NULL, 0), CNNB_EIO);
  ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "renaming the temporary file"));
  ck_assert_uint_eq(entries_in(dir), 1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, bytes_on_disk);
  tcase_add_test(tc, file_order_is_data_order);
  tcase_add_loop_test(tc, refuses_bad_header, 0, (int)(sizeof bads / sizeof bads[0]));
  tcase_add_test(tc, refuses_bad_size_field);
  tcase_add_test(tc, refuses_truncated);
  tcase_add_test(tc, writer_refuses_bad_tensors);
  tcase_add_test(tc, atomic_replace);
  tcase_add_test(tc, failed_rename_leaves_no_tmp);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* test_cuda_algo_cache.c — the cudnn autotune cache file (algo_cache_file.c) on the host,
 * no CUDA needed: choices read back as written; the latest line of a key wins; a torn
 * line, garbage and lines of other GPUs are skipped (and a torn last line ended before
 * the next append); every field of the identity and of the key tells choices apart; the
 * files it must not read or write (another format's or version's, a FIFO, a directory, a
 * device, one over the size cap, a read-only or unreadable one) give one warning and are
 * left as they were; processes appending at once lose no line; "auto"'s path follows
 * the XDG rules. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "algo_cache_file.h"
#include "base/host_ctx.h"

static char dir[256], path[320];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_cuda_algo_cache.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/cache.tsv", dir);
  ctx = cnnb_ctx_create("cuda", NULL);
  ck_assert_ptr_nonnull(ctx);
}

static void teardown(void) {
  cnnb_ctx_destroy(ctx);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' && rm -rf '%s'", dir, dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* ---- helpers ------------------------------------------------------------------------- */

static const gpu_algo_file_gpu h100 = {
    .name = "NVIDIA H100 80GB HBM3",
    .cc_major = 9,
    .cc_minor = 0,
    .memory_mib = 81079,
    .cudnn_version = 91002,
    .build = "0.1.0",
};

#define CONV_FIELDS (sizeof(gpu_conv_key) / sizeof(int32_t))

/* A key whose every field differs from the others (n = 1, c = 2, ...). */
static gpu_algo_file_key key_of(int32_t dir_, int32_t n) {
  gpu_algo_file_key k;
  memset(&k, 0, sizeof k);
  int32_t *conv = (int32_t *)&k.conv;
  for (size_t i = 0; i < CONV_FIELDS; i++) conv[i] = (int32_t)i + 1;
  k.conv.n = n;
  k.dir = dir_;
  k.winograd_nonfused = 1;
  k.workspace_limit = (uint64_t)1 << 30;
  return k;
}

static gpu_algo_file_choice choice_of(int32_t algo, double ms) {
  gpu_algo_file_choice c = {
      .algo = algo, .math = 1, .workspace = 4096u * (uint64_t)algo, .time_ms = ms};
  return c;
}

static gpu_algo_file *open_as(const char *p, const gpu_algo_file_gpu *gpu) {
  gpu_algo_file *f = gpu_algo_file_open(ctx, p, 0, gpu);
  ck_assert_ptr_nonnull(f);
  return f;
}

static gpu_algo_file_stats stats_of(const gpu_algo_file *f) {
  gpu_algo_file_stats s;
  gpu_algo_file_stats_of(f, &s);
  return s;
}

static void write_text(const char *p, const char *text) {
  FILE *f = fopen(p, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  ck_assert_int_eq(fclose(f), 0);
}

/* The whole file (malloc'ed), or NULL when it cannot be read. */
static char *read_text(const char *p) {
  FILE *f = fopen(p, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
  }
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static size_t count_of(const char *text, const char *needle) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* stderr into a temporary file between capture_begin and capture_end. */
static int saved_stderr = -1;
static FILE *captured;

static void capture_begin(void) {
  fflush(stderr);
  saved_stderr = dup(2);
  captured = tmpfile();
  ck_assert_ptr_nonnull(captured);
  dup2(fileno(captured), 2);
}

static char *capture_end(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  off_t size = lseek(fileno(captured), 0, SEEK_END);
  char *text = calloc((size_t)size + 1, 1);
  ck_assert_int_eq(pread(fileno(captured), text, (size_t)size, 0), size);
  fclose(captured);
  return text;
}

/* The line a well-formed record of h100 and key_of(0, 1) has, through the writer itself
 * (in a scratch file), without its newline. */
static void valid_line(char *buf, size_t size) {
  char scratch[320];
  snprintf(scratch, sizeof scratch, "%s/scratch.tsv", dir);
  unlink(scratch);
  gpu_algo_file *f = open_as(scratch, &h100);
  gpu_algo_file_key k = key_of(0, 1);
  gpu_algo_file_choice c = choice_of(1, 0.5);
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_close(f);
  char *text = read_text(scratch);
  ck_assert_ptr_nonnull(text);
  size_t len = strlen(text);
  ck_assert(len > 1 && text[len - 1] == '\n');
  text[len - 1] = '\0';
  const char *last = strrchr(text, '\n') + 1;
  ck_assert_uint_lt(strlen(last), size);
  snprintf(buf, size, "%s", last);
  free(text);
  unlink(scratch);
}

/* `line` with tab-separated field `index` replaced by `value` ("<drop>": removed). */
static void with_field(char *out, size_t size, const char *line, int index, const char *value) {
  char copy[2048];
  snprintf(copy, sizeof copy, "%s", line);
  size_t len = 0;
  int i = 0;
  out[0] = '\0';
  for (char *save = NULL, *tok = strtok_r(copy, "\t", &save); tok;
       tok = strtok_r(NULL, "\t", &save), i++) {
    const char *v = i == index ? value : tok;
    if (!strcmp(v, "<drop>")) continue;
    len += (size_t)snprintf(out + len, size - len, "%s%s", len ? "\t" : "", v);
  }
}

static const char *header(void) {
  static char h[64];
  snprintf(h, sizeof h, "%s\t%d\n", GPU_ALGO_FILE_MAGIC, GPU_ALGO_FILE_FORMAT);
  return h;
}

/* ---- the default path ---------------------------------------------------------------- */

static void set_or_unset(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

START_TEST(default_path_follows_xdg) {
  char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
  char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  char buf[512];
  set_or_unset("XDG_CACHE_HOME", "/x/cache");
  set_or_unset("HOME", "/home/u");
  ck_assert_int_eq(gpu_algo_file_default_path(buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "/x/cache/cnnbench/cudnn_autotune.tsv");
  /* A relative XDG_CACHE_HOME is invalid (the XDG spec): HOME's .cache instead. */
  set_or_unset("XDG_CACHE_HOME", "relative/cache");
  ck_assert_int_eq(gpu_algo_file_default_path(buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "/home/u/.cache/cnnbench/cudnn_autotune.tsv");
  set_or_unset("XDG_CACHE_HOME", "");
  ck_assert_int_eq(gpu_algo_file_default_path(buf, sizeof buf), 0);
  ck_assert_str_eq(buf, "/home/u/.cache/cnnbench/cudnn_autotune.tsv");
  ck_assert_int_eq(gpu_algo_file_default_path(buf, 10), -1); /* does not fit */
  set_or_unset("XDG_CACHE_HOME", NULL);
  set_or_unset("HOME", NULL);
  ck_assert_int_eq(gpu_algo_file_default_path(buf, sizeof buf), -1);
  set_or_unset("HOME", "not/absolute");
  ck_assert_int_eq(gpu_algo_file_default_path(buf, sizeof buf), -1);
  set_or_unset("XDG_CACHE_HOME", old_xdg);
  set_or_unset("HOME", old_home);
  free(old_xdg);
  free(old_home);
}
END_TEST

/* ---- reading back ------------------------------------------------------------------- */

START_TEST(round_trip) {
  capture_begin();
  gpu_algo_file *f = open_as(path, &h100); /* no file yet: an empty cache, no warning */
  gpu_algo_file_stats s = stats_of(f);
  ck_assert_int_eq(s.readable, 1);
  ck_assert_int_eq(s.writable, 1);
  ck_assert_uint_eq(s.records, 0);
  ck_assert_int_eq(access(path, F_OK), -1); /* nothing created before a choice */
  for (int32_t d = 0; d < GPU_ALGO_FILE_DIRS; d++) {
    gpu_algo_file_key k = key_of(d, 256);
    gpu_algo_file_choice c = choice_of(d + 1, 1.2346 + d);
    gpu_algo_file_append(f, &k, &c);
  }
  gpu_algo_file_choice got;
  gpu_algo_file_key k1 = key_of(1, 256);
  ck_assert_int_eq(gpu_algo_file_find(f, &k1, &got), 1); /* this handle's own, at once */
  ck_assert_int_eq(got.algo, 2);
  ck_assert_uint_eq(stats_of(f).appended, 3);
  ck_assert_str_eq(gpu_algo_file_path(f), path);
  gpu_algo_file_close(f);
  char *log = capture_end();
  ck_assert_str_eq(log, "");
  free(log);

  char *text = read_text(path);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(strncmp(text, header(), strlen(header())), 0);
  ck_assert_uint_eq(count_of(text, "\tforward\t"), 1);
  ck_assert_uint_eq(count_of(text, "\tbackward_data\t"), 1);
  ck_assert_uint_eq(count_of(text, "\tbackward_filter\t"), 1);
  ck_assert_ptr_nonnull(strstr(text, "\t1.235\n")); /* ms, three decimals, rounded */
  free(text);

  f = open_as(path, &h100);
  s = stats_of(f);
  ck_assert_uint_eq(s.records, 3);
  ck_assert_uint_eq(s.bad_lines, 0);
  ck_assert_uint_eq(s.others, 0);
  for (int32_t d = 0; d < GPU_ALGO_FILE_DIRS; d++) {
    gpu_algo_file_key k = key_of(d, 256);
    ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
    ck_assert_int_eq(got.algo, d + 1);
    ck_assert_int_eq(got.math, 1);
    ck_assert_uint_eq(got.workspace, 4096u * (uint64_t)(d + 1));
    ck_assert(fabs(got.time_ms - (1.235 + d)) < 1e-9);
  }
  gpu_algo_file_key other = key_of(0, 128);
  ck_assert_int_eq(gpu_algo_file_find(f, &other, &got), 0);
  gpu_algo_file_close(f);
}
END_TEST

START_TEST(later_line_wins) {
  gpu_algo_file *f = open_as(path, &h100);
  gpu_algo_file_key k = key_of(0, 32);
  gpu_algo_file_choice a = choice_of(1, 2.0), b = choice_of(6, 1.0), got;
  gpu_algo_file_append(f, &k, &a);
  gpu_algo_file_append(f, &k, &b);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  ck_assert_int_eq(got.algo, 6);
  gpu_algo_file_close(f);
  f = open_as(path, &h100);
  ck_assert_uint_eq(stats_of(f).records, 2);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  ck_assert_int_eq(got.algo, 6);
  gpu_algo_file_close(f);
}
END_TEST

/* A GPU name with a tab or a newline keeps the line's columns (they become spaces), and
 * still finds its own choices. */
START_TEST(name_with_control_characters) {
  gpu_algo_file_gpu odd = h100;
  odd.name = "Odd\tGPU\nname";
  gpu_algo_file *f = open_as(path, &odd);
  gpu_algo_file_key k = key_of(2, 8);
  gpu_algo_file_choice c = choice_of(3, 0.25), got;
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_close(f);
  char *text = read_text(path);
  ck_assert_ptr_nonnull(strstr(text, "\nOdd GPU name\t9.0\t"));
  free(text);
  f = open_as(path, &odd);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  ck_assert_uint_eq(stats_of(f).bad_lines, 0);
  gpu_algo_file_close(f);
}
END_TEST

/* ---- lines that are not (this GPU's) records ------------------------------------------ */

START_TEST(torn_line_is_skipped_and_ended) {
  char line[2048], text[8192];
  valid_line(line, sizeof line);
  /* A write the disk cut short left part of a line at the end. */
  snprintf(text, sizeof text, "%s%s\nNVIDIA H100 80GB HBM3\t9.0\t810", header(), line);
  write_text(path, text);
  cnnb_ctx_set_log_level(ctx, CNNB_LOG_DEBUG);
  capture_begin();
  gpu_algo_file *f = open_as(path, &h100);
  char *log = capture_end();
  ck_assert_uint_eq(count_of(log, "1 line(s) skipped"), 1); /* one debug line */
  ck_assert_uint_eq(count_of(log, "warning"), 0);
  free(log);
  gpu_algo_file_stats s = stats_of(f);
  ck_assert_uint_eq(s.records, 1);
  ck_assert_uint_eq(s.bad_lines, 1);
  gpu_algo_file_key k = key_of(0, 1), k2 = key_of(1, 1);
  gpu_algo_file_choice got, c = choice_of(4, 3.0);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  /* The next line starts on a line of its own: the torn one stays one bad line. */
  gpu_algo_file_append(f, &k2, &c);
  gpu_algo_file_close(f);
  char *after = read_text(path);
  ck_assert_ptr_nonnull(strstr(after, "\t810\n"));
  free(after);
  f = open_as(path, &h100);
  s = stats_of(f);
  ck_assert_uint_eq(s.records, 2);
  ck_assert_uint_eq(s.bad_lines, 1);
  ck_assert_int_eq(gpu_algo_file_find(f, &k2, &got), 1);
  ck_assert_int_eq(got.algo, 4);
  gpu_algo_file_close(f);
}
END_TEST

START_TEST(malformed_lines_are_skipped) {
  char line[2048], bad[2048], text[65536];
  valid_line(line, sizeof line);
  size_t len = (size_t)snprintf(text, sizeof text, "%s# a comment\n\n%s", header(), header());
  /* field index, replacement: each makes the line unreadable. */
  static const struct {
    int index;
    const char *value;
  } cases[] = {
      {1, "9"},          /* compute capability without a minor */
      {1, "9.x"},        /* ... not a number */
      {2, "-5"},         /* memory: negative */
      {3, "9.1"},        /* cuDNN version: not an integer */
      {5, "sideways"},   /* no such direction */
      {6, "1e9"},        /* workspace limit: not an integer */
      {7, "2"},          /* winograd_nonfused: 0 or 1 */
      {8, "2147483648"}, /* n: over int32 */
      {12, "+3"},        /* a sign strtol would take */
      {20, " 1"},        /* a space strtol would take */
      {25, "-1"},        /* algorithm: negative */
      {26, "x"},         /* math type */
      {27, "12abc"},     /* workspace */
      {28, "1.2345"},    /* time: more than three decimals */
      {28, "1,5"},       /* ... another locale's decimal point */
      {0, "<drop>"},     /* 28 fields */
      {4, ""},           /* an empty field */
  };
  size_t n = sizeof cases / sizeof *cases;
  for (size_t i = 0; i < n; i++) {
    with_field(bad, sizeof bad, line, cases[i].index, cases[i].value);
    len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", bad);
  }
  /* 30 fields; the valid line itself; a line of control bytes. */
  len += (size_t)snprintf(text + len, sizeof text - len, "%s\textra\n%s\n\x01\x02\n", line, line);
  write_text(path, text);
  gpu_algo_file *f = open_as(path, &h100);
  gpu_algo_file_stats s = stats_of(f);
  ck_assert_uint_eq(s.records, 1);
  ck_assert_uint_eq(s.bad_lines, n + 2);
  ck_assert_uint_eq(s.others, 0);
  ck_assert_int_eq(s.writable, 1);
  gpu_algo_file_key k = key_of(0, 1);
  gpu_algo_file_choice got;
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  gpu_algo_file_close(f);
}
END_TEST

/* Each field of the identity, read from the file: another GPU's (or version's) lines are
 * left alone. */
START_TEST(identity_mismatch_on_each_field) {
  gpu_algo_file *f = open_as(path, &h100);
  gpu_algo_file_key k = key_of(0, 64);
  gpu_algo_file_choice c = choice_of(2, 1.0), got;
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_close(f);
  for (int field = 0; field < 6; field++) {
    gpu_algo_file_gpu other = h100;
    switch (field) {
      case 0: other.name = "NVIDIA A100-SXM4-80GB"; break;
      case 1: other.cc_major = 8; break;
      case 2: other.cc_minor = 1; break;
      case 3: other.memory_mib = 81559; break;
      case 4: other.cudnn_version = 90100; break;
      case 5: other.build = "0.2.0"; break;
    }
    f = open_as(path, &other);
    gpu_algo_file_stats s = stats_of(f);
    ck_assert_msg(s.records == 0 && s.others == 1, "identity field %d", field);
    ck_assert_msg(!gpu_algo_file_find(f, &k, &got), "identity field %d", field);
    gpu_algo_file_close(f);
  }
  f = open_as(path, &h100);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  gpu_algo_file_close(f);
}
END_TEST

/* Each field of the key, looked up: only the exact key finds the choice. */
START_TEST(key_mismatch_on_each_field) {
  gpu_algo_file *f = open_as(path, &h100);
  const gpu_algo_file_key base = key_of(1, 64);
  gpu_algo_file_choice c = choice_of(5, 1.0), got;
  gpu_algo_file_append(f, &base, &c);
  gpu_algo_file_close(f);
  f = open_as(path, &h100);
  ck_assert_int_eq(gpu_algo_file_find(f, &base, &got), 1);
  for (size_t i = 0; i < CONV_FIELDS + 3; i++) {
    gpu_algo_file_key k = base;
    if (i < CONV_FIELDS) ((int32_t *)&k.conv)[i] += 100;
    else if (i == CONV_FIELDS) k.dir = 2;
    else if (i == CONV_FIELDS + 1) k.winograd_nonfused = 0;
    else k.workspace_limit >>= 1; /* a choice within 1 GiB may not fit 512 MiB */
    ck_assert_msg(!gpu_algo_file_find(f, &k, &got), "key field %zu", i);
  }
  gpu_algo_file_close(f);
}
END_TEST

/* ---- files it must not read or write -------------------------------------------------- */

/* Opens `p`, appends twice: exactly one warning containing `why`, nothing read, nothing
 * written (the file's bytes, when it is one, stay `before`). */
static void refused(const char *p, const char *why, const char *before) {
  capture_begin();
  gpu_algo_file *f = open_as(p, &h100);
  gpu_algo_file_key k = key_of(0, 1);
  gpu_algo_file_choice c = choice_of(1, 1.0);
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_stats s = stats_of(f);
  gpu_algo_file_close(f);
  char *log = capture_end();
  ck_assert_msg(count_of(log, "warning") == 1, "one warning, got: %s", log);
  ck_assert_msg(strstr(log, why) != NULL, "'%s' not in: %s", why, log);
  ck_assert_ptr_nonnull(strstr(log, p));
  ck_assert_uint_eq(s.records, 0);
  ck_assert_uint_eq(s.appended, 0);
  ck_assert_int_eq(s.writable, 0);
  free(log);
  if (before) {
    char *after = read_text(p);
    ck_assert_ptr_nonnull(after);
    ck_assert_str_eq(after, before);
    free(after);
  }
}

START_TEST(unknown_version_is_left_alone) {
  char line[2048], text[4096];
  valid_line(line, sizeof line);
  snprintf(text, sizeof text, "%s\t2\n%s\n", GPU_ALGO_FILE_MAGIC, line);
  write_text(path, text);
  refused(path, "format 2, and this build reads format 1", text);
}
END_TEST

START_TEST(foreign_file_is_left_alone) {
  write_text(path, "name\tvalue\nsomething else entirely\n");
  refused(path, "not a cudnn autotune cache", "name\tvalue\nsomething else entirely\n");
  write_text(path, "cnnbench-cudnn-auto"); /* not even one whole line */
  refused(path, "cut short", "cnnbench-cudnn-auto");
}
END_TEST

START_TEST(fifo_is_refused) {
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  refused(path, "a FIFO", NULL); /* and returns: opening it does not wait for a writer */
}
END_TEST

START_TEST(directory_is_refused) {
  ck_assert_int_eq(mkdir(path, 0700), 0);
  refused(path, "a directory", NULL);
}
END_TEST

START_TEST(device_is_refused) { refused("/dev/zero", "a character device", NULL); }
END_TEST

START_TEST(oversized_file_is_refused) {
  write_text(path, header());
  ck_assert_int_eq(truncate(path, (off_t)GPU_ALGO_FILE_MAX_BYTES + 1), 0);
  refused(path, "more than the 16 MiB", NULL);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq((long long)st.st_size, (long long)GPU_ALGO_FILE_MAX_BYTES + 1);
}
END_TEST

/* A read-only file gives its choices; the first choice it cannot keep is one warning, and
 * the file is unchanged. An unreadable one is one warning, neither read nor written. Run
 * as a user the permissions apply to (root ignores them: the child drops to nobody). */
static int permission_checks(void) {
  int failures = 0;
  capture_begin();
  gpu_algo_file *f = gpu_algo_file_open(ctx, path, 0, &h100);
  gpu_algo_file_key k = key_of(0, 1), k2 = key_of(0, 2);
  gpu_algo_file_choice c = choice_of(7, 1.0), got;
  if (!f || !gpu_algo_file_find(f, &k, &got) || got.algo != 1) failures |= 1;
  gpu_algo_file_append(f, &k2, &c);
  gpu_algo_file_append(f, &k2, &c);
  gpu_algo_file_stats s = stats_of(f);
  if (s.appended || s.writable || !gpu_algo_file_find(f, &k2, &got)) failures |= 2;
  gpu_algo_file_close(f);
  char *log = capture_end();
  if (count_of(log, "warning") != 1 || !strstr(log, "cannot open it for appending (Permission"))
    failures |= 4;
  free(log);

  char unreadable[400];
  snprintf(unreadable, sizeof unreadable, "%s/unreadable.tsv", dir);
  capture_begin();
  f = gpu_algo_file_open(ctx, unreadable, 0, &h100);
  gpu_algo_file_append(f, &k2, &c);
  s = stats_of(f);
  gpu_algo_file_close(f);
  log = capture_end();
  if (count_of(log, "warning") != 1 || !strstr(log, "cannot open it (Permission") || s.readable ||
      s.appended)
    failures |= 8;
  free(log);
  return failures;
}

START_TEST(read_only_file_is_read_not_written) {
  char line[2048], text[4096], unreadable[400];
  valid_line(line, sizeof line);
  snprintf(text, sizeof text, "%s%s\n", header(), line);
  write_text(path, text);
  ck_assert_int_eq(chmod(path, 0444), 0);
  snprintf(unreadable, sizeof unreadable, "%s/unreadable.tsv", dir);
  write_text(unreadable, text);
  ck_assert_int_eq(chmod(unreadable, 0200), 0);
  ck_assert_int_eq(chmod(dir, 0755), 0);
  int failures;
  if (geteuid() != 0) {
    failures = permission_checks();
  } else {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
      if (setgid(65534) || setuid(65534)) _exit(100);
      _exit(permission_checks());
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    failures = WEXITSTATUS(status);
  }
  ck_assert_msg(failures == 0, "permission checks failed: %d", failures);
  char *after = read_text(path);
  ck_assert_str_eq(after, text);
  free(after);
}
END_TEST

/* A missing directory: made for the default path (create_dirs), mode 0700; for a path
 * the user named, one warning and nothing made. */
START_TEST(missing_directory) {
  char deep[400], sub[400];
  snprintf(sub, sizeof sub, "%s/cache", dir);
  snprintf(deep, sizeof deep, "%s/cache/cnnbench/cudnn_autotune.tsv", dir);
  gpu_algo_file_key k = key_of(0, 1);
  gpu_algo_file_choice c = choice_of(1, 1.0);
  capture_begin();
  gpu_algo_file *f = gpu_algo_file_open(ctx, deep, 0, &h100);
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_close(f);
  char *log = capture_end();
  ck_assert_ptr_nonnull(strstr(log, "No such file or directory"));
  ck_assert_int_eq(access(sub, F_OK), -1);
  free(log);

  f = gpu_algo_file_open(ctx, deep, 1, &h100);
  gpu_algo_file_append(f, &k, &c);
  ck_assert_uint_eq(stats_of(f).appended, 1);
  gpu_algo_file_close(f);
  struct stat st;
  ck_assert_int_eq(stat(sub, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0700);
  ck_assert_int_eq(stat(deep, &st), 0);
}
END_TEST

/* An empty file (made by touch, or by a process that died before its first line) is
 * taken: the first line brings the header. */
START_TEST(empty_file_gets_the_header) {
  write_text(path, "");
  gpu_algo_file *f = open_as(path, &h100);
  gpu_algo_file_key k = key_of(0, 1);
  gpu_algo_file_choice c = choice_of(1, 1.0), got;
  gpu_algo_file_append(f, &k, &c);
  gpu_algo_file_close(f);
  char *text = read_text(path);
  ck_assert_uint_eq(strncmp(text, header(), strlen(header())), 0);
  free(text);
  f = open_as(path, &h100);
  ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
  gpu_algo_file_close(f);
}
END_TEST

/* ---- concurrency ------------------------------------------------------------------------ */

/* Processes that all find no file (tuner children, mpirun ranks starting together)
 * append at once: every line arrives whole; the headers of those that found the file
 * empty are skipped as such. */
START_TEST(processes_append_at_once) {
  enum { PROCESSES = 4, LINES = 300 };
  int go[2];
  ck_assert_int_eq(pipe(go), 0);
  pid_t pids[PROCESSES];
  for (int p = 0; p < PROCESSES; p++) {
    pids[p] = fork();
    ck_assert_int_ge(pids[p], 0);
    if (pids[p] == 0) {
      close(go[1]);
      char byte;
      if (read(go[0], &byte, 1) != 0) _exit(2); /* wait for the start: EOF */
      gpu_algo_file *f = gpu_algo_file_open(ctx, path, 0, &h100);
      for (int i = 0; i < LINES; i++) {
        gpu_algo_file_key k = key_of(i % GPU_ALGO_FILE_DIRS, 1000 * (p + 1) + i);
        gpu_algo_file_choice c = choice_of(i % 7, 0.001 * i);
        gpu_algo_file_append(f, &k, &c);
      }
      gpu_algo_file_stats s = stats_of(f);
      gpu_algo_file_close(f);
      _exit(s.appended == LINES ? 0 : 1);
    }
  }
  close(go[0]);
  close(go[1]); /* all start */
  for (int p = 0; p < PROCESSES; p++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  gpu_algo_file *f = open_as(path, &h100);
  gpu_algo_file_stats s = stats_of(f);
  ck_assert_uint_eq(s.records, PROCESSES * LINES);
  ck_assert_uint_eq(s.bad_lines, 0);
  for (int p = 0; p < PROCESSES; p++)
    for (int i = 0; i < LINES; i++) {
      gpu_algo_file_key k = key_of(i % GPU_ALGO_FILE_DIRS, 1000 * (p + 1) + i);
      gpu_algo_file_choice got;
      ck_assert_int_eq(gpu_algo_file_find(f, &k, &got), 1);
      ck_assert_int_eq(got.algo, i % 7);
    }
  gpu_algo_file_close(f);
  char *text = read_text(path);
  ck_assert_uint_eq(strncmp(text, header(), strlen(header())), 0);
  free(text);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda_algo_cache");
  TCase *tc = tcase_create("file");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, default_path_follows_xdg);
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, later_line_wins);
  tcase_add_test(tc, name_with_control_characters);
  tcase_add_test(tc, torn_line_is_skipped_and_ended);
  tcase_add_test(tc, malformed_lines_are_skipped);
  tcase_add_test(tc, identity_mismatch_on_each_field);
  tcase_add_test(tc, key_mismatch_on_each_field);
  tcase_add_test(tc, unknown_version_is_left_alone);
  tcase_add_test(tc, foreign_file_is_left_alone);
  tcase_add_test(tc, fifo_is_refused);
  tcase_add_test(tc, directory_is_refused);
  tcase_add_test(tc, device_is_refused);
  tcase_add_test(tc, oversized_file_is_refused);
  tcase_add_test(tc, read_only_file_is_read_not_written);
  tcase_add_test(tc, missing_directory);
  tcase_add_test(tc, empty_file_gets_the_header);
  tcase_add_test(tc, processes_append_at_once);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

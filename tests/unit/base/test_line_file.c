/* test_line_file.c — base/line_file.c: lines written whole, appended or replacing the
 * file, and a write the file system takes only part of cut back to the last whole line.
 * A file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored) plays the full disk: write(2)
 * takes what fits below it and then fails with EFBIG, as a full disk's does with ENOSPC. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/line_file.h"

static char path[256];

static void setup(void) {
  snprintf(path, sizeof path, "/tmp/cnnb_test_line_file.XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
}

static void teardown(void) { unlink(path); }

static long file_size(void) {
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  return (long)st.st_size;
}

static void read_file(char *buf, size_t size) {
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  size_t n = fread(buf, 1, size - 1, f);
  buf[n] = '\0';
  fclose(f);
}

START_TEST(replaces_or_appends) {
  cnnb_line_file *f = cnnb_line_file_open(path, false);
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(cnnb_line_file_write(f, "one\n", 4), 0);
  ck_assert_int_eq(cnnb_line_file_close(f), 0);
  f = cnnb_line_file_open(path, true);
  ck_assert_int_eq(cnnb_line_file_write(f, "two\nthree\n", 10), 0);
  ck_assert_int_eq(cnnb_line_file_close(f), 0);
  char text[64];
  read_file(text, sizeof text);
  ck_assert_str_eq(text, "one\ntwo\nthree\n");
  f = cnnb_line_file_open(path, false); /* replaced */
  ck_assert_int_eq(cnnb_line_file_write(f, "four\n", 5), 0);
  cnnb_line_file_close(f);
  read_file(text, sizeof text);
  ck_assert_str_eq(text, "four\n");
}
END_TEST

/* 30-byte lines under a 100-byte limit: three fit, the fourth's first 10 bytes go out
 * and are cut off again; the file keeps its three whole lines, and later writes fail
 * the same way without tearing it. */
static void torn_write_cut_back(bool append) {
  char line[31];
  memset(line, 'x', 29);
  line[29] = '\n';
  line[30] = '\0';
  if (append) { /* one line already there: the limit counts it */
    cnnb_line_file *f = cnnb_line_file_open(path, false);
    ck_assert_int_eq(cnnb_line_file_write(f, line, 30), 0);
    cnnb_line_file_close(f);
  }
  struct rlimit saved, limit;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
  limit = saved;
  limit.rlim_cur = 100;
  void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &limit), 0);
  cnnb_line_file *f = cnnb_line_file_open(path, append);
  ck_assert_ptr_nonnull(f);
  int written = append ? 1 : 0, rc = 0;
  while (written < 10 && (rc = cnnb_line_file_write(f, line, 30)) == 0) written++;
  int again = cnnb_line_file_write(f, line, 30);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old);
  ck_assert_int_eq(written, 3);
  ck_assert_int_eq(rc, EFBIG);
  ck_assert_int_eq(again, EFBIG);
  ck_assert(!cnnb_line_file_torn(f));
  ck_assert_int_eq(file_size(), 90);
  /* Room again: the next line follows the last whole one, with no gap. */
  ck_assert_int_eq(cnnb_line_file_write(f, "end\n", 4), 0);
  ck_assert_int_eq(cnnb_line_file_close(f), 0);
  char text[256], want[256];
  read_file(text, sizeof text);
  snprintf(want, sizeof want, "%s%s%send\n", line, line, line);
  ck_assert_str_eq(text, want);
}

START_TEST(torn_write_cut_back_replacing) { torn_write_cut_back(false); }
END_TEST

START_TEST(torn_write_cut_back_appending) { torn_write_cut_back(true); }
END_TEST

START_TEST(unopenable_says_why) {
  errno = 0;
  ck_assert_ptr_null(cnnb_line_file_open("/nonexistent-dir/x.log", false));
  ck_assert_int_eq(errno, ENOENT);
  ck_assert_int_eq(cnnb_line_file_close(NULL), 0);
  ck_assert(!cnnb_line_file_torn(NULL));
}
END_TEST

int main(void) {
  Suite *s = suite_create("line_file");
  TCase *tc = tcase_create("line_file");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, replaces_or_appends);
  tcase_add_test(tc, torn_write_cut_back_replacing);
  tcase_add_test(tc, torn_write_cut_back_appending);
  tcase_add_test(tc, unopenable_says_why);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}

/* test_flagfile.c — --flagfile's contents as the parser gets them (flags/flagfile.h,
 * flags_parse.c), issue 37: a file past 1 MiB or an endless one (/dev/zero) is refused by
 * its size, naming it and the limit; a file is read once however many passes parse the
 * command line (a pipe gives its flags to both, a file changed between the passes is the
 * first pass's); and what absl's convention has no place for (a NUL or other control
 * byte, a line past 16 KiB, a comment after a flag, a quoted value, two flags on one
 * line) is refused naming the file and line, quoting at most 80 characters of it. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flags/flags.h"
#include "flags/flagfile.h"
#include "config/core_flags.h"

static cnnb_flags *flags;
static char err[8192];
static char path[64];

static void setup(void) {
  flags = cnnb_flags_create();
  ck_assert_ptr_nonnull(flags);
  ck_assert_int_eq(cnnb_flags_declare_core(flags), CNNB_OK);
  snprintf(path, sizeof path, "/tmp/test_flagfile_%d.flags", (int)getpid());
  err[0] = '\0';
}

static void teardown(void) {
  cnnb_flags_destroy(flags);
  unlink(path);
}

/* Writes len bytes of text (NULs included) to `path`. */
static void write_file(const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
}

static cnnb_status parse_file(const char *file) {
  char arg[128];
  snprintf(arg, sizeof arg, "--flagfile=%s", file);
  char *argv[] = {"cnnbench", arg, NULL};
  return cnnb_flags_parse(flags, 2, argv, err, sizeof err);
}

/* err starts with "path:line: " and holds `why`. */
static void assert_refused_at(int line, const char *why) {
  char where[128];
  snprintf(where, sizeof where, "%s:%d: ", path, line);
  ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "no '%s' in: %s", where, err);
  ck_assert_msg(strstr(err, why) != NULL, "no '%s' in: %s", why, err);
}

START_TEST(huge_or_endless_file_refused_by_size) {
  size_t len = CNNB_FLAGFILE_MAX_BYTES + 100;
  char *text = malloc(len);
  ck_assert_ptr_nonnull(text);
  for (size_t i = 0; i < len; i++) text[i] = i % 64 == 63 ? '\n' : '#';
  write_file(text, len);
  free(text);
  ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
  ck_assert_msg(strstr(err, path) && strstr(err, "larger than 1048576 bytes"), "%s", err);
  /* Endless: refused after 1 MiB instead of growing until memory runs out. */
  ck_assert_int_eq(parse_file("/dev/zero"), CNNB_EINVAL);
  ck_assert_msg(strstr(err, "--flagfile=/dev/zero: larger than 1048576 bytes"), "%s", err);
}
END_TEST

START_TEST(long_line_refused_with_its_place) {
  size_t len = CNNB_FLAGFILE_MAX_LINE + 10;
  char *text = malloc(len + 32);
  ck_assert_ptr_nonnull(text);
  int head = snprintf(text, len + 32, "--num_batches=2\n--model=");
  memset(text + head, 'x', len - (size_t)head + 16);
  write_file(text, len + 16);
  free(text);
  ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
  assert_refused_at(2, "longer than 16384");
  ck_assert_msg(strlen(err) < 300, "message of %zu bytes: %s", strlen(err), err);
}
END_TEST

START_TEST(binary_content_refused_with_its_place) {
  /* The file: a NUL used to end the line and drop the rest silently. */
  static const char nul[] = "--model=trivial\n\0--batch_size=4\n";
  write_file(nul, sizeof nul - 1);
  ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
  assert_refused_at(2, "byte 0x00 at column 1");
  static const char ctrl[] = "--model=trivial\n--batch_size=4\x1b[0m\n";
  write_file(ctrl, sizeof ctrl - 1);
  ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
  assert_refused_at(2, "byte 0x1b at column 15");
  /* A CRLF file and tabs are text. */
  static const char crlf[] = "\t--model=trivial\r\n--batch_size=4\r\n";
  write_file(crlf, sizeof crlf - 1);
  ck_assert_int_eq(parse_file(path), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 4);
}
END_TEST

START_TEST(misplaced_syntax_refused_with_its_place) {
  static const struct {
    const char *text, *why;
  } cases[] = {
      {"--num_batches=1\n--model=trivial # comment\n", "a comment after a flag"},
      {"--num_batches=1\n--model=trivial\t// comment\n", "a comment after a flag"},
      {"--num_batches=1\n--model=\"trivial\"\n", "quotes in a flagfile"},
      {"--num_batches=1\n--model='trivial'\n", "quotes in a flagfile"},
      {"--num_batches=1\n--model=trivial --num_batches=1\n", "two flags on one line"},
      {"--num_batches=1\n--model trivial\n", "a value follows '='"},
      {"--num_batches=1\n--batch_size=many\n", "--batch_size: 'many' is not an integer"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_file(cases[i].text, strlen(cases[i].text));
    ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
    assert_refused_at(2, cases[i].why);
  }
}
END_TEST

START_TEST(long_value_quoted_in_part) {
  /* 10 KB of a bad value: the reason must come whole, the value only in part. */
  size_t len = 10000;
  char *text = malloc(len + 32);
  ck_assert_ptr_nonnull(text);
  int head = snprintf(text, len + 32, "--batch_size=");
  memset(text + head, '7', len);
  text[head + len / 2] = 'x';
  text[head + len] = '\n';
  write_file(text, (size_t)head + len + 1);
  ck_assert_int_eq(parse_file(path), CNNB_EINVAL);
  assert_refused_at(1, "...' is not an integer");
  ck_assert_msg(strlen(err) < strlen(path) + 200, "message of %zu bytes: %s", strlen(err), err);
  /* The same on the command line. */
  text[head + len] = '\0';
  char *argv[] = {"cnnbench", text, NULL};
  ck_assert_int_eq(cnnb_flags_parse(flags, 2, argv, err, sizeof err), CNNB_EINVAL);
  ck_assert_msg(strstr(err, "...' is not an integer") && strlen(err) < 200, "%s", err);
  free(text);
}
END_TEST

START_TEST(read_once_for_both_passes) {
  cnnb_flagfiles *files = cnnb_flagfiles_create();
  ck_assert_ptr_nonnull(files);
  /* A pipe: the first pass drains it, the second must still see its flags. */
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  static const char text[] = "--model=lenet\n--num_batches=1\n";
  ck_assert_int_eq(write(fds[1], text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fds[1]);
  char arg[128];
  snprintf(arg, sizeof arg, "--flagfile=/dev/fd/%d", fds[0]);
  char *argv[] = {"cnnbench", arg, NULL};
  cnnb_flags *first = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(first), CNNB_OK);
  cnnb_flags_parse_known_files(first, files, 2, argv);
  ck_assert_str_eq(cnnb_flags_string(first, "model"), "lenet");
  cnnb_flags_destroy(first);
  ck_assert_int_eq(cnnb_flags_parse_files(flags, files, 2, argv, err, sizeof err), CNNB_OK);
  ck_assert_str_eq(cnnb_flags_string(flags, "model"), "lenet");
  ck_assert_int_eq(cnnb_flags_int(flags, "num_batches"), 1);
  close(fds[0]);

  /* A regular file changed between the passes: the second reads what the first did. */
  write_file("--batch_size=4\n", 15);
  snprintf(arg, sizeof arg, "--flagfile=%s", path);
  cnnb_flags_parse_known_files(flags, files, 2, argv);
  write_file("--batch_size=8\n", 15);
  ck_assert_int_eq(cnnb_flags_parse_files(flags, files, 2, argv, err, sizeof err), CNNB_OK);
  ck_assert_int_eq(cnnb_flags_int(flags, "batch_size"), 4);
  /* A refusal is kept too: the strict pass reports the first pass's, not a second read. */
  ck_assert_int_eq(cnnb_flags_parse_files(flags, files, 2,
                                          (char *[]){"cnnbench", "--flagfile=/dev/zero", NULL}, err,
                                          sizeof err),
                   CNNB_EINVAL);
  ck_assert_msg(strstr(err, "larger than"), "%s", err);
  cnnb_flagfiles_destroy(files);
}
END_TEST

int main(void) {
  Suite *s = suite_create("flagfile");
  TCase *tc = tcase_create("flagfile");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, huge_or_endless_file_refused_by_size);
  tcase_add_test(tc, long_line_refused_with_its_place);
  tcase_add_test(tc, binary_content_refused_with_its_place);
  tcase_add_test(tc, misplaced_syntax_refused_with_its_place);
  tcase_add_test(tc, long_value_quoted_in_part);
  tcase_add_test(tc, read_once_for_both_passes);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}

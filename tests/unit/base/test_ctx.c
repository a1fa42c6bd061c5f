/* test_ctx.c — host services on a ctx: the first error wins and later ones add context,
 * clearing, a NULL ctx never crashes; log lines carry the component prefix and respect
 * the level; status and kind names. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "flags/flags.h"

START_TEST(first_error_wins_then_context) {
  cnnb_ctx *ctx = cnnb_ctx_create("resnet", NULL);
  ck_assert_ptr_nonnull(ctx);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  ck_assert_int_eq(cnnb_error(ctx, CNNB_EINVAL, "conv2d %s: filter %dx%d larger than input %dx%d",
                              "conv1", 7, 7, 3, 3),
                   CNNB_EINVAL);
  ck_assert_str_eq(cnnb_error_message(ctx), "conv2d conv1: filter 7x7 larger than input 3x3");
  ck_assert_int_eq(cnnb_error(ctx, CNNB_EINTERNAL, "while building %s", "resnet50"),
                   CNNB_EINTERNAL);
  ck_assert_str_eq(cnnb_error_message(ctx),
                   "conv2d conv1: filter 7x7 larger than input 3x3: while building resnet50");
  cnnb_clear_error(ctx);
  ck_assert_str_eq(cnnb_error_message(ctx), "");
  ck_assert_int_eq(cnnb_error(ctx, CNNB_EIO, "second"), CNNB_EIO);
  ck_assert_str_eq(cnnb_error_message(ctx), "second");
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(error_message_is_bounded) {
  cnnb_ctx *ctx = cnnb_ctx_create("loop", NULL);
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (int i = 0; i < 10; i++) cnnb_error(ctx, CNNB_EINVAL, "%s", big);
  size_t len = strlen(cnnb_error_message(ctx));
  ck_assert_uint_ge(len, sizeof big - 1);
  ck_assert_uint_lt(len, 4096);
  cnnb_ctx_destroy(ctx);
}
END_TEST

START_TEST(null_ctx_is_safe) {
  ck_assert_int_eq(cnnb_error(NULL, CNNB_ENOMEM, "no ctx %d", 1), CNNB_ENOMEM);
  ck_assert_str_eq(cnnb_error_message(NULL), "");
  cnnb_clear_error(NULL);
  cnnb_log(NULL, CNNB_LOG_DEBUG, "dropped");
  cnnb_ctx_destroy(NULL);
}
END_TEST

/* Runs `emit` with stderr redirected into a temporary file and returns what it wrote. */
static char *capture_stderr(void (*emit)(void)) {
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  ck_assert_ptr_nonnull(tmp);
  dup2(fileno(tmp), 2);
  emit();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long size = ftell(tmp);
  char *text = calloc((size_t)size + 1, 1);
  rewind(tmp);
  size_t got = fread(text, 1, (size_t)size, tmp);
  text[got] = '\0';
  fclose(tmp);
  return text;
}

static void emit_levels(void) {
  cnnb_ctx *root = cnnb_ctx_create("cnnbench", NULL);
  cnnb_ctx *ctx = cnnb_ctx_create_child(root, "cpu");
  cnnb_log(ctx, CNNB_LOG_INFO, "oneDNN %d.%d", 2, 6);
  cnnb_log(ctx, CNNB_LOG_WARN, "slow path");
  cnnb_log(ctx, CNNB_LOG_ERROR, "bad %s", "thing");
  cnnb_log(ctx, CNNB_LOG_DEBUG, "hidden at info");
  cnnb_ctx_set_log_level(root, CNNB_LOG_DEBUG); /* the root's setting reaches its children */
  cnnb_log(ctx, CNNB_LOG_DEBUG, "shown at debug\n");
  cnnb_ctx_set_log_level(ctx, CNNB_LOG_ERROR); /* and a child's, the whole family */
  cnnb_log(root, CNNB_LOG_WARN, "hidden at error");
  cnnb_log_component("cnnbench", CNNB_LOG_ERROR, "core says %s", "hi");
  /* Another family keeps its own level. */
  cnnb_ctx *other = cnnb_ctx_create("other", NULL);
  cnnb_log(other, CNNB_LOG_INFO, "still at info");
  cnnb_ctx_set_log_tag(root, "[rank 3]");
  cnnb_log(ctx, CNNB_LOG_ERROR, "tagged");
  cnnb_ctx_destroy(other);
  cnnb_ctx_destroy(ctx);
  cnnb_ctx_destroy(root);
}

START_TEST(log_prefix_and_level) {
  char *text = capture_stderr(emit_levels);
  ck_assert_str_eq(text, "cpu: oneDNN 2.6\ncpu: warning: slow path\ncpu: error: bad thing\n"
                         "cpu: debug: shown at debug\ncnnbench: error: core says hi\n"
                         "other: still at info\n[rank 3] cpu: error: tagged\n");
  free(text);
}
END_TEST

/* A line is never cut, however long the message (a reason at the end of a long path). */
static void emit_long(void) {
  cnnb_ctx *ctx = cnnb_ctx_create("loader", NULL);
  char path[6000];
  memset(path, 'p', sizeof path - 1);
  path[sizeof path - 1] = '\0';
  cnnb_log(ctx, CNNB_LOG_WARN, "%s: the reason at the end", path);
  cnnb_ctx_destroy(ctx);
}

START_TEST(long_lines_are_whole) {
  char *text = capture_stderr(emit_long);
  size_t len = strlen(text);
  ck_assert_uint_eq(len, strlen("loader: warning: ") + 5999 + strlen(": the reason at the end\n"));
  ck_assert_str_eq(text + len - strlen(": the reason at the end\n"), ": the reason at the end\n");
  free(text);
}
END_TEST

/* Each line reaches stderr in one write(2), newline included: under mpirun every rank's
 * stdout and stderr are merged, and a line written in pieces lets another stream's output
 * land inside it. A SOCK_SEQPACKET socket as fd 2 keeps every write a message of its own. */
static void emit_two_lines(void) {
  cnnb_ctx *ctx = cnnb_ctx_create("ps", NULL);
  cnnb_ctx_set_log_tag(ctx, "[rank 1]");
  cnnb_log(ctx, CNNB_LOG_INFO, "applied %d pushes", 10);
  char path[3000]; /* longer than the on-stack buffer */
  memset(path, 'p', sizeof path - 1);
  path[sizeof path - 1] = '\0';
  cnnb_log(ctx, CNNB_LOG_WARN, "%s", path);
  cnnb_ctx_destroy(ctx);
}

START_TEST(each_line_is_one_write) {
  int pair[2];
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(pair[0], 2);
  emit_two_lines();
  dup2(saved, 2);
  close(saved);
  close(pair[0]);
  static char message[8192];
  ssize_t got = recv(pair[1], message, sizeof message - 1, 0);
  ck_assert_int_gt(got, 0);
  message[got] = '\0';
  ck_assert_str_eq(message, "[rank 1] ps: applied 10 pushes\n");
  got = recv(pair[1], message, sizeof message - 1, 0);
  ck_assert_int_eq(got, (ssize_t)(strlen("[rank 1] ps: warning: ") + 2999 + 1));
  ck_assert_int_eq(message[got - 1], '\n');
  ck_assert_int_eq(recv(pair[1], message, sizeof message, 0), 0); /* nothing more */
  close(pair[1]);
}
END_TEST

START_TEST(log_level_names) {
  cnnb_log_level level = CNNB_LOG_INFO;
  ck_assert(cnnb_log_level_parse("debug", &level));
  ck_assert_int_eq(level, CNNB_LOG_DEBUG);
  ck_assert(cnnb_log_level_parse("warn", &level));
  ck_assert_int_eq(level, CNNB_LOG_WARN);
  ck_assert(cnnb_log_level_parse("ERROR", &level));
  ck_assert_int_eq(level, CNNB_LOG_ERROR);
  ck_assert(cnnb_log_level_parse("info", &level));
  ck_assert_int_eq(level, CNNB_LOG_INFO);
  ck_assert(!cnnb_log_level_parse("loud", &level));
  ck_assert(!cnnb_log_level_parse(NULL, &level));
  ck_assert_int_eq(level, CNNB_LOG_INFO);
}
END_TEST

START_TEST(status_and_kind_names) {
  ck_assert_str_eq(cnnb_status_name(CNNB_OK), "ok");
  ck_assert_str_eq(cnnb_status_name(CNNB_EINVAL), "invalid argument");
  ck_assert_str_eq(cnnb_status_name(CNNB_ENOMEM), "out of memory");
  ck_assert_str_eq(cnnb_status_name(CNNB_EUNSUPPORTED), "unsupported");
  ck_assert_str_eq(cnnb_status_name(CNNB_EIO), "I/O error");
  ck_assert_str_eq(cnnb_status_name(CNNB_EDATA), "corrupt data");
  ck_assert_str_eq(cnnb_status_name(CNNB_ECOMM), "communication error");
  ck_assert_str_eq(cnnb_status_name(CNNB_EINTERNAL), "internal error");
  ck_assert_str_eq(cnnb_status_name(CNNB_ENOTFOUND), "not found");
  ck_assert_str_eq(cnnb_status_name((cnnb_status)99), "unknown status");
  ck_assert_str_eq(cnnb_kind_name(CNNB_KIND_MODEL), "model");
  ck_assert_str_eq(cnnb_kind_name(CNNB_KIND_DEVICE), "device");
  ck_assert_str_eq(cnnb_kind_name(CNNB_KIND_STRATEGY), "strategy");
  ck_assert_str_eq(cnnb_kind_name(CNNB_KIND_DATASOURCE), "datasource");
  ck_assert_str_eq(cnnb_kind_name(0), "unknown");
  ck_assert_str_eq(cnnb_kind_name(77), "unknown");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ctx");
  TCase *tc = tcase_create("ctx");
  tcase_add_test(tc, first_error_wins_then_context);
  tcase_add_test(tc, error_message_is_bounded);
  tcase_add_test(tc, null_ctx_is_safe);
  tcase_add_test(tc, log_prefix_and_level);
  tcase_add_test(tc, long_lines_are_whole);
  tcase_add_test(tc, each_line_is_one_write);
  tcase_add_test(tc, log_level_names);
  tcase_add_test(tc, status_and_kind_names);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}

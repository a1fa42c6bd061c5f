/* test_dir_lock.c — one writer per directory (core/src/base/dir_lock.c) and the check that
 * a directory can be written (base/writable.c), issue 23's findings 3 and 4 at their
 * source: a second holder is refused at once, naming the first's pid and host, in this
 * process and in another one; a lock left by a holder killed with -9 is taken over with a
 * line naming it; a released lock leaves no file; the write check leaves nothing behind
 * and names the flag, the directory and the reason when it fails. (Through the CLI, with
 * read-only mounts and a non-root user: tests/cli/checkpoint_guard.sh.) */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/dir_lock.h"
#include "base/writable.h"
#include "flags/flags.h"

static char dir[256], lock_path[300];
static cnnb_ctx *ctx;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_dir_lock.XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(lock_path, sizeof lock_path, "%s/%s", dir, CNNB_DIR_LOCK_FILE);
  ctx = cnnb_ctx_create("lock", NULL);
}
static void teardown(void) {
  cnnb_ctx_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[512];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Runs take() with stderr captured into *log (malloc'ed). */
static cnnb_status take_logged(cnnb_dir_lock **lock, char **log) {
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  dup2(fileno(tmp), 2);
  cnnb_clear_error(ctx);
  cnnb_status st = cnnb_dir_lock_take(ctx, "--train_dir", dir, lock);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  long size = ftell(tmp);
  *log = calloc((size_t)size + 1, 1);
  rewind(tmp);
  ck_assert_uint_eq(fread(*log, 1, (size_t)size, tmp), (size_t)size);
  fclose(tmp);
  return st;
}

static void holder_text(long pid, char *buf, size_t size) {
  char host[256];
  ck_assert_int_eq(gethostname(host, sizeof host), 0);
  snprintf(buf, size, "pid %ld on host %s", pid, host);
}

START_TEST(second_holder_refused) {
  cnnb_dir_lock *a = NULL, *b = (cnnb_dir_lock *)1;
  char *log;
  ck_assert_int_eq(take_logged(&a, &log), CNNB_OK);
  ck_assert_str_eq(log, ""); /* a fresh lock: nothing to say */
  free(log);
  char host[256], want[400];
  ck_assert_int_eq(gethostname(host, sizeof host), 0);
  snprintf(want, sizeof want, "pid=%ld host=%s\n", (long)getpid(), host);
  ck_assert_str_eq(read_text(lock_path), want);
  /* A second lock, even in this process (flock is per open file), is refused at once. */
  ck_assert_int_eq(take_logged(&b, &log), CNNB_EIO);
  free(log);
  ck_assert_ptr_null(b);
  holder_text((long)getpid(), want, sizeof want);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(strstr(msg, want) && strstr(msg, "--train_dir=") && strstr(msg, dir) &&
                    strstr(msg, "in use by another run"),
                "%s", msg);
  cnnb_dir_lock_release(a);
  ck_assert_ptr_null(read_text(lock_path)); /* released: the file is gone */
  ck_assert_int_eq(take_logged(&b, &log), CNNB_OK);
  free(log);
  cnnb_dir_lock_release(b);
  cnnb_dir_lock_release(NULL);
}
END_TEST

/* Another process holds it; once that one is killed, its lock file is taken over. */
START_TEST(holder_in_another_process) {
  int ready[2];
  ck_assert_int_eq(pipe(ready), 0);
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    cnnb_dir_lock *l;
    char c = cnnb_dir_lock_take(ctx, "--train_dir", dir, &l) == CNNB_OK ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c = 0;
  ck_assert_int_eq(read(ready[0], &c, 1), 1);
  ck_assert_int_eq(c, 'y');
  cnnb_dir_lock *l = NULL;
  char *log, want[400];
  ck_assert_int_eq(take_logged(&l, &log), CNNB_EIO);
  free(log);
  holder_text((long)child, want, sizeof want);
  ck_assert_msg(strstr(cnnb_error_message(ctx), want), "%s", cnnb_error_message(ctx));
  kill(child, SIGKILL);
  ck_assert_int_eq(waitpid(child, NULL, 0), child);
  ck_assert_int_eq(take_logged(&l, &log), CNNB_OK);
  ck_assert_msg(strstr(log, "taking over") && strstr(log, want) && strstr(log, "which is gone"),
                "%s", log);
  free(log);
  cnnb_dir_lock_release(l);
  close(ready[0]);
  close(ready[1]);
}
END_TEST

/* A lock file whose text is not what a holder writes is still taken over, quoted. */
START_TEST(odd_lock_file_taken_over) {
  FILE *f = fopen(lock_path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("garbage", f);
  ck_assert_int_eq(fclose(f), 0);
  cnnb_dir_lock *l;
  char *log;
  ck_assert_int_eq(take_logged(&l, &log), CNNB_OK);
  ck_assert_msg(strstr(log, "'garbage'"), "%s", log);
  free(log);
  cnnb_dir_lock_release(l);
}
END_TEST

static int entries(const char *path) {
  DIR *d = opendir(path);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

START_TEST(writable_leaves_nothing) {
  ck_assert_int_eq(cnnb_check_writable(ctx, "--train_dir", dir), CNNB_OK);
  ck_assert_int_eq(entries(dir), 0);
  char missing[300];
  snprintf(missing, sizeof missing, "%s/not/there", dir);
  ck_assert_int_eq(cnnb_check_writable(ctx, "--benchmark_log_dir", missing), CNNB_EIO);
  const char *msg = cnnb_error_message(ctx);
  ck_assert_msg(strstr(msg, "--benchmark_log_dir=") && strstr(msg, missing) &&
                    strstr(msg, "cannot write there: creating the test file") &&
                    strstr(msg, "No such file or directory"),
                "%s", msg);
  cnnb_clear_error(ctx);
  /* Refused by the directory's mode, where the process obeys it (root does not). */
  if (geteuid() != 0) {
    ck_assert_int_eq(chmod(dir, 0555), 0);
    ck_assert_int_eq(cnnb_check_writable(ctx, "--train_dir", dir), CNNB_EIO);
    ck_assert_ptr_nonnull(strstr(cnnb_error_message(ctx), "Permission denied"));
    ck_assert_int_eq(chmod(dir, 0755), 0);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("dir_lock");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, second_holder_refused);
  tcase_add_test(tc, holder_in_another_process);
  tcase_add_test(tc, odd_lock_file_taken_over);
  tcase_add_test(tc, writable_leaves_nothing);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

/* test_interrupt.c — SIGINT and SIGTERM as a request to stop (core/src/base/interrupt.c),
 * each case in a child process of its own (the module's state is once per process):
 * before the run arms it a signal ends the process by that signal, as by default; armed,
 * the first is noted and the process goes on; a second ends it at once, unless it is the
 * same signal within half a second (one request delivered twice, as Slurm's time limit
 * does: SIGTERM, SIGCONT, SIGTERM), SIGINT (a keyboard's) excepted; a signal the
 * process inherited as ignored stays ignored; cnnb_interrupt_stop and _exit end a process
 * by the signal the ranks agreed on. (Through the CLI, training, --eval, --input_only and
 * mpirun: tests/cli/interrupt.sh.) */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/interrupt.h"

static void pause_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* Waits up to 5 s for the flag to read signo. */
static int wait_flag(int signo) {
  for (int i = 0; i < 500; i++) {
    if (cnnb_interrupt_signal() == signo) return 1;
    pause_ms(10);
  }
  return 0;
}

/* Runs body in a child and returns its wait status. */
static int in_child(void (*body)(void)) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    alarm(20); /* a hung child fails by SIGALRM, not by the test's timeout */
    body();
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return status;
}

static void killed_unarmed(void) {
  cnnb_interrupt_prepare();
  kill(getpid(), SIGTERM);
  pause_ms(2000);
  _exit(3); /* still alive: wrong */
}

static void first_noted(void) {
  cnnb_interrupt_prepare();
  cnnb_interrupt_arm();
  if (cnnb_interrupt_signal() != 0) _exit(4);
  kill(getpid(), SIGINT);
  if (!wait_flag(SIGINT)) _exit(5);
  if (cnnb_interrupt_stopped()) _exit(6); /* noted, not yet acted on */
  _exit(0);
}

static void second_kills(void) {
  cnnb_interrupt_prepare();
  cnnb_interrupt_arm();
  kill(getpid(), SIGTERM);
  if (!wait_flag(SIGTERM)) _exit(5);
  kill(getpid(), SIGINT);
  pause_ms(2000);
  _exit(3);
}

/* SIGTERM, SIGCONT, SIGTERM within milliseconds: one request; the run goes on. The same
 * signal a second later is a second request, and ends the process. */
static void repeat_is_one_request(void) {
  cnnb_interrupt_prepare();
  cnnb_interrupt_arm();
  kill(getpid(), SIGTERM);
  if (!wait_flag(SIGTERM)) _exit(5);
  kill(getpid(), SIGCONT);
  kill(getpid(), SIGTERM);
  pause_ms(300);
  if (cnnb_interrupt_signal() != SIGTERM) _exit(9);
  pause_ms(400); /* past the window */
  kill(getpid(), SIGTERM);
  pause_ms(2000);
  _exit(3);
}

static void ignored_stays(void) {
  signal(SIGINT, SIG_IGN);
  cnnb_interrupt_prepare();
  cnnb_interrupt_arm();
  kill(getpid(), SIGINT);
  pause_ms(200);
  _exit(cnnb_interrupt_signal() == 0 ? 0 : 7);
}

static void stop_then_exit(void) {
  cnnb_interrupt_prepare();
  cnnb_interrupt_arm();
  cnnb_interrupt_stop(SIGTERM); /* another rank's signal */
  if (cnnb_interrupt_signal() != SIGTERM || !cnnb_interrupt_stopped()) _exit(8);
  cnnb_interrupt_exit(SIGTERM);
  _exit(3);
}

START_TEST(unarmed_signal_ends_the_process) {
  int st = in_child(killed_unarmed);
  ck_assert(WIFSIGNALED(st));
  ck_assert_int_eq(WTERMSIG(st), SIGTERM);
}
END_TEST

START_TEST(armed_first_signal_is_noted) {
  int st = in_child(first_noted);
  ck_assert(WIFEXITED(st));
  ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

START_TEST(second_signal_ends_the_process) {
  int st = in_child(second_kills);
  ck_assert(WIFSIGNALED(st));
  ck_assert_int_eq(WTERMSIG(st), SIGINT);
}
END_TEST

START_TEST(repeated_signal_within_the_window_is_one_request) {
  int st = in_child(repeat_is_one_request);
  ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
                "the repeat ended the run, or the later one did not (status %d, exit %d)", st,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
END_TEST

START_TEST(inherited_ignore_kept) {
  int st = in_child(ignored_stays);
  ck_assert(WIFEXITED(st));
  ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

START_TEST(stop_and_exit_by_the_agreed_signal) {
  int st = in_child(stop_then_exit);
  ck_assert(WIFSIGNALED(st));
  ck_assert_int_eq(WTERMSIG(st), SIGTERM);
  ck_assert_str_eq(cnnb_interrupt_name(SIGINT), "SIGINT");
  ck_assert_str_eq(cnnb_interrupt_name(SIGTERM), "SIGTERM");
}
END_TEST

int main(void) {
  Suite *s = suite_create("interrupt");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, unarmed_signal_ends_the_process);
  tcase_add_test(tc, armed_first_signal_is_noted);
  tcase_add_test(tc, second_signal_ends_the_process);
  tcase_add_test(tc, repeated_signal_within_the_window_is_one_request);
  tcase_add_test(tc, inherited_ignore_kept);
  tcase_add_test(tc, stop_and_exit_by_the_agreed_signal);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

/* crash_guard.c — the fatal-signal handler that names the plugin at fault (crash_guard.h).
 *
 * The handler only formats into a stack buffer and write()s it: both async-signal-safe.
 * It then puts back the action that was there before (the default, or a sanitizer's) and
 * lets the signal happen again: a fault re-executes the faulting instruction when the
 * handler returns, and a signal someone sent (abort's raise) is raised once more. */
#define _XOPEN_SOURCE 700 /* sigaltstack, SA_ONSTACK */
#include "base/crash_guard.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int guarded[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
enum { NUM_GUARDED = sizeof guarded / sizeof guarded[0] };

static _Thread_local cnnb_crash_mark current;
static struct sigaction previous_action[NUM_GUARDED];

cnnb_crash_mark cnnb_crash_enter(const char *where, const char *what, const char *detail) {
  cnnb_crash_mark before = current;
  current = (cnnb_crash_mark){where, what, detail};
  return before;
}

void cnnb_crash_leave(cnnb_crash_mark previous) { current = previous; }

static const char *signal_name(int signo) {
  switch (signo) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic fault)";
    case SIGABRT: return "SIGABRT (abort)";
  }
  return "a fatal signal";
}

/* Appends s to buf[*len..size), always leaving it terminated. */
static void put(char *buf, int size, int *len, const char *s) {
  while (s && *s && *len < size - 1) buf[(*len)++] = *s++;
  buf[*len] = '\0';
}

int cnnb_crash_format(char *buf, int size, int signo, const cnnb_crash_mark *m) {
  int len = 0;
  if (size <= 0) return 0;
  buf[0] = '\0';
  put(buf, size, &len, "cnnbench: crashed with ");
  put(buf, size, &len, signal_name(signo));
  put(buf, size, &len, " in ");
  put(buf, size, &len, m->where);
  if (m->what) {
    put(buf, size, &len, ", in ");
    put(buf, size, &len, m->what);
  }
  if (m->detail) {
    put(buf, size, &len, " of '");
    put(buf, size, &len, m->detail);
    put(buf, size, &len, "'");
  }
  put(buf, size, &len,
      ": the plugin has a bug; take its file off the plugin path "
      "(CNNB_PLUGIN_PATH, --plugin) or report it to its authors\n");
  return len;
}

static void on_fatal_signal(int signo, siginfo_t *info, void *context) {
  (void)context;
  cnnb_crash_mark m = current;
  if (m.where) {
    char line[1024];
    int len = cnnb_crash_format(line, (int)sizeof line, signo, &m);
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)len);
    (void)ignored;
  }
  for (int i = 0; i < NUM_GUARDED; i++)
    if (guarded[i] == signo) sigaction(signo, &previous_action[i], NULL);
  /* A fault comes back by itself when we return; a sent signal must be sent again. */
  if (!info || info->si_code <= 0) raise(signo);
}

void cnnb_crash_guard_install(void) {
  /* Once per process: a second install would save our own handler as "previous". */
  static bool installed;
  if (installed) return;
  installed = true;
  /* A stack overflow faults on the stack itself: the handler needs one of its own. */
  static stack_t alt;
  alt.ss_size = 64 * 1024;
  alt.ss_sp = malloc(alt.ss_size);
  if (alt.ss_sp) sigaltstack(&alt, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < NUM_GUARDED; i++) sigaction(guarded[i], &sa, &previous_action[i]);
}

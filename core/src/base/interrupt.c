/* interrupt.c — SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 taken by a thread of their
 * own (interrupt.h).
 *
 * The waiting thread is the only one with the signals unblocked in sigwait, so no
 * handler ever interrupts a kernel. Before the run arms it, or once a first signal was
 * noted (the user will not wait for the step or the save), it puts the default action
 * back, unblocks the signal in itself and raises it again: the process ends by it.
 *
 * One request can arrive twice: Slurm ends a step at its time limit, and scancel ends
 * it, with SIGTERM, SIGCONT, SIGTERM to each task within milliseconds (slurmstepd signals
 * the task and then its process group). The same signal again within REPEAT_WINDOW_NS of
 * the first is that one request, not a second; a different signal, or the same one later,
 * is. SIGINT has no window: it comes from a keyboard, where a second Ctrl-C, however
 * quick, means "now". */
#define _POSIX_C_SOURCE 200809L
#include "base/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

enum { REPEAT_WINDOW_NS = 500 * 1000 * 1000 };

static atomic_int received;      /* the first signal's number; 0: none */
static atomic_llong received_at; /* when it came (CLOCK_MONOTONIC, ns) */
static atomic_int stopped;       /* the run stopped for it */
static atomic_int armed;         /* the steps have begun */
static sigset_t waited;          /* the signals of `handled`, less those inherited as ignored */

/* Ends the process by signo, from the thread that calls it. */
static void die_by(int signo) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, NULL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signo);
  pthread_sigmask(SIG_UNBLOCK, &one, NULL);
  raise(signo);
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *wait_for_signals(void *unused) {
  (void)unused;
  for (;;) {
    int signo = 0;
    if (sigwait(&waited, &signo) != 0) continue;
    if (!atomic_load(&armed)) die_by(signo);
    int none = 0;
    long long at = now_ns();
    if (atomic_compare_exchange_strong(&received, &none, signo)) {
      atomic_store(&received_at, at);
      continue;
    }
    if (signo != SIGINT && signo == atomic_load(&received) &&
        at - atomic_load(&received_at) < REPEAT_WINDOW_NS)
      continue; /* the first request delivered twice */
    die_by(signo);
  }
  return NULL;
}

/* SIGINT first: a run's ranks that got different signals agree on the first of this
 * list that any of them got (cnnb_interrupt_index). */
static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
#define NUM_HANDLED ((int)(sizeof handled / sizeof handled[0]))
_Static_assert(sizeof handled / sizeof handled[0] == CNNB_INTERRUPT_SIGNALS, "interrupt.h's count");

int cnnb_interrupt_signal_at(int index) {
  return index >= 0 && index < NUM_HANDLED ? handled[index] : 0;
}

int cnnb_interrupt_index(int signo) {
  for (int i = 0; i < NUM_HANDLED; i++)
    if (handled[i] == signo) return i;
  return -1;
}

void cnnb_interrupt_prepare(void) {
  static bool prepared;
  if (prepared) return;
  prepared = true;
  sigemptyset(&waited);
  for (int i = 0; i < NUM_HANDLED; i++) {
    struct sigaction old;
    if (sigaction(handled[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaddset(&waited, handled[i]);
  }
  sigset_t before;
  if (pthread_sigmask(SIG_BLOCK, &waited, &before) != 0) return;
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    started = pthread_create(&thread, &attr, wait_for_signals, NULL) == 0;
    pthread_attr_destroy(&attr);
  }
  /* No thread to take them: the signals keep their default action. */
  if (!started) pthread_sigmask(SIG_SETMASK, &before, NULL);
}

void cnnb_interrupt_arm(void) { atomic_store(&armed, 1); }

int cnnb_interrupt_signal(void) { return atomic_load(&received); }

void cnnb_interrupt_stop(int signo) {
  atomic_store(&received_at, now_ns());
  atomic_store(&received, signo);
  atomic_store(&stopped, 1);
}

int cnnb_interrupt_stopped(void) { return atomic_load(&stopped); }

const char *cnnb_interrupt_name(int signo) {
  switch (signo) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
  }
  return "a signal";
}

int cnnb_interrupt_exit(int signo) {
  die_by(signo);
  return 128 + signo;
}

/* interrupt.h — SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 as a request to stop (a
 * batch system's warning before a time limit or a preemption: Slurm's scancel --signal,
 * sbatch --signal=USR1@120, a closed terminal's SIGHUP): once the run's steps have begun,
 * the first one is noted and the step loop stops after the step in progress, saves and
 * reports as at its end (run/interrupted.h); a second one ends the process at once, by
 * that signal. Before the steps (the setup) a signal ends the process at once, as it
 * always did: nothing would be lost.
 *
 * No handler runs on the threads that compute. oneDNN's JIT GEMM kernels (2.x, Debian
 * 12's) point the stack pointer into the heap while they run, and a signal delivered
 * there writes its frame over the heap (uxlfoundation/oneDNN#4845): glibc aborts on the
 * next free. So every thread blocks these signals (they inherit the mask of the thread
 * that made them) and one thread of their own takes them with sigwait and sets the
 * flag the step loop reads between steps. */
#ifndef CNNB_INTERRUPT_H
#define CNNB_INTERRUPT_H

/* How many signals stop a run, and each by its index, the order in which ranks that got
 * different ones agree on one (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2: the first any
 * rank got). cnnb_interrupt_index is -1 for another signal. */
enum { CNNB_INTERRUPT_SIGNALS = 5 };
int cnnb_interrupt_signal_at(int index);
int cnnb_interrupt_index(int signo);

/* Blocks those signals in the calling thread and starts the thread that waits for
 * them. Call once, from the main thread, before any other thread exists (before any
 * plugin is loaded). A signal the process inherited as ignored (a shell's background
 * job, nohup) stays ignored, as Python leaves it. Without this call (a tool that drives
 * a run itself), they keep their default action. */
void cnnb_interrupt_prepare(void);

/* From now on (the run's steps), the first signal is a request to stop. */
void cnnb_interrupt_arm(void);

/* The signal that asked the process to stop (one of those above), or 0: none yet. */
int cnnb_interrupt_signal(void);

/* The run stopped early for `signo` (every rank of a job calls it with the signal the
 * ranks agreed on, whether or not it received one itself): cnnb_interrupt_signal then
 * returns it, so every rank ends the same way, and a later signal ends the process at
 * once. */
void cnnb_interrupt_stop(int signo);
/* Whether cnnb_interrupt_stop was called: a signal that came after the run's last step
 * stopped nothing. */
int cnnb_interrupt_stopped(void);

/* "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2" (or "a signal"). */
const char *cnnb_interrupt_name(int signo);

/* Ends the process by `signo` with its default action, as a shell expects of a command
 * stopped by Ctrl-C (status 128 + signo: 130 SIGINT, 143 SIGTERM, 129 SIGHUP, 138 SIGUSR1,
 * 140 SIGUSR2); returns 128 + signo only if the
 * signal did not end it. */
int cnnb_interrupt_exit(int signo);

#endif

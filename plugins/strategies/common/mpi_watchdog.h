/* mpi_watchdog.h — a deadline for the MPI calls that take no timeout.
 *
 * MPI_Init_thread, the communicators' set-up after it and MPI_Finalize block until every
 * rank of the job takes part, and MPI gives them no deadline: a rank stopped (SIGSTOP)
 * before it joined, or after the run's last exchange, would keep every other rank, and
 * mpirun with them, waiting forever. A watchdog is a thread that waits beside such a
 * call: stopped in time, it does nothing; if the call has not returned by the deadline,
 * it writes its message on stderr and ends the process with _exit(1), the one way out of
 * a call that never returns (mpirun then ends the job). Nothing of the run is lost by it:
 * it guards only the job's first contact and its very end, after every file is written.
 *
 * One watchdog guards one call at a time, from the thread that makes the call. */
#ifndef CNNB_STRATEGY_MPI_WATCHDOG_H
#define CNNB_STRATEGY_MPI_WATCHDOG_H

typedef struct mpi_watchdog mpi_watchdog;

/* Starts the deadline: `seconds` from now, `message` (one line, copied; a newline is
 * added) is written and the process exits 1. NULL when no thread could be started: the
 * call is then unguarded, as MPI leaves it (the caller logs that). */
mpi_watchdog *mpi_watchdog_start(double seconds, const char *message);

/* The call returned in time: the thread ends without a word. NULL is a no-op. */
void mpi_watchdog_stop(mpi_watchdog *dog);

#endif

/* openmp_env.h — tf_cnn_benchmarks' --mkl: its Intel OpenMP settings (--kmp_blocktime,
 * --kmp_affinity, --kmp_settings, --num_intra_threads) given to the OpenMP runtime the
 * cpu device's oneDNN runs on, GNU OpenMP (libgomp), in that runtime's own variables.
 *
 * tf sets KMP_* in its environment before TensorFlow's Intel OpenMP starts. libgomp reads
 * its environment once, when it is loaded, and plugin discovery has loaded it by the time
 * the flags are read; so a run whose flags ask for other settings than the environment
 * holds restarts itself once (execv of /proc/self/exe, same arguments), before any
 * plugin did any work, with the variables set. The restarted process finds them set and
 * goes on. Host-internal. */
#ifndef CNNB_OPENMP_ENV_H
#define CNNB_OPENMP_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "flags/flags.h"

/* One variable to set to `value`, or to remove (`unset`). */
typedef struct cnnb_openmp_var {
  const char *name;
  char value[256];
  bool unset;
} cnnb_openmp_var;

#define CNNB_OPENMP_MAX_VARS 8

typedef struct cnnb_openmp_env {
  cnnb_openmp_var v[CNNB_OPENMP_MAX_VARS];
  size_t n;
} cnnb_openmp_env;

/* The GNU OpenMP variables for tf's settings (pure, for the unit test):
 *   blocktime_ms 0        -> OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=0 (threads sleep at
 *                            once, as KMP_BLOCKTIME=0);
 *   blocktime_ms N > 0    -> GOMP_SPINCOUNT = N ms of libgomp's spin loop on this CPU
 *                            (spins_per_ms), OMP_WAIT_POLICY unset;
 *   affinity (KMP_AFFINITY's syntax: modifiers, a type, permute and offset):
 *     compact            -> OMP_PROC_BIND=close, OMP_PLACES=threads (permute 0) or cores
 *                           (permute >= 1, or granularity=core: consecutive threads on
 *                           different cores first, as Intel's compact,1);
 *     scatter, balanced  -> OMP_PROC_BIND=spread (places as above);
 *     none, disabled     -> OMP_PROC_BIND=false, OMP_PLACES unset;
 *     explicit           -> GOMP_CPU_AFFINITY from proclist=[0,2,4-7];
 *     verbose            -> OMP_DISPLAY_AFFINITY=TRUE;
 *   settings 1           -> OMP_DISPLAY_ENV=VERBOSE (libgomp prints what it read, as
 *                           KMP_SETTINGS=1), 0 -> unset;
 *   intra_threads > 0    -> OMP_NUM_THREADS.
 * An affinity it cannot express in libgomp's variables (an offset, a proclist with sets,
 * an unknown word) is CNNB_EINVAL with a message naming --kmp_affinity. */
cnnb_status cnnb_openmp_env_from_tf(long long blocktime_ms, const char *affinity,
                                    long long settings, long long intra_threads,
                                    double spins_per_ms, cnnb_openmp_env *env, char *err,
                                    size_t err_size);

/* How many iterations of libgomp's spin loop (an atomic load and a pause) take a
 * millisecond on this CPU, measured over a few milliseconds. */
double cnnb_openmp_spins_per_ms(void);

/* --mkl given: computes the variables from the flags, and when the environment does not
 * already hold them, says so on stderr in one line, sets them and restarts the process
 * (returns only if the restart failed: a warning, and the run goes on with the
 * runtime's settings as they were). Without --mkl, or with the environment already
 * right: CNNB_OK at once. A bad --kmp_* value: CNNB_EINVAL and the message in err.
 * no_restart: NULL, or why the process must not restart (a flagfile the restarted
 * process could not read again): then a warning says so, and the run goes on. */
cnnb_status cnnb_openmp_env_apply(const cnnb_flags *flags, char **argv, const char *no_restart,
                                  char *err, size_t err_size);

#endif

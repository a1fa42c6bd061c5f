/* eval_watch.h — --eval --eval_interval_secs=N: evaluate each new checkpoint of
 * --train_dir as it appears, as tf_cnn_benchmarks' _run_eval loop does for a training run
 * writing them elsewhere. Every N seconds it looks for a checkpoint newer than the last
 * one evaluated (by file name: a look costs no read) and, when there is one, runs one
 * whole --eval (cnnb_benchmark_run: the newest checkpoint that reads back whole, its
 * report and log). tf evaluates the latest checkpoint at every interval, new or not; here
 * one checkpoint is evaluated once. It waits until SIGINT or SIGTERM (tf: until killed),
 * which stop an evaluation after its step in progress, or the wait at once; the process
 * then ends by the signal (130 / 143). Host-internal. */
#ifndef CNNB_RUN_EVAL_WATCH_H
#define CNNB_RUN_EVAL_WATCH_H

#include <stdio.h>

#include "run/benchmark.h"

/* cfg: mode CNNB_MODE_EVAL, train_dir set, eval_interval_secs > 0. Returns the first
 * failed evaluation's status (its message in err, as cnnb_benchmark_run), or CNNB_OK
 * once a signal stopped it. A job of several processes (mpirun) evaluates once and
 * fails after it: MPI starts once per process. */
cnnb_status cnnb_eval_watch(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                            FILE *out, char *err, size_t err_size, const cnnb_run_hooks *hooks);

#endif

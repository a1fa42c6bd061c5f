/* evaluation.h — evaluating the model in memory while it trains
 * (--eval_during_training_every_n_steps / _every_n_epochs, as tf_cnn_benchmarks).
 *
 * A device instance computes either training or inference kernels (cnnb_device_config.
 * training, fixed at create: batch norm on the batch's statistics and dropout on, or
 * moving statistics and dropout off), so the training executor cannot run an inference
 * forward. Each replica therefore gets a second instance of the same device in
 * inference mode, an executor of the same graph on it (forward only: no gradient arena,
 * a smaller activation arena) and a datasource instance reading the validation split.
 * Before each evaluation the training executor's parameter and statistics arenas are
 * copied into the evaluation executor's through the device's own copies (a bounded host
 * buffer): the ABI gives two instances no way to share an arena, and a copy per
 * evaluation is small next to the evaluation itself. Host-internal. */
#ifndef CNNB_EVALUATION_H
#define CNNB_EVALUATION_H

#include <stdbool.h>
#include <stdio.h>

#include "run/run.h"

/* When to evaluate, in timed training steps (1-based, warm-up excluded). */
typedef struct cnnb_eval_schedule {
  int64_t every_n_steps;      /* > 0: after steps n, 2n, ... */
  double every_n_epochs;      /* > 0: after the step that completes n, 2n, ... epochs */
  int64_t examples_per_epoch; /* the training split's (needed with every_n_epochs) */
  int64_t global_batch;       /* images per step over every replica and rank */
  int64_t num_batches;        /* timed steps of the run */
  /* --eval_during_training_at_specified_steps / _epochs (tf: a set of steps). */
  const int64_t *at_steps;
  size_t at_steps_count;
  const double *at_epochs;
  size_t at_epochs_count;
} cnnb_eval_schedule;

/* Whether to evaluate after timed step `step`. Never after the last step: the final
 * evaluation follows the run's total (tf_cnn_benchmarks' "final evaluation"). Epochs
 * become steps as tf_cnn_benchmarks makes them: n, 2n, ... below the run's epochs, each
 * at (int)(e * examples + batch - 1) / batch. */
bool cnnb_eval_schedule_due(const cnnb_eval_schedule *s, int64_t step);

/* At setup, after the training replicas: run->evaluation (this module's state: per
 * replica an evaluation device, executor and validation datasource; the batches per
 * evaluation: --num_eval_batches, --num_eval_epochs over the validation split, one
 * validation epoch when the datasource knows its size, else the training's timed steps),
 * and the check that --eval_during_training_every_n_epochs has an epoch to count. */
cnnb_status cnnb_evaluation_prepare(cnnb_run *run);
/* Takes the evaluation instances apart (their input threads first); NULL is fine. */
void cnnb_evaluation_free(cnnb_run *run, cnnb_evaluation *e);

/* Examples the validation datasources skipped as unreadable, summed over replicas. */
int64_t cnnb_evaluation_skipped_examples(const cnnb_run *run);

/* Whether the run evaluates after timed step `step` (cnnb_eval_schedule_due). */
bool cnnb_evaluation_due(const cnnb_run *run, int64_t step);

/* What one evaluation measured, the same on every rank. */
typedef struct cnnb_eval_result {
  int64_t top1_hits, top5_hits, examples;
  double top1, top5; /* fractions of examples */
} cnnb_eval_result;

/* One evaluation of the current parameters after timed step `step` (global step
 * `global_step`, warm-up and a resumed checkpoint's steps included): every replica's batches
 * per evaluation, hits summed over replicas and ranks (collective), and on `out` (rank 0's;
 * NULL elsewhere) tf_cnn_benchmarks' lines: "Running evaluation at global_step G" ("Running
 * final evaluation ..." when `final`), "B<TAB>X examples/sec" every --display_every batches,
 * "Accuracy @ 1 = ... Accuracy @ 5 = ... [N examples]". result (may be NULL) receives the
 * sums. */
cnnb_status cnnb_evaluation_run(cnnb_run *run, int64_t step, int64_t global_step, bool final,
                                FILE *out, cnnb_eval_result *result);

#endif

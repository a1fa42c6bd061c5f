/* summaries.h — a run's TensorBoard events (--summary_verbosity, --save_summaries_steps,
 * --eval_dir), as tf_cnn_benchmarks writes them through tf.summary.FileWriter, so
 * `tensorboard --logdir=DIR` shows the run. Host-internal.
 *
 * Training (--summary_verbosity >= 1, --train_dir, --save_summaries_steps n > 0): every
 * n-th timed step writes one event into --train_dir's events file at the global step
 * after its update, with tf_cnn_benchmarks' tags: total_loss, learning_rate, loss_scale
 * and loss_scale_normal_steps (fp16 loss scaling; the second when it is automatic),
 * top_1_accuracy and top_5_accuracy (with --print_training_accuracy), and images/sec
 * (the step line's: tf_cnn_benchmarks has no such summary; its Supervisor's
 * global_step/sec is written as well, from the same rate).
 * Evaluation (--eval, --eval_during_training_*): eval/Accuracy@1 and eval/Accuracy@5 at
 * the evaluated global step, into --eval_dir when given, else --train_dir/eval with
 * --summary_verbosity >= 1 (its own folder, so TensorBoard shows it as a run of its own).
 * Each file starts with a SessionLog START at the step the run begins from.
 *
 * Only rank 0 writes (tf_cnn_benchmarks' chief). Levels 2 and 3 (tf's histograms and
 * images) write level 1's scalars, said once; a level with nothing to write here (no
 * --train_dir, no --save_summaries_steps) is said once as well. */
#ifndef CNNB_SUMMARIES_H
#define CNNB_SUMMARIES_H

#include <stdbool.h>
#include <stdint.h>

#include "report/benchmark_log.h"
#include "run/run.h"

/* Setup, once the rank is known: run->summaries with the events files opened (their
 * directories made), or NULL when the run writes none. An events file that cannot be
 * written stops the run here, naming the flag and the path (CNNB_EIO). */
cnnb_status cnnb_summaries_open(cnnb_run *run);
/* Setup's end, once the step the run starts from is known (a resumed checkpoint's):
 * each file's SessionLog START. */
cnnb_status cnnb_summaries_start(cnnb_run *run);
/* Closes the files (a failure to is a warning: every event was flushed when written). */
void cnnb_summaries_free(cnnb_run *run);

/* Whether timed step `step` (1-based) writes the training scalars. */
bool cnnb_summaries_due(const cnnb_run *run, int64_t step);
/* The training scalars of a due step, from its metrics (the benchmark log's record of
 * it: one source for both). */
cnnb_status cnnb_summaries_step(cnnb_run *run, const cnnb_benchmark_log_step *m);
/* An evaluation's accuracy (fractions) at global step `global_step`. */
cnnb_status cnnb_summaries_eval(cnnb_run *run, int64_t global_step, double top1, double top5);

#endif

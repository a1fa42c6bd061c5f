/* benchmark_log.h — --benchmark_log_dir: a machine-readable record of one run, as JSON
 * lines, beside the console report (which stays tf_cnn_benchmarks' format for its
 * parsers). Host-internal.
 *
 * Each rank writes its own file, DIR/benchmark_run.rank<R>.jsonl (DIR is created when
 * missing; an existing file is replaced). One JSON object per line, in this order:
 *   "run"      once, before the first step: version, command line, every flag, the
 *              resolved run, the machine, the plugins and their versions;
 *   "step"     once per displayed step (the steps the report prints a line for), with
 *              what this rank measured;
 *   "eval", "checkpoint"  as they happen;
 *   "summary"  once, last: the total, and "ok" or the failure.
 * Every record has "record" (its kind), "time" (Unix seconds) and "rank". The keys are
 * a stable schema, documented in docs/checkpoints-and-logs.md ("Benchmark log"): keys are only ever
 * added.
 *
 * Every line is formatted whole and written at once (line_file.h), so a run that is
 * killed leaves a file of whole lines, readable up to its last step, and a write the
 * file system takes only part of (a full disk) is cut back to the last whole line. A
 * line that cannot be written before the run's first step (the run record, or
 * benchmark_run.log) makes the function return CNNB_EIO with the path in the run's
 * error, as an unwritable DIR does. After it, the log stops instead (no file of DIR is
 * written again) and the run goes on: one warning then names the file and the reason,
 * and the summary's place gets a second one with the count of records lost. A full disk
 * under the log should not cost the training, and the checkpoints, it only records.
 *
 * Rank 0 also writes tf_cnn_benchmarks' own benchmark_run.log and metric.log into DIR
 * (tf_logger.h), from the same records.
 *
 * Every function accepts log == NULL (no --benchmark_log_dir) and then does nothing, so
 * call sites need no test of their own. */
#ifndef CNNB_BENCHMARK_LOG_H
#define CNNB_BENCHMARK_LOG_H

#include <jansson.h>
#include <stdint.h>

#include "config/run_config.h"
#include "config/run_facts.h"
#include "flags/flags.h"

typedef struct cnnb_benchmark_log cnnb_benchmark_log;

/* Creates `dir` (and its parents) when missing and opens this rank's file for writing:
 * DIR/benchmark_run.rank<N>.jsonl, or under Slurm DIR/benchmark_run.<job_tag>.rank<N>.jsonl
 * (run_config.h's job_tag; "" or NULL: none). On failure: CNNB_EIO in ctx's error, naming
 * --benchmark_log_dir and the path that could not be made or written, and *log NULL. */
cnnb_status cnnb_benchmark_log_open(cnnb_ctx *ctx, const char *dir, const char *job_tag,
                                    int32_t rank, cnnb_benchmark_log **log);
/* Writes the summary if none was written yet (status "closed before the run ended": a
 * caller that failed without saying so), closes the file and frees the log. */
void cnnb_benchmark_log_close(cnnb_benchmark_log *log);
/* The file's path ("" for NULL). */
const char *cnnb_benchmark_log_path(const cnnb_benchmark_log *log);

/* The "run" record, from the ready run (after its setup's last step): the configuration,
 * the facts setup resolved and every flag of `flags`. */
cnnb_status cnnb_benchmark_log_run(cnnb_benchmark_log *log, const cnnb_run_config *cfg,
                                   const cnnb_run_facts *facts, const cnnb_flags *flags);

/* One displayed step, as this rank saw it. NaN in a double (no accuracy computed, no
 * trainer) is written as null. */
typedef struct cnnb_benchmark_log_step {
  int64_t step;                      /* 1-based timed step, as the report's step line */
  int64_t global_step;               /* optimizer steps taken so far, warm-up included */
  double images_per_sec;             /* the step line's: mean over the timed steps so far */
  double images_per_sec_uncertainty; /* its "+/-" */
  double jitter;                     /* its "(jitter = ...)" */
  double loss;                       /* total_loss, as printed */
  double top1, top5;                 /* fractions; NaN when not computed */
  double learning_rate;              /* the rate this step's update used; NaN without updates */
  double loss_scale;                 /* the scale this step's backward used; NaN without updates */
  double step_seconds;               /* this step's timed seconds */
} cnnb_benchmark_log_step;
cnnb_status cnnb_benchmark_log_step_record(cnnb_benchmark_log *log,
                                           const cnnb_benchmark_log_step *step);

/* An evaluation's result: after timed step `step` (the model of global step
 * `global_step`), top-1 / top-5 as fractions over `examples` examples (the world's, as
 * the report's accuracy line). */
cnnb_status cnnb_benchmark_log_eval(cnnb_benchmark_log *log, int64_t step, int64_t global_step,
                                    double top1, double top5, int64_t examples);
/* A checkpoint written after timed step `step` to `path`, taking `seconds`. */
cnnb_status cnnb_benchmark_log_checkpoint(cnnb_benchmark_log *log, int64_t step, const char *path,
                                          double seconds);

/* The run's total, kept for the summary: the world's images/sec as the report prints it,
 * and this rank's images, timed seconds and timed steps. */
void cnnb_benchmark_log_total(cnnb_benchmark_log *log, double images_per_sec, double images,
                              double seconds, int64_t steps);
/* Adds every key of `extras` (a JSON object; time-to-accuracy, ...) to the summary: a
 * key added before is replaced, one the summary writes itself ("status", ...) is not.
 * The values are shared, not copied: the caller keeps (and decrefs) its own reference.
 * CNNB_EINVAL when extras is not an object. */
cnnb_status cnnb_benchmark_log_summary_extras(cnnb_benchmark_log *log, json_t *extras);
/* The "summary" record, once: status "ok" when `error` is NULL, else the error message.
 * Totals not given (a run that failed before them) are null. */
cnnb_status cnnb_benchmark_log_summary(cnnb_benchmark_log *log, const char *error);

#endif

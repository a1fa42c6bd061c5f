/* report.h — the console report, in tf_cnn_benchmarks' format so its parsers (test_util.py's
 * get_training_outputs_from_logs and get_evaluation_outputs_from_logs) keep working on
 * cnnbench output. Everything here goes to stdout, tf's progress lines included, where tf
 * prints them ("Generating training model", "Running warm up", "Done warm up", "Running
 * evaluation at global_step N", ...):
 *
 *   cnnbench:    0.1.0
 *   Model:       trivial
 *   Dataset:     imagenet (synthetic)
 *   Mode:        training
 *   Batch size:  32 global
 *                32 per device
 *   Num batches: 100
 *   Num epochs:  0.00
 *   Devices:     ['/cpu:0']
 *                CPU: AMD EPYC 9654 (2 threads, oneDNN 2.6.3, ...)
 *   Data format: NCHW
 *   Optimizer:   sgd
 *   Variables:   independent
 *   ==========
 *   Generating training model
 *   Initializing graph
 *   Running warm up
 *   Done warm up
 *   Step	Img/sec	total_loss
 *   1	images/sec: 12.3 +/- 0.0 (jitter = 0.0)	7.012
 *   10	images/sec: 12.1 +/- 0.1 (jitter = 0.2)	6.901
 *   ----------------------------------------------------------------
 *   total images/sec: 12.10
 *   ----------------------------------------------------------------
 *
 * Statistics are tf_cnn_benchmarks' get_perf_timing() over the timed steps so far:
 * mean = batch / mean(step time), i.e. the harmonic mean of per-step images/sec;
 * uncertainty = population std-dev of images/sec / sqrt(n) (numpy's np.std);
 * jitter = 1.4826 * median absolute deviation of images/sec from their median. */
#ifndef CNNB_REPORT_H
#define CNNB_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cnnb/abi.h>
#include <cnnb/ctx.h>

/* Everything the header block shows. Strings may be NULL (printed as "None", as Python
 * would), except all_reduce, whose NULL omits the line: tf_cnn_benchmarks prints
 * AllReduce only for strategies that all-reduce (replicated and friends). */
typedef struct cnnb_report_header {
  const char *version;  /* cnnbench's version, "0.1.0" */
  const char *model;    /* "resnet50" */
  const char *dataset;  /* "imagenet (synthetic)" */
  const char *mode;     /* tf's: "training" | "forward only" | "evaluation" |
                           "training + evaluation" */
  int64_t global_batch; /* images per step over all devices and processes */
  int64_t per_device_batch;
  int64_t num_batches;
  double num_epochs;          /* num_batches * global_batch / examples per epoch;
                                 NaN (printed "None") when the epoch's size is unknown */
  const char *const *devices; /* "/cpu:0", "/cuda:1", "horovod/cuda:0" ... */
  size_t num_devices;
  const char *device_description; /* the device's own line (its describe()), below the
                                     list, indented like "per device"; NULL omits it */
  const char *data_format;        /* "NCHW" */
  const char *optimizer;          /* "sgd" */
  const char *variable_update;    /* "independent" */
  const char *all_reduce;         /* "nccl"; "" prints None; NULL omits the line */
} cnnb_report_header;

/* The block printed before warm-up, ending with "==========". */
void cnnb_report_print_header(FILE *out, const cnnb_report_header *header);

/* Images/sec of each timed step (warm-up steps excluded). Caller-owned; zero-initialise
 * (or cnnb_step_stats_init) before use, cnnb_step_stats_free after. */
typedef struct cnnb_step_stats {
  double *speeds;
  size_t count, capacity;
  /* --display_perf_ewma, in (0, 1]: cnnb_step_stats_mean weighs step i of n by
   * (1 - ewma)^(n - 1 - i), as tf_cnn_benchmarks' get_perf_timing(ewma_alpha); 0 weighs
   * every step alike. Set after cnnb_step_stats_init. */
  double ewma;
} cnnb_step_stats;

void cnnb_step_stats_init(cnnb_step_stats *s);
void cnnb_step_stats_free(cnnb_step_stats *s);
/* Adds one step's images/sec. CNNB_ENOMEM if it cannot be kept; CNNB_EINVAL if it is not
 * a positive finite number. */
cnnb_status cnnb_step_stats_add(cnnb_step_stats *s, double images_per_sec);
/* Adds one step from its raw numbers: `images` processed in `seconds`. */
cnnb_status cnnb_step_stats_add_step(cnnb_step_stats *s, double images, double seconds);
/* batch / mean(step time), the mean weighted by `ewma` when it is set; 0 when no step
 * has been added. */
double cnnb_step_stats_mean(const cnnb_step_stats *s);
double cnnb_step_stats_stderr(const cnnb_step_stats *s);
double cnnb_step_stats_jitter(const cnnb_step_stats *s);

/* "Step\tImg/sec\ttotal_loss", plus "\ttop_1_accuracy\ttop_5_accuracy" when accuracy is
 * printed (--print_training_accuracy or --forward_only, as tf_cnn_benchmarks). */
void cnnb_report_print_step_header(FILE *out, bool with_accuracy);
/* One progress line for 1-based `step`:
 *   "%d\timages/sec: %.1f +/- %.1f (jitter = %.1f)\t%.3f" [ "\t%.3f\t%.3f" ]
 * The accuracy columns (fractions in [0, 1]) are printed when both are not NaN. */
void cnnb_report_print_step(FILE *out, int64_t step, const cnnb_step_stats *stats, double loss,
                            double top1, double top5);
/* When to print a step line: step 1, then every display_every steps (1-based); with
 * display_every <= 0 only step 1. */
bool cnnb_report_should_display(int64_t step, int64_t display_every);
/* --input_only's lines: "Step\tImg/sec", and the step line above without a loss. */
void cnnb_report_print_input_step_header(FILE *out);
void cnnb_report_print_input_step(FILE *out, int64_t step, const cnnb_step_stats *stats);
/* tf_cnn_benchmarks' evaluation line (_eval_once), under --eval and after each evaluation
 * during training alike:
 *   "Accuracy @ 1 = %.4f Accuracy @ 5 = %.4f [%d examples]"
 * from hits summed over every example evaluated (0 examples print 0). */
void cnnb_report_print_accuracy(FILE *out, int64_t top1_hits, int64_t top5_hits, int64_t examples);
/* An evaluation's progress line every --display_every batches (tf's _eval_once):
 *   "%d\t%.1f examples/sec" */
void cnnb_report_print_eval_step(FILE *out, int64_t step, double examples_per_sec);
/* One of tf_cnn_benchmarks' progress lines ("Running warm up", "Running evaluation at
 * global_step 20", ...), on stdout where tf prints it: on `out` (rank 0's report), flushed;
 * a rank without a report (out NULL) logs it through `log_ctx` instead (stderr, tagged with
 * its rank). */
void cnnb_report_print_progress(FILE *out, const cnnb_ctx *log_ctx, const char *line);
/* "skipped N unreadable examples" when N > 0 (the datasources' stats extension); nothing
 * otherwise. */
void cnnb_report_print_skipped(FILE *out, int64_t skipped);
/* The closing block: 64 dashes, "total images/sec: %.2f", 64 dashes. */
void cnnb_report_print_total(FILE *out, double images_per_sec);
/* The same, with how a total over several processes was made after the number:
 * "total images/sec: 312.40 (2 ranks: ...)"; tools that read the number still do. */
void cnnb_report_print_total_note(FILE *out, double images_per_sec, const char *note);

#endif

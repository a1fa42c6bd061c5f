/* benchmark.c — the step loop of one run and its tf_cnn_benchmarks report.
 *
 * A step: every replica takes a batch and runs forward and backward (buckets go to the
 * strategy as they finish), the strategy finishes averaging, every replica applies its
 * update. Warm-up steps run the same way but are not timed. A step's time covers all of
 * it, ending when the device has finished (synchronize), as tf_cnn_benchmarks times a
 * whole session.run. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "benchmark.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchmark_setup.h"
#include "graph_internal.h"
#include "model_info.h"
#include "report.h"

#define DEFAULT_WARMUP_BATCHES 10

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static cnnb_status print_model_info(cnnb_run *run, FILE *out) {
  cnnb_model_report report;
  cnnb_status st = cnnb_model_info_compute(run->graph, &report);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "--model_info: %s", cnnb_graph_error(run->graph));
  fprintf(out, "Model: %s (%s, %dx%d, %d classes)\n", run->model_name, run->dataset_name,
          run->image_size, run->image_size, run->num_classes);
  cnnb_model_info_print(run->graph, &report, out);
  cnnb_model_report_free(&report);
  return CNNB_OK;
}

static int64_t number_of_batches(const cnnb_run *run) {
  if (cnnb_flags_is_set(run->flags, "num_epochs")) {
    double epochs = cnnb_flags_float(run->flags, "num_epochs");
    double global = (double)run->batch_size * run->num_replicas;
    int64_t n = (int64_t)ceil(epochs * (double)run->examples_per_epoch / global);
    return n > 0 ? n : 1;
  }
  return cnnb_flags_int(run->flags, "num_batches");
}

static void print_header(const cnnb_run *run, FILE *out, int64_t num_batches,
                         const char *optimizer) {
  char dataset[128];
  snprintf(dataset, sizeof dataset, "%s%s", run->dataset_name,
           strcmp(run->datasource_name, "synthetic") == 0 ? " (synthetic)" : "");
  enum { MAX_SHOWN = 64 };
  static char names[MAX_SHOWN][48];
  const char *devices[MAX_SHOWN];
  size_t shown = run->num_replicas < MAX_SHOWN ? (size_t)run->num_replicas : MAX_SHOWN;
  for (size_t i = 0; i < shown; i++) {
    snprintf(names[i], sizeof names[i], "/%s:%zu", run->device_name, i);
    devices[i] = names[i];
  }
  int64_t global = (int64_t)run->batch_size * run->num_replicas;
  const char *all_reduce = cnnb_flags_string(run->flags, "all_reduce_spec");
  cnnb_report_header header = {
      .version = CNNB_VERSION_STRING,
      .model = run->model_name,
      .dataset = dataset,
      .mode = run->evaluation ? "evaluation" : run->training ? "training" : "forward-only",
      .global_batch = global,
      .per_device_batch = run->batch_size,
      .num_batches = num_batches,
      .num_epochs = (double)num_batches * (double)global / (double)run->examples_per_epoch,
      .devices = devices,
      .num_devices = shown,
      .data_format = cnnb_flags_string(run->flags, "data_format"),
      .optimizer = run->training ? optimizer : NULL,
      .variable_update = run->strategy_name,
      .all_reduce = *all_reduce ? all_reduce : NULL,
  };
  cnnb_report_print_header(out, &header);
}

/* Forward and backward of every replica, and the strategy's averaging. */
static cnnb_status compute_gradients(cnnb_run *run, int64_t step) {
  cnnb_status st;
  for (int32_t i = 0; i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    const float *images;
    st = cnnb_prefetch_next(r->input, &images, &r->labels);
    if (st != CNNB_OK) return cnnb_run_fail(run, st, r->datasource_ctx, "reading a batch");
    float scale = r->trainer ? cnnb_trainer_loss_scale(r->trainer) : 1.0f;
    st = cnnb_executor_step(r->executor, images, r->labels, scale, (uint64_t)step);
    if (st != CNNB_OK) return st;
  }
  if (run->bucket_status != CNNB_OK) return run->bucket_status;
  if (!run->training) return CNNB_OK;
  st = run->strategy->finish_step(run->strategy_state, run->grads);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "gradient exchange");
  return CNNB_OK;
}

static cnnb_status apply_updates(cnnb_run *run, int64_t step) {
  for (int32_t i = 0; run->training && i < run->num_replicas; i++) {
    cnnb_status st = cnnb_trainer_apply(run->replicas[i].trainer, step, NULL, NULL);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

static cnnb_status synchronize_all(cnnb_run *run) {
  for (int32_t i = 0; i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_status st = run->device->synchronize(r->device);
    if (st != CNNB_OK) return cnnb_run_fail(run, st, r->device_ctx, "synchronize");
  }
  return CNNB_OK;
}

/* Loss (and accuracy) of replica 0's step, as tf_cnn_benchmarks prints tower 0's. */
static cnnb_status step_metrics(cnnb_run *run, bool accuracy, double *loss, double *top1,
                                double *top5) {
  cnnb_replica *r = &run->replicas[0];
  float value = NAN;
  cnnb_status st = cnnb_executor_loss(r->executor, &value);
  if (st != CNNB_OK) return st;
  *loss = value;
  if (run->training && r->trainer) {
    double decay_loss = 0;
    /* total_loss includes the L2 term, as tf_cnn_benchmarks' total_loss does. */
    if ((st = cnnb_trainer_weight_decay_loss(r->trainer, &decay_loss)) != CNNB_OK) return st;
    *loss += decay_loss;
  }
  *top1 = *top5 = NAN;
  if (accuracy) {
    int hits1 = 0, hits5 = 0;
    if ((st = cnnb_executor_accuracy(r->executor, r->labels, &hits1, &hits5)) != CNNB_OK) return st;
    *top1 = (double)hits1 / run->batch_size;
    *top5 = (double)hits5 / run->batch_size;
  }
  return CNNB_OK;
}

static cnnb_status train(cnnb_run *run, FILE *out) {
  const cnnb_flags *flags = run->flags;
  int64_t num_batches = number_of_batches(run);
  int64_t warmup = cnnb_flags_int(flags, "num_warmup_batches");
  if (warmup < 0) warmup = DEFAULT_WARMUP_BATCHES;
  int64_t display_every = cnnb_flags_int(flags, "display_every");
  bool accuracy = cnnb_flags_bool(flags, "print_training_accuracy") || !run->training;

  const char *optimizer = run->training ? cnnb_trainer_describe(run->replicas[0].trainer) : NULL;
  print_header(run, out, num_batches, cnnb_flags_string(flags, "optimizer"));
  if (optimizer) cnnb_log(run->ctx, CNNB_LOG_INFO, "optimizer: %s", optimizer);
  cnnb_log(run->ctx, CNNB_LOG_INFO, "activation memory planned: %.1f MiB per replica (%.1f MiB without reuse)",
           (double)cnnb_executor_peak_bytes(run->replicas[0].executor) / (1 << 20),
           (double)cnnb_executor_naive_bytes(run->replicas[0].executor) / (1 << 20));
  fflush(out);

  cnnb_status st;
  cnnb_log(run->ctx, CNNB_LOG_INFO, "Running warm up");
  for (int64_t i = 0; i < warmup; i++)
    if ((st = compute_gradients(run, i)) != CNNB_OK || (st = apply_updates(run, i)) != CNNB_OK)
      return st;
  if ((st = synchronize_all(run)) != CNNB_OK) return st;
  cnnb_log(run->ctx, CNNB_LOG_INFO, "Done warm up");

  cnnb_step_stats stats;
  cnnb_step_stats_init(&stats);
  cnnb_report_print_step_header(out, accuracy);
  double images_per_step = (double)run->batch_size * run->num_replicas;
  double total_seconds = 0;
  for (int64_t i = 0; i < num_batches; i++) {
    bool display = cnnb_report_should_display(i + 1, display_every) || i + 1 == num_batches;
    /* The metrics are read between gradients and update, as tf_cnn_benchmarks fetches
     * the loss of the step's own weights; reading them is not timed. */
    double start = now_seconds();
    if ((st = compute_gradients(run, warmup + i)) != CNNB_OK) break;
    /* An asynchronous device finishes the gradients inside the timed part, not while the
     * metrics wait for them. */
    if (display && (st = synchronize_all(run)) != CNNB_OK) break;
    double seconds = now_seconds() - start;
    double loss = 0, top1 = NAN, top5 = NAN;
    if (display && (st = step_metrics(run, accuracy, &loss, &top1, &top5)) != CNNB_OK) break;
    start = now_seconds();
    if ((st = apply_updates(run, warmup + i)) != CNNB_OK || (st = synchronize_all(run)) != CNNB_OK)
      break;
    seconds += now_seconds() - start;
    total_seconds += seconds;
    cnnb_step_stats_add_step(&stats, images_per_step, seconds);
    if (!display) continue;
    if (!isfinite(loss)) {
      st = cnnb_error(run->ctx, CNNB_EDATA, "step %lld: the loss is %f: training diverged "
                      "(lower --init_learning_rate?)", (long long)(i + 1), loss);
      break;
    }
    cnnb_report_print_step(out, i + 1, &stats, loss, top1, top5);
    fflush(out);
  }
  cnnb_step_stats_free(&stats);
  if (st != CNNB_OK) return st;
  cnnb_report_print_total(out, images_per_step * (double)num_batches / total_seconds);
  return CNNB_OK;
}

cnnb_status cnnb_benchmark_run(const cnnb_flags *flags, cnnb_loader *loader, FILE *out,
                               char *err, size_t err_size) {
  cnnb_run run = {.flags = flags, .ctx = cnnb_ctx_create("cnnbench", flags)};
  if (!run.ctx) {
    snprintf(err, err_size, "out of memory");
    return CNNB_ENOMEM;
  }
  cnnb_status st = cnnb_run_resolve(&run, loader);
  if (st == CNNB_OK) st = cnnb_run_build_graph(&run);
  if (st == CNNB_OK && cnnb_flags_bool(flags, "model_info")) {
    st = print_model_info(&run, out);
  } else if (st == CNNB_OK) {
    cnnb_log(run.ctx, CNNB_LOG_INFO, "Generating %s model",
             run.training ? "training" : "inference");
    st = cnnb_run_resolve_runtime(&run, loader);
    if (st == CNNB_OK) st = cnnb_run_setup_replicas(&run);
    if (st == CNNB_OK) st = train(&run, out);
  }
  if (st != CNNB_OK) snprintf(err, err_size, "%s", cnnb_error_message(run.ctx));
  cnnb_run_teardown(&run);
  cnnb_ctx_destroy(run.ctx);
  return st;
}

/* benchmark.c — the step loop of one run and its tf_cnn_benchmarks report.
 *
 * A step: every replica takes a batch and runs forward and backward (buckets go to the
 * strategy as they finish), the strategy finishes averaging, every replica applies its
 * update. Warm-up steps run the same way but are not timed. A step's time covers all of
 * it, ending when the device has finished (synchronize), as tf_cnn_benchmarks times a
 * whole session.run. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "run/benchmark.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/benchmark_log.h"
#include <jansson.h>

#include "run/benchmark_setup.h"
#include "run/checkpoint.h"
#include "base/crash_guard.h"
#include "run/evaluation.h"
#include "graph/graph_internal.h"
#include "run/input_dtype.h"
#include "graph/model_info.h"
#include "report/report.h"
#include "base/trace.h"
#include "run/world.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static cnnb_status print_model_info(cnnb_run *run, FILE *out) {
  cnnb_model_report report;
  cnnb_status st = cnnb_model_info_compute(run->graph, &report);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "--model_info: %s", cnnb_graph_error(run->graph));
  fprintf(out, "Model: %s (%s, %dx%d, %d classes)\n", run->model.name, run->cfg->dataset->name,
          run->image_size, run->image_size, run->num_classes);
  cnnb_model_info_print(run->graph, &report, out);
  cnnb_model_report_free(&report);
  return CNNB_OK;
}

/* Images in one step over every replica of every process. */
static int64_t global_batch(const cnnb_run *run) {
  return (int64_t)run->batch_size * run->num_replicas * run->world_size;
}

void cnnb_run_print_header(const cnnb_run *run, FILE *out) {
  const cnnb_run_config *cfg = run->cfg;
  char dataset[256];
  /* tf_cnn_benchmarks shows "imagenet (synthetic)"; the datasource's name says the same
   * for every datasource. */
  snprintf(dataset, sizeof dataset, "%s (%s)", cfg->dataset->name, run->datasource.name);
  enum { MAX_SHOWN = 64, NAME_SIZE = 96 };
  char names[MAX_SHOWN][NAME_SIZE];
  const char *devices[MAX_SHOWN];
  size_t shown = run->num_replicas < MAX_SHOWN ? (size_t)run->num_replicas : MAX_SHOWN;
  for (size_t i = 0; i < shown; i++) {
    snprintf(names[i], NAME_SIZE, "/%s:%zu", run->device.name, i);
    devices[i] = names[i];
  }
  int64_t global = global_batch(run);
  cnnb_report_header header = {
      .version = CNNB_VERSION_STRING,
      .model = run->model.name,
      .dataset = dataset,
      .mode = cnnb_run_mode_name(cfg->mode),
      .global_batch = global,
      .per_device_batch = run->batch_size,
      .num_batches = run->num_batches,
      .num_epochs = run->examples_per_epoch > 0
                        ? (double)run->num_batches * (double)global / (double)run->examples_per_epoch
                        : NAN,
      .devices = devices,
      .num_devices = shown,
      .device_description = run->device_description,
      .data_format = cfg->data_format,
      .optimizer = cfg->mode == CNNB_MODE_TRAIN ? cnnb_optimizer_rule_name(cfg->trainer.rule) : NULL,
      .variable_update = run->strategy.name,
      .all_reduce = *cfg->all_reduce_spec ? cfg->all_reduce_spec : NULL,
  };
  cnnb_report_print_header(out, &header);
}

/* --trace_file: the host's side of a traced step, on the track "step" (trace.h). Each
 * costs one flag read when the step is not traced. */
#define STEP_TRACK "step"

static double trace_mark(const cnnb_run *run) {
  return cnnb_trace_active(run->ctx) ? cnnb_trace_now_us() : 0.0;
}

/* What ran since `start` (trace_mark's), as an event; args (or NULL) taken over. */
static void trace_since(const cnnb_run *run, const char *name, double start, json_t *args) {
  if (cnnb_trace_active(run->ctx))
    cnnb_trace_host_event(run->ctx, STEP_TRACK, name, "host", start, cnnb_trace_now_us(), args);
  else
    json_decref(args);
}

/* {"replica": i} in a traced step, else NULL (nothing built). */
static json_t *replica_args(const cnnb_run *run, int32_t i) {
  return cnnb_trace_active(run->ctx) ? json_pack("{s:i}", "replica", (int)i) : NULL;
}

/* How a step reads its batch. --eval's warm-up reruns the first batch (held) so that the
 * timed steps, which start with it, cover the validation set from its start and no
 * warm-up batch is counted or skipped. */
typedef enum batch_use { NEXT_BATCH, HOLD_FIRST_BATCH } batch_use;

static cnnb_status take_batch(cnnb_run *run, cnnb_replica *r, batch_use use, cnnb_batch *batch) {
  if (r->holding) {
    /* The prefetch queue keeps the held slot: nothing is taken while it is held. */
    *batch = r->held;
    if (use == NEXT_BATCH) r->holding = false; /* the first timed step uses it once more */
  } else {
    cnnb_status st = cnnb_prefetch_take(r->input, batch);
    if (st != CNNB_OK) return cnnb_run_fail(run, st, r->datasource_ctx, "reading a batch");
    if (use == HOLD_FIRST_BATCH) {
      r->held = *batch;
      r->holding = true;
    }
  }
  r->labels = batch->labels;
  return CNNB_OK;
}

/* Forward and backward of every replica, and the strategy's averaging. Under --eval a
 * timed step adds every replica's top-1 / top-5 hits to `tally` (hits at 1, at 5,
 * examples); tf_cnn_benchmarks computes them in the step it times, and so does this. */
static cnnb_status compute_gradients(cnnb_run *run, int64_t step, batch_use use,
                                     int64_t *tally) {
  cnnb_status st;
  bool training = run->cfg->mode == CNNB_MODE_TRAIN;
  for (int32_t i = 0; i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_batch batch;
    double t = trace_mark(run);
    if ((st = take_batch(run, r, use, &batch)) != CNNB_OK) return st;
    trace_since(run, "data wait", t, replica_args(run, i));
    float scale = r->trainer ? cnnb_trainer_loss_scale(r->trainer) : 1.0f;
    t = trace_mark(run);
    st = cnnb_replica_step(r, &batch, scale, step);
    if (st != CNNB_OK) return st;
    /* Its nodes are on the replica's own track. */
    trace_since(run, training ? "forward and backward" : "forward", t, replica_args(run, i));
    if (!tally) continue;
    t = trace_mark(run);
    int top1 = 0, top5 = 0;
    cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "tensor_to_host", "logits");
    st = cnnb_executor_accuracy(r->executor, r->labels, &top1, &top5);
    cnnb_crash_leave(outer);
    if (st != CNNB_OK) return st;
    tally[0] += top1;
    tally[1] += top5;
    tally[2] += run->batch_size;
    trace_since(run, "accuracy", t, replica_args(run, i));
  }
  if (run->bucket_status != CNNB_OK) return run->bucket_status;
  if (!training) return CNNB_OK;
  double t = trace_mark(run);
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "finish_step", NULL);
  st = run->strategy_vt->finish_step(run->strategy_state, run->grads);
  cnnb_crash_leave(outer);
  trace_since(run, "gradient exchange wait", t, NULL);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "gradient exchange");
  return CNNB_OK;
}

/* Every replica's optimizer step. A strategy that keeps the variables (apply_update) gets
 * replica 0's updates and refreshes every replica's parameters in finish_update; the
 * other replicas' trainers then only keep their loss-scale bookkeeping in step. */
static cnnb_status apply_updates(cnnb_run *run, int64_t step) {
  if (run->cfg->mode != CNNB_MODE_TRAIN) return CNNB_OK; /* no trainer: nothing to update or trace */
  double t = trace_mark(run);
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "update", NULL);
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->num_replicas; i++)
    if (run->replicas[i].trainer) st = cnnb_trainer_apply(run->replicas[i].trainer, step, NULL, NULL);
  cnnb_crash_leave(outer);
  /* Traced, the devices finish the update inside its event (an asynchronous device
   * returns before). */
  for (int32_t i = 0; st == CNNB_OK && cnnb_trace_active(run->ctx) && i < run->num_replicas; i++)
    if ((st = run->device_vt->synchronize(run->replicas[i].device)) != CNNB_OK)
      st = cnnb_run_fail(run, st, run->replicas[i].device_ctx, "synchronize");
  if (st == CNNB_OK) trace_since(run, "optimizer update", t, NULL);
  if (st != CNNB_OK || !run->strategy_vt->apply_update || !run->replicas[0].trainer) return st;
  t = trace_mark(run);
  outer = cnnb_crash_enter(run->strategy.label, "finish_update", NULL);
  st = run->strategy_vt->finish_update(run->strategy_state, run->params);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "updating the variables");
  trace_since(run, "variables update", t, NULL);
  return CNNB_OK;
}

static cnnb_status synchronize_all(cnnb_run *run) {
  double t = trace_mark(run);
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "synchronize", NULL);
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    st = run->device_vt->synchronize(r->device);
    if (st != CNNB_OK) st = cnnb_run_fail(run, st, r->device_ctx, "synchronize");
  }
  cnnb_crash_leave(outer);
  if (st == CNNB_OK) trace_since(run, "synchronize", t, NULL);
  return st;
}

/* Loss (and accuracy) of replica 0's step, as tf_cnn_benchmarks prints tower 0's, and
 * for the benchmark log the learning rate and loss scale of the step's update (optimizer
 * step `step`): read before the update, which may change the scale. */
static cnnb_status step_metrics(cnnb_run *run, int64_t step, cnnb_benchmark_log_step *m) {
  cnnb_replica *r = &run->replicas[0];
  m->learning_rate = r->trainer ? cnnb_trainer_learning_rate(r->trainer, step) : NAN;
  m->loss_scale = r->trainer ? cnnb_trainer_loss_scale(r->trainer) : NAN;
  float value = NAN;
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "tensor_to_host", "loss");
  cnnb_status st = cnnb_executor_loss(r->executor, &value);
  m->loss = value;
  if (st == CNNB_OK && r->trainer) {
    double decay_loss = 0;
    /* total_loss includes the L2 term, as tf_cnn_benchmarks' total_loss does. */
    st = cnnb_trainer_weight_decay_loss(r->trainer, &decay_loss);
    m->loss += decay_loss;
  }
  m->top1 = m->top5 = NAN;
  if (st == CNNB_OK && run->cfg->print_accuracy) {
    int hits1 = 0, hits5 = 0;
    st = cnnb_executor_accuracy(r->executor, r->labels, &hits1, &hits5);
    m->top1 = (double)hits1 / run->batch_size;
    m->top5 = (double)hits5 / run->batch_size;
  }
  cnnb_crash_leave(outer);
  return st;
}

cnnb_status cnnb_run_print_total(cnnb_run *run, double images, double seconds, FILE *out) {
  double images_per_sec = 0;
  cnnb_status st = cnnb_world_total(run, images, seconds, &images_per_sec);
  if (st != CNNB_OK) return st;
  cnnb_benchmark_log_total(run->log, images_per_sec, images, seconds, run->num_batches);
  if (run->world_size > 1) {
    char note[160];
    snprintf(note, sizeof note, "%d ranks: every rank's images over the slowest rank's time, "
             "gathered by the strategy", (int)run->world_size);
    cnnb_report_print_total_note(out, images_per_sec, note);
  } else {
    cnnb_report_print_total(out, images_per_sec);
  }
  return CNNB_OK;
}

cnnb_status cnnb_run_print_skipped(cnnb_run *run, FILE *out) {
  int64_t skipped[2] = {cnnb_run_skipped_examples(run, false),
                        cnnb_run_skipped_examples(run, true)};
  cnnb_status st = cnnb_world_sum(run, skipped, 2, "summing the examples skipped as unreadable");
  if (st != CNNB_OK) return st;
  if (run->rank == 0 && skipped[0] + skipped[1] > 0)
    cnnb_log(run->ctx, CNNB_LOG_WARN, "the datasource skipped %lld unreadable examples (%lld of "
             "them evaluating during training)", (long long)(skipped[0] + skipped[1]),
             (long long)skipped[1]);
  cnnb_report_print_skipped(out, skipped[0] + skipped[1]);
  return CNNB_OK;
}

/* --target_accuracy (time to accuracy, as MLPerf): the clock starts at the first step,
 * warm-up included; evaluations count, since a real run cannot skip them. */
typedef struct target_watch {
  double target;         /* 0: off */
  double start;          /* CLOCK_MONOTONIC seconds at the first step */
  bool reached;
  double best_top1;
  int64_t best_step;
} target_watch;

/* After an evaluation at timed step `step` (global step `global_step`): prints and returns
 * true when it reached the target. */
static bool target_check(cnnb_run *run, target_watch *w, const cnnb_eval_result *result,
                         int64_t step, int64_t global_step, FILE *out) {
  if (!(w->target > 0)) return false;
  if (result->top1 > w->best_top1 || w->best_step == 0) {
    w->best_top1 = result->top1;
    w->best_step = step;
  }
  if (result->top1 < w->target) return false;
  w->reached = true;
  double seconds = now_seconds() - w->start;
  double images = (double)global_step * (double)global_batch(run);
  json_t *extras = json_pack("{s:{s:f,s:f,s:I,s:I,s:f,s:f,s:f}}", "time_to_accuracy",
                             "target", w->target, "top1", result->top1, "step", (json_int_t)step,
                             "global_step", (json_int_t)global_step, "seconds", seconds,
                             "images", images,
                             "epochs", run->examples_per_epoch > 0
                                           ? images / (double)run->examples_per_epoch : 0.0);
  cnnb_benchmark_log_summary_extras(run->log, extras);
  json_decref(extras);
  if (out) {
    fprintf(out, "Reached --target_accuracy=%g: top-1 %.4f at step %lld (global step %lld) in "
            "%.3f s wall time, %.0f images", w->target, result->top1, (long long)step,
            (long long)global_step, seconds, images);
    if (run->examples_per_epoch > 0)
      fprintf(out, ", %.3f epochs", images / (double)run->examples_per_epoch);
    fprintf(out, "\n");
    fflush(out);
  }
  return true;
}

/* --train_dir: saves after global step `global_step` when due (checkpoint.h). */
static cnnb_status maybe_save(cnnb_run *run, int64_t global_step, int64_t *saved_step) {
  bool due = false;
  cnnb_status st = cnnb_checkpoint_due(run, global_step, &due);
  if (st != CNNB_OK || !due) return st;
  *saved_step = global_step;
  return cnnb_checkpoint_save(run, global_step);
}

/* A displayed step's record in the benchmark log: every rank writes what it measured
 * (its own loss and timing), as the step line would show it on that rank. */
static cnnb_status log_step(cnnb_run *run, cnnb_benchmark_log_step *m,
                            const cnnb_step_stats *stats, double seconds) {
  m->images_per_sec = cnnb_step_stats_mean(stats);
  m->images_per_sec_uncertainty = cnnb_step_stats_stderr(stats);
  m->jitter = cnnb_step_stats_jitter(stats);
  m->step_seconds = seconds;
  return cnnb_benchmark_log_step_record(run->log, m);
}

/* The run's steps. Only rank 0 prints the report (out is NULL on the others). Steps count
 * globally from the resumed checkpoint's step (run->start_step): the learning rate,
 * dropout masks and saved step continue; the report's step numbers are this run's. The
 * first --trace_steps timed steps are traced when `trace` is given. */
static cnnb_status train(cnnb_run *run, FILE *out, cnnb_trace *trace) {
  const cnnb_run_config *cfg = run->cfg;
  int64_t num_batches = run->num_batches, warmup = cfg->num_warmup_batches;
  int64_t base = run->start_step;
  bool accuracy = cfg->print_accuracy;
  bool eval = cfg->mode == CNNB_MODE_EVAL;
  bool training = cfg->mode == CNNB_MODE_TRAIN;
  int64_t tally[3] = {0, 0, 0}; /* --eval: hits at 1, at 5, examples */
  target_watch watch = {.target = cfg->target_accuracy, .start = now_seconds()};
  int64_t saved_step = -1;
  if (out) cnnb_run_print_header(run, out);
  if (run->replicas[0].trainer)
    cnnb_log(run->ctx, CNNB_LOG_INFO, "optimizer: %s", cnnb_trainer_describe(run->replicas[0].trainer));
  cnnb_log(run->ctx, CNNB_LOG_INFO, "activation memory planned: %.1f MiB per replica (%.1f MiB without reuse)",
           (double)cnnb_executor_peak_bytes(run->replicas[0].executor) / (1 << 20),
           (double)cnnb_executor_naive_bytes(run->replicas[0].executor) / (1 << 20));
  if (out) fflush(out);

  cnnb_status st;
  cnnb_log(run->ctx, CNNB_LOG_INFO, "Running warm up");
  batch_use warmup_use = eval ? HOLD_FIRST_BATCH : NEXT_BATCH;
  for (int64_t i = 0; i < warmup; i++)
    if ((st = compute_gradients(run, base + i, warmup_use, NULL)) != CNNB_OK ||
        (st = apply_updates(run, base + i)) != CNNB_OK)
      return st;
  if ((st = synchronize_all(run)) != CNNB_OK) return st;
  cnnb_log(run->ctx, CNNB_LOG_INFO, "Done warm up");

  cnnb_step_stats stats;
  cnnb_step_stats_init(&stats);
  if (out) cnnb_report_print_step_header(out, accuracy);
  double images_per_step = (double)global_batch(run);
  double total_seconds = 0;
  int64_t steps_run = 0;
  for (int64_t i = 0; i < num_batches && !watch.reached; i++) {
    int64_t step = base + warmup + i; /* global steps before this one */
    bool display = cnnb_report_should_display(i + 1, cfg->display_every) || i + 1 == num_batches;
    /* The metrics are read between gradients and update, as tf_cnn_benchmarks fetches
     * the loss of the step's own weights; reading them is not timed. */
    bool traced = trace && i < cfg->trace_steps;
    if (traced) cnnb_trace_begin(trace);
    double traced_from = traced ? cnnb_trace_now_us() : 0.0;
    double start = now_seconds();
    if ((st = compute_gradients(run, step, NEXT_BATCH, eval ? tally : NULL)) != CNNB_OK)
      break;
    /* An asynchronous device finishes the gradients inside the timed part, not while the
     * metrics wait for them. */
    if (display && (st = synchronize_all(run)) != CNNB_OK) break;
    double seconds = now_seconds() - start;
    cnnb_benchmark_log_step m = {.step = i + 1, .global_step = step + 1};
    double t = trace_mark(run);
    if (display && (st = step_metrics(run, step, &m)) != CNNB_OK) break;
    if (display) trace_since(run, "read metrics", t, NULL);
    start = now_seconds();
    if ((st = apply_updates(run, step)) != CNNB_OK || (st = synchronize_all(run)) != CNNB_OK)
      break;
    seconds += now_seconds() - start;
    if (traced) {
      /* The step's own span: what the events above happened in (untimed metrics too). */
      char name[32];
      snprintf(name, sizeof name, "step %lld", (long long)(i + 1));
      trace_since(run, name, traced_from, json_pack("{s:I, s:f}", "step", (json_int_t)(i + 1),
                                                    "seconds", seconds));
      cnnb_trace_end(trace);
    }
    total_seconds += seconds;
    steps_run = i + 1;
    cnnb_step_stats_add_step(&stats, images_per_step, seconds);
    if (display && (st = log_step(run, &m, &stats, seconds)) != CNNB_OK) break;
    if (display && !isfinite(m.loss)) {
      st = cnnb_error(run->ctx, CNNB_ENUMERIC,
                      "step %lld: the loss is %f: training diverged (check --init_learning_rate "
                      "and the optimizer's flags; under --precision=fp16, the loss scale)",
                      (long long)(i + 1), m.loss);
      break;
    }
    if (display && out) {
      cnnb_report_print_step(out, i + 1, &stats, m.loss, m.top1, m.top5);
      fflush(out);
    }
    /* Outside the timed part: the training's images/sec leave evaluations and saves out. */
    if (i + 1 < num_batches && cnnb_evaluation_due(run, i + 1)) {
      cnnb_eval_result result;
      if ((st = cnnb_evaluation_run(run, i + 1, out, &result)) != CNNB_OK) break;
      target_check(run, &watch, &result, i + 1, step + 1, out);
    }
    if (training && (st = maybe_save(run, step + 1, &saved_step)) != CNNB_OK) break;
  }
  cnnb_step_stats_free(&stats);
  if (st != CNNB_OK) return st;
  if (cfg->step_graphs) {
    /* Whether the figure above is one of recorded steps: a fallback only warned. */
    int64_t recorded = 0, replayed = 0;
    cnnb_executor_step_graph_counts(run->replicas[0].executor, &recorded, &replayed);
    cnnb_log(run->ctx, CNNB_LOG_INFO, "--cuda_graphs: %lld recording(s), %lld of %lld steps "
             "replayed", (long long)recorded, (long long)replayed, (long long)(warmup + steps_run));
  }
  int64_t end_step = base + warmup + steps_run;
  if (training && *cfg->train_dir && saved_step != end_step &&
      (st = cnnb_checkpoint_save(run, end_step)) != CNNB_OK)
    return st;
  /* tf_cnn_benchmarks prints the accuracy before the total (_eval_once). */
  if (eval && (st = cnnb_world_sum(run, tally, 3, "summing the accuracy")) != CNNB_OK) return st;
  if (eval) cnnb_report_print_accuracy(out, "", tally[0], tally[1], tally[2]);
  if (eval && tally[2] > 0 &&
      (st = cnnb_benchmark_log_eval(run->log, num_batches, (double)tally[0] / (double)tally[2],
                                    (double)tally[1] / (double)tally[2], tally[2])) != CNNB_OK)
    return st;
  /* This process's images; the world's total adds every rank's (world.h). */
  double images = (double)run->batch_size * run->num_replicas * (double)steps_run;
  if ((st = cnnb_run_print_total(run, images, total_seconds, out)) != CNNB_OK) return st;
  /* The final evaluation, unless the run stopped at the target right after one. */
  if (cfg->eval_during_training && !watch.reached) {
    cnnb_eval_result result;
    if ((st = cnnb_evaluation_run(run, steps_run, out, &result)) != CNNB_OK) return st;
    target_check(run, &watch, &result, steps_run, end_step, out);
  }
  if ((st = cnnb_run_print_skipped(run, out)) != CNNB_OK) return st;
  if (watch.target > 0 && !watch.reached)
    return cnnb_error(run->ctx, CNNB_ENUMERIC, "--target_accuracy=%g not reached in %lld steps: "
                      "the best top-1 was %.4f, at step %lld (train longer: --num_epochs)",
                      watch.target, (long long)steps_run, watch.best_top1,
                      (long long)watch.best_step);
  return CNNB_OK;
}

/* --trace_file's recorder for this rank, attached to the run's ctx family before any step
 * (so a bad path fails first); NULL without the flag. */
static cnnb_status open_trace(cnnb_run *run, cnnb_trace **out) {
  const cnnb_run_config *cfg = run->cfg;
  *out = NULL;
  if (!cfg->trace_file || !*cfg->trace_file) return CNNB_OK;
  cnnb_trace_info info = {
      .model = run->model.name,
      .device = run->device.name,
      .strategy = run->strategy.name,
      .steps = cfg->trace_steps < run->num_batches ? cfg->trace_steps : run->num_batches,
      .rank = run->rank,
      .world_size = run->world_size,
  };
  cnnb_status st = cnnb_trace_open(run->ctx, cfg->trace_file, &info, out);
  if (st == CNNB_OK) cnnb_trace_attach(run->ctx, *out);
  return st;
}

cnnb_status cnnb_benchmark_run(const cnnb_run_config *cfg, cnnb_ctx *parent, cnnb_loader *loader,
                               FILE *out, char *err, size_t err_size,
                               const cnnb_run_hooks *hooks) {
  cnnb_run run = {0};
  cnnb_trace *trace = NULL;
  cnnb_status st = cnnb_run_open(&run, cfg, parent, loader);
  if (st == CNNB_OK && cfg->model_info) {
    st = print_model_info(&run, out);
  } else if (st == CNNB_OK) {
    if (cfg->mode != CNNB_MODE_INPUT_ONLY)
      cnnb_log(run.ctx, CNNB_LOG_INFO, "Generating %s model",
               cfg->mode == CNNB_MODE_TRAIN ? "training" : "inference");
    st = cnnb_run_prepare(&run, loader);
    FILE *report = run.rank == 0 ? out : NULL;
    if (st == CNNB_OK && cfg->mode == CNNB_MODE_INPUT_ONLY) st = cnnb_input_only_run(&run, report);
    else if (st == CNNB_OK && (st = open_trace(&run, &trace)) == CNNB_OK) st = train(&run, report, trace);
    /* A hook reads the model's arenas, which --input_only never made. */
    if (st == CNNB_OK && hooks && hooks->after_steps && cfg->mode != CNNB_MODE_INPUT_ONLY)
      st = hooks->after_steps(&run, hooks->user);
    /* The log's last line says how the run ended, a failure included. */
    cnnb_status logged = cnnb_benchmark_log_summary(run.log, st == CNNB_OK ? NULL
                                                             : cnnb_error_message(run.ctx));
    if (st == CNNB_OK) st = logged;
  }
  if (trace) {
    cnnb_status written = cnnb_trace_finish(trace, run.ctx);
    if (st == CNNB_OK) st = written;
    cnnb_trace_attach(run.ctx, NULL);
  }
  /* Every rank of a job reports its own failure, saying whose, and at once: when one rank
   * exits, mpirun aborts the others, so a rank still taking its run apart (the strategy's
   * MPI, the devices) would never get to say why it failed. */
  if (st != CNNB_OK && run.world_size > 1) {
    fflush(out);
    fprintf(stderr, "cnnbench: error: [rank %d] %s\n", (int)run.rank, cnnb_error_message(run.ctx));
    fflush(stderr);
    if (err_size) err[0] = '\0'; /* said */
  } else if (st != CNNB_OK)
    snprintf(err, err_size, "%s", run.ctx ? cnnb_error_message(run.ctx) : "out of memory");
  cnnb_run_close(&run);
  cnnb_trace_free(trace); /* after the plugins' threads, which may hold its ctx family */
  return st;
}

/* steps.c — the model's steps of one run and their tf_cnn_benchmarks report (steps.h).
 *
 * Training, forward-only and --eval share one loop; they differ in what a step computes
 * (forward and backward with an update, or forward alone) and what it counts (--eval's
 * top-1 / top-5 hits). A training step: every replica takes a batch and runs forward and
 * backward (buckets go to the strategy as they finish), the strategy finishes averaging,
 * every replica applies its update. Warm-up steps run the same way but are not timed. A
 * step's time covers all of it, ending when the device has finished (synchronize), as
 * tf_cnn_benchmarks times a whole session.run. */
#include "run/steps.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/trace.h"
#include "report/benchmark_log.h"
#include "report/report.h"
#include "run/checkpoint.h"
#include "run/evaluation.h"
#include "run/interrupted.h"
#include "run/replica.h"
#include "run/run_report.h"
#include "run/summaries.h"
#include "run/world.h"

/* ---- traced steps ------------------------------------------------------------------ */

/* --trace_file: the host's side of a traced step, on the track "step" (trace.h). Each
 * costs one flag read when the step is not traced. */
#define STEP_TRACK "step"

static double trace_mark(const cnnb_run *run) {
  return cnnb_trace_active(run->ctx) ? cnnb_trace_now_us() : 0.0;
}

/* What ran since `start` (trace_mark's), as an event of category cat; args (or NULL)
 * taken over. */
static void trace_cat_since(const cnnb_run *run, const char *cat, const char *name, double start,
                            json_t *args) {
  if (cnnb_trace_active(run->ctx))
    cnnb_trace_host_event(run->ctx, STEP_TRACK, name, cat, start, cnnb_trace_now_us(), args);
  else json_decref(args);
}

/* The host's own work ("host": data wait, optimizer update, ...). */
static void trace_since(const cnnb_run *run, const char *name, double start, json_t *args) {
  trace_cat_since(run, "host", name, start, args);
}

/* A span holding other events ("span": a step, a replica's passes), which a sum of the
 * work (report/op_times.h) must not count again. */
static void trace_span_since(const cnnb_run *run, const char *name, double start, json_t *args) {
  trace_cat_since(run, "span", name, start, args);
}

/* {"replica": i} in a traced step, else NULL (nothing built). */
static json_t *replica_args(const cnnb_run *run, int32_t i) {
  return cnnb_trace_active(run->ctx) ? json_pack("{s:i}", "replica", (int)i) : NULL;
}

/* ---- the loop's state ---------------------------------------------------------------- */

/* How a step reads its batch. --eval's warm-up reruns the first batch (held) so that the
 * timed steps, which start with it, cover the validation set from its start and no
 * warm-up batch is counted or skipped. */
typedef enum batch_use { NEXT_BATCH, HOLD_FIRST_BATCH } batch_use;

/* What the loop keeps of one replica's input. */
typedef struct replica_input {
  cnnb_batch held; /* --eval's warm-up: the first batch, rerun until timing starts */
  bool holding;
  const int32_t *labels; /* of the batch in use (for accuracy) */
} replica_input;

/* --target_accuracy (time to accuracy, as MLPerf): the clock starts at the first step,
 * warm-up included; evaluations count, since a real run cannot skip them. */
typedef struct target_watch {
  double target; /* 0: off */
  double start;  /* cnnb_now_seconds at the first step */
  bool reached;
  double best_top1;
  int64_t best_step;
} target_watch;

/* A checkpoint's weights are watched for their first steps (warm-up included): a loss
 * that is not finite, or above LOSS_BOUND_PER_LN_CLASS x ln(classes)
 * (docs/checkpoints-and-logs.md's bound: a model guessing uniformly scores ln(classes), and no
 * trained weights are a hundred times worse), means the weights are bad (a flipped exponent bit, a
 * file edited by hand), and the run stops naming the checkpoint before it saves anything of them.
 * Each watched step reads its loss (one wait for the device, as a displayed step's). */
enum { RESUME_WATCH_STEPS = 5 };
#define LOSS_BOUND_PER_LN_CLASS 100.0

typedef struct step_loop {
  cnnb_run *run;
  const cnnb_run_config *cfg;
  FILE *out;             /* rank 0's report; NULL on the other ranks */
  cnnb_trace *trace;     /* --trace_file's recorder; NULL without */
  bool training, eval;   /* the mode: training, --eval, or else --forward_only */
  replica_input *inputs; /* [replicas] */
  int64_t tally[3];      /* --eval: hits at 1, at 5, examples */
  cnnb_step_stats stats; /* the timed steps' images/sec */
  double shown_seconds;  /* --eval: timed seconds since the last displayed step */
  int64_t shown_step;    /* --eval: the last displayed step (0: none yet) */
  double total_seconds;  /* timed */
  int64_t steps_run;     /* timed steps done */
  int64_t warmed;        /* warm-up steps done */
  bool stopped;          /* by a signal (run/interrupted.h), before the step it names */
  int64_t saved_step;    /* the global step of the last checkpoint; -1: none */
  target_watch target;
  const char *resumed_from; /* the checkpoint the weights came from; NULL: none */
  double loss_bound;        /* for its first RESUME_WATCH_STEPS steps */
} step_loop;

/* One timed step as the report and the log show it. */
typedef struct step_result {
  bool display;                    /* the report prints a line for it */
  bool summarize;                  /* it writes TensorBoard's training scalars */
  double seconds;                  /* timed */
  cnnb_benchmark_log_step metrics; /* read on displayed and summarized steps only */
} step_result;

/* The global step before timed step i (0-based): a resumed checkpoint's, the warm-up's. */
static int64_t global_step(const step_loop *loop, int64_t i) {
  return loop->run->facts.start_step + loop->warmed + i;
}

/* ---- one step ------------------------------------------------------------------------ */

static cnnb_status take_batch(step_loop *loop, int32_t i, batch_use use, cnnb_batch *batch) {
  cnnb_run *run = loop->run;
  replica_input *in = &loop->inputs[i];
  if (in->holding) {
    /* The prefetch queue keeps the held slot: nothing is taken while it is held. */
    *batch = in->held;
    if (use == NEXT_BATCH) in->holding = false; /* the first timed step uses it once more */
  } else {
    cnnb_replica *r = &run->replicas[i];
    cnnb_status st = cnnb_prefetch_take(r->input, batch);
    if (st != CNNB_OK)
      return cnnb_plugin_failed(run->ctx, &run->facts.datasource, st, r->datasource_ctx,
                                "reading a batch");
    if (use == HOLD_FIRST_BATCH) {
      in->held = *batch;
      in->holding = true;
    }
  }
  in->labels = batch->labels;
  return CNNB_OK;
}

/* --eval: replica i's top-1 / top-5 hits of the step just run, into the tally;
 * tf_cnn_benchmarks computes them in the step it times, and so does this. */
static cnnb_status tally_eval_accuracy(step_loop *loop, int32_t i) {
  cnnb_run *run = loop->run;
  double t = trace_mark(run);
  int top1 = 0, top5 = 0;
  cnnb_status st;
  CNNB_GUARDED(run->facts.device.label, "tensor_to_host", "logits",
               st = cnnb_executor_accuracy(run->replicas[i].executor, loop->inputs[i].labels, &top1,
                                           &top5));
  if (st != CNNB_OK) return st;
  loop->tally[0] += top1;
  loop->tally[1] += top5;
  loop->tally[2] += run->facts.batch_size;
  trace_since(run, "accuracy", t, replica_args(run, i));
  return CNNB_OK;
}

/* The strategy finishes averaging the gradients every bucket started. */
static cnnb_status exchange_gradients(step_loop *loop) {
  cnnb_run *run = loop->run;
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  if (run->bucket_status != CNNB_OK) return run->bucket_status;
  if (!loop->training) return CNNB_OK;
  double t = trace_mark(run);
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, strategy, "finish_step", strategy->ctx, "gradient exchange",
                   strategy->vt.strategy->finish_step(strategy->state, run->grads));
  trace_since(run, "gradient exchange wait", t, NULL);
  return st;
}

/* Every replica's forward (and, training, backward) on its next batch; --eval tallies the
 * hits of timed steps. Then the gradient exchange. */
static cnnb_status forward_backward(step_loop *loop, int64_t step, batch_use use, bool tally) {
  cnnb_run *run = loop->run;
  cnnb_status st;
  for (int32_t i = 0; i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_batch batch;
    double t = trace_mark(run);
    if ((st = take_batch(loop, i, use, &batch)) != CNNB_OK) return st;
    trace_since(run, "data wait", t, replica_args(run, i));
    float scale = r->trainer ? cnnb_trainer_loss_scale(r->trainer) : 1.0f;
    t = trace_mark(run);
    if ((st = cnnb_replica_step(r, &batch, scale, step)) != CNNB_OK) return st;
    /* Its nodes are on the replica's own track. */
    trace_span_since(run, loop->training ? "forward and backward" : "forward", t,
                     replica_args(run, i));
    if (tally && (st = tally_eval_accuracy(loop, i)) != CNNB_OK) return st;
  }
  return exchange_gradients(loop);
}

/* Every replica's optimizer step. A strategy that keeps the variables (apply_update) gets
 * replica 0's updates and refreshes every replica's parameters in finish_update; the
 * other replicas' trainers then only keep their loss-scale bookkeeping in step. */
static cnnb_status apply_updates(step_loop *loop, int64_t step) {
  cnnb_run *run = loop->run;
  const cnnb_bound_plugin *device = &run->facts.device, *strategy = &run->facts.strategy;
  if (!loop->training) return CNNB_OK; /* no trainer: nothing to update or trace */
  double t = trace_mark(run);
  cnnb_status st = CNNB_OK;
  CNNB_GUARDED(device->label, "update", NULL, {
    for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++)
      if (run->replicas[i].trainer)
        st = cnnb_trainer_apply(run->replicas[i].trainer, step, NULL, NULL);
  });
  /* Traced, the devices finish the update inside its event (an asynchronous device
   * returns before). */
  for (int32_t i = 0; st == CNNB_OK && cnnb_trace_active(run->ctx) && i < run->facts.replicas; i++)
    CNNB_PLUGIN_CALL(st, run->ctx, device, "synchronize", run->replicas[i].device_ctx,
                     "synchronize", device->vt.device->synchronize(run->replicas[i].device));
  if (st == CNNB_OK) trace_since(run, "optimizer update", t, NULL);
  if (st != CNNB_OK || !strategy->vt.strategy->apply_update || !run->replicas[0].trainer) return st;
  t = trace_mark(run);
  CNNB_PLUGIN_CALL(st, run->ctx, strategy, "finish_update", strategy->ctx, "updating the variables",
                   strategy->vt.strategy->finish_update(strategy->state, run->params));
  if (st != CNNB_OK) return st;
  trace_since(run, "variables update", t, NULL);
  return CNNB_OK;
}

static cnnb_status synchronize_all(step_loop *loop) {
  cnnb_run *run = loop->run;
  const cnnb_bound_plugin *device = &run->facts.device;
  double t = trace_mark(run);
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++)
    CNNB_PLUGIN_CALL(st, run->ctx, device, "synchronize", run->replicas[i].device_ctx,
                     "synchronize", device->vt.device->synchronize(run->replicas[i].device));
  if (st == CNNB_OK) trace_since(run, "synchronize", t, NULL);
  return st;
}

/* The step line's loss and accuracies over every replica of this process, as
 * tf_cnn_benchmarks' average_loss (the mean of its worker's towers' losses) and
 * top_1_accuracy (the hits of all its towers over their examples); each rank its own, as
 * each tf worker prints its own: a collective here would be one more meeting point per
 * displayed step, which the asynchronous parameter server does not have and which a
 * stopped rank would turn into a wait. And for the benchmark log the learning rate and
 * loss scale of the step's update (optimizer step `step`, replica 0's, the same
 * everywhere), read before the update, which may change the scale. */
static cnnb_status read_metrics(step_loop *loop, int64_t step, cnnb_benchmark_log_step *m) {
  cnnb_run *run = loop->run;
  cnnb_replica *first = &run->replicas[0];
  m->learning_rate = first->trainer ? cnnb_trainer_learning_rate(first->trainer, step) : NAN;
  m->loss_scale = first->trainer ? cnnb_trainer_loss_scale(first->trainer) : NAN;
  m->top1 = m->top5 = NAN;
  /* Summed over the replicas: losses, replicas, hits at 1, hits at 5, examples. */
  double sums[5] = {0, 0, 0, 0, 0};
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    float value = NAN;
    double decay_loss = 0;
    int hits1 = 0, hits5 = 0;
    CNNB_GUARDED(run->facts.device.label, "tensor_to_host", "loss", {
      st = cnnb_executor_loss(r->executor, &value);
      /* total_loss includes the L2 term, as tf_cnn_benchmarks' total_loss does. */
      if (st == CNNB_OK && r->trainer) st = cnnb_trainer_weight_decay_loss(r->trainer, &decay_loss);
      if (st == CNNB_OK && run->cfg->print_accuracy)
        st = cnnb_executor_accuracy(r->executor, loop->inputs[i].labels, &hits1, &hits5);
    });
    sums[0] += (double)value + decay_loss;
    sums[1] += 1;
    sums[2] += hits1;
    sums[3] += hits5;
    sums[4] += run->facts.batch_size;
  }
  if (st != CNNB_OK) return st;
  m->loss = sums[0] / sums[1];
  if (run->cfg->print_accuracy) {
    m->top1 = sums[2] / sums[4];
    m->top5 = sums[3] / sums[4];
  }
  return CNNB_OK;
}

/* Whether optimizer step `step` (0-based global) is one of the first after the weights
 * came from a checkpoint. */
static bool watched(const step_loop *loop, int64_t step) {
  return loop->resumed_from && step - loop->run->facts.start_step < RESUME_WATCH_STEPS;
}

/* A watched step's loss (above): a bad one stops the run, naming the checkpoint. */
static cnnb_status check_resumed_loss(const step_loop *loop, int64_t step, double loss) {
  if (isfinite(loss) && loss <= loop->loss_bound) return CNNB_OK;
  const cnnb_run *run = loop->run;
  char why[160];
  if (isfinite(loss))
    snprintf(why, sizeof why, "above %g x ln(%d classes) = %.1f", LOSS_BOUND_PER_LN_CLASS,
             (int)run->facts.num_classes, loop->loss_bound);
  else snprintf(why, sizeof why, "not finite");
  return cnnb_error(run->ctx, CNNB_ENUMERIC,
                    "global step %lld, step %lld after %s %s: the loss is %g, %s: the "
                    "checkpoint's weights are bad (a corrupted file?), and nothing was saved "
                    "from them; %s",
                    (long long)(step + 1), (long long)(step - run->facts.start_step + 1),
                    loop->training ? "resuming from" : "loading", loop->resumed_from, loss, why,
                    loop->training ? "resume from an older checkpoint (move this one out of "
                                     "--train_dir), or start a new --train_dir"
                                   : "evaluate another checkpoint");
}

/* Warm-up step `step`'s loss, when watched. */
static cnnb_status watch_warm_up(step_loop *loop, int64_t step) {
  if (!watched(loop, step)) return CNNB_OK;
  cnnb_benchmark_log_step m;
  cnnb_status st = synchronize_all(loop);
  if (st == CNNB_OK) st = read_metrics(loop, step, &m);
  if (st == CNNB_OK) st = check_resumed_loss(loop, step, m.loss);
  return st;
}

/* Timed step i: input, forward and backward, the exchange and the update, with the
 * metrics of a displayed step read (untimed) between gradients and update, as
 * tf_cnn_benchmarks fetches the loss of the step's own weights. One of the first
 * --trace_steps is traced. */
static cnnb_status timed_step(step_loop *loop, int64_t i, step_result *res) {
  const cnnb_run_config *cfg = loop->cfg;
  cnnb_run *run = loop->run;
  int64_t step = global_step(loop, i);
  int64_t num_batches = run->facts.num_batches;
  res->display = cnnb_report_should_display(i + 1, cfg->display_every) || i + 1 == num_batches;
  res->summarize = loop->training && cnnb_summaries_due(run, i + 1);
  res->metrics = (cnnb_benchmark_log_step){.step = i + 1, .global_step = step + 1};
  bool traced = loop->trace && i < cfg->trace_steps;
  if (traced) cnnb_trace_begin(loop->trace);
  double traced_from = traced ? cnnb_trace_now_us() : 0.0;
  double start = cnnb_now_seconds();
  bool watch = watched(loop, step);
  bool measured = res->display || res->summarize || watch; /* its metrics are read */
  cnnb_status st = forward_backward(loop, step, NEXT_BATCH, loop->eval);
  /* An asynchronous device finishes the gradients inside the timed part, not while the
   * metrics wait for them. */
  if (st == CNNB_OK && measured) st = synchronize_all(loop);
  if (st != CNNB_OK) return st;
  res->seconds = cnnb_now_seconds() - start;
  double t = trace_mark(run);
  if (measured && (st = read_metrics(loop, step, &res->metrics)) != CNNB_OK) return st;
  if (measured) trace_since(run, "read metrics", t, NULL);
  /* Before the update: weights that give such a loss are never trained on, nor saved. */
  if (watch && (st = check_resumed_loss(loop, step, res->metrics.loss)) != CNNB_OK) return st;
  start = cnnb_now_seconds();
  if ((st = apply_updates(loop, step)) != CNNB_OK || (st = synchronize_all(loop)) != CNNB_OK)
    return st;
  res->seconds += cnnb_now_seconds() - start;
  if (traced) {
    /* The step's own span: what the events above happened in (untimed metrics too). */
    char name[32];
    snprintf(name, sizeof name, "step %lld", (long long)(i + 1));
    trace_span_since(run, name, traced_from,
                     json_pack("{s:I, s:f}", "step", (json_int_t)(i + 1), "seconds", res->seconds));
    cnnb_trace_end(loop->trace);
  }
  return CNNB_OK;
}

/* ---- around the steps ---------------------------------------------------------------- */

/* The header, what the optimizer and the memory plan are, and the loop's own state. */
static cnnb_status begin_steps(step_loop *loop, cnnb_run *run, FILE *out, cnnb_trace *trace) {
  const cnnb_run_config *cfg = run->cfg;
  *loop = (step_loop){
      .run = run,
      .cfg = cfg,
      .out = out,
      .trace = trace,
      .training = cfg->mode == CNNB_MODE_TRAIN,
      .eval = cfg->mode == CNNB_MODE_EVAL,
      .saved_step = -1,
      .target = {.target = cfg->target_accuracy, .start = cnnb_now_seconds()},
      .resumed_from = cnnb_checkpoint_resumed_from(run),
      .loss_bound = LOSS_BOUND_PER_LN_CLASS * log((double)run->facts.num_classes),
  };
  cnnb_step_stats_init(&loop->stats);
  loop->stats.ewma = cfg->display_perf_ewma;
  loop->inputs = calloc((size_t)run->facts.replicas, sizeof *loop->inputs);
  if (!loop->inputs) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  if (out) cnnb_run_print_header(run, out);
  /* tf_cnn_benchmarks' progress lines after the header (its graph's build and start; here
   * setup has done both). */
  cnnb_report_print_progress(out, run->ctx,
                             loop->eval ? "Generating evaluation model"
                                        : "Generating training model");
  if (cfg->eval_during_training)
    cnnb_report_print_progress(out, run->ctx, "Generating evaluation model");
  cnnb_report_print_progress(out, run->ctx, "Initializing graph");
  if (run->replicas[0].trainer)
    cnnb_log(run->ctx, CNNB_LOG_INFO, "optimizer: %s",
             cnnb_trainer_describe(run->replicas[0].trainer));
  cnnb_log(run->ctx, CNNB_LOG_INFO,
           "activation memory planned: %.1f MiB per replica (%.1f MiB without reuse)",
           (double)cnnb_executor_peak_bytes(run->replicas[0].executor) / (1 << 20),
           (double)cnnb_executor_naive_bytes(run->replicas[0].executor) / (1 << 20));
  if (out) fflush(out);
  return CNNB_OK;
}

static void end_steps(step_loop *loop) {
  cnnb_step_stats_free(&loop->stats);
  free(loop->inputs);
}

/* The untimed warm-up steps (--eval's rerun the first batch); a signal stops them between
 * two (run/interrupted.h). */
static cnnb_status warm_up(step_loop *loop) {
  cnnb_run *run = loop->run;
  cnnb_report_print_progress(loop->out, run->ctx, "Running warm up");
  batch_use use = loop->eval ? HOLD_FIRST_BATCH : NEXT_BATCH;
  int64_t base = run->facts.start_step;
  cnnb_status st = CNNB_OK;
  for (int64_t i = 0; st == CNNB_OK && i < loop->cfg->num_warmup_batches; i++) {
    if ((st = cnnb_run_check_interrupt(run, &loop->stopped)) != CNNB_OK || loop->stopped) break;
    if ((st = forward_backward(loop, base + i, use, false)) == CNNB_OK &&
        (st = watch_warm_up(loop, base + i)) == CNNB_OK)
      st = apply_updates(loop, base + i);
    if (st == CNNB_OK) loop->warmed = i + 1;
  }
  if (st == CNNB_OK) st = synchronize_all(loop);
  if (st != CNNB_OK || loop->stopped) return st;
  cnnb_report_print_progress(loop->out, run->ctx, "Done warm up");
  /* --eval prints tf's "N<TAB>X examples/sec" lines, which have no header. */
  if (loop->out && !loop->eval) cnnb_report_print_step_header(loop->out, loop->cfg->print_accuracy);
  return CNNB_OK;
}

/* Counts timed step i; a displayed one gets its log record, the divergence check and its
 * report line: training's and --forward_only's "N<TAB>images/sec: ..." line, --eval's
 * "N<TAB>X examples/sec"; a summarized one its TensorBoard scalars. Every rank logs what
 * it measured (its own loss and timing); rank 0 writes the events. */
static cnnb_status show_step(step_loop *loop, int64_t i, step_result *res) {
  cnnb_run *run = loop->run;
  loop->total_seconds += res->seconds;
  loop->steps_run = i + 1;
  cnnb_step_stats_add_step(&loop->stats, (double)run->facts.global_batch, res->seconds);
  loop->shown_seconds += res->seconds;
  if (!res->display && !res->summarize) return CNNB_OK;
  cnnb_benchmark_log_step *m = &res->metrics;
  m->images_per_sec = cnnb_step_stats_mean(&loop->stats);
  m->images_per_sec_uncertainty = cnnb_step_stats_stderr(&loop->stats);
  m->jitter = cnnb_step_stats_jitter(&loop->stats);
  m->step_seconds = res->seconds;
  cnnb_status st = CNNB_OK;
  if (res->summarize && (st = cnnb_summaries_step(run, m)) != CNNB_OK) return st;
  if (!res->display) return CNNB_OK;
  if ((st = cnnb_benchmark_log_step_record(run->log, m)) != CNNB_OK) return st;
  if (!isfinite(m->loss) && loop->resumed_from && !loop->training)
    return cnnb_error(run->ctx, CNNB_ENUMERIC,
                      "step %lld: the loss is %f with the weights of checkpoint %s (a corrupted "
                      "file?)",
                      (long long)(i + 1), m->loss, loop->resumed_from);
  if (!isfinite(m->loss))
    return cnnb_error(run->ctx, CNNB_ENUMERIC,
                      "step %lld: the loss is %f: training diverged (check --init_learning_rate "
                      "and the optimizer's flags; under --precision=fp16, the loss scale)%s%s",
                      (long long)(i + 1), m->loss, loop->resumed_from ? "; it resumed from " : "",
                      loop->resumed_from ? loop->resumed_from : "");
  if (loop->out && loop->eval) {
    /* tf's _eval_once: the examples of the steps since the last line over their time. */
    double examples = (double)(i + 1 - loop->shown_step) * (double)run->facts.global_batch;
    cnnb_report_print_eval_step(loop->out, i + 1,
                                loop->shown_seconds > 0 ? examples / loop->shown_seconds : 0);
  } else if (loop->out) {
    cnnb_report_print_step(loop->out, i + 1, &loop->stats, m->loss, m->top1, m->top5);
  }
  if (loop->out) fflush(loop->out);
  loop->shown_step = i + 1;
  loop->shown_seconds = 0;
  return CNNB_OK;
}

/* After an evaluation at timed step `step` (global step `global`): whether it reached
 * --target_accuracy, said in the report and the log's summary. */
static void check_target(step_loop *loop, const cnnb_eval_result *result, int64_t step,
                         int64_t global) {
  cnnb_run *run = loop->run;
  target_watch *w = &loop->target;
  if (!(w->target > 0)) return;
  if (result->top1 > w->best_top1 || w->best_step == 0) {
    w->best_top1 = result->top1;
    w->best_step = step;
  }
  if (result->top1 < w->target) return;
  w->reached = true;
  double seconds = cnnb_now_seconds() - w->start;
  double images = (double)global * (double)run->facts.global_batch;
  int64_t epoch = run->facts.examples_per_epoch;
  json_t *extras = json_pack("{s:{s:f,s:f,s:I,s:I,s:f,s:f,s:f}}", "time_to_accuracy", "target",
                             w->target, "top1", result->top1, "step", (json_int_t)step,
                             "global_step", (json_int_t)global, "seconds", seconds, "images",
                             images, "epochs", epoch > 0 ? images / (double)epoch : 0.0);
  cnnb_benchmark_log_summary_extras(run->log, extras);
  json_decref(extras);
  FILE *out = loop->out;
  if (!out) return;
  fprintf(out,
          "Reached --target_accuracy=%g: top-1 %.4f at step %lld (global step %lld) in "
          "%.3f s wall time, %.0f images",
          w->target, result->top1, (long long)step, (long long)global, seconds, images);
  if (epoch > 0) fprintf(out, ", %.3f epochs", images / (double)epoch);
  fprintf(out, "\n");
  fflush(out);
}

/* What an evaluation measured at timed step `step` (global step `global`), into the
 * benchmark log and TensorBoard's evaluation events. */
static cnnb_status record_eval(cnnb_run *run, int64_t step, int64_t global,
                               const int64_t tally[3]) {
  if (tally[2] <= 0) return CNNB_OK;
  double top1 = (double)tally[0] / (double)tally[2], top5 = (double)tally[1] / (double)tally[2];
  cnnb_status st = cnnb_benchmark_log_eval(run->log, step, global, top1, top5, tally[2]);
  return st == CNNB_OK ? cnnb_summaries_eval(run, global, top1, top5) : st;
}

/* One evaluation of the model in memory after timed step `step` (global step `global`),
 * and the target. Between steps, tf's "Resuming training" follows unless the target
 * stops the run. */
static cnnb_status evaluate(step_loop *loop, int64_t step, int64_t global, bool final) {
  cnnb_eval_result result;
  cnnb_status st = cnnb_evaluation_run(loop->run, step, global, final, loop->out, &result);
  if (st != CNNB_OK) return st;
  int64_t tally[3] = {result.top1_hits, result.top5_hits, result.examples};
  if ((st = record_eval(loop->run, step, global, tally)) != CNNB_OK) return st;
  check_target(loop, &result, step, global);
  if (!final && !loop->target.reached)
    cnnb_report_print_progress(loop->out, loop->run->ctx, "Resuming training");
  return CNNB_OK;
}

/* --eval_during_training_*: evaluates after timed step i when due, outside the timed part
 * (the training's images/sec leave evaluations and saves out). The last step's comes
 * after the total. */
static cnnb_status evaluate_if_due(step_loop *loop, int64_t i) {
  if (i + 1 >= loop->run->facts.num_batches || !cnnb_evaluation_due(loop->run, i + 1))
    return CNNB_OK;
  return evaluate(loop, i + 1, global_step(loop, i) + 1, false);
}

/* --train_dir: a checkpoint after timed step i when one is due (checkpoint.h). */
static cnnb_status save_if_due(step_loop *loop, int64_t i) {
  if (!loop->training) return CNNB_OK;
  int64_t global = global_step(loop, i) + 1;
  bool due = false;
  cnnb_status st = cnnb_checkpoint_due(loop->run, global, &due);
  if (st != CNNB_OK || !due) return st;
  loop->saved_step = global;
  return cnnb_checkpoint_save(loop->run, global);
}

/* A run stopped by a signal: where, and what was saved (in finish_steps: training with
 * --train_dir that took a step since its start). */
static cnnb_status say_stopped(step_loop *loop, int64_t end_step, bool saved) {
  const char *why = !loop->training          ? (loop->eval ? "--eval" : "--forward_only")
                    : !*loop->cfg->train_dir ? "no --train_dir"
                                             : "no step since the start";
  bool in_warm_up = loop->steps_run == 0 && loop->warmed < loop->cfg->num_warmup_batches;
  return cnnb_run_report_interrupted(loop->run, loop->steps_run, in_warm_up,
                                     loop->training ? end_step : -1, saved, why);
}

/* After the last timed step: the checkpoint of the end, --eval's accuracy line (printed
 * before the total, as tf_cnn_benchmarks' _eval_once), the total, the final evaluation
 * (unless the run stopped at the target right after one), the skipped examples, and
 * whether the target was reached. A run stopped by a signal does the same up to the
 * total over the steps it ran (which says so), then skips the final evaluation and the
 * target. */
static cnnb_status finish_steps(step_loop *loop) {
  cnnb_run *run = loop->run;
  const cnnb_run_config *cfg = loop->cfg;
  int64_t end_step = global_step(loop, loop->steps_run);
  cnnb_status st = CNNB_OK;
  if (cfg->step_graphs) {
    /* Whether the figure above is one of recorded steps: a fallback only warned. */
    int64_t recorded = 0, replayed = 0;
    cnnb_executor_step_graph_counts(run->replicas[0].executor, &recorded, &replayed);
    cnnb_log(run->ctx, CNNB_LOG_INFO,
             "--cuda_graphs: %lld recording(s), %lld of %lld steps replayed", (long long)recorded,
             (long long)replayed, (long long)(loop->warmed + loop->steps_run));
  }
  /* Stopped before any step: the weights are the checkpoint's (or the initializers'). */
  bool trained = !loop->stopped || end_step > run->facts.start_step;
  bool save = loop->training && *cfg->train_dir && loop->saved_step != end_step && trained;
  if (save && (st = cnnb_checkpoint_save(run, end_step)) != CNNB_OK) return st;
  if (loop->stopped &&
      (st = say_stopped(loop, end_step, loop->training && *cfg->train_dir && trained)) != CNNB_OK)
    return st;
  int64_t *tally = loop->tally;
  if (loop->eval) {
    if ((st = cnnb_world_sum(&run->facts.world, tally, 3, "summing the accuracy")) != CNNB_OK)
      return st;
    cnnb_report_print_accuracy(loop->out, tally[0], tally[1], tally[2]);
    /* The checkpoint's global step: --eval's steps update nothing. */
    if ((st = record_eval(run, loop->steps_run, run->facts.start_step, tally)) != CNNB_OK)
      return st;
  }
  /* This process's images; the world's total adds every rank's (world.h). */
  double images = (double)run->facts.process_batch * (double)loop->steps_run;
  if ((st = cnnb_run_print_total(run, images, loop->total_seconds, loop->steps_run, loop->out)) !=
      CNNB_OK)
    return st;
  cnnb_run_print_overflows(run, loop->steps_run, loop->out);
  if (loop->stopped) return cnnb_run_print_skipped(run, loop->out);
  if (cfg->eval_during_training && !loop->target.reached &&
      (st = evaluate(loop, loop->steps_run, end_step, true)) != CNNB_OK)
    return st;
  if ((st = cnnb_run_print_skipped(run, loop->out)) != CNNB_OK) return st;
  const target_watch *w = &loop->target;
  if (w->target > 0 && !w->reached)
    return cnnb_error(run->ctx, CNNB_ENUMERIC,
                      "--target_accuracy=%g not reached in %lld steps: "
                      "the best top-1 was %.4f, at step %lld (train longer: --num_epochs)",
                      w->target, (long long)loop->steps_run, w->best_top1, (long long)w->best_step);
  return CNNB_OK;
}

cnnb_status cnnb_run_model_steps(cnnb_run *run, FILE *out, cnnb_trace *trace) {
  step_loop loop;
  cnnb_status st = begin_steps(&loop, run, out, trace);
  if (st == CNNB_OK) st = warm_up(&loop);
  for (int64_t i = 0;
       st == CNNB_OK && !loop.stopped && i < run->facts.num_batches && !loop.target.reached; i++) {
    /* Between two steps: a signal stops the run before this one (run/interrupted.h). */
    if ((st = cnnb_run_check_interrupt(run, &loop.stopped)) != CNNB_OK || loop.stopped) break;
    step_result res;
    if ((st = timed_step(&loop, i, &res)) == CNNB_OK &&
        (st = show_step(&loop, i, &res)) == CNNB_OK && (st = evaluate_if_due(&loop, i)) == CNNB_OK)
      st = save_if_due(&loop, i);
  }
  if (st == CNNB_OK) st = finish_steps(&loop);
  end_steps(&loop);
  return st;
}

/* evaluation.c — the model in memory evaluated while it trains (evaluation.h): the
 * second, inference-mode set of devices, executors and validation datasources, when to
 * evaluate, and one evaluation. */
#include "run/evaluation.h"

#include <math.h>
#include <stdlib.h>

#include "base/clock.h"
#include "graph/op_device.h"
#include "report/report.h"
#include "run/replica.h"
#include "run/model_graph.h"
#include "run/world.h"

/* Floats staged through the host per copy: bounded memory whatever the model's size. */
#define COPY_CHUNK ((int64_t)1 << 20)

/* tf_cnn_benchmarks' step for epoch e: int(e * examples + batch - 1) // batch. */
static int64_t step_of_epoch(double e, const cnnb_eval_schedule *s) {
  double x = floor(e * (double)s->examples_per_epoch + (double)s->global_batch - 1.0);
  return (int64_t)floor(x / (double)s->global_batch);
}

bool cnnb_eval_schedule_due(const cnnb_eval_schedule *s, int64_t step) {
  if (step < 1 || step >= s->num_batches) return false;
  if (s->every_n_steps > 0) return step % s->every_n_steps == 0;
  for (size_t i = 0; i < s->at_steps_count; i++)
    if (s->at_steps[i] == step) return true;
  for (size_t i = 0; s->examples_per_epoch > 0 && s->global_batch > 0 && i < s->at_epochs_count;
       i++)
    if (step_of_epoch(s->at_epochs[i], s) == step) return true;
  if (!(s->every_n_epochs > 0) || s->examples_per_epoch <= 0 || s->global_batch <= 0) return false;
  /* numpy.arange(n, num_epochs, n): e_i = n + i * n while e_i < num_epochs. The steps grow
   * with i, so start a little before the i whose step is near `step` and walk up. */
  double n = s->every_n_epochs;
  double num_epochs = (double)s->num_batches * (double)s->global_batch /
                      (double)s->examples_per_epoch;
  double guess =
      (double)(step - 1) * (double)s->global_batch / ((double)s->examples_per_epoch * n) - 2.0;
  int64_t i = guess > 0 ? (int64_t)guess : 0;
  for (;; i++) {
    double e = n + (double)i * n;
    if (!(e < num_epochs)) return false;
    int64_t at = step_of_epoch(e, s);
    if (at == step) return true;
    if (at > step) return false;
  }
}

bool cnnb_evaluation_due(const cnnb_run *run, int64_t step) {
  const cnnb_run_config *cfg = run->cfg;
  if (!cfg->eval_during_training) return false;
  cnnb_eval_schedule s = {
      .every_n_steps = cfg->eval_every_n_steps,
      .every_n_epochs = cfg->eval_every_n_epochs,
      .examples_per_epoch = run->facts.examples_per_epoch,
      .global_batch = run->facts.global_batch,
      .num_batches = run->facts.num_batches,
      .at_steps = cfg->eval_at_steps,
      .at_steps_count = cfg->eval_at_steps_count,
      .at_epochs = cfg->eval_at_epochs,
      .at_epochs_count = cfg->eval_at_epochs_count,
  };
  return cnnb_eval_schedule_due(&s, step);
}

/* ---- setup ------------------------------------------------------------------------ */

/* One replica's evaluation set: the same device again in inference mode, an executor of
 * the graph on it (its arenas refreshed from the training executor's before each
 * evaluation), and a datasource instance reading the validation split. */
typedef struct eval_replica {
  cnnb_ctx *device_ctx;
  void *device;
  cnnb_executor *executor;
  cnnb_ctx *datasource_ctx;
  void *datasource;
  cnnb_prefetch *input;
} eval_replica;

struct cnnb_evaluation {
  eval_replica *replicas;     /* [facts.replicas] */
  int32_t batch_size;         /* per replica: facts.eval_batch_size */
  int64_t global_batch;       /* an evaluation batch over every replica and rank */
  cnnb_graph *graph;          /* the model at batch_size; NULL: the run's own (the same size) */
  int64_t examples_per_epoch; /* the validation split's; 0: unknown */
  int64_t num_batches;        /* per replica, per evaluation */
  /* What an evaluation counts when it covers epochs of the split with one instance: its
   * last batch runs past them, and the examples past them, read again, are not counted
   * twice. 0: every example of every batch. */
  int64_t examples;
};

static cnnb_status create_replica(cnnb_run *run, int32_t index, cnnb_evaluation *ev,
                                  eval_replica *e) {
  const cnnb_bound_plugin *device = &run->facts.device;
  cnnb_graph *graph = ev->graph ? ev->graph : run->graph;
  cnnb_status st = cnnb_replica_create_device(run, index, false, &e->device_ctx, &e->device);
  if (st != CNNB_OK) return st;
  CNNB_GUARDED(device->label, "supports_op", NULL,
               st = cnnb_ops_check_device(run->ctx, graph, device->vt.device, e->device,
                                          device->plugin->abi_minor, device->name));
  if (st != CNNB_OK) return st;
  cnnb_executor_config ecfg = {
      .training = false,
      .device_ctx = e->device_ctx,
      .crash_label = device->label,
      .constant_batch = cnnb_replica_constant_batch(run),
  };
  /* Its arenas start at zero and are filled from the training executor's before each
   * evaluation, so no initial values are drawn here. */
  st = cnnb_executor_create(run->ctx, device->vt.device, e->device, graph, &ecfg, &e->executor);
  if (st != CNNB_OK) return st;
  if ((st = cnnb_replica_create_datasource(run, index, false, ev->batch_size, &e->datasource_ctx,
                                           &e->datasource)) != CNNB_OK)
    return st;
  /* fp32 batches: the evaluation executor is not given the uint8 conversion. */
  return cnnb_replica_start_input(run, index, ev->batch_size, e->datasource_ctx, e->datasource,
                                  NULL, &e->input);
}

void cnnb_evaluation_free(cnnb_run *run, cnnb_evaluation *e) {
  if (!e) return;
  for (int32_t i = 0; e->replicas && i < run->facts.replicas; i++) {
    eval_replica *r = &e->replicas[i];
    cnnb_prefetch_destroy(r->input); /* before the datasource its thread reads */
    if (r->datasource) run->facts.datasource.vt.datasource->destroy(r->datasource);
    cnnb_executor_destroy(r->executor);
    if (r->device) run->facts.device.vt.device->destroy(r->device);
    cnnb_ctx_destroy(r->device_ctx);
    cnnb_ctx_destroy(r->datasource_ctx);
  }
  free(e->replicas);
  cnnb_graph_destroy(e->graph);
  free(e);
}

int64_t cnnb_evaluation_skipped_examples(const cnnb_run *run) {
  const cnnb_evaluation *e = run->evaluation;
  int64_t total = 0;
  for (int32_t i = 0; e && e->replicas && i < run->facts.replicas; i++)
    total += cnnb_replica_skipped_examples(run, e->replicas[i].datasource);
  return total;
}

/* Batches per evaluation: see cnnb_evaluation_prepare. */
static cnnb_status count_eval_batches(cnnb_run *run, cnnb_evaluation *e) {
  const cnnb_run_config *cfg = run->cfg;
  double global = (double)e->global_batch;
  int64_t examples = e->examples_per_epoch;
  if (cfg->num_eval_batches > 0) {
    e->num_batches = cfg->num_eval_batches;
    return CNNB_OK;
  }
  double epochs = cfg->num_eval_epochs > 0 ? cfg->num_eval_epochs : 1.0;
  if (examples <= 0 && cfg->num_eval_epochs > 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--num_eval_epochs=%g: datasource %s does not say how many examples its "
                      "validation split holds; give --num_eval_batches instead",
                      cfg->num_eval_epochs, run->facts.datasource.name);
  if (examples <= 0) {
    e->num_batches = run->facts.num_batches;
    cnnb_log(run->ctx, CNNB_LOG_INFO,
             "datasource %s does not say how big its validation split is: each evaluation "
             "runs %lld batches (the training's; --num_eval_batches sets it)",
             run->facts.datasource.name, (long long)run->facts.num_batches);
    return CNNB_OK;
  }
  double steps = ceil(epochs * (double)examples / global);
  if (!(steps >= 1.0 && steps <= (double)(INT64_MAX / 4)))
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--num_eval_epochs=%g: that is %g batches, more than a run can count", epochs,
                      steps);
  e->num_batches = (int64_t)steps;
  /* One datasource instance reads the split in order, so an evaluation's examples are the
   * next ones of its stream: the first epochs * examples of them are each example once
   * (or as many times as whole epochs ask). Several instances each read a shard whose
   * size only the datasource knows: they count whole batches, as tf_cnn_benchmarks. */
  if (run->facts.replicas * run->facts.world.size == 1)
    e->examples = (int64_t)llround(epochs * (double)examples);
  return CNNB_OK;
}

cnnb_status cnnb_evaluation_prepare(cnnb_run *run) {
  const cnnb_run_config *cfg = run->cfg;
  const cnnb_run_facts *f = &run->facts;
  if (cfg->eval_every_n_epochs > 0 && f->examples_per_epoch <= 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--eval_during_training_every_n_epochs=%g: datasource %s does not say "
                      "how many examples a training epoch holds; give "
                      "--eval_during_training_every_n_steps instead",
                      cfg->eval_every_n_epochs, run->facts.datasource.name);
  if (cfg->eval_at_epochs_count && f->examples_per_epoch <= 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--eval_during_training_at_specified_epochs: datasource %s does not say "
                      "how many examples a training epoch holds; give "
                      "--eval_during_training_at_specified_steps instead",
                      run->facts.datasource.name);
  cnnb_evaluation *e = run->evaluation = calloc(1, sizeof *run->evaluation);
  if (!e || !(e->replicas = calloc((size_t)f->replicas, sizeof *e->replicas)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  e->batch_size = f->eval_batch_size;
  e->global_batch = (int64_t)e->batch_size * f->replicas * f->world.size;
  cnnb_status st;
  /* --eval_batch_size: the model once more at that size (the same parameters: a graph's
   * arenas do not depend on its batch, which the copies before each evaluation rely on). */
  if (e->batch_size != f->batch_size) {
    if ((st = cnnb_model_graph_build_fused(run, e->batch_size, &e->graph)) != CNNB_OK) return st;
    if (cnnb_graph_param_arena_count(e->graph) != cnnb_graph_param_arena_count(run->graph) ||
        cnnb_graph_stat_arena_count(e->graph) != cnnb_graph_stat_arena_count(run->graph))
      return cnnb_error(run->ctx, CNNB_EINVAL,
                        "--eval_batch_size=%d: model %s has other parameters at that batch size "
                        "than at --batch_size=%d, so it cannot be evaluated at it",
                        (int)e->batch_size, run->facts.model.name, (int)f->batch_size);
  }
  for (int32_t i = 0; i < f->replicas; i++)
    if ((st = create_replica(run, i, e, &e->replicas[i])) != CNNB_OK) return st;
  const cnnb_bound_plugin *datasource = &run->facts.datasource;
  int64_t examples = 0;
  if (datasource->vt.datasource->examples_per_epoch)
    CNNB_GUARDED(datasource->label, "examples_per_epoch", NULL,
                 examples =
                     datasource->vt.datasource->examples_per_epoch(e->replicas[0].datasource));
  e->examples_per_epoch = examples > 0 ? examples : 0;
  if ((st = count_eval_batches(run, e)) != CNNB_OK) return st;
  int64_t read = e->num_batches * e->global_batch;
  cnnb_log(run->ctx, CNNB_LOG_INFO,
           "evaluating during training: %lld batches of %d per replica each time (%lld "
           "examples%s)",
           (long long)e->num_batches, (int)e->batch_size,
           (long long)(e->examples > 0 ? e->examples : read),
           e->examples > 0 && e->examples < read ? ", the last batch's excess not counted"
                                                 : " in all");
  return CNNB_OK;
}

/* ---- one evaluation ----------------------------------------------------------------- */

/* count floats from the training instance's src to the evaluation instance's dst. */
static cnnb_status copy_arena(cnnb_run *run, const cnnb_replica *r, const eval_replica *e,
                              const float *src, float *dst, int64_t count, float *staging,
                              const char *what) {
  const cnnb_bound_plugin *device = &run->facts.device;
  const cnnb_device_vtable *dv = device->vt.device;
  for (int64_t off = 0; off < count; off += COPY_CHUNK) {
    int64_t n = count - off < COPY_CHUNK ? count - off : COPY_CHUNK;
    size_t bytes = (size_t)n * sizeof(float);
    char where[128];
    snprintf(where, sizeof where, "reading the %s to evaluate (replica %d)", what, (int)r->index);
    cnnb_status st;
    CNNB_PLUGIN_CALL(st, run->ctx, device, "copy_to_host", r->device_ctx, where,
                     dv->copy_to_host(r->device, staging, src + off, bytes));
    if (st != CNNB_OK) return st;
    snprintf(where, sizeof where, "loading the %s to evaluate (replica %d)", what, (int)r->index);
    CNNB_PLUGIN_CALL(st, run->ctx, device, "copy_to_device", e->device_ctx, where,
                     dv->copy_to_device(e->device, dst + off, staging, bytes));
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

static cnnb_status load_model(cnnb_run *run, float *staging) {
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++) {
    const cnnb_replica *r = &run->replicas[i];
    const eval_replica *e = &run->evaluation->replicas[i];
    st = copy_arena(run, r, e, cnnb_executor_params(r->executor), cnnb_executor_params(e->executor),
                    cnnb_executor_param_count(r->executor), staging, "parameters");
    if (st == CNNB_OK)
      st = copy_arena(run, r, e, cnnb_executor_stats(r->executor), cnnb_executor_stats(e->executor),
                      cnnb_executor_stat_count(r->executor), staging, "batch-norm statistics");
  }
  return st;
}

cnnb_status cnnb_evaluation_run(cnnb_run *run, int64_t step, int64_t global_step, bool final,
                                FILE *out, cnnb_eval_result *result) {
  cnnb_evaluation *e = run->evaluation;
  char line[96];
  snprintf(line, sizeof line, "Running %sevaluation at global_step %lld", final ? "final " : "",
           (long long)global_step);
  cnnb_report_print_progress(out, run->ctx, line);
  double start = cnnb_now_seconds();
  int64_t largest = cnnb_graph_param_arena_count(run->graph);
  if (cnnb_graph_stat_arena_count(run->graph) > largest)
    largest = cnnb_graph_stat_arena_count(run->graph);
  size_t staged = (size_t)(largest < COPY_CHUNK ? largest : COPY_CHUNK);
  float *staging = malloc((staged ? staged : 1) * sizeof *staging);
  if (!staging) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st = load_model(run, staging);
  free(staging);
  /* hits at 1, hits at 5, examples: summed over replicas here, then over ranks. */
  int64_t tally[3] = {0, 0, 0};
  int64_t display_every = run->cfg->display_every;
  double shown_at = cnnb_now_seconds();
  for (int64_t b = 0; st == CNNB_OK && b < e->num_batches; b++) {
    for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++) {
      eval_replica *r = &e->replicas[i];
      const float *images;
      const int32_t *labels;
      if ((st = cnnb_prefetch_next(r->input, &images, &labels)) != CNNB_OK) {
        st = cnnb_plugin_failed(run->ctx, &run->facts.datasource, st, r->datasource_ctx,
                                "reading a validation batch");
        break;
      }
      if ((st = cnnb_executor_step(r->executor, images, labels, 1.0f, (uint64_t)b)) != CNNB_OK)
        break;
      int32_t counted = e->batch_size;
      if (e->examples > 0 && e->examples - tally[2] < counted)
        counted = (int32_t)(e->examples - tally[2]);
      int top1 = 0, top5 = 0;
      CNNB_GUARDED(run->facts.device.label, "tensor_to_host", "logits",
                   st = cnnb_executor_accuracy_first(r->executor, labels, counted, &top1, &top5));
      tally[0] += top1;
      tally[1] += top5;
      tally[2] += counted;
    }
    /* tf's _eval_once: every --display_every batches, their examples over their time. */
    if (st == CNNB_OK && display_every > 0 && (b + 1) % display_every == 0) {
      double now = cnnb_now_seconds();
      double examples = (double)display_every * (double)e->global_batch;
      cnnb_report_print_eval_step(out, b + 1, now > shown_at ? examples / (now - shown_at) : 0);
      if (out) fflush(out);
      shown_at = now;
    }
  }
  if (st == CNNB_OK)
    st = cnnb_world_sum(&run->facts.world, tally, 3, "summing the evaluation's accuracy");
  if (st != CNNB_OK) return st;
  cnnb_log(run->ctx, CNNB_LOG_INFO,
           "evaluation at step %lld took %.3f s (left out of the training's images/sec)",
           (long long)step, cnnb_now_seconds() - start);
  cnnb_report_print_accuracy(out, tally[0], tally[1], tally[2]);
  if (out) fflush(out);
  if (result) {
    double examples = tally[2] > 0 ? (double)tally[2] : 1.0;
    *result = (cnnb_eval_result){tally[0], tally[1], tally[2], (double)tally[0] / examples,
                                 (double)tally[1] / examples};
  }
  return CNNB_OK;
}

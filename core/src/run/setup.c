/* setup.c — turns a run configuration into a ready run: the four plugins resolved by
 * name, the model's facts, the graph, one replica per device (device instance, executor,
 * optimizer, datasource) joined by the strategy (setup.h).
 *
 * Every failure names the flag or the plugin at fault; the caller prints it and exits.
 * Plugins' optional slots are NULL in the loader's copies when a plugin lacks them, so
 * each is checked before it is called. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "run/setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/plan.h"
#include "graph/graph_internal.h"
#include "graph/op_device.h"
#include "report/benchmark_log.h"
#include "run/checkpoint.h"
#include "run/evaluation.h"
#include "run/input_dtype.h"
#include "run/model_graph.h"
#include "run/recipe.h"
#include "run/replica.h"
#include "run/summaries.h"
#include "run/world.h"

/* ---- plugins -------------------------------------------------------------------- */

/* The datasource: the one --datasource names, or the datasource plugin whose probe gives
 * the highest priority for this run's data (synthetic without --data_dir). */
static cnnb_status choose_datasource(cnnb_run *run, cnnb_loader *loader,
                                     const cnnb_datasource_config *probe_cfg) {
  const cnnb_run_config *cfg = run->cfg;
  if (*cfg->datasource)
    return cnnb_bound_plugin_open(&run->facts.datasource, loader, CNNB_KIND_DATASOURCE,
                                  cfg->datasource, run->ctx);
  size_t count = cnnb_loader_names(loader, CNNB_KIND_DATASOURCE, NULL, 0);
  const char **names = calloc(count ? count : 1, sizeof *names);
  char *reasons = NULL;
  size_t reasons_len = 0;
  FILE *why = open_memstream(&reasons, &reasons_len);
  if (!names || !why) {
    free(names);
    if (why) fclose(why);
    free(reasons);
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  }
  cnnb_loader_names(loader, CNNB_KIND_DATASOURCE, names, count);
  const char *best = NULL;
  int32_t best_priority = 0;
  cnnb_status st = CNNB_OK;
  for (size_t i = 0; i < count && st == CNNB_OK; i++) {
    const cnnb_plugin *plugin;
    const char *path;
    if (cnnb_loader_find(loader, CNNB_KIND_DATASOURCE, names[i], &plugin, &path, NULL, 0) !=
        CNNB_OK)
      continue;
    const cnnb_datasource_vtable *vt = plugin->vtable;
    if (!vt->probe) {
      fprintf(why, "; %s: picked only by --datasource=%s", names[i], names[i]);
      continue;
    }
    cnnb_ctx *ctx = cnnb_ctx_create_child(run->ctx, names[i]);
    if (!ctx) {
      st = cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
      break;
    }
    int32_t priority;
    CNNB_GUARDED(path, "probe", names[i], priority = vt->probe(ctx, names[i], probe_cfg));
    if (priority > best_priority) best = names[i], best_priority = priority;
    if (priority <= 0)
      fprintf(why, "; %s: %s", names[i],
              *cnnb_error_message(ctx) ? cnnb_error_message(ctx) : "cannot serve it");
    cnnb_ctx_destroy(ctx);
  }
  fclose(why);
  if (st == CNNB_OK && best)
    st = cnnb_bound_plugin_open(&run->facts.datasource, loader, CNNB_KIND_DATASOURCE, best,
                                run->ctx);
  else if (st == CNNB_OK)
    st = cnnb_error(run->ctx, CNNB_EINVAL,
                    "%s%s%s--data_name=%s: no datasource plugin can serve it (%s%s); install "
                    "one that can, or name one with --datasource=NAME (see --list_plugins)",
                    *cfg->data_dir ? "--data_dir=" : "", cfg->data_dir,
                    *cfg->data_dir ? " with " : "", cfg->dataset->name,
                    count ? "" : "no datasource plugin was found",
                    reasons && *reasons ? reasons + 2 : "");
  free(reasons);
  free(names);
  return st;
}

/* ---- the model and its graph ------------------------------------------------------ */

static cnnb_status check_model_info(cnnb_run *run) {
  const cnnb_model_info *info = &run->info;
  if (info->image_size < 1 || info->image_size > 4096 || info->default_batch_size < 1 ||
      !isfinite(info->default_learning_rate) || !(info->default_learning_rate > 0.0f))
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--model=%s: %s describes it with image size %d, default batch size %d "
                      "and default learning rate %g; they must be in [1, 4096], >= 1 and a "
                      "finite number > 0: fix the plugin",
                      run->facts.model.name, run->facts.model.label, info->image_size,
                      info->default_batch_size, (double)info->default_learning_rate);
  return CNNB_OK;
}

static cnnb_status describe_model(cnnb_run *run) {
  const cnnb_bound_plugin *model = &run->facts.model;
  run->info.struct_size = sizeof run->info;
  char what[512];
  snprintf(what, sizeof what, "--model=%s with --data_name=%s", model->name,
           run->cfg->dataset->name);
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, model, "describe", model->ctx, what,
                   model->vt.model->describe(model->ctx, model->name, run->cfg->dataset->kind,
                                             &run->info));
  if (st != CNNB_OK || (st = check_model_info(run)) != CNNB_OK) return st;
  if (run->info.optimizer) {
    char applied[512];
    run->recipe_cfg = *run->cfg;
    st = cnnb_recipe_apply(run->ctx, model->name, &run->info, &run->recipe_cfg, applied,
                           sizeof applied);
    if (st != CNNB_OK) return st;
    run->cfg = &run->recipe_cfg;
    if (*applied && run->cfg->mode == CNNB_MODE_TRAIN && !run->cfg->model_info)
      cnnb_log(run->ctx, CNNB_LOG_INFO,
               "%s's training recipe sets %s (--model_info shows it; "
               "a flag given wins)",
               model->name, applied);
  }
  cnnb_run_facts *f = &run->facts;
  f->batch_size = run->cfg->batch_size ? run->cfg->batch_size : run->info.default_batch_size;
  f->eval_batch_size = run->cfg->eval_batch_size ? run->cfg->eval_batch_size : f->batch_size;
  f->image_size = run->cfg->image_size ? run->cfg->image_size : run->info.image_size;
  f->num_classes = run->cfg->num_classes;
  return CNNB_OK;
}

static cnnb_status build_graph(cnnb_run *run) {
  return cnnb_model_graph_build(run, run->facts.batch_size, &run->graph);
}

cnnb_status cnnb_run_open(cnnb_run *run, const cnnb_run_config *cfg, cnnb_ctx *parent,
                          cnnb_loader *loader) {
  run->cfg = cfg;
  cnnb_run_facts *f = &run->facts;
  f->replicas = cfg->num_replicas;
  if (!(run->ctx = cnnb_ctx_create_child(parent, "cnnbench"))) return CNNB_ENOMEM;
  f->world = (cnnb_world){.rank = 0, .size = 1, .strategy = &run->facts.strategy, .ctx = run->ctx};
  cnnb_status st = cnnb_bound_plugin_open(&run->facts.model, loader, CNNB_KIND_MODEL, cfg->model,
                                          run->ctx);
  if (st != CNNB_OK || (st = describe_model(run)) != CNNB_OK) return st;
  return build_graph(run);
}

/* ---- replicas -------------------------------------------------------------------------- */

/* Every replica's device runs every op of the graph: refused here, before the executors
 * plan and allocate anything, naming the op, a node using it and the device. */
static cnnb_status check_ops(cnnb_run *run) {
  const cnnb_bound_plugin *device = &run->facts.device;
  cnnb_status st = CNNB_OK;
  for (int32_t i = 0; st == CNNB_OK && i < run->facts.replicas; i++)
    CNNB_GUARDED(device->label, "supports_op", NULL,
                 st = cnnb_ops_check_device(run->ctx, run->graph, device->vt.device,
                                            run->replicas[i].device, device->plugin->abi_minor,
                                            device->name));
  return st;
}

/* The executor's bucket callback: the strategy hears of a bucket once every local replica
 * has it. Replicas run one after another here, so that is when the last one announces. */
static void on_bucket(void *user, int64_t offset, int64_t count) {
  cnnb_replica *replica = user;
  cnnb_run *run = replica->run;
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  if (replica->index != run->facts.replicas - 1 || run->bucket_status != CNNB_OK) return;
  CNNB_PLUGIN_CALL(run->bucket_status, run->ctx, strategy, "bucket_ready", strategy->ctx,
                   "gradient exchange",
                   strategy->vt.strategy->bucket_ready(strategy->state, run->grads, offset, count));
}

static cnnb_status create_executor(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  snprintf(r->trace_track, sizeof r->trace_track, "replica %d", (int)index);
  cnnb_executor_config ecfg = {
      .training = run->cfg->mode == CNNB_MODE_TRAIN,
      .bucket_bytes = run->cfg->gradient_bucket_bytes,
      .on_bucket = on_bucket,
      .user = r,
      .device_ctx = r->device_ctx,
      .profile = run->profile,
      .crash_label = run->facts.device.label,
      /* Only a traced run names a track: the per-node args are made for it alone. */
      .trace_track = run->cfg->trace_file && *run->cfg->trace_file ? r->trace_track : NULL,
      .constant_batch = cnnb_replica_constant_batch(run),
      /* A recorded step holds one device's calls and none of the host's: the strategy's
       * exchange between replicas or processes would have to be in it. */
      .step_graph = run->cfg->step_graphs,
      .step_graph_blocked = run->facts.replicas > 1     ? "several replicas (--num_gpus) exchange "
                                                          "gradients inside a step"
                            : run->facts.world.size > 1 ? "several processes exchange gradients "
                                                          "inside a step"
                                                        : NULL,
  };
  cnnb_status st = cnnb_executor_create(run->ctx, run->facts.device.vt.device, r->device,
                                        run->graph, &ecfg, &r->executor);
  if (st != CNNB_OK) return st;
  /* Every replica draws the same initial values; the strategy's broadcast then makes
   * strategies that need it agree even across processes. */
  if ((st = cnnb_executor_init_params(r->executor, run->cfg->seed)) != CNNB_OK) return st;
  run->params[index] = cnnb_executor_params(r->executor);
  run->grads[index] = cnnb_executor_grads(r->executor);
  return CNNB_OK;
}

/* Where each trainable variable starts in the parameter arena, and the arena's end: what
 * a strategy shards by. Params are laid out in index order (graph.c), stats elsewhere. */
static int64_t *variable_bounds(const cnnb_graph *g, int64_t param_count, int32_t *num) {
  int32_t np = cnnb_graph_num_params(g);
  int64_t *bounds = malloc(((size_t)np + 1) * sizeof *bounds);
  if (!bounds) return NULL;
  *num = 0;
  for (int32_t i = 0; i < np; i++) {
    const cnnb_param *p = cnnb_graph_param(g, i);
    if (!p->is_stat && p->count > 0) bounds[(*num)++] = p->offset;
  }
  if (*num > 0) bounds[0] = 0; /* nothing lies before the first, but if it did it is its */
  bounds[*num] = param_count;
  return bounds;
}

/* The world as the strategy reports it: its rank and size, checked. */
static cnnb_status learn_world(cnnb_run *run) {
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  const cnnb_strategy_vtable *vt = strategy->vt.strategy;
  cnnb_world *w = &run->facts.world;
  CNNB_GUARDED(strategy->label, "world_size", NULL, {
    w->size = vt->world_size ? vt->world_size(strategy->state) : 1;
    w->rank = vt->rank ? vt->rank(strategy->state) : 0;
  });
  if (w->size < 1 || w->rank < 0 || w->rank >= w->size)
    return cnnb_error(run->ctx, CNNB_EINTERNAL, "%s reports rank %d of world size %d",
                      strategy->label, (int)w->rank, (int)w->size);
  if (w->size > 1) {
    /* Several processes share a terminal: every line says whose it is. Set before the
     * input threads start, as the tag's rule wants. */
    char tag[32];
    snprintf(tag, sizeof tag, "[rank %d]", (int)w->rank);
    cnnb_ctx_set_log_tag(run->ctx, tag);
  }
  return CNNB_OK;
}

static cnnb_status create_strategy(cnnb_run *run) {
  int32_t n = run->facts.replicas;
  const cnnb_run_config *rc = run->cfg;
  cnnb_bound_plugin *strategy = &run->facts.strategy;
  int64_t param_count = cnnb_graph_param_arena_count(run->graph);
  int32_t num_variables = 0;
  void **devices = malloc((size_t)n * sizeof *devices);
  int64_t *bounds = variable_bounds(run->graph, param_count, &num_variables);
  if (!devices || !bounds) {
    free(devices);
    free(bounds);
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  }
  for (int32_t i = 0; i < n; i++) devices[i] = run->replicas[i].device;
  cnnb_strategy_config cfg = {
      .struct_size = sizeof cfg,
      .local_replicas = n,
      .device = run->facts.device.vt.device,
      .devices = devices,
      .param_count = param_count,
      .variable_bounds = bounds,
      .num_variables = num_variables,
      .precision = rc->precision,
      .all_reduce_spec = rc->all_reduce_spec,
      .collective_timeout_s = rc->collective_timeout_s,
      .gradient_repacking = rc->gradient_repacking,
      .compact_gradient_transfer = rc->compact_gradient_transfer,
      .auto_loss_scale = rc->trainer.fp16 && rc->trainer.auto_loss_scale,
      .device_name = run->facts.device.name,
  };
  char what[256];
  snprintf(what, sizeof what, "--variable_update=%s", strategy->name);
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, strategy, "create", strategy->ctx, what,
                   strategy->vt.strategy->create(strategy->ctx, strategy->name, &cfg,
                                                 &strategy->state));
  free(devices); /* the strategy copies what it keeps */
  free(bounds);
  if (st != CNNB_OK) {
    strategy->state = NULL;
    return st;
  }
  if (strategy->vt.strategy->apply_update && !strategy->vt.strategy->finish_update)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s offers apply_update without finish_update: the "
                      "replicas would never see the new variables (strategy.h)",
                      strategy->label);
  return learn_world(run);
}

/* After the executors drew their initial values, and once every rank agreed on the run
 * (a different parameter count would make the broadcast itself go wrong). */
static cnnb_status broadcast_params(cnnb_run *run) {
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  int64_t count = cnnb_graph_param_arena_count(run->graph);
  cnnb_status st = cnnb_world_check_agreement(&run->facts.world, run->cfg, &run->facts, count);
  if (st != CNNB_OK) return st;
  /* A checkpoint's values (--train_dir) replace the initializers' before the broadcast
   * spreads them, and before a strategy that keeps the variables takes its copy. */
  if ((st = cnnb_checkpoint_restore_model(run)) != CNNB_OK) return st;
  CNNB_PLUGIN_CALL(st, run->ctx, strategy, "broadcast_params", strategy->ctx,
                   "broadcasting parameters",
                   strategy->vt.strategy->broadcast_params(strategy->state, run->params, count));
  return st;
}

/* Training reads the training split; --eval and --forward_only read the validation one,
 * as tf_cnn_benchmarks' subset = 'validation' if eval; --input_only times the training
 * pipeline, the one a training run waits on. */
static bool reads_training_split(const cnnb_run *run) {
  return run->cfg->mode == CNNB_MODE_TRAIN || run->cfg->mode == CNNB_MODE_INPUT_ONLY;
}

/* A resumed training run (facts.start_step > 0, restored by broadcast_params): every step
 * before took one batch from each replica's instance, warm-up included, so the instance
 * continues its stream after that many (CNNB_EXT_DATASOURCE_SKIP), before its input
 * thread starts. Evaluation instances start at the beginning, as every evaluation does. A
 * datasource without the extension starts its order again: said once, not refused. */
static cnnb_status continue_stream(cnnb_run *run, int32_t index) {
  int64_t start = run->facts.start_step;
  if (run->cfg->mode != CNNB_MODE_TRAIN || start <= 0) return CNNB_OK;
  cnnb_replica *r = &run->replicas[index];
  const cnnb_bound_plugin *datasource = &run->facts.datasource;
  const cnnb_datasource_skip *skip =
      cnnb_bound_extension(datasource, r->datasource, CNNB_EXT_DATASOURCE_SKIP,
                           CNNB_EXT_NEEDS(cnnb_datasource_skip, skip_batches));
  if (!skip || !skip->skip_batches) {
    if (index == 0)
      cnnb_log(run->ctx, CNNB_LOG_WARN,
               "datasource '%s' cannot continue its stream: a resumed "
               "run reads from the start of its data order again",
               datasource->name);
    return CNNB_OK;
  }
  char what[256];
  snprintf(what, sizeof what, "datasource %s (replica %d) continuing its stream after %lld batches",
           datasource->name, (int)index, (long long)start);
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, datasource, "skip_batches", r->datasource_ctx, what,
                   skip->skip_batches(r->datasource, start));
  return st;
}

/* The steps a training run counts to: --num_batches, or --num_epochs over the
 * datasource's epoch. */
static cnnb_status count_total_batches(cnnb_run *run) {
  const cnnb_run_config *cfg = run->cfg;
  cnnb_run_facts *f = &run->facts;
  if (!(cfg->num_epochs > 0.0)) {
    f->total_batches = cfg->num_batches;
    return CNNB_OK;
  }
  /* Under --eval, --num_eval_epochs may be what set it (run_config.c): name that. */
  bool eval_flag = cfg->mode == CNNB_MODE_EVAL && cfg->num_eval_epochs > 0;
  const char *flag = eval_flag ? "--num_eval_epochs" : "--num_epochs";
  if (f->examples_per_epoch <= 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s=%g: datasource %s does not say how many examples an epoch holds; "
                      "give %s instead",
                      flag, cfg->num_epochs, run->facts.datasource.name,
                      eval_flag ? "--num_eval_batches" : "--num_batches");
  double global = (double)f->global_batch;
  double steps = ceil(cfg->num_epochs * (double)f->examples_per_epoch / global);
  if (!(steps >= 1.0 && steps <= (double)(INT64_MAX / 4)))
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s=%g: that is %g steps of %g images over %lld examples per "
                      "epoch, more than a run can count",
                      flag, cfg->num_epochs, steps, global, (long long)f->examples_per_epoch);
  f->total_batches = (int64_t)steps;
  return CNNB_OK;
}

/* The timed steps. A resumed training run counts --num_batches / --num_epochs as the
 * total, as tf_cnn_benchmarks' end_local_step = num_batches - global_step: a checkpoint
 * at global step G (warm-up steps count) leaves total - G timed steps, after the warm-up.
 * A checkpoint already there has nothing left to train: refused, saying how to go on. */
static cnnb_status count_batches(cnnb_run *run) {
  cnnb_run_facts *f = &run->facts;
  cnnb_status st = count_total_batches(run);
  if (st != CNNB_OK) return st;
  f->num_batches = f->total_batches;
  if (run->cfg->mode != CNNB_MODE_TRAIN || f->start_step <= 0) return CNNB_OK;
  f->num_batches = f->total_batches - f->start_step;
  if (f->num_batches > 0) return CNNB_OK;
  bool epochs = run->cfg->num_epochs > 0.0;
  return cnnb_error(run->ctx, CNNB_EINVAL,
                    "%s=%g is %lld steps in all, and --train_dir's checkpoint is at global step "
                    "%lld already: nothing is left to train (on resume %s counts the total, as "
                    "tf_cnn_benchmarks; give more to train further)",
                    epochs ? "--num_epochs" : "--num_batches",
                    epochs ? run->cfg->num_epochs : (double)run->cfg->num_batches,
                    (long long)f->total_batches, (long long)f->start_step,
                    epochs ? "--num_epochs" : "--num_batches");
}

static cnnb_status strategy_apply_update(void *user, int64_t offset, const cnnb_update *update) {
  cnnb_run *run = user;
  const cnnb_bound_plugin *strategy = &run->facts.strategy;
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, strategy, "apply_update", strategy->ctx, "applying the update",
                   strategy->vt.strategy->apply_update(strategy->state, offset, update));
  return st;
}

static cnnb_status create_trainer(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  const cnnb_bound_plugin *model = &run->facts.model;
  cnnb_lr_model lr_model = {
      .name = model->name,
      .ctx = model->ctx,
      .dataset = run->cfg->dataset->kind,
      .learning_rate_at = model->vt.model->learning_rate_at,
      .learning_rate = model->vt.model->learning_rate,
      .default_learning_rate = run->info.default_learning_rate,
      .crash_label = model->label,
  };
  cnnb_trainer_config tcfg = run->cfg->trainer;
  tcfg.lr.examples_per_epoch = run->facts.examples_per_epoch;
  tcfg.lr.global_batch_size = run->facts.global_batch;
  tcfg.lr.model = &lr_model;
  if (!run->facts.strategy.vt.strategy->apply_update)
    return cnnb_trainer_create(run->ctx, &tcfg, r->executor, &r->trainer);
  /* The strategy keeps the variables: replica 0's updates go to it, once per step. */
  cnnb_update_sink sink = {.apply = index == 0 ? strategy_apply_update : NULL, .user = run};
  return cnnb_trainer_create_with_sink(run->ctx, &tcfg, r->executor, &sink, &r->trainer);
}

/* A device that cannot run on this machine at all (no driver, no GPU) says so once,
 * before anything is created, instead of failing replica by replica. */
static cnnb_status check_device_available(cnnb_run *run) {
  const char *why;
  CNNB_GUARDED(run->facts.device.label, "availability", NULL,
               why = cnnb_device_unavailable(run->facts.device.plugin));
  if (!why) return CNNB_OK;
  return cnnb_error(run->ctx, CNNB_EUNSUPPORTED, "--device=%s cannot run on this machine: %s",
                    run->facts.device.name, why);
}

/* The device, strategy and datasource plugins; the model's was bound by cnnb_run_open. */
static cnnb_status bind_plugins(cnnb_run *run, cnnb_loader *loader) {
  const cnnb_run_config *cfg = run->cfg;
  cnnb_datasource_config probe_cfg =
      cnnb_replica_datasource_config(run, 0, reads_training_split(run), run->facts.batch_size);
  cnnb_status st = cnnb_bound_plugin_open(&run->facts.device, loader, CNNB_KIND_DEVICE, cfg->device,
                                          run->ctx);
  if (st != CNNB_OK && cfg->device_flag && strcmp(cfg->device_flag, cfg->device) != 0)
    return cnnb_error(run->ctx, st,
                      "--device=%s is tf_cnn_benchmarks' name for the %s device: no GPU can "
                      "run here (no %s device plugin is installed)",
                      cfg->device_flag, cfg->device, cfg->device);
  if (st == CNNB_OK)
    st = cnnb_bound_plugin_open(&run->facts.strategy, loader, CNNB_KIND_STRATEGY, cfg->strategy,
                                run->ctx);
  if (st == CNNB_OK) st = choose_datasource(run, loader, &probe_cfg);
  if (st != CNNB_OK) return st;
  /* A flag that only one strategy reads says so once when the run's is another. */
  if (cfg->gradient_repacking && strcmp(run->facts.strategy.plugin->name, "replicated") != 0)
    cnnb_log(run->ctx, CNNB_LOG_WARN,
             "--gradient_repacking=%d has no effect here: only the replicated strategy packs "
             "gradients, and --variable_update=%s does not",
             (int)cfg->gradient_repacking, cfg->strategy);
  return check_device_available(run);
}

static cnnb_status create_devices(cnnb_run *run) {
  int32_t n = run->facts.replicas;
  run->replicas = calloc((size_t)n, sizeof(cnnb_replica));
  run->params = calloc((size_t)n, sizeof *run->params);
  run->grads = calloc((size_t)n, sizeof *run->grads);
  if (!run->replicas || !run->params || !run->grads)
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  bool training = run->cfg->mode == CNNB_MODE_TRAIN;
  for (int32_t i = 0; i < n; i++) {
    cnnb_replica *r = &run->replicas[i];
    r->run = run;
    r->index = i;
    cnnb_status st = cnnb_replica_create_device(run, i, training, &r->device_ctx, &r->device);
    if (st != CNNB_OK) return st;
  }
  const cnnb_bound_plugin *device = &run->facts.device;
  const char *description = NULL;
  if (device->vt.device->describe)
    CNNB_GUARDED(device->label, "describe", NULL,
                 description = device->vt.device->describe(run->replicas[0].device));
  run->facts.device_description = description && *description ? description
                                                              : device->plugin->description;
  return CNNB_OK;
}

/* Every replica's datasource instance, continuing a resumed stream, and the epoch it
 * reads. */
static cnnb_status create_datasources(cnnb_run *run) {
  cnnb_status st;
  for (int32_t i = 0; i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    if ((st = cnnb_replica_create_datasource(run, i, reads_training_split(run),
                                             run->facts.batch_size, &r->datasource_ctx,
                                             &r->datasource)) != CNNB_OK ||
        (st = continue_stream(run, i)) != CNNB_OK)
      return st;
  }
  const cnnb_bound_plugin *datasource = &run->facts.datasource;
  int64_t examples = 0;
  if (datasource->vt.datasource->examples_per_epoch)
    CNNB_GUARDED(datasource->label, "examples_per_epoch", NULL,
                 examples =
                     datasource->vt.datasource->examples_per_epoch(run->replicas[0].datasource));
  run->facts.examples_per_epoch = examples > 0 ? examples : 0;
  return CNNB_OK;
}

cnnb_status cnnb_run_prepare(cnnb_run *run, cnnb_loader *loader) {
  const cnnb_run_config *cfg = run->cfg;
  cnnb_run_facts *f = &run->facts;
  int32_t n = f->replicas;
  bool model = cfg->mode != CNNB_MODE_INPUT_ONLY;
  cnnb_status st;
  if ((st = bind_plugins(run, loader)) != CNNB_OK || (st = create_devices(run)) != CNNB_OK)
    return st;
  if (model && (st = check_ops(run)) != CNNB_OK) return st;
  if (model) cnnb_model_graph_fuse_relus(run, run->graph);
  /* The strategy before any arena: it refuses what it cannot do (nccl on a cpu device)
   * before a model's memory is allocated. --input_only still creates it (and the devices
   * it is given) for this process's rank and the world's total, but no executor. */
  if ((st = create_strategy(run)) != CNNB_OK) return st;
  f->process_batch = (int64_t)f->batch_size * f->replicas;
  f->global_batch = f->process_batch * f->world.size;
  f->file_rank = f->world.rank;
  f->file_ranks = f->world.size;
  if (f->world.size == 1 && cfg->launcher_size > 1) {
    f->file_rank = cfg->launcher_rank;
    f->file_ranks = cfg->launcher_size;
    cnnb_log_component("cnnbench", CNNB_LOG_WARN,
                       "the launcher started %d processes and --variable_update=%s joins none "
                       "of them: each runs alone (its files are named as rank %d's of %d)",
                       (int)cfg->launcher_size, f->strategy.name, (int)cfg->launcher_rank,
                       (int)cfg->launcher_size);
  }
  /* The log is named by rank, known from the strategy on: opened now, before any arena is
   * allocated, so an unwritable directory stops the run early. */
  const char *log_dir = cfg->benchmark_log_dir;
  if (log_dir && *log_dir &&
      (st = cnnb_benchmark_log_open(run->ctx, log_dir, cfg->job_tag, f->file_rank, &run->log)) !=
          CNNB_OK)
    return st;
  if (model && (st = cnnb_summaries_open(run)) != CNNB_OK) return st; /* the same, for events */
  for (int32_t i = 0; model && i < n; i++)
    if ((st = create_executor(run, i)) != CNNB_OK) return st;
  if (model) st = broadcast_params(run);
  else st = cnnb_world_check_agreement(&f->world, cfg, f, cnnb_graph_param_arena_count(run->graph));
  if (st != CNNB_OK || (st = create_datasources(run)) != CNNB_OK ||
      (st = count_batches(run)) != CNNB_OK)
    return st;
  for (int32_t i = 0; i < n && cfg->mode == CNNB_MODE_TRAIN; i++)
    if ((st = create_trainer(run, i)) != CNNB_OK) return st;
  if (model && (st = cnnb_checkpoint_restore_optimizer(run)) != CNNB_OK) return st;
  if ((st = cnnb_input_dtype_choose(run)) != CNNB_OK) return st;
  for (int32_t i = 0; i < n; i++) {
    cnnb_replica *r = &run->replicas[i];
    if ((st = cnnb_replica_start_input(run, i, f->batch_size, r->datasource_ctx, r->datasource,
                                       r->uint8_batches, &r->input)) != CNNB_OK)
      return st;
  }
  if (cfg->eval_during_training && (st = cnnb_evaluation_prepare(run)) != CNNB_OK) return st;
  if ((st = cnnb_summaries_start(run)) != CNNB_OK) return st;
  return cnnb_benchmark_log_run(run->log, cfg, f, cnnb_ctx_flags(run->ctx));
}

void cnnb_run_close(cnnb_run *run) {
  cnnb_benchmark_log_close(run->log); /* first: its summary may report through run->ctx */
  cnnb_summaries_free(run);
  cnnb_checkpoints_free(run->checkpoints);
  cnnb_evaluation_free(run, run->evaluation);
  if (run->facts.strategy.state)
    run->facts.strategy.vt.strategy->destroy(run->facts.strategy.state);
  for (int32_t i = 0; run->replicas && i < run->facts.replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_prefetch_destroy(r->input); /* before the datasource its thread reads */
    if (r->datasource) run->facts.datasource.vt.datasource->destroy(r->datasource);
    cnnb_trainer_destroy(r->trainer);
    cnnb_executor_destroy(r->executor);
    if (r->device) run->facts.device.vt.device->destroy(r->device);
    cnnb_ctx_destroy(r->device_ctx);
    cnnb_ctx_destroy(r->datasource_ctx);
  }
  free(run->replicas);
  free(run->params);
  free(run->grads);
  cnnb_graph_destroy(run->graph);
  cnnb_bound_plugin_close(&run->facts.model);
  cnnb_bound_plugin_close(&run->facts.device);
  cnnb_bound_plugin_close(&run->facts.strategy);
  cnnb_bound_plugin_close(&run->facts.datasource);
  cnnb_ctx_destroy(run->ctx);
  memset(run, 0, sizeof *run);
}

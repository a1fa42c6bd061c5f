/* benchmark_setup.c — turns a run configuration into a ready run: the four plugins
 * resolved by name, the model's facts, the graph, one replica per device (device
 * instance, executor, optimizer, datasource) joined by the strategy.
 *
 * Every failure names the flag or the plugin at fault; the caller prints it and exits.
 * Plugins' optional slots are NULL in the loader's copies when a plugin lacks them, so
 * each is checked before it is called. */
#define _GNU_SOURCE /* asprintf */
#include "run/benchmark_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/benchmark_log.h"
#include "run/checkpoint.h"
#include "base/crash_guard.h"
#include "run/evaluation.h"
#include "graph/graph_internal.h"
#include "run/input_dtype.h"
#include "graph/op_device.h"
#include "exec/plan.h"
#include "run/world.h"

/* Batches read ahead per replica: enough to hide a slow batch, few enough to keep
 * memory small (each is a full batch of fp32 images, or of uint8 ones). */
#define INPUT_PREFETCH_DEPTH 2

cnnb_status cnnb_run_fail(cnnb_run *run, cnnb_status status, cnnb_ctx *from, const char *what) {
  const char *message = from ? cnnb_error_message(from) : "";
  if (!*message)
    return cnnb_error(run->ctx, status, "%s: %s (the plugin returned this status without a "
                      "message)", what, cnnb_status_name(status));
  return cnnb_error(run->ctx, status, "%s: %s", what, message);
}

/* ---- plugins -------------------------------------------------------------------- */

static cnnb_status find_plugin(cnnb_run *run, cnnb_loader *loader, uint32_t kind,
                               const char *name, cnnb_run_plugin *out) {
  char err[4096];
  cnnb_status st = cnnb_loader_find(loader, kind, name, &out->plugin, &out->path, err, sizeof err);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "%s", err);
  out->name = name;
  if (asprintf(&out->label, "%s plugin '%s' (%s)", cnnb_kind_name(kind), out->plugin->name,
               out->path) < 0) {
    out->label = NULL;
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  }
  return CNNB_OK;
}

/* The datasource: the one --datasource names, or the datasource plugin whose probe gives
 * the highest priority for this run's data (synthetic without --data_dir). */
static cnnb_status choose_datasource(cnnb_run *run, cnnb_loader *loader,
                                     const cnnb_datasource_config *probe_cfg) {
  const cnnb_run_config *cfg = run->cfg;
  if (*cfg->datasource)
    return find_plugin(run, loader, CNNB_KIND_DATASOURCE, cfg->datasource, &run->datasource);
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
    if (cnnb_loader_find(loader, CNNB_KIND_DATASOURCE, names[i], &plugin, &path, NULL, 0) != CNNB_OK)
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
    cnnb_crash_mark outer = cnnb_crash_enter(path, "probe", names[i]);
    int32_t priority = vt->probe(ctx, names[i], probe_cfg);
    cnnb_crash_leave(outer);
    if (priority > best_priority) best = names[i], best_priority = priority;
    if (priority <= 0)
      fprintf(why, "; %s: %s", names[i],
              *cnnb_error_message(ctx) ? cnnb_error_message(ctx) : "cannot serve it");
    cnnb_ctx_destroy(ctx);
  }
  fclose(why);
  if (st == CNNB_OK && best)
    st = find_plugin(run, loader, CNNB_KIND_DATASOURCE, best, &run->datasource);
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
                      run->model.name, run->model.label, info->image_size,
                      info->default_batch_size, (double)info->default_learning_rate);
  return CNNB_OK;
}

static cnnb_status describe_model(cnnb_run *run) {
  run->info.struct_size = sizeof run->info;
  cnnb_crash_mark outer = cnnb_crash_enter(run->model.label, "describe", run->model.name);
  cnnb_status st = run->model_vt->describe(run->model_ctx, run->model.name,
                                           run->cfg->dataset->kind, &run->info);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) {
    char what[512];
    snprintf(what, sizeof what, "--model=%s with --data_name=%s", run->model.name,
             run->cfg->dataset->name);
    return cnnb_run_fail(run, st, run->model_ctx, what);
  }
  if ((st = check_model_info(run)) != CNNB_OK) return st;
  run->batch_size = run->cfg->batch_size ? run->cfg->batch_size : run->info.default_batch_size;
  run->image_size = run->cfg->image_size ? run->cfg->image_size : run->info.image_size;
  run->num_classes = run->cfg->num_classes;
  return CNNB_OK;
}

static cnnb_status build_graph(cnnb_run *run) {
  run->graph = cnnb_graph_create(run->batch_size, run->cfg->dataset->channels, run->image_size,
                                 run->image_size, run->num_classes);
  if (!run->graph) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory for the graph");
  cnnb_crash_mark outer = cnnb_crash_enter(run->model.label, "build", run->model.name);
  cnnb_status st = run->model_vt->build(run->model_ctx, run->model.name,
                                        run->cfg->dataset->kind, run->graph);
  cnnb_crash_leave(outer);
  char what[512];
  snprintf(what, sizeof what, "building model %s (%s)", run->model.name, run->model.label);
  if (st != CNNB_OK) {
    /* The model's message, or the builder's when the model only passed its status on. */
    if (!*cnnb_error_message(run->model_ctx) && cnnb_graph_status(run->graph) != CNNB_OK)
      return cnnb_error(run->ctx, st, "%s: %s", what, cnnb_graph_error(run->graph));
    return cnnb_run_fail(run, st, run->model_ctx, what);
  }
  if (cnnb_graph_status(run->graph) != CNNB_OK)
    return cnnb_error(run->ctx, cnnb_graph_status(run->graph), "%s: %s", what,
                      cnnb_graph_error(run->graph));
  if (cnnb_graph_logits(run->graph) == CNNB_NO_TENSOR)
    return cnnb_error(run->ctx, CNNB_EINVAL, "%s: it returned OK without setting its logits "
                      "(cnnb_graph_set_logits)", what);
  /* The loss is added even for forward-only runs: it costs one small node and lets the
   * report print total_loss as tf_cnn_benchmarks does. */
  st = cnnb_graph_add_loss(run->graph);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "%s: %s", what, cnnb_graph_error(run->graph));
  return CNNB_OK;
}

cnnb_status cnnb_run_open(cnnb_run *run, const cnnb_run_config *cfg, cnnb_ctx *parent,
                          cnnb_loader *loader) {
  run->cfg = cfg;
  run->num_replicas = cfg->num_replicas;
  run->rank = 0;
  run->world_size = 1;
  if (!(run->ctx = cnnb_ctx_create_child(parent, "cnnbench"))) return CNNB_ENOMEM;
  cnnb_status st = find_plugin(run, loader, CNNB_KIND_MODEL, cfg->model, &run->model);
  if (st != CNNB_OK) return st;
  run->model_vt = run->model.plugin->vtable;
  if (!(run->model_ctx = cnnb_ctx_create_child(run->ctx, cfg->model)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  if ((st = describe_model(run)) != CNNB_OK) return st;
  return build_graph(run);
}

/* ---- replicas -------------------------------------------------------------------------- */

/* Every replica's device runs every op of the graph: refused here, before the executors
 * plan and allocate anything, naming the op, a node using it and the device. */
static cnnb_status check_ops(cnnb_run *run) {
  for (int32_t i = 0; i < run->num_replicas; i++) {
    cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "supports_op", NULL);
    cnnb_status st = cnnb_ops_check_device(run->ctx, run->graph, run->device_vt,
                                           run->replicas[i].device,
                                           run->device.plugin->abi_minor, run->device.name);
    cnnb_crash_leave(outer);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

/* A ReLU right after an op that can take it (conv, batch norm; add when the device says
 * it can) runs inside it, sharing its buffers. Every replica shares the graph, so only
 * what every replica's device offers is fused. */
static void fuse_relus(cnnb_run *run) {
  uint32_t ops = ~0u;
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "get_extension", NULL);
  for (int32_t i = 0; i < run->num_replicas; i++)
    ops &= cnnb_ops_device_relu_fusion(run->device.plugin, run->device_vt, run->replicas[i].device);
  cnnb_crash_leave(outer);
  int32_t fused = cnnb_plan_fuse_relus(run->graph, ops);
  cnnb_log(run->ctx, CNNB_LOG_DEBUG, "%d ReLUs fused into the op before them", fused);
}

cnnb_status cnnb_run_create_device(cnnb_run *run, int32_t index, bool training,
                                   cnnb_ctx **ctx, void **device) {
  const cnnb_run_config *cfg = run->cfg;
  if (!(*ctx = cnnb_ctx_create_child(run->ctx, run->device.name)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_device_config dcfg = {
      .struct_size = sizeof dcfg,
      .device_index = index,
      .num_threads = cfg->num_threads,
      .precision = cfg->precision,
      .training = training,
      .seed = (uint32_t)cfg->seed,
  };
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "create", NULL);
  cnnb_status st = run->device_vt->create(*ctx, run->device.name, &dcfg, device);
  cnnb_crash_leave(outer);
  if (st == CNNB_OK) return CNNB_OK;
  *device = NULL;
  char what[512];
  /* A device that cannot do the precision was refused a flag's request: name that flag. */
  if (st == CNNB_EUNSUPPORTED && cfg->precision != CNNB_PRECISION_FP32)
    snprintf(what, sizeof what, "%s: device %s cannot run it", cfg->precision_flag,
             run->device.name);
  else
    snprintf(what, sizeof what, "--device=%s (replica %d%s)", run->device.name, (int)index,
             training || cfg->mode != CNNB_MODE_TRAIN ? "" : ", for evaluation");
  return cnnb_run_fail(run, st, *ctx, what);
}

static cnnb_status create_device(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  return cnnb_run_create_device(run, index, run->cfg->mode == CNNB_MODE_TRAIN, &r->device_ctx,
                                &r->device);
}

/* The executor's bucket callback: the strategy hears of a bucket once every local replica
 * has it. Replicas run one after another here, so that is when the last one announces. */
static void on_bucket(void *user, int64_t offset, int64_t count) {
  cnnb_replica *replica = user;
  cnnb_run *run = replica->run;
  if (replica->index != run->num_replicas - 1 || run->bucket_status != CNNB_OK) return;
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "bucket_ready", NULL);
  cnnb_status st = run->strategy_vt->bucket_ready(run->strategy_state, run->grads, offset, count);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) run->bucket_status = cnnb_run_fail(run, st, run->strategy_ctx, "gradient exchange");
}

bool cnnb_run_constant_batch(const cnnb_run *run) {
  const cnnb_plugin *plugin = run->datasource.plugin;
  if (!plugin || !plugin->get_extension) return false;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "get_extension", NULL);
  bool constant = plugin->get_extension(CNNB_EXT_DATASOURCE_CONSTANT) != NULL;
  cnnb_crash_leave(outer);
  return constant;
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
      .crash_label = run->device.label,
      /* Only a traced run names a track: the per-node args are made for it alone. */
      .trace_track = run->cfg->trace_file && *run->cfg->trace_file ? r->trace_track : NULL,
      .constant_batch = cnnb_run_constant_batch(run),
      /* A recorded step holds one device's calls and none of the host's: the strategy's
       * exchange between replicas or processes would have to be in it. */
      .step_graph = run->cfg->step_graphs,
      .step_graph_blocked = run->num_replicas > 1 ? "several replicas (--num_gpus) exchange "
                                                    "gradients inside a step"
                            : run->world_size > 1 ? "several processes exchange gradients "
                                                    "inside a step"
                                                  : NULL,
  };
  cnnb_status st = cnnb_executor_create(run->ctx, run->device_vt, r->device, run->graph, &ecfg,
                                        &r->executor);
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

static cnnb_status create_strategy(cnnb_run *run) {
  int32_t n = run->num_replicas;
  const cnnb_run_config *rc = run->cfg;
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
      .device = run->device_vt,
      .devices = devices,
      .param_count = param_count,
      .variable_bounds = bounds,
      .num_variables = num_variables,
      .precision = rc->precision,
      .all_reduce_spec = rc->all_reduce_spec,
      .collective_timeout_s = rc->collective_timeout_s,
      .gradient_repacking = rc->gradient_repacking,
      .compact_gradient_transfer = rc->compact_gradient_transfer,
  };
  const cnnb_strategy_vtable *vt = run->strategy_vt;
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "create", NULL);
  cnnb_status st = vt->create(run->strategy_ctx, run->strategy.name, &cfg, &run->strategy_state);
  free(devices); /* the strategy copies what it keeps */
  free(bounds);
  if (st != CNNB_OK) {
    cnnb_crash_leave(outer);
    run->strategy_state = NULL;
    char what[256];
    snprintf(what, sizeof what, "--variable_update=%s", run->strategy.name);
    return cnnb_run_fail(run, st, run->strategy_ctx, what);
  }
  if (vt->apply_update && !vt->finish_update) {
    cnnb_crash_leave(outer);
    return cnnb_error(run->ctx, CNNB_EINVAL, "%s offers apply_update without finish_update: the "
                      "replicas would never see the new variables (strategy.h)",
                      run->strategy.label);
  }
  run->world_size = vt->world_size ? vt->world_size(run->strategy_state) : 1;
  run->rank = vt->rank ? vt->rank(run->strategy_state) : 0;
  cnnb_crash_leave(outer);
  if (run->world_size < 1 || run->rank < 0 || run->rank >= run->world_size)
    return cnnb_error(run->ctx, CNNB_EINTERNAL, "%s reports rank %d of world size %d",
                      run->strategy.label, (int)run->rank, (int)run->world_size);
  if (run->world_size > 1) {
    /* Several processes share a terminal: every line says whose it is. Set before the
     * input threads start, as the tag's rule wants. */
    char tag[32];
    snprintf(tag, sizeof tag, "[rank %d]", (int)run->rank);
    cnnb_ctx_set_log_tag(run->ctx, tag);
  }
  return CNNB_OK;
}

/* After the executors drew their initial values, and once every rank agreed on the run
 * (a different parameter count would make the broadcast itself go wrong). */
static cnnb_status broadcast_params(cnnb_run *run) {
  cnnb_status st = cnnb_world_check_agreement(run);
  if (st != CNNB_OK) return st;
  /* A checkpoint's values (--train_dir) replace the initializers' before the broadcast
   * spreads them, and before a strategy that keeps the variables takes its copy. */
  if ((st = cnnb_checkpoint_restore_model(run)) != CNNB_OK) return st;
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "broadcast_params", NULL);
  st = run->strategy_vt->broadcast_params(run->strategy_state, run->params,
                                          cnnb_graph_param_arena_count(run->graph));
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "broadcasting parameters");
  return CNNB_OK;
}

static cnnb_datasource_config datasource_config(const cnnb_run *run, int32_t index,
                                                bool training) {
  return (cnnb_datasource_config){
      .struct_size = sizeof(cnnb_datasource_config),
      .batch_size = run->batch_size,
      .channels = run->cfg->dataset->channels,
      .height = run->image_size,
      .width = run->image_size,
      .num_classes = run->num_classes,
      .rank = run->rank * run->num_replicas + index,
      .world_size = run->world_size * run->num_replicas,
      .training = training,
      .seed = run->cfg->seed,
      .data_dir = run->cfg->data_dir,
      .dataset = run->cfg->dataset->kind,
  };
}

cnnb_status cnnb_run_create_datasource(cnnb_run *run, int32_t index, bool training,
                                       cnnb_ctx **ctx, void **datasource) {
  if (!(*ctx = cnnb_ctx_create_child(run->ctx, run->datasource.name)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_datasource_config scfg = datasource_config(run, index, training);
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "create", NULL);
  cnnb_status st = run->datasource_vt->create(*ctx, run->datasource.name, &scfg, datasource);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) {
    *datasource = NULL;
    char what[4096];
    snprintf(what, sizeof what, "datasource %s%s%s%s", run->datasource.name,
             *run->cfg->data_dir ? " reading --data_dir=" : "", run->cfg->data_dir,
             training || run->cfg->mode != CNNB_MODE_TRAIN ? "" : " (its validation split)");
    return cnnb_run_fail(run, st, *ctx, what);
  }
  return CNNB_OK;
}

/* Training reads the training split; --eval and --forward_only read the validation one,
 * as tf_cnn_benchmarks' subset = 'validation' if eval; --input_only times the training
 * pipeline, the one a training run waits on. */
static bool reads_training_split(const cnnb_run *run) {
  return run->cfg->mode == CNNB_MODE_TRAIN || run->cfg->mode == CNNB_MODE_INPUT_ONLY;
}

static cnnb_status create_datasource(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  return cnnb_run_create_datasource(run, index, reads_training_split(run), &r->datasource_ctx,
                                    &r->datasource);
}

/* A resumed training run (run->start_step > 0, restored by broadcast_params): every step
 * before took one batch from each replica's instance, warm-up included, so the instance
 * continues its stream after that many (CNNB_EXT_DATASOURCE_SKIP), before its input
 * thread starts. Evaluation instances start at the beginning, as every evaluation does. A
 * datasource without the extension starts its order again: said once, not refused. */
static cnnb_status continue_stream(cnnb_run *run, int32_t index) {
  if (run->cfg->mode != CNNB_MODE_TRAIN || run->start_step <= 0) return CNNB_OK;
  cnnb_replica *r = &run->replicas[index];
  const cnnb_datasource_vtable *vt = run->datasource_vt;
  const cnnb_plugin *plugin = run->datasource.plugin;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "get_extension",
                                           CNNB_EXT_DATASOURCE_SKIP);
  const cnnb_datasource_skip *skip = NULL;
  if (vt->get_extension) skip = vt->get_extension(r->datasource, CNNB_EXT_DATASOURCE_SKIP);
  if (!skip && plugin->get_extension) skip = plugin->get_extension(CNNB_EXT_DATASOURCE_SKIP);
  cnnb_crash_leave(outer);
  /* An answer too small to hold the slot is no answer (struct_size, append-only). */
  if (!skip || skip->struct_size < offsetof(cnnb_datasource_skip, skip_batches) +
                                       sizeof skip->skip_batches || !skip->skip_batches) {
    if (index == 0)
      cnnb_log(run->ctx, CNNB_LOG_WARN, "datasource '%s' cannot continue its stream: a resumed "
               "run reads from the start of its data order again", run->datasource.name);
    return CNNB_OK;
  }
  outer = cnnb_crash_enter(run->datasource.label, "skip_batches", NULL);
  cnnb_status st = skip->skip_batches(r->datasource, run->start_step);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) {
    char what[256];
    snprintf(what, sizeof what, "datasource %s (replica %d) continuing its stream after %lld "
             "batches", run->datasource.name, (int)index, (long long)run->start_step);
    return cnnb_run_fail(run, st, r->datasource_ctx, what);
  }
  return CNNB_OK;
}

/* The timed steps: --num_batches, or --num_epochs over the datasource's epoch. */
static cnnb_status count_batches(cnnb_run *run) {
  const cnnb_run_config *cfg = run->cfg;
  if (!(cfg->num_epochs > 0.0)) {
    run->num_batches = cfg->num_batches;
    return CNNB_OK;
  }
  /* Under --eval, --num_eval_epochs may be what set it (run_config.c): name that. */
  bool eval_flag = cfg->mode == CNNB_MODE_EVAL && cfg->num_eval_epochs > 0;
  const char *flag = eval_flag ? "--num_eval_epochs" : "--num_epochs";
  if (run->examples_per_epoch <= 0)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s=%g: datasource %s does not say how many examples an epoch holds; "
                      "give %s instead", flag, cfg->num_epochs, run->datasource.name,
                      eval_flag ? "--num_eval_batches" : "--num_batches");
  double global = (double)run->batch_size * run->num_replicas * run->world_size;
  double steps = ceil(cfg->num_epochs * (double)run->examples_per_epoch / global);
  if (!(steps >= 1.0 && steps <= (double)(INT64_MAX / 4)))
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s=%g: that is %g steps of %g images over %lld examples per "
                      "epoch, more than a run can count", flag, cfg->num_epochs, steps, global,
                      (long long)run->examples_per_epoch);
  run->num_batches = (int64_t)steps;
  return CNNB_OK;
}

static cnnb_status strategy_apply_update(void *user, int64_t offset, const cnnb_update *update) {
  cnnb_run *run = user;
  cnnb_crash_mark outer = cnnb_crash_enter(run->strategy.label, "apply_update", NULL);
  cnnb_status st = run->strategy_vt->apply_update(run->strategy_state, offset, update);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "applying the update");
  return CNNB_OK;
}

static cnnb_status create_trainer(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  cnnb_lr_model lr_model = {
      .name = run->model.name,
      .ctx = run->model_ctx,
      .dataset = run->cfg->dataset->kind,
      .learning_rate_at = run->model_vt->learning_rate_at,
      .learning_rate = run->model_vt->learning_rate,
      .default_learning_rate = run->info.default_learning_rate,
      .crash_label = run->model.label,
  };
  cnnb_trainer_config tcfg = run->cfg->trainer;
  tcfg.lr.examples_per_epoch = run->examples_per_epoch;
  tcfg.lr.global_batch_size = run->batch_size * run->num_replicas * run->world_size;
  tcfg.lr.model = &lr_model;
  if (!run->strategy_vt->apply_update)
    return cnnb_trainer_create(run->ctx, &tcfg, r->executor, &r->trainer);
  /* The strategy keeps the variables: replica 0's updates go to it, once per step. */
  cnnb_update_sink sink = {.apply = index == 0 ? strategy_apply_update : NULL, .user = run};
  return cnnb_trainer_create_with_sink(run->ctx, &tcfg, r->executor, &sink, &r->trainer);
}

cnnb_status cnnb_run_start_input(cnnb_run *run, int32_t index, cnnb_ctx *ctx, void *datasource,
                                 const cnnb_datasource_uint8 *uint8_batches,
                                 cnnb_prefetch **input) {
  size_t pixels = (size_t)run->batch_size * (size_t)run->cfg->dataset->channels *
                  (size_t)run->image_size * (size_t)run->image_size;
  cnnb_status st =
      uint8_batches
          ? cnnb_prefetch_create_uint8(uint8_batches, datasource, ctx, run->datasource.label,
                                       pixels, run->batch_size, INPUT_PREFETCH_DEPTH, input)
          : cnnb_prefetch_create(run->datasource_vt, datasource, ctx, run->datasource.label,
                                 pixels, run->batch_size, INPUT_PREFETCH_DEPTH, input);
  if (st != CNNB_OK) {
    char what[256];
    snprintf(what, sizeof what, "datasource %s (replica %d)", run->datasource.name, (int)index);
    return cnnb_run_fail(run, st, ctx, what);
  }
  return CNNB_OK;
}

static cnnb_status start_input(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  return cnnb_run_start_input(run, index, r->datasource_ctx, r->datasource, r->uint8_batches,
                              &r->input);
}

/* What one datasource instance skipped (CNNB_EXT_DATASOURCE_STATS): asked of the
 * instance's get_extension first, then of the plugin's descriptor; 0 when neither
 * answers. */
static int64_t skipped_by(const cnnb_run *run, void *datasource) {
  if (!datasource) return 0;
  const cnnb_datasource_vtable *vt = run->datasource_vt;
  const cnnb_plugin *plugin = run->datasource.plugin;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "get_extension",
                                           CNNB_EXT_DATASOURCE_STATS);
  const cnnb_datasource_stats *stats = NULL;
  if (vt->get_extension) stats = vt->get_extension(datasource, CNNB_EXT_DATASOURCE_STATS);
  if (!stats && plugin->get_extension) stats = plugin->get_extension(CNNB_EXT_DATASOURCE_STATS);
  int64_t n = 0;
  /* An answer too small to hold the slot is no answer (struct_size, append-only). */
  if (stats && stats->struct_size >= offsetof(cnnb_datasource_stats, skipped_examples) +
                                         sizeof stats->skipped_examples &&
      stats->skipped_examples)
    n = stats->skipped_examples(datasource);
  cnnb_crash_leave(outer);
  return n > 0 ? n : 0;
}

int64_t cnnb_run_skipped_examples(const cnnb_run *run, bool evaluation) {
  int64_t total = 0;
  for (int32_t i = 0; run->replicas && i < run->num_replicas; i++)
    total += evaluation ? skipped_by(run, run->replicas[i].eval_datasource)
                        : skipped_by(run, run->replicas[i].datasource);
  return total;
}

/* A device that cannot run on this machine at all (no driver, no GPU) says so once,
 * before anything is created, instead of failing replica by replica. */
static cnnb_status check_device_available(cnnb_run *run) {
  cnnb_crash_mark outer = cnnb_crash_enter(run->device.label, "availability", NULL);
  const char *why = cnnb_device_unavailable(run->device.plugin);
  cnnb_crash_leave(outer);
  if (!why) return CNNB_OK;
  return cnnb_error(run->ctx, CNNB_EUNSUPPORTED, "--device=%s cannot run on this machine: %s",
                    run->device.name, why);
}

cnnb_status cnnb_run_prepare(cnnb_run *run, cnnb_loader *loader) {
  const cnnb_run_config *cfg = run->cfg;
  int32_t n = run->num_replicas;
  cnnb_status st;
  cnnb_datasource_config probe_cfg = datasource_config(run, 0, reads_training_split(run));
  if ((st = find_plugin(run, loader, CNNB_KIND_DEVICE, cfg->device, &run->device)) ||
      (st = find_plugin(run, loader, CNNB_KIND_STRATEGY, cfg->strategy, &run->strategy)) ||
      (st = choose_datasource(run, loader, &probe_cfg)))
    return st;
  if ((st = check_device_available(run)) != CNNB_OK) return st;
  run->device_vt = run->device.plugin->vtable;
  run->strategy_vt = run->strategy.plugin->vtable;
  run->datasource_vt = run->datasource.plugin->vtable;
  if (!(run->strategy_ctx = cnnb_ctx_create_child(run->ctx, run->strategy.name)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");

  run->replicas = calloc((size_t)n, sizeof(cnnb_replica));
  run->params = calloc((size_t)n, sizeof *run->params);
  run->grads = calloc((size_t)n, sizeof *run->grads);
  if (!run->replicas || !run->params || !run->grads)
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  for (int32_t i = 0; i < n; i++) {
    run->replicas[i].run = run;
    run->replicas[i].index = i;
    if ((st = create_device(run, i)) != CNNB_OK) return st;
  }
  const char *description = run->device_vt->describe ? run->device_vt->describe(run->replicas[0].device)
                                                      : NULL;
  run->device_description = description && *description ? description
                                                        : run->device.plugin->description;
  bool model = cfg->mode != CNNB_MODE_INPUT_ONLY;
  if (model && (st = check_ops(run)) != CNNB_OK) return st;
  if (model) fuse_relus(run);
  /* The strategy before any arena: it refuses what it cannot do (nccl on a cpu device)
   * before a model's memory is allocated. --input_only still creates it (and the devices
   * it is given) for this process's rank and the world's total, but no executor. */
  if ((st = create_strategy(run)) != CNNB_OK) return st;
  /* The log is named by rank, known from the strategy on: opened now, before any arena is
   * allocated, so an unwritable directory stops the run early. */
  const char *log_dir = cfg->benchmark_log_dir;
  if (log_dir && *log_dir &&
      (st = cnnb_benchmark_log_open(run->ctx, log_dir, run->rank, &run->log)) != CNNB_OK)
    return st;
  for (int32_t i = 0; model && i < n; i++)
    if ((st = create_executor(run, i)) != CNNB_OK) return st;
  if ((st = model ? broadcast_params(run) : cnnb_world_check_agreement(run)) != CNNB_OK)
    return st;
  for (int32_t i = 0; i < n; i++)
    if ((st = create_datasource(run, i)) != CNNB_OK || (st = continue_stream(run, i)) != CNNB_OK)
      return st;

  const cnnb_datasource_vtable *dvt = run->datasource_vt;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "examples_per_epoch", NULL);
  int64_t examples = dvt->examples_per_epoch ? dvt->examples_per_epoch(run->replicas[0].datasource) : 0;
  cnnb_crash_leave(outer);
  run->examples_per_epoch = examples > 0 ? examples : 0;
  if ((st = count_batches(run)) != CNNB_OK) return st;
  for (int32_t i = 0; i < n && cfg->mode == CNNB_MODE_TRAIN; i++)
    if ((st = create_trainer(run, i)) != CNNB_OK) return st;
  if (model && (st = cnnb_checkpoint_restore_optimizer(run)) != CNNB_OK) return st;
  if ((st = cnnb_input_dtype_choose(run)) != CNNB_OK) return st;
  for (int32_t i = 0; i < n; i++)
    if ((st = start_input(run, i)) != CNNB_OK) return st;
  if (cfg->eval_during_training && (st = cnnb_evaluation_prepare(run)) != CNNB_OK) return st;
  return cnnb_benchmark_log_run(run->log, run);
}

void cnnb_run_close(cnnb_run *run) {
  cnnb_benchmark_log_close(run->log); /* first: its summary may report through run->ctx */
  cnnb_safetensors_close(run->resume_file);
  free(run->resume_path);
  if (run->strategy_state) run->strategy_vt->destroy(run->strategy_state);
  for (int32_t i = 0; run->replicas && i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_prefetch_destroy(r->input); /* before the datasource its thread reads */
    if (r->datasource) run->datasource_vt->destroy(r->datasource);
    cnnb_prefetch_destroy(r->eval_input);
    if (r->eval_datasource) run->datasource_vt->destroy(r->eval_datasource);
    cnnb_executor_destroy(r->eval_executor);
    if (r->eval_device) run->device_vt->destroy(r->eval_device);
    cnnb_ctx_destroy(r->eval_device_ctx);
    cnnb_ctx_destroy(r->eval_datasource_ctx);
    cnnb_trainer_destroy(r->trainer);
    cnnb_executor_destroy(r->executor);
    if (r->device) run->device_vt->destroy(r->device);
    cnnb_ctx_destroy(r->device_ctx);
    cnnb_ctx_destroy(r->datasource_ctx);
  }
  free(run->replicas);
  free(run->params);
  free(run->grads);
  cnnb_graph_destroy(run->graph);
  cnnb_ctx_destroy(run->model_ctx);
  cnnb_ctx_destroy(run->strategy_ctx);
  free(run->model.label);
  free(run->device.label);
  free(run->strategy.label);
  free(run->datasource.label);
  cnnb_ctx_destroy(run->ctx);
  memset(run, 0, sizeof *run);
}

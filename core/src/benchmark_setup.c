/* benchmark_setup.c — turns the flags into a ready run: the four plugins resolved by
 * name, the dataset and the model's defaults, the graph, and one replica per device
 * (device instance, executor, optimizer, datasource) joined by the strategy.
 *
 * Every failure names the flag or plugin at fault; the caller prints it and exits. */
#include "benchmark_setup.h"

#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "plan.h"

#define IMAGENET_TRAIN_EXAMPLES 1281167
#define CIFAR10_TRAIN_EXAMPLES 50000
/* Batches read ahead per replica: enough to hide a slow batch, few enough to keep
 * memory small (each is a full batch of fp32 images). */
#define INPUT_PREFETCH_DEPTH 2

cnnb_status cnnb_run_fail(cnnb_run *run, cnnb_status status, cnnb_ctx *from, const char *what) {
  const char *message = from ? cnnb_error_message(from) : "";
  return cnnb_error(run->ctx, status, "%s%s%s", what, *message ? ": " : "", message);
}

static cnnb_status find_plugin(cnnb_run *run, cnnb_loader *loader, uint32_t kind,
                               const char *name, const cnnb_plugin **plugin,
                               const void **vtable) {
  char err[2048];
  cnnb_status st = cnnb_loader_find(loader, kind, name, plugin, NULL, err, sizeof err);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "%s", err);
  *vtable = (*plugin)->vtable;
  return CNNB_OK;
}

static cnnb_status resolve_dataset(cnnb_run *run) {
  const char *data_name = cnnb_flags_string(run->flags, "data_name");
  if (!*data_name || strcmp(data_name, "imagenet") == 0) {
    run->dataset = CNNB_DATASET_IMAGENET;
    run->dataset_name = "imagenet";
    run->num_classes = 1001; /* label 0 unused, as tf_cnn_benchmarks */
    run->examples_per_epoch = IMAGENET_TRAIN_EXAMPLES;
  } else if (strcmp(data_name, "cifar10") == 0) {
    run->dataset = CNNB_DATASET_CIFAR10;
    run->dataset_name = "cifar10";
    run->num_classes = 10;
    run->examples_per_epoch = CIFAR10_TRAIN_EXAMPLES;
  } else {
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--data_name=%s: unknown dataset; known: imagenet, cifar10", data_name);
  }
  if (cnnb_flags_is_set(run->flags, "num_classes")) {
    int64_t classes = cnnb_flags_int(run->flags, "num_classes");
    if (classes < 2 || classes > (1 << 24))
      return cnnb_error(run->ctx, CNNB_EINVAL, "--num_classes=%lld: must be in [2, 16777216]",
                        (long long)classes);
    run->num_classes = (int32_t)classes;
  }
  return CNNB_OK;
}

static cnnb_status resolve_precision(cnnb_run *run) {
  const char *precision = cnnb_flags_string(run->flags, "precision");
  if (cnnb_flags_bool(run->flags, "use_fp16")) {
    if (cnnb_flags_is_set(run->flags, "precision") && strcmp(precision, "fp16") != 0)
      return cnnb_error(run->ctx, CNNB_EINVAL,
                        "--use_fp16 contradicts --precision=%s: give one of them", precision);
    precision = "fp16";
  }
  if (strcmp(precision, "fp32") == 0) run->precision = CNNB_PRECISION_FP32;
  else if (strcmp(precision, "bf16") == 0) run->precision = CNNB_PRECISION_BF16;
  else if (strcmp(precision, "fp16") == 0) run->precision = CNNB_PRECISION_FP16;
  else
    return cnnb_error(run->ctx, CNNB_EINVAL, "--precision=%s: known: fp32, bf16, fp16", precision);
  return CNNB_OK;
}

static cnnb_status resolve_sizes(cnnb_run *run) {
  const cnnb_flags *flags = run->flags;
  run->info.struct_size = sizeof run->info;
  cnnb_status st = run->model->describe(run->model_ctx, run->model_name, run->dataset, &run->info);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->model_ctx, run->model_name);

  int64_t batch = cnnb_flags_int(flags, "batch_size");
  if (batch < 0 || batch > (1 << 20))
    return cnnb_error(run->ctx, CNNB_EINVAL, "--batch_size=%lld: must be in [1, 1048576] (0: the model's default)",
                      (long long)batch);
  run->batch_size = batch ? (int32_t)batch : run->info.default_batch_size;

  int64_t image = cnnb_flags_int(flags, "image_size");
  if (image < 0 || image > 4096)
    return cnnb_error(run->ctx, CNNB_EINVAL, "--image_size=%lld: must be in [1, 4096] (0: the model's)",
                      (long long)image);
  run->image_size = image ? (int32_t)image : run->info.image_size;

  int64_t gpus = cnnb_flags_int(flags, "num_gpus");
  if (gpus < 1 || gpus > 64)
    return cnnb_error(run->ctx, CNNB_EINVAL, "--num_gpus=%lld: must be in [1, 64]", (long long)gpus);
  run->num_replicas = (int32_t)gpus;

  if (cnnb_flags_int(flags, "num_batches") < 1 && !cnnb_flags_is_set(flags, "num_epochs"))
    return cnnb_error(run->ctx, CNNB_EINVAL, "--num_batches=%lld: must be at least 1",
                      (long long)cnnb_flags_int(flags, "num_batches"));
  if (cnnb_flags_is_set(flags, "num_batches") && cnnb_flags_is_set(flags, "num_epochs"))
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "--num_batches and --num_epochs both given: give one of them");
  if (cnnb_flags_int(flags, "num_intra_threads") < 0)
    return cnnb_error(run->ctx, CNNB_EINVAL, "--num_intra_threads must be >= 0 (0: all cores)");
  return CNNB_OK;
}

cnnb_status cnnb_run_resolve(cnnb_run *run, cnnb_loader *loader) {
  const cnnb_flags *flags = run->flags;
  run->evaluation = cnnb_flags_bool(flags, "eval");
  run->training = !cnnb_flags_bool(flags, "forward_only") && !run->evaluation;

  run->model_name = cnnb_flags_string(flags, "model");
  run->device_name = cnnb_flags_string(flags, "device");
  run->strategy_name = cnnb_flags_string(flags, "variable_update");
  run->datasource_name = cnnb_flags_string(flags, "datasource");
  if (!*run->datasource_name)
    run->datasource_name = *cnnb_flags_string(flags, "data_dir") ? "imagenet" : "synthetic";

  const cnnb_plugin *plugin;
  cnnb_status st = find_plugin(run, loader, CNNB_KIND_MODEL, run->model_name, &plugin,
                               (const void **)&run->model);
  if (st != CNNB_OK) return st;
  if (!run->model->describe || !run->model->build)
    return cnnb_error(run->ctx, CNNB_EINVAL, "--model=%s: the plugin lacks describe/build",
                      run->model_name);

  run->model_ctx = cnnb_ctx_create(run->model_name, flags);
  run->strategy_ctx = cnnb_ctx_create(run->strategy_name, flags);
  if (!run->model_ctx || !run->strategy_ctx)
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");

  if ((st = resolve_dataset(run)) || (st = resolve_precision(run)) || (st = resolve_sizes(run)))
    return st;
  return CNNB_OK;
}

cnnb_status cnnb_run_resolve_runtime(cnnb_run *run, cnnb_loader *loader) {
  const cnnb_plugin *plugin;
  cnnb_status st;
  if ((st = find_plugin(run, loader, CNNB_KIND_DEVICE, run->device_name, &run->device_plugin,
                        (const void **)&run->device)) ||
      (st = find_plugin(run, loader, CNNB_KIND_STRATEGY, run->strategy_name, &plugin,
                        (const void **)&run->strategy)) ||
      (st = find_plugin(run, loader, CNNB_KIND_DATASOURCE, run->datasource_name, &plugin,
                        (const void **)&run->datasource)))
    return st;
  return CNNB_OK;
}

cnnb_status cnnb_run_build_graph(cnnb_run *run) {
  run->graph = cnnb_graph_create(run->batch_size, 3, run->image_size, run->image_size,
                                 run->num_classes);
  if (!run->graph) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory for the graph");
  cnnb_status st = run->model->build(run->model_ctx, run->model_name, run->dataset, run->graph);
  if (st != CNNB_OK) {
    /* The model's message, or the builder's when the model only passed its status on. */
    cnnb_ctx *from = run->model_ctx;
    if (!*cnnb_error_message(from) && cnnb_graph_status(run->graph) != CNNB_OK)
      return cnnb_error(run->ctx, st, "building %s: %s", run->model_name, cnnb_graph_error(run->graph));
    return cnnb_run_fail(run, st, from, "building model");
  }
  if (cnnb_graph_status(run->graph) != CNNB_OK)
    return cnnb_error(run->ctx, cnnb_graph_status(run->graph), "building %s: %s", run->model_name,
                      cnnb_graph_error(run->graph));
  if (cnnb_graph_logits(run->graph) == CNNB_NO_TENSOR)
    return cnnb_error(run->ctx, CNNB_EINVAL, "model %s returned OK without setting its logits",
                      run->model_name);
  /* The loss is added even for forward-only runs: it costs one small node and lets the
   * report print total_loss as tf_cnn_benchmarks does. */
  st = cnnb_graph_add_loss(run->graph);
  if (st != CNNB_OK)
    return cnnb_error(run->ctx, st, "building %s: %s", run->model_name, cnnb_graph_error(run->graph));
  return CNNB_OK;
}

/* A ReLU right after a conv or batch norm (or an add, when the device says it can) runs
 * inside it, sharing its buffers. */
static void fuse_relus(cnnb_run *run) {
  uint32_t ops = CNNB_FUSE_ABI_1_0;
  const cnnb_plugin *device = run->device_plugin;
  if (device->get_extension && device->get_extension(CNNB_EXT_FUSED_RELU_ADD))
    ops |= CNNB_FUSE_OP(CNNB_OP_ADD);
  int32_t fused = cnnb_plan_fuse_relus(run->graph, ops);
  cnnb_log(run->ctx, CNNB_LOG_DEBUG, "%d ReLUs fused into the op before them", fused);
}

/* The executor's bucket callback: the strategy hears of a bucket once every local replica
 * has it. Replicas run one after another here, so that is when the last one announces. */
static void on_bucket(void *user, int64_t offset, int64_t count) {
  cnnb_replica *replica = user;
  cnnb_run *run = replica->run;
  if (replica->index != run->num_replicas - 1 || run->bucket_status != CNNB_OK) return;
  cnnb_status st = run->strategy->bucket_ready(run->strategy_state, run->grads, offset, count);
  if (st != CNNB_OK) run->bucket_status = cnnb_run_fail(run, st, run->strategy_ctx, "gradient exchange");
}

static cnnb_status setup_replica(cnnb_run *run, int32_t index) {
  cnnb_replica *r = &run->replicas[index];
  const cnnb_flags *flags = run->flags;
  cnnb_status st;

  r->device_ctx = cnnb_ctx_create(run->device_name, flags);
  r->datasource_ctx = cnnb_ctx_create(run->datasource_name, flags);
  if (!r->device_ctx || !r->datasource_ctx) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");

  cnnb_device_config dcfg = {
      .struct_size = sizeof dcfg,
      .device_index = index,
      .num_threads = (int32_t)cnnb_flags_int(flags, "num_intra_threads"),
      .precision = run->precision,
      .training = run->training,
      .seed = (uint32_t)cnnb_flags_int(flags, "seed"),
  };
  st = run->device->create(r->device_ctx, run->device_name, &dcfg, &r->device);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, r->device_ctx, "--device");

  cnnb_executor_config ecfg = {
      .training = run->training,
      .bucket_bytes = (int64_t)(cnnb_flags_float(flags, "gradient_bucket_mb") * (1 << 20)),
      .on_bucket = on_bucket,
      .user = r,
      .device_ctx = r->device_ctx,
  };
  st = cnnb_executor_create(run->ctx, run->device, r->device, run->graph, &ecfg, &r->executor);
  if (st != CNNB_OK) return st;
  /* Every replica draws the same initial values; the strategy's broadcast then makes
   * strategies that need it agree even across processes. */
  st = cnnb_executor_init_params(r->executor, (uint64_t)cnnb_flags_int(flags, "seed"));
  if (st != CNNB_OK) return st;

  if (run->training) {
    cnnb_trainer_model lr_model = {
        .name = run->model_name,
        .learning_rate = run->model->struct_size > offsetof(cnnb_model_vtable, learning_rate)
                             ? run->model->learning_rate : NULL,
        .default_learning_rate = run->info.default_learning_rate,
    };
    st = cnnb_trainer_create(run->ctx, flags, r->executor, &lr_model, run->examples_per_epoch,
                             run->batch_size * run->num_replicas, &r->trainer);
    if (st != CNNB_OK) return st;
  }

  cnnb_datasource_config scfg = {
      .struct_size = sizeof scfg,
      .batch_size = run->batch_size,
      .channels = 3,
      .height = run->image_size,
      .width = run->image_size,
      .num_classes = run->num_classes,
      .rank = index,
      .world_size = run->num_replicas,
      .training = run->training,
      .seed = (uint64_t)cnnb_flags_int(flags, "seed"),
      .data_dir = cnnb_flags_string(flags, "data_dir"),
  };
  st = run->datasource->create(r->datasource_ctx, run->datasource_name, &scfg, &r->datasource);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, r->datasource_ctx, "--datasource");

  size_t pixels = (size_t)run->batch_size * 3 * run->image_size * run->image_size;
  st = cnnb_prefetch_create(run->datasource, r->datasource, r->datasource_ctx, pixels,
                            run->batch_size, INPUT_PREFETCH_DEPTH, &r->input);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, r->datasource_ctx, "input pipeline");

  run->params[index] = cnnb_executor_params(r->executor);
  run->grads[index] = cnnb_executor_grads(r->executor);
  return CNNB_OK;
}

cnnb_status cnnb_run_setup_replicas(cnnb_run *run) {
  int32_t n = run->num_replicas;
  fuse_relus(run);
  run->replicas = calloc((size_t)n, sizeof(cnnb_replica));
  run->params = calloc((size_t)n, sizeof *run->params);
  run->grads = calloc((size_t)n, sizeof *run->grads);
  if (!run->replicas || !run->params || !run->grads)
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_status st;
  for (int32_t i = 0; i < n; i++) {
    run->replicas[i].run = run;
    run->replicas[i].index = i;
    if ((st = setup_replica(run, i)) != CNNB_OK) return st;
  }

  cnnb_strategy_config cfg = {
      .struct_size = sizeof cfg,
      .local_replicas = n,
      .device = run->device,
      .devices = NULL,
      .param_count = cnnb_executor_param_count(run->replicas[0].executor),
  };
  void **devices = malloc((size_t)n * sizeof *devices);
  if (!devices) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  for (int32_t i = 0; i < n; i++) devices[i] = run->replicas[i].device;
  cfg.devices = devices;
  st = run->strategy->create(run->strategy_ctx, run->strategy_name, &cfg, &run->strategy_state);
  free(devices); /* the strategy copies what it keeps */
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "--variable_update");
  st = run->strategy->broadcast_params(run->strategy_state, run->params, cfg.param_count);
  if (st != CNNB_OK) return cnnb_run_fail(run, st, run->strategy_ctx, "broadcasting parameters");
  return CNNB_OK;
}

void cnnb_run_teardown(cnnb_run *run) {
  if (run->strategy_state) run->strategy->destroy(run->strategy_state);
  for (int32_t i = 0; run->replicas && i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_prefetch_destroy(r->input); /* before the datasource its thread reads */
    if (r->datasource) run->datasource->destroy(r->datasource);
    cnnb_trainer_destroy(r->trainer);
    cnnb_executor_destroy(r->executor);
    if (r->device) run->device->destroy(r->device);
    cnnb_ctx_destroy(r->device_ctx);
    cnnb_ctx_destroy(r->datasource_ctx);
  }
  free(run->replicas);
  free(run->params);
  free(run->grads);
  cnnb_graph_destroy(run->graph);
  cnnb_ctx_destroy(run->model_ctx);
  cnnb_ctx_destroy(run->strategy_ctx);
}

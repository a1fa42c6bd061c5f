/* replica.c — a replica's device instance, datasource instance and input thread, and a
 * step on them (replica.h). */
#include "run/replica.h"

#include <stdio.h>

cnnb_status cnnb_replica_create_device(cnnb_run *run, int32_t index, bool training, cnnb_ctx **ctx,
                                       void **device) {
  const cnnb_run_config *cfg = run->cfg;
  const cnnb_bound_plugin *p = &run->facts.device;
  if (!(*ctx = cnnb_ctx_create_child(run->ctx, p->name)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_device_config dcfg = {
      .struct_size = sizeof dcfg,
      .device_index = index,
      .num_threads = cfg->num_threads,
      .precision = cfg->precision,
      .training = training,
      .seed = (uint32_t)cfg->seed,
      .local_replicas = run->facts.replicas,
      .data_format = cfg->data_format_request,
  };
  cnnb_status st;
  CNNB_GUARDED(p->label, "create", NULL, st = p->vt.device->create(*ctx, p->name, &dcfg, device));
  if (st == CNNB_OK) return CNNB_OK;
  *device = NULL;
  char what[512];
  /* A device that cannot do the precision was refused a flag's request: name that flag. */
  if (st == CNNB_EUNSUPPORTED && cfg->precision != CNNB_PRECISION_FP32)
    snprintf(what, sizeof what, "%s: device %s cannot run it", cfg->precision_flag, p->name);
  else
    snprintf(what, sizeof what, "--device=%s (replica %d%s)", p->name, (int)index,
             training || cfg->mode != CNNB_MODE_TRAIN ? "" : ", for evaluation");
  return cnnb_plugin_failed(run->ctx, p, st, *ctx, what);
}

cnnb_datasource_config cnnb_replica_datasource_config(const cnnb_run *run, int32_t index,
                                                      bool training, int32_t batch) {
  const cnnb_run_facts *f = &run->facts;
  return (cnnb_datasource_config){
      .struct_size = sizeof(cnnb_datasource_config),
      .batch_size = batch,
      .channels = run->cfg->dataset->channels,
      .height = f->image_size,
      .width = f->image_size,
      .num_classes = f->num_classes,
      .rank = f->world.rank * f->replicas + index,
      .world_size = f->world.size * f->replicas,
      .training = training,
      .seed = run->cfg->seed,
      .data_dir = run->cfg->data_dir,
      .dataset = run->cfg->dataset->kind,
      .local_replicas = f->replicas,
      .device_threads = run->cfg->num_threads,
      .device_name = f->device.name,
  };
}

cnnb_status cnnb_replica_create_datasource(cnnb_run *run, int32_t index, bool training,
                                           int32_t batch, cnnb_ctx **ctx, void **datasource) {
  const cnnb_bound_plugin *p = &run->facts.datasource;
  if (!(*ctx = cnnb_ctx_create_child(run->ctx, p->name)))
    return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  cnnb_datasource_config scfg = cnnb_replica_datasource_config(run, index, training, batch);
  cnnb_status st;
  CNNB_GUARDED(p->label, "create", NULL,
               st = p->vt.datasource->create(*ctx, p->name, &scfg, datasource));
  if (st == CNNB_OK) return CNNB_OK;
  *datasource = NULL;
  char what[4096];
  snprintf(what, sizeof what, "datasource %s%s%s%s", p->name,
           *run->cfg->data_dir ? " reading --data_dir=" : "", run->cfg->data_dir,
           training || run->cfg->mode != CNNB_MODE_TRAIN ? "" : " (its validation split)");
  return cnnb_plugin_failed(run->ctx, p, st, *ctx, what);
}

cnnb_status cnnb_replica_start_input(cnnb_run *run, int32_t index, int32_t batch, cnnb_ctx *ctx,
                                     void *datasource, const cnnb_datasource_uint8 *uint8_batches,
                                     cnnb_prefetch **input) {
  const cnnb_bound_plugin *p = &run->facts.datasource;
  const cnnb_run_facts *f = &run->facts;
  size_t pixels = (size_t)batch * (size_t)run->cfg->dataset->channels * (size_t)f->image_size *
                  (size_t)f->image_size;
  cnnb_status st = uint8_batches
                       ? cnnb_prefetch_create_uint8(uint8_batches, datasource, ctx, p->label,
                                                    pixels, batch, run->cfg->input_prefetch_depth,
                                                    input)
                       : cnnb_prefetch_create(p->vt.datasource, datasource, ctx, p->label, pixels,
                                              batch, run->cfg->input_prefetch_depth, input);
  if (st != CNNB_OK) {
    char what[256];
    snprintf(what, sizeof what, "datasource %s (replica %d)", p->name, (int)index);
    return cnnb_plugin_failed(run->ctx, p, st, ctx, what);
  }
  return CNNB_OK;
}

bool cnnb_replica_constant_batch(const cnnb_run *run) {
  return cnnb_bound_extension(&run->facts.datasource, NULL, CNNB_EXT_DATASOURCE_CONSTANT, 0) !=
         NULL;
}

int64_t cnnb_replica_skipped_examples(const cnnb_run *run, void *datasource) {
  if (!datasource) return 0;
  const cnnb_bound_plugin *p = &run->facts.datasource;
  const cnnb_datasource_stats *stats =
      cnnb_bound_extension(p, datasource, CNNB_EXT_DATASOURCE_STATS,
                           CNNB_EXT_NEEDS(cnnb_datasource_stats, skipped_examples));
  int64_t n = 0;
  if (stats && stats->skipped_examples)
    CNNB_GUARDED(p->label, "skipped_examples", NULL, n = stats->skipped_examples(datasource));
  return n > 0 ? n : 0;
}

cnnb_status cnnb_replica_step(cnnb_replica *r, const cnnb_batch *batch, float loss_scale,
                              int64_t step) {
  if (batch->images_uint8)
    return cnnb_executor_step_uint8(r->executor, batch->images_uint8, batch->labels, loss_scale,
                                    (uint64_t)step);
  return cnnb_executor_step(r->executor, batch->images, batch->labels, loss_scale, (uint64_t)step);
}

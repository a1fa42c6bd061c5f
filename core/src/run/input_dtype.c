/* input_dtype.c — choosing the batches' transport and running a step on either
 * (input_dtype.h). An extension counts only when its answer is large enough to hold its
 * slots and they are set: a malformed one is treated as absent (and named when the user
 * forced uint8), never called. */
#include "run/input_dtype.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "base/crash_guard.h"

static const cnnb_datasource_uint8 *datasource_uint8(const cnnb_run *run, void *datasource) {
  const cnnb_datasource_vtable *vt = run->datasource_vt;
  const cnnb_plugin *plugin = run->datasource.plugin;
  const cnnb_datasource_uint8 *ext = NULL;
  if (vt->get_extension) ext = vt->get_extension(datasource, CNNB_EXT_DATASOURCE_UINT8);
  if (!ext && plugin->get_extension) ext = plugin->get_extension(CNNB_EXT_DATASOURCE_UINT8);
  if (!ext || ext->struct_size < offsetof(cnnb_datasource_uint8, next_batch_uint8) +
                                     sizeof ext->next_batch_uint8 ||
      !ext->normalization || !ext->next_batch_uint8)
    return NULL;
  return ext;
}

static const cnnb_device_uint8_input *device_uint8(const cnnb_run *run, void *device) {
  const cnnb_device_vtable *vt = run->device_vt;
  const cnnb_plugin *plugin = run->device.plugin;
  const cnnb_device_uint8_input *ext = NULL;
  if (vt->get_extension) ext = vt->get_extension(device, CNNB_EXT_DEVICE_UINT8_INPUT);
  if (!ext && plugin->get_extension) ext = plugin->get_extension(CNNB_EXT_DEVICE_UINT8_INPUT);
  if (!ext || ext->struct_size < offsetof(cnnb_device_uint8_input, input_from_host_uint8) +
                                     sizeof ext->input_from_host_uint8 ||
      !ext->input_from_host_uint8)
    return NULL;
  return ext;
}

/* Replica r's normalization from its datasource, handed to its executor. */
static cnnb_status set_up_replica(cnnb_run *run, cnnb_replica *r,
                                  const cnnb_datasource_uint8 *source,
                                  const cnnb_device_uint8_input *device) {
  int32_t channels = run->cfg->dataset->channels;
  float *scale = calloc((size_t)channels * 2, sizeof *scale);
  if (!scale) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  float *offset = scale + channels;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "normalization", NULL);
  cnnb_status st = source->normalization(r->datasource, scale, offset);
  cnnb_crash_leave(outer);
  if (st != CNNB_OK) {
    free(scale);
    return cnnb_run_fail(run, st, r->datasource_ctx, "the datasource's uint8 normalization");
  }
  for (int32_t c = 0; c < channels; c++) {
    if (isfinite(scale[c]) && isfinite(offset[c])) continue;
    st = cnnb_error(run->ctx, CNNB_EINVAL, "%s: its uint8 normalization of channel %d is "
                    "value * %g + %g, not finite numbers: fix the plugin, or run with "
                    "--input_dtype=float32", run->datasource.label, (int)c, (double)scale[c],
                    (double)offset[c]);
    free(scale);
    return st;
  }
  /* --input_only has no executor: the batches are read as the run would read them. */
  if (r->executor) st = cnnb_executor_set_uint8_input(r->executor, device, scale, offset);
  free(scale);
  if (st != CNNB_OK) return st;
  r->uint8_batches = source;
  return CNNB_OK;
}

cnnb_status cnnb_input_dtype_choose(cnnb_run *run) {
  cnnb_input_dtype wanted = run->cfg->input_dtype;
  run->input_uint8 = false;
  if (wanted == CNNB_INPUT_FLOAT32) {
    cnnb_log(run->ctx, CNNB_LOG_DEBUG, "input: float32 batches (--input_dtype=float32)");
    return CNNB_OK;
  }
  /* Every replica of the run must offer both, or none uses uint8. */
  const char *missing = NULL, *missing_ext = NULL, *missing_plugin = NULL, *cannot = NULL;
  cnnb_crash_mark outer = cnnb_crash_enter(run->datasource.label, "get_extension", NULL);
  for (int32_t i = 0; i < run->num_replicas && !missing; i++)
    if (!datasource_uint8(run, run->replicas[i].datasource))
      missing = "datasource", missing_ext = CNNB_EXT_DATASOURCE_UINT8,
      missing_plugin = run->datasource.label, cannot = "hand over";
  cnnb_crash_leave(outer);
  outer = cnnb_crash_enter(run->device.label, "get_extension", NULL);
  for (int32_t i = 0; i < run->num_replicas && !missing; i++)
    if (!device_uint8(run, run->replicas[i].device))
      missing = "device", missing_ext = CNNB_EXT_DEVICE_UINT8_INPUT,
      missing_plugin = run->device.label, cannot = "normalize";
  cnnb_crash_leave(outer);
  if (missing) {
    if (wanted == CNNB_INPUT_UINT8)
      return cnnb_error(run->ctx, CNNB_EINVAL,
                        "--input_dtype=uint8: the %s, %s, cannot %s uint8 batches (it does not "
                        "offer the %s extension); run with --input_dtype=auto or float32",
                        missing, missing_plugin, cannot, missing_ext);
    cnnb_log(run->ctx, CNNB_LOG_DEBUG, "input: float32 batches (the %s offers no %s)", missing,
             missing_ext);
    return CNNB_OK;
  }
  for (int32_t i = 0; i < run->num_replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_status st = set_up_replica(run, r, datasource_uint8(run, r->datasource),
                                    device_uint8(run, r->device));
    if (st != CNNB_OK) return st;
  }
  run->input_uint8 = true;
  cnnb_log(run->ctx, CNNB_LOG_DEBUG, "input: uint8 NHWC batches, normalized by the device");
  return CNNB_OK;
}

cnnb_status cnnb_replica_step(cnnb_replica *r, const cnnb_batch *batch, float loss_scale,
                              int64_t step) {
  if (batch->images_uint8)
    return cnnb_executor_step_uint8(r->executor, batch->images_uint8, batch->labels, loss_scale,
                                    (uint64_t)step);
  return cnnb_executor_step(r->executor, batch->images, batch->labels, loss_scale, (uint64_t)step);
}

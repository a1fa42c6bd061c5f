/* input_dtype.c — choosing the batches' transport (input_dtype.h). An extension counts only when
 * its answer is large enough to hold its slots and they are set: a malformed one is treated as
 * absent (and named when the user forced uint8), never called. */
#include "run/input_dtype.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

static const cnnb_datasource_uint8 *datasource_uint8(const cnnb_run *run, void *datasource) {
  const cnnb_datasource_uint8 *ext =
      cnnb_bound_extension(&run->facts.datasource, datasource, CNNB_EXT_DATASOURCE_UINT8,
                           CNNB_EXT_NEEDS(cnnb_datasource_uint8, next_batch_uint8));
  return ext && ext->normalization && ext->next_batch_uint8 ? ext : NULL;
}

static const cnnb_device_uint8_input *device_uint8(const cnnb_run *run, void *device) {
  const cnnb_device_uint8_input *ext =
      cnnb_bound_extension(&run->facts.device, device, CNNB_EXT_DEVICE_UINT8_INPUT,
                           CNNB_EXT_NEEDS(cnnb_device_uint8_input, input_from_host_uint8));
  return ext && ext->input_from_host_uint8 ? ext : NULL;
}

/* Replica r's normalization from its datasource, handed to its executor. */
static cnnb_status set_up_replica(cnnb_run *run, cnnb_replica *r,
                                  const cnnb_datasource_uint8 *source,
                                  const cnnb_device_uint8_input *device) {
  int32_t channels = run->cfg->dataset->channels;
  float *scale = calloc((size_t)channels * 2, sizeof *scale);
  if (!scale) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory");
  float *offset = scale + channels;
  cnnb_status st;
  CNNB_PLUGIN_CALL(st, run->ctx, &run->facts.datasource, "normalization", r->datasource_ctx,
                   "the datasource's uint8 normalization",
                   source->normalization(r->datasource, scale, offset));
  if (st != CNNB_OK) {
    free(scale);
    return st;
  }
  for (int32_t c = 0; c < channels; c++) {
    if (isfinite(scale[c]) && isfinite(offset[c])) continue;
    st = cnnb_error(run->ctx, CNNB_EINVAL,
                    "%s: its uint8 normalization of channel %d is "
                    "value * %g + %g, not finite numbers: fix the plugin, or run with "
                    "--input_dtype=float32",
                    run->facts.datasource.label, (int)c, (double)scale[c], (double)offset[c]);
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
  int32_t replicas = run->facts.replicas;
  run->facts.input_uint8 = false;
  if (wanted == CNNB_INPUT_FLOAT32) {
    cnnb_log(run->ctx, CNNB_LOG_DEBUG, "input: float32 batches (--input_dtype=float32)");
    return CNNB_OK;
  }
  /* Every replica of the run must offer both, or none uses uint8. */
  const char *missing = NULL, *missing_ext = NULL, *missing_plugin = NULL, *cannot = NULL;
  for (int32_t i = 0; i < replicas && !missing; i++)
    if (!datasource_uint8(run, run->replicas[i].datasource))
      missing = "datasource", missing_ext = CNNB_EXT_DATASOURCE_UINT8,
      missing_plugin = run->facts.datasource.label, cannot = "hand over";
  for (int32_t i = 0; i < replicas && !missing; i++)
    if (!device_uint8(run, run->replicas[i].device))
      missing = "device", missing_ext = CNNB_EXT_DEVICE_UINT8_INPUT,
      missing_plugin = run->facts.device.label, cannot = "normalize";
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
  for (int32_t i = 0; i < replicas; i++) {
    cnnb_replica *r = &run->replicas[i];
    cnnb_status st = set_up_replica(run, r, datasource_uint8(run, r->datasource),
                                    device_uint8(run, r->device));
    if (st != CNNB_OK) return st;
  }
  run->facts.input_uint8 = true;
  cnnb_log(run->ctx, CNNB_LOG_DEBUG, "input: uint8 NHWC batches, normalized by the device");
  return CNNB_OK;
}

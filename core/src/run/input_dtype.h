/* input_dtype.h — how a run's batches travel from datasource to device (--input_dtype):
 * fp32 NCHW that the datasource normalized (every plugin can), or uint8 NHWC that the
 * device normalizes, a quarter of the bytes, when the datasource offers
 * CNNB_EXT_DATASOURCE_UINT8 and the device CNNB_EXT_DEVICE_UINT8_INPUT. Host-internal. */
#ifndef CNNB_INPUT_DTYPE_H
#define CNNB_INPUT_DTYPE_H

#include "run/run.h"

/* Once the replicas' devices, executors and datasources exist, before their input
 * pipelines start: decides the run's transport (facts.input_uint8) and, for uint8, gives
 * every replica its datasource's extension and its executor the device's conversion and
 * the datasource's normalization. --input_dtype=uint8 without both extensions is refused
 * naming the plugin that lacks one. */
cnnb_status cnnb_input_dtype_choose(cnnb_run *run);

#endif

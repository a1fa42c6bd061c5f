/* ds_stream.c — batches of an in-memory split, fp32 and uint8, and skipping (ds_stream.h).
 *
 * Both transports render each example once into bytes; the fp32 path then applies the
 * same affine map per element that the device applies to the uint8 batch, so the model
 * gets bit-identical input either way. */
#include "ds_stream.h"

#include <stdlib.h>
#include <string.h>

cnnb_status ds_check_shard(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  if (cfg->batch_size < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: batch size %d; must be at least 1", name,
                      cfg->batch_size);
  if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
    return cnnb_error(ctx, CNNB_EINVAL, "%s: shard %d of %d does not exist", name, cfg->rank,
                      cfg->world_size);
  return CNNB_OK;
}

cnnb_status ds_stream_init(ds_stream *s, cnnb_ctx *ctx, const ds_stream_rules *rules,
                           const cnnb_datasource_config *cfg, const uint8_t *pixels,
                           const uint8_t *labels, int64_t count, size_t stored_bytes,
                           const char *where) {
  *s = (ds_stream){
      .ctx = ctx,
      .rules = rules,
      .pixels = pixels,
      .labels = labels,
      .stored_bytes = stored_bytes,
      .example_bytes = (size_t)cfg->height * (size_t)cfg->width * (size_t)rules->channels,
      .count = count,
      .batch = cfg->batch_size,
      .seed = cfg->seed};
  if (count < cfg->world_size)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "%s: %s holds %lld examples, fewer than the %d shards "
                      "(replicas x processes) that would share them",
                      rules->name, where, (long long)count, cfg->world_size);
  if (!(s->image = malloc(s->example_bytes)) ||
      ds_order_init(&s->order, count, cfg->rank, cfg->world_size, cfg->seed, rules->order_salt,
                    cfg->training != 0) != 0)
    return cnnb_error(ctx, CNNB_ENOMEM, "%s: out of memory for the order of %lld examples",
                      rules->name, (long long)count);
  return CNNB_OK;
}

void ds_stream_free(ds_stream *s) {
  if (!s) return;
  ds_order_free(&s->order);
  free(s->image);
  s->image = NULL;
}

void ds_warn_epoch_size(const ds_stream *s, const cnnb_datasource_config *cfg, const char *where,
                        const char *dataset, int64_t expected) {
  if (cfg->rank != 0 || expected <= 0 || s->count == expected) return;
  cnnb_log(s->ctx, CNNB_LOG_WARN,
           "%s holds %lld %s examples where %s has %lld: an epoch here is %lld examples", where,
           (long long)s->count, cfg->training ? "training" : "test", dataset, (long long)expected,
           (long long)s->count);
}

/* The next example of this shard, rendered into out; its label into *label. */
static void next_example(ds_stream *s, uint8_t *out, int32_t *label) {
  int64_t epoch;
  int64_t index = ds_order_next(&s->order, &epoch);
  s->rules->render(s, s->pixels + (size_t)index * s->stored_bytes, epoch, index, out);
  *label = s->labels[index];
}

/* hwc [H*W][C] -> chw [C][H*W], each value (float)v * scale + offset. */
static void normalize(const ds_stream *s, const uint8_t *hwc, float *chw) {
  const float scale = s->rules->scale, offset = s->rules->offset;
  const size_t channels = (size_t)s->rules->channels, plane = s->example_bytes / channels;
  for (size_t c = 0; c < channels; c++)
    for (size_t i = 0; i < plane; i++)
      chw[c * plane + i] = (float)hwc[i * channels + c] * scale + offset;
}

cnnb_status ds_stream_next_batch(void *datasource, float *images, int32_t *labels) {
  ds_stream *s = datasource;
  for (int32_t b = 0; b < s->batch; b++) {
    next_example(s, s->image, &labels[b]);
    normalize(s, s->image, images + (size_t)b * s->example_bytes);
  }
  return CNNB_OK;
}

static cnnb_status next_batch_uint8(void *datasource, uint8_t *images, int32_t *labels) {
  ds_stream *s = datasource;
  for (int32_t b = 0; b < s->batch; b++)
    next_example(s, images + (size_t)b * s->example_bytes, &labels[b]);
  return CNNB_OK;
}

static cnnb_status normalization(void *datasource, float *scale, float *offset) {
  const ds_stream *s = datasource;
  for (int32_t c = 0; c < s->rules->channels; c++) {
    scale[c] = s->rules->scale;
    offset[c] = s->rules->offset;
  }
  return CNNB_OK;
}

int64_t ds_stream_examples_per_epoch(void *datasource) {
  return ((const ds_stream *)datasource)->count;
}

/* A resumed run: the order goes on where the run stopped, and each example keeps the crop
 * and flip of its (epoch, example). */
static cnnb_status skip_batches(void *datasource, int64_t batches) {
  ds_stream *s = datasource;
  if (batches < 0 || batches > INT64_MAX / s->batch)
    return cnnb_error(s->ctx, CNNB_EINVAL, "%s: cannot skip %lld batches of %d", s->rules->name,
                      (long long)batches, (int)s->batch);
  ds_order_skip(&s->order, batches * s->batch);
  if (batches > 0 && s->rules->say_skip)
    cnnb_log(s->ctx, CNNB_LOG_INFO,
             "the stream continues after %lld batches (%lld examples), in "
             "epoch %lld (counted from 0)",
             (long long)batches, (long long)(batches * s->batch), (long long)s->order.epoch);
  return CNNB_OK;
}

static const cnnb_datasource_uint8 uint8_batches = {
    .struct_size = sizeof(cnnb_datasource_uint8),
    .normalization = normalization,
    .next_batch_uint8 = next_batch_uint8,
};

static const cnnb_datasource_skip skip = {
    .struct_size = sizeof(cnnb_datasource_skip),
    .skip_batches = skip_batches,
};

const void *ds_stream_extension(const char *id) {
  if (strcmp(id, CNNB_EXT_DATASOURCE_SKIP) == 0) return &skip;
  return strcmp(id, CNNB_EXT_DATASOURCE_UINT8) == 0 ? &uint8_batches : NULL;
}

const void *ds_stream_instance_extension(void *datasource, const char *id) {
  (void)datasource;
  return ds_stream_extension(id);
}

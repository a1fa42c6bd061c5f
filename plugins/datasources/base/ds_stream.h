/* ds_stream.h — the instance of a labelled-image datasource whose split is in memory
 * (ds_splits.h): its shard's examples in per-epoch order (ds_order.h), rendered by the
 * datasource (its crop, flip, placement), handed over as fp32 NCHW (next_batch) or as
 * uint8 NHWC with the normalization (CNNB_EXT_DATASOURCE_UINT8: a quarter of the bytes,
 * the same numbers), and continued after a resume without rendering anything
 * (CNNB_EXT_DATASOURCE_SKIP).
 *
 * A datasource puts a ds_stream first in its instance struct, so the instance pointer the
 * host holds is the stream's: the vtable's next_batch and examples_per_epoch, and both
 * get_extension slots, are the functions below. */
#ifndef DS_STREAM_H
#define DS_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "ds_order.h"

typedef struct ds_stream ds_stream;

/* What one datasource's streams share: set once, static. */
typedef struct ds_stream_rules {
  const char *name;    /* the plugin's, to start its messages */
  uint64_t order_salt; /* ds_order_init's salt */
  int32_t channels;
  float scale, offset; /* value = (float)v * scale + offset, every channel */
  /* [input-thread] Renders stored example `index` (drawn in `epoch`) into out, HWC of the
   * config's height, width and channels. */
  void (*render)(const ds_stream *s, const uint8_t *stored, int64_t epoch, int64_t index,
                 uint8_t *out);
  int say_skip; /* skip_batches logs where the stream continues */
} ds_stream_rules;

struct ds_stream {
  cnnb_ctx *ctx;
  const ds_stream_rules *rules;
  const uint8_t *pixels, *labels; /* the split: [count][stored_bytes], [count] */
  size_t stored_bytes, example_bytes;
  int64_t count;
  ds_order order;
  int32_t batch;
  uint64_t seed;
  uint8_t *image; /* one rendered example (the fp32 path) */
};

/* The shard and batch the config asks for, as an error naming the plugin in ctx. */
cnnb_status ds_check_shard(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg);

/* Starts s on the split (pixels, labels, count examples of stored_bytes) for cfg's shard:
 * CNNB_OK, or an error in ctx naming `where` (the split's files) when the split has fewer
 * examples than shards. */
cnnb_status ds_stream_init(ds_stream *s, cnnb_ctx *ctx, const ds_stream_rules *rules,
                           const cnnb_datasource_config *cfg, const uint8_t *pixels,
                           const uint8_t *labels, int64_t count, size_t stored_bytes,
                           const char *where);
/* NULL-safe; leaves the split to its owner. */
void ds_stream_free(ds_stream *s);

/* When the split is not the dataset's own size (a subset, files from elsewhere), rank 0
 * says so: epochs and schedules count what the files hold. expected 0: unknown. */
void ds_warn_epoch_size(const ds_stream *s, const cnnb_datasource_config *cfg, const char *where,
                        const char *dataset, int64_t expected);

/* The vtable's slots, on an instance whose first member is its ds_stream. */
cnnb_status ds_stream_next_batch(void *datasource, float *images, int32_t *labels);
int64_t ds_stream_examples_per_epoch(void *datasource);
const void *ds_stream_extension(const char *id);
const void *ds_stream_instance_extension(void *datasource, const char *id);

/* The vtable of a datasource built on ds_stream: its own create, destroy, probe and
 * describe_dataset, the stream's next_batch, examples_per_epoch and get_extension. */
#define DS_STREAM_VTABLE(create_fn, destroy_fn, probe_fn, describe_fn)                             \
  {                                                                                                \
    .struct_size = sizeof(cnnb_datasource_vtable), .create = (create_fn), .destroy = (destroy_fn), \
    .next_batch = ds_stream_next_batch, .examples_per_epoch = ds_stream_examples_per_epoch,        \
    .probe = (probe_fn), .get_extension = ds_stream_instance_extension,                            \
    .describe_dataset = (describe_fn)                                                              \
  }

#endif

/* cnnb/datasource.h — what a datasource plugin provides: batches of images and labels.
 *
 * Every replica has its own instance. Images are fp32, logical NCHW, already normalized
 * as the model expects (tf_cnn_benchmarks scales to [-1, 1]); a datasource that has its
 * pixels as bytes may also hand them over as uint8 NHWC with the normalization for the
 * device to apply (CNNB_EXT_DATASOURCE_UINT8 below).
 *
 * Choosing one: --datasource=NAME picks it by name. Otherwise the host asks every
 * datasource plugin's probe() whether it can serve the run (--data_name, --data_dir) and
 * takes the highest priority; with none, the error names each plugin's reason. */
#ifndef CNNB_DATASOURCE_H
#define CNNB_DATASOURCE_H

#include "ctx.h"
#include "dataset.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cnnb_datasource_config {
  uint32_t struct_size;
  int32_t batch_size; /* per replica */
  int32_t channels, height, width;
  int32_t num_classes;
  int32_t rank, world_size; /* this instance's shard and the number of shards: one per
                               replica on every process (strategy.h); read a disjoint share */
  int32_t training;         /* 1: training (augment, shuffle); 0: evaluation */
  uint64_t seed;
  const char *data_dir; /* --data_dir, "" or NULL for none */
  /* ABI 1.3 */
  uint32_t dataset; /* the kind of --data_name's dataset: cnnb_dataset_lookup() gives its
                       facts (dataset.h) */
  uint32_t reserved;
  /* ABI 1.8 */
  int32_t local_replicas;  /* replicas in this process (--num_gpus): instances that share
                              the process's cores and memory */
  int32_t device_threads;  /* the device's compute threads as asked (--num_intra_threads);
                              0: the device's choice (the cpu device takes every core) */
  const char *device_name; /* the run's device plugin as the user picked it (--device) */
} cnnb_datasource_config;

typedef struct cnnb_datasource_vtable {
  uint32_t struct_size;
  /* [required] [main-thread] once per replica. */
  cnnb_status (*create)(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg,
                        void **datasource);
  /* [required] [main-thread] once per instance, after its input thread stopped. */
  void (*destroy)(void *datasource);
  /* [required] [input-thread] per batch: fills images [batch, C, H, W] and labels
   * [batch]. Never called concurrently on one instance; the plugin may run threads of
   * its own inside (decoders), as long as it has joined them by destroy. */
  cnnb_status (*next_batch)(void *datasource, float *images, int32_t *labels);
  /* [optional] [main-thread] once per run: examples in one epoch of this instance's
   * data, summed over every shard (what --num_epochs and schedules in epochs count);
   * 0 when unknown. NULL: unknown. A run that counts in epochs needs it. */
  int64_t (*examples_per_epoch)(void *datasource);
  /* ABI 1.3 */
  /* [optional] [main-thread] once per run when --datasource is not given: whether this
   * datasource can serve `cfg` (its dataset, data_dir): a priority > 0 when it can (the
   * highest wins; ties go to the plugin found first), 0 when it cannot, with the reason
   * recorded through cnnb_error(ctx, ...). NULL: never picked without --datasource. */
  int32_t (*probe)(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg);
  /* [optional] [any-thread] this instance's capabilities by string id, valid until
   * destroy; NULL (slot or answer): ask the descriptor's get_extension. */
  const void *(*get_extension)(void *datasource, const char *id);
  /* ABI 1.13 */
  /* [optional] [main-thread] at load, before any other slot: the index-th dataset (from
   * 0) this plugin reads and is the authority on, NULL past the last. The host copies each
   * answer into its dataset table (dataset.h), refusing with a warning one that is
   * malformed or whose name or pinned kind another plugin found earlier already gave.
   * A datasource that reads no dataset of its own (synthetic data imitates the named
   * one) leaves it NULL. */
  const cnnb_dataset_info *(*describe_dataset)(uint32_t index);
} cnnb_datasource_vtable;

/* ---- extensions a datasource may answer through get_extension ------------------ */

/* What a datasource reading real files had to skip. The host shows the count in the
 * final report, so a run that trained on fewer examples than it read says so. */
#define CNNB_EXT_DATASOURCE_STATS "cnnb.datasource.stats/1"
typedef struct cnnb_datasource_stats {
  uint32_t struct_size;
  /* [required] [any-thread] examples skipped since create as unreadable (corrupt,
   * truncated, not an image, a record failing its CRC). */
  int64_t (*skipped_examples)(void *datasource);
} cnnb_datasource_stats;

/* Batches as bytes: uint8 pixels, NHWC, not yet normalized, with the per-channel affine
 * map that normalizes them. They travel to the device in a quarter of the bytes of fp32
 * and the device normalizes them (CNNB_EXT_DEVICE_UINT8_INPUT, device.h). The host uses
 * this only when the run's device offers that extension too (and --input_dtype allows);
 * otherwise it calls next_batch as before, so a datasource offering it still implements
 * next_batch. On one instance the host calls next_batch or next_batch_uint8 for a whole
 * run, never both. A host that does not know this extension never asks for it. */
#define CNNB_EXT_DATASOURCE_UINT8 "cnnb.datasource.uint8_nhwc/1"
typedef struct cnnb_datasource_uint8 {
  uint32_t struct_size;
  /* [required] [main-thread] once per instance, before its first batch: scale[c] and
   * offset[c] for each of cfg->channels channels, such that pixel value v of channel c
   * becomes (float)v * scale[c] + offset[c], computed in fp32 — the value next_batch
   * would have stored for that pixel, so both transports train identically
   * (tf_cnn_benchmarks' [-1, 1]: scale (float)(1 / 127.5), offset -1). A datasource
   * whose fp32 path keeps finer values than whole levels (a resampled JPEG) says in
   * its documentation how far the two differ. */
  cnnb_status (*normalization)(void *datasource, float *scale, float *offset);
  /* [required] [input-thread] per batch, instead of next_batch and with its rules: fills
   * images [batch, H, W, C] uint8 and labels [batch]. */
  cnnb_status (*next_batch_uint8)(void *datasource, uint8_t *images, int32_t *labels);
} cnnb_datasource_uint8;

/* ABI 1.5: the instance continues a resumed run's stream: before its first batch, as if it
 * had already delivered `batches` batches (warm-up included) of its shard. The host asks
 * for it when --train_dir resumes a training run at a global step > 0 (each step took one
 * batch from every replica's instance), never of evaluation instances. A datasource whose
 * batches do not depend on their place in the stream (synthetic) answers it with a no-op,
 * so the host knows nothing is lost; one that cannot answer gets a warning that its order
 * restarts. */
#define CNNB_EXT_DATASOURCE_SKIP "cnnb.datasource.skip/1"
typedef struct cnnb_datasource_skip {
  uint32_t struct_size;
  /* [required] [main-thread] once, after create and before the first next_batch /
   * next_batch_uint8 (the prefetch thread has not started). Cheap relative to decoding:
   * positions are computed, images are not decoded. An error (its message on the
   * instance's ctx) stops the run: batches < 0, or what must be read to count (record
   * headers) cannot be. */
  cnnb_status (*skip_batches)(void *datasource, int64_t batches);
} cnnb_datasource_skip;

/* ABI 1.6: every batch of every instance of this datasource is the same images and
 * labels (synthetic data). Asked of the plugin's get_extension (any non-NULL answer means
 * yes): the host then uploads a replica's batch once and keeps it on the device, as
 * tf_cnn_benchmarks keeps its synthetic batch on the GPU, so a step measures the model
 * and not the bus. */
#define CNNB_EXT_DATASOURCE_CONSTANT "cnnb.datasource.constant/1"

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_datasource_config, data_dir) == 48, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_datasource_config, dataset) == 56, "ABI: 1.3 layout moved");
_Static_assert(sizeof(cnnb_datasource_config) == 80, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_datasource_vtable, examples_per_epoch) == 32, "ABI: 1.0 layout moved");
_Static_assert(offsetof(cnnb_datasource_vtable, describe_dataset) == 56, "ABI: 1.13 layout moved");
_Static_assert(sizeof(cnnb_datasource_vtable) == 64, "ABI: grow only by appending");
_Static_assert(offsetof(cnnb_datasource_skip, skip_batches) == 8, "ABI: 1.5 layout moved");
_Static_assert(sizeof(cnnb_datasource_skip) == 16, "ABI: grow only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif

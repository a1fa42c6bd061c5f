/* imagenet — the datasource of real images: ImageNet (or any image classification set)
 * as TensorFlow's TFRecord shards or as torchvision's JPEG folders, decoded with
 * libjpeg-turbo and preprocessed as tf_cnn_benchmarks does, on threads of its own.
 *
 * Each replica's instance reads its own shard (cfg->rank of cfg->world_size), so every
 * example of an epoch is read once across all replicas of all ranks. The parts:
 * layout.c (what --data_dir holds), example_stream.c (order, sharding, shuffling),
 * pipeline.c (threads), preprocess.c (tf_cnn_benchmarks' image preprocessing). */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cnnb/cnnb.h>

#include "layout.h"
#include "pipeline.h"
#include "shard_set.h"

#define THREADS_FLAG "datasets_num_private_threads"
#define SHUFFLE_FLAG "shuffle_buffer_size"
#define RESIZE_FLAG "resize_method"
#define DISTORTIONS_FLAG "distortions"
#define YIQ_FLAG "distort_color_in_yiq"
#define FUSE_FLAG "fuse_decode_and_crop"
#define INTERLEAVE_FLAG "datasets_parallel_interleave_cycle_length"
#define CACHING_FLAG "datasets_use_caching"
#define REPEAT_SAMPLE_FLAG "datasets_repeat_cached_sample"
#define MEAN_FLAG "input_mean"
#define STD_FLAG "input_std"
#define MAX_SKIPPED_FLAG "max_skipped_examples"
#define ALLOW_MISSING_FLAG SHARD_SET_ALLOW_FLAG

enum { NAMED_BAD_EXAMPLES = 10 };

typedef struct imagenet {
  cnnb_ctx *ctx; /* the instance's (input thread) */
  dataset_layout layout;
  pipeline *pipeline;
  int32_t batch;
  int64_t examples_per_epoch;
  float mean[3], std[3]; /* --input_mean, --input_std */
} imagenet;

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  struct {
    const char *name;
    cnnb_flag_type type;
    const char *value, *help;
  } flags[] = {
      {THREADS_FLAG, CNNB_FLAG_INT, "0",
       "Decoder threads of each replica's input pipeline (tf_cnn_benchmarks' name); 0: the "
       "cores the device leaves free (all but --num_intra_threads on the cpu device, all "
       "of them beside a GPU), shared between the replicas, at least 1."},
      {SHUFFLE_FLAG, CNNB_FLAG_INT, "10000",
       "Examples held in the training shuffle buffer of TFRecord shards, split between the "
       "replicas of a process (tf.data's shuffle). JPEG folders are shuffled whole every "
       "epoch. 1: no shuffle buffer (shard order is still shuffled)."},
      {RESIZE_FLAG, CNNB_FLAG_STRING, "bilinear",
       "How images are resized to the model's input: bilinear, nearest, bicubic, area, or "
       "round_robin (one of the four per image), as tf_cnn_benchmarks."},
      {DISTORTIONS_FLAG, CNNB_FLAG_BOOL, "false",
       "Colour distortions (brightness, saturation, hue, contrast) on ImageNet training "
       "images, as tf_cnn_benchmarks' --distortions (off by default, as there); the random "
       "crop and flip happen either way."},
      {YIQ_FLAG, CNNB_FLAG_BOOL, "true",
       "With --distortions, saturation and hue change in YIQ (one colour matrix, TF1's "
       "random_hsv_in_yiq: tf_cnn_benchmarks' default); --nodistort_color_in_yiq: through "
       "HSV (TensorFlow's random_saturation and random_hue, the only form TF2 has)."},
      {FUSE_FLAG, CNNB_FLAG_BOOL, "true",
       "Decode only the crop of each JPEG (tf_cnn_benchmarks' decode_and_crop; here the "
       "central crop of evaluation too); "
       "--nofuse_decode_and_crop decodes every pixel, then crops: slower, and the crop's edge "
       "pixels differ by a few levels (libjpeg's upsampling sees their neighbours)."},
      {INTERLEAVE_FLAG, CNNB_FLAG_INT, "10",
       "TFRecord shards each reader reads at once, one record from each in turn "
       "(tf.data's parallel_interleave, 10 in tf_cnn_benchmarks), 1 to 1024; 1: one shard "
       "after another."},
      {CACHING_FLAG, CNNB_FLAG_BOOL, "false",
       "Keep every shard (or image file) in memory once read, so later epochs read no "
       "storage (tf_cnn_benchmarks' name); each replica keeps its own share: memory for "
       "the whole split read."},
      {REPEAT_SAMPLE_FLAG, CNNB_FLAG_BOOL, "false",
       "Read one example, then hand it out again and again, decoded and augmented anew "
       "each time (tf_cnn_benchmarks' name): the input pipeline without storage, at memory "
       "speed. Accuracy means nothing then."},
      {MEAN_FLAG, CNNB_FLAG_STRING, "0.5,0.5,0.5",
       "Per-channel (R,G,B) mean subtracted from pixels scaled to [0, 1]; with --input_std "
       "0.5 this is tf_cnn_benchmarks' [-1, 1]. torchvision's: 0.485,0.456,0.406."},
      {STD_FLAG, CNNB_FLAG_STRING, "0.5,0.5,0.5",
       "Per-channel (R,G,B) standard deviation pixels are divided by after --input_mean "
       "(torchvision's: 0.229,0.224,0.225)."},
      {MAX_SKIPPED_FLAG, CNNB_FLAG_INT, "-1",
       "Unreadable examples (corrupt or truncated JPEG, a record failing its CRC) a replica "
       "may skip before the run stops with an error; -1: no limit (each is counted and "
       "the total is in the report)."},
      {ALLOW_MISSING_FLAG, CNNB_FLAG_BOOL, "false",
       "Read a TFRecord shard set whose names (train-NNNNN-of-NNNNN) show shards missing, "
       "with a warning naming them; without it such a set is refused before the first "
       "step."},
  };
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    cnnb_status st = cnnb_flag_declare(registry, flags[i].name, flags[i].type, flags[i].value,
                                       flags[i].help);
    if (st != CNNB_OK) return st;
  }
  return CNNB_OK;
}

/* "a,b,c" into three floats. */
static cnnb_status parse_triple(cnnb_ctx *ctx, const char *flag, float out[3], int positive) {
  const char *text = cnnb_flag_string(ctx, flag);
  char *end = NULL;
  const char *p = text;
  for (int c = 0; c < 3; c++) {
    out[c] = strtof(p, &end);
    if (end == p || (c < 2 && *end != ',') || (c == 2 && *end != '\0') ||
        (positive && !(out[c] > 0)))
      return cnnb_error(ctx, CNNB_EINVAL,
                        "--%s=%s: expected three %snumbers separated by commas (R,G,B)", flag, text,
                        positive ? "positive " : "");
    p = end + 1;
  }
  return CNNB_OK;
}

/* What the host said of the process (ABI 1.8): its replicas, and the device and its
 * threads. A host before 1.8 said nothing: one replica, a device that leaves the cores
 * free. */
static int32_t local_replicas(const cnnb_datasource_config *cfg) {
  bool told = cfg->struct_size >=
              offsetof(cnnb_datasource_config, local_replicas) + sizeof cfg->local_replicas;
  return told && cfg->local_replicas > 1 ? cfg->local_replicas : 1;
}

/* The cores this instance's decoders may use: what the device leaves free, shared by the
 * replicas of this process. The cpu device computes on every core unless told fewer. */
static int32_t default_threads(const cnnb_datasource_config *cfg) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  long used = 0;
  bool told = cfg->struct_size >=
              offsetof(cnnb_datasource_config, device_name) + sizeof cfg->device_name;
  if (told && cfg->device_name && strcmp(cfg->device_name, "cpu") == 0) {
    long intra = cfg->device_threads;
    used = intra > 0 && intra < cores ? intra : cores;
  }
  long free_cores = (cores - used) / local_replicas(cfg);
  return (int32_t)(free_cores > 0 ? free_cores : 1);
}

/* ImageNet's facts, which this plugin is the authority on (cnnb/dataset.h); kind 1 as
 * hosts before 1.13 numbered it. The counts are tf_cnn_benchmarks' (datasets.py), its
 * classes 1001 with label 0 unused. */
static const cnnb_dataset_info imagenet_dataset = {.struct_size = sizeof(cnnb_dataset_info),
                                                   .kind = 1,
                                                   .name = "imagenet",
                                                   .num_classes = 1001,
                                                   .channels = 3,
                                                   .train_examples = 1281167,
                                                   .eval_examples = 50000};

static const cnnb_dataset_info *describe_dataset(uint32_t index) {
  return index == 0 ? &imagenet_dataset : NULL;
}

/* The run's dataset as the host describes it; NULL from a host too old to name one. */
static const cnnb_dataset_info *run_dataset(const cnnb_datasource_config *cfg) {
  if (cfg->struct_size < offsetof(cnnb_datasource_config, dataset) + sizeof cfg->dataset)
    return NULL;
  return cnnb_dataset_lookup(cfg->dataset);
}

/* Whether the run's dataset is ImageNet itself (no dataset named counts as ImageNet). */
static int is_imagenet(const cnnb_datasource_config *cfg) {
  const cnnb_dataset_info *info = run_dataset(cfg);
  return !info || strcmp(info->name, imagenet_dataset.name) == 0;
}

static int64_t known_examples(const cnnb_datasource_config *cfg) {
  const cnnb_dataset_info *info = run_dataset(cfg);
  if (!info) return 0;
  return cfg->training ? info->train_examples : info->eval_examples;
}

static int32_t imagenet_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (!cfg->data_dir || !cfg->data_dir[0]) {
    cnnb_error(ctx, CNNB_EINVAL, "reads images from a --data_dir, and none was given");
    return 0;
  }
  /* Another dataset is its own datasource's to find; a JPEG folder of it is still read
   * when the user names this plugin (--datasource=imagenet), which skips the probe. */
  if (!is_imagenet(cfg)) {
    cnnb_error(ctx, CNNB_EINVAL,
               "serves --data_name=imagenet; a JPEG folder of --data_name=%s it reads only "
               "when named (--datasource=imagenet)",
               run_dataset(cfg)->name);
    return 0;
  }
  dataset_layout layout;
  char err[1024];
  if (layout_detect(cfg->data_dir, cfg->training, is_imagenet(cfg), cfg->num_classes,
                    known_examples(cfg), cnnb_flag_bool(ctx, ALLOW_MISSING_FLAG), &layout, err,
                    sizeof err) != 0) {
    cnnb_error(ctx, CNNB_EINVAL, "%s", err);
    return 0;
  }
  layout_free(&layout);
  return 10;
}

static void imagenet_destroy(void *datasource) {
  imagenet *d = datasource;
  if (!d) return;
  pipeline_destroy(d->pipeline);
  layout_free(&d->layout);
  free(d);
}

static cnnb_status imagenet_create(cnnb_ctx *ctx, const char *name,
                                   const cnnb_datasource_config *cfg, void **out) {
  (void)name;
  *out = NULL;
  if (cfg->channels != 3)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "imagenet: the model wants %d input channels; JPEG images give 3 (RGB)",
                      cfg->channels);
  if (cfg->batch_size <= 0 || cfg->height <= 0 || cfg->width <= 0)
    return cnnb_error(ctx, CNNB_EINVAL, "imagenet: batch %d of %dx%d images is empty",
                      cfg->batch_size, cfg->height, cfg->width);
  int resize = resize_method_parse(cnnb_flag_string(ctx, RESIZE_FLAG));
  if (resize < 0)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "--%s=%s: expected bilinear, nearest, bicubic, area or round_robin",
                      RESIZE_FLAG, cnnb_flag_string(ctx, RESIZE_FLAG));
  int64_t threads = cnnb_flag_int(ctx, THREADS_FLAG);
  if (threads < 0 || threads > 1024)
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%lld: expected 0 (automatic) to 1024", THREADS_FLAG,
                      (long long)threads);
  int64_t interleave = cnnb_flag_int(ctx, INTERLEAVE_FLAG);
  if (interleave < 1 || interleave > 1024)
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%lld: expected 1 to 1024 shards read at once",
                      INTERLEAVE_FLAG, (long long)interleave);
  int64_t shuffle = cnnb_flag_int(ctx, SHUFFLE_FLAG);
  if (shuffle < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%lld: expected at least 1", SHUFFLE_FLAG,
                      (long long)shuffle);
  preprocess_config pre = {.height = cfg->height,
                           .width = cfg->width,
                           .training = cfg->training,
                           .resize = (resize_method)resize,
                           .distortions = cfg->training && cnnb_flag_bool(ctx, DISTORTIONS_FLAG),
                           .color_in_yiq = cnnb_flag_bool(ctx, YIQ_FLAG),
                           .decode_whole = !cnnb_flag_bool(ctx, FUSE_FLAG)};
  cnnb_status st = parse_triple(ctx, MEAN_FLAG, pre.mean, 0);
  if (st == CNNB_OK) st = parse_triple(ctx, STD_FLAG, pre.std, 1);
  if (st != CNNB_OK) return st;

  imagenet *d = calloc(1, sizeof *d);
  if (!d) return cnnb_error(ctx, CNNB_ENOMEM, "imagenet: out of memory");
  d->ctx = ctx;
  d->batch = cfg->batch_size;
  memcpy(d->mean, pre.mean, sizeof d->mean);
  memcpy(d->std, pre.std, sizeof d->std);
  char err[1024];
  if (layout_detect(cfg->data_dir, cfg->training, is_imagenet(cfg), cfg->num_classes,
                    known_examples(cfg), cnnb_flag_bool(ctx, ALLOW_MISSING_FLAG), &d->layout, err,
                    sizeof err) != 0) {
    imagenet_destroy(d);
    return cnnb_error(ctx, CNNB_EINVAL, "imagenet: %s", err);
  }
  if (d->layout.warning[0]) cnnb_log(ctx, CNNB_LOG_WARN, "imagenet: %s", d->layout.warning);
  if (d->layout.kind == LAYOUT_FOLDER && cnnb_flag_is_set(ctx, INTERLEAVE_FLAG) && cfg->rank == 0 &&
      cfg->training)
    cnnb_log(ctx, CNNB_LOG_WARN,
             "imagenet: --%s=%lld has no effect here: %s is a JPEG folder, read by image in "
             "a shuffled order, not TFRecord shards",
             INTERLEAVE_FLAG, (long long)interleave, d->layout.where);
  d->examples_per_epoch = d->layout.examples;
  /* --shuffle_buffer_size is the process's: its replicas share it. */
  int64_t buffer = shuffle / local_replicas(cfg);
  int32_t decoders = threads > 0 ? (int32_t)threads : default_threads(cfg);
  pipeline_config pc = {
      .stream = {.layout = &d->layout,
                 .shard = cfg->rank,
                 .num_shards = cfg->world_size,
                 .shuffle = cfg->training,
                 .shuffle_buffer = buffer > 1 ? buffer : 1,
                 .seed = cfg->seed,
                 .num_classes = cfg->num_classes,
                 .interleave = (int32_t)interleave,
                 .cache = cnnb_flag_bool(ctx, CACHING_FLAG),
                 .repeat_first = cnnb_flag_bool(ctx, REPEAT_SAMPLE_FLAG)},
      .preprocess = pre,
      .num_threads = decoders,
      /* Enough examples in flight to keep every decoder busy while the batch is filled
       * in order; the host's prefetch queue holds whole batches beyond this. */
      .ring_slots = 4 * decoders + 8,
      .seed = cfg->seed * 1000003ull + (uint64_t)cfg->rank,
      .max_skipped = cnnb_flag_int(ctx, MAX_SKIPPED_FLAG),
      .max_named = NAMED_BAD_EXAMPLES,
      .ctx = ctx,
  };
  if ((st = pipeline_create(&pc, &d->pipeline)) != CNNB_OK) {
    imagenet_destroy(d);
    return st;
  }
  char damaged[160] = "";
  if (d->layout.damaged_files)
    snprintf(damaged, sizeof damaged,
             " (%zu of the %zu files lose their framing: only the records before the damage "
             "are counted and read)",
             d->layout.damaged_files, d->layout.num_files);
  cnnb_log(ctx, CNNB_LOG_INFO,
           "imagenet: %s %s, %lld examples%s, shard %d of %d, %d decoder threads",
           d->layout.kind == LAYOUT_TFRECORD ? "TFRecord shards" : "JPEG folder", d->layout.where,
           (long long)d->examples_per_epoch, damaged, (int)cfg->rank, (int)cfg->world_size,
           (int)decoders);
  *out = d;
  return CNNB_OK;
}

static cnnb_status imagenet_next_batch(void *datasource, float *images, int32_t *labels) {
  imagenet *d = datasource;
  return pipeline_next_batch(d->pipeline, d->batch, images, 0, labels);
}

/* Batches as bytes (CNNB_EXT_DATASOURCE_UINT8): the decoders stop before normalizing,
 * and the device maps v to (v / 255 - mean) / std. The resized pixels are rounded to
 * whole levels on this path, which the fp32 path keeps: the two differ by at most half a
 * level (1/510 before dividing by std). */
static cnnb_status imagenet_normalization(void *datasource, float *scale, float *offset) {
  const imagenet *d = datasource;
  for (int c = 0; c < 3; c++) {
    scale[c] = 1.0f / (255.0f * d->std[c]);
    offset[c] = -d->mean[c] / d->std[c];
  }
  return CNNB_OK;
}

static cnnb_status imagenet_next_batch_uint8(void *datasource, uint8_t *images, int32_t *labels) {
  imagenet *d = datasource;
  return pipeline_next_batch(d->pipeline, d->batch, images, 1, labels);
}

static const cnnb_datasource_uint8 uint8_batches = {
    .struct_size = sizeof(cnnb_datasource_uint8),
    .normalization = imagenet_normalization,
    .next_batch_uint8 = imagenet_next_batch_uint8,
};

static int64_t imagenet_examples_per_epoch(void *datasource) {
  return ((const imagenet *)datasource)->examples_per_epoch;
}

static int64_t imagenet_skipped(void *datasource) {
  return pipeline_skipped(((const imagenet *)datasource)->pipeline);
}

static const cnnb_datasource_stats stats = {
    .struct_size = sizeof(cnnb_datasource_stats),
    .skipped_examples = imagenet_skipped,
};

/* A resumed run (CNNB_EXT_DATASOURCE_SKIP): the stream goes on where the run stopped,
 * each example with the augmentation of its place in the whole stream. Every example
 * taken counts, so the few unreadable ones of the skipped part (which a batch passed
 * over) make the continuation start that many examples early. */
static cnnb_status imagenet_skip_batches(void *datasource, int64_t batches) {
  imagenet *d = datasource;
  if (batches < 0 || batches > INT64_MAX / d->batch)
    return cnnb_error(d->ctx, CNNB_EINVAL, "imagenet: cannot skip %lld batches of %d",
                      (long long)batches, (int)d->batch);
  int64_t epoch = 0, examples = batches * d->batch;
  cnnb_status st = pipeline_skip(d->pipeline, examples, &epoch);
  if (st == CNNB_OK && examples > 0)
    cnnb_log(d->ctx, CNNB_LOG_INFO,
             "imagenet: the stream continues after %lld batches "
             "(%lld examples), in epoch %lld (counted from 0)",
             (long long)batches, (long long)examples, (long long)epoch);
  return st;
}

static const cnnb_datasource_skip skip = {
    .struct_size = sizeof(cnnb_datasource_skip),
    .skip_batches = imagenet_skip_batches,
};

static const void *imagenet_get_extension(void *datasource, const char *id) {
  (void)datasource;
  if (strcmp(id, CNNB_EXT_DATASOURCE_SKIP) == 0) return &skip;
  if (strcmp(id, CNNB_EXT_DATASOURCE_STATS) == 0) return &stats;
  if (strcmp(id, CNNB_EXT_DATASOURCE_UINT8) == 0) return &uint8_batches;
  return NULL;
}

static const cnnb_datasource_vtable vtable = {
    .struct_size = sizeof(cnnb_datasource_vtable),
    .create = imagenet_create,
    .destroy = imagenet_destroy,
    .next_batch = imagenet_next_batch,
    .examples_per_epoch = imagenet_examples_per_epoch,
    .probe = imagenet_probe,
    .get_extension = imagenet_get_extension,
    .describe_dataset = describe_dataset,
};

static const char *const offers[] = {"imagenet", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DATASOURCE, "imagenet", "0.1.0",
                     "ImageNet-style TFRecord shards or JPEG folders (libjpeg-turbo, "
                     "tf_cnn_benchmarks' preprocessing)"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

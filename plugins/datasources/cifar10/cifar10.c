/* cifar10.c — the `cifar10` datasource: CIFAR-10's binary batches from --data_dir
 * (cifar_files.h), read into memory once and shared read-only by every instance of the
 * process that reads the same split (ds_splits.h), served in per-epoch orders sharded
 * across replicas and ranks (ds_stream.h, ds_order.h: the datasource base library),
 * preprocessed as tf_cnn_benchmarks does (cifar_image.h).
 *
 * Batches leave as fp32 NCHW (next_batch) or, for a device that normalizes them itself,
 * as uint8 NHWC with the normalization (CNNB_EXT_DATASOURCE_UINT8): a quarter of the
 * bytes, the same numbers.
 *
 * Training images are padded, cropped and flipped only under --distortions, as
 * tf_cnn_benchmarks' Cifar10ImagePreprocessor (its --nodistortions, the default, takes
 * them as they are).
 *
 * Its probe claims --data_name=cifar10 runs whose --data_dir holds the split's files,
 * above synthetic (priority 1); otherwise it says which files it looked for where. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "cifar_files.h"
#include "cifar_image.h"
#include "ds_dataset.h"
#include "ds_splits.h"
#include "ds_stream.h"

#define DISTORTIONS_FLAG "distortions"

enum { PROBE_PRIORITY = 10 };

/* The seeds' salts of the orders and crops this datasource has always drawn. */
enum { ORDER_SALT = 0x1234567, CROP_SALT = 0xC1FA510, CROP_PAD = 4 };

/* ---- splits loaded once per process (ds_splits.h) ------------------------------------ */

typedef struct split_files {
  const char *dir;
  int training;
} split_files;

static cnnb_status load_split(const void *arg, void **out, char *err, size_t err_size) {
  const split_files *f = arg;
  cifar_set *set = calloc(1, sizeof *set);
  if (!set) {
    snprintf(err, err_size, "out of memory");
    return CNNB_ENOMEM;
  }
  int rc = cifar_load(f->dir, f->training, set, err, err_size);
  if (rc != 0) {
    free(set);
    return rc == CIFAR_NO_MEMORY ? CNNB_ENOMEM : rc == CIFAR_IO_ERROR ? CNNB_EIO : CNNB_EDATA;
  }
  *out = set;
  return CNNB_OK;
}

static void free_split(void *set) {
  cifar_set_free(set);
  free(set);
}

/* ---- the instance -------------------------------------------------------------------- */

typedef struct cifar10 {
  ds_stream stream; /* first: the host's instance pointer is the stream's */
  ds_split *split;
  int augment; /* training under --distortions: pad, crop and flip */
} cifar10;

/* CIFAR-10's facts, which this plugin is the authority on (cnnb/dataset.h); kind 2 as
 * hosts before 1.13 numbered it. The counts are tf_cnn_benchmarks' (datasets.py). */
static const cnnb_dataset_info cifar10_dataset = {.struct_size = sizeof(cnnb_dataset_info),
                                                  .kind = 2,
                                                  .name = "cifar10",
                                                  .num_classes = CIFAR_CLASSES,
                                                  .channels = CIFAR_CHANNELS,
                                                  .train_examples = 50000,
                                                  .eval_examples = 10000,
                                                  .height = CIFAR_SIDE,
                                                  .width = CIFAR_SIDE};
static const cnnb_dataset_info *const own_datasets[] = {&cifar10_dataset, NULL};

static const cnnb_dataset_info *describe_dataset(uint32_t index) {
  return index < sizeof own_datasets / sizeof own_datasets[0] - 1 ? own_datasets[index] : NULL;
}

/* What the run asks of the data that CIFAR-10 cannot give, as an error in ctx. */
static cnnb_status check_config(cnnb_ctx *ctx, const cnnb_datasource_config *cfg) {
  if (!ds_own_dataset(ctx, "cifar10", own_datasets, cfg)) return CNNB_EINVAL;
  if (cfg->channels != CIFAR_CHANNELS || cfg->height != CIFAR_SIDE || cfg->width != CIFAR_SIDE)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "cifar10: its images are 32x32 with 3 channels, and the "
                      "model asks for %dx%d with %d: pick a model built for 32x32 CIFAR-10 "
                      "input, or --image_size=32",
                      cfg->height, cfg->width, cfg->channels);
  if (cfg->num_classes < CIFAR_CLASSES)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "cifar10: its labels go up to 9, and the model has %d "
                      "classes: give --num_classes of at least 10 (or leave it unset)",
                      cfg->num_classes);
  return ds_check_shard(ctx, "cifar10", cfg);
}

/* Stored planes -> HWC, padded, cropped and flipped when the instance augments. */
static void render(const ds_stream *stream, const uint8_t *stored, int64_t epoch, int64_t index,
                   uint8_t *out) {
  const cifar10 *s = (const cifar10 *)stream;
  ds_crop crop = ds_order_crop(CROP_SALT, stream->seed, epoch, index, CROP_PAD);
  cifar_image_render(stored, s->augment ? &crop : NULL, out);
}

static const ds_stream_rules rules = {.name = "cifar10",
                                      .order_salt = ORDER_SALT,
                                      .channels = CIFAR_CHANNELS,
                                      .scale = CIFAR_SCALE,
                                      .offset = CIFAR_OFFSET,
                                      .render = render};

static void cifar10_destroy(void *datasource) {
  cifar10 *s = datasource;
  if (!s) return;
  ds_stream_free(&s->stream);
  ds_split_release(s->split);
  free(s);
}

static cnnb_status cifar10_create(cnnb_ctx *ctx, const char *name,
                                  const cnnb_datasource_config *cfg, void **out) {
  (void)name;
  *out = NULL;
  cnnb_status st = check_config(ctx, cfg);
  if (st != CNNB_OK) return st;
  char dir[4096], err[2048], key[4200];
  if (cifar_find_dir(cfg->data_dir, cfg->training, dir, sizeof dir, err, sizeof err) != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "cifar10: %s", err);
  cifar10 *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "cifar10: out of memory");
  const int training = cfg->training != 0;
  s->augment = training && cnnb_flag_bool(ctx, DISTORTIONS_FLAG);
  snprintf(key, sizeof key, "%s:%s", training ? "train" : "test", dir);
  const split_files files = {.dir = dir, .training = training};
  if (!(s->split = ds_split_acquire(key, load_split, free_split, &files, &st, err, sizeof err))) {
    free(s);
    return cnnb_error(ctx, st, "cifar10: %s", err);
  }
  const cifar_set *set = ds_split_set(s->split);
  st = ds_stream_init(&s->stream, ctx, &rules, cfg, set->pixels, set->labels, set->count,
                      CIFAR_PIXELS, dir);
  if (st != CNNB_OK) {
    cifar10_destroy(s);
    return st;
  }
  ds_warn_epoch_size(&s->stream, cfg, dir, "CIFAR-10",
                     training ? cifar10_dataset.train_examples : cifar10_dataset.eval_examples);
  cnnb_log(ctx, CNNB_LOG_DEBUG, "shard %d of %d: %lld %s examples from %s", cfg->rank,
           cfg->world_size, (long long)set->count, training ? "training" : "test", dir);
  *out = s;
  return CNNB_OK;
}

static int32_t cifar10_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (!ds_own_dataset(ctx, "cifar10", own_datasets, cfg)) return 0;
  char dir[4096], err[2048];
  if (cifar_find_dir(cfg->data_dir, cfg->training, dir, sizeof dir, err, sizeof err) != 0) {
    cnnb_error(ctx, CNNB_EINVAL, "%s", err);
    return 0;
  }
  return PROBE_PRIORITY;
}

static const cnnb_datasource_vtable vtable = DS_STREAM_VTABLE(cifar10_create, cifar10_destroy,
                                                              cifar10_probe, describe_dataset);

/* tf_cnn_benchmarks' flag, which the imagenet datasource reads too: the same name, type
 * and default make it one flag (flags.h). */
static cnnb_status register_flags(cnnb_flag_registry *registry) {
  return cnnb_flag_declare(registry, DISTORTIONS_FLAG, CNNB_FLAG_BOOL, "false",
                           "CIFAR-10 training images padded by 4, randomly cropped back to "
                           "32x32 and flipped, as tf_cnn_benchmarks' --distortions; without "
                           "it they are taken as they are (tf's --nodistortions).");
}

static const char *const offers[] = {"cifar10", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DATASOURCE, "cifar10", "0.1.0",
                     "CIFAR-10 binary batches from --data_dir (tf_cnn_benchmarks' preprocessing)"),
    .offers = offers,
    .vtable = &vtable,
    .get_extension = ds_stream_extension,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

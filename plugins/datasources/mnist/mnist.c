/* mnist.c — the `mnist` datasource: MNIST-layout IDX files from --data_dir (MNIST,
 * Fashion-MNIST, KMNIST; plain or gzipped: mnist_files.h), read into memory once and
 * shared read-only by every instance of the process that reads the same split
 * (ds_splits.h), served in per-epoch orders sharded across replicas and ranks (ds_stream.h,
 * ds_order.h: the datasource base library), placed in the model's input size and
 * optionally augmented (mnist_image.h).
 *
 * Batches leave as fp32 NCHW (next_batch) or, for a device that normalizes them itself,
 * as uint8 NHWC with the normalization (CNNB_EXT_DATASOURCE_UINT8): a quarter of the
 * bytes, the same numbers. A resumed run skips batches without rendering them
 * (CNNB_EXT_DATASOURCE_SKIP). There is no stats extension: a file is read and checked
 * whole when the first instance is created, and a bad one stops the run then, so no
 * example is ever skipped as unreadable.
 *
 * Its probe claims --data_name=mnist runs whose --data_dir holds the split's files,
 * above synthetic (priority 1); otherwise it says which files it looked for where. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "idx_source.h"
#include "mnist_files.h"
#include "mnist_image.h"
#include "ds_dataset.h"
#include "ds_splits.h"
#include "ds_stream.h"

enum { PROBE_PRIORITY = 10 };

#define AUGMENT_FLAG "mnist_augment"

/* --mnist_augment's values. */
typedef enum augment_mode { AUGMENT_NONE, AUGMENT_CROP, AUGMENT_CROP_FLIP } augment_mode;

/* The seeds' salts of the orders and crops this datasource has always drawn. */
enum { ORDER_SALT = 0x3D1A7, CROP_SALT = 0x3A1575 };

/* ---- splits loaded once per process (ds_splits.h), known by their images file -------- */

static cnnb_status status_of(int idx_result) {
  switch (idx_result) {
    case IDX_NO_MEMORY: return CNNB_ENOMEM;
    case IDX_IO_ERROR: return CNNB_EIO;
    case IDX_UNSUPPORTED: return CNNB_EUNSUPPORTED;
    default: return CNNB_EDATA;
  }
}

static cnnb_status load_split(const void *paths, void **out, char *err, size_t err_size) {
  mnist_set *set = calloc(1, sizeof *set);
  if (!set) {
    snprintf(err, err_size, "out of memory");
    return CNNB_ENOMEM;
  }
  int rc = mnist_load(paths, set, err, err_size);
  if (rc != IDX_OK) {
    free(set);
    return status_of(rc);
  }
  *out = set;
  return CNNB_OK;
}

static void free_split(void *set) {
  mnist_set_free(set);
  free(set);
}

/* ---- flags ------------------------------------------------------------------------- */

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  return cnnb_flag_declare(
      registry, AUGMENT_FLAG, CNNB_FLAG_STRING, "none",
      "Augmentation of the mnist datasource's training images: none (the default, as "
      "torchvision's usual MNIST recipe), crop (pad by 4 with background, then a random "
      "28x28 crop), or crop_flip (the crop, then a left-right flip half of the time: for "
      "Fashion-MNIST, not for digits). Evaluation images are never augmented.");
}

/* --mnist_augment's value; -1 with the error in ctx when it is none of them. */
static int augment_mode_of(cnnb_ctx *ctx) {
  const char *v = cnnb_flag_string(ctx, AUGMENT_FLAG);
  if (!v || !*v || strcmp(v, "none") == 0) return AUGMENT_NONE; /* "": a host without it */
  if (strcmp(v, "crop") == 0) return AUGMENT_CROP;
  if (strcmp(v, "crop_flip") == 0) return AUGMENT_CROP_FLIP;
  cnnb_error(ctx, CNNB_EINVAL, "--%s=%s: expected none, crop or crop_flip", AUGMENT_FLAG, v);
  return -1;
}

/* ---- the instance -------------------------------------------------------------------- */

typedef struct mnist {
  ds_stream stream; /* first: the host's instance pointer is the stream's */
  ds_split *split;
  augment_mode augment; /* AUGMENT_NONE for evaluation */
  int32_t height, width;
} mnist;

/* The datasets published in MNIST's layout, whose facts this plugin is the authority on
 * (cnnb/dataset.h): 28x28 grayscale, 10 classes, 60,000 training and 10,000 test images
 * each. MNIST keeps kind 3, as hosts before 1.13 numbered it; the host numbers the rest. */
#define MNIST_LAYOUT(...)                                                                       \
  {                                                                                             \
    .struct_size = sizeof(cnnb_dataset_info), .num_classes = 10, .channels = 1,                 \
    .train_examples = 60000, .eval_examples = 10000, .height = MNIST_SIDE, .width = MNIST_SIDE, \
    __VA_ARGS__                                                                                 \
  }
static const cnnb_dataset_info mnist_dataset = MNIST_LAYOUT(.kind = 3, .name = "mnist");
static const cnnb_dataset_info fashion_mnist_dataset = MNIST_LAYOUT(.name = "fashion_mnist");
static const cnnb_dataset_info kmnist_dataset = MNIST_LAYOUT(.name = "kmnist");
static const cnnb_dataset_info *const own_datasets[] = {&mnist_dataset, &fashion_mnist_dataset,
                                                        &kmnist_dataset, NULL};

static const cnnb_dataset_info *describe_dataset(uint32_t index) {
  return index < sizeof own_datasets / sizeof own_datasets[0] - 1 ? own_datasets[index] : NULL;
}

/* What the run asks of the data that an MNIST-layout set cannot give, as an error in ctx. */
static cnnb_status check_config(cnnb_ctx *ctx, const cnnb_datasource_config *cfg) {
  if (!ds_own_dataset(ctx, "mnist", own_datasets, cfg)) return CNNB_EINVAL;
  if (cfg->channels != 1)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "mnist: its images have 1 channel (grayscale), and the "
                      "model asks for %d: pick a model built for 1-channel input",
                      cfg->channels);
  if (cfg->height < MNIST_SIDE || cfg->width < MNIST_SIDE)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "mnist: its images are 28x28, and the model asks for "
                      "%dx%d: give --image_size=28 or larger (a larger size pads the images "
                      "with background; they are never cropped or resized)",
                      cfg->height, cfg->width);
  return ds_check_shard(ctx, "mnist", cfg);
}

/* The stored 28x28 placed in the model's height x width, cropped (and flipped) when the
 * instance augments. */
static void render(const ds_stream *stream, const uint8_t *stored, int64_t epoch, int64_t index,
                   uint8_t *out) {
  const mnist *s = (const mnist *)stream;
  ds_crop crop = ds_order_crop(CROP_SALT, stream->seed, epoch, index, MNIST_AUGMENT_PAD);
  if (s->augment != AUGMENT_CROP_FLIP) crop.flip = 0;
  mnist_image_render(stored, s->augment != AUGMENT_NONE ? &crop : NULL, s->height, s->width, out);
}

static const ds_stream_rules rules = {.name = "mnist",
                                      .order_salt = ORDER_SALT,
                                      .channels = 1,
                                      .scale = MNIST_SCALE,
                                      .offset = MNIST_OFFSET,
                                      .render = render,
                                      .say_skip = 1};

static void mnist_destroy(void *datasource) {
  mnist *s = datasource;
  if (!s) return;
  ds_stream_free(&s->stream);
  ds_split_release(s->split);
  free(s);
}

static cnnb_status mnist_create(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg,
                                void **out) {
  (void)name;
  *out = NULL;
  cnnb_status st = check_config(ctx, cfg);
  if (st != CNNB_OK) return st;
  int augment = augment_mode_of(ctx);
  if (augment < 0) return CNNB_EINVAL;
  mnist_paths paths;
  char err[2048];
  if (mnist_find_files(cfg->data_dir, cfg->training, &paths, err, sizeof err) != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "mnist: %s", err);
  mnist *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "mnist: out of memory");
  s->augment = cfg->training ? (augment_mode)augment : AUGMENT_NONE;
  s->height = cfg->height;
  s->width = cfg->width;
  if (!(s->split = ds_split_acquire(paths.images, load_split, free_split, &paths, &st, err,
                                    sizeof err))) {
    mnist_destroy(s);
    return cnnb_error(ctx, st, "mnist: %s", err);
  }
  const mnist_set *set = ds_split_set(s->split);
  if (set->max_label >= cfg->num_classes) {
    cnnb_status bad = cnnb_error(ctx, CNNB_EDATA,
                                 "mnist: %s: example %lld has label %u, not below "
                                 "the run's %d classes: give --num_classes of at least %u",
                                 set->labels_path, (long long)set->max_label_at,
                                 (unsigned)set->max_label, cfg->num_classes,
                                 (unsigned)set->max_label + 1);
    mnist_destroy(s);
    return bad;
  }
  st = ds_stream_init(&s->stream, ctx, &rules, cfg, set->pixels, set->labels, set->count,
                      MNIST_PIXELS, paths.images);
  if (st != CNNB_OK) {
    mnist_destroy(s);
    return st;
  }
  /* The dataset's own size: EMNIST or a subset differ. */
  const cnnb_dataset_info *own = ds_run_dataset(cfg); /* one of ours: check_config said so */
  ds_warn_epoch_size(&s->stream, cfg, paths.images, own->name,
                     cfg->training ? own->train_examples : own->eval_examples);
  if (cfg->rank == 0 && (cfg->height != MNIST_SIDE || cfg->width != MNIST_SIDE))
    cnnb_log(ctx, CNNB_LOG_INFO, "the 28x28 images are padded with background to the model's %dx%d",
             cfg->height, cfg->width);
  cnnb_log(ctx, CNNB_LOG_DEBUG, "shard %d of %d: %lld %s examples from %s and %s%s", cfg->rank,
           cfg->world_size, (long long)set->count, cfg->training ? "training" : "test",
           paths.images, paths.labels,
           s->augment == AUGMENT_CROP_FLIP ? ", cropped and flipped"
           : s->augment == AUGMENT_CROP    ? ", cropped"
                                           : "");
  *out = s;
  return CNNB_OK;
}

static int32_t mnist_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (!ds_own_dataset(ctx, "mnist", own_datasets, cfg)) return 0;
  mnist_paths paths;
  char err[2048];
  if (mnist_find_files(cfg->data_dir, cfg->training, &paths, err, sizeof err) != 0) {
    cnnb_error(ctx, CNNB_EINVAL, "%s", err);
    return 0;
  }
  return PROBE_PRIORITY;
}

static const cnnb_datasource_vtable vtable = DS_STREAM_VTABLE(mnist_create, mnist_destroy,
                                                              mnist_probe, describe_dataset);

static const char *const offers[] = {"mnist", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DATASOURCE, "mnist", "0.1.0",
                     "MNIST-layout IDX files from --data_dir, plain or .gz (MNIST, "
                     "Fashion-MNIST, KMNIST)"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
    .get_extension = ds_stream_extension,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

/* mnist.c — the `mnist` datasource: MNIST-layout IDX files from --data_dir (MNIST,
 * Fashion-MNIST, KMNIST; plain or gzipped: mnist_files.h), read into memory once and
 * shared read-only by every instance of the process that reads the same split, served in
 * per-epoch orders sharded across replicas and ranks (mnist_order.h), placed in the
 * model's input size and optionally augmented (mnist_image.h).
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
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "idx_source.h"
#include "mnist_files.h"
#include "mnist_image.h"
#include "mnist_order.h"

enum { PROBE_PRIORITY = 10 };

#define AUGMENT_FLAG "mnist_augment"

/* --mnist_augment's values. */
typedef enum augment_mode { AUGMENT_NONE, AUGMENT_CROP, AUGMENT_CROP_FLIP } augment_mode;

/* ---- splits loaded once per process ------------------------------------------------ */

/* create and destroy run on the main thread (datasource.h), but a process may hold
 * several runs' hosts (tests), so the list is locked anyway: it costs nothing. A split is
 * known by its images file's path (the labels file sits beside it). */
typedef struct loaded {
  struct loaded *next;
  char images_path[4096];
  int refs;
  mnist_set set;
} loaded;

static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *loaded_list;

static cnnb_status status_of(int idx_result) {
  switch (idx_result) {
    case IDX_NO_MEMORY: return CNNB_ENOMEM;
    case IDX_IO_ERROR: return CNNB_EIO;
    case IDX_UNSUPPORTED: return CNNB_EUNSUPPORTED;
    default: return CNNB_EDATA;
  }
}

/* The split of `paths`, loaded by the first instance that asks; NULL with *status and err. */
static loaded *acquire(const mnist_paths *paths, cnnb_status *status, char *err, size_t err_size) {
  pthread_mutex_lock(&loaded_lock);
  loaded *l = loaded_list;
  while (l && strcmp(l->images_path, paths->images) != 0) l = l->next;
  int rc;
  if (l) {
    l->refs++;
  } else if (!(l = calloc(1, sizeof *l))) {
    snprintf(err, err_size, "out of memory");
    *status = CNNB_ENOMEM;
  } else if ((rc = mnist_load(paths, &l->set, err, err_size)) != IDX_OK) {
    free(l);
    l = NULL;
    *status = status_of(rc);
  } else {
    snprintf(l->images_path, sizeof l->images_path, "%s", paths->images);
    l->refs = 1;
    l->next = loaded_list;
    loaded_list = l;
  }
  pthread_mutex_unlock(&loaded_lock);
  return l;
}

static void release(loaded *l) {
  if (!l) return;
  pthread_mutex_lock(&loaded_lock);
  if (--l->refs == 0) {
    loaded **p = &loaded_list;
    while (*p != l) p = &(*p)->next;
    *p = l->next;
    mnist_set_free(&l->set);
    free(l);
  }
  pthread_mutex_unlock(&loaded_lock);
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
  cnnb_ctx *ctx;
  loaded *data;
  mnist_order order;
  augment_mode augment; /* AUGMENT_NONE for evaluation */
  int32_t batch, height, width;
  size_t pixels; /* height * width: one example's bytes */
  uint64_t seed;
  uint8_t *image; /* one rendered example (the float path) */
} mnist;

/* cfg->dataset is ABI 1.3: a config too short to carry it names no dataset. */
static uint32_t config_dataset(const cnnb_datasource_config *cfg) {
  return cfg->struct_size >= offsetof(cnnb_datasource_config, dataset) + sizeof cfg->dataset
             ? cfg->dataset
             : 0;
}

static const char *dataset_name(uint32_t kind) {
  const cnnb_dataset_info *d = cnnb_dataset_lookup(kind);
  return d ? d->name : "(none)";
}

/* What the run asks of the data that an MNIST-layout set cannot give, as an error in ctx. */
static cnnb_status check_config(cnnb_ctx *ctx, const cnnb_datasource_config *cfg) {
  if (config_dataset(cfg) != CNNB_DATASET_MNIST)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "mnist: reads MNIST-layout IDX files only, and the run "
                      "names --data_name=%s: give --data_name=mnist",
                      dataset_name(config_dataset(cfg)));
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
  if (cfg->batch_size < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "mnist: batch size %d; must be at least 1",
                      cfg->batch_size);
  if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
    return cnnb_error(ctx, CNNB_EINVAL, "mnist: shard %d of %d does not exist", cfg->rank,
                      cfg->world_size);
  return CNNB_OK;
}

static void mnist_destroy(void *datasource) {
  mnist *s = datasource;
  if (!s) return;
  mnist_order_free(&s->order);
  release(s->data);
  free(s->image);
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
  s->ctx = ctx;
  s->augment = cfg->training ? (augment_mode)augment : AUGMENT_NONE;
  s->batch = cfg->batch_size;
  s->height = cfg->height;
  s->width = cfg->width;
  s->pixels = (size_t)cfg->height * (size_t)cfg->width;
  s->seed = cfg->seed;
  if (!(s->image = malloc(s->pixels))) {
    free(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "mnist: out of memory");
  }
  if (!(s->data = acquire(&paths, &st, err, sizeof err))) {
    mnist_destroy(s);
    return cnnb_error(ctx, st, "mnist: %s", err);
  }
  const mnist_set *set = &s->data->set;
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
  const int64_t count = set->count; /* set goes with s on the error paths below */
  if (count < cfg->world_size) {
    mnist_destroy(s);
    return cnnb_error(ctx, CNNB_EINVAL,
                      "mnist: %s holds %lld examples, fewer than the %d shards "
                      "(replicas x processes) that would share them",
                      paths.images, (long long)count, cfg->world_size);
  }
  if (mnist_order_init(&s->order, count, cfg->rank, cfg->world_size, cfg->seed,
                       cfg->training != 0) != 0) {
    mnist_destroy(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "mnist: out of memory for the order of %lld examples",
                      (long long)count);
  }
  /* An epoch is what the files hold; say so when that is not MNIST's own size (EMNIST, a
   * subset), since epochs and schedules count it. */
  const cnnb_dataset_info *info = cnnb_dataset_lookup(CNNB_DATASET_MNIST);
  int64_t expected = info ? (cfg->training ? info->train_examples : info->eval_examples) : 0;
  if (cfg->rank == 0 && expected > 0 && set->count != expected)
    cnnb_log(ctx, CNNB_LOG_WARN,
             "%s holds %lld %s examples where MNIST has %lld: an epoch here is %lld examples",
             paths.images, (long long)set->count, cfg->training ? "training" : "test",
             (long long)expected, (long long)set->count);
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

/* The next example of this shard, rendered into out ([height][width]); its label into
 * *label. */
static void next_example(mnist *s, uint8_t *out, int32_t *label) {
  int64_t epoch;
  int64_t index = mnist_order_next(&s->order, &epoch);
  const mnist_set *set = &s->data->set;
  mnist_augment aug = mnist_order_augment(s->seed, epoch, index);
  if (s->augment != AUGMENT_CROP_FLIP) aug.flip = 0;
  mnist_image_render(set->pixels + (size_t)index * MNIST_PIXELS,
                     s->augment != AUGMENT_NONE ? &aug : NULL, s->height, s->width, out);
  *label = set->labels[index];
}

static cnnb_status mnist_next_batch(void *datasource, float *images, int32_t *labels) {
  mnist *s = datasource;
  for (int32_t b = 0; b < s->batch; b++) {
    next_example(s, s->image, &labels[b]);
    mnist_image_normalize(s->image, s->pixels, images + (size_t)b * s->pixels);
  }
  return CNNB_OK;
}

static cnnb_status mnist_next_batch_uint8(void *datasource, uint8_t *images, int32_t *labels) {
  mnist *s = datasource;
  for (int32_t b = 0; b < s->batch; b++)
    next_example(s, images + (size_t)b * s->pixels, &labels[b]);
  return CNNB_OK;
}

static cnnb_status mnist_normalization(void *datasource, float *scale, float *offset) {
  (void)datasource;
  scale[0] = MNIST_SCALE; /* one channel */
  offset[0] = MNIST_OFFSET;
  return CNNB_OK;
}

static int64_t mnist_examples_per_epoch(void *datasource) {
  return ((const mnist *)datasource)->data->set.count;
}

static int32_t mnist_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (config_dataset(cfg) != CNNB_DATASET_MNIST) {
    cnnb_error(ctx, CNNB_EINVAL, "reads --data_name=mnist only");
    return 0;
  }
  mnist_paths paths;
  char err[2048];
  if (mnist_find_files(cfg->data_dir, cfg->training, &paths, err, sizeof err) != 0) {
    cnnb_error(ctx, CNNB_EINVAL, "%s", err);
    return 0;
  }
  return PROBE_PRIORITY;
}

static const cnnb_datasource_uint8 uint8_batches = {
    .struct_size = sizeof(cnnb_datasource_uint8),
    .normalization = mnist_normalization,
    .next_batch_uint8 = mnist_next_batch_uint8,
};

/* A resumed run (CNNB_EXT_DATASOURCE_SKIP): the order goes on where the run stopped, and
 * each example keeps the crop and flip of its (epoch, example). */
static cnnb_status mnist_skip_batches(void *datasource, int64_t batches) {
  mnist *s = datasource;
  if (batches < 0 || batches > INT64_MAX / s->batch)
    return cnnb_error(s->ctx, CNNB_EINVAL, "mnist: cannot skip %lld batches of %d",
                      (long long)batches, (int)s->batch);
  mnist_order_skip(&s->order, batches * s->batch);
  if (batches > 0)
    cnnb_log(s->ctx, CNNB_LOG_INFO,
             "the stream continues after %lld batches (%lld examples), in "
             "epoch %lld (counted from 0)",
             (long long)batches, (long long)(batches * s->batch), (long long)s->order.epoch);
  return CNNB_OK;
}

static const cnnb_datasource_skip skip = {
    .struct_size = sizeof(cnnb_datasource_skip),
    .skip_batches = mnist_skip_batches,
};

static const void *mnist_extension(const char *id) {
  if (strcmp(id, CNNB_EXT_DATASOURCE_SKIP) == 0) return &skip;
  return strcmp(id, CNNB_EXT_DATASOURCE_UINT8) == 0 ? &uint8_batches : NULL;
}

static const void *mnist_instance_extension(void *datasource, const char *id) {
  (void)datasource;
  return mnist_extension(id);
}

static const cnnb_datasource_vtable vtable = {
    .struct_size = sizeof(cnnb_datasource_vtable),
    .create = mnist_create,
    .destroy = mnist_destroy,
    .next_batch = mnist_next_batch,
    .examples_per_epoch = mnist_examples_per_epoch,
    .probe = mnist_probe,
    .get_extension = mnist_instance_extension,
};

static const char *const offers[] = {"mnist", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DATASOURCE, "mnist", "0.1.0",
                     "MNIST-layout IDX files from --data_dir, plain or .gz (MNIST, "
                     "Fashion-MNIST, KMNIST)"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
    .get_extension = mnist_extension,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

/* cifar10.c — the `cifar10` datasource: CIFAR-10's binary batches from --data_dir
 * (cifar_files.h), read into memory once and shared read-only by every instance of the
 * process that reads the same split, served in per-epoch orders sharded across replicas
 * and ranks (cifar_order.h), preprocessed as tf_cnn_benchmarks does (cifar_image.h).
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
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

#include "cifar_files.h"
#include "cifar_image.h"
#include "cifar_order.h"

#define DISTORTIONS_FLAG "distortions"

enum { PROBE_PRIORITY = 10 };

/* ---- splits loaded once per process ------------------------------------------------ */

/* create and destroy run on the main thread (datasource.h), but a process may hold
 * several runs' hosts (tests), so the list is locked anyway: it costs nothing. */
typedef struct loaded {
  struct loaded *next;
  char dir[4096];
  int training;
  int refs;
  cifar_set set;
} loaded;

static pthread_mutex_t loaded_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *loaded_list;

/* The split in dir, loaded by the first instance that asks; NULL with *status and err. */
static loaded *acquire(const char *dir, int training, cnnb_status *status, char *err,
                       size_t err_size) {
  pthread_mutex_lock(&loaded_lock);
  loaded *l = loaded_list;
  while (l && (l->training != training || strcmp(l->dir, dir) != 0)) l = l->next;
  int rc = 0;
  if (l) {
    l->refs++;
  } else if (!(l = calloc(1, sizeof *l))) {
    snprintf(err, err_size, "out of memory");
    *status = CNNB_ENOMEM;
  } else if ((rc = cifar_load(dir, training, &l->set, err, err_size)) != 0) {
    free(l);
    l = NULL;
    *status = rc == CIFAR_NO_MEMORY ? CNNB_ENOMEM : rc == CIFAR_IO_ERROR ? CNNB_EIO : CNNB_EDATA;
  } else {
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    l->training = training;
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
    cifar_set_free(&l->set);
    free(l);
  }
  pthread_mutex_unlock(&loaded_lock);
}

/* ---- the instance -------------------------------------------------------------------- */

typedef struct cifar10 {
  cnnb_ctx *ctx;
  loaded *data;
  cifar_order order;
  int training;
  int augment; /* training under --distortions: pad, crop and flip */
  int32_t batch;
  uint64_t seed;
  uint8_t image[CIFAR_PIXELS]; /* one rendered example, HWC (the float path) */
} cifar10;

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

/* What the run asks of the data that CIFAR-10 cannot give, as an error in ctx. */
static cnnb_status check_config(cnnb_ctx *ctx, const cnnb_datasource_config *cfg) {
  if (config_dataset(cfg) != CNNB_DATASET_CIFAR10)
    return cnnb_error(ctx, CNNB_EINVAL,
                      "cifar10: reads CIFAR-10 only, and the run names "
                      "--data_name=%s: give --data_name=cifar10",
                      dataset_name(config_dataset(cfg)));
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
  if (cfg->batch_size < 1)
    return cnnb_error(ctx, CNNB_EINVAL, "cifar10: batch size %d; must be at least 1",
                      cfg->batch_size);
  if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
    return cnnb_error(ctx, CNNB_EINVAL, "cifar10: shard %d of %d does not exist", cfg->rank,
                      cfg->world_size);
  return CNNB_OK;
}

static void cifar10_destroy(void *datasource) {
  cifar10 *s = datasource;
  if (!s) return;
  cifar_order_free(&s->order);
  release(s->data);
  free(s);
}

static cnnb_status cifar10_create(cnnb_ctx *ctx, const char *name,
                                  const cnnb_datasource_config *cfg, void **out) {
  (void)name;
  *out = NULL;
  cnnb_status st = check_config(ctx, cfg);
  if (st != CNNB_OK) return st;
  char dir[4096], err[2048];
  if (cifar_find_dir(cfg->data_dir, cfg->training, dir, sizeof dir, err, sizeof err) != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "cifar10: %s", err);
  cifar10 *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "cifar10: out of memory");
  s->ctx = ctx;
  s->training = cfg->training != 0;
  s->augment = s->training && cnnb_flag_bool(ctx, DISTORTIONS_FLAG);
  s->batch = cfg->batch_size;
  s->seed = cfg->seed;
  if (!(s->data = acquire(dir, s->training, &st, err, sizeof err))) {
    free(s);
    return cnnb_error(ctx, st, "cifar10: %s", err);
  }
  int64_t count = s->data->set.count;
  if (count < cfg->world_size) {
    cifar10_destroy(s);
    return cnnb_error(ctx, CNNB_EINVAL,
                      "cifar10: %s holds %lld examples, fewer than the %d "
                      "shards (replicas x processes) that would share them",
                      dir, (long long)count, cfg->world_size);
  }
  if (cifar_order_init(&s->order, count, cfg->rank, cfg->world_size, cfg->seed, s->training) != 0) {
    cifar10_destroy(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "cifar10: out of memory for the order of %lld examples",
                      (long long)count);
  }
  /* An epoch is what the files hold; say so when that is not the dataset's own size (a
   * subset, or files from elsewhere), since epochs and schedules count it. */
  const cnnb_dataset_info *info = cnnb_dataset_lookup(CNNB_DATASET_CIFAR10);
  int64_t expected = info ? (s->training ? info->train_examples : info->eval_examples) : 0;
  if (cfg->rank == 0 && expected > 0 && count != expected)
    cnnb_log(ctx, CNNB_LOG_WARN,
             "%s holds %lld %s examples where CIFAR-10 has %lld: an epoch here is %lld examples",
             dir, (long long)count, s->training ? "training" : "test", (long long)expected,
             (long long)count);
  cnnb_log(ctx, CNNB_LOG_DEBUG, "shard %d of %d: %lld %s examples from %s", cfg->rank,
           cfg->world_size, (long long)count, s->training ? "training" : "test", dir);
  *out = s;
  return CNNB_OK;
}

/* The next example of this shard, rendered HWC into out; its label into *label. */
static void next_example(cifar10 *s, uint8_t *out, int32_t *label) {
  int64_t epoch;
  int64_t index = cifar_order_next(&s->order, &epoch);
  const cifar_set *set = &s->data->set;
  cifar_augment aug = cifar_order_augment(s->seed, epoch, index);
  cifar_image_render(set->pixels + (size_t)index * CIFAR_PIXELS, s->augment ? &aug : NULL, out);
  *label = set->labels[index];
}

static cnnb_status cifar10_next_batch(void *datasource, float *images, int32_t *labels) {
  cifar10 *s = datasource;
  for (int32_t b = 0; b < s->batch; b++) {
    next_example(s, s->image, &labels[b]);
    cifar_image_normalize(s->image, images + (size_t)b * CIFAR_PIXELS);
  }
  return CNNB_OK;
}

static cnnb_status cifar10_next_batch_uint8(void *datasource, uint8_t *images, int32_t *labels) {
  cifar10 *s = datasource;
  for (int32_t b = 0; b < s->batch; b++)
    next_example(s, images + (size_t)b * CIFAR_PIXELS, &labels[b]);
  return CNNB_OK;
}

static cnnb_status cifar10_normalization(void *datasource, float *scale, float *offset) {
  (void)datasource;
  for (int c = 0; c < CIFAR_CHANNELS; c++) {
    scale[c] = CIFAR_SCALE;
    offset[c] = CIFAR_OFFSET;
  }
  return CNNB_OK;
}

static int64_t cifar10_examples_per_epoch(void *datasource) {
  return ((const cifar10 *)datasource)->data->set.count;
}

static int32_t cifar10_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (config_dataset(cfg) != CNNB_DATASET_CIFAR10) {
    cnnb_error(ctx, CNNB_EINVAL, "reads --data_name=cifar10 only");
    return 0;
  }
  char dir[4096], err[2048];
  if (cifar_find_dir(cfg->data_dir, cfg->training, dir, sizeof dir, err, sizeof err) != 0) {
    cnnb_error(ctx, CNNB_EINVAL, "%s", err);
    return 0;
  }
  return PROBE_PRIORITY;
}

static const cnnb_datasource_uint8 uint8_batches = {
    .struct_size = sizeof(cnnb_datasource_uint8),
    .normalization = cifar10_normalization,
    .next_batch_uint8 = cifar10_next_batch_uint8,
};

/* A resumed run (CNNB_EXT_DATASOURCE_SKIP): the order goes on where the run stopped, and
 * each example keeps the crop and flip of its (epoch, example). */
static cnnb_status cifar10_skip_batches(void *datasource, int64_t batches) {
  cifar10 *s = datasource;
  if (batches < 0 || batches > INT64_MAX / s->batch)
    return cnnb_error(s->ctx, CNNB_EINVAL, "cifar10: cannot skip %lld batches of %d",
                      (long long)batches, (int)s->batch);
  cifar_order_skip(&s->order, batches * s->batch);
  return CNNB_OK;
}

static const cnnb_datasource_skip skip = {
    .struct_size = sizeof(cnnb_datasource_skip),
    .skip_batches = cifar10_skip_batches,
};

static const void *cifar10_extension(const char *id) {
  if (strcmp(id, CNNB_EXT_DATASOURCE_SKIP) == 0) return &skip;
  return strcmp(id, CNNB_EXT_DATASOURCE_UINT8) == 0 ? &uint8_batches : NULL;
}

static const void *cifar10_instance_extension(void *datasource, const char *id) {
  (void)datasource;
  return cifar10_extension(id);
}

static const cnnb_datasource_vtable vtable = {
    .struct_size = sizeof(cnnb_datasource_vtable),
    .create = cifar10_create,
    .destroy = cifar10_destroy,
    .next_batch = cifar10_next_batch,
    .examples_per_epoch = cifar10_examples_per_epoch,
    .probe = cifar10_probe,
    .get_extension = cifar10_instance_extension,
};

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
    .get_extension = cifar10_extension,
    .register_flags = register_flags,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

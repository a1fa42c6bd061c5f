/* synthetic — a datasource of random images and labels, generated once from a fixed seed
 * and returned for every step, so the input pipeline costs only a copy and the numbers
 * measure the model.
 *
 * Unlike tf_cnn_benchmarks, whose synthetic labels change every step (its loss stays
 * flat), the labels are fixed: the network can fit them, so a falling loss shows that
 * training really trains. Each shard draws its own batch (seed + shard).
 *
 * It imitates the dataset the run names (--data_name): its epoch is that dataset's
 * training set (or evaluation split), so runs and schedules counted in epochs mean what
 * they would on the real data. It is the datasource picked when there is no --data_dir. */
#include <stdlib.h>
#include <string.h>
#include <cnnb/cnnb.h>

typedef struct synthetic {
  float *images;   /* [N, C, H, W] in [-1, 1], as tf_cnn_benchmarks' preprocessing outputs */
  int32_t *labels; /* [N] */
  size_t image_count;
  int32_t batch;
  int64_t examples_per_epoch; /* the imitated dataset's; 0 when the host names none */
} synthetic;

/* splitmix64: small, seedable, and the same on every platform. */
static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float uniform01(uint64_t *state) {
  return (float)((next_random(state) >> 40) * (1.0 / 16777216.0));
}

static cnnb_status synthetic_create(cnnb_ctx *ctx, const char *name,
                                    const cnnb_datasource_config *cfg, void **out) {
  if (cfg->batch_size <= 0 || cfg->channels <= 0 || cfg->height <= 0 || cfg->width <= 0)
    return cnnb_error(ctx, CNNB_EINVAL, "synthetic: batch %d of %dx%dx%d images is empty",
                      cfg->batch_size, cfg->channels, cfg->height, cfg->width);
  if (cfg->num_classes < 2)
    return cnnb_error(ctx, CNNB_EINVAL, "synthetic: needs at least 2 classes, got %d",
                      cfg->num_classes);
  synthetic *s = calloc(1, sizeof *s);
  if (!s) return cnnb_error(ctx, CNNB_ENOMEM, "synthetic: out of memory");
  s->batch = cfg->batch_size;
  s->image_count = (size_t)cfg->batch_size * cfg->channels * cfg->height * cfg->width;
  s->images = malloc(s->image_count * sizeof *s->images);
  s->labels = malloc((size_t)cfg->batch_size * sizeof *s->labels);
  if (!s->images || !s->labels) {
    size_t count = s->image_count;
    free(s->images);
    free(s->labels);
    free(s);
    return cnnb_error(ctx, CNNB_ENOMEM, "synthetic: out of memory for a batch of %zu floats",
                      count);
  }
  /* cfg->dataset and cnnb_dataset_lookup() are ABI 1.3: this plugin needs a 1.3 host. */
  const cnnb_dataset_info *dataset = cnnb_dataset_lookup(cfg->dataset);
  if (dataset)
    s->examples_per_epoch = cfg->training ? dataset->train_examples : dataset->eval_examples;
  uint64_t state = cfg->seed * 1000003ull + (uint64_t)cfg->rank;
  for (size_t i = 0; i < s->image_count; i++) s->images[i] = 2.0f * uniform01(&state) - 1.0f;
  /* tf_cnn_benchmarks draws labels in [0, num_classes - 1). */
  for (int32_t i = 0; i < cfg->batch_size; i++)
    s->labels[i] = (int32_t)(next_random(&state) % (uint64_t)(cfg->num_classes - 1));
  *out = s;
  return CNNB_OK;
}

static void synthetic_destroy(void *datasource) {
  synthetic *s = datasource;
  if (!s) return;
  free(s->images);
  free(s->labels);
  free(s);
}

static cnnb_status synthetic_next_batch(void *datasource, float *images, int32_t *labels) {
  const synthetic *s = datasource;
  memcpy(images, s->images, s->image_count * sizeof *images);
  memcpy(labels, s->labels, (size_t)s->batch * sizeof *labels);
  return CNNB_OK;
}

static int64_t synthetic_examples_per_epoch(void *datasource) {
  return ((const synthetic *)datasource)->examples_per_epoch;
}

/* Any run without data on disk: priority 1, so a datasource that reads real data wins
 * whenever it can, and this one never claims a --data_dir. */
static int32_t synthetic_probe(cnnb_ctx *ctx, const char *name, const cnnb_datasource_config *cfg) {
  (void)name;
  if (cfg->data_dir && cfg->data_dir[0]) {
    cnnb_error(ctx, CNNB_EINVAL, "generates its images and reads no --data_dir");
    return 0;
  }
  return 1;
}

/* A resumed run (CNNB_EXT_DATASOURCE_SKIP): every batch is the same, so the stream is
 * already where it would be; answering says so. */
static cnnb_status synthetic_skip_batches(void *datasource, int64_t batches) {
  (void)datasource;
  return batches < 0 ? CNNB_EINVAL : CNNB_OK;
}

static const cnnb_datasource_skip skip = {
    .struct_size = sizeof(cnnb_datasource_skip),
    .skip_batches = synthetic_skip_batches,
};

static const void *synthetic_extension(const char *id) {
  static const int32_t yes = 1;
  if (strcmp(id, CNNB_EXT_DATASOURCE_SKIP) == 0) return &skip;
  /* next_batch copies the one batch drawn at create. */
  if (strcmp(id, CNNB_EXT_DATASOURCE_CONSTANT) == 0) return &yes;
  return NULL;
}

static const cnnb_datasource_vtable vtable = {
    .struct_size = sizeof(cnnb_datasource_vtable),
    .create = synthetic_create,
    .destroy = synthetic_destroy,
    .next_batch = synthetic_next_batch,
    .examples_per_epoch = synthetic_examples_per_epoch,
    .probe = synthetic_probe,
};

static const char *const offers[] = {"synthetic", NULL};

static const cnnb_plugin descriptor = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_DATASOURCE, "synthetic", "0.1.0",
                     "random images and fixed labels from a seed (no I/O)"),
    .offers = offers,
    .vtable = &vtable,
    .get_extension = synthetic_extension,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &descriptor;
}

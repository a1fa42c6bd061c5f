/* datasource_epoch.c — reads batches straight from a datasource plugin, one instance per
 * shard, and prints one line per example: "shard label id", where id is what
 * make_image_folder painted into the image (red and green levels). The sharding and
 * determinism tests compare these lines. Flags are cnnbench's (the plugin's included)
 * plus --shards, --batches and --train:
 *   datasource_epoch --datasource=imagenet --data_dir=D --batch_size=4 --image_size=32
 *                    --num_classes=5 --shards=2 --batches=10 [--train]
 * --skip_batches=N first asks each instance to continue as after N batches
 * (CNNB_EXT_DATASOURCE_SKIP, what a resumed run does); --checksum adds a fourth column,
 * a hash of the example's pixels, so that augmentations compare exactly too;
 * --read_bytes prints "read_bytes N" on stderr at the end: the bytes the process read
 * through read(2) and its kind (/proc/self/io's rchar), to show what a cache saved.
 * Never installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags/flags.h"
#include "loader/loader.h"
#include "config/core_flags.h"

static int fail(const char *what) {
  fprintf(stderr, "datasource_epoch: %s\n", what);
  return 1;
}

/* FNV-1a over the example's floats: equal pixels, equal hash. */
static uint64_t checksum(const float *values, size_t count) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char *bytes = (const unsigned char *)values;
  for (size_t i = 0; i < count * sizeof *values; i++) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

/* The instance's CNNB_EXT_DATASOURCE_SKIP, else the plugin's; NULL when neither has it. */
static const cnnb_datasource_skip *skip_extension(const cnnb_plugin *plugin, void *ds) {
  const cnnb_datasource_vtable *vt = plugin->vtable;
  const cnnb_datasource_skip *skip = NULL;
  if (vt->get_extension) skip = vt->get_extension(ds, CNNB_EXT_DATASOURCE_SKIP);
  if (!skip && plugin->get_extension) skip = plugin->get_extension(CNNB_EXT_DATASOURCE_SKIP);
  return skip;
}

int main(int argc, char **argv) {
  char err[4096];
  cnnb_flags *flags = cnnb_flags_create();
  if (!flags || cnnb_flags_declare_core(flags) != CNNB_OK) return fail("flags");
  cnnb_flag_registry *own = cnnb_flags_registry(flags, "datasource_epoch");
  if (cnnb_flag_declare(own, "shards", CNNB_FLAG_INT, "1", "instances, one per shard") != CNNB_OK ||
      cnnb_flag_declare(own, "batches", CNNB_FLAG_INT, "1", "batches per instance") != CNNB_OK ||
      cnnb_flag_declare(own, "train", CNNB_FLAG_BOOL, "false", "the training split") != CNNB_OK ||
      cnnb_flag_declare(own, "skip_batches", CNNB_FLAG_INT, "0",
                        "batches each instance skips before the first") != CNNB_OK ||
      cnnb_flag_declare(own, "checksum", CNNB_FLAG_BOOL, "false",
                        "print a hash of each example's pixels") != CNNB_OK ||
      cnnb_flag_declare(own, "read_bytes", CNNB_FLAG_BOOL, "false",
                        "print the bytes read (/proc/self/io's rchar) at the end") != CNNB_OK)
    return fail("flags");
  cnnb_ctx *ctx = cnnb_ctx_create("datasource_epoch", flags);
  cnnb_loader *loader = cnnb_loader_create(ctx);
  const char *install = getenv("CNNB_PLUGIN_DIR");
  if (!loader || (install && cnnb_loader_set_install_dir(loader, install) != CNNB_OK) ||
      cnnb_loader_discover(loader, NULL, err, sizeof err) != CNNB_OK)
    return fail(err);
  cnnb_loader_register_flags(loader, flags);
  if (cnnb_flags_parse(flags, argc, argv, err, sizeof err) != CNNB_OK) return fail(err);
  const cnnb_plugin *plugin = NULL;
  if (cnnb_loader_find(loader, CNNB_KIND_DATASOURCE, cnnb_flags_string(flags, "datasource"),
                       &plugin, NULL, err, sizeof err) != CNNB_OK)
    return fail(err);
  const cnnb_datasource_vtable *vt = plugin->vtable;
  int32_t shards = (int32_t)cnnb_flags_int(flags, "shards");
  int64_t batches = cnnb_flags_int(flags, "batches");
  int64_t skip_batches = cnnb_flags_int(flags, "skip_batches");
  bool print_checksum = cnnb_flags_bool(flags, "checksum");
  int32_t size = (int32_t)cnnb_flags_int(flags, "image_size");
  /* --data_name's default is "" (the run guesses it from --data_dir); here imagenet's. */
  const char *data_name = cnnb_flags_string(flags, "data_name");
  const cnnb_dataset_info *dataset = cnnb_dataset_find(*data_name ? data_name : "imagenet");
  if (!dataset) return fail("unknown --data_name");
  cnnb_datasource_config cfg = {
      .struct_size = sizeof cfg,
      .batch_size = (int32_t)cnnb_flags_int(flags, "batch_size"),
      .channels = 3,
      .height = size,
      .width = size,
      .num_classes = (int32_t)cnnb_flags_int(flags, "num_classes"),
      .world_size = shards,
      .training = cnnb_flags_bool(flags, "train"),
      .seed = (uint64_t)cnnb_flags_int(flags, "seed"),
      .data_dir = cnnb_flags_string(flags, "data_dir"),
      .dataset = dataset->kind,
      .local_replicas = (int32_t)cnnb_flags_int(flags, "num_gpus"),
      .device_threads = (int32_t)cnnb_flags_int(flags, "num_intra_threads"),
      .device_name = cnnb_flags_string(flags, "device")};
  size_t values = (size_t)cfg.batch_size * 3 * (size_t)size * (size_t)size;
  float *images = malloc(values * sizeof *images);
  int32_t *labels = malloc((size_t)cfg.batch_size * sizeof *labels);
  int rc = 0;
  for (int32_t shard = 0; rc == 0 && shard < shards; shard++) {
    cfg.rank = shard;
    void *ds = NULL;
    if (vt->create(ctx, "imagenet", &cfg, &ds) != CNNB_OK) {
      rc = fail(cnnb_error_message(ctx));
      break;
    }
    if (skip_batches > 0) {
      const cnnb_datasource_skip *skip = skip_extension(plugin, ds);
      if (!skip) rc = fail("the datasource has no " CNNB_EXT_DATASOURCE_SKIP);
      else if (skip->skip_batches(ds, skip_batches) != CNNB_OK) rc = fail(cnnb_error_message(ctx));
    }
    for (int64_t b = 0; rc == 0 && b < batches; b++) {
      if (vt->next_batch(ds, images, labels) != CNNB_OK) {
        rc = fail(cnnb_error_message(ctx));
        break;
      }
      size_t plane = (size_t)size * (size_t)size;
      for (int32_t i = 0; i < cfg.batch_size; i++) {
        const float *image = images + (size_t)i * 3 * plane;
        double mean[2] = {0, 0};
        for (int c = 0; c < 2; c++) {
          for (size_t p = 0; p < plane; p++) mean[c] += image[c * plane + p];
          /* [-1, 1] back to a pixel value, then to the 16-level code. */
          mean[c] = ((mean[c] / (double)plane + 1.0) * 127.5 - 8.0) / 16.0;
        }
        printf("%d %d %ld", (int)shard, (int)labels[i], lround(mean[0]) + 16 * lround(mean[1]));
        if (print_checksum) printf(" %016llx", (unsigned long long)checksum(image, 3 * plane));
        printf("\n");
      }
    }
    if (vt->get_extension) {
      const cnnb_datasource_stats *stats = vt->get_extension(ds, CNNB_EXT_DATASOURCE_STATS);
      if (stats) printf("skipped %d %lld\n", (int)shard, (long long)stats->skipped_examples(ds));
    }
    vt->destroy(ds);
  }
  free(images);
  free(labels);
  if (cnnb_flags_bool(flags, "read_bytes")) {
    FILE *io = fopen("/proc/self/io", "r");
    long long rchar = -1;
    char line[128];
    while (io && fgets(line, sizeof line, io))
      if (sscanf(line, "rchar: %lld", &rchar) == 1) break;
    if (io) fclose(io);
    fprintf(stderr, "read_bytes %lld\n", rchar);
  }
  cnnb_loader_destroy(loader);
  cnnb_ctx_destroy(ctx);
  cnnb_flags_destroy(flags);
  return rc;
}

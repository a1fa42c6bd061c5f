/* datasource_epoch.c — reads batches straight from a datasource plugin, one instance per
 * shard, and prints one line per example: "shard label id", where id is what
 * make_image_folder painted into the image (red and green levels). The sharding and
 * determinism tests compare these lines. Flags are cnnbench's (the plugin's included)
 * plus --shards, --batches and --train:
 *   datasource_epoch --datasource=imagenet --data_dir=D --batch_size=4 --image_size=32
 *                    --num_classes=5 --shards=2 --batches=10 [--train]
 * Never installed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "host.h"
#include "loader.h"

static int fail(const char *what) {
  fprintf(stderr, "datasource_epoch: %s\n", what);
  return 1;
}

int main(int argc, char **argv) {
  char err[4096];
  cnnb_flags *flags = cnnb_flags_create();
  if (!flags || cnnb_flags_declare_core(flags) != CNNB_OK) return fail("flags");
  cnnb_flag_registry *own = cnnb_flags_registry(flags, "datasource_epoch");
  if (cnnb_flag_declare(own, "shards", CNNB_FLAG_INT, "1", "instances, one per shard") != CNNB_OK ||
      cnnb_flag_declare(own, "batches", CNNB_FLAG_INT, "1", "batches per instance") != CNNB_OK ||
      cnnb_flag_declare(own, "train", CNNB_FLAG_BOOL, "false", "the training split") != CNNB_OK)
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
  int32_t size = (int32_t)cnnb_flags_int(flags, "image_size");
  cnnb_datasource_config cfg = {
      .struct_size = sizeof cfg, .batch_size = (int32_t)cnnb_flags_int(flags, "batch_size"),
      .channels = 3, .height = size, .width = size,
      .num_classes = (int32_t)cnnb_flags_int(flags, "num_classes"), .world_size = shards,
      .training = cnnb_flags_bool(flags, "train"), .seed = (uint64_t)cnnb_flags_int(flags, "seed"),
      .data_dir = cnnb_flags_string(flags, "data_dir"),
      .dataset = cnnb_dataset_find(cnnb_flags_string(flags, "data_name"))->kind};
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
        printf("%d %d %ld\n", (int)shard, (int)labels[i], lround(mean[0]) + 16 * lround(mean[1]));
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
  cnnb_loader_destroy(loader);
  cnnb_ctx_destroy(ctx);
  cnnb_flags_destroy(flags);
  return rc;
}

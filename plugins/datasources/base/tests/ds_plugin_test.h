/* ds_plugin_test.h — what the unit tests of the labelled-image datasources (cifar10,
 * mnist) share: their plugin loaded as cnnbench loads it, a config of their shape, an
 * instance made or refused, its uint8 extension, their temporary dataset folders removed,
 * and the Check suite run. Compiled into each test (cnnb_plugin_test's SOURCES). */
#ifndef DS_PLUGIN_TEST_H
#define DS_PLUGIN_TEST_H

#include <check.h>
#include <stdint.h>
#include <cnnb/cnnb.h>

#include "flags/flags.h"
#include "loader/loader.h"

typedef struct ds_plugin_test {
  const char *name;  /* the datasource's, as --datasource names it */
  cnnb_flags *flags; /* the host's flag table, with every plugin's flags declared */
  cnnb_ctx *ctx;     /* "test", reading those flags */
  cnnb_loader *loader;
  const cnnb_plugin *plugin;
  const cnnb_datasource_vtable *vt;
} ds_plugin_test;

/* Loads datasource `name` from $CNNB_PLUGIN_DIR as cnnbench does, its flags declared;
 * exits 77 (skipped, saying why) when it is not built, 1 when its flags cannot be. */
void ds_plugin_test_load(ds_plugin_test *t, const char *name);
void ds_plugin_test_unload(ds_plugin_test *t);

/* Sets one of the plugin's flags, as --flag=value would (a Check assertion). */
void ds_plugin_test_set_flag(ds_plugin_test *t, const char *flag, const char *value);

/* The host's kind for dataset `name`, which a loaded datasource describes (asserted). */
uint32_t ds_plugin_test_kind(const char *name);

/* A config of a square side x side image of `channels`, 10 classes, for the shard
 * rank of world, with dataset kind `dataset`. */
cnnb_datasource_config ds_plugin_test_config(int32_t channels, int32_t side, uint32_t dataset,
                                             const char *dir, int training, int batch, int rank,
                                             int world, uint64_t seed);

/* An instance of cfg (a Check assertion that it is made), or the refusal's message
 * after asserting create returned `want` and no instance. */
void *ds_plugin_test_create(ds_plugin_test *t, const cnnb_datasource_config *cfg);
const char *ds_plugin_test_create_fails(ds_plugin_test *t, const cnnb_datasource_config *cfg,
                                        cnnb_status want);

/* The instance's uint8 extension, asserted present and of a known size. */
const cnnb_datasource_uint8 *ds_plugin_test_uint8(const ds_plugin_test *t, void *ds);

/* How a test's dataset tells its images apart: the id an image's bytes hold (uint8 HWC;
 * the test labels image id with id % 10). */
typedef int (*ds_plugin_test_image_id)(const uint8_t *image);

/* Reads `batches` uint8 batches of `batch` images of `pixels` bytes from instance ds,
 * counting each image's id in seen[count] and asserting it in range and its label. */
void ds_plugin_test_read_ids(const ds_plugin_test *t, void *ds, int batches, int batch,
                             size_t pixels, ds_plugin_test_image_id id_of, int count, int *seen);

/* Rank 0 and 1 of 2 (c0, c1: batch 4) of a 40-image training split read every image once in
 * each of two epochs, and shard 0's second epoch is another permutation than its first. */
void ds_plugin_test_two_shards_cover_each_epoch(ds_plugin_test *t, const cnnb_datasource_config *c0,
                                                const cnnb_datasource_config *c1, size_t pixels,
                                                ds_plugin_test_image_id id_of);

/* The probe of c as an evaluation config (its test split there) claims it; with --data_dir
 * `missing` (no such path), or empty, it declines, giving a reason that holds
 * `missing_says`, `empty_says`. */
void ds_plugin_test_probe_needs_the_dir(ds_plugin_test *t, cnnb_datasource_config c,
                                        const char *missing, const char *missing_says,
                                        const char *empty_says);

/* rm -rf of a test's temporary folder, and free(dir). */
void ds_plugin_test_remove_dir(char *dir);

/* Runs suite s (Check's normal output), then unloads t: the exit status for main. */
int ds_plugin_test_run(ds_plugin_test *t, Suite *s);

#endif

/* ds_plugin_test.c — the datasource unit tests' shared harness (ds_plugin_test.h). */
#include "ds_plugin_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ds_plugin_test_load(ds_plugin_test *t, const char *name) {
  *t = (ds_plugin_test){.name = name};
  t->flags = cnnb_flags_create();
  t->ctx = t->flags ? cnnb_ctx_create("test", t->flags) : NULL;
  t->loader = t->ctx ? cnnb_loader_create(t->ctx) : NULL;
  if (!t->loader) {
    printf("FAIL: out of memory loading the %s datasource\n", name);
    exit(1);
  }
  const char *dir = getenv("CNNB_PLUGIN_DIR");
  if (dir && *dir) cnnb_loader_set_install_dir(t->loader, dir);
  char err[4096];
  cnnb_loader_discover(t->loader, NULL, err, sizeof err);
  if (cnnb_loader_find(t->loader, CNNB_KIND_DATASOURCE, name, &t->plugin, NULL, err, sizeof err) !=
      CNNB_OK) {
    printf("SKIP: the %s datasource plugin is not built: %s\n", name, err);
    exit(77);
  }
  t->vt = t->plugin->vtable;
  /* The plugins' flags, as the host declares them (outside a test: Check's asserts
   * cannot report here). */
  cnnb_loader_register_flags(t->loader, t->flags);
  if (*cnnb_flags_error(t->flags)) {
    printf("FAIL: the %s plugin's flags cannot be declared: %s\n", name,
           cnnb_flags_error(t->flags));
    exit(1);
  }
}

void ds_plugin_test_unload(ds_plugin_test *t) {
  cnnb_loader_destroy(t->loader);
  cnnb_ctx_destroy(t->ctx);
  cnnb_flags_destroy(t->flags);
  *t = (ds_plugin_test){0};
}

void ds_plugin_test_set_flag(ds_plugin_test *t, const char *flag, const char *value) {
  char err[256];
  ck_assert_msg(cnnb_flags_set(t->flags, flag, value, err, sizeof err) == CNNB_OK, "--%s=%s: %s",
                flag, value, err);
}

uint32_t ds_plugin_test_kind(const char *name) {
  const cnnb_dataset_info *d = cnnb_dataset_find(name);
  ck_assert_msg(d != NULL, "no loaded datasource describes dataset '%s'", name);
  return d->kind;
}

cnnb_datasource_config ds_plugin_test_config(int32_t channels, int32_t side, uint32_t dataset,
                                             const char *dir, int training, int batch, int rank,
                                             int world, uint64_t seed) {
  return (cnnb_datasource_config){.struct_size = sizeof(cnnb_datasource_config),
                                  .batch_size = batch,
                                  .channels = channels,
                                  .height = side,
                                  .width = side,
                                  .num_classes = 10,
                                  .rank = rank,
                                  .world_size = world,
                                  .training = training,
                                  .seed = seed,
                                  .data_dir = dir,
                                  .dataset = dataset};
}

void *ds_plugin_test_create(ds_plugin_test *t, const cnnb_datasource_config *cfg) {
  void *ds = NULL;
  cnnb_clear_error(t->ctx);
  cnnb_status st = t->vt->create(t->ctx, t->name, cfg, &ds);
  ck_assert_msg(st == CNNB_OK, "create: %s", cnnb_error_message(t->ctx));
  return ds;
}

const char *ds_plugin_test_create_fails(ds_plugin_test *t, const cnnb_datasource_config *cfg,
                                        cnnb_status want) {
  void *ds = (void *)1;
  cnnb_clear_error(t->ctx);
  cnnb_status st = t->vt->create(t->ctx, t->name, cfg, &ds);
  ck_assert_msg(st == want, "create gave %d (%s), want %d", st, cnnb_error_message(t->ctx), want);
  ck_assert_ptr_null(ds);
  return cnnb_error_message(t->ctx);
}

const cnnb_datasource_uint8 *ds_plugin_test_uint8(const ds_plugin_test *t, void *ds) {
  ck_assert_ptr_nonnull(t->vt->get_extension);
  const cnnb_datasource_uint8 *ext = t->vt->get_extension(ds, CNNB_EXT_DATASOURCE_UINT8);
  ck_assert_ptr_nonnull(ext);
  ck_assert_uint_ge(ext->struct_size, sizeof(cnnb_datasource_uint8));
  return ext;
}

void ds_plugin_test_remove_dir(char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
  free(dir);
}

int ds_plugin_test_run(ds_plugin_test *t, Suite *s) {
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  ds_plugin_test_unload(t);
  return failed ? 1 : 0;
}

void ds_plugin_test_read_ids(const ds_plugin_test *t, void *ds, int batches, int batch,
                             size_t pixels, ds_plugin_test_image_id id_of, int count, int *seen) {
  const cnnb_datasource_uint8 *ext = ds_plugin_test_uint8(t, ds);
  uint8_t *images = malloc((size_t)batch * pixels);
  int32_t *labels = malloc((size_t)batch * sizeof *labels);
  ck_assert(images && labels);
  for (int b = 0; b < batches; b++) {
    ck_assert_int_eq(ext->next_batch_uint8(ds, images, labels), CNNB_OK);
    for (int i = 0; i < batch; i++) {
      int id = id_of(images + (size_t)i * pixels);
      ck_assert_msg(id >= 0 && id < count, "image id %d out of range", id);
      ck_assert_int_eq(labels[i], id % 10);
      seen[id]++;
    }
  }
  free(images);
  free(labels);
}

void ds_plugin_test_two_shards_cover_each_epoch(ds_plugin_test *t, const cnnb_datasource_config *c0,
                                                const cnnb_datasource_config *c1, size_t pixels,
                                                ds_plugin_test_image_id id_of) {
  enum { COUNT = 40, SHARE = COUNT / 2 };
  void *s0 = ds_plugin_test_create(t, c0);
  void *s1 = ds_plugin_test_create(t, c1);
  ck_assert_int_eq(t->vt->examples_per_epoch(s0), COUNT);
  int order[2][2][SHARE]; /* [epoch][shard][k]: the ids a shard read in the epoch */
  for (int epoch = 0; epoch < 2; epoch++) {
    int seen[COUNT] = {0};
    for (int shard = 0; shard < 2; shard++) {
      int before[COUNT];
      memcpy(before, seen, sizeof seen);
      /* SHARE images in batches of 4: the shard's epoch */
      ds_plugin_test_read_ids(t, shard ? s1 : s0, SHARE / 4, 4, pixels, id_of, COUNT, seen);
      int k = 0;
      for (int id = 0; id < COUNT; id++)
        if (seen[id] != before[id]) order[epoch][shard][k++] = id;
      ck_assert_int_eq(k, SHARE);
    }
    for (int id = 0; id < COUNT; id++)
      ck_assert_msg(seen[id] == 1, "epoch %d: image %d read %d times by the two shards", epoch, id,
                    seen[id]);
  }
  /* A new epoch, a new permutation: shard 0 does not get the same set again. */
  ck_assert_msg(memcmp(order[0][0], order[1][0], sizeof order[0][0]) != 0,
                "shard 0 read the same images in epochs 1 and 2");
  t->vt->destroy(s0);
  t->vt->destroy(s1);
}

void ds_plugin_test_probe_needs_the_dir(ds_plugin_test *t, cnnb_datasource_config c,
                                        const char *missing, const char *missing_says,
                                        const char *empty_says) {
  c.training = 0;
  cnnb_clear_error(t->ctx);
  ck_assert_int_gt(t->vt->probe(t->ctx, t->name, &c), 1);
  const char *dirs[] = {missing, ""}, *says[] = {missing_says, empty_says};
  for (int i = 0; i < 2; i++) {
    c.data_dir = dirs[i];
    cnnb_clear_error(t->ctx);
    ck_assert_int_eq(t->vt->probe(t->ctx, t->name, &c), 0);
    const char *why = cnnb_error_message(t->ctx);
    ck_assert_msg(strstr(why, says[i]) != NULL, "--data_dir=%s: '%s' is not in: %s", dirs[i],
                  says[i], why);
  }
}

/* test_cifar10 — the `cifar10` datasource through its vtable, as the host loads it, on
 * CIFAR-10 files this test writes: shards of one epoch are disjoint and cover it exactly
 * once (also when the world does not divide it), every epoch reshuffles, fp32 and uint8
 * batches agree bit for bit, evaluation hands the files' images over unchanged and in
 * order, the probe claims only what it can read, and bad files are refused naming file
 * and record. Also the crop and flip of one image against the rule of tf_cnn_benchmarks'
 * Cifar10ImagePreprocessor (cifar_image.c, compiled in). Skips (77) when the plugin is
 * not built. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cifar_image.h"
#include "ds_plugin_test.h"
#include "flags/flags.h"
#include "loader/loader.h"

enum { RECORD = 3073, PLANE = 1024, PIXELS = 3072 };

static ds_plugin_test harness; /* the plugin, loaded (ds_plugin_test.h) */
static cnnb_ctx *ctx;
static cnnb_loader *loader;
static const cnnb_datasource_vtable *vt;
static const cnnb_plugin *plugin;

/* ---- files ------------------------------------------------------------------------ */

/* Image `id` of a "uniform" set: every red pixel id + 1, green 100 + id % 7, blue 200, so
 * any pixel inside the picture names it whatever the crop and flip; label id % 10. */
static void uniform_record(int id, unsigned char *record) {
  record[0] = (unsigned char)(id % 10);
  memset(record + 1, id + 1, PLANE);
  memset(record + 1 + PLANE, 100 + id % 7, PLANE);
  memset(record + 1 + 2 * PLANE, 200, PLANE);
}

/* Image `id` of a "pattern" set: every pixel differs by position and channel, so a
 * layout mistake shows; label (id * 3) % 10. */
static unsigned char pattern_value(int id, int c, int y, int x) {
  return (unsigned char)((id * 7 + c * 50 + y * 3 + x) & 255);
}
static void pattern_record(int id, unsigned char *record) {
  record[0] = (unsigned char)((id * 3) % 10);
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < 32; y++)
      for (int x = 0; x < 32; x++) record[1 + c * PLANE + y * 32 + x] = pattern_value(id, c, y, x);
}

static void write_file(const char *dir, const char *name, int first, int count,
                       void (*make)(int, unsigned char *)) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  unsigned char record[RECORD];
  for (int i = 0; i < count; i++) {
    make(first + i, record);
    ck_assert_int_eq(fwrite(record, 1, RECORD, f), RECORD);
  }
  fclose(f);
}

/* Five training files of `per_file` uniform images (ids 0 .. 5 * per_file - 1) and a test
 * file of `test` pattern images. Returns the directory (free it). */
static char *make_dataset(int per_file, int test) {
  char *dir = strdup("/tmp/cnnb_cifar10_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  for (int f = 0; f < 5; f++) {
    char name[32];
    snprintf(name, sizeof name, "data_batch_%d.bin", f + 1);
    write_file(dir, name, f * per_file, per_file, uniform_record);
  }
  write_file(dir, "test_batch.bin", 0, test, pattern_record);
  return dir;
}

static void remove_dataset(char *dir) { ds_plugin_test_remove_dir(dir); }

/* ---- the plugin -------------------------------------------------------------------- */

static cnnb_flags *flags;

/* The plugin's flags declared and --distortions on (training images are cropped and
 * flipped only then, as tf_cnn_benchmarks), so the augmentation cases below see it. */
static void load_plugin(void) {
  ds_plugin_test_load(&harness, "cifar10");
  ctx = harness.ctx, loader = harness.loader, plugin = harness.plugin, vt = harness.vt;
  flags = harness.flags;
  char err[256];
  if (cnnb_flags_set(flags, "distortions", "true", err, sizeof err) != CNNB_OK) {
    printf("the cifar10 datasource declares no --distortions: %s\n", err);
    exit(1);
  }
}

static cnnb_datasource_config config(const char *dir, int training, int batch, int rank, int world,
                                     uint64_t seed) {
  return ds_plugin_test_config(3, 32, ds_plugin_test_kind("cifar10"), dir, training, batch, rank,
                               world, seed);
}

#define create(cfg) ds_plugin_test_create(&harness, (cfg))

#define uint8_ext(ds) ds_plugin_test_uint8(&harness, (ds))

/* The id of a uniform image in a uint8 HWC batch, from its centre pixel, which no crop
 * (shift of at most 4) or flip moves outside the picture. */
static int uniform_id(const uint8_t *hwc) {
  const uint8_t *centre = hwc + (16 * 32 + 16) * 3;
  return centre[0] - 1;
}

/* Reads `batches` uint8 batches of `batch` from ds, counting each image id in seen and
 * checking its label. */
static void read_ids(void *ds, int batches, int batch, int *seen, int count) {
  ds_plugin_test_read_ids(&harness, ds, batches, batch, PIXELS, uniform_id, count, seen);
}

/* ---- sharding ----------------------------------------------------------------------- */

START_TEST(two_shards_cover_each_epoch_once) {
  char *dir = make_dataset(8, 10); /* 40 training images */
  cnnb_datasource_config c0 = config(dir, 1, 4, 0, 2, 7), c1 = config(dir, 1, 4, 1, 2, 7);
  ds_plugin_test_two_shards_cover_each_epoch(&harness, &c0, &c1, PIXELS, uniform_id);
  remove_dataset(dir);
}
END_TEST

START_TEST(three_uneven_shards_cover_the_epoch) {
  char *dir = make_dataset(8, 10); /* 40 = 14 + 13 + 13 */
  int seen[40] = {0};
  const int share[3] = {14, 13, 13};
  for (int rank = 0; rank < 3; rank++) {
    cnnb_datasource_config c = config(dir, 1, 1, rank, 3, 99);
    void *s = create(&c);
    read_ids(s, share[rank], 1, seen, 40);
    vt->destroy(s);
  }
  for (int id = 0; id < 40; id++)
    ck_assert_msg(seen[id] == 1, "image %d read %d times", id, seen[id]);
  remove_dataset(dir);
}
END_TEST

START_TEST(seed_decides_the_order) {
  char *dir = make_dataset(8, 10);
  int orders[3][40];
  const uint64_t seeds[3] = {5, 5, 6};
  for (int r = 0; r < 3; r++) {
    cnnb_datasource_config c = config(dir, 1, 40, 0, 1, seeds[r]);
    void *s = create(&c);
    const cnnb_datasource_uint8 *ext = uint8_ext(s);
    uint8_t *images = malloc(40 * PIXELS);
    int32_t labels[40];
    ck_assert_int_eq(ext->next_batch_uint8(s, images, labels), CNNB_OK);
    for (int i = 0; i < 40; i++) orders[r][i] = uniform_id(images + (size_t)i * PIXELS);
    free(images);
    vt->destroy(s);
  }
  ck_assert_msg(memcmp(orders[0], orders[1], sizeof orders[0]) == 0, "one seed, two orders");
  ck_assert_msg(memcmp(orders[0], orders[2], sizeof orders[0]) != 0, "two seeds, one order");
  int identity = 1;
  for (int i = 0; i < 40; i++) identity &= orders[0][i] == i;
  ck_assert_msg(!identity, "training reads the files in order: not shuffled");
  remove_dataset(dir);
}
END_TEST

/* ---- the two transports, evaluation ------------------------------------------------ */

START_TEST(float_batches_are_the_normalized_uint8_batches) {
  char *dir = make_dataset(8, 10);
  for (int training = 0; training <= 1; training++) {
    cnnb_datasource_config c = config(dir, training, 8, 0, 1, 11);
    void *a = create(&c), *b = create(&c);
    const cnnb_datasource_uint8 *ext = uint8_ext(b);
    float scale[3], offset[3];
    ck_assert_int_eq(ext->normalization(b, scale, offset), CNNB_OK);
    for (int ch = 0; ch < 3; ch++) {
      /* tf_cnn_benchmarks' normalized_image: v * (1 / 127.5) - 1. */
      ck_assert(scale[ch] == (float)(1.0 / 127.5));
      ck_assert(offset[ch] == -1.0f);
    }
    float *f = malloc(8 * PIXELS * sizeof *f);
    uint8_t *u = malloc(8 * PIXELS);
    int32_t lf[8], lu[8];
    for (int step = 0; step < 12; step++) { /* past the end of the epoch (40 / 8 = 5) */
      ck_assert_int_eq(vt->next_batch(a, f, lf), CNNB_OK);
      ck_assert_int_eq(ext->next_batch_uint8(b, u, lu), CNNB_OK);
      for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(lf[i], lu[i]);
        for (int ch = 0; ch < 3; ch++)
          for (int p = 0; p < PLANE; p++) {
            float want = (float)u[(size_t)i * PIXELS + (size_t)p * 3 + (size_t)ch] * scale[ch] +
                         offset[ch];
            float got = f[(size_t)i * PIXELS + (size_t)ch * PLANE + (size_t)p];
            ck_assert_msg(memcmp(&want, &got, sizeof got) == 0,
                          "training %d step %d image %d channel %d pixel %d: fp32 %a, uint8 %a",
                          training, step, i, ch, p, (double)got, (double)want);
          }
      }
    }
    free(f);
    free(u);
    vt->destroy(a);
    vt->destroy(b);
  }
  remove_dataset(dir);
}
END_TEST

START_TEST(eval_hands_over_the_files_unchanged_in_order) {
  char *dir = make_dataset(8, 12);
  cnnb_datasource_config c = config(dir, 0, 5, 0, 1, 3);
  void *s = create(&c);
  ck_assert_int_eq(vt->examples_per_epoch(s), 12);
  const cnnb_datasource_uint8 *ext = uint8_ext(s);
  uint8_t *images = malloc(5 * PIXELS);
  int32_t labels[5];
  for (int b = 0; b < 3; b++) { /* 15 images: the 12 and again the first 3 */
    ck_assert_int_eq(ext->next_batch_uint8(s, images, labels), CNNB_OK);
    for (int i = 0; i < 5; i++) {
      int id = (b * 5 + i) % 12;
      ck_assert_int_eq(labels[i], (id * 3) % 10);
      for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++)
          for (int ch = 0; ch < 3; ch++)
            ck_assert_int_eq(images[(size_t)i * PIXELS + (size_t)(y * 32 + x) * 3 + (size_t)ch],
                             pattern_value(id, ch, y, x));
    }
  }
  free(images);
  vt->destroy(s);
  remove_dataset(dir);
}
END_TEST

START_TEST(training_pads_and_crops) {
  char *dir = make_dataset(8, 10);
  cnnb_datasource_config c = config(dir, 1, 40, 0, 1, 1);
  void *s = create(&c);
  const cnnb_datasource_uint8 *ext = uint8_ext(s);
  uint8_t *images = malloc(40 * PIXELS);
  int32_t labels[40];
  int padded = 0;
  for (int epoch = 0; epoch < 2; epoch++) {
    ck_assert_int_eq(ext->next_batch_uint8(s, images, labels), CNNB_OK);
    for (int i = 0; i < 40; i++) {
      const uint8_t *img = images + (size_t)i * PIXELS;
      /* A uniform image's red is never 0: a 0 is padding shifted in by the crop. */
      int zeros = 0;
      for (int p = 0; p < PLANE; p++) zeros += img[p * 3] == 0;
      padded += zeros > 0;
      ck_assert_int_le(zeros, 32 * 32 - 28 * 28); /* at most 4 rows and 4 columns */
    }
  }
  /* Only the centred crop (1 in 81) adds no padding. */
  ck_assert_int_ge(padded, 60);
  free(images);
  vt->destroy(s);
  remove_dataset(dir);
}
END_TEST

/* tf's --nodistortions (the default): training images are taken as they are, no padding
 * shifted in, the same image at every epoch. */
START_TEST(training_without_distortions_is_plain) {
  char err[256];
  ck_assert_int_eq(cnnb_flags_set(flags, "distortions", "false", err, sizeof err), CNNB_OK);
  char *dir = make_dataset(8, 10);
  cnnb_datasource_config c = config(dir, 1, 40, 0, 1, 1);
  void *s = create(&c);
  const cnnb_datasource_uint8 *ext = uint8_ext(s);
  uint8_t *images = malloc(40 * PIXELS);
  int32_t labels[40];
  ck_assert_int_eq(ext->next_batch_uint8(s, images, labels), CNNB_OK);
  int zeros = 0;
  for (size_t p = 0; p < (size_t)40 * PIXELS; p += 3) zeros += images[p] == 0;
  ck_assert_int_eq(zeros, 0);
  free(images);
  vt->destroy(s);
  remove_dataset(dir);
  if (cnnb_flags_set(flags, "distortions", "true", err, sizeof err) != CNNB_OK) {
    printf("the cifar10 datasource declares no --distortions: %s\n", err);
    exit(1);
  }
}
END_TEST

/* The crop and flip rule itself: pad to 40x40 (4 each side), crop 32x32 at (dx, dy),
 * mirror left-right after the crop. */
START_TEST(render_matches_pad_crop_flip) {
  unsigned char record[RECORD];
  pattern_record(3, record);
  const uint8_t *planes = record + 1;
  uint8_t out[PIXELS];
  for (int flip = 0; flip <= 1; flip++)
    for (int dy = 0; dy <= 8; dy += 4)
      for (int dx = 0; dx <= 8; dx += 2) {
        ds_crop aug = {.dx = dx, .dy = dy, .flip = flip};
        cifar_image_render(planes, &aug, out);
        for (int y = 0; y < 32; y++)
          for (int x = 0; x < 32; x++) {
            int cx = flip ? 31 - x : x;    /* column in the crop */
            int py = y + dy, px = cx + dx; /* in the 40x40 padded image */
            int sy = py - 4, sx = px - 4;  /* in the stored image */
            for (int ch = 0; ch < 3; ch++) {
              int want = sy >= 0 && sy < 32 && sx >= 0 && sx < 32 ? pattern_value(3, ch, sy, sx)
                                                                  : 0;
              ck_assert_msg(out[(y * 32 + x) * 3 + ch] == want,
                            "dx %d dy %d flip %d: (%d, %d, %d) is %d, want %d", dx, dy, flip, y, x,
                            ch, out[(y * 32 + x) * 3 + ch], want);
            }
          }
      }
  cifar_image_render(planes, NULL, out); /* evaluation: the image as stored */
  for (int p = 0; p < PLANE; p++)
    for (int ch = 0; ch < 3; ch++) ck_assert_int_eq(out[p * 3 + ch], planes[ch * PLANE + p]);
}
END_TEST

/* ---- probe and refusals ------------------------------------------------------------- */

#define create_fails(cfg, want) ds_plugin_test_create_fails(&harness, (cfg), (want))

#define ASSERT_HAS(text, part) \
  ck_assert_msg(strstr((text), (part)) != NULL, "'%s' is not in: %s", (part), (text))

START_TEST(probe_claims_what_it_can_read) {
  char *dir = make_dataset(2, 3);
  cnnb_datasource_config c = config(dir, 1, 2, 0, 1, 1);
  cnnb_clear_error(ctx);
  ck_assert_int_gt(vt->probe(ctx, "cifar10", &c), 1); /* above synthetic */
  c.dataset = ds_plugin_test_kind("imagenet");
  ck_assert_int_eq(vt->probe(ctx, "cifar10", &c), 0);
  ASSERT_HAS(cnnb_error_message(ctx), "cifar10");
  c.dataset = ds_plugin_test_kind("cifar10");
  /* The archive's own folder inside --data_dir is found too. */
  char parent[4096];
  snprintf(parent, sizeof parent, "%s.parent", dir);
  ck_assert_int_eq(mkdir(parent, 0700), 0);
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", parent);
  ck_assert_int_eq(rename(dir, sub), 0);
  c.data_dir = parent;
  cnnb_clear_error(ctx);
  ck_assert_int_gt(vt->probe(ctx, "cifar10", &c), 1);
  void *s = create(&c);
  ck_assert_int_eq(vt->examples_per_epoch(s), 10);
  vt->destroy(s);
  /* Without the third batch: the probe says what it looked for where. */
  char gone[4300];
  snprintf(gone, sizeof gone, "%s/data_batch_3.bin", sub);
  ck_assert_int_eq(unlink(gone), 0);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(vt->probe(ctx, "cifar10", &c), 0);
  const char *why = cnnb_error_message(ctx);
  ASSERT_HAS(why, "data_batch_1.bin, data_batch_2.bin, data_batch_3.bin");
  ASSERT_HAS(why, "missing data_batch_3.bin");
  ASSERT_HAS(why, parent);
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "missing data_batch_3.bin");
  /* Evaluation needs only test_batch.bin, which is there. */
  ds_plugin_test_probe_needs_the_dir(&harness, c, "/nonexistent/cifar", "/nonexistent/cifar",
                                     "--data_dir");
  snprintf(gone, sizeof gone, "rm -rf '%s'", parent);
  ck_assert_int_eq(system(gone), 0);
  free(dir);
}
END_TEST

START_TEST(bad_files_and_configs_are_refused) {
  char *dir = make_dataset(2, 3);
  cnnb_datasource_config c = config(dir, 1, 2, 0, 1, 1);
  /* Not 32x32x3, not cifar10, too few classes, more shards than images. */
  c.height = c.width = 28;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "32x32");
  c.height = c.width = 32;
  c.dataset = ds_plugin_test_kind("imagenet");
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "--data_name=imagenet");
  c.dataset = ds_plugin_test_kind("cifar10");
  c.num_classes = 5;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "--num_classes");
  c.num_classes = 10;
  c.world_size = 11;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "fewer than the 11 shards");
  c.world_size = 1;
  /* A file cut short: named with its size. */
  char path[4200];
  snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
  ck_assert_int_eq(truncate(path, RECORD + 100), 0);
  const char *why = create_fails(&c, CNNB_EDATA);
  ASSERT_HAS(why, "data_batch_2.bin");
  ASSERT_HAS(why, "3173 bytes");
  /* A label of 10 in record 1 of data_batch_4.bin: named with record and offset. */
  write_file(dir, "data_batch_2.bin", 2, 2, uniform_record);
  snprintf(path, sizeof path, "%s/data_batch_4.bin", dir);
  FILE *f = fopen(path, "r+b");
  ck_assert_ptr_nonnull(f);
  fseek(f, RECORD, SEEK_SET);
  fputc(10, f);
  fclose(f);
  why = create_fails(&c, CNNB_EDATA);
  ASSERT_HAS(why, "data_batch_4.bin: record 1 (byte offset 3073) has label 10");
  remove_dataset(dir);
}
END_TEST

int main(void) {
  load_plugin();
  Suite *s = suite_create("cifar10");
  TCase *tc = tcase_create("cifar10");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, two_shards_cover_each_epoch_once);
  tcase_add_test(tc, three_uneven_shards_cover_the_epoch);
  tcase_add_test(tc, seed_decides_the_order);
  tcase_add_test(tc, float_batches_are_the_normalized_uint8_batches);
  tcase_add_test(tc, eval_hands_over_the_files_unchanged_in_order);
  tcase_add_test(tc, training_pads_and_crops);
  tcase_add_test(tc, training_without_distortions_is_plain);
  tcase_add_test(tc, render_matches_pad_crop_flip);
  tcase_add_test(tc, probe_claims_what_it_can_read);
  tcase_add_test(tc, bad_files_and_configs_are_refused);
  suite_add_tcase(s, tc);
  return ds_plugin_test_run(&harness, s);
}

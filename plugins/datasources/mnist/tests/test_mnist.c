/* test_mnist — the `mnist` datasource through its vtable, as the host loads it, on IDX
 * files this test writes by hand: good files read alike plain and gzipped; every
 * malformed file (bad magic, wrong dimensions, a size that disagrees with them,
 * truncated or with trailing bytes, plain or gzipped, a corrupt gzip stream, a label out
 * of range, image and label counts that differ) is refused naming the file and the
 * fault; shards of one epoch are disjoint and cover it exactly once, every epoch
 * reshuffles, skipping batches equals reading and discarding them, fp32 and uint8 batches
 * agree bit for bit, evaluation hands over the test files unchanged and in order, a 32x32
 * model gets the image centred on background, --mnist_augment crops and flips training
 * images only, a split is read once for every instance, and the probe claims only what it
 * can read. Also the crop and flip rule on one image (mnist_image.c, compiled in). Skips
 * (77) when the plugin is not built. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef MNIST_HAVE_ZLIB
#include <zlib.h>
#endif

#include "config/core_flags.h"
#include "config/run_config.h"
#include "ds_plugin_test.h"
#include "flags/flags.h"
#include "loader/loader.h"
#include "mnist_image.h"

enum { SIDE = 28, PIXELS = SIDE * SIDE, TRAIN = 40, TEST = 12 };

static ds_plugin_test harness; /* the plugin, loaded (ds_plugin_test.h) */
static cnnb_ctx *ctx;
static cnnb_flags *flags;
static cnnb_loader *loader;
static const cnnb_datasource_vtable *vt;
static const cnnb_plugin *plugin;

#define ASSERT_HAS(text, part) \
  ck_assert_msg(strstr((text), (part)) != NULL, "'%s' is not in: %s", (part), (text))

/* ---- images ------------------------------------------------------------------------ */

/* Image `id` of a "uniform" set: every pixel id + 1 (never 0, the background), so any
 * pixel inside the picture names it whatever the crop and flip; label id % 10. */
static uint8_t uniform_value(int id, int y, int x) {
  (void)y;
  (void)x;
  return (uint8_t)(id + 1);
}
/* Image `id` of a "pattern" set: pixels differ by position (and left from right), so a
 * layout mistake or a flip shows, and are never 0; label (id * 3) % 10. */
static uint8_t pattern_value(int id, int y, int x) {
  return (uint8_t)(1 + (id * 7 + y * 3 + x * 11) % 255);
}

/* ---- IDX files --------------------------------------------------------------------- */

static void be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* An IDX file's bytes: magic, ndims dimensions, payload. */
typedef struct bytes {
  uint8_t *data;
  size_t size;
} bytes;

static bytes idx_file(uint32_t magic, int ndims, const uint32_t *dims, const uint8_t *payload,
                      size_t payload_size) {
  bytes b = {.size = 4 + 4 * (size_t)ndims + payload_size};
  b.data = malloc(b.size);
  ck_assert_ptr_nonnull(b.data);
  be32(b.data, magic);
  for (int i = 0; i < ndims; i++) be32(b.data + 4 + 4 * i, dims[i]);
  memcpy(b.data + 4 + 4 * ndims, payload, payload_size);
  return b;
}

/* `count` images of `value`, as an IDX images file. */
static bytes images_file(int count, uint8_t (*value)(int, int, int)) {
  uint8_t *px = malloc((size_t)count * PIXELS);
  for (int i = 0; i < count; i++)
    for (int y = 0; y < SIDE; y++)
      for (int x = 0; x < SIDE; x++)
        px[(size_t)i * PIXELS + (size_t)y * SIDE + (size_t)x] = value(i, y, x);
  const uint32_t dims[3] = {(uint32_t)count, SIDE, SIDE};
  bytes b = idx_file(0x00000803, 3, dims, px, (size_t)count * PIXELS);
  free(px);
  return b;
}

static uint8_t uniform_label(int id) { return (uint8_t)(id % 10); }
static uint8_t pattern_label(int id) { return (uint8_t)((id * 3) % 10); }

static bytes labels_file(int count, uint8_t (*label)(int)) {
  uint8_t *l = malloc((size_t)count);
  for (int i = 0; i < count; i++) l[i] = label(i);
  const uint32_t dims[1] = {(uint32_t)count};
  bytes b = idx_file(0x00000801, 1, dims, l, (size_t)count);
  free(l);
  return b;
}

static void path_in(char *out, size_t size, const char *dir, const char *name) {
  snprintf(out, size, "%s/%s", dir, name);
}

/* Writes b to dir/name as it is; b is freed. */
static void write_plain(const char *dir, const char *name, bytes b) {
  char path[4096];
  path_in(path, sizeof path, dir, name);
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot write %s", path);
  ck_assert_uint_eq(fwrite(b.data, 1, b.size, f), b.size);
  fclose(f);
  free(b.data);
}

#ifdef MNIST_HAVE_ZLIB
/* b gzipped, in memory, as gzip(1) writes it (b freed). */
static bytes gzip_bytes(bytes b) {
  z_stream z = {0};
  ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  bytes out = {.size = deflateBound(&z, (uLong)b.size)};
  out.data = malloc(out.size);
  z.next_in = b.data;
  z.avail_in = (uInt)b.size;
  z.next_out = out.data;
  z.avail_out = (uInt)out.size;
  ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.size = z.total_out;
  deflateEnd(&z);
  free(b.data);
  return out;
}

/* a then b (both freed). */
static bytes concat(bytes a, bytes b) {
  a.data = realloc(a.data, a.size + b.size);
  memcpy(a.data + a.size, b.data, b.size);
  a.size += b.size;
  free(b.data);
  return a;
}

static void write_gz(const char *dir, const char *name, bytes b) {
  write_plain(dir, name, gzip_bytes(b));
}
#endif

static char *make_dir(void) {
  char *dir = strdup("/tmp/cnnb_mnist_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  return dir;
}

/* A plain dataset: TRAIN uniform training images (or pattern ones), TEST pattern test
 * images. Returns the directory (free it with remove_dir). */
static char *make_dataset_of(uint8_t (*train)(int, int, int), uint8_t (*train_label)(int)) {
  char *dir = make_dir();
  write_plain(dir, "train-images-idx3-ubyte", images_file(TRAIN, train));
  write_plain(dir, "train-labels-idx1-ubyte", labels_file(TRAIN, train_label));
  write_plain(dir, "t10k-images-idx3-ubyte", images_file(TEST, pattern_value));
  write_plain(dir, "t10k-labels-idx1-ubyte", labels_file(TEST, pattern_label));
  return dir;
}

static char *make_dataset(void) { return make_dataset_of(uniform_value, uniform_label); }

static void remove_dir(char *dir) { ds_plugin_test_remove_dir(dir); }

/* ---- the plugin -------------------------------------------------------------------- */

static void load_plugin(void) {
  ds_plugin_test_load(&harness, "mnist");
  ctx = harness.ctx, loader = harness.loader, plugin = harness.plugin, vt = harness.vt;
  flags = harness.flags;
}

static void set_augment(const char *value) {
  ds_plugin_test_set_flag(&harness, "mnist_augment", value);
}

static cnnb_datasource_config config(const char *dir, int training, int batch, int rank, int world,
                                     uint64_t seed) {
  return ds_plugin_test_config(1, SIDE, ds_plugin_test_kind("mnist"), dir, training, batch, rank,
                               world, seed);
}

#define create(cfg) ds_plugin_test_create(&harness, (cfg))

#define create_fails(cfg, want) ds_plugin_test_create_fails(&harness, (cfg), (want))

#define uint8_ext(ds) ds_plugin_test_uint8(&harness, (ds))

/* `batches` uint8 batches of `batch` images of `pixels` bytes from ds, appended to
 * images / labels (each sized for all of them). */
static void read_batches(void *ds, int batches, int batch, size_t pixels, uint8_t *images,
                         int32_t *labels) {
  const cnnb_datasource_uint8 *ext = uint8_ext(ds);
  for (int b = 0; b < batches; b++)
    ck_assert_int_eq(ext->next_batch_uint8(ds, images + (size_t)b * batch * pixels,
                                           labels + (size_t)b * batch),
                     CNNB_OK);
}

/* The id of a uniform 28x28 image from its centre pixel, which no crop (shift of at
 * most 4) or flip moves outside the picture. */
static int uniform_id(const uint8_t *img) { return img[14 * SIDE + 14] - 1; }

/* Reads `batches` batches, counting each uniform image's id in seen and checking its
 * label. */
static void read_ids(void *ds, int batches, int batch, int *seen) {
  ds_plugin_test_read_ids(&harness, ds, batches, batch, PIXELS, uniform_id, TRAIN, seen);
}

/* ---- good files ---------------------------------------------------------------------- */

/* The same split plain, gzipped, and half and half, reads as the same batches. */
START_TEST(plain_and_gz_read_alike) {
#ifndef MNIST_HAVE_ZLIB
  printf("note: built without zlib; bad_gz_files checks that .gz files are refused\n");
  return;
#else
  char *plain = make_dataset(), *gz = make_dir(), *mixed = make_dir();
  write_gz(gz, "train-images-idx3-ubyte.gz", images_file(TRAIN, uniform_value));
  write_gz(gz, "train-labels-idx1-ubyte.gz", labels_file(TRAIN, uniform_label));
  write_gz(gz, "t10k-images-idx3-ubyte.gz", images_file(TEST, pattern_value));
  write_gz(gz, "t10k-labels-idx1-ubyte.gz", labels_file(TEST, pattern_label));
  write_gz(mixed, "train-images-idx3-ubyte.gz", images_file(TRAIN, uniform_value));
  write_plain(mixed, "train-labels-idx1-ubyte", labels_file(TRAIN, uniform_label));
  write_plain(mixed, "t10k-images-idx3-ubyte", images_file(TEST, pattern_value));
  write_gz(mixed, "t10k-labels-idx1-ubyte.gz", labels_file(TEST, pattern_label));
  for (int training = 0; training <= 1; training++) {
    int count = training ? TRAIN : TEST;
    uint8_t *want = malloc((size_t)count * PIXELS), *got = malloc((size_t)count * PIXELS);
    int32_t want_labels[TRAIN], got_labels[TRAIN];
    cnnb_datasource_config c = config(plain, training, count, 0, 1, 5);
    void *s = create(&c);
    ck_assert_int_eq(vt->examples_per_epoch(s), count);
    read_batches(s, 1, count, PIXELS, want, want_labels);
    vt->destroy(s);
    const char *dirs[2] = {gz, mixed};
    for (int d = 0; d < 2; d++) {
      c.data_dir = dirs[d];
      s = create(&c);
      ck_assert_int_eq(vt->examples_per_epoch(s), count);
      read_batches(s, 1, count, PIXELS, got, got_labels);
      vt->destroy(s);
      ck_assert_msg(memcmp(want, got, (size_t)count * PIXELS) == 0, "%s: other images", dirs[d]);
      ck_assert_msg(memcmp(want_labels, got_labels, (size_t)count * sizeof *got_labels) == 0,
                    "%s: other labels", dirs[d]);
    }
    free(want);
    free(got);
  }
  remove_dir(plain);
  remove_dir(gz);
  remove_dir(mixed);
#endif
}
END_TEST

/* ---- sharding, order, skipping ------------------------------------------------------ */

START_TEST(two_shards_cover_each_epoch_once) {
  char *dir = make_dataset(); /* TRAIN (40) training images */
  cnnb_datasource_config c0 = config(dir, 1, 4, 0, 2, 7), c1 = config(dir, 1, 4, 1, 2, 7);
  ds_plugin_test_two_shards_cover_each_epoch(&harness, &c0, &c1, PIXELS, uniform_id);
  remove_dir(dir);
}
END_TEST

START_TEST(three_uneven_shards_cover_the_epoch) {
  char *dir = make_dataset(); /* 40 = 14 + 13 + 13 */
  int seen[TRAIN] = {0};
  const int share[3] = {14, 13, 13};
  for (int rank = 0; rank < 3; rank++) {
    cnnb_datasource_config c = config(dir, 1, 1, rank, 3, 99);
    void *s = create(&c);
    read_ids(s, share[rank], 1, seen);
    vt->destroy(s);
  }
  for (int id = 0; id < TRAIN; id++)
    ck_assert_msg(seen[id] == 1, "image %d read %d times", id, seen[id]);
  remove_dir(dir);
}
END_TEST

/* Every epoch is a new permutation of all 40, drawn from the seed: the same seed gives
 * the same orders, another seed others, and none is the files' order. */
START_TEST(every_epoch_reshuffles_from_the_seed) {
  char *dir = make_dataset();
  int orders[3][3][TRAIN]; /* [run][epoch][position] */
  const uint64_t seeds[3] = {5, 5, 6};
  for (int r = 0; r < 3; r++) {
    cnnb_datasource_config c = config(dir, 1, TRAIN, 0, 1, seeds[r]);
    void *s = create(&c);
    uint8_t *images = malloc(TRAIN * PIXELS);
    int32_t labels[TRAIN];
    for (int e = 0; e < 3; e++) {
      read_batches(s, 1, TRAIN, PIXELS, images, labels);
      int seen[TRAIN] = {0};
      for (int i = 0; i < TRAIN; i++) {
        orders[r][e][i] = uniform_id(images + (size_t)i * PIXELS);
        seen[orders[r][e][i]]++;
      }
      for (int id = 0; id < TRAIN; id++) ck_assert_int_eq(seen[id], 1);
      int identity = 1;
      for (int i = 0; i < TRAIN; i++) identity &= orders[r][e][i] == i;
      ck_assert_msg(!identity, "epoch %d reads the files in order: not shuffled", e);
    }
    free(images);
    vt->destroy(s);
  }
  ck_assert_msg(memcmp(orders[0], orders[1], sizeof orders[0]) == 0, "one seed, two orders");
  ck_assert_msg(memcmp(orders[0], orders[2], sizeof orders[0]) != 0, "two seeds, one order");
  for (int e = 1; e < 3; e++)
    ck_assert_msg(memcmp(orders[0][0], orders[0][e], sizeof orders[0][0]) != 0,
                  "epoch %d repeats epoch 0's order", e);
  remove_dir(dir);
}
END_TEST

/* skip_batches(k) then reading equals reading k batches, discarding them, then reading:
 * the same images, augmentations and labels, across epoch ends, for each shard. */
START_TEST(skip_equals_reading_and_discarding) {
  char *dir = make_dataset_of(pattern_value, pattern_label);
  set_augment("crop_flip");
  const int batch = 7, after = 9;
  const int64_t skips[] = {0, 1, 2, 3, 5, 6, 13, 40};
  for (int world = 1; world <= 2; world++)
    for (int rank = 0; rank < world; rank++)
      for (size_t k = 0; k < sizeof skips / sizeof skips[0]; k++) {
        cnnb_datasource_config c = config(dir, 1, batch, rank, world, 21);
        void *read = create(&c), *skipped = create(&c);
        const cnnb_datasource_skip *ext = vt->get_extension(skipped, CNNB_EXT_DATASOURCE_SKIP);
        ck_assert_ptr_nonnull(ext);
        ck_assert_uint_ge(ext->struct_size, sizeof(cnnb_datasource_skip));
        size_t n = (size_t)(skips[k] > after ? skips[k] : after) * batch;
        uint8_t *a = malloc(n * PIXELS), *b = malloc((size_t)after * batch * PIXELS);
        int32_t *la = malloc(n * sizeof *la), *lb = malloc((size_t)after * batch * sizeof *lb);
        if (skips[k] > 0) read_batches(read, (int)skips[k], batch, PIXELS, a, la); /* discarded */
        read_batches(read, after, batch, PIXELS, a, la);
        ck_assert_int_eq(ext->skip_batches(skipped, skips[k]), CNNB_OK);
        read_batches(skipped, after, batch, PIXELS, b, lb);
        ck_assert_msg(memcmp(a, b, (size_t)after * batch * PIXELS) == 0,
                      "shard %d of %d, skip %lld: other images than reading would give", rank,
                      world, (long long)skips[k]);
        ck_assert_msg(memcmp(la, lb, (size_t)after * batch * sizeof *la) == 0,
                      "shard %d of %d, skip %lld: other labels", rank, world, (long long)skips[k]);
        free(a);
        free(b);
        free(la);
        free(lb);
        vt->destroy(read);
        vt->destroy(skipped);
      }
  cnnb_datasource_config c = config(dir, 1, batch, 0, 1, 21);
  void *s = create(&c);
  const cnnb_datasource_skip *ext = vt->get_extension(s, CNNB_EXT_DATASOURCE_SKIP);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(ext->skip_batches(s, -1), CNNB_EINVAL);
  ASSERT_HAS(cnnb_error_message(ctx), "cannot skip -1 batches");
  vt->destroy(s);
  set_augment("none");
  remove_dir(dir);
}
END_TEST

/* ---- the two transports, evaluation, sizes ----------------------------------------- */

START_TEST(float_batches_are_the_normalized_uint8_batches) {
  char *dir = make_dataset_of(pattern_value, pattern_label);
  const char *modes[] = {"none", "crop_flip"};
  for (int m = 0; m < 2; m++)
    for (int training = 0; training <= 1; training++)
      for (int side = SIDE; side <= 32; side += 4) {
        set_augment(modes[m]);
        cnnb_datasource_config c = config(dir, training, 8, 0, 1, 11);
        c.height = c.width = side;
        size_t px = (size_t)side * side;
        void *a = create(&c), *b = create(&c);
        const cnnb_datasource_uint8 *ext = uint8_ext(b);
        float scale = 0, offset = 0;
        ck_assert_int_eq(ext->normalization(b, &scale, &offset), CNNB_OK);
        /* tf_cnn_benchmarks' normalized_image: v * (1 / 127.5) - 1. */
        ck_assert(scale == (float)(1.0 / 127.5));
        ck_assert(offset == -1.0f);
        float *f = malloc(8 * px * sizeof *f);
        uint8_t *u = malloc(8 * px);
        int32_t lf[8], lu[8];
        for (int step = 0; step < 12; step++) { /* past the end of the epoch */
          ck_assert_int_eq(vt->next_batch(a, f, lf), CNNB_OK);
          ck_assert_int_eq(ext->next_batch_uint8(b, u, lu), CNNB_OK);
          for (int i = 0; i < 8; i++) ck_assert_int_eq(lf[i], lu[i]);
          for (size_t p = 0; p < 8 * px; p++) {
            float want = (float)u[p] * scale + offset;
            ck_assert_msg(memcmp(&want, &f[p], sizeof want) == 0,
                          "%s training %d %dx%d step %d value %zu: fp32 %a, uint8 %a", modes[m],
                          training, side, side, step, p, (double)f[p], (double)want);
          }
        }
        free(f);
        free(u);
        vt->destroy(a);
        vt->destroy(b);
      }
  set_augment("none");
  remove_dir(dir);
}
END_TEST

START_TEST(eval_hands_over_the_test_files_unchanged_in_order) {
  char *dir = make_dataset();
  set_augment("crop_flip"); /* evaluation is never augmented */
  cnnb_datasource_config c = config(dir, 0, 5, 0, 1, 3);
  void *s = create(&c);
  ck_assert_int_eq(vt->examples_per_epoch(s), TEST);
  uint8_t images[3 * 5 * PIXELS];
  int32_t labels[15];
  read_batches(s, 3, 5, PIXELS, images, labels); /* 15: the 12 and again the first 3 */
  for (int i = 0; i < 15; i++) {
    int id = i % TEST;
    ck_assert_int_eq(labels[i], (id * 3) % 10);
    for (int y = 0; y < SIDE; y++)
      for (int x = 0; x < SIDE; x++)
        ck_assert_int_eq(images[(size_t)i * PIXELS + (size_t)y * SIDE + (size_t)x],
                         pattern_value(id, y, x));
  }
  vt->destroy(s);
  /* Two shards of the test split: positions 0, 2, 4, ... and 1, 3, 5, ... */
  for (int rank = 0; rank < 2; rank++) {
    c = config(dir, 0, 6, rank, 2, 3);
    s = create(&c);
    read_batches(s, 1, 6, PIXELS, images, labels);
    for (int i = 0; i < 6; i++)
      ck_assert_int_eq(images[(size_t)i * PIXELS + 5 * SIDE + 9],
                       pattern_value(2 * i + rank, 5, 9));
    vt->destroy(s);
  }
  set_augment("none");
  remove_dir(dir);
}
END_TEST

/* A 32x32 model: the 28x28 image at rows and columns 2..29, background around; 33x30: 2
 * above, 3 below, 1 left and right (an odd difference puts the extra row below). */
START_TEST(larger_models_get_the_image_centred_on_background) {
  char *dir = make_dataset();
  const int sizes[2][2] = {{32, 32}, {33, 30}};
  for (int k = 0; k < 2; k++) {
    int h = sizes[k][0], w = sizes[k][1], top = (h - SIDE) / 2, left = (w - SIDE) / 2;
    cnnb_datasource_config c = config(dir, 0, TEST, 0, 1, 3);
    c.height = h;
    c.width = w;
    void *s = create(&c);
    uint8_t *images = malloc((size_t)TEST * h * w);
    int32_t labels[TEST];
    read_batches(s, 1, TEST, (size_t)h * w, images, labels);
    for (int i = 0; i < TEST; i++)
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          int sy = y - top, sx = x - left;
          int want = sy >= 0 && sy < SIDE && sx >= 0 && sx < SIDE ? pattern_value(i, sy, sx) : 0;
          ck_assert_msg(images[((size_t)i * h + y) * w + x] == want,
                        "%dx%d image %d (%d, %d): %d, want %d", h, w, i, y, x,
                        images[((size_t)i * h + y) * w + x], want);
        }
    /* fp32: the background is -1. */
    float *f = malloc((size_t)TEST * h * w * sizeof *f);
    vt->destroy(s);
    s = create(&c);
    ck_assert_int_eq(vt->next_batch(s, f, labels), CNNB_OK);
    ck_assert(f[0] == -1.0f && f[(size_t)h * w - 1] == -1.0f);
    free(f);
    free(images);
    vt->destroy(s);
  }
  remove_dir(dir);
}
END_TEST

/* --mnist_augment: none (the default) hands training images over unchanged; crop pads and
 * crops them; crop_flip draws the same crops and mirrors about half of them. */
START_TEST(augmentation_is_a_flag_and_training_only) {
  char *dir = make_dataset_of(pattern_value, pattern_label);
  const int n = 2 * TRAIN;
  uint8_t *runs[3];
  int32_t labels[3][2 * TRAIN];
  const char *modes[3] = {"none", "crop", "crop_flip"};
  for (int m = 0; m < 3; m++) {
    set_augment(modes[m]);
    cnnb_datasource_config c = config(dir, 1, n, 0, 1, 17);
    void *s = create(&c);
    runs[m] = malloc((size_t)n * PIXELS);
    read_batches(s, 1, n, PIXELS, runs[m], labels[m]);
    vt->destroy(s);
  }
  /* The order is the seed's whatever the augmentation. */
  ck_assert(memcmp(labels[0], labels[1], sizeof labels[0]) == 0);
  ck_assert(memcmp(labels[0], labels[2], sizeof labels[0]) == 0);
  int cropped = 0, flipped = 0, plain = 0;
  for (int i = 0; i < n; i++) {
    const uint8_t *none = runs[0] + (size_t)i * PIXELS, *crop = runs[1] + (size_t)i * PIXELS;
    const uint8_t *flip = runs[2] + (size_t)i * PIXELS;
    /* none: some stored image exactly (pattern images have no 0 pixel). */
    int zeros = 0, stored = -1;
    for (int p = 0; p < PIXELS; p++) zeros += none[p] == 0;
    ck_assert_int_eq(zeros, 0);
    for (int id = 0; id < TRAIN && stored < 0; id++) {
      int same = 1;
      for (int p = 0; p < PIXELS && same; p++)
        same = none[p] == pattern_value(id, p / SIDE, p % SIDE);
      if (same) stored = id;
    }
    ck_assert_msg(stored >= 0, "--mnist_augment=none: image %d is no stored image", i);
    zeros = 0;
    for (int p = 0; p < PIXELS; p++) zeros += crop[p] == 0;
    ck_assert_int_le(zeros, PIXELS - 24 * 24); /* at most 4 rows and 4 columns of padding */
    cropped += zeros > 0;
    int same = memcmp(crop, flip, PIXELS) == 0, mirrored = 1;
    for (int y = 0; y < SIDE && mirrored; y++)
      for (int x = 0; x < SIDE && mirrored; x++)
        mirrored = flip[y * SIDE + x] == crop[y * SIDE + SIDE - 1 - x];
    ck_assert_msg(same || mirrored, "crop_flip image %d is neither the crop nor its mirror", i);
    flipped += mirrored && !same;
    plain += same;
  }
  /* Only the centred crop (1 in 81) adds no padding; flips are a coin each. */
  ck_assert_int_ge(cropped, n - 6);
  ck_assert_int_ge(flipped, n / 4);
  ck_assert_int_ge(plain, n / 4);
  for (int m = 0; m < 3; m++) free(runs[m]);
  /* A value it does not know is refused, naming the flag. */
  set_augment("flip");
  cnnb_datasource_config c = config(dir, 1, 4, 0, 1, 1);
  const char *why = create_fails(&c, CNNB_EINVAL);
  ASSERT_HAS(why, "--mnist_augment=flip: expected none, crop or crop_flip");
  set_augment("none");
  remove_dir(dir);
}
END_TEST

/* The crop and flip rule itself: pad to 36x36 (4 each side), crop 28x28 at (dx, dy),
 * mirror left-right after the crop; then placed in a 32x32 input at (2, 2). */
START_TEST(render_matches_pad_crop_flip) {
  uint8_t src[PIXELS], out[32 * 32];
  for (int p = 0; p < PIXELS; p++) src[p] = pattern_value(3, p / SIDE, p % SIDE);
  for (int side = SIDE; side <= 32; side += 4)
    for (int flip = 0; flip <= 1; flip++)
      for (int dy = 0; dy <= 8; dy += 4)
        for (int dx = 0; dx <= 8; dx += 2) {
          ds_crop aug = {.dx = dx, .dy = dy, .flip = flip};
          mnist_image_render(src, &aug, side, side, out);
          int at = (side - SIDE) / 2;
          for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++) {
              int cy = y - at, cx = x - at, want = 0;
              if (cy >= 0 && cy < SIDE && cx >= 0 && cx < SIDE) {
                int fx = flip ? SIDE - 1 - cx : cx;     /* column in the crop */
                int sy = cy + dy - 4, sx = fx + dx - 4; /* in the stored image */
                want = sy >= 0 && sy < SIDE && sx >= 0 && sx < SIDE ? src[sy * SIDE + sx] : 0;
              }
              ck_assert_msg(out[y * side + x] == want,
                            "%d: dx %d dy %d flip %d: (%d, %d) is %d, want %d", side, dx, dy, flip,
                            y, x, out[y * side + x], want);
            }
        }
}
END_TEST

/* Every instance of a split shares one read of its files: while one lives, a second is
 * served from memory (the file changed on disk since does not matter); once all are gone,
 * the next instance reads the files again. */
START_TEST(a_split_is_read_once_for_every_instance) {
  char *dir = make_dataset();
  cnnb_datasource_config c = config(dir, 1, 4, 0, 2, 1);
  void *first = create(&c);
  char path[4200];
  path_in(path, sizeof path, dir, "train-images-idx3-ubyte");
  ck_assert_int_eq(truncate(path, 100), 0);
  c.rank = 1;
  void *second = create(&c); /* not read again: it would fail */
  ck_assert_int_eq(vt->examples_per_epoch(second), TRAIN);
  vt->destroy(first);
  vt->destroy(second);
  ASSERT_HAS(create_fails(&c, CNNB_EDATA), "train-images-idx3-ubyte: truncated");
  remove_dir(dir);
}
END_TEST

/* ---- probe and refusals ------------------------------------------------------------- */

START_TEST(probe_claims_what_it_can_read) {
  char *dir = make_dataset();
  cnnb_datasource_config c = config(dir, 1, 2, 0, 1, 1);
  cnnb_clear_error(ctx);
  ck_assert_int_gt(vt->probe(ctx, "mnist", &c), 1); /* above synthetic */
  c.dataset = ds_plugin_test_kind("cifar10");
  cnnb_clear_error(ctx);
  ck_assert_int_eq(vt->probe(ctx, "mnist", &c), 0);
  ASSERT_HAS(cnnb_error_message(ctx), "reads --data_name=mnist or --data_name=fashion_mnist or "
                                      "--data_name=kmnist only");
  c.dataset = ds_plugin_test_kind("mnist");
  /* torchvision's layout: the files in --data_dir/raw, here gzipped only. */
  char parent[4096], sub[4200], path[4300];
  snprintf(parent, sizeof parent, "%s.parent", dir);
  ck_assert_int_eq(mkdir(parent, 0700), 0);
  snprintf(sub, sizeof sub, "%s/raw", parent);
  ck_assert_int_eq(rename(dir, sub), 0);
#ifdef MNIST_HAVE_ZLIB
  path_in(path, sizeof path, sub, "train-labels-idx1-ubyte");
  ck_assert_int_eq(unlink(path), 0);
  write_gz(sub, "train-labels-idx1-ubyte.gz", labels_file(TRAIN, uniform_label));
#endif
  c.data_dir = parent;
  cnnb_clear_error(ctx);
  ck_assert_int_gt(vt->probe(ctx, "mnist", &c), 1);
  void *s = create(&c);
  ck_assert_int_eq(vt->examples_per_epoch(s), TRAIN);
  vt->destroy(s);
  /* Without the training images: the probe says what it looked for where. */
  path_in(path, sizeof path, sub, "train-images-idx3-ubyte");
  ck_assert_int_eq(unlink(path), 0);
  cnnb_clear_error(ctx);
  ck_assert_int_eq(vt->probe(ctx, "mnist", &c), 0);
  const char *why = cnnb_error_message(ctx);
  ASSERT_HAS(why, "holds no MNIST-layout training split: looked for train-images-idx3-ubyte and "
                  "train-labels-idx1-ubyte, each plain or .gz");
  ASSERT_HAS(why, "missing train-images-idx3-ubyte and train-labels-idx1-ubyte, and in");
  ASSERT_HAS(why, "/raw, missing train-images-idx3-ubyte");
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "/raw, missing train-images-idx3-ubyte");
  /* Evaluation needs only the t10k files, which are there. */
  ds_plugin_test_probe_needs_the_dir(&harness, c, "/nonexistent/mnist",
                                     "--data_dir=/nonexistent/mnist: No such file or directory",
                                     "needs --data_dir holding the MNIST-layout IDX files "
                                     "(t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte");
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", parent);
  ck_assert_int_eq(system(cmd), 0);
  free(dir);
}
END_TEST

/* What --data_name guesses for --data_dir=dir, through the run configuration. */
static const char *guessed_dataset(const char *dir) {
  cnnb_flags *run_flags = cnnb_flags_create();
  ck_assert_int_eq(cnnb_flags_declare_core(run_flags), CNNB_OK);
  char arg[256], err[512];
  snprintf(arg, sizeof arg, "--data_dir=%s", dir);
  char *argv[] = {"cnnbench", arg};
  ck_assert_msg(cnnb_flags_parse(run_flags, 2, argv, err, sizeof err) == CNNB_OK, "%s", err);
  cnnb_run_config cfg;
  ck_assert_msg(cnnb_run_config_from_flags(run_flags, &cfg, err, sizeof err) == CNNB_OK, "%s", err);
  const char *name = cfg.dataset->name;
  cnnb_flags_destroy(run_flags);
  return name;
}

/* Every dataset published in MNIST's layout is described here once, served from the
 * same files, and guessed from a folder named for it (Debian's fashion-mnist). */
START_TEST(serves_every_mnist_layout_dataset) {
  static const char *const names[] = {"mnist", "fashion_mnist", "kmnist"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const cnnb_dataset_info *d = cnnb_dataset_find(names[i]);
    ck_assert_msg(d != NULL, "%s is not described", names[i]);
    ck_assert_int_eq(d->num_classes, 10);
    ck_assert_int_eq(d->channels, 1);
    ck_assert_int_eq(d->height, SIDE);
    ck_assert_int_eq(d->width, SIDE);
    ck_assert_int_eq(d->train_examples, 60000);
    ck_assert_int_eq(d->eval_examples, 10000);
  }
  ck_assert_uint_eq(cnnb_dataset_find("mnist")->kind, 3); /* pinned for older plugins */
  char *dir = make_dataset();
  cnnb_datasource_config c = config(dir, 1, 2, 0, 1, 1);
  c.dataset = ds_plugin_test_kind("fashion_mnist");
  cnnb_clear_error(ctx);
  ck_assert_int_gt(vt->probe(ctx, "mnist", &c), 1);
  void *s = create(&c);
  ck_assert_int_eq(vt->examples_per_epoch(s), TRAIN);
  vt->destroy(s);
  remove_dir(dir);
  ck_assert_str_eq(guessed_dataset("/usr/share/datasets/fashion-mnist"), "fashion_mnist");
  ck_assert_str_eq(guessed_dataset("/data/kmnist/raw"), "kmnist");
  ck_assert_str_eq(guessed_dataset("/data/mnist"), "mnist");
}
END_TEST

START_TEST(configs_it_cannot_serve_are_refused) {
  char *dir = make_dataset();
  cnnb_datasource_config c = config(dir, 1, 2, 0, 1, 1);
  c.channels = 3;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "its images have 1 channel (grayscale), and the model "
                                            "asks for 3");
  c.channels = 1;
  c.height = c.width = 24;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "its images are 28x28, and the model asks for 24x24: "
                                            "give --image_size=28 or larger");
  c.height = 32;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "the model asks for 32x24");
  c.height = c.width = SIDE;
  c.dataset = ds_plugin_test_kind("cifar10");
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "--data_name=cifar10: give --data_name=mnist");
  c.dataset = ds_plugin_test_kind("mnist");
  c.world_size = TRAIN + 1;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "holds 40 examples, fewer than the 41 shards");
  c.world_size = 1;
  c.batch_size = 0;
  ASSERT_HAS(create_fails(&c, CNNB_EINVAL), "batch size 0");
  remove_dir(dir);
}
END_TEST

/* ---- malformed files: each refused naming the file and the fault --------------------- */

/* A dataset whose file `name` (of the training split) is replaced by the bytes b as they
 * are (when name ends in .gz the plain file is removed: b is what the .gz holds); create
 * must fail with `status`, and its message name the file and say `fault`. */
static void refused_with(const char *name, bytes b, cnnb_status status, const char *fault) {
  char *dir = make_dataset();
  char path[4200];
  size_t len = strlen(name);
  if (len > 3 && strcmp(name + len - 3, ".gz") == 0) {
    char plain[256];
    snprintf(plain, sizeof plain, "%.*s", (int)(len - 3), name);
    path_in(path, sizeof path, dir, plain);
    ck_assert_int_eq(unlink(path), 0);
  }
  write_plain(dir, name, b);
  cnnb_datasource_config c = config(dir, 1, 4, 0, 1, 1);
  const char *why = create_fails(&c, status);
  path_in(path, sizeof path, dir, name);
  ASSERT_HAS(why, path);
  ASSERT_HAS(why, fault);
  remove_dir(dir);
}

/* b with its last `cut` bytes gone. */
static bytes cut(bytes b, size_t cut_bytes) {
  b.size -= cut_bytes;
  return b;
}

/* b with `extra` bytes appended. */
static bytes grow(bytes b, size_t extra) {
  b.data = realloc(b.data, b.size + extra);
  memset(b.data + b.size, 7, extra);
  b.size += extra;
  return b;
}

START_TEST(bad_magic_and_dimensions) {
  bytes b = images_file(TRAIN, uniform_value);
  be32(b.data, 0x12345678);
  refused_with("train-images-idx3-ubyte", b, CNNB_EDATA,
               "bad magic 0x12345678: not an IDX file (an IDX images file starts with 0x00000803)");
  b = images_file(TRAIN, uniform_value);
  be32(b.data, 0x00000d03);
  refused_with("train-images-idx3-ubyte", b, CNNB_EDATA,
               "bad magic 0x00000d03: IDX values of type 0x0d, not unsigned bytes");
  /* A labels file where the images should be: 1 dimension. */
  refused_with("train-images-idx3-ubyte", labels_file(TRAIN, uniform_label), CNNB_EDATA,
               "wrong number of dimensions: 1, where an IDX images file has 3 (magic 0x00000801, "
               "expected 0x00000803) (a labels file in place of the images?)");
  refused_with("train-labels-idx1-ubyte", images_file(TRAIN, uniform_value), CNNB_EDATA,
               "wrong number of dimensions: 3, where an IDX labels file has 1");
  const uint32_t two[2] = {TRAIN, PIXELS};
  uint8_t payload[TRAIN * PIXELS] = {0};
  refused_with("train-images-idx3-ubyte", idx_file(0x00000802, 2, two, payload, sizeof payload),
               CNNB_EDATA, "wrong number of dimensions: 2, where an IDX images file has 3");
  /* Images that are not 28x28, and a zero dimension. */
  const uint32_t d32[3] = {10, 32, 32};
  refused_with("train-images-idx3-ubyte", idx_file(0x00000803, 3, d32, payload, 10 * 32 * 32),
               CNNB_EDATA, "images of 32x32 pixels; the MNIST layout's are 28x28");
  const uint32_t d0[3] = {0, 28, 28};
  refused_with("train-images-idx3-ubyte", idx_file(0x00000803, 3, d0, payload, 0), CNNB_EDATA,
               "dimensions 0 x 28 x 28: dimension 1 is 0, so the file holds no images");
  /* A header claiming more than any file holds: refused before anything is allocated. */
  const uint32_t huge[3] = {0xffffffffu, 0xffffffffu, 28};
  refused_with("train-images-idx3-ubyte", idx_file(0x00000803, 3, huge, payload, 100), CNNB_EDATA,
               "dimensions 4294967295 x 4294967295 x 28 claim more than the 2147483648 bytes");
  /* A gzip file named without .gz. */
  bytes gzipped = {.data = malloc(64), .size = 64};
  memset(gzipped.data, 0, 64);
  gzipped.data[0] = 0x1f;
  gzipped.data[1] = 0x8b;
  gzipped.data[2] = 8;
  refused_with("train-labels-idx1-ubyte", gzipped, CNNB_EDATA,
               "gzip-compressed (an IDX labels file starts with 0x00000801): name it .gz");
}
END_TEST

START_TEST(sizes_that_disagree_with_the_dimensions) {
  /* The header says 40 images; the file holds 39 and a half. */
  refused_with("train-images-idx3-ubyte", cut(images_file(TRAIN, uniform_value), 392), CNNB_EDATA,
               "truncated: its dimensions 40 x 28 x 28 need 31376 bytes (16 of header, 31360 of "
               "images), and it holds 30984");
  /* Cut inside the header, and inside the magic. */
  refused_with("train-images-idx3-ubyte", cut(images_file(TRAIN, uniform_value), 31376 - 10),
               CNNB_EDATA,
               "truncated: 10 bytes, shorter than the 16-byte header of an IDX images file");
  refused_with("train-labels-idx1-ubyte", cut(labels_file(TRAIN, uniform_label), 48 - 3),
               CNNB_EDATA, "truncated: 3 bytes, shorter than the 4-byte IDX magic number");
  /* Trailing bytes after the labels. */
  refused_with("train-labels-idx1-ubyte", grow(labels_file(TRAIN, uniform_label), 5), CNNB_EDATA,
               "trailing bytes: its dimensions 40 account for 48 bytes, and it holds 53, 5 more");
}
END_TEST

START_TEST(labels_out_of_range_and_counts_that_differ) {
  bytes b = labels_file(TRAIN, uniform_label);
  b.data[8 + 17] = 10;
  refused_with("train-labels-idx1-ubyte", b, CNNB_EDATA,
               "example 17 has label 10, not below the run's 10 classes: give --num_classes of "
               "at least 11");
  refused_with("train-labels-idx1-ubyte", labels_file(TRAIN - 1, uniform_label), CNNB_EDATA,
               "holds 39 labels and");
  /* The message names the images file too. */
  char *dir = make_dataset();
  write_plain(dir, "t10k-images-idx3-ubyte", images_file(TEST + 1, pattern_value));
  cnnb_datasource_config c = config(dir, 0, 4, 0, 1, 1);
  const char *why = create_fails(&c, CNNB_EDATA);
  ASSERT_HAS(why, "t10k-labels-idx1-ubyte holds 12 labels and");
  ASSERT_HAS(why,
             "t10k-images-idx3-ubyte 13 images: the two files of a split have one label per image");
  /* More classes than 10 let larger labels through (EMNIST's 47 or 62). */
  b = labels_file(TEST, pattern_label);
  b.data[8 + 2] = 30;
  write_plain(dir, "t10k-images-idx3-ubyte", images_file(TEST, pattern_value));
  write_plain(dir, "t10k-labels-idx1-ubyte", b);
  ASSERT_HAS(create_fails(&c, CNNB_EDATA), "example 2 has label 30");
  c.num_classes = 47;
  vt->destroy(create(&c));
  remove_dir(dir);
}
END_TEST

START_TEST(bad_gz_files) {
#ifndef MNIST_HAVE_ZLIB
  /* Without zlib a .gz file is refused, saying how to read it. */
  char *dir = make_dataset();
  char path[4200];
  path_in(path, sizeof path, dir, "train-images-idx3-ubyte");
  char gz[4300];
  snprintf(gz, sizeof gz, "%s.gz", path);
  ck_assert_int_eq(rename(path, gz), 0);
  cnnb_datasource_config c = config(dir, 1, 4, 0, 1, 1);
  const char *why = create_fails(&c, CNNB_EUNSUPPORTED);
  ASSERT_HAS(why, gz);
  ASSERT_HAS(why, "no zlib");
  remove_dir(dir);
#else
  const char *images = "train-images-idx3-ubyte.gz", *labels = "train-labels-idx1-ubyte.gz";
  /* Cut inside the compressed data, and just before the trailer (all of the payload is
   * there, its CRC and length are not). */
  bytes b = gzip_bytes(images_file(TRAIN, uniform_value));
  refused_with(images, cut(b, b.size / 2), CNNB_EDATA,
               "truncated gzip stream: the compressed data ends after");
  b = gzip_bytes(images_file(TRAIN, uniform_value));
  refused_with(images, cut(b, 8), CNNB_EDATA,
               "inside a member (before its CRC and length trailer)");
  /* Corrupt: the CRC of the content, and bytes in the middle of the compressed data. */
  b = gzip_bytes(labels_file(TRAIN, uniform_label));
  b.data[b.size - 8] ^= 0xff;
  refused_with(labels, b, CNNB_EDATA, "corrupt gzip stream near compressed byte");
  b = gzip_bytes(images_file(TRAIN, pattern_value));
  for (size_t i = b.size / 3; i < b.size / 3 + 16; i++) b.data[i] ^= 0x5a;
  refused_with(images, b, CNNB_EDATA, "corrupt gzip stream near compressed byte");
  /* Not gzip at all, though named so. */
  refused_with(labels, labels_file(TRAIN, uniform_label), CNNB_EDATA,
               "corrupt gzip stream near compressed byte 2: incorrect header check");
  /* A whole stream whose content is wrong: the IDX faults, counted after gunzip. */
  refused_with(images, gzip_bytes(cut(images_file(TRAIN, uniform_value), 392)), CNNB_EDATA,
               "truncated after gunzip: its dimensions 40 x 28 x 28 need 31376 bytes, and the "
               "data ends after 30984");
  refused_with(labels, gzip_bytes(grow(labels_file(TRAIN, uniform_label), 5)), CNNB_EDATA,
               "trailing bytes after gunzip: its dimensions 40 account for 48 bytes, and 5 "
               "more follow");
  refused_with(labels, gzip_bytes(cut(labels_file(TRAIN, uniform_label), 48 - 7)), CNNB_EDATA,
               "truncated: 7 bytes after gunzip, shorter than the 8-byte header of an IDX "
               "labels file");
  b = images_file(TRAIN, uniform_value);
  be32(b.data, 0x00000801);
  refused_with(images, gzip_bytes(b), CNNB_EDATA, "wrong number of dimensions: 1");
  /* Bytes after the gzip member that are no second member. */
  refused_with(labels, grow(gzip_bytes(labels_file(TRAIN, uniform_label)), 20), CNNB_EDATA,
               "corrupt gzip stream near compressed byte");

  /* Two members, as `cat a.gz b.gz` makes: one file, as gzip -d reads it. */
  char *dir = make_dataset();
  bytes whole = images_file(TRAIN, uniform_value);
  bytes first = {.data = malloc(1000), .size = 1000},
        rest = {.data = malloc(whole.size - 1000), .size = whole.size - 1000};
  memcpy(first.data, whole.data, 1000);
  memcpy(rest.data, whole.data + 1000, rest.size);
  free(whole.data);
  char path[4200];
  path_in(path, sizeof path, dir, "train-images-idx3-ubyte");
  ck_assert_int_eq(unlink(path), 0);
  write_plain(dir, images, concat(gzip_bytes(first), gzip_bytes(rest)));
  cnnb_datasource_config c = config(dir, 1, 4, 0, 1, 1);
  void *s = create(&c);
  int seen[TRAIN] = {0};
  read_ids(s, 10, 4, seen);
  for (int id = 0; id < TRAIN; id++) ck_assert_int_eq(seen[id], 1);
  vt->destroy(s);
  remove_dir(dir);
#endif
}
END_TEST

int main(void) {
  load_plugin();
  Suite *s = suite_create("mnist");
  TCase *tc = tcase_create("mnist");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, plain_and_gz_read_alike);
  tcase_add_test(tc, two_shards_cover_each_epoch_once);
  tcase_add_test(tc, three_uneven_shards_cover_the_epoch);
  tcase_add_test(tc, every_epoch_reshuffles_from_the_seed);
  tcase_add_test(tc, skip_equals_reading_and_discarding);
  tcase_add_test(tc, float_batches_are_the_normalized_uint8_batches);
  tcase_add_test(tc, eval_hands_over_the_test_files_unchanged_in_order);
  tcase_add_test(tc, larger_models_get_the_image_centred_on_background);
  tcase_add_test(tc, augmentation_is_a_flag_and_training_only);
  tcase_add_test(tc, render_matches_pad_crop_flip);
  tcase_add_test(tc, a_split_is_read_once_for_every_instance);
  tcase_add_test(tc, probe_claims_what_it_can_read);
  tcase_add_test(tc, serves_every_mnist_layout_dataset);
  tcase_add_test(tc, configs_it_cannot_serve_are_refused);
  tcase_add_test(tc, bad_magic_and_dimensions);
  tcase_add_test(tc, sizes_that_disagree_with_the_dimensions);
  tcase_add_test(tc, labels_out_of_range_and_counts_that_differ);
  tcase_add_test(tc, bad_gz_files);
  suite_add_tcase(s, tc);
  return ds_plugin_test_run(&harness, s);
}

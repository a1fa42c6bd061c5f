/* preprocess_bench.c — single-thread speed of the ImageNet datasource's JPEG decode and
 * tf_cnn_benchmarks preprocessing (plugins/datasources/imagenet/), on a directory of JPEGs
 * read into memory first (so no disk is timed):
 *   decode      full-image decode to RGB at 8/8 (the baseline a plain decoder pays);
 *   train       crop sample + region decode at a DCT scale + resize + flip (+ distortions
 *               with --distortions) + normalize to [3, H, W] fp32;
 *   train_u8    the same to [H, W, 3] bytes;
 *   eval        window decode + aspect-preserving resize + central crop + normalize.
 * Prints images/sec for each, the best of --reps passes over all files, by the wall clock
 * and per second of this process's CPU time (the per-core rate, which other work on a
 * shared machine disturbs less than the wall clock).
 * Usage: preprocess_bench DIR [--size N] [--reps R] [--resize NAME] [--distortions] */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "jpeg_image.h"
#include "preprocess.h"

typedef struct file {
  uint8_t *data;
  size_t size;
} file;

static file *files;
static int num_files, cap_files;

static int add_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)ftw;
  if (type != FTW_F) return 0;
  const char *dot = strrchr(path, '.');
  if (!dot || (strcasecmp(dot, ".jpg") && strcasecmp(dot, ".jpeg"))) return 0;
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  if (num_files == cap_files) {
    cap_files = cap_files ? 2 * cap_files : 256;
    files = realloc(files, (size_t)cap_files * sizeof *files);
  }
  file *x = &files[num_files];
  x->size = (size_t)st->st_size;
  x->data = malloc(x->size ? x->size : 1);
  if (fread(x->data, 1, x->size, f) == x->size) num_files++;
  else free(x->data);
  fclose(f);
  return 0;
}

static double clock_s(clockid_t id) {
  struct timespec t;
  clock_gettime(id, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum { DECODE, TRAIN, TRAIN_U8, EVAL, NUM_MODES };
static const char *const mode_names[] = {"decode", "train", "train_u8", "eval"};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR [--size N] [--reps R] [--resize NAME] [--distortions]\n",
            argv[0]);
    return 2;
  }
  int size = 224, reps = 3, distortions = 0, resize = RESIZE_BILINEAR;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc) size = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--resize") && i + 1 < argc) resize = resize_method_parse(argv[++i]);
    else if (!strcmp(argv[i], "--distortions")) distortions = 1;
    else {
      fprintf(stderr, "preprocess_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (size <= 0 || reps <= 0 || resize < 0) {
    fprintf(stderr, "preprocess_bench: bad --size, --reps or --resize\n");
    return 2;
  }
  if (nftw(argv[1], add_file, 16, FTW_PHYS) != 0 || num_files == 0) {
    fprintf(stderr, "preprocess_bench: no JPEGs read under %s\n", argv[1]);
    return 1;
  }
  double mpix = 0;
  for (int i = 0; i < num_files; i++) {
    jpeg_info info;
    char err[256];
    if (jpeg_image_info(files[i].data, files[i].size, &info, err, sizeof err) == 0)
      mpix += (double)info.width * info.height / 1e6;
  }
  printf("%d JPEGs, %.2f Mpixel mean, target %dx%d, resize %d, distortions %d, 1 thread\n",
         num_files, mpix / num_files, size, size, resize, distortions);

  preprocess_scratch *scratch = preprocess_scratch_create();
  rgb_image image = {0};
  float *out = malloc((size_t)size * size * 3 * sizeof(float));
  uint8_t *out8 = malloc((size_t)size * size * 3);
  for (int mode = 0; mode < NUM_MODES; mode++) {
    preprocess_config cfg = {.height = size,
                             .width = size,
                             .training = mode != EVAL,
                             .resize = (resize_method)resize,
                             .distortions = distortions,
                             .mean = {0.5f, 0.5f, 0.5f},
                             .std = {0.5f, 0.5f, 0.5f}};
    double best = 1e30, best_cpu = 1e30;
    int failed = 0;
    for (int r = 0; r < reps; r++) {
      failed = 0;
      double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
      for (int i = 0; i < num_files; i++) {
        char err[256];
        int rc;
        uint64_t seed = (uint64_t)r * 1000003u + (uint64_t)i;
        if (mode == DECODE) {
          jpeg_info info;
          rc = jpeg_image_info(files[i].data, files[i].size, &info, err, sizeof err);
          if (!rc)
            rc = jpeg_image_decode_region(files[i].data, files[i].size, 0, 0, info.width,
                                          info.height, 8, &image, err, sizeof err);
        } else if (mode == TRAIN_U8) {
          rc = preprocess_image_uint8(&cfg, scratch, files[i].data, files[i].size, NULL, 0, seed,
                                      out8, err, sizeof err);
        } else {
          rc = preprocess_image(&cfg, scratch, files[i].data, files[i].size, NULL, 0, seed, out,
                                err, sizeof err);
        }
        failed += rc != 0;
      }
      double t = clock_s(CLOCK_MONOTONIC) - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
      if (t < best) best = t;
      if (c < best_cpu) best_cpu = c;
    }
    printf("%-9s %8.1f images/s wall  %8.1f images/cpu-s  (%.3f ms/image, %d failed)\n",
           mode_names[mode], num_files / best, num_files / best_cpu, 1e3 * best / num_files,
           failed);
  }
  free(out);
  free(out8);
  rgb_image_free(&image);
  preprocess_scratch_destroy(scratch);
  for (int i = 0; i < num_files; i++) free(files[i].data);
  free(files);
  return 0;
}

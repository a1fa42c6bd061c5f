/* tfrecord_dump.c — prints what cnnbench's record layer reads from TFRecord files, one line
 * per record, so shell tests compare it with other readers (TensorFlow's, or the source
 * files):
 *   tfrecord_dump FILE...         "<label> <image bytes> <fnv1a64 of image> <boxes> [ymin xmin ymax
 * xmax]..." tfrecord_dump --hash FILE...  "<fnv1a64 of the file> <bytes>" (the images mkrecords
 * read) A corrupt record or a malformed example prints the parser's message and exits 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example.h"
#include <tfrecord/tfrecord.h>

static uint64_t fnv1a64(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static int hash_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  uint64_t h = 0xcbf29ce484222325ull;
  size_t total = 0;
  int c;
  while ((c = getc(f)) != EOF) {
    h = (h ^ (uint8_t)c) * 0x100000001b3ull;
    total++;
  }
  fclose(f);
  printf("%016" PRIx64 " %zu\n", h, total);
  return 0;
}

int main(int argc, char **argv) {
  int hash = argc > 1 && !strcmp(argv[1], "--hash");
  for (int i = 1 + hash; i < argc; i++) {
    if (hash) {
      if (hash_file(argv[i])) return 1;
      continue;
    }
    tfrecord_reader *r;
    char err[600];
    if (tfrecord_open(argv[i], &r, err, sizeof err) != TFRECORD_OK) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    const uint8_t *data;
    size_t size;
    tfrecord_result res;
    while ((res = tfrecord_next(r, &data, &size, err, sizeof err)) == TFRECORD_OK) {
      example_view ex;
      if (example_parse(data, size, &ex, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", argv[i], err);
        tfrecord_close(r);
        return 1;
      }
      printf("%" PRId64 " %zu %016" PRIx64 " %d", ex.has_label ? ex.label : -1, ex.image_size,
             fnv1a64(ex.image, ex.image_size), ex.num_boxes);
      for (int b = 0; b < ex.num_boxes; b++)
        printf(" %.6g %.6g %.6g %.6g", ex.boxes[b].ymin, ex.boxes[b].xmin, ex.boxes[b].ymax,
               ex.boxes[b].xmax);
      printf("\n");
    }
    tfrecord_close(r);
    if (res != TFRECORD_END) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
  }
  return 0;
}

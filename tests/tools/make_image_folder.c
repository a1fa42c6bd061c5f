/* make_image_folder.c — writes a small ImageFolder of JPEGs for the real-data tests:
 *   make_image_folder OUT SPLIT CLASSES PER_CLASS [BAD [random]]
 * gives OUT/SPLIT/class<c>/img<i>.jpg. Every image is one flat colour that says what it
 * is, so a test can check what the pipeline delivered whatever the crop and resize:
 *   red and green: the image's id (c * PER_CLASS + i) in 16 x 16 levels (id < 256), or
 *                  with `random` levels drawn per image that say nothing of the class
 *                  (so a model that learns the classes must learn blue),
 *   blue: its class (32 + 64 c),
 * with sizes varying per image (40..99 x 30..79, odd ones included) and every fifth
 * image progressive. BAD adds that many damaged files to class 0 (a truncated JPEG, an
 * empty file, bytes that are not an image, in turn) and one PNG that is not read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

static int write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "make_image_folder: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: make_image_folder OUT SPLIT CLASSES PER_CLASS [BAD]\n");
    return 2;
  }
  const char *out = argv[1], *split = argv[2];
  int classes = atoi(argv[3]), per_class = atoi(argv[4]), bad = argc > 5 ? atoi(argv[5]) : 0;
  int random_levels = argc > 6 && strcmp(argv[6], "random") == 0;
  unsigned state = (unsigned)strlen(split) * 2654435761u; /* differs between the splits */
  if (classes < 1 || classes > 4 || per_class < 1 || classes * per_class > 256) {
    fprintf(stderr, "make_image_folder: 1..4 classes and at most 256 images\n");
    return 2;
  }
  char path[4096];
  mkdir(out, 0755);
  snprintf(path, sizeof path, "%s/%s", out, split);
  mkdir(path, 0755);
  for (int c = 0; c < classes; c++) {
    snprintf(path, sizeof path, "%s/%s/class%d", out, split, c);
    mkdir(path, 0755);
    for (int i = 0; i < per_class; i++) {
      int id = c * per_class + i;
      int width = 40 + (id * 7) % 60, height = 30 + (id * 13) % 50;
      unsigned char *rgb = malloc((size_t)width * height * 3);
      int red = 16 * (id % 16) + 8, green = 16 * (id / 16) + 8;
      if (random_levels) {
        state = state * 1103515245u + 12345u;
        red = (int)(state >> 16) & 255;
        state = state * 1103515245u + 12345u;
        green = (int)(state >> 16) & 255;
      }
      for (int p = 0; p < width * height; p++) {
        rgb[3 * p + 0] = (unsigned char)red;
        rgb[3 * p + 1] = (unsigned char)green;
        rgb[3 * p + 2] = (unsigned char)(32 + 64 * c);
      }
      /* A handle per image: TurboJPEG 2.1 reusing a handle after a progressive image
       * writes the next baseline one with a broken Huffman stream. */
      tjhandle tj = tjInitCompress();
      if (!tj) return 1;
      unsigned char *jpeg = NULL;
      unsigned long size = 0;
      int flags = id % 5 == 4 ? TJFLAG_PROGRESSIVE : 0;
      if (tjCompress2(tj, rgb, width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, flags) !=
          0) {
        fprintf(stderr, "make_image_folder: %s\n", tjGetErrorStr2(tj));
        return 1;
      }
      snprintf(path, sizeof path, "%s/%s/class%d/img%03d.jpg", out, split, c, i);
      if (write_file(path, jpeg, size) != 0) return 1;
      if (c == 0 && i < bad) {
        /* Damaged copies beside the good images, named so they sort among them. */
        static const char not_an_image[] = "this is not an image\n";
        snprintf(path, sizeof path, "%s/%s/class0/bad%03d.JPEG", out, split, i);
        int kind = i % 3;
        if (kind == 0 && write_file(path, jpeg, size / 2) != 0) return 1;
        if (kind == 1 && write_file(path, "", 0) != 0) return 1;
        if (kind == 2 && write_file(path, not_an_image, sizeof not_an_image - 1) != 0) return 1;
      }
      tjFree(jpeg);
      tjDestroy(tj);
      free(rgb);
    }
  }
  if (bad > 0) {
    static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    snprintf(path, sizeof path, "%s/%s/class0/picture.png", out, split);
    if (write_file(path, png, sizeof png) != 0) return 1;
  }
  return 0;
}

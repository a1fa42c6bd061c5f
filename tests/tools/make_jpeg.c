/* make_jpeg.c — writes a test JPEG through libturbojpeg (tjCompress2), so tests make their
 * image folders without Python or libjpeg-turbo-progs:
 *   make_jpeg OUT.jpg WIDTH HEIGHT SEED [gray|progressive]
 * The pixels are a smooth gradient plus a per-seed offset, so files of the same size
 * still differ. Exit 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s OUT.jpg WIDTH HEIGHT SEED [gray|progressive]\n", argv[0]);
    return 1;
  }
  int w = atoi(argv[2]), h = atoi(argv[3]), seed = atoi(argv[4]);
  const char *mode = argc > 5 ? argv[5] : "";
  int gray = !strcmp(mode, "gray");
  if (w <= 0 || h <= 0 || w > 8192 || h > 8192) {
    fprintf(stderr, "%s: bad size %sx%s\n", argv[0], argv[2], argv[3]);
    return 1;
  }
  int pf = gray ? TJPF_GRAY : TJPF_RGB, ch = gray ? 1 : 3;
  unsigned char *px = malloc((size_t)w * h * ch);
  if (!px) return 1;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < ch; c++)
        px[((size_t)y * w + x) * ch + c] =
            (unsigned char)((x * 255 / w + y * 97 / h + c * 60 + seed * 37) & 0xff);
  tjhandle tj = tjInitCompress();
  unsigned char *jpeg = NULL;
  unsigned long size = 0;
  int flags = !strcmp(mode, "progressive") ? TJFLAG_PROGRESSIVE : 0;
  if (!tj || tjCompress2(tj, px, w, 0, h, pf, &jpeg, &size, gray ? TJSAMP_GRAY : TJSAMP_420, 90,
                         flags) != 0) {
    fprintf(stderr, "%s: %s\n", argv[0], tj ? tjGetErrorStr2(tj) : "tjInitCompress failed");
    return 1;
  }
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(jpeg, 1, size, f) != size || fclose(f) != 0) {
    perror(argv[1]);
    return 1;
  }
  tjFree(jpeg);
  tjDestroy(tj);
  free(px);
  return 0;
}

/* jpeg_make.h — JPEGs made in memory with libjpeg (jpeg_mem_dest) for the tests of the
 * ImageNet datasource's decoder and preprocessing: RGB, grayscale or CMYK pixels, baseline
 * or progressive, optionally with an EXIF APP1 orientation marker. Header-only (static
 * functions) so that only the tests that include it need libjpeg; a test links libjpeg
 * through tests/CMakeLists.txt. */
#ifndef CNNB_TEST_JPEG_MAKE_H
#define CNNB_TEST_JPEG_MAKE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct made_jpeg {
  unsigned char *data;
  unsigned long size;
} made_jpeg;

typedef struct jpeg_make_opts {
  int components; /* 1 gray, 3 RGB, 4 CMYK (written with libjpeg's Adobe marker) */
  int quality;    /* 1..100 */
  int progressive;
  int exif_orientation; /* 0: no APP1; 1..8: an EXIF APP1 with that orientation tag */
} jpeg_make_opts;

/* An EXIF APP1 payload: "Exif\0\0", a little-endian TIFF header, IFD0 with one entry
 * (0x0112 Orientation, SHORT, 1 value). */
static size_t jpeg_make_exif(uint8_t *buf, int orientation) {
  static const uint8_t head[] = {'E', 'x', 'i', 'f', 0,    0,    'I', 'I', 42, 0, 8, 0,
                                 0,   0,   1,   0,   0x12, 0x01, 3,   0,   1,  0, 0, 0};
  memcpy(buf, head, sizeof head);
  size_t n = sizeof head;
  buf[n++] = (uint8_t)orientation;
  buf[n++] = 0;
  buf[n++] = 0;
  buf[n++] = 0;
  for (int i = 0; i < 4; i++) buf[n++] = 0; /* no next IFD */
  return n;
}

/* pixels: [h, w, components]. Returns the JPEG (free data with free()). */
static made_jpeg jpeg_make(const uint8_t *pixels, int w, int h, jpeg_make_opts o) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  made_jpeg out = {NULL, 0};
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &out.data, &out.size);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = o.components;
  c.in_color_space = o.components == 1 ? JCS_GRAYSCALE : o.components == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, o.quality ? o.quality : 90, TRUE);
  if (o.progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  if (o.exif_orientation) {
    uint8_t exif[64];
    size_t n = jpeg_make_exif(exif, o.exif_orientation);
    jpeg_write_marker(&c, JPEG_APP0 + 1, exif, (unsigned)n);
  }
  size_t stride = (size_t)w * (size_t)o.components;
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(pixels + (size_t)c.next_scanline * stride);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return out;
}

/* A smooth test picture (low frequencies, which JPEG keeps well), distinct per channel. */
static uint8_t *jpeg_make_pattern(int w, int h, int components, unsigned salt) {
  uint8_t *p = malloc((size_t)w * (size_t)h * (size_t)components + 1);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < components; c++) {
        unsigned v = (unsigned)(x * (3 + c) + y * (5 - c) + (int)salt * 17) % 512u;
        if (v > 255) v = 511 - v; /* a triangle wave: smooth, no wrap-around edge */
        p[((size_t)y * (size_t)w + (size_t)x) * (size_t)components + (size_t)c] =
            (uint8_t)(32 + v * 3 / 4);
      }
  return p;
}

#endif

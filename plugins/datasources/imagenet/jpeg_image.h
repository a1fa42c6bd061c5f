/* jpeg_image.h — JPEG decoding through libjpeg-turbo, into 8-bit RGB (HWC). Decodes only
 * what the preprocessing keeps: a region (jpeg_crop_scanline / jpeg_skip_scanlines) at the
 * smallest DCT scale (1/8, 2/8, 4/8, 8/8) whose output still covers the size asked for.
 * Grayscale and CMYK/YCCK images come out as RGB. EXIF orientation is ignored, as
 * TensorFlow's decode_jpeg and PIL's open() ignore it. Errors never longjmp past the
 * caller and never print: they fill err. */
#ifndef IMAGENET_JPEG_IMAGE_H
#define IMAGENET_JPEG_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct jpeg_info {
  int width, height;
  int components; /* 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK */
} jpeg_info;

/* A reusable RGB buffer: pixels [height, width, 3]; grows as needed. After a region
 * decode, scale_num says the DCT scale it used (scale_num / 8) and x0, y0 where the region
 * starts in the image at that scale: the region [x, x + w) decodes to the scaled columns
 * [x0, x0 + width) with x0 = floor(x * scale_num / 8) and width = ceil((x + w) * scale_num
 * / 8) - x0 (clipped to the scaled image), rows alike. The resize needs these to map output
 * pixels onto the exact crop. (Appended to the first interface: the resize could not know
 * the decoded pixels' sub-pixel placement otherwise.) */
typedef struct rgb_image {
  uint8_t *pixels;
  int width, height;
  size_t capacity;
  int scale_num;
  int x0, y0;
} rgb_image;

void rgb_image_free(rgb_image *image);

/* Header only. 0, or -1 with err ("not a JPEG (starts with 89 50 4e 47: a PNG)"). */
int jpeg_image_info(const uint8_t *data, size_t size, jpeg_info *info, char *err, size_t err_size);

/* The DCT scale numerator (1, 2, 4 or 8, over 8: the scales libjpeg-turbo decodes with
 * SIMD; the others are slower) for a w x h region that must come out at least min_w x
 * min_h: the smallest that keeps the scaled region that large (8 when min_w or min_h is
 * 0). The caller picks once and passes the scale to the decode. */
int jpeg_image_pick_scale(int w, int h, int min_w, int min_h);

/* The largest image decoded (pixels): 2^27, e.g. 16384 x 8192; ImageNet's largest is
 * under 40 million. Larger headers are refused before libjpeg allocates anything big. */
#define JPEG_IMAGE_MAX_PIXELS (1ull << 27)

/* Decodes the region x, y, w, h (full-resolution pixels, inside the image) into out,
 * scaled by scale_num / 8 (1, 2, 4 or 8: jpeg_image_pick_scale); out's size is the scaled
 * region, out->x0, y0 where it starts at that scale. A truncated or corrupt stream is an
 * error (libjpeg's warnings about corrupt data count as errors: never train on a
 * half-grey image). 0, or -1 with err. */
int jpeg_image_decode_region(const uint8_t *data, size_t size, int x, int y, int w, int h,
                             int scale_num, rgb_image *out, char *err, size_t err_size);

/* The same region found the slow way: every row and column of the image decoded (at the
 * same DCT scale), then the region kept; its pixels are the whole decode's, which differ
 * from the region decode's on the region's edges by a few levels (fancy upsampling there
 * sees the neighbours a region decode skips). tf_cnn_benchmarks'
 * --nofuse_decode_and_crop (decode_jpeg, then crop); it also reads a stream's corrupt tail
 * that a region decode stops before. */
int jpeg_image_decode_whole_then_crop(const uint8_t *data, size_t size, int x, int y, int w, int h,
                                      int scale_num, rgb_image *out, char *err, size_t err_size);

#endif

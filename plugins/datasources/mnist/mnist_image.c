/* mnist_image.c — placement, crop, flip and normalization of one example (mnist_image.h). */
#include "mnist_image.h"

#include <string.h>

#include "mnist_files.h"

void mnist_image_render(const uint8_t *src, const ds_crop *aug, int32_t height, int32_t width,
                        uint8_t *out) {
  const int32_t top = (height - MNIST_SIDE) / 2, left = (width - MNIST_SIDE) / 2;
  /* The crop at (dx, dy) of the image padded by 4, mirrored when flipped: its pixel
   * (y, x) comes from padded (y + dy, x' + dx) with x' = flip ? 27 - x : x, i.e. from the
   * stored image at (y + dy - 4, x' + dx - 4), or is background outside it. */
  const int32_t dx = aug ? aug->dx - MNIST_AUGMENT_PAD : 0;
  const int32_t dy = aug ? aug->dy - MNIST_AUGMENT_PAD : 0;
  const int32_t flip = aug ? aug->flip : 0;
  memset(out, 0, (size_t)height * (size_t)width);
  for (int32_t y = 0; y < MNIST_SIDE; y++) {
    int32_t sy = y + dy;
    uint8_t *row = out + (size_t)(top + y) * (size_t)width + (size_t)left;
    if (sy < 0 || sy >= MNIST_SIDE) continue;
    if (!aug) {
      memcpy(row, src + (size_t)sy * MNIST_SIDE, MNIST_SIDE);
      continue;
    }
    for (int32_t x = 0; x < MNIST_SIDE; x++) {
      int32_t sx = (flip ? MNIST_SIDE - 1 - x : x) + dx;
      row[x] = sx >= 0 && sx < MNIST_SIDE ? src[(size_t)sy * MNIST_SIDE + (size_t)sx] : 0;
    }
  }
}

void mnist_image_normalize(const uint8_t *pixels, size_t n, float *out) {
  const float scale = MNIST_SCALE, offset = MNIST_OFFSET;
  for (size_t i = 0; i < n; i++) out[i] = (float)pixels[i] * scale + offset;
}

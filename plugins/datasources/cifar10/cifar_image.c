/* cifar_image.c — crop, flip and normalization of one example (cifar_image.h). */
#include "cifar_image.h"

#include "cifar_files.h"

enum { PAD = 4, PLANE = CIFAR_SIDE * CIFAR_SIDE };

void cifar_image_render(const uint8_t *planes, const ds_crop *aug, uint8_t *out) {
  /* Output (y, x) of the crop at (dx, dy) in the padded image, mirrored when flipped,
   * comes from padded (y + dy, x' + dx) with x' = flip ? 31 - x : x, i.e. from the
   * stored image at (y + dy - PAD, x' + dx - PAD), or is padding (0) outside it. */
  int32_t dx = aug ? aug->dx - PAD : 0, dy = aug ? aug->dy - PAD : 0;
  int32_t flip = aug ? aug->flip : 0;
  for (int32_t y = 0; y < CIFAR_SIDE; y++) {
    int32_t sy = y + dy;
    for (int32_t x = 0; x < CIFAR_SIDE; x++) {
      int32_t sx = (flip ? CIFAR_SIDE - 1 - x : x) + dx;
      uint8_t *px = out + ((size_t)y * CIFAR_SIDE + (size_t)x) * CIFAR_CHANNELS;
      int inside = sy >= 0 && sy < CIFAR_SIDE && sx >= 0 && sx < CIFAR_SIDE;
      for (int32_t c = 0; c < CIFAR_CHANNELS; c++)
        px[c] = inside ? planes[(size_t)c * PLANE + (size_t)sy * CIFAR_SIDE + (size_t)sx] : 0;
    }
  }
}

void cifar_image_normalize(const uint8_t *hwc, float *chw) {
  const float scale = CIFAR_SCALE, offset = CIFAR_OFFSET;
  for (int32_t c = 0; c < CIFAR_CHANNELS; c++)
    for (int32_t i = 0; i < PLANE; i++)
      chw[(size_t)c * PLANE + (size_t)i] =
          (float)hwc[(size_t)i * CIFAR_CHANNELS + (size_t)c] * scale + offset;
}

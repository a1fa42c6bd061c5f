/* cifar_image.h — one CIFAR-10 example as the model gets it: tf_cnn_benchmarks'
 * Cifar10ImagePreprocessor (preprocessing.py). Training pads the 32x32 image with 4 zero
 * pixels on each side (resize_image_with_crop_or_pad to 40x40), takes a random 32x32
 * crop and flips it left-right half of the time; evaluation takes the image as it is.
 * Then normalized_image: v * (1 / 127.5) - 1, in fp32, into [-1, 1].
 *
 * The pixels leave as uint8 HWC (the datasource's uint8 transport, normalized by the
 * device) or as fp32 CHW normalized here; both apply the same affine map per element, so
 * the two transports give the model bit-identical input. */
#ifndef CIFAR_IMAGE_H
#define CIFAR_IMAGE_H

#include <stdint.h>
#include "ds_order.h"

/* normalized_image's map, per channel: value = (float)v * CIFAR_SCALE + CIFAR_OFFSET. */
#define CIFAR_SCALE ((float)(1.0 / 127.5))
#define CIFAR_OFFSET (-1.0f)

/* planes [3][32][32] as stored -> out [32][32][3]; aug (ds_order_crop, pad 4) NULL: the
 * image unchanged (eval). */
void cifar_image_render(const uint8_t *planes, const ds_crop *aug, uint8_t *out);
/* hwc [32][32][3] -> chw [3][32][32], each value (float)v * scale + offset. */
void cifar_image_normalize(const uint8_t *hwc, float *chw);

#endif

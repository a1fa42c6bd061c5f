/* mnist_image.h — one MNIST-layout example as the model gets it.
 *
 * The 28x28 image is placed in the middle of the model's height x width with background
 * (0) around it: a model built for 32x32 (the CIFAR-10 ResNets under --image_size=32)
 * gets the image padded by 2 on each side, as torchvision's Pad(2) does for LeNet-5's
 * 32x32 input; an odd difference puts the extra row or column at the bottom or right.
 * Nothing is ever cropped or resized: a smaller input is refused by the plugin. Training
 * may first augment the 28x28 (--mnist_augment): pad by 4, a random 28x28 crop, and a
 * left-right flip (ds_order_crop draws them). Evaluation takes the image as it is.
 *
 * Pixels leave as uint8 (the datasource's uint8 transport; one channel, so NHWC is NCHW)
 * or as fp32 normalized here as tf_cnn_benchmarks normalizes: v * (1 / 127.5) - 1 in fp32,
 * into [-1, 1] (the background is -1). The uint8 transport's device applies that same map
 * to the same bytes, so both give the model bit-identical input. */
#ifndef MNIST_IMAGE_H
#define MNIST_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ds_order.h"

/* The normalization's map: value = (float)v * MNIST_SCALE + MNIST_OFFSET. */
#define MNIST_SCALE ((float)(1.0 / 127.5))
#define MNIST_OFFSET (-1.0f)

enum { MNIST_AUGMENT_PAD = 4 };

/* src [28][28] as stored -> out [height][width] (height, width >= 28), the image placed
 * as above; aug NULL: unchanged (evaluation, or --mnist_augment=none); aug->flip is
 * applied as given (the caller clears it when flips are off). */
void mnist_image_render(const uint8_t *src, const ds_crop *aug, int32_t height, int32_t width,
                        uint8_t *out);
/* n pixels -> n floats, each (float)v * MNIST_SCALE + MNIST_OFFSET. */
void mnist_image_normalize(const uint8_t *pixels, size_t n, float *out);

#endif

/* distort.h — tf_cnn_benchmarks' distort_color (without YIQ: --nodistort_color_in_yiq, the
 * only form TF2 has) on a float RGB image whose values are on the [0, 255] scale:
 *   order 0: brightness, saturation, hue, contrast;
 *   order 1: brightness, contrast, saturation, hue;
 * brightness delta in [-32/255, 32/255), saturation and contrast factors in [0.5, 1.5),
 * hue delta in [-0.2, 0.2) (of the full turn), each as tf.image.random_* draws it, then
 * everything clipped to [0, 1] (here [0, 255]). tf_cnn_benchmarks picks the order by the
 * image's position in its batch; here it is drawn from the example's seed. Saturation and
 * hue are TensorFlow's AdjustSaturation / AdjustHue (through HSV, saturation clamped to
 * [0, 1], hue wrapped); contrast moves each channel towards its mean over the image. */
#ifndef IMAGENET_DISTORT_H
#define IMAGENET_DISTORT_H

#include <stddef.h>

#include "prep_rng.h"

typedef struct color_distortion {
  int order;        /* 0 or 1 */
  float brightness; /* delta on the [0, 1] scale */
  float saturation, hue, contrast;
} color_distortion;

void distort_draw(prep_rng *rng, color_distortion *d);

/* px: [n, 3] floats on the [0, 255] scale, changed in place. */
void distort_apply(const color_distortion *d, float *px, size_t n);

#endif

/* distort.h — tf_cnn_benchmarks' distort_color on a float RGB image whose values are on
 * the [0, 255] scale:
 *   order 0: brightness, saturation and hue, contrast;
 *   order 1: brightness, contrast, saturation and hue;
 * brightness delta in [-32/255, 32/255), saturation and contrast factors in [0.5, 1.5),
 * each as tf.image.random_* draws it, then everything clipped to [0, 1] (here [0, 255]).
 * tf_cnn_benchmarks picks the order by the image's position in its batch; here it is drawn
 * from the example's seed. Contrast moves each channel towards its mean over the image.
 * Saturation and hue take one of tf's two forms (its --distort_color_in_yiq):
 *   YIQ (tf's default, TF1's contrib random_hsv_in_yiq): hue turned by an angle in
 *     [-0.2 pi, 0.2 pi) and chroma scaled, one 3x3 matrix on RGB (no clamp inside);
 *   HSV (--nodistort_color_in_yiq, the only form TF2 has): TensorFlow's AdjustSaturation /
 *     AdjustHue, hue delta in [-0.2, 0.2) of the full turn, saturation clamped to [0, 1]. */
#ifndef IMAGENET_DISTORT_H
#define IMAGENET_DISTORT_H

#include <stddef.h>

#include "prep_rng.h"

typedef struct color_distortion {
  int order;        /* 0 or 1 */
  float brightness; /* delta on the [0, 1] scale */
  float saturation;
  float hue; /* HSV: of the full turn; YIQ: radians */
  float contrast;
  int yiq; /* 1: saturation and hue in YIQ; 0: in HSV */
} color_distortion;

/* yiq: 1 for tf's YIQ form, 0 for its HSV form (d->yiq says which). */
void distort_draw(prep_rng *rng, int yiq, color_distortion *d);

/* px: [n, 3] floats on the [0, 255] scale, changed in place. */
void distort_apply(const color_distortion *d, float *px, size_t n);

#endif

/* resize.h — TensorFlow 2's image resizes (tf.image.resize, antialias off) of an 8-bit RGB
 * image to float RGB, as separable passes over precomputed taps: for each output column
 * (row) the first input column (row) and K weights. The mapping from output to input is
 * general: output pixel j's centre lands at input coordinate (j + 0.5) * scale + offset,
 * so one resize can read a region decoded at a reduced DCT scale, or produce only the
 * window of a larger resize (the eval crop), with taps clamped to the input's edges as
 * TensorFlow clamps them to the image's.
 *   bilinear: half-pixel centres, 2 taps;  nearest: floor((j + 0.5) * scale), 1 tap;
 *   bicubic:  Keys a = -0.5, half-pixel centres, taps outside the input get weight 0 and
 *             the rest are renormalized (TensorFlow's ResizeBicubic, half_pixel_centers);
 *   area:     each output pixel the mean of the input area it covers (ResizeArea). */
#ifndef IMAGENET_RESIZE_H
#define IMAGENET_RESIZE_H

#include <stddef.h>
#include <stdint.h>

typedef enum resize_kernel {
  KERNEL_BILINEAR = 0,
  KERNEL_NEAREST = 1,
  KERNEL_BICUBIC = 2,
  KERNEL_AREA = 3
} resize_kernel;

/* The taps of one axis; buffers grow and are reused. */
typedef struct resize_taps {
  int n_out, taps; /* output size; K, the taps per output */
  int *start;      /* [n_out] first input index, start + K <= n_in */
  float *weight;   /* [n_out * K] */
  size_t cap_start, cap_weight;
} resize_taps;

/* Taps for n_out outputs over n_in inputs with the mapping above. 0, or -1 (memory). */
int resize_taps_make(resize_taps *t, resize_kernel kernel, int n_in, int n_out, double scale,
                     double offset);
void resize_taps_free(resize_taps *t);

/* out [ty.n_out, tx.n_out, 3] floats (values in [0, 255] scale, bicubic may overshoot)
 * from in [in_h, in_w, 3] bytes with row stride in_stride bytes. tmp: reused float buffer
 * (*tmp_cap floats) that grows. 0, or -1 (memory). */
int resize_rgb(const uint8_t *in, int in_w, int in_h, size_t in_stride, const resize_taps *tx,
               const resize_taps *ty, float *out, float **tmp, size_t *tmp_cap);

#endif

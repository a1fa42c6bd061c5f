/* crop_sample.h — tf.image.sample_distorted_bounding_box as tf_cnn_benchmarks calls it
 * (min_object_covered 0.1, aspect_ratio_range [0.75, 1.33], area_range [0.05, 1.0],
 * max_attempts 100, use_image_if_no_bounding_boxes), with TensorFlow's own arithmetic
 * (tensorflow/core/kernels/image/sample_distorted_bounding_box_op.cc): the crop's pixel
 * rectangle for an image and its boxes, the whole image when no attempt satisfies the
 * constraints. Random numbers from prep_rng instead of TensorFlow's Philox. Also the
 * eval path's central-crop window. */
#ifndef IMAGENET_CROP_SAMPLE_H
#define IMAGENET_CROP_SAMPLE_H

#include "image_box.h"
#include "prep_rng.h"

typedef struct crop_params {
  float min_object_covered;
  float min_aspect, max_aspect;
  float min_area, max_area;
  int max_attempts;
} crop_params;

/* tf_cnn_benchmarks' values. */
extern const crop_params CROP_TF_CNN_BENCHMARKS;

typedef struct crop_rect {
  int x, y, w, h;
} crop_rect;

/* The crop for a width x height image. boxes in relative coordinates (none: the whole
 * image is the object; a box outside [0, 1] or with min > max is clamped). Returns 1 when
 * an attempt succeeded, 0 when the crop is the fallback (the whole image). */
int crop_sample(const crop_params *p, int width, int height, const image_box *boxes, int num_boxes,
                prep_rng *rng, crop_rect *out);

/* tf_cnn_benchmarks' eval_image geometry, in its float32 arithmetic: an img_w x img_h
 * image resized, aspect kept, to *rw x *rh, the smallest with both sides >= 1.145x the
 * w x h target (int() of the product), then the w x h window at (*left, *top) =
 * ((rw - w) / 2, (rh - h) / 2) kept. */
void eval_window(int img_w, int img_h, int w, int h, int *rw, int *rh, int *left, int *top);

#endif

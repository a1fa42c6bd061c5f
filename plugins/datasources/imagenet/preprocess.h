/* preprocess.h — tf_cnn_benchmarks' ImageNet preprocessing (preprocessing.py), one image
 * at a time, from encoded JPEG to the model's normalized input:
 *   train: a distorted bounding-box crop (tf.image.sample_distorted_bounding_box with
 *          min_object_covered 0.1, aspect 3/4..4/3, area 5%..100%, 100 attempts, the
 *          whole image as fallback), decoding only the crop (or the whole image, then
 *          the crop: slower, edges a few levels apart), random left-right flip,
 *          resize (--resize_method), optional colour distortions;
 *   eval:  aspect-preserving resize so both sides are >= 1.145x the target (tf's
 *          central_crop fraction 0.875), then the central target-size crop;
 * then each value v in [0, 255] becomes (v / 255 - mean[c]) / std[c] (mean = std = 0.5:
 * tf_cnn_benchmarks' [-1, 1]).
 *
 * Every random choice comes from `example_seed` alone, so an example preprocesses the same
 * way whichever thread takes it. */
#ifndef IMAGENET_PREPROCESS_H
#define IMAGENET_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>
#include "image_box.h"

typedef enum resize_method {
  RESIZE_BILINEAR = 0,
  RESIZE_NEAREST = 1,
  RESIZE_BICUBIC = 2,
  RESIZE_AREA = 3,
  RESIZE_ROUND_ROBIN = 4 /* one of the four above per example, as tf_cnn_benchmarks */
} resize_method;

/* "bilinear" -> RESIZE_BILINEAR ...; -1 for an unknown name. */
int resize_method_parse(const char *name);

typedef struct preprocess_config {
  int height, width; /* the model's input */
  int training;      /* 1: the train path; 0: eval */
  resize_method resize;
  int distortions;       /* 1: colour jitter (brightness, saturation, hue, contrast) */
  int color_in_yiq;      /* with distortions: 1 saturation and hue in YIQ, 0 in HSV */
  int decode_whole;      /* 1: decode the whole image, then crop (--nofuse_decode_and_crop) */
  float mean[3], std[3]; /* per channel, on values scaled to [0, 1] */
} preprocess_config;

/* Per-thread buffers (decoded crop, resize temporaries); NULL when out of memory. */
typedef struct preprocess_scratch preprocess_scratch;
preprocess_scratch *preprocess_scratch_create(void);
void preprocess_scratch_destroy(preprocess_scratch *scratch);

/* One encoded image to out [3, height, width] fp32. boxes: the example's bounding boxes
 * (none: the whole image is the object). 0, or -1 with err (not a JPEG, corrupt,
 * truncated). Thread-safe with one scratch per thread. */
int preprocess_image(const preprocess_config *cfg, preprocess_scratch *scratch, const uint8_t *data,
                     size_t size, const image_box *boxes, int num_boxes, uint64_t example_seed,
                     float *out, char *err, size_t err_size);

/* The same image before normalization: out [height, width, 3] RGB bytes (for batches that
 * travel as uint8 and are normalized on the device). The float values preprocess_image
 * normalizes are rounded to the nearest byte and clamped to [0, 255]; with distortions on,
 * after them. 0, or -1 with err. (Added to the first interface.) */
int preprocess_image_uint8(const preprocess_config *cfg, preprocess_scratch *scratch,
                           const uint8_t *data, size_t size, const image_box *boxes, int num_boxes,
                           uint64_t example_seed, uint8_t *out, char *err, size_t err_size);

#endif

/* example.h — tf.Example records as TensorFlow's ImageNet converters write them
 * (build_imagenet_data.py), decoded and encoded without a protobuf library: the parse
 * points into the record (no copy of the JPEG), as TensorFlow's own fast Example parser
 * does. Only the features tf_cnn_benchmarks reads are kept; others are skipped. */
#ifndef IMAGENET_EXAMPLE_H
#define IMAGENET_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>
#include "image_box.h"

typedef struct example_view {
  const uint8_t *image; /* image/encoded, inside the parsed record */
  size_t image_size;
  int64_t label; /* image/class/label (ImageNet: 1..1000, as stored) */
  int has_label;
  image_box boxes[IMAGE_MAX_BOXES]; /* image/object/bbox/{ymin,xmin,ymax,xmax} */
  int num_boxes;                    /* boxes kept (at most IMAGE_MAX_BOXES) */
} example_view;

/* 0 on success; -1 with err saying what is malformed (truncated varint, wrong wire
 * type, bbox lists of unequal lengths, no image/encoded). Never reads outside data. */
int example_parse(const uint8_t *data, size_t size, example_view *out, char *err, size_t err_size);

/* What cnnbench-mkrecords writes, with build_imagenet_data.py's feature names:
 * image/encoded, image/format ("JPEG"), image/class/label, image/class/synset,
 * image/class/text, image/height, image/width, image/colorspace, image/channels,
 * image/filename and the four bbox lists (present, possibly empty). */
typedef struct example_fields {
  const uint8_t *image;
  size_t image_size;
  int64_t label;
  const char *synset, *text, *filename, *colorspace;
  int32_t height, width, channels;
  const image_box *boxes;
  int num_boxes;
} example_fields;

/* Encodes into a malloc'd buffer (*out, *out_size; free() it). 0, or -1 when out of memory. */
int example_encode(const example_fields *fields, uint8_t **out, size_t *out_size);

#endif

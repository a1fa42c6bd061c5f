/* image_box.h — a bounding box in an image's relative coordinates, as tf.Example stores
 * them (image/object/bbox/{ymin,xmin,ymax,xmax}, each in [0, 1]) and as the training crop
 * samples around them. Shared by the record parser and the preprocessing. */
#ifndef IMAGENET_IMAGE_BOX_H
#define IMAGENET_IMAGE_BOX_H

typedef struct image_box {
  float ymin, xmin, ymax, xmax;
} image_box;

/* The most boxes one example contributes to the crop; ImageNet's worst has a few dozen. */
enum { IMAGE_MAX_BOXES = 64 };

#endif

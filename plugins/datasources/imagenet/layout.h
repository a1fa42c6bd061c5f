/* layout.h — what a --data_dir holds, found once per instance: TensorFlow's TFRecord
 * shards (DIR/train-00000-of-01024, DIR/validation-00000-of-00128), or torchvision's
 * ImageFolder (DIR/train/<class>/<name>.jpg, DIR/validation/<class>/ or DIR/val/<class>/).
 * Shards win when both are there, as tf_cnn_benchmarks reads shards. */
#ifndef IMAGENET_LAYOUT_H
#define IMAGENET_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "image_folder.h"

typedef enum layout_kind { LAYOUT_TFRECORD = 1, LAYOUT_FOLDER = 2 } layout_kind;

typedef struct dataset_layout {
  layout_kind kind;
  char where[1024]; /* the files' directory or pattern, for messages */
  /* LAYOUT_TFRECORD: the shards of the split, sorted by name (a whole set of
   * <subset>-NNNNN-of-NNNNN unless allowed otherwise: shard_set.h). */
  char **files;
  size_t num_files;
  /* Counted shards: [num_files] records each file's framing reaches, and how many files
   * lose their framing (the rest of such a file cannot be read). NULL / 0 when the size
   * is ImageNet's known one and nothing was counted. */
  int64_t *file_records;
  size_t damaged_files;
  /* LAYOUT_FOLDER: the split's images; labels already mapped (see label_offset). */
  image_folder folder;
  /* Added to a folder's class index: 1 for ImageNet (1001 classes, label 0 unused, as
   * TFRecord shards store them), else 0. Record labels are used as stored. */
  int32_t label_offset;
  /* Examples in the split: counted for folders; for shards the dataset's known size when
   * the shard count is ImageNet's (1024 train / 128 validation), else counted from the
   * record headers (cheap: seeks over the data). */
  int64_t examples;
  /* What the caller should log once: shards accepted incomplete (allow_missing), files
   * that are no shard. "" when nothing. */
  char warning[2048];
} dataset_layout;

/* Finds the split (training: train; else validation) of `data_dir`. num_classes is the
 * model's output count: folder labels must fit. imagenet: 1 when the run's dataset is
 * ImageNet. allow_missing_shards: an incomplete shard set is read with a warning
 * instead of refused. 0, or -1 with err saying which layouts were looked for where. */
int layout_detect(const char *data_dir, int training, int imagenet, int32_t num_classes,
                  int64_t known_examples, int allow_missing_shards, dataset_layout *out, char *err,
                  size_t err_size);
void layout_free(dataset_layout *layout);

#endif

/* mnist_files.h — the MNIST-layout IDX files on disk: where a split's two files are, and
 * the split they hold, checked whole.
 *
 * Training reads train-images-idx3-ubyte and train-labels-idx1-ubyte, evaluation
 * t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each as it is or gzipped (the same
 * name + ".gz": how the datasets are published, and how Debian's dataset-fashion-mnist
 * installs them), from --data_dir itself or from its raw/ subfolder (torchvision's
 * datasets.MNIST / FashionMNIST download layout). A plain file is preferred to its .gz.
 * MNIST, Fashion-MNIST and KMNIST use these names; EMNIST's files, named
 * emnist-<split>-train-images-idx3-ubyte, are read once linked under them.
 *
 * Every error is a sentence naming the file at fault, for the plugin to pass on through
 * cnnb_error. */
#ifndef MNIST_FILES_H
#define MNIST_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "idx_source.h"

enum {
  MNIST_SIDE = 28,
  MNIST_PIXELS = MNIST_SIDE * MNIST_SIDE /* 784, one channel */
};

/* The split's two files, as found. */
typedef struct mnist_paths {
  char images[4096];
  char labels[4096];
} mnist_paths;

/* The examples of one split, in file order. */
typedef struct mnist_set {
  uint8_t *pixels; /* [count][28][28] as stored: row-major, 0 background */
  uint8_t *labels; /* [count] */
  int64_t count;
  uint8_t max_label; /* the largest label, of example max_label_at (checked per run
                        against its number of classes) */
  int64_t max_label_at;
  char labels_path[4096];
} mnist_set;

/* The files of the split (training 1, evaluation 0) in data_dir or data_dir/raw. 0 with
 * *paths, or -1 with err saying which files were looked for where, and which are missing. */
int mnist_find_files(const char *data_dir, int training, mnist_paths *paths, char *err,
                     size_t err_size);

/* Reads and checks both files: each an IDX file exactly (idx.h), images 28x28, as many
 * images as labels. 0, or (with err, *set empty) an IDX_* result. */
int mnist_load(const mnist_paths *paths, mnist_set *set, char *err, size_t err_size);
void mnist_set_free(mnist_set *set);

/* Reads one IDX file of ndims dimensions at path, plain or, when its name ends in ".gz",
 * gunzipped. An idx_load result. */
struct idx_data;
int mnist_read_idx(const char *path, int ndims, struct idx_data *out, char *err, size_t err_size);

#endif

/* cnnb/dataset.h — the datasets a run can name (--data_name) and their facts: how many
 * classes a model classifies them into, the shape of their images and how many examples
 * each split holds. Each fact lives once, in the datasource plugin that reads the dataset
 * (its describe_dataset slot, datasource.h); the host collects the descriptions when it
 * loads the plugins, and the host (--data_name, --num_epochs), models (which variant, the
 * input shape, schedules in epochs) and other datasources (synthetic data shaped like a
 * dataset) read them back through the functions below.
 *
 * Kinds. A dataset's kind is the host's number for it in this process: models get it
 * (model.h: describe, build, learning_rate_at) and datasources too
 * (cnnb_datasource_config.dataset), and cnnb_dataset_lookup(kind) gives its facts.
 * Hosts before ABI 1.13 had a fixed table (imagenet 1, cifar10 2, mnist 3) and plugins
 * built then compare kinds with those numbers, so a description may pin its kind to one of
 * those three (the datasource that reads that dataset does), and the host numbers every
 * other dataset from 4 up, in discovery order. Code written for 1.13 compares names or
 * reads the facts; it never compares numbers. */
#ifndef CNNB_DATASET_H
#define CNNB_DATASET_H

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds pinned for plugins built before 1.13 are 1 up to this. */
#define CNNB_DATASET_PINNED_KINDS 3

/* ABI 1.3; a datasource describes its datasets with it since 1.13. */
typedef struct cnnb_dataset_info {
  uint32_t struct_size;
  uint32_t kind;          /* the host's number (above). In a plugin's description: 0, or
                             the pinned 1.x kind of the dataset it describes */
  const char *name;       /* as --data_name spells it: "imagenet", "cifar10", "mnist";
                             lower-case letters, digits and '_' */
  int32_t num_classes;    /* the classifier's outputs (imagenet: 1001, as tf_cnn_benchmarks) */
  int32_t channels;       /* of its images: 3 (mnist: 1) */
  int64_t train_examples; /* one training epoch (imagenet: 1281167) */
  int64_t eval_examples;  /* the validation / test split (imagenet: 50000) */
  /* ABI 1.13 */
  int32_t height, width; /* every image's stored size (cifar10: 32x32); 0 when sizes vary
                            and images are resized to the model's input size (imagenet) */
} cnnb_dataset_info;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_dataset_info, height) == 40, "ABI: 1.3 layout moved");
_Static_assert(sizeof(cnnb_dataset_info) == 48, "ABI: grow cnnb_dataset_info only by appending");
#endif

/* [main-thread, after the host loaded the plugins] [any-thread afterwards] The facts of
 * dataset `kind` (a copy the host keeps until it unloads the plugins), or NULL when no
 * loaded datasource describes it. */
CNNB_EXPORT const cnnb_dataset_info *cnnb_dataset_lookup(uint32_t kind);
/* [same rules] The dataset called `name` ("imagenet"), or NULL. */
CNNB_EXPORT const cnnb_dataset_info *cnnb_dataset_find(const char *name);
/* ABI 1.13. [same rules] The index-th dataset this host knows (from 0, in kind order), or
 * NULL past the last: how a plugin lists them all (kinds may have gaps when a pinned
 * dataset's datasource is not installed). */
CNNB_EXPORT const cnnb_dataset_info *cnnb_dataset_at(uint32_t index);

#ifdef __cplusplus
}
#endif
#endif

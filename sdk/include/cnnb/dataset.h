/* cnnb/dataset.h — the datasets cnnbench knows by name, and their facts: how many classes
 * a model classifies them into and how many examples an epoch holds. These facts live
 * here once; the host (--data_name, --num_epochs), models (schedules in epochs) and
 * datasources (synthetic data shaped like a dataset) all read them from this table.
 *
 * Dataset kinds are ABI: append only, never renumber. */
#ifndef CNNB_DATASET_H
#define CNNB_DATASET_H

#include "abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cnnb_dataset_kind {
  CNNB_DATASET_IMAGENET = 1, /* 1001 classes, label 0 unused, as tf_cnn_benchmarks */
  CNNB_DATASET_CIFAR10 = 2,  /* 10 classes, 32x32 */
  CNNB_DATASET_MNIST = 3     /* 10 classes, 28x28x1, 60,000 / 10,000 (IDX files); Fashion-MNIST
                                and KMNIST share the layout */
} cnnb_dataset_kind;

/* ABI 1.3. */
typedef struct cnnb_dataset_info {
  uint32_t struct_size;
  uint32_t kind;          /* cnnb_dataset_kind */
  const char *name;       /* as --data_name spells it: "imagenet", "cifar10", "mnist" */
  int32_t num_classes;    /* the classifier's outputs (imagenet: 1001, as tf_cnn_benchmarks) */
  int32_t channels;       /* of its images: 3 (mnist: 1) */
  int64_t train_examples; /* one training epoch (imagenet: 1281167) */
  int64_t eval_examples;  /* the validation / test split (imagenet: 50000) */
} cnnb_dataset_info;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_dataset_info) == 40, "ABI: grow cnnb_dataset_info only by appending");
#endif

/* [any-thread] The facts of dataset `kind`, or NULL when this host does not know it.
 * Kinds are numbered from 1 without gaps: walking up from 1 until NULL lists them all. */
CNNB_EXPORT const cnnb_dataset_info *cnnb_dataset_lookup(uint32_t kind);
/* [any-thread] The dataset called `name` ("imagenet"), or NULL. */
CNNB_EXPORT const cnnb_dataset_info *cnnb_dataset_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif

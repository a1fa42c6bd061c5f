/* dataset.c — the table behind cnnb/dataset.h: every dataset's facts, in one place. The
 * counts are those of the datasets tf_cnn_benchmarks reads (datasets.py). */
#include <string.h>
#include <cnnb/dataset.h>

static const cnnb_dataset_info datasets[] = {
    {.struct_size = sizeof(cnnb_dataset_info),
     .kind = CNNB_DATASET_IMAGENET,
     .name = "imagenet",
     .num_classes = 1001,
     .channels = 3,
     .train_examples = 1281167,
     .eval_examples = 50000},
    {.struct_size = sizeof(cnnb_dataset_info),
     .kind = CNNB_DATASET_CIFAR10,
     .name = "cifar10",
     .num_classes = 10,
     .channels = 3,
     .train_examples = 50000,
     .eval_examples = 10000},
    {.struct_size = sizeof(cnnb_dataset_info),
     .kind = CNNB_DATASET_MNIST,
     .name = "mnist",
     .num_classes = 10,
     .channels = 1,
     .train_examples = 60000,
     .eval_examples = 10000},
};
enum { NUM_DATASETS = sizeof datasets / sizeof datasets[0] };

const cnnb_dataset_info *cnnb_dataset_lookup(uint32_t kind) {
  /* The table is in kind order from 1, so a kind is its row plus one. */
  return kind >= 1 && kind <= NUM_DATASETS ? &datasets[kind - 1] : NULL;
}

const cnnb_dataset_info *cnnb_dataset_find(const char *name) {
  for (size_t i = 0; name && i < NUM_DATASETS; i++)
    if (strcmp(datasets[i].name, name) == 0) return &datasets[i];
  return NULL;
}

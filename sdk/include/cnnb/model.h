/* cnnb/model.h — what a model plugin provides: facts about each model it offers, and a
 * build function that describes the network through the graph builder (graph.h).
 *
 * A model never sees a device: it describes layers once and any device runs them. */
#ifndef CNNB_MODEL_H
#define CNNB_MODEL_H

#include "ctx.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cnnb_dataset_kind {
  CNNB_DATASET_IMAGENET = 1, /* 1001 classes, label 0 unused, as tf_cnn_benchmarks */
  CNNB_DATASET_CIFAR10 = 2   /* 10 classes, 32x32 */
} cnnb_dataset_kind;

/* tf_cnn_benchmarks' per-model defaults. */
typedef struct cnnb_model_info {
  uint32_t struct_size;
  int32_t image_size;            /* height = width */
  int32_t default_batch_size;
  float default_learning_rate;   /* when the model has no schedule of its own */
  const char *description;       /* one line for --help / --list_plugins */
} cnnb_model_info;

typedef struct cnnb_model_vtable {
  uint32_t struct_size;
  /* Facts about `name` (one of the plugin's offers) for the given dataset. Returns
   * CNNB_EUNSUPPORTED (with a message) when the model has no variant for it. */
  cnnb_status (*describe)(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                          cnnb_model_info *info);
  /* Adds the network from cnnb_graph_input(g) to its logits and calls
   * cnnb_graph_set_logits(). */
  cnnb_status (*build)(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g);
  /* Optional (NULL: constant --init_learning_rate or the default): the model's own
   * learning-rate schedule, as tf_cnn_benchmarks' get_learning_rate(). */
  float (*learning_rate)(const char *name, int64_t global_step, int32_t global_batch_size,
                         int64_t examples_per_epoch);
} cnnb_model_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(cnnb_model_info) == 24, "ABI: grow cnnb_model_info only by appending");
_Static_assert(sizeof(cnnb_model_vtable) == 32, "ABI: grow cnnb_model_vtable only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif

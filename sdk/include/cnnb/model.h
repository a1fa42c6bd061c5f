/* cnnb/model.h — what a model plugin provides: facts about each model it offers, and a
 * build function that describes the network through the graph builder (graph.h).
 *
 * A model never sees a device: it describes layers once and any device runs them. A model
 * plugin has no instances: each call gets the ctx of the model the user picked (its flags,
 * its errors), and keeps no state of its own between calls. */
#ifndef CNNB_MODEL_H
#define CNNB_MODEL_H

#include "ctx.h"
#include "dataset.h"
#include "graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tf_cnn_benchmarks' per-model defaults. */
typedef struct cnnb_model_info {
  uint32_t struct_size;
  int32_t image_size; /* height = width */
  int32_t default_batch_size;
  float default_learning_rate; /* when the model has no schedule of its own; finite, > 0 */
  const char *description;     /* one line for --help / --list_plugins */
  /* ABI 1.14: the model's reference training recipe (torchvision's, the paper's), the
   * defaults of a run whose command line does not set the matching flag. optimizer NULL:
   * no recipe (a plugin built before 1.14 never sets one), the host's defaults
   * (tf_cnn_benchmarks') stand and the fields below are not read; otherwise each field
   * below is the recipe's (0 is a value: no weight decay, no smoothing). */
  const char *optimizer; /* an --optimizer name: "sgd", "momentum", "rmsprop", "adam" */
  float momentum;        /* --momentum: momentum's, rmsprop's (--rmsprop_momentum); [0, 1) */
  int32_t nesterov;      /* --nesterov: 1 Nesterov momentum (tf_cnn_benchmarks'), 0 plain
                            (torch.optim.SGD's) */
  float weight_decay;    /* --weight_decay: L2, over the params that take decay; [0, 1] */
  float label_smoothing; /* --label_smoothing: [0, 1) */
  float epsilon;         /* --rmsprop_epsilon / --adam_epsilon, TF's form (inside the square
                            root: torch's eps e is about e^2 here); 0: the flag's default */
  const char *recipe;    /* may be NULL: the whole recipe in one line, as its source gives it,
                            what cnnbench does not apply included (augmentation, EMA), for
                            --model_info */
} cnnb_model_info;

typedef struct cnnb_model_vtable {
  uint32_t struct_size;
  /* [required] [main-thread] once per run, before build: facts about `name` (one of the
   * plugin's offers) for `dataset` (its kind: cnnb_dataset_lookup() gives the dataset's
   * classes, channels and image size, dataset.h). Returns CNNB_EUNSUPPORTED (with a
   * message) when the model has no variant for that dataset. */
  cnnb_status (*describe)(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_model_info *info);
  /* [required] [main-thread] once per run: adds the network from cnnb_graph_input(g) to
   * its logits and calls cnnb_graph_set_logits(). A failure returns its status with a
   * message (cnnb_error); builder errors may be left in the graph (cnnb_graph_status). */
  cnnb_status (*build)(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g);
  /* [optional] [step-thread] per step, when no learning-rate flag overrides it: the
   * model's own schedule, as tf_cnn_benchmarks' get_learning_rate(). Superseded by
   * learning_rate_at (ABI 1.3), which the host calls instead when a plugin sets both.
   * NULL (with learning_rate_at NULL too): the constant default_learning_rate. */
  float (*learning_rate)(const char *name, int64_t global_step, int32_t global_batch_size,
                         int64_t examples_per_epoch);
  /* ABI 1.3 */
  /* [optional] [step-thread] per step: learning_rate with the model's ctx, so a schedule
   * can read the plugin's own flags (cnnb_flag_float(ctx, ...)) without keeping state,
   * and the dataset, as describe and build get it. `examples_per_epoch` is the
   * datasource's epoch (cnnb_datasource_vtable.examples_per_epoch), so epochs mean the
   * same to the model as to the host; 0 when the datasource does not know it. */
  float (*learning_rate_at)(cnnb_ctx *ctx, const char *name, uint32_t dataset, int64_t global_step,
                            int32_t global_batch_size, int64_t examples_per_epoch);
} cnnb_model_vtable;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(cnnb_model_info, optimizer) == 24, "ABI: 1.0 layout moved");
_Static_assert(sizeof(cnnb_model_info) == 64, "ABI: grow cnnb_model_info only by appending");
_Static_assert(offsetof(cnnb_model_vtable, learning_rate) == 24, "ABI: 1.0 layout moved");
_Static_assert(sizeof(cnnb_model_vtable) == 40, "ABI: grow cnnb_model_vtable only by appending");
#endif

#ifdef __cplusplus
}
#endif
#endif

/* zoo.h — the torchvision building blocks the zoo's models share, on the cnnbench SDK
 * alone (<cnnb/cnnb.h>): each helper builds what its torchvision module computes, with
 * torchvision's defaults, and names its parameters with torchvision's state_dict keys
 * (cnnb_graph_set_checkpoint_name), so a checkpoint loads into torchvision as it is.
 *
 * Compiled into each zoo plugin (not a library of its own). Errors stay in the graph
 * (the builder keeps the first); a model checks once, at the end, with zoo_finish(). */
#ifndef ZOO_H
#define ZOO_H

#include <cnnb/cnnb.h>

/* The activations torchvision's models use, by their torch.nn names. */
typedef enum zoo_act {
  ZOO_IDENTITY = 0,
  ZOO_RELU,
  ZOO_HARDSWISH,
  ZOO_HARDSIGMOID,
  ZOO_SILU,
  ZOO_SIGMOID
} zoo_act;

/* One model being built: its graph and the batch norm every conv_norm_act uses. */
typedef struct zoo {
  cnnb_graph *g;
  float bn_eps;   /* torch's eps */
  float bn_decay; /* 1 - torch's momentum */
} zoo;

/* nn.BatchNorm2d's defaults: eps 1e-5, momentum 0.1. */
void zoo_init(zoo *z, cnnb_graph *g);

/* The key "<prefix>.<suffix>" (or suffix alone for an empty prefix) into buf. */
const char *zoo_key(char *buf, size_t size, const char *prefix, const char *suffix);

/* x's channels; 0 when x is not a node (a builder call before failed: its error is in
 * the graph, and the calls that take the 0 fail too, so zoo_finish reports the first). */
int32_t zoo_channels(const zoo *z, cnnb_tensor x);

cnnb_tensor zoo_act_apply(zoo *z, cnnb_tensor x, zoo_act act);

/* nn.Conv2d(in, out, k, stride, padding, groups=groups, bias=bias) saved as `key`;
 * kernel init `init` (CNNB_INIT_DEFAULT: kaiming normal, fan_out, as torchvision's
 * models initialise their convolutions), bias zeros. */
cnnb_tensor zoo_conv(zoo *z, const char *key, cnnb_tensor x, int32_t out, int32_t k, int32_t stride,
                     int32_t padding, int32_t groups, int bias, cnnb_init init);
/* nn.BatchNorm2d (learned scale and offset) saved as `key`. */
cnnb_tensor zoo_batch_norm(zoo *z, const char *key, cnnb_tensor x);
/* torchvision.ops.Conv2dNormActivation: conv (no bias, padding (k - 1) / 2) as
 * "<prefix>.0", batch norm as "<prefix>.1", then act. */
cnnb_tensor zoo_conv_norm_act(zoo *z, const char *prefix, cnnb_tensor x, int32_t out, int32_t k,
                              int32_t stride, int32_t groups, zoo_act act);
/* torchvision.ops.SqueezeExcitation: x * scale_act(fc2(act(fc1(avgpool(x))))), fc1 and fc2
 * 1x1 convs with bias as "<prefix>.fc1", "<prefix>.fc2". */
cnnb_tensor zoo_squeeze_excitation(zoo *z, const char *prefix, cnnb_tensor x, int32_t squeeze,
                                   zoo_act act, zoo_act scale_act);
/* nn.Linear(K, units) on x flattened, saved as `key`: weights from `init`, bias zeros. */
cnnb_tensor zoo_linear(zoo *z, const char *key, cnnb_tensor x, int32_t units, cnnb_init init);

/* torchvision's _make_divisible(v, divisor): v rounded to a multiple of divisor, never
 * below divisor nor more than 10% under v. */
int32_t zoo_make_divisible(double v, int32_t divisor);

/* How a recipe's learning rate moves, after its warm-up. */
typedef enum zoo_schedule {
  ZOO_CONSTANT = 0,
  ZOO_STEP,   /* times `factor` every `every` epochs from epoch 0, warm-up or not (torch's
                 StepLR, TF's staircase exponential_decay of the global step) */
  ZOO_COSINE, /* to 0 by `epochs`, from the warm-up's end (torch's CosineAnnealingLR after
                 torchvision's LinearLR warm-up) */
  ZOO_LINEAR  /* to 0 by `epochs` (ShuffleNet's linear decay) */
} zoo_schedule;

/* A model's reference training recipe (torchvision's references/classification, or
 * the paper's where torchvision ported the weights), as cnnb_model_info's 1.14 fields
 * and the model's learning_rate_at take it: the defaults of a run that does not set the
 * flags. */
typedef struct zoo_recipe {
  float learning_rate;   /* for a batch of `batch`: the run's is scaled to its global batch */
  int32_t batch;         /* the recipe's global batch */
  const char *optimizer; /* --optimizer's name */
  float momentum;
  int32_t nesterov;
  float weight_decay, label_smoothing;
  float epsilon; /* TF's form; 0: the flag's */
  zoo_schedule schedule;
  double every, factor; /* ZOO_STEP */
  double epochs;        /* ZOO_COSINE, ZOO_LINEAR: the recipe's length */
  double warmup_epochs; /* linear warm-up from warmup_start times the rate; 0: none */
  double warmup_start;
  /* 1: the rate moves every step, with the fractional epoch (TF's schedules, the papers');
   * 0: once an epoch, at whole epochs, as torchvision's train.py steps its schedulers. */
  int32_t per_step;
  const char *text; /* the whole recipe, for --model_info */
} zoo_recipe;

/* The recipe's learning rate at global step `step` (cnnb_model_vtable.learning_rate_at's
 * arguments); a run whose epoch is unknown (examples_per_epoch 0) stays at the rate. */
float zoo_learning_rate(const zoo_recipe *r, int64_t step, int32_t global_batch_size,
                        int64_t examples_per_epoch);

/* Defines the plugin's `learning_rate_at` (cnnb_model_vtable's, for its vtable): the
 * schedule of `recipe`, which every model of the plugin shares, when no learning-rate
 * flag gives one. */
#define ZOO_RECIPE_SCHEDULE(recipe)                                                          \
  static float learning_rate_at(cnnb_ctx *ctx, const char *name, uint32_t dataset,           \
                                int64_t global_step, int32_t global_batch_size,              \
                                int64_t examples_per_epoch) {                                \
    (void)ctx, (void)name, (void)dataset;                                                    \
    return zoo_learning_rate(&(recipe), global_step, global_batch_size, examples_per_epoch); \
  }

/* The common describe: the dataset's stored size when it has one (small images keep their
 * size: the networks pool globally), else 224, ImageNet's; every dataset's channels; the
 * model's recipe. Refused, naming both sizes, when the stored size is below min_size, the
 * least the model's strides leave a pixel of. */
cnnb_status zoo_describe(cnnb_ctx *ctx, const char *model, uint32_t dataset, cnnb_model_info *info,
                         int32_t min_size, const zoo_recipe *recipe, const char *description);

/* Sets the logits and reports the graph's first error, if any. */
cnnb_status zoo_finish(cnnb_ctx *ctx, zoo *z, cnnb_tensor logits);

#endif

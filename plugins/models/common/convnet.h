/* convnet.h — tf_cnn_benchmarks' ConvNetBuilder for the built-in model plugins: the
 * same layer helpers (conv, mpool, apool, affine, batch_norm, dropout, lrn,
 * inception_module, spatial_mean) with the same defaults, so a model file reads like
 * its Python original and gets the same parameters and initializers.
 *
 * Defaults (tf_cnn_benchmarks' convnet_builder.py):
 *  - conv: SAME padding, variance-scaling kernel init, then either a bias (init 0.0) or,
 *    when batch norm is on, the builder's batch_norm_config and no bias; then ReLU;
 *  - batch_norm: decay 0.999, epsilon 0.001, offset only (no scale);
 *  - affine: truncated normal stddev sqrt(2 / K) before a ReLU and sqrt(1 / K) when
 *    linear, bias 0.0, then ReLU;
 *  - mpool / apool: VALID, stride 2.
 * Names follow the builder's per-kind counters ("conv3", "mpool1", "affine0"), each
 * conv in its own scope ("conv3/conv2d", "conv3/batchnorm3"), as TF's variable names.
 *
 * Unlike the Python builder, tensors are passed explicitly (no implicit top_layer):
 * every helper takes its input and returns its output. Errors stay in the graph (the
 * builder's sticky error), so model code is straight-line and checks once, at the end,
 * with convnet_finish().
 *
 * This file is compiled into each model plugin (not a library of its own), so a
 * family folder also builds out of tree with nothing but the installed SDK. */
#ifndef CNNB_MODELS_CONVNET_H
#define CNNB_MODELS_CONVNET_H

#include <cnnb/cnnb.h>

/* Padding modes of conv() and the pools, as tf_cnn_benchmarks spells them. */
enum {
  CONVNET_DEFAULT = 0, /* conv: SAME; pools: VALID */
  CONVNET_SAME = 1,
  CONVNET_VALID = 2,
  CONVNET_SAME_RESNET = 3 /* stride 1: SAME; else pad (k-1)/2 before, the rest after, then VALID */
};

enum { CONVNET_MAX_KINDS = 24 };

typedef struct convnet {
  cnnb_graph *g;
  int use_batch_norm;                  /* conv()'s default for use_batch_norm */
  cnnb_batch_norm_desc bn_config;      /* what conv() passes to batch_norm() */
  const char *keys[CONVNET_MAX_KINDS]; /* name counters: "conv", "mpool", ... */
  int counts[CONVNET_MAX_KINDS];
} convnet;

/* Starts a builder on g: batch norm off, batch_norm_config empty (the defaults). */
void convnet_init(convnet *cn, cnnb_graph *g);

/* Opens a scope named key + its counter ("resnet_v13"), as the model files'
 * tf.variable_scope(name_key + str(cnn.counts[name_key])); close with convnet_pop_scope. */
void convnet_push_scope(convnet *cn, const char *key);
void convnet_pop_scope(convnet *cn);

/* conv()'s keyword arguments. Zero fields are tf_cnn_benchmarks' defaults. */
typedef struct convnet_conv_opts {
  int32_t stride; /* both dimensions; 0: 1 */
  int mode;       /* CONVNET_*; 0: SAME */
  int batch_norm; /* 0: the builder's use_batch_norm; 1: on; -1: off */
  int linear;     /* 1: activation None ('linear'); 0: ReLU */
  int no_bias;    /* 1: bias=None (no bias even without batch norm) */
  float bias;     /* bias init when there is a bias */
  float stddev;   /* > 0: truncated normal kernel init with this stddev */
  cnnb_init init; /* explicit kernel init (overrides stddev) */
  int32_t groups; /* 0: 1; == channels: depthwise */
  /* Checkpoint names (cnnb_graph_set_checkpoint_name): the key prefix of the conv's
   * params ("layer1.0.conv1": "layer1.0.conv1.weight") and of its batch norm's
   * ("layer1.0.bn1"), for models saved under torchvision's state_dict keys. NULL: the
   * params' own names. ckpt_bn is unused when the conv has no batch norm. Copied. */
  const char *ckpt;
  const char *ckpt_bn;
} convnet_conv_opts;

#define CONVNET_OPTS(...) (&(const convnet_conv_opts){__VA_ARGS__})

/* [N, C, H, W] -> [N, filters, H', W'] */
cnnb_tensor convnet_conv(convnet *cn, cnnb_tensor x, int32_t filters, int32_t kh, int32_t kw,
                         const convnet_conv_opts *opts);

/* Pools: mode CONVNET_DEFAULT is VALID; stride 0 is 2 (the Python default). */
cnnb_tensor convnet_mpool(convnet *cn, cnnb_tensor x, int32_t kh, int32_t kw, int32_t stride,
                          int mode);
cnnb_tensor convnet_apool(convnet *cn, cnnb_tensor x, int32_t kh, int32_t kw, int32_t stride,
                          int mode);

/* affine(): stddev 0 means the default (sqrt(init_factor / K)). */
typedef struct convnet_affine_opts {
  int linear;
  float bias;
  float stddev;
  const char *ckpt; /* checkpoint name ("classifier.0"), as convnet_conv_opts' ckpt */
} convnet_affine_opts;

#define CONVNET_AFFINE(...) (&(const convnet_affine_opts){__VA_ARGS__})

cnnb_tensor convnet_affine(convnet *cn, cnnb_tensor x, int32_t units,
                           const convnet_affine_opts *opts);

/* batch_norm(): desc NULL is batch_norm()'s own defaults (not bn_config). */
cnnb_tensor convnet_batch_norm(convnet *cn, cnnb_tensor x, const cnnb_batch_norm_desc *desc);
cnnb_tensor convnet_relu(convnet *cn, cnnb_tensor x);
cnnb_tensor convnet_dropout(convnet *cn, cnnb_tensor x, float keep_prob);
cnnb_tensor convnet_lrn(convnet *cn, cnnb_tensor x, int32_t depth_radius, float bias, float alpha,
                        float beta);
cnnb_tensor convnet_add(convnet *cn, cnnb_tensor a, cnnb_tensor b);
cnnb_tensor convnet_concat(convnet *cn, int32_t count, const cnnb_tensor *xs);
/* reshape([-1, units]): [N, C, H, W] -> [N, units, 1, 1]; the builder refuses (a clear
 * error naming both shapes) when C*H*W != units, e.g. for an image size the model's
 * fixed layer arithmetic does not fit, as TF would. */
cnnb_tensor convnet_reshape(convnet *cn, cnnb_tensor x, int32_t units);
cnnb_tensor convnet_spatial_mean(convnet *cn, cnnb_tensor x);

/* ---- inception_module(): columns of layers, concatenated along channels ---------- */

enum {
  CONVNET_LAYER_END = 0,
  CONVNET_LAYER_CONV,
  CONVNET_LAYER_MPOOL,
  CONVNET_LAYER_APOOL,
  CONVNET_LAYER_SHARE
};

/* One layer of a column: ('conv', filters, kh, kw[, stride, stride, mode]),
 * ('mpool'|'apool', kh, kw, stride, stride, mode) or ('share',) — the layer at the same
 * position of the previous column. */
typedef struct convnet_layer {
  int type;
  int32_t filters; /* conv only */
  int32_t kh, kw;
  int32_t stride; /* 0: 1 for conv, 2 for pools (the Python defaults) */
  int mode;       /* CONVNET_* */
} convnet_layer;

enum { CONVNET_MAX_COLS = 8, CONVNET_MAX_COL_LAYERS = 8 };

/* Column entries, spelled as in the Python tables. */
#define CONVNET_L_CONV(f, kh, kw) \
  { CONVNET_LAYER_CONV, (f), (kh), (kw), 1, CONVNET_SAME }
#define CONVNET_L_CONVS(f, kh, kw, s, mode) \
  { CONVNET_LAYER_CONV, (f), (kh), (kw), (s), (mode) }
#define CONVNET_L_MPOOL(kh, kw, s, mode) \
  { CONVNET_LAYER_MPOOL, 0, (kh), (kw), (s), (mode) }
#define CONVNET_L_APOOL(kh, kw, s, mode) \
  { CONVNET_LAYER_APOOL, 0, (kh), (kw), (s), (mode) }
#define CONVNET_L_SHARE \
  { CONVNET_LAYER_SHARE, 0, 0, 0, 0, 0 }

/* cols: `ncols` columns of up to CONVNET_MAX_COL_LAYERS layers, each ended by a
 * CONVNET_LAYER_END (zeroed) entry. Named name + its own counter ("incept_v3_a2"). */
cnnb_tensor convnet_inception_module(convnet *cn, const char *name, cnnb_tensor x, int ncols,
                                     const convnet_layer cols[][CONVNET_MAX_COL_LAYERS]);

/* convnet_inception_module whose convs are saved under torchvision's Inception keys
 * (BasicConv2d: a conv, then its batch norm): names[c][l] names column c's layer l
 * inside module ckpt ("Mixed_5b", "branch1x1"), its conv saved as
 * "<ckpt>.<name>.conv" and its batch norm as "<ckpt>.<name>.bn"; NULL for pools and
 * shares. ckpt NULL is convnet_inception_module. */
cnnb_tensor convnet_inception_module_named(convnet *cn, const char *name, cnnb_tensor x, int ncols,
                                           const convnet_layer cols[][CONVNET_MAX_COL_LAYERS],
                                           const char *ckpt,
                                           const char *const names[][CONVNET_MAX_COL_LAYERS]);

/* ---- the end of build() ------------------------------------------------------------- */

/* The input channels of tensor x (0 when x is CNNB_NO_TENSOR). */
int32_t convnet_channels(const convnet *cn, cnnb_tensor x);
cnnb_shape convnet_shape(const convnet *cn, cnnb_tensor x);

/* Adds the final linear affine to num_classes (CNNModel.build_network), sets the
 * logits, and returns the graph's status with its message recorded in ctx
 * ("model resnet50: <builder's message>"). */
cnnb_status convnet_finish(convnet *cn, cnnb_ctx *ctx, const char *model, cnnb_tensor top);

/* convnet_finish whose classifier is saved under checkpoint name ckpt ("fc": "fc.weight",
 * "fc.bias"); ckpt NULL is convnet_finish. */
cnnb_status convnet_finish_named(convnet *cn, cnnb_ctx *ctx, const char *model, cnnb_tensor top,
                                 const char *ckpt);

/* Returns the builder's status, recording its message in ctx (for models whose
 * classifier is not the plain affine). */
cnnb_status convnet_status(convnet *cn, cnnb_ctx *ctx, const char *model);

/* ---- a family's table of models ------------------------------------------------------ */

/* What a variant of a model is built for, read from the dataset's description
 * (cnnb/dataset.h) and never from its name, so a dataset new to cnnbench gets the variant
 * that fits its images. */
typedef enum convnet_input {
  CONVNET_RESIZED = 1,     /* images of varying size, resized to the row's size (ImageNet) */
  CONVNET_SMALL_COLOR = 2, /* square images of one stored size, 3 channels (CIFAR-10) */
  CONVNET_SMALL_GRAY = 4,  /* square images of one stored size, 1 channel (MNIST) */
  CONVNET_SMALL = CONVNET_SMALL_COLOR | CONVNET_SMALL_GRAY
} convnet_input;

/* A row's image size for inputs taken at their stored size: the dataset's. */
#define CONVNET_STORED_SIZE 0

typedef struct convnet_model {
  const char *name;
  uint32_t inputs;    /* convnet_input bits: the datasets this row serves */
  int32_t image_size; /* CONVNET_RESIZED: the input size; CONVNET_SMALL: CONVNET_STORED_SIZE */
  int32_t default_batch_size;
  float default_learning_rate;
  const char *description;
} convnet_model;

/* Which convnet_input the dataset of `kind` is; 0 when none fits (an unknown kind, images
 * neither 1 nor 3 channels, or of one stored size that is not square). */
convnet_input convnet_input_of(uint32_t kind);

/* The row for `name` serving the dataset of `kind`, or NULL. */
const convnet_model *convnet_find(const convnet_model *models, int count, const char *name,
                                  uint32_t kind);

/* describe() for a family: fills info from the table, or returns CNNB_ENOTFOUND (name
 * not offered) / CNNB_EUNSUPPORTED (no variant for this dataset) with a message. */
cnnb_status convnet_describe(cnnb_ctx *ctx, const char *family, const convnet_model *models,
                             int count, const char *name, uint32_t dataset, cnnb_model_info *info);

/* The same checks, for build(): returns the row, or records the error in ctx and
 * returns NULL with *status saying why. */
const convnet_model *convnet_begin(cnnb_ctx *ctx, const char *family, const convnet_model *models,
                                   int count, const char *name, uint32_t dataset,
                                   cnnb_status *status);

/* The dataset's training examples (an epoch), or 0 when the kind is unknown. */
int64_t convnet_train_examples(uint32_t dataset);

/* TF's tf.train.piecewise_constant: values[i] for boundaries[i-1] < step <= boundaries[i]. */
float convnet_piecewise(int64_t step, int n, const int64_t *boundaries, const float *values);

#endif

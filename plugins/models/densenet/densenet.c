/* densenet.c — tf_cnn_benchmarks' DenseNets for CIFAR-10 (densenet_model.py):
 * densenet40_k12, densenet100_k12, densenet100_k24; 32x32, batch 64, lr 0.1 with its
 * own piecewise schedule.
 *
 * As the source: a 3x3 conv of 16 (bias, no ReLU), three dense stages of
 * (depth - 4) / 3 blocks — batch norm (decay 0.9, epsilon 1e-5, scale), ReLU, 3x3 conv
 * of growth_rate (bias, stddev sqrt(2 / 9 / k)), concatenated onto the input — with a
 * transition between stages (batch norm, ReLU, 1x1 conv keeping the width with bias and
 * ReLU, 2x2 average pool), then batch norm, ReLU and the spatial mean. No bottleneck,
 * no compression: the plain DenseNet of Huang et al. */
#include "convnet.h"

#include <math.h>

static const convnet_model models[] = {
    {"densenet40_k12", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 64, 0.1f,
     "DenseNet-40 (k=12) for CIFAR-10"},
    {"densenet100_k12", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 64, 0.1f,
     "DenseNet-100 (k=12) for CIFAR-10"},
    {"densenet100_k24", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 64, 0.1f,
     "DenseNet-100 (k=24) for CIFAR-10"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* (blocks per stage, growth rate), by row of `models`. */
static const int32_t config[NUM_MODELS][2] = {{12, 12}, {32, 12}, {32, 24}};

static const cnnb_batch_norm_desc bn_config = {
    .struct_size = sizeof(cnnb_batch_norm_desc), .decay = 0.9f, .epsilon = 1e-5f, .scale = 1};

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "densenet", models, NUM_MODELS, name, dataset, info);
}

static cnnb_tensor dense_block(convnet *cn, cnnb_tensor x, int32_t growth_rate) {
  cnnb_tensor c = convnet_relu(cn, convnet_batch_norm(cn, x, &bn_config));
  c = convnet_conv(cn, c, growth_rate, 3, 3,
                   CONVNET_OPTS(.stddev = (float)sqrt(2.0 / 9 / growth_rate), .linear = 1));
  const cnnb_tensor both[2] = {x, c};
  return convnet_concat(cn, 2, both); /* [N, C + k, H, W] */
}

static cnnb_tensor transition_layer(convnet *cn, cnnb_tensor x) {
  int32_t in_size = convnet_channels(cn, x);
  x = convnet_relu(cn, convnet_batch_norm(cn, x, &bn_config));
  x = convnet_conv(cn, x, in_size, 1, 1, CONVNET_OPTS(.stddev = (float)sqrt(2.0 / 9 / in_size)));
  return convnet_apool(cn, x, 2, 2, 2, CONVNET_VALID);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  const convnet_model *m = convnet_begin(ctx, "densenet", models, NUM_MODELS, name, dataset, &st);
  if (!m) return st;
  int32_t blocks = config[m - models][0], k = config[m - models][1];
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g); /* [N, 3, 32, 32] */
  x = convnet_conv(&cn, x, 16, 3, 3, CONVNET_OPTS(.linear = 1));
  for (int stage = 0; stage < 3; stage++) {
    for (int i = 0; i < blocks; i++) x = dense_block(&cn, x, k);
    if (stage < 2) x = transition_layer(&cn, x); /* 16x16, then 8x8 */
  }
  x = convnet_relu(&cn, convnet_batch_norm(&cn, x, &bn_config));
  x = convnet_spatial_mean(&cn, x);
  return convnet_finish(&cn, ctx, name, x);
}

/* DensenetCifar10Model.get_learning_rate: 0.1, 0.01, 0.001, 0.0001 with boundaries at
 * epochs 150, 225 and 300 of the epoch (CIFAR-10's 50000 images in the source; here the
 * datasource's, which is that for synthetic data, or the dataset's when it does not know). */
static float learning_rate_at(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                              int64_t global_step, int32_t global_batch_size,
                              int64_t examples_per_epoch) {
  (void)ctx, (void)name;
  if (examples_per_epoch <= 0) examples_per_epoch = convnet_train_examples(dataset);
  if (examples_per_epoch <= 0) examples_per_epoch = 1;
  int64_t batches_per_epoch = examples_per_epoch / (global_batch_size > 0 ? global_batch_size : 1);
  const int64_t boundaries[3] = {batches_per_epoch * 150, batches_per_epoch * 225,
                                 batches_per_epoch * 300};
  static const float values[4] = {0.1f, 0.01f, 0.001f, 0.0001f};
  return convnet_piecewise(global_step, 3, boundaries, values);
}

static const cnnb_model_vtable vtable = {.struct_size = sizeof(cnnb_model_vtable),
                                         .describe = describe,
                                         .build = build,
                                         .learning_rate_at = learning_rate_at};

static const char *const offers[] = {"densenet40_k12", "densenet100_k12", "densenet100_k24", NULL};

static const cnnb_plugin plugin = {CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "densenet", "1.0.0",
                                                    "tf_cnn_benchmarks' DenseNets for CIFAR-10"),
                                   .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

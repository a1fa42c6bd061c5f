/* resnet.c — tf_cnn_benchmarks' ResNets (resnet_model.py):
 *  - ImageNet (224x224, lr 0.128 at batch 256 with its own schedule): resnet50, 101,
 *    152 in v1 (stride on the block's first 1x1), resnet50_v1.5 (stride on the 3x3),
 *    and v2 (pre-activation); bottleneck blocks, stem conv 7x7/2 with tf_cnn_benchmarks'
 *    explicit pad-then-VALID ("SAME_RESNET"), max pool 3x3/2 SAME;
 *  - CIFAR-10 (32x32, batch 128, lr 0.1 with its own schedule): resnet20/32/44/56/110
 *    and their _v2, two-3x3 residual blocks with the parameter-free "plan A" shortcut.
 *    The same networks build for any dataset of small square images, CIFAR-10's or the
 *    MNIST layout's (--data_name=mnist: 28x28, 1 channel; not in the source): they end in
 *    a global average pool, so any input size fits, and the stem reads the input's
 *    channels; describe says the dataset's size (28 for MNIST), --image_size=32 pads.
 * Convolutions feed batch norm with decay 0.9, epsilon 1e-5 and a learned scale
 * (batch_norm_config); the pre-activation and final batch norms of v2 call batch_norm()
 * bare and so take its defaults (decay 0.999, epsilon 0.001, offset only), as in the
 * source. Block code is in resnet_blocks.c. */
#include "resnet.h"

#include <stdio.h>
#include <string.h>

static const convnet_model models[] = {
    {"resnet50", CONVNET_RESIZED, 224, 64, 0.128f, "ResNet-50 v1 (stride on the first 1x1)"},
    {"resnet50_v1.5", CONVNET_RESIZED, 224, 64, 0.128f, "ResNet-50 v1.5 (stride on the 3x3)"},
    {"resnet50_v2", CONVNET_RESIZED, 224, 64, 0.128f, "ResNet-50 v2 (pre-activation)"},
    {"resnet101", CONVNET_RESIZED, 224, 32, 0.128f, "ResNet-101 v1"},
    {"resnet101_v2", CONVNET_RESIZED, 224, 32, 0.128f, "ResNet-101 v2 (pre-activation)"},
    {"resnet152", CONVNET_RESIZED, 224, 32, 0.128f, "ResNet-152 v1"},
    {"resnet152_v2", CONVNET_RESIZED, 224, 32, 0.128f, "ResNet-152 v2 (pre-activation)"},
    {"resnet20", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-20 for CIFAR-10"},
    {"resnet20_v2", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-20 v2 for CIFAR-10"},
    {"resnet32", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-32 for CIFAR-10"},
    {"resnet32_v2", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-32 v2 for CIFAR-10"},
    {"resnet44", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-44 for CIFAR-10"},
    {"resnet44_v2", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-44 v2 for CIFAR-10"},
    {"resnet56", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-56 for CIFAR-10"},
    {"resnet56_v2", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-56 v2 for CIFAR-10"},
    {"resnet110", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-110 for CIFAR-10"},
    {"resnet110_v2", CONVNET_SMALL, CONVNET_STORED_SIZE, 128, 0.1f, "ResNet-110 v2 for CIFAR-10"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* Blocks per stage (layer_counts), by row of `models`. */
static const int32_t layer_counts[NUM_MODELS][4] = {
    {3, 4, 6, 3},  {3, 4, 6, 3}, {3, 4, 6, 3}, {3, 4, 23, 3}, {3, 4, 23, 3}, {3, 8, 36, 3},
    {3, 8, 36, 3}, {3, 3, 3},    {3, 3, 3},    {5, 5, 5},     {5, 5, 5},     {7, 7, 7},
    {7, 7, 7},     {9, 9, 9},    {9, 9, 9},    {18, 18, 18},  {18, 18, 18}};

/* The model's version from its name, as ResnetModel.__init__ reads it. */
static int version_of(const char *name) {
  if (strstr(name, "v2")) return RESNET_V2;
  if (strstr(name, "v1.5")) return RESNET_V1_5;
  return RESNET_V1;
}

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "resnet", models, NUM_MODELS, name, dataset, info);
}

/* v1 and v1.5 are saved under torchvision's resnet50/101/152 state_dict keys (conv1,
 * bn1, layer<stage+1>.<block>.*, fc): every shape is torchvision's. Only v1.5 computes
 * torchvision's function: v1 strides the block's first 1x1 where torchvision strides
 * the 3x3 (equal shapes, other outputs). v2 keeps its own names. */
static cnnb_tensor imagenet(convnet *cn, cnnb_tensor x, const int32_t counts[4], int version) {
  static const int32_t depth[4] = {256, 512, 1024, 2048};
  const int torch = version != RESNET_V2;
  cn->use_batch_norm = 1;
  cn->bn_config = (cnnb_batch_norm_desc){
      .struct_size = sizeof(cnnb_batch_norm_desc), .decay = 0.9f, .epsilon = 1e-5f, .scale = 1};
  x = convnet_conv(cn, x, 64, 7, 7,
                   CONVNET_OPTS(.stride = 2, .mode = CONVNET_SAME_RESNET, .batch_norm = 1,
                                .ckpt = torch ? "conv1" : NULL, .ckpt_bn = torch ? "bn1" : NULL));
  x = convnet_mpool(cn, x, 3, 3, 2, CONVNET_SAME); /* [N, 64, 56, 56] */
  for (int stage = 0; stage < 4; stage++)
    for (int i = 0; i < counts[stage]; i++) {
      char block[32];
      snprintf(block, sizeof block, "layer%d.%d", stage + 1, i);
      x = resnet_bottleneck_block(cn, x, depth[stage], depth[stage] / 4,
                                  stage > 0 && i == 0 ? 2 : 1, version, torch ? block : NULL);
    }
  if (version == RESNET_V2) x = convnet_relu(cn, convnet_batch_norm(cn, x, NULL));
  return convnet_spatial_mean(cn, x); /* [N, 2048, 1, 1] */
}

static cnnb_tensor cifar10(convnet *cn, cnnb_tensor x, const int32_t counts[3], int version) {
  static const int32_t depth[3] = {16, 32, 64};
  cn->use_batch_norm = 1;
  cn->bn_config = (cnnb_batch_norm_desc){
      .struct_size = sizeof(cnnb_batch_norm_desc), .decay = 0.9f, .epsilon = 1e-5f, .scale = 1};
  /* v1's stem has no ReLU (activation=None); v2's has one. */
  x = convnet_conv(cn, x, 16, 3, 3, CONVNET_OPTS(.batch_norm = 1, .linear = version != RESNET_V2));
  for (int stage = 0; stage < 3; stage++)
    for (int i = 0; i < counts[stage]; i++)
      x = resnet_residual_block(cn, x, depth[stage], stage > 0 && i == 0 ? 2 : 1, version);
  if (version == RESNET_V2) x = convnet_relu(cn, convnet_batch_norm(cn, x, NULL));
  return convnet_spatial_mean(cn, x); /* [N, 64, 1, 1] */
}

/* --resnet_base_lr: the ImageNet ResNets' base learning rate at batch 256 (0.128 when
 * unset), as tf_cnn_benchmarks' flag. build() checks it, so a bad value stops the run
 * before it starts; the schedule reads it through its ctx at every step. */
#define BASE_LR_FLAG "resnet_base_lr"

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  return cnnb_flag_declare(registry, BASE_LR_FLAG, CNNB_FLAG_FLOAT, "0",
                           "Base learning rate at batch 256 for the ImageNet ResNets' own "
                           "schedule (scaled by batch / 256, warm-up, drops at epochs "
                           "30/60/80/90); 0 keeps the model's 0.128. No effect when "
                           "--init_learning_rate or another schedule is given, nor on the "
                           "CIFAR-10 ResNets, whose schedule is fixed.");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  double base_lr = cnnb_flag_float(ctx, BASE_LR_FLAG);
  if (!(base_lr >= 0.0 && base_lr < 1e6))
    return cnnb_error(ctx, CNNB_EINVAL, "--%s=%g: must be in [0, 1e6) (0: the model's 0.128)",
                      BASE_LR_FLAG, base_lr);
  const convnet_model *m = convnet_begin(ctx, "resnet", models, NUM_MODELS, name, dataset, &st);
  if (!m) return st;
  const int32_t *counts = layer_counts[m - models];
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g);
  if (m->inputs & CONVNET_SMALL)
    return convnet_finish(&cn, ctx, name, cifar10(&cn, x, counts, version_of(name)));
  int version = version_of(name);
  x = imagenet(&cn, x, counts, version);
  return convnet_finish_named(&cn, ctx, name, x, version != RESNET_V2 ? "fc" : NULL);
}

/* ResnetModel.get_learning_rate: 0.128 (or --resnet_base_lr) scaled by batch / 256,
 * linear warm-up over 5 epochs, then piecewise constant dropping 10x at epochs 30, 60,
 * 80 and 90. ResnetCifar10Model.get_learning_rate: 0.1, 0.01, 0.001, 0.0002 with
 * boundaries at epochs 82, 123 and 300, not scaled by batch size (the MNIST-layout runs
 * of the same networks follow it too, in epochs of their own data). The source counts
 * epochs of each dataset's training set; here of the datasource's epoch, which is that
 * for synthetic data and the full dataset (the dataset's own when the datasource does
 * not know). */
static float learning_rate_at(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                              int64_t global_step, int32_t global_batch_size,
                              int64_t examples_per_epoch) {
  if (global_batch_size <= 0) global_batch_size = 1;
  if (examples_per_epoch <= 0) examples_per_epoch = convnet_train_examples(dataset);
  double batches_per_epoch = (double)examples_per_epoch / global_batch_size;
  const convnet_model *m = convnet_find(models, NUM_MODELS, name, dataset);
  if (m && (m->inputs & CONVNET_RESIZED)) {
    double base_lr = cnnb_flag_float(ctx, BASE_LR_FLAG);
    if (!(base_lr > 0.0)) base_lr = m->default_learning_rate;
    double rescaled = base_lr * global_batch_size / 256.0;
    static const double epochs[4] = {30, 60, 80, 90};
    int64_t boundaries[4];
    float values[5];
    double v = rescaled;
    for (int i = 0; i < 4; i++) boundaries[i] = (int64_t)(batches_per_epoch * epochs[i]);
    for (int i = 0; i < 5; i++, v *= 0.1) values[i] = (float)v;
    int64_t warmup_steps = (int64_t)(batches_per_epoch * 5);
    if (global_step < warmup_steps)
      return (float)(rescaled * (double)global_step / (double)warmup_steps);
    return convnet_piecewise(global_step, 4, boundaries, values);
  }
  /* The source's int(num_examples / batch). */
  int64_t whole_batches = (int64_t)batches_per_epoch;
  const int64_t boundaries[3] = {whole_batches * 82, whole_batches * 123, whole_batches * 300};
  static const float values[4] = {0.1f, 0.01f, 0.001f, 0.0002f};
  return convnet_piecewise(global_step, 3, boundaries, values);
}

static const cnnb_model_vtable vtable = {.struct_size = sizeof(cnnb_model_vtable),
                                         .describe = describe,
                                         .build = build,
                                         .learning_rate_at = learning_rate_at};

static const char *const offers[] = {
    "resnet50",     "resnet50_v1.5", "resnet50_v2", "resnet101", "resnet101_v2", "resnet152",
    "resnet152_v2", "resnet20",      "resnet20_v2", "resnet32",  "resnet32_v2",  "resnet44",
    "resnet44_v2",  "resnet56",      "resnet56_v2", "resnet110", "resnet110_v2", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(
        CNNB_KIND_MODEL, "resnet", "1.0.0",
        "tf_cnn_benchmarks' ResNets: ImageNet v1/v1.5/v2 and CIFAR-10 (also for MNIST)"),
    .offers = offers, .vtable = &vtable, .register_flags = register_flags};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

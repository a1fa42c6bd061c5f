/* official_resnet.c — tf_cnn_benchmarks' official_resnet<N> and official_resnet<N>_v2
 * (official_resnet_model.py): TensorFlow's official ResNets (tensorflow/models'
 * official/r1/resnet: resnet_model.py's Model with imagenet_main.py's ImagenetModel), not
 * tf_cnn_benchmarks' own resnet_model.py (plugins/models/resnet). 224x224.
 *
 * As the source:
 *  - 18 and 34 layers use building blocks (two 3x3), 50 and more bottleneck blocks (1x1,
 *    3x3, 1x1 of 4x the filters); blocks per stage 18: 2,2,2,2; 34 and 50: 3,4,6,3; 101:
 *    3,4,23,3; 152: 3,8,36,3; 200: 3,24,36,3; 64, 128, 256, 512 filters, strides 1,2,2,2;
 *  - the stride is on the block's 3x3 (the first 3x3 of a building block): v1 here is
 *    what tf_cnn_benchmarks calls v1.5;
 *  - the first block of every stage has a projection shortcut (a 1x1 conv with the
 *    stage's stride), even where the depth and size already match (stage 1 of 18 and 34);
 *  - conv2d_fixed_padding: stride 1 is SAME, a larger stride pads by the kernel alone
 *    ((k-1)/2 before, the rest after) then runs VALID — convnet's SAME_RESNET mode; no
 *    conv has a bias; kernels are variance scaling (scale 1, fan in, truncated normal);
 *  - every batch norm is the module's batch_norm(): decay 0.997, epsilon 1e-5, scale and
 *    offset, the pre-activation and final ones of v2 included;
 *  - v1: stem conv 7x7/2, batch norm, ReLU; blocks conv-BN-ReLU, the last BN before the
 *    add (the projection has its BN too), ReLU after the add;
 *  - v2: stem conv 7x7/2 with no batch norm and no ReLU; every block starts with BN and
 *    ReLU, the projection reads that pre-activation (no BN of its own), the last conv has
 *    no BN, nothing follows the add; BN and ReLU after the last block;
 *  - max pool 3x3/2 SAME after the stem, a spatial mean, then one dense layer to the
 *    classes (tf.layers.dense: Glorot-uniform kernel, zero bias). That layer is the
 *    classifier: the model overrides build_network, so tf_cnn_benchmarks adds no affine.
 * Its ImagenetModel always has 1001 classes (NUM_CLASSES); here the dense layer has the
 * graph's classes, 1001 for ImageNet unless --num_classes says otherwise.
 *
 * Defaults (ImagenetResnetModel): batch 128 for 50 layers, 32 otherwise; learning rate
 * 0.0125 * batch / 32, with its schedule (learning_rate_at). The source's data_format
 * (channels_first when built with CUDA) is a layout choice: the IR is logical NCHW and
 * each device picks its layout. */
#include <stdio.h>
#include <string.h>

#include "convnet.h"

#define IMAGENET CONVNET_RESIZED

static const convnet_model models[] = {
    {"official_resnet18", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-18 v1 (basic blocks)"},
    {"official_resnet34", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-34 v1 (basic blocks)"},
    {"official_resnet50", IMAGENET, 224, 128, 0.05f,
     "TF official ResNet-50 v1 (stride on the 3x3)"},
    {"official_resnet101", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-101 v1"},
    {"official_resnet152", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-152 v1"},
    {"official_resnet200", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-200 v1"},
    {"official_resnet18_v2", IMAGENET, 224, 32, 0.0125f,
     "TF official ResNet-18 v2 (pre-activation)"},
    {"official_resnet34_v2", IMAGENET, 224, 32, 0.0125f,
     "TF official ResNet-34 v2 (pre-activation)"},
    {"official_resnet50_v2", IMAGENET, 224, 128, 0.05f,
     "TF official ResNet-50 v2 (pre-activation)"},
    {"official_resnet101_v2", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-101 v2"},
    {"official_resnet152_v2", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-152 v2"},
    {"official_resnet200_v2", IMAGENET, 224, 32, 0.0125f, "TF official ResNet-200 v2"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* _get_block_sizes, by resnet_size. */
typedef struct resnet_size {
  int32_t layers;
  int32_t blocks[4];
} resnet_size;

static const resnet_size sizes[] = {
    {18, {2, 2, 2, 2}},   {34, {3, 4, 6, 3}},   {50, {3, 4, 6, 3}},
    {101, {3, 4, 23, 3}}, {152, {3, 8, 36, 3}}, {200, {3, 24, 36, 3}},
};

/* The name's size row and version (1, or 2 for "_v2"), as model_config.py maps them. */
static const resnet_size *size_of(const char *name, int *version) {
  *version = strstr(name, "_v2") ? 2 : 1;
  int32_t layers = 0;
  if (sscanf(name, "official_resnet%d", &layers) != 1) return NULL;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (sizes[i].layers == layers) return &sizes[i];
  return NULL;
}

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "official_resnet", models, NUM_MODELS, name, dataset, info);
}

/* conv2d_fixed_padding, with or without the batch norm (and ReLU) that follows it in the
 * source. */
enum { CONV_ONLY, CONV_BN, CONV_BN_RELU };

static cnnb_tensor conv(convnet *cn, cnnb_tensor x, int32_t filters, int32_t k, int32_t stride,
                        int after) {
  return convnet_conv(cn, x, filters, k, k,
                      CONVNET_OPTS(.stride = stride, .mode = CONVNET_SAME_RESNET,
                                   .batch_norm = after == CONV_ONLY ? -1 : 1,
                                   .linear = after != CONV_BN_RELU, .no_bias = 1));
}

/* batch_norm() then ReLU: v2's pre-activation and its end. */
static cnnb_tensor bn_relu(convnet *cn, cnnb_tensor x) {
  return convnet_relu(cn, convnet_batch_norm(cn, x, &cn->bn_config));
}

/* One block of either kind, either version. `filters` is the stage's (the bottleneck's
 * inner width); a bottleneck block ends with 4x as many. `project`: the stage's first
 * block, whose shortcut is the 1x1 projection with the stage's stride. */
static cnnb_tensor block(convnet *cn, cnnb_tensor x, int32_t filters, int32_t stride, int project,
                         int bottleneck, int version) {
  const int32_t out = bottleneck ? 4 * filters : filters;
  cnnb_tensor shortcut = x, y;
  if (version == 1) {
    if (project) shortcut = conv(cn, x, out, 1, stride, CONV_BN);
    if (bottleneck) {
      y = conv(cn, x, filters, 1, 1, CONV_BN_RELU);
      y = conv(cn, y, filters, 3, stride, CONV_BN_RELU);
      y = conv(cn, y, out, 1, 1, CONV_BN);
    } else {
      y = conv(cn, x, filters, 3, stride, CONV_BN_RELU);
      y = conv(cn, y, filters, 3, 1, CONV_BN);
    }
    return convnet_relu(cn, convnet_add(cn, y, shortcut));
  }
  cnnb_tensor preact = bn_relu(cn, x);
  if (project) shortcut = conv(cn, preact, out, 1, stride, CONV_ONLY);
  if (bottleneck) {
    y = conv(cn, preact, filters, 1, 1, CONV_BN_RELU);
    y = conv(cn, y, filters, 3, stride, CONV_BN_RELU);
    y = conv(cn, y, out, 1, 1, CONV_ONLY);
  } else {
    y = conv(cn, preact, filters, 3, stride, CONV_BN_RELU);
    y = conv(cn, y, filters, 3, 1, CONV_ONLY);
  }
  return convnet_add(cn, y, shortcut);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "official_resnet", models, NUM_MODELS, name, dataset, &st)) return st;
  int version;
  const resnet_size *size = size_of(name, &version);
  if (!size)
    return cnnb_error(ctx, CNNB_EINTERNAL, "official_resnet: no block sizes for '%s'", name);
  const int bottleneck = size->layers >= 50;

  convnet cn;
  convnet_init(&cn, g);
  cn.bn_config = (cnnb_batch_norm_desc){
      .struct_size = sizeof(cnnb_batch_norm_desc), .decay = 0.997f, .epsilon = 1e-5f, .scale = 1};
  cnnb_tensor x = cnnb_graph_input(g);                                 /* [N, 3, 224, 224] */
  x = conv(&cn, x, 64, 7, 2, version == 1 ? CONV_BN_RELU : CONV_ONLY); /* [N, 64, 112, 112] */
  x = convnet_mpool(&cn, x, 3, 3, 2, CONVNET_SAME);                    /* [N, 64, 56, 56] */
  for (int stage = 0; stage < 4; stage++) {
    char scope[32];
    snprintf(scope, sizeof scope, "block_layer%d", stage + 1);
    cnnb_graph_push_scope(g, scope);
    const int32_t filters = 64 << stage, stride = stage == 0 ? 1 : 2;
    for (int32_t i = 0; i < size->blocks[stage]; i++)
      x = block(&cn, x, filters, i == 0 ? stride : 1, i == 0, bottleneck, version);
    cnnb_graph_pop_scope(g);
  }
  if (version == 2) x = bn_relu(&cn, x);
  x = convnet_spatial_mean(&cn, x); /* [N, 512 or 2048, 1, 1] */
  cnnb_tensor logits = cnnb_dense(g, "final_dense", x,
                                  CNNB_DENSE(.units = cnnb_graph_num_classes(g), .use_bias = 1,
                                             .weight_init = {CNNB_INIT_GLOROT_UNIFORM, 0.0f}));
  if (cnnb_graph_status(g) == CNNB_OK) cnnb_graph_set_logits(g, logits);
  return convnet_status(&cn, ctx, name);
}

/* ImagenetResnetModel.get_learning_rate: the default rate scaled by batch / the default
 * batch (0.0125 / 32 per example for every size), dropping 10x after epochs 30, 60, 80
 * and 90, with no warm-up. Epochs are the datasource's (the dataset's own when it does not
 * know), as for the other ResNets; the source counts ImageNet's 1,281,167 images. */
static float learning_rate_at(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                              int64_t global_step, int32_t global_batch_size,
                              int64_t examples_per_epoch) {
  (void)ctx;
  if (global_batch_size <= 0) global_batch_size = 1;
  const convnet_model *m = convnet_find(models, NUM_MODELS, name, dataset);
  if (!m) return 0.0f;
  if (examples_per_epoch <= 0) examples_per_epoch = convnet_train_examples(dataset);
  double batches_per_epoch = (double)examples_per_epoch / global_batch_size;
  double rate = (double)m->default_learning_rate / m->default_batch_size * global_batch_size;
  static const double epochs[4] = {30, 60, 80, 90};
  int64_t boundaries[4];
  float values[5];
  for (int i = 0; i < 4; i++) boundaries[i] = (int64_t)(batches_per_epoch * epochs[i]);
  for (int i = 0; i < 5; i++, rate *= 0.1) values[i] = (float)rate;
  return convnet_piecewise(global_step, 4, boundaries, values);
}

static const cnnb_model_vtable vtable = {.struct_size = sizeof(cnnb_model_vtable),
                                         .describe = describe,
                                         .build = build,
                                         .learning_rate_at = learning_rate_at};

static const char *const offers[] = {"official_resnet18",
                                     "official_resnet34",
                                     "official_resnet50",
                                     "official_resnet101",
                                     "official_resnet152",
                                     "official_resnet200",
                                     "official_resnet18_v2",
                                     "official_resnet34_v2",
                                     "official_resnet50_v2",
                                     "official_resnet101_v2",
                                     "official_resnet152_v2",
                                     "official_resnet200_v2",
                                     NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "official_resnet", "1.0.0",
                     "TensorFlow's official ResNets v1/v2, 18 to 200 layers, as "
                     "tf_cnn_benchmarks' official_resnet* runs them"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

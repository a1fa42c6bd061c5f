/* mobilenet.c — tf_cnn_benchmarks' `mobilenet` (models/tf1_only/mobilenet_v2.py, a
 * branch of TF-slim's MobileNet v2, depth multiplier 1.0): 224x224, batch 32, lr 0.005.
 *
 * As the source: a 3x3/2 stem of 32, seventeen expanded_conv blocks (1x1 expansion by 6
 * rounded to a multiple of 8 — none in the first block — 3x3 depthwise, 1x1 linear
 * projection, identity shortcut when stride 1 and the depth is kept), a 1x1 conv of 1280,
 * global average pool, dropout 0.8 and slim's own 1x1 logits conv of 1001 (slim's default
 * num_classes, with a bias). tf_cnn_benchmarks then adds its usual affine to num_classes
 * on top of those 1001 outputs, and so does this plugin. Batch norm everywhere but the
 * logits: scale and offset, decay 0.997, epsilon 0.001; conv weights truncated normal,
 * stddev 0.09 (training_scope). Depthwise convolutions are groups == channels.
 * ReLU6 (V2_DEF's activation_fn=tf.nn.relu6) after the batch norm of the stem, every
 * expansion, every depthwise conv and the 1280 conv; the projection is linear
 * (activation_fn=tf.identity) and so are the logits. ReLU6 needs ABI 1.1.
 * Checkpoints keep the params' own names: torchvision's mobilenet_v2 ends in one Linear
 * 1280 -> num_classes, not slim's logits conv plus an affine, so not every shape fits. */
#include <stdio.h>
#include <string.h>

#include "convnet.h"

static const convnet_model models[] = {
    {"mobilenet", CONVNET_RESIZED, 224, 32, 0.005f,
     "MobileNet v2 (depth multiplier 1.0, TF-slim layout), 224x224"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* slim's mobilenet(num_classes=1001) default, which tf_cnn_benchmarks never overrides. */
#define SLIM_LOGITS 1001

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "mobilenet", models, NUM_MODELS, name, dataset, info);
}

/* _make_divisible(v, divisor, min_value=divisor) of mobilenet_conv_blocks.py. */
static int32_t make_divisible(double v, int32_t divisor) {
  int32_t new_v = (int32_t)(v + divisor / 2.0) / divisor * divisor;
  if (new_v < divisor) new_v = divisor;
  if (new_v < 0.9 * v) new_v += divisor;
  return new_v;
}

/* conv + batch norm (+ ReLU6 unless linear), slim's conv2d under the training scope: no
 * bias, truncated normal 0.09. The builder's conv() knows only ReLU, so it builds the
 * linear conv and ReLU6 follows it, named inside the conv's scope as conv() names its
 * ReLU ("expanded_conv1/conv3/relu6"). */
static cnnb_tensor conv_bn(convnet *cn, cnnb_tensor x, int32_t filters, int32_t k, int32_t stride,
                           int32_t groups, int linear) {
  cnnb_tensor y = convnet_conv(cn, x, filters, k, k,
                               CONVNET_OPTS(.stride = stride, .batch_norm = 1, .linear = 1,
                                            .groups = groups,
                                            .init = {CNNB_INIT_TRUNCATED_NORMAL, 0.09f}));
  if (linear || y == CNNB_NO_TENSOR) return y;
  /* y is "<caller's scope>/convN/batchnormN": its conv scope is the next-to-last part. */
  char name[64] = "relu6";
  const char *full = cnnb_graph_node(cn->g, y)->name, *end = strrchr(full, '/');
  if (end) {
    const char *start = end;
    while (start > full && start[-1] != '/') start--;
    snprintf(name, sizeof name, "%.*s/relu6", (int)(end - start), start);
  }
  return cnnb_relu6(cn->g, name, y);
}

/* expanded_conv: expansion (1x1) -> depthwise (3x3) -> projection (1x1, linear). */
static cnnb_tensor expanded_conv(convnet *cn, cnnb_tensor x, int32_t num_outputs, int32_t stride,
                                 int expansion) {
  int32_t prev = convnet_channels(cn, x);
  /* expand_input_by_factor(n, divisible_by): 1 with divisible_by=1 for the first block. */
  int32_t inner = expansion == 1 ? make_divisible(prev, 1) : make_divisible(prev * 6.0, 8);
  convnet_push_scope(cn, "expanded_conv");
  cnnb_tensor y = x;
  if (inner > prev) y = conv_bn(cn, y, inner, 1, 1, 1, 0); /* expand */
  int32_t c = convnet_channels(cn, y);
  y = conv_bn(cn, y, c, 3, stride, c, 0);      /* depthwise */
  y = conv_bn(cn, y, num_outputs, 1, 1, 1, 1); /* project */
  if (stride == 1 && num_outputs == prev) y = convnet_add(cn, y, x);
  convnet_pop_scope(cn);
  return y;
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "mobilenet", models, NUM_MODELS, name, dataset, &st)) return st;
  /* V2_DEF's spec after the stem: (stride, num_outputs), expansion 6 but the first. */
  static const int32_t spec[17][2] = {{1, 16}, {2, 24},  {1, 24},  {2, 32},  {1, 32}, {1, 32},
                                      {2, 64}, {1, 64},  {1, 64},  {1, 64},  {1, 96}, {1, 96},
                                      {1, 96}, {2, 160}, {1, 160}, {1, 160}, {1, 320}};
  convnet cn;
  convnet_init(&cn, g);
  cn.bn_config = (cnnb_batch_norm_desc){
      .struct_size = sizeof(cnnb_batch_norm_desc), .decay = 0.997f, .epsilon = 0.001f, .scale = 1};
  cnnb_tensor x = cnnb_graph_input(g); /* [N, 3, 224, 224] */
  x = conv_bn(&cn, x, 32, 3, 2, 1, 0); /* [N, 32, 112, 112] */
  for (int i = 0; i < 17; i++) x = expanded_conv(&cn, x, spec[i][1], spec[i][0], i == 0 ? 1 : 6);
  x = conv_bn(&cn, x, 1280, 1, 1, 1, 0); /* [N, 1280, 7, 7] */
  x = convnet_spatial_mean(&cn, x);      /* global_pool */
  x = convnet_dropout(&cn, x, 0.8f);
  x = convnet_conv(&cn, x, SLIM_LOGITS, 1, 1,
                   CONVNET_OPTS(.batch_norm = -1, .linear = 1,
                                .init = {CNNB_INIT_TRUNCATED_NORMAL, 0.09f}));
  return convnet_finish(&cn, ctx, name, x);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"mobilenet", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "mobilenet", "1.0.0",
                     "tf_cnn_benchmarks' MobileNet v2 (depthwise convolutions)"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

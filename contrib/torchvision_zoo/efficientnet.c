/* efficientnet.c — torchvision's efficientnet_b0 (Tan and Le, "EfficientNet"), layer for
 * layer as torchvision.models.efficientnet builds it: MBConv blocks (expansion, depthwise
 * convolution, squeeze-and-excitation with SiLU and a sigmoid gate, projection), SiLU
 * throughout, and stochastic depth on the residual branches rising linearly to 0.2 over
 * the 16 blocks. Batch norm: torch's defaults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zoo.h"

/* MBConvConfig at width and depth 1.0: expand ratio, kernel, stride, input, output, layers. */
typedef struct stage {
  int32_t expand, kernel, stride, in, out, layers;
} stage;

static const stage b0[] = {
    {1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},   {6, 3, 2, 40, 80, 3},
    {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1},
};
enum { STAGES = sizeof b0 / sizeof b0[0] };
static const float stochastic_depth_prob = 0.2f;

/* torchvision's MBConv as features.<s>.<b>; drop: its stochastic depth probability. */
static cnnb_tensor mbconv(zoo *z, int s, int b, int32_t in, int32_t out, int32_t expand,
                          int32_t kernel, int32_t stride, float drop, cnnb_tensor x) {
  char prefix[64];
  int layer = 0;
  int32_t expanded = zoo_make_divisible((double)in * expand, 8);
  cnnb_tensor y = x;
#define NEXT() snprintf(prefix, sizeof prefix, "features.%d.%d.block.%d", s, b, layer++)
  if (expanded != in) {
    NEXT();
    y = zoo_conv_norm_act(z, prefix, y, expanded, 1, 1, 1, ZOO_SILU);
  }
  NEXT();
  y = zoo_conv_norm_act(z, prefix, y, expanded, kernel, stride, expanded, ZOO_SILU);
  NEXT();
  int32_t squeeze = in / 4 > 1 ? in / 4 : 1;
  y = zoo_squeeze_excitation(z, prefix, y, squeeze, ZOO_SILU, ZOO_SIGMOID);
  NEXT();
  y = zoo_conv_norm_act(z, prefix, y, out, 1, 1, 1, ZOO_IDENTITY);
#undef NEXT
  if (stride != 1 || in != out) return y;
  if (drop > 0.0f) y = cnnb_stochastic_depth(z->g, NULL, y, drop);
  return cnnb_add(z->g, NULL, y, x);
}

static const zoo_recipe recipe = {
    .learning_rate = 0.256f,
    .batch = 4096,
    .optimizer = "rmsprop",
    .momentum = 0.9f,
    .weight_decay = 1e-5f,
    .label_smoothing = 0.1f,
    .epsilon = 1e-3f,
    .schedule = ZOO_STEP,
    .every = 2.4,
    .factor = 0.97,
    .warmup_epochs = 5,
    .per_step = 1,
    .text = "TensorFlow's (torchvision ported its weights): RMSProp decay 0.9, momentum 0.9, "
            "epsilon 1e-3, lr 0.256 per 4096 images times 0.97 every 2.4 epochs after 5 "
            "warm-up epochs, weight decay 1e-5, label smoothing 0.1, 350 epochs, "
            "AutoAugment, EMA 0.9999"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "efficientnet_b0") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "efficientnet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe,
                      "torchvision's efficientnet_b0 (5.3M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "efficientnet_b0") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "efficientnet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv_norm_act(&z, "features.0", cnnb_graph_input(g), 32, 3, 2, 1, ZOO_SILU);
  int total = 0, id = 0;
  for (int s = 0; s < STAGES; s++) total += b0[s].layers;
  for (int s = 0; s < STAGES; s++)
    for (int b = 0; b < b0[s].layers; b++, id++) {
      const stage *st = &b0[s];
      float drop = stochastic_depth_prob * (float)id / (float)total;
      x = mbconv(&z, s + 1, b, b ? st->out : st->in, st->out, st->expand, st->kernel,
                 b ? 1 : st->stride, drop, x);
    }
  x = zoo_conv_norm_act(&z, "features.8", x, 4 * b0[STAGES - 1].out, 1, 1, 1, ZOO_SILU);
  x = cnnb_dropout(g, NULL, cnnb_global_avg_pool(g, NULL, x), 0.8f);
  int32_t classes = cnnb_graph_num_classes(g);
  const cnnb_init uniform = {CNNB_INIT_UNIFORM, 1.0f / sqrtf((float)classes)};
  return zoo_finish(ctx, &z, zoo_linear(&z, "classifier.1", x, classes, uniform));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"efficientnet_b0", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_efficientnet", "1.0.0", "torchvision's EfficientNet-B0"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* mobilenet_v3.c — torchvision's mobilenet_v3_small and mobilenet_v3_large (Howard et al.,
 * "Searching for MobileNetV3"), layer for layer as torchvision.models.mobilenetv3 builds
 * them at width 1.0: inverted residuals with depthwise convolutions, hard-swish, and
 * squeeze-and-excitation gated by a hard sigmoid. Batch norm eps 0.001, momentum 0.01. */
#include <stdio.h>
#include <string.h>

#include "zoo.h"

/* InvertedResidualConfig: input, kernel, expanded, output, SE, hard-swish (else ReLU),
 * stride (dilation is 1 throughout). */
typedef struct bneck {
  int32_t in, kernel, expanded, out;
  int se, hs;
  int32_t stride;
} bneck;

static const bneck large[] = {
    {16, 3, 16, 16, 0, 0, 1},    {16, 3, 64, 24, 0, 0, 2},    {24, 3, 72, 24, 0, 0, 1},
    {24, 5, 72, 40, 1, 0, 2},    {40, 5, 120, 40, 1, 0, 1},   {40, 5, 120, 40, 1, 0, 1},
    {40, 3, 240, 80, 0, 1, 2},   {80, 3, 200, 80, 0, 1, 1},   {80, 3, 184, 80, 0, 1, 1},
    {80, 3, 184, 80, 0, 1, 1},   {80, 3, 480, 112, 1, 1, 1},  {112, 3, 672, 112, 1, 1, 1},
    {112, 5, 672, 160, 1, 1, 2}, {160, 5, 960, 160, 1, 1, 1}, {160, 5, 960, 160, 1, 1, 1},
};

static const bneck small[] = {
    {16, 3, 16, 16, 1, 0, 2},  {16, 3, 72, 24, 0, 0, 2},  {24, 3, 88, 24, 0, 0, 1},
    {24, 5, 96, 40, 1, 1, 2},  {40, 5, 240, 40, 1, 1, 1}, {40, 5, 240, 40, 1, 1, 1},
    {40, 5, 120, 48, 1, 1, 1}, {48, 5, 144, 48, 1, 1, 1}, {48, 5, 288, 96, 1, 1, 2},
    {96, 5, 576, 96, 1, 1, 1}, {96, 5, 576, 96, 1, 1, 1},
};

typedef struct variant {
  const char *name;
  const bneck *blocks;
  int count;
  int32_t last_channel; /* the classifier's hidden width */
} variant;

static const variant variants[] = {
    {"mobilenet_v3_large", large, (int)(sizeof large / sizeof large[0]), 1280},
    {"mobilenet_v3_small", small, (int)(sizeof small / sizeof small[0]), 1024},
};

static const variant *variant_of(const char *name) {
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    if (strcmp(variants[i].name, name) == 0) return &variants[i];
  return NULL;
}

/* torchvision's InvertedResidual as features.<index>. */
static cnnb_tensor inverted_residual(zoo *z, int index, const bneck *b, cnnb_tensor x) {
  char prefix[64];
  zoo_act act = b->hs ? ZOO_HARDSWISH : ZOO_RELU;
  int layer = 0;
  cnnb_tensor y = x;
  if (b->expanded != b->in) {
    snprintf(prefix, sizeof prefix, "features.%d.block.%d", index, layer++);
    y = zoo_conv_norm_act(z, prefix, y, b->expanded, 1, 1, 1, act);
  }
  snprintf(prefix, sizeof prefix, "features.%d.block.%d", index, layer++);
  y = zoo_conv_norm_act(z, prefix, y, b->expanded, b->kernel, b->stride, b->expanded, act);
  if (b->se) {
    snprintf(prefix, sizeof prefix, "features.%d.block.%d", index, layer++);
    y = zoo_squeeze_excitation(z, prefix, y, zoo_make_divisible(b->expanded / 4, 8), ZOO_RELU,
                               ZOO_HARDSIGMOID);
  }
  snprintf(prefix, sizeof prefix, "features.%d.block.%d", index, layer++);
  y = zoo_conv_norm_act(z, prefix, y, b->out, 1, 1, 1, ZOO_IDENTITY);
  if (b->stride == 1 && b->in == b->out) y = cnnb_add(z->g, NULL, y, x);
  return y;
}

static const zoo_recipe recipe = {
    .learning_rate = 0.064f,
    .batch = 1024,
    .optimizer = "rmsprop",
    .momentum = 0.9f,
    .weight_decay = 1e-5f,
    .epsilon = 1e-3f,
    .schedule = ZOO_STEP,
    .every = 2,
    .factor = 0.973,
    .text = "torchvision: RMSProp alpha 0.9, momentum 0.9, eps 0.0316 (1e-3 in TF's form), lr "
            "0.064 per 1024 images times 0.973 every 2 epochs, weight decay 1e-5, 600 epochs, "
            "AutoAugment, random erasing 0.2"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  const variant *v = variant_of(name);
  if (!v) return cnnb_error(ctx, CNNB_EINVAL, "mobilenet_v3: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe,
                      v->blocks == large ? "torchvision's mobilenet_v3_large (5.5M params)"
                                         : "torchvision's mobilenet_v3_small (2.5M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  const variant *v = variant_of(name);
  if (!v) return cnnb_error(ctx, CNNB_EINVAL, "mobilenet_v3: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  z.bn_eps = 0.001f;
  z.bn_decay = 0.99f;
  cnnb_tensor x = zoo_conv_norm_act(&z, "features.0", cnnb_graph_input(g), 16, 3, 2, 1,
                                    ZOO_HARDSWISH);
  for (int i = 0; i < v->count; i++) x = inverted_residual(&z, i + 1, &v->blocks[i], x);
  char prefix[32];
  snprintf(prefix, sizeof prefix, "features.%d", v->count + 1);
  int32_t last_conv = 6 * v->blocks[v->count - 1].out;
  x = zoo_conv_norm_act(&z, prefix, x, last_conv, 1, 1, 1, ZOO_HARDSWISH);
  x = cnnb_global_avg_pool(g, NULL, x);
  const cnnb_init normal = {CNNB_INIT_NORMAL, 0.01f};
  x = zoo_act_apply(&z, zoo_linear(&z, "classifier.0", x, v->last_channel, normal), ZOO_HARDSWISH);
  x = cnnb_dropout(g, NULL, x, 0.8f);
  return zoo_finish(ctx, &z, zoo_linear(&z, "classifier.3", x, cnnb_graph_num_classes(g), normal));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"mobilenet_v3_large", "mobilenet_v3_small", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_mobilenet_v3", "1.0.0",
                     "torchvision's MobileNet v3, small and large"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

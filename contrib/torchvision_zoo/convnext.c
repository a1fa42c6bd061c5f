/* convnext.c — torchvision's convnext_tiny (Liu et al., "A ConvNet for the 2020s"), layer
 * for layer as torchvision.models.convnext builds it: a 4x4 patchify stem, four stages of
 * CNBlocks (7x7 depthwise conv, layer norm over the channels, a pointwise MLP with GELU,
 * layer scale, stochastic depth rising linearly to 0.1), layer norm + 2x2 convolutions
 * between stages, layer norm before the classifier. The MLP's nn.Linear layers are 1x1
 * convolutions whose kernels keep Linear's [O, I] shape (linear_kernel), so checkpoints
 * load into torchvision as they are. */
#include <stdio.h>
#include <string.h>

#include "zoo.h"

static const int32_t dims[4] = {96, 192, 384, 768}, depths[4] = {3, 3, 9, 3};
static const float stochastic_depth_prob = 0.1f, layer_scale = 1e-6f, eps = 1e-6f;
/* trunc_normal_(std=0.02) for every conv and Linear, biases zero. */
static const cnnb_init trunc_normal = {CNNB_INIT_TRUNCATED_NORMAL, 0.02f};

static cnnb_tensor layer_norm(zoo *z, const char *key, cnnb_tensor x) {
  cnnb_tensor y = cnnb_layer_norm(z->g, key, x, eps);
  cnnb_graph_set_checkpoint_name(z->g, y, key);
  return y;
}

/* nn.Linear over the channels at each position, as a 1x1 conv with Linear's [O, I]. */
static cnnb_tensor pointwise(zoo *z, const char *key, cnnb_tensor x, int32_t out) {
  cnnb_tensor y = cnnb_conv2d(z->g, key, x,
                              CNNB_CONV2D(.filters = out, .kernel_h = 1, .kernel_w = 1,
                                          .use_bias = 1, .kernel_init = trunc_normal,
                                          .linear_kernel = 1));
  cnnb_graph_set_checkpoint_name(z->g, y, key);
  return y;
}

/* CNBlock as features.<s>.<b>. */
static cnnb_tensor cnblock(zoo *z, int s, int b, cnnb_tensor x, float drop) {
  char key[64];
  int32_t c = zoo_channels(z, x);
#define KEY(part) (snprintf(key, sizeof key, "features.%d.%d%s", s, b, part), key)
  cnnb_tensor y = zoo_conv(z, KEY(".block.0"), x, c, 7, 1, 3, c, 1, trunc_normal);
  y = layer_norm(z, KEY(".block.2"), y);
  y = cnnb_gelu(z->g, NULL, pointwise(z, KEY(".block.3"), y, 4 * c), 0);
  y = pointwise(z, KEY(".block.5"), y, c);
  y = cnnb_channel_scale(z->g, KEY(""), y, layer_scale);
  cnnb_graph_set_checkpoint_name(z->g, y, key); /* "features.<s>.<b>.layer_scale" */
#undef KEY
  if (drop > 0.0f) y = cnnb_stochastic_depth(z->g, NULL, y, drop);
  return cnnb_add(z->g, NULL, y, x);
}

static const zoo_recipe recipe = {
    .learning_rate = 1e-3f,
    .batch = 1024,
    .optimizer = "adam",
    .weight_decay = 0.0f,
    .label_smoothing = 0.1f,
    .schedule = ZOO_COSINE,
    .epochs = 600,
    .warmup_epochs = 5,
    .warmup_start = 0.01,
    .text = "torchvision: AdamW lr 1e-3 per 1024 images, weight decay 0.05 (none on norms), "
            "label smoothing 0.1, cosine decay after 5 linear warm-up epochs from 0.01x, 600 "
            "epochs, mixup 0.2, cutmix 1.0, TrivialAugment, random erasing 0.1, EMA, 176-pixel "
            "crops. cnnbench has no AdamW: Adam without weight decay here (Adam's L2 decay "
            "is not AdamW's)"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "convnext_tiny") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "convnext: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 32, &recipe,
                      "torchvision's convnext_tiny (28.6M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "convnext_tiny") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "convnext: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv(&z, "features.0.0", cnnb_graph_input(g), dims[0], 4, 4, 0, 1, 1,
                           trunc_normal);
  x = layer_norm(&z, "features.0.1", x);
  int total = 0, id = 0;
  for (int s = 0; s < 4; s++) total += depths[s];
  char key[32];
  for (int s = 0; s < 4; s++) {
    for (int b = 0; b < depths[s]; b++, id++)
      x = cnblock(&z, 2 * s + 1, b, x, stochastic_depth_prob * (float)id / (float)(total - 1));
    if (s == 3) break;
    snprintf(key, sizeof key, "features.%d.0", 2 * s + 2);
    x = layer_norm(&z, key, x);
    snprintf(key, sizeof key, "features.%d.1", 2 * s + 2);
    x = zoo_conv(&z, key, x, dims[s + 1], 2, 2, 0, 1, 1, trunc_normal);
  }
  x = layer_norm(&z, "classifier.0", cnnb_global_avg_pool(g, NULL, x));
  return zoo_finish(ctx, &z,
                    zoo_linear(&z, "classifier.2", x, cnnb_graph_num_classes(g), trunc_normal));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"convnext_tiny", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_convnext", "1.0.0", "torchvision's ConvNeXt-Tiny"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

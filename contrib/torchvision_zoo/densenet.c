/* densenet.c — torchvision's densenet121 (Huang et al., "Densely Connected Convolutional
 * Networks"), layer for layer as torchvision.models.densenet builds it: four dense blocks
 * of 6, 12, 24 and 16 layers (batch norm, ReLU, 1x1 to 128, batch norm, ReLU, 3x3 to 32
 * new channels, each layer reading every earlier one's), halving transitions between
 * them. Batch norm: torch's defaults. */
#include <stdio.h>
#include <string.h>

#include "zoo.h"

enum { GROWTH = 32, BN_SIZE = 4, MAX_LAYERS = 24 };
static const int32_t block_layers[4] = {6, 12, 24, 16};

/* kaiming_normal_ (fan_in), as densenet initialises its convolutions. */
static const cnnb_init kaiming_fan_in = {CNNB_INIT_VARIANCE_SCALING, 2.0f};

static cnnb_tensor norm_relu_conv(zoo *z, const char *norm, const char *conv, cnnb_tensor x,
                                  int32_t out, int32_t k) {
  x = cnnb_relu(z->g, NULL, zoo_batch_norm(z, norm, x));
  return zoo_conv(z, conv, x, out, k, 1, (k - 1) / 2, 1, 0, kaiming_fan_in);
}

/* _DenseBlock as features.denseblock<b>: the block's input and each layer's new channels,
 * concatenated. */
static cnnb_tensor dense_block(zoo *z, int b, cnnb_tensor x) {
  cnnb_tensor parts[MAX_LAYERS + 1] = {x};
  int count = 1;
  char norm[96], conv[96];
  for (int l = 1; l <= block_layers[b - 1]; l++) {
    cnnb_tensor in = count == 1 ? parts[0] : cnnb_concat(z->g, NULL, count, parts);
    snprintf(norm, sizeof norm, "features.denseblock%d.denselayer%d.norm1", b, l);
    snprintf(conv, sizeof conv, "features.denseblock%d.denselayer%d.conv1", b, l);
    cnnb_tensor y = norm_relu_conv(z, norm, conv, in, BN_SIZE * GROWTH, 1);
    snprintf(norm, sizeof norm, "features.denseblock%d.denselayer%d.norm2", b, l);
    snprintf(conv, sizeof conv, "features.denseblock%d.denselayer%d.conv2", b, l);
    parts[count++] = norm_relu_conv(z, norm, conv, y, GROWTH, 3);
  }
  return cnnb_concat(z->g, NULL, count, parts);
}

static const zoo_recipe recipe = {
    .learning_rate = 0.1f,
    .batch = 256,
    .optimizer = "momentum",
    .momentum = 0.9f,
    .nesterov = 1,
    .weight_decay = 1e-4f,
    .schedule = ZOO_STEP,
    .every = 30,
    .factor = 0.1,
    .text = "the DenseNet authors' (torchvision ported their weights): SGD with Nesterov "
            "momentum 0.9, lr 0.1 per 256 images divided by 10 at epochs 30 and 60, weight "
            "decay 1e-4, 90 epochs"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "densenet121") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "densenet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 32, &recipe,
                      "torchvision's densenet121 (8.0M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "densenet121") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "densenet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv(&z, "features.conv0", cnnb_graph_input(g), 64, 7, 2, 3, 1, 0,
                           kaiming_fan_in);
  x = cnnb_relu(g, NULL, zoo_batch_norm(&z, "features.norm0", x));
  x = cnnb_max_pool(g, NULL, x,
                    CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                              .padding = CNNB_PAD_EXPLICIT, .pad_top = 1, .pad_bottom = 1,
                              .pad_left = 1, .pad_right = 1));
  char norm[64], conv[64];
  for (int b = 1; b <= 4; b++) {
    x = dense_block(&z, b, x);
    if (b == 4) break;
    snprintf(norm, sizeof norm, "features.transition%d.norm", b);
    snprintf(conv, sizeof conv, "features.transition%d.conv", b);
    x = norm_relu_conv(&z, norm, conv, x, zoo_channels(&z, x) / 2, 1);
    x = cnnb_avg_pool(g, NULL, x, CNNB_POOL(.kernel_h = 2, .kernel_w = 2));
  }
  x = cnnb_relu(g, NULL, zoo_batch_norm(&z, "features.norm5", x));
  x = cnnb_global_avg_pool(g, NULL, x);
  return zoo_finish(ctx, &z,
                    zoo_linear(&z, "classifier", x, cnnb_graph_num_classes(g), (cnnb_init){0}));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"densenet121", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_densenet", "1.0.0", "torchvision's DenseNet-121"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

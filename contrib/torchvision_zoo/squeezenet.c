/* squeezenet.c — torchvision's squeezenet1_1 (Iandola et al., "SqueezeNet", v1.1), layer
 * for layer as torchvision.models.squeezenet builds it: fire modules (a 1x1 squeeze, then
 * 1x1 and 3x3 expands concatenated), ceil-mode max pools, and a 1x1 convolution to the
 * classes averaged over the image: no dense layer, no batch norm. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zoo.h"

/* kaiming_uniform_ (a = 0): bound sqrt(6 / fan_in). */
static cnnb_init kaiming_uniform(int32_t fan_in) {
  return (cnnb_init){CNNB_INIT_UNIFORM, sqrtf(6.0f / (float)fan_in)};
}

static cnnb_tensor conv_relu(zoo *z, const char *key, cnnb_tensor x, int32_t out, int32_t k,
                             int32_t stride, int32_t padding) {
  int32_t in = zoo_channels(z, x);
  x = zoo_conv(z, key, x, out, k, stride, padding, 1, 1, kaiming_uniform(in * k * k));
  return cnnb_relu(z->g, NULL, x);
}

/* Fire(in, squeeze, expand1x1, expand3x3) as features.<index>. */
static cnnb_tensor fire(zoo *z, int index, cnnb_tensor x, int32_t squeeze, int32_t e1, int32_t e3) {
  char key[64];
  snprintf(key, sizeof key, "features.%d.squeeze", index);
  x = conv_relu(z, key, x, squeeze, 1, 1, 0);
  snprintf(key, sizeof key, "features.%d.expand1x1", index);
  cnnb_tensor a = conv_relu(z, key, x, e1, 1, 1, 0);
  snprintf(key, sizeof key, "features.%d.expand3x3", index);
  cnnb_tensor b = conv_relu(z, key, x, e3, 3, 1, 1);
  return cnnb_concat(z->g, NULL, 2, (cnnb_tensor[]){a, b});
}

static cnnb_tensor ceil_pool(zoo *z, cnnb_tensor x) {
  return cnnb_max_pool(z->g, NULL, x,
                       CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                                 .ceil_mode = 1));
}

static const zoo_recipe recipe = {
    .learning_rate = 0.01f,
    .batch = 256,
    .optimizer = "momentum",
    .momentum = 0.9f,
    .weight_decay = 1e-4f,
    .schedule = ZOO_STEP,
    .every = 30,
    .factor = 0.1,
    .text = "torchvision publishes none of its own (the SqueezeNet authors trained its "
            "weights): its train.py defaults, SGD momentum 0.9, weight decay 1e-4, divided by "
            "10 every 30 epochs, at lr 0.01 per 256 images"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "squeezenet1_1") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "squeezenet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe,
                      "torchvision's squeezenet1_1 (1.2M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "squeezenet1_1") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "squeezenet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = conv_relu(&z, "features.0", cnnb_graph_input(g), 64, 3, 2, 0);
  x = ceil_pool(&z, x);
  x = fire(&z, 3, x, 16, 64, 64);
  x = fire(&z, 4, x, 16, 64, 64);
  x = ceil_pool(&z, x);
  x = fire(&z, 6, x, 32, 128, 128);
  x = fire(&z, 7, x, 32, 128, 128);
  x = ceil_pool(&z, x);
  x = fire(&z, 9, x, 48, 192, 192);
  x = fire(&z, 10, x, 48, 192, 192);
  x = fire(&z, 11, x, 64, 256, 256);
  x = fire(&z, 12, x, 64, 256, 256);
  x = cnnb_dropout(g, NULL, x, 0.5f);
  x = zoo_conv(&z, "classifier.1", x, cnnb_graph_num_classes(g), 1, 1, 0, 1, 1,
               (cnnb_init){CNNB_INIT_NORMAL, 0.01f});
  x = cnnb_relu(g, NULL, x);
  return zoo_finish(ctx, &z, cnnb_global_avg_pool(g, NULL, x));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"squeezenet1_1", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_squeezenet", "1.0.0", "torchvision's SqueezeNet 1.1"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

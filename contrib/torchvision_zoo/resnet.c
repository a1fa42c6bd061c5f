/* resnet.c — torchvision's resnext50_32x4d (Xie et al., "Aggregated Residual
 * Transformations") and wide_resnet50_2 (Zagoruyko and Komodakis, "Wide Residual
 * Networks"), layer for layer as torchvision.models.resnet builds them: ResNet-50's
 * bottleneck blocks [3, 4, 6, 3] with the 3x3 grouped (32 groups of 4 channels per 64) or
 * twice as wide, the stride on the 3x3 (v1.5). Batch norm: torch's defaults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zoo.h"

typedef struct variant {
  const char *name;
  int32_t groups, width_per_group;
  const char *description;
} variant;

static const variant variants[] = {
    {"resnext50_32x4d", 32, 4, "torchvision's resnext50_32x4d (25.0M params)"},
    {"wide_resnet50_2", 1, 128, "torchvision's wide_resnet50_2 (68.9M params)"},
};

static const variant *variant_of(const char *name) {
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    if (strcmp(variants[i].name, name) == 0) return &variants[i];
  return NULL;
}

/* Bottleneck as layer<l>.<b>. */
static cnnb_tensor bottleneck(zoo *z, const variant *v, int l, int b, cnnb_tensor x, int32_t planes,
                              int32_t stride) {
  char key[64];
  const cnnb_init he = {0};
  int32_t in = zoo_channels(z, x);
  int32_t width = (int32_t)(planes * (v->width_per_group / 64.0)) * v->groups;
#define KEY(part) (snprintf(key, sizeof key, "layer%d.%d.%s", l, b, part), key)
  cnnb_tensor y = zoo_conv(z, KEY("conv1"), x, width, 1, 1, 0, 1, 0, he);
  y = cnnb_relu(z->g, NULL, zoo_batch_norm(z, KEY("bn1"), y));
  y = zoo_conv(z, KEY("conv2"), y, width, 3, stride, 1, v->groups, 0, he);
  y = cnnb_relu(z->g, NULL, zoo_batch_norm(z, KEY("bn2"), y));
  y = zoo_conv(z, KEY("conv3"), y, planes * 4, 1, 1, 0, 1, 0, he);
  y = zoo_batch_norm(z, KEY("bn3"), y);
  cnnb_tensor shortcut = x;
  if (stride != 1 || in != planes * 4) {
    shortcut = zoo_conv(z, KEY("downsample.0"), x, planes * 4, 1, stride, 0, 1, 0, he);
    shortcut = zoo_batch_norm(z, KEY("downsample.1"), shortcut);
  }
#undef KEY
  return cnnb_relu(z->g, NULL, cnnb_add(z->g, NULL, y, shortcut));
}

static const zoo_recipe recipe = {
    .learning_rate = 0.1f,
    .batch = 256,
    .optimizer = "momentum",
    .momentum = 0.9f,
    .weight_decay = 1e-4f,
    .schedule = ZOO_STEP,
    .every = 30,
    .factor = 0.1,
    .text = "torchvision: SGD momentum 0.9, lr 0.1 per 256 images divided by 10 every 30 "
            "epochs, weight decay 1e-4, 100 epochs (resnext50_32x4d), 90 (wide_resnet50_2)"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  const variant *v = variant_of(name);
  if (!v) return cnnb_error(ctx, CNNB_EINVAL, "resnet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe, v->description);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  const variant *v = variant_of(name);
  if (!v) return cnnb_error(ctx, CNNB_EINVAL, "resnet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv(&z, "conv1", cnnb_graph_input(g), 64, 7, 2, 3, 1, 0, (cnnb_init){0});
  x = cnnb_relu(g, NULL, zoo_batch_norm(&z, "bn1", x));
  x = cnnb_max_pool(g, NULL, x,
                    CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                              .padding = CNNB_PAD_EXPLICIT, .pad_top = 1, .pad_bottom = 1,
                              .pad_left = 1, .pad_right = 1));
  static const int32_t blocks[4] = {3, 4, 6, 3};
  for (int l = 0; l < 4; l++)
    for (int b = 0; b < blocks[l]; b++)
      x = bottleneck(&z, v, l + 1, b, x, 64 << l, b == 0 && l > 0 ? 2 : 1);
  x = cnnb_global_avg_pool(g, NULL, x);
  /* nn.Linear's default: uniform, bound 1 / sqrt(fan_in) (its bias starts at zero here). */
  const cnnb_init uniform = {CNNB_INIT_UNIFORM, 1.0f / sqrtf(2048.0f)};
  return zoo_finish(ctx, &z, zoo_linear(&z, "fc", x, cnnb_graph_num_classes(g), uniform));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"resnext50_32x4d", "wide_resnet50_2", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_resnet", "1.0.0",
                     "torchvision's ResNeXt-50 32x4d and Wide ResNet-50-2"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

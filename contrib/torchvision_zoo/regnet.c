/* regnet.c — torchvision's regnet_y_400mf (Radosavovic et al., "Designing Network Design
 * Spaces"), layer for layer as torchvision.models.regnet builds it: a 3x3 stem, four
 * stages of residual bottlenecks (grouped 3x3 of 8 channels per group, squeeze-and-
 * excitation at a quarter of the block's input width), ReLU. The stage widths and depths
 * are those BlockParams.from_init_params(depth=16, w_0=48, w_a=27.89, w_m=2.09,
 * group_width=8) quantises to. Batch norm: torch's defaults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zoo.h"

static const int32_t widths[4] = {48, 104, 208, 440}, depths[4] = {1, 3, 6, 6};
static const int32_t group_width = 8;
static const double se_ratio = 0.25;

/* ResBottleneckBlock as trunk_output.block<s>.block<s>-<b>. */
static cnnb_tensor block(zoo *z, int s, int b, cnnb_tensor x, int32_t out, int32_t stride) {
  char key[96];
  int32_t in = zoo_channels(z, x);
#define KEY(part) \
  (snprintf(key, sizeof key, "trunk_output.block%d.block%d-%d.%s", s, s, b, part), key)
  cnnb_tensor y = zoo_conv_norm_act(z, KEY("f.a"), x, out, 1, 1, 1, ZOO_RELU);
  y = zoo_conv_norm_act(z, KEY("f.b"), y, out, 3, stride, out / group_width, ZOO_RELU);
  y = zoo_squeeze_excitation(z, KEY("f.se"), y, (int32_t)lround(se_ratio * in), ZOO_RELU,
                             ZOO_SIGMOID);
  y = zoo_conv_norm_act(z, KEY("f.c"), y, out, 1, 1, 1, ZOO_IDENTITY);
  cnnb_tensor shortcut = x;
  if (in != out || stride != 1) {
    shortcut = zoo_conv(z, KEY("proj.0"), x, out, 1, stride, 0, 1, 0, (cnnb_init){0});
    shortcut = zoo_batch_norm(z, KEY("proj.1"), shortcut);
  }
#undef KEY
  return cnnb_relu(z->g, NULL, cnnb_add(z->g, NULL, shortcut, y));
}

static const zoo_recipe recipe = {
    .learning_rate = 0.8f,
    .batch = 1024,
    .optimizer = "momentum",
    .momentum = 0.9f,
    .weight_decay = 5e-5f,
    .schedule = ZOO_COSINE,
    .epochs = 100,
    .warmup_epochs = 5,
    .warmup_start = 0.1,
    .text = "torchvision: SGD momentum 0.9, lr 0.8 per 1024 images, cosine decay after 5 "
            "linear warm-up epochs from 0.1x, weight decay 5e-5, 100 epochs"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "regnet_y_400mf") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "regnet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe,
                      "torchvision's regnet_y_400mf (4.3M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "regnet_y_400mf") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "regnet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv_norm_act(&z, "stem", cnnb_graph_input(g), 32, 3, 2, 1, ZOO_RELU);
  for (int s = 0; s < 4; s++)
    for (int b = 0; b < depths[s]; b++) x = block(&z, s + 1, b, x, widths[s], b == 0 ? 2 : 1);
  x = cnnb_global_avg_pool(g, NULL, x);
  const cnnb_init normal = {CNNB_INIT_NORMAL, 0.01f};
  return zoo_finish(ctx, &z, zoo_linear(&z, "fc", x, cnnb_graph_num_classes(g), normal));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"regnet_y_400mf", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_regnet", "1.0.0", "torchvision's RegNetY-400MF"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

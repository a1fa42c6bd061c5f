/* shufflenet.c — torchvision's shufflenet_v2_x1_0 (Ma et al., "ShuffleNet V2"), layer for
 * layer as torchvision.models.shufflenetv2 builds it: a 3x3 stem and max pool, three
 * stages of units that split the channels in two halves (cnnb_slice_channels), transform
 * one (1x1, 3x3 depthwise, 1x1) and shuffle the two back together
 * (cnnb_channel_shuffle); a downsampling unit transforms both. Batch norm: torch's
 * defaults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zoo.h"

static const int32_t repeats[3] = {4, 8, 4}, widths[5] = {24, 116, 232, 464, 1024};

/* branch2 (and, downsampling, branch1) of InvertedResidual as stage<s>.<b>. */
static cnnb_tensor unit(zoo *z, int s, int b, cnnb_tensor x, int32_t out, int32_t stride) {
  char key[64];
  const cnnb_init he = {0};
  int32_t in = zoo_channels(z, x), half = out / 2;
#define KEY(part) (snprintf(key, sizeof key, "stage%d.%d.%s", s, b, part), key)
  cnnb_tensor keep, work = x;
  if (stride > 1) {
    keep = zoo_conv(z, KEY("branch1.0"), x, in, 3, stride, 1, in, 0, he);
    keep = zoo_batch_norm(z, KEY("branch1.1"), keep);
    keep = zoo_conv(z, KEY("branch1.2"), keep, half, 1, 1, 0, 1, 0, he);
    keep = cnnb_relu(z->g, NULL, zoo_batch_norm(z, KEY("branch1.3"), keep));
  } else {
    keep = cnnb_slice_channels(z->g, NULL, x, 0, in / 2);
    work = cnnb_slice_channels(z->g, NULL, x, in / 2, in - in / 2);
  }
  work = zoo_conv(z, KEY("branch2.0"), work, half, 1, 1, 0, 1, 0, he);
  work = cnnb_relu(z->g, NULL, zoo_batch_norm(z, KEY("branch2.1"), work));
  work = zoo_conv(z, KEY("branch2.3"), work, half, 3, stride, 1, half, 0, he);
  work = zoo_batch_norm(z, KEY("branch2.4"), work);
  work = zoo_conv(z, KEY("branch2.5"), work, half, 1, 1, 0, 1, 0, he);
  work = cnnb_relu(z->g, NULL, zoo_batch_norm(z, KEY("branch2.6"), work));
#undef KEY
  cnnb_tensor both = cnnb_concat(z->g, NULL, 2, (cnnb_tensor[]){keep, work});
  return cnnb_channel_shuffle(z->g, NULL, both, 2);
}

static const zoo_recipe recipe = {
    .learning_rate = 0.5f,
    .batch = 1024,
    .optimizer = "momentum",
    .momentum = 0.9f,
    .weight_decay = 4e-5f,
    .schedule = ZOO_LINEAR,
    .epochs = 300000.0 * 1024 / 1281167, /* 300,000 iterations of ImageNet's 1,281,167 */
    .per_step = 1,
    .text = "the ShuffleNet papers' (torchvision ported the weights): SGD momentum 0.9, lr 0.5 "
            "per 1024 images decaying linearly to 0 over 300,000 iterations, weight decay "
            "4e-5"};

ZOO_RECIPE_SCHEDULE(recipe)

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, "shufflenet_v2_x1_0") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "shufflenet: asked to describe '%s'", name);
  return zoo_describe(ctx, name, dataset, info, 28, &recipe,
                      "torchvision's shufflenet_v2_x1_0 (2.3M params)");
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)dataset;
  if (strcmp(name, "shufflenet_v2_x1_0") != 0)
    return cnnb_error(ctx, CNNB_EINVAL, "shufflenet: asked to build '%s'", name);
  zoo z;
  zoo_init(&z, g);
  cnnb_tensor x = zoo_conv_norm_act(&z, "conv1", cnnb_graph_input(g), widths[0], 3, 2, 1, ZOO_RELU);
  x = cnnb_max_pool(g, NULL, x,
                    CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                              .padding = CNNB_PAD_EXPLICIT, .pad_top = 1, .pad_bottom = 1,
                              .pad_left = 1, .pad_right = 1));
  for (int s = 0; s < 3; s++)
    for (int b = 0; b < repeats[s]; b++) x = unit(&z, s + 2, b, x, widths[s + 1], b ? 1 : 2);
  x = zoo_conv_norm_act(&z, "conv5", x, widths[4], 1, 1, 1, ZOO_RELU);
  x = cnnb_global_avg_pool(g, NULL, x);
  /* nn.Linear's default: uniform, bound 1 / sqrt(fan_in) (its bias starts at zero here). */
  const cnnb_init uniform = {CNNB_INIT_UNIFORM, 1.0f / sqrtf((float)widths[4])};
  return zoo_finish(ctx, &z, zoo_linear(&z, "fc", x, cnnb_graph_num_classes(g), uniform));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
    .learning_rate_at = learning_rate_at,
};

static const char *const offers[] = {"shufflenet_v2_x1_0", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "zoo_shufflenet", "1.0.0",
                     "torchvision's ShuffleNet v2 x1.0"),
    .offers = offers,
    .vtable = &vtable,
};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* example_convnet.c — a complete cnnbench model plugin, written as a third party would
 * write one: it includes only the installed SDK (<cnnb/cnnb.h>), builds with
 * cnnb_add_plugin() after find_package(CNNBench), and is loaded with
 *   cnnbench --plugin=./libexample_convnet.so --model=example_convnet
 *
 * The network: conv 3x3 (32 filters, SAME) + ReLU, max pool 2x2, dense to the classes.
 * It declares one flag of its own, --example_convnet_filters, shown under its name in
 * `cnnbench --help`. */
#include <string.h>

#include <cnnb/cnnb.h>

#define MODEL_NAME "example_convnet"

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  if (strcmp(name, MODEL_NAME) != 0)
    return cnnb_error(ctx, CNNB_EINVAL, MODEL_NAME ": asked to describe '%s'", name);
  /* The dataset's facts come from the datasource that reads it (cnnb/dataset.h). */
  const cnnb_dataset_info *facts = cnnb_dataset_lookup(dataset);
  if (!facts || facts->channels != 3)
    return cnnb_error(ctx, CNNB_EUNSUPPORTED,
                      MODEL_NAME ": no variant for %s: it reads colour images",
                      facts ? facts->name : "an unknown dataset");
  /* Small images keep the dense layer small: 16*16*32 inputs per class after the pool. */
  info->image_size = 32;
  info->default_batch_size = 32;
  info->default_learning_rate = 0.01f;
  info->description = MODEL_NAME ": conv 3x3 + relu, max pool 2x2, dense (the SDK example)";
  return CNNB_OK;
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  (void)name, (void)dataset;
  int64_t filters = cnnb_flag_int(ctx, "example_convnet_filters");
  if (filters < 1 || filters > 4096)
    return cnnb_error(ctx, CNNB_EINVAL,
                      MODEL_NAME ": --example_convnet_filters=%lld: must be 1..4096",
                      (long long)filters);
  cnnb_tensor x = cnnb_graph_input(g); /* [N, 3, H, W] */
  x = cnnb_conv2d(g, "conv1", x,
                  CNNB_CONV2D(.filters = (int32_t)filters, .kernel_h = 3, .kernel_w = 3,
                              .padding = CNNB_PAD_SAME, .use_bias = 1)); /* [N, F, H, W] */
  x = cnnb_relu(g, "relu1", x);
  x = cnnb_max_pool(g, "pool1", x, CNNB_POOL(.kernel_h = 2, .kernel_w = 2)); /* [N, F, H/2, W/2] */
  x = cnnb_dense(g, "logits", x,
                 CNNB_DENSE(.units = cnnb_graph_num_classes(g), .use_bias = 1)); /* [N, K, 1, 1] */
  cnnb_graph_set_logits(g, x);
  /* The builder kept the first error (a shape that does not fit, say): report it. */
  if (cnnb_graph_status(g) != CNNB_OK)
    return cnnb_error(ctx, cnnb_graph_status(g), "%s", cnnb_graph_error(g));
  return CNNB_OK;
}

static cnnb_status register_flags(cnnb_flag_registry *registry) {
  return cnnb_flag_declare(registry, "example_convnet_filters", CNNB_FLAG_INT, "32",
                           "Filters in example_convnet's convolution.");
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable),
    .describe = describe,
    .build = build,
};

static const char *const offers[] = {MODEL_NAME, NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, MODEL_NAME, "1.0.0",
                     "an out-of-tree example: conv, relu, max pool, dense"),
    .offers = offers,
    .vtable = &vtable,
    .register_flags = register_flags,
};

/* The one symbol the plugin exports; the host checks the ABI version it reports. */
CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* trivial.c — tf_cnn_benchmarks' `trivial` model (trivial_model.py): the images
 * flattened into one ReLU unit, then 4096 ReLU units, then the classifier. It measures
 * the framework's own overhead (input, step, update), not convolution speed.
 * ImageNet: 227x227 (224 + 3, as in the source), batch 32, learning rate 0.005;
 * CIFAR-10: 32x32, batch 32, 0.005; MNIST (not in the source): 28x28x1, batch 32, 0.005.
 * The flattening takes the input as it comes (channels x height x width), so any channel
 * count and --image_size build. */
#include "convnet.h"

static const convnet_model models[] = {
    {"trivial", CONVNET_RESIZED, 224 + 3, 32, 0.005f,
     "trivial: flatten, affine 1, affine 4096 (framework overhead)"},
    {"trivial", CONVNET_SMALL_COLOR, CONVNET_STORED_SIZE, 32, 0.005f,
     "trivial (CIFAR-10): flatten, affine 1, affine 4096"},
    {"trivial", CONVNET_SMALL_GRAY, CONVNET_STORED_SIZE, 32, 0.005f,
     "trivial (MNIST): flatten, affine 1, affine 4096"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "trivial", models, NUM_MODELS, name, dataset, info);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  const convnet_model *m = convnet_begin(ctx, "trivial", models, NUM_MODELS, name, dataset, &st);
  if (!m) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor in = cnnb_graph_input(g);
  cnnb_shape s = convnet_shape(&cn, in);
  cnnb_tensor x = convnet_reshape(&cn, in, s.c * s.h * s.w); /* [N, C*H*W, 1, 1] */
  x = convnet_affine(&cn, x, 1, NULL);
  x = convnet_affine(&cn, x, 4096, NULL);
  return convnet_finish(&cn, ctx, name, x);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"trivial", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "trivial", "1.0.0",
                     "tf_cnn_benchmarks' trivial model (ImageNet, CIFAR-10 and MNIST)"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* lenet.c — tf_cnn_benchmarks' `lenet` (lenet_model.py, TF's MNIST tutorial network on
 * 28x28 RGB images): conv 32 5x5, max pool, conv 64 5x5, max pool, affine 512, then the
 * classifier. Batch 32, learning rate 0.005. For ImageNet-style data (1001 classes), as
 * tf_cnn_benchmarks has it, and for the MNIST layout (--data_name=mnist: 28x28 with 1
 * channel, 10 classes), the data the network was written for; the layers are the same,
 * the first convolution reads as many channels as the input has. */
#include "convnet.h"

static const convnet_model models[] = {
    {"lenet", CONVNET_RESIZED, 28, 32, 0.005f, "LeNet-5 (TF MNIST tutorial layout), 28x28"},
    {"lenet", CONVNET_SMALL_GRAY, CONVNET_STORED_SIZE, 32, 0.005f,
     "LeNet-5 (TF MNIST tutorial layout), 28x28 grayscale"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "lenet", models, NUM_MODELS, name, dataset, info);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "lenet", models, NUM_MODELS, name, dataset, &st)) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g);      /* [N, 3, 28, 28] (mnist: [N, 1, 28, 28]) */
  x = convnet_conv(&cn, x, 32, 5, 5, NULL); /* [N, 32, 28, 28] */
  x = convnet_mpool(&cn, x, 2, 2, 2, 0);    /* [N, 32, 14, 14] */
  x = convnet_conv(&cn, x, 64, 5, 5, NULL); /* [N, 64, 14, 14] */
  x = convnet_mpool(&cn, x, 2, 2, 2, 0);    /* [N, 64, 7, 7] */
  x = convnet_reshape(&cn, x, 64 * 7 * 7);
  x = convnet_affine(&cn, x, 512, NULL);
  return convnet_finish(&cn, ctx, name, x);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"lenet", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "lenet", "1.0.0",
                     "tf_cnn_benchmarks' LeNet-5 (ImageNet-style and MNIST)"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

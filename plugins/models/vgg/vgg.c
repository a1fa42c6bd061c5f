/* vgg.c — tf_cnn_benchmarks' VGG (vgg_model.py): models A, D and E of Simonyan and
 * Zisserman (vgg11, vgg16, vgg19), without batch norm: 3x3 convolutions with biases in
 * five stages of 64/128/256/512/512 filters, each closed by a 2x2 max pool, then two
 * 4096 affines with dropout. 224x224, batch 64, learning rate 0.005. */
#include "convnet.h"

#include <stdio.h>

static const convnet_model models[] = {
    {"vgg11", CONVNET_RESIZED, 224, 64, 0.005f, "VGG-11 (model A, no batch norm), 224x224"},
    {"vgg16", CONVNET_RESIZED, 224, 64, 0.005f, "VGG-16 (model D, no batch norm), 224x224"},
    {"vgg19", CONVNET_RESIZED, 224, 64, 0.005f, "VGG-19 (model E, no batch norm), 224x224"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

/* Convolutions per stage (_construct_vgg's num_conv_layers), by model row. */
static const int stage_convs[NUM_MODELS][5] = {{1, 1, 2, 2, 2}, {2, 2, 3, 3, 3}, {2, 2, 4, 4, 4}};

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "vgg", models, NUM_MODELS, name, dataset, info);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  const convnet_model *m = convnet_begin(ctx, "vgg", models, NUM_MODELS, name, dataset, &st);
  if (!m) return st;
  static const int32_t filters[5] = {64, 128, 256, 512, 512};
  const int *convs = stage_convs[m - models];
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g); /* [N, 3, 224, 224] */
  /* Checkpoint names are torchvision's vgg11/16/19 keys (same shapes): features.<k>
   * with k the conv's index in torchvision's features (a conv and its ReLU per conv,
   * one entry per max pool), and classifier.0, .3, .6 (Linear, ReLU, Dropout between). */
  int feature = 0;
  for (int stage = 0; stage < 5; stage++) {
    for (int i = 0; i < convs[stage]; i++, feature += 2) {
      char ckpt[32];
      snprintf(ckpt, sizeof ckpt, "features.%d", feature);
      x = convnet_conv(&cn, x, filters[stage], 3, 3, CONVNET_OPTS(.ckpt = ckpt));
    }
    x = convnet_mpool(&cn, x, 2, 2, 2, CONVNET_VALID);
    feature++;
  }
  x = convnet_reshape(&cn, x, 512 * 7 * 7); /* [N, 25088, 1, 1] */
  x = convnet_affine(&cn, x, 4096, CONVNET_AFFINE(.ckpt = "classifier.0"));
  x = convnet_dropout(&cn, x, 0.5f);
  x = convnet_affine(&cn, x, 4096, CONVNET_AFFINE(.ckpt = "classifier.3"));
  x = convnet_dropout(&cn, x, 0.5f);
  return convnet_finish_named(&cn, ctx, name, x, "classifier.6");
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"vgg11", "vgg16", "vgg19", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "vgg", "1.0.0", "tf_cnn_benchmarks' VGG-11/16/19"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* overfeat.c — tf_cnn_benchmarks' OverFeat (overfeat_model.py, the "fast" model of
 * Sermanet et al. 2014): 231x231 images, batch 32, learning rate 0.005. Convolutions
 * 96 11x11/4 and 256 5x5 VALID, then 512/1024/1024 3x3, affines 3072 and 4096 with
 * dropout, then the classifier. */
#include "convnet.h"

static const convnet_model models[] = {
    {"overfeat", CONVNET_RESIZED, 231, 32, 0.005f, "OverFeat (fast model), 231x231"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "overfeat", models, NUM_MODELS, name, dataset, info);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "overfeat", models, NUM_MODELS, name, dataset, &st)) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g);                                                    /* 231 */
  x = convnet_conv(&cn, x, 96, 11, 11, CONVNET_OPTS(.stride = 4, .mode = CONVNET_VALID)); /* 56 */
  x = convnet_mpool(&cn, x, 2, 2, 2, CONVNET_VALID);                                      /* 28 */
  x = convnet_conv(&cn, x, 256, 5, 5, CONVNET_OPTS(.mode = CONVNET_VALID));               /* 24 */
  x = convnet_mpool(&cn, x, 2, 2, 2, CONVNET_VALID);                                      /* 12 */
  x = convnet_conv(&cn, x, 512, 3, 3, NULL);
  x = convnet_conv(&cn, x, 1024, 3, 3, NULL);
  x = convnet_conv(&cn, x, 1024, 3, 3, NULL);
  x = convnet_mpool(&cn, x, 2, 2, 2, CONVNET_VALID); /* 6 */
  x = convnet_reshape(&cn, x, 1024 * 6 * 6);
  x = convnet_affine(&cn, x, 3072, NULL);
  x = convnet_dropout(&cn, x, 0.5f);
  x = convnet_affine(&cn, x, 4096, NULL);
  x = convnet_dropout(&cn, x, 0.5f);
  return convnet_finish(&cn, ctx, name, x);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"overfeat", NULL};

static const cnnb_plugin plugin = {
    CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "overfeat", "1.0.0", "tf_cnn_benchmarks' OverFeat"),
    .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

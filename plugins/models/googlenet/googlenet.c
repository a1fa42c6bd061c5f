/* googlenet.c — tf_cnn_benchmarks' GoogLeNet (googlenet_model.py, Inception v1 of
 * Szegedy et al. 2014) without batch norm, auxiliary heads or dropout, as the source
 * builds it: every convolution has a bias and a ReLU. 224x224, batch 32, lr 0.005. */
#include "convnet.h"

static const convnet_model models[] = {
    {"googlenet", CONVNET_RESIZED, 224, 32, 0.005f,
     "GoogLeNet (Inception v1, no batch norm, no aux heads), 224x224"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "googlenet", models, NUM_MODELS, name, dataset, info);
}

/* inception_v1(cnn, k, l, m, n, p, q): 1x1 k | 1x1 l, 3x3 m | 1x1 n, 5x5 p |
 * max pool 3x3/1 SAME, 1x1 q; output channels k + m + p + q. */
static cnnb_tensor inception_v1(convnet *cn, cnnb_tensor x, int32_t k, int32_t l, int32_t m,
                                int32_t n, int32_t p, int32_t q) {
  const convnet_layer cols[4][CONVNET_MAX_COL_LAYERS] = {
      {CONVNET_L_CONV(k, 1, 1)},
      {CONVNET_L_CONV(l, 1, 1), CONVNET_L_CONV(m, 3, 3)},
      {CONVNET_L_CONV(n, 1, 1), CONVNET_L_CONV(p, 5, 5)},
      {CONVNET_L_MPOOL(3, 3, 1, CONVNET_SAME), CONVNET_L_CONV(q, 1, 1)}};
  return convnet_inception_module(cn, "incept_v1", x, 4, cols);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  if (!convnet_begin(ctx, "googlenet", models, NUM_MODELS, name, dataset, &st)) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g);                           /* [N, 3, 224, 224] */
  x = convnet_conv(&cn, x, 64, 7, 7, CONVNET_OPTS(.stride = 2)); /* 112 */
  x = convnet_mpool(&cn, x, 3, 3, 2, CONVNET_SAME);              /* 56 */
  x = convnet_conv(&cn, x, 64, 1, 1, NULL);
  x = convnet_conv(&cn, x, 192, 3, 3, NULL);
  x = convnet_mpool(&cn, x, 3, 3, 2, CONVNET_SAME);    /* 28 */
  x = inception_v1(&cn, x, 64, 96, 128, 16, 32, 32);   /* 256 */
  x = inception_v1(&cn, x, 128, 128, 192, 32, 96, 64); /* 480 */
  x = convnet_mpool(&cn, x, 3, 3, 2, CONVNET_SAME);    /* 14 */
  x = inception_v1(&cn, x, 192, 96, 208, 16, 48, 64);  /* 512 */
  x = inception_v1(&cn, x, 160, 112, 224, 24, 64, 64);
  x = inception_v1(&cn, x, 128, 128, 256, 24, 64, 64);
  x = inception_v1(&cn, x, 112, 144, 288, 32, 64, 64);   /* 528 */
  x = inception_v1(&cn, x, 256, 160, 320, 32, 128, 128); /* 832 */
  x = convnet_mpool(&cn, x, 3, 3, 2, CONVNET_SAME);      /* 7 */
  x = inception_v1(&cn, x, 256, 160, 320, 32, 128, 128);
  x = inception_v1(&cn, x, 384, 192, 384, 48, 128, 128); /* [N, 1024, 7, 7] */
  x = convnet_apool(&cn, x, 7, 7, 1, CONVNET_VALID);
  x = convnet_reshape(&cn, x, 1024);
  return convnet_finish(&cn, ctx, name, x);
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"googlenet", NULL};

static const cnnb_plugin plugin = {CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "googlenet", "1.0.0",
                                                    "tf_cnn_benchmarks' GoogLeNet (Inception v1)"),
                                   .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

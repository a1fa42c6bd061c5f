/* inception.c — tf_cnn_benchmarks' Inception v3 and v4 (inception_model.py), 299x299,
 * batch 32, learning rate 0.005 (no schedule of their own).
 *
 * Both turn batch norm on for every convolution with the builder's defaults: offset
 * only (no scale), decay 0.999, epsilon 0.001, and so no conv biases. inception3 is
 * built without its auxiliary head (Inceptionv3Model(auxiliary=False), the default
 * tf_cnn_benchmarks uses); inception4 ends with a spatial mean and dropout 0.8.
 *
 * inception3 is saved under torchvision's inception_v3(aux_logits=False) state_dict
 * keys (Conv2d_1a_3x3.conv, Mixed_5b.branch1x1.bn, ..., fc): every parameter shape is
 * torchvision's. The function is not quite: torchvision learns a batch-norm scale (saved
 * here as ones), pools Mixed_7c's branch_pool by average where tf_cnn_benchmarks takes
 * the max, and may transform its input. inception4 has no torchvision counterpart and
 * keeps its own names. */
#include "convnet.h"

#define C CONVNET_L_CONV
#define CS CONVNET_L_CONVS
#define MP CONVNET_L_MPOOL
#define AP CONVNET_L_APOOL
#define SH CONVNET_L_SHARE
#define V CONVNET_VALID
#define S CONVNET_SAME

static const convnet_model models[] = {
    {"inception3", CONVNET_RESIZED, 299, 32, 0.005f,
     "Inception v3 (offset-only batch norm, no aux head), 299x299"},
    {"inception4", CONVNET_RESIZED, 299, 32, 0.005f, "Inception v4, 299x299"},
};
enum { NUM_MODELS = sizeof models / sizeof models[0] };

static cnnb_status describe(cnnb_ctx *ctx, const char *name, uint32_t dataset,
                            cnnb_model_info *info) {
  return convnet_describe(ctx, "inception", models, NUM_MODELS, name, dataset, info);
}

/* ---- Inception v3 ------------------------------------------------------------------- */

static cnnb_tensor v3_a(convnet *cn, cnnb_tensor x, int32_t n, const char *ckpt) {
  const convnet_layer cols[4][CONVNET_MAX_COL_LAYERS] = {{C(64, 1, 1)},
                                                         {C(48, 1, 1), C(64, 5, 5)},
                                                         {C(64, 1, 1), C(96, 3, 3), C(96, 3, 3)},
                                                         {AP(3, 3, 1, S), C(n, 1, 1)}};
  static const char *const names[4][CONVNET_MAX_COL_LAYERS] = {
      {"branch1x1"},
      {"branch5x5_1", "branch5x5_2"},
      {"branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"},
      {NULL, "branch_pool"}};
  return convnet_inception_module_named(cn, "incept_v3_a", x, 4, cols, ckpt, names);
}

static cnnb_tensor v3_b(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[3][CONVNET_MAX_COL_LAYERS] = {
      {CS(384, 3, 3, 2, V)}, {C(64, 1, 1), C(96, 3, 3), CS(96, 3, 3, 2, V)}, {MP(3, 3, 2, V)}};
  static const char *const names[3][CONVNET_MAX_COL_LAYERS] = {
      {"branch3x3"}, {"branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3"}, {NULL}};
  return convnet_inception_module_named(cn, "incept_v3_b", x, 3, cols, "Mixed_6a", names);
}

static cnnb_tensor v3_c(convnet *cn, cnnb_tensor x, int32_t n, const char *ckpt) {
  const convnet_layer cols[4][CONVNET_MAX_COL_LAYERS] = {
      {C(192, 1, 1)},
      {C(n, 1, 1), C(n, 1, 7), C(192, 7, 1)},
      {C(n, 1, 1), C(n, 7, 1), C(n, 1, 7), C(n, 7, 1), C(192, 1, 7)},
      {AP(3, 3, 1, S), C(192, 1, 1)}};
  static const char *const names[4][CONVNET_MAX_COL_LAYERS] = {
      {"branch1x1"},
      {"branch7x7_1", "branch7x7_2", "branch7x7_3"},
      {"branch7x7dbl_1", "branch7x7dbl_2", "branch7x7dbl_3", "branch7x7dbl_4", "branch7x7dbl_5"},
      {NULL, "branch_pool"}};
  return convnet_inception_module_named(cn, "incept_v3_c", x, 4, cols, ckpt, names);
}

static cnnb_tensor v3_d(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[3][CONVNET_MAX_COL_LAYERS] = {
      {C(192, 1, 1), CS(320, 3, 3, 2, V)},
      {C(192, 1, 1), C(192, 1, 7), C(192, 7, 1), CS(192, 3, 3, 2, V)},
      {MP(3, 3, 2, V)}};
  static const char *const names[3][CONVNET_MAX_COL_LAYERS] = {
      {"branch3x3_1", "branch3x3_2"},
      {"branch7x7x3_1", "branch7x7x3_2", "branch7x7x3_3", "branch7x7x3_4"},
      {NULL}};
  return convnet_inception_module_named(cn, "incept_v3_d", x, 3, cols, "Mixed_7a", names);
}

static cnnb_tensor v3_e(convnet *cn, cnnb_tensor x, int max_pool, const char *ckpt) {
  const convnet_layer pool = max_pool ? (convnet_layer)MP(3, 3, 1, S)
                                      : (convnet_layer)AP(3, 3, 1, S);
  const convnet_layer cols[6][CONVNET_MAX_COL_LAYERS] = {
      {C(320, 1, 1)},         {C(384, 1, 1), C(384, 1, 3)},
      {SH, C(384, 3, 1)},     {C(448, 1, 1), C(384, 3, 3), C(384, 1, 3)},
      {SH, SH, C(384, 3, 1)}, {pool, C(192, 1, 1)}};
  static const char *const names[6][CONVNET_MAX_COL_LAYERS] = {
      {"branch1x1"},
      {"branch3x3_1", "branch3x3_2a"},
      {NULL, "branch3x3_2b"},
      {"branch3x3dbl_1", "branch3x3dbl_2", "branch3x3dbl_3a"},
      {NULL, NULL, "branch3x3dbl_3b"},
      {NULL, "branch_pool"}};
  return convnet_inception_module_named(cn, "incept_v3_e", x, 6, cols, ckpt, names);
}

static cnnb_tensor inception3(convnet *cn, cnnb_tensor x) {
  cn->use_batch_norm = 1;
#define STEM(name) .ckpt = name ".conv", .ckpt_bn = name ".bn"
  x = convnet_conv(cn, x, 32, 3, 3, CONVNET_OPTS(.stride = 2, .mode = V, STEM("Conv2d_1a_3x3")));
  x = convnet_conv(cn, x, 32, 3, 3, CONVNET_OPTS(.mode = V, STEM("Conv2d_2a_3x3"))); /* 147x32 */
  x = convnet_conv(cn, x, 64, 3, 3, CONVNET_OPTS(.mode = S, STEM("Conv2d_2b_3x3"))); /* 147x64 */
  x = convnet_mpool(cn, x, 3, 3, 2, V); /* 73 x 73 x 64 */
  x = convnet_conv(cn, x, 80, 1, 1, CONVNET_OPTS(.mode = V, STEM("Conv2d_3b_1x1")));  /* 73x80 */
  x = convnet_conv(cn, x, 192, 3, 3, CONVNET_OPTS(.mode = V, STEM("Conv2d_4a_3x3"))); /* 71 */
#undef STEM
  x = convnet_mpool(cn, x, 3, 3, 2, V); /* 35 x 35 x 192 */
  x = v3_a(cn, x, 32, "Mixed_5b");      /* 35 x 35 x 256 */
  x = v3_a(cn, x, 64, "Mixed_5c");      /* 35 x 35 x 288 */
  x = v3_a(cn, x, 64, "Mixed_5d");      /* 35 x 35 x 288 */
  x = v3_b(cn, x);                      /* 17 x 17 x 768 */
  x = v3_c(cn, x, 128, "Mixed_6b");
  x = v3_c(cn, x, 160, "Mixed_6c");
  x = v3_c(cn, x, 160, "Mixed_6d");
  x = v3_c(cn, x, 192, "Mixed_6e");     /* 17 x 17 x 768 */
  x = v3_d(cn, x);                      /* 8 x 8 x 1280 */
  x = v3_e(cn, x, 0, "Mixed_7b");       /* 8 x 8 x 2048 */
  x = v3_e(cn, x, 1, "Mixed_7c");       /* 8 x 8 x 2048 */
  x = convnet_apool(cn, x, 8, 8, 1, V); /* 1 x 1 x 2048 */
  return convnet_reshape(cn, x, 2048);
}

/* ---- Inception v4 ------------------------------------------------------------------- */

static cnnb_tensor v4_sa(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[2][CONVNET_MAX_COL_LAYERS] = {{MP(3, 3, 2, V)},
                                                                {CS(96, 3, 3, 2, V)}};
  return convnet_inception_module(cn, "incept_v4_sa", x, 2, cols);
}

static cnnb_tensor v4_sb(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[2][CONVNET_MAX_COL_LAYERS] = {
      {C(64, 1, 1), CS(96, 3, 3, 1, V)},
      {C(64, 1, 1), C(64, 7, 1), C(64, 1, 7), CS(96, 3, 3, 1, V)}};
  return convnet_inception_module(cn, "incept_v4_sb", x, 2, cols);
}

static cnnb_tensor v4_sc(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[2][CONVNET_MAX_COL_LAYERS] = {{CS(192, 3, 3, 2, V)},
                                                                {MP(3, 3, 2, V)}};
  return convnet_inception_module(cn, "incept_v4_sc", x, 2, cols);
}

static cnnb_tensor v4_ra(convnet *cn, cnnb_tensor x, int32_t k, int32_t l, int32_t m, int32_t n) {
  const convnet_layer cols[3][CONVNET_MAX_COL_LAYERS] = {
      {MP(3, 3, 2, V)}, {CS(n, 3, 3, 2, V)}, {C(k, 1, 1), C(l, 3, 3), CS(m, 3, 3, 2, V)}};
  return convnet_inception_module(cn, "incept_v4_ra", x, 3, cols);
}

static cnnb_tensor v4_rb(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[3][CONVNET_MAX_COL_LAYERS] = {
      {MP(3, 3, 2, V)},
      {C(192, 1, 1), CS(192, 3, 3, 2, V)},
      {C(256, 1, 1), C(256, 1, 7), C(320, 7, 1), CS(320, 3, 3, 2, V)}};
  return convnet_inception_module(cn, "incept_v4_rb", x, 3, cols);
}

static cnnb_tensor v4_a(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[4][CONVNET_MAX_COL_LAYERS] = {
      {AP(3, 3, 1, S), C(96, 1, 1)},
      {C(96, 1, 1)},
      {C(64, 1, 1), C(96, 3, 3)},
      {C(64, 1, 1), C(96, 3, 3), C(96, 3, 3)}};
  return convnet_inception_module(cn, "incept_v4_a", x, 4, cols);
}

static cnnb_tensor v4_b(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[4][CONVNET_MAX_COL_LAYERS] = {
      {AP(3, 3, 1, S), C(128, 1, 1)},
      {C(384, 1, 1)},
      {C(192, 1, 1), C(224, 1, 7), C(256, 7, 1)},
      {C(192, 1, 1), C(192, 1, 7), C(224, 7, 1), C(224, 1, 7), C(256, 7, 1)}};
  return convnet_inception_module(cn, "incept_v4_b", x, 4, cols);
}

static cnnb_tensor v4_c(convnet *cn, cnnb_tensor x) {
  static const convnet_layer cols[6][CONVNET_MAX_COL_LAYERS] = {
      {AP(3, 3, 1, S), C(256, 1, 1)},
      {C(256, 1, 1)},
      {C(384, 1, 1), C(256, 1, 3)},
      {SH, C(256, 3, 1)},
      {C(384, 1, 1), C(448, 1, 3), C(512, 3, 1), C(256, 3, 1)},
      {SH, SH, SH, C(256, 1, 3)}};
  return convnet_inception_module(cn, "incept_v4_c", x, 6, cols);
}

static cnnb_tensor inception4(convnet *cn, cnnb_tensor x) {
  cn->use_batch_norm = 1;
  x = convnet_conv(cn, x, 32, 3, 3, CONVNET_OPTS(.stride = 2, .mode = V)); /* 149 */
  x = convnet_conv(cn, x, 32, 3, 3, CONVNET_OPTS(.mode = V));              /* 147 */
  x = convnet_conv(cn, x, 64, 3, 3, NULL);                                 /* 147 x 64 */
  x = v4_sa(cn, x);                                                        /* 73 x 160 */
  x = v4_sb(cn, x);                                                        /* 71 x 192 */
  x = v4_sc(cn, x);                                                        /* 35 x 384 */
  for (int i = 0; i < 4; i++) x = v4_a(cn, x);                             /* 35 x 384 */
  x = v4_ra(cn, x, 192, 224, 256, 384);                                    /* 17 x 1024 */
  for (int i = 0; i < 7; i++) x = v4_b(cn, x);                             /* 17 x 1024 */
  x = v4_rb(cn, x);                                                        /* 8 x 1536 */
  for (int i = 0; i < 3; i++) x = v4_c(cn, x);                             /* 8 x 1536 */
  x = convnet_spatial_mean(cn, x);
  return convnet_dropout(cn, x, 0.8f);
}

static cnnb_status build(cnnb_ctx *ctx, const char *name, uint32_t dataset, cnnb_graph *g) {
  cnnb_status st;
  const convnet_model *m = convnet_begin(ctx, "inception", models, NUM_MODELS, name, dataset, &st);
  if (!m) return st;
  convnet cn;
  convnet_init(&cn, g);
  cnnb_tensor x = cnnb_graph_input(g); /* [N, 3, 299, 299] */
  if (m == &models[0]) return convnet_finish_named(&cn, ctx, name, inception3(&cn, x), "fc");
  return convnet_finish(&cn, ctx, name, inception4(&cn, x));
}

static const cnnb_model_vtable vtable = {
    .struct_size = sizeof(cnnb_model_vtable), .describe = describe, .build = build};

static const char *const offers[] = {"inception3", "inception4", NULL};

static const cnnb_plugin plugin = {CNNB_PLUGIN_HEAD(CNNB_KIND_MODEL, "inception", "1.0.0",
                                                    "tf_cnn_benchmarks' Inception v3 and v4"),
                                   .offers = offers, .vtable = &vtable};

CNNB_PLUGIN_ENTRY {
  (void)host;
  return &plugin;
}

/* test_device_gradcheck.c — finite-difference gradient checks through the device under
 * test (`test_device_gradcheck NAME`, device_harness.h) on small whole graphs: a
 * residual block (conv, batch norm with fused ReLU, add) and an Inception-style block
 * (branches of different convs, concat, LRN, pools, dropout), each ending in dense +
 * softmax cross-entropy. A graph's analytic gradient (backward, with the harness
 * accumulating where a tensor feeds several consumers) must match the central
 * difference (L(w + e) - L(w - e)) / 2e of the device's own loss.
 *
 * Runs in each precision whose row of tests/support/tolerance.c has a gradient-check
 * tolerance (fp32: that file says why not bf16 / fp16, and what e and the bounds are).
 * Dropout is in the graph with a fixed step, so its mask is the same for every probe. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_run.h"
#include "graph/graph_internal.h"
#include "graph/op_table.h"
#include "flags/flags.h"

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((rng_next(s) >> 40) * (1.0 / 16777216.0));
}

typedef struct gc {
  device_harness h;
  const test_tolerance *tol;
  cnnb_graph *g;
  device_run *r;
  float *params, *stats, *images;
  int32_t *labels;
  int64_t pc, sc, xc;
} gc;

static float loss_of(gc *t) {
  ck_assert_msg(device_run_set_params(t->r, t->params, t->stats) == 0, "%s", t->h.error);
  ck_assert_msg(device_run_forward(t->r, t->images, t->labels, 5) == 0, "%s", t->h.error);
  float loss;
  ck_assert_msg(device_run_activation(t->r, cnnb_graph_loss(t->g), &loss) == 0, "%s", t->h.error);
  return loss;
}

static void check_entry(const char *what, int64_t i, float analytic, float *slot, gc *t,
                        int *checked) {
  const float eps = t->tol->gradcheck_eps;
  float saved = *slot;
  *slot = saved + eps;
  float up = loss_of(t);
  *slot = saved - eps;
  float down = loss_of(t);
  *slot = saved;
  double numeric = ((double)up - down) / (2.0 * eps);
  ck_assert_msg(fabs(analytic - numeric) <=
                    t->tol->gradcheck_abs + t->tol->gradcheck_rel * fabs(numeric),
                "%s[%lld] (%s): backward %.6g, finite difference %.6g", what, (long long)i,
                t->tol->name, analytic, numeric);
  (*checked)++;
}

/* Runs one forward/backward of g (its loss added) in `precision`, then probes every
 * parameter tensor and the images at a few seeded positions each. */
static void gradcheck_in(cnnb_graph *g, uint32_t precision, uint64_t seed) {
  gc t = {0};
  t.g = g;
  t.tol = test_tolerance_of(precision);
  int rc = device_harness_open(&t.h, precision, 1, 77);
  if (rc == DEVICE_HARNESS_REFUSED) { /* refused: device_harness_main printed why */
    device_harness_close(&t.h);
    return;
  }
  ck_assert_msg(rc == 0, "%s", t.h.error);
  /* Ops newer than a device: a device that says it does not run one skips the graphs that
   * have it, saying so (the host refuses such runs, naming the op). */
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    uint32_t op = cnnb_graph_node(g, i)->op;
    if (t.h.dv->supports_op && !t.h.dv->supports_op(t.h.dev, op)) {
      printf("%s does not run %s (supports_op): this graph is skipped\n", t.h.name,
             cnnb_op_name(op));
      device_harness_close(&t.h);
      return;
    }
  }
  t.r = device_run_create(&t.h, g);
  ck_assert_msg(t.r != NULL, "%s", t.h.error);
  t.pc = cnnb_graph_param_arena_count(g);
  t.sc = cnnb_graph_stat_arena_count(g);
  cnnb_shape xs = cnnb_graph_node(g, cnnb_graph_input(g))->shape;
  t.xc = cnnb_shape_count(xs);
  t.params = malloc((size_t)t.pc * sizeof(float));
  t.stats = malloc((size_t)(t.sc ? t.sc : 1) * sizeof(float));
  t.images = malloc((size_t)t.xc * sizeof(float));
  t.labels = malloc((size_t)xs.n * sizeof(int32_t));
  float *grads = malloc((size_t)t.pc * sizeof(float)), *dimg = malloc((size_t)t.xc * sizeof(float));
  for (int64_t i = 0; i < t.pc; i++) t.params[i] = uniform(&seed, -0.4f, 0.4f);
  /* Batch norm as initialised in practice (scale near 1, offset near 0): a tiny scale
   * would squeeze a whole channel into the following ReLU's kink, where no finite
   * difference is meaningful. */
  for (int32_t p = 0; p < cnnb_graph_num_params(g); p++) {
    const cnnb_param *param = cnnb_graph_param(g, p);
    const cnnb_node *owner = cnnb_graph_node(g, param->node);
    if (param->is_stat || owner->op != CNNB_OP_BATCH_NORM) continue;
    int is_scale = owner->num_params == 2 && owner->params[0] == p;
    for (int64_t i = 0; i < param->count; i++)
      t.params[param->offset + i] = is_scale ? uniform(&seed, 0.8f, 1.2f)
                                             : uniform(&seed, -0.1f, 0.1f);
  }
  for (int64_t i = 0; i < t.sc; i++) t.stats[i] = uniform(&seed, 0.5f, 1.0f);
  for (int64_t i = 0; i < t.xc; i++) t.images[i] = uniform(&seed, -1.0f, 1.0f);
  int32_t classes = cnnb_graph_num_classes(g);
  for (int32_t i = 0; i < xs.n; i++) t.labels[i] = (int32_t)(rng_next(&seed) % (uint64_t)classes);

  float loss = loss_of(&t);
  ck_assert_msg(isfinite(loss) && loss > 0.0f, "loss %g", loss);
  ck_assert_msg(device_run_backward(t.r, -1, NULL, 1.0f, 5) == 0, "%s", t.h.error);
  ck_assert_msg(device_run_get_param_grads(t.r, grads) == 0, "%s", t.h.error);
  ck_assert_msg(device_run_gradient(t.r, cnnb_graph_input(g), dimg) == 0, "%s", t.h.error);

  int checked = 0;
  for (int32_t p = 0; p < cnnb_graph_num_params(g); p++) {
    const cnnb_param *param = cnnb_graph_param(g, p);
    if (param->is_stat) continue;
    for (int k = 0; k < 4; k++) {
      int64_t i = param->offset + (int64_t)(rng_next(&seed) % (uint64_t)param->count);
      check_entry(param->name, i - param->offset, grads[i], &t.params[i], &t, &checked);
    }
  }
  for (int k = 0; k < 8; k++) {
    int64_t i = (int64_t)(rng_next(&seed) % (uint64_t)t.xc);
    check_entry("images", i, dimg[i], &t.images[i], &t, &checked);
  }
  ck_assert_int_gt(checked, 20);
  free(grads);
  free(dimg);
  free(t.params);
  free(t.stats);
  free(t.images);
  free(t.labels);
  device_run_destroy(t.r);
  device_harness_close(&t.h);
}

/* g in every precision the tolerance table gives a gradient check. */
static void gradcheck(cnnb_graph *g, uint64_t seed) {
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "graph: %s", cnnb_graph_error(g));
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  int ran = 0;
  for (uint32_t p = CNNB_PRECISION_FP32; p <= CNNB_PRECISION_FP16; p++) {
    const test_tolerance *tol = test_tolerance_of(p);
    if (!tol || tol->gradcheck_eps <= 0.0f) continue;
    gradcheck_in(g, p, seed);
    ran++;
  }
  ck_assert_int_gt(ran, 0);
  cnnb_graph_destroy(g);
}

START_TEST(test_residual_block) {
  cnnb_graph *g = cnnb_graph_create(3, 3, 8, 8, 5);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor stem = cnnb_conv2d(g, "stem", x,
                                 CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3,
                                             .use_bias = 1));
  cnnb_tensor bn0 = cnnb_batch_norm(g, "bn0", stem, CNNB_BATCH_NORM(.scale = 1));
  cnnb_tensor a = cnnb_relu(g, "relu0", bn0);
  /* Residual branch: conv -> bn (fused relu) -> conv -> bn (offset only), added to `a`. */
  cnnb_tensor c1 = cnnb_conv2d(g, "c1", a, CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor b1 = cnnb_batch_norm(g, "b1", c1, CNNB_BATCH_NORM(.scale = 1));
  cnnb_tensor c2 = cnnb_conv2d(g, "c2", b1,
                               CNNB_CONV2D(.filters = 8, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor b2 = cnnb_batch_norm(g, "b2", c2, CNNB_BATCH_NORM());
  cnnb_tensor sum = cnnb_add(g, "add", a, b2);
  cnnb_tensor r = cnnb_relu(g, "relu1", sum);
  cnnb_tensor pool = cnnb_global_avg_pool(g, "gap", r);
  cnnb_tensor logits = cnnb_dense(g, "fc", pool, CNNB_DENSE(.units = 5, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_fused_relu(g, b1, 1), CNNB_OK);
  gradcheck(g, 11);
}
END_TEST

/* conv (no bias) -> batch norm with a scale, its ReLU fused when `relu`; strided convs pad
 * as ResNet v1.5's conv2d_fixed_padding (by the kernel alone: explicit, symmetric for odd
 * kernels), the rest SAME. */
static cnnb_tensor conv_bn(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t filters,
                           int32_t k, int32_t stride, int relu) {
  char conv[64], bn[64]; /* name is at most 47 bytes (the callers' buffers) */
  snprintf(conv, sizeof conv, "%s_conv", name);
  snprintf(bn, sizeof bn, "%s_bn", name);
  cnnb_conv2d_desc d = {.struct_size = sizeof d,
                        .filters = filters,
                        .kernel_h = k,
                        .kernel_w = k,
                        .stride_h = stride,
                        .stride_w = stride,
                        .padding = CNNB_PAD_SAME};
  if (stride > 1) {
    d.padding = CNNB_PAD_EXPLICIT;
    d.pad_top = d.pad_left = (k - 1) / 2;
    d.pad_bottom = d.pad_right = k - 1 - (k - 1) / 2;
  }
  cnnb_tensor y = cnnb_batch_norm(g, bn, cnnb_conv2d(g, conv, x, &d), CNNB_BATCH_NORM(.scale = 1));
  if (relu) ck_assert_int_eq(cnnb_graph_set_fused_relu(g, y, 1), CNNB_OK);
  return y;
}

/* ResNet v1.5's bottleneck: 1x1 -> bn + relu -> 3x3 (the stride) -> bn + relu -> 1x1 -> bn,
 * added to the shortcut (a strided 1x1 conv + bn where the depth changes, else x itself,
 * which then feeds two consumers), then ReLU: fused into the add where the device offers
 * it (the host's planner fuses it there), else a node of its own. */
static cnnb_tensor bottleneck(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t depth,
                              int32_t bneck, int32_t stride) {
  char n[48];
  cnnb_tensor shortcut = x;
  if (cnnb_graph_node(g, x)->shape.c != depth) {
    snprintf(n, sizeof n, "%s_shortcut", name);
    shortcut = conv_bn(g, n, x, depth, 1, stride, 0);
  }
  snprintf(n, sizeof n, "%s_1", name);
  cnnb_tensor y = conv_bn(g, n, x, bneck, 1, 1, 1);
  snprintf(n, sizeof n, "%s_2", name);
  y = conv_bn(g, n, y, bneck, 3, stride, 1);
  snprintf(n, sizeof n, "%s_3", name);
  y = conv_bn(g, n, y, depth, 1, 1, 0);
  snprintf(n, sizeof n, "%s_add", name);
  cnnb_tensor sum = cnnb_add(g, n, shortcut, y);
  if (device_harness_has_extension(NULL, CNNB_EXT_FUSED_RELU_ADD)) {
    ck_assert_int_eq(cnnb_graph_set_fused_relu(g, sum, 1), CNNB_OK);
    return sum;
  }
  snprintf(n, sizeof n, "%s_relu", name);
  return cnnb_relu(g, n, sum);
}

/* ResNet-50 v1.5 in miniature, at the shapes of its last stage in a small-image run: the
 * 7x7 stride-2 stem with batch norm + ReLU, the 3x3 stride-2 SAME max pool (pads 0 and
 * 1: asymmetric), then a stage's first block (projection shortcut, stride 2 in its 3x3)
 * and an identity block, both on 2x2 maps of a batch of 2: every batch norm there
 * normalises over m = N*H*W = 8 values, where its dx is a small difference of large
 * terms. */
START_TEST(test_bottleneck_blocks) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 16, 16, 5);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor y = conv_bn(g, "stem", x, 8, 7, 2, 1); /* 8x8 */
  y = cnnb_max_pool(g, "pool", y,
                    CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2,
                              .padding = CNNB_PAD_SAME)); /* 4x4 */
  y = bottleneck(g, "block0", y, 16, 4, 2);               /* 2x2 */
  y = bottleneck(g, "block1", y, 16, 4, 1);
  cnnb_tensor logits = cnnb_dense(g, "fc", cnnb_global_avg_pool(g, "gap", y),
                                  CNNB_DENSE(.units = 5, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 41);
}
END_TEST

START_TEST(test_inception_block) {
  cnnb_graph *g = cnnb_graph_create(2, 4, 9, 9, 6);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor stem = cnnb_conv2d(g, "stem", x,
                                 CNNB_CONV2D(.filters = 6, .kernel_h = 3, .kernel_w = 3,
                                             .stride_h = 2, .stride_w = 2));
  cnnb_tensor lrn = cnnb_lrn(g, "lrn", stem,
                             CNNB_LRN(.depth_radius = 2, .bias = 1.0f, .alpha = 0.1f,
                                      .beta = 0.75f));
  /* Four branches of one input (the harness sums their gradients), then concat. */
  cnnb_tensor b[4];
  b[0] = cnnb_conv2d(g, "b0", lrn,
                     CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1, .use_bias = 1));
  cnnb_tensor b1a = cnnb_conv2d(g, "b1a", lrn,
                                CNNB_CONV2D(.filters = 3, .kernel_h = 1, .kernel_w = 1));
  b[1] = cnnb_conv2d(g, "b1b", b1a,
                     CNNB_CONV2D(.filters = 5, .kernel_h = 3, .kernel_w = 3, .dilation_h = 2,
                                 .dilation_w = 2));
  b[2] = cnnb_conv2d(g, "b2", lrn,
                     CNNB_CONV2D(.filters = 6, .kernel_h = 3, .kernel_w = 3, .groups = 6));
  cnnb_tensor b3 = cnnb_avg_pool(g, "b3pool", lrn,
                                 CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 1,
                                           .stride_w = 1, .padding = CNNB_PAD_SAME));
  b[3] = cnnb_conv2d(g, "b3", b3, CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor cat = cnnb_concat(g, "concat", 4, b);
  cnnb_tensor bn = cnnb_batch_norm(g, "bn", cat, CNNB_BATCH_NORM());
  cnnb_tensor relu = cnnb_relu(g, "relu", bn);
  cnnb_tensor mp = cnnb_max_pool(g, "mpool", relu,
                                 CNNB_POOL(.kernel_h = 2, .kernel_w = 2, .stride_h = 2,
                                           .stride_w = 2, .padding = CNNB_PAD_SAME));
  cnnb_tensor flat = cnnb_flatten(g, "flatten", mp);
  cnnb_tensor drop = cnnb_dropout(g, "dropout", flat, 0.8f);
  cnnb_tensor logits = cnnb_dense(g, "fc", drop, CNNB_DENSE(.units = 6, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 23);
}
END_TEST

/* NASNet's factorized reduction and a separable conv: the input's ReLU, two paths of a
 * strided 1x1 average pool and a 1x1 conv, the second shifted by one pixel (pad_spatial
 * -1, 1, -1, 1) over an odd size, so its last row and column are padding; concat, batch
 * norm; then a strided depthwise 3x3 (SAME) and its pointwise 1x1. */
START_TEST(test_factorized_reduction) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 7, 7, 5);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor stem = cnnb_conv2d(g, "stem", x,
                                 CNNB_CONV2D(.filters = 6, .kernel_h = 3, .kernel_w = 3,
                                             .use_bias = 1));
  cnnb_tensor r = cnnb_relu(g, "relu", stem);
  const cnnb_pool_desc *sub = CNNB_POOL(.kernel_h = 1, .kernel_w = 1, .stride_h = 2, .stride_w = 2,
                                        .padding = CNNB_PAD_VALID);
  cnnb_tensor path[2];
  path[0] = cnnb_conv2d(g, "path1_conv", cnnb_avg_pool(g, "path1_pool", r, sub),
                        CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1, .use_bias = 1));
  cnnb_tensor shifted = cnnb_pad_spatial(g, "shift", r, -1, 1, -1, 1);
  path[1] = cnnb_conv2d(g, "path2_conv", cnnb_avg_pool(g, "path2_pool", shifted, sub),
                        CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1, .use_bias = 1));
  cnnb_tensor bn = cnnb_batch_norm(g, "final_path_bn", cnnb_concat(g, "concat", 2, path),
                                   CNNB_BATCH_NORM());
  cnnb_tensor dw = cnnb_conv2d(g, "depthwise", cnnb_relu(g, "relu2", bn),
                               CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3,
                                           .stride_h = 2, .stride_w = 2, .padding = CNNB_PAD_SAME,
                                           .groups = 8));
  cnnb_tensor pw = cnnb_conv2d(g, "pointwise", dw,
                               CNNB_CONV2D(.filters = 6, .kernel_h = 1, .kernel_w = 1,
                                           .use_bias = 1));
  cnnb_tensor pool = cnnb_global_avg_pool(g, "gap", pw);
  cnnb_tensor logits = cnnb_dense(g, "fc", pool, CNNB_DENSE(.units = 5, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 31);
}
END_TEST

/* The activations of ABI 1.14 in a small MobileNet v3 / EfficientNet / ConvNeXt-like
 * chain: conv, silu; conv, hard_swish; conv, gelu; pooled; dense, sigmoid; dense,
 * hard_sigmoid; dense, gelu (tanh); the logits. */
START_TEST(test_activation_chain) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 6, 6, 5);
  const cnnb_conv2d_desc *conv3 = CNNB_CONV2D(.filters = 6, .kernel_h = 3, .kernel_w = 3,
                                              .use_bias = 1);
  cnnb_tensor x = cnnb_silu(g, "silu", cnnb_conv2d(g, "conv1", cnnb_graph_input(g), conv3));
  x = cnnb_hard_swish(g, "hard_swish", cnnb_conv2d(g, "conv2", x, conv3));
  x = cnnb_gelu(g, "gelu", cnnb_conv2d(g, "conv3", x, conv3), 0);
  x = cnnb_global_avg_pool(g, "gap", x);
  const cnnb_dense_desc *fc = CNNB_DENSE(.units = 7, .use_bias = 1);
  x = cnnb_sigmoid(g, "sigmoid", cnnb_dense(g, "fc1", x, fc));
  x = cnnb_hard_sigmoid(g, "hard_sigmoid", cnnb_dense(g, "fc2", x, fc));
  x = cnnb_gelu(g, "gelu_tanh", cnnb_dense(g, "fc3", x, fc), 1);
  cnnb_tensor logits = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = 5, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 41);
}
END_TEST

/* The ops of ABI 1.14 that own parameters or join two tensors, as the modern blocks use
 * them: a squeeze-and-excitation gate (pool, two 1x1 convs, sigmoid, multiply) and a
 * ConvNeXt block (depthwise conv, layer norm, pointwise convs with gelu, layer scale,
 * the residual add), then an equal-shape multiply. */
START_TEST(test_modern_blocks) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 5, 5, 4);
  cnnb_tensor x = cnnb_conv2d(g, "stem", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor s = cnnb_global_avg_pool(g, "se/pool", x);
  s = cnnb_silu(g, "se/silu",
                cnnb_conv2d(g, "se/reduce", s,
                            CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1,
                                        .use_bias = 1)));
  s = cnnb_sigmoid(g, "se/gate",
                   cnnb_conv2d(g, "se/expand", s,
                               CNNB_CONV2D(.filters = 8, .kernel_h = 1, .kernel_w = 1,
                                           .use_bias = 1)));
  x = cnnb_multiply(g, "se/scale", x, s);
  cnnb_tensor b = cnnb_conv2d(g, "block/dw", x,
                              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3, .groups = 8,
                                          .use_bias = 1));
  b = cnnb_layer_norm(g, "block/norm", b, 1e-6f);
  b = cnnb_gelu(g, "block/gelu",
                cnnb_conv2d(g, "block/pw1", b,
                            CNNB_CONV2D(.filters = 16, .kernel_h = 1, .kernel_w = 1,
                                        .use_bias = 1)),
                0);
  b = cnnb_conv2d(g, "block/pw2", b,
                  CNNB_CONV2D(.filters = 8, .kernel_h = 1, .kernel_w = 1, .use_bias = 1));
  b = cnnb_channel_scale(g, "block/layer_scale", b, 0.5f);
  x = cnnb_add(g, "block/add", x, b);
  x = cnnb_multiply(g, "square", x, cnnb_layer_norm(g, "norm2", x, 1e-5f));
  x = cnnb_global_avg_pool(g, "gap", x);
  cnnb_tensor logits = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = 4, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 43);
}
END_TEST

/* ShuffleNet v2's units: one that splits its input in two channel halves and works on one,
 * one that works on both (downsampling), each ending in a channel shuffle. */
START_TEST(test_shuffle_units) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 6, 6, 4);
  const cnnb_conv2d_desc *pw = CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1);
  cnnb_tensor x = cnnb_conv2d(g, "stem", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor keep = cnnb_slice_channels(g, "x1", x, 0, 4);
  cnnb_tensor work = cnnb_slice_channels(g, "x2", x, 4, 4);
  work = cnnb_relu(g, NULL, cnnb_conv2d(g, "b2/pw", work, pw));
  work = cnnb_conv2d(g, "b2/dw", work,
                     CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3, .groups = 4));
  x = cnnb_channel_shuffle(g, "shuffle1", cnnb_concat(g, NULL, 2, (cnnb_tensor[]){keep, work}), 2);
  cnnb_tensor left = cnnb_conv2d(g, "b1/dw", x,
                                 CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3,
                                             .stride_h = 2, .stride_w = 2, .groups = 8));
  cnnb_tensor right = cnnb_conv2d(g, "b2b/dw", cnnb_relu(g, NULL, cnnb_conv2d(g, "b2b/pw", x, pw)),
                                  CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3,
                                              .stride_h = 2, .stride_w = 2, .groups = 4));
  x = cnnb_channel_shuffle(g, "shuffle2", cnnb_concat(g, NULL, 2, (cnnb_tensor[]){left, right}), 3);
  x = cnnb_global_avg_pool(g, "gap", x);
  cnnb_tensor logits = cnnb_dense(g, "logits", x, CNNB_DENSE(.units = 4, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  gradcheck(g, 47);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("device_gradcheck");
  TCase *tc = tcase_create("graphs");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_residual_block);
  tcase_add_test(tc, test_bottleneck_blocks);
  tcase_add_test(tc, test_inception_block);
  tcase_add_test(tc, test_factorized_reduction);
  tcase_add_test(tc, test_activation_chain);
  tcase_add_test(tc, test_modern_blocks);
  tcase_add_test(tc, test_shuffle_units);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  return device_harness_run(argc, argv, "test_device_gradcheck", suite);
}

/* test_graph.c — the graph builder: TF shape inference (SAME / VALID / EXPLICIT, stride,
 * dilation, groups, pools), the sticky first error and its messages, parameter arenas
 * (counts, offsets, names, default inits), scopes and automatic names, consumers, and
 * the loss the host appends. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"

static cnnb_shape shape(const cnnb_graph *g, cnnb_tensor t) {
  const cnnb_node *n = cnnb_graph_node(g, t);
  ck_assert_ptr_nonnull(n);
  return n->shape;
}

#define ck_assert_shape(g, t, N, C, H, W)                                                      \
  do {                                                                                         \
    cnnb_shape s_ = shape((g), (t));                                                           \
    ck_assert_msg(s_.n == (N) && s_.c == (C) && s_.h == (H) && s_.w == (W),                    \
                  "shape [%d, %d, %d, %d], expected [%d, %d, %d, %d]", s_.n, s_.c, s_.h, s_.w, \
                  (N), (C), (H), (W));                                                         \
  } while (0)

#define ck_assert_pads(g, t, T, B, L, R)                                                           \
  do {                                                                                             \
    const cnnb_node *n_ = cnnb_graph_node((g), (t));                                               \
    ck_assert_msg(n_->attr.window.pad_top == (T) && n_->attr.window.pad_bottom == (B) &&           \
                      n_->attr.window.pad_left == (L) && n_->attr.window.pad_right == (R),         \
                  "pads %d,%d,%d,%d expected %d,%d,%d,%d", n_->attr.window.pad_top,                \
                  n_->attr.window.pad_bottom, n_->attr.window.pad_left, n_->attr.window.pad_right, \
                  (T), (B), (L), (R));                                                             \
  } while (0)

#define ck_assert_error_has(g, needle)                                                  \
  ck_assert_msg(strstr(cnnb_graph_error(g), (needle)) != NULL, "error '%s' lacks '%s'", \
                cnnb_graph_error(g), (needle))

START_TEST(test_create_input) {
  cnnb_graph *g = cnnb_graph_create(8, 3, 224, 224, 1001);
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_str_eq(cnnb_graph_error(g), "");
  ck_assert_int_eq(cnnb_graph_input(g), 0);
  ck_assert_int_eq(cnnb_graph_num_nodes(g), 1);
  ck_assert_int_eq(cnnb_graph_node(g, 0)->op, CNNB_OP_INPUT);
  ck_assert_str_eq(cnnb_graph_node(g, 0)->name, "input");
  ck_assert_uint_eq(cnnb_graph_node(g, 0)->struct_size, sizeof(cnnb_node));
  ck_assert_shape(g, 0, 8, 3, 224, 224);
  ck_assert_int_eq(cnnb_graph_num_classes(g), 1001);
  ck_assert_int_eq(cnnb_graph_logits(g), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_loss(g), CNNB_NO_TENSOR);
  ck_assert_ptr_null(cnnb_graph_node(g, 1));
  ck_assert_ptr_null(cnnb_graph_node(g, -1));
  ck_assert_int_eq(cnnb_shape_count((cnnb_shape){8, 3, 224, 224}), 8LL * 3 * 224 * 224);
  ck_assert_int_eq(cnnb_shape_count((cnnb_shape){4096, 4096, 64, 64}), 4096LL * 4096 * 64 * 64);
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(0, 3, 32, 32, 10);
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(g, "[0, 3, 32, 32]");
  cnnb_graph_destroy(g);
  cnnb_graph_destroy(NULL);
}
END_TEST

START_TEST(test_conv_same_valid_explicit) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 224, 224, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  /* SAME, stride 2, 7x7 on 224: out 112, pad_total (111*2 + 7 - 224) = 5 -> 2 top, 3 bottom. */
  cnnb_tensor a = cnnb_conv2d(g, "a", x,
                              CNNB_CONV2D(.filters = 64, .kernel_h = 7, .kernel_w = 7,
                                          .stride_h = 2, .stride_w = 2));
  ck_assert_shape(g, a, 2, 64, 112, 112);
  ck_assert_pads(g, a, 2, 3, 2, 3);
  ck_assert_int_eq(cnnb_graph_node(g, a)->attr.window.stride_h, 2);
  ck_assert_int_eq(cnnb_graph_node(g, a)->attr.window.dilation_w, 1);
  ck_assert_int_eq(cnnb_graph_node(g, a)->attr.window.groups, 1);
  ck_assert_int_eq(cnnb_graph_node(g, a)->attr.window.filters, 64);
  /* SAME stride 1 3x3: same size, 1 / 1. */
  cnnb_tensor b = cnnb_conv2d(g, "b", a,
                              CNNB_CONV2D(.filters = 32, .kernel_h = 3, .kernel_w = 3,
                                          .padding = CNNB_PAD_SAME));
  ck_assert_shape(g, b, 2, 32, 112, 112);
  ck_assert_pads(g, b, 1, 1, 1, 1);
  /* SAME where the stride covers the kernel: 1x1 stride 2 on 112 -> 56, no padding. */
  cnnb_tensor c = cnnb_conv2d(g, "c", b,
                              CNNB_CONV2D(.filters = 8, .kernel_h = 1, .kernel_w = 1, .stride_h = 2,
                                          .stride_w = 2));
  ck_assert_shape(g, c, 2, 8, 56, 56);
  ck_assert_pads(g, c, 0, 0, 0, 0);
  /* VALID 11x11 stride 4 on 227 -> 55 (AlexNet). */
  cnnb_graph *g2 = cnnb_graph_create(1, 3, 227, 227, 10);
  cnnb_tensor d = cnnb_conv2d(g2, "d", 0,
                              CNNB_CONV2D(.filters = 64, .kernel_h = 11, .kernel_w = 11,
                                          .stride_h = 4, .stride_w = 4, .padding = CNNB_PAD_VALID));
  ck_assert_shape(g2, d, 1, 64, 55, 55);
  ck_assert_pads(g2, d, 0, 0, 0, 0);
  /* VALID, non-square, floor: (20 - 3) / 2 + 1 = 9 and (9 - 5) / 1 + 1 = 5. */
  cnnb_graph *g3 = cnnb_graph_create(1, 4, 20, 9, 10);
  cnnb_tensor e = cnnb_conv2d(g3, "e", 0,
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 5, .stride_h = 2,
                                          .padding = CNNB_PAD_VALID));
  ck_assert_shape(g3, e, 1, 4, 9, 5);
  /* EXPLICIT: (20 + 1 + 2 - 3) / 1 + 1 = 21, (9 + 0 + 4 - 5) / 3 + 1 = 3. */
  cnnb_tensor f = cnnb_conv2d(g3, "f", 0,
                              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 5, .stride_w = 3,
                                          .padding = CNNB_PAD_EXPLICIT, .pad_top = 1,
                                          .pad_bottom = 2, .pad_right = 4));
  ck_assert_shape(g3, f, 1, 4, 21, 3);
  ck_assert_pads(g3, f, 1, 2, 0, 4);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_status(g2), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_status(g3), CNNB_OK);
  cnnb_graph_destroy(g);
  cnnb_graph_destroy(g2);
  cnnb_graph_destroy(g3);
}
END_TEST

START_TEST(test_conv_dilation_groups) {
  cnnb_graph *g = cnnb_graph_create(1, 16, 32, 32, 10);
  /* Dilation 2, 3x3 -> effective 5x5. VALID: 32 - 5 + 1 = 28. SAME: 32, pads 2 / 2. */
  cnnb_tensor a = cnnb_conv2d(g, "a", 0,
                              CNNB_CONV2D(.filters = 16, .kernel_h = 3, .kernel_w = 3,
                                          .dilation_h = 2, .dilation_w = 2,
                                          .padding = CNNB_PAD_VALID));
  ck_assert_shape(g, a, 1, 16, 28, 28);
  cnnb_tensor b = cnnb_conv2d(g, "b", 0,
                              CNNB_CONV2D(.filters = 16, .kernel_h = 3, .kernel_w = 3,
                                          .dilation_h = 2, .dilation_w = 2));
  ck_assert_shape(g, b, 1, 16, 32, 32);
  ck_assert_pads(g, b, 2, 2, 2, 2);
  ck_assert_int_eq(cnnb_graph_node(g, b)->attr.window.dilation_h, 2);
  /* Groups 4: kernel [32, 16/4, 3, 3]. Depthwise: groups = C = filters -> [16, 1, 3, 3]. */
  cnnb_tensor c =
      cnnb_conv2d(g, "c", 0, CNNB_CONV2D(.filters = 32, .kernel_h = 3, .kernel_w = 3, .groups = 4));
  ck_assert_shape(g, c, 1, 32, 32, 32);
  const cnnb_param *k = cnnb_graph_param(g, cnnb_graph_node(g, c)->params[0]);
  ck_assert_int_eq(k->ndims, 4);
  ck_assert_int_eq(k->dims[0], 32);
  ck_assert_int_eq(k->dims[1], 4);
  ck_assert_int_eq(k->count, 32 * 4 * 9);
  cnnb_tensor d = cnnb_conv2d(g, "d", 0,
                              CNNB_CONV2D(.filters = 16, .kernel_h = 3, .kernel_w = 3,
                                          .groups = 16));
  ck_assert_int_eq(cnnb_graph_param(g, cnnb_graph_node(g, d)->params[0])->count, 16 * 9);
  ck_assert_int_eq(cnnb_graph_node(g, d)->attr.window.groups, 16);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_pool_shapes) {
  cnnb_graph *g = cnnb_graph_create(4, 64, 112, 112, 10);
  /* Defaults: stride = kernel, VALID. 3x3 on 112 -> 37. */
  cnnb_tensor a = cnnb_max_pool(g, "a", 0, CNNB_POOL(.kernel_h = 3, .kernel_w = 3));
  ck_assert_shape(g, a, 4, 64, 37, 37);
  ck_assert_int_eq(cnnb_graph_node(g, a)->attr.window.stride_h, 3);
  ck_assert_pads(g, a, 0, 0, 0, 0);
  /* ResNet: 3x3 / 2 SAME on 112 -> 56, pad_total (55*2 + 3 - 112) = 1 -> 0 / 1. */
  cnnb_tensor b = cnnb_max_pool(g, "b", 0,
                                CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2,
                                          .stride_w = 2, .padding = CNNB_PAD_SAME));
  ck_assert_shape(g, b, 4, 64, 56, 56);
  ck_assert_pads(g, b, 0, 1, 0, 1);
  /* AlexNet: 3x3 / 2 VALID on 55 -> 27. */
  cnnb_graph *g2 = cnnb_graph_create(1, 64, 55, 55, 10);
  cnnb_tensor c = cnnb_avg_pool(g2, "c", 0,
                                CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2,
                                          .stride_w = 2));
  ck_assert_shape(g2, c, 1, 64, 27, 27);
  ck_assert_int_eq(cnnb_graph_node(g2, c)->op, CNNB_OP_AVG_POOL);
  /* EXPLICIT 1 all round, 3x3 / 1 -> 55. */
  cnnb_tensor d = cnnb_avg_pool(g2, "d", 0,
                                CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 1,
                                          .stride_w = 1, .padding = CNNB_PAD_EXPLICIT, .pad_top = 1,
                                          .pad_bottom = 1, .pad_left = 1, .pad_right = 1));
  ck_assert_shape(g2, d, 1, 64, 55, 55);
  cnnb_tensor e = cnnb_global_avg_pool(g2, "e", d);
  ck_assert_shape(g2, e, 1, 64, 1, 1);
  ck_assert_int_eq(cnnb_graph_node(g2, e)->attr.window.kernel_h, 55);
  /* ceil_mode (torch's): 3x3 / 2 on 14 x 55 -> ceil(11 / 2) + 1 = 7 rows (the last window
   * hangs one row past: pad_bottom 1), 55 columns fit exactly -> 27, as rounded down. */
  cnnb_graph *g3 = cnnb_graph_create(1, 8, 14, 55, 10);
  cnnb_tensor f = cnnb_max_pool(g3, "f", 0,
                                CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .stride_h = 2,
                                          .stride_w = 2, .ceil_mode = 1));
  ck_assert_shape(g3, f, 1, 8, 7, 27);
  ck_assert_pads(g3, f, 0, 1, 0, 0);
  ck_assert_int_eq(cnnb_graph_status(g3), CNNB_OK);
  cnnb_max_pool(g3, "same", 0,
                CNNB_POOL(.kernel_h = 3, .kernel_w = 3, .padding = CNNB_PAD_SAME, .ceil_mode = 1));
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g3), "ceil_mode with SAME padding"));
  cnnb_graph_destroy(g3);
  /* A window that would start in the bottom padding is not kept: 2x2 / 2 with 1 pad all
   * round on 5 -> ceil(5 / 2) + 1 = 4 would start at row 6, past 5 + 1: 3, pads as given. */
  cnnb_graph *g4 = cnnb_graph_create(1, 8, 5, 5, 10);
  cnnb_tensor h = cnnb_avg_pool(g4, "h", 0,
                                CNNB_POOL(.kernel_h = 2, .kernel_w = 2,
                                          .padding = CNNB_PAD_EXPLICIT, .pad_top = 1,
                                          .pad_bottom = 1, .pad_left = 1, .pad_right = 1,
                                          .ceil_mode = 1));
  ck_assert_shape(g4, h, 1, 8, 3, 3);
  ck_assert_pads(g4, h, 1, 1, 1, 1);
  ck_assert_int_eq(cnnb_graph_status(g4), CNNB_OK);
  cnnb_graph_destroy(g4);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_status(g2), CNNB_OK);
  cnnb_graph_destroy(g);
  cnnb_graph_destroy(g2);
}
END_TEST

/* The ops of ABI 1.14 with two inputs or params: shapes, params as torchvision has them,
 * no weight decay on the norm's, and each refusal naming what is wrong. */
START_TEST(test_modern_ops) {
  cnnb_graph *g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_tensor gate = cnnb_global_avg_pool(g, "pool", 0);
  cnnb_tensor m = cnnb_multiply(g, "se", 0, gate);
  ck_assert_shape(g, m, 2, 8, 6, 6);
  ck_assert_int_eq(cnnb_graph_node(g, m)->num_params, 0);
  ck_assert_shape(g, cnnb_multiply(g, "square", m, m), 2, 8, 6, 6);
  cnnb_tensor ln = cnnb_layer_norm(g, "ln", m, 1e-6f);
  ck_assert_shape(g, ln, 2, 8, 6, 6);
  const cnnb_node *lnn = cnnb_graph_node(g, ln);
  ck_assert_int_eq(lnn->num_params, 2);
  ck_assert_float_eq(lnn->attr.layer_norm.epsilon, 1e-6f);
  const cnnb_param *gamma = cnnb_graph_param(g, lnn->params[0]);
  ck_assert_str_eq(gamma->name, "ln/gamma");
  ck_assert_int_eq(gamma->count, 8);
  ck_assert_uint_eq(gamma->flags & CNNB_PARAM_NO_DECAY, CNNB_PARAM_NO_DECAY);
  ck_assert_float_eq(gamma->init.a, 1.0f);
  ck_assert_str_eq(cnnb_graph_param(g, lnn->params[1])->name, "ln/beta");
  cnnb_tensor sc = cnnb_channel_scale(g, "ls", ln, 1e-6f);
  ck_assert_shape(g, sc, 2, 8, 6, 6);
  const cnnb_param *scale = cnnb_graph_param(g, cnnb_graph_node(g, sc)->params[0]);
  ck_assert_str_eq(scale->name, "ls/scale");
  ck_assert_int_eq(scale->ndims, 3); /* torchvision's [C, 1, 1] */
  ck_assert_int_eq(scale->dims[0], 8);
  ck_assert_int_eq(scale->dims[1], 1);
  ck_assert_int_eq(scale->flags & CNNB_PARAM_NO_DECAY, 0);
  ck_assert_int_eq(scale->init.kind, CNNB_INIT_CONSTANT);
  ck_assert_float_eq(scale->init.a, 1e-6f);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_tensor half = cnnb_conv2d(g, "half", 0,
                                 CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_multiply(g, "bad", 0, cnnb_global_avg_pool(g, "p", half));
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "multiply 'bad'"));
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "[2, 4, 1, 1]"));
  cnnb_graph_destroy(g);
  /* ConvNeXt's pointwise nn.Linear: a 1x1 conv whose kernel is [O, I]. */
  g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_tensor pw = cnnb_conv2d(g, "pw", 0,
                               CNNB_CONV2D(.filters = 32, .kernel_h = 1, .kernel_w = 1,
                                           .use_bias = 1, .linear_kernel = 1));
  ck_assert_shape(g, pw, 2, 32, 6, 6);
  const cnnb_param *kernel = cnnb_graph_param(g, cnnb_graph_node(g, pw)->params[0]);
  ck_assert_int_eq(kernel->ndims, 2);
  ck_assert_int_eq(kernel->dims[0], 32);
  ck_assert_int_eq(kernel->dims[1], 8);
  ck_assert_int_eq(kernel->count, 32 * 8);
  cnnb_conv2d(g, "not_1x1", pw,
              CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3, .linear_kernel = 1));
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "linear_kernel needs a 1x1 kernel"));
  cnnb_graph_destroy(g);
  /* ShuffleNet's split and shuffle. */
  g = cnnb_graph_create(2, 8, 6, 6, 10);
  ck_assert_shape(g, cnnb_slice_channels(g, "half", 0, 4, 4), 2, 4, 6, 6);
  ck_assert_shape(g, cnnb_channel_shuffle(g, "shuffle", 0, 4), 2, 8, 6, 6);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_slice_channels(g, "past_end", 0, 5, 4);
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "channels [5, 9) (begin 5, count 4)"));
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_channel_shuffle(g, "odd", 0, 3);
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "groups 3 must be >= 1 and divide"));
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_layer_norm(g, "zero_eps", 0, 0.0f);
  ck_assert_ptr_nonnull(strstr(cnnb_graph_error(g), "epsilon 0 must be > 0"));
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_other_shapes) {
  cnnb_graph *g = cnnb_graph_create(2, 8, 6, 6, 10);
  cnnb_tensor bn = cnnb_batch_norm(g, "bn", 0, NULL);
  ck_assert_shape(g, bn, 2, 8, 6, 6);
  cnnb_tensor r = cnnb_relu(g, "r", bn);
  ck_assert_shape(g, r, 2, 8, 6, 6);
  cnnb_tensor l = cnnb_lrn(g, "l", r,
                           CNNB_LRN(.depth_radius = 4, .bias = 1, .alpha = 0.001f / 9,
                                    .beta = 0.75f));
  ck_assert_shape(g, l, 2, 8, 6, 6);
  ck_assert_int_eq(cnnb_graph_node(g, l)->attr.lrn.depth_radius, 4);
  cnnb_tensor c = cnnb_concat(g, "cat", 3, (cnnb_tensor[]){0, r, l});
  ck_assert_shape(g, c, 2, 24, 6, 6);
  ck_assert_int_eq(cnnb_graph_node(g, c)->num_inputs, 3);
  ck_assert_int_eq(cnnb_graph_node(g, c)->inputs[1], r);
  cnnb_tensor rs = cnnb_reshape(g, "rs", c, 6, 12, 12);
  ck_assert_shape(g, rs, 2, 6, 12, 12);
  cnnb_tensor f = cnnb_flatten(g, NULL, rs);
  ck_assert_shape(g, f, 2, 864, 1, 1);
  ck_assert_int_eq(cnnb_graph_node(g, f)->op, CNNB_OP_RESHAPE);
  ck_assert_str_eq(cnnb_graph_node(g, f)->name, "flatten");
  /* Dense accepts an unflattened input: K = 24 * 6 * 6. */
  cnnb_tensor dn = cnnb_dense(g, "fc", c, CNNB_DENSE(.units = 100, .use_bias = 1));
  ck_assert_shape(g, dn, 2, 100, 1, 1);
  const cnnb_param *w = cnnb_graph_param(g, cnnb_graph_node(g, dn)->params[0]);
  ck_assert_int_eq(w->dims[0], 100);
  ck_assert_int_eq(w->dims[1], 864);
  cnnb_tensor dr = cnnb_dropout(g, "drop", dn, 0.5f);
  ck_assert_shape(g, dr, 2, 100, 1, 1);
  ck_assert_float_eq(cnnb_graph_node(g, dr)->attr.dropout.keep_prob, 0.5f);
  cnnb_tensor s = cnnb_add(g, "sum", dr, dn);
  ck_assert_shape(g, s, 2, 100, 1, 1);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_graph_destroy(g);
}
END_TEST

/* relu6 (ABI 1.1): its own op and name, the input's shape, the builder's usual checks. */
START_TEST(test_relu6) {
  cnnb_graph *g = cnnb_graph_create(2, 8, 6, 5, 10);
  cnnb_tensor c = cnnb_conv2d(g, NULL, 0,
                              CNNB_CONV2D(.filters = 12, .kernel_h = 3, .kernel_w = 3,
                                          .stride_h = 2, .stride_w = 2));
  cnnb_tensor r = cnnb_relu6(g, NULL, c);
  ck_assert_int_ge(r, 0);
  ck_assert_shape(g, r, 2, 12, 3, 3);
  const cnnb_node *n = cnnb_graph_node(g, r);
  ck_assert_uint_eq(n->op, CNNB_OP_RELU6);
  ck_assert_uint_eq(CNNB_OP_RELU6, 16); /* ABI: the value never changes */
  ck_assert_str_eq(n->name, "relu6");
  ck_assert_int_eq(n->num_inputs, 1);
  ck_assert_int_eq(n->inputs[0], c);
  ck_assert_int_eq(n->num_params, 0);
  ck_assert_int_eq(n->fused_relu, 0);
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_RELU6), "relu6");
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_RELU), "relu");
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_COUNT_), "unknown");
  /* Automatic names count per kind: relu6 does not share relu's counter. */
  cnnb_tensor a = cnnb_relu(g, NULL, r);
  cnnb_tensor b = cnnb_relu6(g, NULL, a);
  ck_assert_str_eq(cnnb_graph_node(g, a)->name, "relu");
  ck_assert_str_eq(cnnb_graph_node(g, b)->name, "relu6_1");
  cnnb_tensor named = cnnb_relu6(g, "block/act", b);
  ck_assert_str_eq(cnnb_graph_node(g, named)->name, "block/act");
  ck_assert_shape(g, named, 2, 12, 3, 3);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  /* A consumer list: the relu6 reads c once. */
  int32_t count = 0;
  const int32_t *readers = cnnb_graph_consumers(g, c, &count);
  ck_assert_int_eq(count, 1);
  ck_assert_int_eq(readers[0], r);
  ck_assert_int_eq(cnnb_relu6(g, "bad", 42), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "relu6 'bad': input 0 is tensor 42, which does not exist");
  cnnb_graph_destroy(g);
}
END_TEST

/* pad_spatial (CNNB_ABI_MINOR_PAD_SPATIAL): rows and columns added or cut on each side,
 * its amounts kept in attr.pad_spatial, no parameters, 0 FLOPs; an output without a row or
 * a column is refused, naming the pads and the input. */
START_TEST(test_pad_spatial) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 9, 7, 10);
  cnnb_tensor c = cnnb_conv2d(g, NULL, 0, CNNB_CONV2D(.filters = 5, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor p = cnnb_pad_spatial(g, NULL, c, -1, 1, -1, 1); /* NASNet's one-pixel shift */
  ck_assert_int_ge(p, 0);
  ck_assert_shape(g, p, 2, 5, 9, 7);
  const cnnb_node *n = cnnb_graph_node(g, p);
  ck_assert_uint_eq(n->op, CNNB_OP_PAD_SPATIAL);
  ck_assert_uint_eq(CNNB_OP_PAD_SPATIAL, 18); /* ABI: the value never changes */
  ck_assert_str_eq(n->name, "pad_spatial");
  ck_assert_int_eq(n->inputs[0], c);
  ck_assert_int_eq(n->attr.pad_spatial.top, -1);
  ck_assert_int_eq(n->attr.pad_spatial.bottom, 1);
  ck_assert_int_eq(n->attr.pad_spatial.left, -1);
  ck_assert_int_eq(n->attr.pad_spatial.right, 1);
  ck_assert_int_eq(n->num_params, 0);
  ck_assert_int_eq(n->num_stats, 0);
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_PAD_SPATIAL), "pad_spatial");
  const cnnb_op_row *row = cnnb_op_row_of(CNNB_OP_PAD_SPATIAL);
  ck_assert_ptr_nonnull(row);
  ck_assert_uint_eq(row->since_minor, CNNB_ABI_MINOR_PAD_SPATIAL);
  int64_t flops = -1, matmul = -1;
  cnnb_op_flops(cnnb_graph_node(g, n->inputs[0])->shape, n, &flops, &matmul);
  ck_assert_int_eq(flops, 0);
  ck_assert_int_eq(matmul, 0);
  cnnb_tensor grown = cnnb_pad_spatial(g, "grown", p, 2, 0, 0, 3);
  cnnb_tensor cut = cnnb_pad_spatial(g, "cut", grown, -10, 0, -9, -0);
  ck_assert_shape(g, grown, 2, 5, 11, 10);
  ck_assert_shape(g, cut, 2, 5, 1, 1);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(2, 3, 4, 4, 10);
  ck_assert_int_eq(cnnb_pad_spatial(g, "gone", 0, -2, -2, 0, 0), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(g, "pad_spatial 'gone': pads -2, -2, 0, 0 (top, bottom, left, right) take "
                         "[2, 3, 4, 4] to 0 x 4 pixels");
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(2, 3, 4, 4, 10);
  ck_assert_int_eq(cnnb_pad_spatial(g, "huge", 0, 0, 0, INT32_MAX, 1), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "to 4 x 2147483652 pixels");
  cnnb_graph_destroy(g);
}
END_TEST

/* pad_channels (ABI 1.2): zeros before and after along C, its pads kept in attr.pad, no
 * parameters; negative pads and a channel count past int32 are refused by name. */
START_TEST(test_pad_channels) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 9, 7, 10);
  cnnb_tensor c = cnnb_conv2d(g, NULL, 0,
                              CNNB_CONV2D(.filters = 5, .kernel_h = 3, .kernel_w = 3, .stride_h = 2,
                                          .stride_w = 2));
  cnnb_tensor p = cnnb_pad_channels(g, NULL, c, 3, 4);
  ck_assert_int_ge(p, 0);
  ck_assert_shape(g, p, 2, 12, 5, 4);
  const cnnb_node *n = cnnb_graph_node(g, p);
  ck_assert_uint_eq(n->op, CNNB_OP_PAD_CHANNELS);
  ck_assert_uint_eq(CNNB_OP_PAD_CHANNELS, 17); /* ABI: the value never changes */
  ck_assert_str_eq(n->name, "pad_channels");
  ck_assert_int_eq(n->num_inputs, 1);
  ck_assert_int_eq(n->inputs[0], c);
  ck_assert_int_eq(n->attr.pad.before, 3);
  ck_assert_int_eq(n->attr.pad.after, 4);
  ck_assert_int_eq(n->num_params, 0);
  ck_assert_int_eq(n->num_stats, 0);
  ck_assert_int_eq(n->fused_relu, 0);
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_PAD_CHANNELS), "pad_channels");
  ck_assert_str_eq(cnnb_op_name(CNNB_OP_COUNT_), "unknown");
  /* Zero on one side, or on both (a copy), is allowed; automatic names count per kind. */
  cnnb_tensor a = cnnb_pad_channels(g, NULL, p, 0, 4);
  cnnb_tensor b = cnnb_pad_channels(g, "block/shortcut", a, 0, 0);
  ck_assert_shape(g, a, 2, 16, 5, 4);
  ck_assert_shape(g, b, 2, 16, 5, 4);
  ck_assert_str_eq(cnnb_graph_node(g, a)->name, "pad_channels_1");
  ck_assert_str_eq(cnnb_graph_node(g, b)->name, "block/shortcut");
  /* The residual sum it exists for: a conv of the padded depth adds to it. */
  cnnb_tensor r = cnnb_conv2d(g, NULL, c, CNNB_CONV2D(.filters = 12, .kernel_h = 3, .kernel_w = 3));
  ck_assert_int_ge(cnnb_add(g, NULL, p, r), 0);
  ck_assert_int_eq(cnnb_graph_trainable_count(g), 3 * 5 * 9 + 5 * 12 * 9);
  /* Each param starts on a 256-byte boundary (CNNB_PARAM_ALIGN): 135 elements, a gap to
   * 192, then 540. */
  for (int32_t i = 0; i < cnnb_graph_num_params(g); i++)
    ck_assert_int_eq(cnnb_graph_param(g, i)->offset % CNNB_PARAM_ALIGN, 0);
  ck_assert_int_eq(cnnb_graph_param_arena_count(g), 192 + 5 * 12 * 9);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_int_eq(cnnb_pad_channels(g, "bad", 42, 1, 1), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "pad_channels 'bad': input 0 is tensor 42, which does not exist");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(2, 3, 4, 4, 10);
  ck_assert_int_eq(cnnb_pad_channels(g, "neg", 0, 2, -1), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(g, "pad_channels 'neg': pads 2, -1 (before, after) must be >= 0; "
                         "input is [2, 3, 4, 4]");
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(2, 3, 4, 4, 10);
  ck_assert_int_eq(cnnb_pad_channels(g, "neg", 0, -8, 8), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "pads -8, 8 (before, after) must be >= 0");
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(2, 3, 4, 4, 10);
  ck_assert_int_eq(cnnb_pad_channels(g, "huge", 0, INT32_MAX - 2, 1), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "pad_channels 'huge': 2147483649 channels after padding [2, 3, 4, 4]");
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_error_filter_larger) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 3, 3, 10);
  cnnb_tensor t = cnnb_conv2d(g, "conv1", 0,
                              CNNB_CONV2D(.filters = 8, .kernel_h = 7, .kernel_w = 7,
                                          .padding = CNNB_PAD_VALID));
  ck_assert_int_eq(t, CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(
      g, "conv2d 'conv1': filter 7x7 (dilated 7x7) larger than padded input 3x3 (padding VALID)");
  ck_assert_error_has(g, "[1, 3, 3, 3]");
  ck_assert_int_eq(cnnb_graph_num_nodes(g), 1);
  cnnb_graph_destroy(g);

  /* Dilation counts, EXPLICIT pads count, pools say "window". */
  g = cnnb_graph_create(1, 3, 5, 5, 10);
  cnnb_conv2d(g, "d", 0,
              CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3, .dilation_h = 3,
                          .dilation_w = 3, .padding = CNNB_PAD_EXPLICIT, .pad_top = 1));
  ck_assert_error_has(g, "conv2d 'd': filter 3x3 (dilated 7x7) larger than padded input 6x5 "
                         "(padding EXPLICIT 1,0,0,0)");
  cnnb_graph_destroy(g);
  g = cnnb_graph_create(1, 3, 2, 2, 10);
  cnnb_max_pool(g, "p", 0, CNNB_POOL(.kernel_h = 3, .kernel_w = 3));
  ck_assert_error_has(
      g, "max_pool 'p': window 3x3 (dilated 3x3) larger than padded input 2x2 (padding VALID)");
  cnnb_graph_destroy(g);
  /* SAME never fails for size. */
  g = cnnb_graph_create(1, 3, 3, 3, 10);
  ck_assert_int_ne(cnnb_conv2d(g, "s", 0, CNNB_CONV2D(.filters = 8, .kernel_h = 7, .kernel_w = 7)),
                   CNNB_NO_TENSOR);
  ck_assert_shape(g, 1, 1, 8, 3, 3);
  ck_assert_pads(g, 1, 3, 3, 3, 3);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_error_messages) {
  cnnb_graph *g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_tensor a = cnnb_conv2d(g, "a", 0, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor b = cnnb_conv2d(g, "b", 0,
                              CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1, .stride_h = 2,
                                          .stride_w = 2));
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_int_eq(cnnb_concat(g, "cat", 2, (cnnb_tensor[]){a, b}), CNNB_NO_TENSOR);
  ck_assert_error_has(g,
                      "concat 'cat': input 1 'b' is [1, 4, 4, 4] but input 0 'a' is [1, 4, 8, 8]");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  a = cnnb_conv2d(g, "a", 0, CNNB_CONV2D(.filters = 4, .kernel_h = 1, .kernel_w = 1));
  ck_assert_int_eq(cnnb_add(g, "sum", a, 0), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "add 'sum': 'a' is [1, 4, 8, 8] but 'input' is [1, 6, 8, 8]");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_conv2d(g, "grp", 0, CNNB_CONV2D(.filters = 8, .kernel_h = 3, .kernel_w = 3, .groups = 4));
  ck_assert_error_has(g, "conv2d 'grp': groups 4 must divide both input channels 6 and filters 8");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_reshape(g, "rs", 0, 5, 5, 5);
  ck_assert_error_has(g, "reshape 'rs': input [1, 6, 8, 8] has 384 elements per image");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_conv2d(g, "nof", 0, CNNB_CONV2D(.kernel_h = 3, .kernel_w = 3));
  ck_assert_error_has(g, "conv2d 'nof': filters 0 must be >= 1");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_dropout(g, "dr", 0, 0.0f);
  ck_assert_error_has(g, "dropout 'dr': keep_prob 0 must be in (0, 1]");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_relu(g, "r", 42);
  ck_assert_error_has(g, "relu 'r': input 0 is tensor 42, which does not exist");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_relu(g, "r", CNNB_NO_TENSOR); /* NO_TENSOR with no earlier error is itself an error */
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  ck_assert_error_has(g, "relu 'r': input 0 is CNNB_NO_TENSOR");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 6, 8, 8, 10);
  cnnb_max_pool(g, "p", 0, CNNB_POOL(.kernel_h = 2, .kernel_w = 2, .padding = 9));
  ck_assert_error_has(g, "max_pool 'p': unknown padding 9");
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_sticky_error) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 3, 3, 10);
  cnnb_tensor t = cnnb_conv2d(g, "conv1", 0,
                              CNNB_CONV2D(.filters = 8, .kernel_h = 7, .kernel_w = 7,
                                          .padding = CNNB_PAD_VALID));
  char first[1024];
  snprintf(first, sizeof first, "%s", cnnb_graph_error(g));
  /* Every later call is a no-op returning NO_TENSOR, and the first message stays. */
  t = cnnb_relu(g, "r", t);
  ck_assert_int_eq(t, CNNB_NO_TENSOR);
  t = cnnb_dense(g, "fc", t, CNNB_DENSE(.units = 10));
  ck_assert_int_eq(t, CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_relu(g, "valid_input", 0), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_dropout(g, "bad", 0, 7.0f), CNNB_NO_TENSOR);
  ck_assert_int_eq(cnnb_graph_set_logits(g, t), CNNB_EINVAL);
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_EINVAL);
  ck_assert_str_eq(cnnb_graph_error(g), first);
  ck_assert_int_eq(cnnb_graph_num_nodes(g), 1);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_EINVAL);
  /* cnnb_graph_fail also keeps the first. */
  cnnb_graph_fail(g, CNNB_EINTERNAL, "later");
  ck_assert_str_eq(cnnb_graph_error(g), first);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_params) {
  cnnb_graph *g = cnnb_graph_create(2, 3, 8, 8, 5);
  cnnb_graph_push_scope(g, "net");
  cnnb_tensor c1 = cnnb_conv2d(g, "conv1", 0,
                               CNNB_CONV2D(.filters = 4, .kernel_h = 3, .kernel_w = 3,
                                           .use_bias = 1, .bias_init = 0.1f));
  cnnb_tensor bn = cnnb_batch_norm(g, "bn1", c1, CNNB_BATCH_NORM(.scale = 1));
  cnnb_tensor bn2 = cnnb_batch_norm(g, "bn2", bn, NULL);
  cnnb_tensor fc = cnnb_dense(g, "fc", bn2, CNNB_DENSE(.units = 5, .use_bias = 1));
  cnnb_graph_pop_scope(g);
  ck_assert_int_eq(cnnb_graph_set_logits(g, fc), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);

  /* Trainable: kernel 4*3*3*3 = 108 @0, bias 4 @128, gamma 4 @192, beta 4 @256,
   * bn2 beta 4 @320, fc kernel 5*256 = 1280 @384, fc bias 5 @1664 -> 1409 parameters
   * in an arena of 1669 (each starts on a multiple of CNNB_PARAM_ALIGN = 64).
   * Stats: bn1 mean @0, var @64, bn2 mean @128, var @192 -> 16 in 196. */
  static const struct {
    const char *name;
    int64_t count, offset;
    int32_t is_stat;
  } want[] = {
      {"net/conv1/kernel", 108, 0, 0},
      {"net/conv1/bias", 4, 128, 0},
      {"net/bn1/gamma", 4, 192, 0},
      {"net/bn1/beta", 4, 256, 0},
      {"net/bn1/moving_mean", 4, 0, 1},
      {"net/bn1/moving_variance", 4, 64, 1},
      {"net/bn2/beta", 4, 320, 0},
      {"net/bn2/moving_mean", 4, 128, 1},
      {"net/bn2/moving_variance", 4, 192, 1},
      {"net/fc/kernel", 1280, 384, 0},
      {"net/fc/bias", 5, 1664, 0},
  };
  ck_assert_int_eq(cnnb_graph_num_params(g), (int)(sizeof want / sizeof want[0]));
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const cnnb_param *p = cnnb_graph_param(g, (int32_t)i);
    ck_assert_str_eq(p->name, want[i].name);
    ck_assert_int_eq(p->count, want[i].count);
    ck_assert_int_eq(p->offset, want[i].offset);
    ck_assert_int_eq(p->is_stat, want[i].is_stat);
    ck_assert_uint_eq(p->struct_size, sizeof(cnnb_param));
    ck_assert_int_eq(cnnb_graph_find_param(g, want[i].name), (int)i);
  }
  ck_assert_int_eq(cnnb_graph_trainable_count(g), 1409);
  ck_assert_int_eq(cnnb_graph_param_arena_count(g), 1669);
  ck_assert_int_eq(cnnb_graph_stat_arena_count(g), 196);

  /* Owning nodes, index slots, flags, default inits. */
  const cnnb_node *n = cnnb_graph_node(g, c1);
  ck_assert_int_eq(n->num_params, 2);
  ck_assert_int_eq(n->params[0], 0);
  ck_assert_int_eq(n->params[1], 1);
  ck_assert_int_eq(n->num_stats, 0);
  ck_assert_int_eq(cnnb_graph_param(g, 0)->node, c1);
  ck_assert_int_eq(cnnb_graph_param(g, 0)->init.kind, CNNB_INIT_VARIANCE_SCALING);
  ck_assert_int_eq(cnnb_graph_param(g, 0)->flags & CNNB_PARAM_NO_DECAY, 0);
  ck_assert_int_eq(cnnb_graph_param(g, 1)->init.kind, CNNB_INIT_CONSTANT);
  ck_assert_float_eq(cnnb_graph_param(g, 1)->init.a, 0.1f);
  n = cnnb_graph_node(g, bn);
  ck_assert_int_eq(n->num_params, 2);
  ck_assert_int_eq(n->num_stats, 2);
  ck_assert_int_eq(n->stats[0], 4);
  ck_assert_int_eq(n->stats[1], 5);
  ck_assert_int_eq(n->attr.batch_norm.scale, 1);
  ck_assert_float_eq(n->attr.batch_norm.epsilon, 0.001f);
  ck_assert_float_eq(n->attr.batch_norm.decay, 0.999f);
  for (int32_t i = 2; i <= 8; i++)
    ck_assert_uint_eq(cnnb_graph_param(g, i)->flags & CNNB_PARAM_NO_DECAY, CNNB_PARAM_NO_DECAY);
  ck_assert_int_eq(cnnb_graph_param(g, 2)->init.kind, CNNB_INIT_CONSTANT); /* gamma ones */
  ck_assert_float_eq(cnnb_graph_param(g, 2)->init.a, 1.0f);
  ck_assert_int_eq(cnnb_graph_param(g, 3)->init.kind, CNNB_INIT_ZEROS);    /* beta */
  ck_assert_int_eq(cnnb_graph_param(g, 4)->init.kind, CNNB_INIT_ZEROS);    /* moving mean */
  ck_assert_int_eq(cnnb_graph_param(g, 5)->init.kind, CNNB_INIT_CONSTANT); /* moving variance */
  ck_assert_float_eq(cnnb_graph_param(g, 5)->init.a, 1.0f);
  n = cnnb_graph_node(g, bn2);
  ck_assert_int_eq(n->num_params, 1); /* offset only */
  ck_assert_int_eq(n->attr.batch_norm.scale, 0);
  const cnnb_param *w = cnnb_graph_param(g, 9);
  ck_assert_int_eq(w->init.kind, CNNB_INIT_TRUNCATED_NORMAL);
  ck_assert_float_eq_tol(w->init.a, sqrtf(1.0f / 256.0f), 1e-7f);
  ck_assert_int_eq(w->ndims, 2);

  /* An explicit init is kept. */
  cnnb_graph *g2 = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_tensor c = cnnb_conv2d(g2, NULL, 0,
                              CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1,
                                          .kernel_init = {CNNB_INIT_TRUNCATED_NORMAL, 0.05f}));
  ck_assert_int_eq(cnnb_graph_param(g2, cnnb_graph_node(g2, c)->params[0])->init.kind,
                   CNNB_INIT_TRUNCATED_NORMAL);
  ck_assert_float_eq(cnnb_graph_param(g2, 0)->init.a, 0.05f);
  ck_assert_int_eq(cnnb_graph_node(g2, c)->num_params, 1); /* no bias by default */
  cnnb_graph_destroy(g2);
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_names_and_scopes) {
  cnnb_graph *g = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_tensor a = cnnb_conv2d(g, NULL, 0, CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor b = cnnb_conv2d(g, NULL, a, CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor r = cnnb_relu(g, NULL, b);
  ck_assert_str_eq(cnnb_graph_node(g, a)->name, "conv2d");
  ck_assert_str_eq(cnnb_graph_node(g, b)->name, "conv2d_1");
  ck_assert_str_eq(cnnb_graph_node(g, r)->name, "relu");
  cnnb_graph_push_scope(g, "block1");
  cnnb_graph_push_scope(g, "unit2");
  cnnb_tensor c = cnnb_conv2d(g, "conv1", r,
                              CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor d = cnnb_conv2d(g, NULL, c, CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  cnnb_graph_pop_scope(g);
  cnnb_tensor e = cnnb_relu(g, "out", d);
  cnnb_graph_pop_scope(g);
  cnnb_tensor f = cnnb_conv2d(g, NULL, e, CNNB_CONV2D(.filters = 2, .kernel_h = 1, .kernel_w = 1));
  ck_assert_str_eq(cnnb_graph_node(g, c)->name, "block1/unit2/conv1");
  ck_assert_str_eq(cnnb_graph_node(g, d)->name, "block1/unit2/conv2d");
  ck_assert_str_eq(cnnb_graph_node(g, e)->name, "block1/out");
  ck_assert_str_eq(cnnb_graph_node(g, f)->name, "conv2d_2");
  ck_assert_str_eq(cnnb_graph_param(g, cnnb_graph_node(g, c)->params[0])->name,
                   "block1/unit2/conv1/kernel");
  ck_assert_int_eq(cnnb_graph_find_node(g, "block1/out"), e);
  ck_assert_int_eq(cnnb_graph_find_node(g, "nope"), -1);
  /* A user name that an automatic one already took is a duplicate; the automatic names
   * step around user names. */
  cnnb_relu(g, "relu_1", f);
  cnnb_tensor h = cnnb_relu(g, NULL, f);
  ck_assert_str_eq(cnnb_graph_node(g, h)->name, "relu_2");
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ck_assert_int_eq(cnnb_relu(g, "conv2d_1", f), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "relu 'conv2d_1': name already used by node 2 (conv2d)");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_graph_push_scope(g, "s");
  cnnb_relu(g, "x", 0);
  cnnb_graph_pop_scope(g);
  cnnb_graph_push_scope(g, "s");
  cnnb_relu(g, "x", 0);
  ck_assert_error_has(g, "relu 's/x': name already used");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(1, 3, 8, 8, 5);
  cnnb_graph_pop_scope(g);
  ck_assert_error_has(g, "pop_scope without a matching push_scope");
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_logits_loss_consumers) {
  cnnb_graph *g = cnnb_graph_create(4, 3, 8, 8, 10);
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_EINVAL);
  ck_assert_error_has(g, "no logits");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(4, 3, 8, 8, 10);
  cnnb_tensor a = cnnb_relu(g, "a", 0);
  cnnb_tensor s = cnnb_add(g, "s", a, a);
  cnnb_tensor fc7 = cnnb_dense(g, "fc7", s, CNNB_DENSE(.units = 7));
  ck_assert_int_eq(cnnb_graph_set_logits(g, fc7), CNNB_EINVAL);
  ck_assert_error_has(g, "set_logits: dense 'fc7' is [4, 7, 1, 1], logits must be [4, 10, 1, 1]");
  cnnb_graph_destroy(g);

  g = cnnb_graph_create(4, 3, 8, 8, 10);
  a = cnnb_relu(g, "a", 0);
  s = cnnb_add(g, "s", a, a);
  cnnb_tensor fc = cnnb_dense(g, "fc", s, CNNB_DENSE(.units = 10));
  cnnb_tensor b = cnnb_relu(g, "b", a);
  ck_assert_int_eq(cnnb_graph_set_logits(g, fc), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_logits(g), fc);
  cnnb_graph_push_scope(g, "left_open");
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  cnnb_tensor labels = cnnb_graph_labels(g), loss = cnnb_graph_loss(g);
  ck_assert_int_eq(labels, 5);
  ck_assert_int_eq(loss, 6);
  ck_assert_int_eq(cnnb_graph_node(g, labels)->op, CNNB_OP_LABELS);
  ck_assert_str_eq(cnnb_graph_node(g, labels)->name, "labels");
  ck_assert_shape(g, labels, 4, 1, 1, 1);
  const cnnb_node *ln = cnnb_graph_node(g, loss);
  ck_assert_int_eq(ln->op, CNNB_OP_SOFTMAX_XENT);
  ck_assert_str_eq(ln->name, "loss");
  ck_assert_shape(g, loss, 1, 1, 1, 1);
  ck_assert_int_eq(ln->num_inputs, 2);
  ck_assert_int_eq(ln->inputs[0], fc);
  ck_assert_int_eq(ln->inputs[1], labels);
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_EINVAL); /* twice */
  cnnb_graph_destroy(g);

  /* Consumers, in node order, with repeats; topological order is index order. */
  g = cnnb_graph_create(4, 3, 8, 8, 10);
  a = cnnb_relu(g, "a", 0);
  s = cnnb_add(g, "s", a, a);
  fc = cnnb_dense(g, "fc", s, CNNB_DENSE(.units = 10));
  b = cnnb_relu(g, "b", a);
  cnnb_graph_set_logits(g, fc);
  cnnb_graph_add_loss(g);
  int32_t count = -1;
  const int32_t *cons = cnnb_graph_consumers(g, a, &count);
  ck_assert_int_eq(count, 3);
  ck_assert_int_eq(cons[0], s);
  ck_assert_int_eq(cons[1], s);
  ck_assert_int_eq(cons[2], b);
  cons = cnnb_graph_consumers(g, fc, &count);
  ck_assert_int_eq(count, 1);
  ck_assert_int_eq(cons[0], cnnb_graph_loss(g));
  cons = cnnb_graph_consumers(g, cnnb_graph_labels(g), &count);
  ck_assert_int_eq(count, 1);
  ck_assert_ptr_null(cnnb_graph_consumers(g, b, &count));
  ck_assert_int_eq(count, 0);
  ck_assert_ptr_null(cnnb_graph_consumers(g, 99, &count));
  for (int32_t i = 0; i < cnnb_graph_num_nodes(g); i++) {
    const cnnb_node *n = cnnb_graph_node(g, i);
    for (int32_t j = 0; j < n->num_inputs; j++) ck_assert_int_lt(n->inputs[j], i);
  }
  /* No layer may read the loss or labels. */
  ck_assert_int_eq(cnnb_relu(g, "x", cnnb_graph_loss(g)), CNNB_NO_TENSOR);
  ck_assert_error_has(g, "which no layer may read");
  cnnb_graph_destroy(g);
}
END_TEST

START_TEST(test_desc_struct_size) {
  /* An older, shorter desc: fields past its struct_size read as zero (defaults). */
  cnnb_graph *g = cnnb_graph_create(1, 4, 9, 9, 10);
  cnnb_conv2d_desc d = {.struct_size = (uint32_t)offsetof(cnnb_conv2d_desc, stride_h),
                        .filters = 4,
                        .kernel_h = 3,
                        .kernel_w = 3,
                        .stride_h = 3,
                        .stride_w = 3,
                        .use_bias = 1};
  cnnb_tensor t = cnnb_conv2d(g, "old", 0, &d);
  ck_assert_shape(g, t, 1, 4, 9, 9); /* stride 1, SAME */
  ck_assert_int_eq(cnnb_graph_node(g, t)->num_params, 1);
  ck_assert_int_eq(cnnb_graph_node(g, t)->op, CNNB_OP_CONV2D);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  cnnb_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("graph");
  TCase *tc = tcase_create("builder");
  tcase_add_test(tc, test_create_input);
  tcase_add_test(tc, test_conv_same_valid_explicit);
  tcase_add_test(tc, test_conv_dilation_groups);
  tcase_add_test(tc, test_pool_shapes);
  tcase_add_test(tc, test_other_shapes);
  tcase_add_test(tc, test_relu6);
  tcase_add_test(tc, test_pad_channels);
  tcase_add_test(tc, test_pad_spatial);
  tcase_add_test(tc, test_error_filter_larger);
  tcase_add_test(tc, test_error_messages);
  tcase_add_test(tc, test_sticky_error);
  tcase_add_test(tc, test_modern_ops);
  tcase_add_test(tc, test_params);
  tcase_add_test(tc, test_names_and_scopes);
  tcase_add_test(tc, test_logits_loss_consumers);
  tcase_add_test(tc, test_desc_struct_size);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed != 0;
}

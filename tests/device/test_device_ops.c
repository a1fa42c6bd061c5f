/* test_device_ops.c — every graph op on the device under test (`test_device_ops NAME`,
 * device_harness.h) against the plain C reference in tests/support/ref_ops.c: forward,
 * backward-data and backward-weights, on seeded random shapes with odd sizes, strides,
 * explicit and SAME/VALID pads, dilation and groups; batch norm in training (running
 * statistics) and inference; dropout's statistics; the optimizer update against
 * cnnb_update_reference; the low precisions (bf16, fp16) the device accepts; refusals of
 * what no device can do. Tolerances are tests/support/tolerance.c's, per precision:
 * err = |device - reference| per element, allowed tol * (|reference| + max |reference|).
 * What only one device promises (its layouts, its messages) is in that device's own
 * test (plugins/devices/cpu/tests/test_cpu_plugin.c). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_run.h"
#include "graph/graph_internal.h"
#include "flags/flags.h"
#include "ref_ops.h"

/* fp32 tolerances, for the cases that run only in fp32. */
#define FP32_FORWARD (test_tolerance_of(CNNB_PRECISION_FP32)->forward)
#define FP32_BACKWARD (test_tolerance_of(CNNB_PRECISION_FP32)->backward)

/* ---- helpers ----------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((rng_next(s) >> 40) * (1.0 / 16777216.0));
}

static int rand_int(uint64_t *s, int lo, int hi) { /* inclusive */
  return lo + (int)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static float *rand_buf(uint64_t *s, int64_t n, float lo, float hi) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  ck_assert_ptr_nonnull(p);
  for (int64_t i = 0; i < n; i++) p[i] = uniform(s, lo, hi);
  return p;
}

static float *zeros(int64_t n) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  ck_assert_ptr_nonnull(p);
  return p;
}

/* Asserts every element within tol * (|want| + max|want|); names the worst one. */
static void expect_close(const char *what, const float *got, const float *want, int64_t n,
                         double tol) {
  double scale = 0.0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
  int64_t worst = -1;
  double worst_ratio = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - want[i]);
    double allowed = tol * (fabs(want[i]) + scale) + 1e-30;
    if (!(err <= allowed) && (worst < 0 || err / allowed > worst_ratio)) {
      worst = i;
      worst_ratio = err / allowed;
    }
  }
  ck_assert_msg(worst < 0,
                "%s: element %lld of %lld is %.8g, reference %.8g (scale %.3g, tol %.1g)", what,
                (long long)worst, (long long)n, worst >= 0 ? got[worst] : 0.0,
                worst >= 0 ? want[worst] : 0.0, scale, tol);
}

/* Nonzero: the caller returns. A precision the device refused when the suite started
 * skips the check (device_harness_main printed the refusal); any other failure fails
 * the test. */
static int open_device(device_harness *h, uint32_t precision, int training) {
  int rc = device_harness_open(h, precision, training, 1234);
  if (rc == DEVICE_HARNESS_REFUSED) {
    device_harness_close(h);
    return rc;
  }
  ck_assert_msg(rc == 0, "device '%s': %s", device_harness_name(), h->error);
  return rc;
}

static const test_tolerance *tol_of(uint32_t precision) {
  const test_tolerance *t = test_tolerance_of(precision);
  ck_assert_ptr_nonnull(t);
  return t;
}

static device_run *make_run(device_harness *h, cnnb_graph *g) {
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "graph: %s", cnnb_graph_error(g));
  device_run *r = device_run_create(h, g);
  ck_assert_msg(r != NULL, "run: %s", h->error);
  return r;
}

#define RUN_OK(h, call) ck_assert_msg((call) == 0, "%s", (h)->error)

static const float *param_of(const cnnb_graph *g, const float *arena, const cnnb_node *n, int k) {
  return arena + cnnb_graph_param(g, n->params[k])->offset;
}

/* One op on one device: uploads random params/stats and images, runs forward and a
 * backward seeded at `y` with random dy; returns host copies. */
typedef struct op_result {
  float *params, *stats, *images, *y, *dy, *dx, *dparams, *stats_after;
  int64_t param_count, stat_count, x_count, y_count;
} op_result;

static void op_result_free(op_result *o) {
  free(o->params);
  free(o->stats);
  free(o->images);
  free(o->y);
  free(o->dy);
  free(o->dx);
  free(o->dparams);
  free(o->stats_after);
}

/* 1: images are distinct within any small window and exact in bf16 and fp16 (multiples
 * of 1/32 up to 125/32), so a low-precision max pool has the same arg-max as the fp32
 * reference. */
static int exact_images;

/* Non-NULL: the images, as given (x_count values), instead of random ones. */
static const float *fixed_images;

/* 0: backward is told no image gradient is wanted (NULL input_grads), as the executor
 * does for a first layer; parameter gradients must not change. */
static int want_image_grads = 1;

static op_result run_op(device_harness *h, cnnb_graph *g, cnnb_tensor y, uint64_t *seed,
                        int backward) {
  op_result o = {0};
  device_run *r = make_run(h, g);
  device_run_want_image_grads(r, want_image_grads);
  cnnb_shape xs = cnnb_graph_node(g, 0)->shape, ys = cnnb_graph_node(g, y)->shape;
  o.param_count = cnnb_graph_param_arena_count(g);
  o.stat_count = cnnb_graph_stat_arena_count(g);
  o.x_count = cnnb_shape_count(xs);
  o.y_count = cnnb_shape_count(ys);
  o.params = rand_buf(seed, o.param_count, -0.5f, 0.5f);
  o.stats = rand_buf(seed, o.stat_count, 0.1f, 1.0f);
  o.images = rand_buf(seed, o.x_count, -1.0f, 1.0f);
  if (exact_images) {
    cnnb_shape s = xs;
    for (int64_t i = 0; i < o.x_count; i++) {
      int64_t hw = i % ((int64_t)s.h * s.w), nc = i / ((int64_t)s.h * s.w);
      o.images[i] = (float)((hw * 37 + nc * 11) % 251 - 125) / 32.0f;
    }
  }
  if (fixed_images) memcpy(o.images, fixed_images, (size_t)o.x_count * sizeof *o.images);
  o.y = zeros(o.y_count);
  RUN_OK(h, device_run_set_params(r, o.params, o.stats));
  RUN_OK(h, device_run_forward(r, o.images, NULL, 7));
  RUN_OK(h, device_run_activation(r, y, o.y));
  o.stats_after = zeros(o.stat_count);
  RUN_OK(h, device_run_get_params(r, NULL, o.stats_after));
  if (backward) {
    o.dy = rand_buf(seed, o.y_count, -1.0f, 1.0f);
    o.dx = zeros(o.x_count);
    o.dparams = zeros(o.param_count);
    RUN_OK(h, device_run_backward(r, y, o.dy, 1.0f, 7));
    if (want_image_grads) RUN_OK(h, device_run_gradient(r, 0, o.dx));
    RUN_OK(h, device_run_get_param_grads(r, o.dparams));
  }
  device_run_destroy(r);
  return o;
}

/* ---- conv2d -------------------------------------------------------------------------- */

typedef struct conv_case {
  int n, c, h, w, filters, kh, kw, sh, sw, dh, dw, groups, bias, relu;
  uint32_t padding;
  int pads[4];
} conv_case;

static void check_conv(const conv_case *cc, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(cc->n, cc->c, cc->h, cc->w, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor y = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = cc->filters, .kernel_h = cc->kh,
                                          .kernel_w = cc->kw, .stride_h = cc->sh,
                                          .stride_w = cc->sw, .padding = cc->padding,
                                          .pad_top = cc->pads[0], .pad_bottom = cc->pads[1],
                                          .pad_left = cc->pads[2], .pad_right = cc->pads[3],
                                          .dilation_h = cc->dh, .dilation_w = cc->dw,
                                          .groups = cc->groups, .use_bias = cc->bias));
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "graph: %s", cnnb_graph_error(g));
  if (cc->relu) ck_assert_int_eq(cnnb_graph_set_fused_relu(g, y, 1), CNNB_OK);
  op_result o = run_op(&h, g, y, &seed, 1);
  const cnnb_node *node = cnnb_graph_node(g, y);
  ref_window win = ref_window_of(node);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = node->shape;
  const float *w = param_of(g, o.params, node, 0);
  const float *b = cc->bias ? param_of(g, o.params, node, 1) : NULL;
  float *want = zeros(o.y_count), *dy = zeros(o.y_count), *dx = zeros(o.x_count);
  int64_t wcount = cnnb_graph_param(g, node->params[0])->count;
  float *dw = zeros(wcount), *db = zeros(ys.c);
  ref_conv2d_forward(o.images, xs, w, b, &win, want, ys);
  if (cc->relu) ref_relu_forward(want, o.y_count, want);
  char what[160];
  snprintf(what, sizeof what,
           "conv %dx%dx%dx%d f%d k%dx%d s%dx%d d%dx%d g%d pads %d,%d,%d,%d%s: forward", cc->n,
           cc->c, cc->h, cc->w, cc->filters, cc->kh, cc->kw, cc->sh, cc->sw, cc->dh, cc->dw,
           cc->groups, win.pt, win.pb, win.pl, win.pr, cc->relu ? " relu" : "");
  expect_close(what, o.y, want, o.y_count, tol->forward);
  if (cc->relu)
    ref_relu_backward(o.y, o.dy, o.y_count, dy); /* device's own output decides the mask */
  else memcpy(dy, o.dy, (size_t)o.y_count * sizeof *dy);
  ref_conv2d_backward_data(dy, ys, w, &win, dx, xs);
  ref_conv2d_backward_weights(o.images, xs, dy, ys, &win, dw, db);
  strcpy(strrchr(what, ':'), ": backward data");
  if (want_image_grads) expect_close(what, o.dx, dx, o.x_count, tol->backward);
  strcpy(strrchr(what, ':'), ": backward weights");
  expect_close(what, param_of(g, o.dparams, node, 0), dw, wcount, tol->backward);
  if (cc->bias) {
    strcpy(strrchr(what, ':'), ": backward bias");
    expect_close(what, param_of(g, o.dparams, node, 1), db, ys.c, tol->backward);
  }
  free(want);
  free(dy);
  free(dx);
  free(dw);
  free(db);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_conv_fixed_cases) {
  const conv_case cases[] = {
      /* n c  h  w  f  kh kw sh sw dh dw g bias relu padding pads */
      {2, 3, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 0, CNNB_PAD_SAME, {0}},
      {3, 4, 11, 10, 6, 3, 2, 2, 2, 1, 1, 1, 0, 0, CNNB_PAD_SAME, {0}},
      {1, 5, 8, 9, 7, 3, 3, 1, 2, 1, 1, 1, 1, 0, CNNB_PAD_VALID, {0}},
      {2, 6, 10, 10, 4, 3, 3, 1, 1, 2, 2, 1, 1, 0, CNNB_PAD_SAME, {0}}, /* dilation */
      {2, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 8, 1, 0, CNNB_PAD_SAME, {0}},   /* depthwise */
      {2, 6, 7, 9, 9, 3, 3, 2, 1, 1, 1, 3, 0, 0, CNNB_PAD_SAME, {0}},   /* groups */
      {2, 3, 12, 11, 16, 7, 7, 2, 2, 1, 1, 1, 0, 0, CNNB_PAD_EXPLICIT, {3, 2, 1, 3}},
      {2, 16, 6, 6, 32, 1, 1, 1, 1, 1, 1, 1, 1, 1, CNNB_PAD_SAME, {0}}, /* fused relu */
      {2, 32, 9, 9, 16, 3, 3, 2, 2, 1, 1, 1, 0, 1, CNNB_PAD_SAME, {0}},
      /* 1 input channel, LeNet's first layer on MNIST: on AVX2 the cpu device converts
       * the input and the gradient for backward weights (ops_conv.c) */
      {4, 1, 12, 12, 32, 5, 5, 1, 1, 1, 1, 1, 1, 0, CNNB_PAD_SAME, {0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_conv(&cases[i], CNNB_PRECISION_FP32, 100 + i);
}
END_TEST

START_TEST(test_conv_random_shapes) {
  uint64_t s = 42;
  for (int i = 0; i < 6; i++) {
    conv_case cc = {0};
    cc.n = rand_int(&s, 1, 3);
    cc.groups = rand_int(&s, 0, 2) == 0 ? rand_int(&s, 2, 3) : 1;
    cc.c = cc.groups * rand_int(&s, 1, 9);
    cc.filters = cc.groups * rand_int(&s, 1, 9);
    cc.kh = rand_int(&s, 1, 4);
    cc.kw = rand_int(&s, 1, 4);
    cc.sh = rand_int(&s, 1, 3);
    cc.sw = rand_int(&s, 1, 3);
    cc.dh = rand_int(&s, 1, 2);
    cc.dw = rand_int(&s, 1, 2);
    cc.h = rand_int(&s, (cc.kh - 1) * cc.dh + 1, 13);
    cc.w = rand_int(&s, (cc.kw - 1) * cc.dw + 1, 13);
    cc.bias = rand_int(&s, 0, 1);
    cc.relu = rand_int(&s, 0, 3) == 0;
    int p = rand_int(&s, 0, 2);
    cc.padding = p == 0 ? CNNB_PAD_SAME : p == 1 ? CNNB_PAD_VALID : CNNB_PAD_EXPLICIT;
    for (int k = 0; k < 4; k++) cc.pads[k] = rand_int(&s, 0, 2);
    check_conv(&cc, CNNB_PRECISION_FP32, 1000 + i);
  }
}
END_TEST

/* _i: which of device_harness_low_precisions. */
START_TEST(test_conv_low_precision) {
  const conv_case cases[] = {
      {2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1, 0, CNNB_PAD_SAME, {0}},
      {2, 3, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 0, 1, CNNB_PAD_SAME, {0}},
      {4, 1, 12, 12, 32, 5, 5, 1, 1, 1, 1, 1, 1, 0, CNNB_PAD_SAME, {0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_conv(&cases[i], device_harness_low_precisions[_i], 200 + i);
}
END_TEST

/* ---- dense, relu, reshape ----------------------------------------------------------- */

static void check_dense(int n, int c, int hh, int ww, int units, int bias, uint32_t precision,
                        uint64_t seed, int after_conv) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor x = cnnb_graph_input(g), in = x;
  if (after_conv) /* a 1x1 conv gives dense an input in the conv's layout (blocked on oneDNN) */
    in = cnnb_conv2d(g, "conv", x, CNNB_CONV2D(.filters = 16, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor y = cnnb_dense(g, "fc", in, CNNB_DENSE(.units = units, .use_bias = bias));
  op_result o = run_op(&h, g, y, &seed, 1);
  const cnnb_node *node = cnnb_graph_node(g, y);
  cnnb_shape is = cnnb_graph_node(g, in)->shape;
  int k = is.c * is.h * is.w;
  int64_t in_count = cnnb_shape_count(is);
  float *xin = o.images;
  float *conv_out = NULL;
  const cnnb_node *conv = after_conv ? cnnb_graph_node(g, in) : NULL;
  if (after_conv) {
    conv_out = zeros(in_count);
    ref_window win = ref_window_of(conv);
    ref_conv2d_forward(o.images, cnnb_graph_node(g, x)->shape, param_of(g, o.params, conv, 0), NULL,
                       &win, conv_out, is);
    xin = conv_out;
  }
  const float *w = param_of(g, o.params, node, 0),
              *b = bias ? param_of(g, o.params, node, 1) : NULL;
  float *want = zeros(o.y_count), *dx = zeros(in_count), *dw = zeros((int64_t)units * k),
        *db = zeros(units);
  ref_dense_forward(xin, n, k, w, b, units, want);
  expect_close("dense forward", o.y, want, o.y_count, tol->forward);
  ref_dense_backward_weights(xin, o.dy, n, k, units, dw, db);
  expect_close("dense backward weights", param_of(g, o.dparams, node, 0), dw, (int64_t)units * k,
               tol->backward);
  if (bias)
    expect_close("dense backward bias", param_of(g, o.dparams, node, 1), db, units, tol->backward);
  ref_dense_backward_data(o.dy, n, units, w, k, dx);
  if (!want_image_grads) {
    /* nothing to compare: backward-data was not asked for */
  } else if (!after_conv) {
    expect_close("dense backward data", o.dx, dx, o.x_count, tol->backward);
  } else {
    float *dimg = zeros(o.x_count);
    ref_window win = ref_window_of(conv);
    ref_conv2d_backward_data(dx, is, param_of(g, o.params, conv, 0), &win, dimg,
                             cnnb_graph_node(g, x)->shape);
    expect_close("dense after conv: backward data through the conv", o.dx, dimg, o.x_count,
                 tol->backward);
    free(dimg);
  }
  free(conv_out);
  free(want);
  free(dx);
  free(dw);
  free(db);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_dense) {
  check_dense(3, 5, 1, 1, 7, 1, CNNB_PRECISION_FP32, 1, 0);
  check_dense(1, 3, 5, 7, 11, 0, CNNB_PRECISION_FP32, 2, 0); /* flattened 4-D input */
  check_dense(4, 2, 3, 3, 13, 1, CNNB_PRECISION_FP32, 3, 1); /* input in a conv's layout */
  for (int p = 0; p < 2; p++)
    check_dense(5, 37, 1, 1, 9, 1, device_harness_low_precisions[p], 4, 0);
}
END_TEST

static void check_batch_norm(int n, int c, int hh, int ww, int scale, int relu, int training,
                             uint32_t precision, uint64_t seed);

/* The executor passes NULL for gradients nobody needs (a first layer's input): the
 * kernels must skip backward-data yet still produce the parameter gradients. */
START_TEST(test_no_input_gradient) {
  want_image_grads = 0;
  const conv_case cc = {2, 3, 9, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, CNNB_PAD_SAME, {0}};
  check_conv(&cc, CNNB_PRECISION_FP32, 300);
  check_batch_norm(3, 16, 5, 5, 1, 1, 1, CNNB_PRECISION_FP32, 301);
  check_dense(3, 5, 2, 2, 7, 1, CNNB_PRECISION_FP32, 302, 0);
  want_image_grads = 1;
}
END_TEST

START_TEST(test_relu_and_reshape) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  uint64_t seed = 9;
  cnnb_graph *g = cnnb_graph_create(2, 3, 5, 6, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = 20, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor r = cnnb_relu(g, "relu", c);
  cnnb_tensor f = cnnb_flatten(g, "flat", r);
  cnnb_tensor y = cnnb_reshape(g, "reshape", f, 10, 6, 10);
  op_result o = run_op(&h, g, y, &seed, 1);
  cnnb_shape cs = cnnb_graph_node(g, c)->shape;
  int64_t cn = cnnb_shape_count(cs);
  const cnnb_node *conv = cnnb_graph_node(g, c);
  ref_window win = ref_window_of(conv);
  float *conv_y = zeros(cn), *want = zeros(cn), *dr = zeros(cn), *dx = zeros(o.x_count);
  ref_conv2d_forward(o.images, cnnb_graph_node(g, x)->shape, param_of(g, o.params, conv, 0), NULL,
                     &win, conv_y, cs);
  ref_relu_forward(conv_y, cn, want);
  /* Reshape and flatten keep logical NCHW order: the bytes are relu's, in order. */
  expect_close("relu + flatten + reshape forward", o.y, want, cn, FP32_FORWARD);
  ref_relu_backward(want, o.dy, cn, dr);
  ref_conv2d_backward_data(dr, cs, param_of(g, o.params, conv, 0), &win, dx,
                           cnnb_graph_node(g, x)->shape);
  expect_close("reshape + flatten + relu backward", o.dx, dx, o.x_count, FP32_BACKWARD);
  free(conv_y);
  free(want);
  free(dr);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

/* ---- relu6 ---------------------------------------------------------------------------- */

/* Multiples of 1/4 in [-6, 18] (exact in bf16 and fp16): every residue of 37 i mod 97 appears once
 * in any 97 consecutive i, so the values cover < 0, (0, 6), > 6 and exactly 0 and 6. */
static float *relu6_images(int64_t n) {
  float *p = zeros(n);
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 37) % 97 - 24) / 4.0f;
  return p;
}

/* Counts of x < 0, x == 0, 0 < x < 6, x == 6, x > 6. */
static void relu6_regions(const float *x, int64_t n, int counts[5]) {
  memset(counts, 0, 5 * sizeof *counts);
  for (int64_t i = 0; i < n; i++)
    counts[x[i] < 0.0f ? 0 : x[i] == 0.0f ? 1 : x[i] < 6.0f ? 2 : x[i] == 6.0f ? 3 : 4]++;
}

/* relu6 on the images themselves (plain NCHW), forward and backward, training and
 * inference, fp32 and the low precisions; the gradient must be 0 at x == 0 and x == 6 (TF). */
static void check_relu6_on_images(uint32_t precision, int training, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 5, 4, 6, 10);
  cnnb_tensor y = cnnb_relu6(g, "relu6", cnnb_graph_input(g));
  float *images = relu6_images(2 * 5 * 4 * 6);
  int regions[5];
  relu6_regions(images, 2 * 5 * 4 * 6, regions);
  for (int k = 0; k < 5; k++) ck_assert_int_gt(regions[k], 0);
  fixed_images = images;
  op_result o = run_op(&h, g, y, &seed, training);
  fixed_images = NULL;
  float *want = zeros(o.y_count), *dx = zeros(o.x_count);
  ref_relu6_forward(images, o.x_count, want);
  char what[96];
  snprintf(what, sizeof what, "relu6 forward (%s, %s)", test_precision_name(precision),
           training ? "training" : "inference");
  /* Exact: a clamp of exactly representable values. */
  for (int64_t i = 0; i < o.y_count; i++)
    ck_assert_msg(o.y[i] == want[i], "%s: element %lld is %g for x = %g, want %g", what,
                  (long long)i, (double)o.y[i], (double)images[i], (double)want[i]);
  if (training) {
    ref_relu6_backward(images, o.dy, o.x_count, dx);
    snprintf(what, sizeof what, "relu6 backward (%s)", test_precision_name(precision));
    expect_close(what, o.dx, dx, o.x_count, tol->backward);
    /* The mask itself, independent of the tolerance: zero exactly where x is outside (0, 6). */
    for (int64_t i = 0; i < o.x_count; i++)
      if (!(images[i] > 0.0f && images[i] < 6.0f))
        ck_assert_msg(o.dx[i] == 0.0f, "relu6 backward: gradient %g at x = %g, want 0",
                      (double)o.dx[i], (double)images[i]);
      else
        ck_assert_msg(o.dx[i] != 0.0f || o.dy[i] == 0.0f,
                      "relu6 backward: gradient 0 at x = %g inside (0, 6)", (double)images[i]);
  }
  free(images);
  free(want);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

/* conv -> relu6: relu6 runs on the conv's layout (blocked on oneDNN); backward reaches the
 * conv's weights and the images through relu6's mask. */
static void check_relu6_after_conv(uint64_t seed) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  cnnb_graph *g = cnnb_graph_create(2, 3, 7, 5, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = 16, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = cnnb_relu6(g, "relu6", c);
  int64_t xn = 2 * 3 * 7 * 5;
  float *images = relu6_images(xn);
  for (int64_t i = 0; i < xn; i++) images[i] = (images[i] - 6.0f) * (2.0f / 3.0f); /* [-8, 8] */
  fixed_images = images;
  op_result o = run_op(&h, g, y, &seed, 1);
  fixed_images = NULL;
  const cnnb_node *conv = cnnb_graph_node(g, c);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, cs = conv->shape;
  ref_window win = ref_window_of(conv);
  const float *w = param_of(g, o.params, conv, 0);
  int64_t wn = cnnb_graph_param(g, conv->params[0])->count;
  float *conv_y = zeros(o.y_count), *want = zeros(o.y_count), *dc = zeros(o.y_count),
        *dx = zeros(o.x_count), *dw = zeros(wn);
  ref_conv2d_forward(images, xs, w, NULL, &win, conv_y, cs);
  int regions[5];
  relu6_regions(conv_y, o.y_count, regions);
  ck_assert_msg(regions[0] > 0 && regions[2] > 0 && regions[4] > 0,
                "conv output does not span < 0, (0, 6), > 6: %d %d %d", regions[0], regions[2],
                regions[4]);
  ref_relu6_forward(conv_y, o.y_count, want);
  expect_close("conv + relu6 forward", o.y, want, o.y_count, FP32_FORWARD);
  ref_relu6_backward(conv_y, o.dy, o.y_count, dc);
  ref_conv2d_backward_data(dc, cs, w, &win, dx, xs);
  expect_close("conv + relu6 backward data", o.dx, dx, o.x_count, FP32_BACKWARD);
  ref_conv2d_backward_weights(images, xs, dc, cs, &win, dw, NULL);
  expect_close("conv + relu6 backward weights", param_of(g, o.dparams, conv, 0), dw, wn,
               FP32_BACKWARD);
  free(images);
  free(conv_y);
  free(want);
  free(dc);
  free(dx);
  free(dw);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_relu6) {
  check_relu6_on_images(CNNB_PRECISION_FP32, 1, 40);
  check_relu6_on_images(CNNB_PRECISION_FP32, 0, 41);
  check_relu6_after_conv(42);
}
END_TEST

START_TEST(test_relu6_low_precision) {
  check_relu6_on_images(device_harness_low_precisions[_i], 1, 43);
}
END_TEST

/* ---- the activations of ABI 1.14 --------------------------------------------------------- */

typedef struct activation_case {
  uint32_t op;
  int32_t tanh; /* gelu's form */
  const char *name;
} activation_case;

static const activation_case activations[] = {{CNNB_OP_SIGMOID, 0, "sigmoid"},
                                              {CNNB_OP_SILU, 0, "silu"},
                                              {CNNB_OP_HARD_SIGMOID, 0, "hard_sigmoid"},
                                              {CNNB_OP_HARD_SWISH, 0, "hard_swish"},
                                              {CNNB_OP_GELU, 0, "gelu"},
                                              {CNNB_OP_GELU, 1, "gelu (tanh)"}};
enum { NUM_ACTIVATIONS = sizeof activations / sizeof activations[0] };

static cnnb_tensor add_activation(cnnb_graph *g, const activation_case *a, cnnb_tensor x) {
  switch (a->op) {
    case CNNB_OP_SIGMOID: return cnnb_sigmoid(g, "act", x);
    case CNNB_OP_SILU: return cnnb_silu(g, "act", x);
    case CNNB_OP_HARD_SIGMOID: return cnnb_hard_sigmoid(g, "act", x);
    case CNNB_OP_HARD_SWISH: return cnnb_hard_swish(g, "act", x);
    default: return cnnb_gelu(g, "act", x, a->tanh);
  }
}

/* Multiples of 1/8 in [-6, 6] plus 1/16 (exact in bf16 and fp16): both tails, the middle,
 * and never -3 or 3, where hard_sigmoid's and hard_swish's slopes jump. */
static float *activation_images(int64_t n) {
  float *p = zeros(n);
  for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 37) % 97 - 48) / 8.0f + 1.0f / 16.0f;
  return p;
}

/* Whether the device runs `op`; a device that does not says so, and the op's checks skip
 * on it (the graph would be refused naming the op, which unit_op_table checks). */
static bool device_runs(device_harness *h, const activation_case *a) {
  if (!h->dv->supports_op || h->dv->supports_op(h->dev, a->op)) return true;
  printf("%s does not run %s (supports_op): its checks are skipped\n", h->name, a->name);
  return false;
}

/* The activation on the images (plain NCHW) against the reference, forward and backward,
 * training and inference, at each precision. */
static void check_activation_on_images(const activation_case *a, uint32_t precision, int training,
                                       uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  if (!device_runs(&h, a)) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 5, 4, 6, 10);
  cnnb_tensor y = add_activation(g, a, cnnb_graph_input(g));
  int64_t n = 2 * 5 * 4 * 6;
  float *images = activation_images(n);
  fixed_images = images;
  op_result o = run_op(&h, g, y, &seed, training);
  fixed_images = NULL;
  float *want = zeros(n), *dx = zeros(n);
  ref_activation_forward(a->op, a->tanh, images, n, want);
  char what[96];
  snprintf(what, sizeof what, "%s forward (%s, %s)", a->name, test_precision_name(precision),
           training ? "training" : "inference");
  expect_close(what, o.y, want, n, tol->forward);
  if (training) {
    ref_activation_backward(a->op, a->tanh, images, o.dy, n, dx);
    snprintf(what, sizeof what, "%s backward (%s)", a->name, test_precision_name(precision));
    expect_close(what, o.dx, dx, n, tol->backward);
  }
  free(images);
  free(want);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

/* conv -> activation: it runs on the conv's layout (blocked on oneDNN, whose padding must
 * stay zero even where f(0) is not: hard_sigmoid(0) = 1/2); backward reaches the images. */
static void check_activation_after_conv(const activation_case *a, uint64_t seed) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  if (!device_runs(&h, a)) {
    device_harness_close(&h);
    return;
  }
  cnnb_graph *g = cnnb_graph_create(2, 3, 7, 5, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = 13, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = add_activation(g, a, c);
  int64_t xn = 2 * 3 * 7 * 5;
  float *images = activation_images(xn);
  fixed_images = images;
  op_result o = run_op(&h, g, y, &seed, 1);
  fixed_images = NULL;
  const cnnb_node *conv = cnnb_graph_node(g, c);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, cs = conv->shape;
  ref_window win = ref_window_of(conv);
  const float *w = param_of(g, o.params, conv, 0);
  float *conv_y = zeros(o.y_count), *want = zeros(o.y_count), *dc = zeros(o.y_count),
        *dx = zeros(o.x_count);
  ref_conv2d_forward(images, xs, w, NULL, &win, conv_y, cs);
  ref_activation_forward(a->op, a->tanh, conv_y, o.y_count, want);
  char what[96];
  snprintf(what, sizeof what, "conv + %s forward", a->name);
  expect_close(what, o.y, want, o.y_count, FP32_FORWARD);
  ref_activation_backward(a->op, a->tanh, conv_y, o.dy, o.y_count, dc);
  ref_conv2d_backward_data(dc, cs, w, &win, dx, xs);
  snprintf(what, sizeof what, "conv + %s backward data", a->name);
  expect_close(what, o.dx, dx, o.x_count, FP32_BACKWARD);
  free(images);
  free(conv_y);
  free(want);
  free(dc);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_activations) {
  const activation_case *a = &activations[_i];
  check_activation_on_images(a, CNNB_PRECISION_FP32, 1, 60 + (uint64_t)_i);
  check_activation_on_images(a, CNNB_PRECISION_FP32, 0, 70 + (uint64_t)_i);
  check_activation_after_conv(a, 80 + (uint64_t)_i);
  for (int p = 0; p < 2; p++)
    check_activation_on_images(a, device_harness_low_precisions[p], 1, 90 + (uint64_t)_i);
}
END_TEST

/* ---- multiply, layer norm, channel scale (ABI 1.14) ------------------------------------- */

/* What the ops below read: the images themselves, or a conv of them (its layout is a
 * blocked one on oneDNN), and the way back to the images for the gradient. */
typedef struct op_input {
  const cnnb_graph *g;
  const cnnb_node *conv; /* NULL: the images */
  ref_window win;
  cnnb_shape images, shape;
} op_input;

/* The input's values as the reference computes them (o's images and weights); caller frees. */
static float *op_input_values(op_input *in, const cnnb_graph *g, cnnb_tensor images, cnnb_tensor x,
                              const op_result *o) {
  in->g = g;
  in->conv = x != images ? cnnb_graph_node(g, x) : NULL;
  in->images = cnnb_graph_node(g, images)->shape;
  in->shape = cnnb_graph_node(g, x)->shape;
  const int64_t count = cnnb_shape_count(in->shape);
  float *v = zeros(count);
  if (in->conv) {
    in->win = ref_window_of(in->conv);
    ref_conv2d_forward(o->images, in->images, param_of(g, o->params, in->conv, 0), NULL, &in->win,
                       v, in->shape);
  } else {
    memcpy(v, o->images, (size_t)count * sizeof *v);
  }
  return v;
}

/* The gradient at the images from the gradient `dv` at the input; caller frees. */
static float *op_input_gradient(const op_input *in, const op_result *o, const float *dv) {
  float *dx = zeros(o->x_count);
  if (in->conv)
    ref_conv2d_backward_data(dv, in->shape, param_of(in->g, o->params, in->conv, 0), &in->win, dx,
                             in->images);
  else memcpy(dx, dv, (size_t)o->x_count * sizeof *dx);
  return dx;
}

static bool device_runs_op(device_harness *h, uint32_t op, const char *name) {
  activation_case a = {op, 0, name};
  return device_runs(h, &a);
}

/* y = multiply(x, gate). gate_kind 0: the squeeze-and-excitation shape, gate =
 * global_avg_pool(x) [N, C, 1, 1]; 1: multiply(x, x), one tensor as both inputs (its
 * gradient is 2 dy x); 2: as 0 after a conv (its blocked layout; the pooled gate's may
 * differ). x feeds both inputs, so dx sums both paths. */
static void check_multiply(int gate_kind, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  if (!device_runs_op(&h, CNNB_OP_MULTIPLY, "multiply")) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 5, 4, 6, 10);
  cnnb_tensor in = cnnb_graph_input(g), x = in;
  if (gate_kind == 2)
    x = cnnb_conv2d(g, "conv", in, CNNB_CONV2D(.filters = 13, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor gate = gate_kind == 1 ? x : cnnb_global_avg_pool(g, "pool", x);
  cnnb_tensor y = cnnb_multiply(g, "multiply", x, gate);
  op_result o = run_op(&h, g, y, &seed, 1);
  op_input input;
  float *xv = op_input_values(&input, g, in, x, &o);
  cnnb_shape s = input.shape, gs = cnnb_graph_node(g, gate)->shape;
  const int64_t count = cnnb_shape_count(s), hw = (int64_t)s.h * s.w;
  float *gv = zeros(cnnb_shape_count(gs)), *want = zeros(count);
  float *dxv = zeros(count), *dgate = zeros(cnnb_shape_count(gs));
  if (gate_kind == 1) memcpy(gv, xv, (size_t)count * sizeof *gv);
  else
    for (int64_t k = 0; k < (int64_t)s.n * s.c; k++) {
      double sum = 0.0;
      for (int64_t i = 0; i < hw; i++) sum += xv[k * hw + i];
      gv[k] = (float)(sum / hw);
    }
  ref_multiply_forward(xv, s, gv, gs, want);
  char what[96];
  snprintf(what, sizeof what, "multiply (gate %d, %s) forward", gate_kind,
           test_precision_name(precision));
  expect_close(what, o.y, want, count, tol->forward);
  ref_multiply_backward(xv, s, gv, gs, o.dy, dxv, dgate);
  for (int64_t i = 0; i < count; i++) /* the gate's own path back to x */
    dxv[i] += gate_kind == 1 ? dgate[i] : dgate[i / hw] / (float)hw;
  float *dx = op_input_gradient(&input, &o, dxv);
  snprintf(what, sizeof what, "multiply (gate %d, %s) backward", gate_kind,
           test_precision_name(precision));
  expect_close(what, o.dx, dx, o.x_count, tol->backward);
  free(xv);
  free(gv);
  free(want);
  free(dxv);
  free(dgate);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_multiply) {
  for (int kind = 0; kind < 3; kind++) check_multiply(kind, CNNB_PRECISION_FP32, 110 + kind);
  for (int p = 0; p < 2; p++) check_multiply(0, device_harness_low_precisions[p], 113 + p);
}
END_TEST

/* layer_norm on the images (plain NCHW) or after a conv (blocked): forward against the
 * reference in training and inference, and in training the gradients of x (through the
 * conv), of the scale and of the offset. */
static void check_layer_norm(int after_conv, int training, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  if (!device_runs_op(&h, CNNB_OP_LAYER_NORM, "layer_norm")) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  const float eps = 1e-5f;
  cnnb_graph *g = cnnb_graph_create(3, 7, 3, 5, 10);
  cnnb_tensor in = cnnb_graph_input(g), x = in;
  if (after_conv)
    x = cnnb_conv2d(g, "conv", in, CNNB_CONV2D(.filters = 19, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = cnnb_layer_norm(g, "norm", x, eps);
  op_result o = run_op(&h, g, y, &seed, training);
  const cnnb_node *node = cnnb_graph_node(g, y);
  op_input input;
  float *xv = op_input_values(&input, g, in, x, &o);
  cnnb_shape s = node->shape;
  const int64_t count = cnnb_shape_count(s), positions = (int64_t)s.n * s.h * s.w;
  float *want = zeros(count), *mean = zeros(positions), *var = zeros(positions);
  const float *scale = param_of(g, o.params, node, 0), *offset = param_of(g, o.params, node, 1);
  ref_layer_norm_forward(xv, s, scale, offset, eps, want, mean, var);
  char what[112];
  snprintf(what, sizeof what, "layer norm (%s, %s, %s) forward",
           after_conv ? "after a conv" : "images", test_precision_name(precision),
           training ? "training" : "inference");
  expect_close(what, o.y, want, count, tol->forward);
  if (training) {
    float *dxv = zeros(count), *dscale = zeros(s.c), *doffset = zeros(s.c);
    ref_layer_norm_backward(xv, s, scale, o.dy, mean, var, eps, dxv, dscale, doffset);
    float *dx = op_input_gradient(&input, &o, dxv);
    snprintf(what, sizeof what, "layer norm (%s, %s) backward data",
             after_conv ? "after a conv" : "images", test_precision_name(precision));
    expect_close(what, o.dx, dx, o.x_count, tol->backward);
    expect_close("layer norm scale gradient", param_of(g, o.dparams, node, 0), dscale, s.c,
                 tol->backward);
    expect_close("layer norm offset gradient", param_of(g, o.dparams, node, 1), doffset, s.c,
                 tol->backward);
    free(dxv);
    free(dx);
    free(dscale);
    free(doffset);
  }
  free(xv);
  free(want);
  free(mean);
  free(var);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_layer_norm) {
  check_layer_norm(0, 1, CNNB_PRECISION_FP32, 120);
  check_layer_norm(0, 0, CNNB_PRECISION_FP32, 121);
  check_layer_norm(1, 1, CNNB_PRECISION_FP32, 122);
  check_layer_norm(1, 0, CNNB_PRECISION_FP32, 123);
  for (int p = 0; p < 2; p++) check_layer_norm(0, 1, device_harness_low_precisions[p], 124 + p);
}
END_TEST

/* channel_scale on the images or after a conv: y = x * scale[c]; its gradients. */
static void check_channel_scale(int after_conv, int training, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  if (!device_runs_op(&h, CNNB_OP_CHANNEL_SCALE, "channel_scale")) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 6, 5, 3, 10);
  cnnb_tensor in = cnnb_graph_input(g), x = in;
  if (after_conv)
    x = cnnb_conv2d(g, "conv", in, CNNB_CONV2D(.filters = 17, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = cnnb_channel_scale(g, "layer_scale", x, 1e-6f);
  op_result o = run_op(&h, g, y, &seed, training);
  const cnnb_node *node = cnnb_graph_node(g, y);
  op_input input;
  float *xv = op_input_values(&input, g, in, x, &o);
  cnnb_shape s = node->shape;
  const int64_t count = cnnb_shape_count(s);
  float *want = zeros(count);
  const float *scale = param_of(g, o.params, node, 0);
  ref_channel_scale_forward(xv, s, scale, want);
  char what[112];
  snprintf(what, sizeof what, "channel scale (%s, %s, %s) forward",
           after_conv ? "after a conv" : "images", test_precision_name(precision),
           training ? "training" : "inference");
  expect_close(what, o.y, want, count, tol->forward);
  if (training) {
    float *dxv = zeros(count), *dscale = zeros(s.c);
    ref_channel_scale_backward(xv, s, scale, o.dy, dxv, dscale);
    float *dx = op_input_gradient(&input, &o, dxv);
    snprintf(what, sizeof what, "channel scale (%s, %s) backward data",
             after_conv ? "after a conv" : "images", test_precision_name(precision));
    expect_close(what, o.dx, dx, o.x_count, tol->backward);
    expect_close("channel scale gradient", param_of(g, o.dparams, node, 0), dscale, s.c,
                 tol->backward);
    free(dxv);
    free(dx);
    free(dscale);
  }
  free(xv);
  free(want);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_channel_scale) {
  check_channel_scale(0, 1, CNNB_PRECISION_FP32, 130);
  check_channel_scale(0, 0, CNNB_PRECISION_FP32, 131);
  check_channel_scale(1, 1, CNNB_PRECISION_FP32, 132);
  for (int p = 0; p < 2; p++) check_channel_scale(0, 1, device_harness_low_precisions[p], 133 + p);
}
END_TEST

/* ---- slice_channels, channel_shuffle (ABI 1.14) ------------------------------------------ */

/* op CNNB_OP_SLICE_CHANNELS (a = begin, b = count) or CNNB_OP_CHANNEL_SHUFFLE (a = groups),
 * on the images or after a conv of `filters` (blocked layouts: a slice that starts or ends
 * inside a channel block); forward and the gradient back to the images. */
static void check_channel_op(uint32_t op, int a, int b, int filters, uint32_t precision,
                             uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const char *name = op == CNNB_OP_SLICE_CHANNELS ? "slice_channels" : "channel_shuffle";
  if (!device_runs_op(&h, op, name)) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 12, 3, 5, 10);
  cnnb_tensor in = cnnb_graph_input(g), x = in;
  if (filters)
    x = cnnb_conv2d(g, "conv", in, CNNB_CONV2D(.filters = filters, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = op == CNNB_OP_SLICE_CHANNELS ? cnnb_slice_channels(g, "op", x, a, b)
                                               : cnnb_channel_shuffle(g, "op", x, a);
  op_result o = run_op(&h, g, y, &seed, 1);
  op_input input;
  float *xv = op_input_values(&input, g, in, x, &o);
  cnnb_shape s = input.shape;
  float *want = zeros(o.y_count), *dxv = zeros(cnnb_shape_count(s));
  if (op == CNNB_OP_SLICE_CHANNELS) {
    ref_slice_channels_forward(xv, s, a, b, want);
    ref_slice_channels_backward(o.dy, s, a, b, dxv);
  } else {
    ref_channel_shuffle_forward(xv, s, a, want);
    ref_channel_shuffle_backward(o.dy, s, a, dxv);
  }
  char what[112];
  snprintf(what, sizeof what, "%s (%d, %d) of %d channels%s (%s) forward", name, a, b, s.c,
           input.conv ? " after a conv" : "", test_precision_name(precision));
  expect_close(what, o.y, want, o.y_count, tol->forward);
  float *dx = op_input_gradient(&input, &o, dxv);
  snprintf(what, sizeof what, "%s (%d, %d) of %d channels%s (%s) backward", name, a, b, s.c,
           input.conv ? " after a conv" : "", test_precision_name(precision));
  expect_close(what, o.dx, dx, o.x_count, tol->backward);
  free(xv);
  free(want);
  free(dxv);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_slice_channels) {
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 0, 6, 0, CNNB_PRECISION_FP32, 140); /* chunk(2) */
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 6, 6, 0, CNNB_PRECISION_FP32, 141);
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 3, 7, 0, CNNB_PRECISION_FP32, 142);
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 16, 16, 32, CNNB_PRECISION_FP32, 143);
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 5, 13, 24, CNNB_PRECISION_FP32, 144);
  check_channel_op(CNNB_OP_SLICE_CHANNELS, 0, 24, 24, CNNB_PRECISION_FP32, 145); /* all */
  for (int p = 0; p < 2; p++)
    check_channel_op(CNNB_OP_SLICE_CHANNELS, 5, 13, 24, device_harness_low_precisions[p], 146 + p);
}
END_TEST

START_TEST(test_channel_shuffle) {
  check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 2, 0, 0, CNNB_PRECISION_FP32, 150);
  check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 3, 0, 0, CNNB_PRECISION_FP32, 151);
  check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 1, 0, 0, CNNB_PRECISION_FP32, 152); /* identity */
  check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 2, 0, 32, CNNB_PRECISION_FP32, 153);
  check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 4, 0, 24, CNNB_PRECISION_FP32, 154);
  for (int p = 0; p < 2; p++)
    check_channel_op(CNNB_OP_CHANNEL_SHUFFLE, 2, 0, 24, device_harness_low_precisions[p], 155 + p);
}
END_TEST

/* ---- pad_channels ---------------------------------------------------------------------- */

/* Asserts the padded channels of y (shape ys) are exactly zero: zeros are written, not
 * computed, in any precision and layout. */
static void expect_zero_pads(const char *what, const float *y, cnnb_shape ys, int before,
                             int after) {
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++) {
      if (c >= before && c < ys.c - after) continue;
      for (int64_t k = 0; k < (int64_t)ys.h * ys.w; k++) {
        float v = y[(((int64_t)n * ys.c + c) * ys.h * ys.w) + k];
        ck_assert_msg(v == 0.0f, "%s: padded channel %d of image %d holds %g", what, c, n,
                      (double)v);
      }
    }
}

/* pad_channels on the images themselves (plain NCHW): forward is a copy plus zeros, so
 * fp32 is exact; backward is dy's middle channels. */
static void check_pad_on_images(int n, int c, int hh, int ww, int before, int after,
                                uint32_t precision, int training, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor y = cnnb_pad_channels(g, "pad", x, before, after);
  op_result o = run_op(&h, g, y, &seed, training);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = cnnb_graph_node(g, y)->shape;
  ck_assert_int_eq(ys.c, before + c + after);
  float *want = zeros(o.y_count), *dx = zeros(o.x_count);
  ref_pad_channels_forward(o.images, xs, before, after, want);
  char what[128];
  snprintf(what, sizeof what, "pad_channels %dx%dx%dx%d by %d, %d (%s, %s): forward", n, c, hh, ww,
           before, after, test_precision_name(precision), training ? "training" : "inference");
  expect_close(what, o.y, want, o.y_count, precision == CNNB_PRECISION_FP32 ? 0.0 : tol->forward);
  expect_zero_pads(what, o.y, ys, before, after);
  if (training) {
    ref_pad_channels_backward(o.dy, xs, before, after, dx);
    strcpy(strrchr(what, ':'), ": backward");
    expect_close(what, o.dx, dx, o.x_count, precision == CNNB_PRECISION_FP32 ? 0.0 : tol->backward);
  }
  free(want);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

/* conv -> pad_channels, optionally added to a conv of the padded width as the CIFAR ResNet
 * shortcut is: forward, the input gradient through both paths and the padded conv's
 * weight gradient. The widths and pads sit around 8- and 16-channel blocks, where
 * devices with blocked layouts (oneDNN's nChw16c / nChw8c) have their edge cases: a pad
 * that cuts a block (16 padded by 8) and one that is aligned. */
static void check_pad_after_conv(int filters, int before, int after, int with_add,
                                 uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 3, 7, 5, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = filters, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor p = cnnb_pad_channels(g, "pad", c, before, after);
  int width = before + filters + after;
  cnnb_tensor side = CNNB_NO_TENSOR, y = p;
  if (with_add) {
    side = cnnb_conv2d(g, "side", x, CNNB_CONV2D(.filters = width, .kernel_h = 1, .kernel_w = 1));
    y = cnnb_add(g, "add", p, side);
  }
  op_result o = run_op(&h, g, y, &seed, 1);
  const cnnb_node *cn = cnnb_graph_node(g, c);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, cs = cn->shape, ys = cnnb_graph_node(g, y)->shape;
  ref_window win = ref_window_of(cn);
  const float *w = param_of(g, o.params, cn, 0);
  int64_t wn = cnnb_graph_param(g, cn->params[0])->count, cc = cnnb_shape_count(cs);
  float *conv_y = zeros(cc), *want = zeros(o.y_count), *side_y = zeros(o.y_count), *dc = zeros(cc),
        *dx = zeros(o.x_count), *part = zeros(o.x_count), *dw = zeros(wn);
  ref_conv2d_forward(o.images, xs, w, NULL, &win, conv_y, cs);
  ref_pad_channels_forward(conv_y, cs, before, after, want);
  const cnnb_node *sn = with_add ? cnnb_graph_node(g, side) : NULL;
  ref_window swin = with_add ? ref_window_of(sn) : win;
  if (with_add) {
    ref_conv2d_forward(o.images, xs, param_of(g, o.params, sn, 0), NULL, &swin, side_y, ys);
    ref_add_forward(want, side_y, o.y_count, want);
  }
  char what[128];
  snprintf(what, sizeof what, "conv %d -> pad_channels %d, %d%s (%s): forward", filters, before,
           after, with_add ? " + add" : "", test_precision_name(precision));
  expect_close(what, o.y, want, o.y_count, tol->forward);
  if (!with_add) expect_zero_pads(what, o.y, ys, before, after);
  ref_pad_channels_backward(o.dy, cs, before, after, dc);
  ref_conv2d_backward_data(dc, cs, w, &win, dx, xs);
  if (with_add) {
    ref_conv2d_backward_data(o.dy, ys, param_of(g, o.params, sn, 0), &swin, part, xs);
    for (int64_t k = 0; k < o.x_count; k++) dx[k] += part[k];
  }
  strcpy(strrchr(what, ':'), ": backward data");
  expect_close(what, o.dx, dx, o.x_count, tol->backward);
  ref_conv2d_backward_weights(o.images, xs, dc, cs, &win, dw, NULL);
  strcpy(strrchr(what, ':'), ": backward weights");
  expect_close(what, param_of(g, o.dparams, cn, 0), dw, wn, tol->backward);
  free(conv_y);
  free(want);
  free(side_y);
  free(dc);
  free(dx);
  free(part);
  free(dw);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

/* Widths and pads around 8- and 16-channel blocks: the ResNet cases (16 by 8, 8: cut
 * inside a block; 32 by 16, 16: aligned), one side only, none, odd. test_cpu_plugin.c
 * checks the cpu device's layouts for the same cases. */
static const int pad_conv_cases[][3] = {
    /* filters, before, after */
    {16, 8, 8}, {32, 16, 16}, {16, 0, 16}, {16, 5, 0}, {5, 3, 4}, {7, 0, 0}, {8, 4, 12},
};

START_TEST(test_pad_channels) {
  uint64_t s = 140;
  for (int i = 0; i < 6; i++) {
    int n = rand_int(&s, 1, 3), c = rand_int(&s, 1, 9), hh = rand_int(&s, 1, 7),
        ww = rand_int(&s, 1, 7), before = rand_int(&s, 0, 9), after = rand_int(&s, 0, 9);
    if (i == 0) before = 0; /* one side only, each way */
    if (i == 1) after = 0;
    check_pad_on_images(n, c, hh, ww, before, after, CNNB_PRECISION_FP32, 1, 150 + (uint64_t)i);
    check_pad_on_images(n, c, hh, ww, before, after, CNNB_PRECISION_FP32, 0, 160 + (uint64_t)i);
  }
  check_pad_on_images(2, 3, 4, 5, 0, 0, CNNB_PRECISION_FP32, 1, 170); /* a copy */
  for (size_t i = 0; i < sizeof pad_conv_cases / sizeof *pad_conv_cases; i++)
    for (int with_add = 0; with_add < 2; with_add++)
      check_pad_after_conv(pad_conv_cases[i][0], pad_conv_cases[i][1], pad_conv_cases[i][2],
                           with_add, CNNB_PRECISION_FP32, 180 + 2 * i + (uint64_t)with_add);
}
END_TEST

START_TEST(test_pad_channels_low_precision) {
  const uint32_t precision = device_harness_low_precisions[_i];
  uint64_t s = 190;
  for (int i = 0; i < 3; i++) {
    int n = rand_int(&s, 1, 3), c = rand_int(&s, 1, 9), hh = rand_int(&s, 1, 7),
        ww = rand_int(&s, 1, 7), before = rand_int(&s, 0, 9), after = rand_int(&s, 0, 9);
    check_pad_on_images(n, c, hh, ww, before, after, precision, 1, 200 + (uint64_t)i);
  }
  check_pad_after_conv(16, 8, 8, 1, precision, 210);
  check_pad_after_conv(32, 16, 16, 0, precision, 211);
  check_pad_after_conv(5, 3, 4, 1, precision, 212);
}
END_TEST

/* ---- pad_spatial --------------------------------------------------------------------- */

/* pad_spatial came after the cuda device: a device that says it does not run it (its
 * supports_op; the host then refuses graphs that use it, naming the op) skips these
 * checks, saying so. Nonzero: skip. */
static int pad_spatial_unsupported(device_harness *h) {
  if (!h->dv->supports_op || h->dv->supports_op(h->dev, CNNB_OP_PAD_SPATIAL)) return 0;
  printf("%s does not run pad_spatial (supports_op): its checks skipped\n", h->name);
  return 1;
}

/* pad_spatial on the images (plain NCHW): a copy plus zeros, exact in fp32; backward is
 * the part of dy over x. Pads in [-3, 3]: padding, cutting, and both on one axis. */
static void check_pad_spatial_on_images(int n, int c, int hh, int ww, int top, int bottom, int left,
                                        int right, uint32_t precision, int training,
                                        uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  if (pad_spatial_unsupported(&h)) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor y = cnnb_pad_spatial(g, "shift", x, top, bottom, left, right);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  op_result o = run_op(&h, g, y, &seed, training);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = cnnb_graph_node(g, y)->shape;
  ck_assert_int_eq(ys.h, top + hh + bottom);
  ck_assert_int_eq(ys.w, left + ww + right);
  float *want = zeros(o.y_count), *dx = zeros(o.x_count);
  ref_pad_spatial_forward(o.images, xs, top, bottom, left, right, want);
  char what[160];
  snprintf(what, sizeof what, "pad_spatial %dx%dx%dx%d by %d, %d, %d, %d (%s, %s): forward", n, c,
           hh, ww, top, bottom, left, right, test_precision_name(precision),
           training ? "training" : "inference");
  expect_close(what, o.y, want, o.y_count, precision == CNNB_PRECISION_FP32 ? 0.0 : tol->forward);
  for (int64_t k = 0; k < o.y_count; k++) /* the added rows and columns are exactly zero */
    if (want[k] == 0.0f)
      ck_assert_msg(o.y[k] == 0.0f, "%s: element %lld holds %g for 0", what, (long long)k,
                    (double)o.y[k]);
  if (training) {
    ref_pad_spatial_backward(o.dy, xs, top, bottom, left, right, dx);
    strcpy(strrchr(what, ':'), ": backward");
    expect_close(what, o.dx, dx, o.x_count, precision == CNNB_PRECISION_FP32 ? 0.0 : tol->backward);
  }
  free(want);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

/* conv -> pad_spatial, as NASNet's factorized reduction shifts a layer's output: the pad
 * reads a conv's layout (blocked on the cpu device) and its gradient flows back into the
 * conv's weights. */
static void check_pad_spatial_after_conv(int filters, int size, int top, int bottom, int left,
                                         int right, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  if (pad_spatial_unsupported(&h)) {
    device_harness_close(&h);
    return;
  }
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(2, 3, size, size, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor c = cnnb_conv2d(g, "conv", x,
                              CNNB_CONV2D(.filters = filters, .kernel_h = 3, .kernel_w = 3));
  cnnb_tensor y = cnnb_pad_spatial(g, "shift", c, top, bottom, left, right);
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "%s", cnnb_graph_error(g));
  op_result o = run_op(&h, g, y, &seed, 1);
  const cnnb_node *cn = cnnb_graph_node(g, c);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, cs = cn->shape;
  ref_window win = ref_window_of(cn);
  const float *w = param_of(g, o.params, cn, 0);
  int64_t wn = cnnb_graph_param(g, cn->params[0])->count, cc = cnnb_shape_count(cs);
  float *conv_y = zeros(cc), *want = zeros(o.y_count), *dc = zeros(cc), *dx = zeros(o.x_count),
        *dw = zeros(wn);
  ref_conv2d_forward(o.images, xs, w, NULL, &win, conv_y, cs);
  ref_pad_spatial_forward(conv_y, cs, top, bottom, left, right, want);
  char what[160];
  snprintf(what, sizeof what, "conv %d -> pad_spatial %d, %d, %d, %d on %dx%d (%s): forward",
           filters, top, bottom, left, right, size, size, test_precision_name(precision));
  expect_close(what, o.y, want, o.y_count, tol->forward);
  ref_pad_spatial_backward(o.dy, cs, top, bottom, left, right, dc);
  ref_conv2d_backward_data(dc, cs, w, &win, dx, xs);
  strcpy(strrchr(what, ':'), ": backward data");
  expect_close(what, o.dx, dx, o.x_count, tol->backward);
  ref_conv2d_backward_weights(o.images, xs, dc, cs, &win, dw, NULL);
  strcpy(strrchr(what, ':'), ": backward weights");
  expect_close(what, param_of(g, o.dparams, cn, 0), dw, wn, tol->backward);
  free(conv_y);
  free(want);
  free(dc);
  free(dx);
  free(dw);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_pad_spatial) {
  uint64_t s = 220;
  for (int i = 0; i < 6; i++) {
    int n = rand_int(&s, 1, 3), c = rand_int(&s, 1, 9), hh = rand_int(&s, 7, 9),
        ww = rand_int(&s, 7, 9); /* at least 1 left after cutting 3 + 3 */
    int top = rand_int(&s, -3, 3), bottom = rand_int(&s, -3, 3), left = rand_int(&s, -3, 3),
        right = rand_int(&s, -3, 3);
    check_pad_spatial_on_images(n, c, hh, ww, top, bottom, left, right, CNNB_PRECISION_FP32, 1,
                                230 + (uint64_t)i);
    check_pad_spatial_on_images(n, c, hh, ww, top, bottom, left, right, CNNB_PRECISION_FP32, 0,
                                240 + (uint64_t)i);
  }
  /* NASNet's shift, odd and even sizes; a copy; a cut that leaves nothing of x. */
  check_pad_spatial_on_images(2, 3, 7, 6, -1, 1, -1, 1, CNNB_PRECISION_FP32, 1, 250);
  check_pad_spatial_on_images(2, 3, 4, 5, 0, 0, 0, 0, CNNB_PRECISION_FP32, 1, 251);
  check_pad_spatial_on_images(1, 2, 3, 3, -3, 3, 0, 0, CNNB_PRECISION_FP32, 1, 252);
  /* After convs of 16 (one channel block) and 5 (a padded block) channels. */
  check_pad_spatial_after_conv(16, 7, -1, 1, -1, 1, CNNB_PRECISION_FP32, 253);
  check_pad_spatial_after_conv(5, 6, -1, 1, -1, 1, CNNB_PRECISION_FP32, 254);
  check_pad_spatial_after_conv(32, 5, 2, -1, 0, 3, CNNB_PRECISION_FP32, 255);
}
END_TEST

START_TEST(test_pad_spatial_low_precision) {
  const uint32_t precision = device_harness_low_precisions[_i];
  check_pad_spatial_on_images(2, 5, 7, 7, -1, 1, -1, 1, precision, 1, 260);
  check_pad_spatial_after_conv(16, 7, -1, 1, -1, 1, precision, 261);
  check_pad_spatial_after_conv(5, 6, 1, -2, -1, 2, precision, 262);
}
END_TEST

/* A device must refuse a node whose op it does not know (a graph from a newer SDK), naming
 * the op, in tensor_bytes and prepare alike (graph.h) — never guess — and say no to it in
 * supports_op where it has that. The pad node stands in for it, its op number patched to
 * one no SDK has. */
START_TEST(test_unknown_op_refused) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  cnnb_graph *g = cnnb_graph_create(2, 3, 4, 4, 10);
  cnnb_tensor y = cnnb_pad_channels(g, "newer_op", cnnb_graph_input(g), 1, 2);
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  ((cnnb_node *)cnnb_graph_node(g, y))->op = 99;
  size_t bytes = 0;
  ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, y, &bytes), CNNB_EUNSUPPORTED);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "99"),
                "tensor_bytes: the message names no op 99: %s", cnnb_error_message(h.ctx));
  cnnb_clear_error(h.ctx);
  void *state = NULL;
  ck_assert_int_eq(h.dv->prepare(h.dev, g, y, &state), CNNB_EUNSUPPORTED);
  ck_assert_ptr_null(state);
  ck_assert_msg(strstr(cnnb_error_message(h.ctx), "99"), "prepare: the message names no op 99: %s",
                cnnb_error_message(h.ctx));
  if (h.dv->supports_op) ck_assert_int_eq(h.dv->supports_op(h.dev, 99), 0);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

/* ---- batch norm ------------------------------------------------------------------------ */

static void check_batch_norm(int n, int c, int hh, int ww, int scale, int relu, int training,
                             uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, training)) return;
  const test_tolerance *tol = tol_of(precision);
  const float eps = 1e-3f, decay = 0.9f;
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor x = cnnb_graph_input(g);
  cnnb_tensor y = cnnb_batch_norm(g, "bn", x,
                                  CNNB_BATCH_NORM(.epsilon = eps, .decay = decay, .scale = scale));
  ck_assert_msg(cnnb_graph_status(g) == CNNB_OK, "graph: %s", cnnb_graph_error(g));
  if (relu) ck_assert_int_eq(cnnb_graph_set_fused_relu(g, y, 1), CNNB_OK);
  op_result o = run_op(&h, g, y, &seed, training);
  const cnnb_node *node = cnnb_graph_node(g, y);
  cnnb_shape s = node->shape;
  const float *gamma = scale ? param_of(g, o.params, node, 0) : NULL;
  const float *beta = param_of(g, o.params, node, scale ? 1 : 0);
  const float *rmean = o.stats + cnnb_graph_param(g, node->stats[0])->offset;
  const float *rvar = o.stats + cnnb_graph_param(g, node->stats[1])->offset;
  float *want = zeros(o.y_count), *mean = zeros(c), *var = zeros(c);
  char what[128];
  snprintf(what, sizeof what, "batch norm %dx%dx%dx%d scale %d relu %d %s", n, c, hh, ww, scale,
           relu, training ? "training" : "inference");
  if (!training) {
    ref_batch_norm_forward_inference(o.images, s, gamma, beta, rmean, rvar, eps, want);
    if (relu) ref_relu_forward(want, o.y_count, want);
    expect_close(what, o.y, want, o.y_count, tol->forward);
    /* Inference leaves the running statistics alone. */
    expect_close("inference running stats untouched", o.stats_after, o.stats, o.stat_count, 0.0);
  } else {
    ref_batch_norm_forward_training(o.images, s, gamma, beta, eps, want, mean, var);
    if (relu) ref_relu_forward(want, o.y_count, want);
    expect_close(what, o.y, want, o.y_count, tol->forward);
    /* TF's fused batch norm: the moving variance takes the Bessel-corrected variance. */
    double m = (double)n * hh * ww;
    float *want_stats = zeros(o.stat_count);
    memcpy(want_stats, o.stats, (size_t)o.stat_count * sizeof(float));
    float *wm = want_stats + cnnb_graph_param(g, node->stats[0])->offset;
    float *wv = want_stats + cnnb_graph_param(g, node->stats[1])->offset;
    for (int k = 0; k < c; k++) {
      wm[k] = decay * rmean[k] + (1 - decay) * mean[k];
      wv[k] = (float)(decay * rvar[k] + (1 - decay) * var[k] * m / (m - 1));
    }
    expect_close("running statistics", o.stats_after, want_stats, o.stat_count, tol->forward);
    free(want_stats);
    float *dy = zeros(o.y_count), *dx = zeros(o.x_count), *dgamma = zeros(c), *dbeta = zeros(c);
    if (relu) ref_relu_backward(o.y, o.dy, o.y_count, dy);
    else memcpy(dy, o.dy, (size_t)o.y_count * sizeof *dy);
    ref_batch_norm_backward(o.images, s, gamma, dy, mean, var, eps, dx, scale ? dgamma : NULL,
                            dbeta);
    if (want_image_grads)
      expect_close("batch norm backward data", o.dx, dx, o.x_count, tol->backward);
    expect_close("batch norm offset gradient", param_of(g, o.dparams, node, scale ? 1 : 0), dbeta,
                 c, tol->backward);
    if (scale)
      expect_close("batch norm scale gradient", param_of(g, o.dparams, node, 0), dgamma, c,
                   tol->backward);
    free(dy);
    free(dx);
    free(dgamma);
    free(dbeta);
  }
  free(want);
  free(mean);
  free(var);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_batch_norm) {
  check_batch_norm(4, 5, 3, 7, 0, 0, 1, CNNB_PRECISION_FP32, 1);  /* offset only */
  check_batch_norm(3, 16, 5, 5, 1, 0, 1, CNNB_PRECISION_FP32, 2); /* scale and offset */
  check_batch_norm(2, 7, 4, 3, 1, 1, 1, CNNB_PRECISION_FP32, 3);  /* fused relu */
  check_batch_norm(4, 5, 3, 7, 0, 0, 0, CNNB_PRECISION_FP32, 4);  /* inference */
  check_batch_norm(2, 7, 4, 3, 1, 1, 0, CNNB_PRECISION_FP32, 5);  /* inference, fused relu */
  for (int p = 0; p < 2; p++)
    check_batch_norm(4, 16, 4, 4, 1, 0, 1, device_harness_low_precisions[p], 6);
}
END_TEST

/* ---- pools and LRN --------------------------------------------------------------------------- */

/* 1: the pools are built with ceil_mode (their last windows hang past the padding). */
static int pool_ceil_mode;

static void check_pool(uint32_t op, int n, int c, int hh, int ww, int k, int stride,
                       uint32_t padding, uint32_t precision, uint64_t seed) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const test_tolerance *tol = tol_of(precision);
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor x = cnnb_graph_input(g), y;
  const cnnb_pool_desc *pd = CNNB_POOL(.kernel_h = k, .kernel_w = k + 1, .stride_h = stride,
                                       .stride_w = stride, .padding = padding, .pad_top = 1,
                                       .pad_bottom = 0, .pad_left = 0, .pad_right = 1,
                                       .ceil_mode = pool_ceil_mode);
  if (op == CNNB_OP_MAX_POOL) y = cnnb_max_pool(g, "pool", x, pd);
  else if (op == CNNB_OP_AVG_POOL) y = cnnb_avg_pool(g, "pool", x, pd);
  else y = cnnb_global_avg_pool(g, "pool", x);
  op_result o = run_op(&h, g, y, &seed, 1);
  const cnnb_node *node = cnnb_graph_node(g, y);
  ref_window win = ref_window_of(node);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = node->shape;
  float *want = zeros(o.y_count), *dx = zeros(o.x_count);
  if (op == CNNB_OP_MAX_POOL) {
    ref_max_pool_forward(o.images, xs, &win, want, ys);
    ref_max_pool_backward(o.images, xs, o.dy, ys, &win, dx);
  } else {
    ref_avg_pool_forward(o.images, xs, &win, want, ys);
    ref_avg_pool_backward(o.dy, ys, &win, dx, xs);
  }
  char what[128];
  snprintf(what, sizeof what, "%s %dx%dx%dx%d k%d s%d pads %d,%d,%d,%d",
           op == CNNB_OP_MAX_POOL   ? "max pool"
           : op == CNNB_OP_AVG_POOL ? "avg pool"
                                    : "global avg pool",
           n, c, hh, ww, k, stride, win.pt, win.pb, win.pl, win.pr);
  expect_close(what, o.y, want, o.y_count, tol->forward);
  strcat(what, " backward");
  expect_close(what, o.dx, dx, o.x_count, tol->backward);
  free(want);
  free(dx);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_pools) {
  check_pool(CNNB_OP_MAX_POOL, 2, 3, 9, 8, 3, 2, CNNB_PAD_VALID, CNNB_PRECISION_FP32, 1);
  check_pool(CNNB_OP_MAX_POOL, 2, 5, 7, 7, 3, 2, CNNB_PAD_SAME, CNNB_PRECISION_FP32, 2);
  check_pool(CNNB_OP_MAX_POOL, 1, 4, 6, 9, 2, 1, CNNB_PAD_EXPLICIT, CNNB_PRECISION_FP32, 3);
  check_pool(CNNB_OP_AVG_POOL, 2, 3, 9, 8, 3, 2, CNNB_PAD_VALID, CNNB_PRECISION_FP32, 4);
  check_pool(CNNB_OP_AVG_POOL, 2, 5, 7, 7, 3, 2, CNNB_PAD_SAME, CNNB_PRECISION_FP32,
             5); /* excludes pads */
  check_pool(CNNB_OP_AVG_POOL, 1, 4, 6, 9, 2, 1, CNNB_PAD_EXPLICIT, CNNB_PRECISION_FP32, 6);
  check_pool(CNNB_OP_GLOBAL_AVG_POOL, 3, 6, 5, 7, 0, 0, 0, CNNB_PRECISION_FP32, 7);
  /* ceil_mode (ABI 1.14): 9 rows, 8 columns, 3x4 / 2 -> 4 x 3 rows and columns, the last
   * window of each hanging one past; and with explicit pads. */
  pool_ceil_mode = 1;
  check_pool(CNNB_OP_MAX_POOL, 2, 3, 10, 9, 3, 2, CNNB_PAD_VALID, CNNB_PRECISION_FP32, 12);
  check_pool(CNNB_OP_AVG_POOL, 2, 3, 10, 9, 3, 2, CNNB_PAD_VALID, CNNB_PRECISION_FP32, 13);
  check_pool(CNNB_OP_MAX_POOL, 1, 4, 6, 9, 2, 2, CNNB_PAD_EXPLICIT, CNNB_PRECISION_FP32, 14);
  pool_ceil_mode = 0;
  /* SAME on a map smaller than the window: pads 0 / 1, a window wider than the input
   * padded symmetrically (cuDNN refuses to size it; the cuda device must use its own). */
  check_pool(CNNB_OP_MAX_POOL, 2, 3, 2, 2, 3, 2, CNNB_PAD_SAME, CNNB_PRECISION_FP32, 10);
  check_pool(CNNB_OP_AVG_POOL, 2, 3, 2, 2, 3, 2, CNNB_PAD_SAME, CNNB_PRECISION_FP32, 11);
  for (int p = 0; p < 2; p++) {
    exact_images = 1;
    check_pool(CNNB_OP_MAX_POOL, 2, 16, 8, 8, 3, 2, CNNB_PAD_SAME, device_harness_low_precisions[p],
               8);
    exact_images = 0;
    check_pool(CNNB_OP_AVG_POOL, 2, 16, 8, 8, 3, 2, CNNB_PAD_SAME, device_harness_low_precisions[p],
               9);
  }
}
END_TEST

START_TEST(test_lrn) {
  const struct {
    int n, c, h, w, r;
    float bias, alpha, beta;
  } cases[] = {
      {2, 7, 3, 4, 2, 1.0f, 0.1f, 0.75f},  /* strong alpha so the test sees the sum */
      {1, 16, 5, 5, 5, 2.0f, 0.05f, 0.5f}, /* AlexNet's radius 5 */
      {2, 3, 2, 2, 0, 1.0f, 0.3f, 0.75f},  /* window of one channel */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    device_harness h;
    if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
    uint64_t seed = 50 + i;
    cnnb_graph *g = cnnb_graph_create(cases[i].n, cases[i].c, cases[i].h, cases[i].w, 10);
    cnnb_tensor y = cnnb_lrn(g, "lrn", cnnb_graph_input(g),
                             CNNB_LRN(.depth_radius = cases[i].r, .bias = cases[i].bias,
                                      .alpha = cases[i].alpha, .beta = cases[i].beta));
    op_result o = run_op(&h, g, y, &seed, 1);
    cnnb_shape s = cnnb_graph_node(g, y)->shape;
    float *want = zeros(o.y_count), *dx = zeros(o.x_count);
    ref_lrn_forward(o.images, s, cases[i].r, cases[i].bias, cases[i].alpha, cases[i].beta, want);
    ref_lrn_backward(o.images, s, o.dy, cases[i].r, cases[i].bias, cases[i].alpha, cases[i].beta,
                     dx);
    expect_close("lrn forward", o.y, want, o.y_count, FP32_FORWARD);
    expect_close("lrn backward", o.dx, dx, o.x_count, FP32_BACKWARD);
    free(want);
    free(dx);
    op_result_free(&o);
    cnnb_graph_destroy(g);
    device_harness_close(&h);
  }
}
END_TEST

/* ---- concat and add (branches of convs: blocked layouts meet) -------------------------------- */

START_TEST(test_concat_and_add) {
  const int widths[][3] = {{16, 32, 16}, {8, 16, 5}, {3, 7, 2}}; /* cut inside a 16-block, odd */
  for (int t = 0; t < 3; t++) {
    device_harness h;
    if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
    uint64_t seed = 70 + t;
    cnnb_graph *g = cnnb_graph_create(2, 4, 6, 5, 10);
    cnnb_tensor x = cnnb_graph_input(g);
    cnnb_tensor br[3];
    for (int i = 0; i < 3; i++)
      br[i] = cnnb_conv2d(g, NULL, x,
                          CNNB_CONV2D(.filters = widths[t][i], .kernel_h = 1 + 2 * (i == 1),
                                      .kernel_w = 1 + 2 * (i == 1)));
    cnnb_tensor cat = cnnb_concat(g, "concat", 3, br);
    int total = widths[t][0] + widths[t][1] + widths[t][2];
    cnnb_tensor side = cnnb_conv2d(g, "side", x,
                                   CNNB_CONV2D(.filters = total, .kernel_h = 1, .kernel_w = 1));
    cnnb_tensor y = cnnb_add(g, "add", cat, side);
    op_result o = run_op(&h, g, y, &seed, 1);
    cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = cnnb_graph_node(g, y)->shape;
    float *outs[3], *douts[3];
    cnnb_shape shapes[3];
    float *want = zeros(o.y_count), *side_y = zeros(o.y_count), *dx = zeros(o.x_count),
          *part = zeros(o.x_count);
    for (int i = 0; i < 3; i++) {
      const cnnb_node *cn = cnnb_graph_node(g, br[i]);
      shapes[i] = cn->shape;
      outs[i] = zeros(cnnb_shape_count(cn->shape));
      douts[i] = zeros(cnnb_shape_count(cn->shape));
      ref_window win = ref_window_of(cn);
      ref_conv2d_forward(o.images, xs, param_of(g, o.params, cn, 0), NULL, &win, outs[i],
                         cn->shape);
    }
    ref_concat_forward((const float *const *)outs, shapes, 3, want);
    const cnnb_node *sn = cnnb_graph_node(g, side);
    ref_window swin = ref_window_of(sn);
    ref_conv2d_forward(o.images, xs, param_of(g, o.params, sn, 0), NULL, &swin, side_y, ys);
    ref_add_forward(want, side_y, o.y_count, want);
    expect_close("concat + add forward", o.y, want, o.y_count, FP32_FORWARD);
    /* Backward: dy reaches the side conv whole and each branch as its slice; the input
     * gradient sums all four paths. */
    ref_concat_backward(o.dy, shapes, 3, douts);
    ref_conv2d_backward_data(o.dy, ys, param_of(g, o.params, sn, 0), &swin, dx, xs);
    for (int i = 0; i < 3; i++) {
      const cnnb_node *cn = cnnb_graph_node(g, br[i]);
      ref_window win = ref_window_of(cn);
      ref_conv2d_backward_data(douts[i], shapes[i], param_of(g, o.params, cn, 0), &win, part, xs);
      for (int64_t k = 0; k < o.x_count; k++) dx[k] += part[k];
      int64_t wc = cnnb_graph_param(g, cn->params[0])->count;
      float *dw = zeros(wc);
      ref_conv2d_backward_weights(o.images, xs, douts[i], shapes[i], &win, dw, NULL);
      expect_close("concat branch weight gradient", param_of(g, o.dparams, cn, 0), dw, wc,
                   FP32_BACKWARD);
      free(dw);
      free(outs[i]);
      free(douts[i]);
    }
    expect_close("concat + add backward to the input", o.dx, dx, o.x_count, FP32_BACKWARD);
    free(want);
    free(side_y);
    free(dx);
    free(part);
    op_result_free(&o);
    cnnb_graph_destroy(g);
    device_harness_close(&h);
  }
}
END_TEST

/* add + fused ReLU (the residual block's tail): y = relu(a + b), dy masked by y on the
 * way back. mode 0: a, b two blocked convs (the mask goes straight into a's gradient);
 * mode 1: a conv plus the plain images (layouts differ: the masked gradient is converted
 * for the images); mode 2: add(x, x) (one gradient buffer for both: twice the mask).
 * Only devices with CNNB_EXT_FUSED_RELU_ADD: the host fuses a ReLU into an add only then. */
static void check_add_relu(int mode, int training, uint64_t seed) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, training)) return;
  if (!device_harness_has_extension(h.dev, CNNB_EXT_FUSED_RELU_ADD)) {
    if (mode == 0 && training)
      printf("test_add_fused_relu: skipped: device '%s' lacks %s, so the host never fuses a "
             "ReLU into an add for it\n",
             h.name, CNNB_EXT_FUSED_RELU_ADD);
    device_harness_close(&h);
    return;
  }
  const int c = 16;
  cnnb_graph *g = cnnb_graph_create(2, c, 5, 6, 10);
  cnnb_tensor x = cnnb_graph_input(g), a = x, b = x;
  if (mode != 2)
    a = cnnb_conv2d(g, "a", x,
                    CNNB_CONV2D(.filters = c, .kernel_h = 3, .kernel_w = 3,
                                .padding = CNNB_PAD_SAME));
  if (mode == 0)
    b = cnnb_conv2d(g, "b", x, CNNB_CONV2D(.filters = c, .kernel_h = 1, .kernel_w = 1));
  cnnb_tensor y = cnnb_add(g, "add", a, b);
  ck_assert_int_eq(cnnb_graph_set_fused_relu(g, y, 1), CNNB_OK);
  op_result o = run_op(&h, g, y, &seed, training);
  cnnb_shape xs = cnnb_graph_node(g, x)->shape, ys = cnnb_graph_node(g, y)->shape;
  float *av = zeros(o.y_count), *bv = zeros(o.y_count), *want = zeros(o.y_count);
  const cnnb_node *an = cnnb_graph_node(g, a), *bn = cnnb_graph_node(g, b);
  ref_window awin = ref_window_of(an), bwin = ref_window_of(bn);
  if (mode != 2)
    ref_conv2d_forward(o.images, xs, param_of(g, o.params, an, 0), NULL, &awin, av, ys);
  else memcpy(av, o.images, (size_t)o.y_count * sizeof *av);
  if (mode == 0)
    ref_conv2d_forward(o.images, xs, param_of(g, o.params, bn, 0), NULL, &bwin, bv, ys);
  else memcpy(bv, o.images, (size_t)o.y_count * sizeof *bv);
  ref_add_forward(av, bv, o.y_count, want);
  ref_relu_forward(want, o.y_count, want);
  char what[96];
  snprintf(what, sizeof what, "add + relu forward (mode %d, %s)", mode,
           training ? "training" : "inference");
  expect_close(what, o.y, want, o.y_count, FP32_FORWARD);
  int negatives = 0;
  for (int64_t i = 0; i < o.y_count; i++) negatives += want[i] == 0.0f;
  ck_assert_msg(negatives > o.y_count / 10, "add + relu: only %d of %lld outputs clipped",
                negatives, (long long)o.y_count);
  if (training) {
    float *dz = zeros(o.y_count), *dx = zeros(o.x_count), *part = zeros(o.x_count);
    ref_relu_backward(o.y, o.dy, o.y_count, dz); /* the device's own output decides */
    if (mode == 0) {
      ref_conv2d_backward_data(dz, ys, param_of(g, o.params, an, 0), &awin, dx, xs);
      ref_conv2d_backward_data(dz, ys, param_of(g, o.params, bn, 0), &bwin, part, xs);
      for (int64_t k = 0; k < o.x_count; k++) dx[k] += part[k];
    } else if (mode == 1) {
      ref_conv2d_backward_data(dz, ys, param_of(g, o.params, an, 0), &awin, dx, xs);
      for (int64_t k = 0; k < o.x_count; k++) dx[k] += dz[k];
    } else {
      for (int64_t k = 0; k < o.x_count; k++) dx[k] = 2.0f * dz[k];
    }
    snprintf(what, sizeof what, "add + relu backward to the input (mode %d)", mode);
    expect_close(what, o.dx, dx, o.x_count, FP32_BACKWARD);
    if (mode != 2) {
      int64_t wc = cnnb_graph_param(g, an->params[0])->count;
      float *dw = zeros(wc);
      ref_conv2d_backward_weights(o.images, xs, dz, ys, &awin, dw, NULL);
      expect_close("add + relu backward weights", param_of(g, o.dparams, an, 0), dw, wc,
                   FP32_BACKWARD);
      free(dw);
    }
    free(dz);
    free(dx);
    free(part);
  }
  free(av);
  free(bv);
  free(want);
  op_result_free(&o);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_add_fused_relu) {
  for (int mode = 0; mode < 3; mode++) {
    check_add_relu(mode, 1, 90 + (uint64_t)mode);
    check_add_relu(mode, 0, 95 + (uint64_t)mode);
  }
}
END_TEST

/* ---- softmax cross-entropy ------------------------------------------------------------------- */

static void check_loss(uint32_t precision, float loss_scale, float smoothing) {
  device_harness h;
  if (open_device(&h, precision, 1)) return;
  const test_tolerance *tol = tol_of(precision);
  uint64_t seed = 5;
  const int n = 5, k = 13;
  cnnb_graph *g = cnnb_graph_create(n, 6, 1, 1, k);
  cnnb_tensor logits = cnnb_dense(g, "logits", cnnb_graph_input(g),
                                  CNNB_DENSE(.units = k, .use_bias = 1));
  ck_assert_int_eq(cnnb_graph_set_logits(g, logits), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_add_loss(g), CNNB_OK);
  ck_assert_int_eq(cnnb_graph_set_label_smoothing(g, smoothing), CNNB_OK);
  device_run *r = make_run(&h, g);
  int64_t pc = cnnb_graph_param_arena_count(g);
  float *params = rand_buf(&seed, pc, -2.0f, 2.0f), *images = rand_buf(&seed, n * 6, -1.0f, 1.0f);
  int32_t labels[5] = {0, 12, 3, 3, 7};
  RUN_OK(&h, device_run_set_params(r, params, NULL));
  RUN_OK(&h, device_run_forward(r, images, labels, 0));
  float lg[5 * 13], loss, dlg[5 * 13], want[5 * 13];
  RUN_OK(&h, device_run_activation(r, logits, lg));
  RUN_OK(&h, device_run_activation(r, cnnb_graph_loss(g), &loss));
  float ref = (float)ref_softmax_xent_forward(lg, n, k, labels, smoothing, NULL);
  expect_close("softmax xent loss", &loss, &ref, 1, tol->forward);
  RUN_OK(&h, device_run_backward(r, -1, NULL, loss_scale, 0));
  RUN_OK(&h, device_run_gradient(r, logits, dlg));
  ref_softmax_xent_backward(lg, n, k, labels, smoothing, loss_scale, want);
  expect_close("softmax xent gradient (scaled)", dlg, want, n * k, tol->backward);
  /* A label outside [0, classes) is bad data: refused with a message, not a crash. An
   * asynchronous device (cuda) finds it in a kernel and reports it at the next
   * synchronizing call, here reading the loss back. */
  labels[2] = k;
  ck_assert_int_ne(device_run_forward(r, images, labels, 0) ||
                       device_run_activation(r, cnnb_graph_loss(g), &loss),
                   0);
  ck_assert_msg(strstr(h.error, "label 13") != NULL, "message: %s", h.error);
  free(params);
  free(images);
  device_run_destroy(r);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}

START_TEST(test_softmax_xent) {
  check_loss(CNNB_PRECISION_FP32, 1.0f, 0.0f);
  check_loss(CNNB_PRECISION_FP32, 128.0f, 0.0f);
  for (int p = 0; p < 2; p++) check_loss(device_harness_low_precisions[p], 1.0f, 0.0f);
}
END_TEST

/* Label smoothing (1.14): the target (1 - s) onehot + s / K, as torch's CrossEntropyLoss. */
START_TEST(test_softmax_xent_label_smoothing) {
  check_loss(CNNB_PRECISION_FP32, 1.0f, 0.1f);
  check_loss(CNNB_PRECISION_FP32, 128.0f, 0.5f);
  for (int p = 0; p < 2; p++) check_loss(device_harness_low_precisions[p], 1.0f, 0.1f);
}
END_TEST

/* ---- dropout --------------------------------------------------------------------------------- */

START_TEST(test_dropout) {
  const float keep = 0.7f;
  const float one_rounding = (float)tol_of(CNNB_PRECISION_FP32)->one_rounding;
  const int n = 8, c = 50, hh = 16, ww = 16;
  const int64_t count = (int64_t)n * c * hh * ww;
  float *x = malloc((size_t)count * sizeof *x), *y = malloc((size_t)count * sizeof *y),
        *y2 = malloc((size_t)count * sizeof *y2), *dy = malloc((size_t)count * sizeof *dy),
        *dx = malloc((size_t)count * sizeof *dx);
  uint64_t seed = 3;
  for (int64_t i = 0; i < count; i++) {
    x[i] = uniform(&seed, 0.5f, 1.5f); /* never zero: a zero output means dropped */
    dy[i] = uniform(&seed, -1.0f, 1.0f);
  }
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor t = cnnb_dropout(g, "dropout", cnnb_graph_input(g), keep);
  device_run *r = make_run(&h, g);
  RUN_OK(&h, device_run_forward(r, x, NULL, 11));
  RUN_OK(&h, device_run_activation(r, t, y));
  int64_t kept = 0;
  for (int64_t i = 0; i < count; i++) {
    if (y[i] == 0.0f) continue;
    kept++;
    ck_assert_msg(fabsf(y[i] - x[i] / keep) <= one_rounding * fabsf(y[i]), "kept %g, expected %g",
                  y[i], x[i] / keep);
  }
  /* Binomial(count, keep): 6 standard deviations is ~0.0123 of the fraction here. */
  double frac = (double)kept / count, sd = sqrt(keep * (1.0 - keep) / count);
  ck_assert_msg(fabs(frac - keep) < 6 * sd, "kept fraction %.4f, keep_prob %.2f", frac, keep);
  /* Backward uses the same mask and scale. */
  RUN_OK(&h, device_run_backward(r, t, dy, 1.0f, 11));
  RUN_OK(&h, device_run_gradient(r, 0, dx));
  for (int64_t i = 0; i < count; i++) {
    float want = y[i] == 0.0f ? 0.0f : dy[i] / keep;
    ck_assert_msg(fabsf(dx[i] - want) <= one_rounding * fabsf(want), "dx %g expected %g", dx[i],
                  want);
  }
  /* Same step: same mask; another step: another mask. */
  RUN_OK(&h, device_run_forward(r, x, NULL, 11));
  RUN_OK(&h, device_run_activation(r, t, y2));
  ck_assert(memcmp(y, y2, (size_t)count * sizeof *y) == 0);
  RUN_OK(&h, device_run_forward(r, x, NULL, 12));
  RUN_OK(&h, device_run_activation(r, t, y2));
  ck_assert(memcmp(y, y2, (size_t)count * sizeof *y) != 0);
  device_run_destroy(r);
  device_harness_close(&h);

  /* Inference: the identity. */
  if (open_device(&h, CNNB_PRECISION_FP32, 0)) return;
  r = make_run(&h, g);
  RUN_OK(&h, device_run_forward(r, x, NULL, 11));
  RUN_OK(&h, device_run_activation(r, t, y));
  ck_assert(memcmp(x, y, (size_t)count * sizeof *y) == 0);
  device_run_destroy(r);
  device_harness_close(&h);
  cnnb_graph_destroy(g);
  free(x);
  free(y);
  free(y2);
  free(dy);
  free(dx);
}
END_TEST

/* ---- stochastic depth (ABI 1.14) ------------------------------------------------------------ */

/* Image b of y (per = elements per image) as kept (every element x / keep, as dropout
 * scales) or dropped (every element 0); 1: kept. */
static int image_kept(const float *x, const float *y, int64_t per, int b, float keep) {
  const float one_rounding = (float)tol_of(CNNB_PRECISION_FP32)->one_rounding;
  int kept = y[(int64_t)b * per] != 0.0f;
  for (int64_t i = (int64_t)b * per; i < (int64_t)(b + 1) * per; i++)
    if (kept)
      ck_assert_msg(fabsf(y[i] - x[i] / keep) <= one_rounding * fabsf(y[i]),
                    "image %d kept, element %lld is %g, want %g", b, (long long)i, (double)y[i],
                    (double)(x[i] / keep));
    else
      ck_assert_msg(y[i] == 0.0f, "image %d dropped, element %lld is %g", b, (long long)i,
                    (double)y[i]);
  return kept;
}

/* Each image whole, kept and scaled or dropped; backward the same mask; one step one
 * mask; inference, and drop_prob 0, the identity; drop_prob 1 drops all. Then after a
 * conv of 13 filters (a blocked layout on oneDNN, channels padded), whole images still. */
START_TEST(test_stochastic_depth) {
  const float drop = 0.5f, keep = 1.0f - drop;
  const int n = 16, c = 5, hh = 4, ww = 3;
  const int64_t per = (int64_t)c * hh * ww, count = n * per;
  float *x = zeros(count), *y = zeros(count), *y2 = zeros(count), *dy = zeros(count),
        *dx = zeros(count);
  uint64_t seed = 5;
  for (int64_t i = 0; i < count; i++) {
    x[i] = uniform(&seed, 0.5f, 1.5f); /* never zero: a zero output means dropped */
    dy[i] = uniform(&seed, 0.5f, 1.5f);
  }
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  if (h.dv->supports_op && !h.dv->supports_op(h.dev, CNNB_OP_STOCHASTIC_DEPTH)) {
    printf("%s does not run stochastic_depth (supports_op): skipped\n", h.name);
    device_harness_close(&h);
    return;
  }
  for (int k = 0; k < 3; k++) {
    const float p = k == 0 ? drop : k == 1 ? 0.0f : 1.0f, kp = 1.0f - p;
    cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
    cnnb_tensor t = cnnb_stochastic_depth(g, "sd", cnnb_graph_input(g), p);
    device_run *r = make_run(&h, g);
    RUN_OK(&h, device_run_forward(r, x, NULL, 11));
    RUN_OK(&h, device_run_activation(r, t, y));
    int kept = 0;
    for (int b = 0; b < n; b++) kept += p < 1.0f ? image_kept(x, y, per, b, kp) : 0;
    if (p == 1.0f)
      for (int64_t i = 0; i < count; i++) ck_assert_msg(y[i] == 0.0f, "drop_prob 1: %g", y[i]);
    else if (p == 0.0f) ck_assert_int_eq(kept, n);
    else /* Binomial(16, 1/2): 2 to 14 but once in ~2000 seeds; this one is fixed. */
      ck_assert_msg(kept > 1 && kept < n - 1, "%d of %d images kept", kept, n);
    if (k == 0) {
      RUN_OK(&h, device_run_backward(r, t, dy, 1.0f, 11));
      RUN_OK(&h, device_run_gradient(r, 0, dx));
      for (int b = 0; b < n; b++)
        ck_assert_int_eq(image_kept(dy, dx, per, b, keep), y[(int64_t)b * per] != 0.0f);
      RUN_OK(&h, device_run_forward(r, x, NULL, 11));
      RUN_OK(&h, device_run_activation(r, t, y2));
      ck_assert(memcmp(y, y2, (size_t)count * sizeof *y) == 0);
    }
    device_run_destroy(r);
    cnnb_graph_destroy(g);
  }
  device_harness_close(&h);

  /* Inference: the identity. */
  if (open_device(&h, CNNB_PRECISION_FP32, 0)) return;
  cnnb_graph *g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor t = cnnb_stochastic_depth(g, "sd", cnnb_graph_input(g), drop);
  device_run *r = make_run(&h, g);
  RUN_OK(&h, device_run_forward(r, x, NULL, 11));
  RUN_OK(&h, device_run_activation(r, t, y));
  ck_assert(memcmp(x, y, (size_t)count * sizeof *y) == 0);
  device_run_destroy(r);
  cnnb_graph_destroy(g);
  device_harness_close(&h);

  /* After a conv: whole images on the conv's layout. */
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  g = cnnb_graph_create(n, c, hh, ww, 10);
  cnnb_tensor conv = cnnb_conv2d(g, "conv", cnnb_graph_input(g),
                                 CNNB_CONV2D(.filters = 13, .kernel_h = 3, .kernel_w = 3));
  t = cnnb_stochastic_depth(g, "sd", conv, drop);
  r = make_run(&h, g);
  float *params = zeros(cnnb_graph_param_arena_count(g));
  for (int64_t i = 0; i < cnnb_graph_param_arena_count(g); i++)
    params[i] = uniform(&seed, 0.05f, 0.15f); /* positive weights, positive images: y > 0 */
  RUN_OK(&h, device_run_set_params(r, params, NULL));
  RUN_OK(&h, device_run_forward(r, x, NULL, 11));
  int64_t cper = 13 * (int64_t)hh * ww;
  float *cy = zeros(n * cper);
  RUN_OK(&h, device_run_activation(r, t, cy));
  int kept = 0;
  for (int b = 0; b < n; b++) {
    int zero = 0;
    for (int64_t i = (int64_t)b * cper; i < (int64_t)(b + 1) * cper; i++) zero += cy[i] == 0.0f;
    ck_assert_msg(zero == 0 || zero == cper, "image %d: %d of %lld elements zero", b, zero,
                  (long long)cper);
    kept += zero == 0;
  }
  ck_assert_msg(kept > 1 && kept < n - 1, "after the conv, %d of %d images kept", kept, n);
  free(params);
  free(cy);
  device_run_destroy(r);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
  free(x);
  free(y);
  free(y2);
  free(dy);
  free(dx);
}
END_TEST

/* ---- update, all_finite, accumulate ---------------------------------------------------------- */

/* Host floats into a new device buffer, and back: update and all_finite work on device
 * memory (the arenas), as the trainer calls them. */
static float *to_device(device_harness *h, const float *host, int64_t n) {
  void *p = NULL;
  ck_assert_int_eq(h->dv->alloc(h->dev, (size_t)n * sizeof(float), &p), CNNB_OK);
  ck_assert_int_eq(h->dv->copy_to_device(h->dev, p, host, (size_t)n * sizeof(float)), CNNB_OK);
  return p;
}

static void to_host(device_harness *h, float *host, const float *dev, int64_t n) {
  ck_assert_int_eq(h->dv->copy_to_host(h->dev, host, dev, (size_t)n * sizeof(float)), CNNB_OK);
}

/* The update runs on the fp32 master weights in every precision: each one the device
 * accepts is checked. */
static void check_update(uint32_t precision) {
  /* Two threads and a range not a multiple of anything: the split across a thread pool
   * (or a grid's tail). */
  device_harness h;
  ck_assert_int_eq(device_harness_load(&h), 0);
  cnnb_device_config cfg = {
      .struct_size = sizeof cfg, .num_threads = 2, .precision = precision, .training = 1};
  ck_assert_msg(h.dv->create(h.ctx, h.name, &cfg, &h.dev) == CNNB_OK, "create(%s): %s",
                test_precision_name(precision), cnnb_error_message(h.ctx));
  const double tol = tol_of(precision)->update;
  const int64_t n = 100003;
  for (uint32_t rule = CNNB_OPT_SGD; rule <= CNNB_OPT_ADAM; rule++)
    for (int variant = 0; variant < 2; variant++) {
      uint64_t seed = rule * 10 + variant;
      float *w = rand_buf(&seed, n, -1, 1), *gr = rand_buf(&seed, n, -3, 3);
      float *s1 = rand_buf(&seed, n, 0, 1), *s2 = rand_buf(&seed, n, 0, 1);
      float *w2 = malloc(n * sizeof *w2), *s1b = malloc(n * sizeof *s1b),
            *s2b = malloc(n * sizeof *s2b);
      memcpy(w2, w, n * sizeof *w);
      memcpy(s1b, s1, n * sizeof *s1);
      memcpy(s2b, s2, n * sizeof *s2);
      float *dw = to_device(&h, w, n), *dg = to_device(&h, gr, n), *ds1 = to_device(&h, s1, n),
            *ds2 = to_device(&h, s2, n);
      cnnb_update u = {.struct_size = sizeof u,
                       .rule = rule,
                       .count = n,
                       .params = dw,
                       .grads = dg,
                       .slot1 = ds1,
                       .slot2 = ds2,
                       .learning_rate = 0.05f,
                       .weight_decay = variant ? 1e-3f : 0.0f,
                       .grad_scale = variant ? 0.5f : 1.0f,
                       .clip = variant ? 1.0f : 0.0f,
                       .momentum = 0.9f,
                       .rho = 0.9f,
                       .epsilon = 1e-3f,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f,
                       .nesterov = variant,
                       .step = 3 + variant};
      ck_assert_int_eq(h.dv->update(h.dev, &u), CNNB_OK);
      to_host(&h, w, dw, n);
      to_host(&h, s1, ds1, n);
      to_host(&h, s2, ds2, n);
      cnnb_update ref = u;
      ref.params = w2;
      ref.grads = gr;
      ref.slot1 = s1b;
      ref.slot2 = s2b;
      cnnb_update_reference(&ref);
      char what[96];
      snprintf(what, sizeof what, "update rule %u variant %d (%s): params", rule, variant,
               test_precision_name(precision));
      expect_close(what, w, w2, n, tol);
      if (rule != CNNB_OPT_SGD) expect_close("update: slot1", s1, s1b, n, tol);
      if (rule >= CNNB_OPT_RMSPROP) expect_close("update: slot2", s2, s2b, n, tol);
      h.dv->free(h.dev, dw), h.dv->free(h.dev, dg), h.dv->free(h.dev, ds1), h.dv->free(h.dev, ds2);
      free(w), free(gr), free(s1), free(s2), free(w2), free(s1b), free(s2b);
    }
  cnnb_update bad = {.struct_size = sizeof bad, .rule = 99, .count = 0};
  ck_assert_int_eq(h.dv->update(h.dev, &bad), CNNB_EINVAL);
  device_harness_close(&h);
}

START_TEST(test_update_matches_reference) {
  for (uint32_t p = CNNB_PRECISION_FP32; p <= CNNB_PRECISION_FP16; p++)
    if (device_harness_can(p, NULL)) check_update(p);
}
END_TEST

START_TEST(test_all_finite) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  if (!h.dv->all_finite) {
    printf("test_all_finite: device '%s' has no all_finite (optional): nothing to check\n", h.name);
    device_harness_close(&h);
    return;
  }
  float v[257];
  for (int i = 0; i < 257; i++) v[i] = (float)i - 100.0f;
  float *dv = to_device(&h, v, 257);
  int32_t finite = -1;
  ck_assert_int_eq(h.dv->all_finite(h.dev, dv, 257, &finite), CNNB_OK);
  ck_assert_int_eq(finite, 1);
  v[200] = INFINITY;
  ck_assert_int_eq(h.dv->copy_to_device(h.dev, dv, v, sizeof v), CNNB_OK);
  ck_assert_int_eq(h.dv->all_finite(h.dev, dv, 257, &finite), CNNB_OK);
  ck_assert_int_eq(finite, 0);
  ck_assert_int_eq(h.dv->all_finite(h.dev, dv, 200, &finite), CNNB_OK); /* range excludes it */
  ck_assert_int_eq(finite, 1);
  v[3] = NAN;
  ck_assert_int_eq(h.dv->copy_to_device(h.dev, dv, v, sizeof v), CNNB_OK);
  ck_assert_int_eq(h.dv->all_finite(h.dev, dv, 100, &finite), CNNB_OK);
  ck_assert_int_eq(finite, 0);
  v[3] = -INFINITY;
  ck_assert_int_eq(h.dv->copy_to_device(h.dev, dv, v, sizeof v), CNNB_OK);
  ck_assert_int_eq(h.dv->all_finite(h.dev, dv, 4, &finite), CNNB_OK);
  ck_assert_int_eq(finite, 0);
  h.dv->free(h.dev, dv);
  device_harness_close(&h);
}
END_TEST

/* ---- precision, description, layouts --------------------------------------------------------- */

/* Each precision the device refused when the suite started is refused again, as device.h
 * says (CNNB_EUNSUPPORTED, no device, a message naming what it can do: fp32 at least,
 * which it accepted); a precision no device has is refused; describe(), where the
 * device has it, says something. */
START_TEST(test_precision_refusals_and_description) {
  device_harness h;
  ck_assert_int_eq(device_harness_load(&h), 0);
  cnnb_device_config cfg = {.struct_size = sizeof cfg, .num_threads = 1, .training = 1};
  for (uint32_t p = CNNB_PRECISION_FP32; p <= CNNB_PRECISION_FP16; p++) {
    if (device_harness_can(p, NULL)) continue;
    void *dev = NULL;
    cfg.precision = p;
    ck_assert_int_eq(h.dv->create(h.ctx, h.name, &cfg, &dev), CNNB_EUNSUPPORTED);
    ck_assert_ptr_null(dev);
    ck_assert_msg(strstr(cnnb_error_message(h.ctx), test_precision_name(p)) &&
                      strstr(cnnb_error_message(h.ctx), "fp32"),
                  "refusing %s: the message names neither it and fp32: %s", test_precision_name(p),
                  cnnb_error_message(h.ctx));
    cnnb_clear_error(h.ctx);
  }
  void *dev = NULL;
  cfg.precision = 99;
  ck_assert_int_ne(h.dv->create(h.ctx, h.name, &cfg, &dev), CNNB_OK);
  ck_assert_ptr_null(dev);
  ck_assert_msg(cnnb_error_message(h.ctx)[0] != '\0', "precision 99 refused without a message");
  cnnb_clear_error(h.ctx);
  cfg.precision = CNNB_PRECISION_FP32;
  ck_assert_msg(h.dv->create(h.ctx, h.name, &cfg, &dev) == CNNB_OK, "%s",
                cnnb_error_message(h.ctx));
  if (h.dv->describe) {
    const char *desc = h.dv->describe(dev);
    ck_assert_msg(desc && desc[0], "describe() gave %s", desc ? "\"\"" : "NULL");
  }
  h.dv->destroy(dev);
  device_harness_close(&h);
}
END_TEST

START_TEST(test_tensor_bytes_and_host_roundtrip) {
  device_harness h;
  if (open_device(&h, CNNB_PRECISION_FP32, 1)) return;
  cnnb_graph *g = cnnb_graph_create(2, 3, 7, 7, 10);
  cnnb_tensor c = cnnb_conv2d(g, "conv", cnnb_graph_input(g),
                              CNNB_CONV2D(.filters = 5, .kernel_h = 3, .kernel_w = 3));
  ck_assert_int_eq(cnnb_graph_status(g), CNNB_OK);
  size_t bytes = 0;
  ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, c, &bytes), CNNB_OK);
  /* A device may pad (oneDNN's blocked layouts take 5 channels as 16), never shrink. */
  ck_assert_uint_ge(bytes, 2 * 5 * 7 * 7 * sizeof(float));
  void *buf = NULL;
  ck_assert_int_eq(h.dv->alloc(h.dev, bytes, &buf), CNNB_OK);
  float in[2 * 5 * 7 * 7], out[2 * 5 * 7 * 7];
  for (int i = 0; i < 2 * 5 * 7 * 7; i++) in[i] = (float)i * 0.25f - 3.0f;
  ck_assert_int_eq(h.dv->tensor_from_host(h.dev, g, c, buf, in), CNNB_OK);
  ck_assert_int_eq(h.dv->tensor_to_host(h.dev, g, c, buf, out), CNNB_OK);
  ck_assert(memcmp(in, out, sizeof in) == 0);
  ck_assert_int_eq(h.dv->tensor_bytes(h.dev, g, 99, &bytes), CNNB_EINVAL);
  h.dv->free(h.dev, buf);
  cnnb_graph_destroy(g);
  device_harness_close(&h);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("device_ops");
  TCase *tc = tcase_create("ops");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_conv_fixed_cases);
  tcase_add_test(tc, test_conv_random_shapes);
  tcase_add_loop_test(tc, test_conv_low_precision, 0, 2);
  tcase_add_test(tc, test_dense);
  tcase_add_test(tc, test_relu_and_reshape);
  tcase_add_test(tc, test_relu6);
  tcase_add_loop_test(tc, test_relu6_low_precision, 0, 2);
  tcase_add_loop_test(tc, test_activations, 0, NUM_ACTIVATIONS);
  tcase_add_test(tc, test_multiply);
  tcase_add_test(tc, test_layer_norm);
  tcase_add_test(tc, test_channel_scale);
  tcase_add_test(tc, test_slice_channels);
  tcase_add_test(tc, test_channel_shuffle);
  tcase_add_test(tc, test_pad_channels);
  tcase_add_loop_test(tc, test_pad_channels_low_precision, 0, 2);
  tcase_add_test(tc, test_pad_spatial);
  tcase_add_loop_test(tc, test_pad_spatial_low_precision, 0, 2);
  tcase_add_test(tc, test_unknown_op_refused);
  tcase_add_test(tc, test_no_input_gradient);
  tcase_add_test(tc, test_batch_norm);
  tcase_add_test(tc, test_pools);
  tcase_add_test(tc, test_lrn);
  tcase_add_test(tc, test_concat_and_add);
  tcase_add_test(tc, test_add_fused_relu);
  tcase_add_test(tc, test_softmax_xent);
  tcase_add_test(tc, test_softmax_xent_label_smoothing);
  tcase_add_test(tc, test_dropout);
  tcase_add_test(tc, test_stochastic_depth);
  tcase_add_test(tc, test_update_matches_reference);
  tcase_add_test(tc, test_all_finite);
  tcase_add_test(tc, test_precision_refusals_and_description);
  tcase_add_test(tc, test_tensor_bytes_and_host_roundtrip);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) { return device_harness_run(argc, argv, "test_device_ops", suite); }

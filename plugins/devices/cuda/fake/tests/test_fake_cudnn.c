/* test_fake_cudnn.c — the checking fake's cuDNN and cuBLAS (../fake_cudnn*.cpp,
 * ../fake_cublas.cpp), driven directly through their C APIs on the fake runtime:
 *  - convolutions forward, backward data and backward filter against the reference ops
 *    (tests/support/ref_ops.c) on odd shapes, strides, dilation, groups (depthwise too),
 *    with every algorithm the heuristics list and its own workspace; NHWC fp16 / bf16
 *    with KRSC filters under tensor-core math; beta = 1 accumulating; true convolution;
 *    a captured call replayed after its descriptors were destroyed;
 *  - the heuristics and cudnnFind*AlgorithmEx: workspace sizes agree with the size
 *    getters, timing skips what the workspace cannot hold and sorts by time;
 *  - batch norm training forward / backward against the reference, the running
 *    averages, the Ex functions' persistent NHWC fp16 path with the ReLU inside and the
 *    configurations they refuse; pooling; cudnnAddTensor / cudnnScaleTensor;
 *  - cublasGemmEx with every transpose pair, leading dimensions, alpha / beta, fp32 /
 *    fp16 / bf16;
 *  - that each check fires: a workspace one byte short, misaligned pointers (fp32, and
 *    fp16 under tensor-core math), a tensor descriptor larger than its buffer, a
 *    descriptor used after destroy, a destroyed stream, a short reserve space, a reserve
 *    space no forward wrote, y overwritten between a fused batch norm's forward and
 *    backward, a GEMM matrix past its allocation, a handle used with another device
 *    current, alpha in device memory. Each runs in a forked child that must die of
 *    SIGABRT with the fake's message naming the call. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <cublas_v2.h>

#include "ref_ops.h"

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rng_uniform(float lo, float hi) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
  return lo + (hi - lo) * (float)((double)(r >> 40) / 16777216.0);
}
static float *random_floats(size_t n) {
  float *v = malloc(n * sizeof *v);
  ck_assert_ptr_nonnull(v);
  for (size_t i = 0; i < n; i++) v[i] = rng_uniform(-1.0f, 1.0f);
  return v;
}

#define DNN(call)                                                         \
  do {                                                                    \
    cudnnStatus_t st_ = (call);                                           \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                    \
      char msg_[512];                                                     \
      cudnnGetLastErrorString(msg_, sizeof msg_);                         \
      ck_abort_msg("%s: %s (%s)", #call, cudnnGetErrorString(st_), msg_); \
    }                                                                     \
  } while (0)
#define CUDA(call) ck_assert_int_eq((call), cudaSuccess)

static void *dev(size_t bytes) {
  void *p = NULL;
  CUDA(cudaMalloc(&p, bytes));
  return p;
}
static void up(void *d, const void *h, size_t bytes) {
  CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
static void down(void *h, const void *d, size_t bytes) {
  CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

/* fp16 / bf16 with round to nearest even (the test's own, independent of the fake's). */
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) { /* subnormal: round(|f| / 2^-24) */
    float q = fabsf(f) * 16777216.0f;
    float r = nearbyintf(q); /* the default rounding mode is to nearest even */
    return (uint16_t)(sign | (uint32_t)r);
  }
  uint32_t h = (a >> 13) - (112u << 10), rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}
static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  uint32_t bits = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
  memcpy(&f, &bits, 4);
  return f;
}
static uint16_t f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static size_t elt_size(cudnnDataType_t t) { return t == CUDNN_DATA_FLOAT ? 4 : 2; }
static float round_to(cudnnDataType_t t, float v) {
  return t == CUDNN_DATA_HALF ? h2f(f2h(v)) : t == CUDNN_DATA_BFLOAT16 ? bf2f(f2bf(v)) : v;
}
static void put(cudnnDataType_t t, void *buf, size_t i, float v) {
  if (t == CUDNN_DATA_FLOAT) ((float *)buf)[i] = v;
  else ((uint16_t *)buf)[i] = t == CUDNN_DATA_HALF ? f2h(v) : f2bf(v);
}
static float get(cudnnDataType_t t, const void *buf, size_t i) {
  if (t == CUDNN_DATA_FLOAT) return ((const float *)buf)[i];
  uint16_t u = ((const uint16_t *)buf)[i];
  return t == CUDNN_DATA_HALF ? h2f(u) : bf2f(u);
}

/* Offset of logical (n, c, h, w) in a packed NCHW or NHWC buffer of dims [N, C, H, W]. */
static size_t offset_of(cudnnTensorFormat_t f, int C, int H, int W, int n, int c, int h, int w) {
  if (f == CUDNN_TENSOR_NHWC) return (((size_t)n * H + h) * W + w) * C + c;
  return (((size_t)n * C + c) * H + h) * W + w;
}

/* A logical NCHW fp32 tensor on the device in type t and format f (also for filters: K,
 * C, R, S with NHWC meaning KRSC). */
static void *to_device(const float *nchw, cnnb_shape s, cudnnDataType_t t, cudnnTensorFormat_t f) {
  size_t count = (size_t)cnnb_shape_count(s), bytes = count * elt_size(t);
  void *host = malloc(bytes), *d = dev(bytes);
  size_t i = 0;
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++)
          put(t, host, offset_of(f, s.c, s.h, s.w, n, c, h, w), nchw[i++]);
  up(d, host, bytes);
  free(host);
  return d;
}
static float *from_device(const void *d, cnnb_shape s, cudnnDataType_t t, cudnnTensorFormat_t f) {
  size_t count = (size_t)cnnb_shape_count(s), bytes = count * elt_size(t);
  void *host = malloc(bytes);
  float *out = malloc(count * sizeof *out);
  down(host, d, bytes);
  size_t i = 0;
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++)
          out[i++] = get(t, host, offset_of(f, s.c, s.h, s.w, n, c, h, w));
  free(host);
  return out;
}

static void expect_close(const float *got, const float *want, size_t n, double tol,
                         const char *what) {
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs(want[i])),
                  "%s[%zu]: %.7g, expected %.7g (tolerance %g)", what, i, (double)got[i],
                  (double)want[i], tol);
}

static cudnnTensorDescriptor_t tensor_desc(cnnb_shape s, cudnnDataType_t t, cudnnTensorFormat_t f) {
  cudnnTensorDescriptor_t d;
  DNN(cudnnCreateTensorDescriptor(&d));
  DNN(cudnnSetTensor4dDescriptor(d, f, t, s.n, s.c, s.h, s.w));
  return d;
}

/* ---- convolutions ------------------------------------------------------------------- */

typedef struct conv_case {
  int n, c, h, w, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
} conv_case;

static const conv_case CASES[] = {
    {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},  /* 3x3 same, odd sizes */
    {1, 4, 9, 8, 6, 3, 2, 0, 1, 2, 1, 1, 2, 2},  /* groups, stride, dilation, uneven */
    {2, 6, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 6},  /* depthwise */
    {2, 8, 4, 4, 16, 1, 1, 0, 0, 1, 1, 1, 1, 1}, /* pointwise */
    {1, 5, 11, 7, 3, 5, 3, 2, 1, 2, 3, 2, 1, 1}, /* stride 2 / 3, dilation 2 */
    {3, 2, 6, 6, 4, 2, 2, 0, 0, 2, 2, 1, 1, 2},  /* 2x2 stride 2, grouped */
};

typedef struct conv_setup {
  cnnb_shape xs, ws, ys;
  ref_window win;
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
} conv_setup;

static void conv_setup_make(conv_setup *s, const conv_case *cc, cudnnDataType_t t,
                            cudnnTensorFormat_t f, cudnnMathType_t math) {
  s->xs = (cnnb_shape){cc->n, cc->c, cc->h, cc->w};
  s->ws = (cnnb_shape){cc->k, cc->c / cc->groups, cc->r, cc->s};
  s->win = (ref_window){cc->r,     cc->s,     cc->stride_h, cc->stride_w, cc->pad_h, cc->pad_h,
                        cc->pad_w, cc->pad_w, cc->dil_h,    cc->dil_w,    cc->groups};
  s->x = tensor_desc(s->xs, t, f);
  DNN(cudnnCreateFilterDescriptor(&s->w));
  DNN(cudnnSetFilter4dDescriptor(s->w, t, f, s->ws.n, s->ws.c, s->ws.h, s->ws.w));
  DNN(cudnnCreateConvolutionDescriptor(&s->conv));
  DNN(cudnnSetConvolution2dDescriptor(s->conv, cc->pad_h, cc->pad_w, cc->stride_h, cc->stride_w,
                                      cc->dil_h, cc->dil_w, CUDNN_CROSS_CORRELATION,
                                      CUDNN_DATA_FLOAT));
  DNN(cudnnSetConvolutionGroupCount(s->conv, cc->groups));
  DNN(cudnnSetConvolutionMathType(s->conv, math));
  int n, c, h, w;
  DNN(cudnnGetConvolution2dForwardOutputDim(s->conv, s->x, s->w, &n, &c, &h, &w));
  s->ys = (cnnb_shape){n, c, h, w};
  ck_assert_int_eq(c, cc->k);
  ck_assert_int_eq(h, (cc->h + 2 * cc->pad_h - ((cc->r - 1) * cc->dil_h + 1)) / cc->stride_h + 1);
  ck_assert_int_eq(w, (cc->w + 2 * cc->pad_w - ((cc->s - 1) * cc->dil_w + 1)) / cc->stride_w + 1);
  s->y = tensor_desc(s->ys, t, f);
}

static void conv_setup_free(conv_setup *s) {
  DNN(cudnnDestroyTensorDescriptor(s->x));
  DNN(cudnnDestroyTensorDescriptor(s->y));
  DNN(cudnnDestroyFilterDescriptor(s->w));
  DNN(cudnnDestroyConvolutionDescriptor(s->conv));
}

/* Every direction with every algorithm the heuristics list as supported, against the
 * reference on the inputs rounded to t. */
static void check_conv(cudnnHandle_t h, const conv_case *cc, cudnnDataType_t t,
                       cudnnTensorFormat_t f, cudnnMathType_t math, double tol) {
  conv_setup s;
  conv_setup_make(&s, cc, t, f, math);
  const size_t xn = (size_t)cnnb_shape_count(s.xs), wn = (size_t)cnnb_shape_count(s.ws);
  const size_t yn = (size_t)cnnb_shape_count(s.ys);
  float *x = random_floats(xn), *w = random_floats(wn), *dy = random_floats(yn);
  for (size_t i = 0; i < xn; i++) x[i] = round_to(t, x[i]);
  for (size_t i = 0; i < wn; i++) w[i] = round_to(t, w[i]);
  for (size_t i = 0; i < yn; i++) dy[i] = round_to(t, dy[i]);
  float *y_ref = malloc(yn * 4), *dx_ref = malloc(xn * 4), *dw_ref = malloc(wn * 4);
  ref_conv2d_forward(x, s.xs, w, NULL, &s.win, y_ref, s.ys);
  ref_conv2d_backward_data(dy, s.ys, w, &s.win, dx_ref, s.xs);
  ref_conv2d_backward_weights(x, s.xs, dy, s.ys, &s.win, dw_ref, NULL);
  void *dx_ = to_device(x, s.xs, t, f), *dw_ = to_device(w, s.ws, t, f);
  void *ddy = to_device(dy, s.ys, t, f);
  void *dy_out = dev(yn * elt_size(t)), *dx_out = dev(xn * elt_size(t)),
       *dw_out = dev(wn * elt_size(t));
  const float one = 1.0f, zero = 0.0f;
  int tried[3] = {0, 0, 0};

  cudnnConvolutionFwdAlgoPerf_t fp[16];
  int count = 0;
  DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 16, &count, fp));
  for (int i = 0; i < count; i++) {
    if (fp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 1;
    DNN(cudnnSetConvolutionMathType(s.conv, fp[i].mathType));
    DNN(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y, fp[i].algo, &bytes));
    ck_assert_uint_eq(bytes, fp[i].memory);
    void *ws = bytes ? dev(bytes) : NULL;
    DNN(cudnnConvolutionForward(h, &one, s.x, dx_, s.w, dw_, s.conv, fp[i].algo, ws, bytes, &zero,
                                s.y, dy_out));
    float *got = from_device(dy_out, s.ys, t, f);
    expect_close(got, y_ref, yn, tol, "forward y");
    free(got);
    if (ws) CUDA(cudaFree(ws));
    tried[0]++;
  }
  cudnnConvolutionBwdDataAlgoPerf_t dp[16];
  DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s.w, s.y, s.conv, s.x, 16, &count, dp));
  for (int i = 0; i < count; i++) {
    if (dp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 1;
    DNN(cudnnSetConvolutionMathType(s.conv, dp[i].mathType));
    DNN(cudnnGetConvolutionBackwardDataWorkspaceSize(h, s.w, s.y, s.conv, s.x, dp[i].algo, &bytes));
    ck_assert_uint_eq(bytes, dp[i].memory);
    void *ws = bytes ? dev(bytes) : NULL;
    DNN(cudnnConvolutionBackwardData(h, &one, s.w, dw_, s.y, ddy, s.conv, dp[i].algo, ws, bytes,
                                     &zero, s.x, dx_out));
    float *got = from_device(dx_out, s.xs, t, f);
    expect_close(got, dx_ref, xn, tol, "backward data dx");
    free(got);
    if (ws) CUDA(cudaFree(ws));
    tried[1]++;
  }
  cudnnConvolutionBwdFilterAlgoPerf_t wp[16];
  DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s.x, s.y, s.conv, s.w, 16, &count, wp));
  for (int i = 0; i < count; i++) {
    if (wp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 1;
    DNN(cudnnSetConvolutionMathType(s.conv, wp[i].mathType));
    DNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, s.x, s.y, s.conv, s.w, wp[i].algo,
                                                       &bytes));
    ck_assert_uint_eq(bytes, wp[i].memory);
    void *ws = bytes ? dev(bytes) : NULL;
    DNN(cudnnConvolutionBackwardFilter(h, &one, s.x, dx_, s.y, ddy, s.conv, wp[i].algo, ws, bytes,
                                       &zero, s.w, dw_out));
    float *got = from_device(dw_out, s.ws, t, f);
    /* the filter gradient sums over every output: a wider tolerance in half types */
    expect_close(got, dw_ref, wn, t == CUDNN_DATA_FLOAT ? tol : 4 * tol, "backward filter dw");
    free(got);
    if (ws) CUDA(cudaFree(ws));
    tried[2]++;
  }
  ck_assert_msg(tried[0] >= 3 && tried[1] >= 2 && tried[2] >= 3, "algorithms tried: %d, %d, %d",
                tried[0], tried[1], tried[2]);
  void *bufs[] = {dx_, dw_, ddy, dy_out, dx_out, dw_out};
  for (size_t i = 0; i < 6; i++) CUDA(cudaFree(bufs[i]));
  free(x);
  free(w);
  free(dy);
  free(y_ref);
  free(dx_ref);
  free(dw_ref);
  conv_setup_free(&s);
}

START_TEST(conv_fp32_nchw_matches_reference) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
    check_conv(h, &CASES[i], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH, 1e-5);
  DNN(cudnnDestroy(h));
}
END_TEST

START_TEST(conv_fp32_nhwc_matches_reference) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
    check_conv(h, &CASES[i], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, CUDNN_DEFAULT_MATH, 1e-5);
  DNN(cudnnDestroy(h));
}
END_TEST

START_TEST(conv_half_nhwc_matches_reference) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    check_conv(h, &CASES[i], CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 2e-3);
    check_conv(h, &CASES[i], CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH, 1e-2);
  }
  DNN(cudnnDestroy(h));
}
END_TEST

/* beta = 1 adds to what the output holds, in every direction; alpha scales. */
START_TEST(conv_beta_one_accumulates) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  conv_setup s;
  conv_setup_make(&s, &CASES[1], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
  const size_t xn = (size_t)cnnb_shape_count(s.xs), wn = (size_t)cnnb_shape_count(s.ws);
  const size_t yn = (size_t)cnnb_shape_count(s.ys);
  float *x = random_floats(xn), *w = random_floats(wn), *dy = random_floats(yn);
  float *y0 = random_floats(yn), *dx0 = random_floats(xn), *dw0 = random_floats(wn);
  float *y_ref = malloc(yn * 4), *dx_ref = malloc(xn * 4), *dw_ref = malloc(wn * 4);
  ref_conv2d_forward(x, s.xs, w, NULL, &s.win, y_ref, s.ys);
  ref_conv2d_backward_data(dy, s.ys, w, &s.win, dx_ref, s.xs);
  ref_conv2d_backward_weights(x, s.xs, dy, s.ys, &s.win, dw_ref, NULL);
  for (size_t i = 0; i < yn; i++) y_ref[i] = 0.5f * y_ref[i] + y0[i];
  for (size_t i = 0; i < xn; i++) dx_ref[i] = 0.5f * dx_ref[i] + dx0[i];
  for (size_t i = 0; i < wn; i++) dw_ref[i] = 0.5f * dw_ref[i] + dw0[i];
  void *dx_ = to_device(x, s.xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *dw_ = to_device(w, s.ws, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *ddy = to_device(dy, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *y = to_device(y0, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *dxo = to_device(dx0, s.xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *dwo = to_device(dw0, s.ws, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  const float half_ = 0.5f, one = 1.0f;
  DNN(cudnnConvolutionForward(h, &half_, s.x, dx_, s.w, dw_, s.conv,
                              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &one, s.y, y));
  DNN(cudnnConvolutionBackwardData(h, &half_, s.w, dw_, s.y, ddy, s.conv,
                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, NULL, 0, &one, s.x, dxo));
  DNN(cudnnConvolutionBackwardFilter(h, &half_, s.x, dx_, s.y, ddy, s.conv,
                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, NULL, 0, &one, s.w, dwo));
  float *got = from_device(y, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  expect_close(got, y_ref, yn, 1e-5, "y");
  free(got);
  got = from_device(dxo, s.xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  expect_close(got, dx_ref, xn, 1e-5, "dx");
  free(got);
  got = from_device(dwo, s.ws, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  expect_close(got, dw_ref, wn, 1e-5, "dw");
  free(got);
  void *bufs[] = {dx_, dw_, ddy, y, dxo, dwo};
  for (size_t i = 0; i < 6; i++) CUDA(cudaFree(bufs[i]));
  float *v[] = {x, w, dy, y0, dx0, dw0, y_ref, dx_ref, dw_ref};
  for (size_t i = 0; i < 9; i++) free(v[i]);
  conv_setup_free(&s);
  DNN(cudnnDestroy(h));
}
END_TEST

/* CUDNN_CONVOLUTION is the cross-correlation with the filter turned by 180 degrees. */
START_TEST(conv_true_convolution_flips_the_filter) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  conv_setup s;
  conv_setup_make(&s, &CASES[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
  const conv_case *cc = &CASES[0];
  DNN(cudnnSetConvolution2dDescriptor(s.conv, cc->pad_h, cc->pad_w, 1, 1, 1, 1, CUDNN_CONVOLUTION,
                                      CUDNN_DATA_FLOAT));
  const size_t xn = (size_t)cnnb_shape_count(s.xs), wn = (size_t)cnnb_shape_count(s.ws);
  const size_t yn = (size_t)cnnb_shape_count(s.ys);
  float *x = random_floats(xn), *w = random_floats(wn), *flipped = malloc(wn * 4);
  const int rs = s.ws.h * s.ws.w;
  for (size_t f = 0; f < wn / (size_t)rs; f++)
    for (int i = 0; i < rs; i++) flipped[f * rs + i] = w[f * rs + (rs - 1 - i)];
  float *y_ref = malloc(yn * 4);
  ref_conv2d_forward(x, s.xs, flipped, NULL, &s.win, y_ref, s.ys);
  void *dx_ = to_device(x, s.xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *dw_ = to_device(w, s.ws, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW), *y = dev(yn * 4);
  const float one = 1.0f, zero = 0.0f;
  DNN(cudnnConvolutionForward(h, &one, s.x, dx_, s.w, dw_, s.conv,
                              CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0, &zero, s.y, y));
  float *got = from_device(y, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  expect_close(got, y_ref, yn, 1e-5, "y");
  free(got);
  CUDA(cudaFree(dx_));
  CUDA(cudaFree(dw_));
  CUDA(cudaFree(y));
  free(x);
  free(w);
  free(flipped);
  free(y_ref);
  conv_setup_free(&s);
  DNN(cudnnDestroy(h));
}
END_TEST

/* Under stream capture the call is recorded with its descriptors' contents: replayed
 * twice after every descriptor was destroyed, with beta = 1, y holds y0 + 2 conv. */
START_TEST(conv_captured_replays_after_descriptors_are_gone) {
  cudnnHandle_t h;
  cudaStream_t stream;
  CUDA(cudaStreamCreate(&stream));
  DNN(cudnnCreate(&h));
  DNN(cudnnSetStream(h, stream));
  conv_setup s;
  conv_setup_make(&s, &CASES[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
  const size_t xn = (size_t)cnnb_shape_count(s.xs), wn = (size_t)cnnb_shape_count(s.ws);
  const size_t yn = (size_t)cnnb_shape_count(s.ys);
  float *x = random_floats(xn), *w = random_floats(wn), *y0 = random_floats(yn),
        *y_ref = malloc(yn * 4);
  ref_conv2d_forward(x, s.xs, w, NULL, &s.win, y_ref, s.ys);
  for (size_t i = 0; i < yn; i++) y_ref[i] = y0[i] + 2.0f * y_ref[i];
  void *dx_ = to_device(x, s.xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *dw_ = to_device(w, s.ws, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  void *y = to_device(y0, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  size_t bytes = 0;
  DNN(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y,
                                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &bytes));
  void *ws = dev(bytes);
  float alpha = 1.0f, beta = 1.0f;
  CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  DNN(cudnnConvolutionForward(h, &alpha, s.x, dx_, s.w, dw_, s.conv,
                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, bytes, &beta, s.y, y));
  cudaGraph_t graph;
  CUDA(cudaStreamEndCapture(stream, &graph));
  alpha = 100.0f; /* read at the call, not at the replay */
  conv_setup_free(&s);
  cudaGraphExec_t exec;
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CUDA(cudaGraphLaunch(exec, stream));
  CUDA(cudaGraphLaunch(exec, stream));
  CUDA(cudaStreamSynchronize(stream));
  float *got = from_device(y, s.ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  expect_close(got, y_ref, yn, 1e-5, "y");
  free(got);
  CUDA(cudaGraphExecDestroy(exec));
  CUDA(cudaGraphDestroy(graph));
  void *bufs[] = {dx_, dw_, y, ws};
  for (size_t i = 0; i < 4; i++) CUDA(cudaFree(bufs[i]));
  free(x);
  free(w);
  free(y0);
  free(y_ref);
  DNN(cudnnDestroy(h));
  CUDA(cudaStreamDestroy(stream));
}
END_TEST

/* Heuristics list some algorithms with a workspace; timing without one skips them
 * (ALLOC_FAILED), sorts the rest by time, and overwrites y. */
START_TEST(find_respects_the_workspace_and_sorts) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  conv_setup s;
  conv_setup_make(&s, &CASES[0], CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_OP_MATH);
  const size_t xn = (size_t)cnnb_shape_count(s.xs), wn = (size_t)cnnb_shape_count(s.ws);
  const size_t yn = (size_t)cnnb_shape_count(s.ys);
  void *x = dev(xn * 2), *w = dev(wn * 2), *y = dev(yn * 2);
  CUDA(cudaMemset(x, 0, xn * 2));
  CUDA(cudaMemset(w, 0, wn * 2));
  CUDA(cudaMemset(y, 0, yn * 2));
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int count = 0, with_workspace = 0, tensor_op = 0;
  DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, s.x, s.w, s.conv, s.y, 16, &count, perf));
  ck_assert_int_gt(count, 4);
  size_t largest = 0;
  for (int i = 0; i < count; i++)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      with_workspace += perf[i].memory > 0;
      tensor_op += perf[i].mathType == CUDNN_TENSOR_OP_MATH;
      if (perf[i].memory > largest) largest = perf[i].memory;
    }
  ck_assert_int_gt(with_workspace, 1);
  ck_assert_int_gt(tensor_op, 1);
  ck_assert_int_eq(perf[0].status, CUDNN_STATUS_SUCCESS);
  ck_assert_uint_gt(perf[0].memory, 0); /* the heuristics' first choice needs workspace */

  DNN(cudnnFindConvolutionForwardAlgorithmEx(h, s.x, x, s.w, w, s.conv, s.y, y, 16, &count, perf,
                                             NULL, 0));
  int ok = 0, skipped = 0;
  for (int i = 0; i < count; i++) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      ck_assert_msg(ok == i, "a success after a failure at %d", i);
      ck_assert_uint_eq(perf[i].memory, 0);
      if (i > 0) ck_assert(perf[i].time >= perf[i - 1].time);
      ok++;
    } else if (perf[i].memory > 0) {
      skipped++;
    }
  }
  ck_assert_int_gt(ok, 0);
  ck_assert_int_gt(skipped, 0);
  uint16_t y0;
  down(&y0, y, 2);
  ck_assert(isnan(h2f(y0)));

  void *ws = dev(largest);
  DNN(cudnnFindConvolutionForwardAlgorithmEx(h, s.x, x, s.w, w, s.conv, s.y, y, 16, &count, perf,
                                             ws, largest));
  ck_assert_int_eq(perf[0].status, CUDNN_STATUS_SUCCESS);
  ck_assert_uint_gt(perf[0].memory, 0); /* with room, a workspace algorithm is fastest */
  /* The size follows the math type: tensor-core math asks for more. */
  size_t tc = 0, plain = 0;
  DNN(cudnnSetConvolutionMathType(s.conv, CUDNN_TENSOR_OP_MATH));
  DNN(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y,
                                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &tc));
  DNN(cudnnSetConvolutionMathType(s.conv, CUDNN_DEFAULT_MATH));
  DNN(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y,
                                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &plain));
  ck_assert_uint_gt(tc, plain);
  /* An algorithm the problem cannot use: NOT_SUPPORTED, as cuDNN. */
  size_t bytes = 0;
  ck_assert_int_eq(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_FFT, &bytes),
                   CUDNN_STATUS_NOT_SUPPORTED);
  char msg[256];
  cudnnGetLastErrorString(msg, sizeof msg);
  ck_assert_ptr_nonnull(strstr(msg, "cudnnGetConvolutionForwardWorkspaceSize"));
  void *bufs[] = {x, w, y, ws};
  for (size_t i = 0; i < 4; i++) CUDA(cudaFree(bufs[i]));
  conv_setup_free(&s);
  DNN(cudnnDestroy(h));
}
END_TEST

START_TEST(conv_refuses_shapes_that_disagree) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  conv_setup s;
  conv_setup_make(&s, &CASES[0], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, CUDNN_FMA_MATH);
  cudnnTensorDescriptor_t wrong = tensor_desc((cnnb_shape){s.ys.n, s.ys.c, s.ys.h + 1, s.ys.w},
                                              CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  size_t bytes;
  ck_assert_int_eq(cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, wrong,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &bytes),
                   CUDNN_STATUS_BAD_PARAM);
  DNN(cudnnSetConvolutionGroupCount(s.conv, 2)); /* 3 channels, 1 per group: 2 do not fit */
  int n, c, hh, w;
  ck_assert_int_eq(cudnnGetConvolution2dForwardOutputDim(s.conv, s.x, s.w, &n, &c, &hh, &w),
                   CUDNN_STATUS_BAD_PARAM);
  DNN(cudnnDestroyTensorDescriptor(wrong));
  conv_setup_free(&s);
  DNN(cudnnDestroy(h));
}
END_TEST

/* ---- batch norm --------------------------------------------------------------------- */

START_TEST(batch_norm_training_matches_reference) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  const cnnb_shape xs = {3, 5, 4, 3};
  const size_t n = (size_t)cnnb_shape_count(xs), C = (size_t)xs.c;
  const double m = (double)xs.n * xs.h * xs.w, eps = 1e-3, factor = 0.25;
  cudnnTensorDescriptor_t xd = tensor_desc(xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW), bd;
  DNN(cudnnCreateTensorDescriptor(&bd));
  DNN(cudnnDeriveBNTensorDescriptor(bd, xd, CUDNN_BATCHNORM_SPATIAL));
  float *x = random_floats(n), *dy = random_floats(n), *scale = random_floats(C),
        *bias = random_floats(C);
  float *rm0 = random_floats(C), *rv0 = random_floats(C);
  for (size_t i = 0; i < n; i++) x[i] = 2.0f * x[i] + 0.5f;
  for (size_t c = 0; c < C; c++) rv0[c] = fabsf(rv0[c]);
  float *y_ref = malloc(n * 4), *mean = malloc(C * 4), *var = malloc(C * 4);
  float *dx_ref = malloc(n * 4), *ds_ref = malloc(C * 4), *db_ref = malloc(C * 4);
  ref_batch_norm_forward_training(x, xs, scale, bias, (float)eps, y_ref, mean, var);
  ref_batch_norm_backward(x, xs, scale, dy, mean, var, (float)eps, dx_ref, ds_ref, db_ref);

  void *dx_ = dev(n * 4), *dy_ = dev(n * 4), *y = dev(n * 4), *dxo = dev(n * 4);
  float *params = dev(8 * C * 4); /* scale bias rmean rvar smean sinv dscale dbias */
  up(dx_, x, n * 4);
  up(dy_, dy, n * 4);
  up(params, scale, C * 4);
  up(params + C, bias, C * 4);
  up(params + 2 * C, rm0, C * 4);
  up(params + 3 * C, rv0, C * 4);
  const float one = 1.0f, zero = 0.0f;
  DNN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, dx_, xd,
                                             y, bd, params, params + C, factor, params + 2 * C,
                                             params + 3 * C, eps, params + 4 * C, params + 5 * C));
  DNN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd, dx_,
                                      xd, dy_, xd, dxo, bd, params, params + 6 * C, params + 7 * C,
                                      eps, params + 4 * C, params + 5 * C));
  float *got = malloc(n * 4), *p = malloc(8 * C * 4);
  down(got, y, n * 4);
  expect_close(got, y_ref, n, 1e-5, "y");
  down(got, dxo, n * 4);
  expect_close(got, dx_ref, n, 1e-4, "dx");
  down(p, params, 8 * C * 4);
  expect_close(p + 6 * C, ds_ref, C, 1e-4, "dscale");
  expect_close(p + 7 * C, db_ref, C, 1e-4, "dbias");
  for (size_t c = 0; c < C; c++) {
    const double rm = factor * mean[c] + (1 - factor) * rm0[c];
    const double rv = factor * var[c] * m / (m - 1) + (1 - factor) * rv0[c];
    ck_assert_msg(fabs(p[2 * C + c] - rm) < 1e-5, "running mean %zu", c);
    ck_assert_msg(fabs(p[3 * C + c] - rv) < 1e-5, "running variance %zu", c);
    ck_assert_msg(fabs(p[4 * C + c] - mean[c]) < 1e-5, "saved mean %zu", c);
    ck_assert_msg(fabs(p[5 * C + c] - 1.0 / sqrt(var[c] + eps)) < 1e-4, "saved inv std %zu", c);
  }
  /* Inference with the running statistics. */
  DNN(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, dx_, xd,
                                              y, bd, params, params + C, params + 2 * C,
                                              params + 3 * C, eps));
  float *inf_ref = malloc(n * 4);
  ref_batch_norm_forward_inference(x, xs, scale, bias, p + 2 * C, p + 3 * C, (float)eps, inf_ref);
  down(got, y, n * 4);
  expect_close(got, inf_ref, n, 1e-5, "inference y");
  /* Without saved statistics the backward recomputes them. */
  DNN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd, dx_,
                                      xd, dy_, xd, dxo, bd, params, params + 6 * C, params + 7 * C,
                                      eps, NULL, NULL));
  down(got, dxo, n * 4);
  expect_close(got, dx_ref, n, 1e-4, "dx (recomputed statistics)");
  free(inf_ref);
  void *bufs[] = {dx_, dy_, y, dxo, params};
  for (size_t i = 0; i < 5; i++) CUDA(cudaFree(bufs[i]));
  float *v[] = {x, dy, scale, bias, rm0, rv0, y_ref, mean, var, dx_ref, ds_ref, db_ref, got, p};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) free(v[i]);
  DNN(cudnnDestroyTensorDescriptor(xd));
  DNN(cudnnDestroyTensorDescriptor(bd));
  DNN(cudnnDestroy(h));
}
END_TEST

/* The persistent Ex path: NHWC fp16, C % 4 == 0, ReLU inside; refused elsewhere. */
START_TEST(batch_norm_ex_persistent_relu) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  const cnnb_shape xs = {2, 8, 3, 5};
  const size_t n = (size_t)cnnb_shape_count(xs), C = (size_t)xs.c;
  const double eps = 1e-3;
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  cudnnTensorDescriptor_t xd = tensor_desc(xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC), bd;
  DNN(cudnnCreateTensorDescriptor(&bd));
  DNN(cudnnDeriveBNTensorDescriptor(bd, xd, mode));
  cudnnActivationDescriptor_t relu;
  DNN(cudnnCreateActivationDescriptor(&relu));
  DNN(cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  size_t fwd_ws = 0, bwd_ws = 0, reserve = 0;
  DNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, mode, ops, xd, NULL, xd, bd, relu,
                                                               &fwd_ws));
  DNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, mode, ops, xd, xd, xd, NULL, xd, bd,
                                                        relu, &bwd_ws));
  DNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, ops, relu, xd, &reserve));
  ck_assert_uint_gt(fwd_ws, 0);
  ck_assert_uint_gt(bwd_ws, 0);
  ck_assert_uint_gt(reserve, 0);

  float *x = random_floats(n), *dy = random_floats(n), *scale = random_floats(C),
        *bias = random_floats(C);
  for (size_t i = 0; i < n; i++) {
    x[i] = round_to(CUDNN_DATA_HALF, x[i]);
    dy[i] = round_to(CUDNN_DATA_HALF, dy[i]);
  }
  float *y_ref = malloc(n * 4), *mean = malloc(C * 4), *var = malloc(C * 4);
  float *dx_ref = malloc(n * 4), *ds_ref = malloc(C * 4), *db_ref = malloc(C * 4);
  ref_batch_norm_forward_training(x, xs, scale, bias, (float)eps, y_ref, mean, var);
  for (size_t i = 0; i < n; i++) y_ref[i] = round_to(CUDNN_DATA_HALF, y_ref[i] > 0 ? y_ref[i] : 0);
  float *masked = malloc(n * 4);
  for (size_t i = 0; i < n; i++) masked[i] = y_ref[i] > 0 ? dy[i] : 0.0f;
  ref_batch_norm_backward(x, xs, scale, masked, mean, var, (float)eps, dx_ref, ds_ref, db_ref);

  void *dx_ = to_device(x, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  void *dy_ = to_device(dy, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  void *y = dev(n * 2), *dxo = dev(n * 2), *ws = dev(fwd_ws > bwd_ws ? fwd_ws : bwd_ws);
  void *rs = dev(reserve);
  float *params = dev(8 * C * 4);
  CUDA(cudaMemset(params, 0, 8 * C * 4));
  up(params, scale, C * 4);
  up(params + C, bias, C * 4);
  const float one = 1.0f, zero = 0.0f;
  DNN(cudnnBatchNormalizationForwardTrainingEx(h, mode, ops, &one, &zero, xd, dx_, NULL, NULL, xd,
                                               y, bd, params, params + C, 1.0, params + 2 * C,
                                               params + 3 * C, eps, params + 4 * C, params + 5 * C,
                                               relu, ws, fwd_ws, rs, reserve));
  DNN(cudnnBatchNormalizationBackwardEx(h, mode, ops, &one, &zero, &one, &zero, xd, dx_, xd, y, xd,
                                        dy_, NULL, NULL, xd, dxo, bd, params, params + C,
                                        params + 6 * C, params + 7 * C, eps, params + 4 * C,
                                        params + 5 * C, relu, ws, bwd_ws, rs, reserve));
  float *got = from_device(y, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  expect_close(got, y_ref, n, 2e-3, "y");
  free(got);
  got = from_device(dxo, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  expect_close(got, dx_ref, n, 5e-3, "dx");
  free(got);
  float *p = malloc(8 * C * 4);
  down(p, params, 8 * C * 4);
  expect_close(p + 6 * C, ds_ref, C, 1e-3, "dscale");
  expect_close(p + 7 * C, db_ref, C, 1e-3, "dbias");

  /* What the persistent path refuses: NCHW, channels not a multiple of 4, fp32. */
  cudnnTensorDescriptor_t nchw = tensor_desc(xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NCHW);
  cudnnTensorDescriptor_t six = tensor_desc((cnnb_shape){2, 6, 3, 5}, CUDNN_DATA_HALF,
                                            CUDNN_TENSOR_NHWC);
  cudnnTensorDescriptor_t f32 = tensor_desc(xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  cudnnTensorDescriptor_t refused[] = {nchw, six, f32};
  for (size_t i = 0; i < 3; i++) {
    cudnnTensorDescriptor_t b2;
    size_t bytes = 0;
    DNN(cudnnCreateTensorDescriptor(&b2));
    DNN(cudnnDeriveBNTensorDescriptor(b2, refused[i], mode));
    ck_assert_int_eq(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
                         h, mode, CUDNN_BATCHNORM_OPS_BN, refused[i], NULL, refused[i], b2, NULL,
                         &bytes),
                     CUDNN_STATUS_NOT_SUPPORTED);
    ck_assert_int_eq(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, ops, relu,
                                                                          refused[i], &bytes),
                     CUDNN_STATUS_NOT_SUPPORTED);
    DNN(cudnnDestroyTensorDescriptor(b2));
    DNN(cudnnDestroyTensorDescriptor(refused[i]));
  }
  /* A fused ReLU needs the persistent mode. */
  size_t bytes = 0;
  ck_assert_int_eq(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, CUDNN_BATCHNORM_SPATIAL,
                                                                        ops, relu, xd, &bytes),
                   CUDNN_STATUS_NOT_SUPPORTED);

  void *bufs[] = {dx_, dy_, y, dxo, ws, rs, params};
  for (size_t i = 0; i < 7; i++) CUDA(cudaFree(bufs[i]));
  float *v[] = {x, dy, scale, bias, y_ref, mean, var, dx_ref, ds_ref, db_ref, masked, p};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) free(v[i]);
  DNN(cudnnDestroyActivationDescriptor(relu));
  DNN(cudnnDestroyTensorDescriptor(xd));
  DNN(cudnnDestroyTensorDescriptor(bd));
  DNN(cudnnDestroy(h));
}
END_TEST

/* ---- pooling and tensor arithmetic -------------------------------------------------- */

START_TEST(pooling_matches_reference) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  const cnnb_shape xs = {2, 3, 7, 6};
  const ref_window win = {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1};
  const cnnb_shape ys = {2, 3, (7 + 2 - 3) / 2 + 1, (6 + 2 - 3) / 2 + 1};
  const size_t xn = (size_t)cnnb_shape_count(xs), yn = (size_t)cnnb_shape_count(ys);
  cudnnTensorDescriptor_t xd = tensor_desc(xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  cudnnTensorDescriptor_t yd = tensor_desc(ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  float *x = random_floats(xn), *dy = random_floats(yn);
  float *y_ref = malloc(yn * 4), *dx_ref = malloc(xn * 4);
  void *dx_ = to_device(x, xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  void *ddy = to_device(dy, ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  void *y = dev(yn * 4), *dxo = dev(xn * 4);
  const float one = 1.0f, zero = 0.0f;
  for (int max = 0; max < 2; max++) {
    cudnnPoolingDescriptor_t pd;
    DNN(cudnnCreatePoolingDescriptor(&pd));
    DNN(cudnnSetPooling2dDescriptor(pd,
                                    max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
                                    CUDNN_NOT_PROPAGATE_NAN, 3, 3, 1, 1, 2, 2));
    int on, oc, oh, ow;
    DNN(cudnnGetPooling2dForwardOutputDim(pd, xd, &on, &oc, &oh, &ow));
    ck_assert(on == ys.n && oc == ys.c && oh == ys.h && ow == ys.w);
    DNN(cudnnPoolingForward(h, pd, &one, xd, dx_, &zero, yd, y));
    DNN(cudnnPoolingBackward(h, pd, &one, yd, y, yd, ddy, xd, dx_, &zero, xd, dxo));
    if (max) {
      ref_max_pool_forward(x, xs, &win, y_ref, ys);
      ref_max_pool_backward(x, xs, dy, ys, &win, dx_ref);
    } else {
      ref_avg_pool_forward(x, xs, &win, y_ref, ys);
      ref_avg_pool_backward(dy, ys, &win, dx_ref, xs);
    }
    float *got = from_device(y, ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
    expect_close(got, y_ref, yn, 1e-6, max ? "max y" : "avg y");
    free(got);
    got = from_device(dxo, xs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
    expect_close(got, dx_ref, xn, 1e-6, max ? "max dx" : "avg dx");
    free(got);
    DNN(cudnnDestroyPoolingDescriptor(pd));
  }
  /* Including the padding: the corner window of 3x3 at pad 1 averages 4 values over 9. */
  cudnnPoolingDescriptor_t pd;
  DNN(cudnnCreatePoolingDescriptor(&pd));
  DNN(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                  CUDNN_NOT_PROPAGATE_NAN, 3, 3, 1, 1, 2, 2));
  DNN(cudnnPoolingForward(h, pd, &one, xd, dx_, &zero, yd, y));
  float *got = from_device(y, ys, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC);
  const double corner = ((double)x[0] + x[1] + x[6] + x[7]) /
                        9.0; /* n 0, c 0: rows 0-1, cols 0-1 */
  ck_assert_msg(fabs(got[0] - corner) < 1e-6, "corner %g, expected %g", (double)got[0], corner);
  free(got);
  DNN(cudnnDestroyPoolingDescriptor(pd));
  /* A window larger than the padded input: BAD_PARAM. */
  DNN(cudnnCreatePoolingDescriptor(&pd));
  DNN(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 9, 3, 0, 0, 1,
                                  1));
  int on, oc, oh, ow;
  ck_assert_int_eq(cudnnGetPooling2dForwardOutputDim(pd, xd, &on, &oc, &oh, &ow),
                   CUDNN_STATUS_BAD_PARAM);
  DNN(cudnnDestroyPoolingDescriptor(pd));
  void *bufs[] = {dx_, ddy, y, dxo};
  for (size_t i = 0; i < 4; i++) CUDA(cudaFree(bufs[i]));
  free(x);
  free(dy);
  free(y_ref);
  free(dx_ref);
  DNN(cudnnDestroyTensorDescriptor(xd));
  DNN(cudnnDestroyTensorDescriptor(yd));
  DNN(cudnnDestroy(h));
}
END_TEST

START_TEST(add_and_scale_tensor) {
  cudnnHandle_t h;
  DNN(cudnnCreate(&h));
  const cnnb_shape cs = {2, 3, 2, 2}, bs = {1, 3, 1, 1};
  cudnnTensorDescriptor_t cd = tensor_desc(cs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  cudnnTensorDescriptor_t bd = tensor_desc(bs, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW);
  float c0[24], b[3] = {1.0f, -2.0f, 0.5f};
  for (int i = 0; i < 24; i++) c0[i] = (float)(i % 5) - 2.0f;
  void *c = to_device(c0, cs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC), *bb = dev(12);
  up(bb, b, 12);
  const float two = 2.0f, half_ = 0.5f;
  DNN(cudnnAddTensor(h, &two, bd, bb, &half_, cd, c)); /* c = 2 b + c / 2 */
  DNN(cudnnScaleTensor(h, cd, c, &two));               /* then doubled */
  float *got = from_device(c, cs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  for (int i = 0; i < 24; i++) {
    const int ch = (i / 4) % 3;
    ck_assert_msg(got[i] == 2.0f * (2.0f * b[ch] + 0.5f * c0[i]), "element %d: %g", i,
                  (double)got[i]);
  }
  free(got);
  CUDA(cudaFree(c));
  CUDA(cudaFree(bb));
  DNN(cudnnDestroyTensorDescriptor(cd));
  DNN(cudnnDestroyTensorDescriptor(bd));
  DNN(cudnnDestroy(h));
}
END_TEST

/* ---- cuBLAS ------------------------------------------------------------------------- */

static size_t cuda_elt(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static cudnnDataType_t as_dnn(cudaDataType t) {
  return t == CUDA_R_16F    ? CUDNN_DATA_HALF
         : t == CUDA_R_16BF ? CUDNN_DATA_BFLOAT16
                            : CUDNN_DATA_FLOAT;
}

/* C = alpha op(A) op(B) + beta C, column-major, with padded leading dimensions. */
static void check_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, cudaDataType ab, cudaDataType ct, double tol) {
  const int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
  const int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
  const int lda = a_rows + 3, ldb = b_rows + 1, ldc = m + 2;
  const size_t an = (size_t)lda * a_cols, bn = (size_t)ldb * b_cols, cn = (size_t)ldc * n;
  float *A = random_floats(an), *B = random_floats(bn), *C = random_floats(cn);
  const cudnnDataType_t abd = as_dnn(ab), cd = as_dnn(ct);
  for (size_t i = 0; i < an; i++) A[i] = round_to(abd, A[i]);
  for (size_t i = 0; i < bn; i++) B[i] = round_to(abd, B[i]);
  for (size_t i = 0; i < cn; i++) C[i] = round_to(cd, C[i]);
  void *ha = malloc(an * 2 * 2), *hb = malloc(bn * 2 * 2), *hc = malloc(cn * 4);
  for (size_t i = 0; i < an; i++) put(abd, ha, i, A[i]);
  for (size_t i = 0; i < bn; i++) put(abd, hb, i, B[i]);
  for (size_t i = 0; i < cn; i++) put(cd, hc, i, C[i]);
  void *da = dev(an * cuda_elt(ab)), *db = dev(bn * cuda_elt(ab)), *dc = dev(cn * cuda_elt(ct));
  up(da, ha, an * cuda_elt(ab));
  up(db, hb, bn * cuda_elt(ab));
  up(dc, hc, cn * cuda_elt(ct));
  const float alpha = 0.75f, beta = -0.5f;
  ck_assert_int_eq(cublasGemmEx(h, ta, tb, m, n, k, &alpha, da, ab, lda, db, ab, ldb, &beta, dc, ct,
                                ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   CUBLAS_STATUS_SUCCESS);
  down(hc, dc, cn * cuda_elt(ct));
  for (int j = 0; j < n; j++)
    for (int i = 0; i < ldc; i++) {
      const size_t at = (size_t)i + (size_t)j * ldc;
      double want = C[at]; /* rows past m are untouched */
      if (i < m) {
        double acc = 0.0;
        for (int l = 0; l < k; l++) {
          const double a = ta == CUBLAS_OP_N ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
          const double b = tb == CUBLAS_OP_N ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
          acc += a * b;
        }
        want = alpha * acc + beta * C[at];
      }
      const double got = get(cd, hc, at);
      ck_assert_msg(fabs(got - want) <= tol * (1.0 + fabs(want)),
                    "ta %d tb %d C(%d, %d): %g, expected %g", ta, tb, i, j, got, want);
    }
  void *bufs[] = {da, db, dc};
  for (size_t i = 0; i < 3; i++) CUDA(cudaFree(bufs[i]));
  free(A);
  free(B);
  free(C);
  free(ha);
  free(hb);
  free(hc);
}

START_TEST(gemm_ex_transposes_and_types) {
  cublasHandle_t h;
  ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ck_assert_int_eq(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t ops[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      check_gemm(h, ops[a], ops[b], 7, 5, 300, CUDA_R_32F, CUDA_R_32F, 1e-5);
      check_gemm(h, ops[a], ops[b], 261, 3, 9, CUDA_R_32F, CUDA_R_32F, 1e-5);
      check_gemm(h, ops[a], ops[b], 6, 9, 17, CUDA_R_16F, CUDA_R_16F, 2e-3);
      check_gemm(h, ops[a], ops[b], 6, 9, 17, CUDA_R_16F, CUDA_R_32F, 1e-5);
      check_gemm(h, ops[a], ops[b], 5, 4, 33, CUDA_R_16BF, CUDA_R_32F, 1e-5);
      check_gemm(h, ops[a], ops[b], 5, 4, 33, CUDA_R_16BF, CUDA_R_16BF, 1e-2);
    }
  /* What cuBLAS refuses: mixed A / B types, an fp16 C from fp32 inputs, a short lda. */
  const float one = 1.0f;
  void *p = dev(4096);
  ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, p, CUDA_R_16F, 4, p,
                                CUDA_R_32F, 4, &one, p, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   CUBLAS_STATUS_NOT_SUPPORTED);
  ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, p, CUDA_R_32F, 4, p,
                                CUDA_R_32F, 4, &one, p, CUDA_R_16F, 4, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   CUBLAS_STATUS_NOT_SUPPORTED);
  ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, p, CUDA_R_32F, 3, p,
                                CUDA_R_32F, 4, &one, p, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   CUBLAS_STATUS_INVALID_VALUE);
  CUDA(cudaFree(p));
  int version = 0;
  ck_assert_int_eq(cublasGetVersion(h, &version), CUBLAS_STATUS_SUCCESS);
  ck_assert_int_eq(version, CUBLAS_VERSION);
  ck_assert_str_eq(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  ck_assert_int_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}
END_TEST

/* ---- the checks fire ---------------------------------------------------------------- */

/* Runs fn in a forked child, which must die of SIGABRT with a message on stderr holding
 * `api` and `words`. */
static void expect_abort(void (*fn)(void), const char *api, const char *words) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    fn();
    _exit(0); /* the check did not fire */
  }
  close(fds[1]);
  char buf[2048];
  size_t len = 0;
  ssize_t got;
  while ((got = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
  buf[len] = 0;
  close(fds[0]);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                "expected an abort naming %s (%s); the child %s %d, stderr: %s", api, words,
                WIFSIGNALED(status) ? "died of signal" : "exited",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), buf);
  ck_assert_msg(strstr(buf, api) && strstr(buf, words), "message '%s' lacks '%s' / '%s'", buf, api,
                words);
}

static cudnnHandle_t child_handle(void) {
  cudnnHandle_t h;
  if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) _exit(3);
  return h;
}

/* A forward convolution of CASES[0] in fp32 NCHW (or fp16 NHWC with tensor-core math)
 * with its buffers offset or shortened as asked. */
static void child_conv(int half, size_t x_offset, size_t y_short, int ws_short) {
  cudnnHandle_t h = child_handle();
  conv_setup s;
  conv_setup_make(&s, &CASES[0], half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT,
                  half ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                  half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
  const size_t e = half ? 2 : 4;
  size_t bytes = 0;
  cudnnGetConvolutionForwardWorkspaceSize(h, s.x, s.w, s.conv, s.y, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                          &bytes);
  char *x = dev((size_t)cnnb_shape_count(s.xs) * e + 64),
       *w = dev((size_t)cnnb_shape_count(s.ws) * e);
  void *y = dev((size_t)cnnb_shape_count(s.ys) * e - y_short);
  void *ws = dev(bytes - (size_t)ws_short);
  const float one = 1.0f, zero = 0.0f;
  cudnnConvolutionForward(h, &one, s.x, x + x_offset, s.w, w, s.conv,
                          CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, bytes - (size_t)ws_short, &zero, s.y,
                          y);
}

static void fire_workspace_short(void) { child_conv(0, 0, 0, 1); }
static void fire_misaligned_fp32(void) { child_conv(0, 2, 0, 0); }
static void fire_misaligned_tensor_op(void) { child_conv(1, 4, 0, 0); }
static void fire_y_past_buffer(void) { child_conv(0, 0, 4, 0); }

static void fire_use_after_destroy(void) {
  cudnnTensorDescriptor_t d = tensor_desc((cnnb_shape){1, 2, 3, 4}, CUDNN_DATA_FLOAT,
                                          CUDNN_TENSOR_NCHW);
  cudnnDestroyTensorDescriptor(d);
  size_t bytes;
  cudnnGetTensorSizeInBytes(d, &bytes);
}

static void fire_dead_stream(void) {
  cudnnHandle_t h = child_handle();
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudnnSetStream(h, s);
  cudaStreamDestroy(s);
  cudnnTensorDescriptor_t d = tensor_desc((cnnb_shape){1, 2, 3, 4}, CUDNN_DATA_FLOAT,
                                          CUDNN_TENSOR_NCHW);
  void *y = dev(96);
  const float two = 2.0f;
  cudnnScaleTensor(h, d, y, &two);
}

static void fire_reserve_short(void) {
  cudnnHandle_t h = child_handle();
  const cnnb_shape xs = {2, 8, 3, 5};
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  cudnnTensorDescriptor_t xd = tensor_desc(xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC), bd;
  cudnnCreateTensorDescriptor(&bd);
  cudnnDeriveBNTensorDescriptor(bd, xd, mode);
  size_t ws_bytes = 0, reserve = 0;
  cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, xd,
                                                           NULL, xd, bd, NULL, &ws_bytes);
  cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, NULL, xd,
                                                       &reserve);
  void *x = dev(240 * 2), *y = dev(240 * 2), *ws = dev(ws_bytes), *rs = dev(reserve);
  float *p = dev(6 * 8 * 4);
  const float one = 1.0f, zero = 0.0f;
  cudnnBatchNormalizationForwardTrainingEx(h, mode, CUDNN_BATCHNORM_OPS_BN, &one, &zero, xd, x,
                                           NULL, NULL, xd, y, bd, p, p + 8, 0.1, p + 16, p + 24,
                                           1e-3, p + 32, p + 40, NULL, ws, ws_bytes, rs,
                                           reserve - 1);
}

/* A persistent fp16 batch norm with the ReLU inside: the forward (unless skipped), then
 * y zeroed (when asked) and the backward. */
static void child_bn_ex(int forward, int clobber_y) {
  cudnnHandle_t h = child_handle();
  const cnnb_shape xs = {2, 8, 3, 5};
  const size_t n = (size_t)cnnb_shape_count(xs);
  const cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  const cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  cudnnTensorDescriptor_t xd = tensor_desc(xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC), bd;
  cudnnCreateTensorDescriptor(&bd);
  cudnnDeriveBNTensorDescriptor(bd, xd, mode);
  cudnnActivationDescriptor_t relu;
  cudnnCreateActivationDescriptor(&relu);
  cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0);
  size_t ws_bytes = 0, reserve = 0;
  cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, mode, ops, xd, xd, xd, NULL, xd, bd, relu,
                                                    &ws_bytes);
  cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, ops, relu, xd, &reserve);
  float *xh = random_floats(n);
  void *x = to_device(xh, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  void *dy = to_device(xh, xs, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC);
  void *y = dev(n * 2), *dx = dev(n * 2), *ws = dev(ws_bytes), *rs = dev(reserve);
  float *p = dev(8 * 8 * 4), ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  CUDA(cudaMemset(p, 0, 8 * 8 * 4));
  up(p, ones, sizeof ones); /* scale 1, bias 0: about half the outputs pass the ReLU */
  const float one = 1.0f, zero = 0.0f;
  if (forward)
    DNN(cudnnBatchNormalizationForwardTrainingEx(h, mode, ops, &one, &zero, xd, x, NULL, NULL, xd,
                                                 y, bd, p, p + 8, 0.1, p + 16, p + 24, 1e-3, p + 32,
                                                 p + 40, relu, ws, ws_bytes, rs, reserve));
  if (clobber_y) CUDA(cudaMemset(y, 0, n * 2));
  cudnnBatchNormalizationBackwardEx(h, mode, ops, &one, &zero, &one, &zero, xd, x, xd, y, xd, dy,
                                    NULL, NULL, xd, dx, bd, p, p + 8, p + 48, p + 56, 1e-3, p + 32,
                                    p + 40, relu, ws, ws_bytes, rs, reserve);
  if (!clobber_y && forward) _exit(0);
}

static void fire_reserve_not_from_forward(void) { child_bn_ex(0, 0); }
static void fire_y_overwritten(void) { child_bn_ex(1, 1); }

static void fire_gemm_past_allocation(void) {
  cublasHandle_t h;
  cublasCreate(&h);
  void *a = dev(8 * 8 * 4), *b = dev(8 * 8 * 4), *c = dev(8 * 8 * 4);
  const float one = 1.0f, zero = 0.0f;
  /* lda 9: A's 8 columns span 7 * 9 + 8 = 71 floats of the 64 there are */
  cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a, CUDA_R_32F, 9, b, CUDA_R_32F, 8,
               &zero, c, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

static void fire_handle_on_another_device(void) {
  cudaSetDevice(0);
  cudnnHandle_t h = child_handle();
  cudnnTensorDescriptor_t d = tensor_desc((cnnb_shape){1, 2, 3, 4}, CUDNN_DATA_FLOAT,
                                          CUDNN_TENSOR_NCHW);
  cudaSetDevice(1);
  float *y = dev(96);
  const float two = 2.0f;
  cudnnScaleTensor(h, d, y, &two);
}

static void fire_alpha_on_device(void) {
  cudnnHandle_t h = child_handle();
  cudnnTensorDescriptor_t d = tensor_desc((cnnb_shape){1, 2, 3, 4}, CUDNN_DATA_FLOAT,
                                          CUDNN_TENSOR_NCHW);
  float *y = dev(96);
  cudnnScaleTensor(h, d, y, y);
}

/* The runtime's own checks (fake_runtime.cpp): what a CUDA graph may not hold, and
 * memory used outside what was allocated. */
static cudaStream_t capturing_stream(void) {
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) _exit(3);
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) _exit(3);
  return s;
}
static void fire_sync_in_capture(void) { cudaStreamSynchronize(capturing_stream()); }
static void fire_malloc_in_capture(void) {
  capturing_stream();
  void *p;
  cudaMalloc(&p, 64);
}
static void fire_pageable_copy_in_capture(void) {
  void *d = dev(64);
  cudaStream_t s = capturing_stream();
  static char host[64];
  cudaMemcpyAsync(d, host, sizeof host, cudaMemcpyHostToDevice, s);
}
static void fire_copy_past_allocation(void) {
  char *d = dev(64);
  cudaMemsetAsync(d + 32, 0, 64, 0);
}
static void fire_free_inside_allocation(void) {
  char *d = dev(64);
  cudaFree(d + 16);
}

START_TEST(checks_fire) {
  expect_abort(fire_sync_in_capture, "cudaStreamSynchronize", "capturing");
  expect_abort(fire_malloc_in_capture, "cudaMalloc", "capturing");
  expect_abort(fire_pageable_copy_in_capture, "cudaMemcpyAsync", "pageable");
  expect_abort(fire_copy_past_allocation, "cudaMemsetAsync", "runs past its allocation");
  expect_abort(fire_free_inside_allocation, "cudaFree", "not the start of a live allocation");
  expect_abort(fire_workspace_short, "cudnnConvolutionForward",
               "cudnnGetConvolutionForwardWorkspaceSize");
  expect_abort(fire_misaligned_fp32, "cudnnConvolutionForward", "aligned to 4");
  expect_abort(fire_misaligned_tensor_op, "cudnnConvolutionForward", "aligned to 16");
  expect_abort(fire_y_past_buffer, "cudnnConvolutionForward", "runs past its allocation");
  expect_abort(fire_use_after_destroy, "cudnnGetTensorSizeInBytes", "after its destroy");
  expect_abort(fire_dead_stream, "cudnnScaleTensor", "cudaStreamDestroy");
  expect_abort(fire_reserve_short, "cudnnBatchNormalizationForwardTrainingEx", "reserve space");
  expect_abort(fire_reserve_not_from_forward, "cudnnBatchNormalizationBackwardEx",
               "was not written by");
  expect_abort(fire_y_overwritten, "cudnnBatchNormalizationBackwardEx", "overwritten");
  expect_abort(fire_gemm_past_allocation, "cublasGemmEx", "runs past its allocation");
  expect_abort(fire_handle_on_another_device, "cudnnScaleTensor", "device 1 is current");
  expect_abort(fire_alpha_on_device, "cudnnScaleTensor", "host memory");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("fake_cudnn");
  TCase *t = tcase_create("core");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, conv_fp32_nchw_matches_reference);
  tcase_add_test(t, conv_fp32_nhwc_matches_reference);
  tcase_add_test(t, conv_half_nhwc_matches_reference);
  tcase_add_test(t, conv_beta_one_accumulates);
  tcase_add_test(t, conv_true_convolution_flips_the_filter);
  tcase_add_test(t, conv_captured_replays_after_descriptors_are_gone);
  tcase_add_test(t, find_respects_the_workspace_and_sorts);
  tcase_add_test(t, conv_refuses_shapes_that_disagree);
  tcase_add_test(t, batch_norm_training_matches_reference);
  tcase_add_test(t, batch_norm_ex_persistent_relu);
  tcase_add_test(t, pooling_matches_reference);
  tcase_add_test(t, add_and_scale_tensor);
  tcase_add_test(t, gemm_ex_transposes_and_types);
  tcase_add_test(t, checks_fire);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

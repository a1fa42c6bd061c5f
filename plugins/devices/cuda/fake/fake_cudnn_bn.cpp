/* fake_cudnn_bn.cpp — the checking fake's cuDNN batch normalization: the derived
 * parameter descriptor, forward training / inference, backward, and the Ex variants with
 * their workspace and reserve-space sizes (CUDNN_BATCHNORM_OPS_BN, _BN_ACTIVATION: ReLU
 * after the normalisation, _BN_ADD_ACTIVATION: ReLU after adding z).
 *
 * Numbers as cuDNN defines them: y = scale * (x - mean) * inv_std + bias with the biased
 * batch variance, inv_std = 1 / sqrt(var + epsilon); the running averages move by
 * running = factor * batch + (1 - factor) * running, the variance's with the unbiased
 * batch variance (var * m / (m - 1), m the elements per channel: for m = 1 that divides
 * by zero, as cuDNN's does); the saved mean and inverse std feed the backward, which
 * recomputes them from x when both are NULL. Scale, bias, statistics are fp32 ([1, C, 1,
 * 1] spatial, [1, C, H, W] per activation) for fp32 / fp16 / bf16 data; statistics are
 * accumulated in double.
 *
 * Where the Ex functions run (the rules this fake follows; NOT_SUPPORTED elsewhere, from
 * the size getters and the calls alike): CUDNN_BATCHNORM_SPATIAL_PERSISTENT and every
 * fused op (_BN_ACTIVATION, _BN_ADD_ACTIVATION) need fully packed NHWC fp16 data with a
 * channel count that is a multiple of 4, and the fused ops a RELU activation descriptor;
 * plain CUDNN_BATCHNORM_OPS_BN in SPATIAL or PER_ACTIVATION mode runs anywhere, like the
 * non-Ex functions. The non-Ex functions accept SPATIAL_PERSISTENT in any layout (it
 * computes what SPATIAL does).
 *
 * Workspace and reserve space (the fake's sizes): the persistent forward asks for
 * per-channel partial sums, the backward for a little more, which they scribble over;
 * the reserve space holds a header written by the forward (checked by the backward: a
 * reserve space not written by a matching forward fails loudly) and, for the fused ReLU,
 * one bit per element saying where the activation passed. The backward masks dy with
 * y > 0 (yData, as cuDNN reads it) and checks that mask against the reserve's: a y
 * overwritten between forward and backward fails loudly. */
#include <cmath>
#include <cstring>

#include "fake_dnn.h"

namespace fake_dnn {
namespace {

constexpr uint64_t kReserveMagic = 0x66616b65424e7273ull; /* "fakeBNrs" */
constexpr size_t kReserveHeader = 64;

struct ReserveHeader {
  uint64_t magic;
  uint32_t ops;
  uint32_t mask_checkable; /* the forward stored relu(...) unblended: y > 0 is the mask */
  int64_t count, channels;
};

size_t align16(size_t x) { return (x + 15) / 16 * 16; }

bool fused(cudnnBatchNormOps_t ops) { return ops != CUDNN_BATCHNORM_OPS_BN; }

/* A batch norm's shape: x, its parameter descriptor, and how elements map to groups. */
struct Bn {
  Tensor x, param;
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  int64_t groups = 0; /* C (spatial) or C*H*W (per activation) */
  double m = 0;       /* elements per group */
  int64_t hw() const { return (int64_t)x.h * x.w; }
  bool spatial() const { return mode != CUDNN_BATCHNORM_PER_ACTIVATION; }
  /* The group of logical NCHW element (c, hw). */
  int64_t group(int c, int64_t at) const { return spatial() ? c : (int64_t)c * hw() + at; }
  Span param_span(const void *p, const char *what) const {
    return {p, (size_t)groups * sizeof(float), sizeof(float), what};
  }
  Span x_span(const Tensor &t, const void *p, const char *what) const {
    return {p, t.extent_bytes(), data_alignment(t.type, false), what};
  }
};

bool valid_mode(cudnnBatchNormMode_t m) {
  return m == CUDNN_BATCHNORM_PER_ACTIVATION || m == CUDNN_BATCHNORM_SPATIAL ||
         m == CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
}

bool same_shape(const Tensor &a, const Tensor &b) {
  return a.type == b.type && a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

/* x, the tensors that must match it, and the parameter descriptor. */
cudnnStatus_t make_bn(cudnnBatchNormMode_t mode, const Tensor &x,
                      std::initializer_list<const Tensor *> like_x, const Tensor &param,
                      double epsilon, const char *api, Bn *out) {
  if (!valid_mode(mode)) return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  if (!dtype_size(x.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "data type %s", dtype_name(x.type));
  for (const Tensor *t : like_x)
    if (t && !same_shape(*t, x))
      return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                         "a tensor [%d, %d, %d, %d] %s differs from x [%d, %d, %d, %d] %s", t->n,
                         t->c, t->h, t->w, dtype_name(t->type), x.n, x.c, x.h, x.w,
                         dtype_name(x.type));
  const bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  const int want_h = spatial ? 1 : x.h, want_w = spatial ? 1 : x.w;
  if (param.type != CUDNN_DATA_FLOAT || param.n != 1 || param.c != x.c || param.h != want_h ||
      param.w != want_w)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "the scale / bias / statistics descriptor is [%d, %d, %d, %d] %s, expected "
                       "[1, %d, %d, %d] FLOAT (cudnnDeriveBNTensorDescriptor)",
                       param.n, param.c, param.h, param.w, dtype_name(param.type), x.c, want_h,
                       want_w);
  if (!param.packed_nchw())
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "a strided parameter tensor");
  if (!(epsilon >= CUDNN_BN_MIN_EPSILON))
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "epsilon %g below CUDNN_BN_MIN_EPSILON",
                       epsilon);
  out->x = x;
  out->param = param;
  out->mode = mode;
  out->groups = spatial ? x.c : (int64_t)x.c * x.h * x.w;
  out->m = spatial ? (double)x.n * x.h * x.w : (double)x.n;
  return CUDNN_STATUS_SUCCESS;
}

/* The Ex rules of the top comment. act may be NULL (no activation asked). */
cudnnStatus_t ex_supported(cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const Tensor &x,
                           cudnnActivationDescriptor_t act, const char *api) {
  if (ops != CUDNN_BATCHNORM_OPS_BN && ops != CUDNN_BATCHNORM_OPS_BN_ACTIVATION &&
      ops != CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "bnOps %d", (int)ops);
  if (!valid_mode(mode)) return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  if (mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT || fused(ops)) {
    if (mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
      return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                         "fused batch norm ops need CUDNN_BATCHNORM_SPATIAL_PERSISTENT");
    if (!x.packed_nhwc())
      return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                         "the persistent batch norm takes fully packed NHWC tensors");
    if (x.type != CUDNN_DATA_HALF)
      return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                         "the persistent batch norm takes HALF data, not %s", dtype_name(x.type));
    if (x.c % 4)
      return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                         "the persistent batch norm needs channels in multiples of 4, not %d", x.c);
  }
  if (fused(ops)) {
    if (!act)
      return fail_status(CUDNN_STATUS_BAD_PARAM, api, "bnOps %d without an activation descriptor",
                         (int)ops);
    const Activation a = copy_of<Activation>(act, Kind::activation, api, "activationDesc");
    if (!a.set) fake_cuda_fail(api, "activationDesc: used before it was set");
    if (a.mode != CUDNN_ACTIVATION_RELU)
      return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "activation mode %d (RELU only)",
                         (int)a.mode);
  }
  return CUDNN_STATUS_SUCCESS;
}

size_t ex_forward_workspace(cudnnBatchNormMode_t mode, const Tensor &x) {
  if (mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT) return 0;
  return align16((size_t)x.c * 8 * 2 * sizeof(float)); /* 8 blocks' sum and sum of squares */
}
size_t ex_backward_workspace(cudnnBatchNormMode_t mode, const Tensor &x) {
  if (mode != CUDNN_BATCHNORM_SPATIAL_PERSISTENT) return 0;
  return align16((size_t)x.c * 8 * 2 * sizeof(float)) + 512;
}
size_t ex_reserve(cudnnBatchNormOps_t ops, const Tensor &x) {
  return kReserveHeader + (fused(ops) ? align16((size_t)(x.count() + 7) / 8) : 0);
}

/* Reads the [groups] fp32 vector at p (device memory, read when the work runs). */
std::vector<double> read_param(const float *p, int64_t n) {
  std::vector<double> v((size_t)n);
  for (int64_t i = 0; i < n; i++) v[(size_t)i] = p[i];
  return v;
}

/* Per-group mean and biased variance of logical NCHW xf. */
void batch_stats(const Bn &bn, const std::vector<float> &xf, std::vector<double> &mean,
                 std::vector<double> &var) {
  mean.assign((size_t)bn.groups, 0.0);
  var.assign((size_t)bn.groups, 0.0);
  const int64_t hw = bn.hw();
  for (int n = 0; n < bn.x.n; n++)
    for (int c = 0; c < bn.x.c; c++) {
      const float *row = xf.data() + ((int64_t)n * bn.x.c + c) * hw;
      for (int64_t i = 0; i < hw; i++) mean[(size_t)bn.group(c, i)] += row[i];
    }
  for (double &v : mean) v /= bn.m;
  for (int n = 0; n < bn.x.n; n++)
    for (int c = 0; c < bn.x.c; c++) {
      const float *row = xf.data() + ((int64_t)n * bn.x.c + c) * hw;
      for (int64_t i = 0; i < hw; i++) {
        const size_t g = (size_t)bn.group(c, i);
        const double d = row[i] - mean[g];
        var[g] += d * d;
      }
    }
  for (double &v : var) v /= bn.m;
}

/* Everything a training forward reads and writes (plain and Ex). */
struct Forward {
  Bn bn;
  Tensor y, z;
  cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
  float alpha = 1, beta = 0;
  double factor = 1, epsilon = 0;
  const void *x = nullptr, *zp = nullptr;
  void *yp = nullptr;
  const float *scale = nullptr, *bias = nullptr;
  float *run_mean = nullptr, *run_var = nullptr, *save_mean = nullptr, *save_inv = nullptr;
  void *workspace = nullptr, *reserve = nullptr;
  size_t workspace_bytes = 0; /* what the algorithm asked for: scribbled */
};

void forward_training(const Forward &f) {
  const Bn &bn = f.bn;
  if (f.workspace_bytes) std::memset(f.workspace, 0xa5, f.workspace_bytes);
  std::vector<float> xf((size_t)bn.x.count()), yf((size_t)bn.x.count()), zf;
  load_nchw(bn.x, f.x, xf.data());
  if (f.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION) {
    zf.resize(xf.size());
    load_nchw(f.z, f.zp, zf.data());
  }
  std::vector<double> mean, var;
  batch_stats(bn, xf, mean, var);
  const std::vector<double> scale = read_param(f.scale, bn.groups),
                            bias = read_param(f.bias, bn.groups);
  std::vector<double> inv((size_t)bn.groups);
  for (size_t g = 0; g < inv.size(); g++) inv[g] = 1.0 / std::sqrt(var[g] + f.epsilon);
  const int64_t hw = bn.hw();
  for (int n = 0; n < bn.x.n; n++)
    for (int c = 0; c < bn.x.c; c++)
      for (int64_t i = 0; i < hw; i++) {
        const size_t at = (size_t)(((int64_t)n * bn.x.c + c) * hw + i), g = (size_t)bn.group(c, i);
        double v = scale[g] * (xf[at] - mean[g]) * inv[g] + bias[g];
        if (f.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION) v += zf[at];
        if (fused(f.ops) && !(v > 0.0)) v = 0.0;
        yf[at] = (float)v;
      }
  store_nchw(f.y, f.yp, yf.data(), f.alpha, f.beta);
  if (f.run_mean && f.run_var)
    for (int64_t g = 0; g < bn.groups; g++) {
      const double unbiased = var[(size_t)g] * bn.m / (bn.m - 1.0);
      f.run_mean[g] = (float)(f.factor * mean[(size_t)g] + (1.0 - f.factor) * f.run_mean[g]);
      f.run_var[g] = (float)(f.factor * unbiased + (1.0 - f.factor) * f.run_var[g]);
    }
  if (f.save_mean && f.save_inv)
    for (int64_t g = 0; g < bn.groups; g++) {
      f.save_mean[g] = (float)mean[(size_t)g];
      f.save_inv[g] = (float)inv[(size_t)g];
    }
  if (f.reserve) {
    ReserveHeader hdr = {kReserveMagic, (uint32_t)f.ops, f.alpha == 1.0f && f.beta == 0.0f,
                         bn.x.count(), bn.x.c};
    std::memset(f.reserve, 0, kReserveHeader);
    std::memcpy(f.reserve, &hdr, sizeof hdr);
    if (fused(f.ops)) {
      /* One bit per logical element: where the stored activation is positive. */
      uint8_t *mask = static_cast<uint8_t *>(f.reserve) + kReserveHeader;
      std::memset(mask, 0, (size_t)(bn.x.count() + 7) / 8);
      std::vector<float> stored((size_t)bn.x.count());
      load_nchw(f.y, f.yp, stored.data());
      for (size_t i = 0; i < stored.size(); i++)
        if (stored[i] > 0.0f) mask[i / 8] |= (uint8_t)(1u << (i % 8));
    }
  }
}

/* Everything a backward reads and writes (plain and Ex). */
struct Backward {
  Bn bn;
  Tensor y, dy, dz, dx;
  cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
  float alpha_data = 1, beta_data = 0, alpha_param = 1, beta_param = 0;
  double epsilon = 0;
  const void *x = nullptr, *yp = nullptr, *dyp = nullptr;
  void *dzp = nullptr, *dxp = nullptr;
  const float *scale = nullptr, *saved_mean = nullptr, *saved_inv = nullptr;
  float *dscale = nullptr, *dbias = nullptr;
  void *workspace = nullptr;
  size_t workspace_bytes = 0;
  const void *reserve = nullptr; /* Ex: checked against the forward's header */
  const char *api = "";
};

void backward(const Backward &b) {
  const Bn &bn = b.bn;
  const int64_t count = bn.x.count(), hw = bn.hw();
  if (b.workspace_bytes) std::memset(b.workspace, 0xa5, b.workspace_bytes);
  const ReserveHeader *hdr = static_cast<const ReserveHeader *>(b.reserve);
  if (hdr && (hdr->magic != kReserveMagic || hdr->ops != (uint32_t)b.ops || hdr->count != count ||
              hdr->channels != bn.x.c))
    fake_cuda_fail(b.api,
                   "reserveSpace %p was not written by a cudnnBatchNormalizationForwardTrainingEx "
                   "of the same ops and shape (pass the forward's reserve space, unchanged)",
                   b.reserve);
  std::vector<float> xf((size_t)count), dyf((size_t)count), dxf((size_t)count);
  load_nchw(bn.x, b.x, xf.data());
  load_nchw(b.dy, b.dyp, dyf.data());
  if (fused(b.ops)) {
    std::vector<float> yf((size_t)count);
    load_nchw(b.y, b.yp, yf.data());
    const uint8_t *mask = hdr && hdr->mask_checkable
                              ? static_cast<const uint8_t *>(b.reserve) + kReserveHeader
                              : nullptr;
    for (size_t i = 0; i < (size_t)count; i++) {
      const bool pass = yf[i] > 0.0f;
      if (mask && pass != (((mask[i / 8] >> (i % 8)) & 1u) != 0))
        fake_cuda_fail(b.api,
                       "yData disagrees with the forward's activation at element %zu (y %g): y "
                       "was overwritten between the forward and this backward",
                       i, (double)yf[i]);
      if (!pass) dyf[i] = 0.0f;
    }
    if (b.ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION)
      store_nchw(b.dz, b.dzp, dyf.data(), b.alpha_data, b.beta_data);
  }
  std::vector<double> mean, inv;
  if (b.saved_mean && b.saved_inv) {
    mean = read_param(b.saved_mean, bn.groups);
    inv = read_param(b.saved_inv, bn.groups);
  } else {
    std::vector<double> var;
    batch_stats(bn, xf, mean, var);
    inv.resize(var.size());
    for (size_t g = 0; g < var.size(); g++) inv[g] = 1.0 / std::sqrt(var[g] + b.epsilon);
  }
  const std::vector<double> scale = read_param(b.scale, bn.groups);
  std::vector<double> sum_dy((size_t)bn.groups, 0.0), sum_dy_xhat((size_t)bn.groups, 0.0);
  for (int n = 0; n < bn.x.n; n++)
    for (int c = 0; c < bn.x.c; c++)
      for (int64_t i = 0; i < hw; i++) {
        const size_t at = (size_t)(((int64_t)n * bn.x.c + c) * hw + i), g = (size_t)bn.group(c, i);
        sum_dy[g] += dyf[at];
        sum_dy_xhat[g] += dyf[at] * (xf[at] - mean[g]) * inv[g];
      }
  for (int n = 0; n < bn.x.n; n++)
    for (int c = 0; c < bn.x.c; c++)
      for (int64_t i = 0; i < hw; i++) {
        const size_t at = (size_t)(((int64_t)n * bn.x.c + c) * hw + i), g = (size_t)bn.group(c, i);
        const double xhat = (xf[at] - mean[g]) * inv[g];
        dxf[at] = (float)(scale[g] * inv[g] *
                          (dyf[at] - sum_dy[g] / bn.m - xhat * sum_dy_xhat[g] / bn.m));
      }
  store_nchw(b.dx, b.dxp, dxf.data(), b.alpha_data, b.beta_data);
  for (int64_t g = 0; g < bn.groups; g++) {
    double ds = b.alpha_param * sum_dy_xhat[(size_t)g], db = b.alpha_param * sum_dy[(size_t)g];
    if (b.beta_param != 0.0f) {
      ds += b.beta_param * b.dscale[g];
      db += b.beta_param * b.dbias[g];
    }
    b.dscale[g] = (float)ds;
    b.dbias[g] = (float)db;
  }
}

/* NULL or both: the saved statistics (and the running ones) come in pairs. */
void pair(const void *a, const void *b, const char *api, const char *what) {
  if ((a == nullptr) != (b == nullptr))
    fake_cuda_fail(api, "%s: one of the pair is NULL, the other not", what);
}

Tensor optional_tensor(cudnnTensorDescriptor_t d, const char *api, const char *what) {
  return d ? tensor_of(d, api, what) : Tensor();
}

/* The common part of ForwardTraining and ForwardTrainingEx. */
cudnnStatus_t training_forward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, bool ex,
    const void *alpha_p, const void *beta_p, cudnnTensorDescriptor_t x_desc, const void *x,
    cudnnTensorDescriptor_t z_desc, const void *z, cudnnTensorDescriptor_t y_desc, void *y,
    cudnnTensorDescriptor_t param_desc, const void *scale, const void *bias, double factor,
    void *run_mean, void *run_var, double epsilon, void *save_mean, void *save_inv,
    cudnnActivationDescriptor_t act, void *workspace, size_t workspace_bytes, void *reserve,
    size_t reserve_bytes, const char *api) {
  const Handle h = handle_of(handle, api);
  Forward f;
  const Tensor xt = tensor_of(x_desc, api, "xDesc");
  f.y = tensor_of(y_desc, api, "yDesc");
  const Tensor param = tensor_of(param_desc, api, "bnScaleBiasMeanVarDesc");
  const bool add = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  if (add) f.z = tensor_of(z_desc, api, "zDesc");
  cudnnStatus_t st = make_bn(mode, xt, {&f.y, add ? &f.z : nullptr}, param, epsilon, api, &f.bn);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  size_t ws_need = 0, reserve_need = 0;
  if (ex) {
    if ((st = ex_supported(mode, ops, xt, act, api)) != CUDNN_STATUS_SUCCESS) return st;
    ws_need = ex_forward_workspace(mode, xt);
    reserve_need = ex_reserve(ops, xt);
    if (workspace_bytes < ws_need)
      fake_cuda_fail(api,
                     "workspace of %zu bytes, cudnnGetBatchNormalizationForwardTrainingExWorkspace"
                     "Size answers %zu for this configuration",
                     workspace_bytes, ws_need);
    if (reserve_bytes < reserve_need)
      fake_cuda_fail(api,
                     "reserve space of %zu bytes, cudnnGetBatchNormalizationTrainingExReserveSpace"
                     "Size answers %zu for this configuration",
                     reserve_bytes, reserve_need);
  }
  pair(run_mean, run_var, api, "resultRunningMean / resultRunningVariance");
  pair(save_mean, save_inv, api, "resultSaveMean / resultSaveInvVariance");
  f.ops = ops;
  f.alpha = host_scalar(alpha_p, xt.type, api, "alpha");
  f.beta = host_scalar(beta_p, xt.type, api, "beta");
  f.factor = factor;
  f.epsilon = epsilon;
  f.x = x;
  f.zp = z;
  f.yp = y;
  f.scale = static_cast<const float *>(scale);
  f.bias = static_cast<const float *>(bias);
  f.run_mean = static_cast<float *>(run_mean);
  f.run_var = static_cast<float *>(run_var);
  f.save_mean = static_cast<float *>(save_mean);
  f.save_inv = static_cast<float *>(save_inv);
  f.workspace = workspace;
  f.workspace_bytes = ws_need;
  f.reserve = reserve_need ? reserve : nullptr;

  const Bn &bn = f.bn;
  const Span xs = bn.x_span(xt, x, "x"), ys = bn.x_span(f.y, y, "y");
  std::vector<Span> spans = {xs, ys, bn.param_span(scale, "bnScale"),
                             bn.param_span(bias, "bnBias")};
  if (add) spans.push_back(bn.x_span(f.z, z, "z"));
  if (run_mean) {
    spans.push_back(bn.param_span(run_mean, "resultRunningMean"));
    spans.push_back(bn.param_span(run_var, "resultRunningVariance"));
  }
  if (save_mean) {
    spans.push_back(bn.param_span(save_mean, "resultSaveMean"));
    spans.push_back(bn.param_span(save_inv, "resultSaveInvVariance"));
  }
  const Span ws = {workspace, workspace_bytes, kWorkspaceAlign, "workspace"};
  const Span rs = {reserve, reserve_bytes, kWorkspaceAlign, "reserveSpace"};
  for (const Span &s : spans) {
    if (ws_need) check_disjoint(ws, s, api);
    if (reserve_need) check_disjoint(rs, s, api);
  }
  if (ws_need && reserve_need) check_disjoint(ws, rs, api);
  if (ws_need) spans.push_back(ws);
  if (reserve_need) spans.push_back(rs);
  run_on(h.stream, api, spans, [f]() { forward_training(f); });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t training_backward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, bool ex,
    const void *alpha_data, const void *beta_data, const void *alpha_param, const void *beta_param,
    cudnnTensorDescriptor_t x_desc, const void *x, cudnnTensorDescriptor_t y_desc, const void *y,
    cudnnTensorDescriptor_t dy_desc, const void *dy, cudnnTensorDescriptor_t dz_desc, void *dz,
    cudnnTensorDescriptor_t dx_desc, void *dx, cudnnTensorDescriptor_t param_desc,
    const void *scale, const void *bias, void *dscale, void *dbias, double epsilon,
    const void *saved_mean, const void *saved_inv, cudnnActivationDescriptor_t act, void *workspace,
    size_t workspace_bytes, void *reserve, size_t reserve_bytes, const char *api) {
  const Handle h = handle_of(handle, api);
  Backward b;
  const Tensor xt = tensor_of(x_desc, api, "xDesc");
  b.dy = tensor_of(dy_desc, api, "dyDesc");
  b.dx = tensor_of(dx_desc, api, "dxDesc");
  const Tensor param = tensor_of(param_desc, api, "dBnScaleBiasDesc");
  const bool act_ops = fused(ops), add = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
  if (act_ops) {
    if (!y_desc || !y)
      fake_cuda_fail(api, "bnOps %d reads y: yDesc and yData are needed", (int)ops);
    b.y = tensor_of(y_desc, api, "yDesc");
  }
  if (add) b.dz = tensor_of(dz_desc, api, "dzDesc");
  cudnnStatus_t st = make_bn(mode, xt,
                             {&b.dy, &b.dx, act_ops ? &b.y : nullptr, add ? &b.dz : nullptr}, param,
                             epsilon, api, &b.bn);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  size_t ws_need = 0, reserve_need = 0;
  if (ex) {
    if ((st = ex_supported(mode, ops, xt, act, api)) != CUDNN_STATUS_SUCCESS) return st;
    ws_need = ex_backward_workspace(mode, xt);
    reserve_need = ex_reserve(ops, xt);
    if (workspace_bytes < ws_need)
      fake_cuda_fail(api,
                     "workspace of %zu bytes, cudnnGetBatchNormalizationBackwardExWorkspaceSize "
                     "answers %zu for this configuration",
                     workspace_bytes, ws_need);
    if (reserve_bytes < reserve_need)
      fake_cuda_fail(api,
                     "reserve space of %zu bytes, cudnnGetBatchNormalizationTrainingExReserveSpace"
                     "Size answers %zu for this configuration",
                     reserve_bytes, reserve_need);
  }
  pair(saved_mean, saved_inv, api, "savedMean / savedInvVariance");
  b.ops = ops;
  b.alpha_data = host_scalar(alpha_data, xt.type, api, "alphaDataDiff");
  b.beta_data = host_scalar(beta_data, xt.type, api, "betaDataDiff");
  b.alpha_param = host_scalar(alpha_param, xt.type, api, "alphaParamDiff");
  b.beta_param = host_scalar(beta_param, xt.type, api, "betaParamDiff");
  b.epsilon = epsilon;
  b.x = x;
  b.yp = y;
  b.dyp = dy;
  b.dzp = dz;
  b.dxp = dx;
  b.scale = static_cast<const float *>(scale);
  b.saved_mean = static_cast<const float *>(saved_mean);
  b.saved_inv = static_cast<const float *>(saved_inv);
  b.dscale = static_cast<float *>(dscale);
  b.dbias = static_cast<float *>(dbias);
  b.workspace = workspace;
  b.workspace_bytes = ws_need;
  b.reserve = reserve_need ? reserve : nullptr;
  b.api = api;

  const Bn &bn = b.bn;
  const Span dxs = bn.x_span(b.dx, dx, "dx");
  std::vector<Span> in = {bn.x_span(xt, x, "x"), bn.x_span(b.dy, dy, "dy"),
                          bn.param_span(scale, "bnScale")};
  if (act_ops) {
    in.push_back(bn.x_span(b.y, y, "y"));
    /* cuDNN reads the bias to recompute the activation */
    in.push_back(bn.param_span(bias, "bnBias"));
  }
  if (saved_mean) {
    in.push_back(bn.param_span(saved_mean, "savedMean"));
    in.push_back(bn.param_span(saved_inv, "savedInvVariance"));
  }
  std::vector<Span> out = {dxs, bn.param_span(dscale, "dBnScaleResult"),
                           bn.param_span(dbias, "dBnBiasResult")};
  if (add) out.push_back(bn.x_span(b.dz, dz, "dz"));
  const Span ws = {workspace, workspace_bytes, kWorkspaceAlign, "workspace"};
  const Span rs = {reserve, reserve_bytes, kWorkspaceAlign, "reserveSpace"};
  if (reserve_need) in.push_back(rs);
  /* dx may be computed in place of dy (cuDNN allows it); every other output is apart
   * from every input and from the other outputs. */
  for (size_t o = 0; o < out.size(); o++) {
    for (const Span &i : in)
      if (!(o == 0 && i.p == dy)) check_disjoint(out[o], i, api);
    for (size_t p = o + 1; p < out.size(); p++) check_disjoint(out[o], out[p], api);
  }
  std::vector<Span> spans = in;
  spans.insert(spans.end(), out.begin(), out.end());
  if (ws_need) {
    for (const Span &s : spans) check_disjoint(ws, s, api);
    spans.push_back(ws);
  }
  run_on(h.stream, api, spans, [b]() { backward(b); });
  return CUDNN_STATUS_SUCCESS;
}

} // namespace
} // namespace fake_dnn

using namespace fake_dnn;

extern "C" {

cudnnStatus_t cudnnDeriveBNTensorDescriptor(cudnnTensorDescriptor_t derived,
                                            const cudnnTensorDescriptor_t x_desc,
                                            cudnnBatchNormMode_t mode) {
  static const char api[] = "cudnnDeriveBNTensorDescriptor";
  const Tensor x = tensor_of(x_desc, api, "xDesc");
  if (!valid_mode(mode)) return fail_status(CUDNN_STATUS_BAD_PARAM, api, "mode %d", (int)mode);
  const bool spatial = mode != CUDNN_BATCHNORM_PER_ACTIVATION;
  const cudnnDataType_t type = x.type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  return cudnnSetTensor4dDescriptor(derived, CUDNN_TENSOR_NCHW, type, 1, x.c, spatial ? 1 : x.h,
                                    spatial ? 1 : x.w);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha_p, const void *beta_p,
    const cudnnTensorDescriptor_t x_desc, const void *x, const cudnnTensorDescriptor_t y_desc,
    void *y, const cudnnTensorDescriptor_t param_desc, const void *scale, const void *bias,
    const void *est_mean, const void *est_var, double epsilon) {
  static const char api[] = "cudnnBatchNormalizationForwardInference";
  const Handle h = handle_of(handle, api);
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), yt = tensor_of(y_desc, api, "yDesc");
  const Tensor param = tensor_of(param_desc, api, "bnScaleBiasMeanVarDesc");
  Bn bn;
  cudnnStatus_t st = make_bn(mode, xt, {&yt}, param, epsilon, api, &bn);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const float alpha = host_scalar(alpha_p, xt.type, api, "alpha");
  const float beta = host_scalar(beta_p, xt.type, api, "beta");
  const Span xs = bn.x_span(xt, x, "x"), ys = bn.x_span(yt, y, "y");
  std::vector<Span> spans = {xs,
                             ys,
                             bn.param_span(scale, "bnScale"),
                             bn.param_span(bias, "bnBias"),
                             bn.param_span(est_mean, "estimatedMean"),
                             bn.param_span(est_var, "estimatedVariance")};
  for (size_t i = 2; i < spans.size(); i++) check_disjoint(ys, spans[i], api);
  const float *sc = static_cast<const float *>(scale), *bi = static_cast<const float *>(bias);
  const float *mu = static_cast<const float *>(est_mean), *va = static_cast<const float *>(est_var);
  run_on(h.stream, api, spans, [=]() {
    std::vector<float> v((size_t)xt.count());
    load_nchw(xt, x, v.data());
    const int64_t hw = bn.hw();
    for (int n = 0; n < xt.n; n++)
      for (int c = 0; c < xt.c; c++)
        for (int64_t i = 0; i < hw; i++) {
          const size_t at = (size_t)(((int64_t)n * xt.c + c) * hw + i);
          const int64_t g = bn.group(c, i);
          v[at] = (float)((double)sc[g] * (v[at] - mu[g]) / std::sqrt((double)va[g] + epsilon) +
                          bi[g]);
        }
    store_nchw(yt, y, v.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t x_desc, const void *x, const cudnnTensorDescriptor_t y_desc,
    void *y, const cudnnTensorDescriptor_t param_desc, const void *scale, const void *bias,
    double factor, void *run_mean, void *run_var, double epsilon, void *save_mean, void *save_inv) {
  return training_forward(handle, mode, CUDNN_BATCHNORM_OPS_BN, false, alpha, beta, x_desc, x,
                          nullptr, nullptr, y_desc, y, param_desc, scale, bias, factor, run_mean,
                          run_var, epsilon, save_mean, save_inv, nullptr, nullptr, 0, nullptr, 0,
                          "cudnnBatchNormalizationForwardTraining");
}

cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops, const void *alpha,
    const void *beta, const cudnnTensorDescriptor_t x_desc, const void *x,
    const cudnnTensorDescriptor_t z_desc, const void *z, const cudnnTensorDescriptor_t y_desc,
    void *y, const cudnnTensorDescriptor_t param_desc, const void *scale, const void *bias,
    double factor, void *run_mean, void *run_var, double epsilon, void *save_mean, void *save_inv,
    cudnnActivationDescriptor_t act, void *workspace, size_t workspace_bytes, void *reserve,
    size_t reserve_bytes) {
  return training_forward(handle, mode, ops, true, alpha, beta, x_desc, x, z_desc, z, y_desc, y,
                          param_desc, scale, bias, factor, run_mean, run_var, epsilon, save_mean,
                          save_inv, act, workspace, workspace_bytes, reserve, reserve_bytes,
                          "cudnnBatchNormalizationForwardTrainingEx");
}

cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha_data, const void *beta_data,
    const void *alpha_param, const void *beta_param, const cudnnTensorDescriptor_t x_desc,
    const void *x, const cudnnTensorDescriptor_t dy_desc, const void *dy,
    const cudnnTensorDescriptor_t dx_desc, void *dx, const cudnnTensorDescriptor_t param_desc,
    const void *scale, void *dscale, void *dbias, double epsilon, const void *saved_mean,
    const void *saved_inv) {
  return training_backward(handle, mode, CUDNN_BATCHNORM_OPS_BN, false, alpha_data, beta_data,
                           alpha_param, beta_param, x_desc, x, nullptr, nullptr, dy_desc, dy,
                           nullptr, nullptr, dx_desc, dx, param_desc, scale, nullptr, dscale, dbias,
                           epsilon, saved_mean, saved_inv, nullptr, nullptr, 0, nullptr, 0,
                           "cudnnBatchNormalizationBackward");
}

cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
    const void *alpha_data, const void *beta_data, const void *alpha_param, const void *beta_param,
    const cudnnTensorDescriptor_t x_desc, const void *x, const cudnnTensorDescriptor_t y_desc,
    const void *y, const cudnnTensorDescriptor_t dy_desc, const void *dy,
    const cudnnTensorDescriptor_t dz_desc, void *dz, const cudnnTensorDescriptor_t dx_desc,
    void *dx, const cudnnTensorDescriptor_t param_desc, const void *scale, const void *bias,
    void *dscale, void *dbias, double epsilon, const void *saved_mean, const void *saved_inv,
    cudnnActivationDescriptor_t act, void *workspace, size_t workspace_bytes, void *reserve,
    size_t reserve_bytes) {
  return training_backward(handle, mode, ops, true, alpha_data, beta_data, alpha_param, beta_param,
                           x_desc, x, y_desc, y, dy_desc, dy, dz_desc, dz, dx_desc, dx, param_desc,
                           scale, bias, dscale, dbias, epsilon, saved_mean, saved_inv, act,
                           workspace, workspace_bytes, reserve, reserve_bytes,
                           "cudnnBatchNormalizationBackwardEx");
}

cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
    const cudnnTensorDescriptor_t x_desc, const cudnnTensorDescriptor_t z_desc,
    const cudnnTensorDescriptor_t y_desc, const cudnnTensorDescriptor_t param_desc,
    const cudnnActivationDescriptor_t act, size_t *bytes) {
  static const char api[] = "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize";
  handle_of(handle, api);
  if (!bytes) fake_cuda_fail(api, "NULL size pointer");
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), yt = tensor_of(y_desc, api, "yDesc");
  const Tensor zt = optional_tensor(z_desc, api, "zDesc");
  const Tensor param = tensor_of(param_desc, api, "bnScaleBiasMeanVarDesc");
  if (ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION && !z_desc)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "BN_ADD_ACTIVATION without zDesc");
  Bn bn;
  cudnnStatus_t st = make_bn(mode, xt, {&yt, z_desc ? &zt : nullptr}, param, 0.0, api, &bn);
  if (st == CUDNN_STATUS_SUCCESS) st = ex_supported(mode, ops, xt, act, api);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *bytes = ex_forward_workspace(mode, xt);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
    const cudnnTensorDescriptor_t x_desc, const cudnnTensorDescriptor_t y_desc,
    const cudnnTensorDescriptor_t dy_desc, const cudnnTensorDescriptor_t dz_desc,
    const cudnnTensorDescriptor_t dx_desc, const cudnnTensorDescriptor_t param_desc,
    const cudnnActivationDescriptor_t act, size_t *bytes) {
  static const char api[] = "cudnnGetBatchNormalizationBackwardExWorkspaceSize";
  handle_of(handle, api);
  if (!bytes) fake_cuda_fail(api, "NULL size pointer");
  const Tensor xt = tensor_of(x_desc, api, "xDesc"), dyt = tensor_of(dy_desc, api, "dyDesc");
  const Tensor dxt = tensor_of(dx_desc, api, "dxDesc");
  const Tensor yt = optional_tensor(y_desc, api, "yDesc"),
               dzt = optional_tensor(dz_desc, api, "dzDesc");
  const Tensor param = tensor_of(param_desc, api, "dBnScaleBiasDesc");
  if (ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION && !dz_desc)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "BN_ADD_ACTIVATION without dzDesc");
  if (fused(ops) && !y_desc)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "bnOps %d without yDesc", (int)ops);
  Bn bn;
  cudnnStatus_t st = make_bn(mode, xt,
                             {&dyt, &dxt, y_desc ? &yt : nullptr, dz_desc ? &dzt : nullptr}, param,
                             0.0, api, &bn);
  if (st == CUDNN_STATUS_SUCCESS) st = ex_supported(mode, ops, xt, act, api);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *bytes = ex_backward_workspace(mode, xt);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
    const cudnnActivationDescriptor_t act, const cudnnTensorDescriptor_t x_desc, size_t *bytes) {
  static const char api[] = "cudnnGetBatchNormalizationTrainingExReserveSpaceSize";
  handle_of(handle, api);
  if (!bytes) fake_cuda_fail(api, "NULL size pointer");
  const Tensor xt = tensor_of(x_desc, api, "xDesc");
  if (!dtype_size(xt.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "data type %s", dtype_name(xt.type));
  cudnnStatus_t st = ex_supported(mode, ops, xt, act, api);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *bytes = ex_reserve(ops, xt);
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"

/* fake_cudnn_conv.cpp — the checking fake's cuDNN convolutions: output size, algorithm
 * heuristics (cudnnGet*Algorithm_v7), "timing" (cudnnFind*AlgorithmEx), workspace sizes,
 * and forward / backward-data / backward-filter with alpha and beta (beta 1 accumulates),
 * groups, dilation, stride, symmetric pads, NCHW / NHWC tensors, KCRS / KRSC filters,
 * fp32 / fp16 / bf16 data computed in fp32 and rounded to nearest even on store.
 *
 * Algorithms. Every algorithm computes the same thing (im2col and a blocked fp32 GEMM);
 * they differ in what they support and in the workspace they ask for, so the caller's
 * workspace logic is exercised: some need none, some a little, GEMM / ALGO_1 an im2col
 * buffer (which really lives in the workspace), FFT and Winograd much more, and the
 * tensor-core variants on half data 4 KiB more than the others (the exact size follows
 * the descriptor's math type, as cuDNN's does). The call checks the workspace it is
 * given against the size cudnnGet*WorkspaceSize answers for the same algorithm,
 * problem and math type at the time of the call, and scribbles over it before use.
 *
 *   forward             IMPLICIT_GEMM (none), IMPLICIT_PRECOMP_GEMM (small), GEMM (im2col),
 *                       FFT and WINOGRAD_NONFUSED (large; fft_ok, winograd_ok say where);
 *                       DIRECT, FFT_TILING, WINOGRAD: NOT_SUPPORTED
 *   backward data       ALGO_0 (none), ALGO_1 (col), FFT, WINOGRAD_NONFUSED;
 *                       FFT_TILING, WINOGRAD: NOT_SUPPORTED
 *   backward filter     ALGO_0 (none), ALGO_1 (col), ALGO_3 (small), FFT,
 *                       WINOGRAD_NONFUSED; WINOGRAD, FFT_TILING: NOT_SUPPORTED
 *
 * Heuristics put an algorithm that needs a workspace first (so the caller's workspace
 * logic runs without autotune too); "timing" makes Winograd fastest where it applies,
 * then the im2col ones, with fake times that follow the problem's arithmetic (and
 * tensor-core math twice as fast). On half data each algorithm comes twice, with
 * CUDNN_TENSOR_OP_MATH (faster) and CUDNN_DEFAULT_MATH; on fp32 once, with the
 * descriptor's math type. Find reports an algorithm whose workspace exceeds the one
 * given with CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED (cuDNN's ALLOC_FAILED),
 * refuses to run under stream capture, and overwrites its output with NaN.
 *
 * Alignment: every buffer to its element size; x, w, y (and gradients) of half data to
 * 16 bytes when the descriptor's math type is a tensor-core one (TENSOR_OP_MATH or
 * _ALLOW_CONVERSION); the workspace to 16 bytes. */
#include <algorithm>
#include <cstring>

#include "fake_dnn.h"

namespace fake_dnn {

/* ---- the GEMM ----------------------------------------------------------------------- */

namespace {

constexpr int64_t kBlock = 256; /* columns of C per pass: 4 rows of it stay in L1 */

/* c_r[0..kBlock) += a_r * b[0..kBlock) for four rows. The constant trip count and the
 * restrict pointers let -O2 vectorize it without runtime checks. */
inline void axpy4_block(float a0, float a1, float a2, float a3, const float *__restrict b,
                        float *__restrict c0, float *__restrict c1, float *__restrict c2,
                        float *__restrict c3) {
  for (int64_t j = 0; j < kBlock; j++) {
    const float bv = b[j];
    c0[j] += a0 * bv;
    c1[j] += a1 * bv;
    c2[j] += a2 * bv;
    c3[j] += a3 * bv;
  }
}
inline void axpy1_block(float a, const float *__restrict b, float *__restrict c) {
  for (int64_t j = 0; j < kBlock; j++) c[j] += a * b[j];
}

} // namespace

constexpr int64_t kDepth = 64; /* rows of B per pass: a [kDepth x kBlock] block stays in L2 */

/* C[M x N] (row stride ldc) = (or +=) A * B, A(i, k) = A[i * a_rs + k * a_cs], B row-major
 * [K x N] with row stride ldb. fp32 throughout. Blocked so a block of B is reused from
 * cache by every four rows of C; a partial block of columns is copied into zero-padded
 * buffers, so the kernels always run their constant trip count. */
void gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t a_rs, int64_t a_cs,
              const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
  if (!accumulate)
    for (int64_t i = 0; i < M; i++) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
  std::vector<float> packed; /* a partial block of B, [kDepth x kBlock] */
  alignas(64) float tail_c[4][kBlock];
  for (int64_t n0 = 0; n0 < N; n0 += kBlock) {
    const int64_t nb = std::min(kBlock, N - n0);
    const bool full = nb == kBlock;
    for (int64_t k0 = 0; k0 < K; k0 += kDepth) {
      const int64_t kd = std::min(kDepth, K - k0);
      const float *bblk = B + k0 * ldb + n0;
      int64_t bld = ldb;
      if (!full) {
        packed.assign((size_t)(kd * kBlock), 0.0f);
        for (int64_t k = 0; k < kd; k++)
          std::copy(bblk + k * ldb, bblk + k * ldb + nb, packed.data() + k * kBlock);
        bblk = packed.data();
        bld = kBlock;
      }
      for (int64_t i = 0; i < M; i += 4) {
        const int rows = (int)std::min<int64_t>(4, M - i);
        float *c[4];
        for (int r = 0; r < 4; r++) {
          if (full && r < rows) {
            c[r] = C + (i + r) * ldc + n0;
            continue;
          }
          /* a partial block, or a row past M: computed in scratch, copied back below */
          std::fill(tail_c[r], tail_c[r] + kBlock, 0.0f);
          if (r < rows) std::copy(C + (i + r) * ldc + n0, C + (i + r) * ldc + n0 + nb, tail_c[r]);
          c[r] = tail_c[r];
        }
        for (int64_t k = 0; k < kd; k++) {
          const float *a = A + i * a_rs + (k0 + k) * a_cs;
          const float *b = bblk + k * bld;
          if (rows == 4)
            axpy4_block(a[0], a[a_rs], a[2 * a_rs], a[3 * a_rs], b, c[0], c[1], c[2], c[3]);
          else
            for (int r = 0; r < rows; r++) axpy1_block(a[r * a_rs], b, c[r]);
        }
        if (!full)
          for (int r = 0; r < rows; r++)
            std::copy(tail_c[r], tail_c[r] + nb, C + (i + r) * ldc + n0);
      }
    }
  }
}

/* ---- problems ----------------------------------------------------------------------- */

namespace {

enum Dir { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

struct Problem {
  Tensor x, y; /* x: input (or its gradient); y: output (or its gradient) */
  Filter w;
  Convolution conv;
  int groups = 1, cpg = 0, kpg = 0, oh = 0, ow = 0;
  int64_t J() const { return (int64_t)cpg * w.r * w.s; } /* one output's inputs, per group */
  int64_t P() const { return (int64_t)oh * ow; }
  /* 1x1, stride 1, no padding: the image itself is the im2col matrix */
  bool pointwise() const {
    return w.r == 1 && w.s == 1 && conv.stride_h == 1 && conv.stride_w == 1 && conv.pad_h == 0 &&
           conv.pad_w == 0;
  }
  bool tensor_op() const {
    return is_half_type(x.type) && (conv.math == CUDNN_TENSOR_OP_MATH ||
                                    conv.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  }
};

/* The output size of x (*) w, or BAD_PARAM. */
cudnnStatus_t output_dims(const Tensor &x, const Filter &w, const Convolution &conv,
                          const char *api, int dims[4]) {
  if (x.c != w.c * conv.groups)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "x has %d channels, the filter %d per group times %d groups", x.c, w.c,
                       conv.groups);
  if (w.k % conv.groups)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "%d filters do not divide into %d groups", w.k,
                       conv.groups);
  const int64_t eff_h = (int64_t)(w.r - 1) * conv.dilation_h + 1;
  const int64_t eff_w = (int64_t)(w.s - 1) * conv.dilation_w + 1;
  const int64_t span_h = (int64_t)x.h + 2 * conv.pad_h - eff_h;
  const int64_t span_w = (int64_t)x.w + 2 * conv.pad_w - eff_w;
  if (span_h < 0 || span_w < 0)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "the dilated filter %lldx%lld is larger than the padded input %lldx%lld",
                       (long long)eff_h, (long long)eff_w, (long long)x.h + 2 * conv.pad_h,
                       (long long)x.w + 2 * conv.pad_w);
  dims[0] = x.n;
  dims[1] = w.k;
  dims[2] = (int)(1 + span_h / conv.stride_h);
  dims[3] = (int)(1 + span_w / conv.stride_w);
  return CUDNN_STATUS_SUCCESS;
}

/* x, w, conv and y together: BAD_PARAM when they disagree, NOT_SUPPORTED for types. */
cudnnStatus_t make_problem(const Tensor &x, const Filter &w, const Convolution &conv,
                           const Tensor &y, const char *api, Problem *out) {
  if (x.type != y.type || x.type != w.type)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "x %s, filter %s, y %s: one type for all three",
                       dtype_name(x.type), dtype_name(w.type), dtype_name(y.type));
  if (!dtype_size(x.type))
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "data type %s", dtype_name(x.type));
  /* fp32 data computes in fp32; half in fp32 (pseudo half) or fp16 (true half); bf16 in
   * fp32 only. The fake computes in fp32 whatever was asked. */
  const bool compute_ok = conv.compute == CUDNN_DATA_FLOAT ||
                          (conv.compute == CUDNN_DATA_HALF && x.type == CUDNN_DATA_HALF);
  if (!compute_ok)
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api, "compute type %s for %s data",
                       dtype_name(conv.compute), dtype_name(x.type));
  int dims[4];
  cudnnStatus_t st = output_dims(x, w, conv, api, dims);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (y.n != dims[0] || y.c != dims[1] || y.h != dims[2] || y.w != dims[3])
    return fail_status(CUDNN_STATUS_BAD_PARAM, api,
                       "y is [%d, %d, %d, %d], the convolution gives [%d, %d, %d, %d]", y.n, y.c,
                       y.h, y.w, dims[0], dims[1], dims[2], dims[3]);
  out->x = x;
  out->y = y;
  out->w = w;
  out->conv = conv;
  out->groups = conv.groups;
  out->cpg = w.c;
  out->kpg = w.k / conv.groups;
  out->oh = dims[2];
  out->ow = dims[3];
  return CUDNN_STATUS_SUCCESS;
}

/* ---- algorithms --------------------------------------------------------------------- */

struct AlgoSpec {
  bool supported = false;
  size_t workspace = 0;
  float rate = 1.0f; /* relative speed, for the fake times */
  cudnnDeterminism_t determinism = CUDNN_DETERMINISTIC;
  bool col_in_workspace = false; /* the im2col buffer is the workspace's start */
};

constexpr int kAlgoCount[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};

size_t align16(size_t x) { return (x + 15) / 16 * 16; }

/* FFT: unit stride and dilation, one group, packed NCHW (as cuDNN's FFT algorithms). */
bool fft_ok(const Problem &p) {
  return p.conv.stride_h == 1 && p.conv.stride_w == 1 && p.conv.dilation_h == 1 &&
         p.conv.dilation_w == 1 && p.groups == 1 && p.x.packed_nchw() && p.y.packed_nchw();
}
size_t fft_bytes(const Problem &p) {
  const size_t fh = (size_t)p.x.h + 2 * p.conv.pad_h, fw = (size_t)p.x.w + 2 * p.conv.pad_w;
  const size_t planes = (size_t)p.x.n * p.x.c + (size_t)p.x.c * p.w.k + (size_t)p.x.n * p.w.k;
  return align16(planes * fh * (fw / 2 + 1) * 8); /* complex fp32 spectra */
}
/* Winograd F(4x4, 3x3): 3x3 filters, unit stride and dilation, one group. */
bool winograd_ok(const Problem &p) {
  return p.w.r == 3 && p.w.s == 3 && p.conv.stride_h == 1 && p.conv.stride_w == 1 &&
         p.conv.dilation_h == 1 && p.conv.dilation_w == 1 && p.groups == 1;
}
size_t winograd_bytes(const Problem &p) {
  const size_t tiles = (size_t)((p.oh + 3) / 4) * ((p.ow + 3) / 4);
  return align16(((size_t)p.x.n * tiles * ((size_t)p.x.c + p.w.k) + (size_t)p.x.c * p.w.k) * 36 *
                 4);
}

/* What `algo` of direction `dir` is on problem p under math type `math`. */
AlgoSpec algo_spec(const Problem &p, Dir dir, int algo, cudnnMathType_t math) {
  AlgoSpec a;
  const size_t col = (size_t)p.J() * (size_t)p.P() * sizeof(float);
  if (dir == kForward) {
    switch (algo) {
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: a = {true, 0, 1.0f}; break;
      case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
        a = {true, align16((size_t)p.J() * 8), 1.6f}; /* an offset table per filter tap */
        break;
      case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
        a = {true, col, 1.8f};
        a.col_in_workspace = true;
        break;
      case CUDNN_CONVOLUTION_FWD_ALGO_FFT: a = {fft_ok(p), fft_bytes(p), 1.2f}; break;
      case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
        a = {winograd_ok(p), winograd_bytes(p), 2.2f};
        break;
      default: break;
    }
  } else if (dir == kBackwardData) {
    switch (algo) {
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: a = {true, 0, 1.0f, CUDNN_NON_DETERMINISTIC}; break;
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
        a = {true, col, 1.7f};
        a.col_in_workspace = true;
        break;
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: a = {fft_ok(p), fft_bytes(p), 1.2f}; break;
      case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
        a = {winograd_ok(p), winograd_bytes(p), 2.2f};
        break;
      default: break;
    }
  } else {
    switch (algo) {
      case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: a = {true, 0, 1.0f, CUDNN_NON_DETERMINISTIC}; break;
      case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
        a = {true, col, 1.7f};
        a.col_in_workspace = true;
        break;
      case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: a = {fft_ok(p), fft_bytes(p), 1.2f}; break;
      case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
        a = {true, align16((size_t)p.w.k * p.J() * sizeof(float)), 1.4f, CUDNN_NON_DETERMINISTIC};
        break;
      case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
        a = {winograd_ok(p), winograd_bytes(p), 2.2f};
        break;
      default: break;
    }
  }
  if (!a.supported) return AlgoSpec();
  const bool tensor_op = is_half_type(p.x.type) && (math == CUDNN_TENSOR_OP_MATH ||
                                                    math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  if (tensor_op) {
    if (a.workspace) a.workspace += 4096; /* per math type, as cuDNN sizes them */
    a.rate *= 2.0f;
  }
  return a;
}

/* The heuristics' order: small workspace first. */
const int kOrderFwd[] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                         CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                         CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
                         CUDNN_CONVOLUTION_FWD_ALGO_FFT,
                         CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
                         CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
                         CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD};
const int kOrderBwdData[] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD};
const int kOrderBwdFilter[] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING};

struct Candidate {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};

/* Every (algorithm, math type) of the direction in heuristic order: supported ones
 * with tensor-core math first on half data, unsupported ones last (once each). */
std::vector<Candidate> candidates(const Problem &p, Dir dir) {
  const int *order = dir == kForward        ? kOrderFwd
                     : dir == kBackwardData ? kOrderBwdData
                                            : kOrderBwdFilter;
  const int count = kAlgoCount[dir];
  std::vector<cudnnMathType_t> maths;
  if (is_half_type(p.x.type) && p.conv.math != CUDNN_FMA_MATH)
    maths = {CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH};
  else maths = {p.conv.math};
  const double flops = 2.0 * p.x.n * p.w.k * (double)p.P() * (double)p.J();
  std::vector<Candidate> out, unsupported;
  for (cudnnMathType_t m : maths)
    for (int i = 0; i < count; i++) {
      const AlgoSpec a = algo_spec(p, dir, order[i], m);
      if (!a.supported) {
        if (m == maths[0])
          unsupported.push_back({order[i], CUDNN_STATUS_NOT_SUPPORTED, -1.0f, 0,
                                 CUDNN_DETERMINISTIC, m});
        continue;
      }
      const float time = (float)(0.002 + flops / (a.rate * 1e9));
      out.push_back({order[i], CUDNN_STATUS_SUCCESS, time, a.workspace, a.determinism, m});
    }
  out.insert(out.end(), unsupported.begin(), unsupported.end());
  return out;
}

template <class Perf, class Algo>
void fill_perf(const std::vector<Candidate> &c, int requested, int *returned, Perf *perf,
               bool timed) {
  const int n = std::min<int>(requested, (int)c.size());
  for (int i = 0; i < n; i++) {
    std::memset(&perf[i], 0, sizeof perf[i]);
    perf[i].algo = (Algo)c[i].algo;
    perf[i].status = c[i].status;
    perf[i].time = timed ? c[i].time : -1.0f;
    perf[i].memory = c[i].memory;
    perf[i].determinism = c[i].determinism;
    perf[i].mathType = c[i].math;
  }
  *returned = n;
}

/* ---- the computation ---------------------------------------------------------------- */

/* col[j][p] (J x P) of image x (its group's cpg channels, [cpg][H][W]). */
void im2col(const Problem &p, const float *x, float *col) {
  const Convolution &cv = p.conv;
  const int H = p.x.h, W = p.x.w;
  float *row = col;
  for (int c = 0; c < p.cpg; c++)
    for (int kr = 0; kr < p.w.r; kr++)
      for (int ks = 0; ks < p.w.s; ks++, row += p.P())
        for (int oy = 0; oy < p.oh; oy++) {
          float *dst = row + (int64_t)oy * p.ow;
          const int ih = oy * cv.stride_h - cv.pad_h + kr * cv.dilation_h;
          if (ih < 0 || ih >= H) {
            std::fill(dst, dst + p.ow, 0.0f);
            continue;
          }
          const float *src = x + ((int64_t)c * H + ih) * W;
          for (int ox = 0; ox < p.ow; ox++) {
            const int iw = ox * cv.stride_w - cv.pad_w + ks * cv.dilation_w;
            dst[ox] = iw >= 0 && iw < W ? src[iw] : 0.0f;
          }
        }
}

/* The transpose, colT[p][j] (P x J), for the filter gradient's GEMM. */
void im2col_t(const Problem &p, const float *x, float *colt) {
  const Convolution &cv = p.conv;
  const int H = p.x.h, W = p.x.w;
  const int64_t J = p.J();
  int64_t j = 0;
  for (int c = 0; c < p.cpg; c++)
    for (int kr = 0; kr < p.w.r; kr++)
      for (int ks = 0; ks < p.w.s; ks++, j++)
        for (int oy = 0; oy < p.oh; oy++) {
          const int ih = oy * cv.stride_h - cv.pad_h + kr * cv.dilation_h;
          const bool row_in = ih >= 0 && ih < H;
          const float *src = x + ((int64_t)c * H + (row_in ? ih : 0)) * W;
          for (int ox = 0; ox < p.ow; ox++) {
            const int iw = ox * cv.stride_w - cv.pad_w + ks * cv.dilation_w;
            colt[((int64_t)oy * p.ow + ox) * J + j] = row_in && iw >= 0 && iw < W ? src[iw] : 0.0f;
          }
        }
}

/* dx (the group's [cpg][H][W]) += col2im(dcol). */
void col2im_add(const Problem &p, const float *dcol, float *dx) {
  const Convolution &cv = p.conv;
  const int H = p.x.h, W = p.x.w;
  const float *row = dcol;
  for (int c = 0; c < p.cpg; c++)
    for (int kr = 0; kr < p.w.r; kr++)
      for (int ks = 0; ks < p.w.s; ks++, row += p.P())
        for (int oy = 0; oy < p.oh; oy++) {
          const int ih = oy * cv.stride_h - cv.pad_h + kr * cv.dilation_h;
          if (ih < 0 || ih >= H) continue;
          float *dst = dx + ((int64_t)c * H + ih) * W;
          const float *src = row + (int64_t)oy * p.ow;
          for (int ox = 0; ox < p.ow; ox++) {
            const int iw = ox * cv.stride_w - cv.pad_w + ks * cv.dilation_w;
            if (iw >= 0 && iw < W) dst[iw] += src[ox];
          }
        }
}

/* CUDNN_CONVOLUTION flips the filter spatially (true convolution); cross-correlation
 * (what every framework calls convolution) does not. */
void flip_filter(const Problem &p, std::vector<float> &w) {
  if (p.conv.mode != CUDNN_CONVOLUTION) return;
  const int R = p.w.r, S = p.w.s;
  for (int64_t f = 0; f < (int64_t)p.w.k * p.w.c; f++) {
    float *t = w.data() + f * R * S;
    std::reverse(t, t + (int64_t)R * S); /* (r, s) -> (R-1-r, S-1-s) */
  }
}

/* y = x (*) w, all logical NCHW / KCRS fp32; col: J x P scratch (unused when pointwise). */
void forward(const Problem &p, const float *x, const float *w, float *y, float *col) {
  const int64_t HW = (int64_t)p.x.h * p.x.w, J = p.J(), P = p.P();
  for (int n = 0; n < p.x.n; n++)
    for (int g = 0; g < p.groups; g++) {
      const float *xg = x + ((int64_t)n * p.x.c + (int64_t)g * p.cpg) * HW;
      const float *b = xg;
      if (!p.pointwise()) {
        im2col(p, xg, col);
        b = col;
      }
      gemm_f32(p.kpg, P, J, w + (int64_t)g * p.kpg * J, J, 1, b, P,
               y + ((int64_t)n * p.w.k + (int64_t)g * p.kpg) * P, P, false);
    }
}

/* dx = dy (*)^T w; dcol: J x P scratch (unused when pointwise). */
void backward_data(const Problem &p, const float *dy, const float *w, float *dx, float *dcol) {
  const int64_t HW = (int64_t)p.x.h * p.x.w, J = p.J(), P = p.P();
  if (!p.pointwise()) std::fill(dx, dx + p.x.count(), 0.0f);
  for (int n = 0; n < p.x.n; n++)
    for (int g = 0; g < p.groups; g++) {
      float *dxg = dx + ((int64_t)n * p.x.c + (int64_t)g * p.cpg) * HW;
      float *out = p.pointwise() ? dxg : dcol;
      /* dcol[J x P] = W_g^T [J x kpg] dy_g [kpg x P]: A(j, k) = W_g[k * J + j]. */
      gemm_f32(J, P, p.kpg, w + (int64_t)g * p.kpg * J, 1, J,
               dy + ((int64_t)n * p.w.k + (int64_t)g * p.kpg) * P, P, out, P, false);
      if (!p.pointwise()) col2im_add(p, dcol, dxg);
    }
}

/* dw = sum over images of dy_g colT; colt: P x J scratch. */
void backward_filter(const Problem &p, const float *x, const float *dy, float *dw, float *colt) {
  const int64_t HW = (int64_t)p.x.h * p.x.w, J = p.J(), P = p.P();
  std::fill(dw, dw + p.w.count(), 0.0f);
  for (int n = 0; n < p.x.n; n++)
    for (int g = 0; g < p.groups; g++) {
      im2col_t(p, x + ((int64_t)n * p.x.c + (int64_t)g * p.cpg) * HW, colt);
      gemm_f32(p.kpg, J, P, dy + ((int64_t)n * p.w.k + (int64_t)g * p.kpg) * P, P, 1, colt, J,
               dw + (int64_t)g * p.kpg * J, J, true);
    }
}

/* ---- the calls ---------------------------------------------------------------------- */

const char *const kDirNames[3] = {"forward", "backward data", "backward filter"};
const char *const kWorkspaceApi[3] = {"cudnnGetConvolutionForwardWorkspaceSize",
                                      "cudnnGetConvolutionBackwardDataWorkspaceSize",
                                      "cudnnGetConvolutionBackwardFilterWorkspaceSize"};

const char *math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA_MATH";
  }
  return "unknown math";
}

/* The descriptors of one call, as (x, w, y) whatever the direction. */
cudnnStatus_t problem_of(cudnnTensorDescriptor_t x_desc, const char *x_name,
                         cudnnFilterDescriptor_t w_desc, const char *w_name,
                         cudnnConvolutionDescriptor_t conv_desc, cudnnTensorDescriptor_t y_desc,
                         const char *y_name, const char *api, Problem *p) {
  const Tensor x = tensor_of(x_desc, api, x_name), y = tensor_of(y_desc, api, y_name);
  const Filter w = filter_of(w_desc, api, w_name);
  const Convolution conv = convolution_of(conv_desc, api, "convDesc");
  return make_problem(x, w, conv, y, api, p);
}

cudnnStatus_t workspace_size(const Problem &p, Dir dir, int algo, const char *api, size_t *bytes) {
  if (!bytes) fake_cuda_fail(api, "NULL size pointer");
  if (algo < 0 || algo >= kAlgoCount[dir])
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "no %s algorithm %d", kDirNames[dir], algo);
  const AlgoSpec a = algo_spec(p, dir, algo, p.conv.math);
  if (!a.supported)
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                       "%s algorithm %d does not support this convolution", kDirNames[dir], algo);
  *bytes = a.workspace;
  return CUDNN_STATUS_SUCCESS;
}

/* The buffers of one convolution call: in0, in1 read; out written. */
struct Buffers {
  Span in0, in1, out, workspace;
};

/* Checks of a compute call beyond the descriptors: the algorithm, the workspace against
 * its size, the buffers, the scaling factors. NOT_SUPPORTED for an algorithm the problem
 * cannot use (as cuDNN), loud failures for the rest. */
cudnnStatus_t check_call(const Problem &p, Dir dir, int algo, const Buffers &b, const char *api,
                         AlgoSpec *spec) {
  if (algo < 0 || algo >= kAlgoCount[dir])
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "no %s algorithm %d", kDirNames[dir], algo);
  *spec = algo_spec(p, dir, algo, p.conv.math);
  if (!spec->supported)
    return fail_status(CUDNN_STATUS_NOT_SUPPORTED, api,
                       "%s algorithm %d does not support this convolution", kDirNames[dir], algo);
  if (b.workspace.bytes < spec->workspace)
    fake_cuda_fail(api,
                   "workspace of %zu bytes for %s algorithm %d in %s, which needs %zu (%s answers "
                   "that for this algorithm, convolution and math type)",
                   b.workspace.bytes, kDirNames[dir], algo, math_name(p.conv.math), spec->workspace,
                   kWorkspaceApi[dir]);
  check_spans({b.in0, b.in1, b.out}, api);
  if (b.workspace.bytes) check_spans({b.workspace}, api);
  check_disjoint(b.out, b.in0, api);
  check_disjoint(b.out, b.in1, api);
  check_disjoint(b.workspace, b.in0, api);
  check_disjoint(b.workspace, b.in1, api);
  check_disjoint(b.workspace, b.out, api);
  return CUDNN_STATUS_SUCCESS;
}

std::vector<Span> spans_of(const Buffers &b) {
  std::vector<Span> s = {b.in0, b.in1, b.out};
  if (b.workspace.bytes) s.push_back(b.workspace);
  return s;
}

/* The scratch an algorithm computes in: its im2col matrix in the workspace (scribbled
 * first, like the rest of the workspace it asked for), or memory of the fake's own. */
float *scratch_of(const AlgoSpec &a, void *workspace, size_t floats, std::vector<float> &own) {
  if (a.workspace) std::memset(workspace, 0xa5, a.workspace);
  if (a.col_in_workspace) return static_cast<float *>(workspace);
  own.resize(floats);
  return own.data();
}

Span tensor_span(const Problem &p, const Tensor &t, const void *ptr, const char *what) {
  return {ptr, t.extent_bytes(), data_alignment(t.type, p.tensor_op()), what};
}
Span filter_span(const Problem &p, const void *ptr, const char *what) {
  return {ptr, p.w.bytes(), data_alignment(p.w.type, p.tensor_op()), what};
}
Span workspace_span(void *ptr, size_t bytes) { return {ptr, bytes, kWorkspaceAlign, "workSpace"}; }

/* cudnnFind*AlgorithmEx: the candidates "timed" on the caller's buffers, fastest first;
 * the output buffer is overwritten (with NaN) as cuDNN's timing runs overwrite it. */
template <class Perf, class Algo>
cudnnStatus_t find(cudnnHandle_t handle, const Problem &p, Dir dir, const Buffers &b, int requested,
                   int *returned, Perf *perf, const char *api) {
  const Handle h = handle_of(handle, api);
  if (!returned || !perf) fake_cuda_fail(api, "NULL returnedAlgoCount or perfResults");
  if (requested < 1)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "requestedAlgoCount %d", requested);
  if (fake_cuda_capturing(h.stream))
    fake_cuda_fail(api, "under stream capture (it allocates and synchronizes)");
  check_spans({b.in0, b.in1, b.out}, api);
  if (b.workspace.bytes) check_spans({b.workspace}, api);
  check_disjoint(b.out, b.in0, api);
  check_disjoint(b.out, b.in1, api);
  std::vector<Candidate> c = candidates(p, dir), ok, failed;
  for (Candidate &x : c) {
    if (x.status == CUDNN_STATUS_SUCCESS && x.memory > b.workspace.bytes) {
      x.status = CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
      x.time = -1.0f;
    }
    (x.status == CUDNN_STATUS_SUCCESS ? ok : failed).push_back(x);
  }
  std::stable_sort(ok.begin(), ok.end(),
                   [](const Candidate &l, const Candidate &r) { return l.time < r.time; });
  ok.insert(ok.end(), failed.begin(), failed.end());
  fill_perf<Perf, Algo>(ok, requested, returned, perf, true);
  void *out = const_cast<void *>(b.out.p);
  const size_t out_bytes = b.out.bytes;
  run_on(h.stream, api, spans_of(b), [=]() { std::memset(out, 0xff, out_bytes); });
  return CUDNN_STATUS_SUCCESS;
}

} // namespace
} // namespace fake_dnn

using namespace fake_dnn;

extern "C" {

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv_desc,
                                                    const cudnnTensorDescriptor_t in_desc,
                                                    const cudnnFilterDescriptor_t filter_desc,
                                                    int *n, int *c, int *h, int *w) {
  static const char api[] = "cudnnGetConvolution2dForwardOutputDim";
  if (!n || !c || !h || !w) fake_cuda_fail(api, "NULL output pointer");
  const Convolution conv = convolution_of(conv_desc, api, "convDesc");
  const Tensor x = tensor_of(in_desc, api, "inputTensorDesc");
  const Filter f = filter_of(filter_desc, api, "filterDesc");
  int dims[4];
  cudnnStatus_t st = output_dims(x, f, conv, api, dims);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *n = dims[0];
  *c = dims[1];
  *h = dims[2];
  *w = dims[3];
  return CUDNN_STATUS_SUCCESS;
}

/* ---- heuristics and workspace sizes ------------------------------------------------- */

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle,
                                                     const cudnnTensorDescriptor_t x_desc,
                                                     const cudnnFilterDescriptor_t w_desc,
                                                     const cudnnConvolutionDescriptor_t conv_desc,
                                                     const cudnnTensorDescriptor_t y_desc,
                                                     const int requested, int *returned,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf) {
  static const char api[] = "cudnnGetConvolutionForwardAlgorithm_v7";
  handle_of(handle, api);
  if (!returned || !perf) fake_cuda_fail(api, "NULL returnedAlgoCount or perfResults");
  if (requested < 1)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "requestedAlgoCount %d", requested);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "srcDesc", w_desc, "filterDesc", conv_desc, y_desc,
                                "destDesc", api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  fill_perf<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(candidates(p, kForward),
                                                                      requested, returned, perf,
                                                                      false);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w_desc,
    const cudnnTensorDescriptor_t dy_desc, const cudnnConvolutionDescriptor_t conv_desc,
    const cudnnTensorDescriptor_t dx_desc, const int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perf) {
  static const char api[] = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  handle_of(handle, api);
  if (!returned || !perf) fake_cuda_fail(api, "NULL returnedAlgoCount or perfResults");
  if (requested < 1)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "requestedAlgoCount %d", requested);
  Problem p;
  cudnnStatus_t st = problem_of(dx_desc, "gradDesc", w_desc, "filterDesc", conv_desc, dy_desc,
                                "diffDesc", api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  fill_perf<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      candidates(p, kBackwardData), requested, returned, perf, false);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
    const cudnnTensorDescriptor_t dy_desc, const cudnnConvolutionDescriptor_t conv_desc,
    const cudnnFilterDescriptor_t dw_desc, const int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
  static const char api[] = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  handle_of(handle, api);
  if (!returned || !perf) fake_cuda_fail(api, "NULL returnedAlgoCount or perfResults");
  if (requested < 1)
    return fail_status(CUDNN_STATUS_BAD_PARAM, api, "requestedAlgoCount %d", requested);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "srcDesc", dw_desc, "gradDesc", conv_desc, dy_desc,
                                "diffDesc", api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  fill_perf<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      candidates(p, kBackwardFilter), requested, returned, perf, false);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
    const cudnnFilterDescriptor_t w_desc, const cudnnConvolutionDescriptor_t conv_desc,
    const cudnnTensorDescriptor_t y_desc, cudnnConvolutionFwdAlgo_t algo, size_t *bytes) {
  static const char api[] = "cudnnGetConvolutionForwardWorkspaceSize";
  handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", w_desc, "wDesc", conv_desc, y_desc, "yDesc", api,
                                &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return workspace_size(p, kForward, (int)algo, api, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w_desc,
    const cudnnTensorDescriptor_t dy_desc, const cudnnConvolutionDescriptor_t conv_desc,
    const cudnnTensorDescriptor_t dx_desc, cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes) {
  static const char api[] = "cudnnGetConvolutionBackwardDataWorkspaceSize";
  handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(dx_desc, "dxDesc", w_desc, "wDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return workspace_size(p, kBackwardData, (int)algo, api, bytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
    const cudnnTensorDescriptor_t dy_desc, const cudnnConvolutionDescriptor_t conv_desc,
    const cudnnFilterDescriptor_t dw_desc, cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes) {
  static const char api[] = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
  handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", dw_desc, "gradDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return workspace_size(p, kBackwardFilter, (int)algo, api, bytes);
}

/* ---- timing ------------------------------------------------------------------------- */

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc, const void *x,
    const cudnnFilterDescriptor_t w_desc, const void *w,
    const cudnnConvolutionDescriptor_t conv_desc, const cudnnTensorDescriptor_t y_desc, void *y,
    const int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf, void *workspace,
    size_t workspace_bytes) {
  static const char api[] = "cudnnFindConvolutionForwardAlgorithmEx";
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", w_desc, "wDesc", conv_desc, y_desc, "yDesc", api,
                                &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {tensor_span(p, p.x, x, "x"), filter_span(p, w, "w"),
                     tensor_span(p, p.y, y, "y"), workspace_span(workspace, workspace_bytes)};
  return find<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(handle, p, kForward, b,
                                                                        requested, returned, perf,
                                                                        api);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w_desc, const void *w,
    const cudnnTensorDescriptor_t dy_desc, const void *dy,
    const cudnnConvolutionDescriptor_t conv_desc, const cudnnTensorDescriptor_t dx_desc, void *dx,
    const int requested, int *returned, cudnnConvolutionBwdDataAlgoPerf_t *perf, void *workspace,
    size_t workspace_bytes) {
  static const char api[] = "cudnnFindConvolutionBackwardDataAlgorithmEx";
  Problem p;
  cudnnStatus_t st = problem_of(dx_desc, "dxDesc", w_desc, "wDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {filter_span(p, w, "w"), tensor_span(p, p.y, dy, "dy"),
                     tensor_span(p, p.x, dx, "dx"), workspace_span(workspace, workspace_bytes)};
  return find<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(handle, p,
                                                                                kBackwardData, b,
                                                                                requested, returned,
                                                                                perf, api);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc, const void *x,
    const cudnnTensorDescriptor_t dy_desc, const void *dy,
    const cudnnConvolutionDescriptor_t conv_desc, const cudnnFilterDescriptor_t dw_desc, void *dw,
    const int requested, int *returned, cudnnConvolutionBwdFilterAlgoPerf_t *perf, void *workspace,
    size_t workspace_bytes) {
  static const char api[] = "cudnnFindConvolutionBackwardFilterAlgorithmEx";
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", dw_desc, "dwDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {tensor_span(p, p.x, x, "x"), tensor_span(p, p.y, dy, "dy"),
                     filter_span(p, dw, "dw"), workspace_span(workspace, workspace_bytes)};
  return find<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      handle, p, kBackwardFilter, b, requested, returned, perf, api);
}

/* ---- compute ------------------------------------------------------------------------ */

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha_p,
                                      const cudnnTensorDescriptor_t x_desc, const void *x,
                                      const cudnnFilterDescriptor_t w_desc, const void *w,
                                      const cudnnConvolutionDescriptor_t conv_desc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workspace,
                                      size_t workspace_bytes, const void *beta_p,
                                      const cudnnTensorDescriptor_t y_desc, void *y) {
  static const char api[] = "cudnnConvolutionForward";
  const Handle h = handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", w_desc, "wDesc", conv_desc, y_desc, "yDesc", api,
                                &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {tensor_span(p, p.x, x, "x"), filter_span(p, w, "w"),
                     tensor_span(p, p.y, y, "y"), workspace_span(workspace, workspace_bytes)};
  AlgoSpec spec;
  if ((st = check_call(p, kForward, (int)algo, b, api, &spec)) != CUDNN_STATUS_SUCCESS) return st;
  const float alpha = host_scalar(alpha_p, p.y.type, api, "alpha");
  const float beta = host_scalar(beta_p, p.y.type, api, "beta");
  run_on(h.stream, api, spans_of(b), [=]() {
    std::vector<float> xf((size_t)p.x.count()), wf((size_t)p.w.count()), yf((size_t)p.y.count());
    std::vector<float> own;
    load_nchw(p.x, x, xf.data());
    load_kcrs(p.w, w, wf.data());
    flip_filter(p, wf);
    float *col = scratch_of(spec, workspace, (size_t)(p.J() * p.P()), own);
    forward(p, xf.data(), wf.data(), yf.data(), col);
    store_nchw(p.y, y, yf.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha_p,
                                           const cudnnFilterDescriptor_t w_desc, const void *w,
                                           const cudnnTensorDescriptor_t dy_desc, const void *dy,
                                           const cudnnConvolutionDescriptor_t conv_desc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workspace,
                                           size_t workspace_bytes, const void *beta_p,
                                           const cudnnTensorDescriptor_t dx_desc, void *dx) {
  static const char api[] = "cudnnConvolutionBackwardData";
  const Handle h = handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(dx_desc, "dxDesc", w_desc, "wDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {filter_span(p, w, "w"), tensor_span(p, p.y, dy, "dy"),
                     tensor_span(p, p.x, dx, "dx"), workspace_span(workspace, workspace_bytes)};
  AlgoSpec spec;
  if ((st = check_call(p, kBackwardData, (int)algo, b, api, &spec)) != CUDNN_STATUS_SUCCESS)
    return st;
  const float alpha = host_scalar(alpha_p, p.x.type, api, "alpha");
  const float beta = host_scalar(beta_p, p.x.type, api, "beta");
  run_on(h.stream, api, spans_of(b), [=]() {
    std::vector<float> dyf((size_t)p.y.count()), wf((size_t)p.w.count()), dxf((size_t)p.x.count());
    std::vector<float> own;
    load_nchw(p.y, dy, dyf.data());
    load_kcrs(p.w, w, wf.data());
    flip_filter(p, wf);
    float *dcol = scratch_of(spec, workspace, (size_t)(p.J() * p.P()), own);
    backward_data(p, dyf.data(), wf.data(), dxf.data(), dcol);
    store_nchw(p.x, dx, dxf.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha_p,
                                             const cudnnTensorDescriptor_t x_desc, const void *x,
                                             const cudnnTensorDescriptor_t dy_desc, const void *dy,
                                             const cudnnConvolutionDescriptor_t conv_desc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workspace,
                                             size_t workspace_bytes, const void *beta_p,
                                             const cudnnFilterDescriptor_t dw_desc, void *dw) {
  static const char api[] = "cudnnConvolutionBackwardFilter";
  const Handle h = handle_of(handle, api);
  Problem p;
  cudnnStatus_t st = problem_of(x_desc, "xDesc", dw_desc, "dwDesc", conv_desc, dy_desc, "dyDesc",
                                api, &p);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  const Buffers b = {tensor_span(p, p.x, x, "x"), tensor_span(p, p.y, dy, "dy"),
                     filter_span(p, dw, "dw"), workspace_span(workspace, workspace_bytes)};
  AlgoSpec spec;
  if ((st = check_call(p, kBackwardFilter, (int)algo, b, api, &spec)) != CUDNN_STATUS_SUCCESS)
    return st;
  const float alpha = host_scalar(alpha_p, p.w.type, api, "alpha");
  const float beta = host_scalar(beta_p, p.w.type, api, "beta");
  run_on(h.stream, api, spans_of(b), [=]() {
    std::vector<float> xf((size_t)p.x.count()), dyf((size_t)p.y.count()), dwf((size_t)p.w.count());
    std::vector<float> own;
    load_nchw(p.x, x, xf.data());
    load_nchw(p.y, dy, dyf.data());
    float *colt = scratch_of(spec, workspace, (size_t)(p.J() * p.P()), own);
    backward_filter(p, xf.data(), dyf.data(), dwf.data(), colt);
    flip_filter(p, dwf); /* the gradient of the flipped filter, flipped back */
    store_kcrs(p.w, dw, dwf.data(), alpha, beta);
  });
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"

/* gpu_math.h — the per-element and index math of the cuda device's own kernels, as
 * plain C functions that compile for the GPU (under nvcc, __host__ __device__) and for
 * the host alike, so that tests/test_cuda_math.c checks on any machine the very
 * code the kernels run: layout offsets, the dropout mask, ReLU / ReLU6 and their
 * masks, and the optimizer's element update.
 *
 * In C this header is plain C11 and includes no CUDA header. The part at the end (loads
 * and stores of float / __half / __nv_bfloat16, the dtype dispatch, the grid-stride loop
 * and the launch macros) is C++: CUDA C++ under nvcc, and host C++ elsewhere (g++ or
 * clang++ compiling the kernels for the test-only fake CUDA, through host/gpu_host.h).
 *
 * Float arithmetic that must round exactly like the host reference (the optimizer) is
 * written with gpu_fmul / gpu_fadd / gpu_fsub / gpu_fdiv / gpu_fsqrt: on the device these
 * are the IEEE round-to-nearest intrinsics, which the compiler never fuses into an FMA
 * whatever --fmad says; on the host each is one C operation (one rounding each; C11 does
 * not contract across function calls). */
#ifndef CNNB_GPU_MATH_H
#define CNNB_GPU_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPU_HD __host__ __device__
#else
#define GPU_HD
#endif

/* ---- exactly rounded fp32 operations ---------------------------------------------- */

static inline GPU_HD float gpu_fmul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
static inline GPU_HD float gpu_fadd(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
static inline GPU_HD float gpu_fsub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
static inline GPU_HD float gpu_fdiv(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
static inline GPU_HD float gpu_fsqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return sqrtf(a);
#endif
}

/* ---- layouts ------------------------------------------------------------------------ */

/* The buffer offset of logical element (n, c, h, w) of a [N, C, H, W] tensor stored NCHW
 * (nhwc 0) or NHWC (nhwc 1). N is not needed. */
static inline GPU_HD int64_t gpu_offset_nchw(int64_t c_, int64_t h_, int64_t w_, int64_t n,
                                             int64_t c, int64_t h, int64_t w) {
  return ((n * c_ + c) * h_ + h) * w_ + w;
}
static inline GPU_HD int64_t gpu_offset_nhwc(int64_t c_, int64_t h_, int64_t w_, int64_t n,
                                             int64_t c, int64_t h, int64_t w) {
  return ((n * h_ + h) * w_ + w) * c_ + c;
}
static inline GPU_HD int64_t gpu_offset(int32_t nhwc, int64_t c_, int64_t h_, int64_t w_, int64_t n,
                                        int64_t c, int64_t h, int64_t w) {
  return nhwc ? gpu_offset_nhwc(c_, h_, w_, n, c, h, w) : gpu_offset_nchw(c_, h_, w_, n, c, h, w);
}

/* The logical (n, c, h, w) at buffer offset i: the inverse of gpu_offset. */
typedef struct gpu_coord {
  int64_t n, c, h, w;
} gpu_coord;
static inline GPU_HD gpu_coord gpu_coord_of(int32_t nhwc, int64_t c_, int64_t h_, int64_t w_,
                                            int64_t i) {
  gpu_coord p;
  if (nhwc) {
    p.c = i % c_;
    i /= c_;
    p.w = i % w_;
    i /= w_;
    p.h = i % h_;
    p.n = i / h_;
  } else {
    p.w = i % w_;
    i /= w_;
    p.h = i % h_;
    i /= h_;
    p.c = i % c_;
    p.n = i / c_;
  }
  return p;
}

/* The channel of buffer offset i (per-channel bias, bias gradients). */
static inline GPU_HD int64_t gpu_channel_of(int32_t nhwc, int64_t c_, int64_t h_, int64_t w_,
                                            int64_t i) {
  return nhwc ? i % c_ : (i / (h_ * w_)) % c_;
}

/* n * C + c for buffer offset i: the element of a [N, C, 1, 1] tensor (the same bytes in
 * either layout) that multiply's per-channel gate broadcasts to i. */
static inline GPU_HD int64_t gpu_image_channel_of(int32_t nhwc, int64_t c_, int64_t h_, int64_t w_,
                                                  int64_t i) {
  return nhwc ? i / (h_ * w_ * c_) * c_ + i % c_ : i / (h_ * w_);
}

/* Convolution filters [K, C, R, S]: the arena's OIHW, and OHWI (the NHWC convolutions'
 * filter layout). They are the activation layouts with (K, C, R, S) for (N, C, H, W). */
static inline GPU_HD int64_t gpu_filter_offset_oihw(int64_t c_, int64_t r_, int64_t s_, int64_t k,
                                                    int64_t c, int64_t r, int64_t s) {
  return gpu_offset_nchw(c_, r_, s_, k, c, r, s);
}
static inline GPU_HD int64_t gpu_filter_offset_ohwi(int64_t c_, int64_t r_, int64_t s_, int64_t k,
                                                    int64_t c, int64_t r, int64_t s) {
  return gpu_offset_nhwc(c_, r_, s_, k, c, r, s);
}

/* fp16 / bf16 storage rounds with CUDA's own conversions (__float2half_rn,
 * __float2bfloat16_rn: round to nearest even) in the kernels' storage helpers below; the
 * host never converts, so no host copy of that rounding lives here. */

/* ---- activations -------------------------------------------------------------------- */

/* max(x, 0), NaN passing through (a broken step must stay visible to loss scaling). */
static inline GPU_HD float gpu_relu(float x) { return x > 0.0f ? x : (x == x ? 0.0f : x); }
/* min(max(x, 0), 6), NaN passing through. */
static inline GPU_HD float gpu_relu6(float x) { return x > 6.0f ? 6.0f : gpu_relu(x); }
/* The gradient masks, from the op's output y: ReLU passes where y > 0; ReLU6 where
 * 0 < y < 6 (TF's Relu6Grad, the bounds excluded). */
static inline GPU_HD int gpu_relu_passes(float y) { return y > 0.0f; }
static inline GPU_HD int gpu_relu6_passes(float y) { return y > 0.0f && y < 6.0f; }

/* The activations of ABI 1.14, as torch.nn defines them (tests/support/ref_ops.c holds
 * them to it). Their slopes take the input x, but sigmoid's and hard_sigmoid's the output
 * y (gpu_act_slope_from_output), so those two keep only y for backward. */
typedef enum gpu_act_kind {
  GPU_ACT_SIGMOID = 0,
  GPU_ACT_SILU = 1,
  GPU_ACT_HARD_SIGMOID = 2,
  GPU_ACT_HARD_SWISH = 3,
  GPU_ACT_GELU = 4,      /* x Phi(x), erf */
  GPU_ACT_GELU_TANH = 5, /* 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi) */
} gpu_act_kind;

static inline GPU_HD float gpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline GPU_HD float gpu_hard_sigmoid(float x) { return gpu_relu6(x + 3.0f) / 6.0f; }
static inline GPU_HD int gpu_act_slope_from_output(int act) {
  return act == GPU_ACT_SIGMOID || act == GPU_ACT_HARD_SIGMOID;
}

static inline GPU_HD float gpu_act_value(int act, float x) {
  const float k = 0.7978845608f, c = 0.044715f;
  switch (act) {
    case GPU_ACT_SIGMOID: return gpu_sigmoid(x);
    case GPU_ACT_SILU: return x * gpu_sigmoid(x);
    case GPU_ACT_HARD_SIGMOID: return gpu_hard_sigmoid(x);
    case GPU_ACT_HARD_SWISH: return x * gpu_hard_sigmoid(x);
    case GPU_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678f));
    default: return 0.5f * x * (1.0f + tanhf(k * (x + c * x * x * x)));
  }
}

/* f'(x) from v, which is y for the slopes from the output, x otherwise; at a kink
 * torch's side (hard_sigmoid: 1/6 on -3 < x < 3 only, which is 0 < y < 1; hard_swish:
 * x / 3 + 1/2 on [-3, 3], 1 above). */
static inline GPU_HD float gpu_act_slope(int act, float v) {
  const float k = 0.7978845608f, c = 0.044715f;
  switch (act) {
    case GPU_ACT_SIGMOID: return v * (1.0f - v);
    case GPU_ACT_SILU: {
      float s = gpu_sigmoid(v);
      return s * (1.0f + v * (1.0f - s));
    }
    case GPU_ACT_HARD_SIGMOID: return v > 0.0f && v < 1.0f ? 1.0f / 6.0f : 0.0f;
    case GPU_ACT_HARD_SWISH: return v < -3.0f ? 0.0f : v <= 3.0f ? v / 3.0f + 0.5f : 1.0f;
    case GPU_ACT_GELU:
      return 0.5f * (1.0f + erff(v * 0.70710678f)) + v * expf(-0.5f * v * v) * 0.39894228f;
    default: {
      float t = tanhf(k * (v + c * v * v * v));
      return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * c * v * v);
    }
  }
}

/* ---- layer norm (ABI 1.14) ------------------------------------------------------------- */

/* 1 / sqrt(var + epsilon), var the position's biased variance over its channels; and a
 * value normalised by its position's mean and that. */
static inline GPU_HD float gpu_layer_norm_inv_std(float var, float epsilon) {
  return 1.0f / sqrtf(var + epsilon);
}
static inline GPU_HD float gpu_layer_norm_xhat(float x, float mean, float inv_std) {
  return (x - mean) * inv_std;
}

/* ---- dropout ------------------------------------------------------------------------ */

/* splitmix64's finaliser: a bijective, well-mixed 64-bit function. */
static inline GPU_HD uint64_t gpu_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The dropout mask, a pure function of (seed, step, i, keep_prob):
 *   key       = mix64(mix64(seed + 0x9E3779B97F4A7C15) ^ step)        (once per call)
 *   threshold = floor(keep_prob * 2^32)                                (in double; exact)
 *   keep(i)   = (mix64(key + i * 0x9E3779B97F4A7C15) >> 32) < threshold
 * so P(keep) = threshold / 2^32, keep_prob up to 2^-32, and keep_prob 1 keeps all. */
static inline GPU_HD uint64_t gpu_dropout_key(uint32_t seed, uint64_t step) {
  return gpu_mix64(gpu_mix64((uint64_t)seed + 0x9E3779B97F4A7C15ull) ^ step);
}
static inline GPU_HD uint64_t gpu_dropout_threshold(float keep_prob) {
  if (!(keep_prob > 0.0f)) return 0;
  if (keep_prob >= 1.0f) return 1ull << 32;
  return (uint64_t)((double)keep_prob * 4294967296.0);
}
static inline GPU_HD int gpu_dropout_keep_at(uint64_t key, uint64_t threshold, int64_t i) {
  return (gpu_mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ull) >> 32) < threshold;
}
static inline GPU_HD int gpu_dropout_keep(uint32_t seed, uint64_t step, int64_t i,
                                          float keep_prob) {
  return gpu_dropout_keep_at(gpu_dropout_key(seed, step), gpu_dropout_threshold(keep_prob), i);
}

/* ---- the optimizer (cnnb/optimizer.h) ------------------------------------------------ */

/* cnnb_optimizer_rule's values (update.c checks they agree; the SDK header is C only). */
#define GPU_OPT_SGD 1
#define GPU_OPT_MOMENTUM 2
#define GPU_OPT_RMSPROP 3
#define GPU_OPT_ADAM 4

/* One update's constants. */
typedef struct gpu_update_hyper {
  int32_t rule, nesterov;
  float learning_rate, weight_decay, grad_scale, clip, momentum, rho, epsilon, beta1, beta2;
  float adam_lr_t; /* gpu_adam_lr_t */
} gpu_update_hyper;

/* Adam's bias-corrected step size, lr * sqrt(1 - b2^t) / (1 - b1^t) with t = step + 1,
 * formed in double and rounded once, exactly as cnnb_update_reference forms it. Host only. */
static inline float gpu_adam_lr_t(float learning_rate, float beta1, float beta2, int64_t step) {
  double t = (double)step + 1.0;
  double lr_t = (double)learning_rate * sqrt(1.0 - pow((double)beta2, t)) /
                (1.0 - pow((double)beta1, t));
  return (float)lr_t;
}

/* The gradient a rule sees: clip(grad * grad_scale, -clip, clip) + weight_decay * w;
 * clip 0 means none, and NaN stays NaN (both comparisons are false). */
static inline GPU_HD float gpu_update_grad(const gpu_update_hyper *h, float grad, float w) {
  float g = gpu_fmul(grad, h->grad_scale);
  if (h->clip > 0.0f) {
    if (g > h->clip) g = h->clip;
    else if (g < -h->clip) g = -h->clip;
  }
  return gpu_fadd(g, gpu_fmul(h->weight_decay, w));
}

/* One element's step: *w the parameter, *s1 / *s2 the rule's slots (read and written
 * only where the rule has them). The operations and their order are
 * cnnb_update_reference's (core/src/exec/optimizer.c), one rounding each. */
static inline GPU_HD void gpu_update_element(const gpu_update_hyper *h, float grad, float *w,
                                             float *s1, float *s2) {
  float g = gpu_update_grad(h, grad, *w);
  switch (h->rule) {
    case GPU_OPT_SGD:
      /* w -= lr * g */
      *w = gpu_fsub(*w, gpu_fmul(h->learning_rate, g));
      break;
    case GPU_OPT_MOMENTUM: {
      /* a = a * m + g;  w -= nesterov ? lr * (g + m * a) : lr * a */
      float a = gpu_fadd(gpu_fmul(*s1, h->momentum), g);
      *s1 = a;
      *w = gpu_fsub(*w, h->nesterov
                            ? gpu_fmul(h->learning_rate, gpu_fadd(g, gpu_fmul(h->momentum, a)))
                            : gpu_fmul(h->learning_rate, a));
      break;
    }
    case GPU_OPT_RMSPROP: {
      /* ms = rho * ms + (1 - rho) * g * g;  mom = m * mom + lr * g / sqrt(ms + eps);
       * w -= mom */
      float ms = gpu_fadd(gpu_fmul(h->rho, *s1), gpu_fmul(gpu_fmul(gpu_fsub(1.0f, h->rho), g), g));
      float mom = gpu_fadd(gpu_fmul(h->momentum, *s2),
                           gpu_fdiv(gpu_fmul(h->learning_rate, g),
                                    gpu_fsqrt(gpu_fadd(ms, h->epsilon))));
      *s1 = ms;
      *s2 = mom;
      *w = gpu_fsub(*w, mom);
      break;
    }
    case GPU_OPT_ADAM: {
      /* m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  w -= lr_t * m / (sqrt(v) + eps) */
      float m = gpu_fadd(gpu_fmul(h->beta1, *s1), gpu_fmul(gpu_fsub(1.0f, h->beta1), g));
      float v = gpu_fadd(gpu_fmul(h->beta2, *s2),
                         gpu_fmul(gpu_fmul(gpu_fsub(1.0f, h->beta2), g), g));
      *s1 = m;
      *s2 = v;
      *w = gpu_fsub(*w, gpu_fdiv(gpu_fmul(h->adam_lr_t, m), gpu_fadd(gpu_fsqrt(v), h->epsilon)));
      break;
    }
    default: break; /* unknown: update.c refuses it before any launch */
  }
}

/* Whether a rule reads slot 1 / slot 2. */
static inline GPU_HD int gpu_update_uses_slot1(int32_t rule) { return rule != GPU_OPT_SGD; }
static inline GPU_HD int gpu_update_uses_slot2(int32_t rule) {
  return rule == GPU_OPT_RMSPROP || rule == GPU_OPT_ADAM;
}

/* ---- C++ only: storage types, dispatch, launches ---------------------------------- */

#ifdef __cplusplus
/* GPU_DEPAREN(x): x without its parentheses, if it has them: a launch names its kernel
 * as `name` or, when the template arguments hold a comma, `(name<A, B>)`, which the
 * preprocessor would otherwise split into two macro arguments. */
#define GPU_DEPAREN(x) GPU_DEPAREN_ESC_(GPU_DEPAREN_ISH_ x)
#define GPU_DEPAREN_ISH_(...) GPU_DEPAREN_ISH_ __VA_ARGS__
#define GPU_DEPAREN_ESC_(...) GPU_DEPAREN_ESC2_(__VA_ARGS__)
#define GPU_DEPAREN_ESC2_(...) GPU_DEPAREN_VAN##__VA_ARGS__
#define GPU_DEPAREN_VANGPU_DEPAREN_ISH_
#define GPU_PRAGMA_(x) _Pragma(#x)

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* Every launch site writes GPU_LAUNCH(kernel, grid, block, shmem, stream, args...), and
 * GPU_LAUNCH_BARRIERS for a kernel whose threads wait for one another (__syncthreads,
 * warp shuffles): nvcc's <<<>>> here; on the host (host/gpu_host.h) the same launch
 * runs the grid on the CPU, as plain calls or as fibers. */
#define GPU_LAUNCH(kernel, grid, block, shmem, stream, ...) \
  GPU_DEPAREN(kernel)<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define GPU_LAUNCH_BARRIERS(kernel, grid, block, shmem, stream, ...) \
  GPU_DEPAREN(kernel)<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
/* `#pragma unroll n`, as a macro because g++ (host builds) spells it differently. */
#define GPU_UNROLL(n) GPU_PRAGMA_(unroll n)
#else
#include "host/gpu_host.h"
#endif

#include "gpu_kernels.h"

/* Elements are loaded to fp32 and stored from fp32, rounding to nearest even. */
static __device__ __forceinline__ float gpu_load(const float *p) { return *p; }
static __device__ __forceinline__ float gpu_load(const __half *p) { return __half2float(*p); }
static __device__ __forceinline__ float gpu_load(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}
static __device__ __forceinline__ void gpu_store(float *p, float v) { *p = v; }
static __device__ __forceinline__ void gpu_store(__half *p, float v) { *p = __float2half_rn(v); }
static __device__ __forceinline__ void gpu_store(__nv_bfloat16 *p, float v) {
  *p = __float2bfloat16_rn(v);
}

/* Calls f with a value of the C++ type of a float dtype (f32, f16, bf16): the launcher's
 * template argument. Any other dtype: cudaErrorInvalidValue. */
template <typename F>
static inline cudaError_t gpu_dispatch_float(gpu_dtype dtype, F f) {
  switch (dtype) {
    case GPU_F32: return f(float());
    case GPU_F16: return f(__half());
    case GPU_BF16: return f(__nv_bfloat16());
    default: return cudaErrorInvalidValue;
  }
}

/* Threads per block of the grid-stride kernels, and their grid: enough blocks to fill
 * an H200 several times over, never more (the loops stride over the rest). */
#define GPU_THREADS 256
static inline unsigned gpu_blocks(int64_t n) {
  int64_t b = (n + GPU_THREADS - 1) / GPU_THREADS;
  return (unsigned)(b < 8192 ? b : 8192);
}

/* for (i = this thread's first index; i < n; i += the grid's width), in 64 bits. */
#define GPU_GRID_STRIDE(i, n)                                               \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)blockDim.x * gridDim.x)
#endif /* __cplusplus */

#endif

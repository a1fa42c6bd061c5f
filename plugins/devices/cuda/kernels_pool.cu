/* kernels_pool.cu — pooling and LRN kernels for what cuDNN does not cover (gpu_kernels.h):
 * max / average pooling with asymmetric padding (TF SAME with a stride), the average
 * pool's backward (which reads neither x nor y, so it may run after their buffers were
 * reused), and TF's LRN forward and backward.
 *
 * Every kernel is layout-generic: tensors come as (storage type, gpu_dims), element
 * (n, c, h, w) lives at
 *   NCHW: ((n * C + c) * H + h) * W + w        NHWC: ((n * H + h) * W + w) * C + c
 * One thread computes one element of the tensor it writes, walking that tensor in
 * buffer order (thread i writes offset i, so writes coalesce in either layout), and
 * gathers what it needs: no atomics, so results are deterministic. The pooling kernels
 * take an index type I (int32_t when every offset and loop index of both tensors fits,
 * chosen by the launcher; int64_t otherwise), since 64-bit division is emulated on the
 * GPU and unravelling an offset divides three times.
 *
 * Semantics are the reference ops' (tests/support/ref_ops.c), loop for loop:
 *  - max pool: the window's elements inside the input scanned row by row, a strictly
 *    greater value replacing the best (so NaN never wins and the first maximum is the
 *    one that gets the gradient); an empty window gives -inf and passes no gradient.
 *    A training forward records each window's first maximum (gpu_kernels.h's argmax,
 *    one byte per output) and the backward reads it instead of scanning the windows
 *    covering each input element again; without it the backward scans (the same
 *    comparisons on the same x, so the same element, and the same sums);
 *  - average pool: the mean over the window's elements inside the input (padding
 *    excluded), 0 for an empty window; the sums are in double like the reference's, so
 *    fp32 results agree with it to the last bit (the gradient sums its windows in the
 *    reference's order too);
 *  - LRN: fp32 math (powf), y = x * (bias + alpha * sum x^2)^-beta over the channels
 *    c - r .. c + r that exist. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "gpu_kernels.h"
#include "gpu_math.h" /* GPU_LAUNCH */

namespace {

/* ---- storage types ------------------------------------------------------------------ */

template <typename T>
struct storage;
template <>
struct storage<float> {
  static __device__ __forceinline__ float load(const float *p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(float *p, int64_t i, float v) { p[i] = v; }
};
template <>
struct storage<__half> {
  static __device__ __forceinline__ float load(const __half *p, int64_t i) {
    return __half2float(p[i]);
  }
  static __device__ __forceinline__ void store(__half *p, int64_t i, float v) {
    p[i] = __float2half_rn(v);
  }
};
template <>
struct storage<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16 *p, int64_t i) {
    return __bfloat162float(p[i]);
  }
  static __device__ __forceinline__ void store(__nv_bfloat16 *p, int64_t i, float v) {
    p[i] = __float2bfloat16_rn(v);
  }
};

/* ---- index math ------------------------------------------------------------------- */

/* Computed in the index type I: int32_t only where the tensor's element count fits. */
template <typename I>
__device__ __forceinline__ I offset_of(const gpu_dims &d, int32_t n, int32_t c, int32_t h,
                                       int32_t w) {
  return d.nhwc ? (((I)n * d.h + h) * d.w + w) * d.c + c : (((I)n * d.c + c) * d.h + h) * d.w + w;
}

/* The (n, c, h, w) stored at buffer offset i: offset_of's inverse. */
template <typename I>
__device__ __forceinline__ void unravel(const gpu_dims &d, I i, int32_t *n, int32_t *c, int32_t *h,
                                        int32_t *w) {
  if (d.nhwc) {
    *c = (int32_t)(i % (I)d.c);
    i /= (I)d.c;
    *w = (int32_t)(i % (I)d.w);
    i /= (I)d.w;
    *h = (int32_t)(i % (I)d.h);
    *n = (int32_t)(i / (I)d.h);
  } else {
    *w = (int32_t)(i % (I)d.w);
    i /= (I)d.w;
    *h = (int32_t)(i % (I)d.h);
    i /= (I)d.h;
    *c = (int32_t)(i % (I)d.c);
    *n = (int32_t)(i / (I)d.c);
  }
}

__host__ __device__ __forceinline__ int64_t count_of(const gpu_dims &d) {
  return (int64_t)d.n * d.c * d.h * d.w;
}

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

/* Blocks for a grid-stride loop over `count` elements. */
inline unsigned blocks_for(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

/* Whether a grid-stride loop over `count` elements can run in int32_t: every offset is
 * below count, and the loop index ends at most one grid width (<= kMaxBlocks *
 * kThreads) past its last value. */
inline bool fits_int32(int64_t count) {
  return count <= (int64_t)INT32_MAX - kMaxBlocks * kThreads;
}

/* ---- pooling ------------------------------------------------------------------------ */

/* The first input row / column of output row / column o's window (may be negative). */
__device__ __forceinline__ int32_t window_start(int32_t o, int32_t stride, int32_t pad) {
  return o * stride - pad;
}

/* Output rows (or columns) [*lo, *hi] whose windows contain input row i:
 * o * s - p <= i <= o * s - p + k - 1, clipped to [0, out - 1]; empty when *lo > *hi. */
__device__ __forceinline__ void windows_over(int32_t i, int32_t k, int32_t s, int32_t p,
                                             int32_t out, int32_t *lo, int32_t *hi) {
  int32_t first = i + p - k + 1; /* o * s >= first */
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  int32_t last = (i + p) / s; /* i + p >= 0: p >= 0, i >= 0 */
  *hi = last < out - 1 ? last : out - 1;
}

/* Elements of a window that lie inside the input: the clipped row range times the
 * clipped column range. */
__device__ __forceinline__ int32_t window_count(int32_t hs, int32_t ws, const gpu_pool_window &win,
                                                int32_t in_h, int32_t in_w) {
  int32_t h0 = hs > 0 ? hs : 0, h1 = hs + win.kernel_h < in_h ? hs + win.kernel_h : in_h;
  int32_t w0 = ws > 0 ? ws : 0, w1 = ws + win.kernel_w < in_w ? ws + win.kernel_w : in_w;
  return (h1 > h0 ? h1 - h0 : 0) * (w1 > w0 ? w1 - w0 : 0);
}

/* y at offset i = its window's max or mean; argmax (max only, may be NULL) at offset i =
 * the window position kh * kernel_w + kw of the first maximum, GPU_POOL_ARGMAX_NONE when
 * nothing beat -inf (the launcher checks the window has at most
 * GPU_POOL_ARGMAX_MAX_WINDOW positions, so a position never reads as NONE). */
template <typename T, typename I>
__global__ void pool_forward_kernel(T *y, gpu_dims yd, const T *x, gpu_dims xd, gpu_pool_window win,
                                    uint8_t *argmax) {
  const I total = (I)count_of(yd);
  for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total;
       i += (I)gridDim.x * (I)blockDim.x) {
    int32_t n, c, oh, ow;
    unravel<I>(yd, i, &n, &c, &oh, &ow);
    const int32_t hs = window_start(oh, win.stride_h, win.pad_top);
    const int32_t ws = window_start(ow, win.stride_w, win.pad_left);
    float best = -INFINITY;
    int32_t best_at = GPU_POOL_ARGMAX_NONE;
    double sum = 0.0;
    int32_t count = 0;
    for (int32_t kh = 0; kh < win.kernel_h; kh++) {
      const int32_t ih = hs + kh;
      if (ih < 0 || ih >= xd.h) continue;
      for (int32_t kw = 0; kw < win.kernel_w; kw++) {
        const int32_t iw = ws + kw;
        if (iw < 0 || iw >= xd.w) continue;
        const float v = storage<T>::load(x, offset_of<I>(xd, n, c, ih, iw));
        if (v > best) {
          best = v;
          best_at = kh * win.kernel_w + kw;
        }
        sum += v;
        count++;
      }
    }
    float out;
    if (win.max) out = best;
    else out = count ? (float)(sum / count) : 0.0f;
    storage<T>::store(y, i, out);
    if (argmax) argmax[i] = (uint8_t)best_at;
  }
}

/* Where window (oh, ow)'s first maximum lies, as an input (h, w); *at_h = -1 when the
 * window holds no element greater than -inf (empty, all -inf or NaN). */
template <typename T, typename I>
__device__ __forceinline__ void window_argmax(const T *x, const gpu_dims &xd, int32_t n, int32_t c,
                                              int32_t hs, int32_t ws, const gpu_pool_window &win,
                                              int32_t *at_h, int32_t *at_w) {
  float best = -INFINITY;
  *at_h = -1;
  *at_w = -1;
  for (int32_t kh = 0; kh < win.kernel_h; kh++) {
    const int32_t ih = hs + kh;
    if (ih < 0 || ih >= xd.h) continue;
    for (int32_t kw = 0; kw < win.kernel_w; kw++) {
      const int32_t iw = ws + kw;
      if (iw < 0 || iw >= xd.w) continue;
      const float v = storage<T>::load(x, offset_of<I>(xd, n, c, ih, iw));
      if (v > best) {
        best = v;
        *at_h = ih;
        *at_w = iw;
      }
    }
  }
}

/* dx[n, c, ih, iw] = the sum, over the windows containing it (rows, then columns,
 * ascending: the reference's order), of dy where it is that window's first maximum
 * (max) or dy / the window's element count (average). The first maximum is the
 * forward's record when argmax is given (x unread), else found again from x. */
template <typename T, typename I>
__global__ void pool_backward_kernel(T *dx, gpu_dims xd, const T *x, const T *dy, gpu_dims yd,
                                     gpu_pool_window win, const uint8_t *argmax) {
  const I total = (I)count_of(xd);
  for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < total;
       i += (I)gridDim.x * (I)blockDim.x) {
    int32_t n, c, ih, iw;
    unravel<I>(xd, i, &n, &c, &ih, &iw);
    int32_t oh_lo, oh_hi, ow_lo, ow_hi;
    windows_over(ih, win.kernel_h, win.stride_h, win.pad_top, yd.h, &oh_lo, &oh_hi);
    windows_over(iw, win.kernel_w, win.stride_w, win.pad_left, yd.w, &ow_lo, &ow_hi);
    float max_acc = 0.0f; /* the reference adds floats into a zeroed float dx */
    double avg_acc = 0.0; /* the reference sums double shares */
    for (int32_t oh = oh_lo; oh <= oh_hi; oh++) {
      const int32_t hs = window_start(oh, win.stride_h, win.pad_top);
      for (int32_t ow = ow_lo; ow <= ow_hi; ow++) {
        const int32_t ws = window_start(ow, win.stride_w, win.pad_left);
        const I at_y = offset_of<I>(yd, n, c, oh, ow);
        if (win.max && argmax) {
          /* (ih, iw) lies in this window (windows_over), at position
           * (ih - hs) * kernel_w + (iw - ws) < kernel_h * kernel_w <= 255: never NONE. */
          if (argmax[at_y] == (ih - hs) * win.kernel_w + (iw - ws))
            max_acc += storage<T>::load(dy, at_y);
        } else if (win.max) {
          const float g = storage<T>::load(dy, at_y);
          int32_t at_h, at_w;
          window_argmax<T, I>(x, xd, n, c, hs, ws, win, &at_h, &at_w);
          if (at_h == ih && at_w == iw) max_acc += g;
        } else {
          const float g = storage<T>::load(dy, at_y);
          const int32_t count = window_count(hs, ws, win, xd.h, xd.w);
          if (count) avg_acc += (double)g / (double)count;
        }
      }
    }
    storage<T>::store(dx, i, win.max ? max_acc : (float)avg_acc);
  }
}

/* ---- LRN ---------------------------------------------------------------------------- */

/* bias + alpha * sum of x^2 over channels c - r .. c + r that exist, at (n, h, w). */
template <typename T>
__device__ __forceinline__ float lrn_norm(const T *x, const gpu_dims &d, int32_t n, int32_t c,
                                          int32_t h, int32_t w, int32_t radius, float bias,
                                          float alpha) {
  const int32_t lo = c - radius > 0 ? c - radius : 0;
  const int32_t hi = c + radius < d.c - 1 ? c + radius : d.c - 1;
  float sum = 0.0f;
  for (int32_t j = lo; j <= hi; j++) {
    const float v = storage<T>::load(x, offset_of<int64_t>(d, n, j, h, w));
    sum += v * v;
  }
  return bias + alpha * sum;
}

template <typename T>
__global__ void lrn_forward_kernel(T *y, const T *x, gpu_dims d, int32_t radius, float bias,
                                   float alpha, float beta) {
  const int64_t total = count_of(d);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int32_t n, c, h, w;
    unravel<int64_t>(d, i, &n, &c, &h, &w);
    const float norm = lrn_norm(x, d, n, c, h, w, radius, bias, alpha);
    storage<T>::store(y, i, storage<T>::load(x, i) * powf(norm, -beta));
  }
}

/* y_c = x_c N_c^-beta with N_c = bias + alpha * sum_{|i - c| <= r} x_i^2, so
 *   d y_c / d x_j = [c == j] N_c^-beta - 2 alpha beta x_c x_j N_c^(-beta - 1) [|j - c| <= r]
 * and, summing over the outputs c that see x_j,
 *   dx_j = dy_j N_j^-beta - 2 alpha beta x_j sum_{|c - j| <= r} dy_c x_c N_c^(-beta - 1)
 * (the reference's ref_lrn_backward term for term; N recomputed from x, y unused). */
template <typename T>
__global__ void lrn_backward_kernel(T *dx, const T *dy, const T *x, gpu_dims d, int32_t radius,
                                    float bias, float alpha, float beta) {
  const int64_t total = count_of(d);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int32_t n, j, h, w;
    unravel<int64_t>(d, i, &n, &j, &h, &w);
    const float xj = storage<T>::load(x, i);
    float acc = storage<T>::load(dy, i) *
                powf(lrn_norm(x, d, n, j, h, w, radius, bias, alpha), -beta);
    const int32_t lo = j - radius > 0 ? j - radius : 0;
    const int32_t hi = j + radius < d.c - 1 ? j + radius : d.c - 1;
    float cross = 0.0f;
    for (int32_t c = lo; c <= hi; c++) {
      const int64_t at = offset_of<int64_t>(d, n, c, h, w);
      const float nc = lrn_norm(x, d, n, c, h, w, radius, bias, alpha);
      cross += storage<T>::load(dy, at) * storage<T>::load(x, at) * powf(nc, -beta - 1.0f);
    }
    acc -= 2.0f * alpha * beta * xj * cross;
    storage<T>::store(dx, i, acc);
  }
}

/* ---- launch helpers ------------------------------------------------------------------ */

bool window_valid(const gpu_pool_window &win) {
  return win.kernel_h > 0 && win.kernel_w > 0 && win.stride_h > 0 && win.stride_w > 0 &&
         win.pad_top >= 0 && win.pad_left >= 0;
}

bool dims_valid(const gpu_dims &d) { return d.n >= 0 && d.c >= 0 && d.h >= 0 && d.w >= 0; }

/* Both kernels index x and y (and argmax, at y's offsets): 32-bit when both fit. */
template <typename T>
cudaError_t launch_pool(void *y, gpu_dims yd, const void *x, gpu_dims xd, gpu_pool_window win,
                        uint8_t *argmax, cudaStream_t stream) {
  const unsigned blocks = blocks_for(count_of(yd));
  if (fits_int32(count_of(xd)) && fits_int32(count_of(yd)))
    GPU_LAUNCH((pool_forward_kernel<T, int32_t>), blocks, kThreads, 0, stream, static_cast<T *>(y),
               yd, static_cast<const T *>(x), xd, win, argmax);
  else
    GPU_LAUNCH((pool_forward_kernel<T, int64_t>), blocks, kThreads, 0, stream, static_cast<T *>(y),
               yd, static_cast<const T *>(x), xd, win, argmax);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_pool_backward(void *dx, gpu_dims xd, const void *x, const void *dy, gpu_dims yd,
                                 gpu_pool_window win, const uint8_t *argmax, cudaStream_t stream) {
  const unsigned blocks = blocks_for(count_of(xd));
  if (fits_int32(count_of(xd)) && fits_int32(count_of(yd)))
    GPU_LAUNCH((pool_backward_kernel<T, int32_t>), blocks, kThreads, 0, stream,
               static_cast<T *>(dx), xd, static_cast<const T *>(x), static_cast<const T *>(dy), yd,
               win, argmax);
  else
    GPU_LAUNCH((pool_backward_kernel<T, int64_t>), blocks, kThreads, 0, stream,
               static_cast<T *>(dx), xd, static_cast<const T *>(x), static_cast<const T *>(dy), yd,
               win, argmax);
  return cudaGetLastError();
}

/* An argmax record is for max pooling, over windows small enough to number in a byte. */
bool argmax_valid(const gpu_pool_window &win, const uint8_t *argmax) {
  return !argmax || (win.max && (int64_t)win.kernel_h * win.kernel_w <= GPU_POOL_ARGMAX_MAX_WINDOW);
}

template <typename T>
cudaError_t launch_lrn(void *y, const void *x, gpu_dims d, int32_t radius, float bias, float alpha,
                       float beta, cudaStream_t stream) {
  GPU_LAUNCH(lrn_forward_kernel<T>, blocks_for(count_of(d)), kThreads, 0, stream,
             static_cast<T *>(y), static_cast<const T *>(x), d, radius, bias, alpha, beta);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_lrn_backward(void *dx, const void *dy, const void *x, gpu_dims d, int32_t radius,
                                float bias, float alpha, float beta, cudaStream_t stream) {
  GPU_LAUNCH(lrn_backward_kernel<T>, blocks_for(count_of(d)), kThreads, 0, stream,
             static_cast<T *>(dx), static_cast<const T *>(dy), static_cast<const T *>(x), d, radius,
             bias, alpha, beta);
  return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t gpu_k_pool(void *y, gpu_dims y_dims, const void *x, gpu_dims x_dims, gpu_dtype type,
                       gpu_pool_window win, uint8_t *argmax, cudaStream_t stream) {
  if (!window_valid(win) || !dims_valid(y_dims) || !dims_valid(x_dims) ||
      y_dims.nhwc != x_dims.nhwc || y_dims.n != x_dims.n || y_dims.c != x_dims.c ||
      !argmax_valid(win, argmax))
    return cudaErrorInvalidValue;
  if (count_of(y_dims) == 0) return cudaSuccess;
  switch (type) {
    case GPU_F32: return launch_pool<float>(y, y_dims, x, x_dims, win, argmax, stream);
    case GPU_F16: return launch_pool<__half>(y, y_dims, x, x_dims, win, argmax, stream);
    case GPU_BF16: return launch_pool<__nv_bfloat16>(y, y_dims, x, x_dims, win, argmax, stream);
    default: return cudaErrorInvalidValue;
  }
}

/* x is read for max pooling without an argmax record only; an average pool's backward
 * reads neither x nor y, and y is never read. */
cudaError_t gpu_k_pool_backward(void *dx, gpu_dims x_dims, const void *x, const void *y,
                                const void *dy, gpu_dims y_dims, gpu_dtype type,
                                gpu_pool_window win, const uint8_t *argmax, cudaStream_t stream) {
  (void)y;
  if (!window_valid(win) || !dims_valid(y_dims) || !dims_valid(x_dims) ||
      y_dims.nhwc != x_dims.nhwc || y_dims.n != x_dims.n || y_dims.c != x_dims.c ||
      !argmax_valid(win, argmax))
    return cudaErrorInvalidValue;
  if (count_of(x_dims) == 0) return cudaSuccess;
  switch (type) {
    case GPU_F32:
      return launch_pool_backward<float>(dx, x_dims, x, dy, y_dims, win, argmax, stream);
    case GPU_F16:
      return launch_pool_backward<__half>(dx, x_dims, x, dy, y_dims, win, argmax, stream);
    case GPU_BF16:
      return launch_pool_backward<__nv_bfloat16>(dx, x_dims, x, dy, y_dims, win, argmax, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t gpu_k_lrn(void *y, const void *x, gpu_dims dims, gpu_dtype type, int32_t radius,
                      float bias, float alpha, float beta, cudaStream_t stream) {
  if (radius < 0 || !dims_valid(dims)) return cudaErrorInvalidValue;
  if (count_of(dims) == 0) return cudaSuccess;
  switch (type) {
    case GPU_F32: return launch_lrn<float>(y, x, dims, radius, bias, alpha, beta, stream);
    case GPU_F16: return launch_lrn<__half>(y, x, dims, radius, bias, alpha, beta, stream);
    case GPU_BF16: return launch_lrn<__nv_bfloat16>(y, x, dims, radius, bias, alpha, beta, stream);
    default: return cudaErrorInvalidValue;
  }
}

/* y is not read: the gradient is recomputed from x as the reference computes it. */
cudaError_t gpu_k_lrn_backward(void *dx, const void *dy, const void *x, const void *y,
                               gpu_dims dims, gpu_dtype type, int32_t radius, float bias,
                               float alpha, float beta, cudaStream_t stream) {
  (void)y;
  if (radius < 0 || !dims_valid(dims)) return cudaErrorInvalidValue;
  if (count_of(dims) == 0) return cudaSuccess;
  switch (type) {
    case GPU_F32:
      return launch_lrn_backward<float>(dx, dy, x, dims, radius, bias, alpha, beta, stream);
    case GPU_F16:
      return launch_lrn_backward<__half>(dx, dy, x, dims, radius, bias, alpha, beta, stream);
    case GPU_BF16:
      return launch_lrn_backward<__nv_bfloat16>(dx, dy, x, dims, radius, bias, alpha, beta, stream);
    default: return cudaErrorInvalidValue;
  }
}

} // extern "C"

/* kernels_eltwise.cu — the elementwise kernels of gpu_kernels.h: ReLU and ReLU6 with
 * their gradients from the output, add (with a fused ReLU), gradient accumulation,
 * dropout with a mask recomputed from (seed, step, element), a convolution's bias (with
 * a fused ReLU) and its gradient.
 *
 * Every element is loaded to fp32, computed with gpu_math.h's functions (what
 * tests/unit/test_cuda_math.c checks on the host) and stored rounded to nearest even.
 * Elementwise kernels run over the buffer in its physical order, so they serve NCHW
 * and NHWC alike; only the per-channel ones (bias, bias gradient) look at the layout. */
#include "gpu_kernels.h"
#include "gpu_math.h"

namespace {

template <typename T>
__global__ void relu_kernel(T *y, const T *x, int64_t n) {
  GPU_GRID_STRIDE(i, n) gpu_store(&y[i], gpu_relu(gpu_load(&x[i])));
}

template <typename T>
__global__ void relu6_kernel(T *y, const T *x, int64_t n) {
  GPU_GRID_STRIDE(i, n) gpu_store(&y[i], gpu_relu6(gpu_load(&x[i])));
}

/* dx may alias dy: each element is read before it is written, by the same thread. */
template <typename T>
__global__ void relu_backward_kernel(T *dx, const T *dy, const T *y, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    float g = gpu_load(&dy[i]);
    gpu_store(&dx[i], gpu_relu_passes(gpu_load(&y[i])) ? g : 0.0f);
  }
}

template <typename T>
__global__ void relu6_backward_kernel(T *dx, const T *dy, const T *y, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    float g = gpu_load(&dy[i]);
    gpu_store(&dx[i], gpu_relu6_passes(gpu_load(&y[i])) ? g : 0.0f);
  }
}

template <typename T>
__global__ void add_kernel(T *y, const T *a, const T *b, int64_t n, int32_t relu) {
  GPU_GRID_STRIDE(i, n) {
    float v = gpu_fadd(gpu_load(&a[i]), gpu_load(&b[i]));
    gpu_store(&y[i], relu ? gpu_relu(v) : v);
  }
}

template <typename T>
__global__ void accumulate_kernel(T *dst, const T *src, int64_t n) {
  GPU_GRID_STRIDE(i, n) gpu_store(&dst[i], gpu_fadd(gpu_load(&dst[i]), gpu_load(&src[i])));
}

/* y = kept(i) ? x * (1 / keep_prob) : 0, as the cpu device scales. Forward and backward
 * are the same map (of x, or of dy). */
template <typename T>
__global__ void dropout_kernel(T *y, const T *x, int64_t n, uint64_t key, uint64_t threshold,
                               float scale) {
  GPU_GRID_STRIDE(i, n) {
    float v = gpu_load(&x[i]);
    gpu_store(&y[i], gpu_dropout_keep_at(key, threshold, i) ? gpu_fmul(v, scale) : 0.0f);
  }
}

/* y = y + bias[c], then ReLU when asked; bias NULL: ReLU only. */
template <typename T>
__global__ void bias_relu_kernel(T *y, int64_t n, gpu_dims dims, const float *bias, int32_t relu) {
  GPU_GRID_STRIDE(i, n) {
    float v = gpu_load(&y[i]);
    if (bias) v = gpu_fadd(v, bias[gpu_channel_of(dims.nhwc, dims.c, dims.h, dims.w, i)]);
    gpu_store(&y[i], relu ? gpu_relu(v) : v);
  }
}

/* db[c] = sum over (n, h, w) of dy: one block per channel. Thread t sums the elements
 * t, t + threads, ... of the channel (taken in (n, h, w) order) in fp32, then a tree
 * over the threads in shared memory: a fixed order, so the result is the same bits on
 * every run. NCHW reads a channel's planes contiguously; NHWC reads with stride C. */
#define BIAS_GRAD_THREADS 512
template <typename T>
__global__ void __launch_bounds__(BIAS_GRAD_THREADS)
bias_grad_kernel(float *db, const T *dy, gpu_dims dims) {
  __shared__ float partial[BIAS_GRAD_THREADS];
  const int64_t c = blockIdx.x;
  const int64_t plane = (int64_t)dims.h * dims.w;
  const int64_t per_channel = (int64_t)dims.n * plane;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < per_channel; j += BIAS_GRAD_THREADS) {
    int64_t at = dims.nhwc ? j * dims.c + c /* j = (n * H + h) * W + w */
                           : ((j / plane) * dims.c + c) * plane + j % plane;
    sum = gpu_fadd(sum, gpu_load(&dy[at]));
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = BIAS_GRAD_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      partial[threadIdx.x] = gpu_fadd(partial[threadIdx.x], partial[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = partial[0];
}

} // namespace

extern "C" cudaError_t gpu_k_relu(void *y, const void *x, gpu_dtype type, int64_t n,
                                  cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    relu_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)y, (const T *)x, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu_backward(void *dx, const void *dy, const void *y, gpu_dtype type,
                                           int64_t n, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    relu_backward_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)dx, (const T *)dy,
                                                                       (const T *)y, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu6(void *y, const void *x, gpu_dtype type, int64_t n,
                                   cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    relu6_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)y, (const T *)x, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu6_backward(void *dx, const void *dy, const void *y,
                                            gpu_dtype type, int64_t n, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    relu6_backward_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)dx, (const T *)dy,
                                                                        (const T *)y, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_add(void *y, const void *a, const void *b, gpu_dtype type, int64_t n,
                                 int32_t relu, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)y, (const T *)a, (const T *)b,
                                                             n, relu);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_accumulate(void *dst, const void *src, gpu_dtype type, int64_t n,
                                        cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    accumulate_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)dst, (const T *)src, n);
    return cudaGetLastError();
  });
}

static cudaError_t dropout_launch(void *y, const void *x, gpu_dtype type, int64_t n,
                                  float keep_prob, uint32_t seed, uint64_t step,
                                  cudaStream_t stream) {
  if (!(keep_prob > 0.0f && keep_prob <= 1.0f)) return cudaErrorInvalidValue;
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  const uint64_t key = gpu_dropout_key(seed, step);
  const uint64_t threshold = gpu_dropout_threshold(keep_prob);
  const float scale = 1.0f / keep_prob;
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)y, (const T *)x, n, key,
                                                                 threshold, scale);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_dropout(void *y, const void *x, gpu_dtype type, int64_t n,
                                     float keep_prob, uint32_t seed, uint64_t step,
                                     cudaStream_t stream) {
  return dropout_launch(y, x, type, n, keep_prob, seed, step, stream);
}

extern "C" cudaError_t gpu_k_dropout_backward(void *dx, const void *dy, gpu_dtype type, int64_t n,
                                              float keep_prob, uint32_t seed, uint64_t step,
                                              cudaStream_t stream) {
  return dropout_launch(dx, dy, type, n, keep_prob, seed, step, stream);
}

extern "C" cudaError_t gpu_k_bias_relu(void *y, gpu_dims dims, gpu_dtype type, const float *bias,
                                       int32_t relu, cudaStream_t stream) {
  const int64_t n = (int64_t)dims.n * dims.c * dims.h * dims.w;
  if (n <= 0 || (!bias && !relu))
    return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    bias_relu_kernel<T><<<gpu_blocks(n), GPU_THREADS, 0, stream>>>((T *)y, n, dims, bias, relu);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_bias_grad(float *db, const void *dy, gpu_dims dims, gpu_dtype type,
                                       cudaStream_t stream) {
  if (dims.c <= 0)
    return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  /* C channels of zero elements (N, H or W zero) still get their db = 0 from the kernel. */
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    bias_grad_kernel<T><<<(unsigned)dims.c, BIAS_GRAD_THREADS, 0, stream>>>(db, (const T *)dy,
                                                                           dims);
    return cudaGetLastError();
  });
}

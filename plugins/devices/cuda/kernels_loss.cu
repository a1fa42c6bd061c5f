/* kernels_loss.cu — softmax cross-entropy with sparse labels (gpu_kernels.h), the loss
 * the graph ends in, as the cpu device computes it (plugins/devices/cpu/ops_loss.c):
 *   probs[i, j] = exp(x[i, j] - max_i) * (1 / sum_i),  sum_i = sum_j exp(x[i, j] - max_i)
 *   loss        = mean over i of log(sum_i) - (1 - s) (x[i, label_i] - max_i)
 *                                 - (s / K) sum_j (x[i, j] - max_i)
 *   dlogits     = (scale / N) * (probs - s / K) - (scale / N) (1 - s) onehot(label)
 * s the label smoothing (0: none; the target is (1 - s) onehot + s / K),
 * with the max subtracted for stability, exp in fp32 and the sums in double.
 *
 * The forward is one block whose warps take rows (warp w: rows w, w + warps, ...), so the
 * batch's losses add up in one fixed order without any scratch memory and without float
 * atomics: the same bits on every run. [N, K] is tiny next to the layers before it.
 *
 * A label outside [0, K) is a data error the host reports at its next synchronizing
 * call: the kernel counts it in gpu_kernel_errors (the first one counted leaves its
 * value and example there), its row adds nothing to the loss and gets a zero gradient. */
#include "gpu_kernels.h"
#include "gpu_math.h"

namespace {

#define XENT_WARPS 32
#define FULL_MASK 0xffffffffu

/* The sum over a warp's lanes in a fixed tree (lane 0's result), given to every lane. */
__device__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(FULL_MASK, v, offset);
  return __shfl_sync(FULL_MASK, v, 0);
}
__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
  return v;
}

template <typename T>
__global__ void __launch_bounds__(XENT_WARPS * 32)
    xent_forward_kernel(float *loss, float *probs, const T *logits, const int32_t *labels,
                        int32_t n, int32_t k, float smoothing, gpu_kernel_errors *errors) {
  __shared__ double warp_totals[XENT_WARPS];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double total = 0.0; /* this warp's rows' losses, in row order (every lane holds it) */
  for (int32_t row = warp; row < n; row += XENT_WARPS) {
    const T *x = logits + (int64_t)row * k; /* [K] */
    float *p = probs + (int64_t)row * k;    /* [K] */
    /* fmaxf skips NaN; a NaN logit still makes its row's sum, and the loss, NaN. */
    float max = -INFINITY;
    for (int32_t j = lane; j < k; j += 32) max = fmaxf(max, gpu_load(&x[j]));
    max = warp_max(max);
    double sum = 0.0, shifted = 0.0;
    for (int32_t j = lane; j < k; j += 32) {
      const float d = gpu_fsub(gpu_load(&x[j]), max);
      float e = expf(d);
      p[j] = e;
      sum += (double)e;
      shifted += (double)d;
    }
    sum = warp_sum(sum);
    if (smoothing != 0.0f) shifted = warp_sum(shifted);
    const float inv = (float)(1.0 / sum);
    for (int32_t j = lane; j < k; j += 32) p[j] = gpu_fmul(p[j], inv); /* this lane's own p[j] */
    const int32_t label = labels[row];
    if (label >= 0 && label < k) {
      total += log(sum) - (1.0 - (double)smoothing) * (double)gpu_fsub(gpu_load(&x[label]), max);
      if (smoothing != 0.0f) total -= (double)smoothing * shifted / (double)k;
    } else if (lane == 0 && errors) {
      if (atomicAdd(&errors->bad_label_count, 1) == 0) {
        errors->first_bad_label = label;
        errors->first_bad_index = row;
      }
      errors->classes = k;
    }
  }
  if (lane == 0) warp_totals[warp] = total;
  __syncthreads();
  if (threadIdx.x == 0) {
    double all = 0.0;
    for (int w = 0; w < XENT_WARPS; w++) all += warp_totals[w];
    *loss = (float)(all / (double)n);
  }
}

/* dlogits[i, j] = s * (probs[i, j] - spread), minus s * peak at j == label_i (spread the
 * smoothing / K, peak 1 - smoothing); a row with a bad label: 0. */
template <typename T>
__global__ void xent_backward_kernel(T *dlogits, const float *probs, const int32_t *labels,
                                     int32_t k, float s, float spread, float peak, int64_t count) {
  GPU_GRID_STRIDE(i, count) {
    const int64_t row = i / k, j = i % k;
    const int32_t label = labels[row];
    float g = 0.0f;
    if (label >= 0 && label < k) {
      g = gpu_fmul(s, gpu_fsub(probs[i], spread));
      if (j == label) g = gpu_fsub(g, gpu_fmul(s, peak));
    }
    gpu_store(&dlogits[i], g);
  }
}

} // namespace

extern "C" cudaError_t gpu_k_xent_forward(float *loss, float *probs, const void *logits,
                                          gpu_dtype type, const int32_t *labels, int32_t n,
                                          int32_t k, float smoothing, gpu_kernel_errors *errors,
                                          cudaStream_t stream) {
  if (n < 0 || k < 0) return cudaErrorInvalidValue;
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (n == 0 || k == 0) return cudaSuccess;
    GPU_LAUNCH_BARRIERS(xent_forward_kernel<T>, 1, XENT_WARPS * 32, 0, stream, loss, probs,
                        (const T *)logits, labels, n, k, smoothing, errors);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_xent_backward(void *dlogits, gpu_dtype type, const float *probs,
                                           const int32_t *labels, int32_t n, int32_t k,
                                           float smoothing, float scale, cudaStream_t stream) {
  if (n < 0 || k < 0) return cudaErrorInvalidValue;
  const int64_t count = (int64_t)n * k;
  /* scale / N once, in fp32, as the cpu device forms it. */
  const float s = n > 0 ? scale / (float)n : 0.0f;
  const float spread = k > 0 ? smoothing / (float)k : 0.0f, peak = 1.0f - smoothing;
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    if (count == 0) return cudaSuccess;
    GPU_LAUNCH(xent_backward_kernel<T>, gpu_blocks(count), GPU_THREADS, 0, stream, (T *)dlogits,
               probs, labels, k, s, spread, peak, count);
    return cudaGetLastError();
  });
}

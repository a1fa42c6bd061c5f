/* kernels_eltwise.cu — the elementwise kernels of gpu_kernels.h: ReLU and ReLU6 with
 * their gradients from the output, the activations of ABI 1.14 (gpu_math.h's gpu_act_value), add
 * (with a fused ReLU), gradient accumulation, dropout with a mask recomputed from (seed, step,
 * element), a convolution's bias (with a fused ReLU) and its gradient; and ABI 1.14's
 * multiply, channel_scale and layer norm, whose parameter gradients are the bias gradient's
 * deterministic channel sums of other terms.
 *
 * Every element is loaded to fp32, computed with gpu_math.h's functions (what
 * tests/test_cuda_math.c checks on the host) and stored rounded to nearest even.
 * Elementwise kernels run over the buffer in its physical order, so they serve NCHW
 * and NHWC alike; only the per-channel ones (bias, bias gradient, the per-channel gate
 * and scale, layer norm) look at the layout. */
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

/* Each element is read before it is written, by the same thread: ga or gb may alias dy.
 * y NULL: no ReLU. */
template <typename T>
__global__ void add_backward_kernel(T *ga, T *gb, const T *dy, const T *y, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    float g = gpu_load(&dy[i]);
    if (y && !gpu_relu_passes(gpu_load(&y[i]))) g = 0.0f;
    if (ga) gpu_store(&ga[i], g);
    if (gb) gpu_store(&gb[i], g);
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
__global__ void act_kernel(T *y, const T *x, int32_t act, int64_t n) {
  GPU_GRID_STRIDE(i, n) gpu_store(&y[i], gpu_act_value(act, gpu_load(&x[i])));
}

/* dx may alias dy: each element is read before it is written, by the same thread. v is
 * the op's output or input, as gpu_act_slope takes it. */
template <typename T>
__global__ void act_backward_kernel(T *dx, const T *dy, const T *v, int32_t act, int64_t n) {
  GPU_GRID_STRIDE(i, n) {
    float g = gpu_load(&dy[i]);
    gpu_store(&dx[i], g * gpu_act_slope(act, gpu_load(&v[i])));
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

/* Stochastic depth: one draw per image of per_sample elements (NCHW and NHWC alike keep
 * an image's elements together), kept images scaled, dropped ones zero. */
template <typename T>
__global__ void sample_dropout_kernel(T *y, const T *x, int64_t n, int64_t per_sample, uint64_t key,
                                      uint64_t threshold, float scale) {
  GPU_GRID_STRIDE(i, n) {
    float v = gpu_load(&x[i]);
    gpu_store(&y[i],
              gpu_dropout_keep_at(key, threshold, i / per_sample) ? gpu_fmul(v, scale) : 0.0f);
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

/* ---- the bias gradient: db[c] = sum over (n, h, w) of dy, in two passes ---------------
 *
 * Pass 1 splits each channel's elements into `chunks` consecutive pieces and writes one
 * fp32 partial sum per (chunk, channel) into scratch, partial[chunk * C + c]; pass 2 (one
 * thread per channel) adds partial[0][c], partial[1][c], ... in chunk order into db[c].
 * The split (bias_grad_plan) is a function of the dims alone and every sum below runs in
 * a fixed order, so the result is the same bits on every run and every GPU. (It is not
 * the bits of a plain sequential sum: fp32 addition is not associative.)
 *
 * NHWC: dy is rows [N * H * W] of C channels. Block (tile, chunk) has 32 x 8 threads:
 * threadIdx.x is the channel within a tile of 32 consecutive channels (a warp reads 32
 * neighbouring values of one row: coalesced), threadIdx.y one of 8 row lanes. Lane y of
 * chunk k sums rows k * rows_per_chunk + y, + y + 8, ... (ascending, below the chunk's
 * end), then the 8 lane sums are added by the halving tree (0..3 += 4..7, 0..1 += 2..3,
 * 0 += 1).
 * NCHW: a channel's elements are N planes of H * W contiguous values. Block (c, chunk)
 * has 256 threads and covers images [k * images_per_chunk, ...) of channel c: thread t
 * sums the chunk's elements t, t + 256, ... in (image, h * w) order (ascending), then
 * the 256 thread sums are added by the halving tree (0..127 += 128..255, ..., 0 += 1).
 *
 * I is the index type: int32_t when every offset into dy fits (the launcher checks), so
 * the hot loops do 32-bit arithmetic; int64_t otherwise. No division per element. */
#define BIAS_GRAD_TILE 32           /* NHWC: channels per block (threadIdx.x) */
#define BIAS_GRAD_LANES 8           /* NHWC: row lanes per block (threadIdx.y) */
#define BIAS_GRAD_ROW_THREADS 256   /* NHWC: threads per block, TILE x LANES */
#define BIAS_GRAD_THREADS 256       /* NCHW: threads per block; pass 2: threads per block */
#define BIAS_GRAD_MAX_CHUNKS 512    /* bounds pass 2's serial sum and the scratch */
#define BIAS_GRAD_MIN_ROWS 256      /* NHWC: rows per chunk at least (32 per row lane) */
#define BIAS_GRAD_MIN_ELEMENTS 4096 /* NCHW: elements per chunk at least (16 per thread) */

/* How pass 1 splits the work: `chunks` pieces (0 when there is nothing to sum), each of
 * `per_chunk` rows (NHWC) or images (NCHW), the last one possibly shorter. */
struct bias_grad_plan_t {
  int64_t chunks;
  int64_t per_chunk;
};

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static bias_grad_plan_t bias_grad_plan(gpu_dims dims) {
  bias_grad_plan_t p = {0, 0};
  if (dims.n <= 0 || dims.c <= 0 || dims.h <= 0 || dims.w <= 0) return p;
  if (dims.nhwc) {
    const int64_t rows = (int64_t)dims.n * dims.h * dims.w;
    int64_t chunks = ceil_div(rows, BIAS_GRAD_MIN_ROWS);
    if (chunks > BIAS_GRAD_MAX_CHUNKS) chunks = BIAS_GRAD_MAX_CHUNKS;
    p.per_chunk = ceil_div(rows, chunks);
    p.chunks = ceil_div(rows, p.per_chunk); /* no empty chunk */
  } else {
    const int64_t plane = (int64_t)dims.h * dims.w;
    int64_t images = ceil_div(BIAS_GRAD_MIN_ELEMENTS, plane);
    const int64_t at_least = ceil_div(dims.n, BIAS_GRAD_MAX_CHUNKS);
    if (images < at_least) images = at_least;
    if (images > dims.n) images = dims.n;
    p.per_chunk = images;
    p.chunks = ceil_div(dims.n, images);
  }
  return p;
}

/* Pass 1, NHWC: partial[chunk * C + c] = the chunk's rows summed for channel c, each
 * element's term(offset, row) (dy_term: dy itself; the products below). O: the partial
 * sums' type (fp32; a per-image gate gradient stores in the activation type). */
static_assert(BIAS_GRAD_ROW_THREADS == BIAS_GRAD_TILE * BIAS_GRAD_LANES, "NHWC block shape");
template <typename Term, typename I, typename O>
__global__ void __launch_bounds__(BIAS_GRAD_ROW_THREADS)
    bias_grad_rows_kernel(O *partial, Term term, I rows, I channels, I rows_per_chunk) {
  __shared__ float lane_sum[BIAS_GRAD_LANES][BIAS_GRAD_TILE];
  const I c = (I)blockIdx.x * BIAS_GRAD_TILE + (I)threadIdx.x;
  const I first = (I)blockIdx.y * rows_per_chunk;
  const I end = rows - first < rows_per_chunk ? rows : first + rows_per_chunk;
  float sum = 0.0f;
  if (c < channels) {
    GPU_UNROLL(8)
    for (I r = first + (I)threadIdx.y; r < end; r += BIAS_GRAD_LANES)
      sum = gpu_fadd(sum, term(r * channels + c, r));
  }
  lane_sum[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  for (int half = BIAS_GRAD_LANES / 2; half > 0; half /= 2) {
    if ((int)threadIdx.y < half)
      lane_sum[threadIdx.y][threadIdx.x] = gpu_fadd(lane_sum[threadIdx.y][threadIdx.x],
                                                    lane_sum[threadIdx.y + half][threadIdx.x]);
    __syncthreads();
  }
  if (threadIdx.y == 0 && c < channels)
    gpu_store(&partial[(int64_t)blockIdx.y * channels + c], lane_sum[0][threadIdx.x]);
}

/* Pass 1, NCHW: partial[chunk * C + c] = channel c of the chunk's images summed. The
 * thread walks j = t, t + 256, ... over the chunk's (image, h * w) elements, keeping
 * (image, position in the plane) by subtraction instead of dividing; term(offset,
 * image * plane + position) as in the rows kernel. */
template <typename Term, typename I, typename O>
__global__ void __launch_bounds__(BIAS_GRAD_THREADS)
    bias_grad_planes_kernel(O *partial, Term term, I images, I channels, I plane,
                            I images_per_chunk) {
  __shared__ float thread_sum[BIAS_GRAD_THREADS];
  const I c = (I)blockIdx.x;
  const I first_image = (I)blockIdx.y * images_per_chunk;
  const I chunk_images = images - first_image < images_per_chunk ? images - first_image
                                                                 : images_per_chunk;
  I image = first_image, at = (I)threadIdx.x; /* element j = (image - first_image) * plane + at */
  while (at >= plane && image < first_image + chunk_images) {
    at -= plane;
    image++;
  }
  float sum = 0.0f;
  while (image < first_image + chunk_images) {
    sum = gpu_fadd(sum, term((image * channels + c) * plane + at, image * plane + at));
    at += BIAS_GRAD_THREADS;
    while (at >= plane && image < first_image + chunk_images) {
      at -= plane;
      image++;
    }
  }
  thread_sum[threadIdx.x] = sum;
  __syncthreads();
  for (int half = BIAS_GRAD_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      thread_sum[threadIdx.x] = gpu_fadd(thread_sum[threadIdx.x], thread_sum[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) gpu_store(&partial[(int64_t)blockIdx.y * channels + c], thread_sum[0]);
}

/* Pass 2: db[c] = partial[0][c] + partial[1][c] + ... in chunk order (0 when there are
 * no chunks). Threads of a warp read neighbouring channels of one chunk: coalesced. */
__global__ void bias_grad_chunks_kernel(float *db, const float *partial, int64_t chunks,
                                        int64_t channels) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float sum = 0.0f;
  GPU_UNROLL(8)
  for (int64_t k = 0; k < chunks; k++) sum = gpu_fadd(sum, partial[k * channels + c]);
  db[c] = sum;
}

/* ---- the terms the channel sums add up: element (offset `at`, position p = (n * H + h)
 * * W + w) of each channel ----------------------------------------------------------------- */

/* The bias gradient and layer norm's offset gradient: dy. */
template <typename T>
struct dy_term {
  const T *dy;
  template <typename I>
  __device__ float operator()(I at, I) const {
    return gpu_load(&dy[at]);
  }
};

/* channel_scale's scale gradient and multiply's per-image gate gradient: dy * x. */
template <typename T>
struct dot_term {
  const T *dy, *x;
  template <typename I>
  __device__ float operator()(I at, I) const {
    return gpu_fmul(gpu_load(&dy[at]), gpu_load(&x[at]));
  }
};

/* layer norm's scale gradient: dy * x^, x^ = (x - mean[p]) * inv_std[p] as the forward
 * formed it. */
template <typename T>
struct layer_norm_term {
  const T *dy, *x;
  const float *mean, *inv_std;
  template <typename I>
  __device__ float operator()(I at, I p) const {
    return gpu_fmul(gpu_load(&dy[at]), gpu_layer_norm_xhat(gpu_load(&x[at]), mean[p], inv_std[p]));
  }
};

/* ---- products and layer norm (ABI 1.14) -------------------------------------------------
 *
 * multiply: y = x * gate, the gate of x's size or one value per image and channel
 * ([N, C, 1, 1], the same bytes in either layout), gate[gpu_image_channel_of(i)];
 * channel_scale: y = x * scale[c], the fp32 param. Their input gradients are the same
 * kernels on dy; the gate's and the scale's gradients are channel sums of dy * x
 * (dot_term): per image for the gate (pass 1 alone, one chunk per image), over the batch
 * for the scale (both passes).
 *
 * layer norm: one thread per position (n, h, w) walks its C channels (NCHW: H * W
 * apart, so a warp's loads of one channel are neighbours; NHWC: contiguous): the mean,
 * then the biased variance of the centred values (two passes over x, in fp32), then
 * y = (x - mean) * inv_std * scale[c] + offset[c]. Training keeps mean and inv_std per
 * position for the backward, whose dx needs the position's sums of g = dy * scale[c]
 * and g * x^:
 *   dx = inv_std / C * (C g - sum g - x^ sum g x^)
 * and whose scale and offset gradients are channel sums of dy * x^ and dy (two passes
 * each, in a fixed order: the same bits on every run). */
template <typename T>
__global__ void multiply_kernel(T *y, const T *x, const T *gate, int64_t n, gpu_dims dims,
                                int32_t gate_per_channel) {
  GPU_GRID_STRIDE(i, n) {
    const int64_t k = gate_per_channel ? gpu_image_channel_of(dims.nhwc, dims.c, dims.h, dims.w, i)
                                       : i;
    gpu_store(&y[i], gpu_fmul(gpu_load(&x[i]), gpu_load(&gate[k])));
  }
}

template <typename T>
__global__ void channel_scale_kernel(T *y, const T *x, const float *scale, int64_t n,
                                     gpu_dims dims) {
  GPU_GRID_STRIDE(i, n) {
    const float s = scale[gpu_channel_of(dims.nhwc, dims.c, dims.h, dims.w, i)];
    gpu_store(&y[i], gpu_fmul(gpu_load(&x[i]), s));
  }
}

/* Position p's channel 0 and the distance between its channels. */
static __device__ __forceinline__ void position_at(gpu_dims dims, int64_t p, int64_t *base,
                                                   int64_t *stride) {
  if (dims.nhwc) {
    *base = p * dims.c;
    *stride = 1;
  } else {
    const int64_t plane = (int64_t)dims.h * dims.w, n = p / plane;
    *base = n * dims.c * plane + (p - n * plane);
    *stride = plane;
  }
}

template <typename T>
__global__ void layer_norm_kernel(T *y, const T *x, const float *scale, const float *offset,
                                  float epsilon, float *mean_out, float *inv_std_out,
                                  int64_t positions, gpu_dims dims) {
  GPU_GRID_STRIDE(p, positions) {
    int64_t base, stride;
    position_at(dims, p, &base, &stride);
    const int32_t channels = dims.c;
    float sum = 0.0f;
    for (int32_t c = 0; c < channels; c++) sum += gpu_load(&x[base + c * stride]);
    const float mean = sum / (float)channels;
    float squares = 0.0f;
    for (int32_t c = 0; c < channels; c++) {
      const float d = gpu_load(&x[base + c * stride]) - mean;
      squares += d * d;
    }
    const float inv_std = gpu_layer_norm_inv_std(squares / (float)channels, epsilon);
    if (mean_out) {
      mean_out[p] = mean;
      inv_std_out[p] = inv_std;
    }
    for (int32_t c = 0; c < channels; c++) {
      const int64_t at = base + c * stride;
      const float xhat = gpu_layer_norm_xhat(gpu_load(&x[at]), mean, inv_std);
      gpu_store(&y[at], xhat * scale[c] + offset[c]);
    }
  }
}

/* dx may alias dy: each position's elements are read (both loops) by the thread that
 * writes them, each before it is written. */
template <typename T>
__global__ void layer_norm_backward_kernel(T *dx, const T *dy, const T *x, const float *scale,
                                           const float *mean, const float *inv_std,
                                           int64_t positions, gpu_dims dims) {
  GPU_GRID_STRIDE(p, positions) {
    int64_t base, stride;
    position_at(dims, p, &base, &stride);
    const int32_t channels = dims.c;
    const float mu = mean[p], inv = inv_std[p];
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
    for (int32_t c = 0; c < channels; c++) {
      const int64_t at = base + c * stride;
      const float g = gpu_load(&dy[at]) * scale[c];
      sum_g += g;
      sum_g_xhat += g * gpu_layer_norm_xhat(gpu_load(&x[at]), mu, inv);
    }
    const float k = inv / (float)channels;
    for (int32_t c = 0; c < channels; c++) {
      const int64_t at = base + c * stride;
      const float g = gpu_load(&dy[at]) * scale[c];
      const float xhat = gpu_layer_norm_xhat(gpu_load(&x[at]), mu, inv);
      gpu_store(&dx[at], k * ((float)channels * g - sum_g - xhat * sum_g_xhat));
    }
  }
}

__global__ void image_probe_kernel() {}

} // namespace

extern "C" cudaError_t gpu_k_image_check(void) {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, image_probe_kernel);
}

extern "C" cudaError_t gpu_k_relu(void *y, const void *x, gpu_dtype type, int64_t n,
                                  cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(relu_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu_backward(void *dx, const void *dy, const void *y, gpu_dtype type,
                                           int64_t n, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(relu_backward_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dx,
               (const T *)dy, (const T *)y, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_add_backward(void *ga, void *gb, const void *dy, const void *y,
                                          gpu_dtype type, int64_t n, cudaStream_t stream) {
  if (n <= 0 || (!ga && !gb)) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(add_backward_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)ga, (T *)gb,
               (const T *)dy, (const T *)y, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu6(void *y, const void *x, gpu_dtype type, int64_t n,
                                   cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(relu6_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_relu6_backward(void *dx, const void *dy, const void *y, gpu_dtype type,
                                            int64_t n, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(relu6_backward_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dx,
               (const T *)dy, (const T *)y, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_act(void *y, const void *x, int32_t act, gpu_dtype type, int64_t n,
                                 cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(act_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x, act, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_act_backward(void *dx, const void *dy, const void *v, int32_t act,
                                          gpu_dtype type, int64_t n, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(act_backward_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dx,
               (const T *)dy, (const T *)v, act, n);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_add(void *y, const void *a, const void *b, gpu_dtype type, int64_t n,
                                 int32_t relu, cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(add_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)a,
               (const T *)b, n, relu);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_accumulate(void *dst, const void *src, gpu_dtype type, int64_t n,
                                        cudaStream_t stream) {
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(accumulate_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)dst,
               (const T *)src, n);
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
    GPU_LAUNCH(dropout_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x, n,
               key, threshold, scale);
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

extern "C" cudaError_t gpu_k_sample_dropout(void *y, const void *x, gpu_dtype type, int64_t n,
                                            int64_t per_sample, float keep_prob, uint32_t seed,
                                            uint64_t step, cudaStream_t stream) {
  if (!(keep_prob >= 0.0f && keep_prob <= 1.0f) || per_sample <= 0) return cudaErrorInvalidValue;
  if (n <= 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  const uint64_t key = gpu_dropout_key(seed, step);
  const uint64_t threshold = gpu_dropout_threshold(keep_prob);
  const float scale = keep_prob > 0.0f ? 1.0f / keep_prob : 0.0f;
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(sample_dropout_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y,
               (const T *)x, n, per_sample, key, threshold, scale);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_bias_relu(void *y, gpu_dims dims, gpu_dtype type, const float *bias,
                                       int32_t relu, cudaStream_t stream) {
  const int64_t n = (int64_t)dims.n * dims.c * dims.h * dims.w;
  if (n <= 0 || (!bias && !relu))
    return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(bias_relu_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, n, dims, bias,
               relu);
    return cudaGetLastError();
  });
}

extern "C" size_t gpu_k_bias_grad_scratch_bytes(gpu_dims dims) {
  const bias_grad_plan_t p = bias_grad_plan(dims);
  return (size_t)p.chunks * (size_t)(dims.c > 0 ? dims.c : 0) * sizeof(float);
}

/* Pass 1 in the index type I for the layout of dims: one partial sum of term per
 * (chunk, channel) into partial. */
template <typename O, typename I, typename Term>
static cudaError_t channel_sum_pass1(O *partial, Term term, gpu_dims dims, bias_grad_plan_t p,
                                     cudaStream_t stream) {
  if (dims.nhwc) {
    const dim3 grid((unsigned)ceil_div(dims.c, BIAS_GRAD_TILE), (unsigned)p.chunks);
    const dim3 block(BIAS_GRAD_TILE, BIAS_GRAD_LANES);
    GPU_LAUNCH_BARRIERS((bias_grad_rows_kernel<Term, I, O>), grid, block, 0, stream, partial, term,
                        (I)((int64_t)dims.n * dims.h * dims.w), (I)dims.c, (I)p.per_chunk);
  } else {
    const dim3 grid((unsigned)dims.c, (unsigned)p.chunks);
    GPU_LAUNCH_BARRIERS((bias_grad_planes_kernel<Term, I, O>), grid, BIAS_GRAD_THREADS, 0, stream,
                        partial, term, (I)dims.n, (I)dims.c, (I)((int64_t)dims.h * dims.w),
                        (I)p.per_chunk);
  }
  return cudaGetLastError();
}

/* 32-bit indices when every offset (< count) and every loop index, which runs at most
 * one stride past its last value (a row index by BIAS_GRAD_LANES <= count + 8, a plane
 * position by BIAS_GRAD_THREADS <= H * W + 256), stays below 2^31. */
static bool small_indices(gpu_dims dims) {
  return (int64_t)dims.n * dims.c * dims.h * dims.w + BIAS_GRAD_THREADS <= INT32_MAX;
}

/* db[c] = the sum of term over channel c's elements: pass 1 into scratch, pass 2 into db
 * (dims checked by the caller, C > 0). */
template <typename Term>
static cudaError_t channel_sum(float *db, Term term, gpu_dims dims, float *scratch,
                               cudaStream_t stream) {
  const bias_grad_plan_t p = bias_grad_plan(dims);
  if (p.chunks > 0 && !scratch) return cudaErrorInvalidValue;
  /* C channels of zero elements (N, H or W zero): no pass 1, and pass 2 writes 0. */
  if (p.chunks > 0) {
    cudaError_t e = small_indices(dims)
                        ? channel_sum_pass1<float, int32_t>(scratch, term, dims, p, stream)
                        : channel_sum_pass1<float, int64_t>(scratch, term, dims, p, stream);
    if (e != cudaSuccess) return e;
  }
  GPU_LAUNCH(bias_grad_chunks_kernel, (unsigned)ceil_div(dims.c, BIAS_GRAD_THREADS),
             BIAS_GRAD_THREADS, 0, stream, db, scratch, p.chunks, dims.c);
  return cudaGetLastError();
}

static bool dims_valid(gpu_dims dims) {
  return dims.n >= 0 && dims.c >= 0 && dims.h >= 0 && dims.w >= 0;
}

extern "C" cudaError_t gpu_k_bias_grad(float *db, const void *dy, gpu_dims dims, gpu_dtype type,
                                       float *scratch, cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  if (dims.c == 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    return channel_sum(db, dy_term<T>{(const T *)dy}, dims, scratch, stream);
  });
}

/* ---- products (ABI 1.14) -------------------------------------------------------------- */

extern "C" cudaError_t gpu_k_multiply(void *y, const void *x, const void *gate,
                                      int32_t gate_per_channel, gpu_dims dims, gpu_dtype type,
                                      cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t n = (int64_t)dims.n * dims.c * dims.h * dims.w;
  if (n == 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(multiply_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x,
               (const T *)gate, n, dims, gate_per_channel);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_multiply_gate_grad(void *dgate, const void *dy, const void *x,
                                                gpu_dims dims, gpu_dtype type,
                                                cudaStream_t stream) {
  if (!dims_valid(dims) || dims.n > 65535) return cudaErrorInvalidValue;
  if (dims.n == 0 || dims.c == 0)
    return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  /* Pass 1 alone, one chunk per image: rows [n * H * W, (n + 1) * H * W) (NHWC) or image
   * n's planes (NCHW), summed straight into dgate[n * C + c] in the activation type. */
  const bias_grad_plan_t p = {dims.n, dims.nhwc ? (int64_t)dims.h * dims.w : 1};
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    const dot_term<T> term = {(const T *)dy, (const T *)x};
    return small_indices(dims) ? channel_sum_pass1<T, int32_t>((T *)dgate, term, dims, p, stream)
                               : channel_sum_pass1<T, int64_t>((T *)dgate, term, dims, p, stream);
  });
}

extern "C" cudaError_t gpu_k_channel_scale(void *y, const void *x, const float *scale,
                                           gpu_dims dims, gpu_dtype type, cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t n = (int64_t)dims.n * dims.c * dims.h * dims.w;
  if (n == 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(channel_scale_kernel<T>, gpu_blocks(n), GPU_THREADS, 0, stream, (T *)y, (const T *)x,
               scale, n, dims);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_channel_dot(float *dscale, const void *dy, const void *x,
                                         gpu_dims dims, gpu_dtype type, float *scratch,
                                         cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  if (dims.c == 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    return channel_sum(dscale, dot_term<T>{(const T *)dy, (const T *)x}, dims, scratch, stream);
  });
}

/* ---- layer norm (ABI 1.14) ------------------------------------------------------------ */

extern "C" cudaError_t gpu_k_layer_norm(void *y, const void *x, const float *scale,
                                        const float *offset, float epsilon, float *mean,
                                        float *inv_std, gpu_dims dims, gpu_dtype type,
                                        cudaStream_t stream) {
  if (!dims_valid(dims) || !(epsilon > 0.0f) || (!mean != !inv_std)) return cudaErrorInvalidValue;
  const int64_t positions = (int64_t)dims.n * dims.h * dims.w;
  if (positions == 0 || dims.c == 0)
    return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    GPU_LAUNCH(layer_norm_kernel<T>, gpu_blocks(positions), GPU_THREADS, 0, stream, (T *)y,
               (const T *)x, scale, offset, epsilon, mean, inv_std, positions, dims);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t gpu_k_layer_norm_backward(void *dx, float *dscale, float *doffset,
                                                 const void *dy, const void *x, const float *scale,
                                                 const float *mean, const float *inv_std,
                                                 gpu_dims dims, gpu_dtype type, float *scratch,
                                                 cudaStream_t stream) {
  if (!dims_valid(dims)) return cudaErrorInvalidValue;
  const int64_t positions = (int64_t)dims.n * dims.h * dims.w;
  if (dims.c == 0) return gpu_dispatch_float(type, [&](auto) { return cudaSuccess; });
  return gpu_dispatch_float(type, [&](auto tag) {
    using T = decltype(tag);
    cudaError_t e = cudaSuccess;
    if (dscale)
      e = channel_sum(dscale, layer_norm_term<T>{(const T *)dy, (const T *)x, mean, inv_std}, dims,
                      scratch, stream);
    if (e == cudaSuccess && doffset)
      e = channel_sum(doffset, dy_term<T>{(const T *)dy}, dims, scratch, stream);
    if (e != cudaSuccess || !dx || positions == 0) return e;
    GPU_LAUNCH(layer_norm_backward_kernel<T>, gpu_blocks(positions), GPU_THREADS, 0, stream,
               (T *)dx, (const T *)dy, (const T *)x, scale, mean, inv_std, positions, dims);
    return cudaGetLastError();
  });
}
